/* The eager tape: accumulation, shared parameters, the grad-ready signal,
 * grad mode, stable arena addresses across steps, memory that backward
 * hands back (gradients it is done with, kernels' scratch), gradients that
 * kernels write instead of adding to, and kernel coverage of the op
 * registry per backend. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "context_impl.h"
#include "gradcheck.h"
#include "op_fixture.h"
#include "op.h"
#include "scorch/scorch.h"
#include "scorch_host/params.h"


static void setup(void)
{
    op_fixture_setup(3);
}

TestSuite(autograd, .init = setup, .fini = op_fixture_teardown);

static sc_tensor *param(const char *name, int ndim, const int64_t *shape)
{
    sc_tensor *t = gradcheck_param(ps, name, ndim, shape, -1.0f, 1.0f, &rng);
    cr_assert_not_null(t, "%s", sc_error_message());
    return t;
}

static void backward_ok(sc_tensor *loss)
{
    cr_assert_not_null(loss, "%s", sc_error_message());
    cr_assert_eq(sc_backward(ctx, loss, NULL, NULL), SC_OK, "%s", sc_error_message());
}

/* loss = sum(w * x) with x [3, 4] = i - 5, in a fresh step */
static void weighted_sum_step(sc_tensor *w)
{
    sc_ctx_reset(ctx);
    sc_tensor *x = sc_tensor_new(ctx, SC_F32, 2, (int64_t[]){3, 4});
    for (int i = 0; i < 12; i++)
        sc_tensor_f32(x)[i] = (float)i - 5.0f;
    backward_ok(sc_sum(ctx, sc_mul(ctx, w, x)));
}

Test(autograd, two_backward_passes_add)
{
    sc_tensor *w = param("w", 2, (int64_t[]){3, 4});
    weighted_sum_step(w);
    float first[12];
    memcpy(first, w->grad->data, sizeof first);
    weighted_sum_step(w);
    for (int i = 0; i < 12; i++) {
        cr_assert_float_eq(first[i], (float)i - 5.0f, 1e-6f);
        cr_assert_float_eq(sc_tensor_f32(w->grad)[i], 2.0f * first[i], 1e-6f);
    }
}

Test(autograd, a_parameter_used_twice)
{
    /* loss = sum(w * w) + sum(relu(w) * 3): d/dw = 2w + 3 [w > 0] */
    sc_tensor *w = param("w", 1, (int64_t[]){10});
    sc_tensor *a = sc_sum(ctx, sc_mul(ctx, w, w));
    sc_tensor *b = sc_sum(ctx, sc_scale(ctx, sc_relu(ctx, w), 3.0f));
    backward_ok(sc_add(ctx, a, b));
    for (int i = 0; i < 10; i++) {
        float v = sc_tensor_f32(w)[i];
        cr_assert_float_eq(sc_tensor_f32(w->grad)[i], 2.0f * v + (v > 0 ? 3.0f : 0.0f), 1e-6f);
    }
}

typedef struct ready_log {
    sc_tensor *order[8];
    int count;
} ready_log;

static void on_ready(void *user, sc_tensor *p)
{
    ready_log *log = user;
    cr_assert_lt(log->count, 8);
    log->order[log->count++] = p;
}

Test(autograd, grad_ready_once_per_parameter_in_reverse_first_use)
{
    sc_tensor *w1 = param("w1", 2, (int64_t[]){6, 4}), *b1 = param("b1", 1, (int64_t[]){6});
    sc_tensor *w2 = param("w2", 2, (int64_t[]){3, 6}), *s = param("s", 1, (int64_t[]){3});
    sc_tensor *x = sc_tensor_new(ctx, SC_F32, 2, (int64_t[]){5, 4});
    for (int i = 0; i < 20; i++)
        sc_tensor_f32(x)[i] = (float)(i % 7) - 3.0f;
    /* first uses: w1, b1 (linear), w2, s; w1 again at the end */
    sc_tensor *h = sc_tanh(ctx, sc_linear(ctx, x, w1, b1));
    sc_tensor *y = sc_mul(ctx, sc_linear(ctx, h, w2, NULL), s);
    sc_tensor *loss = sc_add(ctx, sc_mean(ctx, y), sc_sum(ctx, sc_mul(ctx, w1, w1)));
    cr_assert_not_null(loss, "%s", sc_error_message());
    ready_log log = {0};
    cr_assert_eq(sc_backward(ctx, loss, on_ready, &log), SC_OK, "%s", sc_error_message());
    sc_tensor *want[] = {s, w2, b1, w1};
    cr_assert_eq(log.count, 4, "%d callbacks", log.count);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(log.order[i], want[i], "callback %d: %s, want %s", i,
                     log.order[i]->name, want[i]->name);
}

