/* signals.c — the handlers of the stop and save signals and the requests
 * they leave (signals.h). */
#include "control/signals.h"

#include <stdatomic.h>
#include <string.h>

/* A handler may touch only lock-free atomics (or volatile sig_atomic_t,
 * which threads could not share safely). */
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "the signal requests need lock-free atomic ints");

static atomic_int stop_requested, save_requested;

static void on_stop_signal(int sig)
{
    (void)sig;
    atomic_store_explicit(&stop_requested, 1, memory_order_relaxed);
}

static void on_save_signal(int sig)
{
    (void)sig;
    atomic_store_explicit(&save_requested, 1, memory_order_relaxed);
}

void host_signals_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    /* The first stop restores the default action, so that a second one
     * ends the process. */
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_RESETHAND;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sa.sa_handler = on_save_signal;
    sa.sa_flags = SA_RESTART; /* the run goes on: no call should fail with EINTR */
    sigaction(SIGUSR1, &sa, NULL);
}

bool host_signals_stop_requested(void)
{
    return atomic_load_explicit(&stop_requested, memory_order_relaxed) != 0;
}

bool host_signals_take_save(void)
{
    return atomic_exchange_explicit(&save_requested, 0, memory_order_relaxed) != 0;
}

void host_signals_add_to(sigset_t *set)
{
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGUSR1);
}
