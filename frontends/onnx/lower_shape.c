/*
 * lower_shape.c — shape computation and data movement.
 *
 * Two forms for every op whose shape or indices come from an input:
 *
 *   static   the input is a constant (an initializer or a Constant node):
 *            the op becomes a core op whose attributes are Dims — reshape
 *            with dims, slice with dims, broadcast, pad with dims. ONNX's
 *            Reshape 0 (copy a dim) and -1 (infer) turn into dim
 *            expressions: -1 -> floordiv(numel(x), product of the others).
 *   dynamic  the input is computed (Shape -> Gather -> Concat chains): the
 *            ONNX rules are spelled out with core i64 ops (shape_of, cmp,
 *            select, reduce) feeding a dyn_* op; shape analysis folds them.
 */
#include "frontends/onnx/internal.h"

#include <math.h>
#include <string.h>

#define CX (&im->g->dims)

static Dim *dc(Imp *im, int64_t c) { return dim_const(CX, c); }

Value *imp_unsqueeze(Imp *im, Value *x, const int64_t *axes, int n)
{
    if (!x)
        return NULL;
    int r = vrank(x) + n, k = 0;
    if (r > MAX_RANK) {
        imp_err(im, "rank %d exceeds %d", r, MAX_RANK);
        return NULL;
    }
    Dim *dims[MAX_RANK];
    for (int i = 0; i < r; i++) {
        bool ins = false;
        for (int j = 0; j < n; j++)
            ins |= axes[j] == i;
        dims[i] = ins ? dc(im, 1) : vdims(x)[k++];
    }
    return imp_reshape(im, x, dims, r);
}

Value *imp_broadcast_to(Imp *im, Value *x, Dim *const *shape, int rank)
{
    if (!x)
        return NULL;
    int xr = vrank(x);
    if (xr == rank) {
        int i = 0;
        while (i < rank && vdims(x)[i] == shape[i])
            i++;
        if (i == rank)
            return x;
    }
    int64_t axes[MAX_RANK];
    for (int i = 0; i < xr; i++)
        axes[i] = rank - xr + i;
    return build_broadcast(im->g, x, shape, rank, axes);
}

/* i64 ones[n] */
static Value *ones(Imp *im, int n)
{
    int64_t v[MAX_RANK];
    for (int i = 0; i < n; i++)
        v[i] = 1;
    return imp_i64s(im, v, n);
}

static Value *prod(Imp *im, Value *v) /* i64[n] -> i64 scalar */
{
    int64_t ax = 0;
    return imp_reduce(im, v, "prod", &ax, 1, false);
}

/* ---- Axes computed at run time ----
 *
 * Unsqueeze, Squeeze, Slice and Pad from opset 13/18 take their axes as an
 * input. When it is computed, the rank of the result is still static (it
 * depends on the number of axes only), and the per-axis vectors are built
 * with i64 ops that are right for every value of the axes: a match matrix
 * m[i, j] = (axes[j] == i) picks the entries. */

/* Axes i64[n] with negative entries made positive against rank r. */
static Value *norm_axes(Imp *im, Value *axes, int r)
{
    Value *a = imp_cvt(im, axes, DT_I64);
    Value *neg = imp_cmp(im, "lt", a, imp_scalar(im, DT_I64, 0));
    return imp_sel(im, neg, imp_binc(im, OP_ADD, a, r), a);
}

/* bool[r, n]: entry [i, j] is whether the normalized axes[j] is i. */
static Value *axes_match(Imp *im, Value *axes, int n, int r)
{
    Dim *md[2] = {dc(im, r), dc(im, n)};
    return imp_cmp(im, "eq", build_iota(im->g, DT_I64, md, 2, 0), axes);
}

/* A full-rank i64 vector: entry i is v[j] where axes[j] = i, else dflt. */
static Value *full_vector_dyn(Imp *im, Value *v, Value *axes, int n, int r, int64_t dflt)
{
    Value *m = axes_match(im, norm_axes(im, axes, r), n, r);
    int64_t ax = 1;
    Value *zero = imp_scalar(im, DT_I64, 0);
    Value *picked = imp_reduce(im, imp_sel(im, m, imp_cvt(im, v, DT_I64), zero), "sum", &ax, 1, false);
    Value *any = imp_reduce(im, imp_cvt(im, m, DT_I64), "max", &ax, 1, false);
    return imp_sel(im, imp_cmp(im, "ne", any, zero), picked, build_scalar_i64(im->g, dflt));
}

/* The length of a rank-1 operand, or -1 if it is not static. */
static int static_len(Value *v)
{
    return v && vrank(v) == 1 && dim_is_const(vdims(v)[0]) && vdims(v)[0]->c <= MAX_RANK
               ? (int)vdims(v)[0]->c : -1;
}

static Value *gather0(Imp *im, Value *x, Value *idx)
{
    if (!x || !idx)
        return NULL;
    AttrList l = {0};
    attrs_add_int(im->g, &l, "axis", 0);
    Op *op = build_op(im->g, OP_GATHER, (Value *[]){x, idx}, 2, l.v, l.n);
    return op ? op->out[0] : NULL;
}

static Value *dyn_reshape(Imp *im, Value *x, Value *shape);

/* Unsqueeze with computed axes: result dim i is 1 where i is an axis, else
 * x's dim i - #{axes below i}. */
static Value *unsqueeze_dyn(Imp *im, Value *x, Value *axes, int n)
{
    int r = vrank(x), R = r + n;
    if (R > MAX_RANK) {
        imp_err(im, "rank %d exceeds %d", R, MAX_RANK);
        return NULL;
    }
    Value *a = norm_axes(im, axes, R);
    int64_t ax = 1;
    Value *ins = imp_reduce(im, imp_cvt(im, axes_match(im, a, n, R), DT_I64), "max", &ax, 1, false);
    Dim *md[2] = {dc(im, R), dc(im, n)}, *rd = dc(im, R);
    Value *below = imp_cvt(im, imp_cmp(im, "lt", a, build_iota(im->g, DT_I64, md, 2, 0)), DT_I64);
    below = imp_reduce(im, below, "sum", &ax, 1, false);
    Value *src = imp_bin(im, OP_SUB, build_iota(im->g, DT_I64, &rd, 1, 0), below);
    Value *xs = build_concat(im->g, (Value *[]){build_shape_of(im->g, x), ones(im, 1)}, 2, 0);
    Value *one = imp_scalar(im, DT_I64, 1);
    Value *shape = imp_sel(im, imp_cmp(im, "ne", ins, imp_scalar(im, DT_I64, 0)), one, gather0(im, xs, src));
    return dyn_reshape(im, x, shape);
}

/* Squeeze with computed axes: result dim k is x's dim at the k-th kept
 * position, #{i : c[i] <= k} with c the running count of kept axes. */
static Value *squeeze_dyn(Imp *im, Value *x, Value *axes, int n)
{
    int r = vrank(x), R = r - n;
    if (R < 0) {
        imp_err(im, "%d axes for rank %d", n, r);
        return NULL;
    }
    int64_t ax = 1;
    Value *sq = imp_reduce(im, imp_cvt(im, axes_match(im, norm_axes(im, axes, r), n, r), DT_I64),
                           "max", &ax, 1, false);
    Value *keep = imp_bin(im, OP_SUB, imp_scalar(im, DT_I64, 1), sq);
    if (!keep)
        return NULL;
    AttrList l = {0};
    attrs_add_int(im->g, &l, "axis", 0);
    attrs_add_int(im->g, &l, "exclusive", 0);
    attrs_add_int(im->g, &l, "reverse", 0);
    Op *cs = build_op(im->g, OP_CUMSUM, &keep, 1, l.v, l.n);
    if (!cs)
        return NULL;
    Dim *md[2] = {dc(im, R), dc(im, r)};
    Value *le = imp_cmp(im, "le", cs->out[0], build_iota(im->g, DT_I64, md, 2, 0));
    Value *src = imp_reduce(im, imp_cvt(im, le, DT_I64), "sum", &ax, 1, false);
    return dyn_reshape(im, x, gather0(im, build_shape_of(im->g, x), src));
}

/* ---- Shape, Size ---- */

bool onnx_lower_shape(Imp *im)
{
    Value *x = imp_need(im, 0);
    int64_t start, end;
    if (!x || !attr_int(im, "start", 0, &start) || !attr_int(im, "end", INT64_MAX, &end))
        return false;
    int r = vrank(x);
    Value *s = build_shape_of(im->g, x);
    if (start < 0)
        start += r;
    if (end < 0)
        end += r;
    start = start < 0 ? 0 : start > r ? r : start;
    end = end < start ? start : end > r ? r : end;
    if (start == 0 && end == r)
        return imp_done(im, s);
    return imp_done(im, imp_slice1(im, s, 0, dc(im, start), dc(im, end), 1));
}

bool onnx_lower_size(Imp *im)
{
    Value *x = imp_need(im, 0);
    if (!x)
        return false;
    /* numel as a dim: constant when the shape is, and foldable further */
    Dim *n = type_numel(CX, &x->type);
    if (!n)
        return imp_done(im, prod(im, build_shape_of(im->g, x)));
    AttrList l = {0};
    attrs_add_dims(im->g, &l, "dims", &n, 1);
    attrs_add_int(im->g, &l, "scalar", 1);
    Op *op = build_op(im->g, OP_SHAPE_CONST, NULL, 0, l.v, l.n);
    return imp_done(im, op ? op->out[0] : NULL);
}

/* ---- Reshape, Flatten, Squeeze, Unsqueeze ---- */

/* The ONNX rules of a computed Reshape shape s: 0 copies x's dim (unless
 * allowzero), -1 is numel(x) / product of the others. */
static Value *resolve_shape(Imp *im, Value *x, Value *s, bool allowzero)
{
    int r = (int)vdims(s)[0]->c, xr = vrank(x);
    Value *xs = build_shape_of(im->g, x), *al = xs;
    if (!xs)
        return NULL;
    if (xr > r)
        al = imp_slice1(im, xs, 0, dc(im, 0), dc(im, r), 1);
    else if (xr < r)
        al = build_concat(im->g, (Value *[]){xs, ones(im, r - xr)}, 2, 0);
    Value *zero = imp_scalar(im, DT_I64, 0), *m1 = imp_scalar(im, DT_I64, -1);
    if (!allowzero)
        s = imp_sel(im, imp_cmp(im, "eq", s, zero), al, s);
    Value *neg = imp_cmp(im, "eq", s, m1);
    Value *known = imp_sel(im, neg, imp_scalar(im, DT_I64, 1), s);
    Value *total = xr ? prod(im, xs) : imp_scalar(im, DT_I64, 1);
    /* max(.., 1): with allowzero a 0 next to no -1 must not divide by zero */
    Value *inferred = imp_bin(im, OP_DIV, total, imp_binc(im, OP_MAX, prod(im, known), 1));
    return imp_sel(im, neg, inferred, s);
}

static Value *dyn_reshape(Imp *im, Value *x, Value *shape)
{
    if (!x || !shape)
        return NULL;
    Value *in[2] = {x, shape};
    Op *op = build_op(im->g, OP_DYN_RESHAPE, in, 2, NULL, 0);
    return op ? op->out[0] : NULL;
}

