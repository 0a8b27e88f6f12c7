/* gate.h — a gate for the hooks fixtures (ctl_hooks.c, probe_hooks.c): a
 * hook waits in gate_wait until a test calls the fixture's open-gate user
 * function through scorch-ctl, and the gate-state one tells it when the
 * hook waits: the tests' way to hold the training thread at a known point
 * without sleeping. Each fixture that includes it has its own gate. */
#ifndef SCORCH_TEST_GATE_H
#define SCORCH_TEST_GATE_H

#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#include "scorch/scorch.h"

static atomic_int gate_waiting, gate_open;

/* Holds the calling hook until the gate opens; two minutes at most. */
static sc_status gate_wait(void)
{
    atomic_store(&gate_waiting, 1);
    for (int ms = 0; !atomic_load(&gate_open); ms++) {
        if (ms > 120000)
            return sc_error_set(SC_ERR_STATE, "nobody opened the gate in two minutes");
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    atomic_store(&gate_waiting, 0);
    return SC_OK;
}

/* User functions, run on the control thread. */
static sc_status gate_state(const sc_args *args, char *out, size_t size)
{
    snprintf(out, size, "%s", atomic_load(&gate_waiting) ? "waiting" : "not waiting");
    return SC_OK;
}

static sc_status open_gate(const sc_args *args, char *out, size_t size)
{
    atomic_store(&gate_open, 1);
    snprintf(out, size, "opened");
    return SC_OK;
}

#endif
