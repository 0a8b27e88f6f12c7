/* Integration tests of data parallelism: the real scorch-train with 2
 * ranks against one process. SCORCH_DIST_LAUNCH says how the ranks run:
 * "mpirun" (the real mpirun, on however many cores there are; skipped,
 * saying so, where mpirun is not installed) or "threads" (replicas in one
 * process, --device cpu --replicas N). SCORCH_DIST_DEVICE=cuda runs the
 * same tests on GPUs (the emulated ones in the gpu_emulator build): ranks
 * with --device distributed_dataparallel, replicas with --device parallel,
 * gradients summed by NCCL, against one process on --device cuda. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "scorch/device.h"
#include "scorch/serialize.h"

enum { PATH = 4096, DIR = 64, MAX_ARGS = 96 };

typedef struct bins {
    char train[PATH], mlp[PATH], synthetic[PATH], hook[PATH], mpirun[PATH];
} bins;

static bool replicas_mode(void)
{
    const char *launch = getenv("SCORCH_DIST_LAUNCH");
    return launch && strcmp(launch, "threads") == 0;
}

static bool gpu_mode(void)
{
    const char *device = getenv("SCORCH_DIST_DEVICE");
    return device && strcmp(device, "cuda") == 0;
}

static bins bin(void)
{
    bins p;
    build_path(p.train, PATH, "host/scorch-train");
    build_path(p.mlp, PATH, "plugins/mlp.so");
    build_path(p.synthetic, PATH, "plugins/synthetic.so");
    snprintf(p.hook, PATH, "%s", getenv("SCORCH_RANK_FAULT_HOOK"));
    find_on_path("mpirun", p.mpirun, PATH);
    if (!p.mpirun[0] && !replicas_mode())
        cr_skip_test("mpirun is not on PATH: these tests need Open MPI's (openmpi-bin)");
    if (gpu_mode() && sc_cuda_device_count() < 2)
        cr_skip_test("these tests need 2 GPUs (%d visible)", sc_cuda_device_count());
    if (gpu_mode())
        use_own_gpu_locks();
    return p;
}

static void only_under_mpirun(const char *why)
{
    if (replicas_mode())
        cr_skip_test("replicas are threads of one process: %s", why);
}

static int append(const char **argv, int n, const char *const *more)
{
    return argv_append(argv, n, MAX_ARGS, more);
}

/* `program` as `np` ranks: under mpirun, or with np replicas (then `env`
 * goes into this test's own environment, which the program inherits;
 * each test runs in a process of its own). */
static int rank_args(const char **argv, const bins *p, const char *program, const char *np,
                     const char *const *env)
{
    if (!replicas_mode())
        return append(argv, mpirun_argv(argv, MAX_ARGS, p->mpirun, np, env),
                      (const char *const[]){program, gpu_mode() ? "--device" : NULL,
                                            "distributed_dataparallel", NULL});
    for (; env && *env; env++) {
        char name[64];
        size_t len = strcspn(*env, "=");
        snprintf(name, sizeof name, "%.*s", (int)len, *env);
        setenv(name, *env + len + ((*env)[len] == '='), 1);
    }
    return append(argv, 0, (const char *const[]){program, "--device",
                                                 gpu_mode() ? "parallel" : "cpu", "--replicas",
                                                 np, NULL});
}

/* scorch-train's arguments on the synthetic blobs with a small MLP. */
static int train_args(const char **argv, int n, const bins *p, const char *run_dir,
                      const char *epochs, const char *batch)
{
    return append(argv, n, (const char *const[]){
        "--model", p->mlp, "--model-args", "hidden=32", "--dataset", p->synthetic,
        "--dataset-path", "unused", "--batch-size", batch, "--epochs", epochs, "--run-dir",
        run_dir, "--workers", "2", "--seed", "7", "--collective-timeout", "60", NULL});
}

