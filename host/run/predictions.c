#include "run/predictions.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/crash.h"
#include "scorch/csv.h"

enum { TOPK_MAX = 100, LABEL_MAX = 64 };

static bool names_classes(const host_predictions *p) { return p->data->api->class_name != NULL; }

/* The dataset's name for class c, or NULL. */
static const char *class_name(const host_predictions *p, int64_t c)
{
    const char *name = NULL;
    if (names_classes(p))
        HOST_PLUGIN_CALL(p->data->lib.path, "class_name",
                       name = p->data->api->class_name(p->index, c));
    return name;
}

/* The dataset's name for class c, or its index as text. */
static const char *class_label(const host_predictions *p, int64_t c, char *buf, size_t size)
{
    const char *name = class_name(p, c);
    if (name)
        return name;
    snprintf(buf, size, "%lld", (long long)c);
    return buf;
}

sc_status host_predictions_open(host_predictions *p, const char *csv_path, int topk,
                              const host_dataset_lib *data, void *index)
{
    memset(p, 0, sizeof *p);
    if (topk < 1 || topk > TOPK_MAX)
        return sc_error_set(SC_ERR_INVALID, "--topk %d: must be 1..%d", topk, TOPK_MAX);
    p->topk = topk;
    p->data = data;
    p->index = index;
    if (csv_path[0] && !(p->csv = fopen(csv_path, "w")))
        return sc_error_set(SC_ERR_IO, "cannot write %s: %s", csv_path, strerror(errno));
    return SC_OK;
}

/* The CSV's header, for p->topk predictions a row. */
static void write_header(host_predictions *p)
{
    fputs("sample,target,correct", p->csv);
    for (int k = 1; k <= p->topk; k++) {
        fprintf(p->csv, ",pred_%d,score_%d", k, k);
        if (names_classes(p))
            fprintf(p->csv, ",name_%d", k);
    }
    fputc('\n', p->csv);
    p->header_written = true;
}

void host_softmax_row(const float *logits, int64_t c, double *probs)
{
    double max = logits[0], sum = 0;
    for (int64_t j = 1; j < c; j++)
        max = logits[j] > max ? logits[j] : max;
    for (int64_t j = 0; j < c; j++)
        sum += probs[j] = exp(logits[j] - max);
    for (int64_t j = 0; j < c; j++)
        probs[j] /= sum;
}

/* The target never wins a tie: the accuracy metric counts a tie as a miss,
 * and `correct` and the confusion matrix must agree with it. */
void host_top_classes(const float *logits, int64_t c, int64_t target, int k, int64_t *top)
{
    for (int i = 0; i < k; i++) {
        int64_t best = -1;
        for (int64_t j = 0; j < c; j++) {
            bool taken = false;
            for (int q = 0; q < i && !taken; q++)
                taken = top[q] == j;
            if (!taken && (best < 0 || logits[j] > logits[best] ||
                           (logits[j] == logits[best] && best == target)))
                best = j;
        }
        top[i] = best;
    }
}

static void write_row(host_predictions *p, int64_t sample, int64_t target, const int64_t *top,
                      int k, const double *probs)
{
    fprintf(p->csv, "%lld,%lld,%d", (long long)sample, (long long)target, top[0] == target);
    for (int i = 0; i < k; i++) {
        fprintf(p->csv, ",%lld,%.6f", (long long)top[i], probs[top[i]]);
        if (names_classes(p)) {
            const char *name = class_name(p, top[i]);
            fputc(',', p->csv);
            sc_csv_write_field(p->csv, name ? name : "");
        }
    }
    fputc('\n', p->csv);
}

/* Fixes C at the first batch, allocates the confusion counts, clamps K
 * to C and writes the header. */
static sc_status set_classes(host_predictions *p, int64_t c)
{
    if (p->classes == c)
        return SC_OK;
    if (p->classes)
        return sc_error_set(SC_ERR_PLUGIN, "output 0 has %lld classes in one batch and %lld in "
                            "another", (long long)p->classes, (long long)c);
    if (!(p->confusion = calloc((size_t)(c * c), sizeof *p->confusion)))
        return sc_error_set(SC_ERR_NOMEM, "out of memory for a %lld-class confusion matrix",
                            (long long)c);
    p->classes = c;
    if (!p->csv)
        return SC_OK;
    if (p->topk > c) {
        fprintf(stderr, "note: --topk %d is more than the %lld classes: the predictions list "
                "the top %lld\n", p->topk, (long long)c, (long long)c);
        p->topk = (int)c;
    }
    write_header(p);
    return SC_OK;
}

static sc_status check_classifier(const sc_tensor *logits, const sc_tensor *target)
{
    if (logits->ndim != 2 || logits->dtype != SC_F32 || !target || target->dtype == SC_F32 ||
        target->numel != logits->shape[0] || logits->shape[1] < 1)
        return sc_error_set(SC_ERR_INVALID,
                            "--predictions, --confusion and --per-class need a classifier: "
                            "output 0 as logits [N, C] and target 0 as class indices [N]");
    return SC_OK;
}

/* One sample: counts it, and writes its row when asked to. */
static sc_status add_sample(host_predictions *p, int64_t sample, int64_t target,
                            const float *logits, double *probs)
{
    int64_t c = p->classes, top[TOPK_MAX] = {0};
    if (target < 0 || target >= c)
        return sc_error_set(SC_ERR_INVALID, "sample %lld: target %lld is not one of the %lld "
                            "classes of output 0", (long long)sample, (long long)target,
                            (long long)c);
    host_top_classes(logits, c, target, p->csv ? p->topk : 1, top);
    p->confusion[target * c + top[0]]++;
    p->correct += top[0] == target;
    p->rows++;
    if (p->csv) {
        host_softmax_row(logits, c, probs);
        write_row(p, sample, target, top, p->topk, probs);
    }
    return SC_OK;
}

