/* scorch/context.h — the per-step execution context.
 *
 * An sc_ctx carries what every op needs: the device it computes on, the step
 * arena that step tensors come from, the autograd tape, the grad and
 * training switches and the step's random stream (dropout).
 *
 * Ops report failure by returning NULL with a message (scorch/status.h), and
 * an op given a NULL input returns NULL at once, keeping the first message:
 * a forward pass can chain ops and check once at the end.
 *
 * The host drives the context: it ends each step, switches training mode
 * and sets the precision (scorch_host/context.h, not for plugins).
 *
 * Thread rule: a context belongs to one thread at a time.
 */
#ifndef SCORCH_CONTEXT_H
#define SCORCH_CONTEXT_H

#include <stdbool.h>
#include <stddef.h>

#include "scorch/export.h"
#include "scorch/rng.h"
#include "scorch/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sc_ctx sc_ctx;

/* A context computing on `device`; NULL with a message on failure. */
SC_API sc_ctx *sc_ctx_new(sc_device device);
SC_API void sc_ctx_free(sc_ctx *ctx);

SC_API sc_device sc_ctx_device(const sc_ctx *ctx);

/* Training mode (dropout active, batch norm uses batch statistics).
 * The host sets it per phase (scorch_host/context.h). */
SC_API bool sc_ctx_training(const sc_ctx *ctx);

/* Grad mode: when on, ops with an input that requires grad are taped.
 * Returns the previous setting. */
SC_API bool sc_ctx_set_grad_enabled(sc_ctx *ctx, bool enabled);
SC_API bool sc_ctx_grad_enabled(const sc_ctx *ctx);

/* Arithmetic precision of the GPU kernels (the CPU always computes in
 * fp32): fp32; tf32, letting cuBLAS and cuDNN round matrix-product inputs
 * to TensorFloat-32 on GPUs that have it; bf16, computing matrix products
 * and convolutions from bfloat16 copies of their inputs with fp32
 * accumulation, while tensors, parameters (the master weights), the loss
 * and every other op stay fp32. */
typedef enum sc_precision {
    SC_PRECISION_FP32,
    SC_PRECISION_TF32,
    SC_PRECISION_BF16,
} sc_precision;
/* The host sets it (scorch_host/context.h). */
SC_API sc_precision sc_ctx_precision(const sc_ctx *ctx);

/* The step's random stream; the host reseeds it from (seed, step). */
SC_API sc_rng *sc_ctx_rng(sc_ctx *ctx);

/* Layer scopes: a network's layers push their name ("block1.conv") around
 * their ops, so tools such as the model summary can group the tape by
 * layer. Scopes nest ("block1" then "conv" gives "block1.conv"); names are
 * copied. Cheap; push and pop must pair. */
SC_API void sc_ctx_push_scope(sc_ctx *ctx, const char *name);
SC_API void sc_ctx_pop_scope(sc_ctx *ctx);
SC_API const char *sc_ctx_scope(const sc_ctx *ctx); /* "" at top level */

/* 64-byte aligned scratch memory from the step arena, valid until the
 * host ends the step (sc_ctx_reset). */
SC_API void *sc_ctx_alloc(sc_ctx *ctx, size_t bytes);

/* Ops since the last reset that drew from the step's random stream
 * (dropout in training mode): a replayed CUDA graph would repeat them. */
SC_API int64_t sc_ctx_random_ops(const sc_ctx *ctx);

/* Changes whenever the memory that step tensor data comes from is
 * replaced (the arena grew, or merged its blocks at a reset). A captured
 * CUDA graph stays valid while this stays the same. */
SC_API uint64_t sc_ctx_data_generation(const sc_ctx *ctx);

/* Bytes handed out since the last reset, and the arena's high-water mark. */
SC_API size_t sc_ctx_arena_used(const sc_ctx *ctx);
SC_API size_t sc_ctx_arena_peak(const sc_ctx *ctx);

/* A step tensor on the context's device. Contents are uninitialised for
 * sc_tensor_new and zero for sc_tensor_zeros. NULL with a message on
 * failure. */
SC_API sc_tensor *sc_tensor_new(sc_ctx *ctx, sc_dtype dtype, int ndim,
                                const int64_t *shape);
SC_API sc_tensor *sc_tensor_zeros(sc_ctx *ctx, sc_dtype dtype, int ndim,
                                  const int64_t *shape);

/* Threads the CPU backend computes with (OpenMP loops and OpenBLAS), as
 * the host set them (scorch_host/context.h). */
SC_API int sc_cpu_threads(void);

#ifdef __cplusplus
}
#endif
#endif
