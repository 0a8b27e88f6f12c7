/* job_serve.c — one rank's job, and scorch/job.h served on it
 * (job_serve.h). */
#include "run/job_serve.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/crash.h"
#include "base/plugin_loader.h"
#include "dist/launch.h"
#include "run/checkpoint.h"
#include "run/dist_start.h"
#include "run/evaluate.h"
#include "run/loader.h"
#include "run/run_dir.h"
#include "run/session.h"
#include "scorch_host/context.h"
#include "scorch_host/job.h"

struct sc_job {
    const host_config *cfg;
    host_dist *dist;
    host_session s;
    host_job_lib lib;
    sc_args *args;        /* --job-args */
    char *checkpoint_text; /* rank 0's list, a path a line, the lines cut into: */
    char **checkpoints;
    int n_checkpoints;
};

struct sc_job_batches {
    sc_job *job;
    host_loader *loader;
    bool shard;
    int64_t total;     /* the split's batches */
    host_batch *held;  /* the batch handed out last, released on the next call */
    sc_job_batch batch;
};

/* ---- the checkpoints ---- */

/* A run directory's numbered checkpoints: DIR/checkpoints when it has
 * one, else DIR itself; a line each into out. */
static sc_status list_directory(const char *dir, FILE *out)
{
    char folder[HOST_PATH_MAX + 16];
    struct stat st;
    snprintf(folder, sizeof folder, "%s/checkpoints", dir);
    if (stat(folder, &st) != 0 || !S_ISDIR(st.st_mode))
        snprintf(folder, sizeof folder, "%s", dir);
    char **names;
    size_t count;
    SC_TRY(host_run_dir_list_numbered(folder, &names, &count));
    for (size_t i = 0; i < count; i++) {
        fprintf(out, "%s/%s\n", folder, names[i]);
        free(names[i]);
    }
    free(names);
    if (count == 0)
        return sc_error_set(SC_ERR_INVALID, "--checkpoint %s: %s holds no numbered checkpoints "
                            "(epoch-EEEE-step-SSSSSSSSS.ckpt)", dir, folder);
    return SC_OK;
}

/* --checkpoint's files, a path a line, into *text (the caller frees it). */
static sc_status list_checkpoints(const host_path_list *given, char **text, size_t *len)
{
    FILE *out = open_memstream(text, len);
    if (!out)
        return sc_error_set(SC_ERR_NOMEM, "out of memory listing checkpoints");
    sc_status st = SC_OK;
    for (int i = 0; st == SC_OK && i < given->n; i++) {
        const char *path = given->path[i];
        struct stat sb;
        if (stat(path, &sb) != 0)
            st = sc_error_set(SC_ERR_IO, "--checkpoint %s: %s", path, strerror(errno));
        else if (S_ISDIR(sb.st_mode))
            st = list_directory(path, out);
        else
            fprintf(out, "%s\n", path);
    }
    if (fclose(out) != 0 && st == SC_OK)
        st = sc_error_set(SC_ERR_NOMEM, "out of memory listing checkpoints");
    return st;
}

sc_status host_job_inherit(host_config *cfg)
{
    if (cfg->checkpoints.n == 0 || (cfg->model[0] && cfg->dataset[0]))
        return SC_OK;
    char *text = NULL;
    size_t len = 0;
    sc_status st = list_checkpoints(&cfg->checkpoints, &text, &len);
    host_config *saved = st == SC_OK ? malloc(sizeof *saved) : NULL; /* large: paths */
    if (st == SC_OK && !saved)
        st = sc_error_set(SC_ERR_NOMEM, "out of memory reading a checkpoint's config");
    if (st == SC_OK) {
        text[strcspn(text, "\n")] = '\0'; /* the first */
        st = host_checkpoint_saved_config(text, saved);
    }
    if (st == SC_OK)
        host_config_inherit(cfg, saved);
    free(saved);
    free(text);
    return st;
}

/* Collective: rank 0's list to every rank (whose folders may differ only
 * in name), cut into job->checkpoints. */
