#include "host_only.h"

#include <stdatomic.h>

#include "scorch_host/plugin.h"

/* Set once by the host before plugin code runs; read on every thread. */
static _Atomic(sc_plugin_code_probe) plugin_code_probe;

void sc_host_set_plugin_probe(sc_plugin_code_probe probe)
{
    if (sc_host_only(__func__) == SC_OK)
        atomic_store_explicit(&plugin_code_probe, probe, memory_order_release);
}

sc_status sc_host_only(const char *function)
{
    sc_plugin_code_probe probe = atomic_load_explicit(&plugin_code_probe, memory_order_acquire);
    if (!probe || !probe())
        return SC_OK;
    return sc_error_set(SC_ERR_STATE, "%s is for the host only; plugin code may not call it",
                        function);
}
