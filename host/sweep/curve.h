/* curve.h — a trial's metric per epoch, read from its metrics.jsonl.
 *
 * The value of epoch e is the metric of the epoch's validation record:
 * phase valid_ema when the run has those (--ema-decay: what scorch-train
 * picks its best checkpoint by), else valid, else (a dataset without a
 * valid split) train. A metric that is null (not finite) is NaN.
 */
#ifndef SCORCH_HOST_SWEEP_CURVE_H
#define SCORCH_HOST_SWEEP_CURVE_H

#include <stdbool.h>
#include <stddef.h>

#include "scorch/status.h"

typedef struct host_curve {
    double *values; /* [e - 1]: epoch e's value; NaN when the epoch has none */
    int epochs;     /* the last epoch with a record */
} host_curve;

/* The metric a sweep ranks by when none is named: accuracy when the
 * records hold it, else loss. */
#define HOST_SWEEP_DEFAULT_METRICS "accuracy, else loss"

/* Reads `metric` (when "", the default above, whose name is written back
 * into metric, `size` bytes) of the run whose metrics.jsonl is at path;
 * a file that does not exist yet is an empty curve. */
sc_status host_curve_read(const char *path, char *metric, size_t size, host_curve *curve);
void host_curve_free(host_curve *curve);

/* The best finite value of epochs 1..epoch (higher when maximize), and
 * its epoch in *at (may be NULL); NaN, *at 0, when there is none. */
double host_curve_best(const host_curve *curve, int epoch, bool maximize, int *at);

/* Whether value a is better than b (NaN is never better, and every
 * number is better than NaN). */
bool host_metric_better(double a, double b, bool maximize);

#endif
