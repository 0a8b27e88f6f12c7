/* predict.h — scorch-predict: a checkpoint's network on raw inputs, through
 * the C inference API (scorch/infer.h). docs/predict.md shows every format.
 *
 * Inputs, in order: the arguments, each a file, or "-": stdin, one input a
 * line, given to the dataset as the line's bytes of media type text/csv
 * (a row of a text dataset); then the paths --input-list names, one a line
 * ("-": read from stdin). Lines are read a batch at a time, so the answers
 * to a batch come out before the next is read; empty lines are skipped and
 * a "\r\n" end is cut. A file's media type is told by its extension where
 * it is .png, .pgm or .csv, else by the dataset from the content.
 *
 * Each batch of at most infer.max_batch inputs is decoded on infer.threads
 * threads (all cores for 0); an input that fails is a line on `err` naming
 * it and why, and the others go through the network together (one
 * sc_infer_run). The batch's records are flushed before the next is read.
 *
 * Output, a record per input that decoded, in input order. For a
 * classifier (the dataset names a class count C and output 0 is [C]
 * floats) the top k classes by softmax probability, best first:
 *   text   shoe.png: Ankle boot 97.3%, Sneaker 2.12%, Sandal 0.451%
 *          (3 significant digits)
 *   csv    input,pred_1,score_1,name_1,...   (name_k where the dataset names
 *          classes; scores to 6 decimals, as scorch-test's predictions.csv)
 *   jsonl  {"input":"shoe.png","top":[{"class":9,"name":"Ankle boot",
 *          "probability":0.973112},...]}
 * Otherwise, or with `raw`, every output's values (flattened; floats to 9
 * significant digits, which read back as the same float):
 *   text   shoe.png: -1.5 0.25 ...   (" | " between outputs)
 *   csv    input,output0_0,output0_1,...,output1_0,...
 *   jsonl  {"input":"shoe.png","outputs":[[-1.5,0.25,...],[...]]}
 * A line of stdin is named "stdin:N" (its line number).
 */
#ifndef SCORCH_HOST_PREDICT_H
#define SCORCH_HOST_PREDICT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "scorch/infer.h"
#include "scorch/status.h"

typedef enum host_predict_format {
    HOST_PREDICT_TEXT,
    HOST_PREDICT_CSV,
    HOST_PREDICT_JSONL,
} host_predict_format;

typedef struct host_predict_request {
    const char *checkpoint;
    sc_infer_options infer;   /* plugins, device, threads, --ema; max_batch: the batch */
    char *const *inputs;      /* the arguments: paths, or "-" for stdin's lines */
    int n_inputs;
    const char *input_list;   /* a file of paths, "-" for stdin, or "" */
    int topk;                 /* classes per record, clamped to C with a note on err */
    bool raw;                 /* every output's values, even of a classifier */
    host_predict_format format;
    FILE *out, *err;          /* the records; the notes and the failed inputs */
} host_predict_request;

typedef struct host_predict_result {
    int64_t predicted; /* records written */
    int64_t failed;    /* inputs refused, each a line on err */
} host_predict_result;

/* What the command line got wrong: no input at all, stdin named twice
 * ("-" twice, or beside --input-list -), a batch or topk below 1. */
sc_status host_predict_check(const host_predict_request *r);

/* Opens the checkpoint and predicts every input. An error (the checkpoint,
 * a dataset that decodes no raw input, an unreadable input list, a failed
 * write) stops it; inputs that fail do not, and are counted. */
sc_status host_predict(const host_predict_request *r, host_predict_result *result);

#endif
