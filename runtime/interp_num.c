/*
 * interp_num.c — numbers for the interpreter: loading and storing elements
 * of every dtype, exact f16/bf16 conversions, the float→int rule of
 * `convert`, broadcasting and the n-d index iterator.
 *
 * Rounding to f16/bf16 is done from the bits of a double in one step
 * (round-to-nearest-even), never through float, so no value is rounded
 * twice. Integers above 2^53 converted to bf16 are rounded from their
 * integer bits for the same reason.
 */
#include "runtime/interp_impl.h"

#include <math.h>
#include <string.h>

static uint64_t dbits(double v)
{
    uint64_t x;
    memcpy(&x, &v, sizeof x);
    return x;
}

/* Rounds the significand m (with its implicit bit) right by `shift` bits,
 * to nearest, ties to even. shift is in [1, 63]. */
static uint64_t round_shift(uint64_t m, int shift)
{
    uint64_t r = m >> shift;
    uint64_t rem = m & ((UINT64_C(1) << shift) - 1);
    uint64_t half = UINT64_C(1) << (shift - 1);
    if (rem > half || (rem == half && (r & 1)))
        r++;
    return r;
}

/* A binary16-like format: `mbits` stored mantissa bits, exponent bias
 * `bias`, all-ones exponent `emax` for inf/NaN. */
static uint16_t half_from_double(double v, int mbits, int ebits)
{
    uint64_t x = dbits(v);
    uint16_t sign = (uint16_t)((x >> 48) & 0x8000);
    int e = (int)((x >> 52) & 0x7ff);
    uint64_t m = x & ((UINT64_C(1) << 52) - 1);
    int emax = (1 << ebits) - 1, bias = emax >> 1;
    uint16_t inf = (uint16_t)(emax << mbits);
    if (e == 0x7ff) /* inf, or a quiet NaN keeping the top payload bits */
        return sign | inf |
               (m ? (uint16_t)((1u << (mbits - 1)) | ((m >> (52 - mbits)) & ((1u << mbits) - 1))) : 0);
    if (e == 0 && m == 0)
        return sign;
    int he = e - 1023 + bias; /* biased exponent in the target */
    if (he >= emax)
        return sign | inf;
    if (he <= 0) { /* subnormal (or zero) in the target */
        int shift = 52 - mbits + 1 - he;
        if (shift > 63)
            return sign;
        uint64_t r = round_shift(m | (UINT64_C(1) << 52), shift);
        return sign | (uint16_t)r; /* r may carry into the smallest normal */
    }
    uint64_t r = ((uint64_t)he << mbits) | (m >> (52 - mbits));
    uint64_t rem = m & ((UINT64_C(1) << (52 - mbits)) - 1);
    uint64_t half = UINT64_C(1) << (52 - mbits - 1);
    if (rem > half || (rem == half && (r & 1)))
        r++; /* a carry into the exponent is right, up to infinity */
    return sign | (uint16_t)r;
}

uint16_t interp_f16_from_double(double v) { return half_from_double(v, 10, 5); }
uint16_t interp_bf16_from_double(double v) { return half_from_double(v, 7, 8); }

double interp_f16_to_double(uint16_t h)
{
    int sign = h & 0x8000 ? -1 : 1;
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    if (e == 0x1f)
        return m ? (double)NAN * sign : sign * (double)INFINITY;
    if (e == 0)
        return sign * ldexp(m, -24);
    return sign * ldexp(m | 0x400, e - 25);
}

