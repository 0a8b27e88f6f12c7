/* Stand-in NCCL over the emulated GPUs, from NCCL 2.28's documented
 * contracts. Ranks are threads of one process (replicas) or processes
 * (mpirun); either way they meet in a POSIX shared-memory segment that the
 * unique id names. A collective is queued on its stream with
 * cudaemu::enqueue: `run` posts this rank's contribution into its slot of
 * the segment when the stream reaches it; `done`, polled, waits for every
 * rank's post, checks that all ranks called the same collective, and writes
 * the result (reduced in rank order, so bit-identical on every rank).
 *
 * Knobs: CUDAEMU_NCCL_SLOT_MB (largest collective, MiB; default 256) and
 * CUDAEMU_NCCL_FAULT=hang_init:<rank> | hang:<rank>[:<n>] | error:<rank>[:<n>]
 * (n: the rank's collective, counted from 0, where the fault strikes). */
#include <nccl.h>
#include <cuda_bf16.h>

#include <atomic>
#include <cerrno>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <signal.h>
#include <sys/mman.h>
#include <type_traits>
#include <unistd.h>
#include <vector>

#include "internal.h"

namespace {

/* ---- the shared segment ---- */

constexpr int max_ranks = 16;
constexpr int n_slots = 2; /* collective k of a rank goes to its slot k % n_slots */
constexpr unsigned config_magic = 0xcafebeef;
constexpr char id_magic[] = "cudaemu-nccl";

enum coll_kind : int32_t { coll_allreduce = 1, coll_broadcast = 2 };

/* What each rank says it is calling; all ranks must agree. */
struct op_desc {
    int32_t kind, dtype, op, root;
    uint64_t count;
};
struct shm_slot {
    uint64_t posted;   /* 1 + the sequence number of the collective posted here */
    uint64_t consumed; /* 1 + the last collective this rank read from everyone's slot */
    op_desc desc;
};
struct shm_rank {
    int32_t joined, device, pid;
    int32_t left; /* destroyed its communicator */
    shm_slot slot[n_slots];
};
/* All zero when created. Fields are read and written with the atomic
 * helpers below (lock-free, so they work across processes). */
struct shm_header {
    int32_t nranks, joined;
    int32_t failed; /* 1 + a rank that failed or aborted: no collective can complete */
    shm_rank rank[max_ranks];
};
constexpr size_t header_bytes = (sizeof(shm_header) + 4095) & ~(size_t)4095;

/* The unique id's contents. */
struct id_payload {
    char magic[sizeof id_magic];
    char name[64]; /* of the shared-memory segment */
    uint64_t slot_bytes;
};
static_assert(sizeof(id_payload) <= NCCL_UNIQUE_ID_BYTES, "the id holds the payload");

template <class T> T load(const T &x) { return __atomic_load_n(&x, __ATOMIC_ACQUIRE); }
template <class T> void store(T &x, T v) { __atomic_store_n(&x, v, __ATOMIC_RELEASE); }
template <class T> bool claim(T &x, T from, T to)
{
    return __atomic_compare_exchange_n(&x, &from, to, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

/* A failure of the emulator's host (not a defect of the program under test). */
void system_failure(const char *what, const char *name)
{
    fprintf(stderr, "cudaemu: NCCL: %s(%s): %s\n", what, name, strerror(errno));
}

bool process_alive(int pid) { return pid == getpid() || kill(pid, 0) == 0 || errno != ESRCH; }

/* Unlinks the segments of ids whose maker has died: a job that ended before
 * all its ranks joined (once they have, the name is unlinked at once). */
void sweep_orphans()
{
    DIR *dir = opendir("/dev/shm");
    if (!dir)
        return;
    while (struct dirent *e = readdir(dir)) {
        int pid;
        if (sscanf(e->d_name, "cudaemu-nccl-%d-", &pid) == 1 && !process_alive(pid))
            shm_unlink(("/" + std::string(e->d_name)).c_str());
    }
    closedir(dir);
}

/* Sleeps a little longer each time, up to 1 ms: the waits of a rank for its peers. */
void backoff(unsigned *us)
{
    *us = *us ? (*us < 1000 ? *us * 2 : 1000) : 20;
    usleep(*us);
}

/* ---- faults ---- */

enum class fault_kind { none, hang_init, hang, error };
struct fault {
    fault_kind kind = fault_kind::none;
    int rank = -1;
    uint64_t at = 0; /* the collective it strikes */
};

fault parse_fault()
{
    fault f;
    const char *e = getenv("CUDAEMU_NCCL_FAULT");
    if (!e || !*e)
        return f;
    static const struct {
        const char *prefix;
        fault_kind kind;
    } kinds[] = {{"hang_init:", fault_kind::hang_init}, {"hang:", fault_kind::hang},
                 {"error:", fault_kind::error}};
    for (const auto &k : kinds) {
        size_t n = strlen(k.prefix);
        if (strncmp(e, k.prefix, n) != 0)
            continue;
        char *end;
        f.rank = (int)strtol(e + n, &end, 10);
        if (*end == ':')
            f.at = strtoull(end + 1, &end, 10);
        if (*end == '\0' && end != e + n) {
            f.kind = k.kind;
            return f;
        }
    }
    cudaemu_report("CUDAEMU_NCCL_FAULT=%s: not hang_init:<rank>, hang:<rank>[:<n>] or "
                   "error:<rank>[:<n>]",
                   e);
    return f;
}

/* ---- communicators ---- */

enum class phase { joining, ready, finalizing, finalized, aborted };

/* A rank's view of its communicator; shared with the collectives still
 * queued on streams, so it outlives ncclCommDestroy / ncclCommAbort. */
struct comm_state {
    std::mutex mu;
    int rank = 0, nranks = 0, device = 0;
    bool blocking = true;
    fault f;
    std::string name;
    int fd = -1; /* the segment's, to reserve room in it */
    shm_header *h = nullptr;
    char *data = nullptr;
    size_t map_bytes = 0, slot_bytes = 0;
    phase ph = phase::joining;
    ncclResult_t error = ncclSuccess; /* sticky: what ncclCommGetAsyncError returns */
    uint64_t next_seq = 0;            /* collectives run so far, in stream order */

    /* What finalize waits for: per stream, an event on this GPU recorded
     * after the last collective queued there (captured ones run at their
     * graph's launches, untracked). Its own lock: `done` never takes it. */
    std::mutex events_mu;
    std::map<cudaStream_t, cudaEvent_t> last_on;

    ~comm_state()
    {
        if (h)
            munmap(h, map_bytes);
        if (fd >= 0)
            close(fd);
    }
    shm_rank &me() { return h->rank[rank]; }
    char *slot_data(int r, int s) { return data + ((size_t)r * n_slots + s) * slot_bytes; }
    /* Records err, and makes every rank's pending and later collectives fail. */
    void fail(ncclResult_t err)
    {
        if (error == ncclSuccess)
            error = err;
        if (h)
            claim(h->failed, 0, rank + 1);
    }
};

} // namespace

/* The handle. Never freed: once destroyed or aborted it stays as a
 * tombstone, so a later use is reported rather than undefined. */
struct ncclComm {
    std::shared_ptr<comm_state> st;
    const char *ended_by = nullptr;
};

namespace {

std::mutex handles_mu;
/* Every handle made; never destroyed, so they stay reachable to the end. */
std::set<const ncclComm *> &handles = *new std::set<const ncclComm *>;

/* The state behind comm, or null (reported) when comm is not a live communicator. */
std::shared_ptr<comm_state> lookup(ncclComm_t comm, const char *call)
{
    std::lock_guard<std::mutex> lock(handles_mu);
    if (!handles.count(comm)) {
        cudaemu_report("%s: %p is not a communicator made by ncclCommInitRank", call, (void *)comm);
        return nullptr;
    }
    if (comm->ended_by) {
        cudaemu_report("%s on a communicator that %s already ended", call, comm->ended_by);
        return nullptr;
    }
    return comm->st;
}

void end_handle(ncclComm_t comm, const char *by)
{
    std::lock_guard<std::mutex> lock(handles_mu);
    comm->ended_by = by;
    comm->st.reset();
}

/* Maps the segment the id names and takes `rank` in it. */
ncclResult_t attach(comm_state &st, const id_payload &id)
{
    st.name = id.name;
    st.slot_bytes = id.slot_bytes;
    st.map_bytes = header_bytes + (size_t)max_ranks * n_slots * st.slot_bytes;
    st.fd = shm_open(id.name, O_CREAT | O_RDWR, 0600);
    if (st.fd < 0) {
        system_failure("shm_open", id.name);
        return ncclSystemError;
    }
    /* Every rank sets the same size (a sparse file: only what is written costs memory). */
    void *p = ftruncate(st.fd, (off_t)st.map_bytes) == 0
                  ? mmap(nullptr, st.map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE,
                         st.fd, 0)
                  : MAP_FAILED;
    if (p == MAP_FAILED) {
        system_failure("ftruncate/mmap", id.name);
        return ncclSystemError;
    }
    st.h = (shm_header *)p;
    st.data = (char *)p + header_bytes;
    return ncclSuccess;
}

ncclResult_t take_rank(comm_state &st)
{
    shm_header *h = st.h;
    if (!claim(h->nranks, 0, st.nranks) && load(h->nranks) != st.nranks) {
        cudaemu_report("ncclCommInitRank: rank %d says nranks %d, an earlier rank of the same id "
                       "said %d",
                       st.rank, st.nranks, load(h->nranks));
        return ncclInvalidArgument;
    }
    if (!claim(st.me().joined, 0, 1)) {
        cudaemu_report("ncclCommInitRank: rank %d of one id taken twice", st.rank);
        return ncclInvalidArgument;
    }
    st.me().device = st.device;
    st.me().pid = (int32_t)getpid();
    if (__atomic_add_fetch(&h->joined, 1, __ATOMIC_ACQ_REL) == st.nranks)
        shm_unlink(st.name.c_str()); /* all are in: the name is no longer needed */
    return ncclSuccess;
}

/* Once every rank has joined: the communicator is ready (or failed). False
 * while joining, and forever for a rank under fault hang_init (never attached). */
bool try_finish_join(comm_state &st)
{
    if (st.ph != phase::joining)
        return true;
    if (!st.h)
        return false;
    if (load(st.h->failed)) {
        st.error = ncclRemoteError;
        st.ph = phase::ready;
        return true;
    }
    if (load(st.h->joined) < st.nranks)
        return false;
    for (int j = 0; j < st.nranks; j++) {
        if (j == st.rank || load(st.h->rank[j].device) != st.device)
            continue;
        if (j < st.rank)
            cudaemu_report("ncclCommInitRank: ranks %d and %d are both on cuda:%d (one GPU per "
                           "rank)",
                           j, st.rank, st.device);
        st.error = ncclInvalidUsage;
    }
    st.ph = phase::ready;
    return true;
}

void wait_joined(comm_state &st)
{
    for (unsigned us = 0;; backoff(&us)) {
        std::lock_guard<std::mutex> lock(st.mu);
        if (try_finish_join(st))
            return;
    }
}

/* ---- groups ---- */

struct group_state {
    int depth = 0;
    std::vector<comm_state *> inits;             /* blocking ones complete at ncclGroupEnd */
    std::vector<std::function<ncclResult_t()>> colls; /* queued at ncclGroupEnd */
    int nonblocking_inits = 0;
};
thread_local group_state group;

/* ---- checks shared by the calls ---- */

bool check_config(const ncclConfig_t *config)
{
    if (!config || (config->size == sizeof *config && config->magic == config_magic))
        return true;
    cudaemu_report("ncclCommInitRankConfig: the config was not set from NCCL_CONFIG_INITIALIZER "
                   "(size %zu, magic %#x)",
                   config->size, config->magic);
    return false;
}

bool read_id(const ncclUniqueId &id, id_payload *out)
{
    memcpy(out, id.internal, sizeof *out);
    if (memcmp(out->magic, id_magic, sizeof id_magic) == 0 && out->slot_bytes &&
        memchr(out->name, 0, sizeof out->name))
        return true;
    cudaemu_report("ncclCommInitRank: the id was not made by ncclGetUniqueId");
    return false;
}

/* The communicator's state if collectives may be called on it now, else null. */
std::shared_ptr<comm_state> usable(ncclComm_t comm, const char *call, ncclResult_t *r)
{
    std::shared_ptr<comm_state> st = lookup(comm, call);
    *r = ncclInvalidArgument;
    if (!st)
        return nullptr;
    std::lock_guard<std::mutex> lock(st->mu);
    *r = ncclInvalidUsage;
    if (st->ph == phase::joining) {
        cudaemu_report("%s on a communicator whose initialisation has not completed "
                       "(ncclCommGetAsyncError has not returned ncclSuccess)",
                       call);
        return nullptr;
    }
    if (st->ph == phase::finalizing || st->ph == phase::finalized) {
        cudaemu_report("%s on a communicator after ncclCommFinalize", call);
        return nullptr;
    }
    *r = st->error;
    return st->error == ncclSuccess ? st : nullptr;
}

size_t type_size(int32_t t)
{
    switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
    }
}

const char *type_name(int32_t t)
{
    static const char *const names[] = {"ncclInt8",    "ncclUint8",    "ncclInt32",
                                        "ncclUint32",  "ncclInt64",    "ncclUint64",
                                        "ncclFloat16", "ncclFloat32",  "ncclFloat64",
                                        "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"};
    return t >= 0 && t < ncclNumTypes ? names[t] : "an unknown type";
}

const char *op_name(int32_t op)
{
    static const char *const names[] = {"ncclSum", "ncclProd", "ncclMax", "ncclMin", "ncclAvg"};
    return op >= 0 && op < ncclNumOps ? names[op] : "an unknown op";
}

std::string describe(const op_desc &d)
{
    char buf[160];
    if (d.kind == coll_allreduce)
        snprintf(buf, sizeof buf, "ncclAllReduce(count %llu, %s, %s)",
                 (unsigned long long)d.count, type_name(d.dtype), op_name(d.op));
    else
        snprintf(buf, sizeof buf, "ncclBroadcast(count %llu, %s, root %d)",
                 (unsigned long long)d.count, type_name(d.dtype), d.root);
    return buf;
}

bool reducible(int32_t t)
{
    return t != ncclFloat16 && t != ncclFloat8e4m3 && t != ncclFloat8e5m2;
}

bool check_args(const char *call, const op_desc &d, const comm_state &st)
{
    if (!type_size(d.dtype)) {
        cudaemu_report("%s: datatype %d is not an ncclDataType_t", call, d.dtype);
        return false;
    }
    if (d.kind == coll_allreduce && (d.op < 0 || d.op >= ncclNumOps)) {
        cudaemu_report("%s: op %d is not a built-in ncclRedOp_t", call, d.op);
        return false;
    }
    if (d.kind == coll_allreduce && !reducible(d.dtype)) {
        cudaemu_report("%s: the emulator does not reduce %s", call, type_name(d.dtype));
        return false;
    }
    if (d.kind == coll_broadcast && (d.root < 0 || d.root >= st.nranks)) {
        cudaemu_report("%s: root %d is not a rank of this %d-rank communicator", call, d.root,
                       st.nranks);
        return false;
    }
    if (d.count * type_size(d.dtype) > st.slot_bytes) {
        cudaemu_report("%s: %llu elements of %s exceed the emulator's %zu MiB per collective "
                       "(raise CUDAEMU_NCCL_SLOT_MB where ncclGetUniqueId runs)",
                       call, (unsigned long long)d.count, type_name(d.dtype), st.slot_bytes >> 20);
        return false;
    }
    return true;
}

/* A buffer of count elements in device memory of the communicator's GPU. */
bool check_buffer(const char *call, const char *which, const void *p, size_t bytes, int device)
{
    char what[96];
    snprintf(what, sizeof what, "%s: %s", call, which);
    if (!bytes)
        return true;
    if (!cudaemu::check_device_range(what, p, bytes))
        return false;
    int d = cudaemu::device_of(p);
    if (d != device) {
        cudaemu_report("%s %p is memory of cuda:%d, the communicator's GPU is cuda:%d", what, p, d,
                       device);
        return false;
    }
    return true;
}

bool check_stream(const char *call, cudaStream_t s, int device)
{
    int d = cudaemu::stream_device(s);
    if (d == device)
        return true;
    cudaemu_report("%s: the stream belongs to cuda:%d, the communicator's GPU is cuda:%d", call, d,
                   device);
    return false;
}

/* ---- reductions, in rank order ---- */

template <class T> T combine(ncclRedOp_t op, T a, T b)
{
    if constexpr (std::is_integral<T>::value) {
        using U = std::make_unsigned_t<T>; /* wraps like the GPU, without UB */
        if (op == ncclSum || op == ncclAvg)
            return (T)(U)((U)a + (U)b);
        if (op == ncclProd)
            return (T)(U)((U)a * (U)b);
    } else {
        if (op == ncclSum || op == ncclAvg)
            return a + b;
        if (op == ncclProd)
            return a * b;
    }
    return op == ncclMax ? (a < b ? b : a) : (b < a ? b : a);
}
template <> __nv_bfloat16 combine(ncclRedOp_t op, __nv_bfloat16 a, __nv_bfloat16 b)
{
    return __float2bfloat16_rn(combine<float>(op, a, b));
}

/* ncclAvg of floating types multiplies each input by 1/n before summing
 * (NCCL's pre-multiplied sum); of integers it divides the sum. */
template <class T> T premul(T x, int n) { return x * (T)(1.0 / n); }
template <> __nv_bfloat16 premul(__nv_bfloat16 x, int n)
{
    return __float2bfloat16_rn((float)x * (float)(1.0 / n));
}

template <class T>
void reduce_into(void *out, const char *const *in, int n, size_t count, ncclRedOp_t op)
{
    const bool scaled = op == ncclAvg && !std::is_integral<T>::value;
    for (size_t i = 0; i < count; i++) {
        T a;
        memcpy(&a, in[0] + i * sizeof(T), sizeof(T));
        if (scaled)
            a = premul(a, n);
        for (int j = 1; j < n; j++) {
            T b;
            memcpy(&b, in[j] + i * sizeof(T), sizeof(T));
            a = combine(op, a, scaled ? premul(b, n) : b);
        }
        if constexpr (std::is_integral<T>::value)
            if (op == ncclAvg)
                a = (T)(a / (T)n);
        memcpy((char *)out + i * sizeof(T), &a, sizeof(T));
    }
}

void reduce(int32_t dtype, void *out, const char *const *in, int n, size_t count, ncclRedOp_t op)
{
    switch (dtype) {
    case ncclInt8: return reduce_into<int8_t>(out, in, n, count, op);
    case ncclUint8: return reduce_into<uint8_t>(out, in, n, count, op);
    case ncclInt32: return reduce_into<int32_t>(out, in, n, count, op);
    case ncclUint32: return reduce_into<uint32_t>(out, in, n, count, op);
    case ncclInt64: return reduce_into<int64_t>(out, in, n, count, op);
    case ncclUint64: return reduce_into<uint64_t>(out, in, n, count, op);
    case ncclFloat32: return reduce_into<float>(out, in, n, count, op);
    case ncclFloat64: return reduce_into<double>(out, in, n, count, op);
    case ncclBfloat16: return reduce_into<__nv_bfloat16>(out, in, n, count, op);
    }
}

/* ---- one collective call, as queued on its stream ---- */

struct coll {
    const char *call;
    op_desc d;
    const void *send;
    void *recv;
    std::shared_ptr<comm_state> st;
    /* the execution under way (a captured collective runs once per graph launch) */
    uint64_t seq = 0;
    bool posted = false, hung = false, finished = false;
    std::vector<char> stash; /* the send buffer as read at run, while the slot is busy */

    coll(const char *call_, const op_desc &d_, const void *send_, void *recv_,
         std::shared_ptr<comm_state> st_)
        : call(call_), d(d_), send(send_), recv(recv_), st(std::move(st_))
    {
    }

    size_t bytes() const { return d.count * type_size(d.dtype); }
    /* What this rank puts in its slot: a broadcast's non-roots put nothing. */
    size_t post_bytes() const
    {
        return d.kind == coll_broadcast && d.root != st->rank ? 0 : bytes();
    }
    int slot() const { return (int)(seq % n_slots); }

    /* Every rank has read what was last in this rank's slot. */
    bool slot_free() const
    {
        if (seq < n_slots)
            return true;
        for (int j = 0; j < st->nranks; j++)
            if (load(st->h->rank[j].slot[slot()].consumed) < seq + 1 - n_slots)
                return false;
        return true;
    }
    /* False when /dev/shm has no room for it: a failure, not a SIGBUS. */
    bool post(const void *src)
    {
        char *to = st->slot_data(st->rank, slot());
        if (post_bytes() && fallocate(st->fd, 0, to - (char *)st->h, (off_t)post_bytes()) != 0) {
            system_failure("fallocate", st->name.c_str());
            st->fail(ncclSystemError);
            return false;
        }
        memcpy(to, src, post_bytes());
        shm_slot &s = st->me().slot[slot()];
        s.desc = d;
        store(s.posted, seq + 1);
        posted = true;
        stash.clear();
        return true;
    }

    void run();
    bool done();
    bool all_posted();
    bool same_everywhere();
    void write_result();
    bool finish()
    {
        finished = true;
        return true;
    }
};

void coll::run()
{
    std::lock_guard<std::mutex> lock(st->mu);
    seq = st->next_seq++;
    posted = hung = finished = false;
    if (st->ph == phase::aborted || st->error != ncclSuccess)
        return;
    const fault &f = st->f;
    if (f.rank == st->rank && seq >= f.at && f.kind == fault_kind::hang) {
        hung = true;
        return;
    }
    if (f.rank == st->rank && seq >= f.at && f.kind == fault_kind::error) {
        fprintf(stderr, "cudaemu: NCCL: rank %d: %s #%llu fails (CUDAEMU_NCCL_FAULT)\n", st->rank,
                call, (unsigned long long)seq);
        st->fail(ncclRemoteError);
        return;
    }
    if (post_bytes() && !cudaemu::check_device_range(call, send, post_bytes())) {
        st->fail(ncclInvalidArgument); /* the send buffer was freed after the call */
        return;
    }
    if (slot_free())
        post(send);
    else
        stash.assign((const char *)send, (const char *)send + post_bytes());
}

/* False while a rank has still to post. A rank that left is reported, one
 * whose process is gone is NCCL's remote error: either fails the collective. */
bool coll::all_posted()
{
    for (int j = 0; j < st->nranks; j++) {
        const shm_rank &peer = st->h->rank[j];
        if (load(peer.slot[slot()].posted) == seq + 1)
            continue;
        if (load(peer.left)) {
            cudaemu_report("%s #%llu on rank %d: rank %d destroyed its communicator before "
                           "calling it",
                           call, (unsigned long long)seq, st->rank, j);
            st->fail(ncclInvalidUsage);
        } else if (!process_alive(load(peer.pid))) {
            fprintf(stderr, "cudaemu: NCCL: rank %d's process %d has exited\n", j,
                    (int)load(peer.pid));
            st->fail(ncclRemoteError);
        }
        return false;
    }
    return true;
}

/* Each rank whose call differs from rank 0's reports it; all ranks fail. */
bool coll::same_everywhere()
{
    const op_desc &first = st->h->rank[0].slot[slot()].desc;
    bool same = true;
    for (int j = 1; j < st->nranks; j++)
        same &= memcmp(&st->h->rank[j].slot[slot()].desc, &first, sizeof first) == 0;
    if (memcmp(&d, &first, sizeof d) != 0)
        cudaemu_report("collective #%llu: rank %d calls %s, rank 0 calls %s", (unsigned long long)seq,
                       st->rank, describe(d).c_str(), describe(first).c_str());
    if (!same)
        st->error = ncclInvalidUsage;
    return same;
}

void coll::write_result()
{
    if (!cudaemu::check_device_range(call, recv, bytes())) /* freed after the call */
        return st->fail(ncclInvalidArgument);
    if (d.kind == coll_broadcast) {
        memcpy(recv, st->slot_data(d.root, slot()), bytes());
        return;
    }
    const char *in[max_ranks];
    for (int j = 0; j < st->nranks; j++)
        in[j] = st->slot_data(j, slot());
    reduce(d.dtype, recv, in, st->nranks, d.count, (ncclRedOp_t)d.op);
}

bool coll::done()
{
    std::lock_guard<std::mutex> lock(st->mu);
    if (finished || st->ph == phase::aborted || st->error != ncclSuccess)
        return finish(); /* completes without a result */
    if (load(st->h->failed)) {
        st->error = ncclRemoteError;
        return finish();
    }
    if (hung)
        return false;
    if (!posted) {
        if (!slot_free())
            return false;
        if (!post(stash.data()))
            return finish();
    }
    if (!all_posted())
        return st->error != ncclSuccess && finish();
    if (same_everywhere())
        write_result();
    store(st->me().slot[slot()].consumed, seq + 1);
    return finish();
}

/* Makes d the calling thread's GPU for a scope, as NCCL does around its CUDA calls. */
struct on_device {
    int prev;
    explicit on_device(int d) : prev(cudaemu::current_device()) { cudaSetDevice(d); }
    ~on_device() { cudaSetDevice(prev); }
};

/* Notes that s now holds the communicator's latest collective there. */
void track(comm_state &st, cudaStream_t s)
{
    cudaStreamCaptureStatus capture;
    if (cudaStreamIsCapturing(s, &capture) != cudaSuccess ||
        capture != cudaStreamCaptureStatusNone)
        return;
    on_device here(st.device);
    std::lock_guard<std::mutex> lock(st.events_mu);
    cudaEvent_t &e = st.last_on[s];
    if (!e)
        cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
    cudaEventRecord(e, s);
}

/* Whether the communicator's tracked collectives have all completed;
 * `wait`: after waiting for them. */
bool quiet(comm_state &st, bool wait)
{
    on_device here(st.device);
    std::lock_guard<std::mutex> lock(st.events_mu);
    cudaError_t before = cudaPeekAtLastError();
    bool all = true;
    for (auto &stream_event : st.last_on)
        all &= (wait ? cudaEventSynchronize(stream_event.second)
                     : cudaEventQuery(stream_event.second)) != cudaErrorNotReady;
    if (!all) { /* not ready is no error: the thread's last error stays what it was */
        cudaGetLastError();
        cudaemu::fail(before);
    }
    return all;
}

void untrack(comm_state &st)
{
    on_device here(st.device);
    std::lock_guard<std::mutex> lock(st.events_mu);
    for (auto &stream_event : st.last_on)
        cudaEventDestroy(stream_event.second);
    st.last_on.clear();
}

ncclResult_t enqueue(const std::shared_ptr<coll> &c, cudaStream_t s)
{
    cudaError_t e = cudaemu::enqueue(
        s, c->call, [c]() { c->run(); }, [c]() { return c->done(); });
    if (e != cudaSuccess)
        return ncclUnhandledCudaError;
    track(*c->st, s);
    return ncclSuccess;
}

ncclResult_t collective(const char *call, const op_desc &d, const void *send, void *recv,
                        ncclComm_t comm, cudaStream_t s)
{
    ncclResult_t r;
    std::shared_ptr<comm_state> st = usable(comm, call, &r);
    if (!st)
        return r;
    auto c = std::make_shared<coll>(call, d, send, recv, st);
    if (!check_args(call, d, *st) || !check_stream(call, s, st->device) ||
        !check_buffer(call, "the send buffer", send, c->post_bytes(), st->device) ||
        !check_buffer(call, "the receive buffer", recv, c->bytes(), st->device))
        return ncclInvalidArgument;
    if (group.depth) {
        group.colls.push_back([c, s]() { return enqueue(c, s); });
        return ncclSuccess;
    }
    return enqueue(c, s);
}

phase phase_of(comm_state &st)
{
    std::lock_guard<std::mutex> lock(st.mu);
    return st.ph;
}

void set_phase(comm_state &st, phase ph)
{
    std::lock_guard<std::mutex> lock(st.mu);
    st.ph = ph;
}

} // namespace

/* ---- the API ---- */

extern "C" ncclResult_t ncclGetVersion(int *version)
{
    if (!version)
        return ncclInvalidArgument;
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

extern "C" const char *ncclGetErrorString(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument (the cudaemu report says which)";
    case ncclInvalidUsage: return "invalid usage (the cudaemu report says which)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

extern "C" ncclResult_t ncclGetUniqueId(ncclUniqueId *out)
{
    if (!out)
        return ncclInvalidArgument;
    sweep_orphans();
    static std::atomic<unsigned> made;
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    id_payload id = {};
    memcpy(id.magic, id_magic, sizeof id_magic);
    snprintf(id.name, sizeof id.name, "/cudaemu-nccl-%d-%u-%lx", (int)getpid(), made++,
             (unsigned long)t.tv_nsec ^ (unsigned long)t.tv_sec << 20);
    const char *mb = getenv("CUDAEMU_NCCL_SLOT_MB");
    id.slot_bytes = (mb && atoll(mb) > 0 ? (uint64_t)atoll(mb) : 256) << 20;
    memset(out, 0, sizeof *out);
    memcpy(out->internal, &id, sizeof id);
    return ncclSuccess;
}

static ncclResult_t init_failed(ncclComm_t *comm, ncclComm_t handle, ncclResult_t r)
{
    handle->st->fail(r);
    end_handle(handle, "a failed initialisation");
    *comm = nullptr;
    return r;
}

extern "C" ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId,
                                               int rank, ncclConfig_t *config)
{
    id_payload id;
    if (!comm || nranks < 1 || nranks > max_ranks || rank < 0 || rank >= nranks) {
        cudaemu_report("ncclCommInitRank: rank %d of %d ranks (the emulator takes 1 to %d ranks)",
                       rank, nranks, max_ranks);
        return ncclInvalidArgument;
    }
    if (!check_config(config) || !read_id(commId, &id))
        return ncclInvalidArgument;
    auto st = std::make_shared<comm_state>();
    st->rank = rank;
    st->nranks = nranks;
    st->device = cudaemu::use_device(); /* NCCL works in the current GPU's context */
    st->blocking = !config || config->blocking != 0;
    st->f = parse_fault();
    ncclComm_t handle = new ncclComm{st};
    {
        std::lock_guard<std::mutex> lock(handles_mu);
        handles.insert(handle);
    }
    *comm = handle;
    bool hang = st->f.kind == fault_kind::hang_init && st->f.rank == rank;
    ncclResult_t r = hang ? ncclSuccess : attach(*st, id);
    if (r == ncclSuccess && !hang)
        r = take_rank(*st);
    if (r != ncclSuccess)
        return init_failed(comm, handle, r);
    if (group.depth) {
        if (st->blocking)
            group.inits.push_back(st.get());
        else
            group.nonblocking_inits++;
        return ncclSuccess;
    }
    if (!st->blocking)
        return ncclInProgress;
    wait_joined(*st);
    return st->error == ncclSuccess ? ncclSuccess : init_failed(comm, handle, st->error);
}

extern "C" ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId,
                                         int rank)
{
    return ncclCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

extern "C" ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *out)
{
    std::shared_ptr<comm_state> st = lookup(comm, "ncclCommGetAsyncError");
    if (!st || !out)
        return ncclInvalidArgument;
    if (phase_of(*st) == phase::finalizing && quiet(*st, false))
        set_phase(*st, phase::finalized);
    std::lock_guard<std::mutex> lock(st->mu);
    if (!try_finish_join(*st) || (st->ph == phase::finalizing && st->error == ncclSuccess)) {
        *out = ncclInProgress;
        return ncclSuccess;
    }
    if (st->error == ncclSuccess && load(st->h->failed))
        st->error = ncclRemoteError;
    *out = st->error;
    return ncclSuccess;
}

/* Finalize and destroy need a communicator that has joined; one still
 * joining can only be aborted. */
static bool joined(comm_state &st, const char *call)
{
    std::lock_guard<std::mutex> lock(st.mu);
    if (st.ph != phase::joining)
        return true;
    cudaemu_report("%s on a communicator whose initialisation has not completed (end it with "
                   "ncclCommAbort)",
                   call);
    return false;
}

extern "C" ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    std::shared_ptr<comm_state> st = lookup(comm, "ncclCommFinalize");
    if (!st)
        return ncclInvalidArgument;
    if (!joined(*st, "ncclCommFinalize"))
        return ncclInvalidUsage;
    if (phase_of(*st) != phase::ready) {
        cudaemu_report("ncclCommFinalize twice on one communicator");
        return ncclInvalidUsage;
    }
    /* A non-blocking communicator finalizes in the background: polled with
     * ncclCommGetAsyncError, which says ncclSuccess once it is quiet. */
    bool done = quiet(*st, st->blocking);
    set_phase(*st, done ? phase::finalized : phase::finalizing);
    return done ? ncclSuccess : ncclInProgress;
}

