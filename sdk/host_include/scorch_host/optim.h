/* scorch_host/optim.h — the host's controls of an optimizer: per-parameter
 * options (param groups), the step count on resume, the guard against a
 * non-finite step, and gradient clipping.
 *
 * Host only: not installed, exported under SCORCH_HOST_1 (docs/abi.md,
 * "What libscorch exports").
 */
#ifndef SCORCH_SDK_HOST_OPTIM_H
#define SCORCH_SDK_HOST_OPTIM_H

#include <stdint.h>

#include "scorch/export.h"
#include "scorch/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Options of one trainable parameter, as a PyTorch param group's: its learning rate is
 * lr * lr_scale and its weight decay `weight_decay` (instead of the config's). Before
 * the first step; SC_ERR_INVALID for a parameter not in the store or bad values. */
SC_API sc_status sc_optim_set_param(sc_optim *opt, const sc_tensor *param, double lr_scale,
                                    double weight_decay);

/* Sets the steps taken (sc_optim_steps), on resume. */
SC_API void sc_optim_set_steps(sc_optim *opt, int64_t steps);

/* The guard against a non-finite step, on a GPU, where the host reads a
 * step's loss only steps after queueing it. Called after backward (and
 * after the gradients' allreduce), it queues one check of the loss (one
 * f32 on the parameters' device) and the trainable gradients; a NaN or an
 * infinity in either sets the flag, on the device, and from then on every
 * sc_optim_step leaves the parameters and the state as they are: they
 * stay those from before the first non-finite step. The flag is never
 * cleared: whoever reads it set stops training. On the CPU, which reads
 * the loss before backward, it does nothing. */
SC_API sc_status sc_optim_guard(sc_optim *opt, const sc_tensor *loss);

/* The guard's flag: one int32 on the parameters' device, nonzero once the
 * guard has found a non-finite value; NULL on the CPU. */
SC_API const sc_tensor *sc_optim_guard_flag(const sc_optim *opt);

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
SC_API sc_grad_clip *sc_grad_clip_new(sc_params *params);
SC_API void sc_grad_clip_free(sc_grad_clip *clip);
SC_API sc_status sc_grad_clip_norm(sc_grad_clip *clip, double max_norm);
SC_API sc_status sc_grad_clip_value(sc_grad_clip *clip, double value);
SC_API const sc_tensor *sc_grad_clip_last_norm(const sc_grad_clip *clip);

#ifdef __cplusplus
}
#endif
#endif
