/* The plugin loader accepts valid plugins and refuses broken ones (the
 * fixtures in tests/fixtures) with a message naming the file and the fault. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/plugin_loader.h"
#include "../../fixtures/future_abi.h"
#include "scorch_host/plugin.h"

static const char *fixture_dir(void)
{
    static char dir[4096];
    snprintf(dir, sizeof dir, "%s/tests/fixtures", getenv("SCORCH_BUILD_ROOT"));
    return dir;
}

/* The built fixture `name`.so; valid until the next call. */
static const char *fixture(const char *name)
{
    static char path[4096 + 128];
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
    cr_assert_eq(host_model_lib_open(fixture("model_v1_1"), &m), SC_OK, "%s", sc_error_message());
    cr_expect_str_eq(host_model_preferred_device(&m), "auto");
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
    cr_expect_eq(sc_abi_check(&ok, SC_ABI_HOOKS), SC_OK);
    sc_abi_header older_minor_bigger = {SC_ABI_MAGIC, SC_ABI_MAJOR, 0, 4096};
    cr_expect_eq(sc_abi_check(&older_minor_bigger, SC_ABI_MODEL), SC_OK);
}

/* ---- each minor's size ---- */

#define END_OF(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))

Test(abi_sizes, each_minor_requires_the_end_of_its_last_field)
{
    size_t model_1_0 = END_OF(sc_model_plugin, socket_param_trains);
    size_t model_1_1 = END_OF(sc_model_plugin, preferred_device);
    cr_expect_eq(sc_abi_size(SC_ABI_MODEL, 0), model_1_0);
    for (unsigned minor = 1; minor <= SC_ABI_MINOR; minor++)
        cr_expect_eq(sc_abi_size(SC_ABI_MODEL, minor), model_1_1, "1.%u", minor);
    for (unsigned minor = 0; minor <= SC_ABI_MINOR; minor++) {
        cr_expect_eq(sc_abi_size(SC_ABI_DATASET, minor),
                     minor >= 4 ? END_OF(sc_dataset_plugin, index_decode)
                                : END_OF(sc_dataset_plugin, class_name), "1.%u", minor);
        cr_expect_eq(sc_abi_size(SC_ABI_HOOKS, minor), sizeof(sc_hook_table));
        cr_expect_eq(sc_abi_size(SC_ABI_USER_FUNCS, minor),
                     minor >= 1 ? sizeof(sc_user_func_table) : 0, "1.%u", minor);
        cr_expect_eq(sc_abi_size(SC_ABI_HOOK_ARG_KEYS, minor),
                     minor >= 2 ? sizeof(sc_hook_arg_keys) : 0, "1.%u", minor);
        cr_expect_eq(sc_abi_size(SC_ABI_HOOK_ACTIONS, minor),
                     minor >= 3 ? sizeof(sc_hook_actions) : 0, "1.%u", minor);
        cr_expect_eq(sc_abi_size(SC_ABI_JOB, minor), minor >= 4 ? sizeof(sc_job_plugin) : 0,
                     "1.%u", minor);
    }
}

/* For every struct and minor that has it: that minor's size passes, a byte
 * less is refused, naming the struct, the minor and both sizes. */
Test(abi_sizes, every_struct_is_checked_against_its_minors_size)
{
    for (int which = 0; which < SC_ABI_STRUCT_COUNT; which++)
        for (unsigned minor = 0; minor <= SC_ABI_MINOR; minor++) {
            size_t need = sc_abi_size((sc_abi_struct)which, minor);
            if (!need)
                continue;
            sc_abi_header h = {SC_ABI_MAGIC, SC_ABI_MAJOR, (uint16_t)minor, (uint32_t)need};
            cr_expect_eq(sc_abi_check(&h, (sc_abi_struct)which), SC_OK, "%d 1.%u: %s",
                         which, minor, sc_error_message());
            h.size--;
            cr_expect_eq(sc_abi_check(&h, (sc_abi_struct)which), SC_ERR_PLUGIN);
            char part[128];
            snprintf(part, sizeof part, "declares %zu bytes, plugin ABI 1.%u needs at least %zu",
                     need - 1, minor, need);
            assert_message_has(part);
        }
}

