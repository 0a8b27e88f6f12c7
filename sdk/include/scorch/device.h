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
 * Thread rule: the copies use the calling thread's context and its device's
 * streams; a context belongs to one thread at a time.
 */
#ifndef SCORCH_DEVICE_H
#define SCORCH_DEVICE_H

#include <stdbool.h>
#include <stddef.h>

#include "scorch/context.h"
#include "scorch/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether this libscorch has the CUDA backend. */
bool sc_cuda_built(void);

/* GPUs the CUDA backend sees (CUDA_VISIBLE_DEVICES applies); 0 without the
 * backend, a driver or a GPU. */
int sc_cuda_device_count(void);

typedef struct sc_device_info {
    char name[256];
    int cc_major, cc_minor; /* compute capability */
    size_t total_bytes, free_bytes;
} sc_device_info;

/* Facts about GPU `index`; fails with a message when there is no such GPU.
 * The memory figures come from NVML (the driver's libnvidia-ml), which
 * opens no CUDA context on the GPU; both are 0 where NVML is missing. */
sc_status sc_cuda_device_info(int index, sc_device_info *out);

/* Succeeds when `device` exists in this build and on this machine; the
 * message otherwise names the device and says what is missing. */
sc_status sc_device_check(sc_device device);

/* "cpu", "cuda:0" into buf; returns buf. */
char *sc_device_str(sc_device device, char *buf, size_t size);

/* Memory libscorch holds on a device: bytes allocated now and the most ever
 * allocated at once (parameters, optimizer state, step arenas). Zero for the
 * CPU. */
typedef struct sc_device_memory {
    size_t allocated, peak;
} sc_device_memory;
sc_device_memory sc_device_memory_used(sc_device device);

/* Copies src into dst: same dtype and element count, any pair of devices.
 * Returns when the data has arrived (a copy to the host waits for the
 * kernels that produce src). */
sc_status sc_tensor_copy(sc_tensor *dst, const sc_tensor *src);

/* src itself when it is on the host, else a host copy from ctx's step
 * arena (valid until sc_ctx_reset). NULL with a message on failure. */
sc_tensor *sc_tensor_to_host(sc_ctx *ctx, sc_tensor *src);

/* src itself when it is on ctx's device, else a copy there from ctx's step
 * arena. Host-to-GPU copies run on the device's copy stream and the
 * context's later kernels wait for them; the host data must stay unchanged
 * until the step ends (sc_ctx_reset). */
sc_tensor *sc_tensor_to_device(sc_ctx *ctx, sc_tensor *src);

/* Element 0 of an f32 tensor on any device, as a float. */
sc_status sc_tensor_item(const sc_tensor *t, float *out);

/* The cudaStream_t ctx's kernels run on, for host code that orders its
 * own GPU work with them (NCCL); NULL on the CPU. */
void *sc_ctx_cuda_stream(const sc_ctx *ctx);

/* Waits until every kernel queued on ctx's device has finished. */
sc_status sc_ctx_synchronize(sc_ctx *ctx);

/* A host tensor like sc_tensor_alloc(), in page-locked memory when a GPU
 * is present (faster, asynchronous uploads). Free with sc_tensor_free. */
sc_tensor *sc_tensor_alloc_pinned(sc_dtype dtype, int ndim, const int64_t *shape);

/* Pipelined steps: copies that return at once, and fences to learn when
 * they are done. A GPU step that never waits for the GPU uploads batch
 * N+1 while step N computes, and reads step N's results later.
 *
 * A fence marks a point in a GPU's queued work (a CUDA event). A new one
 * is not set: waiting for it returns at once. Setting it again moves the
 * mark; waits and queries see the latest setting. sc_fence_wait and
 * sc_fence_passed may be called from any thread, the rest from the thread
 * that queues the work. CUDA contexts and devices only. */
typedef struct sc_fence sc_fence;
sc_fence *sc_fence_new(sc_device device); /* NULL with a message on failure */
void sc_fence_free(sc_fence *fence);      /* NULL is fine; a pending setting still completes */
/* Sets fence after the work ctx has queued so far. */
sc_status sc_ctx_set_fence(sc_ctx *ctx, sc_fence *fence);
/* Blocks until the work before the fence's latest setting has finished. */
sc_status sc_fence_wait(sc_fence *fence);
/* Whether it has, without waiting. */
sc_status sc_fence_passed(sc_fence *fence, bool *passed);

/* Queues a copy of host tensor src into dst on ctx's device, on the
 * device's copy stream, and returns at once. The copy starts once `after`
 * has passed (NULL: at once), not after everything ctx has queued, so it
 * overlaps that work: `after` must cover every earlier reader of dst. It
 * sets `done` when it has finished, and ctx's later kernels wait for it.
 * A pinned src is read when the copy runs: keep it unchanged until `done`
 * has passed. Same dtype and element count. */
sc_status sc_tensor_upload_async(sc_ctx *ctx, sc_tensor *dst, const sc_tensor *src,
                                 sc_fence *after, sc_fence *done);

/* Queues a copy of src into dst (any two of ctx's device and the host) on
 * ctx's compute stream, after the kernels ctx queued before, and returns
 * at once. A pinned host dst is written when the copy runs: read it after
 * a fence set later (sc_ctx_set_fence) has passed. */
sc_status sc_tensor_copy_async(sc_ctx *ctx, sc_tensor *dst, const sc_tensor *src);

/* CUDA graphs. Between capture_begin and capture_end the kernels ctx
 * queues are recorded, not run; sc_graph_launch replays them with the same
 * addresses (the step arena gives a repeated op sequence the same ones).
 * The arena must not grow and nothing may wait for the GPU while capturing:
 * capture_end then fails with a message saying why, and ctx computes
 * eagerly again. CUDA contexts only. */
typedef struct sc_graph sc_graph;
sc_status sc_ctx_capture_begin(sc_ctx *ctx);
sc_status sc_ctx_capture_end(sc_ctx *ctx, sc_graph **out);
sc_status sc_graph_launch(sc_graph *graph);
void sc_graph_free(sc_graph *graph);

#ifdef __cplusplus
}
#endif
#endif
