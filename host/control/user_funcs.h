/* user_funcs.h — the run's user functions (scorch/user_funcs.h): the
 * scorch_user_funcs tables of the loaded plugins, checked when added and
 * called by name for `scorch-ctl RUN_DIR call NAME k=v,...`.
 *
 * Thread rule: tables are added on the training thread at set-up, before
 * the control thread starts; from then on the set does not change and
 * host_user_funcs_call runs on the control thread.
 */
#ifndef SCORCH_HOST_USER_FUNCS_H
#define SCORCH_HOST_USER_FUNCS_H

#include <stddef.h>

#include "scorch/user_funcs.h"

typedef struct host_user_funcs host_user_funcs;

sc_status host_user_funcs_new(host_user_funcs **out);
void host_user_funcs_free(host_user_funcs *funcs);

/* Checks table (ABI header; each function's name is non-empty, of
 * [A-Za-z0-9_-], unique in the run, and has a function) and adds it;
 * `plugin` names its file. On an error nothing of the table is added. */
sc_status host_user_funcs_add(host_user_funcs *funcs, const sc_user_func_table *table,
                            const char *plugin);

int host_user_funcs_count(const host_user_funcs *funcs);

/* Calls function `name` with `args` ("k=v,..."; "" for none), its text
 * into out (always NUL-terminated). Errors name the function and plugin;
 * an unknown name lists the known ones. */
sc_status host_user_funcs_call(const host_user_funcs *funcs, const char *name, const char *args,
                             char *out, size_t out_size);

#endif
