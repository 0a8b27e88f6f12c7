/* 3x3 convolutions at stride 1 by Winograd's minimal filtering F(m x m,
 * 3x3), m = 2 or 4 (Lavin and Gray, "Fast Algorithms for Convolutional
 * Neural Networks", 2016). conv.c picks m per layer (sc_wino_shape).
 *
 * The output is cut into m x m tiles. Tile t of output channel k is
 *     y_kt = A^T [ sum_c U_kc (.) V_ct ] A,  U_kc = G w_kc G^T,  V_ct = B^T d_ct B,
 * with d_ct the a x a input patch under the tile (a = m + 2; zero in the
 * padding) and (.) the element-wise product. For each of the XI = a^2
 * positions xi of a transformed tile, the sum over c is one GEMM,
 *     M[xi] [K, T] = U[xi] [K, C] V[xi] [C, T],
 * so an output costs a^2 / m^2 multiply-adds per channel pair instead of
 * 9 (F(2x2): 4, F(4x4): 2.25); the transforms are additions and
 * multiplications by constants. Backward runs the same algebra adjoint:
 *     dM_kt = A gy_kt A^T,  dU[xi] += dM[xi] V[xi]^T,  dV[xi] = U[xi]^T dM[xi],
 *     gw_kc += G^T dU_kc G,  gx (patches overlap) += B dV_ct B^T.
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
 * The transforms walk tiles, a whole tile per iteration, on values held
 * in small structs (f4, f6) that the compiler keeps in registers, so that
 * `omp simd` vectorises the walk: input rows are split into m phases
 * beforehand (phase p holds columns m u + p), which makes every load and
 * store unit stride. The output transforms and the input's adjoint walk
 * all the tiles a chunk has in an image at once, not a row of tiles at a
 * time: a 14x14 layer's row has 7 tiles of 2x2, too few for AVX2's 8
 * lanes. The input transform reads patches that overlap along the row,
 * and walks a row at a time, in blocks of 8 or 4 tiles
 * (SC_CPU_ROW_BLOCKS); F(4x4)'s in two passes (input_row4). Rows of
 * fewer than 3 tiles of 4x4 vectorise too poorly for F(4x4) to pay
 * (conv.c).
 *
 * Each channel's rows under a chunk are a short run of memory apart from
 * the next channel's, too short for the hardware's prefetchers: the
 * transforms ask for the next channel's rows while they work on this
 * one's (prefetch_rows). */
#include <cblas.h>
#include <string.h>

#include "conv_impl.h"

/* Tiles per chunk: a chunk's transformed input and output stay in L2
 * (98 to 392 measured alike on the cnn's 14x14 layer with F(2x2)). Fewer
 * for F(4x4), whose tiles are 2.25 times larger, made its products
 * slower: at 44 tiles, the resnet's took about 10% more time. */
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

ALWAYS_INLINE f6 bt6(f6 d)
{
    return (f6){d.v0 - 1.5f * d.v1 - 2.0f * d.v2 + 1.5f * d.v3 + d.v4,
                -d.v1 + 0.5f * d.v2 + 2.5f * d.v3 + d.v4,
                d.v1 - 2.5f * d.v2 + 0.5f * d.v3 + d.v4,
                -2.0f * d.v1 - d.v2 + 2.0f * d.v3 + d.v4,
                0.5f * d.v1 - d.v2 - 0.5f * d.v3 + d.v4,
                d.v1 - 1.5f * d.v2 - 2.0f * d.v3 + 1.5f * d.v4 + d.v5};
}

ALWAYS_INLINE f6 b6(f6 g)
{
    return (f6){g.v0,
                -1.5f * g.v0 - g.v1 + g.v2 - 2.0f * g.v3 + 0.5f * g.v4 + g.v5,
                -2.0f * g.v0 + 0.5f * g.v1 - 2.5f * g.v2 - g.v3 - g.v4 - 1.5f * g.v5,
                1.5f * g.v0 + 2.5f * g.v1 + 0.5f * g.v2 + 2.0f * g.v3 - 0.5f * g.v4 - 2.0f * g.v5,
                g.v0 + g.v1 + g.v2 + g.v3 + g.v4 + 1.5f * g.v5,
                g.v5};
}

ALWAYS_INLINE f4 at6(f6 m)
{
    return (f4){m.v0 + m.v1 + m.v2 + m.v3 + m.v4,
                m.v1 - m.v2 + 0.5f * m.v3 - 2.0f * m.v4,
                m.v1 + m.v2 + 0.25f * m.v3 + 4.0f * m.v4,
                m.v1 - m.v2 + 0.125f * m.v3 - 8.0f * m.v4 + m.v5};
}

