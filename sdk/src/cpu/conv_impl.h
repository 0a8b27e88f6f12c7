/* conv_impl.h — what the CPU convolution kernels share: the batch split
 * over threads, the sum of per-thread partials, GEMMs in small pieces,
 * and the Winograd path (conv_winograd.c). Private to the CPU backend. */
#ifndef SCORCH_CPU_CONV_IMPL_H
#define SCORCH_CPU_CONV_IMPL_H

#include <cblas.h>

#include "cpu.h"
#include "scorch_host/context.h"

/* Threads splitting a batch of n images: all of them when every thread
 * gets an image, else 1 (and GEMMs thread themselves). */
int sc_conv_slots(int64_t n);

/* Calls fn(arg, slot, n0, n1) with slot s of `slots` taking the s-th of
 * `slots` contiguous runs [n0, n1) of the n images, each slot on its own
 * thread. */
typedef void (*sc_conv_range_fn)(const void *arg, int slot, int64_t n0, int64_t n1);
void sc_conv_split(int64_t n, int slots, sc_conv_range_fn fn, const void *arg);

/* dst [len] += the sum of the partials [slots, len], in slot order. */
void sc_conv_sum_partials(float *dst, const float *parts, int slots, int64_t len);

/* c [m, n] = op(a) op(b) (+ c where beta is 1), row-major, in pieces of
 * rows of c of at most SC_CONV_SMALL_GEMM multiply-adds. OpenBLAS runs a
 * product that small with the "small matrix" kernels of its AVX-512
 * builds, which read the operands where they are, and a larger one by
 * packing them first, after zeroing c where beta is 0. The convolutions'
 * forward and input-gradient products ran faster so (one thread, batch
 * 128: a ResNet's stride-2 3x3 layers by im2col 11-13% forward and 5-7%
 * backward, its 128-channel Winograd layer at 7x7 10-14% and 5%); the
 * weight gradients' products stay whole: im2col's ran slower in pieces,
 * Winograd's no faster. */
enum { SC_CONV_SMALL_GEMM = 1000000 };
void sc_conv_sgemm_small(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n,
                         int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                         float beta, float *c, int64_t ldc);

/* The CPU convolutions' setting (sc_cpu_set_conv). */
sc_cpu_conv sc_cpu_conv_setting(void);

/* A 3x3 convolution at stride 1, dilation 1, one group: x [N, C, H, W],
 * weight [K, C, 3, 3] -> y [N, K, OH, OW], padding ph, pw, computed by
 * F(m x m, 3x3), m = 2 or 4; C and K at least 8 (conv_winograd.c's
 * segment_tiles relies on it). */
typedef struct sc_wino_shape {
    int64_t n, c, h, w, k, oh, ow;
    int ph, pw;
    int m;
} sc_wino_shape;

/* y = conv(x, weight) + bias (bias may be NULL). */
sc_status sc_wino_forward(sc_ctx *ctx, const sc_wino_shape *s, const float *x,
                          const float *weight, const float *bias, float *y);

/* For the loss sum(y gy): gx += its gradient for x (= when gx_fresh: gx
 * is uninitialised), gw += its gradient for weight; either may be NULL. */
sc_status sc_wino_backward(sc_ctx *ctx, const sc_wino_shape *s, const float *x,
                           const float *weight, const float *gy, float *gx, bool gx_fresh,
                           float *gw);

#endif
