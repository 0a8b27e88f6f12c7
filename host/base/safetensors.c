/* safetensors.c — the safetensors reader and writer (safetensors.h). */
#include "base/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/jsonl.h"

/* The reference reader's limit on the header; ours on a tensor, far above
 * any weight a file holds and far below an element count that overflows. */
#define HEADER_MAX 100000000ull
#define NUMEL_MAX (1ull << 40)
#define HEADER_LEN_BYTES 8

_Static_assert(SC_MAX_DIMS <= HOST_SAFETENSORS_MAX_DIMS, "a scorch tensor's shape must fit");

static const struct {
    const char *name;
    int bits;
} dtypes[HOST_SAFETENSORS_DTYPE_COUNT] = {
    [HOST_SAFETENSORS_BOOL] = {"BOOL", 8},
    [HOST_SAFETENSORS_F4] = {"F4", 4},
    [HOST_SAFETENSORS_F6_E2M3] = {"F6_E2M3", 6},
    [HOST_SAFETENSORS_F6_E3M2] = {"F6_E3M2", 6},
    [HOST_SAFETENSORS_U8] = {"U8", 8},
    [HOST_SAFETENSORS_I8] = {"I8", 8},
    [HOST_SAFETENSORS_F8_E5M2] = {"F8_E5M2", 8},
    [HOST_SAFETENSORS_F8_E4M3] = {"F8_E4M3", 8},
    [HOST_SAFETENSORS_F8_E8M0] = {"F8_E8M0", 8},
    [HOST_SAFETENSORS_F8_E4M3FNUZ] = {"F8_E4M3FNUZ", 8},
    [HOST_SAFETENSORS_F8_E5M2FNUZ] = {"F8_E5M2FNUZ", 8},
    [HOST_SAFETENSORS_I16] = {"I16", 16},
    [HOST_SAFETENSORS_U16] = {"U16", 16},
    [HOST_SAFETENSORS_F16] = {"F16", 16},
    [HOST_SAFETENSORS_BF16] = {"BF16", 16},
    [HOST_SAFETENSORS_I32] = {"I32", 32},
    [HOST_SAFETENSORS_U32] = {"U32", 32},
    [HOST_SAFETENSORS_F32] = {"F32", 32},
    [HOST_SAFETENSORS_C64] = {"C64", 64},
    [HOST_SAFETENSORS_F64] = {"F64", 64},
    [HOST_SAFETENSORS_I64] = {"I64", 64},
    [HOST_SAFETENSORS_U64] = {"U64", 64},
};

const char *host_safetensors_dtype_name(host_safetensors_dtype dtype)
{
    return (unsigned)dtype < HOST_SAFETENSORS_DTYPE_COUNT ? dtypes[dtype].name : "?";
}

typedef struct meta_entry {
    char *key, *value;
} meta_entry;

struct host_safetensors {
    unsigned char *bytes; /* the whole file */
    size_t size;
    host_safetensors_tensor *tensors; /* in data order once checked */
    int n, cap;
    int *by_name; /* tensor indices sorted by name */
    meta_entry *meta; /* sorted by key once checked */
    int n_meta, cap_meta;
};

/* ---- UTF-8 ---- */

/* The length of the UTF-8 sequence at p (at most n bytes), or 0 when it
 * is not one: overlong forms, surrogates and code points past U+10FFFF
 * are refused, as by Rust's str::from_utf8. */
static size_t utf8_sequence(const unsigned char *p, size_t n)
{
    if (p[0] < 0x80)
        return 1;
    size_t len = p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 ? 2 : 0;
    if (len == 0 || p[0] > 0xf4 || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0) ||
        (p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] >= 0x90))
        return 0;
    return len;
}

/* The offset of the first byte that is not valid UTF-8, or n. */
static size_t utf8_valid_prefix(const unsigned char *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        size_t len = utf8_sequence(p + i, n - i);
        if (len == 0)
            return i;
        i += len;
    }
    return n;
}

/* ---- JSON, as the header uses it ---- */

typedef struct json_in {
    const char *start, *p, *end;
} json_in;

static sc_status json_fail(const json_in *in, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static sc_status json_fail(const json_in *in, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return sc_error_set(SC_ERR_FORMAT, "header byte %zu: %s", (size_t)(in->p - in->start), what);
}

static void json_ws(json_in *in)
{
    while (in->p < in->end && strchr(" \t\n\r", *in->p) && *in->p)
        in->p++;
}

static bool json_peek(json_in *in, char c)
{
    json_ws(in);
    return in->p < in->end && *in->p == c;
}

static sc_status json_expect(json_in *in, char c, const char *what)
{
    if (!json_peek(in, c))
        return json_fail(in, "expected %s", what);
    in->p++;
    return SC_OK;
}

/* ',' and true before another member, '}' or ']' (close) and false after
 * the last. */
static sc_status json_next(json_in *in, char close, bool *more)
{
    json_ws(in);
    if (in->p < in->end && (*in->p == ',' || *in->p == close)) {
        *more = *in->p++ == ',';
        return SC_OK;
    }
    return json_fail(in, "expected ',' or '%c'", close);
}

typedef struct text {
    char *s;
    size_t len, cap;
} text;

static sc_status text_put(text *t, const char *p, size_t n)
{
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 64;
        while (cap < t->len + n + 1)
            cap *= 2;
        char *s = realloc(t->s, cap);
        if (!s)
            return sc_error_set(SC_ERR_NOMEM, "out of memory reading a safetensors header");
        t->s = s;
        t->cap = cap;
    }
    memcpy(t->s + t->len, p, n);
    t->len += n;
    t->s[t->len] = '\0';
    return SC_OK;
}

