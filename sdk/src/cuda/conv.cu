/* CUDA kernels for conv2d, through cuDNN's convolution API.
 *
 * Each convolution shape has a plan, made on first use and kept in the
 * device's cache (dev->conv_cache): the cuDNN descriptors of x
 * [N, C, H, W], y [N, OC, OH, OW], the weight [OC, C / G, KH, KW], the bias
 * [1, OC, 1, 1] and the convolution (padding, stride, dilation, groups),
 * and for each direction (forward, backward data, backward filter) the
 * algorithm chosen on that direction's first use. The choice comes from
 * cuDNN's heuristics (cudnnGet*Algorithm_v7), which run nothing on the GPU
 * and so cannot disturb a step being captured as a CUDA graph: the best
 * ranked algorithm that works, is deterministic and needs no more than the
 * device's shared workspace (SC_CUDA_WORKSPACE_BYTES), which every call
 * then uses. Deterministic, because a run and its resume must compute the
 * same bits (docs/architecture.md): the algorithms the heuristics mark
 * CUDNN_NON_DETERMINISTIC (backward data and backward filter ones that add
 * with atomics, in whatever order the GPU runs them) give results that
 * differ in the last bits from one call to the next.
 *
 * Precision, part of a plan's key: fp32 runs cuDNN with FMA math (no
 * TF32); tf32 with its default math, which allows TF32 tensor cores; bf16
 * convolves bf16 copies of x, the weight and (backward) gy with f32
 * accumulation into bf16 results in arena scratch, which conv_store_kernel
 * then widens into the f32 output (adding the bias) or adds into the f32
 * gradients. The weight gradient is thus rounded to bf16 before it is
 * added, as under PyTorch's autocast.
 *
 * Backward accumulates: fp32 and tf32 pass beta = 1 to cuDNN, bf16 adds
 * in conv_store_kernel; the bias gradient comes from
 * cudnnConvolutionBackwardBias, in f32.
 *
 * The cache takes no lock: one thread drives a device at a time, as its
 * shared cuBLAS and cuDNN handles require. */
#include <cuda_bf16.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_impl.h"
#include "device_math.cuh"

typedef enum conv_dir {
    CONV_FORWARD,
    CONV_BACKWARD_DATA,
    CONV_BACKWARD_FILTER,
    CONV_DIRS
} conv_dir;

static const char *const conv_dir_names[CONV_DIRS] = {"forward", "backward data",
                                                      "backward filter"};

/* What fixes a plan: the input and weight shapes, the geometry and the
 * precision. All int64_t, so that the struct has no padding and memcmp
 * compares keys. */
typedef struct conv_key {
    int64_t x[4], w[4];
    int64_t padding[2], stride[2], dilation[2], groups;
    int64_t precision;
} conv_key;

typedef struct conv_algo {
    int algo;             /* a cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t */
    cudnnMathType_t math; /* set on the convolution descriptor to run it */
    bool chosen;
} conv_algo;

typedef struct conv_plan {
    conv_key key;
    cudnnTensorDescriptor_t x, y;        /* in the precision's data type */
    cudnnTensorDescriptor_t y_f32, bias; /* f32: gy and gb for the bias gradient */
    cudnnFilterDescriptor_t w;           /* in the precision's data type */
    cudnnConvolutionDescriptor_t conv;
    conv_algo algo[CONV_DIRS];
} conv_plan;

/* The plans made so far on a device, searched in order. */
struct sc_cuda_conv_cache {
    conv_plan **plans;
    int count, capacity;
};

/* *desc = a new descriptor of an NCHW tensor [n, c, h, w] of type. On
 * failure *desc may hold a descriptor all the same, for the caller to
 * destroy. Shared with pool.cu and norm.cu. */
extern "C" sc_status sc_cudnn_tensor_4d(cudnnTensorDescriptor_t *desc, cudnnDataType_t type,
                                        int64_t n, int64_t c, int64_t h, int64_t w)
{
    if (n * c * h * w > INT_MAX)
        return sc_error_set(SC_ERR_UNSUPPORTED,
                            "cuDNN: tensor [%lld, %lld, %lld, %lld] has more than %d elements",
                            (long long)n, (long long)c, (long long)h, (long long)w, INT_MAX);
    SC_CUDNN_TRY(cudnnCreateTensorDescriptor(desc));
    SC_CUDNN_TRY(cudnnSetTensor4dDescriptor(*desc, CUDNN_TENSOR_NCHW, type, (int)n, (int)c,
                                            (int)h, (int)w));
    return SC_OK;
}

