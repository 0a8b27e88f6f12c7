/* The run log and its sinks (observe/run_log.h, observer.h): every report
 * reaches every sink that takes it, in order; a failing sink stops the
 * report; sinks close once, last added first; the console's quiet and
 * silent modes; the metrics.jsonl records; the TensorBoard sink. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "observe/run_log.h"
#include "observe/tensorboard.h"

/* ---- a sink that writes down what it is told ---- */

typedef struct probe {
    char name;            /* 'a', 'b': in the journal */
    sc_status fail;       /* what phase and scalar return */
    char *journal;        /* shared by the probes of a test */
    size_t journal_size;
} probe;

static void note(probe *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void note(probe *p, const char *fmt, ...)
{
    size_t used = strlen(p->journal);
    used += (size_t)snprintf(p->journal + used, p->journal_size - used, "%c:", p->name);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->journal + used, p->journal_size - used, fmt, ap);
    va_end(ap);
    strncat(p->journal, " ", p->journal_size - strlen(p->journal) - 1);
}

static sc_status probe_phase(void *sink, const host_phase_result *r, bool final)
{
    probe *p = sink;
    note(p, "phase %s%s", r->phase, final ? " final" : "");
    return p->fail == SC_OK ? SC_OK : sc_error_set(p->fail, "probe %c failed", p->name);
}

static sc_status probe_scalar(void *sink, int epoch, int64_t step, const char *tag, double value)
{
    probe *p = sink;
    note(p, "scalar %d %lld %s %g", epoch, (long long)step, tag, value);
    return p->fail == SC_OK ? SC_OK : sc_error_set(p->fail, "probe %c failed", p->name);
}

static void probe_progress(void *sink, const host_progress *pr)
{
    note(sink, "progress %lld/%lld", (long long)pr->batch, (long long)pr->batches);
}

static void probe_end_line(void *sink) { note(sink, "end_line"); }

static void probe_message(void *sink, bool final, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

static void probe_message(void *sink, bool final, const char *fmt, va_list ap)
{
    char text[128];
    vsnprintf(text, sizeof text, fmt, ap);
    note(sink, "%s %s", final ? "final" : "info", text);
}

static void probe_close(void *sink) { note(sink, "close"); }

static host_observer probe_observer(probe *p)
{
    static const host_observer_ops ops = {probe_phase,    probe_scalar,  probe_progress,
                                          probe_end_line, probe_message, probe_close};
    return (host_observer){&ops, p};
}

/* A log whose console is quiet and silent (it prints nothing), with the
 * probes a and b as its other sinks. */
static char journal[1024];
static probe a = {'a', SC_OK, journal, sizeof journal}, b = {'b', SC_OK, journal, sizeof journal};

static void open_probed(host_run_log *log)
{
    journal[0] = '\0';
    a.fail = b.fail = SC_OK;
    cr_assert_eq(host_run_log_open(log, NULL, true, 3), SC_OK);
    log->console.silent = true;
    cr_assert_eq(host_run_log_add(log, probe_observer(&a)), SC_OK);
    cr_assert_eq(host_run_log_add(log, probe_observer(&b)), SC_OK);
}

static const host_phase_result valid_phase = {.phase = "valid", .epoch = 1, .epochs = 3,
                                              .step = 10, .loss = 0.5, .samples = 64,
                                              .seconds = 2};

/* ---- the fan-out ---- */

Test(run_log, every_report_reaches_every_sink_in_order)
{
    host_run_log log;
    open_probed(&log);
    cr_expect_eq(host_run_log_phase(&log, &valid_phase, true), SC_OK);
    cr_expect_eq(host_run_log_scalar(&log, 2, 17, "grad_norm", 1.5), SC_OK);
    host_run_log_progress(&log, &(host_progress){.phase = "train", .batch = 3, .batches = 8});
    host_run_log_end_line(&log);
    host_run_log_info(&log, "info %d", 1);
    host_run_log_final(&log, "best %s", "x");
    host_run_log_close(&log);
    cr_expect_str_eq(journal, "a:phase valid final b:phase valid final "
                              "a:scalar 2 17 grad_norm 1.5 b:scalar 2 17 grad_norm 1.5 "
                              "a:progress 3/8 b:progress 3/8 a:end_line b:end_line "
                              "a:info info 1 b:info info 1 a:final best x b:final best x "
                              "b:close a:close ");
}

Test(run_log, a_failing_sink_stops_the_report_with_its_error)
{
    host_run_log log;
    open_probed(&log);
    a.fail = SC_ERR_IO;
    cr_expect_eq(host_run_log_phase(&log, &valid_phase, false), SC_ERR_IO);
    cr_expect_str_eq(sc_error_message(), "probe a failed");
    cr_expect_eq(host_run_log_scalar(&log, 1, 1, "t", 0), SC_ERR_IO);
    cr_expect_str_eq(journal, "a:phase valid a:scalar 1 1 t 0 ");
    host_run_log_close(&log);
}

Test(run_log, sinks_close_once)
{
    host_run_log log;
    open_probed(&log);
    host_run_log_close(&log);
    host_run_log_close(&log);
    cr_expect_str_eq(journal, "b:close a:close ");
}

Test(run_log, a_full_log_refuses_a_sink_and_closes_it)
{
    host_run_log log;
    open_probed(&log);
    probe extra[HOST_RUN_LOG_SINKS];
    int added = 0;
    sc_status st = SC_OK;
    for (; st == SC_OK && added < HOST_RUN_LOG_SINKS; added++) {
        extra[added] = (probe){(char)('c' + added), SC_OK, journal, sizeof journal};
        st = host_run_log_add(&log, probe_observer(&extra[added]));
    }
    cr_assert_eq(st, SC_ERR_INVALID);
    cr_expect(strstr(sc_error_message(), "room for 4 sinks"), "%s", sc_error_message());
    /* console, a, b and c fill it; d is refused and closed at once */
    cr_expect_str_eq(journal, "d:close ");
    host_run_log_close(&log);
}

/* ---- the console ---- */

static void console_reports(bool quiet, bool silent)
{
    host_run_log log;
    cr_assert_eq(host_run_log_open(&log, NULL, quiet, 2), SC_OK);
    log.console.silent = silent;
    host_run_log_info(&log, "hello %d", 7);
    host_run_log_phase(&log, &valid_phase, false);
    host_run_log_phase(&log, &(host_phase_result){.phase = "test", .epoch = 2, .epochs = 2,
                                                  .loss = 0.25, .samples = 10, .seconds = 1},
                       true);
    host_run_log_final(&log, "done");
    host_run_log_close(&log);
    fflush(stdout);
}

Test(run_log, console_prints_everything, .init = cr_redirect_stdout)
{
    console_reports(false, false);
    cr_expect_stdout_eq_str("hello 7\n"
                            "epoch 1/3 valid loss 0.5000  | 32 samples/s  2.00 s  data 0%\n"
                            "epoch 2/2 test  loss 0.2500  | 10 samples/s  1.00 s  data 0%\n"
                            "done\n");
}

Test(run_log, quiet_console_prints_final_lines_only, .init = cr_redirect_stdout)
{
    console_reports(true, false);
    cr_expect_stdout_eq_str("epoch 2/2 test  loss 0.2500  | 10 samples/s  1.00 s  data 0%\n"
                            "done\n");
}

Test(run_log, silent_console_prints_nothing, .init = cr_redirect_stdout)
{
    console_reports(true, true);
    cr_expect_stdout_eq_str("");
}

/* ---- metrics.jsonl and TensorBoard ---- */

/* The file's bytes, NUL-terminated; *size without the NUL. */
static char *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    char *data = calloc(1, 1 << 16);
    *size = fread(data, 1, (1 << 16) - 1, f);
    fclose(f);
    return data;
}

