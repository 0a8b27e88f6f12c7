/* scorch/nn.h — building blocks a network composes: a layer is a struct of
 * parameter pointers plus an init function that creates them in an
 * sc_params store and a forward function made of ops. */
#ifndef SCORCH_NN_H
#define SCORCH_NN_H

#include <stdbool.h>

#include "scorch/context.h"
#include "scorch/params.h"
#include "scorch/rng.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sc_nn_linear {
    sc_tensor *weight; /* [OUT, IN] */
    sc_tensor *bias;   /* [OUT] or NULL */
} sc_nn_linear;

/* Creates "<prefix>.weight" and "<prefix>.bias" with PyTorch's default
 * initialisation (uniform +-1/sqrt(IN) for both). */
sc_status sc_nn_linear_init(sc_nn_linear *layer, sc_params *params, const char *prefix,
                            int64_t in, int64_t out, bool bias, sc_rng *rng);

/* x [N, IN] -> [N, OUT] */
sc_tensor *sc_nn_linear_forward(sc_ctx *ctx, const sc_nn_linear *layer, sc_tensor *x);

#ifdef __cplusplus
}
#endif
#endif