Test(autograd, backward_needs_a_grad_scalar)
{
    sc_tensor *x = sc_tensor_zeros(ctx, SC_F32, 1, (int64_t[]){4});
    sc_tensor *loss = sc_sum(ctx, sc_relu(ctx, x));
    cr_assert_not_null(loss);
    cr_assert_neq(sc_backward(ctx, loss, NULL, NULL), SC_OK);
    cr_assert(strstr(sc_error_message(), "backward"), "%s", sc_error_message());
    sc_tensor *w = param("w", 1, (int64_t[]){4});
    cr_assert_neq(sc_backward(ctx, sc_relu(ctx, w), NULL, NULL), SC_OK,
                  "a loss of 4 elements");
    cr_assert_neq(sc_backward(ctx, NULL, NULL, NULL), SC_OK);
}

/* Tensors carry no autograd state, so structs a plugin fills itself (on
 * its stack, with sc_tensor_init) are op inputs like libscorch's own: data
 * it owns, and a parameter seen through a copy of its struct, which
 * backpropagates into the parameter's gradient. */
Test(autograd, tensors_a_plugin_fills_itself)
{
    sc_tensor *w = param("w", 1, (int64_t[]){4});
    float xs[4] = {1, 2, 3, 4};
    sc_tensor x;
    cr_assert_eq(sc_tensor_init(&x, SC_F32, 1, (int64_t[]){4}), SC_OK);
    x.data = xs;
    x.device = w->device;
    sc_tensor w_copy = *w;
    backward_ok(sc_sum(ctx, sc_add(ctx, sc_mul(ctx, w, &x), sc_mul(ctx, &w_copy, &x))));
    for (int i = 0; i < 4; i++)
        cr_expect_float_eq(sc_tensor_f32(w->grad)[i], 2.0f * xs[i], 1e-6f, "grad[%d]", i);
    sc_tensor loss;
    cr_assert_eq(sc_tensor_init(&loss, SC_F32, 0, NULL), SC_OK);
    loss.data = xs;
    loss.flags = SC_TENSOR_REQUIRES_GRAD;
    cr_expect_eq(sc_backward(ctx, &loss, NULL, NULL), SC_ERR_STATE, "no op made it");
}

Test(autograd, grad_mode_off_records_nothing)
{
    sc_tensor *w = param("w", 2, (int64_t[]){2, 3});
    bool was = sc_ctx_set_grad_enabled(ctx, false);
    cr_assert(was, "grad mode starts on");
    cr_assert_not(sc_ctx_grad_enabled(ctx));
    sc_tensor *loss = sc_mean(ctx, sc_sigmoid(ctx, sc_scale(ctx, w, 2.0f)));
    cr_assert_not_null(loss);
    cr_assert_eq(ctx->tape_len, 0);
    cr_assert_null(sc_ctx_tape_node(ctx, loss));
    cr_assert_not(loss->flags & SC_TENSOR_REQUIRES_GRAD);
    cr_assert_neq(sc_backward(ctx, loss, NULL, NULL), SC_OK);
    sc_ctx_set_grad_enabled(ctx, true);
    cr_assert_not_null(sc_mean(ctx, w));
    cr_assert_eq(ctx->tape_len, 1);
}

