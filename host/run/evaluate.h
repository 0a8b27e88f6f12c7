/* evaluate.h — one pass of the network over a split without training
 * (valid, test, scorch-test), with exact sums for loss and metrics. */
#ifndef SCORCH_HOST_EVALUATE_H
#define SCORCH_HOST_EVALUATE_H

#include "run/loader.h"
#include "observe/run_log.h"
#include "run/session.h"

/* Called after each batch's forward, before the step arena is reset. */
typedef sc_status (*host_eval_batch_fn)(void *user, const host_batch *batch,
                                      const sc_tensor_list *outputs);

typedef struct host_eval_sums {
    double loss_sum; /* sum over samples of the batch-mean loss x batch size */
    int64_t samples;
    double data_wait_s;
} host_eval_sums;

/* Runs the network in eval mode with grad off over the loader's epoch
 * `epoch` (`phase` names the pass in messages), at most max_batches batches (0 = all), adding to metrics and
 * sums. on_batch may be NULL. log, when not NULL, shows the pass's
 * progress line. */
sc_status host_evaluate(host_session *s, host_loader *loader, const char *phase, int epoch,
                      int64_t max_batches, sc_metrics *metrics, host_eval_sums *sums,
                      host_eval_batch_fn on_batch, void *user, host_run_log *log);

/* The batch loss as a double, or an SC_ERR_NUMERIC error when it is not
 * finite (naming the phase and batch). On a GPU it waits for the loss. */
sc_status host_loss_value(const sc_tensor *loss, const char *phase, int epoch, int64_t batch,
                        double *out);
/* The same error for a loss value already read. */
sc_status host_loss_check(double value, const char *phase, int epoch, int64_t batch);

/* How many of a batch of `size` samples a message names: the first 8. */
int host_samples_named(int64_t size);
/* Adds to the message of a batch that failed (st not SC_OK) the dataset
 * indices of its samples, `first` holding n of its `size`, so that the
 * user can find the bad data: "...; the batch's samples: 17, 4, 99, ...
 * (64 in all)". Returns st. */
sc_status host_name_samples(sc_status st, const int64_t *first, int n, int64_t size);
/* host_name_samples with batch b's first host_samples_named indices. */
sc_status host_name_batch(sc_status st, const host_batch *b);

#endif
