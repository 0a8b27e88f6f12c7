/* The kernel executor (tests/cudaemu/src/kernel.cpp): barriers and warp
 * shuffles compute what CUDA documents; each defect it reports fires on a
 * buggy kernel and not on its fixed twin; seeds change the order threads
 * run in, not the results. Kernels are written here as in sdk/src/cuda and
 * launched through CUDAEMU_LAUNCH, what SC_LAUNCH is under the emulator. */
#include <criterion/criterion.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "test_reports.h"

static void setup() { capture_reports(); }
TestSuite(kernels, .init = setup);

static cudaStream_t stream()
{
    static cudaStream_t s;
    if (!s)
        cr_assert_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    return s;
}

template <class T> static T *device(size_t n, const std::vector<T> &init = {})
{
    T *p = nullptr;
    cr_assert_eq(cudaMalloc((void **)&p, n * sizeof(T)), cudaSuccess);
    cr_assert_eq(cudaMemsetAsync(p, 0, n * sizeof(T), stream()), cudaSuccess);
    if (!init.empty())
        cr_assert_eq(cudaMemcpyAsync(p, init.data(), n * sizeof(T), cudaMemcpyHostToDevice,
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

/* Launches on the test's stream and waits for the kernel. */
#define LAUNCH(kernel, grid, block, ...)                                                           \
    do {                                                                                           \
        CUDAEMU_LAUNCH(kernel, grid, block, 0, stream(), __VA_ARGS__);                             \
        cudaStreamSynchronize(stream());                                                           \
    } while (0)

/* ---------------------------------------------------------------------
 * Barriers and shared memory. */

/* sum[block] = the sum of the block's x, by a tree in shared memory;
 * barrier: the barrier inside the loop (a race without it). */
static __global__ void tree_sum(const float *x, float *sum, int barrier)
{
    CUDAEMU_SHARED(float, part, [256]);
    unsigned t = threadIdx.x;
    part[t] = x[blockIdx.x * blockDim.x + t];
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
        if (t < s)
            part[t] += part[t + s];
        if (barrier)
            __syncthreads();
    }
    if (t == 0)
        sum[blockIdx.x] = part[0];
}

static std::vector<float> tree_sums(int barrier)
{
    const int blocks = 3, threads = 256;
    std::vector<float> x(blocks * threads);
    for (size_t i = 0; i < x.size(); i++)
        x[i] = (float)i;
    float *dx = device<float>(x.size(), x), *sum = device<float>(blocks);
    LAUNCH(tree_sum, blocks, threads, dx, sum, barrier);
    return fetch(sum, blocks);
}

Test(kernels, barriers_order_shared_memory)
{
    std::vector<float> sum = tree_sums(1);
    for (int b = 0; b < 3; b++) /* the sum of 256 b .. 256 b + 255 */
        cr_expect_eq(sum[b], 256.0f * 256.0f * b + 255.0f * 128.0f, "block %d: %g", b, sum[b]);
    cr_expect_eq(cudaemu_report_count(), 0);
}

Test(kernels, a_missing_barrier_is_a_race)
{
    tree_sums(0);
    cr_expect_eq(cudaemu_report_count(), 1);
    std::string said = reports_text();
    expect_said(said, "kernel tree_sum, block (0,0,0): data race on shared part[");
    expect_said(said, "between the same two barriers");
}

/* The sum of v over the block in thread 0, as sdk/src/cuda/norm.cu has it:
 * the first barrier keeps a previous call's readers apart from this call's
 * writers. */
static __device__ float block_sum(float v, int first_barrier)
{
    CUDAEMU_SHARED(float, warps, [32]);
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    for (int offset = 16; offset > 0; offset /= 2)
        v += __shfl_xor_sync(0xffffffffu, v, offset);
    if (first_barrier)
        __syncthreads();
    if (lane == 0)
        warps[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < (int)(blockDim.x / 32) ? warps[lane] : 0.0f;
        for (int offset = 16; offset > 0; offset /= 2)
            v += __shfl_xor_sync(0xffffffffu, v, offset);
    }
    return v;
}

static __global__ void two_block_sums(const float *x, float *y, int first_barrier)
{
    float a = block_sum(x[threadIdx.x], first_barrier);
    float b = block_sum(2.0f * x[threadIdx.x], first_barrier);
    if (threadIdx.x == 0) {
        y[0] = a;
        y[1] = b;
    }
}

static void run_two_block_sums(int first_barrier)
{
    std::vector<float> x(128, 1.0f);
    float *dx = device<float>(128, x), *y = device<float>(2);
    LAUNCH(two_block_sums, 1, 128, dx, y, first_barrier);
    std::vector<float> got = fetch(y, 2);
    cr_expect_eq(got[0], 128.0f);
    cr_expect_eq(got[1], 256.0f);
}

Test(kernels, a_reused_shared_array_needs_its_first_barrier)
{
    run_two_block_sums(1);
    cr_expect_eq(cudaemu_report_count(), 0);
    run_two_block_sums(0); /* warp 0 reads call 1's warps[w] as warp w writes call 2's */
    cr_expect_eq(cudaemu_report_count(), 1);
    expect_said(reports_text(), "data race on shared warps[");
}

/* kind 0: every thread writes s[0]; 1: thread 0 reads s[1] as thread 33
 * writes it; 2: every thread adds to s[0]. barrier: the fixed twin. */
static __global__ void racy(float *y, int kind, int barrier)
{
    CUDAEMU_SHARED(float, s, [2]);
    unsigned t = threadIdx.x;
    if (t == 0)
        s[0] = s[1] = 0.0f;
    __syncthreads();
    if (kind == 0 && (!barrier || t == 0))
        s[0] = (float)t + 1.0f;
    if (kind == 1 && t == 33)
        s[1] = 5.0f;
    if (kind == 2)
        for (unsigned k = 0; k < 64; k++) {
            if (t == k)
                s[0] += 1.0f;
            if (barrier)
                __syncthreads();
        }
    if (barrier)
        __syncthreads();
    if (t == 0)
        y[0] = s[kind == 1];
}

Test(kernels, races_of_each_kind)
{
    float *y = device<float>(1);
    const char *kinds[] = {"thread (1,0,0) writes it and thread (0,0,0) writes it",
                           "thread (33,0,0) writes it and thread (0,0,0) reads it",
                           "thread (1,0,0) writes it and thread (0,0,0) writes it"};
    for (int kind = 0; kind < 3; kind++) {
        int before = cudaemu_report_count();
        LAUNCH(racy, 1, 64, y, kind, 1);
        cr_expect_eq(cudaemu_report_count(), before, "kind %d with barriers", kind);
        LAUNCH(racy, 1, 64, y, kind, 0);
        cr_expect_eq(cudaemu_report_count(), before + 1, "kind %d without", kind);
        expect_said(reports_text(), kinds[kind]);
    }
}

/* A read of an element no thread has written; fixed: every thread writes
 * its own first. */
static __global__ void unwritten_read(float *y, int fixed)
{
    CUDAEMU_SHARED(float, s, [64]);
    if (fixed || threadIdx.x != 5)
        s[threadIdx.x] = 1.0f;
    __syncthreads();
    if (threadIdx.x == 0)
        y[0] = s[5];
}

Test(kernels, reading_unwritten_shared_memory)
{
    float *y = device<float>(1);
    LAUNCH(unwritten_read, 1, 64, y, 1);
    cr_expect_eq(cudaemu_report_count(), 0);
    LAUNCH(unwritten_read, 1, 64, y, 0);
    cr_expect_eq(cudaemu_report_count(), 1);
    expect_said(reports_text(), "thread (0,0,0): reads shared s[5], which no thread of the block "
                                "has written");
}

/* Shared arrays of two and three dimensions, of a template element type;
 * (bad_i, bad_j, bad_k) is read after the sums when bad. */
template <class T>
static __global__ void shaped(T *y, int bad, int bad_i, int bad_j, int bad_k)
{
    CUDAEMU_SHARED(T, flat, [4][8]);
    CUDAEMU_SHARED(T, cube, [2][4][8]);
    unsigned x = threadIdx.x, r = threadIdx.y;
    flat[r][x] = (T)(r * 8 + x);
    cube[0][r][x] = (T)1;
    cube[1][r][x] = flat[r][x];
    cube[1][r][x] *= 2;
    __syncthreads();
    if (x == 0 && r == 0) {
        T sum = 0;
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 8; j++)
                sum += cube[0][i][j] + cube[1][i][j];
        y[0] = sum;
        if (bad)
            y[1] = cube[bad_i][bad_j][bad_k];
    }
}

Test(kernels, shared_arrays_of_several_dimensions)
{
    double *y = device<double>(2);
    LAUNCH(shaped<double>, 1, dim3(8, 4), y, 0, 0, 0, 0);
    cr_expect_eq(fetch(y, 2)[0], 32.0 + 2 * (31.0 * 32 / 2));
    cr_expect_eq(cudaemu_report_count(), 0);
    int bad[][3] = {{2, 0, 0}, {0, 4, 0}, {1, 3, 8}, {0, -1, 0}};
    for (int i = 0; i < 4; i++) {
        LAUNCH(shaped<double>, 1, dim3(8, 4), y, 1, bad[i][0], bad[i][1], bad[i][2]);
        cr_expect_eq(cudaemu_report_count(), i + 1, "index (%d, %d, %d)", bad[i][0], bad[i][1],
                     bad[i][2]);
    }
    std::string said = reports_text();
    expect_said(said, "thread (0,0,0): index 2 out of bounds in dimension 1 of shared "
                      "cube[2][4][8]");
    expect_said(said, "index 8 out of bounds in dimension 3 of shared cube[2][4][8]");
    expect_said(said, "index -1 out of bounds in dimension 2");
    float *f = device<float>(2);
    LAUNCH(shaped<float>, 1, dim3(8, 4), f, 0, 0, 0, 0);
    cr_expect_eq(fetch(f, 2)[0], 32.0f + 2 * (31.0f * 32 / 2));
}

Test(kernels, race_checks_can_be_turned_off)
{
    setenv("CUDAEMU_RACECHECK", "0", 1);
    tree_sums(0);
    cr_expect_eq(cudaemu_report_count(), 0);
}

/* exited: threads past 32 leave before the barrier; split: threads past 32
 * wait at a barrier of their own. */
static __global__ void divergent_barrier(float *y, int exited, int split)
{
    unsigned t = threadIdx.x;
    if (exited && t >= 32)
        return;
    if (split && t >= 32)
        __syncthreads();
    else
        __syncthreads();
    y[t] = 1.0f;
}

Test(kernels, barriers_in_divergent_code)
{
    float *y = device<float>(64);
    LAUNCH(divergent_barrier, 2, 64, y, 0, 0);
    cr_expect_eq(cudaemu_report_count(), 0);
    LAUNCH(divergent_barrier, 2, 64, y, 1, 0);
    cr_expect_eq(cudaemu_report_count(), 1);
    LAUNCH(divergent_barrier, 2, 64, y, 0, 1);
    cr_expect_eq(cudaemu_report_count(), 2);
    std::string said = reports_text();
    expect_said(said, "kernel divergent_barrier, block (0,0,0), thread (0,0,0): waits at "
                      "__syncthreads (test_kernels.cpp:");
    expect_said(said, "while thread (32,0,0) has exited (32 of 64 threads wait there)");
    expect_said(said, "while thread (32,0,0) waits at __syncthreads (test_kernels.cpp:");
}

/* ---------------------------------------------------------------------
 * Warps. */

/* out [5][32]: lane l's value 10 l through each shuffle, given width. */
static __global__ void shuffles(int *out, int width)
{
    int lane = threadIdx.x, v = 10 * lane;
    out[0 * 32 + lane] = __shfl_sync(0xffffffffu, v, 3, width);
    out[1 * 32 + lane] = __shfl_up_sync(0xffffffffu, v, 2, width);
    out[2 * 32 + lane] = __shfl_down_sync(0xffffffffu, v, 2, width);
    out[3 * 32 + lane] = __shfl_xor_sync(0xffffffffu, v, 5, width);
    out[4 * 32 + lane] = __shfl_xor_sync(0xffffffffu, v, 16, width);
}

/* The source lanes CUDA documents: within segments of `width` lanes, out
 * of a segment's end (up: its start) a lane keeps its own value; xor may
 * read from an earlier segment, not a later one. */
static int documented_source(int which, int lane, int width)
{
    int first = lane - lane % width, last = first + width - 1;
    switch (which) {
    case 0: return first + 3 % width;
    case 1: return lane - 2 >= first ? lane - 2 : lane;
    case 2: return lane + 2 <= last ? lane + 2 : lane;
    case 3: return (lane ^ 5) <= last ? lane ^ 5 : lane;
    default: return (lane ^ 16) <= last ? lane ^ 16 : lane;
    }
}

Test(kernels, shuffles_give_the_documented_lanes)
{
    int *out = device<int>(5 * 32);
    for (int width : {32, 16, 8, 1}) {
        LAUNCH(shuffles, 1, 32, out, width);
        std::vector<int> got = fetch(out, 5 * 32);
        for (int which = 0; which < 5; which++)
            for (int lane = 0; lane < 32; lane++)
                cr_expect_eq(got[which * 32 + lane], 10 * documented_source(which, lane, width),
                             "shuffle %d, width %d, lane %d: %d", which, width, lane,
                             got[which * 32 + lane]);
    }
    cr_expect_eq(cudaemu_report_count(), 0);
}

/* y[warp] = the sum over the warp of x, a butterfly of doubles. */
static __global__ void warp_sums(const double *x, double *y)
{
    double v = x[threadIdx.x];
    for (int offset = 16; offset > 0; offset /= 2)
        v += __shfl_xor_sync(0xffffffffu, v, offset);
    if (threadIdx.x % 32 == 0)
        y[threadIdx.x / 32] = v;
}

Test(kernels, a_butterfly_sums_a_warp)
{
    std::vector<double> x(64);
    for (int i = 0; i < 64; i++)
        x[i] = 0.5 + i;
    double *dx = device<double>(64, x), *y = device<double>(2);
    LAUNCH(warp_sums, 1, 64, dx, y);
    std::vector<double> got = fetch(y, 2);
    cr_expect_eq(got[0], 16.0 + 31.0 * 32 / 2);
    cr_expect_eq(got[1], 16.0 + 32.0 * 32 + 31.0 * 32 / 2);
    cr_expect_eq(cudaemu_report_count(), 0);
}

/* A warp sum over n threads; buggy: the threads past n leave first, or
 * the mask is wrong for the lanes past 16. */
static __global__ void masked_sum(float *y, int n, int leave, int mask_kind)
{
    unsigned t = threadIdx.x;
    if (leave && t >= (unsigned)n)
        return;
    float v = t < (unsigned)n ? 1.0f : 0.0f;
    unsigned mask = 0xffffffffu;
    if (mask_kind == 1) /* lanes 16.. name lanes that shuffle with another mask */
        mask = t % 32 < 16 ? 0x0000ffffu : 0xffffffffu;
    if (mask_kind == 2) /* two halves, each on its own: right */
        mask = t % 32 < 16 ? 0x0000ffffu : 0xffff0000u;
    if (mask_kind == 3) /* a lane outside its own mask */
        mask = 0xfffffffeu;
    for (int offset = mask_kind == 2 ? 8 : 16; offset > 0; offset /= 2)
        v += __shfl_xor_sync(mask, v, offset);
    y[t] = v;
}

Test(kernels, shuffle_masks)
{
    float *y = device<float>(64);
    LAUNCH(masked_sum, 1, 32, y, 20, 0, 0);
    cr_expect_eq(fetch(y, 1)[0], 20.0f);
    LAUNCH(masked_sum, 1, 32, y, 32, 0, 2);
    cr_expect_eq(fetch(y, 32)[20], 16.0f);
    LAUNCH(masked_sum, 1, 64, y, 40, 0, 0);
    cr_expect_eq(cudaemu_report_count(), 0);

    LAUNCH(masked_sum, 1, 32, y, 20, 1, 0); /* lanes 20.. have exited */
    cr_expect_eq(cudaemu_report_count(), 1);
    LAUNCH(masked_sum, 1, 48, y, 48, 0, 0); /* the second warp has 16 lanes */
    cr_expect_eq(cudaemu_report_count(), 2);
    LAUNCH(masked_sum, 1, 32, y, 32, 0, 1);
    cr_expect_eq(cudaemu_report_count(), 3);
    LAUNCH(masked_sum, 1, 32, y, 32, 0, 3);
    cr_expect_eq(cudaemu_report_count(), 4);
    std::string said = reports_text();
    expect_said(said, "kernel masked_sum, block (0,0,0), thread (0,0,0): __shfl_xor_sync(mask "
                      "0xffffffff) names lane 20, thread (20,0,0), which has exited (its value "
                      "is undefined)");
    expect_said(said, "names lane 16, which does not exist: the warp has 16 threads");
    expect_said(said, "which is in __shfl_xor_sync with mask 0x0000ffff");
    expect_said(said, "the calling lane 0 is not in the mask");
}

/* Lanes 0..15 shuffle with the whole warp, lanes 16.. go to the barrier;
 * fixed: lanes 0..15 shuffle among themselves. */
static __global__ void shuffle_beside_barrier(float *y, int fixed)
{
    float v = 1.0f;
    if (threadIdx.x < 16)
        v = __shfl_xor_sync(fixed ? 0xffffu : 0xffffffffu, v, 1);
    __syncthreads();
    y[threadIdx.x] = v;
}

Test(kernels, shuffle_with_lanes_at_a_barrier)
{
    float *y = device<float>(32);
    LAUNCH(shuffle_beside_barrier, 1, 32, y, 1);
    cr_expect_eq(cudaemu_report_count(), 0);
    LAUNCH(shuffle_beside_barrier, 1, 32, y, 0);
    cr_expect_eq(cudaemu_report_count(), 1);
    expect_said(reports_text(), "names lane 16, thread (16,0,0), which waits at __syncthreads");
}

static __global__ void shuffle_width(float *y, int width)
{
    y[threadIdx.x] = __shfl_down_sync(0xffffffffu, 1.0f, 1, width);
}

Test(kernels, shuffle_widths_are_powers_of_two)
{
    float *y = device<float>(32);
    LAUNCH(shuffle_width, 1, 32, y, 4);
    cr_expect_eq(cudaemu_report_count(), 0);
    LAUNCH(shuffle_width, 1, 32, y, 3);
    cr_expect_eq(cudaemu_report_count(), 1);
}

/* Each lane reads the box its neighbour wrote (in the next warp, when
 * across); __syncwarp orders that within a warp, not across warps. */
static __global__ void warp_handoff(float *y, int sync, int across)
{
    CUDAEMU_SHARED(float, box, [64]);
    unsigned t = threadIdx.x, n = blockDim.x;
    box[t] = (float)t;
    if (sync)
        __syncwarp();
    unsigned from = across ? (t + 32) % n : t / 32 * 32 + (t + 1) % 32;
    y[t] = box[from];
}

/* A partial warp's __syncwarp() names lanes that do not exist: allowed,
 * as for lanes that have exited. */
static __global__ void partial_syncwarp(float *y)
{
    __syncwarp();
    y[threadIdx.x] = 1.0f;
}

Test(kernels, syncwarp_orders_a_warp_s_shared_memory)
{
    float *y = device<float>(64);
    LAUNCH(warp_handoff, 1, 64, y, 1, 0);
    std::vector<float> got = fetch(y, 64);
    cr_expect_eq(got[31], 0.0f);
    cr_expect_eq(got[40], 41.0f);
    cr_expect_eq(cudaemu_report_count(), 0);
    LAUNCH(warp_handoff, 1, 64, y, 0, 0);
    cr_expect_eq(cudaemu_report_count(), 1);
    LAUNCH(warp_handoff, 1, 64, y, 1, 1);
    cr_expect_eq(cudaemu_report_count(), 2);
    LAUNCH(partial_syncwarp, 1, 48, y);
    cr_expect_eq(cudaemu_report_count(), 2);
}

/* ---------------------------------------------------------------------
 * Launches. */

static __global__ void store_one(float *y)
{
    if (y)
        y[0] = 1.0f;
}

Test(kernels, launch_shapes)
{
    float *y = device<float>(1);
    dim3 good[][2] = {{1, 1024}, {1, dim3(1, 1, 64)}, {dim3(1, 2, 2), dim3(32, 32)}};
    for (auto &g : good)
        LAUNCH(store_one, g[0], g[1], y);
    cr_expect_eq(cudaemu_report_count(), 0);
    cr_expect_eq(cudaGetLastError(), cudaSuccess);
    dim3 bad[][2] = {{0, 32},
                     {1, dim3(32, 0)},
                     {1, 1025},
                     {1, dim3(64, 32)},
                     {1, dim3(1, 1, 65)},
                     {dim3(1, 65536), 32},
                     {dim3(1, 1, 65536), 32}};
    int n = 0;
    for (auto &b : bad) {
        LAUNCH(store_one, b[0], b[1], y);
        cr_expect_eq(cudaemu_report_count(), ++n, "grid (%u,%u,%u) block (%u,%u,%u)", b[0].x,
                     b[0].y, b[0].z, b[1].x, b[1].y, b[1].z);
        cr_expect_eq(cudaGetLastError(), cudaErrorInvalidConfiguration);
    }
    expect_said(reports_text(), "launch of store_one with grid (1,1,1), block (1025,1,1): more "
                                "than 1024 threads a block");
}

Test(kernels, dynamic_shared_memory_is_not_emulated)
{
    float *y = device<float>(1);
    CUDAEMU_LAUNCH(store_one, 1, 32, 256, stream(), y);
    cudaStreamSynchronize(stream());
    cr_expect_eq(cudaemu_report_count(), 1);
    expect_said(reports_text(), "256 bytes of dynamic shared memory requested (not emulated)");
}

template <size_t N> struct blob {
    char bytes[N];
};
template <size_t N> static __global__ void take_blob(blob<N> b, float *y) { y[0] = b.bytes[N - 1]; }

Test(kernels, parameter_bytes)
{
    float *y = device<float>(1);
    static blob<4096> small;
    static blob<32768> large;
    small.bytes[4095] = 7;
    LAUNCH(take_blob<4096>, 1, 32, small, y);
    cr_expect_eq(fetch(y, 1)[0], 7.0f);
    cr_expect_eq(cudaemu_report_count(), 0);
    LAUNCH(take_blob<32768>, 1, 32, large, y);
    cr_expect_eq(cudaemu_report_count(), 1);
    cr_expect_eq(cudaGetLastError(), cudaErrorInvalidValue);
}

Test(kernels, pointer_arguments)
{
    float *y = device<float>(1), *pinned = nullptr;
    cr_assert_eq(cudaHostAlloc((void **)&pinned, 64, cudaHostAllocDefault), cudaSuccess);
    LAUNCH(store_one, 1, 1, y);
    LAUNCH(store_one, 1, 1, pinned);
    LAUNCH(store_one, 1, 1, (float *)nullptr);
    cr_expect_eq(cudaemu_report_count(), 0);
    std::vector<float> host(1);
    LAUNCH(store_one, 1, 1, host.data());
    cr_expect_eq(cudaemu_report_count(), 1);
    expect_said(reports_text(), "launch of store_one: argument 1 (");
    expect_said(reports_text(), ") is neither NULL nor device or pinned host memory");
}

Test(kernels, device_pointers_of_another_gpu)
{
    cudaStream_t s0 = stream();
    float *other = nullptr;
    cr_assert_eq(cudaSetDevice(1), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&other, 4), cudaSuccess);
    cr_assert_eq(cudaSetDevice(0), cudaSuccess);
    CUDAEMU_LAUNCH(store_one, 1, 1, 0, s0, other);
    cudaStreamSynchronize(s0);
    cr_expect_eq(cudaemu_report_count(), 1);
    expect_said(reports_text(), "is memory of GPU 1, but the launch's stream is GPU 0's");
}

