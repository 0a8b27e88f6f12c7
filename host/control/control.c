/* control.c — the control socket's thread, its queue and its client. */
#include "control/control.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "base/config.h"
#include "base/crash.h"
#include "control/signals.h"
#include "scorch/args.h"

enum {
    QUEUE_MAX = 32,          /* requests waiting for the training thread */
    LINE_MAX_LEN = 4096,     /* of a request */
    CALL_OUT_MAX = 1 << 16,  /* of a user function's text */
    LINE_TIMEOUT_S = 5,      /* for a client to send its whole line */
    READERS_MAX = 16,        /* clients whose line is still coming in */
    /* A client's socket buffer holds the longest answer, so that sending
     * it never waits for the client to read. */
    ANSWER_BUFFER = 2 * CALL_OUT_MAX,
};

/* A connection whose request line is still coming in. The control thread
 * reads every such client as its bytes arrive, so none holds up another. */
typedef struct reader {
    int fd;          /* -1: a free place */
    size_t len;
    double deadline; /* CLOCK_MONOTONIC seconds */
    char line[LINE_MAX_LEN];
} reader;

struct host_control {
    int listen_fd, dir_fd;   /* dir_fd: the run dir, when the path is long */
    int wake[2];             /* a byte on wake[1] ends the thread */
    bool started;
    pthread_t thread;
    struct sockaddr_un addr;
    const host_user_funcs *funcs;
    reader readers[READERS_MAX]; /* the control thread's own */

    pthread_mutex_t mu;      /* guards what follows */
    pthread_cond_t queued_cv;
    host_request queue[QUEUE_MAX];
    int head, n;
    atomic_int queued;       /* n, read without the mutex */
    host_run_status status;
};

/* ---- the socket's address ---- */

/* RUN_DIR/control.sock; a path longer than sun_path is reached through
 * the run directory opened as /proc/self/fd/N (Linux), so *dir_fd must
 * stay open while the address is used. */
static sc_status socket_address(const char *run_dir, struct sockaddr_un *addr, int *dir_fd)
{
    *dir_fd = -1;
    memset(addr, 0, sizeof *addr);
    addr->sun_family = AF_UNIX;
    size_t room = sizeof addr->sun_path;
    if ((size_t)snprintf(addr->sun_path, room, "%s/%s", run_dir, HOST_CONTROL_SOCKET) < room)
        return SC_OK;
    *dir_fd = open(run_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (*dir_fd < 0)
        return sc_error_set(SC_ERR_IO, "cannot open %s: %s", run_dir, strerror(errno));
    snprintf(addr->sun_path, room, "/proc/self/fd/%d/%s", *dir_fd, HOST_CONTROL_SOCKET);
    return SC_OK;
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* ---- answering ---- */

static void send_all(int fd, const char *text, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, text, len, MSG_NOSIGNAL);
        if (n <= 0 && errno == EINTR)
            continue;
        /* The client left, or (a served client's socket never blocks, and
         * holds any whole answer) it does not read: nobody to tell. */
        if (n <= 0)
            return;
        text += n;
        len -= (size_t)n;
    }
}

static void reply_text(host_request *r, bool ok, const char *text)
{
    if (r->client < 0)
        return;
    const char *word = ok ? "ok " : "error ";
    send_all(r->client, word, strlen(word));
    send_all(r->client, text, strlen(text));
    send_all(r->client, "\n", 1);
    close_fd(&r->client);
}

void host_control_reply(host_request *r, bool ok, const char *fmt, ...)
{
    if (r->client < 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *text = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (text) {
        va_start(ap, fmt);
        vsnprintf(text, (size_t)len + 1, fmt, ap);
        va_end(ap);
    }
    reply_text(r, ok && text, text ? text : "out of memory for the answer");
    free(text);
}

/* ---- the queue ---- */

/* With ctl->mu held. */
static bool pop(host_control *ctl, host_request *out)
{
    if (ctl->n == 0)
        return false;
    *out = ctl->queue[ctl->head];
    ctl->head = (ctl->head + 1) % QUEUE_MAX;
    atomic_store_explicit(&ctl->queued, --ctl->n, memory_order_release);
    return true;
}

static void push(host_control *ctl, host_request *r)
{
    pthread_mutex_lock(&ctl->mu);
    bool full = ctl->n == QUEUE_MAX;
    if (!full) {
        ctl->queue[(ctl->head + ctl->n) % QUEUE_MAX] = *r;
        atomic_store_explicit(&ctl->queued, ++ctl->n, memory_order_release);
        pthread_cond_signal(&ctl->queued_cv);
    }
    pthread_mutex_unlock(&ctl->mu);
    if (full)
        host_control_reply(r, false, "%d requests are already waiting for the training thread",
                         QUEUE_MAX);
}

bool host_control_take(host_control *ctl, host_request *out)
{
    if (atomic_load_explicit(&ctl->queued, memory_order_acquire) == 0)
        return false;
    pthread_mutex_lock(&ctl->mu);
    bool got = pop(ctl, out);
    pthread_mutex_unlock(&ctl->mu);
    return got;
}

bool host_control_wait(host_control *ctl, double seconds, host_request *out)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    double whole = floor(seconds);
    until.tv_sec += (time_t)whole;
    until.tv_nsec += (long)((seconds - whole) * 1e9);
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&ctl->mu);
    while (ctl->n == 0 && pthread_cond_timedwait(&ctl->queued_cv, &ctl->mu, &until) == 0)
        ;
    bool got = pop(ctl, out);
    pthread_mutex_unlock(&ctl->mu);
    return got;
}

