/* hook_set.h — the hooks of a run, validated and ordered.
 *
 * Hooks come from the scorch_hooks tables of the model, dataset and
 * --hooks plugins. Adding a table checks its ABI header, that each point
 * is a known hook point (an unknown one is an error that suggests the
 * nearest known name), that each hook has a function and a name unique in
 * the run. Running a point calls its hooks by ascending priority, then in
 * the order they were added; the first error stops the rest and is
 * returned with a message naming the hook, its plugin and the point.
 *
 * Lifetime: the set keeps pointers to the hooks' names and functions, so
 * free it before closing the plugins they came from.
 * Thread rule: one thread (the training thread) uses a set.
 */
#ifndef SCORCH_HOST_HOOK_SET_H
#define SCORCH_HOST_HOOK_SET_H

#include "scorch/hooks.h"

typedef struct sc_hook_set sc_hook_set;

sc_status sc_hook_set_new(sc_hook_set **out);
void sc_hook_set_free(sc_hook_set *set);

/* Validates and adds every hook of table; `plugin` names its file. On an
 * error nothing of the table is added. */
sc_status sc_hook_set_add(sc_hook_set *set, const sc_hook_table *table, const char *plugin);

int sc_hook_set_count(const sc_hook_set *set);

/* Runs every hook registered for point (a known hook point name). */
sc_status sc_hook_set_run(const sc_hook_set *set, const char *point,
                          const sc_hook_context *ctx, const sc_hook_actions *actions);

/* The known hook point names, NULL-terminated. */
extern const char *const sc_hook_points[];

#endif