double interp_bf16_to_double(uint16_t h)
{
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

/* An int64 rounded to 8 significant bits, exactly, as a double. */
static double int_round_bf16(int64_t v)
{
    uint64_t mag = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    if (mag <= (UINT64_C(1) << 53))
        return (double)v;
    int msb = 63 - __builtin_clzll(mag);
    int shift = msb - 7;
    double r = ldexp((double)round_shift(mag, shift), shift);
    return v < 0 ? -r : r;
}

int64_t interp_wrap(DType to, int64_t v)
{
    switch (to) {
    case DT_I8: return (int8_t)(uint8_t)(uint64_t)v;
    case DT_U8: return (uint8_t)(uint64_t)v;
    case DT_I32: return (int32_t)(uint32_t)(uint64_t)v;
    case DT_I16: return (int16_t)(uint16_t)(uint64_t)v;
    case DT_U16: return (uint16_t)(uint64_t)v;
    case DT_U32: return (uint32_t)(uint64_t)v;
    case DT_BOOL: return v != 0;
    default: return v;
    }
}

int64_t interp_f2i(DType to, double v)
{
    if (isnan(v))
        return 0;
    if (to == DT_BOOL)
        return v != 0;
    double lo, hi;
    switch (to) {
    case DT_I8: lo = -128, hi = 127; break;
    case DT_U8: lo = 0, hi = 255; break;
    case DT_I32: lo = -2147483648.0, hi = 2147483647.0; break;
    case DT_I16: lo = -32768, hi = 32767; break;
    case DT_U16: lo = 0, hi = 65535; break;
    case DT_U32: lo = 0, hi = 4294967295.0; break;
    case DT_U64: /* the bits of the uint64 */
        v = trunc(v);
        if (v <= 0)
            return 0;
        return v >= 18446744073709551616.0 ? -1 : (int64_t)(uint64_t)v;
    default:
        v = trunc(v);
        if (v >= 9223372036854775808.0)
            return INT64_MAX;
        if (v < -9223372036854775808.0)
            return INT64_MIN;
        return (int64_t)v;
    }
    v = trunc(v);
    return (int64_t)(v < lo ? lo : v > hi ? hi : v);
}

double interp_load_f(const Tensor *t, size_t i)
{
    const void *p = t->data;
    switch (t->dtype) {
    case DT_F32: return ((const float *)p)[i];
    case DT_F16: return interp_f16_to_double(((const uint16_t *)p)[i]);
    case DT_BF16: return interp_bf16_to_double(((const uint16_t *)p)[i]);
    case DT_F64: return ((const double *)p)[i];
    case DT_I8: return ((const int8_t *)p)[i];
    case DT_U8: return ((const uint8_t *)p)[i];
    case DT_I32: return ((const int32_t *)p)[i];
    case DT_I64: return (double)((const int64_t *)p)[i];
    case DT_BOOL: return ((const uint8_t *)p)[i] != 0;
    case DT_I16: return ((const int16_t *)p)[i];
    case DT_U16: return ((const uint16_t *)p)[i];
    case DT_U32: return ((const uint32_t *)p)[i];
    case DT_U64: return (double)((const uint64_t *)p)[i];
    default: return 0;
    }
}

int64_t interp_load_i(const Tensor *t, size_t i)
{
    const void *p = t->data;
    switch (t->dtype) {
    case DT_I8: return ((const int8_t *)p)[i];
    case DT_U8: return ((const uint8_t *)p)[i];
    case DT_I32: return ((const int32_t *)p)[i];
    case DT_I64: return ((const int64_t *)p)[i];
    case DT_BOOL: return ((const uint8_t *)p)[i] != 0;
    case DT_I16: return ((const int16_t *)p)[i];
    case DT_U16: return ((const uint16_t *)p)[i];
    case DT_U32: return ((const uint32_t *)p)[i];
    case DT_U64: return (int64_t)((const uint64_t *)p)[i];
    default: return interp_f2i(DT_I64, interp_load_f(t, i));
    }
}

void interp_store_f(Tensor *t, size_t i, double v)
{
    void *p = t->data;
    switch (t->dtype) {
    case DT_F32: ((float *)p)[i] = (float)v; break;
    case DT_F16: ((uint16_t *)p)[i] = interp_f16_from_double(v); break;
    case DT_BF16: ((uint16_t *)p)[i] = interp_bf16_from_double(v); break;
    case DT_F64: ((double *)p)[i] = v; break;
    case DT_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    default: interp_store_i(t, i, interp_f2i(t->dtype, v)); break;
    }
}

void interp_store_i(Tensor *t, size_t i, int64_t v)
{
    void *p = t->data;
    switch (t->dtype) {
    case DT_F32: ((float *)p)[i] = (float)v; break; /* one rounding */
    case DT_F16: ((uint16_t *)p)[i] = interp_f16_from_double((double)v); break; /* > 2^53 is inf anyway */
    case DT_BF16: ((uint16_t *)p)[i] = interp_bf16_from_double(int_round_bf16(v)); break;
    case DT_F64: ((double *)p)[i] = (double)v; break;
    case DT_I8: ((int8_t *)p)[i] = (int8_t)interp_wrap(DT_I8, v); break;
    case DT_U8: ((uint8_t *)p)[i] = (uint8_t)interp_wrap(DT_U8, v); break;
    case DT_I32: ((int32_t *)p)[i] = (int32_t)interp_wrap(DT_I32, v); break;
    case DT_I64: ((int64_t *)p)[i] = v; break;
    case DT_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    case DT_I16: ((int16_t *)p)[i] = (int16_t)interp_wrap(DT_I16, v); break;
    case DT_U16: ((uint16_t *)p)[i] = (uint16_t)interp_wrap(DT_U16, v); break;
    case DT_U32: ((uint32_t *)p)[i] = (uint32_t)interp_wrap(DT_U32, v); break;
    case DT_U64: ((uint64_t *)p)[i] = (uint64_t)v; break;
    default: break;
    }
}

/* ---- shapes ----------------------------------------------------------- */

void interp_strides(int rank, const int64_t *shape, int64_t *st)
{
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        st[i] = s;
        s *= shape[i];
    }
}

