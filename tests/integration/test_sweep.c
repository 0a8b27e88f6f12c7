/* scorch-sweep (host/sweep/, docs/sweeps.md) through the real programs:
 * a sweep of 8 trials over the mlp's lr and width, killed in the middle
 * (SIGINT to the sweep; SIGKILL to it and to its trials) and run again to
 * the end, with no trial trained twice and every trial's weights equal,
 * bit for bit, to those of a sweep never interrupted; its plot; random
 * search reproducible by seed; failing trials recorded; the median rule
 * stopping a bad trial; the refusals of a changed sweep, a busy output
 * folder and bad commands; a launcher. The suite sweep_gpu (builds with
 * a GPU backend, on 2 emulated or real GPUs): a GPU per slot, and a slot
 * whose GPU another run holds waits for it. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "base/device.h"
#include "expect.h"
#include "harness.h"
#include "scorch/device.h"
#include "sweep/plan.h"
#include "sweep/state.h"

enum { PATH = 4096, DIR_LEN = 64, MAX_ARGS = 40, TRIALS = 8, EPOCHS = 5 };

static char sweep_bin[PATH], plot_bin[PATH], mlp[PATH], synthetic[PATH], crash_model[PATH];

static void init(void)
{
    build_path(sweep_bin, PATH, "host/scorch-sweep");
    build_path(plot_bin, PATH, "host/scorch-plot");
    build_path(mlp, PATH, "plugins/mlp.so");
    build_path(synthetic, PATH, "plugins/synthetic.so");
    build_path(crash_model, PATH, "tests/fixtures/crash_model.so");
}

TestSuite(sweep, .init = init, .timeout = 900);
TestSuite(sweep_gpu, .init = init, .timeout = 900);

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* dir/sweep.ini: the mlp on the synthetic data, `base` lines under
 * [train], and `space` under [space]. */
static void write_sweep(const char *dir, const char *name, const char *base, const char *space)
{
    char path[PATH];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fprintf(f, "[train]\nmodel = %s\ndataset = %s\ntensorboard = false\n%s\n[space]\n%s\n", mlp,
            synthetic, base, space);
    fclose(f);
}

/* scorch-sweep --sweep dir/FILE --out dir/OUT --threads 1 EXTRA... */
static const char *const *sweep_argv(const char *dir, const char *file, const char *out,
                                     const char *const *extra)
{
    static char file_path[PATH], out_path[PATH];
    static const char *argv[MAX_ARGS];
    snprintf(file_path, sizeof file_path, "%s/%s", dir, file);
    snprintf(out_path, sizeof out_path, "%s/%s", dir, out);
    const char *head[] = {sweep_bin, "--sweep", file_path, "--out", out_path, "--threads", "1"};
    int n = 0;
    for (size_t i = 0; i < sizeof head / sizeof *head; i++)
        argv[n++] = head[i];
    for (; extra && *extra && n < MAX_ARGS - 1; extra++)
        argv[n++] = *extra;
    argv[n] = NULL;
    return argv;
}

static run_result run_sweep(const char *dir, const char *out, const char *const *extra,
                            const char *env)
{
    return run_program((const char *const *)sweep_argv(dir, "sweep.ini", out, extra), env);
}

/* The trials of dir/OUT's state file; *count of them. */
typedef struct sweep_state {
    host_sweep_plan plan;
    host_sweep_settings settings;
    host_trial *trials;
    int64_t count;
} sweep_state;

static bool read_state(const char *dir, const char *out, sweep_state *s)
{
    char path[PATH];
    *s = (sweep_state){0};
    snprintf(path, sizeof path, "%s/%s/sweep.ini", dir, out);
    if (host_sweep_plan_load(path, &s->plan) != SC_OK)
        return false;
    snprintf(path, sizeof path, "%s/%s/state.jsonl", dir, out);
    return host_sweep_state_read(path, &s->plan.space, &s->settings, &s->trials, &s->count) ==
           SC_OK;
}

static void free_state(sweep_state *s)
{
    host_trials_free(s->trials, s->count, s->plan.space.count);
    host_sweep_plan_free(&s->plan);
}

static int count_status(const sweep_state *s, host_trial_status status)
{
    int n = 0;
    for (int64_t t = 0; t < s->count; t++)
        n += s->trials[t].status == status;
    return n;
}

