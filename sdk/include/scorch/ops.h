/* scorch/ops.h — differentiable tensor ops.
 *
 * Each op computes at once on the context's device, allocates its result
 * from the step arena and, when grad mode is on and an input requires grad,
 * records itself on the tape for sc_backward(). Every op returns NULL with a
 * message on failure, and returns NULL at once when given a NULL input, so
 * a forward pass may chain calls and check the final result only.
 *
 * Shapes are written [N, C] with N the batch. Inputs are f32 unless said.
 */
#ifndef SCORCH_OPS_H
#define SCORCH_OPS_H

#include "scorch/context.h"
#include "scorch/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* a [M, K] x b [K, N] -> [M, N] */
SC_API sc_tensor *sc_matmul(sc_ctx *ctx, sc_tensor *a, sc_tensor *b);

/* x [N, IN], weight [OUT, IN], bias [OUT] or NULL -> [N, OUT]
 * (y = x W^T + b, PyTorch's layout). */
SC_API sc_tensor *sc_linear(sc_ctx *ctx, sc_tensor *x, sc_tensor *weight,
                            sc_tensor *bias);

/* Element-wise with NumPy broadcasting (shapes aligned at the right, a
 * dimension of 1 stretches): a + b, a - b, a * b. */
SC_API sc_tensor *sc_add(sc_ctx *ctx, sc_tensor *a, sc_tensor *b);
SC_API sc_tensor *sc_sub(sc_ctx *ctx, sc_tensor *a, sc_tensor *b);
SC_API sc_tensor *sc_mul(sc_ctx *ctx, sc_tensor *a, sc_tensor *b);

/* x * factor */
SC_API sc_tensor *sc_scale(sc_ctx *ctx, sc_tensor *x, float factor);

/* Element-wise activations; output shape = input shape. gelu is the exact
 * (erf) form. */
SC_API sc_tensor *sc_relu(sc_ctx *ctx, sc_tensor *x);
SC_API sc_tensor *sc_tanh(sc_ctx *ctx, sc_tensor *x);
SC_API sc_tensor *sc_sigmoid(sc_ctx *ctx, sc_tensor *x);
SC_API sc_tensor *sc_gelu(sc_ctx *ctx, sc_tensor *x);

/* Over the last dimension: x [..., C] -> [..., C]. */
SC_API sc_tensor *sc_softmax(sc_ctx *ctx, sc_tensor *x);
SC_API sc_tensor *sc_log_softmax(sc_ctx *ctx, sc_tensor *x);

/* Mean cross-entropy of logits [N, C] against class indices target [N]
 * (i32, i64 or u8; each in 0..C-1) or class probabilities target [N, C]
 * (f32; rows meant to sum to 1, not checked, as in PyTorch), with label
 * smoothing s in [0, 1): the target distribution is (1 - s) q + s / C, q
 * the one-hot row or the given probabilities (torch.nn.functional.
 * cross_entropy with either kind of target). Soft targets may require
 * grad. -> scalar [] */
SC_API sc_tensor *sc_cross_entropy(sc_ctx *ctx, sc_tensor *logits, sc_tensor *target,
                                   float label_smoothing);

/* Mean squared error over all elements; pred and target same shape.
 * -> scalar [] */
SC_API sc_tensor *sc_mse(sc_ctx *ctx, sc_tensor *pred, sc_tensor *target);

/* Inverted dropout: in training mode zeroes each element with probability p
 * and scales the rest by 1/(1-p), drawing from the context's step stream;
 * in eval mode (or p == 0) returns x itself. */
SC_API sc_tensor *sc_dropout(sc_ctx *ctx, sc_tensor *x, float p);

/* A view of x with another shape of the same element count; one dimension
 * may be -1 (inferred). Shares x's data. */
SC_API sc_tensor *sc_reshape(sc_ctx *ctx, sc_tensor *x, int ndim, const int64_t *shape);

/* x [N, ...] -> [N, prod(...)], a view. */
SC_API sc_tensor *sc_flatten(sc_ctx *ctx, sc_tensor *x);

/* Sum and mean of all elements -> scalar []. */
SC_API sc_tensor *sc_sum(sc_ctx *ctx, sc_tensor *x);
SC_API sc_tensor *sc_mean(sc_ctx *ctx, sc_tensor *x);

/* ---- convolutional networks (NCHW) ---- */

/* Geometry of a 2-D convolution; [0] is height, [1] width. A NULL opts
 * means stride 1, padding 0, dilation 1, groups 1; in an opts struct a
 * zero stride, dilation or groups (a field left out) means 1 too. */
typedef struct sc_conv2d_opts {
    int stride[2];
    int padding[2];
    int dilation[2];
    int groups;
} sc_conv2d_opts;

/* x [N, C_in, H, W], weight [C_out, C_in / groups, KH, KW], bias [C_out]
 * or NULL -> [N, C_out, H_out, W_out], where
 * H_out = (H + 2 padding - dilation (KH - 1) - 1) / stride + 1. */
SC_API sc_tensor *sc_conv2d(sc_ctx *ctx, sc_tensor *x, sc_tensor *weight, sc_tensor *bias,
                            const sc_conv2d_opts *opts);

/* Pooling window; stride 0 means stride = kernel. */
typedef struct sc_pool2d_opts {
    int kernel[2];
    int stride[2];
    int padding[2];
} sc_pool2d_opts;

/* x [N, C, H, W] -> [N, C, H_out, W_out]. Max pooling pads with -inf;
 * average pooling counts the padding (PyTorch's count_include_pad). */
SC_API sc_tensor *sc_max_pool2d(sc_ctx *ctx, sc_tensor *x, const sc_pool2d_opts *opts);
SC_API sc_tensor *sc_avg_pool2d(sc_ctx *ctx, sc_tensor *x, const sc_pool2d_opts *opts);

/* x [N, C, H, W] -> [N, C], the mean over H and W. */
SC_API sc_tensor *sc_global_avg_pool(sc_ctx *ctx, sc_tensor *x);

/* Batch normalisation over N (and H, W) per channel C: x [N, C] or
 * [N, C, H, W]; weight, bias, running_mean, running_var [C]. In training
 * mode it normalises with the batch statistics (biased variance) and
 * updates the running ones in place (running = (1 - momentum) running +
 * momentum batch, with the unbiased variance), as PyTorch does; in eval
 * mode it uses the running statistics. running_* are parameter-store
 * buffers (sc_params_add_buffer) and never get gradients. */
SC_API sc_tensor *sc_batch_norm(sc_ctx *ctx, sc_tensor *x, sc_tensor *weight, sc_tensor *bias,
                                sc_tensor *running_mean, sc_tensor *running_var, float momentum,
                                float eps);

/* Layer normalisation over the last dimension D: x [..., D], weight and
 * bias [D] or NULL. */
SC_API sc_tensor *sc_layer_norm(sc_ctx *ctx, sc_tensor *x, sc_tensor *weight, sc_tensor *bias,
                                float eps);

/* Concatenation of n tensors (1 <= n <= SC_CONCAT_MAX) along axis; all
 * other dimensions equal. */
enum { SC_CONCAT_MAX = 8 };
SC_API sc_tensor *sc_concat(sc_ctx *ctx, int n, sc_tensor *const *xs, int axis);

#ifdef __cplusplus
}
#endif
#endif
