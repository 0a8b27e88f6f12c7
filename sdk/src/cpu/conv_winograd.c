/* 3x3 convolutions at stride 1 by Winograd's minimal filtering F(m x m,
 * 3x3), m = 2 or 4 (Lavin and Gray, "Fast Algorithms for Convolutional
 * Neural Networks", 2016). conv.c picks m per layer (sc_wino_shape).
 *
 * The output is cut into m x m tiles. Tile t of output channel k is
 *     y_tk = A^T [ sum_c V_tc (.) U_ck ] A,  U_ck = G w_kc G^T,  V_tc = B^T d_tc B,
 * with d_tc the a x a input patch under the tile (a = m + 2; zero in the
 * padding) and (.) the element-wise product. For each of the XI = a^2
 * positions xi of a transformed tile, the sum over c is one GEMM,
 *     M[xi] [T, K] = V[xi] [T, C] U[xi] [C, K],
 * so an output costs a^2 / m^2 multiply-adds per channel pair instead of
 * 9 (F(2x2): 4, F(4x4): 2.25); the transforms are additions and
 * multiplications by constants. Backward runs the same algebra adjoint:
 *     dM_tk = A gy_tk A^T,  dU[xi] [K, C] += dM[xi]^T V[xi],  dV[xi] = dM[xi] U[xi]^T,
 *     gw_kc += G^T dU_kc G,  gx (patches overlap) += B dV_tc B^T.
 *
 * F(4x4) interpolates at 0, 1, -1, 1/2, -2 (and infinity) instead of
 * Lavin's 0, +-1, +-2, which shrinks its largest rounding error about 2.5
 * times (Barabasz et al., "Error analysis and improving the accuracy of
 * Winograd convolution for deep neural networks", 2020). Measured in fp32
 * against fp64 (64 channels, normal inputs), relative to the mean |y|:
 * F(2x2) errs by 2.7e-7 on average and 1.5e-6 at most, F(4x4) by 1.2e-6
 * and 1.1e-5 (Lavin's points: 3.5e-5 at most).
 *
 * Threads split the batch; each walks its images' rows of tiles in chunks
 * of about TILES tiles, its transformed tiles in per-thread scratch from
 * the step arena. dU sums per thread, then in thread order.
 *
 * Transformed tiles are channel-last, [XI, T, C]: a tile's channels are
 * contiguous. So the transforms vectorise across channels, whatever the
 * width of the image (a row of a 14x14 layer has 7 tiles of 2x2, 4 of
 * 4x4: too few for a vector along the row), and the GEMMs take their
 * operands untransposed (OpenBLAS's dU = dM^T V ran at 83 GFLOP/s on one
 * core of the project's machine with [XI, C, T] operands, 113 on
 * [XI, T, C] ones). The images, gradients and their planes stay
 * [N, C, H, W]: the transforms read and write a window of an image's rows
 * moved to or from channel-last order in per-thread scratch
 * (to_channels_last, from_channels_last), 8 channels by 8 points at a
 * time, each row split into m phases so that one loop walks a row's
 * tiles and their channels (cl_window). Against the layout before it
 * ([XI, C, T], transforms along rows of tiles), this took the cnn's
 * 32->64 layer at 14x14 (F(2x2), batch 128, one thread) from 6.3 to 5.4
 * ms forward and from 13.1 to 10.0 ms backward. */
#include <cblas.h>
#include <string.h>

#include "conv_impl.h"

/* Tiles per chunk, whose transformed input and output stay in L2 or
 * near it: 50 and 100 took the same time on the cnn and the resnet (a
 * training run's CPU time), 200 to 400 more on single layers. */
enum { TILES = 100 };

typedef struct f2 { float v0, v1; } f2;
typedef struct f3 { float v0, v1, v2; } f3;
typedef struct f4 { float v0, v1, v2, v3; } f4;
typedef struct f6 { float v0, v1, v2, v3, v4, v5; } f6;

/* ---------------------------------------------------------------------
 * The 1-D transforms and their adjoints. F(2x2, 3x3):
 *     B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1],
 *     G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1],  A^T = [1 1 1 0; 0 1 -1 -1]. */

ALWAYS_INLINE f4 bt4(f4 d) { return (f4){d.v0 - d.v2, d.v1 + d.v2, d.v2 - d.v1, d.v1 - d.v3}; }
ALWAYS_INLINE f4 b4(f4 g) { return (f4){g.v0, g.v1 - g.v2 + g.v3, g.v1 + g.v2 - g.v0, -g.v3}; }
ALWAYS_INLINE f2 at4(f4 m) { return (f2){m.v0 + m.v1 + m.v2, m.v1 - m.v2 - m.v3}; }
ALWAYS_INLINE f4 a2(f2 g) { return (f4){g.v0, g.v0 + g.v1, g.v0 - g.v1, -g.v1}; }

ALWAYS_INLINE f4 g3(f3 w)
{
    return (f4){w.v0, 0.5f * (w.v0 + w.v1 + w.v2), 0.5f * (w.v0 - w.v1 + w.v2), w.v2};
}

ALWAYS_INLINE f3 gt4(f4 d)
{
    float mid = 0.5f * (d.v1 + d.v2);
    return (f3){d.v0 + mid, 0.5f * (d.v1 - d.v2), d.v3 + mid};
}

/* F(4x4, 3x3), at the points 0, 1, -1, 1/2, -2 and infinity:
 *     B^T = [1 -3/2 -2 3/2 1 0; 0 -1 1/2 5/2 1 0; 0 1 -5/2 1/2 1 0;
 *            0 -2 -1 2 1 0; 0 1/2 -1 -1/2 1 0; 0 1 -3/2 -2 3/2 1],
 *     G = [1 0 0; 1/3 1/3 1/3; -1/3 1/3 -1/3; -16/15 -8/15 -4/15;
 *          1/15 -2/15 4/15; 0 0 1],
 *     A^T = [1 1 1 1 1 0; 0 1 -1 1/2 -2 0; 0 1 1 1/4 4 0; 0 1 -1 1/8 -8 1]. */

/* Each as the matrix row by row, common terms shared: 24 operations for
 * bt6 and b6 instead of 33 to 34, which the input transform and its
 * adjoint run 12 times a tile. */
