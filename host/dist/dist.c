/* dist.c — data parallelism over ranks (dist.h): joining the job, checks
 * and agreement, the start-up comparison, bucketed gradient averaging
 * overlapped with backward, and the phase sums. The transports are behind
 * dist_comm.h; a single process never reaches one (d->ops is NULL).
 */
#include "dist/dist.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/device.h"
#include "dist/comm.h"

enum {
    MESSAGE_MAX = 1024,
    /* Non-trainable tensors up to this many floats ride inside a bucket
     * (their gradients are zeros on every rank, so their average is too);
     * larger ones end the bucket, so a frozen backbone costs no traffic. */
    RIDE_ALONG_MAX = 64 * 1024,
};

/* A contiguous range of the flat gradient buffer, summed in one
 * collective once every trainable parameter in it is final. */
typedef struct host_bucket {
    int64_t begin, end; /* floats */
    int params;         /* trainable parameters in it */
    int pending;        /* of which not yet final in this step's backward */
} host_bucket;

/* A run of buffers (SC_TENSOR_BUFFER: running statistics) in the flat
 * value buffer. */
typedef struct host_range {
    int64_t begin, end;
} host_range;

struct host_dist {
    int rank, world, local_rank, local_size, nodes;
    bool replicas;          /* the ranks are threads of this process */
    int accumulate;
    int64_t batch_size;
    double bucket_mb;
    double timeout_s;       /* --collective-timeout */
    const host_comm_ops *ops; /* NULL: a single process */
    host_comm *comm;
    /* A failure every rank knows of; later checks return it again. */
    bool failed;
    sc_status failed_status;
    char failed_message[MESSAGE_MAX + 32];
    /* From host_dist_start: */
    sc_params *params;
    int n_params;
    int *bucket_of; /* per parameter; -1 when in no bucket */
    host_bucket *buckets;
    int n_buckets;
    host_range *buffers;
    int n_buffers;
    float *staging; /* host copy of the values when they live on a GPU */
    /* The step's gradient exchange: buckets [0, next_start) are started,
     * [0, next_done) summed and averaged. */
    bool round_open;
    int next_start, next_done;
    double comm_s;
};

/* Per thread, as a rank is a process or a replica's thread: what main
 * (or the replica's thread) needs after the trainer, and with it the
 * host_dist, is gone. */
static _Thread_local struct {
    char prefix[32];
    bool prefix_known;
    bool silent; /* another rank reports this process's failure */
} report;

/* ---- the launcher ---- */

static int env_int(const char *name, int fallback)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : fallback;
}

/* The value of the first of names[0..n) that is set, else `none`. */
static int first_env_int(const char *const *names, size_t n, int none)
{
    for (size_t i = 0; i < n; i++)
        if (getenv(names[i]))
            return env_int(names[i], 0);
    return none;
}

/* The world size the launcher announced: 0 when no launcher started this
 * process, -1 when one did without saying how many (PMIx alone). */
static int launch_world(void)
{
    static const char *const sizes[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                                        "SLURM_STEP_NUM_TASKS"};
    return first_env_int(sizes, sizeof sizes / sizeof *sizes, getenv("PMIX_RANK") ? -1 : 0);
}

static int launch_rank(void)
{
    static const char *const ranks[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK",
                                        "SLURM_PROCID"};
    return first_env_int(ranks, sizeof ranks / sizeof *ranks, 0);
}

static void set_prefix(int rank, int world)
{
    report.prefix[0] = '\0';
    if (world != 1 && world != 0)
        snprintf(report.prefix, sizeof report.prefix, "[rank %d] ", rank);
    report.prefix_known = true;
}

const char *host_dist_log_prefix(void)
{
    if (!report.prefix_known)
        set_prefix(launch_rank(), launch_world());
    return report.prefix;
}

void host_dist_print_error(const char *program)
{
    if (!report.silent)
        fprintf(stderr, "%s%s: %s\n", host_dist_log_prefix(), program, sc_error_message());
}

/* ---- the job ---- */

/* This rank's place in the job, from its transport. */
static void adopt(host_dist *d, const host_comm_ops *ops, const host_comm_info *info)
{
    d->ops = ops;
    d->rank = info->rank;
    d->world = info->world;
    d->local_rank = info->local_rank;
    d->local_size = info->local_size;
    d->nodes = info->nodes;
    set_prefix(d->rank, d->world);
}

