/* Integration tests with the real binaries: live control
 * through scorch-ctl, signals, hook actions and refusals, the hooks'
 * checkpoint state, and the samples early_stopping and warmup
 * (test_devices.c has --device).
 *
 * A run is held at a known step by ctl_hooks' gate (a batch_begin hook
 * that waits until its user function open_gate is called through
 * scorch-ctl), and requests are known to be queued from `status`'s
 * queued=N: the tests synchronise through the control socket, never by
 * sleeping a guessed time. The synthetic runs have 32 steps per epoch. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

enum { PATH = 4096, DIR = 64, MAX_ARGS = 48, GATE_STEP = 5 };

typedef struct bins {
    char train[PATH], ctl[PATH], mlp[PATH], synthetic[PATH];
} bins;

static bins bin(void)
{
    bins b;
    build_path(b.train, PATH, "host/scorch-train");
    build_path(b.ctl, PATH, "host/scorch-ctl");
    build_path(b.mlp, PATH, "plugins/mlp.so");
    build_path(b.synthetic, PATH, "plugins/synthetic.so");
    return b;
}

static const char *env_path(const char *name)
{
    const char *p = getenv(name);
    cr_assert(p, "%s is not set", name);
    return p;
}

static const char *fixture(const char *name)
{
    static char path[PATH];
    char rel[128];
    snprintf(rel, sizeof rel, "tests/fixtures/%s.so", name);
    build_path(path, PATH, rel);
    return path;
}

/* ---- running programs ---- */

/* A program running in the background, its output going to files. */
typedef struct proc {
    pid_t pid;
    char out[64], err[64];
} proc;

/* Starts argv with the NULL-terminated "NAME=value" list env added. */
static proc spawn(const char *const *argv, const char *const *env)
{
    proc p;
    strcpy(p.out, "/tmp/scorch-ctl-out-XXXXXX");
    strcpy(p.err, "/tmp/scorch-ctl-err-XXXXXX");
    int out = mkstemp(p.out), err = mkstemp(p.err);
    cr_assert(out >= 0 && err >= 0);
    p.pid = fork();
    cr_assert(p.pid >= 0);
    if (p.pid == 0) {
        dup2(out, STDOUT_FILENO);
        dup2(err, STDERR_FILENO);
        for (; env && *env; env++) {
            const char *eq = strchr(*env, '=');
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)(eq - *env), *env);
            setenv(name, eq + 1, 1);
        }
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(out);
    close(err);
    return p;
}

/* Waits for p; *raw gets waitpid's status when not NULL. */
static run_result finish_raw(proc *p, int *raw)
{
    int status = 0;
    cr_assert_eq(waitpid(p->pid, &status, 0), p->pid);
    if (raw)
        *raw = status;
    run_result r = {
        .status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
        .out = read_text(p->out),
        .err = read_text(p->err),
    };
    unlink(p->out);
    unlink(p->err);
    return r;
}

static run_result finish(proc *p) { return finish_raw(p, NULL); }

static void expect_ok(const run_result *r)
{
    cr_assert_eq(r->status, 0, "exit %d\nstdout:\n%s\nstderr:\n%s", r->status, r->out, r->err);
}

/* scorch-train on the synthetic blobs with ctl_hooks, plus extra. */
static proc start_train(const char *run_dir, int epochs, const char *const *extra,
                        const char *const *env)
{
    static bins b;
    b = bin();
    static char epochs_arg[16];
    snprintf(epochs_arg, sizeof epochs_arg, "%d", epochs);
    const char *argv[MAX_ARGS] = {b.train, "--model", b.mlp, "--model-args", "hidden=32",
                                  "--dataset", b.synthetic, "--batch-size", "64",
                                  "--epochs", epochs_arg, "--run-dir", run_dir,
                                  "--workers", "2", "--seed", "7", "--keep-last", "20",
                                  "--hooks", env_path("SCORCH_CTL_HOOKS")};
    int n = 21;
    for (; extra && *extra && n < MAX_ARGS - 1; extra++)
        argv[n++] = *extra;
    argv[n] = NULL;
    return spawn(argv, env);
}

