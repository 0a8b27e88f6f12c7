/* test_fences.c — what a pipelined step asks of libscorch
 * (scorch/device.h): fences, uploads on the copy stream that wait only for
 * their `after` fence, and copies on the compute stream that nobody waits
 * for. The refusals run everywhere; the rest needs a GPU. On the emulated
 * one meson runs the suite again with lazy streams, where each rule
 * broken shows as a wrong value: the emulator then runs queued work only
 * at synchronising calls, in a seeded order honouring only stream order
 * and events, and reads pinned memory when a copy runs. */
#include <criterion/criterion.h>
#include <string.h>

#include "scorch/scorch.h"
#include "scorch_host/context.h"
#include "scorch_host/device.h"

enum { N = 1000 };

static const sc_device cpu = {SC_DEVICE_CPU, 0}, gpu = {SC_DEVICE_CUDA, 0};

static sc_ctx *gpu_ctx(void)
{
    if (sc_cuda_device_count() == 0)
        cr_skip_test("no GPU (%s)", sc_cuda_built() ? "none visible" : "no CUDA backend");
    sc_ctx *ctx = sc_ctx_new(gpu);
    cr_assert_not_null(ctx, "%s", sc_error_message());
    return ctx;
}

/* A pinned host vector of N values from `first` up. */
static sc_tensor *pinned_ramp(float first)
{
    sc_tensor *t = sc_tensor_alloc_pinned(SC_F32, 1, (const int64_t[]){N});
    cr_assert_not_null(t);
    for (int i = 0; i < N; i++)
        sc_tensor_f32(t)[i] = first + (float)i;
    return t;
}

/* Expects device or host tensor t to hold the ramp from `first`. */
static void expect_ramp(sc_ctx *ctx, sc_tensor *t, float first, const char *what)
{
    sc_tensor *host = sc_tensor_to_host(ctx, t); /* waits for the kernels before */
    cr_assert_not_null(host, "%s", sc_error_message());
    for (int i = 0; i < N; i++)
        cr_assert_eq(sc_tensor_f32(host)[i], first + (float)i, "%s: element %d is %g", what, i,
                     sc_tensor_f32(host)[i]);
}

Test(fences, are_refused_on_the_cpu)
{
    cr_assert_null(sc_fence_new(cpu));
    cr_assert(strstr(sc_error_message(), "needs a CUDA context"), "%s", sc_error_message());
    sc_ctx *ctx = sc_ctx_new(cpu);
    sc_tensor *a = sc_tensor_zeros(ctx, SC_F32, 1, (const int64_t[]){N});
    sc_tensor *b = sc_tensor_zeros(ctx, SC_F32, 1, (const int64_t[]){N});
    cr_assert_eq(sc_tensor_copy_async(ctx, a, b), SC_ERR_UNSUPPORTED);
    cr_assert_eq(sc_tensor_upload_async(ctx, a, b, NULL, NULL), SC_ERR_UNSUPPORTED);
    cr_assert_eq(sc_ctx_set_fence(ctx, NULL), SC_ERR_UNSUPPORTED);
    sc_ctx_free(ctx);
}

Test(fences, a_fence_never_set_has_passed)
{
    sc_ctx *ctx = gpu_ctx();
    sc_fence *f = sc_fence_new(gpu);
    cr_assert_not_null(f, "%s", sc_error_message());
    bool passed = false;
    cr_assert_eq(sc_fence_passed(f, &passed), SC_OK);
    cr_assert(passed);
    cr_assert_eq(sc_fence_wait(f), SC_OK);
    cr_assert_eq(sc_ctx_set_fence(ctx, f), SC_OK);
    cr_assert_eq(sc_fence_wait(f), SC_OK);
    cr_assert_eq(sc_fence_passed(f, &passed), SC_OK);
    cr_assert(passed, "a fence waited for has passed");
    sc_fence_free(f);
    sc_ctx_free(ctx);
}

