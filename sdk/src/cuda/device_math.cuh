/* device_math.cuh — device-side helpers the CUDA kernels share. Private
 * to libscorch. */
#ifndef SCORCH_CUDA_DEVICE_MATH_CUH
#define SCORCH_CUDA_DEVICE_MATH_CUH

/* for (i = this thread's first index; i < n; i += the grid's thread count):
 * a loop over n elements whatever the grid's size, each element visited by
 * one thread. */
#define GRID_STRIDE(i, n)                                                      \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); \
         i += (int64_t)gridDim.x * blockDim.x)

/* The sum of v over the 32 lanes of a warp, in every lane. */
static __device__ __forceinline__ float warp_sum(float v)
{
    for (int offset = 16; offset > 0; offset /= 2)
        v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

/* y = max(x, 0); NaN stays NaN (as in PyTorch), so a broken input shows
 * up in the loss instead of vanishing. A unary op's functor (eltwise.cu),
 * also batch norm's fused relu (norm.cu). */
struct relu_op {
    __device__ float forward(float x) const { return x < 0.0f ? 0.0f : x; }
    __device__ float backward(float x, float y, float g) const { return x > 0.0f ? g : 0.0f; }
};

#endif