Test(abi_sizes, a_struct_claiming_a_minor_before_it_existed_is_refused)
{
    sc_abi_header funcs = {SC_ABI_MAGIC, SC_ABI_MAJOR, 0, sizeof(sc_user_func_table)};
    cr_expect_eq(sc_abi_check(&funcs, SC_ABI_USER_FUNCS), SC_ERR_PLUGIN);
    assert_message_has("user function table claims plugin ABI 1.0, which has none (it came "
                       "with 1.1)");
    sc_abi_header keys = {SC_ABI_MAGIC, SC_ABI_MAJOR, 1, sizeof(sc_hook_arg_keys)};
    cr_expect_eq(sc_abi_check(&keys, SC_ABI_HOOK_ARG_KEYS), SC_ERR_PLUGIN);
    assert_message_has("(it came with 1.2)");
    sc_abi_header job = {SC_ABI_MAGIC, SC_ABI_MAJOR, 3, sizeof(sc_job_plugin)};
    cr_expect_eq(sc_abi_check(&job, SC_ABI_JOB), SC_ERR_PLUGIN);
    assert_message_has("job plugin claims plugin ABI 1.3, which has none (it came with 1.4)");
}

static sc_status job_run_stub(sc_job *job, const sc_args *args)
{
    (void)job, (void)args;
    return SC_OK;
}

Test(abi_sizes, a_job_plugin_needs_its_name_and_job_run)
{
    sc_job_plugin job = {SC_ABI_HEADER(sc_job_plugin), "stub", NULL, job_run_stub};
    cr_expect_eq(sc_job_plugin_check(&job), SC_OK, "%s", sc_error_message());
    job.job_run = NULL;
    cr_expect_eq(sc_job_plugin_check(&job), SC_ERR_PLUGIN);
    assert_message_has("job plugin 'stub' leaves job_run NULL (required)");
    job.name = "";
    cr_expect_eq(sc_job_plugin_check(&job), SC_ERR_PLUGIN);
    assert_message_has("job plugin leaves name empty (required)");
}

/* The model fixtures built for each minor (tests/fixtures/meson.build). */
static const char *model_of_minor(unsigned minor, bool short_one)
{
    static char name[64];
    snprintf(name, sizeof name, "model_v1_%u%s", minor, short_one ? "_short" : "");
    return name;
}

Test(abi_sizes, a_model_of_each_minor_loads_with_that_minors_size)
{
    for (unsigned minor = 0; minor <= SC_ABI_MINOR; minor++) {
        host_model_lib m;
        cr_assert_eq(host_model_lib_open(fixture(model_of_minor(minor, false)), &m), SC_OK,
                     "1.%u: %s", minor, sc_error_message());
        cr_expect_eq(m.api->abi.minor, minor);
        cr_expect_eq(m.api->abi.size, sc_abi_size(SC_ABI_MODEL, minor));
        host_plugin_lib_close(&m.lib);
    }
}

Test(abi_sizes, a_model_claiming_a_minor_with_a_smaller_size_is_refused)
{
    for (unsigned minor = 0; minor <= SC_ABI_MINOR; minor++) {
        size_t need = sc_abi_size(SC_ABI_MODEL, minor);
        size_t got = minor == 0 ? offsetof(sc_model_plugin, socket_param_trains)
                                : sc_abi_size(SC_ABI_MODEL, 0);
        char part[128];
        snprintf(part, sizeof part, "model plugin declares %zu bytes, plugin ABI 1.%u needs at "
                 "least %zu", got, minor, need);
        assert_model_refused(model_of_minor(minor, true), SC_ERR_PLUGIN, part, NULL);
    }
}

/* Opening dataset fixture `name` fails, naming the file, the declared
 * size and the size `minor` needs. */
static void assert_dataset_too_small(const char *name, size_t declared, unsigned minor)
{
    host_dataset_lib d;
    const char *path = fixture(name);
    cr_assert_eq(host_dataset_lib_open(path, &d), SC_ERR_PLUGIN, "%s", name);
    assert_message_has(path);
    char part[128];
    snprintf(part, sizeof part, "dataset plugin declares %zu bytes, plugin ABI 1.%u needs at "
             "least %zu", declared, minor, sc_abi_size(SC_ABI_DATASET, minor));
    assert_message_has(part);
    cr_expect_null(d.lib.handle);
}

