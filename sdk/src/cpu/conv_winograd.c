/* 3x3 convolutions at stride 1 by Winograd's minimal filtering F(2x2, 3x3)
 * (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks",
 * 2016).
 *
 * The output is cut into 2x2 tiles. Tile t of output channel k is
 *     y_kt = A^T [ sum_c U_kc (.) V_ct ] A,  U_kc = G w_kc G^T,  V_ct = B^T d_ct B,
 * with d_ct the 4x4 input patch under the tile (zero in the padding) and
 * (.) the element-wise product. For each of the 16 positions xi of a
 * transformed tile, the sum over c is one GEMM,
 *     M[xi] [K, T] = U[xi] [K, C] V[xi] [C, T],
 * so a tile costs 16 multiply-adds per channel pair instead of 36; the
 * transforms are a few additions. Backward runs the same algebra adjoint:
 *     dM_kt = A gy_kt A^T,  dU[xi] += dM[xi] V[xi]^T,  dV[xi] = U[xi]^T dM[xi],
 *     gw_kc += G^T dU_kc G,  gx (patches overlap) += B dV_ct B^T.
 *
 * Threads split the batch; each walks its images' rows of tiles in chunks
 * of about TILES tiles, its transformed tiles in per-thread scratch from
 * the step arena. dU sums per thread, then in thread order.
 *
 * The transforms walk tiles, a whole tile per iteration, on values held
 * in small structs (f4) that the compiler keeps in registers, so that
 * `omp simd` vectorises the walk: input rows are split into even and odd
 * columns beforehand, which makes every load and store unit stride. The
 * output transforms and the input's adjoint walk all the tiles a chunk
 * has in an image at once, not a row of tiles at a time: a 14x14 layer's
 * row has 7 tiles, too few for AVX2's 8 lanes. The input transform reads
 * patches that overlap along the row, and walks a row at a time, in
 * blocks of 8 or 4 tiles (SC_CPU_ROW_BLOCKS).
 *
 * Each channel's rows under a chunk are a short run of memory apart from
 * the next channel's, too short for the hardware's prefetchers: the
 * transforms ask for the next channel's rows while they work on this
 * one's (prefetch_rows). */
#include <cblas.h>
#include <string.h>

#include "conv_impl.h"

/* Tiles per chunk: a chunk's transformed input and output stay in L2
 * (98 to 392 measured alike on the cnn's 14x14 layer). */
enum { TILES = 100, XI = 16 };

typedef struct f2 { float v0, v1; } f2;
typedef struct f3 { float v0, v1, v2; } f3;
typedef struct f4 { float v0, v1, v2, v3; } f4;

/* ---------------------------------------------------------------------
 * The 1-D transforms and their adjoints:
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

/* Four values `stride` apart, and back. */
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

/* ---------------------------------------------------------------------
 * Weights: u [16, K, C] from weight [K, C, 3, 3], and the adjoint. */

/* Weights per block of weight_transform. Transformed one by one, each
 * weight's 16 values go to 16 rows of u K C floats apart (64 KB for 128
 * channels in and out), which share a set of L1 and evict each other;
 * a block is transformed into a small buffer, then copied out a row at a
 * time. */
enum { WEIGHT_BLOCK = 64 };

static void weight_transform(const sc_wino_shape *s, const float *weight, float *u)
{
    int64_t kc = s->k * s->c, blocks = (kc + WEIGHT_BLOCK - 1) / WEIGHT_BLOCK;
#pragma omp parallel for schedule(static) if (kc > 1024)
    for (int64_t b = 0; b < blocks; b++) {
        int64_t n0 = b * WEIGHT_BLOCK, len = min64(WEIGHT_BLOCK, kc - n0);
        float t[XI][WEIGHT_BLOCK]; /* u's rows [n0, n0 + len) */
        for (int64_t i = 0; i < len; i++) {
            const float *w = weight + 9 * (n0 + i);
            f4 r[3]; /* G along each row of w */
            for (int row = 0; row < 3; row++)
                r[row] = g3((f3){w[3 * row], w[3 * row + 1], w[3 * row + 2]});
            put4(&t[0][i], 4 * WEIGHT_BLOCK, g3((f3){r[0].v0, r[1].v0, r[2].v0}));
            put4(&t[1][i], 4 * WEIGHT_BLOCK, g3((f3){r[0].v1, r[1].v1, r[2].v1}));
            put4(&t[2][i], 4 * WEIGHT_BLOCK, g3((f3){r[0].v2, r[1].v2, r[2].v2}));
            put4(&t[3][i], 4 * WEIGHT_BLOCK, g3((f3){r[0].v3, r[1].v3, r[2].v3}));
        }
        for (int xi = 0; xi < XI; xi++)
            memcpy(u + xi * kc + n0, t[xi], (size_t)len * sizeof(float));
    }
}

