/* CPU emulation of the CUDA runtime subset scorch uses, and the kernel
 * executor (fibers). Work runs at enqueue time, in order; a capturing
 * stream records it into a graph instead. The emulator checks the rules of
 * the API as it goes and reports breaches with cudaemu_report. */
#include <cuda_runtime.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sys/mman.h>
#include <ucontext.h>
#include <algorithm>
#include <vector>

#include "internal.h"

/* ---- reports ---- */

static std::mutex report_mu;
static int reports;
extern "C" void cudaemu_report(const char *fmt, ...)
{
    std::lock_guard<std::mutex> lock(report_mu);
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cudaemu: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    reports++;
    if (getenv("CUDAEMU_ABORT_ON_REPORT"))
        abort();
}

/* ---- errors ---- */

static thread_local cudaError_t last_error = cudaSuccess;
static cudaError_t fail(cudaError_t e)
{
    if (e != cudaSuccess)
        last_error = e;
    return e;
}
extern "C" cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}
extern "C" cudaError_t cudaPeekAtLastError(void) { return last_error; }
extern "C" const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureUnjoined: return "capture sequence contains a fork that was not joined to the primary stream";
    case cudaErrorStreamCaptureImplicit: return "operation would make the legacy stream depend on a capturing blocking stream";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    default: return "emulated CUDA error";
    }
}

/* ---- devices ---- */

static int device_count()
{
    const char *e = getenv("CUDAEMU_DEVICES");
    return e ? atoi(e) : 1;
}
static thread_local int current_device = 0;

extern "C" cudaError_t cudaGetDeviceCount(int *n)
{
    *n = device_count();
    return *n ? cudaSuccess : fail(cudaErrorNoDevice);
}
extern "C" cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d)
{
    if (d < 0 || d >= device_count())
        return fail(cudaErrorInvalidDevice);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "emulated GPU %d", d);
    p->major = 8;
    p->minor = 0;
    p->totalGlobalMem = (size_t)16 << 30;
    p->multiProcessorCount = 2;
    p->maxThreadsPerBlock = 1024;
    p->maxGridSize[0] = 0x7fffffff;
    p->maxGridSize[1] = p->maxGridSize[2] = 65535;
    return cudaSuccess;
}
extern "C" cudaError_t cudaSetDevice(int d)
{
    if (d < 0 || d >= device_count())
        return fail(cudaErrorInvalidDevice);
    current_device = d;
    return cudaSuccess;
}
extern "C" cudaError_t cudaGetDevice(int *d)
{
    *d = current_device;
    return cudaSuccess;
}

/* ---- memory ---- */

struct alloc_info {
    size_t bytes;
    bool device; /* else pinned host */
    int dev;
};
static std::mutex mem_mu;
static std::map<uintptr_t, alloc_info> allocs;
static size_t device_bytes;

/* The allocation holding p, or NULL. */
static const alloc_info *find_alloc(const void *p, uintptr_t *base)
{
    uintptr_t a = (uintptr_t)p;
    auto it = allocs.upper_bound(a);
    if (it == allocs.begin())
        return nullptr;
    --it;
    if (a >= it->first + it->second.bytes)
        return nullptr;
    *base = it->first;
    return &it->second;
}

/* 1: [p, p + bytes) lies in one device allocation; 0: p is not device
 * memory; -1: p is device memory but the range runs past its block. */
static int device_range(const void *p, size_t bytes, bool pinned_ok = false)
{
    std::lock_guard<std::mutex> lock(mem_mu);
    uintptr_t base;
    const alloc_info *a = find_alloc(p, &base);
    if (!a || (!a->device && !pinned_ok))
        return 0;
    return (uintptr_t)p + bytes <= base + a->bytes ? 1 : -1;
}
extern "C" int cudaemu_is_device_ptr(const void *p, size_t bytes) { return device_range(p, bytes) == 1; }
bool cudaemu::is_device(const void *p) { return device_range(p, 1) != 0; }
bool cudaemu::is_device_or_pinned(const void *p) { return device_range(p, 1, true) != 0; }

bool cudaemu::check_device_range(const char *what, const void *p, size_t bytes)
{
    if (bytes == 0)
        return true;
    int r = device_range(p, bytes);
    if (r == 1)
        return true;
    cudaemu_report("%s: %p .. +%zu bytes %s", what, p, bytes,
               r == 0 ? "is not device memory" : "runs past the end of its device allocation");
    return false;
}

/* Capture state of this thread (modes Global and ThreadLocal). */
static thread_local CUstream_st *thread_capture;

static bool unsafe_in_capture(const char *call)
{
    if (!thread_capture || thread_capture->mode == cudaStreamCaptureModeRelaxed)
        return false;
    cudaemu_report("%s during stream capture (mode %d): the capture is invalidated", call,
               (int)thread_capture->mode);
    thread_capture->invalidated = true;
    return true;
}

