/*
 * lower_unique.c — ONNX Unique on core ops; the number of unique values
 * (U) is data-dependent, from a nonzero.
 *
 * Outputs: Y (the unique values, or slices along axis), indices (the
 * first occurrence of each in the input), inverse_indices (for every
 * element or slice, its entry in Y) and counts. sorted = 1 orders Y
 * ascending (slices lexicographically); sorted = 0 in the order of first
 * occurrence.
 *
 * Without axis (the input flattened, n elements): a stable ascending sort
 * (topk of all n, ties by the lower index), the elements that differ from
 * their predecessor start the groups, a running sum numbers the groups,
 * and scatters back give the inverse and the counts: O(n log n).
 *
 * With axis (R slices of M elements each, as rows [R, M]): the pairwise
 * relations of rows: equal, and less (at the first column where they
 * differ); a row is a unique row where no earlier row equals it, and its
 * rank among the unique rows is the number of unique rows less than it
 * (sorted) or before it (in order of occurrence): O(R^2 M).
 */
#include "frontends/onnx/internal.h"

#define CX (&im->g->dims)

static Dim *dc(Imp *im, int64_t c) { return dim_const(CX, c); }

static Value *ax_op(Imp *im, OpKind k, Value *const *in, int n, int64_t axis, const char *red)
{
    for (int i = 0; i < n; i++)
        if (!in[i])
            return NULL;
    AttrList l = {0};
    attrs_add_int(im->g, &l, "axis", axis);
    if (red)
        attrs_add_str(im->g, &l, "reduction", red);
    Op *op = build_op(im->g, k, in, n, l.v, l.n);
    return op ? op->out[0] : NULL;
}

static Value *gather(Imp *im, Value *x, Value *idx, int64_t axis)
{
    return ax_op(im, OP_GATHER, (Value *[]){x, idx}, 2, axis, NULL);
}

/* x[idx[i]] = upd[i] into base, 1-D */
static Value *scatter(Imp *im, Value *base, Value *idx, Value *upd, const char *red)
{
    return ax_op(im, OP_SCATTER_ELEMENTS, (Value *[]){base, idx, upd}, 3, 0, red);
}

static Value *fill(Imp *im, DType dt, double v, Dim *n)
{
    return imp_broadcast_to(im, imp_scalar(im, dt, v), &n, 1);
}

/* The positions where the 1-D bool m is true, i64[U]. */
static Value *where_true(Imp *im, Value *m)
{
    Op *nz = m ? build_op(im->g, OP_NONZERO, &m, 1, NULL, 0) : NULL;
    return nz ? imp_reshape(im, nz->out[0], &vdims(nz->out[0])[1], 1) : NULL;
}

/* The k smallest of the 1-D v (k: an i64[1] value) in ascending order,
 * ties by the lower index: values and indices. */
static bool sort_asc(Imp *im, Value *v, Value *k, Value **vals, Value **idx)
{
    if (!v || !k)
        return false;
    AttrList l = {0};
    attrs_add_int(im->g, &l, "axis", 0);
    attrs_add_int(im->g, &l, "largest", 0);
    attrs_add_int(im->g, &l, "sorted", 1);
    Op *op = build_op(im->g, OP_TOPK, (Value *[]){v, k}, 2, l.v, l.n);
    if (!op)
        return false;
    *vals = op->out[0];
    *idx = op->out[1];
    return true;
}

