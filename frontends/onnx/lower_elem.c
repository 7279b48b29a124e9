/*
 * lower_elem.c — elementwise ONNX ops: arithmetic, comparisons, logic,
 * casts, and activations written as compositions of core elementwise ops
 * (Relu = max(x, 0), Gelu = 0.5 x (1 + erf(x / sqrt 2)), ...).
 */
#include "frontends/onnx/internal.h"

#include <math.h>
#include <string.h>

#define X0 IN(0)

static bool need1(Imp *im) { return imp_need(im, 0) != NULL; }

static Value *fold_shape_arith(Imp *im, OpKind k, Value *a, Value *b);

bool onnx_lower_unary(Imp *im)
{
    if (!need1(im))
        return false;
    Value *y = NULL;
    if (im->arg == OP_NEG && vdt(X0) == DT_I64 && vrank(X0) <= 1 && X0->def &&
        (X0->def->kind == OP_SHAPE_CONST || X0->def->kind == OP_CONST))
        y = fold_shape_arith(im, OP_SUB, imp_scalar(im, DT_I64, 0), X0);
    if (!y)
        y = imp_un(im, (OpKind)im->arg, X0);
    if (im->arg == OP_ISINF) { /* IsInf can select one sign */
        int64_t neg, pos;
        if (!attr_int(im, "detect_negative", 1, &neg) || !attr_int(im, "detect_positive", 1, &pos))
            return false;
        if (!neg || !pos) {
            Value *sign = imp_cmp(im, pos ? "gt" : "lt", X0, imp_scalar(im, vdt(X0), 0));
            y = neg || pos ? imp_bin(im, OP_AND, y, sign) : imp_bin(im, OP_AND, y, imp_un(im, OP_NOT, y));
        }
    }
    return imp_done(im, y);
}

static Value *pow_(Imp *im, Value *a, Value *b)
{
    double e;
    if (imp_const_scalar(im, b, &e)) {
        if (e == 1)
            return a;
        if (e == 2)
            return imp_bin(im, OP_MUL, a, a);
        if (e == 0.5 && dtype_is_float(vdt(a)))
            return imp_un(im, OP_SQRT, a);
    }
    if (dtype_is_float(vdt(a)))
        return imp_bin(im, OP_POW, a, imp_cvt(im, b, vdt(a)));
    /* integer base: compute in f64 and round back */
    Value *r = imp_bin(im, OP_POW, imp_cvt(im, a, DT_F64), imp_cvt(im, b, DT_F64));
    return imp_cvt(im, imp_un(im, OP_ROUND, r), vdt(a));
}

/* The entries of an i64 shape value (shape_const, or a small integer
 * constant) of rank <= 1 as dims; false if v is not one. */
static bool shape_dims(Imp *im, Value *v, Dim **dims, int *n)
{
    int64_t *c;
    if (vdt(v) != DT_I64 || vrank(v) > 1)
        return false;
    if (v->def && v->def->kind == OP_SHAPE_CONST) {
        const Attr *a = op_attr(v->def, "dims");
        if (!a || a->n > MAX_RANK)
            return false;
        for (int i = 0; i < a->n; i++)
            dims[i] = a->dims[i];
        *n = a->n;
        return true;
    }
    if (!imp_const_ints(im, v, &c, n) || *n > MAX_RANK)
        return false;
    for (int i = 0; i < *n; i++)
        dims[i] = dim_const(&im->g->dims, c[i]);
    return true;
}

/* Add, Sub, Mul of i64 shape values fold into a shape_const, so that a
 * rank computed from Shape and Size (LayerNorm's expansion) stays static. */
static Value *fold_shape_arith(Imp *im, OpKind k, Value *a, Value *b)
{
    Dim *da[MAX_RANK], *db[MAX_RANK], *r[MAX_RANK];
    int na, nb;
    if ((k != OP_ADD && k != OP_SUB && k != OP_MUL) || !shape_dims(im, a, da, &na) ||
        !shape_dims(im, b, db, &nb) || (na != nb && na != 1 && nb != 1))
        return NULL;
    int n = na > nb ? na : nb;
    DimCtx *cx = &im->g->dims;
    for (int i = 0; i < n; i++) {
        Dim *x = da[na == 1 ? 0 : i], *y = db[nb == 1 ? 0 : i];
        r[i] = k == OP_ADD ? dim_add(cx, x, y) : k == OP_SUB ? dim_sub(cx, x, y) : dim_mul(cx, x, y);
        if (!r[i])
            return NULL;
    }
    AttrList l = {0};
    attrs_add_dims(im->g, &l, "dims", r, n);
    if (vrank(a) == 0 && vrank(b) == 0)
        attrs_add_int(im->g, &l, "scalar", 1);
    Op *op = build_op(im->g, OP_SHAPE_CONST, NULL, 0, l.v, l.n);
    return op ? op->out[0] : NULL;
}

