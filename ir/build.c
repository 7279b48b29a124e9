/*
 * build.c — builders: create an op, check it, infer its result types,
 * append it.
 *
 * Every builder goes through build_op, which checks the arity and the
 * attributes against the op table, runs the op's rule (infer.c) and gives a
 * fresh symbol to every result dim the rule leaves undetermined (SYM_DATA
 * for data-dependent results such as NonZero's count, SYM_DERIVED for dims
 * that shape analysis will resolve). On error nothing is appended and the
 * message, prefixed by the op name, is in graph_error(g).
 */
#include "ir/ir.h"

#include <string.h>


static Attr *attrs_push(Graph *g, AttrList *l, const char *name, AttrKind kind)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 8;
        Attr *v = arena_array(&g->arena, (size_t)cap, sizeof *v);
        if (!v)
            return NULL;
        if (l->n)
            memcpy(v, l->v, (size_t)l->n * sizeof *v);
        l->v = v;
        l->cap = cap;
    }
    Attr *a = &l->v[l->n++];
    memset(a, 0, sizeof *a);
    a->name = arena_strdup(&g->arena, name);
    a->kind = kind;
    return a;
}

static void *dup(Graph *g, const void *p, int n, size_t size)
{
    if (n <= 0 || !p)
        return NULL;
    void *q = arena_array(&g->arena, (size_t)n, size);
    if (q)
        memcpy(q, p, (size_t)n * size);
    return q;
}

void attrs_add(Graph *g, AttrList *l, const Attr *a)
{
    Attr *b = attrs_push(g, l, a->name, a->kind);
    if (b) {
        const char *name = b->name;
        *b = *a;
        b->name = name;
    }
}

void attrs_add_int(Graph *g, AttrList *l, const char *name, int64_t v)
{
    Attr *a = attrs_push(g, l, name, ATTR_INT);
    if (a)
        a->i = v;
}

void attrs_add_float(Graph *g, AttrList *l, const char *name, double v)
{
    Attr *a = attrs_push(g, l, name, ATTR_FLOAT);
    if (a)
        a->f = v;
}

void attrs_add_str(Graph *g, AttrList *l, const char *name, const char *s)
{
    Attr *a = attrs_push(g, l, name, ATTR_STR);
    if (a)
        a->s = arena_strdup(&g->arena, s);
}

void attrs_add_dtype(Graph *g, AttrList *l, const char *name, DType dt)
{
    Attr *a = attrs_push(g, l, name, ATTR_DTYPE);
    if (a)
        a->dt = dt;
}

void attrs_add_ints(Graph *g, AttrList *l, const char *name, const int64_t *v, int n)
{
    Attr *a = attrs_push(g, l, name, ATTR_INTS);
    if (a) {
        a->ints = dup(g, v, n, sizeof *v);
        a->n = n;
    }
}

void attrs_add_floats(Graph *g, AttrList *l, const char *name, const double *v, int n)
{
    Attr *a = attrs_push(g, l, name, ATTR_FLOATS);
    if (a) {
        a->floats = dup(g, v, n, sizeof *v);
        a->n = n;
    }
}

void attrs_add_dims(Graph *g, AttrList *l, const char *name, Dim *const *v, int n)
{
    Attr *a = attrs_push(g, l, name, ATTR_DIMS);
    if (a) {
        a->dims = dup(g, v, n, sizeof *v);
        a->n = n;
    }
}

static Op *fail(Graph *g, OpKind k, const Diag *e)
{
    g->err.set = false;
    diag_setk(&g->err, g->arena.failed ? DIAG_RESOURCE : e->kind, "%s: %s", op_info(k)->name, e->msg);
    return NULL;
}

