/* The safetensors reader and writer (host/base/safetensors.h): round
 * trips, the reference writer's exact bytes, dtype conversions, and a
 * hostile file per fault, each refused with a message naming the file. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/safetensors.h"

static char dir[64];

static void make_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/scorch-st-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

static void remove_dir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(safetensors, .init = make_dir, .fini = remove_dir);

static const char *in_dir(const char *name)
{
    static char path[4][128];
    static int next;
    char *p = path[next++ % 4];
    snprintf(p, sizeof path[0], "%s/%s", dir, name);
    return p;
}

/* A file of the 8-byte length `header_len`, `header` and `data_size`
 * zero bytes of data. */
static const char *write_raw(uint64_t header_len, const char *header, size_t data_size)
{
    const char *path = in_dir("raw.safetensors");
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    for (int i = 0; i < 8; i++)
        fputc((int)((header_len >> (8 * i)) & 0xff), f);
    fwrite(header, 1, strlen(header), f);
    for (size_t i = 0; i < data_size; i++)
        fputc(0, f);
    cr_assert_eq(fclose(f), 0);
    return path;
}

static const char *write_header(const char *header, size_t data_size)
{
    return write_raw(strlen(header), header, data_size);
}

static sc_tensor tensor_of(sc_dtype dtype, int ndim, const int64_t *shape, void *data)
{
    sc_tensor t;
    cr_assert_eq(sc_tensor_init(&t, dtype, ndim, shape), SC_OK, "%s", sc_error_message());
    t.data = data;
    return t;
}

static char *read_bytes(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f);
    fseek(f, 0, SEEK_END);
    *size = (size_t)ftell(f);
    rewind(f);
    char *bytes = malloc(*size + 1);
    cr_assert_eq(fread(bytes, 1, *size, f), *size);
    bytes[*size] = '\0';
    fclose(f);
    return bytes;
}

Test(safetensors, round_trip_keeps_names_shapes_values_and_metadata)
{
    float w[6] = {1, -2, 3.5f, 0, 1e-30f, -7}, b[2] = {0.25f, -0.5f}, s = 42;
    sc_tensor tw = tensor_of(SC_F32, 2, (int64_t[]){2, 3}, w);
    sc_tensor tb = tensor_of(SC_F32, 1, (int64_t[]){2}, b);
    sc_tensor ts = tensor_of(SC_F32, 0, NULL, &s);
    host_safetensors_entry entries[] = {{"layer.weight", &tw}, {"layer.bias", &tb},
                                        {"scale", &ts}};
    host_safetensors_meta meta[] = {{"scorch_model", "mlp"}, {"quote", "a \"b\"\n\\ é"}};
    const char *path = in_dir("model.safetensors");
    cr_assert_eq(host_safetensors_write(path, entries, 3, meta, 2), SC_OK, "%s",
                 sc_error_message());
    cr_assert_neq(access(in_dir("model.safetensors.tmp"), F_OK), 0, "the temporary file stays");

    host_safetensors *st;
    cr_assert_eq(host_safetensors_open(path, &st), SC_OK, "%s", sc_error_message());
    cr_assert_eq(host_safetensors_count(st), 3);
    /* same dtype: sorted by name, as the reference writer does */
    cr_assert_str_eq(host_safetensors_at(st, 0)->name, "layer.bias");
    cr_assert_str_eq(host_safetensors_at(st, 1)->name, "layer.weight");
    cr_assert_str_eq(host_safetensors_at(st, 2)->name, "scale");
    const host_safetensors_tensor *t = host_safetensors_find(st, "layer.weight");
    cr_assert_not_null(t);
    cr_assert_eq(t->dtype, HOST_SAFETENSORS_F32);
    cr_assert_eq(t->ndim, 2);
    cr_assert_eq(t->shape[0], 2);
    cr_assert_eq(t->shape[1], 3);
    float got[6];
    cr_assert_eq(host_safetensors_read_f32(t, got), SC_OK);
    cr_assert_arr_eq(got, w, sizeof w);
    t = host_safetensors_find(st, "scale");
    cr_assert_eq(t->ndim, 0);
    cr_assert_eq(t->numel, 1);
    cr_assert_eq(host_safetensors_read_f32(t, got), SC_OK);
    cr_assert_eq(got[0], 42);
    cr_assert_null(host_safetensors_find(st, "missing"));
    cr_assert_str_eq(host_safetensors_metadata(st, "scorch_model"), "mlp");
    cr_assert_str_eq(host_safetensors_metadata(st, "quote"), "a \"b\"\n\\ é");
    cr_assert_null(host_safetensors_metadata(st, "other"));
    host_safetensors_close(st);
}

