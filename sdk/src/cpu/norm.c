/* CPU kernels for batch and layer normalisation.
 *
 * Batch norm runs its channels in parallel. A channel's values (N rows of
 * H W) are read once from memory for the statistics and again, from cache,
 * to normalise; backward likewise makes one reduction pass and one pass
 * writing the input gradient. Forward saves each channel's mean and
 * 1 / sqrt(var + eps), from the batch in training mode and from the running
 * statistics in eval mode, so that one backward serves both.
 *
 * Layer norm runs its rows in parallel, and its weight and bias gradients
 * by blocks of columns. Sums go through LANES partial accumulators (which
 * vectorise), in a fixed order: results do not depend on the thread count. */
#include <math.h>

#include "cpu.h"

enum { COL_BLOCK = 256 };

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* Over i < len: s[0] += sum (u_i - ku) w_i and s[1] += sum (u_i - ku) w_i
 * (v_i - kv), with w = 1 when NULL. Shifting by a value near the mean keeps
 * a sum of squares exact enough for the variance. The sums run in vector
 * lanes (a fixed order for a given build). */
ALWAYS_INLINE void shifted_sums(const float *restrict u, float ku, const float *restrict v,
                                float kv, const float *restrict w, int64_t len, double s[2])
{
    float a = 0.0f, b = 0.0f;
    if (w) {
#pragma omp simd reduction(+ : a, b)
        for (int64_t i = 0; i < len; i++) {
            float d = (u[i] - ku) * w[i];
            a += d;
            b += d * (v[i] - kv);
        }
    } else {
#pragma omp simd reduction(+ : a, b)
        for (int64_t i = 0; i < len; i++) {
            float d = u[i] - ku;
            a += d;
            b += d * (v[i] - kv);
        }
    }
    s[0] += a;
    s[1] += b;
}

/* Mean and biased variance of n rows of len values, rows `stride` apart. */
static void row_stats(const float *x, int64_t n, int64_t stride, int64_t len, double *mean,
                      double *var)
{
    double s[2] = {0, 0}, m = (double)(n * len);
    float shift = x[0];
    for (int64_t i = 0; i < n; i++)
        shifted_sums(x + i * stride, shift, x + i * stride, shift, NULL, len, s);
    *mean = shift + s[0] / m;
    *var = fmax(s[1] / m - (s[0] / m) * (s[0] / m), 0.0);
}

/* y [len] = (x - k) a + b */
static void affine_row(float *restrict y, const float *restrict x, float k, float a, float b,
                       int64_t len)
{
#pragma omp simd
    for (int64_t i = 0; i < len; i++)
        y[i] = (x[i] - k) * a + b;
}

/* ---------------------------------------------------------------------
 * Batch norm: x [N, C, S] with S the product of the spatial dimensions
 * (1 for [N, C]); channel ch's rows are x + (n C + ch) S. */

typedef struct bn_geom {
    int64_t n, c, s;
} bn_geom;

static bn_geom bn_geom_of(const sc_tensor *x)
{
    return (bn_geom){x->shape[0], x->shape[1], x->numel / (x->shape[0] * x->shape[1])};
}

/* Batch statistics of channel ch, folded into the running ones with
 * PyTorch's rule (the unbiased variance); returns mean and 1/sqrt(var + eps). */
static void bn_batch_stats(const sc_node *node, bn_geom g, int64_t ch, float *mean,
                           float *rstd)
{
    const sc_batch_norm_params *p = &node->params.batch_norm;
    double mu, var, m = (double)(g.n * g.s);
    row_stats(sc_tensor_f32(node->in[0]) + ch * g.s, g.n, g.c * g.s, g.s, &mu, &var);
    float *rm = sc_tensor_f32(node->in[3]) + ch, *rv = sc_tensor_f32(node->in[4]) + ch;
    *rm = (float)((1.0 - p->momentum) * *rm + p->momentum * mu);
    *rv = (float)((1.0 - p->momentum) * *rv + p->momentum * var * m / (m - 1.0));
    *mean = (float)mu;
    *rstd = (float)(1.0 / sqrt(var + p->eps));
}

