/* runtime.c — the CUDA backend's device side: GPUs and their state,
 * device and pinned memory, copies, and graph capture (cuda_api.h,
 * cuda_impl.h, scorch/device.h). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda_impl.h"

enum { MAX_GPUS = 64 };

static sc_cuda_dev devices[MAX_GPUS];
static _Atomic bool device_ready[MAX_GPUS]; /* set once, under device_lock */
static pthread_mutex_t device_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- errors ---- */

/* Whether err, just returned, is sticky: one of the errors the CUDA docs
 * describe as leaving the process in an inconsistent state ("any further
 * CUDA work will return the same error": an illegal address, a kernel
 * that crashed), which cudaGetLastError cannot clear. A non-sticky error
 * is cleared, so that later calls start clean. */
static bool sticky(cudaError_t err)
{
    cudaGetLastError();
    return err != cudaSuccess && cudaPeekAtLastError() == err;
}

/* The sticky error the calling thread's GPU is in, or cudaSuccess: a
 * cuBLAS or cuDNN call that failed because of one leaves no error in this
 * runtime, so a call that needs the GPU's context (and does not wait)
 * asks. */
static cudaError_t context_error(void)
{
    size_t free_b, total_b;
    cudaError_t err = cudaMemGetInfo(&free_b, &total_b);
    return sticky(err) ? err : cudaSuccess;
}

/* A sticky error, noticed at `where`, which did not cause it. */
static sc_status sticky_error(cudaError_t err, const char *where, const char *file, int line)
{
    int index = -1;
    char gpu[32] = "the GPU";
    if (cudaGetDevice(&index) == cudaSuccess)
        snprintf(gpu, sizeof gpu, "cuda:%d", index);
    return sc_error_set(SC_ERR_STATE,
                        "CUDA: %s failed in earlier asynchronous work: %s. The error is "
                        "sticky (every later CUDA call of this process fails with it), so "
                        "the run cannot go on: start it again, from its last checkpoint. "
                        "Noticed at %s (%s:%d), which is not its cause; with "
                        "CUDA_LAUNCH_BLOCKING=1 the kernel that fails reports itself",
                        gpu, cudaGetErrorString(err), where, file, line);
}

sc_status sc_cuda_error(cudaError_t err, const char *call, const char *file, int line)
{
    if (sticky(err))
        return sticky_error(err, call, file, line);
    sc_status code = err == cudaErrorMemoryAllocation ? SC_ERR_NOMEM : SC_ERR_UNSUPPORTED;
    return sc_error_set(code, "CUDA: %s: %s (%s:%d)", cudaGetErrorString(err), call, file, line);
}

sc_status sc_cuda_launch_error(cudaError_t err, const char *kernel, const char *file, int line)
{
    char where[160];
    snprintf(where, sizeof where, "the launch of %s", kernel);
    if (sticky(err))
        return sticky_error(err, where, file, line);
    return sc_error_set(SC_ERR_UNSUPPORTED, "CUDA: cannot launch %s: %s (%s:%d)", kernel,
                        cudaGetErrorString(err), file, line);
}

sc_status sc_cublas_error(cublasStatus_t err, const char *call, const char *file, int line)
{
    cudaError_t cause = context_error();
    if (cause != cudaSuccess)
        return sticky_error(cause, call, file, line);
    sc_status code = err == CUBLAS_STATUS_ALLOC_FAILED ? SC_ERR_NOMEM : SC_ERR_UNSUPPORTED;
    return sc_error_set(code, "cuBLAS: %s: %s (%s:%d)", cublasGetStatusString(err), call, file,
                        line);
}

sc_status sc_cudnn_error(cudnnStatus_t err, const char *call, const char *file, int line)
{
    cudaError_t cause = context_error();
    if (cause != cudaSuccess)
        return sticky_error(cause, call, file, line);
    sc_status code = err == CUDNN_STATUS_ALLOC_FAILED ? SC_ERR_NOMEM : SC_ERR_UNSUPPORTED;
    return sc_error_set(code, "cuDNN: %s: %s (%s:%d)", cudnnGetErrorString(err), call, file,
                        line);
}

/* ---- GPUs ---- */

int sc_cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) { /* no driver, or no GPU */
        cudaGetLastError();
        return 0;
    }
    return n < MAX_GPUS ? n : MAX_GPUS;
}