#if SC_HAVE_MPI
static sc_status join_mpi(host_dist *d, const host_config *cfg, int expected, bool keep_alone)
{
    host_comm_info info;
    SC_TRY(host_comm_mpi_open(cfg->collective_timeout, &d->comm, &info));
    adopt(d, &host_comm_mpi, &info);
    if (expected > 0 && info.world != expected)
        return sc_error_set(SC_ERR_STATE,
                            "the launcher started %d processes but MPI sees a world of %d: "
                            "each process started a job of its own (under srun, pass the "
                            "--mpi plugin this Open MPI was built for, e.g. --mpi=pmix)",
                            expected, info.world);
    if (d->world == 1 && !keep_alone) { /* launched as one process: nothing to share */
        d->ops->close(d->comm);
        d->ops = NULL;
        d->comm = NULL;
    } else if (d->rank != 0 && !freopen("/dev/null", "w", stdout)) {
        return sc_error_set(SC_ERR_IO, "cannot send stdout to /dev/null");
    }
    return SC_OK;
}
#else
static sc_status join_mpi(host_dist *d, const host_config *cfg, int expected, bool keep_alone)
{
    (void)d, (void)cfg, (void)keep_alone;
    return sc_error_set(SC_ERR_UNSUPPORTED,
                        "started by a launcher as one of %d processes, but this "
                        "scorch-train was built without MPI (install libopenmpi-dev and "
                        "rebuild)", expected);
}
#endif

static sc_status join_team(host_dist *d, const host_dist_seat *seat)
{
    host_comm_info info;
    SC_TRY(host_comm_threads_join(seat->team, seat->rank, &d->comm, &info));
    adopt(d, &host_comm_threads, &info);
    d->replicas = true;
    return SC_OK;
}

sc_status host_dist_open(const host_config *cfg, const host_dist_seat *seat, host_dist **out)
{
    *out = NULL;
    host_dist *d = calloc(1, sizeof *d);
    if (!d)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for data parallelism");
    d->world = d->local_size = d->nodes = 1;
    d->accumulate = cfg->accumulate;
    d->batch_size = cfg->batch_size;
    d->bucket_mb = cfg->bucket_mb;
    d->timeout_s = cfg->collective_timeout;
    *out = d;
    if (seat)
        return join_team(d, seat);
    /* One launched process is a single process, unless the user asked for
     * the data-parallel machinery by name: then it runs with one rank
     * (which measures what communication costs). */
    int expected = launch_world();
    bool named = strcmp(cfg->device, "distributed_dataparallel") == 0;
    if (expected == 0 || (expected == 1 && !named))
        return SC_OK;
    return join_mpi(d, cfg, expected, named);
}

void host_dist_close(host_dist *d)
{
    if (!d)
        return;
    if (d->ops)
        d->ops->close(d->comm);
    free(d->bucket_of);
    free(d->buckets);
    free(d->buffers);
    free(d->staging);
    free(d);
}

int host_dist_rank(const host_dist *d) { return d ? d->rank : 0; }
int host_dist_world(const host_dist *d) { return d ? d->world : 1; }
int host_dist_local_rank(const host_dist *d) { return d ? d->local_rank : 0; }
bool host_dist_is_root(const host_dist *d) { return host_dist_rank(d) == 0; }

int host_dist_threads(const host_dist *d, int requested)
{
    if (requested > 0 || d->world == 1)
        return requested;
    int omp = env_int("OMP_NUM_THREADS", 0);
    if (omp > 0)
        return omp;
    /* At most this rank's share of the node, and at most the cores it may
     * run on (mpirun --bind-to core or socket binds it to some). */
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int share = (int)(online / d->local_size), cores = host_cpu_cores();
    if (cores < share)
        share = cores;
    return share > 0 ? share : 1;
}

uint64_t host_dist_step_stream(const host_dist *d, uint64_t stream, int64_t micro)
{
    if (d->world == 1 && micro == 0)
        return stream;
    return sc_rng_mix(stream, (uint64_t)(micro * d->world + d->rank));
}

/* ---- checks ---- */

/* The ints every check carries, reduced by MAX. */
enum {
    V_FAILED,       /* world - rank of a failed rank, 0 if none: MAX finds the lowest */
    V_STOP,         /* a stop request (hook) */
    V_INTERRUPTED,  /* a stop signal */
    V_DIGEST,       /* parameter digest (host_dist_agree) */
    V_DIGEST_LOW,   /* INT_MAX - digest: MAX gives INT_MAX - the lowest digest */
    V_SIZE,         /* a size every rank needs the maximum of */
    V_BITS,         /* V_BITS + i: bit i of host_dist_agree_bits */
    V_COUNT = V_BITS + 16
};

typedef struct failure_note {
    int status;
    char message[MESSAGE_MAX];
} failure_note;

static sc_status agreed_failure(const host_dist *d)
{
    return sc_error_set(d->failed_status, "%s", d->failed_message);
}

/* Every rank learns rank `who`'s failure; this rank's own failure, if any,
 * stays its message. Rank 0 reports the job's failure; another failed rank
 * adds its own only when it says something else. */
static sc_status settle_failure(host_dist *d, sc_status local, int who)
{
    failure_note note = {0};
    if (d->rank == who) {
        note.status = local;
        snprintf(note.message, sizeof note.message, "%s", sc_error_message());
    }
    d->ops->broadcast(d->comm, &note, sizeof note, who, "the broadcast of a rank's failure");
    d->failed = true;
    if (local != SC_OK) {
        d->failed_status = local;
        snprintf(d->failed_message, sizeof d->failed_message, "%s", sc_error_message());
        report.silent = d->rank != 0 && strcmp(note.message, d->failed_message) == 0;
    } else {
        d->failed_status = (sc_status)note.status;
        snprintf(d->failed_message, sizeof d->failed_message, "rank %d failed: %s", who,
                 note.message);
        report.silent = d->rank != 0;
    }
    return agreed_failure(d);
}

