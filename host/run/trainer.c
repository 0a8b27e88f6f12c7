/* trainer.c — the train / valid / test loops, checkpoints at their
 * boundaries, and the requests (hooks, signals, scorch-ctl) served there. */
#include <stdio.h>
#include <string.h>

#include "control/signals.h"
#include "run/trainer_impl.h"
#include "scorch_host/context.h"
#include "scorch_host/ema.h"
#include "scorch_host/optim.h"
#include "scorch_host/params.h"

/* Stream ids of the run's random streams (scorch/rng.h). */
enum { RNG_STREAM_STEP = 0x57e9 };

static sc_status serve_requests(host_trainer *t);
static sc_status validate_within_epoch(host_trainer *t, bool *saved);

/* ---- checkpoints ---- */

static sc_status write_checkpoint(host_trainer *t, bool best)
{
    char path[HOST_PATH_MAX];
    /* Named by the epoch its last step belongs to: at an epoch's end the
     * state already holds the next epoch, at batch 0. */
    int epoch = t->state.next_batch ? t->state.epoch : t->state.epoch - 1;
    host_run_dir_checkpoint(&t->rd, epoch, t->state.step, path, sizeof path);
    /* The hooks hand over their state first: a failing hook writes nothing. */
    host_hook_blobs_clear(&t->hook_blobs);
    SC_TRY(trainer_run_point(t, "checkpoint_save", SC_SPLIT_TRAIN));
    SC_TRY(host_checkpoint_save(path, t->s.params, t->opt, t->ema, &t->state, t->train_sums,
                              t->config_text, t->s.model.api->name, &t->hook_blobs));
    SC_TRY(host_run_dir_publish(&t->rd, path, "last"));
    if (best)
        SC_TRY(host_run_dir_publish(&t->rd, path, "best"));
    return host_run_dir_prune(&t->rd, t->cfg.keep_last);
}

/* Every rank takes part (the checkpoint holds the whole job's sums);
 * rank 0 writes it. The steps in flight are read first: their sums belong
 * in it, and no checkpoint may follow a non-finite loss. */
static sc_status save_checkpoint(host_trainer *t, bool best)
{
    SC_TRY(host_step_pipe_drain(t->pipe));
    SC_TRY(host_dist_before_checkpoint(t->dist, &t->state.loss_sum, &t->state.samples,
                                     t->train_sums));
    sc_status st = host_dist_is_root(t->dist) ? write_checkpoint(t, best) : SC_OK;
    return host_dist_check(t->dist, st);
}

/* ---- the train phase ---- */

/* Whether batch b, the epoch's last, writes the TensorBoard histograms:
 * its gradients are the epoch's last, valid until they are zeroed. */
static bool histograms_due(const host_trainer *t, const host_batch *b)
{
    int every = t->cfg.histogram_every;
    return t->tb && every > 0 && t->state.epoch % every == 0 &&
           b->index + 1 == t->steps_per_epoch;
}

static bool on_gpu(const host_trainer *t) { return sc_ctx_device(t->s.ctx).kind == SC_DEVICE_CUDA; }

/* The step's loss read now, after the steps before it: for what may not
 * run past a non-finite loss unseen (hooks, histograms). On a GPU this
 * waits for the step. */
static sc_status loss_now(host_trainer *t, const host_batch *b, const sc_tensor *loss,
                          double *value)
{
    SC_TRY(host_step_pipe_drain(t->pipe));
    return host_name_batch(host_loss_value(loss, "train", t->state.epoch, b->index, value), b);
}

/* --clip-grad-norm or --clip-grad-value, on the averaged gradients (the
 * same on every rank), after the after_backward hooks, which see them as
 * backward left them (as Lightning's on_after_backward). On a GPU it is
 * queued behind the step, outside its CUDA graph, like the update. */
static sc_status clip_gradients(host_trainer *t)
{
    if (!t->clip)
        return SC_OK;
    return t->cfg.clip_grad_norm > 0 ? sc_grad_clip_norm(t->clip, t->cfg.clip_grad_norm)
                                     : sc_grad_clip_value(t->clip, t->cfg.clip_grad_value);
}

