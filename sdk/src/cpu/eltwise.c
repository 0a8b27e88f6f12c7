/* CPU kernels for element-wise ops: broadcasting add/sub/mul, scale,
 * activations and dropout. */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "cpu.h"

/* Outputs per task of a parallel loop, and innermost indices per task when
 * tasks split a broadcast reduction by column. */
enum { CHUNK = 8192, COL_BLOCK = 64 };

static const float inv_sqrt_2 = 0.70710678118654752f, inv_sqrt_2pi = 0.39894228040143268f;

/* ---------------------------------------------------------------------
 * Broadcasting. The output index space is described with dimensions of 1
 * dropped and neighbours that broadcast alike merged, so [N, C] + [N, C]
 * is one flat run, [N, C] + [C] is rows of C with b restarting each row,
 * and [N, 1] * [N, C] is rows of C with a constant along each row. */

typedef struct bcast {
    int nd;
    int64_t dim[SC_MAX_DIMS];
    int64_t stride[2][SC_MAX_DIMS]; /* operand i's stride; 0 where it broadcasts */
    int64_t numel;
} bcast;

static int64_t aligned_dim(const sc_tensor *t, int nd, int d)
{
    int k = d - (nd - t->ndim);
    return k < 0 ? 1 : t->shape[k];
}

static void bcast_init(bcast *bc, const sc_tensor *const in[2], const sc_tensor *out)
{
    bool spans[2][SC_MAX_DIMS]; /* operand i spans collapsed dim d */
    bc->nd = 0;
    bc->numel = out->numel;
    for (int d = 0; d < out->ndim; d++) {
        int64_t n = out->shape[d];
        if (n == 1)
            continue;
        bool s0 = aligned_dim(in[0], out->ndim, d) == n;
        bool s1 = aligned_dim(in[1], out->ndim, d) == n;
        int k = bc->nd;
        if (k > 0 && spans[0][k - 1] == s0 && spans[1][k - 1] == s1) {
            bc->dim[k - 1] *= n;
            continue;
        }
        bc->dim[k] = n;
        spans[0][k] = s0;
        spans[1][k] = s1;
        bc->nd++;
    }
    if (bc->nd == 0) { /* every operand holds one element */
        bc->nd = 1;
        bc->dim[0] = 1;
        spans[0][0] = spans[1][0] = true;
    }
    for (int i = 0; i < 2; i++) {
        int64_t s = 1;
        for (int d = bc->nd - 1; d >= 0; d--) {
            bc->stride[i][d] = spans[i][d] ? s : 0;
            s *= spans[i][d] ? bc->dim[d] : 1;
        }
    }
}

/* A run of len consecutive outputs from flat index o; operand i starts at
 * off[i] and steps by its innermost stride (0 or 1). */
typedef void (*bcast_seg_fn)(const void *arg, int64_t o, const int64_t off[2], int64_t len);

static void bcast_row_offsets(const bcast *bc, int64_t row, int64_t off[2])
{
    off[0] = off[1] = 0;
    for (int d = bc->nd - 2; d >= 0; d--) {
        int64_t i = row % bc->dim[d];
        row /= bc->dim[d];
        off[0] += i * bc->stride[0][d];
        off[1] += i * bc->stride[1][d];
    }
}

/* Calls fn on the runs of outputs in [lo, hi) with innermost index in
 * [k0, k1), in increasing order. */
static void bcast_walk(const bcast *bc, int64_t lo, int64_t hi, int64_t k0, int64_t k1,
                       bcast_seg_fn fn, const void *arg)
{
    int last = bc->nd - 1;
    int64_t inner = bc->dim[last];
    for (int64_t row = lo / inner; row * inner < hi; row++) {
        int64_t base = row * inner;
        int64_t s = base + k0 > lo ? base + k0 : lo, e = min64(base + k1, hi);
        if (s >= e)
            continue;
        int64_t off[2];
        bcast_row_offsets(bc, row, off);
        off[0] += (s - base) * bc->stride[0][last];
        off[1] += (s - base) * bc->stride[1][last];
        fn(arg, s, off, e - s);
    }
}

/* Splits the outputs into tasks of `chunk` flat indices by `kblock`
 * innermost indices and walks them in parallel. Callers pick the split so
 * that no two tasks write the same element. */
