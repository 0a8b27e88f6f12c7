#include "scorch/nn.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "op.h"
#include "scorch/init.h"

/* ---- names, parameters and scopes ---- */

/* Keeps a layer's prefix; one too long to keep whole is refused rather
 * than cut, which could make two layers' names collide. */
static sc_status set_name(char *name, const char *prefix)
{
    if (!prefix || !*prefix)
        return sc_error_set(SC_ERR_INVALID, "nn: a layer needs a name prefix");
    size_t len = strlen(prefix);
    if (len >= SC_NN_NAME_MAX)
        return sc_error_set(SC_ERR_INVALID, "nn: layer name '%s' is longer than %d characters",
                            prefix, SC_NN_NAME_MAX - 1);
    memcpy(name, prefix, len + 1);
    return SC_OK;
}

/* "<prefix>.<part>" into buf (SC_NN_NAME_MAX bytes), for a block's parts. */
static sc_status part_name(char *buf, const char *prefix, const char *part)
{
    char name[2 * SC_NN_NAME_MAX];
    snprintf(name, sizeof name, "%s.%s", prefix, part);
    return set_name(buf, name);
}

/* Adds "<prefix>.<part>" to the store, as a trained parameter or a buffer;
 * NULL on failure, with the store's message after the layer's name (the
 * sizes come from plugin code: a shape too large names the layer). */
static sc_tensor *add_tensor(sc_params *params, const char *prefix, const char *part,
                             bool buffer, int ndim, const int64_t *shape)
{
    char name[2 * SC_NN_NAME_MAX];
    snprintf(name, sizeof name, "%s.%s", prefix, part);
    sc_tensor *t = buffer ? sc_params_add_buffer(params, name, ndim, shape)
                          : sc_params_add(params, name, ndim, shape);
    if (!t)
        sc_error_wrap(sc_error_code(), "nn: layer '%s'", prefix);
    return t;
}

/* PyTorch's default for linear and convolution layers: kaiming_uniform
 * with a = sqrt(5) on the weight, which is uniform +-1/sqrt(fan_in), and
 * the same bound for the bias. Weight first, then bias. */
static void init_default(sc_tensor *weight, sc_tensor *bias, int64_t fan_in, sc_rng *rng)
{
    float bound = 1.0f / sqrtf((float)fan_in);
    sc_init_uniform(weight, -bound, bound, rng);
    if (bias)
        sc_init_uniform(bias, -bound, bound, rng);
}

/* Opens a layer's scope: the part of its name below the current scope,
 * so that inside block "stage1.0" layer "stage1.0.conv1" pushes "conv1"
 * and the scope reads "stage1.0.conv1" either way. When the caller has
 * opened the layer's scope already (to put a pooling or an activation in
 * the layer's row), the layer joins it. Returns whether it pushed. */
static bool enter_scope(sc_ctx *ctx, const char *name)
{
    const char *scope = sc_ctx_scope(ctx);
    size_t len = strlen(scope);
    if (strcmp(scope, name) == 0)
        return false;
    if (len > 0 && strncmp(name, scope, len) == 0 && name[len] == '.')
        name += len + 1;
    sc_ctx_push_scope(ctx, name);
    return true;
}

static void leave_scope(sc_ctx *ctx, bool pushed)
{
    if (pushed)
        sc_ctx_pop_scope(ctx);
}

/* ---- linear ---- */

sc_status sc_nn_linear_init(sc_nn_linear *layer, sc_params *params, const char *prefix,
                            int64_t in, int64_t out, bool bias, sc_rng *rng)
{
    SC_TRY(set_name(layer->name, prefix));
    if (in < 1 || out < 1)
        return sc_error_set(SC_ERR_INVALID, "nn: linear '%s' needs positive sizes, got "
                            "%lld -> %lld", prefix, (long long)in, (long long)out);
    layer->bias = NULL;
    layer->weight = add_tensor(params, prefix, "weight", false, 2, (int64_t[]){out, in});
    if (!layer->weight)
        return sc_error_code();
    if (bias && !(layer->bias = add_tensor(params, prefix, "bias", false, 1, (int64_t[]){out})))
        return sc_error_code();
    init_default(layer->weight, layer->bias, in, rng);
    return SC_OK;
}

