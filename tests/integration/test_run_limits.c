/* Integration tests of the run's limits and probes: the LR range test
 * (--lr-find), validation every N steps (--validate-every-steps) and the
 * time budget (--max-time), through the real scorch-train on the
 * synthetic blobs (32 steps per epoch), and the finder in process to see
 * the weights it leaves. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "expect.h"
#include "harness.h"
#include "in_process.h"
#include "run/lr_find.h"
#include "run/trainer_impl.h"

enum { PATH = 4096, DIR_LEN = 64, MAX_ARGS = 48 };

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

static void bin(char *buf, const char *rel) { build_path(buf, PATH, rel); }

/* The MLP (with dropout: the runs draw random numbers) on the synthetic
 * blobs for `epochs`, plus `extra` (NULL-terminated) arguments; argv into
 * out (for in-process use), its count returned. */
static int train_args(const char **out, const char *run_dir, const char *epochs,
                      const char *const *extra)
{
    static char program[PATH], mlp[PATH], synthetic[PATH];
    bin(program, "host/scorch-train");
    bin(mlp, "plugins/mlp.so");
    bin(synthetic, "plugins/synthetic.so");
    const char *argv[] = {program, "--model", mlp, "--model-args", "hidden=32,dropout=0.2",
                          "--dataset", synthetic, "--batch-size", "64", "--epochs", epochs,
                          "--run-dir", run_dir, "--workers", "2", "--seed", "7",
                          "--no-tensorboard", "--keep-last", "100"};
    int n = (int)(sizeof argv / sizeof argv[0]);
    memcpy(out, argv, sizeof argv);
    for (; extra && *extra && n < MAX_ARGS - 1; extra++)
        out[n++] = *extra;
    out[n] = NULL;
    return n;
}

static run_result train(const char *run_dir, const char *epochs, const char *const *extra)
{
    const char *argv[MAX_ARGS];
    train_args(argv, run_dir, epochs, extra);
    return run_program(argv, NULL);
}

static bool exists(const char *path) { return access(path, F_OK) == 0; }

static int count_lines(const char *text)
{
    int n = 0;
    for (const char *p = text; p && *p; p++)
        n += *p == '\n';
    return n;
}

/* ---- --lr-find ---- */

/* The lr printed after "suggested lr ", or NaN. */
static double suggested_lr(const char *out)
{
    const char *p = out ? strstr(out, "suggested lr ") : NULL;
    return p ? strtod(p + strlen("suggested lr "), NULL) : NAN;
}

Test(lr_find, suggests_an_lr_in_range_and_writes_only_its_files)
{
    char dir[DIR_LEN];
    temp_dir(dir, sizeof dir);
    run_result r = train(dir, "1", ARGS("--lr-find", "--lr-find-steps", "60"));
    expect_status(&r, 0);
    double lr = suggested_lr(r.out);
    cr_expect(lr >= 1e-7 && lr <= 10, "suggested lr %g\n%s", lr, r.out);
    char *csv = read_text(in_dir(dir, "lr_find.csv"));
    cr_assert(csv, "no lr_find.csv");
    cr_expect_eq(strncmp(csv, "step,lr,loss,smoothed\n", 22), 0, "%s", csv);
    int rows = count_lines(csv) - 1;
    cr_expect(rows > 11 && rows <= 60, "%d rows", rows);
    double first_lr = 0;
    cr_expect_eq(sscanf(csv + 22, "1,%lf,", &first_lr), 1);
    cr_expect_float_eq(first_lr, 1e-7, 1e-15);
    free(csv);
    size_t size = 0;
    char *png = read_file(in_dir(dir, "lr_find.png"), &size);
    cr_assert(png && size > 8 && memcmp(png, "\x89PNG", 4) == 0, "no PNG");
    free(png);
    /* no run: no config.ini, metrics, checkpoints or control socket */
    const char *absent[] = {"config.ini", "metrics.jsonl", "checkpoints/last.ckpt",
                            "control.sock", "tensorboard"};
    for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++)
        cr_expect_not(exists(in_dir(dir, absent[i])), "%s written", absent[i]);
    run_result_free(&r);
}

Test(lr_find, a_divergence_stops_early)
{
    char dir[DIR_LEN];
    temp_dir(dir, sizeof dir);
    run_result r = train(dir, "1", ARGS("--lr-find", "--lr-find-range", "1e-4:1e6"));
    expect_status(&r, 0);
    expect_in(r.out, "diverged at step");
    char *csv = read_text(in_dir(dir, "lr_find.csv"));
    cr_assert(csv);
    cr_expect_lt(count_lines(csv) - 1, 100, "the test ran all its steps");
    free(csv);
    run_result_free(&r);
}

