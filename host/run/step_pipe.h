/* step_pipe.h — a GPU train step that never waits for the GPU: the
 * batch's upload overlaps the step before, and the step's loss and
 * outputs are read back later, a few steps behind.
 *
 * Uploads. A batch goes from the loader's pinned slot into device buffers
 * of the pipe's own, two sets used in turn, on the GPU's copy stream. The
 * copy into a set waits only for the step that last read that set (two
 * steps back), so the upload of batch N+1 runs while step N computes; the
 * compute stream waits for the copy, and the loader refills the slot once
 * the copy is done (the batch's `uploaded` fence).
 *
 * Results. A step's loss and outputs, the optimizer guard's flag and the
 * clipped gradients' norm (with clipping) are
 * copied behind it, on the compute stream, into one of `depth` pinned
 * slots, with the batch's targets beside them, and read:
 *   - without waiting, once they have arrived (host_step_pipe_poll);
 *   - when every slot is taken, the oldest: the GPU then still has
 *     depth - 1 steps queued, so it never runs dry;
 *   - all of them at host_step_pipe_drain, for whoever needs the sums now
 *     (hooks that read each batch's loss, checkpoints, the phase's end).
 * Each step read is handed, in step order, to the fold function, which
 * checks its loss and the flag and adds the loss and the metrics to the
 * phase's sums: the same arithmetic, in the same order, as reading every
 * step at once, so the sums are bit-identical.
 *
 * On the CPU nothing is copied: a batch is its own device batch, and a
 * step is folded as it is added.
 *
 * Thread rule: the training thread's.
 */
#ifndef SCORCH_HOST_STEP_PIPE_H
#define SCORCH_HOST_STEP_PIPE_H

#include <stdbool.h>
#include <stdint.h>

#include "run/loader.h"
#include "scorch/device.h"

/* The dataset indices a message names of a batch that failed. */
enum { HOST_STEP_SAMPLES_NAMED = 8 };

/* Where a step stands: recorded when it is added, handed back when it is
 * folded. */
typedef struct host_step_info {
    int epoch;
    int64_t batch, size; /* index in the epoch, samples */
    int64_t step;        /* optimizer steps done, this one's included */
    double lr;
    bool closes_step;    /* the optimizer step's last micro-batch */
    /* The batch's first dataset indices, kept for a message about a
     * non-finite step read after the batch is gone; n_samples 0: unknown. */
    int64_t samples[HOST_STEP_SAMPLES_NAMED];
    int n_samples;
} host_step_info;

/* A step as the fold function sees it; everything on the host. */
typedef struct host_step_result {
    host_step_info info;
    double loss; /* the batch's mean loss, as the f32 the criterion gave */
    bool has_grad_norm; /* grad_norm holds the step's gradient norm */
    double grad_norm;   /* before clipping (sc_grad_clip_last_norm), as its f32 */
    bool skipped; /* on a GPU: the optimizer's guard had found a non-finite
                     loss or gradient by this step, whose update and every
                     later one were skipped (sc_optim_guard) */
    const sc_tensor_list *outputs;
    const sc_tensor_list *targets;
} host_step_result;

typedef sc_status (*host_step_fold_fn)(void *user, const host_step_result *step);

typedef struct host_step_pipe host_step_pipe;

/* A pipe for ctx's device, for batches of at most batch_size samples,
 * with `depth` result slots (>= 1) on a GPU. */
sc_status host_step_pipe_new(sc_ctx *ctx, int64_t batch_size, int depth, host_step_fold_fn fold,
                           void *user, host_step_pipe **out);
/* Waits for the copies in flight, then frees; NULL is a no-op. Steps not
 * folded are dropped. */
void host_step_pipe_free(host_step_pipe *p);

/* Batch b's tensors on ctx's device, valid until the next upload: on a
 * GPU queued copies into the next buffer set, on the CPU b's own. */
sc_status host_step_pipe_upload(host_step_pipe *p, const host_batch *b, sc_tensor_list *inputs,
                              sc_tensor_list *targets);
/* Called once the work that reads the uploaded batch has been queued:
 * the next upload into its buffer set waits for that work. */
sc_status host_step_pipe_consumed(host_step_pipe *p);

/* Queues the step's loss and outputs (step tensors) for folding, with the
 * batch's targets, the optimizer guard's flag as the step left it
 * (sc_optim_guard_flag; unused on the CPU) and the gradient norm it
 * clipped (one f32 on the device, sc_grad_clip_last_norm; NULL: none); on
 * the CPU folds the step now. May first fold the oldest step in flight,
 * waiting for it. */
sc_status host_step_pipe_add(host_step_pipe *p, const sc_tensor *loss, const sc_tensor *guard,
                           const sc_tensor *grad_norm, const sc_tensor_list *outputs,
                           const host_batch *b, const host_step_info *info);

/* Folds the steps that have arrived, oldest first, without waiting. */
sc_status host_step_pipe_poll(host_step_pipe *p);
/* Folds every step added, waiting for the GPU as needed. */
sc_status host_step_pipe_drain(host_step_pipe *p);

/* How the host kept pace with the GPU. A host that never waits for the
 * step it has just queued fills every slot whenever the GPU is the slower
 * side: then most adds wait, for a step `depth` back. */
typedef struct host_step_pipe_stats {
    int64_t steps;      /* added */
    int64_t full_waits; /* adds that waited for the oldest step in flight */
    int64_t drains;     /* drains that found steps in flight */
} host_step_pipe_stats;
host_step_pipe_stats host_step_pipe_stats_of(const host_step_pipe *p);

#endif
