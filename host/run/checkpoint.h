/* checkpoint.h — what a training checkpoint holds and how it is restored.
 *
 * Entries (scorch/serialize.h container): "param/<name>" for every
 * parameter, "optim/<state>" for the optimizer's flat state, "ema/<name>"
 * for the EMA of every parameter (--ema-decay only), a "trainer"
 * blob (text, one `key value` per line: position, lr, schedule state, best
 * metric, the running sums of a half-done train epoch), a "config" blob
 * (the resolved config.ini), a "model" blob (the model plugin's name),
 * and "hook/<name>" blobs, each a hook's own state (checkpoint_save).
 * Together they make resuming give the same result as never stopping.
 */
#ifndef SCORCH_HOST_CHECKPOINT_H
#define SCORCH_HOST_CHECKPOINT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/config.h"
#include "control/hook_set.h"
#include "scorch_host/ema.h"
#include "scorch/scorch.h"

/* The trainer's position and the state that is not a tensor. Plain values
 * only: data parallelism broadcasts it from rank 0 as bytes. */
typedef struct host_train_state {
    int epoch;              /* 1-based epoch in progress, or next to run */
    int64_t next_batch;     /* train batch of `epoch` to run next */
    int world;              /* ranks that trained it (next_batch counts per rank) */
    int64_t step;           /* optimizer steps taken */
    uint64_t seed;
    double base_lr;         /* --lr, or what a hook set */
    sc_schedule schedule;
    bool has_best;
    double best_metric;
    int best_epoch;
    /* Sums of the train phase of `epoch` up to next_batch. */
    double loss_sum;
    int64_t samples;
    double train_seconds;
    /* Not saved: set on --resume of a run that has nothing left to do (all
     * epochs trained and its test record written), for every rank. */
    bool finished;
} host_train_state;

/* Writes a checkpoint atomically (temporary file, fsync, rename); ema and
 * hooks may be NULL (no EMA or hook entries). */
sc_status host_checkpoint_save(const char *path, const sc_params *params, sc_optim *opt,
                             sc_ema *ema, const host_train_state *state, const sc_metrics *train_sums,
                             const char *config_text, const char *model_name,
                             const host_hook_blobs *hooks);

/* Restores parameters and, when opt/ema/state/train_sums/hooks are not
 * NULL, the rest (hooks: replaced by the file's hook entries; ema: refused
 * when the file has none). The file's model
 * name must equal model_name, every parameter must be present with the
 * same shape, and every trainer field once, in its range (a count below
 * 2^53, an epoch from 1, ...); errors name the file and the field. */
sc_status host_checkpoint_load(const char *path, sc_params *params, sc_optim *opt,
                             sc_ema *ema, host_train_state *state, sc_metrics *train_sums,
                             const char *model_name, host_hook_blobs *hooks);

/* The weights a network computes with, from a checkpoint: its parameters
 * and buffers, or with `ema` its EMA weights (swapped into the
 * parameters); never its optimizer. state, when not NULL, receives the
 * trainer's position (epoch and step). */
sc_status host_checkpoint_load_weights(const char *path, sc_params *params, bool ema,
                                       const char *model_name, host_train_state *state);

/* The configuration a checkpoint was trained with (its resolved
 * config.ini), read over the defaults into saved: refused, naming the
 * file, when it is missing, holds a NUL byte, does not parse, or names no
 * model or dataset plugin. */
sc_status host_checkpoint_saved_config(const char *path, host_config *saved);

#endif
