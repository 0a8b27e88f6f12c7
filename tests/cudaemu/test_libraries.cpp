/* The reference cuBLAS and cuDNN (tests/cudaemu/src/cublas.cpp, cudnn.cpp):
 * results against naive loops written here; each documented contract
 * breach reported once with the documented status; the determinism the
 * heuristics report, and non-deterministic algorithms that do vary from
 * run to run while deterministic ones do not; work queued on the handle's
 * stream (captured into graphs). */
#include <criterion/criterion.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

#include "test_reports.h"

static void setup() { capture_reports(); }
TestSuite(cublas, .init = setup);
TestSuite(cudnn, .init = setup);

/* call returns status and makes exactly one report, which says text. */
#define EXPECT_BREACH(status, call, text)                                                         \
    do {                                                                                          \
        int before_ = cudaemu_report_count();                                                     \
        int got_ = (int)(call);                                                                   \
        cr_expect_eq(got_, (int)(status), "%s: status %d, expected %d", #call, got_,              \
                     (int)(status));                                                              \
        cr_expect_eq(cudaemu_report_count(), before_ + 1, "%s: %d reports", #call,                \
                     cudaemu_report_count() - before_);                                           \
        std::string said_ = reports_text();                                                       \
        cr_expect(said_.find(text) != std::string::npos, "%s: the report should say \"%s\":\n%s", \
                  #call, text, said_.c_str());                                                    \
    } while (0)

/* ---------------------------------------------------------------------
 * Memory. */

static cudaStream_t stream()
{
    static cudaStream_t s;
    if (!s)
        cr_assert_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    return s;
}

/* n fresh elements: the emulator fills them with NaN. */
template <class T> static T *fresh(size_t n)
{
    void *p = nullptr;
    cr_assert_eq(cudaMalloc(&p, n * sizeof(T)), cudaSuccess);
    return (T *)p;
}
template <class T> static T *upload(const std::vector<T> &v)
{
    T *p = fresh<T>(v.size());
    cr_assert_eq(cudaMemcpyAsync(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice,
                                 stream()), cudaSuccess);
    return p;
}
template <class T> static std::vector<T> fetch(const T *p, size_t n)
{
    std::vector<T> v(n);
    cr_assert_eq(cudaMemcpyAsync(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost, stream()),
                 cudaSuccess);
    cr_assert_eq(cudaStreamSynchronize(stream()), cudaSuccess);
    return v;
}

/* n values in [-1, 1) with full mantissas, the same for the same seed. */
static std::vector<float> randoms(size_t n, unsigned seed)
{
    std::vector<float> v(n);
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    for (float &x : v) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x = (float)((double)(s >> 11) / (double)(1ull << 53) * 2.0 - 1.0);
    }
    return v;
}

static float tf32(float x) /* 10 mantissa bits, nearest even */
{
    uint32_t u;
    memcpy(&u, &x, 4);
    u = (u + 0xfffu + ((u >> 13) & 1u)) & ~0x1fffu;
    memcpy(&x, &u, 4);
    return x;
}
static float bf16(float x) { return (float)__float2bfloat16_rn(x); }

static void expect_close(const std::vector<float> &got, const std::vector<double> &want,
                         double rel, const char *what)
{
    cr_assert_eq(got.size(), want.size(), "%s: size", what);
    for (size_t i = 0; i < got.size(); i++)
        cr_expect((std::isnan(got[i]) && std::isnan(want[i])) ||
                      std::fabs(got[i] - want[i]) <= rel * (std::fabs(want[i]) + 1),
                  "%s [%zu]: %.9g, expected %.9g", what, i, got[i], want[i]);
}

/* ---------------------------------------------------------------------
 * cuBLAS. */

static cublasHandle_t blas()
{
    cublasHandle_t h;
    cr_assert_eq(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
    cr_assert_eq(cublasSetStream(h, stream()), CUBLAS_STATUS_SUCCESS);
    return h;
}

/* A GEMM's types: A and B, C, compute; and what the inputs are rounded to. */
struct gemm_types {
    cudaDataType ab, c;
    cublasComputeType_t compute;
    float (*round)(float);
};
static float exact(float x) { return x; }
static float half(float x) /* via the fp16 grid: 11 significant bits near 1 */
{
    int e;
    double m = std::frexp(x, &e);
    return (float)std::ldexp(std::nearbyint(std::ldexp(m, 11)), e - 11);
}

/* v as device memory of type t (fp32, or bf16 rounded to nearest). */
static void *matrix(cudaDataType t, const std::vector<float> &v)
{
    if (t == CUDA_R_32F)
        return upload(v);
    std::vector<__nv_bfloat16> b(v.size());
    for (size_t i = 0; i < v.size(); i++)
        b[i] = __float2bfloat16_rn(v[i]);
    return upload(b);
}
static std::vector<float> fetch_as_float(cudaDataType t, const void *p, size_t n)
{
    if (t == CUDA_R_32F)
        return fetch((const float *)p, n);
    std::vector<__nv_bfloat16> b = fetch((const __nv_bfloat16 *)p, n);
    std::vector<float> v(n);
    for (size_t i = 0; i < n; i++)
        v[i] = (float)b[i];
    return v;
}

/* C = alpha op(A) op(B) + beta C, column-major with padded leading
 * dimensions, checked against the naive product in double. */
static void check_gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                       gemm_types t, float beta)
{
    const int m = 5, n = 4, k = 7;
    int ar = ta == CUBLAS_OP_N ? m : k, ac = ta == CUBLAS_OP_N ? k : m;
    int br = tb == CUBLAS_OP_N ? k : n, bc = tb == CUBLAS_OP_N ? n : k;
    int lda = ar + 1, ldb = br + 2, ldc = m + 1;
    std::vector<float> a = randoms((size_t)lda * ac, 1), b = randoms((size_t)ldb * bc, 2),
                       c = randoms((size_t)ldc * n, 3);
    if (t.ab != CUDA_R_32F) /* the values bf16 operands hold */
        for (std::vector<float> *v : {&a, &b})
            for (float &x : *v)
                x = bf16(x);
    if (t.c != CUDA_R_32F)
        for (float &x : c)
            x = bf16(x);
    void *da = matrix(t.ab, a), *db = matrix(t.ab, b);
    void *dc = beta == 0 ? (t.c == CUDA_R_32F ? (void *)fresh<float>(c.size())
                                              : (void *)fresh<__nv_bfloat16>(c.size()))
                         : matrix(t.c, c);
    float alpha = 1.5f;
    cr_assert_eq(cublasGemmEx(h, ta, tb, m, n, k, &alpha, da, t.ab, lda, db, t.ab, ldb, &beta, dc,
                              t.c, ldc, t.compute, CUBLAS_GEMM_DEFAULT),
                 CUBLAS_STATUS_SUCCESS);
    std::vector<float> got = fetch_as_float(t.c, dc, c.size());
    std::vector<double> want(got.size()), unrounded(got.size());
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double acc = 0, plain = 0;
            for (int p = 0; p < k; p++) {
                float av = ta == CUBLAS_OP_N ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p];
                float bv = tb == CUBLAS_OP_N ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j];
                acc += (double)t.round(av) * t.round(bv);
                plain += (double)av * bv;
            }
            size_t ci = (size_t)j * ldc + i;
            double old = beta == 0 ? 0 : c[ci];
            want[ci] = alpha * acc + beta * old;
            unrounded[ci] = alpha * plain + beta * old;
        }
    for (int j = 0; j < n; j++) /* the padding rows stay as they were */
        for (int i = m; i < ldc; i++) {
            size_t ci = (size_t)j * ldc + i;
            want[ci] = unrounded[ci] = got[ci];
            cr_expect(beta == 0 ? std::isnan(got[ci]) : got[ci] == c[ci], "padding touched");
        }
    double tol = t.c == CUDA_R_32F ? 1e-6 : 1.0 / 128;
    expect_close(got, want, tol, "cublasGemmEx");
    if (t.round != exact) { /* the rounding shows */
        double most = 0;
        for (size_t i = 0; i < got.size(); i++)
            most = std::fmax(most, std::fabs(got[i] - unrounded[i]));
        cr_expect(most > 1e-5, "compute type %d: inputs not rounded", (int)t.compute);
    }
}

Test(cublas, gemm_ex_matches_the_naive_product)
{
    cublasHandle_t h = blas();
    const gemm_types types[] = {
        {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, exact},
        {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_PEDANTIC, exact},
        {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, tf32},
        {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_16BF, bf16},
        {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_16F, half},
        {CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F, exact},
        {CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, exact},
    };
    const cublasOperation_t ops[] = {CUBLAS_OP_N, CUBLAS_OP_T, CUBLAS_OP_C};
    for (const gemm_types &t : types)
        for (cublasOperation_t ta : ops)
            for (cublasOperation_t tb : ops)
                for (float beta : {0.0f, 0.5f})
                    check_gemm(h, ta, tb, t, beta);
    cr_expect_eq(cudaemu_report_count(), 0);
}

Test(cublas, tf32_math_mode_rounds_fp32_compute)
{
    cublasHandle_t h = blas();
    cr_assert_eq(cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH), CUBLAS_STATUS_SUCCESS);
    check_gemm(h, CUBLAS_OP_N, CUBLAS_OP_T, {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, tf32}, 0);
    check_gemm(h, CUBLAS_OP_N, CUBLAS_OP_T,
               {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_PEDANTIC, exact}, 0);
    cr_expect_eq(cudaemu_report_count(), 0);
}

