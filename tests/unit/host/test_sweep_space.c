/* A sweep's space (host/sweep/space.h): parsing every kind and refusing
 * bad ones, the trials of grids and random draws, their reproducibility;
 * and what is built on it: the sweep file's plan and a trial's INI
 * (plan.h), the early-stopping rules (early_stop.h), a launcher's ranks
 * (launch.h). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "sweep/early_stop.h"
#include "sweep/launch.h"
#include "sweep/plan.h"
#include "sweep/space.h"

static host_space parsed(const char *name, const char *spec)
{
    host_space s = {0};
    cr_assert_eq(host_space_add(&s, name, spec, 1), SC_OK, "%s = %s: %s", name, spec,
                 sc_error_message());
    return s;
}

static void expect_values(const host_space_dim *d, const char *const *want, int n)
{
    cr_assert_eq(d->count, n, "%s: %d values", d->spec, d->count);
    for (int i = 0; i < n; i++)
        cr_assert_str_eq(d->values[i], want[i], "%s: value %d", d->spec, i);
}

Test(sweep_space, grids_list_their_values_and_spaces_compute_them)
{
    host_space s = parsed("optimizer", " grid( adam , sgd,\"a, b\" ) ");
    expect_values(&s.dims[0], (const char *[]){"adam", "sgd", "a, b"}, 3);
    cr_assert_str_eq(s.dims[0].spec, "grid( adam , sgd,\"a, b\" )");
    cr_assert_not(host_space_dim_is_random(&s.dims[0]));
    cr_assert_eq(host_space_add(&s, "lr", "logspace(1e-4, 1e-1, 4)", 2), SC_OK);
    expect_values(&s.dims[1], (const char *[]){"0.0001", "0.001", "0.01", "0.1"}, 4);
    cr_assert(host_space_dim_is_log(&s.dims[1]));
    cr_assert_eq(host_space_add(&s, "momentum", "linspace(0.1, 0.5, 5)", 3), SC_OK);
    expect_values(&s.dims[2], (const char *[]){"0.1", "0.2", "0.3", "0.4", "0.5"}, 5);
    cr_assert_eq(host_space_add(&s, "batch-size", "linspace(16, 256, 4)", 4), SC_OK);
    expect_values(&s.dims[3], (const char *[]){"16", "96", "176", "256"}, 4);
    cr_assert_eq(host_space_add(&s, "model-args.hidden", "logspace(16, 256, 5)", 5), SC_OK);
    expect_values(&s.dims[4], (const char *[]){"16", "32", "64", "128", "256"}, 5);
    cr_assert_eq(host_space_find(&s, "momentum"), &s.dims[2]);
    cr_assert_null(host_space_find(&s, "mom"));
    host_space_free(&s);
}

Test(sweep_space, bad_specs_are_refused_saying_why)
{
    static const struct {
        const char *spec, *message;
    } cases[] = {
        {"0.1", "'0.1' is not a space"},
        {"grid()", "grid() has no values"},
        {"grid(1,)", "an empty value"},
        {"grid(1, 1)", "1 is listed twice"},
        {"grid(\"a\" b)", "expected ',' or ')' after \"a\""},
        {"grid(\"a)", "no closing"},
        {"grid(f(x))", "quote a value"},
        {"normal(0, 1)", "unknown kind 'normal'"},
        {"uniform(1)", "uniform takes 2 values (low, high), not 1"},
        {"uniform(2, 1)", "low (2) must be below high (1)"},
        {"uniform(a, 1)", "'a' is not a number"},
        {"loguniform(0, 1)", "a log scale needs low > 0"},
        {"randint(1.5, 3)", "the bounds must be integers"},
        {"linspace(0, 1, 1)", "the count must be an integer from 2"},
        {"linspace(0, 1, 2.5)", "the count must be an integer from 2"},
        {"logspace(1, 2, 5)", "integer bounds give integers"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        host_space s = {0};
        cr_assert_neq(host_space_add(&s, "lr", cases[i].spec, 1), SC_OK, "%s", cases[i].spec);
        cr_assert(strstr(sc_error_message(), cases[i].message), "%s: %s", cases[i].spec,
                  sc_error_message());
        cr_assert(strncmp(sc_error_message(), "lr: ", 4) == 0, "%s", sc_error_message());
        cr_assert_eq(s.count, 0);
    }
    host_space s = parsed("lr", "grid(1, 2)");
    cr_assert_neq(host_space_add(&s, "lr", "grid(3)", 7), SC_OK);
    cr_assert(strstr(sc_error_message(), "lr is swept twice (first on line 1)"), "%s",
              sc_error_message());
    host_space_free(&s);
}

Test(sweep_space, the_grid_is_a_product_with_the_last_dimension_fastest)
{
    host_space s = parsed("a", "grid(1, 2)");
    cr_assert_eq(host_space_add(&s, "b", "grid(x, y, z)", 2), SC_OK);
    int64_t n;
    cr_assert_eq(host_space_trial_count(&s, 0, &n), SC_OK);
    cr_assert_eq(n, 6);
    char values[2][HOST_SPACE_VALUE_MAX];
    const char *want[6][2] = {{"1", "x"}, {"1", "y"}, {"1", "z"},
                              {"2", "x"}, {"2", "y"}, {"2", "z"}};
    for (int t = 0; t < 6; t++) {
        host_space_trial_values(&s, 42, t, values);
        cr_assert_str_eq(values[0], want[t][0], "trial %d", t);
        cr_assert_str_eq(values[1], want[t][1], "trial %d", t);
    }
    cr_assert_neq(host_space_trial_count(&s, 4, &n), SC_OK);
    cr_assert(strstr(sc_error_message(), "--trials 4 is for random search"), "%s",
              sc_error_message());
    host_space_free(&s);
}

Test(sweep_space, random_dimensions_need_trials_and_repeat_the_grid)
{
    host_space s = parsed("optimizer", "grid(adam, sgd)");
    cr_assert_eq(host_space_add(&s, "lr", "loguniform(1e-5, 1e-1)", 2), SC_OK);
    int64_t n;
    cr_assert_neq(host_space_trial_count(&s, 0, &n), SC_OK);
    cr_assert(strstr(sc_error_message(), "lr = loguniform(1e-5, 1e-1) is drawn at random: "
                                         "give --trials N"), "%s", sc_error_message());
    cr_assert_eq(host_space_trial_count(&s, 5, &n), SC_OK);
    cr_assert_eq(n, 10);
    char values[2][HOST_SPACE_VALUE_MAX];
    for (int t = 0; t < 10; t++) {
        host_space_trial_values(&s, 1, t, values);
        cr_assert_str_eq(values[0], t % 2 ? "sgd" : "adam");
    }
    host_space_free(&s);
}

/* Trial k's draws depend on (seed, k, dimension) only. */
Test(sweep_space, draws_are_reproducible_by_seed_and_stable_as_trials_grow)
{
    host_space s = parsed("lr", "loguniform(1e-4, 1e-1)");
    cr_assert_eq(host_space_add(&s, "hidden", "choice(8, 32, 64)", 2), SC_OK);
    char a[2][HOST_SPACE_VALUE_MAX], b[2][HOST_SPACE_VALUE_MAX], c[2][HOST_SPACE_VALUE_MAX];
    int differ = 0;
    for (int t = 0; t < 20; t++) {
        host_space_trial_values(&s, 7, t, a);
        host_space_trial_values(&s, 7, t, b);
        host_space_trial_values(&s, 8, t, c);
        cr_assert_str_eq(a[0], b[0]);
        cr_assert_str_eq(a[1], b[1]);
        differ += strcmp(a[0], c[0]) != 0;
    }
    cr_assert_geq(differ, 19, "another seed draws other values");
    host_space_free(&s);
}

