/* Integration tests: the real scorch-train and scorch-test binaries on
 * the synthetic and Fashion-MNIST plugins. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>
#include <fcntl.h>

#include "harness.h"

enum { PATH = 4096, DIR = 64, MAX_ARGS = 48 };

typedef struct paths {
    char train[PATH], test[PATH], mlp[PATH], synthetic[PATH], fashion[PATH];
} paths;

static paths bin(void)
{
    paths p;
    build_path(p.train, PATH, "host/scorch-train");
    build_path(p.test, PATH, "host/scorch-test");
    build_path(p.mlp, PATH, "plugins/mlp.so");
    build_path(p.synthetic, PATH, "plugins/synthetic.so");
    build_path(p.fashion, PATH, "plugins/fashion_mnist.so");
    return p;
}

/* scorch-train on the synthetic blobs with a small MLP, plus `extra`
 * arguments (NULL-terminated). */
static run_result train_synthetic(const char *run_dir, int epochs, const char *const *extra,
                                  const char *env)
{
    paths p = bin();
    char epochs_arg[16];
    snprintf(epochs_arg, sizeof epochs_arg, "%d", epochs);
    const char *argv[MAX_ARGS] = {p.train, "--model", p.mlp, "--model-args", "hidden=32",
                                  "--dataset", p.synthetic, "--dataset-path", "unused",
                                  "--batch-size", "64", "--epochs", epochs_arg,
                                  "--run-dir", run_dir, "--workers", "2", "--seed", "7"};
    int n = 19;
    for (; extra && *extra && n < MAX_ARGS - 1; extra++)
        argv[n++] = *extra;
    argv[n] = NULL;
    return run_program(argv, env);
}

static void expect_ok(run_result *r)
{
    cr_assert_eq(r->status, 0, "exit %d\nstdout:\n%s\nstderr:\n%s", r->status, r->out, r->err);
}

/* A fresh run directory in dir holding a finished run of `epochs` epochs. */
static void finished_run(char *dir, size_t size, int epochs)
{
    temp_dir(dir, size);
    run_result r = train_synthetic(dir, epochs, NULL, NULL);
    expect_ok(&r);
    run_result_free(&r);
}

static void run_dir_file(char *buf, const char *dir, const char *name)
{
    snprintf(buf, PATH, "%s/%s", dir, name);
}

Test(train, loss_falls_and_run_dir_is_complete)
{
    char dir[DIR], f[PATH];
    temp_dir(dir, sizeof dir);
    run_result r = train_synthetic(dir, 3, NULL, NULL);
    expect_ok(&r);
    double first = metric_of(dir, 1, "train", "loss"), last = metric_of(dir, 3, "train", "loss");
    cr_assert(last < first, "train loss %g -> %g", first, last);
    cr_assert_gt(metric_of(dir, 3, "valid", "accuracy"), 0.9);
    cr_assert(!isnan(metric_of(dir, 3, "test", "accuracy")));
    cr_assert(isnan(metric_of(dir, 3, "test", "top5_accuracy")), "4 classes: no top-5");
    cr_assert_gt(metric_of(dir, 1, "train", "samples_per_s"), 0);
    const char *files[] = {"config.ini", "metrics.jsonl", "checkpoints/last.ckpt",
                           "checkpoints/best.ckpt"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        run_dir_file(f, dir, files[i]);
        cr_assert(access(f, R_OK) == 0, "missing %s", f);
    }
    cr_assert(strstr(r.out, "epoch 3/3 valid"), "no summary line:\n%s", r.out);
    cr_assert(!strchr(r.out, '\r'), "progress line printed to a non-terminal");
    run_result_free(&r);
}

Test(train, resume_at_epoch_boundary_is_exact)
{
    char straight[DIR], split[DIR], a[PATH], b[PATH];
    temp_dir(straight, sizeof straight);
    temp_dir(split, sizeof split);
    run_result r = train_synthetic(straight, 2, NULL, NULL);
    expect_ok(&r);
    run_result_free(&r);
    r = train_synthetic(split, 1, NULL, NULL);
    expect_ok(&r);
    run_result_free(&r);
    r = train_synthetic(split, 2, (const char *[]){"--resume", NULL}, NULL);
    expect_ok(&r);
    cr_assert(strstr(r.out, "resumed from"), "%s", r.out);
    run_result_free(&r);
    cr_assert_eq(metric_of(straight, 2, "valid", "loss"), metric_of(split, 2, "valid", "loss"));
    cr_assert_eq(metric_of(straight, 2, "test", "accuracy"),
                 metric_of(split, 2, "test", "accuracy"));
    run_dir_file(a, straight, "checkpoints/last.ckpt");
    run_dir_file(b, split, "checkpoints/last.ckpt");
    cr_assert(same_params(a, b), "weights differ after resume");
}

