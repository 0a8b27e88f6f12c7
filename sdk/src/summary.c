#include "scorch/summary.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context_impl.h"

/* The tape in forward order (the caller frees). */
static sc_node **tape_in_order(const sc_ctx *ctx)
{
    sc_node **order = malloc((size_t)(ctx->tape_len ? ctx->tape_len : 1) * sizeof *order);
    if (!order) {
        sc_error_set(SC_ERR_NOMEM, "out of memory for the model summary");
        return NULL;
    }
    for (sc_node *n = ctx->tape_tail; n; n = n->prev)
        order[n->index] = n;
    return order;
}

static bool same_layer(const sc_node *a, const sc_node *b)
{
    return a->scope[0] && strcmp(a->scope, b->scope) == 0;
}

/* Adds the parameters of node not counted before (seen: every parameter
 * met so far). */
static int64_t new_params(const sc_node *node, const sc_tensor **seen, int64_t *n_seen)
{
    int64_t count = 0;
    for (int i = 0; i < node->n_inputs; i++) {
        const sc_tensor *t = node->in[i];
        if (!(t->flags & SC_TENSOR_PARAM))
            continue;
        bool known = false;
        for (int64_t k = 0; k < *n_seen && !known; k++)
            known = seen[k] == t;
        if (!known) {
            seen[(*n_seen)++] = t;
            count += t->numel;
        }
    }
    return count;
}

static double node_flops(const sc_node *node)
{
    const sc_op_desc *desc = sc_op_desc_get(node->op);
    return desc->flops ? desc->flops(node) : (double)node->out->numel;
}

static void start_row(sc_layer_info *row, const sc_node *node)
{
    memset(row, 0, sizeof *row);
    const char *op = sc_op_desc_get(node->op)->name;
    snprintf(row->name, sizeof row->name, "%s", node->scope[0] ? node->scope : op);
    snprintf(row->op, sizeof row->op, "%s", op);
}

static void add_node(sc_layer_info *row, const sc_node *node, int64_t params, bool first)
{
    if (params > 0 && row->params == 0 && !first)
        snprintf(row->op, sizeof row->op, "%s", sc_op_desc_get(node->op)->name);
    row->params += params;
    row->flops += node_flops(node);
    row->ndim = node->out->ndim;
    memcpy(row->shape, node->out->shape, sizeof row->shape);
}

sc_status sc_summary_layers(const sc_ctx *ctx, sc_layer_info *rows, int max, int *count)
{
    *count = 0;
    sc_node **order = tape_in_order(ctx);
    const sc_tensor **seen = malloc((size_t)(ctx->tape_len + 1) * SC_OP_MAX_INPUTS * sizeof *seen);
    if (!order || !seen) {
        free(order);
        free(seen);
        return sc_error_set(SC_ERR_NOMEM, "out of memory for the model summary");
    }
    int64_t n_seen = 0;
    sc_layer_info row;
    for (int64_t i = 0; i < ctx->tape_len; i++) {
        bool first = i == 0 || !same_layer(order[i - 1], order[i]);
        if (first && i > 0 && *count <= max)
            rows[*count - 1] = row;
        if (first) {
            start_row(&row, order[i]);
            (*count)++;
        }
        add_node(&row, order[i], new_params(order[i], seen, &n_seen), first);
    }
    if (*count > 0 && *count <= max)
        rows[*count - 1] = row;
    free(order);
    free(seen);
    return SC_OK;
}
