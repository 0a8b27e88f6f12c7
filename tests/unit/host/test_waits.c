/* test_waits.c — the CPU threads' waits follow the machine's load
 * (base/waits.h), and libscorch's short waits hold one more OpenMP thread
 * while on. Run without OMP_WAIT_POLICY and GOMP_SPINCOUNT, so that the
 * spin is the program's to choose. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/waits.h"
#include "scorch_host/context.h"

static int thread_count(void)
{
    DIR *d = opendir("/proc/self/task");
    cr_assert_not_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void nap(void) { nanosleep(&(struct timespec){.tv_nsec = 50000000}, NULL); }

/* Polls for up to 10 s: a thread leaves /proc a moment after its join. */
static bool threads_become(int n)
{
    for (int k = 0; k < 200 && thread_count() != n; k++)
        nap();
    return thread_count() == n;
}

Test(waits, short_waits_hold_one_more_openmp_thread_while_on)
{
    sc_cpu_set_short_waits(false);
    int before = thread_count();
    sc_cpu_set_short_waits(true);
    /* the holder, and the team's second thread that libgomp keeps for it */
    cr_assert_eq(thread_count(), before + 2);
    sc_cpu_set_short_waits(true); /* no second holder */
    cr_assert_eq(thread_count(), before + 2);
    sc_cpu_set_short_waits(false);
    cr_assert(threads_become(before), "%d threads, %d before", thread_count(), before);
}

/* Calls host_waits_check between naps until it changes the waits, for up
 * to 5 s. */
static bool waits_change(host_waits *w)
{
    for (int k = 0; k < 100; k++) {
        if (host_waits_check(w))
            return true;
        nap();
    }
    return false;
}

/* Only on: other tests may keep the machine busy after the process ends. */
Test(waits, a_busy_process_turns_short_waits_on)
{
    int cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
    host_waits w;
    host_waits_start(&w, cpus > 1 ? cpus : 2);
    if (!w.adaptive)
        cr_skip_test("the spin is not the program's (GOMP_SPINCOUNT or OMP_WAIT_POLICY set?)");
    int threads = thread_count();
    pid_t busy = fork();
    cr_assert_geq(busy, 0);
    if (busy == 0)
        for (;;)
            continue;
    bool on = w.short_waits || waits_change(&w);
    kill(busy, SIGKILL);
    waitpid(busy, NULL, 0);
    cr_assert(on, "a busy process left long waits (%.2f cores busy)", w.others);
    cr_assert(w.short_waits);
    cr_assert_eq(thread_count(), threads + 2);
    sc_cpu_set_short_waits(false);
}

Test(waits, on_from_a_quarter_core_off_below_an_eighth)
{
    cr_assert_not(host_waits_wanted(false, 0.0));
    cr_assert_not(host_waits_wanted(false, 0.2));
    cr_assert(host_waits_wanted(false, 0.25));
    cr_assert(host_waits_wanted(true, 0.2)); /* stays on */
    cr_assert(host_waits_wanted(true, 0.125));
    cr_assert_not(host_waits_wanted(true, 0.1));
    cr_assert_not(host_waits_wanted(true, -1.0)); /* the others idle, cores to spare */
}
