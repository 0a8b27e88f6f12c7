/* CPU kernels for max, average and global average pooling. Planes (one
 * image's channel) run in parallel and each is written by one thread, so
 * results do not depend on the thread count. Max pooling saves where each
 * window's maximum is for backward (cpu.h, SC_CPU_POOL_BLOCKED). */
#include <math.h>
#include <string.h>

#include "cpu.h"

sc_cpu_pool_geom sc_cpu_pool_geom_of(const sc_pool2d_params *p, const sc_tensor *x,
                                     const sc_tensor *y)
{
    bool pairs = true;
    for (int d = 0; d < 2; d++)
        pairs = pairs && p->kernel[d] == 2 && p->stride[d] == 2 && p->padding[d] == 0;
    return (sc_cpu_pool_geom){x->shape[0] * x->shape[1], x->shape[2], x->shape[3], y->shape[2],
                              y->shape[3], *p, pairs};
}

static sc_cpu_pool_geom pool_geom_of(const sc_node *node)
{
    return sc_cpu_pool_geom_of(&node->params.pool2d, node->in[0], node->out);
}

sc_tensor *sc_cpu_pool_record_new(sc_ctx *ctx, const sc_cpu_pool_geom *g, const sc_tensor *y)
{
    return sc_tensor_new(ctx, g->pairs ? SC_U8 : SC_I32, y->ndim, y->shape);
}

void *sc_cpu_pool_record_plane(const sc_cpu_pool_geom *g, const void *record, int64_t plane)
{
    size_t size = g->pairs ? sizeof(uint8_t) : sizeof(int32_t);
    return (char *)record + (size_t)(plane * g->oh * g->ow) * size; /* strchr's const rule */
}

/* The input span [*lo, *hi) under output o's window along one axis;
 * padding clipped away. */
ALWAYS_INLINE void window_span(int64_t o, int kernel, int stride, int pad, int64_t len,
                               int64_t *lo, int64_t *hi)
{
    int64_t start = o * stride - pad, end = start + kernel;
    *lo = start < 0 ? 0 : start;
    *hi = end < len ? end : len;
}

/* The window rows [y0, y1) by columns [x0, x1) of a plane of width w. */
typedef struct window {
    int64_t y0, y1, x0, x1, w;
} window;

/* Keeps v at index i when it beats *best; a NaN wins (as in PyTorch).
 * Selects with bit masks, never a branch, even in the loop's scalar tail:
 * on real data the comparison is a coin flip. */
ALWAYS_INLINE void max_take(float *best, int32_t *arg, float v, int32_t i)
{
    union { float f; uint32_t u; } nv = {v}, old = {*best};
    uint32_t take = 0u - (uint32_t)((v > *best) | isnan(v));
    old.u = (nv.u & take) | (old.u & ~take);
    *best = old.f;
    *arg = (int32_t)(((uint32_t)i & take) | ((uint32_t)*arg & ~take));
}

/* The max of the window and its flat index. */
static float window_max(const float *restrict x, window b, int32_t *at)
{
    float best = -INFINITY;
    int32_t arg = (int32_t)(b.y0 * b.w + b.x0);
    for (int64_t iy = b.y0; iy < b.y1; iy++)
        for (int64_t ix = b.x0; ix < b.x1; ix++)
            max_take(&best, &arg, x[iy * b.w + ix], (int32_t)(iy * b.w + ix));
    *at = arg;
    return best;
}

/* Whether a relu after the pooling passes no gradient at output y. */
ALWAYS_INLINE bool relu_blocks(bool relu, float y) { return relu & !(y > 0.0f); }

/* Outputs [ox, ox + n) of row oy of a 2x2 max pooling, n <= 8, and their
 * bytes. The bytes go through 32-bit lanes: a loop that stored them
 * directly would vectorise by 8 bytes or more, leaving a block of 4 scalar. */
