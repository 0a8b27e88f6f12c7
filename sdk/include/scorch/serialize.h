/* scorch/serialize.h — the checkpoint container.
 *
 * A file of named entries, each a tensor (dtype, shape, data) or an opaque
 * blob, behind a magic and a format version, ending in a CRC-32 of
 * everything before it. Writing goes to "<path>.tmp", which commit fsyncs
 * and renames over <path> (then fsyncs the directory): a crash leaves the
 * old file or the new one, never a torn one. Reading verifies magic,
 * version, structure and checksum before anything is used.
 * Format: docs/checkpoint-format.md. Little-endian hosts only.
 */
#ifndef SCORCH_SERIALIZE_H
#define SCORCH_SERIALIZE_H

#include <stdbool.h>
#include <stddef.h>

#include "scorch/export.h"
#include "scorch/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SC_CKPT_VERSION 1

typedef struct sc_ckpt_writer sc_ckpt_writer;

SC_API sc_status sc_ckpt_writer_open(const char *path, sc_ckpt_writer **out);
/* t's data must be host memory. Names are unique within a file. */
SC_API sc_status sc_ckpt_write_tensor(sc_ckpt_writer *w, const char *name, const sc_tensor *t);
SC_API sc_status sc_ckpt_write_blob(sc_ckpt_writer *w, const char *name, const void *data,
                                    size_t size);
/* Finishes, syncs and renames into place; frees w whatever happens. */
SC_API sc_status sc_ckpt_writer_commit(sc_ckpt_writer *w);
/* Removes the temporary file and frees w. */
SC_API void sc_ckpt_writer_abort(sc_ckpt_writer *w);

typedef struct sc_ckpt sc_ckpt;

/* Reads and verifies a whole checkpoint. */
SC_API sc_status sc_ckpt_open(const char *path, sc_ckpt **out);
SC_API void sc_ckpt_close(sc_ckpt *ck);

SC_API int sc_ckpt_count(const sc_ckpt *ck);
SC_API const char *sc_ckpt_name(const sc_ckpt *ck, int i);
SC_API bool sc_ckpt_has(const sc_ckpt *ck, const char *name);

/* Copies the named tensor into dst (host memory), which must have the same
 * dtype and shape: a mismatch or a missing name is an error naming both. */
SC_API sc_status sc_ckpt_read_tensor(const sc_ckpt *ck, const char *name, sc_tensor *dst);

/* A read-only view of the named tensor (its data lives in ck), or NULL
 * when absent or a blob. */
SC_API const sc_tensor *sc_ckpt_tensor(const sc_ckpt *ck, const char *name);

/* The named blob's bytes (owned by ck), or NULL when absent. */
SC_API const void *sc_ckpt_blob(const sc_ckpt *ck, const char *name, size_t *size);

#ifdef __cplusplus
}
#endif
#endif
