/* test_crash.c — the fatal-signal report (host/base/crash.h), from a child
 * process that crashes on purpose, and a failed plugin call's message. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/crash.h"

enum { OUTPUT_MAX = 1 << 16 };

/* Runs crash() in a child whose stderr goes to a pipe; returns what the
 * child wrote (a static buffer) and its wait status in *status. */
static const char *crash_child(void (*crash)(void), int *status)
{
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        dup2(fds[1], STDERR_FILENO);
        close(fds[0]);
        close(fds[1]);
        crash();
        _exit(0);
    }
    close(fds[1]);
    static char text[OUTPUT_MAX];
    size_t len = 0;
    ssize_t n;
    while ((n = read(fds[0], text + len, sizeof text - 1 - len)) > 0)
        len += (size_t)n;
    text[len] = '\0';
    close(fds[0]);
    cr_assert_eq(waitpid(pid, status, 0), pid);
    return text;
}

static void expect_signal(int status, int sig, const char *out)
{
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == sig,
              "status 0x%x, not killed by signal %d; stderr:\n%s", status, sig, out);
}

static char control_socket[] = "/tmp/scorch-crash-sock-XXXXXX";

/* A fault in host code, with a checkpoint and a control socket to remove. */
static void crash_in_host(void)
{
    host_crash_install("scorch-unit");
    host_crash_set_checkpoint("runs/a/checkpoints/epoch-0001.ckpt", true);
    host_crash_set_checkpoint("runs/a/checkpoints/last.ckpt", true);
    host_crash_set_control_socket(control_socket);
    volatile int *volatile first_page = (volatile int *)(uintptr_t)64; /* never mapped */
    *first_page = 1;
}

Test(crash, a_fault_outside_plugins_names_scorch_and_the_checkpoint)
{
    close(mkstemp(control_socket));
    int status;
    const char *out = crash_child(crash_in_host, &status);
    expect_signal(status, SIGSEGV, out);
    cr_assert(strstr(out, "scorch-unit: crashed (SIGSEGV) in scorch itself (no plugin call was "
                          "running); last good checkpoint: runs/a/checkpoints/last.ckpt "
                          "(resume with --resume)\nbacktrace:\n") == out,
              "%s", out);
    cr_assert(access(control_socket, F_OK) != 0, "the control socket is still there");
}

/* abort() in a nested call: the inner marker is gone, the outer named. */
static void crash_in_getitem(void)
{
    host_crash_install("scorch-unit"); /* no checkpoint: as scorch-test */
    host_plugin_call getitem = {.plugin = "data.so", .function = "dataset_getitem",
                              .split = "valid", .sample = 1234};
    host_plugin_call_enter(&getitem);
    HOST_PLUGIN_CALL("other.so", "dataset_len", (void)0);
    cr_assert_eq(host_plugin_call_current, &getitem);
    abort();
}

Test(crash, an_abort_in_getitem_names_the_file_and_sample)
{
    int status;
    const char *out = crash_child(crash_in_getitem, &status);
    expect_signal(status, SIGABRT, out);
    cr_assert(strstr(out, "scorch-unit: crashed (SIGABRT) in dataset_getitem of data.so, "
                          "sample 1234 (valid split)\nbacktrace:\n") == out,
              "%s", out);
}

/* A hook, and a checkpoint that is not the run directory's last.ckpt. */
static void crash_in_hook(void)
{
    host_crash_install("scorch-unit");
    host_crash_set_checkpoint("/elsewhere/x.ckpt", false);
    host_plugin_call hook = {.plugin = "hooks.so", .function = "hook", .name = "early_stop",
                           .point = "epoch_end"};
    host_plugin_call_enter(&hook);
    raise(SIGFPE);
}

Test(crash, a_hook_crash_names_the_hook_and_how_to_resume)
{
    int status;
    const char *out = crash_child(crash_in_hook, &status);
    expect_signal(status, SIGFPE, out);
    cr_assert(strstr(out, "scorch-unit: crashed (SIGFPE) in hook 'early_stop' at epoch_end of "
                          "hooks.so; last good checkpoint: /elsewhere/x.ckpt (resume with "
                          "--resume /elsewhere/x.ckpt)\n") == out,
              "%s", out);
}

static void crash_before_a_checkpoint(void)
{
    host_crash_install("scorch-unit");
    host_crash_set_checkpoint(NULL, false);
    HOST_PLUGIN_CALL("model.so", "network_create", raise(SIGBUS));
}

Test(crash, a_crash_before_any_checkpoint_says_so)
{
    int status;
    const char *out = crash_child(crash_before_a_checkpoint, &status);
    expect_signal(status, SIGBUS, out);
    cr_assert(strstr(out, "scorch-unit: crashed (SIGBUS) in network_create of model.so; "
                          "no checkpoint was written yet\n") == out,
              "%s", out);
}

Test(crash, plugin_failed_prefixes_the_file_and_function)
{
    sc_error_set(SC_ERR_IO, "cannot read record 7");
    cr_assert_eq(host_plugin_failed(SC_ERR_IO, "data.so", "index_open"), SC_ERR_IO);
    cr_assert_str_eq(sc_error_message(), "data.so: index_open: cannot read record 7");
    sc_error_clear();
    cr_assert_eq(host_plugin_failed(SC_OK, "model.so", "network_forward"), SC_ERR_PLUGIN,
                 "a failure reported as SC_OK is still a failure");
    cr_assert_str_eq(sc_error_message(), "model.so: network_forward: plugin error");
}
