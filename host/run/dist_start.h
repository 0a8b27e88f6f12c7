/* dist_start.h — the run's side of data parallelism at start-up: what the
 * ranks must agree on or share that needs the session, the trainer's
 * state, the hooks' blobs or the run log, built on dist.h's collectives
 * (which know only parameters, optimizer state and bytes).
 *
 * Thread rule: a rank's training thread, as for dist.h. Every function
 * here is a no-op in a single process, as dist.h's are.
 */
#ifndef SCORCH_HOST_DIST_START_H
#define SCORCH_HOST_DIST_START_H

#include "base/config.h"
#include "control/hook_set.h"
#include "dist/dist.h"
#include "observe/run_log.h"
#include "run/checkpoint.h"
#include "run/session.h"

/* How many replicas this process drives (host_dist_replicas) for the
 * device the run asks for (host_session_device_choice). */
sc_status host_dist_start_replicas(const host_config *cfg, int *replicas);

/* Collective: the ranks compare the plugin ABIs, the dataset's split
 * lengths, the resolved options (all but the per-node ones: plugin and
 * data paths, run directory, resume, threads, workers, prefetch, quiet,
 * collective-timeout, a job's checkpoints) and the parameters' names,
 * shapes and trainability (of those the session has: a job's may lack a
 * model or a dataset).
 * A difference stops every rank, naming the rank and the first line that
 * differs from rank 0's. */
sc_status host_dist_start_verify(host_dist *d, const host_session *s, const host_config *cfg);

/* Collective: host_dist_start (the gradient buckets; rank 0's parameters,
 * buffers and optimizer state to every rank), then rank 0's trainer state
 * (its position, fresh or resumed) to every rank. The other ranks start
 * their sums of a half-done epoch from zero: rank 0's hold the whole
 * job's (host_dist_before_checkpoint). */
sc_status host_dist_start_state(host_dist *d, sc_ctx *ctx, sc_params *params, sc_optim *opt,
                                host_train_state *state);

/* Collective: rank 0's hook blobs (the hooks' checkpoint state, which
 * rank 0 alone read on resume) to every rank. */
sc_status host_dist_start_blobs(host_dist *d, host_hook_blobs *blobs);

/* Rank 0, on resume, before the position is used: a checkpoint saved by
 * another world size has its mid-epoch position (next_batch) converted to
 * this world size by the samples already trained, rounded up to a whole
 * optimizer step (so at most a global step's worth of samples is skipped,
 * none seen twice), and a note says so. `batches` is this epoch's batches
 * per rank. */
void host_dist_start_position(const host_dist *d, const host_config *cfg,
                              host_train_state *saved, int64_t batches, const char *path);

/* Rank 0's line about the job (host_dist_describe), when it has one. */
void host_dist_start_describe(const host_dist *d, const host_config *cfg, host_run_log *log);

#endif
