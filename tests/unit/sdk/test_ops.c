/* Every op: a finite-difference gradient check (odd shapes, broadcasting),
 * forward values against closed forms, results at sizes that take the
 * parallel paths (against a reference, and bit-identical for 1 and 2
 * threads), dropout's mask, and error reporting. */
#include <criterion/criterion.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "gradcheck.h"
#include "op_fixture.h"
#include "scorch/scorch.h"
#include "scorch_host/context.h"
#include "scorch_host/params.h"


static void setup(void)
{
    op_fixture_setup(42);
}

TestSuite(ops, .init = setup, .fini = op_fixture_teardown);


/* Moves every value at least 0.1 away from 0 (the kink of relu). */
static void away_from_zero(sc_tensor *t)
{
    float *x = sc_tensor_f32(t);
    for (int64_t i = 0; i < t->numel; i++)
        x[i] = x[i] < 0.0f ? x[i] - 0.1f : x[i] + 0.1f;
}

static void set_values(sc_tensor *t, const float *v)
{
    memcpy(t->data, v, sc_tensor_nbytes(t));
}

/* A host tensor of class indices (the caller frees it). */
static sc_tensor *targets(sc_dtype dtype, int64_t n, const int64_t *v)
{
    sc_tensor *t = sc_tensor_alloc(dtype, 1, &n);
    cr_assert_not_null(t);
    for (int64_t i = 0; i < n; i++) {
        if (dtype == SC_I32)
            ((int32_t *)t->data)[i] = (int32_t)v[i];
        else if (dtype == SC_I64)
            ((int64_t *)t->data)[i] = v[i];
        else
            ((uint8_t *)t->data)[i] = (uint8_t)v[i];
    }
    return t;
}

static void expect_grads(const char *what, gradcheck_fn fn, void *user, int n,
                         sc_tensor *const *in)
{
    gradcheck_report rep;
    bool ok = gradcheck_run(ctx, fn, user, n, in, NULL, &rep);
    cr_assert(ok, "%s: %s", what, rep.message);
    cr_assert_gt(rep.checked, 0, "%s: nothing checked", what);
}

/* ---------------------------------------------------------------------
 * Functions under gradient check. */

typedef struct unary_box { sc_tensor *(*fn)(sc_ctx *, sc_tensor *); } unary_box;
typedef struct binary_box { sc_tensor *(*fn)(sc_ctx *, sc_tensor *, sc_tensor *); } binary_box;

static sc_tensor *apply_unary(sc_ctx *c, sc_tensor *const *in, void *user)
{
    return ((const unary_box *)user)->fn(c, in[0]);
}

static sc_tensor *apply_binary(sc_ctx *c, sc_tensor *const *in, void *user)
{
    return ((const binary_box *)user)->fn(c, in[0], in[1]);
}

static sc_tensor *apply_linear(sc_ctx *c, sc_tensor *const *in, void *user)
{
    return sc_linear(c, in[0], in[1], user ? in[2] : NULL);
}

static sc_tensor *apply_scale(sc_ctx *c, sc_tensor *const *in, void *user)
{
    return sc_scale(c, in[0], *(const float *)user);
}

static sc_tensor *apply_cross_entropy(sc_ctx *c, sc_tensor *const *in, void *user)
{
    return sc_cross_entropy(c, in[0], in[1], *(const float *)user);
}

static sc_tensor *apply_dropout(sc_ctx *c, sc_tensor *const *in, void *user)
{
    return sc_dropout(c, in[0], *(const float *)user);
}

static sc_tensor *apply_reshape(sc_ctx *c, sc_tensor *const *in, void *user)
{
    return sc_reshape(c, in[0], 3, (const int64_t[]){2, -1, 3});
}

/* Checks the unary op on each shape of a short list. */
static void expect_unary_grads(const char *what, sc_tensor *(*fn)(sc_ctx *, sc_tensor *),
                               bool avoid_zero)
{
    static const struct { int ndim; int64_t shape[3]; } shapes[] = {
        {2, {3, 5}}, {2, {7, 1}}, {3, {2, 3, 4}}, {1, {1}},
    };
    unary_box box = {fn};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        sc_tensor *x = test_param(shapes[i].ndim, shapes[i].shape);
        if (avoid_zero)
            away_from_zero(x);
        char label[64];
        snprintf(label, sizeof label, "%s on shape #%zu", what, i);
        expect_grads(label, apply_unary, &box, 1, (sc_tensor *[]){x});
    }
}

/* Checks a broadcasting binary op on pairs of shapes covering every
 * broadcast pattern: same shape, trailing operand, column, row against
 * column, scalars, and 3-D mixtures. */