bool onnx_lower_binary(Imp *im)
{
    Value *a = imp_need(im, 0), *b = imp_need(im, 1);
    if (!a || !b)
        return false;
    if (im->arg == OP_POW)
        return imp_done(im, pow_(im, a, b));
    if (vdt(a) != vdt(b))
        return imp_err(im, "operand types differ: %s and %s", dtype_name(vdt(a)),
                       dtype_name(vdt(b)));
    Value *f = fold_shape_arith(im, (OpKind)im->arg, a, b);
    return imp_done(im, f ? f : imp_bin(im, (OpKind)im->arg, a, b));
}

bool onnx_lower_mod(Imp *im)
{
    Value *a = imp_need(im, 0), *b = imp_need(im, 1);
    int64_t fmod;
    if (!a || !b || !attr_int(im, "fmod", 0, &fmod))
        return false;
    if (!fmod && dtype_is_float(vdt(a)))
        return imp_err(im, "Mod of floating-point operands needs fmod=1");
    return imp_done(im, imp_bin(im, fmod ? OP_REM : OP_MOD, a, b));
}

bool onnx_lower_cmp(Imp *im)
{
    static const char *dirs[] = {"eq", "ne", "lt", "le", "gt", "ge"};
    Value *a = imp_need(im, 0), *b = imp_need(im, 1);
    if (!a || !b)
        return false;
    return imp_done(im, imp_cmp(im, dirs[im->arg], a, b));
}

bool onnx_lower_variadic(Imp *im)
{
    if (!need1(im))
        return false;
    Value *acc = X0;
    for (int i = 1; i < im->nin; i++) {
        if (!IN(i))
            return imp_err(im, "input %d is empty", i);
        acc = imp_bin(im, (OpKind)im->arg, acc, IN(i));
    }
    return imp_done(im, acc);
}

bool onnx_lower_mean(Imp *im)
{
    im->arg = OP_ADD;
    if (!onnx_lower_variadic(im))
        return false;
    if (im->nin > 1)
        im->out[0] = imp_binc(im, OP_DIV, im->out[0], im->nin);
    return imp_done(im, im->out[0]);
}

bool onnx_lower_where(Imp *im)
{
    Value *c = imp_need(im, 0), *a = imp_need(im, 1), *b = imp_need(im, 2);
    if (!c || !a || !b)
        return false;
    return imp_done(im, imp_sel(im, c, a, b));
}

bool onnx_lower_cast(Imp *im)
{
    int64_t to;
    if (!need1(im) || !attr_int(im, "to", 0, &to))
        return false;
    DType dt = onnx_dtype((int32_t)to);
    if (dt == DT_INVALID)
        return imp_errk(im, DIAG_UNSUPPORTED, "cast to %s is not supported", onnx_type_name((int32_t)to));
    return imp_done(im, imp_cvt(im, X0, dt));
}

bool onnx_lower_cast_like(Imp *im)
{
    Value *x = imp_need(im, 0), *like = imp_need(im, 1);
    if (!x || !like)
        return false;
    return imp_done(im, imp_cvt(im, x, vdt(like)));
}

bool onnx_lower_identity(Imp *im)
{
    if (!need1(im))
        return false;
    return imp_done(im, X0);
}

/* One mixing round of the dropout hash on i64 (wrapping mul, xor with the
 * high part shifted down by a signed division). */
static Value *drop_mix(Imp *im, Value *h)
{
    h = imp_binc(im, OP_MUL, h, 2654435761.0);
    h = imp_bin(im, OP_XOR, h, imp_binc(im, OP_DIV, h, 2147483648.0));
    h = imp_binc(im, OP_MUL, h, 2246822519.0);
    return imp_bin(im, OP_XOR, h, imp_binc(im, OP_DIV, h, 536870912.0));
}

