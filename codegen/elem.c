/*
 * elem.c — the elemental emitter.
 *
 * elem(k, v, idx) emits the computation of one element of v at the
 * multi-index idx. A value produced outside the group is loaded from its
 * buffer; a value produced inside is computed from the elements of its
 * operands, through the index map of its op: broadcasting (a dim that may
 * be 1 at run time reads index 0), transpose (a permutation), slice (an
 * affine map), pad (a clamped load and a select), concat (a select over the
 * operands), reshape (through the flat index), gather (an index read from
 * another tensor), iota (the index itself). Loop fusion therefore never
 * materialises an intermediate: a chain of ops becomes one expression per
 * element, and LLVM's optimiser cleans up what the chain recomputes.
 *
 * Arithmetic mirrors the reference interpreter (doc/ops.md): f16 and bf16
 * compute in f32 and round once on store; float -> int conversion truncates
 * and saturates, NaN gives 0; integer division never traps.
 */
#include "codegen/kern.h"

#include <math.h>
#include <string.h>

#define B (k->cg->b)

bool kern_in_group(const Kern *k, const Value *v)
{
    if (!v->def)
        return false;
    for (int i = 0; i < k->grp->nops; i++)
        if (k->grp->ops[i] == v->def)
            return true;
    return false;
}

LLVMValueRef kern_buf(Kern *k, const Value *v)
{
    for (int i = 0; i < k->nb; i++)
        if (k->bv[i] == v)
            return k->bp[i];
    return NULL;
}

LLVMValueRef kern_offset(Kern *k, const Type *t, LLVMValueRef *idx)
{
    Cg *cg = k->cg;
    LLVMValueRef off = cg_i64(cg, 0);
    Dim *stride = dim_const(&cg->g->dims, 1);
    for (int i = t->rank - 1; i >= 0; i--) {
        LLVMValueRef term = dim_is(stride, 1) ? idx[i] : LLVMBuildMul(B, idx[i], cg_dim(cg, stride), "");
        off = i == t->rank - 1 ? term : LLVMBuildAdd(B, off, term, "");
        stride = dim_mul(&cg->g->dims, stride, t->dims[i]);
    }
    return off;
}

void kern_unflatten(Kern *k, const Type *t, LLVMValueRef flat, LLVMValueRef *idx)
{
    Cg *cg = k->cg;
    for (int i = t->rank - 1; i >= 0; i--) {
        if (i == 0) {
            idx[0] = flat;
            break;
        }
        LLVMValueRef d = cg_dim(cg, t->dims[i]);
        if (dim_is(t->dims[i], 1)) {
            idx[i] = cg_i64(cg, 0);
            continue;
        }
        idx[i] = LLVMBuildURem(B, flat, d, "");
        flat = LLVMBuildUDiv(B, flat, d, "");
    }
}

/* ---- scalar arithmetic ----------------------------------------------- */

static bool is_f(DType dt) { return dtype_is_float(dt); }
static bool is_u(DType dt)
{
    return dt == DT_U8 || dt == DT_U16 || dt == DT_U32 || dt == DT_U64 || dt == DT_BOOL;
}

/* Values and types of the mode being emitted: scalars, or vectors of
 * k->vw lanes (elem_vec) */
static LLVMTypeRef kt(Kern *k, LLVMTypeRef t)
{
    return k->vw ? LLVMVectorType(t, (unsigned)k->vw) : t;
}

static LLVMValueRef kc(Kern *k, LLVMValueRef c)
{
    if (!k->vw)
        return c;
    LLVMValueRef lanes[KERN_MAX_LANES];
    for (int l = 0; l < k->vw; l++)
        lanes[l] = c;
    return LLVMConstVector(lanes, (unsigned)k->vw);
}

static LLVMValueRef fc(Kern *k, double v) { return kc(k, LLVMConstReal(k->cg->t_f32, v)); }
static LLVMValueRef ic(Kern *k, int v) { return kc(k, cg_i32(k->cg, v)); }

static LLVMValueRef fconst(Kern *k, DType dt, double v)
{
    return kc(k, LLVMConstReal(cg_compute_type(k->cg, dt), v));
}

static LLVMValueRef iconst(Kern *k, DType dt, int64_t v)
{
    return kc(k, LLVMConstInt(cg_compute_type(k->cg, dt), (unsigned long long)v, true));
}

static LLVMValueRef intrin(Kern *k, const char *name, DType dt, LLVMValueRef x)
{
    return cg_call_intrinsic(k->cg, name, kt(k, cg_compute_type(k->cg, dt)), &x, 1);
}

static LLVMValueRef libm(Kern *k, const char *name, DType dt, LLVMValueRef x)
{
    return cg_call_libm(k->cg, name, cg_compute_type(k->cg, dt), &x, 1);
}

/* a * b + c, fused where the target has FMA */
static LLVMValueRef fma3(Kern *k, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c)
{
    LLVMValueRef args[3] = {a, b, c};
    return cg_call_intrinsic(k->cg, "fmuladd", LLVMTypeOf(a), args, 3);
}

/* p(x) by Horner's rule over coefficients from the highest degree down,
 * each step one fma3. */
static LLVMValueRef horner(Kern *k, LLVMValueRef x, const float *c, int n)
{
    LLVMValueRef p = fc(k, c[0]);
    for (int i = 1; i < n; i++)
        p = fma3(k, p, x, fc(k, c[i]));
    return p;
}

static LLVMValueRef fclamp(Kern *k, LLVMValueRef x, float lim)
{
    LLVMValueRef hi = fc(k, lim), lo = fc(k, -lim);
    x = LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOGT, x, hi, ""), hi, x, "");
    return LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOLT, x, lo, ""), lo, x, "");
}

/* erf and tanh in f32 as rational approximations (the forms Eigen and XLA
 * use; within 4.2e-7 of the exact values, a few ulp): plain arithmetic, so
 * the loops that use them vectorise, where a libm call would not. NaN
 * passes through the clamps and the polynomials. */
static LLVMValueRef fast_erf(Kern *k, LLVMValueRef x)
{
    static const float a[] = {-2.72614225801306e-10f, 2.77068142495902e-08f, -2.10102402082508e-06f,
                              -5.69250639462346e-05f, -7.34990630326855e-04f, -2.95459980854025e-03f,
                              -1.60960333262415e-02f};
    static const float b[] = {-1.45660718464996e-05f, -2.13374055278905e-04f, -1.68282697438203e-03f,
                              -7.37332916720468e-03f, -1.42647390514189e-02f};
    x = fclamp(k, x, 4.0f);
    LLVMValueRef x2 = LLVMBuildFMul(B, x, x, "");
    LLVMValueRef p = LLVMBuildFMul(B, x, horner(k, x2, a, 7), "");
    return LLVMBuildFDiv(B, p, horner(k, x2, b, 5), "");
}

static LLVMValueRef fast_tanh(Kern *k, LLVMValueRef x)
{
    static const float a[] = {-2.76076847742355e-16f, 2.00018790482477e-13f, -8.60467152213735e-11f,
                              5.12229709037114e-08f, 1.48572235717979e-05f, 6.37261928875436e-04f,
                              4.89352455891786e-03f};
    static const float b[] = {1.19825839466702e-06f, 1.18534705686654e-04f, 2.26843463243900e-03f,
                              4.89352518554385e-03f};
    LLVMValueRef small = LLVMBuildFCmp(B, LLVMRealOLT, intrin(k, "fabs", DT_F32, x),
                                       fc(k, 0.0004), "");
    LLVMValueRef c = fclamp(k, x, 7.90531110763549805f);
    LLVMValueRef x2 = LLVMBuildFMul(B, c, c, "");
    LLVMValueRef p = LLVMBuildFMul(B, c, horner(k, x2, a, 7), "");
    LLVMValueRef r = LLVMBuildFDiv(B, p, horner(k, x2, b, 4), "");
    return LLVMBuildSelect(B, small, x, r, "");
}

/* Cephes' expf without its scaling: n = round(x log2 e) through the sum
 * x log2 e + 1.5 * 2^23 (whose low bits are then n; *sum), r = x - n ln 2
 * in two steps, and e^r = 1 + r + r^2 P(r) (degree 5, within an ulp or
 * two; P by Estrin's scheme, three steps deep where Horner's rule took
 * five: the kernels that use exp wait on its latency, and a swish ran 4%
 * faster), returned. x within [-104, 89], or NaN: NaN stays NaN through r
 * and P, and the integer bits the callers build from *sum are garbage that
 * times NaN gives NaN again. */
static LLVMValueRef exp_reduced(Kern *k, LLVMValueRef x, LLVMValueRef *sum)
{
    static const float c[] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f,
                              1.6666665459e-1f, 5.0000001201e-1f};
    LLVMValueRef shifter = fc(k, 12582912.0);
    *sum = fma3(k, x, fc(k, 1.44269504088896341), shifter);
    LLVMValueRef nf = LLVMBuildFSub(B, *sum, shifter, "");
    LLVMValueRef r = fma3(k, nf, fc(k, -0.693359375), x);
    r = fma3(k, nf, fc(k, 2.12194440e-4), r);
    LLVMValueRef r2 = LLVMBuildFMul(B, r, r, "");
    LLVMValueRef a = fma3(k, fc(k, c[0]), r, fc(k, c[1]));
    LLVMValueRef b = fma3(k, fc(k, c[2]), r, fc(k, c[3]));
    LLVMValueRef lo = fma3(k, fc(k, c[4]), r, fc(k, c[5]));
    LLVMValueRef p = fma3(k, a, LLVMBuildFMul(B, r2, r2, ""), fma3(k, b, r2, lo));
    return fma3(k, p, r2, LLVMBuildFAdd(B, r, fc(k, 1.0), ""));
}

/* 2^m as a float for the integer m = bits + e, -126 <= m <= 127 (n of
 * exp_reduced is its sum's bits less 0x4B400000, 1.5 * 2^23's) */
static LLVMValueRef exp2_bits(Kern *k, LLVMValueRef bits, int e)
{
    Cg *cg = k->cg;
    LLVMValueRef biased = LLVMBuildAdd(B, bits, ic(k, 127 + e), "");
    return LLVMBuildBitCast(B, LLVMBuildShl(B, biased, ic(k, 23), ""), kt(k, cg->t_f32), "");
}

