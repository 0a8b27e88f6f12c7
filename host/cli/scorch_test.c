/* scorch-test: evaluates a checkpoint on a split; for a classifier it
 * writes per-sample predictions with their top-k classes, the confusion
 * matrix and per-class accuracy (host/run/predictions.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run/checkpoint.h"
#include "base/config.h"
#include "base/crash.h"
#include "run/evaluate.h"
#include "run/predictions.h"
#include "observe/run_log.h"
#include "run/session.h"
#include "scorch_host/context.h"

enum { EXIT_USAGE = 2 };

/* Takes model, dataset and their args from the checkpoint's resolved
 * config where the command line left them empty; the config is checked
 * first (host_checkpoint_saved_config), and its errors name the file. */
static sc_status fill_from_checkpoint(host_config *cfg)
{
    host_config *saved = malloc(sizeof *saved); /* large: paths */
    if (!saved)
        return sc_error_set(SC_ERR_NOMEM, "out of memory reading %s", cfg->checkpoint);
    sc_status st = host_checkpoint_saved_config(cfg->checkpoint, saved);
    if (st == SC_OK)
        host_config_inherit(cfg, saved);
    free(saved);
    return st;
}

static bool wants_classes(const host_config *cfg)
{
    return cfg->predictions[0] || cfg->confusion[0] || cfg->per_class[0];
}

/* The result line, in place of the progress line; printed even when quiet. */
static void print_result(host_run_log *log, const host_config *cfg, const sc_metrics *metrics,
                         const host_eval_sums *sums, double seconds)
{
    char line[1024];
    size_t n = (size_t)snprintf(line, sizeof line, "%s  loss %.4f", cfg->split,
                                sums->samples ? sums->loss_sum / (double)sums->samples : 0);
    for (int i = 0; i < sc_metrics_count(metrics) && n < sizeof line; i++)
        n += (size_t)snprintf(line + n, sizeof line - n, "  %s %.4f", sc_metrics_name(metrics, i),
                              sc_metrics_value(metrics, i));
    host_run_log_final(log, "%s  | %lld samples  %.1f s", line, (long long)sums->samples, seconds);
}

/* The confusion matrix and per-class accuracy, where asked for. */
static sc_status write_reports(const host_config *cfg, const host_predictions *pred)
{
    if (cfg->predictions[0] && !cfg->quiet)
        printf("predictions: %s (%lld rows, top-%d)\n", cfg->predictions,
               (long long)pred->rows, pred->topk);
    if (cfg->confusion[0]) {
        SC_TRY(host_predictions_write_confusion(pred, cfg->confusion));
        if (!cfg->quiet)
            printf("confusion matrix: %s (%lld classes)\n", cfg->confusion,
                   (long long)pred->classes);
    }
    if (cfg->per_class[0]) {
        SC_TRY(host_predictions_write_per_class(pred, cfg->per_class));
        if (!cfg->quiet) {
            printf("per-class accuracy: %s\n", cfg->per_class);
            host_predictions_print_per_class(pred, stdout);
        }
    }
    return SC_OK;
}

static sc_status evaluate(host_session *s, const host_config *cfg, sc_metrics *metrics)
{
    sc_split split;
    SC_TRY(sc_split_parse(cfg->split, &split));
    host_loader_config lc = {.plugin_file = s->data.lib.path,
                           .batch_size = cfg->batch_size, .workers = cfg->workers,
                           .prefetch = cfg->prefetch, .seed = cfg->seed, .world = 1,
                           .pinned = sc_ctx_device(s->ctx).kind == SC_DEVICE_CUDA};
    host_loader *loader;
    SC_TRY(host_loader_new(s->data.api, s->splits[split], split, &lc, &loader));
    host_run_log log; /* the progress line only */
    host_predictions pred = {0};
    sc_status st = host_run_log_open(&log, NULL, cfg->quiet, 0);
    bool classes = wants_classes(cfg);
    if (st == SC_OK && classes)
        st = host_predictions_open(&pred, cfg->predictions, cfg->topk, &s->data, s->index);
    host_eval_sums sums = {0};
    double t0 = host_now();
    if (st == SC_OK)
        st = host_evaluate(s, loader, cfg->split, 1, cfg->max_test_iterations, metrics, &sums,
                         classes ? host_predictions_add : NULL, &pred, &log);
    double seconds = host_now() - t0;
    host_loader_free(loader);
    if (st == SC_OK) {
        print_result(&log, cfg, metrics, &sums, seconds);
        st = write_reports(cfg, &pred);
    }
    sc_status closed = host_predictions_close(&pred);
    host_run_log_close(&log);
    SC_TRY(st);
    return closed;
}

static sc_status run(host_config *cfg)
{
    SC_TRY(fill_from_checkpoint(cfg));
    sc_cpu_set_threads(cfg->threads);
    host_session s;
    sc_status opened = host_session_open(&s, cfg, 0);
    if (opened != SC_OK) /* its plugins and data may be the checkpoint's */
        return sc_error_wrap(opened, "checkpoint %s", cfg->checkpoint);
    sc_metrics *metrics = sc_metrics_new();
    sc_status st = metrics ? host_checkpoint_load_weights(cfg->checkpoint, s.params, cfg->ema,
                                                          s.model.api->name, NULL)
                           : SC_ERR_NOMEM;
    if (st == SC_OK)
        st = evaluate(&s, cfg, metrics);
    sc_metrics_free(metrics);
    host_session_close(&s);
    return st;
}

int main(int argc, char **argv)
{
    host_config cfg;
    bool exit_now = false;
    host_crash_install("scorch-test");
    host_config_defaults(&cfg);
    if (host_config_parse(&cfg, HOST_PROGRAM_TEST, argc, argv, &exit_now) != SC_OK) {
        fprintf(stderr, "scorch-test: %s\n", sc_error_message());
        return EXIT_USAGE;
    }
    if (exit_now)
        return 0;
    if (run(&cfg) != SC_OK) {
        fprintf(stderr, "scorch-test: %s\n", sc_error_message());
        return 1;
    }
    return 0;
}
