/* job_serve.h — scorch-run's side of a job plugin (scorch/job.h): one
 * rank's job, and the functions libscorch calls for the plugin.
 *
 * A rank joins the job (dist.h), opens what the configuration gives (the
 * model and dataset plugins, or neither; the device), agrees with the
 * other ranks on the plugins and options, learns rank 0's list of
 * checkpoints, and calls the plugin's job_run; its failure is every
 * rank's (host_dist_check). What the plugin asks of the host runs as host
 * code (the plugin-call marker is lifted), so a crash there is reported as
 * scorch's, and the host-only calls it makes are allowed.
 *
 * Thread rule: a rank's own thread, which calls job_run.
 */
#ifndef SCORCH_HOST_JOB_SERVE_H
#define SCORCH_HOST_JOB_SERVE_H

#include "base/config.h"
#include "dist/dist.h"

/* Takes the model and dataset plugins, their args and --dataset-path from
 * the first checkpoint's config (host_config_inherit) when --model or
 * --dataset is not given and --checkpoint is; errors name the file. */
sc_status host_job_inherit(host_config *cfg);

/* Makes this program serve scorch/job.h (sc_host_set_job_ops); once, in
 * main, before any rank starts. */
void host_job_serve_install(void);

/* Runs cfg->job as a process (seat NULL) or as one replica of several:
 * the exit code (0, or 1 after printing the failure, once for the job). */
int host_job_serve(const host_config *cfg, const host_dist_seat *seat);

#endif
