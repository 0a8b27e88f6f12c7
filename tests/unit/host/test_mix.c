/* Soft targets in the SDK's cross-entropy and accuracy, and the host's
 * Mixup and CutMix (host/run/mix.h): finite-difference gradients, values
 * against the index path, PyTorch and timm as oracles
 * (tests/unit/host/mix_oracle.py), the Beta sampler and the draws. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gradcheck.h"
#include "run/mix.h"
#include "op_fixture.h"
#include "scorch/scorch.h"
#include "scorch_host/context.h"
#include "scorch_host/params.h"

enum { PYTHON_SKIP = 77 };

static void setup(void)
{
    op_fixture_setup(7);
}

TestSuite(soft_ce, .init = setup, .fini = op_fixture_teardown);
TestSuite(mix);

/* Rows of q [n, c] made positive and summing to 1. */
static void normalise_rows(sc_tensor *q)
{
    int64_t c = q->shape[1];
    float *v = sc_tensor_f32(q);
    for (int64_t i = 0; i < q->shape[0]; i++) {
        float sum = 0.0f;
        for (int64_t j = 0; j < c; j++)
            sum += v[i * c + j] = fabsf(v[i * c + j]) + 0.05f;
        for (int64_t j = 0; j < c; j++)
            v[i * c + j] /= sum;
    }
}

static sc_tensor *apply_ce(sc_ctx *c, sc_tensor *const *in, void *user)
{
    return sc_cross_entropy(c, in[0], in[1], *(const float *)user);
}

Test(soft_ce, gradients_of_logits_and_targets)
{
    static const float smoothing[] = {0.0f, 0.1f};
    for (int k = 0; k < 2; k++) {
        float s = smoothing[k];
        sc_tensor *z = test_param(2, (int64_t[]){4, 5}), *q = test_param(2, (int64_t[]){4, 5});
        normalise_rows(q);
        gradcheck_report rep;
        cr_assert(gradcheck_run(ctx, apply_ce, &s, 2, (sc_tensor *[]){z, q}, NULL, &rep),
                  "soft cross_entropy s=%g: %s", (double)s, rep.message);
        cr_assert_eq(rep.checked, 40, "both inputs checked: %lld", (long long)rep.checked);
    }
}

/* loss and d loss / d z of z against target, with smoothing s */
static float loss_and_grad(sc_tensor *z, sc_tensor *target, float s, float *grad)
{
    sc_params_zero_grad(ps);
    sc_tensor *loss = sc_cross_entropy(ctx, z, target, s);
    cr_assert_not_null(loss, "%s", sc_error_message());
    float value = sc_tensor_f32(loss)[0];
    cr_assert_eq(sc_backward(ctx, loss, NULL, NULL), SC_OK, "%s", sc_error_message());
    memcpy(grad, sc_tensor_f32(z->grad), (size_t)z->numel * sizeof *grad);
    sc_ctx_reset(ctx);
    return value;
}

Test(soft_ce, one_hot_rows_equal_class_indices)
{
    enum { N = 6, C = 7 };
    int64_t labels[N] = {3, 0, 6, 3, 1, 5};
    sc_tensor *z = test_param(2, (int64_t[]){N, C});
    sc_tensor *index = sc_tensor_alloc(SC_I64, 1, (int64_t[]){N});
    sc_tensor *soft = sc_tensor_alloc(SC_F32, 2, (int64_t[]){N, C});
    cr_assert(index && soft);
    for (int i = 0; i < N; i++) {
        ((int64_t *)index->data)[i] = labels[i];
        for (int j = 0; j < C; j++)
            sc_tensor_f32(soft)[i * C + j] = j == labels[i];
    }
    float g_index[N * C], g_soft[N * C];
    for (float s = 0.0f; s < 0.3f; s += 0.2f) {
        float l_index = loss_and_grad(z, index, s, g_index);
        float l_soft = loss_and_grad(z, soft, s, g_soft);
        cr_assert_float_eq(l_soft, l_index, 1e-6f * fabsf(l_index), "s=%g", (double)s);
        for (int i = 0; i < N * C; i++)
            cr_assert_float_eq(g_soft[i], g_index[i], 1e-7f, "s=%g: gradient %d", (double)s, i);
    }
    sc_tensor_free(index);
    sc_tensor_free(soft);
}

