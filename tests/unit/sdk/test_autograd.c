/* The eager tape: accumulation, shared parameters, the grad-ready signal,
 * grad mode, stable arena addresses across steps, and kernel coverage of
 * the op registry per backend. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "context_impl.h"
#include "gradcheck.h"
#include "op_fixture.h"
#include "op.h"
#include "scorch/scorch.h"


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
 * every tensor and gradient it makes. */
static int step_addresses(sc_tensor *const *p, const sc_tensor *target, void **addr)
{
    sc_tensor *x = sc_tensor_new(ctx, SC_F32, 2, (int64_t[]){256, 784});
    cr_assert_not_null(x);
    memset(x->data, 0, sc_tensor_nbytes(x));
    sc_tensor *h1 = sc_linear(ctx, x, p[0], p[1]);
    sc_tensor *h2 = sc_dropout(ctx, sc_relu(ctx, h1), 0.1f);
    sc_tensor *z = sc_linear(ctx, h2, p[2], p[3]);
    sc_tensor *loss = sc_cross_entropy(ctx, z, (sc_tensor *)target, 0.0f);
    backward_ok(loss);
    sc_tensor *all[] = {x, h1, h2, z, loss, h1->grad, h2->grad, z->grad, loss->grad};
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
    for (int i = 0; i < k2; i++)
        cr_assert_eq(second[i], third[i], "address %d moved between steps 2 and 3", i);
    cr_assert_eq(sc_ctx_arena_used(ctx), 0);
    sc_tensor_free(target);
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
