/* replicas.c — ranks that are threads of this process (dist.h): how many
 * a run asks for, and their threads, each a rank of one team over the
 * threads transport (comm.h). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/crash.h"
#include "base/device.h"
#include "dist/comm.h"
#include "dist/dist.h"
#include "dist/launch.h"

sc_status host_dist_replicas(const host_config *cfg, const char *device, const char *source,
                             int *replicas)
{
    host_gpu_inventory gpus = {0};
    if (strcmp(device, "cpu") != 0) /* spares CPU runs loading the GPU backend */
        host_gpu_inventory_probe(&gpus);
    SC_TRY(host_device_replicas(device, source, cfg->replicas, &gpus, replicas));
    if (*replicas > 1 && host_launch_world() != 0)
        return sc_error_set(SC_ERR_INVALID,
                            "%d replicas (%s %s%s) in a process that mpirun or srun started: "
                            "a rank drives one device; start more ranks instead, with "
                            "--device distributed_dataparallel",
                            *replicas, source, device, cfg->replicas ? " and --replicas" : "");
    return SC_OK;
}

typedef struct replica {
    pthread_t thread;
    host_dist_seat seat;
    int (*body)(const host_dist_seat *seat, void *arg);
    void *arg;
    int exit_code;
} replica;

/* A failure outranks a stop on a signal, which outranks success. */
static int worse_exit(int a, int b)
{
    if (a == 0 || (a == HOST_EXIT_INTERRUPTED && b != 0))
        return b;
    return a;
}

/* A replica trains, calling plugins: it has an alternate signal stack of
 * its own, so that a stack overflow there is still reported (crash.h). */
static void *replica_main(void *arg)
{
    replica *r = arg;
    host_crash_thread_begin();
    r->exit_code = r->body(&r->seat, r->arg);
    host_crash_thread_end();
    return NULL;
}

int host_dist_run_replicas(int replicas, double timeout_s,
                           int (*body)(const host_dist_seat *seat, void *arg), void *arg)
{
    host_comm_team *team = NULL;
    replica *rs = calloc((size_t)replicas, sizeof *rs);
    if (!rs || host_comm_team_new(replicas, timeout_s, &team) != SC_OK) {
        fprintf(stderr, "scorch-train: out of memory for %d replicas\n", replicas);
        free(rs);
        return 1;
    }
    int started = 0, worst = 0;
    for (; started < replicas; started++) {
        replica *r = &rs[started];
        *r = (replica){.seat = {team, started}, .body = body, .arg = arg};
        if (pthread_create(&r->thread, NULL, replica_main, r) != 0)
            break;
    }
    if (started < replicas) {
        /* The started ones would wait for the rest until the deadline. */
        fprintf(stderr, "scorch-train: cannot start the thread of replica %d of %d\n", started,
                replicas);
        host_comm_threads.abort_job(NULL);
    }
    for (int i = 0; i < replicas; i++) {
        pthread_join(rs[i].thread, NULL);
        worst = worse_exit(worst, rs[i].exit_code);
    }
    host_comm_team_free(team);
    free(rs);
    return worst;
}
