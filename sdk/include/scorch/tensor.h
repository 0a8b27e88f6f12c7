/* scorch/tensor.h — dense, contiguous, row-major tensors.
 *
 * A tensor is a shape, a dtype, a device and a pointer to its data. Tensors
 * never own their storage individually: their memory has one of three
 * lifetimes (see docs/architecture.md):
 *   - parameters and their gradients live in the flat buffers of an
 *     sc_params store (scorch/params.h);
 *   - step tensors (activations, intermediate gradients) come from the step
 *     arena of an sc_ctx (scorch/context.h) and vanish at sc_ctx_reset();
 *   - host-side buffers (batches, checkpoint staging) are made with
 *     sc_tensor_alloc() and released with sc_tensor_free().
 * Tensors are always contiguous; sc_reshape() makes views that share data.
 * The struct holds no autograd state (that lives on the context's tape),
 * so a tensor a plugin fills itself (sc_tensor_init) is as good an op
 * input as one libscorch made.
 */
#ifndef SCORCH_TENSOR_H
#define SCORCH_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "scorch/export.h"
#include "scorch/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SC_MAX_DIMS 6

typedef enum sc_dtype {
    SC_F32 = 0,
    SC_I32 = 1,
    SC_I64 = 2,
    SC_U8 = 3,
    SC_DTYPE_COUNT
} sc_dtype;

typedef enum sc_device_kind {
    SC_DEVICE_CPU = 0,
    SC_DEVICE_CUDA = 1,
    SC_DEVICE_KIND_COUNT
} sc_device_kind;

typedef struct sc_device {
    sc_device_kind kind;
    int index;
} sc_device;

enum sc_tensor_flags {
    SC_TENSOR_REQUIRES_GRAD = 1u << 0, /* backward computes its gradient */
    SC_TENSOR_PARAM = 1u << 1,         /* lives in an sc_params store */
    SC_TENSOR_BUFFER = 1u << 2,        /* a store's non-trainable state (running stats) */
    SC_TENSOR_PINNED = 1u << 3,        /* host data in page-locked memory */
    /* An op's output whose gradient backward keeps: others' go to the
     * gradients that come after (PyTorch's retain_grad()). */
    SC_TENSOR_RETAIN_GRAD = 1u << 4,
};

typedef struct sc_tensor sc_tensor;

struct sc_tensor {
    sc_dtype dtype;
    int ndim;
    int64_t shape[SC_MAX_DIMS];
    int64_t numel;
    void *data;
    sc_device device;
    uint32_t flags;
    sc_tensor *grad;  /* same shape, F32; NULL until backward reaches it, and
                       * for an op's output again once backward has run the
                       * op, unless SC_TENSOR_RETAIN_GRAD */
    const char *name; /* parameters only */
};

SC_API size_t sc_dtype_size(sc_dtype dtype);
SC_API const char *sc_dtype_name(sc_dtype dtype);

/* Fills t's dtype/shape/numel (data, device and flags are left zero).
 * Fails on a negative dimension, ndim outside 0..SC_MAX_DIMS, or a shape
 * too large for int64_t: the product of its nonzero dimensions, times the
 * dtype's size, must fit (so no element, byte or row count overflows, even
 * of a tensor that a zero dimension makes empty). */
SC_API sc_status sc_tensor_init(sc_tensor *t, sc_dtype dtype, int ndim,
                                const int64_t *shape);

/* A host (CPU) tensor with zeroed storage that the caller owns; NULL with a
 * message on failure. Free with sc_tensor_free. */
SC_API sc_tensor *sc_tensor_alloc(sc_dtype dtype, int ndim, const int64_t *shape);
SC_API void sc_tensor_free(sc_tensor *t);

SC_API size_t sc_tensor_nbytes(const sc_tensor *t);

/* a * b into *product; false, leaving *product alone, when the product
 * does not fit int64_t. For counts computed from sizes that come from
 * files, plugins or the command line (shapes, batch sizes). */
SC_API bool sc_mul_i64(int64_t a, int64_t b, int64_t *product);
SC_API bool sc_tensor_same_shape(const sc_tensor *a, const sc_tensor *b);

/* The data as float (only for SC_F32 tensors). */
static inline float *sc_tensor_f32(const sc_tensor *t) { return (float *)t->data; }

/* "[128, 784]" into buf; returns buf. */
SC_API char *sc_shape_str(int ndim, const int64_t *shape, char *buf, size_t size);

/* Reads element i of an integer tensor (I32, I64 or U8) as int64. */
SC_API int64_t sc_tensor_get_int(const sc_tensor *t, int64_t i);

#ifdef __cplusplus
}
#endif
#endif
