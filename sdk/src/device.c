/* device.c — devices, device memory and copies between devices
 * (scorch/device.h, device_impl.h). The CPU is handled here; GPUs through
 * the CUDA backend's seam (cuda_api.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context_impl.h"
#include "cuda_api.h"
#include "device_impl.h"
#include "host_only.h"

static const sc_device host_device = {SC_DEVICE_CPU, 0};

char *sc_device_str(sc_device device, char *buf, size_t size)
{
    if (device.kind == SC_DEVICE_CPU)
        snprintf(buf, size, "cpu");
    else
        snprintf(buf, size, "%s:%d", sc_device_kind_name(device.kind), device.index);
    return buf;
}

sc_status sc_device_check(sc_device device)
{
    switch (device.kind) {
    case SC_DEVICE_CPU: return SC_OK;
    case SC_DEVICE_CUDA: {
        if (!sc_cuda_built())
            return sc_error_set(SC_ERR_UNSUPPORTED, "cuda:%d: %s", device.index,
                                sc_cuda_missing());
        int count = sc_cuda_device_count();
        if (device.index < 0 || device.index >= count)
            return sc_error_set(SC_ERR_INVALID, "cuda:%d: no such GPU (%d visible%s)",
                                device.index, count,
                                count ? "" : "; check the driver and CUDA_VISIBLE_DEVICES");
        return SC_OK;
    }
    default: return sc_error_set(SC_ERR_INVALID, "unknown device kind %d", (int)device.kind);
    }
}

/* Rounded up so that aligned_alloc accepts it; never 0. */
static size_t alloc_size(size_t bytes) { return bytes ? (bytes + 63) & ~(size_t)63 : 64; }

void *sc_device_alloc(sc_device dev, size_t bytes)
{
    bytes = alloc_size(bytes);
    if (dev.kind == SC_DEVICE_CUDA)
        return sc_cuda_malloc(dev.index, bytes);
    void *p = aligned_alloc(64, bytes);
    if (!p)
        sc_error_set(SC_ERR_NOMEM, "out of host memory for %zu bytes", bytes);
    return p;
}

void sc_device_free(sc_device dev, void *p, size_t bytes)
{
    if (!p)
        return;
    if (dev.kind == SC_DEVICE_CUDA)
        sc_cuda_free(dev.index, p, alloc_size(bytes));
    else
        free(p);
}

sc_status sc_device_zero(sc_device dev, void *p, size_t bytes)
{
    if (dev.kind == SC_DEVICE_CUDA)
        return sc_cuda_memset0(dev.index, p, bytes);
    memset(p, 0, bytes);
    return SC_OK;
}

sc_status sc_device_fill_f32(sc_device dev, float *p, float value, int64_t n)
{
    if (dev.kind == SC_DEVICE_CUDA)
        return sc_cuda_fill_f32(dev.index, p, value, n);
    for (int64_t i = 0; i < n; i++)
        p[i] = value;
    return SC_OK;
}

sc_status sc_device_scale_f32(sc_device dev, float *p, float factor, int64_t n)
{
    if (dev.kind == SC_DEVICE_CUDA)
        return sc_cuda_scale_f32(dev.index, p, factor, n);
    for (int64_t i = 0; i < n; i++)
        p[i] *= factor;
    return SC_OK;
}

sc_status sc_tensor_copy(sc_tensor *dst, const sc_tensor *src)
{
    if (dst->dtype != src->dtype || dst->numel != src->numel)
        return sc_error_set(SC_ERR_INVALID, "copy: %lld %s elements into %lld %s elements",
                            (long long)src->numel, sc_dtype_name(src->dtype),
                            (long long)dst->numel, sc_dtype_name(dst->dtype));
    size_t bytes = sc_tensor_nbytes(src);
    if (bytes == 0 || dst->data == src->data)
        return SC_OK;
    if (dst->device.kind == SC_DEVICE_CPU && src->device.kind == SC_DEVICE_CPU) {
        memcpy(dst->data, src->data, bytes);
        return SC_OK;
    }
    SC_TRY(sc_device_check(dst->device));
    SC_TRY(sc_device_check(src->device));
    return sc_cuda_memcpy(dst->data, dst->device, src->data, src->device, bytes);
}