static void bcast_run(const bcast *bc, int64_t chunk, int64_t kblock, bcast_seg_fn fn,
                      const void *arg)
{
    int64_t n = bc->numel, inner = bc->dim[bc->nd - 1];
    if (n == 0)
        return;
    int64_t nk = (inner + kblock - 1) / kblock;
    int64_t tasks = (n + chunk - 1) / chunk * nk;
#pragma omp parallel for schedule(static) if (n > SC_CPU_PAR_MIN && tasks > 1)
    for (int64_t t = 0; t < tasks; t++) {
        int64_t lo = t / nk * chunk, k0 = t % nk * kblock;
        bcast_walk(bc, lo, min64(lo + chunk, n), k0, min64(k0 + kblock, inner), fn, arg);
    }
}

/* A task split for accumulating into operand x's gradient in which each
 * element has one owner and sums its terms in a fixed order. */
static void bcast_reduce_split(const bcast *bc, int x, int64_t *chunk, int64_t *kblock)
{
    int last = bc->nd - 1;
    int64_t inner = bc->dim[last];
    bool spans_outer = true;
    for (int d = 0; d < last; d++)
        spans_outer = spans_outer && bc->stride[x][d] != 0;
    bool spans_inner = bc->stride[x][last] != 0;
    *chunk = bc->numel; /* default: one task */
    *kblock = inner;
    if (spans_inner && spans_outer)
        *chunk = CHUNK; /* no broadcast: every output has its own element */
    else if (spans_inner)
        *kblock = COL_BLOCK; /* e.g. [N, C] + [C]: a task owns columns */
    else if (spans_outer)
        *chunk = (CHUNK + inner - 1) / inner * inner; /* a task owns rows */
}

typedef struct binary_fwd {
    sc_op_id op;
    const float *a, *b;
    float *y;
    bool sa, sb; /* innermost stride is 1 (else 0) */
    bool relu;   /* y = relu(a + b) (sc_add_relu) */
} binary_fwd;

ALWAYS_INLINE float binop(sc_op_id op, bool relu, float a, float b)
{
    float y = op == SC_OP_ADD ? a + b : op == SC_OP_SUB ? a - b : a * b;
    return relu ? sc_cpu_relu(y) : y;
}

/* y [len] = a op b. Collapsing guarantees that at least one operand runs
 * along the innermost dimension; the other may repeat one value. */
ALWAYS_INLINE void binop_run(sc_op_id op, bool relu, float *restrict y, const float *restrict a,
                             bool sa, const float *restrict b, bool sb, int64_t len)
{
    if (sa && sb) {
        for (int64_t i = 0; i < len; i++)
            y[i] = binop(op, relu, a[i], b[i]);
    } else if (sa) {
        const float bv = *b;
        for (int64_t i = 0; i < len; i++)
            y[i] = binop(op, relu, a[i], bv);
    } else {
        const float av = *a;
        for (int64_t i = 0; i < len; i++)
            y[i] = binop(op, relu, av, b[i]);
    }
}

static void binary_fwd_seg(const void *arg, int64_t o, const int64_t off[2], int64_t len)
{
    const binary_fwd *f = arg;
    float *y = f->y + o;
    const float *a = f->a + off[0], *b = f->b + off[1];
    switch (f->op) { /* constant ops let each loop vectorise */
    case SC_OP_ADD:
        if (f->relu)
            binop_run(SC_OP_ADD, true, y, a, f->sa, b, f->sb, len);
        else
            binop_run(SC_OP_ADD, false, y, a, f->sa, b, f->sb, len);
        break;
    case SC_OP_SUB: binop_run(SC_OP_SUB, false, y, a, f->sa, b, f->sb, len); break;
    default: binop_run(SC_OP_MUL, false, y, a, f->sa, b, f->sb, len); break;
    }
}

static sc_status binary_forward(sc_node *node)
{
    bcast bc;
    bcast_init(&bc, (const sc_tensor *const[]){node->in[0], node->in[1]}, node->out);
    int last = bc.nd - 1;
    binary_fwd f = {node->op, sc_tensor_f32(node->in[0]), sc_tensor_f32(node->in[1]),
                    sc_tensor_f32(node->out), bc.stride[0][last] != 0,
                    bc.stride[1][last] != 0, node->params.binary.relu};
    bcast_run(&bc, CHUNK, bc.dim[last], binary_fwd_seg, &f);
    return SC_OK;
}

