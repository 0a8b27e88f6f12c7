/* mlp — a multi-layer perceptron, as a classifier or as a regressor.
 *
 * Model args:
 *   hidden=256:128     ':'-separated hidden widths; "hidden=" (empty) gives
 *                      a linear model
 *   activation=relu    relu | tanh | gelu | sigmoid, after each hidden layer
 *   dropout=0          after each hidden activation, in training
 *   task=classification | regression
 *   classes            classification: the number of logits; by default
 *                      the dataset's (its spec, ABI 1.4), else 10
 *   label_smoothing=0  classification: for the cross-entropy
 *   freeze=            ':'-separated parameter-name prefixes that do not
 *                      train; a prefix ends at a dot, so "fc1" freezes
 *                      fc1.weight and fc1.bias but not fc10.weight
 *
 * The sample's first input, of any shape, is flattened: [N, ...] -> [N, D].
 * Layers fc1 .. fcL are linear (fcK.weight [OUT, IN], fcK.bias [OUT]).
 * Classification: logits [N, classes], cross-entropy against i64 class
 * indices, metrics accuracy (main) and top5_accuracy. Regression: outputs
 * [N, ...target shape] for an f32 target, mean squared error, metric mse.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <scorch/metrics.h>
#include <scorch/nn.h>
#include <scorch/ops.h>
#include <scorch/plugin.h>

#include "../common/classes.h"
#include "../common/spec.h"

enum { MAX_HIDDEN = 16 };

typedef sc_tensor *(*activation_fn)(sc_ctx *ctx, sc_tensor *x);

static const struct {
    const char *name;
    activation_fn fn;
} activations[] = {
    {"relu", sc_relu},
    {"tanh", sc_tanh},
    {"gelu", sc_gelu},
    {"sigmoid", sc_sigmoid},
};

typedef struct mlp_options {
    int n_hidden;
    int64_t hidden[MAX_HIDDEN];
    activation_fn activation;
    double dropout, label_smoothing;
    bool regression;
    int64_t classes;    /* classes=, 0 when not given */
    const char *freeze; /* into the args; NULL when absent */
} mlp_options;

typedef struct mlp {
    int n_layers; /* hidden layers + the output layer */
    sc_nn_linear layers[MAX_HIDDEN + 1];
    int64_t in_features;
    activation_fn activation;
    float dropout, label_smoothing;
    bool regression;
    sc_tensor_spec target; /* regression: the output shape per sample */
    char *freeze;          /* a copy of the freeze arg, or NULL */
} mlp;

/* ---- model args ---- */

static sc_status parse_hidden(const sc_args *args, mlp_options *o)
{
    if (!sc_args_get(args, "hidden")) {
        o->n_hidden = 2;
        o->hidden[0] = 256;
        o->hidden[1] = 128;
        return SC_OK;
    }
    SC_TRY(sc_args_ints(args, "hidden", o->hidden, MAX_HIDDEN, &o->n_hidden));
    for (int l = 0; l < o->n_hidden; l++)
        if (o->hidden[l] < 1)
            return sc_error_set(SC_ERR_INVALID, "model arg 'hidden': width %lld of hidden "
                                "layer %d is not positive", (long long)o->hidden[l], l + 1);
    return SC_OK;
}

static sc_status parse_activation(const sc_args *args, activation_fn *fn)
{
    const char *v = sc_args_get(args, "activation");
    if (!v)
        v = "relu";
    for (size_t k = 0; k < sizeof activations / sizeof *activations; k++)
        if (strcmp(v, activations[k].name) == 0) {
            *fn = activations[k].fn;
            return SC_OK;
        }
    return sc_error_set(SC_ERR_INVALID, "model arg 'activation': '%s' is not relu, tanh, "
                        "gelu or sigmoid", v);
}

static sc_status parse_task(const sc_args *args, bool *regression)
{
    const char *v = sc_args_get(args, "task");
    *regression = v && strcmp(v, "regression") == 0;
    if (v && !*regression && strcmp(v, "classification") != 0)
        return sc_error_set(SC_ERR_INVALID, "model arg 'task': '%s' is not classification "
                            "or regression", v);
    return SC_OK;
}

