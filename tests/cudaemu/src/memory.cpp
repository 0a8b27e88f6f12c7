/* Device and pinned host memory, copies and memsets. Every block is
 * remembered, freed ones too (until their addresses are reused), so a
 * pointer is named for what it is: live device memory, pinned host memory,
 * freed memory, or a range running past its block. */
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <sys/mman.h>
#include <unistd.h>

#include "runtime_impl.h"

namespace cudaemu {
namespace {

enum class kind { device, pinned };
struct block {
    size_t bytes;
    kind what;
    int device; /* current when it was allocated */
    bool live;
};

/* An address range reserved for one GPU's memory, or for pinned host
 * memory. Blocks are carved from it, so its addresses never go to the
 * host's allocator (a freed block's record stays true), and a freed block
 * is inaccessible (PROT_NONE) until a later allocation reuses its range.
 * Next fit from where the last block ended: freed addresses come back as
 * late as possible. */
class arena {
    uintptr_t base = 0;
    std::map<uintptr_t, size_t> holes; /* free ranges, by start */
    uintptr_t cursor = 0;

    static size_t pages(size_t bytes)
    {
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        return (bytes + page - 1) / page * page;
    }

  public:
    void *take(size_t bytes, size_t reserve)
    {
        if (!base) {
            void *r = mmap(nullptr, reserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (r == MAP_FAILED)
                return nullptr;
            base = cursor = (uintptr_t)r;
            holes[base] = reserve;
        }
        bytes = pages(bytes);
        auto fits = [&](const std::pair<const uintptr_t, size_t> &h) { return h.second >= bytes; };
        auto it = std::find_if(holes.lower_bound(cursor), holes.end(), fits);
        if (it == holes.end())
            it = std::find_if(holes.begin(), holes.end(), fits);
        if (it == holes.end())
            return nullptr;
        uintptr_t a = it->first;
        size_t left = it->second - bytes;
        holes.erase(it);
        if (left)
            holes[a + bytes] = left;
        cursor = a + bytes;
        if (mprotect((void *)a, bytes, PROT_READ | PROT_WRITE)) {
            give((void *)a, bytes);
            return nullptr;
        }
        return (void *)a;
    }

    void give(void *p, size_t bytes)
    {
        uintptr_t a = (uintptr_t)p;
        bytes = pages(bytes);
        madvise(p, bytes, MADV_DONTNEED);
        mprotect(p, bytes, PROT_NONE);
        auto next = holes.lower_bound(a);
        if (next != holes.end() && next->first == a + bytes) {
            bytes += next->second;
            next = holes.erase(next);
        }
        if (next != holes.begin() && std::prev(next)->first + std::prev(next)->second == a)
            std::prev(next)->second += bytes;
        else
            holes[a] = bytes;
    }
};

/* Never destroyed: a thread may still call in while the process exits. */
std::mutex mem_mu;
auto &blocks = *new std::map<uintptr_t, block>; /* by base address */
auto &used = *new std::vector<size_t>;          /* device bytes, by GPU */
auto &device_arenas = *new std::vector<arena>;  /* by GPU */
auto &pinned_arena = *new arena;
const size_t PINNED_RESERVE = (size_t)64 << 30;

/* Twice the memory limit: room for page rounding and fragmentation. */
size_t device_reserve() { return 2 * settings().mem_bytes + ((size_t)1 << 30); }

/* The block holding p (live or freed) and its base, or NULL. mem_mu held. */
const block *locate(const void *p, uintptr_t *base)
{
    auto it = blocks.upper_bound((uintptr_t)p);
    if (it == blocks.begin())
        return nullptr;
    --it;
    if ((uintptr_t)p >= it->first + it->second.bytes)
        return nullptr;
    *base = it->first;
    return &it->second;
}

/* A new block; the records of freed blocks it reuses addresses of go.
 * mem_mu held. */
void add_block(void *p, size_t bytes, kind what, int device)
{
    uintptr_t a = (uintptr_t)p;
    auto it = blocks.upper_bound(a);
    if (it != blocks.begin() && std::prev(it)->first + std::prev(it)->second.bytes > a)
        --it;
    while (it != blocks.end() && it->first < a + bytes)
        it = blocks.erase(it);
    blocks[a] = {bytes, what, device, true};
}

/* What [p, p + bytes) is. */
enum class span { host, device, pinned, freed, overrun };
struct span_info {
    span what;
    int device;
    uintptr_t base;
    size_t bytes; /* of the block */
};

span_info classify(const void *p, size_t bytes)
{
    std::lock_guard<std::mutex> lock(mem_mu);
    uintptr_t base = 0;
    const block *b = locate(p, &base);
    if (!b)
        return {span::host, -1, 0, 0};
    span_info s = {span::freed, b->device, base, b->bytes};
    if (b->live)
        s.what = (uintptr_t)p + bytes > base + b->bytes ? span::overrun
                 : b->what == kind::device             ? span::device
                                                       : span::pinned;
    return s;
}

const char *span_text(span s)
{
    switch (s) {
    case span::host: return "is not device memory";
    case span::pinned: return "is pinned host memory (cudaHostAlloc), not device memory";
    case span::freed: return "lies in freed memory (use after free)";
    case span::overrun: return "runs past the end of its allocation";
    case span::device: break;
    }
    return "is device memory";
}

/* Checks one end of a copy; reports a freed block or a range past its end. */
bool end_ok(const char *call, const char *role, const void *p, size_t bytes, span_info *s)
{
    *s = classify(p, bytes);
    if (s->what != span::freed && s->what != span::overrun)
        return true;
    cudaemu_report("%s: the %s %p .. +%zu %s (block %p of %zu bytes)", call, role, p, bytes,
                   span_text(s->what), (void *)s->base, s->bytes);
    return false;
}

const char *kind_name(cudaMemcpyKind k)
{
    static const char *const names[] = {"cudaMemcpyHostToHost", "cudaMemcpyHostToDevice",
                                        "cudaMemcpyDeviceToHost", "cudaMemcpyDeviceToDevice",
                                        "cudaMemcpyDefault"};
    return names[k];
}

/* The kind's claim about one end against what the pointer is. */
bool end_matches(const char *call, cudaMemcpyKind k, const char *role, const void *p,
                 bool device, bool want_device)
{
    if (device == want_device)
        return true;
    cudaemu_report("%s: %s, but the %s %p is %s", call, kind_name(k), role, p,
                   device ? "device memory" : "host memory");
    return false;
}

/* Copies [src, +bytes) to dst on stream s. `blocking`: cudaMemcpy, which
 * returns once the copy is done unless it is device to device. An async
 * copy from pageable memory stages the source at the call; one to pageable
 * memory, or host to host, returns once done (CUDA's documented
 * synchronisation of memcpy); pinned memory is read and written when the
 * copy runs. */
cudaError_t copy(const char *call, void *dst, const void *src, size_t bytes, cudaMemcpyKind k,
                 cudaStream_t s, bool blocking)
{
    if (cudaError_t e = enter())
        return e;
    if ((unsigned)k > cudaMemcpyDefault)
        return fail(cudaErrorInvalidMemcpyDirection);
    if (bytes == 0)
        return cudaSuccess;
    span_info d, r;
    bool ends_ok = end_ok(call, "destination", dst, bytes, &d);
    if (!end_ok(call, "source", src, bytes, &r) || !ends_ok)
        return fail(cudaErrorInvalidValue);
    bool dst_dev = d.what == span::device, src_dev = r.what == span::device;
    if (k != cudaMemcpyDefault) {
        bool dst_ok = end_matches(call, k, "destination", dst, dst_dev,
                                  k == cudaMemcpyHostToDevice || k == cudaMemcpyDeviceToDevice);
        if (!end_matches(call, k, "source", src, src_dev,
                         k == cudaMemcpyDeviceToHost || k == cudaMemcpyDeviceToDevice) ||
            !dst_ok)
            return fail(cudaErrorInvalidValue);
    }
    lock_t lk(sched_mu);
    if (blocking && capture_forbids(call))
        return fail(cudaErrorStreamCaptureUnsupported);
    bool captured = capturing(s);
    bool pageable_src = r.what == span::host, pageable_dst = d.what == span::host;
    if (captured && (pageable_src || pageable_dst))
        cudaemu_note("a captured copy with pageable host memory: the graph reads or writes that "
                     "host address at every launch");
    std::function<void()> run = [dst, src, bytes]() { memmove(dst, src, bytes); };
    if (pageable_src && !captured && !blocking) {
        auto staged = std::make_shared<std::vector<char>>((const char *)src, (const char *)src + bytes);
        run = [dst, staged]() { memcpy(dst, staged->data(), staged->size()); };
    }
    dep queued{nullptr, 0};
    if (cudaError_t e = submit(lk, s, call, run, nullptr, &queued))
        return e;
    bool waits = blocking ? !(dst_dev && src_dev) : pageable_dst || (!dst_dev && !src_dev);
    if (!waits || !queued.q)
        return cudaSuccess;
    if (cudaError_t e = wait_for(lk, {queued}, call))
        return e;
    return fault_seen(queued.q->device);
}

void grow_used()
{
    if (used.empty()) {
        used.resize(device_count());
        device_arenas.resize(device_count());
    }
}

/* Why p cannot be freed as a block of kind `want`, or NULL when it can.
 * mem_mu held. */
const char *free_problem(const void *p, kind want, const block **out)
{
    uintptr_t base = 0;
    const block *b = locate(p, &base);
    *out = b;
    if (!b)
        return want == kind::device ? "not a pointer from cudaMalloc" : "not a pointer from cudaHostAlloc";
    if (base != (uintptr_t)p)
        return "points inside a block, not at its start";
    if (!b->live)
        return "already freed (double free)";
    if (b->what != want)
        return want == kind::device ? "pinned host memory (free it with cudaFreeHost)"
                                    : "device memory (free it with cudaFree)";
    return nullptr;
}

/* Frees p, a block of kind `want`, after waiting for the work of `device`
 * (every device when < 0), as cudaFree and cudaFreeHost synchronise. */
cudaError_t release(const char *call, void *p, kind want, int device)
{
    if (cudaError_t e = enter())
        return e;
    lock_t lk(sched_mu);
    if (capture_forbids(call))
        return fail(cudaErrorStreamCaptureUnsupported);
    if (!p)
        return cudaSuccess;
    if (cudaError_t e = wait_device(lk, device, call))
        return e;
    if (cudaError_t e = fault_seen(device < 0 ? current_device() : device))
        return e;
    std::lock_guard<std::mutex> lock(mem_mu);
    const block *b;
    if (const char *why = free_problem(p, want, &b)) {
        cudaemu_report("%s(%p): %s", call, p, why);
        return fail(cudaErrorInvalidValue);
    }
    blocks[(uintptr_t)p].live = false;
    if (want == kind::device) {
        used[b->device] -= b->bytes;
        device_arenas[b->device].give(p, b->bytes);
    } else {
        pinned_arena.give(p, b->bytes);
    }
    return cudaSuccess;
}
} // namespace

bool check_device_range(const char *what, const void *p, size_t bytes)
{
    if (bytes == 0)
        return true;
    span_info s = classify(p, bytes);
    if (s.what == span::device)
        return true;
    if (s.what == span::host || s.what == span::pinned)
        cudaemu_report("%s: %p .. +%zu bytes %s", what, p, bytes, span_text(s.what));
    else
        cudaemu_report("%s: %p .. +%zu bytes %s (block %p of %zu bytes)", what, p, bytes,
                       span_text(s.what), (void *)s.base, s.bytes);
    return false;
}

bool is_device(const void *p) { return classify(p, 1).what == span::device; }

bool is_device_or_pinned(const void *p)
{
    span s = classify(p, 1).what;
    return s == span::device || s == span::pinned;
}

size_t device_bytes_allocated(int d)
{
    std::lock_guard<std::mutex> lock(mem_mu);
    grow_used();
    return valid_device(d) ? used[d] : 0;
}

int device_of(const void *p)
{
    span_info s = classify(p, 1);
    return s.what == span::device ? s.device : -1;
}
} // namespace cudaemu

using namespace cudaemu;

extern "C" cudaError_t cudaMalloc(void **p, size_t bytes)
{
    *p = nullptr;
    if (cudaError_t e = enter())
        return e;
    {
        lock_t lk(sched_mu);
        if (capture_forbids("cudaMalloc"))
            return fail(cudaErrorStreamCaptureUnsupported);
    }
    int d = current_device();
    size_t size = bytes ? bytes : 1;
    std::lock_guard<std::mutex> lock(mem_mu);
    grow_used();
    void *q = used[d] + size <= settings().mem_bytes ? device_arenas[d].take(size, device_reserve())
                                                     : nullptr;
    if (!q)
        return fail(cudaErrorMemoryAllocation);
    memset(q, 0xff, size); /* NaN: a read before a write shows */
    add_block(q, size, kind::device, d);
    used[d] += size;
    *p = q;
    return cudaSuccess;
}

/* Documented to synchronise the device: the kernels still using p finish. */
extern "C" cudaError_t cudaFree(void *p)
{
    int d = device_of(p);
    return release("cudaFree", p, kind::device, d >= 0 ? d : current_device());
}

extern "C" cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned flags)
{
    *p = nullptr;
    if (cudaError_t e = enter())
        return e;
    {
        lock_t lk(sched_mu);
        if (capture_forbids("cudaHostAlloc"))
            return fail(cudaErrorStreamCaptureUnsupported);
    }
    size_t size = bytes ? bytes : 1;
    std::lock_guard<std::mutex> lock(mem_mu);
    void *q = pinned_arena.take(size, PINNED_RESERVE);
    if (!q)
        return fail(cudaErrorMemoryAllocation);
    add_block(q, size, kind::pinned, current_device());
    *p = q;
    return cudaSuccess;
}

