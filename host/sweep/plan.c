#include "sweep/plan.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scorch/args.h"

/* What the sweep decides for every trial, and so refuses in the file. */
static const struct {
    const char *name, *why;
} sweep_owned[] = {
    {"run-dir", "scorch-sweep runs each trial in OUT/trial-NNNN"},
    {"resume", "scorch-sweep resumes the trials it interrupted by itself"},
    {"resume-anyway", "scorch-sweep resumes the trials it interrupted by itself"},
    {"device", "scorch-sweep hands each slot its device: give it --device"},
    {"threads", "scorch-sweep splits the cores between its slots (its own --threads sets a "
                "trial's)"},
    {"workers", "scorch-sweep gives each trial loader threads to match its compute threads"},
    {"summary", "a trial trains"},
    {"lr-find", "a trial trains"},
};

static const char *owned_reason(const char *name)
{
    for (size_t i = 0; i < sizeof sweep_owned / sizeof sweep_owned[0]; i++)
        if (strcmp(name, sweep_owned[i].name) == 0)
            return sweep_owned[i].why;
    return NULL;
}

/* The plugin-argument options a dimension may reach into. */
static const char *const arg_options[] = {"model-args", "dataset-args"};
enum { ARG_OPTIONS = 2 };

/* "model-args" when name is "model-args.KEY" (*key = KEY), else NULL. */
static const char *arg_option_of(const char *name, const char **key)
{
    for (int i = 0; i < ARG_OPTIONS; i++) {
        size_t n = strlen(arg_options[i]);
        if (strncmp(name, arg_options[i], n) == 0 && name[n] == '.') {
            *key = name + n + 1;
            return arg_options[i];
        }
    }
    return NULL;
}

/* ---- lines ---- */

static char *skip_space(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    return s;
}

static void trim_end(char *s)
{
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
}

/* Cuts an inline comment (a ';' after whitespace), as inih does. */
static void cut_comment(char *s)
{
    for (char *p = s; *p; p++)
        if (*p == ';' && p > s && isspace((unsigned char)p[-1])) {
            *p = '\0';
            break;
        }
    trim_end(s);
}

/* `name = value` (or `name: value`) of a writable line: *value is NULL for
 * a line without one. */
static void split_pair(char *line, char **name, char **value)
{
    char *eq = strpbrk(line, "=:");
    *name = skip_space(line);
    *value = NULL;
    if (!eq)
        return;
    *eq = '\0';
    trim_end(*name);
    *value = skip_space(eq + 1);
    cut_comment(*value);
}

static sc_status split_lines(host_sweep_plan *plan)
{
    int n = 1;
    for (const char *p = plan->text; *p; p++)
        n += *p == '\n';
    plan->lines = calloc((size_t)n, sizeof *plan->lines);
    plan->train_keys = calloc((size_t)n, sizeof *plan->train_keys);
    plan->space_line = calloc((size_t)n, sizeof *plan->space_line);
    char *copy = strdup(plan->text);
    if (!plan->lines || !plan->train_keys || !plan->space_line || !copy) {
        free(copy);
        return sc_error_set(SC_ERR_NOMEM, "out of memory for %s", plan->name);
    }
    plan->lines[0] = copy; /* every line points into copy; lines[0] frees it */
    for (char *p = copy; (p = strchr(p, '\n')); p++) {
        *p = '\0';
        plan->lines[++plan->line_count] = p + 1;
    }
    plan->line_count++;
    return SC_OK;
}

/* ---- checks ---- */

/* Whether INI can carry value as it is (config.c's rule for config.ini). */
static sc_status check_representable(const char *value)
{
    size_t n = strlen(value);
    if (strchr(value, '\n') || strstr(value, " ;") || strstr(value, "\t;") ||
        (n && (isspace((unsigned char)value[0]) || isspace((unsigned char)value[n - 1]))))
        return sc_error_set(SC_ERR_INVALID, "'%s' cannot be written into an INI file (spaces "
                            "at its ends, a newline or ' ;')", value);
    return SC_OK;
}

/* Loads `name = value` over a copy of the base at the dimension's line, so
 * that config.c's message names the sweep file and line. */
