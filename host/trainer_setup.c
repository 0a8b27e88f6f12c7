/* trainer_setup.c — building a trainer from its config: session,
 * optimizer, loaders, run directory, logs, resume; and tearing it down. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "trainer_impl.h"

/* ---- set-up ---- */

/* Train steps whose results a GPU run reads later: the host runs at most
 * this far ahead of the GPU, which then always has a step or two queued
 * while the host reads one. */
enum { STEPS_IN_FLIGHT = 3 };

static sc_status make_optimizer(sc_trainer *t)
{
    sc_optim_kind kind;
    SC_TRY(sc_optim_kind_parse(t->cfg.optimizer, &kind));
    sc_optim_config oc = sc_optim_defaults(kind);
    oc.weight_decay = t->cfg.weight_decay;
    if (kind == SC_OPTIM_SGD) {
        oc.momentum = t->cfg.momentum;
        oc.nesterov = t->cfg.nesterov;
    }
    oc.beta1 = t->cfg.beta1;
    oc.beta2 = t->cfg.beta2;
    oc.eps = t->cfg.eps;
    t->opt = sc_optim_new(t->s.params, &oc);
    return t->opt ? SC_OK : sc_error_wrap(SC_ERR_INVALID, "--optimizer %s", t->cfg.optimizer);
}

static sc_status make_loader(sc_trainer *t, sc_split split, bool shuffle, sc_loader **out)
{
    sc_loader_config lc = {
        .batch_size = t->cfg.batch_size,
        .workers = t->cfg.workers,
        .prefetch = t->cfg.prefetch,
        .seed = t->cfg.seed,
        .shuffle = shuffle,
        .drop_last = shuffle,
        .rank = sc_dist_rank(t->dist),
        .world = sc_dist_world(t->dist),
        .pinned = sc_ctx_device(t->s.ctx).kind == SC_DEVICE_CUDA,
        .gpu = sc_ctx_device(t->s.ctx),
    };
    return sc_loader_new(t->s.data.api, t->s.splits[split], split, &lc, out);
}

static sc_status make_loaders(sc_trainer *t)
{
    SC_TRY(make_loader(t, SC_SPLIT_TRAIN, true, &t->loaders[SC_SPLIT_TRAIN]));
    SC_TRY(make_loader(t, SC_SPLIT_VALID, false, &t->loaders[SC_SPLIT_VALID]));
    SC_TRY(make_loader(t, SC_SPLIT_TEST, false, &t->loaders[SC_SPLIT_TEST]));
    if (t->cfg.validate_on_train)
        SC_TRY(make_loader(t, SC_SPLIT_TRAIN, false, &t->train_eval));
    t->steps_per_epoch = sc_loader_batches(t->loaders[SC_SPLIT_TRAIN]);
    if (t->cfg.max_train_iterations > 0 && t->cfg.max_train_iterations < t->steps_per_epoch)
        t->steps_per_epoch = t->cfg.max_train_iterations;
    t->steps_per_epoch -= t->steps_per_epoch % t->cfg.accumulate; /* whole optimizer steps */
    if (t->steps_per_epoch == 0)
        return sc_error_set(SC_ERR_INVALID,
                            "the train split has %lld samples, fewer than one batch of %lld",
                            (long long)sc_session_split_len(&t->s, SC_SPLIT_TRAIN),
                            (long long)t->cfg.batch_size);
    return SC_OK;
}

static sc_status init_state(sc_trainer *t)
{
    sc_schedule_kind kind;
    SC_TRY(sc_schedule_kind_parse(t->cfg.lr_schedule, &kind));
    sc_schedule_config sc = sc_schedule_defaults(kind);
    sc.warmup_steps = t->cfg.warmup_steps;
    sc.step_epochs = t->cfg.lr_step_epochs;
    sc.gamma = t->cfg.lr_gamma;
    sc.min_lr = t->cfg.lr_min;
    sc.patience = t->cfg.lr_patience;
    sc.factor = t->cfg.lr_factor;
    sc.mode = t->s.main_metric_mode;
    memset(&t->state, 0, sizeof t->state);
    t->state.epoch = 1;
    t->state.world = sc_dist_world(t->dist);
    t->state.seed = t->cfg.seed;
    t->state.base_lr = t->cfg.lr * (t->cfg.scale_lr ? t->state.world : 1);
    t->lr = t->state.base_lr;
    int64_t steps = t->steps_per_epoch / t->cfg.accumulate; /* optimizer steps */
    return sc_schedule_init(&t->state.schedule, &sc, steps, steps * t->cfg.epochs);
}

static sc_status read_file(const char *path, char **text)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return sc_error_set(SC_ERR_IO, "cannot read %s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)size + 1);
    size_t got = buf ? fread(buf, 1, (size_t)size, f) : 0;
    fclose(f);
    if (!buf || got != (size_t)size) {
        free(buf);
        return sc_error_set(SC_ERR_IO, "cannot read %s", path);
    }
    buf[size] = '\0';
    *text = buf;
    return SC_OK;
}

