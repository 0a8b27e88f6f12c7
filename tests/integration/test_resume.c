/* Integration tests of --resume: a resume that would not
 * continue the same run is refused, listing every difference, unless
 * --resume-anyway; a finished run is left as it is; what a resume and
 * scorch-test read from a checkpoint is checked, even in a file whose CRC
 * is valid; and metrics.jsonl keeps each step's records exactly once. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expect.h"
#include "harness.h"
#include "base/jsonl.h"
#include "run/run_dir.h"
#include "scorch/serialize.h"

enum { PATH = 4096, DIR_LEN = 64, MAX_ARGS = 48, STEPS_PER_EPOCH = 32 };

static void bin(char *buf, const char *rel) { build_path(buf, PATH, rel); }

/* scorch-train on the synthetic blobs (32 steps per epoch) with a small
 * MLP, plus `extra` arguments (NULL-terminated). */
static run_result train(const char *run_dir, const char *epochs, const char *const *extra,
                        const char *env)
{
    static char program[PATH], mlp[PATH], synthetic[PATH];
    bin(program, "host/scorch-train");
    bin(mlp, "plugins/mlp.so");
    bin(synthetic, "plugins/synthetic.so");
    const char *argv[MAX_ARGS] = {program, "--model", mlp, "--model-args", "hidden=32",
                                  "--dataset", synthetic, "--dataset-path", "unused",
                                  "--batch-size", "64", "--epochs", epochs, "--run-dir", run_dir,
                                  "--workers", "2", "--seed", "7"};
    int n = 19;
    for (; extra && *extra && n < MAX_ARGS - 1; extra++)
        argv[n++] = *extra;
    argv[n] = NULL;
    return run_program(argv, env);
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* A fresh run directory in dir holding a finished run of 1 epoch. */
static void finished_run(char *dir)
{
    temp_dir(dir, DIR_LEN);
    run_result r = train(dir, "1", NULL, NULL);
    expect_status(&r, 0);
    run_result_free(&r);
}

/* ---- what a run directory holds, to tell that nothing was touched ---- */

typedef struct text {
    char *data;
    size_t len, cap;
} text;

static void text_add(text *t, const void *data, size_t n)
{
    if (t->len + n + 1 > t->cap) {
        t->cap = 2 * (t->len + n + 1);
        t->data = realloc(t->data, t->cap);
        cr_assert_not_null(t->data);
    }
    memcpy(t->data + t->len, data, n);
    t->len += n;
    t->data[t->len] = '\0';
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every file under dir (but the lock), its name and bytes, in name order. */
static void add_tree(text *t, const char *dir)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "%s", dir);
    char *names[256];
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < 256;)
        if (e->d_name[0] != '.')
            names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, compare_names);
    for (int i = 0; i < n; i++) {
        char path[PATH];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        size_t size;
        char *bytes = read_file(path, &size);
        text_add(t, path, strlen(path) + 1);
        if (bytes)
            text_add(t, bytes, size);
        else
            add_tree(t, path);
        free(bytes);
        free(names[i]);
    }
}

static text snapshot(const char *dir)
{
    text t = {0};
    add_tree(&t, dir);
    return t;
}

static void expect_untouched(const text *before, const char *dir)
{
    text after = snapshot(dir);
    cr_assert(before->len == after.len && memcmp(before->data, after.data, after.len) == 0,
              "%s changed", dir);
    free(after.data);
}

/* ---- crafted checkpoints, through the SDK's writer: a valid CRC ---- */

/* The checkpoint at path, written again entry by entry with the blob
 * `name` holding size bytes of data. */
static void write_with_blob(const char *path, const char *name, const char *data, size_t size)
{
    sc_ckpt *ck;
    sc_ckpt_writer *w;
    cr_assert_eq(sc_ckpt_open(path, &ck), SC_OK, "%s", sc_error_message());
    cr_assert_eq(sc_ckpt_writer_open(path, &w), SC_OK, "%s", sc_error_message());
    for (int i = 0; i < sc_ckpt_count(ck); i++) {
        const char *entry = sc_ckpt_name(ck, i);
        const sc_tensor *t = sc_ckpt_tensor(ck, entry);
        size_t n;
        const void *blob = sc_ckpt_blob(ck, entry, &n);
        sc_status st = t                            ? sc_ckpt_write_tensor(w, entry, t)
                       : strcmp(entry, name) == 0 ? sc_ckpt_write_blob(w, entry, data, size)
                                                  : sc_ckpt_write_blob(w, entry, blob, n);
        cr_assert_eq(st, SC_OK, "%s", sc_error_message());
    }
    cr_assert_eq(sc_ckpt_writer_commit(w), SC_OK, "%s", sc_error_message());
    sc_ckpt_close(ck);
}

/* The checkpoint's blob `name` (text: `key value` or `key = value` lines)
 * with the line starting `key` replaced by `line` ("" drops it). */
