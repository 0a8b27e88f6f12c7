/* The plugin loader accepts valid plugins and refuses broken ones (the
 * fixtures in tests/fixtures) with a message naming the file and the fault. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/plugin_loader.h"

static const char *fixture_dir(void)
{
    static char dir[4096];
    snprintf(dir, sizeof dir, "%s/tests/fixtures", getenv("SCORCH_BUILD_ROOT"));
    return dir;
}

/* The built fixture `name`.so; valid until the next call. */
static const char *fixture(const char *name)
{
    static char path[4096 + 64];
    snprintf(path, sizeof path, "%s/%s.so", fixture_dir(), name);
    return path;
}

static void assert_message_has(const char *part)
{
    cr_assert(strstr(sc_error_message(), part), "message '%s' lacks '%s'", sc_error_message(),
              part);
}

/* Opening fixture `name` as a model fails with `code`, naming the file,
 * part1 and part2 (may be NULL), and leaves nothing to close. */
static void assert_model_refused(const char *name, sc_status code, const char *part1,
                                 const char *part2)
{
    host_model_lib m;
    const char *path = fixture(name);
    cr_assert_eq(host_model_lib_open(path, &m), code, "%s: %s", name, sc_error_message());
    assert_message_has(path);
    assert_message_has(part1);
    if (part2)
        assert_message_has(part2);
    cr_expect_null(m.lib.handle);
    cr_expect_null(m.lib.path);
    cr_expect_null(m.api);
}

Test(plugin_loader, opens_a_valid_model)
{
    host_model_lib m;
    const char *path = fixture("good_model");
    cr_assert_eq(host_model_lib_open(path, &m), SC_OK, "%s", sc_error_message());
    cr_expect_not_null(m.lib.handle);
    cr_expect_str_eq(m.lib.path, path);
    cr_expect_str_eq(m.api->name, "fixture_model");
    cr_expect_not_null(m.api->network_forward);
    cr_expect_null(m.lib.hooks, "good_model has no scorch_hooks");
    host_plugin_lib_close(&m.lib);
    cr_expect_null(m.lib.handle);
    cr_expect_null(m.lib.path);
}

Test(plugin_loader, refuses_a_missing_required_function)
{
    assert_model_refused("no_forward", SC_ERR_PLUGIN,
                         "model plugin 'fixture_model' leaves network_forward NULL (required)",
                         NULL);
}

Test(plugin_loader, refuses_another_abi_major)
{
    char built[64], speaks[64];
    snprintf(built, sizeof built, "built for plugin ABI 2.%d", SC_ABI_MINOR);
    snprintf(speaks, sizeof speaks, "this scorch speaks 1.%d", SC_ABI_MINOR);
    assert_model_refused("abi_major2", SC_ERR_PLUGIN, built, speaks);
}

Test(plugin_loader, refuses_a_newer_abi_minor)
{
    char built[64];
    snprintf(built, sizeof built, "built for plugin ABI 1.%d", SC_ABI_MINOR + 1);
    assert_model_refused("abi_minor_newer", SC_ERR_PLUGIN, built, NULL);
}

Test(plugin_loader, reads_preferred_device_only_from_structs_that_hold_it)
{
    host_model_lib m;
    cr_assert_eq(host_model_lib_open(fixture("model_prefers_auto"), &m), SC_OK, "%s",
                 sc_error_message());
    cr_expect_str_eq(host_model_preferred_device(&m), "auto");
    host_plugin_lib_close(&m.lib);
    cr_assert_eq(host_model_lib_open(fixture("good_model"), &m), SC_OK, "%s", sc_error_message());
    cr_expect_null(host_model_preferred_device(&m));
    host_plugin_lib_close(&m.lib);
    /* Built for 1.0: its struct ends before preferred_device, whose bytes
     * (here "auto") the loader must not read. */
    cr_assert_eq(host_model_lib_open(fixture("model_v1_0"), &m), SC_OK, "%s", sc_error_message());
    cr_expect_null(host_model_preferred_device(&m));
    host_plugin_lib_close(&m.lib);
}

Test(plugin_loader, refuses_a_preferred_device_it_cannot_read)
{
    assert_model_refused("model_prefers_gpu", SC_ERR_PLUGIN, "preferred_device: 'gpu' is not",
                         "cuda:N");
}

Test(plugin_loader, refuses_a_bad_magic)
{
    assert_model_refused("bad_magic", SC_ERR_PLUGIN, "bad magic number 0xdeadbeef", NULL);
}

Test(plugin_loader, refuses_a_struct_smaller_than_v1_0)
{
    assert_model_refused("small_size", SC_ERR_PLUGIN, "declares 20 bytes", "needs at least");
}

