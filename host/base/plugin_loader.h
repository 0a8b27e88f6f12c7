/* plugin_loader.h — loading model, dataset, job and hooks plugins.
 *
 * dlopen(RTLD_NOW | RTLD_LOCAL), then the well-known symbol is looked up
 * and checked as libscorch checks every plugin (sc_model_plugin_check,
 * sc_dataset_plugin_check in scorch_host/plugin.h, which hold the one
 * table of each minor's sizes): magic, major == SC_ABI_MAJOR, minor <=
 * SC_ABI_MINOR, size >= the size that minor defines for that struct; then
 * every required function. Any refusal is one message naming the file and
 * what is wrong ("mlp.so: model plugin built for plugin ABI 2.0, this
 * scorch speaks 1.3"). A path without a slash names a file in the current
 * directory, not one on the library search path.
 */
#ifndef SCORCH_HOST_PLUGIN_LOADER_H
#define SCORCH_HOST_PLUGIN_LOADER_H

#include <stdbool.h>
#include <stddef.h>

#include "scorch/hooks.h"
#include "scorch/job.h"
#include "scorch/plugin.h"
#include "scorch/user_funcs.h"

typedef struct host_plugin_lib {
    void *handle;                    /* from dlopen */
    char *path;                      /* as given */
    const sc_hook_table *hooks;      /* its scorch_hooks, or NULL */
    const sc_user_func_table *user_funcs; /* its scorch_user_funcs, or NULL */
    sc_args *args;                   /* a --hooks plugin's --hooks-args; else NULL */
} host_plugin_lib;

typedef struct host_model_lib {
    host_plugin_lib lib;
    const sc_model_plugin *api;
} host_model_lib;

typedef struct host_dataset_lib {
    host_plugin_lib lib;
    const sc_dataset_plugin *api;
} host_dataset_lib;

typedef struct host_job_lib {
    host_plugin_lib lib;
    const sc_job_plugin *api;
} host_job_lib;

/* Each fills *out or returns an error naming path; nothing to close then.
 * A model's preferred_device must be --device notation (device.h). */
sc_status host_model_lib_open(const char *path, host_model_lib *out);
sc_status host_dataset_lib_open(const char *path, host_dataset_lib *out);
sc_status host_job_lib_open(const char *path, host_job_lib *out);
/* A plugin that provides scorch_hooks, scorch_user_funcs or both (--hooks),
 * with its arguments (--hooks-args; NULL or "" for none): each key must be
 * one its scorch_hook_arg_keys lists (ABI 1.2), else the refusal names the
 * key and the nearest listed one. */
sc_status host_hooks_lib_open(const char *path, const char *args, host_plugin_lib *out);

/* The model's preferred_device (ABI 1.1), or NULL when it names none, was
 * built for 1.0, or is not loaded (a zeroed lib). */
const char *host_model_preferred_device(const host_model_lib *lib);

/* Whether the dataset turns raw inputs into samples: it has an
 * index_decode (ABI 1.4) and a struct that holds it. */
bool host_dataset_decodes(const host_dataset_lib *lib);

/* index_decode of `raw` into `inputs` (tensors shaped per the sample
 * spec's inputs, as getitem gets them), on any thread. A failure says
 * "<file>: index_decode: <the plugin's message>", which names the file of
 * a path input; the caller adds which input bytes were. A dataset without
 * index_decode is SC_ERR_UNSUPPORTED, naming it. */
sc_status host_dataset_decode(const host_dataset_lib *lib, void *index, const sc_raw_input *raw,
                              sc_tensor_list *inputs);

/* Closes what an open filled (a zeroed lib is fine); the plugin's structs
 * and hooks are gone afterwards. */
void host_plugin_lib_close(host_plugin_lib *lib);

/* What plugins learn from sc_host() while a run on `device` opens its
 * dataset and creates its network. */
sc_host_info host_plugin_host_info(sc_device_kind device);

#endif