ALWAYS_INLINE f6 a4(f4 g)
{
    return (f6){g.v0,
                g.v0 + g.v1 + g.v2 + g.v3,
                g.v0 - g.v1 + g.v2 - g.v3,
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
 * Weights: u [XI, K, C] from weight [K, C, 3, 3], and the adjoint; xi =
 * a i + j holds row i, column j of a transformed a x a tile. Once a step
 * per layer, so the loops run over arrays. */

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

/* g [3, 3] += G^T du G, du the [XI, K, C] at weight n of the K C. */
ALWAYS_INLINE void add_weight_grad(int m, int64_t kc, const float *du, float *g)
{
    int a = m + 2;
    f3 r[6]; /* G^T along each row of du */
    for (int i = 0; i < a; i++) {
        float row[6];
        for (int j = 0; j < a; j++)
            row[j] = du[(a * i + j) * kc];
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

/* Weights per block of weight_transform. Transformed one by one, each
 * weight's XI values go to XI rows of u K C floats apart (64 KB for 128
 * channels in and out), which share a set of L1 and evict each other;
 * a block is transformed into a small buffer, then copied out a row at a
 * time. The loops name m as a constant, so that the transforms unroll. */
enum { WEIGHT_BLOCK = 64 };

static void weight_transform(const sc_wino_shape *s, const float *weight, float *u)
{
    int64_t kc = s->k * s->c, blocks = (kc + WEIGHT_BLOCK - 1) / WEIGHT_BLOCK;
    int xi = (s->m + 2) * (s->m + 2);
#pragma omp parallel for schedule(static) if (kc > 1024)
    for (int64_t b = 0; b < blocks; b++) {
        int64_t n0 = b * WEIGHT_BLOCK, len = min64(WEIGHT_BLOCK, kc - n0);
        float t[36 * WEIGHT_BLOCK]; /* [XI, WEIGHT_BLOCK]: u [XI, n0 : n0 + len) */
        for (int64_t i = 0; i < len; i++) {
            if (s->m == 4)
                transform_weight(4, WEIGHT_BLOCK, weight + 9 * (n0 + i), t + i);
            else
                transform_weight(2, WEIGHT_BLOCK, weight + 9 * (n0 + i), t + i);
        }
        for (int x = 0; x < xi; x++)
            memcpy(u + x * kc + n0, t + x * WEIGHT_BLOCK, (size_t)len * sizeof(float));
    }
}

/* gw [K, C, 3, 3] += G^T du G */
static void weight_grad(const sc_wino_shape *s, const float *du, float *gw)
{
    int64_t kc = s->k * s->c;
#pragma omp parallel for schedule(static) if (kc > 1024)
    for (int64_t n = 0; n < kc; n++) {
        if (s->m == 4)
            add_weight_grad(4, kc, du + n, gw + 9 * n);
        else
            add_weight_grad(2, kc, du + n, gw + 9 * n);
    }
}

/* ---------------------------------------------------------------------
 * Tiles along a row. A row of TW tiles covers a = m + 2 input rows of
 * m TW + 2 padded columns, held as m phases of TW + 1 columns, phase p
 * holding columns m u + p; a phase's rows are ld floats apart, and a
 * row's phases pst apart (wino_init). Tile tx spans phases 0 to m - 1 at
 * tx, then phases 0 and 1 at tx + 1. Transformed tiles are at
 * [xi xs + tx]. */

/* v = B^T d B for the patches d of tiles [t0, t0 + n) of the row. */
ALWAYS_INLINE void input_patches2(const float *restrict ph, int64_t pst, int64_t ld, int64_t t0,
                                  int64_t n, float *restrict v, int64_t xs)
{
    const float *e = ph, *o = ph + pst;
#pragma omp simd
    for (int64_t tx = t0; tx < t0 + n; tx++) {
        /* B^T down each column of the patch, then B^T along each row */
        f4 c0 = bt4(get4(e + tx, ld)), c1 = bt4(get4(o + tx, ld));
        f4 c2 = bt4(get4(e + tx + 1, ld)), c3 = bt4(get4(o + tx + 1, ld));
        put4(v + tx, xs, bt4((f4){c0.v0, c1.v0, c2.v0, c3.v0}));
        put4(v + 4 * xs + tx, xs, bt4((f4){c0.v1, c1.v1, c2.v1, c3.v1}));
        put4(v + 8 * xs + tx, xs, bt4((f4){c0.v2, c1.v2, c2.v2, c3.v2}));
        put4(v + 12 * xs + tx, xs, bt4((f4){c0.v3, c1.v3, c2.v3, c3.v3}));
    }
}

/* v[a] = B^T along the rows of tiles [t0, t0 + n)'s patches, the
 * patches' columns transformed down into row a of col (input_row4). */
ALWAYS_INLINE void row_patches4(const float *restrict r, int64_t half, int64_t t0, int64_t n,
                                float *restrict v, int64_t xs)
{
#pragma omp simd
    for (int64_t tx = t0; tx < t0 + n; tx++)
        put6(v + tx, xs,
             bt6((f6){r[tx], r[half + tx], r[2 * half + tx], r[3 * half + tx], r[tx + 1],
                      r[half + tx + 1]}));
}

/* v = B^T d B for the patches of a row of TW tiles of F(4x4), in two
 * passes: B^T down the columns, all of the rows' columns in one loop
 * (neighbouring patches share two), into col [6, 4 half]; then B^T
 * along each patch's rows. Transformed whole, as input_patches2 does, a
 * tile holds 36 values and more, which spill out of AVX2's 16 registers
 * (though the two passes measured no faster on the resnet). */
ALWAYS_INLINE void input_row4(const float *restrict ph, int64_t half, int64_t tw,
                              float *restrict col, float *restrict v, int64_t xs)
{
    int64_t ld = 4 * half; /* phase p of row i at ph [i ld + p half] */
#pragma omp simd
    for (int64_t j = 0; j < ld; j++)
        put6(col + j, ld, bt6(get6(ph + j, ld)));
    for (int a = 0; a < 6; a++)
        SC_CPU_ROW_BLOCKS(tw, t0, n, row_patches4(col + a * ld, half, t0, n, v + 6 * a * xs, xs));
}

/* v = B^T d B for each patch d of a row of TW tiles, vectorised; the
 * phases pst and ld apart (wino_init), col input_row4's. */
ALWAYS_INLINE void input_row(int m, const float *restrict ph, int64_t pst, int64_t ld,
                             int64_t tw, float *restrict col, float *restrict v, int64_t xs)
{
    if (m == 2)
        SC_CPU_ROW_BLOCKS(tw, t0, n, input_patches2(ph, pst, ld, t0, n, v, xs));
    else
        input_row4(ph, tw + 1, tw, col, v, xs);
}

/* tmp [XI, n] = B dv B^T for each of n patches, the adjoint of input_row:
 * tmp [a j + i, n] holds column j, row i of the patches. */
ALWAYS_INLINE void patch_grads2(const float *restrict dv, int64_t xs, int64_t n,
                                float *restrict tmp)
{
#pragma omp simd
    for (int64_t tx = 0; tx < n; tx++) {
        /* B along each row a, giving the columns' values q_a.j; B down each column */
        f4 q0 = b4(get4(dv + tx, xs)), q1 = b4(get4(dv + 4 * xs + tx, xs));
        f4 q2 = b4(get4(dv + 8 * xs + tx, xs)), q3 = b4(get4(dv + 12 * xs + tx, xs));
        put4(tmp + tx, n, b4((f4){q0.v0, q1.v0, q2.v0, q3.v0}));
        put4(tmp + 4 * n + tx, n, b4((f4){q0.v1, q1.v1, q2.v1, q3.v1}));
        put4(tmp + 8 * n + tx, n, b4((f4){q0.v2, q1.v2, q2.v2, q3.v2}));
        put4(tmp + 12 * n + tx, n, b4((f4){q0.v3, q1.v3, q2.v3, q3.v3}));
    }
}

ALWAYS_INLINE void patch_grads4(const float *restrict dv, int64_t xs, int64_t n,
                                float *restrict tmp)
{
#pragma omp simd
    for (int64_t tx = 0; tx < n; tx++) {
        f6 q0 = b6(get6(dv + tx, xs)), q1 = b6(get6(dv + 6 * xs + tx, xs));
        f6 q2 = b6(get6(dv + 12 * xs + tx, xs)), q3 = b6(get6(dv + 18 * xs + tx, xs));
        f6 q4 = b6(get6(dv + 24 * xs + tx, xs)), q5 = b6(get6(dv + 30 * xs + tx, xs));
        put6(tmp + tx, n, b6((f6){q0.v0, q1.v0, q2.v0, q3.v0, q4.v0, q5.v0}));
        put6(tmp + 6 * n + tx, n, b6((f6){q0.v1, q1.v1, q2.v1, q3.v1, q4.v1, q5.v1}));
        put6(tmp + 12 * n + tx, n, b6((f6){q0.v2, q1.v2, q2.v2, q3.v2, q4.v2, q5.v2}));
        put6(tmp + 18 * n + tx, n, b6((f6){q0.v3, q1.v3, q2.v3, q3.v3, q4.v3, q5.v3}));
        put6(tmp + 24 * n + tx, n, b6((f6){q0.v4, q1.v4, q2.v4, q3.v4, q4.v4, q5.v4}));
        put6(tmp + 30 * n + tx, n, b6((f6){q0.v5, q1.v5, q2.v5, q3.v5, q4.v5, q5.v5}));
    }
}

ALWAYS_INLINE void patch_grads(int m, const float *restrict dv, int64_t xs, int64_t n,
                               float *restrict tmp)
{
    if (m == 2)
        patch_grads2(dv, xs, n, tmp);
    else
        patch_grads4(dv, xs, n, tmp);
}

/* The phases [a, ld] += a row of TW patches' columns from tmp
 * (patch_grads, rows n apart). Neighbouring patches share phases 0 and
 * 1: there, column tx of a row takes patch tx's column, then patch
 * tx - 1's, in one pass (a second pass shifted by a column would load
 * across the first's stores, which stalls). */
ALWAYS_INLINE void add_patch_row(int m, const float *restrict tmp, int64_t n, int64_t tw,
                                 float *restrict ph, int64_t pst, int64_t ld)
{
    int a = m + 2;
    for (int i = 0; i < a; i++) {
        float *row = ph + i * ld;
        const float *c = tmp + i * n; /* column j at c + a j n */
        for (int p = 0; p < m; p++)
            row[p * pst] += c[p * a * n];
#pragma omp simd
        for (int64_t tx = 1; tx < tw; tx++)
            for (int p = 0; p < m; p++) {
                float *r = row + p * pst;
                const float *cp = c + p * a * n, *next = c + (p + m) * a * n;
                r[tx] = p < 2 ? r[tx] + cp[tx] + next[tx - 1] : r[tx] + cp[tx];
            }
        for (int p = 0; p < 2; p++)
            row[p * pst + tw] += c[(p + m) * a * n + tw - 1];
    }
}

/* The m x m outputs y = A^T m A of nt tiles, as m phases of m output
 * rows: row i, phase p at y [(m p + i) nt + tx]. */
ALWAYS_INLINE void output_row2(const float *restrict m, int64_t xs, int64_t nt,
                               float *restrict y)
{
    float *ye = y, *yo = y + 2 * nt;
#pragma omp simd
    for (int64_t tx = 0; tx < nt; tx++) {
        /* A^T down each column b, then along each of the two rows */
        f2 h0 = at4(get4(m + tx, 4 * xs)), h1 = at4(get4(m + xs + tx, 4 * xs));
        f2 h2 = at4(get4(m + 2 * xs + tx, 4 * xs)), h3 = at4(get4(m + 3 * xs + tx, 4 * xs));
        f2 r0 = at4((f4){h0.v0, h1.v0, h2.v0, h3.v0}), r1 = at4((f4){h0.v1, h1.v1, h2.v1, h3.v1});
        ye[tx] = r0.v0;
        yo[tx] = r0.v1;
        ye[nt + tx] = r1.v0;
        yo[nt + tx] = r1.v1;
    }
}

ALWAYS_INLINE void output_row4(const float *restrict m, int64_t xs, int64_t nt,
                               float *restrict y)
{
#pragma omp simd
    for (int64_t tx = 0; tx < nt; tx++) {
        f4 h0 = at6(get6(m + tx, 6 * xs)), h1 = at6(get6(m + xs + tx, 6 * xs));
        f4 h2 = at6(get6(m + 2 * xs + tx, 6 * xs)), h3 = at6(get6(m + 3 * xs + tx, 6 * xs));
        f4 h4 = at6(get6(m + 4 * xs + tx, 6 * xs)), h5 = at6(get6(m + 5 * xs + tx, 6 * xs));
        put4(y + tx, 4 * nt, at6((f6){h0.v0, h1.v0, h2.v0, h3.v0, h4.v0, h5.v0}));
        put4(y + nt + tx, 4 * nt, at6((f6){h0.v1, h1.v1, h2.v1, h3.v1, h4.v1, h5.v1}));
        put4(y + 2 * nt + tx, 4 * nt, at6((f6){h0.v2, h1.v2, h2.v2, h3.v2, h4.v2, h5.v2}));
        put4(y + 3 * nt + tx, 4 * nt, at6((f6){h0.v3, h1.v3, h2.v3, h3.v3, h4.v3, h5.v3}));
    }
}

/* dm = A g A^T for each of nt tiles g of m output rows held as m phases
 * (the layout of output_row, whose adjoint this is). */
ALWAYS_INLINE void output_grad_row2(const float *restrict g, int64_t nt, float *restrict dm,
                                    int64_t xs)
{
    const float *ge = g, *go = g + 2 * nt;
#pragma omp simd
    for (int64_t tx = 0; tx < nt; tx++) {
        /* A down each of the two columns, then along each row a */
        f4 h0 = a2((f2){ge[tx], ge[nt + tx]}), h1 = a2((f2){go[tx], go[nt + tx]});
        put4(dm + tx, xs, a2((f2){h0.v0, h1.v0}));
        put4(dm + 4 * xs + tx, xs, a2((f2){h0.v1, h1.v1}));
        put4(dm + 8 * xs + tx, xs, a2((f2){h0.v2, h1.v2}));
        put4(dm + 12 * xs + tx, xs, a2((f2){h0.v3, h1.v3}));
    }
}

ALWAYS_INLINE void output_grad_row4(const float *restrict g, int64_t nt, float *restrict dm,
                                    int64_t xs)
{
#pragma omp simd
    for (int64_t tx = 0; tx < nt; tx++) {
        f6 h0 = a4(get4(g + tx, nt)), h1 = a4(get4(g + 4 * nt + tx, nt));
        f6 h2 = a4(get4(g + 8 * nt + tx, nt)), h3 = a4(get4(g + 12 * nt + tx, nt));
        put6(dm + tx, xs, a4((f4){h0.v0, h1.v0, h2.v0, h3.v0}));
        put6(dm + 6 * xs + tx, xs, a4((f4){h0.v1, h1.v1, h2.v1, h3.v1}));
        put6(dm + 12 * xs + tx, xs, a4((f4){h0.v2, h1.v2, h2.v2, h3.v2}));
        put6(dm + 18 * xs + tx, xs, a4((f4){h0.v3, h1.v3, h2.v3, h3.v3}));
        put6(dm + 24 * xs + tx, xs, a4((f4){h0.v4, h1.v4, h2.v4, h3.v4}));
        put6(dm + 30 * xs + tx, xs, a4((f4){h0.v5, h1.v5, h2.v5, h3.v5}));
    }
}

/* ---------------------------------------------------------------------
 * Tiles of a chunk: the tile rows [r0, r0 + nr) of the batch (tile row r
 * is row r % TH of image r / TH), T = nr TW tiles at [xi, channel, T]. */

typedef struct wino {
    sc_wino_shape s;
    int xi;         /* (m + 2)^2 */
    int64_t th, tw; /* tile rows and columns of an image */
    int64_t rows;   /* tile rows per chunk */
    int64_t half;   /* columns of a phase of a padded input row: TW + 1 */
    int64_t ld;     /* floats from a row of a phase to the next */
    int64_t pst;    /* floats from a phase of a row to the next */
    int slots;
    const float *x, *u, *bias, *gy;
    float *y, *gx;
    bool gx_fresh;  /* gx is uninitialised: input_grad_tiles zeroes each plane first */
    float *du;      /* per-slot [XI, K, C] partials; NULL: no weight gradient */
    float *scratch; /* per slot: v [XI, C, T], m [XI, K, T], buf; backward dv [XI, C, T] */
    int64_t scratch_floats;
} wino;

/* Floats of the phases of the padded input rows under a chunk. */
static int64_t phase_floats(const wino *w) { return (w->s.m * w->rows + 2) * w->s.m * w->half; }

/* A slot's buf: the phases of the padded input rows under a chunk's tile
 * rows, then a segment's patch columns tmp [XI, T] at most (patch_grads)
 * or a tile row's columns transformed down (input_row4); or a segment's
 * output rows [m m, T] (merge_out_rows). */
static int64_t buf_floats(const wino *w)
{
    return phase_floats(w) + max64(w->xi * w->rows * w->tw, 24 * w->half);
}

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

/* A padded input row as m phases: column p of the row [W] padded by pw
 * zeros on the left and zeros wherever it ends is in[p - pw]. Columns
 * m u to m u + m - 1 all lie in the row for u in [lo, hi); the few
 * outside are looked up one by one. The loops read and write the rows
 * themselves, no padded copy: a copy written at one offset and read back
 * at another stalls every load on the stores it straddles (store-to-load
 * forwarding fails), which cost a third of the input transform. */
typedef struct pad_span {
    int64_t lo, hi;
} pad_span;

ALWAYS_INLINE pad_span pad_span_of(int m, const sc_wino_shape *s, int64_t half)
{
    int64_t lo = min64((s->pw + m - 1) / m, half);
    return (pad_span){lo, max64(lo, min64((s->w + s->pw) / m, half))};
}

/* Padded column p of input row `in`. */
ALWAYS_INLINE float padded(const sc_wino_shape *s, const float *in, int64_t p)
{
    return p >= s->pw && p < s->pw + s->w ? in[p - s->pw] : 0.0f;
}

/* ph [m phases pst apart, half] = input row `in` [W], padded (the
 * layouts: wino_init). */
ALWAYS_INLINE void split_row(int m, const sc_wino_shape *s, pad_span span, int64_t half,
                             const float *restrict in, float *restrict ph, int64_t pst)
{
    for (int64_t u = 0; u < span.lo; u++)
        for (int p = 0; p < m; p++)
            ph[p * pst + u] = padded(s, in, m * u + p);
    const float *from = in + m * span.lo - s->pw;
#pragma omp simd
    for (int64_t u = 0; u < span.hi - span.lo; u++)
        for (int p = 0; p < m; p++)
            ph[p * pst + span.lo + u] = from[m * u + p];
    for (int64_t u = span.hi; u < half; u++)
        for (int p = 0; p < m; p++)
            ph[p * pst + u] = padded(s, in, m * u + p);
}

/* Padded column p of output row `out` += g (nothing in the padding). */
ALWAYS_INLINE void add_padded(const sc_wino_shape *s, float *out, int64_t p, float g)
{
    if (p >= s->pw && p < s->pw + s->w)
        out[p - s->pw] += g;
}

/* out [W] += the padded row held as phases ph (the adjoint of split_row). */
ALWAYS_INLINE void merge_row(int m, const sc_wino_shape *s, pad_span span, int64_t half,
                             const float *restrict ph, int64_t pst, float *restrict out)
{
    for (int64_t u = 0; u < span.lo; u++)
        for (int p = 0; p < m; p++)
            add_padded(s, out, m * u + p, ph[p * pst + u]);
    float *to = out + m * span.lo - s->pw;
#pragma omp simd
    for (int64_t u = 0; u < span.hi - span.lo; u++)
        for (int p = 0; p < m; p++)
            to[m * u + p] += ph[p * pst + span.lo + u];
    for (int64_t u = span.hi; u < half; u++)
        for (int p = 0; p < m; p++)
            add_padded(s, out, m * u + p, ph[p * pst + u]);
}

/* Input rows [iy0, iy0 + rows) of plane [H, W], padded, as phases. */
ALWAYS_INLINE void split_rows(int m, const wino *w, const float *plane, int64_t iy0,
                              int64_t rows, float *ph)
{
    const sc_wino_shape *s = &w->s;
    pad_span span = pad_span_of(m, s, w->half);
    for (int64_t i = 0; i < rows; i++, ph += w->ld) {
        int64_t iy = iy0 + i;
        if (iy >= 0 && iy < s->h)
            split_row(m, s, span, w->half, plane + iy * s->w, ph, w->pst);
        else
            for (int p = 0; p < m; p++)
                memset(ph + p * w->pst, 0, (size_t)w->half * sizeof *ph);
    }
}

/* gx rows [iy0, iy0 + rows) of plane [H, W] += the padded rows held as
 * phases (the adjoint of split_rows). */
ALWAYS_INLINE void merge_rows(int m, const wino *w, float *plane, int64_t iy0, int64_t rows,
                              const float *ph)
{
    const sc_wino_shape *s = &w->s;
    pad_span span = pad_span_of(m, s, w->half);
    for (int64_t i = 0; i < rows; i++, ph += w->ld) {
        int64_t iy = iy0 + i;
        if (iy >= 0 && iy < s->h)
            merge_row(m, s, span, w->half, ph, w->pst, plane + iy * s->w);
    }
}

/* Asks for rows [y0, y0 + rows) of plane [h, width] to be brought into
 * cache (the file's head says why). */
ALWAYS_INLINE void prefetch_rows(const float *plane, int64_t h, int64_t width, int64_t y0,
                                 int64_t rows)
{
    int64_t from = max64(y0, 0) * width, to = min64(y0 + rows, h) * width;
    for (int64_t i = from; i < to; i += 64 / sizeof(float))
        __builtin_prefetch(plane + i);
}

/* Zeroes rows [0, rows) of the phases at ph. */
ALWAYS_INLINE void zero_phases(int m, const wino *w, float *ph, int64_t rows)
{
    if (m == 2)
        for (int p = 0; p < m; p++)
            memset(ph + p * w->pst, 0, (size_t)(rows * w->half) * sizeof *ph);
    else
        memset(ph, 0, (size_t)(rows * w->ld) * sizeof *ph);
}

/* The input rows under a segment: the first, and how many. */
ALWAYS_INLINE int64_t segment_iy0(int m, const wino *w, segment g)
{
    return m * g.ty0 - w->s.ph;
}

ALWAYS_INLINE int64_t segment_in_rows(int m, segment g) { return m * (g.ty1 - g.ty0) + 2; }

/* v [XI, C, T] = B^T d B for every patch d of the chunk. */
ALWAYS_INLINE void input_tiles_of(int m, const wino *w, int64_t r0, int64_t nr, float *v,
                                  float *ph)
{
    const sc_wino_shape *s = &w->s;
    int64_t t = nr * w->tw;
    float *col = ph + phase_floats(w);
    for (int64_t r = r0; r < r0 + nr;) {
        segment g = next_segment(w, r0, nr, r);
        int64_t iy0 = segment_iy0(m, w, g), rows = segment_in_rows(m, g);
        for (int64_t c = 0; c < s->c; c++) {
            const float *plane = w->x + (g.n * s->c + c) * s->h * s->w;
            if (c + 1 < s->c)
                prefetch_rows(plane + s->h * s->w, s->h, s->w, iy0, rows);
            split_rows(m, w, plane, iy0, rows, ph);
            for (int64_t ty = g.ty0; ty < g.ty1; ty++)
                input_row(m, ph + m * (ty - g.ty0) * w->ld, w->pst, w->ld, w->tw, col,
                          v + c * t + g.first + (ty - g.ty0) * w->tw, s->c * t);
        }
        r += g.ty1 - g.ty0;
    }
}

SC_CPU_CLONES
static void input_tiles(const wino *w, int64_t r0, int64_t nr, float *v, float *buf)
{
    if (w->s.m == 4)
        input_tiles_of(4, w, r0, nr, v, buf);
    else
        input_tiles_of(2, w, r0, nr, v, buf);
}

/* gx += B dv B^T for every patch of the chunk. */
ALWAYS_INLINE void input_grad_tiles_of(int m, const wino *w, int64_t r0, int64_t nr,
                                       const float *dv, float *ph)
{
    const sc_wino_shape *s = &w->s;
    int64_t t = nr * w->tw;
    float *tmp = ph + phase_floats(w);
    for (int64_t r = r0; r < r0 + nr;) {
        segment g = next_segment(w, r0, nr, r);
        int64_t iy0 = segment_iy0(m, w, g), rows = segment_in_rows(m, g);
        int64_t nt = (g.ty1 - g.ty0) * w->tw;
        for (int64_t c = 0; c < s->c; c++) {
            float *plane = w->gx + (g.n * s->c + c) * s->h * s->w;
            if (c + 1 < s->c)
                prefetch_rows(plane + s->h * s->w, s->h, s->w, iy0, rows);
            zero_phases(m, w, ph, rows);
            patch_grads(m, dv + c * t + g.first, s->c * t, nt, tmp);
            for (int64_t ty = 0; ty < g.ty1 - g.ty0; ty++)
                add_patch_row(m, tmp + ty * w->tw, nt, w->tw, ph + m * ty * w->ld, w->pst,
                              w->ld);
            /* An image's plane is zeroed as its first tile row comes, while
             * it is in cache, not all of a slot's images up front. */
            if (w->gx_fresh && g.ty0 == 0)
                memset(plane, 0, (size_t)(s->h * s->w) * sizeof *plane);
            merge_rows(m, w, plane, iy0, rows, ph);
        }
        r += g.ty1 - g.ty0;
    }
}

SC_CPU_CLONES
static void input_grad_tiles(const wino *w, int64_t r0, int64_t nr, const float *dv, float *buf)
{
    if (w->s.m == 4)
        input_grad_tiles_of(4, w, r0, nr, dv, buf);
    else
        input_grad_tiles_of(2, w, r0, nr, dv, buf);
}

/* Output rows m ty + i, i < m, of a segment's tile rows as m phases
 * y [m, m, NT], NT the segment's tiles: phase p of tile j of the segment
 * (row j / TW) at [p, i, j]. So the transforms walk all of a segment's
 * tiles in one loop, which vectorises even when a row has fewer tiles
 * than a vector has lanes (14x14 outputs in 2x2 tiles: 7). */

/* plane [OH, OW] rows from y (+ bias), cut to OH x OW. */
ALWAYS_INLINE void merge_out_rows(int m, const wino *w, segment g, int64_t nt, const float *y,
                                  float bias, float *plane)
{
    const sc_wino_shape *s = &w->s;
    int64_t full = s->ow / m; /* tiles whose columns all lie in the row */
    for (int64_t ty = g.ty0; ty < g.ty1; ty++)
        for (int64_t i = 0; i < m && m * ty + i < s->oh; i++) {
            float *out = plane + (m * ty + i) * s->ow;
            const float *yi = y + i * nt + (ty - g.ty0) * w->tw; /* phase p at + m p nt */
#pragma omp simd
            for (int64_t tx = 0; tx < full; tx++)
                for (int p = 0; p < m; p++)
                    out[m * tx + p] = yi[m * p * nt + tx] + bias;
            for (int p = 0; p < s->ow % m; p++)
                out[m * full + p] = yi[m * p * nt + full] + bias;
        }
}

/* y from plane [OH, OW] rows, zero beyond OH x OW (the adjoint of
 * merge_out_rows, bias aside). */
ALWAYS_INLINE void split_out_rows(int m, const wino *w, segment g, int64_t nt,
                                  const float *plane, float *y)
{
    const sc_wino_shape *s = &w->s;
    int64_t full = s->ow / m;
    for (int64_t ty = g.ty0; ty < g.ty1; ty++)
        for (int64_t i = 0; i < m; i++) {
            float *yi = y + i * nt + (ty - g.ty0) * w->tw;
            if (m * ty + i >= s->oh) {
                for (int p = 0; p < m; p++)
                    memset(yi + m * p * nt, 0, (size_t)w->tw * sizeof *yi);
                continue;
            }
            const float *in = plane + (m * ty + i) * s->ow;
#pragma omp simd
            for (int64_t tx = 0; tx < full; tx++)
                for (int p = 0; p < m; p++)
                    yi[m * p * nt + tx] = in[m * tx + p];
            if (full < w->tw)
                for (int p = 0; p < m; p++)
                    yi[m * p * nt + full] = p < s->ow % m ? in[m * full + p] : 0.0f;
        }
}

/* y = A^T m A (+ bias) for every tile of the chunk, cut to OH x OW. */
ALWAYS_INLINE void output_tiles_of(int m, const wino *w, int64_t r0, int64_t nr,
                                   const float *mx, float *buf)
{
    const sc_wino_shape *s = &w->s;
    int64_t t = nr * w->tw;
    for (int64_t r = r0; r < r0 + nr;) {
        segment g = next_segment(w, r0, nr, r);
        int64_t nt = (g.ty1 - g.ty0) * w->tw;
        for (int64_t k = 0; k < s->k; k++) {
            float *plane = w->y + (g.n * s->k + k) * s->oh * s->ow;
            if (k + 1 < s->k) /* a line is read in before it is written anyway */
                prefetch_rows(plane + s->oh * s->ow, s->oh, s->ow, m * g.ty0,
                              m * (g.ty1 - g.ty0));
            if (m == 2)
                output_row2(mx + k * t + g.first, s->k * t, nt, buf);
            else
                output_row4(mx + k * t + g.first, s->k * t, nt, buf);
            merge_out_rows(m, w, g, nt, buf, w->bias ? w->bias[k] : 0.0f, plane);
        }
        r += g.ty1 - g.ty0;
    }
}

SC_CPU_CLONES
static void output_tiles(const wino *w, int64_t r0, int64_t nr, const float *m, float *buf)
{
    if (w->s.m == 4)
        output_tiles_of(4, w, r0, nr, m, buf);
    else
        output_tiles_of(2, w, r0, nr, m, buf);
}

/* dm [XI, K, T] = A gy A^T for every tile of the chunk (gy zero beyond
 * OH x OW). */
ALWAYS_INLINE void output_grad_tiles_of(int m, const wino *w, int64_t r0, int64_t nr, float *dm,
                                        float *buf)
{
    const sc_wino_shape *s = &w->s;
    int64_t t = nr * w->tw;
    for (int64_t r = r0; r < r0 + nr;) {
        segment g = next_segment(w, r0, nr, r);
        int64_t nt = (g.ty1 - g.ty0) * w->tw;
        for (int64_t k = 0; k < s->k; k++) {
            const float *plane = w->gy + (g.n * s->k + k) * s->oh * s->ow;
            if (k + 1 < s->k)
                prefetch_rows(plane + s->oh * s->ow, s->oh, s->ow, m * g.ty0,
                              m * (g.ty1 - g.ty0));
            split_out_rows(m, w, g, nt, plane, buf);
            if (m == 2)
                output_grad_row2(buf, nt, dm + k * t + g.first, s->k * t);
            else
                output_grad_row4(buf, nt, dm + k * t + g.first, s->k * t);
        }
        r += g.ty1 - g.ty0;
    }
}

SC_CPU_CLONES
static void output_grad_tiles(const wino *w, int64_t r0, int64_t nr, float *dm, float *buf)
{
    if (w->s.m == 4)
        output_grad_tiles_of(4, w, r0, nr, dm, buf);
    else
        output_grad_tiles_of(2, w, r0, nr, dm, buf);
}
/* ---------------------------------------------------------------------
 * Chunks. */

/* A slot's v, m and buf; returns buf. */
static float *slot_scratch(const wino *w, int slot, float **v, float **m)
{
    int64_t t = w->rows * w->tw;
    *v = w->scratch + slot * w->scratch_floats;
    *m = *v + w->xi * w->s.c * t;
    return *m + w->xi * w->s.k * t;
}

/* A slot's dv, after its buf (backward with an input gradient only). */
static float *slot_dv(const wino *w, int slot)
{
    float *v, *m;
    return slot_scratch(w, slot, &v, &m) + buf_floats(w);
}

/* m[xi] [K, T] = u[xi] [K, C] v[xi] [C, T] */
static void forward_range(const void *arg, int slot, int64_t n0, int64_t n1)
{
    const wino *w = arg;
    const sc_wino_shape *s = &w->s;
    float *v, *m, *buf = slot_scratch(w, slot, &v, &m);
    for (int64_t r0 = n0 * w->th; r0 < n1 * w->th; r0 += w->rows) {
        int64_t nr = min64(w->rows, n1 * w->th - r0), t = nr * w->tw;
        input_tiles(w, r0, nr, v, buf);
        for (int xi = 0; xi < w->xi; xi++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)s->k, (int)t, (int)s->c,
                        1.0f, w->u + xi * s->k * s->c, (int)s->c, v + xi * s->c * t, (int)t,
                        0.0f, m + xi * s->k * t, (int)t);
        output_tiles(w, r0, nr, m, buf);
    }
}

/* du[xi] [K, C] += dm[xi] [K, T] v[xi]^T;  dv[xi] [C, T] = u[xi]^T dm[xi] */
static void backward_range(const void *arg, int slot, int64_t n0, int64_t n1)
{
    const wino *w = arg;
    const sc_wino_shape *s = &w->s;
    float *v, *dm, *buf = slot_scratch(w, slot, &v, &dm);
    float *du = w->du ? w->du + slot * w->xi * s->k * s->c : NULL, *dv = slot_dv(w, slot);
    for (int64_t r0 = n0 * w->th; r0 < n1 * w->th; r0 += w->rows) {
        int64_t nr = min64(w->rows, n1 * w->th - r0), t = nr * w->tw;
        output_grad_tiles(w, r0, nr, dm, buf);
        if (du) {
            input_tiles(w, r0, nr, v, buf);
            for (int xi = 0; xi < w->xi; xi++)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)s->k, (int)s->c,
                            (int)t, 1.0f, dm + xi * s->k * t, (int)t, v + xi * s->c * t, (int)t,
                            1.0f, du + xi * s->k * s->c, (int)s->c);
        }
        if (!w->gx)
            continue;
        for (int xi = 0; xi < w->xi; xi++)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)s->c, (int)t, (int)s->k,
                        1.0f, w->u + xi * s->k * s->c, (int)s->c, dm + xi * s->k * t, (int)t,
                        0.0f, dv + xi * s->c * t, (int)t);
        input_grad_tiles(w, r0, nr, dv, buf);
    }
}