/* exp in f32 as plain arithmetic: exp_reduced times 2^n as two factors
 * 2^(n/2) and 2^(n - n/2), so that results overflow to inf above 88.72
 * and go through the denormals below -87.33 rounded once. x is held to
 * [-104, 89] first (beyond: 0 and inf); NaN passes through. About 20
 * vector operations. */
static LLVMValueRef fast_exp(Kern *k, LLVMValueRef x)
{
    Cg *cg = k->cg;
    LLVMValueRef lo = fc(k, -104.0), hi = fc(k, 89.0);
    LLVMValueRef xc = LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOLT, x, lo, ""), lo, x, "");
    xc = LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOGT, xc, hi, ""), hi, xc, "");
    LLVMValueRef sum, p = exp_reduced(k, xc, &sum);
    LLVMValueRef n = LLVMBuildSub(B, LLVMBuildBitCast(B, sum, kt(k, cg->t_i32), ""), ic(k, 0x4B400000), "");
    LLVMValueRef n1 = LLVMBuildAShr(B, n, ic(k, 1), "");
    LLVMValueRef s1 = exp2_bits(k, n1, 0), s2 = exp2_bits(k, LLVMBuildSub(B, n, n1, ""), 0);
    return LLVMBuildFMul(B, LLVMBuildFMul(B, p, s1, ""), s2, "");
}

/* fast_exp of an x known to be 0 or below (minus_max: a softmax's
 * exponent, whose results are summed and divided by a sum of at least 1):
 * 2^n in one factor, as n >= -126 after x is held at -87.34, and 0 below
 * that (1.2e-38 and less, denormals that would not change the sum):
 * about 17 vector operations against fast_exp's 21. NaN passes through. */
static LLVMValueRef exp_nonpositive(Kern *k, LLVMValueRef x)
{
    Cg *cg = k->cg;
    LLVMValueRef lo = fc(k, -87.33654);
    LLVMValueRef under = LLVMBuildFCmp(B, LLVMRealOLT, x, lo, "");
    LLVMValueRef sum, p = exp_reduced(k, LLVMBuildSelect(B, under, lo, x, ""), &sum);
    LLVMValueRef s = exp2_bits(k, LLVMBuildBitCast(B, sum, kt(k, cg->t_i32), ""), -0x4B400000);
    return LLVMBuildSelect(B, under, fc(k, 0.0), LLVMBuildFMul(B, p, s, ""), "");
}

/* exp: f64 through llvm.exp (libm, or libmvec in vector loops), f32 as
 * fast_exp. LLVM 14 maps llvm.exp.f32 to glibc's 4- and 8-lane vector
 * expf only, so on AVX-512 a loop with exp ran at 8 lanes, and the
 * library sends a whole vector through scalar calls when a lane is beyond
 * |x| ~ 87.33 (a mask's -inf in a softmax: 6 to 20 times slower;
 * bench/NOTES.md). fast_exp is 16 lanes there and has no slow path: a
 * swish over 1 x 96 x 112 x 112 went from 0.62 to 0.29 ms (AVX-512; 0.52
 * at AVX2, level at SSE2), the LLaMA block 4% faster. */
static LLVMValueRef exp_op(Kern *k, DType dt, LLVMValueRef x)
{
    if (cg_compute_type(k->cg, dt) != k->cg->t_f32)
        return intrin(k, "exp", dt, x);
    return fast_exp(k, x);
}

/* One element of unary op u on x (of dtype dt). A switch over UnaryOp with
 * no default, like the interpreter's: an op without a case does not
 * compile; NULL (an op not defined on dt) is reported by elem() with the
 * op's name. */
static LLVMValueRef unary(Kern *k, UnaryOp u, DType dt, LLVMValueRef x)
{
    bool f = is_f(dt);
    switch (u) {
    case UN_NEG: return f ? LLVMBuildFNeg(B, x, "") : LLVMBuildNeg(B, x, "");
    case UN_ABS:
        if (f)
            return intrin(k, "fabs", dt, x);
        if (is_u(dt))
            return x;
        return LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, x, iconst(k, dt, 0), ""), LLVMBuildNeg(B, x, ""), x, "");
    case UN_SIGN:
        if (f) {
            LLVMValueRef pos = LLVMBuildFCmp(B, LLVMRealOGT, x, fconst(k, dt, 0), "");
            LLVMValueRef neg = LLVMBuildFCmp(B, LLVMRealOLT, x, fconst(k, dt, 0), "");
            LLVMValueRef zero_or_nan = LLVMBuildSelect(
                B, LLVMBuildFCmp(B, LLVMRealUNO, x, x, ""), x, fconst(k, dt, 0), "");
            return LLVMBuildSelect(B, pos, fconst(k, dt, 1), LLVMBuildSelect(B, neg, fconst(k, dt, -1), zero_or_nan, ""), "");
        } else {
            LLVMValueRef z = iconst(k, dt, 0);
            LLVMValueRef pos = LLVMBuildICmp(B, is_u(dt) ? LLVMIntUGT : LLVMIntSGT, x, z, "");
            LLVMValueRef neg = LLVMBuildICmp(B, LLVMIntSLT, x, z, "");
            if (is_u(dt))
                neg = LLVMConstInt(k->cg->t_i1, 0, false);
            return LLVMBuildSelect(B, pos, iconst(k, dt, 1), LLVMBuildSelect(B, neg, iconst(k, dt, -1), z, ""), "");
        }
    case UN_EXP: return exp_op(k, dt, x);
    case UN_LOG: return intrin(k, "log", dt, x);
    case UN_SQRT: return intrin(k, "sqrt", dt, x);
    case UN_RSQRT: return LLVMBuildFDiv(B, fconst(k, dt, 1), intrin(k, "sqrt", dt, x), "");
    case UN_RECIP: return LLVMBuildFDiv(B, fconst(k, dt, 1), x, "");
    case UN_TANH: return dt == DT_F64 ? libm(k, "tanh", dt, x) : fast_tanh(k, x);
    case UN_ERF: return dt == DT_F64 ? libm(k, "erf", dt, x) : fast_erf(k, x);
    case UN_SIN: return intrin(k, "sin", dt, x);
    case UN_COS: return intrin(k, "cos", dt, x);
    case UN_TAN: return libm(k, "tan", dt, x); /* LLVM 14 has no llvm.tan */
    case UN_ATAN: return libm(k, "atan", dt, x);
    case UN_FLOOR: return f ? intrin(k, "floor", dt, x) : x;
    case UN_CEIL: return f ? intrin(k, "ceil", dt, x) : x;
    case UN_ROUND: return f ? intrin(k, "roundeven", dt, x) : x;
    case UN_SIGMOID: {
        /* 1 / (1 + exp(-x)) for x >= 0, exp(x) / (1 + exp(x)) below: no
         * overflow for large -x, and no cancellation either (1 - 1 / (1 +
         * exp(x)) lost all but a few bits below x = -10: 2% off at -12.75,
         * 0 from -17 on). exp's argument is 0 or below, so in f32 its
         * cheaper form, which gives 0 below -87.34 where sigmoid is under
         * 1.2e-38 (a swish 1.2 times as fast, bench/NOTES.md) */
        LLVMValueRef nx = LLVMBuildFNeg(B, intrin(k, "fabs", dt, x), "");
        LLVMValueRef e = cg_compute_type(k->cg, dt) == k->cg->t_f32 ? exp_nonpositive(k, nx) : exp_op(k, dt, nx);
        LLVMValueRef one = fconst(k, dt, 1);
        LLVMValueRef nonneg = LLVMBuildFCmp(B, LLVMRealOGE, x, fconst(k, dt, 0), "");
        LLVMValueRef den = LLVMBuildFAdd(B, one, e, "");
        return LLVMBuildFDiv(B, LLVMBuildSelect(B, nonneg, one, e, ""), den, "");
    }
    case UN_NOT: return dt == DT_BOOL ? LLVMBuildXor(B, x, LLVMConstInt(k->cg->t_i1, 1, false), "") : LLVMBuildNot(B, x, "");
    case UN_ISNAN: return LLVMBuildFCmp(B, LLVMRealUNO, x, x, "");
    case UN_ISINF:
        return LLVMBuildFCmp(B, LLVMRealOEQ, intrin(k, "fabs", dt, x), fconst(k, dt, INFINITY), "");
    case UN_COUNT: break;
    }
    return NULL;
}

LLVMValueRef kern_unary(Kern *k, OpKind op, DType dt, LLVMValueRef x)
{
    UnaryOp u = op_unary(op);
    return u == UN_COUNT ? NULL : unary(k, u, dt, x);
}

/* Whether v is a floating-point constant (a scalar, or a vector of them)
 * none of whose lanes is a NaN. */
static bool const_not_nan(LLVMValueRef v)
{
    LLVMBool loses;
    if (LLVMIsAConstantFP(v))
        return !isnan(LLVMConstRealGetDouble(v, &loses));
    if (!LLVMIsAConstantDataVector(v))
        return false;
    unsigned n = LLVMGetVectorSize(LLVMTypeOf(v));
    for (unsigned i = 0; i < n; i++) {
        LLVMValueRef e = LLVMGetElementAsConstant(v, i);
        if (!e || !LLVMIsAConstantFP(e) || isnan(LLVMConstRealGetDouble(e, &loses)))
            return false;
    }
    return n > 0;
}

/* Integer division that never traps: a zero divisor divides by 1, and
 * MIN / -1 wraps. */
