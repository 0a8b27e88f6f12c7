/* device.c — --device's notation, the choice of GPUs, and their locks. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "base/device.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "scorch/device.h"

/* ---- parsing ---- */

static const struct {
    const char *name;
    host_device_mode mode;
} named_modes[] = {
    {"cpu", HOST_DEVICES_CPU},
    {"auto", HOST_DEVICES_AUTO},
    {"parallel", HOST_DEVICES_PARALLEL},
    {"dataparallel", HOST_DEVICES_PARALLEL}, /* the seeds' name (PyTorch's DataParallel) */
    {"distributed_dataparallel", HOST_DEVICES_DDP},
};

/* "0,2,3" into out->index. */
static sc_status parse_gpu_list(const char *text, const char *list, host_device_request *out)
{
    for (const char *p = list;;) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || (*p < '0' || *p > '9') || errno || v > 1023)
            return sc_error_set(SC_ERR_INVALID, "'%s': expected a GPU number at '%s'", text, p);
        if (out->n == HOST_MAX_DEVICES)
            return sc_error_set(SC_ERR_INVALID, "'%s' lists more than %d GPUs", text,
                                HOST_MAX_DEVICES);
        for (int i = 0; i < out->n; i++)
            if (out->index[i] == (int)v)
                return sc_error_set(SC_ERR_INVALID, "'%s' lists GPU %ld twice", text, v);
        out->index[out->n++] = (int)v;
        if (!*end)
            return SC_OK;
        if (*end != ',')
            return sc_error_set(SC_ERR_INVALID, "'%s': expected ',' at '%s'", text, end);
        p = end + 1;
    }
}

sc_status host_device_parse(const char *text, host_device_request *out)
{
    *out = (host_device_request){0};
    for (size_t i = 0; i < sizeof named_modes / sizeof named_modes[0]; i++)
        if (strcmp(text, named_modes[i].name) == 0) {
            out->mode = named_modes[i].mode;
            return SC_OK;
        }
    out->mode = HOST_DEVICES_CUDA;
    if (strcmp(text, "cuda") == 0) {
        out->n = 1; /* GPU 0 */
        return SC_OK;
    }
    if (strncmp(text, "cuda:", 5) == 0)
        return parse_gpu_list(text, text + 5, out);
    return sc_error_set(SC_ERR_INVALID,
                        "'%s' is not a device (cpu, cuda, cuda:N, cuda:N,M,..., auto, parallel "
                        "(or dataparallel) or distributed_dataparallel)",
                        text);
}

/* ---- the machine ---- */

int host_cpu_cores(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online > 0 ? (int)online : 1;
}

/* Each op's OpenMP loop or GEMM is a parallel region that ends when its
 * slowest thread does. On a machine busy with other work one of them is
 * often off its core, and the region waits a scheduler slice (milliseconds)
 * for it; a small model's step is dozens of regions of tens of
 * microseconds, so it crawls. On 2 cores kept busy by two other processes,
 * 2 threads trained 100x slower than 1 at 9 MFLOPs forward per batch, 22x
 * at 13M, 8x for the shipped mlp (60M), 6x at 340M and 1.8x for the cnn
 * (1.1G); on an idle machine the second thread gains the mlp only ~1.3x
 * (96k -> 122k samples/s). Below half a GFLOP, a step that one core does
 * in some 20-40 ms, one thread loses little and risks nothing; above it,
 * the cores pay. docs/cli.md (Threads) has the table. */
int host_threads_for_model(double batch_flops, int cores)
{
    return batch_flops < HOST_ONE_THREAD_FLOPS || cores < 1 ? 1 : cores;
}

void host_gpu_inventory_probe(host_gpu_inventory *out)
{
    *out = (host_gpu_inventory){.backend = sc_cuda_built()};
    int count = sc_cuda_device_count();
    out->count = count < HOST_MAX_DEVICES ? count : HOST_MAX_DEVICES;
    for (int i = 0; i < out->count; i++)
        out->free_bytes[i] = HOST_GPU_FREE_UNREAD;
}

/* Each GPU's free memory: the inventory's, or read now (0 where NVML
 * cannot tell, which leaves auto the first free GPU). */
static void free_memory(const host_gpu_inventory *gpus, int64_t *free_bytes)
{
    for (int i = 0; i < gpus->count && i < HOST_MAX_DEVICES; i++) {
        sc_device_info info;
        if (gpus->free_bytes[i] != HOST_GPU_FREE_UNREAD)
            free_bytes[i] = gpus->free_bytes[i];
        else
            free_bytes[i] = sc_cuda_device_info(i, &info) == SC_OK ? (int64_t)info.free_bytes : 0;
    }
}

