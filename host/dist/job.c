/* job.c — joining the job (dist.h): the MPI job a launcher started, a
 * team of replicas' threads, or a world of one; what a rank is in it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/device.h"
#include "dist/dist_impl.h"
#include "dist/launch.h"
#include "scorch/rng.h"

/* This rank's place in the job, from its transport. */
static void adopt(host_dist *d, const host_comm_ops *ops, const host_comm_info *info)
{
    d->ops = ops;
    d->rank = info->rank;
    d->world = info->world;
    d->local_rank = info->local_rank;
    d->local_size = info->local_size;
    d->nodes = info->nodes;
    host_log_prefix_set(d->rank, d->world);
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

/* One launched process is a single process, unless the user asked for
 * the data-parallel machinery by name: then it runs with one rank (which
 * measures what communication costs). */
static sc_status join_launched(host_dist *d, const host_config *cfg)
{
    int expected = host_launch_world();
    bool named = strcmp(cfg->device, "distributed_dataparallel") == 0;
    if (expected == 0 || (expected == 1 && !named))
        return SC_OK;
    return join_mpi(d, cfg, expected, named);
}

sc_status host_dist_open(const host_config *cfg, const host_dist_seat *seat, host_dist **out)
{
    *out = NULL;
    host_dist *d = calloc(1, sizeof *d);
    if (!d)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for data parallelism");
    d->world = d->local_size = d->nodes = 1;
    d->accumulate = cfg->accumulate;
    d->bucket_mb = cfg->bucket_mb;
    d->timeout_s = cfg->collective_timeout;
    *out = d;
    SC_TRY(seat ? join_team(d, seat) : join_launched(d, cfg));
    host_dist_serve_plugins(d);
    return SC_OK;
}

void host_dist_close(host_dist *d)
{
    if (!d)
        return;
    host_dist_stop_serving(d);
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
    const char *omp = getenv("OMP_NUM_THREADS");
    int omp_threads = omp ? atoi(omp) : 0;
    if (omp_threads > 0)
        return omp_threads;
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

bool host_dist_describe(const host_dist *d, const host_config *cfg, char *line, size_t size)
{
    if (!d->ops && strcmp(cfg->device, "distributed_dataparallel") == 0) {
        snprintf(line, size, "--device distributed_dataparallel outside mpirun or srun: "
                 "training as one process");
        return true;
    }
    if (!d->ops)
        return false;
    double mib = (double)sc_params_trainable_numel(d->params) * sizeof(float) / (1 << 20);
    char where[64];
    if (d->replicas)
        snprintf(where, sizeof where, "%d replicas (threads of one process)", d->world);
    else
        snprintf(where, sizeof where, "%d ranks on %d node%s", d->world, d->nodes,
                 d->nodes == 1 ? "" : "s");
    snprintf(line, size, "data parallel over %s: %s, %d compute thread%s per rank; global "
             "batch %lld (%lld per rank x %d ranks x %d accumulated); %d gradient "
             "bucket%s of at most %g MiB, %.3g MiB of gradients per step",
             d->ops->name, where, sc_cpu_threads(), sc_cpu_threads() == 1 ? "" : "s",
             (long long)(cfg->batch_size * d->world * cfg->accumulate),
             (long long)cfg->batch_size, d->world, cfg->accumulate, d->n_buckets,
             d->n_buckets == 1 ? "" : "s", cfg->bucket_mb, mib);
    return true;
}
