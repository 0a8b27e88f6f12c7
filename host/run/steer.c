/* steer.c — requests from hooks, signals and scorch-ctl, one boundary at
 * a time. */
#include "run/steer.h"

#include <string.h>

#include "control/signals.h"
#include "observe/run_log.h"

/* How often a paused run looks for a stop signal (signals.h). */
#define PAUSE_POLL_S 0.1

void host_steer_init(host_steer *s)
{
    *s = (host_steer){.stop = {.client = -1}};
}

sc_status host_steer_listen(host_steer *s, const char *run_dir, const host_user_funcs *funcs)
{
    return host_control_open(run_dir, funcs, &s->control);
}

void host_steer_close(host_steer *s, bool ok, const char *outcome)
{
    host_control_reply(&s->stop, ok, "%s", ok ? outcome : sc_error_message());
    host_control_close(s->control);
    s->control = NULL;
}

void host_steer_raise(host_steer *s, host_request_kind kind) { s->raised |= 1u << kind; }

static void publish(host_steer *s)
{
    s->status.paused = s->paused;
    if (s->control)
        host_control_publish(s->control, &s->status);
}

void host_steer_publish(host_steer *s, const sc_hook_context *ctx)
{
    static const char checkpoint[] = "checkpoint_"; /* says nothing of where training is */
    if (!s->control || strncmp(ctx->point, checkpoint, sizeof checkpoint - 1) == 0)
        return;
    host_run_status *st = &s->status;
    bool batch_end = strcmp(ctx->point, "batch_end") == 0;
    bool phase_end = strcmp(ctx->point, "phase_end") == 0;
    if (phase_end && ctx->extra) { /* back where the extra pass found the training */
        *st = s->before_extra;
        publish(s);
        return;
    }
    if (strcmp(ctx->point, "phase_begin") == 0) {
        if (ctx->extra)
            s->before_extra = *st;
        s->phase_start = host_now();
        s->phase_batches = 0;
    } else if (batch_end) {
        double seconds = host_now() - s->phase_start;
        s->phase_batches++;
        st->samples_per_s =
            seconds > 0 ? (double)(s->phase_batches * ctx->batch_size) / seconds : 0;
    }
    if (batch_end || phase_end)
        st->loss = ctx->loss;
    /* An epoch's first pass over the train split trains (--validate-on-train
     * evaluates it after); its figures are shown between epochs. */
    if (strcmp(ctx->point, "epoch_begin") == 0)
        s->train_phase_due = true;
    if (phase_end && ctx->phase == SC_SPLIT_TRAIN && s->train_phase_due) {
        s->train_phase_due = false;
        s->train_loss = ctx->loss;
        s->train_samples_per_s = ctx->samples_per_s;
    }
    st->epoch = ctx->epoch;
    st->epochs = ctx->epochs;
    st->phase = sc_split_name(ctx->phase);
    st->batch = ctx->batch + batch_end; /* batches done */
    st->batches = ctx->batches;
    st->step = ctx->step;
    st->lr = ctx->lr;
    st->between_epochs = false;
    publish(s);
}

void host_steer_publish_between_epochs(host_steer *s, const sc_hook_context *ended)
{
    if (!s->control)
        return;
    host_run_status *st = &s->status;
    st->epoch = ended->epoch;
    st->epochs = ended->epochs;
    st->phase = "between_epochs";
    st->batch = st->batches = ended->batches;
    st->step = ended->step;
    st->lr = ended->lr;
    st->loss = s->train_loss;
    st->samples_per_s = s->train_samples_per_s;
    st->between_epochs = true;
    publish(s);
}

/* Pause and resume are served here: they change nothing but whether the
 * training thread waits. */
static void set_paused(host_steer *s, host_request *r, bool paused)
{
    bool was = s->paused;
    s->paused = paused;
    publish(s);
    if (paused)
        host_control_reply(r, true, was ? "already paused" : "paused %s epoch %d, step %lld",
                         s->status.between_epochs ? "after" : "at", s->status.epoch,
                         (long long)s->status.step);
    else
        host_control_reply(r, true, was ? "resumed" : "not paused");
}

/* A request from scorch-ctl, if one comes (waiting a little while
 * paused); pause and resume are served on the way. */
static bool next_from_control(host_steer *s, host_request *out)
{
    if (!s->control)
        return false;
    bool got = s->paused ? host_control_wait(s->control, PAUSE_POLL_S, out)
                         : host_control_take(s->control, out);
    if (got && (out->kind == HOST_REQUEST_PAUSE || out->kind == HOST_REQUEST_RESUME)) {
        set_paused(s, out, out->kind == HOST_REQUEST_PAUSE);
        return false;
    }
    return got;
}

bool host_steer_next(host_steer *s, host_request *out)
{
    if (!s->in_boundary) {
        s->in_boundary = true;
        s->serving = s->raised;
        s->raised = 0;
    }
    for (;;) {
        *out = (host_request){.client = -1};
        if (!s->save_signal_agreed && host_signals_take_save()) {
            out->kind = HOST_REQUEST_SAVE;
            return true;
        }
        if (s->serving) {
            out->kind = (host_request_kind)__builtin_ctz(s->serving);
            s->serving &= s->serving - 1;
            return true;
        }
        if (host_signals_stop_requested())
            break;
        if (next_from_control(s, out))
            return true;
        if (!s->paused)
            break;
    }
    if (s->paused) { /* a signal stops a paused run */
        s->paused = false;
        publish(s);
    }
    s->in_boundary = false;
    return false;
}

void host_steer_done(host_steer *s, host_request *r, sc_status st, const char *text)
{
    if (st == SC_OK && r->kind == HOST_REQUEST_STOP) {
        if (s->paused) { /* a stop ends the pause: the run has to get out */
            s->paused = false;
            publish(s);
        }
        if (r->client >= 0) {
            host_control_reply(&s->stop, false, "another stop came first");
            s->stop = *r;
            return;
        }
    }
    host_control_reply(r, st == SC_OK, "%s", st == SC_OK ? text : sc_error_message());
}