static run_result train(const char *run_dir, int epochs, const char *const *extra,
                        const char *const *env)
{
    proc p = start_train(run_dir, epochs, extra, env);
    return finish(&p);
}

/* scorch-ctl RUN_DIR cmd [arg]. */
static run_result ctl(const char *run_dir, const char *cmd, const char *arg)
{
    bins b = bin();
    const char *argv[] = {b.ctl, run_dir, cmd, arg, NULL};
    return run_program(argv, NULL);
}

static proc ctl_start(const char *run_dir, const char *cmd, const char *arg)
{
    static bins b;
    b = bin();
    const char *argv[] = {b.ctl, run_dir, cmd, arg, NULL};
    return spawn(argv, NULL);
}

static void pause_briefly(void) { nanosleep(&(struct timespec){0, 2000000}, NULL); }

static double monotonic_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Asks `cmd arg` until it answers want (exactly, or as a part with
 * `part`); a minute at most (by the clock: a sanitized scorch-ctl takes
 * 100 ms a call, so a count of tries would wait far longer). */
static void await_answer(const char *run_dir, const char *cmd, const char *arg,
                         const char *want, bool part)
{
    double deadline = monotonic_s() + 60;
    for (;;) {
        run_result r = ctl(run_dir, cmd, arg);
        bool got = r.status == 0 && (part ? strstr(r.out, want) != NULL
                                          : strcmp(r.out, want) == 0);
        cr_assert(got || monotonic_s() < deadline, "'%s' never answered '%s': %s%s", cmd,
                  want, r.out, r.err);
        run_result_free(&r);
        if (got)
            return;
        pause_briefly();
    }
}

/* The run holds at batch_begin of step GATE_STEP. */
static void await_gate(const char *run_dir)
{
    await_answer(run_dir, "call", "gate_state", "waiting\n", false);
}

static void open_gate(const char *run_dir)
{
    run_result r = ctl(run_dir, "call", "open_gate");
    expect_ok(&r);
    run_result_free(&r);
}

/* Sends cmd while the run waits at the gate; the run serves it at the
 * boundary after that step (step GATE_STEP + 1). The answer's text. */
static char *ask_at_gate(const char *run_dir, const char *cmd, const char *arg)
{
    await_gate(run_dir);
    proc c = ctl_start(run_dir, cmd, arg);
    await_answer(run_dir, "status", NULL, "queued=1", true);
    open_gate(run_dir);
    run_result r = finish(&c);
    expect_ok(&r);
    free(r.err);
    return r.out;
}

static const char *const GATED[] = {"CTL_GATE_AT_STEP=5", NULL};
static const char *const GATED_LOG[] = {"CTL_GATE_AT_STEP=5", "CTL_LOG=1", NULL};

/* ---- what the run leaves ---- */

static char *run_file(const char *dir, const char *name)
{
    static char path[PATH];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return path;
}

static bool has_checkpoint(const char *dir, int epoch, int step)
{
    char name[96];
    snprintf(name, sizeof name, "checkpoints/epoch-%04d-step-%09d.ckpt", epoch, step);
    return access(run_file(dir, name), R_OK) == 0;
}

/* The scalar `tag` a hook logged at `step`; NaN when absent. */
static double scalar_of(const char *dir, const char *tag, long long step)
{
    char want[160];
    snprintf(want, sizeof want, "\"step\":%lld,\"tag\":\"%s\",\"value\":", step, tag);
    char *text = read_text(run_file(dir, "metrics.jsonl"));
    const char *at = text ? strstr(text, want) : NULL;
    double v = at ? strtod(at + strlen(want), NULL) : NAN;
    free(text);
    return v;
}

static void expect_close(double got, double want, const char *what)
{
    cr_expect(fabs(got - want) <= 1e-7 * fabs(want), "%s: %.9g, not %.9g", what, got, want);
}

