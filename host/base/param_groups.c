/* param_groups.c — [params "PATTERN"] sections and --no-decay, matched
 * against the parameters' names (param_groups.h). */
#include "base/param_groups.h"

#include <fnmatch.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/format.h"
#include "scorch/args.h"
#include "scorch_host/optim.h"

static const char *const keys[] = {"weight_decay", "lr_scale"};

bool host_param_groups_is_section(const char *section)
{
    return strncmp(section, "params", 6) == 0 &&
           (section[6] == '\0' || section[6] == ' ' || section[6] == '"');
}

/* The PATTERN of `params "PATTERN"` into pattern. */
static sc_status section_pattern(const char *section, char *pattern)
{
    const char *open = section + 6 + strspn(section + 6, " ");
    size_t len = strlen(open);
    if (*open != '"' || len < 3 || open[len - 1] != '"' || memchr(open + 1, '"', len - 2))
        return sc_error_set(SC_ERR_INVALID, "section [%s]: write [params \"PATTERN\"], a glob "
                            "on parameter names in double quotes", section);
    if (len - 2 >= HOST_PARAM_PATTERN_MAX)
        return sc_error_set(SC_ERR_INVALID, "section [%s]: a pattern of %zu characters is too "
                            "long (at most %d)", section, len - 2, HOST_PARAM_PATTERN_MAX - 1);
    memcpy(pattern, open + 1, len - 2);
    pattern[len - 2] = '\0';
    return SC_OK;
}

/* The group of `pattern`, added at the end when new. */
static sc_status group_of(host_param_groups *g, const char *pattern, host_param_group **out)
{
    for (int i = 0; i < g->n; i++)
        if (strcmp(g->group[i].pattern, pattern) == 0) {
            *out = &g->group[i];
            return SC_OK;
        }
    if (g->n == HOST_PARAM_GROUPS_MAX)
        return sc_error_set(SC_ERR_INVALID, "[params \"%s\"] is one more than the %d parameter "
                            "groups allowed", pattern, HOST_PARAM_GROUPS_MAX);
    *out = &g->group[g->n++];
    **out = (host_param_group){.lr_scale = 1};
    strcpy((*out)->pattern, pattern);
    return SC_OK;
}

static sc_status parse_value(const char *text, double *out)
{
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end || !isfinite(v) || v < 0)
        return sc_error_set(SC_ERR_INVALID, "'%s' is not a finite number >= 0", text);
    *out = v;
    return SC_OK;
}

static sc_status set_key(host_param_group *grp, const char *key, const char *value)
{
    bool wd = strcmp(key, keys[0]) == 0;
    if (!wd && strcmp(key, keys[1]) != 0) {
        const char *near = sc_args_suggest(key, keys, 2);
        if (near)
            return sc_error_set(SC_ERR_INVALID, "unknown key %s (did you mean %s?)", key, near);
        return sc_error_set(SC_ERR_INVALID, "unknown key %s (a section of parameters takes "
                            "weight_decay and lr_scale)", key);
    }
    bool *has = wd ? &grp->has_weight_decay : &grp->has_lr_scale;
    if (*has)
        return sc_error_set(SC_ERR_INVALID, "%s is set twice", key);
    SC_TRY(parse_value(value, wd ? &grp->weight_decay : &grp->lr_scale));
    *has = true;
    return SC_OK;
}

sc_status host_param_groups_set(host_param_groups *g, const char *section, const char *key,
                              const char *value)
{
    char pattern[HOST_PARAM_PATTERN_MAX];
    host_param_group *grp = NULL;
    SC_TRY(section_pattern(section, pattern));
    SC_TRY(group_of(g, pattern, &grp));
    sc_status st = set_key(grp, key, value);
    return st == SC_OK ? SC_OK : sc_error_wrap(st, "[params \"%s\"]", pattern);
}

void host_param_groups_write(const host_param_groups *g, FILE *out)
{
    char v[32];
    for (int i = 0; i < g->n; i++) {
        const host_param_group *grp = &g->group[i];
        fprintf(out, "\n[params \"%s\"]\n", grp->pattern);
        if (grp->has_weight_decay) {
            host_format_double(grp->weight_decay, v, sizeof v);
            fprintf(out, "weight_decay = %s\n", v);
        }
        if (grp->has_lr_scale) {
            host_format_double(grp->lr_scale, v, sizeof v);
            fprintf(out, "lr_scale = %s\n", v);
        }
    }
}