ALWAYS_INLINE void max_pool_2x2_block(const float *restrict x, int64_t w, float *restrict y,
                                      uint8_t *restrict arg, bool relu, int64_t oy, int64_t ox,
                                      int64_t n)
{
    const float *r0 = x + 2 * oy * w, *r1 = r0 + w;
    int32_t code[8];
#pragma omp simd
    for (int64_t l = 0; l < n; l++) {
        int64_t i = 2 * (ox + l);
        int32_t at = 0;
        float best = r0[i];
        max_take(&best, &at, r0[i + 1], 1);
        max_take(&best, &at, r1[i], 2);
        max_take(&best, &at, r1[i + 1], 3);
        y[ox + l] = best;
        code[l] = at + SC_CPU_POOL_BLOCKED * (int32_t)relu_blocks(relu, best);
    }
    for (int64_t l = 0; l < n; l++)
        arg[ox + l] = (uint8_t)code[l];
}

/* One plane through 2x2 windows at stride 2 without padding (the usual
 * pooling), each row in blocks that vectorise. */
SC_CPU_CLONES
static void max_pool_2x2(const float *restrict x, int64_t w, float *restrict y,
                         uint8_t *restrict arg, bool relu, int64_t oh, int64_t ow)
{
    for (int64_t oy = 0; oy < oh; oy++, y += ow, arg += ow)
        SC_CPU_ROW_BLOCKS(ow, ox, n, max_pool_2x2_block(x, w, y, arg, relu, oy, ox, n));
}

static float window_sum(const float *restrict x, window b)
{
    float acc = 0.0f;
    for (int64_t iy = b.y0; iy < b.y1; iy++)
        for (int64_t ix = b.x0; ix < b.x1; ix++)
            acc += x[iy * b.w + ix];
    return acc;
}

static void window_add(float *restrict x, window b, float v)
{
    for (int64_t iy = b.y0; iy < b.y1; iy++)
        for (int64_t ix = b.x0; ix < b.x1; ix++)
            x[iy * b.w + ix] += v;
}

typedef enum pool_mode { POOL_MAX, POOL_AVG, POOL_AVG_BACKWARD } pool_mode;

/* One plane: y [OH, OW] = the max (with its record arg, blocked where
 * relu) or mean of x [H, W] under each window; or, backward, each window
 * of x += y / (KH KW). Average pooling counts the padding
 * (count_include_pad). */
ALWAYS_INLINE void pool_plane(const sc_cpu_pool_geom *g, pool_mode mode, float *x, float *y,
                              void *arg, bool relu)
{
    const sc_pool2d_params *p = &g->p;
    float inv = 1.0f / (float)(p->kernel[0] * p->kernel[1]);
    if (mode == POOL_MAX && g->pairs) {
        max_pool_2x2(x, g->w, y, arg, relu, g->oh, g->ow);
        return;
    }
    for (int64_t oy = 0; oy < g->oh; oy++) {
        window b = {.w = g->w};
        window_span(oy, p->kernel[0], p->stride[0], p->padding[0], g->h, &b.y0, &b.y1);
        for (int64_t ox = 0; ox < g->ow; ox++) {
            window_span(ox, p->kernel[1], p->stride[1], p->padding[1], g->w, &b.x0, &b.x1);
            int64_t o = oy * g->ow + ox;
            if (mode == POOL_MAX) {
                int32_t *at = (int32_t *)arg + o;
                y[o] = window_max(x, b, at);
                if (relu_blocks(relu, y[o]))
                    *at = ~*at;
            } else if (mode == POOL_AVG)
                y[o] = window_sum(x, b) * inv;
            else
                window_add(x, b, y[o] * inv);
        }
    }
}

/* Runs pool_plane on every plane, in parallel; x, y and the record arg
 * (max pooling's) are whole tensors. */
ALWAYS_INLINE void pool_planes(const sc_cpu_pool_geom *g, pool_mode mode, float *x, float *y,
                               void *arg)
{
    int64_t in = g->h * g->w, out = g->oh * g->ow;
#pragma omp parallel for schedule(static) if (g->planes * in > SC_CPU_PAR_MIN)
    for (int64_t c = 0; c < g->planes; c++)
        pool_plane(g, mode, x + c * in, y + c * out,
                   arg ? sc_cpu_pool_record_plane(g, arg, c) : NULL, false);
}

void sc_cpu_max_pool_plane(const sc_cpu_pool_geom *g, const float *x, float *y, void *arg,
                           bool relu)
{
    pool_plane(g, POOL_MAX, (float *)x, y, arg, relu);
}