static void finish_round(host_dist *d);

/* The check every collective begins with; v[V_FAILED] is filled here, the
 * other entries by the caller, and all come back reduced. A rank that
 * failed mid-step first completes the step's gradient exchange, which the
 * others are waiting in. */
static sc_status exchange(host_dist *d, sc_status local, int v[V_COUNT])
{
    if (d->failed)
        return agreed_failure(d);
    if (!d->ops)
        return local;
    finish_round(d);
    double t0 = host_now();
    v[V_FAILED] = local != SC_OK ? d->world - d->rank : 0;
    d->ops->max_ints(d->comm, v, V_COUNT, "the status check");
    sc_status st = v[V_FAILED] ? settle_failure(d, local, d->world - v[V_FAILED]) : SC_OK;
    d->comm_s += host_now() - t0;
    return st;
}

sc_status host_dist_check(host_dist *d, sc_status local)
{
    int v[V_COUNT] = {0};
    return d ? exchange(d, local, v) : local;
}

/* ---- parameters ---- */

/* The values on the host: the store's own on the CPU, else a fresh copy
 * in d->staging (NULL, with a message, when it cannot be made). */
static float *pull_values(host_dist *d)
{
    if (sc_params_device(d->params).kind == SC_DEVICE_CPU)
        return sc_params_values(d->params);
    if (!d->staging)
        d->staging = malloc((size_t)sc_params_numel(d->params) * sizeof(float) + 1);
    if (!d->staging) {
        sc_error_set(SC_ERR_NOMEM, "out of memory for a host copy of the parameters");
        return NULL;
    }
    return sc_params_read(d->params, d->staging, NULL) == SC_OK ? d->staging : NULL;
}

/* Writes d->staging back to a GPU's values (nothing to do on the CPU). */
static sc_status push_values(host_dist *d)
{
    if (sc_params_device(d->params).kind == SC_DEVICE_CPU)
        return SC_OK;
    return sc_params_write(d->params, d->staging);
}

/* 31 bits of FNV-1a over the values of every tensor but the buffers,
 * which ranks update on their own batches between syncs; -1 when the
 * values cannot be read (no rank's digest matches it then). */
static int params_digest(host_dist *d)
{
    const float *values = pull_values(d);
    if (!values)
        return -1;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int i = 0; i < d->n_params; i++) {
        const sc_tensor *p = sc_params_at(d->params, i);
        uint32_t w;
        const float *v = values + sc_params_offset(d->params, i);
        for (int64_t k = 0; !(p->flags & SC_TENSOR_BUFFER) && k < p->numel; k++) {
            memcpy(&w, v + k, sizeof w);
            h = (h ^ w) * 0x100000001b3ULL;
        }
    }
    return (int)(h >> 33);
}

/* The digests differ: names the lowest rank whose differ from rank 0's. */
static sc_status diverged(host_dist *d, int digest)
{
    int root_digest = digest;
    d->ops->broadcast(d->comm, &root_digest, sizeof root_digest, 0, "the parameter check");
    int v = digest != root_digest ? d->world - d->rank : 0;
    d->ops->max_ints(d->comm, &v, 1, "the parameter check");
    d->failed = true;
    d->failed_status = SC_ERR_STATE;
    snprintf(d->failed_message, sizeof d->failed_message,
             "the ranks' parameters have diverged: rank %d's differ from rank 0's (did a "
             "hook change the lr, or a plugin the parameters, on some ranks only?)",
             d->world - v);
    report.silent = d->rank != 0;
    return agreed_failure(d);
}

static sc_status agree_flags(host_dist *d, bool *stop, bool *interrupted, int v[V_COUNT])
{
    v[V_STOP] = *stop;
    v[V_INTERRUPTED] = *interrupted;
    SC_TRY(exchange(d, SC_OK, v));
    *stop = v[V_STOP] != 0;
    *interrupted = v[V_INTERRUPTED] != 0;
    return SC_OK;
}

sc_status host_dist_agree(host_dist *d, bool *stop, bool *interrupted)
{
    int v[V_COUNT] = {0};
    int digest = d->ops && d->params ? params_digest(d) : 0;
    v[V_DIGEST] = digest;
    v[V_DIGEST_LOW] = INT_MAX - digest;
    SC_TRY(agree_flags(d, stop, interrupted, v));
    if (d->ops && v[V_DIGEST] != INT_MAX - v[V_DIGEST_LOW])
        return diverged(d, digest);
    return SC_OK;
}

sc_status host_dist_agree_bits(host_dist *d, unsigned *bits)
{
    int v[V_COUNT] = {0};
    for (int i = 0; i < V_COUNT - V_BITS; i++)
        v[V_BITS + i] = (*bits >> i) & 1u;
    SC_TRY(exchange(d, SC_OK, v));
    for (int i = 0; i < V_COUNT - V_BITS; i++)
        *bits |= (unsigned)v[V_BITS + i] << i;
    return SC_OK;
}