static void trial_dir(char *buf, const char *dir, const char *out, int64_t number)
{
    snprintf(buf, PATH, "%s/%s/trial-%04lld", dir, out, (long long)number);
}

/* How many records of (epoch, phase) a trial's metrics.jsonl holds. */
static int records(const char *run, int epoch, const char *phase)
{
    char path[PATH + sizeof "/metrics.jsonl"], want[128];
    snprintf(path, sizeof path, "%s/metrics.jsonl", run);
    snprintf(want, sizeof want, "{\"epoch\":%d,\"phase\":\"%s\",", epoch, phase);
    char *text = read_text(path);
    int n = 0;
    for (const char *p = text; p && (p = strstr(p, want)); p++)
        n++;
    free(text);
    return n;
}

static void sleep_s(double s)
{
    nanosleep(&(struct timespec){(time_t)s, (long)((s - (time_t)s) * 1e9)}, NULL);
}

/* ---- the sweep killed in the middle ---- */

/* 8 trials of EPOCHS epochs, each long enough (about a second) to be
 * caught while it runs. */
static void write_lr_width(const char *dir)
{
    char base[256];
    snprintf(base, sizeof base, "epochs = %d\nbatch-size = 64\nseed = 5\n"
             "dataset-args = train_size=24576,valid_size=1024,test_size=512\n", EPOCHS);
    write_sweep(dir, "sweep.ini", base,
                "lr = logspace(1e-3, 1e-1, 4)\nmodel-args.hidden = grid(16, 48)");
}

/* Waits until some trials have ended and some run past epoch 1. */
static void wait_for_the_middle(const char *dir, const char *out)
{
    for (double waited = 0; waited < 300; waited += 0.05) {
        sweep_state s;
        if (read_state(dir, out, &s)) {
            int ended = count_status(&s, HOST_TRIAL_DONE), midway = 0;
            for (int64_t t = 0; t < s.count; t++)
                midway += s.trials[t].status == HOST_TRIAL_RUNNING && s.trials[t].pid &&
                          s.trials[t].epoch >= 1;
            free_state(&s);
            if (ended >= 2 && midway >= 1)
                return;
        }
        sleep_s(0.05);
    }
    cr_assert_fail("the sweep never reached its middle");
}

/* SIGKILL to the sweep, then to the trials it had running. */
static void kill_everything(run_handle *h, const char *dir, const char *out)
{
    sweep_state s;
    kill(h->pid, SIGKILL);
    run_result r = run_wait(h, 0);
    run_result_free(&r);
    cr_assert(read_state(dir, out, &s));
    for (int64_t t = 0; t < s.count; t++)
        if (s.trials[t].status == HOST_TRIAL_RUNNING && s.trials[t].pid > 0)
            kill((pid_t)s.trials[t].pid, SIGKILL);
    free_state(&s);
}

/* What a trial was when its sweep was interrupted. */
typedef struct snapshot {
    host_trial_status status;
    int epoch;
    bool checkpoint; /* it had a last.ckpt */
} snapshot;

/* Interrupts a sweep into dir/OUT in the middle, by SIGINT or by
 * SIGKILL to everything, and says what each trial was then. */
static void interrupted_sweep(const char *dir, const char *out, bool hard, snapshot *trials)
{
    run_handle h = run_start(sweep_argv(dir, "sweep.ini", out, ARGS("--parallel", "2")), NULL);
    wait_for_the_middle(dir, out);
    if (hard) {
        kill_everything(&h, dir, out);
    } else {
        kill(h.pid, SIGINT);
        run_result r = run_wait(&h, 300);
        expect_status(&r, 130);
        expect_in(r.err, "run the same command again to go on");
        run_result_free(&r);
    }
    sweep_state s;
    cr_assert(read_state(dir, out, &s));
    cr_assert_eq(s.count, TRIALS);
    for (int64_t t = 0; t < s.count; t++) {
        char run[PATH], last[PATH + 32];
        trial_dir(run, dir, out, s.trials[t].number);
        snprintf(last, sizeof last, "%s/checkpoints/last.ckpt", run);
        trials[t] = (snapshot){s.trials[t].status, s.trials[t].epoch, access(last, F_OK) == 0};
    }
    cr_assert_lt(count_status(&s, HOST_TRIAL_DONE), TRIALS, "the sweep ended before its kill");
    free_state(&s);
}