void host_control_publish(host_control *ctl, const host_run_status *status)
{
    pthread_mutex_lock(&ctl->mu);
    ctl->status = *status;
    pthread_mutex_unlock(&ctl->mu);
}

/* ---- the commands ---- */

static const struct {
    const char *name;
    host_request_kind kind;
} queued_commands[] = {
    {"pause", HOST_REQUEST_PAUSE},       {"resume", HOST_REQUEST_RESUME},
    {"save", HOST_REQUEST_SAVE},         {"validate", HOST_REQUEST_VALIDATE},
    {"test", HOST_REQUEST_TEST},         {"set-lr", HOST_REQUEST_SET_LR},
    {"stop", HOST_REQUEST_STOP},
};

enum { N_QUEUED = sizeof queued_commands / sizeof queued_commands[0] };

static void reply_status(host_control *ctl, host_request *r)
{
    pthread_mutex_lock(&ctl->mu);
    host_run_status s = ctl->status;
    int queued = ctl->n;
    pthread_mutex_unlock(&ctl->mu);
    const char *figures = s.between_epochs ? "train_" : ""; /* whose loss and rate */
    host_control_reply(r, true,
                     "epoch=%d/%d phase=%s batch=%lld/%lld step=%lld lr=%.6g %sloss=%.6g "
                     "%ssamples_per_s=%.1f paused=%s queued=%d",
                     s.epoch, s.epochs, s.phase ? s.phase : "setup", (long long)s.batch,
                     (long long)s.batches, (long long)s.step, s.lr, figures, s.loss, figures,
                     s.samples_per_s, s.paused ? "yes" : "no", queued);
}

/* "NAME [k=v,...]": runs the user function here, on the control thread. */
static void call_function(host_control *ctl, char *arg, host_request *r)
{
    size_t len = strcspn(arg, " \t");
    char *args = arg + len + strspn(arg + len, " \t");
    arg[len] = '\0';
    if (!arg[0]) {
        host_control_reply(r, false, "call needs a function name: call NAME [k=v,...]");
        return;
    }
    char *out = malloc(CALL_OUT_MAX);
    if (!out) {
        host_control_reply(r, false, "out of memory for the function's answer");
        return;
    }
    sc_status st = ctl->funcs ? host_user_funcs_call(ctl->funcs, arg, args, out, CALL_OUT_MAX)
                              : sc_error_set(SC_ERR_INVALID, "this run has no user functions");
    reply_text(r, st == SC_OK, st == SC_OK ? out : sc_error_message());
    free(out);
}

static void unknown_command(const char *cmd, host_request *r)
{
    const char *names[N_QUEUED + 2] = {"status", "call"};
    for (int i = 0; i < N_QUEUED; i++)
        names[i + 2] = queued_commands[i].name;
    const char *near = sc_args_suggest(cmd, names, N_QUEUED + 2);
    if (near)
        host_control_reply(r, false, "unknown command '%s' (did you mean '%s'?)", cmd, near);
    else
        host_control_reply(r, false, "unknown command '%s' (commands: status, pause, resume, "
                         "save, validate, test, set-lr X, stop, call NAME [k=v,...])", cmd);
}

/* Queues the command kind, whose argument text is arg. */
static void queue_command(host_control *ctl, host_request_kind kind, const char *cmd,
                          const char *arg, host_request *r)
{
    r->kind = kind;
    if (kind == HOST_REQUEST_SET_LR) {
        char *end;
        r->lr = strtod(arg, &end);
        if (end == arg || *end || !isfinite(r->lr) || r->lr <= 0) {
            host_control_reply(r, false, "set-lr needs a positive number, not '%s'", arg);
            return;
        }
    } else if (arg[0]) {
        host_control_reply(r, false, "%s takes no argument (got '%s')", cmd, arg);
        return;
    }
    push(ctl, r);
}

