/* registry.h — what the run's two registries of plugin entries share: the
 * hook set (hook_set.h) and the user functions (user_funcs.h) each take
 * the tables that plugins export, keep the plugin file each entry came
 * from, and refuse a name they do not know with the nearest known one.
 *
 * Thread rule: that of the registry using it.
 */
#ifndef SCORCH_HOST_REGISTRY_H
#define SCORCH_HOST_REGISTRY_H

#include <stddef.h>

#include "scorch/status.h"

/* One copy of each added table's plugin file name, which the registry's
 * entries point at until it is freed. A zeroed struct is empty. */
typedef struct host_plugin_names {
    char **names;
    int n;
} host_plugin_names;

/* Keeps a copy of plugin; *copy points at it. */
sc_status host_plugin_names_keep(host_plugin_names *names, const char *plugin,
                                 const char **copy);
void host_plugin_names_free(host_plugin_names *names);

/* A table's entries: a count of at least 0, and an array unless the count
 * is 0. `table` names the table in the refusal ("hook table has n_hooks -1
 * and hooks NULL"), count_field and array_field its two fields. */
sc_status host_table_check_entries(const char *table, const char *count_field, int count,
                                   const char *array_field, const void *array);

/* What a refusal of `name`, which is none of known[n], says after it:
 * "did you mean 'x'?" when one is near, else "<label>: a, b, c". Written
 * into hint (cut to size); returns hint. */
const char *host_name_hint(const char *name, const char *const *known, int n, const char *label,
                           char *hint, size_t size);

#endif