/* Whether an interruption left a trial running with a checkpoint, the
 * case a resume is for. A trial that was midway can still end between
 * wait_for_the_middle and the signal. */
static bool left_a_resumable_trial(const snapshot *trials)
{
    for (int t = 0; t < TRIALS; t++)
        if (trials[t].status == HOST_TRIAL_RUNNING && trials[t].checkpoint)
            return true;
    return false;
}

/* An interruption by SIGINT into a fresh dir/soft-N until one leaves a
 * trial to resume; writes the N it used into out. */
static void softly_interrupted_sweep(const char *dir, char *out, size_t size, snapshot *trials)
{
    for (int attempt = 1;; attempt++) {
        snprintf(out, size, "soft-%d", attempt);
        interrupted_sweep(dir, out, false, trials);
        if (left_a_resumable_trial(trials))
            return;
        cr_assert_lt(attempt, 3, "%d SIGINTs in a row caught no trial midway", attempt);
    }
}

/* The launches a trial got after the interruption: none more for one that
 * had ended; a resume for one with a checkpoint; a start from nothing for
 * one without. After SIGINT every trial that had trained an epoch wrote a
 * checkpoint (scorch-train's answer to the sweep's SIGTERM). */
static void expect_launches(const host_trial *trial, const snapshot *before, bool hard)
{
    int starts = 1, resumes = 0;
    if (before->status == HOST_TRIAL_RUNNING && before->checkpoint)
        resumes = 1;
    else if (before->status == HOST_TRIAL_RUNNING)
        starts = 2;
    cr_assert(trial->starts == starts && trial->resumes == resumes, "trial %lld: %d starts and "
              "%d resumes, not %d and %d", (long long)trial->number, trial->starts,
              trial->resumes, starts, resumes);
    if (!hard && before->status == HOST_TRIAL_RUNNING && before->epoch >= 1)
        cr_assert(before->checkpoint, "trial %lld stopped at epoch %d without a checkpoint",
                  (long long)trial->number, before->epoch);
}

/* Each trial trained each epoch once, and ended with the weights and test
 * loss of the same trial in the sweep never interrupted. */
static void expect_like_uninterrupted(const char *dir, const char *out, const snapshot *before,
                                      bool hard)
{
    sweep_state s;
    cr_assert(read_state(dir, out, &s));
    cr_assert_eq(count_status(&s, HOST_TRIAL_DONE), TRIALS);
    for (int64_t t = 0; t < s.count; t++) {
        const host_trial *trial = &s.trials[t];
        char run[PATH], ref[PATH], a[PATH + 32], b[PATH + 32];
        trial_dir(run, dir, out, trial->number);
        trial_dir(ref, dir, "reference", trial->number);
        expect_launches(trial, &before[t], hard);
        for (int e = 1; e <= EPOCHS; e++)
            cr_assert_eq(records(run, e, "train"), 1, "%s: epoch %d trained %d times", run, e,
                         records(run, e, "train"));
        cr_assert_eq(records(run, EPOCHS, "test"), 1, "%s", run);
        snprintf(a, sizeof a, "%s/checkpoints/last.ckpt", run);
        snprintf(b, sizeof b, "%s/checkpoints/last.ckpt", ref);
        cr_assert(same_params(a, b), "%s differs from %s", a, b);
        cr_assert_eq(metric_of(run, EPOCHS, "test", "loss"), metric_of(ref, EPOCHS, "test", "loss"),
                     "%s", run);
    }
    free_state(&s);
}

static void expect_png(const char *path, uint32_t width, uint32_t height)
{
    size_t size;
    unsigned char *b = (unsigned char *)read_file(path, &size);
    cr_assert(b && size > 33, "%s: no PNG", path);
    cr_assert(memcmp(b, "\x89PNG\r\n\x1a\n", 8) == 0, "%s: not a PNG", path);
    cr_assert(memcmp(b + 12, "IHDR", 4) == 0, "%s: no IHDR first", path);
    uint32_t w = (uint32_t)b[16] << 24 | (uint32_t)b[17] << 16 | (uint32_t)b[18] << 8 | b[19];
    uint32_t h = (uint32_t)b[20] << 24 | (uint32_t)b[21] << 16 | (uint32_t)b[22] << 8 | b[23];
    cr_assert(w == width && h == height, "%s is %ux%u", path, w, h);
    cr_assert(memcmp(b + size - 8, "IEND", 4) == 0, "%s: no IEND last", path);
    free(b);
}

