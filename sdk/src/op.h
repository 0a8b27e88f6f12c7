/* op.h — the op registry: op ids, typed op parameters, tape nodes,
 * descriptors and per-backend kernel tables. Private to libscorch.
 *
 * Adding an op:
 *   1. add it to SC_OP_LIST, and give it a params struct if it takes any;
 *   2. define its descriptor (name, arity, shape inference) next to its
 *      public function in sdk/src/ops/;
 *   3. its CPU kernels (forward, backward) in sdk/src/cpu/, the reference;
 *   4. a finite-difference gradient test in tests/unit/sdk/ (test_ops.c,
 *      or the test of its family: test_conv.c, test_norm.c);
 *   5. its CUDA kernels in sdk/src/cuda/ (sc_cuda_kernel_<name>: the
 *      backend's table names every op, so libscorch_cuda does not link
 *      without them), written as docs/cuda-emulation.md "Writing a kernel"
 *      says;
 *   6. its differential cases in tests/unit/sdk/test_cuda_ops.c (CUDA
 *      against the CPU, outputs and gradients; the coverage test fails for
 *      an op without cases), run on the emulated GPU in each of its modes
 *      (docs/cuda-emulation.md).
 */
#ifndef SCORCH_OP_H
#define SCORCH_OP_H

#include "scorch/context.h"
#include "scorch/ops.h"
#include "scorch/tensor.h"

/* X(ENUM_SUFFIX, name). sc_flatten is a reshape, not an op of its own. */
#define SC_OP_LIST(X)                                                          \
    X(MATMUL, matmul)                                                          \
    X(LINEAR, linear)                                                          \
    X(ADD, add)                                                                \
    X(SUB, sub)                                                                \
    X(MUL, mul)                                                                \
    X(SCALE, scale)                                                            \
    X(RELU, relu)                                                              \
    X(TANH, tanh)                                                              \
    X(SIGMOID, sigmoid)                                                        \
    X(GELU, gelu)                                                              \
    X(DROPOUT, dropout)                                                        \
    X(SOFTMAX, softmax)                                                        \
    X(LOG_SOFTMAX, log_softmax)                                                \
    X(CROSS_ENTROPY, cross_entropy)                                            \
    X(MSE, mse)                                                                \
    X(SUM, sum)                                                                \
    X(MEAN, mean)                                                              \
    X(RESHAPE, reshape)                                                        \
    X(CONV2D, conv2d)                                                          \
    X(MAX_POOL2D, max_pool2d)                                                  \
    X(AVG_POOL2D, avg_pool2d)                                                  \
    X(GLOBAL_AVG_POOL, global_avg_pool)                                        \
    X(BATCH_NORM, batch_norm)                                                  \
    X(LAYER_NORM, layer_norm)                                                  \
    X(CONCAT, concat)

typedef enum sc_op_id {
#define SC_OP_ENUM(id, name) SC_OP_##id,
    SC_OP_LIST(SC_OP_ENUM)
#undef SC_OP_ENUM
    SC_OP_COUNT
} sc_op_id;

enum { SC_OP_MAX_INPUTS = 8, SC_OP_MAX_SAVED = 4 };

/* Typed parameters, one struct per op that takes any. */
typedef struct sc_scale_params { float factor; } sc_scale_params;
typedef struct sc_dropout_params { float p; } sc_dropout_params;
typedef struct sc_cross_entropy_params { float label_smoothing; } sc_cross_entropy_params;
/* The requested shape; at most one -1, resolved by shape inference. */
typedef struct sc_reshape_params {
    int ndim;
    int64_t shape[SC_MAX_DIMS];
} sc_reshape_params;
/* Convolution and pooling keep the public option structs, with every
 * default resolved (stride >= 1, dilation >= 1, groups >= 1). */
typedef sc_conv2d_opts sc_conv2d_params;
typedef sc_pool2d_opts sc_pool2d_params;
/* Output length of a sliding window over `in` padded by pad on both sides,
 * kernel taps dilation apart, moved by stride; 0 when the window is larger
 * than the padded input. */
static inline int64_t sc_window_out(int64_t in, int kernel, int stride, int pad,
                                    int dilation)
{
    int64_t span = (int64_t)dilation * (kernel - 1) + 1, padded = in + 2 * (int64_t)pad;
    return padded < span ? 0 : (padded - span) / stride + 1;
}
/* Inputs x, weight, bias, running_mean, running_var. training is the
 * context's mode when forward ran: it picks batch or running statistics.
 * relu: the output is relu(batch norm) (sc_batch_norm_relu). pooled: the
 * output is max_pool2d(that, pool) (sc_batch_norm_max_pool2d). */
