/* The output folder, the restart's checks and the slots (sweep_impl.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/device.h"
#include "sweep/launch.h"
#include "sweep/sweep_impl.h"

/* ---- OUT ---- */

static sc_status make_dirs(const char *path)
{
    char buf[HOST_PATH_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1;; p++) {
        if (*p && *p != '/')
            continue;
        char end = *p;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return sc_error_set(SC_ERR_IO, "cannot create directory %s: %s", buf,
                                strerror(errno));
        if (!(*p = end))
            return SC_OK;
    }
}

sc_status sweep_lock_out(sweep *s)
{
    if (strlen(s->o->out) + 64 >= sizeof s->out)
        return sc_error_set(SC_ERR_INVALID, "--out: path too long");
    snprintf(s->out, sizeof s->out, "%s", s->o->out);
    snprintf(s->state_path, sizeof s->state_path, "%s/state.jsonl", s->out);
    SC_TRY(make_dirs(s->out));
    char path[HOST_PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/.lock", s->out);
    s->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (s->lock_fd < 0)
        return sc_error_set(SC_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    if (flock(s->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        char pid[32] = "";
        ssize_t n = pread(s->lock_fd, pid, sizeof pid - 1, 0);
        pid[n > 0 ? n : 0] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        return sc_error_set(SC_ERR_STATE, "%s is in use by another scorch-sweep (pid %s)",
                            s->out, pid[0] ? pid : "unknown");
    }
    char pid[32];
    int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(s->lock_fd, 0) != 0 || pwrite(s->lock_fd, pid, (size_t)len, 0) != len)
        return sc_error_set(SC_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    return SC_OK;
}

/* Whether OUT holds anything but its lock. */
static bool out_has_files(const char *out)
{
    DIR *d = opendir(out);
    bool found = false;
    for (struct dirent *e; d && !found && (e = readdir(d));)
        found = strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, ".lock");
    if (d)
        closedir(d);
    return found;
}

void sweep_trial_path(const sweep *s, const host_trial *t, const char *name, char *buf,
                      size_t size)
{
    snprintf(buf, size, "%s/trial-%04lld%s%s", s->out, (long long)t->number, name ? "/" : "",
             name ? name : "");
}

/* ---- a restart ---- */

/* The refusal's text: every difference, as far as a message holds. */
typedef struct changes {
    char text[900];
    int n;
} changes;

static void note_change(void *user, const char *what, const char *was, const char *now)
{
    changes *c = user;
    size_t used = strlen(c->text);
    if (used < sizeof c->text - 1)
        snprintf(c->text + used, sizeof c->text - used, "\n  %s: was %s, now %s", what,
                 was[0] ? was : "(default)", now[0] ? now : "(default)");
    c->n++;
}

static void compare_number(changes *c, const char *what, double was, double now)
{
    char a[32], b[32];
    snprintf(a, sizeof a, "%.17g", was);
    snprintf(b, sizeof b, "%.17g", now);
    if (was != now)
        note_change(c, what, a, b);
}

static void compare_settings(changes *c, const host_sweep_settings *was,
                             const host_sweep_settings *now)
{
    char a[32], b[32];
    snprintf(a, sizeof a, "%llu", (unsigned long long)was->seed);
    snprintf(b, sizeof b, "%llu", (unsigned long long)now->seed);
    if (was->seed != now->seed)
        note_change(c, "--seed", a, b);
    if (strcmp(was->metric, now->metric) != 0)
        note_change(c, "--metric", was->metric, now->metric);
    if (strcmp(was->mode, now->mode) != 0)
        note_change(c, "--mode", was->mode, now->mode);
    if (was->stop.rule != now->stop.rule)
        note_change(c, "--early-stop", host_stop_rule_name(was->stop.rule),
                    host_stop_rule_name(now->stop.rule));
    compare_number(c, "--grace-epochs", was->stop.grace_epochs, now->stop.grace_epochs);
    compare_number(c, "--min-finished", was->stop.min_finished, now->stop.min_finished);
    compare_number(c, "--eta", was->stop.eta, now->stop.eta);
    if (now->samples < was->samples)
        compare_number(c, "--trials (it may only grow)", (double)was->samples,
                       (double)now->samples);
}

/* The trials' records from the last run over the fresh ones: their
 * values must agree, as the plan and the seed do. */
static sc_status take_records(sweep *s, host_trial *old, int64_t old_count)
{
    int dims = s->plan.space.count;
    for (int64_t t = 0; t < old_count && t < s->count; t++) {
        for (int d = 0; d < dims; d++)
            if (strcmp(old[t].values[d], s->trials[t].values[d]) != 0)
                return sc_error_set(SC_ERR_FORMAT, "%s: trial %lld ran with %s = %s, but the "
                                    "sweep gives it %s: the file does not belong to this sweep",
                                    s->state_path, (long long)old[t].number,
                                    s->plan.space.dims[d].name, old[t].values[d],
                                    s->trials[t].values[d]);
        char **fresh = s->trials[t].values; /* old[t]'s stay with old, freed there */
        s->trials[t] = old[t];
        s->trials[t].values = fresh;
    }
    return SC_OK;
}

/* Compares OUT/sweep.ini and the state's settings with this run's, and
 * takes the state's trials. */
static sc_status resume_sweep(sweep *s, const char *copy)
{
    host_sweep_plan was;
    host_trial *old = NULL;
    int64_t old_count = 0;
    changes c = {.n = 0};
    sc_status st = host_sweep_plan_load(copy, &was);
    if (st == SC_OK) {
        host_sweep_plan_diff(&was, &s->plan, note_change, &c);
        st = host_sweep_state_read(s->state_path, &was.space, &s->settings, &old, &old_count);
    }
    if (st == SC_OK && old_count == 0)
        st = sc_error_set(SC_ERR_FORMAT, "%s has %s but no trials in %s: remove it, or choose "
                          "another --out", s->out, copy, s->state_path);
    if (st == SC_OK) {
        compare_settings(&c, &s->settings, &s->o->settings);
        if (c.n)
            st = sc_error_set(SC_ERR_STATE, "%s was begun with another sweep file or other "
                              "settings (%d difference%s), so its trials would change:%s\n"
                              "run it as it was begun, or choose another --out", s->out, c.n,
                              c.n == 1 ? "" : "s", c.text);
    }
    s->settings.samples = s->o->settings.samples;
    if (st == SC_OK)
        st = host_space_trial_count(&s->plan.space, s->settings.samples, &s->count);
    if (st == SC_OK)
        st = host_trials_make(&s->plan.space, s->settings.seed, s->count, &s->trials);
    if (st == SC_OK)
        st = take_records(s, old, old_count);
    host_trials_free(old, old_count, was.space.count);
    host_sweep_plan_free(&was);
    return st;
}

static sc_status begin_sweep(sweep *s, const char *copy)
{
    if (out_has_files(s->out))
        return sc_error_set(SC_ERR_STATE, "%s holds files but no sweep (no %s): choose another "
                            "--out", s->out, copy);
    s->settings = s->o->settings;
    SC_TRY(host_space_trial_count(&s->plan.space, s->settings.samples, &s->count));
    SC_TRY(host_trials_make(&s->plan.space, s->settings.seed, s->count, &s->trials));
    return host_sweep_file_replace(copy, s->plan.text, strlen(s->plan.text));
}

sc_status sweep_prepare(sweep *s)
{
    char copy[HOST_PATH_MAX + 16];
    struct stat st;
    snprintf(copy, sizeof copy, "%s/sweep.ini", s->out);
    SC_TRY(host_sweep_plan_load(s->o->sweep, &s->plan));
    SC_TRY(stat(copy, &st) == 0 ? resume_sweep(s, copy) : begin_sweep(s, copy));
    s->watch = calloc((size_t)s->count, sizeof *s->watch);
    if (!s->watch)
        return sc_error_set(SC_ERR_NOMEM, "out of memory");
    snprintf(s->metric, sizeof s->metric, "%s", s->settings.metric);
    SC_TRY(host_sweep_metric_mode(s->settings.metric[0] ? s->settings.metric : "accuracy",
                                  s->settings.mode, &s->maximize));
    s->settings.stop.maximize = s->maximize;
    snprintf(s->settings.ranked_by, sizeof s->settings.ranked_by, "%s", s->metric);
    return host_sweep_state_write(s->state_path, &s->settings, &s->plan.space, s->trials,
                                  s->count);
}

/* ---- slots ---- */

static sc_status gpu_slots(sweep *s, const host_device_request *req)
{
    host_gpu_inventory gpus;
    host_gpu_inventory_probe(&gpus);
    if (!gpus.backend)
        return sc_error_set(SC_ERR_UNSUPPORTED, "--device %s: this build has no CUDA backend; "
                            "use --device cpu", s->o->device);
    int n = s->o->parallel ? s->o->parallel : req->n;
    if (n > req->n)
        return sc_error_set(SC_ERR_INVALID, "--parallel %d: --device %s lists %d GPU%s, and a "
                            "slot takes one", n, s->o->device, req->n, req->n == 1 ? "" : "s");
    for (int i = 0; i < n; i++) {
        if (req->index[i] >= gpus.count)
            return sc_error_set(SC_ERR_INVALID, "--device %s: cuda:%d is not there (this "
                                "machine has %d GPU%s)", s->o->device, req->index[i],
                                gpus.count, gpus.count == 1 ? "" : "s");
        s->slots[i].gpu = req->index[i];
        snprintf(s->slots[i].device, sizeof s->slots[i].device, "cuda:%d", req->index[i]);
    }
    s->slot_count = n;
    return SC_OK;
}

/* Slots that all give their trials `device` as it is: the cpu's, and a
 * launcher's, which places each trial and its devices itself. */
static sc_status shared_slots(sweep *s, const char *device)
{
    s->slot_count = s->o->parallel ? s->o->parallel : 1;
    if (s->slot_count > SWEEP_SLOTS_MAX)
        return sc_error_set(SC_ERR_INVALID, "--parallel %d: at most %d", s->slot_count,
                            SWEEP_SLOTS_MAX);
    if (strlen(device) >= sizeof s->slots[0].device)
        return sc_error_set(SC_ERR_INVALID, "--device %s: too long", device);
    for (int i = 0; i < s->slot_count; i++) {
        s->slots[i].gpu = -1;
        snprintf(s->slots[i].device, sizeof s->slots[i].device, "%s", device);
    }
    return SC_OK;
}

/* The compute threads of a trial: --threads, else the slot's share of
 * the cores, split among a launcher's ranks. */
static sc_status slot_threads(sweep *s)
{
    int cores = host_cpu_cores(), ranks = host_launcher_ranks(s->o->launcher);
    int share = cores / (s->slot_count * ranks);
    if (!s->o->threads && share < 1 && !s->o->launcher[0])
        return sc_error_set(SC_ERR_INVALID, "--parallel %d is more than the %d cores this "
                            "process may run on: trials would take turns on them; give "
                            "--parallel %d or fewer, or --threads 1 to share the cores anyway",
                            s->slot_count, cores, cores);
    int threads = s->o->threads ? s->o->threads : share > 0 ? share : 1;
    for (int i = 0; i < s->slot_count; i++)
        s->slots[i].threads = threads;
    s->workers = threads;
    return SC_OK;
}

sc_status sweep_check_resumable(const sweep *s)
{
    for (int64_t t = 0; t < s->count; t++) {
        const host_trial *trial = &s->trials[t];
        bool found = trial->status != HOST_TRIAL_RUNNING;
        for (int i = 0; !found && i < s->slot_count; i++)
            found = strcmp(s->slots[i].device, trial->device) == 0;
        if (!found)
            return sc_error_set(SC_ERR_INVALID, "trial-%04lld was interrupted on %s, which no "
                                "slot of --device %s has, and resumes only there (its "
                                "arithmetic is the device's): give --device with %s",
                                (long long)trial->number, trial->device, s->o->device,
                                trial->device);
    }
    return SC_OK;
}

sc_status sweep_make_slots(sweep *s)
{
    host_device_request req;
    sc_status st = host_device_parse(s->o->device, &req);
    if (st != SC_OK)
        return sc_error_wrap(st, "--device");
    if (s->o->launcher[0])
        SC_TRY(shared_slots(s, s->o->device));
    else if (req.mode == HOST_DEVICES_CUDA)
        SC_TRY(gpu_slots(s, &req));
    else if (req.mode == HOST_DEVICES_CPU)
        SC_TRY(shared_slots(s, "cpu"));
    else
        return sc_error_set(SC_ERR_INVALID, "--device %s: a sweep gives each slot one device; "
                            "name them: cpu, or GPUs as cuda:0,1 (with --launcher, the "
                            "launcher places the trials, and --device goes to each as it is)",
                            s->o->device);
    return slot_threads(s);
}

void sweep_free(sweep *s)
{
    for (int64_t t = 0; s->watch && t < s->count; t++)
        host_curve_free(&s->watch[t].curve);
    free(s->watch);
    host_trials_free(s->trials, s->count, s->plan.space.count);
    host_sweep_plan_free(&s->plan);
    if (s->lock_fd >= 0)
        close(s->lock_fd);
}