Test(train, resume_mid_epoch_is_exact)
{
    char straight[DIR], split[DIR], hook[PATH], a[PATH], b[PATH];
    temp_dir(straight, sizeof straight);
    temp_dir(split, sizeof split);
    snprintf(hook, sizeof hook, "%s", getenv("SCORCH_STOP_HOOK"));
    run_result r = train_synthetic(straight, 2, NULL, NULL);
    expect_ok(&r);
    run_result_free(&r);
    /* 32 steps per epoch: stop 8 steps into epoch 2. */
    r = train_synthetic(split, 2, (const char *[]){"--hooks", hook, NULL},
                        "SCORCH_TEST_STOP_AT_STEP=40");
    expect_ok(&r);
    run_result_free(&r);
    r = train_synthetic(split, 2, (const char *[]){"--resume", NULL}, NULL);
    expect_ok(&r);
    cr_assert(strstr(r.out, "batch 8"), "did not resume mid-epoch:\n%s", r.out);
    run_result_free(&r);
    cr_assert_eq(metric_of(straight, 2, "train", "loss"), metric_of(split, 2, "train", "loss"));
    cr_assert_eq(metric_of(straight, 2, "train", "accuracy"),
                 metric_of(split, 2, "train", "accuracy"));
    cr_assert_eq(metric_of(straight, 2, "valid", "loss"), metric_of(split, 2, "valid", "loss"));
    run_dir_file(a, straight, "checkpoints/last.ckpt");
    run_dir_file(b, split, "checkpoints/last.ckpt");
    cr_assert(same_params(a, b), "weights differ after a mid-epoch resume");
}

Test(train, refuses_to_overwrite_a_run)
{
    char dir[DIR];
    finished_run(dir, sizeof dir, 1);
    run_result r = train_synthetic(dir, 1, NULL, NULL);
    cr_assert_neq(r.status, 0);
    cr_assert(strstr(r.err, "--resume"), "%s", r.err);
    run_result_free(&r);
}

Test(train, a_run_directory_in_use_is_left_alone)
{
    char dir[DIR], lock[PATH], metrics[PATH];
    finished_run(dir, sizeof dir, 1);
    /* Hold the lock as a running scorch-train would. */
    run_dir_file(lock, dir, ".lock");
    int fd = open(lock, O_RDWR);
    cr_assert(fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0);
    cr_assert_eq(pwrite(fd, "4242\n", 5, 0), 5);
    run_dir_file(metrics, dir, "metrics.jsonl");
    char *before = read_text(metrics);
    run_result r = train_synthetic(dir, 2, (const char *[]){"--resume", NULL}, NULL);
    cr_assert_eq(r.status, 1);
    cr_assert(strstr(r.err, "in use by another scorch-train (pid 4242"), "%s", r.err);
    char *after = read_text(metrics);
    cr_assert(before && after && strcmp(before, after) == 0, "metrics.jsonl was touched");
    close(fd);
    free(before);
    free(after);
    run_result_free(&r);
}

Test(train, nan_loss_stops_and_keeps_the_last_checkpoint)
{
    char dir[DIR], last[PATH];
    finished_run(dir, sizeof dir, 1);
    run_dir_file(last, dir, "checkpoints/last.ckpt");
    size_t size_before, size_after;
    char *before = read_file(last, &size_before);
    run_result r = train_synthetic(dir, 3, (const char *[]){"--resume", "--resume-anyway",
                                                           "--dataset-args", "nan_sample=5",
                                                           NULL},
                                   NULL);
    cr_assert_eq(r.status, 1, "exit %d: %s", r.status, r.err);
    cr_assert(strstr(r.err, "loss is"), "%s", r.err);
    cr_assert(strstr(r.err, "last good one"), "%s", r.err);
    char *after = read_file(last, &size_after);
    cr_assert(before && after && size_before == size_after &&
                  memcmp(before, after, size_before) == 0,
              "the last checkpoint changed");
    free(before);
    free(after);
    run_result_free(&r);
}