Test(sweep, killed_in_the_middle_and_run_again_trains_each_trial_once_and_exactly)
{
    char dir[DIR_LEN], soft_out[16], path[PATH], out[PATH];
    snapshot soft[TRIALS], hard[TRIALS];
    temp_dir(dir, sizeof dir);
    write_lr_width(dir);
    softly_interrupted_sweep(dir, soft_out, sizeof soft_out, soft);
    interrupted_sweep(dir, "hard", true, hard);
    run_result r = run_sweep(dir, "reference", ARGS("--parallel", "2"), NULL);
    expect_status(&r, 0);
    expect_in(r.out, "| rank | trial | lr | model-args.hidden | best accuracy");
    cr_assert_null(strstr(r.out, "\033[K"), "a progress line outside a terminal:\n%s", r.out);
    run_result_free(&r);
    r = run_sweep(dir, soft_out, ARGS("--parallel", "2"), NULL);
    expect_status(&r, 0);
    expect_in(r.out, "resumed from its last checkpoint");
    run_result_free(&r);
    r = run_sweep(dir, "hard", ARGS("--parallel", "2"), NULL);
    expect_status(&r, 0);
    run_result_free(&r);
    expect_like_uninterrupted(dir, soft_out, soft, false);
    expect_like_uninterrupted(dir, "hard", hard, true);

    /* results.csv: a header and a row per trial; the plot */
    snprintf(path, sizeof path, "%s/%s/results.csv", dir, soft_out);
    char *csv = read_text(path);
    expect_in(csv, "trial,status,lr,model-args.hidden,best_accuracy,best_epoch,last_accuracy,");
    expect_in(csv, "\n8,done,0.1,48,");
    free(csv);
    snprintf(out, sizeof out, "%s/%s", dir, soft_out);
    r = run_program(ARGS(plot_bin, "--sweep", out), NULL);
    expect_status(&r, 0);
    run_result_free(&r);
    snprintf(path, sizeof path, "%s/%s/sweep.png", dir, soft_out);
    expect_png(path, 1200, 800);
    /* done: a third run has nothing to do */
    r = run_sweep(dir, soft_out, ARGS("--parallel", "2"), NULL);
    expect_status(&r, 0);
    expect_in(r.out, "8 trials (8 ended, 0 to resume, 0 to start)");
    cr_assert_null(strstr(r.out, "started"), "%s", r.out);
    run_result_free(&r);
}

/* ---- random search ---- */

static char *params_of(const char *dir, const char *out)
{
    sweep_state s;
    cr_assert(read_state(dir, out, &s));
    char *text = calloc(1, 4096);
    for (int64_t t = 0; t < s.count; t++)
        for (int d = 0; d < s.plan.space.count; d++)
            snprintf(text + strlen(text), 4096 - strlen(text), "%s=%s;",
                     s.plan.space.dims[d].name, s.trials[t].values[d]);
    free_state(&s);
    return text;
}

Test(sweep, random_search_is_reproducible_from_its_seed)
{
    char dir[DIR_LEN];
    temp_dir(dir, sizeof dir);
    write_sweep(dir, "sweep.ini", "epochs = 1\ndataset-args = train_size=256,valid_size=64\n"
                "batch-size = 32",
                "lr = loguniform(1e-4, 1e-1)\nmodel-args.hidden = choice(8, 16, 32)\n"
                "optimizer = grid(adam, sgd)");
    const char *outs[] = {"a", "b", "c"}, *seeds[] = {"7", "7", "8"};
    for (int i = 0; i < 3; i++) {
        run_result r = run_sweep(dir, outs[i], ARGS("--trials", "2", "--seed", seeds[i],
                                                    "--parallel", "2"), NULL);
        expect_status(&r, 0);
        run_result_free(&r);
    }
    char *a = params_of(dir, "a"), *b = params_of(dir, "b"), *c = params_of(dir, "c");
    cr_assert_str_eq(a, b);
    cr_assert_str_neq(a, c);
    expect_in(a, "optimizer=adam;");
    expect_in(a, "optimizer=sgd;");
    free(a);
    free(b);
    free(c);
    /* more trials keep the first ones */
    run_result r = run_sweep(dir, "a", ARGS("--trials", "3", "--seed", "7", "--parallel", "2"),
                             NULL);
    expect_status(&r, 0);
    expect_in(r.out, "6 trials (4 ended, 0 to resume, 2 to start)");
    run_result_free(&r);
    a = params_of(dir, "a");
    b = params_of(dir, "b");
    cr_assert(strncmp(a, b, strlen(b)) == 0, "%s\n%s", a, b);
    free(a);
    free(b);
}

