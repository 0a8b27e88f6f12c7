/* scorch/dist.h — the job a plugin runs in: its rank among the ranks of a
 * data-parallel run, and collectives over them (docs/distributed.md,
 * "Distributed helpers for plugins").
 *
 * A run's ranks are MPI processes (mpirun, srun), replicas (threads of one
 * process: --replicas, --device parallel) or, for any other run, a single
 * process: rank 0 of 1, whose collectives are local copies. The
 * collectives go over the transport the run trains with, under the host's
 * rules:
 *
 * - Every rank makes the same collective calls, in the same order, with
 *   the same sizes (the root, count, type and operation too). The ranks
 *   compare each call before any byte moves: a rank that calls another
 *   collective, or passes other sizes, stops the job with a message on
 *   every rank instead of hanging it. A call that fails on one rank
 *   (a bad argument) fails on every rank ("rank 1 failed: ...").
 * - A collective waits at most --collective-timeout seconds for the other
 *   ranks; past that the job ends, naming the call.
 * - Collectives are made by a rank's own thread: in the calls the host
 *   makes on it (index_open, dataset_open, network_create, hooks). A
 *   data-loader thread (dataset_getitem) is refused with SC_ERR_STATE.
 *   The rank queries answer on any thread the host runs plugin code on;
 *   a thread a plugin starts itself is no rank's (rank 0 of 1 there).
 *
 * Each collective returns SC_OK, or an error with a message
 * (sc_error_message()).
 */
#ifndef SCORCH_DIST_H
#define SCORCH_DIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "scorch/export.h"
#include "scorch/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The element types sc_dist_allreduce combines. */
typedef enum sc_dist_dtype {
    SC_DIST_F32,
    SC_DIST_F64,
    SC_DIST_I32,
    SC_DIST_I64,
    SC_DIST_DTYPE_COUNT
} sc_dist_dtype;

typedef enum sc_dist_op {
    SC_DIST_SUM,
    SC_DIST_MAX,
    SC_DIST_MIN,
    SC_DIST_OP_COUNT
} sc_dist_op;

/* This rank (0..world-1), the number of ranks, this rank's place among
 * the ranks of its node (a GPU's number), and whether it is rank 0, the
 * one that speaks for the job (prints, writes the run directory). */
SC_API int sc_dist_rank(void);
SC_API int sc_dist_world_size(void);
SC_API int sc_dist_local_rank(void);
SC_API bool sc_dist_is_main(void);

/* Returns when every rank has called it. */
SC_API sc_status sc_dist_barrier(void);

/* Rank root's `bytes` bytes at buf into every rank's buf. */
SC_API sc_status sc_dist_broadcast(void *buf, size_t bytes, int root);

/* buf[0..count) of `dtype` becomes, on every rank, its elementwise sum,
 * maximum or minimum over the ranks, combined in rank order: every rank
 * gets the same bits, and a sum of floats is the same from run to run. */
SC_API sc_status sc_dist_allreduce(void *buf, int64_t count, sc_dist_dtype dtype, sc_dist_op op);

/* recv[r * bytes .. (r + 1) * bytes) = rank r's `bytes` bytes at send, on
 * every rank; recv holds world_size * bytes bytes. */
SC_API sc_status sc_dist_allgather(const void *send, size_t bytes, void *recv);

/* The size in bytes of one element of dtype; 0 for a value that is none. */
SC_API size_t sc_dist_dtype_size(sc_dist_dtype dtype);

#ifdef __cplusplus
}
#endif
#endif
