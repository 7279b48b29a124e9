/*
 * infer.c — result-type rules, one per op family (named in ops.def).
 *
 * A rule reads the operand types and the attributes of an op (which the
 * caller has already checked against the schema: required attributes exist
 * with the right kind) and fills in the result types. Dims are computed
 * symbolically: a slice of [S] from 1 to S-1 has dim S-2, a convolution's
 * output is floordiv(H + pb + pe - d*(k-1) - 1, s) + 1. A dim a rule cannot
 * know from the operands alone (the length of a dyn_reshape's shape tensor
 * entries, NonZero's count) is left NULL; builders give it a fresh symbol
 * and shape analysis resolves it.
 *
 * Broadcasting two dims S and T that are not provably equal gives
 * max(S, T), exact for dims >= 1 (one is 1, or they agree, or the run-time
 * check fails); shape analysis later speculates S == T (see passes/).
 *
 * Rules report invalid operands (wrong dtype, rank, out-of-range axis,
 * statically incompatible dims) into a Diag without naming the op; callers
 * add the location.
 */
#include "ir/ir.h"

#include <string.h>

#define IN(i) (&op->in[i]->type)

static DimCtx *dcx(Graph *g) { return &g->dims; }

static const Attr *attr(const Op *op, const char *name) { return op_attr(op, name); }

static Type same(const Type *t) { return *t; }

static bool fail_dims(Diag *d, const char *what, const Dim *a, const Dim *b)
{
    char sa[128], sb[128];
    dim_snprint(sa, sizeof sa, a);
    dim_snprint(sb, sizeof sb, b);
    return diag_set(d, "%s: %s vs %s", what, sa, sb);
}

/* True if a and b cannot be equal: both constant and different. */
static bool dims_conflict(const Dim *a, const Dim *b)
{
    return a != b && dim_is_const(a) && dim_is_const(b);
}

static bool check_axis(int64_t axis, int rank, const char *what, Diag *d)
{
    if (axis < 0 || axis >= rank)
        return diag_set(d, "%s %lld out of range for rank %d", what, (long long)axis, rank);
    return true;
}

static bool check_dtype(const Type *t, bool ok, const char *what, Diag *d)
{
    if (!ok)
        return diag_set(d, "%s does not accept dtype %s", what, dtype_name(t->dtype));
    return true;
}

static bool is_index(DType t) { return t == DT_I32 || t == DT_I64; }

/* A rank-1 i64 operand with a constant length (a shape tensor). */
static bool shape_operand(const Type *t, const char *what, int *len, Diag *d)
{
    if (t->dtype != DT_I64 || t->rank != 1 || !dim_is_const(t->dims[0]))
        return diag_set(d, "%s must be i64[n] with a constant n", what);
    *len = (int)t->dims[0]->c;
    if (*len > MAX_RANK)
        return diag_set(d, "%s has %d entries, more than the maximum rank %d", what, *len, MAX_RANK);
    return true;
}

static Dim *bcast_dim(Graph *g, Dim *a, Dim *b, Diag *d, bool *ok)
{
    if (a == b || dim_is(b, 1))
        return a;
    if (dim_is(a, 1))
        return b;
    if (dims_conflict(a, b)) {
        *ok = fail_dims(d, "dims cannot broadcast", a, b);
        return NULL;
    }
    int64_t alo, ahi, blo, bhi;
    dim_bounds(a, &alo, &ahi);
    dim_bounds(b, &blo, &bhi);
    if (alo >= 1 && blo >= 1)
        return dim_max(dcx(g), a, b);
    /* either may be 0: the larger where both are at least 1, else 0 (the
     * other is 0 or 1), so the flow computes the dim before the op runs
     * (an elementwise kernel binds no symbol) */
    Dim *one = dim_const(dcx(g), 1);
    return dim_mul(dcx(g), dim_max(dcx(g), a, b), dim_min(dcx(g), dim_min(dcx(g), a, b), one));
}

/* Numpy broadcasting of n types into out (dtype from the first). */
static bool bcast_types(Graph *g, const Type *const *t, int n, Type *out, Diag *d)
{
    int rank = 0;
    for (int i = 0; i < n; i++)
        if (t[i]->rank > rank)
            rank = t[i]->rank;
    Dim *dims[MAX_RANK];
    for (int k = 0; k < rank; k++) {
        Dim *r = dim_const(dcx(g), 1);
        bool ok = true;
        for (int i = 0; i < n && r; i++) {
            int j = k - (rank - t[i]->rank);
            if (j >= 0)
                r = bcast_dim(g, r, t[i]->dims[j], d, &ok);
            if (!ok)
                return false;
        }
        dims[k] = r;
    }
    *out = type_make(&g->arena, t[0]->dtype, rank, dims);
    return true;
}

bool infer_unary(Graph *g, const Op *op, Type *out, Diag *d)
{
    const Type *x = IN(0);
    *out = same(x);
    out->dtype = op_result_dtype(op->kind, x->dtype);
    return check_dtype(x, op_takes_dtype(op->kind, x->dtype), op_info(op->kind)->name, d);
}

static bool same_dtype(const Type *a, const Type *b, Diag *d)
{
    if (a->dtype != b->dtype)
        return diag_set(d, "operand dtypes differ: %s and %s", dtype_name(a->dtype), dtype_name(b->dtype));
    return true;
}