ALWAYS_INLINE f6 bt6(f6 d)
{
    float e = d.v3 - d.v1, f = d.v4 - d.v2;
    return (f6){(d.v0 - d.v2) + f + 1.5f * e,
                (d.v4 - d.v1) + 0.5f * d.v2 + 2.5f * d.v3,
                (d.v4 + d.v1) - 2.5f * d.v2 + 0.5f * d.v3,
                f + 2.0f * e,
                f - 0.5f * e,
                (d.v5 - d.v3) - e + 1.5f * f};
}

/* bt6's adjoint, through its e and f */
ALWAYS_INLINE f6 b6(f6 g)
{
    float e = 1.5f * g.v0 + 2.0f * g.v3 - 0.5f * g.v4 - g.v5;
    float f = g.v0 + g.v3 + g.v4 + 1.5f * g.v5;
    return (f6){g.v0,
                g.v2 - g.v1 - e,
                0.5f * g.v1 - 2.5f * g.v2 - (f + g.v0),
                e + 2.5f * g.v1 + 0.5f * g.v2 - g.v5,
                f + g.v1 + g.v2,
                g.v5};
}

ALWAYS_INLINE f4 at6(f6 m)
{
    float p = m.v1 + m.v2, q = m.v1 - m.v2;
    return (f4){(m.v0 + p) + (m.v3 + m.v4),
                q + 0.5f * m.v3 - 2.0f * m.v4,
                p + 0.25f * m.v3 + 4.0f * m.v4,
                q + 0.125f * m.v3 - 8.0f * m.v4 + m.v5};
}

ALWAYS_INLINE f6 a4(f4 g)
{
    float s = g.v0 + g.v2, t = g.v1 + g.v3;
    return (f6){g.v0,
                s + t,
                s - t,
                g.v0 + 0.5f * g.v1 + 0.25f * g.v2 + 0.125f * g.v3,
                g.v0 - 2.0f * g.v1 + 4.0f * g.v2 - 8.0f * g.v3,
                g.v3};
}

ALWAYS_INLINE f6 g6(f3 w)
{
    const float third = 1.0f / 3, fifteenth = 1.0f / 15;
    return (f6){w.v0,
                third * (w.v0 + w.v1 + w.v2),
                third * (w.v1 - w.v0 - w.v2),
                -fifteenth * (16.0f * w.v0 + 8.0f * w.v1 + 4.0f * w.v2),
                fifteenth * (w.v0 - 2.0f * w.v1 + 4.0f * w.v2),
                w.v2};
}

ALWAYS_INLINE f3 gt6(f6 d)
{
    const float third = 1.0f / 3, fifteenth = 1.0f / 15;
    return (f3){d.v0 + third * (d.v1 - d.v2) + fifteenth * (d.v4 - 16.0f * d.v3),
                third * (d.v1 + d.v2) - fifteenth * (8.0f * d.v3 + 2.0f * d.v4),
                third * (d.v1 - d.v2) + fifteenth * (4.0f * (d.v4 - d.v3)) + d.v5};
}

/* Four or six values `stride` apart, and back. */
ALWAYS_INLINE f4 get4(const float *p, int64_t stride)
{
    return (f4){p[0], p[stride], p[2 * stride], p[3 * stride]};
}

ALWAYS_INLINE void put4(float *p, int64_t stride, f4 v)
{
    p[0] = v.v0;
    p[stride] = v.v1;
    p[2 * stride] = v.v2;
    p[3 * stride] = v.v3;
}

ALWAYS_INLINE f6 get6(const float *p, int64_t stride)
{
    return (f6){p[0], p[stride], p[2 * stride], p[3 * stride], p[4 * stride], p[5 * stride]};
}

ALWAYS_INLINE void put6(float *p, int64_t stride, f6 v)
{
    p[0] = v.v0;
    p[stride] = v.v1;
    p[2 * stride] = v.v2;
    p[3 * stride] = v.v3;
    p[4 * stride] = v.v4;
    p[5 * stride] = v.v5;
}

/* ---------------------------------------------------------------------
 * Weights: u [XI, C, K] (forward's) or [XI, K, C] (backward's) from
 * weight [K, C, 3, 3], and the adjoint; xi = a i + j holds row i,
 * column j of a transformed a x a tile. Once a step per layer, so the
 * loops run over arrays. */

ALWAYS_INLINE float f3_at(f3 v, int j) { return j == 0 ? v.v0 : j == 1 ? v.v1 : v.v2; }

/* out [m + 2] = G w */
ALWAYS_INLINE void g_of(int m, f3 w, float *out)
{
    if (m == 2) {
        f4 v = g3(w);
        memcpy(out, &v, sizeof v);
    } else {
        f6 v = g6(w);
        memcpy(out, &v, sizeof v);
    }
}

/* G^T d, d [m + 2] */
ALWAYS_INLINE f3 gt_of(int m, const float *d)
{
    return m == 2 ? gt4((f4){d[0], d[1], d[2], d[3]})
                  : gt6((f6){d[0], d[1], d[2], d[3], d[4], d[5]});
}

/* u [XI, stride] at a weight's column: the transform of its w [3, 3]. */
ALWAYS_INLINE void transform_weight(int m, int64_t stride, const float *w, float *u)
{
    int a = m + 2;
    float r[3][6]; /* G along each row of w */
    for (int i = 0; i < 3; i++)
        g_of(m, (f3){w[3 * i], w[3 * i + 1], w[3 * i + 2]}, r[i]);
    for (int j = 0; j < a; j++) { /* then down each column */
        float col[6];
        g_of(m, (f3){r[0][j], r[1][j], r[2][j]}, col);
        for (int i = 0; i < a; i++)
            u[(a * i + j) * stride] = col[i];
    }
}

/* g [3, 3] += G^T du G, du's XI values stride floats apart. */
ALWAYS_INLINE void add_weight_grad(int m, int64_t stride, const float *du, float *g)
{
    int a = m + 2;
    f3 r[6]; /* G^T along each row of du */
    for (int i = 0; i < a; i++) {
        float row[6];
        for (int j = 0; j < a; j++)
            row[j] = du[(a * i + j) * stride];
        r[i] = gt_of(m, row);
    }
    for (int j = 0; j < 3; j++) { /* then down each column */
        float col[6];
        for (int i = 0; i < a; i++)
            col[i] = f3_at(r[i], j);
        f3 c = gt_of(m, col);
        g[j] += c.v0;
        g[3 + j] += c.v1;
        g[6 + j] += c.v2;
    }
}

