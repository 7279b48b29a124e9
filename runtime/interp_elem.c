/*
 * interp_elem.c — elementwise kernels: unary, binary (numpy broadcasting),
 * cmp, select, convert.
 *
 * Floats compute in double and round once to the result type. Integers
 * compute in int64 with wrapping (through uint64, so overflow is defined)
 * and wrap to the result type on store. Bool is an integer 0/1.
 */
#include "runtime/interp_impl.h"

#include <math.h>
#include <string.h>

/* ---- unary ------------------------------------------------------------ */

/* Half-to-even rounding that ignores the current rounding mode. */
static double round_even(double x)
{
    double r = floor(x), diff = x - r;
    if (diff > 0.5 || (diff == 0.5 && fmod(r, 2.0) != 0))
        r += 1;
    return r;
}

/* The maths of the elementwise ops, one switch per operand class over
 * UnaryOp / BinaryOp with no default: an op of ops.def without a case here
 * does not compile (-Wswitch), and a case that has no meaning for the class
 * returns false, which the kernels report with the op's name. Which dtypes
 * reach these is decided by the op's `dtypes` in ops.def, before the loop. */

static bool unary_f(UnaryOp u, double x, double *r)
{
    switch (u) {
    case UN_NEG: *r = -x; return true;
    case UN_ABS: *r = fabs(x); return true;
    case UN_SIGN: *r = isnan(x) ? x : x > 0 ? 1 : x < 0 ? -1 : 0; return true;
    case UN_EXP: *r = exp(x); return true;
    case UN_LOG: *r = log(x); return true;
    case UN_SQRT: *r = sqrt(x); return true;
    case UN_RSQRT: *r = 1 / sqrt(x); return true;
    case UN_RECIP: *r = 1 / x; return true;
    case UN_TANH: *r = tanh(x); return true;
    case UN_SIGMOID: *r = x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x)); return true;
    case UN_ERF: *r = erf(x); return true;
    case UN_SIN: *r = sin(x); return true;
    case UN_COS: *r = cos(x); return true;
    case UN_TAN: *r = tan(x); return true;
    case UN_ATAN: *r = atan(x); return true;
    case UN_FLOOR: *r = floor(x); return true;
    case UN_CEIL: *r = ceil(x); return true;
    case UN_ROUND: *r = isfinite(x) ? round_even(x) : x; return true;
    case UN_ISNAN: *r = isnan(x); return true;
    case UN_ISINF: *r = isinf(x); return true;
    case UN_NOT:
    case UN_COUNT: return false;
    }
    return false;
}

/* Integers and bool (dt); u64 is unsigned. */
static bool unary_i(UnaryOp u, DType dt, int64_t x, int64_t *r)
{
    bool uns = dt == DT_U64;
    switch (u) {
    case UN_NEG: *r = (int64_t)(0 - (uint64_t)x); return true;
    case UN_ABS: *r = x < 0 && !uns ? (int64_t)(0 - (uint64_t)x) : x; return true;
    case UN_SIGN: *r = uns ? x != 0 : x > 0 ? 1 : x < 0 ? -1 : 0; return true;
    case UN_NOT: *r = dt == DT_BOOL ? !x : ~x; return true;
    case UN_EXP: case UN_LOG: case UN_SQRT: case UN_RSQRT: case UN_RECIP: case UN_TANH:
    case UN_SIGMOID: case UN_ERF: case UN_SIN: case UN_COS: case UN_TAN: case UN_ATAN:
    case UN_FLOOR: case UN_CEIL: case UN_ROUND: case UN_ISNAN: case UN_ISINF:
    case UN_COUNT: return false; /* floats only */
    }
    return false;
}

bool interp_unary_f(OpKind k, double x, double *r)
{
    UnaryOp u = op_unary(k);
    return u != UN_COUNT && unary_f(u, x, r);
}

