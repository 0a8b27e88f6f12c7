/* run_log.h — what a run tells people: each report (observer.h) goes to
 * every sink of the run's log, in the order they were added:
 *   - the console (console.h): progress line, phase lines, messages;
 *   - metrics.jsonl (metrics_jsonl.h), when this process keeps the run's
 *     records;
 *   - whatever the run adds: TensorBoard (tensorboard.h).
 * docs/inspecting.md describes what each shows.
 *
 * A report that a sink fails (a write error) stops there and returns that
 * sink's error; the run ends on it.
 *
 * Thread rule: the training thread only. The log holds a pointer to its
 * own console: it stays where it was opened.
 */
#ifndef SCORCH_HOST_RUN_LOG_H
#define SCORCH_HOST_RUN_LOG_H

#include <stdbool.h>
#include <stdint.h>

#include "base/clock.h" /* host_now, which callers time with */
#include "observe/console.h"
#include "observe/observer.h"

/* The most sinks a log has: console, metrics.jsonl and two more. */
enum { HOST_RUN_LOG_SINKS = 4 };

typedef struct host_run_log {
    host_console console; /* its settings: quiet, silent, progress (console.h) */
    bool records;         /* metrics.jsonl is a sink: this process keeps the run's records */
    host_observer sinks[HOST_RUN_LOG_SINKS];
    int n_sinks;
} host_run_log;

/* The console, and metrics.jsonl (appended to) unless jsonl_path is NULL. */
sc_status host_run_log_open(host_run_log *log, const char *jsonl_path, bool quiet, int epochs);

/* Adds a sink, closed with the log (at once when the log is full). */
sc_status host_run_log_add(host_run_log *log, host_observer sink);

/* Closes every sink; a second call does nothing. */
void host_run_log_close(host_run_log *log);

/* A pass goes on: the console redraws its progress line (terminals only,
 * at most ten times a second and at a pass's last batch). */
void host_run_log_progress(host_run_log *log, const host_progress *p);

/* A pass failed: the progress line ends where it stands, so that the
 * error message that follows starts on a line of its own. */
void host_run_log_end_line(host_run_log *log);

/* A pass ended: its summary line and records. `final` lines print even
 * when quiet. */
sc_status host_run_log_phase(host_run_log *log, const host_phase_result *r, bool final);

sc_status host_run_log_scalar(host_run_log *log, int epoch, int64_t step, const char *tag,
                            double value);

/* An informational line (not when quiet). */
void host_run_log_info(host_run_log *log, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A line of the run's final summary: printed even when quiet. */
void host_run_log_final(host_run_log *log, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
