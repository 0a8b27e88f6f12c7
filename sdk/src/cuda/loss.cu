/* CUDA kernels for softmax, log_softmax, cross-entropy, mse, sum and mean.
 * Row-wise ops give each row a block (of one warp for short rows).
 * Reductions to a scalar add per-block partial sums in double, then the
 * partials in a fixed order, so results do not depend on timing. */
#include <math.h>

#include "cuda_impl.h"
#include "device_math.cuh"

/* Blocks of a reduction's first pass, and threads of its last. */
enum { REDUCE_BLOCKS = 1024, FINISH_THREADS = 1024 };

/* The most threads a row block or a finishing block has: kernels launched
 * with that many are compiled to fit (at most 64 registers a thread). */
#define MAX_BLOCK_THREADS 1024

/* The block's threads over the elements of its row. */
#define ROW_STRIDE(j, c) for (int64_t j = threadIdx.x; j < (c); j += blockDim.x)

struct sum_op {
    template <typename T> __device__ T operator()(T a, T b) const { return a + b; }
};

/* fmaxf skips NaN, but a row with a NaN still comes out all NaN, as on the
 * CPU: the NaN reaches the sum of exponentials. */
struct max_op {
    __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

/* op of v over the block, in every thread; blockDim.x a multiple of 32, at
 * most 1024. The same order every time, so the result is deterministic. */
template <typename T, typename Op> static __device__ T block_reduce(T v, Op op)
{
    SC_SHARED(T, part, [32]);
    for (int s = 16; s > 0; s /= 2) /* butterfly: every lane gets the result */
        v = op(v, __shfl_xor_sync(0xffffffffu, v, s));
    __syncthreads(); /* a previous call's readers are done with part */
    if (threadIdx.x % 32 == 0)
        part[threadIdx.x / 32] = v;
    __syncthreads();
    v = part[0];
    for (unsigned w = 1; w < blockDim.x / 32; w++)
        v = op(v, part[w]);
    return v;
}

/* ---------------------------------------------------------------------
 * Rows: x [R, C] with C the last dimension, row i handled by block
 * i mod gridDim.x. */

static int64_t last_dim(const sc_tensor *t) { return t->shape[t->ndim - 1]; }

static int64_t row_count(const sc_tensor *t)
{
    int64_t c = last_dim(t);
    return c > 0 ? t->numel / c : 0;
}

/* Threads for rows of c: a warp for short rows, up to 1024 for long ones. */
static unsigned row_threads(int64_t c)
{
    return c >= MAX_BLOCK_THREADS ? MAX_BLOCK_THREADS : (unsigned)((c + 31) / 32 * 32);
}


typedef struct row_exp_sum {
    float max;
    float sum; /* of exp(x - max) */
} row_exp_sum;

/* The max of row x [c] and the sum of exp(x - max), in every thread; the
 * max keeps every exponent <= 0. */
static __device__ row_exp_sum row_exp(const float *x, int64_t c)
{
    row_exp_sum r = {-INFINITY, 0.0f};
    ROW_STRIDE(j, c) r.max = fmaxf(r.max, x[j]);
    r.max = block_reduce(r.max, max_op());
    ROW_STRIDE(j, c) r.sum += expf(x[j] - r.max);
    r.sum = block_reduce(r.sum, sum_op());
    return r;
}

/* y [rows, c] = exp(x) / sum_C exp(x), or with Log
 * (x - max) - log sum_C exp(x - max), exact for large x */
template <bool Log>
static __global__ void __launch_bounds__(MAX_BLOCK_THREADS)
    rows_forward_kernel(const float *x, float *y, int64_t rows, int64_t c)
{
    for (int64_t i = blockIdx.x; i < rows; i += gridDim.x) {
        const float *xi = x + i * c;
        float *yi = y + i * c;
        row_exp_sum r = row_exp(xi, c);
        float log_sum = logf(r.sum), inv = 1.0f / r.sum;
        ROW_STRIDE(j, c) yi[j] = Log ? (xi[j] - r.max) - log_sum : expf(xi[j] - r.max) * inv;
    }
}

/* gx [rows, c] += y (g - sum_C g y), or with Log (y = log_softmax)
 * g - exp(y) sum_C g */
template <bool Log>
static __global__ void __launch_bounds__(MAX_BLOCK_THREADS)
    rows_backward_kernel(const float *y, const float *g, float *gx, int64_t rows, int64_t c)
{
    for (int64_t i = blockIdx.x; i < rows; i += gridDim.x) {
        const float *yi = y + i * c, *gi = g + i * c;
        float *gxi = gx + i * c;
        float dot = 0.0f;
        ROW_STRIDE(j, c) dot += Log ? gi[j] : gi[j] * yi[j];
        dot = block_reduce(dot, sum_op());
        ROW_STRIDE(j, c) gxi[j] += Log ? gi[j] - expf(yi[j]) * dot : yi[j] * (gi[j] - dot);
    }
}

template <bool Log> static sc_status rows_forward(sc_node *node)
{
    int64_t rows = row_count(node->out), c = last_dim(node->out);
    if (rows == 0)
        return SC_OK;
    SC_LAUNCH(rows_forward_kernel<Log>, sc_cuda_grid(rows), row_threads(c), 0,
              sc_cuda_stream(node->ctx), sc_tensor_f32(node->in[0]), sc_tensor_f32(node->out), rows,
              c);
    SC_CUDA_LAUNCHED("rows_forward_kernel");
    return SC_OK;
}

template <bool Log>
static sc_status rows_backward(sc_node *node, const sc_tensor *gy, sc_tensor *const *gin)
{
    int64_t rows = row_count(gy), c = last_dim(gy);
    if (rows == 0)
        return SC_OK;
    SC_LAUNCH(rows_backward_kernel<Log>, sc_cuda_grid(rows), row_threads(c), 0,
              sc_cuda_stream(node->ctx), sc_tensor_f32(node->out), sc_tensor_f32(gy),
              sc_tensor_f32(gin[0]), rows, c);
    SC_CUDA_LAUNCHED("rows_backward_kernel");
    return SC_OK;
}

/* ---------------------------------------------------------------------
 * Reductions to a scalar: a first pass of at most REDUCE_BLOCKS blocks
 * leaves one partial sum (double) a block, a one-block pass adds them. */

/* part [gridDim.x] = per-block sums of x [n], or of (x - t)^2 when t is
 * given */
static __global__ void partial_sum_kernel(const float *x, const float *t, int64_t n,
                                          double *part)
{
    double acc = 0.0;
    GRID_STRIDE(i, n)
    {
        double d = t ? (double)x[i] - t[i] : x[i];
        acc += t ? d * d : d;
    }
    acc = block_reduce(acc, sum_op());
    if (threadIdx.x == 0)
        part[blockIdx.x] = acc;
}

/* y [] = sum of part [n] / div, by one block (n = 0: 0 / div) */
static __global__ void __launch_bounds__(MAX_BLOCK_THREADS)
    finish_sum_kernel(const double *part, int64_t n, double div, float *y)
{
    double acc = 0.0;
    ROW_STRIDE(i, n) acc += part[i];
    acc = block_reduce(acc, sum_op());
    if (threadIdx.x == 0)
        *y = (float)(acc / div);
}

/* node's output [] = (sum of x [n], or of (x - t)^2) / div */
static sc_status reduce_sum(sc_node *node, const float *x, const float *t, int64_t n,
                            double div)
{
    unsigned blocks = sc_cuda_blocks(n), cap = REDUCE_BLOCKS;
    blocks = blocks < cap ? blocks : cap;
    double *part = (double *)sc_ctx_alloc_data(node->ctx, blocks * sizeof *part);
    if (!part)
        return SC_ERR_NOMEM;
    cudaStream_t st = sc_cuda_stream(node->ctx);
    SC_LAUNCH(partial_sum_kernel, blocks, SC_CUDA_THREADS, 0, st, x, t, n, part);
    SC_CUDA_LAUNCHED("partial_sum_kernel");
    SC_LAUNCH(finish_sum_kernel, 1, FINISH_THREADS, 0, st, part, blocks, div,
              sc_tensor_f32(node->out));
    SC_CUDA_LAUNCHED("finish_sum_kernel");
    return SC_OK;
}

/* ---------------------------------------------------------------------
 * Cross-entropy of logits z [N, C] against class indices t [N], with label
 * smoothing s: the target distribution is q = (1 - s) onehot(t) + s / C, and
 * loss_n = sum_c q_c (lse_n - z_nc) = lse_n - (1 - s) z_nt - s/C sum_c z_nc.
 * Forward saves the probabilities p [N, C] for backward:
 * gz = g / N (p - q). Against class probabilities r [N, C] (soft targets),
 * q = (1 - s) r + s / C, loss_n = sum_c q_c (lse_n - z_nc), and
 * gz = g / N (p sum_c q_c - q), gr = g / N (1 - s) (lse - z); forward also
 * saves lse [N] and sum_c q_c [N] (sdk/src/cpu/loss.c has the same).
 *
 * The CPU checks that every target is in 0..C-1 and fails otherwise; a
 * kernel cannot fail the call without waiting for the GPU, so here a
 * target out of range makes its row's loss, hence the loss, NaN, and
 * backward leaves out its one-hot term. Neither reads or writes outside
 * the tensors. */

/* Element i of class indices t (i32, i64 or u8). */
static __device__ int64_t target_at(const void *t, sc_dtype dtype, int64_t i)
{
    switch (dtype) {
    case SC_I32: return ((const int32_t *)t)[i];
    case SC_I64: return ((const int64_t *)t)[i];
    default: return ((const uint8_t *)t)[i];
    }
}

/* p [n, c] = softmax of z's rows; row_loss [n] as above, in double */
static __global__ void __launch_bounds__(MAX_BLOCK_THREADS)
    cross_entropy_forward_kernel(const float *z, const void *t, sc_dtype tdtype, float s,
                                 int64_t n, int64_t c, float *p, double *row_loss)
{
    for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
        const float *zi = z + i * c;
        float *pi = p + i * c;
        row_exp_sum r = row_exp(zi, c);
        float inv = 1.0f / r.sum, zsum = 0.0f;
        ROW_STRIDE(j, c)
        {
            pi[j] = expf(zi[j] - r.max) * inv;
            zsum += zi[j];
        }
        zsum = block_reduce(zsum, sum_op());
        if (threadIdx.x == 0) {
            int64_t k = target_at(t, tdtype, i);
            double zk = k >= 0 && k < c ? (double)zi[k] : NAN;
            double lse = (double)r.max + log((double)r.sum);
            row_loss[i] = lse - (1.0 - s) * zk - (double)s / c * zsum;
        }
    }
}

