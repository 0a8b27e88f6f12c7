/* 3x3 convolutions at stride 1 by Winograd's minimal filtering F(4x4, 3x3)
 * (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks",
 * 2016), on the points 0, +-1, +-2.
 *
 * The output is cut into 4x4 tiles. Tile t of output channel k is
 *     y_kt = A^T [ sum_c U_kc (.) V_ct ] A,  U_kc = G w_kc G^T,  V_ct = B^T d_ct B,
 * with d_ct the 6x6 input patch under the tile (zero in the padding) and
 * (.) the element-wise product. For each of the 36 positions xi of a
 * transformed tile, the sum over c is one GEMM,
 *     M[xi] [K, T] = U[xi] [K, C] V[xi] [C, T],
 * so a tile costs 36 multiply-adds per channel pair instead of 144; the
 * transforms are additions and multiplications by small powers of 2 (and
 * 5). Backward runs the same algebra adjoint:
 *     dM_kt = A gy_kt A^T,  dU[xi] += dM[xi] V[xi]^T,  dV[xi] = U[xi]^T dM[xi],
 *     gw_kc += G^T dU_kc G,  gx (patches overlap) += B dV_ct B^T.
 * F(4x4, 3x3) rounds more than F(2x2, 3x3) (B^T's 4 and 5, A^T's 8 and
 * G's 1/24 scale the terms of a sum unevenly): 10 to 20x the error, up
 * to 1e-5 of the largest |y| on the layers of the shipped models, against
 * 5e-7 (relative to a double-precision direct convolution).
 *
 * Threads split the batch; each walks its images' rows of tiles in chunks
 * of about TILES tiles, its transformed tiles in per-thread scratch from
 * the step arena. dU sums per thread, then in thread order.
 *
 * The transforms take a whole tile per iteration, on values held in small
 * structs (f6) that the compiler keeps in registers (and spills to L1),
 * so that `omp simd` vectorises across tiles. Input patches overlap, so
 * their transforms walk a row of tiles: input rows are split into 4
 * phases (columns mod 4) beforehand, which makes every load and store
 * unit stride. Output tiles do not overlap: their transforms walk all
 * the chunk's tiles of a channel at once, the rows of 4 phases they read
 * or write unpacked row by row, which keeps the vectors full on images
 * only a few tiles wide. */
#include <cblas.h>
#include <string.h>

#include "conv_impl.h"

/* Tiles per chunk: enough columns for the GEMMs to run near full speed,
 * few enough that a chunk's transformed input and output stay near L2
 * (32 to 128 measured alike on the cnn's and the resnet's layers, except
 * 128 channels at 7x7: 13% slower at 100). */
enum { TILES = 64, XI = 36 };

typedef struct f3 { float v0, v1, v2; } f3;
typedef struct f4 { float v0, v1, v2, v3; } f4;
typedef struct f6 { float v0, v1, v2, v3, v4, v5; } f6;

/* ---------------------------------------------------------------------
 * The 1-D transforms and their adjoints:
 *     B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0;
 *            0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1],
 *     G = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6;
 *          1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1],
 *     A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1]. */

ALWAYS_INLINE f6 bt6(f6 d)
{
    float p = d.v4 - 4.0f * d.v2, q = d.v3 - 4.0f * d.v1; /* rows 1, 2 */
    float r = d.v4 - d.v2, s = 2.0f * (d.v3 - d.v1);      /* rows 3, 4 */
    return (f6){4.0f * (d.v0 - d.v2) + r, p + q, p - q, r + s, r - s,
                4.0f * (d.v1 - d.v3) + (d.v5 - d.v3)};
}

ALWAYS_INLINE f6 b6(f6 g)
{
    float s12 = g.v1 + g.v2, d21 = g.v2 - g.v1, s34 = g.v3 + g.v4, d43 = g.v4 - g.v3;
    return (f6){4.0f * g.v0,
                4.0f * (d21 + g.v5) + 2.0f * d43,
                -(5.0f * g.v0 + 4.0f * s12 + s34),
                -(d21 + 2.0f * d43 + 5.0f * g.v5),
                g.v0 + s12 + s34,
                g.v5};
}

