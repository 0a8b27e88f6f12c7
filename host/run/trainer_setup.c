/* trainer_setup.c — building a trainer from its config: session,
 * optimizer, loaders, run directory, logs, resume; and tearing it down. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/crash.h"
#include "base/duration.h"
#include "dist/launch.h"
#include "run/dist_start.h"
#include "run/init_from.h"
#include "run/trainer_impl.h"
#include "scorch_host/context.h"
#include "scorch_host/ema.h"
#include "scorch_host/optim.h"

/* ---- set-up ---- */

/* Train steps whose results a GPU run reads later: the host runs at most
 * this far ahead of the GPU, which then always has a step or two queued
 * while the host reads one. */
enum { STEPS_IN_FLIGHT = 3 };

sc_status trainer_make_optimizer(host_trainer *t)
{
    sc_optim_kind kind;
    SC_TRY(sc_optim_kind_parse(t->cfg.optimizer, &kind));
    sc_optim_config oc = sc_optim_defaults(kind);
    oc.weight_decay = t->cfg.weight_decay;
    if (kind == SC_OPTIM_SGD || kind == SC_OPTIM_RMSPROP)
        oc.momentum = t->cfg.momentum;
    if (kind == SC_OPTIM_SGD)
        oc.nesterov = t->cfg.nesterov;
    oc.alpha = t->cfg.alpha;
    oc.centered = t->cfg.centered;
    oc.beta1 = t->cfg.beta1;
    oc.beta2 = t->cfg.beta2;
    oc.eps = t->cfg.eps;
    t->opt = sc_optim_new(t->s.params, &oc);
    if (!t->opt)
        return sc_error_wrap(SC_ERR_INVALID, "--optimizer %s", t->cfg.optimizer);
    /* [params "PATTERN"] sections and --no-decay, over the effective decay */
    return host_param_groups_apply(&t->cfg.param_groups, t->cfg.no_decay, t->s.params, t->opt,
                                 oc.weight_decay);
}

/* --clip-grad-norm or --clip-grad-value (one of them, as Lightning's
 * gradient_clip_algorithm). */
static sc_status make_clip(host_trainer *t)
{
    if (t->cfg.clip_grad_norm > 0 && t->cfg.clip_grad_value > 0)
        return sc_error_set(SC_ERR_INVALID, "--clip-grad-norm %g and --clip-grad-value %g: "
                            "choose one", t->cfg.clip_grad_norm, t->cfg.clip_grad_value);
    if (t->cfg.clip_grad_norm == 0 && t->cfg.clip_grad_value == 0)
        return SC_OK;
    t->clip = sc_grad_clip_new(t->s.params);
    return t->clip ? SC_OK : sc_error_code();
}

/* --ema-decay: the EMA of the weights, a copy of them until the first
 * step (or the checkpoint's on resume). */
static sc_status make_ema(host_trainer *t)
{
    if (t->cfg.ema_decay == 0) {
        if (t->cfg.ema_warmup)
            return sc_error_set(SC_ERR_INVALID, "--ema-warmup needs --ema-decay D > 0 (the "
                                "decay it ramps up to)");
        return SC_OK;
    }
    t->ema = sc_ema_new(t->s.params);
    return t->ema ? SC_OK : sc_error_wrap(sc_error_code(), "--ema-decay %g", t->cfg.ema_decay);
}

/* After the ranks start: rank 0's EMA to every rank, so that all stay
 * identical (on a fresh run each copies rank 0's broadcast weights). */
static sc_status share_ema(host_trainer *t)
{
    if (!t->ema)
        return SC_OK;
    if (!t->cfg.resume)
        return sc_ema_update(t->ema, 0.0); /* decay 0: a copy */
    for (int i = 0; i < sc_params_count(t->s.params); i++) {
        sc_tensor *e = sc_ema_at(t->ema, i);
        if (e)
            SC_TRY(host_dist_share_tensor(t->dist, e, "the broadcast of rank 0's EMA weights"));
    }
    return SC_OK;
}

