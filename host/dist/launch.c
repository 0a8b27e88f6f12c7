/* launch.c — the launcher's environment and the ranks' log prefix
 * (launch.h). */
#include "dist/launch.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

/* Per thread, as a rank is a process or a replica's thread. */
static _Thread_local struct {
    char text[32];
    bool known;
} prefix;

static int env_int(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : 0;
}

/* The value of the first of names[0..n) that is set, else `none`. */
static int first_env_int(const char *const *names, size_t n, int none)
{
    for (size_t i = 0; i < n; i++)
        if (getenv(names[i]))
            return env_int(names[i]);
    return none;
}

int host_launch_world(void)
{
    static const char *const sizes[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                                        "SLURM_STEP_NUM_TASKS"};
    return first_env_int(sizes, sizeof sizes / sizeof *sizes, getenv("PMIX_RANK") ? -1 : 0);
}

/* This process's rank as the launcher announced it (0 when none did). */
static int launch_rank(void)
{
    static const char *const ranks[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK",
                                        "SLURM_PROCID"};
    return first_env_int(ranks, sizeof ranks / sizeof *ranks, 0);
}

void host_log_prefix_set(int rank, int world)
{
    prefix.text[0] = '\0';
    if (world != 1 && world != 0)
        snprintf(prefix.text, sizeof prefix.text, "[rank %d] ", rank);
    prefix.known = true;
}

const char *host_log_prefix(void)
{
    if (!prefix.known)
        host_log_prefix_set(launch_rank(), host_launch_world());
    return prefix.text;
}
