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

#include "loader.h"
#include "plugin_loader.h"

typedef struct sc_predictions {
    FILE *csv; /* per-sample rows; NULL when not asked for */
    int topk;
    const sc_dataset_lib *data; /* for class_name, which may be NULL, and its file */
    void *index;
    int64_t classes;    /* C, from the first batch; 0 before it */
    int64_t *confusion; /* [C, C]: row = true class, column = top-1 class */
    int64_t rows;
    int64_t correct; /* rows whose target is pred_1 */
} sc_predictions;

/* csv_path "" keeps the counts without writing per-sample rows. data and
 * index must outlive p. */
sc_status sc_predictions_open(sc_predictions *p, const char *csv_path, int topk,
                              const sc_dataset_lib *data, void *index);

/* Counts a batch and appends its rows (an sc_eval_batch_fn). */
sc_status sc_predictions_add(void *p, const sc_batch *batch, const sc_tensor_list *outputs);

sc_status sc_predictions_write_confusion(const sc_predictions *p, const char *path);
sc_status sc_predictions_write_per_class(const sc_predictions *p, const char *path);

/* The per-class accuracy as a table, for people. */
void sc_predictions_print_per_class(const sc_predictions *p, FILE *out);

/* Closes the CSV and frees the counts. */
sc_status sc_predictions_close(sc_predictions *p);

#endif
