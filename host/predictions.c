#include "predictions.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { TOPK_MAX = 100 };

sc_status sc_predictions_open(sc_predictions *p, const char *path, int topk,
                              const sc_dataset_plugin *data, void *index)
{
    memset(p, 0, sizeof *p);
    if (topk < 1 || topk > TOPK_MAX)
        return sc_error_set(SC_ERR_INVALID, "--topk %d: must be 1..%d", topk, TOPK_MAX);
    if (!(p->csv = fopen(path, "w")))
        return sc_error_set(SC_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    p->topk = topk;
    p->data = data;
    p->index = index;
    fputs("sample,target,correct", p->csv);
    for (int k = 1; k <= topk; k++) {
        fprintf(p->csv, ",pred_%d,score_%d", k, k);
        if (data->class_name)
            fprintf(p->csv, ",name_%d", k);
    }
    fputc('\n', p->csv);
    return SC_OK;
}

/* probs [C] = softmax(logits [C]) */
static void softmax_row(const float *logits, int64_t c, double *probs)
{
    double max = logits[0], sum = 0;
    for (int64_t j = 1; j < c; j++)
        max = logits[j] > max ? logits[j] : max;
    for (int64_t j = 0; j < c; j++)
        sum += probs[j] = exp(logits[j] - max);
    for (int64_t j = 0; j < c; j++)
        probs[j] /= sum;
}

/* The k largest of probs [C] into top (indices), best first. */
static void top_classes(const double *probs, int64_t c, int k, int64_t *top)
{
    for (int i = 0; i < k; i++) {
        int64_t best = -1;
        for (int64_t j = 0; j < c; j++) {
            bool taken = false;
            for (int q = 0; q < i && !taken; q++)
                taken = top[q] == j;
            if (!taken && (best < 0 || probs[j] > probs[best]))
                best = j;
        }
        top[i] = best;
    }
}

static void write_row(sc_predictions *p, int64_t sample, int64_t target, const double *probs,
                      int64_t c)
{
    int k = p->topk < c ? p->topk : (int)c;
    int64_t top[TOPK_MAX] = {0};
    top_classes(probs, c, k, top);
    p->correct += top[0] == target;
    p->rows++;
    fprintf(p->csv, "%lld,%lld,%d", (long long)sample, (long long)target, top[0] == target);
    for (int i = 0; i < k; i++) {
        fprintf(p->csv, ",%lld,%.6f", (long long)top[i], probs[top[i]]);
        if (p->data->class_name) {
            const char *name = p->data->class_name(p->index, top[i]);
            fprintf(p->csv, ",\"%s\"", name ? name : "");
        }
    }
    fputc('\n', p->csv);
}

sc_status sc_predictions_write(void *user, const sc_batch *batch, const sc_tensor_list *outputs)
{
    sc_predictions *p = user;
    const sc_tensor *logits = outputs->t[0]; /* [N, C] */
    const sc_tensor *target = batch->targets.n ? batch->targets.t[0] : NULL; /* [N] */
    if (logits->ndim != 2 || logits->dtype != SC_F32 || !target || target->dtype == SC_F32 ||
        target->numel != logits->shape[0] || logits->shape[1] < 1)
        return sc_error_set(SC_ERR_INVALID,
                            "--predictions needs a classifier: output 0 as logits [N, C] and "
                            "target 0 as class indices [N]");
    int64_t c = logits->shape[1];
    double *probs = malloc((size_t)c * sizeof *probs);
    if (!probs)
        return sc_error_set(SC_ERR_NOMEM, "out of memory writing predictions");
    for (int64_t i = 0; i < logits->shape[0]; i++) {
        softmax_row(sc_tensor_f32(logits) + i * c, c, probs);
        write_row(p, batch->samples[i], sc_tensor_get_int(target, i), probs, c);
    }
    free(probs);
    return ferror(p->csv) ? sc_error_set(SC_ERR_IO, "writing predictions failed") : SC_OK;
}

sc_status sc_predictions_close(sc_predictions *p)
{
    if (!p->csv)
        return SC_OK;
    int bad = fclose(p->csv) != 0;
    p->csv = NULL;
    return bad ? sc_error_set(SC_ERR_IO, "closing predictions failed: %s", strerror(errno))
               : SC_OK;
}
