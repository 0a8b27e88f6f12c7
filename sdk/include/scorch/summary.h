/* scorch/summary.h — a model summary computed from the tape of one
 * forward pass: per layer, its output shape, parameter count and forward
 * FLOPs. A layer is a run of ops made under one scope
 * (sc_ctx_push_scope); an op outside any scope is a row of its own. */
#ifndef SCORCH_SUMMARY_H
#define SCORCH_SUMMARY_H

#include "scorch/context.h"
#include "scorch/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sc_layer_info {
    char name[96];              /* the scope, or the op's name */
    char op[24];                /* the layer's first op with parameters, else its first op */
    int ndim;
    int64_t shape[SC_MAX_DIMS]; /* output of the layer's last op, batch included */
    int64_t params;             /* elements of the parameters and buffers it uses first */
    double flops;               /* forward FLOPs, a multiply-add counting 2 */
} sc_layer_info;

/* Rows for the context's current tape (run the forward with grad mode
 * on, so parameterised ops are taped). Fills at most max rows; *count is
 * the number of layers, which may exceed max. */
SC_API sc_status sc_summary_layers(const sc_ctx *ctx, sc_layer_info *rows, int max, int *count);

#ifdef __cplusplus
}
#endif
#endif
