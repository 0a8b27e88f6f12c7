/* batch_norm and layer_norm: finite-difference gradient checks (train and
 * eval mode, [N, C] and [N, C, H, W]; with and without affine parameters;
 * batch norm with its fused relu and max pooling, which must equal the
 * separate ops bit for bit),
 * forward values and running statistics against PyTorch, train/eval
 * equivalence, stability far from zero, thread-count independence, and
 * error messages. */
#include <criterion/criterion.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradcheck.h"
#include "op.h"
#include "op_fixture.h"
#include "scorch/scorch.h"
#include "scorch_host/context.h"
#include "scorch_host/params.h"


static void setup(void)
{
    op_fixture_setup(42);
}

TestSuite(norm, .init = setup, .fini = op_fixture_teardown);

static const float momentum = 0.1f, eps = 1e-5f;


/* t[i] = ((i mul) mod m - m / 2) scale + offset, as the PyTorch references
 * build their inputs. */
static void fill_pattern(sc_tensor *t, int64_t mul, int64_t m, float scale, float offset)
{
    for (int64_t i = 0; i < t->numel; i++)
        sc_tensor_f32(t)[i] = (float)((i * mul) % m - m / 2) * scale + offset;
}

/* ---------------------------------------------------------------------
 * Batch norm. */

/* weight, bias and the running statistics (mean 0, variance 1, as
 * PyTorch starts them) of c channels: bn[0..3]. */
static void bn_params(int64_t c, sc_tensor **bn)
{
    bn[0] = test_param(1, &c);
    bn[1] = test_param(1, &c);
    for (int i = 0; i < 2; i++) {
        char name[32];
        snprintf(name, sizeof name, "running%d.%d", i, sc_params_count(ps));
        bn[2 + i] = sc_params_add_buffer(ps, name, 1, &c);
        cr_assert_not_null(bn[2 + i], "%s", sc_error_message());
    }
    for (int64_t i = 0; i < c; i++)
        sc_tensor_f32(bn[3])[i] = 1.0f;
}

static sc_tensor *apply_batch_norm(sc_ctx *c, sc_tensor *const *in, void *user)
{
    return sc_batch_norm(c, in[0], in[1], in[2], in[3], in[4], momentum, eps);
}

static void expect_bn_grads(const char *what, int ndim, const int64_t *shape)
{
    sc_tensor *in[5] = {test_param(ndim, shape)};
    bn_params(shape[1], in + 1);
    gradcheck_report rep;
    cr_assert(gradcheck_run(ctx, apply_batch_norm, NULL, 5, in, NULL, &rep), "%s: %s", what,
              rep.message);
    cr_assert_eq(rep.checked, in[0]->numel + 2 * shape[1], "%s: x, weight, bias", what);
}

Test(norm, grad_batch_norm_train)
{
    sc_ctx_set_training(ctx, true);
    expect_bn_grads("[N, C]", 2, (int64_t[]){5, 3});
    expect_bn_grads("[N, C, H, W]", 4, (int64_t[]){3, 2, 5, 7});
    expect_bn_grads("one image", 4, (int64_t[]){1, 3, 2, 3});
}

/* In eval mode the statistics are constants: y is affine in x. */
Test(norm, grad_batch_norm_eval)
{
    sc_ctx_set_training(ctx, false);
    sc_tensor *in[5] = {test_param(4, (int64_t[]){3, 2, 5, 7})};
    bn_params(2, in + 1);
    memcpy(in[3]->data, (float[]){0.3f, -0.2f}, 2 * sizeof(float));
    memcpy(in[4]->data, (float[]){0.5f, 2.0f}, 2 * sizeof(float));
    gradcheck_report rep;
    cr_assert(gradcheck_run(ctx, apply_batch_norm, NULL, 5, in, NULL, &rep), "%s", rep.message);
}

static sc_tensor *apply_batch_norm_relu(sc_ctx *c, sc_tensor *const *in, void *user)
{
    return sc_batch_norm_relu(c, in[0], in[1], in[2], in[3], in[4], momentum, eps);
}