/* A tensor shaped like src, on the host or on ctx's device, from the matching arena. */
static sc_tensor *arena_like(sc_ctx *ctx, const sc_tensor *src, bool on_host)
{
    sc_tensor *t = sc_tensor_shaped(ctx, src->dtype, src->ndim, src->shape,
                                    on_host ? host_device : ctx->device);
    if (!t)
        return NULL;
    t->data = on_host ? sc_ctx_alloc(ctx, sc_tensor_nbytes(t))
                      : sc_ctx_alloc_data(ctx, sc_tensor_nbytes(t));
    return t->data ? t : NULL;
}

sc_tensor *sc_tensor_to_host(sc_ctx *ctx, sc_tensor *src)
{
    if (!src || src->device.kind == SC_DEVICE_CPU)
        return src;
    sc_tensor *t = arena_like(ctx, src, true);
    return t && sc_tensor_copy(t, src) == SC_OK ? t : NULL;
}

sc_tensor *sc_tensor_to_device(sc_ctx *ctx, sc_tensor *src)
{
    if (!src || (src->device.kind == ctx->device.kind && src->device.index == ctx->device.index))
        return src;
    sc_tensor *t = arena_like(ctx, src, false);
    if (!t)
        return NULL;
    sc_status st = src->device.kind == SC_DEVICE_CPU
                       ? sc_cuda_upload(ctx, t->data, src->data, sc_tensor_nbytes(t))
                       : sc_tensor_copy(t, src);
    return st == SC_OK ? t : NULL;
}

sc_status sc_tensor_item(const sc_tensor *t, float *out)
{
    if (t->dtype != SC_F32 || t->numel < 1)
        return sc_error_set(SC_ERR_INVALID, "item: expected an f32 tensor with an element");
    if (t->device.kind == SC_DEVICE_CPU) {
        *out = sc_tensor_f32(t)[0];
        return SC_OK;
    }
    return sc_cuda_memcpy(out, host_device, t->data, t->device, sizeof *out);
}

sc_status sc_ctx_synchronize(sc_ctx *ctx)
{
    return ctx->cuda ? sc_cuda_synchronize(ctx->device.index) : SC_OK;
}

sc_tensor *sc_tensor_alloc_pinned(sc_dtype dtype, int ndim, const int64_t *shape)
{
    if (!sc_cuda_built() || sc_cuda_device_count() == 0)
        return sc_tensor_alloc(dtype, ndim, shape);
    sc_tensor *t = malloc(sizeof *t);
    if (!t) {
        sc_error_set(SC_ERR_NOMEM, "out of memory for a tensor");
        return NULL;
    }
    if (sc_tensor_init(t, dtype, ndim, shape) != SC_OK ||
        !(t->data = sc_cuda_host_alloc(sc_tensor_nbytes(t) ? sc_tensor_nbytes(t) : 1))) {
        free(t);
        return NULL;
    }
    t->device = host_device;
    t->flags |= SC_TENSOR_PINNED;
    memset(t->data, 0, sc_tensor_nbytes(t));
    return t;
}

sc_status sc_ctx_capture_begin(sc_ctx *ctx)
{
    SC_TRY(sc_host_only(__func__));
    if (!ctx->cuda)
        return sc_error_set(SC_ERR_UNSUPPORTED, "CUDA graphs need a CUDA context");
    return sc_cuda_capture_begin(ctx);
}

sc_status sc_ctx_capture_end(sc_ctx *ctx, sc_graph **out)
{
    *out = NULL;
    SC_TRY(sc_host_only(__func__));
    if (!ctx->cuda)
        return sc_error_set(SC_ERR_UNSUPPORTED, "CUDA graphs need a CUDA context");
    return sc_cuda_capture_end(ctx, out);
}
