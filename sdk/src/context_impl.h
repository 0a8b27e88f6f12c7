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
    uint64_t tape_id;   /* changes whenever the tape is forgotten */
    bool training;
    bool grad_enabled;
    sc_rng rng;
};

/* Starts a new, empty tape (after backward consumed it, or at reset). */
void sc_ctx_forget_tape(sc_ctx *ctx);

#endif
