#include "observe/metrics_jsonl.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/resource.h>

sc_status host_metrics_jsonl_open(const char *path, FILE **out)
{
    if (!(*out = fopen(path, "a")))
        return sc_error_set(SC_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    return SC_OK;
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

static sc_status jsonl_phase(void *sink, const host_phase_result *r, bool final)
{
    (void)final;
    FILE *f = sink;
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

static sc_status jsonl_scalar(void *sink, int epoch, int64_t step, const char *tag, double value)
{
    FILE *f = sink;
    fprintf(f, "{\"epoch\":%d,\"step\":%lld,\"tag\":", epoch, (long long)step);
    json_string(f, tag);
    fputs(",\"value\":", f);
    json_number(f, value);
    fputs("}\n", f);
    return fflush(f) == 0 ? SC_OK : sc_error_set(SC_ERR_IO, "cannot write metrics.jsonl");
}

static void jsonl_close(void *sink)
{
    fclose(sink);
}

host_observer host_metrics_jsonl_observer(FILE *f)
{
    static const host_observer_ops ops = {
        .phase = jsonl_phase,
        .scalar = jsonl_scalar,
        .close = jsonl_close,
    };
    return (host_observer){&ops, f};
}