extern "C" cudaError_t cudaMalloc(void **p, size_t bytes)
{
    if (unsafe_in_capture("cudaMalloc"))
        return fail(cudaErrorStreamCaptureUnsupported);
    size_t limit = getenv("CUDAEMU_MEM_LIMIT") ? strtoull(getenv("EMU_MEM_LIMIT"), 0, 0) : ((size_t)8 << 30);
    std::lock_guard<std::mutex> lock(mem_mu);
    if (device_bytes + bytes > limit)
        return fail(cudaErrorMemoryAllocation);
    void *q = nullptr;
    if (posix_memalign(&q, 256, bytes ? bytes : 1))
        return fail(cudaErrorMemoryAllocation);
    memset(q, 0xff, bytes); /* NaN garbage: a read before a write shows */
    allocs[(uintptr_t)q] = {bytes ? bytes : 1, true, current_device};
    device_bytes += bytes;
    *p = q;
    return cudaSuccess;
}
extern "C" cudaError_t cudaFree(void *p)
{
    if (!p)
        return cudaSuccess;
    if (unsafe_in_capture("cudaFree"))
        return fail(cudaErrorStreamCaptureUnsupported);
    std::lock_guard<std::mutex> lock(mem_mu);
    auto it = allocs.find((uintptr_t)p);
    if (it == allocs.end() || !it->second.device) {
        cudaemu_report("cudaFree(%p): not a cudaMalloc pointer", p);
        return fail(cudaErrorInvalidDevicePointer);
    }
    device_bytes -= it->second.bytes;
    allocs.erase(it);
    free(p);
    return cudaSuccess;
}
extern "C" cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned flags)
{
    if (unsafe_in_capture("cudaHostAlloc"))
        return fail(cudaErrorStreamCaptureUnsupported);
    void *q = nullptr;
    if (posix_memalign(&q, 4096, bytes ? bytes : 1))
        return fail(cudaErrorMemoryAllocation);
    std::lock_guard<std::mutex> lock(mem_mu);
    allocs[(uintptr_t)q] = {bytes ? bytes : 1, false, current_device};
    *p = q;
    return cudaSuccess;
}
extern "C" cudaError_t cudaFreeHost(void *p)
{
    if (!p)
        return cudaSuccess;
    if (unsafe_in_capture("cudaFreeHost"))
        return fail(cudaErrorStreamCaptureUnsupported);
    std::lock_guard<std::mutex> lock(mem_mu);
    auto it = allocs.find((uintptr_t)p);
    if (it == allocs.end() || it->second.device) {
        cudaemu_report("cudaFreeHost(%p): not a cudaHostAlloc pointer", p);
        return fail(cudaErrorInvalidValue);
    }
    allocs.erase(it);
    free(p);
    return cudaSuccess;
}
extern "C" cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total_b)
{
    *total_b = (size_t)8 << 30;
    std::lock_guard<std::mutex> lock(mem_mu);
    *free_b = *total_b - device_bytes;
    return cudaSuccess;
}

/* ---- streams, events, capture ---- */

cudaError_t cudaemu::enqueue(cudaStream_t s, const char *what, std::function<void()> fn)
{
    if (s == nullptr || s == cudaStreamLegacy) {
        if (thread_capture) {
            cudaemu_report("%s on the legacy default stream during a capture", what);
            thread_capture->invalidated = true;
            return fail(cudaErrorStreamCaptureImplicit);
        }
        static bool said;
        if (!said) {
            said = true;
            cudaemu_report("note: %s on the legacy default stream", what);
        }
        fn();
        return cudaSuccess;
    }
    if (s->graph) {
        if (s->invalidated)
            return fail(cudaErrorStreamCaptureInvalidated);
        s->graph->nodes.push_back({what, std::move(fn)});
        s->pending = true;
        return cudaSuccess;
    }
    fn();
    return cudaSuccess;
}

extern "C" cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags)
{
    *s = new CUstream_st();
    (*s)->flags = flags;
    (*s)->device = current_device;
    if (!(flags & cudaStreamNonBlocking))
        cudaemu_report("note: a blocking stream (synchronises with the legacy default stream)");
    return cudaSuccess;
}
extern "C" cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    delete s;
    return cudaSuccess;
}
extern "C" cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags)
{
    *e = new CUevent_st();
    return cudaSuccess;
}
extern "C" cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    delete e;
    return cudaSuccess;
}
extern "C" cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    if (s && s->graph) {
        e->graph = s->graph;
        e->stream = s;
        s->pending = false; /* whoever waits on e joins what s did so far */
        e->covers_all = true;
    } else {
        e->graph = nullptr;
        e->stream = s;
    }
    return cudaSuccess;
}
extern "C" cudaError_t cudaEventQuery(cudaEvent_t e)
{
    if (e->graph) {
        cudaemu_report("cudaEventQuery on an event recorded inside a capture");
        return fail(cudaErrorStreamCaptureUnsupported);
    }
    return cudaSuccess;
}
extern "C" cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags)
{
    if (e->graph && (!s->graph || s->graph != e->graph)) {
        if (s->graph && s->graph != e->graph) {
            cudaemu_report("cudaStreamWaitEvent joins two captures");
            return fail(cudaErrorStreamCaptureUnsupported);
        }
        s->graph = e->graph; /* s joins the capture */
        s->joined = true;
        s->invalidated = false;
        e->graph->joined.push_back(s);
    }
    if (s->graph && e->stream && e->stream != s && e->stream->graph == s->graph)
        e->stream->pending = false;
    return cudaSuccess;
}
extern "C" cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    if (s && s->graph) {
        cudaemu_report("cudaStreamSynchronize on a capturing stream");
        s->invalidated = true;
        return fail(cudaErrorStreamCaptureUnsupported);
    }
    if (unsafe_in_capture("cudaStreamSynchronize"))
        return fail(cudaErrorStreamCaptureUnsupported);
    return cudaSuccess;
}
extern "C" cudaError_t cudaDeviceSynchronize(void)
{
    if (unsafe_in_capture("cudaDeviceSynchronize"))
        return fail(cudaErrorStreamCaptureUnsupported);
    return cudaSuccess;
}

