/* The model summary's rows (scorch/summary.h): one per layer scope, with
 * the layer's output shape, the parameters it uses first and its forward
 * FLOPs; and how the nn layers' scopes nest and join. Then the table
 * scorch-train --summary prints of it (host/run/model_summary.c). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
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

/* ---- scorch-train --summary (host/run/model_summary.c) -------------------- */

/* The stdout of scorch-train --summary of the mlp with model_args, into out. */
static void mlp_summary(const char *model_args, char *out, size_t size)
{
    const char *root = getenv("SCORCH_BUILD_ROOT");
    cr_assert_not_null(root, "SCORCH_BUILD_ROOT is not set");
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "%s/host/scorch-train --model %s/plugins/mlp.so --model-args '%s' --dataset "
             "%s/plugins/fashion_mnist.so --dataset-path /usr/share/datasets/fashion-mnist "
             "--summary",
             root, root, model_args, root);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p, "%s", cmd);
    size_t n = fread(out, 1, size - 1, p);
    out[n] = '\0';
    cr_assert_eq(pclose(p), 0, "%s failed:\n%s", cmd, out);
}

/* The table's line of layer name, or NULL. */
static const char *layer_line(const char *table, const char *name, char *line, size_t size)
{
    size_t len = strlen(name);
    for (const char *l = table; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (strncmp(l, name, len) == 0 && l[len] == ' ') {
            size_t n = strcspn(l, "\n");
            snprintf(line, size, "%.*s", (int)(n < size ? n : size - 1), l);
            return line;
        }
    return NULL;
}

Test(model_summary, frozen_layers_are_listed_marked_and_counted)
{
    static char plain[8192], frozen[8192];
    mlp_summary("", plain, sizeof plain);
    mlp_summary("freeze=fc1", frozen, sizeof frozen);
    /* fc1 784->256, fc2 256->128, fc3 128->10, biases and relus: 470.3K */
    const char *total = "470.3K FLOPs forward per sample";
    cr_expect(strstr(plain, total), "%s", plain);
    cr_expect(strstr(frozen, total), "a frozen layer's FLOPs are left out:\n%s", frozen);
    cr_expect(strstr(frozen, "235,146 parameters and buffers, 34,186 trainable"), "%s", frozen);
    char line[256];
    cr_assert(layer_line(frozen, "fc1", line, sizeof line), "no fc1 row:\n%s", frozen);
    cr_expect(strstr(line, "200,960") && strstr(line, "frozen"), "fc1: '%s'", line);
    cr_assert(layer_line(frozen, "fc2", line, sizeof line), "no fc2 row:\n%s", frozen);
    cr_expect_not(strstr(line, "frozen"), "fc2 trains: '%s'", line);
    cr_expect_not(strstr(plain, "frozen"), "nothing is frozen:\n%s", plain);
}
