#include "sweep/curve.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/jsonl.h"

static const char *phase_of(const host_json_record *rec)
{
    const host_json_field *f = host_json_record_get(rec, "phase");
    return f && f->type == HOST_JSON_STRING ? f->string : NULL;
}

static bool has_phase(const host_jsonl_file *file, const char *phase)
{
    for (int i = 0; i < file->count; i++)
        if (phase_of(&file->records[i]) && strcmp(phase_of(&file->records[i]), phase) == 0)
            return true;
    return false;
}

/* The phase whose records make the curve. */
static const char *curve_phase(const host_jsonl_file *file)
{
    return has_phase(file, "valid_ema") ? "valid_ema" : has_phase(file, "valid") ? "valid"
                                                                                 : "train";
}

static bool phase_has_key(const host_jsonl_file *file, const char *phase, const char *key)
{
    for (int i = 0; i < file->count; i++) {
        const host_json_record *rec = &file->records[i];
        if (phase_of(rec) && strcmp(phase_of(rec), phase) == 0 && host_json_record_get(rec, key))
            return true;
    }
    return false;
}

static sc_status set_value(host_curve *curve, int epoch, double value)
{
    if (epoch > curve->epochs) {
        double *grown = realloc(curve->values, (size_t)epoch * sizeof *grown);
        if (!grown)
            return sc_error_set(SC_ERR_NOMEM, "out of memory");
        for (int e = curve->epochs; e < epoch; e++)
            grown[e] = NAN;
        curve->values = grown;
        curve->epochs = epoch;
    }
    curve->values[epoch - 1] = value;
    return SC_OK;
}

static sc_status fill(const host_jsonl_file *file, const char *phase, const char *metric,
                      host_curve *curve)
{
    for (int i = 0; i < file->count; i++) {
        const host_json_record *rec = &file->records[i];
        const host_json_field *epoch = host_json_record_get(rec, "epoch");
        const host_json_field *value = host_json_record_get(rec, metric);
        if (!phase_of(rec) || strcmp(phase_of(rec), phase) != 0 || !epoch ||
            epoch->type != HOST_JSON_NUMBER || epoch->number < 1 || epoch->number > 1e6)
            continue;
        SC_TRY(set_value(curve, (int)epoch->number,
                         value && value->type == HOST_JSON_NUMBER ? value->number : NAN));
    }
    return SC_OK;
}

sc_status host_curve_read(const char *path, char *metric, size_t size, host_curve *curve)
{
    *curve = (host_curve){0};
    struct stat st;
    if (stat(path, &st) != 0)
        return SC_OK;
    host_jsonl_file file;
    SC_TRY(host_jsonl_read(path, &file));
    const char *phase = curve_phase(&file);
    if (!metric[0])
        snprintf(metric, size, "%s", phase_has_key(&file, phase, "accuracy") ? "accuracy"
                                                                              : "loss");
    sc_status s = fill(&file, phase, metric, curve);
    host_jsonl_free(&file);
    if (s != SC_OK)
        host_curve_free(curve);
    return s;
}

void host_curve_free(host_curve *curve)
{
    free(curve->values);
    *curve = (host_curve){0};
}

bool host_metric_better(double a, double b, bool maximize)
{
    if (isnan(a))
        return false;
    if (isnan(b))
        return true;
    return maximize ? a > b : a < b;
}

double host_curve_best(const host_curve *curve, int epoch, bool maximize, int *at)
{
    double best = NAN;
    int best_epoch = 0;
    for (int e = 1; e <= epoch && e <= curve->epochs; e++)
        if (host_metric_better(curve->values[e - 1], best, maximize)) {
            best = curve->values[e - 1];
            best_epoch = e;
        }
    if (at)
        *at = best_epoch;
    return best;
}
