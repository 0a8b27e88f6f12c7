#include "run/session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/crash.h"
#include "scorch_host/context.h"
#include "scorch_host/params.h"
#include "scorch_host/plugin.h"

static sc_status check_spec_match(const host_session *s, sc_split split)
{
    sc_sample_spec spec = {0}; /* a dataset of an older minor fills less of it */
    HOST_PLUGIN_CALL(s->data.lib.path, "dataset_spec",
                   s->data.api->dataset_spec(s->splits[split], &spec));
    if (memcmp(&spec, &s->spec, sizeof spec) != 0)
        return sc_error_set(SC_ERR_PLUGIN,
                            "%s: the %s split's samples differ in dtype or shape from train's",
                            s->data.lib.path, sc_split_name(split));
    return SC_OK;
}

static sc_status check_spec(const host_session *s)
{
    const sc_sample_spec *sp = &s->spec;
    if (sp->n_inputs < 1 || sp->n_inputs > SC_MAX_IO || sp->n_targets < 0 ||
        sp->n_targets > SC_MAX_IO)
        return sc_error_set(SC_ERR_PLUGIN,
                            "%s: dataset_spec gives %d inputs and %d targets (1..%d and 0..%d)",
                            s->data.lib.path, sp->n_inputs, sp->n_targets, SC_MAX_IO,
                            SC_MAX_IO);
    return SC_OK;
}

static sc_status open_data(host_session *s, const host_config *cfg)
{
    const sc_dataset_plugin *api = s->data.api;
    const char *file = s->data.lib.path;
    sc_status st;
    HOST_PLUGIN_CALL(file, "index_open",
                   st = api->index_open(cfg->dataset_path, s->dataset_args, &s->index));
    if (st != SC_OK) {
        s->index = NULL;
        return host_plugin_failed(st, file, "index_open");
    }
    for (int k = 0; k < SC_SPLIT_COUNT; k++) {
        HOST_PLUGIN_CALL(file, "dataset_open",
                       st = api->dataset_open(s->index, (sc_split)k, &s->splits[k]));
        if (st != SC_OK) {
            s->splits[k] = NULL;
            return host_plugin_failed(st, file, "dataset_open");
        }
    }
    HOST_PLUGIN_CALL(file, "dataset_spec", api->dataset_spec(s->splits[SC_SPLIT_TRAIN], &s->spec));
    SC_TRY(check_spec(s));
    SC_TRY(check_spec_match(s, SC_SPLIT_VALID));
    return check_spec_match(s, SC_SPLIT_TEST);
}

static sc_status create_network(host_session *s, const host_config *cfg)
{
    const sc_model_plugin *api = s->model.api;
    const char *file = s->model.lib.path;
    if (!(s->params = sc_params_new()))
        return SC_ERR_NOMEM;
    sc_rng init_rng;
    sc_rng_init(&init_rng, cfg->seed, 0x1417); /* the parameter-init stream */
    sc_status st;
    HOST_PLUGIN_CALL(file, "network_create",
                   st = api->network_create(s->model_args, &s->spec, s->params, &init_rng,
                                            &s->net));
    if (st != SC_OK) {
        s->net = NULL;
        return host_plugin_failed(st, file, "network_create");
    }
    if (sc_params_count(s->params) == 0)
        return sc_error_set(SC_ERR_PLUGIN, "%s: network_create made no parameters", file);
    s->main_metric_mode = SC_METRIC_MAX;
    HOST_PLUGIN_CALL(file, "socket_main_metric",
                   s->main_metric = api->socket_main_metric(s->net, &s->main_metric_mode));
    if (!s->main_metric || !s->main_metric[0] ||
        (s->main_metric_mode != SC_METRIC_MAX && s->main_metric_mode != SC_METRIC_MIN))
        return sc_error_set(SC_ERR_PLUGIN,
                            "%s: socket_main_metric must name a metric and set its mode "
                            "to SC_METRIC_MAX or SC_METRIC_MIN", file);
    if (api->socket_param_trains)
        for (int i = 0; i < sc_params_count(s->params); i++) {
            sc_tensor *p = sc_params_at(s->params, i);
            bool trains;
            HOST_PLUGIN_CALL(file, "socket_param_trains",
                           trains = api->socket_param_trains(s->net, p->name));
            sc_params_set_trainable(p, trains);
        }
    return SC_OK;
}