/* Inference (training_mode false or absent): y = x, mask all true.
 * Training (training_mode true or a run-time input): keep = u >= ratio with
 * u in [0, 1) a deterministic hash of seed and the element's index, y =
 * keep ? x / (1 - ratio) : 0. With ratio 0 (or training false at run time)
 * every element is kept and y = x exactly. */
bool onnx_lower_dropout(Imp *im)
{
    int64_t training = 0, seed;
    bool dyn = false;
    if (!need1(im) || !attr_int(im, "seed", 0, &seed))
        return false;
    if (IN(2)) {
        double t;
        if (imp_const_scalar(im, IN(2), &t))
            training = t != 0;
        else
            dyn = true;
    }
    bool want_mask = im->nout > 1 && im->node->output[1] && *im->node->output[1];
    if (!training && !dyn) {
        if (want_mask) {
            /* the mask: all true */
            Value *t = imp_scalar(im, DT_BOOL, 1);
            im->out[1] = imp_broadcast_to(im, t, vdims(X0), vrank(X0));
            if (!im->out[1])
                return imp_fail(im);
        }
        return imp_done(im, X0);
    }
    int r = vrank(X0);
    Dim *none[1] = {NULL};
    Value *ratio = IN(1) ? imp_cvt(im, IN(1), DT_F64) : imp_scalar(im, DT_F64, 0.5);
    if (ratio && ratio->type.rank != 0) {
        size_t one;
        if (!type_static_numel(&ratio->type, &one) || one != 1)
            return imp_err(im, "ratio must be a scalar");
        ratio = imp_reshape(im, ratio, none, 0);
    }
    Value *h = imp_scalar(im, DT_I64, (double)(seed & 0xffffffff));
    for (int a = 0; a < r; a++)
        h = drop_mix(im, imp_bin(im, OP_ADD, h, build_iota(im->g, DT_I64, vdims(X0), r, a)));
    if (r == 0)
        h = drop_mix(im, h);
    /* u = (h mod 2^24) / 2^24 */
    Value *u = imp_binc(im, OP_MUL, imp_cvt(im, imp_binc(im, OP_MOD, h, 16777216.0), DT_F64),
                        1.0 / 16777216.0);
    Value *keep = imp_cmp(im, "ge", u, ratio);
    Value *scale = imp_bin(im, OP_DIV, imp_scalar(im, DT_F64, 1),
                           imp_bin(im, OP_SUB, imp_scalar(im, DT_F64, 1), ratio));
    if (dyn) {
        Value *t = vdt(IN(2)) == DT_BOOL ? IN(2) : imp_cmp(im, "ne", IN(2), imp_scalar(im, vdt(IN(2)), 0));
        if (t && t->type.rank != 0)
            t = imp_reshape(im, t, none, 0);
        keep = imp_bin(im, OP_OR, keep, imp_un(im, OP_NOT, t));
        scale = imp_sel(im, t, scale, imp_scalar(im, DT_F64, 1));
    }
    Value *y = imp_bin(im, OP_MUL, X0, imp_cvt(im, scale, vdt(X0)));
    y = imp_sel(im, keep, y, imp_scalar(im, vdt(X0), 0));
    if (want_mask) {
        im->out[1] = keep;
        if (!keep)
            return imp_fail(im);
    }
    return imp_done(im, y);
}

/* ---- activations ---- */

bool onnx_lower_relu(Imp *im)
{
    if (!need1(im))
        return false;
    return imp_done(im, imp_binc(im, OP_MAX, X0, 0));
}

/* select(x < 0, neg, x) */
static Value *where_neg(Imp *im, Value *x, Value *neg)
{
    return imp_sel(im, imp_cmp(im, "lt", x, imp_scalar(im, vdt(x), 0)), neg, x);
}

bool onnx_lower_leaky_relu(Imp *im)
{
    double alpha;
    if (!need1(im) || !attr_float(im, "alpha", 0.01, &alpha))
        return false;
    return imp_done(im, where_neg(im, X0, imp_binc(im, OP_MUL, X0, alpha)));
}

bool onnx_lower_prelu(Imp *im)
{
    Value *x = imp_need(im, 0), *slope = imp_need(im, 1);
    if (!x || !slope)
        return false;
    return imp_done(im, where_neg(im, x, imp_bin(im, OP_MUL, x, slope)));
}

