/* A non-finite step on a GPU is skipped on the GPU itself: the
 * optimizer's guard (sc_optim_guard) checks the loss and the gradients
 * after backward and, once it has found a NaN or an infinity, the fused
 * updates leave the parameters and the optimizer state as they are, while
 * the host, which reads the step a few steps later, stops the run with the
 * CPU's message.
 *
 * The guard's own tests run the optimizer on a small store; the runs train
 * into a NaN sample with the host running ahead (CUDAEMU_LAZY=1 on the
 * emulated GPU: the GPU works only at synchronising calls) and find the
 * weights and the optimizer state in memory equal, bit for bit, to the
 * last checkpoint, written just before the NaN step. Without the guard the
 * NaN step and those queued behind it change them. Skipped without a GPU. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "in_process.h"
#include "scorch_host/context.h"
#include "scorch/device.h"
#include "scorch_host/optim.h"
#include "scorch/serialize.h"
#include "run/trainer_impl.h"
#include "scorch_host/params.h"

#ifndef GPU_EMULATED
#define GPU_EMULATED 0 /* 1 in the gpu_emulator build */
#endif

enum { PATH = 4096, DIR_SIZE = 64, MAX_ARGS = 48, MESSAGE = 256 };

static void skip_without_gpu(void)
{
    if (sc_cuda_device_count() == 0)
        cr_skip_test("no GPU (%s)", sc_cuda_built() ? "none visible" : "no CUDA backend");
}

/* One emulated GPU, whose work runs only at synchronising calls (before
 * the emulator starts), so that the host runs ahead of it; its lock in a
 * directory of the test's own. */
static void use_one_lazy_gpu(void)
{
    setenv("CUDAEMU_DEVICES", "1", 1);
    setenv("CUDAEMU_LAZY", "1", 1);
    setenv("CUDAEMU_SEED", "3", 1);
    use_own_gpu_locks();
}

TestSuite(gpu_nan, .init = use_one_lazy_gpu, .timeout = 600);

/* ---- the guard on its own ---- */

static const sc_device gpu = {SC_DEVICE_CUDA, 0};

/* Every element of device tensor t = value, one of them `odd` instead
 * when at >= 0. */
static void set_element(sc_tensor *t, float value, int64_t at, float odd)
{
    sc_tensor *host = sc_tensor_alloc(SC_F32, t->ndim, t->shape);
    for (int64_t i = 0; i < t->numel; i++)
        sc_tensor_f32(host)[i] = i == at ? odd : value;
    cr_assert_eq(sc_tensor_copy(t, host), SC_OK, "%s", sc_error_message());
    sc_tensor_free(host);
}

static void set_values(sc_tensor *t, float value) { set_element(t, value, -1, 0); }

/* Two trainable parameters with a buffer between them (the guard checks
 * the gradients from the first to the last as one span), on the GPU;
 * values and gradients 0.01 i and 0.5. */
static sc_params *small_store(void)
{
    sc_params *ps = sc_params_new();
    cr_assert(ps);
    cr_assert(sc_params_add(ps, "a", 1, (int64_t[]){300}));
    cr_assert(sc_params_add_buffer(ps, "stats", 1, (int64_t[]){50}));
    cr_assert(sc_params_add(ps, "c", 1, (int64_t[]){200}));
    int64_t n = sc_params_numel(ps);
    float *values = malloc((size_t)n * sizeof *values);
    for (int64_t i = 0; i < n; i++)
        values[i] = 0.01f * (float)i;
    cr_assert_eq(sc_params_write(ps, values), SC_OK, "%s", sc_error_message());
    free(values);
    cr_assert_eq(sc_params_to_device(ps, gpu), SC_OK, "%s", sc_error_message());
    for (int i = 0; i < sc_params_count(ps); i++) {
        sc_tensor *p = sc_params_at(ps, i);
        if (p->flags & SC_TENSOR_REQUIRES_GRAD)
            set_values(p->grad, 0.5f);
    }
    return ps;
}

/* A loss of `value`, one f32 on the GPU, in ctx's arena. */
static sc_tensor *loss_of(sc_ctx *ctx, float value)
{
    sc_tensor *loss = sc_tensor_new(ctx, SC_F32, 0, NULL);
    cr_assert(loss);
    set_values(loss, value);
    return loss;
}

/* The store's values and the optimizer's state, on the host, in one
 * array; the caller frees it. */
