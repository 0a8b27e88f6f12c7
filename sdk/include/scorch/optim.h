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
 * decoupled decay, then m = beta2 * m + (1 - beta2) * g.
 *
 * The host's controls (per-parameter options, the step count on resume,
 * the guard against a non-finite step on a GPU, gradient clipping) are in
 * scorch_host/optim.h, not for plugins.
 */
#ifndef SCORCH_OPTIM_H
#define SCORCH_OPTIM_H

#include <stdbool.h>
#include <stdint.h>

#include "scorch/export.h"
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
SC_API sc_optim_config sc_optim_defaults(sc_optim_kind kind);

/* "sgd", "adam", "adamw", "rmsprop", "lamb", "lion" <-> kind. */
SC_API sc_status sc_optim_kind_parse(const char *name, sc_optim_kind *out);
SC_API const char *sc_optim_kind_name(sc_optim_kind kind);

typedef struct sc_optim sc_optim;

/* NULL with a message on failure (bad config, out of memory). The store
 * must outlive the optimizer and gain no parameters after this. */
SC_API sc_optim *sc_optim_new(sc_params *params, const sc_optim_config *config);
SC_API void sc_optim_free(sc_optim *opt);

/* One update with learning rate lr (scaled per parameter by the host's
 * param groups, scorch_host/optim.h). */
SC_API sc_status sc_optim_step(sc_optim *opt, double lr);

/* Steps taken (Adam's bias correction uses it); the host sets it on
 * resume. */
SC_API int64_t sc_optim_steps(const sc_optim *opt);

/* State buffers for checkpoints: 1-D f32 tensors of sc_params_numel()
 * elements: "momentum" (SGD with momentum; plain SGD has none),
 * "exp_avg" and "exp_avg_sq" (Adam, AdamW, LAMB), "square_avg" then
 * "momentum" (with momentum) then "grad_avg" (centered) (RMSprop),
 * "exp_avg" (Lion). */
SC_API int sc_optim_state_count(const sc_optim *opt);
SC_API sc_tensor *sc_optim_state_at(sc_optim *opt, int i);

#ifdef __cplusplus
}
#endif
#endif
