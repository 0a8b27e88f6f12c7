/* early_stopping.c — a hooks plugin that ends training when the validation
 * loss stops improving, and keeps its count in the run's checkpoints so
 * that a resumed run stops exactly where an unbroken one would.
 *
 *   scorch-train --model mlp.so --dataset synthetic.so \
 *       --hooks early_stopping.so --hooks-args patience=5,min_delta=0.001
 *
 * Its arguments (--hooks-args, read at train_begin):
 *   patience   epochs without improvement before it stops (3)
 *   min_delta  the least decrease that counts (0)
 *
 * It watches phase_end of the epoch's own valid pass, not epoch_end: the
 * epoch's checkpoint is written between the two (built-in steps first), so
 * only what a hook does by phase_end reaches that checkpoint. Stopping goes
 * through request_stop: after the current epoch's checkpoint, the test pass
 * and train_end run, and the process exits 0. See docs/hooks.md.
 */
#include <stdio.h>

#include "scorch/scorch.h"

typedef struct watch {
    int have_best;
    double best;    /* the lowest valid loss so far */
    int bad_epochs; /* epochs since it was reached */
} watch;

/* Per training thread: each replica (--replicas) keeps its own, as each
 * MPI rank does in its process. */
static _Thread_local watch w;
static _Thread_local int64_t patience;
static _Thread_local double min_delta;

/* The keys --hooks-args may give; the host refuses any other. */
SC_PLUGIN_EXPORT const sc_hook_arg_keys scorch_hook_arg_keys = {
    SC_ABI_HEADER(sc_hook_arg_keys), (const char *const[]){"patience", "min_delta", NULL}};

/* Reads and checks the arguments once, before the first epoch. */
static sc_status on_train_begin(const sc_hook_context *ctx, const sc_hook_actions *actions)
{
    SC_TRY(sc_args_int(ctx->args, "patience", 3, &patience));
    SC_TRY(sc_args_float(ctx->args, "min_delta", 0, &min_delta));
    if (patience < 1)
        return sc_error_set(SC_ERR_INVALID, "patience %lld: expected 1 or more",
                            (long long)patience);
    if (!(min_delta >= 0))
        return sc_error_set(SC_ERR_INVALID, "min_delta %g: expected 0 or more", min_delta);
    return SC_OK;
}

static sc_status on_valid_end(const sc_hook_context *ctx, const sc_hook_actions *actions)
{
    if (ctx->phase != SC_SPLIT_VALID || ctx->extra)
        return SC_OK;
    if (!w.have_best || ctx->loss < w.best - min_delta) {
        w = (watch){1, ctx->loss, 0};
    } else {
        w.bad_epochs++;
    }
    actions->log_scalar(actions->host, "early_stopping_bad_epochs", w.bad_epochs);
    if (w.bad_epochs >= patience) {
        char reason[128];
        snprintf(reason, sizeof reason, "valid loss has not improved on %g for %d epochs",
                 w.best, w.bad_epochs);
        actions->request_stop(actions->host, reason);
    }
    return SC_OK;
}

/* The state travels as text: readable, and safe across compilers. */
static sc_status save(const sc_hook_context *ctx, const sc_hook_actions *actions)
{
    char text[96];
    int n = snprintf(text, sizeof text, "%d %.17g %d", w.have_best, w.best, w.bad_epochs);
    return actions->save_blob(actions->host, text, (size_t)n);
}

static sc_status load(const sc_hook_context *ctx, const sc_hook_actions *actions)
{
    char text[96];
    if (!ctx->blob) /* a checkpoint from a run without this hook: start afresh */
        return SC_OK;
    if (ctx->blob_size >= sizeof text)
        return sc_error_set(SC_ERR_FORMAT, "saved state of %zu bytes is too long",
                            ctx->blob_size);
    snprintf(text, sizeof text, "%.*s", (int)ctx->blob_size, (const char *)ctx->blob);
    if (sscanf(text, "%d %lf %d", &w.have_best, &w.best, &w.bad_epochs) != 3)
        return sc_error_set(SC_ERR_FORMAT, "saved state '%s' does not read back", text);
    return SC_OK;
}

SC_PLUGIN_EXPORT const sc_hook_table scorch_hooks = {
    SC_ABI_HEADER(sc_hook_table), 4, (const sc_hook[]){
        {"train_begin", "early_stopping_args", on_train_begin, 0},
        {"phase_end", "early_stopping", on_valid_end, 0},
        /* One name for the pair: what save stores, load gets back. */
        {"checkpoint_save", "early_stopping_state", save, 0},
        {"checkpoint_load", "early_stopping_state", load, 0},
    }};
