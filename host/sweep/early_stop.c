#include "sweep/early_stop.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const rule_names[] = {"none", "median", "asha"};

const char *host_stop_rule_name(host_stop_rule rule) { return rule_names[rule]; }

bool host_stop_rule_parse(const char *text, host_stop_rule *rule)
{
    for (int i = 0; i < 3; i++)
        if (strcmp(text, rule_names[i]) == 0) {
            *rule = (host_stop_rule)i;
            return true;
        }
    return false;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double host_quantile(double *v, int n, double q)
{
    qsort(v, (size_t)n, sizeof *v, compare_doubles);
    double pos = q * (n - 1);
    int lo = (int)floor(pos);
    if (lo >= n - 1)
        return v[n - 1];
    return v[lo] + (pos - lo) * (v[lo + 1] - v[lo]);
}

/* The best values up to `epoch` of the peers that reached it (completed
 * ones only, when asked) into v; returns how many. */
static int peer_bests(const host_stop_peer *peers, int n, int epoch, bool completed_only,
                      bool maximize, double *v)
{
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (peers[i].curve->epochs < epoch || (completed_only && !peers[i].completed))
            continue;
        double best = host_curve_best(peers[i].curve, epoch, maximize, NULL);
        if (!isnan(best))
            v[k++] = best;
    }
    return k;
}

static bool judge_median(const host_stop_policy *p, const char *metric, double best, int epoch,
                         double *v, int k, char *reason, size_t size)
{
    if (k < p->min_finished || k == 0)
        return false;
    double median = host_quantile(v, k, 0.5);
    if (!host_metric_better(median, best, p->maximize))
        return false;
    snprintf(reason, size, "median rule at epoch %d: best %s %.6g, median of %d completed "
             "trials %.6g", epoch, metric, best, k, median);
    return true;
}

/* Whether epoch is a rung, grace * eta^k, below the trial's last epoch. */
static bool is_rung(const host_stop_policy *p, int epoch, int epochs)
{
    for (long rung = p->grace_epochs; rung < epochs; rung *= p->eta)
        if (rung == epoch)
            return true;
    return false;
}

static bool judge_asha(const host_stop_policy *p, const char *metric, double best, int epoch,
                       double *v, int k, char *reason, size_t size)
{
    if (k == 0)
        return false;
    double q = p->maximize ? 1 - 1.0 / p->eta : 1.0 / p->eta;
    double cutoff = host_quantile(v, k, q);
    if (!host_metric_better(cutoff, best, p->maximize))
        return false;
    snprintf(reason, size, "ASHA rung at epoch %d: best %s %.6g, outside the top 1/%d of the "
             "%d other trials there (cutoff %.6g)", epoch, metric, best, p->eta, k, cutoff);
    return true;
}

bool host_stop_judge(const host_stop_policy *policy, const char *metric, const host_curve *trial,
                     int epoch, int epochs, const host_stop_peer *peers, int n, char *reason,
                     size_t size)
{
    if (policy->rule == HOST_STOP_NONE || epoch < policy->grace_epochs || epoch >= epochs ||
        epoch > trial->epochs || n == 0)
        return false;
    if (policy->rule == HOST_STOP_ASHA && !is_rung(policy, epoch, epochs))
        return false;
    double best = host_curve_best(trial, epoch, policy->maximize, NULL);
    double *v = malloc((size_t)n * sizeof *v);
    if (!v)
        return false; /* out of memory: the trial goes on, which loses nothing */
    bool median = policy->rule == HOST_STOP_MEDIAN;
    int k = peer_bests(peers, n, epoch, median, policy->maximize, v);
    bool stop = median ? judge_median(policy, metric, best, epoch, v, k, reason, size)
                       : judge_asha(policy, metric, best, epoch, v, k, reason, size);
    free(v);
    return stop;
}
