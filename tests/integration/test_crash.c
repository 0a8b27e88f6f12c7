/* Integration tests: a plugin that crashes is named and the run is left
 * resumable (docs/abi.md, "When a plugin crashes"). The fixtures
 * tests/fixtures/crash_*.c crash on cue, set by an environment variable,
 * in network_forward (also on a replica's thread), in dataset_getitem on a
 * loader thread (abort, and a stack overflow), in class_name, in a hook,
 * in a user function on the control thread, and in the plugin's
 * constructor and destructor; scorch-train and scorch-test must die by
 * that signal with one line naming the plugin file and function (and the
 * sample), the last good checkpoint and a backtrace, and leave no control
 * socket behind; --resume then finishes the run. The stack overflows are
 * reported only from a thread with an alternate signal stack. */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

enum { PATH = 4096, DIR = 64, MAX_ARGS = 32 };
/* A description of the crashing call, and a whole crash line. */
enum { WHAT = PATH + 128, LINE = WHAT + PATH + 256 };

/* What a run trains: plugin files relative to the build root (hooks may be
 * NULL), their args, the batch size, and options to add (NULL-terminated,
 * or NULL). 2 epochs, 2 loader workers. */
typedef struct setup {
    const char *model, *model_args, *dataset, *dataset_args, *hooks, *batch_size;
    const char *const *extra;
} setup;

#define BLOBS "train_size=256,valid_size=64,test_size=64" /* synthetic's */

/* 8 steps per epoch. */
static const setup crashing_model = {.model = "tests/fixtures/crash_model.so",
                                     .model_args = "classes=4",
                                     .dataset = "plugins/synthetic.so", .dataset_args = BLOBS,
                                     .batch_size = "32"};
/* 4 steps per epoch: 64 train samples. */
static const setup crashing_dataset = {.model = "plugins/mlp.so", .model_args = "hidden=16",
                                       .dataset = "tests/fixtures/crash_dataset.so",
                                       .batch_size = "16"};
static const setup overflowing_dataset = {.model = "plugins/mlp.so", .model_args = "hidden=16",
                                          .dataset = "tests/fixtures/crash_dataset_overflow.so",
                                          .batch_size = "16"};
static const setup crashing_hooks = {.model = "plugins/mlp.so", .model_args = "hidden=16",
                                     .dataset = "plugins/synthetic.so", .dataset_args = BLOBS,
                                     .hooks = "tests/fixtures/crash_hooks.so",
                                     .batch_size = "32"};
/* Two replicas, each a thread that trains. */
static const setup overflowing_replicas = {
    .model = "tests/fixtures/crash_model_overflow.so", .model_args = "classes=4",
    .dataset = "plugins/synthetic.so", .dataset_args = BLOBS, .batch_size = "32",
    .extra = (const char *const[]){"--device", "cpu", "--replicas", "2", NULL}};
/* Trains for as long as scorch-ctl needs to call it. */
static const setup long_hooks_run = {
    .model = "plugins/mlp.so", .model_args = "hidden=16", .dataset = "plugins/synthetic.so",
    .dataset_args = BLOBS, .hooks = "tests/fixtures/crash_hooks.so", .batch_size = "32",
    .extra = (const char *const[]){"--epochs", "100000", NULL}};

static run_handle start_train(const setup *s, const char *run_dir, bool resume,
                              const char *env)
{
    char bin[PATH], model[PATH], dataset[PATH], hooks[PATH];
    build_path(bin, PATH, "host/scorch-train");
    build_path(model, PATH, s->model);
    build_path(dataset, PATH, s->dataset);
    const char *argv[MAX_ARGS] = {bin, "--model", model, "--model-args", s->model_args,
                                  "--dataset", dataset, "--dataset-path", "unused",
                                  "--batch-size", s->batch_size, "--epochs", "2",
                                  "--run-dir", run_dir, "--workers", "2", "--seed", "7"};
    int n = 19;
    if (s->dataset_args) {
        argv[n++] = "--dataset-args";
        argv[n++] = s->dataset_args;
    }
    if (s->hooks) {
        build_path(hooks, PATH, s->hooks);
        argv[n++] = "--hooks";
        argv[n++] = hooks;
    }
    for (const char *const *arg = s->extra; arg && *arg && n < MAX_ARGS - 2; arg++)
        argv[n++] = *arg;
    if (resume)
        argv[n++] = "--resume";
    argv[n] = NULL;
    return run_start(argv, env);
}

static run_result train(const setup *s, const char *run_dir, bool resume, const char *env)
{
    run_handle h = start_train(s, run_dir, resume, env);
    return run_wait(&h, 0);
}

/* Died by `sig` with `line` (the whole crash line) and a backtrace on
 * stderr, and left no control socket in dir. */
static void expect_crash_report(const run_result *r, int sig, const char *line, const char *dir)
{
    cr_assert_eq(r->signal, sig, "exit %d, not signal %d\nstderr:\n%s", r->status, sig,
                 r->err);
    cr_assert(strstr(r->err, line), "no line\n%s\nstderr:\n%s", line, r->err);
    cr_assert(strstr(r->err, "\nbacktrace:\n"), "no backtrace:\n%s", r->err);
    char sock[PATH];
    snprintf(sock, PATH, "%s/control.sock", dir);
    cr_assert(access(sock, F_OK) != 0, "%s was left behind", sock);
}

