/* predict.c — scorch-predict's inputs, batches and records (predict.h). */
#include "run/predict.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>

#include "scorch/csv.h"
#include "base/jsonl.h"
#include "run/predictions.h"

enum { LABEL_LEN = 32 };

/* ---- inputs ---- */

/* One input of the batch being read. */
typedef struct slot {
    sc_raw_input raw;
    const char *name;      /* as messages and records show it */
    char *line;            /* getline's buffer: the line this slot read last */
    size_t cap;
    char label[LABEL_LEN]; /* "stdin:N" */
    bool decoded;          /* into the batch's sample of the same index */
    char *why;             /* else why not (malloc'd), or NULL */
} slot;

/* Where the inputs come from: the arguments, then the list. */
typedef struct input_reader {
    char *const *args;
    int n_args, next_arg;
    FILE *list;              /* --input-list, open until it is read */
    const char *list_name;
    FILE *stream;            /* the lines being read: stdin's or the list's */
    const char *stream_name; /* for messages */
    bool rows;               /* its lines are inputs (stdin by "-"), not paths */
    int64_t line;            /* the stream's last line read */
} input_reader;

static bool is_stdin(const char *name) { return strcmp(name, "-") == 0; }

/* The media type a file's extension tells, or NULL: the dataset looks at
 * the content. */
static const char *media_type_of(const char *path)
{
    static const char *const types[][2] = {
        {".png", "image/png"}, {".pgm", "image/x-portable-graymap"}, {".csv", "text/csv"}};
    const char *dot = strrchr(path, '.');
    for (size_t i = 0; dot && i < sizeof types / sizeof types[0]; i++)
        if (strcasecmp(dot, types[i][0]) == 0)
            return types[i][1];
    return NULL;
}

static void take_path(slot *s, const char *path)
{
    s->raw = (sc_raw_input){.path = path, .media_type = media_type_of(path)};
    s->name = path;
}

static void close_stream(FILE *f)
{
    if (f && f != stdin)
        fclose(f);
}

static sc_status reader_open(input_reader *r, const host_predict_request *req)
{
    *r = (input_reader){.args = req->inputs, .n_args = req->n_inputs,
                        .list_name = req->input_list};
    if (!req->input_list[0])
        return SC_OK;
    r->list = is_stdin(req->input_list) ? stdin : fopen(req->input_list, "r");
    if (!r->list)
        return sc_error_set(SC_ERR_IO, "--input-list %s: %s", req->input_list, strerror(errno));
    return SC_OK;
}

static void reader_close(input_reader *r)
{
    close_stream(r->list);
    close_stream(r->stream);
}

static void start_stream(input_reader *r, FILE *f, const char *name, bool rows)
{
    r->stream = f;
    r->stream_name = name;
    r->rows = rows;
    r->line = 0;
}

/* The stream's next line that is not empty into s; at its end, closes it
 * and leaves *got false. */
static sc_status read_line(input_reader *r, slot *s, bool *got)
{
    for (;;) {
        errno = 0;
        ssize_t n = getline(&s->line, &s->cap, r->stream);
        if (n < 0) {
            if (ferror(r->stream) || errno == ENOMEM)
                return sc_error_set(errno == ENOMEM ? SC_ERR_NOMEM : SC_ERR_IO,
                                    "cannot read %s: %s", r->stream_name, strerror(errno));
            close_stream(r->stream);
            r->stream = NULL;
            return SC_OK;
        }
        r->line++;
        if (n && s->line[n - 1] == '\n')
            s->line[--n] = '\0';
        if (n && s->line[n - 1] == '\r')
            s->line[--n] = '\0';
        if (n)
            break;
    }
    *got = true;
    if (!r->rows) {
        take_path(s, s->line);
        return SC_OK;
    }
    snprintf(s->label, sizeof s->label, "stdin:%lld", (long long)r->line);
    s->raw = (sc_raw_input){.bytes = s->line, .size = strlen(s->line), .media_type = "text/csv"};
    s->name = s->label;
    return SC_OK;
}

