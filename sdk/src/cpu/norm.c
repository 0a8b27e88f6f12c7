/* CPU kernels for batch and layer normalisation.
 *
 * Batch norm makes two passes over memory each way: forward, the channel
 * sums and then y; backward, the channel sums of g and g x and then gx.
 * Forward saves each channel's mean and 1 / sqrt(var + eps), from the
 * batch in training mode and from the running statistics in eval mode, so
 * that one backward serves both. With a relu fused in (sc_batch_norm_relu),
 * forward applies it to each row while the row is in cache, and backward
 * masks each row of the output's gradient as it comes to it, by the relu's
 * input found again from x. With max pooling fused in too
 * (sc_batch_norm_max_pool2d), forward pools each row (an image's plane) in
 * cache and saves where the windows' maxima are and where the relu blocks
 * (the pooling's record, cpu.h), and backward spreads each row's gradient
 * back from the pooled one by that record alone.
 *
 * Layer norm runs its rows in parallel, and its weight and bias gradients
 * by blocks of columns. Each sum has one owner and a fixed order (vector
 * lanes within a row, then rows or blocks in order, in double): results do
 * not depend on the thread count. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "cpu.h"

enum { COL_BLOCK = 256 };

/* Batch norm's output before its relu: (x - k) a + b. One expression for
 * forward's output and backward's relu mask, so that both round alike. */
ALWAYS_INLINE float bn_affine(float x, float k, float a, float b) { return (x - k) * a + b; }

/* How backward finds, row by row, the gradient of batch norm's own output
 * from the op's output gradient gy. Pooled, it spreads the pooled
 * gradient back through the pooling's record, which holds a relu's mask
 * on the pooled side too (sc_cpu_max_pool_plane_grad). Not
 * pooled, a relu masks gy by its input, found again from x with the mean,
 * scale (rstd weight) and bias forward applied: backward reads x anyway,
 * and the relu's output would be a stream over memory more in each of its
 * two passes. */
typedef struct bn_grad {
    const float *gy;           /* [N, C, S], or [N, C, OH, OW] when pooled */
    const void *arg;           /* the pooling's record [N, C, OH, OW]; NULL if none */
    sc_cpu_pool_geom pool;     /* with arg */
    const float *mean, *bias;  /* [C] */
    const float *scale;        /* [C], an unpooled relu's; else NULL */
    float *rows;               /* per-thread scratch rows, S floats each */
} bn_grad;

/* own [len] = g [len] through the relu, whose input is batch norm's output
 * of x [len] in channel ch. */
SC_CPU_CLONES
static void mask_relu(float *restrict own, const float *restrict g, const float *restrict x,
                      const bn_grad *v, int64_t ch, int64_t len)
{
    float k = v->mean[ch], a = v->scale[ch], b = v->bias[ch];
#pragma omp simd
    for (int64_t i = 0; i < len; i++)
        own[i] = sc_cpu_relu_grad(bn_affine(x[i], k, a, b), g[i]);
}

/* Row `row` (channel ch, S = len values) of the gradient of batch norm's
 * output, x [len] being that row of its input. Rows are rebuilt into the
 * calling thread's scratch row, small enough to stay in cache, by the
 * same loops as the separate ops' backward (sc_cpu_max_pool_plane_grad,
 * sc_cpu_relu_grad): the same bits, which a reduction that masked or
 * gathered as it summed would not promise. */
static const float *grad_row(const bn_grad *v, const float *restrict x, int64_t row, int64_t ch,
                             int64_t len)
{
    float *own = v->rows + omp_get_thread_num() * len;
    if (v->arg) {
        int64_t out = v->pool.oh * v->pool.ow;
        sc_cpu_max_pool_plane_grad(&v->pool, v->gy + row * out,
                                   sc_cpu_pool_record_plane(&v->pool, v->arg, row), own, true);
        return own;
    }
    if (!v->scale)
        return v->gy + row * len;
    mask_relu(own, v->gy + row * len, x, v, ch, len);
    return own;
}

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

/* Mean and biased variance of len values. */
static void row_stats(const float *x, int64_t len, double *mean, double *var)
{
    double s[2] = {0, 0};
    shifted_sums(x, x[0], x, x[0], NULL, len, s);
    *mean = x[0] + s[0] / (double)len;
    *var = fmax(s[1] / (double)len - (s[0] / (double)len) * (s[0] / (double)len), 0.0);
}