/* gw [K, C, 3, 3] += G^T du G */
static void weight_grad(const sc_wino_shape *s, const float *du, float *gw)
{
    int64_t kc = s->k * s->c;
#pragma omp parallel for schedule(static) if (kc > 1024)
    for (int64_t i = 0; i < kc; i++) {
        f3 r[4]; /* G^T along each row a of du */
        for (int a = 0; a < 4; a++)
            r[a] = gt4(get4(du + 4 * a * kc + i, kc));
        f3 c[3] = {gt4((f4){r[0].v0, r[1].v0, r[2].v0, r[3].v0}),
                   gt4((f4){r[0].v1, r[1].v1, r[2].v1, r[3].v1}),
                   gt4((f4){r[0].v2, r[1].v2, r[2].v2, r[3].v2})}; /* column j, down rows */
        float *g = gw + 9 * i;
        for (int j = 0; j < 3; j++) {
            g[j] += c[j].v0;
            g[3 + j] += c[j].v1;
            g[6 + j] += c[j].v2;
        }
    }
}

/* ---------------------------------------------------------------------
 * Tiles along a row. A row of TW tiles covers 4 input rows of 2 TW + 2
 * padded columns, held as even and odd columns: e, o [4, ld], ld >= TW + 1
 * (tile tx spans columns e[tx], o[tx], e[tx + 1], o[tx + 1]). Transformed
 * tiles are at [xi xs + tx]. */

