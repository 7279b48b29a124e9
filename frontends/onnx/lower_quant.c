/*
 * lower_quant.c — ONNX's quantization ops, lowered onto core ops.
 *
 *   DequantizeLinear       y = (x - zp) * scale
 *   QuantizeLinear         y = saturate(round(x / scale) + zp)
 *   DynamicQuantizeLinear  scale and zp from min(x, 0) and max(x, 0), then
 *                          QuantizeLinear into u8
 *   MatMulInteger          (a - a_zp) @ (b - b_zp) in i32
 *   ConvInteger            conv(x - x_zp, w - w_zp) into i32
 *   QLinearMatMul,         the integer product (plus QLinearConv's i32
 *   QLinearConv            bias), requantized: saturate(round(acc *
 *                          (x_scale * w_scale / y_scale)) + y_zp)
 *
 * Rounding is to nearest, ties to even (OP_ROUND), and the arithmetic is
 * float32 in the order ONNX Runtime's kernels use (a division by the scale,
 * not a multiplication by its reciprocal; the requantization scale formed
 * as (x_scale * w_scale) / y_scale), so that a quantized value is the
 * same integer ONNX Runtime computes. A different rounding anywhere moves a
 * value by a whole quantization step, far more than a float tolerance.
 *
 * The integer products are exact. MatMulInteger is a dot in i32. The
 * convolution has no integer form in the core ops: its operands, at most
 * 255 in magnitude after the zero points are taken off, are convolved in
 * f32 when every partial sum is provably an integer below 2^24 (K * 255 *
 * 255 < 2^24 for K = C/group * kernel elements known at import, so the
 * result is exact in any summation order), else in f64 (exact up to 2^53),
 * and converted to i32.
 *
 * Scales and zero points are per tensor (a scalar or one element), per
 * axis (1-D along `axis`) or blocked (opset 21's block_size: shaped as the
 * input with ceil(D / block_size) along `axis`, each entry serving
 * block_size consecutive elements); the 4-bit and float8 types are not
 * supported.
 */
#include "frontends/onnx/internal.h"

#include <string.h>

#define CX (&im->g->dims)

static Dim *dc(Imp *im, int64_t c) { return dim_const(CX, c); }

static bool is_q8(DType t) { return t == DT_U8 || t == DT_I8; }

/* The saturation range of a quantized type. */
static bool q_range(Imp *im, DType t, double *lo, double *hi)
{
    switch (t) {
    case DT_U8: *lo = 0, *hi = 255; return true;
    case DT_I8: *lo = -128, *hi = 127; return true;
    case DT_U16: *lo = 0, *hi = 65535; return true;
    case DT_I16: *lo = -32768, *hi = 32767; return true;
    default: return imp_err(im, "quantized type %s is not supported", dtype_name(t));
    }
}

/* A scale or zero point p shaped to broadcast against a value of rank r
 * along axis (negative: from the end): a scalar or one-element p as it is,
 * a 1-D p of C elements as [C, 1, ..., 1] (rank r - axis). NULL p stays
 * NULL; *ok turns false after a message. */
static Value *along(Imp *im, Value *p, int r, int64_t axis, bool *ok)
{
    if (!p || !*ok)
        return NULL;
    if (vrank(p) == 0 || (vrank(p) == 1 && vdims(p)[0] == dc(im, 1)))
        return p;
    if (vrank(p) != 1) {
        *ok = imp_err(im, "a scale or zero point of rank %d (blocked quantization) is not supported", vrank(p));
        return NULL;
    }
    if (!(*ok = imp_axis(im, axis, r, &axis)))
        return NULL;
    Dim *dims[MAX_RANK];
    for (int i = 0; i < r - axis; i++)
        dims[i] = i ? dc(im, 1) : vdims(p)[0];
    return imp_reshape(im, p, dims, (int)(r - axis));
}

/* The axis attribute (default 1; normalised where a 1-D scale uses it)
 * and block_size (0: none). */