bool infer_binary(Graph *g, const Op *op, Type *out, Diag *d)
{
    const Type *t[2] = {IN(0), IN(1)};
    if (!same_dtype(t[0], t[1], d) || !check_dtype(t[0], op_takes_dtype(op->kind, t[0]->dtype), op_info(op->kind)->name, d))
        return false;
    return bcast_types(g, t, 2, out, d);
}

bool infer_cmp(Graph *g, const Op *op, Type *out, Diag *d)
{
    const Type *t[2] = {IN(0), IN(1)};
    if (!same_dtype(t[0], t[1], d) || !bcast_types(g, t, 2, out, d))
        return false;
    out->dtype = DT_BOOL;
    return true;
}

bool infer_select(Graph *g, const Op *op, Type *out, Diag *d)
{
    const Type *t[3] = {IN(1), IN(0), IN(2)};
    if (IN(0)->dtype != DT_BOOL)
        return diag_set(d, "select condition must be bool, not %s", dtype_name(IN(0)->dtype));
    return same_dtype(IN(1), IN(2), d) && bcast_types(g, t, 3, out, d);
}

bool infer_convert(Graph *g, const Op *op, Type *out, Diag *d)
{
    *out = same(IN(0));
    out->dtype = attr(op, "to")->dt;
    return true;
}

bool infer_broadcast(Graph *g, const Op *op, Type *out, Diag *d)
{
    const Type *x = IN(0);
    const Attr *shape = attr(op, "shape"), *axes = attr(op, "axes");
    if (axes->n != x->rank)
        return diag_set(d, "axes has %d entries for an operand of rank %d", axes->n, x->rank);
    if (shape->n > MAX_RANK)
        return diag_set(d, "result rank %d exceeds %d", shape->n, MAX_RANK);
    bool used[MAX_RANK] = {0};
    for (int i = 0; i < axes->n; i++) {
        int64_t a = axes->ints[i];
        if (!check_axis(a, shape->n, "broadcast axis", d))
            return false;
        if (used[a])
            return diag_set(d, "broadcast axis %lld repeated", (long long)a);
        used[a] = true;
        Dim *xd = x->dims[i], *rd = shape->dims[a];
        if (!dim_is(xd, 1) && dims_conflict(xd, rd))
            return fail_dims(d, "operand dim is neither 1 nor the result dim", xd, rd);
    }
    *out = type_make(&g->arena, x->dtype, shape->n, shape->dims);
    return true;
}

/* dyn_broadcast, dyn_reshape, dyn_resize: result rank from the shape
 * operand's length, dims undetermined. */
bool infer_dyn_shaped(Graph *g, const Op *op, Type *out, Diag *d)
{
    int r = 0;
    if (!shape_operand(IN(1), "shape operand", &r, d))
        return false;
    if (op->kind == OP_DYN_BROADCAST) {
        const Attr *axes = attr(op, "axes");
        if (axes->n != IN(0)->rank)
            return diag_set(d, "axes has %d entries for an operand of rank %d", axes->n, IN(0)->rank);
        for (int i = 0; i < axes->n; i++)
            if (!check_axis(axes->ints[i], r, "broadcast axis", d))
                return false;
    }
    if (op->kind == OP_DYN_RESIZE && r != IN(0)->rank)
        return diag_set(d, "sizes has %d entries for an operand of rank %d", r, IN(0)->rank);
    *out = type_make(&g->arena, IN(0)->dtype, r, NULL);
    return true;
}

bool infer_reshape(Graph *g, const Op *op, Type *out, Diag *d)
{
    const Attr *shape = attr(op, "shape");
    if (shape->n > MAX_RANK)
        return diag_set(d, "result rank %d exceeds %d", shape->n, MAX_RANK);
    *out = type_make(&g->arena, IN(0)->dtype, shape->n, shape->dims);
    Dim *a = type_numel(dcx(g), IN(0)), *b = type_numel(dcx(g), out);
    if (a && b && dims_conflict(a, b))
        return fail_dims(d, "reshape changes the element count", a, b);
    return true;
}

bool infer_transpose(Graph *g, const Op *op, Type *out, Diag *d)
{
    const Type *x = IN(0);
    const Attr *perm = attr(op, "perm");
    if (perm->n != x->rank)
        return diag_set(d, "perm has %d entries for an operand of rank %d", perm->n, x->rank);
    Dim *dims[MAX_RANK];
    bool used[MAX_RANK] = {0};
    for (int i = 0; i < perm->n; i++) {
        int64_t p = perm->ints[i];
        if (!check_axis(p, x->rank, "perm entry", d))
            return false;
        if (used[p])
            return diag_set(d, "perm is not a permutation (%lld repeated)", (long long)p);
        used[p] = true;
        dims[i] = x->dims[p];
    }
    *out = type_make(&g->arena, x->dtype, x->rank, dims);
    return true;
}

