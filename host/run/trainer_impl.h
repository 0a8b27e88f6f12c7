/* trainer_impl.h — the trainer's state, shared by its three parts:
 * trainer.c (the train / valid / test loops and steering), trainer_hooks.c
 * (the context a hook sees and the actions it may take) and
 * trainer_setup.c (set-up, resume and teardown). Private to the host.
 * Thread rule: everything here runs on the training thread. */
#ifndef SCORCH_HOST_TRAINER_IMPL_H
#define SCORCH_HOST_TRAINER_IMPL_H

#include <stdbool.h>

#include "base/waits.h"
#include "run/checkpoint.h"
#include "dist/dist.h"
#include "run/evaluate.h"
#include "run/graph_step.h"
#include "run/loader.h"
#include "run/mix.h"
#include "run/model_summary.h"
#include "run/run_dir.h"
#include "observe/run_log.h"
#include "run/session.h"
#include "run/steer.h"
#include "run/step_pipe.h"
#include "observe/tensorboard.h"
#include "run/trainer.h"
#include "scorch_host/ema.h"
#include "scorch_host/optim.h"

struct host_trainer {
    host_config cfg;
    host_session s;
    sc_optim *opt;
    sc_grad_clip *clip;       /* --clip-grad-norm or --clip-grad-value; else NULL */
    sc_ema *ema;              /* --ema-decay: the EMA of the weights; else NULL */
    host_loader *loaders[SC_SPLIT_COUNT];
    host_loader *train_eval; /* the train split in order (--validate-on-train) */
    sc_metrics *train_sums; /* of the train phase in progress */
    sc_metrics *eval_sums;
    host_train_state state;
    int64_t steps_per_epoch;
    host_run_dir rd;
    host_run_log log;
    host_tb_writer *tb;       /* the log's TensorBoard sink (closed with it), for what
                                 only TensorBoard shows; NULL: none */
    char *config_text; /* the resolved config.ini, saved in checkpoints */
    double lr;         /* of the latest step */
    double loss;       /* of the latest step read (step_pipe.h) */
    double step_loss_sum; /* of the optimizer step's micro-batches so far (TensorBoard) */
    int64_t batch_step; /* the optimizer step the train batch in progress belongs to
                           (1-based), from its batch_begin to its batch_end; else 0 */
    bool stop;         /* a hook asked to stop */
    bool interrupted;  /* a signal asked to stop */
    bool extra_pass;   /* an extra valid/test pass is running */
    host_steer steer;    /* requests from hooks, signals and scorch-ctl */
    host_hook_blobs hook_blobs; /* the hooks' checkpoint entries, last saved or loaded */
    sc_hook_grad *grads;      /* after_backward's views of the gradients */
    int n_grads;
    /* Host copies of the flat parameter and gradient buffers when they are
     * on a GPU (read by hooks and histograms); the store's own on the CPU. */
    float *host_values, *host_grads;
    bool host_copies;         /* the two above are copies, refreshed on use */
    host_dist *dist;            /* this process's rank of the job (dist.h) */
    host_graph_step graphs;     /* the train step as a CUDA graph (graph_step.h) */
    host_step_pipe *pipe;       /* uploads and results of the steps in flight */
    host_waits waits;           /* the CPU threads' spin, from how busy the machine is */
    host_mix *mix;              /* --mixup, --cutmix (mix.h); NULL: off */
    double time_budget;       /* --max-time in seconds; 0: none */
    double deadline;          /* when the budget is spent (host_now()); 0: never */
    unsigned stop_causes;     /* what stopped the run early: host_stop_cause bits */
};

/* Why a run stopped before its last epoch; the ranks agree on the union
 * before reporting, since a signal may reach one rank only. */
enum host_stop_cause {
    HOST_STOP_SIGNAL = 1u << 0,  /* SIGINT or SIGTERM */
    HOST_STOP_TIME = 1u << 1,    /* --max-time spent */
    HOST_STOP_CONTROL = 1u << 2, /* scorch-ctl stop */
};

/* ---- trainer.c ---- */

/* Adds a train step read back (step_pipe.h) to the phase's sums, after
 * checking its loss; logs TensorBoard's per-step loss. */
sc_status trainer_fold_step(void *user, const host_step_result *step);

/* Logs short or long waits when `changed` (base/waits.h). */
void trainer_note_waits(host_trainer *t, bool changed);

/* ---- trainer_setup.c ---- */

/* Makes t->opt as the config says (set-up; lr_find.c makes a fresh one). */
sc_status trainer_make_optimizer(host_trainer *t);

/* Refreshes host_values and host_grads from a GPU's flat buffers. */
sc_status trainer_read_params(host_trainer *t);

/* ---- trainer_hooks.c ---- */

/* The learning rates a hook or scorch-ctl may set. */
bool trainer_lr_in_range(double lr);

/* What a hook at `point` sees; batch points add the batch's position and
 * loss. */
sc_hook_context trainer_hook_context(const host_trainer *t, const char *point, sc_split phase);
sc_hook_context trainer_batch_context(const host_trainer *t, const char *point, sc_split phase,
                                      int64_t batch, int64_t batches, double loss);

/* Runs the hooks of ctx->point (after publishing where training is, for
 * scorch-ctl status). */
sc_status trainer_run_hooks(host_trainer *t, const sc_hook_context *ctx);
sc_status trainer_run_point(host_trainer *t, const char *point, sc_split phase);

/* On resume, before train_begin: each hook gets back its checkpoint blob. */
sc_status trainer_load_hook_state(host_trainer *t);

#endif