static void expect_binary_grads(const char *what,
                                sc_tensor *(*fn)(sc_ctx *, sc_tensor *, sc_tensor *))
{
    static const struct {
        int na; int64_t a[3]; int nb; int64_t b[3];
    } pairs[] = {
        {2, {3, 5}, 2, {3, 5}},    {2, {4, 3}, 1, {3}},       {2, {7, 1}, 2, {7, 3}},
        {2, {1, 5}, 2, {3, 1}},    {0, {0}, 2, {3, 5}},       {2, {3, 5}, 0, {0}},
        {3, {2, 1, 4}, 2, {3, 1}}, {3, {2, 3, 4}, 3, {2, 1, 4}}, {1, {1}, 2, {7, 1}},
        {3, {2, 3, 4}, 2, {3, 1}},
    };
    binary_box box = {fn};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        sc_tensor *a = test_param(pairs[i].na, pairs[i].a), *b = test_param(pairs[i].nb, pairs[i].b);
        char sa[64], sb[64], label[160];
        snprintf(label, sizeof label, "%s %s, %s", what,
                 sc_shape_str(a->ndim, a->shape, sa, sizeof sa),
                 sc_shape_str(b->ndim, b->shape, sb, sizeof sb));
        expect_grads(label, apply_binary, &box, 2, (sc_tensor *[]){a, b});
    }
    sc_tensor *x = test_param(2, (int64_t[]){3, 5}); /* one tensor as both operands */
    expect_grads(what, apply_binary, &box, 2, (sc_tensor *[]){x, x});
}

/* ---------------------------------------------------------------------
 * Gradient tests. */

Test(ops, grad_matmul)
{
    binary_box box = {sc_matmul};
    sc_tensor *a = test_param(2, (int64_t[]){3, 5}), *b = test_param(2, (int64_t[]){5, 4});
    expect_grads("matmul", apply_binary, &box, 2, (sc_tensor *[]){a, b});
    sc_tensor *c = test_param(2, (int64_t[]){7, 1}), *d = test_param(2, (int64_t[]){1, 3});
    expect_grads("matmul 7x1", apply_binary, &box, 2, (sc_tensor *[]){c, d});
}

Test(ops, grad_linear)
{
    sc_tensor *x = test_param(2, (int64_t[]){3, 5}), *w = test_param(2, (int64_t[]){4, 5});
    sc_tensor *b = test_param(1, (int64_t[]){4});
    expect_grads("linear with bias", apply_linear, (void *)1, 3, (sc_tensor *[]){x, w, b});
    expect_grads("linear without bias", apply_linear, NULL, 2, (sc_tensor *[]){x, w});
    sc_tensor *one = test_param(2, (int64_t[]){1, 5}); /* a batch of one: sgemv */
    expect_grads("linear of one sample", apply_linear, (void *)1, 3, (sc_tensor *[]){one, w, b});
}

Test(ops, grad_add) { expect_binary_grads("add", sc_add); }
Test(ops, grad_sub) { expect_binary_grads("sub", sc_sub); }
Test(ops, grad_mul) { expect_binary_grads("mul", sc_mul); }

Test(ops, grad_scale)
{
    float factor = -2.5f;
    sc_tensor *x = test_param(2, (int64_t[]){3, 5});
    expect_grads("scale", apply_scale, &factor, 1, (sc_tensor *[]){x});
}

Test(ops, grad_relu) { expect_unary_grads("relu", sc_relu, true); }
Test(ops, grad_tanh) { expect_unary_grads("tanh", sc_tanh, false); }
Test(ops, grad_sigmoid) { expect_unary_grads("sigmoid", sc_sigmoid, false); }
Test(ops, grad_gelu) { expect_unary_grads("gelu", sc_gelu, false); }
Test(ops, grad_softmax) { expect_unary_grads("softmax", sc_softmax, false); }
Test(ops, grad_log_softmax) { expect_unary_grads("log_softmax", sc_log_softmax, false); }
Test(ops, grad_sum) { expect_unary_grads("sum", sc_sum, false); }
Test(ops, grad_mean) { expect_unary_grads("mean", sc_mean, false); }
Test(ops, grad_flatten) { expect_unary_grads("flatten", sc_flatten, false); }

Test(ops, grad_mse)
{
    binary_box box = {sc_mse};
    sc_tensor *p = test_param(2, (int64_t[]){3, 5}), *t = test_param(2, (int64_t[]){3, 5});
    expect_grads("mse (pred and target)", apply_binary, &box, 2, (sc_tensor *[]){p, t});
    sc_tensor *q = test_param(2, (int64_t[]){7, 1}), *u = test_param(2, (int64_t[]){7, 1});
    sc_params_set_trainable(u, false);
    expect_grads("mse (pred only)", apply_binary, &box, 2, (sc_tensor *[]){q, u});
}