static sc_status share_checkpoints(sc_job *job)
{
    char *mine = NULL;
    size_t len = 0, size = 0;
    sc_status st = host_dist_is_root(job->dist) ? list_checkpoints(&job->cfg->checkpoints,
                                                                   &mine, &len)
                                                : SC_OK;
    st = host_dist_share_bytes(job->dist, st, mine, len, &job->checkpoint_text, &size,
                               "the list of checkpoints");
    free(mine);
    SC_TRY(st);
    for (char *p = job->checkpoint_text; *p; p++)
        job->n_checkpoints += *p == '\n';
    if (!(job->checkpoints = calloc((size_t)job->n_checkpoints + 1, sizeof *job->checkpoints)))
        return sc_error_set(SC_ERR_NOMEM, "out of memory listing checkpoints");
    char *line = job->checkpoint_text;
    for (int i = 0; i < job->n_checkpoints; i++) {
        job->checkpoints[i] = line;
        line = strchr(line, '\n');
        *line++ = '\0';
    }
    return SC_OK;
}

/* ---- the functions of scorch/job.h ---- */

/* What a job asks of the host runs as host code, not as the plugin's:
 * HOST_CODE(statement) lifts the plugin-call marker around it. */
#define HOST_CODE(...)                                                        \
    do {                                                                      \
        const host_plugin_call *host_outer_ = host_plugin_call_enter(NULL);   \
        __VA_ARGS__;                                                          \
        host_plugin_call_leave(host_outer_);                                  \
    } while (0)

static sc_device job_device(const sc_job *job) { return job->s.devices.device; }

static int job_checkpoint_count(const sc_job *job) { return job->n_checkpoints; }

static const char *job_checkpoint(const sc_job *job, int i)
{
    return i >= 0 && i < job->n_checkpoints ? job->checkpoints[i] : NULL;
}

static int64_t job_batch_size(const sc_job *job) { return job->cfg->batch_size; }

static const sc_sample_spec *job_sample_spec(const sc_job *job)
{
    return job->s.data.api ? &job->s.spec : NULL;
}

static bool valid_split(sc_split split) { return (unsigned)split < SC_SPLIT_COUNT; }

static int64_t job_split_len(const sc_job *job, sc_split split)
{
    return job->s.data.api && valid_split(split) ? host_session_split_len(&job->s, split) : -1;
}

static const char *job_class_name(const sc_job *job, int64_t label)
{
    const host_dataset_lib *data = &job->s.data;
    const char *name = NULL;
    if (data->api && data->api->class_name)
        HOST_PLUGIN_CALL(data->lib.path, "class_name",
                         name = data->api->class_name(job->s.index, label));
    return name;
}

static sc_status need_dataset(const sc_job *job, sc_split split, const char *fn)
{
    if (!job->s.data.api)
        return sc_error_set(SC_ERR_STATE, "%s: the job has no dataset (give scorch-run "
                            "--dataset, or a --checkpoint)", fn);
    if (!valid_split(split))
        return sc_error_set(SC_ERR_INVALID, "%s: %d is no split", fn, (int)split);
    return SC_OK;
}

static sc_status need_model(const sc_job *job, const char *fn)
{
    if (!job->s.model.api)
        return sc_error_set(SC_ERR_STATE, "%s: the job has no network (give scorch-run "
                            "--model, or a --checkpoint)", fn);
    return SC_OK;
}

/* The host's loader over a split, in order, for this rank's share. */
static sc_status open_loader(sc_job *job, sc_split split, bool shard, host_loader **out)
{
    const host_config *cfg = job->cfg;
    host_loader_config lc = {
        .plugin_file = job->s.data.lib.path, .batch_size = cfg->batch_size,
        .workers = cfg->workers, .prefetch = cfg->prefetch, .seed = cfg->seed,
        .whole_batches = shard, .rank = shard ? host_dist_rank(job->dist) : 0,
        .world = shard ? host_dist_world(job->dist) : 1,
        .pinned = job_device(job).kind == SC_DEVICE_CUDA,
    };
    return host_loader_new(job->s.data.api, job->s.splits[split], split, &lc, out);
}

