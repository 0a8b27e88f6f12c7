/* Integration tests: the cnn and resnet plugins trained by the real
 * scorch-train on Fashion-MNIST subsets (narrow widths, a few dozen
 * steps), batch norm's running statistics through checkpoints, eval mode,
 * and --summary. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "scorch/serialize.h"

#define FASHION_DIR "/usr/share/datasets/fashion-mnist"

enum { PATH = 4096, DIR = 64, MAX_ARGS = 48 };

/* Narrow and quick; a 640-sample valid split, augmented training. */
static const char *const cnn_args = "channels=8:16,hidden=32";
static const char *const data_args = "valid_size=640,crop_padding=2,hflip=true";

typedef struct paths {
    char train[PATH], test[PATH], cnn[PATH], resnet[PATH], mlp[PATH], fashion[PATH];
} paths;

static paths bin(void)
{
    paths p;
    build_path(p.train, PATH, "host/scorch-train");
    build_path(p.test, PATH, "host/scorch-test");
    build_path(p.cnn, PATH, "plugins/cnn.so");
    build_path(p.resnet, PATH, "plugins/resnet.so");
    build_path(p.mlp, PATH, "plugins/mlp.so");
    build_path(p.fashion, PATH, "plugins/fashion_mnist.so");
    return p;
}

static void expect_ok(run_result *r)
{
    cr_assert_eq(r->status, 0, "exit %d\nstdout:\n%s\nstderr:\n%s", r->status, r->out, r->err);
}

/* scorch-train with `model` on Fashion-MNIST, 30 steps of 64 per epoch,
 * plus `extra` (NULL-terminated). */
static run_result train(const char *model, const char *model_args, const char *run_dir,
                        const char *epochs, const char *const *extra)
{
    paths p = bin();
    const char *argv[MAX_ARGS] = {p.train, "--model", model, "--model-args", model_args,
                                  "--dataset", p.fashion, "--dataset-path", FASHION_DIR,
                                  "--dataset-args", data_args, "--batch-size", "64",
                                  "--epochs", epochs, "--max-train-iterations", "30",
                                  "--max-test-iterations", "2", "--run-dir", run_dir,
                                  "--seed", "5"};
    int n = 0;
    while (argv[n])
        n++;
    for (; extra && *extra && n < MAX_ARGS - 1; extra++)
        argv[n++] = *extra;
    argv[n] = NULL;
    return run_program(argv, NULL);
}

static void last_checkpoint(char *buf, const char *run_dir)
{
    snprintf(buf, PATH, "%s/checkpoints/last.ckpt", run_dir);
}

/* Whether every element of the checkpoint's tensor `name` equals v. */
static bool ckpt_all_equal(const char *ckpt, const char *name, float v)
{
    sc_ckpt *ck = NULL;
    cr_assert_eq(sc_ckpt_open(ckpt, &ck), SC_OK, "%s", sc_error_message());
    const sc_tensor *t = sc_ckpt_tensor(ck, name);
    cr_assert_not_null(t, "%s holds no %s", ckpt, name);
    bool all = true;
    for (int64_t i = 0; i < t->numel && all; i++)
        all = sc_tensor_f32(t)[i] == v;
    sc_ckpt_close(ck);
    return all;
}

/* scorch-test on the valid split; the printed loss and accuracy. */
static void evaluate(const char *ckpt, const char *batch_size, double *loss, double *accuracy)
{
    paths p = bin();
    run_result r = run_program((const char *[]){p.test, "--checkpoint", ckpt, "--split",
                                                "valid", "--batch-size", batch_size, NULL},
                               NULL);
    expect_ok(&r);
    const char *l = strstr(r.out, "loss "), *a = strstr(r.out, "accuracy ");
    cr_assert(l && a, "%s", r.out);
    *loss = strtod(l + 5, NULL);
    *accuracy = strtod(a + 9, NULL);
    run_result_free(&r);
}

