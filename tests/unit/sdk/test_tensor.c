/* Tensor shapes whose element or byte counts overflow 64 bits: refused by
 * sc_tensor_init, never computed (a shape may come from a checkpoint with
 * a valid CRC, a plugin's spec or --batch-size). */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "scorch/tensor.h"

Test(tensor, mul_i64_says_when_a_product_does_not_fit)
{
    int64_t p = -1;
    cr_assert(sc_mul_i64(3, INT64_MAX / 3, &p));
    cr_assert_eq(p, INT64_MAX / 3 * 3);
    cr_assert(sc_mul_i64(INT64_MIN, 1, &p));
    cr_assert_eq(p, INT64_MIN);
    p = 7;
    cr_assert_not(sc_mul_i64(INT64_MAX / 2 + 1, 2, &p));
    cr_assert_not(sc_mul_i64(INT64_MIN, -1, &p));
    cr_assert_eq(p, 7, "a product that does not fit is not stored");
}

/* sc_tensor_init must fail with a message naming the shape. */
static void expect_too_large(sc_dtype dtype, int ndim, const int64_t *shape, const char *text)
{
    sc_tensor t;
    sc_error_clear();
    cr_assert_eq(sc_tensor_init(&t, dtype, ndim, shape), SC_ERR_INVALID, "%s accepted", text);
    cr_assert(strstr(sc_error_message(), text) && strstr(sc_error_message(), "too large"), "%s",
              sc_error_message());
}

Test(tensor, init_refuses_shapes_whose_size_overflows)
{
    /* --batch-size 2^62 of 784 floats */
    expect_too_large(SC_F32, 2, (const int64_t[]){INT64_C(1) << 62, 784},
                     "[4611686018427387904, 784]");
    /* 2^62 elements fit, their bytes do not */
    expect_too_large(SC_F32, 1, (const int64_t[]){INT64_C(1) << 62}, "[4611686018427387904]");
    /* empty, but 3 * 2^62 rows of nothing: any stride over it overflows */
    expect_too_large(SC_U8, 3, (const int64_t[]){3, INT64_C(1) << 62, 0},
                     "[3, 4611686018427387904, 0]");
    expect_too_large(SC_I64, 3, (const int64_t[]){0, INT64_MAX, 2}, "[0, 9223372036854775807, 2]");
}

Test(tensor, init_takes_the_largest_shapes_that_fit)
{
    sc_tensor t;
    cr_assert_eq(sc_tensor_init(&t, SC_U8, 2, (const int64_t[]){INT64_C(1) << 31, INT64_C(1) << 31}),
                 SC_OK, "%s", sc_error_message());
    cr_assert_eq(t.numel, INT64_C(1) << 62);
    cr_assert_eq(sc_tensor_init(&t, SC_F32, 2, (const int64_t[]){INT64_C(1) << 60, 0}), SC_OK,
                 "%s", sc_error_message());
    cr_assert_eq(t.numel, 0);
    cr_assert_eq(t.shape[0], INT64_C(1) << 60);
}

Test(tensor, alloc_of_a_shape_that_overflows_returns_null_with_the_reason)
{
    sc_error_clear();
    cr_assert_null(sc_tensor_alloc(SC_F32, 2, (const int64_t[]){INT64_C(1) << 62, 784}));
    cr_assert(strstr(sc_error_message(), "too large"), "%s", sc_error_message());
}