Test(train, corrupt_checkpoint_is_refused_on_resume)
{
    char dir[DIR], last[PATH];
    finished_run(dir, sizeof dir, 1);
    run_dir_file(last, dir, "checkpoints/last.ckpt");
    FILE *f = fopen(last, "r+b");
    cr_assert(f);
    fseek(f, 200, SEEK_SET);
    int c = fgetc(f);
    fseek(f, 200, SEEK_SET);
    fputc(c ^ 0x5a, f);
    fclose(f);
    run_result r = train_synthetic(dir, 2, (const char *[]){"--resume", NULL}, NULL);
    cr_assert_eq(r.status, 1);
    cr_assert(strstr(r.err, "last.ckpt"), "%s", r.err);
    run_result_free(&r);
}

Test(train, missing_plugin_and_dataset_are_named)
{
    paths p = bin();
    char dir[DIR];
    temp_dir(dir, sizeof dir);
    run_result r = run_program((const char *[]){p.train, "--model", "/nonexistent/m.so",
                                                "--dataset", p.synthetic, "--run-dir", dir,
                                                NULL},
                               NULL);
    cr_assert_eq(r.status, 1);
    cr_assert(strstr(r.err, "/nonexistent/m.so"), "%s", r.err);
    run_result_free(&r);
    r = run_program((const char *[]){p.train, "--model", p.mlp, "--dataset", p.fashion,
                                     "--dataset-path", "/nonexistent/fmnist", "--run-dir", dir,
                                     NULL},
                    NULL);
    cr_assert_eq(r.status, 1);
    cr_assert(strstr(r.err, "/nonexistent/fmnist"), "%s", r.err);
    run_result_free(&r);
}

Test(train, regression_mse_falls)
{
    paths p = bin();
    char dir[DIR];
    temp_dir(dir, sizeof dir);
    run_result r = run_program(
        (const char *[]){p.train, "--model", p.mlp, "--model-args", "task=regression,hidden=32",
                         "--dataset", p.synthetic, "--dataset-args", "task=regression",
                         "--epochs", "3", "--batch-size", "64", "--run-dir", dir, NULL},
        NULL);
    expect_ok(&r);
    cr_assert_lt(metric_of(dir, 3, "valid", "mse"), metric_of(dir, 1, "valid", "mse"));
    run_result_free(&r);
}

Test(train, fashion_mnist_subset_loss_falls)
{
    paths p = bin();
    char dir[DIR];
    temp_dir(dir, sizeof dir);
    run_result r = run_program(
        (const char *[]){p.train, "--model", p.mlp, "--dataset", p.fashion, "--dataset-path",
                         "/usr/share/datasets/fashion-mnist", "--epochs", "2",
                         "--max-train-iterations", "40", "--max-valid-iterations", "8",
                         "--max-test-iterations", "8", "--run-dir", dir, NULL},
        NULL);
    expect_ok(&r);
    cr_assert_lt(metric_of(dir, 2, "train", "loss"), metric_of(dir, 1, "train", "loss"));
    cr_assert_gt(metric_of(dir, 2, "valid", "accuracy"), 0.6);
    run_result_free(&r);
}

Test(test_program, predictions_match_printed_accuracy)
{
    paths p = bin();
    char dir[DIR], best[PATH], csv[PATH];
    finished_run(dir, sizeof dir, 2);
    run_dir_file(best, dir, "checkpoints/best.ckpt");
    run_dir_file(csv, dir, "predictions.csv");
    run_result r = run_program((const char *[]){p.test, "--checkpoint", best, "--predictions", csv,
                                     "--topk", "3", NULL},
                    NULL);
    expect_ok(&r);
    const char *acc = strstr(r.out, "accuracy ");
    cr_assert(acc, "%s", r.out);
    double printed = strtod(acc + 9, NULL);
    FILE *f = fopen(csv, "r");
    cr_assert(f);
    char line[1024];
    int rows = 0, correct = 0;
    cr_assert(fgets(line, sizeof line, f) && strstr(line, "pred_3"), "header: %s", line);
    while (fgets(line, sizeof line, f)) {
        long long sample, target;
        int ok;
        cr_assert_eq(sscanf(line, "%lld,%lld,%d", &sample, &target, &ok), 3);
        rows++;
        correct += ok;
    }
    fclose(f);
    cr_assert_eq(rows, 512);
    cr_assert_float_eq(printed, (double)correct / rows, 1e-4);
    run_result_free(&r);
}