/* scorch-train's crash line, for a crash after the first checkpoint:
 * "crashed (SIG) in <what>; last good checkpoint: ..." */
static void train_crash_line(char *line, const char *sig, const char *what, const char *dir)
{
    snprintf(line, LINE,
             "scorch-train: crashed (%s) in %s; last good checkpoint: %s/checkpoints/last.ckpt "
             "(resume with --resume)\n",
             sig, what, dir);
}

static void expect_resume_finishes(const setup *s, const char *dir)
{
    run_result r = train(s, dir, true, NULL);
    cr_assert_eq(r.status, 0, "exit %d\nstdout:\n%s\nstderr:\n%s", r.status, r.out, r.err);
    cr_assert(strstr(r.out, "resumed from"), "%s", r.out);
    cr_assert(!isnan(metric_of(dir, 2, "test", "accuracy")), "no test record after resuming");
    run_result_free(&r);
}

Test(crash, network_forward_segfault_names_the_plugin_and_resumes)
{
    char dir[DIR], model[PATH], what[WHAT], line[LINE];
    temp_dir(dir, sizeof dir);
    run_result r = train(&crashing_model, dir, false, "SCORCH_CRASH_STEP=11");
    build_path(model, PATH, crashing_model.model);
    snprintf(what, WHAT, "network_forward of %s", model);
    train_crash_line(line, "SIGSEGV", what, dir);
    expect_crash_report(&r, SIGSEGV, line, dir);
    run_result_free(&r);
    expect_resume_finishes(&crashing_model, dir);
}

/* The second read of train sample 5 is in epoch 2, after epoch 1's
 * checkpoint; a loader worker makes it. */
Test(crash, getitem_abort_on_a_loader_thread_names_the_sample_and_resumes)
{
    char dir[DIR], dataset[PATH], what[WHAT], line[LINE];
    temp_dir(dir, sizeof dir);
    run_result r = train(&crashing_dataset, dir, false, "SCORCH_CRASH_GETITEM=train:5:2");
    build_path(dataset, PATH, crashing_dataset.dataset);
    snprintf(what, WHAT, "dataset_getitem of %s, sample 5 (train split)", dataset);
    train_crash_line(line, "SIGABRT", what, dir);
    expect_crash_report(&r, SIGABRT, line, dir);
    run_result_free(&r);
    expect_resume_finishes(&crashing_dataset, dir);
}

/* Only a handler on the loader thread's own alternate stack can report a
 * stack overflow there. */
Test(crash, getitem_stack_overflow_on_a_loader_thread_is_reported)
{
    char dir[DIR], dataset[PATH], what[WHAT], line[LINE];
    temp_dir(dir, sizeof dir);
    run_result r = train(&overflowing_dataset, dir, false, "SCORCH_CRASH_GETITEM=train:9:2");
    build_path(dataset, PATH, overflowing_dataset.dataset);
    snprintf(what, WHAT, "dataset_getitem of %s, sample 9 (train split)", dataset);
    train_crash_line(line, "SIGSEGV", what, dir);
    expect_crash_report(&r, SIGSEGV, line, dir);
    run_result_free(&r);
}

Test(crash, hook_crash_names_the_hook_and_resumes)
{
    char dir[DIR], hooks[PATH], what[WHAT], line[LINE];
    temp_dir(dir, sizeof dir);
    run_result r = train(&crashing_hooks, dir, false, "SCORCH_CRASH_HOOK_STEP=11");
    build_path(hooks, PATH, crashing_hooks.hooks);
    snprintf(what, WHAT, "hook 'crash' at batch_end of %s", hooks);
    train_crash_line(line, "SIGFPE", what, dir);
    expect_crash_report(&r, SIGFPE, line, dir);
    run_result_free(&r);
    expect_resume_finishes(&crashing_hooks, dir);
}

/* A crash before the first checkpoint says there is none to resume from. */
Test(crash, crash_before_a_checkpoint_says_so)
{
    char dir[DIR];
    temp_dir(dir, sizeof dir);
    run_result r = train(&crashing_model, dir, false, "SCORCH_CRASH_STEP=3");
    cr_assert_eq(r.signal, SIGSEGV, "exit %d\n%s", r.status, r.err);
    cr_assert(strstr(r.err, "; no checkpoint was written yet\n"), "%s", r.err);
    run_result_free(&r);
}

/* Trains crashing_dataset in dir, without a crash. */
static void train_without_crash(const char *dir)
{
    run_result r = train(&crashing_dataset, dir, false, NULL);
    cr_assert_eq(r.status, 0, "exit %d\n%s", r.status, r.err);
    run_result_free(&r);
}