Test(ops, grad_cross_entropy)
{
    static const sc_dtype dtypes[] = {SC_I32, SC_I64, SC_U8};
    static const float smoothing[] = {0.0f, 0.1f};
    sc_tensor *z = test_param(2, (int64_t[]){4, 5});
    sc_tensor *z1 = test_param(2, (int64_t[]){3, 1}); /* one class: the loss is 0 */
    for (int d = 0; d < 3; d++) {
        sc_tensor *t = targets(dtypes[d], 4, (int64_t[]){2, 0, 4, 2});
        sc_tensor *t1 = targets(dtypes[d], 3, (int64_t[]){0, 0, 0});
        for (int s = 0; s < 2; s++) {
            float ls = smoothing[s];
            char label[64];
            snprintf(label, sizeof label, "cross_entropy %s s=%g", sc_dtype_name(dtypes[d]),
                     (double)ls);
            expect_grads(label, apply_cross_entropy, &ls, 2, (sc_tensor *[]){z, t});
            expect_grads(label, apply_cross_entropy, &ls, 2, (sc_tensor *[]){z1, t1});
        }
        sc_tensor_free(t);
        sc_tensor_free(t1);
    }
}

Test(ops, grad_dropout)
{
    float p = 0.3f;
    sc_tensor *x = test_param(2, (int64_t[]){6, 7});
    expect_grads("dropout", apply_dropout, &p, 1, (sc_tensor *[]){x});
}

Test(ops, grad_reshape)
{
    sc_tensor *x = test_param(2, (int64_t[]){3, 4});
    expect_grads("reshape", apply_reshape, NULL, 1, (sc_tensor *[]){x});
}

/* A small classifier end to end: linear, gelu, dropout, linear, CE. */
static sc_tensor *apply_mlp(sc_ctx *c, sc_tensor *const *in, void *user)
{
    sc_tensor *h = sc_gelu(c, sc_linear(c, in[0], in[1], in[2]));
    h = sc_dropout(c, h, 0.2f);
    return sc_cross_entropy(c, sc_linear(c, h, in[3], in[4]), user, 0.1f);
}

Test(ops, grad_composition)
{
    sc_tensor *x = test_param(2, (int64_t[]){5, 6});
    sc_params_set_trainable(x, false);
    sc_tensor *in[] = {x, test_param(2, (int64_t[]){8, 6}), test_param(1, (int64_t[]){8}),
                       test_param(2, (int64_t[]){3, 8}), test_param(1, (int64_t[]){3})};
    sc_tensor *t = targets(SC_I64, 5, (int64_t[]){0, 2, 1, 1, 2});
    expect_grads("mlp", apply_mlp, t, 5, in);
    sc_tensor_free(t);
}

/* ---------------------------------------------------------------------
 * Forward values. */

static sc_tensor *step_tensor(int ndim, const int64_t *shape, const float *v)
{
    sc_tensor *t = sc_tensor_new(ctx, SC_F32, ndim, shape);
    cr_assert_not_null(t);
    set_values(t, v);
    return t;
}

Test(ops, values_broadcast)
{
    sc_tensor *a = step_tensor(2, (int64_t[]){2, 3}, (float[]){1, 2, 3, 4, 5, 6});
    sc_tensor *b = step_tensor(1, (int64_t[]){3}, (float[]){10, 20, 30});
    sc_tensor *col = step_tensor(2, (int64_t[]){2, 1}, (float[]){2, -1});
    sc_tensor *row = step_tensor(2, (int64_t[]){1, 3}, (float[]){1, 2, 3});
    sc_tensor *s = step_tensor(0, NULL, (float[]){0.5f});
    expect_values(sc_add(ctx, a, b), (float[]){11, 22, 33, 14, 25, 36}, 6, 0);
    expect_values(sc_mul(ctx, col, row), (float[]){2, 4, 6, -1, -2, -3}, 6, 0);
    expect_values(sc_sub(ctx, row, col), (float[]){-1, 0, 1, 2, 3, 4}, 6, 0);
    expect_values(sc_mul(ctx, s, a), (float[]){0.5f, 1, 1.5f, 2, 2.5f, 3}, 6, 0);
    expect_values(sc_scale(ctx, a, -2), (float[]){-2, -4, -6, -8, -10, -12}, 6, 0);
    sc_tensor *out = sc_add(ctx, col, row);
    cr_assert_eq(out->ndim, 2);
    cr_assert(out->shape[0] == 2 && out->shape[1] == 3);
}

Test(ops, values_activations)
{
    sc_tensor *x = step_tensor(1, (int64_t[]){3}, (float[]){-1, 0, 1});
    expect_values(sc_gelu(ctx, x), (float[]){-0.1586553f, 0, 0.8413447f}, 3, 1e-6f);
    expect_values(sc_relu(ctx, x), (float[]){0, 0, 1}, 3, 0);
    expect_values(sc_sigmoid(ctx, x), (float[]){0.26894142f, 0.5f, 0.73105858f}, 3, 1e-6f);
    expect_values(sc_tanh(ctx, x), (float[]){-0.76159416f, 0, 0.76159416f}, 3, 1e-6f);
}

