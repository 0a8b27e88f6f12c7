/* scorch-predict through the real programs (docs/predict.md): an mlp
 * trained a few steps on Fashion-MNIST predicts PNGs written from test
 * images as scorch-test predicts those samples; the csv and jsonl formats;
 * CSV rows on stdin for the synthetic dataset and a regression's raw
 * outputs; bad inputs among good ones; --input-list; --topk beyond the
 * classes; plugins moved since training; the exit codes. The same logits
 * as PyTorch's twins: predict_torch.py. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../plugins/fashion_mnist/idx.h"
#include "../unit/sdk/png_writer.h"
#include "harness.h"

#define FASHION_DIR "/usr/share/datasets/fashion-mnist"
#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

enum { PATH = 4096, DIR_LEN = 64, SIDE = 28, SAMPLES = 64, MAX_FIELDS = 64 };
enum { EXIT_USAGE = 2, EXIT_INPUTS_FAILED = 3 };

static void expect_exit(run_result *r, int status)
{
    cr_assert_eq(r->status, status, "exit %d, not %d\nstdout:\n%s\nstderr:\n%s", r->status,
                 status, r->out, r->err);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s", path);
    fputs(text, f);
    fclose(f);
}

/* ---- reading CSV output (no quoted fields in these tests) ---- */

/* Line `row` of text (0: the header) split at commas into fields; returns
 * how many, 0 past the last line. The fields point into buf. */
static int csv_row(const char *text, int row, char *buf, size_t size, char **fields)
{
    for (int i = 0; i < row && text; i++)
        text = strchr(text, '\n') ? strchr(text, '\n') + 1 : NULL;
    if (!text || !*text)
        return 0;
    snprintf(buf, size, "%.*s", (int)strcspn(text, "\n"), text);
    int n = 0;
    for (char *f = buf; f && n < MAX_FIELDS; n++) {
        fields[n] = f;
        f = strchr(f, ',');
        if (f)
            *f++ = '\0';
    }
    return n;
}

static int count_lines(const char *text)
{
    int n = 0;
    for (; *text; text++)
        n += *text == '\n';
    return n;
}

/* ---- Fashion-MNIST ---- */

/* scorch-train of the mlp: 60 steps, a checkpoint in DIR/checkpoints. */
static void train_fashion(const char *dir, const char *model, const char *dataset)
{
    run_result r = run_joined(
        ARGS(built("host/scorch-train"), "--model", model, "--model-args", "hidden=32",
             "--dataset", dataset, "--dataset-path", FASHION_DIR, "--batch-size", "64",
             "--epochs", "1", "--max-train-iterations", "60", "--max-valid-iterations", "1",
             "--max-test-iterations", "1", "--run-dir", dir, "--workers", "1", "--threads", "2",
             "--quiet", "--no-tensorboard"),
        NULL);
    expect_exit(&r, 0);
    run_result_free(&r);
}

/* A fresh DIR with a trained mlp's checkpoint, whose path goes into
 * checkpoint (PATH bytes). */
static const char *fashion_checkpoint(char *dir, char *checkpoint)
{
    train_fashion(temp_dir(dir, DIR_LEN), built("plugins/mlp.so"),
                  built("plugins/fashion_mnist.so"));
    snprintf(checkpoint, PATH, "%s", in_dir(dir, "checkpoints/last.ckpt"));
    return checkpoint;
}

/* PNGs of the first n test images, DIR/img-I.png. */
static void write_test_pngs(const char *dir, int n)
{
    int64_t count;
    uint8_t *pixels;
    cr_assert_eq(idx_read_u8(FASHION_DIR "/t10k-images-idx3-ubyte.gz", 3,
                             (const int64_t[]){SIDE, SIDE}, &count, &pixels),
                 SC_OK, "%s", sc_error_message());
    for (int i = 0; i < n; i++) {
        png_bytes png = png_write_spec(&(png_spec){SIDE, SIDE, PNG_COLOR_TYPE_GRAY, 8,
                                                   .pixels = pixels + i * SIDE * SIDE});
        char name[32];
        snprintf(name, sizeof name, "img-%d.png", i);
        FILE *f = fopen(in_dir(dir, name), "wb");
        cr_assert_not_null(f);
        cr_assert_eq(fwrite(png.data, 1, png.size, f), png.size);
        fclose(f);
        free(png.data);
    }
    free(pixels);
}