/* gz [n, c] += k (p - s / c), less k (1 - s) at the target, k = g / n */
static __global__ void cross_entropy_backward_kernel(const float *p, const void *t,
                                                     sc_dtype tdtype, float s, int64_t n,
                                                     int64_t c, const float *gl, float *gz)
{
    float k = *gl / (float)n, off = s / (float)c;
    GRID_STRIDE(e, n * c)
    {
        float v = gz[e] + k * (p[e] - off);
        if (e % c == target_at(t, tdtype, e / c))
            v -= k * (1.0f - s);
        gz[e] = v;
    }
}

/* Element e of soft targets r with smoothing s over c classes: in f32, as
 * PyTorch's r * (1 - s) + s / C. */
static __device__ float smoothed(const float *r, int64_t e, float s, int64_t c)
{
    return r[e] * (1.0f - s) + s / (float)c;
}

/* p [n, c] = softmax of z's rows; row_loss [n] against soft targets r
 * [n, c], in double; lse [n] and qsum [n] = sum_c q_c for backward */
static __global__ void __launch_bounds__(MAX_BLOCK_THREADS)
    soft_cross_entropy_forward_kernel(const float *z, const float *r, float s, int64_t n,
                                      int64_t c, float *p, double *row_loss, float *lse_out,
                                      float *qsum)
{
    for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
        const float *zi = z + i * c, *ri = r + i * c;
        float *pi = p + i * c;
        row_exp_sum rs = row_exp(zi, c);
        float inv = 1.0f / rs.sum, qs = 0.0f;
        double lse = (double)rs.max + log((double)rs.sum), loss = 0.0;
        ROW_STRIDE(j, c)
        {
            float q = smoothed(ri, j, s, c);
            pi[j] = expf(zi[j] - rs.max) * inv;
            loss += q * (lse - zi[j]);
            qs += q;
        }
        loss = block_reduce(loss, sum_op());
        qs = block_reduce(qs, sum_op());
        if (threadIdx.x == 0) {
            row_loss[i] = loss;
            lse_out[i] = (float)lse;
            qsum[i] = qs;
        }
    }
}