/* The next input into s; *got false when there is none left. */
static sc_status next_input(input_reader *r, slot *s, bool *got)
{
    *got = false;
    while (!*got) {
        if (r->stream) {
            SC_TRY(read_line(r, s, got));
        } else if (r->next_arg < r->n_args) {
            const char *arg = r->args[r->next_arg++];
            if (is_stdin(arg)) {
                start_stream(r, stdin, "stdin", true);
            } else {
                take_path(s, arg);
                *got = true;
            }
        } else if (r->list) {
            start_stream(r, r->list, is_stdin(r->list_name) ? "stdin" : r->list_name, false);
            r->list = NULL;
        } else {
            return SC_OK;
        }
    }
    return SC_OK;
}

/* ---- the network ---- */

typedef struct predictor {
    const host_predict_request *req;
    host_predict_result *result;
    sc_infer *h;
    int64_t batch;
    int threads;       /* that decode a batch's inputs */
    slot *slots;       /* [batch]: the inputs read */
    int64_t *decoded;  /* [batch]: the slots decoded, in order */
    int n_in, n_out;
    size_t in_bytes[SC_MAX_IO], out_bytes[SC_MAX_IO]; /* one sample's */
    int64_t out_numel[SC_MAX_IO];
    sc_dtype out_dtype[SC_MAX_IO];
    unsigned char *in[SC_MAX_IO], *out[SC_MAX_IO];    /* [batch] samples each */
    /* A classifier's records; classes 0: the outputs as they are. */
    int64_t classes;
    int topk;
    bool named;       /* the dataset names its classes */
    double *probs;    /* [classes] */
    int64_t *top;     /* [topk] */
} predictor;

static sc_status spec_bytes(const sc_tensor_spec *spec, int64_t *numel, size_t *bytes)
{
    int64_t n = 1;
    for (int d = 0; d < spec->ndim; d++)
        if (spec->shape[d] < 0 || !sc_mul_i64(n, spec->shape[d], &n))
            return sc_error_set(SC_ERR_INVALID, "a tensor of absurd shape");
    *numel = n;
    *bytes = (size_t)n * sc_dtype_size(spec->dtype);
    return SC_OK;
}

/* [batch] samples of `bytes` each. */
static sc_status alloc_batch(const predictor *p, size_t bytes, unsigned char **out)
{
    *out = bytes && (size_t)p->batch <= SIZE_MAX / bytes ? malloc((size_t)p->batch * bytes)
                                                          : NULL;
    if (!*out && bytes)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for a batch of %lld samples",
                            (long long)p->batch);
    return SC_OK;
}

static sc_status alloc_buffers(predictor *p)
{
    const sc_sample_spec *spec = sc_infer_input_spec(p->h);
    p->n_in = spec->n_inputs;
    p->n_out = sc_infer_output_count(p->h);
    for (int k = 0; k < p->n_in; k++) {
        int64_t numel;
        SC_TRY(spec_bytes(&spec->inputs[k], &numel, &p->in_bytes[k]));
        SC_TRY(alloc_batch(p, p->in_bytes[k], &p->in[k]));
    }
    for (int k = 0; k < p->n_out; k++) {
        const sc_tensor_spec *o = sc_infer_output_spec(p->h, k);
        p->out_dtype[k] = o->dtype;
        SC_TRY(spec_bytes(o, &p->out_numel[k], &p->out_bytes[k]));
        SC_TRY(alloc_batch(p, p->out_bytes[k], &p->out[k]));
    }
    p->slots = calloc((size_t)p->batch, sizeof *p->slots);
    p->decoded = calloc((size_t)p->batch, sizeof *p->decoded);
    if (!p->slots || !p->decoded)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for a batch of %lld inputs",
                            (long long)p->batch);
    return SC_OK;
}