/* A straight run of `epochs` into a fresh directory, for comparisons. */
static void straight_run(char *dir, int epochs)
{
    temp_dir(dir, DIR);
    run_result r = train(dir, epochs, NULL, NULL);
    expect_ok(&r);
    run_result_free(&r);
}

static void expect_same_weights(const char *a, const char *b)
{
    char last_a[PATH], last_b[PATH];
    snprintf(last_a, PATH, "%s/checkpoints/last.ckpt", a);
    snprintf(last_b, PATH, "%s/checkpoints/last.ckpt", b);
    cr_expect(same_params(last_a, last_b), "%s and %s end with different weights", a, b);
}

/* Resumes dir to 2 epochs and expects the straight run's weights. */
static void expect_resume_is_exact(const char *dir)
{
    char straight[DIR];
    straight_run(straight, 2);
    run_result r = train(dir, 2, (const char *[]){"--resume", NULL}, NULL);
    expect_ok(&r);
    run_result_free(&r);
    expect_same_weights(straight, dir);
}

/* ---- live control ---- */

Test(control, pause_holds_and_resume_gives_the_same_result)
{
    char straight[DIR], dir[DIR];
    straight_run(straight, 2);
    temp_dir(dir, sizeof dir);
    proc run = start_train(dir, 2, NULL, GATED);
    char *answer = ask_at_gate(dir, "pause", NULL);
    cr_expect_str_eq(answer, "paused at epoch 1, step 6\n");
    free(answer);
    run_result s1 = ctl(dir, "status", NULL), s2 = ctl(dir, "status", NULL);
    expect_ok(&s1);
    cr_expect(strstr(s1.out, " step=6 ") && strstr(s1.out, "paused=yes"), "%s", s1.out);
    cr_expect_str_eq(s1.out, s2.out, "the step moved while paused");
    run_result_free(&s1);
    run_result_free(&s2);

    /* A paused run still serves what needs no training. */
    static const struct {
        const char *cmd, *arg, *want;
    } served[] = {
        {"save", NULL, "checkpoint written at epoch 1, step 6\n"},
        {"validate", NULL, "valid_extra at epoch 1, step 6: accuracy "},
        {"test", NULL, "test_extra at epoch 1, step 6: accuracy "},
        {"call", "greet", "hello, nobody\n"},
        {"status", NULL, "paused=yes"},
    };
    for (size_t i = 0; i < sizeof served / sizeof served[0]; i++) {
        run_result r = ctl(dir, served[i].cmd, served[i].arg);
        expect_ok(&r);
        cr_expect(strstr(r.out, served[i].want), "%s: %s", served[i].cmd, r.out);
        run_result_free(&r);
    }
    run_result r = ctl(dir, "set-lr", "1e7"); /* refused, and the run goes on */
    cr_expect_eq(r.status, 1);
    cr_expect(strstr(r.err, "lr 1e+07 is out of range (0 < lr < 1e6)"), "%s", r.err);
    run_result_free(&r);
    r = ctl(dir, "resume", NULL);
    expect_ok(&r);
    cr_expect_str_eq(r.out, "resumed\n");
    run_result_free(&r);
    r = finish(&run);
    expect_ok(&r);
    run_result_free(&r);
    cr_expect(has_checkpoint(dir, 1, 6), "save wrote no checkpoint");
    cr_expect_eq(metric_of(dir, 1, "valid_extra", "step"), 6);
    cr_expect_eq(metric_of(dir, 1, "test_extra", "step"), 6);
    cr_expect_eq(metric_of(dir, 2, "valid", "loss"), metric_of(straight, 2, "valid", "loss"));
    expect_same_weights(straight, dir);
    cr_expect_neq(access(run_file(dir, "control.sock"), F_OK), 0, "the socket was left behind");
}