Test(cublas, sgemv_matches_the_naive_product)
{
    cublasHandle_t h = blas();
    const int m = 6, n = 5, lda = 8;
    std::vector<float> a = randoms((size_t)lda * n, 4);
    float *da = upload(a);
    for (cublasOperation_t op : {CUBLAS_OP_N, CUBLAS_OP_T})
        for (int incx : {1, -2})
            for (float beta : {0.0f, 2.0f}) {
                int xl = op == CUBLAS_OP_N ? n : m, yl = op == CUBLAS_OP_N ? m : n;
                std::vector<float> x = randoms((size_t)xl * 2, 5), y = randoms(yl, 6);
                float *dx = upload(x), *dy = beta == 0 ? fresh<float>(yl) : upload(y);
                float alpha = -0.5f;
                cr_assert_eq(cublasSgemv(h, op, m, n, &alpha, da, lda, dx, incx, &beta, dy, 1),
                             CUBLAS_STATUS_SUCCESS);
                std::vector<double> want(yl);
                for (int i = 0; i < yl; i++) {
                    double acc = 0;
                    for (int j = 0; j < xl; j++) { /* a negative stride walks x from its end */
                        size_t xi = incx > 0 ? (size_t)j * incx : (size_t)(xl - 1 - j) * -incx;
                        acc += (double)(op == CUBLAS_OP_N ? a[(size_t)j * lda + i]
                                                          : a[(size_t)i * lda + j]) * x[xi];
                    }
                    want[i] = alpha * acc + (beta == 0 ? 0 : beta * y[i]);
                }
                expect_close(fetch(dy, yl), want, 1e-6, "cublasSgemv");
            }
    cr_expect_eq(cudaemu_report_count(), 0);
}

Test(cublas, device_pointer_mode_reads_the_scalars_when_the_work_runs)
{
    cublasHandle_t h = blas();
    cr_assert_eq(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_DEVICE), CUBLAS_STATUS_SUCCESS);
    std::vector<float> a = {1, 2, 3, 4}, b = {1, 0, 0, 1};
    float *da = upload(a), *db = upload(b), *dc = fresh<float>(4);
    float *scalars = upload(std::vector<float>{2.0f, 0.0f});
    cr_assert_eq(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, scalars, da, CUDA_R_32F, 2, db,
                              CUDA_R_32F, 2, scalars + 1, dc, CUDA_R_32F, 2, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT),
                 CUBLAS_STATUS_SUCCESS);
    std::vector<float> c = fetch(dc, 4);
    for (int i = 0; i < 4; i++)
        cr_expect_eq(c[i], 2 * a[i]);
    float host_alpha = 1;
    EXPECT_BREACH(CUBLAS_STATUS_INVALID_VALUE,
                  cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &host_alpha, da, CUDA_R_32F,
                               2, db, CUDA_R_32F, 2, scalars + 1, dc, CUDA_R_32F, 2,
                               CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                  "cublasGemmEx alpha");
    cr_assert_eq(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST), CUBLAS_STATUS_SUCCESS);
    EXPECT_BREACH(CUBLAS_STATUS_INVALID_VALUE,
                  cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, scalars, da, CUDA_R_32F, 2,
                               db, CUDA_R_32F, 2, &host_alpha, dc, CUDA_R_32F, 2,
                               CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                  "but the pointer mode is CUBLAS_POINTER_MODE_HOST");
}

/* A 2x2 GEMM with everything right but what the caller changes. */
struct gemm_call {
    cublasHandle_t h;
    cublasOperation_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
    int m = 2, n = 2, k = 2;
    const float *alpha;
    const void *A, *B;
    cudaDataType at = CUDA_R_32F, bt = CUDA_R_32F;
    int lda = 2, ldb = 2;
    const float *beta;
    void *C;
    cudaDataType ct = CUDA_R_32F;
    int ldc = 2;
    cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
    cublasGemmAlgo_t algo = CUBLAS_GEMM_DEFAULT;

    cublasStatus_t operator()() const
    {
        return cublasGemmEx(h, ta, tb, m, n, k, alpha, A, at, lda, B, bt, ldb, beta, C, ct, ldc,
                            compute, algo);
    }
};

Test(cublas, gemm_ex_contract_breaches_are_reported)
{
    static const float one = 1, zero = 0;
    cublasHandle_t h = blas();
    float *a = upload(std::vector<float>(4, 1.0f)), *c = fresh<float>(4);
    gemm_call ok;
    ok.h = h, ok.alpha = &one, ok.beta = &zero, ok.A = a, ok.B = a, ok.C = c;
    cr_assert_eq(ok(), CUBLAS_STATUS_SUCCESS);
    gemm_call bad = ok;
    bad.lda = 1;
    EXPECT_BREACH(CUBLAS_STATUS_INVALID_VALUE, bad(), "lda 1 < max(1, m = 2)");
    bad = ok, bad.ta = CUBLAS_OP_T, bad.k = 3, bad.lda = 2, bad.m = 1;
    EXPECT_BREACH(CUBLAS_STATUS_INVALID_VALUE, bad(), "lda 2 < max(1, k = 3)");
    bad = ok, bad.ldb = 0, bad.k = 1;
    EXPECT_BREACH(CUBLAS_STATUS_INVALID_VALUE, bad(), "ldb 0 < max(1, k = 1)");
    bad = ok, bad.ldc = 1;
    EXPECT_BREACH(CUBLAS_STATUS_INVALID_VALUE, bad(), "ldc 1 < max(1, m = 2)");
    bad = ok, bad.k = -1;
    EXPECT_BREACH(CUBLAS_STATUS_INVALID_VALUE, bad(), "m 2, n 2, k -1");
    bad = ok, bad.ta = (cublasOperation_t)3; /* CUBLAS_OP_CONJG: not for GEMM */
    EXPECT_BREACH(CUBLAS_STATUS_INVALID_VALUE, bad(), "transa 3");
    bad = ok, bad.alpha = nullptr;
    EXPECT_BREACH(CUBLAS_STATUS_INVALID_VALUE, bad(), "cublasGemmEx alpha is NULL");
    bad = ok, bad.bt = CUDA_R_16BF;
    EXPECT_BREACH(CUBLAS_STATUS_NOT_SUPPORTED, bad(), "is not in the table of supported");
    bad = ok, bad.at = bad.bt = CUDA_R_16BF, bad.compute = CUBLAS_COMPUTE_32F_FAST_TF32;
    EXPECT_BREACH(CUBLAS_STATUS_NOT_SUPPORTED, bad(), "is not in the table of supported");
    bad = ok, bad.compute = (cublasComputeType_t)3;
    EXPECT_BREACH(CUBLAS_STATUS_INVALID_VALUE, bad(), "computeType 3");
    bad = ok, bad.algo = (cublasGemmAlgo_t)50;
    EXPECT_BREACH(CUBLAS_STATUS_NOT_SUPPORTED, bad(), "algo 50");
    std::vector<float> host(4);
    bad = ok, bad.A = host.data();
    EXPECT_BREACH(CUBLAS_STATUS_INVALID_VALUE, bad(), "is not device memory");
    bad = ok, bad.m = 2, bad.k = 3, bad.B = a, bad.ldb = 3; /* B 3x2 needs 6 floats, a has 4 */
    bad.A = fresh<float>(6);
    EXPECT_BREACH(CUBLAS_STATUS_INVALID_VALUE, bad(), "runs past the end");
    bad = ok, bad.C = a;
    EXPECT_BREACH(CUBLAS_STATUS_INVALID_VALUE, bad(), "C and A overlap");
    cudaSetDevice(1);
    float *other = fresh<float>(4);
    cudaSetDevice(0);
    bad = ok, bad.B = other;
    EXPECT_BREACH(CUBLAS_STATUS_INVALID_VALUE, bad(), "is memory of GPU 1, the handle's GPU is 0");
    cudaSetDevice(1);
    EXPECT_BREACH(CUBLAS_STATUS_EXECUTION_FAILED, ok(), "the handle belongs to GPU 0 but GPU 1");
    cudaSetDevice(0);
    cr_expect_eq(ok(), CUBLAS_STATUS_SUCCESS);
}

Test(cublas, handle_and_workspace_breaches_are_reported)
{
    static const float one = 1, zero = 0;
    cublasHandle_t h = blas();
    float *a = upload(std::vector<float>(4, 1.0f)), *c = fresh<float>(4);
    gemm_call ok;
    ok.h = h, ok.alpha = &one, ok.beta = &zero, ok.A = a, ok.B = a, ok.C = c;
    char *ws = fresh<char>(1 << 16);
    EXPECT_BREACH(CUBLAS_STATUS_INVALID_VALUE, cublasSetWorkspace(h, ws + 8, 1024),
                  "is not 256-byte aligned");
    std::vector<char> host(1024);
    int before = cudaemu_report_count();
    cr_expect_eq(
        cublasSetWorkspace(h, host.data() + (256 - (uintptr_t)host.data() % 256) % 256, 256),
        CUBLAS_STATUS_INVALID_VALUE);
    cr_expect_eq(cudaemu_report_count(), before + 1);
    cr_assert_eq(cublasSetWorkspace(h, ws, 1 << 16), CUBLAS_STATUS_SUCCESS);
    cr_expect_eq(ok(), CUBLAS_STATUS_SUCCESS);
    cudaFree(ws);
    EXPECT_BREACH(CUBLAS_STATUS_EXECUTION_FAILED, ok(), "cuBLAS workspace (cublasSetWorkspace)");
    cr_assert_eq(cublasSetStream(h, stream()), CUBLAS_STATUS_SUCCESS); /* back to the pool */
    cr_expect_eq(ok(), CUBLAS_STATUS_SUCCESS);
    cudaStream_t s1;
    cudaSetDevice(1);
    cr_assert_eq(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking), cudaSuccess);
    cudaSetDevice(0);
    cr_assert_eq(cublasSetStream(h, s1), CUBLAS_STATUS_SUCCESS);
    before = cudaemu_report_count();
    cr_expect_eq(ok(), CUBLAS_STATUS_EXECUTION_FAILED);
    cr_expect_eq(cudaemu_report_count(), before + 1, "a stream of another GPU");
    cr_assert_eq(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
    EXPECT_BREACH(CUBLAS_STATUS_NOT_INITIALIZED, ok(), "is not a live cuBLAS handle");
    EXPECT_BREACH(CUBLAS_STATUS_NOT_INITIALIZED, cublasDestroy(h), "is not a live cuBLAS handle");
}