/* Touches no context: GPUs other runs hold are asked about too (auto),
 * and a context would cost memory on each for as long as this process
 * lives. So the properties, and free memory from NVML (0 where NVML
 * cannot tell), never cudaSetDevice and cudaMemGetInfo. */
sc_status sc_cuda_device_info(int index, sc_device_info *out)
{
    *out = (sc_device_info){0};
    SC_TRY(sc_device_check((sc_device){SC_DEVICE_CUDA, index}));
    struct cudaDeviceProp prop;
    SC_CUDA_TRY(cudaGetDeviceProperties(&prop, index));
    snprintf(out->name, sizeof out->name, "%s", prop.name);
    out->cc_major = prop.major;
    out->cc_minor = prop.minor;
    out->total_bytes = prop.totalGlobalMem;
    if (sc_nvml_memory(index, &prop.uuid, &out->free_bytes, &out->total_bytes) != SC_OK)
        out->free_bytes = 0;
    return SC_OK;
}

/* Streams, library handles bound to the compute stream, and the shared
 * workspace. Called once per GPU, under device_lock. */
static sc_status device_init(sc_cuda_dev *d, int index)
{
    d->index = index;
    SC_CUDA_TRY(cudaStreamCreateWithFlags(&d->compute, cudaStreamNonBlocking));
    SC_CUDA_TRY(cudaStreamCreateWithFlags(&d->copy, cudaStreamNonBlocking));
    SC_CUDA_TRY(cudaEventCreateWithFlags(&d->computed, cudaEventDisableTiming));
    SC_CUDA_TRY(cudaEventCreateWithFlags(&d->uploaded, cudaEventDisableTiming));
    SC_CUDA_TRY(cudaEventCreateWithFlags(&d->read_out, cudaEventDisableTiming));
    SC_CUDA_TRY(cudaMalloc(&d->workspace, SC_CUDA_WORKSPACE_BYTES));
    SC_CUBLAS_TRY(cublasCreate(&d->cublas));
    SC_CUBLAS_TRY(cublasSetStream(d->cublas, d->compute));
    SC_CUBLAS_TRY(cublasSetWorkspace(d->cublas, d->workspace, SC_CUDA_WORKSPACE_BYTES));
    SC_CUDNN_TRY(cudnnCreate(&d->cudnn));
    SC_CUDNN_TRY(cudnnSetStream(d->cudnn, d->compute));
    return SC_OK;
}

sc_cuda_dev *sc_cuda_dev_get(int index)
{
    bool ready = index >= 0 && index < MAX_GPUS && device_ready[index];
    if (!ready && sc_device_check((sc_device){SC_DEVICE_CUDA, index}) != SC_OK)
        return NULL;
    cudaError_t err = cudaSetDevice(index);
    if (err != cudaSuccess) {
        sc_cuda_error(err, "cudaSetDevice", __FILE__, __LINE__);
        return NULL;
    }
    if (ready)
        return &devices[index];
    pthread_mutex_lock(&device_lock);
    sc_status st = SC_OK;
    if (!device_ready[index]) {
        st = device_init(&devices[index], index);
        if (st == SC_OK)
            device_ready[index] = true;
        else
            sc_error_wrap(st, "setting up cuda:%d", index);
    }
    pthread_mutex_unlock(&device_lock);
    return st == SC_OK ? &devices[index] : NULL;
}

sc_cuda_dev *sc_cuda_dev_enter(int index, sc_cuda_scope *scope)
{
    scope->index = index;
    if (cudaGetDevice(&scope->previous) != cudaSuccess)
        scope->previous = -1;
    return sc_cuda_dev_get(index);
}

/* A device scorch never set up is not made current again: that would
 * make a context on it (CUDA 12), and the thread used none. */
void sc_cuda_dev_leave(const sc_cuda_scope *scope)
{
    int p = scope->previous;
    if (p != scope->index && p >= 0 && p < MAX_GPUS && device_ready[p])
        cudaSetDevice(p);
}

sc_status sc_cuda_ctx_attach(sc_ctx *ctx, int index)
{
    ctx->cuda = sc_cuda_dev_get(index);
    return ctx->cuda ? SC_OK : sc_error_code();
}

