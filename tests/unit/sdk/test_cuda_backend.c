/* test_cuda_backend.c — the CUDA backend's own rules, on two emulated GPUs
 * (tests/cudaemu) whose streams run lazily: meson runs it with
 * CUDAEMU_DEVICES=2, CUDAEMU_LAZY=1 and a few CUDAEMU_SEED values, so
 * queued work runs in an order that honours only streams and events, and
 * the emulator says which GPUs have a CUDA context (cudaemu_context_mask).
 *
 *   - Asking about GPUs makes no context on any, and free memory comes
 *     from NVML, per GPU.
 *   - The calls that name a GPU (allocate, zero, copy, free, device info)
 *     leave the calling thread's current device as it was: the kernels
 *     it queues go there.
 *   - A copy from one GPU to another comes after the kernels queued on
 *     the source GPU, not only those of the destination.
 *   - Every optimizer's kernels, with per-parameter options, update the
 *     parameters and state as the CPU loops do.
 *
 * Suite cuda_fault runs alone, with CUDAEMU_FAULT=unary_forward_kernel:
 * the first such kernel faults as an illegal address does, which CUDA
 * reports at the next synchronising call and at every call after it
 * (a sticky error). The calls that report it are not its cause, and the
 * messages must say so. */
#include <criterion/criterion.h>
#include <cuda_runtime.h>
#include <math.h>
#include <string.h>

#include "device_impl.h"
#include "scorch/scorch.h"
#include "scorch_host/optim.h"
#include "scorch_host/params.h"

enum { N = 4096 };

static const sc_device gpu[2] = {{SC_DEVICE_CUDA, 0}, {SC_DEVICE_CUDA, 1}};

static int current_device(void)
{
    int index = -1;
    cr_assert_eq(cudaGetDevice(&index), cudaSuccess);
    return index;
}

static sc_device_info info_of(int index)
{
    sc_device_info info;
    cr_assert_eq(sc_cuda_device_info(index, &info), SC_OK, "%s", sc_error_message());
    return info;
}

/* An f32 tensor of N elements on `device`. */
static sc_tensor tensor_on(sc_device device)
{
    sc_tensor t;
    cr_assert_eq(sc_tensor_init(&t, SC_F32, 1, (const int64_t[]){N}), SC_OK);
    t.device = device;
    t.data = sc_device_alloc(device, N * sizeof(float));
    cr_assert_not_null(t.data, "%s", sc_error_message());
    return t;
}

static void free_tensor(sc_tensor *t) { sc_device_free(t->device, t->data, N * sizeof(float)); }

Test(cuda_backend, asking_about_gpus_makes_no_context)
{
    cr_assert_eq(sc_cuda_device_count(), 2);
    for (int i = 0; i < 2; i++) {
        sc_device_info info = info_of(i);
        cr_expect_gt(info.free_bytes, 0, "cuda:%d: no free memory (NVML)", i);
        cr_expect_geq(info.total_bytes, info.free_bytes);
    }
    cr_expect_eq(cudaemu_context_mask(), 0u, "contexts %#x", cudaemu_context_mask());
}

/* NVML finds each CUDA device's own memory: what cuda:1 holds shows on
 * cuda:1 alone. */
Test(cuda_backend, free_memory_is_each_gpus_own)
{
    size_t free0 = info_of(0).free_bytes, free1 = info_of(1).free_bytes;
    size_t bytes = (size_t)64 << 20;
    void *p = sc_device_alloc(gpu[1], bytes);
    cr_assert_not_null(p, "%s", sc_error_message());
    cr_expect_eq(info_of(0).free_bytes, free0);
    cr_expect_leq(info_of(1).free_bytes + bytes, free1, "cuda:1: %zu then %zu bytes free",
                  free1, info_of(1).free_bytes);
    sc_device_free(gpu[1], p, bytes);
}

Test(cuda_backend, calls_naming_another_gpu_keep_the_current_device)
{
    sc_ctx *ctx = sc_ctx_new(gpu[1]);
    cr_assert_not_null(ctx, "%s", sc_error_message());
    cr_assert_eq(current_device(), 1);
    sc_tensor t = tensor_on(gpu[0]);
    cr_expect_eq(current_device(), 1, "after allocating on cuda:0");
    cr_assert_eq(sc_device_zero(gpu[0], t.data, N * sizeof(float)), SC_OK);
    cr_expect_eq(current_device(), 1, "after zeroing on cuda:0");
    sc_tensor *host = sc_tensor_alloc(SC_F32, 1, (const int64_t[]){N});
    cr_assert_eq(sc_tensor_copy(host, &t), SC_OK, "%s", sc_error_message());
    cr_expect_eq(current_device(), 1, "after copying from cuda:0");
    info_of(0);
    cr_expect_eq(current_device(), 1, "after asking about cuda:0");
    free_tensor(&t);
    cr_expect_eq(current_device(), 1, "after freeing on cuda:0");
    sc_tensor_free(host);
    sc_ctx_free(ctx);
}

