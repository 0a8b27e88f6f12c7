/* scorch_host/params.h — the host's controls of a parameter store: where
 * it lives, its values, its gradients and which parameters train.
 *
 * Host only: not installed, exported under SCORCH_HOST_1, and refused
 * while plugin code runs (scorch_host/plugin.h): a network gets the store
 * to create its parameters in; moving, overwriting or freezing them is the
 * host's, which does it between the plugin's calls (freezing from
 * socket_param_trains). docs/abi.md, "What libscorch exports".
 */
#ifndef SCORCH_SDK_HOST_PARAMS_H
#define SCORCH_SDK_HOST_PARAMS_H

#include <stdbool.h>
#include <stdint.h>

#include "scorch/export.h"
#include "scorch/params.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sets every value from a host array of sc_params_numel() floats. */
SC_API sc_status sc_params_write(sc_params *ps, const float *values);

/* Moves the values to a GPU (gradients zeroed there), once, after the
 * network is created: parameters are created and initialised on the host.
 * The sc_tensor pointers stay valid; their data and device change. Create
 * optimizers after the move. */
SC_API sc_status sc_params_to_device(sc_params *ps, sc_device device);

/* Zeroes every gradient (before a step's first backward). */
SC_API void sc_params_zero_grad(sc_params *ps);

/* Multiplies the gradients [offset, offset + n) of the flat buffer by
 * factor (sums over micro-batches or ranks to means). */
SC_API sc_status sc_params_scale_grads(sc_params *ps, int64_t offset, int64_t n,
                                       float factor);

/* Freezes or unfreezes a parameter (clears/sets SC_TENSOR_REQUIRES_GRAD);
 * buffers stay frozen. */
SC_API void sc_params_set_trainable(sc_tensor *param, bool trainable);

#ifdef __cplusplus
}
#endif
#endif