typedef struct sc_batch_norm_params {
    float momentum, eps;
    bool training, relu, pooled;
    sc_pool2d_params pool;
} sc_batch_norm_params;
/* Inputs x, then weight if has_weight, then bias if has_bias. */
typedef struct sc_layer_norm_params {
    float eps;
    bool has_weight, has_bias;
} sc_layer_norm_params;
typedef struct sc_concat_params { int axis; } sc_concat_params;
/* relu: the output is relu(a + b) (sc_add_relu); add only. */
typedef struct sc_binary_params { bool relu; } sc_binary_params;

typedef union sc_op_params {
    sc_scale_params scale;
    sc_dropout_params dropout;
    sc_cross_entropy_params cross_entropy;
    sc_reshape_params reshape;
    sc_conv2d_params conv2d;
    sc_pool2d_params pool2d;
    sc_batch_norm_params batch_norm;
    sc_layer_norm_params layer_norm;
    sc_concat_params concat;
    sc_binary_params binary;
} sc_op_params;

/* One op application: what forward computed and what backward needs. */
typedef struct sc_node {
    sc_op_id op;
    int n_inputs;
    sc_tensor *in[SC_OP_MAX_INPUTS];
    sc_tensor *out;
    sc_tensor *saved[SC_OP_MAX_SAVED]; /* set by forward kernels as needed */
    sc_op_params params;
    sc_ctx *ctx;
    struct sc_node *prev; /* previous node on the tape */
    int64_t index;        /* position on the tape */
    const char *scope;    /* the layer scope it ran in ("" at top level) */
    unsigned grad_fresh;  /* bit i: gin[i] is new and uninitialised (sc_kernel) */
} sc_node;

enum sc_op_flags {
    SC_OPF_VIEW = 1u << 0,   /* output shares input 0's data; no allocation */
    SC_OPF_RANDOM = 1u << 1, /* draws from the context's step stream (counted) */
};

typedef struct sc_op_desc {
    const char *name;
    int min_inputs, max_inputs;
    unsigned flags;
    /* Validates inputs and params, and sets out's dtype and shape with
     * sc_tensor_init(). Returns a status with a message naming the op. */
    sc_status (*infer)(const sc_node *node, sc_tensor *out);
    /* Forward FLOPs (a multiply-add counts 2), for the model summary;
     * NULL means one per output element. */
    double (*flops)(const sc_node *node);
} sc_op_desc;

/* Forward fills node->out (and node->saved). Backward adds the gradient of
 * each input i into gin[i] (gin[i] is NULL when input i needs none); it
 * accumulates, never overwrites, except where writes_grads allows:
 * for an input whose bit is set there, autograd hands backward the
 * gradient's first contribution as an uninitialised buffer and sets the
 * same bit of node->grad_fresh, and backward then writes every element
 * of it. That saves zeroing the activations' gradients, a pass over
 * memory as large as the activations. What backward allocates from the
 * context is scratch, free again once it returns. */
typedef struct sc_kernel {
    sc_status (*forward)(sc_node *node);
    sc_status (*backward)(sc_node *node, const sc_tensor *gout,
                          sc_tensor *const *gin);
    unsigned writes_grads;
} sc_kernel;

/* Host memory for a CPU kernel's own use while it runs, where the last
 * kernel's was: it is freed when the kernel returns (the resnet's largest
 * convolution takes 12 MB; from the step arena, its convolutions' forward
 * passes held 64 MB at batch 128 until the step ended). NULL with a
 * message when out of memory. */
void *sc_ctx_scratch(sc_ctx *ctx, size_t bytes);

/* Whether backward must write gin[i] rather than add to it. */
static inline bool sc_node_grad_fresh(const sc_node *node, int i)
{
    return node->grad_fresh >> i & 1u;
}

#define SC_OP_DESC_DECL(id, name) extern const sc_op_desc sc_op_desc_##name;
SC_OP_LIST(SC_OP_DESC_DECL)
#undef SC_OP_DESC_DECL

const sc_op_desc *sc_op_desc_get(sc_op_id op);

/* The kernels of op on a backend; NULL when the backend lacks the op. */
const sc_kernel *sc_backend_kernel(sc_device_kind kind, sc_op_id op);
const char *sc_device_kind_name(sc_device_kind kind);

/* Runs op on inputs: propagates NULL inputs, checks devices, infers the
 * output, allocates it from the step arena, calls the backend's forward and
 * tapes the node when grad mode is on and an input requires grad. */
sc_tensor *sc_op_run(sc_ctx *ctx, sc_op_id op, int n_inputs,
                     sc_tensor *const *inputs, const sc_op_params *params);

