#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "scorch/metrics.h"

/* ------------------------------------------------------------ accumulator */

Test(metrics, sums_numerators_and_denominators_then_divides_once)
{
    sc_metrics *m = sc_metrics_new();
    cr_assert_not_null(m);
    cr_assert_eq(sc_metrics_add(m, "accuracy", 3, 4), SC_OK);
    cr_assert_eq(sc_metrics_add(m, "loss", 2.5, 2), SC_OK);
    cr_assert_eq(sc_metrics_add(m, "accuracy", 1, 1), SC_OK);
    cr_assert_eq(sc_metrics_count(m), 2);
    int i = sc_metrics_find(m, "accuracy");
    cr_assert_eq(i, 0, "names keep their first-use order");
    cr_assert_str_eq(sc_metrics_name(m, i), "accuracy");
    cr_assert_float_eq(sc_metrics_numerator(m, i), 4.0, 0.0);
    cr_assert_float_eq(sc_metrics_denominator(m, i), 5.0, 0.0);
    cr_assert_float_eq(sc_metrics_value(m, i), 0.8, 1e-15, "not the mean of 0.75 and 1");
    cr_assert_eq(sc_metrics_find(m, "loss"), 1);
    cr_assert_eq(sc_metrics_find(m, "Loss"), -1);
    sc_metrics_free(m);
}

Test(metrics, zero_denominator_is_nan_and_reset_keeps_names)
{
    sc_metrics *m = sc_metrics_new();
    cr_assert_eq(sc_metrics_add(m, "empty", 0, 0), SC_OK);
    cr_assert(isnan(sc_metrics_value(m, 0)));
    cr_assert_eq(sc_metrics_add(m, "x", 5, 10), SC_OK);
    sc_metrics_reset(m);
    cr_assert_eq(sc_metrics_count(m), 2);
    cr_assert_str_eq(sc_metrics_name(m, 1), "x");
    cr_assert_float_eq(sc_metrics_numerator(m, 1), 0.0, 0.0);
    cr_assert(isnan(sc_metrics_value(m, 1)));
    sc_metrics_add(m, "x", 1, 2);
    cr_assert_float_eq(sc_metrics_value(m, 1), 0.5, 0.0);
    sc_metrics_free(m);
}

Test(metrics, names_are_validated)
{
    sc_metrics *m = sc_metrics_new();
    const char *bad[] = {"", "top-5", "has space", "caf\xc3\xa9", NULL};
    for (int i = 0; i < 5; i++)
        cr_assert_eq(sc_metrics_add(m, bad[i], 1, 1), SC_ERR_INVALID, "'%s' accepted",
                     bad[i] ? bad[i] : "(null)");
    char name[SC_METRIC_NAME_MAX + 1];
    memset(name, 'a', SC_METRIC_NAME_MAX - 1);
    name[SC_METRIC_NAME_MAX - 1] = '\0';
    cr_assert_eq(sc_metrics_add(m, name, 1, 1), SC_OK, "%d characters fit",
                 SC_METRIC_NAME_MAX - 1);
    name[SC_METRIC_NAME_MAX - 1] = 'a';
    name[SC_METRIC_NAME_MAX] = '\0';
    cr_assert_eq(sc_metrics_add(m, name, 1, 1), SC_ERR_INVALID);
    cr_assert_eq(sc_metrics_add(m, "Top_5_acc", 1, 1), SC_OK);
    cr_assert_eq(sc_metrics_count(m), 2);
    sc_metrics_free(m);
}

Test(metrics, at_most_max_metrics)
{
    sc_metrics *m = sc_metrics_new();
    char name[16];
    for (int i = 0; i < SC_METRICS_MAX; i++) {
        snprintf(name, sizeof name, "m%d", i);
        cr_assert_eq(sc_metrics_add(m, name, 1, 1), SC_OK);
    }
    cr_assert_eq(sc_metrics_add(m, "one_more", 1, 1), SC_ERR_INVALID);
    cr_assert(strstr(sc_error_message(), "one_more"));
    cr_assert_eq(sc_metrics_add(m, "m0", 1, 1), SC_OK, "existing names still add");
    cr_assert_float_eq(sc_metrics_denominator(m, 0), 2.0, 0.0);
    sc_metrics_free(m);
}

