/* reshape (a view) and flatten: descriptor and public entry points. */
#include <string.h>

#include "../op.h"
#include "scorch/ops.h"

/* Resolves the one allowed -1 and checks the element count. */
static sc_status infer_reshape(const sc_node *node, sc_tensor *out)
{
    const sc_tensor *x = node->in[0];
    const sc_reshape_params *r = &node->params.reshape;
    char sx[64], sr[64];
    if (r->ndim < 0 || r->ndim > SC_MAX_DIMS)
        return sc_error_set(SC_ERR_INVALID, "reshape: rank %d outside 0..%d", r->ndim,
                            SC_MAX_DIMS);
    int64_t shape[SC_MAX_DIMS], known = 1; /* product of the given sizes */
    int infer_at = -1;
    bool fits = true;
    for (int d = 0; d < r->ndim; d++) {
        shape[d] = r->shape[d];
        if (shape[d] == -1 && infer_at < 0)
            infer_at = d;
        else if (shape[d] < 0)
            return sc_error_set(SC_ERR_INVALID, "reshape: bad shape %s (one -1 at most, "
                                "no other negative sizes)",
                                sc_shape_str(r->ndim, r->shape, sr, sizeof sr));
        else
            fits = fits && sc_mul_i64(known, shape[d], &known);
    }
    if (!fits) /* the sizes come from plugin code: no tensor has that many elements */
        return sc_error_set(SC_ERR_INVALID, "reshape: cannot view %s as %s: the product of "
                            "its sizes overflows 64 bits",
                            sc_shape_str(x->ndim, x->shape, sx, sizeof sx),
                            sc_shape_str(r->ndim, r->shape, sr, sizeof sr));
    int64_t total = known; /* at most x's numel once the -1 is resolved */
    if (infer_at >= 0) {
        shape[infer_at] = known > 0 ? x->numel / known : -1; /* -1: ambiguous */
        total = known * shape[infer_at];
    }
    if (total != x->numel || (infer_at >= 0 && known == 0))
        return sc_error_set(SC_ERR_INVALID, "reshape: cannot view %s (%lld elements) as %s",
                            sc_shape_str(x->ndim, x->shape, sx, sizeof sx),
                            (long long)x->numel,
                            sc_shape_str(r->ndim, r->shape, sr, sizeof sr));
    return sc_infer_output(node, out, x->dtype, r->ndim, shape);
}

const sc_op_desc sc_op_desc_reshape = {"reshape", 1, 1, SC_OPF_VIEW, infer_reshape,
                                        sc_flops_none};

sc_tensor *sc_reshape(sc_ctx *ctx, sc_tensor *x, int ndim, const int64_t *shape)
{
    sc_op_params params = {.reshape = {.ndim = ndim}};
    if (ndim > 0 && ndim <= SC_MAX_DIMS)
        memcpy(params.reshape.shape, shape, (size_t)ndim * sizeof *shape);
    return sc_op_run(ctx, SC_OP_RESHAPE, 1, (sc_tensor *[]){x}, &params);
}

sc_tensor *sc_flatten(sc_ctx *ctx, sc_tensor *x)
{
    if (!x)
        return NULL;
    if (x->ndim < 1) {
        sc_error_set(SC_ERR_INVALID, "flatten: needs [N, ...], got a scalar");
        return NULL;
    }
    int64_t rest = 1;
    for (int d = 1; d < x->ndim; d++)
        rest *= x->shape[d];
    return sc_reshape(ctx, x, 2, (int64_t[]){x->shape[0], rest});
}

/* Every input has the first input's dtype and rank, and its shape off the
 * axis. */
static sc_status infer_concat(const sc_node *node, sc_tensor *out)
{
    const sc_tensor *x0 = node->in[0];
    int axis = node->params.concat.axis;
    char s0[64], si[64];
    sc_shape_str(x0->ndim, x0->shape, s0, sizeof s0);
    if (axis < 0 || axis >= x0->ndim)
        return sc_error_set(SC_ERR_INVALID, "concat: axis %d is outside input 0 %s", axis, s0);
    int64_t shape[SC_MAX_DIMS];
    memcpy(shape, x0->shape, sizeof shape);
    shape[axis] = 0;
    for (int i = 0; i < node->n_inputs; i++) {
        const sc_tensor *x = node->in[i];
        bool fits = x->dtype == x0->dtype && x->ndim == x0->ndim;
        for (int d = 0; fits && d < x->ndim; d++)
            fits = d == axis || x->shape[d] == x0->shape[d];
        if (!fits)
            return sc_error_set(SC_ERR_INVALID,
                                "concat: input %d %s %s does not fit input 0 %s %s on axis %d",
                                i, sc_dtype_name(x->dtype),
                                sc_shape_str(x->ndim, x->shape, si, sizeof si),
                                sc_dtype_name(x0->dtype), s0, axis);
        if (__builtin_add_overflow(shape[axis], x->shape[axis], &shape[axis]))
            return sc_error_set(SC_ERR_INVALID, "concat: input %d %s takes the size on axis "
                                "%d past 64 bits", i,
                                sc_shape_str(x->ndim, x->shape, si, sizeof si), axis);
    }
    return sc_infer_output(node, out, x0->dtype, x0->ndim, shape);
}

const sc_op_desc sc_op_desc_concat = {"concat", 1, SC_CONCAT_MAX, 0, infer_concat,
                                      sc_flops_none};

sc_tensor *sc_concat(sc_ctx *ctx, int n, sc_tensor *const *xs, int axis)
{
    if (n < 1 || n > SC_CONCAT_MAX) {
        sc_error_set(SC_ERR_INVALID, "concat: %d inputs, not 1..%d", n, SC_CONCAT_MAX);
        return NULL;
    }
    if (xs[0] && axis < 0) /* counted from the end, as in NumPy */
        axis += xs[0]->ndim;
    return sc_op_run(ctx, SC_OP_CONCAT, n, xs, &(sc_op_params){.concat = {axis}});
}
