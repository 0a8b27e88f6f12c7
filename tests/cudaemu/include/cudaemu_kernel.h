/* Kernel-side emulation: each CUDA thread of a block runs on a fiber of its
 * own; __syncthreads and warp shuffles switch fibers. Blocks run one after
 * another on the launching host thread. C++ only. */
#ifndef CUDAEMU_KERNEL_H
#define CUDAEMU_KERNEL_H
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

struct uint3 { unsigned x, y, z; };
struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

namespace cudaemu {
extern thread_local const uint3 *cur_tid;
extern thread_local uint3 cur_bid;
extern thread_local dim3 cur_bdim, cur_gdim;
void syncthreads();
unsigned long long shfl_xor_bits(unsigned mask, unsigned long long bits, int lane_mask, int width);
template <class T> T shfl_xor(unsigned mask, T v, int lane_mask, int width = 32)
{
    static_assert(sizeof(T) <= 8, "shuffle of a type wider than 8 bytes");
    unsigned long long b = 0;
    memcpy(&b, &v, sizeof v);
    b = shfl_xor_bits(mask, b, lane_mask, width);
    T r;
    memcpy(&r, &b, sizeof r);
    return r;
}
struct cfg {
    dim3 grid, block;
    size_t shmem;
    cudaStream_t stream;
};
inline cfg make_cfg(dim3 g, dim3 b, size_t sh = 0, cudaStream_t st = nullptr) { return {g, b, sh, st}; }
/* Runs (or, on a capturing stream, records) body for every thread. */
void launch(const cfg &c, const char *name, std::function<void()> body, size_t arg_bytes);
/* A pointer argument of a kernel: NULL or device (or pinned) memory. */
void check_pointer_arg(const char *kernel, int index, const void *p);

template <class T> void check_arg(const char *kernel, int index, const T &v)
{
    if constexpr (std::is_pointer_v<T>)
        check_pointer_arg(kernel, index, (const void *)v);
}
} // namespace cudaemu

template <class F, class... A>
void cudaemu_launch(const cudaemu::cfg &c, const char *name, F f, A... a)
{
    int i = 0;
    (cudaemu::check_arg(name, i++, a), ...);
    auto args = std::make_tuple(a...);
    cudaemu::launch(c, name, [f, args]() { std::apply(f, args); }, sizeof(args));
}

#define threadIdx (*cudaemu::cur_tid)
#define blockIdx (cudaemu::cur_bid)
#define blockDim (cudaemu::cur_bdim)
#define gridDim (cudaemu::cur_gdim)
#define __syncthreads() cudaemu::syncthreads()
#define __shfl_xor_sync(mask, v, ...) cudaemu::shfl_xor(mask, v, __VA_ARGS__)
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static thread_local
#define __launch_bounds__(...)

/* The project's launch and shared-array macros (sdk/src/cuda/cuda_impl.h). */
#define CUDAEMU_LAUNCH(kernel, grid, block, shared_bytes, stream, ...)                             \
    cudaemu_launch(cudaemu::make_cfg(grid, block, shared_bytes, stream), #kernel,                  \
                   [](auto... cudaemu_args) { kernel(cudaemu_args...); }, __VA_ARGS__)
#define CUDAEMU_SHARED(type, name, dims) static thread_local type name dims
#endif
