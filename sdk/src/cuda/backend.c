/* The CUDA backend's kernel table (every op in the registry, defined in
 * the .cu files beside this one) and the table of the whole backend that
 * libscorch gets from sc_cuda_backend_open (cuda_api.h, core.c). */
#include "cuda_impl.h"

static const sc_kernel *const cuda_kernels[SC_OP_COUNT] = {
#define SC_CUDA_KERNEL_ENTRY(id, name) [SC_OP_##id] = &sc_cuda_kernel_##name,
    SC_OP_LIST(SC_CUDA_KERNEL_ENTRY)
#undef SC_CUDA_KERNEL_ENTRY
};

const sc_kernel *sc_cuda_kernel(sc_op_id op) { return cuda_kernels[op]; }

const sc_cuda_api sc_cuda_backend_api = {
    .device_count = sc_cuda_device_count,
    .device_info = sc_cuda_device_info,
    .memory_used = sc_device_memory_used,
    .ctx_stream = sc_ctx_cuda_stream,
    .ctx_attach = sc_cuda_ctx_attach,
    .malloc = sc_cuda_malloc,
    .free = sc_cuda_free,
    .memcpy = sc_cuda_memcpy,
    .upload = sc_cuda_upload,
    .memset0 = sc_cuda_memset0,
    .fill_f32 = sc_cuda_fill_f32,
    .scale_f32 = sc_cuda_scale_f32,
    .synchronize = sc_cuda_synchronize,
    .host_alloc = sc_cuda_host_alloc,
    .host_free = sc_cuda_host_free,
    .kernel = sc_cuda_kernel,
    .optim_update = sc_cuda_optim_update,
    .capture_begin = sc_cuda_capture_begin,
    .capture_end = sc_cuda_capture_end,
    .graph_launch = sc_graph_launch,
    .graph_free = sc_graph_free,
    .upload_after = sc_cuda_upload_after,
    .copy_async = sc_cuda_copy_async,
    .fence_new = sc_cuda_fence_new,
    .fence_free = sc_cuda_fence_free,
    .fence_set = sc_cuda_fence_set,
    .fence_wait = sc_cuda_fence_wait,
    .fence_passed = sc_cuda_fence_passed,
    .ema_pass = sc_cuda_ema_pass,
    .grad_clip_norm = sc_cuda_grad_clip_norm,
    .grad_clamp = sc_cuda_grad_clamp,
};
