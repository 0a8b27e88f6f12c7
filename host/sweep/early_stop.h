/* early_stop.h — the rules that stop a sweep's bad trials early
 * (scorch-sweep --early-stop; docs/sweeps.md weighs them).
 *
 * median  After epoch e (e >= grace epochs), a trial whose best value of
 *         epochs 1..e is worse than the median of the same figure over
 *         the completed trials that reached e stops, once at least
 *         `min_finished` of them did (Vizier's median stopping rule, Ray
 *         Tune's MedianStoppingRule).
 * asha    Asynchronous successive halving (Li et al. 2018, Ray Tune's
 *         ASHAScheduler): rungs at epochs grace * eta^k below a trial's
 *         last epoch. A trial reaching a rung goes on when its best value
 *         so far is among the top 1/eta of those that the other trials
 *         had there, and stops otherwise; the first to reach a rung always
 *         goes on.
 *
 * The rules are pure functions of the curves (curve.h) they are given;
 * the sweep judges each epoch of each trial once, when it first sees it.
 */
#ifndef SCORCH_HOST_SWEEP_EARLY_STOP_H
#define SCORCH_HOST_SWEEP_EARLY_STOP_H

#include <stdbool.h>
#include <stddef.h>

#include "sweep/curve.h"

typedef enum host_stop_rule { HOST_STOP_NONE, HOST_STOP_MEDIAN, HOST_STOP_ASHA } host_stop_rule;

typedef struct host_stop_policy {
    host_stop_rule rule;
    int grace_epochs; /* no trial stops before this epoch; ASHA's first rung */
    int min_finished; /* median: completed trials needed at an epoch */
    int eta;          /* ASHA: the top 1/eta of a rung go on (>= 2) */
    bool maximize;    /* whether a higher metric is better */
} host_stop_policy;

/* Another trial, as a rule sees it. */
typedef struct host_stop_peer {
    const host_curve *curve;
    bool completed; /* trained every epoch */
} host_stop_peer;

/* "none", "median", "asha" (NULL for another value) and back. */
const char *host_stop_rule_name(host_stop_rule rule);
bool host_stop_rule_parse(const char *text, host_stop_rule *rule);

/* Whether `trial`, which trains `epochs` epochs, stops after epoch
 * `epoch`, given the other trials; when it does, `reason` says why
 * ("median rule at epoch 2: best accuracy 0.41, median of 3 completed
 * trials 0.93"). */
bool host_stop_judge(const host_stop_policy *policy, const char *metric, const host_curve *trial,
                     int epoch, int epochs, const host_stop_peer *peers, int n, char *reason,
                     size_t size);

/* The q-quantile (0..1) of v[0..n), n > 0, interpolated linearly between
 * order statistics as numpy's percentile; sorts v. */
double host_quantile(double *v, int n, double q);

#endif