static void rewrite_line(const char *path, const char *name, const char *key,
                         const char *line)
{
    sc_ckpt *ck;
    cr_assert_eq(sc_ckpt_open(path, &ck), SC_OK, "%s", sc_error_message());
    size_t size;
    const char *old = sc_ckpt_blob(ck, name, &size);
    cr_assert_not_null(old, "no blob %s", name);
    text t = {0};
    bool found = false;
    for (size_t i = 0; i < size;) {
        const char *nl = memchr(old + i, '\n', size - i);
        size_t n = nl ? (size_t)(nl - (old + i)) + 1 : size - i;
        bool match = strncmp(old + i, key, strlen(key)) == 0 &&
                     (old[i + strlen(key)] == ' ' || old[i + strlen(key)] == '\n');
        if (match && line[0])
            text_add(&t, line, strlen(line));
        else if (!match)
            text_add(&t, old + i, n);
        found = found || match;
        i += n;
    }
    sc_ckpt_close(ck);
    cr_assert(found, "no line '%s' in %s", key, name);
    write_with_blob(path, name, t.data ? t.data : "", t.len);
    free(t.data);
}

/* ---- refusing what would not continue the same run ---- */

Test(resume, refuses_changed_options_listing_each_and_touches_nothing)
{
    char dir[DIR_LEN];
    finished_run(dir);
    text before = snapshot(dir);
    run_result r = train(dir, "2", ARGS("--resume", "--batch-size", "32", "--seed", "8",
                                        "--model-args", "hidden=16"),
                         NULL);
    expect_status(&r, 1);
    expect_in(r.err, "3 settings differ");
    expect_in(r.err, "\n  model-args: checkpoint has hidden=32, now hidden=16");
    expect_in(r.err, "\n  batch-size: checkpoint has 64, now 32");
    expect_in(r.err, "\n  seed: checkpoint has 7, now 8");
    expect_in(r.err, "--resume-anyway");
    run_result_free(&r);
    expect_untouched(&before, dir);
    free(before.data);
}

Test(resume, resume_anyway_accepts_the_changes_and_says_what_is_lost)
{
    char dir[DIR_LEN];
    finished_run(dir);
    run_result r =
        train(dir, "2", ARGS("--resume", "--resume-anyway", "--batch-size", "32"), NULL);
    expect_status(&r, 0);
    expect_in(r.err, "note: --resume-anyway: batch-size: checkpoint has 64, now 32: the "
                     "batches, the sample order");
    run_result_free(&r);
    cr_expect_eq(metric_of(dir, 2, "train", "step"), STEPS_PER_EPOCH + 2 * STEPS_PER_EPOCH);
    /* The checkpoint now holds the changed run: a plain resume goes on. */
    r = train(dir, "3", ARGS("--resume", "--batch-size", "32"), NULL);
    expect_status(&r, 0);
    run_result_free(&r);
}

/* Workers, prefetch, checkpoint cadence and logging do not change a
 * number: the resumed run ends with the uninterrupted run's weights. */
Test(resume, options_that_may_change_keep_the_resume_exact)
{
    char straight[DIR_LEN], split[DIR_LEN];
    temp_dir(straight, sizeof straight);
    run_result r = train(straight, "2", NULL, NULL);
    expect_status(&r, 0);
    run_result_free(&r);
    finished_run(split);
    r = train(split, "2", ARGS("--resume", "--workers", "0", "--prefetch", "1",
                               "--checkpoint-every", "7", "--keep-last", "1",
                               "--no-tensorboard", "--quiet"),
              NULL);
    expect_status(&r, 0);
    run_result_free(&r);
    cr_assert(same_params(in_dir(straight, "checkpoints/last.ckpt"),
                          in_dir(split, "checkpoints/last.ckpt")),
              "weights differ after a resume with other workers");
}

/* ---- a finished run ---- */

Test(resume, a_finished_run_says_so_and_is_left_as_it_is)
{
    char dir[DIR_LEN];
    finished_run(dir);
    text before = snapshot(dir);
    run_result r = train(dir, "1", ARGS("--resume"), NULL);
    expect_status(&r, 0);
    expect_in(r.out, "already finished at epoch 1");
    expect_in(r.out, "--epochs M --resume");
    run_result_free(&r);
    expect_untouched(&before, dir);
    free(before.data);
    r = train(dir, "2", ARGS("--resume"), NULL);
    expect_status(&r, 0);
    run_result_free(&r);
    cr_expect(!isnan(metric_of(dir, 2, "test", "loss")), "no second epoch");
    r = train(dir, "1", ARGS("--resume"), NULL);
    expect_status(&r, 1);
    expect_in(r.err, "past --epochs 1: give --epochs 3 or more");
    run_result_free(&r);
}

