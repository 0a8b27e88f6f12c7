/* CUDA kernels for max, average and global average pooling.
 *
 * max_pool2d and avg_pool2d go through cuDNN's pooling, with descriptors
 * made per call. Max pooling (cuDNN's deterministic algorithm) leaves the
 * padding out of the windows, as the CPU's -inf padding does, and
 * propagates NaN, as the CPU's max does. Average pooling divides by the
 * whole window, padding included (CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING,
 * PyTorch's count_include_pad). Max pooling's backward reads x and y
 * (node->out) again instead of a saved argmax; where a window holds its
 * maximum twice, which one gets the gradient is cuDNN's choice, not
 * necessarily the CPU's first. Backward accumulates (beta = 1); for batch
 * norm's fused pooling (sc_cuda_max_pool2d) it writes a fresh gradient.
 *
 * global_avg_pool has kernels of its own: a warp per plane forward, an
 * element-wise spread backward. */
#include "cuda_impl.h"
#include "device_math.cuh"


typedef struct pool_descs {
    cudnnTensorDescriptor_t x, y; /* x [N, C, H, W], y [N, C, OH, OW], f32 */
    cudnnPoolingDescriptor_t pool;
} pool_descs;

static void pool_descs_free(pool_descs *d)
{
    if (d->x)
        cudnnDestroyTensorDescriptor(d->x);
    if (d->y)
        cudnnDestroyTensorDescriptor(d->y);
    if (d->pool)
        cudnnDestroyPoolingDescriptor(d->pool);
}

/* The descriptors of pooling x [N, C, H, W] into y [N, C, OH, OW] by p in
 * mode; on failure, those made so far are left in d for pool_descs_free. */
static sc_status pool_descs_make(pool_descs *d, const sc_tensor *x, const sc_tensor *y,
                                 const sc_pool2d_params *p, cudnnPoolingMode_t mode)
{
    const int64_t *xs = x->shape, *ys = y->shape;
    SC_TRY(sc_cudnn_tensor_4d(&d->x, CUDNN_DATA_FLOAT, xs[0], xs[1], xs[2], xs[3]));
    SC_TRY(sc_cudnn_tensor_4d(&d->y, CUDNN_DATA_FLOAT, ys[0], ys[1], ys[2], ys[3]));
    SC_CUDNN_TRY(cudnnCreatePoolingDescriptor(&d->pool));
    /* windows kernel[0] x kernel[1], padded by padding, moved by stride */
    SC_CUDNN_TRY(cudnnSetPooling2dDescriptor(d->pool, mode, CUDNN_PROPAGATE_NAN, p->kernel[0],
                                             p->kernel[1], p->padding[0], p->padding[1],
                                             p->stride[0], p->stride[1]));
    return SC_OK;
}

/* Forward (gy and gx NULL): y = pool(x). Backward: gx = beta gx + the
 * gradient of the pooling (given x and y) applied to gy. */
static sc_status pool_call(const pool_descs *d, sc_ctx *ctx, const sc_tensor *x,
                           const sc_tensor *y, const sc_tensor *gy, sc_tensor *gx, float beta)
{
    cudnnHandle_t cudnn = sc_cuda_ctx_dev(ctx)->cudnn;
    float one = 1.0f, zero = 0.0f;
    if (!gy) {
        /* y = pool(x) */
        SC_CUDNN_TRY(cudnnPoolingForward(cudnn, d->pool, &one, d->x, x->data, &zero, d->y,
                                         y->data));
    } else {
        /* gx = beta gx + the pooling's gradient for x (given x and y) applied to gy */
        SC_CUDNN_TRY(cudnnPoolingBackward(cudnn, d->pool, &one, d->y, y->data, d->y, gy->data,
                                          d->x, x->data, &beta, d->x, gx->data));
    }
    return SC_OK;
}

/* pool_call for pooling x [N, C, H, W] into y [N, C, OH, OW] by p in mode,
 * with descriptors made and destroyed here; op names the op in errors. */
static sc_status pool_tensors(sc_ctx *ctx, const char *op, const sc_tensor *x,
                              const sc_tensor *y, const sc_pool2d_params *p,
                              cudnnPoolingMode_t mode, const sc_tensor *gy, sc_tensor *gx,
                              float beta)
{
    /* cuDNN takes no empty tensor. An empty batch (or no channel) has
     * nothing to compute; empty planes (H or W 0) under windows of padding
     * only are not supported. */
    if (y->numel == 0)
        return SC_OK;
    if (x->numel == 0) {
        char sx[64];
        return sc_error_set(SC_ERR_UNSUPPORTED, "%s: cuDNN cannot pool the empty input %s", op,
                            sc_shape_str(x->ndim, x->shape, sx, sizeof sx));
    }
    pool_descs d = {};
    sc_status status = pool_descs_make(&d, x, y, p, mode);
    if (status == SC_OK)
        status = pool_call(&d, ctx, x, y, gy, gx, beta);
    pool_descs_free(&d);
    return status;
}