void *sc_ctx_cuda_stream(const sc_ctx *ctx) { return ctx->cuda ? ctx->cuda->compute : NULL; }

sc_device_memory sc_device_memory_used(sc_device device)
{
    if (device.kind != SC_DEVICE_CUDA || device.index < 0 || device.index >= MAX_GPUS)
        return (sc_device_memory){0};
    pthread_mutex_lock(&device_lock);
    sc_device_memory m = {devices[device.index].allocated, devices[device.index].peak};
    pthread_mutex_unlock(&device_lock);
    return m;
}

/* ---- memory ---- */

static double mib(size_t bytes) { return (double)bytes / (1 << 20); }

/* bytes more of d's memory, or NULL with a message naming the sizes. */
static void *device_alloc(sc_cuda_dev *d, size_t bytes)
{
    void *p = NULL;
    cudaError_t err = cudaMalloc(&p, bytes);
    if (err != cudaSuccess) {
        if (sticky(err)) {
            sticky_error(err, "cudaMalloc", __FILE__, __LINE__);
            return NULL;
        }
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        sc_error_set(err == cudaErrorMemoryAllocation ? SC_ERR_NOMEM : SC_ERR_UNSUPPORTED,
                     "cuda:%d: cannot allocate %.1f MiB: %s (scorch holds %.1f MiB; "
                     "%.1f of %.1f MiB free)",
                     d->index, mib(bytes), cudaGetErrorString(err), mib(d->allocated),
                     mib(free_b), mib(total_b));
        return NULL;
    }
    pthread_mutex_lock(&device_lock);
    d->allocated += bytes;
    if (d->allocated > d->peak)
        d->peak = d->allocated;
    pthread_mutex_unlock(&device_lock);
    return p;
}

void *sc_cuda_malloc(int index, size_t bytes)
{
    sc_cuda_scope scope;
    sc_cuda_dev *d = sc_cuda_dev_enter(index, &scope);
    void *p = d ? device_alloc(d, bytes) : NULL;
    sc_cuda_dev_leave(&scope);
    return p;
}

void sc_cuda_free(int index, void *p, size_t bytes)
{
    if (!p || index < 0 || index >= MAX_GPUS || !device_ready[index])
        return;
    sc_cuda_scope scope;
    sc_cuda_dev_enter(index, &scope);
    cudaFree(p); /* waits for the kernels that may still use p */
    sc_cuda_dev_leave(&scope);
    pthread_mutex_lock(&device_lock);
    devices[index].allocated -= bytes;
    pthread_mutex_unlock(&device_lock);
}

void *sc_cuda_host_alloc(size_t bytes)
{
    void *p = NULL;
    cudaError_t err = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
    if (err != cudaSuccess) {
        cudaGetLastError();
        sc_error_set(SC_ERR_NOMEM, "cannot allocate %.1f MiB of pinned host memory: %s",
                     mib(bytes), cudaGetErrorString(err));
        return NULL;
    }
    return p;
}

void sc_cuda_host_free(void *p)
{
    if (p)
        cudaFreeHost(p);
}

/* ---- copies ---- */

/* Makes d's compute stream wait for the kernels queued so far on GPU
 * `index` (another GPU, whose memory a copy on d reads). */
static sc_status wait_for_gpu(sc_cuda_dev *d, int index)
{
    if (index < 0 || index >= MAX_GPUS || !device_ready[index])
        return sc_error_set(SC_ERR_INVALID, "copy from cuda:%d, which holds no memory of "
                            "scorch's", index);
    sc_cuda_dev *s = &devices[index];
    SC_CUDA_TRY(cudaEventRecord(s->read_out, s->compute));
    SC_CUDA_TRY(cudaStreamWaitEvent(d->compute, s->read_out, 0));
    return SC_OK;
}

/* On d's compute stream, so it follows the kernels that wrote src there,
 * and those of src's GPU when that is another; returns when it is done. */
static sc_status copy_on(sc_cuda_dev *d, void *dst, const void *src, sc_device src_dev,
                         size_t bytes)
{
    if (src_dev.kind == SC_DEVICE_CUDA && src_dev.index != d->index)
        SC_TRY(wait_for_gpu(d, src_dev.index));
    SC_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, d->compute));
    SC_CUDA_TRY(cudaStreamSynchronize(d->compute));
    return SC_OK;
}

