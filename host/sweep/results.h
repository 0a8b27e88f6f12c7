/* results.h — what a sweep found: OUT/results.csv, one row per trial,
 * and the markdown summary, its trials ranked by the metric.
 *
 * results.csv: trial, status, one column per swept value (named as in
 * [space]), best_METRIC, best_epoch, last_METRIC, epoch, epochs, time_s,
 * starts, resumes, device, note (why it stopped or failed); in trial
 * order, values as the trials got them.
 */
#ifndef SCORCH_HOST_SWEEP_RESULTS_H
#define SCORCH_HOST_SWEEP_RESULTS_H

#include <stdio.h>

#include "sweep/state.h"

typedef struct host_sweep_report {
    const host_space *space;
    const host_trial *trials;
    int64_t count;
    const char *metric; /* its name */
    bool maximize;
} host_sweep_report;

/* Writes results.csv to path (atomically). */
sc_status host_sweep_results_write(const host_sweep_report *report, const char *path);

/* The trials in rank order: those with a value, best first (ties by
 * number), then the others by number. The caller frees the array. */
int64_t *host_sweep_ranking(const host_sweep_report *report);

/* The markdown summary: a table of the trials in rank order, then a line
 * for each trial that stopped early or failed, saying why. */
sc_status host_sweep_summary_write(const host_sweep_report *report, FILE *out);

#endif
