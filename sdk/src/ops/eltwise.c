/* Element-wise ops: broadcasting add/sub/mul, scale, activations and
 * dropout. Descriptors and public entry points. */
#include "../op.h"
#include "scorch/ops.h"

/* Dimension d of t once its shape is right-aligned to nd dimensions. */
static int64_t aligned_dim(const sc_tensor *t, int nd, int d)
{
    int k = d - (nd - t->ndim);
    return k < 0 ? 1 : t->shape[k];
}

/* NumPy broadcasting: shapes aligned at the right, a 1 stretches. */
static sc_status infer_broadcast(const sc_node *node, sc_tensor *out)
{
    const sc_tensor *a = node->in[0], *b = node->in[1];
    SC_TRY(sc_check_f32(node, 0));
    SC_TRY(sc_check_f32(node, 1));
    int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    int64_t shape[SC_MAX_DIMS];
    for (int d = 0; d < nd; d++) {
        int64_t da = aligned_dim(a, nd, d), db = aligned_dim(b, nd, d);
        if (da != db && da != 1 && db != 1) {
            char sa[64], sb[64];
            return sc_error_set(SC_ERR_INVALID, "%s: shapes %s and %s do not broadcast",
                                sc_op_desc_get(node->op)->name,
                                sc_shape_str(a->ndim, a->shape, sa, sizeof sa),
                                sc_shape_str(b->ndim, b->shape, sb, sizeof sb));
        }
        shape[d] = da == 1 ? db : da;
    }
    return sc_infer_output(node, out, SC_F32, nd, shape);
}

const sc_op_desc sc_op_desc_add = {"add", 2, 2, 0, infer_broadcast, NULL};
const sc_op_desc sc_op_desc_sub = {"sub", 2, 2, 0, infer_broadcast, NULL};
const sc_op_desc sc_op_desc_mul = {"mul", 2, 2, 0, infer_broadcast, NULL};
const sc_op_desc sc_op_desc_scale = {"scale", 1, 1, 0, sc_infer_same_as_input, NULL};
const sc_op_desc sc_op_desc_relu = {"relu", 1, 1, 0, sc_infer_same_as_input, NULL};
const sc_op_desc sc_op_desc_tanh = {"tanh", 1, 1, 0, sc_infer_same_as_input, NULL};
const sc_op_desc sc_op_desc_sigmoid = {"sigmoid", 1, 1, 0, sc_infer_same_as_input, NULL};
const sc_op_desc sc_op_desc_gelu = {"gelu", 1, 1, 0, sc_infer_same_as_input, NULL};
const sc_op_desc sc_op_desc_dropout = {"dropout", 1, 1, SC_OPF_RANDOM, sc_infer_same_as_input,
                                       NULL};

static sc_tensor *binary(sc_ctx *ctx, sc_op_id op, sc_tensor *a, sc_tensor *b)
{
    return sc_op_run(ctx, op, 2, (sc_tensor *[]){a, b}, NULL);
}

static sc_tensor *unary(sc_ctx *ctx, sc_op_id op, sc_tensor *x, const sc_op_params *params)
{
    return sc_op_run(ctx, op, 1, (sc_tensor *[]){x}, params);
}

sc_tensor *sc_add(sc_ctx *ctx, sc_tensor *a, sc_tensor *b) { return binary(ctx, SC_OP_ADD, a, b); }
sc_tensor *sc_sub(sc_ctx *ctx, sc_tensor *a, sc_tensor *b) { return binary(ctx, SC_OP_SUB, a, b); }
sc_tensor *sc_mul(sc_ctx *ctx, sc_tensor *a, sc_tensor *b) { return binary(ctx, SC_OP_MUL, a, b); }

sc_tensor *sc_add_relu(sc_ctx *ctx, sc_tensor *a, sc_tensor *b)
{
    return sc_op_run(ctx, SC_OP_ADD, 2, (sc_tensor *[]){a, b},
                     &(sc_op_params){.binary = {.relu = true}});
}

sc_tensor *sc_scale(sc_ctx *ctx, sc_tensor *x, float factor)
{
    return unary(ctx, SC_OP_SCALE, x, &(sc_op_params){.scale = {factor}});
}

sc_tensor *sc_relu(sc_ctx *ctx, sc_tensor *x) { return unary(ctx, SC_OP_RELU, x, NULL); }
sc_tensor *sc_tanh(sc_ctx *ctx, sc_tensor *x) { return unary(ctx, SC_OP_TANH, x, NULL); }
sc_tensor *sc_sigmoid(sc_ctx *ctx, sc_tensor *x) { return unary(ctx, SC_OP_SIGMOID, x, NULL); }
sc_tensor *sc_gelu(sc_ctx *ctx, sc_tensor *x) { return unary(ctx, SC_OP_GELU, x, NULL); }

sc_tensor *sc_dropout(sc_ctx *ctx, sc_tensor *x, float p)
{
    if (!x)
        return NULL;
    if (!(p >= 0.0f && p < 1.0f)) {
        sc_error_set(SC_ERR_INVALID, "dropout: p = %g is outside [0, 1)", (double)p);
        return NULL;
    }
    /* Identity: no copy, no tape node. */
    if (!sc_ctx_training(ctx) || p == 0.0f)
        return x;
    return unary(ctx, SC_OP_DROPOUT, x, &(sc_op_params){.dropout = {p}});
}