/* ---- what a resume reads: crafted checkpoints with a valid CRC ---- */

/* Resuming from last.ckpt with its trainer line `key` replaced by `line`
 * is refused with a message naming the file and `why`. */
static void expect_trainer_line_refused(const char *key, const char *line, const char *why)
{
    char dir[DIR_LEN];
    finished_run(dir);
    const char *last = in_dir(dir, "checkpoints/last.ckpt");
    rewrite_line(last, "trainer", key, line);
    run_result r = train(dir, "3", ARGS("--resume"), NULL);
    expect_status(&r, 1);
    expect_in(r.err, last);
    expect_in(r.err, why);
    run_result_free(&r);
}

Test(resume, trainer_fields_out_of_range_are_refused_naming_file_and_field)
{
    expect_trainer_line_refused("step", "step 9000000000000000000\n",
                                "trainer field 'step' is 9000000000000000000, outside 0 to");
    expect_trainer_line_refused("epoch", "epoch -5\n", "trainer field 'epoch' is -5, outside 1 to");
    expect_trainer_line_refused("next_batch", "next_batch -1\n", "trainer field 'next_batch'");
    expect_trainer_line_refused("world", "world 0\n", "trainer field 'world' is 0");
    expect_trainer_line_refused("samples", "samples 12x\n", "trainer field 'samples' has the "
                                                            "value '12x'");
    expect_trainer_line_refused("base_lr", "base_lr nan\n", "trainer field 'base_lr' is nan");
    expect_trainer_line_refused("epoch", "epoch 2\nepoch 2\n", "trainer field 'epoch' appears "
                                                               "twice");
    expect_trainer_line_refused("step", "", "no trainer field 'step'");
}

/* ---- scorch-test and the config a checkpoint holds ---- */

static run_result evaluate(const char *ckpt)
{
    static char program[PATH];
    bin(program, "host/scorch-test");
    return run_program(ARGS(program, "--checkpoint", ckpt, "--quiet"), NULL);
}

static void expect_config_refused(const char *data, size_t size, const char *why)
{
    char dir[DIR_LEN];
    finished_run(dir);
    const char *last = in_dir(dir, "checkpoints/last.ckpt");
    write_with_blob(last, "config", data, size);
    run_result r = evaluate(last);
    expect_status(&r, 1);
    expect_in(r.err, last);
    expect_in(r.err, why);
    run_result_free(&r);
}

Test(resume, scorch_test_checks_the_saved_config_and_names_the_checkpoint)
{
    static const char no_model[] = "[train]\nmodel =\ndataset = d.so\n";
    expect_config_refused(no_model, sizeof no_model - 1, "its saved config names no model");
    static const char nul[] = "[train]\nmodel = m\0.so\n";
    expect_config_refused(nul, sizeof nul - 1, "NUL byte at offset 17");
    static const char bad[] = "[train]\nepochs = many\n";
    expect_config_refused(bad, sizeof bad - 1, "(its saved config):2: epochs: 'many'");
    /* a plugin the config names that is gone */
    static const char gone[] = "[train]\nmodel = /nonexistent/mlp.so\ndataset = d.so\n";
    expect_config_refused(gone, sizeof gone - 1, "/nonexistent/mlp.so");
}

/* ---- sizes that overflow ---- */

Test(resume, a_batch_size_whose_buffers_overflow_is_refused)
{
    char dir[DIR_LEN];
    temp_dir(dir, sizeof dir);
    run_result r = train(dir, "1", ARGS("--batch-size", "4611686018427387904"), NULL);
    expect_status(&r, 1);
    expect_in(r.err, "--batch-size 4611686018427387904: the loader's batch buffers: a f32 "
                     "tensor of shape [4611686018427387904, ");
    expect_in(r.err, "is too large");
    run_result_free(&r);
}

/* ---- metrics.jsonl: each step's records once ---- */

/* "step kind" for every record of the run's metrics.jsonl (kind: the
 * phase, or the hook's tag), sorted, one a line. */
static char *records_by_step(const char *dir)
{
    host_jsonl_file file;
    cr_assert_eq(host_jsonl_read(in_dir(dir, "metrics.jsonl"), &file), SC_OK, "%s",
                 sc_error_message());
    char **lines = calloc((size_t)file.count + 1, sizeof *lines);
    for (int i = 0; i < file.count; i++) {
        const host_json_field *step = host_json_record_get(&file.records[i], "step");
        const host_json_field *phase = host_json_record_get(&file.records[i], "phase");
        const host_json_field *tag = host_json_record_get(&file.records[i], "tag");
        cr_assert(step && (phase || tag), "record %d has no step or kind", i);
        lines[i] = malloc(128);
        snprintf(lines[i], 128, "%09.0f %s", step->number, (phase ? phase : tag)->string);
    }
    qsort(lines, (size_t)file.count, sizeof *lines, compare_names);
    text t = {0};
    for (int i = 0; i < file.count; i++) {
        text_add(&t, lines[i], strlen(lines[i]));
        text_add(&t, "\n", 1);
        free(lines[i]);
    }
    free(lines);
    host_jsonl_free(&file);
    return t.data;
}