/* Weights per block of weight_transform and weight_grad. Transformed one
 * by one, each weight's XI values go to (or come from) XI rows of u K C
 * floats apart (64 KB for 128 channels in and out), which share a set
 * of L1 and evict each other; a block goes through a small buffer,
 * copied a row at a time. The loops name m as a constant, so that the
 * transforms unroll. */
enum { WEIGHT_BLOCK = 64 };

/* u [XI, C, K] when by_input, else [XI, K, C]. */
static void weight_transform(const sc_wino_shape *s, const float *weight, bool by_input,
                             float *u)
{
    int64_t kc = s->k * s->c, blocks = (kc + WEIGHT_BLOCK - 1) / WEIGHT_BLOCK;
    int xi = (s->m + 2) * (s->m + 2);
#pragma omp parallel for schedule(static) if (kc > 1024)
    for (int64_t b = 0; b < blocks; b++) {
        int64_t n0 = b * WEIGHT_BLOCK, len = min64(WEIGHT_BLOCK, kc - n0);
        float t[36 * WEIGHT_BLOCK]; /* [XI, WEIGHT_BLOCK]: u [XI, n0 : n0 + len) */
        for (int64_t i = 0; i < len; i++) {
            int64_t n = n0 + i; /* u's column; c K + k when by_input */
            const float *wn = weight + 9 * (by_input ? n % s->k * s->c + n / s->k : n);
            if (s->m == 4)
                transform_weight(4, WEIGHT_BLOCK, wn, t + i);
            else
                transform_weight(2, WEIGHT_BLOCK, wn, t + i);
        }
        for (int x = 0; x < xi; x++)
            memcpy(u + x * kc + n0, t + x * WEIGHT_BLOCK, (size_t)len * sizeof(float));
    }
}

/* gw [K, C, 3, 3] += G^T du G, du the sum of the slots' partials
 * [slots, XI, K, C], in slot order. */
static void weight_grad(const sc_wino_shape *s, const float *du, int slots, float *gw)
{
    int64_t kc = s->k * s->c, blocks = (kc + WEIGHT_BLOCK - 1) / WEIGHT_BLOCK;
    int xi = (s->m + 2) * (s->m + 2);
#pragma omp parallel for schedule(static) if (kc > 1024)
    for (int64_t b = 0; b < blocks; b++) {
        int64_t n0 = b * WEIGHT_BLOCK, len = min64(WEIGHT_BLOCK, kc - n0);
        float t[36 * WEIGHT_BLOCK]; /* [XI, WEIGHT_BLOCK]: du [XI, n0 : n0 + len), summed */
        for (int x = 0; x < xi; x++) {
            float *row = t + x * WEIGHT_BLOCK;
            for (int64_t i = 0; i < len; i++)
                row[i] = 0.0f;
            for (int slot = 0; slot < slots; slot++) {
                const float *part = du + (slot * xi + x) * kc + n0;
                for (int64_t i = 0; i < len; i++)
                    row[i] += part[i];
            }
        }
        for (int64_t i = 0; i < len; i++) {
            if (s->m == 4)
                add_weight_grad(4, WEIGHT_BLOCK, t + i, gw + 9 * (n0 + i));
            else
                add_weight_grad(2, WEIGHT_BLOCK, t + i, gw + 9 * (n0 + i));
        }
    }
}

/* ---------------------------------------------------------------------
 * Channel-last windows. A window is rows [y0, y0 + rows) and columns
 * [x0, x0 + cols) of an image's C planes [H, W], H W floats apart. It may
 * reach outside the planes, into the padding, and always spans their
 * width (x0 <= 0, x0 + cols >= W): the points inside are whole rows, one
 * run of each plane. Each row is held as m phases of HALF = cols / m
 * (rounded up) points, phase p holding columns m u + p, each point's C
 * values contiguous: [rows, m, HALF, C]. So the tiles of a row of tiles
 * lie a point apart in every phase, and a transform walks a row's tiles
 * and their channels in one loop (segment_tiles). */

typedef struct cl_window {
    int64_t c, h, w;    /* the planes: C of H x W */
    int64_t y0, x0;     /* the window's corner, in the planes' coordinates */
    int64_t rows, cols;
    int shift;          /* m = 1 << shift phases */
} cl_window;

ALWAYS_INLINE int64_t cl_half(const cl_window *g)
{
    return (g->cols + (1 << g->shift) - 1) >> g->shift;
}

/* Floats from a window row to the next, and from a phase to the next. */
ALWAYS_INLINE int64_t cl_row_floats(const cl_window *g)
{
    return (cl_half(g) << g->shift) * g->c;
}

ALWAYS_INLINE int64_t cl_phase_floats(const cl_window *g) { return cl_half(g) * g->c; }

/* The offset of the window's point at row r, column j (both from the
 * window's corner). */
ALWAYS_INLINE int64_t cl_point(const cl_window *g, int64_t r, int64_t j)
{
    int64_t phase = j & ((1 << g->shift) - 1);
    return ((r << g->shift | phase) * cl_half(g) + (j >> g->shift)) * g->c;
}

/* The window's rows [iy0, iy1) of the planes. */
typedef struct cl_run {
    int64_t iy0, iy1;
} cl_run;

static cl_run cl_run_of(const cl_window *g)
{
    int64_t iy0 = max64(g->y0, 0), iy1 = min64(g->y0 + g->rows, g->h);
    if (iy1 <= iy0) /* none: an empty run at the window's top */
        iy0 = iy1 = g->y0;
    return (cl_run){iy0, iy1};
}

typedef float v8 __attribute__((vector_size(32)));
/* 8 floats at any float's address: *(v8u *)p loads or stores them */
typedef float v8u __attribute__((vector_size(32), aligned(4)));

