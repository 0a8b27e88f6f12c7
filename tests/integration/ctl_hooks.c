/* A hooks plugin for the live-control and hook tests; environment
 * variables switch its behaviours on (all off when unset):
 *
 *   CTL_GATE_AT_STEP=N     batch_begin of step N waits until the user
 *                          function open_gate runs (gate_state tells when
 *                          it waits): the tests' way to hold the training
 *                          thread at a known step without sleeping.
 *   CTL_LOG=1              logs "lr" at each train batch_end (the step's
 *                          lr), "grad_norm" and "n_grads" at after_backward,
 *                          and "<phase>_batches" / "extra_<phase>_batches"
 *                          (batch_end calls seen) at each phase_end.
 *   CTL_CHECKPOINT_AT_STEP=N, CTL_EVAL_AT_STEP=N
 *                          request a checkpoint / an extra valid pass at
 *                          the batch_end of step N.
 *   CTL_FAIL_AT_STEP=N     fails at the batch_end of step N.
 *
 * Its state (train batch_end calls so far) travels in checkpoints under
 * the pair "ctl_state"; checkpoint_load logs it as "restored_batches".
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "scorch/scorch.h"

#include "gate.h"

static long long train_batches;   /* train batch_end calls, saved in checkpoints */
static long long phase_batches;   /* batch_end calls in the pass in progress */

static long long env_step(const char *name)
{
    const char *text = getenv(name);
    return text && text[0] ? atoll(text) : -1;
}

static sc_status gate(const sc_hook_context *ctx, const sc_hook_actions *actions)
{
    if (ctx->phase != SC_SPLIT_TRAIN || ctx->step != env_step("CTL_GATE_AT_STEP"))
        return SC_OK;
    return gate_wait();
}

static void log_value(const sc_hook_actions *actions, const char *tag, double value)
{
    if (getenv("CTL_LOG"))
        actions->log_scalar(actions->host, tag, value);
}

static sc_status grads(const sc_hook_context *ctx, const sc_hook_actions *actions)
{
    double sum = 0;
    for (int i = 0; i < ctx->n_grads; i++)
        for (int64_t j = 0; j < ctx->grads[i].numel; j++)
            sum += (double)ctx->grads[i].grad[j] * ctx->grads[i].grad[j];
    log_value(actions, "grad_norm", sqrt(sum));
    log_value(actions, "n_grads", ctx->n_grads);
    return SC_OK;
}

static sc_status batch_end(const sc_hook_context *ctx, const sc_hook_actions *actions)
{
    phase_batches++;
    if (ctx->phase != SC_SPLIT_TRAIN)
        return SC_OK;
    train_batches++;
    log_value(actions, "lr", ctx->lr);
    if (ctx->step == env_step("CTL_CHECKPOINT_AT_STEP"))
        actions->request_checkpoint(actions->host, "test request");
    if (ctx->step == env_step("CTL_EVAL_AT_STEP"))
        actions->request_eval(actions->host, SC_SPLIT_VALID, "test request");
    if (ctx->step == env_step("CTL_FAIL_AT_STEP"))
        return sc_error_set(SC_ERR_STATE, "planned failure at step %lld", (long long)ctx->step);
    return SC_OK;
}

static sc_status phase_begin(const sc_hook_context *ctx, const sc_hook_actions *actions)
{
    phase_batches = 0;
    return SC_OK;
}

static sc_status phase_end(const sc_hook_context *ctx, const sc_hook_actions *actions)
{
    char tag[64];
    snprintf(tag, sizeof tag, "%s%s_batches", ctx->extra ? "extra_" : "",
             sc_split_name(ctx->phase));
    log_value(actions, tag, (double)phase_batches);
    return SC_OK;
}

static sc_status save(const sc_hook_context *ctx, const sc_hook_actions *actions)
{
    char text[32];
    int n = snprintf(text, sizeof text, "%lld", train_batches);
    return actions->save_blob(actions->host, text, (size_t)n);
}

static sc_status load(const sc_hook_context *ctx, const sc_hook_actions *actions)
{
    char text[32];
    if (!ctx->blob) /* a checkpoint from a run without this plugin */
        return SC_OK;
    if (ctx->blob_size >= sizeof text)
        return sc_error_set(SC_ERR_FORMAT, "saved state of %zu bytes is too long",
                            ctx->blob_size);
    snprintf(text, sizeof text, "%.*s", (int)ctx->blob_size, (const char *)ctx->blob);
    train_batches = atoll(text);
    actions->log_scalar(actions->host, "restored_batches", (double)train_batches);
    return SC_OK;
}

SC_PLUGIN_EXPORT const sc_hook_table scorch_hooks = {
    SC_ABI_HEADER(sc_hook_table), 7, (const sc_hook[]){
        {"batch_begin", "gate", gate, 0},
        {"after_backward", "grads", grads, 0},
        {"batch_end", "ctl_batch_end", batch_end, 0},
        {"phase_begin", "ctl_phase_begin", phase_begin, 0},
        {"phase_end", "ctl_phase_end", phase_end, 0},
        {"checkpoint_save", "ctl_state", save, 0},
        {"checkpoint_load", "ctl_state", load, 0},
    }};

/* ---- user functions: run on the control thread ---- */

static sc_status greet(const sc_args *args, char *out, size_t size)
{
    static const char *const known[] = {"name", NULL};
    SC_TRY(sc_args_check_known(args, known));
    const char *name = sc_args_get(args, "name");
    snprintf(out, size, "hello, %s", name ? name : "nobody");
    return SC_OK;
}

SC_PLUGIN_EXPORT const sc_user_func_table scorch_user_funcs = {
    SC_ABI_HEADER(sc_user_func_table), 3, (const sc_user_func[]){
        {"gate_state", "whether a train step waits at the gate", gate_state},
        {"open_gate", "lets it go", open_gate},
        {"greet", "hello, name", greet},
    }};
