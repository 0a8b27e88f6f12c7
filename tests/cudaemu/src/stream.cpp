/* Work queues, streams, events and the calls that wait for them.
 *
 * Every stream has a queue of ops; an op starts once the op before it on
 * its stream has completed and its dependencies (events waited on, the
 * legacy stream's implicit order) are satisfied, and completes when its
 * `done` (if any) turns true. Eager mode runs runnable ops at once, in
 * enqueue order; lazy mode (CUDAEMU_LAZY=1) runs them only inside calls
 * that wait, picking among the runnable ops of all streams in a seeded
 * random order, so a missing event between two streams shows. Whichever
 * thread makes progress runs the op, never two at once (`busy`), with
 * sched_mu released so that ops may call back into the emulator. */
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <unordered_set>
#include <unistd.h>

#include "runtime_impl.h"

namespace cudaemu {
std::mutex sched_mu;

namespace {
/* The containers are never destroyed: a thread may still call in while the
 * process exits, and what they hold stays reachable for leak checkers. */
auto &queues = *new std::vector<std::shared_ptr<queue>>; /* of live streams, orphans with work */
auto &legacy_queues = *new std::vector<std::shared_ptr<queue>>; /* by device, made on first use */
auto &live_streams = *new std::unordered_set<const CUstream_st *>;
auto &live_events = *new std::unordered_set<const CUevent_st *>;
uint64_t last_seq;
uint64_t generation;             /* bumped by every push */
std::atomic<uint64_t> progress;  /* bumped by every op or graph node run, every op completed */
std::atomic<int> executing;      /* ops or graph nodes running now (a long kernel is progress) */
bool busy;                       /* an op's run or done is being called */
thread_local bool in_op;
std::atomic<long> queued_ops; /* lets poll() skip the lock */

bool satisfied(const dep &d) { return d.q->completed >= d.ticket; }

bool runnable(const queue &q)
{
    if (q.ops.empty())
        return false;
    const op &o = q.ops.front();
    return o.started || std::all_of(o.deps.begin(), o.deps.end(), satisfied);
}

std::shared_ptr<queue> legacy_queue(int d)
{
    if ((size_t)d >= legacy_queues.size())
        legacy_queues.resize(d + 1);
    std::shared_ptr<queue> &q = legacy_queues[d];
    if (!q) {
        q = std::make_shared<queue>();
        q->device = d;
        q->legacy = true;
        queues.push_back(q);
    }
    return q;
}

/* The implicit order of the legacy stream: its work waits for the blocking
 * streams of its device, and theirs for it. */
std::vector<dep> implicit_deps(const queue &q)
{
    std::vector<dep> deps;
    auto add = [&](const std::shared_ptr<queue> &r) {
        if (r->enqueued > r->completed)
            deps.push_back({r, r->enqueued});
    };
    if (q.legacy) {
        for (auto &r : queues)
            if (r->device == q.device && r->blocking)
                add(r);
    } else if (q.blocking) {
        add(legacy_queue(q.device));
    }
    return deps;
}

/* Starts q's first op, or polls it when started; true when that moved.
 * A lost context (a fault on q's device) runs nothing more. */
bool advance(lock_t &lk, queue &q)
{
    op &o = q.ops.front();
    bool lost = device_faulted(q.device), finished;
    busy = in_op = true;
    lk.unlock();
    if (!o.started) {
        if (!lost)
            execute(o.what, q.device, o.run);
        finished = lost || !o.done;
    } else {
        finished = lost || o.done();
    }
    lk.lock();
    busy = in_op = false;
    if (finished) {
        q.completed = o.ticket;
        q.ops.pop_front();
        queued_ops--;
    } else if (o.started) {
        return false;
    } else {
        o.started = true;
    }
    progress++;
    return true;
}

void drop_drained_orphans()
{
    queues.erase(std::remove_if(queues.begin(), queues.end(),
                                [](const std::shared_ptr<queue> &q) { return q->orphan && q->ops.empty(); }),
                 queues.end());
}

/* One unit of progress: the first runnable op (in enqueue order, or a
 * seeded-random one in lazy mode) started, or a started one found done.
 * False when nothing could move. */
bool step(lock_t &lk)
{
    if (busy)
        return false;
    drop_drained_orphans();
    for (;;) {
        uint64_t seen = generation;
        std::vector<queue *> ready;
        for (auto &q : queues)
            if (runnable(*q))
                ready.push_back(q.get());
        if (settings().lazy)
            for (size_t k = ready.size(); k > 1; k--)
                std::swap(ready[k - 1], ready[random_below((unsigned)k)]);
        else
            std::sort(ready.begin(), ready.end(),
                      [](const queue *a, const queue *b) { return a->ops.front().seq < b->ops.front().seq; });
        bool stale = false;
        for (queue *q : ready) {
            if (advance(lk, *q))
                return true;
            if ((stale = generation != seen)) /* pushed while we polled: look again */
                break;
        }
        if (!stale)
            return false;
    }
}

void drain(lock_t &lk)
{
    while (step(lk)) {
    }
}

/* cudaEventQuery, cudaStreamQuery: eager mode completes what it can; lazy
 * mode takes a few random steps (or none), so a query may see work
 * unfinished that a wait would have run. */
void some_progress(lock_t &lk)
{
    if (!settings().lazy) {
        drain(lk);
        return;
    }
    for (unsigned n = random_below(3); n > 0 && step(lk); n--) {
    }
}

/* Where a wait on d is stuck, for the hang report. */
std::string blocker(const dep &d)
{
    const queue &q = *d.q;
    std::string s = describe(q);
    if (q.ops.empty())
        return s;
    const op &o = q.ops.front();
    if (o.started)
        return s + ", whose op " + o.what + " started and never completed";
    for (const dep &w : o.deps)
        if (!satisfied(w))
            return s + ", whose op " + o.what + " waits on " + blocker(w);
    return s + ", at op " + o.what;
}

/* A live event, or NULL after a report. */
CUevent_st *live_event(cudaEvent_t e, const char *call)
{
    if (live_events.count(e))
        return e;
    cudaemu_report("%s: %p is not a live event (destroyed, or never created)", call, (void *)e);
    return nullptr;
}

/* An event last recorded in a capture stands for graph nodes, not work:
 * querying or waiting on it from the host is invalid. */
bool captured_event(CUevent_st *e, const char *call)
{
    if (!e->cap)
        return false;
    cudaemu_report("%s on an event last recorded inside a stream capture", call);
    if (e->cap->active)
        invalidate(*e->cap);
    return true;
}

/* A stream taking part in a capture cannot be synchronised or queried. */
bool capturing_stream(cudaStream_t s, const char *call)
{
    if (!capturing(s))
        return false;
    cudaemu_report("%s on a stream taking part in a capture", call);
    invalidate(*s->cap);
    return true;
}

/* cudaDeviceSynchronize while a stream of the device captures. */
bool device_captures(int d, const char *call)
{
    for (const CUstream_st *s : live_streams)
        if (s->cap && s->cap->active && s->q->device == d) {
            cudaemu_report("%s while stream %p of cuda:%d takes part in a capture", call,
                           (const void *)s, d);
            invalidate(*s->cap);
            return true;
        }
    return false;
}

/* The end of a query: NotReady (never recorded as the last error), or
 * the device's fault once the work is done. */
cudaError_t query_result(const std::vector<dep> &deps, int device)
{
    if (!std::all_of(deps.begin(), deps.end(), satisfied))
        return cudaErrorNotReady;
    return fault_seen(device);
}
} // namespace

unsigned random_below(unsigned n)
{
    static unsigned long long state = settings().seed;
    unsigned long long z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (unsigned)((z ^ (z >> 31)) % n);
}

std::string describe(const queue &q)
{
    char buf[96];
    if (q.legacy)
        snprintf(buf, sizeof buf, "the legacy default stream of cuda:%d", q.device);
    else
        snprintf(buf, sizeof buf, "stream %p (cuda:%d%s)", q.handle, q.device,
                 q.orphan ? ", destroyed" : "");
    return buf;
}

std::vector<dep> tail_deps(const std::shared_ptr<queue> &q)
{
    std::vector<dep> deps = implicit_deps(*q);
    deps.push_back({q, q->enqueued});
    return deps;
}

std::shared_ptr<queue> resolve(cudaStream_t s, const char *call)
{
    if (!s || s == cudaStreamLegacy)
        return legacy_queue(current_device());
    if (live_streams.count(s))
        return s->q;
    cudaemu_report("%s: %p is not a live stream (destroyed, or never created)", call, (void *)s);
    return nullptr;
}

void execute(const std::string &what, int device, const std::function<void()> &run)
{
    static unsigned long matches; /* only the busy thread gets here */
    const settings_t &s = settings();
    if (!s.fault_what.empty() && what == s.fault_what && ++matches == s.fault_nth)
        fault_device(device); /* the op never takes effect */
    if (device_faulted(device))
        return;
    executing++;
    run();
    executing--;
    progress++;
}

void poll()
{
    if (settings().lazy || queued_ops == 0)
        return;
    lock_t lk(sched_mu);
    drain(lk);
}

cudaError_t submit(lock_t &lk, cudaStream_t s, const char *what, std::function<void()> run,
                   std::function<bool()> done, dep *queued, std::vector<dep> after)
{
    std::shared_ptr<queue> q = resolve(s, what);
    if (!q)
        return fail(cudaErrorInvalidResourceHandle);
    if (cudaError_t e = sticky(q->device))
        return e;
    if (q->legacy && legacy_use_breaks_capture(what, q->device))
        return fail(cudaErrorStreamCaptureImplicit);
    if (capturing(s))
        return record_node(s, what, std::move(run), std::move(done));
    if (q->legacy)
        cudaemu_note("%s on the legacy default stream", what);
    op o;
    o.seq = ++last_seq;
    o.ticket = ++q->enqueued;
    o.what = what;
    o.run = std::move(run);
    o.done = std::move(done);
    o.deps = implicit_deps(*q);
    o.deps.insert(o.deps.end(), after.begin(), after.end());
    if (queued)
        *queued = {q, o.ticket};
    q->ops.push_back(std::move(o));
    queued_ops++;
    generation++;
    if (!settings().lazy)
        drain(lk);
    return cudaSuccess;
}

cudaError_t wait_for(lock_t &lk, const std::vector<dep> &deps, const char *call)
{
    auto unmet = [&]() -> const dep * {
        for (const dep &d : deps)
            if (!satisfied(d))
                return &d;
        return nullptr;
    };
    if (in_op && unmet()) {
        cudaemu_report("%s from inside an op (a collective's run or done) would wait forever", call);
        return fail(cudaErrorNotPermitted);
    }
    using clock = std::chrono::steady_clock;
    uint64_t seen = progress;
    clock::time_point since = clock::now();
    while (const dep *d = unmet()) {
        if (step(lk))
            continue;
        lk.unlock();
        usleep(100);
        lk.lock();
        if (progress != seen || executing) {
            seen = progress;
            since = clock::now();
        } else if (std::chrono::duration<double>(clock::now() - since).count() > settings().hang_s) {
            cudaemu_report("%s: no progress for %g s (CUDAEMU_HANG_S) waiting on %s", call,
                           settings().hang_s, blocker(*d).c_str());
            return fail(cudaErrorLaunchTimeout);
        }
    }
    return cudaSuccess;
}

cudaError_t wait_device(lock_t &lk, int d, const char *call)
{
    std::vector<dep> deps;
    for (auto &q : queues)
        if (d < 0 || q->device == d)
            deps.push_back({q, q->enqueued});
    return wait_for(lk, deps, call);
}

cudaError_t enqueue(cudaStream_t s, const char *what, std::function<void()> run,
                    std::function<bool()> done)
{
    if (cudaError_t e = enter())
        return e;
    lock_t lk(sched_mu);
    return submit(lk, s, what, std::move(run), std::move(done));
}

bool check_stream_device(const char *what, cudaStream_t s)
{
    lock_t lk(sched_mu);
    std::shared_ptr<queue> q = resolve(s, what);
    if (!q || q->device == current_device())
        return q != nullptr;
    cudaemu_report("%s on %s while cuda:%d is current: CUDA requires the stream's device to be "
                   "current", what, describe(*q).c_str(), current_device());
    return false;
}

int stream_device(cudaStream_t s)
{
    lock_t lk(sched_mu);
    if (!s || s == cudaStreamLegacy)
        return current_device();
    return live_streams.count(s) ? s->q->device : -1;
}
} // namespace cudaemu

