/* The libscorch functions the CUDA backend calls, as calls through the
 * table libscorch hands it when it loads the backend (sc_cuda_core in
 * cuda_api.h), and the backend's one exported symbol that takes it. The
 * definitions are hidden: libscorch_cuda links no libscorch symbol. */
#include <stdarg.h>
#include <stdio.h>

#include "cuda_impl.h"

static const sc_cuda_core *core;

__attribute__((visibility("default"))) const sc_cuda_api *
sc_cuda_backend_open(int version, const sc_cuda_core *libscorch)
{
    if (version != SC_CUDA_API_VERSION)
        return NULL;
    core = libscorch;
    return &sc_cuda_backend_api;
}

/* A message as long as libscorch keeps. */
enum { MESSAGE_MAX = 1024 };

sc_status sc_error_set(sc_status code, const char *fmt, ...)
{
    char text[MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    return core->error_set(code, "%s", text);
}

sc_status sc_error_wrap(sc_status code, const char *fmt, ...)
{
    char text[MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    return core->error_wrap(code, "%s", text);
}

sc_status sc_error_code(void) { return core->error_code(); }

size_t sc_dtype_size(sc_dtype dtype) { return core->dtype_size(dtype); }

char *sc_shape_str(int ndim, const int64_t *shape, char *buf, size_t size)
{
    return core->shape_str(ndim, shape, buf, size);
}

sc_status sc_device_check(sc_device device) { return core->device_check(device); }

sc_rng *sc_ctx_rng(sc_ctx *ctx) { return core->ctx_rng(ctx); }

uint64_t sc_rng_u64(sc_rng *rng) { return core->rng_u64(rng); }

sc_tensor *sc_tensor_new(sc_ctx *ctx, sc_dtype dtype, int ndim, const int64_t *shape)
{
    return core->tensor_new(ctx, dtype, ndim, shape);
}

void *sc_ctx_alloc_data(sc_ctx *ctx, size_t bytes) { return core->ctx_alloc_data(ctx, bytes); }

const sc_op_desc *sc_op_desc_get(sc_op_id op) { return core->op_desc_get(op); }