bool interp_unary(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    const Tensor *x = in[0];
    UnaryOp u = op_unary(op->kind);
    if (u == UN_COUNT || !op_takes_dtype(op->kind, x->dtype))
        return interp_fail(ip, "not defined for %s", dtype_name(x->dtype));
    if (!interp_alloc(ip, out, op_result_dtype(op->kind, x->dtype), x->rank, x->shape))
        return false;
    bool fl = dtype_is_float(x->dtype);
    size_t n = tensor_numel(x);
    for (size_t i = 0; i < n; i++) {
        double f;
        int64_t v;
        if (fl ? !unary_f(u, interp_load_f(x, i), &f) : !unary_i(u, x->dtype, interp_load_i(x, i), &v)) {
            tensor_free(out);
            return interp_fail(ip, "the interpreter has no %s case for %s (runtime/interp_elem.c)",
                               fl ? "unary_f" : "unary_i", dtype_name(x->dtype));
        }
        if (fl)
            interp_store_f(out, i, f);
        else
            interp_store_i(out, i, v);
    }
    return true;
}

/* ---- binary ----------------------------------------------------------- */

static bool binary_f(BinaryOp o, double a, double b, double *r)
{
    switch (o) {
    case BIN_ADD: *r = a + b; return true;
    case BIN_SUB: *r = a - b; return true;
    case BIN_MUL: *r = a * b; return true;
    case BIN_DIV: *r = a / b; return true;
    case BIN_REM: *r = fmod(a, b); return true;
    case BIN_MOD: {
        double m = fmod(a, b);
        if (m != 0 && (m < 0) != (b < 0))
            m += b;
        *r = m == 0 ? copysign(0.0, b) : m;
        return true;
    }
    case BIN_POW: *r = pow(a, b); return true;
    case BIN_MAX: *r = isnan(a) || isnan(b) ? NAN : a > b ? a : b; return true;
    case BIN_MIN: *r = isnan(a) || isnan(b) ? NAN : a < b ? a : b; return true;
    case BIN_AND:
    case BIN_OR:
    case BIN_XOR:
    case BIN_COUNT: return false;
    }
    return false;
}

static int64_t ipow(int64_t a, int64_t b)
{
    if (b < 0)
        return a == 1 ? 1 : a == -1 ? (b & 1 ? -1 : 1) : 0;
    uint64_t r = 1, x = (uint64_t)a;
    for (; b; b >>= 1, x *= x)
        if (b & 1)
            r *= x;
    return (int64_t)r;
}

/* Integer (and bool) binary op: NULL, or what went wrong. uns: the operands
 * are the bits of u64 values (division and order are unsigned). */
static const char *binary_i(BinaryOp o, int64_t a, int64_t b, bool uns, int64_t *r)
{
    static const char *const div0 = "integer division by zero";
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    if (uns && (o == BIN_DIV || o == BIN_REM || o == BIN_MOD || o == BIN_MAX || o == BIN_MIN)) {
        if (ub == 0 && o != BIN_MAX && o != BIN_MIN)
            return div0;
        *r = (int64_t)(o == BIN_DIV ? ua / ub : o == BIN_MAX ? (ua > ub ? ua : ub)
                     : o == BIN_MIN ? (ua < ub ? ua : ub) : ua % ub);
        return NULL;
    }
    switch (o) {
    case BIN_ADD: *r = (int64_t)(ua + ub); return NULL;
    case BIN_SUB: *r = (int64_t)(ua - ub); return NULL;
    case BIN_MUL: *r = (int64_t)(ua * ub); return NULL;
    case BIN_DIV:
    case BIN_REM:
    case BIN_MOD:
        if (b == 0)
            return div0;
        if (b == -1) { /* INT64_MIN / -1 wraps */
            *r = o == BIN_DIV ? (int64_t)(0 - ua) : 0;
            return NULL;
        }
        if (o == BIN_DIV) {
            *r = a / b;
        } else {
            int64_t m = a % b;
            if (o == BIN_MOD && m != 0 && (m < 0) != (b < 0))
                m += b;
            *r = m;
        }
        return NULL;
    case BIN_POW:
        if (a == 0 && b < 0)
            return "integer zero raised to a negative power";
        *r = ipow(a, b);
        return NULL;
    case BIN_MAX: *r = a > b ? a : b; return NULL;
    case BIN_MIN: *r = a < b ? a : b; return NULL;
    case BIN_AND: *r = a & b; return NULL;
    case BIN_OR: *r = a | b; return NULL;
    case BIN_XOR: *r = a ^ b; return NULL;
    case BIN_COUNT: break;
    }
    return "the interpreter has no binary_i case (runtime/interp_elem.c)";
}

