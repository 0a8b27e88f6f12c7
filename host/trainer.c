#include "trainer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "checkpoint.h"
#include "evaluate.h"
#include "loader.h"
#include "run_dir.h"
#include "run_log.h"
#include "session.h"

volatile sig_atomic_t sc_trainer_stop_signal;

/* Stream ids of the run's random streams (scorch/rng.h). */
enum { RNG_STREAM_STEP = 0x57e9 };

struct sc_trainer {
    sc_config cfg;
    sc_session s;
    sc_optim *opt;
    sc_loader *loaders[SC_SPLIT_COUNT];
    sc_loader *train_eval; /* the train split in order (--validate-on-train) */
    sc_metrics *train_sums; /* of the train phase in progress */
    sc_metrics *eval_sums;
    sc_train_state state;
    int64_t steps_per_epoch;
    sc_run_dir rd;
    sc_run_log log;
    char *config_text; /* the resolved config.ini, saved in checkpoints */
    double lr;         /* of the latest step */
    bool stop;         /* a hook asked to stop */
    bool interrupted;  /* a signal asked to stop */
};

/* ---- hooks: the context a hook sees and the actions it may take ---- */

static void action_set_lr(void *host, double lr)
{
    sc_trainer *t = host;
    if (lr > 0 && lr < 1e6)
        t->state.base_lr = lr;
    else
        sc_run_log_info(&t->log, "warning: a hook asked for lr %g; ignored", lr);
}

static void action_request_stop(void *host, const char *reason)
{
    sc_trainer *t = host;
    t->stop = true;
    sc_run_log_info(&t->log, "stop requested by a hook: %s", reason ? reason : "");
}

static void action_log_scalar(void *host, const char *tag, double value)
{
    sc_trainer *t = host;
    if (sc_run_log_scalar(&t->log, t->state.epoch, t->state.step, tag, value) != SC_OK)
        sc_run_log_info(&t->log, "warning: %s", sc_error_message());
}

static sc_hook_context hook_context(const sc_trainer *t, const char *point, sc_split phase)
{
    return (sc_hook_context){
        .point = point,
        .phase = phase,
        .epoch = t->state.epoch,
        .epochs = t->cfg.epochs,
        .step = t->state.step,
        .world = 1,
        .batch_size = (int)t->cfg.batch_size,
        .lr = t->lr,
    };
}

static sc_status run_hooks(sc_trainer *t, const sc_hook_context *ctx)
{
    const sc_hook_actions actions = {t, action_set_lr, action_request_stop,
                                     action_log_scalar};
    return sc_hook_set_run(t->s.hooks, ctx->point, ctx, &actions);
}

static sc_status run_point(sc_trainer *t, const char *point, sc_split phase)
{
    sc_hook_context ctx = hook_context(t, point, phase);
    return run_hooks(t, &ctx);
}

/* ---- checkpoints ---- */

static sc_status save_checkpoint(sc_trainer *t, bool best)
{
    char path[SC_PATH_MAX];
    sc_run_dir_checkpoint(&t->rd, t->state.epoch, t->state.step, path, sizeof path);
    SC_TRY(sc_checkpoint_save(path, t->s.params, t->opt, &t->state, t->train_sums,
                              t->config_text, t->s.model.api->name));
    SC_TRY(sc_run_dir_publish(&t->rd, path, "last"));
    if (best)
        SC_TRY(sc_run_dir_publish(&t->rd, path, "best"));
    return sc_run_dir_prune(&t->rd, t->cfg.keep_last);
}

/* ---- the train phase ---- */

static sc_status train_step(sc_trainer *t, const sc_batch *b, double *loss_value)
{
    sc_session *s = &t->s;
    sc_rng_init(sc_ctx_rng(s->ctx), t->state.seed,
                sc_rng_mix(RNG_STREAM_STEP, (uint64_t)t->state.step));
    t->lr = sc_schedule_lr(&t->state.schedule, t->state.base_lr, t->state.step);
    sc_tensor_list outputs;
    sc_tensor *loss;
    SC_TRY(sc_session_forward(s, &b->inputs, &outputs));
    SC_TRY(sc_session_criterion(s, &outputs, &b->targets, &loss));
    SC_TRY(sc_loss_value(loss, "train", t->state.epoch, b->index, loss_value));
    SC_TRY(sc_backward(s->ctx, loss, NULL, NULL));
    SC_TRY(sc_optim_step(t->opt, t->lr));
    sc_params_zero_grad(s->params);
    SC_TRY(sc_session_metrics(s, &outputs, &b->targets, t->train_sums));
    t->state.loss_sum += *loss_value * (double)b->size;
    t->state.samples += b->size;
    t->state.step++;
    t->state.next_batch = b->index + 1;
    return SC_OK;
}

