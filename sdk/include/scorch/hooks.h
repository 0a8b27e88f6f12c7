/* scorch/hooks.h — the restricted hook table (ABI v1).
 *
 * A plugin (model, dataset, or a separate hooks plugin) may export
 *
 *   SC_PLUGIN_EXPORT const sc_hook_table scorch_hooks = {
 *       SC_ABI_HEADER(sc_hook_table), 1, (const sc_hook[]){
 *           {"epoch_end", "early_stop", my_epoch_end, 0},
 *       }};
 *
 * The host validates the table at load: ABI, known hook points (a misspelt
 * point is an error that suggests the right one), unique names (but for a
 * checkpoint_save / checkpoint_load pair, which shares one). At each
 * point, hooks run after the host's built-in steps (validation,
 * checkpointing, metric logging), in ascending priority, then load order.
 * A hook sees a read-only context and may act only through `actions`. A
 * hook returning an error stops the run with its message, the hook's name
 * and its plugin; the last checkpoint stays intact.
 *
 * Hook points: train_begin, train_end, epoch_begin, epoch_end,
 * phase_begin, phase_end, batch_begin, batch_end; since ABI 1.1 also
 * after_backward (the step's gradients, read-only, before the optimizer
 * uses them), checkpoint_save (a hook hands its own state to the checkpoint
 * being written with actions->save_blob) and checkpoint_load (on resume,
 * before train_begin, the hook gets that state back in ctx->blob). Phases:
 * phase_* run for train, valid and test passes, batch_end too, batch_begin
 * and after_backward in train only. See docs/hooks.md for which context
 * fields each point sets.
 *
 * Since ABI 1.2 a hooks plugin takes arguments (--hooks PATH --hooks-args
 * k=v,...): it lists the keys it knows in scorch_hook_arg_keys, the host
 * refuses any other key before the run starts, and each hook reads the
 * values from ctx->args (scorch/args.h).
 *
 * Since ABI 1.3 sc_hook_actions starts with an ABI header: actions->abi.minor
 * is the minor the host speaks, and actions->abi.size says which actions
 * it has. A hook of a table built against newer headers (SC_ABI_HEADER_MIN)
 * calls an action, and reads a context field, of a later minor only when
 * actions->abi.minor reaches it. The host hands a table built for 1.0 to
 * 1.2 the actions as those minors laid them out, without the header.
 *
 * Thread tags (scorch/plugin.h): hooks are [training-thread]; actions are
 * called from the hook, during its call.
 */
#ifndef SCORCH_HOOKS_H
#define SCORCH_HOOKS_H

#include <stddef.h>

#include "scorch/metrics.h"
#include "scorch/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One trainable parameter's gradient after backward (host memory in ABI
 * 1.x), valid during the hook call only. */
typedef struct sc_hook_grad {
    const char *name;     /* the parameter's name */
    int ndim;
    const int64_t *shape;
    int64_t numel;
    const float *grad;    /* numel values */
} sc_hook_grad;

typedef struct sc_hook_context {
    const char *point;       /* the hook point being run */
    sc_split phase;          /* the current pass's split (docs/hooks.md) */
    int epoch;               /* 1-based */
    int epochs;              /* planned number of epochs */
    int64_t step;            /* optimizer steps taken so far; at after_backward the number
                                of the step being taken (docs/hooks.md) */
    int64_t batch;           /* batch_*, after_backward: 0-based index in the pass */
    int64_t batches;         /* batch_*, after_backward: batches in the pass */
    int rank, world;
    int batch_size;
    double loss;             /* train batch_end, after_backward: the batch's; valid and
                                test batch_end: the pass's so far; phase_end: its mean */
    double lr;               /* of the latest step (after_backward, batch_end: this one's) */
    double samples_per_s;    /* phase_end: the pass's throughput */
    const sc_metrics *metrics; /* batch_end, phase_end: the pass's so far; epoch_end:
                                  the valid pass's; else NULL */

    /* ABI 1.1 */
    const char *hook;        /* the name of the hook being run */
    int n_grads;             /* after_backward: the trainable parameters' */
    const sc_hook_grad *grads; /* gradients, read-only; else 0 and NULL */
    const void *blob;        /* checkpoint_load: what this hook saved, or NULL */
    size_t blob_size;
    bool extra;              /* phase_*, batch_end: an extra pass (request_eval,
                                scorch-ctl validate/test), not the epoch's own */

    /* ABI 1.2 */
    const sc_args *args;     /* the arguments of the hook's plugin, never NULL: a
                                --hooks plugin's --hooks-args (only the keys of its
                                scorch_hook_arg_keys), the model's --model-args, the
                                dataset's --dataset-args; valid during the call */
} sc_hook_context;

