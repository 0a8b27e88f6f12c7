/* CPU kernels for conv2d: im2col and cblas_sgemm, image by image. 3x3
 * convolutions at stride 1 with 8 channels or more in and out go the
 * Winograd way instead (conv_winograd.c), unless the host says otherwise
 * (sc_cpu_set_conv): F(2x2, 3x3) multiplies 2.25 times less than im2col,
 * F(4x4, 3x3) 4 times less, at the price of a larger rounding error, and
 * is taken where it measured faster (winograd_tile). F(2x2) took 25 to
 * 30% less time than im2col forward and backward (the cnn's 32->64 layer
 * at 14x14: 10.1 -> 7.0 ms forward, 20.9 -> 14.2 ms backward, batch 128,
 * one thread).
 *
 * Per image and group, y_n [OC/G, OH OW] = W_g [OC/G, C/G KH KW] col [C/G KH KW, OH OW],
 * where col holds the input pixel under every kernel tap for every output
 * pixel (zero in the padding). col is built for a chunk of output rows at
 * a time, sized to stay in the core's cache, in per-thread scratch from the
 * step arena. A 1x1 convolution with stride 1 and no padding needs no col:
 * the image itself is its column matrix.
 *
 * Threads split the batch, each image computed by one thread calling a
 * single-threaded sgemm (OpenBLAS's OpenMP build runs single-threaded
 * inside a parallel region). For the small per-image GEMMs of a CNN that
 * beats one threaded sgemm per image, whose threads meet after every
 * image. With fewer images than threads, images go one by one through a
 * threaded sgemm.
 *
 * Backward rebuilds each image's col rather than keeping it from forward
 * (col is KH KW times the input; rebuilding it in cache is cheaper than
 * streaming it back from memory). The weight gradient accumulates per
 * thread, over that thread's images, and the threads' sums are added in
 * thread order at the end: results depend on the thread count only. */
#include <cblas.h>
#include <omp.h>
#include <string.h>

#include "conv_impl.h"

/* Floats of col a thread builds at once (256 KiB: a share of the L2), and
 * the channels from which Winograd's transforms pay for themselves (at 8
 * in and out, 15% faster than im2col; at 4 in, 20% slower). */
enum { COL_BUDGET = 1 << 16, WINO_MIN_CHANNELS = 8 };

typedef struct conv_geom {
    int64_t n, c, h, w;    /* x [N, C, H, W] */
    int64_t oc, oh, ow;    /* y [N, OC, OH, OW] */
    int64_t kh, kw;        /* weight [OC, C / G, KH, KW] */
    sc_conv2d_params p;
    int64_t cg, ocg, kdim; /* per group: C / G, OC / G, and C / G KH KW */
    int64_t rows;          /* output rows per col chunk */
    bool pointwise;        /* x_n is its own column matrix */
    int wino_tile;         /* Winograd's m (winograd_tile); 0 for im2col */
} conv_geom;

/* Winograd's output tile for a convolution: 0 (im2col) unless it is 3x3
 * at stride 1 and dilation 1, one group, wide enough; then 4 where the
 * setting allows it and F(4x4) multiplies at most 3/4 as much as F(2x2)
 * (the output cut into whole or nearly whole 4x4 tiles); else 2.
 * Measured per layer, forward and backward on one thread, F(4x4)
 * against F(2x2) (batch 128 unless noted): 7x7 0.78x the time (32
 * channels in and out), 0.77x (64 to 128), 0.71x (128); 12x12 0.64x
 * (64, batch 64); 14x14 0.95x (32 to 64) and 0.92x (64); 16x16 0.62x
 * (64, batch 64); 28x28 0.71x (32); 30x30 0.96x (64, batch 32); 56x56
 * 0.64x (64, batch 16). (14x14 and 30x30 are padded to 16x16 and 32x32:
 * 0.73 and 0.64 times F(2x2)'s products.) */