bool infer_slice(Graph *g, const Op *op, Type *out, Diag *d)
{
    const Type *x = IN(0);
    const Attr *start = attr(op, "start"), *limit = attr(op, "limit"), *stride = attr(op, "stride");
    if (start->n != x->rank || limit->n != x->rank || stride->n != x->rank)
        return diag_set(d, "start, limit and stride need %d entries each", x->rank);
    Dim *dims[MAX_RANK];
    for (int i = 0; i < x->rank; i++) {
        Dim *s = start->dims[i], *l = limit->dims[i], *n = x->dims[i];
        if (stride->ints[i] <= 0)
            return diag_set(d, "stride %lld on axis %d must be positive", (long long)stride->ints[i], i);
        if ((dim_is_const(s) && s->c < 0) || (dim_is_const(s) && dim_is_const(l) && s->c > l->c) ||
            (dim_is_const(l) && dim_is_const(n) && l->c > n->c))
            return diag_set(d, "slice bounds on axis %d are out of range", i);
        dims[i] = dim_ceildiv(dcx(g), dim_sub(dcx(g), l, s), dim_const(dcx(g), stride->ints[i]));
        if (!dims[i])
            return diag_set(d, "slice size on axis %d overflows", i);
    }
    *out = type_make(&g->arena, x->dtype, x->rank, dims);
    return true;
}

bool infer_dyn_slice(Graph *g, const Op *op, Type *out, Diag *d)
{
    int r = IN(0)->rank;
    static const char *names[] = {"", "starts", "ends", "steps"};
    for (int i = 1; i < 4; i++) {
        int n = 0;
        if (!shape_operand(IN(i), names[i], &n, d))
            return false;
        if (n != r)
            return diag_set(d, "%s has %d entries for an operand of rank %d", names[i], n, r);
    }
    *out = type_make(&g->arena, IN(0)->dtype, r, NULL);
    return true;
}

static bool check_axes(const Attr *axes, int rank, Diag *d)
{
    bool used[MAX_RANK] = {0};
    for (int i = 0; i < axes->n; i++) {
        if (!check_axis(axes->ints[i], rank, "axis", d))
            return false;
        if (used[axes->ints[i]])
            return diag_set(d, "axis %lld repeated", (long long)axes->ints[i]);
        used[axes->ints[i]] = true;
    }
    return true;
}

bool infer_reverse(Graph *g, const Op *op, Type *out, Diag *d)
{
    *out = same(IN(0));
    return check_axes(attr(op, "axes"), IN(0)->rank, d);
}

bool infer_concat(Graph *g, const Op *op, Type *out, Diag *d)
{
    if (op->nin < 1)
        return diag_set(d, "concat needs at least one operand");
    const Type *x = IN(0);
    int64_t axis = attr(op, "axis")->i;
    if (!check_axis(axis, x->rank, "axis", d))
        return false;
    Dim *dims[MAX_RANK];
    for (int k = 0; k < x->rank; k++)
        dims[k] = x->dims[k];
    for (int i = 1; i < op->nin; i++) {
        const Type *t = IN(i);
        if (!same_dtype(x, t, d))
            return false;
        if (t->rank != x->rank)
            return diag_set(d, "operand %d has rank %d, expected %d", i, t->rank, x->rank);
        for (int k = 0; k < x->rank; k++) {
            if (k == axis)
                dims[k] = dim_add(dcx(g), dims[k], t->dims[k]);
            else if (dims_conflict(dims[k], t->dims[k]))
                return fail_dims(d, "concat operands disagree off the axis", dims[k], t->dims[k]);
        }
    }
    *out = type_make(&g->arena, x->dtype, x->rank, dims);
    return true;
}

static bool scalar_value(const Type *x, const Type *v, Diag *d)
{
    if (v->rank != 0)
        return diag_set(d, "pad value must be a scalar");
    return same_dtype(x, v, d);
}

bool infer_pad(Graph *g, const Op *op, Type *out, Diag *d)
{
    const Type *x = IN(0);
    const Attr *lo = attr(op, "low"), *hi = attr(op, "high");
    if (lo->n != x->rank || hi->n != x->rank)
        return diag_set(d, "low and high need %d entries each", x->rank);
    if (!scalar_value(x, IN(1), d))
        return false;
    Dim *dims[MAX_RANK];
    for (int i = 0; i < x->rank; i++) {
        dims[i] = dim_add(dcx(g), dim_add(dcx(g), x->dims[i], lo->dims[i]), hi->dims[i]);
        if (!dims[i])
            return diag_set(d, "padded size on axis %d overflows", i);
        if (dim_is_const(dims[i]) && dims[i]->c < 0)
            return diag_set(d, "padding makes axis %d negative", i);
    }
    *out = type_make(&g->arena, x->dtype, x->rank, dims);
    return true;
}

bool infer_dyn_pad(Graph *g, const Op *op, Type *out, Diag *d)
{
    int n = 0;
    if (!shape_operand(IN(1), "pads", &n, d))
        return false;
    if (n != 2 * IN(0)->rank)
        return diag_set(d, "pads has %d entries, expected %d", n, 2 * IN(0)->rank);
    if (!scalar_value(IN(0), IN(2), d))
        return false;
    *out = type_make(&g->arena, IN(0)->dtype, IN(0)->rank, NULL);
    return true;
}

bool infer_iota(Graph *g, const Op *op, Type *out, Diag *d)
{
    const Attr *shape = attr(op, "shape");
    DType dt = attr(op, "dtype")->dt;
    if (dt == DT_BOOL)
        return diag_set(d, "iota cannot produce bool");
    if (shape->n > MAX_RANK)
        return diag_set(d, "result rank %d exceeds %d", shape->n, MAX_RANK);
    if (!check_axis(attr(op, "axis")->i, shape->n, "axis", d))
        return false;
    *out = type_make(&g->arena, dt, shape->n, shape->dims);
    return true;
}

