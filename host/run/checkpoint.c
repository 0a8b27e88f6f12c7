#include "run/checkpoint.h"
#include "scorch_host/ema.h"
#include "scorch_host/optim.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { NAME_MAX_LEN = 320 };

/* ---- the "trainer" blob: `key value` lines ---- */

typedef struct text_buf {
    char *data;
    size_t len, cap;
} text_buf;

static sc_status text_printf(text_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static sc_status text_printf(text_buf *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return SC_OK;
        }
        size_t cap = b->cap ? 2 * b->cap : 1024;
        char *d = realloc(b->data, cap);
        if (!d)
            return sc_error_set(SC_ERR_NOMEM, "out of memory writing a checkpoint");
        b->data = d;
        b->cap = cap;
    }
}

/* Every scalar of host_train_state, for both writing and reading, with the
 * values a checkpoint may hold: a crafted or damaged file whose CRC is
 * valid must not reach the trainer with a position it cannot hold. */
typedef enum field_kind { F_INT, F_BOOL, F_I64, F_U64, F_DOUBLE } field_kind;

typedef struct state_field {
    const char *key;
    field_kind kind;
    size_t offset;
    double min, max; /* inclusive; F_U64 takes any value, and so does a
                        double field whose min is NAN (NaN and infinities
                        too: a best metric may be anything a socket gave) */
} state_field;

/* Counts (steps, batches, samples) stay below 2^53, where every integer
 * is still a double: more steps than any run takes, fewer than a crafted
 * `step 9e18` whose sums and step numbers would overflow. */
#define COUNT_MAX 9007199254740992.0
#define WORLD_MAX 1048576.0

#define STATE_FIELD(key, kind, member, min, max)                                  \
    {key, kind, offsetof(host_train_state, member), min, max}
static const state_field state_fields[] = {
    STATE_FIELD("epoch", F_INT, epoch, 1, INT_MAX - 1),
    STATE_FIELD("next_batch", F_I64, next_batch, 0, COUNT_MAX),
    STATE_FIELD("world", F_INT, world, 1, WORLD_MAX),
    STATE_FIELD("step", F_I64, step, 0, COUNT_MAX),
    STATE_FIELD("seed", F_U64, seed, 0, 0),
    STATE_FIELD("base_lr", F_DOUBLE, base_lr, DBL_MIN, DBL_MAX),
    STATE_FIELD("plateau_scale", F_DOUBLE, schedule.plateau_scale, DBL_MIN, 1),
    STATE_FIELD("plateau_best", F_DOUBLE, schedule.plateau_best, NAN, NAN),
    STATE_FIELD("plateau_bad_epochs", F_INT, schedule.plateau_bad_epochs, 0, INT_MAX),
    STATE_FIELD("has_best", F_BOOL, has_best, 0, 1),
    STATE_FIELD("best_metric", F_DOUBLE, best_metric, NAN, NAN),
    STATE_FIELD("best_epoch", F_INT, best_epoch, 0, INT_MAX - 1),
    STATE_FIELD("loss_sum", F_DOUBLE, loss_sum, -DBL_MAX, DBL_MAX),
    STATE_FIELD("samples", F_I64, samples, 0, COUNT_MAX),
    STATE_FIELD("train_seconds", F_DOUBLE, train_seconds, 0, DBL_MAX),
};
#undef STATE_FIELD

enum { N_STATE_FIELDS = sizeof state_fields / sizeof state_fields[0] };

/* Doubles are written with %.17g so that they read back bit for bit. */
static sc_status field_to_text(text_buf *b, const state_field *f, const host_train_state *s)
{
    const char *p = (const char *)s + f->offset;
    switch (f->kind) {
    case F_INT: return text_printf(b, "%s %d\n", f->key, *(const int *)p);
    case F_BOOL: return text_printf(b, "%s %d\n", f->key, *(const bool *)p);
    case F_I64: return text_printf(b, "%s %" PRId64 "\n", f->key, *(const int64_t *)p);
    case F_U64: return text_printf(b, "%s %" PRIu64 "\n", f->key, *(const uint64_t *)p);
    case F_DOUBLE: return text_printf(b, "%s %.17g\n", f->key, *(const double *)p);
    }
    return SC_OK;
}

