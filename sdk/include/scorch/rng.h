/* scorch/rng.h — seeded, splittable random numbers (xoshiro256**).
 *
 * Every random stream in scorch is derived from (seed, stream id), never from
 * global state, so a run is a pure function of its seed: parameter init
 * (stream "init"), the sampler's permutation (seed, epoch), a sample's
 * augmentation (seed, epoch, index) and dropout (seed, step).
 * An sc_rng is a plain value: copy it to save it. Not thread-safe; give each
 * thread its own.
 */
#ifndef SCORCH_RNG_H
#define SCORCH_RNG_H

#include <stdint.h>

#include "scorch/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sc_rng {
    uint64_t s[4];
} sc_rng;

/* Seeds from a seed and a stream id; different ids give independent
 * streams. */
SC_API void sc_rng_init(sc_rng *rng, uint64_t seed, uint64_t stream);

/* Mixes several words into one stream id, e.g. sc_rng_mix(epoch, index). */
SC_API uint64_t sc_rng_mix(uint64_t a, uint64_t b);

SC_API uint64_t sc_rng_u64(sc_rng *rng);
SC_API float sc_rng_uniform(sc_rng *rng);          /* [0, 1) */
SC_API float sc_rng_normal(sc_rng *rng);           /* mean 0, std 1 */
SC_API uint64_t sc_rng_below(sc_rng *rng, uint64_t n); /* [0, n), unbiased; n > 0 */

#ifdef __cplusplus
}
#endif
#endif