/* ---------------------------------------------------------------------
 * Plans and their cache. */

static void conv_plan_free(conv_plan *p)
{
    cudnnTensorDescriptor_t tensors[] = {p->x, p->y, p->y_f32, p->bias};
    for (cudnnTensorDescriptor_t t : tensors)
        if (t)
            cudnnDestroyTensorDescriptor(t);
    if (p->w)
        cudnnDestroyFilterDescriptor(p->w);
    if (p->conv)
        cudnnDestroyConvolutionDescriptor(p->conv);
    free(p);
}

static void conv_key_of(const sc_node *node, conv_key *k)
{
    const sc_conv2d_params *c = &node->params.conv2d;
    memset(k, 0, sizeof *k);
    for (int d = 0; d < 4; d++) {
        k->x[d] = node->in[0]->shape[d];
        k->w[d] = node->in[1]->shape[d];
    }
    for (int d = 0; d < 2; d++) {
        k->padding[d] = c->padding[d];
        k->stride[d] = c->stride[d];
        k->dilation[d] = c->dilation[d];
    }
    k->groups = c->groups;
    k->precision = node->ctx->precision;
}

/* Creates p's descriptors from its key, with y's shape from node. */
static sc_status conv_plan_describe(conv_plan *p, const sc_node *node)
{
    const conv_key *k = &p->key;
    const int64_t *y = node->out->shape;
    cudnnDataType_t type =
        k->precision == SC_PRECISION_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
    SC_TRY(sc_cudnn_tensor_4d(&p->x, type, k->x[0], k->x[1], k->x[2], k->x[3]));
    SC_TRY(sc_cudnn_tensor_4d(&p->y, type, y[0], y[1], y[2], y[3]));
    SC_TRY(sc_cudnn_tensor_4d(&p->y_f32, CUDNN_DATA_FLOAT, y[0], y[1], y[2], y[3]));
    SC_TRY(sc_cudnn_tensor_4d(&p->bias, CUDNN_DATA_FLOAT, 1, y[1], 1, 1));
    SC_CUDNN_TRY(cudnnCreateFilterDescriptor(&p->w));
    /* w [OC, C / G, KH, KW] */
    SC_CUDNN_TRY(cudnnSetFilter4dDescriptor(p->w, type, CUDNN_TENSOR_NCHW, (int)k->w[0],
                                            (int)k->w[1], (int)k->w[2], (int)k->w[3]));
    SC_CUDNN_TRY(cudnnCreateConvolutionDescriptor(&p->conv));
    /* Cross-correlation (no kernel flip, as the CPU computes), f32 accumulation. */
    SC_CUDNN_TRY(cudnnSetConvolution2dDescriptor(
        p->conv, (int)k->padding[0], (int)k->padding[1], (int)k->stride[0], (int)k->stride[1],
        (int)k->dilation[0], (int)k->dilation[1], CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    SC_CUDNN_TRY(cudnnSetConvolutionGroupCount(p->conv, (int)k->groups));
    return SC_OK;
}

/* The cache's room for one more plan, the cache made on first use. */
static sc_status conv_cache_reserve(sc_cuda_dev *dev)
{
    if (!dev->conv_cache &&
        !(dev->conv_cache = (sc_cuda_conv_cache *)calloc(1, sizeof *dev->conv_cache)))
        return sc_error_set(SC_ERR_NOMEM, "conv2d: out of host memory for the cuDNN plan cache");
    sc_cuda_conv_cache *cache = dev->conv_cache;
    if (cache->count < cache->capacity)
        return SC_OK;
    int capacity = cache->capacity ? 2 * cache->capacity : 16;
    conv_plan **plans = (conv_plan **)realloc(cache->plans, (size_t)capacity * sizeof *plans);
    if (!plans)
        return sc_error_set(SC_ERR_NOMEM, "conv2d: out of host memory for the cuDNN plan cache");
    cache->plans = plans;
    cache->capacity = capacity;
    return SC_OK;
}

/* node's plan, from the cache or made and added to it. */
static sc_status conv_plan_get(sc_cuda_dev *dev, const sc_node *node, conv_plan **out)
{
    conv_key key;
    conv_key_of(node, &key);
    sc_cuda_conv_cache *cache = dev->conv_cache;
    for (int i = 0; cache && i < cache->count; i++)
        if (memcmp(&cache->plans[i]->key, &key, sizeof key) == 0) {
            *out = cache->plans[i];
            return SC_OK;
        }
    SC_TRY(conv_cache_reserve(dev));
    conv_plan *p = (conv_plan *)calloc(1, sizeof *p);
    if (!p)
        return sc_error_set(SC_ERR_NOMEM, "conv2d: out of host memory for a cuDNN plan");
    p->key = key;
    sc_status status = conv_plan_describe(p, node);
    if (status != SC_OK) {
        conv_plan_free(p);
        return status;
    }
    cache = dev->conv_cache;
    cache->plans[cache->count++] = p;
    *out = p;
    return SC_OK;
}


/* ---------------------------------------------------------------------
 * Algorithms. */

/* The math type the heuristics search under: fp32 keeps off TF32. */
static cudnnMathType_t conv_search_math(sc_precision precision)
{
    return precision == SC_PRECISION_FP32 ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH;
}

/* Takes the first of count heuristic results (best first) that works, is
 * deterministic, fits the workspace and keeps to precision: never a
 * down-conversion of f32 inputs, and for fp32 no tensor-op math, run with
 * FMA math. */
template <typename Perf>
static bool conv_pick(const Perf *perf, int count, sc_precision precision, conv_algo *algo)
{
    for (int i = 0; i < count; i++) {
        cudnnMathType_t math = perf[i].mathType;
        bool converts = math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
        bool tensor_op = converts || math == CUDNN_TENSOR_OP_MATH;
        if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].determinism != CUDNN_DETERMINISTIC ||
            perf[i].memory > SC_CUDA_WORKSPACE_BYTES || converts ||
            (precision == SC_PRECISION_FP32 && tensor_op))
            continue;
        algo->algo = (int)perf[i].algo;
        algo->math = precision == SC_PRECISION_FP32 ? CUDNN_FMA_MATH : math;
        algo->chosen = true;
        return true;
    }
    return false;
}

