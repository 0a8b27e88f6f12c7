/* Kernel-side emulation (C++ only; tests/cudaemu/src/kernel.cpp runs it).
 *
 * Every CUDA thread of a block runs on a fiber of its own, so
 * __syncthreads, __syncwarp and the warp shuffles have their documented
 * semantics, and breaking their rules is reported. Shared arrays are
 * declared with SC_SHARED (CUDAEMU_SHARED here): indexing one checks the
 * index and records which thread touched which element, so that data races
 * between barriers and reads of elements no thread of the block has
 * written are found (kernel.cpp). A raw __shared__ does not compile. */
#ifndef CUDAEMU_KERNEL_H
#define CUDAEMU_KERNEL_H
#include <cmath> /* nvcc makes the math functions available to every kernel */
#include <cstddef>
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

/* CUDA's device math has the C names at global scope (isfinite, isnan,
 * isinf as overloads for float and double), as <cmath>'s std:: ones are. */
using std::isfinite;
using std::isinf;
using std::isnan;

struct uint3 {
    unsigned x, y, z;
};
struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

namespace cudaemu {
/* The running CUDA thread's coordinates, set by the executor at every
 * switch. __thread (no dynamic initialisation): reading it costs no call
 * to a TLS wrapper. */
struct kernel_coords {
    const uint3 *thread;
    uint3 block;
    dim3 block_dim, grid_dim;
};
extern __thread kernel_coords coords;

void syncthreads(const char *file, int line);
void syncwarp(unsigned mask);

/* The four shuffles of PTX shfl.sync; bits is the value, zero-extended. */
enum shfl_mode { SHFL_IDX, SHFL_UP, SHFL_DOWN, SHFL_XOR };
unsigned long long shfl_bits(shfl_mode mode, unsigned mask, unsigned long long bits, int lane_arg,
                             int width);
template <class T> T shfl(shfl_mode mode, unsigned mask, T v, int lane_arg, int width)
{
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>,
                  "a shuffle moves a trivially copyable value of at most 8 bytes");
    unsigned long long bits = 0;
    memcpy(&bits, &v, sizeof v);
    bits = shfl_bits(mode, mask, bits, lane_arg, width);
    memcpy(&v, &bits, sizeof v);
    return v;
}

/* ---- shared arrays ---- */

struct shadow_cell; /* kernel.cpp */

/* What the executor knows of one shared array: its name and shape for
 * reports, its data, and a shadow cell per element. One per declaration
 * and host thread (a block's threads are fibers of one host thread). */
struct shared_meta {
    const char *name;
    unsigned rank;
    size_t extent[3];
    size_t count, element_bytes;
    unsigned char *data;
    shadow_cell *shadow;
    unsigned long long poisoned; /* the block whose start it was poisoned for */
    shared_meta(const char *name, unsigned rank, const size_t *extent, size_t element_bytes,
                void *data);
    ~shared_meta();
    shared_meta(const shared_meta &) = delete;
    shared_meta &operator=(const shared_meta &) = delete;
};
/* The running thread is about to read or write element `index`: which of
 * the two shows when it next waits or ends (a changed value was written). */
void shared_touch(shared_meta &m, size_t index);
/* Reports index i of dimension dim, which is out of bounds. */
void shared_index_error(const shared_meta &m, unsigned dim, long long i);

/* A sub-array of A's shape (A is an array type): indexing checks the index
 * against this dimension's extent and, at the last, gives the element
 * itself, so that templates deduce its type (an out-of-bounds index gives
 * a scratch element instead). flat: the row-major index of this sub-array
 * among those of its shape. */
template <class A> class shared_view {
    using T = std::remove_all_extents_t<A>;
    using E = std::remove_extent_t<A>;
    shared_meta *meta_;
    T *data_;
    size_t flat_;

public:
    shared_view(shared_meta *meta, T *data, size_t flat) : meta_(meta), data_(data), flat_(flat) {}
    template <class I> decltype(auto) operator[](I i) const
    {
        static_assert(std::is_integral_v<I> || std::is_enum_v<I>, "a shared array index");
        long long k = (long long)i; /* an unsigned index past LLONG_MAX turns negative */
        bool ok = meta_ && k >= 0 && (unsigned long long)k < std::extent_v<A>;
        if (meta_ && !ok)
            shared_index_error(*meta_, meta_->rank - std::rank_v<A>, k);
        size_t flat = flat_ * std::extent_v<A> + (ok ? (size_t)k : 0);
        if constexpr (std::is_array_v<E>) {
            return shared_view<E>(ok ? meta_ : nullptr, data_, flat);
        } else {
            static thread_local T scratch;
            T *element = ok ? data_ + flat : &scratch;
            if (ok)
                shared_touch(*meta_, flat);
            return *element;
        }
    }
};

