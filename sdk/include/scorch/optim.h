/* scorch/optim.h — optimizers over a parameter store's flat buffers.
 *
 * One step updates every trainable parameter from its gradient in one pass
 * over the flat buffers (frozen parameters are skipped). State (momentum,
 * Adam moments) lives in flat buffers of the same layout, exposed as named
 * tensors for checkpoints.
 *
 * Semantics follow PyTorch: SGD with momentum (dampening 0) and optional
 * Nesterov; weight decay added to the gradient for SGD, Adam and RMSprop
 * (L2) and decoupled for AdamW and Lion; Adam with bias correction;
 * RMSprop as torch.optim.RMSprop (momentum, centered). LAMB follows the
 * paper (You et al., "Large Batch Optimization for Deep Learning") as
 * timm's Lamb and apex's FusedLAMB implement it: Adam's bias-corrected
 * moments, update u = m^ / (sqrt(v^) + eps) + wd * p, each parameter's
 * step scaled by the trust ratio ||p|| / ||u|| (1 when either is 0), for
 * the parameters with weight decay only (timm's always_adapt=False), and
 * no gradient clipping of its own (max_grad_norm=None). Lion follows the
 * paper (Chen et al., "Symbolic Discovery of Optimization Algorithms") as
 * lion-pytorch: p -= lr * sign(beta1 * m + (1 - beta1) * g) after the
 * decoupled decay, then m = beta2 * m + (1 - beta2) * g. On a GPU a guard
 * skips the updates after a non-finite loss or gradient (sc_optim_guard).
 */
#ifndef SCORCH_OPTIM_H
#define SCORCH_OPTIM_H

#include <stdbool.h>
#include <stdint.h>

#include "scorch/params.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sc_optim_kind {
    SC_OPTIM_SGD,
    SC_OPTIM_ADAM,
    SC_OPTIM_ADAMW,
    SC_OPTIM_RMSPROP,
    SC_OPTIM_LAMB,
    SC_OPTIM_LION,
} sc_optim_kind;

typedef struct sc_optim_config {
    sc_optim_kind kind;
    double momentum;     /* SGD, RMSprop */
    bool nesterov;       /* SGD; needs momentum > 0 */
    double weight_decay;
    double beta1, beta2; /* Adam, AdamW, LAMB, Lion */
    double eps;          /* Adam, AdamW, RMSprop, LAMB */
    double alpha;        /* RMSprop: smoothing of the squared gradient */
    bool centered;       /* RMSprop: divide by the gradient's estimated variance */
} sc_optim_config;

/* The reference implementation's defaults for kind: PyTorch's for SGD,
 * Adam, AdamW (momentum 0, betas 0.9/0.999, eps 1e-8; weight decay 0, or
 * 0.01 for AdamW) and RMSprop (alpha 0.99, eps 1e-8, momentum 0, not
 * centered); apex's FusedLAMB's for LAMB (betas 0.9/0.999, eps 1e-6,
 * weight decay 0.01); lion-pytorch's for Lion (betas 0.9/0.99, weight
 * decay 0). */
sc_optim_config sc_optim_defaults(sc_optim_kind kind);

/* "sgd", "adam", "adamw", "rmsprop", "lamb", "lion" <-> kind. */
sc_status sc_optim_kind_parse(const char *name, sc_optim_kind *out);
const char *sc_optim_kind_name(sc_optim_kind kind);

typedef struct sc_optim sc_optim;

/* NULL with a message on failure (bad config, out of memory). The store
 * must outlive the optimizer and gain no parameters after this. */
sc_optim *sc_optim_new(sc_params *params, const sc_optim_config *config);
void sc_optim_free(sc_optim *opt);

/* Options of one trainable parameter, as a PyTorch param group's: its learning rate is
 * lr * lr_scale and its weight decay `weight_decay` (instead of the config's). Before
 * the first step; SC_ERR_INVALID for a parameter not in the store or bad values. */
sc_status sc_optim_set_param(sc_optim *opt, const sc_tensor *param, double lr_scale,
                             double weight_decay);

/* One update with learning rate lr (scaled per parameter, see above). */
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
 * "exp_avg" and "exp_avg_sq" (Adam, AdamW, LAMB), "square_avg" then
 * "momentum" (with momentum) then "grad_avg" (centered) (RMSprop),
 * "exp_avg" (Lion). */
int sc_optim_state_count(const sc_optim *opt);
sc_tensor *sc_optim_state_at(sc_optim *opt, int i);

/* Gradient clipping over a store's trainable gradients, after backward
 * (and after the data-parallel average, so that every rank clips alike)
 * and before sc_optim_step, as torch.nn.utils: sc_grad_clip_norm scales
 * them all by min(1, max_norm / (norm + 1e-6)), norm their global L2 norm
 * (clip_grad_norm_); sc_grad_clip_value clamps each into [-value, value]
 * (clip_grad_value_). Both record the norm before clipping as one f32 on
 * the parameters' device (sc_grad_clip_last_norm), which a GPU computes
 * and uses there: nothing waits for it. The norm is summed in double in a
 * fixed order, the same whatever the thread count. NULL with a message
 * on failure; max_norm and value must be finite and > 0. */
typedef struct sc_grad_clip sc_grad_clip;
sc_grad_clip *sc_grad_clip_new(sc_params *params);
void sc_grad_clip_free(sc_grad_clip *clip);
sc_status sc_grad_clip_norm(sc_grad_clip *clip, double max_norm);
sc_status sc_grad_clip_value(sc_grad_clip *clip, double value);
const sc_tensor *sc_grad_clip_last_norm(const sc_grad_clip *clip);

#ifdef __cplusplus
}
#endif
#endif
