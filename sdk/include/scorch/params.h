/* scorch/params.h — the parameter store: named parameters in one flat
 * buffer, their gradients in a second one of the same layout.
 *
 * A network creates its parameters here (in create), in a fixed order;
 * optimizers, checkpoints and (later) allreduce work on the flat buffers.
 * Adding a parameter may move the flat buffers: keep sc_tensor pointers,
 * not their ->data, until the network is created. The host's controls
 * (placement, values, gradients, freezing) are in scorch_host/params.h,
 * not for plugins.
 *
 * Thread rule: not thread-safe; the training thread owns it.
 */
#ifndef SCORCH_PARAMS_H
#define SCORCH_PARAMS_H

#include <stdbool.h>
#include <stdint.h>

#include "scorch/export.h"
#include "scorch/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sc_params sc_params;

SC_API sc_params *sc_params_new(void); /* NULL with a message on failure */
SC_API void sc_params_free(sc_params *ps);

/* A new f32 parameter, zero-filled and requiring grad. The name is copied;
 * names are unique ("layer1.weight"). NULL with a message on failure. */
SC_API sc_tensor *sc_params_add(sc_params *ps, const char *name, int ndim,
                                const int64_t *shape);

/* A non-trainable f32 tensor kept with the parameters and saved in
 * checkpoints, but never given a gradient nor updated by the optimizer
 * (batch norm's running statistics). Zero-filled. */
SC_API sc_tensor *sc_params_add_buffer(sc_params *ps, const char *name, int ndim,
                                       const int64_t *shape);

/* Parameters and buffers, in creation order. */
SC_API int sc_params_count(const sc_params *ps);
SC_API sc_tensor *sc_params_at(const sc_params *ps, int i);
SC_API sc_tensor *sc_params_find(const sc_params *ps, const char *name);

/* Offset of parameter i in the flat buffers, in floats. */
SC_API int64_t sc_params_offset(const sc_params *ps, int i);

/* The flat buffers (all parameters, in creation order). */
SC_API int64_t sc_params_numel(const sc_params *ps);
SC_API float *sc_params_values(const sc_params *ps);
SC_API float *sc_params_grads(const sc_params *ps);

/* Number of trainable scalars. */
SC_API int64_t sc_params_trainable_numel(const sc_params *ps);

/* Where the flat buffers live: the CPU until the host moves them to the
 * run's device. */
SC_API sc_device sc_params_device(const sc_params *ps);

/* Copies the flat buffers into host arrays of sc_params_numel() floats;
 * either may be NULL. Waits for the kernels that write them. */
SC_API sc_status sc_params_read(const sc_params *ps, float *values, float *grads);

#ifdef __cplusplus
}
#endif
#endif
