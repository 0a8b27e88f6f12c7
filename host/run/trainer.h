/* trainer.h — the train / valid / test loop of scorch-train.
 *
 * Per epoch: the train phase (forward, criterion, backward, optimizer
 * step, per batch), an optional eval pass over the train split
 * (--validate-on-train, phase "train_eval"), the valid phase, then the
 * schedule, best-metric tracking and a checkpoint; the test phase follows
 * the last epoch. Hooks run at their points after the built-in steps.
 */
#ifndef SCORCH_HOST_TRAINER_H
#define SCORCH_HOST_TRAINER_H

#include <stdbool.h>
#include <stddef.h>

#include "base/config.h"
#include "dist/dist.h"

typedef struct host_trainer host_trainer;

/* Sets everything up (and resumes when cfg->resume) for a process, or for
 * a replica in its seat (dist.h); errors name the part that failed. */
sc_status host_trainer_new(const host_config *cfg, const host_dist_seat *seat, host_trainer **out);

/* Trains, stopping early with a checkpoint when a signal asks
 * (control/signals.h); *interrupted tells whether it did. */
sc_status host_trainer_run(host_trainer *t, bool *interrupted);

/* The run's last checkpoint into path; false when none was written yet.
 * A failed run never writes one, so after a failure this names the last
 * good state. */
bool host_trainer_last_checkpoint(const host_trainer *t, char *path, size_t size);

void host_trainer_free(host_trainer *t);

#endif
