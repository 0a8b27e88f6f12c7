/* cuda_loader.c — the CUDA seam (cuda_api.h) as calls into
 * libscorch_cuda.so, loaded on first use next to libscorch itself. When the
 * build has no CUDA backend, or the library or the CUDA libraries it needs
 * cannot be loaded, there are no GPUs and every GPU call fails saying why. */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "context_impl.h"
#include "cuda_api.h"
#include "host_only.h"

#ifndef SC_HAVE_CUDA
#define SC_HAVE_CUDA 0
#endif

#define BACKEND_LIBRARY "libscorch_cuda.so"

static const sc_cuda_api *api;
static char why_not[512] = "this libscorch was built without the CUDA backend (no nvcc at "
                           "build time)";
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

/* The backend is built and installed beside libscorch: open it by the
 * path of the directory libscorch was loaded from (a sanitizer's dlopen
 * does not honour libscorch's RUNPATH $ORIGIN), else by name. */
static void *open_backend(void)
{
    Dl_info self;
    char path[4096];
    if (dladdr((void *)sc_cuda_built, &self) && self.dli_fname && strchr(self.dli_fname, '/')) {
        int dir = (int)(strrchr(self.dli_fname, '/') - self.dli_fname);
        snprintf(path, sizeof path, "%.*s/%s", dir, self.dli_fname, BACKEND_LIBRARY);
        if (access(path, F_OK) == 0) /* dlerror then says why it would not load */
            return dlopen(path, RTLD_NOW | RTLD_LOCAL);
    }
    return dlopen(BACKEND_LIBRARY, RTLD_NOW | RTLD_LOCAL);
}

/* What the backend calls in libscorch (cuda_api.h): it links none of it. */
static const sc_cuda_core core = {
    .error_set = sc_error_set,
    .error_wrap = sc_error_wrap,
    .error_code = sc_error_code,
    .dtype_size = sc_dtype_size,
    .shape_str = sc_shape_str,
    .device_check = sc_device_check,
    .ctx_rng = sc_ctx_rng,
    .rng_u64 = sc_rng_u64,
    .tensor_new = sc_tensor_new,
    .ctx_alloc_data = sc_ctx_alloc_data,
    .op_desc_get = sc_op_desc_get,
};

static void load(void)
{
    if (!SC_HAVE_CUDA)
        return;
    void *lib = open_backend();
    sc_cuda_backend_open_fn open = lib ? (sc_cuda_backend_open_fn)dlsym(lib, SC_CUDA_BACKEND_OPEN)
                                       : NULL;
    if (!open)
        snprintf(why_not, sizeof why_not, "the CUDA backend could not be loaded: %s", dlerror());
    else if (!(api = open(SC_CUDA_API_VERSION, &core)))
        snprintf(why_not, sizeof why_not, "%s was built for another libscorch (table version "
                 "%d wanted)", BACKEND_LIBRARY, SC_CUDA_API_VERSION);
}

static const sc_cuda_api *backend(void)
{
    pthread_once(&load_once, load);
    return api;
}

static sc_status unavailable(void) { return sc_error_set(SC_ERR_UNSUPPORTED, "%s", why_not); }

bool sc_cuda_built(void) { return backend() != NULL; }

const char *sc_cuda_missing(void) { return backend() ? "" : why_not; }

int sc_cuda_device_count(void) { return backend() ? api->device_count() : 0; }

sc_status sc_cuda_device_info(int index, sc_device_info *out)
{
    *out = (sc_device_info){0};
    return backend() ? api->device_info(index, out) : unavailable();
}

sc_device_memory sc_device_memory_used(sc_device device)
{
    return device.kind == SC_DEVICE_CUDA && backend() ? api->memory_used(device)
                                                      : (sc_device_memory){0};
}

/* Only GPU contexts reach the rest, and those exist only when the backend
 * is loaded; the checks guard against a caller breaking that rule. */

void *sc_ctx_cuda_stream(const sc_ctx *ctx) { return backend() ? api->ctx_stream(ctx) : NULL; }

sc_status sc_cuda_ctx_attach(sc_ctx *ctx, int index)
{
    return backend() ? api->ctx_attach(ctx, index) : unavailable();
}

void *sc_cuda_malloc(int index, size_t bytes)
{
    if (backend())
        return api->malloc(index, bytes);
    unavailable();
    return NULL;
}

void sc_cuda_free(int index, void *p, size_t bytes)
{
    if (backend())
        api->free(index, p, bytes);
}

sc_status sc_cuda_memcpy(void *dst, sc_device dst_dev, const void *src, sc_device src_dev,
                         size_t bytes)
{
    return backend() ? api->memcpy(dst, dst_dev, src, src_dev, bytes) : unavailable();
}

sc_status sc_cuda_upload(sc_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    return backend() ? api->upload(ctx, dst, src, bytes) : unavailable();
}

sc_status sc_cuda_upload_after(sc_ctx *ctx, void *dst, const void *src, size_t bytes,
                               sc_fence *after, sc_fence *done)
{
    return backend() ? api->upload_after(ctx, dst, src, bytes, after, done) : unavailable();
}

sc_status sc_cuda_copy_async(sc_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    return backend() ? api->copy_async(ctx, dst, src, bytes) : unavailable();
}

sc_status sc_cuda_memset0(int index, void *p, size_t bytes)
{
    return backend() ? api->memset0(index, p, bytes) : unavailable();
}

sc_status sc_cuda_fill_f32(int index, float *p, float value, int64_t n)
{
    return backend() ? api->fill_f32(index, p, value, n) : unavailable();
}

sc_status sc_cuda_scale_f32(int index, float *p, float factor, int64_t n)
{
    return backend() ? api->scale_f32(index, p, factor, n) : unavailable();
}

