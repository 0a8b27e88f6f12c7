/* Integration tests: --drop-last (the default) and --no-drop-last, the
 * short last train batch, on the synthetic dataset with 200 train samples
 * in batches of 64: three full batches and one of 8. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

enum { PATH = 4096, DIR_LEN = 64, MAX_ARGS = 48 };

/* scorch-train with a small MLP on 200 train samples, batch 64, plus
 * `extra` arguments (NULL-terminated). */
static run_result train(const char *run_dir, int epochs, const char *const *extra,
                        const char *env)
{
    char scorch_train[PATH], mlp[PATH], synthetic[PATH], epochs_arg[16];
    build_path(scorch_train, PATH, "host/scorch-train");
    build_path(mlp, PATH, "plugins/mlp.so");
    build_path(synthetic, PATH, "plugins/synthetic.so");
    snprintf(epochs_arg, sizeof epochs_arg, "%d", epochs);
    const char *argv[MAX_ARGS] = {scorch_train, "--model", mlp, "--model-args", "hidden=32",
                                  "--dataset", synthetic, "--dataset-args",
                                  "train_size=200,valid_size=64,test_size=64",
                                  "--batch-size", "64", "--epochs", epochs_arg,
                                  "--run-dir", run_dir, "--seed", "7", "--no-tensorboard"};
    int n = 18;
    for (; extra && *extra && n < MAX_ARGS - 1; extra++)
        argv[n++] = *extra;
    argv[n] = NULL;
    return run_program(argv, env);
}

static void expect_ok(run_result *r)
{
    cr_assert_eq(r->status, 0, "exit %d\nstdout:\n%s\nstderr:\n%s", r->status, r->out, r->err);
}

/* A finished run of `epochs` in a fresh directory. */
static void trained(char *dir, int epochs, const char *const *extra)
{
    temp_dir(dir, DIR_LEN);
    run_result r = train(dir, epochs, extra, NULL);
    expect_ok(&r);
    run_result_free(&r);
}

static const char *const keep_last[] = {"--no-drop-last", NULL};

Test(drop_last, the_default_skips_the_short_batch)
{
    char dir[DIR_LEN];
    trained(dir, 1, NULL);
    cr_assert_eq(metric_of(dir, 1, "train", "samples"), 192);
    cr_assert_eq(metric_of(dir, 1, "train", "step"), 3);
}

Test(drop_last, no_drop_last_trains_on_every_sample)
{
    char dir[DIR_LEN];
    trained(dir, 2, keep_last);
    cr_assert_eq(metric_of(dir, 1, "train", "samples"), 200);
    cr_assert_eq(metric_of(dir, 2, "train", "samples"), 200);
    cr_assert_eq(metric_of(dir, 2, "train", "step"), 8);
}

/* The INI file's spelling, as config.ini records it. */
Test(drop_last, an_ini_file_can_keep_the_short_batch)
{
    char dir[DIR_LEN], ini[PATH], config[PATH];
    temp_dir(dir, sizeof dir);
    snprintf(ini, sizeof ini, "%s.ini", dir);
    FILE *f = fopen(ini, "w");
    cr_assert_not_null(f);
    fputs("[train]\ndrop-last = false\n", f);
    fclose(f);
    run_result r = train(dir, 1, (const char *[]){"--config", ini, NULL}, NULL);
    expect_ok(&r);
    run_result_free(&r);
    remove(ini);
    cr_assert_eq(metric_of(dir, 1, "train", "samples"), 200);
    snprintf(config, sizeof config, "%s/config.ini", dir);
    char *text = read_text(config);
    cr_assert(text && strstr(text, "drop-last = false"), "config.ini:\n%s", text);
    free(text);
}

/* With an lr too small to move a weight, the train loss (shuffled, the
 * short batch last) is the mean over every sample: what the in-order eval
 * of the train split finds. Weighing the short batch like a full one
 * would move it. */
Test(drop_last, the_short_batch_counts_by_its_own_samples)
{
    char dir[DIR_LEN];
    trained(dir, 1, (const char *[]){"--no-drop-last", "--lr", "1e-20", "--validate-on-train",
                                     NULL});
    double loss = metric_of(dir, 1, "train", "loss");
    double eval = metric_of(dir, 1, "train_eval", "loss");
    cr_assert(fabs(loss - eval) <= 1e-6 * eval, "train loss %.9g, eval loss %.9g", loss, eval);
    cr_assert_eq(metric_of(dir, 1, "train_eval", "samples"), 200);
}

