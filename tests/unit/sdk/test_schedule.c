#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "scorch/schedule.h"

static sc_schedule make(sc_schedule_config c, int64_t steps_per_epoch, int64_t total)
{
    sc_schedule s;
    cr_assert_eq(sc_schedule_init(&s, &c, steps_per_epoch, total), SC_OK, "%s",
                 sc_error_message());
    return s;
}

static void assert_lr(const sc_schedule *s, double base, int64_t step, double want)
{
    double got = sc_schedule_lr(s, base, step);
    cr_assert_float_eq(got, want, 1e-12, "step %lld: lr %.15g, want %.15g", (long long)step,
                       got, want);
}

Test(schedule, constant_with_warmup_ramps_as_step_plus_one_over_warmup)
{
    sc_schedule_config c = sc_schedule_defaults(SC_SCHEDULE_CONSTANT);
    c.warmup_steps = 4;
    sc_schedule s = make(c, 10, 100);
    assert_lr(&s, 0.1, 0, 0.025);
    assert_lr(&s, 0.1, 1, 0.05);
    assert_lr(&s, 0.1, 3, 0.1);
    assert_lr(&s, 0.1, 4, 0.1);
    assert_lr(&s, 0.1, 1000, 0.1);
}

Test(schedule, step_decays_at_epoch_boundaries)
{
    sc_schedule_config c = sc_schedule_defaults(SC_SCHEDULE_STEP);
    c.step_epochs = 2;
    c.gamma = 0.5;
    sc_schedule s = make(c, 10, 100);
    assert_lr(&s, 0.1, 0, 0.1);
    assert_lr(&s, 0.1, 19, 0.1);   /* last step of epoch 1 */
    assert_lr(&s, 0.1, 20, 0.05);  /* first of epoch 2 */
    assert_lr(&s, 0.1, 39, 0.05);
    assert_lr(&s, 0.1, 40, 0.025);
}

Test(schedule, step_warmup_scales_the_epoch_lr)
{
    sc_schedule_config c = sc_schedule_defaults(SC_SCHEDULE_STEP);
    c.step_epochs = 1;
    c.gamma = 0.5;
    c.warmup_steps = 20;
    sc_schedule s = make(c, 10, 100);
    assert_lr(&s, 1.0, 9, 0.5);         /* epoch 0: 1.0 * 10/20 */
    assert_lr(&s, 1.0, 10, 0.5 * 0.55); /* epoch 1: 0.5 * 11/20 */
    assert_lr(&s, 1.0, 20, 0.25);
}

Test(schedule, cosine_endpoints_and_midpoint)
{
    sc_schedule_config c = sc_schedule_defaults(SC_SCHEDULE_COSINE);
    c.warmup_steps = 10;
    c.min_lr = 0.1;
    sc_schedule s = make(c, 10, 110);
    assert_lr(&s, 1.0, 0, 0.1);   /* warmup: 1/10 of base */
    assert_lr(&s, 1.0, 4, 0.5);
    assert_lr(&s, 1.0, 9, 1.0);
    assert_lr(&s, 1.0, 10, 1.0);  /* cosine starts at base */
    assert_lr(&s, 1.0, 35, 0.1 + 0.45 * (1.0 + cos(3.14159265358979323846 / 4)));
    assert_lr(&s, 1.0, 60, 0.55); /* midpoint: halfway between base and min */
    assert_lr(&s, 1.0, 110, 0.1); /* end: min_lr */
    assert_lr(&s, 1.0, 500, 0.1); /* and it stays there */
    cr_assert_gt(sc_schedule_lr(&s, 1.0, 109), 0.1);
}

Test(schedule, cosine_without_warmup_starts_at_base)
{
    sc_schedule s = make(sc_schedule_defaults(SC_SCHEDULE_COSINE), 5, 100);
    assert_lr(&s, 0.2, 0, 0.2);
    assert_lr(&s, 0.2, 50, 0.1);
    assert_lr(&s, 0.2, 100, 0.0);
}

static sc_schedule plateau(sc_metric_mode mode, int patience, double threshold)
{
    sc_schedule_config c = sc_schedule_defaults(SC_SCHEDULE_PLATEAU);
    c.mode = mode;
    c.patience = patience;
    c.threshold = threshold;
    c.factor = 0.5;
    return make(c, 10, 100);
}

Test(schedule, plateau_reduces_after_more_than_patience_bad_epochs)
{
    sc_schedule s = plateau(SC_METRIC_MIN, 2, 0.1);
    sc_schedule_observe(&s, 1.0);  /* best */
    sc_schedule_observe(&s, 0.95); /* not below 1.0 * (1 - 0.1): bad 1 */
    sc_schedule_observe(&s, 0.92); /* bad 2 = patience: no cut yet */
    assert_lr(&s, 0.1, 30, 0.1);
    sc_schedule_observe(&s, 0.91); /* bad 3 > patience: cut, counter reset */
    assert_lr(&s, 0.1, 40, 0.05);
    cr_assert_eq(s.plateau_bad_epochs, 0);
    sc_schedule_observe(&s, 0.5);  /* improves */
    cr_assert_float_eq(s.plateau_best, 0.5, 0.0);
    sc_schedule_observe(&s, 0.5);
    sc_schedule_observe(&s, 0.5);
    assert_lr(&s, 0.1, 70, 0.05);
    sc_schedule_observe(&s, 0.5);
    assert_lr(&s, 0.1, 80, 0.025);
}