/* The argument list: the program, the checkpoint, and img-0..n-1.png. */
static const char **predict_args(const char *checkpoint, const char *dir, int n,
                                 const char **argv)
{
    static char names[SAMPLES][PATH];
    int k = 0;
    argv[k++] = built("host/scorch-predict");
    argv[k++] = "--checkpoint";
    argv[k++] = checkpoint;
    for (int i = 0; i < n; i++) {
        snprintf(names[i], PATH, "%s/img-%d.png", dir, i);
        argv[k++] = names[i];
    }
    argv[k] = NULL;
    return argv;
}

static run_result predict_pngs(const char *checkpoint, const char *dir, int n,
                               const char *const *extra)
{
    const char *argv[SAMPLES + 4];
    return run_joined(predict_args(checkpoint, dir, n, argv), extra);
}

Test(predict, pngs_of_test_images_get_scorch_tests_predictions)
{
    char dir[DIR_LEN], rows[PATH], buf[PATH];
    char *want[MAX_FIELDS], *got[MAX_FIELDS];
    char checkpoint_path[PATH];
    const char *checkpoint = fashion_checkpoint(dir, checkpoint_path);
    run_result r = run_joined(ARGS(built("host/scorch-test"), "--checkpoint", checkpoint,
                                   "--predictions", in_dir(dir, "predictions.csv"), "--topk",
                                   "3", "--batch-size", "64", "--max-test-iterations", "1",
                                   "--threads", "2", "--quiet"),
                              NULL);
    expect_exit(&r, 0);
    run_result_free(&r);
    char *expected = read_text(in_dir(dir, "predictions.csv"));
    cr_assert_not_null(expected);
    write_test_pngs(dir, SAMPLES);
    r = predict_pngs(checkpoint, dir, SAMPLES,
                     ARGS("--topk", "3", "--batch-size", "64", "--threads", "2"));
    expect_exit(&r, 0);
    cr_expect_str_eq(r.err, "");
    cr_assert_eq(csv_row(r.out, 0, buf, sizeof buf, got), 10, "%.300s", r.out);
    cr_expect_str_eq(got[0], "input");
    cr_expect_str_eq(got[9], "name_3");
    for (int i = 0; i < SAMPLES; i++) {
        /* sample,target,correct,pred_1,score_1,name_1,... against
         * input,pred_1,score_1,name_1,... */
        cr_assert_eq(csv_row(expected, i + 1, rows, sizeof rows, want), 12);
        cr_assert_eq(csv_row(r.out, i + 1, buf, sizeof buf, got), 10, "row %d", i);
        cr_assert_eq(atoi(want[0]), i);
        cr_expect(strstr(got[0], "img-") && atoi(strstr(got[0], "img-") + 4) == i);
        for (int k = 0; k < 3; k++) {
            cr_expect_str_eq(got[1 + 3 * k], want[3 + 3 * k], "image %d, class %d", i, k + 1);
            cr_expect_float_eq(atof(got[2 + 3 * k]), atof(want[4 + 3 * k]), 2e-6,
                               "image %d: probability %s, scorch-test's %s", i, got[2 + 3 * k],
                               want[4 + 3 * k]);
            cr_expect_str_eq(got[3 + 3 * k], want[5 + 3 * k]);
        }
    }
    free(expected);
    run_result_free(&r);
}

/* Python's json module reads every line of `text`: one object each, with
 * the input and its top classes; prints "N CLASS" (objects, first class). */
