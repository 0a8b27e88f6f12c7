/* The control socket without a trainer: the line protocol, the queue the
 * training thread takes requests from, stale and busy sockets, long run
 * directories; and the user functions it calls. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "control/control.h"
#include "base/plugin_loader.h"

static char run_dir[64];

static void make_run_dir(void)
{
    strcpy(run_dir, "/tmp/scorch-test-control-XXXXXX");
    cr_assert_not_null(mkdtemp(run_dir));
}

static void remove_run_dir(void)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s", run_dir);
    cr_expect_eq(system(cmd), 0);
}

TestSuite(control, .init = make_run_dir, .fini = remove_run_dir);
TestSuite(user_funcs);

static void assert_message_has(const char *part)
{
    cr_assert(strstr(sc_error_message(), part), "message '%s' lacks '%s'", sc_error_message(),
              part);
}

static const char *fixture(const char *name)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/tests/fixtures/%s.so", getenv("SCORCH_BUILD_ROOT"), name);
    return path;
}

/* The answer to line, which must not need the training thread. */
static char *ask(const char *dir, const char *line)
{
    char *reply = NULL;
    cr_assert_eq(host_control_send(dir, line, &reply), SC_OK, "%s", sc_error_message());
    return reply;
}

static void assert_answer(const char *dir, const char *line, const char *want)
{
    char *reply = ask(dir, line);
    cr_expect(strstr(reply, want), "'%s' answered '%s', not '%s'", line, reply, want);
    free(reply);
}

/* A client waiting for the training thread, on its own thread. */
typedef struct client {
    pthread_t thread;
    const char *line;
    char *reply;
} client;

static void *client_main(void *arg)
{
    client *c = arg;
    if (host_control_send(run_dir, c->line, &c->reply) != SC_OK)
        c->reply = strdup(sc_error_message());
    return NULL;
}

static void client_start(client *c, const char *line)
{
    *c = (client){.line = line};
    cr_assert_eq(pthread_create(&c->thread, NULL, client_main, c), 0);
}

static char *client_answer(client *c)
{
    pthread_join(c->thread, NULL);
    return c->reply;
}

Test(control, status_comes_from_the_published_snapshot)
{
    host_control *ctl;
    cr_assert_eq(host_control_open(run_dir, NULL, &ctl), SC_OK, "%s", sc_error_message());
    assert_answer(run_dir, "status", "ok epoch=0/0 phase=setup");
    host_run_status st = {.epoch = 2, .epochs = 3, .phase = "train", .batch = 13, .batches = 32,
                        .step = 45, .lr = 0.001, .loss = 0.5, .samples_per_s = 1234.5};
    host_control_publish(ctl, &st);
    assert_answer(run_dir, "  status  ",
                  "ok epoch=2/3 phase=train batch=13/32 step=45 lr=0.001 loss=0.5 "
                  "samples_per_s=1234.5 paused=no queued=0\n");
    host_control_close(ctl);
}

Test(control, commands_wait_in_the_queue_for_the_training_thread)
{
    host_control *ctl;
    host_request r;
    cr_assert_eq(host_control_open(run_dir, NULL, &ctl), SC_OK, "%s", sc_error_message());
    cr_expect_not(host_control_take(ctl, &r), "an empty queue");
    client c;
    client_start(&c, "set-lr 0.25");
    cr_assert(host_control_wait(ctl, 10, &r), "the request never came");
    cr_expect_eq(r.kind, HOST_REQUEST_SET_LR);
    cr_expect_eq(r.lr, 0.25);
    host_control_reply(&r, true, "lr %g", r.lr);
    char *reply = client_answer(&c);
    cr_expect_str_eq(reply, "ok lr 0.25\n");
    free(reply);
    static const struct {
        const char *line;
        host_request_kind kind;
    } kinds[] = {{"pause", HOST_REQUEST_PAUSE}, {"resume", HOST_REQUEST_RESUME},
                 {"save", HOST_REQUEST_SAVE},   {"validate", HOST_REQUEST_VALIDATE},
                 {"test", HOST_REQUEST_TEST},   {"stop", HOST_REQUEST_STOP}};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        client_start(&c, kinds[i].line);
        cr_assert(host_control_wait(ctl, 10, &r), "%s never came", kinds[i].line);
        cr_expect_eq(r.kind, kinds[i].kind, "%s", kinds[i].line);
        host_control_reply(&r, false, "refused");
        reply = client_answer(&c);
        cr_expect_str_eq(reply, "error refused\n");
        free(reply);
    }
    host_control_close(ctl);
}

