/* conv2d: descriptor and public entry point. */
#include "../op.h"
#include "scorch/ops.h"

static sc_status check_conv_opts(const sc_conv2d_params *p)
{
    for (int d = 0; d < 2; d++)
        if (p->stride[d] < 1 || p->dilation[d] < 1 || p->padding[d] < 0)
            return sc_error_set(SC_ERR_INVALID,
                                "conv2d: stride %dx%d, padding %dx%d, dilation %dx%d: "
                                "stride and dilation must be >= 1, padding >= 0",
                                p->stride[0], p->stride[1], p->padding[0], p->padding[1],
                                p->dilation[0], p->dilation[1]);
    if (p->groups < 1)
        return sc_error_set(SC_ERR_INVALID, "conv2d: groups %d must be >= 1", p->groups);
    return SC_OK;
}

/* x [N, C, H, W], weight [OC, C / groups, KH, KW], bias [OC] */
static sc_status check_conv_shapes(const sc_node *node)
{
    const sc_tensor *x = node->in[0], *w = node->in[1];
    const sc_tensor *b = node->n_inputs > 2 ? node->in[2] : NULL;
    int groups = node->params.conv2d.groups;
    char sx[64], sw[64], sb[64];
    sc_shape_str(x->ndim, x->shape, sx, sizeof sx);
    sc_shape_str(w->ndim, w->shape, sw, sizeof sw);
    if (x->ndim != 4 || w->ndim != 4)
        return sc_error_set(SC_ERR_INVALID,
                            "conv2d: input %s and weight %s must both be 4-D "
                            "([N, C, H, W] and [OC, C / groups, KH, KW])", sx, sw);
    if (x->shape[1] % groups != 0 || w->shape[0] % groups != 0)
        return sc_error_set(SC_ERR_INVALID,
                            "conv2d: groups %d does not divide the %lld input channels of %s "
                            "and the %lld output channels of weight %s", groups,
                            (long long)x->shape[1], sx, (long long)w->shape[0], sw);
    int64_t expected; /* an empty weight may claim more channels than fit int64_t */
    if (!sc_mul_i64(w->shape[1], groups, &expected))
        return sc_error_set(SC_ERR_INVALID, "conv2d: weight %s with groups %d expects more "
                            "input channels than 64 bits count", sw, groups);
    if (expected != x->shape[1])
        return sc_error_set(SC_ERR_INVALID,
                            "conv2d: input %s has %lld channels, weight %s with groups %d "
                            "expects %lld", sx, (long long)x->shape[1], sw, groups,
                            (long long)expected);
    if (b && (b->ndim != 1 || b->shape[0] != w->shape[0]))
        return sc_error_set(SC_ERR_INVALID, "conv2d: bias %s does not fit weight %s",
                            sc_shape_str(b->ndim, b->shape, sb, sizeof sb), sw);
    return SC_OK;
}

static sc_status infer_conv2d(const sc_node *node, sc_tensor *out)
{
    const sc_tensor *x = node->in[0], *w = node->in[1];
    const sc_conv2d_params *p = &node->params.conv2d;
    for (int i = 0; i < node->n_inputs; i++)
        SC_TRY(sc_check_f32(node, i));
    SC_TRY(check_conv_opts(p));
    SC_TRY(check_conv_shapes(node));
    int64_t oh = sc_window_out(x->shape[2], (int)w->shape[2], p->stride[0], p->padding[0],
                               p->dilation[0]);
    int64_t ow = sc_window_out(x->shape[3], (int)w->shape[3], p->stride[1], p->padding[1],
                               p->dilation[1]);
    if (oh < 1 || ow < 1) {
        char sx[64], sw[64];
        return sc_error_set(SC_ERR_INVALID,
                            "conv2d: kernel of weight %s (dilation %dx%d) is larger than "
                            "input %s padded by %dx%d",
                            sc_shape_str(w->ndim, w->shape, sw, sizeof sw), p->dilation[0],
                            p->dilation[1], sc_shape_str(x->ndim, x->shape, sx, sizeof sx),
                            p->padding[0], p->padding[1]);
    }
    return sc_infer_output(node, out, SC_F32, 4,
                           (int64_t[]){x->shape[0], w->shape[0], oh, ow});
}

/* 2 per multiply-add: each output sums C / groups * KH * KW products; the
 * bias adds one more per output. */
static double flops_conv2d(const sc_node *node)
{
    const sc_tensor *w = node->in[1];
    double taps = (double)(w->shape[1] * w->shape[2] * w->shape[3]);
    return (2.0 * taps + (node->n_inputs > 2 ? 1.0 : 0.0)) * (double)node->out->numel;
}

const sc_op_desc sc_op_desc_conv2d = {"conv2d", 2, 3, 0, infer_conv2d, flops_conv2d};

/* A zero stride, dilation or groups (a field left out of a designated
 * initialiser) means 1. */
static int or_one(int v) { return v == 0 ? 1 : v; }

sc_tensor *sc_conv2d(sc_ctx *ctx, sc_tensor *x, sc_tensor *weight, sc_tensor *bias,
                     const sc_conv2d_opts *opts)
{
    sc_op_params params = {.conv2d = {{1, 1}, {0, 0}, {1, 1}, 1}};
    if (opts) {
        sc_conv2d_params *p = &params.conv2d;
        *p = *opts;
        for (int d = 0; d < 2; d++) {
            p->stride[d] = or_one(p->stride[d]);
            p->dilation[d] = or_one(p->dilation[d]);
        }
        p->groups = or_one(p->groups);
    }
    return sc_op_run(ctx, SC_OP_CONV2D, bias ? 3 : 2, (sc_tensor *[]){x, weight, bias},
                     &params);
}