/* r [8] transposed in place: r[i][j] becomes r[j][i]. */
ALWAYS_INLINE void transpose8(v8 *r)
{
    v8 t0 = __builtin_shufflevector(r[0], r[1], 0, 8, 1, 9, 4, 12, 5, 13);
    v8 t1 = __builtin_shufflevector(r[0], r[1], 2, 10, 3, 11, 6, 14, 7, 15);
    v8 t2 = __builtin_shufflevector(r[2], r[3], 0, 8, 1, 9, 4, 12, 5, 13);
    v8 t3 = __builtin_shufflevector(r[2], r[3], 2, 10, 3, 11, 6, 14, 7, 15);
    v8 t4 = __builtin_shufflevector(r[4], r[5], 0, 8, 1, 9, 4, 12, 5, 13);
    v8 t5 = __builtin_shufflevector(r[4], r[5], 2, 10, 3, 11, 6, 14, 7, 15);
    v8 t6 = __builtin_shufflevector(r[6], r[7], 0, 8, 1, 9, 4, 12, 5, 13);
    v8 t7 = __builtin_shufflevector(r[6], r[7], 2, 10, 3, 11, 6, 14, 7, 15);
    /* s_j: column j of rows 0-3 in the low half, column j + 4 in the high */
    v8 s0 = __builtin_shufflevector(t0, t2, 0, 1, 8, 9, 4, 5, 12, 13);
    v8 s1 = __builtin_shufflevector(t0, t2, 2, 3, 10, 11, 6, 7, 14, 15);
    v8 s2 = __builtin_shufflevector(t1, t3, 0, 1, 8, 9, 4, 5, 12, 13);
    v8 s3 = __builtin_shufflevector(t1, t3, 2, 3, 10, 11, 6, 7, 14, 15);
    v8 s4 = __builtin_shufflevector(t4, t6, 0, 1, 8, 9, 4, 5, 12, 13);
    v8 s5 = __builtin_shufflevector(t4, t6, 2, 3, 10, 11, 6, 7, 14, 15);
    v8 s6 = __builtin_shufflevector(t5, t7, 0, 1, 8, 9, 4, 5, 12, 13);
    v8 s7 = __builtin_shufflevector(t5, t7, 2, 3, 10, 11, 6, 7, 14, 15);
    r[0] = __builtin_shufflevector(s0, s4, 0, 1, 2, 3, 8, 9, 10, 11);
    r[1] = __builtin_shufflevector(s1, s5, 0, 1, 2, 3, 8, 9, 10, 11);
    r[2] = __builtin_shufflevector(s2, s6, 0, 1, 2, 3, 8, 9, 10, 11);
    r[3] = __builtin_shufflevector(s3, s7, 0, 1, 2, 3, 8, 9, 10, 11);
    r[4] = __builtin_shufflevector(s0, s4, 4, 5, 6, 7, 12, 13, 14, 15);
    r[5] = __builtin_shufflevector(s1, s5, 4, 5, 6, 7, 12, 13, 14, 15);
    r[6] = __builtin_shufflevector(s2, s6, 4, 5, 6, 7, 12, 13, 14, 15);
    r[7] = __builtin_shufflevector(s3, s7, 4, 5, 6, 7, 12, 13, 14, 15);
}

/* at [len] = the window offset of each of the run's len points, in the
 * planes' order. */
static void point_offsets(const cl_window *g, cl_run run, int32_t *at)
{
    for (int64_t r = run.iy0 - g->y0; r < run.iy1 - g->y0; r++)
        for (int64_t j = -g->x0; j < g->w - g->x0; j++)
            *at++ = (int32_t)cl_point(g, r, j);
}

/* Points [p0, p1) of the run, channels [ch0, C), one value at a time
 * (the tails of the blocks of 8): into the window, and back. */
ALWAYS_INLINE void points_to_cl(const cl_window *g, const int32_t *at, int64_t p0, int64_t p1,
                                int64_t ch0, const float *restrict from, float *restrict cl)
{
    for (int64_t p = p0; p < p1; p++)
        for (int64_t ch = ch0; ch < g->c; ch++)
            cl[at[p] + ch] = from[ch * g->h * g->w + p];
}

ALWAYS_INLINE void points_from_cl(const cl_window *g, const int32_t *at, int64_t p0,
                                  int64_t p1, int64_t ch0, const float *restrict cl,
                                  const float *bias, bool add, float *restrict to)
{
    for (int64_t p = p0; p < p1; p++)
        for (int64_t ch = ch0; ch < g->c; ch++) {
            float *v = to + ch * g->h * g->w + p;
            *v = (add ? *v : 0.0f) + cl[at[p] + ch] + (bias ? bias[ch] : 0.0f);
        }
}

/* cl [rows, m, HALF, C] = the window of planes [C, H, W], zero outside
 * them; at is scratch for the offsets of the points inside. */
SC_CPU_CLONES
static void to_channels_last(const cl_window *g, const float *restrict planes,
                             float *restrict cl, int32_t *at)
{
    cl_run run = cl_run_of(g);
    int64_t span = cl_row_floats(g);
    memset(cl, 0, (size_t)((run.iy0 - g->y0) * span) * sizeof *cl);
    for (int64_t r = run.iy0 - g->y0; r < run.iy1 - g->y0; r++) { /* the padding's columns */
        for (int64_t j = 0; j < -g->x0; j++)
            memset(cl + cl_point(g, r, j), 0, (size_t)g->c * sizeof *cl);
        for (int64_t j = g->w - g->x0; j < g->cols; j++)
            memset(cl + cl_point(g, r, j), 0, (size_t)g->c * sizeof *cl);
    }
    memset(cl + (run.iy1 - g->y0) * span, 0,
           (size_t)((g->y0 + g->rows - run.iy1) * span) * sizeof *cl);
    point_offsets(g, run, at);
    int64_t plane = g->h * g->w, len = (run.iy1 - run.iy0) * g->w, c8 = g->c / 8 * 8;
    const float *from = planes + run.iy0 * g->w;
    for (int64_t ch = 0; ch < c8; ch += 8) /* 8 planes at a time, each read in order */
        for (int64_t p = 0; p + 8 <= len; p += 8) {
            v8 r[8];
            for (int i = 0; i < 8; i++)
                r[i] = *(const v8u *)(from + (ch + i) * plane + p);
            transpose8(r);
            for (int q = 0; q < 8; q++)
                *(v8u *)(cl + at[p + q] + ch) = r[q];
        }
    points_to_cl(g, at, 0, len / 8 * 8, c8, from, cl);
    points_to_cl(g, at, len / 8 * 8, len, 0, from, cl);
}

/* planes [C, H, W] = (add: +=) the window cl where it lies inside them,
 * + bias [C] (NULL: none); at is scratch as for to_channels_last. */
