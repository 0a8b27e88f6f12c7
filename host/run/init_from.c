/* init_from.c — --init-from, --init-map, --init-strict and --freeze
 * (init_from.h). */
#include "run/init_from.h"

#include <fnmatch.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/name_map.h"
#include "base/safetensors.h"
#include "scorch/serialize.h"
#include "scorch_host/params.h"

enum {
    NAME_BUF = HOST_SAFETENSORS_NAME_MAX + 1,
    LISTED_IN_ERROR = 8, /* tensors of each kind a refusal lists, to fit one message */
};

static const char CHECKPOINT_MAGIC[8] = "SCORCHCK"; /* docs/checkpoint-format.md */
static const char PARAM_PREFIX[] = "param/";

sc_status host_init_check(const host_config *cfg)
{
    if (cfg->init_from[0])
        return SC_OK;
    if (cfg->init_map[0])
        return sc_error_set(SC_ERR_INVALID, "--init-map needs --init-from FILE: it renames the "
                            "tensors of that file");
    if (!cfg->init_strict)
        return sc_error_set(SC_ERR_INVALID, "--no-init-strict needs --init-from FILE: it says "
                            "how to load that file");
    return SC_OK;
}

/* ---- a growing text ---- */

typedef struct list {
    char *text;
    size_t len;
    int count;
    size_t head; /* the length of the first LISTED_IN_ERROR items */
} list;

