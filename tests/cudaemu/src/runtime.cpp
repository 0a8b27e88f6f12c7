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

/* ---- kernels ---- */

namespace cudaemu {
thread_local const uint3 *cur_tid;
thread_local uint3 cur_bid;
thread_local dim3 cur_bdim, cur_gdim;

enum fstate { F_RUN, F_BAR, F_SHFL, F_DONE };
struct fiber {
    ucontext_t ctx;
    uint3 tid;
    fstate st;
    unsigned long long sval, sres;
    unsigned smask;
    int slm, swidth;
};
struct block_exec {
    std::vector<fiber> f;
    ucontext_t sched;
    const std::function<void()> *body;
    const char *name;
};
static thread_local block_exec *cur_block;
static thread_local fiber *cur_fiber;
static thread_local char *stacks;
static const size_t STACK = 128 << 10;
static thread_local bool in_error; /* a report already made for this launch */

static void fiber_entry()
{
    (*cur_block->body)();
    cur_fiber->st = F_DONE; /* uc_link returns to the scheduler */
}

void syncthreads()
{
    fiber *f = cur_fiber;
    f->st = F_BAR;
    swapcontext(&f->ctx, &cur_block->sched);
}

unsigned long long shfl_xor_bits(unsigned mask, unsigned long long bits, int lane_mask, int width)
{
    fiber *f = cur_fiber;
    f->sval = bits;
    f->smask = mask;
    f->slm = lane_mask;
    f->swidth = width;
    f->st = F_SHFL;
    swapcontext(&f->ctx, &cur_block->sched);
    return f->sres;
}

static void block_report(const char *fmt, const char *detail)
{
    cudaemu_report("kernel %s, block (%u,%u,%u) of a %ux%ux%u block: %s", cur_block->name, cur_bid.x,
               cur_bid.y, cur_bid.z, cur_bdim.x, cur_bdim.y, cur_bdim.z, detail);
    in_error = true;
}

/* Resolves warp w's shuffle once its lanes are all blocked; false (after a
 * report) when a lane the mask names is not shuffling with it. */
static bool resolve_warp(block_exec &b, unsigned n, unsigned w)
{
    char msg[256];
    unsigned lo = w * 32, hi = lo + 32 < n ? lo + 32 : n;
    for (unsigned i = lo; i < hi; i++) {
        fiber &f = b.f[i];
        if (f.st != F_SHFL)
            continue;
        for (unsigned l = 0; l < 32; l++)
            if ((f.smask >> l) & 1u) {
                unsigned t = lo + l;
                if (t >= n || b.f[t].st != F_SHFL || b.f[t].smask != f.smask) {
                    snprintf(msg, sizeof msg,
                             "__shfl_xor_sync: lane %u names lane %u in mask 0x%x, which %s "
                             "(undefined behaviour)", i - lo, l, f.smask,
                             t >= n ? "does not exist (partial warp)"
                             : b.f[t].st == F_DONE ? "has exited"
                             : b.f[t].st == F_BAR ? "waits at __syncthreads"
                                                  : "shuffles with another mask");
                    block_report("", msg);
                    return false;
                }
            }
        unsigned src = (i - lo) ^ (unsigned)f.slm;
        if (src / f.swidth != (i - lo) / f.swidth)
            src = i - lo;
        f.sres = b.f[lo + src].sval;
    }
    for (unsigned i = lo; i < hi; i++)
        if (b.f[i].st == F_SHFL)
            b.f[i].st = F_RUN;
    return true;
}

/* One block, every thread a fiber. Warps advance one at a time, each until
 * all its lanes block; CUDAEMU_SEED=seed picks the warps and the lanes in a
 * seeded random order, so a warp may run ahead of the others up to the
 * next __syncthreads (the interleavings real hardware allows). False after
 * a reported defect. */
static bool run_block(block_exec &b, unsigned n)
{
    b.f.resize(n);
    for (unsigned i = 0; i < n; i++) {
        fiber &f = b.f[i];
        f.tid = {i % cur_bdim.x, i / cur_bdim.x % cur_bdim.y, i / (cur_bdim.x * cur_bdim.y)};
        f.st = F_RUN;
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = stacks + (size_t)i * STACK;
        f.ctx.uc_stack.ss_size = STACK;
        f.ctx.uc_link = &b.sched;
        makecontext(&f.ctx, fiber_entry, 0);
    }
    static thread_local unsigned long long rng =
        getenv("CUDAEMU_SEED") ? strtoull(getenv("CUDAEMU_SEED"), 0, 0) : 0;
    auto next = [](unsigned k) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        return (unsigned)((rng >> 33) % k);
    };
    unsigned warps = (n + 31) / 32;
    std::vector<unsigned> runnable, lanes;
    char msg[256];
    for (;;) {
        runnable.clear();
        for (unsigned w = 0; w < warps; w++)
            for (unsigned i = w * 32; i < n && i < w * 32 + 32; i++)
                if (b.f[i].st == F_RUN || b.f[i].st == F_SHFL) {
                    runnable.push_back(w);
                    break;
                }
        if (runnable.empty()) {
            unsigned done = 0, bar = 0;
            for (unsigned i = 0; i < n; i++)
                done += b.f[i].st == F_DONE, bar += b.f[i].st == F_BAR;
            if (done == n)
                return true;
            if (done) {
                snprintf(msg, sizeof msg,
                         "__syncthreads reached by %u threads while %u have exited "
                         "(barrier in divergent code)", bar, done);
                block_report("", msg);
                return false;
            }
            for (unsigned i = 0; i < n; i++)
                b.f[i].st = F_RUN;
            continue;
        }
        unsigned w = rng ? runnable[next((unsigned)runnable.size())] : runnable[0];
        unsigned lo = w * 32, hi = lo + 32 < n ? lo + 32 : n;
        lanes.clear();
        for (unsigned i = lo; i < hi; i++)
            lanes.push_back(i);
        if (rng)
            for (unsigned k = (unsigned)lanes.size(); k > 1; k--)
                std::swap(lanes[k - 1], lanes[next(k)]);
        for (unsigned i : lanes)
            if (b.f[i].st == F_RUN) {
                cur_fiber = &b.f[i];
                cur_tid = &b.f[i].tid;
                swapcontext(&b.sched, &b.f[i].ctx);
            }
        bool shfl = false;
        for (unsigned i = lo; i < hi; i++)
            shfl |= b.f[i].st == F_SHFL;
        if (shfl && !resolve_warp(b, n, w))
            return false;
    }
}

