/* context_impl.h — the layout of sc_ctx. Private to libscorch. */
#ifndef SCORCH_CONTEXT_IMPL_H
#define SCORCH_CONTEXT_IMPL_H

#include "arena.h"
#include "op.h"
#include "scorch/context.h"

struct sc_ctx {
    sc_device device;
    sc_arena arena;
    sc_node *tape_tail; /* last taped node; walk ->prev for earlier ones */
    int64_t tape_len;
    bool training;
    bool grad_enabled;
    sc_rng rng;
};

#endif
