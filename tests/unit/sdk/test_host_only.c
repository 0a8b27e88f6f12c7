/* The host-only functions that act on what a plugin is handed refuse to
 * run while the host's probe says plugin code runs on the calling thread
 * (scorch_host/plugin.h), and run as before outside it or without a
 * probe. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <string.h>

#include "scorch/scorch.h"
#include "scorch_host/context.h"
#include "scorch_host/device.h"
#include "scorch_host/params.h"
#include "scorch_host/plugin.h"

/* What the host's probe reads: whether this thread is in plugin code. */
static _Thread_local bool in_plugin_code;

static bool probe(void) { return in_plugin_code; }

static sc_ctx *ctx;
static sc_params *ps;
static sc_tensor *w;

static void setup(void)
{
    ctx = sc_ctx_new((sc_device){SC_DEVICE_CPU, 0});
    ps = sc_params_new();
    w = sc_params_add(ps, "w", 1, (int64_t[]){4});
    cr_assert(ctx && w, "%s", sc_error_message());
    sc_host_set_plugin_probe(probe);
}

static void teardown(void)
{
    in_plugin_code = false;
    sc_params_free(ps);
    sc_ctx_free(ctx);
}

TestSuite(host_only, .init = setup, .fini = teardown);

/* The calling thread's message names the function refused. */
static void expect_refused(const char *function)
{
    cr_expect_eq(sc_error_code(), SC_ERR_STATE, "%s: %s", function, sc_error_message());
    cr_expect(strstr(sc_error_message(), function) &&
                  strstr(sc_error_message(), "for the host only"),
              "%s", sc_error_message());
    sc_error_clear();
}

Test(host_only, the_context_controls_refuse_plugin_code)
{
    sc_tensor *y = sc_relu(ctx, w);
    cr_assert_not_null(y, "%s", sc_error_message());
    size_t used = sc_ctx_arena_used(ctx);
    int threads = sc_cpu_threads();

    in_plugin_code = true;
    sc_ctx_reset(ctx);
    expect_refused("sc_ctx_reset");
    sc_ctx_set_training(ctx, false);
    expect_refused("sc_ctx_set_training");
    sc_ctx_set_precision(ctx, SC_PRECISION_BF16);
    expect_refused("sc_ctx_set_precision");
    sc_cpu_set_threads(threads + 1);
    expect_refused("sc_cpu_set_threads");
    cr_expect_eq(sc_ctx_capture_begin(ctx), SC_ERR_STATE);
    expect_refused("sc_ctx_capture_begin");
    in_plugin_code = false;

    cr_expect_eq(sc_ctx_arena_used(ctx), used, "the step went on");
    cr_expect(sc_ctx_training(ctx));
    cr_expect_eq(sc_ctx_precision(ctx), SC_PRECISION_FP32);
    cr_expect_eq(sc_cpu_threads(), threads);
}

Test(host_only, the_parameter_store_controls_refuse_plugin_code)
{
    float values[4] = {1, 2, 3, 4};

    in_plugin_code = true;
    cr_expect_eq(sc_params_write(ps, values), SC_ERR_STATE);
    expect_refused("sc_params_write");
    cr_expect_eq(sc_params_scale_grads(ps, 0, 4, 2.0f), SC_ERR_STATE);
    expect_refused("sc_params_scale_grads");
    cr_expect_eq(sc_params_to_device(ps, (sc_device){SC_DEVICE_CUDA, 0}), SC_ERR_STATE);
    expect_refused("sc_params_to_device");
    sc_params_zero_grad(ps);
    expect_refused("sc_params_zero_grad");
    sc_params_set_trainable(w, false);
    expect_refused("sc_params_set_trainable");
    in_plugin_code = false;

    cr_expect(w->flags & SC_TENSOR_REQUIRES_GRAD, "w was frozen");
    cr_expect_eq(sc_tensor_f32(w)[0], 0.0f, "w was written");
}

Test(host_only, the_pipeline_and_the_probe_refuse_plugin_code)
{
    sc_tensor *a = sc_tensor_zeros(ctx, SC_F32, 1, (int64_t[]){4});
    cr_assert_not_null(a, "%s", sc_error_message());

    in_plugin_code = true;
    cr_expect_eq(sc_ctx_set_fence(ctx, NULL), SC_ERR_STATE);
    expect_refused("sc_ctx_set_fence");
    cr_expect_eq(sc_tensor_copy_async(ctx, a, a), SC_ERR_STATE);
    expect_refused("sc_tensor_copy_async");
    cr_expect_eq(sc_tensor_upload_async(ctx, a, a, NULL, NULL), SC_ERR_STATE);
    expect_refused("sc_tensor_upload_async");
    sc_host_set_plugin_probe(NULL); /* a plugin cannot switch the check off */
    expect_refused("sc_host_set_plugin_probe");
    sc_ctx_set_training(ctx, false);
    cr_expect(sc_ctx_training(ctx), "the probe is still installed");
}

Test(host_only, the_host_runs_them_outside_plugin_code)
{
    float values[4] = {1, 2, 3, 4};
    sc_ctx_set_training(ctx, false);
    cr_expect_not(sc_ctx_training(ctx));
    cr_expect_eq(sc_params_write(ps, values), SC_OK, "%s", sc_error_message());
    cr_expect_eq(sc_tensor_f32(w)[3], 4.0f);
    sc_params_set_trainable(w, false);
    cr_expect_not(w->flags & SC_TENSOR_REQUIRES_GRAD);
    cr_assert_not_null(sc_relu(ctx, w), "%s", sc_error_message());
    sc_ctx_reset(ctx);
    cr_expect_eq(sc_ctx_arena_used(ctx), 0);
    cr_expect_eq(sc_error_code(), SC_OK, "%s", sc_error_message());
}

static void *host_thread(void *arg)
{
    sc_ctx_set_training(arg, false);
    return NULL;
}

/* The probe answers for the calling thread: the host's other threads run
 * host code while one thread runs a plugin's. */
Test(host_only, the_probe_is_asked_per_thread)
{
    in_plugin_code = true;
    pthread_t other;
    cr_assert_eq(pthread_create(&other, NULL, host_thread, ctx), 0);
    pthread_join(other, NULL);
    cr_expect_not(sc_ctx_training(ctx), "the other thread is the host's");
}

/* Without a probe libscorch cannot tell and refuses nothing. */
Test(host_only, without_a_probe_nothing_is_refused)
{
    sc_host_set_plugin_probe(NULL);
    in_plugin_code = true;
    sc_ctx_set_training(ctx, false);
    cr_expect_not(sc_ctx_training(ctx));
    cr_expect_eq(sc_error_code(), SC_OK, "%s", sc_error_message());
}
