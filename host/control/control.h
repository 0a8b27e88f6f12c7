/* control.h — live control of a training run through RUN_DIR/control.sock.
 *
 * Protocol: a client (scorch-ctl) connects to the Unix-domain stream
 * socket, writes one line "COMMAND [ARGS]\n", and reads the answer until
 * the server closes the connection: "ok TEXT" or "error TEXT", TEXT being
 * one or more lines. Commands:
 *
 *   status                  epoch=E/N phase=P batch=B/M step=S lr=X loss=X
 *                           samples_per_s=X paused=yes|no queued=Q (requests
 *                           waiting for the training thread); between
 *                           epochs phase=between_epochs, with train_loss
 *                           and train_samples_per_s of epoch E's train phase
 *   pause, resume           hold the training thread at a batch boundary
 *   save                    write a checkpoint now
 *   validate, test          run an extra valid / test pass now
 *   set-lr X                set the base learning rate from the next step
 *   stop                    checkpoint and exit cleanly (answered at exit)
 *   call NAME [k=v,...]     call a plugin's user function
 *
 * The server is a thread of scorch-train (rank 0). It never touches the
 * trainer: it answers `status` from the snapshot the training thread last
 * published, runs `call` itself (user functions have no trainer access),
 * and queues every other command for the training thread, which takes it
 * at its next batch boundary (host_control_take: one atomic load while the
 * queue is empty), applies it and answers it (host_control_reply).
 *
 * No client holds up another: the thread reads every connection as its
 * bytes arrive (16 at once; a 17th drops the one that came first), and
 * one that has not sent its whole line within 5 s is answered an error.
 * Answers never wait for their client to read them. Only a user function
 * that takes long delays the clients that come meanwhile.
 */
#ifndef SCORCH_HOST_CONTROL_H
#define SCORCH_HOST_CONTROL_H

#include <stdbool.h>
#include <stdint.h>

#include "control/user_funcs.h"

#define HOST_CONTROL_SOCKET "control.sock"

typedef enum host_request_kind {
    HOST_REQUEST_PAUSE,
    HOST_REQUEST_RESUME,
    HOST_REQUEST_SAVE,
    HOST_REQUEST_VALIDATE,
    HOST_REQUEST_TEST,
    HOST_REQUEST_SET_LR,
    HOST_REQUEST_STOP,
} host_request_kind;

/* A request for the training thread, from scorch-ctl (client >= 0: the
 * connection to answer on) or from inside the process (client -1). */
typedef struct host_request {
    host_request_kind kind;
    double lr;  /* HOST_REQUEST_SET_LR */
    int client;
} host_request;

/* Where the training thread is, as `status` tells it. */
typedef struct host_run_status {
    int epoch, epochs;
    const char *phase; /* a string literal: "train", "valid", ... */
    int64_t batch, batches, step;
    double lr, loss, samples_per_s;
    bool paused;
    bool between_epochs; /* no pass runs (phase "between_epochs"): loss and
                            samples_per_s are the train phase's of `epoch`,
                            shown as train_loss and train_samples_per_s */
} host_run_status;

typedef struct host_control host_control;

/* Serves RUN_DIR/control.sock from a new thread. A stale socket (its run
 * is gone) is replaced; one another process still serves is an error.
 * funcs (may be NULL) must outlive the control. */
sc_status host_control_open(const char *run_dir, const host_user_funcs *funcs, host_control **out);

/* Stops the thread, answers every request still queued with an error and
 * removes the socket. NULL is fine. */
void host_control_close(host_control *ctl);

/* Training thread. */
void host_control_publish(host_control *ctl, const host_run_status *status);
/* The oldest queued request, if any, without waiting. */
bool host_control_take(host_control *ctl, host_request *out);
/* Like take, but waits up to `seconds` for one. */
bool host_control_wait(host_control *ctl, double seconds, host_request *out);

/* Answers r's client, if it has one, with "ok TEXT" or "error TEXT", and
 * closes the connection. Any thread. */
void host_control_reply(host_request *r, bool ok, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Client: sends `line` to RUN_DIR's control socket and returns the whole
 * answer in *reply (caller frees). */
sc_status host_control_send(const char *run_dir, const char *line, char **reply);

#endif