static int winograd_tile(const conv_geom *g)
{
    const sc_conv2d_params *p = &g->p;
    bool fits = g->kh == 3 && g->kw == 3 && p->groups == 1 && g->c >= WINO_MIN_CHANNELS &&
                g->oc >= WINO_MIN_CHANNELS;
    for (int d = 0; d < 2; d++)
        fits = fits && p->stride[d] == 1 && p->dilation[d] == 1;
    sc_cpu_conv setting = sc_cpu_conv_setting();
    if (!fits || setting == SC_CPU_CONV_GEMM)
        return 0;
    int64_t f2 = 16 * ((g->oh + 1) / 2) * ((g->ow + 1) / 2);
    int64_t f4 = 36 * ((g->oh + 3) / 4) * ((g->ow + 3) / 4);
    return setting == SC_CPU_CONV_AUTO && 4 * f4 <= 3 * f2 ? 4 : 2;
}

static conv_geom conv_geom_of(const sc_node *node)
{
    const sc_tensor *x = node->in[0], *w = node->in[1], *y = node->out;
    const sc_conv2d_params *p = &node->params.conv2d;
    conv_geom g = {
        .n = x->shape[0], .c = x->shape[1], .h = x->shape[2], .w = x->shape[3],
        .oc = y->shape[1], .oh = y->shape[2], .ow = y->shape[3],
        .kh = w->shape[2], .kw = w->shape[3], .p = *p,
    };
    g.cg = g.c / p->groups;
    g.ocg = g.oc / p->groups;
    g.kdim = g.cg * g.kh * g.kw;
    g.pointwise = g.kh == 1 && g.kw == 1 && p->stride[0] == 1 && p->stride[1] == 1 &&
                  p->padding[0] == 0 && p->padding[1] == 0;
    int64_t row_floats = g.c * g.kh * g.kw * g.ow; /* of col, per output row */
    g.rows = g.pointwise || row_floats == 0 ? g.oh
                                            : min64(max64(COL_BUDGET / row_floats, 1), g.oh);
    g.wino_tile = winograd_tile(&g);
    return g;
}

/* Floats of one thread's col chunk. */
static int64_t col_floats(const conv_geom *g)
{
    return g->pointwise ? 0 : g->c * g->kh * g->kw * g->rows * g->ow;
}

/* ---------------------------------------------------------------------
 * im2col and col2im. */

/* The output columns [*lo, *hi) of a row whose tap, at input column
 * ox stride + off, lands inside [0, len). */
static void tap_span(int64_t out, int stride, int64_t off, int64_t len, int64_t *lo,
                     int64_t *hi)
{
    *lo = min64(off >= 0 ? 0 : (-off + stride - 1) / stride, out);
    *hi = max64(min64(off >= len ? 0 : (len - 1 - off) / stride + 1, out), *lo);
}

/* One tap's row of col [ow] against its input pixels src[(ox - lo) stride],
 * ox in [lo, hi); src is NULL when the row lies in the padding. */
ALWAYS_INLINE void tap_row(float *restrict dst, float *restrict src, int64_t lo, int64_t hi,
                           int64_t ow, int stride, bool gather)
{
    if (!gather) { /* col2im: dst back into the input; padding taps drop out */
        for (int64_t ox = lo; src && ox < hi; ox++)
            src[(ox - lo) * stride] += dst[ox];
        return;
    }
    if (!src)
        lo = hi = ow;
    for (int64_t ox = 0; ox < lo; ox++)
        dst[ox] = 0.0f;
    if (stride == 1) /* separate loops for strides 1 and 2, so that they vectorise */
        for (int64_t ox = lo; ox < hi; ox++)
            dst[ox] = src[ox - lo];
    else if (stride == 2)
        for (int64_t ox = lo; ox < hi; ox++)
            dst[ox] = src[(ox - lo) * 2];
    else
        for (int64_t ox = lo; ox < hi; ox++)
            dst[ox] = src[(ox - lo) * stride];
    for (int64_t ox = hi; ox < ow; ox++)
        dst[ox] = 0.0f;
}

/* A tap's rows of col, one by one: row r against input row
 * iy = (oy0 + r) stride + ki dilation - padding. */
