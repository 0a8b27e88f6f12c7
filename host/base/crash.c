#define _DEFAULT_SOURCE /* sigaltstack, SA_ONSTACK */
#include "base/crash.h"

#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/config.h"
#include "scorch_host/plugin.h"

_Thread_local const host_plugin_call *host_plugin_call_current;

sc_status host_plugin_failed(sc_status st, const char *file, const char *function)
{
    return sc_error_wrap(st == SC_OK ? SC_ERR_PLUGIN : st, "%s: %s", file, function);
}

/* ---- what the handler reads ---- */

/* A path the handler may read while another thread replaces it: written
 * into the buffer the handler is not pointed at, then published by one
 * atomic store (a lock-free atomic is async-signal-safe; a mutex is not). */
typedef struct crash_path {
    pthread_mutex_t writers;
    char text[2][HOST_PATH_MAX];
    bool run_dir_last[2];
    atomic_int current; /* index into text; -1: none */
} crash_path;

static crash_path checkpoint = {PTHREAD_MUTEX_INITIALIZER, .current = -1};
static crash_path control_socket = {PTHREAD_MUTEX_INITIALIZER, .current = -1};

static void crash_path_set(crash_path *p, const char *path, bool run_dir_last)
{
    pthread_mutex_lock(&p->writers);
    if (!path) {
        atomic_store(&p->current, -1);
    } else {
        int next = atomic_load(&p->current) == 0 ? 1 : 0;
        snprintf(p->text[next], sizeof p->text[next], "%s", path);
        p->run_dir_last[next] = run_dir_last;
        atomic_store(&p->current, next);
    }
    pthread_mutex_unlock(&p->writers);
}

static atomic_bool writes_checkpoints;

void host_crash_set_checkpoint(const char *path, bool run_dir_last)
{
    crash_path_set(&checkpoint, path, run_dir_last);
    atomic_store(&writes_checkpoints, true);
}

void host_crash_set_control_socket(const char *path) { crash_path_set(&control_socket, path, false); }

static char crash_program[64] = "scorch";
static bool crash_newline; /* stdout and stderr share a terminal: end the progress line first */
static atomic_flag crash_reporting = ATOMIC_FLAG_INIT;

static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
static const char *const fatal_names[] = {"SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL", "SIGABRT"};
enum { N_FATAL = sizeof fatal_signals / sizeof fatal_signals[0], CRASH_FRAMES = 24 };

/* ---- the report, with async-signal-safe calls only ---- */

/* The line being built: no stdio, no malloc. */
typedef struct crash_line {
    char text[2 * HOST_PATH_MAX + 512];
    size_t len;
} crash_line;

/* Appends c, truncating; the last byte stays free for the newline. */
static void put_char(crash_line *l, char c)
{
    if (l->len < sizeof l->text - 1)
        l->text[l->len++] = c;
}

static void put(crash_line *l, const char *s)
{
    while (*s)
        put_char(l, *s++);
}

static void put_int(crash_line *l, int64_t v)
{
    char digits[24];
    int n = 0;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do
        digits[n++] = (char)('0' + u % 10);
    while ((u /= 10) > 0);
    if (v < 0)
        put(l, "-");
    while (n > 0)
        put_char(l, digits[--n]);
}

static void put_signal(crash_line *l, int sig)
{
    for (int k = 0; k < N_FATAL; k++)
        if (fatal_signals[k] == sig) {
            put(l, fatal_names[k]);
            return;
        }
    put(l, "signal ");
    put_int(l, sig);
}

static void put_call(crash_line *l, const host_plugin_call *call)
{
    if (!call) {
        put(l, "in scorch itself (no plugin call was running)");
        return;
    }
    put(l, "in ");
    put(l, call->function);
    if (call->name) {
        put(l, " '");
        put(l, call->name);
        put(l, "'");
    }
    if (call->point) {
        put(l, " at ");
        put(l, call->point);
    }
    put(l, " of ");
    put(l, call->plugin);
    if (call->split) {
        put(l, ", sample ");
        put_int(l, call->sample);
        put(l, " (");
        put(l, call->split);
        put(l, " split)");
    }
}

