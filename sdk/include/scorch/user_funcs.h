/* scorch/user_funcs.h — named functions a plugin offers to a person at a
 * running training (plugin ABI v1.1).
 *
 * A plugin (model, dataset or --hooks) may export
 *
 *   SC_PLUGIN_EXPORT const sc_user_func_table scorch_user_funcs = {
 *       SC_ABI_HEADER(sc_user_func_table), 1, (const sc_user_func[]){
 *           {"best_so_far", "the best validation loss seen by my hooks", best_so_far},
 *       }};
 *
 * and `scorch-ctl RUN_DIR call best_so_far k=v,...` calls it while the run
 * trains: the function gets the key=value arguments (scorch/args.h) and
 * writes a NUL-terminated text result into out (out_size bytes; the host
 * cuts what does not fit), or returns an error with sc_error_set(), whose
 * message scorch-ctl prints. The host checks the table when the run starts
 * (ABI header, non-empty names unique in the run, a function each).
 *
 * Thread rule: user functions run on the control thread, one at a time,
 * while the training thread trains. They get no access to the trainer;
 * what they share with a plugin's hooks or network they must synchronise
 * themselves (C11 atomics, a mutex). See docs/hooks.md.
 */
#ifndef SCORCH_USER_FUNCS_H
#define SCORCH_USER_FUNCS_H

#include <stddef.h>

#include "scorch/args.h"
#include "scorch/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* [control-thread] Runs for `scorch-ctl RUN_DIR call NAME k=v,...`, one call
 * at a time, concurrently with the training thread. */
typedef sc_status (*sc_user_fn)(const sc_args *args, char *out, size_t out_size);

typedef struct sc_user_func {
    const char *name; /* [A-Za-z0-9_-], unique within the run */
    const char *help; /* one line for people, or NULL */
    sc_user_fn fn;
} sc_user_func;

typedef struct sc_user_func_table {
    sc_abi_header abi;
    int n_funcs;
    const sc_user_func *funcs;
} sc_user_func_table;

#ifdef __cplusplus
}
#endif
#endif
