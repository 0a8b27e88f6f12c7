/* scorch_host/dist.h — how the host serves scorch/dist.h: a table per
 * thread that says which rank the thread is and carries the rank's
 * collectives, and the mark of a data-loader thread, which may not make
 * them.
 *
 * A rank's thread installs its table when it joins the job (an MPI rank's
 * training thread, each replica's thread) and removes it when it leaves;
 * the threads that work for it (data loaders) install the same table, to
 * answer the rank queries, and mark themselves. A thread with no table is
 * rank 0 of 1.
 *
 * Host only: not installed, exported under SCORCH_HOST_1 (docs/abi.md,
 * "What libscorch exports"); refused while plugin code runs.
 */
#ifndef SCORCH_SDK_HOST_DIST_H
#define SCORCH_SDK_HOST_DIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "scorch/dist.h"
#include "scorch/export.h"
#include "scorch/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sc_dist_kind {
    SC_DIST_BARRIER,
    SC_DIST_BROADCAST,
    SC_DIST_ALLREDUCE,
    SC_DIST_ALLGATHER
} sc_dist_kind;

/* One collective call as the plugin made it. */
typedef struct sc_dist_call {
    sc_dist_kind kind;
    const char *name;   /* "sc_dist_broadcast", for messages */
    void *buf;          /* broadcast, allreduce: in place; allgather: recv */
    const void *send;   /* allgather */
    size_t bytes;       /* broadcast, allgather: per rank; allreduce: count x element */
    int root;           /* broadcast */
    int64_t count;      /* allreduce */
    sc_dist_dtype dtype;
    sc_dist_op op;
} sc_dist_call;

typedef struct sc_host_dist {
    int rank, world, local_rank;
    void *self;
    /* Makes the call on every rank, after the ranks have compared their
     * calls and statuses: `local` is this rank's (a bad argument found by
     * libscorch), and any rank's failure fails the call on every rank. */
    sc_status (*collective)(void *self, const sc_dist_call *call, sc_status local);
} sc_host_dist;

/* Makes dist (NULL: none) the calling thread's table; returns the
 * previous one. The table must outlive its use on the thread. */
SC_API const sc_host_dist *sc_host_set_dist(const sc_host_dist *dist);
/* The calling thread's table (NULL: none), for the threads it starts. */
SC_API const sc_host_dist *sc_host_dist_current(void);
/* Marks the calling thread as (not) filling batches for a data loader,
 * where collectives are refused; returns the previous mark. */
SC_API bool sc_host_set_loader_thread(bool loader);

#ifdef __cplusplus
}
#endif
#endif