/* v where take, else +0: with a bit mask, never a branch (a coin flip on
 * real data). */
ALWAYS_INLINE float keep_if(bool take, float v)
{
    union { float f; uint32_t u; } r = {v};
    r.u &= 0u - (uint32_t)take;
    return r.f;
}

/* Outputs [ox, ox + n) of row oy of max_unpool_2x2 (input rows 2 oy and
 * 2 oy + 1), n <= 8, the bytes widened first (max_pool_2x2_block). A
 * blocked window's byte matches no place: all four get +0. */
ALWAYS_INLINE void unpool_2x2_block(const float *restrict g, const uint8_t *restrict arg,
                                    float *restrict gx, int64_t oy, int64_t w, int64_t ox,
                                    int64_t n)
{
    float *r0 = gx + 2 * oy * w, *r1 = r0 + w;
    int32_t at[8];
    for (int64_t l = 0; l < n; l++)
        at[l] = arg[ox + l];
#pragma omp simd
    for (int64_t l = 0; l < n; l++) {
        int64_t i = 2 * (ox + l);
        float v = 0.0f + g[ox + l];
        r0[i] = keep_if(at[l] == 0, v);
        r0[i + 1] = keep_if(at[l] == 1, v);
        r1[i] = keep_if(at[l] == 2, v);
        r1[i + 1] = keep_if(at[l] == 3, v);
    }
}

/* sc_cpu_max_pool_plane_grad of 2x2 windows at stride 2 into a fresh gx:
 * each window's max gets 0 + gy (what zeroing and adding gives: +0 for a
 * -0 gradient) and the rest of gx 0, every element written once (a block
 * moved back writes some twice, the same values), rows in blocks that
 * vectorise, without a branch per element. */
SC_CPU_CLONES
static void max_unpool_2x2(const sc_cpu_pool_geom *g, const float *restrict gy,
                           const uint8_t *restrict arg, float *restrict gx)
{
    for (int64_t oy = 0; oy < g->oh; oy++) {
        int64_t o = oy * g->ow;
        SC_CPU_ROW_BLOCKS(g->ow, ox, n, unpool_2x2_block(gy + o, arg + o, gx, oy, g->w, ox, n));
        for (int64_t ix = 2 * g->ow; ix < g->w; ix++) /* an odd width's last column */
            gx[2 * oy * g->w + ix] = gx[(2 * oy + 1) * g->w + ix] = 0.0f;
    }
    if (2 * g->oh < g->h) /* an odd height's last row */
        memset(gx + 2 * g->oh * g->w, 0, (size_t)g->w * sizeof *gx);
}

/* gx [H, W] += the gradient of 2x2 windows at stride 2, gy [OH, OW], at
 * each window's max (+0 where blocked), nothing else touched. */
static void max_pool_2x2_add(const sc_cpu_pool_geom *g, const float *restrict gy,
                             const uint8_t *restrict arg, float *restrict gx)
{
    for (int64_t oy = 0; oy < g->oh; oy++, gy += g->ow, arg += g->ow) {
        float *top = gx + 2 * oy * g->w;
        for (int64_t ox = 0; ox < g->ow; ox++) {
            int at = arg[ox];
            top[(at >> 1 & 1) * g->w + 2 * ox + (at & 1)] +=
                keep_if(at < SC_CPU_POOL_BLOCKED, gy[ox]);
        }
    }
}

void sc_cpu_max_pool_plane_grad(const sc_cpu_pool_geom *g, const float *restrict gy,
                                const void *restrict arg, float *restrict gx, bool fresh)
{
    if (g->pairs) {
        if (fresh)
            max_unpool_2x2(g, gy, arg, gx);
        else
            max_pool_2x2_add(g, gy, arg, gx);
        return;
    }
    if (fresh)
        memset(gx, 0, (size_t)(g->h * g->w) * sizeof *gx);
    const int32_t *at = arg;
    for (int64_t o = 0; o < g->oh * g->ow; o++) /* ~index where blocked */
        gx[at[o] < 0 ? ~at[o] : at[o]] += keep_if(at[o] >= 0, gy[o]);
}