static LLVMValueRef int_div(Kern *k, OpKind op, DType dt, LLVMValueRef a, LLVMValueRef b)
{
    LLVMValueRef zero = iconst(k, dt, 0), one = iconst(k, dt, 1);
    LLVMValueRef bz = LLVMBuildICmp(B, LLVMIntEQ, b, zero, "");
    b = LLVMBuildSelect(B, bz, one, b, "");
    if (is_u(dt)) {
        LLVMValueRef r = op == OP_DIV ? LLVMBuildUDiv(B, a, b, "") : LLVMBuildURem(B, a, b, "");
        return r;
    }
    LLVMValueRef m1 = LLVMBuildICmp(B, LLVMIntEQ, b, iconst(k, dt, -1), "");
    LLVMValueRef bb = LLVMBuildSelect(B, m1, one, b, "");
    if (op == OP_DIV) {
        LLVMValueRef q = LLVMBuildSDiv(B, a, bb, "");
        return LLVMBuildSelect(B, m1, LLVMBuildNeg(B, a, ""), q, "");
    }
    LLVMValueRef r = LLVMBuildSRem(B, a, bb, "");
    r = LLVMBuildSelect(B, m1, zero, r, "");
    if (op == OP_MOD) {
        LLVMValueRef rnz = LLVMBuildICmp(B, LLVMIntNE, r, zero, "");
        LLVMValueRef diff = LLVMBuildXor(B, LLVMBuildICmp(B, LLVMIntSLT, r, zero, ""),
                                         LLVMBuildICmp(B, LLVMIntSLT, b, zero, ""), "");
        r = LLVMBuildSelect(B, LLVMBuildAnd(B, rnz, diff, ""), LLVMBuildAdd(B, r, b, ""), r, "");
    }
    return r;
}

LLVMValueRef kern_binary(Kern *k, OpKind op, DType dt, LLVMValueRef a, LLVMValueRef b)
{
    bool f = is_f(dt);
    BinaryOp o = op_binary(op);
    switch (o) {
    case BIN_ADD: return f ? LLVMBuildFAdd(B, a, b, "") : LLVMBuildAdd(B, a, b, "");
    case BIN_SUB: return f ? LLVMBuildFSub(B, a, b, "") : LLVMBuildSub(B, a, b, "");
    case BIN_MUL: return f ? LLVMBuildFMul(B, a, b, "") : LLVMBuildMul(B, a, b, "");
    case BIN_DIV: return f ? LLVMBuildFDiv(B, a, b, "") : int_div(k, op, dt, a, b);
    case BIN_REM: return f ? LLVMBuildFRem(B, a, b, "") : int_div(k, op, dt, a, b);
    case BIN_MOD:
        if (f) {
            LLVMValueRef r = LLVMBuildFRem(B, a, b, "");
            LLVMValueRef z = fconst(k, dt, 0);
            LLVMValueRef rnz = LLVMBuildFCmp(B, LLVMRealONE, r, z, "");
            LLVMValueRef diff = LLVMBuildXor(B, LLVMBuildFCmp(B, LLVMRealOLT, r, z, ""),
                                             LLVMBuildFCmp(B, LLVMRealOLT, b, z, ""), "");
            r = LLVMBuildSelect(B, LLVMBuildAnd(B, rnz, diff, ""), LLVMBuildFAdd(B, r, b, ""), r, "");
            /* a zero result takes the divisor's sign */
            LLVMValueRef isz = LLVMBuildFCmp(B, LLVMRealOEQ, r, z, "");
            LLVMValueRef args[2] = {z, b};
            LLVMValueRef sz = cg_call_intrinsic(k->cg, "copysign", cg_compute_type(k->cg, dt), args, 2);
            return LLVMBuildSelect(B, isz, sz, r, "");
        }
        return int_div(k, op, dt, a, b);
    case BIN_POW: {
        LLVMValueRef args[2] = {a, b};
        return cg_call_intrinsic(k->cg, "pow", cg_compute_type(k->cg, dt), args, 2);
    }
    case BIN_MAX:
    case BIN_MIN: {
        bool ca = f && const_not_nan(a), cb = f && !ca && const_not_nan(b);
        if (ca || cb) {
            /* against a constant that is not a NaN (a clamp's bound, a
             * relu's 0), the general form below in one compare and select,
             * which x86 makes one maxps or minps (the general form took
             * three or four instructions; a QDQ model clamps twice per
             * activation): with a constant, "a > b" picks b when b is a
             * NaN; with b constant, "a > b, or unordered" picks a when a
             * is. Ties pick b either way, as below. */
            LLVMRealPredicate p = op == OP_MAX ? (ca ? LLVMRealOGT : LLVMRealUGT) : (ca ? LLVMRealOLT : LLVMRealULT);
            return LLVMBuildSelect(B, LLVMBuildFCmp(B, p, a, b, ""), a, b, "");
        }
        if (f) {
            LLVMValueRef pick = LLVMBuildFCmp(B, op == OP_MAX ? LLVMRealOGT : LLVMRealOLT, a, b, "");
            LLVMValueRef r = LLVMBuildSelect(B, pick, a, b, "");
            LLVMValueRef nan = LLVMBuildFCmp(B, LLVMRealUNO, a, b, "");
            return LLVMBuildSelect(B, nan, fconst(k, dt, NAN), r, "");
        }
        LLVMIntPredicate p = op == OP_MAX ? (is_u(dt) ? LLVMIntUGT : LLVMIntSGT) : (is_u(dt) ? LLVMIntULT : LLVMIntSLT);
        return LLVMBuildSelect(B, LLVMBuildICmp(B, p, a, b, ""), a, b, "");
    }
    case BIN_AND: return LLVMBuildAnd(B, a, b, "");
    case BIN_OR: return LLVMBuildOr(B, a, b, "");
    case BIN_XOR: return LLVMBuildXor(B, a, b, "");
    case BIN_COUNT: break;
    }
    return NULL;
}

static LLVMValueRef compare(Kern *k, const char *dir, DType dt, LLVMValueRef a, LLVMValueRef b)
{
    if (is_f(dt)) {
        LLVMRealPredicate p = !strcmp(dir, "eq") ? LLVMRealOEQ : !strcmp(dir, "ne") ? LLVMRealUNE
                            : !strcmp(dir, "lt") ? LLVMRealOLT : !strcmp(dir, "le") ? LLVMRealOLE
                            : !strcmp(dir, "gt") ? LLVMRealOGT : LLVMRealOGE;
        return LLVMBuildFCmp(B, p, a, b, "");
    }
    bool u = is_u(dt);
    LLVMIntPredicate p = !strcmp(dir, "eq") ? LLVMIntEQ : !strcmp(dir, "ne") ? LLVMIntNE
                       : !strcmp(dir, "lt") ? (u ? LLVMIntULT : LLVMIntSLT)
                       : !strcmp(dir, "le") ? (u ? LLVMIntULE : LLVMIntSLE)
                       : !strcmp(dir, "gt") ? (u ? LLVMIntUGT : LLVMIntSGT)
                       : (u ? LLVMIntUGE : LLVMIntSGE);
    return LLVMBuildICmp(B, p, a, b, "");
}

/* Float to integer, saturating, NaN to 0, as the IR's convert says.
 * Not through llvm.fpto[su]i.sat: LLVM 14's loop vectoriser keeps a loop
 * with that call scalar, and a quantizing loop kernel (divide, round,
 * clamp, convert to u8, ...) ran 15-40x slower than in vector code
 * (bench/NOTES.md). A plain conversion, whose out-of-range results are
 * poison, and selects on the float's range that never pick a poison one:
 * through i32 for narrower integers (one cvttps2dq a vector), through i64
 * for u32. Bounds are powers of two, exact in f32 and f64. */
static LLVMValueRef float_to_int(Kern *k, LLVMValueRef v, LLVMTypeRef ft, LLVMTypeRef tt, bool u)
{
    Cg *cg = k->cg;
    unsigned w = LLVMGetIntTypeWidth(tt);
    LLVMTypeRef via = w < 32 ? cg->t_i32 : u && w == 32 ? cg->t_i64 : tt;
    LLVMValueRef r = u && via == tt ? LLVMBuildFPToUI(B, v, via, "") : LLVMBuildFPToSI(B, v, via, "");
    if (via != tt)
        r = LLVMBuildTrunc(B, r, tt, "");
    double hi = ldexp(1.0, (int)w - (u ? 0 : 1)); /* the first value out of range above */
    double lo = u ? 0.0 : -hi;                     /* below it: out of range (or truncated into it) */
    unsigned long long max = u ? (w == 64 ? ~0ull : (1ull << w) - 1) : (1ull << (w - 1)) - 1;
    LLVMValueRef big = LLVMBuildFCmp(B, LLVMRealOGE, v, LLVMConstReal(ft, hi), "");
    r = LLVMBuildSelect(B, big, LLVMConstInt(tt, max, false), r, "");
    LLVMValueRef small = LLVMBuildFCmp(B, LLVMRealOLT, v, LLVMConstReal(ft, lo), "");
    r = LLVMBuildSelect(B, small, LLVMConstInt(tt, u ? 0 : 1ull << (w - 1), false), r, "");
    LLVMValueRef nan = LLVMBuildFCmp(B, LLVMRealUNO, v, v, "");
    return LLVMBuildSelect(B, nan, LLVMConstInt(tt, 0, false), r, "");
}

/* An integer of more than 24 bits as the f32 that the store to f16/bf16
 * (round to nearest even from f32) turns into the correctly rounded
 * value: the f32 rounded to odd. Rounding it to nearest, as a plain
 * conversion does, would round twice (2^24 + 2^16 + 1 to bf16: up, not to
 * 2^24). Truncate toward zero, and where that dropped bits set the last
 * bit of the f32; its 24 bits leave room enough for f16's 11 and bf16's
 * 8. */
static LLVMValueRef int_to_half(Kern *k, LLVMValueRef v, DType from)
{
    Cg *cg = k->cg;
    bool u = is_u(from);
    LLVMTypeRef it = LLVMTypeOf(v), f32 = cg->t_f32;
    LLVMValueRef f = u ? LLVMBuildUIToFP(B, v, f32, "") : LLVMBuildSIToFP(B, v, f32, "");
    LLVMValueRef back = float_to_int(k, f, f32, it, u); /* exact: f is an integer (saturating at 2^31, 2^63) */
    LLVMValueRef zero = LLVMConstInt(it, 0, false);
    LLVMValueRef neg = u ? LLVMConstInt(cg->t_i1, 0, false) : LLVMBuildICmp(B, LLVMIntSLT, v, zero, "");
    LLVMValueRef up = LLVMBuildICmp(B, u ? LLVMIntUGT : LLVMIntSGT, back, v, "");
    LLVMValueRef down = LLVMBuildICmp(B, u ? LLVMIntULT : LLVMIntSLT, back, v, "");
    LLVMValueRef away = LLVMBuildSelect(B, neg, down, up, ""); /* rounded away from zero */
    LLVMValueRef bits = LLVMBuildBitCast(B, f, cg->t_i32, "");
    bits = LLVMBuildSelect(B, away, LLVMBuildSub(B, bits, cg_i32(cg, 1), ""), bits, "");
    LLVMValueRef inexact = LLVMBuildICmp(B, LLVMIntNE, back, v, "");
    bits = LLVMBuildSelect(B, inexact, LLVMBuildOr(B, bits, cg_i32(cg, 1), ""), bits, "");
    return LLVMBuildBitCast(B, bits, f32, "");
}