typedef struct sc_hook_actions {
    /* ABI 1.3: SC_ABI_HEADER(sc_hook_actions) as the host was built; the
     * host checks it before handing the actions to any hook. */
    sc_abi_header abi;
    void *host;
    /* [training-thread] Sets the base learning rate (the --lr value); the
     * schedule keeps its shape relative to it from the next step on. */
    void (*set_lr)(void *host, double lr);
    /* [training-thread] Ends training after the current batch, with a
     * checkpoint; the test pass and train_end still run (early stopping). */
    void (*request_stop)(void *host, const char *reason);
    /* [training-thread] Records a scalar under `tag` in metrics.jsonl and
     * TensorBoard at this step. */
    void (*log_scalar)(void *host, const char *tag, double value);

    /* [training-thread] ABI 1.1. Writes a checkpoint at the next batch
     * boundary: the end of the current train batch, or the end of the
     * epoch when asked outside the train batches. */
    void (*request_checkpoint)(void *host, const char *reason);
    /* [training-thread] ABI 1.1. Runs an extra pass over split
     * (SC_SPLIT_VALID or SC_SPLIT_TEST) at the next batch boundary, logged
     * as phase "valid_extra"/"test_extra". */
    void (*request_eval)(void *host, sc_split split, const char *reason);
    /* [training-thread] ABI 1.1. checkpoint_save only: stores size bytes as
     * this hook's entry "hook/<name>" of the checkpoint being written
     * (copied; a second call replaces the first). SC_ERR_STATE at any
     * other point. */
    sc_status (*save_blob)(void *host, const void *data, size_t size);
    /* [training-thread] ABI 1.1. Records `text` under `tag` in
     * TensorBoard's text dashboard at this step (nothing with
     * --no-tensorboard). SC_ERR_INVALID for a NULL or empty tag or NULL
     * text: return it from the hook. */
    sc_status (*log_text)(void *host, const char *tag, const char *text);
    /* [training-thread] ABI 1.1. Records `image` under `tag` in
     * TensorBoard, as a PNG, at this step: a CPU tensor, u8 (0..255) or
     * f32 (0..1, clamped), of shape [H, W] or [C, H, W] with C = 1 (grey)
     * or 3 (RGB); read during the call only. SC_ERR_INVALID naming what is
     * wrong for any other tensor (even with --no-tensorboard): return it
     * from the hook. */
    sc_status (*log_image)(void *host, const char *tag, const sc_tensor *image);
} sc_hook_actions;

/* [training-thread] A hook: sees ctx (read-only, valid during the call)
 * and acts only through actions, passing actions->host. */
typedef sc_status (*sc_hook_fn)(const sc_hook_context *ctx, const sc_hook_actions *actions);

typedef struct sc_hook {
    const char *point; /* a hook point name above */
    const char *name;  /* unique within the run, for messages; a checkpoint_save
                          and a checkpoint_load hook of one table share one to
                          pair up: "hook/<name>" is their state */
    sc_hook_fn fn;
    int priority;      /* lower runs first */
} sc_hook;

typedef struct sc_hook_table {
    sc_abi_header abi;
    int n_hooks;
    const sc_hook *hooks;
} sc_hook_table;

/* ABI 1.2. The keys a --hooks plugin accepts in --hooks-args, exported
 * beside its table:
 *
 *   SC_PLUGIN_EXPORT const sc_hook_arg_keys scorch_hook_arg_keys = {
 *       SC_ABI_HEADER(sc_hook_arg_keys), (const char *const[]){"patience", NULL}};
 *
 * A plugin without it takes no arguments. The host refuses any key not
 * listed before the run starts, naming it and the nearest listed one. */
typedef struct sc_hook_arg_keys {
    sc_abi_header abi;
    const char *const *keys; /* NULL-terminated */
} sc_hook_arg_keys;

#ifdef __cplusplus
}
#endif
#endif
