/* conv2d, pooling and concat: finite-difference gradient checks (odd
 * shapes, stride, padding, dilation, groups, depthwise, 1x1, non-square
 * kernels, frozen inputs, the Winograd path), forward values against
 * PyTorch, large convolutions (several column chunks, Winograd tiles)
 * against a direct reference, determinism, and error messages. */
#include <criterion/criterion.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/conv_impl.h"
#include "gradcheck.h"
#include "op_fixture.h"
#include "scorch/scorch.h"
#include "scorch_host/context.h"
#include "scorch_host/params.h"


static void setup(void)
{
    op_fixture_setup(42);
}

TestSuite(conv, .init = setup, .fini = op_fixture_teardown);


static sc_tensor *param4(int64_t a, int64_t b, int64_t c, int64_t d)
{
    return test_param(4, (int64_t[]){a, b, c, d});
}

/* t[i] = ((i mul) mod m - m / 2) scale: the inputs of the PyTorch
 * references (tools: torch.arange(n) * mul % m - m // 2, times scale). */
static void fill_pattern(sc_tensor *t, int64_t mul, int64_t m, float scale)
{
    for (int64_t i = 0; i < t->numel; i++)
        sc_tensor_f32(t)[i] = (float)((i * mul) % m - m / 2) * scale;
}

/* Values that differ pairwise by at least 0.01 (well beyond the
 * central-difference step), in shuffled order: max pooling has no ties. */
static void fill_distinct(sc_tensor *t)
{
    float *x = sc_tensor_f32(t);
    for (int64_t i = 0; i < t->numel; i++)
        x[i] = 0.01f * (float)i - 0.005f * (float)t->numel;
    for (int64_t i = t->numel - 1; i > 0; i--) {
        int64_t j = (int64_t)(sc_rng_u64(&rng) % (uint64_t)(i + 1));
        float v = x[i];
        x[i] = x[j];
        x[j] = v;
    }
}

static void expect_grads_opts(const char *what, gradcheck_fn fn, void *user, int n,
                              sc_tensor *const *in, const gradcheck_opts *opts)
{
    gradcheck_report rep;
    bool ok = gradcheck_run(ctx, fn, user, n, in, opts, &rep);
    cr_assert(ok, "%s: %s", what, rep.message);
    cr_assert_gt(rep.checked, 0, "%s: nothing checked", what);
}

static void expect_grads(const char *what, gradcheck_fn fn, void *user, int n,
                         sc_tensor *const *in)
{
    expect_grads_opts(what, fn, user, n, in, NULL);
}

static void expect_error(const sc_tensor *result, const char *const *parts)
{
    cr_assert_null(result);
    for (int i = 0; parts[i]; i++)
        cr_assert(strstr(sc_error_message(), parts[i]), "message \"%s\" lacks \"%s\"",
                  sc_error_message(), parts[i]);
}

/* ---------------------------------------------------------------------
 * conv2d gradients. */

typedef struct conv_case {
    const char *name;
    int64_t x[4], w[4];
    bool bias;
    sc_conv2d_opts opts;
} conv_case;

static sc_tensor *apply_conv(sc_ctx *c, sc_tensor *const *in, void *user)
{
    const conv_case *k = user;
    return sc_conv2d(c, in[0], in[1], k->bias ? in[2] : NULL, &k->opts);
}

/* A convolution is linear in each input, so the central difference is
 * exact at any step: a large one keeps float rounding (sums of up to
 * hundreds of products) out of the comparison. */
static const gradcheck_opts linear_opts = {.eps = 0.05};

static void expect_conv_grads(const conv_case *k)
{
    sc_tensor *in[] = {test_param(4, k->x), test_param(4, k->w), test_param(1, &k->w[0])};
    expect_grads_opts(k->name, apply_conv, (void *)k, k->bias ? 3 : 2, in, &linear_opts);
}

