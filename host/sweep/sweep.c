/* The sweep's loop: slots filled with trials, trials watched and judged,
 * ended trials recorded, the reports (sweep.h). */
#define _XOPEN_SOURCE 700 /* nftw */
#include "sweep/sweep.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/device.h"
#include "sweep/early_stop.h"
#include "sweep/launch.h"
#include "sweep/results.h"
#include "sweep/sweep_impl.h"

enum { EXIT_INTERRUPTED_TRAIN = 130 }; /* scorch-train's, after SIGINT or SIGTERM */

static const double POLL_S = 0.1, PROGRESS_EVERY_S = 0.5;

/* ---- signals ---- */

static volatile sig_atomic_t signals_received;

static void on_signal(int sig)
{
    (void)sig;
    signals_received++;
}

/* SIGINT and SIGTERM stop the sweep; without SA_RESTART, so that the
 * loop's sleep ends at once. */
static void install_signals(void)
{
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

/* ---- the metric ---- */

sc_status host_sweep_metric_mode(const char *metric, const char *mode, bool *maximize)
{
    if (strcmp(mode, "max") == 0 || strcmp(mode, "min") == 0) {
        *maximize = strcmp(mode, "max") == 0;
        return SC_OK;
    }
    if (mode[0])
        return sc_error_set(SC_ERR_INVALID, "--mode: '%s' is not max or min", mode);
    if (strcmp(metric, "accuracy") == 0 || strcmp(metric, "loss") == 0) {
        *maximize = strcmp(metric, "accuracy") == 0;
        return SC_OK;
    }
    return sc_error_set(SC_ERR_INVALID, "--metric %s: give --mode max or min too (whether a "
                        "higher %s is better)", metric, metric);
}

/* ---- what the sweep says ---- */

static int count_status(const sweep *s, host_trial_status status)
{
    int n = 0;
    for (int64_t t = 0; t < s->count; t++)
        n += s->trials[t].status == status;
    return n;
}

/* Trials done, stopped or failed. */
static int ended_count(const sweep *s)
{
    return count_status(s, HOST_TRIAL_DONE) + count_status(s, HOST_TRIAL_STOPPED) +
           count_status(s, HOST_TRIAL_FAILED);
}

static int running_count(const sweep *s)
{
    int n = 0;
    for (int i = 0; i < s->slot_count; i++)
        n += s->slots[i].trial != NULL;
    return n;
}

static const host_trial *best_trial(const sweep *s)
{
    const host_trial *best = NULL;
    for (int64_t t = 0; t < s->count; t++)
        if (host_metric_better(s->trials[t].best, best ? best->best : NAN, s->maximize))
            best = &s->trials[t];
    return best;
}

/* The progress line, on a terminal: redrawn in place. */
static void draw_progress(const sweep *s)
{
    int ended = ended_count(s);
    int running = running_count(s);
    const host_trial *best = best_trial(s);
    printf("\r\033[Ksweep: %d done, %d running, %lld left", ended, running,
           (long long)(s->count - ended - running));
    if (best)
        printf("; best %s %.4f (trial-%04lld)", s->metric, best->best, (long long)best->number);
    fflush(stdout);
}

/* A line about a trial: above the progress line on a terminal. */
__attribute__((format(printf, 2, 3))) static void say(const sweep *s, const char *fmt, ...)
{
    if (s->o->progress)
        fputs("\r\033[K", stdout);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    if (s->o->progress)
        draw_progress(s);
    fflush(stdout);
}

static void values_text(const sweep *s, const host_trial *t, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int d = 0; d < s->plan.space.count && used < size; d++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s=%s", d ? " " : "",
                                 s->plan.space.dims[d].name, t->values[d]);
}

static sc_status save_state(const sweep *s)
{
    return host_sweep_state_write(s->state_path, &s->settings, &s->plan.space, s->trials,
                                  s->count);
}

