/* crash.h — a plugin that crashes is named, and the run is left resumable.
 *
 * Every call from the host into plugin code runs inside a per-thread
 * marker saying which plugin file and function it is (HOST_PLUGIN_CALL, or
 * host_plugin_call_enter/leave where the caller updates the marker between
 * calls, as the loader does per sample). host_crash_install sets handlers
 * for SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT that, with
 * async-signal-safe calls only, write one line to stderr
 *
 *   scorch-train: crashed (SIGSEGV) in dataset_getitem of data.so, sample 1234
 *   (train split); last good checkpoint: runs/x/checkpoints/last.ckpt (resume
 *   with --resume)
 *
 * ("in scorch itself" when no plugin call was running), then a short
 * backtrace; remove the control socket; and re-raise the signal under its
 * default action, so the exit status and any core dump are the usual ones.
 *
 * The handlers run on an alternate signal stack, so a stack overflow is
 * reported too: the installing thread gets one, and threads that call
 * plugins get theirs with host_crash_thread_begin. On a thread without one
 * the handler runs on the thread's own stack, which works for every crash
 * but an overflow of that stack (the kernel then ends the process with no
 * line).
 */
#ifndef SCORCH_HOST_CRASH_H
#define SCORCH_HOST_CRASH_H

#include <stdbool.h>
#include <stdint.h>

#include "scorch/status.h"

/* A call into a plugin: what a crash report and a failure message name. */
typedef struct host_plugin_call {
    const char *plugin;   /* the plugin's file, as given */
    const char *function; /* the ABI function ("network_forward"), "hook" or "user function" */
    const char *name;     /* the hook's or user function's name; NULL for ABI functions */
    const char *point;    /* the hook's point ("batch_end"); NULL otherwise */
    const char *split;    /* dataset_getitem: the split's name, NULL otherwise ... */
    int64_t sample;       /* ... and the sample index */
} host_plugin_call;

/* The calling thread's innermost plugin call; NULL outside plugin code. */
extern _Thread_local const host_plugin_call *host_plugin_call_current;

/* Marks `call` as running on this thread until the matching leave, which
 * takes what enter returned (the outer call, restored for nested calls).
 * `call` must live until then; its fields may change in between. */
static inline const host_plugin_call *host_plugin_call_enter(const host_plugin_call *call)
{
    const host_plugin_call *outer = host_plugin_call_current;
    host_plugin_call_current = call;
    return outer;
}

static inline void host_plugin_call_leave(const host_plugin_call *outer)
{
    host_plugin_call_current = outer;
}

/* Runs the statement(s) after `fn` (an ABI function's name) as a
 * call into the plugin `file`: HOST_PLUGIN_CALL(lib->path, "index_open",
 * st = api->index_open(path, args, &index)). The statement must not
 * leave the block (no return, goto or SC_TRY). */
#define HOST_PLUGIN_CALL(file, fn, ...)                                                 \
    do {                                                                                \
        const host_plugin_call host_call_ = {.plugin = (file), .function = (fn)};       \
        const host_plugin_call *host_outer_call_ = host_plugin_call_enter(&host_call_); \
        __VA_ARGS__;                                                                    \
        host_plugin_call_leave(host_outer_call_);                                       \
    } while (0)

/* A failed plugin call's status, its message prefixed with the plugin file
 * and function: "<file>: <function>: <plugin's message>" (SC_ERR_PLUGIN
 * for a plugin that failed with SC_OK's code). */
sc_status host_plugin_failed(sc_status st, const char *file, const char *function);

/* Installs the fatal-signal handlers for the process, naming `program`
 * ("scorch-train", with a rank prefix under a launcher) in the line. Best
 * effort and idempotent; call it from the main thread. For scorch-train,
 * scorch-test and every program that runs plugins. */
void host_crash_install(const char *program);

/* The checkpoint the line offers to resume from: run_dir_last when it is
 * the run directory's last.ckpt (plain --resume continues from it), else
 * the line says --resume PATH. NULL: this process writes checkpoints and
 * has none yet, which the line says. Until the first call the line names
 * no checkpoint (scorch-test; under a launcher, the ranks but rank 0).
 * Any thread. */
void host_crash_set_checkpoint(const char *path, bool run_dir_last);

/* The control socket the handler removes; NULL once it is gone. */
void host_crash_set_control_socket(const char *path);

/* Gives the calling thread its own alternate signal stack, for the threads
 * that call plugins; _end, before the thread exits, frees it. */
void host_crash_thread_begin(void);
void host_crash_thread_end(void);

#endif