/* y [len] = (x - k) a + b, or relu of it */
SC_CPU_CLONES
static void affine_row(float *restrict y, const float *restrict x, float k, float a, float b,
                       bool relu, int64_t len)
{
    if (relu) {
#pragma omp simd
        for (int64_t i = 0; i < len; i++)
            y[i] = sc_cpu_relu(bn_affine(x[i], k, a, b));
    } else {
#pragma omp simd
        for (int64_t i = 0; i < len; i++)
            y[i] = bn_affine(x[i], k, a, b);
    }
}

/* ---------------------------------------------------------------------
 * Batch norm: x [N, C, S] with S the product of the spatial dimensions
 * (1 for [N, C]); row (n, ch) is x + (n C + ch) S. Every pass streams the
 * rows in memory order, in parallel: the per-channel sums go by blocks of
 * BLOCK images, whose partial sums are added in block order. (Walking one
 * channel at a time instead jumps between rows far apart in memory: two
 * to three times slower on the cnn's first batch norm.) */

enum { BLOCK = 4 };

typedef struct bn_geom {
    int64_t n, c, s;
} bn_geom;

static bn_geom bn_geom_of(const sc_tensor *x)
{
    int64_t rows = x->shape[0] * x->shape[1];
    return (bn_geom){x->shape[0], x->shape[1], rows > 0 ? x->numel / rows : 0};
}

/* s [C, 2] = per channel, over all its rows, the shifted sums of u and of
 * u (x - k[ch]): u = x - k[ch] when grad is NULL, else the gradient of
 * batch norm's output (grad_row). */
static sc_status bn_channel_sums(sc_ctx *ctx, bn_geom g, const bn_grad *grad, const float *x,
                                 const float *k, double *s)
{
    int64_t blocks = (g.n + BLOCK - 1) / BLOCK;
    double *part = sc_ctx_alloc(ctx, (size_t)(blocks * g.c * 2) * sizeof *part);
    if (!part)
        return SC_ERR_NOMEM;
    memset(part, 0, (size_t)(blocks * g.c * 2) * sizeof *part);
#pragma omp parallel for schedule(static) if (g.n * g.c * g.s > SC_CPU_PAR_MIN)
    for (int64_t b = 0; b < blocks; b++)
        for (int64_t n = b * BLOCK; n < g.n && n < (b + 1) * BLOCK; n++)
            for (int64_t ch = 0; ch < g.c; ch++) {
                int64_t row = n * g.c + ch;
                const float *xr = x + row * g.s;
                const float *u = grad ? grad_row(grad, xr, row, ch, g.s) : xr;
                shifted_sums(u, grad ? 0.0f : k[ch], xr, k[ch], NULL, g.s,
                             part + (b * g.c + ch) * 2);
            }
    memset(s, 0, (size_t)(g.c * 2) * sizeof *s);
    for (int64_t b = 0; b < blocks; b++)
        for (int64_t i = 0; i < 2 * g.c; i++)
            s[i] += part[b * 2 * g.c + i];
    return SC_OK;
}

/* mean and rstd [C] of the batch, folded into the running statistics with
 * PyTorch's rule (the unbiased variance). */
static sc_status bn_batch_stats(const sc_node *node, bn_geom g, float *mean, float *rstd)
{
    const sc_batch_norm_params *p = &node->params.batch_norm;
    const float *x = sc_tensor_f32(node->in[0]);
    float *rm = sc_tensor_f32(node->in[3]), *rv = sc_tensor_f32(node->in[4]);
    double *s = sc_ctx_alloc(node->ctx, (size_t)(2 * g.c) * sizeof *s), m = (double)(g.n * g.s);
    if (!s)
        return SC_ERR_NOMEM;
    for (int64_t ch = 0; ch < g.c; ch++) /* shift by a value of the channel */
        mean[ch] = x[ch * g.s];
    SC_TRY(bn_channel_sums(node->ctx, g, NULL, x, mean, s));
    for (int64_t ch = 0; ch < g.c; ch++) {
        double d = s[2 * ch] / m, mu = mean[ch] + d, var = fmax(s[2 * ch + 1] / m - d * d, 0.0);
        rm[ch] = (float)((1.0 - p->momentum) * rm[ch] + p->momentum * mu);
        rv[ch] = (float)((1.0 - p->momentum) * rv[ch] + p->momentum * var * m / (m - 1.0));
        mean[ch] = (float)mu;
        rstd[ch] = (float)(1.0 / sqrt(var + p->eps));
    }
    return SC_OK;
}

/* Per-thread scratch rows of S floats each, from the step arena. */
static float *scratch_rows(sc_ctx *ctx, bn_geom g)
{
    return sc_ctx_alloc(ctx, (size_t)(omp_get_max_threads() * g.s) * sizeof(float));
}

/* For the fused pooling of geometry pool: saved[1] [N, C, OH, OW], its
 * record, *arg its data and *rows the scratch rows that hold the planes
 * before pooling. */
