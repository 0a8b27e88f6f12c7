#include "observe/tensorboard.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/config.h"
#include "observe/png_image.h"
#include "observe/tfrecord.h"

/* Field numbers of tensorboard/compat/proto: event.proto, summary.proto,
 * tensor.proto. */
enum {
    EVENT_WALL_TIME = 1, EVENT_STEP = 2, EVENT_FILE_VERSION = 3, EVENT_SUMMARY = 5,
    EVENT_SESSION_LOG = 7,
    SESSION_LOG_STATUS = 1, SESSION_START = 1,
    SUMMARY_VALUE = 1,
    VALUE_TAG = 1, VALUE_SIMPLE = 2, VALUE_IMAGE = 4, VALUE_HISTO = 5, VALUE_TENSOR = 8,
    VALUE_METADATA = 9,
    IMAGE_HEIGHT = 1, IMAGE_WIDTH = 2, IMAGE_COLORSPACE = 3, IMAGE_ENCODED = 4,
    HISTO_MIN = 1, HISTO_MAX = 2, HISTO_NUM = 3, HISTO_SUM = 4, HISTO_SUM_SQUARES = 5,
    HISTO_BUCKET_LIMIT = 6, HISTO_BUCKET = 7,
    METADATA_PLUGIN_DATA = 1, PLUGIN_NAME = 1,
    TENSOR_DTYPE = 1, TENSOR_STRING_VAL = 8, DT_STRING = 7,
};

/* Per-step records reach the disk at least this often (seconds). */
static const double FLUSH_EVERY_S = 2.0;

struct host_tb_writer {
    FILE *file;          /* NULL once a write failed */
    char path[HOST_PATH_MAX];
    host_pb event;         /* the event being encoded; its memory is reused */
    double last_flush;   /* host_now() */
};

/* ---- the file ---- */

const char *host_tb_path(const host_tb_writer *w)
{
    return w ? w->path : "";
}

/* The one report of a failed write; the writer writes nothing after it. */
static void writer_fail(host_tb_writer *w, const char *cause)
{
    fprintf(stderr, "scorch-train: warning: cannot write TensorBoard events to %s: %s; "
                    "no more TensorBoard events from this run, training goes on "
                    "(metrics.jsonl and checkpoints are unaffected)\n", w->path, cause);
    fclose(w->file);
    w->file = NULL;
}

static bool writer_live(const host_tb_writer *w)
{
    return w && w->file;
}

void host_tb_flush(host_tb_writer *w)
{
    if (!writer_live(w))
        return;
    if (fflush(w->file) != 0)
        writer_fail(w, strerror(errno));
    else
        w->last_flush = host_now();
}

/* Frames w->event as one TFRecord and writes it. */
static void event_write(host_tb_writer *w)
{
    if (w->event.failed) {
        writer_fail(w, "out of memory");
        return;
    }
    uint8_t header[HOST_TFRECORD_HEADER], footer[HOST_TFRECORD_FOOTER];
    host_tfrecord_frame(w->event.data, w->event.len, header, footer);
    if (fwrite(header, sizeof header, 1, w->file) != 1 ||
        fwrite(w->event.data, 1, w->event.len, w->file) != w->event.len ||
        fwrite(footer, sizeof footer, 1, w->file) != 1)
        writer_fail(w, strerror(errno));
}

static double wall_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void event_begin(host_tb_writer *w, int64_t step)
{
    host_pb_reset(&w->event);
    host_pb_put_double(&w->event, EVENT_WALL_TIME, wall_time());
    host_pb_put_int(&w->event, EVENT_STEP, step);
}

static void write_header_events(host_tb_writer *w, int64_t next_step)
{
    event_begin(w, 0);
    host_pb_put_string(&w->event, EVENT_FILE_VERSION, "brain.Event:2");
    event_write(w);
    if (!writer_live(w))
        return;
    event_begin(w, next_step);
    size_t log = host_pb_open(&w->event, EVENT_SESSION_LOG);
    host_pb_put_int(&w->event, SESSION_LOG_STATUS, SESSION_START);
    host_pb_close(&w->event, log);
    event_write(w);
    host_tb_flush(w);
}

static sc_status make_dir(const char *dir)
{
    struct stat st;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return sc_error_set(SC_ERR_IO, "cannot create %s: %s", dir, strerror(errno));
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return sc_error_set(SC_ERR_IO, "cannot create %s: a file of that name is in the way",
                            dir);
    return SC_OK;
}

/* A new file of its own: O_EXCL, with ".N" appended while a name is taken
 * (two processes started in the same second). */
