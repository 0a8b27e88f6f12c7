/* dist.h — data parallelism across processes: every rank trains a replica
 * of the model on its share of each global batch (docs/distributed.md).
 *
 * A run started by mpirun or srun (seen in the launcher's environment)
 * joins the job over MPI and becomes one rank of a world. A run asked for
 * replicas (--replicas N, --device parallel, --device cuda:N,M,...) is a
 * world of its own threads, one rank each, whose collectives stay in the
 * process. Any other run is a world of one that never communicates, and
 * then everything here is a no-op or plain local work, so single-process
 * training is unchanged.
 *
 * What keeps ranks from hanging. Every collective here begins with a
 * *check*: one small allreduce in which each rank reports whether it
 * failed. A rank that fails goes straight to host_dist_check() with its
 * error (the trainer does that once, on its way out); the other ranks'
 * next collective is a check too, so they meet it there, every rank learns
 * which rank failed and why, and all stop together. Two rules make this
 * hold: control flow depends only on what all ranks agree on (the stop
 * flags pass through host_dist_agree / host_dist_step_begin), and a rank that
 * fails after host_dist_step_begin still takes part in that step's gradient
 * exchange (host_dist_check completes it for it). A collective that misses
 * --collective-timeout (a rank died or hangs) aborts the job with a
 * message naming the collective.
 *
 * This layer knows parameters, optimizer state, metrics and bytes; what
 * needs the session, the trainer's state or the hooks' blobs is built on
 * it in run/dist_start.h. The transports under it are behind comm.h; the
 * launcher's environment and the "[rank R] " of messages in launch.h.
 *
 * Thread rule: a rank's training thread calls everything here for its
 * rank, except host_dist_print_error, which may also be called after its
 * trainer is gone; what it knows is per thread.
 */
#ifndef SCORCH_HOST_DIST_H
#define SCORCH_HOST_DIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/config.h"
#include "scorch/context.h"
#include "scorch/metrics.h"
#include "scorch/optim.h"
#include "scorch/params.h"

typedef struct host_dist host_dist;

/* What the exit codes of ranks mean to scorch-train. */
enum { HOST_EXIT_INTERRUPTED = 130 };

/* ---- replicas: ranks that are threads of this process ---- */

/* A replica's place: its rank in a team of threads (comm.h). */
typedef struct host_dist_seat {
    struct host_comm_team *team;
    int rank;
} host_dist_seat;

/* How many replicas this process is to drive: --replicas when given, else
 * one per GPU that --device parallel (every GPU) or cuda:N,M,... names,
 * else 1. `device` is the resolved --device text (the model's preference
 * when --device is not given), `source` where it came from. An error says
 * why the combination cannot run: more replicas than GPUs, a count that
 * does not match a GPU list, several replicas of one GPU or of
 * distributed_dataparallel, or replicas in a process a launcher started
 * (one device per MPI rank). */
sc_status host_dist_replicas(const host_config *cfg, const char *device, const char *source,
                             int *replicas);

/* Runs body on `replicas` threads, each a rank of one job over the threads
 * transport with its collectives' deadline timeout_s, and returns when all
 * have ended: the worst of their exit codes (0, 1 for a failure or
 * HOST_EXIT_INTERRUPTED; a failure outranks a stop). */
int host_dist_run_replicas(int replicas, double timeout_s,
                           int (*body)(const host_dist_seat *seat, void *arg), void *arg);

/* ---- the job ---- */

/* Joins the job: seat's team when it is not NULL; else the MPI job when a
 * launcher started this process (MPI_Init_thread, rank and world, local
 * rank from MPI_Comm_split_type); else a world of one. Rank 0 speaks for
 * the job: a launched rank other than 0 sends its stdout to /dev/null
 * (replicas other than 0 are quiet), and errors go to stderr prefixed
 * with the rank. The rank is then what plugins on the calling thread see
 * through scorch/dist.h, their collectives made here (plugins.c), until
 * host_dist_close. */
sc_status host_dist_open(const host_config *cfg, const host_dist_seat *seat, host_dist **out);
/* Frees it, and plugins on the calling thread no longer see its rank;
 * NULL is a no-op. The process leaves the MPI job at exit, so
 * that main reports an error before any rank can end (mpirun then ends
 * the others). */
void host_dist_close(host_dist *d);

/* Rank and world size; 0 and 1 for NULL or a single process. */
int host_dist_rank(const host_dist *d);
int host_dist_world(const host_dist *d);
/* This rank's place among the ranks on its node (its GPU, device.h). */
int host_dist_local_rank(const host_dist *d);
bool host_dist_is_root(const host_dist *d);

/* Compute threads for this rank: `requested` when > 0; else all cores for
 * a single process, and for a rank OMP_NUM_THREADS when set, else its
 * share of the cores (the cores it is bound to, or the node's cores over
 * the ranks or replicas on the node). */