static float *snapshot(const sc_params *ps, sc_optim *opt, int64_t *count)
{
    int64_t n = sc_params_numel(ps);
    int nstate = sc_optim_state_count(opt);
    float *all = malloc((size_t)(n * (1 + nstate)) * sizeof *all);
    cr_assert_eq(sc_params_read(ps, all, NULL), SC_OK, "%s", sc_error_message());
    for (int i = 0; i < nstate; i++) {
        sc_tensor host = *sc_optim_state_at(opt, i);
        host.data = all + n * (1 + i);
        host.device = (sc_device){SC_DEVICE_CPU, 0};
        cr_assert_eq(sc_tensor_copy(&host, sc_optim_state_at(opt, i)), SC_OK, "%s",
                     sc_error_message());
    }
    *count = n * (1 + nstate);
    return all;
}

static int32_t flag_of(const sc_optim *opt)
{
    sc_tensor *host = sc_tensor_alloc(SC_I32, 0, NULL);
    cr_assert_eq(sc_tensor_copy(host, sc_optim_guard_flag(opt)), SC_OK, "%s",
                 sc_error_message());
    int32_t flag = *(int32_t *)host->data;
    sc_tensor_free(host);
    return flag;
}

/* A guarded step: the guard with a loss of `loss`, then the update. */
static void guarded_step(sc_optim *opt, sc_ctx *ctx, float loss)
{
    cr_assert_eq(sc_optim_guard(opt, loss_of(ctx, loss)), SC_OK, "%s", sc_error_message());
    cr_assert_eq(sc_optim_step(opt, 0.1), SC_OK, "%s", sc_error_message());
    sc_ctx_reset(ctx);
}

/* How a non-finite value is planted before a guarded step. */
typedef enum planted { NONE, LOSS_NAN, FIRST_GRAD_NAN, LAST_GRAD_INF } planted;

/* A first step with `what` planted; whether it changed the values and
 * state, and the flag after it. A second, finite, step follows: once set,
 * the flag holds every later update too. */
static void expect_step(sc_optim_kind kind, planted what)
{
    skip_without_gpu();
    sc_optim_config config = sc_optim_defaults(kind);
    config.momentum = kind == SC_OPTIM_SGD ? 0.9 : 0;
    sc_params *ps = small_store();
    sc_optim *opt = sc_optim_new(ps, &config);
    sc_ctx *ctx = sc_ctx_new(gpu);
    cr_assert(opt && ctx, "%s", sc_error_message());
    cr_assert_eq(flag_of(opt), 0);
    sc_tensor *a = sc_params_find(ps, "a"), *c = sc_params_find(ps, "c");
    if (what == FIRST_GRAD_NAN)
        set_element(a->grad, 0.5f, 0, NAN);
    if (what == LAST_GRAD_INF)
        set_element(c->grad, 0.5f, c->numel - 1, -INFINITY);
    int64_t n;
    float *before = snapshot(ps, opt, &n);
    guarded_step(opt, ctx, what == LOSS_NAN ? NAN : 0.25f);
    set_values(a->grad, 0.5f);
    set_values(c->grad, 0.5f);
    guarded_step(opt, ctx, 0.25f);
    float *after = snapshot(ps, opt, &n);
    bool unchanged = memcmp(before, after, (size_t)n * sizeof *before) == 0;
    if (what == NONE) {
        cr_expect_not(unchanged, "a finite step changed nothing");
        cr_expect_eq(flag_of(opt), 0);
    } else {
        cr_expect(unchanged, "a %s step changed the values or the state",
                  what == LOSS_NAN ? "NaN loss" : "non-finite gradient");
        cr_expect_eq(flag_of(opt), 1);
    }
    free(before);
    free(after);
    sc_ctx_free(ctx);
    sc_optim_free(opt);
    sc_params_free(ps);
}

static void expect_each_planted(sc_optim_kind kind)
{
    expect_step(kind, NONE);
    expect_step(kind, LOSS_NAN);
    expect_step(kind, FIRST_GRAD_NAN);
    expect_step(kind, LAST_GRAD_INF);
}

Test(gpu_nan, sgd_with_momentum_skips_non_finite_steps) { expect_each_planted(SC_OPTIM_SGD); }
Test(gpu_nan, adam_skips_non_finite_steps) { expect_each_planted(SC_OPTIM_ADAM); }

/* The CPU checks the loss before backward: its guard does nothing, and an
 * update applies what it is given, as it always did. */
