/* predictions.h — per-sample predictions of a classifier as CSV:
 *
 *   sample,target,correct,pred_1,score_1,...,pred_K,score_K
 *
 * one row per sample in dataset order; scores are softmax probabilities
 * of the network's first output [N, C]; pred_k are class indices (a
 * class_name column pair follows when the dataset names its classes).
 */
#ifndef SCORCH_HOST_PREDICTIONS_H
#define SCORCH_HOST_PREDICTIONS_H

#include <stdio.h>

#include "loader.h"

typedef struct sc_predictions {
    FILE *csv;
    int topk;
    const sc_dataset_plugin *data; /* for class_name, may be NULL */
    void *index;
    int64_t rows;
    int64_t correct; /* rows whose target is pred_1 */
} sc_predictions;

sc_status sc_predictions_open(sc_predictions *p, const char *path, int topk,
                              const sc_dataset_plugin *data, void *index);

/* Appends a batch's rows (an sc_eval_batch_fn). */
sc_status sc_predictions_write(void *p, const sc_batch *batch, const sc_tensor_list *outputs);

sc_status sc_predictions_close(sc_predictions *p);

#endif