/* Y, indices, inverse, counts of the flattened x. */
static bool unique_flat(Imp *im, Value *x, bool sorted, Value **out)
{
    Dim *n = dc(im, 1);
    for (int i = 0; i < vrank(x); i++)
        n = dim_mul(CX, n, vdims(x)[i]);
    Value *v = imp_reshape(im, x, &n, 1), *sv, *si;
    if (!sort_asc(im, v, build_shape_of(im->g, v), &sv, &si))
        return false;
    /* first[i]: sv[i] starts a group (i = 0, or it differs from sv[i - 1]) */
    Dim *n1 = dim_addc(CX, n, -1);
    Value *ne = imp_cmp(im, "ne", imp_slice1(im, sv, 0, dc(im, 1), n, 1), imp_slice1(im, sv, 0, dc(im, 0), n1, 1));
    Dim *one = dc(im, 1);
    Value *t1 = imp_reshape(im, imp_scalar(im, DT_BOOL, 1), &one, 1);
    Value *first = ne && t1 ? build_concat(im->g, (Value *[]){t1, ne}, 2, 0) : NULL;
    AttrList lc = {0};
    attrs_add_int(im->g, &lc, "axis", 0);
    attrs_add_int(im->g, &lc, "exclusive", 0);
    attrs_add_int(im->g, &lc, "reverse", 0);
    Value *fi = imp_cvt(im, first, DT_I64);
    Op *cs = fi ? build_op(im->g, OP_CUMSUM, &fi, 1, lc.v, lc.n) : NULL;
    if (!cs)
        return false;
    Value *grp = imp_binc(im, OP_SUB, cs->out[0], 1); /* group of each sorted element */
    Value *pos = where_true(im, first);
    if (!pos)
        return false;
    Dim *u = vdims(pos)[0];
    Value *y = gather(im, sv, pos, 0), *ix = gather(im, si, pos, 0);
    Value *cnt = scatter(im, fill(im, DT_I64, 0, u), grp, fill(im, DT_I64, 1, n), "add");
    Value *inv = scatter(im, fill(im, DT_I64, 0, n), si, grp, "none");
    if (!sorted) { /* the groups in order of first occurrence */
        Value *occ, *p;
        if (!sort_asc(im, ix, build_shape_of(im->g, pos), &occ, &p))
            return false;
        Value *rank = scatter(im, fill(im, DT_I64, 0, u), p, build_iota(im->g, DT_I64, &u, 1, 0), "none");
        y = gather(im, y, p, 0);
        ix = occ;
        cnt = gather(im, cnt, p, 0);
        inv = gather(im, rank, inv, 0);
    }
    out[0] = y, out[1] = ix, out[2] = inv, out[3] = cnt;
    return y && ix && inv && cnt;
}

