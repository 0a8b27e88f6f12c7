/* A hooks plugin for the resume tests: requests a stop at the end of the
 * optimizer step given by SCORCH_TEST_STOP_AT_STEP, as a kill would, but
 * deterministically. */
#include <stdlib.h>

#include "scorch/hooks.h"

static sc_status stop_at_step(const sc_hook_context *ctx, const sc_hook_actions *actions)
{
    const char *at = getenv("SCORCH_TEST_STOP_AT_STEP");
    if (at && ctx->step == atoll(at))
        actions->request_stop(actions->host, "test stop");
    return SC_OK;
}

SC_PLUGIN_EXPORT const sc_hook_table scorch_hooks = {
    SC_ABI_HEADER(sc_hook_table),
    1,
    (const sc_hook[]){{"batch_end", "stop_at_step", stop_at_step, 0}},
};
