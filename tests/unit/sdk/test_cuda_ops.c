/* test_cuda_ops.c — every op on CUDA against the CPU, outputs and
 * gradients, in the manner of ggml's test-backend-ops.
 *
 * One table (cases[] below) holds the cases: a name, the op it exercises, a
 * builder that makes the inputs and calls the public op function, and a
 * tolerance. Every op of SC_OP_LIST has several: odd sizes (7, 13, 33),
 * broadcasting against trailing shapes, columns and scalars, batch 1,
 * softmax rows of 1000, convolutions with stride, padding, dilation,
 * groups, depthwise and non-square kernels, with and without bias, padded
 * pooling, batch norm in training and eval mode on [N, C] and [N, C, H, W]
 * (alone, with its fused relu, and with fused max pooling),
 * layer norm with and without weight and bias, concatenation on several
 * axes, reshape views with an op on the view (tensors are contiguous, so a
 * view is our non-contiguous case), cross-entropy with i64, i32 and u8
 * targets and label smoothing.
 *
 * A case runs once per device, from the same seeded stream: each f32 input
 * is a parameter (or buffer) of a store of its own, filled on the host and
 * moved with sc_params_to_device; integer targets are host tensors moved
 * with sc_tensor_to_device. The output is reduced to loss = sum(out * r)
 * with a fixed random r of the output's shape, so that every output element
 * gets a gradient of its own, and sc_backward runs. The output, r, every
 * input after the step (batch norm updates its running statistics in
 * place) and every input's gradient are copied to the host, and CUDA's must
 * match the CPU's element by element:
 *     |cuda - cpu| <= atol + rtol * max(|cuda|, |cpu|).
 * A failure names the case, the array and its worst element with both
 * values. Both contexts compute in fp32 (no TF32, no bf16).
 *
 * Dropout draws different bits on each device, so its training-mode cases
 * check each device alone: the fraction zeroed is near p, kept elements are
 * x / (1 - p), and backward uses the same mask (the gradient is 0 exactly
 * where the output is 0, and r / (1 - p) elsewhere).
 *
 * training_step runs three Adam steps of linear -> relu -> linear ->
 * cross-entropy on each device (the fused CUDA optimizer on a store moved
 * to the GPU) and compares the losses and the updated parameters.
 *
 * Suite cuda_gpu (a test per op, and training_step) needs a GPU: meson
 * runs it as test cuda_gpu, reported skipped where there is none
 * (tests/gpu_main.c). Suite cuda_ops runs everywhere: coverage (every op has cases;
 * which ops have CUDA kernels) and cases_run_on_the_cpu (every case is
 * valid: it runs on the CPU and gives finite values and nonzero
 * gradients).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"
#include "scorch/scorch.h"
#include "scorch_host/context.h"
#include "scorch_host/params.h"

enum {
    MAX_INPUTS = SC_CONCAT_MAX + 2,  /* f32 inputs of one case */
    MAX_HOST = 4,                    /* host tensors one case uploads */
    MAX_ARRAYS = 2 * MAX_INPUTS + 2, /* out, r, each input and its gradient */
};

static const sc_device cpu_device = {SC_DEVICE_CPU, 0}, gpu_device = {SC_DEVICE_CUDA, 0};
static const float bn_momentum = 0.1f, norm_eps = 1e-5f;

/* ---------------------------------------------------------------------
 * Cases. */

typedef struct tolerance {
    double rtol, atol;
} tolerance;

/* Element-wise ops and data movement: a few ulp apart. */
#define TOL_ELTWISE {1e-5, 1e-6}
/* Reductions (softmax rows, norms, losses, pooling windows, the gradients
 * of broadcast operands): the order of summation differs. */
#define TOL_REDUCE {1e-4, 1e-5}
/* Matrix products and convolutions: cuBLAS and cuDNN's algorithms against
 * OpenBLAS and the CPU's Winograd. */
#define TOL_GEMM {1e-4, 1e-4}
/* The training step's parameters. */
#define TOL_TRAINING {1e-5, 1e-6}

typedef struct dims {
    int ndim;
    int64_t d[SC_MAX_DIMS];
} dims;

#define DIMS(...) {(int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), {__VA_ARGS__}}
#define SCALAR {0, {0}}

enum case_flags {
    NO_WEIGHT = 1u << 0,     /* layer_norm: weight NULL */
    NO_BIAS = 1u << 1,       /* linear, conv2d, layer_norm: bias NULL */
    EVAL = 1u << 2,          /* the contexts in eval mode */
    SAME_OPERAND = 1u << 3,  /* binary ops: one tensor as both operands */
    FROZEN_TARGET = 1u << 4, /* mse, soft cross_entropy: the target requires no grad */
    ZERO_GRAD = 1u << 5,     /* the gradient is 0 by mathematics (one class) */
    RELU = 1u << 6,          /* batch_norm: with the fused relu (sc_batch_norm_relu) */
};

typedef struct diff_case diff_case;
typedef struct case_inputs case_inputs;
typedef struct snapshot snapshot;

/* Makes the case's inputs with the input helpers below, in a fixed order,
 * and returns the op's output (NULL with a message on failure). */
typedef sc_tensor *(*build_fn)(sc_ctx *ctx, const diff_case *c, case_inputs *in);

/* Checks one device's results on their own; device names it in messages. */
typedef void (*property_fn)(const diff_case *c, const snapshot *s, const char *device);

struct diff_case {
    const char *name;
    sc_op_id op;
    build_fn build;
    tolerance tol;
    dims in[SC_CONCAT_MAX]; /* shapes, in the order the builder reads them */
    float lo, hi;           /* x uniform in [lo, hi); both 0: [-1, 1) */
    unsigned flags;         /* case_flags */
    sc_tensor *(*unary)(sc_ctx *, sc_tensor *);
    sc_tensor *(*binary)(sc_ctx *, sc_tensor *, sc_tensor *);
    sc_tensor *(*pool)(sc_ctx *, sc_tensor *, const sc_pool2d_opts *);
    float factor;          /* scale */
    float p;               /* dropout */
    float smoothing;       /* cross_entropy */
    sc_dtype target_dtype; /* cross_entropy */
    int n_in, axis;        /* concat */
    sc_conv2d_opts conv;
    sc_pool2d_opts window;
    property_fn property; /* set: each device is checked alone */
};

/* What one run of a case made on one device; released after the run. */
struct case_inputs {
    sc_ctx *ctx;
    sc_device device;
    sc_rng rng; /* input values: the same stream on every device */
    int n;
    const char *name[MAX_INPUTS];
    sc_tensor *t[MAX_INPUTS];
    sc_params *store[MAX_INPUTS]; /* one per f32 input */
    int n_host;
    sc_tensor *host[MAX_HOST]; /* uploaded host tensors: targets, r */
    char error[512];           /* the first input that failed, and why */
};

enum input_kind { TRAINABLE, FROZEN, BUFFER };

/* An f32 input on in's device: a parameter (or buffer) of a store of its
 * own, filled on the host from in's stream uniformly in [lo, hi), then
 * moved. NULL on failure, with the reason kept in in->error. */
static sc_tensor *input_in_range(case_inputs *in, const char *name, const dims *s, float lo,
                                 float hi, enum input_kind kind)
{
    cr_assert_lt(in->n, MAX_INPUTS, "a case with more than %d inputs", MAX_INPUTS);
    int k = in->n++;
    in->name[k] = name;
    in->store[k] = sc_params_new();
    sc_params *ps = in->store[k];
    sc_tensor *t = !ps             ? NULL
                   : kind == BUFFER ? sc_params_add_buffer(ps, name, s->ndim, s->d)
                                    : sc_params_add(ps, name, s->ndim, s->d);
    for (int64_t i = 0; t && i < t->numel; i++)
        sc_tensor_f32(t)[i] = lo + (hi - lo) * sc_rng_uniform(&in->rng);
    if (t && kind == FROZEN)
        sc_params_set_trainable(t, false);
    if (!t || sc_params_to_device(ps, in->device) != SC_OK) {
        if (!in->error[0])
            snprintf(in->error, sizeof in->error, "input %s: %s", name, sc_error_message());
        return NULL;
    }
    sc_params_zero_grad(ps);
    in->t[k] = t;
    return t;
}