ALWAYS_INLINE void tap_rows(const conv_geom *g, float *plane, float *dst, int64_t oy0,
                            int64_t rows, int64_t ki, int64_t offx, bool gather)
{
    const sc_conv2d_params *p = &g->p;
    int64_t lo, hi;
    tap_span(g->ow, p->stride[1], offx, g->w, &lo, &hi);
    for (int64_t r = 0; r < rows; r++, dst += g->ow) {
        int64_t iy = (oy0 + r) * p->stride[0] - p->padding[0] + ki * p->dilation[0];
        float *src = iy >= 0 && iy < g->h ? plane + iy * g->w + lo * p->stride[1] + offx : NULL;
        tap_row(dst, src, lo, hi, g->ow, p->stride[1], gather);
    }
}

/* Whether a row's three taps across land at input columns 2 ox - 1,
 * 2 ox and 2 ox + 1 (a 3-wide kernel at stride 2, padding 1, no
 * dilation: a ResNet's downsampling convolution), which tap_row3_s2
 * walks in one pass. Then OW = (W - 1) / 2 + 1. */
static bool three_taps_s2(const conv_geom *g)
{
    const sc_conv2d_params *p = &g->p;
    return g->kw == 3 && p->stride[1] == 2 && p->padding[1] == 1 && p->dilation[1] == 1;
}

/* The three taps' rows d[kj] [ow] of one kernel row against the input
 * row src [w] (NULL: in the padding). One pass whose main loops
 * vectorise, where tap_row's three strided ones do not; col2im adds in
 * tap_row's order (kj 0 before kj 2 at an odd column), so results are
 * the same to the bit. */
ALWAYS_INLINE void tap_row3_s2(float *restrict d0, float *restrict d1, float *restrict d2,
                               float *restrict src, int64_t ow, int64_t w, bool gather)
{
    bool odd = w & 1; /* then the last output column's third tap is padding */
    int64_t last = ow - 1;
    if (!gather) {
        for (int64_t m = 0; src && m < last; m++) {
            src[2 * m] += d1[m];
            src[2 * m + 1] = (src[2 * m + 1] + d0[m + 1]) + d2[m];
        }
        if (src) {
            src[2 * last] += d1[last];
            if (!odd)
                src[2 * last + 1] += d2[last];
        }
        return;
    }
    if (!src) {
        memset(d0, 0, (size_t)ow * sizeof *d0);
        memset(d1, 0, (size_t)ow * sizeof *d1);
        memset(d2, 0, (size_t)ow * sizeof *d2);
        return;
    }
    d0[0] = 0.0f;
    d1[0] = src[0];
    d2[0] = w > 1 ? src[1] : 0.0f;
    int64_t end = odd ? last : ow; /* columns [1, end) have all three taps inside */
    for (int64_t ox = 1; ox < end; ox++) {
        d0[ox] = src[2 * ox - 1];
        d1[ox] = src[2 * ox];
        d2[ox] = src[2 * ox + 1];
    }
    if (odd && last > 0) {
        d0[last] = src[2 * last - 1];
        d1[last] = src[2 * last];
        d2[last] = 0.0f;
    }
}

/* tap_rows of a kernel row's three taps (three_taps_s2), d0 their first
 * row in col, the next two rows * OW floats on. */
ALWAYS_INLINE void tap_rows3_s2(const conv_geom *g, float *plane, float *d0, int64_t oy0,
                                int64_t rows, int64_t ki, bool gather)
{
    const sc_conv2d_params *p = &g->p;
    int64_t tap = rows * g->ow;
    for (int64_t r = 0; r < rows; r++, d0 += g->ow) {
        int64_t iy = (oy0 + r) * p->stride[0] - p->padding[0] + ki * p->dilation[0];
        float *src = iy >= 0 && iy < g->h ? plane + iy * g->w : NULL;
        tap_row3_s2(d0, d0 + tap, d0 + 2 * tap, src, g->ow, g->w, gather);
    }
}

/* Between an image img [C, H, W] and the col chunk col [C KH KW, rows OW]
 * of output rows [oy0, oy0 + rows): gather copies img into col (im2col),
 * scatter adds col back into img (col2im). */
