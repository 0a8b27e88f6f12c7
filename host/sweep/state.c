#include "sweep/state.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/jsonl.h"

static const char *const status_names[] = {"pending", "running", "done", "stopped", "failed"};
enum { STATUS_COUNT = sizeof status_names / sizeof status_names[0] };

const char *host_trial_status_name(host_trial_status status) { return status_names[status]; }

/* ---- trials ---- */

sc_status host_trials_make(const host_space *space, uint64_t seed, int64_t count,
                           host_trial **trials)
{
    *trials = calloc((size_t)(count ? count : 1), sizeof **trials);
    char(*values)[HOST_SPACE_VALUE_MAX] = calloc((size_t)space->count + 1, sizeof *values);
    sc_status st = *trials && values ? SC_OK : sc_error_set(SC_ERR_NOMEM, "out of memory");
    for (int64_t t = 0; st == SC_OK && t < count; t++) {
        host_trial *trial = &(*trials)[t];
        *trial = (host_trial){.number = t + 1, .best = NAN, .last = NAN};
        host_space_trial_values(space, seed, t, values);
        trial->values = calloc((size_t)space->count + 1, sizeof *trial->values);
        for (int d = 0; trial->values && d < space->count; d++)
            if (!(trial->values[d] = strdup(values[d])))
                st = sc_error_set(SC_ERR_NOMEM, "out of memory");
        if (!trial->values)
            st = sc_error_set(SC_ERR_NOMEM, "out of memory");
    }
    free(values);
    if (st != SC_OK) {
        host_trials_free(*trials, count, space->count);
        *trials = NULL;
    }
    return st;
}

void host_trials_free(host_trial *trials, int64_t count, int dims)
{
    for (int64_t t = 0; trials && t < count; t++) {
        for (int d = 0; trials[t].values && d < dims; d++)
            free(trials[t].values[d]);
        free(trials[t].values);
    }
    free(trials);
}

/* ---- writing ---- */

/* ,"key": followed by a number (exact; null when not finite) or a string. */
static void put_number(FILE *f, const char *key, double v)
{
    fprintf(f, ",\"%s\":", key);
    if (isfinite(v))
        fprintf(f, "%.17g", v);
    else
        fputs("null", f);
}

static void put_string(FILE *f, const char *key, const char *v)
{
    fputc(',', f);
    host_json_put_string(f, key);
    fputc(':', f);
    host_json_put_string(f, v);
}

static void write_settings(FILE *f, const host_sweep_settings *s)
{
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)s->seed);
    fputs("{\"scorch_sweep\":1", f);
    put_string(f, "seed", seed); /* a string: JSON numbers hold 53 bits */
    put_number(f, "trials", (double)s->samples);
    put_string(f, "metric", s->metric);
    put_string(f, "mode", s->mode);
    put_string(f, "early_stop", host_stop_rule_name(s->stop.rule));
    put_number(f, "grace_epochs", s->stop.grace_epochs);
    put_number(f, "min_finished", s->stop.min_finished);
    put_number(f, "eta", s->stop.eta);
    put_string(f, "ranked_by", s->ranked_by);
    put_number(f, "higher_is_better", s->stop.maximize);
    fputs("}\n", f);
}

static void write_trial(FILE *f, const host_space *space, const host_trial *t)
{
    fprintf(f, "{\"trial\":%lld", (long long)t->number);
    put_string(f, "status", host_trial_status_name(t->status));
    put_number(f, "starts", t->starts);
    put_number(f, "resumes", t->resumes);
    put_number(f, "pid", (double)t->pid);
    put_number(f, "threads", t->threads);
    put_string(f, "device", t->device);
    put_number(f, "epochs", t->epochs);
    put_number(f, "epoch", t->epoch);
    put_number(f, "best", t->best);
    put_number(f, "best_epoch", t->best_epoch);
    put_number(f, "last", t->last);
    put_number(f, "time_s", t->time_s);
    put_number(f, "judged_epoch", t->judged_epoch);
    put_number(f, "stop_sent", t->stop_sent);
    put_string(f, "stop", t->stop);
    put_string(f, "message", t->message);
    for (int d = 0; d < space->count; d++) {
        char key[HOST_SPACE_NAME_MAX + 8];
        snprintf(key, sizeof key, "param:%s", space->dims[d].name);
        put_string(f, key, t->values[d]);
    }
    fputs("}\n", f);
}

