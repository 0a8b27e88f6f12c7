/* scorch-predict (host/run/predict.h) against a fake inference handle: the
 * inputs (arguments, stdin's lines, --input-list), batches, the formats,
 * top-k, failed inputs; and its command line (host/base/config.h).
 *
 * The fake's network has one input and one output of FEATURES floats and
 * copies the input to the output, so the logits are what the test wrote:
 * an input is one CSV row of FEATURES numbers, from a file or a line. The
 * real network through the real programs is tests/integration/
 * test_predict.c's. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/config.h"
#include "run/predict.h"
#include "scorch/csv.h"
#include "scorch/infer.h"

enum { FEATURES = 3, MAX_RUNS = 16 };

/* ---- the fake inference handle ---- */

static struct fake {
    int64_t classes;     /* the spec's class count; 0: no classifier */
    bool named;          /* class names */
    bool no_decode;      /* a dataset without index_decode */
    bool second_output;  /* output 1: two int32, {n, 7} */
    int runs;            /* sc_infer_run calls and their sizes */
    int64_t run_sizes[MAX_RUNS];
    sc_infer_options opened;
} fake;

struct sc_infer {
    sc_sample_spec spec;
    sc_tensor_spec outputs[2];
};
static sc_infer the_handle;

static void fake_reset(void) { fake = (struct fake){.classes = FEATURES, .named = true}; }

sc_status sc_infer_open(const char *checkpoint, const sc_infer_options *options, sc_infer **out)
{
    if (strcmp(checkpoint, "missing.ckpt") == 0)
        return sc_error_set(SC_ERR_IO, "cannot read checkpoint %s", checkpoint);
    fake.opened = *options;
    the_handle = (sc_infer){
        .spec = {.n_inputs = 1, .inputs = {{SC_F32, 1, {FEATURES}}}, .classes = fake.classes},
        .outputs = {{SC_F32, 1, {FEATURES}}, {SC_I32, 1, {2}}}};
    *out = &the_handle;
    return SC_OK;
}

void sc_infer_close(sc_infer *h) { (void)h; }

const sc_sample_spec *sc_infer_input_spec(const sc_infer *h) { return &h->spec; }

int sc_infer_output_count(const sc_infer *h)
{
    (void)h;
    return fake.second_output ? 2 : 1;
}

const sc_tensor_spec *sc_infer_output_spec(const sc_infer *h, int i) { return &h->outputs[i]; }

sc_status sc_infer_run(sc_infer *h, int64_t n, const void *const *inputs, void *const *outputs)
{
    (void)h;
    cr_assert_lt(fake.runs, MAX_RUNS);
    fake.run_sizes[fake.runs++] = n;
    memcpy(outputs[0], inputs[0], (size_t)n * FEATURES * sizeof(float));
    for (int64_t i = 0; fake.second_output && i < n; i++) {
        ((int32_t *)outputs[1])[2 * i] = (int32_t)n;
        ((int32_t *)outputs[1])[2 * i + 1] = 7;
    }
    return SC_OK;
}

bool sc_infer_decodes(const sc_infer *h)
{
    (void)h;
    return !fake.no_decode;
}

sc_status sc_infer_decode(const sc_infer *h, const sc_raw_input *raw, void *const *inputs)
{
    (void)h;
    return sc_csv_read_row(raw, inputs[0], FEATURES);
}

const char *sc_infer_class_name(const sc_infer *h, int64_t label)
{
    static const char *const names[FEATURES] = {"cat", "dog", "bird, small"};
    (void)h;
    return fake.named && label >= 0 && label < FEATURES ? names[label] : NULL;
}

const char *sc_infer_model_name(const sc_infer *h)
{
    (void)h;
    return "fake";
}

/* ---- helpers ---- */

/* A file in /tmp named *_NAME (so its extension tells its media type)
 * holding text; the path goes into path (96 bytes). */