/* The bytes safetensors.torch.save writes for the same tensors (its
 * version 0.8.0): widest dtype first, then by name; the header padded with
 * spaces to a multiple of 8; the data back to back. */
Test(safetensors, writes_the_reference_writers_bytes)
{
    int64_t a[3] = {1, -2, 3};
    float b[4] = {1, 2, 3, 4};
    uint8_t c[5] = {9, 8, 7, 6, 5};
    int32_t d[1] = {-1};
    sc_tensor ta = tensor_of(SC_I64, 1, (int64_t[]){3}, a);
    sc_tensor tb = tensor_of(SC_F32, 2, (int64_t[]){2, 2}, b);
    sc_tensor tc = tensor_of(SC_U8, 1, (int64_t[]){5}, c);
    sc_tensor td = tensor_of(SC_I32, 1, (int64_t[]){1}, d);
    host_safetensors_entry entries[] = {{"c", &tc}, {"b", &tb}, {"d", &td}, {"a", &ta}};
    const char *path = in_dir("ref.safetensors");
    cr_assert_eq(host_safetensors_write(path, entries, 4, NULL, 0), SC_OK, "%s",
                 sc_error_message());
    static const char header[] =
        "{\"a\":{\"dtype\":\"I64\",\"shape\":[3],\"data_offsets\":[0,24]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[24,40]},"
        "\"d\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[40,44]},"
        "\"c\":{\"dtype\":\"U8\",\"shape\":[5],\"data_offsets\":[44,49]}}   ";
    size_t n = sizeof header - 1, size;
    char *bytes = read_bytes(path, &size);
    cr_assert_eq(size, 8 + n + 49);
    cr_assert_eq((unsigned char)bytes[0], n);
    cr_assert_eq(memcmp(bytes + 8, header, n), 0, "header:\n%.*s", (int)n, bytes + 8);
    cr_assert_eq(memcmp(bytes + 8 + n, a, 24), 0);
    cr_assert_eq(memcmp(bytes + 8 + n + 24, b, 16), 0);
    cr_assert_eq(memcmp(bytes + 8 + n + 40, d, 4), 0);
    cr_assert_eq(memcmp(bytes + 8 + n + 44, c, 5), 0);
    free(bytes);
}

Test(safetensors, converts_f16_bf16_and_f64_to_f32)
{
    /* F16: 1, -2, 65504, 2^-24 (the least subnormal), inf; BF16: 1, -0.5;
     * F64: 0.1, -3 */
    static const unsigned char data[] = {
        0x00, 0x3c, 0x00, 0xc0, 0xff, 0x7b, 0x01, 0x00, 0x00, 0x7c,
        0x80, 0x3f, 0x00, 0xbf,
        0x9a, 0x99, 0x99, 0x99, 0x99, 0x99, 0xb9, 0x3f, 0, 0, 0, 0, 0, 0, 0x08, 0xc0,
    };
    const char *header = "{\"h\":{\"dtype\":\"F16\",\"shape\":[5],\"data_offsets\":[0,10]},"
                         "\"b\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[10,14]},"
                         "\"d\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[14,30]}}";
    const char *path = write_header(header, 0);
    FILE *f = fopen(path, "ab");
    fwrite(data, 1, sizeof data, f);
    fclose(f);
    host_safetensors *st;
    cr_assert_eq(host_safetensors_open(path, &st), SC_OK, "%s", sc_error_message());
    float v[5];
    cr_assert_eq(host_safetensors_read_f32(host_safetensors_find(st, "h"), v), SC_OK);
    cr_assert_eq(v[0], 1.0f);
    cr_assert_eq(v[1], -2.0f);
    cr_assert_eq(v[2], 65504.0f);
    cr_assert_eq(v[3], ldexpf(1, -24));
    cr_assert(isinf(v[4]) && v[4] > 0);
    cr_assert_eq(host_safetensors_read_f32(host_safetensors_find(st, "b"), v), SC_OK);
    cr_assert_eq(v[0], 1.0f);
    cr_assert_eq(v[1], -0.5f);
    cr_assert_eq(host_safetensors_read_f32(host_safetensors_find(st, "d"), v), SC_OK);
    cr_assert_eq(v[0], (float)0.1);
    cr_assert_eq(v[1], -3.0f);
    host_safetensors_close(st);
}

/* A file may hold any of the reference's dtypes (PyTorch's
 * num_batches_tracked is I64); loading one as f32 is refused by name. */
