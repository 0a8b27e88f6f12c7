/* scorch_host/device.h — the host's pipelined steps: copies that return at
 * once, fences, and CUDA graphs.
 *
 * Host only: not installed, exported under SCORCH_HOST_1. The calls that
 * queue work on a context (sc_ctx_set_fence, the copies, capture) are
 * refused while plugin code runs (scorch_host/plugin.h): the host orders
 * a step's copies and kernels around its own fences and graph. docs/abi.md,
 * "What libscorch exports".
 */
#ifndef SCORCH_SDK_HOST_DEVICE_H
#define SCORCH_SDK_HOST_DEVICE_H

#include <stdbool.h>

#include "scorch/device.h"
#include "scorch/export.h"

#ifdef __cplusplus
extern "C" {
#endif

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
/* NULL with a message on failure. */
SC_API sc_fence *sc_fence_new(sc_device device);
/* NULL is fine; a pending setting still completes. */
SC_API void sc_fence_free(sc_fence *fence);
/* Sets fence after the work ctx has queued so far. */
SC_API sc_status sc_ctx_set_fence(sc_ctx *ctx, sc_fence *fence);
/* Blocks until the work before the fence's latest setting has finished. */
SC_API sc_status sc_fence_wait(sc_fence *fence);
/* Whether it has, without waiting. */
SC_API sc_status sc_fence_passed(sc_fence *fence, bool *passed);

/* Queues a copy of host tensor src into dst on ctx's device, on the
 * device's copy stream, and returns at once. The copy starts once `after`
 * has passed (NULL: at once), not after everything ctx has queued, so it
 * overlaps that work: `after` must cover every earlier reader of dst. It
 * sets `done` when it has finished, and ctx's later kernels wait for it.
 * A pinned src is read when the copy runs: keep it unchanged until `done`
 * has passed. Same dtype and element count. */
SC_API sc_status sc_tensor_upload_async(sc_ctx *ctx, sc_tensor *dst, const sc_tensor *src,
                                        sc_fence *after, sc_fence *done);

/* Queues a copy of src into dst (any two of ctx's device and the host) on
 * ctx's compute stream, after the kernels ctx queued before, and returns
 * at once. A pinned host dst is written when the copy runs: read it after
 * a fence set later (sc_ctx_set_fence) has passed. */
SC_API sc_status sc_tensor_copy_async(sc_ctx *ctx, sc_tensor *dst, const sc_tensor *src);

/* CUDA graphs. Between capture_begin and capture_end the kernels ctx
 * queues are recorded, not run; sc_graph_launch replays them with the same
 * addresses (the step arena gives a repeated op sequence the same ones).
 * The arena must not grow and nothing may wait for the GPU while capturing:
 * capture_end then fails with a message saying why, and ctx computes
 * eagerly again. CUDA contexts only. */
typedef struct sc_graph sc_graph;
SC_API sc_status sc_ctx_capture_begin(sc_ctx *ctx);
SC_API sc_status sc_ctx_capture_end(sc_ctx *ctx, sc_graph **out);
SC_API sc_status sc_graph_launch(sc_graph *graph);
SC_API void sc_graph_free(sc_graph *graph);

#ifdef __cplusplus
}
#endif
#endif