bool infer_dyn_iota(Graph *g, const Op *op, Type *out, Diag *d)
{
    int r = 0;
    DType dt = attr(op, "dtype")->dt;
    if (!shape_operand(IN(0), "shape operand", &r, d))
        return false;
    if (dt == DT_BOOL)
        return diag_set(d, "iota cannot produce bool");
    if (!check_axis(attr(op, "axis")->i, r, "axis", d))
        return false;
    *out = type_make(&g->arena, dt, r, NULL);
    return true;
}

bool infer_gather(Graph *g, const Op *op, Type *out, Diag *d)
{
    const Type *x = IN(0), *idx = IN(1);
    int64_t axis = attr(op, "axis")->i;
    if (!is_index(idx->dtype))
        return diag_set(d, "indices must be i32 or i64, not %s", dtype_name(idx->dtype));
    if (!check_axis(axis, x->rank, "axis", d))
        return false;
    int rank = x->rank - 1 + idx->rank;
    if (rank > MAX_RANK)
        return diag_set(d, "result rank %d exceeds %d", rank, MAX_RANK);
    Dim *dims[MAX_RANK];
    int n = 0;
    for (int i = 0; i < axis; i++)
        dims[n++] = x->dims[i];
    for (int i = 0; i < idx->rank; i++)
        dims[n++] = idx->dims[i];
    for (int i = (int)axis + 1; i < x->rank; i++)
        dims[n++] = x->dims[i];
    *out = type_make(&g->arena, x->dtype, rank, dims);
    return true;
}

bool infer_gather_elements(Graph *g, const Op *op, Type *out, Diag *d)
{
    const Type *x = IN(0), *idx = IN(1);
    if (!is_index(idx->dtype))
        return diag_set(d, "indices must be i32 or i64, not %s", dtype_name(idx->dtype));
    if (idx->rank != x->rank)
        return diag_set(d, "indices have rank %d, data rank %d", idx->rank, x->rank);
    if (!check_axis(attr(op, "axis")->i, x->rank, "axis", d))
        return false;
    *out = type_make(&g->arena, x->dtype, idx->rank, idx->dims);
    return true;
}

bool infer_gather_nd(Graph *g, const Op *op, Type *out, Diag *d)
{
    const Type *x = IN(0), *idx = IN(1);
    int64_t b = attr(op, "batch_dims")->i;
    if (!is_index(idx->dtype))
        return diag_set(d, "indices must be i32 or i64, not %s", dtype_name(idx->dtype));
    if (idx->rank < 1 || !dim_is_const(idx->dims[idx->rank - 1]))
        return diag_set(d, "indices need a constant last dim");
    int64_t q = idx->dims[idx->rank - 1]->c;
    if (b < 0 || b >= idx->rank || b > x->rank || q < 0 || b + q > x->rank)
        return diag_set(d, "batch_dims %lld and index depth %lld do not fit data rank %d", (long long)b,
                        (long long)q, x->rank);
    int rank = idx->rank - 1 + x->rank - (int)(b + q);
    if (rank > MAX_RANK)
        return diag_set(d, "result rank %d exceeds %d", rank, MAX_RANK);
    Dim *dims[MAX_RANK];
    int n = 0;
    for (int i = 0; i < idx->rank - 1; i++)
        dims[n++] = idx->dims[i];
    for (int i = (int)(b + q); i < x->rank; i++)
        dims[n++] = x->dims[i];
    *out = type_make(&g->arena, x->dtype, rank, dims);
    return true;
}

bool infer_scatter(Graph *g, const Op *op, Type *out, Diag *d)
{
    const Type *x = IN(0), *idx = IN(1), *upd = IN(2);
    if (!is_index(idx->dtype))
        return diag_set(d, "indices must be i32 or i64, not %s", dtype_name(idx->dtype));
    if (!same_dtype(x, upd, d))
        return false;
    if (op->kind == OP_SCATTER_ELEMENTS) {
        if (idx->rank != x->rank || upd->rank != x->rank)
            return diag_set(d, "data, indices and updates must have equal ranks");
        if (!check_axis(attr(op, "axis")->i, x->rank, "axis", d))
            return false;
    }
    *out = same(x);
    return true;
}

bool infer_resize(Graph *g, const Op *op, Type *out, Diag *d)
{
    const Attr *shape = attr(op, "shape"), *scales = attr(op, "scales");
    if (shape->n != IN(0)->rank)
        return diag_set(d, "shape has %d entries for an operand of rank %d", shape->n, IN(0)->rank);
    if (scales && scales->n != IN(0)->rank)
        return diag_set(d, "scales has %d entries for an operand of rank %d", scales->n, IN(0)->rank);
    *out = type_make(&g->arena, IN(0)->dtype, shape->n, shape->dims);
    return true;
}

/* dyn_resize_scales(x, sizes: i64[r], scales: f32|f64[r], roi: f32|f64[2r]):
 * rank preserved, dims undetermined (the result's dims are data). */
