/* CUDA kernels for reshape and concat. reshape's output is a view of the
 * input's data, so forward has nothing to compute and backward adds the
 * gradient through. concat runs one kernel per input: forward copies its
 * rows into place, backward adds them back out (one input after another,
 * so an input given twice accumulates both gradients). */
#include "cuda_impl.h"
#include "device_math.cuh"

/* gx [n] += gy [n] */
static __global__ void add_kernel(const float *gy, float *gx, int64_t n)
{
    GRID_STRIDE(i, n) gx[i] += gy[i];
}

static sc_status reshape_forward(sc_node *node) { return SC_OK; }

static sc_status reshape_backward(sc_node *node, const sc_tensor *gy, sc_tensor *const *gin)
{
    int64_t n = gy->numel;
    SC_LAUNCH(add_kernel, sc_cuda_blocks(n), SC_CUDA_THREADS, 0, sc_cuda_stream(node->ctx),
              sc_tensor_f32(gy), sc_tensor_f32(gin[0]), n);
    SC_CUDA_LAUNCHED("add_kernel");
    return SC_OK;
}

/* y [outer, row] columns off .. off + block <- x [outer, block]; T is the
 * element type, so any dtype copies */
template <typename T>
static __global__ void concat_forward_kernel(const T *x, T *y, int64_t outer, int64_t block,
                                             int64_t row, int64_t off)
{
    int64_t n = outer * block;
    GRID_STRIDE(e, n) y[e / block * row + off + e % block] = x[e];
}

/* gx [outer, block] += gy [outer, row] columns off .. off + block */
static __global__ void concat_backward_kernel(const float *gy, float *gx, int64_t outer,
                                              int64_t block, int64_t row, int64_t off)
{
    int64_t n = outer * block;
    GRID_STRIDE(e, n) gx[e] += gy[e / block * row + off + e % block];
}

template <typename T> static sc_status concat_copy(sc_node *node, const sc_concat_geom &g)
{
    cudaStream_t st = sc_cuda_stream(node->ctx);
    for (int i = 0; i < g.n; i++) {
        SC_LAUNCH(concat_forward_kernel<T>, sc_cuda_blocks(g.outer * g.block[i]), SC_CUDA_THREADS,
                  0, st, (const T *)node->in[i]->data, (T *)node->out->data, g.outer, g.block[i],
                  g.row, g.off[i]);
        SC_CUDA_LAUNCHED("concat_forward_kernel");
    }
    return SC_OK;
}

/* Copies elements of the dtype's size, so any dtype concatenates. */
static sc_status concat_forward(sc_node *node)
{
    sc_concat_geom g = sc_concat_geom_of(node);
    switch (sc_dtype_size(node->out->dtype)) {
    case 8: return concat_copy<uint64_t>(node, g);
    case 4: return concat_copy<uint32_t>(node, g);
    default: return concat_copy<uint8_t>(node, g); /* u8 */
    }
}

/* gin[i] [outer, block_i] += its blocks of gy [outer, row] */
static sc_status concat_backward(sc_node *node, const sc_tensor *gy, sc_tensor *const *gin)
{
    sc_concat_geom g = sc_concat_geom_of(node);
    cudaStream_t st = sc_cuda_stream(node->ctx);
    for (int i = 0; i < g.n; i++) {
        if (!gin[i])
            continue;
        SC_LAUNCH(concat_backward_kernel, sc_cuda_blocks(g.outer * g.block[i]), SC_CUDA_THREADS, 0,
                  st, sc_tensor_f32(gy), sc_tensor_f32(gin[i]), g.outer, g.block[i], g.row,
                  g.off[i]);
        SC_CUDA_LAUNCHED("concat_backward_kernel");
    }
    return SC_OK;
}

extern "C" const sc_kernel sc_cuda_kernel_reshape = {reshape_forward, reshape_backward, 0};
extern "C" const sc_kernel sc_cuda_kernel_concat = {concat_forward, concat_backward, 0};
