/* graph_step.c — the train step replayed as a CUDA graph (graph_step.h). */
#include "run/graph_step.h"
#include "scorch_host/context.h"
#include "scorch_host/device.h"

#include <string.h>

/* Eager full-batch steps before the capture: the first grows the arena,
 * the reset after it merges the blocks, the second runs in one block. */
enum { WARM_STEPS = 2, MAX_CAPTURES = 4 };

static sc_status parse_mode(const char *text, host_graph_mode *out)
{
    static const char *const names[] = {"auto", "on", "off"};
    for (int m = 0; m < 3; m++)
        if (strcmp(text, names[m]) == 0) {
            *out = (host_graph_mode)m;
            return SC_OK;
        }
    return sc_error_set(SC_ERR_INVALID, "--cuda-graphs %s: expected auto, on or off", text);
}

/* Graphs are off for the rest of the run, for `reason`: fatal with `on`. */
static sc_status go_eager(host_graph_step *g, host_run_log *log, const char *reason)
{
    g->eager = true;
    sc_graph_free(g->graph);
    g->graph = NULL;
    if (g->mode == HOST_GRAPHS_ON)
        return sc_error_set(SC_ERR_UNSUPPORTED, "--cuda-graphs on: %s", reason);
    if (g->mode == HOST_GRAPHS_AUTO)
        host_run_log_info(log, "CUDA graphs: off, %s", reason);
    return SC_OK;
}

sc_status host_graph_step_init(host_graph_step *g, const char *mode, const host_session *s,
                             int world, int accumulate, host_run_log *log)
{
    memset(g, 0, sizeof *g);
    SC_TRY(parse_mode(mode, &g->mode));
    if (g->mode == HOST_GRAPHS_OFF) {
        g->eager = true;
        return SC_OK;
    }
    if (sc_ctx_device(s->ctx).kind != SC_DEVICE_CUDA) {
        g->eager = true; /* nothing to say: graphs are a GPU matter */
        return g->mode == HOST_GRAPHS_ON
                   ? sc_error_set(SC_ERR_INVALID, "--cuda-graphs on needs a GPU (--device cuda)")
                   : SC_OK;
    }
    if (world > 1)
        return go_eager(g, log, "data parallelism communicates during backward");
    if (accumulate > 1)
        return go_eager(g, log, "--accumulate varies the step");
    if (!(g->store = sc_ctx_new(sc_ctx_device(s->ctx))))
        return sc_error_wrap(sc_error_code(), "CUDA graphs: the graph's batch buffers");
    return SC_OK;
}

void host_graph_step_free(host_graph_step *g)
{
    sc_graph_free(g->graph);
    g->graph = NULL;
    sc_ctx_free(g->store);
    g->store = NULL;
}

static sc_status eager_step(host_session *s, const sc_tensor_list *inputs,
                            const sc_tensor_list *targets, sc_tensor_list *outputs,
                            sc_tensor **loss)
{
    SC_TRY(host_session_forward(s, inputs, outputs));
    SC_TRY(host_session_criterion(s, outputs, targets, loss));
    return sc_backward(s->ctx, *loss, NULL, NULL);
}

/* Buffers like the batch's tensors, which the graph reads its batch from. */
static sc_status alloc_batch(host_graph_step *g, const sc_tensor_list *like, sc_tensor_list *out)
{
    out->n = like->n;
    for (int i = 0; i < like->n; i++) {
        const sc_tensor *t = like->t[i];
        if (!(out->t[i] = sc_tensor_new(g->store, t->dtype, t->ndim, t->shape)))
            return sc_error_wrap(sc_error_code(), "CUDA graphs: the graph's batch buffers");
    }
    return SC_OK;
}

/* Queues copies of the batch into the graph's buffers, behind the steps
 * before it that read them. */
static sc_status copy_batch(host_graph_step *g, sc_ctx *ctx, const sc_tensor_list *inputs,
                            const sc_tensor_list *targets)
{
    for (int i = 0; i < inputs->n; i++)
        SC_TRY(sc_tensor_copy_async(ctx, g->inputs.t[i], inputs->t[i]));
    for (int i = 0; i < targets->n; i++)
        SC_TRY(sc_tensor_copy_async(ctx, g->targets.t[i], targets->t[i]));
    return SC_OK;
}

/* Keeps the graph's outputs (their structs live in the arena). */
static void keep_outputs(host_graph_step *g, const sc_tensor_list *out, const sc_tensor *loss)
{
    g->n_outputs = out->n;
    for (int i = 0; i < out->n; i++)
        g->outputs[i] = *out->t[i];
    g->loss = *loss;
}