Test(schedule, plateau_max_mode_and_nan)
{
    sc_schedule s = plateau(SC_METRIC_MAX, 0, 1e-4);
    sc_schedule_observe(&s, 0.5);
    sc_schedule_observe(&s, 0.6); /* rises: good */
    assert_lr(&s, 1.0, 0, 1.0);
    sc_schedule_observe(&s, 0.60001); /* below 0.6 * (1 + 1e-4): bad, patience 0 */
    assert_lr(&s, 1.0, 0, 0.5);
    sc_schedule_observe(&s, NAN); /* NaN never improves */
    assert_lr(&s, 1.0, 0, 0.25);
    cr_assert_float_eq(s.plateau_best, 0.6, 0.0);
}

Test(schedule, plateau_state_is_a_plain_value)
{
    sc_schedule a = plateau(SC_METRIC_MIN, 1, 0.0);
    sc_schedule_observe(&a, 2.0);
    sc_schedule_observe(&a, 3.0);
    sc_schedule b = a; /* what a checkpoint saves and restores */
    sc_schedule_observe(&a, 3.0);
    sc_schedule_observe(&b, 3.0);
    cr_assert_float_eq(sc_schedule_lr(&a, 1.0, 0), 0.5, 0.0);
    cr_assert_float_eq(sc_schedule_lr(&b, 1.0, 0), sc_schedule_lr(&a, 1.0, 0), 0.0);
}

Test(schedule, observe_leaves_other_kinds_alone)
{
    sc_schedule s = make(sc_schedule_defaults(SC_SCHEDULE_CONSTANT), 1, 10);
    for (int i = 0; i < 50; i++)
        sc_schedule_observe(&s, 1.0);
    assert_lr(&s, 0.3, 5, 0.3);
}

static void assert_init_refused(sc_schedule_config c, int64_t spe, int64_t total,
                                const char *fragment)
{
    sc_schedule s;
    sc_error_clear();
    cr_assert_eq(sc_schedule_init(&s, &c, spe, total), SC_ERR_INVALID);
    cr_assert(strstr(sc_error_message(), fragment), "message '%s' lacks '%s'",
              sc_error_message(), fragment);
}

Test(schedule, invalid_configs_refused)
{
    sc_schedule_config c = sc_schedule_defaults(SC_SCHEDULE_CONSTANT);
    assert_init_refused(c, 0, 10, "steps per epoch");
    c.warmup_steps = -1;
    assert_init_refused(c, 1, 10, "warmup");
    c = sc_schedule_defaults(SC_SCHEDULE_STEP);
    c.step_epochs = 0;
    assert_init_refused(c, 1, 10, "step_epochs");
    c = sc_schedule_defaults(SC_SCHEDULE_STEP);
    c.gamma = 0.0;
    assert_init_refused(c, 1, 10, "gamma");
    assert_init_refused(sc_schedule_defaults(SC_SCHEDULE_COSINE), 1, 0, "total steps");
    c = sc_schedule_defaults(SC_SCHEDULE_PLATEAU);
    c.factor = 1.0;
    assert_init_refused(c, 1, 10, "factor");
    c.factor = NAN;
    assert_init_refused(c, 1, 10, "factor");
    c = sc_schedule_defaults(SC_SCHEDULE_PLATEAU);
    c.patience = -1;
    assert_init_refused(c, 1, 10, "patience");
    c = sc_schedule_defaults(SC_SCHEDULE_PLATEAU);
    c.threshold = -0.1;
    assert_init_refused(c, 1, 10, "threshold");
}

Test(schedule, defaults_and_names)
{
    sc_schedule_config c = sc_schedule_defaults(SC_SCHEDULE_PLATEAU);
    cr_assert_eq(c.patience, 10);
    cr_assert_eq(c.step_epochs, 30);
    cr_assert_float_eq(c.factor, 0.1, 0.0);
    cr_assert_float_eq(c.threshold, 1e-4, 0.0);
    cr_assert_eq(c.warmup_steps, 0);
    sc_schedule_kind k;
    for (int i = SC_SCHEDULE_CONSTANT; i <= SC_SCHEDULE_PLATEAU; i++) {
        cr_assert_eq(sc_schedule_kind_parse(sc_schedule_kind_name((sc_schedule_kind)i), &k),
                     SC_OK);
        cr_assert_eq(k, (sc_schedule_kind)i);
    }
    cr_assert_eq(sc_schedule_kind_parse("cosin", &k), SC_ERR_INVALID);
    cr_assert(strstr(sc_error_message(), "'cosin'"));
}
