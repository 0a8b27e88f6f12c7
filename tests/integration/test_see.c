/* Integration tests of what people see: the console (progress line on a
 * terminal only, --quiet), the hardware figures in metrics.jsonl,
 * scorch-plot's PNG and scorch-test's confusion matrix and per-class
 * accuracy. */
#include <criterion/criterion.h>
#include <pty.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

enum { PATH = 4096, DIR = 64, MAX_ARGS = 48 };

typedef struct paths {
    char train[PATH], test[PATH], plot[PATH], mlp[PATH], synthetic[PATH];
} paths;

static paths bin(void)
{
    paths p;
    build_path(p.train, PATH, "host/scorch-train");
    build_path(p.test, PATH, "host/scorch-test");
    build_path(p.plot, PATH, "host/scorch-plot");
    build_path(p.mlp, PATH, "plugins/mlp.so");
    build_path(p.synthetic, PATH, "plugins/synthetic.so");
    return p;
}

/* scorch-train's argv for `epochs` epochs of a small MLP on the synthetic
 * blobs into run_dir, plus `extra` (NULL-terminated). */
static void train_argv(const char **argv, paths *p, const char *run_dir, const char *epochs,
                       const char *const *extra)
{
    const char *base[] = {p->train, "--model", p->mlp, "--model-args", "hidden=32,classes=4",
                          "--dataset", p->synthetic, "--dataset-path", "unused",
                          "--batch-size", "64", "--epochs", epochs, "--run-dir", run_dir,
                          "--seed", "3", NULL};
    int n = 0;
    for (; base[n]; n++)
        argv[n] = base[n];
    for (; extra && *extra && n < MAX_ARGS - 1; extra++)
        argv[n++] = *extra;
    argv[n] = NULL;
}

static run_result train(paths *p, const char *run_dir, const char *const *extra)
{
    const char *argv[MAX_ARGS];
    train_argv(argv, p, run_dir, "2", extra);
    return run_program(argv, NULL);
}

static void expect_ok(const run_result *r)
{
    cr_assert_eq(r->status, 0, "exit %d\nstdout:\n%s\nstderr:\n%s", r->status, r->out, r->err);
}

/* Runs argv with a pseudo-terminal as its stdin, stdout and stderr;
 * returns what it wrote there (in .out). */
