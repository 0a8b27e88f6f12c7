#include "observe/console.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "base/clock.h"

void host_console_init(host_console *c, bool quiet, int epochs)
{
    *c = (host_console){
        .progress = !quiet && isatty(STDOUT_FILENO),
        .quiet = quiet,
        .epochs = epochs,
    };
}

static void clear_progress(host_console *c)
{
    if (c->progress && c->last_draw > 0) {
        fputs("\r\033[K", stdout);
        c->last_draw = 0;
    }
}

static void console_end_line(void *sink)
{
    host_console *c = sink;
    if (c->progress && c->last_draw > 0) {
        putchar('\n');
        fflush(stdout);
        c->last_draw = 0;
    }
}

/* ---- the progress line ---- */

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

static void console_progress(void *sink, const host_progress *p)
{
    host_console *c = sink;
    double now = host_now();
    if (!c->progress || (now - c->last_draw < 0.1 && p->batch < p->batches))
        return;
    c->last_draw = now;
    enum { BAR_MAX = 30, BAR_MIN = 6 };
    char name[64], tail[192], bar[BAR_MAX + 1] = "", line[512];
    pass_name(name, sizeof name, p->epoch, c->epochs, p->phase);
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

/* ---- lines ---- */

static void print_phase(const host_phase_result *r)
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

static sc_status console_phase(void *sink, const host_phase_result *r, bool final)
{
    host_console *c = sink;
    clear_progress(c);
    if (!c->silent && (!c->quiet || final))
        print_phase(r);
    return SC_OK;
}

static void console_message(void *sink, bool final, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

static void console_message(void *sink, bool final, const char *fmt, va_list ap)
{
    host_console *c = sink;
    if (final ? c->silent : c->quiet)
        return;
    clear_progress(c);
    vprintf(fmt, ap);
    putchar('\n');
    fflush(stdout);
}

host_observer host_console_observer(host_console *c)
{
    static const host_observer_ops ops = {
        .phase = console_phase,
        .progress = console_progress,
        .end_line = console_end_line,
        .message = console_message,
    };
    return (host_observer){&ops, c};
}
