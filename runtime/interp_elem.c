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

enum { CLS_FLOAT, CLS_INT, CLS_BOOL };

static int dtype_class(DType t)
{
    return dtype_is_float(t) ? CLS_FLOAT : t == DT_BOOL ? CLS_BOOL : CLS_INT;
}

/* ---- unary ------------------------------------------------------------ */

/* Half-to-even rounding that ignores the current rounding mode. */
static double round_even(double x)
{
    double r = floor(x), diff = x - r;
    if (diff > 0.5 || (diff == 0.5 && fmod(r, 2.0) != 0))
        r += 1;
    return r;
}

static double unary_f(OpKind k, double x)
{
    switch (k) {
    case OP_NEG: return -x;
    case OP_ABS: return fabs(x);
    case OP_SIGN: return isnan(x) ? x : x > 0 ? 1 : x < 0 ? -1 : 0;
    case OP_EXP: return exp(x);
    case OP_LOG: return log(x);
    case OP_SQRT: return sqrt(x);
    case OP_RSQRT: return 1 / sqrt(x);
    case OP_RECIP: return 1 / x;
    case OP_TANH: return tanh(x);
    case OP_SIGMOID: return x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x));
    case OP_ERF: return erf(x);
    case OP_SIN: return sin(x);
    case OP_COS: return cos(x);
    case OP_FLOOR: return floor(x);
    case OP_CEIL: return ceil(x);
    case OP_ROUND: return isfinite(x) ? round_even(x) : x;
    case OP_ISNAN: return isnan(x);
    case OP_ISINF: return isinf(x);
    default: return 0;
    }
}

static int64_t unary_i(OpKind k, int64_t x, bool u)
{
    switch (k) {
    case OP_NEG: return (int64_t)(0 - (uint64_t)x);
    case OP_ABS: return x < 0 && !u ? (int64_t)(0 - (uint64_t)x) : x;
    case OP_SIGN: return u ? x != 0 : x > 0 ? 1 : x < 0 ? -1 : 0;
    case OP_NOT: return ~x;
    case OP_ISNAN:
    case OP_ISINF: return 0;
    default: return x; /* floor, ceil, round */
    }
}

bool interp_unary(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    const Tensor *x = in[0];
    OpKind k = op->kind;
    int cls = dtype_class(x->dtype);
    bool pred = k == OP_ISNAN || k == OP_ISINF;
    bool ok;
    if (cls == CLS_FLOAT)
        ok = k != OP_NOT;
    else if (cls == CLS_INT)
        ok = k == OP_NEG || k == OP_ABS || k == OP_SIGN || k == OP_FLOOR || k == OP_CEIL ||
             k == OP_ROUND || k == OP_NOT || pred;
    else
        ok = k == OP_NOT || pred;
    if (!ok)
        return interp_fail(ip, "not defined for %s", dtype_name(x->dtype));
    DType odt = pred ? DT_BOOL : x->dtype;
    if (!interp_alloc(ip, out, odt, x->rank, x->shape))
        return false;
    size_t n = tensor_numel(x);
    for (size_t i = 0; i < n; i++) {
        if (cls == CLS_FLOAT)
            interp_store_f(out, i, unary_f(k, interp_load_f(x, i)));
        else if (cls == CLS_BOOL && k == OP_NOT)
            interp_store_i(out, i, !interp_load_i(x, i));
        else
            interp_store_i(out, i, unary_i(k, interp_load_i(x, i), x->dtype == DT_U64));
    }
    return true;
}

/* ---- binary ----------------------------------------------------------- */

