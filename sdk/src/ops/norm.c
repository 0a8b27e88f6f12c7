/* batch_norm and layer_norm: descriptors and public entry points. */
#include "../op.h"
#include "scorch/ops.h"

/* t is f32 [len] */
static sc_status check_vector(const sc_node *node, int i, const char *what, int64_t len)
{
    const sc_tensor *t = node->in[i], *x = node->in[0];
    SC_TRY(sc_check_f32(node, i));
    if (t->ndim != 1 || t->shape[0] != len) {
        char st[64], sx[64];
        return sc_error_set(SC_ERR_INVALID, "%s: %s %s does not fit input %s (needs [%lld])",
                            sc_op_desc_get(node->op)->name, what,
                            sc_shape_str(t->ndim, t->shape, st, sizeof st),
                            sc_shape_str(x->ndim, x->shape, sx, sizeof sx), (long long)len);
    }
    return SC_OK;
}

/* x [N, C, ...]; weight, bias, running_mean, running_var [C]. The output
 * is x's shape, or pooled [N, C, OH, OW]. */
static sc_status infer_batch_norm(const sc_node *node, sc_tensor *out)
{
    static const char *const names[] = {"x", "weight", "bias", "running_mean", "running_var"};
    const sc_batch_norm_params *p = &node->params.batch_norm;
    const sc_tensor *x = node->in[0];
    char sx[64];
    SC_TRY(sc_check_f32(node, 0));
    if (x->ndim < 2)
        return sc_error_set(SC_ERR_INVALID, "batch_norm: input %s must be [N, C] or "
                            "[N, C, H, W]", sc_shape_str(x->ndim, x->shape, sx, sizeof sx));
    for (int i = 1; i < 5; i++)
        SC_TRY(check_vector(node, i, names[i], x->shape[1]));
    /* The variance of one value per channel is undefined (PyTorch refuses too). */
    int64_t per_channel = x->shape[1] > 0 ? x->numel / x->shape[1] : 0;
    if (p->training && per_channel < 2)
        return sc_error_set(SC_ERR_INVALID, "batch_norm: training needs more than one value "
                            "per channel, got input %s",
                            sc_shape_str(x->ndim, x->shape, sx, sizeof sx));
    if (!p->pooled)
        return sc_tensor_init(out, SC_F32, x->ndim, x->shape);
    int64_t shape[4];
    SC_TRY(sc_pool2d_out_shape("batch_norm (max_pool2d)", x, &p->pool, shape));
    return sc_tensor_init(out, SC_F32, 4, shape);
}

/* x [..., D]; weight and bias [D] when present. */
static sc_status infer_layer_norm(const sc_node *node, sc_tensor *out)
{
    const sc_tensor *x = node->in[0];
    SC_TRY(sc_check_f32(node, 0));
    if (x->ndim < 1) {
        char sx[64];
        return sc_error_set(SC_ERR_INVALID, "layer_norm: input %s needs a last dimension",
                            sc_shape_str(x->ndim, x->shape, sx, sizeof sx));
    }
    const sc_layer_norm_params *p = &node->params.layer_norm;
    int64_t d = x->shape[x->ndim - 1];
    if (p->has_weight)
        SC_TRY(check_vector(node, 1, "weight", d));
    if (p->has_bias)
        SC_TRY(check_vector(node, 1 + p->has_weight, "bias", d));
    return sc_tensor_init(out, SC_F32, x->ndim, x->shape);
}

/* Normalising is one multiply-add per element; batch statistics add a sum
 * and a sum of squares (3 more), a relu one, and max pooling one
 * comparison per window tap. */
static double flops_batch_norm(const sc_node *node)
{
    const sc_batch_norm_params *p = &node->params.batch_norm;
    double pool = p->pooled ? (double)node->out->numel * p->pool.kernel[0] * p->pool.kernel[1]
                            : 0.0;
    return ((p->training ? 5.0 : 2.0) + p->relu) * (double)node->in[0]->numel + pool;
}

/* Mean and variance (3 per element), normalising (2), then one each for
 * the weight and the bias. */
static double flops_layer_norm(const sc_node *node)
{
    const sc_layer_norm_params *p = &node->params.layer_norm;
    return (5.0 + p->has_weight + p->has_bias) * (double)node->out->numel;
}

const sc_op_desc sc_op_desc_batch_norm = {"batch_norm", 5, 5, 0, infer_batch_norm,
                                          flops_batch_norm};
const sc_op_desc sc_op_desc_layer_norm = {"layer_norm", 1, 3, 0, infer_layer_norm,
                                          flops_layer_norm};

/* pool: the fused max pooling's params, NULL for none. */
static sc_tensor *batch_norm(sc_ctx *ctx, sc_tensor *const in[5], float momentum, float eps,
                             bool relu, const sc_pool2d_params *pool)
{
    sc_op_params params = {.batch_norm = {.momentum = momentum, .eps = eps,
                                          .training = sc_ctx_training(ctx), .relu = relu,
                                          .pooled = pool != NULL}};
    if (pool)
        params.batch_norm.pool = *pool;
    return sc_op_run(ctx, SC_OP_BATCH_NORM, 5, in, &params);
}

sc_tensor *sc_batch_norm(sc_ctx *ctx, sc_tensor *x, sc_tensor *weight, sc_tensor *bias,
                         sc_tensor *running_mean, sc_tensor *running_var, float momentum,
                         float eps)
{
    return batch_norm(ctx, (sc_tensor *[]){x, weight, bias, running_mean, running_var},
                      momentum, eps, false, NULL);
}

sc_tensor *sc_batch_norm_relu(sc_ctx *ctx, sc_tensor *x, sc_tensor *weight, sc_tensor *bias,
                              sc_tensor *running_mean, sc_tensor *running_var, float momentum,
                              float eps)
{
    return batch_norm(ctx, (sc_tensor *[]){x, weight, bias, running_mean, running_var},
                      momentum, eps, true, NULL);
}

sc_tensor *sc_batch_norm_max_pool2d(sc_ctx *ctx, sc_tensor *const in[5], float momentum,
                                    float eps, bool relu, const sc_pool2d_opts *pool)
{
    sc_pool2d_params p;
    if (sc_pool2d_params_of("batch_norm (max_pool2d)", pool, &p) != SC_OK)
        return NULL;
    return batch_norm(ctx, in, momentum, eps, relu, &p);
}

sc_tensor *sc_layer_norm(sc_ctx *ctx, sc_tensor *x, sc_tensor *weight, sc_tensor *bias,
                         float eps)
{
    sc_op_params params = {.layer_norm = {eps, weight != NULL, bias != NULL}};
    sc_tensor *in[3] = {x};
    int n = 1;
    if (weight)
        in[n++] = weight;
    if (bias)
        in[n++] = bias;
    return sc_op_run(ctx, SC_OP_LAYER_NORM, n, in, &params);
}
