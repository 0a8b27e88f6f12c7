/* The nn building blocks (scorch/nn.h): the parameters each creates (names,
 * shapes, buffers, initial values), what their forward passes compute and
 * the summary rows they make. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "op_fixture.h"
#include "scorch/scorch.h"
#include "scorch_host/context.h"


static void setup(void)
{
    op_fixture_setup(11);
}

TestSuite(nn, .init = setup, .fini = op_fixture_teardown);

/* ---- helpers ---- */

static void ok(sc_status st)
{
    cr_assert_eq(st, SC_OK, "%s", sc_error_message());
}

/* Parameter i of the store has this name and shape (ndim values). */
static void expect_param(int i, const char *name, int ndim, const int64_t *shape)
{
    cr_assert_lt(i, sc_params_count(ps), "no parameter %d (%s)", i, name);
    const sc_tensor *t = sc_params_at(ps, i);
    cr_expect_str_eq(t->name, name, "parameter %d", i);
    cr_assert_eq(t->ndim, ndim, "%s", name);
    for (int d = 0; d < ndim; d++)
        cr_expect_eq(t->shape[d], shape[d], "%s dim %d", name, d);
}

static bool all_equal(const sc_tensor *t, float v)
{
    for (int64_t i = 0; i < t->numel; i++)
        if (sc_tensor_f32(t)[i] != v)
            return false;
    return true;
}

/* Within +-bound, and spread over it (not all tiny). */
static void expect_uniform(const sc_tensor *t, float bound)
{
    float largest = 0;
    for (int64_t i = 0; i < t->numel; i++)
        largest = fmaxf(largest, fabsf(sc_tensor_f32(t)[i]));
    cr_expect_leq(largest, bound, "%s: %g beyond %g", t->name, largest, bound);
    cr_expect_gt(largest, 0.5f * bound, "%s: %g, bound %g", t->name, largest, bound);
}

static sc_tensor *random_input(int ndim, const int64_t *shape)
{
    sc_tensor *x = sc_tensor_new(ctx, SC_F32, ndim, shape);
    cr_assert_not_null(x);
    for (int64_t i = 0; i < x->numel; i++)
        sc_tensor_f32(x)[i] = sc_rng_normal(&rng);
    return x;
}

static void expect_shape(const sc_tensor *t, int ndim, const int64_t *shape)
{
    cr_assert_not_null(t, "%s", sc_error_message());
    char got[64], want[64];
    cr_expect(t->ndim == ndim && memcmp(t->shape, shape, (size_t)ndim * sizeof *shape) == 0,
              "shape %s, expected %s", sc_shape_str(t->ndim, t->shape, got, sizeof got),
              sc_shape_str(ndim, shape, want, sizeof want));
}

/* ---- parameters ---- */

Test(nn, conv2d_parameters_and_default_init)
{
    sc_nn_conv2d conv;
    ok(sc_nn_conv2d_init(&conv, ps, "conv",
                         &(sc_nn_conv2d_config){.in = 8, .out = 6, .kernel = 3, .groups = 2,
                                                .bias = true},
                         &rng));
    expect_param(0, "conv.weight", 4, (int64_t[]){6, 4, 3, 3});
    expect_param(1, "conv.bias", 1, (int64_t[]){6});
    float bound = 1.0f / sqrtf(4 * 3 * 3); /* fan_in = IN / groups * K * K */
    expect_uniform(conv.weight, bound);
    expect_uniform(conv.bias, bound);
    cr_expect_str_eq(conv.name, "conv");
    cr_expect_eq(conv.opts.stride[0], 1);
    cr_expect_eq(conv.opts.dilation[1], 1);
    cr_expect_eq(conv.opts.groups, 2);
}

Test(nn, conv2d_refuses_groups_that_do_not_divide)
{
    sc_nn_conv2d conv;
    cr_expect_eq(sc_nn_conv2d_init(&conv, ps, "conv",
                                   &(sc_nn_conv2d_config){.in = 6, .out = 4, .kernel = 3,
                                                          .groups = 4},
                                   &rng),
                 SC_ERR_INVALID);
    cr_expect(strstr(sc_error_message(), "groups"), "%s", sc_error_message());
    cr_expect_eq(sc_params_count(ps), 0);
}

