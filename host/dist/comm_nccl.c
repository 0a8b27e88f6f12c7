/* comm_nccl.c — the transport of GPU ranks (comm.h): gradient
 * buckets summed in GPU memory by NCCL on a stream of its own, so the sums
 * overlap the rest of backward; checks, broadcasts and gathers of host
 * bytes go through the transport it wraps (MPI for ranks that are
 * processes, threads for replicas).
 *
 * Ordering: when the data-parallel layer starts a bucket (backward has queued the last
 * kernel writing it), an event recorded on the compute stream makes the
 * NCCL stream wait for those kernels; when it waits for a bucket, the host
 * polls the bucket's completion event against the deadline, and the
 * compute stream is made to wait for it too, so the averaging and the
 * optimizer that follow see the sum.
 *
 * Nothing waits without a deadline. The communicator is non-blocking
 * (ncclConfig_t.blocking = 0): its start-up, which needs every rank, and
 * any call that returns ncclInProgress are polled with
 * ncclCommGetAsyncError against --collective-timeout like the sums. A
 * missed deadline or an error (a peer gone: ncclRemoteError; the GPU
 * failed: a CUDA error, reported as such at once) aborts the communicator
 * (ncclCommAbort, which never waits for the other ranks) and ends the job;
 * only a communicator every rank got through with is finalized and
 * destroyed. */
#include "dist/comm.h"

#include <cuda_runtime.h>
/* nccl.h declares some functions with () for (void). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop
#include <stdio.h>
#include <stdlib.h>

#include "dist/launch.h"

struct host_comm {
    const host_comm_ops *ctl_ops; /* the control plane */
    host_comm *ctl;
    double timeout_s;
    ncclComm_t nccl;
    bool healthy; /* started, and no error since: finalize, not abort */
    cudaStream_t compute, stream; /* the rank's kernels; NCCL's own */
    int n_buckets;
    cudaEvent_t *ready, *done; /* per bucket: gradients queued; sum complete */
};

static sc_status nccl_failed(ncclResult_t r, const char *call)
{
    return sc_error_set(SC_ERR_UNSUPPORTED, "NCCL: %s: %s", call, ncclGetErrorString(r));
}

/* A sticky error (an illegal address, a kernel that crashed: CUDA
 * returns it from every later call, and cudaGetLastError cannot clear it)
 * is the GPU's failure in earlier asynchronous work, not the call's. */
static sc_status cuda_failed(cudaError_t e, const char *call)
{
    cudaGetLastError();
    if (cudaPeekAtLastError() != e)
        return sc_error_set(SC_ERR_UNSUPPORTED, "CUDA: %s: %s", call, cudaGetErrorString(e));
    int device;
    char gpu[32] = "the GPU";
    if (cudaGetDevice(&device) == cudaSuccess)
        snprintf(gpu, sizeof gpu, "cuda:%d", device);
    return sc_error_set(SC_ERR_STATE,
                        "CUDA: %s failed in earlier asynchronous work: %s (a sticky error: "
                        "every later CUDA call of this process fails with it; noticed at %s)",
                        gpu, cudaGetErrorString(e), call);
}