/* Every draw within its bounds; integers reach both ends; log-uniform
 * puts half of its draws below the geometric mean of the bounds. */
Test(sweep_space, draws_follow_their_distributions)
{
    host_space s = parsed("u", "uniform(-1, 3)");
    cr_assert_eq(host_space_add(&s, "l", "loguniform(1e-6, 1)", 2), SC_OK);
    cr_assert_eq(host_space_add(&s, "r", "randint(2, 4)", 3), SC_OK);
    cr_assert_eq(host_space_add(&s, "g", "lograndint(1, 1000)", 4), SC_OK);
    cr_assert_eq(host_space_add(&s, "c", "choice(a, b, c)", 5), SC_OK);
    char v[5][HOST_SPACE_VALUE_MAX];
    int n = 4000, below = 0, ends[5] = {0}, choices[3] = {0}, small = 0;
    for (int t = 0; t < n; t++) {
        host_space_trial_values(&s, 3, t, v);
        double u = atof(v[0]), l = atof(v[1]), r = atof(v[2]), g = atof(v[3]);
        cr_assert(u >= -1 && u <= 3, "%s", v[0]);
        cr_assert(l >= 1e-6 && l <= 1, "%s", v[1]);
        cr_assert(r == floor(r) && r >= 2 && r <= 4, "%s", v[2]);
        cr_assert(g == floor(g) && g >= 1 && g <= 1000, "%s", v[3]);
        below += l < 1e-3;
        ends[(int)r]++;
        small += g < 32; /* log-uniform over [1, 1001): about half below sqrt(1001) */
        choices[v[4][0] - 'a']++;
    }
    cr_assert(fabs((double)below / n - 0.5) < 0.04, "%d of %d below 1e-3", below, n);
    cr_assert(fabs((double)small / n - 0.5) < 0.04, "%d of %d below 32", small, n);
    for (int r = 2; r <= 4; r++)
        cr_assert(ends[r] > n / 4, "randint value %d drawn %d times", r, ends[r]);
    for (int i = 0; i < 3; i++)
        cr_assert(choices[i] > n / 4, "choice %d drawn %d times", i, choices[i]);
    host_space_free(&s);
}