/* gx += g * k, summed over the dimensions x broadcasts along; k is the
 * other operand (mul) or a constant +-1 (add, sub). gx = g * k instead
 * where x's gradient is fresh and x is not broadcast (write). With a
 * relu after the add, g is first masked where its output y is not > 0. */
typedef struct binary_bwd {
    int x;
    const float *g;
    float *gx;
    const float *k;
    int k_operand; /* operand k is read from (offsets and stride), -1: constant */
    bool sx, sk;   /* innermost stride is 1 (else 0) */
    bool write;
    const float *y; /* the relu's output, read like g; NULL: no relu */
} binary_bwd;

/* The gradient of the op's output at element i of a segment. */
ALWAYS_INLINE float out_grad(const float *restrict g, const float *restrict y, int64_t i)
{
    return y ? sc_cpu_relu_grad(y[i], g[i]) : g[i];
}

static void binary_bwd_seg(const void *arg, int64_t o, const int64_t off[2], int64_t len)
{
    const binary_bwd *b = arg;
    const float *restrict g = b->g + o, *restrict y = b->y ? b->y + o : NULL;
    const float *restrict k = b->k_operand < 0 ? b->k : b->k + off[b->k_operand];
    float *restrict gx = b->gx + off[b->x];
    if (b->sx && b->sk) {
        if (b->write)
            for (int64_t i = 0; i < len; i++)
                gx[i] = out_grad(g, y, i) * k[i];
        else
            for (int64_t i = 0; i < len; i++)
                gx[i] += out_grad(g, y, i) * k[i];
    } else if (b->sx) {
        const float kv = *k;
        if (b->write)
            for (int64_t i = 0; i < len; i++)
                gx[i] = out_grad(g, y, i) * kv;
        else
            for (int64_t i = 0; i < len; i++)
                gx[i] += out_grad(g, y, i) * kv;
    } else if (b->sk) {
        float acc = 0.0f;
        for (int64_t i = 0; i < len; i++)
            acc += out_grad(g, y, i) * k[i];
        *gx += acc;
    } else {
        float acc = 0.0f;
        for (int64_t i = 0; i < len; i++)
            acc += out_grad(g, y, i);
        *gx += acc * *k;
    }
}

/* An add's two gradients where neither operand is broadcast, in one pass
 * over g [n] (and y): ga (= where write_a) += the output's gradient, gb
 * likewise; ga and gb are different buffers. */
static void add_grads_whole(const float *restrict g, const float *restrict y,
                            float *restrict ga, bool write_a, float *restrict gb, bool write_b,
                            int64_t n)
{
#pragma omp parallel for schedule(static) if (n > SC_CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        float v = out_grad(g, y, i);
        ga[i] = write_a ? v : ga[i] + v;
        gb[i] = write_b ? v : gb[i] + v;
    }
}

static sc_status binary_backward(sc_node *node, const sc_tensor *gout,
                                 sc_tensor *const *gin)
{
    static const float plus_one = 1.0f, minus_one = -1.0f;
    const float *y = node->params.binary.relu ? sc_tensor_f32(node->out) : NULL;
    if (node->op == SC_OP_ADD && gin[0] && gin[1] && gin[0]->numel == gout->numel &&
        gin[1]->numel == gout->numel && gin[0]->data != gin[1]->data) {
        add_grads_whole(sc_tensor_f32(gout), y, sc_tensor_f32(gin[0]),
                        sc_node_grad_fresh(node, 0), sc_tensor_f32(gin[1]),
                        sc_node_grad_fresh(node, 1), gout->numel);
        return SC_OK;
    }
    bcast bc;
    bcast_init(&bc, (const sc_tensor *const[]){node->in[0], node->in[1]}, node->out);
    int last = bc.nd - 1;
    for (int x = 0; x < 2; x++) {
        if (!gin[x])
            continue;
        /* A fresh gradient is written where x is not broadcast; where it
         * is, it sums several terms into each element, so it starts at 0. */
        bool fresh = sc_node_grad_fresh(node, x), whole = gin[x]->numel == gout->numel;
        if (fresh && !whole)
            memset(gin[x]->data, 0, sc_tensor_nbytes(gin[x]));
        binary_bwd b = {x, sc_tensor_f32(gout), sc_tensor_f32(gin[x]), &plus_one, -1,
                        bc.stride[x][last] != 0, false, fresh && whole, y};
        if (node->op == SC_OP_MUL) {
            b.k_operand = 1 - x;
            b.k = sc_tensor_f32(node->in[1 - x]);
            b.sk = bc.stride[1 - x][last] != 0;
        } else if (node->op == SC_OP_SUB && x == 1) {
            b.k = &minus_one;
        }
        int64_t chunk, kblock;
        bcast_reduce_split(&bc, x, &chunk, &kblock);
        bcast_run(&bc, chunk, kblock, binary_bwd_seg, &b);
    }
    return SC_OK;
}