SC_CPU_CLONES
static void from_channels_last(const cl_window *g, const float *restrict cl, const float *bias,
                               bool add, float *restrict planes, int32_t *at)
{
    cl_run run = cl_run_of(g);
    point_offsets(g, run, at);
    int64_t plane = g->h * g->w, len = (run.iy1 - run.iy0) * g->w, c8 = g->c / 8 * 8;
    float *to = planes + run.iy0 * g->w;
    for (int64_t ch = 0; ch < c8; ch += 8)
        for (int64_t p = 0; p + 8 <= len; p += 8) {
            v8 r[8];
            for (int q = 0; q < 8; q++)
                r[q] = *(const v8u *)(cl + at[p + q] + ch);
            transpose8(r);
            for (int i = 0; i < 8; i++) {
                v8u *dst = (v8u *)(to + (ch + i) * plane + p);
                *dst = (add ? *dst : (v8){0}) + r[i] + (bias ? bias[ch + i] : 0.0f);
            }
        }
    points_from_cl(g, at, 0, len / 8 * 8, c8, cl, bias, add, to);
    points_from_cl(g, at, len / 8 * 8, len, 0, cl, bias, add, to);
}

/* ---------------------------------------------------------------------
 * One channel of one tile: the patch or output tile in a window, rows
 * rs apart, and its a x a transformed values, xs apart. An output tile's
 * columns are its m phases, ps apart; a patch's first m columns too, its
 * last two in phases 0 and 1 of the next point, c floats on (the
 * window's layout, cl_window). Called in loops over the channels of a
 * row's tiles, which vectorise. */

/* Where column j of a patch of F(m x m) lies. */
ALWAYS_INLINE int64_t patch_col(int m, int j, int64_t ps, int64_t c)
{
    return j < m ? j * ps : (j - m) * ps + c;
}

ALWAYS_INLINE void put2(float *p, int64_t stride, f2 v)
{
    p[0] = v.v0;
    p[stride] = v.v1;
}

ALWAYS_INLINE void add4(float *p, int64_t stride, f4 v)
{
    p[0] += v.v0;
    p[stride] += v.v1;
    p[2 * stride] += v.v2;
    p[3 * stride] += v.v3;
}

ALWAYS_INLINE void add6(float *p, int64_t stride, f6 v)
{
    add4(p, stride, (f4){v.v0, v.v1, v.v2, v.v3});
    p[4 * stride] += v.v4;
    p[5 * stride] += v.v5;
}

/* v = B^T d B */
ALWAYS_INLINE void input_tile2(const float *restrict d, int64_t rs, int64_t ps, int64_t c,
                               float *restrict v, int64_t xs)
{
    /* B^T down each column of the patch, then B^T along each row */
    f4 c0 = bt4(get4(d, rs)), c1 = bt4(get4(d + ps, rs));
    f4 c2 = bt4(get4(d + patch_col(2, 2, ps, c), rs));
    f4 c3 = bt4(get4(d + patch_col(2, 3, ps, c), rs));
    put4(v, xs, bt4((f4){c0.v0, c1.v0, c2.v0, c3.v0}));
    put4(v + 4 * xs, xs, bt4((f4){c0.v1, c1.v1, c2.v1, c3.v1}));
    put4(v + 8 * xs, xs, bt4((f4){c0.v2, c1.v2, c2.v2, c3.v2}));
    put4(v + 12 * xs, xs, bt4((f4){c0.v3, c1.v3, c2.v3, c3.v3}));
}

ALWAYS_INLINE void input_tile4(const float *restrict d, int64_t rs, int64_t ps, int64_t c,
                               float *restrict v, int64_t xs)
{
    f6 c0 = bt6(get6(d, rs)), c1 = bt6(get6(d + ps, rs)), c2 = bt6(get6(d + 2 * ps, rs));
    f6 c3 = bt6(get6(d + 3 * ps, rs)), c4 = bt6(get6(d + patch_col(4, 4, ps, c), rs));
    f6 c5 = bt6(get6(d + patch_col(4, 5, ps, c), rs));
    put6(v, xs, bt6((f6){c0.v0, c1.v0, c2.v0, c3.v0, c4.v0, c5.v0}));
    put6(v + 6 * xs, xs, bt6((f6){c0.v1, c1.v1, c2.v1, c3.v1, c4.v1, c5.v1}));
    put6(v + 12 * xs, xs, bt6((f6){c0.v2, c1.v2, c2.v2, c3.v2, c4.v2, c5.v2}));
    put6(v + 18 * xs, xs, bt6((f6){c0.v3, c1.v3, c2.v3, c3.v3, c4.v3, c5.v3}));
    put6(v + 24 * xs, xs, bt6((f6){c0.v4, c1.v4, c2.v4, c3.v4, c4.v4, c5.v4}));
    put6(v + 30 * xs, xs, bt6((f6){c0.v5, c1.v5, c2.v5, c3.v5, c4.v5, c5.v5}));
}

/* d += B dv B^T, the adjoint of input_tile (neighbouring patches overlap) */
ALWAYS_INLINE void patch_grad2(const float *restrict dv, int64_t xs, float *restrict d,
                               int64_t rs, int64_t ps, int64_t c)
{
    /* B along each row of dv, then B down each column */
    f4 q0 = b4(get4(dv, xs)), q1 = b4(get4(dv + 4 * xs, xs));
    f4 q2 = b4(get4(dv + 8 * xs, xs)), q3 = b4(get4(dv + 12 * xs, xs));
    add4(d, rs, b4((f4){q0.v0, q1.v0, q2.v0, q3.v0}));
    add4(d + ps, rs, b4((f4){q0.v1, q1.v1, q2.v1, q3.v1}));
    add4(d + patch_col(2, 2, ps, c), rs, b4((f4){q0.v2, q1.v2, q2.v2, q3.v2}));
    add4(d + patch_col(2, 3, ps, c), rs, b4((f4){q0.v3, q1.v3, q2.v3, q3.v3}));
}

ALWAYS_INLINE void patch_grad4(const float *restrict dv, int64_t xs, float *restrict d,
                               int64_t rs, int64_t ps, int64_t c)
{
    f6 q0 = b6(get6(dv, xs)), q1 = b6(get6(dv + 6 * xs, xs)), q2 = b6(get6(dv + 12 * xs, xs));
    f6 q3 = b6(get6(dv + 18 * xs, xs)), q4 = b6(get6(dv + 24 * xs, xs));
    f6 q5 = b6(get6(dv + 30 * xs, xs));
    add6(d, rs, b6((f6){q0.v0, q1.v0, q2.v0, q3.v0, q4.v0, q5.v0}));
    add6(d + ps, rs, b6((f6){q0.v1, q1.v1, q2.v1, q3.v1, q4.v1, q5.v1}));
    add6(d + 2 * ps, rs, b6((f6){q0.v2, q1.v2, q2.v2, q3.v2, q4.v2, q5.v2}));
    add6(d + 3 * ps, rs, b6((f6){q0.v3, q1.v3, q2.v3, q3.v3, q4.v3, q5.v3}));
    add6(d + patch_col(4, 4, ps, c), rs, b6((f6){q0.v4, q1.v4, q2.v4, q3.v4, q4.v4, q5.v4}));
    add6(d + patch_col(4, 5, ps, c), rs, b6((f6){q0.v5, q1.v5, q2.v5, q3.v5, q4.v5, q5.v5}));
}

