/* scorch/nn.h — building blocks a network composes: a layer is a struct of
 * parameter pointers plus an init function that creates them in an
 * sc_params store and a forward function made of ops.
 *
 * Names. Every init takes a prefix and names its parameters
 * "<prefix>.weight" and so on; a block passes "<prefix>.<part>" to the
 * layers it is made of, so names are unique and say where a parameter
 * sits ("stage2.0.conv1.bn.running_var"). The layer keeps its prefix.
 *
 * Scopes. Every forward runs its ops inside a context scope
 * (sc_ctx_push_scope) named after the layer, so the model summary
 * (scorch/summary.h) shows one row per layer. A layer used inside a block
 * pushes only the part of its name below the block's scope, so the scope
 * always equals the prefix. A layer whose scope the caller has opened
 * already joins it: push "conv1", run layer "conv1" and a max pool, pop,
 * and the pool shares the layer's row.
 *
 * Errors: init returns a status with a message; forward returns NULL with
 * a message (and NULL for a NULL input), like the ops.
 */
#ifndef SCORCH_NN_H
#define SCORCH_NN_H

#include <stdbool.h>

#include "scorch/context.h"
#include "scorch/export.h"
#include "scorch/ops.h"
#include "scorch/params.h"
#include "scorch/rng.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Longest layer prefix, terminator included. */
enum { SC_NN_NAME_MAX = 96 };

/* ---- linear ---- */

typedef struct sc_nn_linear {
    char name[SC_NN_NAME_MAX];
    sc_tensor *weight; /* [OUT, IN] */
    sc_tensor *bias;   /* [OUT] or NULL */
} sc_nn_linear;

/* Creates "<prefix>.weight" and "<prefix>.bias" with PyTorch's default
 * initialisation (uniform +-1/sqrt(IN) for both). */
SC_API sc_status sc_nn_linear_init(sc_nn_linear *layer, sc_params *params, const char *prefix,
                                   int64_t in, int64_t out, bool bias, sc_rng *rng);

/* x [N, IN] -> [N, OUT] */
SC_API sc_tensor *sc_nn_linear_forward(sc_ctx *ctx, const sc_nn_linear *layer, sc_tensor *x);

/* ---- 2-D convolution ---- */

/* What a convolution computes; zeros mean the usual: stride 1, padding 0,
 * dilation 1, groups 1. The kernel is kernel x kernel. */
typedef struct sc_nn_conv2d_config {
    int64_t in, out; /* channels */
    int kernel;
    int stride, padding, dilation, groups;
    bool bias;
} sc_nn_conv2d_config;

typedef struct sc_nn_conv2d {
    char name[SC_NN_NAME_MAX];
    sc_tensor *weight; /* [OUT, IN / groups, K, K] */
    sc_tensor *bias;   /* [OUT] or NULL */
    sc_conv2d_opts opts;
} sc_nn_conv2d;

/* Creates "<prefix>.weight" (and "<prefix>.bias" when config->bias) with
 * PyTorch's default initialisation: uniform +-1/sqrt(fan_in) for both,
 * fan_in = IN / groups * K * K (kaiming_uniform with a = sqrt(5)). */
SC_API sc_status sc_nn_conv2d_init(sc_nn_conv2d *layer, sc_params *params, const char *prefix,
                                   const sc_nn_conv2d_config *config, sc_rng *rng);

/* x [N, IN, H, W] -> [N, OUT, H_out, W_out] (see sc_conv2d). */
SC_API sc_tensor *sc_nn_conv2d_forward(sc_ctx *ctx, const sc_nn_conv2d *layer, sc_tensor *x);

/* ---- normalisation ---- */

typedef struct sc_nn_batch_norm {
    char name[SC_NN_NAME_MAX];
    sc_tensor *weight, *bias;              /* [C], trained */
    sc_tensor *running_mean, *running_var; /* [C], buffers */
    float momentum, eps;
} sc_nn_batch_norm;

/* Creates "<prefix>.weight" (ones), "<prefix>.bias" (zeros) and the
 * buffers "<prefix>.running_mean" (zeros) and "<prefix>.running_var"
 * (ones); momentum 0.1, eps 1e-5, as PyTorch. */
SC_API sc_status sc_nn_batch_norm_init(sc_nn_batch_norm *layer, sc_params *params,
                                       const char *prefix, int64_t channels);

/* x [N, C] or [N, C, H, W] -> same shape; batch statistics in training
 * mode (updating the running ones), running statistics in eval mode. */
SC_API sc_tensor *sc_nn_batch_norm_forward(sc_ctx *ctx, const sc_nn_batch_norm *layer,
                                           sc_tensor *x);