static sc_status save_results(const sweep *s)
{
    char path[HOST_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/results.csv", s->out);
    host_sweep_report r = {&s->plan.space, s->trials, s->count,
                           s->metric[0] ? s->metric : "metric", s->maximize};
    return host_sweep_results_write(&r, path);
}

/* ---- watching a trial ---- */

static void adopt_metric(sweep *s, const char *name)
{
    bool maximize;
    snprintf(s->metric, sizeof s->metric, "%s", name);
    snprintf(s->settings.ranked_by, sizeof s->settings.ranked_by, "%s", name);
    if (host_sweep_metric_mode(name, s->settings.mode, &maximize) == SC_OK)
        s->maximize = s->settings.stop.maximize = maximize;
}

/* Reads the trial's metrics.jsonl when it changed (always with `force`);
 * true when its epochs moved on. A file being rewritten (a resume trims
 * it) may not read: the next look will. */
static bool refresh_curve(sweep *s, host_trial *t, bool force)
{
    sweep_watch *w = &s->watch[t->number - 1];
    char path[HOST_PATH_MAX + 64], metric[64];
    struct stat st;
    sweep_trial_path(s, t, "metrics.jsonl", path, sizeof path);
    if (stat(path, &st) != 0)
        return false;
    if (!force && st.st_size == w->seen_size && st.st_mtim.tv_sec == w->seen_mtime.tv_sec &&
        st.st_mtim.tv_nsec == w->seen_mtime.tv_nsec)
        return false;
    host_curve curve;
    snprintf(metric, sizeof metric, "%s", s->metric);
    if (host_curve_read(path, metric, sizeof metric, &curve) != SC_OK)
        return false;
    w->seen_size = st.st_size;
    w->seen_mtime = st.st_mtim;
    if (!s->metric[0] && curve.epochs > 0)
        adopt_metric(s, metric);
    bool moved = curve.epochs != t->epoch;
    s->dirty = s->dirty || moved;
    host_curve_free(&w->curve);
    w->curve = curve;
    t->epoch = curve.epochs;
    t->best = host_curve_best(&curve, curve.epochs, s->maximize, &t->best_epoch);
    t->last = curve.epochs ? curve.values[curve.epochs - 1] : NAN;
    return moved;
}

/* Judges the trial's epochs not judged yet; stops it when the rule says. */
static void judge(sweep *s, host_trial *t)
{
    const host_stop_policy *policy = &s->settings.stop;
    if (policy->rule == HOST_STOP_NONE || t->stop_sent || !s->metric[0])
        return;
    host_stop_peer *peers = calloc((size_t)s->count, sizeof *peers);
    int n = 0;
    for (int64_t u = 0; peers && u < s->count; u++)
        if (&s->trials[u] != t && s->watch[u].curve.epochs > 0)
            peers[n++] = (host_stop_peer){&s->watch[u].curve,
                                          s->trials[u].status == HOST_TRIAL_DONE};
    const host_curve *curve = &s->watch[t->number - 1].curve;
    for (int e = t->judged_epoch + 1; peers && e <= curve->epochs && !t->stop_sent; e++) {
        t->judged_epoch = e;
        s->dirty = true;
        if (!host_stop_judge(policy, s->metric, curve, e, t->epochs, peers, n, t->stop,
                             sizeof t->stop))
            continue;
        t->stop_sent = true;
        if (t->pid > 0) /* never 0: that would be the sweep's own process group */
            kill((pid_t)t->pid, SIGTERM);
        say(s, "trial-%04lld stopping: %s", (long long)t->number, t->stop);
    }
    free(peers);
}

/* ---- launching ---- */

static bool file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path) == 0 || errno == ENOENT ? 0 : -1;
}

/* An interrupted trial without a checkpoint starts again from nothing:
 * what its first launch wrote goes (its logs stay). */
