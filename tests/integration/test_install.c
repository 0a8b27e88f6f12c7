/* Integration tests: an install into a prefix of its own runs from there.
 *
 * meson installs this build into a temporary folder (DESTDIR), and the
 * installed programs run from it with an empty LD_LIBRARY_PATH: they find
 * the installed libscorch through their rpath, relative to themselves.
 *
 * `meson install` writes its list of installed files (what `meson
 * uninstall` removes) into <build>/meson-logs; so that a test never
 * replaces the record of a real install, it runs on a shadow of the build
 * folder: links to its outputs, with meson-logs and meson-private of its
 * own (install.dat, the list of what to install, linked in).
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

enum { PATH = 4096, DIR_LEN = 64, SHADOW_LEN = 128 };

/* The empty LD_LIBRARY_PATH every installed program runs with. */
#define NO_LIBRARY_PATH "LD_LIBRARY_PATH="

static void expect_ok(run_result *r, const char *what)
{
    cr_assert_eq(r->status, 0, "%s: exit %d\nstdout:\n%s\nstderr:\n%s", what, r->status, r->out,
                 r->err);
}

static void link_or_fail(const char *target, const char *dir, const char *name)
{
    char link_path[PATH];
    snprintf(link_path, sizeof link_path, "%s/%s", dir, name);
    cr_assert_eq(symlink(target, link_path), 0, "cannot link %s", link_path);
}

/* work/build: the build folder's entries as links, but its own meson-logs
 * and meson-private (holding a link to install.dat). */
static void shadow_build(const char *work, char *shadow)
{
    const char *root = getenv("SCORCH_BUILD_ROOT");
    char path[PATH];
    snprintf(shadow, SHADOW_LEN, "%s/build", work);
    cr_assert_eq(mkdir(shadow, 0700), 0);
    DIR *d = opendir(root);
    cr_assert_not_null(d, "cannot list %s", root);
    for (struct dirent *e; (e = readdir(d));) {
        bool own = !strcmp(e->d_name, "meson-logs") || !strcmp(e->d_name, "meson-private");
        if (e->d_name[0] == '.' || own)
            continue;
        snprintf(path, sizeof path, "%s/%s", root, e->d_name);
        link_or_fail(path, shadow, e->d_name);
    }
    closedir(d);
    snprintf(path, sizeof path, "%s/meson-logs", shadow);
    cr_assert_eq(mkdir(path, 0700), 0);
    snprintf(path, sizeof path, "%s/meson-private", shadow);
    cr_assert_eq(mkdir(path, 0700), 0);
    char install_dat[PATH];
    snprintf(install_dat, sizeof install_dat, "%s/meson-private/install.dat", root);
    link_or_fail(install_dat, path, "install.dat");
}

/* Installs this build into work/stage. */
static void install_into(const char *work)
{
    char shadow[SHADOW_LEN], stage[PATH];
    shadow_build(work, shadow);
    snprintf(stage, sizeof stage, "%s/stage", work);
    const char *argv[] = {getenv("SCORCH_MESON"), "install", "--no-rebuild", "--quiet",
                          "--destdir", stage, "-C", shadow, NULL};
    run_result r = run_program(argv, NULL);
    expect_ok(&r, "meson install");
    run_result_free(&r);
}

/* An installed file: work/stage + the absolute install path dir/name. */
static void installed(char *buf, const char *work, const char *dir_env, const char *name)
{
    snprintf(buf, PATH, "%s/stage%s/%s", work, getenv(dir_env), name);
}

static void remove_tree(const char *dir)
{
    const char *argv[] = {"/bin/rm", "-rf", dir, NULL};
    run_result r = run_program(argv, NULL);
    run_result_free(&r);
}

Test(install, the_real_build_keeps_its_install_record)
{
    char work[DIR_LEN], log_path[PATH];
    snprintf(log_path, sizeof log_path, "%s/meson-logs/install-log.txt",
             getenv("SCORCH_BUILD_ROOT"));
    struct stat before, after;
    bool had_log = stat(log_path, &before) == 0;
    install_into(temp_dir(work, sizeof work));
    bool has_log = stat(log_path, &after) == 0;
    cr_assert_eq(has_log, had_log, "the test created or removed %s", log_path);
    if (has_log)
        cr_assert(after.st_mtim.tv_sec == before.st_mtim.tv_sec &&
                      after.st_mtim.tv_nsec == before.st_mtim.tv_nsec,
                  "the test rewrote %s", log_path);
    remove_tree(work);
}

Test(install, every_installed_program_starts_without_a_library_path)
{
    char work[DIR_LEN], program[PATH];
    install_into(temp_dir(work, sizeof work));
    const char *names[] = {"scorch-train", "scorch-test", "scorch-ctl", "scorch-plot",
                           "scorch-export", "scorch-predict", "scorch-sweep", "scorch-run"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        installed(program, work, "SCORCH_INSTALLED_BIN", names[i]);
        const char *argv[] = {program, "--help", NULL};
        run_result r = run_program(argv, NO_LIBRARY_PATH);
        expect_ok(&r, program);
        run_result_free(&r);
    }
    installed(program, work, "SCORCH_INSTALLED_BIN", "scorch-train");
    run_result r = run_program((const char *[]){program, "--version", NULL}, NO_LIBRARY_PATH);
    expect_ok(&r, "scorch-train --version");
    cr_assert(strstr(r.out, "scorch-train "), "%s", r.out);
    run_result_free(&r);
    remove_tree(work);
}

/* One epoch on the installed synthetic dataset with the installed MLP. */
Test(install, installed_scorch_train_trains_with_the_installed_plugins)
{
    char work[DIR_LEN], train[PATH], mlp[PATH], synthetic[PATH], run_dir[PATH];
    install_into(temp_dir(work, sizeof work));
    installed(train, work, "SCORCH_INSTALLED_BIN", "scorch-train");
    installed(mlp, work, "SCORCH_INSTALLED_PLUGINS", "mlp.so");
    installed(synthetic, work, "SCORCH_INSTALLED_PLUGINS", "synthetic.so");
    snprintf(run_dir, sizeof run_dir, "%s/run", work);
    const char *argv[] = {train, "--model", mlp, "--model-args", "hidden=16",
                          "--dataset", synthetic,
                          "--dataset-args", "train_size=256,valid_size=64,test_size=64",
                          "--batch-size", "64", "--epochs", "1", "--run-dir", run_dir,
                          "--quiet", NULL};
    run_result r = run_program(argv, NO_LIBRARY_PATH);
    expect_ok(&r, "installed scorch-train");
    run_result_free(&r);
    cr_assert(!isnan(metric_of(run_dir, 1, "test", "accuracy")), "no test record in %s",
              run_dir);
    remove_tree(work);
}
