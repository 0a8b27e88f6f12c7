/* Forward and backward time of each layer of the `cnn` model (conv3x3
 * 1->32, batch norm, relu, max pool 2; conv3x3 32->64, batch norm, relu,
 * max pool 2; linear 3136->128, relu; linear 128->10; cross-entropy; the
 * convolutions without bias, as batch norm follows them) at
 * batch 128, and of the whole forward + backward step: medians of several
 * runs, in milliseconds. Backward is timed by calling the layer's kernel
 * on its tape node, so each figure is that kernel alone. The model runs
 * each stage's batch norm, relu and max pool as one op
 * (sc_batch_norm_max_pool2d, the "fused" rows); the separate ops, marked
 * "apart", are there to compare with PyTorch's, and are left out of the
 * sum and the step.
 *
 *     bench_ops [threads] [--cpu-time]      (default 2 threads)
 *
 * --cpu-time times with the thread's CPU clock instead of the wall clock
 * (meaningful on one thread; steadier on a shared machine). PyTorch's
 * side of the table: tests/bench/bench_ops_torch.py. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "context_impl.h"
#include "op.h"
#include "scorch/scorch.h"
#include "scorch_host/params.h"

enum { BATCH = 128, WARMUP = 3, RUNS = 15 };

static sc_ctx *ctx;
static sc_params *ps;
static sc_rng rng;
static sc_tensor *conv1_w, *conv2_w, *fc1_w, *fc1_b, *fc2_w, *fc2_b;
static sc_tensor *bn1[4], *bn2[4]; /* weight, bias, running mean, running variance */

static clockid_t clock_id = CLOCK_MONOTONIC;

