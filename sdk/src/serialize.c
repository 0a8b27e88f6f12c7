#include "scorch/serialize.h"

#include "scorch/device.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* Layout: docs/checkpoint-format.md. Integers are stored in host order,
 * which must therefore be little-endian. */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the checkpoint format is little-endian; this host is not"
#endif

static const char ckpt_magic[8] = {'S', 'C', 'O', 'R', 'C', 'H', 'C', 'K'};

enum {
    HEADER_SIZE = 12,  /* magic, u32 version */
    CRC_SIZE = 4,      /* u32 trailer */
    DATA_ALIGN = 64,   /* entry data starts at a multiple of this file offset */
    NAME_MAX_LEN = 1024,
};

typedef enum entry_kind { ENTRY_END = 0, ENTRY_TENSOR = 1, ENTRY_BLOB = 2 } entry_kind;

static const uint8_t zero_pad[DATA_ALIGN];

static uint64_t pad_to_align(uint64_t pos) { return (DATA_ALIGN - pos % DATA_ALIGN) % DATA_ALIGN; }

static sc_status check_name(const char *name, const char *path)
{
    size_t len = name ? strlen(name) : 0;
    if (len == 0 || len > NAME_MAX_LEN)
        return sc_error_set(SC_ERR_INVALID, "checkpoint %s: entry name '%s' must be 1..%d bytes",
                            path, name ? name : "(null)", NAME_MAX_LEN);
    return SC_OK;
}

/* ---------------------------------------------------------------- writer */

struct sc_ckpt_writer {
    FILE *f;
    char *path, *tmp_path;
    uint64_t pos;   /* bytes written so far */
    uLong crc;      /* CRC-32 of those bytes */
    int io_errno;   /* first write error, 0 if none: the file is then torn */
    char **names;
    int count, capacity;
};

static void writer_free(sc_ckpt_writer *w)
{
    if (w->f)
        fclose(w->f);
    for (int i = 0; i < w->count; i++)
        free(w->names[i]);
    free(w->names);
    free(w->path);
    free(w->tmp_path);
    free(w);
}

/* Appends n bytes to the file and the running CRC; after a failure it
 * writes nothing more, and commit reports it. */
static void put(sc_ckpt_writer *w, const void *data, size_t n)
{
    if (w->io_errno || n == 0)
        return;
    if (fwrite(data, 1, n, w->f) != n) {
        w->io_errno = errno ? errno : EIO;
        return;
    }
    w->crc = crc32_z(w->crc, data, n);
    w->pos += n;
}

static void put_u32(sc_ckpt_writer *w, uint32_t v) { put(w, &v, sizeof v); }

static void put_u64(sc_ckpt_writer *w, uint64_t v) { put(w, &v, sizeof v); }

static sc_status write_error(const sc_ckpt_writer *w)
{
    return sc_error_set(SC_ERR_IO, "writing %s: %s", w->tmp_path, strerror(w->io_errno));
}

sc_status sc_ckpt_writer_open(const char *path, sc_ckpt_writer **out)
{
    *out = NULL;
    if (!path || !*path)
        return sc_error_set(SC_ERR_INVALID, "checkpoint writer: empty path");
    sc_ckpt_writer *w = calloc(1, sizeof *w);
    size_t len = strlen(path);
    if (!w || !(w->path = strdup(path)) || !(w->tmp_path = malloc(len + sizeof ".tmp"))) {
        if (w)
            writer_free(w);
        return sc_error_set(SC_ERR_NOMEM, "out of memory opening checkpoint %s", path);
    }
    memcpy(w->tmp_path, path, len);
    memcpy(w->tmp_path + len, ".tmp", sizeof ".tmp");
    w->f = fopen(w->tmp_path, "wb");
    if (!w->f) {
        sc_status st = sc_error_set(SC_ERR_IO, "cannot create %s: %s", w->tmp_path,
                                    strerror(errno));
        writer_free(w);
        return st;
    }
    w->crc = crc32_z(0L, Z_NULL, 0);
    put(w, ckpt_magic, sizeof ckpt_magic);
    put_u32(w, SC_CKPT_VERSION);
    *out = w;
    return SC_OK;
}

