/* CUDA kernels for matmul and linear, through cublasGemmEx.
 *
 * cuBLAS is column-major and our tensors row-major: a row-major [R, C]
 * matrix is, to cuBLAS, a column-major [C, R] one with leading dimension C,
 * its transpose. So each row-major product C = A B runs as the
 * column-major C^T = B^T A^T, the operands swapped; the comment above each
 * call gives the row-major product and then the shapes cuBLAS sees.
 *
 * Precision (the context's): fp32 computes in fp32 (CUBLAS_COMPUTE_32F,
 * no TF32 as long as the handle keeps its default math mode); tf32 lets
 * cuBLAS round the inputs to TensorFloat-32 (CUBLAS_COMPUTE_32F_FAST_TF32);
 * bf16 multiplies bf16 copies of both inputs, accumulating and writing
 * fp32. Backward accumulates into the gradients (beta = 1). */
#include "cuda_impl.h"
#include "device_math.cuh"

/* A leading dimension: cuBLAS wants one >= 1 even for an empty matrix. */
static int ld_of(int64_t cols) { return cols > 1 ? (int)cols : 1; }


/* Column-major c [m, n] = op_a(a) [m, k] op_b(b) [k, n] + beta c, with a
 * and b from sc_cuda_operand and c f32. */
static sc_status gemm(sc_ctx *ctx, cublasOperation_t op_a, cublasOperation_t op_b, int64_t m,
                      int64_t n, int64_t k, const void *a, int64_t lda, const void *b,
                      int64_t ldb, float beta, float *c, int64_t ldc)
{
    cudaDataType in_type = CUDA_R_32F;
    cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
    if (ctx->precision == SC_PRECISION_TF32)
        compute = CUBLAS_COMPUTE_32F_FAST_TF32;
    else if (ctx->precision == SC_PRECISION_BF16)
        in_type = CUDA_R_16BF;
    float alpha = 1.0f;
    SC_CUBLAS_TRY(cublasGemmEx(sc_cuda_ctx_dev(ctx)->cublas, op_a, op_b, (int)m, (int)n, (int)k,
                               &alpha, a, in_type, ld_of(lda), b, in_type, ld_of(ldb), &beta, c,
                               CUDA_R_32F, ld_of(ldc), compute, CUBLAS_GEMM_DEFAULT));
    return SC_OK;
}

/* y [rows, cols] = b [cols] in every row */
static __global__ void broadcast_rows_kernel(float *y, const float *b, int64_t rows, int64_t cols)
{
    int64_t n = rows * cols;
    GRID_STRIDE(i, n)
        y[i] = b[i % cols];
}

/* c [M, N] = a [M, K] b [K, N] */
static sc_status matmul_forward(sc_node *node)
{
    const sc_tensor *a = node->in[0], *b = node->in[1];
    int64_t m = a->shape[0], k = a->shape[1], n = b->shape[1];
    const void *pa = sc_cuda_operand(node->ctx, a), *pb = sc_cuda_operand(node->ctx, b);
    if (!pa || !pb)
        return SC_ERR_NOMEM;
    /* c [M, N] = a b;  cuBLAS: c^T [N, M] = b^T [N, K] a^T [K, M] */
    return gemm(node->ctx, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, pb, n, pa, k, 0.0f,
                sc_tensor_f32(node->out), n);
}

/* ga [M, K] += gc [M, N] b^T;  gb [K, N] += a^T gc */
static sc_status matmul_backward(sc_node *node, const sc_tensor *gc, sc_tensor *const *gin)
{
    const sc_tensor *a = node->in[0], *b = node->in[1];
    int64_t m = a->shape[0], k = a->shape[1], n = b->shape[1];
    const void *pg = sc_cuda_operand(node->ctx, gc);
    if (!pg)
        return SC_ERR_NOMEM;
    if (gin[0]) {
        const void *pb = sc_cuda_operand(node->ctx, b);
        if (!pb)
            return SC_ERR_NOMEM;
        /* ga [M, K] += gc [M, N] b^T [N, K];
         * cuBLAS: ga^T [K, M] += (b^T [N, K])^T gc^T [N, M] */
        SC_TRY(gemm(node->ctx, CUBLAS_OP_T, CUBLAS_OP_N, k, m, n, pb, n, pg, n, 1.0f,
                    sc_tensor_f32(gin[0]), k));
    }
    if (gin[1]) {
        const void *pa = sc_cuda_operand(node->ctx, a);
        if (!pa)
            return SC_ERR_NOMEM;
        /* gb [K, N] += a^T [K, M] gc [M, N];
         * cuBLAS: gb^T [N, K] += gc^T [N, M] (a^T [K, M])^T */
        SC_TRY(gemm(node->ctx, CUBLAS_OP_N, CUBLAS_OP_T, n, k, m, pg, n, pa, k, 1.0f,
                    sc_tensor_f32(gin[1]), n));
    }
    return SC_OK;
}