Test(autograd, a_step_tensor_that_requires_grad)
{
    sc_tensor *x = sc_tensor_new(ctx, SC_F32, 1, (int64_t[]){3});
    for (int i = 0; i < 3; i++)
        sc_tensor_f32(x)[i] = (float)i;
    x->flags |= SC_TENSOR_REQUIRES_GRAD;
    backward_ok(sc_sum(ctx, sc_mul(ctx, x, x)));
    cr_assert_not_null(x->grad);
    for (int i = 0; i < 3; i++)
        cr_assert_float_eq(sc_tensor_f32(x->grad)[i], 2.0f * (float)i, 1e-6f);
}

/* One training step of a small MLP with dropout; records the address of
 * every tensor it makes and of the gradients it retains. */
static int step_addresses(sc_tensor *const *p, const sc_tensor *target, void **addr)
{
    sc_tensor *x = sc_tensor_new(ctx, SC_F32, 2, (int64_t[]){256, 784});
    cr_assert_not_null(x);
    memset(x->data, 0, sc_tensor_nbytes(x));
    sc_tensor *h1 = sc_linear(ctx, x, p[0], p[1]);
    sc_tensor *h2 = sc_dropout(ctx, sc_relu(ctx, h1), 0.1f);
    sc_tensor *z = sc_linear(ctx, h2, p[2], p[3]);
    sc_tensor *loss = sc_cross_entropy(ctx, z, (sc_tensor *)target, 0.0f);
    cr_assert_not_null(loss);
    h2->flags |= SC_TENSOR_RETAIN_GRAD;
    z->flags |= SC_TENSOR_RETAIN_GRAD;
    backward_ok(loss);
    cr_assert_null(h1->grad, "an intermediate's gradient went on to others");
    sc_tensor *all[] = {x, h1, h2, z, loss, h2->grad, z->grad};
    int n = 0;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        cr_assert_not_null(all[i], "tensor %zu", i);
        addr[n++] = all[i];
        addr[n++] = all[i]->data;
    }
    addr[n++] = sc_ctx_alloc(ctx, 100);
    sc_ctx_reset(ctx);
    return n;
}

Test(autograd, same_addresses_after_reset)
{
    sc_tensor *p[] = {param("w1", 2, (int64_t[]){128, 784}), param("b1", 1, (int64_t[]){128}),
                      param("w2", 2, (int64_t[]){10, 128}), param("b2", 1, (int64_t[]){10})};
    int64_t n = 256;
    sc_tensor *target = sc_tensor_alloc(SC_U8, 1, &n);
    cr_assert_not_null(target);
    void *first[32], *second[32], *third[32];
    int k1 = step_addresses(p, target, first);
    cr_assert_gt(sc_ctx_arena_peak(ctx), (size_t)1 << 20, "the step outgrows one block");
    int k2 = step_addresses(p, target, second);
    int k3 = step_addresses(p, target, third);
    cr_assert(k1 == k2 && k2 == k3);
    for (int i = 0; i < k2; i++) {
        cr_assert_eq(first[i], second[i], "address %d moved between steps 1 and 2", i);
        cr_assert_eq(second[i], third[i], "address %d moved between steps 2 and 3", i);
    }
    cr_assert_eq(sc_ctx_arena_used(ctx), 0);
    sc_tensor_free(target);
}

/* loss = sum(x * k^depth), k = 1.01, a product at a time over x [4096]:
 * backward needs a few gradients of 16 KB at a time, not one per op, and
 * keeps those of x and of the retained intermediate. */
