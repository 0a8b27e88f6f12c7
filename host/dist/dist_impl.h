/* dist_impl.h — the state of a rank (struct host_dist) and what the files
 * of the data-parallel layer share, private to them:
 *
 *   job.c      joining the job: MPI ranks, replicas' threads, a world of one
 *   agree.c    the checks every collective begins with, failures every rank
 *              learns of, agreement on stop requests, the parameter digest
 *   buckets.c  a train step's gradients, averaged bucket by bucket while
 *              backward runs
 *   share.c    rank 0's bytes, parameters, optimizer state and buffers to
 *              every rank
 *   sums.c     the phases' loss and metric sums over ranks
 *   plugins.c  the collectives plugins make (scorch/dist.h) on the rank's
 *              transport
 *
 * A single process never reaches a transport: d->ops is NULL.
 */
#ifndef SCORCH_HOST_DIST_IMPL_H
#define SCORCH_HOST_DIST_IMPL_H

#include "dist/comm.h"
#include "dist/dist.h"
#include "scorch_host/dist.h"

enum { HOST_DIST_MESSAGE_MAX = 1024 };

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
    double bucket_mb;
    double timeout_s;       /* --collective-timeout */
    const host_comm_ops *ops; /* NULL: a single process */
    host_comm *comm;
    /* A failure every rank knows of; later checks return it again. */
    bool failed;
    sc_status failed_status;
    char failed_message[HOST_DIST_MESSAGE_MAX + 32];
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
    /* What plugins see of this rank (plugins.c), and what the thread had
     * before it. */
    sc_host_dist plugin_view;
    const sc_host_dist *plugin_view_was;
    bool serving;
    /* A plugin's collective in progress: its digest and what timeouts call
     * it; 0 and NULL in the host's own checks. */
    int call_digest;
    const char *call_what;
};

/* The ints every check carries, reduced by MAX. */
enum {
    HOST_V_FAILED,      /* world - rank of a failed rank, 0 if none: MAX finds the lowest */
    HOST_V_STOP,        /* a stop request (hook) */
    HOST_V_INTERRUPTED, /* a stop signal */
    HOST_V_DIGEST,      /* parameter digest (host_dist_agree) */
    HOST_V_DIGEST_LOW,  /* INT_MAX - digest: MAX gives INT_MAX - the lowest digest */
    HOST_V_SIZE,        /* a size every rank needs the maximum of */
    HOST_V_CALL,        /* digest of a plugin's collective call, 0 in the host's checks */
    HOST_V_CALL_LOW,    /* INT_MAX - that digest: the ranks' calls match when they agree */
    HOST_V_BITS,        /* HOST_V_BITS + i: bit i of host_dist_agree_bits */
    HOST_V_COUNT = HOST_V_BITS + 16
};

/* agree.c: the check every collective begins with; v[HOST_V_FAILED] is
 * filled here, the other entries by the caller, and all come back reduced.
 * A rank that failed mid-step first completes the step's gradient
 * exchange, which the others are waiting in. */
sc_status host_dist_exchange(host_dist *d, sc_status local, int v[HOST_V_COUNT]);
/* A check that ORs the ranks' stop requests into *stop and *interrupted. */
sc_status host_dist_agree_flags(host_dist *d, bool *stop, bool *interrupted,
                                int v[HOST_V_COUNT]);

/* buckets.c: lays the gradient buckets out over d->params and makes room
 * for them in the transport. */
sc_status host_dist_layout_buckets(host_dist *d);
/* Starts what is left of the step's gradient exchange and waits for every
 * bucket; nothing when no exchange is open. */
void host_dist_finish_round(host_dist *d);

/* plugins.c: makes this rank's collectives what plugins on the calling
 * thread call (scorch_host/dist.h), until host_dist_stop_serving. */
void host_dist_serve_plugins(host_dist *d);
void host_dist_stop_serving(host_dist *d);

/* share.c: the values on the host: the store's own on the CPU, else a
 * fresh copy in d->staging (NULL, with a message, when it cannot be
 * made). */
float *host_dist_pull_values(host_dist *d);
/* Writes d->staging back to a GPU's values (nothing to do on the CPU). */
sc_status host_dist_push_values(host_dist *d);

#endif