bool infer_dyn_resize_scales(Graph *g, const Op *op, Type *out, Diag *d)
{
    int r = 0, rank = IN(0)->rank;
    if (!shape_operand(IN(1), "sizes", &r, d))
        return false;
    if (r != rank)
        return diag_set(d, "sizes has %d entries for an operand of rank %d", r, rank);
    for (int k = 2; k < 4; k++) {
        const Type *t = IN(k);
        int64_t want = k == 2 ? rank : 2 * rank;
        if ((t->dtype != DT_F32 && t->dtype != DT_F64) || t->rank != 1 || !dim_is(t->dims[0], want))
            return diag_set(d, "%s must be f32[%lld] or f64[%lld]", k == 2 ? "scales" : "roi",
                            (long long)want, (long long)want);
    }
    *out = type_make(&g->arena, IN(0)->dtype, rank, NULL);
    return true;
}

bool infer_nonzero(Graph *g, const Op *op, Type *out, Diag *d)
{
    Dim *dims[2] = {dim_const(dcx(g), IN(0)->rank), NULL};
    *out = type_make(&g->arena, DT_I64, 2, dims);
    return true;
}

/* nms(boxes f32[B, S, 4], scores f32[B, C, S], max_out i64[], iou f32[],
 * score_threshold f32[]?) : i64[N, 3], N data-dependent */
bool infer_nms(Graph *g, const Op *op, Type *out, Diag *d)
{
    if (op->nin != 4 && op->nin != 5)
        return diag_set(d, "takes boxes, scores, max_out, iou and an optional score threshold, got %d operands",
                        op->nin);
    const Type *b = IN(0), *s = IN(1);
    if (b->dtype != DT_F32 || b->rank != 3 || !dim_is(b->dims[2], 4))
        return diag_set(d, "boxes must be f32[B, S, 4]");
    if (s->dtype != DT_F32 || s->rank != 3)
        return diag_set(d, "scores must be f32[B, C, S]");
    if (dims_conflict(b->dims[0], s->dims[0]))
        return fail_dims(d, "boxes [B, S, 4] and scores [B, C, S] differ in B", b->dims[0], s->dims[0]);
    if (dims_conflict(b->dims[1], s->dims[2]))
        return fail_dims(d, "boxes [B, S, 4] and scores [B, C, S] differ in S", b->dims[1], s->dims[2]);
    for (int i = 2; i < op->nin; i++) {
        const Type *t = IN(i);
        if (t->rank != 0 || t->dtype != (i == 2 ? DT_I64 : DT_F32))
            return diag_set(d, "%s must be %s[]", i == 2 ? "max_out" : i == 3 ? "iou" : "score_threshold",
                            i == 2 ? "i64" : "f32");
    }
    Dim *dims[2] = {NULL, dim_const(dcx(g), 3)};
    *out = type_make(&g->arena, DT_I64, 2, dims);
    return true;
}

bool infer_reduce(Graph *g, const Op *op, Type *out, Diag *d)
{
    const Type *x = IN(0);
    const Attr *axes = attr(op, "axes");
    bool keep = attr(op, "keepdims")->i != 0;
    if (!check_axes(axes, x->rank, d))
        return false;
    if (!strcmp(attr(op, "kind")->s, "mean") && !dtype_is_float(x->dtype))
        return check_dtype(x, false, "reduce mean", d);
    Dim *dims[MAX_RANK];
    int n = 0;
    for (int i = 0; i < x->rank; i++) {
        bool reduced = false;
        for (int j = 0; j < axes->n; j++)
            reduced |= axes->ints[j] == i;
        if (!reduced)
            dims[n++] = x->dims[i];
        else if (keep)
            dims[n++] = dim_const(dcx(g), 1);
    }
    *out = type_make(&g->arena, x->dtype, n, dims);
    return true;
}

/* dyn_reduce: the axes are read at run time, so the result dims are
 * undetermined; only a kept dim that is 1 is known. */
bool infer_dyn_reduce(Graph *g, const Op *op, Type *out, Diag *d)
{
    const Type *x = IN(0), *axes = IN(1);
    bool keep = attr(op, "keepdims")->i != 0;
    if (!is_index(axes->dtype) || axes->rank != 1 || !dim_is_const(axes->dims[0]) ||
        axes->dims[0]->c < 1)
        return diag_set(d, "axes must be i32[n] or i64[n] with a constant n >= 1");
    int64_t n = axes->dims[0]->c;
    if (n > x->rank)
        return diag_set(d, "%lld axes for an operand of rank %d", (long long)n, x->rank);
    if (!strcmp(attr(op, "kind")->s, "mean") && !dtype_is_float(x->dtype))
        return check_dtype(x, false, "reduce mean", d);
    Dim *dims[MAX_RANK];
    int r = keep ? x->rank : x->rank - (int)n;
    for (int i = 0; i < r; i++)
        dims[i] = keep && dim_is(x->dims[i], 1) ? x->dims[i] : NULL;
    *out = type_make(&g->arena, x->dtype, r, dims);
    return true;
}

bool infer_arg(Graph *g, const Op *op, Type *out, Diag *d)
{
    const Type *x = IN(0);
    int64_t axis = attr(op, "axis")->i;
    if (!check_axis(axis, x->rank, "axis", d))
        return false;
    Dim *dims[MAX_RANK];
    int n = 0;
    for (int i = 0; i < x->rank; i++) {
        if (i != axis)
            dims[n++] = x->dims[i];
        else if (attr(op, "keepdims")->i)
            dims[n++] = dim_const(dcx(g), 1);
    }
    *out = type_make(&g->arena, DT_I64, n, dims);
    return true;
}

