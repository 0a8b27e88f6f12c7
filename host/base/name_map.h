/* name_map.h — renaming tensors by rules (scorch-train --init-map), and
 * the comma lists of name globs --freeze takes.
 *
 * RULES is a comma-separated list of FROM=TO rules (docs/weights.md):
 *
 *   features.0.weight=conv1.weight    one name to another
 *   features.*=conv*                  `*` matches any run of characters,
 *                                     dots included; each `*` of TO takes
 *                                     what the `*` of FROM in the same
 *                                     position matched
 *   *.num_batches_tracked=            an empty TO drops the tensor
 *
 * A name takes the FIRST rule whose FROM matches it whole; a name no rule
 * matches keeps its name. `*` is the only special character; where a name
 * could match in several ways, each `*` takes as few characters as it
 * can, left to right. TO has as many `*` as FROM (or is empty); FROM is
 * not empty and has no two `*` in a row; names hold no ',' or '='.
 * Spaces around a rule or its '=' are ignored.
 */
#ifndef SCORCH_HOST_NAME_MAP_H
#define SCORCH_HOST_NAME_MAP_H

#include <stddef.h>

#include "scorch/status.h"

enum { HOST_NAME_MAP_RULES = 64, HOST_NAME_RULE_MAX = 256 };

typedef struct host_name_rule {
    char from[HOST_NAME_RULE_MAX], to[HOST_NAME_RULE_MAX];
} host_name_rule;

typedef struct host_name_map {
    int n;
    host_name_rule rule[HOST_NAME_MAP_RULES];
} host_name_map;

/* Parses RULES ("" for none); errors quote the rule at fault. */
sc_status host_name_map_parse(const char *text, host_name_map *map);

/* The same check alone (config.c's validation of --init-map). */
sc_status host_name_map_check(const char *text);

/* What `name` becomes, into out (size bytes; "" when a rule drops it);
 * *rule: the index of the rule that matched, or -1 when none did (out is
 * then the name itself). Fails only when the result does not fit. */
sc_status host_name_map_apply(const host_name_map *map, const char *name, char *out,
                              size_t size, int *rule);

/* --freeze: a comma-separated list of globs (fnmatch), none empty and
 * each shorter than HOST_NAME_RULE_MAX. */
sc_status host_name_globs_check(const char *text);

/* Walks a comma-separated list: its first item, without spaces at either
 * end, as [*item, *item + *len); returns the rest after the comma, or NULL
 * after the last item. (An empty text is one empty item: callers skip
 * it.) */
const char *host_name_list_next(const char *p, const char **item, size_t *len);

#endif
