/* CUDA kernels for the fused optimizer updates: one launch per range of
 * trainable parameters in the flat buffers (a network has a handful; batch
 * norm's running statistics and per-parameter options split them; LAMB
 * takes two per parameter, its norms first), the same formulas as optim.c;
 * and the guard's check, which stops them after a non-finite step. */
#include "cuda_impl.h"
#include "device_math.cuh"

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
        float mi = s.beta1 * m[i] + s.one_minus_beta1 * d;
        float vi = s.beta2 * v[i] + s.one_minus_beta2 * d * d;
        m[i] = mi;
        v[i] = vi;
        p[i] = p[i] * s.decay - s.step_size * mi / (sqrtf(vi) / s.bc2_sqrt + s.eps);
    }
}

/* p, g, sq: [n], buf and ga [n] or NULL; d = g + l2 * p; sq, ga = moving
 * averages of d^2, d; avg = sqrt(ga ? sq - ga^2 : sq) + eps;
 * buf ? (buf = mu * buf + d / avg, p -= lr * buf) : p -= lr * d / avg */
static __global__ void rmsprop_kernel(float *p, const float *g, float *sq, float *buf,
                                      float *ga, int64_t n, sc_optim_scalars s,
                                      const int32_t *nonfinite)
{
    if (*nonfinite)
        return;
    GRID_STRIDE(i, n)
    {
        float d = g[i] + s.l2 * p[i];
        float sqi = s.alpha * sq[i] + s.one_minus_alpha * d * d;
        sq[i] = sqi;
        float var = sqi;
        if (ga) {
            float gai = s.alpha * ga[i] + s.one_minus_alpha * d;
            ga[i] = gai;
            var = sqi - gai * gai;
        }
        float avg = sqrtf(var) + s.eps;
        if (buf) {
            float b = s.momentum * buf[i] + d / avg;
            buf[i] = b;
            p[i] -= s.lr * b;
        } else {
            p[i] -= s.lr * (d / avg);
        }
    }
}

/* p, g, m: [n]; c = beta1 * m + (1 - beta1) * g; p = p * decay - lr * sign(c);
 * m = beta2 * m + (1 - beta2) * g */
static __global__ void lion_kernel(float *p, const float *g, float *m, int64_t n,
                                   sc_optim_scalars s, const int32_t *nonfinite)
{
    if (*nonfinite)
        return;
    GRID_STRIDE(i, n)
    {
        float c = s.beta1 * m[i] + s.one_minus_beta1 * g[i];
        p[i] = p[i] * s.decay - s.lr * (float)((c > 0.0f) - (c < 0.0f));
        m[i] = s.beta2 * m[i] + s.one_minus_beta2 * g[i];
    }
}

/* LAMB's direction for one element: m / bc1 / (sqrt(v) / bc2_sqrt + eps) + wd * p */
static __device__ float lamb_direction(float p, float m, float v, const sc_optim_scalars &s)
{
    return m / s.bc1 / (sqrtf(v) / s.bc2_sqrt + s.eps) + s.weight_decay * p;
}

/* LAMB's first pass over one parameter: m, v = Adam's moving averages of
 * g, g^2; block b writes its sums of p^2 and u^2 (u = lamb_direction) to
 * partials[2b], partials[2b + 1], and zeroes the slots of the blocks up
 * to SC_OPTIM_LAMB_BLOCKS that the grid lacks. gridDim.x <=
 * SC_OPTIM_LAMB_BLOCKS, blockDim.x a multiple of 32. */
