#include "op_fixture.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>

#include "gradcheck.h"

sc_ctx *ctx;
sc_params *ps;
sc_rng rng;
static int n_params;

void op_fixture_setup(uint64_t seed)
{
    ctx = sc_ctx_new((sc_device){SC_DEVICE_CPU, 0});
    ps = sc_params_new();
    cr_assert(ctx && ps);
    sc_rng_init(&rng, seed, 0);
    n_params = 0;
}

void op_fixture_teardown(void)
{
    sc_params_free(ps);
    sc_ctx_free(ctx);
}

sc_tensor *test_param(int ndim, const int64_t *shape)
{
    char name[32];
    snprintf(name, sizeof name, "p%d", n_params++);
    sc_tensor *t = gradcheck_param(ps, name, ndim, shape, -1.0f, 1.0f, &rng);
    cr_assert_not_null(t, "%s", sc_error_message());
    return t;
}

void expect_values(const sc_tensor *t, const float *want, int64_t n, double tol)
{
    cr_assert_not_null(t, "%s", sc_error_message());
    cr_assert_eq(t->numel, n);
    for (int64_t i = 0; i < n; i++)
        cr_assert(fabs(sc_tensor_f32(t)[i] - want[i]) <= tol, "element %lld: %.8g, want %.8g",
                  (long long)i, (double)sc_tensor_f32(t)[i], (double)want[i]);
}
