/* hook_set.h — the hooks of a run, validated and ordered.
 *
 * Hooks come from the scorch_hooks tables of the model, dataset and
 * --hooks plugins. Adding a table checks its ABI header, that each point
 * is a known hook point (an unknown one is an error that suggests the
 * nearest known name), that each hook has a function and a name unique in
 * the run (but for a checkpoint_save and a checkpoint_load hook of one
 * table, which share a name to pair up: the state one saves the other
 * gets back). Running a point calls its hooks by ascending priority, then in
 * the order they were added, each with its own copy of the context that
 * names it (ctx->hook); the first error stops the rest and is returned
 * with a message naming the hook, its plugin and the point.
 *
 * Lifetime: the set keeps pointers to the hooks' names and functions, so
 * free it before closing the plugins they came from.
 * Thread rule: one thread (the training thread) uses a set.
 */
#ifndef SCORCH_HOST_HOOK_SET_H
#define SCORCH_HOST_HOOK_SET_H

#include "scorch/hooks.h"

typedef struct host_hook_set host_hook_set;

/* The longest hook name: it names the hook's checkpoint entry. */
enum { HOST_HOOK_NAME_MAX = 128 };

sc_status host_hook_set_new(host_hook_set **out);
void host_hook_set_free(host_hook_set *set);

/* Validates and adds every hook of table; `plugin` names its file, and
 * its hooks see `args` as ctx->args (which must outlive the set). On an
 * error nothing of the table is added. */
sc_status host_hook_set_add(host_hook_set *set, const sc_hook_table *table, const char *plugin,
                          const sc_args *args);

int host_hook_set_count(const host_hook_set *set);
/* Whether some hook runs at point ("after_backward"). */
bool host_hook_set_has(const host_hook_set *set, const char *point);

/* Runs every hook registered for point (a known hook point name). The
 * actions must carry SC_ABI_HEADER(sc_hook_actions), else no hook runs and
 * the error names the point; a hook of a table built for 1.0 to 1.2 gets
 * them as it was compiled to read them, without the header. */
sc_status host_hook_set_run(host_hook_set *set, const char *point, const sc_hook_context *ctx,
                          const sc_hook_actions *actions);

/* The hooks' own checkpoint state: one blob per hook name, stored in a
 * checkpoint as "hook/<name>" (checkpoint.h). A zeroed struct is empty. */
typedef struct host_hook_blob {
    char *hook;
    void *data;
    size_t size;
} host_hook_blob;

typedef struct host_hook_blobs {
    int n;
    host_hook_blob *items;
} host_hook_blobs;

/* Stores a copy of data as hook's blob, replacing an earlier one. */
sc_status host_hook_blobs_put(host_hook_blobs *blobs, const char *hook, const void *data,
                            size_t size);
/* hook's blob and its size, or NULL and 0. */
const void *host_hook_blobs_get(const host_hook_blobs *blobs, const char *hook, size_t *size);
void host_hook_blobs_clear(host_hook_blobs *blobs);

/* Runs checkpoint_load: each hook also sees its own blob (ctx->blob,
 * NULL when the checkpoint has none for it). */
sc_status host_hook_set_run_load(host_hook_set *set, const sc_hook_context *ctx,
                               const sc_hook_actions *actions, const host_hook_blobs *blobs);

/* The hook being called right now (for actions that act on the calling
 * hook's behalf, like save_blob), or NULL between hooks. */
const sc_hook *host_hook_set_running(const host_hook_set *set);

/* after_backward's read-only views of the trainable parameters'
 * gradients, in creation order (*out freed by the caller). The views
 * point into the store's flat gradient buffer, so they stay valid while
 * no parameter is added. */
sc_status host_hook_grads_new(const sc_params *params, const float *grads, sc_hook_grad **out,
                            int *n);

/* The known hook point names, NULL-terminated. */
extern const char *const host_hook_points[];

#endif