Test(safetensors, other_dtypes_open_but_do_not_load_as_f32)
{
    const char *path = write_header(
        "{\"n\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[0,8]},"
        "\"q\":{\"dtype\":\"F8_E4M3\",\"shape\":[2],\"data_offsets\":[8,10]},"
        "\"f\":{\"dtype\":\"F4\",\"shape\":[2],\"data_offsets\":[10,11]}}", 11);
    host_safetensors *st;
    cr_assert_eq(host_safetensors_open(path, &st), SC_OK, "%s", sc_error_message());
    float v[2];
    cr_assert_neq(host_safetensors_read_f32(host_safetensors_find(st, "n"), v), SC_OK);
    cr_assert(strstr(sc_error_message(), "tensor 'n' is I64: only F32, F16, BF16 and F64"),
              "%s", sc_error_message());
    cr_assert_neq(host_safetensors_read_f32(host_safetensors_find(st, "q"), v), SC_OK);
    cr_assert(strstr(sc_error_message(), "is F8_E4M3"), "%s", sc_error_message());
    cr_assert_not(host_safetensors_loads_as_f32(HOST_SAFETENSORS_F4));
    host_safetensors_close(st);
}

Test(safetensors, an_empty_file_of_tensors_round_trips)
{
    const char *path = in_dir("empty.safetensors");
    cr_assert_eq(host_safetensors_write(path, NULL, 0, NULL, 0), SC_OK, "%s",
                 sc_error_message());
    host_safetensors *st;
    cr_assert_eq(host_safetensors_open(path, &st), SC_OK, "%s", sc_error_message());
    cr_assert_eq(host_safetensors_count(st), 0);
    host_safetensors_close(st);
}

typedef struct hostile {
    const char *what;
    const char *header;
    size_t data;
    const char *message;
} hostile;

/* A member of the header: an F32 tensor. */
#define T(name, dims, offsets) \
    "\"" name "\":{\"dtype\":\"F32\",\"shape\":" dims ",\"data_offsets\":" offsets "}"