/* The plugin's hooks, which see its args, and user functions join the run's. */
static sc_status add_hooks(host_session *s, const host_plugin_lib *lib, const sc_args *args)
{
    if (lib->hooks)
        SC_TRY(host_hook_set_add(s->hooks, lib->hooks, lib->path, args));
    if (lib->user_funcs)
        SC_TRY(host_user_funcs_add(s->funcs, lib->user_funcs, lib->path));
    return SC_OK;
}

static sc_status load_plugins(host_session *s, const host_config *cfg)
{
    if (cfg->model[0]) /* only a job (scorch-run) may go without */
        SC_TRY(host_model_lib_open(cfg->model, &s->model));
    if (cfg->dataset[0])
        SC_TRY(host_dataset_lib_open(cfg->dataset, &s->data));
    for (int i = 0; i < cfg->hooks.n; i++)
        SC_TRY(host_hooks_lib_open(cfg->hooks.path[i], cfg->hooks.args[i], &s->hooks_libs[i]));
    SC_TRY(sc_args_parse(cfg->model_args, "model arg", &s->model_args));
    SC_TRY(sc_args_parse(cfg->dataset_args, "dataset arg", &s->dataset_args));
    SC_TRY(host_hook_set_new(&s->hooks));
    SC_TRY(host_user_funcs_new(&s->funcs));
    if (s->model.api)
        SC_TRY(add_hooks(s, &s->model.lib, s->model_args));
    if (s->data.api)
        SC_TRY(add_hooks(s, &s->data.lib, s->dataset_args));
    for (int i = 0; i < cfg->hooks.n; i++)
        SC_TRY(add_hooks(s, &s->hooks_libs[i], s->hooks_libs[i].args));
    return SC_OK;
}

/* --device, else the model's preferred_device, else the cpu. */
static void device_choice(const host_config *cfg, const host_model_lib *model, char *text,
                          size_t text_size, char *source, size_t source_size)
{
    const char *preferred = cfg->device[0] ? NULL : host_model_preferred_device(model);
    snprintf(text, text_size, "%s", cfg->device[0] ? cfg->device : preferred ? preferred : "cpu");
    if (preferred)
        snprintf(source, source_size, "%s's preferred_device", model->lib.path);
    else
        snprintf(source, source_size, "--device");
}

sc_status host_session_device_choice(const host_config *cfg, char *text, size_t text_size,
                                   char *source, size_t source_size)
{
    host_model_lib model = {0};
    if (!cfg->device[0] && cfg->model[0])
        SC_TRY(host_model_lib_open(cfg->model, &model));
    device_choice(cfg, &model, text, text_size, source, source_size);
    if (model.lib.handle)
        host_plugin_lib_close(&model.lib);
    return SC_OK;
}

/* The device of the replica or rank local_rank (device.h) is locked for
 * the run. distributed_dataparallel: CPU ranks under mpirun or srun
 * (host/dist/dist.h) on a machine without GPUs. */
/* Where GPU locks live: SCORCH_DEVICE_LOCK_DIR, else HOST_DEVICE_LOCK_DIR.
 * Tests on the emulated GPU, whose devices are private to each process,
 * give every run a directory of its own. */
static const char *device_lock_dir(void)
{
    const char *dir = getenv("SCORCH_DEVICE_LOCK_DIR");
    return dir && dir[0] ? dir : HOST_DEVICE_LOCK_DIR;
}