/* The step's last micro-batch: the gradients are averaged; the optimizer
 * steps. */
static sc_status apply_gradients(host_trainer *t, const host_batch *b, const sc_tensor *loss)
{
    host_session *s = &t->s;
    double loss_value = 0; /* read for the hooks that see it */
    if (host_hook_set_has(s->hooks, "after_backward")) {
        SC_TRY(loss_now(t, b, loss, &loss_value));
        SC_TRY(trainer_read_params(t));
    }
    sc_hook_context ctx = trainer_batch_context(t, "after_backward", SC_SPLIT_TRAIN, b->index,
                                        t->steps_per_epoch, loss_value);
    ctx.step = t->batch_step; /* the step these gradients make */
    ctx.n_grads = t->n_grads;
    ctx.grads = t->grads;
    SC_TRY(trainer_run_hooks(t, &ctx));
    SC_TRY(clip_gradients(t));
    SC_TRY(sc_optim_step(t->opt, t->lr));
    if (t->ema) /* timm's ModelEmaV3.update(model, step) after the step it counts */
        SC_TRY(sc_ema_update(t->ema, sc_ema_decay_at(t->cfg.ema_decay, t->cfg.ema_warmup,
                                                     t->state.step + 1)));
    if (histograms_due(t, b)) { /* never of the weights a non-finite loss made */
        SC_TRY(loss_now(t, b, loss, &loss_value));
        SC_TRY(trainer_read_params(t));
        host_tb_log_params(t->tb, s->params, t->host_values, t->host_grads,
                         t->state.step + 1);
    }
    sc_params_zero_grad(s->params);
    t->state.step++;
    return SC_OK;
}

/* Forward, criterion and backward of batch b, queued on the GPU from its
 * uploaded copy. The CPU checks the loss before backward; a GPU checks it
 * and the gradients on the device after backward (the optimizer's guard,
 * which then skips the update) and reports it at the step's fold. */
static sc_status forward_backward(host_trainer *t, const host_batch *b, bool last,
                                  sc_tensor_list *outputs, sc_tensor **loss)
{
    host_session *s = &t->s;
    sc_tensor_list inputs, targets;
    SC_TRY(host_step_pipe_upload(t->pipe, b, &inputs, &targets));
    if (t->graphs.eager) {
        double value;
        SC_TRY(host_session_forward(s, &inputs, outputs));
        SC_TRY(host_session_criterion(s, outputs, &targets, loss));
        if (!on_gpu(t))
            SC_TRY(host_name_batch(
                host_loss_value(*loss, "train", t->state.epoch, b->index, &value), b));
        SC_TRY(host_dist_backward(t->dist, s->ctx, *loss, last));
    } else { /* one process, one micro-batch: backward needs no collectives */
        SC_TRY(host_graph_step_run(&t->graphs, s, &inputs, &targets, b->size, outputs, loss,
                                 &t->log));
    }
    SC_TRY(host_step_pipe_consumed(t->pipe));
    return sc_optim_guard(t->opt, *loss);
}

static sc_status train_step(host_trainer *t, const host_batch *loaded)
{
    host_session *s = &t->s;
    host_batch mixed; /* --mixup, --cutmix (mix.h); else the batch as loaded */
    SC_TRY(host_mix_batch(t->mix, t->state.epoch, loaded, &mixed));
    const host_batch *b = &mixed;
    int64_t micro = b->index % t->cfg.accumulate; /* micro-batch of the optimizer step */
    uint64_t stream = sc_rng_mix(RNG_STREAM_STEP, (uint64_t)t->state.step);
    sc_rng_init(sc_ctx_rng(s->ctx), t->state.seed, host_dist_step_stream(t->dist, stream, micro));
    t->lr = sc_schedule_lr(&t->state.schedule, t->state.base_lr, t->state.step);
    sc_tensor_list outputs;
    sc_tensor *loss;
    bool last = micro + 1 == t->cfg.accumulate;
    SC_TRY(forward_backward(t, b, last, &outputs, &loss));
    if (last)
        SC_TRY(apply_gradients(t, b, loss));
    host_step_info info = {t->state.epoch, b->index, b->size, t->state.step, t->lr, last,
                         .n_samples = host_samples_named(b->size)};
    memcpy(info.samples, b->samples, (size_t)info.n_samples * sizeof *info.samples);
    const sc_tensor *norm = last && t->clip ? sc_grad_clip_last_norm(t->clip) : NULL;
    SC_TRY(host_step_pipe_add(t->pipe, loss, sc_optim_guard_flag(t->opt), norm, &outputs, b,
                            &info));
    t->state.next_batch = b->index + 1;
    return SC_OK;
}