static double now(void)
{
    struct timespec ts;
    clock_gettime(clock_id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int compare(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, compare);
    return v[n / 2];
}

static void fill_uniform(sc_tensor *t, float lo, float hi)
{
    for (int64_t i = 0; i < t->numel; i++)
        sc_tensor_f32(t)[i] = lo + (hi - lo) * sc_rng_uniform(&rng);
}

static sc_tensor *weight(const char *name, int ndim, const int64_t *shape, float scale)
{
    sc_tensor *t = sc_params_add(ps, name, ndim, shape);
    if (t)
        fill_uniform(t, -scale, scale);
    return t;
}

static bool make_bn(const char *name, int64_t c, sc_tensor **bn)
{
    char n[64];
    snprintf(n, sizeof n, "%s.weight", name);
    bn[0] = sc_params_add(ps, n, 1, &c);
    snprintf(n, sizeof n, "%s.bias", name);
    bn[1] = sc_params_add(ps, n, 1, &c);
    snprintf(n, sizeof n, "%s.running_mean", name);
    bn[2] = sc_params_add_buffer(ps, n, 1, &c);
    snprintf(n, sizeof n, "%s.running_var", name);
    bn[3] = sc_params_add_buffer(ps, n, 1, &c);
    for (int64_t i = 0; bn[0] && bn[3] && i < c; i++)
        sc_tensor_f32(bn[0])[i] = sc_tensor_f32(bn[3])[i] = 1.0f;
    return bn[0] && bn[1] && bn[2] && bn[3];
}

static bool make_params(void)
{
    conv1_w = weight("conv1.weight", 4, (int64_t[]){32, 1, 3, 3}, 0.3f);
    conv2_w = weight("conv2.weight", 4, (int64_t[]){64, 32, 3, 3}, 0.06f);
    fc1_w = weight("fc1.weight", 2, (int64_t[]){128, 3136}, 0.02f);
    fc1_b = weight("fc1.bias", 1, (int64_t[]){128}, 0.1f);
    fc2_w = weight("fc2.weight", 2, (int64_t[]){10, 128}, 0.1f);
    fc2_b = weight("fc2.bias", 1, (int64_t[]){10}, 0.1f);
    return conv1_w && conv2_w && fc1_w && fc1_b && fc2_w && fc2_b &&
           make_bn("bn1", 32, bn1) && make_bn("bn2", 64, bn2);
}

/* ---------------------------------------------------------------------
 * The layers, each from its input. */

static const sc_conv2d_opts pad1 = {.padding = {1, 1}};
static const sc_pool2d_opts pool2 = {.kernel = {2, 2}};

static sc_tensor *conv1(sc_tensor *x) { return sc_conv2d(ctx, x, conv1_w, NULL, &pad1); }
static sc_tensor *conv2(sc_tensor *x) { return sc_conv2d(ctx, x, conv2_w, NULL, &pad1); }
static sc_tensor *norm1(sc_tensor *x)
{
    return sc_batch_norm(ctx, x, bn1[0], bn1[1], bn1[2], bn1[3], 0.1f, 1e-5f);
}
static sc_tensor *norm2(sc_tensor *x)
{
    return sc_batch_norm(ctx, x, bn2[0], bn2[1], bn2[2], bn2[3], 0.1f, 1e-5f);
}
static sc_tensor *stage1(sc_tensor *x)
{
    return sc_batch_norm_max_pool2d(ctx, (sc_tensor *[]){x, bn1[0], bn1[1], bn1[2], bn1[3]},
                                    0.1f, 1e-5f, true, &pool2);
}
static sc_tensor *stage2(sc_tensor *x)
{
    return sc_batch_norm_max_pool2d(ctx, (sc_tensor *[]){x, bn2[0], bn2[1], bn2[2], bn2[3]},
                                    0.1f, 1e-5f, true, &pool2);
}
static sc_tensor *relu(sc_tensor *x) { return sc_relu(ctx, x); }
static sc_tensor *pool(sc_tensor *x) { return sc_max_pool2d(ctx, x, &pool2); }
static sc_tensor *fc1(sc_tensor *x) { return sc_linear(ctx, x, fc1_w, fc1_b); }
static sc_tensor *fc2(sc_tensor *x) { return sc_linear(ctx, x, fc2_w, fc2_b); }

typedef struct layer {
    const char *name;
    sc_tensor *(*fn)(sc_tensor *x);
    int64_t in[4]; /* input shape */
    int ndim;
    bool input_grad; /* false for the first layer */
    bool apart;      /* one of the ops the model runs fused, as the row after them */
} layer;

static const layer layers[] = {
    {"conv1 1->32 3x3", conv1, {BATCH, 1, 28, 28}, 4, false, false},
    {"batch_norm 32", norm1, {BATCH, 32, 28, 28}, 4, true, true},
    {"relu 32x28x28", relu, {BATCH, 32, 28, 28}, 4, true, true},
    {"max_pool 2", pool, {BATCH, 32, 28, 28}, 4, true, true},
    {"bn+relu+pool fused", stage1, {BATCH, 32, 28, 28}, 4, true, false},
    {"conv2 32->64 3x3", conv2, {BATCH, 32, 14, 14}, 4, true, false},
    {"batch_norm 64", norm2, {BATCH, 64, 14, 14}, 4, true, true},
    {"relu 64x14x14", relu, {BATCH, 64, 14, 14}, 4, true, true},
    {"max_pool 2", pool, {BATCH, 64, 14, 14}, 4, true, true},
    {"bn+relu+pool fused", stage2, {BATCH, 64, 14, 14}, 4, true, false},
    {"linear 3136->128", fc1, {BATCH, 3136}, 2, true, false},
    {"linear 128->10", fc2, {BATCH, 128}, 2, true, false},
};

/* Times forward (through the op) and backward (the kernel on the node,
 * into zeroed gradients made beforehand). */
static bool bench_layer(const layer *l, double *fwd_ms, double *bwd_ms)
{
    sc_tensor *x = sc_tensor_alloc(SC_F32, l->ndim, l->in);
    if (!x)
        return false;
    fill_uniform(x, -1.0f, 1.0f);
    if (l->input_grad)
        x->flags |= SC_TENSOR_REQUIRES_GRAD;
    double fwd[RUNS], bwd[RUNS];
    bool ok = true;
    for (int r = 0; ok && r < WARMUP + RUNS; r++) {
        double t0 = now();
        sc_tensor *y = l->fn(x);
        double t1 = now();
        sc_node *node = y ? sc_ctx_tape_node(ctx, y) : NULL;
        ok = node != NULL;
        if (!ok)
            break;
        sc_tensor *gin[SC_OP_MAX_INPUTS] = {0};
        sc_tensor *gy = sc_tensor_new(ctx, SC_F32, y->ndim, y->shape);
        for (int i = 0; ok && i < node->n_inputs; i++)
            if (node->in[i]->flags & SC_TENSOR_REQUIRES_GRAD)
                ok = (gin[i] = sc_tensor_zeros(ctx, SC_F32, node->in[i]->ndim,
                                               node->in[i]->shape)) != NULL;
        ok = ok && gy;
        for (int64_t i = 0; ok && i < gy->numel; i++)
            sc_tensor_f32(gy)[i] = (float)(i % 7) * 0.1f - 0.3f;
        double t2 = now();
        ok = ok && sc_backend_kernel(SC_DEVICE_CPU, node->op)->backward(node, gy, gin) == SC_OK;
        double t3 = now();
        if (r >= WARMUP) {
            fwd[r - WARMUP] = 1e3 * (t1 - t0);
            bwd[r - WARMUP] = 1e3 * (t3 - t2);
        }
        sc_ctx_reset(ctx);
    }
    sc_tensor_free(x);
    *fwd_ms = median(fwd, RUNS);
    *bwd_ms = median(bwd, RUNS);
    return ok;
}

/* The whole model: forward, cross-entropy, backward. */
static bool bench_step(double *ms)
{
    sc_tensor *x = sc_tensor_alloc(SC_F32, 4, (int64_t[]){BATCH, 1, 28, 28});
    sc_tensor *t = sc_tensor_alloc(SC_I32, 1, (int64_t[]){BATCH});
    if (!x || !t)
        return false;
    fill_uniform(x, -1.0f, 1.0f);
    for (int i = 0; i < BATCH; i++)
        ((int32_t *)t->data)[i] = i % 10;
    double v[RUNS];
    bool ok = true;
    for (int r = 0; ok && r < WARMUP + RUNS; r++) {
        double t0 = now();
        sc_tensor *h = x;
        for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++) {
            if (layers[i].apart)
                continue;
            if (layers[i].fn == fc1)
                h = sc_flatten(ctx, h);
            h = layers[i].fn(h);
            if (layers[i].fn == fc1)
                h = sc_relu(ctx, h);
        }
        sc_tensor *loss = sc_cross_entropy(ctx, h, t, 0.0f);
        ok = loss && sc_backward(ctx, loss, NULL, NULL) == SC_OK;
        sc_ctx_reset(ctx);
        sc_params_zero_grad(ps);
        if (r >= WARMUP)
            v[r - WARMUP] = 1e3 * (now() - t0);
    }
    sc_tensor_free(x);
    sc_tensor_free(t);
    *ms = median(v, RUNS);
    return ok;
}

