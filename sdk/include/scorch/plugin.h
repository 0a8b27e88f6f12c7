/* scorch/plugin.h — plugin ABI v1: model and dataset plugins.
 *
 * A plugin is a shared object exporting one well-known constant struct:
 *
 *   SC_PLUGIN_EXPORT const sc_model_plugin scorch_model_plugin = {...};
 *   SC_PLUGIN_EXPORT const sc_dataset_plugin scorch_dataset_plugin = {...};
 *
 * Each struct starts with an sc_abi_header (SC_ABI_HEADER(type)). The host
 * refuses a plugin built for another ABI major, or for a newer minor than
 * it knows, or whose struct is smaller than that minor requires (each
 * minor has its own size: the end of the last field it defines), or that
 * leaves a required function NULL. Minor versions only append fields; the
 * host reads an appended field only from a struct whose size holds it.
 * Since ABI 1.3 the host tells the plugin who it is (sc_host()), so a
 * plugin built against newer headers can declare an older minor
 * (SC_ABI_HEADER_MIN) and use only what the host has.
 *
 * Thread tags: each callback names the thread the host calls it on.
 *   [training-thread]  the thread that opened the run and runs its steps,
 *                      one call at a time (with --replicas: each replica's
 *                      own, for the objects that replica created)
 *   [loader-thread]    a data-loader worker, concurrently with the other
 *                      workers and the training thread (--workers 0: the
 *                      training thread itself)
 *   [control-thread]   the live-control thread, concurrently with training
 *                      (user functions, scorch/user_funcs.h)
 *   [any-thread]       any thread of the program using the plugin,
 *                      concurrently with itself and with every call on the
 *                      same objects but their open and close (ABI 1.4)
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
#include <stddef.h>
#include <stdint.h>

#include "scorch/args.h"
#include "scorch/context.h"
#include "scorch/export.h"
#include "scorch/metrics.h"
#include "scorch/params.h"
#include "scorch/rng.h"
#include "scorch/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SC_ABI_MAJOR 1
#define SC_ABI_MINOR 4
#define SC_ABI_MAGIC 0x5343524bu /* "SCRK" */

#define SC_PLUGIN_EXPORT __attribute__((visibility("default")))

typedef struct sc_abi_header {
    uint32_t magic;
    uint16_t major;
    uint16_t minor;
    uint32_t size; /* sizeof the struct this header starts */
} sc_abi_header;

#define SC_ABI_HEADER(type) {SC_ABI_MAGIC, SC_ABI_MAJOR, SC_ABI_MINOR, (uint32_t)sizeof(type)}

/* ABI 1.3. The header of a plugin built against these headers that also
 * runs on older hosts, back to minor `oldest` (3 or more: sc_host() and
 * the hook actions' header came with 1.3). Its struct keeps its full size,
 * whose newer fields an older host does not read; the plugin asks sc_host()
 * (a hook: actions->abi) which minor the host speaks and uses nothing
 * newer. A constant `oldest` below 3 does not compile. */
#define SC_ABI_HEADER_MIN(type, oldest)                                                   \
    {SC_ABI_MAGIC, SC_ABI_MAJOR, (uint16_t)(sizeof(char[(oldest) >= 3 ? 1 : -1]) * (oldest)), \
     (uint32_t)sizeof(type)}

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

SC_API const char *sc_split_name(sc_split split); /* "train", "valid", "test" */
/* The split a name names ("train", "valid", "test") into *out; another
 * name is an error saying which are. */
SC_API sc_status sc_split_parse(const char *name, sc_split *out);

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
    /* ABI 1.4. The number of classes of a classifier's target (class
     * indices 0..classes-1), 0 when the targets are no class indices or
     * the dataset does not say. The host zeroes the spec before
     * dataset_spec, so a dataset built for an older minor gives 0. An
     * older host's spec ends before the field: a model reads it with
     * sc_spec_classes, and a dataset declaring an older minor
     * (SC_ABI_HEADER_MIN) writes it only for a host of 1.4 or later. */
    int64_t classes;
} sc_sample_spec;

/* ABI 1.4. One raw input for index_decode: a file, or bytes in memory.
 * Later minors may append fields; the host fills the struct, so a plugin
 * reads an appended field only from a host of that minor (sc_host() during
 * index_open tells it; keep it in the index). */
typedef struct sc_raw_input {
    const char *path;       /* the file to read; NULL when `bytes` hold the input */
    const void *bytes;      /* the input itself when path is NULL */
    size_t size;            /* bytes at `bytes` */
    const char *media_type; /* what the input is ("image/png", "text/csv"), or NULL:
                               unknown, the plugin tells from the content */
} sc_raw_input;

typedef enum sc_metric_mode {
    SC_METRIC_MAX = 0, /* higher is better (accuracy) */
    SC_METRIC_MIN = 1, /* lower is better (error, loss) */
} sc_metric_mode;

/* ABI 1.3. Who the host is, for a plugin that adapts to it (a plugin built
 * against newer headers than the host's, SC_ABI_HEADER_MIN). Later minors
 * append fields: read one only when abi.size holds it. */
typedef struct sc_host_info {
    sc_abi_header abi;          /* SC_ABI_HEADER(sc_host_info) as the host was built:
                                   abi.minor is the minor the host speaks */
    const char *version;        /* scorch's version ("0.1.0") */
    sc_device_kind device_kind; /* what the run computes on: SC_DEVICE_CPU or
                                   SC_DEVICE_CUDA */
} sc_host_info;