/* y = A^T mx A */
ALWAYS_INLINE void output_tile2(const float *restrict mx, int64_t xs, float *restrict y,
                                int64_t rs, int64_t cs)
{
    /* A^T down each column, then along each of the two rows */
    f2 h0 = at4(get4(mx, 4 * xs)), h1 = at4(get4(mx + xs, 4 * xs));
    f2 h2 = at4(get4(mx + 2 * xs, 4 * xs)), h3 = at4(get4(mx + 3 * xs, 4 * xs));
    put2(y, cs, at4((f4){h0.v0, h1.v0, h2.v0, h3.v0}));
    put2(y + rs, cs, at4((f4){h0.v1, h1.v1, h2.v1, h3.v1}));
}

ALWAYS_INLINE void output_tile4(const float *restrict mx, int64_t xs, float *restrict y,
                                int64_t rs, int64_t cs)
{
    f4 h0 = at6(get6(mx, 6 * xs)), h1 = at6(get6(mx + xs, 6 * xs));
    f4 h2 = at6(get6(mx + 2 * xs, 6 * xs)), h3 = at6(get6(mx + 3 * xs, 6 * xs));
    f4 h4 = at6(get6(mx + 4 * xs, 6 * xs)), h5 = at6(get6(mx + 5 * xs, 6 * xs));
    put4(y, cs, at6((f6){h0.v0, h1.v0, h2.v0, h3.v0, h4.v0, h5.v0}));
    put4(y + rs, cs, at6((f6){h0.v1, h1.v1, h2.v1, h3.v1, h4.v1, h5.v1}));
    put4(y + 2 * rs, cs, at6((f6){h0.v2, h1.v2, h2.v2, h3.v2, h4.v2, h5.v2}));
    put4(y + 3 * rs, cs, at6((f6){h0.v3, h1.v3, h2.v3, h3.v3, h4.v3, h5.v3}));
}

/* dm = A g A^T, the adjoint of output_tile */
ALWAYS_INLINE void output_grad_tile2(const float *restrict g, int64_t rs, int64_t cs,
                                     float *restrict dm, int64_t xs)
{
    /* A down each of the two columns, then along each row */
    f4 h0 = a2((f2){g[0], g[rs]}), h1 = a2((f2){g[cs], g[rs + cs]});
    put4(dm, xs, a2((f2){h0.v0, h1.v0}));
    put4(dm + 4 * xs, xs, a2((f2){h0.v1, h1.v1}));
    put4(dm + 8 * xs, xs, a2((f2){h0.v2, h1.v2}));
    put4(dm + 12 * xs, xs, a2((f2){h0.v3, h1.v3}));
}

ALWAYS_INLINE void output_grad_tile4(const float *restrict g, int64_t rs, int64_t cs,
                                     float *restrict dm, int64_t xs)
{
    f6 h0 = a4(get4(g, rs)), h1 = a4(get4(g + cs, rs));
    f6 h2 = a4(get4(g + 2 * cs, rs)), h3 = a4(get4(g + 3 * cs, rs));
    put6(dm, xs, a4((f4){h0.v0, h1.v0, h2.v0, h3.v0}));
    put6(dm + 6 * xs, xs, a4((f4){h0.v1, h1.v1, h2.v1, h3.v1}));
    put6(dm + 12 * xs, xs, a4((f4){h0.v2, h1.v2, h2.v2, h3.v2}));
    put6(dm + 18 * xs, xs, a4((f4){h0.v3, h1.v3, h2.v3, h3.v3}));
    put6(dm + 24 * xs, xs, a4((f4){h0.v4, h1.v4, h2.v4, h3.v4}));
    put6(dm + 30 * xs, xs, a4((f4){h0.v5, h1.v5, h2.v5, h3.v5}));
}

typedef enum tile_op { INPUT, PATCH_GRAD, OUTPUT, OUTPUT_GRAD } tile_op;

/* op on one channel of a tile at `at` in its window and `tile` among the
 * transformed tiles. */
ALWAYS_INLINE void tile_apply(int m, tile_op op, float *at, int64_t rs, int64_t ps, int64_t c,
                              float *tile, int64_t xs)
{
    switch (op) {
    case INPUT:
        if (m == 2)
            input_tile2(at, rs, ps, c, tile, xs);
        else
            input_tile4(at, rs, ps, c, tile, xs);
        break;
    case PATCH_GRAD:
        if (m == 2)
            patch_grad2(tile, xs, at, rs, ps, c);
        else
            patch_grad4(tile, xs, at, rs, ps, c);
        break;
    case OUTPUT:
        if (m == 2)
            output_tile2(tile, xs, at, rs, ps);
        else
            output_tile4(tile, xs, at, rs, ps);
        break;
    case OUTPUT_GRAD:
        if (m == 2)
            output_grad_tile2(at, rs, ps, tile, xs);
        else
            output_grad_tile4(at, rs, ps, tile, xs);
        break;
    }
}

/* ---------------------------------------------------------------------
 * Tiles of a chunk: the tile rows [r0, r0 + nr) of the batch (tile row r
 * is row r % TH of image r / TH), T = nr TW tiles at [XI, T, channel]. */

typedef struct wino {
    sc_wino_shape s;
    int xi;         /* (m + 2)^2 */
    int64_t th, tw; /* tile rows and columns of an image */
    int64_t rows;   /* tile rows per chunk */
    int slots;
    const float *x, *u, *bias, *gy;
    float *y, *gx;
    bool gx_fresh;  /* gx is uninitialised: an image's first window is written, not added */
    float *du;      /* per-slot [XI, K, C] partials; NULL: no weight gradient */
    float *scratch; /* per slot: v [XI, T, C], m [XI, T, K], buf; backward dv [XI, T, C] */
    int64_t scratch_floats;
} wino;

/* The tile rows of a chunk that lie in one image: image n, rows
 * [ty0, ty1), the first of their tiles at index `first` of the chunk. */
