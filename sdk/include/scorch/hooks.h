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
 * point is an error that suggests the right one), unique names. At each
 * point, hooks run after the host's built-in steps (validation,
 * checkpointing, metric logging), in ascending priority, then load order.
 * A hook sees a read-only context and may act only through `actions`. A
 * hook returning an error stops the run with its message, the hook's name
 * and its plugin; the last checkpoint stays intact.
 *
 * Hook points: train_begin, train_end, epoch_begin, epoch_end,
 * phase_begin, phase_end, batch_begin, batch_end. See docs/hooks.md for
 * which context fields each sets.
 * Thread rule: hooks run on the training thread.
 */
#ifndef SCORCH_HOOKS_H
#define SCORCH_HOOKS_H

#include "scorch/metrics.h"
#include "scorch/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sc_hook_context {
    const char *point;       /* the hook point being run */
    sc_split phase;          /* current phase (phase_* and batch_*) */
    int epoch;               /* 1-based */
    int epochs;              /* planned number of epochs */
    int64_t step;            /* optimizer steps taken so far */
    int64_t batch;           /* 0-based batch index in the phase */
    int64_t batches;         /* batches in the phase */
    int rank, world;
    int batch_size;
    double loss;             /* batch_end: batch loss; phase_end/epoch_end: phase mean */
    double lr;
    double samples_per_s;    /* phase_end: the phase's throughput */
    const sc_metrics *metrics; /* phase metrics so far (phase/batch end) or NULL */
} sc_hook_context;

typedef struct sc_hook_actions {
    void *host;
    /* Sets the base learning rate (the --lr value); the schedule keeps its
     * shape relative to it from the next step on. */
    void (*set_lr)(void *host, double lr);
    /* Stops after the current batch, with a checkpoint. */
    void (*request_stop)(void *host, const char *reason);
    /* Records a scalar under `tag` in metrics.jsonl at this step. */
    void (*log_scalar)(void *host, const char *tag, double value);
} sc_hook_actions;

typedef sc_status (*sc_hook_fn)(const sc_hook_context *ctx, const sc_hook_actions *actions);

typedef struct sc_hook {
    const char *point; /* a hook point name above */
    const char *name;  /* unique within the run, for messages */
    sc_hook_fn fn;
    int priority;      /* lower runs first */
} sc_hook;

typedef struct sc_hook_table {
    sc_abi_header abi;
    int n_hooks;
    const sc_hook *hooks;
} sc_hook_table;

#ifdef __cplusplus
}
#endif
#endif
