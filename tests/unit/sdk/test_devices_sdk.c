/* test_devices_sdk.c — libscorch's device layer as far as a machine without
 * a GPU can check it: the refusals naming the device, copies on the host,
 * host copies of the flat buffers, and the context facts CUDA graphs rely
 * on (random-op count, data generation). The GPU side is test_cuda_ops.c. */
#include <criterion/criterion.h>
#include <string.h>

#include "scorch/scorch.h"
#include "scorch_host/context.h"
#include "scorch_host/params.h"

static const sc_device cpu = {SC_DEVICE_CPU, 0};

Test(devices_sdk, a_missing_gpu_is_refused_naming_it)
{
    if (sc_cuda_device_count() > 0)
        cr_skip_test("this machine has a GPU");
    sc_device gpu = {SC_DEVICE_CUDA, 3};
    cr_assert_neq(sc_device_check(gpu), SC_OK);
    cr_assert(strstr(sc_error_message(), "cuda:3"), "%s", sc_error_message());
    cr_assert_null(sc_ctx_new(gpu));
    cr_assert(strstr(sc_error_message(), sc_cuda_built() ? "no such GPU" : "without the CUDA"),
              "%s", sc_error_message());
    cr_assert_eq(sc_device_check(cpu), SC_OK);
    char name[16];
    cr_assert_str_eq(sc_device_str(gpu, name, sizeof name), "cuda:3");
}

Test(devices_sdk, copies_on_the_cpu_are_the_tensors_themselves)
{
    sc_ctx *ctx = sc_ctx_new(cpu);
    int64_t shape[] = {2, 3};
    sc_tensor *t = sc_tensor_zeros(ctx, SC_F32, 2, shape);
    sc_tensor_f32(t)[0] = 2.5f;
    cr_assert_eq(sc_tensor_to_host(ctx, t), t);
    cr_assert_eq(sc_tensor_to_device(ctx, t), t);
    float v;
    cr_assert_eq(sc_tensor_item(t, &v), SC_OK);
    cr_assert_eq(v, 2.5f);
    sc_tensor *u = sc_tensor_alloc_pinned(SC_F32, 2, shape);
    cr_assert_eq(sc_tensor_copy(u, t), SC_OK);
    cr_assert_eq(sc_tensor_f32(u)[0], 2.5f);
    sc_tensor *wrong = sc_tensor_alloc(SC_F32, 1, shape);
    cr_assert_eq(sc_tensor_copy(wrong, t), SC_ERR_INVALID, "2 elements into 6");
    sc_tensor_free(wrong);
    sc_tensor_free(u);
    cr_assert_eq(sc_ctx_synchronize(ctx), SC_OK);
    sc_ctx_free(ctx);
}

Test(devices_sdk, params_read_and_scale_the_flat_buffers)
{
    sc_params *ps = sc_params_new();
    int64_t shape[] = {3};
    sc_tensor *a = sc_params_add(ps, "a", 1, shape);
    sc_tensor *b = sc_params_add(ps, "b", 1, shape);
    for (int i = 0; i < 3; i++) {
        sc_tensor_f32(a)[i] = (float)i;
        sc_tensor_f32(b)[i] = (float)(10 + i);
        sc_tensor_f32(b->grad)[i] = 4.0f;
    }
    cr_assert_eq(sc_params_device(ps).kind, SC_DEVICE_CPU);
    cr_assert_eq(sc_params_to_device(ps, cpu), SC_OK, "staying put is fine");
    cr_assert_eq(sc_params_scale_grads(ps, 3, 2, 0.25f), SC_OK);
    cr_assert_eq(sc_params_scale_grads(ps, 5, 2, 0.25f), SC_ERR_INVALID, "past the end");
    float values[6], grads[6];
    cr_assert_eq(sc_params_read(ps, values, grads), SC_OK);
    cr_assert_eq(values[4], 11.0f);
    cr_assert_eq(grads[3], 1.0f);
    cr_assert_eq(grads[5], 4.0f, "outside the range");
    cr_assert_eq(grads[0], 0.0f);
    values[4] = -1.0f;
    cr_assert_eq(sc_params_write(ps, values), SC_OK);
    cr_assert_eq(sc_tensor_f32(b)[1], -1.0f);
    sc_params_free(ps);
}

Test(devices_sdk, precision_names_parse)
{
    sc_precision p;
    cr_assert_eq(sc_precision_parse("bf16", &p), SC_OK);
    cr_assert_eq(p, SC_PRECISION_BF16);
    cr_assert_eq(sc_precision_parse("fp16", &p), SC_ERR_INVALID);
    cr_assert(strstr(sc_error_message(), "fp32, tf32, bf16"), "%s", sc_error_message());
}

/* Dropout in training mode is counted (a graph would replay its mask);
 * the count restarts at every reset. */
Test(devices_sdk, random_ops_are_counted_per_step)
{
    sc_ctx *ctx = sc_ctx_new(cpu);
    int64_t shape[] = {4, 4};
    sc_tensor *x = sc_tensor_zeros(ctx, SC_F32, 2, shape);
    cr_assert_not_null(sc_relu(ctx, x));
    cr_assert_eq(sc_ctx_random_ops(ctx), 0);
    cr_assert_not_null(sc_dropout(ctx, x, 0.5f));
    cr_assert_eq(sc_ctx_random_ops(ctx), 1);
    sc_ctx_reset(ctx);
    cr_assert_eq(sc_ctx_random_ops(ctx), 0);
    sc_ctx_free(ctx);
}

/* The generation moves when the arena grows, and holds still while a
 * repeated step fits, whose tensors keep the first step's addresses. */
Test(devices_sdk, data_generation_marks_moved_memory)
{
    sc_ctx *ctx = sc_ctx_new(cpu);
    int64_t big[] = {3, 1 << 18}; /* 3 MiB: more than the first block */
    uint64_t g0 = sc_ctx_data_generation(ctx);
    sc_tensor *first[] = {sc_tensor_new(ctx, SC_F32, 2, big), sc_tensor_new(ctx, SC_F32, 2, big)};
    cr_assert(first[0] && first[1]);
    void *addresses[] = {first[0]->data, first[1]->data};
    uint64_t grown = sc_ctx_data_generation(ctx);
    cr_assert_neq(grown, g0);
    sc_ctx_reset(ctx);
    cr_assert_eq(sc_ctx_data_generation(ctx), grown, "a reset keeps the blocks");
    for (int step = 0; step < 3; step++) {
        for (int i = 0; i < 2; i++) {
            sc_tensor *t = sc_tensor_new(ctx, SC_F32, 2, big);
            cr_assert_not_null(t);
            cr_assert_eq(t->data, addresses[i], "step %d, tensor %d moved", step, i);
        }
        sc_ctx_reset(ctx);
        cr_assert_eq(sc_ctx_data_generation(ctx), grown, "step %d", step);
    }
    sc_ctx_free(ctx);
}