/* Output 0 holds C class scores where the dataset has C classes. */
static bool is_classifier(const sc_infer *h)
{
    int64_t c = sc_infer_input_spec(h)->classes;
    const sc_tensor_spec *o = sc_infer_output_count(h) > 0 ? sc_infer_output_spec(h, 0) : NULL;
    return c > 0 && o && o->dtype == SC_F32 && o->ndim == 1 && o->shape[0] == c;
}

/* The top-k records of a classifier, k clamped to C with a note. */
static sc_status setup_classes(predictor *p)
{
    if (p->req->raw || !is_classifier(p->h))
        return SC_OK;
    p->classes = sc_infer_input_spec(p->h)->classes;
    p->topk = p->req->topk;
    if (p->topk > p->classes) {
        fprintf(p->req->err, "note: --topk %d is more than the %lld classes: the predictions "
                "list the top %lld\n", p->topk, (long long)p->classes, (long long)p->classes);
        p->topk = (int)p->classes;
    }
    p->named = sc_infer_class_name(p->h, 0) != NULL;
    p->probs = malloc((size_t)p->classes * sizeof *p->probs);
    p->top = malloc((size_t)p->topk * sizeof *p->top);
    if (!p->probs || !p->top)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for %lld classes",
                            (long long)p->classes);
    return SC_OK;
}

static sc_status predictor_open(predictor *p, const host_predict_request *r,
                                host_predict_result *result)
{
    *p = (predictor){.req = r, .result = result,
                     .batch = r->infer.max_batch,
                     .threads = r->infer.threads > 0 ? r->infer.threads : omp_get_max_threads()};
    SC_TRY(sc_infer_open(r->checkpoint, &r->infer, &p->h));
    if (!sc_infer_decodes(p->h))
        return sc_error_set(SC_ERR_UNSUPPORTED, "%s: the dataset plugin takes no raw inputs "
                            "(it has no index_decode, plugin ABI 1.4)", r->checkpoint);
    SC_TRY(alloc_buffers(p));
    return setup_classes(p);
}

static void predictor_close(predictor *p)
{
    for (int64_t i = 0; p->slots && i < p->batch; i++) {
        free(p->slots[i].line);
        free(p->slots[i].why);
    }
    free(p->slots);
    free(p->decoded);
    for (int k = 0; k < SC_MAX_IO; k++) {
        free(p->in[k]);
        free(p->out[k]);
    }
    free(p->probs);
    free(p->top);
    sc_infer_close(p->h);
}

/* ---- records ---- */

/* Output value i of a sample's data; JSON has no NaN or infinity: null. */
static void put_value(FILE *f, const unsigned char *data, sc_dtype dtype, int64_t i, bool json)
{
    const unsigned char *at = data + (size_t)i * sc_dtype_size(dtype);
    if (dtype == SC_F32) {
        float v;
        memcpy(&v, at, sizeof v);
        if (json && !isfinite(v))
            fputs("null", f);
        else
            fprintf(f, "%.9g", v);
    } else if (dtype == SC_I32) {
        int32_t v;
        memcpy(&v, at, sizeof v);
        fprintf(f, "%ld", (long)v);
    } else if (dtype == SC_I64) {
        int64_t v;
        memcpy(&v, at, sizeof v);
        fprintf(f, "%lld", (long long)v);
    } else {
        fprintf(f, "%u", (unsigned)*at);
    }
}

static void write_header(const predictor *p)
{
    FILE *f = p->req->out;
    fputs("input", f);
    for (int k = 1; p->classes && k <= p->topk; k++)
        fprintf(f, p->named ? ",pred_%d,score_%d,name_%d" : ",pred_%d,score_%d", k, k, k);
    for (int o = 0; !p->classes && o < p->n_out; o++)
        for (int64_t j = 0; j < p->out_numel[o]; j++)
            fprintf(f, ",output%d_%lld", o, (long long)j);
    fputc('\n', f);
}

/* The dataset's name of class c ("" where it names that one not). */
static const char *class_name(const predictor *p, int64_t c)
{
    const char *name = sc_infer_class_name(p->h, c);
    return name ? name : "";
}

