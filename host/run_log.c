#include "run_log.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double sc_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

sc_status sc_run_log_open(sc_run_log *log, const char *jsonl_path, bool quiet)
{
    memset(log, 0, sizeof *log);
    log->quiet = quiet;
    log->progress = !quiet && isatty(STDOUT_FILENO);
    if (jsonl_path && !(log->jsonl = fopen(jsonl_path, "a")))
        return sc_error_set(SC_ERR_IO, "cannot open %s: %s", jsonl_path, strerror(errno));
    return SC_OK;
}

void sc_run_log_close(sc_run_log *log)
{
    if (log->jsonl)
        fclose(log->jsonl);
    log->jsonl = NULL;
}

static void clear_progress(sc_run_log *log)
{
    if (log->progress && log->last_draw > 0) {
        fputs("\r\033[K", stdout);
        log->last_draw = 0;
    }
}

void sc_run_log_progress(sc_run_log *log, const char *phase, int epoch, int epochs,
                         int64_t batch, int64_t batches, double loss,
                         double samples_per_s, double eta_s)
{
    double now = sc_now();
    if (!log->progress || (now - log->last_draw < 0.1 && batch < batches))
        return;
    log->last_draw = now;
    enum { BAR = 24 };
    char bar[BAR + 1];
    int filled = batches > 0 ? (int)(BAR * batch / batches) : 0;
    for (int i = 0; i < BAR; i++)
        bar[i] = i < filled ? '=' : (i == filled ? '>' : ' ');
    bar[BAR] = '\0';
    printf("\r\033[Kepoch %d/%d %-5s [%s] %lld/%lld  loss %.4f  %.0f samples/s  ETA %.0fs",
           epoch, epochs, phase, bar, (long long)batch, (long long)batches, loss,
           samples_per_s, eta_s);
    fflush(stdout);
}

/* JSON has no NaN or infinity: those become null. */
static void json_number(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.9g", v);
    else
        fputs("null", f);
}

/* A JSON string; plugin-chosen tags may hold any character. */
static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static sc_status write_record(sc_run_log *log, const sc_phase_result *r)
{
    FILE *f = log->jsonl;
    fprintf(f, "{\"epoch\":%d,\"phase\":\"%s\",\"step\":%lld,\"loss\":", r->epoch, r->phase,
            (long long)r->step);
    json_number(f, r->loss);
    for (int i = 0; r->metrics && i < sc_metrics_count(r->metrics); i++) {
        fprintf(f, ",\"%s\":", sc_metrics_name(r->metrics, i));
        json_number(f, sc_metrics_value(r->metrics, i));
    }
    fprintf(f, ",\"samples\":%lld,\"samples_per_s\":", (long long)r->samples);
    json_number(f, r->seconds > 0 ? (double)r->samples / r->seconds : NAN);
    fputs(",\"time_s\":", f);
    json_number(f, r->seconds);
    fputs(",\"data_wait_s\":", f);
    json_number(f, r->data_wait_s);
    fputs(",\"lr\":", f);
    json_number(f, r->lr);
    fputs("}\n", f);
    if (fflush(f) != 0)
        return sc_error_set(SC_ERR_IO, "cannot write metrics.jsonl: %s", strerror(errno));
    return SC_OK;
}

static void print_line(const sc_phase_result *r)
{
    printf("epoch %d/%d %-5s loss %.4f", r->epoch, r->epochs, r->phase, r->loss);
    for (int i = 0; r->metrics && i < sc_metrics_count(r->metrics); i++)
        printf("  %s %.4f", sc_metrics_name(r->metrics, i), sc_metrics_value(r->metrics, i));
    double rate = r->seconds > 0 ? (double)r->samples / r->seconds : 0;
    printf("  | %.0f samples/s  %.2f s", rate, r->seconds);
    if (strcmp(r->phase, "train") == 0)
        printf("  lr %.3g", r->lr);
    putchar('\n');
    fflush(stdout);
}

sc_status sc_run_log_phase(sc_run_log *log, const sc_phase_result *r, bool final)
{
    clear_progress(log);
    if (!log->quiet || final)
        print_line(r);
    return log->jsonl ? write_record(log, r) : SC_OK;
}

sc_status sc_run_log_scalar(sc_run_log *log, int epoch, int64_t step, const char *tag,
                            double value)
{
    if (!log->jsonl)
        return SC_OK;
    fprintf(log->jsonl, "{\"epoch\":%d,\"step\":%lld,\"tag\":", epoch, (long long)step);
    json_string(log->jsonl, tag);
    fputs(",\"value\":", log->jsonl);
    json_number(log->jsonl, value);
    fputs("}\n", log->jsonl);
    return fflush(log->jsonl) == 0 ? SC_OK
                                   : sc_error_set(SC_ERR_IO, "cannot write metrics.jsonl");
}

void sc_run_log_info(sc_run_log *log, const char *fmt, ...)
{
    if (log->quiet)
        return;
    clear_progress(log);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}