static __global__ void lamb_moments_kernel(const float *p, const float *g, float *m, float *v,
                                           int64_t n, sc_optim_scalars s, float *partials,
                                           const int32_t *nonfinite)
{
    if (*nonfinite)
        return;
    float sums[2] = {0.0f, 0.0f};
    GRID_STRIDE(i, n)
    {
        float mi = s.beta1 * m[i] + s.one_minus_beta1 * g[i];
        float vi = s.beta2 * v[i] + s.one_minus_beta2 * g[i] * g[i];
        m[i] = mi;
        v[i] = vi;
        float u = lamb_direction(p[i], mi, vi, s);
        sums[0] += p[i] * p[i];
        sums[1] += u * u;
    }
    SC_SHARED(float, warps, [2][32]);
    for (int k = 0; k < 2; k++) {
        float w = warp_sum(sums[k]);
        if (threadIdx.x % 32 == 0)
            warps[k][threadIdx.x / 32] = w;
    }
    __syncthreads();
    if (threadIdx.x >= 2)
        return;
    float sum = 0.0f;
    for (unsigned w = 0; w < blockDim.x / 32; w++)
        sum += warps[threadIdx.x][w];
    partials[2 * blockIdx.x + threadIdx.x] = sum;
    for (unsigned b = blockIdx.x + gridDim.x; b < SC_OPTIM_LAMB_BLOCKS; b += gridDim.x)
        partials[2 * b + threadIdx.x] = 0.0f;
}

/* LAMB's second pass: p -= lr * trust ratio * u, the ratio ||p|| / ||u||
 * from the first pass's partial sums (1 when either is 0 or the parameter
 * does not adapt), every thread adding them up in the same order. */
static __global__ void lamb_apply_kernel(float *p, const float *m, const float *v, int64_t n,
                                         sc_optim_scalars s, const float *partials,
                                         const int32_t *nonfinite)
{
    if (*nonfinite)
        return;
    float p_sq = 0.0f, u_sq = 0.0f;
    for (int b = 0; b < SC_OPTIM_LAMB_BLOCKS; b++) {
        p_sq += partials[2 * b];
        u_sq += partials[2 * b + 1];
    }
    float ratio = s.adapt && p_sq > 0.0f && u_sq > 0.0f ? sqrtf(p_sq / u_sq) : 1.0f;
    float step = s.lr * ratio;
    GRID_STRIDE(i, n) p[i] -= step * lamb_direction(p[i], m[i], v[i], s);
}

/* buf + off, or NULL for a state the rule does not keep. */
static float *state_at(float *buf, int64_t off) { return buf ? buf + off : NULL; }

/* LAMB's two passes over range r (one parameter). */
static void launch_lamb(sc_cuda_dev *d, const sc_optim_update *u, sc_optim_range r)
{
    float *p = u->values + r.offset, *m = u->state[0] + r.offset, *v = u->state[1] + r.offset;
    unsigned blocks = sc_cuda_blocks(r.numel);
    unsigned sum_blocks = blocks < SC_OPTIM_LAMB_BLOCKS ? blocks : (unsigned)SC_OPTIM_LAMB_BLOCKS;
    SC_LAUNCH(lamb_moments_kernel, sum_blocks, SC_CUDA_THREADS, 0, d->compute, p,
              u->grads + r.offset, m, v, r.numel, r.s, u->partials, u->nonfinite);
    SC_LAUNCH(lamb_apply_kernel, blocks, SC_CUDA_THREADS, 0, d->compute, p, m, v, r.numel, r.s,
              u->partials, u->nonfinite);
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
                  u->state[0] + r.offset, u->state[1] + r.offset, r.numel, r.s, u->nonfinite);
        break;
    case SC_OPTIM_RULE_SGD_MOMENTUM:
        SC_LAUNCH(sgd_momentum_kernel, blocks, SC_CUDA_THREADS, 0, d->compute, p, g,
                  u->state[0] + r.offset, r.numel, r.s, u->nonfinite);
        break;
    case SC_OPTIM_RULE_SGD:
        SC_LAUNCH(sgd_kernel, blocks, SC_CUDA_THREADS, 0, d->compute, p, g, r.numel, r.s,
                  u->nonfinite);
        break;
    case SC_OPTIM_RULE_RMSPROP:
        SC_LAUNCH(rmsprop_kernel, blocks, SC_CUDA_THREADS, 0, d->compute, p, g,
                  u->state[0] + r.offset, state_at(u->state[1], r.offset),
                  state_at(u->state[2], r.offset), r.numel, r.s, u->nonfinite);
        break;
    case SC_OPTIM_RULE_LAMB:
        launch_lamb(d, u, r);
        break;
    case SC_OPTIM_RULE_LION:
        SC_LAUNCH(lion_kernel, blocks, SC_CUDA_THREADS, 0, d->compute, p, g,
                  u->state[0] + r.offset, r.numel, r.s, u->nonfinite);
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
