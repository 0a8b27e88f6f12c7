#include "scorch_host/plugin.h"

const char *sc_split_name(sc_split split)
{
    switch (split) {
    case SC_SPLIT_TRAIN: return "train";
    case SC_SPLIT_VALID: return "valid";
    case SC_SPLIT_TEST: return "test";
    default: return "?";
    }
}

/* Per thread: replicas create their networks concurrently, each on its own
 * training thread, and each sees its own run's host. */
static _Thread_local const sc_host_info *current_host;

const sc_host_info *sc_host(void) { return current_host; }

const sc_host_info *sc_host_set_info(const sc_host_info *info)
{
    const sc_host_info *previous = current_host;
    current_host = info;
    return previous;
}