typedef struct segment {
    int64_t n, ty0, ty1, first;
} segment;

static segment next_segment(const wino *w, int64_t r0, int64_t nr, int64_t r)
{
    int64_t ty0 = r % w->th;
    return (segment){r / w->th, ty0, min64(w->th, ty0 + r0 + nr - r), (r - r0) * w->tw};
}

/* The input rows and columns under a segment's tiles, padding included,
 * and its output tiles' rows and columns (beyond OH x OW where the last
 * tiles stick out). */
static cl_window input_window(const wino *w, segment g)
{
    const sc_wino_shape *s = &w->s;
    return (cl_window){.c = s->c, .h = s->h, .w = s->w, .y0 = s->m * g.ty0 - s->ph,
                       .x0 = -s->pw, .rows = s->m * (g.ty1 - g.ty0) + 2,
                       .cols = s->m * w->tw + 2, .shift = s->m == 4 ? 2 : 1};
}

static cl_window output_window(const wino *w, segment g)
{
    const sc_wino_shape *s = &w->s;
    return (cl_window){.c = s->k, .h = s->oh, .w = s->ow, .y0 = s->m * g.ty0,
                       .rows = s->m * (g.ty1 - g.ty0), .cols = s->m * w->tw,
                       .shift = s->m == 4 ? 2 : 1};
}

static int64_t window_floats(const cl_window *g) { return g->rows * cl_row_floats(g); }

/* The largest input or output window of a chunk, in floats, and its
 * points inside the planes. */
static int64_t max_window_floats(const wino *w)
{
    segment whole = {0, 0, w->rows, 0};
    cl_window in = input_window(w, whole), out = output_window(w, whole);
    return max64(window_floats(&in), window_floats(&out));
}

static int64_t max_window_points(const wino *w)
{
    const sc_wino_shape *s = &w->s;
    return max64((s->m * w->rows + 2) * s->w, s->m * w->rows * s->ow);
}

/* A slot's buf: a window, then the offsets of its points (point_offsets). */
static int64_t buf_floats(const wino *w) { return max_window_floats(w) + max_window_points(w); }

static int32_t *buf_points(const wino *w, float *buf)
{
    return (int32_t *)(buf + max_window_floats(w));
}

/* op on every tile of segment g: its window win [rows, m, HALF, ch] and
 * its transformed tiles in tiles [XI, T, ch]. A row's tiles lie a point
 * apart in the window and among the tiles, so one loop walks all their
 * channels. Neighbouring patches share two columns, which PATCH_GRAD
 * adds to from iterations ch apart: safelen keeps those in order (ch is
 * 8 or more, conv.c). */
ALWAYS_INLINE void segment_tiles(int m, tile_op op, const wino *w, segment g,
                                 const cl_window *win, float *buf, float *tiles, int64_t t)
{
    int64_t ch = win->c, rs = cl_row_floats(win), ps = cl_phase_floats(win), xs = t * ch;
    for (int64_t ty = 0; ty < g.ty1 - g.ty0; ty++) {
        float *at = buf + m * ty * rs, *tile = tiles + (g.first + ty * w->tw) * ch;
#pragma omp simd safelen(8)
        for (int64_t k = 0; k < w->tw * ch; k++)
            tile_apply(m, op, at + k, rs, ps, ch, tile + k, xs);
    }
}

/* The image's gx planes += a segment's window of input gradients.
 * With a fresh gx, an image's first window writes its rows instead and
 * zeroes the rows below, for the later windows to add to. */
static void add_input_grad(const wino *w, segment g, const cl_window *win, float *buf,
                           float *planes)
{
    bool first = w->gx_fresh && g.ty0 == 0;
    from_channels_last(win, buf, NULL, !first, planes, buf_points(w, buf));
    int64_t below = max64(cl_run_of(win).iy1, 0);
    for (int64_t c = 0; first && below < win->h && c < win->c; c++)
        memset(planes + (c * win->h + below) * win->w, 0,
               (size_t)((win->h - below) * win->w) * sizeof *planes);
}

/* op on every tile of the chunk, between its windows and tiles [XI, T,
 * channel]:
 *   INPUT:        v = B^T d B, d the patches of x;
 *   PATCH_GRAD:   gx += B dv B^T;
 *   OUTPUT:       y = A^T m A (+ bias), cut to OH x OW;
 *   OUTPUT_GRAD:  dm = A gy A^T (gy zero beyond OH x OW). */
ALWAYS_INLINE void chunk_tiles_of(int m, tile_op op, const wino *w, int64_t r0, int64_t nr,
                                  float *tiles, float *buf)
{
    bool by_input = op == INPUT || op == PATCH_GRAD;
    for (int64_t r = r0; r < r0 + nr;) {
        segment g = next_segment(w, r0, nr, r);
        cl_window win = by_input ? input_window(w, g) : output_window(w, g);
        int64_t image = g.n * win.c * win.h * win.w;
        if (op == INPUT)
            to_channels_last(&win, w->x + image, buf, buf_points(w, buf));
        else if (op == OUTPUT_GRAD)
            to_channels_last(&win, w->gy + image, buf, buf_points(w, buf));
        else if (op == PATCH_GRAD)
            memset(buf, 0, (size_t)window_floats(&win) * sizeof *buf);
        segment_tiles(m, op, w, g, &win, buf, tiles, nr * w->tw);
        if (op == OUTPUT)
            from_channels_last(&win, buf, w->bias, false, w->y + image, buf_points(w, buf));
        else if (op == PATCH_GRAD)
            add_input_grad(w, g, &win, buf, w->gx + image);
        r += g.ty1 - g.ty0;
    }
}

/* chunk_tiles_of with m and op constants. */
SC_CPU_CLONES
static void chunk_tiles(tile_op op, const wino *w, int64_t r0, int64_t nr, float *tiles,
                        float *buf)
{
    bool f4x4 = w->s.m == 4;
    switch (op) {
    case INPUT:
        f4x4 ? chunk_tiles_of(4, INPUT, w, r0, nr, tiles, buf)
             : chunk_tiles_of(2, INPUT, w, r0, nr, tiles, buf);
        break;
    case PATCH_GRAD:
        f4x4 ? chunk_tiles_of(4, PATCH_GRAD, w, r0, nr, tiles, buf)
             : chunk_tiles_of(2, PATCH_GRAD, w, r0, nr, tiles, buf);
        break;
    case OUTPUT:
        f4x4 ? chunk_tiles_of(4, OUTPUT, w, r0, nr, tiles, buf)
             : chunk_tiles_of(2, OUTPUT, w, r0, nr, tiles, buf);
        break;
    case OUTPUT_GRAD:
        f4x4 ? chunk_tiles_of(4, OUTPUT_GRAD, w, r0, nr, tiles, buf)
             : chunk_tiles_of(2, OUTPUT_GRAD, w, r0, nr, tiles, buf);
        break;
    }
}

