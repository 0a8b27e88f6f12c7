/* bfloat16 as the emulated GPU stores it: the upper half of a float.
 * C++ only, as the toolkit's __nv_bfloat16 is. */
#ifndef CUDAEMU_CUDA_BF16_H
#define CUDAEMU_CUDA_BF16_H
#include <stdint.h>
#include <string.h>
#ifdef __cplusplus
struct __nv_bfloat16 {
    uint16_t bits;
    __nv_bfloat16() = default;
    operator float() const
    {
        uint32_t u = (uint32_t)bits << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
};
/* Round to nearest even; a NaN stays a (quiet) NaN. */
static inline __nv_bfloat16 __float2bfloat16_rn(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    __nv_bfloat16 r;
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        r.bits = (uint16_t)((u >> 16) | 0x40);
        return r;
    }
    u += 0x7fffu + ((u >> 16) & 1u);
    r.bits = (uint16_t)(u >> 16);
    return r;
}
static inline float __bfloat162float(__nv_bfloat16 b) { return (float)b; }
#endif
#endif