using namespace cudaemu;

/* ---- streams ---- */

extern "C" cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags)
{
    if (cudaError_t e = enter())
        return e;
    lock_t lk(sched_mu);
    *s = new CUstream_st();
    (*s)->flags = flags;
    (*s)->q = std::make_shared<queue>();
    (*s)->q->device = current_device();
    (*s)->q->blocking = !(flags & cudaStreamNonBlocking);
    (*s)->q->handle = *s;
    queues.push_back((*s)->q);
    live_streams.insert(*s);
    if ((*s)->q->blocking)
        cudaemu_note("a blocking stream (no cudaStreamNonBlocking): its work and the legacy "
                     "default stream's wait for each other");
    return cudaSuccess;
}

extern "C" cudaError_t cudaStreamCreate(cudaStream_t *s)
{
    return cudaStreamCreateWithFlags(s, cudaStreamDefault);
}

/* Work still queued runs on: the queue outlives its stream. */
extern "C" cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    cudaError_t e = enter();
    lock_t lk(sched_mu);
    if (!s || s == cudaStreamLegacy || !live_streams.count(s)) {
        cudaemu_report("cudaStreamDestroy(%p): not a live stream", (void *)s);
        return fail(cudaErrorInvalidResourceHandle);
    }
    if (capturing(s)) {
        cudaemu_report("cudaStreamDestroy of a stream taking part in a capture");
        leave_capture(s);
    }
    live_streams.erase(s);
    s->q->orphan = true;
    delete s;
    return e;
}