/* ---- failures ---- */

static const host_trial *trial_with(const sweep_state *s, const char *dim, const char *value,
                                    const char *dim2, const char *value2)
{
    for (int64_t t = 0; t < s->count; t++) {
        bool match = true;
        for (int d = 0; d < s->plan.space.count; d++) {
            const char *name = s->plan.space.dims[d].name;
            if ((strcmp(name, dim) == 0 && strcmp(s->trials[t].values[d], value) != 0) ||
                (dim2 && strcmp(name, dim2) == 0 && strcmp(s->trials[t].values[d], value2) != 0))
                match = false;
        }
        if (match)
            return &s->trials[t];
    }
    cr_assert_fail("no trial with %s=%s", dim, value);
    return NULL;
}

/* A combination scorch-train refuses, a NaN loss and a crash: each trial
 * is recorded as failed with the message, and the others run. */
Test(sweep, failing_trials_are_recorded_and_the_sweep_goes_on)
{
    char dir[DIR_LEN];
    temp_dir(dir, sizeof dir);
    write_sweep(dir, "sweep.ini", "epochs = 2\nbeta1 = 0.8\n"
                "dataset-args = train_size=512,valid_size=64,test_size=64\nbatch-size = 32",
                "optimizer = grid(adam, sgd)\ndataset-args.nan_sample = grid(-1, 5)");
    run_result r = run_sweep(dir, "out", ARGS("--parallel", "2"), NULL);
    expect_status(&r, 0);
    expect_in(r.out, "- trial-0002 failed: scorch-train: train loss is nan at epoch 1");
    run_result_free(&r);
    sweep_state s;
    cr_assert(read_state(dir, "out", &s));
    const host_trial *ok = trial_with(&s, "optimizer", "adam", "dataset-args.nan_sample", "-1");
    const host_trial *nan = trial_with(&s, "optimizer", "adam", "dataset-args.nan_sample", "5");
    const host_trial *refused = trial_with(&s, "optimizer", "sgd", NULL, NULL);
    cr_assert_eq(ok->status, HOST_TRIAL_DONE);
    cr_assert_eq(nan->status, HOST_TRIAL_FAILED);
    expect_in(nan->message, "scorch-train: train loss is nan at epoch 1");
    cr_assert_eq(refused->status, HOST_TRIAL_FAILED);
    expect_in(refused->message, "scorch-train: ");
    expect_in(refused->message, "beta1");
    free_state(&s);
    char path[PATH];
    snprintf(path, sizeof path, "%s/out/results.csv", dir);
    char *csv = read_text(path);
    expect_in(csv, ",failed,");
    expect_in(csv, "train loss is nan");
    free(csv);

    /* a crash, and a sweep whose every trial fails */
    char space[PATH + 32];
    snprintf(space, sizeof space, "model = grid(%s)", crash_model);
    write_sweep(dir, "crash.ini", "epochs = 2\ndataset-args = train_size=256\nbatch-size = 32",
                space);
    r = run_program(sweep_argv(dir, "crash.ini", "crash", NULL), "SCORCH_CRASH_STEP=3");
    expect_status(&r, 1);
    expect_in(r.out, "trial-0001 failed: killed by signal 11");
    expect_in(r.out, "scorch-train: crashed (SIGSEGV) in network_forward");
    expect_in(r.err, "scorch-sweep: every trial failed; trial-0001: killed by signal 11");
    run_result_free(&r);
}

/* ---- early stopping ---- */