static sc_status after_batch(sc_trainer *t, const sc_batch *b, double loss, double t0,
                             double seconds_before)
{
    sc_hook_context ctx = hook_context(t, "batch_end", SC_SPLIT_TRAIN);
    ctx.batch = b->index;
    ctx.batches = t->steps_per_epoch;
    ctx.loss = loss;
    ctx.metrics = t->train_sums;
    SC_TRY(run_hooks(t, &ctx));
    double elapsed = seconds_before + sc_now() - t0;
    double rate = elapsed > 0 ? (double)t->state.samples / elapsed : 0;
    double eta = rate > 0 ? (double)(t->steps_per_epoch - t->state.next_batch) *
                                (double)t->cfg.batch_size / rate
                          : 0;
    sc_run_log_progress(&t->log, "train", t->state.epoch, t->cfg.epochs, t->state.next_batch,
                        t->steps_per_epoch, t->state.loss_sum / (double)t->state.samples,
                        rate, eta);
    if (t->cfg.checkpoint_every > 0 && t->state.step % t->cfg.checkpoint_every == 0 &&
        t->state.next_batch < t->steps_per_epoch)
        SC_TRY(save_checkpoint(t, false));
    if (sc_trainer_stop_signal)
        t->interrupted = true;
    return SC_OK;
}

static sc_status train_batches(sc_trainer *t, double *wait)
{
    sc_loader *loader = t->loaders[SC_SPLIT_TRAIN];
    double t0 = sc_now(), seconds_before = t->state.train_seconds;
    SC_TRY(sc_loader_start_epoch(loader, t->state.epoch, t->state.next_batch));
    while (t->state.next_batch < t->steps_per_epoch && !t->stop && !t->interrupted) {
        sc_batch *b;
        double w0 = sc_now();
        SC_TRY(sc_loader_next(loader, &b));
        *wait += sc_now() - w0;
        if (!b)
            break;
        SC_TRY(run_point(t, "batch_begin", SC_SPLIT_TRAIN));
        double loss;
        sc_status st = train_step(t, b, &loss);
        sc_ctx_reset(t->s.ctx);
        if (st == SC_OK)
            st = after_batch(t, b, loss, t0, seconds_before);
        sc_loader_release(loader, b);
        SC_TRY(st);
    }
    t->state.train_seconds = seconds_before + sc_now() - t0;
    return SC_OK;
}

static sc_status log_phase(sc_trainer *t, const char *phase, double loss_sum,
                           int64_t samples, const sc_metrics *metrics, double seconds,
                           double wait, bool final)
{
    sc_phase_result r = {
        .phase = phase,
        .epoch = t->state.epoch,
        .epochs = t->cfg.epochs,
        .step = t->state.step,
        .loss = samples ? loss_sum / (double)samples : 0,
        .metrics = metrics,
        .samples = samples,
        .seconds = seconds,
        .data_wait_s = wait,
        .lr = t->lr,
    };
    return sc_run_log_phase(&t->log, &r, final);
}

static sc_status phase_end_hooks(sc_trainer *t, sc_split phase, double loss,
                                 const sc_metrics *metrics, double seconds, int64_t samples)
{
    sc_hook_context ctx = hook_context(t, "phase_end", phase);
    ctx.loss = loss;
    ctx.metrics = metrics;
    ctx.samples_per_s = seconds > 0 ? (double)samples / seconds : 0;
    return run_hooks(t, &ctx);
}