static int hex4(const char *p, const char *end)
{
    int v = 0;
    for (int i = 0; i < 4; i++) {
        if (p + i >= end)
            return -1;
        char c = p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return -1;
        v = 16 * v + d;
    }
    return v;
}

static sc_status put_code_point(text *t, unsigned cp)
{
    char b[4];
    size_t n;
    if (cp < 0x80) {
        b[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        b[0] = (char)(0xc0 | cp >> 6);
        b[1] = (char)(0x80 | (cp & 0x3f));
        n = 2;
    } else if (cp < 0x10000) {
        b[0] = (char)(0xe0 | cp >> 12);
        b[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        b[2] = (char)(0x80 | (cp & 0x3f));
        n = 3;
    } else {
        b[0] = (char)(0xf0 | cp >> 18);
        b[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        b[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        b[3] = (char)(0x80 | (cp & 0x3f));
        n = 4;
    }
    return text_put(t, b, n);
}

/* \uXXXX (in->p after the 'u'), with a surrogate pair as one code point. */
static sc_status json_unicode_escape(json_in *in, text *t)
{
    int cp = hex4(in->p, in->end);
    if (cp < 0)
        return json_fail(in, "expected four hex digits after \\u");
    in->p += 4;
    if (cp >= 0xdc00 && cp <= 0xdfff)
        return json_fail(in, "a low surrogate \\u%04x without its high half", (unsigned)cp);
    if (cp >= 0xd800 && cp <= 0xdbff) {
        int low = in->end - in->p >= 2 && in->p[0] == '\\' && in->p[1] == 'u'
                      ? hex4(in->p + 2, in->end) : -1;
        if (low < 0xdc00 || low > 0xdfff)
            return json_fail(in, "a high surrogate \\u%04x without its low half", (unsigned)cp);
        in->p += 6;
        cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
    }
    if (cp == 0)
        return json_fail(in, "a NUL character (\\u0000) in a string");
    return put_code_point(t, (unsigned)cp);
}

static sc_status json_escape(json_in *in, text *t)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    char c = in->p < in->end ? *in->p : '\0';
    const char *k = c ? strchr(from, c) : NULL;
    if (c == 'u') {
        in->p++;
        return json_unicode_escape(in, t);
    }
    if (!k)
        return json_fail(in, "an unknown escape in a string");
    in->p++;
    return text_put(t, &to[k - from], 1);
}

/* A string, decoded into t (emptied first); the header is valid UTF-8. */
static sc_status json_string_into(json_in *in, text *t)
{
    t->len = 0;
    SC_TRY(text_put(t, "", 0));
    SC_TRY(json_expect(in, '"', "a string"));
    while (in->p < in->end && *in->p != '"') {
        const char *run = in->p;
        while (in->p < in->end && *in->p != '"' && *in->p != '\\' &&
               (unsigned char)*in->p >= 0x20)
            in->p++;
        SC_TRY(text_put(t, run, (size_t)(in->p - run)));
        if (in->p < in->end && (unsigned char)*in->p < 0x20)
            return json_fail(in, "a control character in a string");
        if (in->p < in->end && *in->p == '\\') {
            in->p++;
            SC_TRY(json_escape(in, t));
        }
    }
    if (in->p == in->end)
        return json_fail(in, "the string is not closed");
    in->p++;
    return SC_OK;
}

/* A string of at most HOST_SAFETENSORS_NAME_MAX bytes (names, keys), as
 * a new allocation. */
static sc_status json_name(json_in *in, char **out)
{
    text t = {0};
    const char *at = in->p;
    sc_status st = json_string_into(in, &t);
    if (st == SC_OK && t.len > HOST_SAFETENSORS_NAME_MAX) {
        in->p = at;
        st = json_fail(in, "a name of %zu bytes, more than %d", t.len, HOST_SAFETENSORS_NAME_MAX);
    }
    if (st != SC_OK) {
        free(t.s);
        return st;
    }
    *out = t.s;
    return SC_OK;
}

/* A whole number 0 .. 2^63 - 1 (what shapes and offsets hold). */
static sc_status json_count(json_in *in, const char *what, uint64_t *v)
{
    json_ws(in);
    if (in->p < in->end && *in->p == '-')
        return json_fail(in, "%s is negative", what);
    if (in->p == in->end || *in->p < '0' || *in->p > '9')
        return json_fail(in, "expected a whole number for %s", what);
    if (*in->p == '0' && in->p + 1 < in->end && in->p[1] >= '0' && in->p[1] <= '9')
        return json_fail(in, "%s has a leading zero", what);
    *v = 0;
    for (; in->p < in->end && *in->p >= '0' && *in->p <= '9'; in->p++) {
        unsigned d = (unsigned)(*in->p - '0');
        if (*v > ((uint64_t)INT64_MAX - d) / 10)
            return json_fail(in, "%s is larger than 2^63 - 1", what);
        *v = 10 * *v + d;
    }
    if (in->p < in->end && strchr(".eE", *in->p) && *in->p)
        return json_fail(in, "%s is not a whole number", what);
    return SC_OK;
}

/* ---- the header ---- */

static sc_status json_dtype(json_in *in, host_safetensors_tensor *t)
{
    text s = {0};
    const char *at = (json_ws(in), in->p);
    sc_status st = json_string_into(in, &s);
    int k = 0;
    while (st == SC_OK && k < HOST_SAFETENSORS_DTYPE_COUNT && strcmp(s.s, dtypes[k].name) != 0)
        k++;
    if (st == SC_OK && k == HOST_SAFETENSORS_DTYPE_COUNT) {
        in->p = at;
        st = json_fail(in, "unknown dtype '%.32s'", s.s);
    }
    t->dtype = (host_safetensors_dtype)k;
    free(s.s);
    return st;
}

/* The shape, and its element count, which may not exceed NUMEL_MAX. */
static sc_status json_shape(json_in *in, host_safetensors_tensor *t)
{
    bool more;
    uint64_t numel = 1;
    SC_TRY(json_expect(in, '[', "'[' starting the shape"));
    if (!(more = !json_peek(in, ']')))
        in->p++;
    while (more) {
        uint64_t d;
        if (t->ndim == HOST_SAFETENSORS_MAX_DIMS)
            return json_fail(in, "a shape of more than %d dimensions", HOST_SAFETENSORS_MAX_DIMS);
        SC_TRY(json_count(in, "a dimension", &d));
        if (d > NUMEL_MAX || (d && numel > NUMEL_MAX / d))
            return json_fail(in, "a shape of more than 2^40 elements");
        numel *= d;
        t->shape[t->ndim++] = (int64_t)d;
        SC_TRY(json_next(in, ']', &more));
    }
    t->numel = (int64_t)numel;
    return SC_OK;
}

static sc_status json_offsets(json_in *in, host_safetensors_tensor *t)
{
    bool more;
    SC_TRY(json_expect(in, '[', "'[' starting data_offsets"));
    SC_TRY(json_count(in, "a data offset", &t->begin));
    SC_TRY(json_expect(in, ',', "',' and the end offset"));
    SC_TRY(json_count(in, "a data offset", &t->end));
    SC_TRY(json_next(in, ']', &more));
    return more ? json_fail(in, "data_offsets hold more than two numbers") : SC_OK;
}

enum { FIELD_DTYPE = 1, FIELD_SHAPE = 2, FIELD_OFFSETS = 4 };

static sc_status json_tensor_field(json_in *in, host_safetensors_tensor *t, unsigned *seen)
{
    static const char *const names[] = {"dtype", "shape", "data_offsets"};
    char *key = NULL;
    SC_TRY(json_name(in, &key));
    int k = 0;
    while (k < 3 && strcmp(key, names[k]) != 0)
        k++;
    sc_status st = k == 3 ? json_fail(in, "unknown field '%.64s'", key)
                   : *seen & (1u << k) ? json_fail(in, "field '%s' given twice", key)
                                       : json_expect(in, ':', "':'");
    free(key);
    SC_TRY(st);
    *seen |= 1u << k;
    return k == 0 ? json_dtype(in, t) : k == 1 ? json_shape(in, t) : json_offsets(in, t);
}

static sc_status json_tensor(json_in *in, host_safetensors_tensor *t)
{
    unsigned seen = 0;
    bool more;
    SC_TRY(json_expect(in, '{', "'{' starting the tensor's entry"));
    if (!(more = !json_peek(in, '}')))
        in->p++;
    while (more) {
        SC_TRY(json_tensor_field(in, t, &seen));
        SC_TRY(json_next(in, '}', &more));
    }
    const char *missing = !(seen & FIELD_DTYPE)   ? "dtype"
                          : !(seen & FIELD_SHAPE) ? "shape"
                          : !(seen & FIELD_OFFSETS) ? "data_offsets" : NULL;
    return missing ? json_fail(in, "no %s in the tensor's entry", missing) : SC_OK;
}

static sc_status add_meta(host_safetensors *st, char *key, char *value)
{
    if (st->n_meta == st->cap_meta) {
        int cap = st->cap_meta ? 2 * st->cap_meta : 8;
        meta_entry *m = realloc(st->meta, (size_t)cap * sizeof *m);
        if (!m)
            return sc_error_set(SC_ERR_NOMEM, "out of memory reading a safetensors header");
        st->meta = m;
        st->cap_meta = cap;
    }
    st->meta[st->n_meta++] = (meta_entry){key, value};
    return SC_OK;
}

static sc_status json_meta_entry(json_in *in, host_safetensors *st)
{
    char *key = NULL;
    text value = {0};
    sc_status s = json_name(in, &key);
    if (s == SC_OK)
        s = json_expect(in, ':', "':'");
    if (s == SC_OK && !json_peek(in, '"'))
        s = json_fail(in, "__metadata__ values must be strings");
    if (s == SC_OK)
        s = json_string_into(in, &value);
    if (s == SC_OK)
        s = add_meta(st, key, value.s);
    if (s != SC_OK) {
        free(key);
        free(value.s);
    }
    return s;
}

static sc_status json_metadata(json_in *in, host_safetensors *st)
{
    bool more;
    SC_TRY(json_expect(in, '{', "'{' starting __metadata__"));
    if (!(more = !json_peek(in, '}')))
        in->p++;
    while (more) {
        SC_TRY(json_meta_entry(in, st));
        SC_TRY(json_next(in, '}', &more));
    }
    return SC_OK;
}

static sc_status new_tensor(host_safetensors *st, char *name, host_safetensors_tensor **t)
{
    if (st->n == st->cap) {
        int cap = st->cap ? 2 * st->cap : 16;
        host_safetensors_tensor *ts = realloc(st->tensors, (size_t)cap * sizeof *ts);
        if (!ts)
            return sc_error_set(SC_ERR_NOMEM, "out of memory reading a safetensors header");
        st->tensors = ts;
        st->cap = cap;
    }
    *t = &st->tensors[st->n++];
    **t = (host_safetensors_tensor){.name = name};
    return SC_OK;
}

/* One member of the header's object: a tensor or __metadata__. */
static sc_status json_member(json_in *in, host_safetensors *st, bool *had_meta)
{
    char *key = NULL;
    SC_TRY(json_name(in, &key));
    sc_status s = json_expect(in, ':', "':'");
    if (s == SC_OK && strcmp(key, "__metadata__") == 0) {
        free(key);
        if (*had_meta)
            return json_fail(in, "__metadata__ given twice");
        *had_meta = true;
        return json_metadata(in, st);
    }
    host_safetensors_tensor *t = NULL;
    if (s == SC_OK)
        s = new_tensor(st, key, &t);
    if (s != SC_OK) {
        free(key);
        return s;
    }
    s = json_tensor(in, t);
    return s == SC_OK ? SC_OK : sc_error_wrap(s, "tensor '%.200s'", key);
}

static sc_status parse_header(json_in *in, host_safetensors *st)
{
    bool more, had_meta = false;
    SC_TRY(json_expect(in, '{', "'{' starting the header"));
    if (!(more = !json_peek(in, '}')))
        in->p++;
    while (more) {
        SC_TRY(json_member(in, st, &had_meta));
        SC_TRY(json_next(in, '}', &more));
    }
    json_ws(in);
    return in->p == in->end ? SC_OK : json_fail(in, "text after the header's object");
}

/* ---- the layout of the data ---- */

static int by_offsets(const void *a, const void *b)
{
    const host_safetensors_tensor *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

static void shape_text(const host_safetensors_tensor *t, char *buf, size_t size)
{
    int n = snprintf(buf, size, "%s [", dtypes[t->dtype].name);
    for (int i = 0; i < t->ndim && n > 0 && (size_t)n < size; i++)
        n += snprintf(buf + n, size - (size_t)n, "%s%" PRId64, i ? ", " : "", t->shape[i]);
    if (n > 0 && (size_t)n < size)
        snprintf(buf + n, size - (size_t)n, "]");
}

/* The bytes dtype x shape take. */
static sc_status tensor_bytes(const host_safetensors_tensor *t, uint64_t *bytes)
{
    char shape[160];
    uint64_t bits = (uint64_t)t->numel * (uint64_t)dtypes[t->dtype].bits;
    shape_text(t, shape, sizeof shape);
    if (bits % 8)
        return sc_error_set(SC_ERR_FORMAT, "tensor '%.200s': %s is %" PRIu64 " bits, not whole "
                            "bytes", t->name, shape, bits);
    *bytes = bits / 8;
    if (t->end - t->begin != *bytes)
        return sc_error_set(SC_ERR_FORMAT, "tensor '%.200s': data_offsets [%" PRIu64 ", %" PRIu64
                            "] hold %" PRIu64 " bytes, but %s takes %" PRIu64, t->name, t->begin,
                            t->end, t->end - t->begin, shape, *bytes);
    return SC_OK;
}

/* t, which follows prev (NULL: first) in data order, begins where prev
 * ends: the reference reader wants the tensors to tile the data. */
static sc_status check_adjacent(const host_safetensors_tensor *prev,
                                const host_safetensors_tensor *t, uint64_t data_size)
{
    uint64_t expected = prev ? prev->end : 0;
    if (t->end < t->begin)
        return sc_error_set(SC_ERR_FORMAT, "tensor '%.200s': data_offsets [%" PRIu64 ", %" PRIu64
                            "] end before they begin", t->name, t->begin, t->end);
    if (t->end > data_size)
        return sc_error_set(SC_ERR_FORMAT, "tensor '%.200s': data_offsets [%" PRIu64 ", %" PRIu64
                            "] run past the end of the data (%" PRIu64 " bytes after the header)",
                            t->name, t->begin, t->end, data_size);
    if (t->begin < expected)
        return sc_error_set(SC_ERR_FORMAT, "tensor '%.200s': data_offsets [%" PRIu64 ", %" PRIu64
                            "] overlap those of tensor '%.200s' [%" PRIu64 ", %" PRIu64 "]",
                            t->name, t->begin, t->end, prev->name, prev->begin, prev->end);
    if (t->begin > expected)
        return sc_error_set(SC_ERR_FORMAT, "a hole of %" PRIu64 " unused bytes (data bytes %"
                            PRIu64 " to %" PRIu64 ") before tensor '%.200s': the tensors must "
                            "cover the data without gaps", t->begin - expected, expected,
                            t->begin, t->name);
    uint64_t bytes;
    return tensor_bytes(t, &bytes);
}

static sc_status check_layout(host_safetensors *st, uint64_t data_size)
{
    if (st->n) /* qsort's base may not be NULL */
        qsort(st->tensors, (size_t)st->n, sizeof *st->tensors, by_offsets);
    for (int i = 0; i < st->n; i++)
        SC_TRY(check_adjacent(i ? &st->tensors[i - 1] : NULL, &st->tensors[i], data_size));
    uint64_t used = st->n ? st->tensors[st->n - 1].end : 0;
    if (used < data_size)
        return sc_error_set(SC_ERR_FORMAT, "%" PRIu64 " bytes after the last tensor's data: the "
                            "tensors must cover the data exactly", data_size - used);
    return SC_OK;
}

/* qsort_r is not C11: the comparison sees the tensors through this. */
static _Thread_local const host_safetensors_tensor *sorting;

static int by_name(const void *a, const void *b)
{
    return strcmp(sorting[*(const int *)a].name, sorting[*(const int *)b].name);
}

static int meta_by_key(const void *a, const void *b)
{
    return strcmp(((const meta_entry *)a)->key, ((const meta_entry *)b)->key);
}

/* Sorts the name index and the metadata; a name or key given twice is
 * refused (JSON does not forbid it, the format does). */
static sc_status check_unique(host_safetensors *st)
{
    if (!(st->by_name = malloc((size_t)(st->n ? st->n : 1) * sizeof *st->by_name)))
        return sc_error_set(SC_ERR_NOMEM, "out of memory reading a safetensors header");
    for (int i = 0; i < st->n; i++)
        st->by_name[i] = i;
    sorting = st->tensors;
    qsort(st->by_name, (size_t)st->n, sizeof *st->by_name, by_name);
    for (int i = 1; i < st->n; i++)
        if (strcmp(st->tensors[st->by_name[i]].name, st->tensors[st->by_name[i - 1]].name) == 0)
            return sc_error_set(SC_ERR_FORMAT, "tensor '%.200s' is given twice",
                                st->tensors[st->by_name[i]].name);
    if (st->n_meta)
        qsort(st->meta, (size_t)st->n_meta, sizeof *st->meta, meta_by_key);
    for (int i = 1; i < st->n_meta; i++)
        if (strcmp(st->meta[i].key, st->meta[i - 1].key) == 0)
            return sc_error_set(SC_ERR_FORMAT, "__metadata__ key '%.200s' is given twice",
                                st->meta[i].key);
    return SC_OK;
}

/* ---- opening ---- */

static uint64_t read_le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static sc_status parse_file(host_safetensors *st)
{
    if (st->size < HEADER_LEN_BYTES)
        return sc_error_set(SC_ERR_FORMAT, "%zu bytes, too short for the 8-byte header length",
                            st->size);
    uint64_t n = read_le64(st->bytes);
    if (n > HEADER_MAX)
        return sc_error_set(SC_ERR_FORMAT, "its header length %" PRIu64 " is over the limit of "
                            "100,000,000 bytes (is it a safetensors file?)", n);
    if (n > st->size - HEADER_LEN_BYTES)
        return sc_error_set(SC_ERR_FORMAT, "its header length %" PRIu64 " runs past the end of "
                            "the file (%zu bytes)", n, st->size);
    const char *header = (const char *)st->bytes + HEADER_LEN_BYTES;
    size_t valid = utf8_valid_prefix((const unsigned char *)header, (size_t)n);
    if (valid < n)
        return sc_error_set(SC_ERR_FORMAT, "header byte %zu: not UTF-8", valid);
    json_in in = {header, header, header + n};
    SC_TRY(parse_header(&in, st));
    uint64_t data_size = st->size - HEADER_LEN_BYTES - n;
    SC_TRY(check_layout(st, data_size));
    SC_TRY(check_unique(st));
    for (int i = 0; i < st->n; i++)
        st->tensors[i].data = header + n + st->tensors[i].begin;
    return SC_OK;
}

static sc_status read_whole(const char *path, host_safetensors *st)
{
    FILE *f = fopen(path, "rb");
    struct stat sb;
    if (!f || fstat(fileno(f), &sb) != 0) {
        int err = errno;
        if (f)
            fclose(f);
        return sc_error_set(SC_ERR_IO, "cannot read %s: %s", path, strerror(err));
    }
    sc_status s = SC_OK;
    if (!S_ISREG(sb.st_mode))
        s = sc_error_set(SC_ERR_IO, "cannot read %s: not a regular file", path);
    else if (!(st->bytes = malloc(sb.st_size ? (size_t)sb.st_size : 1)))
        s = sc_error_set(SC_ERR_NOMEM, "out of memory reading %s (%lld bytes)", path,
                         (long long)sb.st_size);
    else if ((st->size = fread(st->bytes, 1, (size_t)sb.st_size, f)) != (size_t)sb.st_size)
        s = sc_error_set(SC_ERR_IO, "cannot read %s: %s", path,
                         ferror(f) ? strerror(errno) : "it shrank while being read");
    fclose(f);
    return s;
}

sc_status host_safetensors_open(const char *path, host_safetensors **out)
{
    *out = NULL;
    host_safetensors *st = calloc(1, sizeof *st);
    if (!st)
        return sc_error_set(SC_ERR_NOMEM, "out of memory opening %s", path);
    sc_status s = read_whole(path, st);
    if (s == SC_OK && (s = parse_file(st)) != SC_OK)
        s = sc_error_wrap(s, "%s", path);
    if (s != SC_OK) {
        host_safetensors_close(st);
        return s;
    }
    *out = st;
    return SC_OK;
}

void host_safetensors_close(host_safetensors *st)
{
    if (!st)
        return;
    for (int i = 0; i < st->n; i++)
        free((char *)st->tensors[i].name);
    for (int i = 0; i < st->n_meta; i++) {
        free(st->meta[i].key);
        free(st->meta[i].value);
    }
    free(st->tensors);
    free(st->by_name);
    free(st->meta);
    free(st->bytes);
    free(st);
}

int host_safetensors_count(const host_safetensors *st) { return st->n; }

const host_safetensors_tensor *host_safetensors_at(const host_safetensors *st, int i)
{
    return i >= 0 && i < st->n ? &st->tensors[i] : NULL;
}

const host_safetensors_tensor *host_safetensors_find(const host_safetensors *st,
                                                     const char *name)
{
    int lo = 0, hi = st->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(st->tensors[st->by_name[mid]].name, name);
        if (c == 0)
            return &st->tensors[st->by_name[mid]];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

const char *host_safetensors_metadata(const host_safetensors *st, const char *key)
{
    meta_entry want = {.key = (char *)key};
    if (!st->n_meta)
        return NULL;
    const meta_entry *m = bsearch(&want, st->meta, (size_t)st->n_meta, sizeof *st->meta,
                                  meta_by_key);
    return m ? m->value : NULL;
}

/* ---- conversion to f32 ---- */

bool host_safetensors_loads_as_f32(host_safetensors_dtype dtype)
{
    return dtype == HOST_SAFETENSORS_F32 || dtype == HOST_SAFETENSORS_F16 ||
           dtype == HOST_SAFETENSORS_BF16 || dtype == HOST_SAFETENSORS_F64;
}

static float f16_to_f32(uint16_t h)
{
    int exponent = (h >> 10) & 0x1f;
    int mantissa = h & 0x3ff;
    float v = exponent == 0    ? ldexpf((float)mantissa, -24) /* zero, subnormal */
              : exponent == 31 ? (mantissa ? NAN : INFINITY)
                               : ldexpf((float)(mantissa | 0x400), exponent - 25);
    return h & 0x8000 ? -v : v;
}

static float bf16_to_f32(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

sc_status host_safetensors_read_f32(const host_safetensors_tensor *t, float *dst)
{
    const unsigned char *p = t->data;
    size_t n = (size_t)t->numel;
    uint16_t h;
    double d;
    switch (t->dtype) {
    case HOST_SAFETENSORS_F32: memcpy(dst, p, n * sizeof *dst); return SC_OK;
    case HOST_SAFETENSORS_F16:
        for (size_t i = 0; i < n; i++, p += 2)
            dst[i] = f16_to_f32((memcpy(&h, p, 2), h));
        return SC_OK;
    case HOST_SAFETENSORS_BF16:
        for (size_t i = 0; i < n; i++, p += 2)
            dst[i] = bf16_to_f32((memcpy(&h, p, 2), h));
        return SC_OK;
    case HOST_SAFETENSORS_F64:
        for (size_t i = 0; i < n; i++, p += 8)
            dst[i] = (float)(memcpy(&d, p, 8), d);
        return SC_OK;
    default:
        return sc_error_set(SC_ERR_UNSUPPORTED, "tensor '%.200s' is %s: only F32, F16, BF16 and "
                            "F64 tensors load as f32 weights", t->name, dtypes[t->dtype].name);
    }
}

static host_safetensors_dtype dtype_of(sc_dtype dtype)
{
    switch (dtype) {
    case SC_I32: return HOST_SAFETENSORS_I32;
    case SC_I64: return HOST_SAFETENSORS_I64;
    case SC_U8: return HOST_SAFETENSORS_U8;
    default: return HOST_SAFETENSORS_F32;
    }
}

host_safetensors_tensor host_safetensors_view(const char *name, const sc_tensor *t)
{
    host_safetensors_tensor v = {.name = name, .dtype = dtype_of(t->dtype), .ndim = t->ndim,
                                 .numel = t->numel, .data = t->data};
    memcpy(v.shape, t->shape, (size_t)t->ndim * sizeof *t->shape);
    v.end = (uint64_t)t->numel * sc_dtype_size(t->dtype);
    return v;
}

/* ---- writing ---- */

static sc_status check_name(const char *what, const char *name)
{
    size_t len = strlen(name);
    if (len == 0 || len > HOST_SAFETENSORS_NAME_MAX ||
        utf8_valid_prefix((const unsigned char *)name, len) < len)
        return sc_error_set(SC_ERR_INVALID, "%s '%.200s' is not 1 to %d bytes of UTF-8", what,
                            name, HOST_SAFETENSORS_NAME_MAX);
    return SC_OK;
}

static int entry_name_order(const void *a, const void *b)
{
    return strcmp((*(const host_safetensors_entry *const *)a)->name,
                  (*(const host_safetensors_entry *const *)b)->name);
}

/* The reference's order: widest dtype first, then by name. */
static int entry_order(const void *a, const void *b)
{
    const host_safetensors_entry *x = *(const host_safetensors_entry *const *)a;
    const host_safetensors_entry *y = *(const host_safetensors_entry *const *)b;
    host_safetensors_dtype dx = dtype_of(x->tensor->dtype), dy = dtype_of(y->tensor->dtype);
    return dx != dy ? (dx > dy ? -1 : 1) : entry_name_order(a, b);
}

static int meta_order(const void *a, const void *b)
{
    return strcmp((*(const host_safetensors_meta *const *)a)->key,
                  (*(const host_safetensors_meta *const *)b)->key);
}

/* order and meta sorted by name and key. */
static sc_status check_entries(const host_safetensors_entry *const *order, int n,
                               const host_safetensors_meta *const *meta, int n_meta)
{
    for (int i = 0; i < n; i++) {
        SC_TRY(check_name("tensor name", order[i]->name));
        if (order[i]->tensor->device.kind != SC_DEVICE_CPU)
            return sc_error_set(SC_ERR_INVALID, "tensor '%.200s' is not in host memory",
                                order[i]->name);
        if (strcmp(order[i]->name, "__metadata__") == 0)
            return sc_error_set(SC_ERR_INVALID, "a tensor may not be named __metadata__");
        if (i && strcmp(order[i]->name, order[i - 1]->name) == 0)
            return sc_error_set(SC_ERR_INVALID, "tensor name '%.200s' given twice",
                                order[i]->name);
    }
    for (int i = 0; i < n_meta; i++) {
        SC_TRY(check_name("metadata key", meta[i]->key));
        if (utf8_valid_prefix((const unsigned char *)meta[i]->value, strlen(meta[i]->value)) <
            strlen(meta[i]->value))
            return sc_error_set(SC_ERR_INVALID, "metadata '%.200s': its value is not UTF-8",
                                meta[i]->key);
        if (i && strcmp(meta[i]->key, meta[i - 1]->key) == 0)
            return sc_error_set(SC_ERR_INVALID, "metadata key '%.200s' given twice",
                                meta[i]->key);
    }
    return SC_OK;
}

static void put_tensor_entry(FILE *f, const host_safetensors_entry *e, uint64_t *offset)
{
    const sc_tensor *t = e->tensor;
    uint64_t bytes = (uint64_t)t->numel * sc_dtype_size(t->dtype);
    host_json_put_string(f, e->name);
    fprintf(f, ":{\"dtype\":\"%s\",\"shape\":[", dtypes[dtype_of(t->dtype)].name);
    for (int d = 0; d < t->ndim; d++)
        fprintf(f, "%s%" PRId64, d ? "," : "", t->shape[d]);
    fprintf(f, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", *offset, *offset + bytes);
    *offset += bytes;
}

/* The header: metadata first, then the tensors in data order, padded with
 * spaces to a multiple of 8 bytes (so that the data is aligned). */
static sc_status compose_header(const host_safetensors_entry *const *order, int n,
                                const host_safetensors_meta *const *meta, int n_meta,
                                char **header, size_t *len)
{
    FILE *f = open_memstream(header, len);
    if (!f)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for a safetensors header");
    fputc('{', f);
    if (n_meta)
        fputs("\"__metadata__\":{", f);
    for (int i = 0; i < n_meta; i++) {
        fputs(i ? "," : "", f);
        host_json_put_string(f, meta[i]->key);
        fputc(':', f);
        host_json_put_string(f, meta[i]->value);
    }
    fputs(n_meta ? "}" : "", f);
    uint64_t offset = 0;
    for (int i = 0; i < n; i++) {
        fputs(i || n_meta ? "," : "", f);
        put_tensor_entry(f, order[i], &offset);
    }
    fputc('}', f);
    while (ftell(f) % 8)
        fputc(' ', f);
    if (fclose(f) != 0)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for a safetensors header");
    return SC_OK;
}

/* fsync of the folder holding path, so that the rename survives a power
 * cut (EINVAL: a file system that cannot sync folders). */
static sc_status sync_folder(const char *path)
{
    char *copy = strdup(path);
    int fd = copy ? open(dirname(copy), O_RDONLY | O_DIRECTORY) : -1;
    int err = fd < 0 || (fsync(fd) != 0 && errno != EINVAL) ? errno : 0;
    if (fd >= 0)
        close(fd);
    free(copy);
    return err ? sc_error_set(SC_ERR_IO, "cannot sync the folder of %s: %s", path, strerror(err))
               : SC_OK;
}

static bool write_bytes(FILE *f, const char *header, size_t len,
                        const host_safetensors_entry *const *order, int n)
{
    unsigned char size[HEADER_LEN_BYTES];
    for (int i = 0; i < HEADER_LEN_BYTES; i++)
        size[i] = (unsigned char)((uint64_t)len >> (8 * i));
    bool ok = fwrite(size, 1, sizeof size, f) == sizeof size && fwrite(header, 1, len, f) == len;
    for (int i = 0; ok && i < n; i++) {
        const sc_tensor *t = order[i]->tensor;
        size_t bytes = (size_t)t->numel * sc_dtype_size(t->dtype);
        /* an empty tensor's data may be NULL */
        ok = bytes == 0 || fwrite(t->data, 1, bytes, f) == bytes;
    }
    return ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
}

static sc_status write_atomically(const char *path, const char *header, size_t len,
                                  const host_safetensors_entry *const *order, int n)
{
    size_t tmp_size = strlen(path) + sizeof ".tmp";
    char *tmp = malloc(tmp_size);
    if (!tmp)
        return sc_error_set(SC_ERR_NOMEM, "out of memory writing %s", path);
    snprintf(tmp, tmp_size, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    bool ok = f && write_bytes(f, header, len, order, n);
    int err = errno;
    if (f && fclose(f) != 0 && ok) {
        ok = false;
        err = errno;
    }
    if (ok && rename(tmp, path) != 0) {
        ok = false;
        err = errno;
    }
    if (!ok && f)
        unlink(tmp);
    free(tmp);
    if (!ok)
        return sc_error_set(SC_ERR_IO, "cannot write %s: %s", path, strerror(err));
    return sync_folder(path);
}

sc_status host_safetensors_write(const char *path, const host_safetensors_entry *tensors,
                                 int n, const host_safetensors_meta *meta, int n_meta)
{
    const host_safetensors_entry **order = malloc((size_t)(n ? n : 1) * sizeof *order);
    const host_safetensors_meta **keys = malloc((size_t)(n_meta ? n_meta : 1) * sizeof *keys);
    char *header = NULL;
    size_t len = 0;
    sc_status st = order && keys ? SC_OK
                                 : sc_error_set(SC_ERR_NOMEM, "out of memory writing %s", path);
    for (int i = 0; st == SC_OK && i < n; i++)
        order[i] = &tensors[i];
    for (int i = 0; st == SC_OK && i < n_meta; i++)
        keys[i] = &meta[i];
    if (st == SC_OK) {
        qsort(order, (size_t)n, sizeof *order, entry_name_order);
        qsort(keys, (size_t)n_meta, sizeof *keys, meta_order);
        st = check_entries(order, n, keys, n_meta);
        qsort(order, (size_t)n, sizeof *order, entry_order);
    }
    if (st == SC_OK)
        st = compose_header(order, n, keys, n_meta, &header, &len);
    if (st == SC_OK && len > HEADER_MAX) /* readers refuse it, as ours does */
        st = sc_error_set(SC_ERR_INVALID, "%s: a header of %zu bytes, over the limit of "
                          "100,000,000", path, len);
    if (st == SC_OK)
        st = write_atomically(path, header, len, order, n);
    free(header);
    free(order);
    free(keys);
    return st;
}