/* k-long dot products of random values, run `times` times. */
static std::vector<std::vector<float>> repeated_gemms(cublasHandle_t h, int times)
{
    const int m = 16, n = 16, k = 512;
    float *a = upload(randoms((size_t)m * k, 7)), *b = upload(randoms((size_t)k * n, 8));
    float *c = fresh<float>((size_t)m * n);
    float one = 1, zero = 0;
    std::vector<std::vector<float>> runs;
    cr_assert_eq(cudaDeviceSynchronize(), cudaSuccess); /* the handle's stream may be another */
    for (int i = 0; i < times; i++) {
        cr_assert_eq(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, a, CUDA_R_32F, m, b,
                                  CUDA_R_32F, k, &zero, c, CUDA_R_32F, m, CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT),
                     CUBLAS_STATUS_SUCCESS);
        cr_assert_eq(cudaDeviceSynchronize(), cudaSuccess);
        runs.push_back(fetch(c, (size_t)m * n));
    }
    return runs;
}
static bool all_same(const std::vector<std::vector<float>> &runs)
{
    for (const std::vector<float> &r : runs)
        if (memcmp(r.data(), runs[0].data(), r.size() * sizeof(float)))
            return false;
    return true;
}

/* Documented: the default workspace pool shared by several streams may
 * pick other kernels; a workspace of the caller's keeps results exact. */
Test(cublas, the_default_pool_on_two_streams_is_not_reproducible)
{
    cublasHandle_t h = blas();
    cr_expect(all_same(repeated_gemms(h, 4)), "one stream");
    cudaStream_t other;
    cr_assert_eq(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
    cr_assert_eq(cublasSetStream(h, other), CUBLAS_STATUS_SUCCESS);
    repeated_gemms(h, 1);
    cr_assert_eq(cublasSetStream(h, stream()), CUBLAS_STATUS_SUCCESS);
    cr_expect(!all_same(repeated_gemms(h, 8)), "the default pool after two streams");
    cr_assert_eq(cublasSetWorkspace(h, fresh<char>(1 << 20), 1 << 20), CUBLAS_STATUS_SUCCESS);
    cr_expect(all_same(repeated_gemms(h, 4)), "a workspace of the caller's");
    cr_expect_eq(cudaemu_report_count(), 0);
}

Test(cublas, gemm_runs_on_the_handle_stream_and_is_captured)
{
    cublasHandle_t h = blas();
    float *a = upload(std::vector<float>{1, 2, 3, 4}), *c = fresh<float>(4);
    cr_assert_eq(cudaStreamSynchronize(stream()), cudaSuccess);
    float one = 1, zero = 0;
    cr_assert_eq(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeGlobal), cudaSuccess);
    cr_assert_eq(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, a, CUDA_R_32F, 2, a,
                              CUDA_R_32F, 2, &zero, c, CUDA_R_32F, 2, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT),
                 CUBLAS_STATUS_SUCCESS);
    one = 2; /* host scalars are read at the call, not at the launch */
    cudaGraph_t g;
    cr_assert_eq(cudaStreamEndCapture(stream(), &g), cudaSuccess);
    cr_expect(std::isnan(fetch(c, 4)[0]), "captured work ran at capture");
    cudaGraphExec_t exec;
    cr_assert_eq(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
    cr_assert_eq(cudaGraphLaunch(exec, stream()), cudaSuccess);
    std::vector<float> got = fetch(c, 4); /* [1 3; 2 4]^2 column-major */
    cr_expect(got[0] == 7 && got[1] == 10 && got[2] == 15 && got[3] == 22, "%g %g %g %g", got[0],
              got[1], got[2], got[3]);
    cr_expect_eq(cudaemu_report_count(), 0);
}

/* ---------------------------------------------------------------------
 * cuDNN: descriptors and naive loops. */

static cudnnHandle_t dnn()
{
    cudnnHandle_t h;
    cr_assert_eq(cudnnCreate(&h), CUDNN_STATUS_SUCCESS);
    cr_assert_eq(cudnnSetStream(h, stream()), CUDNN_STATUS_SUCCESS);
    return h;
}
static cudnnTensorDescriptor_t tensor(int n, int c, int h, int w,
                                      cudnnDataType_t t = CUDNN_DATA_FLOAT,
                                      cudnnTensorFormat_t f = CUDNN_TENSOR_NCHW)
{
    cudnnTensorDescriptor_t d;
    cr_assert_eq(cudnnCreateTensorDescriptor(&d), CUDNN_STATUS_SUCCESS);
    cr_assert_eq(cudnnSetTensor4dDescriptor(d, f, t, n, c, h, w), CUDNN_STATUS_SUCCESS);
    return d;
}

/* A convolution and its shapes. */
struct conv_case {
    int n, c, h, w, k, r, s, ph, pw, sh, sw, dh, dw, groups;
    cudnnConvolutionMode_t mode;
    int oh() const { return (h + 2 * ph - (r - 1) * dh - 1) / sh + 1; }
    int ow() const { return (w + 2 * pw - (s - 1) * dw - 1) / sw + 1; }
    size_t xs() const { return (size_t)n * c * h * w; }
    size_t ws() const { return (size_t)k * (c / groups) * r * s; }
    size_t ys() const { return (size_t)n * k * oh() * ow(); }
};

/* The convolution's cuDNN descriptors. */
struct conv_descs {
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
};
static conv_descs describe(const conv_case &cc, cudnnMathType_t math,
                           cudnnDataType_t t = CUDNN_DATA_FLOAT)
{
    conv_descs d;
    d.x = tensor(cc.n, cc.c, cc.h, cc.w, t);
    d.y = tensor(cc.n, cc.k, cc.oh(), cc.ow(), t);
    cr_assert_eq(cudnnCreateFilterDescriptor(&d.w), CUDNN_STATUS_SUCCESS);
    cr_assert_eq(cudnnSetFilter4dDescriptor(d.w, t, CUDNN_TENSOR_NCHW, cc.k, cc.c / cc.groups,
                                            cc.r, cc.s), CUDNN_STATUS_SUCCESS);
    cr_assert_eq(cudnnCreateConvolutionDescriptor(&d.conv), CUDNN_STATUS_SUCCESS);
    cr_assert_eq(cudnnSetConvolution2dDescriptor(d.conv, cc.ph, cc.pw, cc.sh, cc.sw, cc.dh, cc.dw,
                                                 cc.mode, CUDNN_DATA_FLOAT),
                 CUDNN_STATUS_SUCCESS);
    cr_assert_eq(cudnnSetConvolutionGroupCount(d.conv, cc.groups), CUDNN_STATUS_SUCCESS);
    cr_assert_eq(cudnnSetConvolutionMathType(d.conv, math), CUDNN_STATUS_SUCCESS);
    return d;
}

/* f(x index, w index, y index) for every tap of the convolution, NCHW. */
template <class F> static void naive_taps(const conv_case &cc, F f)
{
    int cg = cc.c / cc.groups, kg = cc.k / cc.groups;
    for (int n = 0; n < cc.n; n++)
        for (int k = 0; k < cc.k; k++)
            for (int oy = 0; oy < cc.oh(); oy++)
                for (int ox = 0; ox < cc.ow(); ox++)
                    for (int c = 0; c < cg; c++)
                        for (int i = 0; i < cc.r; i++)
                            for (int j = 0; j < cc.s; j++) {
                                int fi = cc.mode == CUDNN_CONVOLUTION ? cc.r - 1 - i : i;
                                int fj = cc.mode == CUDNN_CONVOLUTION ? cc.s - 1 - j : j;
                                int iy = oy * cc.sh - cc.ph + fi * cc.dh;
                                int ix = ox * cc.sw - cc.pw + fj * cc.dw;
                                if (iy < 0 || iy >= cc.h || ix < 0 || ix >= cc.w)
                                    continue;
                                int xc = k / kg * cg + c;
                                f((((size_t)n * cc.c + xc) * cc.h + iy) * cc.w + ix,
                                  (((size_t)k * cg + c) * cc.r + i) * cc.s + j,
                                  (((size_t)n * cc.k + k) * cc.oh() + oy) * cc.ow() + ox);
                            }
}

static const conv_case conv_cases[] = {
    {2, 3, 7, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION},
    {2, 4, 9, 8, 6, 3, 2, 0, 1, 2, 1, 1, 2, 2, CUDNN_CROSS_CORRELATION},
    {1, 2, 6, 6, 2, 2, 3, 2, 0, 1, 2, 2, 1, 1, CUDNN_CONVOLUTION},
    {3, 4, 5, 5, 4, 5, 5, 2, 2, 1, 1, 1, 1, 4, CUDNN_CROSS_CORRELATION},
};

/* The workspace an algorithm asks for, allocated (or NULL for none). */
static void *workspace(size_t bytes) { return bytes ? (void *)fresh<char>(bytes) : nullptr; }

enum dir { FWD, BWD_DATA, BWD_FILTER };