/* y = (x - mean) rstd weight + bias; saved[0] [2, C] holds mean and rstd. */
static sc_status batch_norm_forward(sc_node *node)
{
    const sc_batch_norm_params *p = &node->params.batch_norm;
    sc_tensor *stats = sc_tensor_new(node->ctx, SC_F32, 2, (int64_t[]){2, node->in[0]->shape[1]});
    if (!stats)
        return SC_ERR_NOMEM;
    node->saved[0] = stats;
    bn_geom g = bn_geom_of(node->in[0]);
    const float *x = sc_tensor_f32(node->in[0]), *w = sc_tensor_f32(node->in[1]),
                *b = sc_tensor_f32(node->in[2]), *rm = sc_tensor_f32(node->in[3]),
                *rv = sc_tensor_f32(node->in[4]);
    float *y = sc_tensor_f32(node->out), *mean = sc_tensor_f32(stats), *rstd = mean + g.c;
#pragma omp parallel for schedule(static) if (node->out->numel > SC_CPU_PAR_MIN)
    for (int64_t ch = 0; ch < g.c; ch++) {
        if (p->training) {
            bn_batch_stats(node, g, ch, &mean[ch], &rstd[ch]);
        } else {
            mean[ch] = rm[ch];
            rstd[ch] = (float)(1.0 / sqrt((double)rv[ch] + p->eps));
        }
        for (int64_t i = 0; i < g.n; i++) {
            int64_t at = (i * g.c + ch) * g.s;
            affine_row(y + at, x + at, mean[ch], rstd[ch] * w[ch], b[ch], g.s);
        }
    }
    return SC_OK;
}

/* With xh = (x - mean) rstd, M = N S values per channel:
 *   gbias += sum g;  gweight += sum g xh;
 *   gx += weight rstd (g - sum g / M - xh sum g xh / M)   (training)
 *   gx += weight rstd g                                    (eval: constant stats) */
static sc_status batch_norm_backward(sc_node *node, const sc_tensor *gy, sc_tensor *const *gin)
{
    bool training = node->params.batch_norm.training;
    bn_geom g = bn_geom_of(node->in[0]);
    double m = (double)(g.n * g.s);
    const float *x = sc_tensor_f32(node->in[0]), *w = sc_tensor_f32(node->in[1]),
                *gyd = sc_tensor_f32(gy), *mean = sc_tensor_f32(node->saved[0]),
                *rstd = mean + g.c;
    float *gx = gin[0] ? sc_tensor_f32(gin[0]) : NULL;
    float *gw = gin[1] ? sc_tensor_f32(gin[1]) : NULL, *gb = gin[2] ? sc_tensor_f32(gin[2]) : NULL;
    bool sums = gw || gb || (gx && training);
#pragma omp parallel for schedule(static) if (gy->numel > SC_CPU_PAR_MIN)
    for (int64_t ch = 0; ch < g.c; ch++) {
        double s[2] = {0, 0}; /* sum g, sum g (x - mean) */
        for (int64_t i = 0; sums && i < g.n; i++) {
            int64_t at = (i * g.c + ch) * g.s;
            shifted_sums(gyd + at, 0.0f, x + at, mean[ch], NULL, g.s, s);
        }
        double r = rstd[ch], sum_gxh = s[1] * r;
        if (gb)
            gb[ch] += (float)s[0];
        if (gw)
            gw[ch] += (float)sum_gxh;
        if (!gx)
            continue;
        /* gx += a g + c (x - mean) + d */
        double a = w[ch] * r, c = training ? -a * r * sum_gxh / m : 0.0;
        float fa = (float)a, fc = (float)c, fd = training ? (float)(-a * s[0] / m) : 0.0f;
        for (int64_t i = 0; i < g.n; i++) {
            int64_t at = (i * g.c + ch) * g.s;
            float *gxi = gx + at;
            const float *gi = gyd + at, *xi = x + at;
            float mu = mean[ch];
#pragma omp simd
            for (int64_t k = 0; k < g.s; k++)
                gxi[k] += fa * gi[k] + fc * (xi[k] - mu) + fd;
        }
    }
    return SC_OK;
}

/* ---------------------------------------------------------------------
 * Layer norm: x [R, D], D the last dimension. */

typedef struct ln_args {
    int64_t rows, d;
    const float *w, *b; /* NULL when absent */
} ln_args;

static ln_args ln_args_of(const sc_node *node)
{
    const sc_tensor *x = node->in[0];
    const sc_layer_norm_params *p = &node->params.layer_norm;
    int64_t d = x->shape[x->ndim - 1];
    return (ln_args){d > 0 ? x->numel / d : 0, d,
                     p->has_weight ? sc_tensor_f32(node->in[1]) : NULL,
                     p->has_bias ? sc_tensor_f32(node->in[1 + p->has_weight]) : NULL};
}

/* y = (x - mean) rstd weight + bias per row; saved[0] [2, R] holds each
 * row's mean and rstd. */