/* ABI 1.3. The host calling the plugin: set during index_open,
 * dataset_open and network_create (and the calls the host makes while
 * creating: dataset_spec, socket_main_metric, socket_param_trains), on the
 * thread making the call; copy what you keep. NULL at any other time. */
SC_API const sc_host_info *sc_host(void);

/* ABI 1.4. The spec's number of classes as a model may read it during
 * network_create: spec->classes from a host that speaks 1.4 or later, 0
 * from an older one (whose spec ends before the field) and wherever
 * sc_host() is NULL. Inline, so a plugin using it still loads on a 1.3
 * host. */
static inline int64_t sc_spec_classes(const sc_sample_spec *spec)
{
    const sc_host_info *host = sc_host();
    return host && host->abi.minor >= 4 ? spec->classes : 0;
}

typedef struct sc_model_plugin {
    sc_abi_header abi;
    const char *name;
    const char *description;

    /* [training-thread] Network. create: builds the network for samples
     * described by `data`, adding its parameters to `params` and
     * initialising them from `init_rng`; *net receives the plugin's
     * handle. Called once, after the dataset is open; sc_host() is set. */
    sc_status (*network_create)(const sc_args *args, const sc_sample_spec *data,
                                sc_params *params, sc_rng *init_rng, void **net);
    /* [training-thread] Frees what create made (not the parameters). */
    void (*network_destroy)(void *net);
    /* [training-thread] forward: inputs are a batch ([N, ...sample shape])
     * on ctx's device; fills `outputs` with step tensors made by ops on
     * ctx. sc_ctx_training(ctx) tells train from eval. */
    sc_status (*network_forward)(void *net, sc_ctx *ctx, const sc_tensor_list *inputs,
                                 sc_tensor_list *outputs);

    /* [training-thread] Socket. criterion: the scalar loss (mean over the
     * batch) of the outputs against the batch's targets, made with ops on
     * ctx. */
    sc_status (*socket_criterion)(void *net, sc_ctx *ctx, const sc_tensor_list *outputs,
                                  const sc_tensor_list *targets, sc_tensor **loss);
    /* [training-thread] metrics: adds this batch's numerators and
     * denominators to `metrics` (scorch/metrics.h); must include the main
     * metric. The tensors are on the host, copies of a GPU's outputs. */
    sc_status (*socket_metrics)(void *net, const sc_tensor_list *outputs,
                                const sc_tensor_list *targets, sc_metrics *metrics);
    /* [training-thread] main_metric: the name of the metric that picks the
     * best checkpoint (and drives a plateau schedule), with *mode saying
     * whether higher or lower is better. A function of the network, since
     * it may depend on how it was created (a classifier or a regressor). */
    const char *(*socket_main_metric)(void *net, sc_metric_mode *mode);
    /* [training-thread] Optional (NULL: every parameter trains). False
     * freezes a parameter. */
    bool (*socket_param_trains)(void *net, const char *param_name);

    /* ABI 1.1. Optional (NULL: cpu): the device the network prefers, in
     * --device's notation ("cuda", "auto", ...); --device overrides it. */
    const char *preferred_device;
} sc_model_plugin;

typedef struct sc_dataset_plugin {
    sc_abi_header abi;
    const char *name;
    const char *description;

    /* [training-thread] DataSetIndex: opened once from --dataset-path and
     * --dataset-args, shared by the three splits; sc_host() is set. Closed
     * last, after every DataSet. */
    sc_status (*index_open)(const char *path, const sc_args *args, void **index);
    void (*index_close)(void *index);

    /* [training-thread] DataSet: one per split, alive while the index is;
     * sc_host() is set during dataset_open. */
    sc_status (*dataset_open)(void *index, sc_split split, void **dataset);
    void (*dataset_close)(void *dataset);
    /* [training-thread] The split's number of samples; cheap. */
    int64_t (*dataset_len)(void *dataset);
    /* [training-thread] Every sample of a dataset has this fixed dtype and
     * shape; cheap. */
    void (*dataset_spec)(void *dataset, sc_sample_spec *spec);
    /* [loader-thread] Writes sample i into the host's tensors (already
     * shaped per the spec; they are slices of the batch, so no copy is
     * needed). `rng` is the sample's own stream (seed, epoch, i), for
     * augmentation. Called concurrently, for different i: read the index
     * and DataSet, modify no shared state. */
    sc_status (*dataset_getitem)(void *dataset, int64_t i, sc_rng *rng,
                                 sc_tensor_list *inputs, sc_tensor_list *targets);
    /* [training-thread] Optional: a readable name for class `label` (for
     * predictions). */
    const char *(*class_name)(void *index, int64_t label);

    /* ABI 1.4. [any-thread] Optional (NULL: the dataset takes no raw
     * inputs): turns one raw input into a sample's inputs, preprocessed as
     * dataset_getitem preprocesses the test split's (the same scaling, the
     * index's statistics, no augmentation). The host's tensors are shaped
     * per the spec, as getitem's are; write them in place. Called
     * concurrently, from any thread, for different inputs: read the
     * index, modify no shared state. A bad input (unreadable, not of a
     * kind the dataset takes, the wrong size) is an error naming what is
     * wrong, and the file of a path (as sc_image_read_raw and
     * sc_csv_read_row do); the host names bytes' input itself. */
    sc_status (*index_decode)(void *index, const sc_raw_input *raw, sc_tensor_list *inputs);
} sc_dataset_plugin;

#ifdef __cplusplus
}
#endif
#endif