static sc_status check_option_value(const host_sweep_plan *plan, host_config *scratch,
                                    const host_space_dim *dim, const char *value)
{
    SC_TRY(check_representable(value));
    int line = dim->line > 1 ? dim->line : 2;
    size_t size = strlen(dim->name) + strlen(value) + (size_t)line + 16;
    char *text = malloc(size);
    if (!text)
        return sc_error_set(SC_ERR_NOMEM, "out of memory");
    int used = snprintf(text, size, "[train]\n");
    for (int i = 2; i < line; i++)
        text[used++] = '\n';
    snprintf(text + used, size - (size_t)used, "%s = %s\n", dim->name, value);
    memcpy(scratch, plan->base, sizeof *scratch);
    sc_status st = host_config_load_ini_text(scratch, HOST_PROGRAM_TRAIN, text, plan->name);
    free(text);
    return st;
}

static sc_status check_arg_value(const host_sweep_plan *plan, const host_space_dim *dim,
                                 const char *value)
{
    SC_TRY(check_representable(value));
    if (strpbrk(value, ",="))
        return sc_error_set(SC_ERR_INVALID, "%s:%d: %s: '%s': one plugin argument's value "
                            "holds no ',' or '=' (lists take ':', as hidden=64:32)", plan->name,
                            dim->line, dim->name, value);
    return SC_OK;
}

static sc_status check_value(const host_sweep_plan *plan, host_config *scratch,
                             const host_space_dim *dim, const char *value)
{
    const char *key;
    if (arg_option_of(dim->name, &key))
        return check_arg_value(plan, dim, value);
    return check_option_value(plan, scratch, dim, value);
}

/* Every value a dimension can give: its list, or its bounds. */
static sc_status check_values(const host_sweep_plan *plan, host_config *scratch,
                              const host_space_dim *dim)
{
    for (int i = 0; i < dim->count; i++)
        SC_TRY(check_value(plan, scratch, dim, dim->values[i]));
    if (dim->count)
        return SC_OK;
    bool integer = dim->kind == HOST_SPACE_RANDINT || dim->kind == HOST_SPACE_LOGRANDINT;
    char lo[64], hi[64];
    snprintf(lo, sizeof lo, integer ? "%.0f" : "%.12g", dim->lo);
    snprintf(hi, sizeof hi, integer ? "%.0f" : "%.12g", dim->hi);
    SC_TRY(check_value(plan, scratch, dim, lo));
    return check_value(plan, scratch, dim, hi);
}

static sc_status check_dim_name(const host_sweep_plan *plan, const host_space_dim *dim)
{
    const char *key, *why = owned_reason(dim->name);
    const char *option = arg_option_of(dim->name, &key);
    if (why)
        return sc_error_set(SC_ERR_INVALID, "%s:%d: %s cannot be swept: %s", plan->name,
                            dim->line, dim->name, why);
    if (strcmp(dim->name, "hooks") == 0 || strcmp(dim->name, "hooks-args") == 0)
        return sc_error_set(SC_ERR_INVALID, "%s:%d: %s cannot be swept: set the hooks under "
                            "[train]", plan->name, dim->line, dim->name);
    if (option && !key[0])
        return sc_error_set(SC_ERR_INVALID, "%s:%d: %s names no argument: write %sKEY",
                            plan->name, dim->line, dim->name, dim->name);
    for (int i = 0; option && i < plan->space.count; i++)
        if (strcmp(plan->space.dims[i].name, option) == 0)
            return sc_error_set(SC_ERR_INVALID, "%s:%d: %s and %s (line %d) are both swept: "
                                "sweep the whole list or its arguments", plan->name, dim->line,
                                dim->name, option, plan->space.dims[i].line);
    return SC_OK;
}

static sc_status check_space(const host_sweep_plan *plan)
{
    if (plan->space.count == 0)
        return sc_error_set(SC_ERR_INVALID, "%s has no [space] section, or it is empty: "
                            "nothing to sweep (docs/sweeps.md)", plan->name);
    host_config *scratch = malloc(sizeof *scratch);
    if (!scratch)
        return sc_error_set(SC_ERR_NOMEM, "out of memory");
    sc_status st = SC_OK;
    for (int d = 0; st == SC_OK && d < plan->space.count; d++) {
        st = check_dim_name(plan, &plan->space.dims[d]);
        if (st == SC_OK)
            st = check_values(plan, scratch, &plan->space.dims[d]);
    }
    free(scratch);
    return st;
}

