/* Optimizers against PyTorch 1.13: torch.optim.SGD/Adam/AdamW, lr 0.1, on a
 * 4-element parameter over 3 steps with the gradients below. The expected
 * numbers were printed by PyTorch and are hard-coded here. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "scorch/optim.h"

enum { N = 4, STEPS = 3 };

static const float p0[N] = {0.5f, -1.0f, 2.0f, -0.25f};
static const float grads[STEPS][N] = {
    {0.1f, -0.2f, 0.3f, 0.4f},
    {-0.5f, 0.25f, 0.0f, 1.0f},
    {0.3f, 0.3f, -0.7f, -0.1f},
};

static sc_params *store_with(const char *name, int64_t numel)
{
    sc_params *ps = sc_params_new();
    cr_assert_not_null(ps);
    cr_assert_not_null(sc_params_add(ps, name, 1, &numel));
    return ps;
}

static void assert_close(const float *got, const float *want, int64_t n, float tol,
                         const char *what)
{
    for (int64_t i = 0; i < n; i++)
        cr_assert_float_eq(got[i], want[i], tol, "%s[%lld]: got %.9g, want %.9g", what,
                           (long long)i, got[i], want[i]);
}

/* Element i of a parameter of any size gets p0[i % N] and grads[.][i % N]. */
static void run_steps(sc_params *ps, sc_optim *opt, int from, int to)
{
    float *g = sc_params_grads(ps);
    for (int s = from; s < to; s++) {
        for (int64_t i = 0; i < sc_params_numel(ps); i++)
            g[i] = grads[s][i % N];
        cr_assert_eq(sc_optim_step(opt, 0.1), SC_OK, "%s", sc_error_message());
    }
}

static void fill_p0(sc_params *ps)
{
    for (int64_t i = 0; i < sc_params_numel(ps); i++)
        sc_params_values(ps)[i] = p0[i % N];
}

/* Runs 3 steps of config and checks the parameter after each. */
static sc_optim *check_steps(sc_params *ps, const sc_optim_config *config,
                             const float want[STEPS][N])
{
    fill_p0(ps);
    sc_optim *opt = sc_optim_new(ps, config);
    cr_assert_not_null(opt, "%s", sc_error_message());
    for (int s = 0; s < STEPS; s++) {
        run_steps(ps, opt, s, s + 1);
        assert_close(sc_params_values(ps), want[s], N, 2e-6f, "param");
    }
    cr_assert_eq(sc_optim_steps(opt), STEPS);
    return opt;
}

static void check_state(sc_optim *opt, int i, const char *name, const float want[N])
{
    sc_tensor *t = sc_optim_state_at(opt, i);
    cr_assert_not_null(t);
    cr_assert_str_eq(t->name, name);
    cr_assert_eq(t->dtype, SC_F32);
    cr_assert_eq(t->ndim, 1);
    cr_assert_eq(t->shape[0], N);
    assert_close(sc_tensor_f32(t), want, N, 1e-7f, name);
}

static void check_reference(const sc_optim_config *config, const float want[STEPS][N])
{
    sc_params *ps = store_with("w", N);
    sc_optim_free(check_steps(ps, config, want));
    sc_params_free(ps);
}

Test(optim, sgd)
{
    static const float want[STEPS][N] = {
        {0.49000001f, -0.980000019f, 1.97000003f, -0.289999992f},
        {0.540000021f, -1.005f, 1.97000003f, -0.389999986f},
        {0.50999999f, -1.03499997f, 2.03999996f, -0.379999995f},
    };
    sc_optim_config c = sc_optim_defaults(SC_OPTIM_SGD);
    check_reference(&c, want);
}

Test(optim, sgd_momentum)
{
    static const float want[STEPS][N] = {
        {0.49000001f, -0.980000019f, 1.97000003f, -0.289999992f},
        {0.531000018f, -0.987000048f, 1.94300008f, -0.425999999f},
        {0.537900031f, -1.02330005f, 1.98870003f, -0.538399994f},
    };
    static const float buf[N] = {-0.0689999759f, 0.363000035f, -0.456999987f, 1.12399995f};
    sc_optim_config c = sc_optim_defaults(SC_OPTIM_SGD);
    c.momentum = 0.9;
    sc_params *ps = store_with("w", N);
    sc_optim *opt = check_steps(ps, &c, want);
    cr_assert_eq(sc_optim_state_count(opt), 1);
    check_state(opt, 0, "momentum", buf);
    sc_optim_free(opt);
    sc_params_free(ps);
}

Test(optim, sgd_nesterov)
{
    static const float want[STEPS][N] = {
        {0.481000006f, -0.962000012f, 1.94299996f, -0.326000005f},
        {0.567900002f, -0.993300021f, 1.91869998f, -0.548399985f},
        {0.54411f, -1.05597007f, 2.02982998f, -0.639559984f},
    };
    sc_optim_config c = sc_optim_defaults(SC_OPTIM_SGD);
    c.momentum = 0.9;
    c.nesterov = true;
    check_reference(&c, want);
}

