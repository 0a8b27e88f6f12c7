/* Integration tests of --device with the real binaries on a machine
 * without a GPU: a GPU asked for is refused naming why, auto falls back to
 * the CPU, GPU-only options are refused on the CPU, and the command line
 * overrides a model's preferred device. Where a GPU is present they skip
 * (tests/integration/test_gpu_*.c cover that side). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "scorch/device.h"

enum { PATH = 4096, DIR = 64, MAX_ARGS = 32 };

/* Why a run asking for a GPU gets none here: the build has no CUDA
 * backend, or (a build with nvcc on a machine without a GPU) finds none. */
static const char *no_gpu_reason(void)
{
    if (sc_cuda_device_count() > 0)
        cr_skip_test("this machine has a GPU");
    return sc_cuda_built() ? "no GPU found" : "this build has no CUDA backend";
}

/* One epoch of scorch-train on the synthetic blobs into a fresh directory,
 * plus extra (NULL-terminated). */
static run_result train(const char *const *extra)
{
    char train_bin[PATH], mlp[PATH], synthetic[PATH];
    build_path(train_bin, PATH, "host/scorch-train");
    build_path(mlp, PATH, "plugins/mlp.so");
    build_path(synthetic, PATH, "plugins/synthetic.so");
    char dir[DIR];
    temp_dir(dir, sizeof dir);
    const char *argv[MAX_ARGS] = {train_bin, "--model", mlp, "--model-args", "hidden=32",
                                  "--dataset", synthetic, "--batch-size", "64",
                                  "--epochs", "1", "--run-dir", dir, "--seed", "7"};
    int n = 15;
    for (; extra && *extra && n < MAX_ARGS - 1; extra++)
        argv[n++] = *extra;
    argv[n] = NULL;
    return run_program(argv, NULL);
}

static void expect_refused(const char *const *extra, const char *want)
{
    run_result r = train(extra);
    cr_expect_eq(r.status, 1, "exit %d", r.status);
    cr_expect(strstr(r.err, want), "stderr lacks '%s':\n%s", want, r.err);
    run_result_free(&r);
}

Test(devices, cuda_is_refused_and_auto_falls_back_to_the_cpu)
{
    const char *why = no_gpu_reason();
    char expected[256];
    snprintf(expected, sizeof expected, "--device cuda:0: %s; use --device cpu", why);
    expect_refused((const char *[]){"--device", "cuda:0", NULL}, expected);
    run_result r = train((const char *[]){"--device", "auto", NULL});
    cr_assert_eq(r.status, 0, "exit %d\nstdout:\n%s\nstderr:\n%s", r.status, r.out, r.err);
    snprintf(expected, sizeof expected, "note: --device auto: %s; computing on the cpu", why);
    cr_expect(strstr(r.err, expected), "%s", r.err);
    run_result_free(&r);
}

Test(devices, gpu_only_options_are_refused_on_the_cpu)
{
    expect_refused((const char *[]){"--device", "cpu", "--precision", "bf16", NULL},
                   "--precision bf16 needs a GPU; the CPU computes in fp32");
    expect_refused((const char *[]){"--device", "cpu", "--cuda-graphs", "on", NULL},
                   "--cuda-graphs on needs a GPU (--device cuda)");
}

Test(devices, the_command_line_overrides_the_models_preference)
{
    char train_bin[PATH], model[PATH], synthetic[PATH], dir[DIR];
    build_path(train_bin, PATH, "host/scorch-train");
    build_path(model, PATH, "tests/fixtures/model_prefers_auto.so");
    build_path(synthetic, PATH, "plugins/synthetic.so");
    temp_dir(dir, sizeof dir);
    const char *argv[] = {train_bin, "--model", model, "--dataset", synthetic, "--run-dir", dir,
                          NULL, NULL, NULL};
    char expected[256];
    snprintf(expected, sizeof expected,
             "model_prefers_auto.so's preferred_device auto: %s; computing on the cpu",
             no_gpu_reason());
    run_result r = run_program(argv, NULL);
    cr_expect(strstr(r.err, expected), "%s", r.err);
    run_result_free(&r);
    argv[7] = "--device", argv[8] = "cpu";
    r = run_program(argv, NULL);
    cr_expect_null(strstr(r.err, "preferred_device"), "%s", r.err);
    run_result_free(&r);
}