Test(control, set_lr_changes_the_next_steps_lr)
{
    char dir[DIR];
    temp_dir(dir, sizeof dir);
    proc run = start_train(dir, 1, (const char *[]){"--lr", "0.001", NULL}, GATED_LOG);
    char *answer = ask_at_gate(dir, "set-lr", "0.05");
    cr_expect_str_eq(answer, "base lr 0.05 from step 7\n");
    free(answer);
    run_result r = finish(&run);
    expect_ok(&r);
    run_result_free(&r);
    expect_close(scalar_of(dir, "lr", 6), 0.001, "the 6th step's lr");
    expect_close(scalar_of(dir, "lr", 7), 0.05, "the 7th step's lr");
    expect_close(metric_of(dir, 1, "train", "lr"), 0.05, "the epoch's last lr");
}

Test(control, stop_checkpoints_exits_cleanly_and_resume_is_exact)
{
    char dir[DIR];
    temp_dir(dir, sizeof dir);
    proc run = start_train(dir, 2, NULL, GATED);
    free(ask_at_gate(dir, "pause", NULL)); /* a stop also ends a pause */
    run_result r = ctl(dir, "stop", NULL);
    expect_ok(&r);
    cr_expect(strstr(r.out, "stopped by scorch-ctl at epoch 1, step 6, after writing a "
                            "checkpoint"), "%s", r.out);
    run_result_free(&r);
    r = finish(&run);
    expect_ok(&r);
    run_result_free(&r);
    cr_expect(has_checkpoint(dir, 1, 6));
    cr_expect(isnan(metric_of(dir, 1, "test", "loss")), "a stopped run ran its test pass");
    expect_resume_is_exact(dir);
}

Test(control, bad_commands_and_absent_runs_are_refused)
{
    char dir[DIR];
    temp_dir(dir, sizeof dir);
    run_result r = ctl(dir, "status", NULL);
    cr_expect_eq(r.status, 1);
    cr_expect(strstr(r.err, "control.sock does not exist: no scorch-train is running"), "%s",
              r.err);
    run_result_free(&r);
    proc run = start_train(dir, 1, NULL, GATED);
    await_gate(dir);
    static const struct {
        const char *cmd, *arg, *want;
    } bad[] = {
        {"pasue", NULL, "scorch-ctl: unknown command 'pasue' (did you mean 'pause'?)\n"},
        {"set-lr", "-3", "scorch-ctl: set-lr needs a positive number, not '-3'\n"},
        {"call", "nothing", "scorch-ctl: no user function 'nothing' (the run has: "},
        {"call", "greet nom=x", "unknown"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        r = ctl(dir, bad[i].cmd, bad[i].arg);
        cr_expect_eq(r.status, 1, "%s", bad[i].cmd);
        cr_expect(strstr(r.err, bad[i].want), "%s: %s", bad[i].cmd, r.err);
        run_result_free(&r);
    }
    open_gate(dir);
    r = finish(&run);
    expect_ok(&r);
    run_result_free(&r);
    bins b = bin();
    r = run_program((const char *[]){b.ctl, dir, NULL}, NULL);
    cr_expect_eq(r.status, 2);
    cr_expect(strstr(r.err, "Usage: scorch-ctl RUN_DIR COMMAND"), "%s", r.err);
    run_result_free(&r);
}

/* ---- signals ---- */

Test(signals, sigterm_stops_after_the_batch_with_a_checkpoint)
{
    char dir[DIR];
    temp_dir(dir, sizeof dir);
    proc run = start_train(dir, 2, NULL, GATED);
    await_gate(dir);
    cr_assert_eq(kill(run.pid, SIGTERM), 0);
    open_gate(dir);
    run_result r = finish(&run);
    cr_expect_eq(r.status, 130, "exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.out, "stopped by a signal at epoch 1, step 6"), "%s", r.out);
    run_result_free(&r);
    cr_expect(has_checkpoint(dir, 1, 6));
    expect_resume_is_exact(dir);
}

Test(signals, sigusr1_writes_a_checkpoint_and_training_goes_on)
{
    char straight[DIR], dir[DIR];
    straight_run(straight, 2);
    temp_dir(dir, sizeof dir);
    proc run = start_train(dir, 2, NULL, GATED);
    await_gate(dir);
    cr_assert_eq(kill(run.pid, SIGUSR1), 0);
    open_gate(dir);
    run_result r = finish(&run);
    expect_ok(&r);
    run_result_free(&r);
    cr_expect(has_checkpoint(dir, 1, 6), "SIGUSR1 wrote no checkpoint");
    cr_expect(!isnan(metric_of(dir, 2, "test", "loss")), "training did not go on");
    expect_same_weights(straight, dir);
}

/* Whether pid still catches SIGINT (its SigCgt mask in /proc). */
static bool catches_sigint(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    unsigned long long mask = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "SigCgt: %llx", &mask) == 1)
            break;
    if (f)
        fclose(f);
    return mask & (1ull << (SIGINT - 1));
}

