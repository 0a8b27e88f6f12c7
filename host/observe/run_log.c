#include "observe/run_log.h"

#include <stdarg.h>
#include <stdio.h>

#include "observe/metrics_jsonl.h"

sc_status host_run_log_open(host_run_log *log, const char *jsonl_path, bool quiet, int epochs)
{
    *log = (host_run_log){0};
    host_console_init(&log->console, quiet, epochs);
    log->sinks[log->n_sinks++] = host_console_observer(&log->console);
    if (!jsonl_path)
        return SC_OK;
    FILE *jsonl;
    SC_TRY(host_metrics_jsonl_open(jsonl_path, &jsonl));
    log->records = true;
    return host_run_log_add(log, host_metrics_jsonl_observer(jsonl));
}

sc_status host_run_log_add(host_run_log *log, host_observer sink)
{
    if (log->n_sinks < HOST_RUN_LOG_SINKS) {
        log->sinks[log->n_sinks++] = sink;
        return SC_OK;
    }
    if (sink.ops->close)
        sink.ops->close(sink.sink);
    return sc_error_set(SC_ERR_INVALID, "a run log has room for %d sinks", HOST_RUN_LOG_SINKS);
}

void host_run_log_close(host_run_log *log)
{
    while (log->n_sinks > 0) {
        const host_observer *o = &log->sinks[--log->n_sinks];
        if (o->ops->close)
            o->ops->close(o->sink);
    }
}

/* Each report goes to the sinks that take it, in order. */
#define EACH_SINK(log, op, o)                                                           \
    for (const host_observer *o = (log)->sinks; o < (log)->sinks + (log)->n_sinks; o++) \
        if (o->ops->op)

void host_run_log_progress(host_run_log *log, const host_progress *p)
{
    EACH_SINK(log, progress, o)
        o->ops->progress(o->sink, p);
}

void host_run_log_end_line(host_run_log *log)
{
    EACH_SINK(log, end_line, o)
        o->ops->end_line(o->sink);
}

sc_status host_run_log_phase(host_run_log *log, const host_phase_result *r, bool final)
{
    EACH_SINK(log, phase, o)
        SC_TRY(o->ops->phase(o->sink, r, final));
    return SC_OK;
}

sc_status host_run_log_scalar(host_run_log *log, int epoch, int64_t step, const char *tag,
                            double value)
{
    EACH_SINK(log, scalar, o)
        SC_TRY(o->ops->scalar(o->sink, epoch, step, tag, value));
    return SC_OK;
}

static void message(host_run_log *log, bool final, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

static void message(host_run_log *log, bool final, const char *fmt, va_list ap)
{
    EACH_SINK(log, message, o) {
        va_list each;
        va_copy(each, ap);
        o->ops->message(o->sink, final, fmt, each);
        va_end(each);
    }
}

void host_run_log_info(host_run_log *log, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    message(log, false, fmt, ap);
    va_end(ap);
}

void host_run_log_final(host_run_log *log, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    message(log, true, fmt, ap);
    va_end(ap);
}