/* `np` ranks, each with batch `batch`, plus extra arguments and env. */
static run_result train_ranks(const char *np, const char *run_dir, const char *epochs,
                              const char *batch, const char *const *extra,
                              const char *const *env)
{
    bins p = bin();
    const char *argv[MAX_ARGS];
    int n = rank_args(argv, &p, p.train, np, env);
    n = train_args(argv, n, &p, run_dir, epochs, batch);
    append(argv, n, extra);
    return run_program(argv, NULL);
}

static run_result train_alone(const char *run_dir, const char *epochs, const char *batch,
                              const char *const *extra)
{
    bins p = bin();
    const char *argv[MAX_ARGS];
    int n = append(argv, 0,
                   (const char *const[]){p.train, "--device", gpu_mode() ? "cuda" : "cpu", NULL});
    append(argv, train_args(argv, n, &p, run_dir, epochs, batch), extra);
    return run_program(argv, NULL);
}

static void expect_ok(run_result *r)
{
    cr_assert_eq(r->status, 0, "exit %d\nstdout:\n%s\nstderr:\n%s", r->status, r->out, r->err);
}

static void expect_ok_and_free(run_result r)
{
    expect_ok(&r);
    run_result_free(&r);
}

/* 2 ranks with rank_fault_hook armed: rank 1 does `how` once 5 steps are
 * done (rank_fault_hook.c). */
static run_result train_with_fault(const char *dir, const char *epochs, const char *how)
{
    char fault[64];
    snprintf(fault, sizeof fault, "SCORCH_TEST_FAULT=%s", how);
    return train_ranks("2", dir, epochs, "32", (const char *const[]){"--hooks", bin().hook, NULL},
                       (const char *const[]){"SCORCH_TEST_FAULT_RANK=1",
                                             "SCORCH_TEST_FAULT_STEP=5", fault, NULL});
}

static void checkpoint_of(char *buf, const char *dir, const char *alias)
{
    snprintf(buf, PATH, "%s/checkpoints/%s.ckpt", dir, alias);
}

/* The printed summary of (epoch, phase), from "loss" to the "|". */
static void summary_line(const char *out, int epoch, int epochs, const char *phase,
                         char *buf, size_t size)
{
    char want[64];
    snprintf(want, sizeof want, "epoch %d/%d %-5s loss ", epoch, epochs, phase);
    const char *line = strstr(out, want);
    cr_assert(line, "no '%s' line in:\n%s", want, out);
    const char *bar = strchr(line, '|');
    cr_assert(bar, "%s", line);
    snprintf(buf, size, "%.*s", (int)(bar - line), line);
    cr_assert(!strstr(bar, want), "'%s' printed twice (by more than rank 0?)", want);
}

Test(dist, two_ranks_train_like_one_process_with_the_global_batch)
{
    char alone[DIR], ranks[DIR], a[PATH], b[PATH], line_a[256], line_b[256];
    temp_dir(alone, sizeof alone);
    temp_dir(ranks, sizeof ranks);
    run_result one = train_alone(alone, "3", "64", NULL);
    expect_ok(&one);
    const char *const by_name[] = {"--device", "distributed_dataparallel", NULL};
    run_result two = train_ranks("2", ranks, "3", "32", replicas_mode() ? NULL : by_name, NULL);
    expect_ok(&two);
    cr_assert(strstr(two.out, replicas_mode() ? "2 replicas (threads" : "2 ranks on 1 node"),
              "no data-parallel line:\n%s", two.out);
    for (int epoch = 1; epoch <= 3; epoch++) {
        summary_line(one.out, epoch, 3, "valid", line_a, sizeof line_a);
        summary_line(two.out, epoch, 3, "valid", line_b, sizeof line_b);
        cr_assert_str_eq(line_a, line_b, "epoch %d", epoch);
        cr_assert_eq(metric_of(alone, epoch, "valid", "accuracy"),
                     metric_of(ranks, epoch, "valid", "accuracy"));
        cr_assert_eq(metric_of(alone, epoch, "valid", "samples"),
                     metric_of(ranks, epoch, "valid", "samples"), "a sample counted twice");
    }
    checkpoint_of(a, alone, "last");
    checkpoint_of(b, ranks, "last");
    double diff = params_rel_diff(a, b);
    cr_assert_lt(diff, 1e-5, "weights differ by %g relative", diff);
    run_result_free(&one);
    run_result_free(&two);
}

