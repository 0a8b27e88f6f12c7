/* in_process.h — scorch-train's trainer inside a test's own process, for
 * tests that look into it (the step pipeline's counters, the fold). */
#ifndef SCORCH_TESTS_IN_PROCESS_H
#define SCORCH_TESTS_IN_PROCESS_H

#include "run/trainer.h"

/* The trainer scorch-train makes for argv (argc entries, argv[0] the
 * program); fails the test when the options or the set-up fail. */
host_trainer *trainer_for_args(int argc, const char **argv);

#endif