static bool q_axis(Imp *im, int64_t *axis, int64_t *block)
{
    if (!attr_int(im, "axis", 1, axis) || !attr_int(im, "block_size", 0, block))
        return false;
    if (*block < 0)
        return imp_err(im, "block_size must not be negative");
    return true;
}

/* Blocked quantization: p (shaped as x, ceil(D / block) on the axis)
 * repeated block times along the axis, a gather at i / block for i in
 * [0, D): x's shape. An index past p's end is a run-time error. */
static Value *blocked(Imp *im, Value *p, Value *x, int64_t axis, int64_t block, bool *ok)
{
    if (!p || !*ok)
        return NULL;
    int r = vrank(x);
    if (vrank(p) != r) {
        *ok = imp_err(im, "with block_size, a scale or zero point must have the input's rank %d", r);
        return NULL;
    }
    if (!(*ok = imp_axis(im, axis, r, &axis)))
        return NULL;
    Value *idx = imp_binc(im, OP_DIV, build_iota(im->g, DT_I64, &vdims(x)[axis], 1, 0), (double)block);
    AttrList l = {0};
    attrs_add_int(im->g, &l, "axis", axis);
    Op *op = idx ? build_op(im->g, OP_GATHER, (Value *[]){p, idx}, 2, l.v, l.n) : NULL;
    if (!op)
        *ok = imp_fail(im);
    return op ? op->out[0] : NULL;
}

/* saturate(round(v) + zp) into type t, v and zp in f32 (zp may be NULL). */
static Value *q_round(Imp *im, Value *v, Value *zp, DType t)
{
    double lo = 0, hi = 0;
    if (!v || !q_range(im, t, &lo, &hi))
        return NULL;
    v = imp_un(im, OP_ROUND, v);
    if (zp)
        v = imp_bin(im, OP_ADD, v, imp_cvt(im, zp, DT_F32));
    v = imp_binc(im, OP_MIN, imp_binc(im, OP_MAX, v, lo), hi);
    return imp_cvt(im, v, t);
}

/* x - zp in i32 (zp may be NULL). */
static Value *minus_zp(Imp *im, Value *x, Value *zp)
{
    Value *xi = imp_cvt(im, x, DT_I32);
    return zp ? imp_bin(im, OP_SUB, xi, imp_cvt(im, zp, DT_I32)) : xi;
}

bool onnx_lower_dequantize(Imp *im)
{
    Value *x = imp_need(im, 0), *s = imp_need(im, 1), *zp = IN(2);
    int64_t axis, block;
    bool ok = true;
    if (!x || !s || !q_axis(im, &axis, &block))
        return false;
    if (!dtype_is_float(vdt(s)))
        return imp_err(im, "the scale must be a float tensor, not %s", dtype_name(vdt(s)));
    s = block ? blocked(im, s, x, axis, block, &ok) : along(im, s, vrank(x), axis, &ok);
    zp = block ? blocked(im, zp, x, axis, block, &ok) : along(im, zp, vrank(x), axis, &ok);
    if (!ok)
        return false;
    /* (x - zp) in i32, then in the scale's type, as ONNX Runtime does */
    return imp_done(im, imp_bin(im, OP_MUL, imp_cvt(im, minus_zp(im, x, zp), vdt(s)), s));
}

bool onnx_lower_quantize(Imp *im)
{
    Value *x = imp_need(im, 0), *s = imp_need(im, 1), *zp = IN(2);
    int64_t axis, odt, block;
    bool ok = true;
    if (!x || !s || !q_axis(im, &axis, &block) || !attr_int(im, "output_dtype", 0, &odt))
        return false;
    DType t = zp ? vdt(zp) : odt ? onnx_dtype((int32_t)odt) : DT_U8;
    if (t == DT_INVALID)
        return imp_err(im, "output_dtype %lld is not supported", (long long)odt);
    s = imp_cvt(im, s, DT_F32);
    s = block ? blocked(im, s, x, axis, block, &ok) : along(im, s, vrank(x), axis, &ok);
    zp = block ? blocked(im, zp, x, axis, block, &ok) : along(im, zp, vrank(x), axis, &ok);
    if (!ok)
        return false;
    Value *v = imp_bin(im, OP_DIV, imp_cvt(im, x, DT_F32), s);
    return imp_done(im, q_round(im, v, zp, t));
}

