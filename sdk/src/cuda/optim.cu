/* CUDA kernels for the fused optimizer updates: one launch per range of
 * trainable parameters in the flat buffers (a network has a handful; batch
 * norm's running statistics split them), the same formulas as optim.c. */
#include "cuda_impl.h"

#define GRID_STRIDE(i, n)                                                      \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); \
         i += (int64_t)gridDim.x * blockDim.x)

/* p, g: [n]; p -= lr * (g + wd * p) */
static __global__ void sgd_kernel(float *p, const float *g, int64_t n, sc_optim_scalars s)
{
    GRID_STRIDE(i, n) p[i] -= s.lr * (g[i] + s.weight_decay * p[i]);
}

/* p, g, buf: [n]; d = g + wd * p; buf = mu * buf + d;
 * p -= lr * (nesterov ? d + mu * buf : buf) */
static __global__ void sgd_momentum_kernel(float *p, const float *g, float *buf, int64_t n,
                                           sc_optim_scalars s)
{
    GRID_STRIDE(i, n)
    {
        float d = g[i] + s.weight_decay * p[i];
        float b = s.momentum * buf[i] + d;
        buf[i] = b;
        p[i] -= s.lr * (s.nesterov ? d + s.momentum * b : b);
    }
}

/* p, g, m, v: [n]; d = g + l2 * p; m, v = moving averages of d, d^2;
 * p = p * decay - step_size * m / (sqrt(v) / bc2_sqrt + eps) */
static __global__ void adam_kernel(float *p, const float *g, float *m, float *v, int64_t n,
                                   sc_optim_scalars s)
{
    GRID_STRIDE(i, n)
    {
        float d = g[i] + s.l2 * p[i];
        float mi = s.beta1 * m[i] + (1.0f - s.beta1) * d;
        float vi = s.beta2 * v[i] + (1.0f - s.beta2) * d * d;
        m[i] = mi;
        v[i] = vi;
        p[i] = p[i] * s.decay - s.step_size * mi / (sqrtf(vi) / s.bc2_sqrt + s.eps);
    }
}

extern "C" sc_status sc_cuda_optim_update(int index, const sc_optim_update *u)
{
    sc_cuda_dev *d = sc_cuda_dev_get(index);
    if (!d)
        return sc_error_code();
    for (int r = 0; r < u->n_ranges; r++) {
        int64_t off = u->ranges[r].offset, n = u->ranges[r].numel;
        float *p = u->values + off;
        const float *g = u->grads + off;
        unsigned blocks = sc_cuda_blocks(n);
        switch (u->rule) {
        case SC_OPTIM_RULE_ADAM:
            SC_LAUNCH(adam_kernel, blocks, SC_CUDA_THREADS, 0, d->compute, p, g, u->state[0] + off,
                      u->state[1] + off, n, u->s);
            break;
        case SC_OPTIM_RULE_SGD_MOMENTUM:
            SC_LAUNCH(sgd_momentum_kernel, blocks, SC_CUDA_THREADS, 0, d->compute, p, g,
                      u->state[0] + off, n, u->s);
            break;
        case SC_OPTIM_RULE_SGD:
            SC_LAUNCH(sgd_kernel, blocks, SC_CUDA_THREADS, 0, d->compute, p, g, n, u->s);
            break;
        }
        SC_CUDA_LAUNCHED("optimizer update");
    }
    return SC_OK;
}
