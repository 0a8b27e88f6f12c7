#include "run/evaluate.h"

#include <math.h>
#include <stdio.h>

#include "observe/run_log.h"
#include "run/step_pipe.h"
#include "scorch_host/context.h"

sc_status host_loss_check(double value, const char *phase, int epoch, int64_t batch)
{
    if (!isfinite(value))
        return sc_error_set(SC_ERR_NUMERIC, "%s loss is %g at epoch %d, batch %lld", phase,
                            value, epoch, (long long)batch);
    return SC_OK;
}

sc_status host_loss_value(const sc_tensor *loss, const char *phase, int epoch, int64_t batch,
                        double *out)
{
    float value;
    SC_TRY(sc_tensor_item(loss, &value));
    *out = value;
    return host_loss_check(*out, phase, epoch, batch);
}

int host_samples_named(int64_t size)
{
    return size < HOST_STEP_SAMPLES_NAMED ? (int)size : HOST_STEP_SAMPLES_NAMED;
}

sc_status host_name_samples(sc_status st, const int64_t *first, int n, int64_t size)
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

sc_status host_name_batch(sc_status st, const host_batch *b)
{
    return host_name_samples(st, b->samples, host_samples_named(b->size), b->size);
}

static sc_status eval_batch(host_session *s, const host_batch *b, int epoch, const char *phase,
                            sc_metrics *metrics, host_eval_sums *sums,
                            host_eval_batch_fn on_batch, void *user)
{
    sc_tensor_list outputs;
    sc_tensor *loss;
    double value;
    SC_TRY(host_session_forward(s, &b->inputs, &outputs));
    SC_TRY(host_session_criterion(s, &outputs, &b->targets, &loss));
    SC_TRY(host_name_batch(host_loss_value(loss, phase, epoch, b->index, &value), b));
    sc_tensor_list on_host;
    SC_TRY(host_session_to_host(s, &outputs, &on_host));
    SC_TRY(host_session_metrics(s, &on_host, &b->targets, metrics));
    sums->loss_sum += value * (double)b->size;
    sums->samples += b->size;
    return on_batch ? on_batch(user, b, &on_host) : SC_OK;
}

static void show_progress(host_run_log *log, const char *phase, int epoch, int64_t batch,
                          int64_t batches, const host_eval_sums *sums, double seconds)
{
    host_progress progress = {
        .phase = phase, .epoch = epoch, .batch = batch, .batches = batches,
        .samples = sums->samples, .loss = sums->loss_sum / (double)sums->samples,
        .seconds = seconds, .data_wait_s = sums->data_wait_s,
    };
    host_run_log_progress(log, &progress);
}

static sc_status eval_loop(host_session *s, host_loader *loader, const char *phase, int epoch,
                           int64_t max_batches, sc_metrics *metrics, host_eval_sums *sums,
                           host_eval_batch_fn on_batch, void *user, host_run_log *log)
{
    int64_t batches = host_loader_batches(loader);
    if (max_batches > 0 && max_batches < batches)
        batches = max_batches;
    double start = host_now();
    SC_TRY(host_loader_start_epoch(loader, epoch, 0));
    for (int64_t n = 0; max_batches == 0 || n < max_batches; n++) {
        host_batch *b;
        double t0 = host_now();
        SC_TRY(host_loader_next(loader, &b));
        sums->data_wait_s += host_now() - t0;
        if (!b)
            break;
        sc_status st = eval_batch(s, b, epoch, phase, metrics, sums, on_batch, user);
        sc_ctx_reset(s->ctx);
        host_loader_release(loader, b);
        SC_TRY(st);
        if (log)
            show_progress(log, phase, epoch, n + 1, batches, sums, host_now() - start);
    }
    return SC_OK;
}

sc_status host_evaluate(host_session *s, host_loader *loader, const char *phase, int epoch,
                      int64_t max_batches, sc_metrics *metrics, host_eval_sums *sums,
                      host_eval_batch_fn on_batch, void *user, host_run_log *log)
{
    bool was_training = sc_ctx_training(s->ctx);
    bool had_grad = sc_ctx_set_grad_enabled(s->ctx, false);
    sc_ctx_set_training(s->ctx, false);
    sc_status st =
        eval_loop(s, loader, phase, epoch, max_batches, metrics, sums, on_batch, user, log);
    host_loader_stop_epoch(loader);
    if (st != SC_OK && log)
        host_run_log_end_line(log);
    sc_ctx_set_training(s->ctx, was_training);
    sc_ctx_set_grad_enabled(s->ctx, had_grad);
    return st;
}