int host_dist_threads(const host_dist *d, int requested);

/* The random stream of micro-batch `micro` of an optimizer step, from the
 * step's `stream`: unchanged for a single process without accumulation,
 * else distinct per rank and micro-batch, so that dropout masks are not
 * repeated across ranks or micro-batches. */
uint64_t host_dist_step_stream(const host_dist *d, uint64_t stream, int64_t micro);

/* ---- agreement ---- */

/* Collective: every rank's status. SC_OK when all succeeded; else every
 * rank returns an error: a failed rank its own, the others "rank R
 * failed: <its message>". Once a failure is agreed, further calls return
 * it again without communicating. A single process returns `local`. */
sc_status host_dist_check(host_dist *d, sc_status local);

/* A check that also ORs the ranks' stop requests into *stop and
 * *interrupted, and verifies that the ranks' parameters are still
 * identical (a rank whose differ stops the job, naming it). At epoch
 * boundaries. */
sc_status host_dist_agree(host_dist *d, bool *stop, bool *interrupted);

/* At the first micro-batch of each optimizer step: a check that agrees on
 * the stop requests and, unless stopping, opens the step's gradient
 * exchange. */
sc_status host_dist_step_begin(host_dist *d, bool *stop, bool *interrupted);

/* A check that ORs the ranks' request bits (at most 16 kinds) into *bits,
 * so that every rank serves what was asked of any. */
sc_status host_dist_agree_bits(host_dist *d, unsigned *bits);

/* ---- start-up: rank 0's state to every rank ---- */

/* Collective: lays out the gradient buckets over `params` (on a GPU, over
 * NCCL), then rank 0's parameters and buffers (fresh or resumed) and its
 * optimizer state to every rank. Called in a single process too (no
 * communication). */
sc_status host_dist_start(host_dist *d, sc_ctx *ctx, sc_params *params, sc_optim *opt);

/* Collective: a check, then rank 0's `bytes` bytes at `data` into every
 * rank's `data` (of the same size on every rank), `what` naming it in a
 * failure. */
sc_status host_dist_share(host_dist *d, void *data, size_t bytes, const char *what);

/* Collective: a copy of rank 0's `size` bytes at `mine` on every rank,
 * NUL-terminated, in *copy of *copy_size bytes (the caller frees it, after
 * an error too). The other ranks need not know the size. `local` is this
 * rank's status so far: a failure on any rank stops every rank before the
 * bytes move. */
sc_status host_dist_share_bytes(host_dist *d, sc_status local, const void *mine, size_t size,
                                char **copy, size_t *copy_size, const char *what);

/* Collective: rank 0's t (on any device) into every rank's t, `what`
 * naming it in a failure (the EMA of the weights, which rank 0 alone read
 * on resume). */
sc_status host_dist_share_tensor(host_dist *d, sc_tensor *t, const char *what);

/* ---- a train step ---- */

/* Backward from loss. On a step's last micro-batch (sync) the gradients
 * are averaged over ranks and micro-batches, ready for the optimizer: on
 * several ranks bucket by bucket while backward still runs. Earlier
 * micro-batches only accumulate locally (PyTorch DDP's no_sync). */
sc_status host_dist_backward(host_dist *d, sc_ctx *ctx, sc_tensor *loss, bool sync);

/* ---- phases ---- */

/* Collective: the ranks' loss sums, sample counts and metric sums, summed
 * in rank order (so every rank gets the same bits), replacing each rank's
 * own. */
sc_status host_dist_sum_all(host_dist *d, double *loss_sum, int64_t *samples, sc_metrics *metrics);

/* Collective, before rank 0 saves a checkpoint: rank 0's buffers to every
 * rank, and the running sums of a half-done epoch gathered into rank 0's
 * (the others' zeroed), so the checkpoint holds the whole job's sums. */
sc_status host_dist_before_checkpoint(host_dist *d, double *loss_sum, int64_t *samples,
                                      sc_metrics *metrics);

/* Collective, before an eval pass: rank 0's buffers (running statistics)
 * to every rank, so all evaluate the same model. */
sc_status host_dist_sync_buffers(host_dist *d);

/* Seconds spent in collectives since the last call (0 for one process). */
double host_dist_take_comm_s(host_dist *d);

/* Rank 0's line about the job into line[0..size) (HOST_DIST_LINE_MAX
 * holds it); for a single process only a note when --device
 * distributed_dataparallel was given without a launcher. False when there
 * is nothing to say. */
enum { HOST_DIST_LINE_MAX = 512 };
bool host_dist_describe(const host_dist *d, const host_config *cfg, char *line, size_t size);

/* ---- reporting ---- */

/* Prints "<prefix><program>: <this thread's error message>" to stderr,
 * unless another rank reports this failure (rank 0 reports every failure;
 * a failed rank adds its own message when it says something else). */
void host_dist_print_error(const char *program);

#endif