/* gz [n, c] += k (p qsum - q) and gr [n, c] += k (1 - s) (lse - z), either
 * NULL, k = g / n */
static __global__ void soft_cross_entropy_backward_kernel(const float *p, const float *lse,
                                                          const float *qsum, const float *z,
                                                          const float *r, float s, int64_t n,
                                                          int64_t c, const float *gl,
                                                          float *gz, float *gr)
{
    float k = *gl / (float)n;
    GRID_STRIDE(e, n * c)
    {
        int64_t i = e / c;
        if (gz)
            gz[e] += k * (p[e] * qsum[i] - smoothed(r, e, s, c));
        if (gr)
            gr[e] += k * (1.0f - s) * (lse[i] - z[e]);
    }
}

/* Queues the forward kernel of soft or index targets; n > 0. */
static sc_status launch_forward(sc_node *node, float *p, double *row_loss)
{
    const sc_tensor *zt = node->in[0], *t = node->in[1];
    int64_t n = zt->shape[0], c = zt->shape[1]; /* c >= 1 */
    float s = node->params.cross_entropy.label_smoothing;
    cudaStream_t st = sc_cuda_stream(node->ctx);
    if (t->dtype != SC_F32) {
        SC_LAUNCH(cross_entropy_forward_kernel, sc_cuda_grid(n), row_threads(c), 0, st,
                  sc_tensor_f32(zt), t->data, t->dtype, s, n, c, p, row_loss);
        SC_CUDA_LAUNCHED("cross_entropy_forward_kernel");
        return SC_OK;
    }
    sc_tensor *lse = sc_tensor_new(node->ctx, SC_F32, 1, &n);
    sc_tensor *qsum = sc_tensor_new(node->ctx, SC_F32, 1, &n);
    if (!lse || !qsum)
        return SC_ERR_NOMEM;
    node->saved[1] = lse;
    node->saved[2] = qsum;
    SC_LAUNCH(soft_cross_entropy_forward_kernel, sc_cuda_grid(n), row_threads(c), 0, st,
              sc_tensor_f32(zt), sc_tensor_f32(t), s, n, c, p, row_loss, sc_tensor_f32(lse),
              sc_tensor_f32(qsum));
    SC_CUDA_LAUNCHED("soft_cross_entropy_forward_kernel");
    return SC_OK;
}

