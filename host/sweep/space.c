#include "sweep/space.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scorch/rng.h"

/* More trials than anyone runs, and few enough to list in a state file. */
enum { TRIALS_MAX = 100000, ARGS_MAX = 256 };

static const struct {
    const char *name;
    host_space_kind kind;
    int arity; /* 0: one or more values */
} kinds[] = {
    {"grid", HOST_SPACE_GRID, 0},
    {"linspace", HOST_SPACE_LINSPACE, 3},
    {"logspace", HOST_SPACE_LOGSPACE, 3},
    {"choice", HOST_SPACE_CHOICE, 0},
    {"uniform", HOST_SPACE_UNIFORM, 2},
    {"loguniform", HOST_SPACE_LOGUNIFORM, 2},
    {"randint", HOST_SPACE_RANDINT, 2},
    {"lograndint", HOST_SPACE_LOGRANDINT, 2},
};
enum { KIND_COUNT = sizeof kinds / sizeof kinds[0] };

/* ---- the spec's text ---- */

/* Pointers into a writable copy of the spec: the kind's name and its
 * arguments, trimmed and unquoted. */
typedef struct spec_parts {
    char *text;
    char *kind;
    char *args[ARGS_MAX];
    int n;
} spec_parts;

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

static const char *kind_names(void)
{
    return "grid, linspace, logspace, choice, uniform, loguniform, randint or lograndint";
}

/* One argument from *p up to the next ',' or `end`, quoted or bare, made
 * a string in place; *more tells whether a comma followed (and *p is then
 * past it). */
static sc_status split_arg(char **p, char *end, char **arg, bool *more)
{
    char *s = *p;
    while (s < end && isspace((unsigned char)*s))
        s++;
    char *stop;
    if (s < end && *s == '"') {
        char *close = memchr(s + 1, '"', (size_t)(end - s - 1));
        if (!close)
            return sc_error_set(SC_ERR_INVALID, "a quoted value has no closing '\"'");
        *close = '\0';
        *arg = s + 1;
        for (stop = close + 1; stop < end && isspace((unsigned char)*stop); stop++)
            ;
        if (stop < end && *stop != ',')
            return sc_error_set(SC_ERR_INVALID, "expected ',' or ')' after \"%s\"", *arg);
    } else {
        char *comma = memchr(s, ',', (size_t)(end - s));
        stop = comma ? comma : end;
        *stop = '\0';
        *arg = trim(s);
        if (!(*arg)[0])
            return sc_error_set(SC_ERR_INVALID, "an empty value (quote it if you mean one: \"\")");
        if (strpbrk(*arg, "()\""))
            return sc_error_set(SC_ERR_INVALID, "'%s': quote a value that holds '(', ')' or '\"'",
                                *arg);
    }
    *more = stop < end;
    *stop = '\0';
    *p = *more ? stop + 1 : end;
    return SC_OK;
}

/* "kind(a, b, ...)" into its parts; parts->text is the caller's to free. */
static sc_status split_spec(const char *spec, spec_parts *parts)
{
    *parts = (spec_parts){.text = strdup(spec)};
    if (!parts->text)
        return sc_error_set(SC_ERR_NOMEM, "out of memory");
    char *s = trim(parts->text);
    char *open = strchr(s, '(');
    size_t len = strlen(s);
    if (!open || s[len - 1] != ')')
        return sc_error_set(SC_ERR_INVALID, "'%s' is not a space: write one of %s with its "
                            "values in parentheses, e.g. grid(64, 128), or set a fixed value "
                            "under [train]", s, kind_names());
    *open = '\0';
    parts->kind = trim(s);
    char *p = open + 1, *end = s + len - 1;
    *end = '\0';
    if (p[strspn(p, " \t")] == '\0')
        return sc_error_set(SC_ERR_INVALID, "%s() has no values", parts->kind);
    for (bool more = true; more; parts->n++) {
        if (parts->n == ARGS_MAX)
            return sc_error_set(SC_ERR_INVALID, "more than %d values", ARGS_MAX);
        SC_TRY(split_arg(&p, end, &parts->args[parts->n], &more));
    }
    return SC_OK;
}

