/* scorch_host/plugin.h — what the host tells libscorch about the plugin
 * code it runs: whether plugin code is running, and who the host is
 * (sc_host() in scorch/plugin.h).
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

#include "scorch/export.h"
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

#ifdef __cplusplus
}
#endif
#endif
