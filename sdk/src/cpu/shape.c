/* CPU kernels for reshape and concat. reshape's output is a view of the
 * input's data, so forward has nothing to compute and backward adds the
 * gradient through. */
#include <string.h>

#include "cpu.h"

static sc_status reshape_forward(sc_node *node) { return SC_OK; }

/* gx [numel] += gy [numel] (= when gx is fresh) */
static sc_status reshape_backward(sc_node *node, const sc_tensor *gy, sc_tensor *const *gin)
{
    const float *g = sc_tensor_f32(gy);
    float *gx = sc_tensor_f32(gin[0]);
    int64_t n = gy->numel;
    if (sc_node_grad_fresh(node, 0)) {
        memcpy(gx, g, (size_t)n * sizeof *gx);
        return SC_OK;
    }
#pragma omp parallel for schedule(static) if (n > SC_CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        gx[i] += g[i];
    return SC_OK;
}

/* Copies bytes, so any dtype concatenates; the pieces (a row of one input)
 * run in parallel. */
static sc_status concat_forward(sc_node *node)
{
    sc_concat_geom g = sc_concat_geom_of(node);
    size_t es = sc_dtype_size(node->out->dtype);
    char *y = node->out->data;
    int64_t pieces = g.outer * g.n;
#pragma omp parallel for schedule(static) if (node->out->numel > SC_CPU_PAR_MIN && pieces > 1)
    for (int64_t p = 0; p < pieces; p++) {
        int64_t o = p / g.n;
        int i = (int)(p % g.n);
        memcpy(y + (size_t)(o * g.row + g.off[i]) * es,
               (const char *)node->in[i]->data + (size_t)(o * g.block[i]) * es,
               (size_t)g.block[i] * es);
    }
    return SC_OK;
}

/* gin[i] [outer, block_i] += its blocks of gy [outer, row] */
static sc_status concat_backward(sc_node *node, const sc_tensor *gy, sc_tensor *const *gin)
{
    sc_concat_geom g = sc_concat_geom_of(node);
    const float *gyd = sc_tensor_f32(gy);
    int64_t pieces = g.outer * g.n;
#pragma omp parallel for schedule(static) if (gy->numel > SC_CPU_PAR_MIN && pieces > 1)
    for (int64_t p = 0; p < pieces; p++) {
        int64_t o = p / g.n;
        int i = (int)(p % g.n);
        if (!gin[i])
            continue;
        float *restrict gx = sc_tensor_f32(gin[i]) + o * g.block[i];
        const float *restrict src = gyd + o * g.row + g.off[i];
        for (int64_t k = 0; k < g.block[i]; k++)
            gx[k] += src[k];
    }
    return SC_OK;
}

const sc_kernel sc_cpu_kernel_reshape = {.forward = reshape_forward, .backward = reshape_backward,
                                         .writes_grads = 1u << 0};
const sc_kernel sc_cpu_kernel_concat = {.forward = concat_forward, .backward = concat_backward};