/* The geometry, per-slot scratch (with dv for an input gradient) and
 * (when u is wanted) the transformed weights. */
static sc_status wino_init(wino *w, sc_ctx *ctx, const sc_wino_shape *s, const float *weight,
                           bool dv)
{
    int m = s->m;
    *w = (wino){.s = *s, .xi = (m + 2) * (m + 2), .th = (s->oh + m - 1) / m,
                .tw = (s->ow + m - 1) / m};
    w->rows = max64(TILES / w->tw, 1);
    w->half = w->tw + 1;
    /* F(2x2): phase by phase, [m, rows, half]; F(4x4): row by row,
     * [rows, m, half], so that input_row4's first pass walks a row's
     * phases in one loop. */
    w->ld = m == 2 ? w->half : m * w->half;
    w->pst = m == 2 ? (m * w->rows + 2) * w->half : w->half;
    w->slots = sc_conv_slots(s->n);
    w->scratch_floats = w->xi * (s->c + s->k + (dv ? s->c : 0)) * w->rows * w->tw + buf_floats(w);
    w->scratch = sc_ctx_alloc(ctx, (size_t)(w->slots * w->scratch_floats) * sizeof(float));
    float *u = weight ? sc_ctx_alloc(ctx, (size_t)(w->xi * s->k * s->c) * sizeof(float)) : NULL;
    if (!w->scratch || (weight && !u))
        return SC_ERR_NOMEM;
    if (u)
        weight_transform(s, weight, u);
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
    SC_TRY(wino_init(&w, ctx, s, gx ? weight : NULL, gx != NULL));
    w.x = x;
    w.gy = gy;
    w.gx = gx;
    w.gx_fresh = gx_fresh;
    int64_t du_floats = w.xi * s->k * s->c;
    if (gw) {
        w.du = sc_ctx_alloc(ctx, (size_t)((w.slots + 1) * du_floats) * sizeof(float));
        if (!w.du)
            return SC_ERR_NOMEM;
        memset(w.du, 0, (size_t)((w.slots + 1) * du_floats) * sizeof(float));
    }
    sc_conv_split(s->n, w.slots, backward_range, &w);
    if (gw) {
        float *sum = w.du + w.slots * du_floats;
        sc_conv_sum_partials(sum, w.du, w.slots, du_floats);
        weight_grad(s, sum, gw);
    }
    return SC_OK;
}