Test(ops, activations_propagate_nan)
{
    sc_tensor *x = step_tensor(1, (int64_t[]){1}, (float[]){NAN});
    sc_tensor *(*const fns[])(sc_ctx *, sc_tensor *) = {sc_relu, sc_gelu, sc_sigmoid, sc_tanh};
    for (size_t i = 0; i < sizeof fns / sizeof *fns; i++)
        cr_expect(isnan(sc_tensor_f32(fns[i](ctx, x))[0]), "activation %zu hid a NaN", i);
}

Test(ops, values_softmax)
{
    /* a large row checks the max subtraction: exp(1000) overflows */
    float v[] = {1, 2, 3, 1000, 1001, 1002, -5, -5, -5};
    sc_tensor *x = step_tensor(2, (int64_t[]){3, 3}, v);
    sc_tensor *y = sc_softmax(ctx, x), *ly = sc_log_softmax(ctx, x);
    cr_assert(y && ly);
    double e1 = exp(-2.0), e2 = exp(-1.0), z = e1 + e2 + 1.0;
    float row[] = {(float)(e1 / z), (float)(e2 / z), (float)(1 / z)};
    for (int r = 0; r < 2; r++) {
        for (int j = 0; j < 3; j++) {
            cr_assert_float_eq(sc_tensor_f32(y)[r * 3 + j], row[j], 1e-6f);
            cr_assert_float_eq(sc_tensor_f32(ly)[r * 3 + j], logf(row[j]), 1e-5f);
        }
    }
    for (int r = 0; r < 3; r++) {
        float sum = 0;
        for (int j = 0; j < 3; j++) {
            cr_assert(isfinite(sc_tensor_f32(ly)[r * 3 + j]));
            sum += sc_tensor_f32(y)[r * 3 + j];
        }
        cr_assert_float_eq(sum, 1.0f, 1e-6f, "row %d sums to %.9g", r, (double)sum);
    }
    cr_assert_float_eq(sc_tensor_f32(y)[6], 1.0f / 3.0f, 1e-7f);
}

/* The loss from its definition: mean_n sum_c q_c (-log p_nc). */
static double reference_cross_entropy(const float *z, const int64_t *t, int64_t n, int64_t c,
                                      double s)
{
    double total = 0;
    for (int64_t i = 0; i < n; i++) {
        double m = z[i * c], sum = 0;
        for (int64_t j = 0; j < c; j++)
            m = fmax(m, z[i * c + j]);
        for (int64_t j = 0; j < c; j++)
            sum += exp(z[i * c + j] - m);
        for (int64_t j = 0; j < c; j++) {
            double q = (j == t[i] ? 1.0 - s : 0.0) + s / (double)c;
            total += q * -(z[i * c + j] - m - log(sum));
        }
    }
    return total / (double)n;
}

Test(ops, values_cross_entropy)
{
    float z[] = {2.0f, -1.0f, 0.5f, 0.0f, 3.0f, 1.0f, -2.0f, 0.0f};
    int64_t t[] = {0, 3};
    sc_tensor *logits = step_tensor(2, (int64_t[]){2, 4}, z);
    sc_tensor *target = targets(SC_U8, 2, t);
    /* s = 0: -log softmax(z)[t], by hand for sample 0 */
    double lse0 = log(exp(2.0) + exp(-1.0) + exp(0.5) + exp(0.0));
    double lse1 = log(exp(3.0) + exp(1.0) + exp(-2.0) + exp(0.0));
    float want = (float)(((lse0 - 2.0) + (lse1 - 0.0)) / 2.0);
    sc_tensor *l0 = sc_cross_entropy(ctx, logits, target, 0.0f);
    cr_assert_not_null(l0, "%s", sc_error_message());
    cr_assert_eq(l0->ndim, 0);
    cr_assert_float_eq(sc_tensor_f32(l0)[0], want, 1e-6f);
    sc_tensor *l1 = sc_cross_entropy(ctx, logits, target, 0.1f);
    cr_assert_not_null(l1);
    cr_assert_float_eq(sc_tensor_f32(l1)[0], (float)reference_cross_entropy(z, t, 2, 4, 0.1),
                       1e-6f);
    sc_tensor_free(target);
}

Test(ops, values_reductions)
{
    sc_tensor *p = step_tensor(1, (int64_t[]){3}, (float[]){1, 2, 3});
    sc_tensor *t = step_tensor(1, (int64_t[]){3}, (float[]){1, 0, 0});
    expect_values(sc_mse(ctx, p, t), (float[]){13.0f / 3.0f}, 1, 1e-6f);
    expect_values(sc_sum(ctx, p), (float[]){6}, 1, 0);
    expect_values(sc_mean(ctx, p), (float[]){2}, 1, 0);
    cr_assert_eq(sc_sum(ctx, p)->ndim, 0);
}

