/* dist_comm.h — the transport under dist.c (private to it): collectives
 * over every rank of the job, each waited for with a deadline.
 *
 * Two planes. The control plane (max_ints, broadcast, allgather) moves a
 * few bytes of host memory: status checks, start-up state, metric sums.
 * The data plane (buckets, sum_start/test/wait) sums gradient buckets in
 * place and lets the caller overlap that with backward. The MPI table
 * below does both for CPU ranks; for GPU ranks the NCCL table
 * (dist_nccl.c) runs the data plane with NCCL on its own stream
 * (bootstrapped with ncclGetUniqueId on rank 0 and a control-plane
 * broadcast) and hands the control plane to MPI's.
 *
 * A collective that misses its deadline (--collective-timeout) means a
 * rank died or hangs: the transport prints which collective it was and
 * aborts the whole job (MPI_Abort), the only exit left once a collective
 * can no longer complete. So none of these calls returns a failure.
 *
 * Thread rule: the thread that opened the transport makes every call.
 */
#ifndef SCORCH_HOST_DIST_COMM_H
#define SCORCH_HOST_DIST_COMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "scorch/status.h"

typedef struct sc_comm sc_comm;

typedef struct sc_comm_info {
    int rank, world;            /* in the job */
    int local_rank, local_size; /* among the ranks sharing this node's memory */
    int nodes;
} sc_comm_info;

typedef struct sc_comm_ops {
    const char *name;
    /* Joins the job (MPI_Init_thread) and describes this rank in it. */
    sc_status (*open)(double timeout_s, sc_comm **out, sc_comm_info *info);
    /* Frees the transport; every bucket must be waited for. The process
     * leaves the job (MPI_Finalize) at exit. */
    void (*close)(sc_comm *c);

    /* values[i] = the maximum of values[i] over all ranks. */
    void (*max_ints)(sc_comm *c, int *values, int n, const char *what);
    /* root's bytes into every rank's data. */
    void (*broadcast)(sc_comm *c, void *data, size_t bytes, int root, const char *what);
    /* all[r * bytes ...] = rank r's `mine`, on every rank. */
    void (*allgather)(sc_comm *c, const void *mine, size_t bytes, void *all,
                      const char *what);

    /* Makes room for n buckets, numbered 0..n-1 (at set-up, not per step). */
    sc_status (*buckets)(sc_comm *c, int n);
    /* Starts summing data[0..n) over all ranks, in place. Every rank starts
     * the same buckets in the same order. */
    void (*sum_start)(sc_comm *c, int bucket, float *data, int64_t n);
    /* Whether the bucket's sum is complete; drives its progress. */
    bool (*sum_test)(sc_comm *c, int bucket);
    void (*sum_wait)(sc_comm *c, int bucket, const char *what);
} sc_comm_ops;

#if SC_HAVE_MPI
extern const sc_comm_ops sc_comm_mpi;

/* Polls test(arg) until it is true: yielding the core between tests, then
 * napping; past timeout_s it reports `what` and aborts the job. */
void sc_comm_wait(double timeout_s, bool (*test)(void *), void *arg, const char *what);
#endif

#if SC_HAVE_NCCL
/* GPU ranks: the data plane in GPU memory, summed by NCCL on its own
 * stream, the control plane still MPI's. sc_comm_nccl_wrap takes over an
 * open MPI transport `mpi` (closing it on close) for a rank computing on
 * GPU `device` whose kernels run on `compute` (a cudaStream_t): a bucket
 * starts after the kernels queued there when sum_start is called, and the
 * kernels queued there after sum_wait run after its sum. */
extern const sc_comm_ops sc_comm_nccl;
sc_status sc_comm_nccl_wrap(sc_comm *mpi, const sc_comm_info *info, double timeout_s,
                            int device, void *compute, sc_comm **out);
#endif

#endif