static sc_status allocate_device(host_session *s, const host_config *cfg, int local_rank)
{
    char text[HOST_PATH_MAX], source[HOST_PATH_MAX + 32];
    device_choice(cfg, &s->model, text, sizeof text, source, sizeof source);
    host_gpu_inventory gpus = {0};
    if (strcmp(text, "cpu") != 0) /* spares CPU runs loading the GPU backend */
        host_gpu_inventory_probe(&gpus);
    /* scorch-train learns its default run directory later (host_device_set_holder). */
    const char *holder = cfg->run_dir[0]      ? cfg->run_dir
                         : cfg->job[0]        ? "none (scorch-run)"
                         : cfg->checkpoint[0] ? "none (scorch-test)"
                                              : "not chosen yet";
    host_device_env env = {device_lock_dir(), holder, local_rank, &gpus};
    SC_TRY(host_device_allocate(text, source, &env, &s->devices));
    if (s->devices.note[0])
        fprintf(stderr, "note: %s\n", s->devices.note);
    return SC_OK;
}

/* The context computes on the allocated device; on a GPU the parameters
 * move there once the network has made and initialised them. */
static sc_status place_on_device(host_session *s, const host_config *cfg)
{
    sc_device dev = s->devices.device;
    char name[32];
    if (!(s->ctx = sc_ctx_new(dev)))
        return sc_error_wrap(sc_error_code(), "--device %s", sc_device_str(dev, name, sizeof name));
    sc_precision precision;
    SC_TRY(sc_precision_parse(cfg->precision, &precision));
    if (precision != SC_PRECISION_FP32 && dev.kind == SC_DEVICE_CPU)
        return sc_error_set(SC_ERR_INVALID, "--precision %s needs a GPU; the CPU computes in fp32",
                            cfg->precision);
    sc_ctx_set_precision(s->ctx, precision);
    sc_cpu_conv conv;
    SC_TRY(sc_cpu_conv_parse(cfg->cpu_conv, &conv));
    sc_cpu_set_conv(conv);
    return s->params ? sc_params_to_device(s->params, dev) : SC_OK;
}

/* The dataset and the network, made while sc_host() tells the plugins who
 * is calling. */
static sc_status open_and_create(host_session *s, const host_config *cfg)
{
    sc_host_info host = host_plugin_host_info(s->devices.device.kind);
    const sc_host_info *outer = sc_host_set_info(&host);
    sc_status st = SC_OK;
    if (s->model.api && !s->data.api)
        st = sc_error_set(SC_ERR_INVALID, "--model %s needs a --dataset: the network is built "
                          "for its samples", cfg->model);
    if (st == SC_OK && s->data.api)
        st = open_data(s, cfg);
    if (st == SC_OK && s->model.api)
        st = create_network(s, cfg);
    sc_host_set_info(outer);
    return st;
}

sc_status host_session_open(host_session *s, const host_config *cfg, int local_rank)
{
    memset(s, 0, sizeof *s);
    sc_status st = load_plugins(s, cfg);
    if (st == SC_OK)
        st = allocate_device(s, cfg, local_rank);
    if (st == SC_OK)
        st = open_and_create(s, cfg);
    if (st == SC_OK)
        st = place_on_device(s, cfg);
    if (st != SC_OK)
        host_session_close(s);
    return st;
}

void host_session_close(host_session *s)
{
    sc_ctx_free(s->ctx);
    if (s->net)
        HOST_PLUGIN_CALL(s->model.lib.path, "network_destroy", s->model.api->network_destroy(s->net));
    sc_params_free(s->params);
    for (int k = SC_SPLIT_COUNT - 1; k >= 0; k--)
        if (s->splits[k])
            HOST_PLUGIN_CALL(s->data.lib.path, "dataset_close",
                           s->data.api->dataset_close(s->splits[k]));
    if (s->index)
        HOST_PLUGIN_CALL(s->data.lib.path, "index_close", s->data.api->index_close(s->index));
    sc_args_free(s->model_args);
    sc_args_free(s->dataset_args);
    host_hook_set_free(s->hooks);
    host_user_funcs_free(s->funcs);
    for (int i = 0; i < HOST_MAX_HOOK_PLUGINS; i++)
        host_plugin_lib_close(&s->hooks_libs[i]);
    host_device_release(&s->devices);
    if (s->data.lib.handle)
        host_plugin_lib_close(&s->data.lib);
    if (s->model.lib.handle)
        host_plugin_lib_close(&s->model.lib);
    memset(s, 0, sizeof *s);
}