sc_status host_sweep_file_replace(const char *path, const char *text, size_t len)
{
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return sc_error_set(SC_ERR_INVALID, "path too long: %s", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return sc_error_set(SC_ERR_IO, "cannot write %s: %s", tmp, strerror(errno));
    bool ok = true;
    for (size_t done = 0; ok && done < len;) {
        ssize_t n = write(fd, text + done, len - done);
        ok = n > 0 || (n < 0 && errno == EINTR);
        done += n > 0 ? (size_t)n : 0;
    }
    ok = ok && fsync(fd) == 0;
    int err = errno;
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        err = ok ? errno : err;
        unlink(tmp);
        return sc_error_set(SC_ERR_IO, "cannot write %s: %s", path, strerror(err));
    }
    char dir[4200];
    snprintf(dir, sizeof dir, "%s", path);
    int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) { /* the rename survives a power cut */
        fsync(dfd);
        close(dfd);
    }
    return SC_OK;
}

sc_status host_sweep_state_write(const char *path, const host_sweep_settings *settings,
                                 const host_space *space, const host_trial *trials,
                                 int64_t count)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return sc_error_set(SC_ERR_NOMEM, "out of memory");
    write_settings(f, settings);
    for (int64_t t = 0; t < count; t++)
        write_trial(f, space, &trials[t]);
    sc_status st = fclose(f) == 0 ? host_sweep_file_replace(path, text, len)
                                  : sc_error_set(SC_ERR_NOMEM, "out of memory");
    free(text);
    return st;
}

/* ---- reading ---- */

typedef struct reader {
    const char *path;
    int line;
    const host_json_record *rec;
} reader;

static sc_status field(const reader *r, const char *key, host_json_type type,
                       const host_json_field **out)
{
    *out = host_json_record_get(r->rec, key);
    if (*out && ((*out)->type == type || (type == HOST_JSON_NUMBER &&
                                          (*out)->type == HOST_JSON_NULL)))
        return SC_OK;
    return sc_error_set(SC_ERR_FORMAT, "%s:%d: %s \"%s\"", r->path, r->line,
                        *out ? "wrong type of" : "no", key);
}

static sc_status read_number(const reader *r, const char *key, double *v)
{
    const host_json_field *f;
    SC_TRY(field(r, key, HOST_JSON_NUMBER, &f));
    *v = f->type == HOST_JSON_NUMBER ? f->number : NAN;
    return SC_OK;
}

static sc_status read_int(const reader *r, const char *key, double min, double max, int *v)
{
    double d;
    SC_TRY(read_number(r, key, &d));
    if (!(d >= min && d <= max) || d != floor(d))
        return sc_error_set(SC_ERR_FORMAT, "%s:%d: \"%s\" is %g, not an integer in %g..%g",
                            r->path, r->line, key, d, min, max);
    *v = (int)d;
    return SC_OK;
}

static sc_status read_string(const reader *r, const char *key, char *out, size_t size)
{
    const host_json_field *f;
    SC_TRY(field(r, key, HOST_JSON_STRING, &f));
    if (strlen(f->string) >= size)
        return sc_error_set(SC_ERR_FORMAT, "%s:%d: \"%s\" is too long", r->path, r->line, key);
    snprintf(out, size, "%s", f->string);
    return SC_OK;
}

static sc_status read_settings(const reader *r, host_sweep_settings *s)
{
    char seed[32], rule[16], *end;
    double samples;
    const host_json_field *version;
    SC_TRY(field(r, "scorch_sweep", HOST_JSON_NUMBER, &version));
    SC_TRY(read_string(r, "seed", seed, sizeof seed));
    SC_TRY(read_number(r, "trials", &samples));
    SC_TRY(read_string(r, "metric", s->metric, sizeof s->metric));
    SC_TRY(read_string(r, "mode", s->mode, sizeof s->mode));
    SC_TRY(read_string(r, "early_stop", rule, sizeof rule));
    SC_TRY(read_int(r, "grace_epochs", 0, 1e6, &s->stop.grace_epochs));
    SC_TRY(read_int(r, "min_finished", 0, 1e6, &s->stop.min_finished));
    SC_TRY(read_int(r, "eta", 0, 1e6, &s->stop.eta));
    SC_TRY(read_string(r, "ranked_by", s->ranked_by, sizeof s->ranked_by));
    int maximize;
    SC_TRY(read_int(r, "higher_is_better", 0, 1, &maximize));
    s->stop.maximize = maximize;
    errno = 0;
    s->seed = strtoull(seed, &end, 10);
    if (version->number != 1 || errno || *end || !seed[0] || !(samples >= 0) ||
        !host_stop_rule_parse(rule, &s->stop.rule))
        return sc_error_set(SC_ERR_FORMAT, "%s:%d: not a state file of this scorch-sweep",
                            r->path, r->line);
    s->samples = (int64_t)samples;
    return SC_OK;
}