Test(sweep, the_median_rule_stops_a_bad_trial)
{
    char dir[DIR_LEN];
    temp_dir(dir, sizeof dir);
    write_sweep(dir, "sweep.ini", "epochs = 40\noptimizer = sgd\n"
                "dataset-args = train_size=16384,valid_size=256,test_size=64",
                "lr = grid(0.1, 0.05, 1e-7)");
    run_result r = run_sweep(dir, "out", ARGS("--early-stop", "median", "--min-finished", "2"),
                             NULL);
    expect_status(&r, 0);
    expect_in(r.out, "trial-0003 stopping: median rule at epoch");
    run_result_free(&r);
    sweep_state s;
    cr_assert(read_state(dir, "out", &s));
    cr_assert_eq(s.trials[0].status, HOST_TRIAL_DONE);
    cr_assert_eq(s.trials[1].status, HOST_TRIAL_DONE);
    cr_assert_eq(s.trials[2].status, HOST_TRIAL_STOPPED);
    cr_assert_lt(s.trials[2].epoch, 40);
    expect_in(s.trials[2].stop, "median of 2 completed trials");
    free_state(&s);
}

/* ---- refusals ---- */

Test(sweep, a_changed_sweep_or_setting_is_refused_naming_each_change)
{
    char dir[DIR_LEN];
    temp_dir(dir, sizeof dir);
    write_sweep(dir, "sweep.ini", "epochs = 1\ndataset-args = train_size=256", "lr = grid(0.1)");
    run_result r = run_sweep(dir, "out", NULL, NULL);
    expect_status(&r, 0);
    run_result_free(&r);
    write_sweep(dir, "sweep.ini", "epochs = 2\ndataset-args = train_size=256",
                "lr = grid(0.1, 0.2)");
    r = run_sweep(dir, "out", ARGS("--seed", "3"), NULL);
    expect_status(&r, 2);
    expect_in(r.err, "(3 differences), so its trials would change:\n"
                     "  [train] epochs: was 1, now 2\n"
                     "  [space] lr: was grid(0.1), now grid(0.1, 0.2)\n"
                     "  --seed: was 42, now 3\n");
    run_result_free(&r);

    /* another sweep on the same folder */
    char lock[PATH];
    snprintf(lock, sizeof lock, "%s/out/.lock", dir);
    int fd = open(lock, O_RDWR);
    cr_assert(fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0);
    r = run_sweep(dir, "out", NULL, NULL);
    expect_status(&r, 2);
    expect_in(r.err, "is in use by another scorch-sweep");
    run_result_free(&r);
    close(fd);
}

