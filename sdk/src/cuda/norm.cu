/* CUDA kernels for batch and layer normalisation.
 *
 * Batch norm goes through cuDNN's spatial batch normalisation, x viewed as
 * [N, C, S, 1] with S the product of the dimensions after C (1 for [N, C]:
 * per channel over N, as PyTorch's BatchNorm1d). Forward saves saved[0]
 * [2, C], each channel's mean and rstd = 1 / sqrt(var + eps), as the CPU
 * does: in training mode the batch's, written by cuDNN (its
 * resultSaveInvVariance holds 1 / sqrt(var + eps), not 1 / var), in eval
 * mode the running statistics'.
 *   Training: cudnnBatchNormalizationForwardTraining normalises with the
 * batch's biased variance and updates running_mean and running_var in
 * place with exponentialAverageFactor = momentum:
 * running = (1 - momentum) running + momentum batch, cuDNN taking the
 * unbiased variance there, as PyTorch (which passes its running statistics
 * to the same call) and the CPU do. cudnnBatchNormalizationBackward adds
 * into the gradients (beta = 1); it writes all three, so those not wanted
 * go to arena scratch.
 *   Eval: cudnnBatchNormalizationForwardInference; backward, the
 * statistics being constants, by kernels of our own: gx += g w rstd,
 * gw += sum g xh, gb += sum g.
 *
 * A fused relu (sc_batch_norm_relu) runs as a kernel of its own after
 * forward, and before backward on the output's gradient. Fused max
 * pooling (sc_batch_norm_max_pool2d) runs after that through cuDNN, as
 * max_pool2d does, from batch norm's output kept in saved[1], and its
 * backward first, into a fresh gradient of that output.
 *
 * Layer norm has kernels of its own. A warp per row computes the mean,
 * then the variance as the mean square about it, then y (three passes
 * over the row, the later ones mostly from cache), and backward the row's
 * gx. The weight and bias gradients sum over rows in two steps: per
 * column, partial sums over chunks of rows, then the chunks in order, so
 * results do not depend on scheduling. */
#include "cuda_impl.h"
#include "device_math.cuh"


/* Layer norm's weight and bias gradients: blocks of COLS columns by
 * ROW_THREADS threads down the rows, over chunks of at least CHUNK_ROWS
 * rows, at most MAX_CHUNKS of them. */
enum { COLS = 32, ROW_THREADS = 8, CHUNK_ROWS = 32, MAX_CHUNKS = 128 };


/* The sum of v over a block of blockDim.x threads (a multiple of 32), in
 * thread 0. */
static __device__ float block_sum(float v)
{
    SC_SHARED(float, warps, [32]);
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    v = warp_sum(v);
    __syncthreads(); /* a previous call may still be reading warps */
    if (lane == 0)
        warps[warp] = v;
    __syncthreads();
    if (warp == 0)
        v = warp_sum(lane < (int)(blockDim.x / 32) ? warps[lane] : 0.0f);
    return v;
}