Test(soft_ce, accuracy_counts_the_dominant_label)
{
    /* row 0: dominant 2, logits pick 2; row 1: a tie 0.5/0.5 counts against
     * class 1 (the first largest), logits pick 3; row 2: dominant 0, logits 0 */
    float z[] = {0, 1, 5, 2, /**/ 0, 1, 2, 9, /**/ 4, 1, 2, 3};
    float q[] = {0.1f, 0.2f, 0.6f, 0.1f, /**/ 0, 0.5f, 0, 0.5f, /**/ 0.7f, 0.3f, 0, 0};
    sc_tensor *logits = sc_tensor_alloc(SC_F32, 2, (int64_t[]){3, 4});
    sc_tensor *soft = sc_tensor_alloc(SC_F32, 2, (int64_t[]){3, 4});
    cr_assert(logits && soft);
    memcpy(logits->data, z, sizeof z);
    memcpy(soft->data, q, sizeof q);
    cr_assert_eq(sc_correct_top1(logits, soft), 2);
    cr_assert_eq(sc_correct_topk(logits, soft, 2), 2, "class 1 ranks third in row 1");
    cr_assert_eq(sc_correct_topk(logits, soft, 3), 3);
    sc_tensor *narrow = sc_tensor_alloc(SC_F32, 2, (int64_t[]){3, 3});
    cr_assert_eq(sc_correct_top1(logits, narrow), -1);
    cr_assert(strstr(sc_error_message(), "f32 class probabilities [N, C]"), "%s",
              sc_error_message());
    sc_tensor_free(logits);
    sc_tensor_free(soft);
    sc_tensor_free(narrow);
}

/* ---- oracles ---- */

/* Runs mix_oracle.py `what` on the dump; skips without torch. */
static void run_oracle(const char *what, const char *dump)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s/tests/unit/host/mix_oracle.py %s %s", /* its #! python3 */
             getenv("SCORCH_SOURCE_ROOT"), what, dump);
    int status = system(cmd);
    remove(dump);
    cr_assert(WIFEXITED(status));
    if (WEXITSTATUS(status) == PYTHON_SKIP)
        cr_skip_test("mix_oracle.py: no torch");
    cr_assert_eq(WEXITSTATUS(status), 0, "mix_oracle.py %s: scorch differs (see its output)",
                 what);
}

static FILE *open_dump(char *path)
{
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    FILE *f = fdopen(fd, "w");
    cr_assert_not_null(f);
    return f;
}

static void write_floats(FILE *f, const float *v, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        fprintf(f, "%.9g\n", (double)v[i]);
}

/* One case of the cross-entropy dump: n, c, s, z, q, loss, gz, gq. */
static void dump_ce_case(FILE *f, int64_t n, int64_t c, float s, float lo, float hi)
{
    static int cases;
    char zname[16], qname[16];
    snprintf(zname, sizeof zname, "z%d", cases);
    snprintf(qname, sizeof qname, "q%d", cases++);
    sc_tensor *z = gradcheck_param(ps, zname, 2, (int64_t[]){n, c}, lo, hi, &rng);
    sc_tensor *q = gradcheck_param(ps, qname, 2, (int64_t[]){n, c}, 0.0f, 1.0f, &rng);
    cr_assert(z && q);
    normalise_rows(q);
    sc_params_zero_grad(ps);
    sc_tensor *loss = sc_cross_entropy(ctx, z, q, s);
    cr_assert_not_null(loss, "%s", sc_error_message());
    cr_assert_eq(sc_backward(ctx, loss, NULL, NULL), SC_OK, "%s", sc_error_message());
    fprintf(f, "%lld %lld %.9g\n", (long long)n, (long long)c, (double)s);
    write_floats(f, sc_tensor_f32(z), z->numel);
    write_floats(f, sc_tensor_f32(q), q->numel);
    write_floats(f, sc_tensor_f32(loss), 1);
    write_floats(f, sc_tensor_f32(z->grad), z->numel);
    write_floats(f, sc_tensor_f32(q->grad), q->numel);
    sc_ctx_reset(ctx);
}