Test(autograd, backward_reuses_the_gradients_it_is_done_with)
{
    enum { DEPTH = 64, N = 4096, RETAINED = 40 };
    int64_t n = N;
    sc_tensor *x = sc_tensor_new(ctx, SC_F32, 1, &n), *k = sc_tensor_new(ctx, SC_F32, 1, &n);
    cr_assert(x && k);
    for (int i = 0; i < N; i++) {
        sc_tensor_f32(x)[i] = 1.0f;
        sc_tensor_f32(k)[i] = 1.01f;
    }
    x->flags |= SC_TENSOR_REQUIRES_GRAD;
    sc_tensor *h[DEPTH + 1] = {x};
    for (int d = 1; d <= DEPTH; d++)
        h[d] = sc_mul(ctx, h[d - 1], k);
    h[RETAINED]->flags |= SC_TENSOR_RETAIN_GRAD;
    sc_tensor *loss = sc_sum(ctx, h[DEPTH]);
    size_t before = sc_ctx_arena_used(ctx);
    backward_ok(loss);
    size_t grown = sc_ctx_arena_used(ctx) - before, buffer = N * sizeof(float);
    cr_assert_lt(grown, 8 * buffer, "backward took %zu bytes for %d products", grown, DEPTH);
    for (int d = 1; d <= DEPTH; d++)
        cr_assert_eq(h[d]->grad != NULL, d == RETAINED, "h[%d]", d);
    for (int i = 0; i < N; i++) {
        cr_assert_float_eq(sc_tensor_f32(x->grad)[i], powf(1.01f, DEPTH), 1e-4f);
        cr_assert_float_eq(sc_tensor_f32(h[RETAINED]->grad)[i], powf(1.01f, DEPTH - RETAINED),
                           1e-4f);
    }
}

/* A 3x3 convolution of 64 channels on [2, 64, 16, 16], by Winograd,
 * whose passes take scratch for the transformed weights and every
 * thread's tiles and weight gradient (36 planes of 64 x 64 each): forward
 * grows the step arena by y alone, backward by the gradients of y and x
 * (the weight's is the store's), none of them by the scratch. */
Test(autograd, a_kernels_scratch_is_free_again)
{
    int64_t shape[] = {2, 64, 16, 16};
    sc_tensor *w = param("w", 4, (int64_t[]){64, 64, 3, 3});
    sc_tensor *x = sc_tensor_new(ctx, SC_F32, 4, shape);
    cr_assert_not_null(x);
    memset(x->data, 0, sc_tensor_nbytes(x));
    x->flags |= SC_TENSOR_REQUIRES_GRAD;
    sc_conv2d_opts same = {.stride = {1, 1}, .padding = {1, 1}, .dilation = {1, 1}, .groups = 1};
    size_t start = sc_ctx_arena_used(ctx), slack = 4096;
    sc_tensor *y = sc_conv2d(ctx, x, w, NULL, &same);
    cr_assert_not_null(y, "%s", sc_error_message());
    size_t grown = sc_ctx_arena_used(ctx) - start;
    cr_assert_lt(grown, sc_tensor_nbytes(y) + slack, "forward kept %zu bytes", grown);
    sc_tensor *loss = sc_sum(ctx, y);
    size_t before = sc_ctx_arena_used(ctx);
    backward_ok(loss);
    grown = sc_ctx_arena_used(ctx) - before;
    cr_assert_lt(grown, 2 * sc_tensor_nbytes(x) + slack, "backward kept %zu bytes", grown);
}

/* Rewinding to a mark, also from a later block and on an empty arena,
 * hands the same addresses out again. */
Test(autograd, an_arena_rewinds_to_its_mark)
{
    sc_arena arena;
    sc_arena_init(&arena, (sc_device){SC_DEVICE_CPU, 0});
    sc_arena_mark empty = sc_arena_mark_now(&arena);
    void *first = sc_arena_alloc(&arena, 100);
    sc_arena_mark mark = sc_arena_mark_now(&arena);
    void *small = sc_arena_alloc(&arena, 1000), *big = sc_arena_alloc(&arena, 3 << 20);
    cr_assert(first && small && big);
    size_t capacity = arena.capacity;
    sc_arena_rewind(&arena, mark);
    cr_assert_eq(arena.used, mark.used);
    cr_assert_eq(sc_arena_alloc(&arena, 1000), small);
    cr_assert_eq(sc_arena_alloc(&arena, 3 << 20), big);
    cr_assert_eq(arena.capacity, capacity, "no new block");
    sc_arena_rewind(&arena, empty);
    cr_assert_eq(arena.used, 0);
    cr_assert_eq(sc_arena_alloc(&arena, 100), first);
    sc_arena_release(&arena);
}

