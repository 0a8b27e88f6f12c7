/* Reference cuBLAS: the subset scorch calls, written from the cuBLAS 13
 * documentation. Column-major. Every documented argument rule is checked:
 * a breach is reported (cudaemu_report) and gets the documented status.
 * Operands must lie in live device memory of the handle's GPU, the handle
 * must be used while its GPU is current and its stream must be on it; the
 * work is queued on the handle's stream (cudaemu::enqueue).
 *
 * Results: each dot product is accumulated in double from the inputs as
 * the compute type sees them (rounded to TF32, bf16 or fp16 for the _FAST_
 * compute types and, on fp32 data with CUBLAS_COMPUTE_32F, under
 * CUBLAS_TF32_TENSOR_OP_MATH; products of such inputs are exact in fp32, as
 * on tensor cores) and rounded once, so it is at least as accurate as the
 * GPU. beta = 0 means C (y) is not read.
 *
 * Determinism: cuBLAS documents bit-wise reproducible results except when
 * a handle's default workspace pool serves several streams, where it may
 * pick other kernels; a user workspace (cublasSetWorkspace, which
 * cublasSetStream undoes) or CUBLAS_WORKSPACE_CONFIG restores it. A handle
 * that has run work on more than one stream without either sums each dot
 * product as a randomly chosen number of float partial sums (split-K), so
 * its results vary in the last bits from call to call. */
#include <cublas_v2.h>

#include <cstdlib>
#include <mutex>
#include <set>

#include "libs.h"

using cudaemu::num;
using cudaemu::rounding;

struct cublasContext {
    int device; /* current at cublasCreate */
    cudaStream_t stream = nullptr;
    void *ws = nullptr;
    size_t ws_bytes = 0;
    bool user_ws = false; /* cublasSetWorkspace since the last cublasSetStream */
    cublasPointerMode_t pointer_mode = CUBLAS_POINTER_MODE_HOST;
    cublasMath_t math = CUBLAS_DEFAULT_MATH;
    std::mutex mu;                   /* guards streams: a handle may serve several threads */
    std::set<cudaStream_t> streams;  /* every stream it has queued work on */
};
static cudaemu::registry handles;

#define FAIL(status, ...)                                                      \
    do {                                                                       \
        cudaemu_report(__VA_ARGS__);                                           \
        return status;                                                         \
    } while (0)

/* ---- handle ---- */

