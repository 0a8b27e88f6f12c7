#include "checkpoint.h"

#include <inttypes.h>
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

/* Every scalar of sc_train_state, for both writing and reading. */
typedef enum field_kind { F_INT, F_BOOL, F_I64, F_U64, F_DOUBLE } field_kind;

typedef struct state_field {
    const char *key;
    field_kind kind;
    size_t offset;
} state_field;

#define STATE_FIELD(key, kind, member) {key, kind, offsetof(sc_train_state, member)}
static const state_field state_fields[] = {
    STATE_FIELD("epoch", F_INT, epoch),
    STATE_FIELD("next_batch", F_I64, next_batch),
    STATE_FIELD("world", F_INT, world),
    STATE_FIELD("step", F_I64, step),
    STATE_FIELD("seed", F_U64, seed),
    STATE_FIELD("base_lr", F_DOUBLE, base_lr),
    STATE_FIELD("plateau_scale", F_DOUBLE, schedule.plateau_scale),
    STATE_FIELD("plateau_best", F_DOUBLE, schedule.plateau_best),
    STATE_FIELD("plateau_bad_epochs", F_INT, schedule.plateau_bad_epochs),
    STATE_FIELD("has_best", F_BOOL, has_best),
    STATE_FIELD("best_metric", F_DOUBLE, best_metric),
    STATE_FIELD("best_epoch", F_INT, best_epoch),
    STATE_FIELD("loss_sum", F_DOUBLE, loss_sum),
    STATE_FIELD("samples", F_I64, samples),
    STATE_FIELD("train_seconds", F_DOUBLE, train_seconds),
};
#undef STATE_FIELD

enum { N_STATE_FIELDS = sizeof state_fields / sizeof state_fields[0] };

/* Doubles are written with %.17g so that they read back bit for bit. */
static sc_status field_to_text(text_buf *b, const state_field *f, const sc_train_state *s)
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

static bool field_from_text(const state_field *f, const char *v, sc_train_state *s)
{
    char *p = (char *)s + f->offset;
    int b;
    switch (f->kind) {
    case F_INT: return sscanf(v, "%d", (int *)p) == 1;
    case F_BOOL:
        if (sscanf(v, "%d", &b) != 1)
            return false;
        *(bool *)p = b != 0;
        return true;
    case F_I64: return sscanf(v, "%" SCNd64, (int64_t *)p) == 1;
    case F_U64: return sscanf(v, "%" SCNu64, (uint64_t *)p) == 1;
    case F_DOUBLE: return sscanf(v, "%lf", (double *)p) == 1;
    }
    return false;
}

static sc_status state_to_text(text_buf *b, const sc_train_state *s, const sc_metrics *sums)
{
    for (int i = 0; i < N_STATE_FIELDS; i++)
        SC_TRY(field_to_text(b, &state_fields[i], s));
    for (int i = 0; sums && i < sc_metrics_count(sums); i++)
        SC_TRY(text_printf(b, "metric %s %.17g %.17g\n", sc_metrics_name(sums, i),
                           sc_metrics_numerator(sums, i), sc_metrics_denominator(sums, i)));
    return SC_OK;
}

static sc_status state_line(const char *line, sc_train_state *s, sc_metrics *sums)
{
    char key[64], name[SC_METRIC_NAME_MAX];
    double num, den;
    if (sscanf(line, "metric %47s %lf %lf", name, &num, &den) == 3)
        return sums ? sc_metrics_add(sums, name, num, den) : SC_OK;
    if (sscanf(line, "%63s", key) != 1)
        return SC_OK;
    for (int i = 0; i < N_STATE_FIELDS; i++)
        if (strcmp(key, state_fields[i].key) == 0) {
            if (!field_from_text(&state_fields[i], line + strlen(key), s))
                return sc_error_set(SC_ERR_FORMAT, "bad value for trainer field '%s'", key);
            return SC_OK;
        }
    return sc_error_set(SC_ERR_FORMAT, "unknown trainer field '%s'", key);
}

