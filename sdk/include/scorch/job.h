/* scorch/job.h — job plugins: non-training work on the devices and ranks
 * scorch allocates (docs/jobs.md).
 *
 *     scorch-run --job job.so [--job-args K=V,...] [--checkpoint C ...]
 *                [--model M --dataset D --dataset-path P] [--device ...]
 *     mpirun -np 4 scorch-run --job job.so ...
 *
 * A job plugin exports one constant struct:
 *
 *     SC_PLUGIN_EXPORT const sc_job_plugin scorch_job_plugin = {
 *         SC_ABI_HEADER(sc_job_plugin), "my_job", "what it does", my_job_run};
 *
 * scorch-run loads it with the model and dataset plugins when given (else
 * those of the first checkpoint), allocates the device, joins the ranks a
 * launcher started, and calls job_run once on every rank. The job asks the
 * host, through the functions below, for what it was given (device,
 * checkpoints, the dataset's splits as batches, the network with a
 * checkpoint's weights), and talks to the other ranks with scorch/dist.h:
 * rank 0 (sc_dist_is_main()) prints and writes the job's results.
 *
 * Thread rule: everything here, and job_run itself, is [training-thread]:
 * the rank's thread that called job_run, one call at a time. The handle
 * is valid during job_run only.
 */
#ifndef SCORCH_JOB_H
#define SCORCH_JOB_H

#include <stdbool.h>
#include <stdint.h>

#include "scorch/export.h"
#include "scorch/metrics.h"
#include "scorch/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The host's side of one rank's job. */
typedef struct sc_job sc_job;

typedef struct sc_job_plugin {
    sc_abi_header abi; /* SC_ABI_HEADER(sc_job_plugin); job plugins came with ABI 1.4 */
    const char *name;
    const char *description;
    /* [training-thread] Does the job's work on this rank; `args` are
     * --job-args. Called once on every rank; a collective (scorch/dist.h)
     * made here must be made by every rank. An error stops the job on
     * every rank, with its message. */
    sc_status (*job_run)(sc_job *job, const sc_args *args);
} sc_job_plugin;

/* ---- what the job was given ---- */

/* The device this rank computes on (--device; one GPU per rank). */
SC_API sc_device sc_job_device(const sc_job *job);

/* The checkpoints --checkpoint names, in order: a file as given; a run
 * directory or its checkpoints/ folder as its numbered checkpoints
 * (epoch-EEEE-step-SSSSSSSSS.ckpt), oldest first. Every rank sees the same
 * list. sc_job_checkpoint is NULL for i outside 0..count-1. */
SC_API int sc_job_checkpoint_count(const sc_job *job);
SC_API const char *sc_job_checkpoint(const sc_job *job, int i);

/* --batch-size: the batches sc_job_batches_open and sc_job_evaluate make. */
SC_API int64_t sc_job_batch_size(const sc_job *job);

/* ---- the dataset (--dataset, or the first checkpoint's) ---- */

/* The dataset's sample spec, or NULL when the job has no dataset. */
SC_API const sc_sample_spec *sc_job_sample_spec(const sc_job *job);
/* The split's number of samples; -1 when the job has no dataset. */
SC_API int64_t sc_job_split_len(const sc_job *job, sc_split split);
/* The dataset's name for class `label`, or NULL when it has none. */
SC_API const char *sc_job_class_name(const sc_job *job, int64_t label);

/* One batch of a split, as the host's loader fills it (the dataset's
 * getitem, concurrently on --workers threads, no augmentation stream
 * beyond --seed's): tensors on the host, [size, ...spec shape]. */
typedef struct sc_job_batch {
    int64_t index;          /* the batch's number in the split: it holds samples
                               index * batch_size .. + size - 1 */
    int64_t size;           /* samples in it: batch_size, less for the split's last */
    const int64_t *samples; /* their dataset indices [size] */
    sc_tensor_list inputs;
    sc_tensor_list targets;
} sc_job_batch;

typedef struct sc_job_batches sc_job_batches;

/* The split's batches in order. With `shard`, this rank takes batches
 * rank, rank + world, rank + 2 world, ... (the batches, and so any result
 * computed per batch, are the same whatever the number of ranks); without,
 * every rank takes every batch. Errors: no dataset, a bad split. */
SC_API sc_status sc_job_batches_open(sc_job *job, sc_split split, bool shard,
                                     sc_job_batches **out);
/* How many batches this rank takes, and how many the split has. */
SC_API int64_t sc_job_batches_count(const sc_job_batches *it);
SC_API int64_t sc_job_batches_total(const sc_job_batches *it);
/* The next batch, valid until the next call or the close; *batch = NULL
 * after the last. A failing getitem is an error naming the sample. */
SC_API sc_status sc_job_batches_next(sc_job_batches *it, const sc_job_batch **batch);
/* NULL is a no-op. */
SC_API void sc_job_batches_close(sc_job_batches *it);

/* ---- the network (--model, or the first checkpoint's) ---- */

/* Whether the job has a network (a model plugin, with the dataset whose
 * spec it is built for). */
SC_API bool sc_job_has_model(const sc_job *job);

/* Loads a checkpoint's weights into the network: its parameters and
 * buffers, or with --ema its EMA weights; never its optimizer. The
 * checkpoint must be of the same model (name, parameter names and shapes).
 * *epoch and *step (each may be NULL) receive the epoch its last step
 * belongs to and the optimizer steps it was trained for. Until a load the
 * network holds its initialisation (--seed). */
SC_API sc_status sc_job_load(sc_job *job, const char *checkpoint, int *epoch, int64_t *step);

/* The network in eval mode, without gradients, on one batch: outputs
 * receives host tensors [size, ...], valid until the next call of
 * sc_job_forward or sc_job_evaluate. */
SC_API sc_status sc_job_forward(sc_job *job, const sc_job_batch *batch, sc_tensor_list *outputs);

/* The model's main metric and whether higher or lower is better; NULL
 * without a network. */
SC_API const char *sc_job_main_metric(const sc_job *job, sc_metric_mode *mode);

/* scorch-test's pass over the whole split on this rank alone: the socket's
 * metrics added to `metrics` (sc_metrics_new; its sums, so several passes
 * add up), and the mean loss over the split's samples into *loss (may be
 * NULL). Errors name the batch's samples. */
SC_API sc_status sc_job_evaluate(sc_job *job, sc_split split, sc_metrics *metrics,
                                 double *loss);

#ifdef __cplusplus
}
#endif
#endif
