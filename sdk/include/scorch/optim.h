/* scorch/optim.h — optimizers over a parameter store's flat buffers.
 *
 * One step updates every trainable parameter from its gradient in one pass
 * over the flat buffers (frozen parameters are skipped). State (momentum,
 * Adam moments) lives in flat buffers of the same layout, exposed as named
 * tensors for checkpoints.
 *
 * Semantics follow PyTorch: SGD with momentum (dampening 0) and optional
 * Nesterov; weight decay added to the gradient for SGD and Adam (L2) and
 * decoupled for AdamW; Adam with bias correction. On a GPU a guard skips
 * the updates after a non-finite loss or gradient (sc_optim_guard).
 */
#ifndef SCORCH_OPTIM_H
#define SCORCH_OPTIM_H

#include <stdbool.h>
#include <stdint.h>

#include "scorch/params.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sc_optim_kind { SC_OPTIM_SGD, SC_OPTIM_ADAM, SC_OPTIM_ADAMW } sc_optim_kind;

typedef struct sc_optim_config {
    sc_optim_kind kind;
    double momentum;     /* SGD */
    bool nesterov;       /* SGD; needs momentum > 0 */
    double weight_decay;
    double beta1, beta2, eps; /* Adam, AdamW */
} sc_optim_config;

/* PyTorch's defaults for kind (momentum 0, betas 0.9/0.999, eps 1e-8;
 * weight decay 0, or 0.01 for AdamW). */
sc_optim_config sc_optim_defaults(sc_optim_kind kind);

/* "sgd", "adam", "adamw" <-> kind. */
sc_status sc_optim_kind_parse(const char *name, sc_optim_kind *out);
const char *sc_optim_kind_name(sc_optim_kind kind);

typedef struct sc_optim sc_optim;

/* NULL with a message on failure (bad config, out of memory). The store
 * must outlive the optimizer and gain no parameters after this. */
sc_optim *sc_optim_new(sc_params *params, const sc_optim_config *config);
void sc_optim_free(sc_optim *opt);

/* One update with learning rate lr. */
sc_status sc_optim_step(sc_optim *opt, double lr);

/* The guard against a non-finite step, on a GPU, where the host reads a
 * step's loss only steps after queueing it. Called after backward (and
 * after the gradients' allreduce), it queues one check of the loss (one
 * f32 on the parameters' device) and the trainable gradients; a NaN or an
 * infinity in either sets the flag, on the device, and from then on every
 * sc_optim_step leaves the parameters and the state as they are: they
 * stay those from before the first non-finite step. The flag is never
 * cleared: whoever reads it set stops training. On the CPU, which reads
 * the loss before backward, it does nothing. */
sc_status sc_optim_guard(sc_optim *opt, const sc_tensor *loss);

/* The guard's flag: one int32 on the parameters' device, nonzero once the
 * guard has found a non-finite value; NULL on the CPU. */
const sc_tensor *sc_optim_guard_flag(const sc_optim *opt);

/* Steps taken (Adam's bias correction uses it); settable for resume. */
int64_t sc_optim_steps(const sc_optim *opt);
void sc_optim_set_steps(sc_optim *opt, int64_t steps);

/* State buffers for checkpoints: 1-D f32 tensors of sc_params_numel()
 * elements: "momentum" (SGD with momentum; plain SGD has none),
 * "exp_avg" and "exp_avg_sq" (Adam, AdamW). */
int sc_optim_state_count(const sc_optim *opt);
sc_tensor *sc_optim_state_at(sc_optim *opt, int i);

#ifdef __cplusplus
}
#endif
#endif