ALWAYS_INLINE f4 at6(f6 m)
{
    float s12 = m.v1 + m.v2, d12 = m.v1 - m.v2, s34 = m.v3 + m.v4, d34 = m.v3 - m.v4;
    return (f4){m.v0 + s12 + s34, d12 + 2.0f * d34, s12 + 4.0f * s34, d12 + 8.0f * d34 + m.v5};
}

ALWAYS_INLINE f6 a4(f4 g)
{
    float e = g.v0 + g.v2, o = g.v1 + g.v3;                          /* at +-1 */
    float e2 = g.v0 + 4.0f * g.v2, o2 = 2.0f * (g.v1 + 4.0f * g.v3); /* at +-2 */
    return (f6){g.v0, e + o, e - o, e2 + o2, e2 - o2, g.v3};
}

/* G and G^T multiply by 1/6, 1/12 and 1/24 rounded to float (their
 * rounding is far below the transforms' own): divisions cost 5x more. */
ALWAYS_INLINE f6 g3(f3 w)
{
    float s = w.v0 + w.v2, t = (w.v0 + 4.0f * w.v2) * (1.0f / 24.0f), h = w.v1 * (1.0f / 12.0f);
    return (f6){0.25f * w.v0, (s + w.v1) * (-1.0f / 6.0f), (s - w.v1) * (-1.0f / 6.0f), t + h,
                t - h, w.v2};
}

ALWAYS_INLINE f3 gt6(f6 d)
{
    float s12 = (d.v1 + d.v2) * (1.0f / 6.0f), s34 = d.v3 + d.v4;
    return (f3){0.25f * d.v0 - s12 + s34 * (1.0f / 24.0f),
                (d.v2 - d.v1) * (1.0f / 6.0f) + (d.v3 - d.v4) * (1.0f / 12.0f),
                s34 * (1.0f / 6.0f) - s12 + d.v5};
}

/* Four or six values `stride` apart, and back. */
ALWAYS_INLINE f4 get4(const float *p, int64_t stride)
{
    return (f4){p[0], p[stride], p[2 * stride], p[3 * stride]};
}

ALWAYS_INLINE f6 get6(const float *p, int64_t stride)
{
    return (f6){p[0], p[stride], p[2 * stride], p[3 * stride], p[4 * stride], p[5 * stride]};
}

