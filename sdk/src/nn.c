#include "scorch/nn.h"

#include <math.h>
#include <stdio.h>

#include "scorch/init.h"
#include "scorch/ops.h"

sc_status sc_nn_linear_init(sc_nn_linear *layer, sc_params *params, const char *prefix,
                            int64_t in, int64_t out, bool bias, sc_rng *rng)
{
    char name[256];
    snprintf(name, sizeof name, "%s.weight", prefix);
    layer->weight = sc_params_add(params, name, 2, (int64_t[]){out, in});
    if (!layer->weight)
        return SC_ERR_INVALID;
    float bound = 1.0f / sqrtf((float)in);
    sc_init_uniform(layer->weight, -bound, bound, rng);
    layer->bias = NULL;
    if (!bias)
        return SC_OK;
    snprintf(name, sizeof name, "%s.bias", prefix);
    layer->bias = sc_params_add(params, name, 1, (int64_t[]){out});
    if (!layer->bias)
        return SC_ERR_INVALID;
    sc_init_uniform(layer->bias, -bound, bound, rng);
    return SC_OK;
}

sc_tensor *sc_nn_linear_forward(sc_ctx *ctx, const sc_nn_linear *layer, sc_tensor *x)
{
    return sc_linear(ctx, x, layer->weight, layer->bias);
}
