/* gated — a model plugin: a two-layer classifier whose hidden layer is a
 * gated linear unit,
 *
 *   h = tanh(x V^T + b) * sigmoid(x G^T + c)    [N, H]
 *   y = h W^T + d                               [N, classes]
 *
 * The sigmoid gate lets each hidden unit switch itself off in part of the
 * input space, which helps one hidden layer carve out curved regions such
 * as spiral arms.
 * Model args: hidden (64), classes (the dataset's; 3 when it does not
 * say).
 * Parameters: value.weight [H, D], value.bias [H], gate.weight [H, D],
 * gate.bias [H], out.weight [classes, H], out.bias [classes].
 */
#include <stdlib.h>

#include <scorch/scorch.h>

typedef struct gated {
    sc_nn_linear value, gate, out;
} gated;

static sc_status check_spec(const sc_sample_spec *data)
{
    if (data->n_inputs < 1 || data->inputs[0].dtype != SC_F32)
        return sc_error_set(SC_ERR_INVALID, "gated: needs an f32 input");
    if (data->n_targets < 1 || data->targets[0].dtype == SC_F32 || data->targets[0].ndim != 0)
        return sc_error_set(SC_ERR_INVALID, "gated: needs a class index (integer, shape []) "
                            "as target");
    return SC_OK;
}

/* Network create: called once, on the training thread. The parameters go
 * into the host's store (the host owns them); the plugin keeps pointers. */
static sc_status gated_create(const sc_args *args, const sc_sample_spec *data,
                              sc_params *params, sc_rng *init_rng, void **net)
{
    *net = NULL;
    static const char *const known[] = {"hidden", "classes", NULL};
    int64_t hidden, classes, in = 1;
    /* The dataset's class count (ABI 1.4; 0 when it does not say) is the
     * default; a classes= that contradicts it would mislabel the targets. */
    int64_t given = sc_spec_classes(data);
    SC_TRY(sc_args_check_known(args, known));
    SC_TRY(sc_args_int(args, "hidden", 64, &hidden));
    SC_TRY(sc_args_int(args, "classes", given ? given : 3, &classes));
    if (hidden < 1 || classes < 2)
        return sc_error_set(SC_ERR_INVALID, "gated: needs hidden >= 1 and classes >= 2");
    if (given && classes != given)
        return sc_error_set(SC_ERR_INVALID, "gated: classes=%lld, but the dataset has %lld "
                            "classes", (long long)classes, (long long)given);
    SC_TRY(check_spec(data));
    for (int d = 0; d < data->inputs[0].ndim; d++)
        in *= data->inputs[0].shape[d];
    gated *g = calloc(1, sizeof *g);
    if (!g)
        return sc_error_set(SC_ERR_NOMEM, "gated: out of memory");
    sc_status st = sc_nn_linear_init(&g->value, params, "value", in, hidden, true, init_rng);
    if (st == SC_OK)
        st = sc_nn_linear_init(&g->gate, params, "gate", in, hidden, true, init_rng);
    if (st == SC_OK)
        st = sc_nn_linear_init(&g->out, params, "out", hidden, classes, true, init_rng);
    if (st != SC_OK) {
        free(g);
        return st;
    }
    *net = g;
    return SC_OK;
}

static void gated_destroy(void *net)
{
    free(net);
}

/* Forward: every tensor comes from ops on ctx (the step arena), so nothing
 * here is freed. Ops pass a NULL input through, so the chain is checked
 * once at the end; the failing op has already set the message. */
static sc_status gated_forward(void *net, sc_ctx *ctx, const sc_tensor_list *inputs,
                               sc_tensor_list *outputs)
{
    const gated *g = net;
    sc_tensor *x = sc_flatten(ctx, inputs->t[0]);                  /* [N, D] */
    sc_tensor *value = sc_tanh(ctx, sc_nn_linear_forward(ctx, &g->value, x));   /* [N, H] */
    sc_tensor *gate = sc_sigmoid(ctx, sc_nn_linear_forward(ctx, &g->gate, x));  /* [N, H] */
    sc_tensor *y = sc_nn_linear_forward(ctx, &g->out, sc_mul(ctx, value, gate)); /* [N, C] */
    if (!y)
        return SC_ERR_INVALID;
    outputs->n = 1;
    outputs->t[0] = y;
    return SC_OK;
}

/* Socket criterion: the mean loss over the batch, a scalar []. */
static sc_status gated_criterion(void *net, sc_ctx *ctx, const sc_tensor_list *outputs,
                                 const sc_tensor_list *targets, sc_tensor **loss)
{
    *loss = sc_cross_entropy(ctx, outputs->t[0], targets->t[0], 0.0f);
    return *loss ? SC_OK : SC_ERR_INVALID;
}

/* Socket metrics: numerators and denominators, summed by the host over the
 * whole split. */
static sc_status gated_metrics(void *net, const sc_tensor_list *outputs,
                               const sc_tensor_list *targets, sc_metrics *metrics)
{
    return sc_metrics_add_classification(metrics, outputs->t[0], targets->t[0]);
}

static const char *gated_main_metric(void *net, sc_metric_mode *mode)
{
    *mode = SC_METRIC_MAX;
    return "accuracy";
}

SC_PLUGIN_EXPORT const sc_model_plugin scorch_model_plugin = {
    .abi = SC_ABI_HEADER(sc_model_plugin),
    .name = "gated",
    .description = "two-layer classifier with a gated (tanh x sigmoid) hidden layer",
    .network_create = gated_create,
    .network_destroy = gated_destroy,
    .network_forward = gated_forward,
    .socket_criterion = gated_criterion,
    .socket_metrics = gated_metrics,
    .socket_main_metric = gated_main_metric,
    /* socket_param_trains left NULL: every parameter trains. */
};