/* A probability-like arg in [0, 1). */
static sc_status parse_fraction(const sc_args *args, const char *key, double *out)
{
    SC_TRY(sc_args_float(args, key, 0.0, out));
    if (!(*out >= 0.0 && *out < 1.0))
        return sc_error_set(SC_ERR_INVALID, "model arg '%s': %g is outside [0, 1)", key, *out);
    return SC_OK;
}

/* Classification-only args are refused for regression, not ignored. */
static sc_status check_regression_args(const sc_args *args)
{
    static const char *const classification_only[] = {"classes", "label_smoothing"};
    for (size_t k = 0; k < sizeof classification_only / sizeof *classification_only; k++)
        if (sc_args_get(args, classification_only[k]))
            return sc_error_set(SC_ERR_INVALID, "model arg '%s' does not apply to "
                                "task=regression", classification_only[k]);
    return SC_OK;
}

static sc_status parse_options(const sc_args *args, mlp_options *o)
{
    static const char *const known[] = {"hidden", "activation", "dropout", "task", "classes",
                                        "label_smoothing", "freeze", NULL};
    SC_TRY(sc_args_check_known(args, known));
    SC_TRY(parse_hidden(args, o));
    SC_TRY(parse_activation(args, &o->activation));
    SC_TRY(parse_fraction(args, "dropout", &o->dropout));
    SC_TRY(parse_task(args, &o->regression));
    if (o->regression)
        SC_TRY(check_regression_args(args));
    SC_TRY(parse_fraction(args, "label_smoothing", &o->label_smoothing));
    SC_TRY(sc_args_int(args, "classes", 0, &o->classes));
    if (sc_args_get(args, "classes") && o->classes < 2)
        return sc_error_set(SC_ERR_INVALID, "model arg 'classes': %lld is below 2",
                            (long long)o->classes);
    o->freeze = sc_args_get(args, "freeze");
    return SC_OK;
}

/* ---- freezing by name prefix ---- */

/* Steps through a ':'-separated list: the next prefix and its length
 * (0 for an empty one); false at the end. */
static bool next_prefix(const char **list, const char **prefix, size_t *len)
{
    if (!*list || !**list)
        return false;
    *prefix = *list;
    *len = strcspn(*list, ":");
    *list += *len + ((*list)[*len] == ':');
    return true;
}

/* "fc1" and "fc1." match "fc1.weight"; "fc1" does not match "fc10.weight". */
static bool prefix_matches(const char *prefix, size_t len, const char *name)
{
    return strncmp(name, prefix, len) == 0 &&
           (name[len] == '\0' || name[len] == '.' || prefix[len - 1] == '.');
}

static bool is_frozen(const char *freeze, const char *name)
{
    const char *prefix;
    size_t len;
    for (const char *list = freeze; next_prefix(&list, &prefix, &len);)
        if (len > 0 && prefix_matches(prefix, len, name))
            return true;
    return false;
}

/* Every prefix must name some parameter: a misspelt one is an error. */
static sc_status check_freeze(const char *freeze, const sc_params *params)
{
    const char *prefix;
    size_t len;
    for (const char *list = freeze; next_prefix(&list, &prefix, &len);) {
        if (len == 0)
            return sc_error_set(SC_ERR_INVALID, "model arg 'freeze': empty name in '%s'",
                                freeze);
        bool used = false;
        for (int i = 0; i < sc_params_count(params) && !used; i++)
            used = prefix_matches(prefix, len, sc_params_at(params, i)->name);
        if (!used)
            return sc_error_set(SC_ERR_INVALID, "model arg 'freeze': '%.*s' names no "
                                "parameter (they are fc1.weight, fc1.bias, fc2.weight, ...)",
                                (int)len, prefix);
    }
    return SC_OK;
}

/* ---- Network ---- */

static sc_status check_input(mlp *net, const sc_sample_spec *data)
{
    char s[128];
    if (data->n_inputs < 1)
        return sc_error_set(SC_ERR_INVALID, "mlp needs an input, the dataset gives none");
    if (data->inputs[0].dtype != SC_F32)
        return sc_error_set(SC_ERR_INVALID, "mlp needs an f32 input, the dataset gives %s",
                            spec_str(&data->inputs[0], s, sizeof s));
    net->in_features = 1;
    for (int d = 0; d < data->inputs[0].ndim; d++)
        net->in_features *= data->inputs[0].shape[d];
    if (net->in_features == 0)
        return sc_error_set(SC_ERR_INVALID, "mlp: the dataset's input %s is empty",
                            spec_str(&data->inputs[0], s, sizeof s));
    return SC_OK;
}