bool interp_binary_f(OpKind k, double a, double b, double *r)
{
    BinaryOp o = op_binary(k);
    return o != BIN_COUNT && binary_f(o, a, b, r);
}

bool interp_binary(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    const Tensor *a = in[0], *b = in[1];
    BinaryOp o = op_binary(op->kind);
    if (a->dtype != b->dtype)
        return interp_fail(ip, "operand dtypes differ (%s, %s)", dtype_name(a->dtype), dtype_name(b->dtype));
    if (o == BIN_COUNT || !op_takes_dtype(op->kind, a->dtype))
        return interp_fail(ip, "not defined for %s", dtype_name(a->dtype));
    int rank;
    int64_t shape[MAX_RANK], sa[MAX_RANK], sb[MAX_RANK];
    if (!interp_bcast_shape(ip, in, 2, &rank, shape) ||
        !interp_alloc(ip, out, op_result_dtype(op->kind, a->dtype), rank, shape))
        return false;
    interp_bcast_strides(a, rank, shape, sa);
    interp_bcast_strides(b, rank, shape, sb);
    NdIter it;
    nditer_init(&it, rank, shape);
    nditer_add(&it, sa);
    nditer_add(&it, sb);
    bool fl = dtype_is_float(a->dtype);
    size_t n = tensor_numel(out);
    for (size_t i = 0; i < n; i++, nditer_next(&it)) {
        size_t ia = (size_t)it.off[0], ib = (size_t)it.off[1];
        if (fl) {
            double r;
            if (!binary_f(o, interp_load_f(a, ia), interp_load_f(b, ib), &r)) {
                tensor_free(out);
                return interp_fail(ip, "the interpreter has no binary_f case for %s (runtime/interp_elem.c)",
                                   dtype_name(a->dtype));
            }
            interp_store_f(out, i, r);
            continue;
        }
        int64_t r;
        const char *err = binary_i(o, interp_load_i(a, ia), interp_load_i(b, ib), a->dtype == DT_U64, &r);
        if (err) {
            tensor_free(out);
            return interp_fail(ip, "%s", err);
        }
        interp_store_i(out, i, r);
    }
    return true;
}

/* ---- cmp, select, convert --------------------------------------------- */