static sc_status make_loader(host_trainer *t, sc_split split, bool shuffle, host_loader **out)
{
    host_loader_config lc = {
        .plugin_file = t->s.data.lib.path,
        .batch_size = t->cfg.batch_size,
        .workers = t->cfg.workers,
        .prefetch = t->cfg.prefetch,
        .seed = t->cfg.seed,
        .shuffle = shuffle,
        .drop_last = shuffle && t->cfg.drop_last, /* train only: eval sees every sample */
        .rank = host_dist_rank(t->dist),
        .world = host_dist_world(t->dist),
        .pinned = sc_ctx_device(t->s.ctx).kind == SC_DEVICE_CUDA,
        .gpu = sc_ctx_device(t->s.ctx),
    };
    return host_loader_new(t->s.data.api, t->s.splits[split], split, &lc, out);
}

/* --no-drop-last is exact in one process without accumulation: the
 * short batch's loss, and so its gradient, is the mean over its own
 * samples. Ranks would hold short batches of different sizes (or none),
 * and accumulated micro-batches, like ranks, are averaged with equal
 * weights: a short one's samples would count more than the others'. */
static sc_status check_drop_last(const host_trainer *t)
{
    if (t->cfg.drop_last)
        return SC_OK;
    if (host_dist_world(t->dist) > 1)
        return sc_error_set(SC_ERR_INVALID,
                            "--no-drop-last: not with data parallelism (%d ranks): their "
                            "gradients are averaged with equal weights, which a short last "
                            "batch of a different size on each rank would make inexact",
                            host_dist_world(t->dist));
    if (t->cfg.accumulate > 1)
        return sc_error_set(SC_ERR_INVALID,
                            "--no-drop-last: not with --accumulate %d: micro-batches are "
                            "averaged with equal weights, which a short last batch would make "
                            "inexact",
                            t->cfg.accumulate);
    return SC_OK;
}

/* An epoch without one whole optimizer step: what would give one. */
static sc_status no_train_step(const host_trainer *t)
{
    int64_t len = host_session_split_len(&t->s, SC_SPLIT_TRAIN);
    int64_t batches = host_loader_batches(t->loaders[SC_SPLIT_TRAIN]);
    int world = host_dist_world(t->dist);
    if (len == 0)
        return sc_error_set(SC_ERR_INVALID, "the train split is empty: nothing to train on");
    if (len < world)
        return sc_error_set(SC_ERR_INVALID, "the train split has %lld samples, fewer than the "
                            "%d ranks", (long long)len, world);
    if (batches == 0 && world > 1)
        return sc_error_set(SC_ERR_INVALID,
                            "the train split has %lld samples, %lld per rank, fewer than one "
                            "batch of %lld: use --batch-size %lld (or fewer ranks)",
                            (long long)len, (long long)(len / world),
                            (long long)t->cfg.batch_size, (long long)(len / world));
    if (batches == 0)
        return sc_error_set(SC_ERR_INVALID,
                            "the train split has %lld samples, fewer than one batch of %lld, "
                            "and --drop-last skips a short batch: use --batch-size %lld, or "
                            "--no-drop-last",
                            (long long)len, (long long)t->cfg.batch_size, (long long)len);
    bool capped = t->steps_per_epoch < batches; /* by --max-train-iterations */
    return sc_error_set(SC_ERR_INVALID,
                        "an epoch has %lld train batches, fewer than one optimizer step of "
                        "--accumulate %d: lower --accumulate or %s",
                        (long long)t->steps_per_epoch, t->cfg.accumulate,
                        capped ? "raise --max-train-iterations" : "--batch-size");
}

