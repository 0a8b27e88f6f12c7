#include "context_impl.h"
#include "cuda_api.h"
#include "device_impl.h"
#include "host_only.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

sc_ctx *sc_ctx_new(sc_device device)
{
    if (sc_device_check(device) != SC_OK)
        return NULL;
    sc_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        sc_error_set(SC_ERR_NOMEM, "out of memory for a context");
        return NULL;
    }
    ctx->device = device;
    sc_arena_init(&ctx->arena, (sc_device){SC_DEVICE_CPU, 0});
    sc_arena_init(&ctx->gpu_arena, device);
    sc_arena_init(&ctx->scratch, (sc_device){SC_DEVICE_CPU, 0});
    ctx->training = true;
    ctx->grad_enabled = true;
    sc_rng_init(&ctx->rng, 0, 0);
    if (device.kind == SC_DEVICE_CUDA && sc_cuda_ctx_attach(ctx, device.index) != SC_OK) {
        free(ctx);
        return NULL;
    }
    return ctx;
}

void sc_ctx_free(sc_ctx *ctx)
{
    if (!ctx)
        return;
    if (ctx->cuda) /* kernels may still use the arena */
        sc_cuda_synchronize(ctx->device.index);
    sc_arena_release(&ctx->arena);
    sc_arena_release(&ctx->gpu_arena);
    sc_arena_release(&ctx->scratch);
    free(ctx);
}

void sc_ctx_set_precision(sc_ctx *ctx, sc_precision precision)
{
    if (sc_host_only(__func__) == SC_OK)
        ctx->precision = precision;
}

sc_precision sc_ctx_precision(const sc_ctx *ctx) { return ctx->precision; }

sc_status sc_precision_parse(const char *name, sc_precision *out)
{
    static const char *const names[] = {
        [SC_PRECISION_FP32] = "fp32", [SC_PRECISION_TF32] = "tf32", [SC_PRECISION_BF16] = "bf16"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strcmp(name, names[i]) == 0) {
            *out = (sc_precision)i;
            return SC_OK;
        }
    return sc_error_set(SC_ERR_INVALID, "unknown precision '%s' (known: fp32, tf32, bf16)", name);
}

sc_device sc_ctx_device(const sc_ctx *ctx) { return ctx->device; }

void sc_ctx_set_training(sc_ctx *ctx, bool training)
{
    if (sc_host_only(__func__) == SC_OK)
        ctx->training = training;
}

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
}

sc_node *sc_ctx_tape_node(const sc_ctx *ctx, const sc_tensor *t)
{
    sc_node *node = ctx->tape_tail;
    while (node && node->out != t)
        node = node->prev;
    return node;
}

void sc_ctx_reset(sc_ctx *ctx)
{
    if (sc_host_only(__func__) != SC_OK)
        return;
    sc_ctx_forget_tape(ctx);
    ctx->scope_copy = NULL;
    ctx->random_ops = 0;
    sc_arena_reset(&ctx->arena);
    sc_arena_reset(&ctx->gpu_arena);
    sc_arena_reset(&ctx->scratch);
}

int64_t sc_ctx_random_ops(const sc_ctx *ctx) { return ctx->random_ops; }

uint64_t sc_ctx_data_generation(const sc_ctx *ctx)
{
    return ctx->cuda ? ctx->gpu_arena.generation : ctx->arena.generation;
}

void *sc_ctx_alloc(sc_ctx *ctx, size_t bytes)
{
    void *p = sc_arena_alloc(&ctx->arena, bytes);
    if (!p)
        sc_error_set(SC_ERR_NOMEM, "step arena: out of memory for %zu bytes "
                     "(%zu in use)", bytes, ctx->arena.used);
    return p;
}

void *sc_ctx_scratch(sc_ctx *ctx, size_t bytes)
{
    void *p = sc_arena_alloc(&ctx->scratch, bytes);
    if (!p)
        sc_error_set(SC_ERR_NOMEM, "kernel scratch: out of memory for %zu bytes (%zu in use)",
                     bytes, ctx->scratch.used);
    return p;
}

void sc_ctx_scratch_done(sc_ctx *ctx) { sc_arena_reset(&ctx->scratch); }

sc_arena *sc_ctx_data_arena(sc_ctx *ctx) { return ctx->cuda ? &ctx->gpu_arena : &ctx->arena; }

void *sc_ctx_alloc_data(sc_ctx *ctx, size_t bytes)
{
    if (!ctx->cuda)
        return sc_ctx_alloc(ctx, bytes);
    void *p = sc_arena_alloc(&ctx->gpu_arena, bytes);
    if (!p)
        sc_error_wrap(SC_ERR_NOMEM, "step arena on cuda:%d: %zu bytes (%zu in use)",
                      ctx->device.index, bytes, ctx->gpu_arena.used);
    return p;
}

/* On a GPU the arena figures are the GPU arena's: that is where the
 * activations are. */
size_t sc_ctx_arena_used(const sc_ctx *ctx)
{
    return ctx->cuda ? ctx->gpu_arena.used : ctx->arena.used;
}

size_t sc_ctx_arena_peak(const sc_ctx *ctx)
{
    return ctx->cuda ? ctx->gpu_arena.peak : ctx->arena.peak;
}

sc_tensor *sc_tensor_shaped(sc_ctx *ctx, sc_dtype dtype, int ndim, const int64_t *shape,
                            sc_device device)
{
    sc_tensor *t = sc_ctx_alloc(ctx, sizeof *t);
    if (!t || sc_tensor_init(t, dtype, ndim, shape) != SC_OK)
        return NULL;
    t->device = device;
    return t;
}

sc_tensor *sc_tensor_new(sc_ctx *ctx, sc_dtype dtype, int ndim,
                         const int64_t *shape)
{
    sc_tensor *t = sc_tensor_shaped(ctx, dtype, ndim, shape, ctx->device);
    if (!t)
        return NULL;
    t->data = sc_ctx_alloc_data(ctx, sc_tensor_nbytes(t));
    return t->data ? t : NULL;
}

sc_tensor *sc_tensor_zeros(sc_ctx *ctx, sc_dtype dtype, int ndim,
                           const int64_t *shape)
{
    sc_tensor *t = sc_tensor_new(ctx, dtype, ndim, shape);
    if (t && sc_device_zero(t->device, t->data, sc_tensor_nbytes(t)) != SC_OK)
        return NULL;
    return t;
}
