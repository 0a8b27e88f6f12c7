/* What the shipped plugins share (plugins/common/): the words their
 * messages use for a dataset's tensor. */
#include <criterion/criterion.h>
#include <string.h>

#include "../../../plugins/common/spec.h"

Test(plugin_common, spec_str_names_dtype_and_shape)
{
    char buf[64];
    const sc_tensor_spec image = {SC_F32, 3, {1, 28, 28}}, label = {SC_I64, 0, {0}};
    cr_expect_str_eq(spec_str(&image, buf, sizeof buf), "f32 [1, 28, 28]");
    cr_expect_str_eq(spec_str(&label, buf, sizeof buf), "i64 []");
}

Test(plugin_common, spec_str_cuts_to_the_buffer)
{
    char buf[8];
    const sc_tensor_spec image = {SC_F32, 3, {1, 28, 28}};
    cr_expect_eq(spec_str(&image, buf, sizeof buf), buf);
    cr_expect_str_eq(buf, "f32 [1,");
}