/* Runs dir of cc with algo on inputs a and b (x/w, dy/w or x/dy) into out
 * (y, dx or dw) with beta; returns out. */
static std::vector<float> conv_run(cudnnHandle_t h, const conv_case &cc, const conv_descs &d,
                                   dir dr, int algo, const float *a, const float *b, float *out,
                                   float beta)
{
    float one = 1;
    size_t bytes = 0, out_n = dr == FWD ? cc.ys() : dr == BWD_DATA ? cc.xs() : cc.ws();
    if (dr == FWD) {
        cr_assert_eq(cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.conv, d.y,
                     (cudnnConvolutionFwdAlgo_t)algo, &bytes), CUDNN_STATUS_SUCCESS);
        void *ws = workspace(bytes);
        cr_assert_eq(cudnnConvolutionForward(h, &one, d.x, a, d.w, b, d.conv,
                                             (cudnnConvolutionFwdAlgo_t)algo, ws, bytes, &beta, d.y,
                                             out),
                     CUDNN_STATUS_SUCCESS, "forward algo %d", algo);
    } else if (dr == BWD_DATA) {
        cr_assert_eq(cudnnGetConvolutionBackwardDataWorkspaceSize(
                         h, d.w, d.y, d.conv, d.x, (cudnnConvolutionBwdDataAlgo_t)algo, &bytes),
                     CUDNN_STATUS_SUCCESS);
        void *ws = workspace(bytes);
        cr_assert_eq(cudnnConvolutionBackwardData(h, &one, d.w, b, d.y, a, d.conv,
                                                  (cudnnConvolutionBwdDataAlgo_t)algo, ws, bytes,
                                                  &beta, d.x, out),
                     CUDNN_STATUS_SUCCESS, "backward data algo %d", algo);
    } else {
        cr_assert_eq(cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d.x, d.y, d.conv, d.w,
                     (cudnnConvolutionBwdFilterAlgo_t)algo, &bytes), CUDNN_STATUS_SUCCESS);
        void *ws = workspace(bytes);
        cr_assert_eq(cudnnConvolutionBackwardFilter(h, &one, d.x, a, d.y, b, d.conv,
                                                    (cudnnConvolutionBwdFilterAlgo_t)algo, ws,
                                                    bytes, &beta, d.w, out),
                     CUDNN_STATUS_SUCCESS, "backward filter algo %d", algo);
    }
    return fetch(out, out_n);
}

/* The algorithms of dr that support cc, per the heuristics. */
static std::vector<int> fitting_algos(cudnnHandle_t h, const conv_descs &d, dir dr)
{
    std::vector<int> algos;
    int n = 0;
    if (dr == FWD) {
        cudnnConvolutionFwdAlgoPerf_t p[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        cr_assert_eq(cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.conv, d.y,
                     CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, p), CUDNN_STATUS_SUCCESS);
        for (int i = 0; i < n; i++)
            if (p[i].status == CUDNN_STATUS_SUCCESS)
                algos.push_back(p[i].algo);
    } else if (dr == BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t p[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        cr_assert_eq(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w, d.y, d.conv, d.x,
                     CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, p), CUDNN_STATUS_SUCCESS);
        for (int i = 0; i < n; i++)
            if (p[i].status == CUDNN_STATUS_SUCCESS)
                algos.push_back(p[i].algo);
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t p[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        cr_assert_eq(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x, d.y, d.conv, d.w,
                     CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, p), CUDNN_STATUS_SUCCESS);
        for (int i = 0; i < n; i++)
            if (p[i].status == CUDNN_STATUS_SUCCESS)
                algos.push_back(p[i].algo);
    }
    return algos;
}

/* ---------------------------------------------------------------------
 * cuDNN: convolution results. */

Test(cudnn, convolutions_match_naive_loops_with_every_algorithm)
{
    cudnnHandle_t h = dnn();
    for (const conv_case &cc : conv_cases) {
        conv_descs d = describe(cc, CUDNN_FMA_MATH);
        std::vector<float> x = randoms(cc.xs(), 1), w = randoms(cc.ws(), 2),
                           dy = randoms(cc.ys(), 3),
                           prior = randoms(cc.xs() + cc.ws() + cc.ys(), 4);
        std::vector<double> y(cc.ys()), dx(cc.xs()), dw(cc.ws());
        naive_taps(cc, [&](size_t xi, size_t wi, size_t yi) {
            y[yi] += (double)x[xi] * w[wi];
            dx[xi] += (double)dy[yi] * w[wi];
            dw[wi] += (double)x[xi] * dy[yi];
        });
        float *px = upload(x), *pw = upload(w), *pdy = upload(dy);
        for (float beta : {0.0f, 1.0f}) {
            /* beta 1 adds to prior values; beta 0 reads nothing (NaN there) */
            std::vector<float> py(prior.begin(), prior.begin() + cc.ys()),
                pdx(prior.begin(), prior.begin() + cc.xs()),
                pdw(prior.begin(), prior.begin() + cc.ws());
            std::vector<double> wy = y, wdx = dx, wdw = dw;
            if (beta != 0) {
                for (size_t i = 0; i < wy.size(); i++) wy[i] += py[i];
                for (size_t i = 0; i < wdx.size(); i++) wdx[i] += pdx[i];
                for (size_t i = 0; i < wdw.size(); i++) wdw[i] += pdw[i];
            }
            for (int algo : fitting_algos(h, d, FWD))
                expect_close(conv_run(h, cc, d, FWD, algo, px, pw,
                                      beta ? upload(py) : fresh<float>(cc.ys()), beta),
                             wy, 1e-5, "forward");
            for (int algo : fitting_algos(h, d, BWD_DATA))
                expect_close(conv_run(h, cc, d, BWD_DATA, algo, pdy, pw,
                                      beta ? upload(pdx) : fresh<float>(cc.xs()), beta),
                             wdx, 1e-5, "backward data");
            for (int algo : fitting_algos(h, d, BWD_FILTER))
                expect_close(conv_run(h, cc, d, BWD_FILTER, algo, px, pdy,
                                      beta ? upload(pdw) : fresh<float>(cc.ws()), beta),
                             wdw, 1e-5, "backward filter");
        }
    }
    cr_expect_eq(cudaemu_report_count(), 0);
}

Test(cudnn, nhwc_tensors_convolve_as_nchw_ones)
{
    cudnnHandle_t h = dnn();
    const conv_case cc = conv_cases[0];
    conv_descs d = describe(cc, CUDNN_FMA_MATH);
    std::vector<float> x = randoms(cc.xs(), 5), w = randoms(cc.ws(), 6);
    float *y_nchw = fresh<float>(cc.ys());
    std::vector<float> want = conv_run(h, cc, d, FWD, 0, upload(x), upload(w), y_nchw, 0);
    /* the same tensors stored NHWC (the filter KRSC) */
    auto nhwc = [](const std::vector<float> &v, int n, int c, int hh, int ww) {
        std::vector<float> t(v.size());
        for (int a = 0; a < n; a++)
            for (int b = 0; b < c; b++)
                for (int i = 0; i < hh; i++)
                    for (int j = 0; j < ww; j++)
                        t[(((size_t)a * hh + i) * ww + j) * c + b] =
                            v[(((size_t)a * c + b) * hh + i) * ww + j];
        return t;
    };
    conv_descs e = d;
    e.x = tensor(cc.n, cc.c, cc.h, cc.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC);
    e.y = tensor(cc.n, cc.k, cc.oh(), cc.ow(), CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC);
    cr_assert_eq(cudnnCreateFilterDescriptor(&e.w), CUDNN_STATUS_SUCCESS);
    cr_assert_eq(cudnnSetFilter4dDescriptor(e.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, cc.k, cc.c,
                                            cc.r, cc.s), CUDNN_STATUS_SUCCESS);
    std::vector<float> got = conv_run(h, cc, e, FWD, 0, upload(nhwc(x, cc.n, cc.c, cc.h, cc.w)),
                                      upload(nhwc(w, cc.k, cc.c, cc.r, cc.s)),
                                      fresh<float>(cc.ys()), 0);
    cr_expect(got == nhwc(want, cc.n, cc.k, cc.oh(), cc.ow()));
    cr_expect_eq(cudaemu_report_count(), 0);
}

/* Tensor-op algorithms round float inputs to TF32 unless the math type is
 * FMA; bf16 data accumulates in float and rounds the result to bf16. */
