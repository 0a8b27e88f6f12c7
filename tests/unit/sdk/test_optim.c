/* Optimizers against PyTorch 1.13: torch.optim.SGD/Adam/AdamW, lr 0.1, on a
 * 4-element parameter over 3 steps with the gradients below. The expected
 * numbers were printed by PyTorch and are hard-coded here. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "scorch_host/optim.h"
#include "scorch_host/params.h"

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

/* |got - want| within 1e-6 of |want|, or 2e-7 near 0 (a float's rounding
 * at 1 where the result cancels to almost nothing). */
static void assert_rel(const float *got, const float *want, int64_t n, const char *what)
{
    for (int64_t i = 0; i < n; i++)
        cr_assert(fabsf(got[i] - want[i]) <= 1e-6f * fabsf(want[i]) + 2e-7f,
                  "%s[%lld]: got %.9g, want %.9g", what, (long long)i, got[i], want[i]);
}

/* Runs 3 steps of config on one parameter, checks it after each and the
 * state's buffers (names[i], want_state[i]) after the last. The numbers
 * come from tests/unit/sdk/optim_oracle.py (torch.optim.RMSprop). */
static void check_torch(const sc_optim_config *c, const float want[STEPS][N], int nstate,
                        const char *const names[], const float (*want_state)[N])
{
    sc_params *ps = store_with("w", N);
    fill_p0(ps);
    sc_optim *opt = sc_optim_new(ps, c);
    cr_assert_not_null(opt, "%s", sc_error_message());
    for (int s = 0; s < STEPS; s++) {
        run_steps(ps, opt, s, s + 1);
        assert_rel(sc_params_values(ps), want[s], N, "param");
    }
    cr_assert_eq(sc_optim_state_count(opt), nstate);
    for (int i = 0; i < nstate; i++) {
        cr_assert_str_eq(sc_optim_state_at(opt, i)->name, names[i]);
        assert_rel(sc_tensor_f32(sc_optim_state_at(opt, i)), want_state[i], N, names[i]);
    }
    sc_optim_free(opt);
    sc_params_free(ps);
}

Test(optim, rmsprop)
{
    static const float want[STEPS][N] = {
        {-0.499999046f, -3.57627869e-07f, 1.00000024f, -1.24999976f},
        {0.480770051f, -0.782397091f, 1.00000024f, -2.17911744f},
        {-0.0282889605f, -1.46869814f, 1.92056763f, -2.08614206f}};
    static const float state[][N] = {
        {0.00347301015f, 0.0019107901f, 0.00578208966f, 0.0115681598f}};
    sc_optim_config c = sc_optim_defaults(SC_OPTIM_RMSPROP);
    check_torch(&c, want, 1, (const char *const[]){"square_avg"}, state);
}

Test(optim, rmsprop_momentum_weight_decay)
{
    static const float want[STEPS][N] = {
        {-0.499999344f, -2.71201145e-07f, 1.00000012f, -1.24999988f},
        {-0.43490088f, 0.257917792f, -0.0970655382f, -3.06985855f},
        {-0.78847301f, -0.153576463f, -0.269589037f, -4.31269884f}};
    static const float state[][N] = {
        {0.00387324532f, 0.00256224303f, 0.00758608384f, 0.0106143281f},
        {3.53572106f, 4.11494255f, 1.72523499f, 12.4284019f}};
    sc_optim_config c = sc_optim_defaults(SC_OPTIM_RMSPROP);
    c.momentum = 0.9;
    c.weight_decay = 0.1;
    check_torch(&c, want, 2, (const char *const[]){"square_avg", "momentum"}, state);
}

Test(optim, rmsprop_centered_momentum)
{
    static const float want[STEPS][N] = {
        {0.166666761f, -0.666666746f, 1.66666675f, -0.583333313f},
        {0.321286172f, -0.75252533f, 1.50000012f, -1.07291007f},
        {0.231574148f, -1.02867019f, 1.71733832f, -1.28460801f}};
    static const float state[][N] = {
        {0.0323100016f, 0.0178650003f, 0.0562900007f, 0.10396f},
        {0.897120178f, 2.76144886f, -2.17338204f, 2.1169796f},
        {-0.00689999713f, 0.0362999998f, -0.0456999987f, 0.112400003f}};
    sc_optim_config c = sc_optim_defaults(SC_OPTIM_RMSPROP);
    c.momentum = 0.5;
    c.centered = true;
    c.alpha = 0.9;
    check_torch(&c, want, 3, (const char *const[]){"square_avg", "momentum", "grad_avg"},
                state);
}

