/* scorch/args.h — key=value argument lists (--model-args, --dataset-args).
 *
 * The host parses "hidden=256:128,dropout=0.1" into an sc_args and hands it
 * to the plugin, which reads typed values and rejects keys it does not know,
 * so a misspelt argument is an error, never silently ignored.
 */
#ifndef SCORCH_ARGS_H
#define SCORCH_ARGS_H

#include <stdbool.h>
#include <stdint.h>

#include "scorch/export.h"
#include "scorch/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sc_args sc_args;

/* Parses a comma-separated list of key=value pairs (empty text: no pairs).
 * `what` names the list in messages ("model arg"). A piece without '='
 * after a pair is refused with a reminder that lists use ':' ("hidden=64,32"
 * is most often hidden=64:32). */
SC_API sc_status sc_args_parse(const char *text, const char *what, sc_args **out);
SC_API void sc_args_free(sc_args *args);

SC_API int sc_args_count(const sc_args *args);
SC_API const char *sc_args_key(const sc_args *args, int i);
SC_API const char *sc_args_value(const sc_args *args, int i);

/* The value of key, or NULL when absent. */
SC_API const char *sc_args_get(const sc_args *args, const char *key);

/* Typed reads: *out = the value, or def when the key is absent; a value
 * that does not parse is an error naming the key. */
SC_API sc_status sc_args_int(const sc_args *args, const char *key, int64_t def, int64_t *out);
SC_API sc_status sc_args_float(const sc_args *args, const char *key, double def, double *out);
SC_API sc_status sc_args_bool(const sc_args *args, const char *key, bool def, bool *out);

/* A ':'-separated integer list ("256:128"); up to max values, count in *n.
 * When absent, *n = 0 and out is untouched. */
SC_API sc_status sc_args_ints(const sc_args *args, const char *key, int64_t *out, int max, int *n);

/* The name in names[0..n) nearest to word by edit distance (a swap of two
 * adjacent characters counts as one edit), when close enough to be a
 * likely typo: at most one edit per three characters of word; else NULL.
 * For "did you mean" hints. */
SC_API const char *sc_args_suggest(const char *word, const char *const *names, int n);

/* Fails, naming the first key not in the NULL-terminated list `known`,
 * the known key it is likely a typo of (sc_args_suggest: "did you mean
 * 'hidden'?"), and the known keys. */
SC_API sc_status sc_args_check_known(const sc_args *args, const char *const *known);

#ifdef __cplusplus
}
#endif
#endif
