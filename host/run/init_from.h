/* init_from.h — the weights a fresh scorch-train run starts from, and the
 * parameters it does not train (docs/weights.md):
 *
 *   --init-from FILE   a .safetensors file (tensors named as the model's
 *                      parameters and buffers) or a scorch checkpoint (its
 *                      "param/<name>" entries); the run starts at epoch 1
 *                      with a new optimizer
 *   --init-map RULES   renames the file's tensors first (base/name_map.h)
 *   --init-strict      (the default) refuses a file unless every parameter
 *                      and buffer of the model is in it, with its shape,
 *                      and it holds nothing else, listing every fault at
 *                      once; --no-init-strict loads what fits and prints
 *                      what it skipped
 *   --freeze GLOBS     parameters whose names match do not train
 *
 * The file's type is told by its first bytes (a checkpoint's magic), not
 * its name. F16, BF16 and F64 tensors are converted to f32.
 */
#ifndef SCORCH_HOST_INIT_FROM_H
#define SCORCH_HOST_INIT_FROM_H

#include <stdio.h>

#include "base/config.h"
#include "scorch/params.h"

/* The options that only mean something with --init-from (--init-map,
 * --no-init-strict), refused without it. */
sc_status host_init_check(const host_config *cfg);

/* --freeze: clears the trainable flag of every parameter (not buffer) a
 * glob matches; a glob that matches none is refused, naming it. */
sc_status host_freeze_apply(const char *globs, sc_params *ps);

/* --init-from with cfg's map and strictness: sets the matching
 * parameters and buffers of ps (on any device). `info` (NULL: silent)
 * gets a line saying what was loaded; `notes` gets, without
 * --init-strict, a line per kind of tensor skipped. Errors start with
 * "--init-from FILE". */
sc_status host_init_from_load(const host_config *cfg, sc_params *ps, FILE *info, FILE *notes);

#endif
