/* The CPU backend's kernel table: every op in the registry. */
#include <cblas.h>
#include <omp.h>

#include "../host_only.h"
#include "cpu.h"
#include "scorch_host/context.h"

static const sc_kernel *const cpu_kernels[SC_OP_COUNT] = {
#define SC_CPU_KERNEL_ENTRY(id, name) [SC_OP_##id] = &sc_cpu_kernel_##name,
    SC_OP_LIST(SC_CPU_KERNEL_ENTRY)
#undef SC_CPU_KERNEL_ENTRY
};

const sc_kernel *sc_cpu_kernel(sc_op_id op) { return cpu_kernels[op]; }

void sc_cpu_set_threads(int threads)
{
    if (sc_host_only(__func__) != SC_OK)
        return;
    if (threads <= 0)
        threads = omp_get_num_procs();
    omp_set_num_threads(threads);
    openblas_set_num_threads(threads);
}

int sc_cpu_threads(void) { return omp_get_max_threads(); }
