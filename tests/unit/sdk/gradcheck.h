/* gradcheck.h — finite-difference gradient checking for op tests.
 *
 * The function under test builds a tensor from its inputs with ops on a
 * context. The checker reduces that output to a scalar with a fixed random
 * weighting, loss = sum(out * w), and compares, for every element of every
 * input that requires grad, the gradient sc_backward() computes with the
 * central difference (loss(x + eps) - loss(x - eps)) / 2 eps, accumulated
 * in double. An element passes when
 *     |analytic - numeric| <= atol + rtol * max(|analytic|, |numeric|).
 *
 * Inputs must outlive context resets: parameters (sc_params_add) or host
 * tensors (sc_tensor_alloc) flagged SC_TENSOR_REQUIRES_GRAD. Inputs that do
 * not require grad (integer targets, frozen parameters) are passed through
 * unchecked. The context's random stream is restored before every
 * evaluation, so ops that draw from it (dropout) see the same numbers each
 * time. Keep inputs away from kinks (relu at 0) by more than eps.
 */
#ifndef SCORCH_TEST_GRADCHECK_H
#define SCORCH_TEST_GRADCHECK_H

#include <stdbool.h>
#include <stdint.h>

#include "scorch/scorch.h"

/* Builds the output from inputs[0..n-1]; NULL (with a message) on failure. */
typedef sc_tensor *(*gradcheck_fn)(sc_ctx *ctx, sc_tensor *const *inputs, void *user);

typedef struct gradcheck_opts {
    double eps;    /* central-difference step; 0: 1e-3 */
    double atol;   /* 0: 1e-3 */
    double rtol;   /* 0: 1e-2 */
    uint64_t seed; /* of the weighting w */
} gradcheck_opts;

typedef struct gradcheck_report {
    int64_t checked;         /* elements compared */
    int input;               /* the worst element: its input ... */
    int64_t index;           /* ... and flat index */
    double analytic, numeric;
    double ratio;            /* |a - n| / (atol + rtol max(|a|, |n|)); <= 1 passes */
    char message[512];       /* why the check failed; "" when it passed */
} gradcheck_report;

/* True when every checked element passes; report (may be NULL) describes
 * the worst element or the failure. opts may be NULL for the defaults. */
bool gradcheck_run(sc_ctx *ctx, gradcheck_fn fn, void *user, int n_inputs,
                   sc_tensor *const *inputs, const gradcheck_opts *opts,
                   gradcheck_report *report);

/* A parameter of the given shape, filled uniformly from [lo, hi). */
sc_tensor *gradcheck_param(sc_params *ps, const char *name, int ndim,
                           const int64_t *shape, float lo, float hi, sc_rng *rng);

#endif