/* pool_tensors for node, adding into gx. */
static sc_status pool_run(sc_node *node, cudnnPoolingMode_t mode, const sc_tensor *gy,
                          sc_tensor *gx)
{
    return pool_tensors(node->ctx, sc_op_desc_get(node->op)->name, node->in[0], node->out,
                        &node->params.pool2d, mode, gy, gx, 1.0f);
}

extern "C" sc_status sc_cuda_max_pool2d(sc_ctx *ctx, const sc_tensor *x, const sc_tensor *y,
                                         const sc_pool2d_params *p, const sc_tensor *gy,
                                         sc_tensor *gx)
{
    return pool_tensors(ctx, "batch_norm (max_pool2d)", x, y, p,
                        CUDNN_POOLING_MAX_DETERMINISTIC, gy, gx, 0.0f);
}

static sc_status max_pool2d_forward(sc_node *node)
{
    return pool_run(node, CUDNN_POOLING_MAX_DETERMINISTIC, NULL, NULL);
}

static sc_status max_pool2d_backward(sc_node *node, const sc_tensor *gy, sc_tensor *const *gin)
{
    return pool_run(node, CUDNN_POOLING_MAX_DETERMINISTIC, gy, gin[0]);
}

static sc_status avg_pool2d_forward(sc_node *node)
{
    return pool_run(node, CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING, NULL, NULL);
}

static sc_status avg_pool2d_backward(sc_node *node, const sc_tensor *gy, sc_tensor *const *gin)
{
    return pool_run(node, CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING, gy, gin[0]);
}

/* ---------------------------------------------------------------------
 * Global average pooling. */


/* y [planes] = inv * the sum of each plane of x [planes, hw]; a warp per
 * plane (blockDim.x a multiple of 32). */
static __global__ void plane_mean_kernel(const float *x, float *y, int64_t planes, int64_t hw,
                                         float inv)
{
    int lane = threadIdx.x % 32;
    int64_t warp = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32;
    int64_t warps = (int64_t)gridDim.x * blockDim.x / 32;
    for (int64_t plane = warp; plane < planes; plane += warps) {
        const float *row = x + plane * hw;
        float acc = 0.0f;
        for (int64_t i = lane; i < hw; i += 32)
            acc += row[i];
        acc = warp_sum(acc);
        if (lane == 0)
            y[plane] = acc * inv;
    }
}

/* gx [planes, hw] += gy [planes] * inv */
static __global__ void plane_spread_kernel(const float *gy, float *gx, int64_t hw, int64_t n,
                                           float inv)
{
    GRID_STRIDE(i, n)
        gx[i] += gy[i / hw] * inv;
}

/* y [N, C] = the mean of each plane of x [N, C, H, W] */
static sc_status global_avg_pool_forward(sc_node *node)
{
    const sc_tensor *x = node->in[0];
    int64_t planes = node->out->numel, hw = x->shape[2] * x->shape[3];
    SC_LAUNCH(plane_mean_kernel, sc_cuda_blocks(planes * 32), SC_CUDA_THREADS, 0,
              sc_cuda_stream(node->ctx), sc_tensor_f32(x), sc_tensor_f32(node->out), planes, hw,
              1.0f / (float)hw);
    SC_CUDA_LAUNCHED("plane_mean_kernel");
    return SC_OK;
}

/* gx [N, C, H, W] += gy [N, C] / (H W) */
static sc_status global_avg_pool_backward(sc_node *node, const sc_tensor *gy,
                                          sc_tensor *const *gin)
{
    const sc_tensor *x = node->in[0];
    int64_t hw = x->shape[2] * x->shape[3];
    SC_LAUNCH(plane_spread_kernel, sc_cuda_blocks(x->numel), SC_CUDA_THREADS, 0,
              sc_cuda_stream(node->ctx), sc_tensor_f32(gy), sc_tensor_f32(gin[0]), hw, x->numel,
              1.0f / (float)hw);
    SC_CUDA_LAUNCHED("plane_spread_kernel");
    return SC_OK;
}

extern "C" const sc_kernel sc_cuda_kernel_max_pool2d = {max_pool2d_forward, max_pool2d_backward, 0};
extern "C" const sc_kernel sc_cuda_kernel_avg_pool2d = {avg_pool2d_forward, avg_pool2d_backward, 0};
extern "C" const sc_kernel sc_cuda_kernel_global_avg_pool = {global_avg_pool_forward,
                                                             global_avg_pool_backward, 0};
