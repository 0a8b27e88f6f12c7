/* csv.c — one CSV row of numbers from a raw input (scorch/csv.h). */
#include "scorch/csv.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "whole_file.h"

/* The most bytes a row of n fields may take. */
static size_t max_row_bytes(int64_t n)
{
    return ((size_t)1 << 20) + (size_t)n * 64;
}

/* The bytes, NUL-terminated, into *text (malloc'd). */
static sc_status copy_bytes(const void *bytes, size_t size, size_t max, char **text)
{
    if (size > max)
        return sc_error_set(SC_ERR_FORMAT, "%zu bytes is more than one row of numbers takes",
                            size);
    if (!(*text = malloc(size + 1)))
        return sc_error_set(SC_ERR_NOMEM, "out of memory copying %zu bytes", size);
    if (size)
        memcpy(*text, bytes, size);
    (*text)[size] = '\0';
    return SC_OK;
}

/* Cuts the one line break that may end the row; a NUL or another line
 * break before the end is a second row or not text. */
static sc_status one_line(char *text, size_t size)
{
    if (size && text[size - 1] == '\n')
        text[--size] = '\0';
    if (size && text[size - 1] == '\r')
        text[--size] = '\0';
    if (strlen(text) != size)
        return sc_error_set(SC_ERR_FORMAT, "not text: it holds a NUL byte");
    if (strpbrk(text, "\r\n"))
        return sc_error_set(SC_ERR_FORMAT, "holds more than one row (one input is one row)");
    return SC_OK;
}

static bool blank(char c) { return c == ' ' || c == '\t'; }

/* Field k, from *at up to the next comma or the end, into *value. */
static sc_status parse_field(char **at, int64_t k, float *value)
{
    char *start = *at, *end;
    size_t len = strcspn(start, ",");
    double v = strtod(start, &end); /* an overflow is an infinity, refused below */
    char *rest = end;
    while (blank(*rest))
        rest++;
    bool number = end != start && rest == start + len;
    if (!number || !isfinite(v) || !isfinite((float)v)) {
        while (blank(*start) && len) {
            start++;
            len--;
        }
        return sc_error_set(SC_ERR_FORMAT, "field %lld, '%.*s', is not a finite number",
                            (long long)k + 1, (int)(len < 40 ? len : 40), start);
    }
    *value = (float)v;
    *at = start + len + (start[len] == ',');
    return SC_OK;
}

/* Exactly n numbers, comma-separated, from text. */
static sc_status parse_row(char *text, float *parsed, int64_t n)
{
    int64_t fields = 1;
    for (const char *c = text; *c; c++)
        fields += *c == ',';
    if (fields != n)
        return sc_error_set(SC_ERR_FORMAT, "expected %lld comma-separated numbers, got %lld "
                            "field%s", (long long)n, (long long)fields, fields == 1 ? "" : "s");
    char *at = text;
    for (int64_t k = 0; k < n; k++)
        SC_TRY(parse_field(&at, k, &parsed[k]));
    return SC_OK;
}

static sc_status read_row(const sc_raw_input *raw, float *values, int64_t n)
{
    const char *type = raw->media_type;
    if (type && strcmp(type, "text/csv") != 0)
        return sc_error_set(SC_ERR_INVALID, "media type '%s' is not text/csv", type);
    if (n < 1)
        return sc_error_set(SC_ERR_INVALID, "sc_csv_read_row: %lld fields", (long long)n);
    char *text = NULL;
    float *parsed = malloc((size_t)n * sizeof *parsed);
    if (!parsed)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for %lld numbers", (long long)n);
    size_t size = raw->size;
    sc_status st = raw->path ? sc_whole_file_read(raw->path, max_row_bytes(n),
                                                  "one row of numbers takes", &text, &size)
                             : copy_bytes(raw->bytes, size, max_row_bytes(n), &text);
    if (st == SC_OK)
        st = one_line(text, size);
    if (st == SC_OK)
        st = parse_row(text, parsed, n);
    if (st == SC_OK)
        memcpy(values, parsed, (size_t)n * sizeof *values);
    free(text);
    free(parsed);
    return st;
}

sc_status sc_csv_read_row(const sc_raw_input *raw, float *values, int64_t n)
{
    sc_status st = read_row(raw, values, n);
    return st == SC_OK || !raw->path ? st : sc_error_wrap(st, "%s", raw->path);
}

void sc_csv_write_field(FILE *f, const char *text)
{
    if (!strpbrk(text, ",\"\r\n")) {
        fputs(text, f);
        return;
    }
    fputc('"', f);
    for (; *text; text++) {
        if (*text == '"')
            fputc('"', f);
        fputc(*text, f);
    }
    fputc('"', f);
}