/* v = B^T d B for the patches d of tiles [t0, t0 + n) of the row. */
ALWAYS_INLINE void input_patches(const float *restrict e, const float *restrict o, int64_t ld,
                                 int64_t t0, int64_t n, float *restrict v, int64_t xs)
{
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

/* v = B^T d B for each patch d of a row of TW tiles, in blocks that
 * vectorise. */
ALWAYS_INLINE void input_row(const float *restrict e, const float *restrict o, int64_t ld,
                             int64_t tw, float *restrict v, int64_t xs)
{
    SC_CPU_ROW_BLOCKS(tw, t0, n, input_patches(e, o, ld, t0, n, v, xs));
}

/* tmp [16, n] = B dv B^T for each of n patches, the adjoint of input_row:
 * tmp [4 j + i, n] holds column j, row i of the patches. */
ALWAYS_INLINE void patch_grads(const float *restrict dv, int64_t xs, int64_t n, float *restrict tmp)
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

/* e, o [4, ld] += a row of TW patches' columns from tmp (patch_grads, rows
 * n apart). Neighbouring patches share a column pair: column tx of a row
 * takes patch tx's first pair, then patch tx - 1's second, in one pass
 * (a second pass shifted by a column would load across the first's
 * stores, which stalls). */
ALWAYS_INLINE void add_patch_row(const float *restrict tmp, int64_t n, int64_t tw,
                                 float *restrict e, float *restrict o, int64_t ld)
{
    for (int i = 0; i < 4; i++) {
        float *ei = e + i * ld, *oi = o + i * ld;
        const float *c0 = tmp + i * n, *c1 = c0 + 4 * n, *c2 = c0 + 8 * n, *c3 = c0 + 12 * n;
        ei[0] += c0[0];
        oi[0] += c1[0];
#pragma omp simd
        for (int64_t tx = 1; tx < tw; tx++) {
            ei[tx] = ei[tx] + c0[tx] + c2[tx - 1];
            oi[tx] = oi[tx] + c1[tx] + c3[tx - 1];
        }
        ei[tw] += c2[tw - 1];
        oi[tw] += c3[tw - 1];
    }
}

/* The 2x2 outputs y = A^T m A of tw tiles into even and odd columns of two
 * output rows, ye, yo [2, tw]. */
ALWAYS_INLINE void output_row(const float *restrict m, int64_t xs, int64_t tw, float *restrict ye,
                              float *restrict yo)
{
#pragma omp simd
    for (int64_t tx = 0; tx < tw; tx++) {
        /* A^T down each column b, then along each of the two rows */
        f2 h0 = at4(get4(m + tx, 4 * xs)), h1 = at4(get4(m + xs + tx, 4 * xs));
        f2 h2 = at4(get4(m + 2 * xs + tx, 4 * xs)), h3 = at4(get4(m + 3 * xs + tx, 4 * xs));
        f2 r0 = at4((f4){h0.v0, h1.v0, h2.v0, h3.v0}), r1 = at4((f4){h0.v1, h1.v1, h2.v1, h3.v1});
        ye[tx] = r0.v0;
        yo[tx] = r0.v1;
        ye[tw + tx] = r1.v0;
        yo[tw + tx] = r1.v1;
    }
}

/* dm = A g A^T for each of tw tiles g of two output rows held as even and
 * odd columns ge, go [2, tw] (the adjoint of output_row). */
ALWAYS_INLINE void output_grad_row(const float *restrict ge, const float *restrict go, int64_t tw,
                                   float *restrict dm, int64_t xs)
{
#pragma omp simd
    for (int64_t tx = 0; tx < tw; tx++) {
        /* A down each of the two columns, then along each row a */
        f4 h0 = a2((f2){ge[tx], ge[tw + tx]}), h1 = a2((f2){go[tx], go[tw + tx]});
        put4(dm + tx, xs, a2((f2){h0.v0, h1.v0}));
        put4(dm + 4 * xs + tx, xs, a2((f2){h0.v1, h1.v1}));
        put4(dm + 8 * xs + tx, xs, a2((f2){h0.v2, h1.v2}));
        put4(dm + 12 * xs + tx, xs, a2((f2){h0.v3, h1.v3}));
    }
}

/* ---------------------------------------------------------------------
 * Tiles of a chunk: the tile rows [r0, r0 + nr) of the batch (tile row r
 * is row r % TH of image r / TH), T = nr TW tiles at [xi, channel, T]. */

typedef struct wino {
    sc_wino_shape s;
    int64_t th, tw; /* tile rows and columns of an image */
    int64_t rows;   /* tile rows per chunk */
    int64_t half;   /* even (or odd) columns of a padded input row: TW + 1 */
    int slots;
    const float *x, *u, *bias, *gy;
    float *y, *gx;
    bool gx_fresh;  /* gx is uninitialised: input_grad_tiles zeroes each plane first */
    float *du;      /* per-slot [16, K, C] partials; NULL: no weight gradient */
    float *scratch; /* per slot: v [16, C, T], m [16, K, T], buf; backward dv [16, C, T] */
    int64_t scratch_floats;
} wino;

/* A slot's buf: the even and odd columns of the padded input rows under a
 * chunk's tile rows, and a segment's patch columns tmp [16, T] at most
 * (patch_grads); or a segment's output rows [4, T] (merge_out_rows). */
static int64_t buf_floats(const wino *w)
{
    return 2 * (2 * w->rows + 2) * w->half + XI * w->rows * w->tw;
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

/* A padded input row as even and odd columns: column p of the row [W]
 * padded by pw zeros on the left and zeros wherever it ends is
 * in[p - pw]. Columns 2u and 2u + 1 both lie in the row for u in
 * [lo, hi); the few outside are looked up one by one. The loops read and
 * write the rows themselves, no padded copy: a copy written at one offset
 * and read back at another stalls every load on the stores it straddles
 * (store-to-load forwarding fails), which cost a third of the input
 * transform. */
typedef struct pad_span {
    int64_t lo, hi;
} pad_span;

ALWAYS_INLINE pad_span pad_span_of(const sc_wino_shape *s, int64_t half)
{
    int64_t lo = min64((s->pw + 1) / 2, half);
    return (pad_span){lo, max64(lo, min64((s->w + s->pw) / 2, half))};
}

/* Padded column p of input row `in`. */
ALWAYS_INLINE float padded(const sc_wino_shape *s, const float *in, int64_t p)
{
    return p >= s->pw && p < s->pw + s->w ? in[p - s->pw] : 0.0f;
}

/* e, o [half] = the even and odd columns of input row `in` [W], padded. */
ALWAYS_INLINE void split_row(const sc_wino_shape *s, pad_span span, int64_t half,
                             const float *restrict in, float *restrict e, float *restrict o)
{
    for (int64_t u = 0; u < span.lo; u++) {
        e[u] = padded(s, in, 2 * u);
        o[u] = padded(s, in, 2 * u + 1);
    }
    const float *from = in + 2 * span.lo - s->pw;
#pragma omp simd
    for (int64_t u = 0; u < span.hi - span.lo; u++) {
        e[span.lo + u] = from[2 * u];
        o[span.lo + u] = from[2 * u + 1];
    }
    for (int64_t u = span.hi; u < half; u++) {
        e[u] = padded(s, in, 2 * u);
        o[u] = padded(s, in, 2 * u + 1);
    }
}

/* Padded column p of output row `out` += g (nothing in the padding). */
ALWAYS_INLINE void add_padded(const sc_wino_shape *s, float *out, int64_t p, float g)
{
    if (p >= s->pw && p < s->pw + s->w)
        out[p - s->pw] += g;
}

/* out [W] += the padded row held as even and odd columns e, o [half]
 * (the adjoint of split_row). */
ALWAYS_INLINE void merge_row(const sc_wino_shape *s, pad_span span, int64_t half,
                             const float *restrict e, const float *restrict o,
                             float *restrict out)
{
    for (int64_t u = 0; u < span.lo; u++) {
        add_padded(s, out, 2 * u, e[u]);
        add_padded(s, out, 2 * u + 1, o[u]);
    }
    float *to = out + 2 * span.lo - s->pw;
#pragma omp simd
    for (int64_t u = 0; u < span.hi - span.lo; u++) {
        to[2 * u] += e[span.lo + u];
        to[2 * u + 1] += o[span.lo + u];
    }
    for (int64_t u = span.hi; u < half; u++) {
        add_padded(s, out, 2 * u, e[u]);
        add_padded(s, out, 2 * u + 1, o[u]);
    }
}

/* Input rows [iy0, iy0 + rows) of plane [H, W], padded, as even and odd
 * columns e, o [rows, half]. */
ALWAYS_INLINE void split_rows(const wino *w, const float *plane, int64_t iy0, int64_t rows,
                              float *e, float *o)
{
    const sc_wino_shape *s = &w->s;
    pad_span span = pad_span_of(s, w->half);
    for (int64_t i = 0; i < rows; i++, e += w->half, o += w->half) {
        int64_t iy = iy0 + i;
        if (iy >= 0 && iy < s->h) {
            split_row(s, span, w->half, plane + iy * s->w, e, o);
        } else {
            memset(e, 0, (size_t)w->half * sizeof *e);
            memset(o, 0, (size_t)w->half * sizeof *o);
        }
    }
}

/* gx rows [iy0, iy0 + rows) of plane [H, W] += the padded rows held as
 * even and odd columns e, o [rows, half] (the adjoint of split_rows). */
ALWAYS_INLINE void merge_rows(const wino *w, float *plane, int64_t iy0, int64_t rows,
                              const float *e, const float *o)
{
    const sc_wino_shape *s = &w->s;
    pad_span span = pad_span_of(s, w->half);
    for (int64_t i = 0; i < rows; i++, e += w->half, o += w->half) {
        int64_t iy = iy0 + i;
        if (iy >= 0 && iy < s->h)
            merge_row(s, span, w->half, e, o, plane + iy * s->w);
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

/* v [16, C, T] = B^T d B for every patch d of the chunk. */
SC_CPU_CLONES
static void input_tiles(const wino *w, int64_t r0, int64_t nr, float *v, float *buf)
{
    const sc_wino_shape *s = &w->s;
    int64_t t = nr * w->tw, plane_floats = (2 * w->rows + 2) * w->half;
    float *e = buf, *o = e + plane_floats;
    for (int64_t r = r0; r < r0 + nr;) {
        segment g = next_segment(w, r0, nr, r);
        int64_t iy0 = 2 * g.ty0 - s->ph, rows = 2 * (g.ty1 - g.ty0) + 2;
        for (int64_t c = 0; c < s->c; c++) {
            const float *plane = w->x + (g.n * s->c + c) * s->h * s->w;
            if (c + 1 < s->c)
                prefetch_rows(plane + s->h * s->w, s->h, s->w, iy0, rows);
            split_rows(w, plane, iy0, rows, e, o);
            for (int64_t ty = g.ty0; ty < g.ty1; ty++) {
                int64_t at = 2 * (ty - g.ty0) * w->half;
                input_row(e + at, o + at, w->half, w->tw,
                          v + c * t + g.first + (ty - g.ty0) * w->tw, s->c * t);
            }
        }
        r += g.ty1 - g.ty0;
    }
}

/* gx += B dv B^T for every patch of the chunk. */
SC_CPU_CLONES
static void input_grad_tiles(const wino *w, int64_t r0, int64_t nr, const float *dv, float *buf)
{
    const sc_wino_shape *s = &w->s;
    int64_t t = nr * w->tw, plane_floats = (2 * w->rows + 2) * w->half;
    float *e = buf, *o = e + plane_floats, *tmp = o + plane_floats;
    for (int64_t r = r0; r < r0 + nr;) {
        segment g = next_segment(w, r0, nr, r);
        int64_t iy0 = 2 * g.ty0 - s->ph, rows = 2 * (g.ty1 - g.ty0) + 2;
        int64_t nt = (g.ty1 - g.ty0) * w->tw;
        for (int64_t c = 0; c < s->c; c++) {
            float *plane = w->gx + (g.n * s->c + c) * s->h * s->w;
            if (c + 1 < s->c)
                prefetch_rows(plane + s->h * s->w, s->h, s->w, iy0, rows);
            memset(e, 0, (size_t)(rows * w->half) * sizeof *e);
            memset(o, 0, (size_t)(rows * w->half) * sizeof *o);
            patch_grads(dv + c * t + g.first, s->c * t, nt, tmp);
            for (int64_t ty = 0; ty < g.ty1 - g.ty0; ty++)
                add_patch_row(tmp + ty * w->tw, nt, w->tw, e + 2 * ty * w->half,
                              o + 2 * ty * w->half, w->half);
            /* An image's plane is zeroed as its first tile row comes, while
             * it is in cache, not all of a slot's images up front. */
            if (w->gx_fresh && g.ty0 == 0)
                memset(plane, 0, (size_t)(s->h * s->w) * sizeof *plane);
            merge_rows(w, plane, iy0, rows, e, o);
        }
        r += g.ty1 - g.ty0;
    }
}

/* Output rows 2 ty + i, i < 2, of a segment's tile rows as even and odd
 * columns ye, yo [2, NT], NT the segment's tiles: tile j of the segment
 * (row j / TW) at [i, j]. So the transforms walk all of a segment's tiles
 * in one loop, which vectorises even when a row has fewer tiles than a
 * vector has lanes (14x14 outputs: 7). */

/* plane [OH, OW] rows from ye, yo (+ bias), cut to OH x OW. */
ALWAYS_INLINE void merge_out_rows(const wino *w, segment g, int64_t nt, const float *ye,
                                  const float *yo, float bias, float *plane)
{
    const sc_wino_shape *s = &w->s;
    for (int64_t ty = g.ty0; ty < g.ty1; ty++)
        for (int64_t i = 0; i < 2 && 2 * ty + i < s->oh; i++) {
            float *out = plane + (2 * ty + i) * s->ow;
            const float *ei = ye + i * nt + (ty - g.ty0) * w->tw;
            const float *oi = yo + i * nt + (ty - g.ty0) * w->tw;
#pragma omp simd
            for (int64_t tx = 0; tx < s->ow / 2; tx++) {
                out[2 * tx] = ei[tx] + bias;
                out[2 * tx + 1] = oi[tx] + bias;
            }
            if (s->ow % 2)
                out[s->ow - 1] = ei[s->ow / 2] + bias;
        }
}

/* ge, go from plane [OH, OW] rows, zero beyond OH x OW (the adjoint of
 * merge_out_rows, bias aside). */
ALWAYS_INLINE void split_out_rows(const wino *w, segment g, int64_t nt, const float *plane,
                                  float *ge, float *go)
{
    const sc_wino_shape *s = &w->s;
    for (int64_t ty = g.ty0; ty < g.ty1; ty++)
        for (int64_t i = 0; i < 2; i++) {
            float *ei = ge + i * nt + (ty - g.ty0) * w->tw;
            float *oi = go + i * nt + (ty - g.ty0) * w->tw;
            if (2 * ty + i >= s->oh) {
                memset(ei, 0, (size_t)w->tw * sizeof *ei);
                memset(oi, 0, (size_t)w->tw * sizeof *oi);
                continue;
            }
            const float *in = plane + (2 * ty + i) * s->ow;
#pragma omp simd
            for (int64_t tx = 0; tx < s->ow / 2; tx++) {
                ei[tx] = in[2 * tx];
                oi[tx] = in[2 * tx + 1];
            }
            if (s->ow % 2) {
                ei[s->ow / 2] = in[s->ow - 1];
                oi[s->ow / 2] = 0.0f;
            }
        }
}

/* y = A^T m A (+ bias) for every tile of the chunk, cut to OH x OW. */
SC_CPU_CLONES
static void output_tiles(const wino *w, int64_t r0, int64_t nr, const float *m, float *buf)
{
    const sc_wino_shape *s = &w->s;
    int64_t t = nr * w->tw;
    for (int64_t r = r0; r < r0 + nr;) {
        segment g = next_segment(w, r0, nr, r);
        int64_t nt = (g.ty1 - g.ty0) * w->tw;
        float *ye = buf, *yo = buf + 2 * nt;
        for (int64_t k = 0; k < s->k; k++) {
            float *plane = w->y + (g.n * s->k + k) * s->oh * s->ow;
            if (k + 1 < s->k) /* a line is read in before it is written anyway */
                prefetch_rows(plane + s->oh * s->ow, s->oh, s->ow, 2 * g.ty0,
                              2 * (g.ty1 - g.ty0));
            output_row(m + k * t + g.first, s->k * t, nt, ye, yo);
            merge_out_rows(w, g, nt, ye, yo, w->bias ? w->bias[k] : 0.0f, plane);
        }
        r += g.ty1 - g.ty0;
    }
}

/* dm [16, K, T] = A gy A^T for every tile of the chunk (gy zero beyond
 * OH x OW). */
SC_CPU_CLONES
static void output_grad_tiles(const wino *w, int64_t r0, int64_t nr, float *dm, float *buf)
{
    const sc_wino_shape *s = &w->s;
    int64_t t = nr * w->tw;
    for (int64_t r = r0; r < r0 + nr;) {
        segment g = next_segment(w, r0, nr, r);
        int64_t nt = (g.ty1 - g.ty0) * w->tw;
        float *ge = buf, *go = buf + 2 * nt;
        for (int64_t k = 0; k < s->k; k++) {
            const float *plane = w->gy + (g.n * s->k + k) * s->oh * s->ow;
            if (k + 1 < s->k)
                prefetch_rows(plane + s->oh * s->ow, s->oh, s->ow, 2 * g.ty0,
                              2 * (g.ty1 - g.ty0));
            split_out_rows(w, g, nt, plane, ge, go);
            output_grad_row(ge, go, nt, dm + k * t + g.first, s->k * t);
        }
        r += g.ty1 - g.ty0;
    }
}

/* ---------------------------------------------------------------------
 * Chunks. */

/* A slot's v, m and buf; returns buf. */
static float *slot_scratch(const wino *w, int slot, float **v, float **m)
{
    int64_t t = w->rows * w->tw;
    *v = w->scratch + slot * w->scratch_floats;
    *m = *v + XI * w->s.c * t;
    return *m + XI * w->s.k * t;
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
        for (int xi = 0; xi < XI; xi++)
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
    float *du = w->du ? w->du + slot * XI * s->k * s->c : NULL, *dv = slot_dv(w, slot);
    for (int64_t r0 = n0 * w->th; r0 < n1 * w->th; r0 += w->rows) {
        int64_t nr = min64(w->rows, n1 * w->th - r0), t = nr * w->tw;
        output_grad_tiles(w, r0, nr, dm, buf);
        if (du) {
            input_tiles(w, r0, nr, v, buf);
            for (int xi = 0; xi < XI; xi++)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)s->k, (int)s->c,
                            (int)t, 1.0f, dm + xi * s->k * t, (int)t, v + xi * s->c * t, (int)t,
                            1.0f, du + xi * s->k * s->c, (int)s->c);
        }
        if (!w->gx)
            continue;
        for (int xi = 0; xi < XI; xi++)
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
    *w = (wino){.s = *s, .th = (s->oh + 1) / 2, .tw = (s->ow + 1) / 2};
    w->rows = TILES / w->tw > 0 ? TILES / w->tw : 1;
    w->half = w->tw + 1;
    w->slots = sc_conv_slots(s->n);
    w->scratch_floats = XI * (s->c + s->k + (dv ? s->c : 0)) * w->rows * w->tw + buf_floats(w);
    w->scratch = sc_ctx_alloc(ctx, (size_t)(w->slots * w->scratch_floats) * sizeof(float));
    float *u = weight ? sc_ctx_alloc(ctx, (size_t)(XI * s->k * s->c) * sizeof(float)) : NULL;
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
    int64_t du_floats = XI * s->k * s->c;
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