/* ---------------------------------------------------------------------
 * Unary ops: x, y, g [numel], any shape. */

/* y = factor * x */
static sc_status scale_forward(sc_node *node)
{
    const float *x = sc_tensor_f32(node->in[0]);
    float *y = sc_tensor_f32(node->out);
    float f = node->params.scale.factor;
    int64_t n = node->out->numel;
#pragma omp parallel for schedule(static) if (n > SC_CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        y[i] = f * x[i];
    return SC_OK;
}

static sc_status scale_backward(sc_node *node, const sc_tensor *gy, sc_tensor *const *gin)
{
    const float *g = sc_tensor_f32(gy);
    float *gx = sc_tensor_f32(gin[0]);
    float f = node->params.scale.factor;
    int64_t n = gy->numel;
#pragma omp parallel for schedule(static) if (n > SC_CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        gx[i] += f * g[i];
    return SC_OK;
}

/* y = max(x, 0) (sc_cpu_relu) */
static sc_status relu_forward(sc_node *node)
{
    const float *x = sc_tensor_f32(node->in[0]);
    float *y = sc_tensor_f32(node->out);
    int64_t n = node->out->numel;
#pragma omp parallel for schedule(static) if (n > SC_CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        y[i] = sc_cpu_relu(x[i]);
    return SC_OK;
}

static sc_status relu_backward(sc_node *node, const sc_tensor *gy, sc_tensor *const *gin)
{
    const float *x = sc_tensor_f32(node->in[0]), *g = sc_tensor_f32(gy);
    float *gx = sc_tensor_f32(gin[0]);
    int64_t n = gy->numel;
    if (sc_node_grad_fresh(node, 0)) {
#pragma omp parallel for schedule(static) if (n > SC_CPU_PAR_MIN)
        for (int64_t i = 0; i < n; i++)
            gx[i] = sc_cpu_relu_grad(x[i], g[i]);
    } else {
#pragma omp parallel for schedule(static) if (n > SC_CPU_PAR_MIN)
        for (int64_t i = 0; i < n; i++)
            gx[i] += sc_cpu_relu_grad(x[i], g[i]);
    }
    return SC_OK;
}

static sc_status tanh_forward(sc_node *node)
{
    const float *x = sc_tensor_f32(node->in[0]);
    float *y = sc_tensor_f32(node->out);
    int64_t n = node->out->numel;
#pragma omp parallel for schedule(static) if (n > SC_CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        y[i] = tanhf(x[i]);
    return SC_OK;
}

/* dy/dx = 1 - y^2, from the saved output */
static sc_status tanh_backward(sc_node *node, const sc_tensor *gy, sc_tensor *const *gin)
{
    const float *y = sc_tensor_f32(node->out), *g = sc_tensor_f32(gy);
    float *gx = sc_tensor_f32(gin[0]);
    int64_t n = gy->numel;
#pragma omp parallel for schedule(static) if (n > SC_CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        gx[i] += g[i] * (1.0f - y[i] * y[i]);
    return SC_OK;
}

static sc_status sigmoid_forward(sc_node *node)
{
    const float *x = sc_tensor_f32(node->in[0]);
    float *y = sc_tensor_f32(node->out);
    int64_t n = node->out->numel;
#pragma omp parallel for schedule(static) if (n > SC_CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        y[i] = 1.0f / (1.0f + expf(-x[i]));
    return SC_OK;
}

/* dy/dx = y (1 - y), from the saved output */
static sc_status sigmoid_backward(sc_node *node, const sc_tensor *gy, sc_tensor *const *gin)
{
    const float *y = sc_tensor_f32(node->out), *g = sc_tensor_f32(gy);
    float *gx = sc_tensor_f32(gin[0]);
    int64_t n = gy->numel;
#pragma omp parallel for schedule(static) if (n > SC_CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        gx[i] += g[i] * y[i] * (1.0f - y[i]);
    return SC_OK;
}

