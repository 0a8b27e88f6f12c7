/* resnet — a small residual network for small images (28x28 and the like).
 *
 * Model args:
 *   stem=32            width of the stem: conv3x3 (padding 1) -> batch
 *                      norm -> relu, at full resolution
 *   channels=32:64:128 ':'-separated stage widths; every stage after the
 *                      first halves the resolution (its first block has
 *                      stride 2 and a 1x1 projection shortcut)
 *   blocks=2           residual blocks per stage: one value for every
 *                      stage, or one per stage ("blocks=1:2:2")
 *   se=false           squeeze-and-excitation in every block
 *   reduction=16       the SE blocks' reduction ratio r
 *   classes=10, dropout=0 (before the classifier), label_smoothing=0
 *
 * After the stages: global average pool -> linear to the classes.
 * Parameters: stem.*, stage<S>.<B>.{conv1,conv2,shortcut,se}.*, fc.*
 * (scorch/nn.h names the parts). Socket: cross-entropy, accuracy (main)
 * and top5_accuracy.
 */
#include <stdio.h>
#include <stdlib.h>

#include <scorch/nn.h>
#include <scorch/ops.h>
#include <scorch/plugin.h>

#include "../common/classifier.h"

enum { MAX_STAGES = 6, MAX_BLOCKS = 64 };

typedef struct resnet {
    classifier head; /* first: the socket functions read it */
    classifier_image image;
    sc_nn_conv_bn stem;
    int n_blocks;
    sc_nn_residual blocks[MAX_BLOCKS];
    sc_nn_linear fc;
} resnet;

typedef struct resnet_options {
    int64_t stem;
    int n_stages;
    int64_t channels[MAX_STAGES], blocks[MAX_STAGES];
    int64_t se_reduction; /* 0: no SE */
} resnet_options;

/* "blocks": one count for every stage, or one per stage. */
static sc_status parse_blocks(const sc_args *args, resnet_options *o)
{
    int n;
    SC_TRY(classifier_positive_ints(args, "blocks", (const int64_t[]){2}, 1, o->blocks,
                                    MAX_STAGES, &n));
    if (n == 1)
        for (int s = 1; s < o->n_stages; s++)
            o->blocks[s] = o->blocks[0];
    else if (n != o->n_stages)
        return sc_error_set(SC_ERR_INVALID, "model arg 'blocks': %d counts for %d stages "
                            "(give one, or one per stage)", n, o->n_stages);
    int64_t total = 0;
    for (int s = 0; s < o->n_stages; s++)
        total += o->blocks[s];
    if (total > MAX_BLOCKS)
        return sc_error_set(SC_ERR_INVALID, "model arg 'blocks': %lld blocks in all, more "
                            "than %d", (long long)total, MAX_BLOCKS);
    return SC_OK;
}

static sc_status parse_se(const sc_args *args, resnet_options *o)
{
    bool se;
    SC_TRY(sc_args_bool(args, "se", false, &se));
    SC_TRY(sc_args_int(args, "reduction", 16, &o->se_reduction));
    if (o->se_reduction < 1)
        return sc_error_set(SC_ERR_INVALID, "model arg 'reduction': %lld is not positive",
                            (long long)o->se_reduction);
    if (!se && sc_args_get(args, "reduction"))
        return sc_error_set(SC_ERR_INVALID, "model arg 'reduction' needs se=true");
    if (!se)
        o->se_reduction = 0;
    return SC_OK;
}

static sc_status parse_options(resnet *net, const sc_args *args, resnet_options *o)
{
    static const char *const known[] = {"stem",      "channels", "blocks", "se",
                                        "reduction", CLASSIFIER_ARGS, NULL};
    SC_TRY(sc_args_check_known(args, known));
    SC_TRY(classifier_parse(&net->head, "resnet", args));
    SC_TRY(sc_args_int(args, "stem", 32, &o->stem));
    if (o->stem < 1)
        return sc_error_set(SC_ERR_INVALID, "model arg 'stem': width %lld is not positive",
                            (long long)o->stem);
    SC_TRY(classifier_positive_ints(args, "channels", (const int64_t[]){32, 64, 128}, 3,
                                    o->channels, MAX_STAGES, &o->n_stages));
    if (o->n_stages == 0)
        return sc_error_set(SC_ERR_INVALID, "model arg 'channels': resnet needs at least one "
                            "stage");
    SC_TRY(parse_blocks(args, o));
    return parse_se(args, o);
}