static sc_status cross_entropy_forward(sc_node *node)
{
    const sc_tensor *zt = node->in[0];
    int64_t n = zt->shape[0];
    sc_tensor *pt = sc_tensor_new(node->ctx, SC_F32, 2, zt->shape);
    double *row_loss = (double *)sc_ctx_alloc_data(node->ctx, (size_t)n * sizeof *row_loss);
    if (!pt || !row_loss)
        return SC_ERR_NOMEM;
    node->saved[0] = pt;
    cudaStream_t st = sc_cuda_stream(node->ctx);
    if (n > 0)
        SC_TRY(launch_forward(node, sc_tensor_f32(pt), row_loss));
    /* N = 0: 0 / 0, NaN, as on the CPU */
    SC_LAUNCH(finish_sum_kernel, 1, FINISH_THREADS, 0, st, row_loss, n, (double)n,
              sc_tensor_f32(node->out));
    SC_CUDA_LAUNCHED("finish_sum_kernel");
    return SC_OK;
}

static sc_status soft_backward(sc_node *node, const sc_tensor *gl, sc_tensor *const *gin)
{
    int64_t n = node->in[0]->shape[0], c = node->in[0]->shape[1];
    SC_LAUNCH(soft_cross_entropy_backward_kernel, sc_cuda_blocks(n * c), SC_CUDA_THREADS, 0,
              sc_cuda_stream(node->ctx), sc_tensor_f32(node->saved[0]),
              sc_tensor_f32(node->saved[1]), sc_tensor_f32(node->saved[2]),
              sc_tensor_f32(node->in[0]), sc_tensor_f32(node->in[1]),
              node->params.cross_entropy.label_smoothing, n, c, sc_tensor_f32(gl),
              gin[0] ? sc_tensor_f32(gin[0]) : NULL, gin[1] ? sc_tensor_f32(gin[1]) : NULL);
    SC_CUDA_LAUNCHED("soft_cross_entropy_backward_kernel");
    return SC_OK;
}

static sc_status cross_entropy_backward(sc_node *node, const sc_tensor *gl,
                                        sc_tensor *const *gin)
{
    const sc_tensor *t = node->in[1];
    int64_t n = node->in[0]->shape[0], c = node->in[0]->shape[1];
    if (n == 0)
        return SC_OK;
    if (t->dtype == SC_F32)
        return soft_backward(node, gl, gin);
    if (!gin[0])
        return SC_OK;
    SC_LAUNCH(cross_entropy_backward_kernel, sc_cuda_blocks(n * c), SC_CUDA_THREADS, 0,
              sc_cuda_stream(node->ctx), sc_tensor_f32(node->saved[0]), t->data, t->dtype,
              node->params.cross_entropy.label_smoothing, n, c, sc_tensor_f32(gl),
              sc_tensor_f32(gin[0]));
    SC_CUDA_LAUNCHED("cross_entropy_backward_kernel");
    return SC_OK;
}

