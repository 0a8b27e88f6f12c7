/* trainer_hooks.c — what a hook sees (a read-only context) and what it
 * may do (the action table), never the trainer itself. */
#include <string.h>

#include "run/trainer_impl.h"

/* ---- hooks: the context a hook sees and the actions it may take ---- */

bool trainer_lr_in_range(double lr) { return lr > 0 && lr < 1e6; }

static void action_set_lr(void *host, double lr)
{
    host_trainer *t = host;
    if (trainer_lr_in_range(lr))
        t->state.base_lr = lr;
    else
        host_run_log_info(&t->log, "warning: a hook asked for lr %g; ignored", lr);
}

static void action_request_stop(void *host, const char *reason)
{
    host_trainer *t = host;
    t->stop = true;
    host_run_log_info(&t->log, "stop requested by a hook: %s", reason ? reason : "");
}

/* The step what a hook logs is recorded at: within a train batch (its
 * batch_begin, after_backward and batch_end) the step the batch belongs
 * to, where train/loss_step and train/lr are too; elsewhere the steps
 * taken. */
static int64_t log_step(const host_trainer *t)
{
    return t->batch_step ? t->batch_step : t->state.step;
}

static void action_log_scalar(void *host, const char *tag, double value)
{
    host_trainer *t = host;
    if (host_run_log_scalar(&t->log, t->state.epoch, log_step(t), tag, value) != SC_OK)
        host_run_log_info(&t->log, "warning: %s", sc_error_message());
}

static sc_status action_log_text(void *host, const char *tag, const char *text)
{
    host_trainer *t = host;
    return host_tb_add_text(t->tb, tag, log_step(t), text);
}

static sc_status action_log_image(void *host, const char *tag, const sc_tensor *image)
{
    host_trainer *t = host;
    return host_tb_add_image(t->tb, tag, log_step(t), image);
}

static void action_request_checkpoint(void *host, const char *reason)
{
    host_trainer *t = host;
    host_steer_raise(&t->steer, HOST_REQUEST_SAVE);
    host_run_log_info(&t->log, "checkpoint requested by a hook: %s", reason ? reason : "");
}

static void action_request_eval(void *host, sc_split split, const char *reason)
{
    host_trainer *t = host;
    if (split != SC_SPLIT_VALID && split != SC_SPLIT_TEST) {
        host_run_log_info(&t->log, "warning: a hook asked for an extra pass over split %d; "
                        "ignored (valid or test only)", (int)split);
        return;
    }
    host_steer_raise(&t->steer, split == SC_SPLIT_VALID ? HOST_REQUEST_VALIDATE : HOST_REQUEST_TEST);
    host_run_log_info(&t->log, "extra %s pass requested by a hook: %s", sc_split_name(split),
                    reason ? reason : "");
}

static sc_status action_save_blob(void *host, const void *data, size_t size)
{
    host_trainer *t = host;
    const sc_hook *h = host_hook_set_running(t->s.hooks);
    if (!h || strcmp(h->point, "checkpoint_save") != 0)
        return sc_error_set(SC_ERR_STATE, "save_blob works at checkpoint_save only");
    if (size && !data)
        return sc_error_set(SC_ERR_INVALID, "save_blob: NULL data of %zu bytes", size);
    return host_hook_blobs_put(&t->hook_blobs, h->name, data, size);
}

sc_hook_context trainer_hook_context(const host_trainer *t, const char *point, sc_split phase)
{
    return (sc_hook_context){
        .point = point,
        .phase = phase,
        .epoch = t->state.epoch,
        .epochs = t->cfg.epochs,
        .step = t->state.step,
        .rank = host_dist_rank(t->dist),
        .world = host_dist_world(t->dist),
        .batch_size = (int)t->cfg.batch_size,
        .lr = t->lr,
        .extra = t->extra_pass,
    };
}

/* The context of a batch-level point. */
sc_hook_context trainer_batch_context(const host_trainer *t, const char *point, sc_split phase,
                                     int64_t batch, int64_t batches, double loss)
{
    sc_hook_context ctx = trainer_hook_context(t, point, phase);
    ctx.batch = batch;
    ctx.batches = batches;
    ctx.loss = loss;
    return ctx;
}

static sc_hook_actions hook_actions(host_trainer *t)
{
    return (sc_hook_actions){.abi = SC_ABI_HEADER(sc_hook_actions), .host = t,
                             .set_lr = action_set_lr, .request_stop = action_request_stop,
                             .log_scalar = action_log_scalar, .log_text = action_log_text,
                             .log_image = action_log_image,
                             .request_checkpoint = action_request_checkpoint,
                             .request_eval = action_request_eval,
                             .save_blob = action_save_blob};
}

/* Every point passes here, which is where `status` learns where the
 * training thread is. */
sc_status trainer_run_hooks(host_trainer *t, const sc_hook_context *ctx)
{
    const sc_hook_actions actions = hook_actions(t);
    host_steer_publish(&t->steer, ctx);
    return host_hook_set_run(t->s.hooks, ctx->point, ctx, &actions);
}

/* On resume, before train_begin: each hook gets back its blob. */
sc_status trainer_load_hook_state(host_trainer *t)
{
    const sc_hook_actions actions = hook_actions(t);
    sc_hook_context ctx = trainer_hook_context(t, "checkpoint_load", SC_SPLIT_TRAIN);
    return host_hook_set_run_load(t->s.hooks, &ctx, &actions, &t->hook_blobs);
}

sc_status trainer_run_point(host_trainer *t, const char *point, sc_split phase)
{
    sc_hook_context ctx = trainer_hook_context(t, point, phase);
    return trainer_run_hooks(t, &ctx);
}
