/* scorch-run: runs a job plugin (scorch/job.h) on every rank — non-training
 * work on the devices and ranks scorch allocates (run/job_serve.h). */
#include <stdio.h>

#include "base/config.h"
#include "base/crash.h"
#include "dist/dist.h"
#include "dist/launch.h"
#include "run/dist_start.h"
#include "run/job_serve.h"

enum { EXIT_USAGE = 2 };

static int run_replica(const host_dist_seat *seat, void *cfg) { return host_job_serve(cfg, seat); }

int main(int argc, char **argv)
{
    host_config cfg;
    bool exit_now = false;
    host_config_defaults(&cfg);
    if (host_config_parse(&cfg, HOST_PROGRAM_RUN, argc, argv, &exit_now) != SC_OK) {
        host_dist_print_error("scorch-run");
        return EXIT_USAGE;
    }
    if (exit_now)
        return 0;
    char program[64]; /* a rank's crash report says which rank it is */
    snprintf(program, sizeof program, "%sscorch-run", host_log_prefix());
    host_crash_install(program);
    int replicas;
    if (host_job_inherit(&cfg) != SC_OK || host_dist_start_replicas(&cfg, &replicas) != SC_OK) {
        host_dist_print_error("scorch-run");
        return 1;
    }
    host_job_serve_install();
    if (replicas == 1)
        return host_job_serve(&cfg, NULL);
    return host_dist_run_replicas(replicas, cfg.collective_timeout, run_replica, &cfg);
}