/* ---- numbers ---- */

static sc_status parse_number(const char *kind, const char *text, double *out)
{
    char *end;
    *out = strtod(text, &end);
    if (end == text || *end || !isfinite(*out))
        return sc_error_set(SC_ERR_INVALID, "%s: '%s' is not a number", kind, text);
    return SC_OK;
}

static bool is_integer_text(const char *text)
{
    const char *p = text + (*text == '-' || *text == '+');
    if (!*p)
        return false;
    for (; *p; p++)
        if (!isdigit((unsigned char)*p))
            return false;
    return true;
}

/* A computed value as a trial gets it: an integer, or 12 significant
 * digits, so that 0.1 + 2 * 0.1 reads "0.3", not "0.30000000000000004". */
static void format_value(char *buf, size_t size, double v, bool integer)
{
    if (integer)
        snprintf(buf, size, "%.0f", round(v));
    else
        snprintf(buf, size, "%.12g", v);
}

/* ---- dimensions ---- */

static sc_status set_values(host_space_dim *dim, char *const *texts, int n)
{
    dim->values = calloc((size_t)n, sizeof *dim->values);
    if (!dim->values)
        return sc_error_set(SC_ERR_NOMEM, "out of memory");
    dim->count = n;
    for (int i = 0; i < n; i++) {
        if (strlen(texts[i]) >= HOST_SPACE_VALUE_MAX)
            return sc_error_set(SC_ERR_INVALID, "a value longer than %d characters",
                                HOST_SPACE_VALUE_MAX - 1);
        for (int j = 0; j < i; j++)
            if (strcmp(texts[i], texts[j]) == 0)
                return sc_error_set(SC_ERR_INVALID, "%s is listed twice", texts[i]);
        if (!(dim->values[i] = strdup(texts[i])))
            return sc_error_set(SC_ERR_NOMEM, "out of memory");
    }
    return SC_OK;
}

/* linspace and logspace: the n values, then as set_values. */
static sc_status spread_values(host_space_dim *dim, const spec_parts *p, const char *kind)
{
    double n_real;
    SC_TRY(parse_number(kind, p->args[2], &n_real));
    if (n_real < 2 || n_real > ARGS_MAX || n_real != floor(n_real))
        return sc_error_set(SC_ERR_INVALID, "%s: the count must be an integer from 2 to %d, "
                            "not %s", kind, ARGS_MAX, p->args[2]);
    int n = (int)n_real;
    bool log_scale = dim->kind == HOST_SPACE_LOGSPACE;
    bool integer = is_integer_text(p->args[0]) && is_integer_text(p->args[1]);
    char text[ARGS_MAX][64];
    char *texts[ARGS_MAX] = {0};
    for (int i = 0; i < n; i++) {
        double t = (double)i / (n - 1);
        double v = log_scale ? exp(log(dim->lo) + t * (log(dim->hi) - log(dim->lo)))
                             : dim->lo + t * (dim->hi - dim->lo);
        format_value(text[i], sizeof text[i], i == n - 1 ? dim->hi : v, integer);
        texts[i] = text[i];
    }
    sc_status st = set_values(dim, texts, n);
    if (st != SC_OK && integer)
        return sc_error_wrap(st, "%s: integer bounds give integers, and %d of them do not fit "
                             "between %s and %s", kind, n, p->args[0], p->args[1]);
    return st;
}

/* The bounds of every kind but grid and choice. */
static sc_status set_bounds(host_space_dim *dim, const spec_parts *p, const char *kind)
{
    SC_TRY(parse_number(kind, p->args[0], &dim->lo));
    SC_TRY(parse_number(kind, p->args[1], &dim->hi));
    if (!(dim->lo < dim->hi))
        return sc_error_set(SC_ERR_INVALID, "%s: low (%s) must be below high (%s)", kind,
                            p->args[0], p->args[1]);
    bool log_scale = host_space_dim_is_log(dim);
    if (log_scale && dim->lo <= 0)
        return sc_error_set(SC_ERR_INVALID, "%s: a log scale needs low > 0, not %s", kind,
                            p->args[0]);
    bool integer = dim->kind == HOST_SPACE_RANDINT || dim->kind == HOST_SPACE_LOGRANDINT;
    if (integer && !(is_integer_text(p->args[0]) && is_integer_text(p->args[1])))
        return sc_error_set(SC_ERR_INVALID, "%s: the bounds must be integers", kind);
    return SC_OK;
}

