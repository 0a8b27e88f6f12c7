/* CUDA kernels for element-wise ops: broadcasting add/sub/mul, scale,
 * activations and dropout. Every kernel runs on the context's compute
 * stream; loops are grid-stride over 64-bit indices. */
#include <math.h>

#include "cuda_impl.h"
#include "device_math.cuh"

/* A broadcast operand's gradient sums its terms with a block per element
 * when each has more than GRAD_BLOCK_TERMS terms and there are fewer than
 * GRAD_BLOCK_ELEMS elements (a bias [C] of [N, C, H, W]); otherwise with a
 * thread per element (no broadcast, or many short sums). */
enum { GRAD_BLOCK_TERMS = 32, GRAD_BLOCK_ELEMS = 1 << 16 };

/* ---------------------------------------------------------------------
 * Broadcasting. An index space is a row-major grid of dimensions and, for
 * two tensors, the stride each steps by along every dimension (0 where it
 * broadcasts). The output's space has dimensions of 1 dropped and
 * neighbours that broadcast alike merged, as on the CPU: [N, C] + [N, C] is
 * one flat run (no division per element), [N, C] + [C] is [N, C] with b's
 * strides [0, 1], and [N, C, H, W] + [C, 1, 1] is [N, C, H W] with b's
 * strides [0, 1, 0]. */

typedef struct space {
    int nd; /* >= 1 */
    int64_t dim[SC_MAX_DIMS];
    int64_t stride[2][SC_MAX_DIMS];
} space;

/* off [2] = the two tensors' offsets at flat index i of s. */
static __device__ __forceinline__ void space_offsets(const space &s, int64_t i, int64_t off[2])
{
    off[0] = off[1] = 0;
#pragma unroll
    for (int d = SC_MAX_DIMS - 1; d > 0; d--)
        if (d < s.nd) {
            int64_t k = i % s.dim[d];
            i /= s.dim[d];
            off[0] += k * s.stride[0][d];
            off[1] += k * s.stride[1][d];
        }
    off[0] += i * s.stride[0][0];
    off[1] += i * s.stride[1][0];
}

/* Dimension d of t once its shape is right-aligned to nd dimensions. */
static int64_t aligned_dim(const sc_tensor *t, int nd, int d)
{
    int k = d - (nd - t->ndim);
    return k < 0 ? 1 : t->shape[k];
}

/* The output's space, with the strides of operands in[0] and in[1]. */
static space bcast_space(const sc_node *node)
{
    const sc_tensor *out = node->out;
    bool spans[2][SC_MAX_DIMS]; /* operand i spans collapsed dim d */
    space s = {};
    for (int d = 0; d < out->ndim; d++) {
        int64_t n = out->shape[d];
        if (n == 1)
            continue;
        bool s0 = aligned_dim(node->in[0], out->ndim, d) == n;
        bool s1 = aligned_dim(node->in[1], out->ndim, d) == n;
        int k = s.nd;
        if (k > 0 && spans[0][k - 1] == s0 && spans[1][k - 1] == s1) {
            s.dim[k - 1] *= n;
            continue;
        }
        s.dim[k] = n;
        spans[0][k] = s0;
        spans[1][k] = s1;
        s.nd++;
    }
    if (s.nd == 0) { /* every operand holds one element */
        s.nd = 1;
        s.dim[0] = 1;
        spans[0][0] = spans[1][0] = true;
    }
    for (int i = 0; i < 2; i++) {
        int64_t st = 1;
        for (int d = s.nd - 1; d >= 0; d--) {
            s.stride[i][d] = spans[i][d] ? st : 0;
            st *= spans[i][d] ? s.dim[d] : 1;
        }
    }
    return s;
}

template <sc_op_id Op> static __device__ __forceinline__ float binop(float a, float b)
{
    return Op == SC_OP_ADD ? a + b : Op == SC_OP_SUB ? a - b : a * b;
}

/* y [numel] = a op b (relu: relu(a op b)), a and b read at their
 * broadcast offsets */
template <sc_op_id Op>
static __global__ void binary_forward_kernel(space s, int64_t numel, const float *a,
                                             const float *b, bool relu, float *y)
{
    GRID_STRIDE(o, numel)
    {
        int64_t off[2];
        space_offsets(s, o, off);
        float v = binop<Op>(a[off[0]], b[off[1]]);
        y[o] = relu ? relu_op().forward(v) : v;
    }
}