/* The value text of field f, whole, as a number; refused unless it lies
 * in the field's range. */
static sc_status parse_field(const state_field *f, const char *v, double *d, uint64_t *u,
                             int64_t *i)
{
    char *end;
    errno = 0;
    if (f->kind == F_U64)
        *u = strtoull(v, &end, 10);
    else if (f->kind == F_DOUBLE)
        *d = strtod(v, &end);
    else
        *i = strtoll(v, &end, 10);
    /* A double out of range reads as an infinity, which the range refuses,
     * or as a subnormal (ERANGE too), which is a value like any other. */
    bool numeral = end != v && !*end && !isspace((unsigned char)*v) &&
                   (errno != ERANGE || f->kind == F_DOUBLE) &&
                   (f->kind != F_U64 || isdigit((unsigned char)*v));
    if (!numeral)
        return sc_error_set(SC_ERR_FORMAT, "trainer field '%s' has the value '%.40s', not a "
                            "number of its kind", f->key, v);
    bool any = f->kind == F_U64 || (f->kind == F_DOUBLE && isnan(f->min));
    bool in_range = f->kind == F_DOUBLE ? *d >= f->min && *d <= f->max
                                        : *i >= (int64_t)f->min && *i <= (int64_t)f->max;
    if (!any && !in_range)
        return sc_error_set(SC_ERR_FORMAT, "trainer field '%s' is %s, outside %.17g to %.17g",
                            f->key, v, f->min, f->max);
    return SC_OK;
}

static sc_status field_from_text(const state_field *f, const char *v, host_train_state *s)
{
    char *p = (char *)s + f->offset;
    double d = 0;
    uint64_t u = 0;
    int64_t i = 0;
    SC_TRY(parse_field(f, v, &d, &u, &i));
    switch (f->kind) {
    case F_INT: *(int *)p = (int)i; break;
    case F_BOOL: *(bool *)p = i != 0; break;
    case F_I64: *(int64_t *)p = i; break;
    case F_U64: *(uint64_t *)p = u; break;
    case F_DOUBLE: *(double *)p = d; break;
    }
    return SC_OK;
}

static sc_status state_to_text(text_buf *b, const host_train_state *s, const sc_metrics *sums)
{
    for (int i = 0; i < N_STATE_FIELDS; i++)
        SC_TRY(field_to_text(b, &state_fields[i], s));
    for (int i = 0; sums && i < sc_metrics_count(sums); i++)
        SC_TRY(text_printf(b, "metric %s %.17g %.17g\n", sc_metrics_name(sums, i),
                           sc_metrics_numerator(sums, i), sc_metrics_denominator(sums, i)));
    return SC_OK;
}

static sc_status metric_line(const char *line, sc_metrics *sums)
{
    char name[SC_METRIC_NAME_MAX];
    double num, den;
    int end = 0;
    if (sscanf(line, "metric %47s %lf %lf%n", name, &num, &den, &end) != 3 || line[end] ||
        !isfinite(num) || !isfinite(den))
        return sc_error_set(SC_ERR_FORMAT, "bad trainer line '%.60s'", line);
    return sums ? sc_metrics_add(sums, name, num, den) : SC_OK;
}