/* x away from the relu's kink, which finite differences must not straddle:
 * in each channel, pairs of values of opposite signs and sizes 0.5 to 2,
 * so that the batch mean is 0 and with weight 1 and bias 0 no output is
 * within 0.25 of 0, in training mode as in eval mode (the running
 * statistics are 0 and 1). */
Test(norm, grad_batch_norm_relu)
{
    for (int training = 0; training < 2; training++) {
        sc_ctx_set_training(ctx, training);
        sc_tensor *in[5] = {test_param(4, (int64_t[]){4, 2, 5, 7})};
        bn_params(2, in + 1);
        for (int64_t i = 0; i < in[0]->numel; i++) { /* i % 35: the position in the plane */
            int64_t k = i / 70 * 35 + i % 35; /* the channel's k-th value */
            sc_tensor_f32(in[0])[i] = (k % 2 ? 1.0f : -1.0f) * (0.5f + 0.5f * (float)(k / 2 % 4));
        }
        for (int ch = 0; ch < 2; ch++) {
            sc_tensor_f32(in[1])[ch] = 1.0f;
            sc_tensor_f32(in[2])[ch] = 0.0f;
        }
        gradcheck_report rep;
        cr_assert(gradcheck_run(ctx, apply_batch_norm_relu, NULL, 5, in, NULL, &rep),
                  "training %d: %s", training, rep.message);
    }
}

/* Batch norm followed by a relu when relu, and by max pooling when pool
 * is not NULL: as one op when fused, else as separate ops. */
typedef struct bn_variant {
    bool fused, relu;
    const sc_pool2d_opts *pool;
} bn_variant;

static sc_tensor *bn_apply(bn_variant v, sc_tensor *x, sc_tensor **bn)
{
    sc_tensor *in[5] = {x, bn[0], bn[1], bn[2], bn[3]};
    if (v.fused && v.pool)
        return sc_batch_norm_max_pool2d(ctx, in, momentum, eps, v.relu, v.pool);
    if (v.fused && v.relu)
        return sc_batch_norm_relu(ctx, x, bn[0], bn[1], bn[2], bn[3], momentum, eps);
    sc_tensor *y = sc_batch_norm(ctx, x, bn[0], bn[1], bn[2], bn[3], momentum, eps);
    y = v.relu ? sc_relu(ctx, y) : y;
    return v.pool ? sc_max_pool2d(ctx, y, v.pool) : y;
}

/* One step of loss = sum(r * f(x)) with f = bn_apply(v): f's values, the
 * gradients of x, weight and bias, and the running statistics after it,
 * in a new array of *n floats; the running statistics are put back as
 * they were. */
static float *bn_step(bn_variant v, sc_tensor *x, sc_tensor **bn, int64_t *n)
{
    int64_t c = bn[0]->numel;
    float *running = malloc(2 * (size_t)c * sizeof *running);
    cr_assert_not_null(running);
    memcpy(running, bn[2]->data, (size_t)c * sizeof *running);
    memcpy(running + c, bn[3]->data, (size_t)c * sizeof *running);
    sc_params_zero_grad(ps);
    sc_tensor *y = bn_apply(v, x, bn);
    cr_assert_not_null(y, "%s", sc_error_message());
    sc_tensor *r = sc_tensor_new(ctx, SC_F32, y->ndim, y->shape);
    for (int64_t i = 0; i < r->numel; i++)
        sc_tensor_f32(r)[i] = (float)(i % 11) - 5.0f;
    cr_assert_eq(sc_backward(ctx, sc_sum(ctx, sc_mul(ctx, y, r)), NULL, NULL), SC_OK, "%s",
                 sc_error_message());
    const sc_tensor *parts[] = {y, x->grad, bn[0]->grad, bn[1]->grad, bn[2], bn[3]};
    *n = y->numel + x->numel + 4 * c;
    float *out = malloc((size_t)*n * sizeof *out), *at = out;
    cr_assert_not_null(out);
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        memcpy(at, parts[i]->data, sc_tensor_nbytes(parts[i]));
        at += parts[i]->numel;
    }
    sc_ctx_reset(ctx);
    memcpy(bn[2]->data, running, (size_t)c * sizeof *running);
    memcpy(bn[3]->data, running + c, (size_t)c * sizeof *running);
    free(running);
    return out;
}

