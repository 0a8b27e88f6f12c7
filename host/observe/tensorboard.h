/* tensorboard.h — TensorBoard event files, written by our own code.
 *
 * One file RUN/tensorboard/events.out.tfevents.<unix time>.<hostname> per
 * scorch-train process (".1", ".2", ... appended should a name be taken):
 * TFRecords (tfrecord.h) of tensorboard.Event messages, the first holding
 * file_version "brain.Event:2", the second a SessionLog START at the step
 * the run continues from, so that readers drop what a previous, resumed
 * process wrote after its checkpoint. Tags and steps: docs/tensorboard.md.
 *
 * Failures. Opening is checked (host_tb_open returns an error). After that,
 * TensorBoard is a view of the run, not its record (metrics.jsonl and the
 * checkpoints are): a failed write prints one warning on stderr naming the
 * file and the cause, closes the file, and turns the writer into a no-op;
 * training goes on. Only invalid arguments (a bad image tensor, a NULL
 * text) are returned as errors, to the plugin that passed them.
 *
 * Every function accepts a NULL writer (TensorBoard off) and then writes
 * nothing, though arguments are still checked.
 *
 * Thread rule: the training thread only.
 */
#ifndef SCORCH_HOST_TENSORBOARD_H
#define SCORCH_HOST_TENSORBOARD_H

#include <stdbool.h>
#include <stdint.h>

#include "observe/observer.h"
#include "scorch/params.h"
#include "scorch/tensor.h"

typedef struct host_tb_writer host_tb_writer;

/* Creates `dir` if needed and a new event file in it; `next_step` is the
 * first step this process will log (the SessionLog START step). */
sc_status host_tb_open(const char *dir, int64_t next_step, host_tb_writer **out);
/* Flushes and closes; NULL is fine. */
void host_tb_close(host_tb_writer *w);
void host_tb_flush(host_tb_writer *w);

/* The file's path ("" for NULL). */
const char *host_tb_path(const host_tb_writer *w);

/* ---- summaries ---- */

/* simple_value (TensorBoard stores float32). */
void host_tb_add_scalar(host_tb_writer *w, const char *tag, int64_t step, double value);
/* A HistogramProto over the finite values (non-finite ones are left out;
 * nothing is written when none is finite). */
void host_tb_add_histogram(host_tb_writer *w, const char *tag, int64_t step, const float *values,
                         int64_t n);
/* A string tensor for the text plugin. Errors: NULL or empty tag, NULL text. */
sc_status host_tb_add_text(host_tb_writer *w, const char *tag, int64_t step, const char *text);
/* A PNG image summary (png_image.h says which tensors are images).
 * Errors: NULL or empty tag, a tensor that is no image. */
sc_status host_tb_add_image(host_tb_writer *w, const char *tag, int64_t step,
                          const sc_tensor *image);

/* ---- what the trainer writes ---- */

/* The sink of a run's reports (observer.h) writing to w: for each phase
 * <phase>/loss, <phase>/<metric> for each metric and <phase>/samples_per_s,
 * then a flush; a hook's scalar under its tag. Closing it closes w. */
host_observer host_tb_observer(host_tb_writer *w);
/* train/loss_step and train/lr; flushes when the last flush is a few
 * seconds old. */
void host_tb_log_step(host_tb_writer *w, int64_t step, double loss, double lr);
/* params/<name> for every tensor of the store, and grads/<name> for each
 * one that trains, from the flat buffers as they are now. */
void host_tb_log_params(host_tb_writer *w, const sc_params *ps, const float *values,
                      const float *grads, int64_t step);

/* ---- exposed for tests ---- */

enum { HOST_TB_BUCKETS = 30 };

/* A histogram as HistogramProto holds it: HOST_TB_BUCKETS equal-width
 * buckets from min to max (one when they are equal); bucket i counts the
 * values in (limit[i-1], limit[i]], the first also min itself. */
typedef struct host_tb_histogram {
    double min, max, num, sum, sum_squares;
    int buckets;
    double limit[HOST_TB_BUCKETS];
    double count[HOST_TB_BUCKETS];
} host_tb_histogram;

void host_tb_histogram_compute(const float *values, int64_t n, host_tb_histogram *h);

#endif