static void write_top_text(const predictor *p, FILE *f)
{
    for (int i = 0; i < p->topk; i++) {
        const char *name = sc_infer_class_name(p->h, p->top[i]);
        fputs(i ? ", " : " ", f);
        if (name)
            fputs(name, f);
        else
            fprintf(f, "class %lld", (long long)p->top[i]);
        fprintf(f, " %.3g%%", 100 * p->probs[p->top[i]]);
    }
}

static void write_top_csv(const predictor *p, FILE *f)
{
    for (int i = 0; i < p->topk; i++) {
        fprintf(f, ",%lld,%.6f", (long long)p->top[i], p->probs[p->top[i]]);
        if (p->named) {
            fputc(',', f);
            sc_csv_write_field(f, class_name(p, p->top[i]));
        }
    }
}

static void write_top_json(const predictor *p, FILE *f)
{
    fputs(",\"top\":[", f);
    for (int i = 0; i < p->topk; i++) {
        fprintf(f, "%s{\"class\":%lld", i ? "," : "", (long long)p->top[i]);
        if (p->named) {
            fputs(",\"name\":", f);
            host_json_put_string(f, class_name(p, p->top[i]));
        }
        fprintf(f, ",\"probability\":%.6f}", p->probs[p->top[i]]);
    }
    fputc(']', f);
}

/* Sample g's top classes, by the format. */
static void write_top(predictor *p, int64_t g)
{
    const float *logits = (const float *)(p->out[0] + (size_t)g * p->out_bytes[0]);
    host_softmax_row(logits, p->classes, p->probs);
    host_top_classes(logits, p->classes, -1, p->topk, p->top);
    switch (p->req->format) {
    case HOST_PREDICT_TEXT: write_top_text(p, p->req->out); break;
    case HOST_PREDICT_CSV: write_top_csv(p, p->req->out); break;
    case HOST_PREDICT_JSONL: write_top_json(p, p->req->out); break;
    }
}

/* Sample g's outputs as they are, by the format. */
static void write_outputs(const predictor *p, int64_t g)
{
    FILE *f = p->req->out;
    bool json = p->req->format == HOST_PREDICT_JSONL;
    const char *before_value = p->req->format == HOST_PREDICT_TEXT ? " " : ",";
    if (json)
        fputs(",\"outputs\":[", f);
    for (int o = 0; o < p->n_out; o++) {
        const unsigned char *data = p->out[o] + (size_t)g * p->out_bytes[o];
        if (o && !json)
            fputs(p->req->format == HOST_PREDICT_TEXT ? " |" : "", f);
        fputs(json ? (o ? ",[" : "[") : "", f);
        for (int64_t j = 0; j < p->out_numel[o]; j++) {
            fputs(json ? (j ? "," : "") : before_value, f);
            put_value(f, data, p->out_dtype[o], j, json);
        }
        fputs(json ? "]" : "", f);
    }
    fputs(json ? "]" : "", f);
}

/* The record of sample g, named `name`. */
static void write_record(predictor *p, const char *name, int64_t g)
{
    FILE *f = p->req->out;
    switch (p->req->format) {
    case HOST_PREDICT_TEXT: fprintf(f, "%s:", name); break;
    case HOST_PREDICT_CSV: sc_csv_write_field(f, name); break;
    case HOST_PREDICT_JSONL:
        fputs("{\"input\":", f);
        host_json_put_string(f, name);
        break;
    }
    if (p->classes)
        write_top(p, g);
    else
        write_outputs(p, g);
    fputs(p->req->format == HOST_PREDICT_JSONL ? "}\n" : "\n", f);
    p->result->predicted++;
}

/* ---- batches ---- */

/* A failed input's line: the dataset's message, which names a file it
 * read; stdin's lines are named here. */
static void report_failure(predictor *p, slot *s)
{
    const char *why = s->why ? s->why : "out of memory for its message";
    bool named = s->raw.path && strstr(why, s->raw.path);
    fprintf(p->req->err, "scorch-predict: %s%s%s\n", named ? "" : s->name, named ? "" : ": ",
            why);
    free(s->why);
    s->why = NULL;
    p->result->failed++;
}