/* The fused op of v equals its separate ops bit for bit: outputs,
 * gradients and running statistics, in training and eval mode. Returns
 * how many of the outputs are 0 in training mode. */
static int64_t expect_fused_equal(bn_variant v, sc_tensor *x, sc_tensor **bn, const char *what)
{
    int64_t zeros = 0;
    for (int training = 0; training < 2; training++) {
        sc_ctx_set_training(ctx, training);
        int64_t n, n_apart;
        v.fused = true;
        float *fused = bn_step(v, x, bn, &n);
        v.fused = false;
        float *apart = bn_step(v, x, bn, &n_apart);
        cr_assert_eq(n, n_apart, "%s", what);
        for (int64_t i = 0; i < n; i++)
            cr_assert(memcmp(&fused[i], &apart[i], sizeof *fused) == 0,
                      "%s, training %d: value %lld: fused %.9g, apart %.9g", what, training,
                      (long long)i, (double)fused[i], (double)apart[i]);
        for (int64_t i = 0; training && i < n - x->numel - 4 * bn[0]->numel; i++)
            zeros += fused[i] == 0.0f;
        free(fused);
        free(apart);
    }
    return zeros;
}

/* The fused relu is relu(batch_norm(x)) exactly, over several threads. */
Test(norm, batch_norm_relu_equals_the_two_ops)
{
    enum { N = 6, C = 4, S = 9 * 9 };
    sc_tensor *bn[4], *x = test_param(4, (int64_t[]){N, C, 9, 9});
    bn_params(C, bn);
    int64_t zeros = expect_fused_equal((bn_variant){.relu = true}, x, bn, "relu");
    cr_assert(zeros > N * C * S / 4 && zeros < 3 * N * C * S / 4,
              "the relu cuts about half the outputs (%lld of %d)", (long long)zeros, N * C * S);
}

/* The fused pooling is max_pool2d of batch_norm(x), or of its relu,
 * exactly: 2x2 windows (their own loops, in blocks of 4 outputs, two
 * overlapping at side 14, and of 3 at side 6; odd planes leave a row and
 * a column out; the relu's mask kept in the windows' bytes) and
 * overlapping padded 3x3 ones at stride 2. Windows all below zero before
 * the relu tie at 0, and must send their gradient where max_pool2d
 * does: channel 0's bias of -3 makes most of its windows so. */
Test(norm, batch_norm_max_pool_equals_the_ops)
{
    enum { N = 6, C = 4 };
    static const sc_pool2d_opts pools[] = {{.kernel = {2, 2}},
                                           {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}};
    static const int64_t sides[] = {6, 8, 9, 14};
    for (size_t p = 0; p < sizeof pools / sizeof pools[0]; p++)
        for (size_t k = 0; k < sizeof sides / sizeof sides[0]; k++)
            for (int relu = 0; relu < 2; relu++) {
                sc_tensor *bn[4], *x = test_param(4, (int64_t[]){N, C, sides[k], sides[k]});
                bn_params(C, bn);
                sc_tensor_f32(bn[1])[0] = -3.0f;
                char what[64];
                snprintf(what, sizeof what, "pool %zu, side %lld, relu %d", p,
                         (long long)sides[k], relu);
                int64_t zeros = expect_fused_equal(
                    (bn_variant){.relu = relu, .pool = &pools[p]}, x, bn, what);
                cr_assert(!relu || zeros > 0, "%s: some windows are all below zero", what);
            }
}

/* The pooled op's errors name the pooling: a window larger than x, and
 * no options. */
Test(norm, batch_norm_max_pool_errors)
{
    sc_tensor *bn[4], *x = test_param(4, (int64_t[]){2, 3, 2, 2});
    bn_params(3, bn);
    sc_tensor *in[5] = {x, bn[0], bn[1], bn[2], bn[3]};
    const sc_pool2d_opts big = {.kernel = {3, 3}};
    cr_assert_null(sc_batch_norm_max_pool2d(ctx, in, momentum, eps, true, &big));
    cr_assert(strstr(sc_error_message(), "batch_norm (max_pool2d): kernel 3x3 is larger than "
                                         "input [2, 3, 2, 2]"),
              "%s", sc_error_message());
    cr_assert_null(sc_batch_norm_max_pool2d(ctx, in, momentum, eps, true, NULL));
    cr_assert(strstr(sc_error_message(), "no options"), "%s", sc_error_message());
}

