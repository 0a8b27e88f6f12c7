/* lr_find.c — the learning-rate range test (lr_find.h): the curve's
 * arithmetic, the test's loop over train batches, and its files. */
#include "run/lr_find.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/signals.h"
#include "observe/plot.h"
#include "run/trainer_impl.h"
#include "scorch_host/context.h"
#include "scorch_host/params.h"

/* Stream id of the test's random stream (scorch/rng.h), per step. */
enum { RNG_STREAM_LR_FIND = 0x1f1d };

/* ---- the curve ---- */

sc_status host_lr_curve_init(host_lr_curve *c, double min_lr, double max_lr, int steps)
{
    *c = (host_lr_curve){.min_lr = min_lr, .max_lr = max_lr, .steps = steps, .best = INFINITY};
    c->points = calloc((size_t)steps, sizeof *c->points);
    return c->points ? SC_OK
                     : sc_error_set(SC_ERR_NOMEM, "out of memory for %d lr-find points", steps);
}

void host_lr_curve_free(host_lr_curve *c)
{
    free(c->points);
    c->points = NULL;
}

double host_lr_curve_lr(const host_lr_curve *c, int i)
{
    double r = c->steps > 1 ? (double)i / (c->steps - 1) : 0;
    return c->min_lr * pow(c->max_lr / c->min_lr, r);
}

bool host_lr_curve_add(host_lr_curve *c, double loss)
{
    host_lr_find_point *p = &c->points[c->n];
    c->avg = HOST_LR_FIND_BETA * c->avg + (1 - HOST_LR_FIND_BETA) * loss;
    *p = (host_lr_find_point){
        .lr = host_lr_curve_lr(c, c->n),
        .loss = loss,
        .smoothed = c->avg / (1 - pow(HOST_LR_FIND_BETA, c->n + 1)),
    };
    c->n++;
    if (p->smoothed < c->best)
        c->best = p->smoothed;
    c->diverged = !isfinite(p->smoothed) || p->smoothed > HOST_LR_FIND_DIVERGED * c->best;
    return !c->diverged && c->n < c->steps;
}

/* The gradient of the smoothed loss at point i of [from, to) against
 * log10(lr): central differences inside, one-sided at the ends (as
 * torch.gradient, which Lightning uses). */
static double slope(const host_lr_curve *c, int i, int from, int to)
{
    int lo = i > from ? i - 1 : i, hi = i + 1 < to ? i + 1 : i;
    return (c->points[hi].smoothed - c->points[lo].smoothed) /
           (log10(c->points[hi].lr) - log10(c->points[lo].lr));
}

int host_lr_curve_suggest(const host_lr_curve *c)
{
    int from = HOST_LR_FIND_SKIP_BEGIN, to = c->n - HOST_LR_FIND_SKIP_END;
    for (int i = from; i < to; i++) /* up to the first non-finite point */
        if (!isfinite(c->points[i].smoothed))
            to = i;
    if (to - from < 2)
        return -1;
    int best = from;
    for (int i = from + 1; i < to; i++)
        if (slope(c, i, from, to) < slope(c, best, from, to))
            best = i;
    return best;
}

/* ---- options ---- */

/* The finder's option that a run without --lr-find would ignore: one set
 * to another value than its default (a run's config.ini, used as
 * --config, lists them with their defaults, which change nothing). */
static const char *ignored_option(const host_config *cfg, const host_config *defaults)
{
    if (cfg->lr_find)
        return NULL;
    if (host_config_user_set(cfg, "lr-find-range") &&
        strcmp(cfg->lr_find_range, defaults->lr_find_range) != 0)
        return "lr-find-range";
    if (host_config_user_set(cfg, "lr-find-steps") &&
        cfg->lr_find_steps != defaults->lr_find_steps)
        return "lr-find-steps";
    return NULL;
}

sc_status host_lr_find_check_config(const host_config *cfg)
{
    host_config *defaults = malloc(sizeof *defaults); /* large: paths */
    if (!defaults)
        return sc_error_set(SC_ERR_NOMEM, "out of memory checking the options");
    host_config_defaults(defaults);
    const char *ignored = ignored_option(cfg, defaults);
    free(defaults);
    if (ignored)
        return sc_error_set(SC_ERR_INVALID, "--%s is only read by --lr-find, which is not "
                            "given", ignored);
    if (cfg->lr_find && cfg->resume)
        return sc_error_set(SC_ERR_INVALID, "--lr-find starts from the model's initial "
                            "weights: not with --resume");
    return SC_OK;
}