Test(kernels, a_stream_of_another_gpu)
{
    float *y = device<float>(1);
    cudaStream_t s1 = nullptr;
    cr_assert_eq(cudaSetDevice(1), cudaSuccess);
    cr_assert_eq(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking), cudaSuccess);
    cr_assert_eq(cudaSetDevice(0), cudaSuccess);
    CUDAEMU_LAUNCH(store_one, 1, 1, 0, s1, y);
    cr_expect_eq(cudaGetLastError(), cudaErrorInvalidResourceHandle);
    cr_expect_eq(fetch(y, 1)[0], 0.0f, "not run");
    cr_expect_eq(cudaemu_report_count(), 1);
}

/* ---------------------------------------------------------------------
 * Seeds and grid caps. */

/* order[thread of the grid] = its turn: the order threads start in. */
static __global__ void record_order(int *order, int *turn)
{
    order[blockIdx.x * blockDim.x + threadIdx.x] = (*turn)++;
}

static const int ORDER_BLOCKS = 4, ORDER_THREADS = 64;

static std::vector<int> run_order()
{
    int *order = device<int>(ORDER_BLOCKS * ORDER_THREADS), *turn = device<int>(1);
    LAUNCH(record_order, ORDER_BLOCKS, ORDER_THREADS, order, turn);
    return fetch(order, ORDER_BLOCKS * ORDER_THREADS);
}