Test(control, bad_requests_are_answered_at_once)
{
    host_control *ctl;
    cr_assert_eq(host_control_open(run_dir, NULL, &ctl), SC_OK, "%s", sc_error_message());
    assert_answer(run_dir, "stauts", "error unknown command 'stauts' (did you mean 'status'?)");
    assert_answer(run_dir, "frobnicate", "error unknown command 'frobnicate' (commands: status");
    assert_answer(run_dir, "set-lr fast", "error set-lr needs a positive number, not 'fast'");
    assert_answer(run_dir, "set-lr -1", "error set-lr needs a positive number");
    assert_answer(run_dir, "save now", "error save takes no argument (got 'now')");
    assert_answer(run_dir, "call", "error call needs a function name");
    assert_answer(run_dir, "call echo", "error this run has no user functions");
    host_request r;
    cr_expect_not(host_control_take(ctl, &r), "a refused request was queued");
    host_control_close(ctl);
}

/* Asks status until it reports `want` requests queued. */
static void await_queued(const char *want)
{
    for (;;) {
        char *reply = ask(run_dir, "status");
        bool there = strstr(reply, want) != NULL;
        free(reply);
        if (there)
            return;
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
}

Test(control, closing_answers_what_is_still_queued_and_removes_the_socket)
{
    host_control *ctl;
    cr_assert_eq(host_control_open(run_dir, NULL, &ctl), SC_OK, "%s", sc_error_message());
    client c;
    client_start(&c, "test");
    await_queued("queued=1");
    host_control_close(ctl);
    char *reply = client_answer(&c);
    cr_expect_str_eq(reply, "error the run ended before this was done\n");
    free(reply);
    char path[512];
    snprintf(path, sizeof path, "%s/%s", run_dir, HOST_CONTROL_SOCKET);
    cr_expect_neq(access(path, F_OK), 0, "the socket is still there");
    char *answer = NULL;
    cr_expect_neq(host_control_send(run_dir, "status", &answer), SC_OK);
    assert_message_has("no scorch-train is running with this run directory");
}

Test(control, a_stale_socket_is_replaced_and_a_served_one_refused)
{
    char path[100];
    snprintf(path, sizeof path, "%s/%s", run_dir, HOST_CONTROL_SOCKET);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path);
    cr_assert_eq(bind(fd, (struct sockaddr *)&addr, sizeof addr), 0);
    close(fd); /* a crashed run's socket: the file stays, nobody listens */
    char *answer = NULL;
    cr_expect_neq(host_control_send(run_dir, "status", &answer), SC_OK);
    assert_message_has("the run that served it has ended");

    host_control *ctl, *second;
    cr_assert_eq(host_control_open(run_dir, NULL, &ctl), SC_OK, "%s", sc_error_message());
    assert_answer(run_dir, "status", "ok ");
    cr_assert_eq(host_control_open(run_dir, NULL, &second), SC_ERR_STATE);
    assert_message_has("is served by another scorch-train");
    assert_answer(run_dir, "status", "ok "); /* the refusal left the first one alone */
    host_control_close(ctl);
}

Test(control, a_file_in_the_way_is_not_removed)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", run_dir, HOST_CONTROL_SOCKET);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fclose(f);
    host_control *ctl;
    cr_assert_eq(host_control_open(run_dir, NULL, &ctl), SC_ERR_IO);
    assert_message_has("control.sock exists and is not a socket");
    cr_expect_eq(access(path, F_OK), 0);
}