/* --------------------------------------------------------------- accuracy */

enum { N = 5, C = 5 };

/* Target row by row: ties and the earlier-index question are covered. */
static const float logits_data[N][C] = {
    {0.1f, 0.9f, 0.3f, 0.2f, 0.0f}, /* target 1: clear arg-max */
    {0.5f, 0.5f, 0.1f, 0.0f, 0.2f}, /* target 1: tied with class 0 (earlier) */
    {0.5f, 0.5f, 0.1f, 0.0f, 0.2f}, /* target 0: tied with class 1 (later) */
    {1.0f, 2.0f, 3.0f, 4.0f, 5.0f}, /* target 0: the smallest, rank 5 */
    {2.0f, 2.0f, 2.0f, 2.0f, 2.0f}, /* target 3: all tied */
};
static const int64_t targets[N] = {1, 1, 0, 0, 3};

typedef struct classifier {
    sc_tensor logits, target;
    union {
        int32_t i32[N];
        int64_t i64[N];
        uint8_t u8[N];
    } t;
} classifier;

static void make_classifier(classifier *k, sc_dtype target_dtype)
{
    const int64_t lshape[] = {N, C}, tshape[] = {N};
    cr_assert_eq(sc_tensor_init(&k->logits, SC_F32, 2, lshape), SC_OK);
    k->logits.data = (void *)logits_data;
    cr_assert_eq(sc_tensor_init(&k->target, target_dtype, 1, tshape), SC_OK);
    k->target.data = &k->t;
    for (int i = 0; i < N; i++) {
        if (target_dtype == SC_I32)
            k->t.i32[i] = (int32_t)targets[i];
        else if (target_dtype == SC_I64)
            k->t.i64[i] = targets[i];
        else
            k->t.u8[i] = (uint8_t)targets[i];
    }
}

/* Ties count against the target: it is in the top k when fewer than k other
 * classes have a logit >= its own. */
static void check_counts(sc_dtype target_dtype)
{
    classifier k;
    make_classifier(&k, target_dtype);
    cr_assert_eq(sc_correct_top1(&k.logits, &k.target), 1, "only row 0 is a clean arg-max");
    cr_assert_eq(sc_correct_topk(&k.logits, &k.target, 1), 1);
    cr_assert_eq(sc_correct_topk(&k.logits, &k.target, 2), 3, "rows 0-2; tied pairs fit in 2");
    cr_assert_eq(sc_correct_topk(&k.logits, &k.target, 4), 3, "row 3 ranks 5th, row 4 ties 5");
    cr_assert_eq(sc_correct_topk(&k.logits, &k.target, 5), 5);
    cr_assert_eq(sc_correct_topk(&k.logits, &k.target, 50), 5, "k above C takes every class");
}

Test(metrics, topk_counts_i64_targets) { check_counts(SC_I64); }

Test(metrics, topk_counts_i32_targets) { check_counts(SC_I32); }

Test(metrics, topk_counts_u8_targets) { check_counts(SC_U8); }

/* A NaN logit counts against the target: as the target's own (every other
 * class ranks above it) or as another class's (it ranks above the target). */
Test(metrics, nan_logits_count_against_the_target)
{
    static const float x[2][3] = {{NAN, 0.0f, 1.0f}, {0.0f, NAN, 1.0f}};
    static const int64_t t[2] = {0, 2};
    const int64_t ls[] = {2, 3}, ts[] = {2};
    sc_tensor logits, target;
    sc_tensor_init(&logits, SC_F32, 2, ls);
    sc_tensor_init(&target, SC_I64, 1, ts);
    logits.data = (void *)x;
    target.data = (void *)t;
    cr_assert_eq(sc_correct_topk(&logits, &target, 1), 0);
    cr_assert_eq(sc_correct_topk(&logits, &target, 2), 1, "row 1 only");
    cr_assert_eq(sc_correct_topk(&logits, &target, 3), 2);
}