LLVMValueRef kern_convert(Kern *k, LLVMValueRef v, DType from, DType to)
{
    Cg *cg = k->cg;
    LLVMTypeRef tt = cg_compute_type(cg, to), ft = cg_compute_type(cg, from);
    if (from == to || (tt == ft && (is_f(from) == is_f(to)) && to != DT_F16 && to != DT_BF16 &&
                       from != DT_F16 && from != DT_BF16 && is_u(from) == is_u(to)))
        return v;
    if (to == DT_BOOL)
        return is_f(from) ? LLVMBuildFCmp(B, LLVMRealUNE, v, LLVMConstReal(ft, 0), "")
                          : LLVMBuildICmp(B, LLVMIntNE, v, LLVMConstInt(ft, 0, false), "");
    if (is_f(from) && is_f(to)) {
        if (from == DT_F16 || from == DT_BF16 || to == DT_F16 || to == DT_BF16) {
            /* through f32: narrowing to f16/bf16 happens on store */
            if (ft == tt)
                return v;
        }
        return LLVMGetTypeKind(tt) == LLVMDoubleTypeKind ? LLVMBuildFPExt(B, v, tt, "")
                                                        : LLVMBuildFPTrunc(B, v, tt, "");
    }
    if (is_f(from))
        return float_to_int(k, v, ft, tt, is_u(to));
    if (is_f(to) && (to == DT_F16 || to == DT_BF16) && LLVMGetIntTypeWidth(ft) > 24)
        return int_to_half(k, v, from);
    if (is_f(to))
        return is_u(from) ? LLVMBuildUIToFP(B, v, tt, "") : LLVMBuildSIToFP(B, v, tt, "");
    unsigned fw = LLVMGetIntTypeWidth(ft), tw = LLVMGetIntTypeWidth(tt);
    if (fw == tw)
        return v;
    if (fw > tw)
        return LLVMBuildTrunc(B, v, tt, "");
    return is_u(from) ? LLVMBuildZExt(B, v, tt, "") : LLVMBuildSExt(B, v, tt, "");
}

/* ---- index maps ------------------------------------------------------ */

bool kern_maybe_one(Cg *cg, Dim *d)
{
    if (dim_is_const(d))
        return false;
    Constraints *cons = cg->si ? cg->si->cons : NULL;
    bool r = !cons || !cons_prove(cons, d, REL_NE, dim_const(&cg->g->dims, 1));
    if (cg->kfacts)
        cg_kshare_note(cg, d, r);
    return r;
}

/* How an operand's dim xd is read where the result's is rd: BC_PASS the
 * result's index (equal, or provably not 1), BC_ZERO index 0 (a literal
 * 1), BC_SELECT index 0 where xd is 1 at run time (the broadcasting
 * variant) */
enum { BC_PASS, BC_ZERO, BC_SELECT };

static int bcast_dim(Kern *k, Dim *xd, Dim *rd)
{
    if (xd == rd || (!dim_is(xd, 1) && (k->speculate || !kern_maybe_one(k->cg, xd))))
        return BC_PASS;
    return dim_is(xd, 1) ? BC_ZERO : BC_SELECT;
}

/* The operand's index for result index j along a dim read as bcast_dim says */
static LLVMValueRef bcast_at(Kern *k, Dim *xd, Dim *rd, LLVMValueRef j)
{
    Cg *cg = k->cg;
    switch (bcast_dim(k, xd, rd)) {
    case BC_PASS: return j;
    case BC_ZERO: return cg_i64(cg, 0);
    default:
        return LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntEQ, cg_dim(cg, xd), cg_i64(cg, 1), ""), cg_i64(cg, 0), j, "");
    }
}

/* Index into operand x (rank r') of a broadcasting op with result type rt. */
static void bcast_index(Kern *k, const Type *xt, const Type *rt, LLVMValueRef *idx, LLVMValueRef *out)
{
    int off = rt->rank - xt->rank;
    for (int j = 0; j < xt->rank; j++)
        out[j] = bcast_at(k, xt->dims[j], rt->dims[j + off], idx[j + off]);
}

static LLVMValueRef operand(Kern *k, Value *x, const Type *rt, LLVMValueRef *idx)
{
    LLVMValueRef xi[MAX_RANK];
    if (k->flat)
        return elem(k, x, idx);
    bcast_index(k, &x->type, rt, idx, xi);
    return elem(k, x, xi);
}

static LLVMValueRef clamp(Kern *k, LLVMValueRef i, LLVMValueRef n)
{
    Cg *cg = k->cg;
    LLVMValueRef lo = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, i, cg_i64(cg, 0), ""), cg_i64(cg, 0), i, "");
    LLVMValueRef hi = LLVMBuildSub(B, n, cg_i64(cg, 1), "");
    return LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSGT, lo, hi, ""), hi, lo, "");
}

/* A nearest resize's source index along axis a for result index o
 * (resize_is_map): x = num / den, (o, s) or (2o + 1 - s, 2s), rounded as
 * the op's `nearest` says in integers (the interpreter's doubles give the
 * same: see passes.h), clamped into the operand. */
static LLVMValueRef resize_source(Kern *k, const Op *op, int a, LLVMValueRef o)
{
    Cg *cg = k->cg;
    int64_t s = resize_scale(op, a);
    if (s == 1)
        return o;
    if (s < 1) { /* the dims no longer show the scale (host.c, open_types): not a map here */
        diag_set(cg->d, "codegen: resize: no integer scale along axis %d", a);
        return o;
    }
    const char *co = op_attr_str(op, "coord", ""), *nr = op_attr_str(op, "nearest", "");
    bool asym = !strcmp(co, "asymmetric");
    LLVMValueRef num = asym ? o : LLVMBuildAdd(B, LLVMBuildMul(B, o, cg_i64(cg, 2), ""), cg_i64(cg, 1 - s), "");
    LLVMValueRef den = cg_i64(cg, asym ? s : 2 * s);
    LLVMValueRef f = cg_floordiv(cg, B, num, den);
    LLVMValueRef rem = LLVMBuildSub(B, num, LLVMBuildMul(B, f, den, ""), "");
    LLVMValueRef up = NULL, rem2 = LLVMBuildMul(B, rem, cg_i64(cg, 2), "");
    if (!strcmp(nr, "ceil"))
        up = LLVMBuildICmp(B, LLVMIntNE, rem, cg_i64(cg, 0), "");
    else if (!strcmp(nr, "round_prefer_floor"))
        up = LLVMBuildICmp(B, LLVMIntSGT, rem2, den, "");
    else if (!strcmp(nr, "round_prefer_ceil"))
        up = LLVMBuildICmp(B, LLVMIntSGE, rem2, den, "");
    LLVMValueRef r = up ? LLVMBuildAdd(B, f, LLVMBuildZExt(B, up, cg->t_i64, ""), "") : f;
    r = clamp(k, r, cg_dim(cg, op->in[0]->type.dims[a]));
    if (!strcmp(co, "pytorch_half_pixel")) /* a result of length 1 reads index 0 */
        r = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSGT, cg_dim(cg, op->out[0]->type.dims[a]), cg_i64(cg, 1), ""),
                            r, cg_i64(cg, 0), "");
    return r;
}

/* A linear resize's source coordinate along axis a for result index o,
 * in doubles, as the interpreter's source_coord computes it (the same
 * operations in the same order: the same coordinate). */
static LLVMValueRef lerp_coord(Kern *k, const Op *op, int a, LLVMValueRef o)
{
    Cg *cg = k->cg;
    LLVMTypeRef d = cg->t_f64;
    const char *co = op_attr_str(op, "coord", "");
    const Attr *sc = op_attr(op, "scales");
    LLVMValueRef lin = cg_dim(cg, op->in[0]->type.dims[a]), lout = cg_dim(cg, op->out[0]->type.dims[a]);
    LLVMValueRef din = LLVMBuildSIToFP(B, lin, d, ""), dout = LLVMBuildSIToFP(B, lout, d, "");
    LLVMValueRef x = LLVMBuildSIToFP(B, o, d, "");
    LLVMValueRef s = sc ? LLVMConstReal(d, sc->floats[a]) : LLVMBuildFDiv(B, dout, din, "");
    LLVMValueRef half = LLVMConstReal(d, 0.5), one = LLVMConstReal(d, 1);
    /* (x + 0.5) / s - 0.5 */
    LLVMValueRef hp = LLVMBuildFSub(B, LLVMBuildFDiv(B, LLVMBuildFAdd(B, x, half, ""), s, ""), half, "");
    if (!strcmp(co, "asymmetric"))
        return LLVMBuildFDiv(B, x, s, "");
    if (!strcmp(co, "align_corners")) {
        LLVMValueRef wout = LLVMBuildFMul(B, s, din, "");
        LLVMValueRef num = LLVMBuildFMul(B, x, LLVMBuildSIToFP(B, LLVMBuildSub(B, lin, cg_i64(cg, 1), ""), d, ""), "");
        LLVMValueRef r = LLVMBuildFDiv(B, num, LLVMBuildFSub(B, wout, one, ""), "");
        return LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntEQ, lout, cg_i64(cg, 1), ""), LLVMConstReal(d, 0), r, "");
    }
    if (!strcmp(co, "pytorch_half_pixel"))
        return LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSGT, lout, cg_i64(cg, 1), ""), hp, LLVMConstReal(d, 0), "");
    if (!strcmp(co, "half_pixel_symmetric")) {
        LLVMValueRef adj = LLVMBuildFDiv(B, dout, LLVMBuildFMul(B, s, din, ""), "");
        LLVMValueRef center = LLVMBuildFDiv(B, din, LLVMConstReal(d, 2), "");
        LLVMValueRef c = LLVMBuildFMul(B, center, LLVMBuildFSub(B, one, adj, ""), "");
        return LLVMBuildFSub(B, LLVMBuildFAdd(B, c, LLVMBuildFDiv(B, LLVMBuildFAdd(B, x, half, ""), s, ""), ""), half,
                             "");
    }
    return hp; /* half_pixel */
}