Test(signals, a_second_sigint_exits_at_once_and_the_stale_socket_is_replaced)
{
    char dir[DIR];
    temp_dir(dir, sizeof dir);
    proc run = start_train(dir, 1, (const char *[]){"--checkpoint-every", "2", NULL}, GATED);
    await_gate(dir);
    cr_assert_eq(kill(run.pid, SIGINT), 0);
    /* The first SIGINT's handler gives SIGINT back to the default action. */
    for (int tries = 0; catches_sigint(run.pid); tries++) {
        cr_assert_lt(tries, 30000, "the first SIGINT was not handled");
        pause_briefly();
    }
    cr_assert_eq(kill(run.pid, SIGINT), 0);
    int raw;
    run_result r = finish_raw(&run, &raw);
    cr_expect(WIFSIGNALED(raw) && WTERMSIG(raw) == SIGINT, "exit %d", r.status);
    run_result_free(&r);
    cr_expect(!has_checkpoint(dir, 1, 6), "the gated batch finished");
    cr_expect_eq(access(run_file(dir, "control.sock"), F_OK), 0, "no stale socket to replace");
    r = train(dir, 1, (const char *[]){"--resume", "--checkpoint-every", "2", NULL}, NULL);
    expect_ok(&r);
    cr_expect(strstr(r.out, "resumed from") && strstr(r.out, "step 4"), "%s", r.out);
    run_result_free(&r);
}

/* ---- hooks ---- */

Test(hooks, request_checkpoint_and_request_eval_act_at_the_next_boundary)
{
    char dir[DIR];
    temp_dir(dir, sizeof dir);
    run_result r = train(dir, 1, NULL,
                         (const char *[]){"CTL_CHECKPOINT_AT_STEP=3", "CTL_EVAL_AT_STEP=5",
                                          "CTL_LOG=1", NULL});
    expect_ok(&r);
    cr_expect(strstr(r.out, "checkpoint requested by a hook: test request"), "%s", r.out);
    run_result_free(&r);
    cr_expect(has_checkpoint(dir, 1, 3));
    cr_expect_eq(metric_of(dir, 1, "valid_extra", "step"), 5);
    cr_expect_eq(scalar_of(dir, "extra_valid_batches", 5), 8, "the extra pass's batch_ends");
}

Test(hooks, every_pass_runs_its_batch_and_phase_hooks)
{
    char dir[DIR];
    temp_dir(dir, sizeof dir);
    run_result r = train(dir, 1, NULL, (const char *[]){"CTL_LOG=1", NULL});
    expect_ok(&r);
    run_result_free(&r);
    cr_expect_eq(scalar_of(dir, "train_batches", 32), 32);
    cr_expect_eq(scalar_of(dir, "valid_batches", 32), 8);
    cr_expect_eq(scalar_of(dir, "test_batches", 32), 8);
}

Test(hooks, after_backward_sees_every_gradient)
{
    char dir[DIR];
    temp_dir(dir, sizeof dir);
    run_result r = train(dir, 1, NULL, (const char *[]){"CTL_LOG=1", NULL});
    expect_ok(&r);
    run_result_free(&r);
    cr_expect_eq(scalar_of(dir, "n_grads", 1), 4, "mlp hidden=32: two weights, two biases");
    double norm = scalar_of(dir, "grad_norm", 1);
    cr_expect(isfinite(norm) && norm > 0, "grad norm %g", norm);
}

