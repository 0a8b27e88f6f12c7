/* Integration tests: what the real scorch-train does to and about the
 * emulated GPUs of tests/cudaemu (gpu_emulator builds only): which GPUs a
 * run makes a CUDA context on, bit-identical reruns, and how a NCCL
 * start-up that hangs and a GPU that faults end a run. Each test sets the
 * emulator's environment (CUDAEMU_*) in its own process, which the
 * scorch-train it runs inherits, and a GPU lock directory of its own
 * (emulated GPUs are no other process's). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

#define FASHION_DIR "/usr/share/datasets/fashion-mnist"

enum { PATH = 4096, DIR = 64, MAX_ARGS = 64 };

static void expect_ok(const run_result *r)
{
    cr_assert_eq(r->status, 0, "exit %d\nstdout:\n%s\nstderr:\n%s", r->status, r->out, r->err);
}

static void expect_failed_saying(const run_result *r, const char *part)
{
    cr_assert_neq(r->status, 0, "exit 0\nstdout:\n%s\nstderr:\n%s", r->out, r->err);
    cr_assert(strstr(r->err, part), "stderr lacks '%s':\n%s", part, r->err);
}

static int append(const char **argv, int n, const char *const *more)
{
    for (; more && *more && n < MAX_ARGS - 1; more++)
        argv[n++] = *more;
    argv[n] = NULL;
    return n;
}

/* scorch-train: a few steps of a small MLP on the synthetic blobs into a
 * fresh run directory, plus `extra`. */
static run_result train_mlp(const char *const *extra)
{
    char train[PATH], mlp[PATH], synthetic[PATH], dir[DIR];
    build_path(train, PATH, "host/scorch-train");
    build_path(mlp, PATH, "plugins/mlp.so");
    build_path(synthetic, PATH, "plugins/synthetic.so");
    temp_dir(dir, sizeof dir);
    const char *argv[MAX_ARGS];
    int n = append(argv, 0, (const char *const[]){
        train, "--model", mlp, "--model-args", "hidden=16", "--dataset", synthetic,
        "--dataset-path", "unused", "--batch-size", "32", "--epochs", "1",
        "--max-train-iterations", "6", "--max-valid-iterations", "2", "--run-dir", dir,
        "--seed", "7", NULL});
    append(argv, n, extra);
    return run_program(argv, NULL);
}

/* scorch-train: a few steps of a narrow CNN on Fashion-MNIST on GPU 0,
 * into run_dir. */
static run_result train_cnn(const char *run_dir)
{
    char train[PATH], cnn[PATH], fashion[PATH];
    build_path(train, PATH, "host/scorch-train");
    build_path(cnn, PATH, "plugins/cnn.so");
    build_path(fashion, PATH, "plugins/fashion_mnist.so");
    return run_program((const char *[]){train, "--model", cnn, "--model-args",
                                        "channels=4:8,hidden=16", "--dataset", fashion,
                                        "--dataset-path", FASHION_DIR, "--batch-size", "16",
                                        "--epochs", "1", "--max-train-iterations", "4",
                                        "--max-valid-iterations", "1", "--max-test-iterations",
                                        "1", "--run-dir", run_dir, "--seed", "3", "--device",
                                        "cuda", NULL},
                       NULL);
}

static double seconds_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

TestSuite(gpu_runs, .init = use_own_gpu_locks);

/* The contexts context_hook printed at `point`: "0x2" for cuda:1 alone. */
static void expect_contexts(const run_result *r, const char *point, const char *mask)
{
    char line[96];
    snprintf(line, sizeof line, "contexts at %s on rank 0: %s\n", point, mask);
    cr_expect(strstr(r->err, line), "no '%.*s' in:\n%s", (int)strlen(line) - 1, line, r->err);
}

