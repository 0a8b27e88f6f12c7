/* name_map.c — --init-map rules and --freeze glob lists (name_map.h). */
#include "base/name_map.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* [*p, *end) without the spaces at either end. */
static void trim(const char **p, const char **end)
{
    while (*p < *end && **p == ' ')
        (*p)++;
    while (*end > *p && (*end)[-1] == ' ')
        (*end)--;
}

static int count_stars(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '*';
    return n;
}

/* One side of a rule, [p, end), into out. */
static sc_status copy_side(const char *rule, int len, const char *p, const char *end, char *out)
{
    if (end - p >= HOST_NAME_RULE_MAX)
        return sc_error_set(SC_ERR_INVALID, "rule '%.*s': a side longer than %d characters", len,
                            rule, HOST_NAME_RULE_MAX - 1);
    memcpy(out, p, (size_t)(end - p));
    out[end - p] = '\0';
    return SC_OK;
}

/* The rule [p, end) of the list, trimmed. */
static sc_status parse_rule(const char *p, const char *end, host_name_rule *r)
{
    int len = (int)(end - p);
    const char *eq = memchr(p, '=', (size_t)len);
    if (len == 0)
        return sc_error_set(SC_ERR_INVALID, "an empty rule (two commas in a row?)");
    if (!eq || memchr(eq + 1, '=', (size_t)(end - eq - 1)))
        return sc_error_set(SC_ERR_INVALID, "rule '%.*s': write FROM=TO, with one '='", len, p);
    const char *from_end = eq, *to = eq + 1;
    trim(&p, &from_end);
    trim(&to, &end);
    SC_TRY(copy_side(p, len, p, from_end, r->from));
    SC_TRY(copy_side(p, len, to, end, r->to));
    if (!r->from[0])
        return sc_error_set(SC_ERR_INVALID, "rule '%.*s': FROM is empty", len, p);
    if (strstr(r->from, "**"))
        return sc_error_set(SC_ERR_INVALID, "rule '%.*s': two '*' in a row match nothing more "
                            "than one", len, p);
    int stars = count_stars(r->from);
    if (r->to[0] && count_stars(r->to) != stars)
        return sc_error_set(SC_ERR_INVALID, "rule '%.*s': FROM has %d '*' and TO %d: give TO as "
                            "many, or leave it empty to drop what FROM matches", len, p, stars,
                            count_stars(r->to));
    return SC_OK;
}

const char *host_name_list_next(const char *p, const char **item, size_t *len)
{
    const char *end = p + strcspn(p, ",");
    const char *start = p, *stop = end;
    trim(&start, &stop);
    *item = start;
    *len = (size_t)(stop - start);
    return *end ? end + 1 : NULL;
}

sc_status host_name_map_parse(const char *text, host_name_map *map)
{
    memset(map, 0, sizeof *map);
    for (const char *rest = *text ? text : NULL; rest;) {
        const char *item;
        size_t len;
        rest = host_name_list_next(rest, &item, &len);
        if (map->n == HOST_NAME_MAP_RULES)
            return sc_error_set(SC_ERR_INVALID, "more than %d rules", HOST_NAME_MAP_RULES);
        SC_TRY(parse_rule(item, item + len, &map->rule[map->n++]));
    }
    return SC_OK;
}

sc_status host_name_map_check(const char *text)
{
    host_name_map map;
    return host_name_map_parse(text, &map);
}

/* Whether pattern p matches name s whole; where the k-th `*` matched:
 * start[k], len[k]. Backtracking to the last `*` only is enough for `*`
 * patterns, and leaves each earlier `*` the fewest characters. */
static bool glob_match(const char *p, const char *s, size_t *start, size_t *len)
{
    size_t pi = 0, si = 0, star = SIZE_MAX, resume = 0;
    int k = 0, star_k = 0;
    while (s[si]) {
        if (p[pi] == '*') {
            star = pi++;
            star_k = k++;
            start[star_k] = resume = si;
            len[star_k] = 0;
        } else if (p[pi] && p[pi] == s[si]) {
            pi++;
            si++;
        } else if (star != SIZE_MAX) {
            pi = star + 1;
            si = ++resume;
            k = star_k + 1;
            len[star_k] = resume - start[star_k];
        } else {
            return false;
        }
    }
    for (; p[pi] == '*'; pi++, k++) {
        start[k] = si;
        len[k] = 0;
    }
    return !p[pi];
}

/* TO with each `*` replaced by what FROM's matched. */
static sc_status substitute(const char *to, const char *name, const size_t *start,
                            const size_t *len, char *out, size_t size)
{
    size_t n = 0;
    for (int k = 0; *to; to++) {
        const char *piece = *to == '*' ? name + start[k] : to;
        size_t piece_len = *to == '*' ? len[k++] : 1;
        if (n + piece_len >= size)
            return sc_error_set(SC_ERR_INVALID, "'%.200s' renamed is longer than %zu characters",
                                name, size - 1);
        memcpy(out + n, piece, piece_len);
        n += piece_len;
    }
    out[n] = '\0';
    return SC_OK;
}

sc_status host_name_map_apply(const host_name_map *map, const char *name, char *out,
                              size_t size, int *rule)
{
    size_t start[HOST_NAME_RULE_MAX], len[HOST_NAME_RULE_MAX];
    for (int i = 0; i < map->n; i++)
        if (glob_match(map->rule[i].from, name, start, len)) {
            *rule = i;
            return substitute(map->rule[i].to, name, start, len, out, size);
        }
    *rule = -1;
    if (strlen(name) >= size)
        return sc_error_set(SC_ERR_INVALID, "name '%.200s' is longer than %zu characters", name,
                            size - 1);
    strcpy(out, name);
    return SC_OK;
}

sc_status host_name_globs_check(const char *text)
{
    for (const char *rest = *text ? text : NULL; rest;) {
        const char *item;
        size_t len;
        rest = host_name_list_next(rest, &item, &len);
        if (len == 0)
            return sc_error_set(SC_ERR_INVALID, "an empty pattern (two commas in a row?)");
        if (len >= HOST_NAME_RULE_MAX)
            return sc_error_set(SC_ERR_INVALID, "pattern '%.40s...' is longer than %d characters",
                                item, HOST_NAME_RULE_MAX - 1);
    }
    return SC_OK;
}