Test(gpu_nan, the_cpu_has_no_guard)
{
    sc_params *ps = sc_params_new();
    sc_tensor *p = sc_params_add(ps, "p", 1, (int64_t[]){4});
    sc_optim_config config = sc_optim_defaults(SC_OPTIM_SGD);
    sc_optim *opt = sc_optim_new(ps, &config);
    sc_ctx *ctx = sc_ctx_new((sc_device){SC_DEVICE_CPU, 0});
    sc_tensor *loss = sc_tensor_new(ctx, SC_F32, 0, NULL);
    sc_tensor_f32(loss)[0] = NAN;
    sc_tensor_f32(p->grad)[0] = NAN;
    cr_expect_null(sc_optim_guard_flag(opt));
    cr_expect_eq(sc_optim_guard(opt, loss), SC_OK);
    cr_expect_eq(sc_optim_step(opt, 0.1), SC_OK);
    cr_expect(isnan(sc_tensor_f32(p)[0]));
    sc_ctx_free(ctx);
    sc_optim_free(opt);
    sc_params_free(ps);
}

/* ---- training into a NaN ---- */

/* scorch-train's arguments for the MLP on the synthetic blobs, whose
 * train sample 1500 is NaN, into run_dir on `device`, plus `extra`
 * (NULL-terminated), into argv; the count. */
static int train_args(const char **argv, const char *device, const char *run_dir,
                      const char *const *extra)
{
    static char train[PATH], mlp[PATH], synthetic[PATH];
    build_path(train, PATH, "host/scorch-train");
    build_path(mlp, PATH, "plugins/mlp.so");
    build_path(synthetic, PATH, "plugins/synthetic.so");
    const char *base[] = {train, "--model", mlp, "--model-args", "hidden=32", "--dataset",
                          synthetic, "--dataset-path", "unused", "--dataset-args",
                          "nan_sample=1500", "--batch-size", "64", "--epochs", "1",
                          "--run-dir", run_dir, "--seed", "7", "--device", device, NULL};
    int n = 0;
    for (; base[n]; n++)
        argv[n] = base[n];
    for (; extra && *extra && n < MAX_ARGS - 1; extra++)
        argv[n++] = *extra;
    argv[n] = NULL;
    return n;
}

/* "train loss is nan at epoch E, batch B" from a message, into where
 * (the CPU and the GPU may give the NaN different signs). */
static void nan_message(const char *message, char *where, size_t size)
{
    const char *loss = strstr(message, "train loss is "), *at = loss ? strstr(loss, " at ") : NULL;
    cr_assert(at && strstr(loss, "nan") < at, "%s", message);
    snprintf(where, size, "%.*s", (int)strcspn(at, "\n"), at);
}

/* The batch the CPU's run stops at, and its message into where. */
static int64_t cpu_nan_batch(char *where, size_t size)
{
    char dir[DIR_SIZE];
    const char *argv[MAX_ARGS];
    train_args(argv, "cpu", temp_dir(dir, sizeof dir), NULL);
    run_result r = run_program(argv, NULL);
    cr_assert_eq(r.status, 1, "exit %d: %s", r.status, r.err);
    nan_message(r.err, where, size);
    run_result_free(&r);
    long long batch = -1;
    cr_assert_eq(sscanf(where, " at epoch 1, batch %lld", &batch), 1, "%s", where);
    return batch;
}

/* Whether tensor `live` (any device) equals the checkpoint's entry
 * "<kind>/<its name>", bit for bit. */
static bool same_as_saved(const sc_ckpt *ck, const char *kind, const sc_tensor *live)
{
    char name[PATH];
    snprintf(name, sizeof name, "%s/%s", kind, live->name);
    const sc_tensor *saved = sc_ckpt_tensor(ck, name);
    cr_assert(saved, "no %s in the checkpoint", name);
    sc_tensor *host = sc_tensor_alloc(SC_F32, live->ndim, live->shape);
    cr_assert_eq(sc_tensor_copy(host, live), SC_OK, "%s", sc_error_message());
    bool same = memcmp(host->data, saved->data, sc_tensor_nbytes(host)) == 0;
    cr_expect(same, "%s differs from the checkpoint's", name);
    sc_tensor_free(host);
    return same;
}

/* Whether t's parameters and optimizer state, in memory, are the
 * checkpoint's. */
static bool same_as_checkpoint(host_trainer *t, const char *path)
{
    sc_ckpt *ck;
    cr_assert_eq(sc_ckpt_open(path, &ck), SC_OK, "%s", sc_error_message());
    bool same = true;
    for (int i = 0; i < sc_params_count(t->s.params); i++)
        same &= same_as_saved(ck, "param", sc_params_at(t->s.params, i));
    for (int i = 0; i < sc_optim_state_count(t->opt); i++)
        same &= same_as_saved(ck, "optim", sc_optim_state_at(t->opt, i));
    sc_ckpt_close(ck);
    return same;
}

