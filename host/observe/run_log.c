#include "observe/run_log.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "observe/tensorboard.h"

double host_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

sc_status host_run_log_open(host_run_log *log, const char *jsonl_path, bool quiet, int epochs)
{
    memset(log, 0, sizeof *log);
    log->quiet = quiet;
    log->epochs = epochs;
    log->progress = !quiet && isatty(STDOUT_FILENO);
    if (jsonl_path && !(log->jsonl = fopen(jsonl_path, "a")))
        return sc_error_set(SC_ERR_IO, "cannot open %s: %s", jsonl_path, strerror(errno));
    return SC_OK;
}

void host_run_log_close(host_run_log *log)
{
    host_tb_close(log->tb);
    log->tb = NULL;
    if (log->jsonl)
        fclose(log->jsonl);
    log->jsonl = NULL;
}

/* ---- the console ---- */

static void clear_progress(host_run_log *log)
{
    if (log->progress && log->last_draw > 0) {
        fputs("\r\033[K", stdout);
        log->last_draw = 0;
    }
}

void host_run_log_end_line(host_run_log *log)
{
    if (log->progress && log->last_draw > 0) {
        putchar('\n');
        fflush(stdout);
        log->last_draw = 0;
    }
}

/* "epoch 2/10 valid" ("test" when the log has no epochs). */
static void pass_name(char *buf, size_t size, int epoch, int epochs, const char *phase)
{
    if (epochs > 0)
        snprintf(buf, size, "epoch %d/%d %-5s", epoch, epochs, phase);
    else
        snprintf(buf, size, "%s", phase);
}

/* The loader's share of the wall time, in percent. */
static double data_share(double data_wait_s, double seconds)
{
    return seconds > 0 ? 100 * data_wait_s / seconds : 0;
}

/* "42s", "3m05s", "2h03m": a duration as people read it. */
static void format_duration(char *buf, size_t size, double s)
{
    long t = s > 0 && s < 1e9 ? lround(s) : 0;
    if (t < 60)
        snprintf(buf, size, "%lds", t);
    else if (t < 3600)
        snprintf(buf, size, "%ldm%02lds", t / 60, t % 60);
    else
        snprintf(buf, size, "%ldh%02ldm", t / 3600, t / 60 % 60);
}

static int terminal_columns(void)
{
    struct winsize ws;
    return ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 ? ws.ws_col : 80;
}

/* bar[0..width) as "=====>    " for done/total, NUL-terminated. */
static void draw_bar(char *bar, int width, int64_t done, int64_t total)
{
    int filled = total > 0 ? (int)(width * done / total) : 0;
    for (int i = 0; i < width; i++)
        bar[i] = i < filled ? '=' : (i == filled ? '>' : ' ');
    bar[width] = '\0';
}

/* " 12/391  loss 0.4123   21034 samples/s  data  3%  ETA 9s   ": fields of
 * fixed width, so that the bar keeps its width as the numbers change. */
static void progress_tail(char *buf, size_t size, const host_progress *p)
{
    char eta[32], total[24];
    double per_batch = p->batch > 0 ? p->seconds / (double)p->batch : 0;
    format_duration(eta, sizeof eta, per_batch * (double)(p->batches - p->batch));
    int digits = snprintf(total, sizeof total, "%lld", (long long)p->batches);
    snprintf(buf, size, "%*lld/%s  loss %.4f  %6.0f samples/s  data %2.0f%%  ETA %-5s", digits,
             (long long)p->batch, total, p->loss,
             p->seconds > 0 ? (double)p->samples / p->seconds : 0,
             data_share(p->data_wait_s, p->seconds), eta);
}