/* Chooses p's algorithm for dir by cuDNN's heuristics. */
static sc_status conv_choose_algo(sc_cuda_dev *dev, conv_plan *p, conv_dir dir)
{
    sc_precision precision = (sc_precision)p->key.precision;
    conv_algo *algo = &p->algo[dir];
    int count = 0;
    bool found = false;
    SC_CUDNN_TRY(cudnnSetConvolutionMathType(p->conv, conv_search_math(precision)));
    if (dir == CONV_FORWARD) {
        cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        SC_CUDNN_TRY(cudnnGetConvolutionForwardAlgorithm_v7(
            dev->cudnn, p->x, p->w, p->conv, p->y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, perf));
        found = conv_pick(perf, count, precision, algo);
    } else if (dir == CONV_BACKWARD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        SC_CUDNN_TRY(cudnnGetConvolutionBackwardDataAlgorithm_v7(
            dev->cudnn, p->w, p->y, p->conv, p->x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count,
            perf));
        found = conv_pick(perf, count, precision, algo);
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        SC_CUDNN_TRY(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
            dev->cudnn, p->x, p->y, p->conv, p->w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count,
            perf));
        found = conv_pick(perf, count, precision, algo);
    }
    if (found)
        return SC_OK;
    const conv_key *k = &p->key;
    return sc_error_set(SC_ERR_UNSUPPORTED,
                        "conv2d: cuDNN offers no deterministic %s algorithm within its %zu MiB "
                        "workspace for input [%lld, %lld, %lld, %lld] and weight [%lld, %lld, "
                        "%lld, %lld]",
                        conv_dir_names[dir], SC_CUDA_WORKSPACE_BYTES >> 20, (long long)k->x[0],
                        (long long)k->x[1], (long long)k->x[2], (long long)k->x[3],
                        (long long)k->w[0], (long long)k->w[1], (long long)k->w[2],
                        (long long)k->w[3]);
}