Test(optim, sgd_weight_decay)
{
    static const float want[STEPS][N] = {
        {0.484999985f, -0.969999969f, 1.95000005f, -0.287499994f},
        {0.522650003f, -0.970299959f, 1.90550005f, -0.403375f},
        {0.506248474f, -0.990746975f, 1.93419504f, -0.447278768f},
    };
    sc_optim_config c = sc_optim_defaults(SC_OPTIM_SGD);
    c.momentum = 0.5;
    c.weight_decay = 0.1;
    check_reference(&c, want);
}

static const float adam_want[STEPS][N] = {
    {0.400000006f, -0.899999976f, 1.89999998f, -0.349999994f},
    {0.45983541f, -0.916273177f, 1.83299422f, -0.44397074f},
    {0.467288852f, -0.969145238f, 1.87133348f, -0.510389805f},
};

Test(optim, adam)
{
    static const float m[N] = {-0.00689999713f, 0.0362999998f, -0.0456999987f, 0.112400003f};
    static const float v[N] = {0.000349730049f, 0.000192357547f, 0.000579820131f,
                               0.00116868014f};
    sc_optim_config c = sc_optim_defaults(SC_OPTIM_ADAM);
    sc_params *ps = store_with("w", N);
    sc_optim *opt = check_steps(ps, &c, adam_want);
    cr_assert_eq(sc_optim_state_count(opt), 2);
    check_state(opt, 0, "exp_avg", m);
    check_state(opt, 1, "exp_avg_sq", v);
    sc_optim_free(opt);
    sc_params_free(ps);
}

Test(optim, adam_weight_decay)
{
    static const float want[STEPS][N] = {
        {0.400000036f, -0.900000036f, 1.89999998f, -0.349999994f},
        {0.449986964f, -0.875915647f, 1.81092334f, -0.443625033f},
        {0.444341272f, -0.893998444f, 1.80602694f, -0.506476045f},
    };
    sc_optim_config c = sc_optim_defaults(SC_OPTIM_ADAM);
    c.weight_decay = 0.1;
    check_reference(&c, want);
}

Test(optim, adamw)
{
    static const float want[STEPS][N] = {
        {0.395000011f, -0.889999986f, 1.88f, -0.347499996f},
        {0.450885415f, -0.897373199f, 1.79419422f, -0.437995732f},
        {0.453830004f, -0.941271544f, 1.81459153f, -0.500034809f},
    };
    sc_optim_config c = sc_optim_defaults(SC_OPTIM_ADAMW);
    c.weight_decay = 0.1;
    check_reference(&c, want);
}

/* Above the OpenMP threshold each element must still follow the formula. */
Test(optim, adam_parallel_range_matches_reference)
{
    const int64_t n = 40000 * N;
    sc_params *ps = store_with("big", n);
    fill_p0(ps);
    sc_optim_config c = sc_optim_defaults(SC_OPTIM_ADAM);
    sc_optim *opt = sc_optim_new(ps, &c);
    cr_assert_not_null(opt);
    run_steps(ps, opt, 0, STEPS);
    for (int64_t i = 0; i < n; i += N)
        assert_close(sc_params_values(ps) + i, adam_want[STEPS - 1], N, 2e-6f, "param");
    sc_optim_free(opt);
    sc_params_free(ps);
}

/* Frozen parameters keep their values and state, even with weight decay;
 * the trainable ones around them still move. */
Test(optim, frozen_parameters_untouched)
{
    sc_params *ps = sc_params_new();
    const int64_t shape[] = {N};
    sc_tensor *a = sc_params_add(ps, "a", 1, shape);
    sc_tensor *frozen = sc_params_add(ps, "frozen", 1, shape);
    sc_tensor *b = sc_params_add(ps, "b", 1, shape);
    cr_assert(a && frozen && b);
    sc_params_set_trainable(frozen, false);
    fill_p0(ps);
    sc_optim_config c = sc_optim_defaults(SC_OPTIM_ADAMW);
    c.weight_decay = 0.1;
    sc_optim *opt = sc_optim_new(ps, &c);
    cr_assert_not_null(opt);
    run_steps(ps, opt, 0, STEPS);
    static const float zero[N];
    assert_close(sc_tensor_f32(frozen), p0, N, 0.0f, "frozen");
    assert_close(sc_tensor_f32(sc_optim_state_at(opt, 0)) + sc_params_offset(ps, 1), zero, N,
                 0.0f, "frozen exp_avg");
    static const float adamw_last[N] = {0.453830004f, -0.941271544f, 1.81459153f,
                                        -0.500034809f};
    assert_close(sc_tensor_f32(a), adamw_last, N, 2e-6f, "a");
    assert_close(sc_tensor_f32(b), adamw_last, N, 2e-6f, "b");
    sc_optim_free(opt);
    sc_params_free(ps);
}

/* Restoring params, state and the step count into a fresh optimizer and
 * taking step 3 gives what step 3 gave without stopping, bit for bit. */