static char *parse_jsonl(const char *dir, const char *text)
{
    const char *path = in_dir(dir, "out.jsonl");
    write_text(path, text);
    run_result r = run_program(
        ARGS("/usr/bin/env", "python3", "-c",
             "import json, sys\n"
             "rows = [json.loads(line) for line in open(sys.argv[1])]\n"
             "for r in rows:\n"
             "    assert set(r) == {'input', 'top'}, r\n"
             "    assert [set(t) for t in r['top']] == [{'class', 'name', 'probability'}] * 2\n"
             "    assert r['top'][0]['probability'] >= r['top'][1]['probability'], r\n"
             "print(len(rows), rows[0]['top'][0]['class'])\n",
             path),
        NULL);
    expect_exit(&r, 0);
    char *out = strdup(r.out);
    run_result_free(&r);
    return out;
}

Test(predict, jsonl_is_json_and_agrees_with_csv)
{
    char dir[DIR_LEN], buf[PATH], *got[MAX_FIELDS];
    char checkpoint_path[PATH];
    const char *checkpoint = fashion_checkpoint(dir, checkpoint_path);
    write_test_pngs(dir, 5);
    run_result csv = predict_pngs(checkpoint, dir, 5, ARGS("--topk", "2", "--format", "csv"));
    expect_exit(&csv, 0);
    run_result jsonl = predict_pngs(checkpoint, dir, 5, ARGS("--topk", "2", "--format", "jsonl"));
    expect_exit(&jsonl, 0);
    cr_expect_eq(count_lines(jsonl.out), 5);
    cr_assert_eq(csv_row(csv.out, 1, buf, sizeof buf, got), 7);
    char want[64];
    snprintf(want, sizeof want, "5 %s\n", got[1]);
    char *parsed = parse_jsonl(dir, jsonl.out);
    cr_expect_str_eq(parsed, want);
    free(parsed);
    run_result text = predict_pngs(checkpoint, dir, 1, ARGS("--format", "text", "--topk", "1"));
    expect_exit(&text, 0);
    char line[256];
    snprintf(line, sizeof line, "%s: %s ", in_dir(dir, "img-0.png"), got[3]);
    cr_expect(strncmp(text.out, line, strlen(line)) == 0, "%s", text.out);
    cr_expect(strstr(text.out, "%\n"), "%s", text.out);
    run_result_free(&csv);
    run_result_free(&jsonl);
    run_result_free(&text);
}

Test(predict, a_bad_input_is_one_line_and_the_others_are_predicted)
{
    char dir[DIR_LEN];
    char checkpoint_path[PATH];
    const char *checkpoint = fashion_checkpoint(dir, checkpoint_path);
    write_test_pngs(dir, 2);
    write_text(in_dir(dir, "notes.txt"), "not an image\n");
    /* A PNG cut short: its first 100 bytes. */
    size_t size;
    char *png = read_file(in_dir(dir, "img-1.png"), &size);
    FILE *f = fopen(in_dir(dir, "cut.png"), "wb");
    cr_assert(png && f && size > 100);
    fwrite(png, 1, 100, f);
    fclose(f);
    free(png);
    char good0[PATH], good1[PATH], text[PATH], cut[PATH], missing[PATH];
    snprintf(good0, PATH, "%s", in_dir(dir, "img-0.png"));
    snprintf(good1, PATH, "%s", in_dir(dir, "img-1.png"));
    snprintf(text, PATH, "%s", in_dir(dir, "notes.txt"));
    snprintf(cut, PATH, "%s", in_dir(dir, "cut.png"));
    snprintf(missing, PATH, "%s", in_dir(dir, "missing.png"));
    run_result r = run_joined(ARGS(built("host/scorch-predict"), "--checkpoint", checkpoint,
                                   good0, text, cut, missing, good1, "--format", "csv"),
                              NULL);
    expect_exit(&r, EXIT_INPUTS_FAILED);
    cr_expect_eq(count_lines(r.out), 3, "a header and the two good images:\n%s", r.out);
    cr_expect(strstr(r.out, good0) && strstr(r.out, good1), "%s", r.out);
    cr_expect_eq(count_lines(r.err), 3, "a line per bad input:\n%s", r.err);
    const char *const bad[][2] = {{text, "not an image"}, {cut, "truncated"},
                                  {missing, "No such file"}};
    const char *line = r.err;
    for (int i = 0; i < 3; i++, line = strchr(line, '\n') + 1) {
        size_t len = strcspn(line, "\n");
        char one[PATH];
        snprintf(one, sizeof one, "%.*s", (int)len, line);
        cr_expect(strncmp(one, "scorch-predict: ", 16) == 0, "%s", one);
        cr_expect(strstr(one, bad[i][0]), "the line names %s: %s", bad[i][0], one);
        cr_expect(strstr(one, bad[i][1]), "the line says '%s': %s", bad[i][1], one);
    }
    run_result_free(&r);
}