/* Records forward, criterion and backward from the graph's batch buffers,
 * filled first (outside the graph). */
static sc_status capture(host_graph_step *g, host_session *s, const sc_tensor_list *inputs,
                         const sc_tensor_list *targets, int64_t rows)
{
    sc_tensor_list out;
    sc_tensor *loss = NULL;
    if (g->inputs.n == 0) { /* the first capture; later ones keep the buffers */
        SC_TRY(alloc_batch(g, inputs, &g->inputs));
        SC_TRY(alloc_batch(g, targets, &g->targets));
    }
    SC_TRY(copy_batch(g, s->ctx, inputs, targets));
    SC_TRY(sc_ctx_synchronize(s->ctx));
    SC_TRY(sc_ctx_capture_begin(s->ctx));
    sc_status st = host_session_forward(s, &g->inputs, &out);
    if (st == SC_OK)
        st = host_session_criterion(s, &out, &g->targets, &loss);
    if (st == SC_OK)
        st = sc_backward(s->ctx, loss, NULL, NULL);
    sc_graph *graph;
    sc_status ended = sc_ctx_capture_end(s->ctx, &graph);
    if (ended != SC_OK)
        return ended; /* its message says why the capture broke */
    if (st != SC_OK) {
        sc_graph_free(graph);
        return st;
    }
    g->graph = graph;
    g->generation = sc_ctx_data_generation(s->ctx);
    g->rows = rows;
    keep_outputs(g, &out, loss);
    return SC_OK;
}

static void graph_outputs(host_graph_step *g, sc_tensor_list *outputs, sc_tensor **loss)
{
    outputs->n = g->n_outputs;
    for (int i = 0; i < g->n_outputs; i++)
        outputs->t[i] = &g->outputs[i];
    *loss = &g->loss;
}

/* Captures after the warm-up; on failure the batch runs eagerly after all
 * (nothing of the capture ran). */
static sc_status capture_and_launch(host_graph_step *g, host_session *s,
                                    const sc_tensor_list *inputs, const sc_tensor_list *targets,
                                    int64_t rows, sc_tensor_list *outputs, sc_tensor **loss,
                                    host_run_log *log)
{
    if (++g->captures > MAX_CAPTURES)
        SC_TRY(go_eager(g, log, "the step arena keeps moving, so every graph goes stale"));
    sc_status st = g->eager ? SC_ERR_STATE : capture(g, s, inputs, targets, rows);
    if (st == SC_OK) {
        if (g->captures == 1)
            host_run_log_info(log, "CUDA graphs: replaying the train step (batch %lld)",
                            (long long)rows);
        graph_outputs(g, outputs, loss);
        return sc_graph_launch(g->graph);
    }
    if (!g->eager) {
        char reason[512];
        snprintf(reason, sizeof reason, "the capture failed: %s", sc_error_message());
        SC_TRY(go_eager(g, log, reason));
    }
    sc_ctx_reset(s->ctx);
    return eager_step(s, inputs, targets, outputs, loss);
}

sc_status host_graph_step_run(host_graph_step *g, host_session *s, const sc_tensor_list *inputs,
                            const sc_tensor_list *targets, int64_t rows,
                            sc_tensor_list *outputs, sc_tensor **loss, host_run_log *log)
{
    if (g->eager)
        return eager_step(s, inputs, targets, outputs, loss);
    if (g->graph && (rows != g->rows || sc_ctx_data_generation(s->ctx) != g->generation)) {
        if (rows != g->rows) /* a ragged batch: this step only */
            return eager_step(s, inputs, targets, outputs, loss);
        sc_graph_free(g->graph); /* the arena moved: capture again */
        g->graph = NULL;
    }
    if (g->graph) {
        graph_outputs(g, outputs, loss);
        SC_TRY(copy_batch(g, s->ctx, inputs, targets));
        return sc_graph_launch(g->graph);
    }
    if (g->warm_steps < WARM_STEPS) {
        SC_TRY(eager_step(s, inputs, targets, outputs, loss));
        g->warm_steps++;
        if (sc_ctx_random_ops(s->ctx) > 0)
            return go_eager(g, log, "the step draws random numbers (dropout), which a replay "
                                    "would repeat");
        return SC_OK;
    }
    return capture_and_launch(g, s, inputs, targets, rows, outputs, loss, log);
}