static sc_status make_loaders(host_trainer *t)
{
    SC_TRY(check_drop_last(t));
    SC_TRY(make_loader(t, SC_SPLIT_TRAIN, true, &t->loaders[SC_SPLIT_TRAIN]));
    SC_TRY(make_loader(t, SC_SPLIT_VALID, false, &t->loaders[SC_SPLIT_VALID]));
    SC_TRY(make_loader(t, SC_SPLIT_TEST, false, &t->loaders[SC_SPLIT_TEST]));
    if (t->cfg.validate_on_train)
        SC_TRY(make_loader(t, SC_SPLIT_TRAIN, false, &t->train_eval));
    t->steps_per_epoch = host_loader_batches(t->loaders[SC_SPLIT_TRAIN]);
    if (t->cfg.max_train_iterations > 0 && t->cfg.max_train_iterations < t->steps_per_epoch)
        t->steps_per_epoch = t->cfg.max_train_iterations;
    if (t->steps_per_epoch < t->cfg.accumulate)
        return no_train_step(t);
    t->steps_per_epoch -= t->steps_per_epoch % t->cfg.accumulate; /* whole optimizer steps */
    return SC_OK;
}

static sc_status init_state(host_trainer *t)
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
    t->state.world = host_dist_world(t->dist);
    t->state.seed = t->cfg.seed;
    t->state.base_lr = t->cfg.lr * (t->cfg.scale_lr ? t->state.world : 1);
    t->lr = t->state.base_lr;
    int64_t steps = t->steps_per_epoch / t->cfg.accumulate; /* optimizer steps */
    int epochs = t->cfg.epochs > 0 ? t->cfg.epochs : 1; /* --epochs 0 steps never */
    return sc_schedule_init(&t->state.schedule, &sc, steps, steps * epochs);
}

static void default_run_dir(host_trainer *t)
{
    char stamp[32];
    time_t now = time(NULL);
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", localtime(&now));
    snprintf(t->cfg.run_dir, sizeof t->cfg.run_dir, "runs/%s-%s", t->s.model.api->name, stamp);
}

/* Locks the run directory and composes the resolved config (checkpoints
 * save it); config.ini is written once a resume has accepted it. */
static sc_status open_run_dir(host_trainer *t)
{
    if (!t->cfg.run_dir[0])
        default_run_dir(t);
    /* --lr-find adds its two files to any run directory, a run's too */
    SC_TRY(host_run_dir_prepare(&t->rd, t->cfg.run_dir, t->cfg.resume || t->cfg.lr_find));
    return host_config_ini_text(&t->cfg, HOST_PROGRAM_TRAIN, &t->config_text);
}

