/* job.c — scorch/job.h on the host's table (scorch_host/job.h). A call
 * with a NULL handle, or in a program that serves no jobs, fails here with
 * a message, so the host's functions see only valid handles. */
#include "scorch/job.h"

#include <stdatomic.h>

#include "host_only.h"
#include "scorch_host/job.h"

static _Atomic(const sc_host_job_ops *) installed;

void sc_host_set_job_ops(const sc_host_job_ops *ops)
{
    if (sc_host_only(__func__) == SC_OK)
        atomic_store(&installed, ops);
}

/* The table, or NULL with the message of `fn` called without one (or with
 * a NULL handle). */
static const sc_host_job_ops *ops_for(const void *handle, const char *fn)
{
    const sc_host_job_ops *ops = atomic_load(&installed);
    if (!ops)
        sc_error_set(SC_ERR_STATE, "%s: no scorch-run serves jobs in this program", fn);
    else if (!handle)
        sc_error_set(SC_ERR_INVALID, "%s: the handle is NULL", fn);
    return ops && handle ? ops : NULL;
}

#define OPS(handle) ops_for((handle), __func__)

sc_device sc_job_device(const sc_job *job)
{
    const sc_host_job_ops *ops = OPS(job);
    return ops ? ops->device(job) : (sc_device){SC_DEVICE_CPU, 0};
}

int sc_job_checkpoint_count(const sc_job *job)
{
    const sc_host_job_ops *ops = OPS(job);
    return ops ? ops->checkpoint_count(job) : 0;
}

const char *sc_job_checkpoint(const sc_job *job, int i)
{
    const sc_host_job_ops *ops = OPS(job);
    return ops ? ops->checkpoint(job, i) : NULL;
}

int64_t sc_job_batch_size(const sc_job *job)
{
    const sc_host_job_ops *ops = OPS(job);
    return ops ? ops->batch_size(job) : 0;
}

const sc_sample_spec *sc_job_sample_spec(const sc_job *job)
{
    const sc_host_job_ops *ops = OPS(job);
    return ops ? ops->sample_spec(job) : NULL;
}

int64_t sc_job_split_len(const sc_job *job, sc_split split)
{
    const sc_host_job_ops *ops = OPS(job);
    return ops ? ops->split_len(job, split) : -1;
}

const char *sc_job_class_name(const sc_job *job, int64_t label)
{
    const sc_host_job_ops *ops = OPS(job);
    return ops ? ops->class_name(job, label) : NULL;
}

sc_status sc_job_batches_open(sc_job *job, sc_split split, bool shard, sc_job_batches **out)
{
    const sc_host_job_ops *ops = OPS(job);
    if (out)
        *out = NULL;
    if (ops && !out)
        return sc_error_set(SC_ERR_INVALID, "sc_job_batches_open: out is NULL");
    return ops ? ops->batches_open(job, split, shard, out) : sc_error_code();
}

int64_t sc_job_batches_count(const sc_job_batches *it)
{
    const sc_host_job_ops *ops = OPS(it);
    return ops ? ops->batches_count(it) : 0;
}

int64_t sc_job_batches_total(const sc_job_batches *it)
{
    const sc_host_job_ops *ops = OPS(it);
    return ops ? ops->batches_total(it) : 0;
}

sc_status sc_job_batches_next(sc_job_batches *it, const sc_job_batch **batch)
{
    const sc_host_job_ops *ops = OPS(it);
    if (batch)
        *batch = NULL;
    if (ops && !batch)
        return sc_error_set(SC_ERR_INVALID, "sc_job_batches_next: batch is NULL");
    return ops ? ops->batches_next(it, batch) : sc_error_code();
}

void sc_job_batches_close(sc_job_batches *it)
{
    const sc_host_job_ops *ops = atomic_load(&installed);
    if (ops && it)
        ops->batches_close(it);
}

bool sc_job_has_model(const sc_job *job)
{
    const sc_host_job_ops *ops = OPS(job);
    return ops && ops->has_model(job);
}

sc_status sc_job_load(sc_job *job, const char *checkpoint, int *epoch, int64_t *step)
{
    const sc_host_job_ops *ops = OPS(job);
    if (ops && !checkpoint)
        return sc_error_set(SC_ERR_INVALID, "sc_job_load: checkpoint is NULL");
    return ops ? ops->load(job, checkpoint, epoch, step) : sc_error_code();
}

sc_status sc_job_forward(sc_job *job, const sc_job_batch *batch, sc_tensor_list *outputs)
{
    const sc_host_job_ops *ops = OPS(job);
    if (ops && (!batch || !outputs))
        return sc_error_set(SC_ERR_INVALID, "sc_job_forward: batch or outputs is NULL");
    return ops ? ops->forward(job, batch, outputs) : sc_error_code();
}

const char *sc_job_main_metric(const sc_job *job, sc_metric_mode *mode)
{
    const sc_host_job_ops *ops = OPS(job);
    return ops ? ops->main_metric(job, mode) : NULL;
}

sc_status sc_job_evaluate(sc_job *job, sc_split split, sc_metrics *metrics, double *loss)
{
    const sc_host_job_ops *ops = OPS(job);
    if (ops && !metrics)
        return sc_error_set(SC_ERR_INVALID, "sc_job_evaluate: metrics is NULL");
    return ops ? ops->evaluate(job, split, metrics, loss) : sc_error_code();
}
