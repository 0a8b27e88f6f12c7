/* comm_threads.c — the transport of replicas (comm.h): the ranks are
 * threads of this process, and their collectives meet in shared memory.
 * The threads themselves are replicas.c's.
 *
 * Every wait is on a counter that only grows, so nothing is ever reset
 * between rounds: a rank knows from its own count of rounds how far the
 * shared counter must have come.
 *
 * Control plane: each rank posts a pointer to its buffer, all meet at a
 * barrier, each reads what it needs from the others' buffers, and all meet
 * again before anyone may touch its buffer (or post another).
 *
 * Data plane: a bucket's sum is split into `world` slices. When every rank
 * has started the bucket, each sums its slice over all ranks' buffers, in
 * rank order, and writes the sum into every rank's buffer; the bucket is
 * done when every slice is. A rank sums its slice in sum_test (called as
 * backward goes on) or in sum_wait, so the work is shared and overlaps
 * backward. Every rank's result is the same bits.
 */
#include "dist/comm.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dist/launch.h"

/* A bucket as the team sees it. */
typedef struct team_bucket {
    atomic_llong started; /* ranks that started it, over all rounds */
    atomic_llong summed;  /* slices summed, over all rounds */
    float **data;         /* [world]: each rank's buffer in the current round */
    int64_t *n;           /* [world]: its length, the same on every rank */
} team_bucket;

struct host_comm_team {
    int world;
    double timeout_s;
    atomic_llong *reached;      /* [world]: barriers each rank has come to */
    const void **posted;        /* [world]: each rank's buffer in the collective */
    pthread_mutex_t lock;       /* for making the buckets */
    team_bucket *buckets;
    int n_buckets;
};

/* One rank's end. */
struct host_comm {
    host_comm_team *team;
    int rank;
    long long barriers;  /* barriers passed */
    long long *rounds;   /* per bucket: rounds started */
    bool *sliced;        /* per bucket: this round's slice is summed */
};

/* max_ints works through this many ints per round of barriers. */
enum { INTS_PER_ROUND = 64, SLICE_CHUNK = 1024 };

sc_status host_comm_team_new(int world, double timeout_s, host_comm_team **out)
{
    *out = NULL;
    host_comm_team *team = calloc(1, sizeof *team);
    const void **posted = calloc((size_t)world, sizeof *posted);
    atomic_llong *reached = calloc((size_t)world, sizeof *reached);
    if (!team || !posted || !reached) {
        free(team);
        free(posted);
        free(reached);
        return sc_error_set(SC_ERR_NOMEM, "out of memory for a team of %d replicas", world);
    }
    team->world = world;
    team->timeout_s = timeout_s;
    team->posted = posted;
    team->reached = reached;
    for (int r = 0; r < world; r++)
        atomic_init(&reached[r], 0);
    pthread_mutex_init(&team->lock, NULL);
    *out = team;
    return SC_OK;
}

void host_comm_team_free(host_comm_team *team)
{
    if (!team)
        return;
    for (int b = 0; b < team->n_buckets; b++) {
        free(team->buckets[b].data);
        free(team->buckets[b].n);
    }
    free(team->buckets);
    free(team->posted);
    free(team->reached);
    pthread_mutex_destroy(&team->lock);
    free(team);
}

sc_status host_comm_threads_join(host_comm_team *team, int rank, host_comm **out,
                                 host_comm_info *info)
{
    *out = calloc(1, sizeof **out);
    if (!*out)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for replica %d's transport", rank);
    (*out)->team = team;
    (*out)->rank = rank;
    *info = (host_comm_info){.rank = rank, .world = team->world, .local_rank = rank,
                             .local_size = team->world, .nodes = 1};
    return SC_OK;
}

static void threads_close(host_comm *c)
{
    if (!c)
        return;
    free(c->rounds);
    free(c->sliced);
    free(c);
}

/* A hung replica cannot be ended alone: the process goes, as a job of
 * processes would under MPI_Abort; first, when this rank waits at a
 * barrier, it names the ranks that have not come to it. */
static void threads_abort_job(host_comm *c)
{
    for (int r = 0; c && r < c->team->world; r++)
        if (atomic_load_explicit(&c->team->reached[r], memory_order_acquire) < c->barriers)
            fprintf(stderr, "%sscorch-train: rank %d never came to it\n", host_log_prefix(),
                    r);
    fflush(stderr);
    _exit(1);
}

/* ---- control plane ---- */

typedef struct barrier_ref {
    const host_comm_team *team;
    long long target;
} barrier_ref;

static bool all_reached(void *arg)
{
    const barrier_ref *b = arg;
    for (int r = 0; r < b->team->world; r++)
        if (atomic_load_explicit(&b->team->reached[r], memory_order_acquire) < b->target)
            return false;
    return true;
}

static void barrier(host_comm *c, const char *what)
{
    c->barriers++;
    atomic_store_explicit(&c->team->reached[c->rank], c->barriers, memory_order_release);
    barrier_ref b = {c->team, c->barriers};
    host_comm_wait(&host_comm_threads, c, c->team->timeout_s, all_reached, &b, what);
}

/* Posts this rank's buffer and waits until every rank has posted its. */
static void post(host_comm *c, const void *buffer, const char *what)
{
    c->team->posted[c->rank] = buffer;
    barrier(c, what);
}