static sc_status parse_dim(host_space_dim *dim, const char *spec)
{
    spec_parts p;
    sc_status st = split_spec(spec, &p);
    int k = 0;
    while (st == SC_OK && k < KIND_COUNT && strcmp(kinds[k].name, p.kind) != 0)
        k++;
    if (st == SC_OK && k == KIND_COUNT)
        st = sc_error_set(SC_ERR_INVALID, "unknown kind '%s': use %s", p.kind, kind_names());
    if (st == SC_OK) {
        dim->kind = kinds[k].kind;
        if (kinds[k].arity && p.n != kinds[k].arity)
            st = sc_error_set(SC_ERR_INVALID, "%s takes %d values (%s), not %d", p.kind,
                              kinds[k].arity, kinds[k].arity == 3 ? "low, high, count"
                                                                  : "low, high", p.n);
    }
    if (st == SC_OK) {
        if (dim->kind == HOST_SPACE_GRID || dim->kind == HOST_SPACE_CHOICE)
            st = set_values(dim, p.args, p.n);
        else
            st = set_bounds(dim, &p, p.kind);
    }
    if (st == SC_OK && (dim->kind == HOST_SPACE_LINSPACE || dim->kind == HOST_SPACE_LOGSPACE))
        st = spread_values(dim, &p, p.kind);
    free(p.text);
    return st;
}

static void dim_free(host_space_dim *dim)
{
    for (int i = 0; dim->values && i < dim->count; i++)
        free(dim->values[i]);
    free(dim->values);
    free(dim->spec);
}

sc_status host_space_add(host_space *space, const char *name, const char *spec, int line)
{
    if (!name[0] || strlen(name) >= HOST_SPACE_NAME_MAX)
        return sc_error_set(SC_ERR_INVALID, "a dimension needs a name of 1 to %d characters",
                            HOST_SPACE_NAME_MAX - 1);
    const host_space_dim *twin = host_space_find(space, name);
    if (twin)
        return sc_error_set(SC_ERR_INVALID, "%s is swept twice (first on line %d)", name,
                            twin->line);
    host_space_dim dim = {.line = line};
    snprintf(dim.name, sizeof dim.name, "%s", name);
    sc_status st = (dim.spec = strdup(spec)) ? parse_dim(&dim, spec)
                                             : sc_error_set(SC_ERR_NOMEM, "out of memory");
    host_space_dim *grown = st == SC_OK ? realloc(space->dims, (size_t)(space->count + 1) *
                                                                   sizeof *grown)
                                        : NULL;
    if (st == SC_OK && !grown)
        st = sc_error_set(SC_ERR_NOMEM, "out of memory");
    if (st != SC_OK) {
        dim_free(&dim);
        return sc_error_wrap(st, "%s", name);
    }
    char *trimmed = trim(dim.spec);
    memmove(dim.spec, trimmed, strlen(trimmed) + 1);
    space->dims = grown;
    space->dims[space->count++] = dim;
    return SC_OK;
}

void host_space_free(host_space *space)
{
    for (int d = 0; d < space->count; d++)
        dim_free(&space->dims[d]);
    free(space->dims);
    *space = (host_space){0};
}

const host_space_dim *host_space_find(const host_space *space, const char *name)
{
    for (int d = 0; d < space->count; d++)
        if (strcmp(space->dims[d].name, name) == 0)
            return &space->dims[d];
    return NULL;
}

bool host_space_dim_is_random(const host_space_dim *dim)
{
    return dim->kind >= HOST_SPACE_CHOICE;
}

bool host_space_dim_is_log(const host_space_dim *dim)
{
    return dim->kind == HOST_SPACE_LOGSPACE || dim->kind == HOST_SPACE_LOGUNIFORM ||
           dim->kind == HOST_SPACE_LOGRANDINT;
}