static double binary_f(OpKind k, double a, double b)
{
    switch (k) {
    case OP_ADD: return a + b;
    case OP_SUB: return a - b;
    case OP_MUL: return a * b;
    case OP_DIV: return a / b;
    case OP_REM: return fmod(a, b);
    case OP_MOD: {
        double r = fmod(a, b);
        if (r != 0 && (r < 0) != (b < 0))
            r += b;
        return r == 0 ? copysign(0.0, b) : r;
    }
    case OP_POW: return pow(a, b);
    case OP_MAX: return isnan(a) || isnan(b) ? NAN : a > b ? a : b;
    case OP_MIN: return isnan(a) || isnan(b) ? NAN : a < b ? a : b;
    default: return 0;
    }
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

/* Integer binary op; false on division by zero. u: the operands are the
 * bits of u64 values (division and order are unsigned). */
static bool binary_i(OpKind k, int64_t a, int64_t b, bool u, int64_t *out)
{
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    if (u && (k == OP_DIV || k == OP_REM || k == OP_MOD || k == OP_MAX || k == OP_MIN)) {
        if (ub == 0 && k != OP_MAX && k != OP_MIN)
            return false;
        *out = (int64_t)(k == OP_DIV ? ua / ub : k == OP_MAX ? (ua > ub ? ua : ub)
                       : k == OP_MIN ? (ua < ub ? ua : ub) : ua % ub);
        return true;
    }
    switch (k) {
    case OP_ADD: *out = (int64_t)(ua + ub); return true;
    case OP_SUB: *out = (int64_t)(ua - ub); return true;
    case OP_MUL: *out = (int64_t)(ua * ub); return true;
    case OP_DIV:
    case OP_REM:
    case OP_MOD:
        if (b == 0)
            return false;
        if (b == -1) { /* INT64_MIN / -1 wraps */
            *out = k == OP_DIV ? (int64_t)(0 - ua) : 0;
            return true;
        }
        if (k == OP_DIV) {
            *out = a / b;
        } else {
            int64_t r = a % b;
            if (k == OP_MOD && r != 0 && (r < 0) != (b < 0))
                r += b;
            *out = r;
        }
        return true;
    case OP_POW:
        if (a == 0 && b < 0)
            return false;
        *out = ipow(a, b);
        return true;
    case OP_MAX: *out = a > b ? a : b; return true;
    case OP_MIN: *out = a < b ? a : b; return true;
    case OP_AND: *out = a & b; return true;
    case OP_OR: *out = a | b; return true;
    case OP_XOR: *out = a ^ b; return true;
    default: *out = 0; return true;
    }
}

bool interp_binary(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    const Tensor *a = in[0], *b = in[1];
    OpKind k = op->kind;
    if (a->dtype != b->dtype)
        return interp_fail(ip, "operand dtypes differ (%s, %s)", dtype_name(a->dtype), dtype_name(b->dtype));
    int cls = dtype_class(a->dtype);
    bool logic = k == OP_AND || k == OP_OR || k == OP_XOR;
    if ((cls == CLS_FLOAT && logic) || (cls == CLS_BOOL && !logic && k != OP_MAX && k != OP_MIN))
        return interp_fail(ip, "not defined for %s", dtype_name(a->dtype));
    int rank;
    int64_t shape[MAX_RANK], sa[MAX_RANK], sb[MAX_RANK];
    if (!interp_bcast_shape(ip, in, 2, &rank, shape) || !interp_alloc(ip, out, a->dtype, rank, shape))
        return false;
    interp_bcast_strides(a, rank, shape, sa);
    interp_bcast_strides(b, rank, shape, sb);
    NdIter it;
    nditer_init(&it, rank, shape);
    nditer_add(&it, sa);
    nditer_add(&it, sb);
    size_t n = tensor_numel(out);
    for (size_t i = 0; i < n; i++, nditer_next(&it)) {
        size_t ia = (size_t)it.off[0], ib = (size_t)it.off[1];
        if (cls == CLS_FLOAT) {
            interp_store_f(out, i, binary_f(k, interp_load_f(a, ia), interp_load_f(b, ib)));
            continue;
        }
        int64_t r;
        if (!binary_i(k, interp_load_i(a, ia), interp_load_i(b, ib), a->dtype == DT_U64, &r)) {
            tensor_free(out);
            return interp_fail(ip, k == OP_POW ? "integer zero raised to a negative power"
                                               : "integer division by zero");
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