ALWAYS_INLINE void put4(float *p, int64_t stride, f4 v)
{
    p[0] = v.v0;
    p[stride] = v.v1;
    p[2 * stride] = v.v2;
    p[3 * stride] = v.v3;
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
 * Weights: u [36, K, C] (matrices `us` apart) from weight [K, C, 3, 3],
 * and the adjoint. */

static void weight_transform(const sc_wino_shape *s, const float *weight, float *u, int64_t us)
{
    int64_t kc = s->k * s->c;
#pragma omp parallel for schedule(static) if (kc > 1024)
    for (int64_t i = 0; i < kc; i++) {
        const float *w = weight + 9 * i;
        /* G along each row of w, then down each column b: u[6 a + b] */
        f6 r0 = g3((f3){w[0], w[1], w[2]}), r1 = g3((f3){w[3], w[4], w[5]});
        f6 r2 = g3((f3){w[6], w[7], w[8]});
        put6(u + i, 6 * us, g3((f3){r0.v0, r1.v0, r2.v0}));
        put6(u + us + i, 6 * us, g3((f3){r0.v1, r1.v1, r2.v1}));
        put6(u + 2 * us + i, 6 * us, g3((f3){r0.v2, r1.v2, r2.v2}));
        put6(u + 3 * us + i, 6 * us, g3((f3){r0.v3, r1.v3, r2.v3}));
        put6(u + 4 * us + i, 6 * us, g3((f3){r0.v4, r1.v4, r2.v4}));
        put6(u + 5 * us + i, 6 * us, g3((f3){r0.v5, r1.v5, r2.v5}));
    }
}

/* gw [K, C, 3, 3] += G^T du G */
static void weight_grad(const sc_wino_shape *s, const float *du, int64_t us, float *gw)
{
    int64_t kc = s->k * s->c;
#pragma omp parallel for schedule(static) if (kc > 1024)
    for (int64_t i = 0; i < kc; i++) {
        /* G^T along each row a of du, then down each column j: c_j */
        f3 r0 = gt6(get6(du + i, us)), r1 = gt6(get6(du + 6 * us + i, us));
        f3 r2 = gt6(get6(du + 12 * us + i, us)), r3 = gt6(get6(du + 18 * us + i, us));
        f3 r4 = gt6(get6(du + 24 * us + i, us)), r5 = gt6(get6(du + 30 * us + i, us));
        f3 c0 = gt6((f6){r0.v0, r1.v0, r2.v0, r3.v0, r4.v0, r5.v0});
        f3 c1 = gt6((f6){r0.v1, r1.v1, r2.v1, r3.v1, r4.v1, r5.v1});
        f3 c2 = gt6((f6){r0.v2, r1.v2, r2.v2, r3.v2, r4.v2, r5.v2});
        float *g = gw + 9 * i;
        g[0] += c0.v0;
        g[1] += c1.v0;
        g[2] += c2.v0;
        g[3] += c0.v1;
        g[4] += c1.v1;
        g[5] += c2.v1;
        g[6] += c0.v2;
        g[7] += c1.v2;
        g[8] += c2.v2;
    }
}

/* ---------------------------------------------------------------------
 * Runs of tiles. A row of TW tiles covers 6 input rows of 4 TW + 2
 * padded columns, held as 4 phases (columns mod 4): ph [4, plane] with
 * phase q's rows at ph + q plane, [6, ld], ld >= TW + 1 (tile tx spans
 * columns q0[tx], q1[tx], q2[tx], q3[tx], q0[tx + 1], q1[tx + 1] of the
 * phases q0..q3). Transformed tiles are at [xi xs + tx]. */

/* v = B^T d B for each patch d of the row. */
ALWAYS_INLINE void input_row(const float *restrict ph, int64_t plane, int64_t ld, int64_t tw,
                             float *restrict v, int64_t xs)
{
    const float *q0 = ph, *q1 = ph + plane, *q2 = ph + 2 * plane, *q3 = ph + 3 * plane;
#pragma omp simd
    for (int64_t tx = 0; tx < tw; tx++) {
        /* B^T down each column of the patch, then B^T along each row */
        f6 c0 = bt6(get6(q0 + tx, ld)), c1 = bt6(get6(q1 + tx, ld));
        f6 c2 = bt6(get6(q2 + tx, ld)), c3 = bt6(get6(q3 + tx, ld));
        f6 c4 = bt6(get6(q0 + tx + 1, ld)), c5 = bt6(get6(q1 + tx + 1, ld));
        put6(v + tx, xs, bt6((f6){c0.v0, c1.v0, c2.v0, c3.v0, c4.v0, c5.v0}));
        put6(v + 6 * xs + tx, xs, bt6((f6){c0.v1, c1.v1, c2.v1, c3.v1, c4.v1, c5.v1}));
        put6(v + 12 * xs + tx, xs, bt6((f6){c0.v2, c1.v2, c2.v2, c3.v2, c4.v2, c5.v2}));
        put6(v + 18 * xs + tx, xs, bt6((f6){c0.v3, c1.v3, c2.v3, c3.v3, c4.v3, c5.v3}));
        put6(v + 24 * xs + tx, xs, bt6((f6){c0.v4, c1.v4, c2.v4, c3.v4, c4.v4, c5.v4}));
        put6(v + 30 * xs + tx, xs, bt6((f6){c0.v5, c1.v5, c2.v5, c3.v5, c4.v5, c5.v5}));
    }
}

/* ph += B dv B^T for each patch of the row (the adjoint of input_row).
 * Neighbouring patches share two columns, so the patches' columns go
 * through tmp [6 columns, 6 rows, ld] first, the last two shifted a
 * place right to land on the phase columns they add to (the ends that no
 * patch writes are zero); then one pass over the phases' 6 rows adds
 * them. */
ALWAYS_INLINE void input_grad_row(const float *restrict dv, int64_t xs, int64_t tw,
                                  float *restrict ph, int64_t plane, int64_t ld,
                                  float *restrict tmp)
{
    int64_t cs = 6 * ld; /* from one column of tmp to the next */
#pragma omp simd
    for (int64_t tx = 0; tx < tw; tx++) {
        /* B along each row a, giving the columns' values ra.vj; B down each column */
        f6 r0 = b6(get6(dv + tx, xs)), r1 = b6(get6(dv + 6 * xs + tx, xs));
        f6 r2 = b6(get6(dv + 12 * xs + tx, xs)), r3 = b6(get6(dv + 18 * xs + tx, xs));
        f6 r4 = b6(get6(dv + 24 * xs + tx, xs)), r5 = b6(get6(dv + 30 * xs + tx, xs));
        put6(tmp + tx, ld, b6((f6){r0.v0, r1.v0, r2.v0, r3.v0, r4.v0, r5.v0}));
        put6(tmp + cs + tx, ld, b6((f6){r0.v1, r1.v1, r2.v1, r3.v1, r4.v1, r5.v1}));
        put6(tmp + 2 * cs + tx, ld, b6((f6){r0.v2, r1.v2, r2.v2, r3.v2, r4.v2, r5.v2}));
        put6(tmp + 3 * cs + tx, ld, b6((f6){r0.v3, r1.v3, r2.v3, r3.v3, r4.v3, r5.v3}));
        put6(tmp + 4 * cs + tx + 1, ld, b6((f6){r0.v4, r1.v4, r2.v4, r3.v4, r4.v4, r5.v4}));
        put6(tmp + 5 * cs + tx + 1, ld, b6((f6){r0.v5, r1.v5, r2.v5, r3.v5, r4.v5, r5.v5}));
    }
    const float *t0 = tmp, *t1 = t0 + cs, *t2 = t1 + cs, *t3 = t2 + cs, *t4 = t3 + cs;
    const float *t5 = t4 + cs;
    float *q0 = ph, *q1 = q0 + plane, *q2 = q1 + plane, *q3 = q2 + plane;
#pragma omp simd
    for (int64_t f = 0; f < 6 * ld; f++) { /* f = i ld + u: row i, phase column u */
        q0[f] += t0[f] + t4[f];
        q1[f] += t1[f] + t5[f];
        q2[f] += t2[f];
        q3[f] += t3[f];
    }
}

/* The 4x4 outputs y = A^T m A of n tiles m [36, xs] (a whole chunk's
 * tiles of one channel: the loop runs long enough to fill the vectors
 * whatever the image's width), as 4 phases of 4 rows, y [4 rows, 4
 * phases, n]. */
ALWAYS_INLINE void output_run(const float *restrict m, int64_t xs, int64_t n, float *restrict y)
{
#pragma omp simd
    for (int64_t t = 0; t < n; t++) {
        /* A^T down each column b, then along each of the four rows */
        f4 h0 = at6(get6(m + t, 6 * xs)), h1 = at6(get6(m + xs + t, 6 * xs));
        f4 h2 = at6(get6(m + 2 * xs + t, 6 * xs)), h3 = at6(get6(m + 3 * xs + t, 6 * xs));
        f4 h4 = at6(get6(m + 4 * xs + t, 6 * xs)), h5 = at6(get6(m + 5 * xs + t, 6 * xs));
        put4(y + t, n, at6((f6){h0.v0, h1.v0, h2.v0, h3.v0, h4.v0, h5.v0}));
        put4(y + 4 * n + t, n, at6((f6){h0.v1, h1.v1, h2.v1, h3.v1, h4.v1, h5.v1}));
        put4(y + 8 * n + t, n, at6((f6){h0.v2, h1.v2, h2.v2, h3.v2, h4.v2, h5.v2}));
        put4(y + 12 * n + t, n, at6((f6){h0.v3, h1.v3, h2.v3, h3.v3, h4.v3, h5.v3}));
    }
}

/* dm [36, xs] = A g A^T for n tiles g held as 4 phases of 4 rows,
 * g [4 rows, 4 phases, n] (the adjoint of output_run). */
ALWAYS_INLINE void output_grad_run(const float *restrict g, int64_t n, float *restrict dm,
                                   int64_t xs)
{
#pragma omp simd
    for (int64_t t = 0; t < n; t++) {
        /* A down each of the four columns, then along each row a */
        f6 h0 = a4(get4(g + t, 4 * n)), h1 = a4(get4(g + n + t, 4 * n));
        f6 h2 = a4(get4(g + 2 * n + t, 4 * n)), h3 = a4(get4(g + 3 * n + t, 4 * n));
        put6(dm + t, xs, a4((f4){h0.v0, h1.v0, h2.v0, h3.v0}));
        put6(dm + 6 * xs + t, xs, a4((f4){h0.v1, h1.v1, h2.v1, h3.v1}));
        put6(dm + 12 * xs + t, xs, a4((f4){h0.v2, h1.v2, h2.v2, h3.v2}));
        put6(dm + 18 * xs + t, xs, a4((f4){h0.v3, h1.v3, h2.v3, h3.v3}));
        put6(dm + 24 * xs + t, xs, a4((f4){h0.v4, h1.v4, h2.v4, h3.v4}));
        put6(dm + 30 * xs + t, xs, a4((f4){h0.v5, h1.v5, h2.v5, h3.v5}));
    }
}

/* ---------------------------------------------------------------------
 * Tiles of a chunk: the tile rows [r0, r0 + nr) of the batch (tile row r
 * is row r % TH of image r / TH), T = nr TW tiles at [xi, channel, T]. */

typedef struct wino {
    sc_wino_shape s;
    int64_t th, tw;     /* tile rows and columns of an image */
    int64_t rows;       /* tile rows per chunk */
    int64_t quarter;    /* columns of a padded input row in each phase: TW + 1 */
    int64_t us, vs, ms; /* floats from one xi to the next in u, v and m */
    int slots;
    const float *x, *u, *bias, *gy;
    float *y, *gx;
    bool gx_fresh;  /* gx is uninitialised: each slot zeroes its images first */
    float *du;      /* per-slot partials of u's gradient; NULL: no weight gradient */
    float *scratch; /* per slot: v [36, C, T], m [36, K, T], buf */
    int64_t scratch_floats;
} wino;

/* The distance between consecutive xi's matrices of `floats` in u, v or
 * m: an odd number of 64-byte lines, so that the 36 rows a transform
 * walks at once fall in different cache sets (at 64 tiles a chunk, v's
 * 8 KiB made them evict each other and the transforms ran 2x slower). */
static int64_t xi_stride(int64_t floats)
{
    return 16 * (((floats + 15) / 16) | 1);
}

/* Floats of one phase of the padded input rows under a chunk's tile rows. */
static int64_t phase_floats(const wino *w)
{
    return (4 * w->rows + 2) * w->quarter;
}

/* A slot's buf: the padded input rows under a chunk's tile rows, their 4
 * phases and tmp [36, TW + 1]; or the 4 phases of 4 output rows of the
 * chunk's tiles, [16, T]. */
static int64_t buf_floats(const wino *w)
{
    return max64(8 * phase_floats(w) + XI * w->quarter, 16 * w->rows * w->tw);
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

/* Input rows [iy0, iy0 + rows) of plane [H, W], padded (pw zeros on the
 * left, zeros wherever the input ends) into padded [rows, 4 quarter],
 * then split into the phases ph [4, plane] of [rows, quarter] each. All
 * the rows are padded before any is split: reading a row's vectors right
 * after storing its floats one by one stalls on store forwarding. */
ALWAYS_INLINE void split_rows(const wino *w, const float *src, int64_t iy0, int64_t rows,
                              float *restrict ph, float *restrict padded)
{
    const sc_wino_shape *s = &w->s;
    int64_t len = 4 * w->quarter, plane = phase_floats(w);
    for (int64_t i = 0; i < rows; i++) {
        float *row = padded + i * len;
        int64_t iy = iy0 + i, ix = 0;
        if (iy >= 0 && iy < s->h) {
            for (; ix < s->pw; ix++)
                row[ix] = 0.0f;
            for (; ix < s->pw + s->w; ix++)
                row[ix] = src[iy * s->w + ix - s->pw];
        }
        for (; ix < len; ix++)
            row[ix] = 0.0f;
    }
#pragma omp simd
    for (int64_t f = 0; f < rows * w->quarter; f++) { /* f = i quarter + u: column 4 u + q */
        ph[f] = padded[4 * f];
        ph[plane + f] = padded[4 * f + 1];
        ph[2 * plane + f] = padded[4 * f + 2];
        ph[3 * plane + f] = padded[4 * f + 3];
    }
}

/* gx rows [iy0, iy0 + rows) of plane [H, W] += the padded rows held as
 * phases ph, through padded (the adjoint of split_rows). */
ALWAYS_INLINE void merge_rows(const wino *w, float *dst, int64_t iy0, int64_t rows,
                              const float *restrict ph, float *restrict padded)
{
    const sc_wino_shape *s = &w->s;
    int64_t len = 4 * w->quarter, plane = phase_floats(w);
#pragma omp simd
    for (int64_t f = 0; f < rows * w->quarter; f++) {
        padded[4 * f] = ph[f];
        padded[4 * f + 1] = ph[plane + f];
        padded[4 * f + 2] = ph[2 * plane + f];
        padded[4 * f + 3] = ph[3 * plane + f];
    }
    for (int64_t i = 0; i < rows; i++) {
        int64_t iy = iy0 + i;
        if (iy < 0 || iy >= s->h)
            continue;
        const float *row = padded + i * len + s->pw;
        float *out = dst + iy * s->w;
#pragma omp simd
        for (int64_t ix = 0; ix < s->w; ix++)
            out[ix] += row[ix];
    }
}

/* v [36, C, T] = B^T d B for every patch d of the chunk. */
SC_CPU_CLONES
static void input_tiles(const wino *w, int64_t r0, int64_t nr, float *v, float *buf)
{
    const sc_wino_shape *s = &w->s;
    int64_t t = nr * w->tw, plane = phase_floats(w);
    float *ph = buf, *padded = ph + 4 * plane;
    for (int64_t r = r0; r < r0 + nr;) {
        segment g = next_segment(w, r0, nr, r);
        for (int64_t c = 0; c < s->c; c++) {
            split_rows(w, w->x + (g.n * s->c + c) * s->h * s->w, 4 * g.ty0 - s->ph,
                       4 * (g.ty1 - g.ty0) + 2, ph, padded);
            for (int64_t ty = g.ty0; ty < g.ty1; ty++)
                input_row(ph + 4 * (ty - g.ty0) * w->quarter, plane, w->quarter, w->tw,
                          v + c * t + g.first + (ty - g.ty0) * w->tw, w->vs);
        }
        r += g.ty1 - g.ty0;
    }
}

/* gx += B dv B^T for every patch of the chunk. */
SC_CPU_CLONES
static void input_grad_tiles(const wino *w, int64_t r0, int64_t nr, const float *dv, float *buf)
{
    const sc_wino_shape *s = &w->s;
    int64_t t = nr * w->tw, plane = phase_floats(w);
    float *ph = buf, *padded = ph + 4 * plane, *tmp = padded + 4 * plane;
    for (int64_t i = 0; i < 6; i++) { /* the ends of tmp's rows that input_grad_row skips */
        for (int64_t j = 0; j < 4; j++)
            tmp[(6 * j + i) * w->quarter + w->tw] = 0.0f;
        tmp[(24 + i) * w->quarter] = tmp[(30 + i) * w->quarter] = 0.0f;
    }
    for (int64_t r = r0; r < r0 + nr;) {
        segment g = next_segment(w, r0, nr, r);
        for (int64_t c = 0; c < s->c; c++) {
            memset(ph, 0, (size_t)(4 * plane) * sizeof *ph);
            for (int64_t ty = g.ty0; ty < g.ty1; ty++)
                input_grad_row(dv + c * t + g.first + (ty - g.ty0) * w->tw, w->vs, w->tw,
                               ph + 4 * (ty - g.ty0) * w->quarter, plane, w->quarter, tmp);
            merge_rows(w, w->gx + (g.n * s->c + c) * s->h * s->w, 4 * g.ty0 - s->ph,
                       4 * (g.ty1 - g.ty0) + 2, ph, padded);
        }
        r += g.ty1 - g.ty0;
    }
}

/* y = A^T m A (+ bias) for every tile of the chunk, cut to OH x OW. */
SC_CPU_CLONES
static void output_tiles(const wino *w, int64_t r0, int64_t nr, const float *m, float *buf)
{
    const sc_wino_shape *s = &w->s;
    int64_t t = nr * w->tw, whole = s->ow / 4; /* tiles without a cut */
    for (int64_t k = 0; k < s->k; k++) {
        output_run(m + k * t, w->ms, t, buf);
        float bias = w->bias ? w->bias[k] : 0.0f;
        for (int64_t rr = 0; rr < nr; rr++) {
            int64_t n = (r0 + rr) / w->th, ty = (r0 + rr) % w->th;
            float *plane = w->y + (n * s->k + k) * s->oh * s->ow;
            for (int64_t i = 0; i < 4 && 4 * ty + i < s->oh; i++) {
                float *out = plane + (4 * ty + i) * s->ow;
                const float *q0 = buf + 4 * i * t + rr * w->tw, *q1 = q0 + t, *q2 = q1 + t;
                const float *q3 = q2 + t;
#pragma omp simd
                for (int64_t tx = 0; tx < whole; tx++) {
                    out[4 * tx] = q0[tx] + bias;
                    out[4 * tx + 1] = q1[tx] + bias;
                    out[4 * tx + 2] = q2[tx] + bias;
                    out[4 * tx + 3] = q3[tx] + bias;
                }
                for (int64_t ox = 4 * whole; ox < s->ow; ox++)
                    out[ox] = q0[(ox % 4) * t + whole] + bias;
            }
        }
    }
}

/* dm [36, K, T] = A gy A^T for every tile of the chunk (gy zero beyond
 * OH x OW). */
SC_CPU_CLONES
static void output_grad_tiles(const wino *w, int64_t r0, int64_t nr, float *dm, float *buf)
{
    const sc_wino_shape *s = &w->s;
    int64_t t = nr * w->tw, tw = w->tw, whole = s->ow / 4; /* tiles without a cut */
    for (int64_t k = 0; k < s->k; k++) {
        for (int64_t rr = 0; rr < nr; rr++) {
            int64_t n = (r0 + rr) / w->th, ty = (r0 + rr) % w->th;
            const float *plane = w->gy + (n * s->k + k) * s->oh * s->ow;
            for (int64_t i = 0; i < 4; i++) {
                float *q0 = buf + 4 * i * t + rr * tw, *q1 = q0 + t, *q2 = q1 + t, *q3 = q2 + t;
                if (4 * ty + i >= s->oh) {
                    for (int64_t tx = 0; tx < tw; tx++)
                        q0[tx] = q1[tx] = q2[tx] = q3[tx] = 0.0f;
                    continue;
                }
                const float *in = plane + (4 * ty + i) * s->ow;
#pragma omp simd
                for (int64_t tx = 0; tx < whole; tx++) {
                    q0[tx] = in[4 * tx];
                    q1[tx] = in[4 * tx + 1];
                    q2[tx] = in[4 * tx + 2];
                    q3[tx] = in[4 * tx + 3];
                }
                for (int64_t tx = whole; tx < tw; tx++) /* the cut tile */
                    for (int64_t j = 0; j < 4; j++)
                        q0[j * t + tx] = 4 * tx + j < s->ow ? in[4 * tx + j] : 0.0f;
            }
        }
        output_grad_run(buf, t, dm + k * t, w->ms);
    }
}

/* ---------------------------------------------------------------------
 * Chunks. */

/* A slot's v, m and buf; returns buf. */
static float *slot_scratch(const wino *w, int slot, float **v, float **m)
{
    *v = w->scratch + slot * w->scratch_floats;
    *m = *v + XI * w->vs;
    return *m + XI * w->ms;
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
        for (int xi = 0; xi < XI; xi++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)s->k, (int)t, (int)s->c,
                        1.0f, w->u + xi * w->us, (int)s->c, v + xi * w->vs, (int)t, 0.0f,
                        m + xi * w->ms, (int)t);
        output_tiles(w, r0, nr, m, buf);
    }
}