Test(predict, input_list_names_a_path_a_line)
{
    char dir[DIR_LEN], list[PATH];
    char checkpoint_path[PATH];
    const char *checkpoint = fashion_checkpoint(dir, checkpoint_path);
    write_test_pngs(dir, 3);
    char text[3 * PATH];
    snprintf(text, sizeof text, "%s\n\n%s\r\n", in_dir(dir, "img-2.png"),
             in_dir(dir, "img-0.png"));
    snprintf(list, PATH, "%s", in_dir(dir, "list.txt"));
    write_text(list, text);
    run_result r = run_joined(ARGS(built("host/scorch-predict"), "--checkpoint", checkpoint,
                                   in_dir(dir, "img-1.png"), "--input-list", list),
                              NULL);
    expect_exit(&r, 0);
    cr_expect_eq(count_lines(r.out), 4, "%s", r.out);
    const char *one = strstr(r.out, "img-1.png"), *two = strstr(r.out, "img-2.png"),
               *zero = strstr(r.out, "img-0.png");
    cr_expect(one && two && zero && one < two && two < zero, "the arguments, then the list:\n%s",
              r.out);
    run_result_free(&r);
    r = run_joined(ARGS(built("host/scorch-predict"), "--checkpoint", checkpoint,
                        "--input-list", in_dir(dir, "nowhere.txt")),
                   NULL);
    expect_exit(&r, 1);
    cr_expect(strstr(r.err, "--input-list") && strstr(r.err, "nowhere.txt"), "%s", r.err);
    run_result_free(&r);
}

Test(predict, topk_beyond_the_classes_is_clamped_with_a_note)
{
    char dir[DIR_LEN], buf[PATH], *fields[MAX_FIELDS];
    char checkpoint_path[PATH];
    const char *checkpoint = fashion_checkpoint(dir, checkpoint_path);
    write_test_pngs(dir, 2);
    run_result r = predict_pngs(checkpoint, dir, 2, ARGS("--topk", "20"));
    expect_exit(&r, 0);
    cr_expect(strstr(r.err, "note: --topk 20 is more than the 10 classes: the predictions list "
                            "the top 10"), "%s", r.err);
    for (int row = 0; row < 3; row++)
        cr_expect_eq(csv_row(r.out, row, buf, sizeof buf, fields), 31, "row %d: %s", row, r.out);
    run_result_free(&r);
}

Test(predict, plugins_moved_since_training_are_named_by_options)
{
    char dir[DIR_LEN], moved[DIR_LEN], model[PATH], data[PATH];
    temp_dir(moved, sizeof moved);
    snprintf(model, PATH, "%s", in_dir(moved, "mlp.so"));
    snprintf(data, PATH, "%s", in_dir(moved, "fashion_mnist.so"));
    run_result cp = run_program(ARGS("/bin/cp", built("plugins/mlp.so"),
                                     built("plugins/fashion_mnist.so"), moved),
                                NULL);
    expect_exit(&cp, 0);
    run_result_free(&cp);
    train_fashion(temp_dir(dir, sizeof dir), model, data);
    unlink(model);
    unlink(data);
    write_test_pngs(dir, 1);
    const char *checkpoint = in_dir(dir, "checkpoints/last.ckpt");
    run_result r = predict_pngs(checkpoint, dir, 1, NULL);
    expect_exit(&r, 1);
    cr_expect(strstr(r.err, "mlp.so"), "the error names the missing plugin: %s", r.err);
    run_result_free(&r);
    r = predict_pngs(checkpoint, dir, 1,
                     ARGS("--model", built("plugins/mlp.so"), "--dataset",
                          built("plugins/fashion_mnist.so")));
    expect_exit(&r, 0);
    cr_expect_eq(count_lines(r.out), 2, "%s", r.out);
    run_result_free(&r);
}