bool host_space_is_random(const host_space *space)
{
    for (int d = 0; d < space->count; d++)
        if (host_space_dim_is_random(&space->dims[d]))
            return true;
    return false;
}

/* ---- trials ---- */

static int64_t grid_points(const host_space *space)
{
    int64_t points = 1;
    for (int d = 0; d < space->count && points <= TRIALS_MAX; d++)
        if (!host_space_dim_is_random(&space->dims[d]))
            points *= space->dims[d].count;
    return points;
}

sc_status host_space_trial_count(const host_space *space, int64_t samples, int64_t *trials)
{
    bool random = host_space_is_random(space);
    if (random && samples == 0) {
        for (int d = 0; d < space->count; d++)
            if (host_space_dim_is_random(&space->dims[d]))
                return sc_error_set(SC_ERR_INVALID, "%s = %s is drawn at random: give --trials "
                                    "N for a random search", space->dims[d].name,
                                    space->dims[d].spec);
    }
    if (!random && samples > 0)
        return sc_error_set(SC_ERR_INVALID, "--trials %lld is for random search, and every "
                            "dimension of the space is a grid, whose points each run once; "
                            "draw one with choice(...), uniform(...), ...",
                            (long long)samples);
    int64_t points = grid_points(space);
    int64_t n = points * (samples > 0 ? samples : 1);
    if (points > TRIALS_MAX || n > TRIALS_MAX)
        return sc_error_set(SC_ERR_INVALID, "the space makes more than %d trials", TRIALS_MAX);
    *trials = n;
    return SC_OK;
}

/* A double in [0, 1) from 53 random bits. */
static double uniform01(sc_rng *rng) { return (double)(sc_rng_u64(rng) >> 11) * 0x1.0p-53; }

static void draw(const host_space_dim *dim, sc_rng *rng, char *out)
{
    double u = uniform01(rng);
    switch (dim->kind) {
    case HOST_SPACE_CHOICE:
        snprintf(out, HOST_SPACE_VALUE_MAX, "%s", dim->values[sc_rng_below(rng, (uint64_t)dim->count)]);
        return;
    case HOST_SPACE_UNIFORM:
        snprintf(out, HOST_SPACE_VALUE_MAX, "%.6g", dim->lo + u * (dim->hi - dim->lo));
        return;
    case HOST_SPACE_LOGUNIFORM:
        snprintf(out, HOST_SPACE_VALUE_MAX, "%.6g",
                 exp(log(dim->lo) + u * (log(dim->hi) - log(dim->lo))));
        return;
    case HOST_SPACE_RANDINT:
        snprintf(out, HOST_SPACE_VALUE_MAX, "%.0f",
                 dim->lo + (double)sc_rng_below(rng, (uint64_t)(dim->hi - dim->lo) + 1));
        return;
    case HOST_SPACE_LOGRANDINT: {
        /* log-uniform over [lo, hi + 1), floored: each integer gets the
         * share of the log scale between it and the next */
        double v = floor(exp(log(dim->lo) + u * (log(dim->hi + 1) - log(dim->lo))));
        snprintf(out, HOST_SPACE_VALUE_MAX, "%.0f", fmin(v, dim->hi));
        return;
    }
    default:
        out[0] = '\0';
    }
}

void host_space_trial_values(const host_space *space, uint64_t seed, int64_t trial,
                             char (*values)[HOST_SPACE_VALUE_MAX])
{
    int64_t point = trial % grid_points(space);
    for (int d = space->count - 1; d >= 0; d--) { /* the last grid dimension fastest */
        const host_space_dim *dim = &space->dims[d];
        if (host_space_dim_is_random(dim)) {
            sc_rng rng;
            sc_rng_init(&rng, seed, sc_rng_mix((uint64_t)trial, (uint64_t)d));
            draw(dim, &rng, values[d]);
        } else {
            snprintf(values[d], HOST_SPACE_VALUE_MAX, "%s", dim->values[point % dim->count]);
            point /= dim->count;
        }
    }
}