/* scorch-test on dir's last checkpoint, with the option given (or none). */
static run_result test_last(const char *dir, const char *option, const char *value,
                            const char *env)
{
    char bin[PATH], ckpt[PATH];
    build_path(bin, PATH, "host/scorch-test");
    snprintf(ckpt, PATH, "%s/checkpoints/last.ckpt", dir);
    return run_program((const char *[]){bin, "--checkpoint", ckpt, option, value, NULL}, env);
}

Test(crash, scorch_test_names_the_crashing_plugin)
{
    char dir[DIR], dataset[PATH], line[LINE];
    temp_dir(dir, sizeof dir);
    train_without_crash(dir);
    run_result r = test_last(dir, NULL, NULL, "SCORCH_CRASH_GETITEM=test:3:1");
    build_path(dataset, PATH, crashing_dataset.dataset);
    snprintf(line, LINE,
             "scorch-test: crashed (SIGABRT) in dataset_getitem of %s, sample 3 (test split)\n",
             dataset);
    expect_crash_report(&r, SIGABRT, line, dir);
    run_result_free(&r);
}

/* The per-class report asks the dataset to name its classes. */
Test(crash, class_name_crash_in_scorch_test_names_the_plugin)
{
    char dir[DIR], csv[PATH], dataset[PATH], line[LINE];
    temp_dir(dir, sizeof dir);
    train_without_crash(dir);
    snprintf(csv, PATH, "%s/per_class.csv", dir);
    run_result r = test_last(dir, "--per-class", csv, "SCORCH_CRASH_CLASS_NAME=1");
    build_path(dataset, PATH, crashing_dataset.dataset);
    snprintf(line, LINE, "scorch-test: crashed (SIGABRT) in class_name of %s\n", dataset);
    expect_crash_report(&r, SIGABRT, line, dir);
    run_result_free(&r);
}

/* The plugin's constructors run when it is loaded, before any checkpoint. */
Test(crash, constructor_crash_names_the_plugin)
{
    char dir[DIR], model[PATH], line[LINE];
    temp_dir(dir, sizeof dir);
    run_result r = train(&crashing_model, dir, false, "SCORCH_CRASH_CONSTRUCTOR=1");
    build_path(model, PATH, crashing_model.model);
    snprintf(line, LINE,
             "scorch-train: crashed (SIGABRT) in dlopen (the plugin's constructors) of %s\n",
             model);
    expect_crash_report(&r, SIGABRT, line, dir);
    run_result_free(&r);
}

Test(crash, destructor_crash_names_the_plugin)
{
    char dir[DIR], model[PATH], line[LINE];
    temp_dir(dir, sizeof dir);
    run_result r = train(&crashing_model, dir, false, "SCORCH_CRASH_DESTRUCTOR=1");
    build_path(model, PATH, crashing_model.model);
    snprintf(line, LINE,
             "scorch-train: crashed (SIGABRT) in dlclose (the plugin's destructors) of %s", model);
    expect_crash_report(&r, SIGABRT, line, dir);
    run_result_free(&r);
}

/* Each replica's network overflows the stack of its thread at its third
 * step, before the first checkpoint. */
Test(crash, stack_overflow_on_a_replica_thread_is_reported)
{
    char dir[DIR], model[PATH], line[LINE];
    temp_dir(dir, sizeof dir);
    run_result r = train(&overflowing_replicas, dir, false, "SCORCH_CRASH_STEP=3");
    build_path(model, PATH, overflowing_replicas.model);
    snprintf(line, LINE,
             "scorch-train: crashed (SIGSEGV) in network_forward of %s; no checkpoint was "
             "written yet\n",
             model);
    expect_crash_report(&r, SIGSEGV, line, dir);
    run_result_free(&r);
}

/* Whether path appears within timeout_s seconds. */
static bool appears(const char *path, double timeout_s)
{
    for (double waited = 0; waited < timeout_s; waited += 0.05) {
        if (access(path, F_OK) == 0)
            return true;
        nanosleep(&(struct timespec){.tv_nsec = 50000000}, NULL);
    }
    return false;
}

/* scorch-ctl's call runs the user function on the control thread. */
Test(crash, stack_overflow_in_a_user_function_on_the_control_thread_is_reported)
{
    char dir[DIR], sock[PATH], ctl[PATH], hooks[PATH], line[LINE];
    temp_dir(dir, sizeof dir);
    snprintf(sock, PATH, "%s/control.sock", dir);
    run_handle h = start_train(&long_hooks_run, dir, false, NULL);
    if (!appears(sock, 60)) {
        run_result r = run_wait(&h, 1);
        cr_assert_fail("no control socket came (exit %d)\n%s", r.status, r.err);
    }
    build_path(ctl, PATH, "host/scorch-ctl");
    run_result c = run_program((const char *[]){ctl, dir, "call", "overflow", NULL}, NULL);
    run_result_free(&c);
    run_result r = run_wait(&h, 60);
    build_path(hooks, PATH, long_hooks_run.hooks);
    snprintf(line, LINE, "scorch-train: crashed (SIGSEGV) in user function 'overflow' of %s",
             hooks);
    expect_crash_report(&r, SIGSEGV, line, dir);
    run_result_free(&r);
}
