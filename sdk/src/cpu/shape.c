/* CPU kernels for reshape: the output is a view of the input's data, so
 * forward has nothing to compute and backward adds the gradient through. */
#include "cpu.h"

static sc_status reshape_forward(sc_node *node) { return SC_OK; }

/* gx [numel] += gy [numel] */
static sc_status reshape_backward(sc_node *node, const sc_tensor *gy, sc_tensor *const *gin)
{
    const float *g = sc_tensor_f32(gy);
    float *gx = sc_tensor_f32(gin[0]);
    int64_t n = gy->numel;
#pragma omp parallel for schedule(static) if (n > SC_CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        gx[i] += g[i];
    return SC_OK;
}

const sc_kernel sc_cpu_kernel_reshape = {reshape_forward, reshape_backward};
