/* Integration tests of the EMA of the weights (--ema-decay):
 * valid and test report the weights' and the EMA's metrics, best.ckpt
 * follows the EMA's, a resumed run's EMA is the same bits as a run never
 * stopped, and scorch-test --ema evaluates the EMA (refused without one). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expect.h"
#include "harness.h"
#include "scorch/serialize.h"

enum { PATH = 4096, DIR_LEN = 64, MAX_ARGS = 48 };

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* scorch-train on the synthetic blobs with a small MLP and an EMA of
 * decay 0.9 with warm-up, plus `extra` arguments. */
static run_result train(const char *run_dir, const char *epochs, const char *const *extra)
{
    static char program[PATH], mlp[PATH], synthetic[PATH];
    build_path(program, PATH, "host/scorch-train");
    build_path(mlp, PATH, "plugins/mlp.so");
    build_path(synthetic, PATH, "plugins/synthetic.so");
    const char *argv[MAX_ARGS] = {program, "--model", mlp, "--model-args", "hidden=32",
                                  "--dataset", synthetic, "--dataset-path", "unused",
                                  "--batch-size", "64", "--epochs", epochs, "--run-dir", run_dir,
                                  "--workers", "2", "--seed", "7", "--lr", "0.01"};
    int n = 21;
    for (; extra && *extra && n < MAX_ARGS - 1; extra++)
        argv[n++] = *extra;
    argv[n] = NULL;
    return run_program(argv, NULL);
}

static run_result scorch_test(const char *checkpoint, const char *const *extra)
{
    static char program[PATH];
    build_path(program, PATH, "host/scorch-test");
    const char *argv[MAX_ARGS] = {program, "--checkpoint", checkpoint, "--workers", "0"};
    int n = 5;
    for (; extra && *extra && n < MAX_ARGS - 1; extra++)
        argv[n++] = *extra;
    argv[n] = NULL;
    return run_program(argv, NULL);
}

#define EMA_DECAY "--ema-decay", "0.9", "--ema-warmup"

/* The entries of a and b whose names start with prefix: how many, and
 * whether all are the same bits. */
static int same_entries(const char *a_path, const char *b_path, const char *prefix, bool *same)
{
    sc_ckpt *a = NULL, *b = NULL;
    cr_assert_eq(sc_ckpt_open(a_path, &a), SC_OK, "%s", sc_error_message());
    cr_assert_eq(sc_ckpt_open(b_path, &b), SC_OK, "%s", sc_error_message());
    int n = 0;
    *same = true;
    for (int i = 0; i < sc_ckpt_count(a); i++) {
        const char *name = sc_ckpt_name(a, i);
        if (strncmp(name, prefix, strlen(prefix)) != 0)
            continue;
        n++;
        const sc_tensor *ta = sc_ckpt_tensor(a, name), *tb = sc_ckpt_tensor(b, name);
        *same = *same && ta && tb && sc_tensor_nbytes(ta) == sc_tensor_nbytes(tb) &&
                memcmp(ta->data, tb->data, sc_tensor_nbytes(ta)) == 0;
    }
    sc_ckpt_close(a);
    sc_ckpt_close(b);
    return n;
}

/* The loss scorch-test printed ("test  loss X ..."). */
static double printed_loss(const run_result *r)
{
    const char *p = r->out ? strstr(r->out, "loss ") : NULL;
    cr_assert_not_null(p, "no loss in:\n%s", r->out);
    return strtod(p + 5, NULL);
}

Test(ema, valid_and_test_report_both_and_best_follows_the_ema)
{
    char dir[DIR_LEN];
    temp_dir(dir, DIR_LEN);
    run_result r = train(dir, "2", ARGS(EMA_DECAY));
    expect_status(&r, 0);
    for (int epoch = 1; epoch <= 2; epoch++) {
        cr_assert(isfinite(metric_of(dir, epoch, "valid", "accuracy")));
        cr_assert(isfinite(metric_of(dir, epoch, "valid_ema", "accuracy")));
    }
    double ema_loss = metric_of(dir, 2, "test_ema", "loss");
    cr_assert(isfinite(ema_loss) && isfinite(metric_of(dir, 2, "test", "loss")));
    cr_assert_neq(ema_loss, metric_of(dir, 2, "test", "loss"), "the EMA is not the weights");
    /* best: the epoch of the highest valid_ema accuracy (the first on a tie) */
    double a1 = metric_of(dir, 1, "valid_ema", "accuracy");
    double a2 = metric_of(dir, 2, "valid_ema", "accuracy");
    char line[128];
    snprintf(line, sizeof line, "best accuracy %.4f at epoch %d", a2 > a1 ? a2 : a1,
             a2 > a1 ? 2 : 1);
    expect_in(r.out, line);
    char *config = read_text(in_dir(dir, "config.ini"));
    expect_in(config, "ema-decay = 0.9");
    free(config);
    run_result_free(&r);

    /* scorch-test --ema reproduces test_ema; without it, test */
    r = scorch_test(in_dir(dir, "checkpoints/last.ckpt"), ARGS("--ema"));
    expect_status(&r, 0);
    cr_assert_float_eq(printed_loss(&r), ema_loss, 1e-4, "%s", r.out);
    run_result_free(&r);
    r = scorch_test(in_dir(dir, "checkpoints/last.ckpt"), NULL);
    expect_status(&r, 0);
    cr_assert_float_eq(printed_loss(&r), metric_of(dir, 2, "test", "loss"), 1e-4, "%s", r.out);
    run_result_free(&r);
}

Test(ema, a_resumed_run_keeps_the_same_ema)
{
    char straight[DIR_LEN], split[DIR_LEN];
    temp_dir(straight, DIR_LEN);
    temp_dir(split, DIR_LEN);
    run_result r = train(straight, "2", ARGS(EMA_DECAY));
    expect_status(&r, 0);
    run_result_free(&r);
    r = train(split, "1", ARGS(EMA_DECAY));
    expect_status(&r, 0);
    run_result_free(&r);
    r = train(split, "2", ARGS(EMA_DECAY, "--resume"));
    expect_status(&r, 0);
    run_result_free(&r);
    bool same;
    const char *a = in_dir(straight, "checkpoints/last.ckpt");
    const char *b = in_dir(split, "checkpoints/last.ckpt");
    cr_assert_gt(same_entries(a, b, "ema/", &same), 0, "no EMA in the checkpoint");
    cr_assert(same, "the resumed run's EMA differs from the straight run's");
    same_entries(a, b, "param/", &same);
    cr_assert(same);
    cr_assert_eq(metric_of(straight, 2, "valid_ema", "loss"),
                 metric_of(split, 2, "valid_ema", "loss"));
}

Test(ema, scorch_test_ema_refuses_a_checkpoint_without_one)
{
    char dir[DIR_LEN];
    temp_dir(dir, DIR_LEN);
    run_result r = train(dir, "1", ARGS("--max-train-iterations", "2"));
    expect_status(&r, 0);
    run_result_free(&r);
    r = scorch_test(in_dir(dir, "checkpoints/last.ckpt"), ARGS("--ema"));
    expect_status(&r, 1);
    expect_in(r.err, "holds no EMA weights");
    expect_in(r.err, "trained without --ema-decay");
    run_result_free(&r);
}

Test(ema, warmup_without_a_decay_is_refused)
{
    char dir[DIR_LEN];
    temp_dir(dir, DIR_LEN);
    run_result r = train(dir, "1", ARGS("--ema-warmup"));
    cr_assert_neq(r.status, 0);
    expect_in(r.err, "--ema-warmup needs --ema-decay");
    run_result_free(&r);
}