static sc_status write_config(const host_trainer *t)
{
    char path[HOST_PATH_MAX];
    host_run_dir_file(&t->rd, "config.ini", path, sizeof path);
    FILE *f = fopen(path, "w");
    size_t len = strlen(t->config_text);
    bool ok = f && fwrite(t->config_text, 1, len, f) == len;
    if ((f && fclose(f) != 0) || !ok)
        return sc_error_set(SC_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    return SC_OK;
}

/* Opened after a resume has trimmed metrics.jsonl to the steps before it. */
static sc_status open_log(host_trainer *t)
{
    char path[HOST_PATH_MAX];
    host_run_dir_file(&t->rd, "metrics.jsonl", path, sizeof path);
    bool root = host_dist_is_root(t->dist); /* rank 0 alone writes */
    bool records = root && !t->cfg.lr_find; /* --lr-find writes none */
    SC_TRY(host_run_log_open(&t->log, records ? path : NULL, t->cfg.quiet || !root,
                           t->cfg.epochs));
    t->log.console.silent = !root;
    /* mpirun gives ranks a pty even when the job's output goes to a file */
    if (host_dist_world(t->dist) > 1)
        t->log.console.progress = false;
    return SC_OK;
}

/* Only the process that writes metrics.jsonl writes TensorBoard events. */
static sc_status open_tensorboard(host_trainer *t)
{
    if (!t->cfg.tensorboard || !t->log.records)
        return SC_OK;
    char dir[HOST_PATH_MAX];
    host_run_dir_file(&t->rd, "tensorboard", dir, sizeof dir);
    host_tb_writer *tb;
    sc_status st = host_tb_open(dir, t->state.step + 1, &tb);
    if (st != SC_OK)
        return sc_error_wrap(st, "TensorBoard (--no-tensorboard turns it off)");
    SC_TRY(host_run_log_add(&t->log, host_tb_observer(tb)));
    t->tb = tb;
    return SC_OK;
}

static void resume_path(const host_trainer *t, char *path, size_t size)
{
    if (t->cfg.resume_path[0])
        snprintf(path, size, "%s", t->cfg.resume_path);
    else
        host_run_dir_alias(&t->rd, "last", path, size);
}

/* ---- resume ---- */

/* What differs between the checkpoint's run and this one: listed in the
 * refusal, or, with --resume-anyway, noted one by one as found. */
typedef struct resume_changes {
    bool anyway;
    int count, listed;
    size_t len;
    char list[640]; /* "\n  option: checkpoint has X, now Y" lines that fit */
} resume_changes;

static void note_change(void *user, const host_config_change *c)
{
    resume_changes *r = user;
    r->count++;
    if (r->anyway) {
        fprintf(stderr, "%sscorch-train: note: --resume-anyway: %s: checkpoint has %s, now %s: "
                "%s\n", host_log_prefix(), c->option, c->was, c->now, c->lost);
        return;
    }
    char line[256];
    int n = snprintf(line, sizeof line, "\n  %s: checkpoint has %.80s, now %.80s", c->option,
                     c->was, c->now);
    if (n > 0 && r->len + (size_t)n < sizeof r->list) {
        memcpy(r->list + r->len, line, (size_t)n + 1);
        r->len += (size_t)n;
        r->listed++;
    }
}

static sc_status refuse_changes(const resume_changes *r, const char *path)
{
    char more[48] = "";
    if (r->listed < r->count)
        snprintf(more, sizeof more, "\n  (and %d more)", r->count - r->listed);
    return sc_error_set(SC_ERR_INVALID,
                        "cannot resume from %s: %d setting%s differ%s from those it was "
                        "trained with, so the run would not continue exactly:%s%s\n"
                        "resume with the checkpoint's values, or give --resume-anyway to "
                        "accept the change%s",
                        path, r->count, r->count == 1 ? "" : "s", r->count == 1 ? "s" : "",
                        r->list, more, r->count == 1 ? "" : "s");
}

/* The options the checkpoint was trained with against ours;
 * *lr_changed: whether --lr or --scale-lr differ (then, with
 * --resume-anyway, the new learning rate replaces the checkpoint's). */
static sc_status compare_options(const host_trainer *t, const char *path, resume_changes *r,
                                 bool *lr_changed)
{
    host_config *saved = malloc(sizeof *saved); /* large: paths */
    if (!saved)
        return sc_error_set(SC_ERR_NOMEM, "out of memory reading %s", path);
    sc_status st = host_checkpoint_saved_config(path, saved);
    if (st == SC_OK) {
        host_config_resume_changes(saved, &t->cfg, note_change, r);
        *lr_changed = saved->lr != t->cfg.lr || saved->scale_lr != t->cfg.scale_lr;
    }
    free(saved);
    return st;
}

/* The ranks are no option, yet they make the global batch (--batch-size
 * is per rank) and each rank's share of the epoch's order. */
static void compare_world(const host_trainer *t, const host_train_state *saved, resume_changes *r)
{
    char was[16], now[16];
    if (saved->world == host_dist_world(t->dist))
        return;
    snprintf(was, sizeof was, "%d", saved->world);
    snprintf(now, sizeof now, "%d", host_dist_world(t->dist));
    note_change(r, &(host_config_change){"ranks (world size)", was, now,
                                       "the global batch and the samples in it differ"});
}

/* Whether the checkpoint's position fits this run: an epoch up to
 * --epochs, a batch within the epoch. Sets saved->finished when the run
 * has nothing left to do: every epoch trained and its test record written
 * (a run stopped during its test pass tests again). */
static sc_status check_position(const host_trainer *t, host_train_state *saved, const char *path)
{
    int epochs = t->cfg.epochs;
    if (saved->epoch > epochs + 1 || (saved->epoch == epochs + 1 && saved->next_batch > 0))
        return sc_error_set(SC_ERR_INVALID,
                            "%s is at epoch %d, batch %lld, past --epochs %d: give --epochs %d "
                            "or more to continue it",
                            path, saved->epoch, (long long)saved->next_batch, epochs,
                            saved->epoch);
    if (saved->next_batch > t->steps_per_epoch)
        return sc_error_set(SC_ERR_INVALID,
                            "%s stopped at batch %lld of an epoch that now has %lld batches "
                            "(did --batch-size or --max-train-iterations change?)",
                            path, (long long)saved->next_batch, (long long)t->steps_per_epoch);
    saved->finished = saved->epoch == epochs + 1 &&
                      (host_session_split_len(&t->s, SC_SPLIT_TEST) == 0 ||
                       host_run_dir_has_record(&t->rd, "test", saved->step));
    return SC_OK;
}

/* Rank 0: restores the checkpoint into t->state and the tensors after
 * comparing its run with this one; then trims metrics.jsonl to it. */
static sc_status resume(host_trainer *t)
{
    char path[HOST_PATH_MAX];
    resume_path(t, path, sizeof path);
    resume_changes changes = {.anyway = t->cfg.resume_anyway};
    bool lr_changed = false;
    SC_TRY(compare_options(t, path, &changes, &lr_changed));
    host_train_state saved = t->state; /* keeps the schedule's configuration */
    sc_status st = host_checkpoint_load(path, t->s.params, t->opt, t->ema, &saved, t->train_sums,
                                      t->s.model.api->name, &t->hook_blobs);
    if (st != SC_OK && changes.count && !changes.anyway) /* a changed model fails to load */
        return refuse_changes(&changes, path);
    SC_TRY(st);
    compare_world(t, &saved, &changes);
    if (changes.count && !changes.anyway)
        return refuse_changes(&changes, path);
    lr_changed = lr_changed || (t->cfg.scale_lr && saved.world != host_dist_world(t->dist));
    host_dist_start_position(t->dist, &t->cfg, &saved, t->steps_per_epoch, path);
    SC_TRY(check_position(t, &saved, path));
    saved.seed = t->cfg.seed; /* the same, unless --resume-anyway changed it */
    if (lr_changed) /* --resume-anyway: the new --lr from here on */
        saved.base_lr = t->state.base_lr;
    else if (saved.base_lr != t->state.base_lr)
        fprintf(stderr, "scorch-train: note: continuing with the checkpoint's learning rate "
                        "%g, not --lr %g (a hook or scorch-ctl set it)\n",
                saved.base_lr, t->cfg.lr);
    t->state = saved;
    host_crash_set_checkpoint(path, !t->cfg.resume_path[0]); /* good until a newer one */
    return t->state.finished ? SC_OK : host_run_dir_trim_metrics(&t->rd, t->state.step);
}

/* A resumed run that has nothing left to do says so, and leaves every
 * file as it was. */
static void report_finished(const host_trainer *t)
{
    if (!host_dist_is_root(t->dist))
        return;
    int done = t->state.epoch - 1;
    printf("run %s already finished at epoch %d, step %lld; nothing to do. To train it "
           "further, resume it with more epochs: --epochs M --resume (M > %d)\n",
           t->rd.root, done, (long long)t->state.step, done);
    fflush(stdout);
}

/* --threads 0: one compute thread for a small model, else the cores (or
 * the rank's share); see host_threads_for_model. Logged either way. */
static sc_status size_threads(host_trainer *t)
{
    if (t->cfg.threads > 0) {
        host_run_log_info(&t->log, "compute threads: %d (--threads)", t->cfg.threads);
        return SC_OK;
    }
    double flops;
    SC_TRY(host_model_summary_flops(&t->s, &flops));
    double batch_flops = flops * (double)t->cfg.batch_size;
    int most = host_dist_threads(t->dist, 0); /* 0: a single process may use every core */
    int threads = host_threads_for_model(batch_flops, most > 0 ? most : host_cpu_cores());
    sc_cpu_set_threads(threads);
    bool small = batch_flops < HOST_ONE_THREAD_FLOPS;
    const char *rule = small      ? "one"
                       : most > 0 ? "a rank's share (OMP_NUM_THREADS, else the cores over ranks)"
                                  : "every core";
    host_run_log_info(&t->log, "compute threads: %d (--threads 0: %s, as the forward pass of a "
                    "batch is %.3g GFLOPs, %s %.3g; see docs/cli.md, Threads)", threads, rule,
                    batch_flops / 1e9, small ? "below" : "not below", HOST_ONE_THREAD_FLOPS / 1e9);
    return SC_OK;
}

static void describe(host_trainer *t)
{
    char path[HOST_PATH_MAX];
    host_session *s = &t->s;
    host_run_log_info(&t->log, "model %s (%s): %lld parameters, %lld trainable",
                    s->model.api->name, s->model.lib.path,
                    (long long)sc_params_numel(s->params),
                    (long long)sc_params_trainable_numel(s->params));
    if (!t->log.console.quiet && host_model_summary_print(s, stdout) != SC_OK) /* rank 0 alone */
        host_run_log_info(&t->log, "warning: no model summary: %s", sc_error_message());
    host_run_log_info(&t->log, "dataset %s: %lld train, %lld valid, %lld test samples; "
                    "%lld steps per epoch; run directory %s",
                    s->data.api->name, (long long)host_session_split_len(s, SC_SPLIT_TRAIN),
                    (long long)host_session_split_len(s, SC_SPLIT_VALID),
                    (long long)host_session_split_len(s, SC_SPLIT_TEST),
                    (long long)t->steps_per_epoch, t->rd.root);
    host_dist_start_describe(t->dist, &t->cfg, &t->log);
    resume_path(t, path, sizeof path);
    if (t->cfg.resume)
        host_run_log_info(&t->log, "resumed from %s: epoch %d, batch %lld, step %lld", path,
                        t->state.epoch, (long long)t->state.next_batch,
                        (long long)t->state.step);
}

/* Live control (scorch-ctl) through RUN_DIR/control.sock; the devices'
 * locks learn the run directory. */
static sc_status open_control(host_trainer *t)
{
    host_device_set_holder(&t->s.devices, t->rd.root);
    if (host_dist_world(t->dist) > 1) { /* it would steer rank 0 alone */
        t->steer.save_signal_agreed = true; /* see agree_on_requests */
        return SC_OK;
    }
    return host_steer_listen(&t->steer, t->rd.root, t->s.funcs);
}

/* Hooks and histograms read the parameters and gradients on the host. */
static sc_status make_host_views(host_trainer *t)
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
    return host_hook_grads_new(ps, t->host_grads, &t->grads, &t->n_grads);
}

