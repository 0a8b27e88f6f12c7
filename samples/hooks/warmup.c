/* warmup.c — a hooks plugin that warms the learning rate up linearly over
 * the first steps: step k (1-based) trains with lr * k / steps, then with
 * lr, the run's base learning rate (--lr). The built-in --warmup-steps
 * does the same; this shows how a hook steers the lr.
 *
 *   scorch-train ... --hooks warmup.so --hooks-args steps=500
 *
 * Its argument `steps` (--hooks-args) is 100 when not given. set_lr sets
 * the base lr from the step about to run, so batch_begin is the place to
 * set a step's own lr. The target lr is kept in the checkpoint: a resumed
 * run warms up towards the same one. Each warm-up step's lr is logged as
 * the scalar "warmup_lr", at that step.
 */
#include <stdio.h>

#include "scorch/scorch.h"

/* The lr at the end of the warm-up; 0 until known. Per training thread,
 * as replicas (--replicas) each run the hooks on their own. */
static _Thread_local double target;
static _Thread_local int64_t steps;

/* The keys --hooks-args may give; the host refuses any other. */
SC_PLUGIN_EXPORT const sc_hook_arg_keys scorch_hook_arg_keys = {
    SC_ABI_HEADER(sc_hook_arg_keys), (const char *const[]){"steps", NULL}};

static sc_status on_train_begin(const sc_hook_context *ctx, const sc_hook_actions *actions)
{
    SC_TRY(sc_args_int(ctx->args, "steps", 100, &steps));
    if (steps < 1)
        return sc_error_set(SC_ERR_INVALID, "steps %lld: expected 1 or more", (long long)steps);
    if (target == 0) /* a fresh run: not restored by checkpoint_load */
        target = ctx->lr;
    return SC_OK;
}

static sc_status on_batch_begin(const sc_hook_context *ctx, const sc_hook_actions *actions)
{
    if (ctx->phase != SC_SPLIT_TRAIN)
        return SC_OK;
    if (ctx->step >= steps) /* warm: the last warm-up step set the target */
        return SC_OK;
    double lr = target * (double)(ctx->step + 1) / (double)steps;
    actions->set_lr(actions->host, lr);
    actions->log_scalar(actions->host, "warmup_lr", lr);
    return SC_OK;
}

static sc_status save(const sc_hook_context *ctx, const sc_hook_actions *actions)
{
    char text[32];
    int n = snprintf(text, sizeof text, "%.17g", target);
    return actions->save_blob(actions->host, text, (size_t)n);
}

static sc_status load(const sc_hook_context *ctx, const sc_hook_actions *actions)
{
    char text[32];
    if (!ctx->blob)
        return SC_OK;
    snprintf(text, sizeof text, "%.*s", (int)ctx->blob_size, (const char *)ctx->blob);
    if (sscanf(text, "%lf", &target) != 1 || target <= 0)
        return sc_error_set(SC_ERR_FORMAT, "saved target lr '%s' does not read back", text);
    return SC_OK;
}

SC_PLUGIN_EXPORT const sc_hook_table scorch_hooks = {
    SC_ABI_HEADER(sc_hook_table), 4, (const sc_hook[]){
        {"train_begin", "warmup_target", on_train_begin, 0},
        {"batch_begin", "warmup", on_batch_begin, 0},
        {"checkpoint_save", "warmup_state", save, 0},
        {"checkpoint_load", "warmup_state", load, 0},
    }};
