/* scorch/plugin.h — plugin ABI v1: model and dataset plugins.
 *
 * A plugin is a shared object exporting one well-known constant struct:
 *
 *   SC_PLUGIN_EXPORT const sc_model_plugin scorch_model_plugin = {...};
 *   SC_PLUGIN_EXPORT const sc_dataset_plugin scorch_dataset_plugin = {...};
 *
 * Each struct starts with an sc_abi_header (SC_ABI_HEADER(type)). The host
 * refuses a plugin built for another ABI major, or for a newer minor than
 * it knows, or whose struct is smaller than that minor requires, or that
 * leaves a required function NULL. Minor versions only append fields.
 *
 * Vocabulary (from Scorch): a model plugin provides the Network (create,
 * destroy, forward) and its Socket (criterion, metrics, which parameters
 * train); a dataset plugin provides a DataSetIndex, opened once from
 * --dataset-path and shared, and a DataSet per split (len, getitem).
 *
 * Errors: every fallible call returns an sc_status and sets its message
 * with sc_error_set() (scorch/status.h); the host reports it with the
 * plugin's file and the function that failed. Plugins never exit() or
 * abort(). Ownership: what a plugin creates it destroys in the matching
 * destroy/close; tensors it receives belong to the host.
 * See docs/abi.md and docs/plugin-guide.md.
 */
#ifndef SCORCH_PLUGIN_H
#define SCORCH_PLUGIN_H

#include <stdbool.h>
#include <stdint.h>

#include "scorch/args.h"
#include "scorch/context.h"
#include "scorch/metrics.h"
#include "scorch/params.h"
#include "scorch/rng.h"
#include "scorch/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SC_ABI_MAJOR 1
#define SC_ABI_MINOR 2
#define SC_ABI_MAGIC 0x5343524bu /* "SCRK" */

#define SC_PLUGIN_EXPORT __attribute__((visibility("default")))

typedef struct sc_abi_header {
    uint32_t magic;
    uint16_t major;
    uint16_t minor;
    uint32_t size; /* sizeof the struct this header starts */
} sc_abi_header;

#define SC_ABI_HEADER(type) {SC_ABI_MAGIC, SC_ABI_MAJOR, SC_ABI_MINOR, (uint32_t)sizeof(type)}

enum { SC_MAX_IO = 8 };

/* A short list of tensors: a network's inputs or outputs, a sample's
 * inputs or targets. */
typedef struct sc_tensor_list {
    int n;
    sc_tensor *t[SC_MAX_IO];
} sc_tensor_list;

typedef enum sc_split {
    SC_SPLIT_TRAIN = 0,
    SC_SPLIT_VALID = 1,
    SC_SPLIT_TEST = 2,
    SC_SPLIT_COUNT
} sc_split;

const char *sc_split_name(sc_split split); /* "train", "valid", "test" */

/* The dtype and shape of one sample's tensor, without the batch dimension. */
typedef struct sc_tensor_spec {
    sc_dtype dtype;
    int ndim;
    int64_t shape[SC_MAX_DIMS];
} sc_tensor_spec;

typedef struct sc_sample_spec {
    int n_inputs, n_targets;
    sc_tensor_spec inputs[SC_MAX_IO];
    sc_tensor_spec targets[SC_MAX_IO];
} sc_sample_spec;

typedef enum sc_metric_mode {
    SC_METRIC_MAX = 0, /* higher is better (accuracy) */
    SC_METRIC_MIN = 1, /* lower is better (error, loss) */
} sc_metric_mode;

typedef struct sc_model_plugin {
    sc_abi_header abi;
    const char *name;
    const char *description;

    /* Network. create: builds the network for samples described by `data`,
     * adding its parameters to `params` and initialising them from
     * `init_rng`; *net receives the plugin's handle. Called once, on the
     * training thread. */
    sc_status (*network_create)(const sc_args *args, const sc_sample_spec *data,
                                sc_params *params, sc_rng *init_rng, void **net);
    void (*network_destroy)(void *net);
    /* forward: inputs are a batch ([N, ...sample shape]) on ctx's device;
     * fills `outputs` with step tensors made by ops on ctx.
     * sc_ctx_training(ctx) tells train from eval. */
    sc_status (*network_forward)(void *net, sc_ctx *ctx, const sc_tensor_list *inputs,
                                 sc_tensor_list *outputs);

    /* Socket. criterion: the scalar loss (mean over the batch) of the
     * outputs against the batch's targets, made with ops on ctx. */
    sc_status (*socket_criterion)(void *net, sc_ctx *ctx, const sc_tensor_list *outputs,
                                  const sc_tensor_list *targets, sc_tensor **loss);
    /* metrics: adds this batch's numerators and denominators to `metrics`
     * (scorch/metrics.h); must include the main metric. The tensors are
     * on the host, copies of a GPU's outputs. */
    sc_status (*socket_metrics)(void *net, const sc_tensor_list *outputs,
                                const sc_tensor_list *targets, sc_metrics *metrics);
    /* main_metric: the name of the metric that picks the best checkpoint
     * (and drives a plateau schedule), with *mode saying whether higher or
     * lower is better. A function of the network, since it may depend on
     * how it was created (a classifier or a regressor). */
    const char *(*socket_main_metric)(void *net, sc_metric_mode *mode);
    /* Optional (NULL: every parameter trains). False freezes a parameter. */
    bool (*socket_param_trains)(void *net, const char *param_name);

    /* ABI 1.1. Optional (NULL: cpu): the device the network prefers, in
     * --device's notation ("cuda", "auto", ...); --device overrides it. */
    const char *preferred_device;
} sc_model_plugin;

typedef struct sc_dataset_plugin {
    sc_abi_header abi;
    const char *name;
    const char *description;

    /* DataSetIndex: opened once from --dataset-path and --dataset-args,
     * shared by the three splits. */
    sc_status (*index_open)(const char *path, const sc_args *args, void **index);
    void (*index_close)(void *index);

    /* DataSet: one per split, alive while the index is. */
    sc_status (*dataset_open)(void *index, sc_split split, void **dataset);
    void (*dataset_close)(void *dataset);
    int64_t (*dataset_len)(void *dataset);
    /* Every sample of a dataset has this fixed dtype and shape. */
    void (*dataset_spec)(void *dataset, sc_sample_spec *spec);
    /* Writes sample i into the host's tensors (already shaped per the
     * spec; they are slices of the batch, so no copy is needed). `rng` is
     * the sample's own stream (seed, epoch, i), for augmentation.
     * Thread rule: called concurrently from loader threads, for different
     * i; must not modify shared state. */
    sc_status (*dataset_getitem)(void *dataset, int64_t i, sc_rng *rng,
                                 sc_tensor_list *inputs, sc_tensor_list *targets);
    /* Optional: a readable name for class `label` (for predictions). */
    const char *(*class_name)(void *index, int64_t label);
} sc_dataset_plugin;

#ifdef __cplusplus
}
#endif
#endif
