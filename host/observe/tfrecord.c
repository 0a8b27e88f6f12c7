#include "observe/tfrecord.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- CRC-32C ---- */

enum { CRC32C_POLY = 0x82f63b78u }; /* Castagnoli, reflected */

static uint32_t crc_table[256];
static pthread_once_t crc_table_once = PTHREAD_ONCE_INIT;

static void crc_table_fill(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ CRC32C_POLY : c >> 1;
        crc_table[i] = c;
    }
}

uint32_t host_crc32c_compute(const void *data, size_t len)
{
    pthread_once(&crc_table_once, crc_table_fill);
    const uint8_t *p = data;
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < len; i++)
        c = crc_table[(c ^ p[i]) & 0xff] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

uint32_t host_crc32c_mask(uint32_t crc)
{
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

/* ---- TFRecord ---- */

static void put_le(uint8_t *out, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        out[i] = (uint8_t)(v >> (8 * i));
}

void host_tfrecord_frame(const void *data, size_t len, uint8_t header[HOST_TFRECORD_HEADER],
                       uint8_t footer[HOST_TFRECORD_FOOTER])
{
    put_le(header, len, 8);
    put_le(header + 8, host_crc32c_mask(host_crc32c_compute(header, 8)), 4);
    put_le(footer, host_crc32c_mask(host_crc32c_compute(data, len)), 4);
}

/* ---- protocol buffers ---- */

enum { WIRE_VARINT = 0, WIRE_FIXED64 = 1, WIRE_LEN = 2, WIRE_FIXED32 = 5, VARINT_MAX = 10 };

void host_pb_reset(host_pb *b)
{
    b->len = 0;
    b->failed = false;
}

void host_pb_free(host_pb *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

/* Makes room for n more bytes; false (and b->failed) when it cannot. */
static bool reserve(host_pb *b, size_t n)
{
    if (b->failed)
        return false;
    if (b->len + n <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n)
        cap *= 2;
    uint8_t *data = realloc(b->data, cap);
    if (!data) {
        b->failed = true;
        return false;
    }
    b->data = data;
    b->cap = cap;
    return true;
}

static void put_raw(host_pb *b, const void *data, size_t n)
{
    if (n && reserve(b, n)) {
        memcpy(b->data + b->len, data, n);
        b->len += n;
    }
}

static size_t varint_encode(uint8_t *out, uint64_t v)
{
    size_t n = 0;
    for (; v >= 0x80; v >>= 7)
        out[n++] = (uint8_t)(v | 0x80);
    out[n++] = (uint8_t)v;
    return n;
}

void host_pb_put_varint(host_pb *b, uint64_t v)
{
    uint8_t buf[VARINT_MAX];
    put_raw(b, buf, varint_encode(buf, v));
}

static void put_key(host_pb *b, int field, int wire)
{
    host_pb_put_varint(b, (uint64_t)field << 3 | (uint64_t)wire);
}

void host_pb_put_int(host_pb *b, int field, int64_t v)
{
    put_key(b, field, WIRE_VARINT);
    host_pb_put_varint(b, (uint64_t)v);
}

void host_pb_put_double(host_pb *b, int field, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    uint8_t buf[8];
    put_le(buf, bits, 8);
    put_key(b, field, WIRE_FIXED64);
    put_raw(b, buf, 8);
}

void host_pb_put_float(host_pb *b, int field, float v)
{
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    uint8_t buf[4];
    put_le(buf, bits, 4);
    put_key(b, field, WIRE_FIXED32);
    put_raw(b, buf, 4);
}

void host_pb_put_bytes(host_pb *b, int field, const void *data, size_t len)
{
    put_key(b, field, WIRE_LEN);
    host_pb_put_varint(b, len);
    put_raw(b, data, len);
}

void host_pb_put_string(host_pb *b, int field, const char *s)
{
    host_pb_put_bytes(b, field, s, strlen(s));
}

void host_pb_put_packed_doubles(host_pb *b, int field, const double *v, size_t n)
{
    size_t opened = host_pb_open(b, field);
    for (size_t i = 0; i < n; i++) {
        uint64_t bits;
        memcpy(&bits, &v[i], sizeof bits);
        uint8_t buf[8];
        put_le(buf, bits, 8);
        put_raw(b, buf, 8);
    }
    host_pb_close(b, opened);
}

size_t host_pb_open(host_pb *b, int field)
{
    put_key(b, field, WIRE_LEN);
    put_raw(b, "", 1); /* the length, when it fits in one byte */
    return b->len;
}

void host_pb_close(host_pb *b, size_t opened)
{
    if (b->failed)
        return;
    size_t body = b->len - opened;
    uint8_t len[VARINT_MAX];
    size_t n = varint_encode(len, body);
    if (n > 1) {
        if (!reserve(b, n - 1))
            return;
        memmove(b->data + opened + n - 1, b->data + opened, body);
        b->len += n - 1;
    }
    memcpy(b->data + opened - 1, len, n);
}