static sc_status binary_forward(sc_node *node)
{
    space s = bcast_space(node);
    int64_t n = node->out->numel;
    unsigned blocks = sc_cuda_blocks(n);
    cudaStream_t st = sc_cuda_stream(node->ctx);
    const float *a = sc_tensor_f32(node->in[0]), *b = sc_tensor_f32(node->in[1]);
    float *y = sc_tensor_f32(node->out);
    bool relu = node->params.binary.relu;
    switch (node->op) {
    case SC_OP_ADD:
        SC_LAUNCH(binary_forward_kernel<SC_OP_ADD>, blocks, SC_CUDA_THREADS, 0, st, s, n, a, b,
                  relu, y);
        break;
    case SC_OP_SUB:
        SC_LAUNCH(binary_forward_kernel<SC_OP_SUB>, blocks, SC_CUDA_THREADS, 0, st, s, n, a, b,
                  relu, y);
        break;
    default:
        SC_LAUNCH(binary_forward_kernel<SC_OP_MUL>, blocks, SC_CUDA_THREADS, 0, st, s, n, a, b,
                  relu, y);
        break;
    }
    SC_CUDA_LAUNCHED("binary_forward_kernel");
    return SC_OK;
}

/* The gradient of operand x: gx [numel] += sign * the sum of g * k over
 * the output elements that read each gx element (its terms). own is x's
 * space and red the space of the dimensions x broadcasts along, both with
 * the strides of the output (g) and of the other operand (k, for mul;
 * k NULL means 1). Element j of gx and its term r read offset
 * own(j) + red(r) of each. After a fused relu (sc_add_relu), g is masked
 * by the output y, read like g (y NULL: no relu). */
typedef struct bcast_grad {
    space own, red;
    int64_t numel, terms;
} bcast_grad;

/* x's gradient space in the output's space s; k_operand < 0: no k. */
static bcast_grad bcast_grad_of(const space &s, int x, int k_operand)
{
    bcast_grad bg = {};
    bg.numel = bg.terms = 1;
    int64_t out_stride[SC_MAX_DIMS], st = 1;
    for (int d = s.nd - 1; d >= 0; d--) {
        out_stride[d] = st;
        st *= s.dim[d];
    }
    for (int d = 0; d < s.nd; d++) {
        bool owns = s.stride[x][d] != 0;
        space *t = owns ? &bg.own : &bg.red;
        t->dim[t->nd] = s.dim[d];
        t->stride[0][t->nd] = out_stride[d];
        t->stride[1][t->nd] = k_operand >= 0 ? s.stride[k_operand][d] : 0;
        t->nd++;
        *(owns ? &bg.numel : &bg.terms) *= s.dim[d];
    }
    space *spaces[2] = {&bg.own, &bg.red};
    for (space *t : spaces)
        if (t->nd == 0) { /* one element (x a scalar) or one term (no broadcast) */
            t->nd = 1;
            t->dim[0] = 1;
        }
    return bg;
}

/* The sum of g * k over terms r0, r0 + dr, ... of gx element j. */
static __device__ __forceinline__ float grad_terms(const bcast_grad &bg, const float *g,
                                                   const float *y, const float *k, int64_t j,
                                                   int64_t r0, int64_t dr)
{
    int64_t base[2], off[2];
    space_offsets(bg.own, j, base);
    float acc = 0.0f;
    for (int64_t r = r0; r < bg.terms; r += dr) {
        space_offsets(bg.red, r, off);
        int64_t o = base[0] + off[0];
        float gv = y ? relu_op().backward(y[o], y[o], g[o]) : g[o];
        acc += k ? gv * k[base[1] + off[1]] : gv;
    }
    return acc;
}

/* gx [numel] += sign * sum of its terms, a thread per element; with no
 * broadcast (one term) this is gx [n] += sign * g [n] * k [n]. */
static __global__ void bcast_grad_thread_kernel(bcast_grad bg, const float *g, const float *y,
                                                const float *k, float sign, float *gx)
{
    GRID_STRIDE(j, bg.numel) gx[j] += sign * grad_terms(bg, g, y, k, j, 0, 1);
}

/* The sum of v over the block, complete in thread 0; blockDim.x a
 * multiple of 32, at most 1024. */
static __device__ float block_sum(float v)
{
    SC_SHARED(float, part, [32]);
    v = warp_sum(v);
    if (threadIdx.x % 32 == 0)
        part[threadIdx.x / 32] = v;
    __syncthreads();
    for (unsigned w = 1; threadIdx.x == 0 && w < blockDim.x / 32; w++)
        v += part[w];
    return v;
}

/* gx [numel] += sign * sum of its terms, block j summing element j's
 * (gridDim.x = numel), in a fixed order. */
static __global__ void bcast_grad_block_kernel(bcast_grad bg, const float *g, const float *y,
                                               const float *k, float sign, float *gx)
{
    int64_t j = blockIdx.x;
    float sum = block_sum(grad_terms(bg, g, y, k, j, threadIdx.x, blockDim.x));
    if (threadIdx.x == 0)
        gx[j] += sign * sum;
}

/* Each gx element has one owner, so the sums are deterministic and
 * operands that are the same tensor (a * a) accumulate in turn. */