Test(nn, batch_norm_parameters_and_buffers)
{
    sc_nn_batch_norm bn;
    ok(sc_nn_batch_norm_init(&bn, ps, "bn", 5));
    const char *names[] = {"bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"};
    const float values[] = {1, 0, 0, 1};
    for (int i = 0; i < 4; i++) {
        expect_param(i, names[i], 1, (int64_t[]){5});
        cr_expect(all_equal(sc_params_at(ps, i), values[i]), "%s", names[i]);
    }
    cr_expect(bn.running_mean->flags & SC_TENSOR_BUFFER);
    cr_expect(!(bn.running_var->flags & SC_TENSOR_REQUIRES_GRAD));
    cr_expect(bn.weight->flags & SC_TENSOR_REQUIRES_GRAD);
    cr_expect_eq(sc_params_trainable_numel(ps), 10);
    cr_expect_float_eq(bn.momentum, 0.1f, 1e-9);
    cr_expect_float_eq(bn.eps, 1e-5f, 1e-12);
}

Test(nn, layer_norm_parameters)
{
    sc_nn_layer_norm ln;
    ok(sc_nn_layer_norm_init(&ln, ps, "ln", 7));
    expect_param(0, "ln.weight", 1, (int64_t[]){7});
    expect_param(1, "ln.bias", 1, (int64_t[]){7});
    cr_expect(all_equal(ln.weight, 1) && all_equal(ln.bias, 0));
}

Test(nn, conv_bn_has_no_conv_bias)
{
    sc_nn_conv_bn block;
    ok(sc_nn_conv_bn_init(&block, ps, "conv1",
                          &(sc_nn_conv2d_config){.in = 1, .out = 32, .kernel = 3, .padding = 1,
                                                 .bias = true},
                          true, &rng));
    cr_assert_eq(sc_params_count(ps), 5);
    expect_param(0, "conv1.conv.weight", 4, (int64_t[]){32, 1, 3, 3});
    expect_param(1, "conv1.bn.weight", 1, (int64_t[]){32});
    expect_param(4, "conv1.bn.running_var", 1, (int64_t[]){32});
    cr_expect_null(block.conv.bias);
}

Test(nn, se_block_squeezes_by_the_reduction)
{
    sc_nn_se se;
    ok(sc_nn_se_init(&se, ps, "se", 32, 8, &rng));
    expect_param(0, "se.reduce.weight", 2, (int64_t[]){4, 32});
    expect_param(1, "se.reduce.bias", 1, (int64_t[]){4});
    expect_param(2, "se.expand.weight", 2, (int64_t[]){32, 4});
    expect_param(3, "se.expand.bias", 1, (int64_t[]){32});
    sc_nn_se small;
    ok(sc_nn_se_init(&small, ps, "small", 4, 16, &rng)); /* at least one hidden unit */
    expect_param(4, "small.reduce.weight", 2, (int64_t[]){1, 4});
}

Test(nn, residual_projects_only_when_the_shape_changes)
{
    sc_nn_residual same, down;
    ok(sc_nn_residual_init(&same, ps, "s1.0", 16, 16, 1, 0, &rng));
    cr_expect(!same.has_shortcut && !same.has_se);
    cr_expect_eq(sc_params_count(ps), 10); /* two conv-bn: 1 + 4 each */
    expect_param(0, "s1.0.conv1.conv.weight", 4, (int64_t[]){16, 16, 3, 3});
    expect_param(5, "s1.0.conv2.conv.weight", 4, (int64_t[]){16, 16, 3, 3});
    ok(sc_nn_residual_init(&down, ps, "s2.0", 16, 32, 2, 4, &rng));
    cr_expect(down.has_shortcut && down.has_se);
    expect_param(10, "s2.0.conv1.conv.weight", 4, (int64_t[]){32, 16, 3, 3});
    expect_param(15, "s2.0.conv2.conv.weight", 4, (int64_t[]){32, 32, 3, 3});
    expect_param(20, "s2.0.se.reduce.weight", 2, (int64_t[]){8, 32});
    expect_param(24, "s2.0.shortcut.conv.weight", 4, (int64_t[]){32, 16, 1, 1});
    cr_expect_eq(down.shortcut.conv.opts.stride[0], 2);
    cr_expect_eq(down.conv1.conv.opts.stride[1], 2);
    cr_expect_eq(down.conv2.conv.opts.stride[1], 1);
}