/* One bucket per parameter (the smallest --bucket-mb), a frozen layer that
 * never reports its gradient ready: the same training all the same. */
Test(dist, many_buckets_and_a_frozen_layer_train_like_one_process)
{
    char alone[DIR], ranks[DIR], a[PATH], b[PATH];
    temp_dir(alone, sizeof alone);
    temp_dir(ranks, sizeof ranks);
    const char *model[] = {"--model-args", "hidden=32:16,freeze=fc2", "--bucket-mb", "1e-6",
                           NULL};
    expect_ok_and_free(train_alone(alone, "2", "64", model));
    expect_ok_and_free(train_ranks("2", ranks, "2", "32", model, NULL));
    checkpoint_of(a, alone, "last");
    checkpoint_of(b, ranks, "last");
    cr_assert_lt(params_rel_diff(a, b), 1e-5);
}

/* Batch norm's running statistics are each rank's own while training; an
 * eval pass uses rank 0's on every rank, as the checkpoint does. */
Test(dist, ranks_evaluate_rank_0s_model)
{
    bins p = bin();
    char dir[DIR], last[PATH], test[PATH];
    temp_dir(dir, sizeof dir);
    build_path(test, PATH, "host/scorch-test");
    const char *argv[MAX_ARGS];
    int n = rank_args(argv, &p, p.train, "2", NULL);
    char cnn[PATH], fashion[PATH];
    build_path(cnn, PATH, "plugins/cnn.so");
    build_path(fashion, PATH, "plugins/fashion_mnist.so");
    append(argv, n, (const char *const[]){
        "--model", cnn, "--model-args", "channels=8:16,hidden=32", "--dataset",
        fashion, "--dataset-path", "/usr/share/datasets/fashion-mnist", "--epochs", "1",
        "--batch-size", "32", "--max-train-iterations", "10", "--max-valid-iterations", "4",
        "--max-test-iterations", "1", "--run-dir", dir, NULL});
    expect_ok_and_free(run_program(argv, NULL));
    checkpoint_of(last, dir, "last");
    /* 4 batches of 32 on each of 2 ranks: the split's first 256 samples. */
    run_result r = run_program((const char *[]){test, "--checkpoint", last, "--split", "valid",
                                                "--batch-size", "64", "--max-test-iterations",
                                                "4", NULL},
                               NULL);
    expect_ok(&r);
    const char *loss = strstr(r.out, "valid  loss ");
    cr_assert(loss, "%s", r.out);
    cr_assert_float_eq(strtod(loss + 12, NULL), metric_of(dir, 1, "valid", "loss"), 6e-5,
                       "valid loss under 2 ranks is not rank 0's model's:\n%s", r.out);
    run_result_free(&r);
}

Test(dist, accumulating_micro_batches_is_one_larger_batch)
{
    char big[DIR], micro[DIR], ranks[DIR], a[PATH], b[PATH];
    temp_dir(big, sizeof big);
    temp_dir(micro, sizeof micro);
    temp_dir(ranks, sizeof ranks);
    expect_ok_and_free(train_alone(big, "2", "64", NULL));
    expect_ok_and_free(train_alone(micro, "2", "32", (const char *const[]){"--accumulate", "2",
                                                                          NULL}));
    expect_ok_and_free(train_ranks("2", ranks, "2", "16",
                                   (const char *const[]){"--accumulate", "2", NULL}, NULL));
    checkpoint_of(a, big, "last");
    checkpoint_of(b, micro, "last");
    cr_assert_lt(params_rel_diff(a, b), 1e-5, "one process, --accumulate 2");
    checkpoint_of(b, ranks, "last");
    cr_assert_lt(params_rel_diff(a, b), 1e-5, "2 ranks, --accumulate 2");
    cr_assert_eq(metric_of(big, 2, "train", "step"), metric_of(ranks, 2, "train", "step"),
                 "optimizer steps");
}

