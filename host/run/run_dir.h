/* run_dir.h — the run directory:
 *
 *   RUN/config.ini          the resolved config
 *   RUN/metrics.jsonl       one JSON object per epoch and phase, and hooks'
 *                           scalars (run_log.h)
 *   RUN/checkpoints/epoch-EEEE-step-SSSSSSSSS.ckpt   the last --keep-last;
 *                           EEEE the epoch of its last step, SSSSSSSSS the
 *                           optimizer steps taken (docs/checkpoint-format.md)
 *   RUN/checkpoints/last.ckpt, best.ckpt            hard links (or copies)
 *   RUN/tensorboard/events.out.tfevents.*          TensorBoard (tensorboard.h)
 *
 * A directory that already holds a run is only reused with --resume, so a
 * new run never overwrites an old run's checkpoints; and one process at a
 * time holds it (RUN/.lock), so a second run on it stops before touching
 * anything.
 */
#ifndef SCORCH_HOST_RUN_DIR_H
#define SCORCH_HOST_RUN_DIR_H

#include <stdbool.h>
#include <stdint.h>

#include "base/config.h"

typedef struct host_run_dir {
    char root[HOST_PATH_MAX];
    char checkpoints[HOST_PATH_MAX];
    bool locked;
    int lock_fd; /* RUN/.lock, flock()ed while locked */
} host_run_dir;

/* Creates RUN and RUN/checkpoints as needed and locks RUN: a directory
 * another process holds is refused, naming its PID. Without resume, refuses
 * a directory that already has checkpoints. */
sc_status host_run_dir_prepare(host_run_dir *rd, const char *path, bool resume);

/* Releases the lock (also released when the process ends). */
void host_run_dir_close(host_run_dir *rd);

/* RUN/<name> into buf. */
void host_run_dir_file(const host_run_dir *rd, const char *name, char *buf, size_t size);

/* The numbered checkpoint path for (epoch, step): the epoch its last
 * step belongs to, and the steps taken. */
void host_run_dir_checkpoint(const host_run_dir *rd, int epoch, int64_t step, char *buf,
                           size_t size);

/* RUN/checkpoints/<alias>.ckpt ("last", "best") into buf. */
void host_run_dir_alias(const host_run_dir *rd, const char *alias, char *buf, size_t size);

/* Points <alias>.ckpt at ckpt atomically (hard link, else copy; then
 * rename). */
sc_status host_run_dir_publish(const host_run_dir *rd, const char *ckpt, const char *alias);

/* The numbered checkpoints in the folder `checkpoints` (RUN/checkpoints),
 * oldest first: their names, in *names (the caller frees each and the
 * array) of *count. */
sc_status host_run_dir_list_numbered(const char *checkpoints, char ***names, size_t *count);

/* Deletes all but the newest keep numbered checkpoints (aliases stay). */
sc_status host_run_dir_prune(const host_run_dir *rd, int keep);

/* On resume from a checkpoint taken at `step`: keeps the metrics.jsonl
 * records of steps up to it (phases, hooks' scalars, extra passes) and
 * drops those of later steps, which the resumed run writes again, so each
 * step's records appear once. TensorBoard does the same with the events
 * of the run's earlier files (tensorboard.h). */
sc_status host_run_dir_trim_metrics(const host_run_dir *rd, int64_t step);

/* Whether metrics.jsonl holds a record of `phase` at `step`. */
bool host_run_dir_has_record(const host_run_dir *rd, const char *phase, int64_t step);

#endif