/* train/loss_step: the mean loss of the optimizer step's micro-batches. */
static void log_step_loss(host_trainer *t, const host_step_info *step, double loss)
{
    t->step_loss_sum += loss;
    if (!step->closes_step) /* inside an optimizer step */
        return;
    host_tb_log_step(t->tb, step->step, t->step_loss_sum / t->cfg.accumulate, step->lr);
    t->step_loss_sum = 0;
}

/* A step read back whose loss, or on a GPU whose gradients, are not
 * finite is an error. */
static sc_status check_step(const host_trainer *t, const host_step_result *r)
{
    const host_step_info *step = &r->info;
    SC_TRY(host_loss_check(r->loss, "train", step->epoch, step->batch));
    if (!r->skipped)
        return SC_OK;
    /* a finite loss, from gradients that were not */
    return sc_error_set(SC_ERR_NUMERIC, "train gradients are not finite at epoch %d, batch "
                        "%lld (loss %g%s): the update was skipped", step->epoch,
                        (long long)step->batch, r->loss,
                        host_dist_world(t->dist) > 1 ? " here; the summed gradients carry "
                                                     "another rank's non-finite values too"
                                                   : "");
}

sc_status trainer_fold_step(void *user, const host_step_result *r)
{
    host_trainer *t = user;
    const host_step_info *step = &r->info;
    SC_TRY(host_name_samples(check_step(t, r), step->samples, step->n_samples, step->size));
    SC_TRY(host_session_metrics(&t->s, r->outputs, r->targets, t->train_sums));
    t->state.loss_sum += r->loss * (double)step->size;
    t->state.samples += step->size;
    t->loss = r->loss;
    log_step_loss(t, step, r->loss);
    if (r->has_grad_norm) /* with clipping: the norm before it, each optimizer step */
        SC_TRY(host_run_log_scalar(&t->log, step->epoch, step->step, "train/grad_norm",
                                 r->grad_norm));
    return SC_OK;
}

/* Reads the steps in flight: all of them when batch_end hooks read the
 * loss and metrics of each batch, or when the phase is over; else those
 * that have arrived. */
static sc_status read_steps(host_trainer *t)
{
    if (host_hook_set_has(t->s.hooks, "batch_end") || t->state.next_batch == t->steps_per_epoch)
        return host_step_pipe_drain(t->pipe);
    return host_step_pipe_poll(t->pipe);
}

/* The batch_end hooks and the progress line see the steps read so far:
 * this one, when they need it (read_steps). */
static sc_status after_batch(host_trainer *t, const host_batch *b, double t0,
                             double seconds_before, double wait)
{
    SC_TRY(read_steps(t));
    sc_hook_context ctx = trainer_batch_context(t, "batch_end", SC_SPLIT_TRAIN, b->index,
                                                t->steps_per_epoch, t->loss);
    ctx.metrics = t->train_sums;
    SC_TRY(trainer_run_hooks(t, &ctx));
    int64_t samples = t->state.samples;
    host_progress progress = {
        .phase = "train", .epoch = t->state.epoch,
        .batch = t->state.next_batch, .batches = t->steps_per_epoch,
        .samples = samples, .loss = samples ? t->state.loss_sum / (double)samples : 0,
        .seconds = seconds_before + host_now() - t0, .data_wait_s = wait,
    };
    host_run_log_progress(&t->log, &progress);
    if (t->state.next_batch % t->cfg.accumulate != 0) /* inside an optimizer step */
        return SC_OK;
    bool saved = false; /* a new best metric */
    SC_TRY(validate_within_epoch(t, &saved));
    if (!saved && t->cfg.checkpoint_every > 0 && t->state.step % t->cfg.checkpoint_every == 0 &&
        t->state.next_batch < t->steps_per_epoch)
        SC_TRY(save_checkpoint(t, false));
    return serve_requests(t);
}