/* One `key value` line; seen[] counts the fields read. */
static sc_status state_line(const char *line, host_train_state *s, sc_metrics *sums,
                            bool seen[N_STATE_FIELDS])
{
    if (!line[0])
        return SC_OK;
    if (strncmp(line, "metric ", 7) == 0)
        return metric_line(line, sums);
    const char *space = strchr(line, ' ');
    size_t len = space ? (size_t)(space - line) : strlen(line);
    for (int i = 0; i < N_STATE_FIELDS; i++)
        if (strlen(state_fields[i].key) == len && strncmp(line, state_fields[i].key, len) == 0) {
            if (!space)
                return sc_error_set(SC_ERR_FORMAT, "trainer field '%s' has no value",
                                    state_fields[i].key);
            if (seen[i])
                return sc_error_set(SC_ERR_FORMAT, "trainer field '%s' appears twice",
                                    state_fields[i].key);
            seen[i] = true;
            return field_from_text(&state_fields[i], space + 1, s);
        }
    return sc_error_set(SC_ERR_FORMAT, "unknown trainer field '%.*s'", (int)(len < 64 ? len : 64),
                        line);
}

/* A line of printable text: what a message may quote. */
static bool printable(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f)
            return false;
    return true;
}

/* Reads every field, each once and in range. */
static sc_status state_from_text(const char *text, size_t size, host_train_state *s,
                                 sc_metrics *sums)
{
    char line[512];
    bool seen[N_STATE_FIELDS] = {0};
    for (size_t i = 0; i < size;) {
        const char *nl = memchr(text + i, '\n', size - i);
        size_t n = nl ? (size_t)(nl - (text + i)) : size - i;
        if (n >= sizeof line || !printable(text + i, n))
            return sc_error_set(SC_ERR_FORMAT, "trainer line at byte %zu is over %zu bytes long "
                                "or holds a control character", i, sizeof line - 1);
        memcpy(line, text + i, n);
        line[n] = '\0';
        SC_TRY(state_line(line, s, sums, seen));
        i += n + 1;
    }
    for (int i = 0; i < N_STATE_FIELDS; i++)
        if (!seen[i])
            return sc_error_set(SC_ERR_FORMAT, "no trainer field '%s'", state_fields[i].key);
    return SC_OK;
}

/* ---- save ---- */

static const char HOOK_PREFIX[] = "hook/";

static sc_status write_hook_blobs(sc_ckpt_writer *w, const host_hook_blobs *hooks)
{
    char name[NAME_MAX_LEN];
    for (int i = 0; hooks && i < hooks->n; i++) {
        snprintf(name, sizeof name, "%s%s", HOOK_PREFIX, hooks->items[i].hook);
        SC_TRY(sc_ckpt_write_blob(w, name, hooks->items[i].data, hooks->items[i].size));
    }
    return SC_OK;
}

static const char EMA_PREFIX[] = "ema/";

static sc_status write_ema(sc_ckpt_writer *w, const sc_params *params, sc_ema *ema)
{
    char name[NAME_MAX_LEN];
    for (int i = 0; ema && i < sc_params_count(params); i++) {
        const sc_tensor *t = sc_ema_at(ema, i);
        snprintf(name, sizeof name, "%s%s", EMA_PREFIX, sc_params_at(params, i)->name);
        if (t)
            SC_TRY(sc_ckpt_write_tensor(w, name, t));
    }
    return SC_OK;
}

static sc_status write_entries(sc_ckpt_writer *w, const sc_params *params, sc_optim *opt,
                               sc_ema *ema, const text_buf *trainer, const char *config_text,
                               const char *model_name, const host_hook_blobs *hooks)
{
    char name[NAME_MAX_LEN];
    for (int i = 0; i < sc_params_count(params); i++) {
        const sc_tensor *p = sc_params_at(params, i);
        snprintf(name, sizeof name, "param/%s", p->name);
        SC_TRY(sc_ckpt_write_tensor(w, name, p));
    }
    for (int i = 0; opt && i < sc_optim_state_count(opt); i++) {
        const sc_tensor *t = sc_optim_state_at(opt, i);
        snprintf(name, sizeof name, "optim/%s", t->name);
        SC_TRY(sc_ckpt_write_tensor(w, name, t));
    }
    SC_TRY(write_ema(w, params, ema));
    SC_TRY(sc_ckpt_write_blob(w, "trainer", trainer->data, trainer->len));
    SC_TRY(sc_ckpt_write_blob(w, "config", config_text, strlen(config_text)));
    SC_TRY(write_hook_blobs(w, hooks));
    return sc_ckpt_write_blob(w, "model", model_name, strlen(model_name));
}