bool infer_cumsum(Graph *g, const Op *op, Type *out, Diag *d)
{
    *out = same(IN(0));
    if (IN(0)->dtype == DT_BOOL)
        return check_dtype(IN(0), false, "cumsum", d);
    return check_axis(attr(op, "axis")->i, IN(0)->rank, "axis", d);
}

bool infer_topk(Graph *g, const Op *op, Type *out, Diag *d)
{
    const Type *x = IN(0), *k = IN(1);
    int64_t axis = attr(op, "axis")->i;
    if (!check_axis(axis, x->rank, "axis", d))
        return false;
    if (k->dtype != DT_I64 || k->rank != 1 || !dim_is(k->dims[0], 1))
        return diag_set(d, "k must be i64[1]");
    Dim *dims[MAX_RANK];
    for (int i = 0; i < x->rank; i++)
        dims[i] = i == axis ? NULL : x->dims[i];
    out[0] = type_make(&g->arena, x->dtype, x->rank, dims);
    out[1] = type_make(&g->arena, DT_I64, x->rank, dims);
    return true;
}

static bool in_list(const Attr *a, int64_t v)
{
    for (int i = 0; i < a->n; i++)
        if (a->ints[i] == v)
            return true;
    return false;
}

bool infer_dot(Graph *g, const Op *op, Type *out, Diag *d)
{
    const Type *a = IN(0), *b = IN(1);
    const Attr *lb = attr(op, "lhs_batch"), *rb = attr(op, "rhs_batch");
    const Attr *lc = attr(op, "lhs_contract"), *rc = attr(op, "rhs_contract");
    if (!same_dtype(a, b, d))
        return false;
    if (a->dtype == DT_BOOL)
        return check_dtype(a, false, "dot", d);
    if (lb->n != rb->n || lc->n != rc->n)
        return diag_set(d, "batch and contracting dim lists must pair up");
    if (!check_axes(lb, a->rank, d) || !check_axes(rb, b->rank, d) || !check_axes(lc, a->rank, d) ||
        !check_axes(rc, b->rank, d))
        return false;
    Dim *dims[MAX_RANK];
    int n = 0;
    for (int i = 0; i < lb->n; i++) {
        Dim *x = a->dims[lb->ints[i]], *y = b->dims[rb->ints[i]];
        if (in_list(lc, lb->ints[i]) || in_list(rc, rb->ints[i]))
            return diag_set(d, "a dim cannot be both batch and contracting");
        if (dims_conflict(x, y))
            return fail_dims(d, "batch dims differ", x, y);
        dims[n++] = x;
    }
    for (int i = 0; i < lc->n; i++) {
        Dim *x = a->dims[lc->ints[i]], *y = b->dims[rc->ints[i]];
        if (dims_conflict(x, y))
            return fail_dims(d, "contracting dims differ", x, y);
    }
    int rank = lb->n + (a->rank - lb->n - lc->n) + (b->rank - rb->n - rc->n);
    if (rank > MAX_RANK)
        return diag_set(d, "result rank %d exceeds %d", rank, MAX_RANK);
    for (int i = 0; i < a->rank; i++)
        if (!in_list(lb, i) && !in_list(lc, i))
            dims[n++] = a->dims[i];
    for (int i = 0; i < b->rank; i++)
        if (!in_list(rb, i) && !in_list(rc, i))
            dims[n++] = b->dims[i];
    *out = type_make(&g->arena, a->dtype, n, dims);
    return true;
}

/* Checks the common attributes of conv, conv_transpose and pool. */
static bool window_attrs(const Op *op, int nsp, bool has_window, Diag *d)
{
    const char *lists[] = {"strides", "dilations", has_window ? "window" : NULL};
    for (int i = 0; i < 3 && lists[i]; i++) {
        const Attr *a = attr(op, lists[i]);
        if (a->n != nsp)
            return diag_set(d, "%s has %d entries for %d spatial dims", lists[i], a->n, nsp);
        for (int j = 0; j < a->n; j++)
            if (a->ints[j] < 1)
                return diag_set(d, "%s must be positive", lists[i]);
    }
    if (attr(op, "pads")->n != 2 * nsp)
        return diag_set(d, "pads has %d entries, expected %d", attr(op, "pads")->n, 2 * nsp);
    return true;
}

/* floordiv(H + pb + pe - d*(k-1) - 1, s) + 1, or the ceil-mode form. */
static Dim *window_out(Graph *g, Dim *h, Dim *pb, Dim *pe, Dim *k, int64_t dil, int64_t s, bool ceil)
{
    DimCtx *cx = dcx(g);
    Dim *span = dim_addc(cx, dim_mulc(cx, dim_addc(cx, k, -1), dil), 1);
    Dim *num = dim_sub(cx, dim_add(cx, dim_add(cx, h, pb), pe), span);
    if (!ceil)
        return dim_addc(cx, dim_floordiv(cx, num, dim_const(cx, s)), 1);
    /* ONNX: the last window must start inside the input or its left pad. */
    Dim *n = dim_addc(cx, dim_ceildiv(cx, num, dim_const(cx, s)), 1);
    return dim_min(cx, n, dim_ceildiv(cx, dim_add(cx, h, pb), dim_const(cx, s)));
}

