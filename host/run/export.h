/* export.h — a checkpoint's weights as a safetensors file (scorch-export).
 *
 * The file holds every "param/<name>" entry of the checkpoint, parameters
 * and buffers (batch norm's running statistics) alike, named <name>, f32,
 * laid out as PyTorch lays out the same layers (a linear weight is
 * [out, in], a convolution's [out, in, kh, kw]). With ema, a parameter is
 * its "ema/<name>" entry instead, and buffers stay as trained (the EMA
 * averages parameters only). No plugin is loaded: the checkpoint names
 * and shapes everything. The metadata says where the weights came from
 * (docs/weights.md lists the keys).
 */
#ifndef SCORCH_HOST_EXPORT_H
#define SCORCH_HOST_EXPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "scorch/status.h"

typedef struct host_export_request {
    const char *checkpoint;
    const char *out;
    bool ema;            /* the EMA weights (refused when the run kept none) */
    const char *model;   /* the model plugin's path to record; NULL: the checkpoint's */
    const char *dataset; /* the same for the dataset plugin */
} host_export_request;

typedef struct host_export_result {
    int tensors;
    int64_t values;
} host_export_result;

/* Writes r->out atomically; refuses an out that is the checkpoint. */
sc_status host_export_weights(const host_export_request *r, host_export_result *result);

#endif
