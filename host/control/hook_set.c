/* hook_set.c — the run's hooks: validated when a table is added, and laid
 * out per point in running order, so running a point is one walk over a
 * short array (and a point without hooks costs a lookup). */
#include "control/hook_set.h"

#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "base/crash.h"
#include "control/registry.h"
#include "scorch/args.h"
#include "scorch_host/plugin.h"

const char *const host_hook_points[] = {
    "train_begin", "train_end",   "epoch_begin", "epoch_end",
    "phase_begin", "phase_end",   "batch_begin", "batch_end",
    "after_backward", "checkpoint_save", "checkpoint_load",
    NULL,
};

enum { N_POINTS = 11 };
_Static_assert(sizeof host_hook_points / sizeof host_hook_points[0] == N_POINTS + 1,
               "N_POINTS counts host_hook_points");

typedef struct hook_entry {
    sc_hook hook;        /* name and point point into the plugin */
    const char *plugin;  /* owned by the set */
    const sc_args *args; /* the plugin's (ctx->args) */
    bool legacy_actions; /* its table's minor had actions without a header */
} hook_entry;

typedef struct point_hooks {
    int n;
    hook_entry *hooks; /* by priority, then add order */
} point_hooks;

struct host_hook_set {
    hook_entry *all; /* in add order */
    int n, cap;
    host_plugin_names plugins; /* the entries' plugin names */
    point_hooks points[N_POINTS];
    const hook_entry *running; /* the hook being called, or NULL */
};

static int point_index(const char *point)
{
    for (int p = 0; p < N_POINTS; p++)
        if (strcmp(point, host_hook_points[p]) == 0)
            return p;
    return -1;
}

sc_status host_hook_set_new(host_hook_set **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? SC_OK : sc_error_set(SC_ERR_NOMEM, "out of memory for the hook set");
}

void host_hook_set_free(host_hook_set *set)
{
    if (!set)
        return;
    for (int p = 0; p < N_POINTS; p++)
        free(set->points[p].hooks);
    host_plugin_names_free(&set->plugins);
    free(set->all);
    free(set);
}

int host_hook_set_count(const host_hook_set *set) { return set->n; }

static sc_status unknown_point(const sc_hook *h)
{
    char hint[256];
    return sc_error_set(SC_ERR_PLUGIN, "hook '%s' uses unknown point '%s' (%s)", h->name, h->point,
                        host_name_hint(h->point, host_hook_points, N_POINTS, "known points", hint,
                                       sizeof hint));
}

static const hook_entry *find_name(const host_hook_set *set, const char *name)
{
    for (int i = 0; i < set->n; i++)
        if (strcmp(set->all[i].hook.name, name) == 0)
            return &set->all[i];
    return NULL;
}

/* A checkpoint_save and a checkpoint_load hook of one table may share a
 * name: it names the state ("hook/<name>") the one saves and the other
 * gets back. */
static bool state_pair(const sc_hook *a, const sc_hook *b)
{
    bool a_saves = strcmp(a->point, "checkpoint_save") == 0;
    bool b_saves = strcmp(b->point, "checkpoint_save") == 0;
    return (a_saves && strcmp(b->point, "checkpoint_load") == 0) ||
           (b_saves && strcmp(a->point, "checkpoint_load") == 0);
}

/* Checks hook i of table against the set and the table's earlier hooks. */
static sc_status check_hook(const host_hook_set *set, const sc_hook_table *table, int i)
{
    const sc_hook *h = &table->hooks[i];
    if (!h->name || !h->name[0])
        return sc_error_set(SC_ERR_PLUGIN, "hook #%d has no name", i);
    if (strlen(h->name) > HOST_HOOK_NAME_MAX)
        return sc_error_set(SC_ERR_PLUGIN, "hook #%d's name is longer than %d characters", i,
                            HOST_HOOK_NAME_MAX);
    if (!h->point)
        return sc_error_set(SC_ERR_PLUGIN, "hook '%s' has no point", h->name);
    if (point_index(h->point) < 0)
        return unknown_point(h);
    if (!h->fn)
        return sc_error_set(SC_ERR_PLUGIN, "hook '%s' has no function", h->name);
    const hook_entry *other = find_name(set, h->name);
    if (other)
        return sc_error_set(SC_ERR_PLUGIN, "hook name '%s' is already used by %s", h->name,
                            other->plugin);
    for (int j = 0; j < i; j++)
        if (strcmp(table->hooks[j].name, h->name) == 0 && !state_pair(h, &table->hooks[j]))
            return sc_error_set(SC_ERR_PLUGIN, "hook name '%s' appears twice in the table",
                                h->name);
    return SC_OK;
}