/* ---- the sweep file ---- */

static const char base_text[] = "[train]\n"
                                "model = mlp.so\n"
                                "model-args = hidden=256,dropout=0.1\n"
                                "dataset = synthetic.so\n"
                                "lr = 0.5\n"
                                "epochs = 3\n"
                                "[params \"*.bias\"]\n"
                                "weight_decay = 0\n"
                                "[space]\n";

static host_sweep_plan plan_of(const char *space)
{
    char text[2048];
    snprintf(text, sizeof text, "%s%s", base_text, space);
    host_sweep_plan plan;
    cr_assert_eq(host_sweep_plan_load_text(text, "sweep.ini", &plan), SC_OK, "%s",
                 sc_error_message());
    return plan;
}

static void expect_refused(const char *text, const char *message)
{
    host_sweep_plan plan;
    cr_assert_neq(host_sweep_plan_load_text(text, "sweep.ini", &plan), SC_OK, "%s", text);
    cr_assert(strstr(sc_error_message(), message), "'%s' not in: %s", message,
              sc_error_message());
    host_sweep_plan_free(&plan);
}

/* The trial's INI: the swept lines blanked, its values last, a plugin
 * argument merged into the base's list; it loads as scorch-train's. */
Test(sweep_plan, a_trials_ini_holds_the_base_and_its_values)
{
    host_sweep_plan plan = plan_of("lr = grid(0.01, 0.1)\n"
                                   "model-args.hidden = grid(64, 32:16)\n"
                                   "model-args.activation = grid(tanh)\n");
    cr_assert_eq(plan.base->epochs, 3);
    char *values[] = {"0.1", "32:16", "tanh"}, *text;
    cr_assert_eq(host_sweep_plan_trial_ini(&plan, values, "trial-0004", &text), SC_OK, "%s",
                 sc_error_message());
    cr_assert(strstr(text, "; trial-0004\nlr = 0.1\n"
                           "model-args = hidden=32:16,dropout=0.1,activation=tanh\n"),
              "%s", text);
    cr_assert_null(strstr(text, "lr = 0.5"), "%s", text);
    cr_assert_null(strstr(text, "hidden=256"), "%s", text);
    host_config cfg;
    host_config_defaults(&cfg);
    cr_assert_eq(host_config_load_ini_text(&cfg, HOST_PROGRAM_TRAIN, text, "trial"), SC_OK,
                 "%s\n%s", sc_error_message(), text);
    cr_assert_eq(cfg.lr, 0.1);
    cr_assert_str_eq(cfg.model_args, "hidden=32:16,dropout=0.1,activation=tanh");
    cr_assert_eq(cfg.param_groups.n, 1);
    free(text);
    host_sweep_plan_free(&plan);
}