/* ---------------------------------------------------------------------
 * mse, sum and mean. The incoming gradient g is the scalar gl [] on the
 * device, read by the kernels. */

/* gp [n] += 2 g / n (p - t); gt [n] -= the same (either may be NULL, or
 * both the same tensor) */
static __global__ void mse_backward_kernel(const float *p, const float *t, const float *gl,
                                           float *gp, float *gt, int64_t n)
{
    float k = 2.0f * *gl / (float)n;
    GRID_STRIDE(i, n)
    {
        float d = k * (p[i] - t[i]);
        if (gp)
            gp[i] += d;
        if (gt)
            gt[i] -= d;
    }
}

/* gx [n] += g / div */
static __global__ void add_scalar_kernel(float *gx, const float *gl, float div, int64_t n)
{
    float k = *gl / div;
    GRID_STRIDE(i, n) gx[i] += k;
}

/* loss = mean (pred - target)^2 (empty: NaN) */
static sc_status mse_forward(sc_node *node)
{
    const sc_tensor *p = node->in[0];
    return reduce_sum(node, sc_tensor_f32(p), sc_tensor_f32(node->in[1]), p->numel,
                      (double)p->numel);
}

static sc_status mse_backward(sc_node *node, const sc_tensor *gl, sc_tensor *const *gin)
{
    int64_t n = node->in[0]->numel;
    SC_LAUNCH(mse_backward_kernel, sc_cuda_blocks(n), SC_CUDA_THREADS, 0, sc_cuda_stream(node->ctx),
              sc_tensor_f32(node->in[0]), sc_tensor_f32(node->in[1]), sc_tensor_f32(gl),
              gin[0] ? sc_tensor_f32(gin[0]) : NULL, gin[1] ? sc_tensor_f32(gin[1]) : NULL, n);
    SC_CUDA_LAUNCHED("mse_backward_kernel");
    return SC_OK;
}

static sc_status sum_forward(sc_node *node)
{
    const sc_tensor *x = node->in[0];
    return reduce_sum(node, sc_tensor_f32(x), NULL, x->numel, 1.0);
}

/* mean: div = n (empty: NaN) */
static sc_status mean_forward(sc_node *node)
{
    const sc_tensor *x = node->in[0];
    return reduce_sum(node, sc_tensor_f32(x), NULL, x->numel, (double)x->numel);
}

/* gx += g / div: sum's div is 1, mean's the element count */
static sc_status add_scalar(sc_node *node, const sc_tensor *gl, sc_tensor *gx, float div)
{
    int64_t n = gx->numel;
    SC_LAUNCH(add_scalar_kernel, sc_cuda_blocks(n), SC_CUDA_THREADS, 0, sc_cuda_stream(node->ctx),
              sc_tensor_f32(gx), sc_tensor_f32(gl), div, n);
    SC_CUDA_LAUNCHED("add_scalar_kernel");
    return SC_OK;
}

static sc_status sum_backward(sc_node *node, const sc_tensor *gl, sc_tensor *const *gin)
{
    return add_scalar(node, gl, gin[0], 1.0f);
}

static sc_status mean_backward(sc_node *node, const sc_tensor *gl, sc_tensor *const *gin)
{
    return add_scalar(node, gl, gin[0], (float)gin[0]->numel);
}

extern "C" const sc_kernel sc_cuda_kernel_softmax = {rows_forward<false>, rows_backward<false>, 0};
extern "C" const sc_kernel sc_cuda_kernel_log_softmax = {rows_forward<true>,
                                                         rows_backward<true>, 0};
extern "C" const sc_kernel sc_cuda_kernel_cross_entropy = {cross_entropy_forward,
                                                           cross_entropy_backward, 0};
extern "C" const sc_kernel sc_cuda_kernel_mse = {mse_forward, mse_backward, 0};
extern "C" const sc_kernel sc_cuda_kernel_sum = {sum_forward, sum_backward, 0};
extern "C" const sc_kernel sc_cuda_kernel_mean = {mean_forward, mean_backward, 0};