static sc_status check_table(const host_hook_set *set, const sc_hook_table *table)
{
    if (!table)
        return sc_error_set(SC_ERR_INVALID, "no hook table");
    SC_TRY(sc_abi_check(&table->abi, SC_ABI_HOOKS));
    SC_TRY(host_table_check_entries("hook table", "n_hooks", table->n_hooks, "hooks",
                                    table->hooks));
    for (int i = 0; i < table->n_hooks; i++)
        SC_TRY(check_hook(set, table, i));
    return SC_OK;
}

/* Builds point p's running order from set->all: ascending priority, ties
 * in add order (insertion sort, which is stable). */
static sc_status build_point(const host_hook_set *set, int p, point_hooks *out)
{
    *out = (point_hooks){0};
    for (int i = 0; i < set->n; i++)
        out->n += point_index(set->all[i].hook.point) == p;
    if (!out->n)
        return SC_OK;
    if (!(out->hooks = malloc((size_t)out->n * sizeof *out->hooks)))
        return sc_error_set(SC_ERR_NOMEM, "out of memory for hooks");
    int k = 0;
    for (int i = 0; i < set->n; i++) {
        if (point_index(set->all[i].hook.point) != p)
            continue;
        int j = k++;
        for (; j > 0 && out->hooks[j - 1].hook.priority > set->all[i].hook.priority; j--)
            out->hooks[j] = out->hooks[j - 1];
        out->hooks[j] = set->all[i];
    }
    return SC_OK;
}

/* Rebuilds every point's order; on failure the old orders stay. */
static sc_status rebuild_points(host_hook_set *set)
{
    point_hooks fresh[N_POINTS];
    for (int p = 0; p < N_POINTS; p++) {
        sc_status st = build_point(set, p, &fresh[p]);
        if (st != SC_OK) {
            while (p--)
                free(fresh[p].hooks);
            return st;
        }
    }
    for (int p = 0; p < N_POINTS; p++) {
        free(set->points[p].hooks);
        set->points[p] = fresh[p];
    }
    return SC_OK;
}

/* Makes room for n more hooks. */
static sc_status reserve(host_hook_set *set, int n)
{
    if (set->n + n > set->cap) {
        int cap = set->cap ? set->cap : 8;
        while (cap < set->n + n)
            cap *= 2;
        hook_entry *all = realloc(set->all, (size_t)cap * sizeof *all);
        if (!all)
            return sc_error_set(SC_ERR_NOMEM, "out of memory for hooks");
        set->all = all;
        set->cap = cap;
    }
    return SC_OK;
}

static sc_status append_table(host_hook_set *set, const sc_hook_table *table, const char *plugin,
                              const sc_args *args)
{
    SC_TRY(reserve(set, table->n_hooks));
    const char *name;
    SC_TRY(host_plugin_names_keep(&set->plugins, plugin, &name));
    int first = set->n;
    for (int i = 0; i < table->n_hooks; i++)
        set->all[set->n++] = (hook_entry){table->hooks[i], name, args,
                                          !sc_abi_size(SC_ABI_HOOK_ACTIONS, table->abi.minor)};
    sc_status st = rebuild_points(set);
    if (st != SC_OK)
        set->n = first; /* the name stays kept, unused, until the set is freed */
    return st;
}

sc_status host_hook_set_add(host_hook_set *set, const sc_hook_table *table, const char *plugin,
                          const sc_args *args)
{
    sc_status st = check_table(set, table);
    if (st == SC_OK)
        st = append_table(set, table, plugin, args);
    return st == SC_OK ? SC_OK : sc_error_wrap(st, "%s", plugin);
}

/* Tables built for 1.0 to 1.2 were compiled against an sc_hook_actions
 * that began at `host`, without the header. The fields from `host` on keep
 * that layout, so from there on the struct is what such a hook expects. */
_Static_assert(offsetof(sc_hook_actions, log_image) - offsetof(sc_hook_actions, host) ==
                   8 * sizeof(void *),
               "the actions after the header keep their 1.2 layout");

static const sc_hook_actions *legacy_view(const sc_hook_actions *actions)
{
    return (const sc_hook_actions *)(const void *)&actions->host;
}

/* Calls each hook of point with its own copy of ctx, naming it (and
 * carrying its blob, when blobs are given), once the actions' header is
 * checked. */