/* Runs on the GPU the copy involves, the destination's when both are. */
sc_status sc_cuda_memcpy(void *dst, sc_device dst_dev, const void *src, sc_device src_dev,
                         size_t bytes)
{
    sc_cuda_scope scope;
    sc_cuda_dev *d =
        sc_cuda_dev_enter(dst_dev.kind == SC_DEVICE_CUDA ? dst_dev.index : src_dev.index, &scope);
    sc_status st = d ? copy_on(d, dst, src, src_dev, bytes) : sc_error_code();
    sc_cuda_dev_leave(&scope);
    return st;
}

/* ---- uploads and fences (a pipelined step) ---- */

struct sc_fence {
    cudaEvent_t event;
    int index; /* its GPU */
    bool set;  /* recorded at least once: waiting for it means something */
};

/* On d's copy stream after `after` (NULL: at once); `done` is recorded
 * behind the copy and d's compute stream waits for it. */
static sc_status queue_upload(sc_cuda_dev *d, void *dst, const void *src, size_t bytes,
                              cudaEvent_t after, cudaEvent_t done)
{
    if (after)
        SC_CUDA_TRY(cudaStreamWaitEvent(d->copy, after, 0));
    SC_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, d->copy));
    SC_CUDA_TRY(cudaEventRecord(done, d->copy));
    SC_CUDA_TRY(cudaStreamWaitEvent(d->compute, done, 0));
    return SC_OK;
}

/* The copy waits for the kernels queued before it (dst is arena memory an
 * earlier step's kernels may still read), and the kernels after it wait
 * for the copy. */
sc_status sc_cuda_upload(sc_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    sc_cuda_dev *d = ctx->cuda;
    SC_CUDA_TRY(cudaEventRecord(d->computed, d->compute));
    return queue_upload(d, dst, src, bytes, d->computed, d->uploaded);
}

/* dst is memory of its own whose readers `after` covers: the copy may run
 * beside the kernels queued before it. */
sc_status sc_cuda_upload_after(sc_ctx *ctx, void *dst, const void *src, size_t bytes,
                               sc_fence *after, sc_fence *done)
{
    sc_cuda_dev *d = ctx->cuda;
    SC_TRY(queue_upload(d, dst, src, bytes, after && after->set ? after->event : NULL,
                        done ? done->event : d->uploaded));
    if (done)
        done->set = true;
    return SC_OK;
}

sc_status sc_cuda_copy_async(sc_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    SC_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, ctx->cuda->compute));
    return SC_OK;
}

static sc_status fence_create(sc_fence *f)
{
    /* Blocking: a thread waiting for a step sleeps rather than spin beside
     * the loader's workers. */
    SC_CUDA_TRY(cudaEventCreateWithFlags(&f->event,
                                         cudaEventDisableTiming | cudaEventBlockingSync));
    return SC_OK;
}

sc_fence *sc_cuda_fence_new(int index)
{
    sc_fence *f = calloc(1, sizeof *f);
    if (!f) {
        sc_error_set(SC_ERR_NOMEM, "out of memory for a fence");
        return NULL;
    }
    f->index = index;
    sc_cuda_scope scope; /* the event belongs to the GPU current at its creation */
    sc_status st = sc_cuda_dev_enter(index, &scope) ? fence_create(f) : sc_error_code();
    sc_cuda_dev_leave(&scope);
    if (st != SC_OK) {
        free(f);
        return NULL;
    }
    return f;
}

void sc_cuda_fence_free(sc_fence *f)
{
    if (!f)
        return;
    cudaEventDestroy(f->event); /* a pending record completes all the same */
    free(f);
}

sc_status sc_cuda_fence_set(sc_ctx *ctx, sc_fence *f)
{
    SC_CUDA_TRY(cudaEventRecord(f->event, ctx->cuda->compute));
    f->set = true;
    return SC_OK;
}

/* Any thread: a loader's worker waits for the upload of the batch it is
 * about to overwrite, with the fence's GPU current (another would get a
 * context made for nothing). */
