/* The plugin contract as scorch-train keeps it: what a plugin learns from
 * sc_host() while the run creates it, the per-minor size check, and the
 * hints a misspelt or comma-separated --model-args gets. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "scorch/plugin.h"

enum { PATH = 4096, DIR = 64 };

/* scorch-train on the synthetic dataset with `model` and `model_args`,
 * expected to stop before training with a message. */
static run_result refused_train(const char *model, const char *model_args)
{
    char train[PATH], synthetic[PATH], dir[DIR];
    build_path(train, sizeof train, "host/scorch-train");
    build_path(synthetic, sizeof synthetic, "plugins/synthetic.so");
    temp_dir(dir, sizeof dir);
    run_result r = run_program((const char *[]){train, "--model", model, "--model-args",
                                                model_args, "--dataset", synthetic,
                                                "--dataset-path", "unused", "--run-dir", dir,
                                                "--epochs", "1", NULL},
                               NULL);
    cr_expect_eq(r.status, 1, "exit %d\nstderr:\n%s", r.status, r.err);
    return r;
}

static void expect_err_has(const run_result *r, const char *part)
{
    cr_expect(strstr(r->err, part), "stderr lacks '%s':\n%s", part, r->err);
}

static const char *mlp(void)
{
    static char path[PATH];
    build_path(path, sizeof path, "plugins/mlp.so");
    return path;
}

static const char *fixture(const char *name)
{
    static char path[PATH];
    char rel[128];
    snprintf(rel, sizeof rel, "tests/fixtures/%s.so", name);
    build_path(path, sizeof path, rel);
    return path;
}

Test(plugin_args, a_misspelt_model_arg_names_the_key_it_meant)
{
    run_result r = refused_train(mlp(), "hiden=3");
    expect_err_has(&r, "network_create: unknown model arg 'hiden' (did you mean 'hidden'?");
    run_result_free(&r);
}

Test(plugin_args, a_list_written_with_commas_is_told_lists_use_colons)
{
    run_result r = refused_train(mlp(), "hidden=64,32");
    expect_err_has(&r, "model arg '32': expected key=value; if it continues hidden's list, "
                       "lists use ':' (hidden=64:32)");
    run_result_free(&r);
}

/* future_model fails network_create with what sc_host() told it. */
Test(host_info, a_plugin_learns_the_host_while_it_is_created)
{
    run_result r = refused_train(fixture("future_model"), "report=1");
    char part[128];
    snprintf(part, sizeof part, "network_create: saw plugin ABI 1.%d, scorch ", SC_ABI_MINOR);
    expect_err_has(&r, part);
    expect_err_has(&r, ", device cpu, the host's path");
    run_result_free(&r);
}

Test(host_info, a_struct_short_of_its_minors_size_is_refused_by_name)
{
    const char *model = fixture("model_v1_1_short");
    run_result r = refused_train(model, "");
    char part[PATH + 64];
    snprintf(part, sizeof part, "%s: model plugin declares", model);
    expect_err_has(&r, part);
    expect_err_has(&r, "plugin ABI 1.1 needs at least");
    run_result_free(&r);
}
