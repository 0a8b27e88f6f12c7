/* device_math.cuh — device-side helpers the CUDA kernels share. Private
 * to libscorch. */
#ifndef SCORCH_CUDA_DEVICE_MATH_CUH
#define SCORCH_CUDA_DEVICE_MATH_CUH

/* The sum of v over the 32 lanes of a warp, in every lane. */
static __device__ __forceinline__ float warp_sum(float v)
{
    for (int offset = 16; offset > 0; offset /= 2)
        v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

#endif