Test(nn, duplicate_and_overlong_names_are_refused)
{
    sc_nn_linear a, b;
    ok(sc_nn_linear_init(&a, ps, "fc", 3, 2, true, &rng));
    cr_expect_eq(sc_nn_linear_init(&b, ps, "fc", 3, 2, true, &rng), SC_ERR_INVALID);
    cr_expect(strstr(sc_error_message(), "fc.weight"), "%s", sc_error_message());
    char longname[SC_NN_NAME_MAX + 8];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    cr_expect_eq(sc_nn_batch_norm_init(&(sc_nn_batch_norm){0}, ps, longname, 4),
                 SC_ERR_INVALID);
}

/* ---- forward ---- */

Test(nn, conv_bn_forward_shape_and_running_statistics)
{
    sc_nn_conv_bn block;
    ok(sc_nn_conv_bn_init(&block, ps, "cb",
                          &(sc_nn_conv2d_config){.in = 3, .out = 4, .kernel = 3, .stride = 2,
                                                 .padding = 1},
                          true, &rng));
    sc_ctx_set_training(ctx, true);
    sc_tensor *x = random_input(4, (int64_t[]){2, 3, 8, 8});
    sc_tensor *y = sc_nn_conv_bn_forward(ctx, &block, x);
    expect_shape(y, 4, (int64_t[]){2, 4, 4, 4});
    for (int64_t i = 0; i < y->numel; i++)
        cr_assert_geq(sc_tensor_f32(y)[i], 0.0f, "relu");
    cr_expect(!all_equal(block.bn.running_var, 1.0f), "running_var not updated in training");
    float before[4];
    memcpy(before, block.bn.running_mean->data, sizeof before);
    sc_ctx_set_training(ctx, false);
    cr_assert_not_null(sc_nn_conv_bn_forward(ctx, &block, x));
    cr_expect_arr_eq(before, block.bn.running_mean->data, sizeof before, "eval changed them");
}

/* The pooled block is one summary row, and max_pool2d of the block's
 * output, in eval mode (the running statistics: both runs see the same). */
Test(nn, conv_bn_max_pool_pools_the_block)
{
    sc_nn_conv_bn block;
    ok(sc_nn_conv_bn_init(&block, ps, "stage1",
                          &(sc_nn_conv2d_config){.in = 3, .out = 4, .kernel = 3, .padding = 1},
                          true, &rng));
    sc_ctx_set_training(ctx, false);
    sc_ctx_set_grad_enabled(ctx, true);
    const sc_pool2d_opts pool = {.kernel = {2, 2}};
    sc_tensor *x = random_input(4, (int64_t[]){2, 3, 7, 6});
    sc_tensor *y = sc_nn_conv_bn_max_pool_forward(ctx, &block, x, &pool);
    expect_shape(y, 4, (int64_t[]){2, 4, 3, 3});
    sc_layer_info rows[4];
    int count = 0;
    ok(sc_summary_layers(ctx, rows, 4, &count));
    cr_assert_eq(count, 1, "conv and the pooled batch norm in the block's row");
    cr_expect_str_eq(rows[0].name, "stage1");
    sc_tensor *want = sc_max_pool2d(ctx, sc_nn_conv_bn_forward(ctx, &block, x), &pool);
    cr_assert_not_null(want, "%s", sc_error_message());
    cr_expect_arr_eq(y->data, want->data, sc_tensor_nbytes(y));
}