/* Records name as written, refusing a duplicate. */
static sc_status claim_name(sc_ckpt_writer *w, const char *name)
{
    SC_TRY(check_name(name, w->path));
    for (int i = 0; i < w->count; i++)
        if (strcmp(w->names[i], name) == 0)
            return sc_error_set(SC_ERR_INVALID, "checkpoint %s: entry '%s' is written twice",
                                w->path, name);
    if (w->count == w->capacity) {
        int cap = w->capacity ? 2 * w->capacity : 64;
        char **names = realloc(w->names, (size_t)cap * sizeof *names);
        if (!names)
            return sc_error_set(SC_ERR_NOMEM, "out of memory writing checkpoint %s", w->path);
        w->names = names;
        w->capacity = cap;
    }
    if (!(w->names[w->count] = strdup(name)))
        return sc_error_set(SC_ERR_NOMEM, "out of memory writing checkpoint %s", w->path);
    w->count++;
    return SC_OK;
}

/* The part every entry shares after its kind-specific header: the name,
 * zeros up to the data alignment, the data. */
static sc_status put_name_and_data(sc_ckpt_writer *w, const char *name, const void *data,
                                   size_t size)
{
    put(w, name, strlen(name));
    put(w, zero_pad, (size_t)pad_to_align(w->pos));
    put(w, data, size);
    return w->io_errno ? write_error(w) : SC_OK;
}

/* A GPU tensor's data goes through a host copy, made before anything is
 * written (a failed copy leaves the file whole); the file is the same. */
static sc_status host_data(const sc_tensor *t, sc_tensor **staged, const void **data)
{
    *staged = NULL;
    *data = t->data;
    if (t->device.kind == SC_DEVICE_CPU)
        return SC_OK;
    *staged = sc_tensor_alloc(t->dtype, t->ndim, t->shape);
    if (!*staged)
        return sc_error_code();
    *data = (*staged)->data;
    return sc_tensor_copy(*staged, t);
}

sc_status sc_ckpt_write_tensor(sc_ckpt_writer *w, const char *name, const sc_tensor *t)
{
    if (w->io_errno)
        return write_error(w);
    if (t->numel && !t->data)
        return sc_error_set(SC_ERR_INVALID, "checkpoint %s: tensor '%s' has no data",
                            w->path, name ? name : "(null)");
    sc_tensor *staged;
    const void *data;
    sc_status st = host_data(t, &staged, &data);
    if (st != SC_OK) {
        sc_tensor_free(staged);
        return sc_error_wrap(st, "checkpoint %s: tensor '%s'", w->path, name ? name : "(null)");
    }
    st = claim_name(w, name);
    if (st == SC_OK) {
        size_t size = sc_tensor_nbytes(t);
        put_u32(w, ENTRY_TENSOR);
        put_u32(w, (uint32_t)strlen(name));
        put_u64(w, size);
        put_u32(w, (uint32_t)t->dtype);
        put_u32(w, (uint32_t)t->ndim);
        put(w, t->shape, (size_t)t->ndim * sizeof t->shape[0]);
        st = put_name_and_data(w, name, data, size);
    }
    sc_tensor_free(staged);
    return st;
}

sc_status sc_ckpt_write_blob(sc_ckpt_writer *w, const char *name, const void *data,
                             size_t size)
{
    if (w->io_errno)
        return write_error(w);
    if (size && !data)
        return sc_error_set(SC_ERR_INVALID, "checkpoint %s: blob '%s' of %zu bytes has no data",
                            w->path, name ? name : "(null)", size);
    SC_TRY(claim_name(w, name));
    put_u32(w, ENTRY_BLOB);
    put_u32(w, (uint32_t)strlen(name));
    put_u64(w, size);
    return put_name_and_data(w, name, data, size);
}

/* End record and CRC, then the data on disk before the file is closed. */
static sc_status finish_file(sc_ckpt_writer *w)
{
    put_u32(w, ENTRY_END);
    uint32_t crc = (uint32_t)w->crc;
    put_u32(w, crc);
    if (!w->io_errno && (fflush(w->f) != 0 || fsync(fileno(w->f)) != 0))
        w->io_errno = errno;
    if (fclose(w->f) != 0 && !w->io_errno)
        w->io_errno = errno;
    w->f = NULL;
    return w->io_errno ? write_error(w) : SC_OK;
}

/* fsync of the folder holding path, so that the rename itself is durable.
 * A filesystem that cannot sync folders (EINVAL) is taken at its word. */
static sc_status sync_parent_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!dir)
        return sc_error_set(SC_ERR_NOMEM, "out of memory syncing the folder of %s", path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    int err = fd < 0 || (fsync(fd) != 0 && errno != EINVAL) ? errno : 0;
    if (fd >= 0)
        close(fd);
    sc_status st = err ? sc_error_set(SC_ERR_IO, "syncing folder %s after writing %s: %s", dir,
                                      path, strerror(err))
                       : SC_OK;
    free(dir);
    return st;
}