static const char *temp_file(char *path, const char *name, const char *text)
{
    char dir[] = "/tmp/scorch-predict-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, 96, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

typedef struct outcome {
    sc_status status;
    host_predict_result result;
    char *out, *err; /* what went to each stream */
} outcome;

static void outcome_free(outcome *o)
{
    free(o->out);
    free(o->err);
}

/* host_predict of `inputs` (NULL-terminated) in `format`, --topk k, batches
 * of `batch`; the rest of the request from `base` when given. */
static outcome predict_with(const host_predict_request *base, char **inputs,
                            host_predict_format format, int k, int64_t batch)
{
    outcome o = {0};
    size_t out_len, err_len;
    host_predict_request r = base ? *base : (host_predict_request){.input_list = ""};
    r.checkpoint = r.checkpoint ? r.checkpoint : "x.ckpt";
    r.inputs = inputs;
    r.n_inputs = 0;
    while (inputs && inputs[r.n_inputs])
        r.n_inputs++;
    r.format = format;
    r.topk = k;
    r.infer.max_batch = batch;
    r.out = open_memstream(&o.out, &out_len);
    r.err = open_memstream(&o.err, &err_len);
    o.status = host_predict(&r, &o.result);
    fclose(r.out);
    fclose(r.err);
    return o;
}

#define INPUTS(...) ((char *[]){__VA_ARGS__, NULL})

static outcome predict(char **inputs, host_predict_format format, int k)
{
    return predict_with(NULL, inputs, format, k, 64);
}

static void expect_ok(const outcome *o)
{
    cr_assert_eq(o->status, SC_OK, "%s", sc_error_message());
}

static bool starts_with(const char *text, const char *start)
{
    return strncmp(text, start, strlen(start)) == 0;
}

static int count_lines(const char *text)
{
    int n = 0;
    for (; *text; text++)
        n += *text == '\n';
    return n;
}

TestSuite(predict, .init = fake_reset);

/* ---- classifiers ---- */

Test(predict, csv_lists_the_top_classes_by_softmax_probability)
{
    char a[96], b[96];
    outcome o = predict(INPUTS((char *)temp_file(a, "a.csv", "1,3,2\n"),
                               (char *)temp_file(b, "b.csv", "0,0,5\n")),
                        HOST_PREDICT_CSV, 2);
    expect_ok(&o);
    double e1 = exp(1), e2 = exp(2), e3 = exp(3), sum = e1 + e2 + e3;
    char want[1024];
    snprintf(want, sizeof want,
             "input,pred_1,score_1,name_1,pred_2,score_2,name_2\n"
             "%s,1,%.6f,dog,2,%.6f,\"bird, small\"\n"
             "%s,2,%.6f,\"bird, small\",0,%.6f,cat\n",
             a, e3 / sum, e2 / sum, b, exp(5) / (exp(5) + 2), 1 / (exp(5) + 2));
    cr_expect_str_eq(o.out, want);
    cr_expect_str_eq(o.err, "");
    cr_expect_eq(o.result.predicted, 2);
    cr_expect_eq(o.result.failed, 0);
    outcome_free(&o);
}

Test(predict, classes_without_names_are_their_indices)
{
    fake.named = false;
    char a[96];
    outcome o = predict(INPUTS((char *)temp_file(a, "a.csv", "1,3,2")), HOST_PREDICT_CSV, 1);
    expect_ok(&o);
    cr_expect(starts_with(o.out, "input,pred_1,score_1\n"), "%s", o.out);
    cr_expect(strstr(o.out, ",1,0.665241\n"), "%s", o.out);
    outcome_free(&o);
    o = predict(INPUTS(a), HOST_PREDICT_TEXT, 2);
    expect_ok(&o);
    char want[256];
    snprintf(want, sizeof want, "%s: class 1 66.5%%, class 2 24.5%%\n", a);
    cr_expect_str_eq(o.out, want);
    outcome_free(&o);
}

Test(predict, jsonl_is_one_object_a_line)
{
    char a[96];
    outcome o = predict(INPUTS((char *)temp_file(a, "a\"b.csv", "1,3,2\n")), HOST_PREDICT_JSONL,
                        2);
    expect_ok(&o);
    char *dir_end = strrchr(a, '/');
    char want[512];
    snprintf(want, sizeof want,
             "{\"input\":\"%.*s/a\\\"b.csv\",\"top\":[{\"class\":1,\"name\":\"dog\","
             "\"probability\":0.665241},{\"class\":2,\"name\":\"bird, small\","
             "\"probability\":0.244728}]}\n",
             (int)(dir_end - a), a);
    cr_expect_str_eq(o.out, want);
    outcome_free(&o);
}

Test(predict, text_is_for_people)
{
    char a[96];
    outcome o = predict(INPUTS((char *)temp_file(a, "a.csv", "1,3,2")), HOST_PREDICT_TEXT, 3);
    expect_ok(&o);
    char want[256];
    snprintf(want, sizeof want, "%s: dog 66.5%%, bird, small 24.5%%, cat 9%%\n", a);
    cr_expect_str_eq(o.out, want);
    outcome_free(&o);
}

Test(predict, topk_beyond_the_classes_is_clamped_with_a_note)
{
    char a[96];
    outcome o = predict(INPUTS((char *)temp_file(a, "a.csv", "1,3,2")), HOST_PREDICT_CSV, 7);
    expect_ok(&o);
    cr_expect_str_eq(o.err, "note: --topk 7 is more than the 3 classes: the predictions list "
                            "the top 3\n");
    cr_expect(starts_with(o.out, "input,pred_1,score_1,name_1,pred_2,score_2,name_2,pred_3,"
                             "score_3,name_3\n"), "%s", o.out);
    outcome_free(&o);
}

/* ---- raw outputs ---- */

Test(predict, raw_prints_every_output_as_a_float_reads_back)
{
    fake.second_output = true;
    char a[96];
    host_predict_request raw = {.input_list = "", .raw = true};
    char **in = INPUTS((char *)temp_file(a, "a.csv", "0.1,-2.5e-7,3\n"));
    outcome o = predict_with(&raw, in, HOST_PREDICT_CSV, 5, 64);
    expect_ok(&o);
    char want[512];
    snprintf(want, sizeof want,
             "input,output0_0,output0_1,output0_2,output1_0,output1_1\n"
             "%s,0.100000001,-2.49999999e-07,3,1,7\n", a);
    cr_expect_str_eq(o.out, want);
    cr_expect_str_eq(o.err, "", "no note about --topk: no classes are listed");
    outcome_free(&o);
    o = predict_with(&raw, in, HOST_PREDICT_JSONL, 5, 64);
    expect_ok(&o);
    snprintf(want, sizeof want,
             "{\"input\":\"%s\",\"outputs\":[[0.100000001,-2.49999999e-07,3],[1,7]]}\n", a);
    cr_expect_str_eq(o.out, want);
    outcome_free(&o);
    o = predict_with(&raw, in, HOST_PREDICT_TEXT, 5, 64);
    expect_ok(&o);
    snprintf(want, sizeof want, "%s: 0.100000001 -2.49999999e-07 3 | 1 7\n", a);
    cr_expect_str_eq(o.out, want);
    outcome_free(&o);
}

Test(predict, what_is_no_classifier_gets_its_outputs)
{
    fake.classes = 0;
    char a[96];
    outcome o = predict(INPUTS((char *)temp_file(a, "a.csv", "1,2,3")), HOST_PREDICT_CSV, 5);
    expect_ok(&o);
    cr_expect(starts_with(o.out, "input,output0_0,output0_1,output0_2\n"), "%s", o.out);
    outcome_free(&o);
}

/* ---- inputs ---- */

Test(predict, a_bad_input_is_one_line_and_the_others_are_predicted)
{
    char good[96], bad[96], empty_dir[] = "/tmp/scorch-predict-XXXXXX", image[96];
    temp_file(good, "good.csv", "1,2,3\n");
    temp_file(bad, "bad.csv", "1,2\n");
    temp_file(image, "row.png", "1,2,3\n");
    cr_assert_not_null(mkdtemp(empty_dir));
    char missing[128];
    snprintf(missing, sizeof missing, "%s/missing.csv", empty_dir);
    outcome o = predict(INPUTS(good, bad, missing, image, good), HOST_PREDICT_CSV, 1);
    expect_ok(&o);
    cr_expect_eq(o.result.predicted, 2);
    cr_expect_eq(o.result.failed, 3);
    cr_expect_eq(count_lines(o.out), 3, "a header and the two good inputs:\n%s", o.out);
    cr_expect_eq(count_lines(o.err), 3, "one line per bad input:\n%s", o.err);
    char *line = o.err;
    const char *const each[] = {bad, missing, image};
    for (int i = 0; i < 3; i++, line = strchr(line, '\n') + 1) {
        cr_expect(starts_with(line, "scorch-predict: "), "%s", line);
        cr_expect(strstr(line, each[i]) && strstr(line, each[i]) < strchr(line, '\n'),
                  "line %d names %s:\n%s", i, each[i], o.err);
    }
    cr_expect_eq(fake.runs, 1, "one batch");
    cr_expect_eq(fake.run_sizes[0], 2, "of the two that decoded");
    outcome_free(&o);
}

Test(predict, batches_are_at_most_the_batch_size)
{
    char a[96];
    temp_file(a, "a.csv", "1,2,3");
    outcome o = predict_with(NULL, INPUTS(a, a, a, a, a), HOST_PREDICT_CSV, 1, 2);
    expect_ok(&o);
    cr_expect_eq(fake.opened.max_batch, 2);
    cr_expect_eq(fake.runs, 3);
    cr_expect_eq(fake.run_sizes[0], 2);
    cr_expect_eq(fake.run_sizes[2], 1);
    cr_expect_eq(o.result.predicted, 5);
    outcome_free(&o);
}

Test(predict, stdin_gives_one_row_a_line)
{
    char rows[96], a[96];
    temp_file(rows, "rows", "1,2,3\r\n\n0,0,9\nnot,a,row\n5,0,0");
    cr_assert_not_null(freopen(rows, "r", stdin));
    temp_file(a, "a.csv", "3,0,0");
    outcome o = predict(INPUTS(a, "-", a), HOST_PREDICT_CSV, 1);
    expect_ok(&o);
    char want[512];
    snprintf(want, sizeof want,
             "input,pred_1,score_1,name_1\n"
             "%s,0,0.909443,cat\n"
             "stdin:1,2,0.665241,\"bird, small\"\n"
             "stdin:3,2,0.999753,\"bird, small\"\n"
             "stdin:5,0,0.986703,cat\n"
             "%s,0,0.909443,cat\n", a, a);
    cr_expect_str_eq(o.out, want);
    cr_expect(starts_with(o.err, "scorch-predict: stdin:4: "), "%s", o.err);
    cr_expect_eq(count_lines(o.err), 1, "%s", o.err);
    cr_expect_eq(o.result.failed, 1);
    outcome_free(&o);
}

Test(predict, input_list_names_a_path_a_line)
{
    char a[96], b[96], list[96];
    temp_file(a, "a.csv", "1,0,0");
    temp_file(b, "b.csv", "0,0,1");
    char text[256];
    snprintf(text, sizeof text, "%s\r\n\n%s\n", b, a);
    host_predict_request r = {.input_list = temp_file(list, "list.txt", text)};
    outcome o = predict_with(&r, INPUTS(a), HOST_PREDICT_CSV, 1, 64);
    expect_ok(&o);
    char want[512];
    snprintf(want, sizeof want, "input,pred_1,score_1,name_1\n%s,0,0.576117,cat\n"
             "%s,2,0.576117,\"bird, small\"\n%s,0,0.576117,cat\n", a, b, a);
    cr_expect_str_eq(o.out, want, "the arguments first, then the list");
    outcome_free(&o);
    /* The list from stdin. */
    cr_assert_not_null(freopen(list, "r", stdin));
    r.input_list = "-";
    o = predict_with(&r, NULL, HOST_PREDICT_CSV, 1, 64);
    expect_ok(&o);
    cr_expect_eq(o.result.predicted, 2);
    outcome_free(&o);
}

Test(predict, an_unreadable_input_list_stops_it)
{
    host_predict_request r = {.input_list = "/nonexistent/list.txt"};
    outcome o = predict_with(&r, NULL, HOST_PREDICT_CSV, 1, 64);
    cr_expect_eq(o.status, SC_ERR_IO);
    cr_expect(strstr(sc_error_message(), "--input-list /nonexistent/list.txt: No such file"),
              "%s", sc_error_message());
    outcome_free(&o);
}

Test(predict, a_dataset_that_decodes_nothing_is_refused)
{
    fake.no_decode = true;
    outcome o = predict(INPUTS("a.png"), HOST_PREDICT_CSV, 1);
    cr_expect_eq(o.status, SC_ERR_UNSUPPORTED);
    cr_expect(strstr(sc_error_message(), "x.ckpt: the dataset plugin takes no raw inputs"), "%s",
              sc_error_message());
    outcome_free(&o);
}

Test(predict, the_checkpoints_error_stops_it)
{
    host_predict_request r = {.input_list = "", .checkpoint = "missing.ckpt"};
    outcome o = predict_with(&r, INPUTS("a.png"), HOST_PREDICT_CSV, 1, 64);
    cr_expect_eq(o.status, SC_ERR_IO);
    cr_expect_str_eq(sc_error_message(), "cannot read checkpoint missing.ckpt");
    cr_expect_str_eq(o.out, "");
    outcome_free(&o);
}

Test(predict, the_command_lines_mistakes_are_refused)
{
    host_predict_request r = {.input_list = "", .topk = 1, .infer = {.max_batch = 1}};
    cr_expect_eq(host_predict_check(&r), SC_ERR_INVALID);
    cr_expect(strstr(sc_error_message(), "no inputs"), "%s", sc_error_message());
    r.inputs = INPUTS("-", "a.png", "-");
    r.n_inputs = 3;
    cr_expect_eq(host_predict_check(&r), SC_ERR_INVALID);
    cr_expect(strstr(sc_error_message(), "stdin is named 2 times"), "%s", sc_error_message());
    r.n_inputs = 2;
    r.input_list = "-";
    cr_expect_eq(host_predict_check(&r), SC_ERR_INVALID);
    r.input_list = "list.txt";
    cr_expect_eq(host_predict_check(&r), SC_OK, "%s", sc_error_message());
}

/* ---- the command line ---- */

static sc_status parse(host_config *cfg, char **argv)
{
    int argc = 0;
    while (argv[argc])
        argc++;
    bool exit_now;
    return host_config_parse(cfg, HOST_PROGRAM_PREDICT, argc, argv, &exit_now);
}

Test(predict_options, inputs_go_anywhere_and_keep_their_order)
{
    host_config c;
    char **argv = INPUTS("scorch-predict", "a.png", "--checkpoint", "c.ckpt", "--raw", "b.png",
                         "--topk", "3", "-", "--format=jsonl", "c.png");
    cr_assert_eq(parse(&c, argv), SC_OK, "%s", sc_error_message());
    cr_expect_str_eq(c.checkpoint, "c.ckpt");
    cr_expect(c.raw);
    cr_expect_eq(c.topk, 3);
    cr_expect_str_eq(c.format, "jsonl");
    cr_assert_eq(c.n_inputs, 4);
    const char *const want[] = {"a.png", "b.png", "-", "c.png"};
    for (int i = 0; i < 4; i++)
        cr_expect_str_eq(c.inputs[i], want[i]);
    cr_expect_eq(c.inputs, argv + 7, "moved to the end of argv");
    argv = INPUTS("scorch-predict", "--checkpoint", "c.ckpt", "a.png", "b.png", "--topk", "2");
    cr_assert_eq(parse(&c, argv), SC_OK, "%s", sc_error_message());
    cr_assert_eq(c.n_inputs, 2);
    cr_expect_str_eq(c.inputs[0], "a.png");
    cr_expect_str_eq(c.inputs[1], "b.png");
    cr_expect_str_eq(argv[3], "--topk");
    argv = INPUTS("scorch-predict", "--checkpoint", "c.ckpt");
    cr_assert_eq(parse(&c, argv), SC_OK, "%s", sc_error_message());
    cr_expect_eq(c.n_inputs, 0);
}

Test(predict_options, errors_name_the_option)
{
    host_config c;
    cr_expect_eq(parse(&c, INPUTS("scorch-predict", "a.png")), SC_ERR_INVALID);
    cr_expect(strstr(sc_error_message(), "missing --checkpoint"), "%s", sc_error_message());
    cr_expect_eq(parse(&c, INPUTS("scorch-predict", "--checkpoint", "c", "--split", "test")),
                 SC_ERR_INVALID);
    cr_expect(strstr(sc_error_message(), "--split is an option of scorch-test, not of "
                                         "scorch-predict"), "%s", sc_error_message());
    cr_expect_eq(parse(&c, INPUTS("scorch-predict", "--checkpoint", "c", "--raw", "false")),
                 SC_ERR_INVALID);
    cr_expect(strstr(sc_error_message(), "--no-raw"), "%s", sc_error_message());
    cr_expect_eq(parse(&c, INPUTS("scorch-predict", "--checkpoint", "c", "--format", "xml")),
                 SC_ERR_INVALID);
    cr_expect(strstr(sc_error_message(), "'xml' is not one of auto|text|csv|jsonl"), "%s",
              sc_error_message());
    bool exit_now;
    char **train = INPUTS("scorch-train", "--model", "m", "--dataset", "d", "a.png");
    cr_expect_eq(host_config_parse(&c, HOST_PROGRAM_TRAIN, 6, train, &exit_now), SC_ERR_INVALID,
                 "scorch-train takes no inputs");
    cr_expect(strstr(sc_error_message(), "unexpected argument 'a.png'"), "%s",
              sc_error_message());
    char **test = INPUTS("scorch-test", "--checkpoint", "c", "--raw");
    cr_expect_eq(host_config_parse(&c, HOST_PROGRAM_TEST, 4, test, &exit_now), SC_ERR_INVALID);
    cr_expect(strstr(sc_error_message(), "--raw is an option of scorch-predict, not of "
                                         "scorch-test"), "%s", sc_error_message());
}

Test(predict_options, an_ini_file_takes_a_predict_section)
{
    char path[96];
    temp_file(path, "p.ini", "[predict]\ncheckpoint = c.ckpt\nformat = jsonl\ntopk = 2\n"
                             "batch-size = 1\n");
    host_config c;
    cr_assert_eq(parse(&c, INPUTS("scorch-predict", "--config", path, "a.png")), SC_OK, "%s",
                 sc_error_message());
    cr_expect_str_eq(c.checkpoint, "c.ckpt");
    cr_expect_str_eq(c.format, "jsonl");
    cr_expect_eq(c.topk, 2);
    cr_expect_eq(c.batch_size, 1);
    temp_file(path, "t.ini", "[test]\ncheckpoint = c.ckpt\n");
    cr_expect_eq(parse(&c, INPUTS("scorch-predict", "--config", path, "a.png")), SC_ERR_INVALID);
    cr_expect(strstr(sc_error_message(), "section [test] is not read by scorch-predict, which "
                                         "reads [predict]"), "%s", sc_error_message());
}

Test(predict_options, help_shows_the_inputs_and_the_options, .init = cr_redirect_stdout)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    host_config_print_help(f, HOST_PROGRAM_PREDICT);
    fclose(f);
    const char *const parts[] = {"Usage: scorch-predict --checkpoint PATH [options] INPUT...",
                                 "--input-list FILE", "--format auto|text|csv|jsonl", "--raw",
                                 "--topk K", "--ema", "--model PATH", "--dataset-path PATH",
                                 "(default: the checkpoint's)", "--batch-size N", "--threads N",
                                 "--device DEVICE", "cpu, cuda or cuda:N (default: cpu)",
                                 "checkpoint to predict with (required)", "[predict]"};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        cr_expect(strstr(text, parts[i]), "--help lacks '%s':\n%s", parts[i], text);
    const char *const absent[] = {"--split", "--model-args", "--epochs", "--workers", "--seed",
                                  "per rank", "parallel"};
    for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++)
        cr_expect_null(strstr(text, absent[i]), "--help has '%s'", absent[i]);
    free(text);
}