/* Each round fills a on cuda:0 (a kernel, queued), copies it to b on
 * cuda:1 and b to the host: a copy that waited only for cuda:1's stream
 * would read a before the fill, in some order of the lazy streams. */
Test(cuda_backend, a_copy_between_gpus_follows_the_kernels_of_its_source)
{
    sc_tensor a = tensor_on(gpu[0]), b = tensor_on(gpu[1]);
    sc_tensor *host = sc_tensor_alloc(SC_F32, 1, (const int64_t[]){N});
    for (int round = 1; round <= 16; round++) {
        cr_assert_eq(sc_device_fill_f32(gpu[0], a.data, (float)round, N), SC_OK);
        cr_assert_eq(sc_tensor_copy(&b, &a), SC_OK, "%s", sc_error_message());
        cr_assert_eq(sc_tensor_copy(host, &b), SC_OK, "%s", sc_error_message());
        const float *x = sc_tensor_f32(host);
        for (int i = 0; i < N; i++)
            cr_assert_eq(x[i], (float)round, "round %d: element %d is %g", round, i, x[i]);
    }
    sc_tensor_free(host);
    free_tensor(&a);
    free_tensor(&b);
}

/* The calling thread's last error is the sticky one, noticed at `noticed_at`. */
static void expect_sticky_message(const char *noticed_at)
{
    const char *m = sc_error_message();
    cr_expect_eq(sc_error_code(), SC_ERR_STATE, "%s", m);
    cr_expect(strstr(m, "CUDA: cuda:0 failed in earlier asynchronous work: "), "%s", m);
    cr_expect(strstr(m, noticed_at), "'%s' lacks '%s'", m, noticed_at);
    cr_expect(!strstr(m, "cannot launch"), "a launch is blamed: %s", m);
}

Test(cuda_fault, a_sticky_error_is_the_gpus_not_the_calls_that_meet_it)
{
    sc_ctx *ctx = sc_ctx_new(gpu[0]);
    cr_assert_not_null(ctx, "%s", sc_error_message());
    sc_tensor *x = sc_tensor_zeros(ctx, SC_F32, 1, (const int64_t[]){N});
    cr_assert_not_null(sc_relu(ctx, x), "the faulting kernel is queued: %s", sc_error_message());
    cr_assert_neq(sc_ctx_synchronize(ctx), SC_OK);
    expect_sticky_message("Noticed at cudaStreamSynchronize");
    cr_assert_null(sc_relu(ctx, x));
    expect_sticky_message("Noticed at the launch of unary_forward_kernel");
}

/* The optimizers on a GPU against the CPU: a store of three parameters
 * (the second with its own lr scale and no weight decay, as a param group;
 * the third large enough for LAMB's norms to take several blocks), the
 * same gradients for 3 steps, then every parameter and state buffer
 * alike within 1e-5. */
enum { OPTIM_PARAMS = 3, OPTIM_STEPS = 3 };

static sc_params *optim_store(void)
{
    static const char *const names[OPTIM_PARAMS] = {"p0", "p1", "p2"};
    static const int64_t sizes[OPTIM_PARAMS] = {300, 77, 3 * N};
    sc_params *ps = sc_params_new();
    cr_assert_not_null(ps);
    for (int i = 0; i < OPTIM_PARAMS; i++)
        cr_assert_not_null(sc_params_add(ps, names[i], 1, &sizes[i]));
    float *p = sc_params_values(ps);
    for (int64_t i = 0; i < sc_params_numel(ps); i++)
        p[i] = sinf((float)i * 0.37f);
    return ps;
}

/* A 1-D f32 tensor over n floats at data, on device. */
static sc_tensor flat_view(void *data, int64_t n, sc_device device)
{
    sc_tensor t;
    cr_assert_eq(sc_tensor_init(&t, SC_F32, 1, &n), SC_OK);
    t.data = data;
    t.device = device;
    return t;
}