Test(sweep, bad_commands_and_files_are_refused_with_one_line)
{
    char dir[DIR_LEN], file[PATH];
    temp_dir(dir, sizeof dir);
    write_sweep(dir, "sweep.ini", "epochs = 1", "lr = grid(0.1, fast)");
    snprintf(file, sizeof file, "%s/sweep.ini", dir);
    const struct {
        const char *const *args;
        const char *message;
    } cases[] = {
        {ARGS("--out", "x"), "missing --sweep (required"},
        {ARGS("--sweep", "x", "--out", "y", "--eta", "2"), "--eta is for --early-stop asha"},
        {ARGS("--sweep", "x", "--out", "y", "--metric", "mse"), "--metric mse: give --mode max"},
        {ARGS("--sweep", "x", "--out", "y", "--paralel", "2"), "did you mean --parallel?"},
        {ARGS("--sweep", "x", "--out", "y", "--early-stop", "hyperband"), "'hyperband' is not"},
        {ARGS("--sweep", "x", "--out", "y", "--parallel", "0"), "--parallel: '0' is not"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *argv[MAX_ARGS] = {sweep_bin};
        int n = 1;
        for (const char *const *a = cases[i].args; *a; a++)
            argv[n++] = *a;
        run_result r = run_program(argv, NULL);
        expect_status(&r, 2);
        expect_in(r.err, cases[i].message);
        cr_assert(strncmp(r.err, "scorch-sweep: ", 14) == 0 && !strchr(r.err, '\n')[1], "%s",
                  r.err);
        run_result_free(&r);
    }
    run_result r = run_sweep(dir, "out", NULL, NULL);
    expect_status(&r, 2);
    expect_in(r.err, "sweep.ini:7: lr: 'fast' is not a number");
    run_result_free(&r);
    write_sweep(dir, "sweep.ini", "epochs = 1", "lr = grid(0.1)");
    r = run_sweep(dir, "out", ARGS("--device", "cuda:0,1"), NULL);
    if (!strstr(r.err, "this build has no CUDA backend")) /* a GPU build: docs/sweeps.md */
        cr_log_info("a build with a GPU backend: --device cuda:0,1 went on: %s", r.err);
    else
        expect_status(&r, 2);
    run_result_free(&r);
    char out[PATH];
    snprintf(out, sizeof out, "%s/out2", dir);
    r = run_program(ARGS(sweep_bin, "--sweep", file, "--out", out, "--parallel", "250"), NULL);
    expect_status(&r, 2);
    expect_in(r.err, "--parallel 250 is more than the");
    run_result_free(&r);
}

/* ---- launchers ---- */

Test(sweep, a_launcher_goes_before_each_trial)
{
    char dir[DIR_LEN], log[PATH];
    temp_dir(dir, sizeof dir);
    write_sweep(dir, "sweep.ini", "epochs = 1\ndataset-args = train_size=256", "lr = grid(0.1)");
    run_result r = run_sweep(dir, "out", ARGS("--launcher", "env SWEEP_LAUNCHED=yes"), NULL);
    expect_status(&r, 0);
    run_result_free(&r);
    sweep_state s;
    cr_assert(read_state(dir, "out", &s));
    cr_assert_eq(s.trials[0].status, HOST_TRIAL_DONE);
    free_state(&s);
    r = run_sweep(dir, "bad", ARGS("--launcher", "/nonexistent/launcher -np 2"), NULL);
    expect_status(&r, 1);
    expect_in(r.out, "trial-0001 failed: scorch-sweep: cannot run the trial's program: "
                     "/nonexistent/launcher");
    run_result_free(&r);
    snprintf(log, sizeof log, "%s/out/trial-0001/stdout.log", dir);
    char *text = read_text(log);
    expect_in(text, "best accuracy");
    free(text);
}

/* ---- GPU slots ---- */

/* The trials' devices: devices[t], or either GPU where it is "any". */
static void expect_devices(const char *dir, const char *out, const char *const *devices)
{
    sweep_state s;
    cr_assert(read_state(dir, out, &s));
    for (int64_t t = 0; t < s.count; t++) {
        cr_assert_eq(s.trials[t].status, HOST_TRIAL_DONE, "trial %lld: %s", (long long)t + 1,
                     s.trials[t].message);
        if (strcmp(devices[t], "any") != 0)
            cr_assert_str_eq(s.trials[t].device, devices[t], "trial %lld", (long long)t + 1);
    }
    free_state(&s);
}

Test(sweep_gpu, each_slot_takes_a_gpu_and_waits_while_another_run_holds_it)
{
    if (sc_cuda_device_count() < 2)
        cr_skip_test("2 GPUs needed, %d found", sc_cuda_device_count());
    use_own_gpu_locks();
    char dir[DIR_LEN];
    temp_dir(dir, sizeof dir);
    write_sweep(dir, "sweep.ini", "epochs = 2\ndataset-args = train_size=2048",
                "lr = grid(0.01, 0.001, 0.0001)");
    run_result r = run_sweep(dir, "both", ARGS("--device", "cuda:0,1"), NULL);
    expect_status(&r, 0);
    expect_in(r.out, "in 2 slots of 1 thread on cuda:0,1");
    run_result_free(&r);
    expect_devices(dir, "both", ARGS("cuda:0", "cuda:1", "any"));

    int fd;
    cr_assert_eq(host_device_lock(getenv("SCORCH_DEVICE_LOCK_DIR"), 1, "the test's", &fd), SC_OK,
                 "%s", sc_error_message());
    r = run_sweep(dir, "one", ARGS("--device", "cuda:0,1"), NULL);
    close(fd);
    expect_status(&r, 0);
    expect_in(r.out, "the slot of cuda:1 waits: cuda:1 is held by another run (PID ");
    expect_in(r.out, "run dir the test's)");
    run_result_free(&r);
    expect_devices(dir, "one", ARGS("cuda:0", "cuda:0", "cuda:0"));
}
