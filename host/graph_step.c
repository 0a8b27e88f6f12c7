/* graph_step.c — the train step replayed as a CUDA graph (graph_step.h). */
#include "graph_step.h"

#include <string.h>

/* Eager full-batch steps before the capture: the first grows the arena,
 * the reset after it merges the blocks, the second runs in one block. */
enum { WARM_STEPS = 2, MAX_CAPTURES = 4 };

static sc_status parse_mode(const char *text, sc_graph_mode *out)
{
    static const char *const names[] = {"auto", "on", "off"};
    for (int m = 0; m < 3; m++)
        if (strcmp(text, names[m]) == 0) {
            *out = (sc_graph_mode)m;
            return SC_OK;
        }
    return sc_error_set(SC_ERR_INVALID, "--cuda-graphs %s: expected auto, on or off", text);
}

/* Graphs are off for the rest of the run, for `reason`: fatal with `on`. */
static sc_status go_eager(sc_graph_step *g, sc_run_log *log, const char *reason)
{
    g->eager = true;
    sc_graph_free(g->graph);
    g->graph = NULL;
    if (g->mode == SC_GRAPHS_ON)
        return sc_error_set(SC_ERR_UNSUPPORTED, "--cuda-graphs on: %s", reason);
    if (g->mode == SC_GRAPHS_AUTO)
        sc_run_log_info(log, "CUDA graphs: off, %s", reason);
    return SC_OK;
}

sc_status sc_graph_step_init(sc_graph_step *g, const char *mode, const sc_session *s,
                             int world, int accumulate, sc_run_log *log)
{
    memset(g, 0, sizeof *g);
    SC_TRY(parse_mode(mode, &g->mode));
    if (g->mode == SC_GRAPHS_OFF) {
        g->eager = true;
        return SC_OK;
    }
    if (sc_ctx_device(s->ctx).kind != SC_DEVICE_CUDA) {
        g->eager = true; /* nothing to say: graphs are a GPU matter */
        return g->mode == SC_GRAPHS_ON
                   ? sc_error_set(SC_ERR_INVALID, "--cuda-graphs on needs a GPU (--device cuda)")
                   : SC_OK;
    }
    if (world > 1)
        return go_eager(g, log, "data parallelism communicates during backward");
    if (accumulate > 1)
        return go_eager(g, log, "--accumulate varies the step");
    return SC_OK;
}

void sc_graph_step_free(sc_graph_step *g)
{
    sc_graph_free(g->graph);
    g->graph = NULL;
}

static sc_status eager_step(sc_session *s, const sc_batch *b, sc_tensor_list *outputs,
                            sc_tensor **loss)
{
    SC_TRY(sc_session_forward(s, &b->inputs, outputs));
    SC_TRY(sc_session_criterion(s, outputs, &b->targets, loss));
    return sc_backward(s->ctx, *loss, NULL, NULL);
}

/* Keeps the graph's tensors (their structs live in the arena). */
static void keep_tensors(sc_graph_step *g, const sc_tensor_list *in, const sc_tensor_list *tg,
                         const sc_tensor_list *out, const sc_tensor *loss)
{
    g->n_inputs = in->n;
    g->n_targets = tg->n;
    g->n_outputs = out->n;
    for (int i = 0; i < in->n; i++)
        g->inputs[i] = *in->t[i];
    for (int i = 0; i < tg->n; i++)
        g->targets[i] = *tg->t[i];
    for (int i = 0; i < out->n; i++)
        g->outputs[i] = *out->t[i];
    g->loss = *loss;
}

/* Records forward, criterion and backward from batch tensors uploaded
 * first (outside the graph, into the arena's first bytes). */
static sc_status capture(sc_graph_step *g, sc_session *s, const sc_batch *b)
{
    sc_tensor_list in, tg, out;
    sc_tensor *loss = NULL;
    SC_TRY(sc_session_upload(s, &b->inputs, &in));
    SC_TRY(sc_session_upload(s, &b->targets, &tg));
    SC_TRY(sc_ctx_synchronize(s->ctx));
    SC_TRY(sc_ctx_capture_begin(s->ctx));
    sc_status st = sc_session_forward(s, &in, &out);
    if (st == SC_OK)
        st = sc_session_criterion(s, &out, &tg, &loss);
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
    g->rows = b->size;
    keep_tensors(g, &in, &tg, &out, loss);
    return SC_OK;
}

/* Copies the batch into the graph's input tensors and replays it. */
static sc_status replay(sc_graph_step *g, const sc_batch *b)
{
    for (int i = 0; i < g->n_inputs; i++)
        SC_TRY(sc_tensor_copy(&g->inputs[i], b->inputs.t[i]));
    for (int i = 0; i < g->n_targets; i++)
        SC_TRY(sc_tensor_copy(&g->targets[i], b->targets.t[i]));
    return sc_graph_launch(g->graph);
}

static void graph_outputs(sc_graph_step *g, sc_tensor_list *outputs, sc_tensor **loss)
{
    outputs->n = g->n_outputs;
    for (int i = 0; i < g->n_outputs; i++)
        outputs->t[i] = &g->outputs[i];
    *loss = &g->loss;
}

/* Captures after the warm-up; on failure the batch runs eagerly after all
 * (nothing of the capture ran). */
static sc_status capture_and_launch(sc_graph_step *g, sc_session *s, const sc_batch *b,
                                    sc_tensor_list *outputs, sc_tensor **loss, sc_run_log *log)
{
    if (++g->captures > MAX_CAPTURES)
        SC_TRY(go_eager(g, log, "the step arena keeps moving, so every graph goes stale"));
    sc_status st = g->eager ? SC_ERR_STATE : capture(g, s, b);
    if (st == SC_OK) {
        if (g->captures == 1)
            sc_run_log_info(log, "CUDA graphs: replaying the train step (batch %lld)",
                            (long long)b->size);
        graph_outputs(g, outputs, loss);
        return sc_graph_launch(g->graph);
    }
    if (!g->eager) {
        char reason[512];
        snprintf(reason, sizeof reason, "the capture failed: %s", sc_error_message());
        SC_TRY(go_eager(g, log, reason));
    }
    sc_ctx_reset(s->ctx);
    return eager_step(s, b, outputs, loss);
}

sc_status sc_graph_step_run(sc_graph_step *g, sc_session *s, const sc_batch *b,
                            sc_tensor_list *outputs, sc_tensor **loss, sc_run_log *log)
{
    if (g->eager)
        return eager_step(s, b, outputs, loss);
    if (g->graph && (b->size != g->rows || sc_ctx_data_generation(s->ctx) != g->generation)) {
        if (b->size != g->rows) /* a ragged batch: this step only */
            return eager_step(s, b, outputs, loss);
        sc_graph_free(g->graph); /* the arena moved: capture again */
        g->graph = NULL;
    }
    if (g->graph) {
        graph_outputs(g, outputs, loss);
        return replay(g, b);
    }
    if (g->warm_steps < WARM_STEPS) {
        SC_TRY(eager_step(s, b, outputs, loss));
        g->warm_steps++;
        if (sc_ctx_random_ops(s->ctx) > 0)
            return go_eager(g, log, "the step draws random numbers (dropout), which a replay "
                                    "would repeat");
        return SC_OK;
    }
    return capture_and_launch(g, s, b, outputs, loss, log);
}