sc_status host_checkpoint_save(const char *path, const sc_params *params, sc_optim *opt,
                             sc_ema *ema, const host_train_state *state,
                             const sc_metrics *train_sums,
                             const char *config_text, const char *model_name,
                             const host_hook_blobs *hooks)
{
    text_buf trainer = {0};
    sc_ckpt_writer *w = NULL;
    sc_status st = state_to_text(&trainer, state, train_sums);
    if (st == SC_OK)
        st = sc_ckpt_writer_open(path, &w);
    if (st == SC_OK) {
        st = write_entries(w, params, opt, ema, &trainer, config_text, model_name, hooks);
        if (st == SC_OK)
            st = sc_ckpt_writer_commit(w);
        else
            sc_ckpt_writer_abort(w);
    }
    free(trainer.data);
    return st == SC_OK ? SC_OK : sc_error_wrap(st, "saving checkpoint %s", path);
}

/* ---- load ---- */

static sc_status check_model(const sc_ckpt *ck, const char *model_name)
{
    size_t size;
    const char *name = sc_ckpt_blob(ck, "model", &size);
    if (!name)
        return sc_error_set(SC_ERR_FORMAT, "not a training checkpoint (no model entry)");
    if (size != strlen(model_name) || memcmp(name, model_name, size) != 0)
        return sc_error_set(SC_ERR_INVALID, "written by model '%.*s', not '%s'", (int)size,
                            name, model_name);
    return SC_OK;
}

static sc_status read_tensors(const sc_ckpt *ck, const sc_params *params, sc_optim *opt)
{
    char name[NAME_MAX_LEN];
    for (int i = 0; i < sc_params_count(params); i++) {
        sc_tensor *p = sc_params_at(params, i);
        snprintf(name, sizeof name, "param/%s", p->name);
        SC_TRY(sc_ckpt_read_tensor(ck, name, p));
    }
    for (int i = 0; opt && i < sc_optim_state_count(opt); i++) {
        sc_tensor *t = sc_optim_state_at(opt, i);
        snprintf(name, sizeof name, "optim/%s", t->name);
        SC_TRY(sc_ckpt_read_tensor(ck, name, t));
    }
    return SC_OK;
}

/* The EMA of every parameter; a file without one was trained without
 * --ema-decay. */
static sc_status read_ema(const sc_ckpt *ck, const sc_params *params, sc_ema *ema)
{
    char name[NAME_MAX_LEN];
    for (int i = 0; i < sc_params_count(params); i++) {
        sc_tensor *t = sc_ema_at(ema, i);
        snprintf(name, sizeof name, "%s%s", EMA_PREFIX, sc_params_at(params, i)->name);
        if (t && !sc_ckpt_has(ck, name))
            return sc_error_set(SC_ERR_INVALID, "it holds no EMA weights (no '%s'): it was "
                                "trained without --ema-decay", name);
        if (t)
            SC_TRY(sc_ckpt_read_tensor(ck, name, t));
    }
    return SC_OK;
}

static sc_status read_hook_blobs(const sc_ckpt *ck, host_hook_blobs *hooks)
{
    host_hook_blobs_clear(hooks);
    size_t prefix = strlen(HOOK_PREFIX);
    for (int i = 0; i < sc_ckpt_count(ck); i++) {
        const char *name = sc_ckpt_name(ck, i);
        size_t size;
        const void *data = sc_ckpt_blob(ck, name, &size);
        if (data && strncmp(name, HOOK_PREFIX, prefix) == 0)
            SC_TRY(host_hook_blobs_put(hooks, name + prefix, data, size));
    }
    return SC_OK;
}