int main(int argc, char **argv)
{
    int threads = 2;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--cpu-time") == 0)
            clock_id = CLOCK_THREAD_CPUTIME_ID;
        else
            threads = atoi(argv[i]);
    }
    sc_cpu_set_threads(threads);
    sc_rng_init(&rng, 1, 0);
    ctx = sc_ctx_new((sc_device){SC_DEVICE_CPU, 0});
    ps = sc_params_new();
    if (!ctx || !ps || !make_params()) {
        fprintf(stderr, "bench_ops: %s\n", sc_error_message());
        return 1;
    }
    printf("cnn layers, batch %d, %d threads, median of %d runs (ms)\n", BATCH, threads, RUNS);
    printf("%-20s %9s %9s\n", "layer", "forward", "backward");
    double total_f = 0, total_b = 0;
    for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++) {
        double f, b;
        if (!bench_layer(&layers[i], &f, &b)) {
            fprintf(stderr, "bench_ops: %s: %s\n", layers[i].name, sc_error_message());
            return 1;
        }
        printf("%-20s %9.3f %9.3f%s\n", layers[i].name, f, b, layers[i].apart ? "  (apart)" : "");
        total_f += layers[i].apart ? 0 : f;
        total_b += layers[i].apart ? 0 : b;
    }
    printf("%-20s %9.3f %9.3f\n", "sum (not apart)", total_f, total_b);
    double step;
    if (!bench_step(&step)) {
        fprintf(stderr, "bench_ops: step: %s\n", sc_error_message());
        return 1;
    }
    printf("forward + backward step: %.3f ms (%.0f samples/s)\n", step, BATCH / step * 1e3);
    sc_params_free(ps);
    sc_ctx_free(ctx);
    return 0;
}
