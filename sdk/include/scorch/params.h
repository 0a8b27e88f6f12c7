/* scorch/params.h — the parameter store: named parameters in one flat
 * buffer, their gradients in a second one of the same layout.
 *
 * A network creates its parameters here (in create), in a fixed order;
 * optimizers, checkpoints and (later) allreduce work on the flat buffers.
 * Adding a parameter may move the flat buffers: keep sc_tensor pointers,
 * not their ->data, until the network is created.
 *
 * Thread rule: not thread-safe; the training thread owns it.
 */
#ifndef SCORCH_PARAMS_H
#define SCORCH_PARAMS_H

#include <stdbool.h>
#include <stdint.h>

#include "scorch/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sc_params sc_params;

sc_params *sc_params_new(void); /* NULL with a message on failure */
void sc_params_free(sc_params *ps);

/* A new f32 parameter, zero-filled and requiring grad. The name is copied;
 * names are unique ("layer1.weight"). NULL with a message on failure. */
sc_tensor *sc_params_add(sc_params *ps, const char *name, int ndim,
                         const int64_t *shape);

/* A non-trainable f32 tensor kept with the parameters and saved in
 * checkpoints, but never given a gradient nor updated by the optimizer
 * (batch norm's running statistics). Zero-filled. */
sc_tensor *sc_params_add_buffer(sc_params *ps, const char *name, int ndim,
                                const int64_t *shape);

/* Parameters and buffers, in creation order. */
int sc_params_count(const sc_params *ps);
sc_tensor *sc_params_at(const sc_params *ps, int i);
sc_tensor *sc_params_find(const sc_params *ps, const char *name);

/* Offset of parameter i in the flat buffers, in floats. */
int64_t sc_params_offset(const sc_params *ps, int i);

/* The flat buffers (all parameters, in creation order). */
int64_t sc_params_numel(const sc_params *ps);
float *sc_params_values(const sc_params *ps);
float *sc_params_grads(const sc_params *ps);

/* Freezes or unfreezes a parameter (clears/sets SC_TENSOR_REQUIRES_GRAD);
 * buffers stay frozen. */
void sc_params_set_trainable(sc_tensor *param, bool trainable);

/* Number of trainable scalars. */
int64_t sc_params_trainable_numel(const sc_params *ps);

void sc_params_zero_grad(sc_params *ps);

/* Multiplies the gradients [offset, offset + n) of the flat buffer by
 * factor (sums over micro-batches or ranks to means). */
sc_status sc_params_scale_grads(sc_params *ps, int64_t offset, int64_t n, float factor);

/* Where the flat buffers live: the CPU until sc_params_to_device. */
sc_device sc_params_device(const sc_params *ps);

/* Copies the flat buffers into host arrays of sc_params_numel() floats;
 * either may be NULL. Waits for the kernels that write them. */
sc_status sc_params_read(const sc_params *ps, float *values, float *grads);

/* Sets every value from a host array of sc_params_numel() floats. */
sc_status sc_params_write(sc_params *ps, const float *values);

/* Moves the values to a GPU (gradients zeroed there), once, after the
 * network is created: parameters are created and initialised on the host.
 * The sc_tensor pointers stay valid; their data and device change. Create
 * optimizers after the move. */
sc_status sc_params_to_device(sc_params *ps, sc_device device);

#ifdef __cplusplus
}
#endif
#endif