static void threads_max_ints(host_comm *c, int *values, int n, const char *what)
{
    for (int base = 0; base < n; base += INTS_PER_ROUND) {
        int m = n - base < INTS_PER_ROUND ? n - base : INTS_PER_ROUND;
        int max[INTS_PER_ROUND];
        post(c, values + base, what);
        memcpy(max, values + base, (size_t)m * sizeof *max);
        for (int r = 0; r < c->team->world; r++) {
            const int *theirs = c->team->posted[r];
            for (int i = 0; i < m; i++)
                max[i] = theirs[i] > max[i] ? theirs[i] : max[i];
        }
        barrier(c, what); /* everyone has read this rank's values */
        memcpy(values + base, max, (size_t)m * sizeof *max);
    }
}

static void threads_broadcast(host_comm *c, void *data, size_t bytes, int root, const char *what)
{
    post(c, data, what);
    if (c->rank != root)
        memcpy(data, c->team->posted[root], bytes);
    barrier(c, what); /* root's data is read */
}

static void threads_allgather(host_comm *c, const void *mine, size_t bytes, void *all,
                              const char *what)
{
    post(c, mine, what);
    for (int r = 0; r < c->team->world; r++)
        memcpy((char *)all + (size_t)r * bytes, c->team->posted[r], bytes);
    barrier(c, what);
}

/* ---- data plane ---- */

/* The team's buckets are made by the first rank to get here; every rank
 * asks for the same number (the ranks' parameters were compared). */
static sc_status make_team_buckets(host_comm_team *team, int n)
{
    if (team->buckets)
        return team->n_buckets == n
                   ? SC_OK
                   : sc_error_set(SC_ERR_STATE, "replicas disagree on the gradient buckets "
                                  "(%d, %d)", team->n_buckets, n);
    team->buckets = calloc((size_t)(n > 0 ? n : 1), sizeof *team->buckets);
    if (!team->buckets)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for %d gradient buckets", n);
    for (int b = 0; b < n; b++) {
        atomic_init(&team->buckets[b].started, 0);
        atomic_init(&team->buckets[b].summed, 0);
        team->buckets[b].data = calloc((size_t)team->world, sizeof(float *));
        team->buckets[b].n = calloc((size_t)team->world, sizeof(int64_t));
        team->n_buckets = b + 1; /* freed with the team from here on */
        if (!team->buckets[b].data || !team->buckets[b].n)
            return sc_error_set(SC_ERR_NOMEM, "out of memory for %d gradient buckets", n);
    }
    return SC_OK;
}

static sc_status threads_buckets(host_comm *c, int n)
{
    pthread_mutex_lock(&c->team->lock);
    sc_status st = make_team_buckets(c->team, n);
    pthread_mutex_unlock(&c->team->lock);
    SC_TRY(st);
    c->rounds = calloc((size_t)(n > 0 ? n : 1), sizeof *c->rounds);
    c->sliced = calloc((size_t)(n > 0 ? n : 1), sizeof *c->sliced);
    if (!c->rounds || !c->sliced)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for %d gradient buckets", n);
    return SC_OK;
}

static void threads_sum_start(host_comm *c, int bucket, float *data, int64_t n)
{
    team_bucket *k = &c->team->buckets[bucket];
    k->data[c->rank] = data;
    k->n[c->rank] = n;
    c->rounds[bucket]++;
    c->sliced[bucket] = false;
    atomic_fetch_add_explicit(&k->started, 1, memory_order_acq_rel);
}

/* Elements [lo, hi) of every rank's buffer become their sum over ranks,
 * added in rank order. */
static void sum_slice(float *const *data, int world, int64_t lo, int64_t hi)
{
    float sum[SLICE_CHUNK];
    for (int64_t base = lo; base < hi; base += SLICE_CHUNK) {
        int64_t m = hi - base < SLICE_CHUNK ? hi - base : SLICE_CHUNK;
        memcpy(sum, data[0] + base, (size_t)m * sizeof *sum);
        for (int r = 1; r < world; r++)
            for (int64_t i = 0; i < m; i++)
                sum[i] += data[r][base + i];
        for (int r = 0; r < world; r++)
            memcpy(data[r] + base, sum, (size_t)m * sizeof *sum);
    }
}

static bool threads_sum_test(host_comm *c, int bucket)
{
    team_bucket *k = &c->team->buckets[bucket];
    int world = c->team->world;
    long long target = c->rounds[bucket] * world;
    if (!c->sliced[bucket] && atomic_load_explicit(&k->started, memory_order_acquire) >= target) {
        int64_t n = k->n[c->rank];
        sum_slice(k->data, world, n * c->rank / world, n * (c->rank + 1) / world);
        c->sliced[bucket] = true;
        atomic_fetch_add_explicit(&k->summed, 1, memory_order_acq_rel);
    }
    return atomic_load_explicit(&k->summed, memory_order_acquire) >= target;
}

typedef struct bucket_ref {
    host_comm *c;
    int bucket;
} bucket_ref;

static bool bucket_done(void *arg)
{
    const bucket_ref *r = arg;
    return threads_sum_test(r->c, r->bucket);
}

static void threads_sum_wait(host_comm *c, int bucket, const char *what)
{
    bucket_ref r = {c, bucket};
    host_comm_wait(&host_comm_threads, c, c->team->timeout_s, bucket_done, &r, what);
}

const host_comm_ops host_comm_threads = {
    .name = "threads",
    .close = threads_close,
    .abort_job = threads_abort_job,
    .max_ints = threads_max_ints,
    .broadcast = threads_broadcast,
    .allgather = threads_allgather,
    .buckets = threads_buckets,
    .sum_start = threads_sum_start,
    .sum_test = threads_sum_test,
    .sum_wait = threads_sum_wait,
};