static bool holds(const char *data, size_t size, const char *s)
{
    for (size_t k = 0; k + strlen(s) <= size; k++)
        if (memcmp(data + k, s, strlen(s)) == 0)
            return true;
    return false;
}

static void temp_dir(char *dir, size_t size)
{
    snprintf(dir, size, "/tmp/scorch_run_log_XXXXXX");
    cr_assert(mkdtemp(dir));
}

Test(run_log, metrics_jsonl_records)
{
    char dir[64], path[96];
    temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    host_run_log log;
    cr_assert_eq(host_run_log_open(&log, path, true, 1), SC_OK);
    cr_expect(log.records);
    log.console.silent = true;
    sc_metrics *m = sc_metrics_new();
    cr_assert_eq(sc_metrics_add(m, "acc", 3, 4), SC_OK);
    host_phase_result r = valid_phase;
    r.metrics = m;
    r.loss = NAN;
    cr_expect_eq(host_run_log_phase(&log, &r, false), SC_OK);
    cr_expect_eq(host_run_log_scalar(&log, 1, 12, "tag\n", INFINITY), SC_OK);
    host_run_log_close(&log);
    sc_metrics_free(m);
    size_t size;
    char *text = read_file(path, &size);
    /* max_rss_mb, the process's, varies */
    static const char phase_head[] =
        "{\"epoch\":1,\"phase\":\"valid\",\"step\":10,\"loss\":null,\"acc\":0.75,"
        "\"samples\":64,\"samples_per_s\":32,\"time_s\":2,\"data_wait_s\":0,\"compute_s\":2,"
        "\"comm_s\":0,\"max_rss_mb\":";
    cr_expect(strncmp(text, phase_head, strlen(phase_head)) == 0, "%s", text);
    cr_expect(strstr(text, ",\"arena_peak_mb\":0,\"lr\":0}\n"
                           "{\"epoch\":1,\"step\":12,\"tag\":\"tag\\u000a\",\"value\":null}\n"),
              "%s", text);
    free(text);
    unlink(path);
    rmdir(dir);
}

Test(run_log, tensorboard_sink_writes_phase_scalars)
{
    char dir[64];
    temp_dir(dir, sizeof dir);
    host_tb_writer *tb;
    cr_assert_eq(host_tb_open(dir, 1, &tb), SC_OK, "%s", sc_error_message());
    char path[256];
    snprintf(path, sizeof path, "%s", host_tb_path(tb));
    host_run_log log;
    cr_assert_eq(host_run_log_open(&log, NULL, true, 1), SC_OK);
    log.console.silent = true;
    cr_assert_eq(host_run_log_add(&log, host_tb_observer(tb)), SC_OK);
    cr_expect_eq(host_run_log_phase(&log, &valid_phase, false), SC_OK);
    cr_expect_eq(host_run_log_scalar(&log, 1, 4, "hook/tag", 2), SC_OK);
    host_run_log_close(&log); /* closes tb */
    size_t size;
    char *events = read_file(path, &size);
    const char *tags[] = {"valid/loss", "valid/samples_per_s", "hook/tag"};
    for (size_t i = 0; i < sizeof tags / sizeof *tags; i++)
        cr_expect(holds(events, size, tags[i]), "no %s in %s", tags[i], path);
    free(events);
    unlink(path);
    rmdir(dir);
}