static void default_run_dir(sc_trainer *t)
{
    char stamp[32];
    time_t now = time(NULL);
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", localtime(&now));
    snprintf(t->cfg.run_dir, sizeof t->cfg.run_dir, "runs/%s-%s", t->s.model.api->name, stamp);
}

static sc_status prepare_run_dir(sc_trainer *t)
{
    if (!t->cfg.run_dir[0])
        default_run_dir(t);
    SC_TRY(sc_run_dir_prepare(&t->rd, t->cfg.run_dir, t->cfg.resume));
    char path[SC_PATH_MAX];
    sc_run_dir_file(&t->rd, "config.ini", path, sizeof path);
    SC_TRY(sc_config_write_ini(&t->cfg, SC_PROGRAM_TRAIN, path));
    return read_file(path, &t->config_text);
}

/* Opened after a resume has trimmed metrics.jsonl to the epochs before it. */
static sc_status open_log(sc_trainer *t)
{
    char path[SC_PATH_MAX];
    sc_run_dir_file(&t->rd, "metrics.jsonl", path, sizeof path);
    bool root = sc_dist_is_root(t->dist); /* rank 0 alone writes */
    SC_TRY(sc_run_log_open(&t->log, root ? path : NULL, t->cfg.quiet || !root, t->cfg.epochs));
    t->log.silent = !root;
    /* mpirun gives ranks a pty even when the job's output goes to a file */
    if (sc_dist_world(t->dist) > 1)
        t->log.progress = false;
    return SC_OK;
}

/* Only the process that writes metrics.jsonl writes TensorBoard events. */
static sc_status open_tensorboard(sc_trainer *t)
{
    if (!t->cfg.tensorboard || !t->log.jsonl)
        return SC_OK;
    char dir[SC_PATH_MAX];
    sc_run_dir_file(&t->rd, "tensorboard", dir, sizeof dir);
    sc_status st = sc_tb_open(dir, t->state.step + 1, &t->log.tb);
    return st == SC_OK ? SC_OK
                       : sc_error_wrap(st, "TensorBoard (--no-tensorboard turns it off)");
}

static void resume_path(const sc_trainer *t, char *path, size_t size)
{
    if (t->cfg.resume_path[0])
        snprintf(path, size, "%s", t->cfg.resume_path);
    else
        sc_run_dir_alias(&t->rd, "last", path, size);
}

static sc_status resume(sc_trainer *t)
{
    char path[SC_PATH_MAX];
    resume_path(t, path, sizeof path);
    sc_train_state saved = t->state; /* keeps the schedule's configuration */
    SC_TRY(sc_checkpoint_load(path, t->s.params, t->opt, &saved, t->train_sums,
                              t->s.model.api->name, &t->hook_blobs));
    sc_dist_resume_position(t->dist, &saved, t->steps_per_epoch, path);
    if (saved.seed != t->cfg.seed)
        return sc_error_set(SC_ERR_INVALID,
                            "%s was trained with --seed %llu, not %llu: resuming with another "
                            "seed would not continue the same run",
                            path, (unsigned long long)saved.seed,
                            (unsigned long long)t->cfg.seed);
    if (saved.next_batch > t->steps_per_epoch)
        return sc_error_set(SC_ERR_INVALID,
                            "%s stopped at batch %lld of an epoch that now has %lld batches "
                            "(did --batch-size or --max-train-iterations change?)",
                            path, (long long)saved.next_batch, (long long)t->steps_per_epoch);
    if (saved.base_lr != t->state.base_lr)
        fprintf(stderr, "scorch-train: note: continuing with the checkpoint's learning rate "
                        "%g, not --lr %g (a resumed run keeps its optimizer state)\n",
                saved.base_lr, t->cfg.lr);
    t->state = saved;
    return sc_run_dir_trim_metrics(&t->rd, t->state.epoch);
}

static void describe(sc_trainer *t)
{
    char path[SC_PATH_MAX];
    sc_session *s = &t->s;
    sc_run_log_info(&t->log, "model %s (%s): %lld parameters, %lld trainable",
                    s->model.api->name, s->model.lib.path,
                    (long long)sc_params_numel(s->params),
                    (long long)sc_params_trainable_numel(s->params));
    if (!t->log.quiet && sc_model_summary_print(s, stdout) != SC_OK) /* rank 0 alone */
        sc_run_log_info(&t->log, "warning: no model summary: %s", sc_error_message());
    sc_run_log_info(&t->log, "dataset %s: %lld train, %lld valid, %lld test samples; "
                    "%lld steps per epoch; run directory %s",
                    s->data.api->name, (long long)sc_session_split_len(s, SC_SPLIT_TRAIN),
                    (long long)sc_session_split_len(s, SC_SPLIT_VALID),
                    (long long)sc_session_split_len(s, SC_SPLIT_TEST),
                    (long long)t->steps_per_epoch, t->rd.root);
    sc_dist_describe(t->dist, &t->cfg, &t->log);
    resume_path(t, path, sizeof path);
    if (t->cfg.resume)
        sc_run_log_info(&t->log, "resumed from %s: epoch %d, batch %lld, step %lld", path,
                        t->state.epoch, (long long)t->state.next_batch,
                        (long long)t->state.step);
}

