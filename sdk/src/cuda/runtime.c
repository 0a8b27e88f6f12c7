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

sc_status sc_cuda_error(cudaError_t err, const char *call, const char *file, int line)
{
    cudaGetLastError(); /* clear a non-sticky error so later calls start clean */
    sc_status code = err == cudaErrorMemoryAllocation ? SC_ERR_NOMEM : SC_ERR_UNSUPPORTED;
    return sc_error_set(code, "CUDA: %s: %s (%s:%d)", cudaGetErrorString(err), call, file, line);
}

sc_status sc_cublas_error(cublasStatus_t err, const char *call, const char *file, int line)
{
    sc_status code = err == CUBLAS_STATUS_ALLOC_FAILED ? SC_ERR_NOMEM : SC_ERR_UNSUPPORTED;
    return sc_error_set(code, "cuBLAS: %s: %s (%s:%d)", cublasGetStatusString(err), call, file,
                        line);
}

sc_status sc_cudnn_error(cudnnStatus_t err, const char *call, const char *file, int line)
{
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

sc_status sc_cuda_device_info(int index, sc_device_info *out)
{
    *out = (sc_device_info){0};
    SC_TRY(sc_device_check((sc_device){SC_DEVICE_CUDA, index}));
    struct cudaDeviceProp prop;
    SC_CUDA_TRY(cudaGetDeviceProperties(&prop, index));
    snprintf(out->name, sizeof out->name, "%s", prop.name);
    out->cc_major = prop.major;
    out->cc_minor = prop.minor;
    SC_CUDA_TRY(cudaSetDevice(index));
    SC_CUDA_TRY(cudaMemGetInfo(&out->free_bytes, &out->total_bytes));
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
    if (cudaSetDevice(index) != cudaSuccess) {
        sc_error_set(SC_ERR_UNSUPPORTED, "cuda:%d: cannot make it current: %s", index,
                     cudaGetErrorString(cudaGetLastError()));
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

void *sc_cuda_malloc(int index, size_t bytes)
{
    sc_cuda_dev *d = sc_cuda_dev_get(index);
    if (!d)
        return NULL;
    void *p = NULL;
    cudaError_t err = cudaMalloc(&p, bytes);
    if (err != cudaSuccess) {
        cudaGetLastError();
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        sc_error_set(err == cudaErrorMemoryAllocation ? SC_ERR_NOMEM : SC_ERR_UNSUPPORTED,
                     "cuda:%d: cannot allocate %.1f MiB: %s (scorch holds %.1f MiB; "
                     "%.1f of %.1f MiB free)",
                     index, mib(bytes), cudaGetErrorString(err), mib(d->allocated),
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

void sc_cuda_free(int index, void *p, size_t bytes)
{
    if (!p || index < 0 || index >= MAX_GPUS)
        return;
    cudaSetDevice(index);
    cudaFree(p); /* waits for the kernels that may still use p */
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

/* The GPU a copy involves (the destination's when both are GPUs). */
static sc_cuda_dev *copy_device(sc_device dst, sc_device src)
{
    return sc_cuda_dev_get(dst.kind == SC_DEVICE_CUDA ? dst.index : src.index);
}

sc_status sc_cuda_memcpy(void *dst, sc_device dst_dev, const void *src, sc_device src_dev,
                         size_t bytes)
{
    sc_cuda_dev *d = copy_device(dst_dev, src_dev);
    if (!d)
        return sc_error_code();
    /* On the compute stream, so it follows the kernels that wrote src. */
    SC_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, d->compute));
    SC_CUDA_TRY(cudaStreamSynchronize(d->compute));
    return SC_OK;
}

/* The copy waits for the kernels queued before it (dst is arena memory an
 * earlier step's kernels may still read), and the kernels after it wait
 * for the copy. */
sc_status sc_cuda_upload(sc_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    sc_cuda_dev *d = ctx->cuda;
    SC_CUDA_TRY(cudaEventRecord(d->computed, d->compute));
    SC_CUDA_TRY(cudaStreamWaitEvent(d->copy, d->computed, 0));
    SC_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, d->copy));
    SC_CUDA_TRY(cudaEventRecord(d->uploaded, d->copy));
    SC_CUDA_TRY(cudaStreamWaitEvent(d->compute, d->uploaded, 0));
    return SC_OK;
}

sc_status sc_cuda_memset0(int index, void *p, size_t bytes)
{
    sc_cuda_dev *d = sc_cuda_dev_get(index);
    if (!d)
        return sc_error_code();
    SC_CUDA_TRY(cudaMemsetAsync(p, 0, bytes, d->compute));
    return SC_OK;
}

sc_status sc_cuda_synchronize(int index)
{
    sc_cuda_dev *d = sc_cuda_dev_get(index);
    if (!d)
        return sc_error_code();
    SC_CUDA_TRY(cudaStreamSynchronize(d->copy));
    SC_CUDA_TRY(cudaStreamSynchronize(d->compute));
    return SC_OK;
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
