/* plan.h — a sweep file: the base configuration of scorch-train that
 * every trial shares, and the space the trials cover (docs/sweeps.md).
 *
 *   [train]                      the base: what scorch-train --config reads
 *   model = build/plugins/mlp.so
 *   epochs = 5
 *   [params "*.bias"]            (its parameter groups, as for scorch-train)
 *   weight_decay = 0
 *   [space]                      the swept options (space.h)
 *   lr = loguniform(1e-4, 1e-1)
 *   model-args.hidden = grid(64, 128:64)
 *
 * A dimension's name is an option of scorch-train as INI files write it
 * (lr, batch-size, optimizer), or model-args.KEY or dataset-args.KEY for
 * one plugin argument, merged into the base's list. Every value of the
 * space is checked against the option when the file is read, and the base
 * with host_config_load_ini (messages name the file and line). What the
 * sweep decides for each trial (its run directory, resume, device,
 * threads, workers) is refused in both, and so are hooks and the options
 * that make scorch-train do something else than train (summary, lr-find).
 *
 * A trial's configuration is the base with its values: an INI text that
 * is the sweep file with the [space] section and the swept options' lines
 * blanked (so messages keep the sweep file's line numbers), then a [train]
 * section with the trial's values.
 */
#ifndef SCORCH_HOST_SWEEP_PLAN_H
#define SCORCH_HOST_SWEEP_PLAN_H

#include "base/config.h"
#include "sweep/space.h"

typedef struct host_sweep_plan {
    char name[HOST_PATH_MAX]; /* the file, in messages */
    char *text;               /* the file's text */
    char **lines;             /* the file's lines, NUL-terminated, into a copy of text */
    char **train_keys;        /* per line: the [train] option it sets, or NULL */
    bool *space_line;         /* per line: part of the [space] section */
    int line_count;
    host_config *base;        /* the base configuration */
    host_space space;
} host_sweep_plan;

/* Reads and checks the sweep file at path. */
sc_status host_sweep_plan_load(const char *path, host_sweep_plan *plan);

/* The same from text; `name` stands for the file in messages. */
sc_status host_sweep_plan_load_text(const char *text, const char *name, host_sweep_plan *plan);

void host_sweep_plan_free(host_sweep_plan *plan);

/* The INI text of the trial whose values (one per dimension, space.h) are
 * given, headed by `title` (a comment line); the caller frees it. */
sc_status host_sweep_plan_trial_ini(const host_sweep_plan *plan,
                                    char *const *values, const char *title,
                                    char **text);

/* A difference between two plans, for the refusal of a sweep restarted
 * with another file: "[train] epochs: was 3, now 5", "[space] lr: ...". */
typedef void (*host_sweep_plan_change_fn)(void *user, const char *what, const char *was,
                                          const char *now);

/* Calls fn for each base option and each dimension that differs between
 * the plans (an absent one reads "(none)"); returns how many do. Comments,
 * blank lines and the order of lines do not count. */
int host_sweep_plan_diff(const host_sweep_plan *was, const host_sweep_plan *now,
                         host_sweep_plan_change_fn fn, void *user);

#endif
