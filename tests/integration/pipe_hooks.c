/* A hooks plugin that reads each train batch's loss twice: at
 * after_backward, which the trainer reads from the step's own loss, and at
 * batch_end, which sees the step's results as the GPU step pipeline folded
 * them (host/run/step_pipe.h). Both log it, as fixture/after_backward and
 * fixture/batch_end, so a test can pair them up in metrics.jsonl. */
#include "scorch/hooks.h"

static sc_status log_after_backward(const sc_hook_context *ctx, const sc_hook_actions *a)
{
    a->log_scalar(a->host, "fixture/after_backward", ctx->loss);
    return SC_OK;
}

static sc_status log_batch_end(const sc_hook_context *ctx, const sc_hook_actions *a)
{
    if (ctx->phase == SC_SPLIT_TRAIN)
        a->log_scalar(a->host, "fixture/batch_end", ctx->loss);
    return SC_OK;
}

SC_PLUGIN_EXPORT const sc_hook_table scorch_hooks = {
    SC_ABI_HEADER(sc_hook_table), 2,
    (const sc_hook[]){{"after_backward", "log_after_backward", log_after_backward, 0},
                      {"batch_end", "log_batch_end", log_batch_end, 0}}};