/* Readies p to run dir: its algorithm chosen (on first use) and that
 * algorithm's math type set on the convolution descriptor. */
static sc_status conv_use_algo(sc_cuda_dev *dev, conv_plan *p, conv_dir dir)
{
    if (!p->algo[dir].chosen)
        SC_TRY(conv_choose_algo(dev, p, dir));
    SC_CUDNN_TRY(cudnnSetConvolutionMathType(p->conv, p->algo[dir].math));
    return SC_OK;
}

/* ---------------------------------------------------------------------
 * Operands and results. */


/* Where cuDNN writes a result for dst: dst itself, or (precision bf16)
 * bf16 scratch from the step arena; NULL when out of memory. */
static void *conv_result(sc_ctx *ctx, const sc_tensor *dst)
{
    if (ctx->precision == SC_PRECISION_BF16)
        return sc_ctx_alloc_data(ctx, (size_t)dst->numel * sizeof(__nv_bfloat16));
    return dst->data;
}

/* out [N, C, HW] = (accumulate ? out : 0) + src + (bias ? bias[c] : 0),
 * element-wise; src is f32 (out itself, to add the bias) or a bf16 result. */
template <typename T>
static __global__ void conv_store_kernel(float *out, const T *src, const float *bias,
                                         int64_t channels, int64_t hw, int64_t n, bool accumulate)
{
    GRID_STRIDE(i, n) {
        float v = (float)src[i];
        if (bias)
            v += bias[i / hw % channels];
        out[i] = accumulate ? out[i] + v : v;
    }
}

/* conv_store_kernel over the 4-D tensor out; channels are its dimension 1. */
template <typename T>
static sc_status conv_store(sc_ctx *ctx, const sc_tensor *out, const T *src, const float *bias,
                            bool accumulate)
{
    SC_LAUNCH(conv_store_kernel<T>, sc_cuda_blocks(out->numel), SC_CUDA_THREADS, 0,
              sc_cuda_stream(ctx), sc_tensor_f32(out), src, bias, out->shape[1],
              out->shape[2] * out->shape[3], out->numel, accumulate);
    SC_CUDA_LAUNCHED("conv_store_kernel");
    return SC_OK;
}

/* ---------------------------------------------------------------------
 * Kernels. */

/* y [N, OC, OH, OW] = conv(x [N, C, H, W], w [OC, C / G, KH, KW]) + b [OC] */
static sc_status conv2d_forward(sc_node *node)
{
    sc_ctx *ctx = node->ctx;
    sc_cuda_dev *dev = sc_cuda_ctx_dev(ctx);
    const float *bias = node->n_inputs > 2 ? sc_tensor_f32(node->in[2]) : NULL;
    /* cuDNN takes no empty tensor: an empty batch (or no output channel)
     * has nothing to compute; an empty x or weight under a non-empty y
     * (no input channel, or a zero-size kernel) is not supported. */
    if (node->out->numel == 0)
        return SC_OK;
    if (node->in[0]->numel == 0 || node->in[1]->numel == 0) {
        char sx[64], sw[64];
        const sc_tensor *x = node->in[0], *w = node->in[1];
        return sc_error_set(SC_ERR_UNSUPPORTED,
                            "conv2d: cuDNN cannot convolve input %s with weight %s (empty)",
                            sc_shape_str(x->ndim, x->shape, sx, sizeof sx),
                            sc_shape_str(w->ndim, w->shape, sw, sizeof sw));
    }
    conv_plan *p;
    SC_TRY(conv_plan_get(dev, node, &p));
    SC_TRY(conv_use_algo(dev, p, CONV_FORWARD));
    const void *x = sc_cuda_operand(ctx, node->in[0]), *w = sc_cuda_operand(ctx, node->in[1]);
    void *y = conv_result(ctx, node->out);
    if (!x || !w || !y)
        return SC_ERR_NOMEM;
    float one = 1.0f, zero = 0.0f;
    /* y [N, OC, OH, OW] = x [N, C, H, W] (*) w [OC, C / G, KH, KW] */
    SC_CUDNN_TRY(cudnnConvolutionForward(
        dev->cudnn, &one, p->x, x, p->w, w, p->conv,
        (cudnnConvolutionFwdAlgo_t)p->algo[CONV_FORWARD].algo, dev->workspace,
        SC_CUDA_WORKSPACE_BYTES, &zero, p->y, y));
    if (ctx->precision == SC_PRECISION_BF16)
        return conv_store(ctx, node->out, (const __nv_bfloat16 *)y, bias, false);
    return bias ? conv_store(ctx, node->out, (const float *)y, bias, false) : SC_OK;
}