static sc_status batches_open(sc_job *job, sc_split split, bool shard, sc_job_batches **out)
{
    SC_TRY(need_dataset(job, split, "sc_job_batches_open"));
    sc_job_batches *it = calloc(1, sizeof *it);
    if (!it)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for a job's batches");
    it->job = job;
    it->shard = shard;
    int64_t len = host_session_split_len(&job->s, split);
    it->total = len / job->cfg->batch_size + (len % job->cfg->batch_size != 0);
    sc_status st = open_loader(job, split, shard, &it->loader);
    if (st == SC_OK)
        st = host_loader_start_epoch(it->loader, 1, 0);
    if (st != SC_OK) {
        host_loader_free(it->loader);
        free(it);
        return st;
    }
    *out = it;
    return SC_OK;
}

static sc_status job_batches_open(sc_job *job, sc_split split, bool shard, sc_job_batches **out)
{
    sc_status st;
    HOST_CODE(st = batches_open(job, split, shard, out));
    return st;
}

static int64_t job_batches_count(const sc_job_batches *it)
{
    return host_loader_batches(it->loader);
}

static int64_t job_batches_total(const sc_job_batches *it) { return it->total; }

static sc_status batches_next(sc_job_batches *it, const sc_job_batch **batch)
{
    if (it->held)
        host_loader_release(it->loader, it->held);
    it->held = NULL;
    host_batch *b;
    SC_TRY(host_loader_next(it->loader, &b));
    if (!b)
        return SC_OK;
    it->held = b;
    int world = it->shard ? host_dist_world(it->job->dist) : 1;
    int rank = it->shard ? host_dist_rank(it->job->dist) : 0;
    it->batch = (sc_job_batch){.index = rank + b->index * world, .size = b->size,
                               .samples = b->samples, .inputs = b->inputs,
                               .targets = b->targets};
    *batch = &it->batch;
    return SC_OK;
}

static sc_status job_batches_next(sc_job_batches *it, const sc_job_batch **batch)
{
    sc_status st;
    HOST_CODE(st = batches_next(it, batch));
    return st;
}

static void job_batches_close(sc_job_batches *it)
{
    HOST_CODE(host_loader_free(it->loader)); /* voids the batch held */
    free(it);
}

static bool job_has_model(const sc_job *job) { return job->s.model.api != NULL; }

static sc_status load(sc_job *job, const char *checkpoint, int *epoch, int64_t *step)
{
    SC_TRY(need_model(job, "sc_job_load"));
    host_train_state state = {0};
    SC_TRY(host_checkpoint_load_weights(checkpoint, job->s.params, job->cfg->ema,
                                        job->s.model.api->name, &state));
    if (epoch) /* named as the checkpoint is: the epoch of its last step */
        *epoch = state.next_batch ? state.epoch : state.epoch - 1;
    if (step)
        *step = state.step;
    return SC_OK;
}

static sc_status job_load(sc_job *job, const char *checkpoint, int *epoch, int64_t *step)
{
    sc_status st;
    HOST_CODE(st = load(job, checkpoint, epoch, step));
    return st;
}

/* The network in eval mode without gradients, restored after. */
static sc_status forward(sc_job *job, const sc_job_batch *batch, sc_tensor_list *outputs)
{
    SC_TRY(need_model(job, "sc_job_forward"));
    sc_ctx *ctx = job->s.ctx;
    sc_ctx_reset(ctx); /* the outputs of the call before */
    bool was_training = sc_ctx_training(ctx);
    bool had_grad = sc_ctx_set_grad_enabled(ctx, false);
    sc_ctx_set_training(ctx, false);
    sc_tensor_list on_device;
    sc_status st = host_session_forward(&job->s, &batch->inputs, &on_device);
    if (st == SC_OK)
        st = host_session_to_host(&job->s, &on_device, outputs);
    sc_ctx_set_training(ctx, was_training);
    sc_ctx_set_grad_enabled(ctx, had_grad);
    return st;
}