void host_param_groups_describe(const host_param_groups *g, char *buf, size_t size)
{
    size_t n = (size_t)snprintf(buf, size, "%s", g->n ? "" : "none");
    for (int i = 0; i < g->n && n < size; i++) {
        const host_param_group *grp = &g->group[i];
        char wd[32] = "-", lr[32] = "-";
        if (grp->has_weight_decay)
            host_format_double(grp->weight_decay, wd, sizeof wd);
        if (grp->has_lr_scale)
            host_format_double(grp->lr_scale, lr, sizeof lr);
        n += (size_t)snprintf(buf + n, size - n, "%s\"%s\" weight_decay %s lr_scale %s",
                              i ? "; " : "", grp->pattern, wd, lr);
    }
}

/* ---- parameters ---- */

/* The first --no-decay word (of the comma list) in name, as a pointer into
 * the list with its length; NULL when none. */
static const char *word_in(const char *words, const char *name, size_t *len)
{
    for (const char *w = words; *w;) {
        size_t n = strcspn(w, ",");
        char word[HOST_PARAM_PATTERN_MAX];
        if (n > 0 && n < sizeof word) {
            memcpy(word, w, n);
            word[n] = '\0';
            if (strstr(name, word)) {
                *len = n;
                return w;
            }
        }
        w += n + (w[n] == ',');
    }
    return NULL;
}

/* A few trainable parameter names, for a message about a pattern that
 * matches none. */
static void some_names(const sc_params *ps, char *buf, size_t size)
{
    size_t n = 0;
    int shown = 0;
    buf[0] = '\0';
    for (int i = 0; i < sc_params_count(ps) && shown < 6 && n < size; i++) {
        const sc_tensor *p = sc_params_at(ps, i);
        if (p->flags & SC_TENSOR_REQUIRES_GRAD)
            n += (size_t)snprintf(buf + n, size - n, "%s%s", shown++ ? ", " : "", p->name);
    }
    if (shown == 6 && n < size)
        snprintf(buf + n, size - n, ", ...");
}

/* Each word of the --no-decay list: non-empty, and in some parameter's
 * name (which `seen` marks, by the word's offset in the list). */
static sc_status check_words(const char *words, const bool *seen, const sc_params *ps)
{
    char names[512];
    for (const char *w = words; *w;) {
        size_t n = strcspn(w, ",");
        if (n == 0 || n >= HOST_PARAM_PATTERN_MAX)
            return sc_error_set(SC_ERR_INVALID, "--no-decay %s: %s word", words,
                                n ? "an over-long" : "an empty");
        if (!seen[w - words]) {
            some_names(ps, names, sizeof names);
            return sc_error_set(SC_ERR_INVALID, "--no-decay: '%.*s' is in no trainable "
                                "parameter's name (they are %s)", (int)n, w, names);
        }
        w += n + (w[n] == ',');
    }
    return SC_OK;
}

static int first_section(const host_param_groups *g, const char *name)
{
    for (int k = 0; k < g->n; k++)
        if (fnmatch(g->group[k].pattern, name, 0) == 0)
            return k;
    return -1;
}

static host_param_setting setting_of(const host_param_groups *g, const char *no_decay,
                                   const char *name, double weight_decay, bool *word_seen)
{
    size_t len = 0;
    const char *word = word_in(no_decay, name, &len);
    host_param_setting s = {.lr_scale = 1, .weight_decay = word ? 0 : weight_decay,
                          .section = first_section(g, name), .word = word};
    if (word)
        word_seen[word - no_decay] = true;
    if (s.section >= 0) {
        const host_param_group *grp = &g->group[s.section];
        if (grp->has_lr_scale)
            s.lr_scale = grp->lr_scale;
        if (grp->has_weight_decay)
            s.weight_decay = grp->weight_decay;
    }
    return s;
}

