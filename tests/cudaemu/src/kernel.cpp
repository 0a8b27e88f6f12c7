/* The kernel executor. Every CUDA thread of a block runs on a fiber of its
 * own, on the host thread that runs the launch; blocks run one after
 * another. Warps take turns, each running until all its lanes block (at
 * __syncthreads, a shuffle, __syncwarp, or their end); then its shuffles
 * and __syncwarps complete, and when every thread waits at a barrier or has
 * exited the barrier opens. Breaking the rules of these calls is reported,
 * naming the kernel, block and thread. Shared arrays (cudaemu_kernel.h) are
 * race-checked in shadow memory: two threads touching one element between
 * the same two barriers, one of them writing, is a race.
 *
 * Knobs: CUDAEMU_SEED=n runs blocks, warps and lanes in an order drawn from
 * n (else in index order); CUDAEMU_RACECHECK=0 turns the shared-memory
 * checks off; CUDAEMU_GRID_CAP=n lowers the backend's grid caps. */
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

#if !defined(__x86_64__) || defined(CUDAEMU_UCONTEXT)
#define CUDAEMU_FIBER_UCONTEXT 1
#include <ucontext.h>
#endif

#if defined(__SANITIZE_ADDRESS__)
#define CUDAEMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CUDAEMU_ASAN 1
#endif
#endif
#ifdef CUDAEMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#include "internal.h"

#ifndef CUDAEMU_FIBER_UCONTEXT
/* cudaemu_switch_stack(&from_sp, to_sp): pushes the callee-saved registers,
 * MXCSR and the x87 control word, stores the stack pointer in from_sp, and
 * pops the same from to_sp, returning into the context saved there. */
extern "C" void cudaemu_switch_stack(void **from_sp, void *to_sp);
asm(R"(
    .text
    .p2align 4
    .globl cudaemu_switch_stack
    .hidden cudaemu_switch_stack
    .type cudaemu_switch_stack, @function
cudaemu_switch_stack:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size cudaemu_switch_stack, .-cudaemu_switch_stack
)");
#endif

namespace cudaemu {
__thread kernel_coords coords = {nullptr, {0, 0, 0}, dim3(), dim3()};

/* ---- fibers ----
 * A context is a computation suspended on a stack of its own. x86-64
 * switches in a dozen instructions (cudaemu_switch_stack); elsewhere
 * ucontext does (swapcontext also saves the signal mask: a system call per
 * switch). AddressSanitizer is told of every switch, or it takes the fibers'
 * stacks for overflows of the host thread's. */
struct context {
#ifdef CUDAEMU_FIBER_UCONTEXT
    ucontext_t uc;
#else
    void *sp;
#endif
    const void *stack_lo = nullptr; /* for ASan: the stack, and its fake stack while suspended */
    size_t stack_size = 0;
    void *fake_stack = nullptr;
};

/* Makes c start entry() on [lo, lo + size) when first switched to. */
static void prepare(context &c, char *lo, size_t size, void (*entry)())
{
    c.stack_lo = lo;
    c.stack_size = size;
    c.fake_stack = nullptr;
#ifdef CUDAEMU_FIBER_UCONTEXT
    getcontext(&c.uc);
    c.uc.uc_stack.ss_sp = lo;
    c.uc.uc_stack.ss_size = size;
    c.uc.uc_link = nullptr;
    makecontext(&c.uc, entry, 0);
#else
    /* The frame cudaemu_switch_stack pops: the control words, r15 .. rbp,
     * then entry as the return address, and above it a null one for entry
     * itself, whose stack is then aligned as after a call. */
    struct {
        uint32_t mxcsr;
        uint16_t fpu_control, pad;
    } control = {0, 0, 0};
    asm volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(control.mxcsr), "=m"(control.fpu_control));
    uintptr_t top = ((uintptr_t)lo + size) & ~(uintptr_t)15;
    void **frame = (void **)(top - 16) - 7;
    memset(frame, 0, 7 * sizeof(void *));
    memcpy(frame, &control, sizeof control);
    frame[7] = (void *)entry;
    frame[8] = nullptr;
    c.sp = frame;
#endif
}