sc_status host_session_upload(host_session *s, const sc_tensor_list *in, sc_tensor_list *out)
{
    *out = *in;
    for (int i = 0; i < in->n; i++)
        if (!(out->t[i] = sc_tensor_to_device(s->ctx, in->t[i])))
            return sc_error_wrap(sc_error_code(), "copying batch tensor %d to the device", i);
    return SC_OK;
}

sc_status host_session_to_host(host_session *s, const sc_tensor_list *in, sc_tensor_list *out)
{
    *out = *in;
    for (int i = 0; i < in->n; i++)
        if (!(out->t[i] = sc_tensor_to_host(s->ctx, in->t[i])))
            return sc_error_wrap(sc_error_code(), "copying output %d to the host", i);
    return SC_OK;
}

sc_status host_session_forward(host_session *s, const sc_tensor_list *inputs,
                             sc_tensor_list *outputs)
{
    memset(outputs, 0, sizeof *outputs);
    sc_tensor_list on_device;
    SC_TRY(host_session_upload(s, inputs, &on_device));
    sc_status st;
    HOST_PLUGIN_CALL(s->model.lib.path, "network_forward",
                   st = s->model.api->network_forward(s->net, s->ctx, &on_device, outputs));
    if (st != SC_OK)
        return host_plugin_failed(st, s->model.lib.path, "network_forward");
    if (outputs->n < 1 || outputs->n > SC_MAX_IO)
        return sc_error_set(SC_ERR_PLUGIN, "%s: network_forward returned %d outputs",
                            s->model.lib.path, outputs->n);
    for (int i = 0; i < outputs->n; i++)
        if (!outputs->t[i])
            return sc_error_set(SC_ERR_PLUGIN, "%s: network_forward output %d is NULL",
                                s->model.lib.path, i);
    return SC_OK;
}

sc_status host_session_criterion(host_session *s, const sc_tensor_list *outputs,
                               const sc_tensor_list *targets, sc_tensor **loss)
{
    *loss = NULL;
    sc_tensor_list on_device;
    SC_TRY(host_session_upload(s, targets, &on_device));
    sc_status st;
    HOST_PLUGIN_CALL(s->model.lib.path, "socket_criterion",
                   st = s->model.api->socket_criterion(s->net, s->ctx, outputs, &on_device,
                                                       loss));
    if (st != SC_OK)
        return host_plugin_failed(st, s->model.lib.path, "socket_criterion");
    if (!*loss || (*loss)->numel != 1 || (*loss)->dtype != SC_F32)
        return sc_error_set(SC_ERR_PLUGIN,
                            "%s: socket_criterion must return one f32 value as the loss",
                            s->model.lib.path);
    return SC_OK;
}

sc_status host_session_metrics(host_session *s, const sc_tensor_list *outputs,
                             const sc_tensor_list *targets, sc_metrics *metrics)
{
    sc_tensor_list on_host;
    SC_TRY(host_session_to_host(s, outputs, &on_host));
    sc_status st;
    HOST_PLUGIN_CALL(s->model.lib.path, "socket_metrics",
                   st = s->model.api->socket_metrics(s->net, &on_host, targets, metrics));
    if (st != SC_OK)
        return host_plugin_failed(st, s->model.lib.path, "socket_metrics");
    return SC_OK;
}

int64_t host_session_split_len(const host_session *s, sc_split split)
{
    int64_t len;
    HOST_PLUGIN_CALL(s->data.lib.path, "dataset_len",
                   len = s->data.api->dataset_len(s->splits[split]));
    return len;
}
