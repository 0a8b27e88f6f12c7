/* classifier.h — what the shipped image classifiers (cnn, resnet) share:
 * their common model args, the check of the sample spec, and the Socket:
 * cross-entropy with label smoothing, accuracy and top5_accuracy, with
 * accuracy the main metric.
 *
 * A network struct starts with a `classifier` member, so the socket
 * functions below go straight into the plugin's sc_model_plugin. Compiled
 * into each plugin (hidden visibility), not exported.
 */
#ifndef SCORCH_PLUGINS_CLASSIFIER_H
#define SCORCH_PLUGINS_CLASSIFIER_H

#include <scorch/plugin.h>

/* Model args every classifier takes: classes (>= 2; by default the
 * dataset's, classes.h), dropout (0) and label_smoothing (0), each of the
 * last two in [0, 1). */
#define CLASSIFIER_ARGS "classes", "dropout", "label_smoothing"

typedef struct classifier {
    const char *model; /* the plugin's name, for messages */
    int64_t classes;   /* classes= (0 when not given), then the logits */
    float dropout, label_smoothing;
} classifier;

/* The input image a classifier sees: f32 [C, H, W]. */
typedef struct classifier_image {
    int64_t channels, height, width;
} classifier_image;

/* Reads CLASSIFIER_ARGS into c; the class count is settled by
 * classifier_check_spec. */
sc_status classifier_parse(classifier *c, const char *model, const sc_args *args);

/* A ':'-separated list of positive integers for `key` ("channels=32:64"),
 * def (n_def values) when absent; at most max. */
sc_status classifier_positive_ints(const sc_args *args, const char *key,
                                   const int64_t *def, int n_def, int64_t *out, int max,
                                   int *n);

/* The dataset must give one f32 input [C, H, W] and an integer class
 * index (shape []) as target. Sets c->classes (classes_choose). */
sc_status classifier_check_spec(classifier *c, const sc_sample_spec *data,
                                classifier_image *image);

/* x must be [N, C, H, W] for the image the network was made for. */
sc_status classifier_check_input(const classifier *c, const classifier_image *image,
                                 const sc_tensor_list *inputs);

/* The network's result: outputs = {logits [N, classes]}; a NULL logits
 * (an op failed) returns that op's status. */
sc_status classifier_output(sc_tensor *logits, sc_tensor_list *outputs);

/* Socket functions; net points at a struct starting with a classifier. */
sc_status classifier_criterion(void *net, sc_ctx *ctx, const sc_tensor_list *outputs,
                               const sc_tensor_list *targets, sc_tensor **loss);
sc_status classifier_metrics(void *net, const sc_tensor_list *outputs,
                             const sc_tensor_list *targets, sc_metrics *metrics);
const char *classifier_main_metric(void *net, sc_metric_mode *mode);

#endif