Test(control, a_run_directory_longer_than_a_socket_path_works)
{
    char deep[512];
    snprintf(deep, sizeof deep, "%s/%0120d", run_dir, 7);
    cr_assert_eq(mkdir(deep, 0700), 0);
    host_control *ctl;
    cr_assert_eq(host_control_open(deep, NULL, &ctl), SC_OK, "%s", sc_error_message());
    assert_answer(deep, "status", "ok epoch=0/0");
    host_control_close(ctl);
    char path[600];
    snprintf(path, sizeof path, "%s/%s", deep, HOST_CONTROL_SOCKET);
    cr_expect_neq(access(path, F_OK), 0, "the socket is still there");
}

Test(control, call_runs_a_user_function_on_the_control_thread)
{
    host_plugin_lib lib;
    host_user_funcs *funcs;
    cr_assert_eq(host_hooks_lib_open(fixture("funcs_only"), NULL, &lib), SC_OK, "%s",
                 sc_error_message());
    cr_assert_eq(host_user_funcs_new(&funcs), SC_OK);
    cr_assert_eq(host_user_funcs_add(funcs, lib.user_funcs, lib.path), SC_OK, "%s",
                 sc_error_message());
    host_control *ctl;
    cr_assert_eq(host_control_open(run_dir, funcs, &ctl), SC_OK, "%s", sc_error_message());
    assert_answer(run_dir, "call echo a=1,b=two", "ok echo: a=1 b=two\n");
    assert_answer(run_dir, "call echo", "ok echo:\n");
    assert_answer(run_dir, "call fail", "error user function 'fail' of ");
    assert_answer(run_dir, "call fail", "funcs_only.so: fixture failure");
    assert_answer(run_dir, "call ecoh", "error no user function 'ecoh' (did you mean 'echo'?)");
    assert_answer(run_dir, "call echo a", "error ");
    host_control_close(ctl);
    host_user_funcs_free(funcs);
    host_plugin_lib_close(&lib);
}

/* ---- clients that do not finish their line ---- */

/* A connection to run_dir's socket, for a client that may never write. */
static int connect_raw(void)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    cr_assert(fd >= 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s/%s", run_dir, HOST_CONTROL_SOCKET);
    cr_assert_eq(connect(fd, (struct sockaddr *)&addr, sizeof addr), 0);
    return fd;
}

/* What fd receives until the server closes it, or until nothing has come
 * for `seconds`. */
static void read_answer(int fd, int seconds, char *buf, size_t size)
{
    struct timeval limit = {seconds, 0};
    cr_assert_eq(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit), 0);
    size_t len = 0;
    for (ssize_t n; len + 1 < size && (n = recv(fd, buf + len, size - 1 - len, 0)) > 0;)
        len += (size_t)n;
    buf[len] = '\0';
}

/* `status` is answered at once: well within 3 s, where a server that
 * waited on another client's line would take 5 s for each. */
static void assert_status_answered(void)
{
    int fd = connect_raw();
    cr_assert_eq(send(fd, "status\n", 7, 0), 7);
    char answer[512];
    read_answer(fd, 3, answer, sizeof answer);
    close(fd);
    cr_expect(strncmp(answer, "ok epoch=", 9) == 0, "status answered '%s'", answer);
}

Test(control, clients_that_send_nothing_or_half_a_line_hold_up_no_other)
{
    host_control *ctl;
    cr_assert_eq(host_control_open(run_dir, NULL, &ctl), SC_OK, "%s", sc_error_message());
    int silent = connect_raw(), halfway = connect_raw();
    cr_assert_eq(send(halfway, "sta", 3, 0), 3);
    assert_status_answered(); /* while both stay connected */
    close(silent);
    close(halfway);
    host_control_close(ctl);
}

Test(control, a_crowd_of_silent_clients_cannot_shut_another_out)
{
    host_control *ctl;
    cr_assert_eq(host_control_open(run_dir, NULL, &ctl), SC_OK, "%s", sc_error_message());
    enum { CROWD = 20 };
    int crowd[CROWD];
    for (int i = 0; i < CROWD; i++)
        crowd[i] = connect_raw();
    assert_status_answered();
    char answer[256]; /* the first of the crowd made room, and was told */
    read_answer(crowd[0], 3, answer, sizeof answer);
    cr_expect(strstr(answer, "error dropped before a whole command came"), "answered '%s'",
              answer);
    for (int i = 0; i < CROWD; i++)
        close(crowd[i]);
    host_control_close(ctl);
}