Test(dist, resume_under_two_ranks_is_exact)
{
    char straight[DIR], split[DIR], a[PATH], b[PATH];
    temp_dir(straight, sizeof straight);
    temp_dir(split, sizeof split);
    expect_ok_and_free(train_ranks("2", straight, "2", "32", NULL, NULL));
    expect_ok_and_free(train_ranks("2", split, "1", "32", NULL, NULL));
    run_result r = train_ranks("2", split, "2", "32", (const char *const[]){"--resume", NULL},
                               NULL);
    expect_ok(&r);
    cr_assert(strstr(r.out, "resumed from"), "%s", r.out);
    run_result_free(&r);
    cr_assert_eq(metric_of(straight, 2, "valid", "loss"), metric_of(split, 2, "valid", "loss"));
    checkpoint_of(a, straight, "last");
    checkpoint_of(b, split, "last");
    cr_assert(same_params(a, b), "weights differ after resuming at an epoch boundary");
}

Test(dist, resume_mid_epoch_under_two_ranks_is_exact)
{
    char straight[DIR], split[DIR], a[PATH], b[PATH];
    temp_dir(straight, sizeof straight);
    temp_dir(split, sizeof split);
    expect_ok_and_free(train_ranks("2", straight, "2", "32", NULL, NULL));
    /* 32 steps per epoch: stop 8 steps into epoch 2, as a kill would. */
    const char *stop_hook = getenv("SCORCH_STOP_HOOK");
    expect_ok_and_free(train_ranks("2", split, "2", "32",
                                   (const char *const[]){"--hooks", stop_hook, NULL},
                                   (const char *const[]){"SCORCH_TEST_STOP_AT_STEP=40", NULL}));
    run_result r = train_ranks("2", split, "2", "32", (const char *const[]){"--resume", NULL},
                               NULL);
    expect_ok(&r);
    cr_assert(strstr(r.out, "batch 8"), "did not resume mid-epoch:\n%s", r.out);
    run_result_free(&r);
    cr_assert_eq(metric_of(straight, 2, "train", "samples"),
                 metric_of(split, 2, "train", "samples"));
    cr_assert_float_eq(metric_of(straight, 2, "train", "loss"),
                       metric_of(split, 2, "train", "loss"), 1e-12);
    cr_assert_eq(metric_of(straight, 2, "valid", "loss"), metric_of(split, 2, "valid", "loss"));
    checkpoint_of(a, straight, "last");
    checkpoint_of(b, split, "last");
    cr_assert(same_params(a, b), "weights differ after a mid-epoch resume");
}

Test(dist, a_run_saved_by_two_ranks_resumes_in_one_process)
{
    char dir[DIR];
    temp_dir(dir, sizeof dir);
    expect_ok_and_free(train_ranks("2", dir, "2", "32",
                                   (const char *const[]){"--hooks", getenv("SCORCH_STOP_HOOK"),
                                                         NULL},
                                   (const char *const[]){"SCORCH_TEST_STOP_AT_STEP=40", NULL}));
    /* The global batch changes: not the same run, so only when asked. */
    run_result r = train_alone(dir, "2", "32", (const char *const[]){"--resume", NULL});
    cr_assert_eq(r.status, 1, "%s", r.err);
    cr_assert(strstr(r.err, "ranks (world size): checkpoint has 2, now 1"), "%s", r.err);
    run_result_free(&r);
    r = train_alone(dir, "2", "32", (const char *const[]){"--resume", "--resume-anyway", NULL});
    expect_ok(&r);
    /* Batch 8 of 2 ranks is batch 16 of one: the same samples are done. */
    cr_assert(strstr(r.err, "saved by 2 ranks at batch 8") && strstr(r.err, "batch 16 (0 "),
              "%s", r.err);
    cr_assert_eq(metric_of(dir, 2, "train", "samples"), 2048);
    run_result_free(&r);
}

