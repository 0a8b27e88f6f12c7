/* ema_impl.h — one EMA pass as the backends see it: the flat parameter
 * buffer, the EMA's buffer of the same layout, and the ranges of
 * parameters (not buffers) it covers. Private to libscorch; the CPU loops
 * live in ema.c, the CUDA kernels in cuda/ema.cu. */
#ifndef SCORCH_EMA_IMPL_H
#define SCORCH_EMA_IMPL_H

#include <stdint.h>

/* A maximal run of parameters (no buffer) in the flat buffers, in floats. */
typedef struct sc_ema_range {
    int64_t offset, numel;
} sc_ema_range;

typedef enum sc_ema_op {
    SC_EMA_LERP, /* ema = lerp(ema, values, weight) */
    SC_EMA_SWAP, /* exchange ema and values */
} sc_ema_op;

typedef struct sc_ema_pass {
    sc_ema_op op;
    float *ema;    /* [numel] */
    float *values; /* [numel] flat parameters */
    const sc_ema_range *ranges;
    int n_ranges;
    float weight; /* LERP: 1 - decay, rounded once */
} sc_ema_pass;

/* torch's lerp (aten/src/ATen/native/Lerp.h): the form for a small weight,
 * or the one exact at weight 1. Host and device. */
#if defined(__host__) && defined(__device__) /* a CUDA compiler, or the emulator */
__host__ __device__
#endif
static inline float sc_ema_lerp(float e, float p, float w)
{
    return w < 0.5f ? e + w * (p - e) : p - (p - e) * (1.0f - w);
}

#endif