static sc_status binary_backward(sc_node *node, const sc_tensor *gout,
                                 sc_tensor *const *gin)
{
    space s = bcast_space(node);
    cudaStream_t st = sc_cuda_stream(node->ctx);
    bool mul = node->op == SC_OP_MUL;
    for (int x = 0; x < 2; x++) {
        if (!gin[x])
            continue;
        bcast_grad bg = bcast_grad_of(s, x, mul ? 1 - x : -1);
        const float *g = sc_tensor_f32(gout), *k = mul ? sc_tensor_f32(node->in[1 - x]) : NULL;
        const float *y = node->params.binary.relu ? sc_tensor_f32(node->out) : NULL;
        float sign = node->op == SC_OP_SUB && x == 1 ? -1.0f : 1.0f;
        float *gx = sc_tensor_f32(gin[x]);
        if (bg.terms > GRAD_BLOCK_TERMS && bg.numel > 0 && bg.numel < GRAD_BLOCK_ELEMS)
            SC_LAUNCH(bcast_grad_block_kernel, (unsigned)bg.numel, SC_CUDA_THREADS, 0, st, bg, g, y,
                      k, sign, gx);
        else
            SC_LAUNCH(bcast_grad_thread_kernel, sc_cuda_blocks(bg.numel), SC_CUDA_THREADS, 0, st,
                      bg, g, y, k, sign, gx);
        SC_CUDA_LAUNCHED("bcast_grad_kernel");
    }
    return SC_OK;
}

/* ---------------------------------------------------------------------
 * Unary ops: x, y, g [numel], any shape. Each op is a functor with
 * forward(x) = y and backward(x, y, g) = g dy/dx, from whichever of x and
 * y is cheaper (the kernels' unused loads compile away). */

/* y = factor * x */
struct scale_op {
    float factor;
    __device__ float forward(float x) const { return factor * x; }
    __device__ float backward(float x, float y, float g) const { return factor * g; }
};

/* relu_op: device_math.cuh */

/* y = tanh x; dy/dx = 1 - y^2, from the output */
struct tanh_op {
    __device__ float forward(float x) const { return tanhf(x); }
    __device__ float backward(float x, float y, float g) const { return g * (1.0f - y * y); }
};

/* y = 1 / (1 + exp(-x)); dy/dx = y (1 - y), from the output */
struct sigmoid_op {
    __device__ float forward(float x) const { return 1.0f / (1.0f + expf(-x)); }
    __device__ float backward(float x, float y, float g) const { return g * y * (1.0f - y); }
};

/* y = x Phi(x), Phi the standard normal CDF (the exact, erf form);
 * dy/dx = Phi(x) + x phi(x), phi the standard normal density */
struct gelu_op {
    static constexpr float inv_sqrt_2 = 0.70710678118654752f;
    static constexpr float inv_sqrt_2pi = 0.39894228040143268f;
    __device__ float forward(float x) const { return 0.5f * x * (1.0f + erff(x * inv_sqrt_2)); }
    __device__ float backward(float x, float y, float g) const
    {
        float cdf = 0.5f * (1.0f + erff(x * inv_sqrt_2));
        float pdf = inv_sqrt_2pi * expf(-0.5f * x * x);
        return g * (cdf + x * pdf);
    }
};

/* The functor of node's op: its parameters, if any. */
template <typename Op> static Op op_of(const sc_node *node) { return Op{}; }
template <> scale_op op_of<scale_op>(const sc_node *node)
{
    return scale_op{node->params.scale.factor};
}

/* y [n] = op.forward(x) */
template <typename Op>
static __global__ void unary_forward_kernel(Op op, const float *x, float *y, int64_t n)
{
    GRID_STRIDE(i, n) y[i] = op.forward(x[i]);
}

/* gx [n] += op.backward(x, y, g) */
template <typename Op>
static __global__ void unary_backward_kernel(Op op, const float *x, const float *y,
                                             const float *g, float *gx, int64_t n)
{
    GRID_STRIDE(i, n) gx[i] += op.backward(x[i], y[i], g[i]);
}

template <typename Op> static sc_status unary_forward(sc_node *node)
{
    int64_t n = node->out->numel;
    SC_LAUNCH(unary_forward_kernel, sc_cuda_blocks(n), SC_CUDA_THREADS, 0,
              sc_cuda_stream(node->ctx), op_of<Op>(node), sc_tensor_f32(node->in[0]),
              sc_tensor_f32(node->out), n);
    SC_CUDA_LAUNCHED("unary_forward_kernel");
    return SC_OK;
}