bool onnx_lower_reshape(Imp *im)
{
    Value *x = imp_need(im, 0), *s = imp_need(im, 1);
    int64_t allowzero, *v;
    int n;
    if (!x || !s || !attr_int(im, "allowzero", 0, &allowzero))
        return false;
    if (vdt(s) != DT_I64 || vrank(s) != 1 || !dim_is_const(vdims(s)[0]))
        return imp_err(im, "shape must be i64[n] with a known n");
    if (!imp_const_ints(im, s, &v, &n))
        return imp_done(im, dyn_reshape(im, x, resolve_shape(im, x, s, allowzero != 0)));
    if (n > MAX_RANK)
        return imp_err(im, "rank %d exceeds %d", n, MAX_RANK);
    Dim *dims[MAX_RANK], *known = dc(im, 1);
    int infer = -1;
    for (int i = 0; i < n; i++) {
        if (v[i] == -1) {
            if (infer >= 0)
                return imp_err(im, "shape has more than one -1");
            infer = i;
            continue;
        }
        if (v[i] < -1)
            return imp_err(im, "shape entry %lld is invalid", (long long)v[i]);
        if (v[i] == 0 && !allowzero) {
            if (i >= vrank(x))
                return imp_err(im, "shape entry %d is 0 but the data has rank %d", i, vrank(x));
            dims[i] = vdims(x)[i];
        } else {
            dims[i] = dc(im, v[i]);
        }
        if (!dims[i] || !(known = dim_mul(CX, known, dims[i])))
            return imp_err(im, "shape dims overflow");
    }
    if (infer >= 0) {
        if (dim_is(known, 0))
            return imp_err(im, "cannot infer the -1 entry next to a 0 dim");
        dims[infer] = dim_floordiv(CX, type_numel(CX, &x->type), known);
    }
    for (int i = 0; i < n; i++)
        if (!dims[i])
            return imp_err(im, "shape dims overflow");
    return imp_done(im, imp_reshape(im, x, dims, n));
}

bool onnx_lower_flatten(Imp *im)
{
    Value *x = imp_need(im, 0);
    int64_t axis;
    if (!x || !attr_int(im, "axis", 1, &axis))
        return false;
    int r = vrank(x);
    if (axis < -r || axis > r)
        return imp_err(im, "axis %lld is out of range for rank %d", (long long)axis, r);
    if (axis < 0)
        axis += r;
    Dim *d[2] = {dc(im, 1), dc(im, 1)};
    for (int i = 0; i < r; i++)
        d[i >= axis] = dim_mul(CX, d[i >= axis], vdims(x)[i]);
    return imp_done(im, imp_reshape(im, x, d, 2));
}

/* Squeeze/Unsqueeze axes: an attribute before opset 13, an input after.
 * Computed axes of a static length leave *n = -2. */
static bool axes_arg(Imp *im, int64_t **axes, int *n)
{
    if (im->opset >= 13) {
        *n = -1;
        if (IN(1) && !imp_const_ints(im, IN(1), axes, n)) {
            if (!dtype_is_int(vdt(IN(1))) || static_len(IN(1)) < 0)
                return imp_err(im, "axes must be a 1-D integer tensor of known length");
            *n = -2;
        }
        return true;
    }
    return attr_ints(im, "axes", axes, n);
}

bool onnx_lower_squeeze(Imp *im)
{
    Value *x = imp_need(im, 0);
    int64_t *axes;
    int n;
    if (!x || !axes_arg(im, &axes, &n))
        return false;
    if (n == -2)
        return imp_done(im, squeeze_dyn(im, x, IN(1), static_len(IN(1))));
    int r = vrank(x);
    bool drop[MAX_RANK] = {0};
    if (n < 0) {
        for (int i = 0; i < r; i++) {
            if (!dim_is_const(vdims(x)[i])) {
                char s[64];
                dim_snprint(s, sizeof s, vdims(x)[i]);
                return imp_err(im, "Squeeze without axes: cannot tell whether dim %s is 1", s);
            }
            drop[i] = dim_is(vdims(x)[i], 1);
        }
    } else {
        if (r == 0 && n > 0) /* imp_axis lets axis 0 through at rank 0 */
            return imp_err(im, "cannot squeeze axis %lld of a scalar", (long long)axes[0]);
        if (!imp_axes(im, axes, n, r))
            return false;
        for (int i = 0; i < n; i++) {
            Dim *d = vdims(x)[axes[i]];
            if (dim_is_const(d) && d->c != 1)
                return imp_err(im, "cannot squeeze axis %lld of size %lld", (long long)axes[i],
                               (long long)d->c);
            drop[axes[i]] = true;
        }
    }
    Dim *dims[MAX_RANK];
    int k = 0;
    for (int i = 0; i < r; i++)
        if (!drop[i])
            dims[k++] = vdims(x)[i];
    return imp_done(im, imp_reshape(im, x, dims, k));
}

bool onnx_lower_unsqueeze(Imp *im)
{
    Value *x = imp_need(im, 0);
    int64_t *axes;
    int n;
    if (!x || !axes_arg(im, &axes, &n))
        return false;
    if (n == -2)
        return imp_done(im, unsqueeze_dyn(im, x, IN(1), static_len(IN(1))));
    if (n < 0)
        return imp_err(im, "axes are required");
    if (!imp_axes(im, axes, n, vrank(x) + n))
        return false;
    return imp_done(im, imp_unsqueeze(im, x, axes, n));
}

/* ---- Transpose, Concat, Split, Slice ---- */

bool onnx_lower_transpose(Imp *im)
{
    Value *x = imp_need(im, 0);
    int64_t *perm, dflt[MAX_RANK];
    int n, r;
    if (!x || !attr_ints(im, "perm", &perm, &n))
        return false;
    r = vrank(x);
    if (n < 0) {
        for (int i = 0; i < r; i++)
            dflt[i] = r - 1 - i;
        perm = dflt;
    } else if (n != r) {
        return imp_err(im, "perm has %d entries for rank %d", n, r);
    }
    for (int i = 0; i < r; i++)
        if (perm[i] < 0 || perm[i] >= r)
            return imp_err(im, "perm entry %lld is out of range", (long long)perm[i]);
    return imp_done(im, imp_transpose(im, x, perm));
}

bool onnx_lower_concat(Imp *im)
{
    int64_t axis;
    if (!imp_need(im, 0) || !attr_int(im, "axis", 0, &axis) ||
        !imp_axis(im, axis, vrank(IN(0)), &axis))
        return false;
    for (int i = 0; i < im->nin; i++)
        if (!IN(i))
            return imp_err(im, "input %d is empty", i);
    if (im->nin == 1)
        return imp_done(im, IN(0));
    return imp_done(im, build_concat(im->g, im->in, im->nin, axis));
}

static Value *full_vector(Imp *im, Value *v, const int64_t *axes, int n, int r, int64_t dflt);

/* Split with computed sizes: output i is a dyn_slice from the exclusive
 * running sum of the sizes. */
static bool split_dyn(Imp *im, Value *x, int axis, Value *sizes)
{
    int r = vrank(x), nout = im->nout;
    if (!dtype_is_int(vdt(sizes)) || static_len(sizes) != nout)
        return imp_err(im, "split must be an integer vector with one entry per output");
    Value *sp = imp_cvt(im, sizes, DT_I64);
    if (!sp)
        return imp_fail(im);
    AttrList l = {0};
    attrs_add_int(im->g, &l, "axis", 0);
    attrs_add_int(im->g, &l, "exclusive", 1);
    attrs_add_int(im->g, &l, "reverse", 0);
    Op *off = build_op(im->g, OP_CUMSUM, &sp, 1, l.v, l.n);
    if (!off)
        return imp_fail(im);
    int64_t ax = axis;
    for (int i = 0; i < nout; i++) {
        Value *s = imp_slice1(im, off->out[0], 0, dc(im, i), dc(im, i + 1), 1);
        Value *e = imp_bin(im, OP_ADD, s, imp_slice1(im, sp, 0, dc(im, i), dc(im, i + 1), 1));
        Value *in[4] = {x, full_vector(im, s, &ax, 1, r, 0), full_vector(im, e, &ax, 1, r, INT64_MAX),
                        ones(im, r)};
        if (!in[1] || !in[2] || !in[3])
            return imp_fail(im);
        Op *op = build_op(im->g, OP_DYN_SLICE, in, 4, NULL, 0);
        if (!op)
            return imp_fail(im);
        im->out[i] = op->out[0];
    }
    return true;
}

bool onnx_lower_split(Imp *im)
{
    Value *x = imp_need(im, 0);
    int64_t axis, *sizes;
    int n, nout = im->nout;
    if (!x || !attr_int(im, "axis", 0, &axis) || !imp_axis(im, axis, vrank(x), &axis))
        return false;
    if (im->opset >= 13) {
        n = -1;
        if (IN(1) && !imp_const_ints(im, IN(1), &sizes, &n))
            return split_dyn(im, x, (int)axis, IN(1));
    } else if (!attr_ints(im, "split", &sizes, &n)) {
        return false;
    }
    Dim *d = vdims(x)[axis], *start = dc(im, 0);
    if (n >= 0 && n != nout)
        return imp_err(im, "split has %d entries for %d outputs", n, nout);
    if (nout < 1)
        return imp_err(im, "no outputs");
    Dim *chunk = NULL;
    if (n < 0) /* equal parts; from opset 18 the last may be smaller */
        chunk = im->opset >= 18 ? dim_ceildiv(CX, d, dc(im, nout))
                                : dim_floordiv(CX, d, dc(im, nout));
    for (int i = 0; i < nout; i++) {
        Dim *limit;
        if (n >= 0)
            limit = dim_addc(CX, start, sizes[i]);
        else if (i == nout - 1)
            limit = d;
        else
            limit = dim_min(CX, dim_mulc(CX, chunk, i + 1), d);
        if (i == nout - 1 && n >= 0 && dim_is_const(d) && limit != d)
            return imp_err(im, "split sizes do not add up to the dim %lld", (long long)d->c);
        im->out[i] = imp_slice1(im, x, (int)axis, start, limit, 1);
        if (!im->out[i])
            return imp_fail(im);
        start = limit;
    }
    return true;
}

static Dim *clamp(Imp *im, Dim *v, Dim *lo, Dim *hi)
{
    return dim_min(CX, dim_max(CX, v, lo), hi);
}

/* One axis of a constant Slice: x[start:end:step] along axis. */
static Value *slice_axis(Imp *im, Value *x, int axis, int64_t s, int64_t e, int64_t step)
{
    Dim *d = vdims(x)[axis];
    const int64_t big = (int64_t)1 << 40;
    if (step > 0) {
        Dim *ds = s >= big ? d : s <= -big ? dc(im, 0) : s < 0 ? dim_addc(CX, d, s) : dc(im, s);
        Dim *de = e >= big ? d : e <= -big ? dc(im, 0) : e < 0 ? dim_addc(CX, d, e) : dc(im, e);
        ds = clamp(im, ds, dc(im, 0), d);
        de = clamp(im, de, ds, d);
        if (ds == dc(im, 0) && de == d && step == 1)
            return x;
        return imp_slice1(im, x, axis, ds, de, step);
    }
    /* negative step: reverse, then slice forward from d-1-start */
    Dim *dm1 = dim_addc(CX, d, -1);
    Dim *ds = s >= big ? dm1 : s <= -big ? dc(im, -1) : s < 0 ? dim_addc(CX, d, s) : dc(im, s);
    Dim *de = e >= big ? dm1 : e <= -big ? dc(im, -1) : e < 0 ? dim_addc(CX, d, e) : dc(im, e);
    ds = clamp(im, ds, dc(im, -1), dm1);
    de = clamp(im, de, dc(im, -1), ds);
    AttrList l = {0};
    int64_t ax = axis;
    attrs_add_ints(im->g, &l, "axes", &ax, 1);
    Op *rev = build_op(im->g, OP_REVERSE, &x, 1, l.v, l.n);
    if (!rev)
        return NULL;
    Dim *ns = dim_sub(CX, dm1, ds), *ne = dim_sub(CX, dm1, de);
    if (dim_is(ns, 0) && ne == d && step == -1)
        return rev->out[0];
    return imp_slice1(im, rev->out[0], axis, ns, ne, -step);
}

/* A full-rank i64 vector for dyn_slice: entry axes[j] from v[j], others dflt. */
static Value *full_vector(Imp *im, Value *v, const int64_t *axes, int n, int r, int64_t dflt)
{
    Value *parts[MAX_RANK];
    v = imp_cvt(im, v, DT_I64);
    for (int i = 0; i < r; i++) {
        int j = 0;
        while (j < n && axes[j] != i)
            j++;
        parts[i] = j < n ? imp_slice1(im, v, 0, dc(im, j), dc(im, j + 1), 1) : imp_i64s(im, &dflt, 1);
        if (!parts[i])
            return NULL;
    }
    return r == 1 ? parts[0] : build_concat(im->g, parts, r, 0);
}