Test(ops, values_reshape_is_a_view)
{
    sc_tensor *x = test_param(3, (int64_t[]){2, 3, 4});
    sc_tensor *r = sc_reshape(ctx, x, 2, (int64_t[]){-1, 6});
    cr_assert_not_null(r, "%s", sc_error_message());
    cr_assert_eq(r->data, x->data);
    cr_assert(r->ndim == 2 && r->shape[0] == 4 && r->shape[1] == 6);
    sc_tensor *f = sc_flatten(ctx, x);
    cr_assert_not_null(f);
    cr_assert_eq(f->data, x->data);
    cr_assert(f->ndim == 2 && f->shape[0] == 2 && f->shape[1] == 12);
    sc_tensor *s = sc_reshape(ctx, sc_sum(ctx, x), 1, (int64_t[]){-1});
    cr_assert(s && s->ndim == 1 && s->shape[0] == 1);
}

/* ---------------------------------------------------------------------
 * Large shapes: the parallel paths against plain double loops. */

enum { BIG_N = 600, BIG_C = 160 }; /* 96000 elements: above SC_CPU_PAR_MIN */

/* loss = sum(out * w); returns w (in the arena) for the reference. */
static const float *backward_weighted(sc_tensor *out)
{
    cr_assert_not_null(out, "%s", sc_error_message());
    sc_tensor *w = sc_tensor_new(ctx, SC_F32, out->ndim, out->shape);
    for (int64_t i = 0; i < w->numel; i++)
        sc_tensor_f32(w)[i] = sc_rng_uniform(&rng) - 0.5f;
    sc_params_zero_grad(ps);
    cr_assert_eq(sc_backward(ctx, sc_sum(ctx, sc_mul(ctx, out, w)), NULL, NULL), SC_OK,
                 "%s", sc_error_message());
    return sc_tensor_f32(w);
}

static void expect_close(const float *got, const double *want, int64_t n, const char *what)
{
    for (int64_t i = 0; i < n; i++)
        cr_assert(fabs(got[i] - want[i]) <= 1e-4 + 1e-4 * fabs(want[i]),
                  "%s[%lld]: got %.8g, want %.8g", what, (long long)i, (double)got[i],
                  want[i]);
}

Test(ops, big_bias_add)
{
    sc_tensor *x = test_param(2, (int64_t[]){BIG_N, BIG_C}), *b = test_param(1, (int64_t[]){BIG_C});
    sc_tensor *y = sc_add(ctx, x, b);
    const float *w = backward_weighted(y);
    static double want_y[BIG_N * BIG_C], want_gb[BIG_C];
    memset(want_gb, 0, sizeof want_gb);
    for (int64_t i = 0; i < BIG_N * BIG_C; i++) {
        want_y[i] = (double)sc_tensor_f32(x)[i] + sc_tensor_f32(b)[i % BIG_C];
        want_gb[i % BIG_C] += w[i];
    }
    expect_close(sc_tensor_f32(y), want_y, BIG_N * BIG_C, "y");
    expect_close(sc_tensor_f32(b->grad), want_gb, BIG_C, "gb");
    for (int64_t i = 0; i < BIG_N * BIG_C; i++)
        cr_assert_eq(sc_tensor_f32(x->grad)[i], w[i]);
}

Test(ops, big_column_mul)
{
    sc_tensor *a = test_param(2, (int64_t[]){BIG_N, 1}), *b = test_param(2, (int64_t[]){BIG_N, BIG_C});
    sc_tensor *y = sc_mul(ctx, a, b);
    const float *w = backward_weighted(y);
    const float *av = sc_tensor_f32(a), *bv = sc_tensor_f32(b);
    static double want_y[BIG_N * BIG_C], want_ga[BIG_N], want_gb[BIG_N * BIG_C];
    memset(want_ga, 0, sizeof want_ga);
    for (int64_t i = 0; i < BIG_N * BIG_C; i++) {
        want_y[i] = (double)av[i / BIG_C] * bv[i];
        want_ga[i / BIG_C] += (double)w[i] * bv[i];
        want_gb[i] = (double)w[i] * av[i / BIG_C];
    }
    expect_close(sc_tensor_f32(y), want_y, BIG_N * BIG_C, "y");
    expect_close(sc_tensor_f32(a->grad), want_ga, BIG_N, "ga");
    expect_close(sc_tensor_f32(b->grad), want_gb, BIG_N * BIG_C, "gb");
}

Test(ops, big_row_minus_column)
{
    sc_tensor *a = test_param(2, (int64_t[]){1, BIG_C}), *b = test_param(2, (int64_t[]){BIG_N, 1});
    sc_tensor *y = sc_sub(ctx, a, b);
    const float *w = backward_weighted(y);
    static double want_y[BIG_N * BIG_C], want_ga[BIG_C], want_gb[BIG_N];
    memset(want_ga, 0, sizeof want_ga);
    memset(want_gb, 0, sizeof want_gb);
    for (int64_t i = 0; i < BIG_N * BIG_C; i++) {
        want_y[i] = (double)sc_tensor_f32(a)[i % BIG_C] - sc_tensor_f32(b)[i / BIG_C];
        want_ga[i % BIG_C] += w[i];
        want_gb[i / BIG_C] -= w[i];
    }
    expect_close(sc_tensor_f32(y), want_y, BIG_N * BIG_C, "y");
    expect_close(sc_tensor_f32(a->grad), want_ga, BIG_C, "ga");
    expect_close(sc_tensor_f32(b->grad), want_gb, BIG_N, "gb");
}

