/* context_impl.h — the layout of sc_ctx. Private to libscorch. */
#ifndef SCORCH_CONTEXT_IMPL_H
#define SCORCH_CONTEXT_IMPL_H

#include "arena.h"
#include "op.h"
#include "scorch_host/context.h"

enum { SC_SCOPE_MAX = 256, SC_SCOPE_DEPTH = 32 };

struct sc_ctx {
    sc_device device;
    sc_arena arena;       /* host: nodes, tensor structs, scratch, host copies */
    sc_arena gpu_arena;   /* a GPU context's tensor data */
    sc_arena scratch;     /* host: a CPU kernel's scratch (sc_ctx_scratch) */
    struct sc_cuda_dev *cuda; /* a GPU context's device state, else NULL */
    sc_precision precision;
    sc_node *tape_tail; /* last taped node; walk ->prev for earlier ones */
    int64_t tape_len;
    char scope[SC_SCOPE_MAX];     /* "block1.conv" */
    int scope_len[SC_SCOPE_DEPTH]; /* scope's length before each push */
    int scope_depth;
    const char *scope_copy;       /* scope interned in the arena, or NULL */
    bool training;
    bool grad_enabled;
    int64_t random_ops; /* ops since reset that drew from rng */
    sc_rng rng;
};

/* Tensor data on the context's device: from the GPU arena on a GPU, from
 * the host arena on the CPU. NULL with a message when out of memory. */
void *sc_ctx_alloc_data(sc_ctx *ctx, size_t bytes);

/* A tensor struct from ctx's arena with dtype, shape and device set, its
 * data still NULL; NULL with a message when out of memory or misshapen. */
sc_tensor *sc_tensor_shaped(sc_ctx *ctx, sc_dtype dtype, int ndim, const int64_t *shape,
                            sc_device device);

/* Frees what the kernel that just returned took with sc_ctx_scratch
 * (op.h): the op dispatch and backward call it after every kernel. */
void sc_ctx_scratch_done(sc_ctx *ctx);

/* The arena sc_ctx_alloc_data draws from. */
sc_arena *sc_ctx_data_arena(sc_ctx *ctx);

/* The current scope as an arena string shared by the nodes made in it. */
const char *sc_ctx_scope_interned(sc_ctx *ctx);

/* Starts a new, empty tape (after backward consumed it, or at reset). */
void sc_ctx_forget_tape(sc_ctx *ctx);

/* The node of ctx's tape whose output is t, or NULL: t was not made by a
 * taped op, or its tape is gone. From the tail back, so the last op's
 * output (a loss) is found at once. */
sc_node *sc_ctx_tape_node(const sc_ctx *ctx, const sc_tensor *t);

#endif
