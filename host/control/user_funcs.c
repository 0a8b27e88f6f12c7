/* user_funcs.c — a flat list of (function, plugin) in add order. */
#include "control/user_funcs.h"

#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "base/crash.h"
#include "control/registry.h"
#include "scorch/args.h"
#include "scorch_host/plugin.h"

typedef struct func_entry {
    sc_user_func func;  /* name and function point into the plugin */
    const char *plugin; /* owned by the set */
} func_entry;

struct host_user_funcs {
    func_entry *all;
    int n;
    host_plugin_names plugins; /* the entries' plugin names */
};

sc_status host_user_funcs_new(host_user_funcs **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? SC_OK : sc_error_set(SC_ERR_NOMEM, "out of memory for the user functions");
}

void host_user_funcs_free(host_user_funcs *funcs)
{
    if (!funcs)
        return;
    host_plugin_names_free(&funcs->plugins);
    free(funcs->all);
    free(funcs);
}

int host_user_funcs_count(const host_user_funcs *funcs) { return funcs->n; }

static const func_entry *find(const host_user_funcs *funcs, const char *name)
{
    for (int i = 0; i < funcs->n; i++)
        if (strcmp(funcs->all[i].func.name, name) == 0)
            return &funcs->all[i];
    return NULL;
}

static sc_status check_func(const host_user_funcs *funcs, const sc_user_func_table *table, int i)
{
    const sc_user_func *f = &table->funcs[i];
    if (!f->name || !f->name[0])
        return sc_error_set(SC_ERR_PLUGIN, "user function #%d has no name", i);
    if (strspn(f->name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") !=
        strlen(f->name))
        return sc_error_set(SC_ERR_PLUGIN,
                            "user function '%s' has a name outside [A-Za-z0-9_-]", f->name);
    if (!f->fn)
        return sc_error_set(SC_ERR_PLUGIN, "user function '%s' has no function", f->name);
    const func_entry *other = find(funcs, f->name);
    if (other)
        return sc_error_set(SC_ERR_PLUGIN, "user function '%s' is already defined by %s",
                            f->name, other->plugin);
    for (int j = 0; j < i; j++)
        if (strcmp(table->funcs[j].name, f->name) == 0)
            return sc_error_set(SC_ERR_PLUGIN, "user function '%s' appears twice in the table",
                                f->name);
    return SC_OK;
}

static sc_status check_table(const host_user_funcs *funcs, const sc_user_func_table *table)
{
    SC_TRY(sc_abi_check(&table->abi, SC_ABI_USER_FUNCS));
    SC_TRY(host_table_check_entries("user function table", "n_funcs", table->n_funcs, "funcs",
                                    table->funcs));
    for (int i = 0; i < table->n_funcs; i++)
        SC_TRY(check_func(funcs, table, i));
    return SC_OK;
}

static sc_status append_table(host_user_funcs *funcs, const sc_user_func_table *table,
                              const char *plugin)
{
    func_entry *all = realloc(funcs->all, (size_t)(funcs->n + table->n_funcs + 1) * sizeof *all);
    if (!all)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for the user functions");
    funcs->all = all;
    const char *name;
    SC_TRY(host_plugin_names_keep(&funcs->plugins, plugin, &name));
    for (int i = 0; i < table->n_funcs; i++)
        funcs->all[funcs->n++] = (func_entry){table->funcs[i], name};
    return SC_OK;
}

sc_status host_user_funcs_add(host_user_funcs *funcs, const sc_user_func_table *table,
                            const char *plugin)
{
    sc_status st = check_table(funcs, table);
    if (st == SC_OK)
        st = append_table(funcs, table, plugin);
    return st == SC_OK ? SC_OK : sc_error_wrap(st, "%s", plugin);
}

static sc_status unknown_function(const host_user_funcs *funcs, const char *name)
{
    if (funcs->n == 0)
        return sc_error_set(SC_ERR_INVALID,
                            "no user function '%s': the run's plugins export none", name);
    const char *names[64];
    int n = 0;
    for (; n < funcs->n && n < 64; n++)
        names[n] = funcs->all[n].func.name;
    char hint[512];
    return sc_error_set(SC_ERR_INVALID, "no user function '%s' (%s)", name,
                        host_name_hint(name, names, n, "the run has", hint, sizeof hint));
}

sc_status host_user_funcs_call(const host_user_funcs *funcs, const char *name, const char *args,
                             char *out, size_t out_size)
{
    out[0] = '\0';
    const func_entry *e = find(funcs, name);
    if (!e)
        return unknown_function(funcs, name);
    sc_args *parsed;
    SC_TRY(sc_args_parse(args, "argument", &parsed));
    /* A function that fails without a message must not inherit an old one. */
    sc_error_clear();
    host_plugin_call call = {.plugin = e->plugin, .function = "user function", .name = e->func.name};
    const host_plugin_call *outer = host_plugin_call_enter(&call);
    sc_status st = e->func.fn(parsed, out, out_size);
    host_plugin_call_leave(outer);
    sc_args_free(parsed);
    out[out_size - 1] = '\0';
    if (st != SC_OK)
        return sc_error_wrap(st, "user function '%s' of %s", name, e->plugin);
    return SC_OK;
}
