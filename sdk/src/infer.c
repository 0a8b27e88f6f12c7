/* infer.c — a trained model inside the caller's program (scorch/infer.h).
 *
 * sc_infer_open does what scorch-test does before it evaluates, minus all
 * that training needs: it reads the checkpoint (scorch/serialize.h), takes
 * the plugins, their args and the dataset path from its resolved config,
 * loads the plugins with the host's checks (sc_model_plugin_check), opens
 * the dataset's index and one split (dataset_spec needs a DataSet),
 * creates the network, and loads param/<name> (or ema/<name>) into it;
 * never optim/ or trainer. The gradient buffer is dropped, so the handle
 * holds the weights, the index and the step arena of one batch.
 * docs/predict.md, "In your own program".
 */
#include "scorch/infer.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "params_impl.h"
#include "scorch/device.h"
#include "scorch/serialize.h"
#include "scorch_host/context.h"
#include "scorch_host/params.h"
#include "scorch_host/plugin.h"

enum { DEFAULT_MAX_BATCH = 64, ENTRY_NAME_MAX = 1100 };

/* A loaded plugin: its file, as given, and its well-known struct. */
typedef struct plugin_lib {
    void *handle;
    char *path;
    const void *api;
} plugin_lib;

/* The options of the run that wrote the checkpoint that inference needs:
 * the [train] keys of its config blob (the resolved config.ini). */
typedef struct run_config {
    char *model, *model_args, *dataset, *dataset_path, *dataset_args;
} run_config;

struct sc_infer {
    plugin_lib model, data;
    const sc_model_plugin *model_api;
    const sc_dataset_plugin *data_api;
    sc_args *model_args, *dataset_args;
    void *index;
    void *split; /* the train split, whose spec the network was made for */
    sc_sample_spec spec;
    sc_params *params;
    void *net;
    sc_ctx *ctx;
    int n_outputs;
    sc_tensor_spec outputs[SC_MAX_IO];
    char **class_names; /* [n_class_names], entries NULL where the dataset has none */
    int64_t n_class_names;
    int threads;
    int64_t max_batch;
    pthread_mutex_t run_lock; /* runs one at a time: forward is [training-thread] */
    bool run_lock_made;
};

/* ---- the checkpoint's config ---- */

