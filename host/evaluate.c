#include "evaluate.h"

#include <math.h>
#include <stdio.h>

#include "run_log.h"
#include "step_pipe.h"

sc_status sc_loss_check(double value, const char *phase, int epoch, int64_t batch)
{
    if (!isfinite(value))
        return sc_error_set(SC_ERR_NUMERIC, "%s loss is %g at epoch %d, batch %lld", phase,
                            value, epoch, (long long)batch);
    return SC_OK;
}

sc_status sc_loss_value(const sc_tensor *loss, const char *phase, int epoch, int64_t batch,
                        double *out)
{
    float value;
    SC_TRY(sc_tensor_item(loss, &value));
    *out = value;
    return sc_loss_check(*out, phase, epoch, batch);
}

int sc_samples_named(int64_t size)
{
    return size < SC_STEP_SAMPLES_NAMED ? (int)size : SC_STEP_SAMPLES_NAMED;
}

sc_status sc_name_samples(sc_status st, const int64_t *first, int n, int64_t size)
{
    if (st == SC_OK || n <= 0)
        return st;
    char message[1024], list[256] = "";
    snprintf(message, sizeof message, "%s", sc_error_message());
    size_t used = 0;
    for (int k = 0; k < n && used < sizeof list; k++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%lld", k ? ", " : "",
                                 (long long)first[k]);
    if (n < size && used < sizeof list)
        snprintf(list + used, sizeof list - used, ", ... (%lld in all)", (long long)size);
    return sc_error_set(st, "%s; the batch's samples: %s", message, list);
}

sc_status sc_name_batch(sc_status st, const sc_batch *b)
{
    return sc_name_samples(st, b->samples, sc_samples_named(b->size), b->size);
}

static sc_status eval_batch(sc_session *s, const sc_batch *b, int epoch, const char *phase,
                            sc_metrics *metrics, sc_eval_sums *sums,
                            sc_eval_batch_fn on_batch, void *user)
{
    sc_tensor_list outputs;
    sc_tensor *loss;
    double value;
    SC_TRY(sc_session_forward(s, &b->inputs, &outputs));
    SC_TRY(sc_session_criterion(s, &outputs, &b->targets, &loss));
    SC_TRY(sc_name_batch(sc_loss_value(loss, phase, epoch, b->index, &value), b));
    sc_tensor_list on_host;
    SC_TRY(sc_session_to_host(s, &outputs, &on_host));
    SC_TRY(sc_session_metrics(s, &on_host, &b->targets, metrics));
    sums->loss_sum += value * (double)b->size;
    sums->samples += b->size;
    return on_batch ? on_batch(user, b, &on_host) : SC_OK;
}

static void show_progress(sc_run_log *log, const char *phase, int epoch, int64_t batch,
                          int64_t batches, const sc_eval_sums *sums, double seconds)
{
    sc_progress progress = {
        .phase = phase, .epoch = epoch, .batch = batch, .batches = batches,
        .samples = sums->samples, .loss = sums->loss_sum / (double)sums->samples,
        .seconds = seconds, .data_wait_s = sums->data_wait_s,
    };
    sc_run_log_progress(log, &progress);
}

static sc_status eval_loop(sc_session *s, sc_loader *loader, const char *phase, int epoch,
                           int64_t max_batches, sc_metrics *metrics, sc_eval_sums *sums,
                           sc_eval_batch_fn on_batch, void *user, sc_run_log *log)
{
    int64_t batches = sc_loader_batches(loader);
    if (max_batches > 0 && max_batches < batches)
        batches = max_batches;
    double start = sc_now();
    SC_TRY(sc_loader_start_epoch(loader, epoch, 0));
    for (int64_t n = 0; max_batches == 0 || n < max_batches; n++) {
        sc_batch *b;
        double t0 = sc_now();
        SC_TRY(sc_loader_next(loader, &b));
        sums->data_wait_s += sc_now() - t0;
        if (!b)
            break;
        sc_status st = eval_batch(s, b, epoch, phase, metrics, sums, on_batch, user);
        sc_ctx_reset(s->ctx);
        sc_loader_release(loader, b);
        SC_TRY(st);
        if (log)
            show_progress(log, phase, epoch, n + 1, batches, sums, sc_now() - start);
    }
    return SC_OK;
}

sc_status sc_evaluate(sc_session *s, sc_loader *loader, const char *phase, int epoch,
                      int64_t max_batches, sc_metrics *metrics, sc_eval_sums *sums,
                      sc_eval_batch_fn on_batch, void *user, sc_run_log *log)
{
    bool was_training = sc_ctx_training(s->ctx);
    bool had_grad = sc_ctx_set_grad_enabled(s->ctx, false);
    sc_ctx_set_training(s->ctx, false);
    sc_status st =
        eval_loop(s, loader, phase, epoch, max_batches, metrics, sums, on_batch, user, log);
    sc_loader_stop_epoch(loader);
    if (st != SC_OK && log)
        sc_run_log_end_line(log);
    sc_ctx_set_training(s->ctx, was_training);
    sc_ctx_set_grad_enabled(s->ctx, had_grad);
    return st;
}
