/* scorch/csv.h — one CSV row of numbers as a dataset plugin's raw input
 * (index_decode, scorch/plugin.h), for datasets whose sample input is a
 * vector of features; and CSV fields written as RFC 4180 quotes them.
 *
 * The row: n fields separated by commas, each a finite decimal number
 * (strtod's syntax: "1", "-0.5", "2e-3"), with spaces or tabs around it
 * allowed, ended by at most one line break ("\n" or "\r\n"). A file
 * given as the input holds that one row. Refused, with a message naming
 * the file of a path: a media type other than "text/csv", fewer or more
 * than n fields, a field that is empty or no finite number (a header
 * row), a second row, an unreadable file, and a file over 1 MiB + 64
 * bytes per field.
 */
#ifndef SCORCH_CSV_H
#define SCORCH_CSV_H

#include <stdint.h>
#include <stdio.h>

#include "scorch/export.h"
#include "scorch/plugin.h"
#include "scorch/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reads the row of `raw` (its file, or its bytes) into values[0..n-1];
 * values is left alone on a refusal. A NULL media type is taken as CSV. */
SC_API sc_status sc_csv_read_row(const sc_raw_input *raw, float *values, int64_t n);

/* Writes text to f as one CSV field: as it is, or in double quotes (a
 * quote doubled) when it holds a comma, a quote or a line break. */
SC_API void sc_csv_write_field(FILE *f, const char *text);

#ifdef __cplusplus
}
#endif
#endif
