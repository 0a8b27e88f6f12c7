#include "scorch/init.h"

#include <math.h>

void sc_init_constant(sc_tensor *t, float value)
{
    float *p = sc_tensor_f32(t);
    for (int64_t i = 0; i < t->numel; i++)
        p[i] = value;
}

void sc_init_uniform(sc_tensor *t, float low, float high, sc_rng *rng)
{
    float *p = sc_tensor_f32(t);
    for (int64_t i = 0; i < t->numel; i++)
        p[i] = low + (high - low) * sc_rng_uniform(rng);
}

void sc_init_normal(sc_tensor *t, float mean, float std, sc_rng *rng)
{
    float *p = sc_tensor_f32(t);
    for (int64_t i = 0; i < t->numel; i++)
        p[i] = mean + std * sc_rng_normal(rng);
}

void sc_init_kaiming_uniform(sc_tensor *t, int64_t fan_in, float gain, sc_rng *rng)
{
    float bound = gain * sqrtf(3.0f / (float)fan_in);
    sc_init_uniform(t, -bound, bound, rng);
}

void sc_init_kaiming_normal(sc_tensor *t, int64_t fan_in, float gain, sc_rng *rng)
{
    sc_init_normal(t, 0.0f, gain / sqrtf((float)fan_in), rng);
}

void sc_init_xavier_uniform(sc_tensor *t, int64_t fan_in, int64_t fan_out, float gain,
                            sc_rng *rng)
{
    float bound = gain * sqrtf(6.0f / (float)(fan_in + fan_out));
    sc_init_uniform(t, -bound, bound, rng);
}

void sc_init_xavier_normal(sc_tensor *t, int64_t fan_in, int64_t fan_out, float gain,
                           sc_rng *rng)
{
    sc_init_normal(t, 0.0f, gain * sqrtf(2.0f / (float)(fan_in + fan_out)), rng);
}