extern "C" cublasStatus_t cublasCreate(cublasHandle_t *h)
{
    if (!h)
        FAIL(CUBLAS_STATUS_INVALID_VALUE, "cublasCreate: handle is NULL");
    *h = new cublasContext();
    (*h)->device = cudaemu::use_device();
    handles.add(*h);
    return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t handle_live(const char *what, cublasHandle_t h)
{
    if (!handles.has(h))
        FAIL(CUBLAS_STATUS_NOT_INITIALIZED,
             "%s: %p is not a live cuBLAS handle (never created, or destroyed)", what, (void *)h);
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasDestroy(cublasHandle_t h)
{
    if (cublasStatus_t s = handle_live("cublasDestroy", h))
        return s;
    handles.remove(h);
    delete h; /* queued work holds copies of what it needs */
    return CUBLAS_STATUS_SUCCESS;
}

/* documented: resets the workspace to the default pool */
extern "C" cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s)
{
    if (cublasStatus_t st = handle_live("cublasSetStream", h))
        return st;
    h->stream = s;
    h->ws = nullptr;
    h->ws_bytes = 0;
    h->user_ws = false;
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasGetStream(cublasHandle_t h, cudaStream_t *s)
{
    if (cublasStatus_t st = handle_live("cublasGetStream", h))
        return st;
    if (!s)
        FAIL(CUBLAS_STATUS_INVALID_VALUE, "cublasGetStream: streamId is NULL");
    *s = h->stream;
    return CUBLAS_STATUS_SUCCESS;
}

/* documented: 256-byte alignment; a size of 0 also turns the default pool off */
extern "C" cublasStatus_t cublasSetWorkspace(cublasHandle_t h, void *ws, size_t bytes)
{
    if (cublasStatus_t s = handle_live("cublasSetWorkspace", h))
        return s;
    if ((uintptr_t)ws % 256)
        FAIL(CUBLAS_STATUS_INVALID_VALUE, "cublasSetWorkspace: %p is not 256-byte aligned", ws);
    if (!cudaemu::operand_on("cublasSetWorkspace", ws, bytes, h->device))
        return CUBLAS_STATUS_INVALID_VALUE;
    h->ws = ws;
    h->ws_bytes = bytes;
    h->user_ws = true;
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasSetPointerMode(cublasHandle_t h, cublasPointerMode_t mode)
{
    if (cublasStatus_t s = handle_live("cublasSetPointerMode", h))
        return s;
    if (mode != CUBLAS_POINTER_MODE_HOST && mode != CUBLAS_POINTER_MODE_DEVICE)
        FAIL(CUBLAS_STATUS_INVALID_VALUE, "cublasSetPointerMode: mode %d", (int)mode);
    h->pointer_mode = mode;
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasGetPointerMode(cublasHandle_t h, cublasPointerMode_t *mode)
{
    if (cublasStatus_t s = handle_live("cublasGetPointerMode", h))
        return s;
    if (!mode)
        FAIL(CUBLAS_STATUS_INVALID_VALUE, "cublasGetPointerMode: mode is NULL");
    *mode = h->pointer_mode;
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode)
{
    if (cublasStatus_t s = handle_live("cublasSetMathMode", h))
        return s;
    int base = mode & ~CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
    if (base != CUBLAS_DEFAULT_MATH && base != CUBLAS_TENSOR_OP_MATH &&
        base != CUBLAS_PEDANTIC_MATH && base != CUBLAS_TF32_TENSOR_OP_MATH)
        FAIL(CUBLAS_STATUS_INVALID_VALUE, "cublasSetMathMode: mode %d", (int)mode);
    h->math = mode;
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasGetMathMode(cublasHandle_t h, cublasMath_t *mode)
{
    if (cublasStatus_t s = handle_live("cublasGetMathMode", h))
        return s;
    if (!mode)
        FAIL(CUBLAS_STATUS_INVALID_VALUE, "cublasGetMathMode: mode is NULL");
    *mode = h->math;
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" const char *cublasGetStatusName(cublasStatus_t s)
{
#define NAME(status)                                                           \
    case status:                                                               \
        return #status;
    switch (s) {
        NAME(CUBLAS_STATUS_SUCCESS)
        NAME(CUBLAS_STATUS_NOT_INITIALIZED)
        NAME(CUBLAS_STATUS_ALLOC_FAILED)
        NAME(CUBLAS_STATUS_INVALID_VALUE)
        NAME(CUBLAS_STATUS_ARCH_MISMATCH)
        NAME(CUBLAS_STATUS_MAPPING_ERROR)
        NAME(CUBLAS_STATUS_EXECUTION_FAILED)
        NAME(CUBLAS_STATUS_INTERNAL_ERROR)
        NAME(CUBLAS_STATUS_NOT_SUPPORTED)
        NAME(CUBLAS_STATUS_LICENSE_ERROR)
    }
#undef NAME
    return "CUBLAS_STATUS_UNKNOWN";
}
extern "C" const char *cublasGetStatusString(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "an absent device architectural feature is required";
    case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR: return "error detected trying to check the license";
    }
    return "unknown error";
}

/* ---- what every computing call checks ---- */

/* h is live, used while its GPU is current, and its stream and workspace
 * are on that GPU. */
static cublasStatus_t handle_ready(const char *what, cublasHandle_t h)
{
    if (cublasStatus_t s = handle_live(what, h))
        return s;
    if (cudaemu::current_device() != h->device)
        FAIL(CUBLAS_STATUS_EXECUTION_FAILED,
             "%s: the handle belongs to GPU %d but GPU %d is current", what, h->device,
             cudaemu::current_device());
    if (!cudaemu::check_stream_device(what, h->stream))
        return CUBLAS_STATUS_EXECUTION_FAILED;
    if (h->user_ws && !cudaemu::operand_on("cuBLAS workspace (cublasSetWorkspace)", h->ws,
                                           h->ws_bytes, h->device))
        return CUBLAS_STATUS_EXECUTION_FAILED;
    return CUBLAS_STATUS_SUCCESS;
}

/* alpha or beta (float): read at the call in host pointer mode, when the
 * work runs in device pointer mode. */
struct scalar {
    float value = 0;
    const float *device = nullptr;
    float get() const { return device ? *device : value; }
};
static bool scalar_of(const char *what, const cublasContext *h, const void *p, scalar *s)
{
    if (!p) {
        cudaemu_report("%s is NULL", what);
        return false;
    }
    if (h->pointer_mode == CUBLAS_POINTER_MODE_DEVICE) {
        s->device = (const float *)p;
        return cudaemu::operand_on(what, p, sizeof(float), h->device);
    }
    if (cudaemu::is_device(p)) {
        cudaemu_report("%s: %p is device memory, but the pointer mode is "
                       "CUBLAS_POINTER_MODE_HOST", what, p);
        return false;
    }
    s->value = *(const float *)p;
    return true;
}

static bool op_valid(cublasOperation_t op)
{
    return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C;
}

/* Bytes spanned by a column-major rows x cols matrix with leading
 * dimension ld. */
static size_t matrix_bytes(int rows, int cols, int ld, size_t esize)
{
    return rows == 0 || cols == 0 ? 0 : ((size_t)(cols - 1) * ld + rows) * esize;
}
/* Bytes spanned by a vector of len elements inc apart. */
static size_t vector_bytes(int len, int inc, size_t esize)
{
    return len == 0 ? 0 : ((size_t)(len - 1) * abs(inc) + 1) * esize;
}
/* Element j of such a vector: BLAS walks a negative stride from the end. */
static size_t vector_at(int j, int len, int inc)
{
    return inc > 0 ? (size_t)j * inc : (size_t)(len - 1 - j) * -inc;
}

/* How many float partial sums this call's dot products use (see the top
 * of the file); 1 means accumulation in double. Records the stream. */
static int split_for_call(cublasContext *h)
{
    std::lock_guard<std::mutex> lock(h->mu);
    h->streams.insert(h->stream);
    if (h->user_ws || h->streams.size() < 2 || getenv("CUBLAS_WORKSPACE_CONFIG"))
        return 1;
    static const int splits[] = {1, 2, 3, 4, 8};
    return splits[cudaemu::nondeterministic_rng()() % 5];
}

/* The sum of term(0 .. k-1): in double when split is 1, else as split float
 * partial sums over consecutive slices, added in float. */
template <class Term> static double dot(int k, int split, Term term)
{
    if (split == 1) {
        double acc = 0;
        for (int p = 0; p < k; p++)
            acc += term(p);
        return acc;
    }
    float total = 0;
    for (int s = 0; s < split; s++) {
        float part = 0;
        for (int p = (int)((long)k * s / split); p < (int)((long)k * (s + 1) / split); p++)
            part += (float)term(p);
        total += part;
    }
    return total;
}

/* ---- GEMM ---- */

static bool num_of(cudaDataType t, num *out)
{
    switch (t) {
    case CUDA_R_32F: *out = num::f32; return true;
    case CUDA_R_16F: *out = num::f16; return true;
    case CUDA_R_16BF: *out = num::bf16; return true;
    default: return false; /* in the type table, but not computed by the emulator */
    }
}

static bool compute_known(cublasComputeType_t c)
{
    switch (c) {
    case CUBLAS_COMPUTE_16F: case CUBLAS_COMPUTE_16F_PEDANTIC:
    case CUBLAS_COMPUTE_32F: case CUBLAS_COMPUTE_32F_PEDANTIC:
    case CUBLAS_COMPUTE_32F_FAST_16F: case CUBLAS_COMPUTE_32F_FAST_16BF:
    case CUBLAS_COMPUTE_32F_FAST_TF32:
    case CUBLAS_COMPUTE_64F: case CUBLAS_COMPUTE_64F_PEDANTIC:
    case CUBLAS_COMPUTE_32I: case CUBLAS_COMPUTE_32I_PEDANTIC:
        return true;
    }
    return false;
}

/* cublasGemmEx's table of supported (compute, A/B, C) type combinations,
 * for the real types this emulator names. Only half-precision compute is
 * documented but not emulated. */
static cublasStatus_t gemm_types_ok(cudaDataType a, cudaDataType b, cudaDataType c,
                                    cublasComputeType_t compute)
{
    if (!compute_known(compute))
        FAIL(CUBLAS_STATUS_INVALID_VALUE, "cublasGemmEx: computeType %d", (int)compute);
    bool ok = false;
    switch (compute) {
    case CUBLAS_COMPUTE_16F:
    case CUBLAS_COMPUTE_16F_PEDANTIC:
        if (a == CUDA_R_16F && b == a && c == a)
            FAIL(CUBLAS_STATUS_NOT_SUPPORTED, "cublasGemmEx: CUBLAS_COMPUTE_16F is not emulated");
        break;
    case CUBLAS_COMPUTE_32F:
    case CUBLAS_COMPUTE_32F_PEDANTIC:
        ok = b == a && (c == a || c == CUDA_R_32F) &&
             (a == CUDA_R_32F || a == CUDA_R_16F || a == CUDA_R_16BF);
        break;
    case CUBLAS_COMPUTE_32F_FAST_16F:
    case CUBLAS_COMPUTE_32F_FAST_16BF:
    case CUBLAS_COMPUTE_32F_FAST_TF32:
        ok = a == CUDA_R_32F && b == a && c == a;
        break;
    default:
        break;
    }
    if (!ok)
        FAIL(CUBLAS_STATUS_NOT_SUPPORTED,
             "cublasGemmEx: Atype %d, Btype %d, Ctype %d with computeType %d is not in the "
             "table of supported combinations", (int)a, (int)b, (int)c, (int)compute);
    return CUBLAS_STATUS_SUCCESS;
}

static bool algo_valid(cublasGemmAlgo_t algo)
{
    return (algo >= CUBLAS_GEMM_DEFAULT && algo <= CUBLAS_GEMM_ALGO23) ||
           (algo >= CUBLAS_GEMM_DEFAULT_TENSOR_OP && algo <= CUBLAS_GEMM_ALGO15_TENSOR_OP);
}

/* What fp32 inputs are rounded to before they are multiplied. */
static rounding input_rounding(cublasComputeType_t compute, cudaDataType ab, cublasMath_t math)
{
    if (ab != CUDA_R_32F)
        return rounding::none;
    switch (compute) {
    case CUBLAS_COMPUTE_32F_FAST_TF32: return rounding::tf32;
    case CUBLAS_COMPUTE_32F_FAST_16BF: return rounding::bf16;
    case CUBLAS_COMPUTE_32F_FAST_16F: return rounding::half;
    case CUBLAS_COMPUTE_32F:
        return (math & ~CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION) ==
                       CUBLAS_TF32_TENSOR_OP_MATH
                   ? rounding::tf32
                   : rounding::none;
    default: return rounding::none;
    }
}
/* One GEMM as queued: everything it needs, copied at the call. */
struct gemm_job {
    bool ta, tb; /* transposed */
    int m, n, k;
    scalar alpha, beta;
    const void *A, *B;
    void *C;
    num at, ct;
    int lda, ldb, ldc;
    rounding round;
    int split;

    float input(const void *M, size_t i) const
    {
        return cudaemu::rounded((float)cudaemu::load(M, at, i), round);
    }
    float a(int i, int p) const { return input(A, ta ? (size_t)i * lda + p : (size_t)p * lda + i); }
    float b(int p, int j) const { return input(B, tb ? (size_t)p * ldb + j : (size_t)j * ldb + p); }
    void run() const
    {
        double al = alpha.get(), be = beta.get();
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
                double acc = dot(k, split, [&](int p) { return (double)a(i, p) * b(p, j); });
                size_t ci = (size_t)j * ldc + i;
                double old = be == 0 ? 0 : cudaemu::load(C, ct, ci); /* beta 0: C not read */
                cudaemu::store(C, ct, ci, al * acc + be * old);
            }
    }
};

/* The leading dimension rule: ld >= max(1, rows). */
static bool ld_ok(const char *what, const char *name, int ld, int rows, const char *rows_name)
{
    if (ld >= (rows > 1 ? rows : 1))
        return true;
    cudaemu_report("%s: %s %d < max(1, %s = %d)", what, name, ld, rows_name, rows);
    return false;
}

extern "C" cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta,
                                       cublasOperation_t tb, int m, int n, int k,
                                       const void *alpha, const void *A, cudaDataType Atype,
                                       int lda, const void *B, cudaDataType Btype, int ldb,
                                       const void *beta, void *C, cudaDataType Ctype, int ldc,
                                       cublasComputeType_t compute, cublasGemmAlgo_t algo)
{
    const char *what = "cublasGemmEx";
    if (cublasStatus_t s = handle_ready(what, h))
        return s;
    if (!op_valid(ta) || !op_valid(tb))
        FAIL(CUBLAS_STATUS_INVALID_VALUE, "%s: transa %d, transb %d", what, (int)ta, (int)tb);
    if (m < 0 || n < 0 || k < 0)
        FAIL(CUBLAS_STATUS_INVALID_VALUE, "%s: m %d, n %d, k %d", what, m, n, k);
    if (cublasStatus_t s = gemm_types_ok(Atype, Btype, Ctype, compute))
        return s;
    if (!algo_valid(algo))
        FAIL(CUBLAS_STATUS_NOT_SUPPORTED, "%s: algo %d", what, (int)algo);
    gemm_job job;
    job.ta = ta != CUBLAS_OP_N, job.tb = tb != CUBLAS_OP_N;
    int ar = job.ta ? k : m, ac = job.ta ? m : k, br = job.tb ? n : k, bc = job.tb ? k : n;
    if (!ld_ok(what, "lda", lda, ar, job.ta ? "k" : "m") ||
        !ld_ok(what, "ldb", ldb, br, job.tb ? "n" : "k") || !ld_ok(what, "ldc", ldc, m, "m"))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (!scalar_of("cublasGemmEx alpha", h, alpha, &job.alpha) ||
        !scalar_of("cublasGemmEx beta", h, beta, &job.beta))
        return CUBLAS_STATUS_INVALID_VALUE;
    num_of(Atype, &job.at);
    num_of(Ctype, &job.ct);
    size_t ab = matrix_bytes(ar, ac, lda, cudaemu::num_size(job.at)),
           bb = matrix_bytes(br, bc, ldb, cudaemu::num_size(job.at)),
           cb = matrix_bytes(m, n, ldc, cudaemu::num_size(job.ct));
    if (!cudaemu::operand_on("cublasGemmEx A", A, ab, h->device) ||
        !cudaemu::operand_on("cublasGemmEx B", B, bb, h->device) ||
        !cudaemu::operand_on("cublasGemmEx C", C, cb, h->device) ||
        !cudaemu::disjoint("cublasGemmEx: C and A", C, cb, A, ab) ||
        !cudaemu::disjoint("cublasGemmEx: C and B", C, cb, B, bb))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (m == 0 || n == 0)
        return CUBLAS_STATUS_SUCCESS;
    job.m = m, job.n = n, job.k = k;
    job.A = A, job.B = B, job.C = C;
    job.lda = lda, job.ldb = ldb, job.ldc = ldc;
    job.round = input_rounding(compute, Atype, h->math);
    job.split = split_for_call(h);
    if (cudaemu::enqueue(h->stream, what, [job]() { job.run(); }) != cudaSuccess)
        return CUBLAS_STATUS_EXECUTION_FAILED;
    return CUBLAS_STATUS_SUCCESS;
}

/* ---- GEMV ---- */

struct gemv_job {
    bool trans;
    int rows, cols; /* y has rows elements, x cols */
    scalar alpha, beta;
    const float *A, *x;
    float *y;
    int lda, incx, incy, split;

    void run() const
    {
        double al = alpha.get(), be = beta.get();
        for (int i = 0; i < rows; i++) {
            double acc = dot(cols, split, [&](int j) {
                float a = trans ? A[(size_t)i * lda + j] : A[(size_t)j * lda + i];
                return (double)a * x[vector_at(j, cols, incx)];
            });
            float &out = y[vector_at(i, rows, incy)];
            out = (float)(al * acc + (be == 0 ? 0 : be * out)); /* beta 0: y not read */
        }
    }
};

extern "C" cublasStatus_t cublasSgemv(cublasHandle_t h, cublasOperation_t trans, int m, int n,
                                      const float *alpha, const float *A, int lda, const float *x,
                                      int incx, const float *beta, float *y, int incy)
{
    const char *what = "cublasSgemv";
    if (cublasStatus_t s = handle_ready(what, h))
        return s;
    if (!op_valid(trans))
        FAIL(CUBLAS_STATUS_INVALID_VALUE, "%s: trans %d", what, (int)trans);
    if (m < 0 || n < 0 || incx == 0 || incy == 0)
        FAIL(CUBLAS_STATUS_INVALID_VALUE, "%s: m %d, n %d, incx %d, incy %d", what, m, n, incx,
             incy);
    if (!ld_ok(what, "lda", lda, m, "m"))
        return CUBLAS_STATUS_INVALID_VALUE;
    gemv_job job;
    if (!scalar_of("cublasSgemv alpha", h, alpha, &job.alpha) ||
        !scalar_of("cublasSgemv beta", h, beta, &job.beta))
        return CUBLAS_STATUS_INVALID_VALUE;
    job.trans = trans != CUBLAS_OP_N;
    job.rows = job.trans ? n : m, job.cols = job.trans ? m : n;
    size_t ab = matrix_bytes(m, n, lda, 4), xb = vector_bytes(job.cols, incx, 4),
           yb = vector_bytes(job.rows, incy, 4);
    if (!cudaemu::operand_on("cublasSgemv A", A, ab, h->device) ||
        !cudaemu::operand_on("cublasSgemv x", x, xb, h->device) ||
        !cudaemu::operand_on("cublasSgemv y", y, yb, h->device) ||
        !cudaemu::disjoint("cublasSgemv: y and A", y, yb, A, ab) ||
        !cudaemu::disjoint("cublasSgemv: y and x", y, yb, x, xb))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (m == 0 || n == 0) /* BLAS: a quick return, y untouched */
        return CUBLAS_STATUS_SUCCESS;
    job.A = A, job.x = x, job.y = y;
    job.lda = lda, job.incx = incx, job.incy = incy;
    job.split = split_for_call(h);
    if (cudaemu::enqueue(h->stream, what, [job]() { job.run(); }) != cudaSuccess)
        return CUBLAS_STATUS_EXECUTION_FAILED;
    return CUBLAS_STATUS_SUCCESS;
}