/* ---- gradient buckets ---- */

static void open_round(host_dist *d)
{
    for (int b = 0; b < d->n_buckets; b++)
        d->buckets[b].pending = d->buckets[b].params;
    d->next_start = d->next_done = 0;
    d->round_open = true;
}

sc_status host_dist_step_begin(host_dist *d, bool *stop, bool *interrupted)
{
    int v[V_COUNT] = {0};
    SC_TRY(agree_flags(d, stop, interrupted, v));
    if (d->ops && !*stop && !*interrupted)
        open_round(d);
    return SC_OK;
}

/* Sum to mean: over ranks, and over the micro-batches accumulated. */
static void average(host_dist *d, int b)
{
    const host_bucket *k = &d->buckets[b];
    /* In range by construction: cannot fail. */
    sc_params_scale_grads(d->params, k->begin, k->end - k->begin,
                          1.0f / (float)(d->world * d->accumulate));
}

static void start_bucket(host_dist *d, int b)
{
    const host_bucket *k = &d->buckets[b];
    d->ops->sum_start(d->comm, b, sc_params_grads(d->params) + k->begin, k->end - k->begin);
}

/* Starts, in index order (the same on every rank, as collectives must
 * be), the buckets whose parameters are all final. */
static void start_ready(host_dist *d)
{
    while (d->next_start < d->n_buckets && d->buckets[d->next_start].pending == 0)
        start_bucket(d, d->next_start++);
}

/* The index of a parameter of the store, from its place in the flat
 * buffer (parameters are laid out in creation order). */
static int param_index(const host_dist *d, const sc_tensor *param)
{
    int64_t off = (const float *)param->data - sc_params_values(d->params);
    int lo = 0, hi = d->n_params - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (sc_params_offset(d->params, mid) <= off)
            lo = mid;
        else
            hi = mid - 1;
    }
    while (lo > 0 && sc_params_at(d->params, lo) != param) /* empty tensors share offsets */
        lo--;
    return lo;
}

/* sc_backward's grad-ready callback: backward is done with `param`. */
static void on_grad_ready(void *user, sc_tensor *param)
{
    host_dist *d = user;
    double t0 = host_now();
    int b = d->bucket_of[param_index(d, param)];
    if (b >= 0 && --d->buckets[b].pending == 0)
        start_ready(d);
    /* MPI moves a non-blocking collective along only inside MPI calls. */
    while (d->next_done < d->next_start && d->ops->sum_test(d->comm, d->next_done))
        average(d, d->next_done++);
    d->comm_s += host_now() - t0;
}

/* Starts what is left (parameters backward never reached are zeros) and
 * waits for every bucket. */
static void finish_round(host_dist *d)
{
    if (!d->round_open)
        return;
    double t0 = host_now();
    while (d->next_start < d->n_buckets)
        start_bucket(d, d->next_start++);
    for (; d->next_done < d->n_buckets; d->next_done++) {
        char what[80];
        snprintf(what, sizeof what, "the gradient allreduce (bucket %d of %d)",
                 d->next_done + 1, d->n_buckets);
        d->ops->sum_wait(d->comm, d->next_done, what);
        average(d, d->next_done);
    }
    d->round_open = false;
    d->comm_s += host_now() - t0;
}

sc_status host_dist_backward(host_dist *d, sc_ctx *ctx, sc_tensor *loss, bool sync)
{
    if (!d->ops || !sync) {
        SC_TRY(sc_backward(ctx, loss, NULL, NULL));
        if (sync && d->accumulate > 1)
            return sc_params_scale_grads(d->params, 0, sc_params_numel(d->params),
                                         1.0f / (float)d->accumulate);
        return SC_OK;
    }
    sc_status st = sc_backward(ctx, loss, on_grad_ready, d);
    finish_round(d); /* also after a failure: the other ranks wait for it */
    return st;
}

/* Buckets fill from the end of the flat buffer, the order in which
 * backward usually finishes parameters (the reverse of their creation). */
static sc_status layout_buckets(host_dist *d)
{
    int n = d->n_params;
    int64_t cap = (int64_t)(d->bucket_mb * 1024 * 1024 / sizeof(float));
    cap = cap < 1 ? 1 : cap > INT_MAX ? INT_MAX : cap;
    d->bucket_of = malloc((size_t)n * sizeof *d->bucket_of);
    d->buckets = calloc((size_t)n, sizeof *d->buckets);
    if (!d->bucket_of || !d->buckets)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for gradient buckets");
    host_bucket *cur = NULL;
    for (int i = n - 1; i >= 0; i--) {
        const sc_tensor *p = sc_params_at(d->params, i);
        int64_t off = sc_params_offset(d->params, i);
        d->bucket_of[i] = -1;
        if (!(p->flags & SC_TENSOR_REQUIRES_GRAD)) {
            if (p->numel > RIDE_ALONG_MAX)
                cur = NULL;
            continue;
        }
        if (p->numel > INT_MAX)
            return sc_error_set(SC_ERR_UNSUPPORTED,
                                "parameter %s has %lld elements, more than one allreduce "
                                "carries", p->name, (long long)p->numel);
        if (cur && cur->end - off > cap)
            cur = NULL;
        if (!cur) {
            cur = &d->buckets[d->n_buckets++];
            cur->end = off + p->numel;
        }
        cur->begin = off;
        cur->params++;
        d->bucket_of[i] = (int)(cur - d->buckets);
    }
    return d->ops->buckets(d->comm, d->n_buckets);
}

