/* A hooks plugin for test_gpu_runs.c, on the emulated GPU: at train_begin
 * and train_end it prints which GPUs the process has a CUDA context on,
 * as the emulator counts them ("contexts at train_end on rank 0: 0x2",
 * bit N for cuda:N). */
#include <cuda_runtime.h>
#include <stdio.h>

#include "scorch/hooks.h"

static sc_status print_contexts(const sc_hook_context *ctx, const sc_hook_actions *actions)
{
    fprintf(stderr, "contexts at %s on rank %d: %#x\n", ctx->point, ctx->rank,
            cudaemu_context_mask());
    return SC_OK;
}

SC_PLUGIN_EXPORT const sc_hook_table scorch_hooks = {
    SC_ABI_HEADER(sc_hook_table),
    2,
    (const sc_hook[]){{"train_begin", "contexts_at_begin", print_contexts, 0},
                      {"train_end", "contexts_at_end", print_contexts, 0}},
};
