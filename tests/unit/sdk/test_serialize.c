#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "scorch/serialize.h"

static char dir[64];

static void make_dir(void)
{
    strcpy(dir, "/tmp/scorch-ckpt-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

static void remove_dir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(serialize, .init = make_dir, .fini = remove_dir);

typedef struct path_buf {
    char s[128];
} path_buf;

static path_buf in_dir(const char *name)
{
    path_buf p;
    snprintf(p.s, sizeof p.s, "%s/%s", dir, name);
    return p;
}

static bool exists(const char *path) { return access(path, F_OK) == 0; }

/* ---------------------------------------------------------- file helpers */

typedef struct bytes {
    unsigned char *data;
    size_t size;
} bytes;

static bytes slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s", path);
    bytes b = {malloc(1 << 16), 0};
    b.size = fread(b.data, 1, 1 << 16, f);
    cr_assert(feof(f), "test files stay under 64 KiB");
    fclose(f);
    return b;
}

static void spit(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(data, 1, size, f), size);
    fclose(f);
}

/* zlib's CRC-32, written out so the test checks the documented format
 * rather than trusting the library it tests. */
static uint32_t crc32_ref(const unsigned char *p, size_t n)
{
    uint32_t crc = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

static void fix_crc(bytes *b)
{
    uint32_t crc = crc32_ref(b->data, b->size - 4);
    memcpy(b->data + b->size - 4, &crc, 4);
}

/* Opening path must fail with code and a message containing both the
 * file's path and fragment. */
static void assert_open_fails(const char *path, sc_status code, const char *fragment)
{
    sc_ckpt *ck = (sc_ckpt *)1;
    sc_error_clear();
    cr_assert_eq(sc_ckpt_open(path, &ck), code, "%s", sc_error_message());
    cr_assert_null(ck);
    cr_assert(strstr(sc_error_message(), path), "message '%s' lacks the path",
              sc_error_message());
    cr_assert(strstr(sc_error_message(), fragment), "message '%s' lacks '%s'",
              sc_error_message(), fragment);
}

/* ------------------------------------------------------------ the sample */

static const float w_data[6] = {1.5f, -2.0f, 3.25f, 0.0f, -0.5f, 1e-3f};
static const int64_t labels_data[4] = {7, -1, 1LL << 40, 0};
static const uint8_t mask_data[3] = {1, 0, 255};
static const float scalar_data = 42.0f;
static const char config_text[] = "[train]\nepochs = 3\n";

static sc_tensor view(sc_dtype dtype, int ndim, const int64_t *shape, const void *data)
{
    sc_tensor t;
    cr_assert_eq(sc_tensor_init(&t, dtype, ndim, shape), SC_OK);
    t.data = (void *)data;
    return t;
}

static void write_sample(const char *path)
{
    const int64_t ws[] = {2, 3}, ls[] = {4}, ms[] = {3}, es[] = {0, 5};
    sc_tensor w = view(SC_F32, 2, ws, w_data), labels = view(SC_I64, 1, ls, labels_data),
              mask = view(SC_U8, 1, ms, mask_data), scalar = view(SC_F32, 0, NULL, &scalar_data),
              empty = view(SC_F32, 2, es, NULL);
    sc_ckpt_writer *wr;
    cr_assert_eq(sc_ckpt_writer_open(path, &wr), SC_OK, "%s", sc_error_message());
    cr_assert_eq(sc_ckpt_write_tensor(wr, "layer.w", &w), SC_OK);
    cr_assert_eq(sc_ckpt_write_blob(wr, "config", config_text, sizeof config_text), SC_OK);
    cr_assert_eq(sc_ckpt_write_tensor(wr, "labels", &labels), SC_OK);
    cr_assert_eq(sc_ckpt_write_tensor(wr, "mask", &mask), SC_OK);
    cr_assert_eq(sc_ckpt_write_tensor(wr, "scalar", &scalar), SC_OK);
    cr_assert_eq(sc_ckpt_write_tensor(wr, "empty", &empty), SC_OK);
    cr_assert_eq(sc_ckpt_write_blob(wr, "nothing", NULL, 0), SC_OK);
    cr_assert_eq(sc_ckpt_writer_commit(wr), SC_OK, "%s", sc_error_message());
}

static void assert_tensor(const sc_ckpt *ck, const char *name, sc_dtype dtype, int ndim,
                          const int64_t *shape, const void *want)
{
    sc_tensor *t = sc_tensor_alloc(dtype, ndim, shape);
    cr_assert_eq(sc_ckpt_read_tensor(ck, name, t), SC_OK, "%s", sc_error_message());
    if (t->numel)
        cr_assert_arr_eq(t->data, want, sc_tensor_nbytes(t), "%s", name);
    sc_tensor_free(t);
}

/* ------------------------------------------------------------------ tests */

Test(serialize, round_trip_of_tensors_and_blobs)
{
    path_buf path = in_dir("a.ckpt");
    write_sample(path.s);
    sc_ckpt *ck;
    cr_assert_eq(sc_ckpt_open(path.s, &ck), SC_OK, "%s", sc_error_message());
    const char *names[] = {"layer.w", "config", "labels", "mask", "scalar", "empty", "nothing"};
    cr_assert_eq(sc_ckpt_count(ck), 7);
    for (int i = 0; i < 7; i++)
        cr_assert_str_eq(sc_ckpt_name(ck, i), names[i]);
    const int64_t ws[] = {2, 3}, ls[] = {4}, ms[] = {3}, es[] = {0, 5};
    assert_tensor(ck, "layer.w", SC_F32, 2, ws, w_data);
    assert_tensor(ck, "labels", SC_I64, 1, ls, labels_data);
    assert_tensor(ck, "mask", SC_U8, 1, ms, mask_data);
    assert_tensor(ck, "scalar", SC_F32, 0, NULL, &scalar_data);
    assert_tensor(ck, "empty", SC_F32, 2, es, NULL);
    size_t size = 0;
    const void *blob = sc_ckpt_blob(ck, "config", &size);
    cr_assert_eq(size, sizeof config_text);
    cr_assert_arr_eq(blob, config_text, size);
    cr_assert_not_null(sc_ckpt_blob(ck, "nothing", &size));
    cr_assert_eq(size, 0);
    cr_assert(sc_ckpt_has(ck, "mask"));
    cr_assert_not(sc_ckpt_has(ck, "absent"));
    cr_assert_null(sc_ckpt_blob(ck, "absent", &size));
    cr_assert_null(sc_ckpt_blob(ck, "mask", &size), "a tensor is not a blob");
    sc_ckpt_close(ck);
}

/* One blob "b" = "xyz": the bytes docs/checkpoint-format.md describes. */
Test(serialize, layout_matches_the_documented_format)
{
    path_buf path = in_dir("layout.ckpt");
    sc_ckpt_writer *w;
    cr_assert_eq(sc_ckpt_writer_open(path.s, &w), SC_OK);
    cr_assert_eq(sc_ckpt_write_blob(w, "b", "xyz", 3), SC_OK);
    cr_assert_eq(sc_ckpt_writer_commit(w), SC_OK);
    bytes b = slurp(path.s);
    unsigned char want[64 + 3 + 4 + 4] = "SCORCHCK";
    const uint32_t version = 1, kind = 2, name_len = 1;
    const uint64_t size = 3;
    memcpy(want + 8, &version, 4);
    memcpy(want + 12, &kind, 4);
    memcpy(want + 16, &name_len, 4);
    memcpy(want + 20, &size, 8);
    want[28] = 'b';
    memcpy(want + 64, "xyz", 3); /* data at the next multiple of 64 */
    uint32_t crc = crc32_ref(want, sizeof want - 4); /* end record is zero already */
    memcpy(want + sizeof want - 4, &crc, 4);
    cr_assert_eq(b.size, sizeof want);
    cr_assert_arr_eq(b.data, want, sizeof want);
    free(b.data);
}

Test(serialize, commit_replaces_the_file_and_leaves_no_tmp)
{
    path_buf path = in_dir("c.ckpt");
    spit(path.s, "old contents", 12);
    write_sample(path.s);
    cr_assert_not(exists(in_dir("c.ckpt.tmp").s));
    sc_ckpt *ck;
    cr_assert_eq(sc_ckpt_open(path.s, &ck), SC_OK, "%s", sc_error_message());
    sc_ckpt_close(ck);
}

Test(serialize, abort_removes_tmp_and_keeps_the_old_file)
{
    path_buf path = in_dir("d.ckpt");
    write_sample(path.s);
    bytes before = slurp(path.s);
    sc_ckpt_writer *w;
    cr_assert_eq(sc_ckpt_writer_open(path.s, &w), SC_OK);
    cr_assert_eq(sc_ckpt_write_blob(w, "x", "1", 1), SC_OK);
    cr_assert(exists(in_dir("d.ckpt.tmp").s), "writing goes to <path>.tmp");
    sc_ckpt_writer_abort(w);
    cr_assert_not(exists(in_dir("d.ckpt.tmp").s));
    bytes after = slurp(path.s);
    cr_assert_eq(after.size, before.size);
    cr_assert_arr_eq(after.data, before.data, before.size);
    free(before.data);
    free(after.data);
}

Test(serialize, every_truncation_is_refused)
{
    path_buf path = in_dir("full.ckpt"), cut = in_dir("cut.ckpt");
    write_sample(path.s);
    bytes b = slurp(path.s);
    for (size_t len = 0; len < b.size; len++) {
        spit(cut.s, b.data, len);
        sc_ckpt *ck = NULL;
        cr_assert_eq(sc_ckpt_open(cut.s, &ck), SC_ERR_FORMAT, "cut at %zu of %zu: %s", len,
                     b.size, sc_error_message());
        cr_assert(strstr(sc_error_message(), cut.s), "cut at %zu: '%s' lacks the path", len,
                  sc_error_message());
    }
    free(b.data);
}

Test(serialize, every_flipped_byte_is_refused)
{
    path_buf path = in_dir("full.ckpt"), bad = in_dir("bad.ckpt");
    write_sample(path.s);
    bytes b = slurp(path.s);
    for (size_t i = 0; i < b.size; i++) {
        b.data[i] ^= 0x10;
        spit(bad.s, b.data, b.size);
        b.data[i] ^= 0x10;
        sc_ckpt *ck = NULL;
        cr_assert_eq(sc_ckpt_open(bad.s, &ck), SC_ERR_FORMAT, "flip at %zu: %s", i,
                     sc_error_message());
    }
    free(b.data);
}

Test(serialize, flipped_data_byte_fails_the_checksum)
{
    path_buf path = in_dir("e.ckpt");
    write_sample(path.s);
    bytes b = slurp(path.s);
    b.data[64] ^= 1; /* first byte of the first tensor's data */
    spit(path.s, b.data, b.size);
    assert_open_fails(path.s, SC_ERR_FORMAT, "checksum");
    free(b.data);
}

Test(serialize, trailing_bytes_are_refused)
{
    path_buf path = in_dir("t.ckpt");
    write_sample(path.s);
    bytes b = slurp(path.s);
    b.data[b.size++] = 0;
    spit(path.s, b.data, b.size);
    assert_open_fails(path.s, SC_ERR_FORMAT, "corrupt");
    free(b.data);
}

Test(serialize, wrong_magic_is_refused)
{
    path_buf path = in_dir("m.ckpt");
    write_sample(path.s);
    bytes b = slurp(path.s);
    memcpy(b.data, "PK\3\4", 4);
    fix_crc(&b);
    spit(path.s, b.data, b.size);
    assert_open_fails(path.s, SC_ERR_FORMAT, "not a scorch checkpoint");
    free(b.data);
}

Test(serialize, newer_version_is_refused_naming_both)
{
    path_buf path = in_dir("v.ckpt");
    write_sample(path.s);
    bytes b = slurp(path.s);
    const uint32_t newer = SC_CKPT_VERSION + 1;
    memcpy(b.data + 8, &newer, 4);
    fix_crc(&b);
    spit(path.s, b.data, b.size);
    char both[64];
    snprintf(both, sizeof both, "version %u, newer than this build reads (%d)", newer,
             SC_CKPT_VERSION);
    assert_open_fails(path.s, SC_ERR_FORMAT, both);
    free(b.data);
}

Test(serialize, missing_file_is_an_io_error)
{
    assert_open_fails(in_dir("nowhere.ckpt").s, SC_ERR_IO, "cannot open");
}

Test(serialize, read_refuses_mismatch_and_missing_names)
{
    path_buf path = in_dir("r.ckpt");
    write_sample(path.s);
    sc_ckpt *ck;
    cr_assert_eq(sc_ckpt_open(path.s, &ck), SC_OK);
    const int64_t transposed[] = {3, 2}, ws[] = {2, 3};
    sc_tensor *t = sc_tensor_alloc(SC_F32, 2, transposed);
    cr_assert_eq(sc_ckpt_read_tensor(ck, "layer.w", t), SC_ERR_INVALID);
    cr_assert(strstr(sc_error_message(), "f32 [2, 3], expected f32 [3, 2]"), "%s",
              sc_error_message());
    sc_tensor_free(t);
    t = sc_tensor_alloc(SC_I32, 2, ws);
    cr_assert_eq(sc_ckpt_read_tensor(ck, "layer.w", t), SC_ERR_INVALID);
    cr_assert(strstr(sc_error_message(), "expected i32 [2, 3]"), "%s", sc_error_message());
    cr_assert(((int32_t *)t->data)[0] == 0, "nothing copied on a mismatch");
    sc_tensor_free(t);
    t = sc_tensor_alloc(SC_F32, 2, ws);
    cr_assert_eq(sc_ckpt_read_tensor(ck, "layer.v", t), SC_ERR_INVALID);
    cr_assert(strstr(sc_error_message(), "no tensor 'layer.v'"), "%s", sc_error_message());
    cr_assert(strstr(sc_error_message(), path.s), "%s", sc_error_message());
    cr_assert_eq(sc_ckpt_read_tensor(ck, "config", t), SC_ERR_INVALID, "a blob is no tensor");
    sc_tensor_free(t);
    sc_ckpt_close(ck);
}

Test(serialize, writer_refuses_duplicate_and_bad_names)
{
    path_buf path = in_dir("dup.ckpt");
    const int64_t shape[] = {1};
    sc_tensor t = view(SC_F32, 1, shape, w_data);
    sc_ckpt_writer *w;
    cr_assert_eq(sc_ckpt_writer_open(path.s, &w), SC_OK);
    cr_assert_eq(sc_ckpt_write_tensor(w, "x", &t), SC_OK);
    cr_assert_eq(sc_ckpt_write_blob(w, "x", "1", 1), SC_ERR_INVALID);
    cr_assert(strstr(sc_error_message(), "'x' is written twice"), "%s", sc_error_message());
    cr_assert_eq(sc_ckpt_write_blob(w, "", "1", 1), SC_ERR_INVALID);
    t.device = (sc_device){SC_DEVICE_CUDA, 63}; /* no such GPU, in any build */
    cr_assert_neq(sc_ckpt_write_tensor(w, "gpu", &t), SC_OK);
    cr_assert(strstr(sc_error_message(), "cuda:63"), "%s", sc_error_message());
    cr_assert_eq(sc_ckpt_writer_commit(w), SC_OK, "refusals leave the file whole");
    sc_ckpt *ck;
    cr_assert_eq(sc_ckpt_open(path.s, &ck), SC_OK, "%s", sc_error_message());
    cr_assert_eq(sc_ckpt_count(ck), 1);
    sc_ckpt_close(ck);
}

/* Two blobs "aa" and "ab", then the second renamed "aa" with a valid CRC. */
Test(serialize, reader_refuses_duplicate_names)
{
    path_buf path = in_dir("dup2.ckpt");
    sc_ckpt_writer *w;
    cr_assert_eq(sc_ckpt_writer_open(path.s, &w), SC_OK);
    cr_assert_eq(sc_ckpt_write_blob(w, "aa", "1", 1), SC_OK);
    cr_assert_eq(sc_ckpt_write_blob(w, "ab", "2", 1), SC_OK);
    cr_assert_eq(sc_ckpt_writer_commit(w), SC_OK);
    bytes b = slurp(path.s);
    size_t at = 0;
    while (at + 1 < b.size && memcmp(b.data + at, "ab", 2) != 0)
        at++;
    cr_assert_lt(at + 1, b.size, "name 'ab' not found");
    b.data[at + 1] = 'a';
    fix_crc(&b);
    spit(path.s, b.data, b.size);
    assert_open_fails(path.s, SC_ERR_FORMAT, "'aa' appears twice");
    free(b.data);
}

/* A tensor [3, 5, 0] (no data) whose middle dimension is then made 2^62,
 * with a valid CRC: 3 * 2^62 elements per zero-length row overflow 64
 * bits, which the reader must refuse rather than compute. */
Test(serialize, reader_refuses_a_shape_whose_size_overflows)
{
    path_buf path = in_dir("huge.ckpt");
    sc_tensor t = view(SC_F32, 3, (const int64_t[]){3, 5, 0}, NULL);
    sc_ckpt_writer *w;
    cr_assert_eq(sc_ckpt_writer_open(path.s, &w), SC_OK);
    cr_assert_eq(sc_ckpt_write_tensor(w, "t", &t), SC_OK);
    cr_assert_eq(sc_ckpt_writer_commit(w), SC_OK, "%s", sc_error_message());
    bytes b = slurp(path.s);
    /* header 12; kind, name length, data size, dtype, rank: 24; then the
     * shape's three i64 */
    const size_t dim1 = 12 + 24 + 8;
    int64_t five, huge = INT64_C(1) << 62;
    memcpy(&five, b.data + dim1, 8);
    cr_assert_eq(five, 5, "the layout moved");
    memcpy(b.data + dim1, &huge, 8);
    fix_crc(&b);
    spit(path.s, b.data, b.size);
    assert_open_fails(path.s, SC_ERR_FORMAT, "[3, 4611686018427387904, 0] is too large");
    free(b.data);
}
