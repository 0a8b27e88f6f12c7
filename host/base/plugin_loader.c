/* plugin_loader.c — dlopen a plugin, find its well-known symbol, and refuse
 * it, with one message naming the file, unless its ABI header and required
 * functions are in order (libscorch's checks, scorch_host/plugin.h). */
#include "base/plugin_loader.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/config.h"
#include "base/crash.h"
#include "base/device.h"
#include "scorch/args.h"
#include "scorch_host/plugin.h"

sc_host_info host_plugin_host_info(sc_device_kind device)
{
    return (sc_host_info){.abi = SC_ABI_HEADER(sc_host_info), .version = SCORCH_VERSION,
                          .device_kind = device};
}

/* An appended (1.1) field is read only when the plugin's struct reaches its
 * end. */
static const char *preferred_device(const sc_model_plugin *api)
{
    return api && SC_ABI_HOLDS(api, preferred_device) ? api->preferred_device : NULL;
}

static sc_status check_model(const sc_model_plugin *api)
{
    SC_TRY(sc_model_plugin_check(api));
    host_device_request req;
    const char *device = preferred_device(api);
    if (device && host_device_parse(device, &req) != SC_OK)
        return sc_error_wrap(SC_ERR_PLUGIN, "model plugin '%s': preferred_device", api->name);
    return SC_OK;
}

const char *host_model_preferred_device(const host_model_lib *lib)
{
    return preferred_device(lib->api);
}

typedef sc_status (*decode_fn)(void *index, const sc_raw_input *raw, sc_tensor_list *inputs);

/* The dataset's index_decode (1.4), read only from a struct that holds it. */
static decode_fn index_decode(const sc_dataset_plugin *api)
{
    return SC_ABI_HOLDS(api, index_decode) ? api->index_decode : NULL;
}

bool host_dataset_decodes(const host_dataset_lib *lib)
{
    return index_decode(lib->api) != NULL;
}

sc_status host_dataset_decode(const host_dataset_lib *lib, void *index, const sc_raw_input *raw,
                              sc_tensor_list *inputs)
{
    decode_fn decode = index_decode(lib->api);
    if (!decode)
        return sc_error_set(SC_ERR_UNSUPPORTED, "%s: dataset plugin '%s' takes no raw inputs "
                            "(it has no index_decode, ABI 1.4)", lib->lib.path, lib->api->name);
    sc_status st;
    HOST_PLUGIN_CALL(lib->lib.path, "index_decode", st = decode(index, raw, inputs));
    return st == SC_OK ? SC_OK : host_plugin_failed(st, lib->lib.path, "index_decode");
}

static const void *lib_symbol(const host_plugin_lib *lib, const char *symbol)
{
    return dlsym(lib->handle, symbol);
}

/* The message for a missing well-known symbol, with a hint when the file
 * is another kind of plugin. */
static sc_status missing_symbol(const host_plugin_lib *lib, const char *symbol)
{
    static const struct {
        const char *symbol, *hint;
    } kinds[] = {
        {"scorch_model_plugin", "it is a model plugin: give it to --model"},
        {"scorch_dataset_plugin", "it is a dataset plugin: give it to --dataset"},
        {"scorch_hooks", "it only has hooks: give it to --hooks"},
        {"scorch_job_plugin", "it is a job plugin: give it to scorch-run --job"},
    };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strcmp(kinds[i].symbol, symbol) != 0 && lib_symbol(lib, kinds[i].symbol))
            return sc_error_set(SC_ERR_PLUGIN, "exports no %s (%s)", symbol, kinds[i].hint);
    return sc_error_set(SC_ERR_PLUGIN, "exports no %s (define it with SC_PLUGIN_EXPORT)", symbol);
}

static sc_status lib_dlopen(const char *path, host_plugin_lib *lib)
{
    if (access(path, R_OK) != 0)
        return sc_error_set(SC_ERR_IO, "%s", strerror(errno));
    /* Without a slash dlopen searches the library path, not the current
     * directory; a user who writes "mlp.so" means the file here. */
    size_t len = strlen(path);
    char *local = malloc(len + 3);
    lib->path = strdup(path); /* first: dlclose names it, should the load fail after */
    if (!local || !lib->path) {
        free(local);
        return sc_error_set(SC_ERR_NOMEM, "out of memory");
    }
    snprintf(local, len + 3, "%s%s", strchr(path, '/') ? "" : "./", path);
    /* The plugin's constructors run in dlopen: a crash there names it. */
    HOST_PLUGIN_CALL(path, "dlopen (the plugin's constructors)",
                   lib->handle = dlopen(local, RTLD_NOW | RTLD_LOCAL));
    free(local);
    if (!lib->handle)
        return sc_error_set(SC_ERR_PLUGIN, "cannot load: %s", dlerror());
    lib->hooks = lib_symbol(lib, "scorch_hooks");
    lib->user_funcs = lib_symbol(lib, "scorch_user_funcs");
    return SC_OK;
}