/* The sum over the corners of a linear resize from moving axis j on:
 * along ax[j] the taps lo and hi with weights 1 - w and w, the lower tap
 * alone where w is 0 (as the interpreter skips a tap of weight 0: an
 * infinity beside it does not make a NaN). */
static LLVMValueRef lerp_corners(Kern *k, const Op *op, LLVMValueRef *xi, const int *ax, int n, int j,
                                 LLVMValueRef *lo, LLVMValueRef *hi, LLVMValueRef *w)
{
    if (j == n)
        return elem(k, op->in[0], xi);
    DType dt = op->out[0]->type.dtype;
    LLVMTypeRef ct = cg_compute_type(k->cg, dt);
    xi[ax[j]] = lo[j];
    LLVMValueRef v0 = lerp_corners(k, op, xi, ax, n, j + 1, lo, hi, w);
    xi[ax[j]] = hi[j];
    LLVMValueRef v1 = lerp_corners(k, op, xi, ax, n, j + 1, lo, hi, w);
    LLVMTypeRef d = k->cg->t_f64;
    LLVMValueRef w1 = LLVMBuildFPCast(B, w[j], ct, "");
    LLVMValueRef w0 = LLVMBuildFPCast(B, LLVMBuildFSub(B, LLVMConstReal(d, 1), w[j], ""), ct, "");
    LLVMValueRef r = LLVMBuildFAdd(B, LLVMBuildFMul(B, w0, v0, ""), LLVMBuildFMul(B, w1, v1, ""), "");
    return LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOEQ, w[j], LLVMConstReal(d, 0), ""), v0, r, "");
}

/* A linear resize (resize_is_lerp): along each axis whose length changes,
 * the coordinate x of the result index, its taps floor(x) and floor(x) +
 * 1 clamped into the operand, weighted by x - floor(x); the other axes
 * read their own index. */
static LLVMValueRef resize_lerp(Kern *k, const Op *op, LLVMValueRef *idx)
{
    Cg *cg = k->cg;
    const Type *rt = &op->out[0]->type;
    LLVMValueRef xi[MAX_RANK], lo[MAX_RANK], hi[MAX_RANK], w[MAX_RANK];
    int ax[MAX_RANK], n = 0;
    for (int a = 0; a < rt->rank; a++) {
        xi[a] = idx[a];
        if (resize_scale(op, a) == 1)
            continue;
        LLVMValueRef x = lerp_coord(k, op, a, idx[a]);
        LLVMValueRef f = cg_call_intrinsic(cg, "floor", cg->t_f64, &x, 1);
        LLVMValueRef fi = LLVMBuildFPToSI(B, f, cg->t_i64, "");
        LLVMValueRef len = cg_dim(cg, op->in[0]->type.dims[a]);
        ax[n] = a;
        lo[n] = clamp(k, fi, len);
        hi[n] = clamp(k, LLVMBuildAdd(B, fi, cg_i64(cg, 1), ""), len);
        w[n++] = LLVMBuildFSub(B, x, f, "");
    }
    return lerp_corners(k, op, xi, ax, n, 0, lo, hi, w);
}

/* A gathered index: wraps negatives and clamps into [0, n). */
static LLVMValueRef index_value(Kern *k, LLVMValueRef j, DType dt, Dim *n)
{
    Cg *cg = k->cg;
    j = kern_convert(k, j, dt, DT_I64);
    LLVMValueRef nn = cg_dim(cg, n);
    LLVMValueRef neg = LLVMBuildICmp(B, LLVMIntSLT, j, cg_i64(cg, 0), "");
    j = LLVMBuildSelect(B, neg, LLVMBuildAdd(B, j, nn, ""), j, "");
    return clamp(k, j, nn);
}

static LLVMValueRef const_elem(Kern *k, const Op *op, LLVMValueRef *idx)
{
    Cg *cg = k->cg;
    const Type *t = &op->out[0]->type;
    size_t n;
    if (cg_index_const(k->grp, op->out[0])) { /* from its buffer (ksig.c) */
        LLVMValueRef base = kern_buf(k, op->out[0]);
        return base ? cg_load(cg, t->dtype, base) : NULL;
    }
    if (op->cst && op->cst->data && type_static_numel(t, &n) && n == 1) {
        const void *p = op->cst->data;
        switch (t->dtype) {
        case DT_F32: { float f; memcpy(&f, p, 4); return LLVMConstReal(cg->t_f32, f); }
        case DT_F64: { double f; memcpy(&f, p, 8); return LLVMConstReal(cg->t_f64, f); }
        case DT_I64: { int64_t v; memcpy(&v, p, 8); return LLVMConstInt(cg->t_i64, (unsigned long long)v, true); }
        case DT_I32: { int32_t v; memcpy(&v, p, 4); return LLVMConstInt(cg->t_i32, (unsigned long long)(int64_t)v, true); }
        case DT_I8: return LLVMConstInt(cg->t_i8, (unsigned long long)(int64_t)*(const int8_t *)p, true);
        case DT_U8: return LLVMConstInt(cg->t_i8, *(const uint8_t *)p, false);
        case DT_I16: { int16_t v; memcpy(&v, p, 2); return LLVMConstInt(cg->t_i16, (unsigned long long)(int64_t)v, true); }
        case DT_U16: { uint16_t v; memcpy(&v, p, 2); return LLVMConstInt(cg->t_i16, v, false); }
        case DT_U32: { uint32_t v; memcpy(&v, p, 4); return LLVMConstInt(cg->t_i32, v, false); }
        case DT_U64: { uint64_t v; memcpy(&v, p, 8); return LLVMConstInt(cg->t_i64, v, false); }
        case DT_BOOL: return LLVMConstInt(cg->t_i1, *(const uint8_t *)p != 0, false);
        default: break;
        }
    }
    /* larger constants are buffers */
    LLVMValueRef base = kern_buf(k, op->out[0]);
    if (!base)
        return NULL;
    LLVMValueRef off = k->flat ? k->flat : kern_offset(k, t, idx);
    return cg_load(cg, t->dtype, LLVMBuildGEP2(B, cg_storage_type(cg, t->dtype), base, &off, 1, ""));
}

/* Picks entry idx of a small list of i64 values (a shape tensor). */
static LLVMValueRef pick(Kern *k, LLVMValueRef *v, int n, LLVMValueRef idx)
{
    LLVMValueRef r = v[n - 1];
    for (int i = n - 2; i >= 0; i--)
        r = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntEQ, idx, cg_i64(k->cg, i), ""), v[i], r, "");
    return r;
}

/* idx[from..to) of a shape's dims as one flat index (row-major). */
static LLVMValueRef flatten_run(Kern *k, Dim *const *dims, LLVMValueRef *idx, int from, int to)
{
    LLVMValueRef flat = idx[from];
    for (int i = from + 1; i < to; i++)
        flat = LLVMBuildAdd(B, LLVMBuildMul(B, flat, cg_dim(k->cg, dims[i]), ""), idx[i], "");
    return from < to ? flat : cg_i64(k->cg, 0);
}

/* The flat index `flat` of a run of dims [from, to) split into one index
 * per dim, into xi. */
static void split_run(Kern *k, Dim *const *dims, LLVMValueRef flat, int from, int to, LLVMValueRef *xi)
{
    Cg *cg = k->cg;
    for (int i = to - 1; i >= from; i--) {
        if (i == from) {
            xi[i] = flat;
            break;
        }
        if (dim_is(dims[i], 1)) {
            xi[i] = cg_i64(cg, 0);
            continue;
        }
        LLVMValueRef d = cg_dim(cg, dims[i]);
        xi[i] = LLVMBuildURem(B, flat, d, "");
        flat = LLVMBuildUDiv(B, flat, d, "");
    }
}

/* The operand index of a reshape from xt to rt. Leading and trailing dims
 * the two shapes share (equal pointers) pass through. The middle goes in
 * groups where it can: a run of the operand's dims whose product is one
 * dim of the result (a split: that index divided up) or a run of the
 * result's dims whose product is one of the operand's (a merge: a sum of
 * products, no division at all); each group's index depends only on its
 * own axes, so a division by a symbol for the outer axes is made once per
 * row rather than per element (attention's [S, B, 12, 64] read as
 * [S * B, 768]: two 64-bit divisions an element made its kernel run at 2
 * GB/s). What is left is one flat index over the rest, split up. */
/* The leading and trailing dims a reshape from xt to rt passes through
 * (equal pointers; the trailing ones after the leading) */
static void reshape_runs(const Type *xt, const Type *rt, int *lead, int *tail)
{
    int l = 0, t = 0;
    while (l < xt->rank && l < rt->rank && xt->dims[l] == rt->dims[l])
        l++;
    while (t < xt->rank - l && t < rt->rank - l && xt->dims[xt->rank - 1 - t] == rt->dims[rt->rank - 1 - t])
        t++;
    *lead = l, *tail = t;
}

static void reshape_index(Kern *k, const Type *xt, const Type *rt, LLVMValueRef *idx, LLVMValueRef *xi)
{
    Cg *cg = k->cg;
    DimCtx *cx = &cg->g->dims;
    int lead, tail;
    reshape_runs(xt, rt, &lead, &tail);
    for (int i = 0; i < lead; i++)
        xi[i] = idx[i];
    for (int i = 0; i < tail; i++)
        xi[xt->rank - 1 - i] = idx[rt->rank - 1 - i];
    int xe = xt->rank - tail, re = rt->rank - tail, i = lead, j = lead;
    while (i < xe && j < re) {
        int a = 1, b = 1;
        Dim *p = xt->dims[i];
        while (p != rt->dims[j] && i + a < xe)
            p = dim_mul(cx, p, xt->dims[i + a++]);
        if (p == rt->dims[j]) { /* xt[i..i+a) splits rt[j] */
            split_run(k, xt->dims, idx[j], i, i + a, xi);
            i += a, j++;
            continue;
        }
        for (p = rt->dims[j]; p != xt->dims[i] && j + b < re;)
            p = dim_mul(cx, p, rt->dims[j + b++]);
        if (p != xt->dims[i])
            break;
        xi[i] = flatten_run(k, rt->dims, idx, j, j + b); /* rt[j..j+b) merge into xt[i] */
        i++, j += b;
    }
    if (i < xe)
        split_run(k, xt->dims, j < re ? flatten_run(k, rt->dims, idx, j, re) : cg_i64(cg, 0), i, xe, xi);
}