extern "C" ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    std::shared_ptr<comm_state> st = lookup(comm, "ncclCommDestroy");
    if (!st)
        return ncclInvalidArgument;
    if (!joined(*st, "ncclCommDestroy"))
        return ncclInvalidUsage;
    phase ph = phase_of(*st);
    if (ph == phase::finalizing) {
        cudaemu_report("ncclCommDestroy before the finalize completed (ncclCommGetAsyncError "
                       "has not returned ncclSuccess)");
        return ncclInvalidUsage;
    }
    if (ph == phase::ready)
        quiet(*st, true); /* destroy finalizes when the program did not */
    untrack(*st);
    store(st->me().left, 1);
    end_handle(comm, "ncclCommDestroy");
    return ncclSuccess;
}

extern "C" ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    std::shared_ptr<comm_state> st = lookup(comm, "ncclCommAbort");
    if (!st)
        return ncclInvalidArgument;
    {
        std::lock_guard<std::mutex> lock(st->mu);
        st->ph = phase::aborted; /* this rank's queued collectives complete without a result */
        if (st->h) {
            claim(st->h->failed, 0, st->rank + 1); /* and its peers' fail rather than hang */
            shm_unlink(st->name.c_str());
        }
    }
    untrack(*st);
    end_handle(comm, "ncclCommAbort");
    return ncclSuccess;
}