static sc_status bn_pool_prepare(sc_node *node, bn_geom g, const sc_cpu_pool_geom *pool,
                                 void **arg, float **rows)
{
    sc_tensor *args = sc_cpu_pool_record_new(node->ctx, pool, node->out);
    *rows = scratch_rows(node->ctx, g);
    if (!args || !*rows)
        return SC_ERR_NOMEM;
    node->saved[1] = args;
    *arg = args->data;
    return SC_OK;
}

/* y = (x - mean) rstd weight + bias, or relu of it, max-pooled when
 * pooled; saved[0] [2, C] holds mean and rstd (the batch's in training
 * mode, the running ones in eval mode). Each row is finished while it is
 * in cache: a pooled one in a scratch row, never written out whole. */
static sc_status batch_norm_forward(sc_node *node)
{
    const sc_batch_norm_params *p = &node->params.batch_norm;
    bn_geom g = bn_geom_of(node->in[0]);
    sc_tensor *stats = sc_tensor_new(node->ctx, SC_F32, 2, (int64_t[]){2, g.c});
    if (!stats)
        return SC_ERR_NOMEM;
    node->saved[0] = stats;
    const float *x = sc_tensor_f32(node->in[0]), *w = sc_tensor_f32(node->in[1]),
                *b = sc_tensor_f32(node->in[2]), *rm = sc_tensor_f32(node->in[3]),
                *rv = sc_tensor_f32(node->in[4]);
    float *y = sc_tensor_f32(node->out), *mean = sc_tensor_f32(stats), *rstd = mean + g.c;
    if (p->training) {
        SC_TRY(bn_batch_stats(node, g, mean, rstd));
    } else {
        for (int64_t ch = 0; ch < g.c; ch++) {
            mean[ch] = rm[ch];
            rstd[ch] = (float)(1.0 / sqrt((double)rv[ch] + p->eps));
        }
    }
    void *arg = NULL;
    float *rows = NULL;
    sc_cpu_pool_geom pool = {0};
    if (p->pooled) {
        pool = sc_cpu_pool_geom_of(&p->pool, node->in[0], node->out);
        SC_TRY(bn_pool_prepare(node, g, &pool, &arg, &rows));
    }
    int64_t out = pool.oh * pool.ow;
#pragma omp parallel for schedule(static) if (node->in[0]->numel > SC_CPU_PAR_MIN)
    for (int64_t row = 0; row < g.n * g.c; row++) {
        int64_t ch = row % g.c;
        float *yr = p->pooled ? rows + omp_get_thread_num() * g.s : y + row * g.s;
        affine_row(yr, x + row * g.s, mean[ch], rstd[ch] * w[ch], b[ch], p->relu, g.s);
        if (p->pooled)
            sc_cpu_max_pool_plane(&pool, yr, y + row * out,
                                  sc_cpu_pool_record_plane(&pool, arg, row), p->relu);
    }
    return SC_OK;
}

/* Backward's view of the op's output gradient gy (bn_grad), its scratch
 * from the step arena. */
static sc_status bn_grad_of(const sc_node *node, bn_geom g, const sc_tensor *gy,
                            const float *mean, const float *rstd, bn_grad *v)
{
    const sc_batch_norm_params *p = &node->params.batch_norm;
    *v = (bn_grad){.gy = sc_tensor_f32(gy), .mean = mean, .bias = sc_tensor_f32(node->in[2])};
    if (p->pooled) {
        v->arg = node->saved[1]->data;
        v->pool = sc_cpu_pool_geom_of(&p->pool, node->in[0], node->out);
    } else if (p->relu) {
        float *scale = sc_ctx_alloc(node->ctx, (size_t)g.c * sizeof *scale);
        if (!scale)
            return SC_ERR_NOMEM;
        const float *w = sc_tensor_f32(node->in[1]);
        for (int64_t ch = 0; ch < g.c; ch++)
            scale[ch] = rstd[ch] * w[ch]; /* as forward computes it */
        v->scale = scale;
    }
    if ((p->pooled || p->relu) && !(v->rows = scratch_rows(node->ctx, g)))
        return SC_ERR_NOMEM;
    return SC_OK;
}

/* gx [len] (+)= a g + c (x - mu) + d, with coef = {a, c, d}; written
 * when fresh. */
SC_CPU_CLONES
static void input_grad_row(float *restrict gx, const float *restrict g, const float *restrict x,
                           float mu, const float *coef, bool fresh, int64_t len)
{
    float a = coef[0], c = coef[1], d = coef[2];
    if (fresh) {
#pragma omp simd
        for (int64_t k = 0; k < len; k++)
            gx[k] = a * g[k] + c * (x[k] - mu) + d;
    } else {
#pragma omp simd
        for (int64_t k = 0; k < len; k++)
            gx[k] += a * g[k] + c * (x[k] - mu) + d;
    }
}