static sc_status layout_buffers(host_dist *d)
{
    d->buffers = calloc((size_t)d->n_params, sizeof *d->buffers);
    if (!d->buffers)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for buffer ranges");
    for (int i = 0; i < d->n_params; i++) {
        const sc_tensor *p = sc_params_at(d->params, i);
        int64_t off = sc_params_offset(d->params, i);
        if (!(p->flags & SC_TENSOR_BUFFER))
            continue;
        host_range *last = d->n_buffers ? &d->buffers[d->n_buffers - 1] : NULL;
        if (last && last->end == off)
            last->end += p->numel;
        else
            d->buffers[d->n_buffers++] = (host_range){off, off + p->numel};
    }
    return SC_OK;
}

/* ---- start-up ---- */

/* The name of an INI line's option ("name = value"), into buf. */
static void option_name(const char *line, size_t len, char *buf, size_t size)
{
    size_t n = 0;
    while (n < len && n + 1 < size && line[n] != ' ' && line[n] != '=')
        n++;
    memcpy(buf, line, n);
    buf[n] = '\0';
}

/* Options that may rightly differ between ranks or nodes. */
static bool option_per_node(const char *name)
{
    static const char *const names[] = {"model", "dataset", "dataset-path", "hooks",
                                        "run-dir", "resume", "threads", "workers",
                                        "prefetch", "quiet", "collective-timeout"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strcmp(name, names[i]) == 0)
            return true;
    return false;
}

static sc_status describe_options(FILE *f, const host_config *cfg)
{
    char *ini = NULL;
    SC_TRY(host_config_ini_text(cfg, HOST_PROGRAM_TRAIN, &ini));
    for (const char *line = ini; *line;) {
        size_t len = strcspn(line, "\n");
        char name[64];
        option_name(line, len, name, sizeof name);
        if (len && line[0] != ';' && line[0] != '[' && !option_per_node(name))
            fprintf(f, "option %.*s\n", (int)len, line);
        line += len + (line[len] == '\n');
    }
    free(ini);
    return SC_OK;
}

static void describe_params(FILE *f, const sc_params *ps)
{
    fprintf(f, "parameters %d\n", sc_params_count(ps));
    for (int i = 0; i < sc_params_count(ps); i++) {
        const sc_tensor *p = sc_params_at(ps, i);
        fprintf(f, "param %s %s [", p->name, sc_dtype_name(p->dtype));
        for (int k = 0; k < p->ndim; k++)
            fprintf(f, "%s%lld", k ? "," : "", (long long)p->shape[k]);
        fprintf(f, "] %s\n", p->flags & SC_TENSOR_BUFFER          ? "buffer"
                             : p->flags & SC_TENSOR_REQUIRES_GRAD ? "trains"
                                                                  : "frozen");
    }
}

/* What every rank must have alike, one fact per line. */
static sc_status describe_run(const host_session *s, const host_config *cfg, char **text)
{
    size_t len;
    FILE *f = open_memstream(text, &len);
    if (!f)
        return sc_error_set(SC_ERR_NOMEM, "out of memory describing the run");
    const sc_abi_header *m = &s->model.api->abi, *ds = &s->data.api->abi;
    fprintf(f, "host plugin ABI %d.%d\n", SC_ABI_MAJOR, SC_ABI_MINOR);
    fprintf(f, "model plugin %s ABI %d.%d size %u\n", s->model.api->name, m->major, m->minor,
            m->size);
    fprintf(f, "dataset plugin %s ABI %d.%d size %u\n", s->data.api->name, ds->major,
            ds->minor, ds->size);
    for (int k = 0; k < SC_SPLIT_COUNT; k++)
        fprintf(f, "split %s has %lld samples\n", sc_split_name((sc_split)k),
                (long long)host_session_split_len(s, (sc_split)k));
    sc_status st = describe_options(f, cfg);
    describe_params(f, s->params);
    if (fclose(f) != 0 && st == SC_OK)
        st = sc_error_set(SC_ERR_NOMEM, "out of memory describing the run");
    return st;
}

/* The first line where this rank's description differs from rank 0's. */
static sc_status compare_runs(const host_dist *d, const char *mine, const char *root)
{
    while (*mine || *root) {
        size_t a = strcspn(mine, "\n"), b = strcspn(root, "\n");
        if (a != b || memcmp(mine, root, a) != 0)
            return sc_error_set(SC_ERR_INVALID,
                                "the ranks disagree: rank %d has '%.*s', rank 0 has '%.*s' "
                                "(every rank must run the same plugins, data and options)",
                                d->rank, (int)(a ? a : 7), a ? mine : "nothing",
                                (int)(b ? b : 7), b ? root : "nothing");
        mine += a + (mine[a] == '\n');
        root += b + (root[b] == '\n');
    }
    return SC_OK;
}