/* Y, indices, inverse, counts of the slices of x along axis. */
static bool unique_axis(Imp *im, Value *x, int64_t axis, bool sorted, Value **out)
{
    int r = vrank(x);
    int64_t perm[MAX_RANK];
    perm[0] = axis;
    for (int i = 0, k = 1; i < r; i++)
        if (i != axis)
            perm[k++] = i;
    Dim *R = vdims(x)[axis], *M = dc(im, 1);
    for (int i = 0; i < r; i++)
        if (i != axis)
            M = dim_mul(CX, M, vdims(x)[i]);
    Dim *rm[2] = {R, M};
    Value *rows = imp_reshape(im, imp_transpose(im, x, perm), rm, 2);
    /* a = rows as [R, 1, M] (row i), b = [1, R, M] (row j) */
    Dim *ad[3] = {R, dc(im, 1), M}, *bd[3] = {dc(im, 1), R, M}, *rr[2] = {R, R};
    Value *a = imp_reshape(im, rows, ad, 3), *b = imp_reshape(im, rows, bd, 3);
    Value *diff = imp_cmp(im, "ne", a, b);
    int64_t two = 2;
    Value *anyd = imp_reduce(im, imp_cvt(im, diff, DT_I32), "max", &two, 1, false);
    Value *eq = imp_cmp(im, "eq", anyd, imp_scalar(im, DT_I32, 0)); /* [R, R]: row i == row j */
    AttrList la = {0};
    attrs_add_int(im->g, &la, "axis", 2);
    attrs_add_int(im->g, &la, "keepdims", 1);
    attrs_add_int(im->g, &la, "last", 0);
    Value *dd = imp_cvt(im, diff, DT_I32);
    Op *fd = dd ? build_op(im->g, OP_ARGMAX, &dd, 1, la.v, la.n) : NULL; /* first differing column */
    if (!fd)
        return false;
    Dim *rrm[3] = {R, R, M};
    Value *at = imp_cmp(im, "eq", build_iota(im->g, DT_I64, rrm, 3, 2), fd->out[0]);
    Value *lt = imp_bin(im, OP_AND, at, imp_cmp(im, "lt", a, b)); /* row i < row j there */
    Value *less = imp_cmp(im, "ne", imp_reduce(im, imp_cvt(im, lt, DT_I32), "max", &two, 1, false),
                          imp_scalar(im, DT_I32, 0));
    /* first[j]: no row i < j equals row j */
    Value *ri = build_iota(im->g, DT_I64, rr, 2, 0), *rj = build_iota(im->g, DT_I64, rr, 2, 1);
    int64_t zero = 0;
    Value *dup = imp_bin(im, OP_AND, eq, imp_cmp(im, "lt", ri, rj));
    Value *first = imp_cmp(im, "eq", imp_reduce(im, imp_cvt(im, dup, DT_I32), "max", &zero, 1, false),
                           imp_scalar(im, DT_I32, 0)); /* [R] */
    Value *pos = where_true(im, first); /* the unique rows, by index */
    if (!pos)
        return false;
    Dim *u = vdims(pos)[0];
    /* the rank of each unique row: the unique rows before it, by value or by index */
    Value *before = sorted ? less : imp_cmp(im, "lt", ri, rj);
    Dim *r1[2] = {R, dc(im, 1)};
    Value *fcol = imp_reshape(im, first, r1, 2);
    Value *rank = imp_reduce(im, imp_cvt(im, imp_bin(im, OP_AND, before, fcol), DT_I64), "sum", &zero, 1, false);
    /* the unique rows in rank order: scatter each to its rank */
    Value *urank = gather(im, rank, pos, 0);
    Value *ix = scatter(im, fill(im, DT_I64, 0, u), urank, pos, "none");
    /* inverse: the rank of the first row equal to each row */
    AttrList lf = {0};
    attrs_add_int(im->g, &lf, "axis", 0);
    attrs_add_int(im->g, &lf, "keepdims", 0);
    attrs_add_int(im->g, &lf, "last", 0);
    Value *eqi = imp_cvt(im, eq, DT_I32);
    Op *fr = eqi ? build_op(im->g, OP_ARGMAX, &eqi, 1, lf.v, lf.n) : NULL;
    if (!fr)
        return false;
    Value *inv = gather(im, rank, fr->out[0], 0);
    Value *cnt = imp_reduce(im, imp_cvt(im, gather(im, eq, ix, 0), DT_I64), "sum", (int64_t[]){1}, 1, false);
    out[0] = gather(im, x, ix, axis), out[1] = ix, out[2] = inv, out[3] = cnt;
    return out[0] && ix && inv && cnt;
}

bool onnx_lower_unique(Imp *im)
{
    Value *x = imp_need(im, 0), *out[4];
    int64_t axis, sorted;
    if (!x || !attr_int(im, "axis", 0, &axis) || !attr_int(im, "sorted", 1, &sorted))
        return false;
    if (vdt(x) == DT_BOOL)
        return imp_errk(im, DIAG_UNSUPPORTED, "Unique of bool is not supported");
    bool ok;
    if (attr_find(im, "axis")) {
        if (vrank(x) < 1 || !imp_axis(im, axis, vrank(x), &axis))
            return vrank(x) < 1 ? imp_err(im, "axis needs an input of rank 1 or more") : false;
        ok = unique_axis(im, x, axis, sorted != 0, out);
    } else {
        ok = unique_flat(im, x, sorted != 0, out);
    }
    if (!ok)
        return im->d->set ? false : imp_fail(im);
    for (int i = 1; i < im->nout && i < 4; i++)
        im->out[i] = out[i];
    return imp_done(im, out[0]);
}