Test(soft_ce, matches_torch)
{
    char dump[] = "/tmp/scorch-soft-ce-XXXXXX";
    FILE *f = open_dump(dump);
    dump_ce_case(f, 8, 10, 0.0f, -3.0f, 3.0f);
    dump_ce_case(f, 5, 1000, 0.1f, -1.0f, 1.0f);
    dump_ce_case(f, 33, 7, 0.2f, -20.0f, 20.0f);
    cr_assert_eq(fclose(f), 0);
    run_oracle("ce", dump);
}

/* A batch x [n, ch, h, w] of distinct values and labels [n] below classes. */
static void fill_batch(sc_tensor *x, sc_tensor *labels, int64_t classes, sc_rng *r)
{
    for (int64_t i = 0; i < x->numel; i++)
        sc_tensor_f32(x)[i] = 2.0f * sc_rng_uniform(r) - 1.0f;
    for (int64_t i = 0; i < labels->numel; i++)
        ((int64_t *)labels->data)[i] = (int64_t)sc_rng_below(r, (uint64_t)classes);
}

/* One case of the mix dump: the batch, the draw, scorch's results. */
static void dump_mix_case(FILE *f, int64_t n, const host_mix_draw *d, sc_rng *r)
{
    enum { CH = 3, H = 5, W = 7, CLASSES = 10 };
    sc_tensor *x = sc_tensor_alloc(SC_F32, 4, (int64_t[]){n, CH, H, W});
    sc_tensor *labels = sc_tensor_alloc(SC_I64, 1, &n);
    sc_tensor *soft = sc_tensor_alloc(SC_F32, 2, (int64_t[]){n, CLASSES});
    cr_assert(x && labels && soft);
    fill_batch(x, labels, CLASSES, r);
    fprintf(f, "%lld %d %d %d %d %.17g %d %lld %lld %lld %lld\n", (long long)n, CH, H, W,
            CLASSES, d->lam, d->cutmix, (long long)d->y0, (long long)d->y1, (long long)d->x0,
            (long long)d->x1);
    write_floats(f, sc_tensor_f32(x), x->numel);
    for (int64_t i = 0; i < n; i++)
        fprintf(f, "%lld\n", (long long)((int64_t *)labels->data)[i]);
    cr_assert_eq(host_mix_targets(labels, NULL, d->lam, soft), SC_OK, "%s", sc_error_message());
    host_mix_inputs(x, d);
    write_floats(f, sc_tensor_f32(x), x->numel);
    write_floats(f, sc_tensor_f32(soft), soft->numel);
    sc_tensor_free(x);
    sc_tensor_free(labels);
    sc_tensor_free(soft);
}

Test(mix, batches_match_timm)
{
    char dump[] = "/tmp/scorch-mix-XXXXXX";
    FILE *f = open_dump(dump);
    sc_rng r;
    sc_rng_init(&r, 3, 1);
    host_mix_draw mixup = {.lam = 0.3183098861837907};
    host_mix_draw cut = {.lam = 0.6, .cutmix = true};
    host_mix_cut_box(&cut, 1, 5, 5, 7); /* clipped at the top and the right */
    cr_assert(cut.lam > 0.6 && cut.lam < 1.0, "corrected lam %g", cut.lam);
    host_mix_draw none = {.lam = 1.0};
    for (int64_t n = 5; n <= 6; n++) { /* odd: the middle sample meets itself */
        dump_mix_case(f, n, &mixup, &r);
        dump_mix_case(f, n, &cut, &r);
        dump_mix_case(f, n, &none, &r);
    }
    cr_assert_eq(fclose(f), 0);
    run_oracle("mix", dump);
}

Test(mix, boxes_match_timm)
{
    char dump[] = "/tmp/scorch-box-XXXXXX";
    FILE *f = open_dump(dump);
    sc_rng r;
    sc_rng_init(&r, 5, 2);
    static const int64_t sizes[][2] = {{28, 28}, {5, 7}, {32, 17}, {1, 1}};
    for (int k = 0; k < 4; k++) {
        for (int i = 0; i < 50; i++) {
            int64_t h = sizes[k][0], w = sizes[k][1];
            host_mix_draw d = {.lam = host_mix_beta(&r, 1.0), .cutmix = true};
            double lam = d.lam;
            int64_t cy = (int64_t)sc_rng_below(&r, (uint64_t)h);
            int64_t cx = (int64_t)sc_rng_below(&r, (uint64_t)w);
            host_mix_cut_box(&d, cy, cx, h, w);
            fprintf(f, "%lld %lld %.17g %lld %lld %lld %lld %lld %lld %.17g\n", (long long)h,
                    (long long)w, lam, (long long)cy, (long long)cx, (long long)d.y0,
                    (long long)d.y1, (long long)d.x0, (long long)d.x1, d.lam);
        }
    }
    cr_assert_eq(fclose(f), 0);
    run_oracle("box", dump);
}

