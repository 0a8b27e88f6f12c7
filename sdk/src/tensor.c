#include "scorch/tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_api.h"

size_t sc_dtype_size(sc_dtype dtype)
{
    switch (dtype) {
    case SC_F32: return 4;
    case SC_I32: return 4;
    case SC_I64: return 8;
    case SC_U8: return 1;
    default: return 0;
    }
}

const char *sc_dtype_name(sc_dtype dtype)
{
    switch (dtype) {
    case SC_F32: return "f32";
    case SC_I32: return "i32";
    case SC_I64: return "i64";
    case SC_U8: return "u8";
    default: return "?";
    }
}

bool sc_mul_i64(int64_t a, int64_t b, int64_t *product)
{
    int64_t p;
    if (__builtin_mul_overflow(a, b, &p))
        return false;
    *product = p;
    return true;
}

/* The element count of a valid shape; refused when the product of its
 * nonzero dimensions, in bytes of dtype, overflows int64_t (a zero
 * dimension empties the tensor but leaves the other sizes in use). */
static sc_status shape_numel(sc_dtype dtype, int ndim, const int64_t *shape, int64_t *numel)
{
    int64_t nonzero = 1, bytes;
    bool empty = false, fits = true;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0)
            return sc_error_set(SC_ERR_INVALID, "negative dimension %lld at axis %d",
                                (long long)shape[d], d);
        if (shape[d] == 0)
            empty = true;
        else
            fits = fits && sc_mul_i64(nonzero, shape[d], &nonzero);
    }
    char text[SC_MAX_DIMS * 24 + 4];
    if (!fits || !sc_mul_i64(nonzero, (int64_t)sc_dtype_size(dtype), &bytes))
        return sc_error_set(SC_ERR_INVALID, "a %s tensor of shape %s is too large: its size "
                            "overflows 64 bits", sc_dtype_name(dtype),
                            sc_shape_str(ndim, shape, text, sizeof text));
    *numel = empty ? 0 : nonzero;
    return SC_OK;
}

sc_status sc_tensor_init(sc_tensor *t, sc_dtype dtype, int ndim,
                         const int64_t *shape)
{
    if (sc_dtype_size(dtype) == 0)
        return sc_error_set(SC_ERR_INVALID, "unknown dtype %d", (int)dtype);
    if (ndim < 0 || ndim > SC_MAX_DIMS)
        return sc_error_set(SC_ERR_INVALID,
                            "tensor rank %d outside 0..%d", ndim, SC_MAX_DIMS);
    memset(t, 0, sizeof *t);
    SC_TRY(shape_numel(dtype, ndim, shape, &t->numel));
    t->dtype = dtype;
    t->ndim = ndim;
    if (ndim) /* a scalar's shape may be NULL */
        memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    return SC_OK;
}

sc_tensor *sc_tensor_alloc(sc_dtype dtype, int ndim, const int64_t *shape)
{
    sc_tensor *t = malloc(sizeof *t);
    if (!t) {
        sc_error_set(SC_ERR_NOMEM, "out of memory for a tensor");
        return NULL;
    }
    if (sc_tensor_init(t, dtype, ndim, shape) != SC_OK) {
        free(t);
        return NULL;
    }
    size_t bytes = sc_tensor_nbytes(t);
    t->data = calloc(1, bytes ? bytes : 1);
    if (!t->data) {
        free(t);
        sc_error_set(SC_ERR_NOMEM, "out of memory for %zu bytes of tensor data",
                     bytes);
        return NULL;
    }
    return t;
}

void sc_tensor_free(sc_tensor *t)
{
    if (!t)
        return;
    if (t->flags & SC_TENSOR_PINNED)
        sc_cuda_host_free(t->data);
    else
        free(t->data);
    free(t);
}

size_t sc_tensor_nbytes(const sc_tensor *t)
{
    return (size_t)t->numel * sc_dtype_size(t->dtype);
}

bool sc_tensor_same_shape(const sc_tensor *a, const sc_tensor *b)
{
    if (a->ndim != b->ndim)
        return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d])
            return false;
    return true;
}

char *sc_shape_str(int ndim, const int64_t *shape, char *buf, size_t size)
{
    size_t used = 0;
    used += (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < ndim && used < size; d++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld",
                                 d ? ", " : "", (long long)shape[d]);
    if (used < size)
        snprintf(buf + used, size - used, "]");
    return buf;
}

int64_t sc_tensor_get_int(const sc_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case SC_I32: return ((const int32_t *)t->data)[i];
    case SC_I64: return ((const int64_t *)t->data)[i];
    case SC_U8: return ((const uint8_t *)t->data)[i];
    default: return 0;
    }
}