/* A copy of rank 0's bytes on every rank (caller frees *copy). The size
 * goes first, in a check, so that every rank has its buffer before the
 * bytes come. */
static sc_status broadcast_bytes(host_dist *d, sc_status st, const void *mine, size_t size,
                                 char **copy, size_t *copy_size, const char *what)
{
    *copy = NULL;
    if (st == SC_OK && size > INT_MAX)
        st = sc_error_set(SC_ERR_UNSUPPORTED, "%s: %zu bytes, more than a rank can send",
                          what, size);
    int v[V_COUNT] = {[V_SIZE] = st == SC_OK && d->rank == 0 ? (int)size : 0};
    SC_TRY(exchange(d, st, v));
    *copy_size = (size_t)v[V_SIZE];
    *copy = malloc(*copy_size + 1);
    if (*copy && d->rank == 0)
        memcpy(*copy, mine, *copy_size);
    int w[V_COUNT] = {0};
    SC_TRY(exchange(d, *copy ? SC_OK : sc_error_set(SC_ERR_NOMEM, "out of memory"), w));
    d->ops->broadcast(d->comm, *copy, *copy_size, 0, what);
    (*copy)[*copy_size] = '\0';
    return SC_OK;
}

sc_status host_dist_verify(host_dist *d, const host_session *s, const host_config *cfg)
{
    if (!d->ops)
        return SC_OK;
    char *mine = NULL, *root = NULL;
    size_t size = 0;
    sc_status st = describe_run(s, cfg, &mine);
    st = broadcast_bytes(d, st, mine, mine ? strlen(mine) : 0, &root, &size,
                         "the start-up comparison");
    if (st == SC_OK)
        st = compare_runs(d, mine, root);
    free(mine);
    free(root);
    return host_dist_check(d, st);
}

/* The hooks' blobs as rank 0 sends them: per blob, the hook's name and its
 * NUL, the size (a size_t), the bytes. */
static sc_status pack_blobs(const host_hook_blobs *blobs, char **text, size_t *len)
{
    FILE *f = open_memstream(text, len);
    for (int i = 0; f && i < blobs->n; i++) {
        const host_hook_blob *b = &blobs->items[i];
        fwrite(b->hook, 1, strlen(b->hook) + 1, f);
        fwrite(&b->size, sizeof b->size, 1, f);
        fwrite(b->data, 1, b->size, f);
    }
    if (!f || fclose(f) != 0)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for the hooks' state");
    return SC_OK;
}

static sc_status unpack_blobs(const char *p, size_t len, host_hook_blobs *blobs)
{
    host_hook_blobs_clear(blobs);
    for (const char *end = p + len; p < end;) {
        const char *name = p;
        size_t size;
        p += strlen(name) + 1;
        memcpy(&size, p, sizeof size);
        p += sizeof size;
        SC_TRY(host_hook_blobs_put(blobs, name, p, size));
        p += size;
    }
    return SC_OK;
}

sc_status host_dist_share_blobs(host_dist *d, host_hook_blobs *blobs)
{
    if (!d->ops)
        return SC_OK;
    char *mine = NULL, *root = NULL;
    size_t len = 0, size = 0;
    sc_status st = d->rank == 0 ? pack_blobs(blobs, &mine, &len) : SC_OK;
    st = broadcast_bytes(d, st, mine, len, &root, &size, "the broadcast of the hooks' state");
    if (st == SC_OK && d->rank != 0)
        st = unpack_blobs(root, size, blobs);
    free(mine);
    free(root);
    return st;
}

/* A host tensor's worth of rank 0's t broadcast into every rank's t. */
static sc_status share_tensor(host_dist *d, sc_tensor *t, const char *what)
{
    if (t->device.kind == SC_DEVICE_CPU) {
        d->ops->broadcast(d->comm, t->data, sc_tensor_nbytes(t), 0, what);
        return SC_OK;
    }
    sc_tensor *host = sc_tensor_alloc(t->dtype, t->ndim, t->shape);
    sc_status st = host ? sc_tensor_copy(host, t) : SC_ERR_NOMEM;
    if (st == SC_OK) {
        d->ops->broadcast(d->comm, host->data, sc_tensor_nbytes(host), 0, what);
        st = sc_tensor_copy(t, host);
    }
    sc_tensor_free(host);
    return st;
}

sc_status host_dist_share_tensor(host_dist *d, sc_tensor *t, const char *what)
{
    return d->ops ? host_dist_check(d, share_tensor(d, t, what)) : SC_OK;
}