extern "C" cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes,
                                       cudaMemcpyKind kind, cudaStream_t s)
{
    if (bytes == 0)
        return cudaSuccess;
    int d = device_range(dst, bytes), r = device_range(src, bytes);
    bool bad = d < 0 || r < 0;
    if (d < 0 || r < 0)
        cudaemu_report("cudaMemcpyAsync: %s range runs past its device allocation (%zu bytes)",
                   d < 0 ? "destination" : "source", bytes);
    if ((kind == cudaMemcpyHostToDevice && (d != 1 || r != 0)) ||
        (kind == cudaMemcpyDeviceToHost && (d != 0 || r != 1)) ||
        (kind == cudaMemcpyDeviceToDevice && (d != 1 || r != 1))) {
        cudaemu_report("cudaMemcpyAsync: kind %d does not match the pointers (dst %s, src %s)",
                   (int)kind, d ? "device" : "host", r ? "device" : "host");
        bad = true;
    }
    if (bad)
        return fail(cudaErrorInvalidValue);
    if (s && s->graph && (r == 0 || d == 0) && device_range(r == 0 ? src : dst, 1, true) == 0)
        cudaemu_report("note: a captured copy with pageable host memory (%zu bytes): the graph "
                   "re-reads/re-writes that host address at every launch", bytes);
    return cudaemu::enqueue(s, "cudaMemcpyAsync",
                                 [=]() { memmove(dst, src, bytes); });
}
extern "C" cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind)
{
    if (unsafe_in_capture("cudaMemcpy"))
        return fail(cudaErrorStreamCaptureUnsupported);
    return cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
}
extern "C" cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t s)
{
    if (!cudaemu::check_device_range("cudaMemsetAsync", p, bytes))
        return fail(cudaErrorInvalidValue);
    return cudaemu::enqueue(s, "cudaMemsetAsync", [=]() { memset(p, value, bytes); });
}

extern "C" cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode)
{
    if (!s || s == cudaStreamLegacy || s->graph)
        return fail(cudaErrorInvalidValue);
    s->graph = new CUgraph_st();
    s->mode = mode;
    s->origin = true;
    s->invalidated = false;
    s->pending = false;
    if (mode != cudaStreamCaptureModeRelaxed)
        thread_capture = s;
    return cudaSuccess;
}
extern "C" cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g)
{
    *g = nullptr;
    if (!s->graph || !s->origin)
        return fail(cudaErrorInvalidValue);
    CUgraph_st *graph = s->graph;
    bool unjoined = false;
    for (CUstream_st *j : graph->joined) {
        if (j->pending)
            unjoined = true;
        j->graph = nullptr;
        j->joined = false;
        j->pending = false;
    }
    bool invalid = s->invalidated;
    s->graph = nullptr;
    s->origin = false;
    s->invalidated = false;
    if (thread_capture == s)
        thread_capture = nullptr;
    if (invalid) {
        delete graph;
        return fail(cudaErrorStreamCaptureInvalidated);
    }
    if (unjoined) {
        cudaemu_report("cudaStreamEndCapture: a stream forked into the capture was not joined back");
        delete graph;
        return fail(cudaErrorStreamCaptureUnjoined);
    }
    *g = graph;
    return cudaSuccess;
}
extern "C" cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t g,
                                            unsigned long long flags)
{
    *exec = new CUgraphExec_st();
    (*exec)->nodes = g->nodes;
    return cudaSuccess;
}
extern "C" cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s)
{
    auto nodes = exec->nodes;
    return cudaemu::enqueue(s, "cudaGraphLaunch", [nodes]() {
        for (auto &n : nodes)
            n.fn();
    });
}
extern "C" cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec)
{
    delete exec;
    return cudaSuccess;
}
extern "C" cudaError_t cudaGraphDestroy(cudaGraph_t g)
{
    delete g;
    return cudaSuccess;
}