Test(metrics, add_classification_adds_accuracy_and_top5_beyond_5_classes)
{
    /* Row 0's target ranks 6th of 6, row 1's 5th. */
    static const float x[2][6] = {{6, 5, 4, 3, 2, 1}, {6, 5, 4, 3, 2, 1}};
    static const int64_t t[2] = {5, 4};
    const int64_t ls[] = {2, 6}, ts[] = {2};
    sc_tensor logits, target;
    sc_tensor_init(&logits, SC_F32, 2, ls);
    sc_tensor_init(&target, SC_I64, 1, ts);
    logits.data = (void *)x;
    target.data = (void *)t;
    sc_metrics *m = sc_metrics_new();
    cr_assert_eq(sc_metrics_add_classification(m, &logits, &target), SC_OK);
    cr_assert_eq(sc_metrics_add_classification(m, &logits, &target), SC_OK);
    int a = sc_metrics_find(m, "accuracy"), t5 = sc_metrics_find(m, "top5_accuracy");
    cr_assert(a >= 0 && t5 >= 0);
    cr_assert_float_eq(sc_metrics_numerator(m, a), 0.0, 0.0);
    cr_assert_float_eq(sc_metrics_denominator(m, a), 4.0, 0.0);
    cr_assert_float_eq(sc_metrics_value(m, t5), 0.5, 0.0);
    sc_metrics_free(m);
}

/* With 5 classes or fewer the top 5 holds every target: always 1, so
 * top5_accuracy is not reported. */
Test(metrics, top5_is_left_out_for_5_classes_or_fewer)
{
    classifier k;
    make_classifier(&k, SC_I64); /* C = 5 */
    sc_metrics *m = sc_metrics_new();
    cr_assert_eq(sc_metrics_add_classification(m, &k.logits, &k.target), SC_OK);
    cr_expect_eq(sc_metrics_find(m, "top5_accuracy"), -1);
    cr_expect_float_eq(sc_metrics_value(m, sc_metrics_find(m, "accuracy")), 0.2, 1e-12);

    static const float x[2][3] = {{3.0f, 2.0f, 1.0f}, {1.0f, 2.0f, 3.0f}};
    static const uint8_t t[2] = {2, 2};
    const int64_t ls[] = {2, 3}, ts[] = {2};
    sc_tensor logits, target;
    sc_tensor_init(&logits, SC_F32, 2, ls);
    sc_tensor_init(&target, SC_U8, 1, ts);
    logits.data = (void *)x;
    target.data = (void *)t;
    sc_metrics_reset(m);
    cr_assert_eq(sc_metrics_add_classification(m, &logits, &target), SC_OK);
    cr_expect_float_eq(sc_metrics_value(m, sc_metrics_find(m, "accuracy")), 0.5, 0.0);
    cr_expect_eq(sc_metrics_find(m, "top5_accuracy"), -1);
    sc_metrics_free(m);
}

Test(metrics, bad_inputs_are_refused)
{
    classifier k;
    make_classifier(&k, SC_I64);
    k.t.i64[2] = C; /* out of range */
    cr_assert_eq(sc_correct_top1(&k.logits, &k.target), -1);
    cr_assert(strstr(sc_error_message(), "sample 2"), "%s", sc_error_message());
    k.t.i64[2] = -1;
    cr_assert_eq(sc_correct_top1(&k.logits, &k.target), -1);
    k.t.i64[2] = 0;
    cr_assert_eq(sc_correct_topk(&k.logits, &k.target, 0), -1);
    sc_metrics *m = sc_metrics_new();
    k.target.dtype = SC_F32;
    cr_assert_eq(sc_metrics_add_classification(m, &k.logits, &k.target), SC_ERR_INVALID);
    cr_assert(strstr(sc_error_message(), "integer targets"), "%s", sc_error_message());
    cr_assert_eq(sc_metrics_count(m), 0, "nothing added on failure");
    k.target.dtype = SC_I64;
    k.target.shape[0] = N - 1;
    cr_assert_eq(sc_correct_top1(&k.logits, &k.target), -1, "N disagrees");
    sc_metrics_free(m);
}