Test(gpu_runs, a_run_on_cuda_1_makes_a_context_on_gpu_1_alone)
{
    setenv("CUDAEMU_DEVICES", "2", 1);
    run_result r = train_mlp((const char *const[]){"--device", "cuda:1", "--hooks",
                                                   getenv("SCORCH_CONTEXT_HOOK"), NULL});
    expect_ok(&r);
    expect_contexts(&r, "train_begin", "0x2");
    expect_contexts(&r, "train_end", "0x2");
    run_result_free(&r);
}

/* Both GPUs are as free: auto takes the first, having read their free
 * memory through NVML without a context on either. */
Test(gpu_runs, auto_makes_a_context_on_the_gpu_it_takes_alone)
{
    setenv("CUDAEMU_DEVICES", "2", 1);
    run_result r = train_mlp((const char *const[]){"--device", "auto", "--hooks",
                                                   getenv("SCORCH_CONTEXT_HOOK"), NULL});
    expect_ok(&r);
    expect_contexts(&r, "train_end", "0x1");
    run_result_free(&r);
}

/* The emulated cuDNN's non-deterministic algorithms really vary (their
 * sums in a random order each call): only deterministic ones give the
 * same weights twice. */
Test(gpu_runs, two_identical_cnn_runs_give_bit_identical_weights)
{
    char a[DIR], b[DIR], last_a[PATH], last_b[PATH];
    temp_dir(a, sizeof a);
    temp_dir(b, sizeof b);
    for (int i = 0; i < 2; i++) {
        run_result r = train_cnn(i == 0 ? a : b);
        expect_ok(&r);
        run_result_free(&r);
    }
    snprintf(last_a, PATH, "%s/checkpoints/last.ckpt", a);
    snprintf(last_b, PATH, "%s/checkpoints/last.ckpt", b);
    cr_assert(same_params(last_a, last_b), "two runs of the same training differ");
}

/* Replica 1 never completes ncclCommInitRank: the job ends at the
 * deadline, saying so, where it used to wait for ever. */
Test(gpu_runs, a_replica_whose_nccl_start_up_hangs_ends_the_job_at_the_timeout)
{
    setenv("CUDAEMU_DEVICES", "2", 1);
    setenv("CUDAEMU_NCCL_FAULT", "hang_init:1", 1);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    run_result r = train_mlp(
        (const char *const[]){"--device", "parallel", "--collective-timeout", "2", NULL});
    expect_failed_saying(&r, "NCCL's start-up (ncclCommInitRankConfig) did not complete "
                             "within 2 s");
    cr_expect_lt(seconds_since(&t0), 30, "the job took %.0f s to end", seconds_since(&t0));
    run_result_free(&r);
}

/* The 2nd Adam update faults as an illegal address does: the error shows
 * at a later call, which must not be blamed for it. */
Test(gpu_runs, a_kernel_fault_is_reported_as_the_gpus_not_the_next_calls)
{
    setenv("CUDAEMU_FAULT", "adam_kernel:2", 1);
    run_result r = train_mlp((const char *const[]){"--device", "cuda", NULL});
    expect_failed_saying(&r, "failed in earlier asynchronous work: ");
    cr_expect(strstr(r.err, "The error is sticky"), "%s", r.err);
    cr_expect(!strstr(r.err, "cannot launch"), "a launch was blamed:\n%s", r.err);
    run_result_free(&r);
}

/* A replica's gradient allreduce faults on its GPU: the NCCL wait reports
 * the CUDA error at once instead of polling until the collective
 * timeout. */
Test(gpu_runs, a_gpu_fault_under_replicas_ends_the_job_at_once)
{
    setenv("CUDAEMU_DEVICES", "2", 1);
    setenv("CUDAEMU_FAULT", "ncclAllReduce:3", 1);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    run_result r = train_mlp(
        (const char *const[]){"--device", "parallel", "--collective-timeout", "60", NULL});
    expect_failed_saying(&r, "failed in earlier asynchronous work: ");
    cr_expect(!strstr(r.err, "did not complete within"), "it timed out:\n%s", r.err);
    cr_expect_lt(seconds_since(&t0), 30, "the job took %.0f s to end", seconds_since(&t0));
    run_result_free(&r);
}