/* alpha * (exp(x) - 1) */
static Value *expm1_scaled(Imp *im, Value *x, double alpha)
{
    return imp_binc(im, OP_MUL, imp_binc(im, OP_SUB, imp_un(im, OP_EXP, x), 1), alpha);
}

bool onnx_lower_elu(Imp *im)
{
    double alpha;
    if (!need1(im) || !attr_float(im, "alpha", 1.0, &alpha))
        return false;
    return imp_done(im, where_neg(im, X0, expm1_scaled(im, X0, alpha)));
}

bool onnx_lower_celu(Imp *im)
{
    double alpha;
    if (!need1(im) || !attr_float(im, "alpha", 1.0, &alpha))
        return false;
    if (alpha == 0)
        return imp_err(im, "alpha must not be 0");
    Value *x = X0;
    Value *neg = expm1_scaled(im, imp_binc(im, OP_DIV, x, alpha), alpha);
    return imp_done(im, imp_bin(im, OP_ADD, imp_binc(im, OP_MAX, x, 0), imp_binc(im, OP_MIN, neg, 0)));
}

bool onnx_lower_selu(Imp *im)
{
    double alpha, gamma;
    if (!need1(im) || !attr_float(im, "alpha", 1.67326319217681884765625, &alpha) ||
        !attr_float(im, "gamma", 1.05070102214050292968750, &gamma))
        return false;
    Value *x = X0;
    Value *neg = expm1_scaled(im, x, alpha);
    Value *le = imp_cmp(im, "le", x, imp_scalar(im, vdt(x), 0));
    return imp_done(im, imp_binc(im, OP_MUL, imp_sel(im, le, neg, x), gamma));
}

bool onnx_lower_thrtanh(Imp *im) /* ThresholdedRelu */
{
    double alpha;
    if (!need1(im) || !attr_float(im, "alpha", 1.0, &alpha))
        return false;
    Value *x = X0;
    Value *gt = imp_cmp(im, "gt", x, imp_scalar(im, vdt(x), alpha));
    return imp_done(im, imp_sel(im, gt, x, imp_scalar(im, vdt(x), 0)));
}

bool onnx_lower_gelu(Imp *im)
{
    const char *approx;
    if (!need1(im) || !attr_str(im, "approximate", "none", &approx))
        return false;
    Value *x = X0, *inner;
    if (!strcmp(approx, "tanh")) {
        /* tanh(sqrt(2/pi) * (x + 0.044715 x^3)) */
        Value *x3 = imp_bin(im, OP_MUL, imp_bin(im, OP_MUL, x, x), x);
        Value *t = imp_bin(im, OP_ADD, x, imp_binc(im, OP_MUL, x3, 0.044715));
        inner = imp_un(im, OP_TANH, imp_binc(im, OP_MUL, t, sqrt(2 / M_PI)));
    } else if (!strcmp(approx, "none")) {
        inner = imp_un(im, OP_ERF, imp_binc(im, OP_MUL, x, M_SQRT1_2));
    } else {
        return imp_err(im, "approximate must be \"none\" or \"tanh\", not \"%s\"", approx);
    }
    Value *half = imp_binc(im, OP_MUL, x, 0.5);
    return imp_done(im, imp_bin(im, OP_MUL, half, imp_binc(im, OP_ADD, inner, 1)));
}

/* max(0, min(1, alpha x + beta)) */
static Value *hard_sigmoid(Imp *im, Value *x, double alpha, double beta)
{
    Value *t = imp_binc(im, OP_ADD, imp_binc(im, OP_MUL, x, alpha), beta);
    return imp_binc(im, OP_MAX, imp_binc(im, OP_MIN, t, 1), 0);
}

bool onnx_lower_hard_sigmoid(Imp *im)
{
    double alpha, beta;
    if (!need1(im) || !attr_float(im, "alpha", 0.2, &alpha) || !attr_float(im, "beta", 0.5, &beta))
        return false;
    return imp_done(im, hard_sigmoid(im, X0, alpha, beta));
}

bool onnx_lower_hard_swish(Imp *im)
{
    if (!need1(im))
        return false;
    return imp_done(im, imp_bin(im, OP_MUL, X0, hard_sigmoid(im, X0, 1.0 / 6, 0.5)));
}

