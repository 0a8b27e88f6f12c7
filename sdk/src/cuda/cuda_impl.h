/* cuda_impl.h — the CUDA backend's shared state and helpers, for its C
 * files and its kernels (.cu, compiled as C++). Private to libscorch.
 *
 * Every kernel runs on its device's compute stream, in order, so kernels
 * need no events between them; host code that reads results goes through
 * sc_cuda_memcpy (scorch/device.h's copies), which waits for them.
 * Nothing here calls cudaMalloc inside a step: tensors and scratch come
 * from the context's GPU arena (sc_tensor_new, sc_ctx_alloc_data), and
 * cuBLAS and cuDNN share one fixed workspace per device. That is what lets
 * a step be captured as a CUDA graph.
 */
#ifndef SCORCH_CUDA_IMPL_H
#define SCORCH_CUDA_IMPL_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "../context_impl.h"
#include "../cuda_api.h"
#include "../op.h"

/* Threads per block of the element-wise kernels. */
enum { SC_CUDA_THREADS = 256 };

/* The cuBLAS/cuDNN workspace of a device: cuDNN algorithms needing more
 * are not chosen. */
#define SC_CUDA_WORKSPACE_BYTES ((size_t)64 << 20)

typedef struct sc_cuda_conv_cache sc_cuda_conv_cache; /* conv.cu */

/* One GPU's state, shared by every context on it; set up on first use. */
typedef struct sc_cuda_dev {
    int index;
    cudaStream_t compute; /* every kernel, memset and step copy */
    cudaStream_t copy;    /* host-to-device batch uploads */
    cudaEvent_t computed; /* recorded on compute before an upload */
    cudaEvent_t uploaded; /* recorded on copy after an upload */
    cudaEvent_t read_out; /* recorded on compute before another GPU copies from it */
    cublasHandle_t cublas;
    cudnnHandle_t cudnn;
    void *workspace; /* SC_CUDA_WORKSPACE_BYTES, shared by cuBLAS and cuDNN */
    sc_cuda_conv_cache *conv_cache; /* chosen cuDNN algorithms, by shape */
    size_t allocated, peak;         /* bytes from sc_cuda_malloc */
} sc_cuda_dev;

/* The state of GPU `index`, set up on first call (and the calling thread's
 * current device set to it). NULL with a message on failure. */
sc_cuda_dev *sc_cuda_dev_get(int index);

/* For the calls that name their GPU (memory, copies, fills): GPU
 * `index`'s state, made current for the call (enter), and the calling
 * thread's own device made current again after it (leave), since the
 * kernels a thread queues go to its current device:
 *     sc_cuda_scope scope;
 *     sc_cuda_dev *d = sc_cuda_dev_enter(index, &scope);
 *     ... (d NULL: the message is set)
 *     sc_cuda_dev_leave(&scope);   whatever enter returned */
typedef struct sc_cuda_scope {
    int index, previous;
} sc_cuda_scope;
sc_cuda_dev *sc_cuda_dev_enter(int index, sc_cuda_scope *scope);
void sc_cuda_dev_leave(const sc_cuda_scope *scope);

/* The device state of a GPU context. */
static inline sc_cuda_dev *sc_cuda_ctx_dev(const sc_ctx *ctx) { return ctx->cuda; }
static inline cudaStream_t sc_cuda_stream(const sc_ctx *ctx) { return ctx->cuda->compute; }

/* Error reporting: each returns a status with a message naming the call,
 * the file and line, and the library's own description. A sticky CUDA
 * error (an illegal address, a kernel that crashed: every later call on
 * the GPU returns it) is not the call's fault: the message says the GPU
 * failed in earlier asynchronous work and names the call only as where it
 * was noticed. cuBLAS and cuDNN failures caused by one say so too. */
sc_status sc_cuda_error(cudaError_t err, const char *call, const char *file, int line);
sc_status sc_cublas_error(cublasStatus_t err, const char *call, const char *file, int line);
sc_status sc_cudnn_error(cudnnStatus_t err, const char *call, const char *file, int line);
/* The same for a kernel launch that returned err: a bad configuration
 * names the kernel, a sticky error does not blame it. */
sc_status sc_cuda_launch_error(cudaError_t err, const char *kernel, const char *file, int line);

