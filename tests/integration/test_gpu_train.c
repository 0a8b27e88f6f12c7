/* Integration tests: scorch-train on a GPU, run by the real binaries.
 * In the gpu_emulator build the GPU is the CPU emulation of tests/cudaemu
 * and these run in every CI run; on a machine with a real GPU the same
 * tests run against the real libraries; elsewhere they report themselves
 * skipped. Each trains 20 steps of a narrow model on Fashion-MNIST. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "scorch/device.h"

#define FASHION_DIR "/usr/share/datasets/fashion-mnist"

enum { PATH = 4096, DIR = 64, MAX_ARGS = 48 };

/* How close a GPU run comes to the CPU backend's (docs/cuda-emulation.md).
 * fp32 differs from the CPU only in the order of float sums, and in
 * conv algorithms (Winograd's transforms on the CPU) that round otherwise:
 * after 5 steps of SGD with momentum, whose weight differences are the
 * learning rate times the gradients', the weights agree within 1e-5
 * relative. Not with Adam: it steps each weight by about the learning
 * rate whatever its gradient's size, so a gradient within rounding of 0
 * (an input a relu zeroed in most of the batch) steps either way by chance
 * (a change of the CPU's rounding alone moved one of the cnn's 25088 fc1
 * weights 7e-5 of the largest). Nor after 20 steps: by then a
 * ReLU or max-pool input that lies within rounding of its threshold has
 * gone one way on one device and the other way on the other, and the
 * runs part by the size of a step (resnet: 6e-4 of a tensor's largest
 * weight); the mean train loss still agrees. tf32 rounds the inputs of
 * matrix products and convolutions to 10 mantissa bits and bf16 to 7:
 * Adam turns those differences into weight differences of the size of
 * its steps, so they are held to the train loss over 20 steps. */
typedef struct tolerance {
    const char *precision;
    double weights; /* relative to each tensor's largest magnitude; 0: not checked */
    double loss;    /* relative, the epoch's mean train loss */
    const char *steps; /* train steps */
    bool sgd;          /* SGD, lr 0.05, momentum 0.9; else the models' Adam */
} tolerance;

static const tolerance fp32 = {"fp32", 1e-5, 1e-5, "5", true};
static const tolerance tf32 = {"tf32", 0, 1e-3, "20", false};
static const tolerance bf16 = {"bf16", 0, 5e-3, "20", false};

typedef struct model {
    const char *plugin, *args;
} model;

static const model mlp = {"plugins/mlp.so", "hidden=64"};
static const model cnn = {"plugins/cnn.so", "channels=8:16,hidden=32"};
static const model resnet = {"plugins/resnet.so",
                             "stem=8,channels=8:16,blocks=1,se=true,reduction=4"};

static void expect_ok(run_result *r)
{
    cr_assert_eq(r->status, 0, "exit %d\nstdout:\n%s\nstderr:\n%s", r->status, r->out, r->err);
}

/* scorch-train with m for 20 steps of 32 into run_dir, plus `extra`
 * (NULL-terminated). */
static run_result train(const model *m, const char *run_dir, const char *const *extra)
{
    char exe[PATH], plugin[PATH], data[PATH];
    build_path(exe, PATH, "host/scorch-train");
    build_path(plugin, PATH, m->plugin);
    build_path(data, PATH, "plugins/fashion_mnist.so");
    const char *argv[MAX_ARGS] = {exe, "--model", plugin, "--model-args", m->args,
                                  "--dataset", data, "--dataset-path", FASHION_DIR,
                                  "--batch-size", "32", "--epochs", "1",
                                  "--max-train-iterations", "20", "--max-valid-iterations", "2",
                                  "--max-test-iterations", "1", "--run-dir", run_dir,
                                  "--seed", "11", "--workers", "1"};
    int n = 0;
    while (argv[n])
        n++;
    for (; extra && *extra && n < MAX_ARGS - 1; extra++)
        argv[n++] = *extra;
    argv[n] = NULL;
    return run_program(argv, NULL);
}

TestSuite(gpu_train, .init = use_own_gpu_locks);

/* A finished run of m into a fresh directory, which dir receives. */
static void trained(const model *m, char *dir, const char *const *extra)
{
    temp_dir(dir, DIR);
    run_result r = train(m, dir, extra);
    expect_ok(&r);
    run_result_free(&r);
}

static void last_ckpt(char *buf, const char *dir)
{
    snprintf(buf, PATH, "%s/checkpoints/last.ckpt", dir);
}

/* The CUDA graph replays exactly the kernels the eager step runs: the
 * weights after 20 steps and every logged figure agree bit for bit. */
