/* scorch/infer.h — a trained model inside your program.
 *
 * Opens a checkpoint written by scorch-train together with the model and
 * dataset plugins it names, and runs the network on the caller's buffers:
 *
 *     sc_infer *h;
 *     if (sc_infer_open("runs/x/checkpoints/best.ckpt", NULL, &h) != SC_OK)
 *         fprintf(stderr, "%s\n", sc_error_message());
 *     sc_infer_decode(h, &(sc_raw_input){.path = "shoe.png"}, inputs);
 *     sc_infer_run(h, 1, inputs, outputs);
 *     ...
 *     sc_infer_close(h);
 *
 * Only what inference needs is loaded: the parameters and buffers (or
 * their EMA), never the optimizer's state or gradients, so a handle holds
 * the weights plus the arena of one batch of at most max_batch samples.
 * The dataset plugin's index is opened (from the checkpoint's
 * --dataset-path unless overridden), since decoding a raw input uses its
 * statistics (normalisation, vocabulary, ...).
 *
 * Thread rule: sc_infer_run calls on one handle run one at a time (the
 * handle serialises them: the model plugin's forward is a
 * [training-thread] callback, never called concurrently); sc_infer_decode
 * may be called from several threads at once, during a run too (the
 * dataset's index_decode is [any-thread]). Handles are independent of
 * each other. docs/predict.md.
 */
#ifndef SCORCH_INFER_H
#define SCORCH_INFER_H

#include <stdbool.h>
#include <stdint.h>

#include "scorch/export.h"
#include "scorch/plugin.h"
#include "scorch/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sc_infer sc_infer;

/* Every field may be left zero (or the whole struct NULL): the
 * checkpoint's own choice, or the default given. */
typedef struct sc_infer_options {
    const char *model;        /* model plugin file; NULL: the checkpoint's --model */
    const char *dataset;      /* dataset plugin file; NULL: the checkpoint's --dataset */
    const char *dataset_path; /* NULL: the checkpoint's --dataset-path */
    const char *device;       /* --device's notation ("cpu", "cuda:1"); NULL: "cpu" */
    int threads;              /* CPU compute threads; 0: one per core */
    int64_t max_batch;        /* the most samples one sc_infer_run takes; 0: 64 */
    bool ema;                 /* the checkpoint's EMA weights (a run with --ema-decay) */
} sc_infer_options;

/* Opens `checkpoint` into *out. Errors name the file and what is wrong:
 * unreadable or corrupt checkpoint, a plugin that does not load, weights
 * whose names or shapes the network does not have, no EMA in it, ... */
SC_API sc_status sc_infer_open(const char *checkpoint, const sc_infer_options *options,
                               sc_infer **out);
/* Frees everything; NULL is a no-op. */
SC_API void sc_infer_close(sc_infer *h);

/* One sample's inputs (dtype and shape without the batch dimension) and
 * the number of classes (spec->classes; 0 when the dataset does not say),
 * as the dataset plugin describes them. Valid until sc_infer_close. */
SC_API const sc_sample_spec *sc_infer_input_spec(const sc_infer *h);

/* The network's outputs for one sample: how many, and output i's dtype
 * and shape without the batch dimension. */
SC_API int sc_infer_output_count(const sc_infer *h);
SC_API const sc_tensor_spec *sc_infer_output_spec(const sc_infer *h, int i);

/* Runs the network in eval mode on n samples (1 <= n <= max_batch):
 * inputs[k] points at n contiguous samples of input k ([n, ...spec], its
 * dtype), outputs[k] receives n contiguous samples of output k ([n,
 * ...output spec], its dtype). The buffers are the caller's, on the host,
 * and are read and written during the call only. */
SC_API sc_status sc_infer_run(sc_infer *h, int64_t n, const void *const *inputs,
                              void *const *outputs);

/* Whether the dataset plugin turns raw inputs into samples (it has
 * index_decode, plugin ABI 1.4). */
SC_API bool sc_infer_decodes(const sc_infer *h);

/* Turns one raw input (a file, or bytes with a media type) into one
 * sample's inputs: inputs[k] receives input k of the spec (its dtype, one
 * sample). Errors name the input and why (unreadable, not an image, wrong
 * size, ...); SC_ERR_UNSUPPORTED when the dataset does not decode. */
SC_API sc_status sc_infer_decode(const sc_infer *h, const sc_raw_input *raw,
                                 void *const *inputs);

/* The dataset's name for class `label`, or NULL when it has none. */
SC_API const char *sc_infer_class_name(const sc_infer *h, int64_t label);

/* The model plugin's name ("mlp"). */
SC_API const char *sc_infer_model_name(const sc_infer *h);

#ifdef __cplusplus
}
#endif

#endif