extern "C" cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    if (cudaError_t e = enter())
        return e;
    lock_t lk(sched_mu);
    std::shared_ptr<queue> q = resolve(s, "cudaStreamSynchronize");
    if (!q)
        return fail(cudaErrorInvalidResourceHandle);
    if (capturing_stream(s, "cudaStreamSynchronize") || capture_forbids("cudaStreamSynchronize"))
        return fail(cudaErrorStreamCaptureUnsupported);
    if (cudaError_t e = wait_for(lk, tail_deps(q), "cudaStreamSynchronize"))
        return e;
    return fault_seen(q->device);
}

extern "C" cudaError_t cudaStreamQuery(cudaStream_t s)
{
    if (cudaError_t e = enter())
        return e;
    lock_t lk(sched_mu);
    std::shared_ptr<queue> q = resolve(s, "cudaStreamQuery");
    if (!q)
        return fail(cudaErrorInvalidResourceHandle);
    if (capturing_stream(s, "cudaStreamQuery") || capture_forbids("cudaStreamQuery"))
        return fail(cudaErrorStreamCaptureUnsupported);
    some_progress(lk);
    return query_result(tail_deps(q), q->device);
}

extern "C" cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags)
{
    if (cudaError_t err = enter())
        return err;
    lock_t lk(sched_mu);
    std::shared_ptr<queue> q = resolve(s, "cudaStreamWaitEvent");
    if (!q || !live_event(e, "cudaStreamWaitEvent"))
        return fail(cudaErrorInvalidResourceHandle);
    if (e->cap)
        return join_capture(s, e);
    if (capturing(s) && !e->recorded.empty()) {
        cudaemu_report("cudaStreamWaitEvent: a capturing stream waits on an event recorded "
                       "outside the capture");
        invalidate(*s->cap);
        return fail(cudaErrorStreamCaptureIsolation);
    }
    if (e->recorded.empty()) /* never recorded: no work to wait for */
        return cudaSuccess;
    return submit(lk, s, "cudaStreamWaitEvent", [] {}, nullptr, nullptr, e->recorded);
}