bool interp_cmp(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    const Tensor *a = in[0], *b = in[1];
    const char *dir;
    if (!interp_attr_str(ip, "dir", &dir))
        return false;
    static const char *const dirs[] = {"eq", "ne", "lt", "le", "gt", "ge"};
    int di = -1;
    for (int i = 0; i < 6; i++)
        if (strcmp(dir, dirs[i]) == 0)
            di = i;
    if (di < 0)
        return interp_fail(ip, "unknown dir \"%s\"", dir);
    if (a->dtype != b->dtype)
        return interp_fail(ip, "operand dtypes differ (%s, %s)", dtype_name(a->dtype), dtype_name(b->dtype));
    bool fl = dtype_is_float(a->dtype);
    int rank;
    int64_t shape[MAX_RANK], sa[MAX_RANK], sb[MAX_RANK];
    if (!interp_bcast_shape(ip, in, 2, &rank, shape) || !interp_alloc(ip, out, DT_BOOL, rank, shape))
        return false;
    interp_bcast_strides(a, rank, shape, sa);
    interp_bcast_strides(b, rank, shape, sb);
    NdIter it;
    nditer_init(&it, rank, shape);
    nditer_add(&it, sa);
    nditer_add(&it, sb);
    uint8_t *o = out->data;
    size_t n = tensor_numel(out);
    for (size_t i = 0; i < n; i++, nditer_next(&it)) {
        size_t ia = (size_t)it.off[0], ib = (size_t)it.off[1];
        bool lt, eq, un = false;
        if (fl) {
            double x = interp_load_f(a, ia), y = interp_load_f(b, ib);
            lt = x < y, eq = x == y, un = isnan(x) || isnan(y);
        } else {
            int64_t x = interp_load_i(a, ia), y = interp_load_i(b, ib);
            lt = a->dtype == DT_U64 ? (uint64_t)x < (uint64_t)y : x < y, eq = x == y;
        }
        bool r;
        switch (di) {
        case 0: r = eq; break;
        case 1: r = !eq; break; /* NaN != anything */
        case 2: r = lt; break;
        case 3: r = lt || eq; break;
        case 4: r = !un && !lt && !eq; break;
        default: r = !un && !lt; break;
        }
        o[i] = r;
    }
    return true;
}

bool interp_select(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    const Tensor *c = in[0], *a = in[1], *b = in[2];
    if (c->dtype != DT_BOOL)
        return interp_fail(ip, "condition must be bool, not %s", dtype_name(c->dtype));
    if (a->dtype != b->dtype)
        return interp_fail(ip, "operand dtypes differ (%s, %s)", dtype_name(a->dtype), dtype_name(b->dtype));
    int rank;
    int64_t shape[MAX_RANK], sc[MAX_RANK], sa[MAX_RANK], sb[MAX_RANK];
    if (!interp_bcast_shape(ip, in, 3, &rank, shape) || !interp_alloc(ip, out, a->dtype, rank, shape))
        return false;
    interp_bcast_strides(c, rank, shape, sc);
    interp_bcast_strides(a, rank, shape, sa);
    interp_bcast_strides(b, rank, shape, sb);
    NdIter it;
    nditer_init(&it, rank, shape);
    nditer_add(&it, sc);
    nditer_add(&it, sa);
    nditer_add(&it, sb);
    size_t es = dtype_size(a->dtype), n = tensor_numel(out);
    const uint8_t *cd = c->data;
    for (size_t i = 0; i < n; i++, nditer_next(&it)) {
        bool take_a = cd[it.off[0]] != 0;
        const char *src = take_a ? (const char *)a->data + (size_t)it.off[1] * es
                                 : (const char *)b->data + (size_t)it.off[2] * es;
        memcpy((char *)out->data + i * es, src, es);
    }
    return true;
}

bool interp_convert(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    const Tensor *x = in[0];
    const Attr *a = op_attr(op, "to");
    if (!a || a->kind != ATTR_DTYPE || a->dt < 0 || a->dt >= DT_COUNT)
        return interp_fail(ip, "missing or bad attribute \"to\"");
    DType to = a->dt;
    if (!interp_alloc(ip, out, to, x->rank, x->shape))
        return false;
    size_t n = tensor_numel(x);
    bool from_float = dtype_is_float(x->dtype), to_float = dtype_is_float(to);
    for (size_t i = 0; i < n; i++) {
        if (from_float && to == DT_BOOL)
            interp_store_i(out, i, interp_load_f(x, i) != 0);
        else if (from_float && !to_float)
            interp_store_i(out, i, interp_f2i(to, interp_load_f(x, i)));
        else if (from_float || (x->dtype == DT_U64 && to_float))
            interp_store_f(out, i, interp_load_f(x, i));
        else
            interp_store_i(out, i, interp_load_i(x, i));
    }
    return true;
}
