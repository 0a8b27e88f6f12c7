#include "sweep/launch.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

enum { ARGS_MAX = 64, WORD_MAX = 4200 };

/* The launcher's words (split at spaces), then scorch-train's arguments;
 * every string lives in `text` (WORD_MAX bytes per slot). */
typedef struct argv_buf {
    char *argv[ARGS_MAX + 1];
    char text[ARGS_MAX][WORD_MAX];
    int n;
} argv_buf;

/* Appends prefix and value as one argument. */
static sc_status push(argv_buf *b, const char *prefix, const char *value)
{
    if (b->n == ARGS_MAX)
        return sc_error_set(SC_ERR_INVALID, "--launcher: more than %d words", ARGS_MAX - 16);
    if (snprintf(b->text[b->n], WORD_MAX, "%s%s", prefix, value) >= WORD_MAX)
        return sc_error_set(SC_ERR_INVALID, "an argument longer than %d characters: %.64s...",
                            WORD_MAX - 1, value);
    b->argv[b->n] = b->text[b->n];
    b->argv[++b->n] = NULL;
    return SC_OK;
}

static sc_status push_int(argv_buf *b, const char *name, int v)
{
    char prefix[64], text[32];
    snprintf(prefix, sizeof prefix, "--%s=", name);
    snprintf(text, sizeof text, "%d", v);
    return push(b, prefix, text);
}

static sc_status push_words(argv_buf *b, const char *words)
{
    char copy[WORD_MAX];
    snprintf(copy, sizeof copy, "%s", words);
    for (char *save = NULL, *w = strtok_r(copy, " \t", &save); w; w = strtok_r(NULL, " \t", &save))
        SC_TRY(push(b, "", w));
    return SC_OK;
}

static sc_status build_argv(const host_trial_launch *l, argv_buf *b)
{
    b->n = 0;
    SC_TRY(push_words(b, l->launcher));
    SC_TRY(push(b, "", l->train));
    SC_TRY(push(b, "--config=", l->ini));
    SC_TRY(push(b, "--run-dir=", l->run_dir));
    SC_TRY(push_int(b, "threads", l->threads));
    SC_TRY(push_int(b, "workers", l->workers));
    SC_TRY(push(b, "--device=", l->device));
    return l->resume ? push(b, "", "--resume") : SC_OK;
}

static int open_log(const char *dir, const char *name)
{
    char path[WORD_MAX + 32];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

/* In the child, between fork and exec: only async-signal-safe calls. */
static void exec_child(const argv_buf *b, pid_t parent, int out, int err)
{
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) /* the sweep died before prctl */
        _exit(130);
    int in = open("/dev/null", O_RDONLY);
    if (in < 0 || dup2(in, STDIN_FILENO) < 0 || dup2(out, STDOUT_FILENO) < 0 ||
        dup2(err, STDERR_FILENO) < 0)
        _exit(127);
    execvp(b->argv[0], b->argv);
    static const char msg[] = "scorch-sweep: cannot run the trial's program: ";
    ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
    w = write(STDERR_FILENO, b->argv[0], strlen(b->argv[0]));
    w = write(STDERR_FILENO, "\n", 1);
    (void)w;
    _exit(127);
}

sc_status host_trial_spawn(const host_trial_launch *l, pid_t *pid)
{
    argv_buf *b = malloc(sizeof *b);
    if (!b)
        return sc_error_set(SC_ERR_NOMEM, "out of memory");
    sc_status st = build_argv(l, b);
    int out = st == SC_OK ? open_log(l->run_dir, "stdout.log") : -1;
    int err = out >= 0 ? open_log(l->run_dir, "stderr.log") : -1;
    if (st == SC_OK && err < 0)
        st = sc_error_set(SC_ERR_IO, "cannot open the logs in %s: %s", l->run_dir,
                          strerror(errno));
    pid_t parent = getpid();
    if (st == SC_OK) {
        fflush(NULL);
        *pid = fork();
        if (*pid == 0)
            exec_child(b, parent, out, err);
        if (*pid < 0)
            st = sc_error_set(SC_ERR_IO, "cannot start a trial: fork: %s", strerror(errno));
        else
            setpgid(*pid, *pid); /* also here: a signal sent at once must find the group */
    }
    if (out >= 0)
        close(out);
    if (err >= 0)
        close(err);
    free(b);
    return st;
}

/* N of "-np N", "--np=N", ...: the word after the option, or after '='. */
static int ranks_after(const char *word, const char *next)
{
    static const char *const options[] = {"-np", "-n", "--np", "--ntasks", "--n"};
    for (size_t i = 0; i < sizeof options / sizeof options[0]; i++) {
        size_t len = strlen(options[i]);
        if (strncmp(word, options[i], len) != 0)
            continue;
        const char *value = word[len] == '=' ? word + len + 1 : word[len] ? NULL : next;
        int n = value ? atoi(value) : 0;
        if (n > 0)
            return n;
    }
    return 0;
}

int host_launcher_ranks(const char *launcher)
{
    char copy[WORD_MAX];
    snprintf(copy, sizeof copy, "%s", launcher);
    char *words[ARGS_MAX];
    int n = 0;
    for (char *save = NULL, *w = strtok_r(copy, " \t", &save); w && n < ARGS_MAX;
         w = strtok_r(NULL, " \t", &save))
        words[n++] = w;
    for (int i = 0; i < n; i++) {
        int ranks = ranks_after(words[i], i + 1 < n ? words[i + 1] : NULL);
        if (ranks)
            return ranks;
    }
    return 1;
}

/* The line's text after a "[rank R] " prefix. */
static const char *after_rank(const char *line)
{
    if (strncmp(line, "[rank ", 6) != 0)
        return line;
    const char *close = strstr(line, "] ");
    return close ? close + 2 : line;
}

void host_trial_last_error(const char *err_log, long from, char *out, size_t size)
{
    out[0] = '\0';
    FILE *f = fopen(err_log, "r");
    if (!f)
        return;
    bool have_own = false;
    char line[4096];
    fseek(f, from, SEEK_SET);
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        bool own = strncmp(after_rank(line), "scorch-train: ", 14) == 0;
        if (line[0] && (own || !have_own))
            snprintf(out, size, "%s", line);
        have_own = have_own || own;
    }
    fclose(f);
}