/* ---------------------------------------------------------------------
 * Chunks. */

/* A slot's v, m and buf; returns buf. */
static float *slot_scratch(const wino *w, int slot, float **v, float **m)
{
    int64_t t = w->rows * w->tw;
    *v = w->scratch + slot * w->scratch_floats;
    *m = *v + w->xi * t * w->s.c;
    return *m + w->xi * t * w->s.k;
}

/* A slot's dv, after its buf (backward with an input gradient only). */
static float *slot_dv(const wino *w, int slot)
{
    float *v, *m;
    return slot_scratch(w, slot, &v, &m) + buf_floats(w);
}

/* m[xi] [T, K] = v[xi] [T, C] u[xi] [C, K] */
static void forward_range(const void *arg, int slot, int64_t n0, int64_t n1)
{
    const wino *w = arg;
    const sc_wino_shape *s = &w->s;
    float *v, *m, *buf = slot_scratch(w, slot, &v, &m);
    for (int64_t r0 = n0 * w->th; r0 < n1 * w->th; r0 += w->rows) {
        int64_t nr = min64(w->rows, n1 * w->th - r0), t = nr * w->tw;
        chunk_tiles(INPUT, w, r0, nr, v, buf);
        for (int xi = 0; xi < w->xi; xi++)
            sc_conv_sgemm_small(CblasNoTrans, CblasNoTrans, t, s->k, s->c, v + xi * t * s->c,
                                s->c, w->u + xi * s->c * s->k, s->k, 0.0f, m + xi * t * s->k,
                                s->k);
        chunk_tiles(OUTPUT, w, r0, nr, m, buf);
    }
}

/* du[xi] [K, C] += dm[xi]^T v[xi] ([T, K] and [T, C]);
 * dv[xi] [T, C] = dm[xi] u[xi] ([K, C]) */
static void backward_range(const void *arg, int slot, int64_t n0, int64_t n1)
{
    const wino *w = arg;
    const sc_wino_shape *s = &w->s;
    float *v, *dm, *buf = slot_scratch(w, slot, &v, &dm);
    float *du = w->du ? w->du + slot * w->xi * s->k * s->c : NULL, *dv = slot_dv(w, slot);
    for (int64_t r0 = n0 * w->th; r0 < n1 * w->th; r0 += w->rows) {
        int64_t nr = min64(w->rows, n1 * w->th - r0), t = nr * w->tw;
        chunk_tiles(OUTPUT_GRAD, w, r0, nr, dm, buf);
        if (du) {
            chunk_tiles(INPUT, w, r0, nr, v, buf);
            for (int xi = 0; xi < w->xi; xi++)
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)s->k, (int)s->c,
                            (int)t, 1.0f, dm + xi * t * s->k, (int)s->k, v + xi * t * s->c,
                            (int)s->c, 1.0f, du + xi * s->k * s->c, (int)s->c);
        }
        if (!w->gx)
            continue;
        for (int xi = 0; xi < w->xi; xi++)
            sc_conv_sgemm_small(CblasNoTrans, CblasNoTrans, t, s->c, s->k, dm + xi * t * s->k,
                                s->k, w->u + xi * s->k * s->c, s->c, 0.0f, dv + xi * t * s->c,
                                s->c);
        chunk_tiles(PATCH_GRAD, w, r0, nr, dv, buf);
    }
}

/* The geometry, per-slot scratch and the transformed weights when
 * weight is given: forward's u [XI, C, K], or backward's [XI, K, C],
 * which only an input gradient needs (with dv in the scratch). */
static sc_status wino_init(wino *w, sc_ctx *ctx, const sc_wino_shape *s, const float *weight,
                           bool backward)
{
    bool dv = backward && weight;
    int m = s->m;
    *w = (wino){.s = *s, .xi = (m + 2) * (m + 2), .th = (s->oh + m - 1) / m,
                .tw = (s->ow + m - 1) / m};
    w->rows = max64(TILES / w->tw, 1);
    w->slots = sc_conv_slots(s->n);
    w->scratch_floats = w->xi * (s->c + s->k + (dv ? s->c : 0)) * w->rows * w->tw + buf_floats(w);
    w->scratch = sc_ctx_scratch(ctx, (size_t)(w->slots * w->scratch_floats) * sizeof(float));
    float *u = weight ? sc_ctx_scratch(ctx, (size_t)(w->xi * s->k * s->c) * sizeof(float)) : NULL;
    if (!w->scratch || (weight && !u))
        return SC_ERR_NOMEM;
    if (u)
        weight_transform(s, weight, !backward, u);
    w->u = u;
    return SC_OK;
}

sc_status sc_wino_forward(sc_ctx *ctx, const sc_wino_shape *s, const float *x,
                          const float *weight, const float *bias, float *y)
{
    wino w;
    SC_TRY(wino_init(&w, ctx, s, weight, false));
    w.x = x;
    w.bias = bias;
    w.y = y;
    sc_conv_split(s->n, w.slots, forward_range, &w);
    return SC_OK;
}

sc_status sc_wino_backward(sc_ctx *ctx, const sc_wino_shape *s, const float *x,
                           const float *weight, const float *gy, float *gx, bool gx_fresh,
                           float *gw)
{
    wino w;
    SC_TRY(wino_init(&w, ctx, s, gx ? weight : NULL, true));
    w.x = x;
    w.gy = gy;
    w.gx = gx;
    w.gx_fresh = gx_fresh;
    size_t du_bytes = (size_t)(w.slots * w.xi * s->k * s->c) * sizeof(float);
    if (gw) {
        w.du = sc_ctx_scratch(ctx, du_bytes);
        if (!w.du)
            return SC_ERR_NOMEM;
        memset(w.du, 0, du_bytes);
    }
    sc_conv_split(s->n, w.slots, backward_range, &w);
    if (gw)
        weight_grad(s, w.du, w.slots, gw);
    return SC_OK;
}