/* Messages name the file and the line of the value or key at fault. */
Test(sweep_plan, bad_files_are_refused_by_line)
{
    char text[2048];
    snprintf(text, sizeof text, "%slr = grid(0.1, fast)\n", base_text);
    expect_refused(text, "sweep.ini:10: lr: 'fast' is not a number");
    snprintf(text, sizeof text, "%slr = grid(0.1, -1)\n", base_text);
    expect_refused(text, "sweep.ini:10: lr: '-1' is out of range");
    snprintf(text, sizeof text, "%slrr = grid(0.1)\n", base_text);
    expect_refused(text, "sweep.ini:10: unknown option lrr (did you mean lr?)");
    snprintf(text, sizeof text, "%sthreads = grid(1, 2)\n", base_text);
    expect_refused(text, "sweep.ini:10: threads cannot be swept: scorch-sweep splits the cores");
    snprintf(text, sizeof text, "%smodel-args = grid(\"hidden=1\")\nmodel-args.hidden = grid(2)\n",
             base_text);
    expect_refused(text, "sweep.ini:11: model-args.hidden and model-args (line 10) are both "
                         "swept");
    snprintf(text, sizeof text, "%smodel-args.hidden = grid(\"64,32\")\n", base_text);
    expect_refused(text, "sweep.ini:10: model-args.hidden: '64,32': one plugin argument's value");
    snprintf(text, sizeof text, "%slr = uniform(0.1\n", base_text);
    expect_refused(text, "sweep.ini:10: lr: 'uniform(0.1' is not a space");
    expect_refused("[train]\nmodel = m.so\ndataset = d.so\nrun-dir = x\n[space]\nlr = grid(1)\n",
                   "sweep.ini:4: run-dir is not for a sweep file: scorch-sweep runs each trial");
    expect_refused("[train]\nmodel = m.so\ndataset = d.so\nepochs = many\n[space]\nlr = grid(1)\n",
                   "sweep.ini:4: epochs: 'many' is not an integer");
    expect_refused("[train]\nmodel = m.so\ndataset = d.so\n", "has no [space] section");
    expect_refused("[train]\nmodel = m.so\n[space]\nlr = grid(1)\n",
                   "[train] sets no dataset, and [space] does not sweep it");
}

static void collect(void *user, const char *what, const char *was, const char *now)
{
    char *out = user;
    size_t used = strlen(out);
    snprintf(out + used, 1024 - used, "%s: %s -> %s\n", what, was, now);
}

Test(sweep_plan, differences_name_each_option_and_dimension)
{
    host_sweep_plan a = plan_of("lr = grid(0.01, 0.1)\nseed = grid(1, 2)\n");
    char text[2048];
    snprintf(text, sizeof text, "%s; a comment\nlr = grid(0.01,0.1)\n", base_text);
    host_sweep_plan same;
    cr_assert_eq(host_sweep_plan_load_text(text, "b.ini", &same), SC_OK, "%s",
                 sc_error_message());
    char out[1024] = "";
    cr_assert_eq(host_sweep_plan_diff(&a, &same, collect, out), 1, "%s", out);
    cr_assert_str_eq(out, "[space] seed: grid(1, 2) -> (none)\n");
    snprintf(text, sizeof text, "%s", base_text);
    *strstr(text, "epochs = 3") = '#';
    strcat(text, "lr = grid(0.01, 0.2)\nseed = grid(1, 2)\n");
    host_sweep_plan b;
    cr_assert_eq(host_sweep_plan_load_text(text, "b.ini", &b), SC_OK, "%s", sc_error_message());
    out[0] = '\0';
    cr_assert_eq(host_sweep_plan_diff(&a, &b, collect, out), 2, "%s", out);
    cr_assert(strstr(out, "[train] epochs: 3 -> 10\n"), "%s", out);
    cr_assert(strstr(out, "[space] lr: grid(0.01, 0.1) -> grid(0.01, 0.2)\n"), "%s", out);
    host_sweep_plan_free(&a);
    host_sweep_plan_free(&same);
    host_sweep_plan_free(&b);
}

/* ---- early stopping ---- */

Test(sweep_stop, quantiles_interpolate_as_numpy)
{
    double v[] = {4, 1, 3, 2};
    cr_assert_float_eq(host_quantile(v, 4, 0.5), 2.5, 1e-12);
    cr_assert_float_eq(host_quantile(v, 4, 2.0 / 3), 3, 1e-12);
    cr_assert_float_eq(host_quantile(v, 4, 1), 4, 1e-12);
    double one[] = {7};
    cr_assert_float_eq(host_quantile(one, 1, 0.25), 7, 1e-12);
}