static run_result run_in_pty(const char *const *argv)
{
    int master;
    struct winsize ws = {.ws_row = 40, .ws_col = 160};
    pid_t pid = forkpty(&master, NULL, NULL, &ws);
    cr_assert_geq(pid, 0, "forkpty failed");
    if (pid == 0) {
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    size_t len = 0, cap = 1 << 16;
    char *out = malloc(cap);
    ssize_t n;
    /* Reading ends with EIO once the child has exited and closed the pty. */
    while (out && (n = read(master, out + len, cap - len - 1)) > 0)
        if ((len += (size_t)n) + 1 == cap)
            out = realloc(out, cap *= 2);
    close(master);
    int wstatus = 0;
    waitpid(pid, &wstatus, 0);
    cr_assert(out);
    out[len] = '\0';
    return (run_result){.status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128,
                        .out = out, .err = calloc(1, 1)};
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* ---- the console ---- */

Test(console, no_progress_line_when_stdout_is_not_a_terminal)
{
    paths p = bin();
    char dir[DIR];
    run_result r = train(&p, temp_dir(dir, sizeof dir), NULL);
    expect_ok(&r);
    cr_assert(!strchr(r.out, '\r') && !strchr(r.out, '\033'), "progress drawn:\n%s", r.out);
    cr_assert(strstr(r.out, "epoch 1/2 train loss") && strstr(r.out, "epoch 2/2 valid loss"),
              "no plain line per epoch and phase:\n%s", r.out);
    cr_assert(strstr(r.out, "data ") && strstr(r.out, "best accuracy "), "%s", r.out);
    run_result_free(&r);
}

Test(console, progress_line_on_a_terminal)
{
    paths p = bin();
    char dir[DIR];
    const char *argv[MAX_ARGS];
    train_argv(argv, &p, temp_dir(dir, sizeof dir), "2", NULL);
    run_result r = run_in_pty(argv);
    cr_assert_eq(r.status, 0, "%s", r.out);
    const char *line = strstr(r.out, "\r\033[Kepoch 1/2 train [");
    cr_assert(line, "no train progress line:\n%s", r.out);
    cr_assert(strstr(line, "32/32  loss ") && strstr(line, " samples/s  data ") &&
                  strstr(line, "%  ETA "),
              "progress line lacks batches, loss, samples/s, data share or ETA:\n%s", line);
    cr_assert(strstr(r.out, "\r\033[Kepoch 2/2 valid ["), "no valid progress line:\n%s", r.out);
    cr_assert(strstr(r.out, "epoch 2/2 valid loss"), "no summary line:\n%s", r.out);
    run_result_free(&r);
}

Test(console, quiet_prints_only_the_final_summary)
{
    paths p = bin();
    char dir[DIR], dir2[DIR];
    run_result r = train(&p, temp_dir(dir, sizeof dir), (const char *[]){"--quiet", NULL});
    expect_ok(&r);
    cr_assert_eq(count_lines(r.out), 2, "expected the test line and the best line:\n%s", r.out);
    cr_assert(strncmp(r.out, "epoch 2/2 test  loss ", 21) == 0, "%s", r.out);
    cr_assert(strstr(r.out, "\nbest accuracy "), "%s", r.out);
    run_result_free(&r);

    const char *argv[MAX_ARGS];
    train_argv(argv, &p, temp_dir(dir2, sizeof dir2), "2", (const char *[]){"--quiet", NULL});
    r = run_in_pty(argv);
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_assert(!strstr(r.out, "\033[K"), "progress drawn with --quiet:\n%s", r.out);
    cr_assert_eq(count_lines(r.out), 2, "%s", r.out);
    run_result_free(&r);
}

/* ---- metrics.jsonl ---- */

Test(metrics, records_split_the_time_and_report_memory)
{
    paths p = bin();
    char dir[DIR];
    run_result r = train(&p, temp_dir(dir, sizeof dir), NULL);
    expect_ok(&r);
    const char *phases[] = {"train", "valid", "test"};
    for (int i = 0; i < 3; i++) {
        double time = metric_of(dir, 2, phases[i], "time_s");
        double wait = metric_of(dir, 2, phases[i], "data_wait_s");
        double compute = metric_of(dir, 2, phases[i], "compute_s");
        double comm = metric_of(dir, 2, phases[i], "comm_s");
        cr_assert(wait >= 0 && compute >= 0 && comm == 0, "%s: wait %g compute %g comm %g",
                  phases[i], wait, compute, comm);
        cr_assert_float_eq(wait + compute + comm, time, 1e-6, "%s", phases[i]);
        cr_assert_gt(metric_of(dir, 2, phases[i], "max_rss_mb"), 1.0);
        cr_assert_gt(metric_of(dir, 2, phases[i], "arena_peak_mb"), 0.0);
    }
    run_result_free(&r);
}

/* ---- scorch-plot ---- */

static uint32_t be32(const unsigned char *b)
{
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* A PNG: the signature, an IHDR of width x height first, IEND last. */
static void expect_png(const char *path, uint32_t width, uint32_t height)
{
    static const unsigned char signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    size_t size;
    unsigned char *b = (unsigned char *)read_file(path, &size);
    cr_assert(b && size > 57, "%s: missing or short", path);
    cr_assert(memcmp(b, signature, 8) == 0, "%s: not a PNG signature", path);
    cr_assert(be32(b + 8) == 13 && memcmp(b + 12, "IHDR", 4) == 0, "%s: no IHDR first", path);
    cr_assert_eq(be32(b + 16), width, "%s: width", path);
    cr_assert_eq(be32(b + 20), height, "%s: height", path);
    cr_assert(memcmp(b + size - 8, "IEND", 4) == 0, "%s: no IEND last", path);
    free(b);
}

Test(plot, run_becomes_a_png_of_the_size_asked_for)
{
    paths p = bin();
    char dir[DIR], png[PATH];
    run_result r = train(&p, temp_dir(dir, sizeof dir), NULL);
    expect_ok(&r);
    run_result_free(&r);
    snprintf(png, sizeof png, "%s/custom.png", dir);
    r = run_program((const char *[]){p.plot, dir, "-o", png, "--size", "1000x700", NULL}, NULL);
    expect_ok(&r);
    expect_png(png, 1000, 700);
    cr_assert(strstr(r.out, "2 panels"), "loss, accuracy (4 classes: no top5_accuracy):\n%s",
              r.out);
    run_result_free(&r);
    r = run_program((const char *[]){p.plot, dir, NULL}, NULL);
    expect_ok(&r);
    snprintf(png, sizeof png, "%s/metrics.png", dir);
    expect_png(png, 1200, 800);
    run_result_free(&r);
}

Test(plot, compares_runs_on_chosen_metrics)
{
    paths p = bin();
    char a[DIR], b[DIR], png[PATH];
    run_result r = train(&p, temp_dir(a, sizeof a), NULL);
    expect_ok(&r);
    run_result_free(&r);
    r = train(&p, temp_dir(b, sizeof b), (const char *[]){"--lr", "0.01", NULL});
    expect_ok(&r);
    run_result_free(&r);
    snprintf(png, sizeof png, "%s/compare.png", a);
    r = run_program((const char *[]){p.plot, a, b, "-o", png, "--metric", "loss,samples_per_s",
                                     "--metric", "accuracy", "--size", "640x480", NULL},
                    NULL);
    expect_ok(&r);
    expect_png(png, 640, 480);
    cr_assert(strstr(r.out, "3 panels, 2 runs"), "%s", r.out);
    run_result_free(&r);
}

static void expect_failure(const run_result *r, int status, const char *message)
{
    cr_assert_eq(r->status, status, "exit %d, expected %d (%s)\n%s", r->status, status,
                 message, r->err);
    cr_assert(strstr(r->err, message), "expected '%s' in:\n%s", message, r->err);
}

Test(plot, errors_name_what_and_where)
{
    paths p = bin();
    char dir[DIR], jsonl[PATH], png[PATH];
    temp_dir(dir, sizeof dir);
    snprintf(jsonl, sizeof jsonl, "%s/metrics.jsonl", dir);
    snprintf(png, sizeof png, "%s/x.png", dir);
    FILE *f = fopen(jsonl, "w");
    cr_assert(f);
    fputs("{\"epoch\":1,\"phase\":\"train\",\"loss\":0.5}\n{\"epoch\":2,\"phase\":\"train\","
          "\"loss\":[0.4]}\n",
          f);
    fclose(f);
    run_result r = run_program((const char *[]){p.plot, dir, NULL}, NULL);
    expect_failure(&r, 1, "metrics.jsonl:2: column 35: only strings, numbers and null");
    run_result_free(&r);

    f = fopen(jsonl, "w");
    fputs("{\"epoch\":1,\"phase\":\"train\",\"loss\":0.5}\n", f);
    fclose(f);
    r = run_program((const char *[]){p.plot, dir, "--metric", "nope", NULL}, NULL);
    expect_failure(&r, 1, "--metric nope: no run has it (they have: epoch, loss)");
    run_result_free(&r);
    r = run_program((const char *[]){p.plot, dir, jsonl, NULL}, NULL);
    expect_failure(&r, 2, "name the PNG to write with -o");
    run_result_free(&r);
    r = run_program((const char *[]){p.plot, dir, "--size", "big", NULL}, NULL);
    expect_failure(&r, 2, "--size big: expected WIDTHxHEIGHT");
    run_result_free(&r);
    r = run_program((const char *[]){p.plot, "/nonexistent/run", "-o", png, NULL}, NULL);
    expect_failure(&r, 1, "cannot read /nonexistent/run");
    run_result_free(&r);
}

/* ---- scorch-test's reports ---- */

/* The CSV's rows after its header, as integers from column `first` on. */
static int read_counts(const char *path, int first, long long counts[][16], int *cols)
{
    FILE *f = fopen(path, "r");
    cr_assert(f, "missing %s", path);
    char line[1024];
    cr_assert(fgets(line, sizeof line, f), "%s: no header", path);
    int rows = 0;
    while (rows < 16 && fgets(line, sizeof line, f)) {
        char *save = NULL, *field = strtok_r(line, ",\n", &save);
        int c = 0;
        for (int k = 0; field; k++, field = strtok_r(NULL, ",\n", &save))
            if (k >= first && c < 16)
                counts[rows][c++] = strtoll(field, NULL, 10);
        *cols = c;
        rows++;
    }
    fclose(f);
    return rows;
}

Test(test_program, confusion_matrix_agrees_with_printed_accuracy)
{
    paths p = bin();
    char dir[DIR], best[PATH], pred[PATH], conf[PATH], per[PATH];
    run_result r = train(&p, temp_dir(dir, sizeof dir), NULL);
    expect_ok(&r);
    run_result_free(&r);
    snprintf(best, sizeof best, "%s/checkpoints/best.ckpt", dir);
    snprintf(pred, sizeof pred, "%s/predictions.csv", dir);
    snprintf(conf, sizeof conf, "%s/confusion.csv", dir);
    snprintf(per, sizeof per, "%s/per_class.csv", dir);
    r = run_program((const char *[]){p.test, "--checkpoint", best, "--predictions", pred,
                                     "--confusion", conf, "--per-class", per, NULL},
                    NULL);
    expect_ok(&r);
    const char *acc = strstr(r.out, "accuracy ");
    cr_assert(acc, "%s", r.out);
    double printed = strtod(acc + 9, NULL);

    long long m[16][16], pc[16][16], targets[16] = {0};
    int cols = 0, pc_cols = 0;
    int classes = read_counts(conf, 1, m, &cols);
    cr_assert_eq(classes, 4, "the synthetic dataset has 4 classes");
    cr_assert_eq(cols, 4);
    cr_assert_eq(read_counts(per, 1, pc, &pc_cols), 4);
    long long diagonal = 0, total = 0;
    for (int t = 0; t < classes; t++) {
        long long row = 0;
        for (int j = 0; j < classes; j++)
            row += m[t][j];
        cr_assert_eq(row, pc[t][0], "class %d: row sum vs per-class samples", t);
        cr_assert_eq(m[t][t], pc[t][1], "class %d: diagonal vs per-class correct", t);
        diagonal += m[t][t];
        total += row;
    }
    cr_assert_eq(total, 512);
    cr_assert_float_eq(printed, (double)diagonal / (double)total, 1e-4);

    FILE *f = fopen(pred, "r");
    char line[1024];
    cr_assert(f && fgets(line, sizeof line, f));
    long long sample, target;
    while (fgets(line, sizeof line, f) && sscanf(line, "%lld,%lld", &sample, &target) == 2)
        targets[target]++;
    fclose(f);
    for (int t = 0; t < classes; t++)
        cr_assert_eq(targets[t], pc[t][0], "class %d: predictions.csv vs per-class", t);
    cr_assert(strstr(r.out, "class  ") && strstr(r.out, "\nall "), "no table:\n%s", r.out);
    run_result_free(&r);
}
