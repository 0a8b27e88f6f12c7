#include <string.h>

#include "context_impl.h"
#include "cpu/cpu.h"
#include "cuda_api.h"
#include "op.h"

static const sc_op_desc *const op_descs[SC_OP_COUNT] = {
#define SC_OP_DESC_ENTRY(id, name) [SC_OP_##id] = &sc_op_desc_##name,
    SC_OP_LIST(SC_OP_DESC_ENTRY)
#undef SC_OP_DESC_ENTRY
};

const sc_op_desc *sc_op_desc_get(sc_op_id op) { return op_descs[op]; }

const sc_kernel *sc_backend_kernel(sc_device_kind kind, sc_op_id op)
{
    if (op < 0 || op >= SC_OP_COUNT)
        return NULL;
    switch (kind) {
    case SC_DEVICE_CPU: return sc_cpu_kernel(op);
    case SC_DEVICE_CUDA: return sc_cuda_kernel(op);
    default: return NULL;
    }
}

const char *sc_device_kind_name(sc_device_kind kind)
{
    switch (kind) {
    case SC_DEVICE_CPU: return "cpu";
    case SC_DEVICE_CUDA: return "cuda";
    default: return "unknown";
    }
}

static sc_status check_inputs(const sc_ctx *ctx, const sc_op_desc *desc,
                              int n, sc_tensor *const *in)
{
    if (n < desc->min_inputs || n > desc->max_inputs)
        return sc_error_set(SC_ERR_INVALID, "%s: takes %d..%d inputs, got %d",
                            desc->name, desc->min_inputs, desc->max_inputs, n);
    for (int i = 0; i < n; i++) {
        if (in[i]->device.kind != ctx->device.kind ||
            in[i]->device.index != ctx->device.index)
            return sc_error_set(SC_ERR_INVALID,
                                "%s: input %d is on %s:%d, the context on %s:%d",
                                desc->name, i,
                                sc_device_kind_name(in[i]->device.kind),
                                in[i]->device.index,
                                sc_device_kind_name(ctx->device.kind),
                                ctx->device.index);
    }
    return SC_OK;
}

static sc_tensor *make_output(sc_ctx *ctx, const sc_op_desc *desc,
                              const sc_node *node)
{
    sc_tensor *out = sc_ctx_alloc(ctx, sizeof *out);
    if (!out || desc->infer(node, out) != SC_OK)
        return NULL;
    out->device = ctx->device;
    if (desc->flags & SC_OPF_VIEW) {
        out->data = node->in[0]->data;
        return out;
    }
    out->data = sc_ctx_alloc_data(ctx, sc_tensor_nbytes(out));
    return out->data ? out : NULL;
}

static bool needs_tape(const sc_ctx *ctx, const sc_node *node)
{
    if (!ctx->grad_enabled)
        return false;
    for (int i = 0; i < node->n_inputs; i++)
        if (node->in[i]->flags & SC_TENSOR_REQUIRES_GRAD)
            return true;
    return false;
}

sc_tensor *sc_op_run(sc_ctx *ctx, sc_op_id op, int n_inputs,
                     sc_tensor *const *inputs, const sc_op_params *params)
{
    for (int i = 0; i < n_inputs; i++)
        if (!inputs[i])
            return NULL; /* an earlier op failed; keep its message */

    const sc_op_desc *desc = op_descs[op];
    if (check_inputs(ctx, desc, n_inputs, inputs) != SC_OK)
        return NULL;
    const sc_kernel *kernel = sc_backend_kernel(ctx->device.kind, op);
    if (!kernel || !kernel->forward) {
        sc_error_set(SC_ERR_UNSUPPORTED, "op %s has no %s kernel", desc->name,
                     sc_device_kind_name(ctx->device.kind));
        return NULL;
    }

    sc_node *node = sc_ctx_alloc(ctx, sizeof *node);
    if (!node)
        return NULL;
    memset(node, 0, sizeof *node);
    node->op = op;
    node->n_inputs = n_inputs;
    memcpy(node->in, inputs, (size_t)n_inputs * sizeof *inputs);
    if (params)
        node->params = *params;
    node->ctx = ctx;
    node->scope = sc_ctx_scope_interned(ctx);

    node->out = make_output(ctx, desc, node);
    if (!node->out)
        return NULL;
    sc_status st = kernel->forward(node);
    sc_ctx_scratch_done(ctx);
    if (st != SC_OK)
        return NULL;
    if (desc->flags & SC_OPF_RANDOM)
        ctx->random_ops++;

    if (needs_tape(ctx, node)) {
        node->out->flags |= SC_TENSOR_REQUIRES_GRAD;
        node->prev = ctx->tape_tail;
        node->index = ctx->tape_len++;
        ctx->tape_tail = node;
    }
    return node->out;
}

sc_status sc_check_f32(const sc_node *node, int input)
{
    if (node->in[input]->dtype != SC_F32)
        return sc_error_set(SC_ERR_INVALID, "%s: input %d must be f32, not %s",
                            op_descs[node->op]->name, input,
                            sc_dtype_name(node->in[input]->dtype));
    return SC_OK;
}

sc_status sc_infer_same_as_input(const sc_node *node, sc_tensor *out)
{
    SC_TRY(sc_check_f32(node, 0));
    return sc_tensor_init(out, SC_F32, node->in[0]->ndim, node->in[0]->shape);
}

sc_status sc_infer_output(const sc_node *node, sc_tensor *out, sc_dtype dtype, int ndim,
                          const int64_t *shape)
{
    if (sc_tensor_init(out, dtype, ndim, shape) != SC_OK)
        return sc_error_wrap(sc_error_code(), "%s: output", op_descs[node->op]->name);
    return SC_OK;
}

double sc_flops_none(const sc_node *node)
{
    (void)node;
    return 0;
}

sc_status sc_infer_scalar(const sc_node *node, sc_tensor *out)
{
    SC_TRY(sc_check_f32(node, 0));
    return sc_tensor_init(out, SC_F32, 0, NULL);
}