Test(dist, ranks_that_disagree_stop_naming_the_difference)
{
    only_under_mpirun("they share one command line");
    bins p = bin();
    char dir[DIR];
    temp_dir(dir, sizeof dir);
    /* MPMD: rank 0 and rank 1 get different model args. */
    const char *argv[MAX_ARGS];
    int n = rank_args(argv, &p, p.train, "1", NULL);
    n = train_args(argv, n, &p, dir, "1", "32");
    n = append(argv, n, (const char *const[]){":", "-np", "1", p.train, NULL});
    n = train_args(argv, n, &p, dir, "1", "32");
    append(argv, n, (const char *const[]){"--model-args", "hidden=16", NULL});
    run_result r = run_program(argv, NULL);
    cr_assert_neq(r.status, 0, "%s", r.out);
    cr_assert(strstr(r.err, "[rank 0] scorch-train: rank 1 failed: the ranks disagree: rank 1 "
                            "has 'option model-args = hidden=16', rank 0 has 'option "
                            "model-args = hidden=32'"),
              "%s", r.err);
    cr_assert(!strstr(r.err, "did not complete within"), "a collective timed out:\n%s", r.err);
    run_result_free(&r);
}

Test(dist, a_failing_rank_stops_every_rank_naming_it)
{
    char dir[DIR];
    temp_dir(dir, sizeof dir);
    run_result r = train_with_fault(dir, "2", "error");
    cr_assert_neq(r.status, 0, "%s", r.out);
    cr_assert(strstr(r.err, "[rank 0] scorch-train: rank 1 failed: ") &&
                  strstr(r.err, "injected fault on rank 1 at step 5"),
              "%s", r.err);
    cr_assert(!strstr(r.err, "did not complete within"), "a collective timed out:\n%s", r.err);
    cr_assert(!strstr(r.out, "epoch 1/2 train loss"), "rank 0 went on:\n%s", r.out);
    run_result_free(&r);
}

Test(dist, a_killed_rank_ends_the_job)
{
    only_under_mpirun("a signal that kills one kills them all");
    char dir[DIR];
    temp_dir(dir, sizeof dir);
    run_result r = train_with_fault(dir, "2", "kill");
    cr_assert_neq(r.status, 0, "%s", r.out);
    cr_assert(strstr(r.err, "rank 1") || strstr(r.out, "rank 1"), "stdout:\n%s\nstderr:\n%s",
              r.out, r.err);
    run_result_free(&r);
}

/* A rank that stops answering: the others give up at the deadline, and
 * the job ends with a message instead of hanging. */
Test(dist, a_hung_rank_ends_the_job_at_the_collective_timeout)
{
    char dir[DIR];
    temp_dir(dir, sizeof dir);
    run_result r = train_ranks("2", dir, "2", "32",
                               (const char *const[]){"--hooks", bin().hook,
                                                     "--collective-timeout", "2", NULL},
                               (const char *const[]){"SCORCH_TEST_FAULT_RANK=1",
                                                     "SCORCH_TEST_FAULT_STEP=5",
                                                     "SCORCH_TEST_FAULT=hang", NULL});
    cr_assert_neq(r.status, 0, "%s", r.out);
    cr_assert(strstr(r.err, "[rank 0] scorch-train: the status check did not complete within "
                            "2 s"),
              "%s", r.err);
    /* Replicas know who is missing (an MPI rank's own output says). */
    cr_assert(!replicas_mode() || strstr(r.err, "[rank 0] scorch-train: rank 1 never came to it"),
              "%s", r.err);
    run_result_free(&r);
}

Test(dist, ranks_whose_parameters_drift_apart_are_stopped)
{
    char dir[DIR];
    temp_dir(dir, sizeof dir);
    run_result r = train_with_fault(dir, "2", "lr");
    cr_assert_eq(r.status, 1, "exit %d: %s", r.status, r.err);
    cr_assert(strstr(r.err, "[rank 0] scorch-train: the ranks' parameters have diverged: "
                            "rank 1's differ from rank 0's"),
              "%s", r.err);
    cr_assert(!strstr(r.out, "epoch 2/2 train"), "epoch 2 ran:\n%s", r.out);
    run_result_free(&r);
}

