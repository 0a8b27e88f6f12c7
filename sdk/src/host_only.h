/* host_only.h — the guard of the host-only functions that act on what a
 * plugin is handed (scorch_host/plugin.h). Private to libscorch. */
#ifndef SCORCH_HOST_ONLY_H
#define SCORCH_HOST_ONLY_H

#include "scorch/status.h"

/* SC_ERR_STATE, with a message naming `function`, while the host's probe
 * says plugin code runs on this thread; else SC_OK. Cheap without a
 * probe, and with one the probe's cost. */
sc_status sc_host_only(const char *function);

#endif
