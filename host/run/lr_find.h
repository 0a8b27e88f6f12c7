/* lr_find.h — the learning-rate range test (scorch-train --lr-find), as
 * fastai's LRFinder and Lightning's Tuner.lr_find run it.
 *
 * From the model's initial weights, step i of n trains one batch with
 * lr_i = min * (max / min)^(i / (n - 1)), an exponential ramp; the batch's
 * loss (before its update) is smoothed with an exponential moving average
 * (beta 0.98) and fastai's bias correction, avg_i / (1 - beta^(i + 1)).
 * The test stops early when the smoothed loss exceeds 4 times the best
 * so far, or the loss is not finite: it diverged. The suggestion is
 * Lightning's: the lr where the smoothed loss falls fastest (the most
 * negative gradient with respect to log10(lr)), leaving out the first 10
 * points and the last. RUN/lr_find.csv and RUN/lr_find.png hold the curve.
 * Afterwards the weights and the optimizer are as set-up made them; no
 * checkpoint, config.ini or metrics.jsonl is written.
 */
#ifndef SCORCH_HOST_LR_FIND_H
#define SCORCH_HOST_LR_FIND_H

#include <stdbool.h>

#include "base/config.h"
#include "run/trainer.h"

#define HOST_LR_FIND_BETA 0.98    /* the smoothing's weight of the past */
#define HOST_LR_FIND_DIVERGED 4.0 /* smoothed loss / best smoothed loss that stops it */
enum {
    HOST_LR_FIND_SKIP_BEGIN = 10, /* points the suggestion leaves out, at the start */
    HOST_LR_FIND_SKIP_END = 1,    /* and at the end */
};

typedef struct host_lr_find_point {
    double lr, loss, smoothed;
} host_lr_find_point;

/* The curve so far; zero it, then give it room for `steps` points with
 * host_lr_curve_init. */
typedef struct host_lr_curve {
    double min_lr, max_lr;
    int steps;               /* of the whole ramp */
    host_lr_find_point *points;
    int n;
    double avg;              /* the moving average before bias correction */
    double best;             /* the lowest smoothed loss so far */
    bool diverged;           /* the last point stopped the test */
} host_lr_curve;

sc_status host_lr_curve_init(host_lr_curve *c, double min_lr, double max_lr, int steps);
void host_lr_curve_free(host_lr_curve *c);

/* The ramp's lr at step i (0-based) of c->steps. */
double host_lr_curve_lr(const host_lr_curve *c, int i);

/* Adds the loss of the next step, taken at host_lr_curve_lr(c, c->n);
 * returns whether the test goes on: false once the ramp is done or the
 * loss diverged (then c->diverged). */
bool host_lr_curve_add(host_lr_curve *c, double loss);

/* The index of the suggested point, or -1 when fewer than 2 points are
 * left after leaving out the first and the last. */
int host_lr_curve_suggest(const host_lr_curve *c);

/* Refuses --lr-find-range or --lr-find-steps without --lr-find, and
 * --lr-find with --resume (the test starts from initial weights). */
sc_status host_lr_find_check_config(const host_config *cfg);

/* Runs the test on a trainer set up for it (cfg.lr_find), into curve
 * (initialised by the caller); restores the weights and the optimizer
 * after. *interrupted: a signal stopped it early. */
sc_status host_lr_find(host_trainer *t, host_lr_curve *curve, bool *interrupted);

/* scorch-train --lr-find: sets up, runs the test, writes RUN/lr_find.csv
 * and RUN/lr_find.png and prints the suggestion. An error when no
 * suggestion can be made (the files are written all the same). */
sc_status host_lr_find_run(const host_config *cfg);

#endif