/* The run log says when the machine's load turned the CPU threads' short
 * waits on or off (base/waits.h). */
void trainer_note_waits(host_trainer *t, bool changed)
{
    if (changed)
        host_run_log_info(&t->log, "compute threads: %s waits, as other processes kept %.2f "
                          "cores busy over the last %.2f s (see docs/cli.md, Threads)",
                          t->waits.short_waits ? "short" : "long", t->waits.others,
                          t->waits.window);
}

static sc_status train_batches(host_trainer *t, double *wait)
{
    host_loader *loader = t->loaders[SC_SPLIT_TRAIN];
    double t0 = host_now(), seconds_before = t->state.train_seconds;
    SC_TRY(host_loader_start_epoch(loader, t->state.epoch, t->state.next_batch));
    while (t->state.next_batch < t->steps_per_epoch) {
        /* Ranks leave together, on stop requests all of them agree on. */
        if (t->state.next_batch % t->cfg.accumulate == 0)
            SC_TRY(host_dist_step_begin(t->dist, &t->stop, &t->interrupted));
        if (t->stop || t->interrupted)
            break;
        host_batch *b;
        double w0 = host_now();
        SC_TRY(host_loader_next(loader, &b));
        *wait += host_now() - w0;
        if (!b)
            break;
        t->batch_step = t->state.step + 1;
        sc_hook_context at = trainer_batch_context(t, "batch_begin", SC_SPLIT_TRAIN, b->index,
                                           t->steps_per_epoch, 0);
        SC_TRY(trainer_run_hooks(t, &at));
        sc_status st = train_step(t, b);
        sc_ctx_reset(t->s.ctx);
        trainer_note_waits(t, host_waits_check(&t->waits));
        if (st == SC_OK)
            st = after_batch(t, b, t0, seconds_before, *wait);
        t->batch_step = 0;
        host_loader_release(loader, b);
        SC_TRY(st);
    }
    SC_TRY(host_step_pipe_drain(t->pipe)); /* stopped early: the steps in flight */
    t->state.train_seconds = seconds_before + host_now() - t0;
    return SC_OK;
}

static sc_status log_phase(host_trainer *t, const char *phase, double loss_sum,
                           int64_t samples, const sc_metrics *metrics, double seconds,
                           double wait, bool final)
{
    sc_device gpu = sc_ctx_device(t->s.ctx);
    sc_device_memory mem = sc_device_memory_used(gpu);
    host_phase_result r = {
        .phase = phase,
        .epoch = t->state.epoch,
        .epochs = t->cfg.epochs,
        .step = t->state.step,
        .loss = samples ? loss_sum / (double)samples : 0,
        .metrics = metrics,
        .samples = samples,
        .seconds = seconds,
        .data_wait_s = wait,
        .comm_s = host_dist_take_comm_s(t->dist),
        .arena_peak = sc_ctx_arena_peak(t->s.ctx),
        .lr = t->lr,
        .on_gpu = gpu.kind == SC_DEVICE_CUDA,
        .gpu_allocated = mem.allocated,
        .gpu_peak = mem.peak,
    };
    return host_run_log_phase(&t->log, &r, final);
}

static sc_status phase_end_hooks(host_trainer *t, sc_split phase, double loss,
                                 const sc_metrics *metrics, double seconds, int64_t samples)
{
    sc_hook_context ctx = trainer_hook_context(t, "phase_end", phase);
    ctx.loss = loss;
    ctx.metrics = metrics;
    ctx.samples_per_s = seconds > 0 ? (double)samples / seconds : 0;
    return trainer_run_hooks(t, &ctx);
}