/* ---------------------------------------------------------------------
 * Gradients written fresh (sc_kernel.writes_grads): the first consumer of
 * a step tensor gets its gradient uninitialised and writes it. */

typedef struct fresh_case {
    const char *name;
    sc_op_id op;
    int ndim;
    int64_t shape[4];                /* of the step tensor h */
    sc_tensor *(*apply)(sc_tensor *h); /* op(h, the case's parameters) */
} fresh_case;

static sc_tensor *fresh_params[4];

static sc_tensor *apply_relu(sc_tensor *h) { return sc_relu(ctx, h); }

static sc_tensor *apply_linear(sc_tensor *h)
{
    return sc_linear(ctx, h, fresh_params[0], fresh_params[1]);
}

static sc_tensor *apply_batch_norm(sc_tensor *h)
{
    return sc_batch_norm(ctx, h, fresh_params[0], fresh_params[1], fresh_params[2],
                         fresh_params[3], 0.1f, 1e-5f);
}

/* 2x2 windows over 5x5: the last row and column are in no window */
static sc_tensor *apply_max_pool(sc_tensor *h)
{
    return sc_max_pool2d(ctx, h, &(sc_pool2d_opts){.kernel = {2, 2}});
}

static sc_tensor *apply_reshape(sc_tensor *h)
{
    return sc_reshape(ctx, h, 2, (int64_t[]){6, 4});
}

static sc_tensor *apply_conv_winograd(sc_tensor *h)
{
    return sc_conv2d(ctx, h, fresh_params[0], NULL, &(sc_conv2d_opts){.padding = {1, 1}});
}

static sc_tensor *apply_conv_im2col(sc_tensor *h)
{
    return sc_conv2d(ctx, h, fresh_params[0], fresh_params[1],
                     &(sc_conv2d_opts){.stride = {2, 2}});
}

/* h + p and p - h, p [2, 3, 4] like h; h [4] * p, h broadcast. */
static sc_tensor *apply_add(sc_tensor *h) { return sc_add(ctx, h, fresh_params[0]); }

static sc_tensor *apply_sub(sc_tensor *h) { return sc_sub(ctx, fresh_params[0], h); }

static sc_tensor *apply_mul_broadcast(sc_tensor *h) { return sc_mul(ctx, h, fresh_params[0]); }

/* Parameter `k` of case i, named p<i>.<k>. */
static sc_tensor *case_param(size_t i, int k, int ndim, const int64_t *shape)
{
    char name[16];
    snprintf(name, sizeof name, "p%zu.%d", i, k);
    return param(name, ndim, shape);
}

/* The parameters of case i besides h: fresh_params. */
static void fresh_case_params(const fresh_case *c, size_t i)
{
    int64_t ch = c->shape[1], oc = ch == 8 ? 8 : 4;
    switch (c->op) {
    case SC_OP_LINEAR:
        fresh_params[0] = case_param(i, 0, 2, (int64_t[]){3, c->shape[1]});
        fresh_params[1] = case_param(i, 1, 1, (int64_t[]){3});
        break;
    case SC_OP_BATCH_NORM:
        fresh_params[0] = case_param(i, 0, 1, &ch);
        fresh_params[1] = case_param(i, 1, 1, &ch);
        fresh_params[2] = sc_params_add_buffer(ps, "running_mean", 1, &ch);
        fresh_params[3] = sc_params_add_buffer(ps, "running_var", 1, &ch);
        cr_assert(fresh_params[2] && fresh_params[3], "%s", sc_error_message());
        break;
    case SC_OP_CONV2D:
        fresh_params[0] = case_param(i, 0, 4, (int64_t[]){oc, ch, 3, 3});
        fresh_params[1] = case_param(i, 1, 1, &oc);
        break;
    case SC_OP_ADD:
    case SC_OP_SUB:
    case SC_OP_MUL: fresh_params[0] = case_param(i, 0, 3, (int64_t[]){2, 3, 4}); break;
    default: break;
    }
}

