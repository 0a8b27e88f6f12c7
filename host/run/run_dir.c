#include "run/run_dir.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/crash.h"
#include "base/jsonl.h"

static const char CKPT_PREFIX[] = "epoch-";
static const char CKPT_SUFFIX[] = ".ckpt";

static sc_status mkdir_p(const char *path)
{
    char buf[HOST_PATH_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return sc_error_set(SC_ERR_IO, "cannot create directory %s: %s", buf,
                                strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
        return sc_error_set(SC_ERR_IO, "cannot create directory %s: %s", buf, strerror(errno));
    return SC_OK;
}

static bool file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* Takes RUN/.lock and writes our PID in it, for the message a second run
 * gets. */
static sc_status lock_run_dir(host_run_dir *rd)
{
    char path[HOST_PATH_MAX + 8];
    snprintf(path, sizeof path, "%s/.lock", rd->root);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return sc_error_set(SC_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        char pid[32] = "";
        ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
        pid[n > 0 ? n : 0] = '\0';
        close(fd);
        return sc_error_set(SC_ERR_STATE,
                            "run directory %s is in use by another scorch-train (pid %s)",
                            rd->root, pid[0] ? pid : "unknown");
    }
    char pid[32];
    int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len) {
        close(fd);
        return sc_error_set(SC_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    }
    rd->lock_fd = fd;
    rd->locked = true;
    return SC_OK;
}

void host_run_dir_close(host_run_dir *rd)
{
    if (rd->locked)
        close(rd->lock_fd);
    rd->locked = false;
}

sc_status host_run_dir_prepare(host_run_dir *rd, const char *path, bool resume)
{
    if (strlen(path) + 32 >= sizeof rd->root)
        return sc_error_set(SC_ERR_INVALID, "run directory path too long: %s", path);
    snprintf(rd->root, sizeof rd->root, "%s", path);
    snprintf(rd->checkpoints, sizeof rd->checkpoints, "%s/checkpoints", path);
    rd->locked = false;
    char last[HOST_PATH_MAX];
    host_run_dir_alias(rd, "last", last, sizeof last);
    if (!resume && file_exists(last))
        return sc_error_set(SC_ERR_INVALID,
                            "%s already holds a run (%s); continue it with --resume, "
                            "or choose another --run-dir",
                            path, last);
    SC_TRY(mkdir_p(rd->checkpoints));
    return lock_run_dir(rd);
}

void host_run_dir_file(const host_run_dir *rd, const char *name, char *buf, size_t size)
{
    snprintf(buf, size, "%s/%s", rd->root, name);
}

void host_run_dir_checkpoint(const host_run_dir *rd, int epoch, int64_t step, char *buf,
                           size_t size)
{
    snprintf(buf, size, "%s/%s%04d-step-%09lld%s", rd->checkpoints, CKPT_PREFIX, epoch,
             (long long)step, CKPT_SUFFIX);
}

void host_run_dir_alias(const host_run_dir *rd, const char *alias, char *buf, size_t size)
{
    snprintf(buf, size, "%s/%s%s", rd->checkpoints, alias, CKPT_SUFFIX);
}

static sc_status copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb");
    FILE *out = in ? fopen(to, "wb") : NULL;
    sc_status st = SC_OK;
    char buf[1 << 16];
    size_t n;
    while (out && (n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n)
            st = SC_ERR_IO;
    if (!in || !out || ferror(in) || fflush(out) != 0 || fsync(fileno(out)) != 0)
        st = SC_ERR_IO;
    if (out && fclose(out) != 0)
        st = SC_ERR_IO;
    if (in)
        fclose(in);
    if (st != SC_OK)
        return sc_error_set(st, "cannot copy %s to %s: %s", from, to, strerror(errno));
    return SC_OK;
}

/* fsync of a folder, so that a rename in it survives a power cut. A
 * filesystem that cannot sync folders (EINVAL) is taken at its word. */
static sc_status sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int err = fd < 0 || (fsync(fd) != 0 && errno != EINVAL) ? errno : 0;
    if (fd >= 0)
        close(fd);
    return err ? sc_error_set(SC_ERR_IO, "cannot sync folder %s: %s", dir, strerror(err))
               : SC_OK;
}

sc_status host_run_dir_publish(const host_run_dir *rd, const char *ckpt, const char *alias)
{
    char dst[HOST_PATH_MAX], tmp[HOST_PATH_MAX + 8];
    host_run_dir_alias(rd, alias, dst, sizeof dst);
    snprintf(tmp, sizeof tmp, "%s.tmp", dst);
    unlink(tmp);
    if (link(ckpt, tmp) != 0)
        SC_TRY(copy_file(ckpt, tmp));
    if (rename(tmp, dst) != 0)
        return sc_error_set(SC_ERR_IO, "cannot rename %s to %s: %s", tmp, dst,
                            strerror(errno));
    /* The checkpoint's own rename was synced; the alias's must be too, or
     * a power cut could bring back an older last.ckpt after later records
     * of metrics.jsonl reached the disk. */
    SC_TRY(sync_dir(rd->checkpoints));
    if (strcmp(alias, "last") == 0) /* what a crash report offers to resume from */
        host_crash_set_checkpoint(dst, true);
    return SC_OK;
}

static bool is_numbered(const char *name)
{
    size_t n = strlen(name), p = sizeof CKPT_PREFIX - 1, s = sizeof CKPT_SUFFIX - 1;
    return n > p + s && strncmp(name, CKPT_PREFIX, p) == 0 &&
           strcmp(name + n - s, CKPT_SUFFIX) == 0;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(char **names, size_t count)
{
    for (size_t i = 0; i < count; i++)
        free(names[i]);
    free(names);
}

/* Appends a copy of name to *names (of *count, room for *cap). */
static sc_status add_name(char ***names, size_t *count, size_t *cap, const char *name)
{
    if (*count == *cap) {
        size_t grown_cap = *cap ? 2 * *cap : 16;
        char **grown = realloc(*names, grown_cap * sizeof *grown);
        if (!grown)
            return sc_error_set(SC_ERR_NOMEM, "out of memory listing checkpoints");
        *names = grown;
        *cap = grown_cap;
    }
    if (!((*names)[*count] = strdup(name)))
        return sc_error_set(SC_ERR_NOMEM, "out of memory listing checkpoints");
    (*count)++;
    return SC_OK;
}

sc_status host_run_dir_list_numbered(const char *checkpoints, char ***names, size_t *count)
{
    *names = NULL;
    *count = 0;
    DIR *d = opendir(checkpoints);
    if (!d)
        return sc_error_set(SC_ERR_IO, "cannot list %s: %s", checkpoints, strerror(errno));
    size_t cap = 0;
    sc_status st = SC_OK;
    for (struct dirent *e; st == SC_OK && (e = readdir(d));)
        if (is_numbered(e->d_name))
            st = add_name(names, count, &cap, e->d_name);
    closedir(d);
    if (st != SC_OK) {
        free_names(*names, *count);
        *names = NULL;
        *count = 0;
        return st;
    }
    /* Zero-padded names sort oldest first. */
    qsort(*names, *count, sizeof **names, compare_names);
    return SC_OK;
}

sc_status host_run_dir_prune(const host_run_dir *rd, int keep)
{
    char **names;
    size_t count;
    SC_TRY(host_run_dir_list_numbered(rd->checkpoints, &names, &count));
    sc_status st = SC_OK;
    for (size_t i = 0; st == SC_OK && i + (size_t)keep < count; i++) {
        char path[HOST_PATH_MAX + 256];
        snprintf(path, sizeof path, "%s/%s", rd->checkpoints, names[i]);
        if (unlink(path) != 0)
            st = sc_error_set(SC_ERR_IO, "cannot remove %s: %s", path, strerror(errno));
    }
    free_names(names, count);
    return st;
}

/* ---- metrics.jsonl on resume ---- */

/* A whole record's phase ("" for a hook's scalar) and step; false for a
 * line that is not one of ours. */
static bool record_position(const char *line, char *phase, size_t size, double *step)
{
    host_json_record rec;
    if (host_json_record_parse(line, &rec) != SC_OK)
        return false;
    const host_json_field *p = host_json_record_get(&rec, "phase");
    const host_json_field *s = host_json_record_get(&rec, "step");
    bool ours = s && s->type == HOST_JSON_NUMBER && (!p || p->type == HOST_JSON_STRING);
    if (ours) {
        snprintf(phase, size, "%s", p ? p->string : "");
        *step = s->number;
    }
    host_json_record_free(&rec);
    return ours;
}

bool host_run_dir_has_record(const host_run_dir *rd, const char *phase, int64_t step)
{
    char path[HOST_PATH_MAX];
    host_run_dir_file(rd, "metrics.jsonl", path, sizeof path);
    FILE *in = fopen(path, "r");
    if (!in)
        return false;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    bool found = false;
    while (!found && (n = getline(&line, &cap, in)) > 0)
        if (line[n - 1] == '\n') { /* a whole record */
            line[n - 1] = '\0';
            char at_phase[64];
            double at;
            found = record_position(line, at_phase, sizeof at_phase, &at) &&
                    strcmp(at_phase, phase) == 0 && at == (double)step;
        }
    free(line);
    fclose(in);
    return found;
}

/* Whether a line of metrics.jsonl stays: a whole record (a line cut short
 * by a kill is dropped, else the next record would be glued to it) of a
 * step the checkpoint holds. A line that does not parse is kept: it is not
 * ours to drop. */
static bool record_kept(char *line, ssize_t n, int64_t step)
{
    if (line[n - 1] != '\n')
        return false;
    line[n - 1] = '\0';
    char phase[64];
    double at;
    bool kept = !record_position(line, phase, sizeof phase, &at) || at <= (double)step;
    line[n - 1] = '\n';
    return kept;
}

static sc_status copy_kept(FILE *in, FILE *out, int64_t step)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, in)) > 0)
        if (record_kept(line, n, step))
            fwrite(line, 1, (size_t)n, out);
    free(line);
    return ferror(in) ? SC_ERR_IO : SC_OK;
}

sc_status host_run_dir_trim_metrics(const host_run_dir *rd, int64_t step)
{
    char path[HOST_PATH_MAX], tmp[HOST_PATH_MAX + 8];
    host_run_dir_file(rd, "metrics.jsonl", path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *in = fopen(path, "r");
    if (!in)
        return SC_OK; /* nothing logged yet */
    FILE *out = fopen(tmp, "w");
    if (!out) {
        fclose(in);
        return sc_error_set(SC_ERR_IO, "cannot write %s: %s", tmp, strerror(errno));
    }
    sc_status st = copy_kept(in, out, step);
    fclose(in);
    /* The old file goes only once the new one is on the disk. */
    if (fflush(out) != 0 || ferror(out) || fsync(fileno(out)) != 0)
        st = SC_ERR_IO;
    if (fclose(out) != 0 || st != SC_OK || rename(tmp, path) != 0) {
        int err = errno;
        unlink(tmp);
        return sc_error_set(SC_ERR_IO, "cannot rewrite %s: %s", path, strerror(err));
    }
    return sync_dir(rd->root);
}