Test(lr_find, too_few_steps_give_no_suggestion)
{
    char dir[DIR_LEN];
    temp_dir(dir, sizeof dir);
    run_result r = train(dir, "1", ARGS("--lr-find", "--lr-find-steps", "5"));
    expect_status(&r, 1);
    expect_in(r.err, "--lr-find: no suggestion from 5 steps");
    cr_expect(exists(in_dir(dir, "lr_find.csv")), "the curve is written all the same");
    run_result_free(&r);
}

Test(lr_find, refuses_its_options_alone_and_resume)
{
    char dir[DIR_LEN];
    temp_dir(dir, sizeof dir);
    run_result r = train(dir, "1", ARGS("--lr-find-steps", "50"));
    expect_status(&r, 2);
    expect_in(r.err, "--lr-find-steps is only read by --lr-find");
    run_result_free(&r);
    /* a run's config.ini lists them with their defaults: accepted */
    char ini[PATH];
    snprintf(ini, sizeof ini, "%s/run.ini", dir);
    FILE *f = fopen(ini, "w");
    cr_assert(f);
    fputs("[train]\nlr-find = false\nlr-find-range = 1e-7:10\nlr-find-steps = 100\n", f);
    fclose(f);
    r = train(dir, "1", ARGS("--config", ini, "--max-train-iterations", "2"));
    expect_status(&r, 0);
    run_result_free(&r);
    r = train(dir, "1", ARGS("--lr-find", "--resume"));
    expect_status(&r, 2);
    expect_in(r.err, "not with --resume");
    run_result_free(&r);
}

/* A run after the finder, in the same directory, is the run without it. */
Test(lr_find, pollutes_no_run)
{
    char dir[DIR_LEN], plain[DIR_LEN];
    temp_dir(dir, sizeof dir);
    temp_dir(plain, sizeof plain);
    run_result r = train(dir, "1", ARGS("--lr-find", "--lr-find-steps", "40"));
    expect_status(&r, 0);
    run_result_free(&r);
    r = train(dir, "1", NULL);
    expect_status(&r, 0);
    run_result_free(&r);
    r = train(plain, "1", NULL);
    expect_status(&r, 0);
    run_result_free(&r);
    cr_expect(same_params(in_dir(dir, "checkpoints/last.ckpt"),
                          in_dir(plain, "checkpoints/last.ckpt")));
}

/* In process: the weights and the optimizer are set-up's after the test. */
Test(lr_find, restores_the_weights_and_the_optimizer)
{
    char dir[DIR_LEN];
    temp_dir(dir, sizeof dir);
    const char *argv[MAX_ARGS];
    int argc = train_args(argv, dir, "1", ARGS("--lr-find", "--lr-find-steps", "30", "--quiet"));
    host_trainer *t = trainer_for_args(argc, argv);
    int64_t n = sc_params_numel(t->s.params);
    float *before = malloc((size_t)n * sizeof *before);
    cr_assert(before);
    memcpy(before, sc_params_values(t->s.params), (size_t)n * sizeof *before);
    host_lr_curve curve;
    cr_assert_eq(host_lr_curve_init(&curve, 1e-5, 1, 30), SC_OK);
    bool interrupted = true;
    cr_assert_eq(host_lr_find(t, &curve, &interrupted), SC_OK, "%s", sc_error_message());
    cr_expect_not(interrupted);
    cr_expect_eq(curve.n, 30);
    cr_expect_neq(curve.points[29].loss, curve.points[0].loss, "the weights never moved");
    cr_expect_eq(memcmp(before, sc_params_values(t->s.params), (size_t)n * sizeof *before), 0,
                 "the weights changed");
    cr_expect_eq(sc_optim_steps(t->opt), 0);
    for (int i = 0; i < sc_optim_state_count(t->opt); i++) {
        const sc_tensor *st = sc_optim_state_at(t->opt, i);
        const float *v = st->data;
        for (int64_t j = 0; j < n; j++)
            cr_assert_eq(v[j], 0.0f, "optimizer state %s[%lld] = %g", st->name, (long long)j,
                         v[j]);
    }
    host_lr_curve_free(&curve);
    free(before);
    host_trainer_free(t);
}

/* ---- --validate-every-steps ---- */

/* How many metrics.jsonl records of `phase`; the largest `key` among
 * those of `phase` or `phase2` into *best. */
static int records(const char *dir, const char *phase, const char *phase2, const char *key,
                   double *best)
{
    char *text = read_text(in_dir(dir, "metrics.jsonl"));
    cr_assert(text);
    char want[64], want2[64], field[64];
    snprintf(want, sizeof want, "\"phase\":\"%s\"", phase);
    snprintf(want2, sizeof want2, "\"phase\":\"%s\"", phase2);
    snprintf(field, sizeof field, "\"%s\":", key);
    int n = 0;
    *best = -INFINITY;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        bool mine = strstr(line, want) != NULL;
        n += mine;
        const char *f = strstr(line, field);
        if ((mine || strstr(line, want2)) && f && strtod(f + strlen(field), NULL) > *best)
            *best = strtod(f + strlen(field), NULL);
    }
    free(text);
    return n;
}