Test(predict, the_command_lines_mistakes_are_usage_errors)
{
    char dir[DIR_LEN];
    temp_dir(dir, sizeof dir);
    run_result r = run_joined(ARGS(built("host/scorch-predict"), "--checkpoint", "x.ckpt"), NULL);
    expect_exit(&r, EXIT_USAGE);
    cr_expect(strstr(r.err, "scorch-predict: no inputs"), "%s", r.err);
    run_result_free(&r);
    r = run_joined(ARGS(built("host/scorch-predict"), "a.png"), NULL);
    expect_exit(&r, EXIT_USAGE);
    cr_expect(strstr(r.err, "missing --checkpoint"), "%s", r.err);
    run_result_free(&r);
    r = run_joined(ARGS(built("host/scorch-predict"), "--checkpoint", in_dir(dir, "none.ckpt"),
                        "a.png"),
                   NULL);
    expect_exit(&r, 1);
    cr_expect(strstr(r.err, "none.ckpt"), "%s", r.err);
    cr_expect_eq(count_lines(r.err), 1, "one line: %s", r.err);
    run_result_free(&r);
    r = run_joined(ARGS(built("host/scorch-predict"), "--help"), NULL);
    expect_exit(&r, 0);
    cr_expect(strstr(r.out, "Usage: scorch-predict --checkpoint PATH [options] INPUT..."), "%s",
              r.out);
    run_result_free(&r);
}

/* ---- the synthetic dataset: CSV rows ---- */

#define SYNTHETIC_ARGS "features=4,train_size=256,valid_size=64,test_size=64"

/* A fresh DIR with the checkpoint of an mlp (args model_args) trained on
 * synthetic (data_args) with `extra` options (or NULL), whose path goes
 * into checkpoint (PATH bytes). */
static const char *train_synthetic(char *dir, const char *model_args, const char *data_args,
                                   const char *const *extra, char *checkpoint)
{
    run_result r = run_joined(
        ARGS(built("host/scorch-train"), "--model", built("plugins/mlp.so"), "--model-args",
             model_args, "--dataset", built("plugins/synthetic.so"), "--dataset-args", data_args,
             "--batch-size", "32", "--epochs", "1", "--run-dir", temp_dir(dir, DIR_LEN),
             "--workers", "0", "--quiet", "--no-tensorboard"),
        extra);
    expect_exit(&r, 0);
    run_result_free(&r);
    snprintf(checkpoint, PATH, "%s", in_dir(dir, "checkpoints/last.ckpt"));
    return checkpoint;
}

/* scorch-predict ARGS... with stdin from the file `input`. */
static run_result predict_stdin(const char *input, const char *args)
{
    char command[4 * PATH];
    snprintf(command, sizeof command, "exec %s %s < %s", built("host/scorch-predict"), args,
             input);
    return run_program(ARGS("/bin/sh", "-c", command), NULL);
}

