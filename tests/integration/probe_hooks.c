/* A hooks plugin that takes arguments (--hooks-args), for the tests of
 * hook arguments, of the step a hook's scalar is recorded at, and of
 * `scorch-ctl status` between epochs:
 *
 *   log=true      logs "probe_ab_loss" and "probe_ab_step" (the context's
 *                 loss and step) at after_backward, and "probe_be_loss" at
 *                 each train batch_end: a step's scalars from both points
 *                 belong at that step.
 *   gate_epoch=E  epoch_end of epoch E waits until the user function
 *                 probe_open_gate runs (probe_gate_state tells when it
 *                 waits): a request sent meanwhile is served between
 *                 epochs.
 */

#include "scorch/scorch.h"

#include "gate.h"

static int64_t gate_epoch;
static bool log_steps;

SC_PLUGIN_EXPORT const sc_hook_arg_keys scorch_hook_arg_keys = {
    SC_ABI_HEADER(sc_hook_arg_keys), (const char *const[]){"gate_epoch", "log", NULL}};

static sc_status read_args(const sc_hook_context *ctx, const sc_hook_actions *actions)
{
    SC_TRY(sc_args_int(ctx->args, "gate_epoch", 0, &gate_epoch));
    return sc_args_bool(ctx->args, "log", false, &log_steps);
}

static sc_status after_backward(const sc_hook_context *ctx, const sc_hook_actions *actions)
{
    if (log_steps) {
        actions->log_scalar(actions->host, "probe_ab_loss", ctx->loss);
        actions->log_scalar(actions->host, "probe_ab_step", (double)ctx->step);
    }
    return SC_OK;
}

static sc_status batch_end(const sc_hook_context *ctx, const sc_hook_actions *actions)
{
    if (log_steps && ctx->phase == SC_SPLIT_TRAIN)
        actions->log_scalar(actions->host, "probe_be_loss", ctx->loss);
    return SC_OK;
}

static sc_status epoch_end(const sc_hook_context *ctx, const sc_hook_actions *actions)
{
    if (ctx->epoch != gate_epoch)
        return SC_OK;
    return gate_wait();
}

SC_PLUGIN_EXPORT const sc_hook_table scorch_hooks = {
    SC_ABI_HEADER(sc_hook_table), 4, (const sc_hook[]){
        {"train_begin", "probe_args", read_args, 0},
        {"after_backward", "probe_after_backward", after_backward, 0},
        {"batch_end", "probe_batch_end", batch_end, 0},
        {"epoch_end", "probe_epoch_end", epoch_end, 0},
    }};

/* ---- user functions: run on the control thread ---- */

SC_PLUGIN_EXPORT const sc_user_func_table scorch_user_funcs = {
    SC_ABI_HEADER(sc_user_func_table), 2, (const sc_user_func[]){
        {"probe_gate_state", "whether epoch_end waits at the gate", gate_state},
        {"probe_open_gate", "lets it go", open_gate},
    }};