Test(ops, big_sum_and_mean)
{
    sc_tensor *x = test_param(2, (int64_t[]){BIG_N, BIG_C});
    double want = 0;
    for (int64_t i = 0; i < x->numel; i++)
        want += sc_tensor_f32(x)[i];
    cr_assert_float_eq(sc_tensor_f32(sc_sum(ctx, x))[0], want, 1e-3);
    cr_assert_float_eq(sc_tensor_f32(sc_mean(ctx, x))[0], want / (double)x->numel, 1e-7);
}

/* Every op at a parallel size, run forward and backward; copies outputs
 * and gradients into buf and returns how many floats it wrote. */
static int64_t record(sc_tensor *const *t, int n, float *buf)
{
    int64_t k = 0;
    for (int i = 0; i < n; i++) {
        memcpy(buf + k, t[i]->data, sc_tensor_nbytes(t[i]));
        k += t[i]->numel;
    }
    return k;
}

static int64_t run_everything(sc_tensor *const *p, const sc_tensor *target, float *buf)
{
    sc_rng_init(sc_ctx_rng(ctx), 7, 7);
    sc_params_zero_grad(ps);
    sc_tensor *h = sc_add(ctx, sc_mul(ctx, p[0], p[1]), p[2]); /* [N,C]*[N,1] + [C] */
    h = sc_sub(ctx, sc_dropout(ctx, sc_gelu(ctx, h), 0.5f), p[3]);
    sc_tensor *sm = sc_softmax(ctx, h), *lsm = sc_log_softmax(ctx, h);
    sc_tensor *loss = sc_add(ctx, sc_cross_entropy(ctx, h, (sc_tensor *)target, 0.1f),
                             sc_mse(ctx, sm, lsm));
    loss = sc_add(ctx, loss, sc_scale(ctx, sc_mean(ctx, sc_tanh(ctx, sm)), 3.0f));
    loss = sc_add(ctx, loss, sc_sum(ctx, sc_sigmoid(ctx, sc_relu(ctx, lsm))));
    cr_assert_not_null(loss, "%s", sc_error_message());
    cr_assert_eq(sc_backward(ctx, loss, NULL, NULL), SC_OK, "%s", sc_error_message());
    sc_tensor *all[] = {h, sm, lsm, loss, p[0]->grad, p[1]->grad, p[2]->grad, p[3]->grad};
    int64_t k = record(all, 8, buf);
    sc_ctx_reset(ctx);
    return k;
}

Test(ops, same_bits_on_one_and_two_threads)
{
    sc_tensor *p[] = {test_param(2, (int64_t[]){BIG_N, BIG_C}), test_param(2, (int64_t[]){BIG_N, 1}),
                      test_param(1, (int64_t[]){BIG_C}), test_param(2, (int64_t[]){1, BIG_C})};
    int64_t t[BIG_N];
    for (int i = 0; i < BIG_N; i++)
        t[i] = (i * 7) % BIG_C;
    sc_tensor *target = targets(SC_I32, BIG_N, t);
    static float one[8 * BIG_N * BIG_C], two[8 * BIG_N * BIG_C];
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    int64_t n1 = run_everything(p, target, one);
    omp_set_num_threads(2);
    int64_t n2 = run_everything(p, target, two);
    omp_set_num_threads(threads);
    cr_assert_eq(n1, n2);
    for (int64_t i = 0; i < n1; i++)
        cr_assert(memcmp(&one[i], &two[i], sizeof one[i]) == 0,
                  "float %lld: %.9g on one thread, %.9g on two", (long long)i,
                  (double)one[i], (double)two[i]);
    sc_tensor_free(target);
}

/* ---------------------------------------------------------------------
 * Dropout. */

Test(ops, dropout_mask_statistics)
{
    const float p = 0.25f, scale = 1.0f / (1.0f - p);
    int64_t sizes[] = {30000, 90001}; /* one thread; parallel and odd */
    for (int k = 0; k < 2; k++) {
        sc_tensor *x = sc_tensor_new(ctx, SC_F32, 1, &sizes[k]);
        for (int64_t i = 0; i < x->numel; i++)
            sc_tensor_f32(x)[i] = 1.0f;
        sc_tensor *y = sc_dropout(ctx, x, p);
        cr_assert_not_null(y, "%s", sc_error_message());
        int64_t zeros = 0;
        for (int64_t i = 0; i < y->numel; i++) {
            float v = sc_tensor_f32(y)[i];
            cr_assert(v == 0.0f || v == scale, "y[%lld] = %.9g", (long long)i, (double)v);
            zeros += v == 0.0f;
        }
        double frac = (double)zeros / (double)y->numel;
        cr_assert(fabs(frac - p) < 0.01, "dropped %.4f, want %.2f", frac, (double)p);
    }
}

