/* plugin_abi.c — the checks of a plugin's ABI structs that every program
 * loading plugins makes (the host's loader, sc_infer_open): the header
 * against each minor's size, the name and the required functions. One
 * table of sizes for all of them (scorch_host/plugin.h). */
#include <inttypes.h>
#include <string.h>

#include "scorch/hooks.h"
#include "scorch/job.h"
#include "scorch/user_funcs.h"
#include "scorch_host/plugin.h"

/* The end of a struct's field: a struct whose abi.size reaches it has it. */
#define END_OF(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))

enum { KNOWN_MINORS = 5 };
_Static_assert(SC_ABI_MINOR + 1 == KNOWN_MINORS, "a new minor needs its sizes in abi_structs");

/* Each struct's least abi.size per minor: the end of the last field that
 * minor defines, 0 before the struct existed. Minors only append, so a row
 * never shrinks; a row that stays the same means the minor added nothing
 * to that struct. */
static const struct {
    const char *what;
    size_t size[KNOWN_MINORS];
} abi_structs[SC_ABI_STRUCT_COUNT] = {
    [SC_ABI_MODEL] = {"model plugin",
                      {END_OF(sc_model_plugin, socket_param_trains),
                       END_OF(sc_model_plugin, preferred_device),
                       END_OF(sc_model_plugin, preferred_device),
                       END_OF(sc_model_plugin, preferred_device),
                       END_OF(sc_model_plugin, preferred_device)}},
    [SC_ABI_DATASET] = {"dataset plugin",
                        {END_OF(sc_dataset_plugin, class_name),
                         END_OF(sc_dataset_plugin, class_name),
                         END_OF(sc_dataset_plugin, class_name),
                         END_OF(sc_dataset_plugin, class_name),
                         END_OF(sc_dataset_plugin, index_decode)}},
    [SC_ABI_HOOKS] = {"hook table",
                      {END_OF(sc_hook_table, hooks), END_OF(sc_hook_table, hooks),
                       END_OF(sc_hook_table, hooks), END_OF(sc_hook_table, hooks),
                       END_OF(sc_hook_table, hooks)}},
    [SC_ABI_USER_FUNCS] = {"user function table",
                           {0, END_OF(sc_user_func_table, funcs),
                            END_OF(sc_user_func_table, funcs),
                            END_OF(sc_user_func_table, funcs),
                            END_OF(sc_user_func_table, funcs)}},
    [SC_ABI_HOOK_ARG_KEYS] = {"scorch_hook_arg_keys",
                              {0, 0, END_OF(sc_hook_arg_keys, keys),
                               END_OF(sc_hook_arg_keys, keys), END_OF(sc_hook_arg_keys, keys)}},
    [SC_ABI_HOOK_ACTIONS] = {"hook actions",
                             {0, 0, 0, END_OF(sc_hook_actions, log_image),
                              END_OF(sc_hook_actions, log_image)}},
    [SC_ABI_JOB] = {"job plugin", {0, 0, 0, 0, END_OF(sc_job_plugin, job_run)}},
};

size_t sc_abi_size(sc_abi_struct which, unsigned minor)
{
    return (unsigned)which < SC_ABI_STRUCT_COUNT && minor < KNOWN_MINORS
               ? abi_structs[which].size[minor]
               : 0;
}

/* The first minor that has the struct. */
static unsigned abi_since(sc_abi_struct which)
{
    unsigned minor = 0;
    while (!abi_structs[which].size[minor])
        minor++;
    return minor;
}

