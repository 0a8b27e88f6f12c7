/* safetensors.h — reading and writing the safetensors format, the one
 * PyTorch, JAX and Hugging Face tools exchange weights in.
 *
 * A file is an 8-byte little-endian header length N, N bytes of UTF-8
 * JSON, then the tensors' bytes:
 *
 *   {"__metadata__": {"key": "value", ...},
 *    "NAME": {"dtype": "F32", "shape": [2, 3], "data_offsets": [BEGIN, END]}, ...}
 *
 * The offsets are relative to the byte after the header and cover that
 * buffer exactly, tensor after tensor, with no hole and no overlap; data
 * is row-major and little-endian. (The format: the safetensors
 * repository's README; the reference reader: its safetensors/src/tensor.rs.)
 *
 * The reader checks everything before anything is used and refuses a file
 * with one message that names it and the fault: a header length past the
 * end of the file or over 100,000,000 bytes (the reference's limit),
 * invalid UTF-8 or JSON, a missing, unknown or repeated field, an unknown
 * dtype, a shape of more than 2^40 elements, data_offsets that end before
 * they begin, do not match dtype x shape, overlap, leave a hole or run past
 * the data, a name given twice. Every dtype of the reference is known;
 * F32 loads as it is and F16, BF16 and F64 are converted to f32
 * (host_safetensors_read_f32), the others are refused by name there.
 *
 * The writer writes scorch's dtypes (f32, i32, i64, u8) as the reference
 * does: tensors sorted by dtype (widest first) then name, the header
 * padded with spaces to a multiple of 8, atomically (a temporary file,
 * fsync, rename, fsync of the folder).
 *
 * Little-endian hosts only, as scorch's own checkpoints.
 */
#ifndef SCORCH_HOST_SAFETENSORS_H
#define SCORCH_HOST_SAFETENSORS_H

#include <stdbool.h>
#include <stdint.h>

#include "scorch/tensor.h"

enum {
    HOST_SAFETENSORS_MAX_DIMS = 8,
    HOST_SAFETENSORS_NAME_MAX = 1024, /* bytes of a tensor name, or of a metadata key */
};

/* The reference's dtypes, in its order (the writer sorts by it). */
typedef enum host_safetensors_dtype {
    HOST_SAFETENSORS_BOOL,
    HOST_SAFETENSORS_F4,
    HOST_SAFETENSORS_F6_E2M3,
    HOST_SAFETENSORS_F6_E3M2,
    HOST_SAFETENSORS_U8,
    HOST_SAFETENSORS_I8,
    HOST_SAFETENSORS_F8_E5M2,
    HOST_SAFETENSORS_F8_E4M3,
    HOST_SAFETENSORS_F8_E8M0,
    HOST_SAFETENSORS_F8_E4M3FNUZ,
    HOST_SAFETENSORS_F8_E5M2FNUZ,
    HOST_SAFETENSORS_I16,
    HOST_SAFETENSORS_U16,
    HOST_SAFETENSORS_F16,
    HOST_SAFETENSORS_BF16,
    HOST_SAFETENSORS_I32,
    HOST_SAFETENSORS_U32,
    HOST_SAFETENSORS_F32,
    HOST_SAFETENSORS_C64,
    HOST_SAFETENSORS_F64,
    HOST_SAFETENSORS_I64,
    HOST_SAFETENSORS_U64,
    HOST_SAFETENSORS_DTYPE_COUNT
} host_safetensors_dtype;

/* "F32", as the header spells it. */
const char *host_safetensors_dtype_name(host_safetensors_dtype dtype);

/* One tensor of an open file (or a view of another container's tensor,
 * built with host_safetensors_view). */
typedef struct host_safetensors_tensor {
    const char *name; /* decoded, NUL-free UTF-8 */
    host_safetensors_dtype dtype;
    int ndim;
    int64_t shape[HOST_SAFETENSORS_MAX_DIMS];
    int64_t numel;
    uint64_t begin, end; /* data_offsets */
    const void *data;    /* end - begin bytes, any alignment */
} host_safetensors_tensor;

typedef struct host_safetensors host_safetensors;

/* Reads and checks the whole file. */
sc_status host_safetensors_open(const char *path, host_safetensors **out);
void host_safetensors_close(host_safetensors *st);

/* The tensors, in the order of their data. */
int host_safetensors_count(const host_safetensors *st);
const host_safetensors_tensor *host_safetensors_at(const host_safetensors *st, int i);
const host_safetensors_tensor *host_safetensors_find(const host_safetensors *st,
                                                     const char *name);

/* The __metadata__ entry `key`, or NULL. */
const char *host_safetensors_metadata(const host_safetensors *st, const char *key);

/* Whether host_safetensors_read_f32 takes the dtype: F32, F16, BF16, F64. */
bool host_safetensors_loads_as_f32(host_safetensors_dtype dtype);

/* The tensor's numel values as f32 into dst, converted from F16, BF16 or
 * F64 (an F64 beyond f32's range becomes an infinity); any other dtype is
 * refused, naming the tensor and its dtype. */
sc_status host_safetensors_read_f32(const host_safetensors_tensor *t, float *dst);

/* A view of a scorch tensor (host memory) under `name`, for the
 * functions above. */
host_safetensors_tensor host_safetensors_view(const char *name, const sc_tensor *t);

/* What the writer writes. */
typedef struct host_safetensors_entry {
    const char *name;
    const sc_tensor *tensor; /* host memory */
} host_safetensors_entry;

typedef struct host_safetensors_meta {
    const char *key, *value;
} host_safetensors_meta;

/* Writes the tensors and the metadata (n_meta may be 0) to path,
 * atomically. Names and keys must be unique, 1 to
 * HOST_SAFETENSORS_NAME_MAX bytes of UTF-8; keys may not be
 * "__metadata__". */
sc_status host_safetensors_write(const char *path, const host_safetensors_entry *tensors,
                                 int n, const host_safetensors_meta *meta, int n_meta);

#endif
