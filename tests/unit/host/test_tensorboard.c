/* TensorBoard writer: CRC-32C, protobuf encoding, TFRecord framing, the
 * events against bytes the tensorboard package's own protobuf classes
 * produce, histograms, PNG images, the failure policy, and the options.
 * (tests/integration/tensorboard_roundtrip.py reads real runs back.) */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <math.h>
#include <png.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/config.h"
#include "observe/png_image.h"
#include "scorch_host/params.h"
#include "observe/tensorboard.h"
#include "observe/tfrecord.h"

/* ---- helpers ---- */

static void expect_bytes(const uint8_t *got, size_t got_len, const char *hex)
{
    size_t n = strlen(hex) / 2;
    cr_assert_eq(got_len, n, "%zu bytes, expected %zu", got_len, n);
    for (size_t i = 0; i < n; i++) {
        unsigned byte;
        sscanf(hex + 2 * i, "%2x", &byte);
        cr_assert_eq(got[i], byte, "byte %zu: %02x, expected %02x", i, got[i], byte);
    }
}

static void expect_pb(host_pb *b, const char *hex)
{
    cr_assert_not(b->failed);
    expect_bytes(b->data, b->len, hex);
    host_pb_reset(b);
}

static bool contains(const uint8_t *data, size_t size, const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i + n <= size; i++)
        if (memcmp(data + i, s, n) == 0)
            return true;
    return false;
}

typedef struct records {
    uint8_t *file;
    size_t size;
    int n;
    const uint8_t *body[64];
    size_t len[64];
} records;

/* Reads a whole event file, checking each record's framing. */
static void read_records(const char *path, records *r)
{
    memset(r, 0, sizeof *r);
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    r->file = malloc(1 << 20);
    r->size = fread(r->file, 1, 1 << 20, f);
    fclose(f);
    for (size_t pos = 0; pos < r->size && r->n < 64; r->n++) {
        uint8_t header[HOST_TFRECORD_HEADER], footer[HOST_TFRECORD_FOOTER];
        uint64_t len = 0;
        for (int i = 0; i < 8; i++)
            len |= (uint64_t)r->file[pos + i] << (8 * i);
        const uint8_t *body = r->file + pos + HOST_TFRECORD_HEADER;
        host_tfrecord_frame(body, len, header, footer);
        cr_assert(memcmp(header, r->file + pos, sizeof header) == 0, "record %d header", r->n);
        cr_assert(memcmp(footer, body + len, sizeof footer) == 0, "record %d data CRC", r->n);
        r->body[r->n] = body;
        r->len[r->n] = len;
        pos += HOST_TFRECORD_HEADER + len + HOST_TFRECORD_FOOTER;
    }
}

/* Record i without its wall time (field 1, 9 bytes), which the clock sets. */
static void expect_event(const records *r, int i, const char *hex_after_wall_time)
{
    cr_assert_lt(i, r->n);
    cr_assert_eq(r->body[i][0], 0x09, "record %d does not start with wall_time", i);
    expect_bytes(r->body[i] + 9, r->len[i] - 9, hex_after_wall_time);
}

static host_tb_writer *open_writer(char *dir, int64_t next_step)
{
    strcpy(dir, "/tmp/scorch-tb-XXXXXX");
    cr_assert(mkdtemp(dir));
    host_tb_writer *w;
    cr_assert_eq(host_tb_open(dir, next_step, &w), SC_OK, "%s", sc_error_message());
    return w;
}

/* Closes w and reads its records. */
static void close_and_read(host_tb_writer *w, records *r)
{
    char path[HOST_PATH_MAX];
    snprintf(path, sizeof path, "%s", host_tb_path(w));
    host_tb_close(w);
    read_records(path, r);
}

/* ---- CRC-32C and framing ---- */

Test(crc32c, known_vectors)
{
    uint8_t zeros[32] = {0}, ones[32];
    memset(ones, 0xff, sizeof ones);
    cr_expect_eq(host_crc32c_compute("123456789", 9), 0xe3069283u);
    cr_expect_eq(host_crc32c_compute(zeros, 32), 0x8a9136aau); /* RFC 3720 B.4 */
    cr_expect_eq(host_crc32c_compute(ones, 32), 0x62a8ab43u);
    cr_expect_eq(host_crc32c_compute("", 0), 0u);
    cr_expect_eq(host_crc32c_mask(0), 0xa282ead8u);
    cr_expect_eq(host_crc32c_mask(0x12345678u), 0x4f730f40u);
    cr_expect_eq(host_crc32c_mask(host_crc32c_compute("123456789", 9)), 0xc78ab0e5u);
}