/* relu(sc_batch_norm(...)) as one op, the sc_nn blocks' batch norm and
 * relu: the values and gradients of the two ops, bit for bit, with two
 * passes over memory fewer forward (no separate relu output) and one
 * fewer backward (no gradient of the batch norm's output in between). */
sc_tensor *sc_batch_norm_relu(sc_ctx *ctx, sc_tensor *x, sc_tensor *weight, sc_tensor *bias,
                              sc_tensor *running_mean, sc_tensor *running_var, float momentum,
                              float eps);

/* relu(sc_add(a, b)) as one op, the sc_nn residual blocks' join: the
 * values and gradients of the two ops, bit for bit, with two passes over
 * memory fewer forward (no sum in between) and two fewer backward (no
 * gradient of the sum in between). */
sc_tensor *sc_add_relu(sc_ctx *ctx, sc_tensor *a, sc_tensor *b);

/* max_pool2d(sc_batch_norm(...), pool), or of its relu when `relu`, as one
 * op, for conv-bn-relu-pool stages (sc_nn_conv_bn_max_pool_forward): the
 * values and gradients of the separate ops, bit for bit, without the
 * batch norm's full-size output or its gradient in memory: forward pools
 * each normalised plane while it is in cache, backward spreads each
 * plane's gradient back from the pooled one as it comes to it. */
sc_tensor *sc_batch_norm_max_pool2d(sc_ctx *ctx, sc_tensor *const in[5], float momentum,
                                    float eps, bool relu, const sc_pool2d_opts *pool);

/* pool with stride 0 resolved to the kernel size, into *p; an error (with
 * a message naming op) when pool is NULL. */
sc_status sc_pool2d_params_of(const char *op, const sc_pool2d_opts *pool, sc_pool2d_params *p);

/* The output shape [N, C, OH, OW] of pooling x [N, C, H, W] by p; an error
 * naming op when x is not 4-d or p does not fit it. */
sc_status sc_pool2d_out_shape(const char *op, const sc_tensor *x, const sc_pool2d_params *p,
                              int64_t shape[4]);

/* concat along axis, as both backends walk it: the output is `outer` rows
 * (the product of the dimensions before the axis), each the inputs'
 * blocks side by side. */
typedef struct sc_concat_geom {
    int n;
    int64_t outer, row;           /* rows, and elements per output row */
    int64_t block[SC_CONCAT_MAX]; /* input i's elements per row */
    int64_t off[SC_CONCAT_MAX];   /* where input i's block starts in a row */
} sc_concat_geom;

static inline sc_concat_geom sc_concat_geom_of(const sc_node *node)
{
    int axis = node->params.concat.axis;
    const sc_tensor *out = node->out;
    sc_concat_geom g; /* block[] and off[] past n stay unset */
    g.n = node->n_inputs;
    g.outer = 1;
    g.row = 0;
    int64_t inner = 1;
    for (int d = 0; d < axis; d++)
        g.outer *= out->shape[d];
    for (int d = axis + 1; d < out->ndim; d++)
        inner *= out->shape[d];
    for (int i = 0; i < g.n; i++) {
        g.off[i] = g.row;
        g.block[i] = node->in[i]->shape[axis] * inner;
        g.row += g.block[i];
    }
    return g;
}

/* layer norm over the last dimension, as both backends walk it:
 * x [rows, d], with weight and bias [d] or NULL. */
typedef struct sc_layer_norm_rows {
    int64_t rows, d;
    const float *w, *b; /* NULL when absent */
} sc_layer_norm_rows;

static inline sc_layer_norm_rows sc_layer_norm_rows_of(const sc_node *node)
{
    const sc_tensor *x = node->in[0];
    const sc_layer_norm_params *p = &node->params.layer_norm;
    sc_layer_norm_rows r;
    r.d = x->shape[x->ndim - 1];
    r.rows = r.d > 0 ? x->numel / r.d : 0;
    r.w = p->has_weight ? (const float *)node->in[1]->data : NULL;
    r.b = p->has_bias ? (const float *)node->in[1 + p->has_weight]->data : NULL;
    return r;
}

/* Shape-inference helpers shared by descriptors. */
sc_status sc_infer_same_as_input(const sc_node *node, sc_tensor *out);
sc_status sc_infer_scalar(const sc_node *node, sc_tensor *out);
/* sc_tensor_init of an output whose shape the op computed from its inputs'
 * sizes: one too large for int64_t is refused naming the op. */
sc_status sc_infer_output(const sc_node *node, sc_tensor *out, sc_dtype dtype, int ndim,
                          const int64_t *shape);
sc_status sc_check_f32(const sc_node *node, int input);
double sc_flops_none(const sc_node *node);

#endif