Test(optim, rmsprop_centered)
{
    static const float want[STEPS][N] = {
        {-0.505036831f, 0.00503742695f, 0.994962454f, -1.25503767f},
        {0.478780389f, -0.7774629f, 0.994962454f, -2.19207072f},
        {-0.0303476453f, -1.46599329f, 1.91684461f, -2.09842777f}};
    static const float state[][N] = {
        {0.00347301015f, 0.0019107901f, 0.00578208966f, 0.0115681598f},
        {-0.000969899818f, 0.00351479976f, -0.00405969936f, 0.0128204003f}};
    sc_optim_config c = sc_optim_defaults(SC_OPTIM_RMSPROP);
    c.centered = true;
    check_torch(&c, want, 2, (const char *const[]){"square_avg", "grad_avg"}, state);
}

/* Parameters a, b, c of N each; a and c as a PyTorch param group with lr
 * 0.05 and no weight decay, b in the default group. */
static void check_groups(const sc_optim_config *c, const float want_a[N], const float want_b[N],
                         const float want_c[N])
{
    sc_params *ps = sc_params_new();
    const int64_t shape[] = {N};
    sc_tensor *a = sc_params_add(ps, "a", 1, shape);
    sc_tensor *b = sc_params_add(ps, "b", 1, shape);
    sc_tensor *c3 = sc_params_add(ps, "c", 1, shape);
    cr_assert(a && b && c3);
    fill_p0(ps);
    sc_optim *opt = sc_optim_new(ps, c);
    cr_assert_not_null(opt, "%s", sc_error_message());
    cr_assert_eq(sc_optim_set_param(opt, a, 0.5, 0.0), SC_OK, "%s", sc_error_message());
    cr_assert_eq(sc_optim_set_param(opt, c3, 0.5, 0.0), SC_OK, "%s", sc_error_message());
    run_steps(ps, opt, 0, STEPS);
    assert_rel(sc_tensor_f32(a), want_a, N, "a");
    assert_rel(sc_tensor_f32(b), want_b, N, "b");
    assert_rel(sc_tensor_f32(c3), want_c, N, "c");
    sc_optim_free(opt);
    sc_params_free(ps);
}

static const float group_a_sgd[N] = {0.518949986f, -1.01164997f, 1.99435008f, -0.394199997f};
static const float group_a_adam[N] = {0.483644426f, -0.984572649f, 1.9356668f, -0.380194932f};
static const float group_a_rmsprop[N] = {0.106048107f, -1.05494833f, 1.58528399f,
                                         -1.77535033f};

Test(optim, param_groups_sgd)
{
    static const float b[N] = {0.50996846f, -0.968186975f, 1.87859511f, -0.521978736f};
    sc_optim_config c = sc_optim_defaults(SC_OPTIM_SGD);
    c.momentum = 0.9;
    c.weight_decay = 0.1;
    check_groups(&c, group_a_sgd, b, group_a_sgd);
}

Test(optim, param_groups_adam)
{
    static const float b[N] = {0.444341272f, -0.893998444f, 1.80602694f, -0.506476045f};
    sc_optim_config c = sc_optim_defaults(SC_OPTIM_ADAM);
    c.weight_decay = 0.1;
    check_groups(&c, group_a_adam, b, group_a_adam);
}

Test(optim, param_groups_adamw)
{
    static const float b[N] = {0.453830004f, -0.941271544f, 1.81459153f, -0.500034809f};
    sc_optim_config c = sc_optim_defaults(SC_OPTIM_ADAMW);
    c.weight_decay = 0.1;
    check_groups(&c, group_a_adam, b, group_a_adam);
}

Test(optim, param_groups_rmsprop)
{
    static const float b[N] = {-0.265736312f, -0.806771696f, 0.752898872f, -3.0182693f};
    sc_optim_config c = sc_optim_defaults(SC_OPTIM_RMSPROP);
    c.momentum = 0.5;
    c.weight_decay = 0.1;
    check_groups(&c, group_a_rmsprop, b, group_a_rmsprop);
}

