/* What the reference cuBLAS (cublas.cpp) and cuDNN (cudnn.cpp) share: the
 * number formats they read and write, operand checks, handle and
 * descriptor liveness, and the run-to-run variation of the algorithms NVIDIA
 * documents as non-deterministic. */
#ifndef CUDAEMU_LIBS_H
#define CUDAEMU_LIBS_H
#include <cuda_bf16.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <random>
#include <unordered_set>
#include <vector>

#include "internal.h"

namespace cudaemu {

/* ---- number formats ---- */

enum class num { f32, f64, f16, bf16 };

inline size_t num_size(num t)
{
    return t == num::f64 ? 8 : t == num::f32 ? 4 : 2;
}

inline float bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}
inline uint32_t float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* IEEE binary16, round to nearest even (subnormals and overflow to inf). */
inline uint16_t float_to_half(float f)
{
    uint32_t u = float_bits(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u)
        return (uint16_t)(sign | 0x7e00u); /* NaN */
    if (a >= 0x477ff000u)                  /* rounds to 65520 or more */
        return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u) { /* below 2^-14: subnormal, exact in float arithmetic */
        float sub = bits_float(a) * 16777216.0f; /* in units of 2^-24 */
        return (uint16_t)(sign | (uint32_t)std::nearbyint(sub));
    }
    uint32_t mant = a + 0xfffu + ((a >> 13) & 1u); /* round 23 -> 10 mantissa bits */
    return (uint16_t)(sign | (((mant >> 13) - (112u << 10)) & 0x7fffu));
}
inline float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ffu;
    if (e == 0) { /* zero or subnormal: m units of 2^-24 */
        float v = (float)m / 16777216.0f;
        return h & 0x8000u ? -v : v;
    }
    if (e == 31)
        return bits_float(sign | 0x7f800000u | (m << 13));
    return bits_float(sign | ((e + 112u) << 23) | (m << 13));
}

/* x rounded to the precision tensor cores multiply in. */
inline float round_tf32(float x) /* 10 explicit mantissa bits, nearest even */
{
    uint32_t u = float_bits(x);
    if ((u & 0x7f800000u) != 0x7f800000u)
        u = (u + 0xfffu + ((u >> 13) & 1u)) & ~0x1fffu;
    return bits_float(u);
}
inline float round_bf16(float x) { return (float)__float2bfloat16_rn(x); }
inline float round_half(float x) { return half_to_float(float_to_half(x)); }

/* What an algorithm rounds float inputs to before multiplying them. */
enum class rounding { none, tf32, bf16, half };
inline float rounded(float v, rounding r)
{
    switch (r) {
    case rounding::tf32: return round_tf32(v);
    case rounding::bf16: return round_bf16(v);
    case rounding::half: return round_half(v);
    case rounding::none: break;
    }
    return v;
}

inline double load(const void *p, num t, size_t i)
{
    switch (t) {
    case num::f32: return ((const float *)p)[i];
    case num::f64: return ((const double *)p)[i];
    case num::f16: return half_to_float(((const uint16_t *)p)[i]);
    case num::bf16: return (float)((const __nv_bfloat16 *)p)[i];
    }
    return 0;
}
/* Stores v, rounded first to float (the accumulator GPUs keep) unless the
 * destination is double. */
inline void store(void *p, num t, size_t i, double v)
{
    switch (t) {
    case num::f32: ((float *)p)[i] = (float)v; break;
    case num::f64: ((double *)p)[i] = v; break;
    case num::f16: ((uint16_t *)p)[i] = float_to_half((float)v); break;
    case num::bf16: ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn((float)v); break;
    }
}

/* ---- operands ---- */

/* [p, p + bytes) lies in one live device allocation on GPU `device`;
 * reports otherwise. */
inline bool operand_on(const char *what, const void *p, size_t bytes, int device)
{
    if (bytes == 0)
        return true;
    if (!check_device_range(what, p, bytes))
        return false;
    if (device_of(p) != device) {
        cudaemu_report("%s: %p is memory of GPU %d, the handle's GPU is %d", what, p,
                       device_of(p), device);
        return false;
    }
    return true;
}

/* Reports when [a, a + an) and [b, b + bn) overlap: an output written
 * while an input is still read. */
inline bool disjoint(const char *what, const void *a, size_t an, const void *b, size_t bn)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    if (an == 0 || bn == 0 || x + an <= y || y + bn <= x)
        return true;
    cudaemu_report("%s overlap: the result is undefined", what);
    return false;
}

/* ---- handles and descriptors ---- */

/* The objects of one kind that were created and not yet destroyed. */
class registry {
  public:
    void add(const void *p)
    {
        std::lock_guard<std::mutex> lock(mu_);
        live_.insert(p);
    }
    bool remove(const void *p)
    {
        std::lock_guard<std::mutex> lock(mu_);
        return live_.erase(p) == 1;
    }
    bool has(const void *p)
    {
        std::lock_guard<std::mutex> lock(mu_);
        return live_.count(p) == 1;
    }

  private:
    std::mutex mu_;
    std::unordered_set<const void *> live_;
};

/* ---- non-determinism ---- */

/* A generator for one run of a non-deterministic algorithm. It is seeded
 * afresh from the OS every time, CUDAEMU_SEED or not: atomics on a GPU are
 * not reproducible either, and code that needs bit-exact results must not
 * choose such an algorithm. */
inline std::mt19937_64 nondeterministic_rng()
{
    static std::atomic<uint64_t> calls{0};
    std::random_device dev;
    return std::mt19937_64(((uint64_t)dev() << 32) ^ dev() ^ calls.fetch_add(1));
}

/* 0 .. n-1 in the random order atomics would land in. */
inline std::vector<int> atomic_order(int n)
{
    std::vector<int> order(n);
    for (int i = 0; i < n; i++)
        order[i] = i;
    std::mt19937_64 rng = nondeterministic_rng();
    std::shuffle(order.begin(), order.end(), rng);
    return order;
}

} // namespace cudaemu
#endif
