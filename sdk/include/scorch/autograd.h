/* scorch/autograd.h — reverse-mode differentiation over the eager tape.
 *
 * Ops run immediately; with grad mode on (scorch/context.h), an op whose
 * input requires grad appends a node to the context's tape. sc_backward()
 * walks the tape from the last node back, adding each gradient into
 * tensor->grad: for parameters that is their slot in the store's flat
 * gradient buffer, so gradients accumulate across backward calls until the
 * host zeroes them (gradient accumulation). An op's output keeps no
 * gradient afterwards (its memory went on to the next gradients) unless
 * its flags have SC_TENSOR_RETAIN_GRAD.
 */
#ifndef SCORCH_AUTOGRAD_H
#define SCORCH_AUTOGRAD_H

#include "scorch/context.h"
#include "scorch/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Called during backward as soon as a parameter's gradient is final for
 * this backward pass (the hook data parallelism uses to start allreduce). */
typedef void (*sc_grad_ready_fn)(void *user, sc_tensor *param);

/* Backpropagates from a scalar loss. grad_ready may be NULL. */
SC_API sc_status sc_backward(sc_ctx *ctx, sc_tensor *loss,
                             sc_grad_ready_fn grad_ready, void *user);

#ifdef __cplusplus
}
#endif
#endif