Test(conv, grad_conv2d_geometries)
{
    static const conv_case cases[] = {
        {"3x3 pad 1 bias", {2, 3, 5, 7}, {4, 3, 3, 3}, true, {{1, 1}, {1, 1}, {1, 1}, 1}},
        {"stride 2 pad 2", {2, 3, 5, 7}, {4, 3, 3, 3}, false, {{2, 2}, {2, 2}, {1, 1}, 1}},
        /* stride 2 pad 1: a row's three taps in one pass (conv.c), at an odd
         * width, an even one, and widths 2 and 1 */
        {"stride 2 pad 1", {2, 3, 5, 7}, {4, 3, 3, 3}, true, {{2, 2}, {1, 1}, {1, 1}, 1}},
        {"stride 2 pad 1 even", {2, 3, 6, 8}, {4, 3, 3, 3}, false, {{2, 2}, {1, 1}, {1, 1}, 1}},
        {"stride 2 pad 1 width 2", {1, 2, 4, 2}, {3, 2, 3, 3}, false, {{2, 2}, {1, 1}, {1, 1}, 1}},
        {"stride 2 pad 1 width 1", {1, 2, 3, 1}, {3, 2, 3, 3}, false, {{2, 2}, {1, 1}, {1, 1}, 1}},
        {"3x2 stride 2x1 pad 1x0", {2, 3, 5, 7}, {2, 3, 3, 2}, true, {{2, 1}, {1, 0}, {1, 1}, 1}},
        {"dilation 2 pad 1", {2, 2, 7, 6}, {3, 2, 3, 3}, true, {{1, 1}, {1, 1}, {2, 2}, 1}},
        {"dilation 2x1 stride 2", {1, 2, 7, 6}, {3, 2, 3, 2}, false, {{2, 2}, {2, 1}, {2, 1}, 1}},
        {"groups 2", {2, 4, 5, 5}, {6, 2, 3, 3}, true, {{1, 1}, {1, 1}, {1, 1}, 2}},
        {"depthwise", {2, 3, 5, 7}, {3, 1, 3, 3}, true, {{1, 1}, {1, 1}, {1, 1}, 3}},
        {"depthwise x2 stride 2", {2, 3, 5, 7}, {6, 1, 3, 2}, false, {{2, 2}, {1, 1}, {1, 1}, 3}},
        {"1x1", {2, 3, 5, 7}, {4, 3, 1, 1}, true, {{1, 1}, {0, 0}, {1, 1}, 1}},
        {"1x1 groups 3", {2, 6, 3, 5}, {3, 2, 1, 1}, false, {{1, 1}, {0, 0}, {1, 1}, 3}},
        {"1x1 stride 2", {2, 3, 5, 7}, {4, 3, 1, 1}, false, {{2, 2}, {0, 0}, {1, 1}, 1}},
        {"1x1 pad 1", {1, 3, 5, 7}, {2, 3, 1, 1}, true, {{1, 1}, {1, 1}, {1, 1}, 1}},
        {"one image, kernel = input", {1, 2, 3, 3}, {2, 2, 3, 3}, true, {{1, 1}, {0, 0}, {1, 1}, 1}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_conv_grads(&cases[i]);
}

/* A frozen weight or an input that needs no gradient (the first layer)
 * gets none: backward skips it and still gets the others right. */
Test(conv, grad_conv2d_frozen_inputs)
{
    conv_case k = {"frozen", {2, 3, 5, 7}, {4, 3, 3, 3}, true, {{1, 1}, {1, 1}, {1, 1}, 1}};
    sc_tensor *x = test_param(4, k.x), *w = test_param(4, k.w), *b = test_param(1, &k.w[0]);
    sc_params_set_trainable(w, false);
    expect_grads("frozen weight", apply_conv, &k, 3, (sc_tensor *[]){x, w, b});
    sc_params_set_trainable(w, true);
    sc_params_set_trainable(x, false);
    sc_params_zero_grad(ps);
    expect_grads("input without grad", apply_conv, &k, 3, (sc_tensor *[]){x, w, b});
    for (int64_t i = 0; i < x->numel; i++)
        cr_assert_eq(sc_tensor_f32(x->grad)[i], 0.0f, "the frozen input got a gradient");
}

/* NULL options mean stride 1, padding 0, dilation 1, groups 1; fields left
 * zero in an options struct mean the same. */
Test(conv, defaults)
{
    sc_tensor *x = param4(2, 3, 5, 7), *w = param4(4, 3, 3, 3);
    sc_tensor *a = sc_conv2d(ctx, x, w, NULL, NULL);
    sc_tensor *b = sc_conv2d(ctx, x, w, NULL, &(sc_conv2d_opts){.padding = {0, 0}});
    cr_assert(a && b, "%s", sc_error_message());
    cr_assert(a->shape[0] == 2 && a->shape[1] == 4 && a->shape[2] == 3 && a->shape[3] == 5);
    cr_assert(memcmp(a->data, b->data, sc_tensor_nbytes(a)) == 0);
}

/* ---------------------------------------------------------------------
 * conv2d values: PyTorch 1.13 (torch.nn.functional.conv2d) on patterned
 * inputs. */

Test(conv, values_conv2d_against_torch)
{
    sc_tensor *x = param4(1, 2, 4, 5), *w = param4(3, 2, 3, 2), *b = test_param(1, (int64_t[]){3});
    fill_pattern(x, 7, 11, 0.125f);
    fill_pattern(w, 5, 9, 0.0625f);
    fill_pattern(b, 1, 3, 0.25f);
    static const float want1[] = {
        -0.1171875f, 0.1484375f, -0.5234375f, -0.078125f, -0.2734375f, -0.546875f,
        -0.1640625f, 0.109375f, -0.4765625f, -0.1328125f, -0.0078125f, -0.4921875f,
        0.265625f, 0.078125f, -0.1171875f, 0.1484375f, -0.1015625f, -0.3671875f,
        0.3125f, -0.0703125f, 0.1015625f, 0.5546875f, 0.2109375f, -0.046875f,
        0.390625f, 0.5625f, 0.1015625f, 0.3515625f, 0.2578125f, 0.1328125f};
    /* stride (2, 1), padding (1, 1), dilation (1, 2) */
    sc_tensor *y = sc_conv2d(ctx, x, w, b, &(sc_conv2d_opts){{2, 1}, {1, 1}, {1, 2}, 1});
    expect_values(y, want1, 30, 1e-6);
    cr_assert(y->shape[2] == 2 && y->shape[3] == 5);

    sc_tensor *x2 = param4(1, 4, 3, 3), *w2 = param4(4, 2, 2, 2);
    fill_pattern(x2, 7, 11, 0.125f);
    fill_pattern(w2, 5, 9, 0.0625f);
    static const float want2[] = {
        -0.078125f, -0.078125f, -0.421875f, 0.1796875f, 0.078125f, 0.1171875f,
        0.109375f, -0.0234375f, 0.2578125f, -0.1171875f, 0.3359375f, -0.46875f,
        -0.1953125f, 0.15625f, -0.515625f, 0.1796875f};
    expect_values(sc_conv2d(ctx, x2, w2, NULL, &(sc_conv2d_opts){.groups = 2}), want2, 16, 1e-6);
}

/* ---------------------------------------------------------------------
 * Large convolutions (several column chunks per image, threads splitting
 * the batch, one image through a threaded GEMM) against a direct
 * convolution in double. */

typedef struct conv_dims {
    int64_t n, c, h, w, oc, oh, ow, kh, kw, cg, ocg;
    sc_conv2d_opts o;
} conv_dims;

/* The input pixel under tap (ki, kj) of output (oy, ox), or -1 in the
 * padding. */
static int64_t tap_index(const conv_dims *d, int64_t oy, int64_t ox, int64_t ki, int64_t kj)
{
    int64_t iy = oy * d->o.stride[0] - d->o.padding[0] + ki * d->o.dilation[0];
    int64_t ix = ox * d->o.stride[1] - d->o.padding[1] + kj * d->o.dilation[1];
    return iy < 0 || iy >= d->h || ix < 0 || ix >= d->w ? -1 : iy * d->w + ix;
}

/* y = conv(x, w) + b, and for the loss sum(y gy): gx, gw, gb. */
static void direct_conv(const conv_dims *d, const float *x, const float *w, const float *b,
                        const float *gy, double *y, double *gx, double *gw, double *gb)
{
    int64_t hw = d->h * d->w, ohw = d->oh * d->ow, kk = d->kh * d->kw;
    for (int64_t n = 0; n < d->n; n++)
        for (int64_t o = 0; o < d->oc; o++)
            for (int64_t p = 0; p < ohw; p++) {
                int64_t yo = (n * d->oc + o) * ohw + p, g = o / d->ocg;
                y[yo] = b[o];
                gb[o] += gy[yo];
                for (int64_t ci = 0; ci < d->cg; ci++)
                    for (int64_t k = 0; k < kk; k++) {
                        int64_t at = tap_index(d, p / d->ow, p % d->ow, k / d->kw, k % d->kw);
                        if (at < 0)
                            continue;
                        int64_t xi = (n * d->c + g * d->cg + ci) * hw + at;
                        int64_t wi = (o * d->cg + ci) * kk + k;
                        y[yo] += (double)x[xi] * w[wi];
                        gx[xi] += (double)gy[yo] * w[wi];
                        gw[wi] += (double)gy[yo] * x[xi];
                    }
            }
}

/* got within tol (1 + |want|) of want, elementwise. */
static void expect_close(const char *what, const float *got, const double *want, int64_t n,
                         double tol)
{
    for (int64_t i = 0; i < n; i++)
        cr_assert(fabs(got[i] - want[i]) <= tol * (1.0 + fabs(want[i])),
                  "%s[%lld]: %.7g, want %.7g", what, (long long)i, (double)got[i], want[i]);
}

/* Fills the step arena with NaNs: the second time into the one block the
 * first reset made, which later allocations reuse. */
static void dirty_arena(void)
{
    for (int k = 0; k < 2; k++) {
        sc_tensor *t = sc_tensor_new(ctx, SC_F32, 1, (int64_t[]){1 << 21});
        cr_assert_not_null(t);
        for (int64_t i = 0; i < t->numel; i++)
            sc_tensor_f32(t)[i] = NAN;
        sc_ctx_reset(ctx);
    }
}

/* The convolution's output and gradients against direct_conv's: x's
 * gradient added into (x a parameter), and, when fresh, written into
 * the step arena first (the convolution's input is x scaled by 1), the
 * arena left dirty by dirty_arena. */
static void expect_big_conv_of(const conv_dims *d, bool fresh)
{
    sc_tensor *x = param4(d->n, d->c, d->h, d->w), *w = param4(d->oc, d->cg, d->kh, d->kw);
    sc_tensor *b = test_param(1, &d->oc);
    sc_tensor *gy = sc_tensor_alloc(SC_F32, 4, (int64_t[]){d->n, d->oc, d->oh, d->ow});
    cr_assert_not_null(gy);
    for (int64_t i = 0; i < gy->numel; i++)
        sc_tensor_f32(gy)[i] = 2.0f * sc_rng_uniform(&rng) - 1.0f;
    if (fresh)
        dirty_arena();
    sc_tensor *y = sc_conv2d(ctx, fresh ? sc_scale(ctx, x, 1.0f) : x, w, b, &d->o);
    cr_assert_not_null(y, "%s", sc_error_message());
    cr_assert(y->shape[2] == d->oh && y->shape[3] == d->ow);
    cr_assert_eq(sc_backward(ctx, sc_sum(ctx, sc_mul(ctx, y, gy)), NULL, NULL), SC_OK, "%s",
                 sc_error_message());
    double *ry = calloc((size_t)y->numel, sizeof *ry), *rgx = calloc((size_t)x->numel, sizeof *rgx);
    double *rgw = calloc((size_t)w->numel, sizeof *rgw), *rgb = calloc((size_t)d->oc, sizeof *rgb);
    cr_assert(ry && rgx && rgw && rgb);
    direct_conv(d, sc_tensor_f32(x), sc_tensor_f32(w), sc_tensor_f32(b), sc_tensor_f32(gy), ry,
                rgx, rgw, rgb);
    expect_close("y", sc_tensor_f32(y), ry, y->numel, 1e-4);
    expect_close("gx", sc_tensor_f32(x->grad), rgx, x->numel, 1e-4);
    /* A weight's gradient sums N OH OW products (7,680 in the first big
     * case); there F(4x4) erred by up to 1.2e-4, OpenBLAS's kernel for
     * the few channels summing less exactly than for 32 or more. */
    expect_close("gw", sc_tensor_f32(w->grad), rgw, w->numel, 2e-4);
    expect_close("gb", sc_tensor_f32(b->grad), rgb, d->oc, 1e-4);
    free(ry);
    free(rgx);
    free(rgw);
    free(rgb);
    sc_tensor_free(gy);
    sc_ctx_reset(ctx);
}

static void expect_big_conv(const conv_dims *d)
{
    expect_big_conv_of(d, false);
    expect_big_conv_of(d, true);
}

Test(conv, big_conv2d_against_direct)
{
    /* 3 chunks of output rows per image; 3 images over the threads */
    expect_big_conv(&(conv_dims){3, 8, 40, 64, 16, 40, 64, 3, 3, 8, 16,
                                 {{1, 1}, {1, 1}, {1, 1}, 1}});
    /* groups 2, stride 2, padding 2, dilation 2: 2 chunks; one image */
    expect_big_conv(&(conv_dims){1, 8, 41, 130, 6, 21, 65, 3, 3, 4, 3,
                                 {{2, 2}, {2, 2}, {2, 2}, 2}});
    /* stride 2 pad 1 (a ResNet's downsampling), even and odd widths */
    expect_big_conv(&(conv_dims){3, 8, 28, 28, 16, 14, 14, 3, 3, 8, 16,
                                 {{2, 2}, {1, 1}, {1, 1}, 1}});
    expect_big_conv(&(conv_dims){2, 8, 29, 31, 6, 15, 16, 3, 3, 8, 6,
                                 {{2, 2}, {1, 1}, {1, 1}, 1}});
    /* 64 -> 128 channels at 7x7: forward and input-gradient products of
     * more than SC_CONV_SMALL_GEMM multiply-adds, in pieces */
    expect_big_conv(&(conv_dims){2, 64, 14, 14, 128, 7, 7, 3, 3, 64, 128,
                                 {{2, 2}, {1, 1}, {1, 1}, 1}});
    /* pointwise, no col */
    expect_big_conv(&(conv_dims){4, 16, 20, 30, 8, 20, 30, 1, 1, 16, 8,
                                 {{1, 1}, {0, 0}, {1, 1}, 1}});
}

/* sc_conv_sgemm_small against a product in double: every shape of
 * operands it is given, in 2 to 4 pieces, with and without beta. */
Test(conv, sgemm_in_small_pieces)
{
    enum { M = 100, N = 90, K = 300 }; /* 2.7 * SC_CONV_SMALL_GEMM */
    static float a[M * K], b[K * N], c[M * N], c0[M * N];
    for (int i = 0; i < M * K; i++)
        a[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
    for (int i = 0; i < K * N; i++)
        b[i] = (float)((i * 53) % 97) / 97.0f - 0.5f;
    for (int i = 0; i < M * N; i++)
        c0[i] = (float)(i % 13) - 6.0f;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int beta = 0; beta < 2; beta++) {
                memcpy(c, c0, sizeof c);
                sc_conv_sgemm_small(ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                                    M, N, K, a, ta ? M : K, b, tb ? K : N, (float)beta, c, N);
                for (int i = 0; i < M; i++)
                    for (int j = 0; j < N; j++) {
                        double want = beta * c0[i * N + j];
                        for (int k = 0; k < K; k++)
                            want += (double)a[ta ? k * M + i : i * K + k] *
                                    b[tb ? j * K + k : k * N + j];
                        cr_assert_float_eq(c[i * N + j], want, 1e-4,
                                           "ta %d tb %d beta %d: c[%d, %d] = %g, want %g", ta, tb,
                                           beta, i, j, (double)c[i * N + j], want);
                    }
            }
}

/* 3x3 at stride 1 with 8 channels or more goes through Winograd: under
 * auto, F(4x4, 3x3) for the first eight here (at most 3/4 of F(2x2)'s
 * products; the fifth has two tiles a row) and F(2x2, 3x3) for the
 * others; F(2x2) for all under winograd2; im2col under gemm. Part tiles
 * in rows and in columns, channels that are no multiple of 8, padding 0
 * to 2, chunks of tiles spanning images, and a single image. */
static const sc_cpu_conv conv_settings[] = {SC_CPU_CONV_AUTO, SC_CPU_CONV_WINOGRAD2,
                                            SC_CPU_CONV_GEMM};

static const conv_dims winograd_cases[] = {
    {5, 16, 23, 16, 24, 23, 16, 3, 3, 16, 24, {{1, 1}, {1, 1}, {1, 1}, 1}},
    {3, 17, 16, 15, 16, 16, 15, 3, 3, 17, 16, {{1, 1}, {1, 1}, {1, 1}, 1}},
    {2, 16, 10, 10, 20, 12, 12, 3, 3, 16, 20, {{1, 1}, {2, 2}, {1, 1}, 1}},
    {1, 32, 32, 42, 16, 30, 40, 3, 3, 32, 16, {{1, 1}, {0, 0}, {1, 1}, 1}},
    {4, 12, 8, 8, 20, 8, 8, 3, 3, 12, 20, {{1, 1}, {1, 1}, {1, 1}, 1}},
    {5, 16, 13, 11, 24, 13, 11, 3, 3, 16, 24, {{1, 1}, {1, 1}, {1, 1}, 1}},
    {3, 17, 9, 8, 16, 7, 6, 3, 3, 17, 16, {{1, 1}, {0, 0}, {1, 1}, 1}},
    {2, 16, 6, 7, 20, 8, 9, 3, 3, 16, 20, {{1, 1}, {2, 2}, {1, 1}, 1}},
    {5, 16, 9, 10, 24, 9, 10, 3, 3, 16, 24, {{1, 1}, {1, 1}, {1, 1}, 1}},
    {3, 17, 7, 8, 16, 5, 6, 3, 3, 17, 16, {{1, 1}, {0, 0}, {1, 1}, 1}},
    {2, 16, 4, 3, 20, 6, 5, 3, 3, 16, 20, {{1, 1}, {2, 2}, {1, 1}, 1}},
};

Test(conv, winograd_against_direct)
{
    for (size_t i = 0; i < sizeof conv_settings / sizeof *conv_settings; i++) {
        sc_cpu_set_conv(conv_settings[i]);
        for (size_t k = 0; k < sizeof winograd_cases / sizeof *winograd_cases; k++)
            expect_big_conv(&winograd_cases[k]);
    }
}

/* y of a convolution of x (random) by w (random), with the setting. */
static float *conv_output(const conv_dims *d, sc_cpu_conv setting)
{
    sc_rng_init(&rng, 7, 0);
    sc_tensor *x = param4(d->n, d->c, d->h, d->w), *w = param4(d->oc, d->cg, d->kh, d->kw);
    for (int64_t i = 0; i < x->numel; i++)
        sc_tensor_f32(x)[i] = sc_rng_uniform(&rng);
    for (int64_t i = 0; i < w->numel; i++)
        sc_tensor_f32(w)[i] = sc_rng_uniform(&rng) - 0.5f;
    sc_cpu_set_conv(setting);
    sc_tensor *y = sc_conv2d(ctx, x, w, NULL, &d->o);
    cr_assert_not_null(y, "%s", sc_error_message());
    float *out = malloc(sc_tensor_nbytes(y));
    cr_assert_not_null(out);
    memcpy(out, y->data, sc_tensor_nbytes(y));
    sc_ctx_reset(ctx);
    return out;
}

/* auto's choice, seen in the bits: the same as winograd2's where auto
 * takes F(2x2), different where it takes F(4x4). */
Test(conv, auto_takes_f4x4_where_it_pays)
{
    for (size_t k = 0; k < sizeof winograd_cases / sizeof *winograd_cases; k++) {
        const conv_dims *d = &winograd_cases[k];
        float *a = conv_output(d, SC_CPU_CONV_AUTO), *b = conv_output(d, SC_CPU_CONV_WINOGRAD2);
        size_t bytes = (size_t)(d->n * d->oc * d->oh * d->ow) * sizeof(float);
        cr_assert_eq(memcmp(a, b, bytes) != 0, k < 8, "case %zu: F(4x4) expected %s", k,
                     k < 8 ? "" : "not");
        free(a);
        free(b);
    }
}

Test(conv, grad_conv2d_winograd)
{
    static const conv_case cases[] = {
        {"winograd pad 1", {1, 16, 8, 11}, {16, 16, 3, 3}, true, {{1, 1}, {1, 1}, {1, 1}, 1}},
        {"winograd pad 0, 2", {1, 16, 6, 9}, {16, 16, 3, 3}, false, {{1, 1}, {0, 2}, {1, 1}, 1}},
    };
    for (size_t s = 0; s < 2; s++) { /* F(4x4), F(2x2) */
        sc_cpu_set_conv(conv_settings[s]);
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            expect_conv_grads(&cases[i]);
    }
}

/* Mean and largest |got - want| over the mean |want|. */
static void relative_errors(const float *got, const double *want, int64_t n, double *mean,
                            double *max)
{
    double scale = 0.0, sum = 0.0;
    *max = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs(got[i] - want[i]);
        scale += fabs(want[i]);
        sum += e;
        *max = fmax(*max, e);
    }
    *mean = sum / scale;
    *max *= (double)n / scale;
}

/* What the settings trade: on a 64-channel layer of 16x16 outputs, the
 * forward's rounding error against the direct convolution in double,
 * relative to the mean |y|, is about 4 times larger for F(4x4) (auto)
 * than for F(2x2) (winograd2) or im2col (gemm), which err alike; each
 * within the bounds docs/cli.md gives for --cpu-conv. */
Test(conv, settings_trade_speed_for_accuracy)
{
    conv_dims d = {4, 64, 16, 16, 32, 16, 16, 3, 3, 64, 32, {{1, 1}, {1, 1}, {1, 1}, 1}};
    sc_tensor *x = param4(d.n, d.c, d.h, d.w), *w = param4(d.oc, d.cg, d.kh, d.kw);
    sc_tensor *b = test_param(1, &d.oc);
    int64_t ny = d.n * d.oc * d.oh * d.ow;
    double *ry = calloc((size_t)ny, sizeof *ry), *rgx = calloc((size_t)x->numel, sizeof *rgx);
    double *rgw = calloc((size_t)w->numel, sizeof *rgw), *rgb = calloc((size_t)d.oc, sizeof *rgb);
    float *gy = calloc((size_t)ny, sizeof *gy);
    cr_assert(ry && rgx && rgw && rgb && gy);
    direct_conv(&d, sc_tensor_f32(x), sc_tensor_f32(w), sc_tensor_f32(b), gy, ry, rgx, rgw, rgb);
    double mean[3], max[3];
    for (int i = 0; i < 3; i++) {
        sc_cpu_set_conv(conv_settings[i]);
        sc_tensor *y = sc_conv2d(ctx, x, w, b, &d.o);
        cr_assert_not_null(y, "%s", sc_error_message());
        relative_errors(sc_tensor_f32(y), ry, ny, &mean[i], &max[i]);
        sc_ctx_reset(ctx);
    }
    cr_assert(mean[0] > 2 * mean[1] && mean[0] > 2 * mean[2],
              "mean errors: auto %g, winograd2 %g, gemm %g", mean[0], mean[1], mean[2]);
    cr_assert(max[0] < 3e-5 && mean[0] < 2e-6, "auto: max %g, mean %g", max[0], mean[0]);
    for (int i = 1; i < 3; i++)
        cr_assert(max[i] < 6e-6 && mean[i] < 5e-7, "setting %d: max %g, mean %g", i, max[i],
                  mean[i]);
    free(ry);
    free(rgx);
    free(rgw);
    free(rgb);
    free(gy);
}

/* Forward and backward of a conv layer twice on two threads: the same
 * bits (each output has one writer, partial sums add in a fixed order),
 * through im2col (4 channels) and Winograd (8). */
static void conv_step(sc_tensor *const *p, float *out)
{
    sc_params_zero_grad(ps);
    sc_tensor *y = sc_conv2d(ctx, p[0], p[1], p[2], &(sc_conv2d_opts){.padding = {1, 1}});
    cr_assert_eq(sc_backward(ctx, sc_sum(ctx, sc_mul(ctx, y, y)), NULL, NULL), SC_OK);
    int64_t k = 0;
    for (int i = 0; i < 3; i++) {
        memcpy(out + k, p[i]->grad->data, sc_tensor_nbytes(p[i]->grad));
        k += p[i]->numel;
    }
    memcpy(out + k, y->data, sc_tensor_nbytes(y));
    sc_ctx_reset(ctx);
}

Test(conv, same_bits_every_run)
{
    for (int64_t c = 4; c <= 8; c += 4) {
        sc_tensor *p[] = {param4(16, c, 12, 12), param4(16, c, 3, 3), test_param(1, (int64_t[]){16})};
        int64_t n = p[0]->numel + p[1]->numel + p[2]->numel + 16 * 16 * 144;
        float *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
        cr_assert(a && b);
        int threads = omp_get_max_threads();
        omp_set_num_threads(2);
        conv_step(p, a);
        conv_step(p, b);
        omp_set_num_threads(threads);
        cr_assert(memcmp(a, b, (size_t)n * sizeof *a) == 0, "%lld channels", (long long)c);
        free(a);
        free(b);
    }
}

/* ---------------------------------------------------------------------
 * Pooling. */

typedef struct pool_case {
    const char *name;
    int64_t x[4];
    sc_pool2d_opts opts;
} pool_case;

static const pool_case pool_cases[] = {
    {"3x3 stride 2 pad 1", {2, 3, 5, 7}, {{3, 3}, {2, 2}, {1, 1}}},
    {"2x3 stride 1x2 pad 1", {2, 3, 5, 7}, {{2, 3}, {1, 2}, {1, 1}}},
    {"2x2 (stride = kernel)", {2, 3, 6, 7}, {{2, 2}, {0, 0}, {0, 0}}},
    {"3x1 stride 3x1", {1, 2, 7, 3}, {{3, 1}, {3, 1}, {0, 0}}},
};

static sc_tensor *apply_max_pool(sc_ctx *c, sc_tensor *const *in, void *user)
{
    return sc_max_pool2d(c, in[0], user);
}

static sc_tensor *apply_avg_pool(sc_ctx *c, sc_tensor *const *in, void *user)
{
    return sc_avg_pool2d(c, in[0], user);
}

static sc_tensor *apply_global_avg_pool(sc_ctx *c, sc_tensor *const *in, void *user)
{
    return sc_global_avg_pool(c, in[0]);
}

Test(conv, grad_pools)
{
    for (size_t i = 0; i < sizeof pool_cases / sizeof pool_cases[0]; i++) {
        const pool_case *k = &pool_cases[i];
        sc_tensor *x = test_param(4, k->x);
        fill_distinct(x);
        expect_grads(k->name, apply_max_pool, (void *)&k->opts, 1, &x);
        expect_grads(k->name, apply_avg_pool, (void *)&k->opts, 1, &x);
    }
    sc_tensor *x = param4(2, 3, 5, 7);
    expect_grads("global_avg_pool", apply_global_avg_pool, NULL, 1, &x);
}

/* PyTorch 1.13: max_pool2d(x, 3, 2, 1) and
 * avg_pool2d(x, (2, 3), (1, 2), (1, 1), count_include_pad=True). */
Test(conv, values_pools_against_torch)
{
    sc_tensor *x = param4(1, 2, 5, 5), *x2 = param4(1, 1, 5, 6);
    fill_pattern(x, 7, 11, 0.125f);
    fill_pattern(x2, 7, 11, 0.125f);
    static const float want_max[] = {0.5f, 0.625f, 0.625f, 0.5f, 0.5f, 0.625f,
                                     0.375f, 0.5f, 0.25f, 0.625f, 0.5f, 0.5f,
                                     0.625f, 0.625f, 0.5f, 0.25f, 0.625f, 0.125f};
    static const float want_avg[] = {-0.0625f, 0.1041667f, 0.0625f, 0.02083333f,
                                     0.08333334f, 0.0f, 0.08333334f, 0.0625f,
                                     -0.02083333f, -0.08333334f, 0.04166667f, -0.04166667f,
                                     -0.02083333f, 0.02083333f, -0.0625f, 0.0625f,
                                     0.0625f, 0.02083333f};
    expect_values(sc_max_pool2d(ctx, x, &(sc_pool2d_opts){{3, 3}, {2, 2}, {1, 1}}), want_max,
                  18, 0.0);
    expect_values(sc_avg_pool2d(ctx, x2, &(sc_pool2d_opts){{2, 3}, {1, 2}, {1, 1}}), want_avg,
                  18, 1e-6);
    sc_tensor *g = sc_global_avg_pool(ctx, x);
    cr_assert_not_null(g);
    cr_assert(g->ndim == 2 && g->shape[0] == 1 && g->shape[1] == 2);
    for (int c = 0; c < 2; c++) {
        double sum = 0;
        for (int i = 0; i < 25; i++)
            sum += sc_tensor_f32(x)[c * 25 + i];
        cr_assert_float_eq(sc_tensor_f32(g)[c], sum / 25, 1e-6);
    }
}

/* Like PyTorch, a NaN in a window is its max; backward routes the
 * gradient to it. */
Test(conv, max_pool_propagates_nan)
{
    sc_tensor *x = param4(1, 1, 2, 2);
    sc_tensor_f32(x)[2] = NAN;
    sc_tensor *y = sc_max_pool2d(ctx, x, &(sc_pool2d_opts){.kernel = {2, 2}});
    cr_assert(y && isnan(sc_tensor_f32(y)[0]));
    cr_assert_eq(sc_backward(ctx, sc_sum(ctx, sc_scale(ctx, y, 0.0f)), NULL, NULL), SC_OK);
}

/* Max pooling as PyTorch defines it, one window at a time: the first
 * maximum in row-major order, or the last NaN. Returns the max of window
 * (oy, ox) of plane x [h, w] and its flat index in *at. */
static float plain_window_max(const float *x, int64_t w, int64_t oy, int64_t ox, int64_t *at)
{
    float best = x[2 * oy * w + 2 * ox];
    *at = 2 * oy * w + 2 * ox;
    for (int64_t i = 0; i < 4; i++) {
        int64_t k = (2 * oy + i / 2) * w + 2 * ox + i % 2;
        if (x[k] > best || isnan(x[k])) {
            best = x[k];
            *at = k;
        }
    }
    return best;
}

/* The 2x2 kernels run rows in blocks of 8 or 4 outputs, the last block
 * moved back to end with the row: every output width from 1 to 19 (whole
 * blocks, overlapping ones, rows under 4) and odd sides, against the
 * plain loop, with many ties and some NaNs: the values and where the
 * gradient goes, bit for bit, into x's gradient (added to) and into a
 * fresh one (of x scaled by 1, the loop that writes every element). */
Test(conv, max_pool_2x2_equals_a_plain_loop)
{
    for (int64_t k = 0; k < 2 * 38; k++) {
        int64_t w = 2 + k / 2;
        bool fresh = k % 2;
        int64_t h = 4 + w % 2, ow = w / 2, oh = h / 2, planes = 2 * 3;
        sc_tensor *x = param4(2, 3, h, w);
        float *xv = sc_tensor_f32(x);
        for (int64_t i = 0; i < x->numel; i++) /* five levels: ties in most windows */
            xv[i] = sc_rng_u64(&rng) % 23 ? (float)(sc_rng_u64(&rng) % 5) - 2.0f : NAN;
        sc_params_zero_grad(ps);
        sc_tensor *y = sc_max_pool2d(ctx, fresh ? sc_scale(ctx, x, 1.0f) : x,
                                     &(sc_pool2d_opts){.kernel = {2, 2}});
        cr_assert_not_null(y, "%s", sc_error_message());
        sc_tensor *r = sc_tensor_new(ctx, SC_F32, y->ndim, y->shape);
        for (int64_t i = 0; i < r->numel; i++)
            sc_tensor_f32(r)[i] = (float)(i % 7) + 1.0f;
        cr_assert_eq(sc_backward(ctx, sc_sum(ctx, sc_mul(ctx, y, r)), NULL, NULL), SC_OK,
                     "%s", sc_error_message());
        float *want_gx = calloc((size_t)x->numel, sizeof *want_gx);
        cr_assert_not_null(want_gx);
        for (int64_t c = 0; c < planes; c++)
            for (int64_t o = 0; o < oh * ow; o++) {
                int64_t at, i = c * oh * ow + o;
                float want = plain_window_max(xv + c * h * w, w, o / ow, o % ow, &at);
                float got = sc_tensor_f32(y)[i];
                cr_assert(isnan(want) ? isnan(got) : got == want,
                          "w %lld, fresh %d: output %lld is %g, not %g", (long long)w, fresh,
                          (long long)i, (double)got, (double)want);
                want_gx[c * h * w + at] += sc_tensor_f32(r)[i];
            }
        for (int64_t i = 0; i < x->numel; i++)
            cr_assert(sc_tensor_f32(x->grad)[i] == want_gx[i],
                      "w %lld, fresh %d: gradient %lld is %g, not %g", (long long)w, fresh,
                      (long long)i, (double)sc_tensor_f32(x->grad)[i], (double)want_gx[i]);
        free(want_gx);
        sc_ctx_reset(ctx);
    }
}

/* ---------------------------------------------------------------------
 * concat. */

typedef struct concat_case {
    const char *name;
    int n, ndim, axis;
    int64_t shapes[3][3];
} concat_case;

static sc_tensor *apply_concat(sc_ctx *c, sc_tensor *const *in, void *user)
{
    const concat_case *k = user;
    return sc_concat(c, k->n, in, k->axis);
}

Test(conv, grad_concat)
{
    static const concat_case cases[] = {
        {"axis 0", 3, 3, 0, {{2, 3, 4}, {1, 3, 4}, {3, 3, 4}}},
        {"axis 1", 2, 3, 1, {{2, 3, 4}, {2, 1, 4}}},
        {"last axis (-1)", 3, 3, -1, {{2, 3, 4}, {2, 3, 2}, {2, 3, 5}}},
        {"one input", 1, 2, 1, {{3, 5}}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const concat_case *k = &cases[i];
        sc_tensor *in[3];
        for (int j = 0; j < k->n; j++)
            in[j] = test_param(k->ndim, k->shapes[j]);
        expect_grads(k->name, apply_concat, (void *)k, k->n, in);
    }
    /* a middle input without gradient is skipped */
    concat_case k = {"frozen middle", 3, 2, 1, {{2, 3}, {2, 2}, {2, 4}}};
    sc_tensor *in[] = {test_param(2, k.shapes[0]), test_param(2, k.shapes[1]), test_param(2, k.shapes[2])};
    sc_params_set_trainable(in[1], false);
    expect_grads(k.name, apply_concat, &k, 3, in);
}

Test(conv, values_concat)
{
    sc_tensor *a = test_param(2, (int64_t[]){2, 2}), *b = test_param(2, (int64_t[]){2, 1});
    memcpy(a->data, (float[]){1, 2, 3, 4}, 4 * sizeof(float));
    memcpy(b->data, (float[]){5, 6}, 2 * sizeof(float));
    sc_tensor *y = sc_concat(ctx, 2, (sc_tensor *[]){a, b}, 1);
    expect_values(y, (float[]){1, 2, 5, 3, 4, 6}, 6, 0.0);
    cr_assert(y->shape[0] == 2 && y->shape[1] == 3);
    sc_tensor *z = sc_concat(ctx, 2, (sc_tensor *[]){a, a}, 0);
    expect_values(z, (float[]){1, 2, 3, 4, 1, 2, 3, 4}, 8, 0.0);
    cr_assert(z->shape[0] == 4 && z->shape[1] == 2);
}

/* ---------------------------------------------------------------------
 * Errors name the op and the shapes. */

Test(conv, errors_name_op_and_shapes)
{
    sc_tensor *x = param4(2, 3, 5, 7), *w = param4(4, 2, 3, 3), *w3 = param4(4, 3, 3, 3);
    expect_error(sc_conv2d(ctx, x, w, NULL, NULL),
                 (const char *[]){"conv2d", "[2, 3, 5, 7]", "[4, 2, 3, 3]", "3 channels", NULL});
    expect_error(sc_conv2d(ctx, x, w3, NULL, &(sc_conv2d_opts){.groups = 2}),
                 (const char *[]){"conv2d", "groups 2", "[2, 3, 5, 7]", NULL});
    sc_tensor *big = param4(4, 3, 7, 3);
    expect_error(sc_conv2d(ctx, x, big, NULL, NULL),
                 (const char *[]){"conv2d", "larger", "[4, 3, 7, 3]", "[2, 3, 5, 7]", NULL});
    cr_assert_not_null(sc_conv2d(ctx, x, big, NULL, &(sc_conv2d_opts){.padding = {1, 0}}),
                       "padding makes room: %s", sc_error_message());
    sc_tensor *b = test_param(1, (int64_t[]){3});
    expect_error(sc_conv2d(ctx, x, w3, b, NULL), (const char *[]){"conv2d", "bias", "[3]", NULL});
    expect_error(sc_conv2d(ctx, x, w3, NULL, &(sc_conv2d_opts){.stride = {-1, 1}}),
                 (const char *[]){"conv2d", "stride", NULL});
    sc_tensor *flat = test_param(2, (int64_t[]){2, 3});
    expect_error(sc_conv2d(ctx, flat, w3, NULL, NULL), (const char *[]){"conv2d", "[2, 3]", NULL});

    expect_error(sc_max_pool2d(ctx, x, &(sc_pool2d_opts){.kernel = {7, 2}}),
                 (const char *[]){"max_pool2d", "larger", "[2, 3, 5, 7]", NULL});
    expect_error(sc_avg_pool2d(ctx, x, &(sc_pool2d_opts){.kernel = {2, 2}, .padding = {2, 0}}),
                 (const char *[]){"avg_pool2d", "padding", NULL});
    expect_error(sc_max_pool2d(ctx, x, NULL), (const char *[]){"max_pool2d", NULL});
    expect_error(sc_global_avg_pool(ctx, flat), (const char *[]){"global_avg_pool", "[2, 3]", NULL});

    expect_error(sc_concat(ctx, 2, (sc_tensor *[]){x, w}, 1),
                 (const char *[]){"concat", "[4, 2, 3, 3]", "[2, 3, 5, 7]", NULL});
    expect_error(sc_concat(ctx, 1, &x, 4), (const char *[]){"concat", "axis 4", NULL});
    expect_error(sc_concat(ctx, 9, (sc_tensor *[9]){x}, 0), (const char *[]){"concat", "9", NULL});
}