ALWAYS_INLINE void col_walk(const conv_geom *g, float *img, int64_t oy0, int64_t rows,
                            float *col, bool gather)
{
    const sc_conv2d_params *p = &g->p;
    bool s2 = three_taps_s2(g);
    for (int64_t c = 0; c < g->c; c++) {
        float *plane = img + c * g->h * g->w;
        for (int64_t ki = 0; ki < g->kh; ki++) {
            float *taps = col + (c * g->kh + ki) * g->kw * rows * g->ow;
            if (s2) {
                tap_rows3_s2(g, plane, taps, oy0, rows, ki, gather);
                continue;
            }
            for (int64_t kj = 0; kj < g->kw; kj++)
                tap_rows(g, plane, taps + kj * rows * g->ow, oy0, rows, ki,
                         kj * p->dilation[1] - p->padding[1], gather);
        }
    }
}

/* col_walk writes img only when scattering, so im2col's x may be const. */
static void im2col(const conv_geom *g, const float *x, int64_t oy0, int64_t rows, float *col)
{
    col_walk(g, (float *)x, oy0, rows, col, true);
}

/* col_walk reads col only when scattering, so col2im's col may be const. */
static void col2im(const conv_geom *g, float *gx, int64_t oy0, int64_t rows, const float *col)
{
    col_walk(g, gx, oy0, rows, (float *)col, false);
}

/* ---------------------------------------------------------------------
 * The batch loop. */

typedef struct conv_job {
    conv_geom g;
    const float *x, *w, *bias; /* bias may be NULL */
    float *y;                  /* forward */
    const float *gy;           /* backward: */
    float *gx;                 /* NULL when x needs no gradient */
    bool gx_fresh;             /* gx is uninitialised: zeroed an image at a time */
    float *gw;                 /* per-slot partials (the gradient itself with one slot), or NULL */
    float *col;                /* per-slot col chunks */
    int slots;
} conv_job;

int sc_conv_slots(int64_t n)
{
    int threads = omp_get_max_threads();
    return n >= threads ? threads : 1;
}

void sc_conv_split(int64_t n, int slots, sc_conv_range_fn fn, const void *arg)
{
    if (slots == 1) {
        fn(arg, 0, 0, n);
        return;
    }
#pragma omp parallel num_threads(slots)
    {
        int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
        fn(arg, (int)t, n * t / nt, n * (t + 1) / nt);
    }
}

void sc_conv_sum_partials(float *restrict dst, const float *restrict parts, int slots,
                          int64_t len)
{
#pragma omp parallel for schedule(static) if (len * slots > SC_CPU_PAR_MIN)
    for (int64_t i = 0; i < len; i++) {
        float acc = 0.0f;
        for (int s = 0; s < slots; s++)
            acc += parts[s * len + i];
        dst[i] += acc;
    }
}

void sc_conv_sgemm_small(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n,
                         int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                         float beta, float *c, int64_t ldc)
{
    int64_t piece = max64(8, SC_CONV_SMALL_GEMM / max64(n * k, 1) / 8 * 8);
    for (int64_t m0 = 0; m0 < m; m0 += piece)
        cblas_sgemm(CblasRowMajor, ta, tb, (int)min64(piece, m - m0), (int)n, (int)k, 1.0f,
                    ta == CblasNoTrans ? a + m0 * lda : a + m0, (int)lda, b, (int)ldb, beta,
                    c + m0 * ldc, (int)ldc);
}

/* The col matrix of output rows [oy0, oy0 + rows) of image x [C, H, W]
 * and its row stride: x itself for a pointwise convolution, else built in
 * col. */
static const float *conv_cols(const conv_geom *g, const float *x, int64_t oy0, int64_t rows,
                              float *col, int64_t *ld)
{
    if (g->pointwise) {
        *ld = g->oh * g->ow;
        return x + oy0 * g->ow;
    }
    im2col(g, x, oy0, rows, col);
    *ld = rows * g->ow;
    return col;
}

