/* scorch-run and the shipped job plugins (docs/jobs.md) through the real
 * programs: dataset_stats and eval_checkpoints give the same files in one
 * process and on 2 ranks; eval_checkpoints agrees with scorch-test; a rank
 * that fails, crashes or misses --collective-timeout ends the job with one
 * clear message; and the refusals of a job without what it needs.
 * SCORCH_DIST_LAUNCH says how the 2 ranks run: "mpirun" (skipped, saying
 * so, where mpirun is missing) or "threads" (--replicas 2). The suite
 * jobs_gpu (builds with a GPU backend, on 2 emulated or real GPUs):
 * eval_checkpoints on 2 GPUs agrees with the CPU. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expect.h"
#include "harness.h"
#include "scorch/device.h"

enum { PATH = 4096, DIR_LEN = 64, MAX_ARGS = 64 };

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define FASHION_MNIST "/usr/share/datasets/fashion-mnist"

static char run_bin[PATH], mpirun[PATH];

static void init(void)
{
    build_path(run_bin, PATH, "host/scorch-run");
    find_on_path("mpirun", mpirun, PATH);
}

TestSuite(jobs, .init = init, .timeout = 300);
TestSuite(jobs_gpu, .init = init, .timeout = 600);

static bool replicas_mode(void)
{
    const char *launch = getenv("SCORCH_DIST_LAUNCH");
    return launch && strcmp(launch, "threads") == 0;
}

/* scorch-run with `args`, in one process (np "1") or as np ranks. */
static run_result job(const char *np, const char *const *args)
{
    const char *argv[MAX_ARGS];
    int n = 0;
    if (strcmp(np, "1") != 0 && !replicas_mode()) {
        if (!mpirun[0])
            cr_skip_test("mpirun is not on PATH: these tests need Open MPI's (openmpi-bin)");
        n = mpirun_argv(argv, MAX_ARGS, mpirun, np, NULL);
    }
    n = argv_append(argv, n, MAX_ARGS, ARGS(run_bin, "--threads", "1"));
    if (strcmp(np, "1") != 0 && replicas_mode())
        n = argv_append(argv, n, MAX_ARGS, ARGS("--replicas", np));
    argv_append(argv, n, MAX_ARGS, args);
    return run_program(argv, NULL);
}

static char *must_read(const char *path)
{
    char *text = read_text(path);
    cr_assert(text, "%s was not written", path);
    return text;
}

/* The same job in one process and on 2 ranks writes the same file
 * `name` (given to the job as out=); returns the one process's text. */
static char *same_on_two_ranks(const char *dir, const char *name, const char *const *args,
                               const char *job_args)
{
    char out1[PATH], out2[PATH], args1[2 * PATH], args2[2 * PATH];
    snprintf(out1, PATH, "%s/1-%s", dir, name);
    snprintf(out2, PATH, "%s/2-%s", dir, name);
    snprintf(args1, sizeof args1, "%s%sout=%s", job_args, job_args[0] ? "," : "", out1);
    snprintf(args2, sizeof args2, "%s%sout=%s", job_args, job_args[0] ? "," : "", out2);
    const char *argv[MAX_ARGS];
    int n = argv_append(argv, 0, MAX_ARGS, args);
    argv_append(argv, n, MAX_ARGS, ARGS("--job-args", args1));
    run_result one = job("1", argv);
    expect_status(&one, 0);
    argv_append(argv, n, MAX_ARGS, ARGS("--job-args", args2));
    run_result two = job("2", argv);
    expect_status(&two, 0);
    char *a = must_read(out1), *b = must_read(out2);
    cr_assert_str_eq(a, b, "one process:\n%s\n2 ranks:\n%s", a, b);
    free(b);
    run_result_free(&one);
    run_result_free(&two);
    return a;
}

Test(jobs, dataset_stats_are_the_same_on_2_ranks)
{
    char dir[DIR_LEN];
    temp_dir(dir, sizeof dir);
    char *json = same_on_two_ranks(
        dir, "stats.json",
        ARGS("--job", built("plugins/dataset_stats.so"), "--dataset",
             built("plugins/fashion_mnist.so"), "--dataset-path", FASHION_MNIST,
             "--batch-size", "100"),
        "split=test");
    expect_in(json, "\"samples\": 10000");
    expect_in(json, "\"counts\": [1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000]");
    expect_in(json, "\"names\": [\"T-shirt/top\", \"Trouser\"");
    free(json);
}

/* dir/run: the mlp on the synthetic blobs for 3 epochs, every epoch's
 * checkpoint kept. */