Test(cudnn, math_types_and_bf16_round_as_documented)
{
    cudnnHandle_t h = dnn();
    const conv_case cc = conv_cases[0];
    std::vector<float> x = randoms(cc.xs(), 7), w = randoms(cc.ws(), 8);
    std::vector<double> exact_y(cc.ys()), tf32_y(cc.ys()), bf16_y(cc.ys());
    naive_taps(cc, [&](size_t xi, size_t wi, size_t yi) {
        exact_y[yi] += (double)x[xi] * w[wi];
        tf32_y[yi] += (double)tf32(x[xi]) * tf32(w[wi]);
        bf16_y[yi] += (double)bf16(x[xi]) * bf16(w[wi]);
    });
    float *px = upload(x), *pw = upload(w);
    int precomp = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
    expect_close(conv_run(h, cc, describe(cc, CUDNN_FMA_MATH), FWD, precomp, px, pw,
                          fresh<float>(cc.ys()), 0), exact_y, 1e-6, "FMA math");
    for (cudnnMathType_t m : {CUDNN_TENSOR_OP_MATH, CUDNN_DEFAULT_MATH})
        expect_close(conv_run(h, cc, describe(cc, m), FWD, precomp, px, pw, fresh<float>(cc.ys()),
                              0), tf32_y, 1e-6, "tensor-op math");
    expect_close(conv_run(h, cc, describe(cc, CUDNN_DEFAULT_MATH), FWD,
                          CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, px, pw, fresh<float>(cc.ys()),
                          0),
                 exact_y, 1e-6, "an FMA-only algorithm");
    double most = 0;
    for (size_t i = 0; i < exact_y.size(); i++)
        most = std::fmax(most, std::fabs(exact_y[i] - tf32_y[i]));
    cr_expect(most > 1e-5, "the data should tell TF32 from fp32");

    conv_descs d = describe(cc, CUDNN_DEFAULT_MATH, CUDNN_DATA_BFLOAT16);
    auto to_bf16 = [](const std::vector<float> &v) {
        std::vector<__nv_bfloat16> b(v.size());
        for (size_t i = 0; i < v.size(); i++)
            b[i] = __float2bfloat16_rn(v[i]);
        return b;
    };
    __nv_bfloat16 *y = fresh<__nv_bfloat16>(cc.ys());
    float one = 1, zero = 0;
    cr_assert_eq(cudnnConvolutionForward(h, &one, d.x, upload(to_bf16(x)), d.w, upload(to_bf16(w)),
                                         d.conv, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr,
                                         0, &zero, d.y, y), CUDNN_STATUS_SUCCESS);
    std::vector<__nv_bfloat16> got = fetch(y, cc.ys());
    for (size_t i = 0; i < got.size(); i++)
        cr_expect_eq((float)got[i], bf16((float)bf16_y[i]), "bf16 y[%zu]", i);
    cr_expect_eq(cudaemu_report_count(), 0);
}

/* ---------------------------------------------------------------------
 * cuDNN: heuristics and determinism. */

template <class Perf>
static void expect_ranked(const Perf *p, int n, int count, const char *what)
{
    cr_expect_eq(n, count, "%s: every algorithm listed", what);
    bool unsupported_seen = false;
    for (int i = 0; i < n; i++) {
        if (p[i].status != CUDNN_STATUS_SUCCESS)
            unsupported_seen = true;
        else
            cr_expect(!unsupported_seen, "%s: a supported algorithm after an unsupported one",
                      what);
        cr_expect_eq(p[i].time, -1.0f, "%s: heuristics measure nothing", what);
    }
}

Test(cudnn, heuristics_report_determinism_workspace_and_math)
{
    cudnnHandle_t h = dnn();
    const conv_case cc = conv_cases[0]; /* 3x3, stride 1: every family fits */
    for (cudnnMathType_t math : {CUDNN_FMA_MATH, CUDNN_DEFAULT_MATH}) {
        conv_descs d = describe(cc, math);
        int n;
        cudnnConvolutionFwdAlgoPerf_t f[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        cr_assert_eq(cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.conv, d.y,
                     CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, f), CUDNN_STATUS_SUCCESS);
        expect_ranked(f, n, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, "forward");
        for (int i = 0; i < n; i++) {
            cr_expect_eq(f[i].determinism, CUDNN_DETERMINISTIC, "forward algo %d", f[i].algo);
            cr_expect(math != CUDNN_FMA_MATH || f[i].mathType == CUDNN_FMA_MATH);
            size_t bytes;
            if (f[i].status == CUDNN_STATUS_SUCCESS) {
                cr_assert_eq(cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.conv, d.y,
                             f[i].algo, &bytes), CUDNN_STATUS_SUCCESS);
                cr_expect_eq(bytes, f[i].memory, "forward algo %d", f[i].algo);
            }
        }
        cr_expect(math == CUDNN_FMA_MATH || f[0].mathType == CUDNN_TENSOR_OP_MATH,
                  "default math: the best forward algorithm uses tensor cores");

        cudnnConvolutionBwdDataAlgoPerf_t bd[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        cr_assert_eq(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w, d.y, d.conv, d.x,
                     CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, bd), CUDNN_STATUS_SUCCESS);
        expect_ranked(bd, n, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, "backward data");
        cr_expect_eq(bd[0].determinism, CUDNN_NON_DETERMINISTIC, "ranked first, as cuDNN may");
        for (int i = 0; i < n; i++)
            cr_expect_eq(bd[i].determinism == CUDNN_NON_DETERMINISTIC,
                         bd[i].algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, "algo %d", bd[i].algo);

        cudnnConvolutionBwdFilterAlgoPerf_t bf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        cr_assert_eq(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x, d.y, d.conv, d.w,
                     CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, bf), CUDNN_STATUS_SUCCESS);
        expect_ranked(bf, n, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, "backward filter");
        cr_expect_eq(bf[0].determinism, CUDNN_NON_DETERMINISTIC, "ranked first, as cuDNN may");
        for (int i = 0; i < n; i++) {
            bool nd = bf[i].algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 ||
                      bf[i].algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3;
            cr_expect_eq(bf[i].determinism == CUDNN_NON_DETERMINISTIC, nd, "algo %d", bf[i].algo);
            if (bf[i].algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD)
                cr_expect_eq(bf[i].status, CUDNN_STATUS_NOT_SUPPORTED, "not implemented");
        }
        cr_assert_eq(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x, d.y, d.conv, d.w, 2, &n,
                                                                   bf), CUDNN_STATUS_SUCCESS);
        cr_expect_eq(n, 2, "no more than requested");
    }
    cr_expect_eq(cudaemu_report_count(), 0);
}

/* runs of algo on the same inputs, bit for bit the same? */
static bool reproducible(cudnnHandle_t h, const conv_case &cc, const conv_descs &d, dir dr,
                         int algo, float beta)
{
    float *x = upload(randoms(cc.xs(), 9)), *w = upload(randoms(cc.ws(), 10)),
          *dy = upload(randoms(cc.ys(), 11));
    std::vector<float> prior = randoms(dr == BWD_DATA ? cc.xs() : cc.ws(), 12);
    std::vector<float> first;
    for (int run = 0; run < 6; run++) {
        float *out = beta ? upload(prior) : fresh<float>(prior.size());
        std::vector<float> got = dr == BWD_DATA ? conv_run(h, cc, d, dr, algo, dy, w, out, beta)
                                                : conv_run(h, cc, d, dr, algo, x, dy, out, beta);
        if (run == 0)
            first = got;
        else if (memcmp(got.data(), first.data(), got.size() * sizeof(float)))
            return false;
    }
    return true;
}

Test(cudnn, non_deterministic_algorithms_vary_and_deterministic_ones_do_not)
{
    cudnnHandle_t h = dnn();
    const conv_case cc = {4, 4, 8, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION};
    conv_descs d = describe(cc, CUDNN_FMA_MATH);
    for (float beta : {0.0f, 1.0f}) {
        cr_expect(!reproducible(h, cc, d, BWD_DATA, CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, beta));
        cr_expect(reproducible(h, cc, d, BWD_DATA, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, beta));
        cr_expect(!reproducible(h, cc, d, BWD_FILTER, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, beta));
        cr_expect(!reproducible(h, cc, d, BWD_FILTER, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3, beta));
        cr_expect(reproducible(h, cc, d, BWD_FILTER, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, beta));
    }
    cr_expect_eq(cudaemu_report_count(), 0);
}

/* ---------------------------------------------------------------------
 * cuDNN: convolution contract breaches. */

