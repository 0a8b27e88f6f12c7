/* scorch/init.h — seeded parameter initialisers (f32 tensors, CPU data).
 * fan_in/fan_out are the caller's: for a linear weight [OUT, IN],
 * fan_in = IN and fan_out = OUT. */
#ifndef SCORCH_INIT_H
#define SCORCH_INIT_H

#include "scorch/export.h"
#include "scorch/rng.h"
#include "scorch/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

SC_API void sc_init_constant(sc_tensor *t, float value);
SC_API void sc_init_uniform(sc_tensor *t, float low, float high, sc_rng *rng);
SC_API void sc_init_normal(sc_tensor *t, float mean, float std, sc_rng *rng);

/* He et al.: std = gain / sqrt(fan_in); gain sqrt(2) suits ReLU.
 * Uniform variant draws from +-gain * sqrt(3 / fan_in). */
SC_API void sc_init_kaiming_uniform(sc_tensor *t, int64_t fan_in, float gain, sc_rng *rng);
SC_API void sc_init_kaiming_normal(sc_tensor *t, int64_t fan_in, float gain, sc_rng *rng);

/* Glorot & Bengio: std = gain * sqrt(2 / (fan_in + fan_out)).
 * Uniform variant draws from +-gain * sqrt(6 / (fan_in + fan_out)). */
SC_API void sc_init_xavier_uniform(sc_tensor *t, int64_t fan_in, int64_t fan_out, float gain,
                                   sc_rng *rng);
SC_API void sc_init_xavier_normal(sc_tensor *t, int64_t fan_in, int64_t fan_out, float gain,
                                  sc_rng *rng);

#ifdef __cplusplus
}
#endif
#endif
