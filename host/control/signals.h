/* signals.h — what the signals sent to scorch-train ask of a run
 * (docs/cli.md), in one place: the handlers, and the requests they leave
 * for the training threads to take at their next batch boundary.
 *
 *   SIGINT, SIGTERM  stop after the current batch, with a checkpoint;
 *                    a second one ends the process at once (the default
 *                    action, restored by the first);
 *   SIGUSR1          a checkpoint after the current batch; training
 *                    goes on.
 *
 * Thread rule: host_signals_install from main, before any thread starts;
 * the rest from any thread (the requests are lock-free atomics, which a
 * handler may set).
 */
#ifndef SCORCH_HOST_SIGNALS_H
#define SCORCH_HOST_SIGNALS_H

#include <signal.h>
#include <stdbool.h>

/* Installs the handlers of the signals above. */
void host_signals_install(void);

/* Whether a stop was asked. It stays asked: every replica, and every
 * later boundary, sees it. */
bool host_signals_stop_requested(void);

/* Whether a checkpoint was asked since the last call: true once for any
 * number of SIGUSR1 before it. */
bool host_signals_take_save(void);

/* Adds the signals above to `set`: a thread that must leave them to the
 * training threads blocks them. */
void host_signals_add_to(sigset_t *set);

#endif
