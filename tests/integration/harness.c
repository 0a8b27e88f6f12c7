#include "harness.h"

#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "scorch/serialize.h"

char *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, len = 0, n;
    char *buf = malloc(cap);
    while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (len + 1 == cap) {
            char *grown = realloc(buf, cap *= 2);
            if (!grown)
                free(buf);
            buf = grown;
        }
    }
    fclose(f);
    if (buf)
        buf[len] = '\0';
    if (size)
        *size = len;
    return buf;
}

char *read_text(const char *path) { return read_file(path, NULL); }

static void redirect(const char *path, int fd)
{
    int f = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(f, fd);
    close(f);
}

/* "NAME=value" into the environment (the child's, after fork). */
static void set_env(const char *assignment)
{
    char name[256];
    const char *eq = strchr(assignment, '=');
    if (!eq || (size_t)(eq - assignment) >= sizeof name)
        return;
    memcpy(name, assignment, (size_t)(eq - assignment));
    name[eq - assignment] = '\0';
    setenv(name, eq + 1, 1);
}

/* UBSan's reports cannot go to a file in a build with ASan too (see
 * tools/sanitized): a program's report is copied to this test's stderr,
 * where the sanitizer run looks for it. */
static void show_sanitizer_report(const char *program, const char *err)
{
    if (err && strstr(err, ": runtime error: "))
        fprintf(stderr, "%s reported undefined behaviour:\n%s\n", program, err);
}

run_handle run_start(const char *const *argv, const char *env)
{
    run_handle h = {.out_path = "/tmp/scorch-out-XXXXXX", .err_path = "/tmp/scorch-err-XXXXXX"};
    snprintf(h.program, sizeof h.program, "%s", argv[0]);
    close(mkstemp(h.out_path));
    close(mkstemp(h.err_path));
    h.pid = fork();
    if (h.pid == 0) {
        redirect(h.out_path, STDOUT_FILENO);
        redirect(h.err_path, STDERR_FILENO);
        int devnull = open("/dev/null", O_RDONLY);
        dup2(devnull, STDIN_FILENO);
        if (env)
            set_env(env);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    return h;
}

/* Waits for pid, killing it (SIGKILL) after timeout_s seconds if > 0. */
static int wait_child(pid_t pid, double timeout_s)
{
    int wstatus = 0;
    for (double waited = 0; timeout_s > 0; waited += 0.01) {
        if (waitpid(pid, &wstatus, WNOHANG) == pid)
            return wstatus;
        if (waited >= timeout_s) {
            kill(pid, SIGKILL);
            break;
        }
        nanosleep(&(struct timespec){.tv_nsec = 10000000}, NULL);
    }
    waitpid(pid, &wstatus, 0);
    return wstatus;
}

run_result run_wait(run_handle *h, double timeout_s)
{
    int wstatus = wait_child(h->pid, timeout_s);
    run_result r = {
        .status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus),
        .signal = WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0,
        .out = read_text(h->out_path),
        .err = read_text(h->err_path),
    };
    unlink(h->out_path);
    unlink(h->err_path);
    show_sanitizer_report(h->program, r.err);
    return r;
}

run_result run_program(const char *const *argv, const char *env)
{
    run_handle h = run_start(argv, env);
    return run_wait(&h, 0);
}

void run_result_free(run_result *r)
{
    free(r->out);
    free(r->err);
}

void build_path(char *buf, size_t size, const char *rel)
{
    const char *root = getenv("SCORCH_BUILD_ROOT");
    snprintf(buf, size, "%s/%s", root ? root : "build", rel);
}

enum { TURNS = 8, JOINED_MAX = 128 };

const char *built(const char *rel)
{
    static char path[TURNS][4096];
    static int next;
    char *p = path[next++ % TURNS];
    build_path(p, sizeof path[0], rel);
    return p;
}

const char *in_dir(const char *dir, const char *name)
{
    static char path[TURNS][4096];
    static int next;
    char joined[sizeof path[0]];
    snprintf(joined, sizeof joined, "%s/%s", dir, name);
    char *p = path[next++ % TURNS];
    memcpy(p, joined, sizeof joined);
    return p;
}

run_result run_joined(const char *const *head, const char *const *extra)
{
    const char *argv[JOINED_MAX];
    int n = 0;
    for (; *head && n < JOINED_MAX - 1; head++)
        argv[n++] = *head;
    for (; extra && *extra && n < JOINED_MAX - 1; extra++)
        argv[n++] = *extra;
    argv[n] = NULL;
    return run_program(argv, NULL);
}

int argv_append(const char **argv, int n, int max, const char *const *more)
{
    for (; more && *more && n < max - 1; more++)
        argv[n++] = *more;
    argv[n] = NULL;
    return n;
}