#define SC_CUDA_TRY(call)                                                      \
    do {                                                                       \
        cudaError_t sc_cuda_err_ = (call);                                     \
        if (sc_cuda_err_ != cudaSuccess)                                       \
            return sc_cuda_error(sc_cuda_err_, #call, __FILE__, __LINE__);     \
    } while (0)
#define SC_CUBLAS_TRY(call)                                                    \
    do {                                                                       \
        cublasStatus_t sc_cublas_err_ = (call);                                \
        if (sc_cublas_err_ != CUBLAS_STATUS_SUCCESS)                           \
            return sc_cublas_error(sc_cublas_err_, #call, __FILE__, __LINE__); \
    } while (0)
#define SC_CUDNN_TRY(call)                                                     \
    do {                                                                       \
        cudnnStatus_t sc_cudnn_err_ = (call);                                  \
        if (sc_cudnn_err_ != CUDNN_STATUS_SUCCESS)                             \
            return sc_cudnn_error(sc_cudnn_err_, #call, __FILE__, __LINE__);   \
    } while (0)
/* After a <<<...>>> launch: reports a bad configuration at once, and a
 * sticky error left by earlier work as such. Faults inside this kernel
 * surface later, at a synchronising call or a later launch. */
#define SC_CUDA_LAUNCHED(what)                                                 \
    do {                                                                       \
        cudaError_t sc_launch_err_ = cudaGetLastError();                       \
        if (sc_launch_err_ != cudaSuccess)                                     \
            return sc_cuda_launch_error(sc_launch_err_, what, __FILE__,        \
                                        __LINE__);                             \
    } while (0)

/* Kernels are launched, and their __shared__ arrays declared, through
 * these macros only, so the same sources build with nvcc and, as C++,
 * against the emulated GPU of tests/cudaemu (which defines CUDAEMU and the
 * macros' emulated forms in cudaemu_kernel.h):
 *   SC_LAUNCH(kernel, grid, block, shared_bytes, stream, args...);
 *   SC_SHARED(float, part, [32]);   for  __shared__ float part[32];  */
#ifdef CUDAEMU
#define SC_LAUNCH CUDAEMU_LAUNCH
#define SC_SHARED CUDAEMU_SHARED
#else
#define SC_LAUNCH(kernel, grid, block, shared_bytes, stream, ...)              \
    kernel<<<grid, block, shared_bytes, stream>>>(__VA_ARGS__)
#define SC_SHARED(type, name, dims) __shared__ type name dims
#endif

/* The most blocks a grid-stride or row-loop kernel is launched with; the
 * emulator can lower it (cudaemu_grid_cap) so that every such loop is made
 * to take more than one turn. */
static inline int64_t sc_cuda_max_blocks(void)
{
#ifdef CUDAEMU
    return cudaemu_grid_cap(65535 * 8);
#else
    return 65535 * 8;
#endif
}

/* Blocks for n items, one each, capped so grid-stride loops cover the
 * rest. */
static inline unsigned sc_cuda_grid(int64_t n)
{
    int64_t cap = sc_cuda_max_blocks();
    return (unsigned)(n < 1 ? 1 : n > cap ? cap : n);
}

/* Blocks for n elements, SC_CUDA_THREADS each. */
static inline unsigned sc_cuda_blocks(int64_t n)
{
    return sc_cuda_grid((n + SC_CUDA_THREADS - 1) / SC_CUDA_THREADS);
}

/* A bf16 copy of an f32 tensor's data, from the step arena (precision
 * bf16 feeds matrix products and convolutions from these). */
void *sc_cuda_to_bf16(sc_ctx *ctx, const float *x, int64_t n);

/* t's data as a matrix-product or convolution operand in ctx's precision:
 * t's own f32 data, or (bf16) a copy from the step arena; NULL when out of
 * memory. */
const void *sc_cuda_operand(sc_ctx *ctx, const sc_tensor *t);

/* The free and total memory of GPU `index` (whose UUID cudaDeviceProp
 * gives) as the driver's management library (NVML) reports them, read
 * without making a CUDA context on the GPU (nvml.c). Fails, saying why,
 * where NVML is missing. */
sc_status sc_nvml_memory(int index, const cudaUUID_t *uuid, size_t *free_bytes,
                         size_t *total_bytes);

/* A 4-D NCHW cuDNN descriptor of a contiguous tensor (conv.cu). */
sc_status sc_cudnn_tensor_4d(cudnnTensorDescriptor_t *desc, cudnnDataType_t type, int64_t n,
                             int64_t c, int64_t h, int64_t w);

/* Max pooling of x [N, C, H, W] into y [N, C, OH, OW] by p, through
 * cuDNN as max_pool2d's kernels do, for batch norm's fused pooling
 * (pool.cu): y = pool(x) when gy is NULL, else gx [N, C, H, W] = the
 * pooling's gradient from gy [N, C, OH, OW] (written, not added to). */
sc_status sc_cuda_max_pool2d(sc_ctx *ctx, const sc_tensor *x, const sc_tensor *y,
                             const sc_pool2d_params *p, const sc_tensor *gy, sc_tensor *gx);

/* The kernels of every op, defined in the .cu files with C linkage. They
 * add into every gradient (writes_grads 0). */
#define SC_CUDA_KERNEL_DECL(id, name) extern const sc_kernel sc_cuda_kernel_##name;
SC_OP_LIST(SC_CUDA_KERNEL_DECL)
#undef SC_CUDA_KERNEL_DECL

/* The backend's table (backend.c), which its one exported function
 * returns to libscorch (core.c; sc_cuda_backend_open_fn). */
extern const sc_cuda_api sc_cuda_backend_api;
const sc_cuda_api *sc_cuda_backend_open(int version, const sc_cuda_core *core);

#ifdef __cplusplus
}
#endif
#endif
