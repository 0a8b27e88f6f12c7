/* A hooks plugin for the resume tests: logs the scalar fixture/step at the
 * end of every train batch (one metrics.jsonl record per step), and at the
 * step given by SCORCH_TEST_SIGINT_AT_STEP raises SIGINT, as Ctrl-C would
 * there, but deterministically. */
#include <signal.h>
#include <stdlib.h>

#include "scorch/hooks.h"

static sc_status log_step(const sc_hook_context *ctx, const sc_hook_actions *actions)
{
    if (ctx->phase != SC_SPLIT_TRAIN || ctx->extra)
        return SC_OK;
    actions->log_scalar(actions->host, "fixture/step", (double)ctx->step);
    const char *at = getenv("SCORCH_TEST_SIGINT_AT_STEP");
    if (at && ctx->step == atoll(at))
        raise(SIGINT);
    return SC_OK;
}

SC_PLUGIN_EXPORT const sc_hook_table scorch_hooks = {
    SC_ABI_HEADER(sc_hook_table),
    1,
    (const sc_hook[]){{"batch_end", "log_step", log_step, 0}},
};
