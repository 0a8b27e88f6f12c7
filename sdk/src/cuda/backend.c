/* The CUDA backend's kernel table: every op in the registry, defined in
 * the .cu files beside this one. */
#include "cuda_impl.h"

static const sc_kernel *const cuda_kernels[SC_OP_COUNT] = {
#define SC_CUDA_KERNEL_ENTRY(id, name) [SC_OP_##id] = &sc_cuda_kernel_##name,
    SC_OP_LIST(SC_CUDA_KERNEL_ENTRY)
#undef SC_CUDA_KERNEL_ENTRY
};

const sc_kernel *sc_cuda_kernel(sc_op_id op) { return cuda_kernels[op]; }
