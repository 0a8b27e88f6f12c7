/* scorch/schedule.h — learning-rate schedules.
 *
 * A schedule maps (base lr, optimizer step) to the step's lr; the
 * plateau schedule also observes the validation metric once per epoch.
 * sc_schedule is a plain value: its fields are its whole state, which a
 * checkpoint saves and restores.
 */
#ifndef SCORCH_SCHEDULE_H
#define SCORCH_SCHEDULE_H

#include <stdint.h>

#include "scorch/export.h"
#include "scorch/plugin.h"
#include "scorch/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sc_schedule_kind {
    SC_SCHEDULE_CONSTANT, /* base lr throughout */
    SC_SCHEDULE_STEP,     /* base * gamma^floor(epoch / step_epochs) */
    SC_SCHEDULE_COSINE,   /* linear warmup, then cosine down to min_lr */
    SC_SCHEDULE_PLATEAU,  /* times factor after `patience` epochs w/o improvement */
} sc_schedule_kind;

typedef struct sc_schedule_config {
    sc_schedule_kind kind;
    int64_t warmup_steps;  /* all kinds: linear ramp from 0 over these steps */
    int step_epochs;       /* step */
    double gamma;          /* step */
    double min_lr;         /* cosine: final lr */
    double factor;         /* plateau: multiplier, in (0, 1) */
    int patience;          /* plateau: epochs without improvement */
    double threshold;      /* plateau: relative improvement that counts */
    sc_metric_mode mode;   /* plateau: whether the metric should rise or fall */
} sc_schedule_config;

typedef struct sc_schedule {
    sc_schedule_config config;
    int64_t steps_per_epoch;
    int64_t total_steps;
    double plateau_scale;  /* product of the reductions so far */
    double plateau_best;
    int plateau_bad_epochs;
} sc_schedule;

/* PyTorch-like defaults: step_epochs 30, gamma 0.1, factor 0.1,
 * patience 10, threshold 1e-4, min_lr 0, no warmup. */
SC_API sc_schedule_config sc_schedule_defaults(sc_schedule_kind kind);

/* "constant", "step", "cosine", "plateau" <-> kind. */
SC_API sc_status sc_schedule_kind_parse(const char *name, sc_schedule_kind *out);
SC_API const char *sc_schedule_kind_name(sc_schedule_kind kind);

SC_API sc_status sc_schedule_init(sc_schedule *s, const sc_schedule_config *config,
                                  int64_t steps_per_epoch, int64_t total_steps);

/* The lr for optimizer step `step` (0-based). */
SC_API double sc_schedule_lr(const sc_schedule *s, double base_lr, int64_t step);

/* End of an epoch: the plateau schedule records the monitored metric. */
SC_API void sc_schedule_observe(sc_schedule *s, double metric);

#ifdef __cplusplus
}
#endif
#endif