Test(tfrecord, frame_matches_tensorboard)
{
    uint8_t header[HOST_TFRECORD_HEADER], footer[HOST_TFRECORD_FOOTER];
    host_tfrecord_frame("abc", 3, header, footer);
    /* length 3; masked CRCs as tensorboard's masked_crc32c computes them */
    expect_bytes(header, sizeof header, "0300000000000000b099490e");
    expect_bytes(footer, sizeof footer, "6e57f121");
}

/* ---- protobuf ---- */

Test(protobuf, varints)
{
    host_pb b = {0};
    host_pb_put_varint(&b, 0);
    expect_pb(&b, "00");
    host_pb_put_varint(&b, 127);
    expect_pb(&b, "7f");
    host_pb_put_varint(&b, 128);
    expect_pb(&b, "8001");
    host_pb_put_varint(&b, 300);
    expect_pb(&b, "ac02");
    host_pb_put_varint(&b, UINT64_MAX);
    expect_pb(&b, "ffffffffffffffffff01");
    host_pb_free(&b);
}

Test(protobuf, fields_by_wire_type)
{
    host_pb b = {0};
    host_pb_put_int(&b, 1, 150);
    expect_pb(&b, "089601");
    host_pb_put_int(&b, 2, -1); /* int64: ten bytes */
    expect_pb(&b, "10ffffffffffffffffff01");
    host_pb_put_double(&b, 1, 1.5);
    expect_pb(&b, "09000000000000f83f");
    host_pb_put_float(&b, 2, 0.25f);
    expect_pb(&b, "150000803e");
    host_pb_put_string(&b, 2, "testing");
    expect_pb(&b, "120774657374696e67");
    host_pb_put_packed_doubles(&b, 6, (const double[]){1.0, 2.0}, 2);
    expect_pb(&b, "3210000000000000f03f0000000000000040");
    host_pb_put_int(&b, 16, 1); /* a two-byte key */
    expect_pb(&b, "800101");
    host_pb_free(&b);
}

Test(protobuf, nested_messages_of_any_length)
{
    host_pb b = {0};
    /* Event{wall_time 1.5, step 3, summary{value{tag "a", simple_value 0.25}}} */
    host_pb_put_double(&b, 1, 1.5);
    host_pb_put_int(&b, 2, 3);
    size_t summary = host_pb_open(&b, 5);
    size_t value = host_pb_open(&b, 1);
    host_pb_put_string(&b, 1, "a");
    host_pb_put_float(&b, 2, 0.25f);
    host_pb_close(&b, value);
    host_pb_close(&b, summary);
    expect_pb(&b, "09000000000000f83f10032a0a0a080a0161150000803e");

    /* A body of 203 bytes needs a two-byte length: the body moves. */
    char text[201];
    memset(text, 'x', 200);
    text[200] = '\0';
    size_t outer = host_pb_open(&b, 5);
    host_pb_put_string(&b, 1, text);
    host_pb_close(&b, outer);
    cr_assert_eq(b.len, 1 + 2 + 1 + 2 + 200);
    expect_bytes(b.data, 6, "2acb010ac801");
    for (size_t i = 6; i < b.len; i++)
        cr_assert_eq(b.data[i], 'x');
    host_pb_free(&b);
}

/* ---- events ---- */

Test(tensorboard, events_match_the_tensorboard_protos)
{
    char dir[64];
    host_tb_writer *w = open_writer(dir, 5);
    host_tb_add_scalar(w, "a", 3, 0.25);
    cr_assert_eq(host_tb_add_text(w, "note", 7, "hi"), SC_OK);
    host_tb_add_histogram(w, "h", 7, (const float[]){2, 2, 2}, 3);
    records r;
    close_and_read(w, &r);
    cr_assert_eq(r.n, 5);
    expect_event(&r, 0, "10001a0d627261696e2e4576656e743a32"); /* step 0, "brain.Event:2" */
    expect_event(&r, 1, "10053a020801");                       /* SessionLog START at 5 */
    expect_event(&r, 2, "10032a0a0a080a0161150000803e");
    expect_event(&r, 3, "10072a1a0a180a046e6f746542060807420268694a080a060a0474657874");
    expect_event(&r, 4, "10072a480a460a01682a41090000000000000040110000000000000040190000000"
                        "000000840210000000000001840290000000000002840320800000000000000403a"
                        "080000000000000840");
    free(r.file);
}