/* w's gradient (into grad) for loss = sum over `consumers` applications of
 * the case's op of sum(r * op(h)), h = w * 1 a step tensor, r fixed. The
 * arena is filled with NaN first, so that an element a kernel leaves
 * unwritten shows. */
static void fresh_grad(const fresh_case *c, sc_tensor *w, int consumers, float *grad)
{
    sc_ctx_reset(ctx);
    size_t poison = (size_t)1 << 20;
    float *junk = sc_ctx_alloc(ctx, poison);
    cr_assert_not_null(junk);
    for (size_t i = 0; i < poison / sizeof *junk; i++)
        junk[i] = NAN;
    sc_ctx_reset(ctx);
    sc_params_zero_grad(ps);
    sc_tensor *h = sc_scale(ctx, w, 1.0f), *loss = NULL;
    for (int k = 0; k < consumers; k++) {
        sc_tensor *y = c->apply(h);
        cr_assert_not_null(y, "%s: %s", c->name, sc_error_message());
        sc_tensor *r = sc_tensor_new(ctx, SC_F32, y->ndim, y->shape);
        for (int64_t i = 0; i < r->numel; i++)
            sc_tensor_f32(r)[i] = (float)(i % 7) - 3.0f;
        sc_tensor *term = sc_sum(ctx, sc_mul(ctx, y, r));
        loss = loss ? sc_add(ctx, loss, term) : term;
    }
    backward_ok(loss);
    memcpy(grad, w->grad->data, sc_tensor_nbytes(w->grad));
}

/* With one consumer the op writes h's gradient; with two, the later one
 * writes it and the earlier adds to it: twice the first (to rounding:
 * col2im adds several terms to each element, in another order then). */
Test(autograd, kernels_write_fresh_gradients_whole)
{
    static const fresh_case cases[] = {
        {"relu", SC_OP_RELU, 1, {37}, apply_relu},
        {"linear", SC_OP_LINEAR, 2, {4, 6}, apply_linear},
        {"batch_norm", SC_OP_BATCH_NORM, 4, {2, 3, 4, 4}, apply_batch_norm},
        {"max_pool2d", SC_OP_MAX_POOL2D, 4, {2, 3, 5, 5}, apply_max_pool},
        {"reshape", SC_OP_RESHAPE, 3, {2, 3, 4}, apply_reshape},
        {"conv2d winograd", SC_OP_CONV2D, 4, {2, 8, 6, 6}, apply_conv_winograd},
        {"conv2d im2col", SC_OP_CONV2D, 4, {2, 3, 7, 7}, apply_conv_im2col},
        {"add", SC_OP_ADD, 3, {2, 3, 4}, apply_add},
        {"sub, h second", SC_OP_SUB, 3, {2, 3, 4}, apply_sub},
        {"mul, h broadcast", SC_OP_MUL, 1, {4}, apply_mul_broadcast},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const fresh_case *c = &cases[i];
        cr_assert(sc_backend_kernel(SC_DEVICE_CPU, c->op)->writes_grads & 1u << (c->op == SC_OP_SUB),
                  "%s no longer writes its input's gradient", c->name);
        sc_tensor *w = case_param(i, -1, c->ndim, c->shape);
        fresh_case_params(c, i);
        float once[2 * 8 * 6 * 6], twice[2 * 8 * 6 * 6];
        cr_assert_leq(w->numel, (int64_t)(sizeof once / sizeof once[0]));
        fresh_grad(c, w, 1, once);
        fresh_grad(c, w, 2, twice);
        bool some = false;
        for (int64_t k = 0; k < w->numel; k++) {
            cr_assert(isfinite(once[k]), "%s: element %lld of h's gradient unwritten", c->name,
                      (long long)k);
            cr_assert_float_eq(twice[k], 2.0f * once[k], 1e-5f * (1.0f + fabsf(once[k])),
                               "%s: element %lld: %.9g, twice %.9g", c->name, (long long)k,
                               (double)once[k], (double)twice[k]);
            some = some || once[k] != 0.0f;
        }
        cr_assert(some, "%s: h's gradient is all zero", c->name);
    }
}

