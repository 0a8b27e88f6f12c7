/* Stream capture and graphs. A capture records each op of the streams
 * taking part in it as a graph node that depends on the stream's previous
 * node and on the nodes of the events it waited on; streams fork in by
 * waiting on an event recorded in the capture and must join back the same
 * way before cudaStreamEndCapture. The capture rules are CUDA's (the
 * programming guide's "Prohibited and Unhandled Operations"): a breach is
 * reported and invalidates the capture.
 *
 * A graph launch is one op on its stream that runs the graph's nodes in a
 * dependency order (seeded-random among the ready nodes in lazy mode); a
 * node with a `done` poll (a collective) holds back the nodes after it. */
#include <cuda_runtime.h>

#include <algorithm>

#include "runtime_impl.h"

namespace cudaemu {
namespace {
auto &captures = *new std::vector<std::shared_ptr<capture>>; /* active ones; never destroyed */

const char *mode_name(cudaStreamCaptureMode m)
{
    return m == cudaStreamCaptureModeGlobal        ? "Global"
           : m == cudaStreamCaptureModeThreadLocal ? "ThreadLocal"
                                                   : "Relaxed";
}

/* Whether c forbids this thread's unsafe calls. */
bool forbids(const capture &c)
{
    return c.mode == cudaStreamCaptureModeGlobal ||
           (c.mode == cudaStreamCaptureModeThreadLocal && c.thread == std::this_thread::get_id());
}

void end(capture &c)
{
    c.active = false;
    for (CUstream_st *s : c.streams) {
        s->cap.reset();
        s->frontier.clear();
    }
    captures.erase(std::find_if(captures.begin(), captures.end(),
                                [&](const std::shared_ptr<capture> &p) { return p.get() == &c; }));
}

/* The first node the origin's last nodes do not depend on: work forked
 * into the capture and never joined back; -1 when there is none. */
long unjoined(const capture &c)
{
    const std::vector<graph_node> &nodes = c.graph->nodes;
    std::vector<char> reached(nodes.size());
    std::vector<size_t> todo = c.origin->frontier;
    while (!todo.empty()) {
        size_t i = todo.back();
        todo.pop_back();
        if (reached[i])
            continue;
        reached[i] = 1;
        todo.insert(todo.end(), nodes[i].deps.begin(), nodes[i].deps.end());
    }
    auto it = std::find(reached.begin(), reached.end(), 0);
    return it == reached.end() ? -1 : it - reached.begin();
}

/* One launch of a graph, advanced by its op's run and done polls. */
struct graph_run {
    std::shared_ptr<const std::vector<graph_node>> nodes;
    int device;
    unsigned long long rng;
    enum state : char { WAITING, STARTED, COMPLETE };
    std::vector<state> states;
    size_t left;

    bool ready(size_t i) const
    {
        if (states[i] != WAITING)
            return false;
        for (size_t d : (*nodes)[i].deps)
            if (states[d] != COMPLETE)
                return false;
        return true;
    }

    void complete(size_t i)
    {
        states[i] = COMPLETE;
        left--;
    }

    /* Polls started nodes and runs ready ones until nothing moves; true
     * once every node completed. */
    bool advance()
    {
        for (bool moved = true; moved;) {
            moved = false;
            for (size_t i = 0; i < states.size(); i++)
                if (states[i] == STARTED && (device_faulted(device) || (*nodes)[i].done())) {
                    complete(i);
                    moved = true;
                }
            std::vector<size_t> ready_nodes;
            for (size_t i = 0; i < states.size(); i++)
                if (ready(i))
                    ready_nodes.push_back(i);
            if (ready_nodes.empty())
                continue;
            size_t i = ready_nodes[pick(ready_nodes.size())];
            const graph_node &n = (*nodes)[i];
            execute(n.what, device, n.run);
            states[i] = STARTED;
            if (!n.done)
                complete(i);
            moved = true;
        }
        return left == 0;
    }

