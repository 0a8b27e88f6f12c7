/* Integration tests: --mixup and --cutmix (host/run/mix.h) in the real
 * scorch-train: the soft-target loss path, the same numbers whatever
 * --workers is, an exact mid-epoch resume, and the refusals. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "scorch/device.h"

#define FASHION_DIR "/usr/share/datasets/fashion-mnist"

enum { PATH = 4096, DIR = 64, MAX_ARGS = 48 };

static void expect_ok(run_result *r)
{
    cr_assert_eq(r->status, 0, "exit %d\nstdout:\n%s\nstderr:\n%s", r->status, r->out, r->err);
}

/* argv[0..n) followed by extra (NULL-terminated), then NULL. */
static run_result run_with(const char **argv, int n, const char *const *extra, const char *env)
{
    for (; extra && *extra && n < MAX_ARGS - 1; extra++)
        argv[n++] = *extra;
    argv[n] = NULL;
    return run_program(argv, env);
}

/* The mlp on the synthetic blobs (inputs [16]), 32 steps an epoch. */
static run_result train_synthetic(const char *run_dir, const char *epochs,
                                  const char *const *extra, const char *env)
{
    static char train[PATH], mlp[PATH], synthetic[PATH];
    build_path(train, PATH, "host/scorch-train");
    build_path(mlp, PATH, "plugins/mlp.so");
    build_path(synthetic, PATH, "plugins/synthetic.so");
    const char *argv[MAX_ARGS] = {train, "--model", mlp, "--model-args", "hidden=32",
                                  "--dataset", synthetic, "--dataset-path", "unused",
                                  "--batch-size", "64", "--epochs", epochs,
                                  "--run-dir", run_dir, "--seed", "7"};
    return run_with(argv, 17, extra, env);
}

/* A narrow cnn on Fashion-MNIST images, 12 steps of 32, label smoothing. */
static run_result train_images(const char *run_dir, const char *const *extra)
{
    static char train[PATH], cnn[PATH], fashion[PATH];
    build_path(train, PATH, "host/scorch-train");
    build_path(cnn, PATH, "plugins/cnn.so");
    build_path(fashion, PATH, "plugins/fashion_mnist.so");
    const char *argv[MAX_ARGS] = {
        train, "--model", cnn, "--model-args", "channels=4:8,hidden=16,label_smoothing=0.1",
        "--dataset", fashion, "--dataset-path", FASHION_DIR, "--dataset-args",
        "valid_size=64", "--batch-size", "32", "--epochs", "1",
        "--max-train-iterations", "12", "--max-valid-iterations", "2",
        "--max-test-iterations", "1", "--run-dir", run_dir, "--seed", "3"};
    return run_with(argv, 23, extra, NULL);
}

static void ckpt(char *buf, const char *dir)
{
    snprintf(buf, PATH, "%s/checkpoints/last.ckpt", dir);
}

Test(mix, mixup_trains_on_soft_targets)
{
    char plain[DIR], mixed[DIR], ini[PATH];
    temp_dir(plain, sizeof plain);
    temp_dir(mixed, sizeof mixed);
    run_result r = train_synthetic(plain, "2", NULL, NULL);
    expect_ok(&r);
    run_result_free(&r);
    r = train_synthetic(mixed, "2", (const char *[]){"--mixup", "0.4", NULL}, NULL);
    expect_ok(&r);
    run_result_free(&r);
    /* Mixed targets make a higher train loss; the model still learns. */
    double plain_loss = metric_of(plain, 2, "train", "loss");
    double mixed_loss = metric_of(mixed, 2, "train", "loss");
    cr_assert(mixed_loss > plain_loss * 1.05, "train loss %g mixed, %g plain", mixed_loss,
              plain_loss);
    cr_assert_gt(metric_of(mixed, 2, "valid", "accuracy"), 0.85);
    double train_acc = metric_of(mixed, 2, "train", "accuracy");
    cr_assert(train_acc > 0.5 && train_acc <= 1.0, "train accuracy %g", train_acc);
    snprintf(ini, sizeof ini, "%s/config.ini", mixed);
    char *text = read_text(ini);
    cr_assert(text && strstr(text, "mixup = 0.4") && strstr(text, "mix-prob = 1"), "%s",
              text ? text : "no config.ini");
    free(text);
}

Test(mix, workers_do_not_change_the_mixing)
{
    char w0[DIR], w2[DIR], a[PATH], b[PATH];
    temp_dir(w0, sizeof w0);
    temp_dir(w2, sizeof w2);
    const char *opts[] = {"--mixup", "0.8", "--cutmix", "1.0", "--mix-prob", "0.8",
                          "--workers", "0", NULL};
    run_result r = train_images(w0, opts);
    expect_ok(&r);
    run_result_free(&r);
    opts[7] = "2";
    r = train_images(w2, opts);
    expect_ok(&r);
    run_result_free(&r);
    cr_assert_eq(metric_of(w0, 1, "train", "loss"), metric_of(w2, 1, "train", "loss"));
    ckpt(a, w0);
    ckpt(b, w2);
    cr_assert(same_params(a, b), "--workers 0 and 2 trained different weights");
}