extern "C" cudaError_t cudaMallocHost(void **p, size_t bytes)
{
    return cudaHostAlloc(p, bytes, cudaHostAllocDefault);
}

/* Waits for every device: any of them may have a copy from p queued. */
extern "C" cudaError_t cudaFreeHost(void *p) { return release("cudaFreeHost", p, kind::pinned, -1); }

extern "C" cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total_b)
{
    if (cudaError_t e = enter())
        return e;
    std::lock_guard<std::mutex> lock(mem_mu);
    grow_used();
    *total_b = settings().mem_bytes;
    *free_b = *total_b - used[current_device()];
    return cudaSuccess;
}

extern "C" cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes,
                                       cudaMemcpyKind kind, cudaStream_t s)
{
    return copy("cudaMemcpyAsync", dst, src, bytes, kind, s, false);
}

extern "C" cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind)
{
    return copy("cudaMemcpy", dst, src, bytes, kind, nullptr, true);
}

extern "C" cudaError_t cudaMemcpyPeerAsync(void *dst, int dst_device, const void *src,
                                           int src_device, size_t bytes, cudaStream_t s)
{
    if (!valid_device(dst_device) || !valid_device(src_device))
        return fail(cudaErrorInvalidDevice);
    int d = device_of(dst), r = device_of(src);
    if (bytes && (d != dst_device || r != src_device)) {
        cudaemu_report("cudaMemcpyPeerAsync: destination %p is on cuda:%d (said %d), source %p on "
                       "cuda:%d (said %d)", dst, d, dst_device, src, r, src_device);
        return fail(cudaErrorInvalidValue);
    }
    return copy("cudaMemcpyPeerAsync", dst, src, bytes, cudaMemcpyDeviceToDevice, s, false);
}

extern "C" cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t s)
{
    if (cudaError_t e = enter())
        return e;
    if (!check_device_range("cudaMemsetAsync", p, bytes))
        return fail(cudaErrorInvalidValue);
    if (!check_stream_device("cudaMemsetAsync", s))
        return fail(cudaErrorInvalidResourceHandle);
    lock_t lk(sched_mu);
    return submit(lk, s, "cudaMemsetAsync", [=]() { memset(p, value, bytes); }, nullptr);
}

/* Asynchronous on device memory, as documented. */
extern "C" cudaError_t cudaMemset(void *p, int value, size_t bytes)
{
    return cudaMemsetAsync(p, value, bytes, nullptr);
}