sc_status sc_cuda_synchronize(int index)
{
    return backend() ? api->synchronize(index) : unavailable();
}

void *sc_cuda_host_alloc(size_t bytes)
{
    if (backend())
        return api->host_alloc(bytes);
    unavailable();
    return NULL;
}

void sc_cuda_host_free(void *p)
{
    if (backend())
        api->host_free(p);
}

const sc_kernel *sc_cuda_kernel(sc_op_id op) { return backend() ? api->kernel(op) : NULL; }

sc_status sc_cuda_optim_update(int index, const sc_optim_update *update)
{
    return backend() ? api->optim_update(index, update) : unavailable();
}

sc_status sc_cuda_ema_pass(int index, const sc_ema_pass *pass)
{
    return backend() ? api->ema_pass(index, pass) : unavailable();
}

sc_status sc_cuda_grad_clip_norm(int index, float *g, int64_t n, double max_norm, bool scale,
                                 double *partials, float *norm, float *coef)
{
    return backend() ? api->grad_clip_norm(index, g, n, max_norm, scale, partials, norm, coef)
                     : unavailable();
}

sc_status sc_cuda_grad_clamp(int index, float *g, int64_t n, float value)
{
    return backend() ? api->grad_clamp(index, g, n, value) : unavailable();
}

sc_status sc_cuda_capture_begin(sc_ctx *ctx)
{
    return backend() ? api->capture_begin(ctx) : unavailable();
}

sc_status sc_cuda_capture_end(sc_ctx *ctx, sc_graph **out)
{
    return backend() ? api->capture_end(ctx, out) : unavailable();
}

sc_status sc_graph_launch(sc_graph *graph)
{
    return backend() ? api->graph_launch(graph) : unavailable();
}

void sc_graph_free(sc_graph *graph)
{
    if (graph && backend())
        api->graph_free(graph);
}

/* ---- pipelined steps (scorch/device.h) ---- */

static sc_status needs_gpu(sc_device device, const char *what)
{
    return device.kind == SC_DEVICE_CUDA
               ? SC_OK
               : sc_error_set(SC_ERR_UNSUPPORTED, "%s needs a CUDA context", what);
}

sc_fence *sc_fence_new(sc_device device)
{
    if (needs_gpu(device, "a fence") != SC_OK)
        return NULL;
    if (!backend()) {
        unavailable();
        return NULL;
    }
    return api->fence_new(device.index);
}

void sc_fence_free(sc_fence *fence)
{
    if (fence && backend())
        api->fence_free(fence);
}

sc_status sc_ctx_set_fence(sc_ctx *ctx, sc_fence *fence)
{
    SC_TRY(sc_host_only(__func__));
    SC_TRY(needs_gpu(sc_ctx_device(ctx), "sc_ctx_set_fence"));
    return backend() ? api->fence_set(ctx, fence) : unavailable();
}

sc_status sc_fence_wait(sc_fence *fence)
{
    return backend() ? api->fence_wait(fence) : unavailable();
}

sc_status sc_fence_passed(sc_fence *fence, bool *passed)
{
    *passed = true;
    return backend() ? api->fence_passed(fence, passed) : unavailable();
}

/* The bytes of a copy from src into dst, which must match. */
static sc_status copy_bytes(const sc_tensor *dst, const sc_tensor *src, const char *what,
                            size_t *bytes)
{
    if (dst->dtype != src->dtype || dst->numel != src->numel)
        return sc_error_set(SC_ERR_INVALID, "%s: %lld %s elements into %lld %s elements", what,
                            (long long)src->numel, sc_dtype_name(src->dtype),
                            (long long)dst->numel, sc_dtype_name(dst->dtype));
    *bytes = sc_tensor_nbytes(src);
    return SC_OK;
}

static bool on(const sc_tensor *t, sc_device device)
{
    return t->device.kind == device.kind && t->device.index == device.index;
}

static bool on_host_or(const sc_tensor *t, sc_device gpu)
{
    return t->device.kind == SC_DEVICE_CPU || on(t, gpu);
}

sc_status sc_tensor_upload_async(sc_ctx *ctx, sc_tensor *dst, const sc_tensor *src,
                                 sc_fence *after, sc_fence *done)
{
    size_t bytes = 0;
    SC_TRY(sc_host_only(__func__));
    SC_TRY(needs_gpu(sc_ctx_device(ctx), "sc_tensor_upload_async"));
    SC_TRY(copy_bytes(dst, src, "upload", &bytes));
    if (src->device.kind != SC_DEVICE_CPU || !on(dst, sc_ctx_device(ctx)))
        return sc_error_set(SC_ERR_INVALID, "upload: from the host to the context's GPU only");
    return backend() ? api->upload_after(ctx, dst->data, src->data, bytes, after, done)
                     : unavailable();
}

sc_status sc_tensor_copy_async(sc_ctx *ctx, sc_tensor *dst, const sc_tensor *src)
{
    size_t bytes = 0;
    SC_TRY(sc_host_only(__func__));
    SC_TRY(needs_gpu(sc_ctx_device(ctx), "sc_tensor_copy_async"));
    SC_TRY(copy_bytes(dst, src, "copy", &bytes));
    if (!on_host_or(dst, sc_ctx_device(ctx)) || !on_host_or(src, sc_ctx_device(ctx)))
        return sc_error_set(SC_ERR_INVALID, "copy: between the host and the context's GPU "
                            "only");
    if (bytes == 0 || dst->data == src->data)
        return SC_OK;
    return backend() ? api->copy_async(ctx, dst->data, src->data, bytes) : unavailable();
}
