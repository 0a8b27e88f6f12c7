/* The real scorch-train and scorch-test on the synthetic dataset: a model
 * takes its class count from the dataset's spec (ABI 1.4), top-5 accuracy
 * only where it can be below 1, checkpoint files named by the epoch of
 * their last step and documented entry by entry, and predictions whose
 * rows match their header. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "scorch/serialize.h"

enum { PATH = 4096, DIR_LEN = 64, MAX_ARGS = 40 };

/* scorch-train of mlp on synthetic for `epochs` epochs of 8 steps, with
 * the dataset args `data_args` and `extra` arguments (NULL-terminated). */
static run_result train(const char *dir, const char *epochs, const char *data_args,
                        const char *const *extra)
{
    char train[PATH], mlp[PATH], synthetic[PATH];
    build_path(train, PATH, "host/scorch-train");
    build_path(mlp, PATH, "plugins/mlp.so");
    build_path(synthetic, PATH, "plugins/synthetic.so");
    const char *argv[MAX_ARGS] = {train, "--model", mlp, "--dataset", synthetic,
                                  "--dataset-args", data_args, "--batch-size", "32",
                                  "--epochs", epochs, "--run-dir", dir, "--seed", "3",
                                  "--quiet", "--keep-last", "10"};
    int n = 18;
    for (; extra && *extra && n < MAX_ARGS - 1; extra++)
        argv[n++] = *extra;
    argv[n] = NULL;
    return run_program(argv, NULL);
}

#define SMALL "train_size=256,valid_size=64,test_size=64"

static void expect_ok(const run_result *r)
{
    cr_assert_eq(r->status, 0, "exit %d\nstdout:\n%s\nstderr:\n%s", r->status, r->out, r->err);
}

static char *in_run(const char *dir, const char *name)
{
    static char path[PATH];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return path;
}

/* ---- the class count from the dataset ---- */

Test(classes, a_model_takes_the_datasets_class_count)
{
    char dir[DIR_LEN];
    run_result r = train(temp_dir(dir, sizeof dir), "1", "classes=12," SMALL,
                         (const char *const[]){"--model-args", "hidden=16", NULL});
    expect_ok(&r);
    run_result_free(&r);
    sc_ckpt *ck;
    cr_assert_eq(sc_ckpt_open(in_run(dir, "checkpoints/last.ckpt"), &ck), SC_OK, "%s",
                 sc_error_message());
    const sc_tensor *w = sc_ckpt_tensor(ck, "param/fc2.weight");
    cr_assert_not_null(w);
    cr_expect_eq(w->shape[0], 12, "the output layer has %lld logits, not the dataset's 12",
                 (long long)w->shape[0]);
    sc_ckpt_close(ck);
    cr_expect(!isnan(metric_of(dir, 1, "test", "top5_accuracy")), "12 classes: a top-5");
}

Test(classes, a_model_arg_that_contradicts_the_dataset_is_refused)
{
    char dir[DIR_LEN];
    run_result r = train(temp_dir(dir, sizeof dir), "1", "classes=12," SMALL,
                         (const char *const[]){"--model-args", "classes=5", NULL});
    cr_assert_eq(r.status, 1, "exit %d\n%s", r.status, r.err);
    cr_expect(strstr(r.err, "mlp: model arg classes=5, but the dataset's targets have 12 "
                            "classes"), "%s", r.err);
    run_result_free(&r);
    r = train(temp_dir(dir, sizeof dir), "1", "classes=12," SMALL,
              (const char *const[]){"--model-args", "classes=12", NULL});
    expect_ok(&r);
    run_result_free(&r);
}

/* ---- checkpoint names ---- */

static bool has_file(const char *dir, const char *name)
{
    return access(in_run(dir, name), R_OK) == 0;
}

Test(checkpoint_names, carry_the_epoch_of_their_last_step)
{
    char dir[DIR_LEN];
    run_result r = train(temp_dir(dir, sizeof dir), "2", SMALL, NULL);
    expect_ok(&r);
    run_result_free(&r);
    /* 256 samples in batches of 32: 8 steps an epoch. */
    cr_expect(has_file(dir, "checkpoints/epoch-0001-step-000000008.ckpt"));
    cr_expect(has_file(dir, "checkpoints/epoch-0002-step-000000016.ckpt"));
    cr_expect(!has_file(dir, "checkpoints/epoch-0003-step-000000016.ckpt"),
              "after epoch 2: named after the epoch to run next");
    /* A checkpoint within an epoch belongs to that epoch. */
    r = train(temp_dir(dir, sizeof dir), "1", SMALL,
              (const char *const[]){"--checkpoint-every", "3", NULL});
    expect_ok(&r);
    run_result_free(&r);
    cr_expect(has_file(dir, "checkpoints/epoch-0001-step-000000003.ckpt"));
    cr_expect(has_file(dir, "checkpoints/epoch-0001-step-000000008.ckpt"));
}

