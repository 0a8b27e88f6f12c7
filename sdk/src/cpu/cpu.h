/* cpu.h — the CPU backend's kernels. Private to libscorch.
 *
 * Kernels are plain loops over contiguous f32 data, parallel with OpenMP
 * once a loop is large enough to pay for waking the threads, and GEMM
 * through OpenBLAS (cblas). */
#ifndef SCORCH_CPU_H
#define SCORCH_CPU_H

#include "../op.h"

/* Below this many elements an element-wise loop runs on one thread. */
enum { SC_CPU_PAR_MIN = 1 << 15 };

/* For the small helpers of a kernel's inner loop, which must inline for
 * the loop to vectorise whatever the compiler's own judgement. */
#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* A function compiled twice, for AVX2 and for the generic x86-64 the
 * build targets, the loader picking one for the CPU (GCC's
 * target_clones): for loops of additions, multiplications, divisions and
 * square roots, which AVX2 without FMA computes in the same order with
 * the same rounding, 8 at a time, so the bits do not depend on the
 * machine. The loops must be the function's own: OpenMP outlines a
 * parallel region's body into a function without the attribute. */
#if defined(__x86_64__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define SC_CPU_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef SC_CPU_CLONES
#define SC_CPU_CLONES
#endif

/* max(x, 0), NaN staying NaN (as in PyTorch), so that a broken input
 * shows up in the loss instead of vanishing. */
ALWAYS_INLINE float sc_cpu_relu(float x) { return x < 0.0f ? 0.0f : x; }

/* The gradient g of a relu's output taken to its input x, or from its
 * output, which is > 0 exactly where x is (NaN gives none either way).
 * Callers load g whatever x is, so that their loops vectorise. */
ALWAYS_INLINE float sc_cpu_relu_grad(float x, float g) { return x > 0.0f ? g : 0.0f; }

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* Runs `body` over [0, len) in blocks [start, start + n): n = 8, or 4 when
 * len < 8, the last block moved back to end at len (where it overlaps the
 * one before, body must write the same values again); when len < 4, once
 * with n = len. With n a constant, body's `omp simd` loop over the block
 * vectorises whole: a loop over a short row (the 7 or 14 outputs of the
 * cnn's layers) would run mostly in its scalar tail. */
#define SC_CPU_ROW_BLOCKS(len, start, n, body)                                                     \
    do {                                                                                           \
        int64_t len_ = (len);                                                                      \
        if (len_ >= 8) {                                                                           \
            for (int64_t at_ = 0; at_ < len_; at_ += 8) {                                          \
                const int64_t start = min64(at_, len_ - 8), n = 8;                                 \
                body;                                                                              \
            }                                                                                      \
        } else if (len_ >= 4) {                                                                    \
            for (int64_t at_ = 0; at_ < len_; at_ += 4) {                                          \
                const int64_t start = min64(at_, len_ - 4), n = 4;                                 \
                body;                                                                              \
            }                                                                                      \
        } else {                                                                                   \
            const int64_t start = 0, n = len_;                                                     \
            body;                                                                                  \
        }                                                                                          \
    } while (0)

/* Pooling's geometry: x [planes, H, W] -> y [planes, OH, OW]. */
typedef struct sc_cpu_pool_geom {
    int64_t planes, h, w, oh, ow;
    sc_pool2d_params p;
    bool pairs; /* 2x2 windows, stride 2, no padding */
} sc_cpu_pool_geom;

sc_cpu_pool_geom sc_cpu_pool_geom_of(const sc_pool2d_params *p, const sc_tensor *x,
                                     const sc_tensor *y);

/* Max pooling saves, for backward, where each window's max is: with 2x2
 * windows at stride 2 (g->pairs), a byte per window, the max's place in
 * it (2 dy + dx), a quarter of an index's memory traffic; with other
 * windows, its flat index in the plane (i32). When a relu follows the
 * pooling, fused (batch norm's), the record also says where the relu
 * passes no gradient (the pooled output is not > 0): the byte has
 * SC_CPU_POOL_BLOCKED added, the index is complemented (~index); backward
 * then needs no second look at the output. */
enum { SC_CPU_POOL_BLOCKED = 4 };

/* The record [planes, OH, OW] of a max pooling with output y (u8 for
 * pairs, else i32), and plane `plane`'s part of its data. */
sc_tensor *sc_cpu_pool_record_new(sc_ctx *ctx, const sc_cpu_pool_geom *g, const sc_tensor *y);
void *sc_cpu_pool_record_plane(const sc_cpu_pool_geom *g, const void *record, int64_t plane);

/* Max pooling of one plane, for max_pool2d and batch norm's fused pooling
 * alike: y [OH, OW] = the max of x [H, W] under each window (the first
 * where the max repeats), arg its record (above), blocked where y is not
 * > 0 when relu; and backward, gx [H, W] (+)= gy [OH, OW] where the record
 * says, +0 where blocked, gx zeroed first when fresh. */
void sc_cpu_max_pool_plane(const sc_cpu_pool_geom *g, const float *x, float *y, void *arg,
                           bool relu);
void sc_cpu_max_pool_plane_grad(const sc_cpu_pool_geom *g, const float *gy, const void *arg,
                                float *gx, bool fresh);

#define SC_CPU_KERNEL_DECL(id, name) extern const sc_kernel sc_cpu_kernel_##name;
SC_OP_LIST(SC_CPU_KERNEL_DECL)
#undef SC_CPU_KERNEL_DECL

/* The CPU kernels of op (every op has them). */
const sc_kernel *sc_cpu_kernel(sc_op_id op);

#endif
