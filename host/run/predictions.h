/* predictions.h — what scorch-test reports of a classifier, from the
 * network's first output (logits [N, C]) and the first target (class
 * indices [N]). docs/inspecting.md shows each file.
 *
 * Per-sample predictions (--predictions), one row per sample in dataset
 * order, scores being softmax probabilities and pred_k class indices:
 *
 *   sample,target,correct,pred_1,score_1,...,pred_K,score_K
 *
 * (a name_k column follows each score_k when the dataset names classes).
 * K is --topk, or the number of classes C where --topk exceeds it (with a
 * note on stderr), so every row has the header's columns; the header is
 * written with the first batch, which tells C.
 * Confusion matrix (--confusion): a header row of predicted classes, then
 * one row per true class with its counts:
 *
 *   true\predicted,0,1,2
 *   0,50,2,0
 *
 * Classes are labelled by the dataset's class_name, or their index.
 * Per-class accuracy (--per-class), one row per class, top-1:
 *
 *   class,name,samples,correct,accuracy
 *
 * (no name column when the dataset names no classes).
 */
#ifndef SCORCH_HOST_PREDICTIONS_H
#define SCORCH_HOST_PREDICTIONS_H

#include <stdio.h>

#include "run/loader.h"
#include "base/plugin_loader.h"

typedef struct host_predictions {
    FILE *csv; /* per-sample rows; NULL when not asked for */
    int topk;  /* K: --topk, clamped to C at the first batch */
    bool header_written;
    const host_dataset_lib *data; /* for class_name, which may be NULL, and its file */
    void *index;
    int64_t classes;    /* C, from the first batch; 0 before it */
    int64_t *confusion; /* [C, C]: row = true class, column = top-1 class */
    int64_t rows;
    int64_t correct; /* rows whose target is pred_1 */
} host_predictions;

/* csv_path "" keeps the counts without writing per-sample rows. data and
 * index must outlive p. */
sc_status host_predictions_open(host_predictions *p, const char *csv_path, int topk,
                              const host_dataset_lib *data, void *index);

/* Counts a batch and appends its rows (an host_eval_batch_fn). */
sc_status host_predictions_add(void *p, const host_batch *batch, const sc_tensor_list *outputs);

sc_status host_predictions_write_confusion(const host_predictions *p, const char *path);
sc_status host_predictions_write_per_class(const host_predictions *p, const char *path);

/* The per-class accuracy as a table, for people. */
void host_predictions_print_per_class(const host_predictions *p, FILE *out);

/* Closes the CSV and frees the counts. */
sc_status host_predictions_close(host_predictions *p);

/* ---- shared with scorch-predict (run/predict.h) ---- */

/* probs [C] = softmax(logits [C]), in double. */
void host_softmax_row(const float *logits, int64_t c, double *probs);

/* The k highest of logits [C] into top (class indices), best first; of
 * equal logits the lower index ranks first, except that `target` (-1:
 * none) never wins a tie. */
void host_top_classes(const float *logits, int64_t c, int64_t target, int k, int64_t *top);


#endif