typedef struct sc_nn_layer_norm {
    char name[SC_NN_NAME_MAX];
    sc_tensor *weight, *bias; /* [D] */
    float eps;
} sc_nn_layer_norm;

/* Creates "<prefix>.weight" (ones) and "<prefix>.bias" (zeros); eps 1e-5. */
SC_API sc_status sc_nn_layer_norm_init(sc_nn_layer_norm *layer, sc_params *params,
                                       const char *prefix, int64_t features);

/* x [..., D] -> same shape, normalised over D. */
SC_API sc_tensor *sc_nn_layer_norm_forward(sc_ctx *ctx, const sc_nn_layer_norm *layer,
                                           sc_tensor *x);

/* ---- blocks ---- */

/* Convolution, batch norm and (optionally) relu: one layer of a CNN. The
 * convolution has no bias (batch norm's would cancel it): "<prefix>.conv.weight",
 * "<prefix>.bn.{weight,bias,running_mean,running_var}". One summary row.
 * The relu runs fused into the batch norm, with the same results as
 * sc_relu after sc_batch_norm and fewer passes over memory. */
typedef struct sc_nn_conv_bn {
    char name[SC_NN_NAME_MAX];
    sc_nn_conv2d conv;
    sc_nn_batch_norm bn;
    bool relu;
} sc_nn_conv_bn;

/* config->bias is ignored (always none). */
SC_API sc_status sc_nn_conv_bn_init(sc_nn_conv_bn *block, sc_params *params, const char *prefix,
                                    const sc_nn_conv2d_config *config, bool relu, sc_rng *rng);

/* x [N, IN, H, W] -> [N, OUT, H_out, W_out] */
SC_API sc_tensor *sc_nn_conv_bn_forward(sc_ctx *ctx, const sc_nn_conv_bn *block, sc_tensor *x);

/* sc_max_pool2d(sc_nn_conv_bn_forward(ctx, block, x), pool), the usual
 * conv-bn-relu-pool stage, with the pooling fused into batch norm: the
 * same values and gradients, bit for bit, without the full-size
 * activations after batch norm and their gradient ever in memory.
 * x [N, IN, H, W] -> [N, OUT, H_pooled, W_pooled] */
SC_API sc_tensor *sc_nn_conv_bn_max_pool_forward(sc_ctx *ctx, const sc_nn_conv_bn *block,
                                                 sc_tensor *x, const sc_pool2d_opts *pool);

/* Squeeze and excitation (Hu et al.): channel weights from the global
 * average, y = x * sigmoid(W2 relu(W1 mean_hw(x))). "<prefix>.reduce"
 * [C / r, C] and "<prefix>.expand" [C, C / r] are linear layers with bias
 * (C / r at least 1). */
typedef struct sc_nn_se {
    char name[SC_NN_NAME_MAX];
    sc_nn_linear reduce, expand;
} sc_nn_se;

SC_API sc_status sc_nn_se_init(sc_nn_se *block, sc_params *params, const char *prefix,
                               int64_t channels, int64_t reduction, sc_rng *rng);

/* x [N, C, H, W] -> [N, C, H, W] */
SC_API sc_tensor *sc_nn_se_forward(sc_ctx *ctx, const sc_nn_se *block, sc_tensor *x);

/* A basic residual block (He et al.): y = relu(F(x) + S(x)), where
 * F = conv3x3(stride)-bn-relu, conv3x3-bn, then SE when asked, and S is x
 * itself, or a 1x1 conv(stride)-bn projection when the stride or the
 * channel count changes. Parts: "<prefix>.conv1", "<prefix>.conv2",
 * "<prefix>.se", "<prefix>.shortcut". */
typedef struct sc_nn_residual {
    char name[SC_NN_NAME_MAX];
    sc_nn_conv_bn conv1, conv2;
    sc_nn_se se;
    sc_nn_conv_bn shortcut;
    bool has_se, has_shortcut;
} sc_nn_residual;

/* se_reduction: 0 for no SE block, else its reduction ratio r. */
SC_API sc_status sc_nn_residual_init(sc_nn_residual *block, sc_params *params, const char *prefix,
                                     int64_t in, int64_t out, int stride, int64_t se_reduction,
                                     sc_rng *rng);

/* x [N, IN, H, W] -> [N, OUT, H / stride, W / stride] (rounded up) */
SC_API sc_tensor *sc_nn_residual_forward(sc_ctx *ctx, const sc_nn_residual *block, sc_tensor *x);

#ifdef __cplusplus
}
#endif
#endif
