#include "scorch/schedule.h"

#include <math.h>
#include <string.h>

sc_schedule_config sc_schedule_defaults(sc_schedule_kind kind)
{
    return (sc_schedule_config){
        .kind = kind,
        .warmup_steps = 0,
        .step_epochs = 30,
        .gamma = 0.1,
        .min_lr = 0.0,
        .factor = 0.1,
        .patience = 10,
        .threshold = 1e-4,
        .mode = SC_METRIC_MIN,
    };
}

static const char *const kind_names[] = {
    [SC_SCHEDULE_CONSTANT] = "constant",
    [SC_SCHEDULE_STEP] = "step",
    [SC_SCHEDULE_COSINE] = "cosine",
    [SC_SCHEDULE_PLATEAU] = "plateau",
};

enum { KIND_COUNT = sizeof kind_names / sizeof *kind_names };

sc_status sc_schedule_kind_parse(const char *name, sc_schedule_kind *out)
{
    for (int k = 0; k < KIND_COUNT; k++) {
        if (strcmp(name, kind_names[k]) == 0) {
            *out = (sc_schedule_kind)k;
            return SC_OK;
        }
    }
    return sc_error_set(SC_ERR_INVALID,
                        "unknown lr schedule '%s' (known: constant, step, cosine, plateau)",
                        name);
}

const char *sc_schedule_kind_name(sc_schedule_kind kind)
{
    return (unsigned)kind < KIND_COUNT ? kind_names[kind] : "?";
}

/* The fields a kind reads; the others are not its business. `!(x > 0)`
 * rather than `x <= 0` so that NaN is refused too. */
static sc_status check_kind_fields(const sc_schedule_config *c, int64_t total_steps)
{
    switch (c->kind) {
    case SC_SCHEDULE_CONSTANT:
        return SC_OK;
    case SC_SCHEDULE_STEP:
        if (c->step_epochs < 1)
            return sc_error_set(SC_ERR_INVALID, "step schedule: step_epochs %d must be >= 1",
                                c->step_epochs);
        if (!(c->gamma > 0.0) || isinf(c->gamma))
            return sc_error_set(SC_ERR_INVALID, "step schedule: gamma %g must be > 0",
                                c->gamma);
        return SC_OK;
    case SC_SCHEDULE_COSINE:
        if (total_steps < 1)
            return sc_error_set(SC_ERR_INVALID, "cosine schedule: needs total steps >= 1, got %lld",
                                (long long)total_steps);
        if (!(c->min_lr >= 0.0) || isinf(c->min_lr))
            return sc_error_set(SC_ERR_INVALID, "cosine schedule: min_lr %g must be >= 0",
                                c->min_lr);
        return SC_OK;
    case SC_SCHEDULE_PLATEAU:
        if (!(c->factor > 0.0 && c->factor < 1.0))
            return sc_error_set(SC_ERR_INVALID, "plateau schedule: factor %g must lie in (0, 1)",
                                c->factor);
        if (c->patience < 0)
            return sc_error_set(SC_ERR_INVALID, "plateau schedule: patience %d must be >= 0",
                                c->patience);
        if (!(c->threshold >= 0.0) || isinf(c->threshold))
            return sc_error_set(SC_ERR_INVALID, "plateau schedule: threshold %g must be >= 0",
                                c->threshold);
        if (c->mode != SC_METRIC_MIN && c->mode != SC_METRIC_MAX)
            return sc_error_set(SC_ERR_INVALID, "plateau schedule: unknown mode %d",
                                (int)c->mode);
        return SC_OK;
    }
    return sc_error_set(SC_ERR_INVALID, "lr schedule: unknown kind %d", (int)c->kind);
}

sc_status sc_schedule_init(sc_schedule *s, const sc_schedule_config *config,
                           int64_t steps_per_epoch, int64_t total_steps)
{
    if (steps_per_epoch < 1)
        return sc_error_set(SC_ERR_INVALID, "lr schedule: steps per epoch %lld must be >= 1",
                            (long long)steps_per_epoch);
    if (config->warmup_steps < 0)
        return sc_error_set(SC_ERR_INVALID, "lr schedule: warmup steps %lld must be >= 0",
                            (long long)config->warmup_steps);
    SC_TRY(check_kind_fields(config, total_steps));
    *s = (sc_schedule){
        .config = *config,
        .steps_per_epoch = steps_per_epoch,
        .total_steps = total_steps,
        .plateau_scale = 1.0,
        .plateau_best = config->mode == SC_METRIC_MIN ? INFINITY : -INFINITY,
        .plateau_bad_epochs = 0,
    };
    return SC_OK;
}

/* Cosine from base at the end of warmup to min_lr at total_steps (and
 * after); the base itself when no step is left after warmup. */
static double cosine_lr(const sc_schedule *s, double base_lr, int64_t step)
{
    int64_t span = s->total_steps - s->config.warmup_steps;
    if (span <= 0)
        return base_lr;
    double t = (double)(step - s->config.warmup_steps) / (double)span;
    t = t < 0.0 ? 0.0 : t > 1.0 ? 1.0 : t;
    const double pi = 3.14159265358979323846; /* M_PI is not ISO C */
    double min_lr = s->config.min_lr;
    return min_lr + (base_lr - min_lr) * 0.5 * (1.0 + cos(pi * t));
}

/* The kind's lr before warmup scales it. */
static double kind_lr(const sc_schedule *s, double base_lr, int64_t step)
{
    switch (s->config.kind) {
    case SC_SCHEDULE_STEP: {
        int64_t epoch = step / s->steps_per_epoch;
        return base_lr * pow(s->config.gamma, (double)(epoch / s->config.step_epochs));
    }
    case SC_SCHEDULE_COSINE:
        return cosine_lr(s, base_lr, step);
    case SC_SCHEDULE_PLATEAU:
        return base_lr * s->plateau_scale;
    case SC_SCHEDULE_CONSTANT:
        break;
    }
    return base_lr;
}

double sc_schedule_lr(const sc_schedule *s, double base_lr, int64_t step)
{
    double lr = kind_lr(s, base_lr, step);
    int64_t warmup = s->config.warmup_steps;
    if (step < warmup)
        lr *= (double)(step + 1) / (double)warmup;
    return lr;
}

/* ReduceLROnPlateau's relative threshold: an improvement counts only when it
 * beats the best by more than `threshold` of it. NaN never improves. */
static bool plateau_improves(const sc_schedule *s, double metric)
{
    double thr = s->config.threshold;
    if (s->config.mode == SC_METRIC_MIN)
        return metric < s->plateau_best * (1.0 - thr);
    return metric > s->plateau_best * (1.0 + thr);
}

void sc_schedule_observe(sc_schedule *s, double metric)
{
    if (s->config.kind != SC_SCHEDULE_PLATEAU)
        return;
    if (plateau_improves(s, metric)) {
        s->plateau_best = metric;
        s->plateau_bad_epochs = 0;
    } else {
        s->plateau_bad_epochs++;
    }
    if (s->plateau_bad_epochs > s->config.patience) {
        s->plateau_scale *= s->config.factor;
        s->plateau_bad_epochs = 0;
    }
}