sc_status trainer_read_params(host_trainer *t)
{
    return t->host_copies ? sc_params_read(t->s.params, t->host_values, t->host_grads) : SC_OK;
}

/* Rank 0: --init-from on a fresh run (host_dist_start_state shares the
 * weights). A resumed run continues the checkpoint's weights, which
 * began from the file if its run did: the option is not loaded again, so
 * that `--config RUN/config.ini --resume` works (docs/weights.md). */
static sc_status init_weights(const host_trainer *t)
{
    if (!t->cfg.init_from[0])
        return SC_OK;
    if (!t->cfg.resume)
        return host_init_from_load(&t->cfg, t->s.params, t->cfg.quiet ? NULL : stdout, stderr);
    fprintf(stderr, "scorch-train: note: --init-from %s is not loaded: --resume continues the "
            "checkpoint's weights\n", t->cfg.init_from);
    return SC_OK;
}

static sc_status setup(host_trainer *t, const host_dist_seat *seat)
{
    SC_TRY(host_init_check(&t->cfg));
    SC_TRY(host_dist_open(&t->cfg, seat, &t->dist));
    sc_cpu_set_threads(host_dist_threads(t->dist, t->cfg.threads));
    SC_TRY(host_session_open(&t->s, &t->cfg, host_dist_local_rank(t->dist)));
    SC_TRY(host_freeze_apply(t->cfg.freeze, t->s.params)); /* before the optimizer */
    if (!(t->train_sums = sc_metrics_new()) || !(t->eval_sums = sc_metrics_new()))
        return SC_ERR_NOMEM;
    SC_TRY(make_host_views(t));
    SC_TRY(trainer_make_optimizer(t));
    SC_TRY(make_clip(t));
    SC_TRY(make_ema(t));
    SC_TRY(make_loaders(t));
    SC_TRY(host_mix_new(&t->cfg, &t->s, host_dist_rank(t->dist), &t->mix));
    SC_TRY(init_state(t));
    SC_TRY(host_duration_parse(t->cfg.max_time, &t->time_budget));
    SC_TRY(host_dist_start_verify(t->dist, &t->s, &t->cfg));
    if (host_dist_is_root(t->dist)) { /* the others wait for it in host_dist_start_state */
        SC_TRY(init_weights(t)); /* refused, it leaves no run directory */
        SC_TRY(open_run_dir(t));
        host_crash_set_checkpoint(NULL, false); /* a crash report says there is none yet */
        if (t->cfg.resume)
            SC_TRY(resume(t));
    }
    SC_TRY(host_dist_start_state(t->dist, t->s.ctx, t->s.params, t->opt, &t->state));
    SC_TRY(share_ema(t));
    if (t->state.finished) { /* host_trainer_run does nothing */
        report_finished(t);
        return SC_OK;
    }
    if (host_dist_is_root(t->dist) && !t->cfg.lr_find)
        SC_TRY(write_config(t));
    SC_TRY(host_dist_start_blobs(t->dist, &t->hook_blobs));
    SC_TRY(open_log(t));
    SC_TRY(host_graph_step_init(&t->graphs, t->cfg.cuda_graphs, &t->s, host_dist_world(t->dist),
                              t->cfg.accumulate, &t->log));
    SC_TRY(host_step_pipe_new(t->s.ctx, t->cfg.batch_size, STEPS_IN_FLIGHT, trainer_fold_step, t,
                            &t->pipe));
    SC_TRY(open_tensorboard(t));
    SC_TRY(size_threads(t));
    if (sc_ctx_device(t->s.ctx).kind == SC_DEVICE_CPU)
        trainer_note_waits(t, host_waits_start(&t->waits, sc_cpu_threads()));
    describe(t);
    return t->cfg.lr_find ? SC_OK : open_control(t);
}

