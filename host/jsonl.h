/* jsonl.h — a strict reader for scorch's own JSON-lines files
 * (metrics.jsonl): every line is one flat JSON object whose values are
 * strings, numbers or null. Nested objects, arrays, true/false, duplicate
 * keys and anything after the closing brace are errors naming the file,
 * line and column. A last line without its newline is a record still being
 * written (the trainer flushes whole lines) and is skipped.
 */
#ifndef SCORCH_HOST_JSONL_H
#define SCORCH_HOST_JSONL_H

#include "scorch/status.h"

typedef enum sc_json_type { SC_JSON_NULL, SC_JSON_NUMBER, SC_JSON_STRING } sc_json_type;

typedef struct sc_json_field {
    const char *key;    /* UTF-8, decoded */
    sc_json_type type;
    double number;      /* SC_JSON_NUMBER */
    const char *string; /* SC_JSON_STRING, decoded */
} sc_json_field;

/* One line's object. Keys and strings point into `text`, which the
 * record owns. */
typedef struct sc_json_record {
    sc_json_field *fields;
    int count;
    char *text;
} sc_json_record;

/* Parses one line (no newline) into *rec; on error the message names the
 * 1-based column: "column 12: expected ':' after a key". */
sc_status sc_json_record_parse(const char *line, sc_json_record *rec);
void sc_json_record_free(sc_json_record *rec);

/* The field named key, or NULL. */
const sc_json_field *sc_json_record_get(const sc_json_record *rec, const char *key);

typedef struct sc_jsonl_file {
    sc_json_record *records;
    int count;
} sc_jsonl_file;

/* Reads every complete line of path; errors read "PATH:LINE:COLUMN: ...". */
sc_status sc_jsonl_read(const char *path, sc_jsonl_file *file);
void sc_jsonl_free(sc_jsonl_file *file);

#endif