size_t interp_numel(int rank, const int64_t *shape)
{
    size_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= (size_t)shape[i];
    return n;
}

bool interp_bcast_shape(Interp *ip, const Tensor *const *ts, int n, int *rank, int64_t *shape)
{
    int r = 0;
    for (int k = 0; k < n; k++)
        if (ts[k]->rank > r)
            r = ts[k]->rank;
    for (int i = 0; i < r; i++)
        shape[i] = 1;
    for (int k = 0; k < n; k++) {
        int off = r - ts[k]->rank;
        for (int i = 0; i < ts[k]->rank; i++) {
            int64_t d = ts[k]->shape[i];
            int64_t *o = &shape[off + i];
            if (d == *o || d == 1)
                continue;
            if (*o != 1)
                return interp_fail(ip, "operand %d does not broadcast: dim %lld against %lld on "
                                       "result axis %d", k, (long long)d, (long long)*o, off + i);
            *o = d;
        }
    }
    *rank = r;
    return true;
}

void interp_bcast_strides(const Tensor *t, int rank, const int64_t *shape, int64_t *st)
{
    int64_t own[MAX_RANK];
    interp_strides(t->rank, t->shape, own);
    int off = rank - t->rank;
    for (int i = 0; i < rank; i++) {
        int j = i - off;
        st[i] = j < 0 || t->shape[j] == 1 ? 0 : own[j];
    }
    (void)shape;
}

void nditer_init(NdIter *it, int rank, const int64_t *shape)
{
    memset(it, 0, sizeof *it);
    it->rank = rank;
    if (rank > 0)
        memcpy(it->shape, shape, (size_t)rank * sizeof *shape);
}

void nditer_add(NdIter *it, const int64_t *strides)
{
    if (it->rank > 0)
        memcpy(it->st[it->nops], strides, (size_t)it->rank * sizeof *strides);
    it->nops++;
}

void nditer_next(NdIter *it)
{
    for (int d = it->rank - 1; d >= 0; d--) {
        it->idx[d]++;
        for (int k = 0; k < it->nops; k++)
            it->off[k] += it->st[k][d];
        if (it->idx[d] < it->shape[d])
            return;
        for (int k = 0; k < it->nops; k++)
            it->off[k] -= it->st[k][d] * it->shape[d];
        it->idx[d] = 0;
    }
}
