/* comm_mpi.c — the Open MPI transport (comm.h): every collective is
 * non-blocking and polled with MPI_Test until it completes or its deadline
 * passes, so a dead or hung rank ends the job with a message instead of a
 * silent hang. Control-plane collectives and gradient sums run on two
 * duplicates of MPI_COMM_WORLD, so a check never matches a gradient sum.
 */
#include "dist/comm.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>


struct host_comm {
    MPI_Comm ctl;   /* checks, broadcasts, gathers */
    MPI_Comm grads; /* gradient buckets */
    double timeout_s;
    int n_buckets;
    MPI_Request *requests; /* per bucket; MPI_REQUEST_NULL when idle or done */
};

/* Larger messages go in pieces: MPI counts are ints. */
enum { CHUNK_BYTES = 1 << 30 };

static void mpi_abort_job(host_comm *c)
{
    (void)c;
    MPI_Abort(MPI_COMM_WORLD, 1);
    abort(); /* MPI_Abort does not return */
}

static bool request_done(void *req)
{
    int done = 0;
    MPI_Test(req, &done, MPI_STATUS_IGNORE);
    return done;
}

static void wait_request(host_comm *c, MPI_Request *req, const char *what)
{
    host_comm_wait(&host_comm_mpi, c, c->timeout_s, request_done, req, what);
}

static void describe(host_comm_info *info)
{
    MPI_Comm local;
    MPI_Comm_rank(MPI_COMM_WORLD, &info->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &info->world);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, info->rank, MPI_INFO_NULL,
                        &local);
    MPI_Comm_rank(local, &info->local_rank);
    MPI_Comm_size(local, &info->local_size);
    MPI_Comm_free(&local);
    int node_root = info->local_rank == 0;
    MPI_Allreduce(&node_root, &info->nodes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
}

/* MPI_Finalize waits for every rank, so it runs at exit: after main has
 * printed the job's error, which a rank leaving early (mpirun then kills
 * the job) could otherwise cut off. */
static void finalize_at_exit(void)
{
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized)
        MPI_Finalize();
}

sc_status host_comm_mpi_open(double timeout_s, host_comm **out, host_comm_info *info)
{
    int provided = 0;
    /* Only the training thread calls MPI; loader workers never do. */
    MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    atexit(finalize_at_exit);
    if (provided < MPI_THREAD_FUNNELED)
        return sc_error_set(SC_ERR_UNSUPPORTED,
                            "this MPI library does not support MPI_THREAD_FUNNELED");
    host_comm *c = calloc(1, sizeof *c);
    if (!c)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for the MPI transport");
    c->timeout_s = timeout_s;
    MPI_Comm_dup(MPI_COMM_WORLD, &c->ctl);
    MPI_Comm_dup(MPI_COMM_WORLD, &c->grads);
    describe(info);
    *out = c;
    return SC_OK;
}

static void mpi_close(host_comm *c)
{
    if (!c)
        return;
    MPI_Comm_free(&c->ctl);
    MPI_Comm_free(&c->grads);
    free(c->requests);
    free(c);
}

static void mpi_max_ints(host_comm *c, int *values, int n, const char *what)
{
    MPI_Request req;
    MPI_Iallreduce(MPI_IN_PLACE, values, n, MPI_INT, MPI_MAX, c->ctl, &req);
    wait_request(c, &req, what);
}

static void mpi_broadcast(host_comm *c, void *data, size_t bytes, int root, const char *what)
{
    for (size_t done = 0; done < bytes; done += CHUNK_BYTES) {
        size_t n = bytes - done < CHUNK_BYTES ? bytes - done : CHUNK_BYTES;
        MPI_Request req;
        MPI_Ibcast((char *)data + done, (int)n, MPI_BYTE, root, c->ctl, &req);
        wait_request(c, &req, what);
    }
}

/* Control-plane payloads are small (a few KiB per rank). */
static void mpi_allgather(host_comm *c, const void *mine, size_t bytes, void *all,
                          const char *what)
{
    MPI_Request req;
    MPI_Iallgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, c->ctl, &req);
    wait_request(c, &req, what);
}

static sc_status mpi_buckets(host_comm *c, int n)
{
    MPI_Request *r = realloc(c->requests, (size_t)(n > 0 ? n : 1) * sizeof *r);
    if (!r)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for %d gradient buckets", n);
    for (int i = 0; i < n; i++)
        r[i] = MPI_REQUEST_NULL;
    c->requests = r;
    c->n_buckets = n;
    return SC_OK;
}

/* buckets.c keeps each bucket under INT_MAX floats. */
static void mpi_sum_start(host_comm *c, int bucket, float *data, int64_t n)
{
    MPI_Iallreduce(MPI_IN_PLACE, data, (int)n, MPI_FLOAT, MPI_SUM, c->grads,
                   &c->requests[bucket]);
}

static bool mpi_sum_test(host_comm *c, int bucket) { return request_done(&c->requests[bucket]); }

static void mpi_sum_wait(host_comm *c, int bucket, const char *what)
{
    wait_request(c, &c->requests[bucket], what);
}

const host_comm_ops host_comm_mpi = {
    .name = "MPI",
    .close = mpi_close,
    .abort_job = mpi_abort_job,
    .max_ints = mpi_max_ints,
    .broadcast = mpi_broadcast,
    .allgather = mpi_allgather,
    .buckets = mpi_buckets,
    .sum_start = mpi_sum_start,
    .sum_test = mpi_sum_test,
    .sum_wait = mpi_sum_wait,
};
