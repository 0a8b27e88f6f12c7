#include "scorch/args.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <strings.h>

enum { ARGS_MAX = 64 };

struct sc_args {
    char *text; /* the parsed copy; keys and values point into it */
    const char *what;
    int count;
    const char *keys[ARGS_MAX];
    const char *values[ARGS_MAX];
};

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    char *end = s + strlen(s);
    while (end > s && (end[-1] == ' ' || end[-1] == '\t'))
        *--end = '\0';
    return s;
}

/* A pair without '=' after another pair is most often a list written with
 * commas ("hidden=64,32"), which the pairs' own separator splits. */
static sc_status no_equals(const sc_args *a, const char *pair)
{
    if (!a->count)
        return sc_error_set(SC_ERR_INVALID, "%s '%s': expected key=value", a->what, pair);
    const char *key = a->keys[a->count - 1], *value = a->values[a->count - 1];
    return sc_error_set(SC_ERR_INVALID, "%s '%s': expected key=value; if it continues %s's "
                        "list, lists use ':' (%s=%s:%s)", a->what, pair, key, key, value, pair);
}

static sc_status add_pair(sc_args *a, char *pair)
{
    char *eq = strchr(pair, '=');
    if (!eq)
        return no_equals(a, trim(pair));
    *eq = '\0';
    const char *key = trim(pair);
    if (!*key)
        return sc_error_set(SC_ERR_INVALID, "%s: empty key before '='", a->what);
    if (sc_args_get(a, key))
        return sc_error_set(SC_ERR_INVALID, "%s '%s' is given twice", a->what, key);
    if (a->count == ARGS_MAX)
        return sc_error_set(SC_ERR_INVALID, "%s: more than %d pairs", a->what, ARGS_MAX);
    a->keys[a->count] = key;
    a->values[a->count] = trim(eq + 1);
    a->count++;
    return SC_OK;
}

sc_status sc_args_parse(const char *text, const char *what, sc_args **out)
{
    *out = NULL;
    sc_args *a = calloc(1, sizeof *a);
    if (!a || !(a->text = strdup(text ? text : ""))) {
        free(a);
        return sc_error_set(SC_ERR_NOMEM, "out of memory parsing %ss", what);
    }
    a->what = what;
    char *save = NULL;
    for (char *pair = strtok_r(a->text, ",", &save); pair;
         pair = strtok_r(NULL, ",", &save)) {
        if (!*trim(pair))
            continue;
        sc_status st = add_pair(a, pair);
        if (st != SC_OK) {
            sc_args_free(a);
            return st;
        }
    }
    *out = a;
    return SC_OK;
}

void sc_args_free(sc_args *args)
{
    if (!args)
        return;
    free(args->text);
    free(args);
}

int sc_args_count(const sc_args *args) { return args->count; }

const char *sc_args_key(const sc_args *args, int i) { return args->keys[i]; }

const char *sc_args_value(const sc_args *args, int i) { return args->values[i]; }

const char *sc_args_get(const sc_args *args, const char *key)
{
    for (int i = 0; i < args->count; i++)
        if (strcmp(args->keys[i], key) == 0)
            return args->values[i];
    return NULL;
}

static sc_status parse_int(const sc_args *a, const char *key, const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || errno)
        return sc_error_set(SC_ERR_INVALID, "%s '%s': '%s' is not an integer", a->what,
                            key, s);
    *out = v;
    return SC_OK;
}

sc_status sc_args_int(const sc_args *args, const char *key, int64_t def, int64_t *out)
{
    const char *v = sc_args_get(args, key);
    if (!v) {
        *out = def;
        return SC_OK;
    }
    return parse_int(args, key, v, out);
}

sc_status sc_args_float(const sc_args *args, const char *key, double def, double *out)
{
    const char *v = sc_args_get(args, key);
    if (!v) {
        *out = def;
        return SC_OK;
    }
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (end == v || *end || errno)
        return sc_error_set(SC_ERR_INVALID, "%s '%s': '%s' is not a number", args->what,
                            key, v);
    *out = d;
    return SC_OK;
}

sc_status sc_args_bool(const sc_args *args, const char *key, bool def, bool *out)
{
    const char *v = sc_args_get(args, key);
    if (!v) {
        *out = def;
        return SC_OK;
    }
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) {
        if (strcasecmp(v, yes[i]) == 0) {
            *out = true;
            return SC_OK;
        }
        if (strcasecmp(v, no[i]) == 0) {
            *out = false;
            return SC_OK;
        }
    }
    return sc_error_set(SC_ERR_INVALID, "%s '%s': '%s' is not a boolean (true/false)",
                        args->what, key, v);
}

sc_status sc_args_ints(const sc_args *args, const char *key, int64_t *out, int max, int *n)
{
    *n = 0;
    const char *v = sc_args_get(args, key);
    if (!v)
        return SC_OK;
    char buf[256];
    if (strlen(v) >= sizeof buf)
        return sc_error_set(SC_ERR_INVALID, "%s '%s': value too long", args->what, key);
    strcpy(buf, v);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ":", &save); tok; tok = strtok_r(NULL, ":", &save)) {
        if (*n == max)
            return sc_error_set(SC_ERR_INVALID, "%s '%s': more than %d values", args->what,
                                key, max);
        SC_TRY(parse_int(args, key, tok, &out[*n]));
        (*n)++;
    }
    return SC_OK;
}

static bool is_known(const char *const *known, const char *key)
{
    for (; *known; known++)
        if (strcmp(*known, key) == 0)
            return true;
    return false;
}

/* The refusal of `key`: the nearest known key when it looks like a typo of
 * one, and the known keys. */
static sc_status unknown_key(const sc_args *args, const char *key, const char *const *known)
{
    char list[512] = "none";
    size_t used = 0;
    int n = 0;
    for (; known[n]; n++)
        if (used < sizeof list - 1)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", n ? ", " : "",
                                     known[n]);
    const char *near = sc_args_suggest(key, known, n);
    if (near)
        return sc_error_set(SC_ERR_INVALID, "unknown %s '%s' (did you mean '%s'? known: %s)",
                            args->what, key, near, list);
    return sc_error_set(SC_ERR_INVALID, "unknown %s '%s' (known: %s)", args->what, key, list);
}

sc_status sc_args_check_known(const sc_args *args, const char *const *known)
{
    for (int i = 0; i < args->count; i++)
        if (!is_known(known, args->keys[i]))
            return unknown_key(args, args->keys[i], known);
    return SC_OK;
}

/* Optimal string alignment distance: edits, with a swap of two adjacent
 * characters counting as one ("epoch_ned" is 1 from "epoch_end"). */
static int edit_distance(const char *a, const char *b)
{
    enum { MAX = 64 };
    size_t m = strlen(a), n = strlen(b);
    if (m >= MAX || n >= MAX)
        return INT_MAX;
    int d[MAX][MAX];
    for (size_t i = 0; i <= m; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= n; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= m; i++) {
        for (size_t j = 1; j <= n; j++) {
            int cost = a[i - 1] != b[j - 1];
            int best = d[i - 1][j - 1] + cost;
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    }
    return d[m][n];
}

const char *sc_args_suggest(const char *word, const char *const *names, int n)
{
    const char *best = NULL;
    int best_d = INT_MAX;
    for (int i = 0; i < n; i++) {
        int d = edit_distance(word, names[i]);
        if (d < best_d) {
            best = names[i];
            best_d = d;
        }
    }
    /* One edit per three characters: a typo, not a different word. */
    return best && (size_t)best_d * 3 <= strlen(word) ? best : NULL;
}