Test(resume, a_run_stopped_mid_epoch_and_resumed_logs_each_step_once)
{
    char straight[DIR_LEN], split[DIR_LEN];
    const char *hook = getenv("SCORCH_STEP_LOG_HOOK");
    temp_dir(straight, sizeof straight);
    temp_dir(split, sizeof split);
    run_result r = train(straight, "2", ARGS("--hooks", hook), NULL);
    expect_status(&r, 0);
    run_result_free(&r);
    /* Ctrl-C 8 steps into epoch 2: a checkpoint at step 40, exit 130. */
    r = train(split, "2", ARGS("--hooks", hook), "SCORCH_TEST_SIGINT_AT_STEP=40");
    expect_status(&r, 130);
    run_result_free(&r);
    r = train(split, "2", ARGS("--hooks", hook, "--resume"), NULL);
    expect_status(&r, 0);
    expect_in(r.out, "batch 8");
    run_result_free(&r);
    char *want = records_by_step(straight), *got = records_by_step(split);
    cr_assert_str_eq(got, want, "records per step differ after the resume");
    expect_in(want, "000000040 fixture/step");
    free(want);
    free(got);
}

/* Trimming keeps what the checkpoint holds, drops later steps and a line
 * a kill cut short (the next record would be glued to it), and leaves a
 * line it cannot read. */
Test(resume, trimming_keeps_the_steps_up_to_the_checkpoint)
{
    char dir[DIR_LEN];
    temp_dir(dir, sizeof dir);
    host_run_dir rd;
    cr_assert_eq(host_run_dir_prepare(&rd, dir, true), SC_OK, "%s", sc_error_message());
    FILE *f = fopen(in_dir(dir, "metrics.jsonl"), "w");
    fputs("{\"epoch\":1,\"phase\":\"train\",\"step\":4,\"loss\":1}\n"
          "{\"epoch\":2,\"step\":5,\"tag\":\"a\",\"value\":1}\n"
          "not json\n"
          "{\"epoch\":2,\"step\":6,\"tag\":\"a\",\"value\":2}\n"
          "{\"epoch\":2,\"step\":5,\"tag\":\"b\",\"value\":3}\n"
          "{\"epoch\":2,\"step\":5,\"ta",
          f);
    fclose(f);
    cr_assert_eq(host_run_dir_trim_metrics(&rd, 5), SC_OK, "%s", sc_error_message());
    host_run_dir_close(&rd);
    char *kept = read_text(in_dir(dir, "metrics.jsonl"));
    cr_assert_str_eq(kept, "{\"epoch\":1,\"phase\":\"train\",\"step\":4,\"loss\":1}\n"
                           "{\"epoch\":2,\"step\":5,\"tag\":\"a\",\"value\":1}\n"
                           "not json\n"
                           "{\"epoch\":2,\"step\":5,\"tag\":\"b\",\"value\":3}\n");
    free(kept);
}

/* ---- every optimizer's state resumes ---- */

/* Two epochs straight against one, then one more resumed: the same
 * weights, so the optimizer's state and step count came back whole. */
static void expect_resume_exact(const char *const *first, const char *const *resumed)
{
    char straight[DIR_LEN], split[DIR_LEN];
    temp_dir(straight, sizeof straight);
    temp_dir(split, sizeof split);
    run_result r = train(straight, "2", first, NULL);
    expect_status(&r, 0);
    run_result_free(&r);
    r = train(split, "1", first, NULL);
    expect_status(&r, 0);
    run_result_free(&r);
    r = train(split, "2", resumed, NULL);
    expect_status(&r, 0);
    run_result_free(&r);
    cr_assert(same_params(in_dir(straight, "checkpoints/last.ckpt"),
                          in_dir(split, "checkpoints/last.ckpt")),
              "%s: weights differ after a resume", first[1]);
}

Test(resume, rmsprop_resumes_exactly)
{
    expect_resume_exact(ARGS("--optimizer", "rmsprop", "--centered", "--momentum", "0.5"),
                        ARGS("--optimizer", "rmsprop", "--centered", "--momentum", "0.5",
                             "--resume"));
}

Test(resume, lamb_resumes_exactly)
{
    expect_resume_exact(ARGS("--optimizer", "lamb"), ARGS("--optimizer", "lamb", "--resume"));
}

Test(resume, lion_resumes_exactly)
{
    expect_resume_exact(ARGS("--optimizer", "lion", "--lr", "1e-4"),
                        ARGS("--optimizer", "lion", "--lr", "1e-4", "--resume"));
}
