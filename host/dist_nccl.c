/* dist_nccl.c — the transport of GPU ranks (dist_comm.h): gradient
 * buckets summed in GPU memory by NCCL on a stream of its own, so the sums
 * overlap the rest of backward; checks, broadcasts and gathers of host
 * bytes go through the transport it wraps (MPI for ranks that are
 * processes, threads for replicas).
 *
 * Ordering: when dist.c starts a bucket (backward has queued the last
 * kernel writing it), an event recorded on the compute stream makes the
 * NCCL stream wait for those kernels; when it waits for a bucket, the host
 * polls the bucket's completion event against the deadline, and the
 * compute stream is made to wait for it too, so the averaging and the
 * optimizer that follow see the sum. */
#include "dist_comm.h"

#include <cuda_runtime.h>
/* nccl.h declares some functions with () for (void). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop
#include <stdio.h>
#include <stdlib.h>

struct sc_comm {
    const sc_comm_ops *ctl_ops; /* the control plane */
    sc_comm *ctl;
    double timeout_s;
    ncclComm_t nccl;
    cudaStream_t compute, stream; /* the rank's kernels; NCCL's own */
    int n_buckets;
    cudaEvent_t *ready, *done; /* per bucket: gradients queued; sum complete */
};

#include "dist.h"

static sc_status nccl_failed(ncclResult_t r, const char *call)
{
    return sc_error_set(SC_ERR_UNSUPPORTED, "NCCL: %s: %s", call, ncclGetErrorString(r));
}

static sc_status cuda_failed(cudaError_t e, const char *call)
{
    cudaGetLastError();
    return sc_error_set(SC_ERR_UNSUPPORTED, "CUDA: %s: %s", call, cudaGetErrorString(e));
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

static void free_events(sc_comm *c)
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

static void nccl_close(sc_comm *c)
{
    if (!c)
        return;
    free_events(c);
    if (c->nccl)
        ncclCommDestroy(c->nccl);
    if (c->stream)
        cudaStreamDestroy(c->stream);
    if (c->ctl)
        c->ctl_ops->close(c->ctl);
    free(c);
}

/* Rank 0's unique id to every rank, then the communicator on `device`. */
static sc_status join(sc_comm *c, const sc_comm_info *info, int device)
{
    ncclUniqueId id;
    if (info->rank == 0)
        NCCL_TRY(ncclGetUniqueId(&id));
    c->ctl_ops->broadcast(c->ctl, &id, sizeof id, 0, "the broadcast of the NCCL id");
    CUDA_TRY(cudaSetDevice(device));
    CUDA_TRY(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    NCCL_TRY(ncclCommInitRank(&c->nccl, info->world, id, info->rank));
    return SC_OK;
}

sc_status sc_comm_nccl_wrap(const sc_comm_ops *ctl_ops, sc_comm *ctl, const sc_comm_info *info,
                            double timeout_s, int device, void *compute, sc_comm **out)
{
    *out = NULL;
    sc_comm *c = calloc(1, sizeof *c);
    if (!c)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for the NCCL transport");
    *c = (sc_comm){.ctl_ops = ctl_ops, .ctl = ctl, .timeout_s = timeout_s, .compute = compute};
    sc_status st = join(c, info, device);
    if (st != SC_OK) {
        c->ctl = NULL; /* the caller still owns it */
        nccl_close(c);
        return sc_error_wrap(st, "setting up NCCL on cuda:%d", device);
    }
    *out = c;
    return SC_OK;
}

static void nccl_max_ints(sc_comm *c, int *values, int n, const char *what)
{
    c->ctl_ops->max_ints(c->ctl, values, n, what);
}

static void nccl_broadcast(sc_comm *c, void *data, size_t bytes, int root, const char *what)
{
    c->ctl_ops->broadcast(c->ctl, data, bytes, root, what);
}

static void nccl_allgather(sc_comm *c, const void *mine, size_t bytes, void *all,
                           const char *what)
{
    c->ctl_ops->allgather(c->ctl, mine, bytes, all, what);
}

static sc_status nccl_buckets(sc_comm *c, int n)
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

/* A failure here means the GPU or the network broke under a running job:
 * like a missed deadline, it ends the job. */
static void broken(sc_comm *c, const char *what)
{
    fprintf(stderr, "%sscorch-train: %s failed: %s; aborting the job\n", sc_dist_log_prefix(),
            what, sc_error_message());
    fflush(stderr);
    c->ctl_ops->abort_job(c->ctl);
}

static void nccl_abort_job(sc_comm *c) { c->ctl_ops->abort_job(c->ctl); }

static sc_status start(sc_comm *c, int bucket, float *data, int64_t n)
{
    CUDA_TRY(cudaEventRecord(c->ready[bucket], c->compute));
    CUDA_TRY(cudaStreamWaitEvent(c->stream, c->ready[bucket], 0));
    NCCL_TRY(ncclAllReduce(data, data, (size_t)n, ncclFloat, ncclSum, c->nccl, c->stream));
    CUDA_TRY(cudaEventRecord(c->done[bucket], c->stream));
    return SC_OK;
}

static void nccl_sum_start(sc_comm *c, int bucket, float *data, int64_t n)
{
    if (start(c, bucket, data, n) != SC_OK)
        broken(c, "starting a gradient allreduce");
}

static bool nccl_sum_test(sc_comm *c, int bucket)
{
    return cudaEventQuery(c->done[bucket]) == cudaSuccess;
}

typedef struct bucket_ref {
    sc_comm *c;
    int bucket;
} bucket_ref;

/* Done, or a NCCL error (a peer gone) that no wait will fix. */
static bool sum_settled(void *arg)
{
    bucket_ref *r = arg;
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(r->c->nccl, &async);
    if (async != ncclSuccess && async != ncclInProgress) {
        nccl_failed(async, "the gradient allreduce");
        broken(r->c, "the gradient allreduce");
    }
    return nccl_sum_test(r->c, r->bucket);
}

static void nccl_sum_wait(sc_comm *c, int bucket, const char *what)
{
    bucket_ref r = {c, bucket};
    sc_comm_wait(&sc_comm_nccl, c, c->timeout_s, sum_settled, &r, what);
    if (cudaStreamWaitEvent(c->compute, c->done[bucket], 0) != cudaSuccess) {
        cuda_failed(cudaGetLastError(), "cudaStreamWaitEvent");
        broken(c, what);
    }
}

const sc_comm_ops sc_comm_nccl = {
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