static host_curve curve(double *values, int epochs) { return (host_curve){values, epochs}; }

Test(sweep_stop, the_median_rule_stops_a_trial_below_the_completed_ones)
{
    double good1[] = {0.8, 0.9, 0.95}, good2[] = {0.7, 0.85, 0.9}, good3[] = {0.75, 0.8, 0.96};
    double bad[] = {0.3, 0.95}, fine[] = {0.76, 0.5};
    host_curve c1 = curve(good1, 3), c2 = curve(good2, 3), c3 = curve(good3, 3);
    host_curve b = curve(bad, 2), f = curve(fine, 2);
    host_stop_peer peers[] = {{&c1, true}, {&c2, true}, {&c3, false}};
    host_stop_policy p = {HOST_STOP_MEDIAN, 1, 2, 3, true};
    char why[256] = "";
    cr_assert(host_stop_judge(&p, "accuracy", &b, 1, 3, peers, 3, why, sizeof why));
    cr_assert_str_eq(why, "median rule at epoch 1: best accuracy 0.3, median of 2 completed "
                          "trials 0.75");
    /* best of epochs 1..2 (0.76) against the median 0.875 */
    cr_assert(host_stop_judge(&p, "accuracy", &f, 2, 3, peers, 3, why, sizeof why));
    cr_assert_not(host_stop_judge(&p, "accuracy", &f, 1, 3, peers, 3, why, sizeof why));
    p.min_finished = 3; /* c3 is still running */
    cr_assert_not(host_stop_judge(&p, "accuracy", &b, 1, 3, peers, 3, why, sizeof why));
    p = (host_stop_policy){HOST_STOP_MEDIAN, 2, 2, 3, true}; /* grace: not before epoch 2 */
    cr_assert_not(host_stop_judge(&p, "accuracy", &b, 1, 3, peers, 3, why, sizeof why));
    p.maximize = false; /* a loss: lower is better */
    cr_assert_not(host_stop_judge(&p, "loss", &f, 2, 3, peers, 3, why, sizeof why));
    cr_assert_not(host_stop_judge(&p, "loss", &f, 3, 3, peers, 3, why, sizeof why),
                  "the last epoch is never judged");
}

Test(sweep_stop, asha_keeps_the_top_of_each_rung)
{
    double v[5][9];
    host_curve c[5];
    for (int t = 0; t < 5; t++) {
        for (int e = 0; e < 9; e++)
            v[t][e] = 0.1 * (t + 1) + 0.01 * e;
        c[t] = curve(v[t], 9);
    }
    host_stop_peer peers[4];
    for (int t = 0; t < 4; t++)
        peers[t] = (host_stop_peer){&c[t + 1], false};
    host_stop_policy p = {HOST_STOP_ASHA, 1, 3, 3, true};
    char why[256];
    /* rungs at 1, 3 and 9 (not: the last epoch); the worst trial stops at 1 */
    cr_assert(host_stop_judge(&p, "accuracy", &c[0], 1, 10, peers, 4, why, sizeof why));
    cr_assert(strstr(why, "ASHA rung at epoch 1"), "%s", why);
    cr_assert_not(host_stop_judge(&p, "accuracy", &c[0], 2, 10, peers, 4, why, sizeof why));
    /* the best is among the top third at every rung */
    for (int t = 0; t < 4; t++)
        peers[t] = (host_stop_peer){&c[t], false};
    cr_assert_not(host_stop_judge(&p, "accuracy", &c[4], 3, 10, peers, 4, why, sizeof why));
    /* the first trial at a rung goes on */
    cr_assert_not(host_stop_judge(&p, "accuracy", &c[0], 1, 10, peers, 0, why, sizeof why));
}

Test(sweep_launch, a_launchers_ranks_come_from_its_count_option)
{
    cr_assert_eq(host_launcher_ranks(""), 1);
    cr_assert_eq(host_launcher_ranks("mpirun -np 4"), 4);
    cr_assert_eq(host_launcher_ranks("mpirun --bind-to none -n 3 -x A=1"), 3);
    cr_assert_eq(host_launcher_ranks("srun --exclusive --ntasks=2 -c 4"), 2);
    cr_assert_eq(host_launcher_ranks("srun -N1"), 1);
}