/* x in every lane of a vector of k->vw (x itself when scalar) */
static LLVMValueRef splat(Kern *k, LLVMValueRef x)
{
    if (!k->vw)
        return x;
    LLVMTypeRef vt = LLVMVectorType(LLVMTypeOf(x), (unsigned)k->vw);
    LLVMValueRef v = LLVMBuildInsertElement(B, LLVMGetUndef(vt), x, cg_i32(k->cg, 0), "");
    return LLVMBuildShuffleVector(B, v, v, LLVMConstNull(LLVMVectorType(k->cg->t_i32, (unsigned)k->vw)), "");
}

LLVMValueRef kern_div_invariant(Kern *k, LLVMValueRef e, LLVMValueRef r)
{
    Cg *cg = k->cg;
    LLVMTypeRef f = cg->t_f32;
    int vw = k->vw; /* r is a scalar (a row value) in either mode */
    k->vw = 0;
    LLVMValueRef tiny = LLVMBuildFCmp(B, LLVMRealOLT, intrin(k, "fabs", DT_F32, r), LLVMConstReal(f, 0x1p-126), "");
    tiny = LLVMBuildAnd(B, tiny, LLVMBuildFCmp(B, LLVMRealONE, r, LLVMConstReal(f, 0), ""), "");
    LLVMValueRef s = LLVMBuildSelect(B, tiny, LLVMConstReal(f, 0x1p64), LLVMConstReal(f, 1), "");
    LLVMValueRef inv = LLVMBuildFDiv(B, LLVMConstReal(f, 1), LLVMBuildFMul(B, r, s, ""), "");
    k->vw = vw;
    return LLVMBuildFMul(B, LLVMBuildFMul(B, e, splat(k, s), ""), splat(k, inv), "");
}

/* v is one of the kernel's row values (a reduction's result per row). */
static bool is_row_value(const Kern *k, const Value *v)
{
    for (int i = 0; i < k->nr; i++)
        if (k->rv[i] == v)
            return true;
    return false;
}

/* Whether v is t - max(t) (the max a reduction of t that keeps its dims,
 * broadcast back by the subtraction): a softmax's exponent, 0 or below
 * (or NaN, where t has a NaN or +inf). */
static bool minus_max(const Value *v)
{
    const Op *d = v->def;
    if (!d || d->kind != OP_SUB)
        return false;
    const Op *m = d->in[1]->def;
    return m && m->kind == OP_REDUCE && m->in[0] == d->in[0] && !strcmp(op_attr_str(m, "kind", "sum"), "max");
}

/* The operand index xi of a broadcast, transpose or slice op with result
 * type rt at idx (op_elem; elem_vec's lanes too). */
static void map_index(Kern *k, const Op *op, const Type *rt, LLVMValueRef *idx, LLVMValueRef *xi)
{
    Cg *cg = k->cg;
    const Type *xt = &op->in[0]->type;
    if (op->kind == OP_TRANSPOSE) {
        const Attr *perm = op_attr(op, "perm");
        for (int i = 0; i < perm->n; i++)
            xi[perm->ints[i]] = idx[i];
    } else if (op->kind == OP_SLICE) {
        const Attr *st = op_attr(op, "start"), *sd = op_attr(op, "stride");
        for (int i = 0; i < rt->rank; i++) {
            LLVMValueRef j = sd->ints[i] == 1 ? idx[i] : LLVMBuildMul(B, idx[i], cg_i64(cg, sd->ints[i]), "");
            xi[i] = dim_is(st->dims[i], 0) ? j : LLVMBuildAdd(B, j, cg_dim(cg, st->dims[i]), "");
        }
    } else { /* a broadcast: a dim that may be 1 at run time reads index 0 there */
        const Attr *axes = op_attr(op, "axes");
        for (int i = 0; i < xt->rank; i++)
            xi[i] = bcast_at(k, xt->dims[i], rt->dims[axes->ints[i]], idx[axes->ints[i]]);
    }
}

static bool in_buffer(Kern *k, const Value *v);
static LLVMValueRef load_as(Kern *k, Value *v, const Type *t, LLVMValueRef *idx);

static LLVMValueRef op_elem(Kern *k, Op *op, Value *v, LLVMValueRef *idx)
{
    Cg *cg = k->cg;
    const Type *rt = &v->type;
    const OpInfo *info = op_info(op->kind);
    LLVMValueRef xi[MAX_RANK];
    DType dt = rt->dtype;
    if (info->cat == CAT_UNARY) {
        LLVMValueRef x = operand(k, op->in[0], rt, idx);
        if (op->kind == OP_EXP && dt == DT_F32 && minus_max(op->in[0]))
            return exp_nonpositive(k, x);
        return kern_unary(k, op->kind, op->in[0]->type.dtype, x);
    }
    if (info->cat == CAT_BINARY) {
        LLVMValueRef a = operand(k, op->in[0], rt, idx), b = operand(k, op->in[1], rt, idx);
        if (op->kind == OP_DIV && dt == DT_F32 && is_row_value(k, op->in[1]))
            return kern_div_invariant(k, a, b); /* by a row's reduction */
        return kern_binary(k, op->kind, dt, a, b);
    }
    switch (op->kind) {
    case OP_CMP: {
        LLVMValueRef a = operand(k, op->in[0], rt, idx), b = operand(k, op->in[1], rt, idx);
        return compare(k, op_attr_str(op, "dir", "eq"), op->in[0]->type.dtype, a, b);
    }
    case OP_SELECT: {
        LLVMValueRef c = operand(k, op->in[0], rt, idx);
        LLVMValueRef a = operand(k, op->in[1], rt, idx), b = operand(k, op->in[2], rt, idx);
        return LLVMBuildSelect(B, c, a, b, "");
    }
    case OP_CONVERT:
        return kern_convert(k, operand(k, op->in[0], rt, idx), op->in[0]->type.dtype, dt);
    case OP_CONST:
        return const_elem(k, op, idx);
    case OP_RESHAPE:
    case OP_DYN_RESHAPE: {
        const Type *xt = &op->in[0]->type;
        if (k->flat)
            return elem(k, op->in[0], idx);
        if (in_buffer(k, op->in[0])) /* row-major either way: the same offset */
            return load_as(k, op->in[0], rt, idx);
        reshape_index(k, xt, rt, idx, xi);
        return elem(k, op->in[0], xi);
    }
    case OP_BROADCAST:
    case OP_DYN_BROADCAST:
    case OP_TRANSPOSE:
    case OP_SLICE:
        map_index(k, op, rt, idx, xi);
        return elem(k, op->in[0], xi);
    case OP_REVERSE: {
        const Attr *axes = op_attr(op, "axes");
        memcpy(xi, idx, (size_t)rt->rank * sizeof *xi);
        for (int i = 0; i < axes->n; i++) {
            int a = (int)axes->ints[i];
            xi[a] = LLVMBuildSub(B, LLVMBuildSub(B, cg_dim(cg, rt->dims[a]), cg_i64(cg, 1), ""), idx[a], "");
        }
        return elem(k, op->in[0], xi);
    }
    case OP_CONCAT: {
        int axis = (int)op_attr_int(op, "axis", 0);
        if (op == k->piece_op && idx[axis] == k->piece_var) { /* one operand's piece of the inner loop */
            memcpy(xi, idx, (size_t)rt->rank * sizeof *xi);
            xi[axis] = LLVMBuildSub(B, idx[axis], k->piece_start, "");
            if (!k->piece_base)
                return elem(k, op->in[k->piece], xi);
            const Type *xt = &op->in[k->piece]->type;
            LLVMValueRef off = kern_offset(k, xt, xi);
            return cg_load(cg, xt->dtype, LLVMBuildGEP2(B, cg_storage_type(cg, xt->dtype), k->piece_base, &off, 1, ""));
        }
        LLVMValueRef r = NULL, start = cg_i64(cg, 0);
        for (int i = 0; i < op->nin; i++) {
            const Type *xt = &op->in[i]->type;
            LLVMValueRef n = cg_dim(cg, xt->dims[axis]);
            memcpy(xi, idx, (size_t)rt->rank * sizeof *xi);
            LLVMValueRef local = LLVMBuildSub(B, idx[axis], start, "");
            xi[axis] = clamp(k, local, n);
            LLVMValueRef x = elem(k, op->in[i], xi);
            if (!r) {
                r = x;
            } else {
                LLVMValueRef here = LLVMBuildICmp(B, LLVMIntSGE, idx[axis], start, "");
                r = LLVMBuildSelect(B, here, x, r, "");
            }
            start = LLVMBuildAdd(B, start, n, "");
        }
        return r;
    }
    case OP_PAD: {
        const Attr *lo = op_attr(op, "low");
        const char *mode = op_attr_str(op, "mode", "constant");
        const Type *xt = &op->in[0]->type;
        LLVMValueRef inside = LLVMConstInt(cg->t_i1, 1, false);
        for (int i = 0; i < rt->rank; i++) {
            LLVMValueRef n = cg_dim(cg, xt->dims[i]);
            LLVMValueRef j = LLVMBuildSub(B, idx[i], cg_dim(cg, lo->dims[i]), "");
            LLVMValueRef ok = LLVMBuildAnd(B, LLVMBuildICmp(B, LLVMIntSGE, j, cg_i64(cg, 0), ""),
                                           LLVMBuildICmp(B, LLVMIntSLT, j, n, ""), "");
            inside = LLVMBuildAnd(B, inside, ok, "");
            if (!strcmp(mode, "reflect")) {
                /* mirror without repeating the edge: period 2(n-1) */
                LLVMValueRef per = LLVMBuildMul(B, LLVMBuildSub(B, n, cg_i64(cg, 1), ""), cg_i64(cg, 2), "");
                LLVMValueRef p1 = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, per, cg_i64(cg, 1), ""),
                                                  cg_i64(cg, 1), per, "");
                LLVMValueRef m = LLVMBuildSub(B, j, LLVMBuildMul(B, p1, cg_floordiv(cg, B, j, p1), ""), "");
                LLVMValueRef past = LLVMBuildICmp(B, LLVMIntSGE, m, n, "");
                j = LLVMBuildSelect(B, past, LLVMBuildSub(B, p1, m, ""), m, "");
            } else if (!strcmp(mode, "wrap")) {
                /* periodic: floor-mod by n (n >= 1 whenever it is read) */
                LLVMValueRef n1 = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, n, cg_i64(cg, 1), ""),
                                                  cg_i64(cg, 1), n, "");
                j = LLVMBuildSub(B, j, LLVMBuildMul(B, n1, cg_floordiv(cg, B, j, n1), ""), "");
            }
            xi[i] = clamp(k, j, n);
        }
        LLVMValueRef x = elem(k, op->in[0], xi);
        if (strcmp(mode, "constant") != 0)
            return x;
        LLVMValueRef pv = elem(k, op->in[1], NULL);
        return LLVMBuildSelect(B, inside, x, pv, "");
    }
    case OP_IOTA: {
        int axis = (int)op_attr_int(op, "axis", 0);
        return kern_convert(k, idx[axis], DT_I64, dt);
    }
    case OP_RESIZE:
        if (!resize_is_map(op))
            return resize_lerp(k, op, idx);
        for (int i = 0; i < rt->rank; i++) /* nearest, integer scales */
            xi[i] = resize_source(k, op, i, idx[i]);
        return elem(k, op->in[0], xi);
    case OP_GATHER: {
        int axis = (int)op_attr_int(op, "axis", 0);
        Value *x = op->in[0], *ind = op->in[1];
        int q = ind->type.rank;
        LLVMValueRef ii[MAX_RANK];
        for (int i = 0; i < q; i++)
            ii[i] = idx[axis + i];
        LLVMValueRef j = index_value(k, elem(k, ind, ii), ind->type.dtype, x->type.dims[axis]);
        int n = 0;
        for (int i = 0; i < axis; i++)
            xi[n++] = idx[i];
        xi[n++] = j;
        for (int i = axis + q; i < rt->rank; i++)
            xi[n++] = idx[i];
        return elem(k, x, xi);
    }
    case OP_GATHER_ELEMENTS: {
        int axis = (int)op_attr_int(op, "axis", 0);
        Value *x = op->in[0], *ind = op->in[1];
        LLVMValueRef j = index_value(k, elem(k, ind, idx), ind->type.dtype, x->type.dims[axis]);
        memcpy(xi, idx, (size_t)rt->rank * sizeof *xi);
        xi[axis] = j;
        return elem(k, x, xi);
    }
    case OP_SHAPE_CONST: {
        const Attr *dims = op_attr(op, "dims");
        LLVMValueRef vals[MAX_RANK * 4];
        for (int i = 0; i < dims->n && i < MAX_RANK * 4; i++)
            vals[i] = cg_dim(cg, dims->dims[i]);
        return rt->rank == 0 ? vals[0] : pick(k, vals, dims->n, idx[0]);
    }
    case OP_DIM:
        return cg_dim(cg, op->in[0]->type.dims[op_attr_int(op, "axis", 0)]);
    case OP_SHAPE_OF: {
        const Type *xt = &op->in[0]->type;
        LLVMValueRef vals[MAX_RANK];
        for (int i = 0; i < xt->rank; i++)
            vals[i] = cg_dim(cg, xt->dims[i]);
        return pick(k, vals, xt->rank, idx[0]);
    }
    default:
        return NULL;
    }
}

