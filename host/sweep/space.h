/* space.h — the [space] of a sweep file: the values each swept option
 * takes, and the trials they make (docs/sweeps.md).
 *
 * A dimension is `name = kind(args)`:
 *
 *   grid(a, b, ...)        every value, in order              grid
 *   linspace(lo, hi, n)    n evenly spaced values, ends included
 *   logspace(lo, hi, n)    n values evenly spaced in log, lo and hi > 0
 *   choice(a, b, ...)      one of the values, drawn uniformly  random
 *   uniform(lo, hi)        a real in [lo, hi)
 *   loguniform(lo, hi)     a real whose log is uniform, lo and hi > 0
 *   randint(lo, hi)        an integer in lo..hi
 *   lograndint(lo, hi)     an integer whose log is uniform, lo >= 1
 *
 * Values are numbers or words; a value that holds a comma, a parenthesis
 * or spaces at its ends is quoted, "hidden=64,dropout=0.1". linspace and
 * logspace whose bounds are both integers give integers.
 *
 * The trials are the grid dimensions' product (the last dimension
 * varying fastest), once; with samples N > 0 (scorch-sweep --trials N),
 * N times, each time with fresh draws of the random dimensions. Trial k
 * (0-based) draws from a random stream of its own, (seed, k, dimension),
 * so a sweep is reproducible from its seed, and raising N adds trials
 * without changing the ones before them.
 */
#ifndef SCORCH_HOST_SWEEP_SPACE_H
#define SCORCH_HOST_SWEEP_SPACE_H

#include <stdbool.h>
#include <stdint.h>

#include "scorch/status.h"

typedef enum host_space_kind {
    HOST_SPACE_GRID,
    HOST_SPACE_LINSPACE,
    HOST_SPACE_LOGSPACE,
    HOST_SPACE_CHOICE,
    HOST_SPACE_UNIFORM,
    HOST_SPACE_LOGUNIFORM,
    HOST_SPACE_RANDINT,
    HOST_SPACE_LOGRANDINT,
} host_space_kind;

enum { HOST_SPACE_NAME_MAX = 128, HOST_SPACE_VALUE_MAX = 1024 };

typedef struct host_space_dim {
    char name[HOST_SPACE_NAME_MAX]; /* "lr", "model-args.hidden" */
    host_space_kind kind;
    int line;                       /* in the sweep file; 0 when not from one */
    char *spec;                     /* as written, trimmed: "loguniform(1e-4, 1e-1)" */
    char **values;                  /* grid and choice as given, linspace and logspace
                                     * computed: the text each trial gets */
    int count;                      /* of values */
    double lo, hi;                  /* the bounds of the other kinds */
} host_space_dim;

typedef struct host_space {
    host_space_dim *dims;
    int count;
} host_space;

/* Parses `spec` as dimension `name` and appends it; `line` is for the
 * caller's messages. Refuses a name given twice and a malformed spec,
 * saying what is wrong ("loguniform needs lo > 0"). */
sc_status host_space_add(host_space *space, const char *name, const char *spec, int line);
void host_space_free(host_space *space);

/* The dimension named `name`, or NULL. */
const host_space_dim *host_space_find(const host_space *space, const char *name);

/* Whether the dimension's values are drawn (choice and the distributions). */
bool host_space_dim_is_random(const host_space_dim *dim);

/* Whether the dimension spreads its values on a log scale (logspace,
 * loguniform, lograndint): a plot shows it on one. */
bool host_space_dim_is_log(const host_space_dim *dim);

/* Whether some dimension draws its values. */
bool host_space_is_random(const host_space *space);

/* The trials of the space with `samples` (0: the grid once, and no
 * dimension may be random; > 0: that many draws of the grid). Fails, with
 * the reason, for a random space without samples, samples without a
 * random dimension, or more trials than a sweep can hold. */
sc_status host_space_trial_count(const host_space *space, int64_t samples, int64_t *trials);

/* Trial `trial`'s (0-based) value of each dimension, in the space's
 * order, into values[d] (HOST_SPACE_VALUE_MAX bytes each). */
void host_space_trial_values(const host_space *space, uint64_t seed, int64_t trial,
                             char (*values)[HOST_SPACE_VALUE_MAX]);

#endif