/* y_n [OC, OH OW] = bias + W col, chunk by chunk and group by group. */
static void conv_forward_image(const conv_job *j, int64_t n, int slot)
{
    const conv_geom *g = &j->g;
    int64_t ohw = g->oh * g->ow;
    const float *x = j->x + n * g->c * g->h * g->w;
    float *y = j->y + n * g->oc * ohw, *col = j->col + slot * col_floats(g);
    for (int64_t o = 0; j->bias && o < g->oc; o++)
        for (int64_t i = 0; i < ohw; i++)
            y[o * ohw + i] = j->bias[o];
    for (int64_t oy0 = 0; oy0 < g->oh; oy0 += g->rows) {
        int64_t rows = min64(g->rows, g->oh - oy0), cols = rows * g->ow, ld;
        const float *b = conv_cols(g, x, oy0, rows, col, &ld);
        for (int gi = 0; gi < g->p.groups; gi++)
            sc_conv_sgemm_small(CblasNoTrans, CblasNoTrans, g->ocg, cols, g->kdim,
                                j->w + gi * g->ocg * g->kdim, g->kdim, b + gi * g->kdim * ld, ld,
                                j->bias ? 1.0f : 0.0f, y + gi * g->ocg * ohw + oy0 * g->ow, ohw);
    }
}

/* gx_n [C, H, W] += col2im(W^T gy_n) for one chunk; pointwise, straight
 * into gx_n. */
static void conv_input_grad(const conv_job *j, const float *gy, float *gx, int64_t oy0,
                            int64_t rows, float *col)
{
    const conv_geom *g = &j->g;
    int64_t ohw = g->oh * g->ow, cols = rows * g->ow;
    float *dst = g->pointwise ? gx + oy0 * g->ow : col;
    int64_t ld = g->pointwise ? ohw : cols;
    for (int gi = 0; gi < g->p.groups; gi++)
        sc_conv_sgemm_small(CblasTrans, CblasNoTrans, g->kdim, cols, g->ocg,
                            j->w + gi * g->ocg * g->kdim, g->kdim,
                            gy + gi * g->ocg * ohw + oy0 * g->ow, ohw, g->pointwise ? 1.0f : 0.0f,
                            dst + gi * g->kdim * ld, ld);
    if (!g->pointwise)
        col2im(g, gx, oy0, rows, col);
}

/* Per chunk: gW [OC, C/G KH KW] += gy_n col^T and gx_n += col2im(W^T gy_n). */
static void conv_backward_image(const conv_job *j, int64_t n, int slot)
{
    const conv_geom *g = &j->g;
    int64_t ohw = g->oh * g->ow, wnumel = g->oc * g->kdim;
    const float *x = j->x + n * g->c * g->h * g->w, *gy = j->gy + n * g->oc * ohw;
    float *gx = j->gx ? j->gx + n * g->c * g->h * g->w : NULL;
    float *col = j->col + slot * col_floats(g);
    if (gx && j->gx_fresh)
        memset(gx, 0, (size_t)(g->c * g->h * g->w) * sizeof *gx);
    for (int64_t oy0 = 0; oy0 < g->oh; oy0 += g->rows) {
        int64_t rows = min64(g->rows, g->oh - oy0), cols = rows * g->ow, ld;
        if (j->gw) {
            const float *b = conv_cols(g, x, oy0, rows, col, &ld);
            for (int gi = 0; gi < g->p.groups; gi++)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)g->ocg, (int)g->kdim,
                            (int)cols, 1.0f, gy + gi * g->ocg * ohw + oy0 * g->ow, (int)ohw,
                            b + gi * g->kdim * ld, (int)ld, 1.0f,
                            j->gw + slot * wnumel + gi * g->ocg * g->kdim, (int)g->kdim);
        }
        if (gx)
            conv_input_grad(j, gy, gx, oy0, rows, col);
    }
}

static void conv_forward_range(const void *arg, int slot, int64_t n0, int64_t n1)
{
    for (int64_t n = n0; n < n1; n++)
        conv_forward_image(arg, n, slot);
}

static void conv_backward_range(const void *arg, int slot, int64_t n0, int64_t n1)
{
    for (int64_t n = n0; n < n1; n++)
        conv_backward_image(arg, n, slot);
}

/* gb [OC] += the sum of gy [N, OC, OH OW] over images and pixels; channels
 * in parallel, each summed in a fixed order. */
