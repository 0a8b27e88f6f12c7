/* What the hook set and the user functions share (control/registry.h):
 * the plugin names they keep, the check of a table's entry array, and the
 * hint after an unknown name. */
#include <criterion/criterion.h>
#include <string.h>

#include "control/registry.h"

Test(registry, plugin_names_are_copies_kept_until_freed)
{
    host_plugin_names names = {0};
    char plugin[] = "a.so";
    const char *a, *b;
    cr_assert_eq(host_plugin_names_keep(&names, plugin, &a), SC_OK);
    cr_assert_eq(host_plugin_names_keep(&names, "b.so", &b), SC_OK);
    plugin[0] = 'x';
    cr_expect_str_eq(a, "a.so");
    cr_expect_str_eq(b, "b.so");
    cr_expect_eq(names.n, 2);
    host_plugin_names_free(&names);
    cr_expect_eq(names.n, 0);
    cr_expect_null(names.names);
}

Test(registry, table_entries_need_an_array_for_a_count)
{
    int entries[1];
    cr_expect_eq(host_table_check_entries("hook table", "n_hooks", 0, "hooks", NULL), SC_OK);
    cr_expect_eq(host_table_check_entries("hook table", "n_hooks", 1, "hooks", entries), SC_OK);
    cr_expect_eq(host_table_check_entries("hook table", "n_hooks", 2, "hooks", NULL),
                 SC_ERR_PLUGIN);
    cr_expect_str_eq(sc_error_message(), "hook table has n_hooks 2 and hooks NULL");
    cr_expect_eq(host_table_check_entries("t", "n", -1, "items", entries), SC_ERR_PLUGIN);
    cr_expect_str_eq(sc_error_message(), "t has n -1 and items set");
}

Test(registry, name_hint_suggests_the_nearest_else_lists)
{
    static const char *const known[] = {"epoch_end", "batch_end", "train_begin"};
    char hint[64];
    cr_expect_str_eq(host_name_hint("epoch_ned", known, 3, "known", hint, sizeof hint),
                     "did you mean 'epoch_end'?");
    cr_expect_str_eq(host_name_hint("zzz", known, 3, "known", hint, sizeof hint),
                     "known: epoch_end, batch_end, train_begin");
    char small[16];
    cr_expect_str_eq(host_name_hint("zzz", known, 3, "known", small, sizeof small),
                     "known: epoch_en");
}