Test(abi_sizes, a_dataset_needs_its_minors_size)
{
    static const char *const loads[] = {"dataset_v1_0", "dataset_v1_3", "dataset_decodes"};
    for (size_t i = 0; i < sizeof loads / sizeof *loads; i++) {
        host_dataset_lib d;
        cr_assert_eq(host_dataset_lib_open(fixture(loads[i]), &d), SC_OK, "%s: %s", loads[i],
                     sc_error_message());
        host_plugin_lib_close(&d.lib);
    }
    assert_dataset_too_small("dataset_short", offsetof(sc_dataset_plugin, class_name),
                             SC_ABI_MINOR);
    /* 1.4 added index_decode: a 1.4 struct that ends before it is short. */
    assert_dataset_too_small("dataset_v1_4_short", offsetof(sc_dataset_plugin, index_decode), 4);
}

/* ---- index_decode (1.4) ---- */

/* A one-element f32 input, as the fixture's decode writes it. */
static sc_tensor_list one_input(float *value)
{
    static sc_tensor t;
    sc_tensor_init(&t, SC_F32, 0, NULL);
    t.data = value;
    return (sc_tensor_list){.n = 1, .t = {&t}};
}

Test(decode, is_read_only_from_a_struct_that_holds_it)
{
    host_dataset_lib d;
    cr_assert_eq(host_dataset_lib_open(fixture("dataset_decodes"), &d), SC_OK, "%s",
                 sc_error_message());
    cr_expect(host_dataset_decodes(&d));
    host_plugin_lib_close(&d.lib);
    /* Built for 1.3: its struct ends before index_decode, whose bytes (a
     * function) the loader must not read. */
    cr_assert_eq(host_dataset_lib_open(fixture("dataset_v1_3"), &d), SC_OK, "%s",
                 sc_error_message());
    cr_expect_not(host_dataset_decodes(&d));
    float value = -1;
    sc_tensor_list in = one_input(&value);
    sc_raw_input raw = {.bytes = "12345", .size = 5, .media_type = "text/plain"};
    cr_expect_eq(host_dataset_decode(&d, NULL, &raw, &in), SC_ERR_UNSUPPORTED);
    assert_message_has("dataset plugin 'fixture_dataset' takes no raw inputs");
    cr_expect_eq(value, -1.0f);
    host_plugin_lib_close(&d.lib);
    cr_assert_eq(host_dataset_lib_open(fixture("good_dataset"), &d), SC_OK, "%s",
                 sc_error_message());
    cr_expect_not(host_dataset_decodes(&d), "a 1.4 struct whose index_decode is NULL");
    host_plugin_lib_close(&d.lib);
}

Test(decode, runs_the_plugins_decode_and_names_a_bad_input)
{
    host_dataset_lib d;
    const char *path = fixture("dataset_decodes");
    cr_assert_eq(host_dataset_lib_open(path, &d), SC_OK, "%s", sc_error_message());
    float value = -1;
    sc_tensor_list in = one_input(&value);
    sc_raw_input raw = {.bytes = "12345", .size = 5, .media_type = "text/plain"};
    cr_assert_eq(host_dataset_decode(&d, NULL, &raw, &in), SC_OK, "%s", sc_error_message());
    cr_expect_eq(value, 5.0f);
    raw.media_type = "bad";
    cr_assert_eq(host_dataset_decode(&d, NULL, &raw, &in), SC_ERR_FORMAT);
    char part[4096 + 256];
    snprintf(part, sizeof part, "%s: index_decode: not a kind of input it takes", path);
    assert_message_has(part);
    raw = (sc_raw_input){.path = "/photos/shoe.png", .media_type = "bad"};
    cr_assert_eq(host_dataset_decode(&d, NULL, &raw, &in), SC_ERR_FORMAT);
    assert_message_has("index_decode: /photos/shoe.png: not a kind of input it takes");
    host_plugin_lib_close(&d.lib);
}

/* ---- the compatibility matrix (docs/abi.md) ---- */

/* The ABI header a fixture exports as its model plugin, read without the
 * loader's checks. */