Test(tensorboard, a_name_taken_in_the_same_second_gets_a_suffix)
{
    char dir[64];
    host_tb_writer *a = open_writer(dir, 1), *b;
    cr_assert_eq(host_tb_open(dir, 1, &b), SC_OK, "%s", sc_error_message());
    cr_assert_str_neq(host_tb_path(a), host_tb_path(b));
    cr_expect(strstr(host_tb_path(a), "/events.out.tfevents."), "%s", host_tb_path(a));
    host_tb_close(a);
    host_tb_close(b);
}

Test(tensorboard, params_and_the_gradients_that_train)
{
    sc_params *ps = sc_params_new();
    sc_tensor *wt = sc_params_add(ps, "layer.weight", 2, (const int64_t[]){2, 3});
    sc_tensor *frozen = sc_params_add(ps, "layer.frozen", 1, (const int64_t[]){4});
    cr_assert(wt && frozen);
    sc_params_set_trainable(frozen, false);
    for (int64_t i = 0; i < sc_params_numel(ps); i++) {
        sc_params_values(ps)[i] = (float)i;
        sc_params_grads(ps)[i] = -(float)i;
    }
    char dir[64];
    host_tb_writer *w = open_writer(dir, 1);
    host_tb_log_params(w, ps, sc_params_values(ps), sc_params_grads(ps), 9);
    records r;
    close_and_read(w, &r);
    cr_assert_eq(r.n, 2 + 3, "params/ of both, grads/ of the trainable one");
    const char *tags[] = {"params/layer.weight", "grads/layer.weight", "params/layer.frozen"};
    for (int i = 0; i < 3; i++)
        cr_expect(contains(r.body[2 + i], r.len[2 + i], tags[i]), "%s", tags[i]);
    free(r.file);
    sc_params_free(ps);
}

/* ---- histograms ---- */

Test(histogram, equal_width_buckets_over_the_finite_values)
{
    float v[32];
    for (int i = 0; i < 30; i++)
        v[i] = (float)(29 - i);
    v[30] = NAN;
    v[31] = INFINITY;
    host_tb_histogram h;
    host_tb_histogram_compute(v, 32, &h);
    cr_expect_eq(h.num, 30);
    cr_expect_eq(h.min, 0);
    cr_expect_eq(h.max, 29);
    cr_expect_eq(h.sum, 435);
    cr_expect_eq(h.sum_squares, 8555);
    cr_assert_eq(h.buckets, HOST_TB_BUCKETS);
    cr_expect_eq(h.limit[HOST_TB_BUCKETS - 1], 29);
    for (int i = 0; i < HOST_TB_BUCKETS; i++)
        cr_expect_eq(h.count[i], 1, "bucket %d holds %g", i, h.count[i]);
}

Test(histogram, equal_values_make_one_bucket_and_none_make_nothing)
{
    host_tb_histogram h;
    host_tb_histogram_compute((const float[]){-2, -2}, 2, &h);
    cr_expect_eq(h.buckets, 1);
    cr_expect_eq(h.limit[0], -2);
    cr_expect_eq(h.count[0], 2);
    host_tb_histogram_compute((const float[]){NAN}, 1, &h);
    cr_expect_eq(h.num, 0);
    cr_expect_eq(h.buckets, 0);
}

/* ---- images ---- */

static sc_tensor image_of(sc_dtype dtype, int ndim, const int64_t *shape, void *data)
{
    sc_tensor t;
    cr_assert_eq(sc_tensor_init(&t, dtype, ndim, shape), SC_OK);
    t.data = data;
    return t;
}