    size_t pick(size_t n)
    {
        if (!settings().lazy)
            return 0;
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        return (size_t)((rng >> 33) % n);
    }
};
} // namespace

bool capture_forbids(const char *call)
{
    bool forbidden = false;
    for (auto &c : captures)
        if (forbids(*c)) {
            if (!forbidden)
                cudaemu_report("%s during the capture of stream %p (mode %s), which CUDA forbids: "
                               "the capture is invalidated", call, (void *)c->origin,
                               mode_name(c->mode));
            invalidate(*c);
            forbidden = true;
        }
    return forbidden;
}

/* Legacy-stream work is invalid while a blocking stream of its device
 * captures (CUDA), and a defect while this thread captures: the work was
 * meant for the graph. */
bool legacy_use_breaks_capture(const char *what, int device)
{
    for (auto &c : captures) {
        bool mine = c->thread == std::this_thread::get_id();
        bool blocking = std::any_of(c->streams.begin(), c->streams.end(), [&](CUstream_st *s) {
            return s->q->device == device && s->q->blocking;
        });
        if (mine || blocking) {
            cudaemu_report("%s on the legacy default stream of cuda:%d during the capture of "
                           "stream %p%s: the capture is invalidated", what, device,
                           (void *)c->origin, mine ? " by this thread" : " (a blocking stream)");
            invalidate(*c);
            return true;
        }
    }
    return false;
}

cudaError_t record_node(CUstream_st *s, const char *what, std::function<void()> run,
                        std::function<bool()> done)
{
    capture &c = *s->cap;
    if (c.invalidated)
        return fail(cudaErrorStreamCaptureInvalidated);
    c.graph->nodes.push_back({what, std::move(run), std::move(done), s->frontier});
    s->frontier = {c.graph->nodes.size() - 1};
    return cudaSuccess;
}

bool capturing(cudaStream_t s) { return s && s != cudaStreamLegacy && s->cap && s->cap->active; }

void invalidate(capture &c) { c.invalidated = true; }

void record_in_capture(CUevent_st *e, CUstream_st *s)
{
    e->cap = s->cap;
    e->nodes = s->frontier;
    e->recorded.clear();
}

cudaError_t join_capture(cudaStream_t s, CUevent_st *e)
{
    capture &c = *e->cap;
    const char *problem = !c.active                      ? "whose capture has ended"
                          : !s || s == cudaStreamLegacy ? "from the legacy default stream"
                          : capturing(s) && s->cap != e->cap ? "of another capture (captures cannot merge)"
                                                             : nullptr;
    if (problem) {
        cudaemu_report("cudaStreamWaitEvent on an event recorded in a capture, %s", problem);
        if (c.active)
            invalidate(c);
        return fail(cudaErrorStreamCaptureIsolation);
    }
    if (c.invalidated)
        return fail(cudaErrorStreamCaptureInvalidated);
    if (!capturing(s)) {
        s->cap = e->cap;
        s->frontier = e->nodes;
        c.streams.push_back(s);
        return cudaSuccess;
    }
    for (size_t n : e->nodes)
        if (std::find(s->frontier.begin(), s->frontier.end(), n) == s->frontier.end())
            s->frontier.push_back(n);
    return cudaSuccess;
}

void leave_capture(CUstream_st *s)
{
    capture &c = *s->cap;
    invalidate(c);
    c.streams.erase(std::find(c.streams.begin(), c.streams.end(), s));
    if (c.origin == s) {
        end(c);
        delete c.graph;
    }
    s->cap.reset();
}
} // namespace cudaemu

using namespace cudaemu;

extern "C" cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode)
{
    if (cudaError_t e = enter())
        return e;
    lock_t lk(sched_mu);
    if (!s || s == cudaStreamLegacy) {
        cudaemu_report("cudaStreamBeginCapture on the legacy default stream");
        return fail(cudaErrorStreamCaptureUnsupported);
    }
    if (!resolve(s, "cudaStreamBeginCapture"))
        return fail(cudaErrorInvalidResourceHandle);
    if (capturing(s)) {
        cudaemu_report("cudaStreamBeginCapture on a stream already taking part in a capture");
        return fail(cudaErrorIllegalState);
    }
    auto c = std::make_shared<capture>();
    c->graph = new CUgraph_st();
    c->origin = s;
    c->mode = mode;
    c->thread = std::this_thread::get_id();
    c->streams.push_back(s);
    s->cap = c;
    s->frontier.clear();
    captures.push_back(c);
    return cudaSuccess;
}

extern "C" cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g)
{
    *g = nullptr;
    lock_t lk(sched_mu);
    if (!resolve(s, "cudaStreamEndCapture"))
        return fail(cudaErrorInvalidResourceHandle);
    if (!capturing(s) || s->cap->origin != s) {
        cudaemu_report("cudaStreamEndCapture on a stream that did not begin a capture");
        return fail(cudaErrorIllegalState);
    }
    std::shared_ptr<capture> c = s->cap;
    if (c->mode != cudaStreamCaptureModeRelaxed && c->thread != std::this_thread::get_id()) {
        cudaemu_report("cudaStreamEndCapture from another thread than the one that began the "
                       "capture (mode %s)", mode_name(c->mode));
        invalidate(*c);
        return fail(cudaErrorStreamCaptureWrongThread);
    }
    long loose = c->invalidated ? -1 : unjoined(*c);
    end(*c);
    if (c->invalidated) {
        delete c->graph;
        return fail(cudaErrorStreamCaptureInvalidated);
    }
    if (loose >= 0) {
        cudaemu_report("cudaStreamEndCapture: captured op %s (node %ld) was forked off the origin "
                       "stream and never joined back", c->graph->nodes[loose].what.c_str(), loose);
        delete c->graph;
        return fail(cudaErrorStreamCaptureUnjoined);
    }
    *g = c->graph;
    return cudaSuccess;
}

extern "C" cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *status)
{
    lock_t lk(sched_mu);
    *status = cudaStreamCaptureStatusNone;
    if (s && s != cudaStreamLegacy && !resolve(s, "cudaStreamIsCapturing"))
        return fail(cudaErrorInvalidResourceHandle);
    if (capturing(s))
        *status = s->cap->invalidated ? cudaStreamCaptureStatusInvalidated
                                      : cudaStreamCaptureStatusActive;
    return cudaSuccess;
}

extern "C" cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t g,
                                            unsigned long long flags)
{
    if (cudaError_t e = enter())
        return e;
    if (!g)
        return fail(cudaErrorInvalidValue);
    *exec = new CUgraphExec_st();
    (*exec)->nodes = std::make_shared<const std::vector<graph_node>>(g->nodes);
    return cudaSuccess;
}

extern "C" cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s)
{
    if (cudaError_t e = enter())
        return e;
    if (!exec)
        return fail(cudaErrorInvalidValue);
    lock_t lk(sched_mu);
    std::shared_ptr<queue> q = resolve(s, "cudaGraphLaunch");
    if (!q)
        return fail(cudaErrorInvalidResourceHandle);
    auto r = std::make_shared<graph_run>();
    r->nodes = exec->nodes;
    r->device = q->device;
    r->rng = random_below(~0u);
    r->states.assign(r->nodes->size(), graph_run::WAITING);
    r->left = r->nodes->size();
    return submit(lk, s, "cudaGraphLaunch", [r]() { r->advance(); }, [r]() { return r->advance(); });
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