/* Whether every index of idx is the same for the whole inner loop of a
 * loop kernel (Kern.hoist): a constant, or computed in one of Kern.inv's
 * blocks, which dominate the inner loop. */
static bool row_invariant(Kern *k, LLVMValueRef *idx, int rank)
{
    if (!k->hoist || rank == 0)
        return false;
    for (int i = 0; i < rank; i++) {
        if (LLVMIsConstant(idx[i]))
            continue;
        if (!LLVMIsAInstruction(idx[i]))
            return false;
        LLVMBasicBlockRef bb = LLVMGetInstructionParent(idx[i]);
        if (bb != k->inv[0] && bb != k->inv[1] && bb != k->inv[2] && bb != k->inv[3] && bb != k->inv[4])
            return false;
    }
    return true;
}

/* The load of v at a row-invariant idx, emitted before the inner loop
 * (idx an index of t, v's type or one of its reshapes). */
static LLVMValueRef hoisted_load_as(Kern *k, Value *v, const Type *t, LLVMValueRef base, LLVMValueRef *idx)
{
    Cg *cg = k->cg;
    LLVMBasicBlockRef here = LLVMGetInsertBlock(B);
    LLVMPositionBuilderBefore(B, LLVMGetBasicBlockTerminator(k->hoist));
    LLVMValueRef off = kern_offset(k, t, idx);
    LLVMValueRef p = LLVMBuildGEP2(B, cg_storage_type(cg, v->type.dtype), base, &off, 1, "");
    LLVMValueRef r = cg_load(cg, v->type.dtype, p);
    LLVMPositionBuilderAtEnd(B, here);
    return r;
}

/* Whether v is read from a buffer of the kernel, as stored: not computed
 * in the group, not a constant's literal, not a bound reduction. */
static bool in_buffer(Kern *k, const Value *v)
{
    for (int i = 0; i < k->nr; i++)
        if (k->rv[i] == v)
            return false;
    if (v == k->subst || kern_in_group(k, v) || (v->def && v->def->kind == OP_CONST) || !kern_buf(k, (Value *)v))
        return false;
    size_t n;
    return !(type_static_numel(&v->type, &n) && n == 1);
}

/* v's element at idx, an index of t, a reshape of v: the same offset in
 * row-major order, with no index of v's own to split out. */
static LLVMValueRef load_as(Kern *k, Value *v, const Type *t, LLVMValueRef *idx)
{
    Cg *cg = k->cg;
    LLVMValueRef base = kern_buf(k, v);
    if (row_invariant(k, idx, t->rank))
        return hoisted_load_as(k, v, t, base, idx);
    LLVMValueRef off = kern_offset(k, t, idx);
    return cg_load(cg, v->type.dtype, LLVMBuildGEP2(B, cg_storage_type(cg, v->type.dtype), base, &off, 1, ""));
}

/* The load of v at a row-invariant idx, emitted before the inner loop. */
static LLVMValueRef hoisted_load(Kern *k, Value *v, LLVMValueRef base, LLVMValueRef *idx)
{
    return hoisted_load_as(k, v, &v->type, base, idx);
}

LLVMValueRef elem(Kern *k, Value *v, LLVMValueRef *idx)
{
    Cg *cg = k->cg;
    for (int i = 0; i < k->nr; i++)
        if (k->rv[i] == v)
            return k->rval[i];
    if (v == k->subst) { /* stored in the stitch output already (kernel.c) */
        LLVMValueRef off = kern_offset(k, &v->type, idx);
        return cg_load(cg, v->type.dtype, LLVMBuildGEP2(cg->b, cg_storage_type(cg, v->type.dtype),
                                                         kern_buf(k, k->cache_out), &off, 1, ""));
    }
    if (kern_in_group(k, v)) {
        LLVMValueRef r = op_elem(k, v->def, v, idx);
        if (!r)
            diag_set(cg->d, "codegen: op '%s' cannot be emitted in a %s kernel", op_info(v->def->kind)->name,
                     fuse_kind_name(k->grp->kind));
        return r ? r : LLVMGetUndef(cg_compute_type(cg, v->type.dtype));
    }
    if (v->def && v->def->kind == OP_CONST) {
        LLVMValueRef c = const_elem(k, v->def, idx);
        if (c)
            return c;
    }
    LLVMValueRef base = kern_buf(k, v);
    if (!base) {
        diag_set(cg->d, "codegen: a value has no buffer in its kernel");
        return LLVMGetUndef(cg_compute_type(cg, v->type.dtype));
    }
    size_t n = 0;
    LLVMValueRef off;
    if (type_static_numel(&v->type, &n) && n == 1)
        off = cg_i64(cg, 0);
    else if (k->flat)
        off = k->flat;
    else if (row_invariant(k, idx, v->type.rank))
        return hoisted_load(k, v, base, idx);
    else
        off = kern_offset(k, &v->type, idx);
    LLVMValueRef p = LLVMBuildGEP2(B, cg_storage_type(cg, v->type.dtype), base, &off, 1, "");
    return cg_load(cg, v->type.dtype, p);
}

/* ---- rows of elements as vectors ------------------------------------ */

/* elem_vec emits k->vw consecutive elements of a value along one axis of
 * its index at once, as vectors: a row kernel's passes (kernel.c) took
 * them lane by lane for LLVM's SLP vectoriser, 32 copies of the element's
 * computation a loop (a softmax's exp 369 scalar fmuladds), and the
 * optimiser spent most of a transformer's compile time on them. It takes
 * what a softmax or a normalisation holds: f32 arithmetic, comparisons and
 * selects, conversions to f32, the index maps that keep the lanes' axis
 * (broadcasts, transposes, reshapes that keep it, unit-stride slices), and
 * loads along a buffer's last axis; kern_vec_ok says whether a value is
 * all of that, and the caller goes lane by lane where it is not. */

/* The axis of operand x's index along which the lanes run, when an op of
 * result type rt reads it with implicit broadcasting (bcast_index) and
 * its lanes run along rt's axis lax: -1 where x has no such axis or it is
 * 1 (one element for every lane), -2 where it may be 1 at run time (a
 * select per index: not taken). */
static int lane_of(Kern *k, Dim *xd, Dim *rd, int j)
{
    int how = bcast_dim(k, xd, rd);
    return how == BC_PASS ? j : how == BC_ZERO ? -1 : -2;
}

