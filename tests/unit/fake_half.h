/*
 * fake_half.h — IEEE binary16 for the stand-in libraries (fake_cublaslt.c,
 * fake_cudnn.c), which compute in double: a half's value, and a double
 * rounded to the nearest half (ties to even, overflow to infinity, NaN
 * kept).
 */
#ifndef DISC_FAKE_HALF_H
#define DISC_FAKE_HALF_H

#include <math.h>
#include <stdint.h>

static double f16_get(uint16_t h)
{
    int e = h >> 10 & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
    return h >> 15 ? -v : v;
}

/* v rounded to the nearest binary16, ties to even. */
static uint16_t f16_put(double v)
{
    uint16_t sign = signbit(v) ? 0x8000 : 0;
    double a = fabs(v);
    if (a != a)
        return sign | 0x7e00;
    if (a >= 65520.0)
        return sign | 0x7c00;
    if (a < 0x1p-14) /* subnormal: a multiple of 2^-24 (1024 of them is the least normal's code) */
        return sign | (uint16_t)nearbyint(a * 0x1p24);
    int e;
    double fr = frexp(a, &e); /* a = fr 2^e, fr in [0.5, 1) */
    uint32_t m = (uint32_t)nearbyint(fr * 2048.0);
    if (m == 2048) {
        m = 1024;
        e++;
    }
    return sign | (uint16_t)((uint32_t)(e + 14) << 10 | (m - 1024));
}

#endif