Test(optim, resume_from_state_is_exact)
{
    sc_optim_config c = sc_optim_defaults(SC_OPTIM_ADAM);
    sc_params *ps = store_with("w", N);
    fill_p0(ps);
    sc_optim *opt = sc_optim_new(ps, &c);
    run_steps(ps, opt, 0, 2);
    float saved_p[N], saved_m[N], saved_v[N];
    memcpy(saved_p, sc_params_values(ps), sizeof saved_p);
    memcpy(saved_m, sc_optim_state_at(opt, 0)->data, sizeof saved_m);
    memcpy(saved_v, sc_optim_state_at(opt, 1)->data, sizeof saved_v);
    run_steps(ps, opt, 2, 3);
    float straight[N];
    memcpy(straight, sc_params_values(ps), sizeof straight);
    sc_optim_free(opt);

    memcpy(sc_params_values(ps), saved_p, sizeof saved_p);
    opt = sc_optim_new(ps, &c);
    memcpy(sc_optim_state_at(opt, 0)->data, saved_m, sizeof saved_m);
    memcpy(sc_optim_state_at(opt, 1)->data, saved_v, sizeof saved_v);
    sc_optim_set_steps(opt, 2);
    run_steps(ps, opt, 2, 3);
    cr_assert_arr_eq(sc_params_values(ps), straight, sizeof straight);
    sc_optim_free(opt);
    sc_params_free(ps);
}

Test(optim, state_buffers_per_kind)
{
    sc_params *ps = store_with("w", 7);
    sc_optim_config c = sc_optim_defaults(SC_OPTIM_SGD);
    sc_optim *opt = sc_optim_new(ps, &c);
    cr_assert_eq(sc_optim_state_count(opt), 0, "plain SGD keeps no state");
    cr_assert_null(sc_optim_state_at(opt, 0));
    sc_optim_free(opt);
    c = sc_optim_defaults(SC_OPTIM_ADAMW);
    opt = sc_optim_new(ps, &c);
    cr_assert_eq(sc_optim_state_count(opt), 2);
    cr_assert_eq(sc_optim_state_at(opt, 1)->numel, 7);
    cr_assert_eq(sc_optim_state_at(opt, 1)->device.kind, SC_DEVICE_CPU);
    sc_optim_free(opt);
    sc_params_free(ps);
}

static void assert_refused(sc_optim_config c, const char *fragment)
{
    sc_params *ps = store_with("w", N);
    sc_error_clear();
    cr_assert_null(sc_optim_new(ps, &c));
    cr_assert(strstr(sc_error_message(), fragment), "message '%s' lacks '%s'",
              sc_error_message(), fragment);
    sc_params_free(ps);
}

Test(optim, invalid_configs_refused)
{
    sc_optim_config c = sc_optim_defaults(SC_OPTIM_SGD);
    c.nesterov = true;
    assert_refused(c, "nesterov");
    c = sc_optim_defaults(SC_OPTIM_SGD);
    c.momentum = -0.1;
    assert_refused(c, "momentum");
    c.momentum = NAN;
    assert_refused(c, "momentum");
    c = sc_optim_defaults(SC_OPTIM_SGD);
    c.weight_decay = -1e-4;
    assert_refused(c, "weight decay");
    c = sc_optim_defaults(SC_OPTIM_ADAM);
    c.beta1 = 1.0;
    assert_refused(c, "betas");
    c = sc_optim_defaults(SC_OPTIM_ADAMW);
    c.beta2 = -0.5;
    assert_refused(c, "betas");
    c = sc_optim_defaults(SC_OPTIM_ADAM);
    c.eps = 0.0;
    assert_refused(c, "eps");
    c.kind = (sc_optim_kind)7;
    assert_refused(c, "unknown kind");
}

Test(optim, non_finite_lr_refused)
{
    sc_params *ps = store_with("w", N);
    sc_optim_config c = sc_optim_defaults(SC_OPTIM_SGD);
    sc_optim *opt = sc_optim_new(ps, &c);
    cr_assert_eq(sc_optim_step(opt, NAN), SC_ERR_NUMERIC);
    cr_assert_eq(sc_optim_steps(opt), 0, "a refused step is not counted");
    sc_optim_free(opt);
    sc_params_free(ps);
}

Test(optim, defaults_and_names)
{
    sc_optim_config c = sc_optim_defaults(SC_OPTIM_ADAMW);
    cr_assert_float_eq(c.weight_decay, 0.01, 1e-12);
    cr_assert_float_eq(c.beta2, 0.999, 1e-12);
    cr_assert_float_eq(sc_optim_defaults(SC_OPTIM_ADAM).weight_decay, 0.0, 0.0);
    sc_optim_kind k;
    for (int i = SC_OPTIM_SGD; i <= SC_OPTIM_ADAMW; i++) {
        cr_assert_eq(sc_optim_kind_parse(sc_optim_kind_name((sc_optim_kind)i), &k), SC_OK);
        cr_assert_eq(k, (sc_optim_kind)i);
    }
    cr_assert_eq(sc_optim_kind_parse("Adam", &k), SC_ERR_INVALID);
    cr_assert(strstr(sc_error_message(), "'Adam'"));
}