sc_status sc_ckpt_writer_commit(sc_ckpt_writer *w)
{
    sc_status st = finish_file(w);
    if (st == SC_OK && rename(w->tmp_path, w->path) != 0)
        st = sc_error_set(SC_ERR_IO, "renaming %s to %s: %s", w->tmp_path, w->path,
                          strerror(errno));
    if (st != SC_OK)
        unlink(w->tmp_path);
    else
        st = sync_parent_dir(w->path);
    writer_free(w);
    return st;
}

void sc_ckpt_writer_abort(sc_ckpt_writer *w)
{
    if (!w)
        return;
    if (w->f) {
        fclose(w->f);
        w->f = NULL;
    }
    unlink(w->tmp_path);
    writer_free(w);
}

/* ---------------------------------------------------------------- reader */

typedef struct ckpt_entry {
    char *name;
    entry_kind kind;
    sc_tensor shape; /* tensors: dtype, ndim, shape, data (a view into the file) */
    const uint8_t *data;
    uint64_t size;
} ckpt_entry;

struct sc_ckpt {
    char *path;
    uint8_t *bytes; /* the whole file */
    size_t size;
    ckpt_entry *entries;
    int count, capacity;
};

/* Bounds-checked reading of the entries region [pos, end). */
typedef struct cursor {
    const sc_ckpt *ck;
    size_t pos, end;
    size_t entry; /* offset where the entry being read starts */
} cursor;