Test(png, rgb_f32_planes_decode_to_the_same_pixels)
{
    float planes[3 * 2 * 2] = {0, 0.5f, 1, 2, /* R: clamped above 1 */
                               0, 0, 0, 0,    /* G */
                               NAN, 1, -1, 0.25f}; /* B: NaN and below 0 are 0 */
    sc_tensor t = image_of(SC_F32, 3, (const int64_t[]){3, 2, 2}, planes);
    host_png out = {0};
    cr_assert_eq(host_png_encode(&t, &out), SC_OK, "%s", sc_error_message());
    cr_expect_eq(out.channels, 3);
    png_image img = {.version = PNG_IMAGE_VERSION};
    cr_assert(png_image_begin_read_from_memory(&img, out.data, out.len), "%s", img.message);
    cr_expect_eq(img.width, 2);
    cr_expect_eq(img.height, 2);
    img.format = PNG_FORMAT_RGB;
    uint8_t px[12];
    cr_assert(png_image_finish_read(&img, NULL, px, 0, NULL), "%s", img.message);
    const uint8_t want[12] = {0, 0, 0, 128, 0, 255, 255, 0, 0, 255, 0, 64};
    for (int k = 0; k < 12; k++)
        cr_expect_eq(px[k], want[k], "byte %d: %d, expected %d", k, px[k], want[k]);
    host_png_free(&out);
}

Test(png, grey_u8_keeps_its_values)
{
    uint8_t grey[2 * 3] = {0, 1, 2, 253, 254, 255};
    sc_tensor t = image_of(SC_U8, 2, (const int64_t[]){2, 3}, grey);
    host_png out = {0};
    cr_assert_eq(host_png_encode(&t, &out), SC_OK, "%s", sc_error_message());
    png_image img = {.version = PNG_IMAGE_VERSION};
    cr_assert(png_image_begin_read_from_memory(&img, out.data, out.len), "%s", img.message);
    cr_expect_eq(img.width, 3);
    cr_expect_eq(img.height, 2);
    cr_expect_eq(img.format & PNG_FORMAT_FLAG_COLOR, 0u, "not grey");
    img.format = PNG_FORMAT_GRAY;
    uint8_t px[6];
    cr_assert(png_image_finish_read(&img, NULL, px, 0, NULL), "%s", img.message);
    cr_expect(memcmp(px, grey, 6) == 0);
    host_png_free(&out);
}