/* Rank 1 asks for a checkpoint after step 5 as `how` says
 * (rank_fault_hook.c): every rank takes it. */
static void expect_checkpoint_taken_by_all(const char *how)
{
    char dir[DIR], ckpt[PATH];
    temp_dir(dir, sizeof dir);
    run_result r = train_with_fault(dir, "1", how);
    expect_ok(&r);
    snprintf(ckpt, PATH, "%s/checkpoints/epoch-0001-step-000000005.ckpt", dir);
    cr_assert(access(ckpt, R_OK) == 0, "no checkpoint at step 5:\n%s", r.out);
    run_result_free(&r);
}

Test(dist, a_checkpoint_one_rank_asks_for_is_taken_by_all)
{
    expect_checkpoint_taken_by_all("save");
}

/* SIGUSR1 that reaches one rank alone (mpirun forwards it to all). */
Test(dist, a_checkpoint_signal_to_one_rank_is_taken_by_all)
{
    expect_checkpoint_taken_by_all("sigusr1");
}

/* SIGINT on one rank alone: every rank stops after the same step, rank 0
 * writes the checkpoint and says a signal stopped the run (the ranks agree
 * on the cause), and the job ends with the exit status of a stop. */
static void expect_stop_signal_on_rank(const char *rank)
{
    char dir[DIR], ckpt[PATH], fault_rank[64];
    temp_dir(dir, sizeof dir);
    snprintf(fault_rank, sizeof fault_rank, "SCORCH_TEST_FAULT_RANK=%s", rank);
    run_result r = train_ranks("2", dir, "1", "32", (const char *const[]){"--hooks", bin().hook,
                                                                          NULL},
                               (const char *const[]){fault_rank, "SCORCH_TEST_FAULT_STEP=5",
                                                     "SCORCH_TEST_FAULT=sigint", NULL});
    cr_assert_eq(r.status, 130, "exit %d\nstdout:\n%s\nstderr:\n%s", r.status, r.out, r.err);
    cr_assert(strstr(r.out, "stopped by a signal at epoch 1, step 5"), "%s", r.out);
    snprintf(ckpt, PATH, "%s/checkpoints/epoch-0001-step-000000005.ckpt", dir);
    cr_assert(access(ckpt, R_OK) == 0, "no checkpoint at step 5:\n%s", r.out);
    run_result_free(&r);
}

Test(dist, a_stop_signal_to_rank_0_stops_every_rank_after_a_checkpoint)
{
    expect_stop_signal_on_rank("0");
}

Test(dist, a_stop_signal_to_rank_1_alone_is_reported_as_a_signal)
{
    expect_stop_signal_on_rank("1");
}

Test(dist, a_nan_loss_on_one_rank_stops_the_job)
{
    char dir[DIR];
    temp_dir(dir, sizeof dir);
    run_result r = train_ranks("2", dir, "1", "32",
                               (const char *const[]){"--dataset-args", "nan_sample=5", NULL},
                               NULL);
    cr_assert_eq(r.status, 1, "exit %d: %s", r.status, r.err);
    /* On GPUs each rank reads its steps a few behind (the step pipeline):
     * rank 0 may find the summed gradients non-finite before rank 1 has
     * read its NaN loss, and end the job first. */
    cr_assert(strstr(r.err, "[rank 0] scorch-train: ") &&
                  (strstr(r.err, "train loss is nan") ||
                   (gpu_mode() && strstr(r.err, "train gradients are not finite"))),
              "%s", r.err);
    run_result_free(&r);
}

/* ---- the distributed helpers for plugins (scorch/dist.h) ---- */

/* dist_dataset.c's line for rank `rank` of `world`, with the values its
 * collectives give: rank 0's normalisation, and the reductions of
 * rank + 1 (sum), rank (max), rank + 10 (min), (rank + 1) / 2 (float sum). */