static Op *build(Graph *g, OpKind k, Value *const *in, int nin, const Attr *attrs, int nattrs,
                 Graph *const *regions, int nregions)
{
    const OpInfo *info = op_info(k);
    Diag e = {0};
    Op tmp = {.kind = k, .nin = nin, .nout = info->nout, .in = (Value **)in, .nattrs = nattrs,
              .regions = (Graph **)regions, .nregions = nregions};
    if (k == OP_LOOP && nregions == 1)
        tmp.nout = regions[0]->noutputs - 1;
    else if (k == OP_IF && nregions == 2)
        tmp.nout = regions[0]->noutputs;
    g->err.set = false;
    if (tmp.nout < 0 || tmp.nout > MAX_RESULTS) {
        diag_set(&e, "has %d results, expected 0 to %d", tmp.nout, MAX_RESULTS);
        return fail(g, k, &e);
    }
    if (k == OP_CONST) {
        diag_set(&e, "use build_const");
        return fail(g, k, &e);
    }
    /* Keep attributes in schema order, copied into the arena. */
    Attr *sorted = arena_array(&g->arena, (size_t)(nattrs > 0 ? nattrs : 1), sizeof(Attr));
    if (!sorted) {
        diag_setk(&e, DIAG_RESOURCE, "out of memory");
        return fail(g, k, &e);
    }
    int n = 0;
    for (int s = 0; s <= info->nattrs; s++)
        for (int i = 0; i < nattrs; i++) {
            const AttrSpec *sp = op_attr_spec(k, attrs[i].name);
            int pos = sp ? (int)(sp - info->attrs) : info->nattrs;
            if (pos == s) {
                /* the op owns its attributes: lists are copied */
                Attr *a = &sorted[n++];
                *a = attrs[i];
                if (a->kind == ATTR_INTS)
                    a->ints = dup(g, a->ints, a->n, sizeof *a->ints);
                else if (a->kind == ATTR_FLOATS)
                    a->floats = dup(g, a->floats, a->n, sizeof *a->floats);
                else if (a->kind == ATTR_DIMS)
                    a->dims = dup(g, a->dims, a->n, sizeof *a->dims);
                else if (a->kind == ATTR_STR && a->s)
                    a->s = arena_strdup(&g->arena, a->s);
            }
        }
    tmp.attrs = sorted;
    if (!op_check_arity(&tmp, &e) || !op_check_attrs(&tmp, &e))
        return fail(g, k, &e);

    Type out[MAX_RESULTS];
    memset(out, 0, sizeof out);
    if (!info->infer(g, &tmp, out, &e))
        return fail(g, k, &e);

    SymOrigin origin = k == OP_NONZERO || k == OP_NMS || k == OP_LOOP || k == OP_IF ? SYM_DATA : SYM_DERIVED;
    Dim *trips = NULL; /* a loop's stacked results share their unknown count */
    for (int i = 0; i < tmp.nout; i++) {
        Dim *dims[MAX_RANK];
        bool stacked = k == OP_LOOP && i >= loop_ncarried(&tmp);
        for (int j = 0; j < out[i].rank; j++) {
            dims[j] = out[i].dims ? out[i].dims[j] : NULL;
            /* topk's two results share the one unknown dim */
            if (!dims[j] && k == OP_TOPK && i > 0 && out[0].rank == out[i].rank)
                dims[j] = out[0].dims[j];
            if (!dims[j] && stacked && j == 0 && trips)
                dims[j] = trips;
            if (!dims[j])
                dims[j] = dim_sym_fresh(&g->dims, origin);
            if (stacked && j == 0)
                trips = dims[j];
        }
        out[i] = type_make(&g->arena, out[i].dtype, out[i].rank, dims);
    }
    Op *op = graph_append_op(g, k, in, nin, out, tmp.nout);
    if (!op) {
        diag_setk(&e, DIAG_RESOURCE, "out of memory");
        return fail(g, k, &e);
    }
    op->attrs = sorted;
    op->nattrs = nattrs;
    return op;
}

Op *build_op(Graph *g, OpKind k, Value *const *in, int nin, const Attr *attrs, int nattrs)
{
    return build(g, k, in, nin, attrs, nattrs, NULL, 0);
}

Op *build_region_op(Graph *g, OpKind k, Value *const *in, int nin, const Attr *attrs, int nattrs,
                    Graph *const *regions, int nregions)
{
    Op *op = build(g, k, in, nin, attrs, nattrs, regions, nregions);
    bool ok = op != NULL;
    for (int r = 0; r < nregions; r++) {
        if (ok)
            ok = op_add_region(g, op, regions[r]);
        else
            graph_free(regions[r]);
    }
    if (op && !ok) {
        Diag e = {0};
        diag_oom(&e);
        return fail(g, k, &e);
    }
    return op;
}

static Value *result(Op *op) { return op ? op->out[0] : NULL; }

Value *build_unary(Graph *g, OpKind k, Value *x) { return result(build_op(g, k, &x, 1, NULL, 0)); }

Value *build_binary(Graph *g, OpKind k, Value *a, Value *b)
{
    Value *in[2] = {a, b};
    return result(build_op(g, k, in, 2, NULL, 0));
}

Value *build_cmp(Graph *g, const char *dir, Value *a, Value *b)
{
    AttrList l = {0};
    Value *in[2] = {a, b};
    attrs_add_str(g, &l, "dir", dir);
    return result(build_op(g, OP_CMP, in, 2, l.v, l.n));
}

Value *build_select(Graph *g, Value *cond, Value *a, Value *b)
{
    Value *in[3] = {cond, a, b};
    return result(build_op(g, OP_SELECT, in, 3, NULL, 0));
}

Value *build_convert(Graph *g, Value *x, DType to)
{
    AttrList l = {0};
    attrs_add_dtype(g, &l, "to", to);
    return result(build_op(g, OP_CONVERT, &x, 1, l.v, l.n));
}

Value *build_broadcast(Graph *g, Value *x, Dim *const *shape, int rank, const int64_t *axes)
{
    AttrList l = {0};
    attrs_add_dims(g, &l, "shape", shape, rank);
    attrs_add_ints(g, &l, "axes", axes, x ? x->type.rank : 0);
    return result(build_op(g, OP_BROADCAST, &x, 1, l.v, l.n));
}