/* Live control (scorch-ctl) through RUN_DIR/control.sock; the devices'
 * locks learn the run directory. */
static sc_status open_control(sc_trainer *t)
{
    sc_device_set_holder(&t->s.devices, t->rd.root);
    if (sc_dist_world(t->dist) > 1) { /* it would steer rank 0 alone */
        t->steer.save_signal_agreed = true; /* see agree_on_requests */
        return SC_OK;
    }
    return sc_steer_listen(&t->steer, t->rd.root, t->s.funcs);
}

/* Hooks and histograms read the parameters and gradients on the host. */
static sc_status make_host_views(sc_trainer *t)
{
    const sc_params *ps = t->s.params;
    t->host_copies = sc_params_device(ps).kind != SC_DEVICE_CPU;
    if (!t->host_copies) {
        t->host_values = sc_params_values(ps);
        t->host_grads = sc_params_grads(ps);
    } else {
        size_t bytes = (size_t)sc_params_numel(ps) * sizeof(float);
        t->host_values = malloc(bytes ? bytes : 1);
        t->host_grads = malloc(bytes ? bytes : 1);
        if (!t->host_values || !t->host_grads)
            return sc_error_set(SC_ERR_NOMEM, "out of memory for host copies of %zu bytes "
                                "of parameters", bytes);
    }
    return sc_hook_grads_new(ps, t->host_grads, &t->grads, &t->n_grads);
}

sc_status trainer_read_params(sc_trainer *t)
{
    return t->host_copies ? sc_params_read(t->s.params, t->host_values, t->host_grads) : SC_OK;
}

static sc_status setup(sc_trainer *t, const sc_dist_seat *seat)
{
    SC_TRY(sc_dist_open(&t->cfg, seat, &t->dist));
    sc_cpu_set_threads(sc_dist_threads(t->dist, t->cfg.threads));
    SC_TRY(sc_session_open(&t->s, &t->cfg, sc_dist_local_rank(t->dist)));
    if (!(t->train_sums = sc_metrics_new()) || !(t->eval_sums = sc_metrics_new()))
        return SC_ERR_NOMEM;
    SC_TRY(make_host_views(t));
    SC_TRY(make_optimizer(t));
    SC_TRY(make_loaders(t));
    SC_TRY(init_state(t));
    SC_TRY(sc_dist_verify(t->dist, &t->s, &t->cfg));
    if (sc_dist_is_root(t->dist)) /* the others wait for it in sc_dist_start */
        SC_TRY(prepare_run_dir(t));
    if (t->cfg.resume && sc_dist_is_root(t->dist))
        SC_TRY(resume(t));
    SC_TRY(sc_dist_start(t->dist, t->s.ctx, t->s.params, t->opt, &t->state));
    SC_TRY(sc_dist_share_blobs(t->dist, &t->hook_blobs));
    SC_TRY(open_log(t));
    SC_TRY(sc_graph_step_init(&t->graphs, t->cfg.cuda_graphs, &t->s, sc_dist_world(t->dist),
                              t->cfg.accumulate, &t->log));
    SC_TRY(sc_step_pipe_new(t->s.ctx, t->cfg.batch_size, STEPS_IN_FLIGHT, trainer_fold_step, t,
                            &t->pipe));
    SC_TRY(open_tensorboard(t));
    describe(t);
    return open_control(t);
}

sc_status sc_trainer_new(const sc_config *cfg, const sc_dist_seat *seat, sc_trainer **out)
{
    *out = NULL;
    sc_trainer *t = calloc(1, sizeof *t);
    if (!t)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for the trainer");
    t->cfg = *cfg;
    sc_steer_init(&t->steer);
    sc_status st = sc_dist_check(t->dist, setup(t, seat));
    if (st != SC_OK) {
        sc_trainer_free(t);
        return st;
    }
    *out = t;
    return SC_OK;
}

void sc_trainer_free(sc_trainer *t)
{
    if (!t)
        return;
    sc_steer_close(&t->steer, false, ""); /* answers a pending stop with the error */
    sc_run_log_close(&t->log);
    for (int k = 0; k < SC_SPLIT_COUNT; k++)
        sc_loader_free(t->loaders[k]);
    sc_loader_free(t->train_eval);
    sc_graph_step_free(&t->graphs);
    sc_step_pipe_free(t->pipe);
    sc_optim_free(t->opt);
    sc_metrics_free(t->train_sums);
    sc_metrics_free(t->eval_sums);
    if (t->s.params) /* opened */
        sc_session_close(&t->s);
    free(t->config_text);
    sc_run_dir_close(&t->rd);
    sc_hook_blobs_clear(&t->hook_blobs);
    free(t->grads);
    if (t->host_copies) {
        free(t->host_values);
        free(t->host_grads);
    }
    sc_dist_close(t->dist);
    free(t);
}