/* Returns with t->state.next_batch < steps_per_epoch when stopped early. */
static sc_status train_phase(sc_trainer *t)
{
    sc_session *s = &t->s;
    if (t->state.next_batch == 0) {
        sc_metrics_reset(t->train_sums);
        t->state.loss_sum = 0;
        t->state.samples = 0;
        t->state.train_seconds = 0;
    }
    sc_ctx_set_training(s->ctx, true);
    sc_ctx_set_grad_enabled(s->ctx, true);
    SC_TRY(run_point(t, "phase_begin", SC_SPLIT_TRAIN));
    double wait = 0;
    sc_status st = train_batches(t, &wait);
    sc_loader_stop_epoch(t->loaders[SC_SPLIT_TRAIN]);
    SC_TRY(st);
    if (t->state.next_batch < t->steps_per_epoch)
        return SC_OK;
    double loss = t->state.samples ? t->state.loss_sum / (double)t->state.samples : 0;
    SC_TRY(log_phase(t, "train", t->state.loss_sum, t->state.samples, t->train_sums,
                     t->state.train_seconds, wait, false));
    return phase_end_hooks(t, SC_SPLIT_TRAIN, loss, t->train_sums, t->state.train_seconds,
                           t->state.samples);
}

/* ---- eval phases ---- */

static int64_t max_batches(const sc_trainer *t, sc_split split)
{
    return split == SC_SPLIT_TEST    ? t->cfg.max_test_iterations
           : split == SC_SPLIT_VALID ? t->cfg.max_valid_iterations
                                     : t->cfg.max_train_iterations;
}

/* Evaluates `split` through `loader`; the metrics stay in t->eval_sums. */
static sc_status eval_phase(sc_trainer *t, sc_split split, sc_loader *loader,
                            const char *name, bool final)
{
    sc_metrics_reset(t->eval_sums);
    SC_TRY(run_point(t, "phase_begin", split));
    sc_eval_sums sums = {0};
    double t0 = sc_now();
    SC_TRY(sc_evaluate(&t->s, loader, name, t->state.epoch, max_batches(t, split),
                       t->eval_sums, &sums, NULL, NULL));
    double seconds = sc_now() - t0;
    SC_TRY(log_phase(t, name, sums.loss_sum, sums.samples, t->eval_sums, seconds,
                     sums.data_wait_s, final));
    double loss = sums.samples ? sums.loss_sum / (double)sums.samples : 0;
    return phase_end_hooks(t, split, loss, t->eval_sums, seconds, sums.samples);
}

/* ---- epochs ---- */

/* The main metric of `metrics`, which the socket must report. */
static sc_status main_metric(const sc_trainer *t, const sc_metrics *metrics, double *value)
{
    const char *name = t->s.main_metric;
    int i = sc_metrics_find(metrics, name);
    if (i < 0)
        return sc_error_set(SC_ERR_PLUGIN, "%s: socket_metrics did not report the main metric '%s'",
                            t->s.model.lib.path, name);
    *value = sc_metrics_value(metrics, i);
    return SC_OK;
}

/* After valid: schedule, best tracking, checkpoint. */
static sc_status end_epoch(sc_trainer *t, const sc_metrics *monitored)
{
    double value = 0;
    SC_TRY(main_metric(t, monitored, &value));
    sc_schedule_observe(&t->state.schedule, value);
    bool higher = t->s.main_metric_mode == SC_METRIC_MAX;
    bool best = !t->state.has_best ||
                (higher ? value > t->state.best_metric : value < t->state.best_metric);
    if (best) {
        t->state.has_best = true;
        t->state.best_metric = value;
        t->state.best_epoch = t->state.epoch;
    }
    int epoch = t->state.epoch;
    t->state.epoch = epoch + 1;
    t->state.next_batch = 0;
    t->state.loss_sum = 0;
    t->state.samples = 0;
    t->state.train_seconds = 0;
    sc_metrics_reset(t->train_sums);
    sc_status st = save_checkpoint(t, best);
    t->state.epoch = epoch; /* hooks still see the epoch that ended */
    return st;
}

static sc_status run_epoch(sc_trainer *t)
{
    SC_TRY(run_point(t, "epoch_begin", SC_SPLIT_TRAIN));
    SC_TRY(train_phase(t));
    if (t->state.next_batch < t->steps_per_epoch) /* stopped mid-epoch */
        return save_checkpoint(t, false);
    if (t->train_eval)
        SC_TRY(eval_phase(t, SC_SPLIT_TRAIN, t->train_eval, "train_eval", false));
    bool has_valid = sc_loader_samples(t->loaders[SC_SPLIT_VALID]) > 0;
    if (has_valid)
        SC_TRY(eval_phase(t, SC_SPLIT_VALID, t->loaders[SC_SPLIT_VALID], "valid", false));
    SC_TRY(end_epoch(t, has_valid ? t->eval_sums : t->train_sums));
    SC_TRY(run_point(t, "epoch_end", SC_SPLIT_VALID));
    t->state.epoch++;
    return SC_OK;
}

