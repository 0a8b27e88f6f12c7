/* op_fixture.h — what a suite of op and layer tests shares: a CPU context,
 * a parameter store and a random stream, fresh for every test, and the
 * check of an op's values. A suite sets them up with
 *
 *   static void setup(void) { op_fixture_setup(42); }
 *   TestSuite(ops, .init = setup, .fini = op_fixture_teardown);
 */
#ifndef SCORCH_TEST_OP_FIXTURE_H
#define SCORCH_TEST_OP_FIXTURE_H

#include <stdint.h>

#include "scorch/scorch.h"

extern sc_ctx *ctx;
extern sc_params *ps;
extern sc_rng rng;

void op_fixture_setup(uint64_t seed);
void op_fixture_teardown(void);

/* A fresh parameter "p<k>" with values uniform in [-1, 1). */
sc_tensor *test_param(int ndim, const int64_t *shape);

/* Fails the test unless t (an op's result: NULL fails with the op's
 * message) holds the n values of want, each within tol. */
void expect_values(const sc_tensor *t, const float *want, int64_t n, double tol);

#endif