sc_tensor *sc_nn_linear_forward(sc_ctx *ctx, const sc_nn_linear *layer, sc_tensor *x)
{
    bool pushed = enter_scope(ctx, layer->name);
    sc_tensor *y = sc_linear(ctx, x, layer->weight, layer->bias); /* [N, OUT] */
    leave_scope(ctx, pushed);
    return y;
}

/* ---- 2-D convolution ---- */

/* The config's zeros made explicit, checked. */
static sc_status conv_opts(const char *prefix, const sc_nn_conv2d_config *c,
                           sc_conv2d_opts *opts)
{
    int stride = c->stride ? c->stride : 1, dilation = c->dilation ? c->dilation : 1;
    int groups = c->groups ? c->groups : 1;
    if (c->in < 1 || c->out < 1 || c->kernel < 1 || stride < 1 || dilation < 1 ||
        c->padding < 0 || groups < 1)
        return sc_error_set(SC_ERR_INVALID, "nn: conv2d '%s': channels %lld -> %lld, kernel "
                            "%d, stride %d, padding %d, dilation %d, groups %d: each must be "
                            "positive (padding >= 0)", prefix, (long long)c->in,
                            (long long)c->out, c->kernel, stride, c->padding, dilation, groups);
    if (c->in % groups || c->out % groups)
        return sc_error_set(SC_ERR_INVALID, "nn: conv2d '%s': %d groups do not divide %lld "
                            "input and %lld output channels", prefix, groups,
                            (long long)c->in, (long long)c->out);
    *opts = (sc_conv2d_opts){
        .stride = {stride, stride},
        .padding = {c->padding, c->padding},
        .dilation = {dilation, dilation},
        .groups = groups,
    };
    return SC_OK;
}

sc_status sc_nn_conv2d_init(sc_nn_conv2d *layer, sc_params *params, const char *prefix,
                            const sc_nn_conv2d_config *config, sc_rng *rng)
{
    SC_TRY(set_name(layer->name, prefix));
    SC_TRY(conv_opts(prefix, config, &layer->opts));
    int64_t k = config->kernel, in_per_group = config->in / layer->opts.groups;
    layer->bias = NULL;
    layer->weight = add_tensor(params, prefix, "weight", false, 4,
                               (int64_t[]){config->out, in_per_group, k, k});
    if (!layer->weight)
        return sc_error_code();
    if (config->bias &&
        !(layer->bias = add_tensor(params, prefix, "bias", false, 1, (int64_t[]){config->out})))
        return sc_error_code();
    init_default(layer->weight, layer->bias, in_per_group * k * k, rng);
    return SC_OK;
}

static sc_tensor *conv_apply(sc_ctx *ctx, const sc_nn_conv2d *layer, sc_tensor *x)
{
    return sc_conv2d(ctx, x, layer->weight, layer->bias, &layer->opts);
}

sc_tensor *sc_nn_conv2d_forward(sc_ctx *ctx, const sc_nn_conv2d *layer, sc_tensor *x)
{
    bool pushed = enter_scope(ctx, layer->name);
    sc_tensor *y = conv_apply(ctx, layer, x); /* [N, OUT, H_out, W_out] */
    leave_scope(ctx, pushed);
    return y;
}

/* ---- normalisation ---- */

/* weight 1 and bias 0 [C], for both norms. */
static sc_status add_affine(sc_params *params, const char *prefix, int64_t channels,
                            sc_tensor **weight, sc_tensor **bias)
{
    if (channels < 1)
        return sc_error_set(SC_ERR_INVALID, "nn: norm '%s' needs a positive size, got %lld",
                            prefix, (long long)channels);
    if (!(*weight = add_tensor(params, prefix, "weight", false, 1, &channels)) ||
        !(*bias = add_tensor(params, prefix, "bias", false, 1, &channels)))
        return sc_error_code();
    sc_init_constant(*weight, 1.0f);
    return SC_OK; /* the store zero-fills the bias */
}

sc_status sc_nn_batch_norm_init(sc_nn_batch_norm *layer, sc_params *params,
                                const char *prefix, int64_t channels)
{
    SC_TRY(set_name(layer->name, prefix));
    SC_TRY(add_affine(params, prefix, channels, &layer->weight, &layer->bias));
    if (!(layer->running_mean = add_tensor(params, prefix, "running_mean", true, 1, &channels)) ||
        !(layer->running_var = add_tensor(params, prefix, "running_var", true, 1, &channels)))
        return sc_error_code();
    sc_init_constant(layer->running_var, 1.0f);
    layer->momentum = 0.1f;
    layer->eps = 1e-5f;
    return SC_OK;
}

