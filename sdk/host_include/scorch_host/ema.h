/* scorch_host/ema.h — an exponential moving average (EMA) of a parameter
 * store's weights, as timm's ModelEmaV3 keeps one: after each optimizer
 * step, ema = lerp(ema, param, 1 - decay), in one fused pass over the flat
 * buffers on the parameters' device.
 *
 * It averages the parameters (trainable and frozen), not the buffers
 * (batch norm's running statistics): the EMA weights are evaluated with
 * the live buffers, as timm's ModelEmaV3(exclude_buffers=True) does. The
 * host uses it for --ema-decay.
 *
 * Host only: not installed, exported under SCORCH_HOST_1 (docs/abi.md,
 * "What libscorch exports").
 *
 * Thread rule: not thread-safe; the training thread owns it.
 */
#ifndef SCORCH_SDK_HOST_EMA_H
#define SCORCH_SDK_HOST_EMA_H

#include <stdbool.h>
#include <stdint.h>

#include "scorch/export.h"
#include "scorch/params.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sc_ema sc_ema;

/* An EMA of params' parameters on their device (create it after
 * sc_params_to_device), starting as a copy of them. NULL with a message
 * on failure. params must outlive it. */
SC_API sc_ema *sc_ema_new(sc_params *params);
SC_API void sc_ema_free(sc_ema *ema);

/* The decay of the update after optimizer step `step` (1-based), as timm's
 * ModelEmaV3.get_decay with update_after_step 0, min_decay 0, gamma 1 and
 * power 2/3: 0 at step 1 (the EMA becomes a copy of the weights); then
 * `decay`, or with warm-up min(decay, 1 - (1 + s)^(-2/3)) where
 * s = step - 1. */
SC_API double sc_ema_decay_at(double decay, bool warmup, int64_t step);

/* ema = lerp(ema, param, 1 - decay) over every parameter, in float32 as
 * torch._foreach_lerp_ computes it (decay 0 copies the weights exactly).
 * decay must lie in [0, 1]. */
SC_API sc_status sc_ema_update(sc_ema *ema, double decay);

/* Exchanges the parameters' values with the EMA's (buffers stay): the
 * network then computes with the EMA weights; a second swap restores
 * both. */
SC_API sc_status sc_ema_swap(sc_ema *ema);

/* The EMA of parameter i of the store (same name, shape and device), for
 * checkpoints; NULL for a buffer or i out of range. Its data may be
 * written (sc_ckpt_read_tensor) to restore a saved EMA. */
SC_API sc_tensor *sc_ema_at(sc_ema *ema, int i);

#ifdef __cplusplus
}
#endif
#endif