/* ---- every entry of a checkpoint is documented ---- */

/* Whether docs/checkpoint-format.md has a table row for `name`. */
static bool documented(const char *doc, const char *name)
{
    char row[128];
    snprintf(row, sizeof row, "\n| `%s` |", name);
    return strstr(doc, row) != NULL;
}

/* The name of entry `entry` in the doc: "param/<name>" for any parameter,
 * and so on; the blobs by their own name. */
static const char *doc_name(const char *entry)
{
    static const char *const kinds[] = {"param/<name>", "optim/<state>", "ema/<name>",
                                        "hook/<hook name>"};
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++)
        if (strncmp(entry, kinds[k], (size_t)(strchr(kinds[k], '/') - kinds[k]) + 1) == 0)
            return kinds[k];
    return entry;
}

/* Every entry of a run with Adam and an EMA, every optimizer state and
 * every field of its trainer blob has its row in the doc. */
Test(checkpoint_doc, every_entry_and_trainer_field_has_its_row)
{
    char dir[DIR_LEN], doc_path[PATH];
    run_result r = train(temp_dir(dir, sizeof dir), "1", SMALL,
                         (const char *const[]){"--optimizer", "adam", "--ema-decay", "0.9",
                                               "--max-train-iterations", "3", NULL});
    expect_ok(&r);
    run_result_free(&r);
    snprintf(doc_path, sizeof doc_path, "%s/docs/checkpoint-format.md",
             getenv("SCORCH_SOURCE_ROOT"));
    char *doc = read_text(doc_path);
    cr_assert_not_null(doc, "%s", doc_path);
    sc_ckpt *ck;
    cr_assert_eq(sc_ckpt_open(in_run(dir, "checkpoints/last.ckpt"), &ck), SC_OK, "%s",
                 sc_error_message());
    for (int i = 0; i < sc_ckpt_count(ck); i++) {
        const char *name = sc_ckpt_name(ck, i);
        cr_expect(documented(doc, doc_name(name)), "entry %s: no row for %s", name,
                  doc_name(name));
        if (strncmp(name, "optim/", 6) == 0)
            cr_expect(strstr(doc, name + 6), "optimizer state %s is not documented", name);
    }
    size_t size;
    const char *trainer = sc_ckpt_blob(ck, "trainer", &size);
    cr_assert_not_null(trainer);
    char *text = strndup(trainer, size);
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        line[strcspn(line, " ")] = '\0';
        if (strcmp(line, "metric") != 0)
            cr_expect(documented(doc, line), "trainer field %s has no row", line);
    }
    free(text);
    sc_ckpt_close(ck);
    free(doc);
}

/* ---- scorch-test --predictions ---- */

static int commas(const char *line)
{
    int n = 0;
    for (; *line && *line != '\n'; line++)
        n += *line == ',';
    return n;
}

Test(predictions, topk_beyond_the_classes_is_clamped)
{
    char dir[DIR_LEN], test[PATH], ckpt[PATH], csv[PATH];
    run_result r = train(temp_dir(dir, sizeof dir), "1", "classes=3," SMALL, NULL);
    expect_ok(&r);
    run_result_free(&r);
    build_path(test, PATH, "host/scorch-test");
    snprintf(ckpt, PATH, "%s", in_run(dir, "checkpoints/last.ckpt"));
    snprintf(csv, PATH, "%s", in_run(dir, "predictions.csv"));
    r = run_program((const char *[]){test, "--checkpoint", ckpt, "--predictions", csv,
                                     "--topk", "5", NULL},
                    NULL);
    expect_ok(&r);
    cr_expect(strstr(r.err, "note: --topk 5 is more than the 3 classes"), "%s", r.err);
    cr_expect(strstr(r.out, "(64 rows, top-3)"), "%s", r.out);
    run_result_free(&r);
    char *text = read_text(csv);
    cr_assert_not_null(text);
    cr_expect(strstr(text, ",pred_3,score_3\n"), "%s", text);
    int header = commas(text), rows = 0;
    for (const char *line = strchr(text, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
        cr_expect_eq(commas(line + 1), header, "row %d: %.80s", rows, line + 1);
        rows++;
    }
    cr_expect_eq(rows, 64);
    free(text);
}