/* One step of loss = sum(r * f(a, b)), f sc_add_relu fused or relu of
 * sc_add, on step tensors equal to a and b (whose gradients f writes
 * fresh): f's values then the gradients of a and b, in out [64]; returns
 * their count. */
static int64_t add_relu_step(bool fused, sc_tensor *a, sc_tensor *b, float *out)
{
    sc_params_zero_grad(ps);
    sc_tensor *sa = sc_scale(ctx, a, 1.0f), *sb = sc_scale(ctx, b, 1.0f);
    sc_tensor *y = fused ? sc_add_relu(ctx, sa, sb) : sc_relu(ctx, sc_add(ctx, sa, sb));
    cr_assert_not_null(y, "%s", sc_error_message());
    sc_tensor *r = sc_tensor_new(ctx, SC_F32, y->ndim, y->shape);
    for (int64_t i = 0; i < r->numel; i++)
        sc_tensor_f32(r)[i] = (float)(i % 7) - 3.0f;
    backward_ok(sc_sum(ctx, sc_mul(ctx, y, r)));
    int64_t n = y->numel + a->numel + b->numel;
    cr_assert_leq(n, 64);
    memcpy(out, y->data, sc_tensor_nbytes(y));
    memcpy(out + y->numel, a->grad->data, sc_tensor_nbytes(a));
    memcpy(out + y->numel + a->numel, b->grad->data, sc_tensor_nbytes(b));
    sc_ctx_reset(ctx);
    return n;
}

/* sc_add_relu is relu(a + b) to the bit, values and gradients, whichever
 * operand broadcasts; its relu blocks about half of the sums. */
Test(autograd, add_relu_is_relu_of_add)
{
    static const struct {
        int na; int64_t a[3]; int nb; int64_t b[3];
    } pairs[] = {
        {2, {3, 5}, 2, {3, 5}}, {2, {4, 3}, 1, {3}}, {2, {1, 5}, 2, {3, 1}},
        {3, {2, 3, 4}, 3, {2, 1, 4}}, {0, {0}, 2, {3, 5}},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        sc_tensor *a = test_param(pairs[i].na, pairs[i].a), *b = test_param(pairs[i].nb, pairs[i].b);
        float fused[64], apart[64];
        int64_t n = add_relu_step(true, a, b, fused);
        add_relu_step(false, a, b, apart);
        cr_assert(memcmp(fused, apart, (size_t)n * sizeof *fused) == 0, "pair %zu differs", i);
    }
}

/* Prints which ops each backend has kernels for; the CPU must have all. */
Test(autograd, kernel_coverage)
{
    for (int kind = 0; kind < SC_DEVICE_KIND_COUNT; kind++) {
        int fwd = 0, bwd = 0;
        printf("%-5s %-14s forward backward\n", sc_device_kind_name(kind), "op");
        for (int op = 0; op < SC_OP_COUNT; op++) {
            const sc_kernel *k = sc_backend_kernel(kind, op);
            bool f = k && k->forward, b = k && k->backward;
            fwd += f;
            bwd += b;
            printf("%-5s %-14s %-7s %s\n", "", sc_op_desc_get(op)->name, f ? "yes" : "-",
                   b ? "yes" : "-");
            if (kind == SC_DEVICE_CPU)
                cr_expect(f && b, "cpu lacks a kernel for %s", sc_op_desc_get(op)->name);
        }
        printf("%-5s %d/%d forward, %d/%d backward\n\n", sc_device_kind_name(kind), fwd,
               SC_OP_COUNT, bwd, SC_OP_COUNT);
    }
    for (int op = 0; op < SC_OP_COUNT; op++) {
        const sc_op_desc *d = sc_op_desc_get(op);
        cr_assert(d && d->name && d->infer, "op %d has no descriptor", op);
        cr_assert(d->min_inputs >= 1 && d->min_inputs <= d->max_inputs &&
                  d->max_inputs <= SC_OP_MAX_INPUTS, "%s: bad arity", d->name);
    }
}