Test(ops, dropout_identity_in_eval_and_at_zero)
{
    sc_tensor *x = test_param(2, (int64_t[]){3, 5});
    cr_assert_eq(sc_dropout(ctx, x, 0.0f), x);
    sc_ctx_set_training(ctx, false);
    cr_assert_eq(sc_dropout(ctx, x, 0.5f), x);
    cr_assert_null(sc_dropout(ctx, x, 1.0f), "a bad p is an error in eval mode too");
}

Test(ops, dropout_gradient_is_mask_times_scale)
{
    const float p = 0.4f, scale = 1.0f / (1.0f - p);
    sc_tensor *x = gradcheck_param(ps, "x", 2, (int64_t[]){40, 50}, 0.5f, 1.5f, &rng);
    sc_tensor *y = sc_dropout(ctx, x, p);
    cr_assert_eq(sc_backward(ctx, sc_sum(ctx, y), NULL, NULL), SC_OK, "%s",
                 sc_error_message());
    int64_t kept = 0;
    for (int64_t i = 0; i < x->numel; i++) {
        bool keep = sc_tensor_f32(y)[i] != 0.0f;
        float want = keep ? scale : 0.0f;
        kept += keep;
        cr_assert_float_eq(sc_tensor_f32(x->grad)[i], want, 1e-6f);
        if (keep)
            cr_assert_float_eq(sc_tensor_f32(y)[i], sc_tensor_f32(x)[i] * scale, 1e-6f);
    }
    cr_assert(kept > 0 && kept < x->numel);
}

Test(ops, dropout_masks_follow_the_stream)
{
    sc_tensor *x = test_param(1, (int64_t[]){4000});
    away_from_zero(x);
    sc_rng start = *sc_ctx_rng(ctx);
    sc_tensor *a = sc_dropout(ctx, x, 0.5f), *b = sc_dropout(ctx, x, 0.5f);
    *sc_ctx_rng(ctx) = start;
    sc_tensor *c = sc_dropout(ctx, x, 0.5f);
    cr_assert(a && b && c);
    cr_assert(memcmp(a->data, b->data, sc_tensor_nbytes(a)) != 0, "two calls, one mask");
    cr_assert(memcmp(a->data, c->data, sc_tensor_nbytes(a)) == 0, "same stream, new mask");
}

/* ---------------------------------------------------------------------
 * Errors. */

static void expect_error(sc_tensor *result, const char *const *parts)
{
    cr_assert_null(result);
    for (int i = 0; parts[i]; i++)
        cr_assert(strstr(sc_error_message(), parts[i]), "message \"%s\" lacks \"%s\"",
                  sc_error_message(), parts[i]);
}

Test(ops, errors_name_op_and_shapes)
{
    sc_tensor *a = test_param(2, (int64_t[]){3, 5}), *b = test_param(1, (int64_t[]){4});
    expect_error(sc_add(ctx, a, b), (const char *[]){"add", "[3, 5]", "[4]", NULL});
    expect_error(sc_mul(ctx, a, b), (const char *[]){"mul", NULL});
    expect_error(sc_matmul(ctx, a, a), (const char *[]){"matmul", "[3, 5]", NULL});
    expect_error(sc_linear(ctx, a, b, NULL), (const char *[]){"linear", "[4]", NULL});
    expect_error(sc_mse(ctx, a, b), (const char *[]){"mse", "[3, 5]", "[4]", NULL});
    expect_error(sc_reshape(ctx, a, 2, (int64_t[]){4, -1}),
                 (const char *[]){"reshape", "[3, 5]", "[4, -1]", NULL});
    expect_error(sc_reshape(ctx, a, 2, (int64_t[]){-1, -1}), (const char *[]){"reshape", NULL});
    expect_error(sc_softmax(ctx, sc_sum(ctx, a)), (const char *[]){"softmax", NULL});
    expect_error(sc_flatten(ctx, sc_sum(ctx, a)), (const char *[]){"flatten", NULL});
    expect_error(sc_dropout(ctx, a, 1.0f), (const char *[]){"dropout", NULL});
    expect_error(sc_dropout(ctx, a, -0.1f), (const char *[]){"dropout", NULL});
}