static void expect_graphs_change_nothing(const model *m)
{
    char on[DIR], off[DIR], a[PATH], b[PATH];
    trained(m, on, (const char *[]){"--device", "cuda", "--cuda-graphs", "on", NULL});
    trained(m, off, (const char *[]){"--device", "cuda", "--cuda-graphs", "off", NULL});
    last_ckpt(a, on);
    last_ckpt(b, off);
    cr_expect(same_params(a, b), "%s: graphs on and off disagree", m->plugin);
    cr_expect_eq(metric_of(on, 1, "train", "loss"), metric_of(off, 1, "train", "loss"));
    cr_expect_eq(metric_of(on, 1, "valid", "loss"), metric_of(off, 1, "valid", "loss"));
}

Test(gpu_train, mlp_graphs_on_and_off_agree_bit_for_bit) { expect_graphs_change_nothing(&mlp); }
Test(gpu_train, cnn_graphs_on_and_off_agree_bit_for_bit) { expect_graphs_change_nothing(&cnn); }
Test(gpu_train, resnet_graphs_on_and_off_agree_bit_for_bit, .timeout = 600)
{
    expect_graphs_change_nothing(&resnet);
}

/* The GPU run in tol's precision against the CPU run. */
static void expect_near_cpu(const model *m, const tolerance *tol)
{
    char gpu[DIR], cpu[DIR], a[PATH], b[PATH];
    /* the optimizer's arguments end the lists, or are cut off by a NULL */
    const char *sgd = tol->sgd ? "--optimizer" : NULL;
    trained(m, gpu, (const char *[]){"--device", "cuda", "--precision", tol->precision,
                                     "--max-train-iterations", tol->steps, sgd, "sgd", "--lr",
                                     "0.05", "--momentum", "0.9", NULL});
    /* Two threads, as the tolerances were measured (the CPU's sums follow
     * its thread count). */
    trained(m, cpu, (const char *[]){"--device", "cpu", "--threads", "2",
                                     "--max-train-iterations", tol->steps, sgd, "sgd", "--lr",
                                     "0.05", "--momentum", "0.9", NULL});
    last_ckpt(a, gpu);
    last_ckpt(b, cpu);
    double diff = params_rel_diff(a, b);
    cr_expect(tol->weights == 0 || diff <= tol->weights,
              "%s %s: weights differ from the CPU's by %g (allowed %g)", m->plugin,
              tol->precision, diff, tol->weights);
    double loss = metric_of(gpu, 1, "train", "loss"), ref = metric_of(cpu, 1, "train", "loss");
    cr_expect_leq(fabs(loss - ref), tol->loss * ref,
                  "%s %s: train loss %.7g against the CPU's %.7g (allowed %g relative)",
                  m->plugin, tol->precision, loss, ref, tol->loss);
}

Test(gpu_train, mlp_fp32_matches_the_cpu) { expect_near_cpu(&mlp, &fp32); }
Test(gpu_train, cnn_fp32_matches_the_cpu) { expect_near_cpu(&cnn, &fp32); }
Test(gpu_train, resnet_fp32_matches_the_cpu, .timeout = 600) { expect_near_cpu(&resnet, &fp32); }
Test(gpu_train, cnn_tf32_within_tolerance) { expect_near_cpu(&cnn, &tf32); }
Test(gpu_train, cnn_bf16_within_tolerance) { expect_near_cpu(&cnn, &bf16); }
Test(gpu_train, mlp_bf16_within_tolerance) { expect_near_cpu(&mlp, &bf16); }

/* Two epochs in one go on `second`, against epoch 1 on `first` resumed
 * on `second`: checkpoints carry across devices, and the resumed run
 * lands within fp32 tolerance of the uninterrupted one. */
static void expect_resume_across(const char *first, const char *second)
{
    char whole[DIR], split[DIR], a[PATH], b[PATH];
    const char *const two[] = {"--device", second, "--epochs", "2", NULL};
    trained(&cnn, whole, two);
    trained(&cnn, split, (const char *[]){"--device", first, NULL});
    run_result r = train(&cnn, split,
                         (const char *[]){"--device", second, "--epochs", "2", "--resume",
                                          "--resume-anyway", NULL});
    expect_ok(&r);
    run_result_free(&r);
    last_ckpt(a, split);
    last_ckpt(b, whole);
    double diff = params_rel_diff(a, b);
    cr_expect_leq(diff, 10 * fp32.weights, "resumed %s -> %s: weights differ by %g", first,
                  second, diff);
}

Test(gpu_train, checkpoint_from_the_gpu_resumes_on_the_cpu) { expect_resume_across("cuda", "cpu"); }
Test(gpu_train, checkpoint_from_the_cpu_resumes_on_the_gpu) { expect_resume_across("cpu", "cuda"); }