/* With xh = (x - mean) rstd, M = N S values per channel:
 *   gbias += sum g;  gweight += sum g xh;
 *   gx += weight rstd (g - sum g / M - xh sum g xh / M)   (training)
 *   gx += weight rstd g                                    (eval: constant stats)
 * The gx terms per channel: gx += a g + c (x - mean) + d. g is the
 * gradient of batch norm's own output, found row by row (grad_row). */
static sc_status batch_norm_backward(sc_node *node, const sc_tensor *gy, sc_tensor *const *gin)
{
    bool training = node->params.batch_norm.training;
    bn_geom g = bn_geom_of(node->in[0]);
    double m = (double)(g.n * g.s);
    const float *x = sc_tensor_f32(node->in[0]), *w = sc_tensor_f32(node->in[1]),
                *mean = sc_tensor_f32(node->saved[0]), *rstd = mean + g.c;
    float *gx = gin[0] ? sc_tensor_f32(gin[0]) : NULL;
    float *gw = gin[1] ? sc_tensor_f32(gin[1]) : NULL, *gb = gin[2] ? sc_tensor_f32(gin[2]) : NULL;
    double *s = sc_ctx_alloc(node->ctx, (size_t)(2 * g.c) * sizeof *s); /* sum g, sum g (x - mean) */
    float *coef = sc_ctx_alloc(node->ctx, (size_t)(3 * g.c) * sizeof *coef); /* a, c, d */
    bn_grad v;
    if (!s || !coef)
        return SC_ERR_NOMEM;
    SC_TRY(bn_grad_of(node, g, gy, mean, rstd, &v)); /* for both passes */
    if (gw || gb || (gx && training))
        SC_TRY(bn_channel_sums(node->ctx, g, &v, x, mean, s));
    for (int64_t ch = 0; ch < g.c; ch++) {
        double r = rstd[ch], sum_gxh = s[2 * ch + 1] * r, a = w[ch] * r;
        if (gb)
            gb[ch] += (float)s[2 * ch];
        if (gw)
            gw[ch] += (float)sum_gxh;
        coef[3 * ch] = (float)a;
        coef[3 * ch + 1] = training ? (float)(-a * r * sum_gxh / m) : 0.0f;
        coef[3 * ch + 2] = training ? (float)(-a * s[2 * ch] / m) : 0.0f;
    }
    if (!gx)
        return SC_OK;
    bool fresh = sc_node_grad_fresh(node, 0);
#pragma omp parallel for schedule(static) if (node->in[0]->numel > SC_CPU_PAR_MIN)
    for (int64_t row = 0; row < g.n * g.c; row++) {
        int64_t ch = row % g.c;
        const float *xr = x + row * g.s;
        input_grad_row(gx + row * g.s, grad_row(&v, xr, row, ch, g.s), xr, mean[ch],
                       coef + 3 * ch, fresh, g.s);
    }
    return SC_OK;
}

/* ---------------------------------------------------------------------
 * Layer norm: x [R, D], D the last dimension. */

/* y = (x - mean) rstd weight + bias per row; saved[0] [2, R] holds each
 * row's mean and rstd. */
static sc_status layer_norm_forward(sc_node *node)
{
    sc_layer_norm_rows a = sc_layer_norm_rows_of(node);
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
        row_stats(xr, a.d, &mu, &var);
        float m = mean[r] = (float)mu, rs = rstd[r] = (float)(1.0 / sqrt(var + eps));
        for (int64_t j = 0; j < a.d; j++)
            yr[j] = (xr[j] - m) * rs * (a.w ? a.w[j] : 1.0f) + (a.b ? a.b[j] : 0.0f);
    }
    return SC_OK;
}

/* gweight [D] += sum_r g xh;  gbias [D] += sum_r g; by column blocks, rows in order. */
static void layer_norm_param_grads(const sc_layer_norm_rows *a, const float *x, const float *g,
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
static void layer_norm_input_grad(const sc_layer_norm_rows *a, const float *x, const float *g,
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
    sc_layer_norm_rows a = sc_layer_norm_rows_of(node);
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

const sc_kernel sc_cpu_kernel_batch_norm = {.forward = batch_norm_forward,
                                            .backward = batch_norm_backward,
                                            .writes_grads = 1u << 0};
const sc_kernel sc_cpu_kernel_layer_norm = {.forward = layer_norm_forward,
                                            .backward = layer_norm_backward};
