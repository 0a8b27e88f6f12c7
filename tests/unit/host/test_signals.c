/* test_signals.c — the stop and save requests that signals leave for the
 * training threads (host/control/signals.h). Criterion runs each test in
 * a process of its own, so each installs the handlers afresh. */
#include <criterion/criterion.h>
#include <signal.h>

#include "control/signals.h"

static struct sigaction action_of(int sig)
{
    struct sigaction sa;
    cr_assert_eq(sigaction(sig, NULL, &sa), 0);
    return sa;
}

Test(signals, sigusr1_asks_for_one_checkpoint_and_no_stop)
{
    host_signals_install();
    cr_expect_not(host_signals_take_save(), "a checkpoint asked before any signal");
    raise(SIGUSR1);
    raise(SIGUSR1);
    cr_expect(host_signals_take_save(), "SIGUSR1 asked for no checkpoint");
    cr_expect_not(host_signals_take_save(), "one request taken twice");
    cr_expect_not(host_signals_stop_requested(), "SIGUSR1 asked to stop");
    cr_expect(action_of(SIGUSR1).sa_flags & SA_RESTART, "SIGUSR1 would interrupt system calls");
}

Test(signals, sigterm_asks_to_stop_for_good_and_gives_up_its_handler)
{
    host_signals_install();
    cr_expect_not(host_signals_stop_requested());
    raise(SIGTERM);
    cr_expect(host_signals_stop_requested(), "SIGTERM asked for no stop");
    cr_expect(host_signals_stop_requested(), "the stop request was taken by a look");
    cr_expect_not(host_signals_take_save(), "SIGTERM asked for a checkpoint of its own");
    cr_expect_eq(action_of(SIGTERM).sa_handler, SIG_DFL, "a second SIGTERM would be caught");
    cr_expect_neq(action_of(SIGINT).sa_handler, SIG_DFL, "SIGTERM gave up SIGINT's handler");
}

Test(signals, a_second_sigint_ends_the_process, .signal = SIGINT)
{
    host_signals_install();
    raise(SIGINT);
    cr_expect(host_signals_stop_requested(), "SIGINT asked for no stop");
    raise(SIGINT);
    cr_assert_fail("the second SIGINT was caught");
}

Test(signals, the_handled_signals_are_the_ones_a_thread_blocks)
{
    sigset_t set;
    sigemptyset(&set);
    host_signals_add_to(&set);
    cr_expect(sigismember(&set, SIGINT) == 1 && sigismember(&set, SIGTERM) == 1 &&
              sigismember(&set, SIGUSR1) == 1);
    cr_expect_eq(sigismember(&set, SIGUSR2), 0);
}
