#include "base/waits.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/clock.h"
#include "scorch_host/context.h"

static const char spin_variable[] = "GOMP_SPINCOUNT", spin_turns[] = "10000";
/* Short waits go on when other processes keep busy a quarter of a core
 * more than the machine has beyond our threads, and off below an eighth;
 * each window half a second or more. */
static const double window_s = 0.5, busy_on = 0.25, busy_off = 0.125;
/* From the program's start, which loaded the dataset meanwhile. */
static const double first_window_s = 0.1;

static bool spin_ours; /* set before libgomp loaded, by set_spin */

/* Runs before any library's initialisers, libgomp's among them (ELF's
 * preinit_array, of programs only). */
static void set_spin(int argc, char **argv, char **envp)
{
    (void)argc, (void)argv, (void)envp;
    if (!getenv(spin_variable) && !getenv("OMP_WAIT_POLICY"))
        spin_ours = setenv(spin_variable, spin_turns, 0) == 0;
}

__attribute__((section(".preinit_array"), used)) static void (*const preinit)(int, char **,
                                                                              char **) = set_spin;

/* CPU seconds the machine's CPUs spent on anything but idling, from
 * /proc/stat's first line; negative when it cannot be read. */
static double machine_busy_seconds(void)
{
    FILE *f = fopen("/proc/stat", "r");
    if (!f)
        return -1.0;
    unsigned long long t[8] = {0};
    int read = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &t[0], &t[1], &t[2],
                      &t[3], &t[4], &t[5], &t[6], &t[7]);
    fclose(f);
    if (read < 5)
        return -1.0;
    unsigned long long busy = 0;
    for (int k = 0; k < read; k++)
        busy += k == 3 || k == 4 ? 0 : t[k]; /* idle, iowait */
    return (double)busy / (double)sysconf(_SC_CLK_TCK);
}

/* CPU seconds this process has used, all its threads. */
static double own_seconds(void)
{
    struct rusage u;
    if (getrusage(RUSAGE_SELF, &u) != 0)
        return 0.0;
    return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

static void window_begin(host_waits *w, double now)
{
    w->since = now;
    w->machine = machine_busy_seconds();
    w->own = own_seconds();
}

/* The first window: from the program's start to the first step. */
static host_waits started;

/* Runs after libgomp's initialisers. The programs this one starts (a
 * sweep's trials, a job's ranks) choose their own spin. */
__attribute__((constructor)) static void unset_spin(void)
{
    if (!spin_ours)
        return;
    unsetenv(spin_variable);
    window_begin(&started, host_now());
}

bool host_waits_wanted(bool short_now, double over)
{
    return over >= (short_now ? busy_off : busy_on);
}

/* Ends the window when it is `least` seconds long or more: short waits
 * when other processes take cores from ours. True when that turned them
 * on or off. */
static bool window_end(host_waits *w, double least)
{
    double now = host_now(), machine = w->machine, own = w->own;
    if (now - w->since < least)
        return false;
    w->window = now - w->since;
    window_begin(w, now);
    /* /proc/stat counts in ticks, getrusage in microseconds: a few ticks
     * apart, an idle machine can come out slightly below 0 */
    double others = ((w->machine - machine) - (w->own - own)) / w->window;
    w->others = others > 0.0 ? others : 0.0;
    bool short_waits = host_waits_wanted(w->short_waits, w->others - w->spare);
    if (short_waits == w->short_waits)
        return false;
    w->short_waits = short_waits;
    sc_cpu_set_short_waits(short_waits);
    return true;
}

bool host_waits_start(host_waits *w, int threads)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    *w = started;
    w->spare = cpus > threads ? (double)(cpus - threads) : 0.0;
    w->adaptive = spin_ours && threads > 1 && w->machine >= 0.0;
    if (!w->adaptive)
        return false;
    sc_cpu_set_short_waits(false);
    return window_end(w, first_window_s);
}

bool host_waits_check(host_waits *w)
{
    return w->adaptive && window_end(w, window_s);
}