static void dispatch(host_control *ctl, char *line, host_request *r)
{
    line[strcspn(line, "\r\n")] = '\0';
    char *cmd = line + strspn(line, " \t");
    size_t len = strcspn(cmd, " \t");
    char *arg = cmd + len + strspn(cmd + len, " \t");
    cmd[len] = '\0';
    for (char *end = arg + strlen(arg); end > arg && (end[-1] == ' ' || end[-1] == '\t');)
        *--end = '\0';
    if (strcmp(cmd, "status") == 0) {
        reply_status(ctl, r);
        return;
    }
    if (strcmp(cmd, "call") == 0) {
        call_function(ctl, arg, r);
        return;
    }
    for (int i = 0; i < N_QUEUED; i++)
        if (strcmp(cmd, queued_commands[i].name) == 0) {
            queue_command(ctl, queued_commands[i].kind, cmd, arg, r);
            return;
        }
    unknown_command(cmd, r);
}

/* ---- the clients ---- */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Frees rd's place; returns the request that answers its client. */
static host_request reader_release(reader *rd)
{
    host_request r = {.client = rd->fd};
    rd->fd = -1;
    return r;
}

/* Hands the line on (dispatch answers the client or queues it for the
 * training thread), or closes a connection that sent nothing. */
static void reader_finish(host_control *ctl, reader *rd)
{
    host_request r = reader_release(rd);
    rd->line[rd->len] = '\0';
    if (rd->len > 0)
        dispatch(ctl, rd->line, &r);
    else
        close(r.client);
}

/* Takes what the client has sent so far. The line is complete at '\n', at
 * the client's end of writing, or when it fills the buffer. */
static void reader_receive(host_control *ctl, reader *rd)
{
    size_t room = sizeof rd->line - 1 - rd->len;
    ssize_t n = recv(rd->fd, rd->line + rd->len, room, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
        return;
    if (n > 0) {
        rd->len += (size_t)n;
        if ((size_t)n < room && !memchr(rd->line + rd->len - (size_t)n, '\n', (size_t)n))
            return;
    }
    reader_finish(ctl, rd);
}

/* A place for a new client: a free one, else that of the client that came
 * first, which is refused, so that a crowd of silent clients cannot shut
 * the others out. */
static reader *reader_place(host_control *ctl)
{
    reader *first = &ctl->readers[0];
    for (int i = 0; i < READERS_MAX; i++) {
        reader *rd = &ctl->readers[i];
        if (rd->fd < 0)
            return rd;
        if (rd->deadline < first->deadline)
            first = rd;
    }
    host_request r = reader_release(first);
    host_control_reply(&r, false, "dropped before a whole command came: %d other clients were "
                     "sending theirs", READERS_MAX);
    return first;
}

static void accept_client(host_control *ctl)
{
    int fd = accept(ctl->listen_fd, NULL, NULL);
    if (fd < 0) /* the client left already */
        return;
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    fcntl(fd, F_SETFL, O_NONBLOCK);
    int buffer = ANSWER_BUFFER;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer, sizeof buffer);
    *reader_place(ctl) = (reader){.fd = fd, .deadline = now_s() + LINE_TIMEOUT_S};
}

/* Refuses the clients whose line is late; returns the milliseconds until
 * the next deadline, -1 when there is none. */
static int readers_expire(host_control *ctl)
{
    double now = now_s(), next = -1;
    for (int i = 0; i < READERS_MAX; i++) {
        reader *rd = &ctl->readers[i];
        if (rd->fd < 0)
            continue;
        if (rd->deadline <= now) {
            host_request r = reader_release(rd);
            host_control_reply(&r, false, "no whole command line came within %d s",
                             LINE_TIMEOUT_S);
        } else if (next < 0 || rd->deadline < next) {
            next = rd->deadline;
        }
    }
    return next < 0 ? -1 : (int)ceil((next - now) * 1000);
}

/* The sockets to poll: listening, the wake pipe, then each reader, whose
 * index in ctl->readers goes to who[k - 2] for fds[k]. Their count. */
