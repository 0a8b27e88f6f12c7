/* tfrecord.h — the byte-level formats under TensorBoard event files:
 * CRC-32C, protocol-buffer wire encoding, and TFRecord framing.
 *
 * A TFRecord is
 *   uint64 length, masked CRC-32C of those 8 bytes, data, masked CRC-32C
 *   of the data
 * all little-endian; CRC-32C is the Castagnoli CRC (as in iSCSI) and the
 * mask is ((crc >> 15) | (crc << 17)) + 0xa282ead8.
 *
 * host_pb builds one protocol-buffer message in a growable buffer that is
 * reused from message to message. Nested messages are written in place:
 * host_pb_open reserves one byte for the length and host_pb_close moves the
 * body when the length needs more. An allocation failure is sticky
 * (b->failed) and turns later puts into no-ops, so an encoder checks once,
 * at the end.
 *
 * Thread rule: pure functions; an host_pb belongs to one thread at a time.
 */
#ifndef SCORCH_HOST_TFRECORD_H
#define SCORCH_HOST_TFRECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

uint32_t host_crc32c_compute(const void *data, size_t len);
uint32_t host_crc32c_mask(uint32_t crc);

enum { HOST_TFRECORD_HEADER = 12, HOST_TFRECORD_FOOTER = 4 };

/* The 12 bytes before and the 4 bytes after `len` bytes of `data`. */
void host_tfrecord_frame(const void *data, size_t len, uint8_t header[HOST_TFRECORD_HEADER],
                       uint8_t footer[HOST_TFRECORD_FOOTER]);

typedef struct host_pb {
    uint8_t *data;
    size_t len, cap;
    bool failed; /* out of memory: the message is incomplete */
} host_pb;

/* Empties b, keeping its memory. */
void host_pb_reset(host_pb *b);
void host_pb_free(host_pb *b);

void host_pb_put_varint(host_pb *b, uint64_t v);
/* Fields, by wire type: varint (int32/int64/enum; negatives take ten
 * bytes, as protobuf's int64 does), 64-bit double, 32-bit float, and
 * length-delimited bytes, strings and packed doubles. */
void host_pb_put_int(host_pb *b, int field, int64_t v);
void host_pb_put_double(host_pb *b, int field, double v);
void host_pb_put_float(host_pb *b, int field, float v);
void host_pb_put_bytes(host_pb *b, int field, const void *data, size_t len);
void host_pb_put_string(host_pb *b, int field, const char *s);
void host_pb_put_packed_doubles(host_pb *b, int field, const double *v, size_t n);

/* Starts an embedded message as `field`; returns what host_pb_close needs. */
size_t host_pb_open(host_pb *b, int field);
void host_pb_close(host_pb *b, size_t opened);

#endif