Test(optim, set_param_refusals)
{
    sc_params *ps = store_with("w", N);
    sc_params *other = store_with("stranger", N);
    sc_optim_config c = sc_optim_defaults(SC_OPTIM_SGD);
    sc_optim *opt = sc_optim_new(ps, &c);
    sc_tensor *w = sc_params_at(ps, 0);
    cr_assert_eq(sc_optim_set_param(opt, sc_params_at(other, 0), 1.0, 0.0), SC_ERR_INVALID);
    cr_assert(strstr(sc_error_message(), "'stranger' is not in"), "%s", sc_error_message());
    cr_assert_eq(sc_optim_set_param(opt, w, -1.0, 0.0), SC_ERR_INVALID);
    cr_assert(strstr(sc_error_message(), "lr scale -1 of parameter 'w'"), "%s",
              sc_error_message());
    cr_assert_eq(sc_optim_set_param(opt, w, 1.0, NAN), SC_ERR_INVALID);
    cr_assert(strstr(sc_error_message(), "weight decay"), "%s", sc_error_message());
    run_steps(ps, opt, 0, 1);
    cr_assert_eq(sc_optim_set_param(opt, w, 1.0, 0.0), SC_ERR_INVALID);
    cr_assert(strstr(sc_error_message(), "after the first step"), "%s", sc_error_message());
    sc_optim_free(opt);
    sc_params_free(other);
    sc_params_free(ps);
}

/* LAMB from the paper (Algorithm 2, with Adam's bias correction as timm's
 * Lamb and apex's FusedLAMB), in double, on one parameter of N:
 * m, v = moments of g; u = m^ / (sqrt(v^) + eps) + wd * p;
 * p -= lr * (adapt ? ||p|| / ||u|| : 1) * u. */
static void lamb_reference(const sc_optim_config *c, double lr, double wd, double p[N])
{
    double m[N] = {0}, v[N] = {0}, u[N];
    for (int s = 0; s < STEPS; s++) {
        double bc1 = 1.0 - pow(c->beta1, s + 1), bc2 = 1.0 - pow(c->beta2, s + 1);
        double p_sq = 0.0, u_sq = 0.0;
        for (int i = 0; i < N; i++) {
            double g = grads[s][i];
            m[i] = c->beta1 * m[i] + (1.0 - c->beta1) * g;
            v[i] = c->beta2 * v[i] + (1.0 - c->beta2) * g * g;
            u[i] = m[i] / bc1 / (sqrt(v[i] / bc2) + c->eps) + wd * p[i];
            p_sq += p[i] * p[i];
            u_sq += u[i] * u[i];
        }
        double ratio = wd != 0.0 ? sqrt(p_sq) / sqrt(u_sq) : 1.0;
        for (int i = 0; i < N; i++)
            p[i] -= lr * ratio * u[i];
    }
}

/* Lion from the paper (Algorithm 1, as lion-pytorch), in double, on one
 * parameter of N: p = p * (1 - lr * wd) - lr * sign(b1 * m + (1 - b1) * g);
 * m = b2 * m + (1 - b2) * g. */
static void lion_reference(const sc_optim_config *c, double lr, double wd, double p[N])
{
    double m[N] = {0};
    for (int s = 0; s < STEPS; s++) {
        for (int i = 0; i < N; i++) {
            double g = grads[s][i], dir = c->beta1 * m[i] + (1.0 - c->beta1) * g;
            p[i] = p[i] * (1.0 - lr * wd) - lr * ((dir > 0.0) - (dir < 0.0));
            m[i] = c->beta2 * m[i] + (1.0 - c->beta2) * g;
        }
    }
}

typedef void reference_fn(const sc_optim_config *c, double lr, double wd, double p[N]);

/* Parameters a (the config's options) and b (lr * 0.5, no weight decay)
 * after 3 steps of config, against reference within 1e-5 relative. */