static int watch_list(const host_control *ctl, struct pollfd *fds, int *who)
{
    int n = 0;
    fds[n++] = (struct pollfd){.fd = ctl->listen_fd, .events = POLLIN};
    fds[n++] = (struct pollfd){.fd = ctl->wake[0], .events = POLLIN};
    for (int i = 0; i < READERS_MAX; i++)
        if (ctl->readers[i].fd >= 0) {
            who[n - 2] = i;
            fds[n++] = (struct pollfd){.fd = ctl->readers[i].fd, .events = POLLIN};
        }
    return n;
}

/* The control thread runs user functions, plugin code: it has an alternate
 * signal stack of its own, so that a stack overflow there is still
 * reported (crash.h). */
static void *serve(void *arg)
{
    host_control *ctl = arg;
    host_crash_thread_begin();
    struct pollfd fds[2 + READERS_MAX];
    int who[READERS_MAX];
    for (;;) {
        int timeout = readers_expire(ctl);
        int n = watch_list(ctl, fds, who);
        if (poll(fds, (nfds_t)n, timeout) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (fds[1].revents)
            break;
        for (int k = 2; k < n; k++)
            if (fds[k].revents)
                reader_receive(ctl, &ctl->readers[who[k - 2]]);
        if (fds[0].revents)
            accept_client(ctl);
    }
    for (int i = 0; i < READERS_MAX; i++)
        if (ctl->readers[i].fd >= 0) {
            host_request r = reader_release(&ctl->readers[i]);
            host_control_reply(&r, false, "the run ended before this was done");
        }
    host_crash_thread_end();
    return NULL;
}

/* ---- opening and closing ---- */

/* Whether some process still serves addr. */
static bool served(const struct sockaddr_un *addr)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool yes = fd >= 0 && connect(fd, (const struct sockaddr *)addr, sizeof *addr) == 0;
    if (fd >= 0)
        close(fd);
    return yes;
}

/* Binds, replacing a socket left by a run that is gone. */
static sc_status bind_socket(host_control *ctl, const char *run_dir)
{
    const struct sockaddr *a = (const struct sockaddr *)&ctl->addr;
    if (bind(ctl->listen_fd, a, sizeof ctl->addr) == 0)
        return SC_OK;
    if (errno != EADDRINUSE)
        return sc_error_set(SC_ERR_IO, "cannot create %s/%s: %s", run_dir, HOST_CONTROL_SOCKET,
                            strerror(errno));
    struct stat st;
    if (lstat(ctl->addr.sun_path, &st) == 0 && !S_ISSOCK(st.st_mode))
        return sc_error_set(SC_ERR_IO, "%s/%s exists and is not a socket", run_dir,
                            HOST_CONTROL_SOCKET);
    if (served(&ctl->addr))
        return sc_error_set(SC_ERR_STATE,
                            "%s/%s is served by another scorch-train: is this run directory "
                            "in use?", run_dir, HOST_CONTROL_SOCKET);
    unlink(ctl->addr.sun_path); /* stale: its run crashed */
    if (bind(ctl->listen_fd, a, sizeof ctl->addr) == 0)
        return SC_OK;
    return sc_error_set(SC_ERR_IO, "cannot create %s/%s: %s", run_dir, HOST_CONTROL_SOCKET,
                        strerror(errno));
}

static sc_status listen_on(host_control *ctl, const char *run_dir)
{
    SC_TRY(socket_address(run_dir, &ctl->addr, &ctl->dir_fd));
    /* Non-blocking: accept never waits for a client that left meanwhile. */
    ctl->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (ctl->listen_fd < 0)
        return sc_error_set(SC_ERR_IO, "cannot make a socket: %s", strerror(errno));
    SC_TRY(bind_socket(ctl, run_dir));
    host_crash_set_control_socket(ctl->addr.sun_path); /* a crash removes it too */
    if (listen(ctl->listen_fd, 8) != 0) {
        unlink(ctl->addr.sun_path);
        return sc_error_set(SC_ERR_IO, "cannot listen on %s/%s: %s", run_dir,
                            HOST_CONTROL_SOCKET, strerror(errno));
    }
    return SC_OK;
}

/* Starts the thread with the stop and save signals blocked (signals.h),
 * so that they reach the training thread, whose handlers they are meant
 * for. */
static sc_status start_thread(host_control *ctl)
{
    if (pipe(ctl->wake) != 0)
        return sc_error_set(SC_ERR_IO, "cannot make a pipe: %s", strerror(errno));
    fcntl(ctl->wake[0], F_SETFD, FD_CLOEXEC);
    fcntl(ctl->wake[1], F_SETFD, FD_CLOEXEC);
    sigset_t block, old;
    sigemptyset(&block);
    host_signals_add_to(&block);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    int err = pthread_create(&ctl->thread, NULL, serve, ctl);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err)
        return sc_error_set(SC_ERR_IO, "cannot start the control thread: %s", strerror(err));
    ctl->started = true;
    return SC_OK;
}

