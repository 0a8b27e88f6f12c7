/* run_log.h — what a run tells people: the console (a progress line on a
 * terminal, one summary line per epoch and phase) and metrics.jsonl (one
 * JSON object per epoch and phase, plus scalars logged by hooks), flushed
 * after every record so `tail -f` and plotting work during training.
 *
 * metrics.jsonl record of a phase:
 *   {"epoch":1,"phase":"train","step":391,"loss":0.51,"accuracy":0.81,...,
 *    "samples":50000,"samples_per_s":21034.5,"time_s":2.38,"data_wait_s":0.02,
 *    "lr":0.001}
 * of a hook's scalar:
 *   {"epoch":1,"step":120,"tag":"grad_norm","value":1.25}
 */
#ifndef SCORCH_HOST_RUN_LOG_H
#define SCORCH_HOST_RUN_LOG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "scorch/metrics.h"

typedef struct sc_run_log {
    FILE *jsonl;      /* NULL: console only */
    bool progress;    /* stdout is a terminal and not quiet */
    bool quiet;
    double last_draw; /* when the progress line was last drawn */
} sc_run_log;

/* The outcome of one pass over a split. */
typedef struct sc_phase_result {
    const char *phase; /* "train", "valid", "test", "train_eval" */
    int epoch, epochs;
    int64_t step;
    double loss;
    const sc_metrics *metrics;
    int64_t samples;
    double seconds;
    double data_wait_s;
    double lr;
} sc_phase_result;

/* Opens (appends to) jsonl_path unless it is NULL. */
sc_status sc_run_log_open(sc_run_log *log, const char *jsonl_path, bool quiet);
void sc_run_log_close(sc_run_log *log);

/* Redraws the progress line (at most ten times a second, terminals only). */
void sc_run_log_progress(sc_run_log *log, const char *phase, int epoch, int epochs,
                         int64_t batch, int64_t batches, double loss,
                         double samples_per_s, double eta_s);

/* The phase's summary line and its metrics.jsonl record. `final` lines
 * print even when quiet. */
sc_status sc_run_log_phase(sc_run_log *log, const sc_phase_result *r, bool final);

sc_status sc_run_log_scalar(sc_run_log *log, int epoch, int64_t step, const char *tag,
                            double value);

/* An informational line (not when quiet). */
void sc_run_log_info(sc_run_log *log, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Seconds on a monotonic clock. */
double sc_now(void);

#endif
