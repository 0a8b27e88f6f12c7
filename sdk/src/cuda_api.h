/* cuda_api.h — what the core of libscorch and the CUDA backend ask of each
 * other, in plain C. Private to libscorch.
 *
 * The backend (sdk/src/cuda/, built when nvcc is found) is a library of
 * its own, libscorch_cuda.so, that exports one function,
 * sc_cuda_backend_open: libscorch hands it the table of libscorch
 * functions the backend calls (sc_cuda_core) and gets back the table of
 * the backend's (sc_cuda_api). libscorch defines the functions below as
 * calls through the backend's table (cuda_loader.c) and loads the library
 * on first use: a CPU run never maps cuBLAS and cuDNN (a tenth of a second
 * per process), and a build with the backend still runs, CPU only, where
 * the CUDA libraries are missing. Without the library every call fails
 * with a message saying why. Inside libscorch_cuda the same names are its
 * own (hidden) definitions, and the libscorch functions it calls are
 * hidden definitions that call through libscorch's table (cuda/core.c):
 * the backend links no libscorch symbol, so libscorch exports no internals
 * for it, and it serves whichever libscorch loaded it. Both tables are
 * unversioned beyond SC_CUDA_API_VERSION: the two libraries are built
 * together. */
#ifndef SCORCH_CUDA_API_H
#define SCORCH_CUDA_API_H

#include <stddef.h>

#include "op.h"
#include "ema_impl.h"
#include "optim_impl.h"
#include "scorch_host/device.h"

/* Why the backend is missing (no nvcc at build time, or the library
 * would not load); "" when it is loaded. libscorch only. */
const char *sc_cuda_missing(void);

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
/* Host-to-ctx's-GPU copy on the copy stream, after the kernels ctx queued
 * so far; ctx's later kernels wait. */
sc_status sc_cuda_upload(sc_ctx *ctx, void *dst, const void *src, size_t bytes);
/* The same, starting after `after` instead (NULL: at once), setting
 * `done` (scorch/device.h). */
sc_status sc_cuda_upload_after(sc_ctx *ctx, void *dst, const void *src, size_t bytes,
                               sc_fence *after, sc_fence *done);
/* Any copy on ctx's compute stream, not waited for. */
sc_status sc_cuda_copy_async(sc_ctx *ctx, void *dst, const void *src, size_t bytes);
/* Fences (scorch/device.h): CUDA events of GPU `index`. */
sc_fence *sc_cuda_fence_new(int index);
void sc_cuda_fence_free(sc_fence *fence);
sc_status sc_cuda_fence_set(sc_ctx *ctx, sc_fence *fence);
sc_status sc_cuda_fence_wait(sc_fence *fence);
sc_status sc_cuda_fence_passed(sc_fence *fence, bool *passed);
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

/* One EMA pass (lerp or swap) over the parameter ranges of the flat
 * buffers, on the device's compute stream. */
sc_status sc_cuda_ema_pass(int index, const sc_ema_pass *pass);

/* Gradient clipping (grad_clip.c) over g [n], on the device's compute
 * stream: the L2 norm into *norm through partials (SC_CUDA_CLIP_BLOCKS
 * doubles) and, when scale, g scaled by *coef = min(1, max_norm /
 * (norm + 1e-6)); clamp: each of g into [-value, value]. */
enum { SC_CUDA_CLIP_BLOCKS = 256 };
sc_status sc_cuda_grad_clip_norm(int index, float *g, int64_t n, double max_norm, bool scale,
                                 double *partials, float *norm, float *coef);
sc_status sc_cuda_grad_clamp(int index, float *g, int64_t n, float value);

/* Graph capture on ctx's compute stream (scorch/device.h). */
sc_status sc_cuda_capture_begin(sc_ctx *ctx);
sc_status sc_cuda_capture_end(sc_ctx *ctx, sc_graph **out);

/* The layout of both tables; the backend refuses another. */
enum { SC_CUDA_API_VERSION = 5 };