/* The target decides the output width: the class count (classes.h), or
 * the f32 target's element count for regression. */
static sc_status check_target(mlp *net, const sc_sample_spec *data, const mlp_options *o,
                              int64_t *out_features)
{
    char s[128];
    const sc_tensor_spec *t = data->n_targets > 0 ? &data->targets[0] : NULL;
    if (!o->regression) {
        if (t && t->dtype != SC_F32 && t->ndim == 0)
            return classes_choose("mlp", o->classes, data, out_features);
        return sc_error_set(SC_ERR_INVALID, "mlp: task=classification needs an integer class "
                            "index (shape []) as target, the dataset gives %s; for f32 "
                            "targets use task=regression",
                            t ? spec_str(t, s, sizeof s) : "none");
    }
    if (!t || t->dtype != SC_F32 || t->ndim >= SC_MAX_DIMS)
        return sc_error_set(SC_ERR_INVALID, "mlp: task=regression needs an f32 target, the "
                            "dataset gives %s", t ? spec_str(t, s, sizeof s) : "none");
    net->target = *t;
    *out_features = 1;
    for (int d = 0; d < t->ndim; d++)
        *out_features *= t->shape[d];
    return SC_OK;
}

/* fc1 .. fcL: D -> hidden... -> out_features. */
static sc_status add_layers(mlp *net, const mlp_options *o, int64_t out_features,
                            sc_params *params, sc_rng *rng)
{
    int64_t width[MAX_HIDDEN + 2];
    width[0] = net->in_features;
    memcpy(width + 1, o->hidden, (size_t)o->n_hidden * sizeof *width);
    width[o->n_hidden + 1] = out_features;
    net->n_layers = o->n_hidden + 1;
    for (int l = 0; l < net->n_layers; l++) {
        char name[16];
        snprintf(name, sizeof name, "fc%d", l + 1);
        SC_TRY(sc_nn_linear_init(&net->layers[l], params, name, width[l], width[l + 1], true,
                                 rng));
    }
    return SC_OK;
}

static sc_status configure(mlp *net, const mlp_options *o)
{
    net->activation = o->activation;
    net->dropout = (float)o->dropout;
    net->label_smoothing = (float)o->label_smoothing;
    net->regression = o->regression;
    if (o->freeze && *o->freeze && !(net->freeze = strdup(o->freeze)))
        return sc_error_set(SC_ERR_NOMEM, "mlp: out of memory");
    return SC_OK;
}

static void mlp_network_destroy(void *handle)
{
    mlp *net = handle;
    if (!net)
        return;
    free(net->freeze);
    free(net);
}

static sc_status mlp_network_create(const sc_args *args, const sc_sample_spec *data,
                                    sc_params *params, sc_rng *init_rng, void **out)
{
    *out = NULL;
    mlp_options o;
    SC_TRY(parse_options(args, &o));
    mlp *net = calloc(1, sizeof *net);
    if (!net)
        return sc_error_set(SC_ERR_NOMEM, "mlp: out of memory");
    int64_t out_features = 0;
    sc_status st = configure(net, &o);
    if (st == SC_OK)
        st = check_input(net, data);
    if (st == SC_OK)
        st = check_target(net, data, &o, &out_features);
    if (st == SC_OK)
        st = add_layers(net, &o, out_features, params, init_rng);
    if (st == SC_OK)
        st = check_freeze(net->freeze, params);
    if (st != SC_OK) {
        mlp_network_destroy(net);
        return st;
    }
    *out = net;
    return SC_OK;
}

/* Ops return NULL after setting the message; they carry no status code. */
static sc_status op_status(const sc_tensor *t)
{
    return t ? SC_OK : SC_ERR_INVALID;
}