/* ---- events ---- */

extern "C" cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags)
{
    if (cudaError_t err = enter())
        return err;
    lock_t lk(sched_mu);
    *e = new CUevent_st();
    (*e)->device = current_device();
    (*e)->flags = flags;
    live_events.insert(*e);
    return cudaSuccess;
}

extern "C" cudaError_t cudaEventCreate(cudaEvent_t *e)
{
    return cudaEventCreateWithFlags(e, cudaEventDefault);
}

extern "C" cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    cudaError_t err = enter();
    lock_t lk(sched_mu);
    if (!live_event(e, "cudaEventDestroy"))
        return fail(cudaErrorInvalidResourceHandle);
    live_events.erase(e);
    delete e;
    return err;
}

extern "C" cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    if (cudaError_t err = enter())
        return err;
    lock_t lk(sched_mu);
    std::shared_ptr<queue> q = resolve(s, "cudaEventRecord");
    if (!q || !live_event(e, "cudaEventRecord"))
        return fail(cudaErrorInvalidResourceHandle);
    if (e->device != q->device) {
        cudaemu_report("cudaEventRecord: an event of cuda:%d recorded on %s (event and stream "
                       "must belong to the same device)", e->device, describe(*q).c_str());
        return fail(cudaErrorInvalidResourceHandle);
    }
    if (cudaError_t err = sticky(q->device))
        return err;
    if (capturing(s)) {
        record_in_capture(e, s);
        return cudaSuccess;
    }
    if (q->legacy && legacy_use_breaks_capture("cudaEventRecord", q->device))
        return fail(cudaErrorStreamCaptureImplicit);
    e->cap.reset();
    e->nodes.clear();
    e->recorded = tail_deps(q);
    return cudaSuccess;
}