/* The calling thread's warp among all the grid's, and their number. */
static __device__ int64_t grid_warp()
{
    return (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32;
}
static __device__ int64_t grid_warps() { return (int64_t)gridDim.x * blockDim.x / 32; }

/* ---------------------------------------------------------------------
 * Batch norm. */

typedef struct bn_geom {
    int64_t n, c, s; /* x [N, C, S] */
} bn_geom;

static bn_geom bn_geom_of(const sc_tensor *x)
{
    int64_t rows = x->shape[0] * x->shape[1];
    return bn_geom{x->shape[0], x->shape[1], rows > 0 ? x->numel / rows : 0};
}

typedef struct bn_descs {
    cudnnTensorDescriptor_t x;     /* x, y, gy, gx [N, C, S, 1] */
    cudnnTensorDescriptor_t stats; /* weight, bias, means and variances [1, C, 1, 1] */
} bn_descs;

static void bn_descs_free(bn_descs *d)
{
    if (d->x)
        cudnnDestroyTensorDescriptor(d->x);
    if (d->stats)
        cudnnDestroyTensorDescriptor(d->stats);
}

/* On failure, the descriptors made so far are left in d for bn_descs_free. */
static sc_status bn_descs_make(bn_descs *d, bn_geom g)
{
    SC_TRY(sc_cudnn_tensor_4d(&d->x, CUDNN_DATA_FLOAT, g.n, g.c, g.s, 1));
    SC_TRY(sc_cudnn_tensor_4d(&d->stats, CUDNN_DATA_FLOAT, 1, g.c, 1, 1));
    return SC_OK;
}

/* mean, rstd [c] = running_mean, 1 / sqrt(running_var + eps) */
static __global__ void bn_running_stats_kernel(const float *running_mean,
                                               const float *running_var, float eps, float *mean,
                                               float *rstd, int64_t c)
{
    GRID_STRIDE(i, c) {
        mean[i] = running_mean[i];
        rstd[i] = (float)(1.0 / sqrt((double)running_var[i] + eps));
    }
}

/* Per channel (a block each), over N and S: gw [C] += sum g (x - mean) rstd
 * and gb [C] += sum g; either may be NULL. */
static __global__ void bn_param_grads_kernel(const float *x, const float *g, const float *mean,
                                             const float *rstd, float *gw, float *gb, int64_t n,
                                             int64_t c, int64_t s)
{
    int64_t ch = blockIdx.x;
    float mu = mean[ch], sum_g = 0.0f, sum_gxc = 0.0f;
    for (int64_t i = threadIdx.x; i < n * s; i += blockDim.x) {
        int64_t at = (i / s * c + ch) * s + i % s;
        sum_g += g[at];
        sum_gxc += g[at] * (x[at] - mu);
    }
    sum_g = block_sum(sum_g);
    sum_gxc = block_sum(sum_gxc);
    if (threadIdx.x == 0) {
        if (gw)
            gw[ch] += sum_gxc * rstd[ch];
        if (gb)
            gb[ch] += sum_g;
    }
}

/* gx [N, C, S] += g w[c] rstd[c] */
static __global__ void bn_running_input_grad_kernel(const float *g, const float *w,
                                                    const float *rstd, float *gx, int64_t c,
                                                    int64_t s, int64_t n)
{
    GRID_STRIDE(i, n) {
        int64_t ch = i / s % c;
        gx[i] += g[i] * (w[ch] * rstd[ch]);
    }
}

/* y [n] = relu(y) in place: batch norm's fused relu */
static __global__ void bn_relu_kernel(float *y, int64_t n)
{
    GRID_STRIDE(i, n) {
        y[i] = relu_op{}.forward(y[i]);
    }
}

/* gy [n] = the gradient of the relu's input, from its output z [n] and the
 * output's gradient gz [n] (z > 0 exactly where the input is) */
static __global__ void bn_relu_grad_kernel(const float *z, const float *gz, float *gy, int64_t n)
{
    GRID_STRIDE(i, n) {
        gy[i] = relu_op{}.backward(z[i], z[i], gz[i]);
    }
}

/* Training: y with the batch's statistics, saved into mean and rstd, and
 * the running statistics updated. */
static sc_status bn_forward_batch(sc_node *node, const bn_descs *d, void *y)
{
    const sc_batch_norm_params *p = &node->params.batch_norm;
    float *mean = sc_tensor_f32(node->saved[0]), *rstd = mean + node->in[0]->shape[1];
    float one = 1.0f, zero = 0.0f;
    /* y [N, C, S] = (x - mean) rstd w + b with the batch's mean and rstd [C];
     * running_mean, running_var [C] = (1 - momentum) running + momentum batch */
    SC_CUDNN_TRY(cudnnBatchNormalizationForwardTraining(
        sc_cuda_ctx_dev(node->ctx)->cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, d->x,
        node->in[0]->data, d->x, y, d->stats, node->in[1]->data, node->in[2]->data,
        (double)p->momentum, node->in[3]->data, node->in[4]->data, (double)p->eps, mean, rstd));
    return SC_OK;
}

/* Eval: saved[0] [2, C] = running_mean, 1 / sqrt(running_var + eps). */
static sc_status bn_save_running_stats(sc_node *node)
{
    const sc_batch_norm_params *p = &node->params.batch_norm;
    int64_t c = node->in[0]->shape[1];
    float *mean = sc_tensor_f32(node->saved[0]), *rstd = mean + c;
    SC_LAUNCH(bn_running_stats_kernel, sc_cuda_blocks(c), SC_CUDA_THREADS, 0,
              sc_cuda_stream(node->ctx), sc_tensor_f32(node->in[3]), sc_tensor_f32(node->in[4]),
              p->eps, mean, rstd, c);
    SC_CUDA_LAUNCHED("bn_running_stats_kernel");
    return SC_OK;
}

/* Eval: y with the running statistics, saved into mean and rstd. */
static sc_status bn_forward_running(sc_node *node, const bn_descs *d, void *y)
{
    const sc_batch_norm_params *p = &node->params.batch_norm;
    float one = 1.0f, zero = 0.0f;
    /* y [N, C, S] = (x - running_mean) / sqrt(running_var + eps) w + b */
    SC_CUDNN_TRY(cudnnBatchNormalizationForwardInference(
        sc_cuda_ctx_dev(node->ctx)->cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, d->x,
        node->in[0]->data, d->x, y, d->stats, node->in[1]->data, node->in[2]->data,
        node->in[3]->data, node->in[4]->data, (double)p->eps));
    return bn_save_running_stats(node);
}

/* Batch norm's own output (before any fused pooling): the op's output,
 * or with pooling saved[1], from the step arena. */
static sc_tensor *bn_output(const sc_node *node)
{
    return node->params.batch_norm.pooled ? node->saved[1] : node->out;
}

/* y = (x - mean) rstd weight + bias per channel, or relu of it, max-pooled
 * into the op's output when pooled; saved[0] [2, C] holds mean and rstd
 * (the batch's in training mode, the running ones in eval mode). */
static sc_status batch_norm_forward(sc_node *node)
{
    const sc_batch_norm_params *p = &node->params.batch_norm;
    if (p->eps < CUDNN_BN_MIN_EPSILON)
        return sc_error_set(SC_ERR_INVALID, "batch_norm: eps %g is below cuDNN's minimum %g",
                            (double)p->eps, (double)CUDNN_BN_MIN_EPSILON);
    const sc_tensor *x = node->in[0];
    bn_geom g = bn_geom_of(x);
    int64_t shape[2] = {2, g.c};
    sc_tensor *stats = sc_tensor_new(node->ctx, SC_F32, 2, shape);
    if (!stats)
        return SC_ERR_NOMEM;
    node->saved[0] = stats;
    if (p->pooled && !(node->saved[1] = sc_tensor_new(node->ctx, SC_F32, x->ndim, x->shape)))
        return SC_ERR_NOMEM;
    /* An empty x (eval mode only: training needs two values per channel)
     * leaves no y to compute, and cuDNN takes no empty tensor. */
    if (x->numel == 0)
        return bn_save_running_stats(node);
    sc_tensor *y = bn_output(node);
    bn_descs d = {};
    sc_status status = bn_descs_make(&d, g);
    if (status == SC_OK)
        status = p->training ? bn_forward_batch(node, &d, y->data)
                             : bn_forward_running(node, &d, y->data);
    bn_descs_free(&d);
    if (status != SC_OK)
        return status;
    if (p->relu) {
        SC_LAUNCH(bn_relu_kernel, sc_cuda_blocks(y->numel), SC_CUDA_THREADS, 0,
                  sc_cuda_stream(node->ctx), sc_tensor_f32(y), y->numel);
        SC_CUDA_LAUNCHED("bn_relu_kernel");
    }
    return p->pooled ? sc_cuda_max_pool2d(node->ctx, y, node->out, &p->pool, NULL, NULL) : SC_OK;
}

/* A gradient's data, or arena scratch of n floats where it is not wanted. */
static float *grad_or_scratch(sc_ctx *ctx, sc_tensor *g, int64_t n)
{
    return g ? sc_tensor_f32(g) : (float *)sc_ctx_alloc_data(ctx, (size_t)n * sizeof(float));
}

/* Training: with xh = (x - mean) rstd, per channel over N and S,
 *   gx += w rstd (g - sum g / M - xh sum g xh / M), M = N S;
 *   gw += sum g xh;  gb += sum g. */
static sc_status bn_backward_batch(sc_node *node, const bn_descs *d, const sc_tensor *gy,
                                   sc_tensor *const *gin)
{
    const sc_tensor *x = node->in[0];
    int64_t c = x->shape[1];
    const float *mean = sc_tensor_f32(node->saved[0]), *rstd = mean + c;
    float *gx = grad_or_scratch(node->ctx, gin[0], x->numel);
    float *gw = grad_or_scratch(node->ctx, gin[1], c), *gb = grad_or_scratch(node->ctx, gin[2], c);
    if (!gx || !gw || !gb)
        return SC_ERR_NOMEM;
    /* Add into the gradients, overwrite gx's scratch. dscale and dbias
     * share one beta: when only one of them is wanted, the other's scratch
     * is blended too, garbage with garbage, and thrown away. */
    float one = 1.0f, beta_data = gin[0] ? 1.0f : 0.0f, beta_param = gin[1] || gin[2] ? 1.0f : 0.0f;
    /* gx [N, C, S], gw [C], gb [C] from gy [N, C, S], x and the saved mean, rstd [C] */
    SC_CUDNN_TRY(cudnnBatchNormalizationBackward(
        sc_cuda_ctx_dev(node->ctx)->cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &beta_data, &one,
        &beta_param, d->x, x->data, d->x, gy->data, d->x, gx, d->stats, node->in[1]->data, gw, gb,
        (double)node->params.batch_norm.eps, mean, rstd));
    return SC_OK;
}

/* Eval (constant statistics): gx += g w rstd;  gw += sum g xh;  gb += sum g. */
static sc_status bn_backward_running(sc_node *node, const sc_tensor *gy, sc_tensor *const *gin)
{
    bn_geom g = bn_geom_of(node->in[0]);
    cudaStream_t stream = sc_cuda_stream(node->ctx);
    const float *x = sc_tensor_f32(node->in[0]), *w = sc_tensor_f32(node->in[1]),
                *gyd = sc_tensor_f32(gy), *mean = sc_tensor_f32(node->saved[0]),
                *rstd = mean + g.c;
    if (gin[1] || gin[2]) {
        /* gw, gb [C] += the sums over N, S of g xh and g */
        SC_LAUNCH(bn_param_grads_kernel, (unsigned)g.c, SC_CUDA_THREADS, 0, stream, x, gyd, mean,
                  rstd, gin[1] ? sc_tensor_f32(gin[1]) : NULL,
                  gin[2] ? sc_tensor_f32(gin[2]) : NULL, g.n, g.c, g.s);
        SC_CUDA_LAUNCHED("bn_param_grads_kernel");
    }
    if (gin[0]) {
        /* gx [N, C, S] += g w rstd */
        SC_LAUNCH(bn_running_input_grad_kernel, sc_cuda_blocks(gy->numel), SC_CUDA_THREADS, 0,
                  stream, gyd, w, rstd, sc_tensor_f32(gin[0]), g.c, g.s, gy->numel);
        SC_CUDA_LAUNCHED("bn_running_input_grad_kernel");
    }
    return SC_OK;
}

/* *gy = the gradient of batch norm's own output, in arena scratch, from
 * that of the op's output: through the fused pooling, then the fused
 * relu (each when there is one). */
static sc_status bn_fused_backward(sc_node *node, const sc_tensor **gy)
{
    const sc_batch_norm_params *p = &node->params.batch_norm;
    const sc_tensor *y = bn_output(node);
    sc_tensor *g = sc_tensor_new(node->ctx, SC_F32, y->ndim, y->shape);
    if (!g)
        return SC_ERR_NOMEM;
    const sc_tensor *gz = *gy;
    if (p->pooled) {
        SC_TRY(sc_cuda_max_pool2d(node->ctx, y, node->out, &p->pool, gz, g));
        gz = g;
    }
    if (p->relu) {
        /* in place when pooled: element-wise */
        SC_LAUNCH(bn_relu_grad_kernel, sc_cuda_blocks(g->numel), SC_CUDA_THREADS, 0,
                  sc_cuda_stream(node->ctx), sc_tensor_f32(y), sc_tensor_f32(gz),
                  sc_tensor_f32(g), g->numel);
        SC_CUDA_LAUNCHED("bn_relu_grad_kernel");
    }
    *gy = g;
    return SC_OK;
}

static sc_status batch_norm_backward(sc_node *node, const sc_tensor *gy, sc_tensor *const *gin)
{
    const sc_batch_norm_params *p = &node->params.batch_norm;
    /* An empty x: gx is empty, and gw, gb add sums over no values. */
    if ((!gin[0] && !gin[1] && !gin[2]) || node->in[0]->numel == 0)
        return SC_OK;
    if (p->relu || p->pooled)
        SC_TRY(bn_fused_backward(node, &gy));
    if (!p->training)
        return bn_backward_running(node, gy, gin);
    bn_descs d = {};
    sc_status status = bn_descs_make(&d, bn_geom_of(node->in[0]));
    if (status == SC_OK)
        status = bn_backward_batch(node, &d, gy, gin);
    bn_descs_free(&d);
    return status;
}

/* ---------------------------------------------------------------------
 * Layer norm: x [R, D], D the last dimension. */

/* y [R, D] = (x - mean) rstd w + b per row, w and b optional; mean,
 * rstd [R]; a warp per row. */
static __global__ void layer_norm_forward_kernel(const float *x, const float *w, const float *b,
                                                 float *y, float *mean, float *rstd,
                                                 int64_t rows, int64_t d, float eps)
{
    int lane = threadIdx.x % 32;
    for (int64_t r = grid_warp(); r < rows; r += grid_warps()) {
        const float *xr = x + r * d;
        float *yr = y + r * d, sum = 0.0f, squares = 0.0f;
        for (int64_t j = lane; j < d; j += 32)
            sum += xr[j];
        float mu = warp_sum(sum) / (float)d;
        for (int64_t j = lane; j < d; j += 32)
            squares += (xr[j] - mu) * (xr[j] - mu);
        float rs = 1.0f / sqrtf(warp_sum(squares) / (float)d + eps);
        for (int64_t j = lane; j < d; j += 32)
            yr[j] = (xr[j] - mu) * rs * (w ? w[j] : 1.0f) + (b ? b[j] : 0.0f);
        if (lane == 0) {
            mean[r] = mu;
            rstd[r] = rs;
        }
    }
}

/* gx [R, D] += rstd (gxh - sum gxh / D - xh sum gxh xh / D) per row, with
 * gxh = g w and xh = (x - mean) rstd; a warp per row. */
static __global__ void layer_norm_input_grad_kernel(const float *x, const float *g,
                                                    const float *w, const float *mean,
                                                    const float *rstd, float *gx, int64_t rows,
                                                    int64_t d)
{
    int lane = threadIdx.x % 32;
    for (int64_t r = grid_warp(); r < rows; r += grid_warps()) {
        const float *xr = x + r * d, *gr = g + r * d;
        float *gxr = gx + r * d, mu = mean[r], rs = rstd[r], sum = 0.0f, sum_xc = 0.0f;
        for (int64_t j = lane; j < d; j += 32) {
            float gxh = gr[j] * (w ? w[j] : 1.0f);
            sum += gxh;
            sum_xc += gxh * (xr[j] - mu);
        }
        /* gx += rs gxh + c_xc (x - mu) + c_1 */
        float c_xc = -rs * rs * rs * warp_sum(sum_xc) / (float)d;
        float c_1 = -rs * warp_sum(sum) / (float)d;
        for (int64_t j = lane; j < d; j += 32)
            gxr[j] += rs * gr[j] * (w ? w[j] : 1.0f) + c_xc * (xr[j] - mu) + c_1;
    }
}

/* part [2, chunks, D] = per chunk of chunk_rows rows (blockIdx.y) and
 * column: the sums of g xh, then of g. Blocks of COLS x ROW_THREADS. */
static __global__ void layer_norm_param_partials_kernel(const float *x, const float *g,
                                                        const float *mean, const float *rstd,
                                                        float *part, int64_t rows, int64_t d,
                                                        int64_t chunk_rows)
{
    SC_SHARED(float, sums, [2][ROW_THREADS][COLS]);
    int64_t j = blockIdx.x * (int64_t)COLS + threadIdx.x, chunks = gridDim.y;
    int64_t r0 = blockIdx.y * chunk_rows, r1 = r0 + chunk_rows < rows ? r0 + chunk_rows : rows;
    float sum_gxh = 0.0f, sum_g = 0.0f;
    for (int64_t r = r0 + threadIdx.y; j < d && r < r1; r += ROW_THREADS) {
        float gv = g[r * d + j];
        sum_gxh += gv * (x[r * d + j] - mean[r]) * rstd[r];
        sum_g += gv;
    }
    sums[0][threadIdx.y][threadIdx.x] = sum_gxh;
    sums[1][threadIdx.y][threadIdx.x] = sum_g;
    __syncthreads();
    if (threadIdx.y != 0 || j >= d)
        return;
    for (int t = 1; t < ROW_THREADS; t++) {
        sum_gxh += sums[0][t][threadIdx.x];
        sum_g += sums[1][t][threadIdx.x];
    }
    part[blockIdx.y * d + j] = sum_gxh;
    part[(chunks + blockIdx.y) * d + j] = sum_g;
}

/* gw [D] += the sum over chunks of part[0] [chunks, D], gb [D] += that of
 * part[1], chunks in order; gw or gb may be NULL. */
static __global__ void layer_norm_param_sums_kernel(const float *part, float *gw, float *gb,
                                                    int64_t chunks, int64_t d)
{
    GRID_STRIDE(j, d) {
        float sum_gxh = 0.0f, sum_g = 0.0f;
        for (int64_t k = 0; k < chunks; k++) {
            sum_gxh += part[k * d + j];
            sum_g += part[(chunks + k) * d + j];
        }
        if (gw)
            gw[j] += sum_gxh;
        if (gb)
            gb[j] += sum_g;
    }
}

/* gw [D] += sum_r g xh;  gb [D] += sum_r g (rows >= 0, D >= 1). */
static sc_status layer_norm_param_grads(sc_ctx *ctx, const sc_layer_norm_rows *a, const float *x,
                                        const float *g, const float *mean, const float *rstd,
                                        float *gw, float *gb)
{
    int64_t chunks = (a->rows + CHUNK_ROWS - 1) / CHUNK_ROWS;
    if (chunks < 1)
        chunks = 1;
    if (chunks > MAX_CHUNKS)
        chunks = MAX_CHUNKS;
    int64_t chunk_rows = (a->rows + chunks - 1) / chunks;
    float *part = (float *)sc_ctx_alloc_data(ctx, (size_t)(2 * chunks * a->d) * sizeof(float));
    if (!part)
        return SC_ERR_NOMEM;
    cudaStream_t stream = sc_cuda_stream(ctx);
    dim3 grid((unsigned)((a->d + COLS - 1) / COLS), (unsigned)chunks), block(COLS, ROW_THREADS);
    SC_LAUNCH(layer_norm_param_partials_kernel, grid, block, 0, stream, x, g, mean, rstd, part,
              a->rows, a->d, chunk_rows);
    SC_CUDA_LAUNCHED("layer_norm_param_partials_kernel");
    SC_LAUNCH(layer_norm_param_sums_kernel, sc_cuda_blocks(a->d), SC_CUDA_THREADS, 0, stream, part,
              gw, gb, chunks, a->d);
    SC_CUDA_LAUNCHED("layer_norm_param_sums_kernel");
    return SC_OK;
}

/* y = (x - mean) rstd weight + bias per row; saved[0] [2, R] holds each
 * row's mean and rstd. */
static sc_status layer_norm_forward(sc_node *node)
{
    sc_layer_norm_rows a = sc_layer_norm_rows_of(node);
    int64_t shape[2] = {2, a.rows};
    sc_tensor *stats = sc_tensor_new(node->ctx, SC_F32, 2, shape);
    if (!stats)
        return SC_ERR_NOMEM;
    node->saved[0] = stats;
    float *mean = sc_tensor_f32(stats), *rstd = mean + a.rows;
    SC_LAUNCH(layer_norm_forward_kernel, sc_cuda_blocks(a.rows * 32), SC_CUDA_THREADS, 0,
              sc_cuda_stream(node->ctx), sc_tensor_f32(node->in[0]), a.w, a.b,
              sc_tensor_f32(node->out), mean, rstd, a.rows, a.d, node->params.layer_norm.eps);
    SC_CUDA_LAUNCHED("layer_norm_forward_kernel");
    return SC_OK;
}

static sc_status layer_norm_backward(sc_node *node, const sc_tensor *gy, sc_tensor *const *gin)
{
    sc_layer_norm_rows a = sc_layer_norm_rows_of(node);
    const sc_layer_norm_params *p = &node->params.layer_norm;
    const float *x = sc_tensor_f32(node->in[0]), *g = sc_tensor_f32(gy),
                *mean = sc_tensor_f32(node->saved[0]), *rstd = mean + a.rows;
    float *gx = gin[0] ? sc_tensor_f32(gin[0]) : NULL;
    float *gw = p->has_weight && gin[1] ? sc_tensor_f32(gin[1]) : NULL;
    float *gb = p->has_bias && gin[1 + p->has_weight] ? sc_tensor_f32(gin[1 + p->has_weight])
                                                      : NULL;
    if (a.rows == 0 || a.d == 0)
        return SC_OK;
    if (gw || gb)
        SC_TRY(layer_norm_param_grads(node->ctx, &a, x, g, mean, rstd, gw, gb));
    if (gx) {
        SC_LAUNCH(layer_norm_input_grad_kernel, sc_cuda_blocks(a.rows * 32), SC_CUDA_THREADS, 0,
                  sc_cuda_stream(node->ctx), x, g, a.w, mean, rstd, gx, a.rows, a.d);
        SC_CUDA_LAUNCHED("layer_norm_input_grad_kernel");
    }
    return SC_OK;
}

extern "C" const sc_kernel sc_cuda_kernel_batch_norm = {batch_norm_forward, batch_norm_backward, 0};
extern "C" const sc_kernel sc_cuda_kernel_layer_norm = {layer_norm_forward, layer_norm_backward, 0};