Test(validate_every_steps, validates_within_epochs_and_keeps_the_trajectory)
{
    char dir[DIR_LEN], plain[DIR_LEN];
    temp_dir(dir, sizeof dir);
    temp_dir(plain, sizeof plain);
    run_result r = train(dir, "2", ARGS("--validate-every-steps", "10"));
    expect_status(&r, 0);
    double best;
    /* steps 10, 20, 30, 40, 50, 60; 32 and 64 end epochs: "valid" */
    cr_expect_eq(records(dir, "valid_step", "valid", "accuracy", &best), 6);
    double valid_best;
    cr_expect_eq(records(dir, "valid", "valid_step", "accuracy", &valid_best), 2);
    /* the best of all validations is the run's best */
    char line[64];
    snprintf(line, sizeof line, "best accuracy %.4f", best);
    expect_in(r.out, line);
    run_result_free(&r);
    r = train(plain, "2", NULL);
    expect_status(&r, 0);
    run_result_free(&r);
    cr_expect(same_params(in_dir(dir, "checkpoints/last.ckpt"),
                          in_dir(plain, "checkpoints/last.ckpt")),
              "validating changed the training");
}

/* A run resumed from a checkpoint written at a mid-epoch validation ends
 * as the run that went through, with each validation's record once. */
Test(validate_every_steps, resumes_exactly_from_a_mid_epoch_checkpoint)
{
    char dir[DIR_LEN], whole[DIR_LEN];
    temp_dir(dir, sizeof dir);
    temp_dir(whole, sizeof whole);
    const char *const every[] = {"--validate-every-steps", "10", "--checkpoint-every", "10",
                                 NULL};
    run_result r = train(whole, "2", every);
    expect_status(&r, 0);
    run_result_free(&r);
    r = train(dir, "2", every);
    expect_status(&r, 0);
    run_result_free(&r);
    char ckpt[PATH];
    snprintf(ckpt, sizeof ckpt, "%s", in_dir(dir, "checkpoints/epoch-0001-step-000000020.ckpt"));
    cr_assert(exists(ckpt), "no checkpoint at step 20");
    r = train(dir, "2", ARGS("--validate-every-steps", "10", "--checkpoint-every", "10",
                             "--resume", ckpt));
    expect_status(&r, 0);
    run_result_free(&r);
    cr_expect(same_params(in_dir(dir, "checkpoints/last.ckpt"),
                          in_dir(whole, "checkpoints/last.ckpt")));
    double best;
    cr_expect_eq(records(dir, "valid_step", "valid", "accuracy", &best), 6,
                 "each validation's record once");
}

/* ---- --max-time ---- */

Test(max_time, a_spent_budget_stops_with_a_checkpoint_and_resume_finishes_the_run)
{
    char dir[DIR_LEN], whole[DIR_LEN];
    temp_dir(dir, sizeof dir);
    temp_dir(whole, sizeof whole);
    /* spent at the first step boundary, which it still reaches */
    run_result r = train(dir, "2", ARGS("--max-time", "0.000001"));
    expect_status(&r, 0);
    expect_in(r.out, "stopped at epoch 1, step 1, as the --max-time budget of 0.000001 was "
                     "spent, after writing a checkpoint");
    cr_expect(exists(in_dir(dir, "checkpoints/epoch-0001-step-000000001.ckpt")));
    run_result_free(&r);
    r = train(dir, "2", ARGS("--max-time", "0.000001", "--resume"));
    expect_status(&r, 0);
    expect_in(r.out, "step 2, as the --max-time budget");
    run_result_free(&r);
    r = train(dir, "2", ARGS("--max-time", "1h", "--resume"));
    expect_status(&r, 0);
    run_result_free(&r);
    r = train(whole, "2", NULL);
    expect_status(&r, 0);
    run_result_free(&r);
    cr_expect(same_params(in_dir(dir, "checkpoints/last.ckpt"),
                          in_dir(whole, "checkpoints/last.ckpt")));
}

Test(max_time, refuses_what_is_no_duration)
{
    char dir[DIR_LEN];
    temp_dir(dir, sizeof dir);
    run_result r = train(dir, "1", ARGS("--max-time", "2h30"));
    expect_status(&r, 2);
    expect_in(r.err, "--max-time");
    expect_in(r.err, "'2h30' is not a duration");
    run_result_free(&r);
}