/* PyTorch 1.13: BatchNorm2d(3, momentum=0.1, eps=1e-5) in training mode,
 * three steps on different inputs; the first step's output and the
 * running statistics after the third. */
Test(norm, values_batch_norm_against_torch)
{
    sc_ctx_set_training(ctx, true);
    sc_tensor *bn[4], *x = test_param(4, (int64_t[]){4, 3, 2, 2});
    bn_params(3, bn);
    fill_pattern(bn[0], 1, 5, 0.25f, 1.0f);
    fill_pattern(bn[1], 2, 5, 0.125f, 0.0f);
    static const float want_y0[] = {
        -0.8932313f, -0.2335069f, 0.4262175f, -0.6293415f, 0.0f, 1.076909f, -0.6461453f,
        0.4307635f, -1.036463f, 0.2829862f, 1.602435f, -0.5086831f, 0.1623278f, -0.8932313f,
        -0.2335069f, 0.4262175f, -1.076909f, 0.0f, 1.076909f, -0.6461453f, 1.074656f,
        -1.036463f, 0.2829862f, 1.602435f, -0.4973966f, 0.1623278f, -0.8932313f, -0.2335069f,
        0.6461453f, -1.076909f, 0.0f, 1.076909f, -0.2447933f, 1.074656f, -1.036463f,
        0.2829862f, 0.5581624f, -0.4973966f, 0.1623278f, -0.8932313f, -0.4307635f, 0.6461453f,
        -1.076909f, 0.0f, 1.866325f, -0.2447933f, 1.074656f, -1.036463f};
    for (int step = 0; step < 3; step++) {
        fill_pattern(x, 5 + 2 * step, 13, 0.125f, (float)step);
        sc_tensor *y = sc_batch_norm(ctx, x, bn[0], bn[1], bn[2], bn[3], momentum, eps);
        if (step == 0)
            expect_values(y, want_y0, 48, 2e-6);
        sc_ctx_reset(ctx);
    }
    expect_values(bn[2], (float[]){0.2518906f, 0.2909063f, 0.3152969f}, 3, 1e-6);
    expect_values(bn[3], (float[]){0.7965232f, 0.7837059f, 0.7857913f}, 3, 1e-6);
}

/* After training-mode steps have moved the running statistics, eval mode
 * computes the closed form with them, and leaves them alone. */
Test(norm, eval_uses_running_statistics)
{
    sc_tensor *bn[4], *x = test_param(4, (int64_t[]){6, 3, 4, 5});
    bn_params(3, bn);
    sc_ctx_set_training(ctx, true);
    for (int step = 0; step < 3; step++) {
        fill_pattern(x, 3 + step, 17, 0.25f, 0.5f * (float)step);
        cr_assert_not_null(sc_batch_norm(ctx, x, bn[0], bn[1], bn[2], bn[3], momentum, eps));
        sc_ctx_reset(ctx);
    }
    float rm[3], rv[3];
    memcpy(rm, bn[2]->data, sizeof rm);
    memcpy(rv, bn[3]->data, sizeof rv);
    cr_assert(rm[0] != 0.0f && rv[0] != 1.0f, "training moved the running statistics");

    sc_ctx_set_training(ctx, false);
    sc_tensor *y = sc_batch_norm(ctx, x, bn[0], bn[1], bn[2], bn[3], momentum, eps);
    cr_assert_not_null(y, "%s", sc_error_message());
    for (int64_t i = 0; i < x->numel; i++) {
        int64_t c = (i / 20) % 3;
        double want = (sc_tensor_f32(x)[i] - rm[c]) / sqrt(rv[c] + (double)eps) *
                          sc_tensor_f32(bn[0])[c] + sc_tensor_f32(bn[1])[c];
        cr_assert(fabs(sc_tensor_f32(y)[i] - want) <= 1e-5, "element %lld: %.7g, want %.7g",
                  (long long)i, (double)sc_tensor_f32(y)[i], want);
    }
    cr_assert(memcmp(rm, bn[2]->data, sizeof rm) == 0, "eval changed the running mean");
    cr_assert(memcmp(rv, bn[3]->data, sizeof rv) == 0, "eval changed the running variance");
}

