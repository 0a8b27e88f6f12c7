/* device.h — what --device asks for, and the devices a run holds.
 *
 * --device (or, when it is not given, the model plugin's preferred_device;
 * the cpu when neither says) is one of
 *   cpu                       the CPU
 *   cuda, cuda:N              GPU 0, GPU N
 *   cuda:N,M,...              those GPUs, one replica on each (as parallel)
 *   auto                      the free GPU with the most free memory; on a
 *                             machine without GPUs, the cpu, with a note
 *   parallel                  every GPU of the machine, from one process: a
 *                             replica (a thread, dist.h) on each
 *   distributed_dataparallel  one device per MPI rank: GPU (local rank mod
 *                             GPUs), or the cpu on a machine without GPUs
 *
 * A process drives one or more replicas (host_device_replicas); each holds
 * one device: replica R of a list or of parallel the list's R-th GPU or
 * GPU R, every replica of cpu the CPU.
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

enum { HOST_MAX_DEVICES = 16 };

/* Where run locks live. */
#define HOST_DEVICE_LOCK_DIR "/tmp"

typedef enum host_device_mode {
    HOST_DEVICES_CPU,
    HOST_DEVICES_CUDA,     /* the GPUs listed */
    HOST_DEVICES_AUTO,
    HOST_DEVICES_PARALLEL,
    HOST_DEVICES_DDP,      /* distributed_dataparallel */
} host_device_mode;

typedef struct host_device_request {
    host_device_mode mode;
    int n;                     /* HOST_DEVICES_CUDA: GPUs listed, in order */
    int index[HOST_MAX_DEVICES];
} host_device_request;

/* Parses --device text; an error says what is wrong with it. */
sc_status host_device_parse(const char *text, host_device_request *out);

/* The cores this process may run on: its CPU affinity (under mpirun
 * --bind-to core, the rank's own), else every online core. */
int host_cpu_cores(void);

/* Below this much forward work per batch (FLOPs, as the model summary
 * counts them), --threads 0 computes on one thread; see device.c. */
#define HOST_ONE_THREAD_FLOPS 5e8

/* The compute threads --threads 0 gives a model whose forward pass of a
 * batch takes `batch_flops`: one below HOST_ONE_THREAD_FLOPS, else `cores`. */
int host_threads_for_model(double batch_flops, int cores);

/* The GPUs this build can drive on this machine. */
typedef struct host_gpu_inventory {
    bool backend;                       /* the build has a GPU backend */
    int count;
    int64_t free_bytes[HOST_MAX_DEVICES]; /* or HOST_GPU_FREE_UNREAD */
} host_gpu_inventory;

/* Free memory not read yet: auto reads it when it chooses. */
#define HOST_GPU_FREE_UNREAD ((int64_t)-1)

/* Asks libscorch's GPU backend (none in a build without nvcc) how many
 * GPUs there are, which makes no CUDA context on any; free memory is left
 * for auto, the one choice that compares it, to read then (through NVML,
 * which makes none either). A context is made only on the GPU a replica
 * holds, once it holds it. */
void host_gpu_inventory_probe(host_gpu_inventory *out);

/* How many replicas one process drives for `text`: `requested`
 * (--replicas) when > 0, else one per GPU of parallel (every GPU of
 * `gpus`) or of a GPU list, else 1. Refused, saying why: parallel without
 * GPUs, more replicas than GPUs, a count that differs from a list's, and
 * more than one replica of one GPU (cuda:N, auto) or of
 * distributed_dataparallel (one device per rank). */
sc_status host_device_replicas(const char *text, const char *source, int requested,
                             const host_gpu_inventory *gpus, int *replicas);

/* Where a replica or rank allocates: the lock directory, who it is
 * (recorded in the locks) and which GPUs the machine has. */
typedef struct host_device_env {
    const char *lock_dir;
    const char *holder;   /* the run directory, or what the run is */
    int local_rank;       /* this replica, or this MPI rank on its node */
    const host_gpu_inventory *gpus;
} host_device_env;

/* The device a replica or rank holds. */
typedef struct host_device_set {
    sc_device device;     /* where it computes */
    int n;                /* GPUs held: 0 on the cpu, else 1 (device) */
    int lock_fd;
    char note[160];       /* a choice worth telling, or "" */
} host_device_set;

/* Resolves `text` (already parsed by the config; `source` names where it
 * came from in messages: "--device" or the model's file) for the replica
 * or rank env->local_rank and locks the GPU it gets. On an error nothing
 * is held. */
sc_status host_device_allocate(const char *text, const char *source, const host_device_env *env,
                             host_device_set *out);

/* Records a new holder (the run directory, once it is known) in the
 * set's lock. */
void host_device_set_holder(const host_device_set *set, const char *holder);

/* Drops the lock; a zeroed set is fine. */
void host_device_release(host_device_set *set);

/* Locks GPU `index` for holder, or fails naming the run that holds it;
 * *fd keeps the lock until closed. */
sc_status host_device_lock(const char *dir, int index, const char *holder, int *fd);

#endif