static sc_status create_file(host_tb_writer *w, const char *dir)
{
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) != 0 || !host[0])
        snprintf(host, sizeof host, "localhost");
    long long now = (long long)time(NULL);
    for (int k = 0; k < 100; k++) {
        int n = snprintf(w->path, sizeof w->path, "%s/events.out.tfevents.%lld.%s", dir, now,
                         host);
        if (k > 0)
            snprintf(w->path + n, sizeof w->path - (size_t)n, ".%d", k);
        int fd = open(w->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno == EEXIST)
            continue;
        if (fd >= 0 && (w->file = fdopen(fd, "wb")))
            return SC_OK;
        int err = errno;
        if (fd >= 0)
            close(fd);
        return sc_error_set(SC_ERR_IO, "cannot create %s: %s", w->path, strerror(err));
    }
    return sc_error_set(SC_ERR_IO, "cannot create a new event file in %s: names are taken",
                        dir);
}

sc_status host_tb_open(const char *dir, int64_t next_step, host_tb_writer **out)
{
    *out = NULL;
    SC_TRY(make_dir(dir));
    host_tb_writer *w = calloc(1, sizeof *w);
    if (!w)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for the TensorBoard writer");
    sc_status st = create_file(w, dir);
    if (st != SC_OK) {
        free(w);
        return st;
    }
    write_header_events(w, next_step);
    *out = w;
    return SC_OK;
}

void host_tb_close(host_tb_writer *w)
{
    if (!w)
        return;
    host_tb_flush(w);
    if (w->file && fclose(w->file) != 0)
        fprintf(stderr, "scorch-train: warning: closing %s: %s\n", w->path, strerror(errno));
    host_pb_free(&w->event);
    free(w);
}

/* ---- summaries ---- */

typedef struct value_frame {
    size_t summary, value;
} value_frame;

/* Starts an event at `step` whose summary holds one value tagged `tag`. */
static value_frame value_begin(host_tb_writer *w, int64_t step, const char *tag)
{
    event_begin(w, step);
    value_frame f;
    f.summary = host_pb_open(&w->event, EVENT_SUMMARY);
    f.value = host_pb_open(&w->event, SUMMARY_VALUE);
    host_pb_put_string(&w->event, VALUE_TAG, tag);
    return f;
}

static void value_end(host_tb_writer *w, value_frame f)
{
    host_pb_close(&w->event, f.value);
    host_pb_close(&w->event, f.summary);
    event_write(w);
}

static sc_status check_tag(const char *tag, const char *what)
{
    if (!tag || !tag[0])
        return sc_error_set(SC_ERR_INVALID, "%s: the tag is NULL or empty", what);
    return SC_OK;
}

void host_tb_add_scalar(host_tb_writer *w, const char *tag, int64_t step, double value)
{
    if (!writer_live(w) || !tag || !tag[0])
        return;
    value_frame f = value_begin(w, step, tag);
    host_pb_put_float(&w->event, VALUE_SIMPLE, (float)value);
    value_end(w, f);
}

sc_status host_tb_add_text(host_tb_writer *w, const char *tag, int64_t step, const char *text)
{
    SC_TRY(check_tag(tag, "log_text"));
    if (!text)
        return sc_error_set(SC_ERR_INVALID, "log_text '%s': the text is NULL", tag);
    if (!writer_live(w))
        return SC_OK;
    value_frame f = value_begin(w, step, tag); /* fields in number order, as protoc's */
    size_t tensor = host_pb_open(&w->event, VALUE_TENSOR); /* a scalar string */
    host_pb_put_int(&w->event, TENSOR_DTYPE, DT_STRING);
    host_pb_put_string(&w->event, TENSOR_STRING_VAL, text);
    host_pb_close(&w->event, tensor);
    size_t meta = host_pb_open(&w->event, VALUE_METADATA);
    size_t plugin = host_pb_open(&w->event, METADATA_PLUGIN_DATA);
    host_pb_put_string(&w->event, PLUGIN_NAME, "text");
    host_pb_close(&w->event, plugin);
    host_pb_close(&w->event, meta);
    value_end(w, f);
    return SC_OK;
}

sc_status host_tb_add_image(host_tb_writer *w, const char *tag, int64_t step,
                          const sc_tensor *image)
{
    SC_TRY(check_tag(tag, "log_image"));
    int c, h, wd;
    sc_status st = host_png_check(image, &c, &h, &wd);
    if (st != SC_OK || !writer_live(w))
        return st == SC_OK ? SC_OK : sc_error_wrap(st, "log_image '%s'", tag);
    host_png png = {0};
    st = host_png_encode(image, &png);
    if (st != SC_OK)
        return sc_error_wrap(st, "log_image '%s'", tag);
    value_frame f = value_begin(w, step, tag);
    size_t img = host_pb_open(&w->event, VALUE_IMAGE);
    host_pb_put_int(&w->event, IMAGE_HEIGHT, png.height);
    host_pb_put_int(&w->event, IMAGE_WIDTH, png.width);
    host_pb_put_int(&w->event, IMAGE_COLORSPACE, png.channels); /* 1 grey, 3 RGB */
    host_pb_put_bytes(&w->event, IMAGE_ENCODED, png.data, png.len);
    host_pb_close(&w->event, img);
    value_end(w, f);
    host_png_free(&png);
    return SC_OK;
}

/* ---- histograms ---- */