static void train_three_epochs(const char *dir)
{
    run_result r = run_program(
        ARGS(built("host/scorch-train"), "--model", built("plugins/mlp.so"), "--model-args",
             "hidden=16", "--dataset", built("plugins/synthetic.so"), "--epochs", "3",
             "--max-train-iterations", "4", "--keep-last", "5", "--threads", "1",
             "--no-tensorboard", "--quiet", "--run-dir", in_dir(dir, "run")),
        NULL);
    expect_status(&r, 0);
    run_result_free(&r);
}

/* A CSV row's field `k` (0-based) as a number. */
static double csv_number(const char *line, int k)
{
    for (; k > 0 && line; k--)
        line = strchr(line, ',') ? strchr(line, ',') + 1 : NULL;
    cr_assert(line, "no field %d", k);
    return strtod(line, NULL);
}

/* The line of text that contains `part`. */
static const char *line_with(const char *text, const char *part)
{
    const char *at = strstr(text, part);
    cr_assert(at, "'%s' not in:\n%s", part, text);
    while (at > text && at[-1] != '\n')
        at--;
    return at;
}

Test(jobs, eval_checkpoints_are_the_same_on_2_ranks_and_agree_with_scorch_test)
{
    char dir[DIR_LEN];
    temp_dir(dir, sizeof dir);
    train_three_epochs(dir);
    /* 3 checkpoints on 2 ranks: the second round has one. */
    char *csv = same_on_two_ranks(dir, "eval.csv",
                                  ARGS("--job", built("plugins/eval_checkpoints.so"),
                                       "--checkpoint", in_dir(dir, "run")),
                                  "split=test");
    expect_in(csv, "checkpoint,epoch,step,loss,accuracy,best\n");
    const char *last = line_with(csv, "epoch-0003-step-000000012.ckpt,3,12,");
    expect_in(csv, "epoch-0001-step-000000004.ckpt,1,4,");
    expect_in(csv, "epoch-0002-step-000000008.ckpt,2,8,");
    const char *best = strstr(csv, ",yes\n");
    cr_assert(best && !strstr(best + 1, ",yes\n"), "not one best row:\n%s", csv);
    run_result test = run_program(
        ARGS(built("host/scorch-test"), "--checkpoint",
             in_dir(in_dir(dir, "run"), "checkpoints/epoch-0003-step-000000012.ckpt"),
             "--threads", "1"),
        NULL);
    expect_status(&test, 0);
    char want[64];
    snprintf(want, sizeof want, "loss %.4f  accuracy %.4f", csv_number(last, 3),
             csv_number(last, 4));
    expect_in(test.out, want);
    run_result_free(&test);
    free(csv);
}

Test(jobs, a_failing_rank_fails_the_job_on_every_rank)
{
    run_result r = job("2", ARGS("--job", built("tests/integration/fault_job.so"), "--job-args",
                                 "fault=fail,rank=1"));
    expect_status(&r, 1);
    expect_in(r.err, "rank 1 failed");
    expect_in(r.err, "fault_job.so: job_run: injected failure on rank 1");
    run_result_free(&r);
}

Test(jobs, a_rank_past_the_collective_timeout_ends_the_job)
{
    run_result r = job("2", ARGS("--job", built("tests/integration/fault_job.so"), "--job-args",
                                 "fault=sleep,rank=1,seconds=30", "--collective-timeout", "1"));
    cr_assert_neq(r.status, 0, "%s", r.out);
    expect_in(r.err, "did not complete within 1 s");
    run_result_free(&r);
}

Test(jobs, a_crash_in_a_job_names_it)
{
    run_result r = job("1", ARGS("--job", built("tests/integration/fault_job.so"), "--job-args",
                                 "fault=crash,rank=0"));
    cr_assert_eq(r.signal, 11, "exit %d:\n%s", r.status, r.err);
    expect_in(r.err, "crashed (SIGSEGV) in job_run of");
    run_result_free(&r);
}

Test(jobs, a_job_sees_its_rank_and_what_it_lacks)
{
    run_result r = job("2", ARGS("--job", built("tests/integration/fault_job.so")));
    expect_status(&r, 0);
    expect_in(r.out, "fault_job: rank 0 of 2 on cpu, 0 checkpoints, batch 128, dataset no, "
                     "model no");
    expect_in(r.out, "batches refused: sc_job_batches_open: the job has no dataset");
    expect_in(r.out, "load refused: sc_job_load: the job has no network");
    run_result_free(&r);
}

