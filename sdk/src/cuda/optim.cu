/* CUDA kernels for the fused optimizer updates: one launch per range of
 * trainable parameters in the flat buffers (a network has a handful; batch
 * norm's running statistics split them), the same formulas as optim.c;
 * and the guard's check, which stops them after a non-finite step. */
#include "cuda_impl.h"

#define GRID_STRIDE(i, n)                                                      \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); \
         i += (int64_t)gridDim.x * blockDim.x)

/* *nonfinite = 1 when *loss or one of g [n] is not finite. The threads
 * that find one all write the same value, so no atomic is needed, and a
 * finite step writes nothing. */
static __global__ void guard_kernel(int32_t *nonfinite, const float *loss, const float *g,
                                    int64_t n)
{
    bool found = blockIdx.x == 0 && threadIdx.x == 0 && !std::isfinite(*loss);
    GRID_STRIDE(i, n)
    {
        if (!std::isfinite(g[i]))
            found = true;
    }
    if (found)
        *nonfinite = 1;
}

/* Each update reads the guard's flag first and, when it is set, changes
 * nothing. */

/* p, g: [n]; p -= lr * (g + wd * p) */
static __global__ void sgd_kernel(float *p, const float *g, int64_t n, sc_optim_scalars s,
                                  const int32_t *nonfinite)
{
    if (*nonfinite)
        return;
    GRID_STRIDE(i, n) p[i] -= s.lr * (g[i] + s.weight_decay * p[i]);
}

/* p, g, buf: [n]; d = g + wd * p; buf = mu * buf + d;
 * p -= lr * (nesterov ? d + mu * buf : buf) */
static __global__ void sgd_momentum_kernel(float *p, const float *g, float *buf, int64_t n,
                                           sc_optim_scalars s, const int32_t *nonfinite)
{
    if (*nonfinite)
        return;
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
                                   sc_optim_scalars s, const int32_t *nonfinite)
{
    if (*nonfinite)
        return;
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

/* The update rule's kernel over range r, on d's compute stream. */
static sc_status launch_update(sc_cuda_dev *d, const sc_optim_update *u, sc_optim_range r)
{
    float *p = u->values + r.offset;
    const float *g = u->grads + r.offset;
    unsigned blocks = sc_cuda_blocks(r.numel);
    switch (u->rule) {
    case SC_OPTIM_RULE_ADAM:
        SC_LAUNCH(adam_kernel, blocks, SC_CUDA_THREADS, 0, d->compute, p, g,
                  u->state[0] + r.offset, u->state[1] + r.offset, r.numel, u->s, u->nonfinite);
        break;
    case SC_OPTIM_RULE_SGD_MOMENTUM:
        SC_LAUNCH(sgd_momentum_kernel, blocks, SC_CUDA_THREADS, 0, d->compute, p, g,
                  u->state[0] + r.offset, r.numel, u->s, u->nonfinite);
        break;
    case SC_OPTIM_RULE_SGD:
        SC_LAUNCH(sgd_kernel, blocks, SC_CUDA_THREADS, 0, d->compute, p, g, r.numel, u->s,
                  u->nonfinite);
        break;
    case SC_OPTIM_RULE_GUARD: /* launch_guard's */
        break;
    }
    SC_CUDA_LAUNCHED("optimizer update");
    return SC_OK;
}

/* The guard's check of the loss and of range r's gradients. */
static sc_status launch_guard(sc_cuda_dev *d, const sc_optim_update *u, sc_optim_range r)
{
    SC_LAUNCH(guard_kernel, sc_cuda_blocks(r.numel), SC_CUDA_THREADS, 0, d->compute,
              u->nonfinite, u->loss, u->grads + r.offset, r.numel);
    SC_CUDA_LAUNCHED("optimizer guard");
    return SC_OK;
}

extern "C" sc_status sc_cuda_optim_update(int index, const sc_optim_update *u)
{
    sc_cuda_scope scope;
    sc_cuda_dev *d = sc_cuda_dev_enter(index, &scope);
    sc_status st = d ? SC_OK : sc_error_code();
    for (int r = 0; st == SC_OK && r < u->n_ranges; r++)
        st = u->rule == SC_OPTIM_RULE_GUARD ? launch_guard(d, u, u->ranges[r])
                                            : launch_update(d, u, u->ranges[r]);
    sc_cuda_dev_leave(&scope);
    return st;
}