/* Returns with t->state.next_batch < steps_per_epoch when stopped early. */
static sc_status train_phase(host_trainer *t)
{
    host_session *s = &t->s;
    if (t->state.next_batch == 0) {
        sc_metrics_reset(t->train_sums);
        t->state.loss_sum = 0;
        t->state.samples = 0;
        t->state.train_seconds = 0;
    }
    sc_ctx_set_training(s->ctx, true);
    sc_ctx_set_grad_enabled(s->ctx, true);
    SC_TRY(trainer_run_point(t, "phase_begin", SC_SPLIT_TRAIN));
    double wait = 0;
    sc_status st = train_batches(t, &wait);
    host_loader_stop_epoch(t->loaders[SC_SPLIT_TRAIN]);
    if (st != SC_OK)
        host_run_log_end_line(&t->log);
    SC_TRY(st);
    if (t->state.next_batch < t->steps_per_epoch)
        return SC_OK;
    SC_TRY(host_dist_sum_all(t->dist, &t->state.loss_sum, &t->state.samples, t->train_sums));
    double loss = t->state.samples ? t->state.loss_sum / (double)t->state.samples : 0;
    SC_TRY(log_phase(t, "train", t->state.loss_sum, t->state.samples, t->train_sums,
                     t->state.train_seconds, wait, false));
    return phase_end_hooks(t, SC_SPLIT_TRAIN, loss, t->train_sums, t->state.train_seconds,
                           t->state.samples);
}

/* ---- eval phases ---- */

static int64_t max_batches(const host_trainer *t, sc_split split)
{
    return split == SC_SPLIT_TEST    ? t->cfg.max_test_iterations
           : split == SC_SPLIT_VALID ? t->cfg.max_valid_iterations
                                     : t->cfg.max_train_iterations;
}

/* What an eval pass's batch_end hooks see. */
typedef struct eval_pass {
    host_trainer *t;
    sc_split split;
    int64_t batches;
    const host_eval_sums *sums;
} eval_pass;

/* batch_end of a valid or test batch: the running loss and metrics. */
static sc_status eval_batch_end(void *user, const host_batch *b, const sc_tensor_list *outputs)
{
    const eval_pass *p = user;
    sc_hook_context ctx = trainer_batch_context(p->t, "batch_end", p->split, b->index, p->batches,
                                        p->sums->loss_sum / (double)p->sums->samples);
    ctx.metrics = p->t->eval_sums;
    return trainer_run_hooks(p->t, &ctx);
}

/* Evaluates `split` through `loader`; the metrics stay in t->eval_sums. */
static sc_status eval_weights(host_trainer *t, sc_split split, host_loader *loader,
                              const char *name, bool final)
{
    sc_metrics_reset(t->eval_sums);
    SC_TRY(trainer_run_point(t, "phase_begin", split));
    host_eval_sums sums = {0};
    int64_t batches = host_loader_batches(loader), most = max_batches(t, split);
    eval_pass pass = {t, split, most > 0 && most < batches ? most : batches, &sums};
    double t0 = host_now();
    SC_TRY(host_dist_sync_buffers(t->dist));
    SC_TRY(host_evaluate(&t->s, loader, name, t->state.epoch, most, t->eval_sums, &sums,
                       eval_batch_end, &pass, &t->log));
    SC_TRY(host_dist_sum_all(t->dist, &sums.loss_sum, &sums.samples, t->eval_sums));
    double seconds = host_now() - t0;
    SC_TRY(log_phase(t, name, sums.loss_sum, sums.samples, t->eval_sums, seconds,
                     sums.data_wait_s, final));
    double loss = sums.samples ? sums.loss_sum / (double)sums.samples : 0;
    return phase_end_hooks(t, split, loss, t->eval_sums, seconds, sums.samples);
}

/* The pass of the weights, then with --ema-decay the same pass of their
 * EMA, logged as phase "<name>_ema"; the metrics left in t->eval_sums are
 * the last pass's. */
