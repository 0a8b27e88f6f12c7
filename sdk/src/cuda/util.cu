/* CUDA kernels the backend shares: filling and scaling a buffer, and the
 * bf16 copies that precision bf16 feeds to matrix products. */
#include <cuda_bf16.h>

#include "cuda_impl.h"
#include "device_math.cuh"

/* p [n] = value */
static __global__ void fill_kernel(float *p, float value, int64_t n)
{
    GRID_STRIDE(i, n)
        p[i] = value;
}

/* p [n] *= factor */
static __global__ void scale_kernel(float *p, float factor, int64_t n)
{
    GRID_STRIDE(i, n)
        p[i] *= factor;
}

/* y [n] = bf16(x [n]), rounded to nearest even */
static __global__ void to_bf16_kernel(__nv_bfloat16 *y, const float *x, int64_t n)
{
    GRID_STRIDE(i, n)
        y[i] = __float2bfloat16_rn(x[i]);
}

static sc_status fill_on(sc_cuda_dev *d, float *p, float value, int64_t n)
{
    SC_LAUNCH(fill_kernel, sc_cuda_blocks(n), SC_CUDA_THREADS, 0, d->compute, p, value, n);
    SC_CUDA_LAUNCHED("fill");
    return SC_OK;
}

static sc_status scale_on(sc_cuda_dev *d, float *p, float factor, int64_t n)
{
    SC_LAUNCH(scale_kernel, sc_cuda_blocks(n), SC_CUDA_THREADS, 0, d->compute, p, factor, n);
    SC_CUDA_LAUNCHED("scale");
    return SC_OK;
}

extern "C" sc_status sc_cuda_fill_f32(int index, float *p, float value, int64_t n)
{
    sc_cuda_scope scope;
    sc_cuda_dev *d = sc_cuda_dev_enter(index, &scope);
    sc_status st = d ? fill_on(d, p, value, n) : sc_error_code();
    sc_cuda_dev_leave(&scope);
    return st;
}

extern "C" sc_status sc_cuda_scale_f32(int index, float *p, float factor, int64_t n)
{
    sc_cuda_scope scope;
    sc_cuda_dev *d = sc_cuda_dev_enter(index, &scope);
    sc_status st = d ? scale_on(d, p, factor, n) : sc_error_code();
    sc_cuda_dev_leave(&scope);
    return st;
}

extern "C" void *sc_cuda_to_bf16(sc_ctx *ctx, const float *x, int64_t n)
{
    __nv_bfloat16 *y = (__nv_bfloat16 *)sc_ctx_alloc_data(ctx, (size_t)n * sizeof *y);
    if (!y)
        return NULL;
    SC_LAUNCH(to_bf16_kernel, sc_cuda_blocks(n), SC_CUDA_THREADS, 0, sc_cuda_stream(ctx), y, x, n);
    if (cudaPeekAtLastError() != cudaSuccess) {
        sc_cuda_error(cudaGetLastError(), "to_bf16_kernel", __FILE__, __LINE__);
        return NULL;
    }
    return y;
}

extern "C" const void *sc_cuda_operand(sc_ctx *ctx, const sc_tensor *t)
{
    if (ctx->precision == SC_PRECISION_BF16)
        return sc_cuda_to_bf16(ctx, sc_tensor_f32(t), t->numel);
    return t->data;
}
