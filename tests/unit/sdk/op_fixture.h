/* op_fixture.h — what a suite of op and layer tests shares: a CPU context,
 * a parameter store and a random stream, fresh for every test:
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

#endif