bool onnx_lower_slice(Imp *im)
{
    Value *x = imp_need(im, 0), *vs = imp_need(im, 1), *ve = imp_need(im, 2);
    int64_t *s, *e, *axes, *steps, dflt_axes[MAX_RANK], dflt_steps[MAX_RANK];
    int ns, ne, na, nst;
    if (!x || !vs || !ve)
        return false;
    int r = vrank(x);
    bool cs = imp_const_ints(im, vs, &s, &ns), ce = imp_const_ints(im, ve, &e, &ne);
    if (vrank(vs) != 1 || !dim_is_const(vdims(vs)[0]))
        return imp_err(im, "starts must be a 1-D tensor of known length");
    int n = (int)vdims(vs)[0]->c;
    bool dyn_axes = IN(3) && !imp_const_ints(im, IN(3), &axes, &na);
    bool dyn_steps = IN(4) && !imp_const_ints(im, IN(4), &steps, &nst);
    if (dyn_axes || dyn_steps) { /* dyn_slice with vectors built at run time */
        if (n > r || n > MAX_RANK || (IN(3) && static_len(IN(3)) != n) ||
            (IN(4) && static_len(IN(4)) != n) || static_len(ve) != n)
            return imp_err(im, "starts, ends, axes and steps must have equal lengths, at most the rank");
        for (int i = 0; i < n; i++)
            dflt_axes[i] = i;
        Value *va = IN(3) ? IN(3) : imp_i64s(im, dflt_axes, n);
        Value *vst = IN(4) ? IN(4) : ones(im, n);
        Value *in[4] = {x, full_vector_dyn(im, vs, va, n, r, 0),
                        full_vector_dyn(im, ve, va, n, r, INT64_MAX),
                        full_vector_dyn(im, vst, va, n, r, 1)};
        if (!in[1] || !in[2] || !in[3])
            return imp_fail(im);
        Op *op = build_op(im->g, OP_DYN_SLICE, in, 4, NULL, 0);
        return imp_done(im, op ? op->out[0] : NULL);
    }
    if (!IN(3)) {
        for (int i = 0; i < n && i < MAX_RANK; i++)
            dflt_axes[i] = i;
        axes = dflt_axes;
        na = n;
    }
    if (!IN(4)) {
        for (int i = 0; i < n && i < MAX_RANK; i++)
            dflt_steps[i] = 1;
        steps = dflt_steps;
        nst = n;
    }
    if (n > r || na != n || nst != n || (cs && ns != n) || (ce && ne != n))
        return imp_err(im, "starts, ends, axes and steps must have equal lengths, at most the rank");
    for (int i = 0; i < n; i++) {
        if (!imp_axis(im, axes[i], r, &axes[i]))
            return false;
        if (steps[i] == 0)
            return imp_err(im, "steps must not be 0");
    }
    if (cs && ce) {
        for (int i = 0; i < n && x; i++)
            x = slice_axis(im, x, (int)axes[i], s[i], e[i], steps[i]);
        return imp_done(im, x);
    }
    /* computed bounds: dyn_slice over every axis (ONNX clamping rules) */
    Value *in[4] = {x, full_vector(im, vs, axes, n, r, 0),
                    full_vector(im, ve, axes, n, r, INT64_MAX),
                    full_vector(im, imp_i64s(im, steps, n), axes, n, r, 1)};
    if (!in[1] || !in[2] || !in[3])
        return imp_fail(im);
    Op *op = build_op(im->g, OP_DYN_SLICE, in, 4, NULL, 0);
    return imp_done(im, op ? op->out[0] : NULL);
}

/* ---- Gather and scatter ---- */

/* Constant indices with negative entries made positive against dim d. */
static Value *norm_indices(Imp *im, Value *idx, Dim *d)
{
    int64_t *v;
    int n;
    if (!imp_const_ints(im, idx, &v, &n))
        return idx;
    bool neg = false;
    for (int i = 0; i < n; i++)
        neg |= v[i] < 0;
    if (!neg)
        return idx;
    if (!dim_is_const(d)) {
        Value *dv = imp_cvt(im, imp_shape_value(im, &d, 1), vdt(idx));
        Dim *none[1] = {NULL};
        dv = imp_reshape(im, dv, none, 0);
        Value *lt = imp_cmp(im, "lt", idx, imp_scalar(im, vdt(idx), 0));
        return imp_sel(im, lt, imp_bin(im, OP_ADD, idx, dv), idx);
    }
    for (int i = 0; i < n; i++)
        if (v[i] < 0)
            v[i] += d->c;
    if (vdt(idx) == DT_I64)
        return build_const(im->g, idx->type, v, (size_t)n * 8, true);
    int32_t *w = arena_array(&im->g->arena, (size_t)n + 1, sizeof *w);
    if (!w)
        return NULL;
    for (int i = 0; i < n; i++)
        w[i] = (int32_t)v[i];
    return build_const(im->g, idx->type, w, (size_t)n * 4, true);
}

static bool axis_op(Imp *im, OpKind k, const char *axis_name, Value **in, int nin, const char *red)
{
    AttrList l = {0};
    int64_t axis;
    if (axis_name) {
        if (!attr_int(im, "axis", 0, &axis) || !imp_axis(im, axis, vrank(in[0]), &axis))
            return false;
        attrs_add_int(im->g, &l, axis_name, axis);
    }
    if (red)
        attrs_add_str(im->g, &l, "reduction", red);
    Op *op = build_op(im->g, k, in, nin, l.v, l.n);
    return imp_done(im, op ? op->out[0] : NULL);
}

bool onnx_lower_gather(Imp *im)
{
    Value *in[2] = {imp_need(im, 0), imp_need(im, 1)};
    int64_t axis;
    if (!in[0] || !in[1] || !attr_int(im, "axis", 0, &axis) ||
        !imp_axis(im, axis, vrank(in[0]), &axis))
        return false;
    in[1] = norm_indices(im, in[1], vdims(in[0])[axis]);
    if (!in[1])
        return imp_fail(im);
    return axis_op(im, OP_GATHER, "axis", in, 2, NULL);
}

bool onnx_lower_gather_elements(Imp *im)
{
    Value *in[2] = {imp_need(im, 0), imp_need(im, 1)};
    if (!in[0] || !in[1])
        return false;
    return axis_op(im, OP_GATHER_ELEMENTS, "axis", in, 2, NULL);
}

bool onnx_lower_gather_nd(Imp *im)
{
    Value *in[2] = {imp_need(im, 0), imp_need(im, 1)};
    int64_t b;
    if (!in[0] || !in[1] || !attr_int(im, "batch_dims", 0, &b))
        return false;
    AttrList l = {0};
    attrs_add_int(im->g, &l, "batch_dims", b);
    Op *op = build_op(im->g, OP_GATHER_ND, in, 2, l.v, l.n);
    return imp_done(im, op ? op->out[0] : NULL);
}

static bool scatter(Imp *im, OpKind k, const char *axis_name)
{
    Value *in[3] = {imp_need(im, 0), imp_need(im, 1), imp_need(im, 2)};
    const char *red;
    if (!in[0] || !in[1] || !in[2] || !attr_str(im, "reduction", "none", &red))
        return false;
    if (strcmp(red, "none") && strcmp(red, "add") && strcmp(red, "mul") && strcmp(red, "max") &&
        strcmp(red, "min"))
        return imp_errk(im, DIAG_UNSUPPORTED, "reduction \"%s\" is not supported", red);
    return axis_op(im, k, axis_name, in, 3, red);
}

bool onnx_lower_scatter_nd(Imp *im) { return scatter(im, OP_SCATTER_ND, NULL); }
bool onnx_lower_scatter_elements(Imp *im) { return scatter(im, OP_SCATTER_ELEMENTS, "axis"); }

/* ---- Expand, Tile, Pad ---- */

static Value *dyn_broadcast(Imp *im, Value *x, Value *shape)
{
    if (!x || !shape)
        return NULL;
    int r = (int)vdims(shape)[0]->c;
    int64_t axes[MAX_RANK];
    for (int i = 0; i < vrank(x); i++)
        axes[i] = r - vrank(x) + i;
    AttrList l = {0};
    attrs_add_ints(im->g, &l, "axes", axes, vrank(x));
    Value *in[2] = {x, shape};
    Op *op = build_op(im->g, OP_DYN_BROADCAST, in, 2, l.v, l.n);
    return op ? op->out[0] : NULL;
}

bool onnx_lower_expand(Imp *im)
{
    Value *x = imp_need(im, 0), *s = imp_need(im, 1);
    int64_t *v;
    int n;
    if (!x || !s)
        return false;
    if (vrank(s) != 1 || !dim_is_const(vdims(s)[0]) || vdt(s) != DT_I64)
        return imp_err(im, "shape must be i64[n] with a known n");
    int xr = vrank(x), sr = (int)vdims(s)[0]->c, r = xr > sr ? xr : sr;
    if (r > MAX_RANK)
        return imp_err(im, "rank %d exceeds %d", r, MAX_RANK);
    if (imp_const_ints(im, s, &v, &n)) {
        Dim *dims[MAX_RANK];
        for (int i = 0; i < r; i++) {
            int j = i - (r - sr), k = i - (r - xr);
            Dim *xd = k >= 0 ? vdims(x)[k] : dc(im, 1);
            if (j < 0 || v[j] == 1)
                dims[i] = xd;
            else if (dim_is(xd, 1) || (dim_is_const(xd) && xd->c == v[j]))
                dims[i] = dc(im, v[j]);
            else if (!dim_is_const(xd))
                dims[i] = dc(im, v[j]); /* xd must be 1 or equal at run time */
            else
                return imp_err(im, "cannot expand dim %lld to %lld", (long long)xd->c,
                               (long long)v[j]);
        }
        return imp_done(im, imp_broadcast_to(im, x, dims, r));
    }
    /* bidirectional: where shape is 1 the result keeps x's dim, elsewhere
     * it is shape's (x's must then be 1 or equal: dyn_broadcast checks).
     * Not max(shape, x's dim): shape 0 against x's 1 gives 0, and a
     * negative entry is refused, not replaced by x's dim. */
    Value *xs = build_shape_of(im->g, x);
    if (xr < r)
        xs = build_concat(im->g, (Value *[]){ones(im, r - xr), xs}, 2, 0);
    if (sr < r)
        s = build_concat(im->g, (Value *[]){ones(im, r - sr), s}, 2, 0);
    Value *keep = imp_cmp(im, "eq", s, imp_scalar(im, DT_I64, 1));
    return imp_done(im, dyn_broadcast(im, x, imp_sel(im, keep, xs, s)));
}