static sc_status run_point(host_hook_set *set, const char *point, const sc_hook_context *ctx,
                           const sc_hook_actions *actions, const host_hook_blobs *blobs)
{
    int p = point_index(point);
    if (p < 0)
        return sc_error_set(SC_ERR_INVALID, "unknown hook point '%s'", point);
    const point_hooks *ph = &set->points[p];
    if (ph->n && sc_abi_check(&actions->abi, SC_ABI_HOOK_ACTIONS) != SC_OK)
        return sc_error_wrap(SC_ERR_STATE, "the actions given to the hooks at %s", point);
    for (int i = 0; i < ph->n; i++) {
        const hook_entry *e = &ph->hooks[i];
        sc_hook_context own = *ctx;
        own.hook = e->hook.name;
        own.args = e->args;
        if (blobs)
            own.blob = host_hook_blobs_get(blobs, e->hook.name, &own.blob_size);
        /* A hook that fails without a message must not inherit an old one. */
        sc_error_clear();
        set->running = e;
        host_plugin_call call = {.plugin = e->plugin, .function = "hook", .name = e->hook.name,
                               .point = point};
        const host_plugin_call *outer = host_plugin_call_enter(&call);
        sc_status st = e->hook.fn(&own, e->legacy_actions ? legacy_view(actions) : actions);
        host_plugin_call_leave(outer);
        set->running = NULL;
        if (st != SC_OK)
            return sc_error_wrap(st, "hook '%s' of %s at %s", e->hook.name, e->plugin, point);
    }
    return SC_OK;
}

bool host_hook_set_has(const host_hook_set *set, const char *point)
{
    int p = point_index(point);
    return p >= 0 && set->points[p].n > 0;
}

sc_status host_hook_set_run(host_hook_set *set, const char *point, const sc_hook_context *ctx,
                          const sc_hook_actions *actions)
{
    return run_point(set, point, ctx, actions, NULL);
}

sc_status host_hook_set_run_load(host_hook_set *set, const sc_hook_context *ctx,
                               const sc_hook_actions *actions, const host_hook_blobs *blobs)
{
    return run_point(set, "checkpoint_load", ctx, actions, blobs);
}

const sc_hook *host_hook_set_running(const host_hook_set *set)
{
    return set->running ? &set->running->hook : NULL;
}

/* ---- the hooks' checkpoint entries ---- */

static host_hook_blob *blobs_find(const host_hook_blobs *blobs, const char *hook)
{
    for (int i = 0; i < blobs->n; i++)
        if (strcmp(blobs->items[i].hook, hook) == 0)
            return &blobs->items[i];
    return NULL;
}

sc_status host_hook_blobs_put(host_hook_blobs *blobs, const char *hook, const void *data,
                            size_t size)
{
    void *copy = malloc(size ? size : 1);
    if (!copy)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for hook '%s''s %zu-byte blob", hook,
                            size);
    if (size)
        memcpy(copy, data, size);
    host_hook_blob *b = blobs_find(blobs, hook);
    if (!b) {
        host_hook_blob *items = realloc(blobs->items, (size_t)(blobs->n + 1) * sizeof *items);
        char *name = items ? strdup(hook) : NULL;
        if (items)
            blobs->items = items;
        if (!name) {
            free(copy);
            return sc_error_set(SC_ERR_NOMEM, "out of memory for hook '%s''s blob", hook);
        }
        b = &blobs->items[blobs->n++];
        *b = (host_hook_blob){.hook = name};
    }
    free(b->data);
    b->data = copy;
    b->size = size;
    return SC_OK;
}

const void *host_hook_blobs_get(const host_hook_blobs *blobs, const char *hook, size_t *size)
{
    const host_hook_blob *b = blobs_find(blobs, hook);
    *size = b ? b->size : 0;
    return b ? b->data : NULL;
}

void host_hook_blobs_clear(host_hook_blobs *blobs)
{
    for (int i = 0; i < blobs->n; i++) {
        free(blobs->items[i].hook);
        free(blobs->items[i].data);
    }
    free(blobs->items);
    *blobs = (host_hook_blobs){0};
}

/* ---- after_backward's view of the gradients ---- */

sc_status host_hook_grads_new(const sc_params *params, const float *grads, sc_hook_grad **out,
                            int *n)
{
    int count = 0;
    for (int i = 0; i < sc_params_count(params); i++)
        count += (sc_params_at(params, i)->flags & SC_TENSOR_REQUIRES_GRAD) != 0;
    *n = 0;
    *out = calloc(count ? (size_t)count : 1, sizeof **out);
    if (!*out)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for the gradient views");
    for (int i = 0; i < sc_params_count(params); i++) {
        const sc_tensor *p = sc_params_at(params, i);
        if (p->flags & SC_TENSOR_REQUIRES_GRAD)
            (*out)[(*n)++] = (sc_hook_grad){p->name, p->ndim, p->shape, p->numel,
                                            grads + sc_params_offset(params, i)};
    }
    return SC_OK;
}