bool onnx_lower_dynamic_quantize(Imp *im)
{
    Value *x = imp_need(im, 0);
    if (!x)
        return false;
    if (vdt(x) != DT_F32)
        return imp_err(im, "x must be f32, not %s", dtype_name(vdt(x)));
    /* the range, widened to hold 0: a max and a min over every axis (no
     * reshape: over a channels-last activation the layout pass would
     * transpose it back first, where a reduction over every axis reads it
     * as it lies; canon drops such a transpose) */
    int64_t all[MAX_RANK];
    for (int i = 0; i < vrank(x); i++)
        all[i] = i;
    Value *mx = imp_binc(im, OP_MAX, imp_reduce(im, x, "max", all, vrank(x), false), 0);
    Value *mn = imp_binc(im, OP_MIN, imp_reduce(im, x, "min", all, vrank(x), false), 0);
    /* scale = (max - min) / 255, 1 where the range is empty (ONNX Runtime's rule) */
    Value *s = imp_sel(im, imp_cmp(im, "eq", mx, mn), imp_scalar(im, DT_F32, 1),
                       imp_binc(im, OP_DIV, imp_bin(im, OP_SUB, mx, mn), 255));
    /* zp = round(saturate(0 - min / scale)) */
    Value *z = imp_un(im, OP_NEG, imp_bin(im, OP_DIV, mn, s));
    z = imp_un(im, OP_ROUND, imp_binc(im, OP_MIN, imp_binc(im, OP_MAX, z, 0), 255));
    Value *y = q_round(im, imp_bin(im, OP_DIV, x, s), z, DT_U8);
    if (!y)
        return imp_fail(im);
    im->out[0] = y;
    if (im->nout > 1)
        im->out[1] = s;
    if (im->nout > 2 && !(im->out[2] = imp_cvt(im, z, DT_U8)))
        return imp_fail(im);
    return true;
}

/* (a - a_zp) @ (b - b_zp) in i32: a_zp per row of a, b_zp per column of b. */
static Value *matmul_int(Imp *im, Value *a, Value *azp, Value *b, Value *bzp)
{
    if (!a || !b)
        return NULL;
    if (!is_q8(vdt(a)) || !is_q8(vdt(b))) {
        imp_err(im, "operands must be u8 or i8, not %s and %s", dtype_name(vdt(a)), dtype_name(vdt(b)));
        return NULL;
    }
    bool ok = true;
    if (vrank(a) >= 2)
        azp = along(im, azp, vrank(a), vrank(a) - 2, &ok);
    if (!ok)
        return NULL;
    return imp_matmul(im, minus_zp(im, a, azp), minus_zp(im, b, bzp));
}

bool onnx_lower_matmul_integer(Imp *im)
{
    Value *a = imp_need(im, 0), *b = imp_need(im, 1);
    if (!a || !b)
        return false;
    return imp_done(im, matmul_int(im, a, IN(2), b, IN(3)));
}

