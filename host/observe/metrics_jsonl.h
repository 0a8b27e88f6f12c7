/* metrics_jsonl.h — the metrics.jsonl sink of a run's reports
 * (observer.h): one JSON object per phase and per hook scalar, appended
 * and flushed record by record, so that `tail -f` and scorch-plot work
 * during training. docs/inspecting.md describes the file.
 *
 * Record of a phase:
 *   {"epoch":1,"phase":"train","step":391,"loss":0.51,"accuracy":0.81,...,
 *    "samples":50000,"samples_per_s":21034.5,"time_s":2.38,"data_wait_s":0.02,
 *    "compute_s":2.36,"comm_s":0,"max_rss_mb":412.5,"arena_peak_mb":38.2,
 *    "lr":0.001}
 *   (on a GPU also "gpu_mem_mb" and "gpu_peak_mb", after "arena_peak_mb")
 * of a hook's scalar:
 *   {"epoch":1,"step":120,"tag":"grad_norm","value":1.25}
 *
 * Thread rule: the training thread only.
 */
#ifndef SCORCH_HOST_METRICS_JSONL_H
#define SCORCH_HOST_METRICS_JSONL_H

#include <stdio.h>

#include "observe/observer.h"

/* Opens path for appending. */
sc_status host_metrics_jsonl_open(const char *path, FILE **out);

/* The sink writing to f; closing it closes f. */
host_observer host_metrics_jsonl_observer(FILE *f);

#endif