static sc_status corrupt(const cursor *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static sc_status corrupt(const cursor *c, const char *fmt, ...)
{
    char what[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return sc_error_set(SC_ERR_FORMAT,
                        "checkpoint %s is truncated or corrupt: entry at offset %zu: %s",
                        c->ck->path, c->entry, what);
}

static sc_status take(cursor *c, uint64_t n, const char *what, const uint8_t **out)
{
    *out = c->ck->bytes + c->pos;
    if (n > c->end - c->pos)
        return corrupt(c, "%s needs %llu bytes at offset %zu, %zu left before the checksum",
                       what, (unsigned long long)n, c->pos, c->end - c->pos);
    c->pos += (size_t)n;
    return SC_OK;
}

static sc_status take_u32(cursor *c, const char *what, uint32_t *v)
{
    const uint8_t *p;
    SC_TRY(take(c, sizeof *v, what, &p));
    memcpy(v, p, sizeof *v);
    return SC_OK;
}

static sc_status take_u64(cursor *c, const char *what, uint64_t *v)
{
    const uint8_t *p;
    SC_TRY(take(c, sizeof *v, what, &p));
    memcpy(v, p, sizeof *v);
    return SC_OK;
}

/* Tensor header: dtype, ndim, shape; the byte count must match them. The
 * element count is sc_tensor_init's, checked against overflow. */
static sc_status take_tensor_header(cursor *c, uint64_t size, sc_tensor *t)
{
    uint32_t dtype, ndim;
    SC_TRY(take_u32(c, "tensor dtype", &dtype));
    SC_TRY(take_u32(c, "tensor rank", &ndim));
    if (dtype >= SC_DTYPE_COUNT)
        return corrupt(c, "unknown dtype %u", dtype);
    if (ndim > SC_MAX_DIMS)
        return corrupt(c, "tensor rank %u above %d", ndim, SC_MAX_DIMS);
    int64_t shape[SC_MAX_DIMS];
    for (uint32_t d = 0; d < ndim; d++) {
        uint64_t dim;
        SC_TRY(take_u64(c, "tensor dimension", &dim));
        if (dim > INT64_MAX)
            return corrupt(c, "tensor dimension %llu out of range", (unsigned long long)dim);
        shape[d] = (int64_t)dim;
    }
    if (sc_tensor_init(t, (sc_dtype)dtype, (int)ndim, shape) != SC_OK)
        return corrupt(c, "%s", sc_error_message());
    if ((uint64_t)sc_tensor_nbytes(t) != size)
        return corrupt(c, "%llu data bytes disagree with dtype and shape",
                       (unsigned long long)size);
    return SC_OK;
}

static sc_status add_entry(sc_ckpt *ck, const ckpt_entry *e)
{
    if (ck->count == ck->capacity) {
        int cap = ck->capacity ? 2 * ck->capacity : 64;
        ckpt_entry *entries = realloc(ck->entries, (size_t)cap * sizeof *entries);
        if (!entries)
            return sc_error_set(SC_ERR_NOMEM, "out of memory reading checkpoint %s", ck->path);
        ck->entries = entries;
        ck->capacity = cap;
    }
    ck->entries[ck->count++] = *e;
    return SC_OK;
}

static const ckpt_entry *find_entry(const sc_ckpt *ck, const char *name)
{
    for (int i = 0; i < ck->count; i++)
        if (strcmp(ck->entries[i].name, name) == 0)
            return &ck->entries[i];
    return NULL;
}

/* The rest of an entry after its kind: lengths, header, name, padding, data. */
static sc_status take_entry(cursor *c, entry_kind kind)
{
    ckpt_entry e = {.kind = kind};
    uint32_t name_len;
    const uint8_t *name, *pad;
    SC_TRY(take_u32(c, "name length", &name_len));
    SC_TRY(take_u64(c, "data size", &e.size));
    if (name_len == 0 || name_len > NAME_MAX_LEN)
        return corrupt(c, "name length %u outside 1..%d", name_len, NAME_MAX_LEN);
    if (kind == ENTRY_TENSOR)
        SC_TRY(take_tensor_header(c, e.size, &e.shape));
    SC_TRY(take(c, name_len, "entry name", &name));
    if (memchr(name, '\0', name_len))
        return corrupt(c, "NUL byte in an entry name");
    SC_TRY(take(c, pad_to_align(c->pos), "alignment padding", &pad));
    SC_TRY(take(c, e.size, "entry data", &e.data));
    e.shape.data = (void *)e.data;
    if (!(e.name = strndup((const char *)name, name_len)))
        return sc_error_set(SC_ERR_NOMEM, "out of memory reading checkpoint %s", c->ck->path);
    if (find_entry(c->ck, e.name)) {
        sc_status st = sc_error_set(SC_ERR_FORMAT, "checkpoint %s: entry '%s' appears twice",
                                    c->ck->path, e.name);
        free(e.name);
        return st;
    }
    sc_status st = add_entry((sc_ckpt *)c->ck, &e);
    if (st != SC_OK)
        free(e.name);
    return st;
}

/* Entries up to the end record, which must sit right before the checksum. */
static sc_status parse_entries(sc_ckpt *ck)
{
    cursor c = {.ck = ck, .pos = HEADER_SIZE, .end = ck->size - CRC_SIZE};
    for (;;) {
        uint32_t kind;
        c.entry = c.pos;
        SC_TRY(take_u32(&c, "entry kind", &kind));
        if (kind == ENTRY_END)
            break;
        if (kind != ENTRY_TENSOR && kind != ENTRY_BLOB)
            return corrupt(&c, "unknown entry kind %u", kind);
        SC_TRY(take_entry(&c, (entry_kind)kind));
    }
    if (c.pos != c.end)
        return corrupt(&c, "%zu bytes after the end record", c.end - c.pos);
    return SC_OK;
}

static sc_status check_header(const sc_ckpt *ck)
{
    if (ck->size < HEADER_SIZE + sizeof(uint32_t) + CRC_SIZE)
        return sc_error_set(SC_ERR_FORMAT, "checkpoint %s is truncated: %zu bytes", ck->path,
                            ck->size);
    if (memcmp(ck->bytes, ckpt_magic, sizeof ckpt_magic) != 0)
        return sc_error_set(SC_ERR_FORMAT, "%s is not a scorch checkpoint (bad magic)", ck->path);
    uint32_t version;
    memcpy(&version, ck->bytes + sizeof ckpt_magic, sizeof version);
    if (version > SC_CKPT_VERSION)
        return sc_error_set(SC_ERR_FORMAT,
                            "checkpoint %s has format version %u, newer than this build "
                            "reads (%d): update scorch",
                            ck->path, version, SC_CKPT_VERSION);
    if (version == 0)
        return sc_error_set(SC_ERR_FORMAT, "checkpoint %s has invalid format version 0",
                            ck->path);
    return SC_OK;
}

static sc_status check_crc(const sc_ckpt *ck)
{
    uint32_t stored;
    size_t body = ck->size - CRC_SIZE;
    memcpy(&stored, ck->bytes + body, sizeof stored);
    uint32_t computed = (uint32_t)crc32_z(crc32_z(0L, Z_NULL, 0), ck->bytes, body);
    if (stored != computed)
        return sc_error_set(SC_ERR_FORMAT,
                            "checkpoint %s is corrupt: checksum 0x%08x, expected 0x%08x",
                            ck->path, computed, stored);
    return SC_OK;
}

static sc_status read_file(sc_ckpt *ck)
{
    FILE *f = fopen(ck->path, "rb");
    if (!f)
        return sc_error_set(SC_ERR_IO, "cannot open checkpoint %s: %s", ck->path,
                            strerror(errno));
    struct stat sb;
    sc_status st = SC_OK;
    if (fstat(fileno(f), &sb) != 0)
        st = sc_error_set(SC_ERR_IO, "cannot stat checkpoint %s: %s", ck->path, strerror(errno));
    else if (!(ck->bytes = malloc(sb.st_size ? (size_t)sb.st_size : 1)))
        st = sc_error_set(SC_ERR_NOMEM, "out of memory for checkpoint %s (%lld bytes)",
                          ck->path, (long long)sb.st_size);
    else if ((ck->size = fread(ck->bytes, 1, (size_t)sb.st_size, f)) != (size_t)sb.st_size)
        st = sc_error_set(SC_ERR_IO, "reading checkpoint %s: %s", ck->path,
                          ferror(f) ? strerror(errno) : "file shrank while reading");
    fclose(f);
    return st;
}

sc_status sc_ckpt_open(const char *path, sc_ckpt **out)
{
    *out = NULL;
    sc_ckpt *ck = calloc(1, sizeof *ck);
    if (!ck || !(ck->path = strdup(path))) {
        free(ck);
        return sc_error_set(SC_ERR_NOMEM, "out of memory opening checkpoint %s", path);
    }
    /* Structure before checksum, so a cut file says so rather than only
     * "checksum mismatch"; every length is checked either way. */
    sc_status st = read_file(ck);
    if (st == SC_OK)
        st = check_header(ck);
    if (st == SC_OK)
        st = parse_entries(ck);
    if (st == SC_OK)
        st = check_crc(ck);
    if (st != SC_OK) {
        sc_ckpt_close(ck);
        return st;
    }
    *out = ck;
    return SC_OK;
}

void sc_ckpt_close(sc_ckpt *ck)
{
    if (!ck)
        return;
    for (int i = 0; i < ck->count; i++)
        free(ck->entries[i].name);
    free(ck->entries);
    free(ck->bytes);
    free(ck->path);
    free(ck);
}

int sc_ckpt_count(const sc_ckpt *ck) { return ck->count; }

const char *sc_ckpt_name(const sc_ckpt *ck, int i) { return ck->entries[i].name; }

bool sc_ckpt_has(const sc_ckpt *ck, const char *name) { return find_entry(ck, name) != NULL; }

sc_status sc_ckpt_read_tensor(const sc_ckpt *ck, const char *name, sc_tensor *dst)
{
    const ckpt_entry *e = find_entry(ck, name);
    if (!e || e->kind != ENTRY_TENSOR)
        return sc_error_set(SC_ERR_INVALID, "checkpoint %s has no tensor '%s'%s", ck->path, name,
                            e ? " (it is a blob)" : "");
    char have[96], want[96];
    if (e->shape.dtype != dst->dtype || !sc_tensor_same_shape(&e->shape, dst))
        return sc_error_set(SC_ERR_INVALID, "checkpoint %s: tensor '%s' is %s %s, expected %s %s",
                            ck->path, name, sc_dtype_name(e->shape.dtype),
                            sc_shape_str(e->shape.ndim, e->shape.shape, have, sizeof have),
                            sc_dtype_name(dst->dtype),
                            sc_shape_str(dst->ndim, dst->shape, want, sizeof want));
    if (!e->size)
        return SC_OK;
    sc_tensor src = e->shape; /* a host view of the mapped entry */
    src.device = (sc_device){SC_DEVICE_CPU, 0};
    sc_status st = sc_tensor_copy(dst, &src);
    return st == SC_OK ? SC_OK : sc_error_wrap(st, "checkpoint %s: tensor '%s'", ck->path, name);
}

const sc_tensor *sc_ckpt_tensor(const sc_ckpt *ck, const char *name)
{
    const ckpt_entry *e = find_entry(ck, name);
    return e && e->kind == ENTRY_TENSOR ? &e->shape : NULL;
}

const void *sc_ckpt_blob(const sc_ckpt *ck, const char *name, size_t *size)
{
    const ckpt_entry *e = find_entry(ck, name);
    if (!e || e->kind != ENTRY_BLOB)
        return NULL;
    if (size)
        *size = (size_t)e->size;
    return e->data;
}
