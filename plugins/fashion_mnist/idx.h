/* idx.h — reading gzipped IDX files of unsigned bytes (the MNIST format).
 *
 * An IDX file is a big-endian header — magic 0x00000800 | ndim (0x08 is the
 * u8 type), then ndim u32 dimensions — followed by the data, row-major.
 */
#ifndef FASHION_MNIST_IDX_H
#define FASHION_MNIST_IDX_H

#include <stdint.h>

#include <scorch/status.h>

enum { IDX_MAX_DIMS = 4 };

/* Reads the IDX file at `path` (gzipped, or plain), which must hold u8
 * data in `ndim` dimensions whose last ndim - 1 equal item_dims (the first
 * counts the items). *count receives the item count and *data the count *
 * prod(item_dims) bytes, malloc'd, for the caller to free. Memory follows
 * the data the file really holds, never the header alone: a header that
 * claims more is reported as truncated, having cost at most twice what the
 * file holds. Every refusal names the path and what is wrong: cannot open,
 * truncated (with the expected and actual byte counts), longer than the
 * header says, bad magic, wrong dimensions, a size that overflows, corrupt
 * gzip stream. */
sc_status idx_read_u8(const char *path, int ndim, const int64_t *item_dims,
                      int64_t *count, uint8_t **data);

#endif