static const hostile cases[] = {
    {"not an object", "[]", 0, "header byte 0: expected '{' starting the header"},
    {"unclosed", "{", 0, "expected a string"},
    {"no colon", "{\"a\" 1}", 0, "expected ':'"},
    {"text after", "{} x", 0, "text after the header's object"},
    {"trailing NUL padding", "{}\0", 0, "text after"},
    {"unknown dtype", "{\"a\":{\"dtype\":\"Q8\",\"shape\":[],\"data_offsets\":[0,0]}}", 0,
     "tensor 'a': header byte 14: unknown dtype 'Q8'"},
    {"dtype not a string", "{\"a\":{\"dtype\":7,\"shape\":[],\"data_offsets\":[0,0]}}", 0,
     "expected a string"},
    {"2^40 elements", "{" T("a", "[1048576,1048577]", "[0,4]") "}", 4,
     "a shape of more than 2^40 elements"},
    {"a huge dimension", "{" T("a", "[1099511627777]", "[0,4]") "}", 4,
     "a shape of more than 2^40 elements"},
    {"an overflowing count",
     "{" T("a", "[4294967296,4294967296,4294967296]", "[0,4]") "}", 4,
     "a shape of more than 2^40 elements"},
    {"negative dimension", "{" T("a", "[-1]", "[0,4]") "}", 4, "a dimension is negative"},
    {"fractional dimension", "{" T("a", "[2.0]", "[0,8]") "}", 8,
     "a dimension is not a whole"},
    {"exponent dimension", "{" T("a", "[2e0]", "[0,8]") "}", 8, "a dimension is not a whole"},
    {"leading zero", "{" T("a", "[02]", "[0,8]") "}", 8, "a dimension has a leading zero"},
    {"nine dimensions", "{" T("a", "[1,1,1,1,1,1,1,1,1]", "[0,4]") "}", 4,
     "a shape of more than 8 dimensions"},
    {"offset past 2^63", "{" T("a", "[1]", "[0,9223372036854775808]") "}", 4,
     "larger than 2^63 - 1"},
    {"three offsets", "{" T("a", "[1]", "[0,4,8]") "}", 4, "data_offsets hold more than two"},
    {"one offset", "{" T("a", "[1]", "[0]") "}", 4, "expected ',' and the end offset"},
    {"offsets out of range", "{" T("a", "[1000]", "[0,4000]") "}", 100,
     "tensor 'a': data_offsets [0, 4000] run past the end of the data (100 bytes after the "
     "header)"},
    {"offsets not dtype x shape", "{" T("a", "[2, 3]", "[0,20]") "}", 20,
     "tensor 'a': data_offsets [0, 20] hold 20 bytes, but F32 [2, 3] takes 24"},
    {"end before begin", "{" T("a", "[1]", "[8,4]") "}", 8, "end before they begin"},
    {"overlapping", "{" T("a", "[2]", "[0,8]") "," T("b", "[2]", "[4,12]") "}", 12,
     "tensor 'b': data_offsets [4, 12] overlap those of tensor 'a' [0, 8]"},
    {"identical offsets", "{" T("a", "[2]", "[0,8]") "," T("b", "[2]", "[0,8]") "}", 8,
     "overlap"},
    {"a hole", "{" T("a", "[2]", "[0,8]") "," T("b", "[2]", "[12,20]") "}", 20,
     "a hole of 4 unused bytes (data bytes 8 to 12) before tensor 'b'"},
    {"a hole at the start", "{" T("a", "[2]", "[4,12]") "}", 12, "a hole of 4 unused bytes"},
    {"bytes after the data", "{" T("a", "[2]", "[0,8]") "}", 12,
     "4 bytes after the last tensor's data"},
    {"a name twice", "{" T("a", "[2]", "[0,8]") "," T("a", "[2]", "[8,16]") "}", 16,
     "tensor 'a' is given twice"},
    {"a field twice",
     "{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}", 4,
     "field 'dtype' given twice"},
    {"no shape", "{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "no shape"},
    {"no offsets", "{\"a\":{\"dtype\":\"F32\",\"shape\":[]}}", 4, "no data_offsets"},
    {"unknown field", "{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4],\"x\":1}}",
     4, "unknown field 'x'"},
    {"sub-byte tensor", "{\"a\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}", 2,
     "F4 [3] is 12 bits, not whole bytes"},
    {"metadata not strings", "{\"__metadata__\":{\"k\":1}}", 0,
     "__metadata__ values must be strings"},
    {"metadata twice", "{\"__metadata__\":{},\"__metadata__\":{}}", 0,
     "__metadata__ given twice"},
    {"metadata key twice", "{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0,
     "__metadata__ key 'k' is given twice"},
    {"NUL in a name", "{\"a\\u0000b\":{}}", 0, "a NUL character"},
    {"lone surrogate", "{\"\\ud800\":{}}", 0, "a high surrogate"},
    {"bad escape", "{\"\\x\":{}}", 0, "an unknown escape"},
    {"control character", "{\"a\tb\":{}}", 0, "a control character in a string"},
    {"unclosed string", "{\"abc", 0, "the string is not closed"},
    {"not UTF-8", "{\"\xff\":{}}", 0, "header byte 2: not UTF-8"},
    {"overlong UTF-8", "{\"\xc0\xaf\":{}}", 0, "not UTF-8"},
};

Test(safetensors, hostile_files_are_refused_with_a_message)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const hostile *c = &cases[i];
        size_t len = strlen(c->header) + (strcmp(c->what, "trailing NUL padding") == 0);
        const char *path = in_dir("raw.safetensors");
        write_raw(len, c->header, 0);
        if (len > strlen(c->header)) { /* the NUL itself */
            FILE *f = fopen(path, "ab");
            fputc(0, f);
            fclose(f);
        }
        FILE *f = fopen(path, "ab");
        for (size_t k = 0; k < c->data; k++)
            fputc(0, f);
        fclose(f);
        host_safetensors *st = NULL;
        sc_status status = host_safetensors_open(path, &st);
        cr_expect_eq(status, SC_ERR_FORMAT, "%s: opened (%d)", c->what, status);
        cr_expect_null(st, "%s", c->what);
        const char *msg = sc_error_message();
        cr_expect(strncmp(msg, path, strlen(path)) == 0 && strstr(msg, c->message),
                  "%s: expected '%s' in\n  %s", c->what, c->message, msg);
    }
}

Test(safetensors, header_lengths_past_the_file_or_the_limit_are_refused)
{
    host_safetensors *st;
    const char *path = write_raw(1000, "{}", 10);
    cr_assert_eq(host_safetensors_open(path, &st), SC_ERR_FORMAT);
    cr_assert(strstr(sc_error_message(), "its header length 1000 runs past the end of the "
                     "file (20 bytes)"), "%s", sc_error_message());
    path = write_raw(UINT64_MAX, "{}", 0);
    cr_assert_eq(host_safetensors_open(path, &st), SC_ERR_FORMAT);
    cr_assert(strstr(sc_error_message(), "is over the limit of 100,000,000 bytes"), "%s",
              sc_error_message());
    path = in_dir("short.safetensors");
    FILE *f = fopen(path, "wb");
    fwrite("\x02\0\0", 1, 3, f);
    fclose(f);
    cr_assert_eq(host_safetensors_open(path, &st), SC_ERR_FORMAT);
    cr_assert(strstr(sc_error_message(), "3 bytes, too short"), "%s", sc_error_message());
    cr_assert_eq(host_safetensors_open(in_dir("absent"), &st), SC_ERR_IO);
    cr_assert(strstr(sc_error_message(), "No such file"), "%s", sc_error_message());
    cr_assert_eq(host_safetensors_open(dir, &st), SC_ERR_IO);
    cr_assert(strstr(sc_error_message(), "not a regular file"), "%s", sc_error_message());
}

