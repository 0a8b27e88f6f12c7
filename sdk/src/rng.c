#include "scorch/rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t sc_rng_mix(uint64_t a, uint64_t b)
{
    uint64_t x = a ^ rotl(b, 32) ^ 0x6a09e667f3bcc909ULL;
    splitmix64(&x);
    return splitmix64(&x) ^ b;
}

void sc_rng_init(sc_rng *rng, uint64_t seed, uint64_t stream)
{
    uint64_t x = seed ^ sc_rng_mix(stream, 0x243f6a8885a308d3ULL);
    for (int i = 0; i < 4; i++)
        rng->s[i] = splitmix64(&x);
}

uint64_t sc_rng_u64(sc_rng *rng)
{
    uint64_t *s = rng->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

float sc_rng_uniform(sc_rng *rng)
{
    return (float)(sc_rng_u64(rng) >> 40) * 0x1.0p-24f;
}

float sc_rng_normal(sc_rng *rng)
{
    /* Box-Muller; u1 in (0, 1] so the log is finite. */
    double u1 = ((double)(sc_rng_u64(rng) >> 11) + 1.0) * 0x1.0p-53;
    double u2 = (double)(sc_rng_u64(rng) >> 11) * 0x1.0p-53;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

uint64_t sc_rng_below(sc_rng *rng, uint64_t n)
{
    /* Lemire's multiply-shift with rejection. */
    unsigned __int128 m = (unsigned __int128)sc_rng_u64(rng) * n;
    uint64_t low = (uint64_t)m;
    if (low < n) {
        uint64_t threshold = -n % n;
        while (low < threshold) {
            m = (unsigned __int128)sc_rng_u64(rng) * n;
            low = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}