static sc_status job_forward(sc_job *job, const sc_job_batch *batch, sc_tensor_list *outputs)
{
    sc_status st;
    HOST_CODE(st = forward(job, batch, outputs));
    return st;
}

static const char *job_main_metric(const sc_job *job, sc_metric_mode *mode)
{
    if (!job->s.model.api)
        return NULL;
    if (mode)
        *mode = job->s.main_metric_mode;
    return job->s.main_metric;
}

static sc_status evaluate(sc_job *job, sc_split split, sc_metrics *metrics, double *loss)
{
    SC_TRY(need_model(job, "sc_job_evaluate"));
    SC_TRY(need_dataset(job, split, "sc_job_evaluate"));
    host_loader *loader;
    SC_TRY(open_loader(job, split, false, &loader));
    sc_ctx_reset(job->s.ctx);
    host_eval_sums sums = {0};
    sc_status st = host_evaluate(&job->s, loader, sc_split_name(split), 1, 0, metrics, &sums,
                                 NULL, NULL, NULL);
    host_loader_free(loader);
    if (st == SC_OK && loss)
        *loss = sums.samples ? sums.loss_sum / (double)sums.samples : 0;
    return st;
}

static sc_status job_evaluate(sc_job *job, sc_split split, sc_metrics *metrics, double *loss)
{
    sc_status st;
    HOST_CODE(st = evaluate(job, split, metrics, loss));
    return st;
}

static const sc_host_job_ops ops = {
    .device = job_device,
    .checkpoint_count = job_checkpoint_count,
    .checkpoint = job_checkpoint,
    .batch_size = job_batch_size,
    .sample_spec = job_sample_spec,
    .split_len = job_split_len,
    .class_name = job_class_name,
    .batches_open = job_batches_open,
    .batches_count = job_batches_count,
    .batches_total = job_batches_total,
    .batches_next = job_batches_next,
    .batches_close = job_batches_close,
    .has_model = job_has_model,
    .load = job_load,
    .forward = job_forward,
    .main_metric = job_main_metric,
    .evaluate = job_evaluate,
};

void host_job_serve_install(void) { sc_host_set_job_ops(&ops); }

/* ---- one rank's job ---- */

static sc_status open_job(sc_job *job, const host_dist_seat *seat)
{
    const host_config *cfg = job->cfg;
    SC_TRY(host_dist_open(cfg, seat, &job->dist));
    sc_cpu_set_threads(host_dist_threads(job->dist, cfg->threads));
    SC_TRY(host_job_lib_open(cfg->job, &job->lib));
    SC_TRY(sc_args_parse(cfg->job_args, "job arg", &job->args));
    SC_TRY(host_session_open(&job->s, cfg, host_dist_local_rank(job->dist)));
    SC_TRY(host_dist_start_verify(job->dist, &job->s, cfg));
    return share_checkpoints(job);
}

static sc_status run_job(sc_job *job)
{
    const host_job_lib *lib = &job->lib;
    sc_status st;
    HOST_PLUGIN_CALL(lib->lib.path, "job_run", st = lib->api->job_run(job, job->args));
    return st == SC_OK ? SC_OK : host_plugin_failed(st, lib->lib.path, "job_run");
}

static void close_job(sc_job *job)
{
    if (job->s.ctx || job->s.data.api || job->s.model.api) /* opened */
        host_session_close(&job->s);
    sc_args_free(job->args);
    host_plugin_lib_close(&job->lib.lib);
    free(job->checkpoints);
    free(job->checkpoint_text);
    host_dist_close(job->dist);
}

int host_job_serve(const host_config *cfg, const host_dist_seat *seat)
{
    sc_job job = {.cfg = cfg};
    sc_status st = host_dist_check(job.dist, open_job(&job, seat));
    if (st == SC_OK)
        st = host_dist_check(job.dist, run_job(&job));
    if (st != SC_OK)
        host_dist_print_error("scorch-run");
    close_job(&job);
    return st == SC_OK ? 0 : 1;
}