sc_status host_trainer_new(const host_config *cfg, const host_dist_seat *seat, host_trainer **out)
{
    *out = NULL;
    host_trainer *t = calloc(1, sizeof *t);
    if (!t)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for the trainer");
    t->cfg = *cfg;
    host_steer_init(&t->steer);
    sc_status st = host_dist_check(t->dist, setup(t, seat));
    if (st != SC_OK) {
        host_trainer_free(t);
        return st;
    }
    *out = t;
    return SC_OK;
}

void host_trainer_free(host_trainer *t)
{
    if (!t)
        return;
    host_steer_close(&t->steer, false, ""); /* answers a pending stop with the error */
    host_run_log_close(&t->log);
    for (int k = 0; k < SC_SPLIT_COUNT; k++)
        host_loader_free(t->loaders[k]);
    host_loader_free(t->train_eval);
    host_graph_step_free(&t->graphs);
    host_step_pipe_free(t->pipe);
    host_mix_free(t->mix);
    sc_optim_free(t->opt);
    sc_grad_clip_free(t->clip);
    sc_ema_free(t->ema);
    sc_metrics_free(t->train_sums);
    sc_metrics_free(t->eval_sums);
    if (t->s.params) /* opened */
        host_session_close(&t->s);
    free(t->config_text);
    host_run_dir_close(&t->rd);
    host_hook_blobs_clear(&t->hook_blobs);
    free(t->grads);
    if (t->host_copies) {
        free(t->host_values);
        free(t->host_grads);
    }
    host_dist_close(t->dist);
    free(t);
}