/* Decodes slot i into sample i, keeping the message when it fails (the
 * message is per thread). */
static void decode_slot(predictor *p, int64_t i)
{
    void *at[SC_MAX_IO];
    slot *s = &p->slots[i];
    for (int k = 0; k < p->n_in; k++)
        at[k] = p->in[k] + (size_t)i * p->in_bytes[k];
    s->decoded = sc_infer_decode(p->h, &s->raw, at) == SC_OK;
    if (!s->decoded)
        s->why = strdup(sc_error_message());
}

/* Decodes the slots read into the batch's samples, on several threads
 * (index_decode is [any-thread]: reading and inflating files is most of a
 * small network's time), then packs the good ones in order and reports
 * the others in order; returns how many decoded. */
static int64_t decode_batch(predictor *p, int64_t read)
{
#pragma omp parallel for schedule(dynamic, 1) num_threads(p->threads) if (read > 1)
    for (int64_t i = 0; i < read; i++)
        decode_slot(p, i);
    int64_t good = 0;
    for (int64_t i = 0; i < read; i++) {
        if (!p->slots[i].decoded) {
            report_failure(p, &p->slots[i]);
            continue;
        }
        for (int k = 0; good < i && k < p->n_in; k++)
            memcpy(p->in[k] + (size_t)good * p->in_bytes[k],
                   p->in[k] + (size_t)i * p->in_bytes[k], p->in_bytes[k]);
        p->decoded[good++] = i;
    }
    return good;
}

static sc_status run_batch(predictor *p, int64_t read)
{
    int64_t good = decode_batch(p, read);
    if (good) {
        SC_TRY(sc_infer_run(p->h, good, (const void *const *)p->in, (void *const *)p->out));
        for (int64_t g = 0; g < good; g++)
            write_record(p, p->slots[p->decoded[g]].name, g);
    }
    /* A pipe gets each batch's records before the next batch is read. */
    if (fflush(p->req->out) != 0 || ferror(p->req->out))
        return sc_error_set(SC_ERR_IO, "cannot write the predictions: %s", strerror(errno));
    return SC_OK;
}

static sc_status predict_all(predictor *p, input_reader *r)
{
    if (p->req->format == HOST_PREDICT_CSV)
        write_header(p);
    for (bool more = true; more;) {
        int64_t read = 0;
        while (more && read < p->batch) {
            SC_TRY(next_input(r, &p->slots[read], &more));
            read += more;
        }
        SC_TRY(run_batch(p, read));
    }
    return SC_OK;
}

sc_status host_predict_check(const host_predict_request *r)
{
    int stdin_uses = is_stdin(r->input_list);
    for (int i = 0; i < r->n_inputs; i++)
        stdin_uses += is_stdin(r->inputs[i]);
    if (!r->n_inputs && !r->input_list[0])
        return sc_error_set(SC_ERR_INVALID, "no inputs: name files, '-' for the lines of stdin, "
                            "or --input-list FILE (see scorch-predict --help)");
    if (stdin_uses > 1)
        return sc_error_set(SC_ERR_INVALID, "stdin is named %d times ('-', --input-list -): "
                            "it can be read once", stdin_uses);
    if (r->topk < 1 || r->infer.max_batch < 1)
        return sc_error_set(SC_ERR_INVALID, "--%s must be at least 1",
                            r->topk < 1 ? "topk" : "batch-size");
    return SC_OK;
}

sc_status host_predict(const host_predict_request *r, host_predict_result *result)
{
    *result = (host_predict_result){0};
    SC_TRY(host_predict_check(r));
    input_reader reader;
    predictor p;
    sc_status st = reader_open(&reader, r);
    if (st != SC_OK)
        return st;
    st = predictor_open(&p, r, result);
    if (st == SC_OK)
        st = predict_all(&p, &reader);
    predictor_close(&p);
    reader_close(&reader);
    return st;
}