Test(png, what_is_no_image_is_named)
{
    uint8_t data[64] = {0};
    struct {
        sc_dtype dtype;
        int ndim;
        int64_t shape[3];
        const char *says;
    } bad[] = {
        {SC_I32, 2, {2, 2}, "wrong dtype: got i32 [2, 2]"},
        {SC_U8, 1, {4}, "wrong number of dimensions"},
        {SC_U8, 3, {2, 2, 2}, "wrong number of channels"},
        {SC_U8, 3, {4, 2, 2}, "wrong number of channels"},
        {SC_F32, 2, {0, 3}, "no pixels"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        sc_tensor t = image_of(bad[i].dtype, bad[i].ndim, bad[i].shape, data);
        host_png out = {0};
        cr_expect_eq(host_png_encode(&t, &out), SC_ERR_INVALID, "case %zu", i);
        cr_expect(strstr(sc_error_message(), bad[i].says), "case %zu: %s", i,
                  sc_error_message());
    }
    sc_tensor gpu = image_of(SC_U8, 2, (const int64_t[]){2, 2}, data);
    gpu.device.kind = SC_DEVICE_CUDA;
    int c, h, w;
    cr_expect_eq(host_png_check(&gpu, &c, &h, &w), SC_ERR_INVALID);
    cr_expect(strstr(sc_error_message(), "not on the CPU"), "%s", sc_error_message());
}

/* ---- arguments and a writer that is off ---- */

Test(tensorboard, plugin_arguments_are_checked_even_when_off)
{
    uint8_t px[4] = {0};
    sc_tensor ok = image_of(SC_U8, 2, (const int64_t[]){2, 2}, px);
    sc_tensor bad = image_of(SC_I64, 2, (const int64_t[]){2, 2}, px);
    cr_expect_eq(host_tb_add_image(NULL, "img", 1, &ok), SC_OK);
    cr_expect_eq(host_tb_add_image(NULL, "img", 1, &bad), SC_ERR_INVALID);
    cr_expect(strstr(sc_error_message(), "log_image 'img'"), "%s", sc_error_message());
    cr_expect_eq(host_tb_add_image(NULL, "", 1, &ok), SC_ERR_INVALID);
    cr_expect_eq(host_tb_add_image(NULL, "img", 1, NULL), SC_ERR_INVALID);
    cr_expect_eq(host_tb_add_text(NULL, "note", 1, "x"), SC_OK);
    cr_expect_eq(host_tb_add_text(NULL, NULL, 1, "x"), SC_ERR_INVALID);
    cr_expect_eq(host_tb_add_text(NULL, "note", 1, NULL), SC_ERR_INVALID);
    cr_expect(strstr(sc_error_message(), "log_text 'note'"), "%s", sc_error_message());
    host_tb_add_scalar(NULL, "a", 1, 1.0); /* no-ops */
    host_tb_log_step(NULL, 1, 1.0, 0.1);
    host_tb_close(NULL);
}

/* ---- a failing disk ---- */

Test(tensorboard, a_failed_write_warns_once_and_stops_the_writer, .init = cr_redirect_stderr)
{
    char dir[64];
    host_tb_writer *w = open_writer(dir, 1);
    char path[HOST_PATH_MAX];
    snprintf(path, sizeof path, "%s", host_tb_path(w));
    /* The file may grow by one small record, no more: a full disk. */
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim = {.rlim_cur = 4096, .rlim_max = RLIM_INFINITY};
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    for (int i = 0; i < 1000; i++)
        host_tb_log_step(w, i + 1, 1.0, 0.1);
    host_tb_flush(w);
    host_tb_add_scalar(w, "after", 1, 1.0); /* ignored */
    host_tb_flush(w);
    host_tb_close(w);
    fflush(stderr);
    char log[4096] = "";
    size_t got = fread(log, 1, sizeof log - 1, cr_get_redirected_stderr());
    log[got] = '\0';
    char *first = strstr(log, "cannot write TensorBoard events to");
    cr_assert(first, "no warning: %s", log);
    cr_expect_not(strstr(first + 1, "cannot write TensorBoard events to"), "warned twice: %s", log);
    cr_expect(strstr(log, path) && strstr(log, "training goes on"), "%s", log);
}

/* ---- options ---- */

static sc_status parse(host_config *c, const char *const *extra)
{
    char *argv[16] = {"scorch-train", "--model", "m.so", "--dataset", "d.so"};
    int argc = 5;
    for (; *extra; extra++)
        argv[argc++] = (char *)*extra;
    bool exit_now;
    return host_config_parse(c, HOST_PROGRAM_TRAIN, argc, argv, &exit_now);
}

Test(tensorboard, options_turn_it_off_and_space_the_histograms)
{
    host_config c;
    cr_assert_eq(parse(&c, (const char *[]){NULL}), SC_OK, "%s", sc_error_message());
    cr_expect(c.tensorboard);
    cr_expect_eq(c.histogram_every, 1);
    cr_assert_eq(parse(&c, (const char *[]){"--no-tensorboard", "--histogram-every", "0", NULL}),
                 SC_OK, "%s", sc_error_message());
    cr_expect_not(c.tensorboard);
    cr_expect_eq(c.histogram_every, 0);
    cr_assert_eq(parse(&c, (const char *[]){"--no-tensorboard", "--tensorboard", NULL}), SC_OK);
    cr_expect(c.tensorboard, "the last repeat wins");
    cr_expect_eq(parse(&c, (const char *[]){"--histogram-every", "-1", NULL}), SC_ERR_INVALID);
    cr_expect(strstr(sc_error_message(), "--histogram-every"), "%s", sc_error_message());
    cr_expect_eq(parse(&c, (const char *[]){"--no-tensorboard=1", NULL}), SC_ERR_INVALID);
    cr_expect(strstr(sc_error_message(), "--no-tensorboard takes no value"), "%s",
              sc_error_message());
    cr_expect_eq(parse(&c, (const char *[]){"--no-epochs", NULL}), SC_ERR_INVALID,
                 "--no- negates flags only");
    cr_expect(strstr(sc_error_message(), "unknown option --no-epochs"), "%s",
              sc_error_message());
}
