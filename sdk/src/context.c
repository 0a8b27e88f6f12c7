#include "context_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

sc_ctx *sc_ctx_new(sc_device device)
{
    if (device.kind != SC_DEVICE_CPU) {
        sc_error_set(SC_ERR_UNSUPPORTED, "device %s:%d is not built into this libscorch",
                     sc_device_kind_name(device.kind), device.index);
        return NULL;
    }
    sc_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        sc_error_set(SC_ERR_NOMEM, "out of memory for a context");
        return NULL;
    }
    ctx->device = device;
    sc_arena_init(&ctx->arena);
    ctx->training = true;
    ctx->grad_enabled = true;
    sc_rng_init(&ctx->rng, 0, 0);
    return ctx;
}

void sc_ctx_free(sc_ctx *ctx)
{
    if (!ctx)
        return;
    sc_arena_release(&ctx->arena);
    free(ctx);
}

sc_device sc_ctx_device(const sc_ctx *ctx) { return ctx->device; }

void sc_ctx_set_training(sc_ctx *ctx, bool training) { ctx->training = training; }

bool sc_ctx_training(const sc_ctx *ctx) { return ctx->training; }

bool sc_ctx_set_grad_enabled(sc_ctx *ctx, bool enabled)
{
    bool old = ctx->grad_enabled;
    ctx->grad_enabled = enabled;
    return old;
}

bool sc_ctx_grad_enabled(const sc_ctx *ctx) { return ctx->grad_enabled; }

sc_rng *sc_ctx_rng(sc_ctx *ctx) { return &ctx->rng; }

void sc_ctx_push_scope(sc_ctx *ctx, const char *name)
{
    int depth = ctx->scope_depth++;
    if (depth >= SC_SCOPE_DEPTH)
        return; /* deeper scopes fold into the deepest kept one */
    int len = (int)strlen(ctx->scope);
    ctx->scope_len[depth] = len;
    snprintf(ctx->scope + len, sizeof ctx->scope - (size_t)len, "%s%s", len ? "." : "", name);
    ctx->scope_copy = NULL;
}

void sc_ctx_pop_scope(sc_ctx *ctx)
{
    if (ctx->scope_depth == 0)
        return;
    int depth = --ctx->scope_depth;
    if (depth < SC_SCOPE_DEPTH)
        ctx->scope[ctx->scope_len[depth]] = '\0';
    ctx->scope_copy = NULL;
}

const char *sc_ctx_scope(const sc_ctx *ctx) { return ctx->scope; }

const char *sc_ctx_scope_interned(sc_ctx *ctx)
{
    if (!ctx->scope[0])
        return "";
    if (!ctx->scope_copy) {
        size_t n = strlen(ctx->scope) + 1;
        char *copy = sc_arena_alloc(&ctx->arena, n);
        if (!copy)
            return "";
        memcpy(copy, ctx->scope, n);
        ctx->scope_copy = copy;
    }
    return ctx->scope_copy;
}

void sc_ctx_forget_tape(sc_ctx *ctx)
{
    ctx->tape_tail = NULL;
    ctx->tape_len = 0;
    ctx->tape_id++;
}

void sc_ctx_reset(sc_ctx *ctx)
{
    sc_ctx_forget_tape(ctx);
    ctx->scope_copy = NULL;
    sc_arena_reset(&ctx->arena);
}

void *sc_ctx_alloc(sc_ctx *ctx, size_t bytes)
{
    void *p = sc_arena_alloc(&ctx->arena, bytes);
    if (!p)
        sc_error_set(SC_ERR_NOMEM, "step arena: out of memory for %zu bytes "
                     "(%zu in use)", bytes, ctx->arena.used);
    return p;
}

size_t sc_ctx_arena_used(const sc_ctx *ctx) { return ctx->arena.used; }

size_t sc_ctx_arena_peak(const sc_ctx *ctx) { return ctx->arena.peak; }

sc_tensor *sc_tensor_new(sc_ctx *ctx, sc_dtype dtype, int ndim,
                         const int64_t *shape)
{
    sc_tensor *t = sc_ctx_alloc(ctx, sizeof *t);
    if (!t || sc_tensor_init(t, dtype, ndim, shape) != SC_OK)
        return NULL;
    t->device = ctx->device;
    t->data = sc_ctx_alloc(ctx, sc_tensor_nbytes(t));
    return t->data ? t : NULL;
}

sc_tensor *sc_tensor_zeros(sc_ctx *ctx, sc_dtype dtype, int ndim,
                           const int64_t *shape)
{
    sc_tensor *t = sc_tensor_new(ctx, dtype, ndim, shape);
    if (t)
        memset(t->data, 0, sc_tensor_nbytes(t));
    return t;
}
