/* run_log.h — what a run tells people: the console (a progress line per
 * phase on a terminal, one summary line per epoch and phase, the run's
 * final summary) and metrics.jsonl (one JSON object per epoch and phase,
 * plus scalars logged by hooks), flushed after every record so `tail -f`
 * and scorch-plot work during training. docs/inspecting.md describes both.
 *
 * metrics.jsonl record of a phase:
 *   {"epoch":1,"phase":"train","step":391,"loss":0.51,"accuracy":0.81,...,
 *    "samples":50000,"samples_per_s":21034.5,"time_s":2.38,"data_wait_s":0.02,
 *    "compute_s":2.36,"comm_s":0,"max_rss_mb":412.5,"arena_peak_mb":38.2,
 *    "lr":0.001}
 *   (on a GPU also "gpu_mem_mb" and "gpu_peak_mb", after "arena_peak_mb")
 * of a hook's scalar:
 *   {"epoch":1,"step":120,"tag":"grad_norm","value":1.25}
 */
#ifndef SCORCH_HOST_RUN_LOG_H
#define SCORCH_HOST_RUN_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "scorch/metrics.h"

typedef struct host_tb_writer host_tb_writer; /* tensorboard.h */

typedef struct host_run_log {
    FILE *jsonl;      /* NULL: console only */
    host_tb_writer *tb; /* TensorBoard events of phases and scalars, or NULL;
                         opened by the trainer, closed with the log */
    bool progress;    /* stdout is a terminal and not quiet */
    bool quiet;
    bool silent;      /* not even final lines: a rank other than 0, whose
                         stdout is not /dev/null (a replica's thread) */
    int epochs;       /* of the run, for "epoch E/N"; 0: none (scorch-test) */
    double last_draw; /* when the progress line was last drawn */
} host_run_log;

/* The outcome of one pass over a split. */
typedef struct host_phase_result {
    const char *phase; /* "train", "valid", "test", "train_eval" */
    int epoch, epochs;
    int64_t step;
    double loss;
    const sc_metrics *metrics;
    int64_t samples;
    double seconds;
    double data_wait_s; /* of `seconds`, waiting for the data loader */
    double comm_s;      /* of `seconds`, in collective communication (the
                           gradient and metric allreduces): the trainer sets
                           it once data parallelism lands; 0 until then */
    size_t arena_peak;  /* bytes: the step arena's high-water mark */
    double lr;
    bool on_gpu;        /* the run computes on a GPU: the two below are logged */
    size_t gpu_allocated, gpu_peak; /* bytes libscorch holds there, now and at most */
} host_phase_result;

/* A pass in progress, as its progress line shows it. */
typedef struct host_progress {
    const char *phase;
    int epoch;
    int64_t batch, batches; /* done, expected */
    int64_t samples;        /* done */
    double loss;            /* running mean over the samples done */
    double seconds;         /* wall time of the pass so far */
    double data_wait_s;     /* of which waiting for the data loader */
} host_progress;

/* Opens (appends to) jsonl_path unless it is NULL. */
sc_status host_run_log_open(host_run_log *log, const char *jsonl_path, bool quiet, int epochs);
void host_run_log_close(host_run_log *log);

/* Redraws the progress line (terminals only, at most ten times a second
 * and at a pass's last batch): batches, running loss, samples/s, the data
 * loader's share of the wall time and the time left. */
void host_run_log_progress(host_run_log *log, const host_progress *p);

/* Ends a progress line where it stands (a pass failed), so that the
 * error message that follows starts on a line of its own. */
void host_run_log_end_line(host_run_log *log);

/* The phase's summary line and its metrics.jsonl record. `final` lines
 * print even when quiet. */
sc_status host_run_log_phase(host_run_log *log, const host_phase_result *r, bool final);

sc_status host_run_log_scalar(host_run_log *log, int epoch, int64_t step, const char *tag,
                            double value);

/* An informational line (not when quiet). */
void host_run_log_info(host_run_log *log, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A line of the run's final summary: printed even when quiet. */
void host_run_log_final(host_run_log *log, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Seconds on a monotonic clock. */
double host_now(void);

#endif