/* stage<S>.<B>: the first block of every stage after the first strides. */
static sc_status add_stages(resnet *net, const resnet_options *o, sc_params *params,
                            sc_rng *rng)
{
    int64_t in = o->stem;
    for (int s = 0; s < o->n_stages; s++) {
        for (int b = 0; b < o->blocks[s]; b++) {
            char name[32];
            snprintf(name, sizeof name, "stage%d.%d", s + 1, b);
            SC_TRY(sc_nn_residual_init(&net->blocks[net->n_blocks++], params, name, in,
                                       o->channels[s], s > 0 && b == 0 ? 2 : 1,
                                       o->se_reduction, rng));
            in = o->channels[s];
        }
    }
    return sc_nn_linear_init(&net->fc, params, "fc", in, net->head.classes, true, rng);
}

static sc_status build(resnet *net, const sc_args *args, const sc_sample_spec *data,
                       sc_params *params, sc_rng *rng)
{
    resnet_options o;
    SC_TRY(parse_options(net, args, &o));
    SC_TRY(classifier_check_spec(&net->head, data, &net->image));
    SC_TRY(sc_nn_conv_bn_init(&net->stem, params, "stem",
                              &(sc_nn_conv2d_config){.in = net->image.channels, .out = o.stem,
                                                     .kernel = 3, .padding = 1},
                              true, rng));
    return add_stages(net, &o, params, rng);
}

static void resnet_network_destroy(void *handle)
{
    free(handle);
}

static sc_status resnet_network_create(const sc_args *args, const sc_sample_spec *data,
                                       sc_params *params, sc_rng *init_rng, void **out)
{
    *out = NULL;
    resnet *net = calloc(1, sizeof *net);
    if (!net)
        return sc_error_set(SC_ERR_NOMEM, "resnet: out of memory");
    sc_status st = build(net, args, data, params, init_rng);
    if (st != SC_OK) {
        free(net);
        return st;
    }
    *out = net;
    return SC_OK;
}

static sc_status resnet_network_forward(void *handle, sc_ctx *ctx,
                                        const sc_tensor_list *inputs, sc_tensor_list *outputs)
{
    const resnet *net = handle;
    SC_TRY(classifier_check_input(&net->head, &net->image, inputs));
    sc_tensor *h = sc_nn_conv_bn_forward(ctx, &net->stem, inputs->t[0]); /* [N, STEM, H, W] */
    for (int b = 0; b < net->n_blocks; b++)
        h = sc_nn_residual_forward(ctx, &net->blocks[b], h); /* [N, C_s, H_s, W_s] */
    sc_ctx_push_scope(ctx, net->fc.name);
    h = sc_global_avg_pool(ctx, h); /* [N, C] */
    h = sc_dropout(ctx, h, net->head.dropout);
    h = sc_nn_linear_forward(ctx, &net->fc, h); /* [N, classes] */
    sc_ctx_pop_scope(ctx);
    return classifier_output(h, outputs);
}

SC_PLUGIN_EXPORT const sc_model_plugin scorch_model_plugin = {
    .abi = SC_ABI_HEADER(sc_model_plugin),
    .name = "resnet",
    .description = "small residual network: conv stem, stages of residual blocks (optional "
                   "SE), global average pool, linear",
    .network_create = resnet_network_create,
    .network_destroy = resnet_network_destroy,
    .network_forward = resnet_network_forward,
    .socket_criterion = classifier_criterion,
    .socket_metrics = classifier_metrics,
    .socket_main_metric = classifier_main_metric,
};
