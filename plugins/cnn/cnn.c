/* cnn — a convolutional classifier for small images.
 *
 * Model args:
 *   channels=32:64     ':'-separated widths of the conv stages; stage k is
 *                      convK: conv3x3 (padding 1, no bias) -> batch norm ->
 *                      relu -> max pool 2x2
 *   hidden=128         ':'-separated widths of the hidden linear layers
 *                      after flattening, each followed by relu and dropout;
 *                      "hidden=" (empty) for none
 *   classes=10, dropout=0, label_smoothing=0
 *
 * With the defaults on [1, 28, 28]: conv1 1->32 [32, 14, 14], conv2
 * 32->64 [64, 7, 7], fc1 3136->128, fc2 128->10. Parameters:
 * convK.conv.weight, convK.bn.{weight,bias,running_mean,running_var},
 * fcK.{weight,bias}. Socket: cross-entropy, accuracy (main) and
 * top5_accuracy.
 */
#include <stdio.h>
#include <stdlib.h>

#include <scorch/nn.h>
#include <scorch/ops.h>
#include <scorch/plugin.h>

#include "../common/classifier.h"

enum { MAX_STAGES = 8, MAX_HIDDEN = 8 };

typedef struct cnn {
    classifier head; /* first: the socket functions read it */
    classifier_image image;
    int n_stages, n_fc;
    sc_nn_conv_bn stages[MAX_STAGES];
    sc_nn_linear fc[MAX_HIDDEN + 1];
} cnn;

typedef struct cnn_options {
    int n_stages, n_hidden;
    int64_t channels[MAX_STAGES], hidden[MAX_HIDDEN];
} cnn_options;

static const sc_pool2d_opts pool2 = {.kernel = {2, 2}};

static sc_status parse_options(cnn *net, const sc_args *args, cnn_options *o)
{
    static const char *const known[] = {"channels", "hidden", CLASSIFIER_ARGS, NULL};
    SC_TRY(sc_args_check_known(args, known));
    SC_TRY(classifier_parse(&net->head, "cnn", args));
    SC_TRY(classifier_positive_ints(args, "channels", (const int64_t[]){32, 64}, 2,
                                    o->channels, MAX_STAGES, &o->n_stages));
    SC_TRY(classifier_positive_ints(args, "hidden", (const int64_t[]){128}, 1, o->hidden,
                                    MAX_HIDDEN, &o->n_hidden));
    if (o->n_stages == 0)
        return sc_error_set(SC_ERR_INVALID, "model arg 'channels': cnn needs at least one "
                            "conv stage");
    return SC_OK;
}

/* convK: conv3x3-bn-relu; each stage's pooling halves the image. Sets
 * *features to what the last stage flattens to. */
static sc_status add_stages(cnn *net, const cnn_options *o, sc_params *params, sc_rng *rng,
                            int64_t *features)
{
    int64_t in = net->image.channels, h = net->image.height, w = net->image.width;
    for (int s = 0; s < o->n_stages; s++) {
        char name[16];
        snprintf(name, sizeof name, "conv%d", s + 1);
        SC_TRY(sc_nn_conv_bn_init(&net->stages[s], params, name,
                                  &(sc_nn_conv2d_config){.in = in, .out = o->channels[s],
                                                         .kernel = 3, .padding = 1},
                                  true, rng));
        in = o->channels[s];
        h /= 2;
        w /= 2;
    }
    if (h < 1 || w < 1)
        return sc_error_set(SC_ERR_INVALID, "model arg 'channels': %d stages of 2x2 pooling "
                            "shrink a %lldx%lld image to nothing", o->n_stages,
                            (long long)net->image.height, (long long)net->image.width);
    net->n_stages = o->n_stages;
    *features = in * h * w;
    return SC_OK;
}

/* fc1 .. fcL: features -> hidden... -> classes. */
static sc_status add_fc(cnn *net, const cnn_options *o, int64_t features, sc_params *params,
                        sc_rng *rng)
{
    net->n_fc = o->n_hidden + 1;
    for (int l = 0; l < net->n_fc; l++) {
        char name[16];
        int64_t out = l < o->n_hidden ? o->hidden[l] : net->head.classes;
        snprintf(name, sizeof name, "fc%d", l + 1);
        SC_TRY(sc_nn_linear_init(&net->fc[l], params, name, features, out, true, rng));
        features = out;
    }
    return SC_OK;
}

static sc_status build(cnn *net, const sc_args *args, const sc_sample_spec *data,
                       sc_params *params, sc_rng *rng)
{
    cnn_options o;
    int64_t features = 0;
    SC_TRY(parse_options(net, args, &o));
    SC_TRY(classifier_check_spec(&net->head, data, &net->image));
    SC_TRY(add_stages(net, &o, params, rng, &features));
    return add_fc(net, &o, features, params, rng);
}

static void cnn_network_destroy(void *handle)
{
    free(handle);
}

static sc_status cnn_network_create(const sc_args *args, const sc_sample_spec *data,
                                    sc_params *params, sc_rng *init_rng, void **out)
{
    *out = NULL;
    cnn *net = calloc(1, sizeof *net);
    if (!net)
        return sc_error_set(SC_ERR_NOMEM, "cnn: out of memory");
    sc_status st = build(net, args, data, params, init_rng);
    if (st != SC_OK) {
        free(net);
        return st;
    }
    *out = net;
    return SC_OK;
}

/* One summary row per stage (conv, bn, relu, pool) and per linear layer
 * (linear, relu, dropout). */
static sc_status cnn_network_forward(void *handle, sc_ctx *ctx, const sc_tensor_list *inputs,
                                     sc_tensor_list *outputs)
{
    const cnn *net = handle;
    SC_TRY(classifier_check_input(&net->head, &net->image, inputs));
    sc_tensor *h = inputs->t[0]; /* [N, C, H, W] */
    for (int s = 0; s < net->n_stages; s++) /* [N, C_s, H_s / 2, W_s / 2] */
        h = sc_nn_conv_bn_max_pool_forward(ctx, &net->stages[s], h, &pool2);
    h = sc_flatten(ctx, h); /* [N, D] */
    for (int l = 0; l < net->n_fc - 1; l++) {
        sc_ctx_push_scope(ctx, net->fc[l].name);
        h = sc_relu(ctx, sc_nn_linear_forward(ctx, &net->fc[l], h)); /* [N, H_l] */
        h = sc_dropout(ctx, h, net->head.dropout);
        sc_ctx_pop_scope(ctx);
    }
    h = sc_nn_linear_forward(ctx, &net->fc[net->n_fc - 1], h); /* [N, classes] */
    return classifier_output(h, outputs);
}

SC_PLUGIN_EXPORT const sc_model_plugin scorch_model_plugin = {
    .abi = SC_ABI_HEADER(sc_model_plugin),
    .name = "cnn",
    .description = "convolutional classifier: conv3x3-bn-relu-maxpool stages, then linear "
                   "layers",
    .network_create = cnn_network_create,
    .network_destroy = cnn_network_destroy,
    .network_forward = cnn_network_forward,
    .socket_criterion = classifier_criterion,
    .socket_metrics = classifier_metrics,
    .socket_main_metric = classifier_main_metric,
};
