/* Reference cuBLAS subset: column-major, the documented argument rules
 * checked (leading dimensions, type combinations, device ranges). */
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "internal.h"

struct cublasContext {
    cudaStream_t stream = nullptr;
    void *ws = nullptr;
    size_t ws_bytes = 0;
};

extern "C" cublasStatus_t cublasCreate(cublasHandle_t *h)
{
    *h = new cublasContext();
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasDestroy(cublasHandle_t h)
{
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s)
{
    h->stream = s;
    h->ws = nullptr; /* documented: SetStream resets the workspace to the default pool */
    h->ws_bytes = 0;
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasSetWorkspace(cublasHandle_t h, void *ws, size_t bytes)
{
    if (bytes && !cudaemu::check_device_range("cublasSetWorkspace", ws, bytes))
        return CUBLAS_STATUS_INVALID_VALUE;
    if ((uintptr_t)ws % 256)
        cudaemu_report("cublasSetWorkspace: workspace not 256-byte aligned");
    h->ws = ws;
    h->ws_bytes = bytes;
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" const char *cublasGetStatusString(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_(emulated)";
    }
}

static size_t type_size(cudaDataType t) { return t == CUDA_R_32F ? 4 : 2; }
static float load(const void *p, cudaDataType t, size_t i)
{
    return t == CUDA_R_32F ? ((const float *)p)[i] : (float)((const __nv_bfloat16 *)p)[i];
}
static float tf32(float x) /* round to TensorFloat-32 (10 explicit mantissa bits) */
{
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) != 0x7f800000u)
        u = (u + 0xfffu + ((u >> 13) & 1u)) & ~0x1fffu;
    memcpy(&x, &u, 4);
    return x;
}

/* A column-major rows x cols operand with leading dimension ld: its extent. */
static bool operand_ok(const char *what, const void *p, int rows, int cols, int ld, size_t esize)
{
    if (ld < (rows > 1 ? rows : 1)) {
        cudaemu_report("cublas: %s: leading dimension %d < max(1, %d rows)", what, ld, rows);
        return false;
    }
    if (rows == 0 || cols == 0)
        return true;
    size_t last = ((size_t)(cols - 1) * ld + (size_t)rows) * esize;
    return cudaemu::check_device_range(what, p, last);
}

extern "C" cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta,
                                       cublasOperation_t tb, int m, int n, int k,
                                       const void *alpha, const void *A, cudaDataType Atype,
                                       int lda, const void *B, cudaDataType Btype, int ldb,
                                       const void *beta, void *C, cudaDataType Ctype, int ldc,
                                       cublasComputeType_t compute, cublasGemmAlgo_t algo)
{
    if (m < 0 || n < 0 || k < 0)
        return CUBLAS_STATUS_INVALID_VALUE;
    bool ok_types =
        (Atype == CUDA_R_32F && Btype == CUDA_R_32F && Ctype == CUDA_R_32F &&
         (compute == CUBLAS_COMPUTE_32F || compute == CUBLAS_COMPUTE_32F_FAST_TF32 ||
          compute == CUBLAS_COMPUTE_32F_FAST_16BF)) ||
        (Atype == CUDA_R_16BF && Btype == CUDA_R_16BF &&
         (Ctype == CUDA_R_32F || Ctype == CUDA_R_16BF) && compute == CUBLAS_COMPUTE_32F);
    if (!ok_types) {
        cudaemu_report("cublasGemmEx: unsupported types A %d B %d C %d compute %d", Atype, Btype,
                   Ctype, compute);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    int ar = ta == CUBLAS_OP_N ? m : k, ac = ta == CUBLAS_OP_N ? k : m;
    int br = tb == CUBLAS_OP_N ? k : n, bc = tb == CUBLAS_OP_N ? n : k;
    if (!operand_ok("cublasGemmEx A", A, ar, ac, lda, type_size(Atype)) ||
        !operand_ok("cublasGemmEx B", B, br, bc, ldb, type_size(Btype)) ||
        !operand_ok("cublasGemmEx C", C, m, n, ldc, type_size(Ctype)))
        return CUBLAS_STATUS_INVALID_VALUE;
    float al = *(const float *)alpha, be = *(const float *)beta; /* host pointer mode: read now */
    bool round_tf32 = compute == CUBLAS_COMPUTE_32F_FAST_TF32;
    cudaemu::enqueue(h->stream, "cublasGemmEx", [=]() {
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
                double acc = 0;
                for (int p = 0; p < k; p++) {
                    float a = load(A, Atype, ta == CUBLAS_OP_N ? (size_t)p * lda + i : (size_t)i * lda + p);
                    float b = load(B, Btype, tb == CUBLAS_OP_N ? (size_t)j * ldb + p : (size_t)p * ldb + j);
                    if (round_tf32)
                        a = tf32(a), b = tf32(b);
                    acc += (double)a * b;
                }
                size_t ci = (size_t)j * ldc + i;
                float old = be == 0.0f ? 0.0f : load(C, Ctype, ci); /* beta 0: C not read */
                float v = (float)(al * acc + (double)be * old);
                if (Ctype == CUDA_R_32F)
                    ((float *)C)[ci] = v;
                else
                    ((__nv_bfloat16 *)C)[ci] = __float2bfloat16_rn(v);
            }
    });
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasSgemv(cublasHandle_t h, cublasOperation_t trans, int m, int n,
                                      const float *alpha, const float *A, int lda, const float *x,
                                      int incx, const float *beta, float *y, int incy)
{
    if (m < 0 || n < 0 || incx == 0 || incy == 0)
        return CUBLAS_STATUS_INVALID_VALUE;
    int xl = trans == CUBLAS_OP_N ? n : m, yl = trans == CUBLAS_OP_N ? m : n;
    if (!operand_ok("cublasSgemv A", A, m, n, lda, 4) ||
        (xl && !cudaemu::check_device_range("cublasSgemv x", x, ((size_t)(xl - 1) * abs(incx) + 1) * 4)) ||
        (yl && !cudaemu::check_device_range("cublasSgemv y", y, ((size_t)(yl - 1) * abs(incy) + 1) * 4)))
        return CUBLAS_STATUS_INVALID_VALUE;
    float al = *alpha, be = *beta;
    cudaemu::enqueue(h->stream, "cublasSgemv", [=]() {
        for (int i = 0; i < yl; i++) {
            double acc = 0;
            for (int j = 0; j < xl; j++) {
                float a = trans == CUBLAS_OP_N ? A[(size_t)j * lda + i] : A[(size_t)i * lda + j];
                acc += (double)a * x[(size_t)j * incx];
            }
            float old = be == 0.0f ? 0.0f : y[(size_t)i * incy];
            y[(size_t)i * incy] = (float)(al * acc + (double)be * old);
        }
    });
    return CUBLAS_STATUS_SUCCESS;
}