/* conv and pool with channels_last = 1 read [N, spatial..., C] and write
 * [N, spatial..., O]; a conv with 2 reads [N, C, spatial...] and writes
 * so. The rules below see the operand with its channels at axis 1 and
 * move the result's (doc/ops.md, "conv"). With block = b > 0 the
 * channels-last operands are blocked instead: [N, ceildiv(C, b),
 * spatial..., b], channel c at block c / b, lane c % b (oneDNN's
 * nChw16c); the rules see such an operand as [N, b * ceildiv(C, b),
 * spatial...], every lane a channel. */
static int64_t layout(const Op *op)
{
    const Attr *cl = attr(op, "channels_last");
    return cl ? cl->i : 0;
}

static int64_t block_of(const Op *op)
{
    const Attr *b = attr(op, "block");
    return b ? b->i : 0;
}

static Type channels_first(Graph *g, const Op *op, const Type *t)
{
    if (layout(op) != 1 || t->rank < 3)
        return *t;
    int64_t b = block_of(op);
    if (b > 0) { /* [N, Cb, S..., b] as [N, Cb * b, S...] */
        if (t->rank < 4)
            return *t;
        Dim *dims[MAX_RANK] = {t->dims[0], dim_mul(dcx(g), t->dims[1], t->dims[t->rank - 1])};
        for (int i = 2; i < t->rank - 1; i++)
            dims[i] = t->dims[i];
        return type_make(&g->arena, t->dtype, t->rank - 1, dims);
    }
    Dim *dims[MAX_RANK] = {t->dims[0], t->dims[t->rank - 1]};
    for (int i = 1; i < t->rank - 1; i++)
        dims[i + 1] = t->dims[i];
    return type_make(&g->arena, t->dtype, t->rank, dims);
}

static Type channels_back(Graph *g, const Op *op, const Type *t)
{
    if (layout(op) == 0 || t->rank < 3)
        return *t;
    int64_t b = block_of(op);
    if (b > 0) { /* [N, C, R...] as [N, ceildiv(C, b), R..., b] */
        if (t->rank + 1 > MAX_RANK)
            return *t;
        DimCtx *cx = dcx(g);
        Dim *dims[MAX_RANK] = {t->dims[0], dim_ceildiv(cx, t->dims[1], dim_const(cx, b))};
        for (int i = 2; i < t->rank; i++)
            dims[i] = t->dims[i];
        dims[t->rank] = dim_const(cx, b);
        return type_make(&g->arena, t->dtype, t->rank + 1, dims);
    }
    Dim *dims[MAX_RANK] = {t->dims[0]};
    for (int i = 2; i < t->rank; i++)
        dims[i - 1] = t->dims[i];
    dims[t->rank - 1] = t->dims[1];
    return type_make(&g->arena, t->dtype, t->rank, dims);
}

/* The layout attributes; for a blocked operand, its last dim is b. */
static bool check_layout(const Op *op, const Type *x, Diag *d)
{
    int64_t m = layout(op), b = block_of(op);
    if (m < 0 || m > (op->kind == OP_CONV ? 2 : 1))
        return diag_set(d, "channels_last must be 0 or 1%s", op->kind == OP_CONV ? " or 2" : "");
    if (b < 0 || b == 1 || b > 64 || (b && !m))
        return diag_set(d, "block must be 0, or 2..64 with channels_last");
    if (b && m == 1 && (x->rank < 4 || !dim_is(x->dims[x->rank - 1], b)))
        return diag_set(d, "block %lld needs data [N, C/%lld, spatial..., %lld]", (long long)b, (long long)b,
                        (long long)b);
    return true;
}

bool infer_conv(Graph *g, const Op *op, Type *out, Diag *d)
{
    if (!check_layout(op, IN(0), d))
        return false;
    Type xv = channels_first(g, op, IN(0));
    const Type *x = &xv, *w = IN(1);
    int nsp = x->rank - 2;
    int64_t groups = attr(op, "groups")->i, b = layout(op) == 1 ? block_of(op) : 0;
    if (!same_dtype(x, w, d) || !check_dtype(x, dtype_is_float(x->dtype), "conv", d))
        return false;
    if (nsp < 1 || w->rank != x->rank)
        return diag_set(d, "conv needs data [N, C, spatial...] and weights of the same rank");
    if (!window_attrs(op, nsp, false, d))
        return false;
    if (groups < 1)
        return diag_set(d, "groups must be positive");
    Dim *cin = x->dims[1], *wc = dim_mulc(dcx(g), w->dims[1], groups);
    if (b) { /* blocked: the blocks that hold the channels */
        cin = IN(0)->dims[1];
        wc = dim_ceildiv(dcx(g), wc, dim_const(dcx(g), b));
    }
    if (dims_conflict(cin, wc))
        return fail_dims(d, "input channels do not match weights * groups", cin, wc);
    const Attr *pads = attr(op, "pads");
    Dim *dims[MAX_RANK] = {x->dims[0], w->dims[0]};
    for (int i = 0; i < nsp; i++) {
        dims[2 + i] = window_out(g, x->dims[2 + i], pads->dims[i], pads->dims[nsp + i], w->dims[2 + i],
                                 attr(op, "dilations")->ints[i], attr(op, "strides")->ints[i], false);
        if (!dims[2 + i])
            return diag_set(d, "output size on spatial axis %d overflows", i);
    }
    Type r = type_make(&g->arena, x->dtype, x->rank, dims);
    *out = channels_back(g, op, &r);
    return true;
}

