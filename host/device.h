/* device.h — what --device asks for, and the devices a run holds.
 *
 * --device (or, when it is not given, the model plugin's preferred_device;
 * the cpu when neither says) is one of
 *   cpu                       the CPU
 *   cuda, cuda:N              GPU 0, GPU N
 *   cuda:N,M,...              those GPUs, driven together (as parallel)
 *   auto                      the free GPU with the most free memory; on a
 *                             machine without GPUs, the cpu, with a note
 *   parallel                  every GPU of the machine, from one process
 *   distributed_dataparallel  one device per MPI rank: GPU (local rank mod
 *                             GPUs), or the cpu on a machine without GPUs
 *
 * A GPU is held by one run at a time: allocating it takes an flock on
 * <lock dir>/scorch-device-cuda-<N>.lock, which records the holder's PID
 * and run directory, for the run's lifetime (the kernel drops it when the
 * process ends, however it ends). A run asking for a held GPU is refused
 * with the holder's PID and run directory; auto passes held GPUs over.
 * The CPU is never locked: runs on one machine may share its cores.
 *
 * Thread rule: the training thread, at set-up and tear-down.
 */
#ifndef SCORCH_HOST_DEVICE_H
#define SCORCH_HOST_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "scorch/tensor.h"

enum { SC_MAX_DEVICES = 16 };

/* Where run locks live. */
#define SC_DEVICE_LOCK_DIR "/tmp"

typedef enum sc_device_mode {
    SC_DEVICES_CPU,
    SC_DEVICES_CUDA,     /* the GPUs listed */
    SC_DEVICES_AUTO,
    SC_DEVICES_PARALLEL,
    SC_DEVICES_DDP,      /* distributed_dataparallel */
} sc_device_mode;

typedef struct sc_device_request {
    sc_device_mode mode;
    int n;                     /* SC_DEVICES_CUDA: GPUs listed, in order */
    int index[SC_MAX_DEVICES];
} sc_device_request;

/* Parses --device text; an error says what is wrong with it. */
sc_status sc_device_parse(const char *text, sc_device_request *out);

/* The GPUs this build can drive on this machine. */
typedef struct sc_gpu_inventory {
    bool backend;                     /* the build has a GPU backend */
    int count;
    int64_t free_bytes[SC_MAX_DEVICES];
} sc_gpu_inventory;

/* Asks libscorch's GPU backend (none in a build without nvcc). */
void sc_gpu_inventory_probe(sc_gpu_inventory *out);

/* Where a run allocates: the lock directory, who it is (recorded in the
 * locks) and which GPUs the machine has. */
typedef struct sc_device_env {
    const char *lock_dir;
    const char *holder;   /* the run directory, or what the run is */
    int local_rank;       /* distributed_dataparallel: this rank on its node */
    const sc_gpu_inventory *gpus;
} sc_device_env;

/* The devices a run holds. */
typedef struct sc_device_set {
    sc_device device;                 /* where this process computes */
    int n;                            /* GPUs held (0 on the cpu) */
    sc_device held[SC_MAX_DEVICES];
    int lock_fd[SC_MAX_DEVICES];
    char note[160];                   /* a choice worth telling, or "" */
} sc_device_set;

/* Resolves `text` (already parsed by the config; `source` names where it
 * came from in messages: "--device" or the model's file) and locks the
 * GPUs it names. On an error nothing is held. */
sc_status sc_device_allocate(const char *text, const char *source, const sc_device_env *env,
                             sc_device_set *out);

/* Records a new holder (the run directory, once it is known) in every
 * lock of set. */
void sc_device_set_holder(const sc_device_set *set, const char *holder);

/* Drops every lock; a zeroed set is fine. */
void sc_device_release(sc_device_set *set);

/* Locks GPU `index` for holder, or fails naming the run that holds it;
 * *fd keeps the lock until closed. */
sc_status sc_device_lock(const char *dir, int index, const char *holder, int *fd);

#endif