Test(control, a_line_late_by_its_deadline_is_answered_an_error)
{
    host_control *ctl;
    cr_assert_eq(host_control_open(run_dir, NULL, &ctl), SC_OK, "%s", sc_error_message());
    int halfway = connect_raw();
    cr_assert_eq(send(halfway, "sta", 3, 0), 3);
    char answer[256];
    read_answer(halfway, 10, answer, sizeof answer);
    cr_expect_str_eq(answer, "error no whole command line came within 5 s\n");
    close(halfway);
    assert_status_answered();
    host_control_close(ctl);
}

/* ---- the registry ---- */

static sc_status fn_ok(const sc_args *args, char *out, size_t size)
{
    snprintf(out, size, "%s", "0123456789");
    return SC_OK;
}

#define FUNCS(...)                                                                       \
    ((sc_user_func_table){SC_ABI_HEADER(sc_user_func_table),                             \
                          (int)(sizeof((const sc_user_func[]){__VA_ARGS__}) /            \
                                sizeof(sc_user_func)),                                   \
                          (const sc_user_func[]){__VA_ARGS__}})

static void assert_funcs_refused(sc_user_func_table table, const char *part)
{
    host_user_funcs *funcs;
    cr_assert_eq(host_user_funcs_new(&funcs), SC_OK);
    cr_expect_eq(host_user_funcs_add(funcs, &table, "u.so"), SC_ERR_PLUGIN);
    assert_message_has("u.so: ");
    assert_message_has(part);
    cr_expect_eq(host_user_funcs_count(funcs), 0);
    host_user_funcs_free(funcs);
}

Test(user_funcs, tables_are_checked)
{
    assert_funcs_refused(FUNCS({"", NULL, fn_ok}), "user function #0 has no name");
    assert_funcs_refused(FUNCS({"a b", NULL, fn_ok}), "'a b' has a name outside [A-Za-z0-9_-]");
    assert_funcs_refused(FUNCS({"f", NULL, NULL}), "user function 'f' has no function");
    assert_funcs_refused(FUNCS({"f", NULL, fn_ok}, {"f", NULL, fn_ok}), "appears twice");
    sc_user_func_table t = FUNCS({"f", NULL, fn_ok});
    t.abi.major = 2;
    t.abi.minor = 0;
    assert_funcs_refused(t, "user function table built for plugin ABI 2.0");
}

Test(user_funcs, names_are_unique_across_plugins_and_results_are_cut_to_fit)
{
    host_user_funcs *funcs;
    cr_assert_eq(host_user_funcs_new(&funcs), SC_OK);
    sc_user_func_table a = FUNCS({"digits", "ten digits", fn_ok});
    cr_assert_eq(host_user_funcs_add(funcs, &a, "a.so"), SC_OK);
    cr_expect_eq(host_user_funcs_add(funcs, &a, "b.so"), SC_ERR_PLUGIN);
    assert_message_has("b.so: user function 'digits' is already defined by a.so");
    char out[4];
    cr_assert_eq(host_user_funcs_call(funcs, "digits", "", out, sizeof out), SC_OK);
    cr_expect_str_eq(out, "012");
    cr_expect_eq(host_user_funcs_call(funcs, "nothing", "", out, sizeof out), SC_ERR_INVALID);
    assert_message_has("no user function 'nothing' (the run has: digits)");
    host_user_funcs_free(funcs);
}

Test(user_funcs, a_duplicate_in_a_plugin_is_refused)
{
    host_plugin_lib lib;
    host_user_funcs *funcs;
    cr_assert_eq(host_hooks_lib_open(fixture("funcs_dup"), NULL, &lib), SC_OK, "%s",
                 sc_error_message());
    cr_assert_eq(host_user_funcs_new(&funcs), SC_OK);
    cr_expect_eq(host_user_funcs_add(funcs, lib.user_funcs, lib.path), SC_ERR_PLUGIN);
    assert_message_has("funcs_dup.so: user function 'echo' appears twice in the table");
    host_user_funcs_free(funcs);
    host_plugin_lib_close(&lib);
}