/* ---- the test ---- */

/* One step: the batch's loss at the weights so far, then, when it is
 * finite, an update with lr. Dropout draws from a stream of the step. */
static sc_status find_step(host_trainer *t, const host_batch *b, int step, double lr, double *out)
{
    host_session *s = &t->s;
    uint64_t stream = sc_rng_mix(RNG_STREAM_LR_FIND, (uint64_t)step);
    sc_rng_init(sc_ctx_rng(s->ctx), t->state.seed, stream);
    sc_tensor_list inputs, targets, outputs;
    sc_tensor *loss;
    float value;
    SC_TRY(host_step_pipe_upload(t->pipe, b, &inputs, &targets));
    SC_TRY(host_session_forward(s, &inputs, &outputs));
    SC_TRY(host_session_criterion(s, &outputs, &targets, &loss));
    SC_TRY(host_step_pipe_consumed(t->pipe));
    SC_TRY(sc_tensor_item(loss, &value)); /* on a GPU, waits for the step */
    *out = value;
    if (!isfinite(value)) /* diverged: the test ends here */
        return SC_OK;
    SC_TRY(host_dist_backward(t->dist, s->ctx, loss, true));
    SC_TRY(sc_optim_step(t->opt, lr));
    sc_params_zero_grad(s->params);
    return SC_OK;
}

/* The steps of one pass over the train split; *going turns false when
 * the curve is done, or a signal asks to stop. */
static sc_status find_pass(host_trainer *t, host_lr_curve *c, bool *going)
{
    host_loader *loader = t->loaders[SC_SPLIT_TRAIN];
    for (int64_t i = 0; *going && i < t->steps_per_epoch; i++) {
        host_batch *b;
        SC_TRY(host_loader_next(loader, &b));
        if (!b)
            break;
        double loss = 0;
        sc_status st = find_step(t, b, c->n, host_lr_curve_lr(c, c->n), &loss);
        sc_ctx_reset(t->s.ctx);
        host_loader_release(loader, b);
        SC_TRY(st);
        *going = host_lr_curve_add(c, loss) && !host_signals_stop_requested();
    }
    return SC_OK;
}

static sc_status run_test(host_trainer *t, host_lr_curve *c)
{
    sc_ctx_set_training(t->s.ctx, true);
    sc_ctx_set_grad_enabled(t->s.ctx, true);
    bool going = true;
    for (int epoch = 1; going; epoch++) { /* as many passes as the steps take */
        SC_TRY(host_loader_start_epoch(t->loaders[SC_SPLIT_TRAIN], epoch, 0));
        sc_status st = find_pass(t, c, &going);
        host_loader_stop_epoch(t->loaders[SC_SPLIT_TRAIN]);
        SC_TRY(st);
    }
    return SC_OK;
}

sc_status host_lr_find(host_trainer *t, host_lr_curve *curve, bool *interrupted)
{
    if (host_dist_world(t->dist) > 1)
        return sc_error_set(SC_ERR_INVALID, "--lr-find runs in one process: not with %d "
                            "ranks", host_dist_world(t->dist));
    size_t bytes = (size_t)sc_params_numel(t->s.params) * sizeof(float);
    float *initial = malloc(bytes ? bytes : 1);
    if (!initial)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for a copy of the weights");
    sc_status st = sc_params_read(t->s.params, initial, NULL);
    if (st == SC_OK)
        st = run_test(t, curve);
    sc_status restored = sc_params_write(t->s.params, initial);
    free(initial);
    SC_TRY(st);
    SC_TRY(restored);
    /* The optimizer's state and step count as set-up left them: a new one. */
    sc_optim_free(t->opt);
    t->opt = NULL;
    SC_TRY(trainer_make_optimizer(t));
    *interrupted = host_signals_stop_requested();
    return SC_OK;
}

/* ---- the files and the report ---- */