static sc_status eval_phase(host_trainer *t, sc_split split, host_loader *loader,
                            const char *name, bool final)
{
    SC_TRY(eval_weights(t, split, loader, name, final));
    if (!t->ema)
        return SC_OK;
    char ema_name[64];
    snprintf(ema_name, sizeof ema_name, "%s_ema", name);
    SC_TRY(sc_ema_swap(t->ema)); /* the network now computes with the EMA weights */
    sc_status st = eval_weights(t, split, loader, ema_name, final);
    sc_status back = sc_ema_swap(t->ema);
    return st != SC_OK ? st : back;
}

/* ---- epochs ---- */

/* The main metric of `metrics`, which the socket must report. */
static sc_status main_metric(const host_trainer *t, const sc_metrics *metrics, double *value)
{
    const char *name = t->s.main_metric;
    int i = sc_metrics_find(metrics, name);
    if (i < 0)
        return sc_error_set(SC_ERR_PLUGIN, "%s: socket_metrics did not report the main metric '%s'",
                            t->s.model.lib.path, name);
    *value = sc_metrics_value(metrics, i);
    return SC_OK;
}

/* Whether value is the best main metric so far; it is noted when so. */
static bool note_best(host_trainer *t, double value)
{
    bool higher = t->s.main_metric_mode == SC_METRIC_MAX;
    bool best = !t->state.has_best ||
                (higher ? value > t->state.best_metric : value < t->state.best_metric);
    if (best) {
        t->state.has_best = true;
        t->state.best_metric = value;
        t->state.best_epoch = t->state.epoch;
    }
    return best;
}