/* A trainable input with values in [-1, 1). */
static sc_tensor *input(case_inputs *in, const char *name, const dims *s)
{
    return input_in_range(in, name, s, -1.0f, 1.0f, TRAINABLE);
}

/* The case's main input, in the case's value range. */
static sc_tensor *input_x(case_inputs *in, const diff_case *c, const dims *s)
{
    bool given = c->lo != 0.0f || c->hi != 0.0f;
    return input_in_range(in, "x", s, given ? c->lo : -1.0f, given ? c->hi : 1.0f, TRAINABLE);
}

/* A vector [n], or NULL when the case has the flag that leaves it out. */
static sc_tensor *optional_vector(case_inputs *in, const diff_case *c, unsigned absent_flag,
                                  const char *name, int64_t n)
{
    if (c->flags & absent_flag)
        return NULL;
    dims s = {1, {n}};
    return input(in, name, &s);
}

/* A host tensor moved to in's context. The host copy is kept until the run
 * ends, as sc_tensor_to_device asks. */
static sc_tensor *upload(case_inputs *in, sc_tensor *host)
{
    if (!host)
        return NULL;
    cr_assert_lt(in->n_host, MAX_HOST);
    in->host[in->n_host++] = host;
    return sc_tensor_to_device(in->ctx, host);
}

/* Class indices [n] in 0..classes-1, of dtype. */
static sc_tensor *input_classes(case_inputs *in, sc_dtype dtype, int64_t n, int64_t classes)
{
    sc_tensor *t = sc_tensor_alloc(dtype, 1, &n);
    for (int64_t i = 0; t && i < n; i++) {
        int64_t k = (int64_t)sc_rng_below(&in->rng, (uint64_t)classes);
        switch (dtype) {
        case SC_I32: ((int32_t *)t->data)[i] = (int32_t)k; break;
        case SC_I64: ((int64_t *)t->data)[i] = k; break;
        case SC_U8: ((uint8_t *)t->data)[i] = (uint8_t)k; break;
        default: break; /* the op refuses other dtypes */
        }
    }
    return upload(in, t);
}

/* r: out's shape, uniform in [-1, 1) from a stream of its own. */
static sc_tensor *weighting(case_inputs *in, const sc_tensor *out)
{
    sc_tensor *r = sc_tensor_alloc(SC_F32, out->ndim, out->shape);
    sc_rng rng;
    sc_rng_init(&rng, 0x7765696768747321ULL, 0);
    for (int64_t i = 0; r && i < r->numel; i++)
        sc_tensor_f32(r)[i] = 2.0f * sc_rng_uniform(&rng) - 1.0f;
    return upload(in, r);
}

/* ---------------------------------------------------------------------
 * Builders: inputs first, one statement each (argument order is
 * unspecified in C, and the inputs must be drawn in a fixed order). */

/* unary(x) */
static sc_tensor *build_unary(sc_ctx *ctx, const diff_case *c, case_inputs *in)
{
    return c->unary(ctx, input_x(in, c, &c->in[0]));
}

/* binary(x, b), or binary(x, x) */
static sc_tensor *build_binary(sc_ctx *ctx, const diff_case *c, case_inputs *in)
{
    sc_tensor *x = input_x(in, c, &c->in[0]);
    sc_tensor *b = c->flags & SAME_OPERAND ? x : input(in, "b", &c->in[1]);
    return c->binary(ctx, x, b);
}

/* x in[0] [N, IN], weight in[1] [OUT, IN], bias [OUT] */
static sc_tensor *build_linear(sc_ctx *ctx, const diff_case *c, case_inputs *in)
{
    sc_tensor *x = input_x(in, c, &c->in[0]);
    sc_tensor *weight = input(in, "weight", &c->in[1]);
    sc_tensor *bias = optional_vector(in, c, NO_BIAS, "bias", c->in[1].d[0]);
    return sc_linear(ctx, x, weight, bias);
}

static sc_tensor *build_scale(sc_ctx *ctx, const diff_case *c, case_inputs *in)
{
    return sc_scale(ctx, input_x(in, c, &c->in[0]), c->factor);
}

static sc_tensor *build_dropout(sc_ctx *ctx, const diff_case *c, case_inputs *in)
{
    return sc_dropout(ctx, input_x(in, c, &c->in[0]), c->p);
}

/* logits in[0] [N, C]; target [N] of the case's dtype */
static sc_tensor *build_cross_entropy(sc_ctx *ctx, const diff_case *c, case_inputs *in)
{
    const dims *s = &c->in[0];
    sc_tensor *logits = input_x(in, c, s);
    sc_tensor *target = input_classes(in, c->target_dtype, s->d[0], s->d[1]);
    return sc_cross_entropy(ctx, logits, target, c->smoothing);
}

/* logits in[0] [N, C]; soft target [N, C] in [0, 1), rows not normalised
 * (the op takes any), trainable unless FROZEN_TARGET */
static sc_tensor *build_soft_cross_entropy(sc_ctx *ctx, const diff_case *c, case_inputs *in)
{
    sc_tensor *logits = input_x(in, c, &c->in[0]);
    sc_tensor *target = input_in_range(in, "target", &c->in[0], 0.0f, 1.0f,
                                       c->flags & FROZEN_TARGET ? FROZEN : TRAINABLE);
    return sc_cross_entropy(ctx, logits, target, c->smoothing);
}

/* pred and target in[0] */
static sc_tensor *build_mse(sc_ctx *ctx, const diff_case *c, case_inputs *in)
{
    sc_tensor *pred = input_x(in, c, &c->in[0]);
    sc_tensor *target = input_in_range(in, "target", &c->in[0], -1.0f, 1.0f,
                                       c->flags & FROZEN_TARGET ? FROZEN : TRAINABLE);
    return sc_mse(ctx, pred, target);
}

/* x in[0] viewed as in[1] (one -1 allowed), then, when the case names one,
 * an op on the view: unary(view), or binary(view, y) with y in[2]. */
static sc_tensor *build_reshape(sc_ctx *ctx, const diff_case *c, case_inputs *in)
{
    sc_tensor *view = sc_reshape(ctx, input_x(in, c, &c->in[0]), c->in[1].ndim, c->in[1].d);
    if (c->unary)
        return c->unary(ctx, view);
    if (c->binary) {
        sc_tensor *y = input(in, "y", &c->in[2]);
        return c->binary(ctx, view, y);
    }
    return view;
}

/* x in[0] [N, C_in, H, W], weight in[1] [C_out, C_in / groups, KH, KW],
 * bias [C_out] */
static sc_tensor *build_conv2d(sc_ctx *ctx, const diff_case *c, case_inputs *in)
{
    sc_tensor *x = input_x(in, c, &c->in[0]);
    sc_tensor *weight = input(in, "weight", &c->in[1]);
    sc_tensor *bias = optional_vector(in, c, NO_BIAS, "bias", c->in[1].d[0]);
    return sc_conv2d(ctx, x, weight, bias, &c->conv);
}

static sc_tensor *build_pool(sc_ctx *ctx, const diff_case *c, case_inputs *in)
{
    return c->pool(ctx, input_x(in, c, &c->in[0]), &c->window);
}