/* The gradient for input `which` (0: x, 1: the weight) from dy (gy as a
 * conv_operand), added into g. */
static sc_status conv_input_grad(sc_node *node, conv_plan *p, const void *dy, int which,
                                 sc_tensor *g)
{
    sc_ctx *ctx = node->ctx;
    sc_cuda_dev *dev = sc_cuda_ctx_dev(ctx);
    bool bf16 = ctx->precision == SC_PRECISION_BF16;
    conv_dir dir = which == 0 ? CONV_BACKWARD_DATA : CONV_BACKWARD_FILTER;
    SC_TRY(conv_use_algo(dev, p, dir));
    /* the other operand: the weight for x's gradient, x for the weight's */
    const void *other = sc_cuda_operand(ctx, node->in[1 - which]);
    void *out = conv_result(ctx, g);
    if (!other || !out)
        return SC_ERR_NOMEM;
    float one = 1.0f, beta = bf16 ? 0.0f : 1.0f;
    if (dir == CONV_BACKWARD_DATA) {
        /* gx [N, C, H, W] (+)= dy [N, OC, OH, OW] convolved back through w [OC, C / G, KH, KW] */
        SC_CUDNN_TRY(cudnnConvolutionBackwardData(
            dev->cudnn, &one, p->w, other, p->y, dy, p->conv,
            (cudnnConvolutionBwdDataAlgo_t)p->algo[dir].algo, dev->workspace,
            SC_CUDA_WORKSPACE_BYTES, &beta, p->x, out));
    } else {
        /* gw [OC, C / G, KH, KW] (+)= x [N, C, H, W] correlated with dy [N, OC, OH, OW] */
        SC_CUDNN_TRY(cudnnConvolutionBackwardFilter(
            dev->cudnn, &one, p->x, other, p->y, dy, p->conv,
            (cudnnConvolutionBwdFilterAlgo_t)p->algo[dir].algo, dev->workspace,
            SC_CUDA_WORKSPACE_BYTES, &beta, p->w, out));
    }
    return bf16 ? conv_store(ctx, g, (const __nv_bfloat16 *)out, NULL, true) : SC_OK;
}

/* gx += its gradient through the weight; gw += x correlated with gy;
 * gb [OC] += gy [N, OC, OH, OW] summed over N, OH, OW */
static sc_status conv2d_backward(sc_node *node, const sc_tensor *gy, sc_tensor *const *gin)
{
    sc_ctx *ctx = node->ctx;
    sc_cuda_dev *dev = sc_cuda_ctx_dev(ctx);
    if (gy->numel == 0) /* an empty batch: every gradient adds a sum of nothing */
        return SC_OK;
    conv_plan *p;
    SC_TRY(conv_plan_get(dev, node, &p));
    if (node->n_inputs > 2 && gin[2]) {
        float one = 1.0f;
        /* gb [1, OC, 1, 1] += the sums of gy [N, OC, OH, OW] over N, OH, OW (f32) */
        SC_CUDNN_TRY(cudnnConvolutionBackwardBias(dev->cudnn, &one, p->y_f32, gy->data, &one,
                                                  p->bias, gin[2]->data));
    }
    if (!gin[0] && !gin[1])
        return SC_OK;
    const void *dy = sc_cuda_operand(ctx, gy);
    if (!dy)
        return SC_ERR_NOMEM;
    for (int i = 0; i < 2; i++)
        if (gin[i])
            SC_TRY(conv_input_grad(node, p, dy, i, gin[i]));
    return SC_OK;
}

extern "C" const sc_kernel sc_cuda_kernel_conv2d = {conv2d_forward, conv2d_backward, 0};