/* du[xi] [K, C] += dm[xi] [K, T] v[xi]^T;  dv[xi] [C, T] = u[xi]^T dm[xi] */
static void backward_range(const void *arg, int slot, int64_t n0, int64_t n1)
{
    const wino *w = arg;
    const sc_wino_shape *s = &w->s;
    float *v, *dm, *buf = slot_scratch(w, slot, &v, &dm);
    float *du = w->du ? w->du + slot * XI * w->us : NULL;
    int64_t image = s->c * s->h * s->w;
    if (w->gx && w->gx_fresh)
        memset(w->gx + n0 * image, 0, (size_t)((n1 - n0) * image) * sizeof(float));
    for (int64_t r0 = n0 * w->th; r0 < n1 * w->th; r0 += w->rows) {
        int64_t nr = min64(w->rows, n1 * w->th - r0), t = nr * w->tw;
        output_grad_tiles(w, r0, nr, dm, buf);
        if (du) {
            input_tiles(w, r0, nr, v, buf);
            for (int xi = 0; xi < XI; xi++)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)s->k, (int)s->c,
                            (int)t, 1.0f, dm + xi * w->ms, (int)t, v + xi * w->vs, (int)t,
                            1.0f, du + xi * w->us, (int)s->c);
        }
        if (!w->gx)
            continue;
        for (int xi = 0; xi < XI; xi++) /* dv overwrites v */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)s->c, (int)t, (int)s->k,
                        1.0f, w->u + xi * w->us, (int)s->c, dm + xi * w->ms, (int)t, 0.0f,
                        v + xi * w->vs, (int)t);
        input_grad_tiles(w, r0, nr, v, buf);
    }
}

