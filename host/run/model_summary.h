/* model_summary.h — the table of a model's layers that scorch-train prints
 * at the start of a run, and alone with --summary: each layer's output
 * shape, parameter count and forward FLOPs, and the totals. It is computed
 * from the tape of one forward pass (scorch/summary.h), so it describes
 * the model as it runs, not as someone wrote it down.
 */
#ifndef SCORCH_HOST_MODEL_SUMMARY_H
#define SCORCH_HOST_MODEL_SUMMARY_H

#include <stdio.h>

#include "base/config.h"
#include "run/session.h"

/* Runs one forward pass of a batch of one all-zero sample (shaped by the
 * session's sample spec) in eval mode with grad mode on, so that every op
 * on a parameter is taped; prints the table to out; resets the context.
 * The network, its parameters and buffers, and the context's modes are
 * left as they were. FLOPs are per sample. */
sc_status host_model_summary_print(host_session *s, FILE *out);

/* The table's total: the forward FLOPs of one sample, from the same pass. */
sc_status host_model_summary_flops(host_session *s, double *flops);

/* scorch-train --summary: opens the session cfg describes, prints its
 * summary to stdout and closes it; no run directory is made. */
sc_status host_model_summary_run(const host_config *cfg);

#endif