static sc_status check_base(const host_sweep_plan *plan)
{
    for (int i = 0; i < plan->line_count; i++) {
        const char *why = plan->train_keys[i] ? owned_reason(plan->train_keys[i]) : NULL;
        if (why)
            return sc_error_set(SC_ERR_INVALID, "%s:%d: %s is not for a sweep file: %s",
                                plan->name, i + 1, plan->train_keys[i], why);
    }
    const char *missing = !plan->base->model[0] && !host_space_find(&plan->space, "model")
                              ? "model"
                          : !plan->base->dataset[0] && !host_space_find(&plan->space, "dataset")
                              ? "dataset"
                              : NULL;
    if (missing)
        return sc_error_set(SC_ERR_INVALID, "%s: [train] sets no %s, and [space] does not "
                            "sweep it: every trial needs one", plan->name, missing);
    return SC_OK;
}

/* ---- reading ---- */

/* Classifies the lines: the [space] section's become dimensions; the
 * [train] section's keys are noted. */
static sc_status read_sections(host_sweep_plan *plan)
{
    char section[256] = "";
    for (int i = 0; i < plan->line_count; i++) {
        char buf[HOST_PATH_MAX + 64];
        if (strlen(plan->lines[i]) >= sizeof buf)
            return sc_error_set(SC_ERR_FORMAT, "%s:%d: line longer than %zu characters",
                                plan->name, i + 1, sizeof buf - 1);
        snprintf(buf, sizeof buf, "%s", plan->lines[i]);
        char *s = skip_space(buf);
        if (*s == '[') {
            char *close = strchr(s, ']');
            snprintf(section, sizeof section, "%.*s", close ? (int)(close - s - 1) : 0, s + 1);
        }
        bool in_space = strcmp(section, "space") == 0;
        plan->space_line[i] = in_space;
        if (*s == '[' || *s == ';' || *s == '#' || !*s)
            continue;
        char *name, *value;
        split_pair(s, &name, &value);
        if (in_space && !value)
            return sc_error_set(SC_ERR_FORMAT, "%s:%d: expected 'name = space'", plan->name,
                                i + 1);
        if (in_space) {
            sc_status st = host_space_add(&plan->space, name, value, i + 1);
            if (st != SC_OK)
                return sc_error_wrap(st, "%s:%d", plan->name, i + 1);
        } else if (strcmp(section, "train") == 0 && value &&
                   !(plan->train_keys[i] = strdup(name))) {
            return sc_error_set(SC_ERR_NOMEM, "out of memory");
        }
    }
    return SC_OK;
}

/* The file's text with the lines for which blank(plan, i) holds left
 * empty: line numbers stay those of the file. */
static sc_status blanked_text(const host_sweep_plan *plan,
                              bool (*blank)(const host_sweep_plan *, int), FILE *out)
{
    for (int i = 0; i < plan->line_count; i++)
        fprintf(out, "%s\n", blank(plan, i) ? "" : plan->lines[i]);
    return ferror(out) ? sc_error_set(SC_ERR_NOMEM, "out of memory") : SC_OK;
}

static bool is_space_line(const host_sweep_plan *plan, int i) { return plan->space_line[i]; }

static sc_status load_base(host_sweep_plan *plan)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return sc_error_set(SC_ERR_NOMEM, "out of memory");
    sc_status st = blanked_text(plan, is_space_line, f);
    fclose(f);
    if (st == SC_OK && !(plan->base = malloc(sizeof *plan->base)))
        st = sc_error_set(SC_ERR_NOMEM, "out of memory");
    if (st == SC_OK) {
        host_config_defaults(plan->base);
        st = host_config_load_ini_text(plan->base, HOST_PROGRAM_TRAIN, text, plan->name);
    }
    free(text);
    return st;
}

sc_status host_sweep_plan_load_text(const char *text, const char *name, host_sweep_plan *plan)
{
    *plan = (host_sweep_plan){0};
    snprintf(plan->name, sizeof plan->name, "%s", name);
    if (!(plan->text = strdup(text)))
        return sc_error_set(SC_ERR_NOMEM, "out of memory");
    SC_TRY(split_lines(plan));
    SC_TRY(read_sections(plan));
    SC_TRY(load_base(plan));
    SC_TRY(check_base(plan));
    return check_space(plan);
}