/* The geometry, per-slot scratch and (when u is wanted) the transformed
 * weights. */
static sc_status wino_init(wino *w, sc_ctx *ctx, const sc_wino_shape *s, const float *weight)
{
    *w = (wino){.s = *s, .th = (s->oh + 3) / 4, .tw = (s->ow + 3) / 4};
    w->rows = TILES / w->tw > 0 ? TILES / w->tw : 1;
    w->quarter = w->tw + 1;
    w->us = xi_stride(s->k * s->c);
    w->vs = xi_stride(s->c * w->rows * w->tw);
    w->ms = xi_stride(s->k * w->rows * w->tw);
    w->slots = sc_conv_slots(s->n);
    w->scratch_floats = XI * (w->vs + w->ms) + buf_floats(w);
    w->scratch = sc_ctx_alloc(ctx, (size_t)(w->slots * w->scratch_floats) * sizeof(float));
    float *u = weight ? sc_ctx_alloc(ctx, (size_t)(XI * w->us) * sizeof(float)) : NULL;
    if (!w->scratch || (weight && !u))
        return SC_ERR_NOMEM;
    if (u)
        weight_transform(s, weight, u, w->us);
    w->u = u;
    return SC_OK;
}

sc_status sc_wino_forward(sc_ctx *ctx, const sc_wino_shape *s, const float *x,
                          const float *weight, const float *bias, float *y)
{
    wino w;
    SC_TRY(wino_init(&w, ctx, s, weight));
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
    SC_TRY(wino_init(&w, ctx, s, gx ? weight : NULL));
    w.x = x;
    w.gy = gy;
    w.gx = gx;
    w.gx_fresh = gx_fresh;
    int64_t du_floats = XI * w.us;
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
        weight_grad(s, sum, w.us, gw);
    }
    return SC_OK;
}