static sc_abi_header fixture_header(const char *name)
{
    void *handle = dlopen(fixture(name), RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(handle, "%s", dlerror());
    const sc_model_plugin *api = dlsym(handle, "scorch_model_plugin");
    cr_assert_not_null(api, "%s", name);
    sc_abi_header h = api->abi;
    dlclose(handle);
    return h;
}

/* One row of the matrix: a plugin, and the oldest host minor that loads
 * it (hosts from that minor to SC_ABI_MINOR do, older ones refuse it);
 * NEVER for a plugin no host of this SDK loads. */
enum { NEVER = SC_ABI_MINOR + 1 };
typedef struct matrix_row {
    const char *fixture;
    unsigned oldest_host;
} matrix_row;

static const matrix_row matrix[] = {
    {"model_v1_0", 0}, {"model_v1_1", 1},   {"model_v1_2", 2},
    {"model_v1_3", 3}, {"model_v1_4", 4}, {"future_model", 3}, {"abi_minor_newer", NEVER},
};

Test(abi_matrix, each_host_minor_loads_what_the_matrix_says)
{
    for (size_t r = 0; r < sizeof matrix / sizeof matrix[0]; r++) {
        sc_abi_header h = fixture_header(matrix[r].fixture);
        for (unsigned host = 0; host <= SC_ABI_MINOR; host++) {
            sc_status st = sc_abi_check_as(&h, SC_ABI_MODEL, host);
            bool loads = host >= matrix[r].oldest_host;
            cr_expect_eq(st == SC_OK, loads, "%s on a 1.%u host: %s (%s)", matrix[r].fixture,
                         host, loads ? "should load" : "should be refused", sc_error_message());
            if (!loads && h.minor > host) {
                char part[96];
                snprintf(part, sizeof part, "built for plugin ABI 1.%u, this scorch speaks 1.%u",
                         (unsigned)h.minor, host);
                assert_message_has(part);
            }
        }
    }
}

Test(abi_matrix, this_host_opens_each_row_as_the_matrix_says)
{
    for (size_t r = 0; r < sizeof matrix / sizeof matrix[0]; r++) {
        host_model_lib m;
        sc_status st = host_model_lib_open(fixture(matrix[r].fixture), &m);
        cr_expect_eq(st == SC_OK, matrix[r].oldest_host <= SC_ABI_MINOR, "%s: %s",
                     matrix[r].fixture, sc_error_message());
        if (st == SC_OK)
            host_plugin_lib_close(&m.lib);
    }
}

/* future_model's network_create with sc_host() set to `info`. */
static future_seen create_future(const host_model_lib *m, const sc_host_info *info)
{
    void *net = NULL;
    sc_args *args;
    cr_assert_eq(sc_args_parse("", "model arg", &args), SC_OK);
    const sc_host_info *outer = sc_host_set_info(info);
    sc_status st = m->api->network_create(args, NULL, NULL, NULL, &net);
    sc_host_set_info(outer);
    sc_args_free(args);
    cr_assert_eq(st, SC_OK, "%s", sc_error_message());
    future_seen seen = *(const future_seen *)net;
    m->api->network_destroy(net);
    return seen;
}

Test(abi_matrix, a_plugin_built_for_newer_headers_uses_what_the_host_has)
{
    host_model_lib m;
    cr_assert_eq(host_model_lib_open(fixture("future_model"), &m), SC_OK, "%s",
                 sc_error_message());
    sc_host_info info = host_plugin_host_info(SC_DEVICE_CUDA);
    cr_expect_eq(info.abi.minor, SC_ABI_MINOR);
    future_seen seen = create_future(&m, &info);
    cr_expect_eq(seen.host_minor, SC_ABI_MINOR);
    cr_expect_eq(seen.device_kind, SC_DEVICE_CUDA);
    cr_expect_str_eq(seen.version, info.version);
    cr_expect_not(seen.future_path, "this host lacks what the newer headers added");
    /* A host that speaks the plugin's newer minor, simulated. */
    info.abi.minor = FUTURE_MINOR;
    seen = create_future(&m, &info);
    cr_expect(seen.future_path, "a host of the newer minor has it");
    host_plugin_lib_close(&m.lib);
}

Test(abi_matrix, sc_host_is_null_outside_the_hosts_create_and_open)
{
    cr_expect_null(sc_host());
    host_model_lib m;
    cr_assert_eq(host_model_lib_open(fixture("future_model"), &m), SC_OK, "%s",
                 sc_error_message());
    void *net = NULL;
    sc_args *args;
    cr_assert_eq(sc_args_parse("", "model arg", &args), SC_OK);
    cr_expect_eq(m.api->network_create(args, NULL, NULL, NULL, &net), SC_ERR_STATE);
    assert_message_has("sc_host() is NULL");
    sc_args_free(args);
    host_plugin_lib_close(&m.lib);
}