sc_status sc_abi_check_as(const sc_abi_header *abi, sc_abi_struct which, unsigned host_minor)
{
    if ((unsigned)which >= SC_ABI_STRUCT_COUNT)
        return sc_error_set(SC_ERR_INVALID, "sc_abi_check: no ABI struct %d", (int)which);
    const char *what = abi_structs[which].what;
    if (abi->magic != SC_ABI_MAGIC)
        return sc_error_set(SC_ERR_PLUGIN,
                            "%s has a bad magic number 0x%08" PRIx32 " (expected 0x%08x): "
                            "not made with SC_ABI_HEADER",
                            what, abi->magic, SC_ABI_MAGIC);
    if (abi->major != SC_ABI_MAJOR || abi->minor > host_minor)
        return sc_error_set(SC_ERR_PLUGIN,
                            "%s built for plugin ABI %u.%u, this scorch speaks %d.%u", what,
                            abi->major, abi->minor, SC_ABI_MAJOR, host_minor);
    size_t need = sc_abi_size(which, abi->minor);
    if (!need)
        return sc_error_set(SC_ERR_PLUGIN, "%s claims plugin ABI %u.%u, which has none (it came "
                            "with %d.%u)", what, abi->major, abi->minor, SC_ABI_MAJOR,
                            abi_since(which));
    if (abi->size < need)
        return sc_error_set(SC_ERR_PLUGIN,
                            "%s declares %" PRIu32 " bytes, plugin ABI %u.%u needs at least %zu",
                            what, abi->size, abi->major, abi->minor, need);
    return SC_OK;
}

sc_status sc_abi_check(const sc_abi_header *abi, sc_abi_struct which)
{
    return sc_abi_check_as(abi, which, SC_ABI_MINOR);
}

/* ---- a plugin's name and required functions ---- */

typedef struct required_fn {
    const char *name;
    size_t offset;
} required_fn;

#define REQUIRED(type, field) {#field, offsetof(type, field)}

static const required_fn model_required[] = {
    REQUIRED(sc_model_plugin, network_create),   REQUIRED(sc_model_plugin, network_destroy),
    REQUIRED(sc_model_plugin, network_forward),  REQUIRED(sc_model_plugin, socket_criterion),
    REQUIRED(sc_model_plugin, socket_metrics),   REQUIRED(sc_model_plugin, socket_main_metric),
};

static const required_fn dataset_required[] = {
    REQUIRED(sc_dataset_plugin, index_open),      REQUIRED(sc_dataset_plugin, index_close),
    REQUIRED(sc_dataset_plugin, dataset_open),    REQUIRED(sc_dataset_plugin, dataset_close),
    REQUIRED(sc_dataset_plugin, dataset_len),     REQUIRED(sc_dataset_plugin, dataset_spec),
    REQUIRED(sc_dataset_plugin, dataset_getitem),
};

static const required_fn job_required[] = {REQUIRED(sc_job_plugin, job_run)};

#define N_REQUIRED(a) (sizeof(a) / sizeof((a)[0]))

static sc_status check_name(const char *name, const char *kind)
{
    if (!name || !name[0])
        return sc_error_set(SC_ERR_PLUGIN, "%s plugin leaves name empty (required)", kind);
    return SC_OK;
}

static sc_status check_required(const void *api, const required_fn *req, size_t n,
                                const char *kind, const char *name)
{
    for (size_t i = 0; i < n; i++) {
        /* Function pointers share one representation on every platform
         * that has dlopen, so any of them reads as void (*)(void). */
        void (*fn)(void);
        memcpy(&fn, (const char *)api + req[i].offset, sizeof fn);
        if (!fn)
            return sc_error_set(SC_ERR_PLUGIN, "%s plugin '%s' leaves %s NULL (required)", kind,
                                name, req[i].name);
    }
    return SC_OK;
}

sc_status sc_model_plugin_check(const sc_model_plugin *api)
{
    SC_TRY(sc_abi_check(&api->abi, SC_ABI_MODEL));
    SC_TRY(check_name(api->name, "model"));
    return check_required(api, model_required, N_REQUIRED(model_required), "model", api->name);
}

sc_status sc_dataset_plugin_check(const sc_dataset_plugin *api)
{
    SC_TRY(sc_abi_check(&api->abi, SC_ABI_DATASET));
    SC_TRY(check_name(api->name, "dataset"));
    return check_required(api, dataset_required, N_REQUIRED(dataset_required), "dataset",
                          api->name);
}

sc_status sc_job_plugin_check(const sc_job_plugin *api)
{
    SC_TRY(sc_abi_check(&api->abi, SC_ABI_JOB));
    SC_TRY(check_name(api->name, "job"));
    return check_required(api, job_required, N_REQUIRED(job_required), "job", api->name);
}