static void expect_helper_line(const char *err, int rank, int world)
{
    char want[256], gather[64] = "";
    for (int r = 0; r < world; r++)
        snprintf(gather + strlen(gather), sizeof gather - strlen(gather), "%s%d", r ? "," : "",
                 r);
    snprintf(want, sizeof want, "dist_dataset: rank %d of %d (local %d, main %s): norm "
             "4.980469 3.164070; sum %d max %d min 10 fsum %g; gather %s\n", rank, world, rank,
             rank == 0 ? "yes" : "no", world * (world + 1) / 2, world - 1,
             0.25 * world * (world + 1), gather);
    cr_assert(strstr(err, want), "no line\n%sin:\n%s", want, err);
}

/* Arguments that train on dist_dataset, then `more`, into argv. */
static const char *const *helper_args(const char **argv, const char *const *more)
{
    int n = append(argv, 0, (const char *const[]){"--dataset", getenv("SCORCH_DIST_DATASET"),
                                                  "--model-args", "hidden=8", NULL});
    append(argv, n, more);
    return argv;
}

Test(dist, plugins_broadcast_reduce_and_gather_over_the_ranks)
{
    char dir[DIR];
    const char *argv[MAX_ARGS];
    temp_dir(dir, sizeof dir);
    run_result r = train_ranks("2", dir, "1", "32", helper_args(argv, NULL), NULL);
    expect_ok(&r);
    expect_helper_line(r.err, 0, 2);
    expect_helper_line(r.err, 1, 2);
    run_result_free(&r);
}

Test(dist, a_single_process_is_rank_0_of_1_to_plugins)
{
    char dir[DIR];
    const char *argv[MAX_ARGS];
    temp_dir(dir, sizeof dir);
    run_result r = train_alone(dir, "1", "32", helper_args(argv, NULL));
    expect_ok(&r);
    expect_helper_line(r.err, 0, 1);
    run_result_free(&r);
}

/* getitem runs on the loader's threads, or with --workers 0 on the
 * training thread while it fills a batch: refused either way. */
Test(dist, a_collective_from_a_loader_thread_is_refused)
{
    char dir[DIR], alone[DIR];
    const char *argv[MAX_ARGS];
    temp_dir(dir, sizeof dir);
    temp_dir(alone, sizeof alone);
    const char *refusal = "sc_dist_barrier: called from a data-loader thread (dataset_getitem)";
    run_result r = train_ranks("2", dir, "1", "32",
                               helper_args(argv, (const char *const[]){"--dataset-args",
                                                                       "fault=getitem", NULL}),
                               NULL);
    cr_assert_eq(r.status, 1, "exit %d: %s", r.status, r.err);
    cr_assert(strstr(r.err, "[rank 0] scorch-train: ") && strstr(r.err, refusal), "%s", r.err);
    run_result_free(&r);
    r = train_alone(alone, "1", "32",
                    helper_args(argv, (const char *const[]){"--dataset-args", "fault=getitem",
                                                            "--workers", "0", NULL}));
    cr_assert_eq(r.status, 1, "exit %d: %s", r.status, r.err);
    cr_assert(strstr(r.err, refusal), "%s", r.err);
    run_result_free(&r);
}

/* Rank 1 broadcasts fewer bytes than rank 0: both stop at the check
 * before the broadcast, which never moves a byte. */
Test(dist, ranks_whose_collective_calls_differ_stop_together)
{
    char dir[DIR];
    const char *argv[MAX_ARGS];
    temp_dir(dir, sizeof dir);
    run_result r = train_ranks("2", dir, "1", "32",
                               helper_args(argv, (const char *const[]){"--dataset-args",
                                                                       "fault=mismatch", NULL}),
                               NULL);
    cr_assert_eq(r.status, 1, "exit %d: %s", r.status, r.err);
    cr_assert(strstr(r.err, "[rank 0] scorch-train: the ranks' collectives do not match: rank 0 "
                            "is in sc_dist_broadcast"), "%s", r.err);
    run_result_free(&r);
}