void host_run_log_progress(host_run_log *log, const host_progress *p)
{
    double now = host_now();
    if (!log->progress || (now - log->last_draw < 0.1 && p->batch < p->batches))
        return;
    log->last_draw = now;
    enum { BAR_MAX = 30, BAR_MIN = 6 };
    char name[64], tail[192], bar[BAR_MAX + 1] = "", line[512];
    pass_name(name, sizeof name, p->epoch, log->epochs, p->phase);
    progress_tail(tail, sizeof tail, p);
    /* The line must fit the terminal, or "\r" would not return to its start. */
    int columns = terminal_columns();
    int room = columns - 1 - (int)(strlen(name) + strlen(tail)) - 4;
    int width = room < BAR_MAX ? room : BAR_MAX;
    if (width >= BAR_MIN)
        draw_bar(bar, width, p->batch, p->batches);
    int len = snprintf(line, sizeof line, width >= BAR_MIN ? "%s [%s] %s" : "%s%s %s", name,
                       bar, tail);
    while (len > 0 && line[len - 1] == ' ')
        len--;
    if (len > columns - 1)
        len = columns - 1;
    printf("\r\033[K%.*s", len, line);
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

/* The process's peak resident memory so far. */
static double max_rss_mb(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? (double)ru.ru_maxrss / 1024 : NAN; /* KiB */
}

/* ,"key":v — metric names are the plugin's, so they are escaped too. */
static void json_field(FILE *f, const char *key, double v)
{
    fputc(',', f);
    json_string(f, key);
    fputc(':', f);
    json_number(f, v);
}

static sc_status write_record(host_run_log *log, const host_phase_result *r)
{
    FILE *f = log->jsonl;
    fprintf(f, "{\"epoch\":%d,\"phase\":\"%s\",\"step\":%lld", r->epoch, r->phase,
            (long long)r->step);
    json_field(f, "loss", r->loss);
    for (int i = 0; r->metrics && i < sc_metrics_count(r->metrics); i++)
        json_field(f, sc_metrics_name(r->metrics, i), sc_metrics_value(r->metrics, i));
    fprintf(f, ",\"samples\":%lld", (long long)r->samples);
    json_field(f, "samples_per_s", r->seconds > 0 ? (double)r->samples / r->seconds : NAN);
    json_field(f, "time_s", r->seconds);
    /* The step time split three ways; compute is the rest (forward,
     * backward, optimizer, metrics, hooks). */
    json_field(f, "data_wait_s", r->data_wait_s);
    json_field(f, "compute_s", fmax(r->seconds - r->data_wait_s - r->comm_s, 0));
    json_field(f, "comm_s", r->comm_s);
    json_field(f, "max_rss_mb", max_rss_mb());
    json_field(f, "arena_peak_mb", (double)r->arena_peak / (1024 * 1024));
    if (r->on_gpu) {
        json_field(f, "gpu_mem_mb", (double)r->gpu_allocated / (1024 * 1024));
        json_field(f, "gpu_peak_mb", (double)r->gpu_peak / (1024 * 1024));
    }
    json_field(f, "lr", r->lr);
    fputs("}\n", f);
    if (fflush(f) != 0)
        return sc_error_set(SC_ERR_IO, "cannot write metrics.jsonl: %s", strerror(errno));
    return SC_OK;
}

static void print_line(const host_phase_result *r)
{
    char name[64];
    pass_name(name, sizeof name, r->epoch, r->epochs, r->phase);
    printf("%s loss %.4f", name, r->loss);
    for (int i = 0; r->metrics && i < sc_metrics_count(r->metrics); i++)
        printf("  %s %.4f", sc_metrics_name(r->metrics, i), sc_metrics_value(r->metrics, i));
    double rate = r->seconds > 0 ? (double)r->samples / r->seconds : 0;
    printf("  | %.0f samples/s  %.2f s  data %.0f%%", rate, r->seconds,
           data_share(r->data_wait_s, r->seconds));
    if (strcmp(r->phase, "train") == 0)
        printf("  lr %.3g", r->lr);
    putchar('\n');
    fflush(stdout);
}

sc_status host_run_log_phase(host_run_log *log, const host_phase_result *r, bool final)
{
    clear_progress(log);
    if (!log->silent && (!log->quiet || final))
        print_line(r);
    host_tb_log_phase(log->tb, r);
    return log->jsonl ? write_record(log, r) : SC_OK;
}

sc_status host_run_log_scalar(host_run_log *log, int epoch, int64_t step, const char *tag,
                            double value)
{
    host_tb_add_scalar(log->tb, tag, step, value);
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

static void print_message(host_run_log *log, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

static void print_message(host_run_log *log, const char *fmt, va_list ap)
{
    clear_progress(log);
    vprintf(fmt, ap);
    putchar('\n');
    fflush(stdout);
}

void host_run_log_info(host_run_log *log, const char *fmt, ...)
{
    if (log->quiet)
        return;
    va_list ap;
    va_start(ap, fmt);
    print_message(log, fmt, ap);
    va_end(ap);
}

void host_run_log_final(host_run_log *log, const char *fmt, ...)
{
    if (log->silent)
        return;
    va_list ap;
    va_start(ap, fmt);
    print_message(log, fmt, ap);
    va_end(ap);
}
