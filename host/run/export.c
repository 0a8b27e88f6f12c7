/* export.c — scorch-export's work (export.h). */
#define _DEFAULT_SOURCE /* realpath */
#include "run/export.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/safetensors.h"
#include "run/checkpoint.h"
#include "scorch/serialize.h"

static const char PARAM_PREFIX[] = "param/";

/* Writing over the checkpoint would lose it. */
static sc_status check_distinct_files(const char *checkpoint, const char *out)
{
    struct stat a, b;
    if (stat(checkpoint, &a) == 0 && stat(out, &b) == 0 && a.st_dev == b.st_dev &&
        a.st_ino == b.st_ino)
        return sc_error_set(SC_ERR_INVALID, "--out %s is the checkpoint itself: give another "
                            "path", out);
    return SC_OK;
}

typedef struct weights {
    host_safetensors_entry *entries;
    int n, averaged; /* averaged: entries taken from "ema/<name>" */
} weights;

/* The "ema/<name>" twin of parameter <name>, when wanted and present. */
static sc_status ema_of(const sc_ckpt *ck, const char *name, const sc_tensor *param,
                        const sc_tensor **avg)
{
    char entry[HOST_SAFETENSORS_NAME_MAX + 8];
    snprintf(entry, sizeof entry, "ema/%s", name);
    *avg = sc_ckpt_tensor(ck, entry);
    if (*avg && ((*avg)->ndim != param->ndim || (*avg)->dtype != param->dtype ||
                 memcmp((*avg)->shape, param->shape, (size_t)param->ndim * sizeof *param->shape)))
        return sc_error_set(SC_ERR_FORMAT, "its '%s' differs in dtype or shape from '%s%s'",
                            entry, PARAM_PREFIX, name);
    return SC_OK;
}

static sc_status collect(const sc_ckpt *ck, bool ema, weights *w)
{
    size_t prefix = strlen(PARAM_PREFIX);
    int count = sc_ckpt_count(ck);
    if (!(w->entries = calloc((size_t)(count ? count : 1), sizeof *w->entries)))
        return sc_error_set(SC_ERR_NOMEM, "out of memory listing its tensors");
    for (int i = 0; i < count; i++) {
        const char *entry = sc_ckpt_name(ck, i);
        const sc_tensor *t = sc_ckpt_tensor(ck, entry), *avg = NULL;
        if (!t || strncmp(entry, PARAM_PREFIX, prefix) != 0)
            continue;
        if (ema)
            SC_TRY(ema_of(ck, entry + prefix, t, &avg));
        w->averaged += avg != NULL;
        w->entries[w->n++] = (host_safetensors_entry){entry + prefix, avg ? avg : t};
    }
    if (w->n == 0)
        return sc_error_set(SC_ERR_FORMAT, "it holds no weights (no param/ entries): not a "
                            "training checkpoint");
    if (ema && !w->averaged)
        return sc_error_set(SC_ERR_INVALID, "--ema: it holds no EMA weights (no ema/ entries): "
                            "it was trained without --ema-decay");
    return SC_OK;
}

/* Where the weights came from, as the metadata says it. */
typedef struct provenance {
    char model[256];         /* the model plugin's name, from the checkpoint */
    char checkpoint[PATH_MAX];
    host_config *saved;      /* the options it was trained with */
} provenance;

static sc_status read_provenance(const sc_ckpt *ck, const char *path, provenance *p)
{
    size_t size;
    const char *model = sc_ckpt_blob(ck, "model", &size);
    if (!model)
        return sc_error_set(SC_ERR_FORMAT, "checkpoint %s: not a training checkpoint (no model "
                            "entry)", path);
    size_t kept = size < sizeof p->model ? size : sizeof p->model - 1;
    snprintf(p->model, sizeof p->model, "%.*s", (int)kept, model);
    if (!realpath(path, p->checkpoint))
        snprintf(p->checkpoint, sizeof p->checkpoint, "%s", path);
    if (!(p->saved = malloc(sizeof *p->saved))) /* large: paths */
        return sc_error_set(SC_ERR_NOMEM, "out of memory reading its config");
    return host_checkpoint_saved_config(path, p->saved);
}

static sc_status write_file(const host_export_request *r, const weights *w,
                            const provenance *p)
{
    const host_safetensors_meta meta[] = {
        {"format", "pt"}, /* the layout PyTorch's layers have, as transformers checks */
        {"scorch_version", SCORCH_VERSION},
        {"scorch_model", p->model},
        {"scorch_model_plugin", r->model ? r->model : p->saved->model},
        {"scorch_model_args", p->saved->model_args},
        {"scorch_dataset_plugin", r->dataset ? r->dataset : p->saved->dataset},
        {"scorch_dataset_args", p->saved->dataset_args},
        {"scorch_checkpoint", p->checkpoint},
        {"scorch_weights", r->ema ? "ema" : "trained"},
    };
    return host_safetensors_write(r->out, w->entries, w->n, meta,
                                  (int)(sizeof meta / sizeof meta[0]));
}

static sc_status export_open(const host_export_request *r, const sc_ckpt *ck,
                             host_export_result *result)
{
    weights w = {0};
    provenance p = {0};
    sc_status st = read_provenance(ck, r->checkpoint, &p);
    if (st == SC_OK && (st = collect(ck, r->ema, &w)) != SC_OK)
        st = sc_error_wrap(st, "checkpoint %s", r->checkpoint);
    if (st == SC_OK)
        st = write_file(r, &w, &p);
    for (int i = 0; st == SC_OK && i < w.n; i++)
        result->values += w.entries[i].tensor->numel;
    result->tensors = st == SC_OK ? w.n : 0;
    free(w.entries);
    free(p.saved);
    return st;
}

sc_status host_export_weights(const host_export_request *r, host_export_result *result)
{
    *result = (host_export_result){0};
    SC_TRY(check_distinct_files(r->checkpoint, r->out));
    sc_ckpt *ck = NULL;
    SC_TRY(sc_ckpt_open(r->checkpoint, &ck));
    sc_status st = export_open(r, ck, result);
    sc_ckpt_close(ck);
    return st;
}