bool onnx_lower_tile(Imp *im)
{
    Value *x = imp_need(im, 0), *rep = imp_need(im, 1);
    int64_t *v;
    int n, r;
    if (!x || !rep)
        return false;
    r = vrank(x);
    if (!imp_const_ints(im, rep, &v, &n)) {
        /* computed repeats: broadcast [r0, d0, r1, d1 ...], reshape [r0*d0, ...] */
        if (!dtype_is_int(vdt(rep)) || static_len(rep) != r || 2 * r > MAX_RANK)
            return imp_err(im, "repeats must be an integer vector with one entry per axis");
        Value *reps = imp_cvt(im, rep, DT_I64), *xs = build_shape_of(im->g, x), *parts[MAX_RANK];
        int64_t axes[MAX_RANK];
        for (int i = 0; i < r; i++) {
            parts[2 * i] = imp_slice1(im, reps, 0, dc(im, i), dc(im, i + 1), 1);
            parts[2 * i + 1] = imp_slice1(im, xs, 0, dc(im, i), dc(im, i + 1), 1);
            axes[i] = 2 * i + 1;
            if (!parts[2 * i] || !parts[2 * i + 1])
                return imp_fail(im);
        }
        if (r == 0)
            return imp_done(im, x);
        AttrList l = {0};
        attrs_add_ints(im->g, &l, "axes", axes, r);
        Value *in[2] = {x, build_concat(im->g, parts, 2 * r, 0)};
        if (!in[1])
            return imp_fail(im);
        Op *b = build_op(im->g, OP_DYN_BROADCAST, in, 2, l.v, l.n);
        if (!b)
            return imp_fail(im);
        return imp_done(im, dyn_reshape(im, b->out[0], imp_bin(im, OP_MUL, reps, xs)));
    }
    if (n != r)
        return imp_err(im, "repeats has %d entries for rank %d", n, r);
    if (2 * r > MAX_RANK)
        return imp_err(im, "rank %d is too large to tile", r);
    /* x[d0, d1] -> broadcast [r0, d0, r1, d1] -> reshape [r0*d0, r1*d1] */
    Dim *wide[MAX_RANK], *out[MAX_RANK];
    int64_t axes[MAX_RANK];
    for (int i = 0; i < r; i++) {
        if (v[i] < 0)
            return imp_err(im, "repeats must not be negative");
        wide[2 * i] = dc(im, v[i]);
        wide[2 * i + 1] = vdims(x)[i];
        axes[i] = 2 * i + 1;
        out[i] = dim_mulc(CX, vdims(x)[i], v[i]);
    }
    Value *b = build_broadcast(im->g, x, wide, 2 * r, axes);
    return imp_done(im, imp_reshape(im, b, out, r));
}

/* Pad with pads [begins, ends] for the n axes of the vector axes, made
 * full-rank at run time: a dyn_pad. */
static bool pad_axes_dyn(Imp *im, Value *x, Value *vp, Value *axes, int n, Value *val, const char *mode)
{
    int r = vrank(x);
    if (!vp)
        return imp_fail(im);
    Value *lo = full_vector_dyn(im, imp_slice1(im, vp, 0, dc(im, 0), dc(im, n), 1), axes, n, r, 0);
    Value *hi = full_vector_dyn(im, imp_slice1(im, vp, 0, dc(im, n), dc(im, 2 * n), 1), axes, n, r, 0);
    if (!val || !lo || !hi)
        return imp_fail(im);
    AttrList l = {0};
    attrs_add_str(im->g, &l, "mode", mode);
    Value *in[3] = {x, build_concat(im->g, (Value *[]){lo, hi}, 2, 0), val};
    Op *op = in[1] ? build_op(im->g, OP_DYN_PAD, in, 3, l.v, l.n) : NULL;
    return imp_done(im, op ? op->out[0] : NULL);
}

bool onnx_lower_pad(Imp *im)
{
    Value *x = imp_need(im, 0);
    const char *mode;
    int64_t *pads, *axes, all[MAX_RANK];
    int n, na, r;
    if (!x || !attr_str(im, "mode", "constant", &mode))
        return false;
    r = vrank(x);
    if (strcmp(mode, "constant") && strcmp(mode, "reflect") && strcmp(mode, "edge") && strcmp(mode, "wrap"))
        return imp_errk(im, DIAG_UNSUPPORTED, "mode \"%s\" is not supported", mode);
    Value *val = NULL, *vp = NULL;
    if (im->opset < 11) {
        double f;
        if (!attr_ints(im, "pads", &pads, &n) || !attr_float(im, "value", 0, &f))
            return false;
        if (n < 0)
            return imp_err(im, "pads are required");
        val = imp_scalar(im, vdt(x), f);
    } else {
        vp = imp_need(im, 1);
        if (!vp)
            return false;
        n = -1;
        if (!imp_const_ints(im, vp, &pads, &n) && vdt(vp) != DT_I64)
            return imp_err(im, "pads must be i64");
        if (IN(2)) {
            Dim *none[1] = {NULL};
            val = imp_reshape(im, IN(2), none, 0);
        } else {
            val = imp_scalar(im, vdt(x), 0);
        }
    }
    for (int i = 0; i < r; i++)
        all[i] = i;
    axes = all;
    na = r;
    if (IN(3) && !imp_const_ints(im, IN(3), &axes, &na)) {
        /* computed axes: full-rank pads built at run time */
        na = static_len(IN(3));
        if (!vp || !dtype_is_int(vdt(IN(3))) || na < 0 || static_len(vp) != 2 * na)
            return imp_err(im, "axes must be an integer vector with half as many entries as pads");
        return pad_axes_dyn(im, x, vp, IN(3), na, val, mode);
    }
    if (IN(3)) {
        for (int i = 0; i < na; i++)
            if (!imp_axis(im, axes[i], r, &axes[i]))
                return false;
    }
    if (!val)
        return imp_fail(im);
    AttrList l = {0};
    attrs_add_str(im->g, &l, "mode", mode);
    if (n < 0) { /* computed pads */
        if (na != r) { /* some axes: scattered to full rank at run time */
            if (static_len(vp) != 2 * na)
                return imp_err(im, "pads must have %d entries, twice the axes", 2 * na);
            return pad_axes_dyn(im, x, vp, imp_i64s(im, axes, na), na, val, mode);
        }
        Value *in[3] = {x, vp, val};
        Op *op = build_op(im->g, OP_DYN_PAD, in, 3, l.v, l.n);
        return imp_done(im, op ? op->out[0] : NULL);
    }
    if (n != 2 * na)
        return imp_err(im, "pads has %d entries, expected %d", n, 2 * na);
    Dim *lo[MAX_RANK], *hi[MAX_RANK];
    for (int i = 0; i < r; i++)
        lo[i] = hi[i] = dc(im, 0);
    for (int i = 0; i < na; i++) {
        lo[axes[i]] = dc(im, pads[i]);
        hi[axes[i]] = dc(im, pads[na + i]);
    }
    attrs_add_dims(im->g, &l, "low", lo, r);
    attrs_add_dims(im->g, &l, "high", hi, r);
    Value *in[2] = {x, val};
    Op *op = build_op(im->g, OP_PAD, in, 2, l.v, l.n);
    return imp_done(im, op ? op->out[0] : NULL);
}

/* CenterCropPad: each listed axis (default all) cropped or padded with
 * zeros to its length in `shape`, centred: a change d = shape - dim puts
 * trunc(d / 2) at the start and the rest at the end, and a negative pad
 * crops. The pads are computed at run time (a dyn_pad), so `shape` may be
 * computed too. */
bool onnx_lower_center_crop_pad(Imp *im)
{
    Value *x = imp_need(im, 0), *sh = imp_need(im, 1);
    int64_t *axes, all[MAX_RANK];
    int na;
    if (!x || !sh || !attr_ints(im, "axes", &axes, &na))
        return false;
    int r = vrank(x);
    if (na < 0) {
        for (int i = 0; i < r; i++)
            all[i] = i;
        axes = all;
        na = r;
    }
    if (na > MAX_RANK)
        return imp_err(im, "%d axes for rank %d", na, r);
    for (int i = 0; i < na; i++) {
        if (!imp_axis(im, axes[i], r, &axes[i]))
            return false;
        for (int j = 0; j < i; j++)
            if (axes[j] == axes[i])
                return imp_err(im, "axis %lld is repeated", (long long)axes[i]);
    }
    if (!dtype_is_int(vdt(sh)) || static_len(sh) != na)
        return imp_err(im, "shape must be an integer vector with one entry per axis (%d)", na);
    Dim *d[MAX_RANK];
    for (int i = 0; i < na; i++)
        d[i] = vdims(x)[axes[i]];
    Value *diff = imp_bin(im, OP_SUB, imp_cvt(im, sh, DT_I64), imp_shape_value(im, d, na));
    Value *lo = imp_binc(im, OP_DIV, diff, 2);
    Value *vp = lo ? build_concat(im->g, (Value *[]){lo, imp_bin(im, OP_SUB, diff, lo)}, 2, 0) : NULL;
    return pad_axes_dyn(im, x, vp, imp_i64s(im, axes, na), na, imp_scalar(im, vdt(x), 0), "constant");
}

/* ---- Constants and generators ---- */

/* The scalar held by a one-element tensor attribute, or zero f32. */
static Value *attr_scalar(Imp *im, const char *name)
{
    const OAttr *a = attr_find(im, name);
    if (!a)
        return imp_scalar(im, DT_F32, 0);
    if (!a->t) {
        imp_err(im, "attribute '%s' must be a TENSOR", name);
        return NULL;
    }
    Value *v = imp_tensor_const(im, a->t, "value");
    size_t n;
    if (!v)
        return NULL;
    if (!type_static_numel(&v->type, &n) || n != 1) {
        imp_err(im, "attribute '%s' must hold one element", name);
        return NULL;
    }
    Dim *none[1] = {NULL};
    return imp_reshape(im, v, none, 0);
}

bool onnx_lower_constant_of_shape(Imp *im)
{
    Value *s = imp_need(im, 0), *val;
    int64_t *v;
    int n;
    if (!s || !(val = attr_scalar(im, "value")))
        return false;
    if (vrank(s) != 1 || !dim_is_const(vdims(s)[0]) || vdt(s) != DT_I64)
        return imp_err(im, "shape must be i64[n] with a known n");
    if (imp_const_ints(im, s, &v, &n)) {
        Dim *dims[MAX_RANK];
        if (n > MAX_RANK)
            return imp_err(im, "rank %d exceeds %d", n, MAX_RANK);
        for (int i = 0; i < n; i++) {
            if (v[i] < 0)
                return imp_err(im, "negative dim %lld", (long long)v[i]);
            dims[i] = dc(im, v[i]);
        }
        return imp_done(im, imp_broadcast_to(im, val, dims, n));
    }
    return imp_done(im, dyn_broadcast(im, val, s));
}

bool onnx_lower_constant(Imp *im)
{
    const OAttr *a = im->node->n_attribute == 1 ? im->node->attribute[0] : NULL;
    if (!a || !a->name)
        return imp_err(im, "needs exactly one value attribute");
    if (!strcmp(a->name, "value")) {
        if (!a->t)
            return imp_err(im, "attribute 'value' must be a TENSOR");
        return imp_done(im, imp_tensor_const(im, a->t, "value"));
    }
    if (!strcmp(a->name, "value_float"))
        return imp_done(im, imp_scalar(im, DT_F32, a->f));
    if (!strcmp(a->name, "value_int"))
        return imp_done(im, imp_scalar(im, DT_I64, (double)a->i));
    if (!strcmp(a->name, "value_ints"))
        return imp_done(im, imp_i64s(im, a->ints, (int)a->n_ints));
    if (!strcmp(a->name, "value_floats")) {
        Dim *d = dc(im, (int64_t)a->n_floats);
        Type t = type_make(&im->g->arena, DT_F32, 1, &d);
        return imp_done(im, build_const(im->g, t, a->n_floats ? (const void *)a->floats : "",
                                    a->n_floats * 4, true));
    }
    return imp_errk(im, DIAG_UNSUPPORTED, "attribute '%s' is not supported", a->name);
}