static sc_status write_csv(const host_lr_curve *c, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return sc_error_set(SC_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    fprintf(f, "step,lr,loss,smoothed\n");
    for (int i = 0; i < c->n; i++)
        fprintf(f, "%d,%.9g,%.9g,%.9g\n", i + 1, c->points[i].lr, c->points[i].loss,
                c->points[i].smoothed);
    bool ok = !ferror(f);
    if (fclose(f) != 0 || !ok)
        return sc_error_set(SC_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    return SC_OK;
}

/* The smoothed loss against log10(lr), the suggestion as a marker. A
 * diverged last point, far above the rest, is left out of the chart (as
 * fastai's plot does). */
static sc_status write_png(const host_lr_curve *c, int suggested, const char *path)
{
    int n = c->diverged ? c->n - 1 : c->n;
    double *xy = malloc(sizeof(double) * (size_t)(2 * n + 2));
    if (!xy)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for %s", path);
    for (int i = 0; i < n; i++) {
        xy[i] = log10(c->points[i].lr);
        xy[n + i] = c->points[i].smoothed;
    }
    char label[64] = "no suggestion";
    if (suggested >= 0) {
        snprintf(label, sizeof label, "suggested lr %.3g", c->points[suggested].lr);
        xy[2 * n] = log10(c->points[suggested].lr);
        xy[2 * n + 1] = c->points[suggested].smoothed;
    }
    const host_plot_style styles[] = {{"smoothed loss", 0, HOST_PLOT_SOLID},
                                    {label, 3, HOST_PLOT_SOLID}};
    const host_plot_series series[] = {{0, xy, xy + n, n}, {1, xy + 2 * n, xy + 2 * n + 1, 1}};
    const host_plot_panel panel = {"smoothed loss", "log10(lr)", series, suggested >= 0 ? 2 : 1};
    const host_plot_figure fig = {"LR range test", styles, 2, &panel, 1, 900, 600};
    sc_status st = n > 0 ? host_plot_write_png(&fig, path) : SC_OK;
    free(xy);
    return st;
}

static void print_outcome(const host_lr_curve *c, int suggested, bool interrupted)
{
    const host_lr_find_point *last = &c->points[c->n - 1];
    if (c->diverged)
        printf("lr-find: the loss diverged at step %d of %d, lr %.3g (smoothed loss %.4g > "
               "%g x the best, %.4g): stopped\n", c->n, c->steps, last->lr, last->smoothed,
               HOST_LR_FIND_DIVERGED, c->best);
    else if (interrupted)
        printf("lr-find: stopped by a signal at step %d of %d, lr %.3g\n", c->n, c->steps,
               last->lr);
    if (suggested >= 0)
        printf("lr-find: suggested lr %.3g (the smoothed loss falls fastest there, step %d)\n",
               c->points[suggested].lr, suggested + 1);
    fflush(stdout);
}

/* Writes the files; an error when there is no suggestion. */
static sc_status report(host_trainer *t, const host_lr_curve *c, bool interrupted)
{
    char csv[HOST_PATH_MAX], png[HOST_PATH_MAX];
    host_run_dir_file(&t->rd, "lr_find.csv", csv, sizeof csv);
    host_run_dir_file(&t->rd, "lr_find.png", png, sizeof png);
    int suggested = c->n > 0 ? host_lr_curve_suggest(c) : -1;
    if (c->n > 0)
        print_outcome(c, suggested, interrupted);
    SC_TRY(write_csv(c, csv));
    SC_TRY(write_png(c, suggested, png));
    printf("lr-find: wrote %s and %s; the weights are untouched\n", csv, png);
    if (suggested >= 0)
        return SC_OK;
    return sc_error_set(SC_ERR_INVALID,
                        "--lr-find: no suggestion from %d step%s: the first %d and the last "
                        "%d are left out, and at least 2 must remain; give more "
                        "--lr-find-steps, or a lower --lr-find-range maximum if it diverged "
                        "early", c->n, c->n == 1 ? "" : "s", HOST_LR_FIND_SKIP_BEGIN,
                        HOST_LR_FIND_SKIP_END);
}

sc_status host_lr_find_run(const host_config *cfg)
{
    host_lr_curve curve = {0};
    double lo, hi;
    SC_TRY(host_config_lr_find_range(cfg->lr_find_range, &lo, &hi));
    SC_TRY(host_lr_curve_init(&curve, lo, hi, cfg->lr_find_steps));
    host_trainer *t = NULL;
    bool interrupted = false;
    sc_status st = host_trainer_new(cfg, NULL, &t);
    if (st == SC_OK) {
        host_run_log_info(&t->log, "lr-find: %d steps, lr %g to %g", curve.steps, lo, hi);
        st = host_lr_find(t, &curve, &interrupted);
    }
    if (st == SC_OK)
        st = report(t, &curve, interrupted);
    host_trainer_free(t);
    host_lr_curve_free(&curve);
    return st;
}
