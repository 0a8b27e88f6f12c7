/* scorch/device.h — the devices libscorch computes on, and moving tensors
 * between them.
 *
 * A context (scorch/context.h) computes on one device; its step tensors
 * live there. Host code that reads values (losses, metrics, checkpoints)
 * takes host copies with sc_tensor_to_host(); batches go the other way with
 * sc_tensor_to_device(). On a CPU context both return their argument.
 *
 * A libscorch built without the CUDA backend reports no GPUs, and every
 * CUDA call fails with a message saying the build has no CUDA backend.
 *
 * The host's pipelined copies, fences and CUDA graphs are in
 * scorch_host/device.h (not for plugins).
 *
 * Thread rule: the copies use the calling thread's context and its device's
 * streams; a context belongs to one thread at a time.
 */
#ifndef SCORCH_DEVICE_H
#define SCORCH_DEVICE_H

#include <stdbool.h>
#include <stddef.h>

#include "scorch/context.h"
#include "scorch/export.h"
#include "scorch/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether this libscorch has the CUDA backend. */
SC_API bool sc_cuda_built(void);

/* GPUs the CUDA backend sees (CUDA_VISIBLE_DEVICES applies); 0 without the
 * backend, a driver or a GPU. */
SC_API int sc_cuda_device_count(void);

typedef struct sc_device_info {
    char name[256];
    int cc_major, cc_minor; /* compute capability */
    size_t total_bytes, free_bytes;
} sc_device_info;

/* Facts about GPU `index`; fails with a message when there is no such GPU.
 * The memory figures come from NVML (the driver's libnvidia-ml), which
 * opens no CUDA context on the GPU; both are 0 where NVML is missing. */
SC_API sc_status sc_cuda_device_info(int index, sc_device_info *out);

/* Succeeds when `device` exists in this build and on this machine; the
 * message otherwise names the device and says what is missing. */
SC_API sc_status sc_device_check(sc_device device);

/* "cpu", "cuda:0" into buf; returns buf. */
SC_API char *sc_device_str(sc_device device, char *buf, size_t size);

/* Memory libscorch holds on a device: bytes allocated now and the most ever
 * allocated at once (parameters, optimizer state, step arenas). Zero for the
 * CPU. */
typedef struct sc_device_memory {
    size_t allocated, peak;
} sc_device_memory;
SC_API sc_device_memory sc_device_memory_used(sc_device device);

/* Copies src into dst: same dtype and element count, any pair of devices.
 * Returns when the data has arrived (a copy to the host waits for the
 * kernels that produce src). */
SC_API sc_status sc_tensor_copy(sc_tensor *dst, const sc_tensor *src);

/* src itself when it is on the host, else a host copy from ctx's step
 * arena (valid until sc_ctx_reset). NULL with a message on failure. */
SC_API sc_tensor *sc_tensor_to_host(sc_ctx *ctx, sc_tensor *src);

/* src itself when it is on ctx's device, else a copy there from ctx's step
 * arena. Host-to-GPU copies run on the device's copy stream and the
 * context's later kernels wait for them; the host data must stay unchanged
 * until the step ends (sc_ctx_reset). */
SC_API sc_tensor *sc_tensor_to_device(sc_ctx *ctx, sc_tensor *src);

/* Element 0 of an f32 tensor on any device, as a float. */
SC_API sc_status sc_tensor_item(const sc_tensor *t, float *out);

/* The cudaStream_t ctx's kernels run on, for host code that orders its
 * own GPU work with them (NCCL); NULL on the CPU. */
SC_API void *sc_ctx_cuda_stream(const sc_ctx *ctx);

/* Waits until every kernel queued on ctx's device has finished. */
SC_API sc_status sc_ctx_synchronize(sc_ctx *ctx);

/* A host tensor like sc_tensor_alloc(), in page-locked memory when a GPU
 * is present (faster, asynchronous uploads). Free with sc_tensor_free. */
SC_API sc_tensor *sc_tensor_alloc_pinned(sc_dtype dtype, int ndim, const int64_t *shape);

#ifdef __cplusplus
}
#endif
#endif