Test(cnn, loss_falls_and_checkpoints_keep_the_running_statistics)
{
    paths p = bin();
    char dir[DIR], ckpt[PATH];
    temp_dir(dir, sizeof dir);
    run_result r = train(p.cnn, cnn_args, dir, "2", NULL);
    expect_ok(&r);
    cr_assert(strstr(r.out, "conv2 ") && strstr(r.out, "FLOPs forward per sample"),
              "no model summary at the start:\n%s", r.out);
    run_result_free(&r);
    cr_assert_lt(metric_of(dir, 2, "train", "loss"), metric_of(dir, 1, "train", "loss"));
    last_checkpoint(ckpt, dir);
    cr_expect(!ckpt_all_equal(ckpt, "param/conv1.bn.running_var", 1.0f));
    cr_expect(!ckpt_all_equal(ckpt, "param/conv2.bn.running_mean", 0.0f));
    /* scorch-test loads the statistics back: the same valid result as the run. */
    double loss, accuracy;
    evaluate(ckpt, "64", &loss, &accuracy);
    cr_expect_float_eq(loss, metric_of(dir, 2, "valid", "loss"), 1e-4);
    cr_expect_float_eq(accuracy, metric_of(dir, 2, "valid", "accuracy"), 1e-4);
}

/* With the running statistics, a sample's output does not depend on the
 * batch it is in; with batch statistics it would. */
Test(cnn, eval_mode_uses_the_running_statistics)
{
    paths p = bin();
    char dir[DIR], ckpt[PATH];
    temp_dir(dir, sizeof dir);
    run_result r = train(p.cnn, cnn_args, dir, "1", (const char *[]){"--quiet", NULL});
    expect_ok(&r);
    cr_expect(!strstr(r.out, "FLOPs"), "--quiet printed the summary:\n%s", r.out);
    run_result_free(&r);
    last_checkpoint(ckpt, dir);
    double loss64, acc64, loss40, acc40;
    evaluate(ckpt, "64", &loss64, &acc64);
    evaluate(ckpt, "40", &loss40, &acc40);
    cr_expect_eq(acc64, acc40);
    cr_expect_float_eq(loss64, loss40, 2e-4);
}

Test(cnn, resume_continues_with_the_saved_running_statistics)
{
    paths p = bin();
    char straight[DIR], split[DIR], a[PATH], b[PATH];
    temp_dir(straight, sizeof straight);
    temp_dir(split, sizeof split);
    run_result r = train(p.cnn, cnn_args, straight, "2", NULL);
    expect_ok(&r);
    run_result_free(&r);
    r = train(p.cnn, cnn_args, split, "1", NULL);
    expect_ok(&r);
    run_result_free(&r);
    r = train(p.cnn, cnn_args, split, "2", (const char *[]){"--resume", NULL});
    expect_ok(&r);
    run_result_free(&r);
    last_checkpoint(a, straight);
    last_checkpoint(b, split);
    cr_expect(same_params(a, b), "parameters or running statistics differ after resume");
    cr_expect_eq(metric_of(straight, 2, "valid", "loss"), metric_of(split, 2, "valid", "loss"));
}