/* y = x Phi(x), Phi the standard normal CDF (the exact, erf form) */
static sc_status gelu_forward(sc_node *node)
{
    const float *x = sc_tensor_f32(node->in[0]);
    float *y = sc_tensor_f32(node->out);
    int64_t n = node->out->numel;
#pragma omp parallel for schedule(static) if (n > SC_CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * inv_sqrt_2));
    return SC_OK;
}

/* dy/dx = Phi(x) + x phi(x), phi the standard normal density */
static sc_status gelu_backward(sc_node *node, const sc_tensor *gy, sc_tensor *const *gin)
{
    const float *x = sc_tensor_f32(node->in[0]), *g = sc_tensor_f32(gy);
    float *gx = sc_tensor_f32(gin[0]);
    int64_t n = gy->numel;
#pragma omp parallel for schedule(static) if (n > SC_CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        float cdf = 0.5f * (1.0f + erff(x[i] * inv_sqrt_2));
        float pdf = inv_sqrt_2pi * expf(-0.5f * x[i] * x[i]);
        gx[i] += g[i] * (cdf + x[i] * pdf);
    }
    return SC_OK;
}

/* ---------------------------------------------------------------------
 * Dropout. An element is kept when a 32-bit draw is at least p * 2^32.
 * Each CHUNK of elements draws from its own stream, seeded by one draw
 * from the context's step stream, so the mask does not depend on the
 * thread count. The mask (u8, one byte an element) is saved for backward. */

static void dropout_mask(uint8_t *m, int64_t n, uint32_t threshold, sc_rng *rng)
{
    int64_t i = 0;
    for (; i + 2 <= n; i += 2) {
        uint64_t r = sc_rng_u64(rng);
        m[i] = (uint32_t)r >= threshold;
        m[i + 1] = (uint32_t)(r >> 32) >= threshold;
    }
    if (i < n)
        m[i] = (uint32_t)sc_rng_u64(rng) >= threshold;
}

/* y = x * mask / (1 - p) */
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
    const float *x = sc_tensor_f32(xt);
    float *y = sc_tensor_f32(node->out);
    uint8_t *m = mask->data;
    int64_t n = xt->numel, tasks = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static) if (n > SC_CPU_PAR_MIN)
    for (int64_t t = 0; t < tasks; t++) {
        int64_t lo = t * CHUNK, hi = min64(lo + CHUNK, n);
        sc_rng rng;
        sc_rng_init(&rng, seed, (uint64_t)t);
        dropout_mask(m + lo, hi - lo, threshold, &rng);
        for (int64_t i = lo; i < hi; i++)
            y[i] = x[i] * ((float)m[i] * scale);
    }
    return SC_OK;
}

static sc_status dropout_backward(sc_node *node, const sc_tensor *gy, sc_tensor *const *gin)
{
    float scale = 1.0f / (1.0f - node->params.dropout.p);
    const uint8_t *m = node->saved[0]->data;
    const float *g = sc_tensor_f32(gy);
    float *gx = sc_tensor_f32(gin[0]);
    int64_t n = gy->numel;
#pragma omp parallel for schedule(static) if (n > SC_CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        gx[i] += g[i] * ((float)m[i] * scale);
    return SC_OK;
}

const sc_kernel sc_cpu_kernel_add = {.forward = binary_forward, .backward = binary_backward,
                                     .writes_grads = 3u};
const sc_kernel sc_cpu_kernel_sub = {.forward = binary_forward, .backward = binary_backward,
                                     .writes_grads = 3u};
const sc_kernel sc_cpu_kernel_mul = {.forward = binary_forward, .backward = binary_backward,
                                     .writes_grads = 3u};
const sc_kernel sc_cpu_kernel_scale = {.forward = scale_forward, .backward = scale_backward};
const sc_kernel sc_cpu_kernel_relu = {.forward = relu_forward, .backward = relu_backward,
                                      .writes_grads = 1u << 0};
const sc_kernel sc_cpu_kernel_tanh = {.forward = tanh_forward, .backward = tanh_backward};
const sc_kernel sc_cpu_kernel_sigmoid = {.forward = sigmoid_forward, .backward = sigmoid_backward};
const sc_kernel sc_cpu_kernel_gelu = {.forward = gelu_forward, .backward = gelu_backward};
const sc_kernel sc_cpu_kernel_dropout = {.forward = dropout_forward, .backward = dropout_backward};
