#include "scorch/metrics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct sc_metrics {
    int count;
    char names[SC_METRICS_MAX][SC_METRIC_NAME_MAX];
    double numerator[SC_METRICS_MAX];
    double denominator[SC_METRICS_MAX];
};

sc_metrics *sc_metrics_new(void)
{
    sc_metrics *m = calloc(1, sizeof *m);
    if (!m)
        sc_error_set(SC_ERR_NOMEM, "out of memory for a metrics accumulator");
    return m;
}

void sc_metrics_free(sc_metrics *m) { free(m); }

void sc_metrics_reset(sc_metrics *m)
{
    memset(m->numerator, 0, sizeof m->numerator);
    memset(m->denominator, 0, sizeof m->denominator);
}

static sc_status check_name(const char *name)
{
    if (!name || !*name)
        return sc_error_set(SC_ERR_INVALID, "a metric needs a name");
    size_t len = strlen(name);
    if (len >= SC_METRIC_NAME_MAX)
        return sc_error_set(SC_ERR_INVALID, "metric name '%.20s...' is longer than %d characters",
                            name, SC_METRIC_NAME_MAX - 1);
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                  (c >= '0' && c <= '9') || c == '_';
        if (!ok)
            return sc_error_set(SC_ERR_INVALID,
                                "metric name '%s': character %zu is not [A-Za-z0-9_]", name,
                                i + 1);
    }
    return SC_OK;
}

sc_status sc_metrics_add(sc_metrics *m, const char *name, double numerator,
                         double denominator)
{
    int i = sc_metrics_find(m, name);
    if (i < 0) {
        SC_TRY(check_name(name));
        if (m->count == SC_METRICS_MAX)
            return sc_error_set(SC_ERR_INVALID, "metric '%s': more than %d metrics", name,
                                SC_METRICS_MAX);
        i = m->count++;
        strcpy(m->names[i], name);
    }
    m->numerator[i] += numerator;
    m->denominator[i] += denominator;
    return SC_OK;
}

int sc_metrics_count(const sc_metrics *m) { return m->count; }

const char *sc_metrics_name(const sc_metrics *m, int i) { return m->names[i]; }

double sc_metrics_numerator(const sc_metrics *m, int i) { return m->numerator[i]; }

double sc_metrics_denominator(const sc_metrics *m, int i) { return m->denominator[i]; }

double sc_metrics_value(const sc_metrics *m, int i)
{
    return m->denominator[i] != 0.0 ? m->numerator[i] / m->denominator[i] : NAN;
}

int sc_metrics_find(const sc_metrics *m, const char *name)
{
    if (!name)
        return -1;
    for (int i = 0; i < m->count; i++)
        if (strcmp(m->names[i], name) == 0)
            return i;
    return -1;
}

static bool is_int_dtype(sc_dtype d) { return d == SC_I32 || d == SC_I64 || d == SC_U8; }

/* Integer class indices [N], or f32 class probabilities [N, C]. */
static bool targets_fit(const sc_tensor *logits, const sc_tensor *target)
{
    if (target->dtype == SC_F32)
        return sc_tensor_same_shape(target, logits);
    return is_int_dtype(target->dtype) && target->ndim == 1 &&
           target->shape[0] == logits->shape[0];
}

static sc_status check_classifier(const sc_tensor *logits, const sc_tensor *target)
{
    char ls[64], ts[64];
    if (logits->dtype != SC_F32 || logits->ndim != 2 || !targets_fit(logits, target))
        return sc_error_set(SC_ERR_INVALID,
                            "accuracy: expected f32 logits [N, C] and integer targets [N] "
                            "or f32 class probabilities [N, C], got %s %s and %s %s",
                            sc_dtype_name(logits->dtype),
                            sc_shape_str(logits->ndim, logits->shape, ls, sizeof ls),
                            sc_dtype_name(target->dtype),
                            sc_shape_str(target->ndim, target->shape, ts, sizeof ts));
    if (logits->device.kind != SC_DEVICE_CPU || target->device.kind != SC_DEVICE_CPU)
        return sc_error_set(SC_ERR_UNSUPPORTED, "accuracy: logits and targets must be on the CPU");
    return SC_OK;
}

/* Sample i's class: its index, or the dominant label of a probability row
 * (the first largest, as torch.argmax). */
static int64_t target_class(const sc_tensor *target, int64_t i)
{
    if (target->dtype != SC_F32)
        return sc_tensor_get_int(target, i);
    int64_t classes = target->shape[1], best = 0;
    const float *row = sc_tensor_f32(target) + i * classes;
    for (int64_t c = 1; c < classes; c++)
        best = row[c] > row[best] ? c : best;
    return best;
}

/* Classes that rank at or above the target in row [C]: every other class
 * whose logit is not strictly below the target's (ties and NaN count
 * against the target, so constant logits score nothing). */
static int64_t classes_above(const float *row, int64_t classes, int64_t target)
{
    const float lt = row[target];
    int64_t above = 0;
    for (int64_t c = 0; c < classes; c++)
        above += c != target && !(row[c] < lt);
    return above;
}

/* *correct = samples of logits [N, C] whose target is among the k largest. */
static sc_status count_topk(const sc_tensor *logits, const sc_tensor *target, int k,
                            int64_t *correct)
{
    SC_TRY(check_classifier(logits, target));
    if (k < 1)
        return sc_error_set(SC_ERR_INVALID, "top-k accuracy: k = %d must be >= 1", k);
    const int64_t n = logits->shape[0], classes = logits->shape[1];
    const float *x = sc_tensor_f32(logits); /* [n, classes] */
    *correct = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t t = target_class(target, i);
        if (t < 0 || t >= classes)
            return sc_error_set(SC_ERR_INVALID,
                                "accuracy: target %lld of sample %lld is outside 0..%lld",
                                (long long)t, (long long)i, (long long)(classes - 1));
        *correct += classes_above(x + i * classes, classes, t) < k;
    }
    return SC_OK;
}

/* -1 with a message on bad input: the contract has no status to return. */
int64_t sc_correct_topk(const sc_tensor *logits, const sc_tensor *target, int k)
{
    int64_t correct;
    return count_topk(logits, target, k, &correct) == SC_OK ? correct : -1;
}

int64_t sc_correct_top1(const sc_tensor *logits, const sc_tensor *target)
{
    return sc_correct_topk(logits, target, 1);
}

sc_status sc_metrics_add_classification(sc_metrics *m, const sc_tensor *logits,
                                        const sc_tensor *target)
{
    int64_t top1, top5;
    SC_TRY(count_topk(logits, target, 1, &top1));
    double n = (double)logits->shape[0];
    SC_TRY(sc_metrics_add(m, "accuracy", (double)top1, n));
    if (logits->shape[1] <= 5) /* the top 5 of 5 classes or fewer hold every target */
        return SC_OK;
    SC_TRY(count_topk(logits, target, 5, &top5));
    return sc_metrics_add(m, "top5_accuracy", (double)top5, n);
}
