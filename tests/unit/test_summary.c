/* The model summary's rows (scorch/summary.h): one per layer scope, with
 * the layer's output shape, the parameters it uses first and its forward
 * FLOPs; and how the nn layers' scopes nest and join. */
#include <criterion/criterion.h>
#include <string.h>

#include "op_fixture.h"
#include "scorch/scorch.h"

enum { N = 4, IN = 5, HIDDEN = 3, OUT = 2, MAX_ROWS = 8 };

static sc_nn_linear fc1, fc2;

static void setup(void)
{
    op_fixture_setup(5);
    sc_ctx_set_grad_enabled(ctx, true);
}

TestSuite(summary, .init = setup, .fini = op_fixture_teardown);

static void make_layers(const char *name1, const char *name2)
{
    cr_assert_eq(sc_nn_linear_init(&fc1, ps, name1, IN, HIDDEN, true, &rng), SC_OK, "%s",
                 sc_error_message());
    cr_assert_eq(sc_nn_linear_init(&fc2, ps, name2, HIDDEN, OUT, true, &rng), SC_OK, "%s",
                 sc_error_message());
}

static sc_tensor *input(void)
{
    sc_tensor *x = sc_tensor_zeros(ctx, SC_F32, 2, (int64_t[]){N, IN}); /* [N, IN] */
    cr_assert_not_null(x);
    return x;
}

static int rows_of(sc_layer_info *rows)
{
    int count = -1;
    cr_assert_eq(sc_summary_layers(ctx, rows, MAX_ROWS, &count), SC_OK, "%s",
                 sc_error_message());
    cr_assert_leq(count, MAX_ROWS);
    return count;
}

static void expect_row(const sc_layer_info *r, const char *name, const char *op,
                       int64_t cols, int64_t params, double flops)
{
    cr_expect_str_eq(r->name, name);
    cr_expect_str_eq(r->op, op, "row %s", name);
    cr_expect_eq(r->ndim, 2, "row %s", name);
    cr_expect_eq(r->shape[0], N, "row %s", name);
    cr_expect_eq(r->shape[1], cols, "row %s", name);
    cr_expect_eq(r->params, params, "row %s", name);
    cr_expect_float_eq(r->flops, flops, 1e-9, "row %s: %g FLOPs", name, r->flops);
}

/* A linear layer: 2 N IN OUT for the product, N OUT for the bias. */
static double linear_flops(int64_t in, int64_t out)
{
    return 2.0 * N * in * out + (double)N * out;
}

Test(summary, two_linear_layers_and_an_unscoped_relu)
{
    make_layers("fc1", "fc2");
    sc_tensor *h = sc_relu(ctx, sc_nn_linear_forward(ctx, &fc1, input())); /* [N, HIDDEN] */
    cr_assert_not_null(sc_nn_linear_forward(ctx, &fc2, h));               /* [N, OUT] */
    sc_layer_info rows[MAX_ROWS];
    cr_assert_eq(rows_of(rows), 3);
    expect_row(&rows[0], "fc1", "linear", HIDDEN, IN * HIDDEN + HIDDEN,
               linear_flops(IN, HIDDEN));
    expect_row(&rows[1], "relu", "relu", HIDDEN, 0, N * HIDDEN); /* one per element */
    expect_row(&rows[2], "fc2", "linear", OUT, HIDDEN * OUT + OUT, linear_flops(HIDDEN, OUT));
}

Test(summary, a_scope_opened_by_the_caller_takes_the_activation_in)
{
    make_layers("fc1", "fc2");
    sc_ctx_push_scope(ctx, "fc1");
    sc_tensor *h = sc_relu(ctx, sc_nn_linear_forward(ctx, &fc1, input()));
    sc_ctx_pop_scope(ctx);
    cr_assert_not_null(sc_nn_linear_forward(ctx, &fc2, h));
    sc_layer_info rows[MAX_ROWS];
    cr_assert_eq(rows_of(rows), 2);
    expect_row(&rows[0], "fc1", "linear", HIDDEN, IN * HIDDEN + HIDDEN,
               linear_flops(IN, HIDDEN) + N * HIDDEN);
    cr_expect_str_eq(sc_ctx_scope(ctx), "");
}

Test(summary, layers_in_a_block_are_named_below_it)
{
    make_layers("block.fc1", "block.fc2");
    sc_ctx_push_scope(ctx, "block");
    sc_tensor *h = sc_nn_linear_forward(ctx, &fc1, input());
    h = sc_nn_linear_forward(ctx, &fc2, h);
    sc_tensor *y = sc_relu(ctx, h); /* the block's own op */
    sc_ctx_pop_scope(ctx);
    cr_assert_not_null(y);
    sc_layer_info rows[MAX_ROWS];
    cr_assert_eq(rows_of(rows), 3);
    cr_expect_str_eq(rows[0].name, "block.fc1");
    cr_expect_str_eq(rows[1].name, "block.fc2");
    expect_row(&rows[2], "block", "relu", OUT, 0, N * OUT);
}

Test(summary, a_layer_used_twice_counts_its_parameters_once)
{
    make_layers("fc1", "fc2");
    sc_tensor *h = sc_nn_linear_forward(ctx, &fc1, input());
    sc_tensor *x2 = sc_tensor_zeros(ctx, SC_F32, 2, (int64_t[]){N, IN});
    sc_tensor *h2 = sc_nn_linear_forward(ctx, &fc1, x2);
    cr_assert_not_null(sc_add(ctx, h, h2));
    sc_layer_info rows[MAX_ROWS];
    /* fc1 twice in a row is one run of one scope, so one row. */
    cr_assert_eq(rows_of(rows), 2);
    expect_row(&rows[0], "fc1", "linear", HIDDEN, IN * HIDDEN + HIDDEN,
               2 * linear_flops(IN, HIDDEN));
    cr_expect_str_eq(rows[1].op, "add");
}

Test(summary, nothing_is_taped_with_grad_mode_off)
{
    make_layers("fc1", "fc2");
    sc_ctx_set_grad_enabled(ctx, false);
    cr_assert_not_null(sc_nn_linear_forward(ctx, &fc1, input()));
    sc_layer_info rows[MAX_ROWS];
    cr_expect_eq(rows_of(rows), 0);
}

Test(summary, more_layers_than_rows_reports_the_count)
{
    make_layers("fc1", "fc2");
    sc_tensor *h = sc_relu(ctx, sc_nn_linear_forward(ctx, &fc1, input()));
    cr_assert_not_null(sc_nn_linear_forward(ctx, &fc2, h));
    sc_layer_info rows[1];
    int count = 0;
    cr_assert_eq(sc_summary_layers(ctx, rows, 1, &count), SC_OK);
    cr_expect_eq(count, 3);
    cr_expect_str_eq(rows[0].name, "fc1");
}
