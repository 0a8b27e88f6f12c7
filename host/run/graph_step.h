/* graph_step.h — the train step replayed as a CUDA graph (--cuda-graphs).
 *
 * A few eager steps come first: the GPU step arena settles into one block
 * and cuDNN chooses its algorithms. Then one step is captured — forward,
 * criterion and backward, from batch buffers of the graph's own on the
 * GPU — and later steps copy their batch (already uploaded, step_pipe.h)
 * into those buffers on the compute stream and replay the graph, one
 * launch instead of hundreds; nothing waits for the GPU. The optimizer
 * step stays outside the graph (its learning rate changes), and so do the
 * loss check and the metrics, which read the graph's outputs after the
 * replay.
 *
 * A step that cannot replay runs eagerly: a ragged last batch, or any step
 * after the arena's memory moved (the next full batch captures again).
 * When the run's steps cannot be captured at all — the CPU, data
 * parallelism, --accumulate, dropout (a replay would repeat its mask), a
 * failed capture — `auto` logs why once and trains eagerly, and `on` stops
 * the run with the reason.
 *
 * Thread rule: the training thread's.
 */
#ifndef SCORCH_HOST_GRAPH_STEP_H
#define SCORCH_HOST_GRAPH_STEP_H

#include <stdbool.h>

#include "observe/run_log.h"
#include "run/session.h"
#include "scorch_host/device.h"

typedef enum host_graph_mode { HOST_GRAPHS_AUTO, HOST_GRAPHS_ON, HOST_GRAPHS_OFF } host_graph_mode;

typedef struct host_graph_step {
    host_graph_mode mode;
    bool eager;             /* for the rest of the run */
    int warm_steps;         /* eager full-batch steps so far */
    int captures;           /* graphs captured so far */
    sc_graph *graph;
    uint64_t generation;    /* the arena's when captured */
    int64_t rows;           /* batch size the graph was captured for */
    sc_ctx *store;          /* holds the batch buffers; never reset */
    sc_tensor_list inputs, targets; /* the graph's batch buffers */
    /* The graph's results, copied out of the step arena's bookkeeping
     * (which every reset recycles); their data stays where it was. */
    sc_tensor outputs[SC_MAX_IO], loss;
    int n_outputs;
} host_graph_step;

/* Decides whether the run's steps can be graphs at all; when they cannot,
 * `auto` logs why and `on` fails with the reason. */
sc_status host_graph_step_init(host_graph_step *g, const char *mode, const host_session *s,
                             int world, int accumulate, host_run_log *log);
void host_graph_step_free(host_graph_step *g);

/* Forward, criterion and backward of a batch of `rows` samples, on the
 * context's device: replayed, captured or eager. *outputs and *loss are
 * what host_session_forward and _criterion give. */
sc_status host_graph_step_run(host_graph_step *g, host_session *s, const sc_tensor_list *inputs,
                            const sc_tensor_list *targets, int64_t rows,
                            sc_tensor_list *outputs, sc_tensor **loss, host_run_log *log);

#endif