bool onnx_lower_range(Imp *im)
{
    Value *vs = imp_need(im, 0), *vl = imp_need(im, 1), *vd = imp_need(im, 2);
    double s, l, d;
    if (!vs || !vl || !vd)
        return false;
    DType dt = vdt(vs);
    bool cs = imp_const_scalar(im, vs, &s), cl = imp_const_scalar(im, vl, &l);
    bool cd = imp_const_scalar(im, vd, &d);
    if (cd && d == 0)
        return imp_err(im, "delta must not be 0");
    if (!cd || (!dtype_is_int(dt) && !(cs && cl))) {
        /* computed delta, or floating-point bounds computed at run time
         * (YOLOv8's anchors: Range(0, Cast(width), 1) + 0.5):
         * n = max(0, ceil((limit - start) / delta)) in f64 */
        Dim *none[1] = {NULL}, *one = dc(im, 1);
        Value *s64 = imp_reshape(im, imp_cvt(im, vs, DT_F64), none, 0);
        Value *l64 = imp_reshape(im, imp_cvt(im, vl, DT_F64), none, 0);
        Value *d64 = imp_reshape(im, imp_cvt(im, vd, DT_F64), none, 0);
        Value *cnt = imp_un(im, OP_CEIL, imp_bin(im, OP_DIV, imp_bin(im, OP_SUB, l64, s64), d64));
        cnt = imp_reshape(im, imp_binc(im, OP_MAX, imp_cvt(im, cnt, DT_I64), 0), &one, 1);
        if (!cnt)
            return imp_fail(im);
        AttrList lst = {0};
        attrs_add_dtype(im->g, &lst, "dtype", dt);
        attrs_add_int(im->g, &lst, "axis", 0);
        Op *op = build_op(im->g, OP_DYN_IOTA, &cnt, 1, lst.v, lst.n);
        if (!op)
            return imp_fail(im);
        Value *step = imp_reshape(im, vd, none, 0), *start = imp_reshape(im, vs, none, 0);
        return imp_done(im, imp_bin(im, OP_ADD, imp_bin(im, OP_MUL, op->out[0], step), start));
    }
    if (cs && cl) {
        double cnt = ceil((l - s) / d);
        if (cnt >= 0x1p53) /* and inf: the count is not exact in f64, and no tensor has it */
            return imp_err(im, "a range of %g elements (start %g, limit %g, delta %g) is too large", cnt, s, l, d);
        int64_t n = cnt > 0 ? (int64_t)cnt : 0;
        Dim *dim = dc(im, n);
        Value *io = build_iota(im->g, dt, &dim, 1, 0);
        if (d != 1)
            io = imp_binc(im, OP_MUL, io, d);
        return imp_done(im, s != 0 ? imp_binc(im, OP_ADD, io, s) : io);
    }
    /* n = max(0, ceil((limit - start) / delta)) in i64 */
    Dim *none[1] = {NULL};
    Value *a = imp_bin(im, OP_SUB, imp_cvt(im, vl, DT_I64), imp_cvt(im, vs, DT_I64));
    a = imp_reshape(im, a, none, 0);
    if (!(d > -0x1p62 && d < 0x1p62)) /* |delta| at 2^62 or more steps past every int64 range at once */
        return imp_err(im, "delta %g is out of range for an integer range", d);
    int64_t di = (int64_t)d;
    if (di < 0)
        a = imp_un(im, OP_NEG, a);
    int64_t ad = di < 0 ? -di : di;
    Value *n = imp_binc(im, OP_DIV, imp_binc(im, OP_ADD, a, (double)(ad - 1)), (double)ad);
    n = imp_binc(im, OP_MAX, n, 0);
    Dim *one = dc(im, 1);
    n = imp_reshape(im, n, &one, 1);
    if (!n)
        return imp_fail(im);
    AttrList lst = {0};
    attrs_add_dtype(im->g, &lst, "dtype", dt);
    attrs_add_int(im->g, &lst, "axis", 0);
    Op *op = build_op(im->g, OP_DYN_IOTA, &n, 1, lst.v, lst.n);
    if (!op)
        return imp_fail(im);
    Value *start = imp_reshape(im, vs, none, 0);
    return imp_done(im, imp_bin(im, OP_ADD, imp_binc(im, OP_MUL, op->out[0], d), start));
}

bool onnx_lower_trilu(Imp *im)
{
    Value *x = imp_need(im, 0), *k = IN(1);
    int64_t upper;
    if (!x || !attr_int(im, "upper", 1, &upper))
        return false;
    int r = vrank(x);
    if (r < 2)
        return imp_err(im, "data must have rank 2 or more");
    Dim *md[2] = {vdims(x)[r - 2], vdims(x)[r - 1]};
    Value *row = build_iota(im->g, DT_I64, md, 2, 0), *col = build_iota(im->g, DT_I64, md, 2, 1);
    Dim *none[1] = {NULL};
    Value *kv = k ? imp_reshape(im, imp_cvt(im, k, DT_I64), none, 0) : imp_scalar(im, DT_I64, 0);
    Value *diff = imp_bin(im, OP_SUB, col, row);
    Value *keep = imp_cmp(im, upper ? "ge" : "le", diff, kv);
    return imp_done(im, imp_sel(im, keep, x, imp_scalar(im, vdt(x), 0)));
}

/* EyeLike: ones on the k-th diagonal of a matrix shaped as the input, in
 * the `dtype` asked for (default the input's). */
bool onnx_lower_eye_like(Imp *im)
{
    Value *x = imp_need(im, 0);
    int64_t k, odt;
    if (!x || !attr_int(im, "k", 0, &k) || !attr_int(im, "dtype", 0, &odt))
        return false;
    if (vrank(x) != 2)
        return imp_err(im, "input must have rank 2, not %d", vrank(x));
    DType dt = odt ? onnx_dtype((int32_t)odt) : vdt(x);
    if (dt == DT_INVALID)
        return imp_errk(im, DIAG_UNSUPPORTED, "dtype %s is not supported", onnx_type_name((int32_t)odt));
    Value *row = build_iota(im->g, DT_I64, vdims(x), 2, 0), *col = build_iota(im->g, DT_I64, vdims(x), 2, 1);
    Value *on = imp_cmp(im, "eq", imp_bin(im, OP_SUB, col, row), imp_scalar(im, DT_I64, (double)k));
    return imp_done(im, imp_cvt(im, on, dt));
}

bool onnx_lower_one_hot(Imp *im)
{
    Value *idx = imp_need(im, 0), *vd = imp_need(im, 1), *vals = imp_need(im, 2);
    int64_t axis;
    double depth;
    if (!idx || !vd || !vals || !attr_int(im, "axis", -1, &axis))
        return false;
    int r = vrank(idx) + 1;
    if (!imp_axis(im, axis, r, &axis))
        return false;
    if (!imp_const_scalar(im, vd, &depth)) {
        /* computed depth: the result shape is built at run time */
        size_t one;
        if (!type_static_numel(&vd->type, &one) || one != 1 || r > MAX_RANK)
            return imp_err(im, "depth must be a scalar");
        Dim *d1 = dc(im, 1), *none[1] = {NULL};
        Value *dv = imp_reshape(im, imp_cvt(im, vd, DT_I64), &d1, 1), *parts[MAX_RANK];
        Value *is = build_shape_of(im->g, idx);
        for (int i = 0; i < r; i++) {
            int j = i < axis ? i : i - 1;
            parts[i] = i == axis ? dv : imp_slice1(im, is, 0, dc(im, j), dc(im, j + 1), 1);
            if (!parts[i])
                return imp_fail(im);
        }
        Value *shape = r == 1 ? parts[0] : build_concat(im->g, parts, r, 0);
        Value *ds = imp_reshape(im, dv, none, 0);
        AttrList l = {0};
        attrs_add_dtype(im->g, &l, "dtype", DT_I64);
        attrs_add_int(im->g, &l, "axis", axis);
        Op *io = shape ? build_op(im->g, OP_DYN_IOTA, &shape, 1, l.v, l.n) : NULL;
        if (!io || !ds)
            return imp_fail(im);
        Value *i64 = imp_cvt(im, idx, DT_I64);
        Value *neg = imp_cmp(im, "lt", i64, imp_scalar(im, DT_I64, 0));
        i64 = imp_unsqueeze(im, imp_sel(im, neg, imp_bin(im, OP_ADD, i64, ds), i64), &axis, 1);
        Value *hot = imp_cmp(im, "eq", i64, io->out[0]);
        Value *off = imp_reshape(im, imp_slice1(im, vals, 0, dc(im, 0), dc(im, 1), 1), none, 0);
        Value *on = imp_reshape(im, imp_slice1(im, vals, 0, dc(im, 1), dc(im, 2), 1), none, 0);
        return imp_done(im, imp_sel(im, hot, on, off));
    }
    if (depth < 1)
        return imp_err(im, "depth must be positive");
    Dim *dims[MAX_RANK];
    for (int i = 0, k = 0; i < r; i++)
        dims[i] = i == axis ? dc(im, (int64_t)depth) : vdims(idx)[k++];
    Value *i64 = imp_cvt(im, idx, DT_I64);
    Value *neg = imp_cmp(im, "lt", i64, imp_scalar(im, DT_I64, 0));
    i64 = imp_sel(im, neg, imp_binc(im, OP_ADD, i64, depth), i64);
    i64 = imp_unsqueeze(im, i64, &axis, 1);
    Value *io = build_iota(im->g, DT_I64, dims, r, axis);
    Value *hot = imp_cmp(im, "eq", i64, io);
    Dim *none[1] = {NULL};
    Value *off = imp_reshape(im, imp_slice1(im, vals, 0, dc(im, 0), dc(im, 1), 1), none, 0);
    Value *on = imp_reshape(im, imp_slice1(im, vals, 0, dc(im, 1), dc(im, 2), 1), none, 0);
    return imp_done(im, imp_sel(im, hot, on, off));
}

bool onnx_lower_nonzero(Imp *im)
{
    Value *x = imp_need(im, 0);
    if (!x)
        return false;
    Op *op = build_op(im->g, OP_NONZERO, &x, 1, NULL, 0);
    return imp_done(im, op ? op->out[0] : NULL);
}

/* Compress: the slices of x along axis (x flattened when there is none)
 * at the positions where the 1-D condition is true: a gather at the
 * nonzero positions of the condition, whose count is data-dependent. A
 * condition shorter than the axis drops the rest; a true past the axis's
 * end is a run-time error of the gather. */
bool onnx_lower_compress(Imp *im)
{
    Value *x = imp_need(im, 0), *cond = imp_need(im, 1);
    int64_t axis;
    if (!x || !cond || !attr_int(im, "axis", 0, &axis))
        return false;
    if (vrank(cond) != 1 || vdt(cond) != DT_BOOL)
        return imp_err(im, "condition must be a 1-D bool tensor");
    if (!attr_find(im, "axis")) {
        Dim *n = dc(im, 1);
        for (int i = 0; i < vrank(x); i++)
            n = dim_mul(CX, n, vdims(x)[i]);
        x = imp_reshape(im, x, &n, 1);
        axis = 0;
    } else if (!imp_axis(im, axis, vrank(x), &axis)) {
        return false;
    }
    Op *nz = build_op(im->g, OP_NONZERO, &cond, 1, NULL, 0);
    if (!nz || !x)
        return imp_fail(im);
    Value *idx = imp_reshape(im, nz->out[0], &vdims(nz->out[0])[1], 1);
    AttrList l = {0};
    attrs_add_int(im->g, &l, "axis", axis);
    Op *op = idx ? build_op(im->g, OP_GATHER, (Value *[]){x, idx}, 2, l.v, l.n) : NULL;
    return imp_done(im, op ? op->out[0] : NULL);
}

/* ReverseSequence: along time_axis, the first lens[b] elements of each
 * batch entry b reversed, the rest kept: a gather_elements at t' = t <
 * lens[b] ? lens[b] - 1 - t : t. */
bool onnx_lower_reverse_sequence(Imp *im)
{
    Value *x = imp_need(im, 0), *lens = imp_need(im, 1);
    int64_t ta, ba;
    if (!x || !lens || !attr_int(im, "time_axis", 0, &ta) || !attr_int(im, "batch_axis", 1, &ba))
        return false;
    int r = vrank(x);
    if (r < 2 || (ta != 0 && ta != 1) || (ba != 0 && ba != 1) || ta == ba)
        return imp_err(im, "needs rank 2 or more and time_axis, batch_axis 0 and 1 or 1 and 0");
    if (vrank(lens) != 1 || !dtype_is_int(vdt(lens)))
        return imp_err(im, "sequence_lens must be a 1-D integer tensor");
    Dim *ld[MAX_RANK];
    for (int i = 0; i < r; i++)
        ld[i] = i == ba ? vdims(lens)[0] : dc(im, 1);
    Value *n = imp_reshape(im, imp_cvt(im, lens, DT_I64), ld, r);
    Value *t = build_iota(im->g, DT_I64, vdims(x), r, ta);
    Value *rev = imp_bin(im, OP_SUB, imp_binc(im, OP_SUB, n, 1), t);
    Value *idx = imp_sel(im, imp_cmp(im, "lt", t, n), rev, t);
    AttrList l = {0};
    attrs_add_int(im->g, &l, "axis", ta);
    Op *op = idx ? build_op(im->g, OP_GATHER_ELEMENTS, (Value *[]){x, idx}, 2, l.v, l.n) : NULL;
    return imp_done(im, op ? op->out[0] : NULL);
}