static int bcast_lane(Kern *k, const Type *xt, const Type *rt, int lax)
{
    int j = lax - (rt->rank - xt->rank);
    return lax < 0 || j < 0 ? -1 : lane_of(k, xt->dims[j], rt->dims[lax], j);
}

/* The lanes' axis in the operand of a reshape, broadcast, transpose or
 * slice op with result v (lanes along lax), as bcast_lane; -2 for any
 * other op. */
static int map_lane(Kern *k, const Op *op, const Value *v, int lax)
{
    const Type *rt = &v->type, *xt = &op->in[0]->type;
    if (lax < 0)
        return -1;
    switch (op->kind) {
    case OP_RESHAPE:
    case OP_DYN_RESHAPE: { /* the dims the two share pass through (reshape_index) */
        int lead, tail;
        reshape_runs(xt, rt, &lead, &tail);
        if (lax < lead)
            return lax;
        return lax >= rt->rank - tail ? xt->rank - (rt->rank - lax) : -2;
    }
    case OP_BROADCAST:
    case OP_DYN_BROADCAST: {
        const Attr *axes = op_attr(op, "axes");
        for (int i = 0; i < xt->rank; i++)
            if (axes->ints[i] == lax)
                return lane_of(k, xt->dims[i], rt->dims[lax], i);
        return -1;
    }
    case OP_TRANSPOSE: {
        const Attr *perm = op_attr(op, "perm");
        return (int)perm->ints[lax];
    }
    case OP_SLICE:
        return op_attr(op, "stride")->ints[lax] == 1 ? lax : -2;
    default:
        return -2;
    }
}

/* v is a constant of one element (const_elem's LLVM constant) */
static bool scalar_const(const Value *v)
{
    size_t n;
    const Op *op = v->def;
    return op && op->kind == OP_CONST && op->cst && op->cst->data && type_static_numel(&v->type, &n) && n == 1;
}

static bool vec_dtype(DType dt)
{
    return dt == DT_F32 || dt == DT_I32 || dt == DT_I64 || dt == DT_BOOL;
}

static bool vec_unary(OpKind op)
{
    switch (op_unary(op)) {
    case UN_NEG: case UN_ABS: case UN_EXP: case UN_SQRT: case UN_RSQRT: case UN_RECIP:
    case UN_TANH: case UN_ERF: case UN_SIGMOID: case UN_FLOOR: case UN_CEIL: case UN_ROUND:
        return true;
    default:
        return false;
    }
}

static bool vec_binary(OpKind op)
{
    BinaryOp o = op_binary(op);
    return o == BIN_ADD || o == BIN_SUB || o == BIN_MUL || o == BIN_DIV || o == BIN_MAX || o == BIN_MIN;
}

/* Whether v's elements along lax (-1: none, one element for every lane)
 * can be emitted as vectors by elem_vec; budget bounds the walk. */
static bool vec_ok(Kern *k, Value *v, int lax, int *budget)
{
    if (--*budget < 0 || lax == -2)
        return false;
    if (lax == -1 || is_row_value(k, v))
        return true; /* a scalar, splat */
    if (v == k->subst)
        return v->type.dtype == DT_F32 && lax == v->type.rank - 1;
    const Op *op = v->def;
    if (scalar_const(v))
        return vec_dtype(v->type.dtype);
    if (!kern_in_group(k, v) || op->kind == OP_CONST) /* a buffer */
        return vec_dtype(v->type.dtype) && lax == v->type.rank - 1 && kern_buf(k, v);
    const Type *rt = &v->type;
    DType dt = rt->dtype, xd = op->nin ? op->in[0]->type.dtype : dt;
    const OpInfo *info = op_info(op->kind);
    if (info->cat == CAT_UNARY)
        return dt == DT_F32 && xd == DT_F32 && vec_unary(op->kind) &&
               vec_ok(k, op->in[0], bcast_lane(k, &op->in[0]->type, rt, lax), budget);
    if (info->cat == CAT_BINARY)
        return dt == DT_F32 && xd == DT_F32 && op->in[1]->type.dtype == DT_F32 && vec_binary(op->kind) &&
               vec_ok(k, op->in[0], bcast_lane(k, &op->in[0]->type, rt, lax), budget) &&
               vec_ok(k, op->in[1], bcast_lane(k, &op->in[1]->type, rt, lax), budget);
    switch (op->kind) {
    case OP_CMP:
        return vec_dtype(xd) && xd != DT_BOOL && vec_ok(k, op->in[0], bcast_lane(k, &op->in[0]->type, rt, lax), budget) &&
               vec_ok(k, op->in[1], bcast_lane(k, &op->in[1]->type, rt, lax), budget);
    case OP_SELECT:
        return (dt == DT_F32 || dt == DT_BOOL) && xd == DT_BOOL &&
               vec_ok(k, op->in[0], bcast_lane(k, &op->in[0]->type, rt, lax), budget) &&
               vec_ok(k, op->in[1], bcast_lane(k, &op->in[1]->type, rt, lax), budget) &&
               vec_ok(k, op->in[2], bcast_lane(k, &op->in[2]->type, rt, lax), budget);
    case OP_CONVERT:
        return dt == DT_F32 && vec_dtype(xd) && vec_ok(k, op->in[0], bcast_lane(k, &op->in[0]->type, rt, lax), budget);
    default:
        return vec_ok(k, op->in[0], map_lane(k, op, v, lax), budget);
    }
}

bool kern_vec_ok(Kern *k, Value *v, int lax)
{
    int budget = 256;
    return !k->flat && k->vw == 0 && vec_ok(k, v, lax, &budget);
}

/* k->vw elements of v of dtype dt from base at off, off + 1, ... */
static LLVMValueRef load_vec(Kern *k, DType dt, LLVMValueRef base, LLVMValueRef off)
{
    LLVMTypeRef st = cg_storage_type(k->cg, dt), vt = LLVMVectorType(st, (unsigned)k->vw);
    LLVMValueRef p = LLVMBuildGEP2(B, st, base, &off, 1, "");
    LLVMValueRef v = LLVMBuildLoad2(B, vt, LLVMBuildBitCast(B, p, LLVMPointerType(vt, 0), ""), "");
    LLVMSetAlignment(v, (unsigned)dtype_size(dt));
    return dt == DT_BOOL ? LLVMBuildICmp(B, LLVMIntNE, v, LLVMConstNull(vt), "") : v;
}

static LLVMValueRef vec_at(Kern *k, Value *v, LLVMValueRef *idx, int lax);

static LLVMValueRef vec_operand(Kern *k, Value *x, const Type *rt, LLVMValueRef *idx, int lax)
{
    LLVMValueRef xi[MAX_RANK];
    bcast_index(k, &x->type, rt, idx, xi);
    return vec_at(k, x, xi, bcast_lane(k, &x->type, rt, lax));
}

static LLVMValueRef vec_op(Kern *k, Op *op, Value *v, LLVMValueRef *idx, int lax)
{
    const Type *rt = &v->type;
    const OpInfo *info = op_info(op->kind);
    LLVMValueRef xi[MAX_RANK];
    if (info->cat == CAT_UNARY) {
        LLVMValueRef x = vec_operand(k, op->in[0], rt, idx, lax);
        if (op->kind == OP_EXP && minus_max(op->in[0]))
            return exp_nonpositive(k, x);
        return kern_unary(k, op->kind, DT_F32, x);
    }
    if (info->cat == CAT_BINARY) {
        if (op->kind == OP_DIV && is_row_value(k, op->in[1]))
            return kern_div_invariant(k, vec_operand(k, op->in[0], rt, idx, lax), elem(k, op->in[1], NULL));
        LLVMValueRef a = vec_operand(k, op->in[0], rt, idx, lax), b = vec_operand(k, op->in[1], rt, idx, lax);
        return kern_binary(k, op->kind, DT_F32, a, b);
    }
    switch (op->kind) {
    case OP_CMP: {
        LLVMValueRef a = vec_operand(k, op->in[0], rt, idx, lax), b = vec_operand(k, op->in[1], rt, idx, lax);
        return compare(k, op_attr_str(op, "dir", "eq"), op->in[0]->type.dtype, a, b);
    }
    case OP_SELECT: {
        LLVMValueRef c = vec_operand(k, op->in[0], rt, idx, lax);
        LLVMValueRef a = vec_operand(k, op->in[1], rt, idx, lax), b = vec_operand(k, op->in[2], rt, idx, lax);
        return LLVMBuildSelect(B, c, a, b, "");
    }
    case OP_CONVERT: {
        DType from = op->in[0]->type.dtype;
        LLVMValueRef x = vec_operand(k, op->in[0], rt, idx, lax);
        LLVMTypeRef vt = kt(k, k->cg->t_f32);
        if (from == DT_F32)
            return x;
        return from == DT_BOOL ? LLVMBuildUIToFP(B, x, vt, "") : LLVMBuildSIToFP(B, x, vt, "");
    }
    default: /* a reshape, broadcast, transpose or slice: the scalar index map (op_elem) */
        break;
    }
    Value *x = op->in[0];
    if (op->kind == OP_RESHAPE || op->kind == OP_DYN_RESHAPE)
        reshape_index(k, &x->type, rt, idx, xi);
    else
        map_index(k, op, rt, idx, xi);
    return vec_at(k, x, xi, map_lane(k, op, v, lax));
}

static LLVMValueRef vec_at(Kern *k, Value *v, LLVMValueRef *idx, int lax)
{
    if (lax < 0 || is_row_value(k, v) || scalar_const(v)) { /* one element for every lane */
        int vw = k->vw;
        k->vw = 0;
        LLVMValueRef x = elem(k, v, idx);
        k->vw = vw;
        return splat(k, x);
    }
    if (v == k->subst)
        return load_vec(k, DT_F32, kern_buf(k, k->cache_out), kern_offset(k, &v->type, idx));
    if (kern_in_group(k, v) && v->def->kind != OP_CONST)
        return vec_op(k, v->def, v, idx, lax);
    return load_vec(k, v->type.dtype, kern_buf(k, v), kern_offset(k, &v->type, idx));
}

LLVMValueRef elem_vec(Kern *k, Value *v, LLVMValueRef *idx, int lax, int w)
{
    k->vw = w;
    LLVMValueRef r = vec_at(k, v, idx, lax);
    k->vw = 0;
    return r;
}
