/* The Fashion-MNIST plugin's IDX reader (plugins/fashion_mnist/idx.c) on
 * crafted files, plain and gzipped: good files read back exactly, and a
 * header that claims more than its file holds is refused, naming the file,
 * without allocating what the header claims. */
#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <zlib.h>

#include "../../plugins/fashion_mnist/idx.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif

static char path[64];

static void remove_file(void)
{
    if (path[0])
        unlink(path);
}

TestSuite(idx, .fini = remove_file);

static void assert_message_has(const char *part)
{
    cr_assert(strstr(sc_error_message(), part), "message '%s' lacks '%s'", sc_error_message(),
              part);
}

/* Writes bytes[0..n) to a new file in /tmp, gzipped or not; its name is
 * in path. */
static void write_idx(const uint8_t *bytes, size_t n, bool gzipped)
{
    strcpy(path, "/tmp/scorch-test-idx-XXXXXX");
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    if (!gzipped) {
        cr_assert_eq(write(fd, bytes, n), (ssize_t)n);
        close(fd);
        return;
    }
    gzFile gz = gzdopen(fd, "wb");
    cr_assert_not_null(gz);
    cr_assert_eq(gzwrite(gz, bytes, (unsigned)n), (int)n);
    cr_assert_eq(gzclose(gz), Z_OK);
}

/* An IDX header of u8 data in ndim dimensions into buf; its size. */
static size_t idx_header(uint8_t *buf, int ndim, const uint32_t *dims)
{
    const uint32_t words[] = {0x800u | (uint32_t)ndim, dims[0], dims[1], dims[2], dims[3]};
    for (int w = 0; w <= ndim; w++)
        for (int b = 0; b < 4; b++)
            buf[4 * w + b] = (uint8_t)(words[w] >> (24 - 8 * b));
    return 4 * (1 + (size_t)ndim);
}

/* Lets this test's process (Criterion forks one per test) map at most
 * 256 MiB more than it has now, so that allocating what a crafted header
 * claims fails instead of being overcommitted. Sanitizers need the
 * address space for their shadow memory: there the messages alone show
 * the file was refused. */
static void cap_memory(void)
{
#ifndef SANITIZED
    FILE *f = fopen("/proc/self/statm", "r");
    cr_assert_not_null(f);
    unsigned long pages = 0;
    cr_assert_eq(fscanf(f, "%lu", &pages), 1);
    fclose(f);
    rlim_t bytes = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + ((rlim_t)256 << 20);
    struct rlimit limit = {bytes, bytes};
    cr_assert_eq(setrlimit(RLIMIT_AS, &limit), 0);
#endif
}

static const int64_t side[] = {28, 28};

Test(idx, a_header_that_claims_more_than_the_file_holds_is_truncated)
{
    cap_memory();
    /* 34 bytes that claim 30,000,000 images (23.5 GB), and 2^32 - 1
     * images (3.4 TB) */
    static const uint32_t claims[] = {30000000u, 0xffffffffu};
    static const char *const expected[] = {"expected 23520000016 bytes, got 34",
                                           "expected 3367254359296 bytes, got 34"};
    for (int gzipped = 0; gzipped < 2; gzipped++)
        for (int c = 0; c < 2; c++) {
            uint8_t file[34] = {0};
            idx_header(file, 3, (const uint32_t[]){claims[c], 28, 28, 0});
            write_idx(file, sizeof file, gzipped);
            int64_t count = -1;
            uint8_t *data = (uint8_t *)file;
            cr_assert_eq(idx_read_u8(path, 3, side, &count, &data), SC_ERR_FORMAT,
                         "%s (gzipped %d)", sc_error_message(), gzipped);
            assert_message_has(path);
            assert_message_has("truncated");
            assert_message_has(expected[c]);
            cr_expect_eq(count, 0);
            cr_expect_null(data);
            unlink(path);
        }
}

Test(idx, a_size_that_overflows_is_refused)
{
    uint8_t file[64] = {0};
    size_t n = idx_header(file, 4, (const uint32_t[]){0xffffffffu, 65536, 65536, 65536});
    write_idx(file, n + 8, true);
    int64_t count;
    uint8_t *data;
    cr_assert_eq(idx_read_u8(path, 4, (const int64_t[]){65536, 65536, 65536}, &count, &data),
                 SC_ERR_FORMAT);
    assert_message_has(path);
    assert_message_has("make more bytes than a file can hold");
}

/* count bytes of data, i * 7 + 1 each: larger than the first buffer, so
 * that it grows. */
Test(idx, good_files_read_back_exactly)
{
    enum { COUNT = 3 * (1 << 20) + 5 };
    uint8_t *file = malloc(COUNT + 8);
    cr_assert_not_null(file);
    size_t head = idx_header(file, 1, (const uint32_t[]){COUNT, 0, 0, 0});
    for (size_t i = 0; i < COUNT; i++)
        file[head + i] = (uint8_t)(i * 7 + 1);
    for (int gzipped = 0; gzipped < 2; gzipped++) {
        write_idx(file, head + COUNT, gzipped);
        int64_t count;
        uint8_t *data;
        cr_assert_eq(idx_read_u8(path, 1, NULL, &count, &data), SC_OK, "%s",
                     sc_error_message());
        cr_assert_eq(count, COUNT);
        cr_expect_eq(memcmp(data, file + head, COUNT), 0, "gzipped %d", gzipped);
        free(data);
        unlink(path);
    }
    free(file);
}

Test(idx, a_file_longer_than_its_header_or_of_another_shape_is_refused)
{
    uint8_t file[16 + 2 * 4 + 1] = {0};
    size_t head = idx_header(file, 3, (const uint32_t[]){2, 2, 2, 0});
    write_idx(file, head + 2 * 4 + 1, true);
    int64_t count;
    uint8_t *data;
    cr_assert_eq(idx_read_u8(path, 3, (const int64_t[]){2, 2}, &count, &data), SC_ERR_FORMAT);
    assert_message_has("longer than the 24 bytes its header gives");
    cr_assert_eq(idx_read_u8(path, 3, side, &count, &data), SC_ERR_FORMAT);
    assert_message_has("items are 2x2, expected 28x28");
    cr_assert_eq(idx_read_u8(path, 1, NULL, &count, &data), SC_ERR_FORMAT);
    assert_message_has("bad magic");
}