/* ---- DepthToSpace, SpaceToDepth ---- */

bool onnx_lower_depth_to_space(Imp *im)
{
    Value *x = imp_need(im, 0);
    int64_t b;
    const char *mode;
    if (!x || !attr_int(im, "blocksize", 0, &b) || !attr_str(im, "mode", "DCR", &mode))
        return false;
    if (vrank(x) != 4 || b < 1)
        return imp_err(im, "needs data [N, C, H, W] and blocksize >= 1");
    Dim **d = vdims(x), *c = dim_floordiv(CX, d[1], dc(im, b * b));
    bool dcr = !strcmp(mode, "DCR");
    if (!dcr && strcmp(mode, "CRD"))
        return imp_err(im, "mode must be DCR or CRD");
    Dim *s6[6] = {d[0], dc(im, b), dc(im, b), c, d[2], d[3]};
    if (!dcr) {
        s6[1] = c;
        s6[3] = dc(im, b);
    }
    static const int64_t pdcr[6] = {0, 3, 4, 1, 5, 2}, pcrd[6] = {0, 1, 4, 2, 5, 3};
    Value *y = imp_transpose(im, imp_reshape(im, x, s6, 6), dcr ? pdcr : pcrd);
    Dim *s4[4] = {d[0], c, dim_mulc(CX, d[2], b), dim_mulc(CX, d[3], b)};
    return imp_done(im, imp_reshape(im, y, s4, 4));
}

bool onnx_lower_space_to_depth(Imp *im)
{
    Value *x = imp_need(im, 0);
    int64_t b;
    if (!x || !attr_int(im, "blocksize", 0, &b))
        return false;
    if (vrank(x) != 4 || b < 1)
        return imp_err(im, "needs data [N, C, H, W] and blocksize >= 1");
    Dim **d = vdims(x);
    Dim *h = dim_floordiv(CX, d[2], dc(im, b)), *w = dim_floordiv(CX, d[3], dc(im, b));
    Dim *s6[6] = {d[0], d[1], h, dc(im, b), w, dc(im, b)};
    static const int64_t perm[6] = {0, 3, 5, 1, 2, 4};
    Value *y = imp_transpose(im, imp_reshape(im, x, s6, 6), perm);
    Dim *s4[4] = {d[0], dim_mulc(CX, d[1], b * b), h, w};
    return imp_done(im, imp_reshape(im, y, s4, 4));
}

/* ---- Resize ---- */

/* floor(d * scale) as a dim, when scale is p/q with small q. */
static Dim *scaled_dim(Imp *im, Dim *d, double scale)
{
    if (!(scale >= 0 && scale < 0x1p40)) /* NaN, negative or absurd: the caller's error */
        return NULL;
    for (int64_t q = 1; q <= 64; q++) {
        double p = scale * (double)q;
        if (fabs(p - round(p)) < 1e-6 && p >= 0) {
            Dim *m = dim_mulc(CX, d, (int64_t)round(p));
            return m ? dim_floordiv(CX, m, dc(im, q)) : NULL;
        }
    }
    if (dim_is_const(d)) {
        double v = floor((double)d->c * scale);
        return v < 0x1p62 ? dc(im, (int64_t)v) : NULL;
    }
    return NULL;
}

static Value *f64s(Imp *im, const double *v, int n)
{
    Dim *d = dc(im, n);
    Type t = type_make(&im->g->arena, DT_F64, 1, &d);
    return build_const(im->g, t, n ? (const void *)v : "", (size_t)n * 8, true);
}

/* Length of a rank-1 value with a constant length, else -1. */
static int vec_len(Value *v)
{
    return v && vrank(v) == 1 && dim_is_const(vdims(v)[0]) ? (int)vdims(v)[0]->c : -1;
}

/* The full-rank vector of a per-axes one: entry i is v[j] where axes[j] = i,
 * else dflt[i] (dflt: r entries of v's dtype). */
static Value *scatter_axes(Imp *im, Value *v, Value *dflt, const int64_t *axes, int k, int r)
{
    bool ident = k == r;
    for (int i = 0; ident && i < k; i++)
        ident = axes[i] == i;
    if (ident || !v || !dflt)
        return v;
    int64_t idx[MAX_RANK];
    for (int i = 0; i < r; i++) {
        idx[i] = k + i;
        for (int j = 0; j < k; j++)
            if (axes[j] == i)
                idx[i] = j;
    }
    return gather0(im, build_concat(im->g, (Value *[]){v, dflt}, 2, 0), imp_i64s(im, idx, r));
}

/* Resize in general: the sizes (from run-time scales, or sizes with axes
 * or keep_aspect_ratio_policy) are computed in f64 as the ONNX reference
 * does, and the scales and roi travel to dyn_resize_scales. */
static bool resize_general(Imp *im, Value *x, AttrList *l, const char *coord, const char *policy,
                           const int64_t *axes, int k)
{
    int r = vrank(x);
    double ones[MAX_RANK], zo[2 * MAX_RANK];
    for (int i = 0; i < r; i++) {
        ones[i] = 1;
        zo[i] = 0;
        zo[r + i] = 1;
    }
    Value *shp = build_shape_of(im->g, x), *L = imp_cvt(im, shp, DT_F64);
    Value *vsizes = IN(3), *vscales = IN(2), *sizes, *scales;
    if (vsizes) {
        if (vec_len(vsizes) != k || vdt(vsizes) != DT_I64)
            return imp_err(im, "sizes must be i64[%d]", k);
        if (!strcmp(policy, "stretch")) {
            sizes = scatter_axes(im, vsizes, shp, axes, k, r);
            scales = imp_bin(im, OP_DIV, imp_cvt(im, sizes, DT_F64), L);
        } else {
            if (strcmp(policy, "not_larger") && strcmp(policy, "not_smaller"))
                return imp_errk(im, DIAG_UNSUPPORTED, "keep_aspect_ratio_policy \"%s\" is not supported", policy);
            Value *ratio = imp_bin(im, OP_DIV, imp_cvt(im, vsizes, DT_F64), gather0(im, L, imp_i64s(im, axes, k)));
            int64_t a0 = 0;
            Value *sc = imp_reduce(im, ratio, strcmp(policy, "not_larger") ? "max" : "min", &a0, 1, false);
            Dim *kd = dc(im, k);
            scales = scatter_axes(im, imp_broadcast_to(im, sc, &kd, 1), f64s(im, ones, r), axes, k, r);
            /* round half up, as the reference */
            sizes = imp_cvt(im, imp_un(im, OP_FLOOR, imp_binc(im, OP_ADD, imp_bin(im, OP_MUL, scales, L), 0.5)),
                            DT_I64);
        }
    } else {
        if (!vscales)
            return imp_err(im, "needs scales or sizes");
        if (vec_len(vscales) != k || !dtype_is_float(vdt(vscales)))
            return imp_err(im, "scales must be a float[%d]", k);
        scales = scatter_axes(im, imp_cvt(im, vscales, DT_F64), f64s(im, ones, r), axes, k, r);
        sizes = imp_cvt(im, imp_un(im, OP_FLOOR, imp_bin(im, OP_MUL, scales, L)), DT_I64);
    }
    Value *roi;
    if (!strcmp(coord, "tf_crop_and_resize")) {
        Value *vroi = IN(1);
        if (vec_len(vroi) != 2 * k || !dtype_is_float(vdt(vroi)))
            return imp_err(im, "tf_crop_and_resize needs a roi of 2 * %d floats", k);
        roi = imp_cvt(im, vroi, DT_F64);
        bool ident = k == r;
        for (int i = 0; ident && i < k; i++)
            ident = axes[i] == i;
        if (!ident) {
            int64_t idx[2 * MAX_RANK];
            for (int i = 0; i < r; i++) {
                idx[i] = 2 * k + i;
                idx[r + i] = 2 * k + r + i;
                for (int j = 0; j < k; j++)
                    if (axes[j] == i) {
                        idx[i] = j;
                        idx[r + i] = k + j;
                    }
            }
            roi = gather0(im, build_concat(im->g, (Value *[]){roi, f64s(im, zo, 2 * r)}, 2, 0),
                          imp_i64s(im, idx, 2 * r));
        }
    } else {
        roi = f64s(im, zo, 2 * r);
    }
    if (!sizes || !scales || !roi)
        return imp_fail(im);
    Value *in[4] = {x, sizes, scales, roi};
    Op *op = build_op(im->g, OP_DYN_RESIZE_SCALES, in, 4, l->v, l->n);
    return imp_done(im, op ? op->out[0] : NULL);
}

bool onnx_lower_resize(Imp *im)
{
    Value *x = imp_need(im, 0);
    const char *mode, *coord, *nearest, *policy;
    double cubic_a, extrap;
    int64_t excl, aa, *sizes, *axes;
    int ns = -1, r, k;
    if (!x || !attr_str(im, "mode", "nearest", &mode) ||
        !attr_str(im, "coordinate_transformation_mode", "half_pixel", &coord) ||
        !attr_str(im, "nearest_mode", "round_prefer_floor", &nearest) ||
        !attr_float(im, "cubic_coeff_a", -0.75, &cubic_a) || !attr_int(im, "exclude_outside", 0, &excl) ||
        !attr_int(im, "antialias", 0, &aa) || !attr_float(im, "extrapolation_value", 0, &extrap) ||
        !attr_str(im, "keep_aspect_ratio_policy", "stretch", &policy) || !attr_ints(im, "axes", &axes, &k))
        return false;
    if (strcmp(mode, "nearest") && strcmp(mode, "linear") && strcmp(mode, "cubic"))
        return imp_errk(im, DIAG_UNSUPPORTED, "mode \"%s\" is not supported", mode);
    if (strcmp(coord, "half_pixel") && strcmp(coord, "asymmetric") && strcmp(coord, "align_corners") &&
        strcmp(coord, "pytorch_half_pixel") && strcmp(coord, "half_pixel_symmetric") &&
        strcmp(coord, "tf_crop_and_resize"))
        return imp_errk(im, DIAG_UNSUPPORTED, "coordinate_transformation_mode \"%s\" is not supported", coord);
    r = vrank(x);
    int64_t all[MAX_RANK];
    if (!axes) {
        for (int i = 0; i < r; i++)
            all[i] = i;
        axes = all;
        k = r;
    } else {
        if (k > r)
            return imp_err(im, "axes has %d entries for rank %d", k, r);
        for (int i = 0; i < k; i++) /* in the given order: it pairs with scales, sizes, roi */
            if (!imp_axis(im, axes[i], r, &axes[i]))
                return false;
        for (int i = 0; i < k; i++)
            for (int j = 0; j < i; j++)
                if (axes[i] == axes[j])
                    return imp_err(im, "axes repeats axis %lld", (long long)axes[i]);
    }
    bool plain = k == r && !strcmp(policy, "stretch") && !aa && strcmp(coord, "tf_crop_and_resize");
    for (int i = 0; plain && i < k; i++)
        plain = axes[i] == i;
    AttrList l = {0};
    attrs_add_str(im->g, &l, "mode", mode);
    attrs_add_str(im->g, &l, "coord", coord);
    attrs_add_str(im->g, &l, "nearest", nearest);
    attrs_add_float(im->g, &l, "cubic_a", cubic_a);
    attrs_add_int(im->g, &l, "exclude_outside", excl);
    if (!plain) {
        attrs_add_int(im->g, &l, "antialias", aa != 0);
        attrs_add_float(im->g, &l, "extrapolation", extrap);
        return resize_general(im, x, &l, coord, policy, axes, k);
    }
    Value *vsizes = IN(3), *vscales = IN(2);
    if (vsizes && !imp_const_ints(im, vsizes, &sizes, &ns)) {
        Value *in[2] = {x, vsizes};
        Op *op = build_op(im->g, OP_DYN_RESIZE, in, 2, l.v, l.n);
        return imp_done(im, op ? op->out[0] : NULL);
    }
    Dim *dims[MAX_RANK];
    if (vsizes) {
        if (ns != r)
            return imp_err(im, "sizes has %d entries for rank %d", ns, r);
        for (int i = 0; i < r; i++)
            dims[i] = dc(im, sizes[i]);
        attrs_add_dims(im->g, &l, "shape", dims, r);
        Op *op = build_op(im->g, OP_RESIZE, &x, 1, l.v, l.n);
        return imp_done(im, op ? op->out[0] : NULL);
    }
    if (!vscales)
        return imp_err(im, "needs scales or sizes");
    size_t n;
    if (vdt(vscales) != DT_F32 || !type_static_numel(&vscales->type, &n) || (int)n != r ||
        !vscales->def || vscales->def->kind != OP_CONST)
        return resize_general(im, x, &l, coord, policy, axes, k); /* scales known at run time */
    const float *sc = vscales->def->cst->data;
    double scales[MAX_RANK];
    for (int i = 0; i < r; i++) {
        scales[i] = sc[i];
        dims[i] = scaled_dim(im, vdims(x)[i], sc[i]);
        if (!dims[i] || sc[i] <= 0)
            return imp_errk(im, DIAG_UNSUPPORTED, "scale %g on axis %d is not supported", sc[i], i);
    }
    attrs_add_dims(im->g, &l, "shape", dims, r);
    attrs_add_floats(im->g, &l, "scales", scales, r);
    Op *op = build_op(im->g, OP_RESIZE, &x, 1, l.v, l.n);
    return imp_done(im, op ? op->out[0] : NULL);
}