Test(cudnn, convolution_contract_breaches_are_reported)
{
    cudnnHandle_t h = dnn();
    const conv_case cc = conv_cases[0];
    conv_descs d = describe(cc, CUDNN_FMA_MATH);
    float *x = upload(randoms(cc.xs(), 1)), *w = upload(randoms(cc.ws(), 2));
    float *y = fresh<float>(cc.ys());
    float one = 1, zero = 0;
    const cudnnConvolutionFwdAlgo_t gemm = CUDNN_CONVOLUTION_FWD_ALGO_GEMM;
    size_t need;
    cr_assert_eq(cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.conv, d.y, gemm, &need),
                 CUDNN_STATUS_SUCCESS);
    cr_assert_gt(need, 0);
    void *ws = fresh<char>(need);
    auto fwd = [&](cudnnTensorDescriptor_t xd, const void *xp, cudnnFilterDescriptor_t wd,
                   cudnnConvolutionDescriptor_t cd, int algo, void *wsp, size_t wsb, const void *al,
                   cudnnTensorDescriptor_t yd, void *yp) {
        return cudnnConvolutionForward(h, al, xd, xp, wd, w, cd, (cudnnConvolutionFwdAlgo_t)algo,
                                       wsp, wsb, &zero, yd, yp);
    };
    cr_assert_eq(fwd(d.x, x, d.w, d.conv, gemm, ws, need, &one, d.y, y), CUDNN_STATUS_SUCCESS);
    EXPECT_BREACH(CUDNN_STATUS_BAD_PARAM,
                  fwd(d.x, x, d.w, d.conv, gemm, ws, need - 1, &one, d.y, y), "bytes of workspace");
    std::vector<char> host(need);
    EXPECT_BREACH(CUDNN_STATUS_BAD_PARAM,
                  fwd(d.x, x, d.w, d.conv, gemm, host.data(), need, &one, d.y, y), "workSpace");
    const int precomp = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
    size_t small;
    cr_assert_eq(cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.conv, d.y,
                 (cudnnConvolutionFwdAlgo_t)precomp, &small), CUDNN_STATUS_SUCCESS);
    cr_assert_leq(small, cc.xs() * sizeof(float));
    EXPECT_BREACH(CUDNN_STATUS_BAD_PARAM, fwd(d.x, x, d.w, d.conv, precomp, x, small, &one, d.y, y),
                  "workSpace and x overlap");
    float *both = fresh<float>(cc.xs() + cc.ys());
    EXPECT_BREACH(CUDNN_STATUS_BAD_PARAM,
                  fwd(d.x, both, d.w, d.conv, 0, nullptr, 0, &one, d.y, both + 1),
                  "y and x overlap");
    EXPECT_BREACH(CUDNN_STATUS_BAD_PARAM, fwd(d.x, x, d.w, d.conv, 42, nullptr, 0, &one, d.y, y),
                  "algorithm 42 is no algorithm");
    EXPECT_BREACH(CUDNN_STATUS_BAD_PARAM, fwd(d.x, x, d.w, d.conv, 0, nullptr, 0, x, d.y, y),
                  "alpha");
    EXPECT_BREACH(CUDNN_STATUS_BAD_PARAM, fwd(d.x, fresh<float>(cc.xs() - 1), d.w, d.conv, 0,
                                              nullptr, 0, &one, d.y, y),
                  "runs past the end");
    cudaSetDevice(1);
    float *other = fresh<float>(cc.xs());
    EXPECT_BREACH(CUDNN_STATUS_EXECUTION_FAILED,
                  fwd(d.x, x, d.w, d.conv, 0, nullptr, 0, &one, d.y, y),
                  "the handle belongs to GPU 0 but GPU 1 is current");
    cudaStream_t s1;
    cr_assert_eq(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking), cudaSuccess);
    cudaSetDevice(0);
    EXPECT_BREACH(CUDNN_STATUS_MAPPING_ERROR, cudnnSetStream(h, s1), "the stream belongs to GPU 1");
    EXPECT_BREACH(CUDNN_STATUS_BAD_PARAM, fwd(d.x, other, d.w, d.conv, 0, nullptr, 0, &one, d.y, y),
                  "is memory of GPU 1, the handle's GPU is 0");

    /* descriptors that disagree */
    EXPECT_BREACH(
        CUDNN_STATUS_NOT_SUPPORTED,
        fwd(d.x, x, d.w, d.conv, 0, nullptr, 0, &one, tensor(cc.n, cc.k, cc.oh() + 1, cc.ow()), y),
        "cudnnGetConvolution2dForwardOutputDim gives");
    EXPECT_BREACH(
        CUDNN_STATUS_BAD_PARAM,
        fwd(d.x, x, d.w, d.conv, 0, nullptr, 0, &one, tensor(cc.n, cc.k + 1, cc.oh(), cc.ow()), y),
        "the convolution gives");
    EXPECT_BREACH(CUDNN_STATUS_BAD_PARAM,
                  fwd(d.x, x, d.w, d.conv, 0, nullptr, 0, &one,
                      tensor(cc.n, cc.k, cc.oh(), cc.ow(), CUDNN_DATA_BFLOAT16), y),
                  "data types differ");
    EXPECT_BREACH(
        CUDNN_STATUS_BAD_PARAM,
        fwd(tensor(cc.n, cc.c + 1, cc.h, cc.w), x, d.w, d.conv, 0, nullptr, 0, &one, d.y, y),
        "x has 4 channels, the filter 3 per group");
    cudnnConvolutionDescriptor_t c2;
    cr_assert_eq(cudnnCreateConvolutionDescriptor(&c2), CUDNN_STATUS_SUCCESS);
    EXPECT_BREACH(CUDNN_STATUS_BAD_PARAM, fwd(d.x, x, d.w, c2, 0, nullptr, 0, &one, d.y, y),
                  "convDesc was never set");
    cr_assert_eq(cudnnSetConvolution2dDescriptor(c2, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                                 CUDNN_DATA_DOUBLE), CUDNN_STATUS_SUCCESS);
    EXPECT_BREACH(CUDNN_STATUS_NOT_SUPPORTED, fwd(d.x, x, d.w, c2, 0, nullptr, 0, &one, d.y, y),
                  "is not a supported (emulated) configuration");
    cr_assert_eq(cudnnSetConvolution2dDescriptor(c2, 0, 0, 1, 1, 4, 1, CUDNN_CROSS_CORRELATION,
                                                 CUDNN_DATA_FLOAT), CUDNN_STATUS_SUCCESS);
    EXPECT_BREACH(CUDNN_STATUS_BAD_PARAM, fwd(d.x, x, d.w, c2, 0, nullptr, 0, &one, d.y, y),
                  "is larger than the padded input");
    cr_assert_eq(cudnnSetConvolution2dDescriptor(c2, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                                 CUDNN_DATA_FLOAT), CUDNN_STATUS_SUCCESS);
    cr_assert_eq(cudnnSetConvolutionGroupCount(c2, 3), CUDNN_STATUS_SUCCESS);
    EXPECT_BREACH(CUDNN_STATUS_BAD_PARAM, fwd(d.x, x, d.w, c2, 0, nullptr, 0, &one, d.y, y),
                  "4 output channels in 3 groups");
    EXPECT_BREACH(CUDNN_STATUS_BAD_PARAM, cudnnSetConvolutionGroupCount(c2, 0), "0 groups");
    cr_assert_eq(cudnnDestroyConvolutionDescriptor(c2), CUDNN_STATUS_SUCCESS);
    EXPECT_BREACH(CUDNN_STATUS_BAD_PARAM, fwd(d.x, x, d.w, c2, 0, nullptr, 0, &one, d.y, y),
                  "is not a live descriptor");
    EXPECT_BREACH(CUDNN_STATUS_BAD_PARAM, cudnnDestroyConvolutionDescriptor(c2),
                  "destroyed twice");

    /* an algorithm outside its shapes: Winograd on a strided convolution */
    const conv_case strided = conv_cases[1];
    conv_descs s = describe(strided, CUDNN_FMA_MATH);
    float *sx = upload(randoms(strided.xs(), 1)), *sy = fresh<float>(strided.ys());
    EXPECT_BREACH(CUDNN_STATUS_NOT_SUPPORTED,
                  cudnnConvolutionForward(h, &one, s.x, sx, s.w, upload(randoms(strided.ws(), 2)),
                                          s.conv, CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, nullptr, 0,
                                          &zero, s.y, sy),
                  "does not support this convolution");
    size_t bytes;
    EXPECT_BREACH(CUDNN_STATUS_NOT_SUPPORTED,
                  cudnnGetConvolutionForwardWorkspaceSize(h, s.x, s.w, s.conv, s.y,
                                                          CUDNN_CONVOLUTION_FWD_ALGO_FFT, &bytes),
                  "does not support this convolution");
    int n;
    cudnnConvolutionFwdAlgoPerf_t p[1];
    EXPECT_BREACH(CUDNN_STATUS_BAD_PARAM,
                  cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.conv, d.y, 0, &n, p),
                  "requestedAlgoCount 0");

    /* descriptors set wrong */
    cudnnTensorDescriptor_t t;
    cr_assert_eq(cudnnCreateTensorDescriptor(&t), CUDNN_STATUS_SUCCESS);
    EXPECT_BREACH(CUDNN_STATUS_BAD_PARAM,
                  cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 2, 0, 3, 3),
                  "each must be > 0");
    EXPECT_BREACH(
        CUDNN_STATUS_BAD_PARAM,
        cudnnSetTensor4dDescriptor(t, (cudnnTensorFormat_t)3, CUDNN_DATA_FLOAT, 1, 1, 1, 1),
        "format 3");
    EXPECT_BREACH(CUDNN_STATUS_BAD_PARAM,
                  cudnnSetConvolution2dDescriptor(d.conv, 0, 0, 0, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                                  CUDNN_DATA_FLOAT),
                  "stride 0 1");
}

Test(cudnn, output_dim_and_backward_bias)
{
    cudnnHandle_t h = dnn();
    const conv_case cc = conv_cases[1];
    conv_descs d = describe(cc, CUDNN_FMA_MATH);
    int dims[4];
    cr_assert_eq(cudnnGetConvolution2dForwardOutputDim(d.conv, d.x, d.w, &dims[0], &dims[1],
                                                       &dims[2], &dims[3]), CUDNN_STATUS_SUCCESS);
    cr_expect(dims[0] == cc.n && dims[1] == cc.k && dims[2] == cc.oh() && dims[3] == cc.ow(),
              "%d %d %d %d", dims[0], dims[1], dims[2], dims[3]);

    std::vector<float> dy = randoms(cc.ys(), 3), prior = randoms(cc.k, 4);
    cudnnTensorDescriptor_t bias = tensor(1, cc.k, 1, 1);
    float one = 1, zero = 0, *pdy = upload(dy);
    for (float beta : {0.0f, 1.0f}) {
        float *db = beta ? upload(prior) : fresh<float>(cc.k);
        cr_assert_eq(cudnnConvolutionBackwardBias(h, &one, d.y, pdy, &beta, bias, db),
                     CUDNN_STATUS_SUCCESS);
        std::vector<double> want(cc.k, 0.0);
        for (size_t i = 0; i < dy.size(); i++)
            want[i / ((size_t)cc.oh() * cc.ow()) % cc.k] += dy[i];
        for (int k = 0; k < cc.k; k++)
            want[k] += beta * prior[k];
        expect_close(fetch(db, cc.k), want, 1e-6, "cudnnConvolutionBackwardBias");
    }
    EXPECT_BREACH(CUDNN_STATUS_BAD_PARAM,
                  cudnnConvolutionBackwardBias(h, &one, d.y, pdy, &zero, tensor(1, cc.k, 2, 1),
                                               fresh<float>(2 * cc.k)),
                  "db is [1, 6, 2, 1] for dy with 6 channels");
}

/* ---------------------------------------------------------------------
 * cuDNN: pooling. */