Test(hooks, a_hooks_state_comes_back_from_the_checkpoint)
{
    char dir[DIR];
    temp_dir(dir, sizeof dir);
    run_result r = train(dir, 2, (const char *[]){"--hooks", env_path("SCORCH_STOP_HOOK"), NULL},
                         (const char *[]){"SCORCH_TEST_STOP_AT_STEP=10", NULL});
    expect_ok(&r);
    run_result_free(&r);
    r = train(dir, 2, (const char *[]){"--resume", NULL}, NULL);
    expect_ok(&r);
    run_result_free(&r);
    cr_expect_eq(scalar_of(dir, "restored_batches", 10), 10);
}

Test(hooks, a_failing_hook_stops_the_run_naming_it_and_keeps_the_checkpoint)
{
    char dir[DIR];
    temp_dir(dir, sizeof dir);
    run_result r = train(dir, 1, NULL, NULL);
    expect_ok(&r);
    run_result_free(&r);
    size_t before_size, after_size;
    char *before = read_file(run_file(dir, "checkpoints/last.ckpt"), &before_size);
    r = train(dir, 2, (const char *[]){"--resume", NULL},
              (const char *[]){"CTL_FAIL_AT_STEP=40", NULL});
    cr_expect_eq(r.status, 1);
    char want[PATH + 128];
    snprintf(want, sizeof want, "hook 'ctl_batch_end' of %s at batch_end: planned failure at "
             "step 40", env_path("SCORCH_CTL_HOOKS"));
    cr_expect(strstr(r.err, want), "%s", r.err);
    cr_expect(strstr(r.err, "last good one"), "%s", r.err);
    run_result_free(&r);
    char *after = read_file(run_file(dir, "checkpoints/last.ckpt"), &after_size);
    cr_expect(before && after && before_size == after_size &&
                  memcmp(before, after, before_size) == 0,
              "the last checkpoint changed");
    free(before);
    free(after);
}

static void expect_refused(const char *const *extra, const char *want)
{
    char dir[DIR];
    temp_dir(dir, sizeof dir);
    run_result r = train(dir, 1, extra, NULL);
    cr_expect_eq(r.status, 1, "exit %d", r.status);
    cr_expect(strstr(r.err, want), "stderr lacks '%s':\n%s", want, r.err);
    run_result_free(&r);
}

Test(hooks, broken_hook_tables_are_refused_at_load)
{
    char typo[PATH], dup[PATH], abi[PATH], good[PATH];
    snprintf(typo, PATH, "%s", fixture("hooks_typo"));
    snprintf(dup, PATH, "%s", fixture("hooks_dup"));
    snprintf(abi, PATH, "%s", fixture("hooks_abi2"));
    snprintf(good, PATH, "%s", fixture("hooks_good"));
    expect_refused((const char *[]){"--hooks", typo, NULL},
                   "hook 'log_epoch' uses unknown point 'epoch_ned' (did you mean "
                   "'epoch_end'?)");
    expect_refused((const char *[]){"--hooks", dup, NULL},
                   "hook name 'log_epoch' appears twice in the table");
    expect_refused((const char *[]){"--hooks", abi, NULL}, "hook table built for plugin ABI 2.0");
    expect_refused((const char *[]){"--hooks", good, "--hooks", good, NULL},
                   "hook name 'log_epoch' is already used by");
}

/* ---- the samples ---- */

static const char *const EARLY_ARGS = "patience=2,min_delta=0.001";

