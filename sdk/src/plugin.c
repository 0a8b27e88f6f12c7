#include "scorch_host/plugin.h"

#include <string.h>

const char *sc_split_name(sc_split split)
{
    switch (split) {
    case SC_SPLIT_TRAIN: return "train";
    case SC_SPLIT_VALID: return "valid";
    case SC_SPLIT_TEST: return "test";
    default: return "?";
    }
}

sc_status sc_split_parse(const char *name, sc_split *out)
{
    for (int k = 0; k < SC_SPLIT_COUNT; k++)
        if (name && strcmp(name, sc_split_name((sc_split)k)) == 0) {
            *out = (sc_split)k;
            return SC_OK;
        }
    return sc_error_set(SC_ERR_INVALID, "'%s' is no split: train, valid or test",
                        name ? name : "(null)");
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