static Value *softplus(Imp *im, Value *x)
{
    return imp_un(im, OP_LOG, imp_binc(im, OP_ADD, imp_un(im, OP_EXP, x), 1));
}

bool onnx_lower_softplus(Imp *im)
{
    if (!need1(im))
        return false;
    return imp_done(im, softplus(im, X0));
}

bool onnx_lower_softsign(Imp *im)
{
    if (!need1(im))
        return false;
    return imp_done(im, imp_bin(im, OP_DIV, X0, imp_binc(im, OP_ADD, imp_un(im, OP_ABS, X0), 1)));
}

bool onnx_lower_mish(Imp *im)
{
    if (!need1(im))
        return false;
    return imp_done(im, imp_bin(im, OP_MUL, X0, imp_un(im, OP_TANH, softplus(im, X0))));
}

/* A Clip bound: an optional input (opset 11+) or an attribute before. */
static bool clip_bound(Imp *im, int input, const char *attr, double dflt, Value **out)
{
    Value *x = X0;
    *out = NULL;
    if (im->opset >= 11) {
        Value *b = IN(input);
        if (!b)
            return true;
        if (vrank(b) != 0) {
            Dim *none[1] = {NULL};
            b = imp_reshape(im, b, none, 0);
        }
        *out = imp_cvt(im, b, vdt(x));
        return *out || imp_fail(im);
    }
    double v;
    if (!attr_float(im, attr, dflt, &v))
        return false;
    if (!isinf(v))
        *out = imp_scalar(im, vdt(x), v);
    return true;
}

bool onnx_lower_clip(Imp *im)
{
    Value *lo, *hi;
    if (!need1(im) || !clip_bound(im, 1, "min", -INFINITY, &lo) ||
        !clip_bound(im, 2, "max", INFINITY, &hi))
        return false;
    Value *x = X0;
    if (lo)
        x = imp_bin(im, OP_MAX, x, lo);
    if (hi)
        x = imp_bin(im, OP_MIN, x, hi);
    return imp_done(im, x);
}

/* ---- inverse and hyperbolic trigonometry ---- */

/* c - x */
static Value *rsub(Imp *im, double c, Value *x)
{
    return x ? imp_bin(im, OP_SUB, imp_scalar(im, vdt(x), c), x) : NULL;
}

/* Asin, Acos, Sinh, Cosh, Asinh, Acosh, Atanh (im->arg: TRIG_*) from exp,
 * log, sqrt and atan. They compute in f64 and round once to the input's
 * type, so that the cancellations in e^x - e^-x near 0 and in 1 - x near 1
 * stay far below f32's precision:
 *
 *   asin x  = atan(x / sqrt((1 - x)(1 + x)))     (x = +-1: atan(+-inf))
 *   acos x  = 2 atan(sqrt((1 - x) / (1 + x)))    (x = -1: 2 atan(inf) = pi)
 *   sinh x  = (e^x - e^-x) / 2,  cosh x = (e^x + e^-x) / 2
 *   asinh x = sign(x) log(|x| + sqrt(x^2 + 1))   (odd, so no cancellation)
 *   acosh x = log(x + sqrt((x - 1)(x + 1)))
 *   atanh x = log((1 + x) / (1 - x)) / 2
 *
 * Outside the domain the square root or the logarithm of a negative
 * number gives NaN, as the C functions do. */
