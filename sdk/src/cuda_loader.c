/* cuda_loader.c — the CUDA seam (cuda_api.h) as calls into
 * libscorch_cuda.so, loaded on first use next to libscorch itself. When the
 * build has no CUDA backend, or the library or the CUDA libraries it needs
 * cannot be loaded, there are no GPUs and every GPU call fails saying why. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "cuda_api.h"

#ifndef SC_HAVE_CUDA
#define SC_HAVE_CUDA 0
#endif

#define BACKEND_LIBRARY "libscorch_cuda.so"

static const sc_cuda_api *api;
static char why_not[512] = "this libscorch was built without the CUDA backend (no nvcc at "
                           "build time)";
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

/* dlopen searches libscorch's own RUNPATH ($ORIGIN): the directory it was
 * loaded from, where the backend is built and installed beside it. */
static void load(void)
{
    if (!SC_HAVE_CUDA)
        return;
    void *lib = dlopen(BACKEND_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    const sc_cuda_api *table = lib ? dlsym(lib, "sc_cuda_backend_api") : NULL;
    if (!table)
        snprintf(why_not, sizeof why_not, "the CUDA backend could not be loaded: %s", dlerror());
    else if (table->version != SC_CUDA_API_VERSION)
        snprintf(why_not, sizeof why_not, "%s has table version %d, libscorch wants %d",
                 BACKEND_LIBRARY, table->version, SC_CUDA_API_VERSION);
    else
        api = table;
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