Test(samples, early_stopping_stops_and_resumes_its_count)
{
    /* At lr 1e-9 the valid loss stays put: epoch 1 sets the best, epochs 2
     * and 3 fail to beat it, and the run stops after epoch 3. */
    char dir[DIR];
    temp_dir(dir, sizeof dir);
    const char *early = env_path("SCORCH_EARLY_STOPPING");
    run_result r = train(dir, 10, (const char *[]){"--lr", "1e-9", "--hooks", early,
                                                   "--hooks-args", EARLY_ARGS, NULL},
                         NULL);
    expect_ok(&r);
    cr_expect(strstr(r.out, "stop requested by a hook: valid loss has not improved"), "%s",
              r.out);
    run_result_free(&r);
    cr_expect(!isnan(metric_of(dir, 3, "valid", "loss")));
    cr_expect(isnan(metric_of(dir, 4, "train", "loss")), "it went on after epoch 3");
    cr_expect(!isnan(metric_of(dir, 3, "test", "loss")), "no test pass after the stop");

    /* Broken after epoch 2, the resumed run still stops after epoch 3: its
     * count of bad epochs came back from the checkpoint. */
    char split[DIR];
    temp_dir(split, sizeof split);
    r = train(split, 10, (const char *[]){"--lr", "1e-9", "--hooks", early, "--hooks-args",
                                          EARLY_ARGS, "--hooks", env_path("SCORCH_STOP_HOOK"),
                                          NULL},
              (const char *[]){"SCORCH_TEST_STOP_AT_STEP=64", NULL});
    expect_ok(&r);
    run_result_free(&r);
    cr_expect(isnan(metric_of(split, 3, "train", "loss")));
    /* The run's config.ini keeps the plugins' arguments (the default
     * patience, 3, would stop after epoch 4). */
    bins b = bin();
    char ini[PATH];
    snprintf(ini, sizeof ini, "%s", run_file(split, "config.ini"));
    char *text = read_text(ini);
    char line[PATH + 64];
    snprintf(line, sizeof line, "\nhooks = %s\nhooks-args = %s\n", early, EARLY_ARGS);
    cr_expect(text && strstr(text, line), "config.ini lacks '%s':\n%s", line, text);
    free(text);
    r = run_program((const char *[]){b.train, "--config", ini, "--resume", NULL}, NULL);
    expect_ok(&r);
    run_result_free(&r);
    cr_expect(!isnan(metric_of(split, 3, "valid", "loss")));
    cr_expect(isnan(metric_of(split, 4, "train", "loss")), "the count was lost on resume");
}

Test(samples, warmup_raises_the_lr_step_by_step)
{
    char dir[DIR];
    temp_dir(dir, sizeof dir);
    run_result r = train(dir, 1, (const char *[]){"--lr", "0.004", "--hooks",
                                                  env_path("SCORCH_WARMUP"), "--hooks-args",
                                                  "steps=8", NULL},
                         (const char *[]){"CTL_LOG=1", NULL});
    expect_ok(&r);
    run_result_free(&r);
    for (int k = 1; k <= 8; k++) {
        char what[32];
        snprintf(what, sizeof what, "step %d's lr", k);
        expect_close(scalar_of(dir, "lr", k), 0.004 * k / 8, what);
    }
    expect_close(scalar_of(dir, "lr", 20), 0.004, "after the warm-up");
    /* batch_begin's scalar lands at the step it sets the lr of. */
    expect_close(scalar_of(dir, "warmup_lr", 1), 0.0005, "the first logged warm-up lr");
    expect_close(scalar_of(dir, "warmup_lr", 8), 0.004, "the last logged warm-up lr");
}

/* ---- hook arguments, the step of a hook's scalar, status between epochs ---- */

Test(hooks, hooks_args_reach_the_plugin_and_unknown_keys_are_refused)
{
    char refusal[PATH + 160];
    snprintf(refusal, sizeof refusal, "%s: --hooks-args: unknown key 'gate_epok' (did you mean "
             "'gate_epoch'? the plugin takes gate_epoch, log)", env_path("SCORCH_PROBE_HOOKS"));
    expect_refused((const char *[]){"--hooks", env_path("SCORCH_PROBE_HOOKS"), "--hooks-args",
                                    "gate_epok=1", NULL},
                   refusal);
    /* start_train's --hooks ctl_hooks is the one before: it takes none. */
    snprintf(refusal, sizeof refusal, "%s: --hooks-args: unknown key 'log': the plugin takes no "
             "arguments", env_path("SCORCH_CTL_HOOKS"));
    expect_refused((const char *[]){"--hooks-args", "log=true", NULL}, refusal);
    /* A value the plugin cannot read stops the run at train_begin. */
    expect_refused((const char *[]){"--hooks", env_path("SCORCH_PROBE_HOOKS"), "--hooks-args",
                                    "log=maybe", NULL},
                   "hook 'probe_args' of");
}

