/* CUDA kernels of the EMA of weights (scorch/ema.h): one launch per range
 * of parameters in the flat buffers, the same formulas as ema.c. */
#include "cuda_impl.h"
#include "device_math.cuh"

/* e, p: [n]; e = lerp(e, p, w) */
static __global__ void ema_lerp_kernel(float *e, const float *p, int64_t n, float w)
{
    GRID_STRIDE(i, n) e[i] = sc_ema_lerp(e[i], p[i], w);
}

/* e, p: [n]; exchanged */
static __global__ void ema_swap_kernel(float *e, float *p, int64_t n)
{
    GRID_STRIDE(i, n)
    {
        float t = e[i];
        e[i] = p[i];
        p[i] = t;
    }
}

static sc_status launch_pass(sc_cuda_dev *d, const sc_ema_pass *u, sc_ema_range r)
{
    float *e = u->ema + r.offset, *p = u->values + r.offset;
    unsigned blocks = sc_cuda_blocks(r.numel);
    if (u->op == SC_EMA_LERP)
        SC_LAUNCH(ema_lerp_kernel, blocks, SC_CUDA_THREADS, 0, d->compute, e, p, r.numel,
                  u->weight);
    else
        SC_LAUNCH(ema_swap_kernel, blocks, SC_CUDA_THREADS, 0, d->compute, e, p, r.numel);
    SC_CUDA_LAUNCHED("EMA of the weights");
    return SC_OK;
}

extern "C" sc_status sc_cuda_ema_pass(int index, const sc_ema_pass *u)
{
    sc_cuda_scope scope;
    sc_cuda_dev *d = sc_cuda_dev_enter(index, &scope);
    sc_status st = d ? SC_OK : sc_error_code();
    for (int r = 0; st == SC_OK && r < u->n_ranges; r++)
        st = launch_pass(d, u, u->ranges[r]);
    sc_cuda_dev_leave(&scope);
    return st;
}