Test(plugin_loader, refuses_a_file_without_the_symbol)
{
    assert_model_refused("no_symbol", SC_ERR_PLUGIN, "exports no scorch_model_plugin",
                         "SC_PLUGIN_EXPORT");
}

Test(plugin_loader, tells_which_kind_of_plugin_was_given)
{
    assert_model_refused("good_dataset", SC_ERR_PLUGIN, "exports no scorch_model_plugin",
                         "it is a dataset plugin: give it to --dataset");
    host_dataset_lib d;
    cr_assert_eq(host_dataset_lib_open(fixture("good_model"), &d), SC_ERR_PLUGIN);
    assert_message_has("it is a model plugin: give it to --model");
}

Test(plugin_loader, refuses_a_missing_file)
{
    host_model_lib m;
    cr_assert_eq(host_model_lib_open("/nonexistent/mlp.so", &m), SC_ERR_IO);
    assert_message_has("/nonexistent/mlp.so: No such file or directory");
}

Test(plugin_loader, refuses_a_file_that_is_not_a_shared_object)
{
    char path[] = "/tmp/scorch-test-notelf-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, "not an ELF file\n", 16), 16);
    close(fd);
    host_model_lib m;
    sc_status st = host_model_lib_open(path, &m);
    unlink(path);
    cr_assert_eq(st, SC_ERR_PLUGIN);
    assert_message_has(path);
    assert_message_has("cannot load");
}

Test(plugin_loader, opens_a_valid_dataset_and_refuses_a_broken_one)
{
    host_dataset_lib d;
    cr_assert_eq(host_dataset_lib_open(fixture("good_dataset"), &d), SC_OK, "%s",
                 sc_error_message());
    cr_expect_str_eq(d.api->name, "fixture_dataset");
    host_plugin_lib_close(&d.lib);

    const char *path = fixture("no_getitem");
    cr_assert_eq(host_dataset_lib_open(path, &d), SC_ERR_PLUGIN);
    assert_message_has(path);
    assert_message_has("dataset plugin 'fixture_dataset' leaves dataset_getitem NULL");
    cr_expect_null(d.lib.handle);
}

Test(plugin_loader, finds_the_hooks_a_model_exports)
{
    host_model_lib m;
    cr_assert_eq(host_model_lib_open(fixture("model_with_hooks"), &m), SC_OK, "%s",
                 sc_error_message());
    cr_assert_not_null(m.lib.hooks);
    cr_expect_eq(m.lib.hooks->n_hooks, 2);
    host_plugin_lib_close(&m.lib);
}

Test(plugin_loader, hooks_plugins_need_scorch_hooks)
{
    host_plugin_lib h;
    cr_assert_eq(host_hooks_lib_open(fixture("hooks_good"), NULL, &h), SC_OK, "%s",
                 sc_error_message());
    cr_expect_not_null(h.hooks);
    host_plugin_lib_close(&h);

    cr_assert_eq(host_hooks_lib_open(fixture("good_model"), NULL, &h), SC_ERR_PLUGIN);
    assert_message_has("exports no scorch_hooks (it is a model plugin");
    cr_expect_null(h.handle);
}

Test(plugin_loader, a_hooks_plugin_may_offer_only_user_functions)
{
    host_plugin_lib h;
    cr_assert_eq(host_hooks_lib_open(fixture("funcs_only"), NULL, &h), SC_OK, "%s",
                 sc_error_message());
    cr_expect_null(h.hooks);
    cr_assert_not_null(h.user_funcs);
    cr_expect_eq(h.user_funcs->n_funcs, 2);
    host_plugin_lib_close(&h);
}

Test(plugin_loader, a_bare_file_name_means_the_current_directory)
{
    cr_assert_eq(chdir(fixture_dir()), 0);
    host_model_lib m;
    cr_assert_eq(host_model_lib_open("good_model.so", &m), SC_OK, "%s", sc_error_message());
    cr_expect_str_eq(m.lib.path, "good_model.so");
    host_plugin_lib_close(&m.lib);
}

Test(plugin_loader, abi_check_accepts_the_current_header)
{
    sc_abi_header ok = SC_ABI_HEADER(sc_hook_table);
    cr_expect_eq(host_abi_check(&ok, "hook table", sizeof(sc_hook_table)), SC_OK);
    sc_abi_header older_minor_bigger = {SC_ABI_MAGIC, SC_ABI_MAJOR, 0, 4096};
    cr_expect_eq(host_abi_check(&older_minor_bigger, "x", 16), SC_OK);
}