static sc_status list_add(list *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static sc_status list_add(list *l, const char *fmt, ...)
{
    char item[NAME_BUF + 160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(item, sizeof item, fmt, ap);
    va_end(ap);
    size_t n = strlen(item) + 2;
    char *text = realloc(l->text, l->len + n + 1);
    if (!text)
        return sc_error_set(SC_ERR_NOMEM, "out of memory listing tensors");
    l->text = text;
    l->len += (size_t)sprintf(text + l->len, "%s%s", l->count ? ", " : "", item);
    if (++l->count <= LISTED_IN_ERROR)
        l->head = l->len;
    return SC_OK;
}

/* "; KIND (N): the first items and M more" into buf at *n, for a refusal. */
static void list_part(const list *l, const char *kind, char *buf, size_t size, int *n)
{
    if (!l->count || *n < 0 || (size_t)*n >= size)
        return;
    *n += snprintf(buf + *n, size - (size_t)*n, "; %s (%d): %.*s", kind, l->count, (int)l->head,
                   l->text);
    if (l->count > LISTED_IN_ERROR && (size_t)*n < size)
        *n += snprintf(buf + *n, size - (size_t)*n, " and %d more", l->count - LISTED_IN_ERROR);
}

/* ---- --freeze ---- */

/* The model's parameter names for a message: the first few. */
static void parameter_names(const sc_params *ps, char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < sc_params_count(ps) && n + 4 < size; i++) {
        const sc_tensor *p = sc_params_at(ps, i);
        if (p->flags & SC_TENSOR_BUFFER)
            continue;
        int w = snprintf(buf + n, size - n, "%s%s", n ? ", " : "", p->name);
        n = w > 0 && n + (size_t)w < size ? n + (size_t)w : size;
    }
    if (n >= size) /* cut: end on an ellipsis */
        strcpy(buf + size - 4, "...");
}

static sc_status freeze_glob(const char *glob, sc_params *ps)
{
    int matched = 0;
    for (int i = 0; i < sc_params_count(ps); i++) {
        sc_tensor *p = sc_params_at(ps, i);
        if (!(p->flags & SC_TENSOR_BUFFER) && fnmatch(glob, p->name, 0) == 0) {
            sc_params_set_trainable(p, false);
            matched++;
        }
    }
    if (matched)
        return SC_OK;
    char names[400];
    parameter_names(ps, names, sizeof names);
    return sc_error_set(SC_ERR_INVALID, "--freeze '%s' matches no parameter of the model (it "
                        "has %s)", glob, names);
}

sc_status host_freeze_apply(const char *globs, sc_params *ps)
{
    for (const char *rest = *globs ? globs : NULL; rest;) {
        const char *item;
        size_t len;
        char glob[HOST_NAME_RULE_MAX];
        rest = host_name_list_next(rest, &item, &len);
        snprintf(glob, sizeof glob, "%.*s", (int)len, item);
        SC_TRY(freeze_glob(glob, ps));
    }
    return SC_OK;
}

/* ---- the file's tensors ---- */

typedef struct source {
    const char *path;
    const char *kind;              /* "a safetensors file", "a scorch checkpoint" */
    sc_ckpt *ck;                   /* a checkpoint, or */
    host_safetensors *st;          /* a safetensors file */
    int n;
    host_safetensors_tensor *t;    /* named as in the file (a checkpoint's without "param/") */
    char **to;                     /* the model's name each loads as; "" dropped */
    int *by_to;                    /* indices sorted by `to` */
    bool *used;                    /* loaded, or refused for its shape */
} source;

static void source_close(source *s)
{
    for (int i = 0; s->to && i < s->n; i++)
        free(s->to[i]);
    free(s->to);
    free(s->by_to);
    free(s->used);
    free(s->t);
    sc_ckpt_close(s->ck);
    host_safetensors_close(s->st);
}

static bool has_checkpoint_magic(const char *path)
{
    char magic[sizeof CHECKPOINT_MAGIC];
    FILE *f = fopen(path, "rb");
    bool yes = f && fread(magic, 1, sizeof magic, f) == sizeof magic &&
               memcmp(magic, CHECKPOINT_MAGIC, sizeof magic) == 0;
    if (f)
        fclose(f);
    return yes;
}

static sc_status alloc_views(source *s, int n)
{
    s->n = n;
    s->t = calloc((size_t)(n ? n : 1), sizeof *s->t);
    s->to = calloc((size_t)(n ? n : 1), sizeof *s->to);
    s->by_to = calloc((size_t)(n ? n : 1), sizeof *s->by_to);
    s->used = calloc((size_t)(n ? n : 1), sizeof *s->used);
    return s->t && s->to && s->by_to && s->used
               ? SC_OK : sc_error_set(SC_ERR_NOMEM, "out of memory for the file's tensors");
}

/* A checkpoint's "param/<name>" tensors, named <name>. */
static sc_status checkpoint_views(source *s)
{
    size_t prefix = strlen(PARAM_PREFIX);
    int n = 0;
    s->kind = "a scorch checkpoint";
    SC_TRY(sc_ckpt_open(s->path, &s->ck));
    for (int i = 0; i < sc_ckpt_count(s->ck); i++)
        n += strncmp(sc_ckpt_name(s->ck, i), PARAM_PREFIX, prefix) == 0;
    SC_TRY(alloc_views(s, n));
    n = 0;
    for (int i = 0; i < sc_ckpt_count(s->ck); i++) {
        const char *name = sc_ckpt_name(s->ck, i);
        const sc_tensor *t = sc_ckpt_tensor(s->ck, name);
        if (t && strncmp(name, PARAM_PREFIX, prefix) == 0)
            s->t[n++] = host_safetensors_view(name + prefix, t);
    }
    s->n = n;
    return SC_OK;
}

static sc_status safetensors_views(source *s)
{
    s->kind = "a safetensors file";
    SC_TRY(host_safetensors_open(s->path, &s->st));
    SC_TRY(alloc_views(s, host_safetensors_count(s->st)));
    for (int i = 0; i < s->n; i++)
        s->t[i] = *host_safetensors_at(s->st, i);
    return SC_OK;
}

static sc_status source_open(source *s, const char *path)
{
    memset(s, 0, sizeof *s);
    s->path = path;
    return has_checkpoint_magic(path) ? checkpoint_views(s) : safetensors_views(s);
}

/* ---- names ---- */

static _Thread_local const source *sorting;

static int by_to(const void *a, const void *b)
{
    return strcmp(sorting->to[*(const int *)a], sorting->to[*(const int *)b]);
}

/* The index of the tensor that loads as `name`, or -1. */
static int find_to(const source *s, const char *name)
{
    int lo = 0, hi = s->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(s->to[s->by_to[mid]], name);
        if (c == 0)
            return s->by_to[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

/* Two of the file's tensors may not load as the same parameter. */
static sc_status check_distinct(source *s)
{
    for (int i = 0; i < s->n; i++)
        s->by_to[i] = i;
    sorting = s;
    qsort(s->by_to, (size_t)s->n, sizeof *s->by_to, by_to);
    for (int i = 1; i < s->n; i++) {
        int a = s->by_to[i - 1], b = s->by_to[i];
        if (s->to[b][0] && strcmp(s->to[a], s->to[b]) == 0)
            return sc_error_set(SC_ERR_INVALID, "--init-map: tensors '%.200s' and '%.200s' of "
                                "%s would both load as '%.200s'", s->t[a].name, s->t[b].name,
                                s->path, s->to[b]);
    }
    return SC_OK;
}

/* Renames the tensors by the rules; a rule that matches none is refused. */
static sc_status map_names(source *s, const char *rules)
{
    host_name_map map;
    int hits[HOST_NAME_MAP_RULES] = {0};
    char name[NAME_BUF];
    if (host_name_map_parse(rules, &map) != SC_OK)
        return sc_error_wrap(sc_error_code(), "--init-map");
    for (int i = 0; i < s->n; i++) {
        int rule;
        if (host_name_map_apply(&map, s->t[i].name, name, sizeof name, &rule) != SC_OK)
            return sc_error_wrap(sc_error_code(), "--init-map");
        if (rule >= 0)
            hits[rule]++;
        if (!(s->to[i] = strdup(name)))
            return sc_error_set(SC_ERR_NOMEM, "out of memory for the file's tensor names");
    }
    for (int r = 0; r < map.n; r++)
        if (!hits[r])
            return sc_error_set(SC_ERR_INVALID, "--init-map rule '%s=%s' matches no tensor of "
                                "%s (none that an earlier rule leaves to it)", map.rule[r].from,
                                map.rule[r].to, s->path);
    return check_distinct(s);
}

/* ---- matching the model ---- */

/* What does not fit, by kind; and what loads: pairs[k] = (parameter,
 * tensor) for k < n_pairs. */
typedef struct fit {
    list missing, unexpected, misshapen;
    int (*pairs)[2];
    int n_pairs;
} fit;

static void fit_free(fit *f)
{
    free(f->missing.text);
    free(f->unexpected.text);
    free(f->misshapen.text);
    free(f->pairs);
}

static void shape_text(int ndim, const int64_t *shape, char *buf, size_t size)
{
    int n = snprintf(buf, size, "[");
    for (int d = 0; d < ndim && n > 0 && (size_t)n < size; d++)
        n += snprintf(buf + n, size - (size_t)n, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (n > 0 && (size_t)n < size)
        snprintf(buf + n, size - (size_t)n, "]");
}

static bool same_shape(const host_safetensors_tensor *t, const sc_tensor *p)
{
    return t->ndim == p->ndim &&
           memcmp(t->shape, p->shape, (size_t)p->ndim * sizeof *p->shape) == 0;
}

/* Parameter i against the tensor that loads as its name. */
static sc_status fit_parameter(source *s, const sc_params *ps, int i, fit *f)
{
    const sc_tensor *p = sc_params_at(ps, i);
    int j = find_to(s, p->name);
    if (j < 0)
        return list_add(&f->missing, "%s", p->name);
    const host_safetensors_tensor *t = &s->t[j];
    s->used[j] = true;
    if (!same_shape(t, p) || !host_safetensors_loads_as_f32(t->dtype)) {
        char file[160], model[160];
        shape_text(t->ndim, t->shape, file, sizeof file);
        shape_text(p->ndim, p->shape, model, sizeof model);
        return list_add(&f->misshapen, "%s (file %s %s, model %s)", p->name,
                        host_safetensors_dtype_name(t->dtype), file, model);
    }
    f->pairs[f->n_pairs][0] = i;
    f->pairs[f->n_pairs++][1] = j;
    return SC_OK;
}

static sc_status fit_model(source *s, const sc_params *ps, fit *f)
{
    memset(f, 0, sizeof *f);
    if (!(f->pairs = malloc((size_t)(sc_params_count(ps) + 1) * sizeof *f->pairs)))
        return sc_error_set(SC_ERR_NOMEM, "out of memory matching the model");
    for (int i = 0; i < sc_params_count(ps); i++)
        SC_TRY(fit_parameter(s, ps, i, f));
    for (int j = 0; j < s->n; j++) {
        bool renamed = strcmp(s->to[j], s->t[j].name) != 0;
        if (!s->used[j] && s->to[j][0] && renamed)
            SC_TRY(list_add(&f->unexpected, "%s (as %s)", s->t[j].name, s->to[j]));
        else if (!s->used[j] && s->to[j][0])
            SC_TRY(list_add(&f->unexpected, "%s", s->t[j].name));
    }
    return SC_OK;
}

/* --init-strict: every kind of fault in one message. */
static sc_status refuse_unfit(const source *s, const fit *f)
{
    char parts[1024] = "";
    int n = 0;
    list_part(&f->missing, "not in the file", parts, sizeof parts, &n);
    list_part(&f->unexpected, "not in the model", parts, sizeof parts, &n);
    list_part(&f->misshapen, "shaped otherwise", parts, sizeof parts, &n);
    return sc_error_set(SC_ERR_INVALID, "--init-from %s does not fit the model (rename with "
                        "--init-map, or load what fits with --no-init-strict)%s", s->path, parts);
}

/* Without --init-strict: what was skipped, a line per kind. */
static void note_skipped(const source *s, const fit *f, FILE *notes)
{
    if (f->missing.count)
        fprintf(notes, "note: --no-init-strict: %d parameter%s not in %s keep%s the model's own "
                "initialisation: %s\n", f->missing.count, f->missing.count == 1 ? "" : "s",
                s->path, f->missing.count == 1 ? "s" : "", f->missing.text);
    if (f->unexpected.count)
        fprintf(notes, "note: --no-init-strict: %d tensor%s of %s the model does not have, "
                "skipped: %s\n", f->unexpected.count, f->unexpected.count == 1 ? "" : "s",
                s->path, f->unexpected.text);
    if (f->misshapen.count)
        fprintf(notes, "note: --no-init-strict: %d tensor%s of %s shaped otherwise than the "
                "model's, skipped: %s\n", f->misshapen.count,
                f->misshapen.count == 1 ? "" : "s", s->path, f->misshapen.text);
}

/* The matched tensors into the parameters, through a host copy of the
 * flat buffer (which may be on a GPU). */
static sc_status load_pairs(const source *s, const fit *f, sc_params *ps)
{
    float *values = malloc((size_t)(sc_params_numel(ps) ? sc_params_numel(ps) : 1) *
                           sizeof *values);
    if (!values)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for a copy of the parameters");
    sc_status st = sc_params_read(ps, values, NULL);
    for (int k = 0; st == SC_OK && k < f->n_pairs; k++)
        st = host_safetensors_read_f32(&s->t[f->pairs[k][1]],
                                       values + sc_params_offset(ps, f->pairs[k][0]));
    if (st == SC_OK)
        st = sc_params_write(ps, values);
    free(values);
    return st == SC_OK ? SC_OK : sc_error_wrap(st, "--init-from %s", s->path);
}

static sc_status load(source *s, const host_config *cfg, sc_params *ps, FILE *info,
                      FILE *notes)
{
    fit f;
    SC_TRY(map_names(s, cfg->init_map));
    sc_status st = fit_model(s, ps, &f);
    bool fits = !f.missing.count && !f.unexpected.count && !f.misshapen.count;
    if (st == SC_OK && !fits && cfg->init_strict)
        st = refuse_unfit(s, &f);
    else if (st == SC_OK && f.n_pairs == 0)
        st = sc_error_set(SC_ERR_INVALID, "--init-from %s: none of its %d tensors fits a "
                          "parameter of the model (are names to be mapped with --init-map?)",
                          s->path, s->n);
    if (st == SC_OK && !fits)
        note_skipped(s, &f, notes);
    if (st == SC_OK)
        st = load_pairs(s, &f, ps);
    if (st == SC_OK && info)
        fprintf(info, "initialised %d of the model's %d parameters and buffers from %s (%s)\n",
                f.n_pairs, sc_params_count(ps), s->path, s->kind);
    fit_free(&f);
    return st;
}

sc_status host_init_from_load(const host_config *cfg, sc_params *ps, FILE *info, FILE *notes)
{
    source s;
    sc_status st = source_open(&s, cfg->init_from);
    if (st != SC_OK) /* the readers' messages name the file */
        st = sc_error_wrap(st, "--init-from");
    else
        st = load(&s, cfg, ps, info, notes);
    source_close(&s);
    return st;
}
