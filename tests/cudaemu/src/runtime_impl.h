/* The emulated runtime's own state, shared by its files: runtime.cpp
 * (settings, reports, errors, devices), memory.cpp (allocations, copies),
 * stream.cpp (work queues, streams, events, synchronisation) and graph.cpp
 * (capture, graphs). Not for the other parts of the emulator: they use
 * internal.h. */
#ifndef CUDAEMU_RUNTIME_IMPL_H
#define CUDAEMU_RUNTIME_IMPL_H
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "internal.h"

namespace cudaemu {

/* ---- settings (runtime.cpp), read from the environment at first use ---- */

struct settings_t {
    int devices;             /* CUDAEMU_DEVICES, default 1 */
    size_t mem_bytes;        /* CUDAEMU_MEM_MB per GPU, default 8192 */
    bool lazy;               /* CUDAEMU_LAZY=1 */
    unsigned long long seed; /* CUDAEMU_SEED, default 0 */
    double hang_s;           /* CUDAEMU_HANG_S, default 120 */
    bool verbose;            /* CUDAEMU_VERBOSE=1: print notes */
    bool reports_continue;   /* CUDAEMU_REPORTS=continue */
    std::string fault_what;  /* CUDAEMU_FAULT=<what>[:N] */
    unsigned long fault_nth; /* N, default 1 */
};
const settings_t &settings();

/* ---- devices and errors (runtime.cpp) ---- */

/* What every call that works in a context does first: creates the current
 * device's primary context and returns its sticky error, if any (recorded as
 * the last error). In eager mode it also lets waiting work make progress. */
cudaError_t enter();
bool valid_device(int d);
/* The sticky error of device d once seen (recorded as the last error). */
cudaError_t sticky(int d);
/* An op of device d faulted: its context is lost, the error still unseen. */
void fault_device(int d);
/* Called by synchronising calls on device d: a fault that happened becomes
 * visible and sticky; returns it (recorded as the last error). */
cudaError_t fault_seen(int d);
bool device_faulted(int d); /* a fault happened, seen or not */

/* ---- work queues (stream.cpp) ---- */

/* The lock over queues, streams, events and captures. Never held while an
 * op runs; memory.cpp's lock may be taken inside it, not the other way. */
extern std::mutex sched_mu;
using lock_t = std::unique_lock<std::mutex>;

struct queue;
struct dep { /* satisfied once q has completed its op number `ticket` */
    std::shared_ptr<queue> q;
    uint64_t ticket;
};
struct op {
    uint64_t seq;    /* process-wide enqueue order */
    uint64_t ticket; /* position in its queue, from 1 */
    std::string what;
    std::function<void()> run;
    std::function<bool()> done;
    std::vector<dep> deps; /* events waited on, implicit legacy-stream order */
    bool started = false;  /* run has been called; done not yet true */
};
/* The work of one stream, in order. A destroyed stream's queue lives on
 * (held by the scheduler and by events recorded on it) until drained. */
struct queue {
    int device = 0;
    bool legacy = false;   /* the device's legacy default stream */
    bool blocking = false; /* created without cudaStreamNonBlocking */
    bool orphan = false;   /* its stream was destroyed */
    const void *handle = nullptr;
    uint64_t enqueued = 0, completed = 0;
    std::deque<op> ops;
};
std::string describe(const queue &q); /* "stream 0x... (cuda:1)" */

/* Every op enqueued so far on q (and, for a legacy stream, on the blocking
 * streams it waits for): what an event records and a sync waits for. */
std::vector<dep> tail_deps(const std::shared_ptr<queue> &q);
/* The queue of a stream handle (NULL, cudaStreamLegacy: the current
 * device's legacy stream); NULL after a report when s is not a live stream. */
std::shared_ptr<queue> resolve(cudaStream_t s, const char *call);
/* enqueue with sched_mu held: `queued`, if given, is set to the op's place
 * in its queue (q NULL when it was captured instead); the op also waits
 * for `after`. */
cudaError_t submit(lock_t &lk, cudaStream_t s, const char *what, std::function<void()> run,
                   std::function<bool()> done, dep *queued = nullptr, std::vector<dep> after = {});
/* Makes progress until every dep is satisfied; cudaErrorLaunchTimeout after
 * a report when nothing moves for CUDAEMU_HANG_S seconds. */
cudaError_t wait_for(lock_t &lk, const std::vector<dep> &deps, const char *call);
/* Eager mode: runs, without waiting, what became runnable (ops behind a
 * collective whose `done` turned true). Called with sched_mu not held. */
void poll();
/* Waits for everything queued on device d (every device when d < 0). */
cudaError_t wait_device(lock_t &lk, int d, const char *call);
/* Runs an op's body unless CUDAEMU_FAULT picks it, which faults device d. */
void execute(const std::string &what, int device, const std::function<void()> &run);
/* A seeded pseudo-random number below n (CUDAEMU_SEED). */
unsigned random_below(unsigned n);

/* ---- capture (graph.cpp); all called with sched_mu held ---- */

struct graph_node {
    std::string what;
    std::function<void()> run;
    std::function<bool()> done;
    std::vector<size_t> deps; /* indices of earlier nodes */
};
struct capture {
    CUgraph_st *graph;
    CUstream_st *origin;
    cudaStreamCaptureMode mode;
    std::thread::id thread; /* that began it */
    bool active = true, invalidated = false;
    std::vector<CUstream_st *> streams; /* origin, then those forked in */
};

/* A call CUDA deems unsafe during capture, made while a capture forbids
 * it (this thread's Global/ThreadLocal capture, any thread's Global one):
 * reports, invalidates that capture and returns true. */
bool capture_forbids(const char *call);
/* Legacy-stream work while this thread captures: reports, invalidates. */
bool legacy_use_breaks_capture(const char *what, int device);
/* Records an op into the capture s takes part in. */
cudaError_t record_node(CUstream_st *s, const char *what, std::function<void()> run,
                        std::function<bool()> done);
bool capturing(cudaStream_t s); /* s takes part in an active capture */
/* cudaEventRecord on a capturing stream: e stands for s's captured work. */
void record_in_capture(CUevent_st *e, CUstream_st *s);
/* cudaStreamWaitEvent on an event recorded in a capture: s forks into the
 * capture, or joins work back. */
cudaError_t join_capture(cudaStream_t s, CUevent_st *e);
/* A stream destroyed while taking part in a capture leaves it (invalid). */
void leave_capture(CUstream_st *s);
/* Invalidates a capture after the report its caller made. */
void invalidate(capture &c);
} // namespace cudaemu

/* The handles behind cudaStream_t, cudaEvent_t, cudaGraph_t and
 * cudaGraphExec_t. */
struct CUstream_st {
    std::shared_ptr<cudaemu::queue> q;
    unsigned flags = 0;
    std::shared_ptr<cudaemu::capture> cap; /* the capture it takes part in */
    std::vector<size_t> frontier;          /* nodes its next captured op follows */
};
struct CUevent_st {
    int device = 0;
    unsigned flags = 0;
    std::vector<cudaemu::dep> recorded; /* the work its last record covers */
    std::shared_ptr<cudaemu::capture> cap; /* last recorded inside this capture */
    std::vector<size_t> nodes;             /* ... after these nodes */
};
struct CUgraph_st {
    std::vector<cudaemu::graph_node> nodes;
};
struct CUgraphExec_st {
    std::shared_ptr<const std::vector<cudaemu::graph_node>> nodes;
};
#endif