static sc_status clear_run(const sweep *s, const host_trial *t)
{
    static const char *const outputs[] = {"metrics.jsonl", "config.ini", "tensorboard",
                                          "checkpoints"};
    char path[HOST_PATH_MAX + 64];
    for (size_t i = 0; i < sizeof outputs / sizeof outputs[0]; i++) {
        sweep_trial_path(s, t, outputs[i], path, sizeof path);
        if (file_exists(path) && nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
            return sc_error_set(SC_ERR_IO, "cannot remove %s: %s", path, strerror(errno));
    }
    return SC_OK;
}

/* Writes the trial's INI (a fresh start) and reads its epochs back. */
static sc_status trial_config(const sweep *s, host_trial *t, bool write, const char *ini)
{
    char title[HOST_PATH_MAX + 64], *text = NULL;
    snprintf(title, sizeof title, "trial-%04lld of the sweep in %s", (long long)t->number,
             s->out);
    SC_TRY(host_sweep_plan_trial_ini(&s->plan, t->values, title, &text));
    host_config *cfg = malloc(sizeof *cfg);
    sc_status st = cfg ? SC_OK : sc_error_set(SC_ERR_NOMEM, "out of memory");
    if (st == SC_OK) {
        host_config_defaults(cfg);
        st = host_config_load_ini_text(cfg, HOST_PROGRAM_TRAIN, text, ini);
        t->epochs = cfg->epochs;
    }
    if (st == SC_OK && (write || !file_exists(ini)))
        st = host_sweep_file_replace(ini, text, strlen(text));
    free(cfg);
    free(text);
    return st;
}

static void fail_trial(sweep *s, host_trial *t, const char *why)
{
    t->status = HOST_TRIAL_FAILED;
    snprintf(t->message, sizeof t->message, "%s", why);
    s->dirty = s->results_dirty = true;
    say(s, "trial-%04lld failed: %s", (long long)t->number, t->message);
}

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : 0;
}

static void launch(sweep *s, sweep_slot *slot, host_trial *t)
{
    char dir[HOST_PATH_MAX + 32], ini[HOST_PATH_MAX + 64], last[HOST_PATH_MAX + 64];
    char err_log[HOST_PATH_MAX + 64], values[2048];
    sweep_trial_path(s, t, NULL, dir, sizeof dir);
    sweep_trial_path(s, t, "trial.ini", ini, sizeof ini);
    sweep_trial_path(s, t, "checkpoints/last.ckpt", last, sizeof last);
    sweep_trial_path(s, t, "stderr.log", err_log, sizeof err_log);
    bool interrupted = t->status == HOST_TRIAL_RUNNING, resume = interrupted && file_exists(last);
    sc_status st = mkdir(dir, 0777) == 0 || errno == EEXIST
                       ? SC_OK
                       : sc_error_set(SC_ERR_IO, "cannot create %s: %s", dir, strerror(errno));
    if (st == SC_OK && interrupted && !resume)
        st = clear_run(s, t);
    if (st == SC_OK)
        st = trial_config(s, t, !resume, ini);
    if (!t->threads)
        t->threads = slot->threads;
    snprintf(t->device, sizeof t->device, "%s", slot->device);
    host_trial_launch l = {s->o->train, s->o->launcher, dir, ini, t->threads, s->workers,
                           slot->device, resume};
    pid_t pid = 0;
    s->watch[t->number - 1].err_from = file_size(err_log);
    if (st != SC_OK) {
        fail_trial(s, t, sc_error_message());
        return;
    }
    /* Recorded before it starts: a sweep killed right after the start
     * finds it interrupted, never pending with a run in its directory. */
    t->status = HOST_TRIAL_RUNNING;
    *(resume ? &t->resumes : &t->starts) += 1;
    if (save_state(s) != SC_OK) {
        s->broken = true;
        return;
    }
    if (host_trial_spawn(&l, &pid) != SC_OK) {
        fail_trial(s, t, sc_error_message());
        return;
    }
    t->pid = pid;
    s->dirty = true;
    s->watch[t->number - 1].started = host_now();
    slot->trial = t;
    values_text(s, t, values, sizeof values);
    say(s, "trial-%04lld %s: %s (%s, %d thread%s)", (long long)t->number,
        resume ? "resumed from its last checkpoint" : interrupted ? "started again (it had no "
                                                                    "checkpoint)"
                                                         : "started",
        values, slot->device, t->threads, t->threads == 1 ? "" : "s");
}

