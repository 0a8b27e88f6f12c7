#include "harness.h"

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
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

run_result run_program(const char *const *argv, const char *env)
{
    char out_path[] = "/tmp/scorch-out-XXXXXX", err_path[] = "/tmp/scorch-err-XXXXXX";
    close(mkstemp(out_path));
    close(mkstemp(err_path));
    pid_t pid = fork();
    if (pid == 0) {
        redirect(out_path, STDOUT_FILENO);
        redirect(err_path, STDERR_FILENO);
        int devnull = open("/dev/null", O_RDONLY);
        dup2(devnull, STDIN_FILENO);
        if (env)
            set_env(env);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int wstatus = 0;
    waitpid(pid, &wstatus, 0);
    run_result r = {
        .status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus),
        .out = read_text(out_path),
        .err = read_text(err_path),
    };
    unlink(out_path);
    unlink(err_path);
    return r;
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
