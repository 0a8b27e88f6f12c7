/* A hooks plugin for the data-parallel tests: at batch_end once
 * SCORCH_TEST_FAULT_STEP optimizer steps are done, the rank named by
 * SCORCH_TEST_FAULT_RANK (read from the hook context) fails, the others
 * go on. SCORCH_TEST_FAULT=kill kills that process, =lr sets its lr alone
 * (its parameters drift from the others'), =save asks for a checkpoint on
 * that rank alone, =sigusr1 and =sigint raise that signal on that rank
 * alone (its thread, for replicas); anything else makes the hook return
 * an error. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "scorch/hooks.h"

static sc_status fault(const sc_hook_context *ctx, const sc_hook_actions *actions)
{
    const char *rank = getenv("SCORCH_TEST_FAULT_RANK"), *step = getenv("SCORCH_TEST_FAULT_STEP");
    const char *how = getenv("SCORCH_TEST_FAULT");
    if (!rank || !step || ctx->rank != atoi(rank) || ctx->step != atoll(step))
        return SC_OK;
    if (how && strcmp(how, "kill") == 0)
        raise(SIGKILL);
    if (how && strcmp(how, "hang") == 0)
        sleep(600);
    if (how && strcmp(how, "lr") == 0) {
        actions->set_lr(actions->host, 0.5);
        return SC_OK;
    }
    if (how && (strcmp(how, "sigusr1") == 0 || strcmp(how, "sigint") == 0)) {
        raise(strcmp(how, "sigint") == 0 ? SIGINT : SIGUSR1);
        return SC_OK;
    }
    if (how && strcmp(how, "save") == 0) {
        actions->request_checkpoint(actions->host, "test");
        return SC_OK;
    }
    return sc_error_set(SC_ERR_PLUGIN, "injected fault on rank %d at step %lld", ctx->rank,
                        (long long)ctx->step);
}

SC_PLUGIN_EXPORT const sc_hook_table scorch_hooks = {
    SC_ABI_HEADER(sc_hook_table),
    1,
    (const sc_hook[]){{"batch_end", "rank_fault", fault, 0}},
};