static void conv_bias_grad(const conv_geom *g, const float *gy, float *gb)
{
    int64_t ohw = g->oh * g->ow;
#pragma omp parallel for schedule(static) if (g->n * g->oc * ohw > SC_CPU_PAR_MIN)
    for (int64_t o = 0; o < g->oc; o++) {
        float acc = 0.0f;
        for (int64_t n = 0; n < g->n; n++) {
            const float *row = gy + (n * g->oc + o) * ohw;
            float part = 0.0f;
#pragma omp simd reduction(+ : part)
            for (int64_t i = 0; i < ohw; i++)
                part += row[i];
            acc += part;
        }
        gb[o] += acc;
    }
}

static sc_wino_shape wino_shape_of(const conv_geom *g)
{
    return (sc_wino_shape){.n = g->n, .c = g->c, .h = g->h, .w = g->w, .k = g->oc,
                           .oh = g->oh, .ow = g->ow, .ph = g->p.padding[0],
                           .pw = g->p.padding[1], .m = g->wino_tile};
}

/* ---------------------------------------------------------------------
 * Kernels. */

static sc_status conv2d_forward(sc_node *node)
{
    conv_job j = {.g = conv_geom_of(node)};
    j.x = sc_tensor_f32(node->in[0]);
    j.w = sc_tensor_f32(node->in[1]);
    j.bias = node->n_inputs > 2 ? sc_tensor_f32(node->in[2]) : NULL;
    j.y = sc_tensor_f32(node->out);
    if (j.g.wino_tile) {
        sc_wino_shape s = wino_shape_of(&j.g);
        return sc_wino_forward(node->ctx, &s, j.x, j.w, j.bias, j.y);
    }
    j.slots = sc_conv_slots(j.g.n);
    j.col = sc_ctx_scratch(node->ctx, (size_t)(j.slots * col_floats(&j.g)) * sizeof(float));
    if (!j.col)
        return SC_ERR_NOMEM;
    sc_conv_split(j.g.n, j.slots, conv_forward_range, &j);
    return SC_OK;
}

/* gx and gw through im2col; with several slots, gw sums in zeroed per-slot
 * partials first. */
static sc_status conv_backward_im2col(conv_job *j, sc_ctx *ctx, float *gw)
{
    int64_t wnumel = j->g.oc * j->g.kdim;
    j->slots = sc_conv_slots(j->g.n);
    j->col = sc_ctx_scratch(ctx, (size_t)(j->slots * col_floats(&j->g)) * sizeof(float));
    j->gw = gw && j->slots > 1 ? sc_ctx_scratch(ctx, (size_t)(j->slots * wnumel) * sizeof(float))
                               : gw;
    if (!j->col || (gw && !j->gw))
        return SC_ERR_NOMEM;
    if (gw && j->slots > 1)
        memset(j->gw, 0, (size_t)(j->slots * wnumel) * sizeof(float));
    sc_conv_split(j->g.n, j->slots, conv_backward_range, j);
    if (gw && j->slots > 1)
        sc_conv_sum_partials(gw, j->gw, j->slots, wnumel);
    return SC_OK;
}

static sc_status conv2d_backward(sc_node *node, const sc_tensor *gy, sc_tensor *const *gin)
{
    float *gw = gin[1] ? sc_tensor_f32(gin[1]) : NULL;
    float *gb = node->n_inputs > 2 && gin[2] ? sc_tensor_f32(gin[2]) : NULL;
    conv_job j = {.g = conv_geom_of(node)};
    j.x = sc_tensor_f32(node->in[0]);
    j.w = sc_tensor_f32(node->in[1]);
    j.gy = sc_tensor_f32(gy);
    j.gx = gin[0] ? sc_tensor_f32(gin[0]) : NULL;
    j.gx_fresh = sc_node_grad_fresh(node, 0);
    if (gb)
        conv_bias_grad(&j.g, j.gy, gb);
    if (!j.gx && !gw)
        return SC_OK;
    if (j.g.wino_tile) {
        sc_wino_shape s = wino_shape_of(&j.g);
        return sc_wino_backward(node->ctx, &s, j.x, j.w, j.gy, j.gx, j.gx_fresh, gw);
    }
    return conv_backward_im2col(&j, node->ctx, gw);
}

const sc_kernel sc_cpu_kernel_conv2d = {.forward = conv2d_forward, .backward = conv2d_backward,
                                        .writes_grads = 1u << 0};