/* ---- locks ---- */

static void lock_path(const char *dir, int index, char *buf, size_t size)
{
    snprintf(buf, size, "%s/scorch-device-cuda-%d.lock", dir, index);
}

static void write_holder(int fd, const char *holder)
{
    char text[4200];
    int n = snprintf(text, sizeof text, "pid %ld\nrun_dir %s\n", (long)getpid(), holder);
    if (n > (int)sizeof text - 1)
        n = (int)sizeof text - 1;
    /* Best effort: the record only explains a refusal; the flock is the lock. */
    bool written = ftruncate(fd, 0) == 0 && pwrite(fd, text, (size_t)n, 0) == n;
    (void)written;
}

/* "PID 1234, run dir runs/x" from a held lock's record. */
static void read_holder(const char *path, char *buf, size_t size)
{
    char text[4200] = "";
    long pid = 0;
    FILE *f = fopen(path, "r");
    if (f) {
        text[fread(text, 1, sizeof text - 1, f)] = '\0';
        fclose(f);
    }
    char *dir = strstr(text, "run_dir ");
    if (dir) {
        dir += 8;
        dir[strcspn(dir, "\n")] = '\0';
    }
    if (sscanf(text, "pid %ld", &pid) == 1)
        snprintf(buf, size, "PID %ld, run dir %s", pid, dir ? dir : "unknown");
    else
        snprintf(buf, size, "a process that has not written %s yet", path);
}

sc_status host_device_lock(const char *dir, int index, const char *holder, int *fd)
{
    char path[4096];
    lock_path(dir, index, path, sizeof path);
    *fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (*fd < 0)
        return sc_error_set(SC_ERR_IO, "cannot open the lock of cuda:%d, %s: %s", index, path,
                            strerror(errno));
    if (flock(*fd, LOCK_EX | LOCK_NB) == 0) {
        write_holder(*fd, holder);
        return SC_OK;
    }
    int err = errno;
    close(*fd);
    *fd = -1;
    if (err != EWOULDBLOCK)
        return sc_error_set(SC_ERR_IO, "cannot lock cuda:%d (%s): %s", index, path,
                            strerror(err));
    char who[4200];
    read_holder(path, who, sizeof who);
    return sc_error_set(SC_ERR_STATE,
                        "cuda:%d is held by another run (%s); wait for it to end or choose "
                        "another device",
                        index, who);
}

/* ---- replicas ---- */

sc_status host_device_replicas(const char *text, const char *source, int requested,
                             const host_gpu_inventory *gpus, int *replicas)
{
    host_device_request req;
    sc_status st = host_device_parse(text, &req);
    if (st != SC_OK)
        return sc_error_wrap(st, "%s", source);
    int gpu_count = req.mode == HOST_DEVICES_PARALLEL ? gpus->count
                    : req.mode == HOST_DEVICES_CUDA   ? req.n
                                                    : 1;
    *replicas = requested > 0 ? requested : gpu_count;
    switch (req.mode) {
    case HOST_DEVICES_CPU: return SC_OK;
    case HOST_DEVICES_PARALLEL:
        if (gpus->count == 0)
            return sc_error_set(SC_ERR_UNSUPPORTED, "%s %s: %s; for replicas on the cpu use "
                                "--device cpu --replicas N",
                                source, text,
                                gpus->backend ? "no GPU found" : "this build has no CUDA backend");
        if (*replicas > gpus->count)
            return sc_error_set(SC_ERR_INVALID, "--replicas %d with %s %s: this machine has %d "
                                "GPU%s, one per replica", *replicas, source, text, gpus->count,
                                gpus->count == 1 ? "" : "s");
        return SC_OK;
    case HOST_DEVICES_CUDA:
        if (*replicas != req.n)
            return sc_error_set(SC_ERR_INVALID, "--replicas %d with %s %s: one replica per "
                                "GPU, and %d GPU%s listed", *replicas, source, text, req.n,
                                req.n == 1 ? " is" : "s are");
        return SC_OK;
    case HOST_DEVICES_AUTO:
    case HOST_DEVICES_DDP:
        if (*replicas > 1)
            return sc_error_set(SC_ERR_INVALID, "--replicas %d with %s %s: that is one device "
                                "(replicas: --device cpu, parallel or cuda:N,M,...; more ranks: "
                                "mpirun with distributed_dataparallel)", *replicas, source, text);
        return SC_OK;
    }
    return SC_OK;
}

