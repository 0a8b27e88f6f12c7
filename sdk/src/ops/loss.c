/* Softmax, losses and reductions to a scalar: descriptors and public entry
 * points. */
#include "../op.h"
#include "scorch/ops.h"

/* Row-wise over the last dimension: any f32 tensor with one. */
static sc_status infer_rows(const sc_node *node, sc_tensor *out)
{
    if (node->in[0]->ndim < 1)
        return sc_error_set(SC_ERR_INVALID, "%s: needs a tensor with a last dimension, "
                            "not a scalar", sc_op_desc_get(node->op)->name);
    return sc_infer_same_as_input(node, out);
}

static bool is_index_dtype(sc_dtype dtype)
{
    return dtype == SC_I32 || dtype == SC_I64 || dtype == SC_U8;
}

/* The target of logits z [N, C]: class indices [N] (i32, i64 or u8) or
 * class probabilities [N, C] (f32). */
static sc_status check_ce_target(const sc_tensor *z, const sc_tensor *t)
{
    char sz[64], st[64];
    bool soft = t->dtype == SC_F32;
    if (!soft && !is_index_dtype(t->dtype))
        return sc_error_set(SC_ERR_INVALID, "cross_entropy: target must be i32, i64 or "
                            "u8 class indices or f32 class probabilities, not %s",
                            sc_dtype_name(t->dtype));
    bool fits = soft ? sc_tensor_same_shape(t, z)
                     : t->ndim == 1 && t->shape[0] == z->shape[0];
    if (!fits)
        return sc_error_set(SC_ERR_INVALID, "cross_entropy: target %s does not match "
                            "logits %s (%s for [N, C])",
                            sc_shape_str(t->ndim, t->shape, st, sizeof st),
                            sc_shape_str(z->ndim, z->shape, sz, sizeof sz),
                            soft ? "f32 probabilities [N, C]" : "[N]");
    return SC_OK;
}

/* logits [N, C] f32, target [N] integer or [N, C] f32 -> [] */
static sc_status infer_cross_entropy(const sc_node *node, sc_tensor *out)
{
    const sc_tensor *z = node->in[0];
    float s = node->params.cross_entropy.label_smoothing;
    char sz[64];
    SC_TRY(sc_check_f32(node, 0));
    if (z->ndim != 2 || z->shape[1] < 1)
        return sc_error_set(SC_ERR_INVALID, "cross_entropy: logits %s are not [N, C] "
                            "with C >= 1", sc_shape_str(z->ndim, z->shape, sz, sizeof sz));
    SC_TRY(check_ce_target(z, node->in[1]));
    if (!(s >= 0.0f && s < 1.0f))
        return sc_error_set(SC_ERR_INVALID, "cross_entropy: label smoothing %g is "
                            "outside [0, 1)", (double)s);
    return sc_tensor_init(out, SC_F32, 0, NULL);
}

/* pred, target same shape, f32 -> [] */
static sc_status infer_mse(const sc_node *node, sc_tensor *out)
{
    const sc_tensor *p = node->in[0], *t = node->in[1];
    SC_TRY(sc_check_f32(node, 0));
    SC_TRY(sc_check_f32(node, 1));
    if (!sc_tensor_same_shape(p, t)) {
        char sp[64], st[64];
        return sc_error_set(SC_ERR_INVALID, "mse: pred %s and target %s differ in shape",
                            sc_shape_str(p->ndim, p->shape, sp, sizeof sp),
                            sc_shape_str(t->ndim, t->shape, st, sizeof st));
    }
    return sc_tensor_init(out, SC_F32, 0, NULL);
}

const sc_op_desc sc_op_desc_softmax = {"softmax", 1, 1, 0, infer_rows, NULL};
const sc_op_desc sc_op_desc_log_softmax = {"log_softmax", 1, 1, 0, infer_rows, NULL};
const sc_op_desc sc_op_desc_cross_entropy = {"cross_entropy", 2, 2, 0, infer_cross_entropy, NULL};
const sc_op_desc sc_op_desc_mse = {"mse", 2, 2, 0, infer_mse, NULL};
const sc_op_desc sc_op_desc_sum = {"sum", 1, 1, 0, sc_infer_scalar, NULL};
const sc_op_desc sc_op_desc_mean = {"mean", 1, 1, 0, sc_infer_scalar, NULL};

sc_tensor *sc_softmax(sc_ctx *ctx, sc_tensor *x)
{
    return sc_op_run(ctx, SC_OP_SOFTMAX, 1, (sc_tensor *[]){x}, NULL);
}

sc_tensor *sc_log_softmax(sc_ctx *ctx, sc_tensor *x)
{
    return sc_op_run(ctx, SC_OP_LOG_SOFTMAX, 1, (sc_tensor *[]){x}, NULL);
}

sc_tensor *sc_cross_entropy(sc_ctx *ctx, sc_tensor *logits, sc_tensor *target,
                            float label_smoothing)
{
    sc_op_params params = {.cross_entropy = {label_smoothing}};
    return sc_op_run(ctx, SC_OP_CROSS_ENTROPY, 2, (sc_tensor *[]){logits, target}, &params);
}

sc_tensor *sc_mse(sc_ctx *ctx, sc_tensor *pred, sc_tensor *target)
{
    return sc_op_run(ctx, SC_OP_MSE, 2, (sc_tensor *[]){pred, target}, NULL);
}

sc_tensor *sc_sum(sc_ctx *ctx, sc_tensor *x)
{
    return sc_op_run(ctx, SC_OP_SUM, 1, (sc_tensor *[]){x}, NULL);
}

sc_tensor *sc_mean(sc_ctx *ctx, sc_tensor *x)
{
    return sc_op_run(ctx, SC_OP_MEAN, 1, (sc_tensor *[]){x}, NULL);
}