static sc_status init_sync(host_control *ctl)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    int err = pthread_cond_init(&ctl->queued_cv, &attr);
    pthread_condattr_destroy(&attr);
    if (err || pthread_mutex_init(&ctl->mu, NULL))
        return sc_error_set(SC_ERR_NOMEM, "cannot make the control thread's lock");
    return SC_OK;
}

sc_status host_control_open(const char *run_dir, const host_user_funcs *funcs, host_control **out)
{
    *out = NULL;
    host_control *ctl = calloc(1, sizeof *ctl);
    if (!ctl)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for the control socket");
    ctl->listen_fd = ctl->dir_fd = ctl->wake[0] = ctl->wake[1] = -1;
    for (int i = 0; i < READERS_MAX; i++)
        ctl->readers[i].fd = -1;
    ctl->funcs = funcs;
    sc_status st = init_sync(ctl);
    if (st != SC_OK) {
        free(ctl);
        return st;
    }
    st = listen_on(ctl, run_dir);
    if (st == SC_OK && (st = start_thread(ctl)) != SC_OK)
        unlink(ctl->addr.sun_path);
    if (st != SC_OK) {
        ctl->addr.sun_path[0] = '\0'; /* not ours to remove */
        host_control_close(ctl);
        return sc_error_wrap(st, "live control");
    }
    *out = ctl;
    return SC_OK;
}

void host_control_close(host_control *ctl)
{
    if (!ctl)
        return;
    if (ctl->started) {
        ssize_t n;
        do
            n = write(ctl->wake[1], "x", 1);
        while (n < 0 && errno == EINTR);
        pthread_join(ctl->thread, NULL);
    }
    host_request r;
    while (pop(ctl, &r))
        host_control_reply(&r, false, "the run ended before this was done");
    host_crash_set_control_socket(NULL);
    if (ctl->addr.sun_path[0])
        unlink(ctl->addr.sun_path);
    close_fd(&ctl->listen_fd);
    close_fd(&ctl->dir_fd);
    close_fd(&ctl->wake[0]);
    close_fd(&ctl->wake[1]);
    pthread_cond_destroy(&ctl->queued_cv);
    pthread_mutex_destroy(&ctl->mu);
    free(ctl);
}

/* ---- the client ---- */

static sc_status connect_to(const char *run_dir, int *fd)
{
    struct sockaddr_un addr;
    int dir_fd;
    SC_TRY(socket_address(run_dir, &addr, &dir_fd));
    *fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int err = *fd < 0 ? errno : 0;
    if (!err && connect(*fd, (const struct sockaddr *)&addr, sizeof addr) != 0)
        err = errno;
    close_fd(&dir_fd);
    if (!err)
        return SC_OK;
    close_fd(fd);
    if (err == ENOENT)
        return sc_error_set(SC_ERR_IO, "%s/%s does not exist: no scorch-train is running with "
                            "this run directory", run_dir, HOST_CONTROL_SOCKET);
    if (err == ECONNREFUSED)
        return sc_error_set(SC_ERR_IO, "%s/%s: the run that served it has ended", run_dir,
                            HOST_CONTROL_SOCKET);
    return sc_error_set(SC_ERR_IO, "cannot connect to %s/%s: %s", run_dir, HOST_CONTROL_SOCKET,
                        strerror(err));
}

static sc_status read_all(int fd, char **reply)
{
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf)
            return sc_error_set(SC_ERR_NOMEM, "out of memory for the answer");
        ssize_t n = recv(fd, buf + len, cap - len - 1, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            free(buf);
            return sc_error_set(SC_ERR_IO, "reading the answer: %s", strerror(errno));
        }
        if (n == 0)
            break;
        len += (size_t)n;
        if (len + 1 == cap) {
            char *grown = realloc(buf, cap *= 2);
            if (!grown)
                free(buf);
            buf = grown;
        }
    }
    buf[len] = '\0';
    *reply = buf;
    return SC_OK;
}

sc_status host_control_send(const char *run_dir, const char *line, char **reply)
{
    int fd;
    SC_TRY(connect_to(run_dir, &fd));
    send_all(fd, line, strlen(line));
    send_all(fd, "\n", 1);
    shutdown(fd, SHUT_WR);
    sc_status st = read_all(fd, reply);
    close(fd);
    return st;
}