Value *build_reshape(Graph *g, Value *x, Dim *const *shape, int rank)
{
    AttrList l = {0};
    attrs_add_dims(g, &l, "shape", shape, rank);
    return result(build_op(g, OP_RESHAPE, &x, 1, l.v, l.n));
}

Value *build_transpose(Graph *g, Value *x, const int64_t *perm)
{
    AttrList l = {0};
    attrs_add_ints(g, &l, "perm", perm, x ? x->type.rank : 0);
    return result(build_op(g, OP_TRANSPOSE, &x, 1, l.v, l.n));
}

Value *build_slice(Graph *g, Value *x, Dim *const *start, Dim *const *limit, const int64_t *stride)
{
    AttrList l = {0};
    int r = x ? x->type.rank : 0;
    attrs_add_dims(g, &l, "start", start, r);
    attrs_add_dims(g, &l, "limit", limit, r);
    attrs_add_ints(g, &l, "stride", stride, r);
    return result(build_op(g, OP_SLICE, &x, 1, l.v, l.n));
}

Value *build_concat(Graph *g, Value *const *xs, int n, int64_t axis)
{
    AttrList l = {0};
    attrs_add_int(g, &l, "axis", axis);
    return result(build_op(g, OP_CONCAT, xs, n, l.v, l.n));
}

Value *build_reduce(Graph *g, Value *x, const char *kind, const int64_t *axes, int naxes, bool keepdims)
{
    AttrList l = {0};
    attrs_add_str(g, &l, "kind", kind);
    attrs_add_ints(g, &l, "axes", axes, naxes);
    attrs_add_int(g, &l, "keepdims", keepdims);
    return result(build_op(g, OP_REDUCE, &x, 1, l.v, l.n));
}

Value *build_dot(Graph *g, Value *a, Value *b, const int64_t *lbatch, const int64_t *rbatch, int nbatch,
                 const int64_t *lcontract, const int64_t *rcontract, int ncontract)
{
    AttrList l = {0};
    Value *in[2] = {a, b};
    attrs_add_ints(g, &l, "lhs_batch", lbatch, nbatch);
    attrs_add_ints(g, &l, "rhs_batch", rbatch, nbatch);
    attrs_add_ints(g, &l, "lhs_contract", lcontract, ncontract);
    attrs_add_ints(g, &l, "rhs_contract", rcontract, ncontract);
    return result(build_op(g, OP_DOT, in, 2, l.v, l.n));
}

Value *build_iota(Graph *g, DType dt, Dim *const *shape, int rank, int64_t axis)
{
    AttrList l = {0};
    attrs_add_dtype(g, &l, "dtype", dt);
    attrs_add_dims(g, &l, "shape", shape, rank);
    attrs_add_int(g, &l, "axis", axis);
    return result(build_op(g, OP_IOTA, NULL, 0, l.v, l.n));
}

Value *build_dim(Graph *g, Value *x, int64_t axis)
{
    AttrList l = {0};
    attrs_add_int(g, &l, "axis", axis);
    return result(build_op(g, OP_DIM, &x, 1, l.v, l.n));
}

Value *build_shape_of(Graph *g, Value *x) { return result(build_op(g, OP_SHAPE_OF, &x, 1, NULL, 0)); }

Value *build_const(Graph *g, Type t, const void *data, size_t nbytes, bool copy)
{
    size_t n, need;
    g->err.set = false;
    if (!type_static_numel(&t, &n) || !size_mul(n, dtype_size(t.dtype), &need)) {
        diag_set(&g->err, "const: a constant needs a static shape");
        return NULL;
    }
    if (need != nbytes) {
        diag_set(&g->err, "const: %zu bytes given, the type needs %zu", nbytes, need);
        return NULL;
    }
    Const *c = arena_alloc(&g->arena, sizeof *c);
    void *p = c && copy ? arena_alloc(&g->arena, nbytes) : NULL;
    Op *op = c && (p || !copy) ? graph_append_op(g, OP_CONST, NULL, 0, &t, 1) : NULL;
    if (!op) {
        diag_setk(&g->err, DIAG_RESOURCE, "const: out of memory");
        return NULL;
    }
    c->src = copy ? CONST_INLINE : CONST_EXTERN;
    c->nbytes = nbytes;
    c->data = data;
    if (copy) {
        if (nbytes)
            memcpy(p, data, nbytes);
        c->data = p;
    }
    op->cst = c;
    return op->out[0];
}

Value *build_scalar_f32(Graph *g, float v)
{
    return build_const(g, type_make(&g->arena, DT_F32, 0, NULL), &v, sizeof v, true);
}

Value *build_scalar_i64(Graph *g, int64_t v)
{
    return build_const(g, type_make(&g->arena, DT_I64, 0, NULL), &v, sizeof v, true);
}