template <typename Op>
static sc_status unary_backward(sc_node *node, const sc_tensor *gy, sc_tensor *const *gin)
{
    int64_t n = gy->numel;
    SC_LAUNCH(unary_backward_kernel, sc_cuda_blocks(n), SC_CUDA_THREADS, 0,
              sc_cuda_stream(node->ctx), op_of<Op>(node), sc_tensor_f32(node->in[0]),
              sc_tensor_f32(node->out), sc_tensor_f32(gy), sc_tensor_f32(gin[0]), n);
    SC_CUDA_LAUNCHED("unary_backward_kernel");
    return SC_OK;
}

/* ---------------------------------------------------------------------
 * Dropout. An element is kept when a 32-bit draw is at least p * 2^32, as
 * on the CPU, but the draws come from a counter-based hash of (seed,
 * index), the seed one draw from the context's step stream: the same
 * distribution as the CPU's, not the same bits. The mask (u8, one byte an
 * element) is saved for backward. */

/* The 32 high bits of splitmix64's output number i + 1 from state seed. */
static __device__ __forceinline__ uint32_t draw32(uint64_t seed, uint64_t i)
{
    uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (uint32_t)((z ^ (z >> 31)) >> 32);
}

/* m [n] = draw >= threshold; y [n] = x * m * scale */
static __global__ void dropout_forward_kernel(const float *x, float *y, uint8_t *m, int64_t n,
                                              uint64_t seed, uint32_t threshold, float scale)
{
    GRID_STRIDE(i, n)
    {
        uint8_t keep = draw32(seed, (uint64_t)i) >= threshold;
        m[i] = keep;
        y[i] = x[i] * ((float)keep * scale);
    }
}

/* gx [n] += g * m * scale */
static __global__ void dropout_backward_kernel(const uint8_t *m, const float *g, float *gx,
                                               int64_t n, float scale)
{
    GRID_STRIDE(i, n) gx[i] += g[i] * ((float)m[i] * scale);
}

/* y = x * mask / (1 - p); the op front runs it only in training with
 * p in (0, 1) (otherwise dropout is x itself). The seed is drawn here, on
 * the host, and passed by value. */
static sc_status dropout_forward(sc_node *node)
{
    const sc_tensor *xt = node->in[0];
    sc_tensor *mask = sc_tensor_new(node->ctx, SC_U8, xt->ndim, xt->shape);
    if (!mask)
        return SC_ERR_NOMEM;
    node->saved[0] = mask;
    float p = node->params.dropout.p, scale = 1.0f / (1.0f - p);
    uint32_t threshold = (uint32_t)ldexp(p, 32); /* p < 1: fits */
    uint64_t seed = sc_rng_u64(sc_ctx_rng(node->ctx));
    int64_t n = xt->numel;
    SC_LAUNCH(dropout_forward_kernel, sc_cuda_blocks(n), SC_CUDA_THREADS, 0,
              sc_cuda_stream(node->ctx), sc_tensor_f32(xt), sc_tensor_f32(node->out),
              (uint8_t *)mask->data, n, seed, threshold, scale);
    SC_CUDA_LAUNCHED("dropout_forward_kernel");
    return SC_OK;
}

static sc_status dropout_backward(sc_node *node, const sc_tensor *gy, sc_tensor *const *gin)
{
    float scale = 1.0f / (1.0f - node->params.dropout.p);
    int64_t n = gy->numel;
    SC_LAUNCH(dropout_backward_kernel, sc_cuda_blocks(n), SC_CUDA_THREADS, 0,
              sc_cuda_stream(node->ctx), (const uint8_t *)node->saved[0]->data, sc_tensor_f32(gy),
              sc_tensor_f32(gin[0]), n, scale);
    SC_CUDA_LAUNCHED("dropout_backward_kernel");
    return SC_OK;
}

extern "C" const sc_kernel sc_cuda_kernel_add = {binary_forward, binary_backward, 0};
extern "C" const sc_kernel sc_cuda_kernel_sub = {binary_forward, binary_backward, 0};
extern "C" const sc_kernel sc_cuda_kernel_mul = {binary_forward, binary_backward, 0};
extern "C" const sc_kernel sc_cuda_kernel_scale = {unary_forward<scale_op>,
                                                   unary_backward<scale_op>, 0};
extern "C" const sc_kernel sc_cuda_kernel_relu = {unary_forward<relu_op>,
                                                  unary_backward<relu_op>, 0};
extern "C" const sc_kernel sc_cuda_kernel_tanh = {unary_forward<tanh_op>,
                                                  unary_backward<tanh_op>, 0};
extern "C" const sc_kernel sc_cuda_kernel_sigmoid = {unary_forward<sigmoid_op>,
                                                     unary_backward<sigmoid_op>, 0};
extern "C" const sc_kernel sc_cuda_kernel_gelu = {unary_forward<gelu_op>,
                                                  unary_backward<gelu_op>, 0};
extern "C" const sc_kernel sc_cuda_kernel_dropout = {dropout_forward, dropout_backward, 0};
