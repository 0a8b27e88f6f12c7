/* The kernel executor: every CUDA thread of a block runs on a fiber of its
 * own, so __syncthreads and warp shuffles have their real semantics; the
 * launch rules are checked as kernels are queued. */
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sys/mman.h>
#include <ucontext.h>
#include <vector>

#include "internal.h"


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
    if (p && !cudaemu::is_device_or_pinned(p))
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