/* Rank 0's values, optimizer state and trainer state to every rank. */
static sc_status share_state(host_dist *d, sc_optim *opt, host_train_state *state)
{
    float *values = pull_values(d);
    if (!values)
        return sc_error_code();
    d->ops->broadcast(d->comm, values, (size_t)sc_params_numel(d->params) * sizeof(float), 0,
                      "the broadcast of rank 0's parameters");
    SC_TRY(push_values(d));
    for (int i = 0; opt && i < sc_optim_state_count(opt); i++)
        SC_TRY(share_tensor(d, sc_optim_state_at(opt, i),
                            "the broadcast of rank 0's optimizer state"));
    d->ops->broadcast(d->comm, state, sizeof *state, 0, "the broadcast of rank 0's position");
    if (d->rank == 0)
        return SC_OK;
    if (opt)
        sc_optim_set_steps(opt, state->step);
    /* Rank 0 alone carries the sums of a half-done epoch (the whole job's,
     * see host_dist_before_checkpoint); the others start theirs from zero. */
    state->loss_sum = 0;
    state->samples = 0;
    return SC_OK;
}

/* GPU ranks sum their gradients with NCCL (its own stream), keeping their
 * transport for the control plane. */
static sc_status use_gpu_transport(host_dist *d, sc_ctx *ctx)
{
    sc_device dev = sc_ctx_device(ctx);
    if (dev.kind == SC_DEVICE_CPU)
        return SC_OK;
#if SC_HAVE_NCCL
    host_comm_info info = {.rank = d->rank, .world = d->world};
    host_comm *wrapped;
    SC_TRY(host_comm_nccl_wrap(d->ops, d->comm, &info, d->timeout_s, dev.index,
                             sc_ctx_cuda_stream(ctx), &wrapped));
    d->comm = wrapped;
    d->ops = &host_comm_nccl;
    return SC_OK;
#else
    return sc_error_set(SC_ERR_UNSUPPORTED,
                        "data parallelism over GPU ranks needs NCCL, which this build lacks "
                        "(meson option nccl); run CPU ranks (--device cpu) or one GPU process");
#endif
}

sc_status host_dist_start(host_dist *d, sc_ctx *ctx, sc_params *params, sc_optim *opt,
                        host_train_state *state)
{
    d->params = params;
    d->n_params = sc_params_count(params);
    if (!d->ops)
        return SC_OK;
    sc_status st = use_gpu_transport(d, ctx);
    if (st == SC_OK)
        st = layout_buckets(d);
    if (st == SC_OK)
        st = layout_buffers(d);
    int v[V_COUNT] = {0};
    SC_TRY(exchange(d, st, v)); /* also rank 0's run directory and resume */
    SC_TRY(host_dist_check(d, share_state(d, opt, state)));
    d->comm_s = 0; /* the phases count theirs */
    return SC_OK;
}

void host_dist_resume_position(const host_dist *d, host_train_state *saved, int64_t batches,
                             const char *path)
{
    int was = saved->world, now = d->world;
    saved->world = now;
    if (was == now)
        return;
    if (saved->next_batch == 0) {
        fprintf(stderr, "%sscorch-train: note: %s was saved by %d rank%s, resuming with %d: "
                "the global batch is now %lld\n", host_dist_log_prefix(), path, was,
                was == 1 ? "" : "s", now, (long long)(d->batch_size * now));
        return;
    }
    /* The ranks of `was` trained the first next_batch * was batches of the
     * epoch's order; this world goes on from the first step that none of
     * them reached. */
    int64_t done, whole = batches * now; /* the epoch, in this world's batches */
    if (!sc_mul_i64(saved->next_batch, was, &done) || done > whole)
        done = whole; /* past this world's epoch: its end, like the clamp below */
    int64_t next = (done + now - 1) / now;
    next += (d->accumulate - next % d->accumulate) % d->accumulate;
    if (next > batches)
        next = batches;
    int64_t skipped = next * now - done;
    fprintf(stderr, "%sscorch-train: note: %s was saved by %d rank%s at batch %lld of epoch "
            "%d, resuming with %d rank%s at batch %lld (%lld samples skipped)\n",
            host_dist_log_prefix(), path, was, was == 1 ? "" : "s", (long long)saved->next_batch,
            saved->epoch, now, now == 1 ? "" : "s", (long long)next,
            (long long)(skipped > 0 ? skipped * d->batch_size : 0));
    saved->next_batch = next;
}

/* ---- phases ---- */

/* One rank's sums, as the ranks exchange them. */
typedef struct sums_record {
    double loss_sum, samples;
    int32_t n;
    struct {
        char name[SC_METRIC_NAME_MAX];
        double numerator, denominator;
    } metric[SC_METRICS_MAX];
} sums_record;

static void pack_sums(sums_record *r, double loss_sum, int64_t samples, const sc_metrics *m)
{
    r->loss_sum = loss_sum;
    r->samples = (double)samples;
    r->n = sc_metrics_count(m);
    for (int i = 0; i < r->n; i++) {
        snprintf(r->metric[i].name, sizeof r->metric[i].name, "%s", sc_metrics_name(m, i));
        r->metric[i].numerator = sc_metrics_numerator(m, i);
        r->metric[i].denominator = sc_metrics_denominator(m, i);
    }
}

