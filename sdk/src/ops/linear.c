/* matmul and linear: descriptors and public entry points. */
#include "../op.h"
#include "scorch/ops.h"

static sc_status infer_matmul(const sc_node *node, sc_tensor *out)
{
    const sc_tensor *a = node->in[0], *b = node->in[1];
    SC_TRY(sc_check_f32(node, 0));
    SC_TRY(sc_check_f32(node, 1));
    if (a->ndim != 2 || b->ndim != 2 || a->shape[1] != b->shape[0]) {
        char sa[64], sb[64];
        return sc_error_set(SC_ERR_INVALID, "matmul: shapes %s and %s do not chain",
                            sc_shape_str(a->ndim, a->shape, sa, sizeof sa),
                            sc_shape_str(b->ndim, b->shape, sb, sizeof sb));
    }
    return sc_infer_output(node, out, SC_F32, 2, (int64_t[]){a->shape[0], b->shape[1]});
}

static sc_status infer_linear(const sc_node *node, sc_tensor *out)
{
    const sc_tensor *x = node->in[0], *w = node->in[1];
    const sc_tensor *b = node->n_inputs > 2 ? node->in[2] : NULL;
    for (int i = 0; i < node->n_inputs; i++)
        SC_TRY(sc_check_f32(node, i));
    char sx[64], sw[64];
    if (x->ndim != 2 || w->ndim != 2 || x->shape[1] != w->shape[1])
        return sc_error_set(SC_ERR_INVALID,
                            "linear: input %s does not fit weight %s ([out, in])",
                            sc_shape_str(x->ndim, x->shape, sx, sizeof sx),
                            sc_shape_str(w->ndim, w->shape, sw, sizeof sw));
    if (b && (b->ndim != 1 || b->shape[0] != w->shape[0]))
        return sc_error_set(SC_ERR_INVALID, "linear: bias %s does not fit weight %s",
                            sc_shape_str(b->ndim, b->shape, sx, sizeof sx),
                            sc_shape_str(w->ndim, w->shape, sw, sizeof sw));
    return sc_infer_output(node, out, SC_F32, 2, (int64_t[]){x->shape[0], w->shape[0]});
}

/* 2 M K N for [M, K] x [K, N] (the bias add of linear is M N more). */
static double flops_matmul(const sc_node *node)
{
    return 2.0 * (double)node->in[0]->numel * (double)node->out->shape[1];
}

static double flops_linear(const sc_node *node)
{
    return flops_matmul(node) + (node->n_inputs > 2 ? (double)node->out->numel : 0);
}

const sc_op_desc sc_op_desc_matmul = {"matmul", 2, 2, 0, infer_matmul, flops_matmul};
const sc_op_desc sc_op_desc_linear = {"linear", 2, 3, 0, infer_linear, flops_linear};

sc_tensor *sc_matmul(sc_ctx *ctx, sc_tensor *a, sc_tensor *b)
{
    return sc_op_run(ctx, SC_OP_MATMUL, 2, (sc_tensor *[]){a, b}, NULL);
}

sc_tensor *sc_linear(sc_ctx *ctx, sc_tensor *x, sc_tensor *weight, sc_tensor *bias)
{
    return sc_op_run(ctx, SC_OP_LINEAR, bias ? 3 : 2,
                     (sc_tensor *[]){x, weight, bias}, NULL);
}