static sc_status max_pool2d_forward(sc_node *node)
{
    sc_cpu_pool_geom g = pool_geom_of(node);
    sc_tensor *arg = sc_cpu_pool_record_new(node->ctx, &g, node->out);
    if (!arg)
        return SC_ERR_NOMEM;
    node->saved[0] = arg;
    pool_planes(&g, POOL_MAX, sc_tensor_f32(node->in[0]), sc_tensor_f32(node->out), arg->data);
    return SC_OK;
}

/* gx [planes, H, W] at each window's max += gy [planes, OH, OW]; a fresh
 * gx is zeroed a plane at a time, while the plane is in cache. */
static sc_status max_pool2d_backward(sc_node *node, const sc_tensor *gy,
                                     sc_tensor *const *gin)
{
    sc_cpu_pool_geom g = pool_geom_of(node);
    int64_t in = g.h * g.w, out = g.oh * g.ow;
    void *arg = node->saved[0]->data;
    const float *gyd = sc_tensor_f32(gy);
    float *gx = sc_tensor_f32(gin[0]);
    bool fresh = sc_node_grad_fresh(node, 0);
#pragma omp parallel for schedule(static) if (g.planes * in > SC_CPU_PAR_MIN)
    for (int64_t c = 0; c < g.planes; c++)
        sc_cpu_max_pool_plane_grad(&g, gyd + c * out, sc_cpu_pool_record_plane(&g, arg, c),
                                   gx + c * in, fresh);
    return SC_OK;
}

static sc_status avg_pool2d_forward(sc_node *node)
{
    sc_cpu_pool_geom g = pool_geom_of(node);
    pool_planes(&g, POOL_AVG, sc_tensor_f32(node->in[0]), sc_tensor_f32(node->out), NULL);
    return SC_OK;
}

static sc_status avg_pool2d_backward(sc_node *node, const sc_tensor *gy,
                                     sc_tensor *const *gin)
{
    sc_cpu_pool_geom g = pool_geom_of(node);
    pool_planes(&g, POOL_AVG_BACKWARD, sc_tensor_f32(gin[0]), sc_tensor_f32(gy), NULL);
    return SC_OK;
}

/* y [N, C] = the mean of each plane of x [N, C, H, W] */
static sc_status global_avg_pool_forward(sc_node *node)
{
    const sc_tensor *xt = node->in[0];
    int64_t planes = node->out->numel, hw = xt->shape[2] * xt->shape[3];
    const float *x = sc_tensor_f32(xt);
    float *y = sc_tensor_f32(node->out), inv = 1.0f / (float)hw;
#pragma omp parallel for schedule(static) if (xt->numel > SC_CPU_PAR_MIN)
    for (int64_t c = 0; c < planes; c++) {
        float acc = 0.0f;
        for (int64_t i = 0; i < hw; i++)
            acc += x[c * hw + i];
        y[c] = acc * inv;
    }
    return SC_OK;
}

/* gx [N, C, H, W] += gy [N, C] / (H W) */
static sc_status global_avg_pool_backward(sc_node *node, const sc_tensor *gy,
                                          sc_tensor *const *gin)
{
    const sc_tensor *xt = node->in[0];
    int64_t planes = gy->numel, hw = xt->shape[2] * xt->shape[3];
    const float *g = sc_tensor_f32(gy);
    float *gx = sc_tensor_f32(gin[0]), inv = 1.0f / (float)hw;
#pragma omp parallel for schedule(static) if (xt->numel > SC_CPU_PAR_MIN)
    for (int64_t c = 0; c < planes; c++) {
        float v = g[c] * inv;
        for (int64_t i = 0; i < hw; i++)
            gx[c * hw + i] += v;
    }
    return SC_OK;
}

const sc_kernel sc_cpu_kernel_max_pool2d = {.forward = max_pool2d_forward,
                                            .backward = max_pool2d_backward,
                                            .writes_grads = 1u << 0};
const sc_kernel sc_cpu_kernel_avg_pool2d = {.forward = avg_pool2d_forward,
                                            .backward = avg_pool2d_backward};
const sc_kernel sc_cpu_kernel_global_avg_pool = {.forward = global_avg_pool_forward,
                                                 .backward = global_avg_pool_backward};
