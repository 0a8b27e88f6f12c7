/* scorch_host/context.h — the host's controls of a context and of the
 * CPU backend's threads and convolutions.
 *
 * Host only: not installed, exported under SCORCH_HOST_1, and refused
 * while plugin code runs (scorch_host/plugin.h): a plugin that ended the
 * step, or changed the mode, precision, thread count or convolutions under
 * the host, would break the step it was called from. docs/abi.md, "What
 * libscorch exports".
 */
#ifndef SCORCH_SDK_HOST_CONTEXT_H
#define SCORCH_SDK_HOST_CONTEXT_H

#include "scorch/context.h"
#include "scorch/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Training mode (sc_ctx_training), set per phase. */
SC_API void sc_ctx_set_training(sc_ctx *ctx, bool training);

/* Arithmetic precision of the GPU kernels (sc_precision). */
SC_API void sc_ctx_set_precision(sc_ctx *ctx, sc_precision precision);
/* "fp32", "tf32", "bf16" -> precision. */
SC_API sc_status sc_precision_parse(const char *name, sc_precision *out);

/* Ends a step: forgets the tape and recycles the arena. Every step tensor
 * and sc_ctx_alloc() block becomes invalid. The arena keeps its blocks and
 * starts again at the first, so the same op sequence gets the same
 * addresses every step. */
SC_API void sc_ctx_reset(sc_ctx *ctx);

/* Threads the CPU backend computes with (OpenMP loops and OpenBLAS);
 * 0 means one per core. Call before training, not during a step. */
SC_API void sc_cpu_set_threads(int threads);

/* Whether a CPU thread that waits for the others spins only briefly (100
 * turns, then sleeps) rather than as long as libgomp was told at start
 * (GOMP_SPINCOUNT). By default libscorch turns short waits on when
 * sc_cpu_set_threads fills the cores and neither GOMP_SPINCOUNT nor
 * OMP_WAIT_POLICY is set; once called, this alone decides. Between
 * steps only. */
SC_API void sc_cpu_set_short_waits(bool on);

/* How the CPU backend computes 3x3 convolutions at stride 1 with 8
 * channels or more in and out (docs/cli.md, --cpu-conv): by Winograd's
 * F(4x4, 3x3) where it multiplies at most 3/4 as much as F(2x2, 3x3)
 * (outputs cut into whole or nearly whole 4x4 tiles), else F(2x2) (AUTO,
 * the default); by F(2x2, 3x3) only, whose rounding error is about a
 * quarter of F(4x4)'s, as small as im2col's (WINOGRAD2); or by im2col
 * and a matrix product, as every other convolution (GEMM). Call before
 * training, not during a step. */
typedef enum sc_cpu_conv {
    SC_CPU_CONV_AUTO,
    SC_CPU_CONV_WINOGRAD2,
    SC_CPU_CONV_GEMM,
} sc_cpu_conv;
SC_API void sc_cpu_set_conv(sc_cpu_conv conv);
/* "auto", "winograd2", "gemm" -> conv. */
SC_API sc_status sc_cpu_conv_parse(const char *name, sc_cpu_conv *out);

#ifdef __cplusplus
}
#endif
#endif
