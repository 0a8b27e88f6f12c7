/* max_pool2d, avg_pool2d and global_avg_pool: descriptors and public entry
 * points. */
#include <string.h>

#include "../op.h"
#include "scorch/ops.h"

static sc_status check_pool_input(const char *op, const sc_tensor *x)
{
    if (x->ndim != 4) {
        char sx[64];
        return sc_error_set(SC_ERR_INVALID, "%s: input %s must be [N, C, H, W]", op,
                            sc_shape_str(x->ndim, x->shape, sx, sizeof sx));
    }
    return SC_OK;
}

/* PyTorch's rules: padding at most half the kernel, so that every window
 * holds at least one input pixel. */
static sc_status check_pool_opts(const char *op, const sc_pool2d_params *p)
{
    for (int d = 0; d < 2; d++)
        if (p->kernel[d] < 1 || p->stride[d] < 1 || p->padding[d] < 0 ||
            p->padding[d] > p->kernel[d] / 2)
            return sc_error_set(SC_ERR_INVALID,
                                "%s: kernel %dx%d, stride %dx%d, padding %dx%d: kernel and "
                                "stride must be >= 1, padding in 0..kernel / 2", op,
                                p->kernel[0], p->kernel[1], p->stride[0], p->stride[1],
                                p->padding[0], p->padding[1]);
    return SC_OK;
}

sc_status sc_pool2d_out_shape(const char *op, const sc_tensor *x, const sc_pool2d_params *p,
                              int64_t shape[4])
{
    SC_TRY(check_pool_input(op, x));
    SC_TRY(check_pool_opts(op, p));
    int64_t oh = sc_window_out(x->shape[2], p->kernel[0], p->stride[0], p->padding[0], 1);
    int64_t ow = sc_window_out(x->shape[3], p->kernel[1], p->stride[1], p->padding[1], 1);
    if (oh < 1 || ow < 1) {
        char sx[64];
        return sc_error_set(SC_ERR_INVALID, "%s: kernel %dx%d is larger than input %s "
                            "padded by %dx%d", op, p->kernel[0], p->kernel[1],
                            sc_shape_str(x->ndim, x->shape, sx, sizeof sx), p->padding[0],
                            p->padding[1]);
    }
    memcpy(shape, (int64_t[]){x->shape[0], x->shape[1], oh, ow}, 4 * sizeof *shape);
    return SC_OK;
}

static sc_status infer_pool2d(const sc_node *node, sc_tensor *out)
{
    int64_t shape[4];
    SC_TRY(sc_check_f32(node, 0));
    SC_TRY(sc_pool2d_out_shape(sc_op_desc_get(node->op)->name, node->in[0],
                               &node->params.pool2d, shape));
    return sc_infer_output(node, out, SC_F32, 4, shape);
}

static sc_status infer_global_avg_pool(const sc_node *node, sc_tensor *out)
{
    SC_TRY(sc_check_f32(node, 0));
    SC_TRY(check_pool_input("global_avg_pool", node->in[0]));
    return sc_tensor_init(out, SC_F32, 2, node->in[0]->shape);
}

/* One comparison or addition per window tap. */
static double flops_pool2d(const sc_node *node)
{
    const sc_pool2d_params *p = &node->params.pool2d;
    return (double)node->out->numel * p->kernel[0] * p->kernel[1];
}

/* One addition per input element. */
static double flops_global_avg_pool(const sc_node *node)
{
    return (double)node->in[0]->numel;
}

const sc_op_desc sc_op_desc_max_pool2d = {"max_pool2d", 1, 1, 0, infer_pool2d, flops_pool2d};
const sc_op_desc sc_op_desc_avg_pool2d = {"avg_pool2d", 1, 1, 0, infer_pool2d, flops_pool2d};
const sc_op_desc sc_op_desc_global_avg_pool = {"global_avg_pool", 1, 1, 0,
                                               infer_global_avg_pool, flops_global_avg_pool};

sc_status sc_pool2d_params_of(const char *op, const sc_pool2d_opts *pool, sc_pool2d_params *p)
{
    if (!pool)
        return sc_error_set(SC_ERR_INVALID, "%s: no options (the kernel size is required)", op);
    *p = *pool;
    for (int d = 0; d < 2; d++)
        if (p->stride[d] == 0)
            p->stride[d] = p->kernel[d];
    return SC_OK;
}

static sc_tensor *pool2d(sc_ctx *ctx, sc_op_id op, sc_tensor *x, const sc_pool2d_opts *opts)
{
    sc_op_params params = {0};
    if (!x || sc_pool2d_params_of(sc_op_desc_get(op)->name, opts, &params.pool2d) != SC_OK)
        return NULL;
    return sc_op_run(ctx, op, 1, (sc_tensor *[]){x}, &params);
}

sc_tensor *sc_max_pool2d(sc_ctx *ctx, sc_tensor *x, const sc_pool2d_opts *opts)
{
    return pool2d(ctx, SC_OP_MAX_POOL2D, x, opts);
}

sc_tensor *sc_avg_pool2d(sc_ctx *ctx, sc_tensor *x, const sc_pool2d_opts *opts)
{
    return pool2d(ctx, SC_OP_AVG_POOL2D, x, opts);
}

sc_tensor *sc_global_avg_pool(sc_ctx *ctx, sc_tensor *x)
{
    return sc_op_run(ctx, SC_OP_GLOBAL_AVG_POOL, 1, (sc_tensor *[]){x}, NULL);
}