struct pool_case {
    cudnnPoolingMode_t mode;
    int n, c, h, w, wh, ww, ph, pw, sh, sw;
    int oh() const { return (h + 2 * ph - wh) / sh + 1; }
    int ow() const { return (w + 2 * pw - ww) / sw + 1; }
    size_t xs() const { return (size_t)n * c * h * w; }
    size_t ys() const { return (size_t)n * c * oh() * ow(); }
};

static cudnnPoolingDescriptor_t pooling(const pool_case &pc)
{
    cudnnPoolingDescriptor_t p;
    cr_assert_eq(cudnnCreatePoolingDescriptor(&p), CUDNN_STATUS_SUCCESS);
    cr_assert_eq(cudnnSetPooling2dDescriptor(p, pc.mode, CUDNN_PROPAGATE_NAN, pc.wh, pc.ww, pc.ph,
                                             pc.pw, pc.sh, pc.sw), CUDNN_STATUS_SUCCESS);
    return p;
}

/* f(y index, x indices of the window's taps inside x, divisor). */
template <class F> static void naive_windows(const pool_case &pc, F f)
{
    for (int p = 0; p < pc.n * pc.c; p++)
        for (int oy = 0; oy < pc.oh(); oy++)
            for (int ox = 0; ox < pc.ow(); ox++) {
                std::vector<size_t> taps;
                for (int i = 0; i < pc.wh; i++)
                    for (int j = 0; j < pc.ww; j++) {
                        int iy = oy * pc.sh - pc.ph + i, ix = ox * pc.sw - pc.pw + j;
                        if (iy >= 0 && iy < pc.h && ix >= 0 && ix < pc.w)
                            taps.push_back(((size_t)p * pc.h + iy) * pc.w + ix);
                    }
                int div = pc.mode == CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING ? pc.wh * pc.ww
                                                                                 : (int)taps.size();
                f(((size_t)p * pc.oh() + oy) * pc.ow() + ox, taps, div);
            }
}

Test(cudnn, pooling_matches_naive_loops)
{
    cudnnHandle_t h = dnn();
    const pool_case cases[] = {
        {CUDNN_POOLING_MAX_DETERMINISTIC, 2, 3, 7, 6, 3, 3, 1, 1, 2, 2},
        {CUDNN_POOLING_MAX, 2, 3, 6, 6, 2, 2, 0, 0, 2, 2},
        {CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING, 2, 3, 7, 6, 3, 2, 1, 1, 2, 1},
        {CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING, 2, 3, 7, 6, 3, 2, 1, 1, 2, 1},
    };
    float one = 1;
    for (const pool_case &pc : cases) {
        cudnnPoolingDescriptor_t p = pooling(pc);
        cudnnTensorDescriptor_t xd = tensor(pc.n, pc.c, pc.h, pc.w),
                                yd = tensor(pc.n, pc.c, pc.oh(), pc.ow());
        std::vector<float> x = randoms(pc.xs(), 1), dy = randoms(pc.ys(), 2),
                           prior = randoms(pc.xs(), 3);
        std::vector<double> y(pc.ys()), dx(pc.xs());
        bool max = pc.mode == CUDNN_POOLING_MAX || pc.mode == CUDNN_POOLING_MAX_DETERMINISTIC;
        naive_windows(pc, [&](size_t o, const std::vector<size_t> &taps, int div) {
            size_t best = taps[0];
            double sum = 0;
            for (size_t i : taps) {
                best = x[i] > x[best] ? i : best;
                sum += x[i];
            }
            y[o] = max ? x[best] : sum / div;
            if (max)
                dx[best] += dy[o];
            else
                for (size_t i : taps)
                    dx[i] += (double)dy[o] / div;
        });
        float *px = upload(x), *py = fresh<float>(pc.ys()), zero = 0;
        cr_assert_eq(cudnnPoolingForward(h, p, &one, xd, px, &zero, yd, py), CUDNN_STATUS_SUCCESS);
        std::vector<float> got_y = fetch(py, pc.ys());
        expect_close(got_y, y, 1e-6, "cudnnPoolingForward");
        float *pdx = upload(prior);
        cr_assert_eq(
            cudnnPoolingBackward(h, p, &one, yd, py, yd, upload(dy), xd, px, &one, xd, pdx),
            CUDNN_STATUS_SUCCESS);
        for (size_t i = 0; i < dx.size(); i++)
            dx[i] += prior[i];
        expect_close(fetch(pdx, pc.xs()), dx, 1e-6, "cudnnPoolingBackward");
    }
    cr_expect_eq(cudaemu_report_count(), 0);
}

/* Documented: max pooling's backward is not reproducible (overlapping
 * windows add by atomics); CUDNN_POOLING_MAX_DETERMINISTIC is. */
Test(cudnn, max_pooling_backward_varies_unless_deterministic)
{
    cudnnHandle_t h = dnn();
    for (cudnnPoolingMode_t mode : {CUDNN_POOLING_MAX, CUDNN_POOLING_MAX_DETERMINISTIC}) {
        const pool_case pc = {mode, 2, 4, 12, 12, 3, 3, 1, 1, 1, 1};
        cudnnPoolingDescriptor_t p = pooling(pc);
        cudnnTensorDescriptor_t xd = tensor(pc.n, pc.c, pc.h, pc.w),
                                yd = tensor(pc.n, pc.c, pc.oh(), pc.ow());
        float one = 1, zero = 0, *x = upload(randoms(pc.xs(), 4)), *y = fresh<float>(pc.ys());
        float *dy = upload(randoms(pc.ys(), 5));
        cr_assert_eq(cudnnPoolingForward(h, p, &one, xd, x, &zero, yd, y), CUDNN_STATUS_SUCCESS);
        std::vector<float> first;
        bool same = true;
        for (int run = 0; run < 6; run++) {
            float *dx = fresh<float>(pc.xs());
            cr_assert_eq(cudnnPoolingBackward(h, p, &one, yd, y, yd, dy, xd, x, &zero, xd, dx),
                         CUDNN_STATUS_SUCCESS);
            std::vector<float> got = fetch(dx, pc.xs());
            if (run == 0)
                first = got;
            same = same && !memcmp(got.data(), first.data(), got.size() * sizeof(float));
        }
        cr_expect_eq(same, mode == CUDNN_POOLING_MAX_DETERMINISTIC, "mode %d", (int)mode);
    }
    cr_expect_eq(cudaemu_report_count(), 0);
}

Test(cudnn, pooling_contract_breaches_are_reported)
{
    cudnnHandle_t h = dnn();
    const pool_case pc = {CUDNN_POOLING_MAX_DETERMINISTIC, 1, 2, 6, 6, 2, 2, 0, 0, 2, 2};
    cudnnPoolingDescriptor_t p = pooling(pc);
    cudnnTensorDescriptor_t xd = tensor(pc.n, pc.c, pc.h, pc.w),
                            yd = tensor(pc.n, pc.c, pc.oh(), pc.ow());
    float one = 1, zero = 0, *x = upload(randoms(pc.xs(), 1)), *y = fresh<float>(pc.ys());
    EXPECT_BREACH(CUDNN_STATUS_BAD_PARAM,
                  cudnnPoolingForward(h, p, &one, xd, x, &zero, tensor(1, 2, 4, 3), y),
                  "cudnnGetPooling2dForwardOutputDim gives 3x3");
    EXPECT_BREACH(CUDNN_STATUS_BAD_PARAM,
                  cudnnPoolingForward(h, p, &one, xd, x, &zero, tensor(1, 3, 3, 3), y),
                  "x is [1, 2, ...], y [1, 3, ...]");
    EXPECT_BREACH(CUDNN_STATUS_NOT_SUPPORTED,
                  cudnnPoolingForward(h, p, &one,
                                      tensor(1, 2, 6, 6, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC), x,
                                      &zero, yd, y),
                  "the w stride of x or y is not 1");
    EXPECT_BREACH(CUDNN_STATUS_BAD_PARAM, cudnnPoolingForward(h, p, &one, xd, x, &zero, yd, x),
                  "y and x overlap");
    cr_assert_eq(cudnnPoolingForward(h, p, &one, xd, x, &zero, yd, y), CUDNN_STATUS_SUCCESS);
    float *dy = upload(randoms(pc.ys(), 2)), *dx = fresh<float>(pc.xs());
    EXPECT_BREACH(CUDNN_STATUS_BAD_PARAM,
                  cudnnPoolingBackward(h, p, &one, yd, y, tensor(1, 2, 3, 3, CUDNN_DATA_BFLOAT16),
                                       dy, xd, x, &zero, xd, dx),
                  "the four tensors' data types differ");
    EXPECT_BREACH(CUDNN_STATUS_BAD_PARAM,
                  cudnnPoolingBackward(h, p, &one, yd, y, yd, dy, xd, x, &zero, tensor(1, 2, 6, 5),
                                       dx),
                  "dx's from x's");
    /* y that is not the pooling of x: the backward finds no maximum */
    int before = cudaemu_report_count();
    cr_assert_eq(cudnnPoolingBackward(h, p, &one, yd, dy, yd, dy, xd, x, &zero, xd, dx),
                 CUDNN_STATUS_SUCCESS);
    fetch(dx, pc.xs());
    cr_expect_gt(cudaemu_report_count(), before);
    cr_expect(reports_text().find("y is not the max pooling of this x") != std::string::npos);
    EXPECT_BREACH(CUDNN_STATUS_BAD_PARAM,
                  cudnnSetPooling2dDescriptor(p, CUDNN_POOLING_MAX, CUDNN_PROPAGATE_NAN, 0, 2, 0,
                                              0, 1, 1),
                  "window 0x2");
}

