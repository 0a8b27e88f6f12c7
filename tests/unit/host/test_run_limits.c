/* Unit tests of --max-time's durations (duration.h) and the LR range
 * test's curve (lr_find.h): the ramp, fastai's smoothing with bias
 * correction, the stop on divergence and Lightning's suggestion. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "base/duration.h"
#include "run/lr_find.h"

static double seconds_of(const char *text)
{
    double s = -1;
    cr_assert_eq(host_duration_parse(text, &s), SC_OK, "%s: %s", text, sc_error_message());
    return s;
}

Test(duration, accepts_units_and_plain_seconds)
{
    cr_expect_eq(seconds_of("2h30m"), 9000);
    cr_expect_eq(seconds_of("90m"), 5400);
    cr_expect_eq(seconds_of("45s"), 45);
    cr_expect_eq(seconds_of("1h"), 3600);
    cr_expect_eq(seconds_of("1d12h"), 129600);
    cr_expect_eq(seconds_of("1.5h"), 5400);
    cr_expect_eq(seconds_of("5400"), 5400);
    cr_expect_eq(seconds_of("0.25"), 0.25);
    cr_expect_eq(seconds_of("0"), 0);
}

Test(duration, refuses_what_is_no_duration)
{
    const char *bad[] = {"", "h", "2x", "2h30", "30m2h", "1h1h", "-5", "1e3", "1..5s", "2 h",
                         "1h-5m"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        double s;
        cr_expect_eq(host_duration_parse(bad[i], &s), SC_ERR_INVALID, "'%s' accepted", bad[i]);
        cr_expect(strstr(sc_error_message(), "is not a duration"), "%s", sc_error_message());
    }
}

Test(lr_find, range_parses_min_below_max)
{
    double lo, hi;
    cr_assert_eq(host_config_lr_find_range("1e-7:10", &lo, &hi), SC_OK);
    cr_expect_eq(lo, 1e-7);
    cr_expect_eq(hi, 10);
    const char *bad[] = {"1e-7", "10:1e-7", "0:1", "1:1", "a:b", "1e-7:10:3", "1e-7:inf"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_expect_eq(host_config_lr_find_range(bad[i], &lo, &hi), SC_ERR_INVALID, "'%s'", bad[i]);
}

Test(lr_find, ramp_is_exponential_from_min_to_max)
{
    host_lr_curve c;
    cr_assert_eq(host_lr_curve_init(&c, 1e-6, 1, 7), SC_OK);
    for (int i = 0; i < 7; i++)
        cr_expect_float_eq(host_lr_curve_lr(&c, i), pow(10, -6 + i), 1e-12 * pow(10, -6 + i));
    host_lr_curve_free(&c);
}

/* fastai: avg = 0.98 avg + 0.02 loss; smoothed = avg / (1 - 0.98^count). */
Test(lr_find, smoothing_is_bias_corrected)
{
    host_lr_curve c;
    cr_assert_eq(host_lr_curve_init(&c, 1e-3, 1, 10), SC_OK);
    const double losses[] = {2.0, 1.0, 3.0};
    double avg = 0;
    for (int i = 0; i < 3; i++) {
        cr_assert(host_lr_curve_add(&c, losses[i]));
        avg = 0.98 * avg + 0.02 * losses[i];
        cr_expect_float_eq(c.points[i].smoothed, avg / (1 - pow(0.98, i + 1)), 1e-12);
        cr_expect_eq(c.points[i].loss, losses[i]);
    }
    cr_expect_float_eq(c.points[0].smoothed, 2.0, 1e-12); /* the first is the loss itself */
    host_lr_curve_free(&c);
}

Test(lr_find, stops_when_the_smoothed_loss_passes_4x_the_best)
{
    host_lr_curve c;
    cr_assert_eq(host_lr_curve_init(&c, 1e-3, 1, 100), SC_OK);
    for (int i = 0; i < 20; i++)
        cr_assert(host_lr_curve_add(&c, 1.0));
    int n = 20;
    while (host_lr_curve_add(&c, 1000.0)) /* the smoothed loss climbs past 4 */
        n++;
    cr_expect(c.diverged);
    cr_expect_gt(c.points[c.n - 1].smoothed, 4.0 * c.best);
    cr_expect_leq(c.points[c.n - 2].smoothed, 4.0 * c.best);
    cr_expect_lt(c.n, 100);
    host_lr_curve_free(&c);

    cr_assert_eq(host_lr_curve_init(&c, 1e-3, 1, 100), SC_OK);
    cr_assert(host_lr_curve_add(&c, 1.0));
    cr_expect_not(host_lr_curve_add(&c, NAN), "a NaN loss goes on");
    cr_expect(c.diverged);
    host_lr_curve_free(&c);
}

Test(lr_find, ends_after_the_ramp)
{
    host_lr_curve c;
    cr_assert_eq(host_lr_curve_init(&c, 1e-3, 1, 3), SC_OK);
    cr_expect(host_lr_curve_add(&c, 1.0));
    cr_expect(host_lr_curve_add(&c, 1.0));
    cr_expect_not(host_lr_curve_add(&c, 1.0));
    cr_expect_not(c.diverged);
    host_lr_curve_free(&c);
}

/* Lightning: argmin of torch.gradient(smoothed[10:-1]) + 10. A curve with
 * its steepest drop between points 30 and 31 of 50 (after smoothing the
 * drop is spread out, yet steepest where the raw loss falls). */
Test(lr_find, suggests_the_steepest_descent)
{
    host_lr_curve c;
    cr_assert_eq(host_lr_curve_init(&c, 1e-6, 1, 50), SC_OK);
    for (int i = 0; i < 50; i++) /* a falling logistic, steepest at i = 30.5 */
        host_lr_curve_add(&c, 3.0 - 2.0 / (1 + exp(-(i - 30.5))));
    /* the expected index, by the same central differences on the smoothed
     * points, computed independently here */
    int want = -1;
    double steepest = INFINITY;
    for (int i = 10; i < 49; i++) {
        int lo = i > 10 ? i - 1 : i, hi = i + 1 < 49 ? i + 1 : i;
        double g = (c.points[hi].smoothed - c.points[lo].smoothed) /
                   (log10(c.points[hi].lr) - log10(c.points[lo].lr));
        if (g < steepest) {
            steepest = g;
            want = i;
        }
    }
    cr_expect_eq(host_lr_curve_suggest(&c), want);
    cr_expect_gt(want, 30, "the smoothed curve lags the raw one");
    cr_expect_lt(want, 45);
    host_lr_curve_free(&c);
}

Test(lr_find, no_suggestion_from_too_few_points)
{
    host_lr_curve c;
    cr_assert_eq(host_lr_curve_init(&c, 1e-6, 1, 12), SC_OK);
    for (int i = 0; i < 12; i++)
        host_lr_curve_add(&c, 1.0);
    cr_expect_eq(host_lr_curve_suggest(&c), -1, "12 points leave 1 after 10 and 1");
    host_lr_curve_free(&c);
    cr_assert_eq(host_lr_curve_init(&c, 1e-6, 1, 13), SC_OK);
    for (int i = 0; i < 13; i++)
        host_lr_curve_add(&c, 2.0 - i * 0.01);
    cr_expect_eq(host_lr_curve_suggest(&c), 10);
    host_lr_curve_free(&c);
}
