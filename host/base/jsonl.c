#include "base/jsonl.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

/* A cursor over the record's own copy of the line. Strings are decoded in
 * place: an escape never decodes to more bytes than it takes. */
typedef struct parser {
    char *s;
    size_t pos;
} parser;

static sc_status fail(const parser *p, const char *what)
{
    return sc_error_set(SC_ERR_FORMAT, "column %zu: %s", p->pos + 1, what);
}

static void skip_space(parser *p)
{
    while (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' || p->s[p->pos] == '\r')
        p->pos++;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static int hex_value(char c)
{
    return is_digit(c) ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* The four hex digits after "\u" at p->pos, advancing past them. */
static sc_status read_hex4(parser *p, uint32_t *out)
{
    *out = 0;
    for (int i = 0; i < 4; i++, p->pos++) {
        int v = hex_value(p->s[p->pos]);
        if (v < 0)
            return fail(p, "expected four hex digits after \\u");
        *out = *out << 4 | (uint32_t)v;
    }
    return SC_OK;
}

/* A \u escape (p->pos just after the 'u'), surrogate pairs joined. */
static sc_status read_code_point(parser *p, uint32_t *cp)
{
    SC_TRY(read_hex4(p, cp));
    if (*cp >= 0xdc00 && *cp <= 0xdfff)
        return fail(p, "a low surrogate \\u escape without its high one");
    if (*cp >= 0xd800 && *cp <= 0xdbff) {
        uint32_t low;
        if (p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u')
            return fail(p, "a high surrogate \\u escape without its low one");
        p->pos += 2;
        SC_TRY(read_hex4(p, &low));
        if (low < 0xdc00 || low > 0xdfff)
            return fail(p, "a high surrogate \\u escape without its low one");
        *cp = 0x10000 + ((*cp - 0xd800) << 10) + (low - 0xdc00);
    }
    if (*cp == 0)
        return fail(p, "\\u0000 (a NUL character) in a string");
    return SC_OK;
}

static size_t put_utf8(char *out, uint32_t cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3f));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* One escape (p->pos just after the backslash) written at *out. */
static sc_status read_escape(parser *p, char **out)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    char c = p->s[p->pos++];
    const char *hit = c ? strchr(from, c) : NULL;
    if (hit) {
        *(*out)++ = to[hit - from];
        return SC_OK;
    }
    if (c != 'u') {
        p->pos--;
        return fail(p, "unknown escape in a string");
    }
    uint32_t cp;
    SC_TRY(read_code_point(p, &cp));
    *out += put_utf8(*out, cp);
    return SC_OK;
}

/* A string at p->pos (its opening quote), decoded in place. */
static sc_status read_string(parser *p, const char **value)
{
    char *out = p->s + ++p->pos;
    *value = out;
    for (;;) {
        char c = p->s[p->pos];
        if (c == '"')
            break;
        if (c == '\0')
            return fail(p, "the string is not closed");
        if ((unsigned char)c < 0x20)
            return fail(p, "a control character in a string (it must be escaped)");
        p->pos++;
        if (c == '\\')
            SC_TRY(read_escape(p, &out));
        else
            *out++ = c;
    }
    p->pos++;
    *out = '\0';
    return SC_OK;
}

static void skip_digits(parser *p)
{
    while (is_digit(p->s[p->pos]))
        p->pos++;
}

/* A number in JSON's grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static sc_status read_number(parser *p, double *value)
{
    size_t start = p->pos;
    if (p->s[p->pos] == '-')
        p->pos++;
    if (!is_digit(p->s[p->pos]))
        return fail(p, "expected a digit");
    if (p->s[p->pos] == '0' && is_digit(p->s[p->pos + 1]))
        return fail(p, "a number with a leading zero");
    skip_digits(p);
    if (p->s[p->pos] == '.') {
        p->pos++;
        if (!is_digit(p->s[p->pos]))
            return fail(p, "expected a digit after the decimal point");
        skip_digits(p);
    }
    if (p->s[p->pos] == 'e' || p->s[p->pos] == 'E') {
        p->pos++;
        if (p->s[p->pos] == '+' || p->s[p->pos] == '-')
            p->pos++;
        if (!is_digit(p->s[p->pos]))
            return fail(p, "expected a digit in the exponent");
        skip_digits(p);
    }
    /* The grammar above is a subset of strtod's, which stops where it ends. */
    *value = strtod(p->s + start, NULL);
    return SC_OK;
}

static sc_status read_value(parser *p, host_json_field *f)
{
    char c = p->s[p->pos];
    if (c == '"') {
        f->type = HOST_JSON_STRING;
        return read_string(p, &f->string);
    }
    if (c == '-' || is_digit(c)) {
        f->type = HOST_JSON_NUMBER;
        return read_number(p, &f->number);
    }
    if (strncmp(p->s + p->pos, "null", 4) == 0) {
        f->type = HOST_JSON_NULL;
        p->pos += 4;
        return SC_OK;
    }
    if (c == '{' || c == '[' || c == 't' || c == 'f')
        return fail(p, "only strings, numbers and null may be values (the records are flat)");
    return fail(p, "expected a value");
}

static sc_status add_field(host_json_record *rec, const host_json_field *f, parser *p)
{
    if (host_json_record_get(rec, f->key))
        return fail(p, "a key given twice in one record");
    host_json_field *grown = realloc(rec->fields, (size_t)(rec->count + 1) * sizeof *grown);
    if (!grown)
        return sc_error_set(SC_ERR_NOMEM, "out of memory reading a record");
    rec->fields = grown;
    rec->fields[rec->count++] = *f;
    return SC_OK;
}

/* "key": value */
static sc_status read_member(parser *p, host_json_record *rec)
{
    host_json_field f = {0};
    if (p->s[p->pos] != '"')
        return fail(p, "expected a key in double quotes");
    size_t key_pos = p->pos;
    SC_TRY(read_string(p, &f.key));
    skip_space(p);
    if (p->s[p->pos] != ':')
        return fail(p, "expected ':' after the key");
    p->pos++;
    skip_space(p);
    SC_TRY(read_value(p, &f));
    parser at_key = {p->s, key_pos};
    return add_field(rec, &f, &at_key);
}

static sc_status read_object(parser *p, host_json_record *rec)
{
    skip_space(p);
    if (p->s[p->pos] != '{')
        return fail(p, "expected '{' (each line is one JSON object)");
    p->pos++;
    skip_space(p);
    if (p->s[p->pos] != '}') {
        for (;;) {
            SC_TRY(read_member(p, rec));
            skip_space(p);
            if (p->s[p->pos] != ',')
                break;
            p->pos++;
            skip_space(p);
        }
    }
    if (p->s[p->pos] != '}')
        return fail(p, "expected ',' or '}'");
    p->pos++;
    skip_space(p);
    return p->s[p->pos] ? fail(p, "text after the object's closing '}'") : SC_OK;
}

sc_status host_json_record_parse(const char *line, host_json_record *rec)
{
    memset(rec, 0, sizeof *rec);
    if (!(rec->text = strdup(line)))
        return sc_error_set(SC_ERR_NOMEM, "out of memory reading a record");
    parser p = {rec->text, 0};
    sc_status st = read_object(&p, rec);
    if (st != SC_OK)
        host_json_record_free(rec);
    return st;
}

void host_json_record_free(host_json_record *rec)
{
    free(rec->fields);
    free(rec->text);
    memset(rec, 0, sizeof *rec);
}

const host_json_field *host_json_record_get(const host_json_record *rec, const char *key)
{
    for (int i = 0; i < rec->count; i++)
        if (strcmp(rec->fields[i].key, key) == 0)
            return &rec->fields[i];
    return NULL;
}

static sc_status append_record(host_jsonl_file *file, const host_json_record *rec)
{
    host_json_record *grown =
        realloc(file->records, (size_t)(file->count + 1) * sizeof *grown);
    if (!grown)
        return sc_error_set(SC_ERR_NOMEM, "out of memory reading records");
    file->records = grown;
    file->records[file->count++] = *rec;
    return SC_OK;
}

/* Parses one line of path (its newline removed) onto file. */
static sc_status read_line(host_jsonl_file *file, const char *path, long number,
                           const char *line)
{
    host_json_record rec;
    sc_status st = host_json_record_parse(line, &rec);
    if (st != SC_OK)
        return sc_error_wrap(st, "%s:%ld", path, number);
    st = append_record(file, &rec);
    if (st != SC_OK)
        host_json_record_free(&rec);
    return st;
}

static sc_status read_lines(host_jsonl_file *file, const char *path, FILE *f)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    sc_status st = SC_OK;
    for (long number = 1; st == SC_OK && (len = getline(&line, &cap, f)) > 0; number++) {
        if (line[len - 1] != '\n') /* the last record, still being written */
            break;
        line[len - 1] = '\0';
        if (strlen(line) != (size_t)len - 1)
            st = sc_error_set(SC_ERR_FORMAT, "%s:%ld: a NUL byte in the line", path, number);
        else
            st = read_line(file, path, number, line);
    }
    free(line);
    if (st == SC_OK && ferror(f))
        st = sc_error_set(SC_ERR_IO, "cannot read %s: %s", path, strerror(errno));
    return st;
}

sc_status host_jsonl_read(const char *path, host_jsonl_file *file)
{
    memset(file, 0, sizeof *file);
    FILE *f = fopen(path, "r");
    if (!f)
        return sc_error_set(SC_ERR_IO, "cannot read %s: %s", path, strerror(errno));
    sc_status st = read_lines(file, path, f);
    fclose(f);
    if (st != SC_OK)
        host_jsonl_free(file);
    return st;
}

void host_jsonl_free(host_jsonl_file *file)
{
    for (int i = 0; i < file->count; i++)
        host_json_record_free(&file->records[i]);
    free(file->records);
    memset(file, 0, sizeof *file);
}

void host_json_put_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        const char *esc = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n"
                          : c == '\r' ? "\\r" : c == '\t' ? "\\t" : c == '\b' ? "\\b"
                          : c == '\f' ? "\\f" : NULL;
        if (esc)
            fputs(esc, f);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}