bool infer_conv_transpose(Graph *g, const Op *op, Type *out, Diag *d)
{
    const Type *x = IN(0), *w = IN(1);
    DimCtx *cx = dcx(g);
    int nsp = x->rank - 2;
    int64_t groups = attr(op, "groups")->i;
    if (!same_dtype(x, w, d) || !check_dtype(x, dtype_is_float(x->dtype), "conv_transpose", d))
        return false;
    if (nsp < 1 || w->rank != x->rank)
        return diag_set(d, "conv_transpose needs data [N, C, spatial...] and weights of the same rank");
    if (!window_attrs(op, nsp, false, d))
        return false;
    const Attr *op_pad = attr(op, "output_padding"), *pads = attr(op, "pads");
    if (op_pad->n != nsp)
        return diag_set(d, "output_padding has %d entries for %d spatial dims", op_pad->n, nsp);
    if (groups < 1)
        return diag_set(d, "groups must be positive");
    if (dims_conflict(x->dims[1], w->dims[0]))
        return fail_dims(d, "input channels do not match weights", x->dims[1], w->dims[0]);
    Dim *dims[MAX_RANK] = {x->dims[0], dim_mulc(cx, w->dims[1], groups)};
    for (int i = 0; i < nsp; i++) {
        int64_t s = attr(op, "strides")->ints[i], dil = attr(op, "dilations")->ints[i];
        /* s*(H-1) + output_padding + d*(k-1) + 1 - pb - pe */
        Dim *r = dim_mulc(cx, dim_addc(cx, x->dims[2 + i], -1), s);
        r = dim_add(cx, r, dim_mulc(cx, dim_addc(cx, w->dims[2 + i], -1), dil));
        r = dim_addc(cx, r, op_pad->ints[i] + 1);
        r = dim_sub(cx, dim_sub(cx, r, pads->dims[i]), pads->dims[nsp + i]);
        if (!r)
            return diag_set(d, "output size on spatial axis %d overflows", i);
        dims[2 + i] = r;
    }
    *out = type_make(&g->arena, x->dtype, x->rank, dims);
    return true;
}

bool infer_pool(Graph *g, const Op *op, Type *out, Diag *d)
{
    if (!check_layout(op, IN(0), d))
        return false;
    Type xv = channels_first(g, op, IN(0));
    const Type *x = &xv;
    int nsp = x->rank - 2;
    if (nsp < 1)
        return diag_set(d, "pool needs data [N, C, spatial...]");
    if (!check_dtype(x, dtype_is_float(x->dtype) || !strcmp(attr(op, "kind")->s, "max"), "avg pool", d))
        return false;
    if (!window_attrs(op, nsp, true, d))
        return false;
    const Attr *pads = attr(op, "pads"), *win = attr(op, "window");
    bool ceil = attr(op, "ceil")->i != 0;
    Dim *dims[MAX_RANK] = {x->dims[0], x->dims[1]};
    for (int i = 0; i < nsp; i++) {
        dims[2 + i] = window_out(g, x->dims[2 + i], pads->dims[i], pads->dims[nsp + i],
                                 dim_const(dcx(g), win->ints[i]), attr(op, "dilations")->ints[i],
                                 attr(op, "strides")->ints[i], ceil);
        if (!dims[2 + i])
            return diag_set(d, "output size on spatial axis %d overflows", i);
    }
    Type r = type_make(&g->arena, x->dtype, x->rank, dims);
    *out = channels_back(g, op, &r);
    return true;
}

bool infer_dim(Graph *g, const Op *op, Type *out, Diag *d)
{
    *out = type_make(&g->arena, DT_I64, 0, NULL);
    return check_axis(attr(op, "axis")->i, IN(0)->rank, "axis", d);
}

bool infer_shape_of(Graph *g, const Op *op, Type *out, Diag *d)
{
    Dim *n = dim_const(dcx(g), IN(0)->rank);
    *out = type_make(&g->arena, DT_I64, 1, &n);
    return true;
}

bool infer_shape_const(Graph *g, const Op *op, Type *out, Diag *d)
{
    const Attr *dims = attr(op, "dims");
    if (op_attr_int(op, "scalar", 0)) {
        if (dims->n != 1)
            return diag_set(d, "a scalar shape_const needs exactly one dim");
        *out = type_make(&g->arena, DT_I64, 0, NULL);
        return true;
    }
    Dim *n = dim_const(dcx(g), dims->n);
    *out = type_make(&g->arena, DT_I64, 1, &n);
    return true;
}

/* A constant's type is its own declaration; check it against the data. */
bool infer_const(Graph *g, const Op *op, Type *out, Diag *d)
{
    const Type *t = &op->out[0]->type;
    size_t n, bytes;
    if (!type_static_numel(t, &n))
        return diag_set(d, "a constant needs a static shape");
    if (!size_mul(n, dtype_size(t->dtype), &bytes))
        return diag_set(d, "constant too large");
    if (!op->cst)
        return diag_set(d, "constant without data");
    if (op->cst->src != CONST_ELIDED && op->cst->nbytes != bytes)
        return diag_set(d, "constant holds %zu bytes, its type needs %zu", op->cst->nbytes, bytes);
    *out = *t;
    return true;
}