sc_status host_sweep_plan_load(const char *path, host_sweep_plan *plan)
{
    *plan = (host_sweep_plan){0};
    FILE *f = fopen(path, "rb");
    if (!f)
        return sc_error_set(SC_ERR_IO, "cannot read sweep file %s: %s", path, strerror(errno));
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    char buf[1 << 14];
    size_t n;
    while (mem && (n = fread(buf, 1, sizeof buf, f)) > 0)
        fwrite(buf, 1, n, mem);
    bool failed = ferror(f);
    fclose(f);
    if (mem)
        fclose(mem);
    sc_status st = !mem || !text ? sc_error_set(SC_ERR_NOMEM, "out of memory")
                   : failed      ? sc_error_set(SC_ERR_IO, "cannot read sweep file %s", path)
                   : strlen(text) != len
                       ? sc_error_set(SC_ERR_FORMAT, "%s: not a text file (it holds a NUL byte)",
                                      path)
                       : host_sweep_plan_load_text(text, path, plan);
    free(text);
    return st;
}

void host_sweep_plan_free(host_sweep_plan *plan)
{
    for (int i = 0; plan->train_keys && i < plan->line_count; i++)
        free(plan->train_keys[i]);
    if (plan->lines)
        free(plan->lines[0]);
    free(plan->lines);
    free(plan->train_keys);
    free(plan->space_line);
    free(plan->text);
    free(plan->base);
    host_space_free(&plan->space);
    *plan = (host_sweep_plan){0};
}

/* ---- a trial's configuration ---- */

/* Whether the trial's [train] replaces option `key` of the base. */
static bool is_swept(const host_sweep_plan *plan, const char *key)
{
    if (host_space_find(&plan->space, key))
        return true;
    for (int d = 0; d < plan->space.count; d++) {
        const char *arg, *option = arg_option_of(plan->space.dims[d].name, &arg);
        if (option && strcmp(option, key) == 0)
            return true;
    }
    return false;
}

static bool is_swept_line(const host_sweep_plan *plan, int i)
{
    return plan->space_line[i] || (plan->train_keys[i] && is_swept(plan, plan->train_keys[i]));
}

/* The base's list of `option` with the trial's arguments: a swept key
 * takes its place, a new one goes at the end. */
static sc_status merged_args(const host_sweep_plan *plan, const char *option, const char *base,
                             char *const *values, FILE *out)
{
    sc_args *args;
    SC_TRY(sc_args_parse(base, option, &args));
    fprintf(out, "%s = ", option);
    const char *sep = "";
    for (int i = 0; i < sc_args_count(args); i++, sep = ",") {
        char name[HOST_SPACE_NAME_MAX + 16];
        snprintf(name, sizeof name, "%s.%s", option, sc_args_key(args, i));
        const host_space_dim *dim = host_space_find(&plan->space, name);
        fprintf(out, "%s%s=%s", sep, sc_args_key(args, i),
                dim ? values[dim - plan->space.dims] : sc_args_value(args, i));
    }
    for (int d = 0; d < plan->space.count; d++) {
        const char *key, *of = arg_option_of(plan->space.dims[d].name, &key);
        if (of && strcmp(of, option) == 0 && !sc_args_get(args, key)) {
            fprintf(out, "%s%s=%s", sep, key, values[d]);
            sep = ",";
        }
    }
    fputc('\n', out);
    sc_args_free(args);
    return SC_OK;
}

sc_status host_sweep_plan_trial_ini(const host_sweep_plan *plan,
                                    char *const *values, const char *title,
                                    char **text)
{
    size_t len = 0;
    *text = NULL;
    FILE *out = open_memstream(text, &len);
    if (!out)
        return sc_error_set(SC_ERR_NOMEM, "out of memory");
    sc_status st = blanked_text(plan, is_swept_line, out);
    fprintf(out, "[train]\n; %s\n", title);
    const char *key;
    for (int d = 0; d < plan->space.count; d++)
        if (!arg_option_of(plan->space.dims[d].name, &key))
            fprintf(out, "%s = %s\n", plan->space.dims[d].name, values[d]);
    const char *bases[ARG_OPTIONS] = {plan->base->model_args, plan->base->dataset_args};
    for (int i = 0; st == SC_OK && i < ARG_OPTIONS; i++)
        if (is_swept(plan, arg_options[i]) && !host_space_find(&plan->space, arg_options[i]))
            st = merged_args(plan, arg_options[i], bases[i], values, out);
    if (fclose(out) != 0 && st == SC_OK)
        st = sc_error_set(SC_ERR_NOMEM, "out of memory");
    if (st != SC_OK) {
        free(*text);
        *text = NULL;
    }
    return st;
}