sc_status host_param_groups_resolve(const host_param_groups *g, const char *no_decay,
                                  const sc_params *ps, double weight_decay,
                                  host_param_setting *out)
{
    bool matched[HOST_PARAM_GROUPS_MAX] = {0};
    size_t words_len = strlen(no_decay);
    bool *word_seen = calloc(words_len + 1, 1);
    if (!word_seen)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for --no-decay");
    for (int i = 0; i < sc_params_count(ps); i++) {
        const sc_tensor *p = sc_params_at(ps, i);
        out[i] = (host_param_setting){1, weight_decay, -1, NULL};
        if (!(p->flags & SC_TENSOR_REQUIRES_GRAD))
            continue;
        out[i] = setting_of(g, no_decay, p->name, weight_decay, word_seen);
        if (out[i].section >= 0)
            matched[out[i].section] = true;
    }
    sc_status st = check_words(no_decay, word_seen, ps);
    free(word_seen);
    SC_TRY(st);
    for (int k = 0; k < g->n; k++) {
        /* a pattern that an earlier one shadows everywhere matches nothing too */
        if (matched[k])
            continue;
        char names[512];
        some_names(ps, names, sizeof names);
        return sc_error_set(SC_ERR_INVALID, "[params \"%s\"] matches no trainable parameter "
                            "(none, or only parameters an earlier section took; they are %s)",
                            g->group[k].pattern, names);
    }
    return SC_OK;
}

/* resolve's table, allocated for ps (the caller frees). */
static sc_status resolve_all(const host_param_groups *g, const char *no_decay,
                             const sc_params *ps, double weight_decay, host_param_setting **out)
{
    *out = calloc((size_t)sc_params_count(ps) + 1, sizeof **out);
    if (!*out)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for parameter groups");
    sc_status st = host_param_groups_resolve(g, no_decay, ps, weight_decay, *out);
    if (st != SC_OK) {
        free(*out);
        *out = NULL;
    }
    return st;
}

sc_status host_param_groups_apply(const host_param_groups *g, const char *no_decay,
                                sc_params *ps, sc_optim *opt, double weight_decay)
{
    if (g->n == 0 && !no_decay[0])
        return SC_OK;
    host_param_setting *set;
    SC_TRY(resolve_all(g, no_decay, ps, weight_decay, &set));
    sc_status st = SC_OK;
    for (int i = 0; i < sc_params_count(ps) && st == SC_OK; i++) {
        const sc_tensor *p = sc_params_at(ps, i);
        if ((p->flags & SC_TENSOR_REQUIRES_GRAD) &&
            (set[i].lr_scale != 1 || set[i].weight_decay != weight_decay))
            st = sc_optim_set_param(opt, p, set[i].lr_scale, set[i].weight_decay);
    }
    free(set);
    return st;
}

/* What put the parameter in its group, for the summary. */
static void group_label(const host_param_groups *g, const host_param_setting *s, char *buf,
                        size_t size)
{
    int n = 0;
    buf[0] = '\0';
    if (s->section >= 0)
        n = snprintf(buf, size, "[params \"%s\"]", g->group[s->section].pattern);
    if (s->word && n >= 0 && (size_t)n < size)
        snprintf(buf + n, size - (size_t)n, "%s--no-decay %.*s", n ? ", " : "",
                 (int)strcspn(s->word, ","), s->word);
    if (!buf[0])
        snprintf(buf, size, "default");
}

static void print_rows(const host_param_groups *g, const sc_params *ps,
                       const host_param_setting *set, FILE *out)
{
    int w = (int)strlen("parameter");
    for (int i = 0; i < sc_params_count(ps); i++)
        if ((int)strlen(sc_params_at(ps, i)->name) > w)
            w = (int)strlen(sc_params_at(ps, i)->name);
    fprintf(out, "\n%-*s  %8s %12s  %s\n", w, "parameter", "lr scale", "weight decay", "group");
    for (int i = 0; i < sc_params_count(ps); i++) {
        const sc_tensor *p = sc_params_at(ps, i);
        if (!(p->flags & SC_TENSOR_REQUIRES_GRAD))
            continue;
        char label[HOST_PARAM_PATTERN_MAX + 64];
        group_label(g, &set[i], label, sizeof label);
        fprintf(out, "%-*s  %8g %12g  %s\n", w, p->name, set[i].lr_scale, set[i].weight_decay,
                label);
    }
}

sc_status host_param_groups_print(const host_param_groups *g, const char *no_decay,
                                const sc_params *ps, double weight_decay, FILE *out)
{
    if (g->n == 0 && !no_decay[0])
        return SC_OK;
    host_param_setting *set;
    SC_TRY(resolve_all(g, no_decay, ps, weight_decay, &set));
    print_rows(g, ps, set, out);
    free(set);
    return SC_OK;
}
