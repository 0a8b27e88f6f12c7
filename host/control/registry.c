#include "control/registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scorch/args.h"

sc_status host_plugin_names_keep(host_plugin_names *names, const char *plugin,
                                 const char **copy)
{
    char **grown = realloc(names->names, (size_t)(names->n + 1) * sizeof *grown);
    if (!grown)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for the name of %s", plugin);
    names->names = grown;
    char *name = strdup(plugin);
    if (!name)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for the name of %s", plugin);
    names->names[names->n++] = name;
    *copy = name;
    return SC_OK;
}

void host_plugin_names_free(host_plugin_names *names)
{
    for (int i = 0; i < names->n; i++)
        free(names->names[i]);
    free(names->names);
    *names = (host_plugin_names){0};
}

sc_status host_table_check_entries(const char *table, const char *count_field, int count,
                                   const char *array_field, const void *array)
{
    if (count < 0 || (count > 0 && !array))
        return sc_error_set(SC_ERR_PLUGIN, "%s has %s %d and %s %s", table, count_field, count,
                            array_field, array ? "set" : "NULL");
    return SC_OK;
}

const char *host_name_hint(const char *name, const char *const *known, int n, const char *label,
                           char *hint, size_t size)
{
    const char *near = sc_args_suggest(name, known, n);
    if (near) {
        snprintf(hint, size, "did you mean '%s'?", near);
        return hint;
    }
    size_t used = (size_t)snprintf(hint, size, "%s: ", label);
    for (int i = 0; i < n && used < size; i++)
        used += (size_t)snprintf(hint + used, size - used, "%s%s", i ? ", " : "", known[i]);
    return hint;
}