Test(jobs, eval_checkpoints_refuses_a_corrupt_checkpoint_naming_it)
{
    char dir[DIR_LEN];
    temp_dir(dir, sizeof dir);
    train_three_epochs(dir);
    const char *ckpt = in_dir(in_dir(dir, "run"), "checkpoints/epoch-0002-step-000000008.ckpt");
    FILE *f = fopen(ckpt, "r+b");
    cr_assert(f);
    fseek(f, 100, SEEK_SET);
    fputs("garbage", f);
    fclose(f);
    run_result r = job("1", ARGS("--job", built("plugins/eval_checkpoints.so"), "--checkpoint",
                                 in_dir(dir, "run")));
    expect_status(&r, 1);
    expect_in(r.err, "loading checkpoint");
    expect_in(r.err, "epoch-0002-step-000000008.ckpt");
    run_result_free(&r);
}

Test(jobs, refusals_name_what_is_missing)
{
    run_result r = job("1", ARGS("--job", built("plugins/eval_checkpoints.so"), "--model",
                                 built("plugins/mlp.so"), "--dataset",
                                 built("plugins/synthetic.so")));
    expect_status(&r, 1);
    expect_in(r.err, "eval_checkpoints needs checkpoints");
    run_result_free(&r);
    r = job("1", ARGS("--job", built("plugins/mlp.so")));
    expect_status(&r, 1);
    expect_in(r.err, "exports no scorch_job_plugin (it is a model plugin");
    run_result_free(&r);
    r = job("1", ARGS("--job", built("plugins/dataset_stats.so")));
    expect_status(&r, 1);
    expect_in(r.err, "dataset_stats needs a dataset");
    run_result_free(&r);
    r = job("1", ARGS("--job", built("plugins/dataset_stats.so"), "--dataset",
                      built("plugins/synthetic.so"), "--job-args", "split=tain"));
    expect_status(&r, 1);
    expect_in(r.err, "split=tain: 'tain' is no split: train, valid or test");
    run_result_free(&r);
    r = run_program(ARGS(run_bin, "--checkpoint", "x.ckpt"), NULL);
    expect_status(&r, 2);
    expect_in(r.err, "missing --job");
    run_result_free(&r);
}

/* Row by row (checkpoint,epoch,step,loss,accuracy,best): the same
 * checkpoints, epochs, steps, accuracy and best, the loss within 1e-4 (a
 * GPU sums in another order). */
static void expect_same_table(const char *cpu, const char *gpu)
{
    size_t header = strcspn(cpu, "\n");
    cr_assert_eq(strncmp(cpu, gpu, header + 1), 0, "cpu:\n%s\ngpu:\n%s", cpu, gpu);
    const char *a = cpu + header + 1, *b = gpu + header + 1;
    for (; *a && *b; a = strchr(a, '\n') + 1, b = strchr(b, '\n') + 1) {
        size_t path = strcspn(a, ",");
        cr_assert_eq(strncmp(a, b, path + 1), 0, "cpu:\n%s\ngpu:\n%s", cpu, gpu);
        for (int k = 1; k <= 4; k++)
            cr_assert_leq(fabs(csv_number(a, k) - csv_number(b, k)), k == 3 ? 1e-4 : 0,
                          "field %d, cpu:\n%s\ngpu:\n%s", k, cpu, gpu);
        cr_assert_eq(strstr(a, ",yes\n") == strchr(a, '\n') - 4,
                     strstr(b, ",yes\n") == strchr(b, '\n') - 4, "cpu:\n%s\ngpu:\n%s", cpu,
                     gpu);
    }
    cr_assert(!*a && !*b, "cpu:\n%s\ngpu:\n%s", cpu, gpu);
}

Test(jobs_gpu, eval_checkpoints_on_two_gpus_agree_with_the_cpu)
{
    if (sc_cuda_device_count() < 2)
        cr_skip_test("2 GPUs needed, %d found", sc_cuda_device_count());
    use_own_gpu_locks();
    char dir[DIR_LEN];
    temp_dir(dir, sizeof dir);
    train_three_epochs(dir);
    char cpu_args[PATH], gpu_args[PATH];
    snprintf(cpu_args, sizeof cpu_args, "out=%s/cpu.csv", dir);
    snprintf(gpu_args, sizeof gpu_args, "out=%s/gpu.csv", dir);
    const char *const job_file = built("plugins/eval_checkpoints.so");
    run_result r = run_program(ARGS(run_bin, "--job", job_file, "--checkpoint",
                                    in_dir(dir, "run"), "--device", "cpu", "--job-args",
                                    cpu_args),
                               NULL);
    expect_status(&r, 0);
    run_result_free(&r);
    r = run_program(ARGS(run_bin, "--job", job_file, "--checkpoint", in_dir(dir, "run"),
                         "--device", "parallel", "--job-args", gpu_args),
                    NULL);
    expect_status(&r, 0);
    run_result_free(&r);
    char *cpu = must_read(in_dir(dir, "cpu.csv")), *gpu = must_read(in_dir(dir, "gpu.csv"));
    expect_same_table(cpu, gpu);
    free(cpu);
    free(gpu);
}