/* The backend's functions. */
typedef struct sc_cuda_api {
    int (*device_count)(void);
    sc_status (*device_info)(int index, sc_device_info *out);
    sc_device_memory (*memory_used)(sc_device device);
    void *(*ctx_stream)(const sc_ctx *ctx);
    sc_status (*ctx_attach)(sc_ctx *ctx, int index);
    void *(*malloc)(int index, size_t bytes);
    void (*free)(int index, void *p, size_t bytes);
    sc_status (*memcpy)(void *dst, sc_device dst_dev, const void *src, sc_device src_dev,
                        size_t bytes);
    sc_status (*upload)(sc_ctx *ctx, void *dst, const void *src, size_t bytes);
    sc_status (*memset0)(int index, void *p, size_t bytes);
    sc_status (*fill_f32)(int index, float *p, float value, int64_t n);
    sc_status (*scale_f32)(int index, float *p, float factor, int64_t n);
    sc_status (*synchronize)(int index);
    void *(*host_alloc)(size_t bytes);
    void (*host_free)(void *p);
    const sc_kernel *(*kernel)(sc_op_id op);
    sc_status (*optim_update)(int index, const sc_optim_update *update);
    sc_status (*capture_begin)(sc_ctx *ctx);
    sc_status (*capture_end)(sc_ctx *ctx, sc_graph **out);
    sc_status (*graph_launch)(sc_graph *graph);
    void (*graph_free)(sc_graph *graph);
    /* version 2: pipelined steps */
    sc_status (*upload_after)(sc_ctx *ctx, void *dst, const void *src, size_t bytes,
                              sc_fence *after, sc_fence *done);
    sc_status (*copy_async)(sc_ctx *ctx, void *dst, const void *src, size_t bytes);
    sc_fence *(*fence_new)(int index);
    void (*fence_free)(sc_fence *fence);
    sc_status (*fence_set)(sc_ctx *ctx, sc_fence *fence);
    sc_status (*fence_wait)(sc_fence *fence);
    sc_status (*fence_passed)(sc_fence *fence, bool *passed);
    /* version 4: the EMA of the weights, gradient clipping */
    sc_status (*ema_pass)(int index, const sc_ema_pass *pass);
    sc_status (*grad_clip_norm)(int index, float *g, int64_t n, double max_norm, bool scale,
                                double *partials, float *norm, float *coef);
    sc_status (*grad_clamp)(int index, float *g, int64_t n, float value);
} sc_cuda_api;

/* The libscorch functions the backend calls (version 5), public ones and
 * internals alike. Messages are formatted by the backend: error_set and
 * error_wrap get "%s" and the text. */
typedef struct sc_cuda_core {
    sc_status (*error_set)(sc_status code, const char *fmt, ...);
    sc_status (*error_wrap)(sc_status code, const char *fmt, ...);
    sc_status (*error_code)(void);
    size_t (*dtype_size)(sc_dtype dtype);
    char *(*shape_str)(int ndim, const int64_t *shape, char *buf, size_t size);
    sc_status (*device_check)(sc_device device);
    sc_rng *(*ctx_rng)(sc_ctx *ctx);
    uint64_t (*rng_u64)(sc_rng *rng);
    sc_tensor *(*tensor_new)(sc_ctx *ctx, sc_dtype dtype, int ndim, const int64_t *shape);
    void *(*ctx_alloc_data)(sc_ctx *ctx, size_t bytes);
    const sc_op_desc *(*op_desc_get)(sc_op_id op);
} sc_cuda_core;

/* libscorch_cuda's one exported symbol: its table, after keeping `core`
 * (which must outlive it); NULL when `version` is not its own. */
#define SC_CUDA_BACKEND_OPEN "sc_cuda_backend_open"
typedef const sc_cuda_api *(*sc_cuda_backend_open_fn)(int version, const sc_cuda_core *core);

#endif
