/* The CPU backend's kernel table: every op in the registry, and its
 * threads. */
#include <cblas.h>
#include <omp.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "../host_only.h"
#include "conv_impl.h"
#include "scorch_host/context.h"

static const sc_kernel *const cpu_kernels[SC_OP_COUNT] = {
#define SC_CPU_KERNEL_ENTRY(id, name) [SC_OP_##id] = &sc_cpu_kernel_##name,
    SC_OP_LIST(SC_CPU_KERNEL_ENTRY)
#undef SC_CPU_KERNEL_ENTRY
};

const sc_kernel *sc_cpu_kernel(sc_op_id op) { return cpu_kernels[op]; }

/* libgomp makes a thread that waits for the others (at the end of every
 * parallel region, and between regions for the next) spin 300,000 times,
 * milliseconds, before it sleeps. While our team fills the cores, a
 * competing process takes a core from one of its threads, and the others
 * spin through that thread's time slice at every region: with one busy
 * loop on 2 cores, the mlp trained 7x slower than idle (2.8x with the short
 * spin below). OMP_WAIT_POLICY=passive or a small GOMP_SPINCOUNT would stop
 * it, but libgomp reads them as it loads, before libscorch runs. libgomp's
 * documented other case does it instead: with more OpenMP threads in the
 * process than CPUs, a waiting thread spins 100 times. So while short
 * waits are on, one more OpenMP thread is kept, asleep; turning them off
 * ends the thread that holds it, which gives it back. On an idle machine
 * the short spin costs: the mlp trains some 10% slower than with 10,000
 * turns (host/base/waits.c turns them on only while the machine is busy). */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t holder;
    bool on;      /* short waits wanted: the holder lives, or is starting */
    bool held;    /* the holder's surplus thread exists */
    bool managed; /* sc_cpu_set_short_waits decides, not sc_cpu_set_threads */
} waits = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void *hold_a_sleeping_omp_thread(void *arg)
{
    (void)arg;
#pragma omp parallel num_threads(2)
    {
        /* (no work: the barrier only keeps the region from being optimised away) */
#pragma omp barrier
    }
    /* libgomp keeps the team's second thread, asleep, while this one lives */
    pthread_mutex_lock(&waits.mu);
    waits.held = true;
    pthread_cond_broadcast(&waits.cv);
    while (waits.on)
        pthread_cond_wait(&waits.cv, &waits.mu);
    pthread_mutex_unlock(&waits.mu);
    return NULL;
}

/* Returns once both threads run: a process that exits sooner (a run
 * refused early) would otherwise do so while one is still being created,
 * which LeakSanitizer reports as a leak in the thread's start. The holder
 * runs with every signal blocked, so that none is delivered to it.
 * Thread rule: waits.mu held. */
static void start_holder(void)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int err = pthread_create(&waits.holder, NULL, hold_a_sleeping_omp_thread, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err != 0)
        return; /* long waits, then: slower on a busy machine, no less right */
    waits.on = true;
    while (!waits.held)
        pthread_cond_wait(&waits.cv, &waits.mu);
}

/* Joined, the holder has run libgomp's thread destructor, which ends its
 * surplus thread. Thread rule: waits.mu held. */
static void stop_holder(void)
{
    waits.on = false;
    pthread_cond_broadcast(&waits.cv);
    pthread_mutex_unlock(&waits.mu);
    pthread_join(waits.holder, NULL);
    pthread_mutex_lock(&waits.mu);
    waits.held = false;
}

/* Thread rule: waits.mu held. */
static void set_short_waits(bool on)
{
    if (on && !waits.on)
        start_holder();
    else if (!on && waits.on)
        stop_holder();
}

void sc_cpu_set_short_waits(bool on)
{
    if (sc_host_only(__func__) != SC_OK)
        return;
    pthread_mutex_lock(&waits.mu);
    waits.managed = true;
    set_short_waits(on);
    pthread_mutex_unlock(&waits.mu);
}

/* Short waits when `threads` fill the cores, unless the user chose a wait
 * policy or the host manages them. */
static void shorten_omp_waits(int threads)
{
    pthread_mutex_lock(&waits.mu);
    if (!waits.managed && threads > 1 && threads >= omp_get_num_procs() &&
        !getenv("OMP_WAIT_POLICY") && !getenv("GOMP_SPINCOUNT"))
        set_short_waits(true);
    pthread_mutex_unlock(&waits.mu);
}

void sc_cpu_set_threads(int threads)
{
    if (sc_host_only(__func__) != SC_OK)
        return;
    if (threads <= 0)
        threads = omp_get_num_procs();
    omp_set_num_threads(threads);
    openblas_set_num_threads(threads);
    shorten_omp_waits(threads);
}

int sc_cpu_threads(void) { return omp_get_max_threads(); }

/* Set before training, read by every convolution of the steps after. */
static sc_cpu_conv cpu_conv = SC_CPU_CONV_AUTO;

void sc_cpu_set_conv(sc_cpu_conv conv)
{
    if (sc_host_only(__func__) == SC_OK)
        cpu_conv = conv;
}

sc_cpu_conv sc_cpu_conv_setting(void) { return cpu_conv; }

sc_status sc_cpu_conv_parse(const char *name, sc_cpu_conv *out)
{
    static const char *const names[] = {[SC_CPU_CONV_AUTO] = "auto",
                                        [SC_CPU_CONV_WINOGRAD2] = "winograd2",
                                        [SC_CPU_CONV_GEMM] = "gemm"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strcmp(name, names[i]) == 0) {
            *out = (sc_cpu_conv)i;
            return SC_OK;
        }
    return sc_error_set(SC_ERR_INVALID,
                        "unknown CPU convolution '%s' (known: auto, winograd2, gemm)", name);
}