Test(predict, stdin_gives_a_csv_row_a_line)
{
    char dir[DIR_LEN], args[2 * PATH], buf[PATH], *fields[MAX_FIELDS], checkpoint[PATH];
    train_synthetic(dir, "hidden=8", SYNTHETIC_ARGS, NULL, checkpoint);
    write_text(in_dir(dir, "rows.csv"), "0.5,-1,2,0.25\n1,2\n\n-3,0,0,1e-2\r\n");
    write_text(in_dir(dir, "row.csv"), "-3,0,0,1e-2\n");
    snprintf(args, sizeof args, "--checkpoint %s --topk 2 - %s", checkpoint,
             in_dir(dir, "row.csv"));
    run_result r = predict_stdin(in_dir(dir, "rows.csv"), args);
    expect_exit(&r, EXIT_INPUTS_FAILED);
    cr_expect_eq(count_lines(r.err), 1, "%s", r.err);
    cr_expect(strncmp(r.err, "scorch-predict: stdin:2: ", 25) == 0, "%s", r.err);
    cr_assert_eq(csv_row(r.out, 0, buf, sizeof buf, fields), 5, "no class names: %s", r.out);
    cr_expect_str_eq(fields[4], "score_2");
    cr_assert_eq(csv_row(r.out, 1, buf, sizeof buf, fields), 5, "%s", r.out);
    cr_expect_str_eq(fields[0], "stdin:1");
    cr_assert_eq(csv_row(r.out, 2, buf, sizeof buf, fields), 5, "%s", r.out);
    cr_expect_str_eq(fields[0], "stdin:4");
    const char *row4 = strchr(strstr(r.out, "stdin:4"), ','),
               *file_row = strchr(strstr(r.out, "row.csv"), ',');
    size_t len = strcspn(row4, "\n");
    cr_expect(len == strcspn(file_row, "\n") && strncmp(row4, file_row, len) == 0,
              "the same row from stdin and from a file:\n%s", r.out);
    cr_assert_eq(csv_row(r.out, 3, buf, sizeof buf, fields), 5, "%s", r.out);
    cr_expect_eq(csv_row(r.out, 4, buf, sizeof buf, fields), 0);
    run_result_free(&r);
}

Test(predict, a_regression_prints_its_outputs)
{
    char dir[DIR_LEN], args[2 * PATH], checkpoint[PATH];
    train_synthetic(dir, "hidden=8,task=regression", "task=regression,outputs=2," SYNTHETIC_ARGS,
                    NULL, checkpoint);
    write_text(in_dir(dir, "rows.csv"), "0.5,-1,2,0.25\n");
    snprintf(args, sizeof args, "--checkpoint %s --format jsonl -", checkpoint);
    run_result r = predict_stdin(in_dir(dir, "rows.csv"), args);
    expect_exit(&r, 0);
    double y0, y1;
    cr_expect_eq(sscanf(r.out, "{\"input\":\"stdin:1\",\"outputs\":[[%lf,%lf]]}\n", &y0, &y1), 2,
                 "%s", r.out);
    cr_expect(isfinite(y0) && isfinite(y1));
    run_result_free(&r);
}

Test(predict, ema_takes_the_ema_weights)
{
    char dir[DIR_LEN], args[2 * PATH], checkpoint[PATH];
    train_synthetic(dir, "hidden=8", SYNTHETIC_ARGS, ARGS("--ema-decay", "0.9"), checkpoint);
    write_text(in_dir(dir, "row.csv"), "0.5,-1,2,0.25\n");
    const char *row = in_dir(dir, "row.csv");
    run_result trained = run_joined(ARGS(built("host/scorch-predict"), "--checkpoint", checkpoint,
                                         "--raw", row),
                                    NULL);
    run_result ema = run_joined(ARGS(built("host/scorch-predict"), "--checkpoint", checkpoint,
                                     "--raw", "--ema", row),
                                NULL);
    expect_exit(&trained, 0);
    expect_exit(&ema, 0);
    cr_expect_eq(count_lines(ema.out), 2, "%s", ema.out);
    cr_expect(strcmp(trained.out, ema.out) != 0, "the EMA's outputs are the weights':\n%s",
              ema.out);
    run_result_free(&trained);
    run_result_free(&ema);
    train_synthetic(dir, "hidden=8", SYNTHETIC_ARGS, NULL, checkpoint);
    snprintf(args, sizeof args, "--checkpoint %s --ema -", checkpoint);
    run_result none = predict_stdin(row, args);
    expect_exit(&none, 1);
    cr_expect(strstr(none.err, "EMA"), "%s", none.err);
    run_result_free(&none);
}