Test(nn, se_with_zero_excitation_halves_the_input)
{
    sc_nn_se se;
    ok(sc_nn_se_init(&se, ps, "se", 6, 2, &rng));
    sc_init_constant(se.expand.weight, 0.0f);
    sc_init_constant(se.expand.bias, 0.0f); /* sigmoid(0) = 1/2 for every channel */
    sc_tensor *x = random_input(4, (int64_t[]){2, 6, 3, 5});
    sc_tensor *y = sc_nn_se_forward(ctx, &se, x);
    expect_shape(y, 4, (int64_t[]){2, 6, 3, 5});
    for (int64_t i = 0; i < y->numel; i++)
        cr_assert_float_eq(sc_tensor_f32(y)[i], 0.5f * sc_tensor_f32(x)[i], 1e-6);
}

Test(nn, residual_adds_its_input_without_projection)
{
    sc_nn_residual block;
    ok(sc_nn_residual_init(&block, ps, "res", 4, 4, 1, 0, &rng));
    sc_ctx_set_training(ctx, false); /* batch norm on the running statistics: deterministic */
    sc_tensor *x = random_input(4, (int64_t[]){2, 4, 5, 5});
    sc_tensor *y = sc_nn_residual_forward(ctx, &block, x);
    expect_shape(y, 4, (int64_t[]){2, 4, 5, 5});
    sc_tensor *f = sc_nn_conv_bn_forward(ctx, &block.conv2,
                                         sc_nn_conv_bn_forward(ctx, &block.conv1, x));
    cr_assert_not_null(f);
    for (int64_t i = 0; i < y->numel; i++) {
        float want = fmaxf(0.0f, sc_tensor_f32(f)[i] + sc_tensor_f32(x)[i]);
        cr_assert_float_eq(sc_tensor_f32(y)[i], want, 1e-5, "element %lld", (long long)i);
    }
}

Test(nn, residual_block_rows_in_the_summary)
{
    sc_nn_residual block;
    ok(sc_nn_residual_init(&block, ps, "stage2.0", 4, 8, 2, 2, &rng));
    sc_ctx_set_grad_enabled(ctx, true);
    sc_tensor *y = sc_nn_residual_forward(ctx, &block, random_input(4, (int64_t[]){1, 4, 6, 6}));
    expect_shape(y, 4, (int64_t[]){1, 8, 3, 3});
    cr_expect_str_eq(sc_ctx_scope(ctx), "");
    sc_layer_info rows[8];
    int count = 0;
    ok(sc_summary_layers(ctx, rows, 8, &count));
    const char *names[] = {"stage2.0.conv1", "stage2.0.conv2", "stage2.0.se",
                           "stage2.0.shortcut", "stage2.0"};
    cr_assert_eq(count, 5);
    int64_t params = 0;
    for (int i = 0; i < count; i++) {
        cr_expect_str_eq(rows[i].name, names[i]);
        params += rows[i].params;
    }
    cr_expect_str_eq(rows[0].op, "conv2d");
    cr_expect_eq(params, sc_params_numel(ps), "every parameter and buffer in some row");
}

Test(nn, a_layer_too_large_is_named)
{
    const int64_t big = INT64_C(1) << 40;
    sc_nn_linear fc;
    cr_expect_eq(sc_nn_linear_init(&fc, ps, "fc1", big, big, true, &rng), SC_ERR_INVALID);
    cr_expect(strstr(sc_error_message(), "fc1") && strstr(sc_error_message(), "too large"),
              "%s", sc_error_message());
    sc_nn_conv2d conv;
    sc_nn_conv2d_config config = {.in = big, .out = big, .kernel = 3};
    cr_expect_eq(sc_nn_conv2d_init(&conv, ps, "stem", &config, &rng), SC_ERR_INVALID);
    cr_expect(strstr(sc_error_message(), "stem"), "%s", sc_error_message());
}