extern "C" cudaError_t cudaEventQuery(cudaEvent_t e)
{
    if (cudaError_t err = enter())
        return err;
    lock_t lk(sched_mu);
    if (!live_event(e, "cudaEventQuery"))
        return fail(cudaErrorInvalidResourceHandle);
    if (captured_event(e, "cudaEventQuery"))
        return fail(cudaErrorCapturedEvent);
    if (capture_forbids("cudaEventQuery"))
        return fail(cudaErrorStreamCaptureUnsupported);
    some_progress(lk);
    return query_result(e->recorded, e->device);
}

extern "C" cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    if (cudaError_t err = enter())
        return err;
    lock_t lk(sched_mu);
    if (!live_event(e, "cudaEventSynchronize"))
        return fail(cudaErrorInvalidResourceHandle);
    if (captured_event(e, "cudaEventSynchronize"))
        return fail(cudaErrorCapturedEvent);
    if (capture_forbids("cudaEventSynchronize"))
        return fail(cudaErrorStreamCaptureUnsupported);
    if (cudaError_t err = wait_for(lk, e->recorded, "cudaEventSynchronize"))
        return err;
    return fault_seen(e->device);
}

extern "C" cudaError_t cudaDeviceSynchronize(void)
{
    if (cudaError_t e = enter())
        return e;
    lock_t lk(sched_mu);
    int d = current_device();
    if (device_captures(d, "cudaDeviceSynchronize") || capture_forbids("cudaDeviceSynchronize"))
        return fail(cudaErrorStreamCaptureUnsupported);
    if (cudaError_t e = wait_device(lk, d, "cudaDeviceSynchronize"))
        return e;
    return fault_seen(d);
}