Test(ops, errors_cross_entropy)
{
    sc_tensor *z = test_param(2, (int64_t[]){3, 5});
    sc_tensor *bad = targets(SC_I64, 3, (int64_t[]){0, 4, 5});
    expect_error(sc_cross_entropy(ctx, z, bad, 0.0f),
                 (const char *[]){"cross_entropy", "sample 2", "5 classes", NULL});
    sc_tensor *neg = targets(SC_I32, 3, (int64_t[]){0, -1, 1});
    expect_error(sc_cross_entropy(ctx, z, neg, 0.0f), (const char *[]){"sample 1", NULL});
    sc_tensor *ok = targets(SC_U8, 3, (int64_t[]){0, 1, 2});
    expect_error(sc_cross_entropy(ctx, z, ok, 1.0f),
                 (const char *[]){"cross_entropy", "smoothing", NULL});
    sc_tensor *soft_short = test_param(2, (int64_t[]){3, 4}); /* f32: probabilities */
    expect_error(sc_cross_entropy(ctx, z, soft_short, 0.0f),
                 (const char *[]){"[3, 4]", "[3, 5]", "f32 probabilities [N, C]", NULL});
    sc_tensor *short_t = targets(SC_U8, 2, (int64_t[]){0, 1});
    expect_error(sc_cross_entropy(ctx, z, short_t, 0.0f), (const char *[]){"[2]", NULL});
    sc_tensor_free(bad);
    sc_tensor_free(neg);
    sc_tensor_free(ok);
    sc_tensor_free(short_t);
}

Test(ops, null_input_keeps_the_first_message)
{
    sc_tensor *a = test_param(2, (int64_t[]){3, 5});
    cr_assert_null(sc_matmul(ctx, a, a));
    char first[256];
    snprintf(first, sizeof first, "%s", sc_error_message());
    cr_assert(strstr(first, "matmul"));
    sc_tensor *results[] = {
        sc_add(ctx, NULL, a), sc_sub(ctx, a, NULL), sc_mul(ctx, NULL, NULL),
        sc_scale(ctx, NULL, 2), sc_relu(ctx, NULL), sc_tanh(ctx, NULL),
        sc_sigmoid(ctx, NULL), sc_gelu(ctx, NULL), sc_softmax(ctx, NULL),
        sc_log_softmax(ctx, NULL), sc_cross_entropy(ctx, NULL, NULL, 0),
        sc_mse(ctx, a, NULL), sc_dropout(ctx, NULL, 0.5f), sc_dropout(ctx, NULL, 2.0f),
        sc_reshape(ctx, NULL, 1, (int64_t[]){-1}), sc_flatten(ctx, NULL), sc_sum(ctx, NULL),
        sc_mean(ctx, NULL), sc_linear(ctx, a, NULL, NULL), sc_matmul(ctx, NULL, a),
    };
    for (size_t i = 0; i < sizeof results / sizeof results[0]; i++)
        cr_assert_null(results[i], "call %zu", i);
    cr_assert_str_eq(sc_error_message(), first);
}

/* Sizes from plugin code whose products or sums overflow int64_t are
 * refused naming the op and the shape, never wrapped around. Zero-size
 * tensors carry such sizes without memory. */
Test(ops, sizes_past_64_bits_are_refused_naming_the_op)
{
    const int64_t big = INT64_C(1) << 40, huge = INT64_C(1) << 60;
    sc_tensor *a = test_param(2, (int64_t[]){3, 5});
    expect_error(sc_reshape(ctx, a, 3, (int64_t[]){big, big, -1}),
                 (const char *[]){"reshape", "[3, 5]", "[1099511627776, 1099511627776, -1]",
                                  "overflows", NULL});
    expect_error(sc_reshape(ctx, a, 2, (int64_t[]){big, big}),
                 (const char *[]){"reshape", "overflows", NULL});
    sc_tensor *empty = test_param(2, (int64_t[]){0, 2});
    expect_error(sc_reshape(ctx, empty, 3, (int64_t[]){0, big, big}),
                 (const char *[]){"reshape", "[0, 1099511627776, 1099511627776]", NULL});
    sc_tensor *tall = test_param(2, (int64_t[]){big, 0});
    sc_tensor *wide = test_param(2, (int64_t[]){0, big});
    expect_error(sc_matmul(ctx, tall, wide),
                 (const char *[]){"matmul", "[1099511627776, 1099511627776]", NULL});
    sc_tensor *column = test_param(3, (int64_t[]){big, 1, 0});
    sc_tensor *row = test_param(3, (int64_t[]){1, big, 0});
    expect_error(sc_add(ctx, column, row), (const char *[]){"add", "overflows", NULL});
    sc_tensor *slab = test_param(2, (int64_t[]){0, huge});
    sc_tensor *slabs[] = {slab, slab, slab, slab, slab, slab, slab, slab}; /* 2^63 columns */
    expect_error(sc_concat(ctx, 8, slabs, 1),
                 (const char *[]){"concat", "input 7", "64 bits", NULL});
    sc_tensor *x = test_param(4, (int64_t[]){1, 0, 1, 1});
    sc_tensor *w = test_param(4, (int64_t[]){0, huge, 1, 1});
    expect_error(sc_conv2d(ctx, x, w, NULL, &(sc_conv2d_opts){.groups = 16}),
                 (const char *[]){"conv2d", "groups 16", "64 bits", NULL});
}