/* Upsample (opsets 7 to 9) and Resize of opset 10: X and its scales (an
 * attribute before opset 9, else an input), mode nearest or linear, with
 * the asymmetric coordinate transform (source x = o / s), as ONNX Runtime
 * runs them. Nearest rounds the source position down when it enlarges and
 * up when it shrinks every axis (ONNX Runtime's "simple" mode); constant
 * scales that enlarge some axes and shrink others are refused, and
 * run-time scales round down (Upsample's scales are >= 1 by the spec). */
bool onnx_lower_upsample(Imp *im)
{
    Value *x = imp_need(im, 0), *vs = NULL;
    const char *mode;
    double sc[MAX_RANK];
    bool known = true;
    if (!x || !attr_str(im, "mode", "nearest", &mode))
        return false;
    if (strcmp(mode, "nearest") && strcmp(mode, "linear"))
        return imp_errk(im, DIAG_UNSUPPORTED, "mode \"%s\" is not supported", mode);
    int r = vrank(x);
    if (im->opset < 9) {
        double *a;
        int n;
        if (!attr_floats(im, "scales", &a, &n))
            return false;
        if (n != r)
            return imp_err(im, "scales needs %d entries", r);
        memcpy(sc, a, (size_t)r * sizeof *sc);
    } else {
        if (!(vs = imp_need(im, 1)))
            return false;
        if (vec_len(vs) != r || vdt(vs) != DT_F32)
            return imp_err(im, "scales must be f32[%d]", r);
        known = vs->def && vs->def->kind == OP_CONST;
        for (int i = 0; known && i < r; i++)
            sc[i] = ((const float *)vs->def->cst->data)[i];
    }
    bool up = true, down = true;
    for (int i = 0; known && i < r; i++) {
        if (!(sc[i] > 0))
            return imp_err(im, "scale %g on axis %d is not positive", sc[i], i);
        up &= sc[i] >= 1;
        down &= sc[i] <= 1;
    }
    if (!up && !down)
        return imp_errk(im, DIAG_UNSUPPORTED, "nearest rounding for scales that enlarge some axes and "
                        "shrink others is not supported");
    AttrList l = {0};
    attrs_add_str(im->g, &l, "mode", mode);
    attrs_add_str(im->g, &l, "coord", "asymmetric");
    attrs_add_str(im->g, &l, "nearest", up ? "floor" : "ceil");
    attrs_add_float(im->g, &l, "cubic_a", -0.75);
    attrs_add_int(im->g, &l, "exclude_outside", 0);
    if (!known) { /* resize_general reads the scales as Resize's input 2 */
        int64_t all[MAX_RANK];
        for (int i = 0; i < r; i++)
            all[i] = i;
        Value *in[4] = {x, NULL, vs, NULL}, **saved = im->in;
        int nsaved = im->nin;
        im->in = in;
        im->nin = 3;
        attrs_add_int(im->g, &l, "antialias", 0);
        attrs_add_float(im->g, &l, "extrapolation", 0);
        bool ok = resize_general(im, x, &l, "asymmetric", "stretch", all, r);
        im->in = saved;
        im->nin = nsaved;
        return ok;
    }
    Dim *dims[MAX_RANK];
    for (int i = 0; i < r; i++)
        if (!(dims[i] = scaled_dim(im, vdims(x)[i], sc[i])))
            return imp_errk(im, DIAG_UNSUPPORTED, "scale %g on axis %d is not supported", sc[i], i);
    attrs_add_dims(im->g, &l, "shape", dims, r);
    attrs_add_floats(im->g, &l, "scales", sc, r);
    Op *op = build_op(im->g, OP_RESIZE, &x, 1, l.v, l.n);
    return imp_done(im, op ? op->out[0] : NULL);
}

/* ---- AffineGrid ----
 *
 * The sampling grid of an affine transform, GridSample's input: for theta
 * [N, 2, 3] and size (N, C, H, W), result [N, H, W, 2] with result[n, h,
 * w] = theta[n] . (x_w, y_h, 1); for theta [N, 3, 4] and size (N, C, D, H,
 * W), [N, D, H, W, 3] with (x_w, y_h, z_d, 1). A coordinate along an axis
 * of length L is -1 + 2i / (L - 1) with align_corners, else -1 + (2i + 1)
 * / L. Computed in f64 as the reference does, elementwise (the transform
 * has 3 or 4 terms); the lengths are read from size at run time unless
 * it is a constant. */

/* The coordinates along an axis of length size[k], as [1, ..., L, ..., 1]
 * (rank nsp + 1, L at position pos). */
static Value *affine_coords(Imp *im, Value *size, int k, bool align, int pos, int rank)
{
    int64_t *c;
    int n;
    Value *io, *len = gather0(im, imp_cvt(im, size, DT_I64), imp_i64s(im, (int64_t[]){k}, 1));
    if (imp_const_ints(im, size, &c, &n)) {
        Dim *d = dc(im, c[k]);
        io = build_iota(im->g, DT_F64, &d, 1, 0);
    } else {
        AttrList l = {0};
        attrs_add_dtype(im->g, &l, "dtype", DT_F64);
        attrs_add_int(im->g, &l, "axis", 0);
        Op *op = len ? build_op(im->g, OP_DYN_IOTA, &len, 1, l.v, l.n) : NULL;
        io = op ? op->out[0] : NULL;
    }
    if (!io)
        return NULL;
    Value *lf = imp_cvt(im, len, DT_F64), *v;
    if (align)
        v = imp_bin(im, OP_DIV, imp_binc(im, OP_MUL, io, 2), imp_binc(im, OP_SUB, lf, 1));
    else
        v = imp_bin(im, OP_DIV, imp_binc(im, OP_ADD, imp_binc(im, OP_MUL, io, 2), 1), lf);
    Dim *d[MAX_RANK];
    for (int i = 0; i < rank; i++)
        d[i] = i == pos ? vdims(io)[0] : dc(im, 1);
    return imp_reshape(im, imp_binc(im, OP_SUB, v, 1), d, rank);
}

bool onnx_lower_affine_grid(Imp *im)
{
    Value *th = imp_need(im, 0), *size = imp_need(im, 1);
    int64_t align;
    if (!th || !size || !attr_int(im, "align_corners", 0, &align))
        return false;
    if (vrank(th) != 3 || !dtype_is_float(vdt(th)) || !dim_is_const(vdims(th)[1]) ||
        !dim_is_const(vdims(th)[2]) || !(dim_is(vdims(th)[1], 2) || dim_is(vdims(th)[1], 3)) ||
        vdims(th)[2]->c != vdims(th)[1]->c + 1)
        return imp_err(im, "theta must be a float [N, 2, 3] or [N, 3, 4]");
    int nsp = (int)vdims(th)[1]->c, rank = nsp + 1;
    if (vrank(size) != 1 || !dtype_is_int(vdt(size)) || !dim_is(vdims(size)[0], nsp + 2))
        return imp_err(im, "size must be an integer vector of %d entries", nsp + 2);
    /* coordinates x (along the last axis), y, z, each [1, ..., L, ..., 1] */
    Value *co[3];
    for (int j = 0; j < nsp; j++)
        co[j] = affine_coords(im, size, nsp + 1 - j, align != 0, nsp - j, rank);
    Value *t = imp_cvt(im, th, DT_F64), *outs[3];
    Dim *td[MAX_RANK];
    td[0] = vdims(th)[0];
    for (int i = 1; i < rank; i++)
        td[i] = dc(im, 1);
    for (int j = 0; j < nsp; j++) { /* result component j: sum over k of theta[n, j, k] * coord_k */
        Value *acc = NULL;
        for (int k = 0; k <= nsp; k++) {
            Value *tjk = imp_reshape(im, imp_slice1(im, imp_slice1(im, t, 1, dc(im, j), dc(im, j + 1), 1), 2,
                                                    dc(im, k), dc(im, k + 1), 1), td, rank);
            Value *term = k < nsp ? imp_bin(im, OP_MUL, tjk, co[k]) : tjk;
            acc = acc ? imp_bin(im, OP_ADD, acc, term) : term;
        }
        int64_t last = rank;
        outs[j] = imp_unsqueeze(im, acc, &last, 1);
        if (!outs[j])
            return imp_fail(im);
    }
    /* every component to the full shape [N, spatial...], then stacked */
    Dim *full[MAX_RANK];
    full[0] = vdims(th)[0];
    for (int i = 1; i < rank; i++)
        full[i] = vdims(co[nsp - i])[i];
    full[rank] = dc(im, 1);
    for (int j = 0; j < nsp; j++)
        outs[j] = imp_broadcast_to(im, outs[j], full, rank + 1);
    Value *y = outs[0] ? build_concat(im->g, outs, nsp, rank) : NULL;
    return imp_done(im, imp_cvt(im, y, vdt(th)));
}

/* ---- GridSample ----
 *
 * X [N, C, H, W] sampled at the points of grid [N, Ho, Wo, 2] ((x, y) in
 * [-1, 1]), or X [N, C, D, H, W] at grid [N, Do, Ho, Wo, 3] ((x, y, z)),
 * spelled out with core ops: the points are unnormalised to pixel
 * coordinates (align_corners: -1 and 1 are the centres of the corner
 * pixels, else their outer edges), and each result element is a gather of
 * X flattened to [N, C, H*W] at y * W + x (or [N, C, D*H*W] at (z * H + y)
 * * W + x): one gather for nearest (rounding half to even, as ONNX Runtime
 * and PyTorch), four (eight) weighted ones for bilinear, sixteen for
 * bicubic (Keys' kernel, A = -0.75; 2-D only, as the spec). Outside the
 * bounds (-0.5 and size - 0.5, or 0 and size - 1 with align_corners)
 * padding_mode zeros leaves a point alone and gives 0 for each tap outside
 * X, border clamps the point into [0, size - 1] (not for bicubic, as
 * PyTorch and ONNX Runtime, unlike onnx's reference) and every tap into X,
 * reflection reflects the point and every tap about the bounds as often as
 * it takes; the steps are ONNX Runtime's. */

typedef struct Sampler {
    int nsp;          /* 2 or 3 spatial dims */
    Value *flat;      /* X as [N, C, prod(spatial)] */
    Value *size[3];   /* W, H (and D) as f32 scalars: the sizes along x, y, z */
    Dim *dims[3];     /* the gather's result: [N, C, P] */
    bool zeros;       /* padding_mode zeros */
    bool reflect;     /* padding_mode reflection: taps reflected */
    bool align;       /* align_corners */
} Sampler;

