/* scorch_host/job.h — how the host serves scorch/job.h: one table of the
 * functions behind it, installed by the program that runs job plugins
 * (scorch-run). sc_job and sc_job_batches are the host's own objects;
 * libscorch passes them through. Without a table, every call fails with
 * "no scorch-run serves jobs here" (or answers none: a NULL, 0, -1).
 *
 * Host only: not installed, exported under SCORCH_HOST_1 (docs/abi.md,
 * "What libscorch exports"); refused while plugin code runs.
 */
#ifndef SCORCH_SDK_HOST_JOB_H
#define SCORCH_SDK_HOST_JOB_H

#include "scorch/export.h"
#include "scorch/job.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One function per function of scorch/job.h, with its arguments; the
 * handles are never NULL here (libscorch refuses a NULL one). */
typedef struct sc_host_job_ops {
    sc_device (*device)(const sc_job *job);
    int (*checkpoint_count)(const sc_job *job);
    const char *(*checkpoint)(const sc_job *job, int i);
    int64_t (*batch_size)(const sc_job *job);
    const sc_sample_spec *(*sample_spec)(const sc_job *job);
    int64_t (*split_len)(const sc_job *job, sc_split split);
    const char *(*class_name)(const sc_job *job, int64_t label);
    sc_status (*batches_open)(sc_job *job, sc_split split, bool shard, sc_job_batches **out);
    int64_t (*batches_count)(const sc_job_batches *it);
    int64_t (*batches_total)(const sc_job_batches *it);
    sc_status (*batches_next)(sc_job_batches *it, const sc_job_batch **batch);
    void (*batches_close)(sc_job_batches *it);
    bool (*has_model)(const sc_job *job);
    sc_status (*load)(sc_job *job, const char *checkpoint, int *epoch, int64_t *step);
    sc_status (*forward)(sc_job *job, const sc_job_batch *batch, sc_tensor_list *outputs);
    const char *(*main_metric)(const sc_job *job, sc_metric_mode *mode);
    sc_status (*evaluate)(sc_job *job, sc_split split, sc_metrics *metrics, double *loss);
} sc_host_job_ops;

/* Makes ops (NULL: none) the table scorch/job.h calls, for every thread.
 * Install it before the first job_run; the table must outlive its use. */
SC_API void sc_host_set_job_ops(const sc_host_job_ops *ops);

#ifdef __cplusplus
}
#endif
#endif
