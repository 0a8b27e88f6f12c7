/* model_summary.c — one forward pass of a zero sample, its tape grouped by
 * layer scope, printed as a table. */
#include "run/model_summary.h"
#include "run/init_from.h"
#include "scorch_host/context.h"

#include <stdlib.h>
#include <string.h>

/* The batch: one all-zero sample per input of the spec, [1, ...shape].
 * It requires grad, so that every op that depends on it is taped: those
 * of frozen layers too, whose parameters do not. */
static sc_status zero_batch(host_session *s, sc_tensor_list *inputs)
{
    inputs->n = s->spec.n_inputs;
    for (int k = 0; k < s->spec.n_inputs; k++) {
        const sc_tensor_spec *spec = &s->spec.inputs[k];
        int64_t shape[SC_MAX_DIMS] = {1};
        memcpy(shape + 1, spec->shape, (size_t)spec->ndim * sizeof *shape);
        inputs->t[k] = sc_tensor_zeros(s->ctx, spec->dtype, spec->ndim + 1, shape);
        if (!inputs->t[k])
            return sc_error_code();
        inputs->t[k]->flags |= SC_TENSOR_REQUIRES_GRAD;
    }
    return SC_OK;
}

/* The layer rows of the tape the forward pass left (the caller frees). */
static sc_status collect_rows(const sc_ctx *ctx, sc_layer_info **rows, int *count)
{
    SC_TRY(sc_summary_layers(ctx, NULL, 0, count));
    *rows = calloc((size_t)(*count > 0 ? *count : 1), sizeof **rows);
    if (!*rows)
        return sc_error_set(SC_ERR_NOMEM, "out of memory for the model summary");
    return sc_summary_layers(ctx, *rows, *count, count);
}

/* Eval mode (batch norm on its running statistics, which stay untouched;
 * no dropout) with grad mode on, since only taped ops are seen. */
static sc_status trace(host_session *s, sc_layer_info **rows, int *count)
{
    bool training = sc_ctx_training(s->ctx);
    bool grad = sc_ctx_set_grad_enabled(s->ctx, true);
    sc_ctx_set_training(s->ctx, false);
    sc_tensor_list inputs, outputs;
    sc_status st = zero_batch(s, &inputs);
    if (st == SC_OK)
        st = host_session_forward(s, &inputs, &outputs);
    if (st == SC_OK)
        st = collect_rows(s->ctx, rows, count);
    sc_ctx_reset(s->ctx);
    sc_ctx_set_training(s->ctx, training);
    sc_ctx_set_grad_enabled(s->ctx, grad);
    return st;
}

/* 421930 -> "421,930" */
static const char *with_commas(int64_t n, char *buf, size_t size)
{
    char digits[24];
    int len = snprintf(digits, sizeof digits, "%lld", (long long)n);
    size_t o = 0;
    for (int i = 0; i < len && o + 2 < size; i++) {
        if (i > 0 && (len - i) % 3 == 0)
            buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = '\0';
    return buf;
}

/* 67234567 -> "67.2M" */
static const char *si(double v, char *buf, size_t size)
{
    static const char suffix[] = " KMGTP";
    int k = 0;
    while (v >= 1000.0 && k < (int)sizeof suffix - 2) {
        v /= 1000.0;
        k++;
    }
    snprintf(buf, size, k ? "%.1f%c" : "%.0f", v, suffix[k]);
    return buf;
}

/* The output shape without the batch dimension. */
static const char *sample_shape(const sc_layer_info *row, char *buf, size_t size)
{
    if (row->ndim < 1)
        return sc_shape_str(0, row->shape, buf, size);
    return sc_shape_str(row->ndim - 1, row->shape + 1, buf, size);
}

static int name_width(const sc_layer_info *rows, int count)
{
    int w = (int)strlen("layer");
    for (int i = 0; i < count; i++)
        if ((int)strlen(rows[i].name) > w)
            w = (int)strlen(rows[i].name);
    return w;
}

static double total_flops(const sc_layer_info *rows, int count)
{
    double total = 0;
    for (int i = 0; i < count; i++)
        total += rows[i].flops;
    return total;
}

/* Whether row is a layer none of whose parameters trains: the store's
 * tensors named "<layer>.<part>" (the nn blocks' naming, see the plugin
 * guide) exist and none requires grad. */
static bool row_frozen(const sc_params *ps, const sc_layer_info *row)
{
    size_t len = strlen(row->name);
    bool named = false;
    for (int i = 0; row->params > 0 && i < sc_params_count(ps); i++) {
        const sc_tensor *t = sc_params_at(ps, i);
        if (strncmp(t->name, row->name, len) != 0 || t->name[len] != '.')
            continue;
        if (t->flags & SC_TENSOR_REQUIRES_GRAD)
            return false;
        named = true;
    }
    return named;
}

static void print_table(const host_session *s, const sc_layer_info *rows, int count, FILE *out)
{
    char shape[96], params[32], flops[32], trainable[32];
    int w = name_width(rows, count);
    fprintf(out, "%-*s  %-16s %-18s %12s %9s\n", w, "layer", "op", "output", "params",
            "FLOPs");
    for (int i = 0; i < count; i++) {
        const sc_layer_info *r = &rows[i];
        fprintf(out, "%-*s  %-16s %-18s %12s %9s%s\n", w, r->name, r->op,
                sample_shape(r, shape, sizeof shape), with_commas(r->params, params, sizeof params),
                si(r->flops, flops, sizeof flops), row_frozen(s->params, r) ? "  frozen" : "");
    }
    int64_t numel = sc_params_numel(s->params), trained = sc_params_trainable_numel(s->params);
    fprintf(out, "total: %s parameters and buffers, %s trainable; %s FLOPs forward per sample\n",
            with_commas(numel, params, sizeof params),
            with_commas(trained, trainable, sizeof trainable),
            si(total_flops(rows, count), flops, sizeof flops));
}

sc_status host_model_summary_print(host_session *s, FILE *out)
{
    sc_layer_info *rows = NULL;
    int count = 0;
    sc_status st = trace(s, &rows, &count);
    if (st == SC_OK)
        print_table(s, rows, count, out);
    free(rows);
    return st;
}

sc_status host_model_summary_flops(host_session *s, double *flops)
{
    sc_layer_info *rows = NULL;
    int count = 0;
    sc_status st = trace(s, &rows, &count);
    *flops = st == SC_OK ? total_flops(rows, count) : 0;
    free(rows);
    return st;
}

sc_status host_model_summary_run(const host_config *cfg)
{
    host_session s;
    sc_cpu_set_threads(cfg->threads);
    SC_TRY(host_session_open(&s, cfg, 0));
    /* as training would freeze them: the rows' "frozen" and the trainable count */
    sc_status st = host_freeze_apply(cfg->freeze, s.params);
    if (st == SC_OK) {
        printf("model %s (%s)\n", s.model.api->name, s.model.lib.path);
        st = host_model_summary_print(&s, stdout);
    }
    if (st == SC_OK) /* each parameter's group, with [params] sections or --no-decay */
        st = host_param_groups_print(&cfg->param_groups, cfg->no_decay, s.params,
                                   cfg->weight_decay, stdout);
    host_session_close(&s);
    return st;
}
