/* cuda_api.h — what the core of libscorch asks of the CUDA backend, in
 * plain C. sdk/src/cuda/ implements it when nvcc is found; cuda_none.c
 * otherwise, where every call fails saying the build has no CUDA backend.
 * Private to libscorch. */
#ifndef SCORCH_CUDA_API_H
#define SCORCH_CUDA_API_H

#include <stddef.h>

#include "op.h"
#include "optim_impl.h"
#include "scorch/device.h"

/* Sets up GPU `index` for ctx (streams, cuBLAS and cuDNN handles) and
 * points ctx->device_state at it. */
sc_status sc_cuda_ctx_attach(sc_ctx *ctx, int index);

/* Device memory: NULL with a message naming the device and the sizes on
 * failure. The step arena and the parameter store allocate through here. */
void *sc_cuda_malloc(int index, size_t bytes);
void sc_cuda_free(int index, void *p, size_t bytes); /* bytes as allocated */

/* Blocking copy of bytes between any two devices (one may be the CPU),
 * ordered after the kernels already queued on the GPU side. */
sc_status sc_cuda_memcpy(void *dst, sc_device dst_dev, const void *src, sc_device src_dev,
                         size_t bytes);
/* Host-to-ctx's-GPU copy on the copy stream; ctx's later kernels wait. */
sc_status sc_cuda_upload(sc_ctx *ctx, void *dst, const void *src, size_t bytes);
/* Zeroes device memory, queued on the device's compute stream. */
sc_status sc_cuda_memset0(int index, void *p, size_t bytes);
sc_status sc_cuda_fill_f32(int index, float *p, float value, int64_t n);
sc_status sc_cuda_scale_f32(int index, float *p, float factor, int64_t n);
sc_status sc_cuda_synchronize(int index);

/* Page-locked host memory; NULL with a message on failure. */
void *sc_cuda_host_alloc(size_t bytes);
void sc_cuda_host_free(void *p);

/* The CUDA kernels of op; NULL when the backend lacks it. */
const sc_kernel *sc_cuda_kernel(sc_op_id op);

/* One fused optimizer update over the trainable ranges of the flat
 * buffers, on the device's compute stream. */
sc_status sc_cuda_optim_update(int index, const sc_optim_update *update);

/* Graph capture on ctx's compute stream (scorch/device.h). */
sc_status sc_cuda_capture_begin(sc_ctx *ctx);
sc_status sc_cuda_capture_end(sc_ctx *ctx, sc_graph **out);

#endif