static sc_status read_status(const reader *r, host_trial_status *status)
{
    char name[16];
    SC_TRY(read_string(r, "status", name, sizeof name));
    for (int i = 0; i < STATUS_COUNT; i++)
        if (strcmp(name, status_names[i]) == 0) {
            *status = (host_trial_status)i;
            return SC_OK;
        }
    return sc_error_set(SC_ERR_FORMAT, "%s:%d: unknown status '%s'", r->path, r->line, name);
}

static sc_status read_values(const reader *r, const host_space *space, host_trial *t)
{
    t->values = calloc((size_t)space->count + 1, sizeof *t->values);
    if (!t->values)
        return sc_error_set(SC_ERR_NOMEM, "out of memory");
    for (int d = 0; d < space->count; d++) {
        char key[HOST_SPACE_NAME_MAX + 8];
        const host_json_field *f;
        snprintf(key, sizeof key, "param:%s", space->dims[d].name);
        SC_TRY(field(r, key, HOST_JSON_STRING, &f));
        if (!(t->values[d] = strdup(f->string)))
            return sc_error_set(SC_ERR_NOMEM, "out of memory");
    }
    return SC_OK;
}

static sc_status read_trial(const reader *r, const host_space *space, int64_t number,
                            host_trial *t)
{
    double pid;
    int n, stop_sent;
    *t = (host_trial){.number = number};
    SC_TRY(read_int(r, "trial", 1, 1e9, &n));
    if (n != number)
        return sc_error_set(SC_ERR_FORMAT, "%s:%d: trial %d where trial %lld belongs", r->path,
                            r->line, n, (long long)number);
    SC_TRY(read_status(r, &t->status));
    SC_TRY(read_int(r, "starts", 0, 1e9, &t->starts));
    SC_TRY(read_int(r, "resumes", 0, 1e9, &t->resumes));
    SC_TRY(read_number(r, "pid", &pid));
    SC_TRY(read_int(r, "threads", 0, 1e6, &t->threads));
    SC_TRY(read_string(r, "device", t->device, sizeof t->device));
    SC_TRY(read_int(r, "epochs", 0, 1e9, &t->epochs));
    SC_TRY(read_int(r, "epoch", 0, 1e9, &t->epoch));
    SC_TRY(read_number(r, "best", &t->best));
    SC_TRY(read_int(r, "best_epoch", 0, 1e9, &t->best_epoch));
    SC_TRY(read_number(r, "last", &t->last));
    SC_TRY(read_number(r, "time_s", &t->time_s));
    SC_TRY(read_int(r, "judged_epoch", 0, 1e9, &t->judged_epoch));
    SC_TRY(read_int(r, "stop_sent", 0, 1, &stop_sent));
    SC_TRY(read_string(r, "stop", t->stop, sizeof t->stop));
    SC_TRY(read_string(r, "message", t->message, sizeof t->message));
    t->pid = isfinite(pid) ? (long)pid : 0;
    t->stop_sent = stop_sent;
    return read_values(r, space, t);
}

static sc_status read_records(const char *path, const host_jsonl_file *file,
                              const host_space *space, host_sweep_settings *settings,
                              host_trial *trials)
{
    reader r = {.path = path, .line = 1, .rec = &file->records[0]};
    SC_TRY(read_settings(&r, settings));
    for (int i = 1; i < file->count; i++) {
        r = (reader){.path = path, .line = i + 1, .rec = &file->records[i]};
        SC_TRY(read_trial(&r, space, i, &trials[i - 1]));
    }
    return SC_OK;
}

sc_status host_sweep_state_read(const char *path, const host_space *space,
                                host_sweep_settings *settings, host_trial **trials,
                                int64_t *count)
{
    struct stat st;
    *trials = NULL;
    *count = 0;
    if (stat(path, &st) != 0 && errno == ENOENT)
        return SC_OK;
    host_jsonl_file file;
    SC_TRY(host_jsonl_read(path, &file));
    sc_status s = file.count ? SC_OK : sc_error_set(SC_ERR_FORMAT, "%s is empty", path);
    if (s == SC_OK && !(*trials = calloc((size_t)file.count, sizeof **trials)))
        s = sc_error_set(SC_ERR_NOMEM, "out of memory");
    if (s == SC_OK)
        s = read_records(path, &file, space, settings, *trials);
    if (s == SC_OK) {
        *count = file.count - 1;
    } else {
        host_trials_free(*trials, file.count - 1, space->count);
        *trials = NULL;
    }
    host_jsonl_free(&file);
    return s;
}