static sc_status layer_norm_forward(sc_node *node)
{
    ln_args a = ln_args_of(node);
    sc_tensor *stats = sc_tensor_new(node->ctx, SC_F32, 2, (int64_t[]){2, a.rows});
    if (!stats)
        return SC_ERR_NOMEM;
    node->saved[0] = stats;
    float eps = node->params.layer_norm.eps;
    const float *x = sc_tensor_f32(node->in[0]);
    float *y = sc_tensor_f32(node->out), *mean = sc_tensor_f32(stats), *rstd = mean + a.rows;
#pragma omp parallel for schedule(static) if (node->out->numel > SC_CPU_PAR_MIN)
    for (int64_t r = 0; r < a.rows; r++) {
        const float *xr = x + r * a.d;
        float *yr = y + r * a.d;
        double mu, var;
        row_stats(xr, 1, a.d, a.d, &mu, &var);
        float m = mean[r] = (float)mu, rs = rstd[r] = (float)(1.0 / sqrt(var + eps));
        for (int64_t j = 0; j < a.d; j++)
            yr[j] = (xr[j] - m) * rs * (a.w ? a.w[j] : 1.0f) + (a.b ? a.b[j] : 0.0f);
    }
    return SC_OK;
}

/* gweight [D] += sum_r g xh;  gbias [D] += sum_r g; by column blocks, rows in order. */
static void layer_norm_param_grads(const ln_args *a, const float *x, const float *g,
                                   const float *mean, const float *rstd, float *gw, float *gb)
{
    int64_t blocks = (a->d + COL_BLOCK - 1) / COL_BLOCK;
#pragma omp parallel for schedule(static) if (a->rows * a->d > SC_CPU_PAR_MIN)
    for (int64_t blk = 0; blk < blocks; blk++) {
        int64_t j0 = blk * COL_BLOCK, j1 = j0 + COL_BLOCK < a->d ? j0 + COL_BLOCK : a->d;
        for (int64_t r = 0; r < a->rows; r++) {
            const float *xr = x + r * a->d, *gr = g + r * a->d;
            for (int64_t j = j0; gw && j < j1; j++)
                gw[j] += gr[j] * (xr[j] - mean[r]) * rstd[r];
            for (int64_t j = j0; gb && j < j1; j++)
                gb[j] += gr[j];
        }
    }
}

/* gx [R, D] += rstd (gxh - sum gxh / D - xh sum gxh xh / D) per row, with
 * gxh = g weight and xh = (x - mean) rstd */
static void layer_norm_input_grad(const ln_args *a, const float *x, const float *g,
                                  const float *mean, const float *rstd, float *gx)
{
#pragma omp parallel for schedule(static) if (a->rows * a->d > SC_CPU_PAR_MIN)
    for (int64_t r = 0; r < a->rows; r++) {
        const float *xr = x + r * a->d, *gr = g + r * a->d;
        float *gxr = gx + r * a->d;
        double s[2] = {0, 0}; /* sum gxh, sum gxh (x - mean) */
        shifted_sums(gr, 0.0f, xr, mean[r], a->w, a->d, s);
        double rs = rstd[r];
        float fa = (float)rs, fc = (float)(-rs * rs * rs * s[1] / (double)a->d),
              fd = (float)(-rs * s[0] / (double)a->d), m = mean[r];
        for (int64_t j = 0; j < a->d; j++)
            gxr[j] += fa * gr[j] * (a->w ? a->w[j] : 1.0f) + fc * (xr[j] - m) + fd;
    }
}

static sc_status layer_norm_backward(sc_node *node, const sc_tensor *gy, sc_tensor *const *gin)
{
    ln_args a = ln_args_of(node);
    const sc_layer_norm_params *p = &node->params.layer_norm;
    const float *x = sc_tensor_f32(node->in[0]), *g = sc_tensor_f32(gy),
                *mean = sc_tensor_f32(node->saved[0]), *rstd = mean + a.rows;
    float *gx = gin[0] ? sc_tensor_f32(gin[0]) : NULL;
    float *gw = p->has_weight && gin[1] ? sc_tensor_f32(gin[1]) : NULL;
    float *gb = p->has_bias && gin[1 + p->has_weight] ? sc_tensor_f32(gin[1 + p->has_weight])
                                                      : NULL;
    if (gw || gb)
        layer_norm_param_grads(&a, x, g, mean, rstd, gw, gb);
    if (gx)
        layer_norm_input_grad(&a, x, g, mean, rstd, gx);
    return SC_OK;
}

const sc_kernel sc_cpu_kernel_batch_norm = {batch_norm_forward, batch_norm_backward};
const sc_kernel sc_cpu_kernel_layer_norm = {layer_norm_forward, layer_norm_backward};
