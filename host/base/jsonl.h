/* jsonl.h — a strict reader for scorch's own JSON-lines files
 * (metrics.jsonl): every line is one flat JSON object whose values are
 * strings, numbers or null. Nested objects, arrays, true/false, duplicate
 * keys and anything after the closing brace are errors naming the file,
 * line and column. A last line without its newline is a record still being
 * written (the trainer flushes whole lines) and is skipped.
 */
#ifndef SCORCH_HOST_JSONL_H
#define SCORCH_HOST_JSONL_H

#include <stdio.h>

#include "scorch/status.h"

typedef enum host_json_type { HOST_JSON_NULL, HOST_JSON_NUMBER, HOST_JSON_STRING } host_json_type;

typedef struct host_json_field {
    const char *key;    /* UTF-8, decoded */
    host_json_type type;
    double number;      /* HOST_JSON_NUMBER */
    const char *string; /* HOST_JSON_STRING, decoded */
} host_json_field;

/* One line's object. Keys and strings point into `text`, which the
 * record owns. */
typedef struct host_json_record {
    host_json_field *fields;
    int count;
    char *text;
} host_json_record;

/* Parses one line (no newline) into *rec; on error the message names the
 * 1-based column: "column 12: expected ':' after a key". */
sc_status host_json_record_parse(const char *line, host_json_record *rec);
void host_json_record_free(host_json_record *rec);

/* The field named key, or NULL. */
const host_json_field *host_json_record_get(const host_json_record *rec, const char *key);

typedef struct host_jsonl_file {
    host_json_record *records;
    int count;
} host_jsonl_file;

/* Reads every complete line of path; errors read "PATH:LINE:COLUMN: ...". */
sc_status host_jsonl_read(const char *path, host_jsonl_file *file);
void host_jsonl_free(host_jsonl_file *file);

/* Writes s as a JSON string as serde_json writes one: quotes, backslashes
 * and control characters escaped, everything else (UTF-8 too) as it is. */
void host_json_put_string(FILE *f, const char *s);

#endif