/* Sums in rank order: every rank adds the same numbers in the same order. */
static sc_status merge_sums(const sums_record *all, int world, double *loss_sum,
                            int64_t *samples, sc_metrics *m)
{
    double loss = 0, n = 0;
    sc_metrics_reset(m);
    for (int r = 0; r < world; r++) {
        loss += all[r].loss_sum;
        n += all[r].samples;
        for (int i = 0; i < all[r].n; i++)
            SC_TRY(sc_metrics_add(m, all[r].metric[i].name, all[r].metric[i].numerator,
                                  all[r].metric[i].denominator));
    }
    *loss_sum = loss;
    *samples = (int64_t)n;
    return SC_OK;
}

static sc_status reduce_sums(host_dist *d, double *loss_sum, int64_t *samples, sc_metrics *m,
                             bool to_root)
{
    int v[V_COUNT] = {0};
    if (!d->ops)
        return exchange(d, SC_OK, v);
    sums_record *all = calloc((size_t)d->world + 1, sizeof *all); /* + this rank's */
    sc_status st = all ? SC_OK : sc_error_set(SC_ERR_NOMEM, "out of memory for metric sums");
    st = exchange(d, st, v);
    double t0 = host_now();
    if (st == SC_OK) {
        pack_sums(&all[d->world], *loss_sum, *samples, m);
        d->ops->allgather(d->comm, &all[d->world], sizeof *all, all, "the metric reduction");
        if (to_root && d->rank != 0) {
            *loss_sum = 0;
            *samples = 0;
            sc_metrics_reset(m);
        } else {
            st = merge_sums(all, d->world, loss_sum, samples, m);
        }
    }
    free(all);
    d->comm_s += host_now() - t0;
    return st;
}

sc_status host_dist_sum_all(host_dist *d, double *loss_sum, int64_t *samples, sc_metrics *metrics)
{
    return reduce_sums(d, loss_sum, samples, metrics, false);
}

sc_status host_dist_sync_buffers(host_dist *d)
{
    int v[V_COUNT] = {0};
    if (!d->ops || d->n_buffers == 0)
        return exchange(d, SC_OK, v);
    float *values = pull_values(d);
    SC_TRY(exchange(d, values ? SC_OK : sc_error_code(), v));
    double t0 = host_now();
    for (int i = 0; i < d->n_buffers; i++)
        d->ops->broadcast(d->comm, values + d->buffers[i].begin,
                          (size_t)(d->buffers[i].end - d->buffers[i].begin) * sizeof(float), 0,
                          "the broadcast of rank 0's buffers");
    d->comm_s += host_now() - t0;
    return host_dist_check(d, push_values(d));
}

sc_status host_dist_before_checkpoint(host_dist *d, double *loss_sum, int64_t *samples,
                                    sc_metrics *metrics)
{
    SC_TRY(host_dist_sync_buffers(d));
    return reduce_sums(d, loss_sum, samples, metrics, true);
}

double host_dist_take_comm_s(host_dist *d)
{
    double s = d->comm_s;
    d->comm_s = 0;
    return s;
}

void host_dist_describe(const host_dist *d, const host_config *cfg, host_run_log *log)
{
    if (!d->ops && strcmp(cfg->device, "distributed_dataparallel") == 0)
        host_run_log_info(log, "--device distributed_dataparallel outside mpirun or srun: "
                        "training as one process");
    if (!d->ops)
        return;
    double mib = (double)sc_params_trainable_numel(d->params) * sizeof(float) / (1 << 20);
    char where[64];
    if (d->replicas)
        snprintf(where, sizeof where, "%d replicas (threads of one process)", d->world);
    else
        snprintf(where, sizeof where, "%d ranks on %d node%s", d->world, d->nodes,
                 d->nodes == 1 ? "" : "s");
    host_run_log_info(log, "data parallel over %s: %s, %d compute thread%s per rank; global "
                    "batch %lld (%lld per rank x %d ranks x %d accumulated); %d gradient "
                    "bucket%s of at most %g MiB, %.3g MiB of gradients per step",
                    d->ops->name, where, sc_cpu_threads(), sc_cpu_threads() == 1 ? "" : "s",
                    (long long)(cfg->batch_size * d->world * cfg->accumulate),
                    (long long)cfg->batch_size, d->world, cfg->accumulate, d->n_buckets,
                    d->n_buckets == 1 ? "" : "s", cfg->bucket_mb, mib);
}

sc_status host_dist_replicas(const host_config *cfg, const char *device, const char *source,
                           int *replicas)
{
    host_gpu_inventory gpus = {0};
    if (strcmp(device, "cpu") != 0) /* spares CPU runs loading the GPU backend */
        host_gpu_inventory_probe(&gpus);
    SC_TRY(host_device_replicas(device, source, cfg->replicas, &gpus, replicas));
    if (*replicas > 1 && launch_world() != 0)
        return sc_error_set(SC_ERR_INVALID,
                            "%d replicas (%s %s%s) in a process that mpirun or srun started: "
                            "a rank drives one device; start more ranks instead, with "
                            "--device distributed_dataparallel",
                            *replicas, source, device, cfg->replicas ? " and --replicas" : "");
    return SC_OK;
}
