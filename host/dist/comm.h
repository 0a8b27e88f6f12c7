/* comm.h — the transports under the data-parallel layer (dist.h, private
 * to dist/): collectives over every rank of the job, each waited for with
 * a deadline. Transports know nothing of the layer above them; they name
 * their rank in messages through launch.h.
 *
 * Two planes. The control plane (max_ints, broadcast, allgather) moves a
 * few bytes of host memory: status checks, start-up state, metric sums.
 * The data plane (buckets, sum_start/test/wait) sums gradient buckets in
 * place and lets the caller overlap that with backward.
 *
 * Three transports:
 *   MPI      (comm_mpi.c)     ranks are processes started by mpirun or srun;
 *   threads  (comm_threads.c) ranks are threads of one process, replicas
 *                             (--replicas, --device parallel): collectives
 *                             in shared memory;
 *   NCCL     (comm_nccl.c)    for GPU ranks of either kind: the data plane
 *                             in GPU memory on NCCL's own stream
 *                             (bootstrapped with ncclGetUniqueId on rank 0
 *                             and a control-plane broadcast), the control
 *                             plane that of the transport it wraps.
 *
 * A collective that misses its deadline (--collective-timeout) means a
 * rank died or hangs: the transport prints which collective it was and
 * ends the whole job (abort_job), the only exit left once a collective
 * can no longer complete. So none of these calls returns a failure.
 *
 * Thread rule: the thread that opened (or joined) a transport makes every
 * call on it.
 */
#ifndef SCORCH_HOST_DIST_COMM_H
#define SCORCH_HOST_DIST_COMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "scorch/status.h"

typedef struct host_comm host_comm;

typedef struct host_comm_info {
    int rank, world;            /* in the job */
    int local_rank, local_size; /* among the ranks sharing this node's memory */
    int nodes;
} host_comm_info;

typedef struct host_comm_ops {
    const char *name;
    /* Frees this rank's end of the transport; every bucket must be waited
     * for. */
    void (*close)(host_comm *c);
    /* Ends the whole job at once, after the caller has said why
     * (MPI_Abort; _exit for threads). Does not return. */
    void (*abort_job)(host_comm *c);

    /* values[i] = the maximum of values[i] over all ranks. */
    void (*max_ints)(host_comm *c, int *values, int n, const char *what);
    /* root's bytes into every rank's data. */
    void (*broadcast)(host_comm *c, void *data, size_t bytes, int root, const char *what);
    /* all[r * bytes ...] = rank r's `mine`, on every rank. */
    void (*allgather)(host_comm *c, const void *mine, size_t bytes, void *all,
                      const char *what);

    /* Makes room for n buckets, numbered 0..n-1 (at set-up, not per step). */
    sc_status (*buckets)(host_comm *c, int n);
    /* Starts summing data[0..n) over all ranks, in place. Every rank starts
     * the same buckets in the same order. */
    void (*sum_start)(host_comm *c, int bucket, float *data, int64_t n);
    /* Whether the bucket's sum is complete; drives its progress. */
    bool (*sum_test)(host_comm *c, int bucket);
    void (*sum_wait)(host_comm *c, int bucket, const char *what);
} host_comm_ops;

/* Polls test(arg) until it is true: yielding the core between tests, then
 * napping. Past timeout_s it says that `what` did not complete and ends
 * the job through ops->abort_job(c). (comm.c) */
void host_comm_wait(const host_comm_ops *ops, host_comm *c, double timeout_s,
                    bool (*test)(void *), void *arg, const char *what);

#if SC_HAVE_MPI
/* Joins the job (MPI_Init_thread) and describes this rank in it. The
 * process leaves the job (MPI_Finalize) at exit. */
sc_status host_comm_mpi_open(double timeout_s, host_comm **out, host_comm_info *info);
extern const host_comm_ops host_comm_mpi;
#endif

/* Replicas: a team of `world` threads of this process, made before they
 * start and freed after they all end. Each thread joins it as rank `rank`
 * (0 <= rank < world), once. */
typedef struct host_comm_team host_comm_team;
sc_status host_comm_team_new(int world, double timeout_s, host_comm_team **out);
void host_comm_team_free(host_comm_team *team);
sc_status host_comm_threads_join(host_comm_team *team, int rank, host_comm **out,
                                 host_comm_info *info);
extern const host_comm_ops host_comm_threads;

#if SC_HAVE_NCCL
/* GPU ranks: the data plane in GPU memory, summed by NCCL on its own
 * stream, the control plane still that of `ctl` (MPI or threads), which
 * it takes over (closing it on close). For a rank computing on GPU
 * `device` whose kernels run on `compute` (a cudaStream_t): a bucket
 * starts after the kernels queued there when sum_start is called, and the
 * kernels queued there after sum_wait run after its sum. */
extern const host_comm_ops host_comm_nccl;
sc_status host_comm_nccl_wrap(const host_comm_ops *ctl_ops, host_comm *ctl,
                              const host_comm_info *info, double timeout_s, int device,
                              void *compute, host_comm **out);
#endif

#endif