/* Trains on the GPU, in this process, into the NaN with a checkpoint
 * written every `every` optimizer steps, the last just before the NaN
 * step; expects the CPU's message, no checkpoint after that one, the
 * host to have queued steps after the NaN one, and the weights and state
 * in memory to be that checkpoint's. */
static void expect_nan_step_skipped(int64_t every, const char *cpu_message,
                                    const char *const *extra)
{
    char dir[DIR_SIZE], every_arg[24], path[PATH], last[PATH], message[MESSAGE];
    const char *argv[MAX_ARGS];
    snprintf(every_arg, sizeof every_arg, "%lld", (long long)every);
    const char *args[MAX_ARGS] = {"--quiet", "--workers", "0", "--checkpoint-every", every_arg};
    for (int n = 5; extra && *extra; extra++)
        args[n++] = *extra;
    int argc = train_args(argv, "cuda", temp_dir(dir, sizeof dir), args);
    host_trainer *t = trainer_for_args(argc, argv);
    bool interrupted = false;
    cr_assert_eq(host_trainer_run(t, &interrupted), SC_ERR_NUMERIC, "%s", sc_error_message());
    nan_message(sc_error_message(), message, sizeof message);
    cr_expect_str_eq(message, cpu_message);
    host_step_pipe_stats stats = host_step_pipe_stats_of(t->pipe);
    if (GPU_EMULATED) /* a real GPU may be read back sooner */
        cr_expect_geq(stats.steps, (every + 2) * t->cfg.accumulate,
                      "%lld steps queued: none ran ahead of the NaN", (long long)stats.steps);
    snprintf(path, PATH, "%s/checkpoints/epoch-0001-step-%09lld.ckpt", dir, (long long)every);
    snprintf(last, PATH, "%s/checkpoints/last.ckpt", dir);
    cr_expect(same_params(path, last), "a checkpoint followed %s", path);
    cr_expect(same_as_checkpoint(t, path), "the NaN step or those after it changed the model");
    host_trainer_free(t);
}

/* Steps replayed as CUDA graphs, each followed by the guard. */
Test(gpu_nan, a_nan_step_leaves_the_model_as_before_it)
{
    skip_without_gpu();
    char cpu_message[MESSAGE];
    int64_t batch = cpu_nan_batch(cpu_message, sizeof cpu_message);
    cr_assert(batch >= 1 && batch + 4 < 32, "the NaN at batch %lld", (long long)batch);
    expect_nan_step_skipped(batch, cpu_message, (const char *[]){"--cuda-graphs", "on", NULL});
}

/* Eager steps of two micro-batches each, with SGD's momentum: the guard
 * checks each micro-batch. */
Test(gpu_nan, a_nan_micro_batch_leaves_the_model_as_before_it)
{
    skip_without_gpu();
    char cpu_message[MESSAGE];
    int64_t batch = cpu_nan_batch(cpu_message, sizeof cpu_message);
    cr_assert(batch >= 2 && batch + 6 < 32, "the NaN at batch %lld", (long long)batch);
    expect_nan_step_skipped(batch / 2, cpu_message,
                            (const char *[]){"--accumulate", "2", "--optimizer", "sgd",
                                             "--momentum", "0.9", NULL});
}

/* A finite loss whose gradients were not: the host names the step (the
 * CPU would apply them and stop at the next loss, a NaN). */
Test(gpu_nan, non_finite_gradients_are_named)
{
    char dir[DIR_SIZE];
    const char *argv[MAX_ARGS];
    int argc = train_args(argv, "cpu", temp_dir(dir, sizeof dir),
                          (const char *[]){"--quiet", NULL});
    host_trainer *t = trainer_for_args(argc, argv);
    sc_tensor_list none = {0};
    host_step_result step = {.info = {.epoch = 2, .batch = 5, .size = 64, .step = 38},
                           .loss = 0.5,
                           .skipped = true,
                           .outputs = &none,
                           .targets = &none};
    cr_expect_eq(trainer_fold_step(t, &step), SC_ERR_NUMERIC);
    cr_expect_str_eq(sc_error_message(), "train gradients are not finite at epoch 2, batch 5 "
                                         "(loss 0.5): the update was skipped");
    host_trainer_free(t);
}