/* A host copy of t, for the caller to free. */
static sc_tensor *host_copy(const sc_tensor *t)
{
    sc_tensor *h = sc_tensor_alloc(SC_F32, 1, &t->numel);
    cr_assert_eq(sc_tensor_copy(h, t), SC_OK, "%s", sc_error_message());
    return h;
}

/* 3 steps of config on a fresh store on device; returns its optimizer. */
static sc_optim *optim_run(const sc_optim_config *config, sc_device device, sc_params **out)
{
    sc_params *ps = optim_store();
    cr_assert_eq(sc_params_to_device(ps, device), SC_OK, "%s", sc_error_message());
    sc_optim *opt = sc_optim_new(ps, config);
    cr_assert_not_null(opt, "%s", sc_error_message());
    cr_assert_eq(sc_optim_set_param(opt, sc_params_at(ps, 1), 0.5, 0.0), SC_OK);
    int64_t n = sc_params_numel(ps);
    sc_tensor *g = sc_tensor_alloc(SC_F32, 1, &n);
    for (int s = 0; s < OPTIM_STEPS; s++) {
        for (int64_t i = 0; i < n; i++)
            sc_tensor_f32(g)[i] = cosf((float)i * 0.11f + (float)s) * 0.1f * (float)(s + 1);
        sc_tensor grads = flat_view(sc_params_grads(ps), n, device);
        cr_assert_eq(sc_tensor_copy(&grads, g), SC_OK, "%s", sc_error_message());
        cr_assert_eq(sc_optim_step(opt, 0.01), SC_OK, "%s", sc_error_message());
    }
    sc_tensor_free(g);
    *out = ps;
    return opt;
}

static void assert_tensors_close(const sc_tensor *got, const sc_tensor *want, const char *what)
{
    sc_tensor *a = host_copy(got), *b = host_copy(want);
    const float *x = sc_tensor_f32(a), *y = sc_tensor_f32(b);
    for (int64_t i = 0; i < a->numel; i++)
        cr_assert(fabsf(x[i] - y[i]) <= 1e-5f * fabsf(y[i]) + 1e-6f,
                  "%s[%lld]: gpu %.9g, cpu %.9g", what, (long long)i, x[i], y[i]);
    sc_tensor_free(a);
    sc_tensor_free(b);
}

static void check_optim_on_gpu(sc_optim_config config)
{
    const sc_device cpu = {SC_DEVICE_CPU, 0};
    sc_params *on_cpu, *on_gpu;
    sc_optim *ref = optim_run(&config, cpu, &on_cpu), *opt = optim_run(&config, gpu[0], &on_gpu);
    int64_t n = sc_params_numel(on_cpu);
    sc_tensor want = flat_view(sc_params_values(on_cpu), n, cpu);
    sc_tensor got = flat_view(sc_params_values(on_gpu), n, gpu[0]);
    assert_tensors_close(&got, &want, sc_optim_kind_name(config.kind));
    cr_assert_eq(sc_optim_state_count(opt), sc_optim_state_count(ref));
    for (int i = 0; i < sc_optim_state_count(ref); i++)
        assert_tensors_close(sc_optim_state_at(opt, i), sc_optim_state_at(ref, i),
                             sc_optim_state_at(ref, i)->name);
    sc_optim_free(opt);
    sc_optim_free(ref);
    sc_params_free(on_gpu);
    sc_params_free(on_cpu);
}

Test(cuda_backend, optimizers_with_param_options_match_the_cpu)
{
    sc_optim_config c = sc_optim_defaults(SC_OPTIM_SGD);
    c.momentum = 0.9;
    c.weight_decay = 0.1;
    check_optim_on_gpu(c);
    c = sc_optim_defaults(SC_OPTIM_ADAMW);
    check_optim_on_gpu(c);
}

Test(cuda_backend, rmsprop_matches_the_cpu)
{
    sc_optim_config c = sc_optim_defaults(SC_OPTIM_RMSPROP);
    c.weight_decay = 0.1;
    check_optim_on_gpu(c);
    c.momentum = 0.9;
    c.centered = true;
    check_optim_on_gpu(c);
    c.momentum = 0.0;
    check_optim_on_gpu(c);
}

Test(cuda_backend, lamb_matches_the_cpu)
{
    check_optim_on_gpu(sc_optim_defaults(SC_OPTIM_LAMB));
}

Test(cuda_backend, lion_matches_the_cpu)
{
    sc_optim_config c = sc_optim_defaults(SC_OPTIM_LION);
    c.weight_decay = 0.1;
    check_optim_on_gpu(c);
}