static void put_checkpoint(crash_line *l)
{
    if (!atomic_load(&writes_checkpoints))
        return;
    int k = atomic_load(&checkpoint.current);
    if (k < 0) {
        put(l, "; no checkpoint was written yet");
        return;
    }
    put(l, "; last good checkpoint: ");
    put(l, checkpoint.text[k]);
    put(l, " (resume with --resume");
    if (!checkpoint.run_dir_last[k]) {
        put(l, " ");
        put(l, checkpoint.text[k]);
    }
    put(l, ")");
}

static void write_all(const char *text, size_t len)
{
    while (len > 0) {
        ssize_t n = write(STDERR_FILENO, text, len);
        if (n <= 0)
            return; /* nobody to tell (EINTR cannot happen: the fatal signals are blocked) */
        text += n;
        len -= (size_t)n;
    }
}

static void report(int sig)
{
    crash_line l = {.len = 0};
    if (crash_newline)
        put(&l, "\n");
    put(&l, crash_program);
    put(&l, ": crashed (");
    put_signal(&l, sig);
    put(&l, ") ");
    put_call(&l, host_plugin_call_current);
    put_checkpoint(&l);
    l.text[l.len++] = '\n';
    write_all(l.text, l.len);
    static const char header[] = "backtrace:\n";
    write_all(header, sizeof header - 1);
    void *frames[CRASH_FRAMES];
    backtrace_symbols_fd(frames, backtrace(frames, CRASH_FRAMES), STDERR_FILENO);
}

/* The first thread to crash reports, removes the control socket and ends
 * the process with the signal's default action (and core dump); a thread
 * crashing meanwhile waits for that. The other fatal signals are blocked
 * here (sa_mask), so a fault in the handler itself ends the process at once. */
static void on_fatal_signal(int sig)
{
    if (atomic_flag_test_and_set(&crash_reporting))
        for (;;)
            pause();
    report(sig);
    int k = atomic_load(&control_socket.current);
    if (k >= 0)
        unlink(control_socket.text[k]);
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    /* Pending until the handler returns; a fault would also recur then. */
    raise(sig);
}

/* ---- installing ---- */

static _Thread_local void *thread_stack;

void host_crash_thread_begin(void)
{
    enum { STACK_MIN = 64 * 1024 }; /* the report's line and backtrace() */
    if (thread_stack)
        return;
    size_t size = (size_t)SIGSTKSZ > STACK_MIN ? (size_t)SIGSTKSZ : STACK_MIN;
    stack_t ss = {.ss_sp = malloc(size), .ss_size = size};
    if (ss.ss_sp && sigaltstack(&ss, NULL) == 0)
        thread_stack = ss.ss_sp;
    else
        free(ss.ss_sp);
}

void host_crash_thread_end(void)
{
    if (!thread_stack)
        return;
    stack_t ss = {.ss_flags = SS_DISABLE};
    sigaltstack(&ss, NULL);
    free(thread_stack);
    thread_stack = NULL;
}

/* libscorch refuses its host-only calls while this says plugin code runs. */
static bool in_plugin_code(void)
{
    return host_plugin_call_current != NULL;
}

void host_crash_install(const char *program)
{
    sc_host_set_plugin_probe(in_plugin_code);
    snprintf(crash_program, sizeof crash_program, "%s", program);
    crash_newline = isatty(STDOUT_FILENO) && isatty(STDERR_FILENO);
    void *frame;
    backtrace(&frame, 1); /* loads libgcc's unwinder now: a crash must not dlopen it */
    host_crash_thread_begin();
    struct sigaction sa = {.sa_handler = on_fatal_signal, .sa_flags = SA_ONSTACK};
    sigemptyset(&sa.sa_mask);
    for (int k = 0; k < N_FATAL; k++)
        sigaddset(&sa.sa_mask, fatal_signals[k]);
    for (int k = 0; k < N_FATAL; k++)
        sigaction(fatal_signals[k], &sa, NULL);
}
