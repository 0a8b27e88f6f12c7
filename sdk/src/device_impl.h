/* device_impl.h — memory on any device, for the parts of libscorch that
 * own device buffers (parameter store, optimizer state, step arenas).
 * Private to libscorch. */
#ifndef SCORCH_DEVICE_IMPL_H
#define SCORCH_DEVICE_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "scorch/device.h"

/* 64-byte aligned memory on dev; NULL with a message on failure. */
void *sc_device_alloc(sc_device dev, size_t bytes);
void sc_device_free(sc_device dev, void *p, size_t bytes); /* NULL is fine */
sc_status sc_device_zero(sc_device dev, void *p, size_t bytes);
/* p[0..n) = value, queued like a kernel (a CUDA graph may capture it). */
sc_status sc_device_fill_f32(sc_device dev, float *p, float value, int64_t n);
/* p[0..n) *= factor, queued like a kernel. */
sc_status sc_device_scale_f32(sc_device dev, float *p, float factor, int64_t n);

#endif
