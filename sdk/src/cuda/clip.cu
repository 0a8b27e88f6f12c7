/* CUDA kernels for gradient clipping (grad_clip.c): the global L2 norm in
 * two deterministic passes (a fixed grid of partial sums in double, then
 * one thread over them in order), the scale computed and applied on the
 * device (the host never waits for the norm), and the clamp. */
#include "cuda_impl.h"
#include "device_math.cuh"

/* partials[block] = sum of g[i]^2 over the block's grid-stride elements,
 * in double; the block's threads summed in a fixed tree. */
static __global__ void sum_squares_kernel(const float *g, int64_t n, double *partials)
{
    SC_SHARED(double, part, [SC_CUDA_THREADS]);
    double s = 0;
    GRID_STRIDE(i, n) s += (double)g[i] * (double)g[i];
    part[threadIdx.x] = s;
    __syncthreads();
    for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
        if (threadIdx.x < half)
            part[threadIdx.x] += part[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        partials[blockIdx.x] = part[0];
}

/* As grad_clip.c's clip_coef: PyTorch's float32 max_norm / (norm + 1e-6),
 * clamped to 1; NaN stays NaN. */
static __device__ float clip_coef(float max_norm, float norm)
{
    float coef = (1.0f / (norm + 1e-6f)) * max_norm;
    return coef > 1.0f ? 1.0f : coef;
}

/* One thread: *norm from the blocks' partial sums, in order; *coef. */
static __global__ void finish_norm_kernel(const double *partials, unsigned blocks,
                                          float max_norm, float *norm, float *coef)
{
    double total = 0;
    for (unsigned b = 0; b < blocks; b++)
        total += partials[b];
    float v = (float)sqrt(total);
    *norm = v;
    *coef = clip_coef(max_norm, v);
}

/* g: [n]; g *= *coef, unless it is 1 */
static __global__ void scale_kernel(float *g, int64_t n, const float *coef)
{
    float c = *coef;
    if (c == 1.0f)
        return;
    GRID_STRIDE(i, n) g[i] *= c;
}

/* g: [n]; each into [-v, v]; NaN stays NaN, as torch.clamp */
static __global__ void clamp_kernel(float *g, int64_t n, float v)
{
    GRID_STRIDE(i, n) g[i] = g[i] < -v ? -v : g[i] > v ? v : g[i];
}

static sc_status launch_norm(sc_cuda_dev *d, float *g, int64_t n, double max_norm, bool scale,
                             double *partials, float *norm, float *coef)
{
    unsigned blocks = sc_cuda_blocks(n);
    if (blocks > SC_CUDA_CLIP_BLOCKS)
        blocks = SC_CUDA_CLIP_BLOCKS;
    SC_LAUNCH(sum_squares_kernel, blocks, SC_CUDA_THREADS, 0, d->compute, g, n, partials);
    SC_CUDA_LAUNCHED("gradient norm");
    SC_LAUNCH(finish_norm_kernel, 1, 1, 0, d->compute, partials, blocks, (float)max_norm, norm,
              coef);
    SC_CUDA_LAUNCHED("gradient norm");
    if (!scale)
        return SC_OK;
    SC_LAUNCH(scale_kernel, sc_cuda_blocks(n), SC_CUDA_THREADS, 0, d->compute, g, n, coef);
    SC_CUDA_LAUNCHED("gradient clipping");
    return SC_OK;
}

extern "C" sc_status sc_cuda_grad_clip_norm(int index, float *g, int64_t n, double max_norm,
                                            bool scale, double *partials, float *norm,
                                            float *coef)
{
    sc_cuda_scope scope;
    sc_cuda_dev *d = sc_cuda_dev_enter(index, &scope);
    sc_status st = d ? launch_norm(d, g, n, max_norm, scale, partials, norm, coef)
                     : sc_error_code();
    sc_cuda_dev_leave(&scope);
    return st;
}

static sc_status launch_clamp(sc_cuda_dev *d, float *g, int64_t n, float value)
{
    if (n == 0)
        return SC_OK;
    SC_LAUNCH(clamp_kernel, sc_cuda_blocks(n), SC_CUDA_THREADS, 0, d->compute, g, n, value);
    SC_CUDA_LAUNCHED("gradient clamp");
    return SC_OK;
}

extern "C" sc_status sc_cuda_grad_clamp(int index, float *g, int64_t n, float value)
{
    sc_cuda_scope scope;
    sc_cuda_dev *d = sc_cuda_dev_enter(index, &scope);
    sc_status st = d ? launch_clamp(d, g, n, value) : sc_error_code();
    sc_cuda_dev_leave(&scope);
    return st;
}
