/* cuda_none.c — the CUDA seam (cuda_api.h) of a libscorch built without
 * nvcc: no GPUs, and every GPU call fails saying so. */
#include <stdlib.h>

#include "cuda_api.h"

static sc_status no_cuda(void)
{
    return sc_error_set(SC_ERR_UNSUPPORTED,
                        "this libscorch was built without the CUDA backend (no nvcc at build time)");
}

bool sc_cuda_built(void) { return false; }
int sc_cuda_device_count(void) { return 0; }
sc_status sc_cuda_device_info(int index, sc_device_info *out) { return no_cuda(); }
sc_device_memory sc_device_memory_used(sc_device device) { return (sc_device_memory){0}; }
sc_status sc_cuda_ctx_attach(sc_ctx *ctx, int index) { return no_cuda(); }
void *sc_ctx_cuda_stream(const sc_ctx *ctx) { return NULL; }

void *sc_cuda_malloc(int index, size_t bytes)
{
    no_cuda();
    return NULL;
}

void sc_cuda_free(int index, void *p, size_t bytes) {}

sc_status sc_cuda_memcpy(void *dst, sc_device dst_dev, const void *src, sc_device src_dev,
                         size_t bytes)
{
    return no_cuda();
}

sc_status sc_cuda_upload(sc_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    return no_cuda();
}

sc_status sc_cuda_memset0(int index, void *p, size_t bytes) { return no_cuda(); }
sc_status sc_cuda_fill_f32(int index, float *p, float value, int64_t n) { return no_cuda(); }
sc_status sc_cuda_scale_f32(int index, float *p, float factor, int64_t n) { return no_cuda(); }
sc_status sc_cuda_synchronize(int index) { return no_cuda(); }

void *sc_cuda_host_alloc(size_t bytes)
{
    no_cuda();
    return NULL;
}

void sc_cuda_host_free(void *p) {}
const sc_kernel *sc_cuda_kernel(sc_op_id op) { return NULL; }
sc_status sc_cuda_optim_update(int index, const sc_optim_update *update) { return no_cuda(); }
sc_status sc_cuda_capture_begin(sc_ctx *ctx) { return no_cuda(); }
sc_status sc_cuda_capture_end(sc_ctx *ctx, sc_graph **out) { return no_cuda(); }
sc_status sc_graph_launch(sc_graph *graph) { return no_cuda(); }
void sc_graph_free(sc_graph *graph) {}
