#include "idx.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

enum {
    IDX_TYPE_U8 = 0x08,
    READ_CHUNK = 1 << 20, /* gzread takes an unsigned int count */
    GZ_BUFFER = 1 << 17,
    FIRST_ALLOC = 1 << 20, /* the data buffer's size before it grows */
};

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Reads up to n bytes; fewer at the end of the stream or on an error. */
static int64_t read_full(gzFile f, uint8_t *buf, int64_t n)
{
    int64_t got = 0;
    while (got < n) {
        int64_t left = n - got;
        int r = gzread(f, buf + got, (unsigned)(left < READ_CHUNK ? left : READ_CHUNK));
        if (r <= 0)
            break;
        got += r;
    }
    return got;
}

/* zlib's message for the stream's error, without the "<path>: " it
 * starts with. */
static const char *zlib_reason(gzFile f, const char *path, int *err)
{
    const char *msg = gzerror(f, err);
    size_t len = strlen(path);
    return strncmp(msg, path, len) == 0 && msg[len] == ':' ? msg + len + 2 : msg;
}

/* After a short read: a corrupt gzip stream, or simply the end of the file
 * (zlib reports a stream cut short as Z_BUF_ERROR). */
static sc_status short_read(gzFile f, const char *path, int64_t expected, int64_t got,
                            const char *unit)
{
    int err;
    const char *reason = zlib_reason(f, path, &err);
    if (err != Z_OK && err != Z_BUF_ERROR)
        return sc_error_set(SC_ERR_FORMAT, "%s: corrupt: %s", path, reason);
    return sc_error_set(SC_ERR_FORMAT, "%s: truncated: expected %lld %s, got %lld", path,
                        (long long)expected, unit, (long long)got);
}

/* "28x28" into buf. */
static const char *dims_str(const int64_t *dims, int n, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int d = 0; d < n && used < size; d++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", d ? "x" : "",
                                 (long long)dims[d]);
    return buf;
}

static sc_status read_header(gzFile f, const char *path, int ndim, const int64_t *item_dims,
                             int64_t *count)
{
    uint8_t head[4 * (1 + IDX_MAX_DIMS)];
    int64_t size = 4 * (1 + ndim);
    int64_t got = read_full(f, head, size);
    if (got < size)
        return short_read(f, path, size, got, "header bytes");
    uint32_t magic = be32(head), want = IDX_TYPE_U8 << 8 | (uint32_t)ndim;
    if (magic != want)
        return sc_error_set(SC_ERR_FORMAT,
                            "%s: bad magic %u, expected %u (IDX, u8 data in %d dimensions)",
                            path, magic, want, ndim);
    int64_t dims[IDX_MAX_DIMS] = {0};
    bool fits = true;
    for (int d = 0; d < ndim; d++) {
        dims[d] = be32(head + 4 * (d + 1));
        fits = fits && (d == 0 || dims[d] == item_dims[d - 1]);
    }
    if (!fits) {
        char have[64], expect[64];
        return sc_error_set(SC_ERR_FORMAT, "%s: items are %s, expected %s", path,
                            dims_str(dims + 1, ndim - 1, have, sizeof have),
                            dims_str(item_dims, ndim - 1, expect, sizeof expect));
    }
    *count = dims[0];
    return SC_OK;
}

/* The data must end where the header says, and the gzip stream cleanly:
 * its trailer holds the CRC that zlib verifies at the end. */
static sc_status check_end(gzFile f, const char *path, int64_t expected)
{
    uint8_t extra;
    if (gzread(f, &extra, 1) > 0)
        return sc_error_set(SC_ERR_FORMAT, "%s: longer than the %lld bytes its header gives",
                            path, (long long)expected);
    int err;
    const char *reason = zlib_reason(f, path, &err);
    if (err == Z_BUF_ERROR)
        return sc_error_set(SC_ERR_FORMAT, "%s: truncated: the gzip stream ends early", path);
    if (err != Z_OK)
        return sc_error_set(SC_ERR_FORMAT, "%s: corrupt: %s", path, reason);
    return SC_OK;
}

/* The data's size by the header: count items of prod(item_dims) bytes,
 * refused when that overflows (or exceeds the address space). */
static sc_status data_bytes(const char *path, int64_t count, int ndim, const int64_t *item_dims,
                            int64_t *bytes)
{
    int64_t n = count;
    for (int d = 0; d < ndim - 1; d++) {
        if (item_dims[d] != 0 && n > INT64_MAX / item_dims[d])
            return sc_error_set(SC_ERR_FORMAT, "%s: the header's %lld items of that shape "
                                "make more bytes than a file can hold", path, (long long)count);
        n *= item_dims[d];
    }
    if ((uint64_t)n > SIZE_MAX)
        return sc_error_set(SC_ERR_FORMAT, "%s: the header's %lld bytes of data exceed this "
                            "machine's address space", path, (long long)n);
    *bytes = n;
    return SC_OK;
}

static sc_status out_of_memory(const char *path, int64_t bytes)
{
    return sc_error_set(SC_ERR_NOMEM, "%s: out of memory for %lld bytes", path,
                        (long long)bytes);
}

/* Reads the header's `bytes` of data into *data. The buffer grows (from
 * FIRST_ALLOC, doubling) only as the file delivers data, since a gzip
 * file's decompressed size is known only once it is read: a header that
 * claims gigabytes in a file that holds little costs no more than twice
 * what the file holds, and is reported as truncated. */
static sc_status read_data(gzFile f, const char *path, int64_t header, int64_t bytes,
                           uint8_t **data)
{
    int64_t cap = bytes < FIRST_ALLOC ? bytes : FIRST_ALLOC, got = 0;
    if (!(*data = malloc(cap ? (size_t)cap : 1)))
        return out_of_memory(path, cap);
    for (;;) {
        got += read_full(f, *data + got, cap - got);
        if (got < cap || cap == bytes)
            break;
        cap = cap > bytes / 2 ? bytes : 2 * cap;
        uint8_t *grown = realloc(*data, (size_t)cap);
        if (!grown)
            return out_of_memory(path, cap);
        *data = grown;
    }
    if (got < bytes)
        return short_read(f, path, header + bytes, header + got, "bytes");
    return check_end(f, path, header + bytes);
}

static sc_status read_body(gzFile f, const char *path, int ndim, const int64_t *item_dims,
                           int64_t *count, uint8_t **data)
{
    int64_t bytes = 0;
    SC_TRY(read_header(f, path, ndim, item_dims, count));
    SC_TRY(data_bytes(path, *count, ndim, item_dims, &bytes));
    return read_data(f, path, 4 * (1 + ndim), bytes, data);
}

sc_status idx_read_u8(const char *path, int ndim, const int64_t *item_dims,
                      int64_t *count, uint8_t **data)
{
    *count = 0;
    *data = NULL;
    errno = 0;
    gzFile f = gzopen(path, "rb");
    if (!f)
        return sc_error_set(SC_ERR_IO, "%s: cannot open: %s", path,
                            errno ? strerror(errno) : "out of memory");
    gzbuffer(f, GZ_BUFFER);
    sc_status st = read_body(f, path, ndim, item_dims, count, data);
    gzclose(f);
    if (st != SC_OK) {
        free(*data);
        *data = NULL;
        *count = 0;
    }
    return st;
}
