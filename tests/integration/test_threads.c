/* Integration tests: the compute threads --threads 0 picks for the
 * model's size, and the log line that says so (docs/cli.md, Threads). */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <criterion/criterion.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

enum { PATH = 4096, DIR_LEN = 64 };

/* One train step of an MLP of `hidden` widths on 16 synthetic features,
 * batch `batch`, plus --threads when `threads` is not NULL. */
static run_result train(const char *hidden, const char *batch, const char *threads)
{
    char scorch_train[PATH], mlp[PATH], synthetic[PATH], dir[DIR_LEN], run_dir[PATH];
    build_path(scorch_train, PATH, "host/scorch-train");
    build_path(mlp, PATH, "plugins/mlp.so");
    build_path(synthetic, PATH, "plugins/synthetic.so");
    snprintf(run_dir, sizeof run_dir, "%s/run", temp_dir(dir, sizeof dir));
    const char *argv[] = {scorch_train, "--model", mlp, "--model-args", hidden,
                          "--dataset", synthetic,
                          "--dataset-args", "classes=10,train_size=512,valid_size=0,test_size=0",
                          "--batch-size", batch, "--epochs", "1", "--max-train-iterations", "1",
                          "--run-dir", run_dir, "--no-tensorboard",
                          threads ? "--threads" : NULL, threads, NULL};
    run_result r = run_program(argv, NULL);
    cr_assert_eq(r.status, 0, "exit %d\nstdout:\n%s\nstderr:\n%s", r.status, r.out, r.err);
    return r;
}

static void expect_line(const run_result *r, const char *line)
{
    cr_assert(strstr(r->out, line), "no '%s' in:\n%s", line, r->out);
}

/* 16-32-10: 1,738 FLOPs a sample (biases and ReLU included), 111K a batch
 * of 64. */
Test(threads, a_small_model_computes_on_one_thread)
{
    run_result r = train("hidden=32", "64", NULL);
    expect_line(&r, "compute threads: 1 (--threads 0: one, as the forward pass of a batch is "
                    "0.000111 GFLOPs, below 0.5;");
    run_result_free(&r);
}

/* 16-1024-1024-10: 2.15M FLOPs a sample, 1.1G a batch of 512. */
Test(threads, a_large_model_computes_on_every_core)
{
    cpu_set_t set;
    cr_assert_eq(sched_getaffinity(0, sizeof set, &set), 0);
    char line[128];
    snprintf(line, sizeof line, "compute threads: %d (--threads 0: every core, as the forward "
             "pass of a batch is 1.1 GFLOPs, not below 0.5;", CPU_COUNT(&set));
    run_result r = train("hidden=1024:1024", "512", NULL);
    expect_line(&r, line);
    run_result_free(&r);
}

Test(threads, a_thread_count_given_is_kept)
{
    run_result r = train("hidden=1024:1024", "512", "1");
    expect_line(&r, "compute threads: 1 (--threads)");
    run_result_free(&r);
}