/* x in[0] [N, C] or [N, C, H, W]; weight, bias and the running statistics
 * [C], the variance positive. A case with a window pools by it in the
 * same op (sc_batch_norm_max_pool2d). */
static sc_tensor *build_batch_norm(sc_ctx *ctx, const diff_case *c, case_inputs *in)
{
    const dims channels = {1, {c->in[0].d[1]}};
    sc_tensor *x = input_x(in, c, &c->in[0]);
    sc_tensor *weight = input(in, "weight", &channels);
    sc_tensor *bias = input(in, "bias", &channels);
    sc_tensor *mean = input_in_range(in, "running_mean", &channels, -0.5f, 0.5f, BUFFER);
    sc_tensor *var = input_in_range(in, "running_var", &channels, 0.5f, 1.5f, BUFFER);
    if (c->window.kernel[0])
        return sc_batch_norm_max_pool2d(ctx, (sc_tensor *[]){x, weight, bias, mean, var},
                                        bn_momentum, norm_eps, c->flags & RELU, &c->window);
    return (c->flags & RELU ? sc_batch_norm_relu : sc_batch_norm)(ctx, x, weight, bias, mean, var,
                                                                  bn_momentum, norm_eps);
}

/* x in[0] [..., D]; weight and bias [D] */
static sc_tensor *build_layer_norm(sc_ctx *ctx, const diff_case *c, case_inputs *in)
{
    const dims *s = &c->in[0];
    sc_tensor *x = input_x(in, c, s);
    sc_tensor *weight = optional_vector(in, c, NO_WEIGHT, "weight", s->d[s->ndim - 1]);
    sc_tensor *bias = optional_vector(in, c, NO_BIAS, "bias", s->d[s->ndim - 1]);
    return sc_layer_norm(ctx, x, weight, bias, norm_eps);
}

/* in[0..n_in-1] along axis */
static sc_tensor *build_concat(sc_ctx *ctx, const diff_case *c, case_inputs *in)
{
    static const char *const names[SC_CONCAT_MAX] = {"x", "x1", "x2", "x3",
                                                     "x4", "x5", "x6", "x7"};
    sc_tensor *xs[SC_CONCAT_MAX];
    for (int i = 0; i < c->n_in; i++)
        xs[i] = i == 0 ? input_x(in, c, &c->in[0]) : input(in, names[i], &c->in[i]);
    return sc_concat(ctx, c->n_in, xs, c->axis);
}

/* ---------------------------------------------------------------------
 * Results copied to the host. */

typedef struct host_array {
    char name[48]; /* "out", "r", "weight", "weight.grad", ... */
    char shape[48];
    int64_t n;
    float *v;
} host_array;

struct snapshot {
    int n;
    host_array a[MAX_ARRAYS];
};

/* Appends a host copy of t as name + suffix; false on a failed copy. */
static bool snapshot_add(snapshot *s, sc_ctx *ctx, const char *name, const char *suffix,
                         sc_tensor *t)
{
    cr_assert_lt(s->n, MAX_ARRAYS);
    sc_tensor *h = sc_tensor_to_host(ctx, t);
    if (!h)
        return false;
    host_array *a = &s->a[s->n++];
    snprintf(a->name, sizeof a->name, "%s%s", name, suffix);
    sc_shape_str(h->ndim, h->shape, a->shape, sizeof a->shape);
    a->n = h->numel;
    a->v = malloc((size_t)(h->numel + 1) * sizeof *a->v);
    cr_assert_not_null(a->v);
    memcpy(a->v, h->data, (size_t)h->numel * sizeof *a->v);
    return true;
}

/* Every f32 input after the step, and the gradient of those that require
 * grad. */
static bool snapshot_inputs(snapshot *s, const case_inputs *in)
{
    for (int i = 0; i < in->n; i++) {
        sc_tensor *t = in->t[i];
        if (!snapshot_add(s, in->ctx, in->name[i], "", t))
            return false;
        if ((t->flags & SC_TENSOR_REQUIRES_GRAD) &&
            !snapshot_add(s, in->ctx, in->name[i], ".grad", t->grad))
            return false;
    }
    return true;
}

static void snapshot_free(snapshot *s)
{
    for (int i = 0; i < s->n; i++)
        free(s->a[i].v);
    s->n = 0;
}

static const host_array *array_named(const snapshot *s, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->a[i].name, name) == 0)
            return &s->a[i];
    cr_assert_fail("the results have no array '%s'", name);
    return NULL;
}

/* ---------------------------------------------------------------------
 * Checks. */

/* The element of cuda furthest outside the tolerance around ref, as a
 * multiple of the tolerance; a NaN anywhere is infinitely far. */
typedef struct mismatch {
    int64_t index;
    double cuda, cpu, ratio;
} mismatch;

static mismatch worst_element(const host_array *cuda, const host_array *ref, tolerance tol)
{
    mismatch worst = {-1, 0.0, 0.0, -1.0};
    for (int64_t i = 0; i < ref->n; i++) {
        double g = cuda->v[i], c = ref->v[i];
        double ratio = fabs(g - c) / (tol.atol + tol.rtol * fmax(fabs(g), fabs(c)));
        if (isnan(ratio))
            ratio = INFINITY;
        if (ratio > worst.ratio)
            worst = (mismatch){i, g, c, ratio};
    }
    return worst;
}

/* CUDA's arrays against the CPU's, each element within tol; returns the
 * worst ratio to the tolerance over all arrays. */
static double expect_same_results(const char *what, tolerance tol, const snapshot *cuda,
                                  const snapshot *ref)
{
    if (cuda->n != ref->n) {
        cr_expect_fail("%s: %d arrays on cuda, %d on the cpu", what, cuda->n, ref->n);
        return INFINITY;
    }
    double worst = 0.0;
    for (int i = 0; i < ref->n; i++) {
        const host_array *g = &cuda->a[i], *r = &ref->a[i];
        if (strcmp(g->name, r->name) != 0 || g->n != r->n) {
            cr_expect_fail("%s: cuda has %s %s where the cpu has %s %s", what, g->name, g->shape,
                           r->name, r->shape);
            return INFINITY;
        }
        mismatch m = worst_element(g, r, tol);
        if (m.ratio > 1.0)
            cr_expect_fail("%s: %s %s, element %lld of %lld: cuda %.9g, cpu %.9g "
                           "(%.3g x the tolerance: rtol %g, atol %g)",
                           what, r->name, r->shape, (long long)m.index, (long long)r->n, m.cuda,
                           m.cpu, m.ratio, tol.rtol, tol.atol);
        worst = fmax(worst, m.ratio);
    }
    return worst;
}

static bool nearly_equal(double a, double b)
{
    return fabs(a - b) <= 1e-6 * fmax(fabs(a), fabs(b)) + 1e-7;
}

/* Dropout in training mode on one device: each element is dropped (output
 * and gradient exactly 0) or kept (output x / (1 - p), gradient
 * r / (1 - p)), and the fraction dropped is within 0.01 of p. */
static void expect_dropout_mask(const diff_case *c, const snapshot *s, const char *device)
{
    const host_array *x = array_named(s, "x"), *y = array_named(s, "out");
    const host_array *r = array_named(s, "r"), *g = array_named(s, "x.grad");
    const double scale = 1.0 / (1.0 - c->p);
    int64_t dropped = 0;
    for (int64_t i = 0; i < y->n; i++) {
        bool zero = y->v[i] == 0.0f;
        bool fits = zero ? g->v[i] == 0.0f
                         : nearly_equal(y->v[i], x->v[i] * scale) &&
                               nearly_equal(g->v[i], r->v[i] * scale);
        if (!fits) {
            cr_expect_fail("%s on %s, element %lld: x %.9g, out %.9g, r %.9g, grad %.9g; "
                           "want out and grad 0, or out x/(1-p) and grad r/(1-p)",
                           c->name, device, (long long)i, x->v[i], y->v[i], r->v[i], g->v[i]);
            return;
        }
        dropped += zero;
    }
    double fraction = (double)dropped / (double)y->n;
    cr_expect(fabs(fraction - c->p) <= 0.01, "%s on %s: dropped %.4f of %lld, want %.2f",
              c->name, device, fraction, (long long)y->n, (double)c->p);
}