#define NCCL_TRY(call)                                                         \
    do {                                                                       \
        ncclResult_t r_ = (call);                                              \
        if (r_ != ncclSuccess)                                                 \
            return nccl_failed(r_, #call);                                     \
    } while (0)
#define CUDA_TRY(call)                                                         \
    do {                                                                       \
        cudaError_t e_ = (call);                                               \
        if (e_ != cudaSuccess)                                                 \
            return cuda_failed(e_, #call);                                     \
    } while (0)

static void free_events(host_comm *c)
{
    for (int i = 0; i < c->n_buckets; i++) {
        cudaEventDestroy(c->ready[i]);
        cudaEventDestroy(c->done[i]);
    }
    free(c->ready);
    free(c->done);
    c->ready = c->done = NULL;
    c->n_buckets = 0;
}

/* Whether the communicator's last call is done: its state is no longer
 * ncclInProgress. */
static bool settled(void *arg)
{
    host_comm *c = arg;
    ncclResult_t state = ncclSuccess;
    ncclCommGetAsyncError(c->nccl, &state);
    return state != ncclInProgress;
}

/* Waits for a call of the non-blocking communicator that returned r
 * (ncclInProgress: it goes on in the background) against the deadline,
 * which ends the job; a failure, then or later, is its status. */
static sc_status finish(host_comm *c, ncclResult_t r, const char *what)
{
    if (r == ncclInProgress) {
        host_comm_wait(&host_comm_nccl, c, c->timeout_s, settled, c, what);
        ncclCommGetAsyncError(c->nccl, &r);
    }
    if (r != ncclSuccess) {
        c->healthy = false;
        return nccl_failed(r, what);
    }
    return SC_OK;
}

static void nccl_close(host_comm *c)
{
    if (!c)
        return;
    free_events(c);
    /* Finalizing waits for every rank, under the deadline; a communicator
     * that failed, then or before, is aborted instead. */
    if (c->healthy &&
        finish(c, ncclCommFinalize(c->nccl), "NCCL's shutdown (ncclCommFinalize)") == SC_OK)
        ncclCommDestroy(c->nccl);
    else if (c->nccl)
        ncclCommAbort(c->nccl);
    if (c->stream)
        cudaStreamDestroy(c->stream);
    if (c->ctl)
        c->ctl_ops->close(c->ctl);
    free(c);
}

/* Rank 0's unique id to every rank, then the communicator on `device`.
 * Made non-blocking: ncclCommInitRank would wait for every rank to join
 * with no deadline. */
static sc_status join(host_comm *c, const host_comm_info *info, int device)
{
    ncclUniqueId id;
    if (info->rank == 0)
        NCCL_TRY(ncclGetUniqueId(&id));
    c->ctl_ops->broadcast(c->ctl, &id, sizeof id, 0, "the broadcast of the NCCL id");
    CUDA_TRY(cudaSetDevice(device));
    CUDA_TRY(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(&c->nccl, info->world, id, info->rank, &config);
    if (r != ncclSuccess && r != ncclInProgress)
        return nccl_failed(r, "ncclCommInitRankConfig");
    SC_TRY(finish(c, r, "NCCL's start-up (ncclCommInitRankConfig)"));
    c->healthy = true;
    return SC_OK;
}

sc_status host_comm_nccl_wrap(const host_comm_ops *ctl_ops, host_comm *ctl,
                              const host_comm_info *info, double timeout_s, int device,
                              void *compute, host_comm **out)
{
    *out = NULL;
    host_comm *c = calloc(1, sizeof *c);
    if (!c)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for the NCCL transport");
    *c = (host_comm){.ctl_ops = ctl_ops, .ctl = ctl, .timeout_s = timeout_s, .compute = compute};
    sc_status st = join(c, info, device);
    if (st != SC_OK) {
        c->ctl = NULL; /* the caller still owns it */
        nccl_close(c);
        return sc_error_wrap(st, "setting up NCCL on cuda:%d", device);
    }
    *out = c;
    return SC_OK;
}

static void nccl_max_ints(host_comm *c, int *values, int n, const char *what)
{
    c->ctl_ops->max_ints(c->ctl, values, n, what);
}

static void nccl_broadcast(host_comm *c, void *data, size_t bytes, int root, const char *what)
{
    c->ctl_ops->broadcast(c->ctl, data, bytes, root, what);
}

static void nccl_allgather(host_comm *c, const void *mine, size_t bytes, void *all,
                           const char *what)
{
    c->ctl_ops->allgather(c->ctl, mine, bytes, all, what);
}

static sc_status nccl_buckets(host_comm *c, int n)
{
    free_events(c);
    c->ready = calloc((size_t)(n > 0 ? n : 1), sizeof *c->ready);
    c->done = calloc((size_t)(n > 0 ? n : 1), sizeof *c->done);
    if (!c->ready || !c->done)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for %d gradient buckets", n);
    for (; c->n_buckets < n; c->n_buckets++) {
        int i = c->n_buckets;
        CUDA_TRY(cudaEventCreateWithFlags(&c->ready[i], cudaEventDisableTiming));
        if (cudaEventCreateWithFlags(&c->done[i], cudaEventDisableTiming) != cudaSuccess) {
            cudaEventDestroy(c->ready[i]);
            return cuda_failed(cudaGetLastError(), "cudaEventCreateWithFlags");
        }
    }
    return SC_OK;
}

/* Aborting the communicator first stops this rank's NCCL work and frees
 * it without waiting for the other ranks. */
static void nccl_abort_job(host_comm *c)
{
    if (c->nccl)
        ncclCommAbort(c->nccl);
    c->ctl_ops->abort_job(c->ctl);
}

/* A failure here means the GPU or the network broke under a running job:
 * like a missed deadline, it ends the job. */
static void broken(host_comm *c, const char *what)
{
    fprintf(stderr, "%sscorch-train: %s failed: %s; aborting the job\n", host_log_prefix(),
            what, sc_error_message());
    fflush(stderr);
    nccl_abort_job(c);
}

static sc_status start(host_comm *c, int bucket, float *data, int64_t n)
{
    CUDA_TRY(cudaEventRecord(c->ready[bucket], c->compute));
    CUDA_TRY(cudaStreamWaitEvent(c->stream, c->ready[bucket], 0));
    SC_TRY(finish(c,
                  ncclAllReduce(data, data, (size_t)n, ncclFloat, ncclSum, c->nccl, c->stream),
                  "ncclAllReduce"));
    CUDA_TRY(cudaEventRecord(c->done[bucket], c->stream));
    return SC_OK;
}

static void nccl_sum_start(host_comm *c, int bucket, float *data, int64_t n)
{
    if (start(c, bucket, data, n) != SC_OK)
        broken(c, "starting a gradient allreduce");
}

/* cudaSuccess once the bucket's sum is done. cudaErrorNotReady is no
 * error, but it becomes the thread's last error all the same: cleared, or
 * the check after this thread's next kernel launch would take it for its
 * own. */
static cudaError_t sum_state(host_comm *c, int bucket)
{
    cudaError_t e = cudaEventQuery(c->done[bucket]);
    if (e == cudaErrorNotReady)
        cudaGetLastError();
    return e;
}

static bool nccl_sum_test(host_comm *c, int bucket) { return sum_state(c, bucket) == cudaSuccess; }

typedef struct bucket_ref {
    host_comm *c;
    int bucket;
} bucket_ref;

/* Done, or an error that no wait will fix: NCCL's (a peer gone) or the
 * GPU's, which would otherwise pass for a collective that never ends. */
static bool sum_settled(void *arg)
{
    bucket_ref *r = arg;
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(r->c->nccl, &async);
    if (async != ncclSuccess && async != ncclInProgress) {
        nccl_failed(async, "the gradient allreduce");
        broken(r->c, "the gradient allreduce");
    }
    cudaError_t e = sum_state(r->c, r->bucket);
    if (e != cudaSuccess && e != cudaErrorNotReady) {
        cuda_failed(e, "cudaEventQuery");
        broken(r->c, "the gradient allreduce");
    }
    return e == cudaSuccess;
}

static void nccl_sum_wait(host_comm *c, int bucket, const char *what)
{
    bucket_ref r = {c, bucket};
    host_comm_wait(&host_comm_nccl, c, c->timeout_s, sum_settled, &r, what);
    if (cudaStreamWaitEvent(c->compute, c->done[bucket], 0) != cudaSuccess) {
        cuda_failed(cudaGetLastError(), "cudaStreamWaitEvent");
        broken(c, what);
    }
}

const host_comm_ops host_comm_nccl = {
    .name = "NCCL",
    .close = nccl_close,
    .abort_job = nccl_abort_job,
    .max_ints = nccl_max_ints,
    .broadcast = nccl_broadcast,
    .allgather = nccl_allgather,
    .buckets = nccl_buckets,
    .sum_start = nccl_sum_start,
    .sum_test = nccl_sum_test,
    .sum_wait = nccl_sum_wait,
};
