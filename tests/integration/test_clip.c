/* Integration tests: gradient clipping and parameter groups in whole
 * scorch-train runs (docs/cli.md, "Gradient clipping", "Parameter
 * groups"): train/grad_norm logged per step, resume exact, 2 replicas
 * clipping the averaged gradients as one process does, the refusals; and
 * (suite clip_gpu, skipped without a GPU) a GPU run agreeing with the CPU. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

enum { PATH = 4096, DIR = 64, MAX_ARGS = 48 };

/* Groups on the parameters of the mlp with hidden=32 (fc1, fc2). */
static const char groups_ini[] = "[train]\noptimizer = sgd\nmomentum = 0.9\nweight-decay = 0.01\n"
                                 "[params \"fc1.*\"]\nlr_scale = 0.5\n"
                                 "[params \"fc2.weight\"]\nweight_decay = 0.1\n";

static void write_groups(char *path, const char *dir)
{
    snprintf(path, PATH, "%s.ini", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(groups_ini, f);
    fclose(f);
}

/* scorch-train, the mlp on synthetic data, 16 steps an epoch, clipping at
 * a norm it exceeds, the groups above, --no-decay bias; plus `extra`. */
static run_result train(const char *dir, const char *epochs, const char *batch,
                        const char *const *extra)
{
    char exe[PATH], mlp[PATH], data[PATH], ini[PATH];
    build_path(exe, PATH, "host/scorch-train");
    build_path(mlp, PATH, "plugins/mlp.so");
    build_path(data, PATH, "plugins/synthetic.so");
    write_groups(ini, dir);
    const char *argv[MAX_ARGS] = {exe, "--model", mlp, "--model-args", "hidden=32", "--dataset",
                                  data, "--dataset-args", "train_size=1024", "--config", ini,
                                  "--batch-size", batch, "--epochs", epochs, "--run-dir", dir,
                                  "--seed", "5", "--workers", "1", "--clip-grad-norm", "0.2",
                                  "--no-decay", "bias", "--quiet"};
    int n = 0;
    while (argv[n])
        n++;
    for (; extra && *extra && n < MAX_ARGS - 1; extra++)
        argv[n++] = *extra;
    argv[n] = NULL;
    return run_program(argv, NULL);
}

static void expect_ok(run_result r)
{
    cr_assert_eq(r.status, 0, "exit %d\nstdout:\n%s\nstderr:\n%s", r.status, r.out, r.err);
    run_result_free(&r);
}

static void last_ckpt(char *buf, const char *dir)
{
    snprintf(buf, PATH, "%s/checkpoints/last.ckpt", dir);
}

/* The train/grad_norm values of metrics.jsonl, in order, into norms;
 * their count. */
static int grad_norms(const char *dir, double *norms, int most)
{
    char path[PATH];
    snprintf(path, PATH, "%s/metrics.jsonl", dir);
    char *text = read_text(path);
    cr_assert_not_null(text, "%s", path);
    int n = 0;
    for (char *p = strstr(text, "\"train/grad_norm\""); p && n < most;
         p = strstr(p + 1, "\"train/grad_norm\"")) {
        char *v = strstr(p, "\"value\":");
        cr_assert_not_null(v);
        norms[n++] = strtod(v + 8, NULL);
    }
    free(text);
    return n;
}

TestSuite(clip, .timeout = 300);

Test(clip, grad_norm_is_logged_each_step_and_clipping_acts)
{
    char dir[DIR];
    temp_dir(dir, DIR);
    expect_ok(train(dir, "1", "64", NULL));
    double norms[64];
    cr_assert_eq(grad_norms(dir, norms, 64), 16, "one train/grad_norm per optimizer step");
    for (int i = 0; i < 16; i++)
        cr_assert(isfinite(norms[i]) && norms[i] > 0.2, "step %d: norm %g does not exceed "
                  "--clip-grad-norm 0.2, so the test would not see clipping", i + 1, norms[i]);
    char ini[PATH], *text;
    snprintf(ini, PATH, "%s/config.ini", dir);
    cr_assert_not_null(text = read_text(ini));
    cr_assert(strstr(text, "clip-grad-norm = 0.2\n") && strstr(text, "no-decay = bias\n") &&
              strstr(text, "[params \"fc1.*\"]\nlr_scale = 0.5\n"), "config.ini:\n%s", text);
    free(text);
}

/* Without clipping the weights differ: the option does something. */
Test(clip, clipping_changes_the_weights)
{
    char on[DIR], off[DIR], a[PATH], b[PATH];
    temp_dir(on, DIR);
    temp_dir(off, DIR);
    expect_ok(train(on, "1", "64", NULL));
    expect_ok(train(off, "1", "64", (const char *[]){"--clip-grad-norm", "0", NULL}));
    last_ckpt(a, on);
    last_ckpt(b, off);
    cr_assert_gt(params_rel_diff(a, b), 1e-3);
}

Test(clip, resume_is_exact)
{
    char straight[DIR], split[DIR], a[PATH], b[PATH];
    temp_dir(straight, DIR);
    temp_dir(split, DIR);
    expect_ok(train(straight, "2", "64", NULL));
    expect_ok(train(split, "1", "64", NULL));
    expect_ok(train(split, "2", "64", (const char *[]){"--resume", NULL}));
    last_ckpt(a, straight);
    last_ckpt(b, split);
    cr_assert(same_params(a, b), "the resumed run's weights differ");
    double x[64], y[64];
    int n = grad_norms(straight, x, 64);
    cr_assert_eq(grad_norms(split, y, 64), n);
    for (int i = 0; i < n; i++)
        cr_assert_eq(x[i], y[i], "step %d", i + 1);
}

/* The ranks clip the averaged gradients: 2 replicas of 32 take the steps
 * one process takes with batches of 64 (clipping each rank's own
 * gradients would not). */
Test(clip, two_replicas_clip_as_one_process)
{
    char alone[DIR], ranks[DIR], a[PATH], b[PATH];
    temp_dir(alone, DIR);
    temp_dir(ranks, DIR);
    expect_ok(train(alone, "1", "64", (const char *[]){"--device", "cpu", NULL}));
    expect_ok(train(ranks, "1", "32", (const char *[]){"--device", "cpu", "--replicas", "2",
                                                       NULL}));
    last_ckpt(a, alone);
    last_ckpt(b, ranks);
    double diff = params_rel_diff(a, b);
    cr_assert_lt(diff, 1e-5, "weights differ by %g relative", diff);
    double x[64], y[64];
    cr_assert_eq(grad_norms(alone, x, 64), grad_norms(ranks, y, 64));
    cr_assert_float_eq(x[15], y[15], 1e-5 * x[15]);
}

Test(clip, refusals_name_what_is_wrong)
{
    char dir[DIR];
    temp_dir(dir, DIR);
    run_result r = train(dir, "1", "64", (const char *[]){"--clip-grad-value", "1", NULL});
    cr_assert_neq(r.status, 0);
    cr_assert(strstr(r.err, "--clip-grad-norm 0.2 and --clip-grad-value 1: choose one"), "%s",
              r.err);
    run_result_free(&r);
    r = train(dir, "1", "64", (const char *[]){"--no-decay", "bias,norm", NULL});
    cr_assert_neq(r.status, 0);
    cr_assert(strstr(r.err, "--no-decay: 'norm' is in no trainable parameter's name"), "%s",
              r.err);
    run_result_free(&r);
}

/* The GPU's clipping (norm, factor and update on the device) against the
 * CPU's. */
Test(clip_gpu, a_gpu_run_agrees_with_the_cpu, .timeout = 600)
{
    char gpu[DIR], cpu[DIR], a[PATH], b[PATH];
    temp_dir(gpu, DIR);
    temp_dir(cpu, DIR);
    expect_ok(train(gpu, "1", "64", (const char *[]){"--device", "cuda", NULL}));
    expect_ok(train(cpu, "1", "64", (const char *[]){"--device", "cpu", NULL}));
    last_ckpt(a, gpu);
    last_ckpt(b, cpu);
    double diff = params_rel_diff(a, b);
    cr_assert_lt(diff, 1e-5, "weights differ by %g relative", diff);
    double x[64], y[64];
    int n = grad_norms(gpu, x, 64);
    cr_assert_eq(n, grad_norms(cpu, y, 64));
    for (int i = 0; i < n; i++)
        cr_assert_float_eq(x[i], y[i], 1e-5 * y[i], "step %d", i + 1);
}
