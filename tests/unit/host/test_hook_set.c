/* The hook set: validation of tables, running order, error wrapping, and
 * the hooks fixtures end to end through the plugin loader. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/hook_set.h"
#include "base/plugin_loader.h"
#include "../../fixtures/future_abi.h"
#include "scorch_host/params.h"

/* Each test hook appends its tag to `calls`. */
static char calls[256];

static void record(const char *tag)
{
    size_t used = strlen(calls);
    snprintf(calls + used, sizeof calls - used, "%s%s", used ? "," : "", tag);
}

#define RECORDING_HOOK(tag)                                                              \
    static sc_status hook_##tag(const sc_hook_context *ctx, const sc_hook_actions *a)    \
    {                                                                                    \
        record(#tag);                                                                    \
        return SC_OK;                                                                    \
    }
RECORDING_HOOK(a1)
RECORDING_HOOK(a2)
RECORDING_HOOK(a3)
RECORDING_HOOK(b1)
RECORDING_HOOK(b2)

static sc_status hook_fail(const sc_hook_context *ctx, const sc_hook_actions *a)
{
    record("fail");
    return sc_error_set(SC_ERR_NUMERIC, "loss is NaN at step %lld", (long long)ctx->step);
}

static sc_status hook_fail_quietly(const sc_hook_context *ctx, const sc_hook_actions *a)
{
    return SC_ERR_STATE;
}

static sc_status hook_set_lr(const sc_hook_context *ctx, const sc_hook_actions *a)
{
    a->set_lr(a->host, ctx->lr / 2);
    return SC_OK;
}

#define TABLE(...)                                                                       \
    ((sc_hook_table){SC_ABI_HEADER(sc_hook_table),                                       \
                     (int)(sizeof((const sc_hook[]){__VA_ARGS__}) / sizeof(sc_hook)),    \
                     (const sc_hook[]){__VA_ARGS__}})

static host_hook_set *new_set(void)
{
    host_hook_set *set;
    cr_assert_eq(host_hook_set_new(&set), SC_OK);
    return set;
}

static sc_status run(host_hook_set *set, const char *point)
{
    sc_hook_context ctx = {.point = point, .epoch = 1, .step = 7, .lr = 0.1};
    sc_hook_actions actions = {.abi = SC_ABI_HEADER(sc_hook_actions)};
    calls[0] = '\0';
    return host_hook_set_run(set, point, &ctx, &actions);
}

static void assert_message_has(const char *part)
{
    cr_assert(strstr(sc_error_message(), part), "message '%s' lacks '%s'", sc_error_message(),
              part);
}

/* Adding table to a fresh set fails, naming "t.so" and part. */
static void assert_table_refused(sc_hook_table table, const char *part)
{
    host_hook_set *set = new_set();
    cr_assert_neq(host_hook_set_add(set, &table, "t.so", NULL), SC_OK);
    assert_message_has("t.so: ");
    assert_message_has(part);
    cr_expect_eq(host_hook_set_count(set), 0);
    host_hook_set_free(set);
}

Test(hook_set, runs_by_priority_then_add_order)
{
    host_hook_set *set = new_set();
    sc_hook_table a = TABLE({"epoch_end", "a1", hook_a1, 5}, {"epoch_end", "a2", hook_a2, 0},
                            {"epoch_end", "a3", hook_a3, 5});
    sc_hook_table b = TABLE({"epoch_end", "b1", hook_b1, 0}, {"epoch_end", "b2", hook_b2, -1});
    cr_assert_eq(host_hook_set_add(set, &a, "a.so", NULL), SC_OK, "%s", sc_error_message());
    cr_assert_eq(host_hook_set_add(set, &b, "b.so", NULL), SC_OK, "%s", sc_error_message());
    cr_expect_eq(host_hook_set_count(set), 5);
    cr_assert_eq(run(set, "epoch_end"), SC_OK);
    cr_expect_str_eq(calls, "b2,a2,b1,a1,a3");
    host_hook_set_free(set);
}

Test(hook_set, runs_only_the_hooks_of_the_point)
{
    host_hook_set *set = new_set();
    sc_hook_table t = TABLE({"epoch_end", "a1", hook_a1, 0}, {"batch_end", "a2", hook_a2, 0});
    cr_assert_eq(host_hook_set_add(set, &t, "t.so", NULL), SC_OK);
    cr_assert_eq(run(set, "batch_end"), SC_OK);
    cr_expect_str_eq(calls, "a2");
    cr_assert_eq(run(set, "train_begin"), SC_OK);
    cr_expect_str_eq(calls, "");
    cr_expect_eq(run(set, "batch_ned"), SC_ERR_INVALID);
    host_hook_set_free(set);
}

Test(hook_set, every_point_is_known)
{
    const char *want[] = {"train_begin",    "train_end",       "epoch_begin",
                          "epoch_end",      "phase_begin",     "phase_end",
                          "batch_begin",    "batch_end",       "after_backward",
                          "checkpoint_save", "checkpoint_load"};
    int n = 0;
    while (host_hook_points[n])
        n++;
    cr_assert_eq(n, 11);
    host_hook_set *set = new_set();
    for (int i = 0; i < n; i++) {
        cr_expect_str_eq(host_hook_points[i], want[i]);
        sc_hook_table t = TABLE({want[i], want[i], hook_a1, 0}); /* the point names the hook */
        cr_expect_eq(host_hook_set_add(set, &t, "t.so", NULL), SC_OK, "%s", sc_error_message());
        cr_expect_eq(run(set, want[i]), SC_OK);
        cr_expect_str_eq(calls, "a1", "%s ran %s", want[i], calls);
    }
    host_hook_set_free(set);
}

Test(hook_set, an_error_names_hook_plugin_and_point_and_stops_the_rest)
{
    host_hook_set *set = new_set();
    sc_hook_table t = TABLE({"batch_end", "a1", hook_a1, 0}, {"batch_end", "nan_guard", hook_fail, 1},
                            {"batch_end", "a2", hook_a2, 2});
    cr_assert_eq(host_hook_set_add(set, &t, "guards.so", NULL), SC_OK);
    cr_assert_eq(run(set, "batch_end"), SC_ERR_NUMERIC);
    cr_expect_str_eq(calls, "a1,fail");
    cr_expect_str_eq(sc_error_message(),
                     "hook 'nan_guard' of guards.so at batch_end: loss is NaN at step 7");
    host_hook_set_free(set);
}

Test(hook_set, a_silent_failure_is_not_blamed_on_an_old_message)
{
    host_hook_set *set = new_set();
    sc_hook_table t = TABLE({"epoch_begin", "quiet", hook_fail_quietly, 0});
    cr_assert_eq(host_hook_set_add(set, &t, "q.so", NULL), SC_OK);
    sc_error_set(SC_ERR_IO, "stale message");
    cr_assert_eq(run(set, "epoch_begin"), SC_ERR_STATE);
    assert_message_has("hook 'quiet' of q.so at epoch_begin");
    cr_expect_null(strstr(sc_error_message(), "stale"));
    host_hook_set_free(set);
}

static double new_lr;
static void record_lr(void *host, double lr)
{
    *(double *)host = lr;
}

Test(hook_set, hooks_act_through_the_actions_table)
{
    host_hook_set *set = new_set();
    sc_hook_table t = TABLE({"epoch_end", "halve_lr", hook_set_lr, 0});
    cr_assert_eq(host_hook_set_add(set, &t, "t.so", NULL), SC_OK);
    sc_hook_context ctx = {.point = "epoch_end", .lr = 0.5};
    sc_hook_actions actions = {SC_ABI_HEADER(sc_hook_actions), .host = &new_lr,
                               .set_lr = record_lr};
    cr_assert_eq(host_hook_set_run(set, "epoch_end", &ctx, &actions), SC_OK);
    cr_expect_eq(new_lr, 0.25);
    host_hook_set_free(set);
}

Test(hook_set, a_misspelt_point_suggests_the_known_one)
{
    assert_table_refused(TABLE({"epoch_ned", "stopper", hook_a1, 0}),
                         "hook 'stopper' uses unknown point 'epoch_ned' (did you mean 'epoch_end'?)");
    assert_table_refused(TABLE({"on_step", "stepper", hook_a1, 0}),
                         "unknown point 'on_step' (known points: train_begin, train_end");
}

Test(hook_set, incomplete_hooks_are_refused)
{
    assert_table_refused(TABLE({"epoch_end", "nofn", NULL, 0}), "hook 'nofn' has no function");
    assert_table_refused(TABLE({"epoch_end", "", hook_a1, 0}), "hook #0 has no name");
    assert_table_refused(TABLE({"epoch_end", NULL, hook_a1, 0}), "hook #0 has no name");
    assert_table_refused(TABLE({NULL, "nopoint", hook_a1, 0}), "hook 'nopoint' has no point");
}

Test(hook_set, names_are_unique_across_the_run)
{
    assert_table_refused(TABLE({"epoch_end", "same", hook_a1, 0}, {"batch_end", "same", hook_a2, 0}),
                         "hook name 'same' appears twice in the table");
    host_hook_set *set = new_set();
    sc_hook_table a = TABLE({"epoch_end", "same", hook_a1, 0});
    sc_hook_table b = TABLE({"batch_end", "same", hook_a2, 0});
    cr_assert_eq(host_hook_set_add(set, &a, "first.so", NULL), SC_OK);
    cr_assert_eq(host_hook_set_add(set, &b, "second.so", NULL), SC_ERR_PLUGIN);
    assert_message_has("second.so: hook name 'same' is already used by first.so");
    host_hook_set_free(set);
}

Test(hook_set, table_headers_are_checked)
{
    sc_hook_table t = TABLE({"epoch_end", "h", hook_a1, 0});
    t.abi.major = 2;
    t.abi.minor = 0;
    assert_table_refused(t, "hook table built for plugin ABI 2.0");
    t = TABLE({"epoch_end", "h", hook_a1, 0});
    t.abi.magic = 0;
    assert_table_refused(t, "bad magic");
    t = TABLE({"epoch_end", "h", hook_a1, 0});
    t.n_hooks = -1;
    assert_table_refused(t, "n_hooks -1");
    t.n_hooks = 1;
    t.hooks = NULL;
    assert_table_refused(t, "hooks NULL");
}

Test(hook_set, a_refused_table_adds_nothing)
{
    host_hook_set *set = new_set();
    sc_hook_table t = TABLE({"epoch_end", "good", hook_a1, 0}, {"epoch_edn", "bad", hook_a2, 0});
    cr_assert_eq(host_hook_set_add(set, &t, "t.so", NULL), SC_ERR_PLUGIN);
    cr_expect_eq(host_hook_set_count(set), 0);
    cr_assert_eq(run(set, "epoch_end"), SC_OK);
    cr_expect_str_eq(calls, "", "a hook of a refused table ran");
    sc_hook_table ok = TABLE({"epoch_end", "good", hook_a1, 0});
    cr_expect_eq(host_hook_set_add(set, &ok, "t.so", NULL), SC_OK,
                 "the refused table kept its names");
    host_hook_set_free(set);
}

Test(hook_set, an_empty_table_is_fine)
{
    host_hook_set *set = new_set();
    sc_hook_table t = {SC_ABI_HEADER(sc_hook_table), 0, NULL};
    cr_expect_eq(host_hook_set_add(set, &t, "t.so", NULL), SC_OK);
    cr_expect_eq(host_hook_set_count(set), 0);
    host_hook_set_free(set);
}

Test(hook_set, overlong_names_are_refused)
{
    char name[HOST_HOOK_NAME_MAX + 2];
    memset(name, 'h', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    assert_table_refused(TABLE({"epoch_end", name, hook_a1, 0}), "longer than 128 characters");
}

/* ---- each hook's own context, the blobs, the running hook ---- */

static host_hook_set *blob_set;
static char seen[256];

/* Records "<its name>:<its blob or '-'>:<running hook's name>". */
static sc_status hook_record_own(const sc_hook_context *ctx, const sc_hook_actions *a)
{
    size_t used = strlen(seen);
    const sc_hook *running = host_hook_set_running(blob_set);
    snprintf(seen + used, sizeof seen - used, "%s%s:%.*s:%s", used ? "," : "", ctx->hook,
             ctx->blob ? (int)ctx->blob_size : 1, ctx->blob ? (const char *)ctx->blob : "-",
             running ? running->name : "none");
    return SC_OK;
}

Test(hook_set, each_hook_sees_its_name_and_its_own_blob)
{
    blob_set = new_set();
    sc_hook_table t = TABLE({"checkpoint_load", "first", hook_record_own, 0},
                            {"checkpoint_load", "second", hook_record_own, 1},
                            {"epoch_end", "third", hook_record_own, 0});
    cr_assert_eq(host_hook_set_add(blob_set, &t, "t.so", NULL), SC_OK, "%s", sc_error_message());
    host_hook_blobs blobs = {0};
    cr_assert_eq(host_hook_blobs_put(&blobs, "second", "old", 3), SC_OK);
    cr_assert_eq(host_hook_blobs_put(&blobs, "second", "two", 3), SC_OK); /* replaces */
    cr_assert_eq(host_hook_blobs_put(&blobs, "gone", "x", 1), SC_OK);    /* no such hook */
    cr_expect_eq(blobs.n, 2);
    sc_hook_context ctx = {.point = "checkpoint_load"};
    sc_hook_actions actions = {.abi = SC_ABI_HEADER(sc_hook_actions)};
    seen[0] = '\0';
    cr_assert_eq(host_hook_set_run_load(blob_set, &ctx, &actions, &blobs), SC_OK);
    cr_expect_str_eq(seen, "first:-:first,second:two:second");
    cr_expect_null(host_hook_set_running(blob_set), "a hook still counts as running");
    seen[0] = '\0';
    ctx.point = "epoch_end";
    cr_assert_eq(host_hook_set_run(blob_set, "epoch_end", &ctx, &actions), SC_OK);
    cr_expect_str_eq(seen, "third:-:third", "a plain run carries no blob");
    host_hook_blobs_clear(&blobs);
    cr_expect_eq(blobs.n, 0);
    cr_expect_null(blobs.items);
    host_hook_set_free(blob_set);
}

Test(hook_set, gradient_views_cover_the_trainable_parameters)
{
    sc_params *ps = sc_params_new();
    cr_assert_not_null(ps);
    int64_t w_shape[] = {3, 2}, b_shape[] = {3};
    sc_tensor *w = sc_params_add(ps, "w", 2, w_shape);
    sc_tensor *frozen = sc_params_add(ps, "frozen", 1, b_shape);
    sc_tensor *b = sc_params_add(ps, "b", 1, b_shape);
    cr_assert(w && frozen && b);
    sc_params_set_trainable(frozen, false);
    sc_params_grads(ps)[sc_params_offset(ps, 2)] = 7.0f; /* b's first gradient */
    sc_hook_grad *grads;
    int n;
    cr_assert_eq(host_hook_grads_new(ps, sc_params_grads(ps), &grads, &n), SC_OK);
    cr_assert_eq(n, 2);
    cr_expect_str_eq(grads[0].name, "w");
    cr_expect_eq(grads[0].numel, 6);
    cr_expect_eq(grads[0].ndim, 2);
    cr_expect_eq(grads[0].shape[1], 2);
    cr_expect_str_eq(grads[1].name, "b");
    cr_expect_eq(grads[1].grad[0], 7.0f);
    free(grads);
    sc_params_free(ps);
}

/* ---- the fixtures, through the loader ---- */

static const char *fixture(const char *name)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/tests/fixtures/%s.so", getenv("SCORCH_BUILD_ROOT"), name);
    return path;
}

static double logged;
static void record_scalar(void *host, const char *tag, double value)
{
    if (strcmp(tag, "fixture_epoch") == 0)
        logged = value;
}

Test(hook_set, fixture_hooks_load_and_run)
{
    host_plugin_lib lib;
    const char *path = fixture("hooks_good");
    cr_assert_eq(host_hooks_lib_open(path, NULL, &lib), SC_OK, "%s", sc_error_message());
    host_hook_set *set = new_set();
    cr_assert_eq(host_hook_set_add(set, lib.hooks, lib.path, NULL), SC_OK, "%s",
                 sc_error_message());
    cr_expect_eq(host_hook_set_count(set), 2);

    sc_hook_actions actions = {SC_ABI_HEADER(sc_hook_actions), .log_scalar = record_scalar};
    sc_hook_context ctx = {.point = "epoch_end", .epoch = 3};
    cr_assert_eq(host_hook_set_run(set, "epoch_end", &ctx, &actions), SC_OK);
    cr_expect_eq(logged, 3);

    ctx = (sc_hook_context){.point = "batch_end", .loss = -1};
    cr_assert_eq(host_hook_set_run(set, "batch_end", &ctx, &actions), SC_ERR_NUMERIC);
    assert_message_has("hook 'check_loss' of ");
    assert_message_has(path);
    assert_message_has("at batch_end: negative loss -1");
    host_hook_set_free(set);
    host_plugin_lib_close(&lib);
}

/* Loading succeeds (the loader only finds the table); adding refuses it. */
static void assert_fixture_refused(const char *name, const char *part)
{
    host_plugin_lib lib;
    const char *path = fixture(name);
    cr_assert_eq(host_hooks_lib_open(path, NULL, &lib), SC_OK, "%s", sc_error_message());
    host_hook_set *set = new_set();
    cr_assert_eq(host_hook_set_add(set, lib.hooks, lib.path, NULL), SC_ERR_PLUGIN);
    assert_message_has(path);
    assert_message_has(part);
    host_hook_set_free(set);
    host_plugin_lib_close(&lib);
}

Test(hook_set, fixture_with_a_misspelt_point_is_refused)
{
    assert_fixture_refused("hooks_typo", "unknown point 'epoch_ned' (did you mean 'epoch_end'?)");
}

Test(hook_set, fixture_with_a_duplicate_name_is_refused)
{
    assert_fixture_refused("hooks_dup", "hook name 'log_epoch' appears twice");
}

/* ---- the actions' ABI header ---- */

Test(hook_set, actions_without_their_header_are_refused)
{
    host_hook_set *set = new_set();
    sc_hook_table t = TABLE({"epoch_end", "a1", hook_a1, 0});
    cr_assert_eq(host_hook_set_add(set, &t, "t.so", NULL), SC_OK);
    sc_hook_context ctx = {.point = "epoch_end"};
    sc_hook_actions actions = {.host = NULL};
    calls[0] = '\0';
    cr_expect_eq(host_hook_set_run(set, "epoch_end", &ctx, &actions), SC_ERR_STATE);
    assert_message_has("the actions given to the hooks at epoch_end: hook actions has a bad "
                       "magic number 0x00000000");
    cr_expect_str_eq(calls, "", "no hook ran");
    actions.abi = (sc_abi_header){SC_ABI_MAGIC, SC_ABI_MAJOR, SC_ABI_MINOR, 16};
    cr_expect_eq(host_hook_set_run(set, "epoch_end", &ctx, &actions), SC_ERR_STATE);
    assert_message_has("hook actions declares 16 bytes");
    cr_expect_eq(run(set, "train_end"), SC_OK, "a point without hooks needs no actions");
    host_hook_set_free(set);
}

/* Every tag and value a hook logged, as "tag=value,...". */
static char scalars[256];
static void log_any(void *host, const char *tag, double value)
{
    size_t used = strlen(scalars);
    snprintf(scalars + used, sizeof scalars - used, "%s%s=%g", used ? "," : "", tag, value);
}

static void add_fixture(host_hook_set *set, host_plugin_lib *lib, const char *name)
{
    cr_assert_eq(host_hooks_lib_open(fixture(name), NULL, lib), SC_OK, "%s", sc_error_message());
    cr_assert_eq(host_hook_set_add(set, lib->hooks, lib->path, NULL), SC_OK, "%s",
                 sc_error_message());
}

/* Hooks built for 1.0, 1.1 and 1.2 read the actions without the header, as
 * they were compiled to; 1.3's and a newer build's read them with it. */
Test(hook_set, hooks_of_every_minor_get_the_actions_they_were_built_for)
{
    static const char *const names[] = {"hooks_v1_0", "hooks_v1_1", "hooks_v1_2", "future_hooks"};
    enum { N = sizeof names / sizeof names[0] };
    host_plugin_lib libs[N];
    host_hook_set *set = new_set();
    for (int i = 0; i < N; i++)
        add_fixture(set, &libs[i], names[i]);
    sc_hook_actions actions = {SC_ABI_HEADER(sc_hook_actions), .log_scalar = log_any};
    sc_hook_context ctx = {.point = "epoch_end", .epoch = 1};
    scalars[0] = '\0';
    cr_assert_eq(host_hook_set_run(set, "epoch_end", &ctx, &actions), SC_OK, "%s",
                 sc_error_message());
    char want[128];
    snprintf(want, sizeof want, "built_for_minor=0,built_for_minor=1,built_for_minor=2,"
             "host_minor=%d", SC_ABI_MINOR);
    cr_expect_str_eq(scalars, want);
    host_hook_set_free(set);
    for (int i = 0; i < N; i++)
        host_plugin_lib_close(&libs[i]);
}

static char note[64];
static void log_note(void *host, const char *text) { snprintf(note, sizeof note, "%s", text); }

/* A newer host, simulated: the future hook takes the newer action only
 * from actions whose header says they have it. */
Test(hook_set, a_hook_built_for_newer_headers_uses_what_the_host_has)
{
    host_plugin_lib lib;
    cr_assert_eq(host_hooks_lib_open(fixture("future_hooks"), NULL, &lib), SC_OK, "%s",
                 sc_error_message());
    cr_assert_eq(lib.hooks->abi.minor, 3, "it declares the oldest host it runs on");
    sc_hook_fn hook = lib.hooks->hooks[0].fn;
    sc_hook_context ctx = {.point = "epoch_end", .epoch = 1};
    future_hook_actions newer = {
        .current = {{SC_ABI_MAGIC, SC_ABI_MAJOR, FUTURE_MINOR, sizeof(future_hook_actions)},
                    .log_scalar = log_any},
        .log_note = log_note};
    scalars[0] = note[0] = '\0';
    cr_assert_eq(hook(&ctx, &newer.current), SC_OK);
    cr_expect_str_eq(note, "the newer path");
    cr_expect_str_eq(scalars, "");
    sc_hook_actions ours = {SC_ABI_HEADER(sc_hook_actions), .log_scalar = log_any};
    note[0] = '\0';
    cr_assert_eq(hook(&ctx, &ours), SC_OK);
    cr_expect_str_eq(note, "");
    char want[32];
    snprintf(want, sizeof want, "host_minor=%d", SC_ABI_MINOR);
    cr_expect_str_eq(scalars, want);
    host_plugin_lib_close(&lib);
}