/* Whether a scorch-train still holds the trial's run directory (one from
 * a sweep that was killed, still writing its checkpoint); says so once. */
static bool run_dir_busy(const sweep *s, const host_trial *t, bool *told)
{
    char path[HOST_PATH_MAX + 64];
    sweep_trial_path(s, t, ".lock", path, sizeof path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    bool busy = flock(fd, LOCK_EX | LOCK_NB) != 0;
    char pid[32] = "";
    if (busy && !*told) {
        ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
        pid[n > 0 ? n : 0] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        say(s, "trial-%04lld waits: a scorch-train (pid %s) still holds its run directory",
            (long long)t->number, pid[0] ? pid : "unknown");
        *told = true;
    }
    close(fd);
    return busy;
}

/* The next trial for the slot: an interrupted one of its device first,
 * then the first not started. */
static host_trial *next_trial(sweep *s, const sweep_slot *slot)
{
    for (int64_t u = 0; u < s->count; u++) {
        host_trial *t = &s->trials[u];
        sweep_watch *w = &s->watch[u];
        if (t->status == HOST_TRIAL_RUNNING && !t->pid && !w->left &&
            strcmp(t->device, slot->device) == 0 && !run_dir_busy(s, t, &w->told_busy))
            return t;
    }
    for (int64_t u = 0; u < s->count; u++)
        if (s->trials[u].status == HOST_TRIAL_PENDING)
            return &s->trials[u];
    return NULL;
}

/* A GPU slot starts a trial only while no other run holds its GPU. */
static bool gpu_free(const sweep *s, sweep_slot *slot)
{
    const char *dir = getenv("SCORCH_DEVICE_LOCK_DIR"); /* as run/session.c's */
    int fd;
    if (host_device_lock(dir && dir[0] ? dir : HOST_DEVICE_LOCK_DIR, slot->gpu,
                         "scorch-sweep (looking)", &fd) == SC_OK) {
        close(fd);
        slot->told_held = false;
        return true;
    }
    if (!slot->told_held)
        say(s, "the slot of %s waits: %s", slot->device, sc_error_message());
    slot->told_held = true;
    return false;
}

static void fill_slots(sweep *s)
{
    for (int i = 0; i < s->slot_count; i++) {
        sweep_slot *slot = &s->slots[i];
        host_trial *t = slot->trial ? NULL : next_trial(s, slot);
        if (t && (slot->gpu < 0 || gpu_free(s, slot)))
            launch(s, slot, t);
    }
}

/* ---- trials that end ---- */

static void failure_message(const sweep *s, const host_trial *t, int wstatus, char *buf,
                            size_t size)
{
    char err_log[HOST_PATH_MAX + 64], last[HOST_TRIAL_MESSAGE_MAX - 64];
    sweep_trial_path(s, t, "stderr.log", err_log, sizeof err_log);
    host_trial_last_error(err_log, s->watch[t->number - 1].err_from, last, sizeof last);
    if (WIFSIGNALED(wstatus))
        snprintf(buf, size, "killed by signal %d (%s)%s%s", WTERMSIG(wstatus),
                 strsignal(WTERMSIG(wstatus)), last[0] ? ": " : "", last);
    else if (last[0])
        snprintf(buf, size, "%s", last);
    else
        snprintf(buf, size, "exited with status %d", WEXITSTATUS(wstatus));
}

static void trial_ended(sweep *s, sweep_slot *slot, int wstatus, bool stopping)
{
    host_trial *t = slot->trial;
    sweep_watch *w = &s->watch[t->number - 1];
    t->time_s += host_now() - w->started;
    t->pid = 0;
    slot->trial = NULL;
    s->dirty = s->results_dirty = true;
    refresh_curve(s, t, true);
    bool ok = WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0;
    bool interrupted = WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == EXIT_INTERRUPTED_TRAIN;
    if (ok) {
        t->status = HOST_TRIAL_DONE;
        t->stop[0] = '\0';
        say(s, "trial-%04lld done: best %s %.4f at epoch %d (%.1f s)", (long long)t->number,
            s->metric, t->best, t->best_epoch, t->time_s);
    } else if (t->stop_sent) {
        t->status = HOST_TRIAL_STOPPED;
        say(s, "trial-%04lld stopped at epoch %d", (long long)t->number, t->epoch);
    } else if (stopping) {
        say(s, "trial-%04lld interrupted at epoch %d; it resumes when the sweep runs again",
            (long long)t->number, t->epoch);
    } else if (interrupted) {
        w->left = true;
        say(s, "trial-%04lld was interrupted by a signal the sweep did not send; it resumes "
            "when the sweep runs again", (long long)t->number);
    } else {
        char why[HOST_TRIAL_MESSAGE_MAX];
        failure_message(s, t, wstatus, why, sizeof why);
        fail_trial(s, t, why);
    }
    t->stop_sent = false;
}

static void reap(sweep *s, bool stopping)
{
    int wstatus;
    pid_t pid;
    while ((pid = waitpid(-1, &wstatus, WNOHANG)) > 0)
        for (int i = 0; i < s->slot_count; i++)
            if (s->slots[i].trial && s->slots[i].trial->pid == pid)
                trial_ended(s, &s->slots[i], wstatus, stopping);
}

/* ---- the loop ---- */

static void signal_trials(const sweep *s)
{
    for (int i = 0; i < s->slot_count; i++)
        if (s->slots[i].trial)
            kill((pid_t)s->slots[i].trial->pid, SIGTERM);
}

static bool work_left(const sweep *s)
{
    for (int64_t t = 0; t < s->count; t++)
        if (s->trials[t].status == HOST_TRIAL_PENDING ||
            (s->trials[t].status == HOST_TRIAL_RUNNING && !s->watch[t].left))
            return true;
    return false;
}

/* The trials that ran before: their curves, for the rules and the best.
 * One the rule had stopped, whose end the sweep did not see, is stopped. */
static void read_curves(sweep *s)
{
    for (int64_t u = 0; u < s->count; u++) {
        host_trial *t = &s->trials[u];
        if (t->status == HOST_TRIAL_PENDING)
            continue;
        t->pid = 0; /* a running one was interrupted */
        refresh_curve(s, t, true);
        if (t->status == HOST_TRIAL_RUNNING && t->stop_sent) {
            t->status = HOST_TRIAL_STOPPED;
            t->stop_sent = false;
            s->dirty = s->results_dirty = true;
        }
    }
}

/* Writes what changed; false when it could not. */
static bool save(sweep *s)
{
    sc_status st = s->broken ? SC_ERR_IO : SC_OK;
    if (st == SC_OK && s->dirty)
        st = save_state(s);
    if (st == SC_OK && s->results_dirty)
        st = save_results(s);
    if (st != SC_OK) {
        fprintf(stderr, "\nscorch-sweep: %s; stopping the trials\n", sc_error_message());
        return false;
    }
    s->dirty = s->results_dirty = false;
    return true;
}

/* Runs until every trial ended or a signal came; false when the state
 * could not be written (the trials are stopped then too). */
static bool run_loop(sweep *s)
{
    int handled = 0;
    bool saved = true;
    double drawn = 0;
    while (true) {
        int stops = signals_received + !saved;
        if (stops > handled) { /* each once more: a second ends scorch-train at once */
            handled = stops;
            signal_trials(s);
        }
        reap(s, stops > 0);
        for (int i = 0; i < s->slot_count; i++)
            if (s->slots[i].trial && refresh_curve(s, s->slots[i].trial, false))
                judge(s, s->slots[i].trial);
        if (stops == 0)
            fill_slots(s);
        if (saved)
            saved = save(s);
        if (s->o->progress && host_now() - drawn >= PROGRESS_EVERY_S) {
            draw_progress(s);
            drawn = host_now();
        }
        if (running_count(s) == 0 && (stops > 0 || !work_left(s)))
            return saved;
        nanosleep(&(struct timespec){0, (long)(POLL_S * 1e9)}, NULL);
    }
}

/* ---- the end ---- */

static void print_summary(const sweep *s)
{
    char path[HOST_PATH_MAX + 32], *text = NULL;
    size_t len = 0;
    host_sweep_report r = {&s->plan.space, s->trials, s->count,
                           s->metric[0] ? s->metric : "metric", s->maximize};
    FILE *f = open_memstream(&text, &len);
    sc_status st = f ? host_sweep_summary_write(&r, f) : sc_error_set(SC_ERR_NOMEM, "no memory");
    if (f && fclose(f) != 0 && st == SC_OK)
        st = sc_error_set(SC_ERR_NOMEM, "out of memory");
    snprintf(path, sizeof path, "%s/summary.md", s->out);
    if (st == SC_OK)
        st = host_sweep_file_replace(path, text, len);
    if (st == SC_OK)
        printf("\n%s\nresults: %s/results.csv and %s; plot them: scorch-plot --sweep %s\n", text,
               s->out, path, s->out);
    else
        fprintf(stderr, "scorch-sweep: %s\n", sc_error_message());
    free(text);
}

static int finish(sweep *s, bool saved)
{
    if (s->o->progress)
        fputs("\r\033[K", stdout);
    if (!saved) /* save() said why */
        return HOST_SWEEP_EXIT_FAILED;
    if (save_results(s) != SC_OK) {
        fprintf(stderr, "scorch-sweep: %s\n", sc_error_message());
        return HOST_SWEEP_EXIT_FAILED;
    }
    int ended = ended_count(s);
    if (ended < s->count) {
        fprintf(stderr, "scorch-sweep: interrupted with %d of %lld trials ended (%d to resume, "
                "%d not started); run the same command again to go on\n", ended,
                (long long)s->count, count_status(s, HOST_TRIAL_RUNNING),
                count_status(s, HOST_TRIAL_PENDING));
        return HOST_SWEEP_EXIT_INTERRUPTED;
    }
    print_summary(s);
    if (count_status(s, HOST_TRIAL_FAILED) < s->count)
        return 0;
    fprintf(stderr, "scorch-sweep: every trial failed; trial-0001: %s\n", s->trials[0].message);
    return HOST_SWEEP_EXIT_FAILED;
}

static void say_plan(const sweep *s)
{
    int ended = ended_count(s);
    const char *way = !s->metric[0] && !s->settings.mode[0] ? "" /* accuracy's or loss's */
                      : s->maximize                          ? ", higher is better"
                                                             : ", lower is better";
    printf("sweep %s: %lld trials (%d ended, %d to resume, %d to start) in %d slot%s of %d "
           "thread%s on %s%s%s; ranked by %s%s; early stopping: %s\n", s->out,
           (long long)s->count, ended, count_status(s, HOST_TRIAL_RUNNING),
           count_status(s, HOST_TRIAL_PENDING), s->slot_count, s->slot_count == 1 ? "" : "s",
           s->slots[0].threads, s->slots[0].threads == 1 ? "" : "s", s->o->device,
           s->o->launcher[0] ? ", launched by " : "", s->o->launcher,
           s->metric[0] ? s->metric : HOST_SWEEP_DEFAULT_METRICS, way,
           host_stop_rule_name(s->settings.stop.rule));
    fflush(stdout);
}

int host_sweep_run(const host_sweep_options *o)
{
    sweep s = {.o = o, .lock_fd = -1};
    sc_status st = sweep_make_slots(&s);
    if (st == SC_OK)
        st = sweep_lock_out(&s);
    if (st == SC_OK)
        st = sweep_prepare(&s);
    if (st == SC_OK)
        st = sweep_check_resumable(&s);
    if (st != SC_OK) {
        fprintf(stderr, "scorch-sweep: %s\n", sc_error_message());
        sweep_free(&s);
        return HOST_SWEEP_EXIT_USAGE;
    }
    read_curves(&s);
    say_plan(&s);
    install_signals();
    bool saved = run_loop(&s);
    int code = finish(&s, saved);
    sweep_free(&s);
    return code;
}