Test(fences, uploads_must_match_and_go_from_the_host)
{
    sc_ctx *ctx = gpu_ctx();
    sc_tensor *dev = sc_tensor_new(ctx, SC_F32, 1, (const int64_t[]){N});
    sc_tensor *small = sc_tensor_alloc_pinned(SC_F32, 1, (const int64_t[]){N - 1});
    cr_assert_eq(sc_tensor_upload_async(ctx, dev, small, NULL, NULL), SC_ERR_INVALID);
    cr_assert(strstr(sc_error_message(), "999 f32 elements into 1000"), "%s",
              sc_error_message());
    cr_assert_eq(sc_tensor_upload_async(ctx, dev, dev, NULL, NULL), SC_ERR_INVALID);
    cr_assert(strstr(sc_error_message(), "from the host"), "%s", sc_error_message());
    sc_tensor_free(small);
    sc_ctx_free(ctx);
}

/* The compute stream's kernels after an upload read what it copied. */
Test(fences, kernels_after_an_upload_see_its_data)
{
    sc_ctx *ctx = gpu_ctx();
    sc_tensor *host = pinned_ramp(1), *dev = sc_tensor_new(ctx, SC_F32, 1, (const int64_t[]){N});
    sc_fence *done = sc_fence_new(gpu);
    cr_assert_eq(sc_tensor_upload_async(ctx, dev, host, NULL, done), SC_OK, "%s",
                 sc_error_message());
    expect_ramp(ctx, sc_scale(ctx, dev, 1.0f), 1, "the kernel after the upload");
    sc_fence_free(done);
    sc_tensor_free(host);
    sc_ctx_free(ctx);
}

/* An upload into a buffer waits for the readers before its `after` fence,
 * and the host may reuse the pinned source once `done` has passed. */
static void upload_after_a_reader(sc_ctx *ctx, sc_fence *read, sc_fence *done)
{
    sc_tensor *first = pinned_ramp(1), *second = pinned_ramp(5000);
    sc_tensor *dev = sc_tensor_new(ctx, SC_F32, 1, (const int64_t[]){N});
    cr_assert_eq(sc_tensor_upload_async(ctx, dev, first, NULL, done), SC_OK);
    sc_tensor *copy = sc_scale(ctx, dev, 1.0f); /* reads the first upload */
    cr_assert_eq(sc_ctx_set_fence(ctx, read), SC_OK);
    cr_assert_eq(sc_tensor_upload_async(ctx, dev, second, read, done), SC_OK);
    cr_assert_eq(sc_fence_wait(done), SC_OK);
    for (int i = 0; i < N; i++) /* the copy has read it: the host may overwrite it */
        sc_tensor_f32(second)[i] = -1;
    expect_ramp(ctx, copy, 1, "the reader before the fence");
    expect_ramp(ctx, dev, 5000, "the second upload");
    sc_tensor_free(first);
    sc_tensor_free(second);
    sc_ctx_reset(ctx);
}

/* Several rounds: lazy streams draw another order each time. */
Test(fences, an_upload_waits_for_its_after_fence_only)
{
    sc_ctx *ctx = gpu_ctx();
    sc_fence *read = sc_fence_new(gpu), *done = sc_fence_new(gpu);
    for (int round = 0; round < 8; round++)
        upload_after_a_reader(ctx, read, done);
    sc_fence_free(read);
    sc_fence_free(done);
    sc_ctx_free(ctx);
}

/* A copy to pinned memory on the compute stream follows the kernels before
 * it and has arrived once a fence set after it has passed. */
Test(fences, results_arrive_in_pinned_memory_behind_a_fence)
{
    sc_ctx *ctx = gpu_ctx();
    sc_tensor *host = pinned_ramp(1), *back = pinned_ramp(0);
    sc_tensor *dev = sc_tensor_new(ctx, SC_F32, 1, (const int64_t[]){N});
    sc_fence *arrived = sc_fence_new(gpu);
    cr_assert_eq(sc_tensor_upload_async(ctx, dev, host, NULL, NULL), SC_OK);
    cr_assert_eq(sc_tensor_copy_async(ctx, back, sc_scale(ctx, dev, 2.0f)), SC_OK, "%s",
                 sc_error_message());
    cr_assert_eq(sc_ctx_set_fence(ctx, arrived), SC_OK);
    cr_assert_eq(sc_fence_wait(arrived), SC_OK);
    for (int i = 0; i < N; i++)
        cr_assert_eq(sc_tensor_f32(back)[i], 2.0f * (1.0f + (float)i), "element %d", i);
    sc_fence_free(arrived);
    sc_tensor_free(host);
    sc_tensor_free(back);
    sc_ctx_free(ctx);
}