/* Values far from zero with a small spread: the batch statistics must not
 * cancel away (each channel comes out with mean 0 and variance 1). */
Test(norm, batch_norm_stable_far_from_zero)
{
    sc_ctx_set_training(ctx, true);
    sc_tensor *bn[4], *x = test_param(4, (int64_t[]){8, 2, 16, 16});
    bn_params(2, bn);
    for (int c = 0; c < 2; c++) {
        sc_tensor_f32(bn[0])[c] = 1.0f;
        sc_tensor_f32(bn[1])[c] = 0.0f;
    }
    for (int64_t i = 0; i < x->numel; i++)
        sc_tensor_f32(x)[i] = 1000.0f + 0.01f * (2.0f * sc_rng_uniform(&rng) - 1.0f);
    sc_tensor *y = sc_batch_norm(ctx, x, bn[0], bn[1], bn[2], bn[3], momentum, 0.0f);
    cr_assert_not_null(y);
    for (int c = 0; c < 2; c++) {
        double s = 0, s2 = 0;
        for (int n = 0; n < 8; n++)
            for (int k = 0; k < 256; k++) {
                double v = sc_tensor_f32(y)[(n * 2 + c) * 256 + k];
                s += v;
                s2 += v * v;
            }
        cr_assert(fabs(s / 2048) < 1e-2 && fabs(s2 / 2048 - 1.0) < 2e-2,
                  "channel %d: mean %g, variance %g", c, s / 2048, s2 / 2048);
    }
}

/* ---------------------------------------------------------------------
 * Layer norm. */

typedef struct ln_case {
    bool weight, bias;
} ln_case;

static sc_tensor *apply_layer_norm(sc_ctx *c, sc_tensor *const *in, void *user)
{
    const ln_case *k = user;
    return sc_layer_norm(c, in[0], k->weight ? in[1] : NULL, k->bias ? in[2] : NULL, eps);
}

Test(norm, grad_layer_norm)
{
    static const ln_case cases[] = {{true, true}, {false, false}, {true, false}, {false, true}};
    static const int64_t shapes[][3] = {{3, 5, 7}, {4, 6, 1}};
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < 4; i++) {
            int ndim = s == 0 ? 3 : 2;
            int64_t d = shapes[s][ndim - 1];
            sc_tensor *in[] = {test_param(ndim, shapes[s]), test_param(1, &d), test_param(1, &d)};
            gradcheck_report rep;
            int n = cases[i].weight || cases[i].bias ? 3 : 1;
            cr_assert(gradcheck_run(ctx, apply_layer_norm, (void *)&cases[i], n, in, NULL, &rep),
                      "shape %d, weight %d, bias %d: %s", s, cases[i].weight, cases[i].bias,
                      rep.message);
        }
}

/* PyTorch 1.13: F.layer_norm(x, (5,), w, b, 1e-5) and without w, b. */
Test(norm, values_layer_norm_against_torch)
{
    int64_t d = 5;
    sc_tensor *x = test_param(2, (int64_t[]){2, 5}), *w = test_param(1, &d), *b = test_param(1, &d);
    fill_pattern(x, 3, 7, 0.25f, 0.0f);
    fill_pattern(w, 1, 5, 0.25f, 1.0f);
    fill_pattern(b, 2, 5, 0.125f, 0.0f);
    expect_values(sc_layer_norm(ctx, x, w, b, eps),
                  (float[]){-0.9992555f, -0.0702427f, 1.561197f, -0.827427f, 1.389369f,
                            -0.6714562f, 0.4214562f, -1.061197f, -0.007928878f, 2.372766f},
                  10, 2e-6);
    expect_values(sc_layer_norm(ctx, x, NULL, NULL, eps),
                  (float[]){-1.498511f, -0.09365693f, 1.311197f, -0.5619416f, 0.8429124f,
                            -0.8429124f, 0.5619416f, -1.311197f, 0.0936569f, 1.498511f},
                  10, 2e-6);
}

/* ---------------------------------------------------------------------
 * Thread-count independence: channels (batch norm) and rows (layer norm)
 * each have one owner and sum in a fixed order. */