/* Cosine over 2 epochs of 4 steps: the last step (index 7 of 8) runs at
 * lr x (1 + cos(7 pi / 8)) / 2; over 3 steps an epoch it would be 5/6. */
Test(drop_last, the_lr_schedule_counts_the_short_batch)
{
    char dir[DIR_LEN];
    trained(dir, 2, (const char *[]){"--no-drop-last", "--lr-schedule", "cosine", "--lr",
                                     "0.01", NULL});
    double expected = 0.01 * 0.5 * (1 + cos(3.14159265358979323846 * 7 / 8));
    double lr = metric_of(dir, 2, "train", "lr");
    cr_assert(fabs(lr - expected) <= 1e-9, "last lr %.12g, expected %.12g", lr, expected);
}

/* Stopped twice (before the short batch of epoch 1 and inside epoch 2),
 * the run ends with the very weights of one that never stopped. */
Test(drop_last, resume_at_and_after_the_short_batch_is_exact)
{
    char straight[DIR_LEN], split[DIR_LEN], hook[PATH], a[PATH], b[PATH];
    snprintf(hook, sizeof hook, "%s", getenv("SCORCH_STOP_HOOK"));
    trained(straight, 2, keep_last);
    temp_dir(split, sizeof split);
    const char *const stop_once[] = {"--no-drop-last", "--hooks", hook, NULL};
    const char *const stop_again[] = {"--no-drop-last", "--hooks", hook, "--resume", NULL};
    const char *const finish[] = {"--no-drop-last", "--resume", NULL};
    run_result r = train(split, 2, stop_once, "SCORCH_TEST_STOP_AT_STEP=3");
    expect_ok(&r);
    run_result_free(&r);
    r = train(split, 2, stop_again, "SCORCH_TEST_STOP_AT_STEP=6");
    expect_ok(&r);
    cr_assert(strstr(r.out, "epoch 1, batch 3"), "did not resume at the short batch:\n%s",
              r.out);
    run_result_free(&r);
    r = train(split, 2, finish, NULL);
    expect_ok(&r);
    cr_assert(strstr(r.out, "epoch 2, batch 2"), "did not resume mid-epoch 2:\n%s", r.out);
    run_result_free(&r);
    cr_assert_eq(metric_of(straight, 1, "train", "loss"), metric_of(split, 1, "train", "loss"));
    cr_assert_eq(metric_of(straight, 2, "train", "loss"), metric_of(split, 2, "train", "loss"));
    cr_assert_eq(metric_of(straight, 2, "train", "step"), metric_of(split, 2, "train", "step"));
    snprintf(a, sizeof a, "%s/checkpoints/last.ckpt", straight);
    snprintf(b, sizeof b, "%s/checkpoints/last.ckpt", split);
    cr_assert(same_params(a, b), "weights differ after resuming around the short batch");
}

static void expect_refused(const char *const *extra, const char *needle)
{
    char dir[DIR_LEN];
    run_result r = train(temp_dir(dir, sizeof dir), 1, extra, NULL);
    cr_assert_neq(r.status, 0, "accepted:\n%s", r.out);
    cr_assert(strstr(r.err, needle), "no '%s' in:\n%s", needle, r.err);
    run_result_free(&r);
}

Test(drop_last, inexact_combinations_are_refused)
{
    expect_refused((const char *[]){"--no-drop-last", "--device", "cpu", "--replicas", "2",
                                    NULL},
                   "--no-drop-last: not with data parallelism (2 ranks)");
    expect_refused((const char *[]){"--no-drop-last", "--accumulate", "2", NULL},
                   "--no-drop-last: not with --accumulate 2");
}

Test(drop_last, a_split_smaller_than_a_batch_says_what_to_change)
{
    char dir[DIR_LEN];
    const char *const small[] = {"--dataset-args", "train_size=50,valid_size=16,test_size=16",
                                 NULL};
    expect_refused(small, "the train split has 50 samples, fewer than one batch of 64, and "
                          "--drop-last skips a short batch: use --batch-size 50, or "
                          "--no-drop-last");
    trained(dir, 1, (const char *[]){"--dataset-args", "train_size=50,valid_size=16,test_size=16",
                                     "--no-drop-last", NULL});
    cr_assert_eq(metric_of(dir, 1, "train", "samples"), 50);
    expect_refused((const char *[]){"--accumulate", "8", NULL},
                   "an epoch has 3 train batches, fewer than one optimizer step of "
                   "--accumulate 8: lower --accumulate or --batch-size");
}
