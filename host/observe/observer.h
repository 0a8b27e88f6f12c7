/* observer.h — what a run reports, and the interface of the sinks that
 * take the reports.
 *
 * A run reports the end of each pass over a split (a phase), the scalars
 * hooks log, the progress of a pass, informational lines and the lines of
 * its final summary. A sink takes the reports it has a use for through a
 * host_observer: a table of functions (NULL for a report it ignores) and
 * its own state. The sinks: the console (console.h), metrics.jsonl
 * (metrics_jsonl.h) and TensorBoard (tensorboard.h); host_run_log
 * (run_log.h) hands every report to each of its sinks.
 *
 * Thread rule: the training thread only.
 */
#ifndef SCORCH_HOST_OBSERVER_H
#define SCORCH_HOST_OBSERVER_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "scorch/metrics.h"

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
                           gradient and metric allreduces) */
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

/* What a sink does with each report; `sink` is host_observer.sink. */
typedef struct host_observer_ops {
    /* A pass ended; `final` marks a line of the run's final summary. */
    sc_status (*phase)(void *sink, const host_phase_result *r, bool final);
    /* A hook's scalar. */
    sc_status (*scalar)(void *sink, int epoch, int64_t step, const char *tag, double value);
    /* A pass goes on (after every batch). */
    void (*progress)(void *sink, const host_progress *p);
    /* A pass failed: whatever shows its progress ends where it stands. */
    void (*end_line)(void *sink);
    /* A line of text: informational, or (`final`) of the final summary. */
    void (*message)(void *sink, bool final, const char *fmt, va_list ap)
        __attribute__((format(printf, 3, 0)));
    /* The run is over: flush and free. */
    void (*close)(void *sink);
} host_observer_ops;

typedef struct host_observer {
    const host_observer_ops *ops;
    void *sink;
} host_observer;

#endif