Test(mix, resume_mid_epoch_is_exact)
{
    char straight[DIR], split[DIR], a[PATH], b[PATH];
    temp_dir(straight, sizeof straight);
    temp_dir(split, sizeof split);
    const char *mix = "--mixup";
    run_result r = train_synthetic(straight, "2", (const char *[]){mix, "0.4", NULL}, NULL);
    expect_ok(&r);
    run_result_free(&r);
    /* 32 steps per epoch: stop 8 steps into epoch 2, then resume. */
    r = train_synthetic(split, "2",
                        (const char *[]){mix, "0.4", "--hooks", getenv("SCORCH_STOP_HOOK"), NULL},
                        "SCORCH_TEST_STOP_AT_STEP=40");
    expect_ok(&r);
    run_result_free(&r);
    r = train_synthetic(split, "2", (const char *[]){mix, "0.4", "--resume", NULL}, NULL);
    expect_ok(&r);
    cr_assert(strstr(r.out, "batch 8"), "did not resume mid-epoch:\n%s", r.out);
    run_result_free(&r);
    cr_assert_eq(metric_of(straight, 2, "train", "loss"), metric_of(split, 2, "train", "loss"));
    cr_assert_eq(metric_of(straight, 2, "train", "accuracy"),
                 metric_of(split, 2, "train", "accuracy"));
    ckpt(a, straight);
    ckpt(b, split);
    cr_assert(same_params(a, b), "weights differ after a mid-epoch resume");
}

/* On a GPU (the emulated one of the gpu_emulator build) the batches are
 * mixed on the host before their upload, into soft-target buffers the
 * pipelined steps read later: the run matches the CPU's, with 4 loader
 * threads and the CUDA graph replay. */
Test(mix, a_gpu_run_mixes_as_the_cpu)
{
    if (sc_cuda_device_count() == 0)
        cr_skip_test("no GPU");
    use_own_gpu_locks();
    char cpu[DIR], gpu[DIR], a[PATH], b[PATH];
    temp_dir(cpu, sizeof cpu);
    temp_dir(gpu, sizeof gpu);
    const char *opts[] = {"--mixup", "0.8", "--cutmix", "1.0", "--workers", "4", "--device",
                          "cpu", NULL};
    run_result r = train_images(cpu, opts);
    expect_ok(&r);
    run_result_free(&r);
    opts[7] = "cuda";
    r = train_images(gpu, opts);
    expect_ok(&r);
    run_result_free(&r);
    double want = metric_of(cpu, 1, "train", "loss"), got = metric_of(gpu, 1, "train", "loss");
    cr_assert(fabs(got - want) <= 1e-5 * want, "train loss %.9g on the GPU, %.9g on the CPU",
              got, want);
    cr_assert_eq(metric_of(gpu, 1, "train", "accuracy"), metric_of(cpu, 1, "train", "accuracy"));
    ckpt(a, gpu);
    ckpt(b, cpu);
    cr_assert_lt(params_rel_diff(a, b), 1e-5);
}

/* scorch-train with extra options fails with a message holding `want`. */
static void expect_refused(const char *const *extra, const char *want)
{
    char dir[DIR];
    temp_dir(dir, sizeof dir);
    run_result r = train_synthetic(dir, "1", extra, NULL);
    cr_assert_neq(r.status, 0, "accepted: %s", extra[0]);
    cr_assert(strstr(r.err, want), "%s: stderr lacks \"%s\":\n%s", extra[0], want, r.err);
    run_result_free(&r);
}

Test(mix, refusals_name_the_option)
{
    expect_refused((const char *[]){"--cutmix", "1", NULL},
                   "--cutmix cuts boxes from images [C, H, W]; the dataset's input is [16]");
    expect_refused((const char *[]){"--mixup", "0.2", "--mix-prob", "1.5", NULL},
                   "--mix-prob 1.5 is outside [0, 1]");
    expect_refused((const char *[]){"--mix-prob", "0.5", NULL},
                   "--mix-prob 0.5 is read only with --mixup or --cutmix");
    expect_refused((const char *[]){"--mixup", "0.2", "--mix-switch-prob", "0.3", NULL},
                   "--mix-switch-prob 0.3 picks between Mixup and CutMix");
    /* A model of fewer classes than the targets' is refused when it is
     * made (the dataset's spec gives the count); a model that does not
     * read it meets mix's own check (tests/unit/host/test_mix.c). */
    expect_refused((const char *[]){"--mixup", "0.2", "--model-args", "hidden=8,classes=3",
                                    NULL},
                   "model arg classes=3, but the dataset's targets have 4 classes");
}