/* ---- draws ---- */

Test(mix, beta_has_its_mean_and_variance)
{
    static const double alphas[] = {0.2, 0.8, 1.0, 4.0};
    enum { DRAWS = 40000 };
    for (int k = 0; k < 4; k++) {
        double a = alphas[k], sum = 0, sq = 0;
        sc_rng r;
        sc_rng_init(&r, 11, (uint64_t)k);
        for (int i = 0; i < DRAWS; i++) {
            double v = host_mix_beta(&r, a);
            cr_assert(v >= 0.0 && v <= 1.0, "alpha %g: draw %g", a, v);
            sum += v;
            sq += v * v;
        }
        double mean = sum / DRAWS, var = sq / DRAWS - mean * mean;
        double want_var = 1.0 / (4.0 * (2.0 * a + 1.0)); /* Beta(a, a) */
        cr_assert(fabs(mean - 0.5) < 0.01, "alpha %g: mean %g", a, mean);
        cr_assert(fabs(var / want_var - 1.0) < 0.03, "alpha %g: variance %g, not %g", a, var,
                  want_var);
    }
}

/* The share of DRAWS batches that are mixed, and of those that are CutMix. */
static void draw_shares(const host_mix_settings *set, double *mixed, double *cut)
{
    enum { DRAWS = 20000 };
    sc_rng r;
    sc_rng_init(&r, 13, 0);
    int n_mixed = 0, n_cut = 0;
    for (int i = 0; i < DRAWS; i++) {
        host_mix_draw d = host_mix_draw_batch(set, &r, 28, 28);
        n_mixed += d.lam < 1.0;
        n_cut += d.cutmix;
        if (d.cutmix)
            cr_assert(d.y1 - d.y0 <= 28 && d.x1 - d.x0 <= 28 && d.y0 >= 0 && d.x0 >= 0);
        else if (set->mixup_alpha == 0.0)
            cr_assert_eq(d.lam, 1.0, "CutMix alone: an unmixed batch keeps lam 1");
    }
    *mixed = (double)n_mixed / DRAWS;
    *cut = n_mixed ? (double)n_cut / n_mixed : 0;
}

Test(mix, draws_follow_the_probabilities)
{
    double mixed, cut;
    draw_shares(&(host_mix_settings){0.8, 1.0, 1.0, 0.5}, &mixed, &cut);
    cr_assert(mixed > 0.99 && fabs(cut - 0.5) < 0.02, "mixed %g, cutmix %g", mixed, cut);
    draw_shares(&(host_mix_settings){0.8, 1.0, 0.3, 0.25}, &mixed, &cut);
    cr_assert(fabs(mixed - 0.3) < 0.02 && fabs(cut - 0.25) < 0.03, "mixed %g, cutmix %g",
              mixed, cut);
    draw_shares(&(host_mix_settings){0.0, 1.0, 1.0, 0.5}, &mixed, &cut);
    cr_assert(cut > 0.99, "CutMix alone: cutmix %g", cut);
    draw_shares(&(host_mix_settings){0.4, 0.0, 0.0, 0.5}, &mixed, &cut);
    cr_assert_eq(mixed, 0.0, "--mix-prob 0 mixes nothing");
}

Test(mix, a_label_outside_the_classes_is_named)
{
    sc_tensor *labels = sc_tensor_alloc(SC_U8, 1, (int64_t[]){3});
    sc_tensor *soft = sc_tensor_alloc(SC_F32, 2, (int64_t[]){3, 4});
    cr_assert(labels && soft);
    uint8_t v[] = {1, 4, 0};
    memcpy(labels->data, v, sizeof v);
    int64_t samples[] = {70, 71, 72};
    cr_assert_eq(host_mix_targets(labels, samples, 0.5, soft), SC_ERR_INVALID);
    cr_assert(strstr(sc_error_message(), "sample 71 has class 4, outside the model's 0..3"),
              "%s", sc_error_message());
    sc_tensor_free(labels);
    sc_tensor_free(soft);
}