/* ---- differences ---- */

/* The "section name" keys and values of a resolved config's text. */
typedef struct option_list {
    char **keys, **values;
    int n;
} option_list;

static void options_free(option_list *l)
{
    for (int i = 0; i < l->n; i++) {
        free(l->keys[i]);
        free(l->values[i]);
    }
    free(l->keys);
    free(l->values);
}

static sc_status options_of(const host_config *cfg, option_list *l)
{
    char *text;
    *l = (option_list){0};
    SC_TRY(host_config_ini_text(cfg, HOST_PROGRAM_TRAIN, &text));
    char section[512] = "";
    sc_status st = SC_OK;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line && st == SC_OK;
         line = strtok_r(NULL, "\n", &save)) {
        char *s = skip_space(line), *name, *value;
        if (*s == '[')
            snprintf(section, sizeof section, "%s", s);
        if (*s == '[' || *s == ';' || *s == '#')
            continue;
        split_pair(s, &name, &value);
        char **keys = realloc(l->keys, (size_t)(l->n + 1) * sizeof *keys);
        char **values = keys ? realloc(l->values, (size_t)(l->n + 1) * sizeof *values) : NULL;
        if (keys)
            l->keys = keys;
        if (values)
            l->values = values;
        size_t size = strlen(section) + strlen(name) + 2;
        char *key = values ? malloc(size) : NULL;
        char *copy = key ? strdup(value ? value : "") : NULL;
        if (!copy) {
            free(key);
            st = sc_error_set(SC_ERR_NOMEM, "out of memory");
            break;
        }
        snprintf(key, size, "%s %s", section, name);
        l->keys[l->n] = key;
        l->values[l->n++] = copy;
    }
    free(text);
    return st;
}

static const char *option_value(const option_list *l, const char *key)
{
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->keys[i], key) == 0)
            return l->values[i];
    return NULL;
}

static int diff_options(const option_list *was, const option_list *now,
                        host_sweep_plan_change_fn fn, void *user)
{
    int changes = 0;
    for (int i = 0; i < was->n; i++) {
        const char *v = option_value(now, was->keys[i]);
        if (!v || strcmp(v, was->values[i]) != 0) {
            fn(user, was->keys[i], was->values[i], v ? v : "(none)");
            changes++;
        }
    }
    for (int i = 0; i < now->n; i++)
        if (!option_value(was, now->keys[i])) {
            fn(user, now->keys[i], "(none)", now->values[i]);
            changes++;
        }
    return changes;
}

static bool same_dim(const host_space_dim *a, const host_space_dim *b)
{
    if (a->kind != b->kind || a->count != b->count || a->lo != b->lo || a->hi != b->hi)
        return false;
    for (int i = 0; i < a->count; i++)
        if (strcmp(a->values[i], b->values[i]) != 0)
            return false;
    return true;
}

static int diff_space(const host_space *was, const host_space *now,
                      host_sweep_plan_change_fn fn, void *user)
{
    int changes = 0;
    char what[HOST_SPACE_NAME_MAX + 16];
    for (int d = 0; d < was->count; d++) {
        const host_space_dim *other = host_space_find(now, was->dims[d].name);
        if (other && same_dim(&was->dims[d], other))
            continue;
        snprintf(what, sizeof what, "[space] %s", was->dims[d].name);
        fn(user, what, was->dims[d].spec, other ? other->spec : "(none)");
        changes++;
    }
    for (int d = 0; d < now->count; d++)
        if (!host_space_find(was, now->dims[d].name)) {
            snprintf(what, sizeof what, "[space] %s", now->dims[d].name);
            fn(user, what, "(none)", now->dims[d].spec);
            changes++;
        }
    return changes;
}

int host_sweep_plan_diff(const host_sweep_plan *was, const host_sweep_plan *now,
                         host_sweep_plan_change_fn fn, void *user)
{
    option_list a = {0}, b = {0};
    int changes = 0;
    if (options_of(was->base, &a) == SC_OK && options_of(now->base, &b) == SC_OK) {
        changes += diff_options(&a, &b, fn, user);
    } else {
        fn(user, "[train]", "(unreadable)", sc_error_message());
        changes++;
    }
    options_free(&a);
    options_free(&b);
    return changes + diff_space(&was->space, &now->space, fn, user);
}