static sc_status read_all(const sc_ckpt *ck, sc_params *params, sc_optim *opt, sc_ema *ema,
                          host_train_state *state, sc_metrics *train_sums,
                          const char *model_name, host_hook_blobs *hooks)
{
    SC_TRY(check_model(ck, model_name));
    SC_TRY(read_tensors(ck, params, opt));
    if (ema)
        SC_TRY(read_ema(ck, params, ema));
    if (hooks)
        SC_TRY(read_hook_blobs(ck, hooks));
    if (!state)
        return SC_OK;
    size_t size;
    const char *text = sc_ckpt_blob(ck, "trainer", &size);
    if (!text)
        return sc_error_set(SC_ERR_FORMAT, "no trainer state");
    if (train_sums)
        sc_metrics_reset(train_sums);
    SC_TRY(state_from_text(text, size, state, train_sums));
    if (opt)
        sc_optim_set_steps(opt, state->step);
    return SC_OK;
}

sc_status host_checkpoint_load(const char *path, sc_params *params, sc_optim *opt,
                             sc_ema *ema, host_train_state *state, sc_metrics *train_sums,
                             const char *model_name, host_hook_blobs *hooks)
{
    sc_ckpt *ck = NULL;
    sc_status st = sc_ckpt_open(path, &ck);
    if (st == SC_OK)
        st = read_all(ck, params, opt, ema, state, train_sums, model_name, hooks);
    sc_ckpt_close(ck);
    return st == SC_OK ? SC_OK : sc_error_wrap(st, "loading checkpoint %s", path);
}

sc_status host_checkpoint_load_weights(const char *path, sc_params *params, bool ema,
                                       const char *model_name, host_train_state *state)
{
    if (!ema)
        return host_checkpoint_load(path, params, NULL, NULL, state, NULL, model_name, NULL);
    sc_ema *average = sc_ema_new(params);
    sc_status st = average ? host_checkpoint_load(path, params, NULL, average, state, NULL,
                                                  model_name, NULL)
                           : sc_error_code();
    if (st == SC_OK)
        st = sc_ema_swap(average);
    sc_ema_free(average);
    return st == SC_OK ? SC_OK : sc_error_wrap(st, "--ema");
}

/* A copy of the config blob, NUL-terminated; the blob itself must hold no
 * NUL, which would cut it short unseen. */
static sc_status copy_config(const sc_ckpt *ck, char **config_text)
{
    size_t size;
    const char *text = sc_ckpt_blob(ck, "config", &size);
    if (!text)
        return sc_error_set(SC_ERR_FORMAT, "no resolved config in it");
    const char *nul = memchr(text, '\0', size);
    if (nul)
        return sc_error_set(SC_ERR_FORMAT, "its config holds a NUL byte at offset %zu",
                            (size_t)(nul - text));
    char *copy = malloc(size + 1);
    if (!copy)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for its config");
    memcpy(copy, text, size);
    copy[size] = '\0';
    *config_text = copy;
    return SC_OK;
}

static sc_status read_config_text(const char *path, char **config_text)
{
    sc_ckpt *ck = NULL;
    SC_TRY(sc_ckpt_open(path, &ck));
    sc_status st = copy_config(ck, config_text);
    sc_ckpt_close(ck);
    return st == SC_OK ? SC_OK : sc_error_wrap(st, "checkpoint %s", path);
}

sc_status host_checkpoint_saved_config(const char *path, host_config *saved)
{
    char *text = NULL, name[HOST_PATH_MAX + 32];
    SC_TRY(read_config_text(path, &text));
    snprintf(name, sizeof name, "%s (its saved config)", path);
    host_config_defaults(saved);
    sc_status st = host_config_load_ini_text(saved, HOST_PROGRAM_TRAIN, text, name);
    free(text);
    if (st != SC_OK)
        return st;
    if (!saved->model[0] || !saved->dataset[0])
        return sc_error_set(SC_ERR_FORMAT, "checkpoint %s: its saved config names no %s plugin",
                            path, saved->model[0] ? "dataset" : "model");
    return SC_OK;
}