/* ---- allocation ---- */

static sc_status hold(host_device_set *set, const host_device_env *env, int index)
{
    SC_TRY(host_device_lock(env->lock_dir, index, env->holder, &set->lock_fd));
    set->device = (sc_device){SC_DEVICE_CUDA, index};
    set->n = 1;
    return SC_OK;
}

/* hold, with a refusal naming what asked for the GPU. */
static sc_status hold_asked(host_device_set *set, const host_device_env *env, int index,
                            const char *text, const char *source)
{
    sc_status st = hold(set, env, index);
    return st == SC_OK ? SC_OK : sc_error_wrap(st, "%s %s", source, text);
}

static sc_status no_gpu(const char *text, const char *source, const host_gpu_inventory *gpus)
{
    return sc_error_set(SC_ERR_UNSUPPORTED, "%s %s: %s; use --device cpu", source, text,
                        gpus->backend ? "no GPU found" : "this build has no CUDA backend");
}

/* Replica env->local_rank of a list: its GPU, once every GPU listed is
 * known to exist. */
static sc_status hold_listed(host_device_set *set, const host_device_request *req,
                             const host_device_env *env, const char *text, const char *source)
{
    for (int i = 0; i < req->n; i++)
        if (req->index[i] >= env->gpus->count)
            return sc_error_set(SC_ERR_INVALID, "%s %s: this machine has %d GPUs (cuda:0 to "
                                "cuda:%d)", source, text, env->gpus->count,
                                env->gpus->count - 1);
    return hold_asked(set, env, req->index[env->local_rank % req->n], text, source);
}

/* auto: the free GPU with the most free memory. When every GPU is held,
 * the error names the holder of the last one tried. */
static sc_status hold_best_free(host_device_set *set, const host_device_env *env, const char *text,
                                const char *source)
{
    const host_gpu_inventory *gpus = env->gpus;
    int64_t free_bytes[HOST_MAX_DEVICES];
    free_memory(gpus, free_bytes);
    bool tried[HOST_MAX_DEVICES] = {0};
    for (int n = 0; n < gpus->count && n < HOST_MAX_DEVICES; n++) {
        int best = -1;
        for (int i = 0; i < gpus->count && i < HOST_MAX_DEVICES; i++)
            if (!tried[i] && (best < 0 || free_bytes[i] > free_bytes[best]))
                best = i;
        tried[best] = true;
        sc_status st = hold(set, env, best);
        if (st != SC_ERR_STATE) /* held, or a failure other than "taken" */
            return st;
    }
    return sc_error_wrap(SC_ERR_STATE, "%s %s: no free GPU", source, text);
}

static sc_status allocate(const host_device_request *req, const char *text, const char *source,
                          const host_device_env *env, host_device_set *set)
{
    const host_gpu_inventory *gpus = env->gpus;
    switch (req->mode) {
    case HOST_DEVICES_CPU: return SC_OK;
    case HOST_DEVICES_AUTO:
        if (gpus->count == 0) {
            snprintf(set->note, sizeof set->note, "%s %s: %s; computing on the cpu", source,
                     text, gpus->backend ? "no GPU found" : "this build has no CUDA backend");
            return SC_OK;
        }
        return hold_best_free(set, env, text, source);
    case HOST_DEVICES_DDP:
    case HOST_DEVICES_PARALLEL:
        if (gpus->count == 0)
            return req->mode == HOST_DEVICES_DDP ? SC_OK : no_gpu(text, source, gpus);
        return hold_asked(set, env, env->local_rank % gpus->count, text, source);
    case HOST_DEVICES_CUDA:
        return gpus->count == 0 ? no_gpu(text, source, gpus)
                                : hold_listed(set, req, env, text, source);
    }
    return SC_OK;
}

sc_status host_device_allocate(const char *text, const char *source, const host_device_env *env,
                             host_device_set *out)
{
    *out = (host_device_set){.device = {SC_DEVICE_CPU, 0}, .lock_fd = -1};
    host_device_request req;
    sc_status st = host_device_parse(text, &req);
    if (st != SC_OK)
        return sc_error_wrap(st, "%s", source);
    st = allocate(&req, text, source, env, out);
    if (st != SC_OK) {
        host_device_release(out);
        return st;
    }
    return SC_OK;
}

void host_device_set_holder(const host_device_set *set, const char *holder)
{
    if (set->n)
        write_holder(set->lock_fd, holder);
}

void host_device_release(host_device_set *set)
{
    if (set->n)
        close(set->lock_fd);
    set->n = 0;
}