static int64_t norm_step(sc_tensor *const *p, float *out)
{
    sc_params_zero_grad(ps);
    sc_tensor *h = sc_batch_norm(ctx, p[0], p[1], p[2], p[3], p[4], momentum, eps);
    h = sc_layer_norm(ctx, h, p[5], p[6], eps);
    cr_assert_eq(sc_backward(ctx, sc_sum(ctx, sc_mul(ctx, h, h)), NULL, NULL), SC_OK, "%s",
                 sc_error_message());
    int64_t k = 0;
    memcpy(out, h->data, sc_tensor_nbytes(h));
    k += h->numel;
    for (int i = 0; i < 7; i++) {
        sc_tensor *t = i == 3 || i == 4 ? p[i] : p[i]->grad; /* running stats: values */
        memcpy(out + k, t->data, sc_tensor_nbytes(t));
        k += t->numel;
    }
    sc_ctx_reset(ctx);
    return k;
}

Test(norm, same_bits_on_one_and_two_threads)
{
    sc_ctx_set_training(ctx, true);
    int64_t shape[] = {16, 8, 20, 20}, d = 20;
    sc_tensor *p[7] = {test_param(4, shape)};
    bn_params(8, p + 1);
    p[5] = test_param(1, &d);
    p[6] = test_param(1, &d);
    int64_t n = 2 * p[0]->numel + 4 * 8 + 2 * d;
    float *one = malloc((size_t)n * sizeof *one), *two = malloc((size_t)n * sizeof *two);
    cr_assert(one && two);
    float rm[8], rv[8];
    memcpy(rm, p[3]->data, sizeof rm);
    memcpy(rv, p[4]->data, sizeof rv);
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    int64_t n1 = norm_step(p, one);
    memcpy(p[3]->data, rm, sizeof rm); /* the same running statistics again */
    memcpy(p[4]->data, rv, sizeof rv);
    omp_set_num_threads(2);
    int64_t n2 = norm_step(p, two);
    omp_set_num_threads(threads);
    cr_assert(n1 == n && n2 == n);
    for (int64_t i = 0; i < n; i++)
        cr_assert(memcmp(&one[i], &two[i], sizeof one[i]) == 0,
                  "float %lld: %.9g on one thread, %.9g on two", (long long)i,
                  (double)one[i], (double)two[i]);
    free(one);
    free(two);
}

/* ---------------------------------------------------------------------
 * Errors. */

static void expect_error(const sc_tensor *result, const char *const *parts)
{
    cr_assert_null(result);
    for (int i = 0; parts[i]; i++)
        cr_assert(strstr(sc_error_message(), parts[i]), "message \"%s\" lacks \"%s\"",
                  sc_error_message(), parts[i]);
}

Test(norm, errors_name_op_and_shapes)
{
    sc_tensor *bn[4], *x = test_param(4, (int64_t[]){2, 3, 4, 4});
    bn_params(4, bn);
    sc_ctx_set_training(ctx, true);
    expect_error(sc_batch_norm(ctx, x, bn[0], bn[1], bn[2], bn[3], momentum, eps),
                 (const char *[]){"batch_norm", "weight", "[4]", "[2, 3, 4, 4]", NULL});
    sc_tensor *bn3[4], *one = test_param(2, (int64_t[]){1, 3});
    bn_params(3, bn3);
    expect_error(sc_batch_norm(ctx, one, bn3[0], bn3[1], bn3[2], bn3[3], momentum, eps),
                 (const char *[]){"batch_norm", "more than one value", "[1, 3]", NULL});
    sc_ctx_set_training(ctx, false);
    cr_assert_not_null(sc_batch_norm(ctx, one, bn3[0], bn3[1], bn3[2], bn3[3], momentum, eps),
                       "eval mode takes a single sample: %s", sc_error_message());
    int64_t five = 5;
    expect_error(sc_layer_norm(ctx, x, test_param(1, &five), NULL, eps),
                 (const char *[]){"layer_norm", "weight", "[5]", "[2, 3, 4, 4]", NULL});
    expect_error(sc_layer_norm(ctx, x, NULL, test_param(1, &five), eps),
                 (const char *[]){"layer_norm", "bias", "[5]", NULL});
}