/* The order under CUDAEMU_SEED=seed, in a process of its own. */
static std::vector<int> order_with_seed(const char *seed)
{
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pid_t child = fork();
    if (child == 0) {
        setenv("CUDAEMU_SEED", seed, 1);
        std::vector<int> order = run_order();
        ssize_t wrote = write(fds[1], order.data(), order.size() * sizeof(int));
        _exit(wrote == (ssize_t)(order.size() * sizeof(int)) ? 0 : 1);
    }
    std::vector<int> order(ORDER_BLOCKS * ORDER_THREADS);
    size_t want = order.size() * sizeof(int), got = 0;
    ssize_t r;
    while (got < want && (r = read(fds[0], (char *)order.data() + got, want - got)) > 0)
        got += (size_t)r;
    int status = 0;
    waitpid(child, &status, 0);
    close(fds[0]);
    close(fds[1]);
    cr_assert(got == want && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return order;
}

Test(kernels, seeds_change_the_order)
{
    /* the children first: fork before this process starts the emulator */
    std::vector<int> a = order_with_seed("7"), b = order_with_seed("7"), c = order_with_seed("8");
    std::vector<int> in_order(ORDER_BLOCKS * ORDER_THREADS);
    for (size_t i = 0; i < in_order.size(); i++)
        in_order[i] = (int)i;
    cr_expect(run_order() == in_order, "unseeded, threads start in index order");
    cr_expect(a == b, "a seed gives one order");
    cr_expect(a != in_order && a != c, "seeds give other orders");
}

Test(kernels, seeds_keep_results)
{
    std::vector<float> want = tree_sums(1);
    for (const char *seed : {"1", "2", "3"}) {
        setenv("CUDAEMU_SEED", seed, 1);
        cr_expect(tree_sums(1) == want, "seed %s", seed);
    }
    cr_expect_eq(cudaemu_report_count(), 0);
}

Test(kernels, grid_caps)
{
    cr_expect_eq(cudaemu_grid_cap(100), 100);
    setenv("CUDAEMU_GRID_CAP", "3", 1);
    cr_expect_eq(cudaemu_grid_cap(100), 3);
    cr_expect_eq(cudaemu_grid_cap(2), 2);
    setenv("CUDAEMU_GRID_CAP", "0", 1);
    cr_expect_eq(cudaemu_grid_cap(100), 100);
}