/* After valid: schedule, best tracking, checkpoint. */
static sc_status end_epoch(host_trainer *t, const sc_metrics *monitored)
{
    double value = 0;
    SC_TRY(main_metric(t, monitored, &value));
    sc_schedule_observe(&t->state.schedule, value);
    bool best = note_best(t, value);
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

/* --validate-every-steps: a valid pass after every N optimizer steps
 * (counted over the run, as the step numbers), except at the epoch's
 * last, which the epoch-end pass validates. A new best metric writes a
 * checkpoint, published as best (*saved); the plateau schedule counts
 * epochs and sees the epoch-end passes only. The training trajectory is
 * the same as without: the pass draws from no train stream (train_step
 * seeds each step's own) and leaves the network in train mode. */
static sc_status validate_within_epoch(host_trainer *t, bool *saved)
{
    int64_t every = t->cfg.validate_every_steps;
    if (every == 0 || t->state.step % every != 0 || t->state.next_batch == t->steps_per_epoch ||
        host_session_split_len(&t->s, SC_SPLIT_VALID) == 0)
        return SC_OK;
    SC_TRY(host_step_pipe_drain(t->pipe)); /* a non-finite train step stops it first */
    SC_TRY(eval_phase(t, SC_SPLIT_VALID, t->loaders[SC_SPLIT_VALID], "valid_step", false));
    double value = 0;
    SC_TRY(main_metric(t, t->eval_sums, &value));
    *saved = note_best(t, value);
    return *saved ? save_checkpoint(t, true) : SC_OK;
}

static sc_status run_epoch(host_trainer *t)
{
    SC_TRY(trainer_run_point(t, "epoch_begin", SC_SPLIT_TRAIN));
    SC_TRY(train_phase(t));
    if (t->state.next_batch < t->steps_per_epoch) /* stopped mid-epoch */
        return save_checkpoint(t, false);
    if (t->train_eval)
        SC_TRY(eval_phase(t, SC_SPLIT_TRAIN, t->train_eval, "train_eval", false));
    bool has_valid = host_session_split_len(&t->s, SC_SPLIT_VALID) > 0;
    if (has_valid)
        SC_TRY(eval_phase(t, SC_SPLIT_VALID, t->loaders[SC_SPLIT_VALID], "valid", false));
    /* valid's metrics, of the EMA weights with --ema-decay (as timm's train.py) */
    const sc_metrics *monitored = has_valid ? t->eval_sums : t->train_sums;
    SC_TRY(end_epoch(t, monitored));
    sc_hook_context ctx = trainer_hook_context(t, "epoch_end", SC_SPLIT_VALID);
    ctx.metrics = monitored;
    SC_TRY(trainer_run_hooks(t, &ctx));
    t->state.epoch++;
    return SC_OK;
}

/* ---- steering: requests served at batch boundaries (steer.h) ---- */

/* An extra valid or test pass (a hook's request_eval, scorch-ctl validate
 * or test), logged as "valid_extra" or "test_extra"; its metrics into text. */
static sc_status extra_pass(host_trainer *t, sc_split split, char *text, size_t size)
{
    host_loader *loader = t->loaders[split];
    const char *name = split == SC_SPLIT_VALID ? "valid_extra" : "test_extra";
    if (host_session_split_len(&t->s, split) == 0) {
        snprintf(text, size, "the %s split is empty: no pass", sc_split_name(split));
        return SC_OK;
    }
    t->extra_pass = true;
    sc_status st = eval_phase(t, split, loader, name, false);
    t->extra_pass = false;
    SC_TRY(st);
    int n = snprintf(text, size, "%s at epoch %d, step %lld:", name, t->state.epoch,
                     (long long)t->state.step);
    for (int i = 0; i < sc_metrics_count(t->eval_sums) && n > 0 && (size_t)n < size; i++)
        n += snprintf(text + n, size - (size_t)n, " %s %.6g", sc_metrics_name(t->eval_sums, i),
                      sc_metrics_value(t->eval_sums, i));
    return SC_OK;
}

/* Serves r and answers it; an error is the run's (a checkpoint that could
 * not be written), which stops it. */
static sc_status serve_request(host_trainer *t, host_request *r)
{
    char text[1024] = "";
    sc_status st = SC_OK;
    switch (r->kind) {
    case HOST_REQUEST_SAVE:
        st = save_checkpoint(t, false);
        snprintf(text, sizeof text, "checkpoint written at epoch %d, step %lld",
                 t->state.epoch, (long long)t->state.step);
        break;
    case HOST_REQUEST_VALIDATE:
    case HOST_REQUEST_TEST:
        st = extra_pass(t, r->kind == HOST_REQUEST_TEST ? SC_SPLIT_TEST : SC_SPLIT_VALID, text,
                        sizeof text);
        break;
    case HOST_REQUEST_SET_LR:
        if (!trainer_lr_in_range(r->lr)) {
            host_control_reply(r, false, "lr %g is out of range (0 < lr < 1e6)", r->lr);
            return SC_OK;
        }
        t->state.base_lr = r->lr;
        snprintf(text, sizeof text, "base lr %g from step %lld", r->lr,
                 (long long)t->state.step + 1);
        break;
    case HOST_REQUEST_STOP:
        t->interrupted = true;
        t->stop_causes |= HOST_STOP_CONTROL;
        break;
    default: /* pause and resume are steer.c's */
        break;
    }
    host_steer_done(&t->steer, r, st, text);
    return st;
}

/* Every rank serves the same requests: what hooks or signals raised on
 * any rank (live control is off under mpirun; see open_control). */
static sc_status agree_on_requests(host_trainer *t)
{
    if (host_dist_world(t->dist) == 1)
        return SC_OK;
    if (host_signals_take_save())
        host_steer_raise(&t->steer, HOST_REQUEST_SAVE);
    return host_dist_agree_bits(t->dist, &t->steer.raised);
}

/* At a batch boundary (after a train batch, and between epochs). */
static sc_status serve_requests(host_trainer *t)
{
    SC_TRY(agree_on_requests(t));
    host_request r;
    while (host_steer_next(&t->steer, &r))
        SC_TRY(serve_request(t, &r));
    if (host_signals_stop_requested()) {
        t->interrupted = true;
        t->stop_causes |= HOST_STOP_SIGNAL;
    }
    /* --max-time: rank 0's clock decides; the ranks agree on the stop */
    if (t->deadline > 0 && host_dist_is_root(t->dist) && host_now() >= t->deadline) {
        t->interrupted = true;
        t->stop_causes |= HOST_STOP_TIME;
    }
    return SC_OK;
}

/* Between epochs `status` shows the epoch that ended; after a stop in
 * mid-epoch, the batch it stopped after. */
static sc_status serve_between_epochs(host_trainer *t)
{
    if (t->state.next_batch == 0) {
        sc_hook_context ended = trainer_hook_context(t, "epoch_end", SC_SPLIT_TRAIN);
        ended.epoch = t->state.epoch - 1;
        ended.batches = t->steps_per_epoch;
        host_steer_publish_between_epochs(&t->steer, &ended);
    }
    return serve_requests(t);
}

/* The final summary's last line. */
static void report_best(host_trainer *t)
{
    if (t->state.has_best)
        host_run_log_final(&t->log, "best %s %.4f at epoch %d; run directory %s",
                         t->s.main_metric, t->state.best_metric, t->state.best_epoch,
                         t->rd.root);
    else
        host_run_log_final(&t->log, "no epoch finished; run directory %s", t->rd.root);
}

bool host_trainer_last_checkpoint(const host_trainer *t, char *path, size_t size)
{
    host_run_dir_alias(&t->rd, "last", path, size);
    FILE *f = fopen(path, "rb");
    if (f)
        fclose(f);
    return f != NULL;
}

/* The last line of a run stopped early. */
static void stop_outcome(const host_trainer *t, char *text, size_t size)
{
    bool signalled = t->stop_causes & HOST_STOP_SIGNAL;
    if (!signalled && (t->stop_causes & HOST_STOP_TIME)) {
        snprintf(text, size, "stopped at epoch %d, step %lld, as the --max-time budget of %s "
                 "was spent, after writing a checkpoint; continue with --resume (the budget "
                 "starts afresh)", t->state.epoch, (long long)t->state.step, t->cfg.max_time);
        return;
    }
    snprintf(text, size, "stopped by %s at epoch %d, step %lld, after writing a checkpoint; "
             "continue with --resume", signalled ? "a signal" : "scorch-ctl",
             t->state.epoch, (long long)t->state.step);
}

static sc_status run(host_trainer *t, bool *interrupted)
{
    if (t->state.finished) /* resumed, with nothing left to do: set-up said so */
        return SC_OK;
    /* The budget counts this process's time: a resumed run has it afresh. */
    t->deadline = t->time_budget > 0 ? host_now() + t->time_budget : 0;
    sc_status st = t->cfg.resume ? trainer_load_hook_state(t) : SC_OK;
    if (st == SC_OK)
        st = trainer_run_point(t, "train_begin", SC_SPLIT_TRAIN);
    while (st == SC_OK && (st = host_dist_agree(t->dist, &t->stop, &t->interrupted)) == SC_OK &&
           t->state.epoch <= t->cfg.epochs && !t->stop && !t->interrupted) {
        st = run_epoch(t);
        if (st == SC_OK)
            st = serve_between_epochs(t);
    }
    if (st == SC_OK && t->interrupted) /* every rank left the loop at the same point */
        st = host_dist_agree_bits(t->dist, &t->stop_causes);
    if (st != SC_OK)
        return st;
    *interrupted = t->stop_causes & HOST_STOP_SIGNAL; /* not scorch-ctl's stop, nor the budget's */
    if (t->interrupted) {
        char outcome[256];
        stop_outcome(t, outcome, sizeof outcome);
        host_run_log_final(&t->log, "%s", outcome);
        host_steer_close(&t->steer, true, outcome);
        return SC_OK;
    }
    if (t->state.epoch > 1) /* report the epoch the model finished */
        t->state.epoch--;
    if (host_session_split_len(&t->s, SC_SPLIT_TEST) > 0)
        SC_TRY(eval_phase(t, SC_SPLIT_TEST, t->loaders[SC_SPLIT_TEST], "test", true));
    report_best(t);
    return trainer_run_point(t, "train_end", SC_SPLIT_TEST);
}

sc_status host_trainer_run(host_trainer *t, bool *interrupted)
{
    /* A rank that failed meets the others at their next check (dist.h). */
    return host_dist_check(t->dist, run(t, interrupted));
}
