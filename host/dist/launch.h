/* launch.h — this process as a launcher (mpirun, srun) started it, and
 * the "[rank R] " that a rank's messages begin with. The bottom of dist/:
 * the transports and the data-parallel layer above them both use it, and
 * so do the programs, before and after a rank exists.
 *
 * Thread rule: any thread. The prefix is per thread, as a rank is a
 * process or a replica's thread.
 */
#ifndef SCORCH_HOST_DIST_LAUNCH_H
#define SCORCH_HOST_DIST_LAUNCH_H

/* The world size the launcher announced in the environment: 0 when no
 * launcher started this process, -1 when one did without saying how many
 * (PMIx alone). */
int host_launch_world(void);

/* "[rank R] " in a job of several ranks, else "": from the launcher's
 * environment until host_log_prefix_set names this thread's rank. */
const char *host_log_prefix(void);

/* This thread is rank `rank` of `world` (a process that joined the MPI
 * job, or a replica's thread). */
void host_log_prefix_set(int rank, int world);

#endif