bool onnx_lower_trig(Imp *im)
{
    if (!need1(im))
        return false;
    DType dt = vdt(X0);
    if (!dtype_is_float(dt))
        return imp_err(im, "needs a floating-point input, not %s", dtype_name(dt));
    Value *x = imp_cvt(im, X0, DT_F64), *y = NULL, *e;
    switch (im->arg) {
    case TRIG_ASIN:
        y = imp_un(im, OP_SQRT, imp_bin(im, OP_MUL, rsub(im, 1, x), imp_binc(im, OP_ADD, x, 1)));
        y = imp_un(im, OP_ATAN, imp_bin(im, OP_DIV, x, y));
        break;
    case TRIG_ACOS:
        y = imp_bin(im, OP_DIV, rsub(im, 1, x), imp_binc(im, OP_ADD, x, 1));
        y = imp_binc(im, OP_MUL, imp_un(im, OP_ATAN, imp_un(im, OP_SQRT, y)), 2);
        break;
    case TRIG_SINH:
    case TRIG_COSH:
        e = imp_un(im, OP_EXP, x);
        y = imp_bin(im, im->arg == TRIG_SINH ? OP_SUB : OP_ADD, e,
                  imp_un(im, OP_RECIP, e));
        y = imp_binc(im, OP_MUL, y, 0.5);
        break;
    case TRIG_ASINH:
        e = imp_un(im, OP_ABS, x);
        y = imp_un(im, OP_SQRT, imp_binc(im, OP_ADD, imp_bin(im, OP_MUL, e, e), 1));
        y = imp_bin(im, OP_MUL, imp_un(im, OP_SIGN, x), imp_un(im, OP_LOG, imp_bin(im, OP_ADD, e, y)));
        break;
    case TRIG_ACOSH:
        y = imp_un(im, OP_SQRT, imp_bin(im, OP_MUL, imp_binc(im, OP_SUB, x, 1), imp_binc(im, OP_ADD, x, 1)));
        y = imp_un(im, OP_LOG, imp_bin(im, OP_ADD, x, y));
        break;
    case TRIG_ATANH:
        y = imp_bin(im, OP_DIV, imp_binc(im, OP_ADD, x, 1), rsub(im, 1, x));
        y = imp_binc(im, OP_MUL, imp_un(im, OP_LOG, y), 0.5);
        break;
    }
    return imp_done(im, imp_cvt(im, y, dt));
}

/* Shrink: x + bias below -lambd, x - bias above lambd, else 0. An integer
 * input computes in f64 and converts back (truncating), as the reference
 * does through numpy. */
bool onnx_lower_shrink(Imp *im)
{
    double lambd, bias;
    if (!need1(im) || !attr_float(im, "lambd", 0.5, &lambd) || !attr_float(im, "bias", 0, &bias))
        return false;
    DType dt = vdt(X0);
    if (dt == DT_BOOL)
        return imp_err(im, "needs a numeric input, not bool");
    Value *x = dtype_is_float(dt) ? X0 : imp_cvt(im, X0, DT_F64);
    Value *lo = imp_cmp(im, "lt", x, imp_scalar(im, vdt(x), -lambd));
    Value *hi = imp_cmp(im, "gt", x, imp_scalar(im, vdt(x), lambd));
    Value *y = imp_sel(im, hi, imp_binc(im, OP_SUB, x, bias), imp_scalar(im, vdt(x), 0));
    y = imp_sel(im, lo, imp_binc(im, OP_ADD, x, bias), y);
    return imp_done(im, imp_cvt(im, y, dt));
}

/* BitShift on unsigned integers: x * 2^s (LEFT, wrapping) or x / 2^s
 * (RIGHT, unsigned division); a shift of the type's width or more gives 0.
 * 2^s is exact in f64 for every s below 64 and converts exactly. */
bool onnx_lower_bit_shift(Imp *im)
{
    Value *x = imp_need(im, 0), *s = imp_need(im, 1);
    const char *dir;
    if (!x || !s || !attr_str(im, "direction", NULL, &dir))
        return false;
    DType dt = vdt(x);
    bool left = dir && !strcmp(dir, "LEFT");
    if (!dir || (!left && strcmp(dir, "RIGHT")))
        return imp_err(im, "direction must be \"LEFT\" or \"RIGHT\"");
    if (dt != DT_U8 && dt != DT_U16 && dt != DT_U32 && dt != DT_U64)
        return imp_errk(im, DIAG_UNSUPPORTED, "BitShift of %s is not supported (only unsigned integers)",
                        dtype_name(dt));
    if (vdt(s) != dt)
        return imp_err(im, "operand types differ: %s and %s", dtype_name(dt), dtype_name(vdt(s)));
    int bits = (int)dtype_size(dt) * 8;
    Value *too_far = imp_cmp(im, "ge", s, imp_scalar(im, dt, bits));
    Value *p = imp_bin(im, OP_POW, imp_scalar(im, DT_F64, 2), imp_cvt(im, s, DT_F64));
    p = imp_cvt(im, imp_sel(im, too_far, imp_scalar(im, DT_F64, 1), p), dt);
    Value *y = imp_bin(im, left ? OP_MUL : OP_DIV, x, p);
    return imp_done(im, imp_sel(im, too_far, imp_scalar(im, dt, 0), y));
}