Test(cli, help_lists_options_and_bad_values_are_named)
{
    paths p = bin();
    run_result r = run_program((const char *[]){p.train, "--help", NULL}, NULL);
    cr_assert_eq(r.status, 0);
    cr_assert(strstr(r.out, "--batch-size") && strstr(r.out, "--resume"), "%s", r.out);
    run_result_free(&r);
    r = run_program((const char *[]){p.train, "--model", p.mlp, "--dataset", p.synthetic,
                                     "--epochs", "zero", NULL},
                    NULL);
    cr_assert_eq(r.status, 2);
    cr_assert(strstr(r.err, "epochs"), "%s", r.err);
    run_result_free(&r);
}

/* The dataset indices a run into a NaN sample (5) names: its stderr's list
 * after "the batch's samples: ", into samples (at most 16); their count. */
static int nan_batch_samples(int batch_size, long long *samples, char *tail, size_t tail_size)
{
    char dir[DIR], size_arg[16];
    temp_dir(dir, sizeof dir);
    snprintf(size_arg, sizeof size_arg, "%d", batch_size);
    run_result r = train_synthetic(dir, 1, (const char *[]){"--dataset-args", "nan_sample=5",
                                                            "--batch-size", size_arg, NULL},
                                   NULL);
    cr_assert_eq(r.status, 1, "exit %d: %s", r.status, r.err);
    const char *loss = strstr(r.err, "train loss is ");
    const char *list = strstr(r.err, "; the batch's samples: ");
    cr_assert(loss && list && loss < list, "%s", r.err);
    char *at = (char *)list + strlen("; the batch's samples: ");
    int n = 0;
    for (char *end; n < 16; at = end + (*end == ',') + (end[*end == ','] == ' ')) {
        long long v = strtoll(at, &end, 10);
        if (end == at)
            break;
        samples[n++] = v;
    }
    snprintf(tail, tail_size, "%.*s", (int)strcspn(at, "\n"), at);
    run_result_free(&r);
    return n;
}

Test(train, a_nan_loss_names_the_samples_of_its_batch)
{
    long long samples[16];
    char tail[64];
    int n = nan_batch_samples(8, samples, tail, sizeof tail);
    cr_expect_eq(n, 8, "a batch of 8 names all 8");
    cr_expect_str_eq(tail, "", "nothing after the list");
    bool has_nan_sample = false;
    for (int i = 0; i < n; i++)
        has_nan_sample |= samples[i] == 5;
    cr_expect(has_nan_sample, "sample 5 is not among those named");

    n = nan_batch_samples(16, samples, tail, sizeof tail);
    cr_expect_eq(n, 8, "a batch of 16 names its first 8");
    cr_expect_str_eq(tail, "... (16 in all)");
}

/* A NaN in a valid or test sample (70, in the second batch of 64, in
 * order) is named as a train one is. */
Test(train, a_nan_eval_loss_names_the_samples_of_its_batch)
{
    const char *const splits[] = {"valid", "test"};
    for (int i = 0; i < 2; i++) {
        char dir[DIR], args[64], want[160];
        temp_dir(dir, sizeof dir);
        snprintf(args, sizeof args, "nan_sample=70,nan_split=%s", splits[i]);
        run_result r = train_synthetic(dir, 1, (const char *[]){"--dataset-args", args, NULL},
                                       NULL);
        cr_assert_eq(r.status, 1, "exit %d: %s", r.status, r.err);
        snprintf(want, sizeof want, "%s loss is ", splits[i]);
        const char *loss = strstr(r.err, want);
        snprintf(want, sizeof want, " at epoch 1, batch 1; the batch's samples: 64, 65, 66, 67, "
                 "68, 69, 70, 71, ... (64 in all)\n");
        cr_expect(loss && strstr(loss, want), "%s", r.err);
        run_result_free(&r);
    }
}