static void run_grid(const cfg &c, const char *name, const std::function<void()> &body)
{
    unsigned n = c.block.x * c.block.y * c.block.z;
    if (!stacks) {
        stacks = (char *)mmap(nullptr, 1024 * STACK, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (stacks == MAP_FAILED)
            abort();
    }
    block_exec b;
    b.body = &body;
    b.name = name;
    block_exec *saved_block = cur_block;
    cur_block = &b;
    cur_bdim = c.block;
    cur_gdim = c.grid;
    in_error = false;
    std::vector<uint3> blocks;
    for (unsigned z = 0; z < c.grid.z; z++)
        for (unsigned y = 0; y < c.grid.y; y++)
            for (unsigned x = 0; x < c.grid.x; x++)
                blocks.push_back({x, y, z});
    if (const char *e = getenv("CUDAEMU_SEED")) { /* blocks in another order */
        unsigned long long r = strtoull(e, 0, 0) ^ blocks.size();
        for (size_t i = blocks.size(); i > 1; i--) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            std::swap(blocks[i - 1], blocks[(r >> 33) % i]);
        }
    }
    for (size_t i = 0; i < blocks.size() && !in_error; i++) {
        cur_bid = blocks[i];
        run_block(b, n);
    }
    cur_block = saved_block;
    cur_fiber = nullptr;
    cur_tid = nullptr;
}

void launch(const cfg &c, const char *name, std::function<void()> body, size_t arg_bytes)
{
    const dim3 &g = c.grid, &bl = c.block;
    unsigned long long threads = (unsigned long long)bl.x * bl.y * bl.z;
    bool bad = !g.x || !g.y || !g.z || !threads || threads > 1024 || bl.x > 1024 ||
               bl.y > 1024 || bl.z > 64 || g.x > 0x7fffffffu || g.y > 65535 || g.z > 65535;
    if (bad) {
        cudaemu_report("launch of %s: invalid configuration grid (%u,%u,%u) block (%u,%u,%u)", name,
                   g.x, g.y, g.z, bl.x, bl.y, bl.z);
        fail(cudaErrorInvalidConfiguration);
        return;
    }
    if (arg_bytes > 32764)
        cudaemu_report("launch of %s: %zu bytes of parameters (limit 32764)", name, arg_bytes);
    if (c.shmem)
        cudaemu_report("note: launch of %s with dynamic shared memory (not emulated)", name);
    cudaemu::enqueue(c.stream, name, [c, name, body]() { run_grid(c, name, body); });
}

void check_pointer_arg(const char *kernel, int index, const void *p)
{
    if (p && device_range(p, 1, true) == 0)
        cudaemu_report("launch of %s: argument %d (%p) is neither NULL nor device memory", kernel,
                   index, p);
}
} // namespace cudaemu

extern "C" int cudaemu_grid_cap(int cap)
{
    const char *e = getenv("CUDAEMU_GRID_CAP");
    int lower = e ? atoi(e) : 0;
    return lower > 0 && lower < cap ? lower : cap;
}