/* Bytes flipped, the header length changed and the file cut short, at
 * random: every variant opens or is refused; none crashes (run it under
 * the sanitizers to see reads stay in bounds). */
Test(safetensors, random_damage_never_crashes)
{
    float w[12] = {0};
    sc_tensor tw = tensor_of(SC_F32, 2, (int64_t[]){3, 4}, w);
    sc_tensor tb = tensor_of(SC_F32, 1, (int64_t[]){3}, w);
    host_safetensors_entry entries[] = {{"fc1.weight", &tw}, {"fc1.bias", &tb}};
    host_safetensors_meta meta[] = {{"k", "v"}};
    const char *good = in_dir("good.safetensors"), *bad = in_dir("bad.safetensors");
    cr_assert_eq(host_safetensors_write(good, entries, 2, meta, 1), SC_OK);
    size_t size;
    char *bytes = read_bytes(good, &size);
    srand(7);
    for (int i = 0; i < 3000; i++) {
        char *copy = malloc(size);
        memcpy(copy, bytes, size);
        size_t cut = i % 10 == 0 ? (size_t)rand() % size : size;
        for (int k = 0; k < 1 + rand() % 3; k++)
            copy[(size_t)rand() % (i % 3 == 0 ? 8 : size)] ^= (char)(1 << rand() % 8);
        FILE *f = fopen(bad, "wb");
        fwrite(copy, 1, cut, f);
        fclose(f);
        free(copy);
        host_safetensors *st = NULL;
        if (host_safetensors_open(bad, &st) == SC_OK) {
            for (int k = 0; k < host_safetensors_count(st); k++) {
                const host_safetensors_tensor *t = host_safetensors_at(st, k);
                float *v = malloc((size_t)(t->numel ? t->numel : 1) * sizeof *v);
                if (host_safetensors_loads_as_f32(t->dtype))
                    cr_assert_eq(host_safetensors_read_f32(t, v), SC_OK);
                free(v);
            }
            host_safetensors_close(st);
        } else {
            cr_assert(strstr(sc_error_message(), bad), "%s", sc_error_message());
        }
    }
    free(bytes);
}

Test(safetensors, the_writer_refuses_bad_names)
{
    float v = 1;
    sc_tensor t = tensor_of(SC_F32, 0, NULL, &v);
    const char *path = in_dir("w.safetensors");
    host_safetensors_entry twice[] = {{"a", &t}, {"a", &t}};
    cr_assert_eq(host_safetensors_write(path, twice, 2, NULL, 0), SC_ERR_INVALID);
    cr_assert(strstr(sc_error_message(), "'a' given twice"), "%s", sc_error_message());
    host_safetensors_entry empty[] = {{"", &t}};
    cr_assert_eq(host_safetensors_write(path, empty, 1, NULL, 0), SC_ERR_INVALID);
    host_safetensors_entry latin1[] = {{"caf\xe9", &t}};
    cr_assert_eq(host_safetensors_write(path, latin1, 1, NULL, 0), SC_ERR_INVALID);
    cr_assert(strstr(sc_error_message(), "UTF-8"), "%s", sc_error_message());
    host_safetensors_entry meta_name[] = {{"__metadata__", &t}};
    cr_assert_eq(host_safetensors_write(path, meta_name, 1, NULL, 0), SC_ERR_INVALID);
    host_safetensors_meta keys[] = {{"k", "1"}, {"k", "2"}};
    host_safetensors_entry one[] = {{"a", &t}};
    cr_assert_eq(host_safetensors_write(path, one, 1, keys, 2), SC_ERR_INVALID);
    cr_assert_neq(access(path, F_OK), 0, "a refused write leaves no file");
    cr_assert_eq(host_safetensors_write(in_dir("no/such/dir.safetensors"), one, 1, NULL, 0),
                 SC_ERR_IO);
    cr_assert(strstr(sc_error_message(), "no/such/dir.safetensors"), "%s", sc_error_message());
}