static sc_status state_from_text(const char *text, size_t size, sc_train_state *s,
                                 sc_metrics *sums)
{
    char line[512];
    size_t i = 0;
    while (i < size) {
        size_t n = 0;
        while (i < size && text[i] != '\n' && n < sizeof line - 1)
            line[n++] = text[i++];
        line[n] = '\0';
        i++;
        SC_TRY(state_line(line, s, sums));
    }
    return SC_OK;
}

/* ---- save ---- */

static const char HOOK_PREFIX[] = "hook/";

static sc_status write_hook_blobs(sc_ckpt_writer *w, const sc_hook_blobs *hooks)
{
    char name[NAME_MAX_LEN];
    for (int i = 0; hooks && i < hooks->n; i++) {
        snprintf(name, sizeof name, "%s%s", HOOK_PREFIX, hooks->items[i].hook);
        SC_TRY(sc_ckpt_write_blob(w, name, hooks->items[i].data, hooks->items[i].size));
    }
    return SC_OK;
}

static sc_status write_entries(sc_ckpt_writer *w, const sc_params *params, sc_optim *opt,
                               const text_buf *trainer, const char *config_text,
                               const char *model_name, const sc_hook_blobs *hooks)
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
    SC_TRY(sc_ckpt_write_blob(w, "trainer", trainer->data, trainer->len));
    SC_TRY(sc_ckpt_write_blob(w, "config", config_text, strlen(config_text)));
    SC_TRY(write_hook_blobs(w, hooks));
    return sc_ckpt_write_blob(w, "model", model_name, strlen(model_name));
}

sc_status sc_checkpoint_save(const char *path, const sc_params *params, sc_optim *opt,
                             const sc_train_state *state, const sc_metrics *train_sums,
                             const char *config_text, const char *model_name,
                             const sc_hook_blobs *hooks)
{
    text_buf trainer = {0};
    sc_ckpt_writer *w = NULL;
    sc_status st = state_to_text(&trainer, state, train_sums);
    if (st == SC_OK)
        st = sc_ckpt_writer_open(path, &w);
    if (st == SC_OK) {
        st = write_entries(w, params, opt, &trainer, config_text, model_name, hooks);
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

static sc_status read_hook_blobs(const sc_ckpt *ck, sc_hook_blobs *hooks)
{
    sc_hook_blobs_clear(hooks);
    size_t prefix = strlen(HOOK_PREFIX);
    for (int i = 0; i < sc_ckpt_count(ck); i++) {
        const char *name = sc_ckpt_name(ck, i);
        size_t size;
        const void *data = sc_ckpt_blob(ck, name, &size);
        if (data && strncmp(name, HOOK_PREFIX, prefix) == 0)
            SC_TRY(sc_hook_blobs_put(hooks, name + prefix, data, size));
    }
    return SC_OK;
}

static sc_status read_all(const sc_ckpt *ck, sc_params *params, sc_optim *opt,
                          sc_train_state *state, sc_metrics *train_sums,
                          const char *model_name, sc_hook_blobs *hooks)
{
    SC_TRY(check_model(ck, model_name));
    SC_TRY(read_tensors(ck, params, opt));
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

sc_status sc_checkpoint_load(const char *path, sc_params *params, sc_optim *opt,
                             sc_train_state *state, sc_metrics *train_sums,
                             const char *model_name, sc_hook_blobs *hooks)
{
    sc_ckpt *ck = NULL;
    sc_status st = sc_ckpt_open(path, &ck);
    if (st == SC_OK)
        st = read_all(ck, params, opt, state, train_sums, model_name, hooks);
    sc_ckpt_close(ck);
    return st == SC_OK ? SC_OK : sc_error_wrap(st, "loading checkpoint %s", path);
}

sc_status sc_checkpoint_config(const char *path, char **config_text)
{
    sc_ckpt *ck = NULL;
    SC_TRY(sc_ckpt_open(path, &ck));
    size_t size;
    const char *text = sc_ckpt_blob(ck, "config", &size);
    char *copy = text ? malloc(size + 1) : NULL;
    if (copy) {
        memcpy(copy, text, size);
        copy[size] = '\0';
    }
    sc_ckpt_close(ck);
    if (!copy)
        return sc_error_set(text ? SC_ERR_NOMEM : SC_ERR_FORMAT,
                            "checkpoint %s: no resolved config in it", path);
    *config_text = copy;
    return SC_OK;
}