Test(cnn, bad_model_args_are_refused)
{
    paths p = bin();
    char dir[DIR];
    temp_dir(dir, sizeof dir);
    static const char *const bad[][2] = {
        {"chanels=8", "chanels"},
        {"channels=8:8:8:8:8", "channels"}, /* pools 28x28 to nothing */
        {"hidden=0", "hidden"},
        {"dropout=1", "dropout"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        run_result r = train(p.cnn, bad[k][0], dir, "1", NULL);
        cr_expect_eq(r.status, 1, "%s: exit %d", bad[k][0], r.status);
        cr_expect(strstr(r.err, bad[k][1]), "%s: %s", bad[k][0], r.err);
        run_result_free(&r);
    }
}

/* --summary: the table and the totals, and no run directory. */
static run_result summary(const char *model, const char *model_args, const char *run_dir)
{
    paths p = bin();
    return run_program((const char *[]){p.train, "--model", model, "--model-args", model_args,
                                        "--dataset", p.fashion, "--dataset-path", FASHION_DIR,
                                        "--run-dir", run_dir, "--summary", NULL},
                       NULL);
}

Test(summary, cnn_defaults_have_the_documented_layers)
{
    paths p = bin();
    char dir[DIR], run_dir[PATH];
    temp_dir(dir, sizeof dir);
    snprintf(run_dir, sizeof run_dir, "%s/run", dir);
    run_result r = summary(p.cnn, "", run_dir);
    expect_ok(&r);
    /* conv1 1->32 (288) + bn (4 x 32), conv2 32->64 (18432) + bn (4 x 64),
     * fc1 3136->128 (401536), fc2 128->10 (1290); buffers 192. */
    static const char *const lines[] = {"[32, 14, 14]", "[64, 7, 7]", "[3136]", "401,536",
                                        "421,930 parameters and buffers, 421,738 trainable"};
    for (size_t k = 0; k < sizeof lines / sizeof *lines; k++)
        cr_expect(strstr(r.out, lines[k]), "no '%s' in:\n%s", lines[k], r.out);
    cr_expect(access(run_dir, F_OK) != 0, "--summary made a run directory");
    run_result_free(&r);
}

Test(summary, mlp_layers)
{
    paths p = bin();
    char dir[DIR];
    temp_dir(dir, sizeof dir);
    run_result r = summary(p.mlp, "hidden=16", dir);
    expect_ok(&r);
    /* fc1 784->16: 2 * 784 * 16 + 16 FLOPs; fc2 16->10: 2 * 16 * 10 + 10 */
    cr_expect(strstr(r.out, "fc1") && strstr(r.out, "25.1K"), "%s", r.out);
    cr_expect(strstr(r.out, "12,730 parameters and buffers, 12,730 trainable"), "%s", r.out);
    run_result_free(&r);
}

/* --freeze shows in --summary as it will train: the row marked frozen,
 * the trainable count without it. */
Test(summary, freeze_marks_the_frozen_layer)
{
    paths p = bin();
    char dir[DIR];
    temp_dir(dir, sizeof dir);
    run_result r = run_program((const char *[]){p.train, "--model", p.mlp, "--model-args",
                                                "hidden=16", "--dataset", p.fashion,
                                                "--dataset-path", FASHION_DIR, "--run-dir", dir,
                                                "--freeze", "fc1.*", "--summary", NULL},
                               NULL);
    expect_ok(&r);
    const char *fc1 = strstr(r.out, "fc1 "), *eol = fc1 ? strchr(fc1, '\n') : NULL;
    cr_assert(fc1 && eol, "no fc1 row:\n%s", r.out);
    const char *mark = strstr(fc1, "frozen");
    cr_expect(mark && mark < eol, "fc1 not marked frozen:\n%s", r.out);
    /* fc2 16->10 alone trains: 16 * 10 + 10 */
    cr_expect(strstr(r.out, "12,730 parameters and buffers, 170 trainable"), "%s", r.out);
    run_result_free(&r);
}

Test(resnet, trains_with_se_blocks)
{
    paths p = bin();
    char dir[DIR];
    temp_dir(dir, sizeof dir);
    const char *args = "stem=8,channels=8:16,blocks=1,se=true,reduction=4";
    run_result r = train(p.resnet, args, dir, "1",
                         (const char *[]){"--max-train-iterations", "10", NULL});
    expect_ok(&r);
    cr_expect(strstr(r.out, "stage2.0.se") && strstr(r.out, "stage2.0.shortcut"), "%s", r.out);
    cr_expect(isfinite(metric_of(dir, 1, "valid", "loss")));
    run_result_free(&r);
}