static Value *grid_reflect(Imp *im, Value *v, Value *size, bool align);

/* X at integer-valued f32 coordinates ci[k] [N, 1, P] (x, y, z): [N, C, P]. */
static Value *grid_tap(Imp *im, const Sampler *s, Value *const *ci)
{
    Value *zero = imp_scalar(im, DT_F32, 0), *idx = NULL, *in = NULL;
    for (int k = s->nsp - 1; k >= 0; k--) {
        Value *c = s->reflect ? grid_reflect(im, ci[k], s->size[k], s->align) : ci[k];
        Value *m1 = imp_binc(im, OP_SUB, s->size[k], 1);
        Value *cc = imp_bin(im, OP_MIN, imp_bin(im, OP_MAX, c, zero), m1);
        idx = idx ? imp_bin(im, OP_ADD, imp_bin(im, OP_MUL, idx, s->size[k]), cc) : cc;
        Value *ok = imp_bin(im, OP_AND, imp_cmp(im, "ge", c, zero), imp_cmp(im, "le", c, m1));
        in = in ? imp_bin(im, OP_AND, in, ok) : ok;
    }
    idx = imp_broadcast_to(im, imp_cvt(im, idx, DT_I64), s->dims, 3);
    if (!idx || !s->flat)
        return NULL;
    AttrList l = {0};
    attrs_add_int(im->g, &l, "axis", 2);
    Op *g = build_op(im->g, OP_GATHER_ELEMENTS, (Value *[]){s->flat, idx}, 2, l.v, l.n);
    if (!g)
        return NULL;
    return s->zeros ? imp_sel(im, in, g->out[0], zero) : g->out[0];
}

/* v reflected into [lo, hi] (lo = -0.5, hi = size - 0.5; with align 0 and
 * size - 1): with d = |v - lo| and span = hi - lo, lo + (d mod span) after
 * an even number of whole spans, hi - (d mod span) after an odd one. A
 * span of 0 (one pixel, align) gives lo. */
static Value *grid_reflect(Imp *im, Value *v, Value *size, bool align)
{
    Value *lo = imp_scalar(im, DT_F32, align ? 0 : -0.5);
    Value *hi = imp_binc(im, OP_SUB, size, align ? 1 : 0.5);
    Value *span = imp_bin(im, OP_SUB, hi, lo);
    Value *safe = imp_bin(im, OP_MAX, span, imp_scalar(im, DT_F32, 1));
    Value *d = imp_un(im, OP_ABS, imp_bin(im, OP_SUB, v, lo));
    Value *flips = imp_un(im, OP_FLOOR, imp_bin(im, OP_DIV, d, safe));
    Value *extra = imp_bin(im, OP_SUB, d, imp_bin(im, OP_MUL, flips, safe));
    Value *odd = imp_bin(im, OP_SUB, flips, imp_binc(im, OP_MUL, imp_un(im, OP_FLOOR, imp_binc(im, OP_MUL, flips, 0.5)), 2));
    Value *r = imp_sel(im, imp_cmp(im, "eq", odd, imp_scalar(im, DT_F32, 0)), imp_bin(im, OP_ADD, lo, extra),
                       imp_bin(im, OP_SUB, hi, extra));
    return imp_sel(im, imp_cmp(im, "gt", span, imp_scalar(im, DT_F32, 0)), r, lo);
}

/* border: v clamped into [0, size - 1] where it lies outside the bounds
 * (-0.5 and size - 0.5; 0 and size - 1 with align). */
static Value *grid_border(Imp *im, Value *v, Value *size, bool align)
{
    Value *lo = imp_scalar(im, DT_F32, align ? 0 : -0.5), *hi = imp_binc(im, OP_SUB, size, align ? 1 : 0.5);
    Value *out = imp_bin(im, OP_OR, imp_cmp(im, "lt", v, lo), imp_cmp(im, "gt", v, hi));
    Value *cl = imp_bin(im, OP_MIN, imp_bin(im, OP_MAX, v, imp_scalar(im, DT_F32, 0)), imp_binc(im, OP_SUB, size, 1));
    return imp_sel(im, out, cl, v);
}

/* The weights of the four taps at distances t + 1, t, 1 - t, 2 - t
 * (t in [0, 1)): Keys' cubic convolution with A = -0.75. */
static void grid_cubic(Imp *im, Value *t, Value *c[4])
{
    const double A = -0.75;
    Value *d[4] = {imp_binc(im, OP_ADD, t, 1), t, imp_bin(im, OP_SUB, imp_scalar(im, DT_F32, 1), t),
                   imp_bin(im, OP_SUB, imp_scalar(im, DT_F32, 2), t)};
    for (int k = 0; k < 4; k++) {
        Value *x = d[k];
        if (k == 1 || k == 2) /* |x| <= 1: ((A + 2) x - (A + 3)) x^2 + 1 */
            c[k] = imp_binc(im, OP_ADD, imp_bin(im, OP_MUL, imp_binc(im, OP_SUB, imp_binc(im, OP_MUL, x, A + 2), A + 3),
                                                imp_bin(im, OP_MUL, x, x)), 1);
        else /* 1 < |x| < 2: ((A x - 5A) x + 8A) x - 4A */
            c[k] = imp_binc(im, OP_SUB, imp_bin(im, OP_MUL, imp_binc(im, OP_ADD, imp_bin(im, OP_MUL,
                                imp_binc(im, OP_SUB, imp_binc(im, OP_MUL, x, A), 5 * A), x), 8 * A), x), 4 * A);
    }
}

bool onnx_lower_grid_sample(Imp *im)
{
    Value *x = imp_need(im, 0), *grid = imp_need(im, 1);
    int64_t align;
    const char *mode, *pad;
    if (!x || !grid || !attr_int(im, "align_corners", 0, &align) || !attr_str(im, "mode", "bilinear", &mode) ||
        !attr_str(im, "padding_mode", "zeros", &pad))
        return false;
    bool nearest = !strcmp(mode, "nearest"), cubic = !strcmp(mode, "bicubic") || !strcmp(mode, "cubic");
    if (!nearest && !cubic && strcmp(mode, "bilinear") && strcmp(mode, "linear"))
        return imp_errk(im, DIAG_UNSUPPORTED, "mode \"%s\" is not supported", mode);
    if (strcmp(pad, "zeros") && strcmp(pad, "border") && strcmp(pad, "reflection"))
        return imp_errk(im, DIAG_UNSUPPORTED, "padding_mode \"%s\" is not supported", pad);
    int r = vrank(x), nsp = r - 2;
    if ((r != 4 && r != 5) || vrank(grid) != r || !dim_is(vdims(grid)[r - 1], nsp))
        return imp_errk(im, DIAG_UNSUPPORTED, "only X [N, C, H, W] with grid [N, Ho, Wo, 2] and "
                        "X [N, C, D, H, W] with grid [N, Do, Ho, Wo, 3] are supported");
    if (cubic && nsp != 2)
        return imp_err(im, "mode \"%s\" needs 2-D data", mode);
    if (!dtype_is_float(vdt(x)) || !dtype_is_float(vdt(grid)))
        return imp_err(im, "X and grid must be floating point");
    Dim *n = vdims(x)[0], *c = vdims(x)[1], *sp = dc(im, 1), *p = dc(im, 1);
    for (int i = 2; i < r; i++)
        sp = dim_mul(CX, sp, vdims(x)[i]);
    for (int i = 1; i < r - 1; i++)
        p = dim_mul(CX, p, vdims(grid)[i]);
    if (!sp || !p)
        return imp_err(im, "dims overflow");
    Sampler s = {.nsp = nsp, .zeros = !strcmp(pad, "zeros"), .reflect = !strcmp(pad, "reflection"),
                 .align = align != 0};
    Value *xf = imp_cvt(im, x, DT_F32);
    s.flat = imp_reshape(im, xf, (Dim *[]){n, c, sp}, 3);
    for (int k = 0; k < nsp; k++)
        s.size[k] = imp_cvt(im, build_dim(im->g, x, r - 1 - k), DT_F32);
    s.dims[0] = n, s.dims[1] = c, s.dims[2] = p;
    /* the coordinates of every point, [N, 1, P] each; in pixels:
     * align ? (g + 1) / 2 * (size - 1) : ((g + 1) * size - 1) / 2 */
    Value *g = imp_cvt(im, grid, DT_F32), *ic[3];
    Dim *pd[3] = {vdims(grid)[0], dc(im, 1), p};
    for (int k = 0; k < nsp; k++) {
        Value *gk = imp_reshape(im, imp_slice1(im, g, r - 1, dc(im, k), dc(im, k + 1), 1), pd, 3);
        if (align)
            ic[k] = imp_bin(im, OP_MUL, imp_binc(im, OP_MUL, imp_binc(im, OP_ADD, gk, 1), 0.5),
                            imp_binc(im, OP_SUB, s.size[k], 1));
        else
            ic[k] = imp_binc(im, OP_MUL, imp_binc(im, OP_SUB, imp_bin(im, OP_MUL, imp_binc(im, OP_ADD, gk, 1),
                                                                      s.size[k]), 1), 0.5);
        if (!strcmp(pad, "reflection"))
            ic[k] = grid_reflect(im, ic[k], s.size[k], align != 0);
        else if (!s.zeros && !cubic) /* border: a point outside the bounds clamped into the image */
            ic[k] = grid_border(im, ic[k], s.size[k], align != 0);
    }
    Value *out = NULL, *t[3];
    if (cubic) {
        Value *x0 = imp_binc(im, OP_SUB, imp_un(im, OP_FLOOR, ic[0]), 1);
        Value *y0 = imp_binc(im, OP_SUB, imp_un(im, OP_FLOOR, ic[1]), 1);
        Value *cx[4], *cy[4];
        grid_cubic(im, imp_binc(im, OP_SUB, imp_bin(im, OP_SUB, ic[0], x0), 1), cx);
        grid_cubic(im, imp_binc(im, OP_SUB, imp_bin(im, OP_SUB, ic[1], y0), 1), cy);
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++) {
                t[0] = imp_binc(im, OP_ADD, x0, j);
                t[1] = imp_binc(im, OP_ADD, y0, i);
                Value *v = imp_bin(im, OP_MUL, grid_tap(im, &s, t), imp_bin(im, OP_MUL, cy[i], cx[j]));
                out = out ? imp_bin(im, OP_ADD, out, v) : v;
            }
    } else if (nearest) {
        for (int k = 0; k < nsp; k++)
            t[k] = imp_un(im, OP_ROUND, ic[k]);
        out = grid_tap(im, &s, t);
    } else { /* the 2^nsp corners, each weighted by the product of its sides' weights */
        Value *lo[3], *w1[3], *w0[3];
        for (int k = 0; k < nsp; k++) {
            lo[k] = imp_un(im, OP_FLOOR, ic[k]);
            w1[k] = imp_bin(im, OP_SUB, ic[k], lo[k]);
            w0[k] = imp_bin(im, OP_SUB, imp_scalar(im, DT_F32, 1), w1[k]);
        }
        for (int corner = 0; corner < 1 << nsp; corner++) {
            Value *w = NULL;
            for (int k = 0; k < nsp; k++) {
                bool up = corner >> k & 1;
                t[k] = up ? imp_binc(im, OP_ADD, lo[k], 1) : lo[k];
                w = w ? imp_bin(im, OP_MUL, w, up ? w1[k] : w0[k]) : up ? w1[k] : w0[k];
            }
            Value *v = imp_bin(im, OP_MUL, grid_tap(im, &s, t), w);
            out = out ? imp_bin(im, OP_ADD, out, v) : v;
        }
    }
    Dim *od[5] = {n, c};
    for (int i = 2; i < r; i++)
        od[i] = vdims(grid)[i - 1];
    out = imp_reshape(im, out, od, r);
    return imp_done(im, imp_cvt(im, out, vdt(x)));
}