/* y [N, OUT] = x [N, IN] w^T + b, with w [OUT, IN], b [OUT] */
static sc_status linear_forward(sc_node *node)
{
    const sc_tensor *x = node->in[0], *w = node->in[1];
    int64_t n = x->shape[0], in = x->shape[1], out = w->shape[0];
    float *y = sc_tensor_f32(node->out), beta = 0.0f;
    const void *px = sc_cuda_operand(node->ctx, x), *pw = sc_cuda_operand(node->ctx, w);
    if (!px || !pw)
        return SC_ERR_NOMEM;
    if (node->n_inputs > 2) {
        /* y [N, OUT] = b [OUT] in every row; the GEMM adds onto it */
        SC_LAUNCH(broadcast_rows_kernel, sc_cuda_blocks(node->out->numel), SC_CUDA_THREADS, 0,
                  sc_cuda_stream(node->ctx), y, sc_tensor_f32(node->in[2]), n, out);
        SC_CUDA_LAUNCHED("broadcast_rows_kernel");
        beta = 1.0f;
    }
    /* y [N, OUT] (+)= x [N, IN] w^T [IN, OUT];
     * cuBLAS: y^T [OUT, N] (+)= (w^T [IN, OUT])^T x^T [IN, N] */
    return gemm(node->ctx, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, pw, in, px, in, beta, y, out);
}

/* gb [OUT] += the column sums of gy [N, OUT], as a GEMV with a vector of
 * ones (always fp32). */
static sc_status linear_bias_grad(sc_ctx *ctx, const sc_tensor *gy, float *gb)
{
    int64_t n = gy->shape[0], out = gy->shape[1];
    sc_cuda_dev *dev = sc_cuda_ctx_dev(ctx);
    float *ones = (float *)sc_ctx_alloc_data(ctx, (size_t)n * sizeof(float));
    if (!ones)
        return SC_ERR_NOMEM;
    SC_TRY(sc_cuda_fill_f32(dev->index, ones, 1.0f, n));
    float alpha = 1.0f, beta = 1.0f;
    /* gb [OUT] += gy^T [OUT, N] ones [N];  cuBLAS: gy^T is gy as stored, [OUT, N] */
    SC_CUBLAS_TRY(cublasSgemv(dev->cublas, CUBLAS_OP_N, (int)out, (int)n, &alpha,
                              sc_tensor_f32(gy), ld_of(out), ones, 1, &beta, gb, 1));
    return SC_OK;
}

/* gx [N, IN] += gy [N, OUT] w;  gw [OUT, IN] += gy^T x;  gb [OUT] += sum_n gy */
static sc_status linear_backward(sc_node *node, const sc_tensor *gy, sc_tensor *const *gin)
{
    const sc_tensor *x = node->in[0], *w = node->in[1];
    int64_t n = x->shape[0], in = x->shape[1], out = w->shape[0];
    if (node->n_inputs > 2 && gin[2])
        SC_TRY(linear_bias_grad(node->ctx, gy, sc_tensor_f32(gin[2])));
    if (!gin[0] && !gin[1])
        return SC_OK;
    const void *pg = sc_cuda_operand(node->ctx, gy);
    if (!pg)
        return SC_ERR_NOMEM;
    if (gin[0]) {
        const void *pw = sc_cuda_operand(node->ctx, w);
        if (!pw)
            return SC_ERR_NOMEM;
        /* gx [N, IN] += gy [N, OUT] w [OUT, IN];
         * cuBLAS: gx^T [IN, N] += w^T [IN, OUT] gy^T [OUT, N] */
        SC_TRY(gemm(node->ctx, CUBLAS_OP_N, CUBLAS_OP_N, in, n, out, pw, in, pg, out, 1.0f,
                    sc_tensor_f32(gin[0]), in));
    }
    if (gin[1]) {
        const void *px = sc_cuda_operand(node->ctx, x);
        if (!px)
            return SC_ERR_NOMEM;
        /* gw [OUT, IN] += gy^T [OUT, N] x [N, IN];
         * cuBLAS: gw^T [IN, OUT] += x^T [IN, N] (gy^T [OUT, N])^T */
        SC_TRY(gemm(node->ctx, CUBLAS_OP_N, CUBLAS_OP_T, in, out, n, px, in, pg, out, 1.0f,
                    sc_tensor_f32(gin[1]), in));
    }
    return SC_OK;
}

extern "C" const sc_kernel sc_cuda_kernel_matmul = {matmul_forward, matmul_backward, 0};
extern "C" const sc_kernel sc_cuda_kernel_linear = {linear_forward, linear_backward, 0};