extern "C" ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                                      ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                      cudaStream_t stream)
{
    op_desc d = {coll_allreduce, datatype, op, 0, count};
    return collective("ncclAllReduce", d, sendbuff, recvbuff, comm, stream);
}

extern "C" ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                                      ncclDataType_t datatype, int root, ncclComm_t comm,
                                      cudaStream_t stream)
{
    op_desc d = {coll_broadcast, datatype, 0, root, count};
    return collective("ncclBroadcast", d, sendbuff, recvbuff, comm, stream);
}

extern "C" ncclResult_t ncclGroupStart(void)
{
    group.depth++;
    return ncclSuccess;
}

/* The outermost ncclGroupEnd: blocking initialisations complete, collectives are queued. */
extern "C" ncclResult_t ncclGroupEnd(void)
{
    if (!group.depth) {
        cudaemu_report("ncclGroupEnd without ncclGroupStart");
        return ncclInvalidUsage;
    }
    if (--group.depth)
        return ncclSuccess;
    group_state g = std::move(group);
    group = group_state();
    if ((!g.inits.empty() || g.nonblocking_inits) && !g.colls.empty()) {
        cudaemu_report("ncclGroupEnd: a group holds both communicator initialisations and "
                       "collectives");
        return ncclInvalidUsage;
    }
    ncclResult_t r = ncclSuccess;
    for (comm_state *st : g.inits) {
        wait_joined(*st);
        if (st->error != ncclSuccess && r == ncclSuccess)
            r = st->error;
    }
    for (auto &enqueue_one : g.colls) {
        ncclResult_t e = enqueue_one();
        if (e != ncclSuccess && r == ncclSuccess)
            r = e;
    }
    return r == ncclSuccess && g.nonblocking_inits ? ncclInProgress : r;
}