/* The layer on x, followed by a relu when `relu` (fused: op.h). */
static sc_tensor *bn_apply(sc_ctx *ctx, const sc_nn_batch_norm *layer, sc_tensor *x, bool relu)
{
    return (relu ? sc_batch_norm_relu : sc_batch_norm)(ctx, x, layer->weight, layer->bias,
                                                       layer->running_mean, layer->running_var,
                                                       layer->momentum, layer->eps);
}

sc_tensor *sc_nn_batch_norm_forward(sc_ctx *ctx, const sc_nn_batch_norm *layer, sc_tensor *x)
{
    bool pushed = enter_scope(ctx, layer->name);
    sc_tensor *y = bn_apply(ctx, layer, x, false); /* x's shape */
    leave_scope(ctx, pushed);
    return y;
}

sc_status sc_nn_layer_norm_init(sc_nn_layer_norm *layer, sc_params *params,
                                const char *prefix, int64_t features)
{
    SC_TRY(set_name(layer->name, prefix));
    SC_TRY(add_affine(params, prefix, features, &layer->weight, &layer->bias));
    layer->eps = 1e-5f;
    return SC_OK;
}

sc_tensor *sc_nn_layer_norm_forward(sc_ctx *ctx, const sc_nn_layer_norm *layer, sc_tensor *x)
{
    bool pushed = enter_scope(ctx, layer->name);
    sc_tensor *y = sc_layer_norm(ctx, x, layer->weight, layer->bias, layer->eps); /* [..., D] */
    leave_scope(ctx, pushed);
    return y;
}

/* ---- conv-bn(-relu) ---- */

sc_status sc_nn_conv_bn_init(sc_nn_conv_bn *block, sc_params *params, const char *prefix,
                             const sc_nn_conv2d_config *config, bool relu, sc_rng *rng)
{
    char part[SC_NN_NAME_MAX];
    sc_nn_conv2d_config conv = *config;
    conv.bias = false;
    SC_TRY(set_name(block->name, prefix));
    SC_TRY(part_name(part, prefix, "conv"));
    SC_TRY(sc_nn_conv2d_init(&block->conv, params, part, &conv, rng));
    SC_TRY(part_name(part, prefix, "bn"));
    SC_TRY(sc_nn_batch_norm_init(&block->bn, params, part, config->out));
    block->relu = relu;
    return SC_OK;
}

/* The parts run unscoped, so the block is one row of the summary. */
sc_tensor *sc_nn_conv_bn_forward(sc_ctx *ctx, const sc_nn_conv_bn *block, sc_tensor *x)
{
    bool pushed = enter_scope(ctx, block->name);
    sc_tensor *y = conv_apply(ctx, &block->conv, x); /* [N, OUT, H', W'] */
    y = bn_apply(ctx, &block->bn, y, block->relu);
    leave_scope(ctx, pushed);
    return y;
}

sc_tensor *sc_nn_conv_bn_max_pool_forward(sc_ctx *ctx, const sc_nn_conv_bn *block,
                                          sc_tensor *x, const sc_pool2d_opts *pool)
{
    const sc_nn_batch_norm *bn = &block->bn;
    bool pushed = enter_scope(ctx, block->name);
    sc_tensor *y = conv_apply(ctx, &block->conv, x); /* [N, OUT, H', W'] */
    y = sc_batch_norm_max_pool2d(ctx, (sc_tensor *[]){y, bn->weight, bn->bias, bn->running_mean,
                                                      bn->running_var},
                                 bn->momentum, bn->eps, block->relu, pool); /* pooled */
    leave_scope(ctx, pushed);
    return y;
}

/* ---- squeeze and excitation ---- */

sc_status sc_nn_se_init(sc_nn_se *block, sc_params *params, const char *prefix,
                        int64_t channels, int64_t reduction, sc_rng *rng)
{
    char part[SC_NN_NAME_MAX];
    SC_TRY(set_name(block->name, prefix));
    if (channels < 1 || reduction < 1)
        return sc_error_set(SC_ERR_INVALID, "nn: se '%s' needs positive channels and "
                            "reduction, got %lld and %lld", prefix, (long long)channels,
                            (long long)reduction);
    int64_t hidden = channels / reduction > 0 ? channels / reduction : 1;
    SC_TRY(part_name(part, prefix, "reduce"));
    SC_TRY(sc_nn_linear_init(&block->reduce, params, part, channels, hidden, true, rng));
    SC_TRY(part_name(part, prefix, "expand"));
    return sc_nn_linear_init(&block->expand, params, part, hidden, channels, true, rng);
}