char *find_on_path(const char *name, char *buf, size_t size)
{
    for (const char *dir = getenv("PATH"); dir && *dir;) {
        size_t len = strcspn(dir, ":");
        snprintf(buf, size, "%.*s/%s", (int)len, dir, name);
        if (access(buf, X_OK) == 0)
            return buf;
        dir += len + (dir[len] == ':');
    }
    buf[0] = '\0';
    return buf;
}

int mpirun_argv(const char **argv, int max, const char *mpirun, const char *np,
                const char *const *env)
{
    int n = argv_append(argv, 0, max, (const char *const[]){
        mpirun, "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "--mca",
        "btl", "self,vader", "--mca", "btl_vader_single_copy_mechanism", "none", "-x",
        "OMP_NUM_THREADS=1", NULL});
    for (; env && *env && n < max - 3; env++) {
        argv[n++] = "-x";
        argv[n++] = *env;
    }
    return argv_append(argv, n, max, (const char *const[]){"-np", np, NULL});
}

char *temp_dir(char *buf, size_t size)
{
    snprintf(buf, size, "/tmp/scorch-it-XXXXXX");
    return mkdtemp(buf);
}

void use_own_gpu_locks(void)
{
    static char dir[64];
    if (!dir[0])
        setenv("SCORCH_DEVICE_LOCK_DIR", temp_dir(dir, sizeof dir), 1);
}

double metric_of(const char *run_dir, int epoch, const char *phase, const char *key)
{
    char path[4096], want[128], field[128];
    snprintf(path, sizeof path, "%s/metrics.jsonl", run_dir);
    snprintf(want, sizeof want, "{\"epoch\":%d,\"phase\":\"%s\",", epoch, phase);
    snprintf(field, sizeof field, "\"%s\":", key);
    FILE *f = fopen(path, "r");
    if (!f)
        return NAN;
    char line[4096];
    double value = NAN;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, want, strlen(want)) == 0) {
            const char *p = strstr(line, field);
            value = p ? strtod(p + strlen(field), NULL) : NAN;
        }
    fclose(f);
    return value;
}

/* Entries named param/... must match in shape and bits. */
static bool same_entry(const sc_ckpt *a, const sc_ckpt *b, const char *name)
{
    if (strncmp(name, "param/", 6) != 0)
        return true;
    const sc_tensor *ta = sc_ckpt_tensor(a, name), *tb = sc_ckpt_tensor(b, name);
    return ta && tb && ta->dtype == tb->dtype && sc_tensor_same_shape(ta, tb) &&
           memcmp(ta->data, tb->data, sc_tensor_nbytes(ta)) == 0;
}

bool same_params(const char *ckpt_a, const char *ckpt_b)
{
    sc_ckpt *a = NULL, *b = NULL;
    bool same = sc_ckpt_open(ckpt_a, &a) == SC_OK && sc_ckpt_open(ckpt_b, &b) == SC_OK &&
                sc_ckpt_count(a) == sc_ckpt_count(b);
    for (int i = 0; same && i < sc_ckpt_count(a); i++)
        same = same_entry(a, b, sc_ckpt_name(a, i));
    sc_ckpt_close(a);
    sc_ckpt_close(b);
    return same;
}

/* max |a - b| over the tensor, relative to max |b|; INFINITY when the two
 * do not match in shape. */
static double entry_rel_diff(const sc_ckpt *a, const sc_ckpt *b, const char *name)
{
    const sc_tensor *ta = sc_ckpt_tensor(a, name), *tb = sc_ckpt_tensor(b, name);
    if (!ta || !tb || ta->dtype != SC_F32 || tb->dtype != SC_F32 ||
        !sc_tensor_same_shape(ta, tb))
        return INFINITY;
    const float *x = sc_tensor_f32(ta), *y = sc_tensor_f32(tb);
    double diff = 0, scale = 0;
    for (int64_t i = 0; i < ta->numel; i++) {
        diff = fmax(diff, fabs((double)x[i] - y[i]));
        scale = fmax(scale, fabs((double)y[i]));
    }
    return diff == 0 ? 0 : diff / scale;
}

double params_rel_diff(const char *ckpt_a, const char *ckpt_b)
{
    sc_ckpt *a = NULL, *b = NULL;
    double worst = sc_ckpt_open(ckpt_a, &a) == SC_OK && sc_ckpt_open(ckpt_b, &b) == SC_OK &&
                           sc_ckpt_count(a) == sc_ckpt_count(b)
                       ? 0
                       : INFINITY;
    for (int i = 0; worst < INFINITY && i < sc_ckpt_count(a); i++)
        if (strncmp(sc_ckpt_name(a, i), "param/", 6) == 0)
            worst = fmax(worst, entry_rel_diff(a, b, sc_ckpt_name(a, i)));
    sc_ckpt_close(a);
    sc_ckpt_close(b);
    return worst;
}