/* ---------------------------------------------------------------------
 * cuDNN: batch normalization. */

Test(cudnn, batch_norm_matches_naive_loops)
{
    cudnnHandle_t h = dnn();
    const int N = 3, C = 2, H = 3, W = 2, HW = H * W;
    const double eps = 1e-5, factor = 0.25;
    for (cudnnBatchNormMode_t mode : {CUDNN_BATCHNORM_SPATIAL, CUDNN_BATCHNORM_PER_ACTIVATION}) {
        bool spatial = mode == CUDNN_BATCHNORM_SPATIAL;
        int G = spatial ? C : C * HW, M = spatial ? N * HW : N; /* groups, members */
        auto idx = [&](int g, int m) -> size_t { /* NCHW index of member m of group g */
            return spatial ? ((size_t)(m / HW) * C + g) * HW + m % HW : (size_t)m * C * HW + g;
        };
        cudnnTensorDescriptor_t xd = tensor(N, C, H, W), bn;
        cr_assert_eq(cudnnCreateTensorDescriptor(&bn), CUDNN_STATUS_SUCCESS);
        cr_assert_eq(cudnnDeriveBNTensorDescriptor(bn, xd, mode), CUDNN_STATUS_SUCCESS);
        std::vector<float> x = randoms((size_t)N * C * HW, 1), dy = randoms(x.size(), 2),
                           scale = randoms(G, 3), bias = randoms(G, 4), rmean = randoms(G, 5),
                           rvar = randoms(G, 6);
        for (float &v : rvar)
            v = std::fabs(v) + 0.5f;
        std::vector<double> y(x.size()), dx(x.size()), mean(G), inv(G), wrm(G), wrv(G), dscale(G),
            dbias(G), yi(x.size());
        for (int g = 0; g < G; g++) {
            double s = 0, q = 0;
            for (int m = 0; m < M; m++)
                s += x[idx(g, m)];
            mean[g] = s / M;
            for (int m = 0; m < M; m++)
                q += (x[idx(g, m)] - mean[g]) * (x[idx(g, m)] - mean[g]);
            inv[g] = 1 / std::sqrt(q / M + eps);
            wrm[g] = (1 - factor) * rmean[g] + factor * mean[g];
            wrv[g] = (1 - factor) * rvar[g] + factor * q / (M - 1);
            double sg = 0, sgx = 0;
            for (int m = 0; m < M; m++) {
                size_t i = idx(g, m);
                double xh = (x[i] - mean[g]) * inv[g];
                y[i] = xh * scale[g] + bias[g];
                yi[i] = (x[i] - rmean[g]) / std::sqrt(rvar[g] + eps) * scale[g] + bias[g];
                sg += dy[i];
                sgx += dy[i] * xh;
            }
            dscale[g] = sgx, dbias[g] = sg;
            for (int m = 0; m < M; m++) {
                size_t i = idx(g, m);
                double xh = (x[i] - mean[g]) * inv[g];
                dx[i] = scale[g] * inv[g] * (dy[i] - sg / M - xh * sgx / M);
            }
        }
        float one = 1, zero = 0;
        float *px = upload(x), *py = fresh<float>(x.size()), *pscale = upload(scale),
              *pbias = upload(bias), *prm = upload(rmean), *prv = upload(rvar),
              *psm = fresh<float>(G), *psi = fresh<float>(G);
        cr_assert_eq(cudnnBatchNormalizationForwardTraining(h, mode, &one, &zero, xd, px, xd, py,
                                                            bn, pscale, pbias, factor, prm, prv,
                                                            eps, psm, psi),
                     CUDNN_STATUS_SUCCESS);
        expect_close(fetch(py, x.size()), y, 1e-5, "training y");
        expect_close(fetch(prm, G), wrm, 1e-6, "running mean");
        expect_close(fetch(prv, G), wrv, 1e-6, "running variance");
        expect_close(fetch(psm, G), mean, 1e-6, "saved mean");
        expect_close(fetch(psi, G), inv, 1e-6, "saved inverse deviation");
        float *pdx = fresh<float>(x.size()), *pds = fresh<float>(G), *pdb = fresh<float>(G);
        for (int saved = 0; saved < 2; saved++) {
            cr_assert_eq(cudnnBatchNormalizationBackward(h, mode, &one, &zero, &one, &zero, xd, px,
                                                         xd, upload(dy), xd, pdx, bn, pscale, pds,
                                                         pdb, eps, saved ? psm : nullptr,
                                                         saved ? psi : nullptr),
                         CUDNN_STATUS_SUCCESS);
            expect_close(fetch(pdx, x.size()), dx, 1e-5, "dx");
            expect_close(fetch(pds, G), dscale, 1e-5, "dscale");
            expect_close(fetch(pdb, G), dbias, 1e-5, "dbias");
        }
        float *pri = upload(rmean), *prvi = upload(rvar);
        cr_assert_eq(cudnnBatchNormalizationForwardInference(h, mode, &one, &zero, xd, px, xd, py,
                                                             bn, pscale, pbias, pri, prvi, eps),
                     CUDNN_STATUS_SUCCESS);
        expect_close(fetch(py, x.size()), yi, 1e-5, "inference y");
    }
    cr_expect_eq(cudaemu_report_count(), 0);
}

Test(cudnn, batch_norm_contract_breaches_are_reported)
{
    cudnnHandle_t h = dnn();
    cudnnTensorDescriptor_t xd = tensor(2, 3, 2, 2), bn = tensor(1, 3, 1, 1);
    float one = 1, zero = 0, *x = upload(randoms(24, 1)), *y = fresh<float>(24);
    float *p = upload(randoms(12, 2)), *rm = upload(randoms(3, 3)), *rv = upload(randoms(3, 4));
    auto train = [&](cudnnBatchNormMode_t mode, cudnnTensorDescriptor_t b, void *rvar, double eps,
                     void *smean) {
        return cudnnBatchNormalizationForwardTraining(h, mode, &one, &zero, xd, x, xd, y, b, p, p,
                                                      0.1, rm, rvar, eps, smean, nullptr);
    };
    cr_assert_eq(train(CUDNN_BATCHNORM_SPATIAL, bn, rv, 1e-5, nullptr), CUDNN_STATUS_SUCCESS);
    EXPECT_BREACH(CUDNN_STATUS_BAD_PARAM,
                  train(CUDNN_BATCHNORM_PER_ACTIVATION, bn, rv, 1e-5, nullptr),
                  "needs [1, 3, 2, 2]");
    EXPECT_BREACH(CUDNN_STATUS_BAD_PARAM,
                  train(CUDNN_BATCHNORM_SPATIAL, tensor(1, 3, 2, 2), rv, 1e-5, nullptr),
                  "needs [1, 3, 1, 1]");
    EXPECT_BREACH(
        CUDNN_STATUS_BAD_PARAM,
        train(CUDNN_BATCHNORM_SPATIAL, tensor(1, 3, 1, 1, CUDNN_DATA_HALF), rv, 1e-5, nullptr),
        "parameters of data type 2 for data of type 0");
    EXPECT_BREACH(CUDNN_STATUS_BAD_PARAM,
                  train(CUDNN_BATCHNORM_SPATIAL, bn, nullptr, 1e-5, nullptr),
                  "exactly one of resultRunningMean, resultRunningVariance is NULL");
    EXPECT_BREACH(CUDNN_STATUS_BAD_PARAM, train(CUDNN_BATCHNORM_SPATIAL, bn, rv, 1e-5, rm),
                  "exactly one of resultSaveMean, resultSaveInvVariance is NULL");
    EXPECT_BREACH(CUDNN_STATUS_BAD_PARAM, train(CUDNN_BATCHNORM_SPATIAL, bn, rv, -1.0, nullptr),
                  "epsilon -1 < CUDNN_BN_MIN_EPSILON");
    EXPECT_BREACH(CUDNN_STATUS_BAD_PARAM, train((cudnnBatchNormMode_t)3, bn, rv, 1e-5, nullptr),
                  "mode 3");
    EXPECT_BREACH(CUDNN_STATUS_BAD_PARAM,
                  cudnnBatchNormalizationBackward(h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one,
                                                  &zero, xd, x, tensor(2, 3, 2, 1), y, xd,
                                                  fresh<float>(24), bn, p, fresh<float>(3),
                                                  fresh<float>(3), 1e-5, nullptr, nullptr),
                  "dimensions or data types differ from x's");
    EXPECT_BREACH(CUDNN_STATUS_BAD_PARAM,
                  cudnnBatchNormalizationForwardInference(h, CUDNN_BATCHNORM_SPATIAL, &one, &zero,
                                                          xd, x, xd, y, bn, p, p, rm,
                                                          fresh<float>(2), 1e-5),
                  "estimatedVariance");
}

/* ---------------------------------------------------------------------
 * cuDNN: handles. */

Test(cudnn, handle_breaches_are_reported)
{
    cudnnHandle_t h = dnn();
    cudaStream_t s;
    cr_assert_eq(cudnnGetStream(h, &s), CUDNN_STATUS_SUCCESS);
    cr_expect_eq(s, stream());
    cr_assert_eq(cudnnDestroy(h), CUDNN_STATUS_SUCCESS);
    EXPECT_BREACH(CUDNN_STATUS_BAD_PARAM, cudnnSetStream(h, stream()),
                  "is not a live cuDNN handle");
    EXPECT_BREACH(CUDNN_STATUS_BAD_PARAM, cudnnDestroy(h), "is not a live cuDNN handle");
    cr_expect_eq(cudnnCreate(nullptr), CUDNN_STATUS_BAD_PARAM);
}
