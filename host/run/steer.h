/* steer.h — what steers a training from outside its loop, served by the
 * training thread at batch boundaries (after a train batch, and between
 * epochs): hooks' requests (checkpoint, an extra valid or test pass),
 * SIGUSR1 (checkpoint) and scorch-ctl's commands (control.h).
 *
 * Pause lives here: after `pause` the training thread waits inside
 * host_steer_next, still serving save, validate, test, set-lr and stop,
 * until `resume`, a stop, or SIGINT/SIGTERM. A paused run computes
 * nothing, so resuming gives the same result as never pausing.
 *
 * Thread rule: the training thread; the control thread is behind
 * control.h.
 */
#ifndef SCORCH_HOST_STEER_H
#define SCORCH_HOST_STEER_H

#include <stdbool.h>

#include "control/control.h"
#include "scorch/hooks.h"

typedef struct host_steer {
    host_control *control;  /* NULL: no live control */
    unsigned raised;      /* request kinds raised by hooks, a bit each */
    unsigned serving;     /* those the boundary in progress serves */
    bool in_boundary;
    bool paused;
    bool save_signal_agreed; /* data parallel: the trainer turns SIGUSR1 into a
                                raised SAVE that every rank agrees on */
    host_request stop;      /* scorch-ctl's stop, answered at the end */
    host_run_status status; /* as last published */
    host_run_status before_extra; /* where an extra pass found the training */
    double phase_start;   /* for samples_per_s */
    int64_t phase_batches;
    bool train_phase_due; /* the epoch's train phase has not ended yet */
    double train_loss, train_samples_per_s; /* the last train phase's, at its end */
} host_steer;

void host_steer_init(host_steer *s);

/* Serves RUN_DIR/control.sock (control.h) for this run. */
sc_status host_steer_listen(host_steer *s, const char *run_dir, const host_user_funcs *funcs);

/* Answers a pending scorch-ctl stop with `outcome` ("" when the run
 * failed: the stop is then answered with the error message) and closes
 * the control socket. */
void host_steer_close(host_steer *s, bool ok, const char *outcome);

/* A hook asks for kind (SAVE, VALIDATE or TEST) at the next boundary. */
void host_steer_raise(host_steer *s, host_request_kind kind);

/* Records where the training thread is, from the context of the hook
 * point it runs, for `status`. Checkpoint points leave it as it was, and
 * so does an extra pass once it has ended. */
void host_steer_publish(host_steer *s, const sc_hook_context *ctx);

/* Between epochs no pass runs: `status` shows the epoch that ended
 * (ended->epoch, all ended->batches done) as phase "between_epochs", with
 * its train phase's loss and throughput, labelled as the train phase's. */
void host_steer_publish_between_epochs(host_steer *s, const sc_hook_context *ended);

/* At a boundary: the next request to serve, or false when there is none
 * left; waits here while paused. Requests hooks raise while the boundary
 * is served wait for the next boundary. */
bool host_steer_next(host_steer *s, host_request *out);

/* After serving r: answers its client with text, or with the error of
 * st. A stop is answered by host_steer_close, once the run has ended. */
void host_steer_done(host_steer *s, host_request *r, sc_status st, const char *text);

#endif