sc_tensor *sc_nn_se_forward(sc_ctx *ctx, const sc_nn_se *block, sc_tensor *x)
{
    bool pushed = enter_scope(ctx, block->name);
    const sc_nn_linear *reduce = &block->reduce, *expand = &block->expand;
    sc_tensor *s = sc_global_avg_pool(ctx, x);                               /* [N, C] */
    s = sc_relu(ctx, sc_linear(ctx, s, reduce->weight, reduce->bias));       /* [N, C/r] */
    s = sc_sigmoid(ctx, sc_linear(ctx, s, expand->weight, expand->bias));    /* [N, C] */
    if (s)
        s = sc_reshape(ctx, s, 4, (int64_t[]){s->shape[0], s->shape[1], 1, 1}); /* [N, C, 1, 1] */
    sc_tensor *y = sc_mul(ctx, x, s); /* [N, C, H, W] */
    leave_scope(ctx, pushed);
    return y;
}

/* ---- residual ---- */

/* conv1, conv2 and, when asked, the SE block: the residual branch F. */
static sc_status init_branch(sc_nn_residual *block, sc_params *params, const char *prefix,
                             int64_t in, int64_t out, int stride, int64_t se_reduction,
                             sc_rng *rng)
{
    char part[SC_NN_NAME_MAX];
    SC_TRY(part_name(part, prefix, "conv1"));
    SC_TRY(sc_nn_conv_bn_init(&block->conv1, params, part,
                              &(sc_nn_conv2d_config){.in = in, .out = out, .kernel = 3,
                                                     .stride = stride, .padding = 1},
                              true, rng));
    SC_TRY(part_name(part, prefix, "conv2"));
    SC_TRY(sc_nn_conv_bn_init(&block->conv2, params, part,
                              &(sc_nn_conv2d_config){.in = out, .out = out, .kernel = 3,
                                                     .padding = 1},
                              false, rng));
    block->has_se = se_reduction > 0;
    if (!block->has_se)
        return SC_OK;
    SC_TRY(part_name(part, prefix, "se"));
    return sc_nn_se_init(&block->se, params, part, out, se_reduction, rng);
}

sc_status sc_nn_residual_init(sc_nn_residual *block, sc_params *params, const char *prefix,
                              int64_t in, int64_t out, int stride, int64_t se_reduction,
                              sc_rng *rng)
{
    char part[SC_NN_NAME_MAX];
    SC_TRY(set_name(block->name, prefix));
    if (stride < 1 || se_reduction < 0)
        return sc_error_set(SC_ERR_INVALID, "nn: residual '%s': stride %d must be positive "
                            "and SE reduction %lld not negative", prefix, stride,
                            (long long)se_reduction);
    SC_TRY(init_branch(block, params, prefix, in, out, stride, se_reduction, rng));
    block->has_shortcut = stride != 1 || in != out;
    if (!block->has_shortcut)
        return SC_OK;
    SC_TRY(part_name(part, prefix, "shortcut"));
    return sc_nn_conv_bn_init(&block->shortcut, params, part,
                              &(sc_nn_conv2d_config){.in = in, .out = out, .kernel = 1,
                                                     .stride = stride},
                              false, rng);
}

sc_tensor *sc_nn_residual_forward(sc_ctx *ctx, const sc_nn_residual *block, sc_tensor *x)
{
    bool pushed = enter_scope(ctx, block->name);
    sc_tensor *f = sc_nn_conv_bn_forward(ctx, &block->conv1, x); /* [N, OUT, H', W'] */
    f = sc_nn_conv_bn_forward(ctx, &block->conv2, f);            /* [N, OUT, H', W'] */
    if (block->has_se)
        f = sc_nn_se_forward(ctx, &block->se, f);
    sc_tensor *s = block->has_shortcut ? sc_nn_conv_bn_forward(ctx, &block->shortcut, x)
                                       : x; /* [N, OUT, H', W'] */
    sc_tensor *y = sc_add_relu(ctx, f, s);
    leave_scope(ctx, pushed);
    return y;
}
