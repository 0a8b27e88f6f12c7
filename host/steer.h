/* steer.h — what steers a training from outside its loop, served by the
 * training thread at batch boundaries (after a train batch, and between
 * epochs): hooks' requests (checkpoint, an extra valid or test pass),
 * SIGUSR1 (checkpoint) and scorch-ctl's commands (control.h).
 *
 * Pause lives here: after `pause` the training thread waits inside
 * sc_steer_next, still serving save, validate, test, set-lr and stop,
 * until `resume`, a stop, or SIGINT/SIGTERM. A paused run computes
 * nothing, so resuming gives the same result as never pausing.
 *
 * Thread rule: the training thread; the control thread is behind
 * control.h.
 */
#ifndef SCORCH_HOST_STEER_H
#define SCORCH_HOST_STEER_H

#include <stdbool.h>

#include "control.h"
#include "scorch/hooks.h"

typedef struct sc_steer {
    sc_control *control;  /* NULL: no live control */
    unsigned raised;      /* request kinds raised by hooks, a bit each */
    unsigned serving;     /* those the boundary in progress serves */
    bool in_boundary;
    bool paused;
    bool save_signal_agreed; /* data parallel: the trainer turns SIGUSR1 into a
                                raised SAVE that every rank agrees on */
    sc_request stop;      /* scorch-ctl's stop, answered at the end */
    sc_run_status status; /* as last published */
    sc_run_status before_extra; /* where an extra pass found the training */
    double phase_start;   /* for samples_per_s */
    int64_t phase_batches;
    bool train_phase_due; /* the epoch's train phase has not ended yet */
    double train_loss, train_samples_per_s; /* the last train phase's, at its end */
} sc_steer;

void sc_steer_init(sc_steer *s);

/* Serves RUN_DIR/control.sock (control.h) for this run. */
sc_status sc_steer_listen(sc_steer *s, const char *run_dir, const sc_user_funcs *funcs);

/* Answers a pending scorch-ctl stop with `outcome` ("" when the run
 * failed: the stop is then answered with the error message) and closes
 * the control socket. */
void sc_steer_close(sc_steer *s, bool ok, const char *outcome);

/* A hook asks for kind (SAVE, VALIDATE or TEST) at the next boundary. */
void sc_steer_raise(sc_steer *s, sc_request_kind kind);

/* Records where the training thread is, from the context of the hook
 * point it runs, for `status`. Checkpoint points leave it as it was, and
 * so does an extra pass once it has ended. */
void sc_steer_publish(sc_steer *s, const sc_hook_context *ctx);

/* Between epochs no pass runs: `status` shows the epoch that ended
 * (ended->epoch, all ended->batches done) as phase "between_epochs", with
 * its train phase's loss and throughput, labelled as the train phase's. */
void sc_steer_publish_between_epochs(sc_steer *s, const sc_hook_context *ended);

/* At a boundary: the next request to serve, or false when there is none
 * left; waits here while paused. Requests hooks raise while the boundary
 * is served wait for the next boundary. */
bool sc_steer_next(sc_steer *s, sc_request *out);

/* After serving r: answers its client with text, or with the error of
 * st. A stop is answered by sc_steer_close, once the run has ended. */
void sc_steer_done(sc_steer *s, sc_request *r, sc_status st, const char *text);

#endif