static sc_status mlp_network_forward(void *handle, sc_ctx *ctx, const sc_tensor_list *inputs,
                                     sc_tensor_list *outputs)
{
    const mlp *net = handle;
    if (inputs->n < 1)
        return sc_error_set(SC_ERR_INVALID, "mlp: forward got no input");
    sc_tensor *x = inputs->t[0]; /* [N, ...] */
    if (x->ndim < 1 || x->numel != x->shape[0] * net->in_features) {
        char s[96];
        return sc_error_set(SC_ERR_INVALID, "mlp: input %s does not hold %lld values per "
                            "sample", sc_shape_str(x->ndim, x->shape, s, sizeof s),
                            (long long)net->in_features);
    }
    sc_tensor *h = sc_flatten(ctx, x); /* [N, D] */
    for (int l = 0; l < net->n_layers - 1; l++) {
        h = net->activation(ctx, sc_nn_linear_forward(ctx, &net->layers[l], h)); /* [N, H] */
        h = sc_dropout(ctx, h, net->dropout);
    }
    h = sc_nn_linear_forward(ctx, &net->layers[net->n_layers - 1], h); /* [N, OUT] */
    if (net->regression) {
        int64_t shape[SC_MAX_DIMS] = {-1};
        memcpy(shape + 1, net->target.shape, (size_t)net->target.ndim * sizeof *shape);
        h = sc_reshape(ctx, h, 1 + net->target.ndim, shape); /* [N, ...target] */
    }
    SC_TRY(op_status(h));
    outputs->n = 1;
    outputs->t[0] = h;
    return SC_OK;
}

/* ---- Socket ---- */

static sc_status mlp_socket_criterion(void *handle, sc_ctx *ctx, const sc_tensor_list *outputs,
                                      const sc_tensor_list *targets, sc_tensor **loss)
{
    const mlp *net = handle;
    sc_tensor *y = outputs->t[0], *target = targets->t[0];
    *loss = net->regression ? sc_mse(ctx, y, target)
                            : sc_cross_entropy(ctx, y, target, net->label_smoothing);
    return op_status(*loss); /* [] */
}

/* "mse": the sum of squared errors over the number of elements. */
static sc_status add_squared_error(sc_metrics *m, const sc_tensor *y, const sc_tensor *target)
{
    if (y->dtype != SC_F32 || target->dtype != SC_F32 || y->numel != target->numel)
        return sc_error_set(SC_ERR_INVALID, "mlp: mse needs f32 outputs and targets of one "
                            "size, got %lld and %lld elements", (long long)y->numel,
                            (long long)target->numel);
    const float *a = sc_tensor_f32(y), *b = sc_tensor_f32(target);
    double sse = 0.0;
    for (int64_t i = 0; i < y->numel; i++) {
        double d = (double)a[i] - b[i];
        sse += d * d;
    }
    return sc_metrics_add(m, "mse", sse, (double)y->numel);
}

static sc_status mlp_socket_metrics(void *handle, const sc_tensor_list *outputs,
                                    const sc_tensor_list *targets, sc_metrics *metrics)
{
    const mlp *net = handle;
    if (net->regression)
        return add_squared_error(metrics, outputs->t[0], targets->t[0]);
    return sc_metrics_add_classification(metrics, outputs->t[0], targets->t[0]);
}

/* Accuracy for a classifier, mean squared error for a regressor. */
static const char *mlp_socket_main_metric(void *handle, sc_metric_mode *mode)
{
    const mlp *net = handle;
    *mode = net->regression ? SC_METRIC_MIN : SC_METRIC_MAX;
    return net->regression ? "mse" : "accuracy";
}

static bool mlp_socket_param_trains(void *handle, const char *param_name)
{
    const mlp *net = handle;
    return !is_frozen(net->freeze, param_name);
}

SC_PLUGIN_EXPORT const sc_model_plugin scorch_model_plugin = {
    .abi = SC_ABI_HEADER(sc_model_plugin),
    .name = "mlp",
    .description = "multi-layer perceptron: classifier (default) or regressor (task=regression)",
    .network_create = mlp_network_create,
    .network_destroy = mlp_network_destroy,
    .network_forward = mlp_network_forward,
    .socket_criterion = mlp_socket_criterion,
    .socket_metrics = mlp_socket_metrics,
    .socket_main_metric = mlp_socket_main_metric,
    .socket_param_trains = mlp_socket_param_trains,
};
