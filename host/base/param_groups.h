/* param_groups.h — per-parameter optimizer options, as PyTorch's param
 * groups: INI sections and the --no-decay shortcut (docs/cli.md,
 * "Parameter groups").
 *
 *   [params "*.bias"]          a glob on the parameter's full name (fnmatch,
 *   weight_decay = 0           no flags: `*` also matches dots; case
 *   lr_scale = 0.1             sensitive), with weight_decay (instead of
 *                              --weight-decay) and lr_scale (the learning
 *                              rate of every schedule times it)
 *
 * A trainable parameter takes the FIRST section, in file order, whose
 * pattern matches its name; a key that section leaves unset keeps the
 * parameter's default. --no-decay W1,W2,... sets that default weight decay
 * to 0 for the parameters whose name contains one of the words (plain
 * substrings, case sensitive); lr_scale's default is 1. A pattern or a word
 * that matches no trainable parameter is an error: a typo never passes
 * silently.
 *
 * The sections live in host_config (config.c reads and writes them, so
 * config.ini and the checkpoint's config carry them, and a resume that
 * changes them is refused like any option).
 */
#ifndef SCORCH_HOST_PARAM_GROUPS_H
#define SCORCH_HOST_PARAM_GROUPS_H

#include <stdbool.h>
#include <stdio.h>

#include "scorch/optim.h"

enum { HOST_PARAM_GROUPS_MAX = 16, HOST_PARAM_PATTERN_MAX = 128 };

typedef struct host_param_group {
    char pattern[HOST_PARAM_PATTERN_MAX];
    double lr_scale, weight_decay;
    bool has_lr_scale, has_weight_decay; /* set in the section */
} host_param_group;

/* Sections in file order. All zero: none. */
typedef struct host_param_groups {
    int n;
    host_param_group group[HOST_PARAM_GROUPS_MAX];
} host_param_groups;

/* ---- INI (config.c) ---- */

/* Whether an INI section names a parameter group: `params "..."`. */
bool host_param_groups_is_section(const char *section);

/* Applies `key = value` of section [params "PATTERN"] (a section seen
 * before adds to its group); errors name the section and the key. */
sc_status host_param_groups_set(host_param_groups *g, const char *section, const char *key,
                              const char *value);

/* The sections as INI text, loadable by host_param_groups_set. */
void host_param_groups_write(const host_param_groups *g, FILE *out);

/* One line describing the sections, for messages ("none" when empty). */
void host_param_groups_describe(const host_param_groups *g, char *buf, size_t size);

/* ---- parameters ---- */

/* What one trainable parameter gets. */
typedef struct host_param_setting {
    double lr_scale, weight_decay;
    int section;        /* index of its section, or -1 */
    const char *word;   /* the --no-decay word it contains, or NULL */
} host_param_setting;

/* The setting of each parameter of ps (frozen ones and buffers: unused),
 * into out[sc_params_count(ps)], with weight_decay the optimizer's
 * default; checks that every pattern and every --no-decay word (a comma
 * list, "" for none) matches a trainable parameter. */
sc_status host_param_groups_resolve(const host_param_groups *g, const char *no_decay,
                                  const sc_params *ps, double weight_decay,
                                  host_param_setting *out);

/* Resolves and hands every trainable parameter that differs from the
 * defaults to the optimizer (sc_optim_set_param). */
sc_status host_param_groups_apply(const host_param_groups *g, const char *no_decay,
                                sc_params *ps, sc_optim *opt, double weight_decay);

/* The table --summary prints when there are groups: each trainable
 * parameter, its learning-rate scale, weight decay and group. */
sc_status host_param_groups_print(const host_param_groups *g, const char *no_decay,
                                const sc_params *ps, double weight_decay, FILE *out);

#endif