sc_status sc_cuda_fence_wait(sc_fence *f)
{
    if (!f->set)
        return SC_OK;
    sc_cuda_scope scope;
    sc_cuda_dev *d = sc_cuda_dev_enter(f->index, &scope);
    cudaError_t err = d ? cudaEventSynchronize(f->event) : cudaSuccess;
    sc_cuda_dev_leave(&scope);
    if (!d)
        return sc_error_code();
    SC_CUDA_TRY(err);
    return SC_OK;
}

sc_status sc_cuda_fence_passed(sc_fence *f, bool *passed)
{
    *passed = true;
    if (!f->set)
        return SC_OK;
    sc_cuda_scope scope;
    sc_cuda_dev *d = sc_cuda_dev_enter(f->index, &scope);
    cudaError_t err = d ? cudaEventQuery(f->event) : cudaSuccess;
    sc_cuda_dev_leave(&scope);
    if (!d)
        return sc_error_code();
    *passed = err != cudaErrorNotReady;
    if (!*passed)
        cudaGetLastError(); /* not an error: a later launch check must not see it */
    else
        SC_CUDA_TRY(err);
    return SC_OK;
}

static sc_status memset0_on(sc_cuda_dev *d, void *p, size_t bytes)
{
    SC_CUDA_TRY(cudaMemsetAsync(p, 0, bytes, d->compute));
    return SC_OK;
}

sc_status sc_cuda_memset0(int index, void *p, size_t bytes)
{
    sc_cuda_scope scope;
    sc_cuda_dev *d = sc_cuda_dev_enter(index, &scope);
    sc_status st = d ? memset0_on(d, p, bytes) : sc_error_code();
    sc_cuda_dev_leave(&scope);
    return st;
}

static sc_status synchronize_on(sc_cuda_dev *d)
{
    SC_CUDA_TRY(cudaStreamSynchronize(d->copy));
    SC_CUDA_TRY(cudaStreamSynchronize(d->compute));
    return SC_OK;
}

sc_status sc_cuda_synchronize(int index)
{
    sc_cuda_scope scope;
    sc_cuda_dev *d = sc_cuda_dev_enter(index, &scope);
    sc_status st = d ? synchronize_on(d) : sc_error_code();
    sc_cuda_dev_leave(&scope);
    return st;
}

/* ---- graphs ---- */

struct sc_graph {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    cudaStream_t stream;
    int index;
};

sc_status sc_cuda_capture_begin(sc_ctx *ctx)
{
    /* Thread-local: only this thread's calls that would wait for the GPU
     * break the capture; the loader's threads are left alone. */
    SC_CUDA_TRY(cudaStreamBeginCapture(ctx->cuda->compute, cudaStreamCaptureModeThreadLocal));
    return SC_OK;
}

sc_status sc_cuda_capture_end(sc_ctx *ctx, sc_graph **out)
{
    cudaGraph_t graph = NULL;
    cudaError_t err = cudaStreamEndCapture(ctx->cuda->compute, &graph);
    if (err != cudaSuccess || !graph) {
        cudaGetLastError();
        return sc_error_set(SC_ERR_UNSUPPORTED,
                            "CUDA graph capture failed: %s (something in the step waited for "
                            "the GPU, allocated memory or used another stream)",
                            cudaGetErrorString(err));
    }
    sc_graph *g = calloc(1, sizeof *g);
    if (!g) {
        cudaGraphDestroy(graph);
        return sc_error_set(SC_ERR_NOMEM, "out of memory for a CUDA graph");
    }
    *g = (sc_graph){graph, NULL, ctx->cuda->compute, ctx->device.index};
    err = cudaGraphInstantiate(&g->exec, graph, 0);
    if (err != cudaSuccess) {
        cudaGetLastError();
        sc_graph_free(g);
        return sc_error_set(SC_ERR_UNSUPPORTED, "CUDA graph instantiation failed: %s",
                            cudaGetErrorString(err));
    }
    *out = g;
    return SC_OK;
}

sc_status sc_graph_launch(sc_graph *g)
{
    SC_CUDA_TRY(cudaGraphLaunch(g->exec, g->stream));
    return SC_OK;
}

void sc_graph_free(sc_graph *g)
{
    if (!g)
        return;
    if (g->exec)
        cudaGraphExecDestroy(g->exec);
    cudaGraphDestroy(g->graph);
    free(g);
}