sc_status host_predictions_add(void *user, const host_batch *batch, const sc_tensor_list *outputs)
{
    host_predictions *p = user;
    const sc_tensor *logits = outputs->t[0]; /* [N, C] */
    const sc_tensor *target = batch->targets.n ? batch->targets.t[0] : NULL; /* [N] */
    SC_TRY(check_classifier(logits, target));
    int64_t c = logits->shape[1];
    SC_TRY(set_classes(p, c));
    double *probs = malloc((size_t)c * sizeof *probs);
    if (!probs)
        return sc_error_set(SC_ERR_NOMEM, "out of memory writing predictions");
    sc_status st = SC_OK;
    for (int64_t i = 0; st == SC_OK && i < logits->shape[0]; i++)
        st = add_sample(p, batch->samples[i], sc_tensor_get_int(target, i),
                        sc_tensor_f32(logits) + i * c, probs);
    free(probs);
    SC_TRY(st);
    return p->csv && ferror(p->csv) ? sc_error_set(SC_ERR_IO, "writing predictions failed")
                                    : SC_OK;
}

/* ---- the confusion matrix and per-class accuracy ---- */

static int64_t row_sum(const host_predictions *p, int64_t t)
{
    int64_t n = 0;
    for (int64_t j = 0; j < p->classes; j++)
        n += p->confusion[t * p->classes + j];
    return n;
}

static sc_status open_report(const host_predictions *p, const char *path, FILE **out)
{
    if (p->classes == 0)
        return sc_error_set(SC_ERR_INVALID, "no samples were evaluated: nothing to write to %s",
                            path);
    if (!(*out = fopen(path, "w")))
        return sc_error_set(SC_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    return SC_OK;
}

static sc_status close_report(FILE *f, const char *path)
{
    bool bad = ferror(f) != 0;
    if (fclose(f) != 0 || bad)
        return sc_error_set(SC_ERR_IO, "writing %s failed: %s", path, strerror(errno));
    return SC_OK;
}

sc_status host_predictions_write_confusion(const host_predictions *p, const char *path)
{
    FILE *f;
    SC_TRY(open_report(p, path, &f));
    char buf[LABEL_MAX];
    fputs("true\\predicted", f);
    for (int64_t j = 0; j < p->classes; j++) {
        fputc(',', f);
        sc_csv_write_field(f, class_label(p, j, buf, sizeof buf));
    }
    fputc('\n', f);
    for (int64_t t = 0; t < p->classes; t++) {
        sc_csv_write_field(f, class_label(p, t, buf, sizeof buf));
        for (int64_t j = 0; j < p->classes; j++)
            fprintf(f, ",%lld", (long long)p->confusion[t * p->classes + j]);
        fputc('\n', f);
    }
    return close_report(f, path);
}

/* correct / samples, NaN for a class without samples. */
static double class_accuracy(const host_predictions *p, int64_t t)
{
    int64_t n = row_sum(p, t);
    return n ? (double)p->confusion[t * p->classes + t] / (double)n : NAN;
}

sc_status host_predictions_write_per_class(const host_predictions *p, const char *path)
{
    FILE *f;
    SC_TRY(open_report(p, path, &f));
    bool named = names_classes(p);
    fputs(named ? "class,name,samples,correct,accuracy\n" : "class,samples,correct,accuracy\n",
          f);
    for (int64_t t = 0; t < p->classes; t++) {
        fprintf(f, "%lld,", (long long)t);
        if (named) {
            const char *name = class_name(p, t);
            sc_csv_write_field(f, name ? name : "");
            fputc(',', f);
        }
        fprintf(f, "%lld,%lld,", (long long)row_sum(p, t),
                (long long)p->confusion[t * p->classes + t]);
        double acc = class_accuracy(p, t);
        if (isfinite(acc)) /* empty for a class without samples */
            fprintf(f, "%.6f", acc);
        fputc('\n', f);
    }
    return close_report(f, path);
}

void host_predictions_print_per_class(const host_predictions *p, FILE *out)
{
    char buf[LABEL_MAX];
    int width = 5; /* "class" */
    for (int64_t t = 0; t < p->classes; t++) {
        int len = (int)strlen(class_label(p, t, buf, sizeof buf));
        width = len > width ? len : width;
    }
    width = width < 32 ? width : 32;
    fprintf(out, "%-*s  %8s  %8s  %8s\n", width, "class", "samples", "correct", "accuracy");
    for (int64_t t = 0; t < p->classes; t++) {
        fprintf(out, "%-*.*s  %8lld  %8lld  ", width, width, class_label(p, t, buf, sizeof buf),
                (long long)row_sum(p, t), (long long)p->confusion[t * p->classes + t]);
        double acc = class_accuracy(p, t);
        if (isfinite(acc))
            fprintf(out, "%8.4f\n", acc);
        else
            fprintf(out, "%8s\n", "-");
    }
    fprintf(out, "%-*s  %8lld  %8lld  %8.4f\n", width, "all", (long long)p->rows,
            (long long)p->correct, p->rows ? (double)p->correct / (double)p->rows : 0);
}

sc_status host_predictions_close(host_predictions *p)
{
    free(p->confusion);
    p->confusion = NULL;
    if (!p->csv)
        return SC_OK;
    if (!p->header_written) /* no batch: the header alone, as asked */
        write_header(p);
    bool bad = ferror(p->csv) != 0;
    bad |= fclose(p->csv) != 0;
    p->csv = NULL;
    return bad ? sc_error_set(SC_ERR_IO, "closing predictions failed: %s", strerror(errno))
               : SC_OK;
}