static void check_paper(const sc_optim_config *c, reference_fn *reference)
{
    sc_params *ps = sc_params_new();
    const int64_t shape[] = {N};
    sc_tensor *a = sc_params_add(ps, "a", 1, shape);
    sc_tensor *b = sc_params_add(ps, "b", 1, shape);
    cr_assert(a && b);
    fill_p0(ps);
    sc_optim *opt = sc_optim_new(ps, c);
    cr_assert_not_null(opt, "%s", sc_error_message());
    cr_assert_eq(sc_optim_set_param(opt, b, 0.5, 0.0), SC_OK, "%s", sc_error_message());
    run_steps(ps, opt, 0, STEPS);
    double want_a[N], want_b[N];
    for (int i = 0; i < N; i++)
        want_a[i] = want_b[i] = p0[i];
    reference(c, 0.1, c->weight_decay, want_a);
    reference(c, 0.05, 0.0, want_b);
    for (int i = 0; i < N; i++) {
        cr_assert(fabs(sc_tensor_f32(a)[i] - want_a[i]) <= 1e-5 * fabs(want_a[i]),
                  "a[%d]: got %.9g, want %.9g", i, sc_tensor_f32(a)[i], want_a[i]);
        cr_assert(fabs(sc_tensor_f32(b)[i] - want_b[i]) <= 1e-5 * fabs(want_b[i]),
                  "b[%d]: got %.9g, want %.9g", i, sc_tensor_f32(b)[i], want_b[i]);
    }
    sc_optim_free(opt);
    sc_params_free(ps);
}

Test(optim, lamb_against_the_paper)
{
    sc_optim_config c = sc_optim_defaults(SC_OPTIM_LAMB);
    c.weight_decay = 0.1;
    check_paper(&c, lamb_reference);
}

Test(optim, lion_against_the_paper)
{
    sc_optim_config c = sc_optim_defaults(SC_OPTIM_LION);
    c.weight_decay = 0.1;
    check_paper(&c, lion_reference);
}

Test(optim, new_kinds_defaults_names_and_state)
{
    cr_assert_float_eq(sc_optim_defaults(SC_OPTIM_RMSPROP).alpha, 0.99, 1e-12);
    cr_assert_float_eq(sc_optim_defaults(SC_OPTIM_LAMB).eps, 1e-6, 1e-18);
    cr_assert_float_eq(sc_optim_defaults(SC_OPTIM_LAMB).weight_decay, 0.01, 1e-12);
    cr_assert_float_eq(sc_optim_defaults(SC_OPTIM_LION).beta2, 0.99, 1e-12);
    sc_optim_kind k;
    for (int i = SC_OPTIM_RMSPROP; i <= SC_OPTIM_LION; i++) {
        cr_assert_eq(sc_optim_kind_parse(sc_optim_kind_name((sc_optim_kind)i), &k), SC_OK);
        cr_assert_eq(k, (sc_optim_kind)i);
    }
    sc_params *ps = store_with("w", N);
    sc_optim_config c = sc_optim_defaults(SC_OPTIM_LAMB);
    sc_optim *opt = sc_optim_new(ps, &c);
    cr_assert_eq(sc_optim_state_count(opt), 2);
    cr_assert_str_eq(sc_optim_state_at(opt, 1)->name, "exp_avg_sq");
    sc_optim_free(opt);
    c = sc_optim_defaults(SC_OPTIM_LION);
    opt = sc_optim_new(ps, &c);
    cr_assert_eq(sc_optim_state_count(opt), 1);
    cr_assert_str_eq(sc_optim_state_at(opt, 0)->name, "exp_avg");
    sc_optim_free(opt);
    sc_params_free(ps);
}

Test(optim, new_kinds_invalid_configs_refused)
{
    sc_optim_config c = sc_optim_defaults(SC_OPTIM_RMSPROP);
    c.alpha = 1.0;
    assert_refused(c, "rmsprop: alpha");
    c = sc_optim_defaults(SC_OPTIM_RMSPROP);
    c.momentum = -1.0;
    assert_refused(c, "rmsprop: momentum");
    c = sc_optim_defaults(SC_OPTIM_LAMB);
    c.eps = 0.0;
    assert_refused(c, "lamb: eps");
    c = sc_optim_defaults(SC_OPTIM_LION);
    c.beta2 = 1.0;
    assert_refused(c, "lion: betas");
}