/* A __shared__ array of type A (T[n], T[n][m] or T[n][m][k]), one per host
 * thread; what SC_SHARED declares under the emulator. */
template <class A> class shared_array {
    static_assert(std::is_array_v<A> && std::rank_v<A> <= 3 && std::extent_v<A> > 0,
                  "SC_SHARED(type, name, [dims]): one to three dimensions, each given");
    using T = std::remove_all_extents_t<A>;
    static constexpr size_t extents[3] = {std::extent_v<A, 0>, std::extent_v<A, 1>,
                                          std::extent_v<A, 2>};
    A data_;
    shared_meta meta_;

public:
    explicit shared_array(const char *name)
        : meta_(name, std::rank_v<A>, extents, sizeof(T), data_)
    {
    }
    template <class I> decltype(auto) operator[](I i)
    {
        return shared_view<A>(&meta_, (T *)data_, 0)[i];
    }
};

/* ---- launches ---- */

struct launch_config {
    dim3 grid, block;
    size_t shared_bytes;
    cudaStream_t stream;
};
inline launch_config make_config(dim3 grid, dim3 block, size_t shared_bytes = 0,
                                 cudaStream_t stream = nullptr)
{
    return {grid, block, shared_bytes, stream};
}
/* False, after a report and with the error recorded, when CUDA refuses
 * the launch (its shape, its parameters' size, its stream). */
bool check_launch(const launch_config &c, const char *kernel, size_t param_bytes);
/* Queues body, run by every thread of the grid, on c.stream. */
void launch(const launch_config &c, const char *kernel, std::function<void()> body);
/* A pointer argument: NULL, device memory of the launch stream's GPU, or
 * pinned host memory. index counts from 1. */
void check_pointer_arg(const launch_config &c, const char *kernel, int index, const void *p);

template <class T> void check_arg(const launch_config &c, const char *kernel, int index, const T &v)
{
    if constexpr (std::is_pointer_v<T>)
        check_pointer_arg(c, kernel, index, (const void *)v);
}
} // namespace cudaemu

/* call: a generic lambda that calls the kernel, so that a template kernel's
 * arguments are deduced as with <<<...>>>. */
template <class F, class... A>
void cudaemu_launch(const cudaemu::launch_config &c, const char *kernel, F call, const A &...a)
{
    auto args = std::make_tuple(a...);
    if (!cudaemu::check_launch(c, kernel, sizeof args))
        return;
    int i = 1;
    (cudaemu::check_arg(c, kernel, i++, a), ...);
    cudaemu::launch(c, kernel, [call, args]() { std::apply(call, args); });
}

/* ---- CUDA's device-side names ---- */

#define threadIdx (*cudaemu::coords.thread)
#define blockIdx (cudaemu::coords.block)
#define blockDim (cudaemu::coords.block_dim)
#define gridDim (cudaemu::coords.grid_dim)
#define __syncthreads() cudaemu::syncthreads(__FILE__, __LINE__)
inline void __syncwarp(unsigned mask = 0xffffffffu) { cudaemu::syncwarp(mask); }
template <class T> T __shfl_sync(unsigned mask, T v, int src_lane, int width = 32)
{
    return cudaemu::shfl(cudaemu::SHFL_IDX, mask, v, src_lane, width);
}
template <class T> T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32)
{
    return cudaemu::shfl(cudaemu::SHFL_UP, mask, v, (int)delta, width);
}
template <class T> T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32)
{
    return cudaemu::shfl(cudaemu::SHFL_DOWN, mask, v, (int)delta, width);
}
template <class T> T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32)
{
    return cudaemu::shfl(cudaemu::SHFL_XOR, mask, v, lane_mask, width);
}
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
/* Shared arrays must be visible to the emulator (races, bounds). _Pragma
 * takes one string literal. */
#define __shared__                                                                                 \
    _Pragma("GCC error \"__shared__ is not emulated: declare shared arrays with SC_SHARED(type, name, [dims])\"")

/* The project's launch and shared-array macros (sdk/src/cuda/cuda_impl.h). */
#define CUDAEMU_LAUNCH(kernel, grid, block, shared_bytes, stream, ...)                             \
    cudaemu_launch(cudaemu::make_config(grid, block, shared_bytes, stream), #kernel,               \
                   [](auto... cudaemu_args) { kernel(cudaemu_args...); }, __VA_ARGS__)
#define CUDAEMU_SHARED(type, name, dims)                                                           \
    static thread_local cudaemu::shared_array<type dims> name(#name)
#endif