static char *trimmed(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

/* An inline comment starts at a ';' after whitespace, as inih reads it
 * (config.c never writes one into a value). */
static void cut_comment(char *value)
{
    for (char *p = strchr(value, ';'); p; p = strchr(p + 1, ';'))
        if (p > value && isspace((unsigned char)p[-1])) {
            *p = '\0';
            return;
        }
}

static char **config_field(run_config *c, const char *key)
{
    static const struct {
        const char *key;
        size_t offset;
    } keys[] = {
        {"model", offsetof(run_config, model)},
        {"model-args", offsetof(run_config, model_args)},
        {"dataset", offsetof(run_config, dataset)},
        {"dataset-path", offsetof(run_config, dataset_path)},
        {"dataset-args", offsetof(run_config, dataset_args)},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (strcmp(keys[i].key, key) == 0)
            return (char **)(void *)((char *)c + keys[i].offset);
    return NULL;
}

/* One line of the config: a [section], a comment, or `name = value`,
 * which counts only in [train]. */
static sc_status config_line(run_config *c, char *line, int number, bool *in_train)
{
    char *text = trimmed(line);
    if (!text[0] || text[0] == ';' || text[0] == '#')
        return SC_OK;
    if (text[0] == '[') {
        *in_train = strcmp(text, "[train]") == 0;
        return SC_OK;
    }
    char *eq = strchr(text, '=');
    if (!eq)
        return sc_error_set(SC_ERR_FORMAT, "its config, line %d: expected 'name = value' or "
                            "'[section]'", number);
    *eq = '\0';
    char **field = *in_train ? config_field(c, trimmed(text)) : NULL;
    if (!field)
        return SC_OK;
    if (*field)
        return sc_error_set(SC_ERR_FORMAT, "its config, line %d: %s is set twice", number,
                            trimmed(text));
    char *value = eq + 1;
    cut_comment(value);
    if (!(*field = strdup(trimmed(value))))
        return sc_error_set(SC_ERR_NOMEM, "out of memory reading its config");
    return SC_OK;
}

static sc_status parse_config(run_config *c, char *text)
{
    bool in_train = false;
    int number = 1;
    for (char *line = text, *next; line; line = next, number++) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        SC_TRY(config_line(c, line, number, &in_train));
    }
    if (!c->model || !c->model[0] || !c->dataset || !c->dataset[0])
        return sc_error_set(SC_ERR_FORMAT, "its saved config names no %s plugin",
                            c->model && c->model[0] ? "dataset" : "model");
    return SC_OK;
}

static sc_status read_config(const sc_ckpt *ck, run_config *c)
{
    size_t size;
    const char *blob = sc_ckpt_blob(ck, "config", &size);
    if (!blob)
        return sc_error_set(SC_ERR_FORMAT, "no resolved config in it (not written by "
                            "scorch-train?)");
    const char *nul = memchr(blob, '\0', size);
    if (nul)
        return sc_error_set(SC_ERR_FORMAT, "its config holds a NUL byte at offset %zu",
                            (size_t)(nul - blob));
    char *text = malloc(size + 1);
    if (!text)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for its config");
    memcpy(text, blob, size);
    text[size] = '\0';
    sc_status st = parse_config(c, text);
    free(text);
    return st;
}

static void free_config(run_config *c)
{
    free(c->model);
    free(c->model_args);
    free(c->dataset);
    free(c->dataset_path);
    free(c->dataset_args);
}

/* ---- plugins ---- */

/* dlopen as the host does: a path without a slash names a file in the
 * current directory, not one on the library search path. */
static sc_status plugin_dlopen(plugin_lib *lib, const char *path)
{
    if (access(path, R_OK) != 0)
        return sc_error_set(SC_ERR_IO, "%s: %s", path, strerror(errno));
    size_t len = strlen(path) + 3;
    char *local = malloc(len);
    if (!local || !(lib->path = strdup(path))) {
        free(local);
        return sc_error_set(SC_ERR_NOMEM, "out of memory loading %s", path);
    }
    snprintf(local, len, "%s%s", strchr(path, '/') ? "" : "./", path);
    lib->handle = dlopen(local, RTLD_NOW | RTLD_LOCAL);
    free(local);
    if (!lib->handle)
        return sc_error_set(SC_ERR_PLUGIN, "%s: cannot load: %s", path, dlerror());
    return SC_OK;
}

static sc_status plugin_open(plugin_lib *lib, const char *path, const char *symbol)
{
    SC_TRY(plugin_dlopen(lib, path));
    if (!(lib->api = dlsym(lib->handle, symbol)))
        return sc_error_set(SC_ERR_PLUGIN, "%s: exports no %s", path, symbol);
    return SC_OK;
}

static void plugin_close(plugin_lib *lib)
{
    if (lib->handle)
        dlclose(lib->handle);
    free(lib->path);
    *lib = (plugin_lib){0};
}

/* A plugin call's failure: "<file>: <function>: <plugin's message>". */
static sc_status plugin_failed(sc_status st, const plugin_lib *lib, const char *function)
{
    return sc_error_wrap(st == SC_OK ? SC_ERR_PLUGIN : st, "%s: %s", lib->path, function);
}

static sc_status load_plugins(sc_infer *h, const run_config *c, const sc_infer_options *o)
{
    SC_TRY(plugin_open(&h->model, o->model ? o->model : c->model, "scorch_model_plugin"));
    h->model_api = h->model.api;
    if (sc_model_plugin_check(h->model_api) != SC_OK)
        return sc_error_wrap(SC_ERR_PLUGIN, "%s", h->model.path);
    SC_TRY(plugin_open(&h->data, o->dataset ? o->dataset : c->dataset, "scorch_dataset_plugin"));
    h->data_api = h->data.api;
    if (sc_dataset_plugin_check(h->data_api) != SC_OK)
        return sc_error_wrap(SC_ERR_PLUGIN, "%s", h->data.path);
    SC_TRY(sc_args_parse(c->model_args ? c->model_args : "", "model arg", &h->model_args));
    return sc_args_parse(c->dataset_args ? c->dataset_args : "", "dataset arg",
                         &h->dataset_args);
}

/* ---- the device ---- */

/* "cpu", "cuda" or "cuda:N" (--device's notation for one device). */
static sc_status parse_device(const char *text, sc_device *out)
{
    *out = (sc_device){SC_DEVICE_CPU, 0};
    if (!text || strcmp(text, "cpu") == 0)
        return SC_OK;
    char *end = NULL;
    long index = 0;
    if (strncmp(text, "cuda", 4) == 0 && text[4] == ':' && isdigit((unsigned char)text[5])) {
        errno = 0;
        index = strtol(text + 5, &end, 10);
    }
    bool ok = strcmp(text, "cuda") == 0 || (end && !*end && errno == 0 && index < 1024);
    if (!ok)
        return sc_error_set(SC_ERR_INVALID, "device '%s': expected cpu, cuda or cuda:N", text);
    *out = (sc_device){SC_DEVICE_CUDA, (int)index};
    return sc_device_check(*out);
}

/* ---- the dataset and the network ---- */

static sc_status check_spec(const sc_infer *h)
{
    const sc_sample_spec *sp = &h->spec;
    if (sp->n_inputs < 1 || sp->n_inputs > SC_MAX_IO || sp->n_targets < 0 ||
        sp->n_targets > SC_MAX_IO)
        return sc_error_set(SC_ERR_PLUGIN,
                            "%s: dataset_spec gives %d inputs and %d targets (1..%d and 0..%d)",
                            h->data.path, sp->n_inputs, sp->n_targets, SC_MAX_IO, SC_MAX_IO);
    for (int k = 0; k < sp->n_inputs; k++) {
        const sc_tensor_spec *in = &sp->inputs[k];
        sc_tensor t;
        if (in->ndim >= SC_MAX_DIMS)
            return sc_error_set(SC_ERR_PLUGIN, "%s: dataset_spec: input %d has %d dimensions, "
                                "which leaves none for the batch", h->data.path, k, in->ndim);
        if (sc_tensor_init(&t, in->dtype, in->ndim, in->shape) != SC_OK)
            return sc_error_wrap(SC_ERR_PLUGIN, "%s: dataset_spec: input %d", h->data.path, k);
    }
    return SC_OK;
}

static sc_status open_data(sc_infer *h, const char *dataset_path)
{
    const sc_dataset_plugin *api = h->data_api;
    sc_status st = api->index_open(dataset_path, h->dataset_args, &h->index);
    if (st != SC_OK) {
        h->index = NULL;
        return plugin_failed(st, &h->data, "index_open");
    }
    st = api->dataset_open(h->index, SC_SPLIT_TRAIN, &h->split);
    if (st != SC_OK) {
        h->split = NULL;
        return plugin_failed(st, &h->data, "dataset_open");
    }
    api->dataset_spec(h->split, &h->spec); /* zeroed: an older minor fills less */
    return check_spec(h);
}

static sc_status create_network(sc_infer *h)
{
    if (!(h->params = sc_params_new()))
        return sc_error_code();
    /* The host's parameter-init stream; the checkpoint overwrites what it
     * draws. */
    sc_rng init_rng;
    sc_rng_init(&init_rng, 0, 0x1417);
    sc_status st =
        h->model_api->network_create(h->model_args, &h->spec, h->params, &init_rng, &h->net);
    if (st != SC_OK) {
        h->net = NULL;
        return plugin_failed(st, &h->model, "network_create");
    }
    if (sc_params_count(h->params) == 0)
        return sc_error_set(SC_ERR_PLUGIN, "%s: network_create made no parameters",
                            h->model.path);
    return SC_OK;
}

/* The dataset and the network, made while sc_host() tells the plugins who
 * is calling, as the host does. */
static sc_status open_and_create(sc_infer *h, const char *dataset_path, sc_device device)
{
    const sc_host_info host = {.abi = SC_ABI_HEADER(sc_host_info), .version = SCORCH_VERSION,
                               .device_kind = device.kind};
    const sc_host_info *outer = sc_host_set_info(&host);
    sc_status st = open_data(h, dataset_path);
    if (st == SC_OK)
        st = create_network(h);
    sc_host_set_info(outer);
    return st;
}

/* ---- the weights ---- */

static sc_status check_model_name(const sc_infer *h, const sc_ckpt *ck)
{
    size_t size;
    const char *name = sc_ckpt_blob(ck, "model", &size);
    const char *want = h->model_api->name;
    if (!name)
        return sc_error_set(SC_ERR_FORMAT, "not a training checkpoint (no model entry)");
    if (size != strlen(want) || memcmp(name, want, size) != 0)
        return sc_error_set(SC_ERR_INVALID, "written by model '%.*s', not '%s' (%s)", (int)size,
                            name, want, h->model.path);
    return SC_OK;
}

/* param/<name> for every parameter and buffer; with ema, ema/<name> for
 * every parameter instead (the EMA averages parameters, not buffers).
 * sc_ckpt_read_tensor refuses a missing name or another shape, naming the
 * checkpoint, the entry and both shapes. */
static sc_status load_weights(sc_infer *h, const sc_ckpt *ck, const char *path, bool ema)
{
    char name[ENTRY_NAME_MAX];
    for (int i = 0; i < sc_params_count(h->params); i++) {
        sc_tensor *p = sc_params_at(h->params, i);
        bool averaged = ema && !(p->flags & SC_TENSOR_BUFFER);
        snprintf(name, sizeof name, "%s/%s", averaged ? "ema" : "param", p->name);
        if (averaged && !sc_ckpt_has(ck, name))
            return sc_error_set(SC_ERR_INVALID, "checkpoint %s holds no EMA weights (no '%s'): "
                                "it was trained without --ema-decay", path, name);
        SC_TRY(sc_ckpt_read_tensor(ck, name, p));
    }
    return SC_OK;
}

/* ---- running the network ---- */

/* [n, ...spec]: a batch of n samples (spec leaves room for the batch:
 * check_spec, probe_outputs). */
static void batch_shape(const sc_tensor_spec *spec, int64_t n, int64_t shape[SC_MAX_DIMS])
{
    shape[0] = n;
    memcpy(shape + 1, spec->shape, (size_t)spec->ndim * sizeof *shape);
}

/* A tensor of n samples of spec at data on the host. */
static sc_status host_batch(sc_tensor *t, const sc_tensor_spec *spec, int64_t n, void *data)
{
    int64_t shape[SC_MAX_DIMS];
    batch_shape(spec, n, shape);
    SC_TRY(sc_tensor_init(t, spec->dtype, spec->ndim + 1, shape));
    t->data = data;
    t->device = (sc_device){SC_DEVICE_CPU, 0};
    return SC_OK;
}

/* The network's outputs for inputs already on the device, checked as the
 * host checks them. */
static sc_status forward(sc_infer *h, const sc_tensor_list *inputs, sc_tensor_list *outputs)
{
    memset(outputs, 0, sizeof *outputs);
    sc_status st = h->model_api->network_forward(h->net, h->ctx, inputs, outputs);
    if (st != SC_OK)
        return plugin_failed(st, &h->model, "network_forward");
    if (outputs->n < 1 || outputs->n > SC_MAX_IO)
        return sc_error_set(SC_ERR_PLUGIN, "%s: network_forward returned %d outputs",
                            h->model.path, outputs->n);
    for (int k = 0; k < outputs->n; k++)
        if (!outputs->t[k])
            return sc_error_set(SC_ERR_PLUGIN, "%s: network_forward output %d is NULL",
                                h->model.path, k);
    return SC_OK;
}

/* Output k of a batch of n: [n, ...] with the sample shape seen at open. */
static sc_status check_output(const sc_infer *h, const sc_tensor *t, int k, int64_t n)
{
    const sc_tensor_spec *s = &h->outputs[k];
    bool ok = t->ndim == s->ndim + 1 && t->shape[0] == n && t->dtype == s->dtype &&
              memcmp(t->shape + 1, s->shape, (size_t)s->ndim * sizeof *s->shape) == 0;
    if (ok)
        return SC_OK;
    char got[96], want[96];
    int64_t batch[SC_MAX_DIMS];
    batch_shape(s, n, batch);
    return sc_error_set(SC_ERR_PLUGIN, "%s: network_forward output %d of a batch of %lld is %s "
                        "%s, expected %s %s (the batch first)", h->model.path, k, (long long)n,
                        sc_dtype_name(t->dtype), sc_shape_str(t->ndim, t->shape, got, sizeof got),
                        sc_dtype_name(s->dtype), sc_shape_str(s->ndim + 1, batch, want,
                                                              sizeof want));
}

/* One sample of zeros through the network: what its outputs are. */
static sc_status probe_outputs(sc_infer *h)
{
    sc_tensor_list in = {.n = h->spec.n_inputs};
    for (int k = 0; k < in.n; k++) {
        const sc_tensor_spec *s = &h->spec.inputs[k];
        int64_t shape[SC_MAX_DIMS];
        batch_shape(s, 1, shape);
        if (!(in.t[k] = sc_tensor_zeros(h->ctx, s->dtype, s->ndim + 1, shape)))
            return sc_error_code();
    }
    sc_tensor_list out;
    SC_TRY(forward(h, &in, &out));
    h->n_outputs = out.n;
    for (int k = 0; k < out.n; k++) {
        const sc_tensor *t = out.t[k];
        if (t->ndim < 1 || t->shape[0] != 1)
            return sc_error_set(SC_ERR_PLUGIN, "%s: network_forward output %d of one sample "
                                "has no batch dimension of 1 first", h->model.path, k);
        h->outputs[k] = (sc_tensor_spec){.dtype = t->dtype, .ndim = t->ndim - 1};
        memcpy(h->outputs[k].shape, t->shape + 1, (size_t)(t->ndim - 1) * sizeof *t->shape);
    }
    return SC_OK;
}

/* Runs fn(h, user) under the handle's thread count, then ends the step;
 * the calling thread's own count is restored. */
static sc_status with_threads(sc_infer *h, sc_status (*fn)(sc_infer *, void *), void *user)
{
    int outer = sc_cpu_threads();
    sc_cpu_set_threads(h->threads);
    sc_status st = fn(h, user);
    sc_ctx_reset(h->ctx);
    sc_cpu_set_threads(outer);
    return st;
}

static sc_status probe_step(sc_infer *h, void *user)
{
    (void)user;
    return probe_outputs(h);
}

/* ---- class names ---- */

/* The dataset's class names, copied at open: class_name is a
 * [training-thread] callback, and sc_infer_class_name may be asked from
 * any thread. As many as the spec's classes, else as the first output's
 * elements when it is one vector of scores. */
static sc_status cache_class_names(sc_infer *h)
{
    if (!h->data_api->class_name)
        return SC_OK;
    int64_t n = h->spec.classes;
    if (n <= 0 && h->outputs[0].ndim == 1)
        n = h->outputs[0].shape[0];
    if (n <= 0)
        return SC_OK;
    if (!(h->class_names = calloc((size_t)n, sizeof *h->class_names)))
        return sc_error_set(SC_ERR_NOMEM, "out of memory for %lld class names", (long long)n);
    h->n_class_names = n;
    for (int64_t c = 0; c < n; c++) {
        const char *name = h->data_api->class_name(h->index, c);
        if (name && !(h->class_names[c] = strdup(name)))
            return sc_error_set(SC_ERR_NOMEM, "out of memory for %lld class names",
                                (long long)n);
    }
    return SC_OK;
}

/* ---- open and close ---- */

static sc_status take_options(sc_infer *h, const sc_infer_options *o, sc_device *device)
{
    if (o->threads < 0)
        return sc_error_set(SC_ERR_INVALID, "threads %d is negative (0: one per core)",
                            o->threads);
    if (o->max_batch < 0)
        return sc_error_set(SC_ERR_INVALID, "max_batch %lld is negative (0: %d)",
                            (long long)o->max_batch, DEFAULT_MAX_BATCH);
    h->threads = o->threads;
    h->max_batch = o->max_batch ? o->max_batch : DEFAULT_MAX_BATCH;
    return parse_device(o->device, device);
}

/* The network on its device, in eval mode without gradients, its
 * gradient buffer dropped: inference keeps the weights alone. */
static sc_status place(sc_infer *h, sc_device device)
{
    if (!(h->ctx = sc_ctx_new(device)))
        return sc_error_code();
    sc_ctx_set_training(h->ctx, false);
    sc_ctx_set_grad_enabled(h->ctx, false);
    SC_TRY(sc_params_to_device(h->params, device));
    sc_params_drop_grads(h->params);
    return SC_OK;
}

/* The plugins, the dataset and the network the checkpoint's config names
 * (or the options). */
static sc_status set_up(sc_infer *h, const sc_ckpt *ck, const sc_infer_options *o,
                        sc_device *device)
{
    run_config cfg = {0};
    sc_status st = take_options(h, o, device);
    if (st == SC_OK)
        st = read_config(ck, &cfg);
    if (st == SC_OK)
        st = load_plugins(h, &cfg, o);
    if (st == SC_OK)
        st = open_and_create(h, o->dataset_path ? o->dataset_path
                                : cfg.dataset_path ? cfg.dataset_path : "", *device);
    free_config(&cfg);
    return st == SC_OK ? check_model_name(h, ck) : st;
}

static sc_status finish(sc_infer *h, sc_device device)
{
    SC_TRY(place(h, device));
    SC_TRY(with_threads(h, probe_step, NULL));
    return cache_class_names(h);
}

/* Everything from the open checkpoint; every message names it. */
static sc_status build(sc_infer *h, const sc_ckpt *ck, const char *path,
                       const sc_infer_options *o)
{
    sc_device device;
    if (set_up(h, ck, o, &device) != SC_OK)
        return sc_error_wrap(sc_error_code(), "checkpoint %s", path);
    if (load_weights(h, ck, path, o->ema) != SC_OK) /* the reader names the checkpoint */
        return sc_error_code();
    if (finish(h, device) != SC_OK)
        return sc_error_wrap(sc_error_code(), "checkpoint %s", path);
    return SC_OK;
}

sc_status sc_infer_open(const char *checkpoint, const sc_infer_options *options,
                        sc_infer **out)
{
    if (!out)
        return sc_error_set(SC_ERR_INVALID, "sc_infer_open: out is NULL");
    *out = NULL;
    if (!checkpoint)
        return sc_error_set(SC_ERR_INVALID, "sc_infer_open: no checkpoint");
    sc_infer *h = calloc(1, sizeof *h);
    if (!h)
        return sc_error_set(SC_ERR_NOMEM, "out of memory opening %s", checkpoint);
    if (pthread_mutex_init(&h->run_lock, NULL) != 0) {
        free(h);
        return sc_error_set(SC_ERR_NOMEM, "cannot make a mutex opening %s", checkpoint);
    }
    h->run_lock_made = true;
    sc_ckpt *ck = NULL;
    sc_status st = sc_ckpt_open(checkpoint, &ck);
    if (st == SC_OK)
        st = build(h, ck, checkpoint, options ? options : &(sc_infer_options){0});
    sc_ckpt_close(ck); /* the whole file, optimizer state and all, is freed here */
    if (st != SC_OK) {
        sc_infer_close(h);
        return st;
    }
    *out = h;
    return SC_OK;
}

void sc_infer_close(sc_infer *h)
{
    if (!h)
        return;
    sc_ctx_free(h->ctx);
    if (h->net)
        h->model_api->network_destroy(h->net);
    sc_params_free(h->params);
    if (h->split)
        h->data_api->dataset_close(h->split);
    if (h->index)
        h->data_api->index_close(h->index);
    sc_args_free(h->model_args);
    sc_args_free(h->dataset_args);
    for (int64_t c = 0; c < h->n_class_names; c++)
        free(h->class_names[c]);
    free(h->class_names);
    plugin_close(&h->data);
    plugin_close(&h->model);
    if (h->run_lock_made)
        pthread_mutex_destroy(&h->run_lock);
    free(h);
}

/* ---- queries ---- */

const sc_sample_spec *sc_infer_input_spec(const sc_infer *h) { return &h->spec; }

int sc_infer_output_count(const sc_infer *h) { return h->n_outputs; }

const sc_tensor_spec *sc_infer_output_spec(const sc_infer *h, int i)
{
    return i >= 0 && i < h->n_outputs ? &h->outputs[i] : NULL;
}

const char *sc_infer_class_name(const sc_infer *h, int64_t label)
{
    return label >= 0 && label < h->n_class_names ? h->class_names[label] : NULL;
}

const char *sc_infer_model_name(const sc_infer *h) { return h->model_api->name; }

/* ---- run ---- */

typedef struct run_args {
    int64_t n;
    const void *const *inputs;
    void *const *outputs;
} run_args;

static sc_status run_step(sc_infer *h, void *user)
{
    const run_args *a = user;
    sc_tensor host_in[SC_MAX_IO];
    sc_tensor_list in = {.n = h->spec.n_inputs}, out;
    for (int k = 0; k < in.n; k++) {
        SC_TRY(host_batch(&host_in[k], &h->spec.inputs[k], a->n, (void *)a->inputs[k]));
        /* The caller's buffer itself on the CPU, an upload on a GPU. */
        if (!(in.t[k] = sc_tensor_to_device(h->ctx, &host_in[k])))
            return sc_error_wrap(sc_error_code(), "copying input %d to the device", k);
    }
    SC_TRY(forward(h, &in, &out));
    if (out.n != h->n_outputs)
        return sc_error_set(SC_ERR_PLUGIN, "%s: network_forward returned %d outputs, %d at open",
                            h->model.path, out.n, h->n_outputs);
    for (int k = 0; k < out.n; k++) {
        sc_tensor dst;
        SC_TRY(check_output(h, out.t[k], k, a->n));
        SC_TRY(host_batch(&dst, &h->outputs[k], a->n, a->outputs[k]));
        if (sc_tensor_copy(&dst, out.t[k]) != SC_OK)
            return sc_error_wrap(sc_error_code(), "copying output %d to the caller", k);
    }
    return SC_OK;
}

/* The caller's n buffers of `what` ("inputs") for function fn. */
static sc_status check_buffers(const void *const *list, int n, const char *fn, const char *what)
{
    if (!list)
        return sc_error_set(SC_ERR_INVALID, "%s: no %s (it takes %d)", fn, what, n);
    for (int k = 0; k < n; k++)
        if (!list[k])
            return sc_error_set(SC_ERR_INVALID, "%s: %s %d of %d is NULL", fn, what, k, n);
    return SC_OK;
}

sc_status sc_infer_run(sc_infer *h, int64_t n, const void *const *inputs, void *const *outputs)
{
    if (n < 1 || n > h->max_batch)
        return sc_error_set(SC_ERR_INVALID, "sc_infer_run: %lld samples; this handle takes 1 "
                            "to %lld (max_batch)", (long long)n, (long long)h->max_batch);
    SC_TRY(check_buffers(inputs, h->spec.n_inputs, __func__, "inputs"));
    SC_TRY(check_buffers((const void *const *)outputs, h->n_outputs, __func__, "outputs"));
    pthread_mutex_lock(&h->run_lock);
    sc_status st = with_threads(h, run_step, &(run_args){n, inputs, outputs});
    pthread_mutex_unlock(&h->run_lock);
    return st;
}

/* ---- decode ---- */

typedef sc_status (*decode_fn)(void *index, const sc_raw_input *raw, sc_tensor_list *inputs);

/* The dataset's index_decode (1.4), read only from a struct that holds it. */
static decode_fn index_decode(const sc_infer *h)
{
    return SC_ABI_HOLDS(h->data_api, index_decode) ? h->data_api->index_decode : NULL;
}

bool sc_infer_decodes(const sc_infer *h) { return index_decode(h) != NULL; }

sc_status sc_infer_decode(const sc_infer *h, const sc_raw_input *raw, void *const *inputs)
{
    decode_fn decode = index_decode(h);
    if (!decode)
        return sc_error_set(SC_ERR_UNSUPPORTED, "%s: dataset plugin '%s' takes no raw inputs "
                            "(it has no index_decode, ABI 1.4)", h->data.path,
                            h->data_api->name);
    if (!raw)
        return sc_error_set(SC_ERR_INVALID, "sc_infer_decode: no raw input");
    SC_TRY(check_buffers((const void *const *)inputs, h->spec.n_inputs, __func__, "inputs"));
    sc_tensor t[SC_MAX_IO];
    sc_tensor_list list = {.n = h->spec.n_inputs};
    for (int k = 0; k < list.n; k++) {
        const sc_tensor_spec *s = &h->spec.inputs[k];
        SC_TRY(sc_tensor_init(&t[k], s->dtype, s->ndim, s->shape));
        t[k].data = inputs[k];
        list.t[k] = &t[k];
    }
    sc_status st = decode(h->index, raw, &list);
    return st == SC_OK ? SC_OK : plugin_failed(st, &h->data, "index_decode");
}