/* Suspends `from` and resumes `to`; from_ends: `from` is never resumed. */
static void switch_context(context &from, context &to, bool from_ends)
{
#ifdef CUDAEMU_ASAN
    __sanitizer_start_switch_fiber(from_ends ? nullptr : &from.fake_stack, to.stack_lo,
                                   to.stack_size);
#endif
#ifdef CUDAEMU_FIBER_UCONTEXT
    swapcontext(&from.uc, &to.uc);
#else
    cudaemu_switch_stack(&from.sp, to.sp);
#endif
#ifdef CUDAEMU_ASAN
    __sanitizer_finish_switch_fiber(from.fake_stack, nullptr, nullptr);
#endif
}

/* The fiber stacks of a host thread: one mapping, made on first use, of
 * MAX stacks, each above a guard page (an overflow faults rather than
 * running into the next fiber's stack). */
class stack_pool {
    char *base_ = nullptr;
    unsigned guarded_ = 0;
    static size_t page()
    {
        static const size_t bytes = (size_t)sysconf(_SC_PAGESIZE);
        return bytes;
    }
    static size_t slot() { return page() + SIZE; }

public:
    static const unsigned MAX = 1024;      /* threads per block */
    static const size_t SIZE = 128 << 10; /* bytes per stack */
    stack_pool() = default;
    stack_pool(const stack_pool &) = delete;
    stack_pool &operator=(const stack_pool &) = delete;
    ~stack_pool()
    {
        if (base_)
            munmap(base_, MAX * slot());
    }
    /* The lowest address of stack i. */
    char *stack(unsigned i)
    {
        if (!base_) {
            void *p = mmap(nullptr, MAX * slot(), PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (p == MAP_FAILED) {
                cudaemu_report("cannot map %u fiber stacks of %zu bytes", MAX, SIZE);
                abort();
            }
            base_ = (char *)p;
        }
        for (; guarded_ <= i; guarded_++)
            mprotect(base_ + guarded_ * slot(), page(), PROT_NONE);
        return base_ + i * slot() + page();
    }
};

/* ---- the executor's state ---- */

enum class waits : unsigned char { nothing /* runs */, barrier, shuffle, syncwarp, exit };

struct shuffle_op {
    shfl_mode mode;
    unsigned mask; /* __syncwarp's too */
    int arg, width;
    unsigned long long value, result;
};

/* One CUDA thread of the block being run. */
struct fiber {
    context ctx;
    uint3 tid;
    unsigned index; /* in the block, x fastest: warp index / 32, lane index % 32 */
    waits at = waits::exit;
    const char *barrier_file;
    int barrier_line;
    shuffle_op op;
    uint32_t sync_clock; /* the last __syncwarp this thread passed (race checks) */
    unsigned sync_mask;
};

enum class access : unsigned char { read, write };

/* A shared element the running thread indexed, and where its value then
 * is saved (executor::saved). */
struct touch {
    shared_meta *meta;
    size_t index, saved;
};

/* The first read of an unwritten shared element in a barrier interval. */
struct unwritten_read {
    const shared_meta *meta;
    size_t index;
    unsigned thread;
};

/* One launch being run. */
struct grid_run {
    const char *kernel;
    const std::function<void()> *body;
    bool seeded;
    uint64_t rng;
    bool racecheck;
    bool race_said, bounds_said, unwritten_said; /* one report of each a launch */
    unwritten_read unwritten;
};

struct executor {
    stack_pool stacks;
    std::vector<fiber> fibers;
    context sched; /* the host thread's own */
    fiber *cur = nullptr;
    grid_run *run = nullptr;
    std::vector<unsigned> ready;
    uint64_t launches = 0;
    /* Race-check clocks: epoch counts blocks and barrier intervals (a
     * shadow cell's records hold in the epoch they were made in);
     * warp_clock counts completed __syncwarps. */
    uint64_t epoch = 0, block_epoch = 0;
    uint32_t warp_clock = 0;
    std::vector<touch> touches; /* since the running thread resumed */
    std::vector<unsigned char> saved;
};
static thread_local executor host_executor;
static __thread executor *running; /* &host_executor while a launch runs */

/* Records the running thread's shared-memory accesses since it resumed. */
static void record_touches(executor &ex, const fiber &u);

/* ---- reports ---- */

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

struct thread_name {
    char s[40];
    explicit thread_name(const fiber &f)
    {
        snprintf(s, sizeof s, "(%u,%u,%u)", f.tid.x, f.tid.y, f.tid.z);
    }
};

/* Reports a defect of the running block, in thread f when given. */
__attribute__((format(printf, 2, 3))) static void report(const fiber *f, const char *fmt, ...)
{
    char detail[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    const uint3 &b = coords.block;
    if (f)
        cudaemu_report("kernel %s, block (%u,%u,%u), thread %s: %s", running->run->kernel, b.x, b.y,
                       b.z, thread_name(*f).s, detail);
    else
        cudaemu_report("kernel %s, block (%u,%u,%u): %s", running->run->kernel, b.x, b.y, b.z,
                       detail);
}

static const char *op_name(const fiber &f)
{
    static const char *const shuffles[] = {"__shfl_sync", "__shfl_up_sync", "__shfl_down_sync",
                                           "__shfl_xor_sync"};
    return f.at == waits::syncwarp ? "__syncwarp" : shuffles[f.op.mode];
}

/* ---- device-side calls ---- */

/* The running CUDA thread, or null (after a report) outside a kernel. */
static fiber *current(const char *call)
{
    if (running)
        return running->cur;
    cudaemu_report("%s called outside a kernel", call);
    return nullptr;
}

/* Suspends the running thread, waiting at `at`, until the scheduler resumes it. */
static void wait_at(fiber &f, waits at)
{
    record_touches(*running, f);
    f.at = at;
    switch_context(f.ctx, running->sched, false);
}

void syncthreads(const char *file, int line)
{
    if (fiber *f = current("__syncthreads")) {
        f->barrier_file = file;
        f->barrier_line = line;
        wait_at(*f, waits::barrier);
    }
}

void syncwarp(unsigned mask)
{
    if (fiber *f = current("__syncwarp")) {
        f->op.mask = mask;
        wait_at(*f, waits::syncwarp);
    }
}

unsigned long long shfl_bits(shfl_mode mode, unsigned mask, unsigned long long bits, int lane_arg,
                             int width)
{
    fiber *f = current("a warp shuffle");
    if (!f)
        return bits;
    f->op = {mode, mask, lane_arg, width, bits, 0};
    wait_at(*f, waits::shuffle);
    return f->op.result;
}

/* ---- warps ---- */

/* Whether lane p takes part in lane f's shuffle or __syncwarp. */
static bool joins(const fiber &f, const fiber &p)
{
    return p.at == f.at && p.op.mask == f.op.mask &&
           (f.at == waits::syncwarp || (p.op.mode == f.op.mode && p.op.width == f.op.width));
}

/* What lane p does instead of joining a warp operation. */
static void describe(const fiber &p, char *buf, size_t n)
{
    if (p.at == waits::exit)
        snprintf(buf, n, "has exited");
    else if (p.at == waits::barrier)
        snprintf(buf, n, "waits at __syncthreads (%s:%d)", base_name(p.barrier_file),
                 p.barrier_line);
    else if (p.at == waits::shuffle)
        snprintf(buf, n, "is in %s with mask 0x%08x, width %d", op_name(p), p.op.mask, p.op.width);
    else
        snprintf(buf, n, "is in %s with mask 0x%08x", op_name(p), p.op.mask);
}

/* Checks lane f's shuffle or __syncwarp against the documented rules: its
 * own lane in the mask, every lane the mask names present and in the same
 * call with the same mask, a width a power of two up to 32. __syncwarp
 * waits only for the lanes named that have not exited (or never existed,
 * in a partial warp); a shuffle reading one gets an undefined value. False
 * after a report. lanes: the warp's size. */
static bool check_warp_op(const executor &ex, unsigned lo, unsigned lanes, const fiber &f)
{
    unsigned lane = f.index - lo, mask = f.op.mask;
    bool shuffle = f.at == waits::shuffle;
    if (!(mask >> lane & 1)) {
        report(&f, "%s(mask 0x%08x): the calling lane %u is not in the mask", op_name(f), mask,
               lane);
        return false;
    }
    int w = f.op.width;
    if (shuffle && (w < 1 || w > 32 || (w & (w - 1)))) {
        report(&f, "%s: width %d is not a power of two from 1 to 32", op_name(f), w);
        return false;
    }
    for (unsigned l = 0; l < 32; l++) {
        if (!(mask >> l & 1) || l == lane || (!shuffle && l >= lanes))
            continue;
        if (l >= lanes) {
            report(&f, "%s(mask 0x%08x) names lane %u, which does not exist: the warp has %u "
                   "threads", op_name(f), mask, l, lanes);
            return false;
        }
        const fiber &p = ex.fibers[lo + l];
        if (joins(f, p) || (!shuffle && p.at == waits::exit))
            continue;
        char what[128];
        describe(p, what, sizeof what);
        bool undefined = shuffle && p.at == waits::exit;
        report(&f, "%s(mask 0x%08x) names lane %u, thread %s, which %s%s", op_name(f), mask, l,
               thread_name(p).s, what, undefined ? " (its value is undefined)" : "");
        return false;
    }
    return true;
}

/* The lane whose value `lane` receives, as PTX shfl.sync picks it: a
 * source past the end of the lane's segment of `width` lanes (for up,
 * before its start) gives the lane its own value. */
static unsigned shuffle_source(const shuffle_op &s, unsigned lane)
{
    unsigned segment = 32 - (unsigned)s.width, b = (unsigned)s.arg & 31;
    unsigned first = lane & segment, last = first | (31 & ~segment);
    switch (s.mode) {
    case SHFL_UP:
        return lane >= first + b ? lane - b : lane;
    case SHFL_DOWN:
        return lane + b <= last ? lane + b : lane;
    case SHFL_XOR:
        return (lane ^ b) <= last ? lane ^ b : lane;
    case SHFL_IDX:
        break;
    }
    return first | (b & ~segment);
}

/* Stamps the lanes of each __syncwarp group with a new clock. */
static void complete_syncwarps(executor &ex, unsigned lo, unsigned lanes)
{
    unsigned stamped = 0;
    for (unsigned l = 0; l < lanes; l++) {
        const fiber &f = ex.fibers[lo + l];
        if (f.at != waits::syncwarp || stamped >> l & 1)
            continue;
        unsigned mask = f.op.mask;
        ex.warp_clock++;
        for (unsigned k = 0; k < lanes; k++) {
            fiber &p = ex.fibers[lo + k];
            if (mask >> k & 1 && p.at == waits::syncwarp) {
                p.sync_clock = ex.warp_clock;
                p.sync_mask = mask;
                stamped |= 1u << k;
            }
        }
    }
}

/* Whether every lane of a full warp is in one warp operation with the full
 * mask: the common case, where no lane can break the mask rules. */
static bool whole_warp_joins(const executor &ex, unsigned lo, unsigned lanes)
{
    const fiber &f = ex.fibers[lo];
    if (lanes != 32 || (f.at != waits::shuffle && f.at != waits::syncwarp) ||
        f.op.mask != 0xffffffffu)
        return false;
    for (unsigned l = 1; l < 32; l++)
        if (!joins(f, ex.fibers[lo + l]))
            return false;
    return true;
}

enum class warp_state { resumed, blocked, failed };

/* Completes warp w's shuffles and __syncwarps, none of its lanes running:
 * resumed when some lane runs again, blocked when all wait at a barrier or
 * have exited, failed after a report. A shuffle source outside the mask
 * gives all-ones bits (a NaN): its value is undefined. */
static warp_state complete_warp(executor &ex, unsigned w, unsigned n)
{
    unsigned lo = w * 32, lanes = std::min(32u, n - lo);
    bool whole = whole_warp_joins(ex, lo, lanes), resumed = false;
    for (unsigned l = 0; l < lanes; l++) {
        const fiber &f = ex.fibers[lo + l];
        if (f.at != waits::shuffle && f.at != waits::syncwarp)
            continue;
        /* lanes that all agree pass or fail together: checking one is enough */
        if ((!whole || l == 0) && !check_warp_op(ex, lo, lanes, f))
            return warp_state::failed;
        resumed = true;
    }
    if (!resumed)
        return warp_state::blocked;
    for (unsigned l = 0; l < lanes; l++) {
        fiber &f = ex.fibers[lo + l];
        if (f.at != waits::shuffle)
            continue;
        unsigned src = shuffle_source(f.op, l);
        f.op.result = f.op.mask >> src & 1 ? ex.fibers[lo + src].op.value : ~0ull;
    }
    complete_syncwarps(ex, lo, lanes);
    for (unsigned l = 0; l < lanes; l++) {
        fiber &f = ex.fibers[lo + l];
        if (f.at == waits::shuffle || f.at == waits::syncwarp)
            f.at = waits::nothing;
    }
    return warp_state::resumed;
}

/* ---- blocks ---- */

static uint64_t next_random(uint64_t &state) /* splitmix64 */
{
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void flush_unwritten(executor &ex);

[[noreturn]] static void fiber_main()
{
    executor &ex = *running;
#ifdef CUDAEMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &ex.sched.stack_lo, &ex.sched.stack_size);
#endif
    (*ex.run->body)();
    fiber &f = *ex.cur;
    record_touches(ex, f);
    f.at = waits::exit;
    switch_context(f.ctx, ex.sched, true);
    __builtin_unreachable();
}

/* Sets every thread of the block at the start of the kernel. */
static void start_block(executor &ex, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        fiber &f = ex.fibers[i];
        char *stack = ex.stacks.stack(i);
#ifdef CUDAEMU_ASAN
        if (f.at != waits::exit) /* abandoned in a stopped block: its frames stay poisoned */
            ASAN_UNPOISON_MEMORY_REGION(stack, stack_pool::SIZE);
#endif
        prepare(f.ctx, stack, stack_pool::SIZE, fiber_main);
        f.at = waits::nothing;
        f.sync_clock = 0;
        f.sync_mask = 0;
    }
    ex.block_epoch = ++ex.epoch;
}

/* Runs warp w's running lanes until each blocks, in a random order when seeded. */
static void run_warp(executor &ex, unsigned w, unsigned n)
{
    unsigned lo = w * 32, lanes = std::min(32u, n - lo), order[32];
    for (unsigned l = 0; l < lanes; l++)
        order[l] = l;
    if (ex.run->seeded)
        for (unsigned k = lanes; k > 1; k--)
            std::swap(order[k - 1], order[next_random(ex.run->rng) % k]);
    for (unsigned l = 0; l < lanes; l++) {
        fiber &f = ex.fibers[lo + order[l]];
        if (f.at != waits::nothing)
            continue;
        ex.cur = &f;
        coords.thread = &f.tid;
        switch_context(ex.sched, f.ctx, false);
    }
}

static bool same_barrier(const fiber &a, const fiber &b)
{
    return a.barrier_line == b.barrier_line &&
           (a.barrier_file == b.barrier_file || !strcmp(a.barrier_file, b.barrier_file));
}

enum class block_state { running, done, stopped };

/* No thread runs: each waits at a barrier or has exited. Opens the
 * barrier, or reports one in divergent code. */
static block_state open_barrier(executor &ex, unsigned n)
{
    const fiber *waiting = nullptr, *exited = nullptr, *elsewhere = nullptr;
    unsigned count = 0;
    for (unsigned i = 0; i < n; i++) {
        const fiber &f = ex.fibers[i];
        if (f.at == waits::exit)
            exited = exited ? exited : &f;
        else if (!waiting)
            waiting = &f;
        else if (!same_barrier(*waiting, f))
            elsewhere = elsewhere ? elsewhere : &f;
        count += f.at == waits::barrier && same_barrier(*waiting, f);
    }
    flush_unwritten(ex);
    if (!waiting)
        return block_state::done;
    if (exited || elsewhere) {
        const fiber &other = exited ? *exited : *elsewhere;
        char what[128];
        describe(other, what, sizeof what);
        report(waiting, "waits at __syncthreads (%s:%d) while thread %s %s (%u of %u threads wait "
               "there): a barrier in divergent code", base_name(waiting->barrier_file),
               waiting->barrier_line, thread_name(other).s, what, count, n);
        return block_state::stopped;
    }
    ex.epoch++;
    for (unsigned i = 0; i < n; i++)
        ex.fibers[i].at = waits::nothing;
    return block_state::running;
}

/* The warps with a lane that runs, in index order. */
static void find_ready_warps(executor &ex, unsigned n)
{
    ex.ready.clear();
    for (unsigned w = 0; w * 32 < n; w++)
        for (unsigned i = w * 32; i < n && i < w * 32 + 32; i++)
            if (ex.fibers[i].at == waits::nothing) {
                ex.ready.push_back(w);
                break;
            }
}

/* Runs the block at coords.block; false after a report that stops the
 * launch (its fibers are abandoned where they wait). The first ready warp
 * runs until all its lanes wait at a barrier or have exited; seeded, a
 * ready warp drawn at random runs until its lanes block, so that a warp may
 * run ahead of the others up to the next barrier, as on hardware. */
static bool run_block(executor &ex, unsigned n)
{
    start_block(ex, n);
    find_ready_warps(ex, n);
    for (;;) {
        if (ex.ready.empty()) {
            block_state s = open_barrier(ex, n);
            if (s != block_state::running)
                return s == block_state::done;
            find_ready_warps(ex, n);
            continue;
        }
        size_t pick = ex.run->seeded ? next_random(ex.run->rng) % ex.ready.size() : 0;
        run_warp(ex, ex.ready[pick], n);
        warp_state s = complete_warp(ex, ex.ready[pick], n);
        if (s == warp_state::failed)
            return false;
        if (s == warp_state::blocked)
            ex.ready.erase(ex.ready.begin() + (ptrdiff_t)pick);
    }
}

/* ---- shared memory ----
 * The race check. Indexing a shared array touches the element (its value
 * is saved); when the thread next waits or ends, a touched element whose
 * value changed was written, one whose value did not was read. A block's
 * first touch of an array fills it with all-ones bytes (NaN; shared memory
 * starts undefined), so a write shows as a change. Limits: writing the
 * value already there counts as a read; a reference to an element kept
 * across a barrier, shuffle or __syncwarp, or a pointer into the array,
 * escapes the check. */

static const uint16_t NOBODY = 0xffff;

struct shadow_cell {
    uint64_t epoch;   /* when the access records below were made */
    uint64_t written; /* the epoch of the last write; before the block's: none in this block */
    uint32_t write_clock, read_clock[2]; /* warp_clock at the access */
    uint16_t writer, reader[2];          /* threads; two readers: any writer differs from one */
};

shared_meta::shared_meta(const char *name_, unsigned rank_, const size_t *extent_,
                         size_t element_bytes_, void *data_)
    : name(name_), rank(rank_), count(1), element_bytes(element_bytes_),
      data((unsigned char *)data_), poisoned(0)
{
    for (unsigned d = 0; d < 3; d++) {
        extent[d] = d < rank ? extent_[d] : 1;
        count *= extent[d];
    }
    shadow = new shadow_cell[count](); /* epoch 0: before any block */
}
shared_meta::~shared_meta() { delete[] shadow; }

/* "name[i][j]" of element `index`, or of the declaration when index is SIZE_MAX. */
static void element_name(const shared_meta &m, size_t index, char *buf, size_t n)
{
    size_t at[3], rest = index;
    for (unsigned d = m.rank; d-- > 0;) {
        at[d] = index == SIZE_MAX ? m.extent[d] : rest % m.extent[d];
        rest /= m.extent[d];
    }
    int k = snprintf(buf, n, "%s", m.name);
    for (unsigned d = 0; d < m.rank && k >= 0 && (size_t)k < n; d++)
        k += snprintf(buf + k, n - k, "[%zu]", at[d]);
}

static const char *access_name(access kind) { return kind == access::read ? "reads" : "writes"; }

/* Whether thread t's access, made at warp clock `clock`, happened before
 * u's current one through a __syncwarp both passed (u's last). */
static bool warp_synced(const fiber &u, unsigned t, uint32_t clock)
{
    return t / 32 == u.index / 32 && u.sync_clock > clock && u.sync_mask >> (t % 32) & 1;
}

static bool conflicts(const fiber &u, uint16_t t, uint32_t clock)
{
    return t != NOBODY && t != u.index && !warp_synced(u, t, clock);
}

static void report_race(executor &ex, const shared_meta &m, size_t i, const fiber &u, access kind,
                        uint16_t t, access t_kind)
{
    if (ex.run->race_said)
        return;
    ex.run->race_said = true;
    char element[96];
    element_name(m, i, element, sizeof element);
    report(nullptr, "data race on shared %s: thread %s %s it and thread %s %s it between the same "
           "two barriers", element, thread_name(u).s, access_name(kind),
           thread_name(ex.fibers[t]).s, access_name(t_kind));
}

/* An unwritten element read is reported at the end of its barrier
 * interval, unless a write by another thread in the same interval makes it
 * a race (reported instead). */
static void flush_unwritten(executor &ex)
{
    grid_run &r = *ex.run;
    if (r.unwritten.meta && !r.race_said && !r.unwritten_said) {
        r.unwritten_said = true;
        char element[96];
        element_name(*r.unwritten.meta, r.unwritten.index, element, sizeof element);
        report(&ex.fibers[r.unwritten.thread], "reads shared %s, which no thread of the block has "
               "written (shared memory starts undefined)", element);
    }
    r.unwritten.meta = nullptr;
}

static void remember_reader(shadow_cell &c, const fiber &u, uint32_t clock)
{
    for (int r = 0; r < 2; r++)
        if (c.reader[r] == NOBODY || c.reader[r] == u.index) {
            c.reader[r] = (uint16_t)u.index;
            c.read_clock[r] = clock;
            return;
        }
}

static void record_access(executor &ex, const shared_meta &m, size_t i, const fiber &u,
                          access kind)
{
    shadow_cell &c = m.shadow[i];
    if (c.epoch != ex.epoch) {
        c.epoch = ex.epoch;
        c.writer = c.reader[0] = c.reader[1] = NOBODY;
    }
    if (kind == access::read && c.written < ex.block_epoch && !ex.run->unwritten.meta)
        ex.run->unwritten = {&m, i, u.index};
    if (conflicts(u, c.writer, c.write_clock))
        report_race(ex, m, i, u, kind, c.writer, access::write);
    else if (kind == access::write)
        for (int r = 0; r < 2; r++)
            if (conflicts(u, c.reader[r], c.read_clock[r])) {
                report_race(ex, m, i, u, kind, c.reader[r], access::read);
                break;
            }
    if (kind == access::read) {
        remember_reader(c, u, ex.warp_clock);
    } else {
        c.writer = (uint16_t)u.index;
        c.write_clock = ex.warp_clock;
        c.written = ex.epoch;
    }
}

static void record_touches(executor &ex, const fiber &u)
{
    for (const touch &t : ex.touches) {
        const unsigned char *now = t.meta->data + t.index * t.meta->element_bytes;
        bool changed = memcmp(now, &ex.saved[t.saved], t.meta->element_bytes) != 0;
        record_access(ex, *t.meta, t.index, u, changed ? access::write : access::read);
    }
    ex.touches.clear();
    ex.saved.clear();
}

void shared_touch(shared_meta &m, size_t i)
{
    executor *ex = running;
    if (!ex || !ex->run->racecheck)
        return;
    if (m.poisoned != ex->block_epoch) {
        memset(m.data, 0xff, m.count * m.element_bytes);
        m.poisoned = ex->block_epoch;
    }
    const unsigned char *element = m.data + i * m.element_bytes;
    ex->touches.push_back({&m, i, ex->saved.size()});
    ex->saved.insert(ex->saved.end(), element, element + m.element_bytes);
}

void shared_index_error(const shared_meta &m, unsigned dim, long long i)
{
    char declared[96];
    element_name(m, SIZE_MAX, declared, sizeof declared);
    if (!running) {
        cudaemu_report("index %lld out of bounds of shared %s (outside a kernel)", i, declared);
        return;
    }
    if (running->run->bounds_said)
        return;
    running->run->bounds_said = true;
    report(running->cur, "index %lld out of bounds in dimension %u of shared %s", i, dim + 1,
           declared);
}

/* ---- grids ---- */

/* The knobs, read at each launch (a test may change them between two). */
static void read_knobs(executor &ex, grid_run &run)
{
    const char *seed = getenv("CUDAEMU_SEED"), *racecheck = getenv("CUDAEMU_RACECHECK");
    run.seeded = seed && *seed;
    run.rng = run.seeded ? strtoull(seed, nullptr, 0) ^ (++ex.launches * 0x2545f4914f6cdd1dull) : 0;
    run.racecheck = !racecheck || strcmp(racecheck, "0") != 0;
}

/* Gives the first fibers the coordinates of a block's threads. */
static void place_threads(executor &ex, const dim3 &block)
{
    unsigned n = block.x * block.y * block.z;
    if (ex.fibers.size() < n)
        ex.fibers.resize(n);
    for (unsigned i = 0; i < n; i++) {
        ex.fibers[i].index = i;
        ex.fibers[i].tid = {i % block.x, i / block.x % block.y, i / (block.x * block.y)};
    }
}

/* The order of the grid's blocks when seeded (else index order, empty). */
static std::vector<uint32_t> block_order(grid_run &run, uint64_t blocks)
{
    std::vector<uint32_t> order;
    if (!run.seeded)
        return order;
    order.resize(blocks);
    for (uint64_t i = 0; i < blocks; i++)
        order[i] = (uint32_t)i;
    for (uint64_t k = blocks; k > 1; k--)
        std::swap(order[k - 1], order[next_random(run.rng) % k]);
    return order;
}

static void run_grid(const launch_config &c, const char *kernel, const std::function<void()> &body)
{
    executor &ex = host_executor;
    grid_run run{};
    run.kernel = kernel;
    run.body = &body;
    read_knobs(ex, run);
    ex.run = &run;
    running = &ex;
    place_threads(ex, c.block);
    coords.block_dim = c.block;
    coords.grid_dim = c.grid;
    uint64_t blocks = (uint64_t)c.grid.x * c.grid.y * c.grid.z;
    std::vector<uint32_t> order = block_order(run, blocks);
    for (uint64_t i = 0; i < blocks; i++) {
        uint64_t b = run.seeded ? order[i] : i;
        coords.block = {(unsigned)(b % c.grid.x), (unsigned)(b / c.grid.x % c.grid.y),
                        (unsigned)(b / c.grid.x / c.grid.y)};
        if (!run_block(ex, c.block.x * c.block.y * c.block.z))
            break;
    }
    ex.cur = nullptr;
    ex.run = nullptr;
    running = nullptr;
    coords.thread = nullptr;
}

/* Why CUDA rejects the launch's shape, or null. */
static const char *bad_shape(const launch_config &c)
{
    const dim3 &g = c.grid, &b = c.block;
    if (!g.x || !g.y || !g.z)
        return "a grid dimension is 0";
    if (!b.x || !b.y || !b.z)
        return "a block dimension is 0";
    if ((unsigned long long)b.x * b.y * b.z > stack_pool::MAX)
        return "more than 1024 threads a block";
    if (b.x > 1024 || b.y > 1024 || b.z > 64)
        return "a block dimension over its limit (1024, 1024, 64)";
    if (g.x > 0x7fffffffu || g.y > 65535 || g.z > 65535)
        return "a grid dimension over its limit (2^31 - 1, 65535, 65535)";
    return nullptr;
}

/* The most bytes of kernel parameters (CUDA 12.1 on Volta and later). */
static const size_t MAX_PARAM_BYTES = 32764;

bool check_launch(const launch_config &c, const char *kernel, size_t param_bytes)
{
    if (const char *why = bad_shape(c)) {
        cudaemu_report("launch of %s with grid (%u,%u,%u), block (%u,%u,%u): %s "
                       "(cudaErrorInvalidConfiguration)", kernel, c.grid.x, c.grid.y, c.grid.z,
                       c.block.x, c.block.y, c.block.z, why);
        fail(cudaErrorInvalidConfiguration);
        return false;
    }
    if (param_bytes > MAX_PARAM_BYTES) {
        cudaemu_report("launch of %s: %zu bytes of parameters, over the limit of %zu", kernel,
                       param_bytes, MAX_PARAM_BYTES);
        fail(cudaErrorInvalidValue);
        return false;
    }
    if (!check_stream_device(kernel, c.stream)) {
        fail(cudaErrorInvalidResourceHandle);
        return false;
    }
    if (c.shared_bytes)
        cudaemu_report("launch of %s: %zu bytes of dynamic shared memory requested (not emulated)",
                       kernel, c.shared_bytes);
    return true;
}

void launch(const launch_config &c, const char *kernel, std::function<void()> body)
{
    use_device();
    enqueue(c.stream, kernel, [c, kernel, body]() { run_grid(c, kernel, body); });
}

void check_pointer_arg(const launch_config &c, const char *kernel, int index, const void *p)
{
    if (!p)
        return;
    if (!is_device_or_pinned(p)) {
        cudaemu_report("launch of %s: argument %d (%p) is neither NULL nor device or pinned host "
                       "memory", kernel, index, p);
        return;
    }
    int dev = device_of(p), stream_dev = stream_device(c.stream);
    if (is_device(p) && dev != stream_dev)
        cudaemu_report("launch of %s: argument %d (%p) is memory of GPU %d, but the launch's "
                       "stream is GPU %d's (peer access is never enabled)", kernel, index, p, dev,
                       stream_dev);
}
} // namespace cudaemu

extern "C" int cudaemu_grid_cap(int cap)
{
    const char *e = getenv("CUDAEMU_GRID_CAP");
    int lower = e ? atoi(e) : 0;
    return lower > 0 && lower < cap ? lower : cap;
}
