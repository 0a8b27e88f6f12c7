/* The strict metrics.jsonl reader (host/base/jsonl.h). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/jsonl.h"

Test(jsonl, flat_record_with_every_value_kind)
{
    host_json_record rec;
    const char *line = " {\"epoch\":3, \"phase\" : \"valid\",\"loss\":-1.5e-3,\"acc\":null,"
                       "\"n\":0,\"big\":12345678901234,\"tag\":\"a\\\"b\\\\c\\/\\n\\u00e9\\ud83d\\ude00\"} ";
    cr_assert_eq(host_json_record_parse(line, &rec), SC_OK, "%s", sc_error_message());
    cr_assert_eq(rec.count, 7);
    cr_assert_eq(host_json_record_get(&rec, "epoch")->number, 3);
    cr_assert_str_eq(host_json_record_get(&rec, "phase")->string, "valid");
    cr_assert_float_eq(host_json_record_get(&rec, "loss")->number, -1.5e-3, 1e-15);
    cr_assert_eq(host_json_record_get(&rec, "acc")->type, HOST_JSON_NULL);
    cr_assert_eq(host_json_record_get(&rec, "n")->number, 0);
    cr_assert_eq(host_json_record_get(&rec, "big")->number, 12345678901234.0);
    cr_assert_str_eq(host_json_record_get(&rec, "tag")->string,
                     "a\"b\\c/\n\xc3\xa9\xf0\x9f\x98\x80");
    cr_assert_null(host_json_record_get(&rec, "missing"));
    host_json_record_free(&rec);
    cr_assert_eq(host_json_record_parse("{}", &rec), SC_OK);
    cr_assert_eq(rec.count, 0);
    host_json_record_free(&rec);
}

/* Each bad line fails, with a message naming the column and the fault. */
Test(jsonl, malformed_lines_are_named_by_column)
{
    static const struct {
        const char *line, *message;
    } cases[] = {
        {"", "column 1: expected '{'"},
        {"[1]", "column 1: expected '{'"},
        {"{\"a\":1,}", "column 8: expected a key"},
        {"{\"a\":1", "column 7: expected ',' or '}'"},
        {"{\"a\" 1}", "column 6: expected ':'"},
        {"{\"a\":{\"b\":1}}", "column 6: only strings, numbers and null"},
        {"{\"a\":[1]}", "column 6: only strings, numbers and null"},
        {"{\"a\":true}", "column 6: only strings, numbers and null"},
        {"{\"a\":01}", "column 6: a number with a leading zero"},
        {"{\"a\":1.}", "column 8: expected a digit after the decimal point"},
        {"{\"a\":1e}", "column 8: expected a digit in the exponent"},
        {"{\"a\":NaN}", "column 6: expected a value"},
        {"{\"a\":1,\"a\":2}", "column 8: a key given twice"},
        {"{\"a\":1} x", "column 9: text after the object"},
        {"{\"a\":\"x}", "column 9: the string is not closed"},
        {"{\"a\":\"\\x\"}", "column 8: unknown escape"},
        {"{\"a\":\"\\u12\"}", "expected four hex digits"},
        {"{\"a\":\"\\ud800\"}", "a high surrogate"},
        {"{\"a\":\"\\u0000\"}", "NUL character"},
        {"{\"a\":\"\t\"}", "column 7: a control character"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        host_json_record rec;
        cr_assert_eq(host_json_record_parse(cases[i].line, &rec), SC_ERR_FORMAT, "accepted %s",
                     cases[i].line);
        cr_assert(strstr(sc_error_message(), cases[i].message), "%s: got '%s', want '%s'",
                  cases[i].line, sc_error_message(), cases[i].message);
    }
}

static void write_temp(char *path, const char *text)
{
    strcpy(path, "/tmp/scorch-jsonl-XXXXXX");
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

Test(jsonl, file_skips_the_line_still_being_written)
{
    char path[64];
    write_temp(path, "{\"epoch\":1}\n{\"epoch\":2}\n{\"epoch\":3,\"lo");
    host_jsonl_file file;
    cr_assert_eq(host_jsonl_read(path, &file), SC_OK, "%s", sc_error_message());
    cr_assert_eq(file.count, 2);
    cr_assert_eq(host_json_record_get(&file.records[1], "epoch")->number, 2);
    host_jsonl_free(&file);
    unlink(path);
}

Test(jsonl, file_errors_name_path_and_line)
{
    char path[64], want[128];
    write_temp(path, "{\"epoch\":1}\n{\"epoch\":2,}\n");
    host_jsonl_file file;
    cr_assert_eq(host_jsonl_read(path, &file), SC_ERR_FORMAT);
    snprintf(want, sizeof want, "%s:2: column 12: expected a key", path);
    cr_assert(strstr(sc_error_message(), want), "%s", sc_error_message());
    unlink(path);
    cr_assert_eq(host_jsonl_read("/nonexistent/metrics.jsonl", &file), SC_ERR_IO);
    cr_assert(strstr(sc_error_message(), "cannot read /nonexistent/metrics.jsonl"));
}
