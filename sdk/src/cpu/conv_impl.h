/* conv_impl.h — what the CPU convolution kernels share: the batch split
 * over threads, the sum of per-thread partials, and the Winograd path
 * (conv_winograd.c). Private to the CPU backend. */
#ifndef SCORCH_CPU_CONV_IMPL_H
#define SCORCH_CPU_CONV_IMPL_H

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