bool sc_trainer_last_checkpoint(const sc_trainer *t, char *path, size_t size)
{
    sc_run_dir_alias(&t->rd, "last", path, size);
    FILE *f = fopen(path, "rb");
    if (f)
        fclose(f);
    return f != NULL;
}

sc_status sc_trainer_run(sc_trainer *t, bool *interrupted)
{
    sc_status st = run_point(t, "train_begin", SC_SPLIT_TRAIN);
    while (st == SC_OK && t->state.epoch <= t->cfg.epochs && !t->stop && !t->interrupted)
        st = run_epoch(t);
    if (st != SC_OK)
        return st;
    *interrupted = t->interrupted;
    if (t->interrupted) {
        sc_run_log_info(&t->log, "stopped by a signal at epoch %d, step %lld, after "
                        "writing a checkpoint; continue with --resume",
                        t->state.epoch, (long long)t->state.step);
        return SC_OK;
    }
    if (t->state.epoch > 1) /* report the epoch the model finished */
        t->state.epoch--;
    if (sc_loader_samples(t->loaders[SC_SPLIT_TEST]) > 0)
        SC_TRY(eval_phase(t, SC_SPLIT_TEST, t->loaders[SC_SPLIT_TEST], "test", true));
    return run_point(t, "train_end", SC_SPLIT_TEST);
}

/* ---- set-up ---- */

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
        .rank = 0,
        .world = 1,
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
    t->state.seed = t->cfg.seed;
    t->state.base_lr = t->cfg.lr;
    t->lr = t->cfg.lr;
    return sc_schedule_init(&t->state.schedule, &sc, t->steps_per_epoch,
                            t->steps_per_epoch * t->cfg.epochs);
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
    return sc_run_log_open(&t->log, path, t->cfg.quiet);
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
                              t->s.model.api->name));
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
    if (saved.base_lr != t->cfg.lr)
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
    sc_run_log_info(&t->log, "dataset %s: %lld train, %lld valid, %lld test samples; "
                    "%lld steps per epoch; run directory %s",
                    s->data.api->name, (long long)sc_session_split_len(s, SC_SPLIT_TRAIN),
                    (long long)sc_session_split_len(s, SC_SPLIT_VALID),
                    (long long)sc_session_split_len(s, SC_SPLIT_TEST),
                    (long long)t->steps_per_epoch, t->rd.root);
    resume_path(t, path, sizeof path);
    if (t->cfg.resume)
        sc_run_log_info(&t->log, "resumed from %s: epoch %d, batch %lld, step %lld", path,
                        t->state.epoch, (long long)t->state.next_batch,
                        (long long)t->state.step);
}

static sc_status setup(sc_trainer *t)
{
    sc_cpu_set_threads(t->cfg.threads);
    SC_TRY(sc_session_open(&t->s, &t->cfg));
    if (!(t->train_sums = sc_metrics_new()) || !(t->eval_sums = sc_metrics_new()))
        return SC_ERR_NOMEM;
    SC_TRY(make_optimizer(t));
    SC_TRY(make_loaders(t));
    SC_TRY(init_state(t));
    SC_TRY(prepare_run_dir(t));
    if (t->cfg.resume)
        SC_TRY(resume(t));
    SC_TRY(open_log(t));
    describe(t);
    return SC_OK;
}

sc_status sc_trainer_new(const sc_config *cfg, sc_trainer **out)
{
    *out = NULL;
    sc_trainer *t = calloc(1, sizeof *t);
    if (!t)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for the trainer");
    t->cfg = *cfg;
    sc_status st = setup(t);
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
    sc_run_log_close(&t->log);
    for (int k = 0; k < SC_SPLIT_COUNT; k++)
        sc_loader_free(t->loaders[k]);
    sc_loader_free(t->train_eval);
    sc_optim_free(t->opt);
    sc_metrics_free(t->train_sums);
    sc_metrics_free(t->eval_sums);
    if (t->s.params) /* opened */
        sc_session_close(&t->s);
    free(t->config_text);
    free(t);
}