/* Closes lib and prefixes the message with path. */
static sc_status refuse(host_plugin_lib *lib, sc_status st, const char *path)
{
    host_plugin_lib_close(lib);
    return sc_error_wrap(st, "%s", path);
}

/* A plugin kind's check of the table its well-known symbol points to. */
typedef sc_status (*api_check)(const void *api);

static sc_status check_model_api(const void *api) { return check_model(api); }
static sc_status check_dataset_api(const void *api) { return sc_dataset_plugin_check(api); }
static sc_status check_job_api(const void *api) { return sc_job_plugin_check(api); }

/* Opens path, finds `symbol` and checks the table there; on a refusal
 * nothing stays open. */
static sc_status lib_open(const char *path, const char *symbol, api_check check,
                          host_plugin_lib *lib, const void **api)
{
    *lib = (host_plugin_lib){0};
    *api = NULL;
    sc_status st = lib_dlopen(path, lib);
    if (st == SC_OK && !(*api = lib_symbol(lib, symbol)))
        st = missing_symbol(lib, symbol);
    if (st == SC_OK)
        st = check(*api);
    if (st == SC_OK)
        return SC_OK;
    *api = NULL;
    return refuse(lib, st, path);
}

sc_status host_model_lib_open(const char *path, host_model_lib *out)
{
    const void *api;
    *out = (host_model_lib){0};
    SC_TRY(lib_open(path, "scorch_model_plugin", check_model_api, &out->lib, &api));
    out->api = api;
    return SC_OK;
}

sc_status host_dataset_lib_open(const char *path, host_dataset_lib *out)
{
    const void *api;
    *out = (host_dataset_lib){0};
    SC_TRY(lib_open(path, "scorch_dataset_plugin", check_dataset_api, &out->lib, &api));
    out->api = api;
    return SC_OK;
}

sc_status host_job_lib_open(const char *path, host_job_lib *out)
{
    const void *api;
    *out = (host_job_lib){0};
    SC_TRY(lib_open(path, "scorch_job_plugin", check_job_api, &out->lib, &api));
    out->api = api;
    return SC_OK;
}

/* The keys a hooks plugin takes (scorch_hook_arg_keys, ABI 1.2), NULL for
 * none. */
static sc_status arg_keys(const host_plugin_lib *lib, const char *const **keys)
{
    const sc_hook_arg_keys *declared = lib_symbol(lib, "scorch_hook_arg_keys");
    *keys = NULL;
    if (!declared)
        return SC_OK;
    SC_TRY(sc_abi_check(&declared->abi, SC_ABI_HOOK_ARG_KEYS));
    *keys = declared->keys;
    return SC_OK;
}

static bool listed(const char *const *keys, const char *key)
{
    for (; keys && *keys; keys++)
        if (strcmp(*keys, key) == 0)
            return true;
    return false;
}

/* The refusal of `key`: the nearest listed key, and the list. */
static sc_status unknown_arg(const char *key, const char *const *keys)
{
    if (!keys || !keys[0])
        return sc_error_set(SC_ERR_INVALID, "--hooks-args: unknown key '%s': the plugin takes "
                            "no arguments (it exports no scorch_hook_arg_keys)", key);
    char list[512] = "";
    size_t used = 0;
    int n = 0;
    for (; keys[n]; n++)
        if (used < sizeof list)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", n ? ", " : "",
                                     keys[n]);
    const char *near = sc_args_suggest(key, keys, n);
    if (near)
        return sc_error_set(SC_ERR_INVALID, "--hooks-args: unknown key '%s' (did you mean "
                            "'%s'? the plugin takes %s)", key, near, list);
    return sc_error_set(SC_ERR_INVALID, "--hooks-args: unknown key '%s' (the plugin takes %s)",
                        key, list);
}

/* Parses the --hooks-args into lib->args and refuses keys it does not take. */
static sc_status take_args(host_plugin_lib *lib, const char *text)
{
    const char *const *keys;
    SC_TRY(sc_args_parse(text, "hooks arg", &lib->args));
    SC_TRY(arg_keys(lib, &keys));
    for (int i = 0; i < sc_args_count(lib->args); i++)
        if (!listed(keys, sc_args_key(lib->args, i)))
            return unknown_arg(sc_args_key(lib->args, i), keys);
    return SC_OK;
}

sc_status host_hooks_lib_open(const char *path, const char *args, host_plugin_lib *out)
{
    /* The tables themselves are checked when they join the run's sets. */
    *out = (host_plugin_lib){0};
    sc_status st = lib_dlopen(path, out);
    if (st == SC_OK && !out->hooks && !out->user_funcs)
        st = missing_symbol(out, "scorch_hooks");
    if (st == SC_OK)
        st = take_args(out, args);
    return st == SC_OK ? SC_OK : refuse(out, st, path);
}

void host_plugin_lib_close(host_plugin_lib *lib)
{
    if (lib->handle) /* its destructors run in dlclose */
        HOST_PLUGIN_CALL(lib->path, "dlclose (the plugin's destructors)", dlclose(lib->handle));
    free(lib->path);
    sc_args_free(lib->args);
    *lib = (host_plugin_lib){0};
}