/* ---------------------------------------------------------------------
 * The table. */

#define CASE(label, ID, builder, tolerance, ...)                                             \
    {.name = label, .op = SC_OP_##ID, .build = builder, .tol = tolerance, __VA_ARGS__}

/* Element-wise activations: odd 2-D, 4-D into the saturated range, large,
 * scalar. */
#define ACTIVATION_CASES(ID, fn)                                                               \
    CASE(#fn " [7, 13]", ID, build_unary, TOL_ELTWISE, .in = {DIMS(7, 13)}, .unary = sc_##fn), \
    CASE(#fn " [2, 3, 5, 7] in [-6, 6)", ID, build_unary, TOL_ELTWISE,                         \
         .in = {DIMS(2, 3, 5, 7)}, .lo = -6.0f, .hi = 6.0f, .unary = sc_##fn),                 \
    CASE(#fn " [1000, 33]", ID, build_unary, TOL_ELTWISE, .in = {DIMS(1000, 33)},              \
         .unary = sc_##fn),                                                                    \
    CASE(#fn " [] in [0.25, 1)", ID, build_unary, TOL_ELTWISE, .in = {SCALAR}, .lo = 0.25f,    \
         .hi = 1.0f, .unary = sc_##fn)

/* Row-wise over the last dimension: odd, C = 1000, 3-D, batch 1, one
 * class, large logits. */
#define ROW_CASES(ID, fn)                                                                     \
    CASE(#fn " [7, 13]", ID, build_unary, TOL_REDUCE, .in = {DIMS(7, 13)}, .unary = sc_##fn), \
    CASE(#fn " [4, 1000]", ID, build_unary, TOL_REDUCE, .in = {DIMS(4, 1000)},                \
         .unary = sc_##fn),                                                                   \
    CASE(#fn " [2, 3, 33]", ID, build_unary, TOL_REDUCE, .in = {DIMS(2, 3, 33)},              \
         .unary = sc_##fn),                                                                   \
    CASE(#fn " [1, 7]", ID, build_unary, TOL_REDUCE, .in = {DIMS(1, 7)}, .unary = sc_##fn),   \
    CASE(#fn " [3, 1]", ID, build_unary, TOL_REDUCE, .in = {DIMS(3, 1)}, .unary = sc_##fn,    \
         .flags = ZERO_GRAD),                                                                 \
    CASE(#fn " [5, 17] in [-30, 30)", ID, build_unary, TOL_REDUCE, .in = {DIMS(5, 17)},       \
         .lo = -30.0f, .hi = 30.0f, .unary = sc_##fn)

/* Whole-tensor reductions to a scalar. */
#define REDUCTION_CASES(ID, fn)                                                               \
    CASE(#fn " [7, 13]", ID, build_unary, TOL_REDUCE, .in = {DIMS(7, 13)}, .unary = sc_##fn), \
    CASE(#fn " [2, 3, 5, 7]", ID, build_unary, TOL_REDUCE, .in = {DIMS(2, 3, 5, 7)},          \
         .unary = sc_##fn),                                                                   \
    CASE(#fn " []", ID, build_unary, TOL_REDUCE, .in = {SCALAR}, .unary = sc_##fn),           \
    CASE(#fn " [1000, 257]", ID, build_unary, TOL_REDUCE, .in = {DIMS(1000, 257)},            \
         .unary = sc_##fn)

/* Pooling windows: default stride, padded, non-square, overlapping, and
 * an odd size whose last row and column no window reaches. */
#define POOL_CASES(ID, fn, tolerance)                                                        \
    CASE(#fn " 2x2 [2, 3, 8, 8]", ID, build_pool, tolerance, .in = {DIMS(2, 3, 8, 8)},       \
         .pool = sc_##fn, .window = {.kernel = {2, 2}}),                                     \
    CASE(#fn " 3x3 stride 2 pad 1 [2, 3, 13, 13]", ID, build_pool, tolerance,                \
         .in = {DIMS(2, 3, 13, 13)}, .pool = sc_##fn,                                        \
         .window = {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}),                 \
    CASE(#fn " 2x3 stride (2, 1) pad (1, 1) [1, 4, 9, 11]", ID, build_pool, tolerance,       \
         .in = {DIMS(1, 4, 9, 11)}, .pool = sc_##fn,                                         \
         .window = {.kernel = {2, 3}, .stride = {2, 1}, .padding = {1, 1}}),                 \
    CASE(#fn " 3x3 stride 1 pad 1 [1, 2, 5, 5]", ID, build_pool, tolerance,                  \
         .in = {DIMS(1, 2, 5, 5)}, .pool = sc_##fn,                                          \
         .window = {.kernel = {3, 3}, .stride = {1, 1}, .padding = {1, 1}}),                 \
    CASE(#fn " 2x2 [1, 1, 7, 7]", ID, build_pool, tolerance, .in = {DIMS(1, 1, 7, 7)},       \
         .pool = sc_##fn, .window = {.kernel = {2, 2}})

static const diff_case cases[] = {
    CASE("matmul [7, 13] x [13, 33]", MATMUL, build_binary, TOL_GEMM,
         .in = {DIMS(7, 13), DIMS(13, 33)}, .binary = sc_matmul),
    CASE("matmul [1, 1] x [1, 1]", MATMUL, build_binary, TOL_GEMM,
         .in = {DIMS(1, 1), DIMS(1, 1)}, .binary = sc_matmul),
    CASE("matmul [1, 33] x [33, 7]", MATMUL, build_binary, TOL_GEMM,
         .in = {DIMS(1, 33), DIMS(33, 7)}, .binary = sc_matmul),
    CASE("matmul [130, 257] x [257, 65]", MATMUL, build_binary, TOL_GEMM,
         .in = {DIMS(130, 257), DIMS(257, 65)}, .binary = sc_matmul),
    CASE("matmul x [13, 13] by itself", MATMUL, build_binary, TOL_GEMM, .in = {DIMS(13, 13)},
         .binary = sc_matmul, .flags = SAME_OPERAND),

    CASE("linear [7, 13] -> 33 with bias", LINEAR, build_linear, TOL_GEMM,
         .in = {DIMS(7, 13), DIMS(33, 13)}),
    CASE("linear [7, 13] -> 33 without bias", LINEAR, build_linear, TOL_GEMM,
         .in = {DIMS(7, 13), DIMS(33, 13)}, .flags = NO_BIAS),
    CASE("linear batch 1 [1, 784] -> 10", LINEAR, build_linear, TOL_GEMM,
         .in = {DIMS(1, 784), DIMS(10, 784)}),
    CASE("linear [128, 257] -> 65", LINEAR, build_linear, TOL_GEMM,
         .in = {DIMS(128, 257), DIMS(65, 257)}),

    CASE("add [33, 7] + [33, 7]", ADD, build_binary, TOL_ELTWISE,
         .in = {DIMS(33, 7), DIMS(33, 7)}, .binary = sc_add),
    CASE("add [4, 5, 6] + [5, 1]", ADD, build_binary, TOL_REDUCE,
         .in = {DIMS(4, 5, 6), DIMS(5, 1)}, .binary = sc_add),
    CASE("add [] + [7, 13]", ADD, build_binary, TOL_REDUCE, .in = {SCALAR, DIMS(7, 13)},
         .binary = sc_add),
    CASE("add [2, 3, 5, 7] + [3, 1, 1]", ADD, build_binary, TOL_REDUCE,
         .in = {DIMS(2, 3, 5, 7), DIMS(3, 1, 1)}, .binary = sc_add),
    CASE("add_relu [33, 7] + [33, 7]", ADD, build_binary, TOL_ELTWISE,
         .in = {DIMS(33, 7), DIMS(33, 7)}, .binary = sc_add_relu),
    CASE("add_relu [4, 5, 6] + [5, 1]", ADD, build_binary, TOL_REDUCE,
         .in = {DIMS(4, 5, 6), DIMS(5, 1)}, .binary = sc_add_relu),

    CASE("sub [13] - [7, 13]", SUB, build_binary, TOL_REDUCE, .in = {DIMS(13), DIMS(7, 13)},
         .binary = sc_sub),
    CASE("sub [1, 5] - [3, 1]", SUB, build_binary, TOL_REDUCE, .in = {DIMS(1, 5), DIMS(3, 1)},
         .binary = sc_sub),
    CASE("sub [7, 13] - []", SUB, build_binary, TOL_REDUCE, .in = {DIMS(7, 13), SCALAR},
         .binary = sc_sub),
    CASE("sub [2, 3, 5, 7] - [2, 3, 5, 7]", SUB, build_binary, TOL_ELTWISE,
         .in = {DIMS(2, 3, 5, 7), DIMS(2, 3, 5, 7)}, .binary = sc_sub),

    CASE("mul [2, 3, 5, 7] * [3, 1, 1]", MUL, build_binary, TOL_REDUCE,
         .in = {DIMS(2, 3, 5, 7), DIMS(3, 1, 1)}, .binary = sc_mul),
    CASE("mul [4, 5, 6] * [5, 1]", MUL, build_binary, TOL_REDUCE,
         .in = {DIMS(4, 5, 6), DIMS(5, 1)}, .binary = sc_mul),
    CASE("mul x [7, 13] by itself", MUL, build_binary, TOL_ELTWISE, .in = {DIMS(7, 13)},
         .binary = sc_mul, .flags = SAME_OPERAND),
    CASE("mul [1] * [33, 7]", MUL, build_binary, TOL_REDUCE, .in = {DIMS(1), DIMS(33, 7)},
         .binary = sc_mul),
    CASE("mul [1000, 33] * [1000, 33]", MUL, build_binary, TOL_ELTWISE,
         .in = {DIMS(1000, 33), DIMS(1000, 33)}, .binary = sc_mul),

    CASE("scale [7, 13] by -2.5", SCALE, build_scale, TOL_ELTWISE, .in = {DIMS(7, 13)},
         .factor = -2.5f),
    CASE("scale [] by 3", SCALE, build_scale, TOL_ELTWISE, .in = {SCALAR}, .factor = 3.0f),
    CASE("scale [2, 3, 5, 7] by 0.125", SCALE, build_scale, TOL_ELTWISE,
         .in = {DIMS(2, 3, 5, 7)}, .factor = 0.125f),

    ACTIVATION_CASES(RELU, relu),
    ACTIVATION_CASES(TANH, tanh),
    ACTIVATION_CASES(SIGMOID, sigmoid),
    ACTIVATION_CASES(GELU, gelu),

    CASE("dropout p 0.25 [64, 1000]", DROPOUT, build_dropout, TOL_ELTWISE,
         .in = {DIMS(64, 1000)}, .p = 0.25f, .lo = 0.5f, .hi = 1.5f,
         .property = expect_dropout_mask),
    CASE("dropout p 0.5 [33, 1001]", DROPOUT, build_dropout, TOL_ELTWISE,
         .in = {DIMS(33, 1001)}, .p = 0.5f, .lo = 0.5f, .hi = 1.5f,
         .property = expect_dropout_mask),
    CASE("dropout p 0.1 [2, 3, 65, 65]", DROPOUT, build_dropout, TOL_ELTWISE,
         .in = {DIMS(2, 3, 65, 65)}, .p = 0.1f, .lo = 0.5f, .hi = 1.5f,
         .property = expect_dropout_mask),
    CASE("dropout in eval mode is x [7, 13]", DROPOUT, build_dropout, TOL_ELTWISE,
         .in = {DIMS(7, 13)}, .p = 0.5f, .flags = EVAL),

    ROW_CASES(SOFTMAX, softmax),
    ROW_CASES(LOG_SOFTMAX, log_softmax),

    CASE("cross_entropy [7, 13] i64", CROSS_ENTROPY, build_cross_entropy, TOL_REDUCE,
         .in = {DIMS(7, 13)}, .target_dtype = SC_I64),
    CASE("cross_entropy [4, 1000] i32 smoothing 0.1", CROSS_ENTROPY, build_cross_entropy,
         TOL_REDUCE, .in = {DIMS(4, 1000)}, .target_dtype = SC_I32, .smoothing = 0.1f),
    CASE("cross_entropy [33, 10] u8 smoothing 0.2", CROSS_ENTROPY, build_cross_entropy,
         TOL_REDUCE, .in = {DIMS(33, 10)}, .target_dtype = SC_U8, .smoothing = 0.2f),
    CASE("cross_entropy batch 1 [1, 5] i64", CROSS_ENTROPY, build_cross_entropy, TOL_REDUCE,
         .in = {DIMS(1, 5)}, .target_dtype = SC_I64),
    CASE("cross_entropy [64, 10] in [-20, 20) i32", CROSS_ENTROPY, build_cross_entropy,
         TOL_REDUCE, .in = {DIMS(64, 10)}, .lo = -20.0f, .hi = 20.0f, .target_dtype = SC_I32),
    CASE("cross_entropy soft [7, 13]", CROSS_ENTROPY, build_soft_cross_entropy, TOL_REDUCE,
         .in = {DIMS(7, 13)}),
    CASE("cross_entropy soft [4, 1000] smoothing 0.1, frozen target", CROSS_ENTROPY,
         build_soft_cross_entropy, TOL_REDUCE, .in = {DIMS(4, 1000)}, .smoothing = 0.1f,
         .flags = FROZEN_TARGET),
    CASE("cross_entropy soft [33, 10] in [-20, 20) smoothing 0.2", CROSS_ENTROPY,
         build_soft_cross_entropy, TOL_REDUCE, .in = {DIMS(33, 10)}, .lo = -20.0f,
         .hi = 20.0f, .smoothing = 0.2f),

    CASE("mse [7, 13]", MSE, build_mse, TOL_REDUCE, .in = {DIMS(7, 13)}),
    CASE("mse [33, 1] with a frozen target", MSE, build_mse, TOL_REDUCE, .in = {DIMS(33, 1)},
         .flags = FROZEN_TARGET),
    CASE("mse [2, 3, 5, 7]", MSE, build_mse, TOL_REDUCE, .in = {DIMS(2, 3, 5, 7)}),
    CASE("mse [1]", MSE, build_mse, TOL_REDUCE, .in = {DIMS(1)}),

    REDUCTION_CASES(SUM, sum),
    REDUCTION_CASES(MEAN, mean),

    CASE("reshape [4, 6, 5] as [2, -1, 3]", RESHAPE, build_reshape, TOL_ELTWISE,
         .in = {DIMS(4, 6, 5), DIMS(2, -1, 3)}),
    CASE("flatten [2, 3, 5, 7]", RESHAPE, build_unary, TOL_ELTWISE, .in = {DIMS(2, 3, 5, 7)},
         .unary = sc_flatten),
    CASE("reshape [6, 35] as [6, 5, 7], then softmax", RESHAPE, build_reshape, TOL_REDUCE,
         .in = {DIMS(6, 35), DIMS(6, 5, 7)}, .unary = sc_softmax),
    CASE("reshape [2, 3, 5, 7] as [2, -1], then matmul [105, 13]", RESHAPE, build_reshape,
         TOL_GEMM, .in = {DIMS(2, 3, 5, 7), DIMS(2, -1), DIMS(105, 13)},
         .binary = sc_matmul),
    CASE("reshape [3, 4, 5] as [12, 5], then mul [12, 1]", RESHAPE, build_reshape, TOL_REDUCE,
         .in = {DIMS(3, 4, 5), DIMS(12, 5), DIMS(12, 1)}, .binary = sc_mul),

    CASE("conv2d 3x3 [2, 3, 7, 7] -> 4", CONV2D, build_conv2d, TOL_GEMM,
         .in = {DIMS(2, 3, 7, 7), DIMS(4, 3, 3, 3)}),
    CASE("conv2d 3x3 stride 2 pad 1 no bias [2, 3, 13, 13] -> 8", CONV2D, build_conv2d,
         TOL_GEMM, .in = {DIMS(2, 3, 13, 13), DIMS(8, 3, 3, 3)}, .flags = NO_BIAS,
         .conv = {.stride = {2, 2}, .padding = {1, 1}}),
    CASE("conv2d 3x3 dilation 2 pad 2 [1, 4, 13, 11] -> 5", CONV2D, build_conv2d, TOL_GEMM,
         .in = {DIMS(1, 4, 13, 11), DIMS(5, 4, 3, 3)},
         .conv = {.padding = {2, 2}, .dilation = {2, 2}}),
    CASE("conv2d 3x3 groups 2 pad 1 [2, 4, 9, 9] -> 6", CONV2D, build_conv2d, TOL_GEMM,
         .in = {DIMS(2, 4, 9, 9), DIMS(6, 2, 3, 3)}, .conv = {.padding = {1, 1}, .groups = 2}),
    CASE("conv2d depthwise 3x3 pad 1 [2, 8, 13, 13]", CONV2D, build_conv2d, TOL_GEMM,
         .in = {DIMS(2, 8, 13, 13), DIMS(8, 1, 3, 3)}, .conv = {.padding = {1, 1}, .groups = 8}),
    CASE("conv2d depthwise 3x3 stride 2 pad 1 no bias [1, 16, 33, 33]", CONV2D, build_conv2d,
         TOL_GEMM, .in = {DIMS(1, 16, 33, 33), DIMS(16, 1, 3, 3)}, .flags = NO_BIAS,
         .conv = {.stride = {2, 2}, .padding = {1, 1}, .groups = 16}),
    CASE("conv2d 3x5 stride (1, 2) pad (1, 2) [1, 3, 11, 17] -> 4", CONV2D, build_conv2d,
         TOL_GEMM, .in = {DIMS(1, 3, 11, 17), DIMS(4, 3, 3, 5)},
         .conv = {.stride = {1, 2}, .padding = {1, 2}}),
    CASE("conv2d 5x1 dilation (2, 1) no bias [3, 2, 17, 9] -> 4", CONV2D, build_conv2d,
         TOL_GEMM, .in = {DIMS(3, 2, 17, 9), DIMS(4, 2, 5, 1)}, .flags = NO_BIAS,
         .conv = {.dilation = {2, 1}}),
    CASE("conv2d 1x1 [4, 16, 7, 7] -> 33", CONV2D, build_conv2d, TOL_GEMM,
         .in = {DIMS(4, 16, 7, 7), DIMS(33, 16, 1, 1)}),
    CASE("conv2d 3x3 pad 1 batch 1 [1, 16, 33, 33] -> 32", CONV2D, build_conv2d, TOL_GEMM,
         .in = {DIMS(1, 16, 33, 33), DIMS(32, 16, 3, 3)}, .conv = {.padding = {1, 1}}),
    CASE("conv2d 7x7 stride 2 pad 3 [2, 3, 33, 33] -> 16", CONV2D, build_conv2d, TOL_GEMM,
         .in = {DIMS(2, 3, 33, 33), DIMS(16, 3, 7, 7)},
         .conv = {.stride = {2, 2}, .padding = {3, 3}}),

    POOL_CASES(MAX_POOL2D, max_pool2d, TOL_ELTWISE),
    POOL_CASES(AVG_POOL2D, avg_pool2d, TOL_REDUCE),

    CASE("global_avg_pool [2, 3, 7, 7]", GLOBAL_AVG_POOL, build_unary, TOL_REDUCE,
         .in = {DIMS(2, 3, 7, 7)}, .unary = sc_global_avg_pool),
    CASE("global_avg_pool [1, 33, 1, 1]", GLOBAL_AVG_POOL, build_unary, TOL_REDUCE,
         .in = {DIMS(1, 33, 1, 1)}, .unary = sc_global_avg_pool),
    CASE("global_avg_pool [4, 64, 13, 13]", GLOBAL_AVG_POOL, build_unary, TOL_REDUCE,
         .in = {DIMS(4, 64, 13, 13)}, .unary = sc_global_avg_pool),

    CASE("batch_norm train [7, 5]", BATCH_NORM, build_batch_norm, TOL_REDUCE,
         .in = {DIMS(7, 5)}),
    CASE("batch_norm train [3, 4, 5, 7]", BATCH_NORM, build_batch_norm, TOL_REDUCE,
         .in = {DIMS(3, 4, 5, 7)}),
    CASE("batch_norm train batch 1 [1, 3, 4, 4]", BATCH_NORM, build_batch_norm, TOL_REDUCE,
         .in = {DIMS(1, 3, 4, 4)}),
    CASE("batch_norm train [64, 33] in [2, 4)", BATCH_NORM, build_batch_norm, TOL_REDUCE,
         .in = {DIMS(64, 33)}, .lo = 2.0f, .hi = 4.0f),
    CASE("batch_norm eval [7, 5]", BATCH_NORM, build_batch_norm, TOL_REDUCE,
         .in = {DIMS(7, 5)}, .flags = EVAL),
    CASE("batch_norm eval [3, 4, 5, 7]", BATCH_NORM, build_batch_norm, TOL_REDUCE,
         .in = {DIMS(3, 4, 5, 7)}, .flags = EVAL),
    CASE("batch_norm + relu train [3, 4, 5, 7]", BATCH_NORM, build_batch_norm, TOL_REDUCE,
         .in = {DIMS(3, 4, 5, 7)}, .flags = RELU),
    CASE("batch_norm + relu eval [3, 4, 5, 7]", BATCH_NORM, build_batch_norm, TOL_REDUCE,
         .in = {DIMS(3, 4, 5, 7)}, .flags = EVAL | RELU),
    CASE("batch_norm + relu + max_pool 2x2 train [3, 4, 6, 7]", BATCH_NORM, build_batch_norm,
         TOL_REDUCE, .in = {DIMS(3, 4, 6, 7)}, .flags = RELU, .window = {.kernel = {2, 2}}),
    CASE("batch_norm + relu + max_pool 2x2 eval [3, 4, 6, 7]", BATCH_NORM, build_batch_norm,
         TOL_REDUCE, .in = {DIMS(3, 4, 6, 7)}, .flags = EVAL | RELU,
         .window = {.kernel = {2, 2}}),
    CASE("batch_norm + max_pool 3x3 stride 2 pad 1 train [2, 3, 9, 9]", BATCH_NORM,
         build_batch_norm, TOL_REDUCE, .in = {DIMS(2, 3, 9, 9)},
         .window = {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}),

    CASE("layer_norm [7, 13] with weight and bias", LAYER_NORM, build_layer_norm, TOL_REDUCE,
         .in = {DIMS(7, 13)}),
    CASE("layer_norm [2, 3, 33] without weight and bias", LAYER_NORM, build_layer_norm,
         TOL_REDUCE, .in = {DIMS(2, 3, 33)}, .flags = NO_WEIGHT | NO_BIAS),
    CASE("layer_norm [4, 1000] with weight only", LAYER_NORM, build_layer_norm, TOL_REDUCE,
         .in = {DIMS(4, 1000)}, .flags = NO_BIAS),
    CASE("layer_norm [1, 5] with bias only", LAYER_NORM, build_layer_norm, TOL_REDUCE,
         .in = {DIMS(1, 5)}, .flags = NO_WEIGHT),
    CASE("layer_norm [16, 64] in [5, 7)", LAYER_NORM, build_layer_norm, TOL_REDUCE,
         .in = {DIMS(16, 64)}, .lo = 5.0f, .hi = 7.0f),

    CASE("concat axis 0: [2, 5] [3, 5] [1, 5]", CONCAT, build_concat, TOL_ELTWISE,
         .in = {DIMS(2, 5), DIMS(3, 5), DIMS(1, 5)}, .n_in = 3, .axis = 0),
    CASE("concat axis 1: [3, 2] [3, 7] [3, 1]", CONCAT, build_concat, TOL_ELTWISE,
         .in = {DIMS(3, 2), DIMS(3, 7), DIMS(3, 1)}, .n_in = 3, .axis = 1),
    CASE("concat axis 2: [2, 3, 4, 5] [2, 3, 1, 5]", CONCAT, build_concat, TOL_ELTWISE,
         .in = {DIMS(2, 3, 4, 5), DIMS(2, 3, 1, 5)}, .n_in = 2, .axis = 2),
    CASE("concat axis -1: [2, 3, 4, 5] [2, 3, 4, 2]", CONCAT, build_concat, TOL_ELTWISE,
         .in = {DIMS(2, 3, 4, 5), DIMS(2, 3, 4, 2)}, .n_in = 2, .axis = -1),
    CASE("concat of one [7, 13]", CONCAT, build_concat, TOL_ELTWISE, .in = {DIMS(7, 13)},
         .n_in = 1, .axis = 0),
    CASE("concat of eight on axis 1: [2, 1..8, 3]", CONCAT, build_concat, TOL_ELTWISE,
         .in = {DIMS(2, 1, 3), DIMS(2, 2, 3), DIMS(2, 3, 3), DIMS(2, 4, 3), DIMS(2, 5, 3),
                DIMS(2, 6, 3), DIMS(2, 7, 3), DIMS(2, 8, 3)},
         .n_in = 8, .axis = 1),
};

#define N_CASES (sizeof cases / sizeof cases[0])

/* ---------------------------------------------------------------------
 * Running a case. */

static void skip_without_gpu(void)
{
    if (sc_cuda_device_count() == 0)
        cr_skip_test("no GPU: sc_cuda_device_count() is 0 (%s)",
                     sc_cuda_built() ? "the CUDA backend is built but sees no GPU"
                                     : "libscorch was built without the CUDA backend");
}

/* Builds the case on in's context, backpropagates sum(out * r) and copies
 * the results to the host. */
static bool forward_backward(const diff_case *c, case_inputs *in, snapshot *snap)
{
    sc_ctx *ctx = in->ctx;
    sc_ctx_set_precision(ctx, SC_PRECISION_FP32);
    sc_ctx_set_training(ctx, !(c->flags & EVAL));
    sc_rng_init(sc_ctx_rng(ctx), 99, 0); /* dropout's stream */
    sc_tensor *out = c->build(ctx, c, in);
    if (!out || in->error[0])
        return false;
    sc_tensor *r = weighting(in, out);
    sc_tensor *loss = sc_sum(ctx, sc_mul(ctx, out, r));
    return loss && sc_backward(ctx, loss, NULL, NULL) == SC_OK &&
           snapshot_add(snap, ctx, "out", "", out) && snapshot_add(snap, ctx, "r", "", r) &&
           snapshot_inputs(snap, in);
}

/* Runs case c on device into snap; false with the reason in why. */
static bool run_on(const diff_case *c, sc_device device, snapshot *snap, char *why,
                   size_t size)
{
    case_inputs in = {.device = device};
    sc_rng_init(&in.rng, 1234, (uint64_t)(c - cases));
    in.ctx = sc_ctx_new(device);
    bool ok = in.ctx && forward_backward(c, &in, snap);
    if (!ok)
        snprintf(why, size, "%s", in.error[0] ? in.error : sc_error_message());
    sc_ctx_free(in.ctx); /* waits for the GPU */
    for (int i = 0; i < in.n; i++)
        sc_params_free(in.store[i]);
    for (int i = 0; i < in.n_host; i++)
        sc_tensor_free(in.host[i]);
    return ok;
}

/* Case c on the CPU and on CUDA, compared (or each checked alone). */
static void expect_case(const diff_case *c)
{
    snapshot ref = {0}, cuda = {0};
    char why[600];
    if (!run_on(c, cpu_device, &ref, why, sizeof why)) {
        cr_expect_fail("%s on the cpu: %s", c->name, why);
    } else if (!run_on(c, gpu_device, &cuda, why, sizeof why)) {
        cr_expect_fail("%s on cuda: %s", c->name, why);
    } else if (c->property) {
        c->property(c, &ref, "the cpu");
        c->property(c, &cuda, "cuda");
        printf("cuda_ops  %-64s checked on each device alone\n", c->name);
    } else {
        double worst = expect_same_results(c->name, c->tol, &cuda, &ref);
        printf("cuda_ops  %-64s %-4s worst %.3f x tolerance\n", c->name,
               worst <= 1.0 ? "ok" : "FAIL", worst);
    }
    snapshot_free(&ref);
    snapshot_free(&cuda);
}

static int count_cases(int op)
{
    int n = 0;
    for (size_t i = 0; i < N_CASES; i++)
        n += (int)cases[i].op == op;
    return n;
}

static void expect_op_cases(sc_op_id op)
{
    skip_without_gpu();
    cr_expect_gt(count_cases((int)op), 0, "%s has no case", sc_op_desc_get(op)->name);
    for (size_t i = 0; i < N_CASES; i++)
        if (cases[i].op == op)
            expect_case(&cases[i]);
}

/* ---------------------------------------------------------------------
 * Tests. */

/* One test per op of the registry, named after it: cuda_gpu::conv2d. */
#define OP_TEST(id, name)                                                                    \
    Test(cuda_gpu, name) { expect_op_cases(SC_OP_##id); }
SC_OP_LIST(OP_TEST)
#undef OP_TEST

/* Which ops have CUDA kernels and how many cases each has. Every op needs
 * a case (asserted everywhere); kernels are asserted only where a GPU can
 * run them. */
Test(cuda_ops, coverage)
{
    bool gpu = sc_cuda_device_count() > 0;
    int fwd = 0, bwd = 0, covered = 0;
    printf("cuda_ops coverage  %-16s %-8s %-9s %s\n", "op", "forward", "backward", "cases");
    for (int op = 0; op < SC_OP_COUNT; op++) {
        const char *name = sc_op_desc_get((sc_op_id)op)->name;
        const sc_kernel *k = sc_backend_kernel(SC_DEVICE_CUDA, (sc_op_id)op);
        bool f = k && k->forward, b = k && k->backward;
        int n = count_cases(op);
        fwd += f;
        bwd += b;
        covered += n > 0;
        printf("cuda_ops coverage  %-16s %-8s %-9s %d\n", name, f ? "yes" : "-", b ? "yes" : "-",
               n);
        cr_expect_gt(n, 0, "op %s has no case in the table of test_cuda_ops.c", name);
        if (gpu)
            cr_expect(f && b, "the CUDA backend lacks the %s%s%s kernel of %s",
                      f ? "" : "forward", f || b ? "" : " and ", b ? "" : "backward", name);
    }
    printf("cuda_ops coverage  cuda kernels: %d/%d forward, %d/%d backward%s; "
           "table: %d/%d ops, %zu cases\n",
           fwd, SC_OP_COUNT, bwd, SC_OP_COUNT,
           gpu ? "" : " (no GPU: printed, not asserted)", covered, SC_OP_COUNT, N_CASES);
    for (size_t i = 0; i < N_CASES; i++)
        cr_expect(cases[i].name && cases[i].build && (int)cases[i].op >= 0 &&
                      (int)cases[i].op < SC_OP_COUNT,
                  "case %zu is incomplete", i);
}

/* The CPU's results of a case are finite, and every gradient has a
 * nonzero element (the case does exercise backward) unless the case says
 * it is 0. */
static void expect_valid_results(const diff_case *c, const snapshot *s)
{
    for (int i = 0; i < s->n; i++) {
        const host_array *a = &s->a[i];
        bool finite = true, nonzero = false;
        for (int64_t k = 0; k < a->n; k++) {
            finite = finite && isfinite(a->v[k]);
            nonzero = nonzero || a->v[k] != 0.0f;
        }
        cr_expect(finite, "%s: %s %s has a non-finite element", c->name, a->name, a->shape);
        if (strstr(a->name, ".grad") && !(c->flags & ZERO_GRAD))
            cr_expect(nonzero, "%s: %s %s is all zero", c->name, a->name, a->shape);
    }
}

/* Every case is valid: it builds and backpropagates on the CPU, with
 * finite values (and dropout's statistics hold there). Runs without a GPU,
 * so a broken table shows on CI. */
Test(cuda_ops, cases_run_on_the_cpu)
{
    for (size_t i = 0; i < N_CASES; i++) {
        const diff_case *c = &cases[i];
        snapshot s = {0};
        char why[600];
        if (!run_on(c, cpu_device, &s, why, sizeof why)) {
            cr_expect_fail("%s: %s", c->name, why);
        } else {
            expect_valid_results(c, &s);
            if (c->property)
                c->property(c, &s, "the cpu");
        }
        snapshot_free(&s);
    }
}

/* ---------------------------------------------------------------------
 * A training step: linear -> relu -> linear -> cross-entropy and Adam. */

enum { MLP_IN = 20, MLP_HIDDEN = 33, MLP_CLASSES = 10, MLP_BATCH = 16, MLP_STEPS = 3 };

/* w1 [HIDDEN, IN], b1 [HIDDEN], w2 [CLASSES, HIDDEN], b2 [CLASSES], on
 * the host, uniform in [-0.3, 0.3) from a fixed stream. */
static sc_params *mlp_params(void)
{
    static const struct {
        const char *name;
        dims shape;
    } layout[] = {
        {"w1", DIMS(MLP_HIDDEN, MLP_IN)},
        {"b1", DIMS(MLP_HIDDEN)},
        {"w2", DIMS(MLP_CLASSES, MLP_HIDDEN)},
        {"b2", DIMS(MLP_CLASSES)},
    };
    sc_params *ps = sc_params_new();
    cr_assert_not_null(ps, "%s", sc_error_message());
    sc_rng rng;
    sc_rng_init(&rng, 5, 0);
    for (size_t i = 0; i < sizeof layout / sizeof layout[0]; i++) {
        sc_tensor *t = sc_params_add(ps, layout[i].name, layout[i].shape.ndim, layout[i].shape.d);
        cr_assert_not_null(t, "%s", sc_error_message());
        for (int64_t k = 0; k < t->numel; k++)
            sc_tensor_f32(t)[k] = 0.6f * sc_rng_uniform(&rng) - 0.3f;
    }
    return ps;
}

/* One step on batch `step` (x [BATCH, IN], labels [BATCH] i64): forward,
 * backward, Adam; the loss goes into snap. */
static bool mlp_step(sc_ctx *ctx, sc_params *ps, sc_optim *opt, int step, snapshot *snap)
{
    sc_tensor *x = sc_tensor_alloc(SC_F32, 2, (int64_t[]){MLP_BATCH, MLP_IN});
    sc_tensor *labels = sc_tensor_alloc(SC_I64, 1, (int64_t[]){MLP_BATCH});
    cr_assert(x && labels, "%s", sc_error_message());
    sc_rng rng;
    sc_rng_init(&rng, 6, (uint64_t)step);
    for (int64_t i = 0; i < x->numel; i++)
        sc_tensor_f32(x)[i] = 2.0f * sc_rng_uniform(&rng) - 1.0f;
    for (int64_t i = 0; i < labels->numel; i++)
        ((int64_t *)labels->data)[i] = (int64_t)sc_rng_below(&rng, MLP_CLASSES);

    sc_params_zero_grad(ps);
    sc_tensor *h = sc_relu(ctx, sc_linear(ctx, sc_tensor_to_device(ctx, x),
                                          sc_params_find(ps, "w1"), sc_params_find(ps, "b1")));
    sc_tensor *logits = sc_linear(ctx, h, sc_params_find(ps, "w2"), sc_params_find(ps, "b2"));
    sc_tensor *loss = sc_cross_entropy(ctx, logits, sc_tensor_to_device(ctx, labels), 0.0f);
    char name[16];
    snprintf(name, sizeof name, "loss %d", step);
    bool ok = loss && sc_backward(ctx, loss, NULL, NULL) == SC_OK &&
              snapshot_add(snap, ctx, name, "", loss) && sc_optim_step(opt, 1e-2) == SC_OK &&
              sc_ctx_synchronize(ctx) == SC_OK;
    sc_ctx_reset(ctx);
    sc_tensor_free(x);
    sc_tensor_free(labels);
    return ok;
}

/* MLP_STEPS steps on device; snap gets each loss, then each parameter. */
static bool train_on(sc_device device, snapshot *snap, char *why, size_t size)
{
    sc_params *ps = mlp_params();
    sc_ctx *ctx = sc_ctx_new(device);
    sc_optim_config config = sc_optim_defaults(SC_OPTIM_ADAM);
    sc_optim *opt = NULL;
    bool ok = ctx && sc_params_to_device(ps, device) == SC_OK &&
              (opt = sc_optim_new(ps, &config)) != NULL;
    if (ok)
        sc_ctx_set_precision(ctx, SC_PRECISION_FP32);
    for (int step = 0; ok && step < MLP_STEPS; step++)
        ok = mlp_step(ctx, ps, opt, step, snap);
    for (int i = 0; ok && i < sc_params_count(ps); i++)
        ok = snapshot_add(snap, ctx, sc_params_at(ps, i)->name, "", sc_params_at(ps, i));
    if (!ok)
        snprintf(why, size, "%s", sc_error_message());
    sc_ctx_free(ctx);
    sc_optim_free(opt);
    sc_params_free(ps);
    return ok;
}

Test(cuda_gpu, training_step)
{
    skip_without_gpu();
    snapshot ref = {0}, cuda = {0};
    char why[600];
    cr_assert(train_on(cpu_device, &ref, why, sizeof why), "on the cpu: %s", why);
    cr_assert(train_on(gpu_device, &cuda, why, sizeof why), "on cuda: %s", why);
    const tolerance tol = TOL_TRAINING;
    double worst = expect_same_results("training step (Adam)", tol, &cuda, &ref);
    printf("cuda_ops  %-64s %-4s worst %.3f x tolerance\n",
           "3 Adam steps of linear -> relu -> linear -> cross_entropy",
           worst <= 1.0 ? "ok" : "FAIL", worst);
    snapshot_free(&ref);
    snapshot_free(&cuda);
}