/* conv(x - x_zp, w - w_zp) in i32; w_zp per output channel. */
static Value *conv_int(Imp *im, Value *x, Value *xzp, Value *w, Value *wzp)
{
    if (!x || !w)
        return NULL;
    if (!is_q8(vdt(x)) || !is_q8(vdt(w))) {
        imp_err(im, "operands must be u8 or i8, not %s and %s", dtype_name(vdt(x)), dtype_name(vdt(w)));
        return NULL;
    }
    if (vrank(w) < 3) {
        imp_err(im, "weights of rank %d: need [M, C/group, kernel...]", vrank(w));
        return NULL;
    }
    /* K = C/group * kernel elements: f32 is exact while K * 255 * 255 < 2^24 */
    int64_t k = 1; /* -1: unknown, or past 2^24 */
    for (int i = 1; i < vrank(w) && k > 0; i++) {
        const Dim *d = vdims(w)[i];
        k = dim_is_const(d) && d->c <= (1 << 24) && k <= (1 << 24) ? k * d->c : -1;
    }
    DType ct = k > 0 && k * 255 * 255 < (1 << 24) ? DT_F32 : DT_F64;
    bool ok = true;
    wzp = along(im, wzp, vrank(w), 0, &ok);
    if (!ok)
        return NULL;
    Value *xs = imp_cvt(im, minus_zp(im, x, xzp), ct), *ws = imp_cvt(im, minus_zp(im, w, wzp), ct);
    if (!xs || !ws)
        return NULL;
    return imp_cvt(im, imp_conv(im, xs, ws), DT_I32);
}

bool onnx_lower_conv_integer(Imp *im)
{
    Value *x = imp_need(im, 0), *w = imp_need(im, 1);
    if (!x || !w)
        return false;
    return imp_done(im, conv_int(im, x, IN(2), w, IN(3)));
}

/* saturate(round(f32(acc) * (xs * ws / ys)) + yzp), ws and yzp along axis
 * of the result (rank r). */
static Value *requantize(Imp *im, Value *acc, Value *xs, Value *ws, Value *ys, Value *yzp, int64_t axis)
{
    if (!acc || !xs || !ws || !ys)
        return NULL;
    bool ok = true;
    int r = vrank(acc);
    ws = along(im, imp_cvt(im, ws, DT_F32), r, axis, &ok);
    Value *ys1 = along(im, imp_cvt(im, ys, DT_F32), r, axis, &ok);
    yzp = along(im, yzp, r, axis, &ok);
    if (!ok)
        return NULL;
    Value *scale = imp_bin(im, OP_DIV, imp_bin(im, OP_MUL, imp_cvt(im, xs, DT_F32), ws), ys1);
    return q_round(im, imp_bin(im, OP_MUL, imp_cvt(im, acc, DT_F32), scale), yzp, yzp ? vdt(yzp) : DT_U8);
}

bool onnx_lower_qlinear_matmul(Imp *im)
{
    Value *a = imp_need(im, 0), *as = imp_need(im, 1), *azp = IN(2);
    Value *b = imp_need(im, 3), *bs = imp_need(im, 4), *bzp = IN(5);
    Value *ys = imp_need(im, 6), *yzp = IN(7);
    if (!a || !as || !b || !bs || !ys)
        return false;
    Value *acc = matmul_int(im, a, azp, b, bzp);
    if (!acc)
        return imp_fail(im);
    /* a's scale per row, b's per column: the last two axes of the result */
    bool ok = true;
    int r = vrank(acc);
    if (r >= 2)
        as = along(im, as, r, r - 2, &ok);
    if (!ok)
        return false;
    return imp_done(im, requantize(im, acc, as, bs, ys, yzp, r - 1));
}

bool onnx_lower_qlinear_conv(Imp *im)
{
    Value *x = imp_need(im, 0), *xs = imp_need(im, 1), *xzp = IN(2);
    Value *w = imp_need(im, 3), *ws = imp_need(im, 4), *wzp = IN(5);
    Value *ys = imp_need(im, 6), *yzp = IN(7), *bias = IN(8);
    if (!x || !xs || !w || !ws || !ys)
        return false;
    Value *acc = conv_int(im, x, xzp, w, wzp);
    if (acc && bias) { /* i32[M] along the channels */
        bool ok = true;
        acc = imp_bin(im, OP_ADD, acc, along(im, imp_cvt(im, bias, DT_I32), vrank(acc), 1, &ok));
        if (!ok)
            return false;
    }
    return imp_done(im, acc ? requantize(im, acc, xs, ws, ys, yzp, 1) : NULL);
}
