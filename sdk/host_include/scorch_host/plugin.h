/* scorch_host/plugin.h — what the host tells libscorch about the plugin
 * code it runs: whether plugin code is running, and who the host is
 * (sc_host() in scorch/plugin.h); and the checks every program loading
 * plugins makes of their ABI structs (the host's loader, sc_infer_open),
 * with the one table of each minor's sizes.
 *
 * The host-only functions (the scorch_host headers) that act on what a
 * plugin is handed — its context, the parameter store, the process's
 * threads — refuse to run while plugin code runs on the calling thread: a
 * function that returns a status returns SC_ERR_STATE, one that returns
 * nothing does nothing, and both set the message "sc_ctx_reset is for the
 * host only; plugin code may not call it". libscorch cannot tell plugin
 * code from the host's by itself: the host says, through a probe.
 *
 * Host only: not installed, exported under SCORCH_HOST_1 (docs/abi.md,
 * "What libscorch exports").
 */
#ifndef SCORCH_SDK_HOST_PLUGIN_H
#define SCORCH_SDK_HOST_PLUGIN_H

#include <stdbool.h>
#include <stddef.h>

#include "scorch/export.h"
#include "scorch/job.h"
#include "scorch/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* True while plugin code runs on the calling thread: a call from the host
 * into a plugin, and what the plugin calls back (hook actions). Called on
 * every thread that calls a host-only function; must be cheap. */
typedef bool (*sc_plugin_code_probe)(void);

/* Installs the probe (NULL, the default, refuses nothing). Call it once,
 * before any thread runs plugin code. */
SC_API void sc_host_set_plugin_probe(sc_plugin_code_probe probe);

/* Makes info (NULL: none) what sc_host() returns on the calling thread;
 * returns the previous value, which the host restores. */
SC_API const sc_host_info *sc_host_set_info(const sc_host_info *info);

/* ---- checking a plugin's ABI structs (docs/abi.md, "How the host loads
 * and checks a plugin") ---- */

/* The structs of the plugin ABI that start with an sc_abi_header. */
typedef enum sc_abi_struct {
    SC_ABI_MODEL,         /* sc_model_plugin */
    SC_ABI_DATASET,       /* sc_dataset_plugin */
    SC_ABI_HOOKS,         /* sc_hook_table */
    SC_ABI_USER_FUNCS,    /* sc_user_func_table, since 1.1 */
    SC_ABI_HOOK_ARG_KEYS, /* sc_hook_arg_keys, since 1.2 */
    SC_ABI_HOOK_ACTIONS,  /* sc_hook_actions, the host's own; a header since 1.3 */
    SC_ABI_JOB,           /* sc_job_plugin (scorch/job.h), since 1.4 */
    SC_ABI_STRUCT_COUNT
} sc_abi_struct;

/* The least abi.size of `which` built for `minor` (at most SC_ABI_MINOR):
 * the end of the last field that minor defines; 0 when the struct came in
 * a later minor. */
SC_API size_t sc_abi_size(sc_abi_struct which, unsigned minor);

/* Checks an ABI header as a host speaking 1.host_minor does: magic, major
 * == SC_ABI_MAJOR, minor <= host_minor, a struct that minor has, and size
 * >= sc_abi_size(which, minor). The message names the struct ("model
 * plugin", "hook table"), and for a short one the minor and both sizes. */
SC_API sc_status sc_abi_check_as(const sc_abi_header *abi, sc_abi_struct which,
                                 unsigned host_minor);
/* sc_abi_check_as for this libscorch, which speaks SC_ABI_MINOR. */
SC_API sc_status sc_abi_check(const sc_abi_header *abi, sc_abi_struct which);

/* A plugin's struct as every loader checks it: the header (sc_abi_check),
 * a non-empty name, and every required function non-NULL ("model plugin
 * 'mlp' leaves network_forward NULL (required)"). The caller names the
 * file. */
SC_API sc_status sc_model_plugin_check(const sc_model_plugin *api);
SC_API sc_status sc_dataset_plugin_check(const sc_dataset_plugin *api);
SC_API sc_status sc_job_plugin_check(const sc_job_plugin *api);

/* Whether a plugin's struct holds `field`, one a later minor appended: its
 * abi.size reaches the field's end. Read an appended field only then. */
#define SC_ABI_HOLDS(api, field)                                                   \
    ((api)->abi.size >= (size_t)((const char *)&(api)->field - (const char *)(api)) + \
                            sizeof((api)->field))

#ifdef __cplusplus
}
#endif
#endif