static void histogram_range(const float *v, int64_t n, host_tb_histogram *h)
{
    h->min = INFINITY;
    h->max = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(v[i]))
            continue;
        double x = v[i];
        h->min = x < h->min ? x : h->min;
        h->max = x > h->max ? x : h->max;
        h->num++;
        h->sum += x;
        h->sum_squares += x * x;
    }
}

void host_tb_histogram_compute(const float *values, int64_t n, host_tb_histogram *h)
{
    memset(h, 0, sizeof *h);
    histogram_range(values, n, h);
    if (h->num == 0)
        return;
    double width = (h->max - h->min) / HOST_TB_BUCKETS;
    h->buckets = width > 0 ? HOST_TB_BUCKETS : 1;
    for (int i = 0; i < h->buckets; i++)
        h->limit[i] = h->min + width * (i + 1);
    h->limit[h->buckets - 1] = h->max; /* exact, whatever the rounding above */
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(values[i]))
            continue;
        /* The bucket whose (lower, upper] holds the value; min goes to the first. */
        double pos = width > 0 ? ceil((values[i] - h->min) / width) - 1 : 0;
        int k = pos < 0 ? 0 : pos >= h->buckets ? h->buckets - 1 : (int)pos;
        h->count[k]++;
    }
}

void host_tb_add_histogram(host_tb_writer *w, const char *tag, int64_t step, const float *values,
                         int64_t n)
{
    if (!writer_live(w))
        return;
    host_tb_histogram h;
    host_tb_histogram_compute(values, n, &h);
    if (h.num == 0)
        return;
    value_frame f = value_begin(w, step, tag);
    size_t histo = host_pb_open(&w->event, VALUE_HISTO);
    host_pb_put_double(&w->event, HISTO_MIN, h.min);
    host_pb_put_double(&w->event, HISTO_MAX, h.max);
    host_pb_put_double(&w->event, HISTO_NUM, h.num);
    host_pb_put_double(&w->event, HISTO_SUM, h.sum);
    host_pb_put_double(&w->event, HISTO_SUM_SQUARES, h.sum_squares);
    host_pb_put_packed_doubles(&w->event, HISTO_BUCKET_LIMIT, h.limit, (size_t)h.buckets);
    host_pb_put_packed_doubles(&w->event, HISTO_BUCKET, h.count, (size_t)h.buckets);
    host_pb_close(&w->event, histo);
    value_end(w, f);
}

/* ---- what the trainer writes ---- */

static void add_phase_scalar(host_tb_writer *w, const host_phase_result *r, const char *name,
                             double value)
{
    char tag[256];
    snprintf(tag, sizeof tag, "%s/%s", r->phase, name);
    host_tb_add_scalar(w, tag, r->step, value);
}

/* <phase>/loss, <phase>/<metric> for each metric, <phase>/samples_per_s;
 * then flushes. */
static sc_status tb_phase(void *sink, const host_phase_result *r, bool final)
{
    (void)final;
    host_tb_writer *w = sink;
    if (!writer_live(w))
        return SC_OK;
    add_phase_scalar(w, r, "loss", r->loss);
    for (int i = 0; r->metrics && i < sc_metrics_count(r->metrics); i++)
        add_phase_scalar(w, r, sc_metrics_name(r->metrics, i), sc_metrics_value(r->metrics, i));
    if (r->seconds > 0)
        add_phase_scalar(w, r, "samples_per_s", (double)r->samples / r->seconds);
    host_tb_flush(w);
    return SC_OK;
}

static sc_status tb_scalar(void *sink, int epoch, int64_t step, const char *tag, double value)
{
    (void)epoch;
    host_tb_add_scalar(sink, tag, step, value);
    return SC_OK;
}

static void tb_close(void *sink)
{
    host_tb_close(sink);
}

host_observer host_tb_observer(host_tb_writer *w)
{
    static const host_observer_ops ops = {
        .phase = tb_phase,
        .scalar = tb_scalar,
        .close = tb_close,
    };
    return (host_observer){&ops, w};
}

void host_tb_log_step(host_tb_writer *w, int64_t step, double loss, double lr)
{
    if (!writer_live(w))
        return;
    host_tb_add_scalar(w, "train/loss_step", step, loss);
    host_tb_add_scalar(w, "train/lr", step, lr);
    if (host_now() - w->last_flush >= FLUSH_EVERY_S)
        host_tb_flush(w);
}

void host_tb_log_params(host_tb_writer *w, const sc_params *ps, const float *values,
                      const float *grads, int64_t step)
{
    for (int i = 0; writer_live(w) && i < sc_params_count(ps); i++) {
        const sc_tensor *p = sc_params_at(ps, i);
        int64_t off = sc_params_offset(ps, i);
        char tag[256];
        snprintf(tag, sizeof tag, "params/%s", p->name);
        host_tb_add_histogram(w, tag, step, values + off, p->numel);
        if (!(p->flags & SC_TENSOR_REQUIRES_GRAD))
            continue;
        snprintf(tag, sizeof tag, "grads/%s", p->name);
        host_tb_add_histogram(w, tag, step, grads + off, p->numel);
    }
}