/* A step's scalars meet: after_backward's (which logs the batch's loss)
 * and batch_end's are both at the step the batch makes, and
 * after_backward's ctx->step is that step. */
Test(hooks, a_scalar_from_after_backward_lands_at_its_steps_loss)
{
    char dir[DIR];
    temp_dir(dir, sizeof dir);
    run_result r = train(dir, 1, (const char *[]){"--hooks", env_path("SCORCH_PROBE_HOOKS"),
                                                  "--hooks-args", "log=true", NULL},
                         NULL);
    expect_ok(&r);
    run_result_free(&r);
    cr_expect(isnan(scalar_of(dir, "probe_ab_loss", 0)), "a scalar of step 1 is at step 0");
    for (int k = 1; k <= 32; k++) {
        char what[48];
        snprintf(what, sizeof what, "after_backward's loss at step %d", k);
        expect_close(scalar_of(dir, "probe_ab_loss", k), scalar_of(dir, "probe_be_loss", k),
                     what);
        cr_expect_eq(scalar_of(dir, "probe_ab_step", k), k, "after_backward's step at step %d",
                     k);
    }
}

/* The value of `key=` in a status line; NaN when absent. */
static double status_value(const char *line, const char *key)
{
    char want[64];
    snprintf(want, sizeof want, " %s=", key);
    const char *at = strstr(line, want);
    return at ? strtod(at + strlen(want), NULL) : NAN;
}

Test(control, status_between_epochs_labels_the_train_phases_figures)
{
    char dir[DIR];
    temp_dir(dir, sizeof dir);
    /* --validate-on-train evaluates the train split after training on it:
     * the figures shown are still the train phase's. */
    proc run = start_train(dir, 2, (const char *[]){"--hooks", env_path("SCORCH_PROBE_HOOKS"),
                                                    "--hooks-args", "gate_epoch=1",
                                                    "--validate-on-train", NULL},
                           NULL);
    /* Held at epoch 1's epoch_end, a pause is served between the epochs. */
    await_answer(dir, "call", "probe_gate_state", "waiting\n", false);
    proc c = ctl_start(dir, "pause", NULL);
    await_answer(dir, "status", NULL, "queued=1", true);
    run_result r = ctl(dir, "call", "probe_open_gate");
    expect_ok(&r);
    run_result_free(&r);
    r = finish(&c);
    expect_ok(&r);
    cr_expect_str_eq(r.out, "paused after epoch 1, step 32\n");
    run_result_free(&r);

    run_result s = ctl(dir, "status", NULL);
    expect_ok(&s);
    const char *where = "epoch=1/2 phase=between_epochs batch=32/32 step=32 ";
    cr_expect(strncmp(s.out, where, strlen(where)) == 0, "%s", s.out);
    cr_expect(strstr(s.out, " paused=yes "), "%s", s.out);
    cr_expect(isnan(status_value(s.out, "loss")) && isnan(status_value(s.out, "samples_per_s")),
              "unlabelled figures: %s", s.out);
    double train_loss = metric_of(dir, 1, "train", "loss");
    cr_expect(fabs(status_value(s.out, "train_loss") - train_loss) <= 1e-5 * train_loss,
              "not epoch 1's train loss %g: %s", train_loss, s.out);
    cr_expect_gt(status_value(s.out, "train_samples_per_s"), 0, "%s", s.out);
    run_result_free(&s);

    r = ctl(dir, "resume", NULL);
    expect_ok(&r);
    run_result_free(&r);
    r = finish(&run);
    expect_ok(&r);
    run_result_free(&r);
}
