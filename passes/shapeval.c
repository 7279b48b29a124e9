/*
 * shapeval.c — shape-value propagation.
 *
 * Requires: a verified graph. Leaves: a verified graph in which
 *   - every small int64/int32/bool tensor whose elements are computable from
 *     dims (shape_of, dim, constants, and arithmetic, gather, concat, slice,
 *     compare and select over them) is known element by element as Dims,
 *     in row-major order; tensors of rank 2 and more too, through reshape,
 *     transpose, reverse and concat (how an exporter turns F.pad's
 *     [left, right, top, bottom] into ONNX's pads: reshape to [-1, 2],
 *     reverse the rows, transpose, flatten);
 *   - dyn_reshape, dyn_broadcast, dyn_slice, dyn_pad, dyn_iota and
 *     dyn_resize whose shape operands are known are replaced by their static
 *     forms (reshape {shape = [B*S, 12, 64]}, ...);
 *   - every result type is re-inferred in program order, so the fresh
 *     placeholder symbols the builders gave to unknown dims are replaced by
 *     the expressions they stand for, everywhere;
 *   - known shape values that still feed computations are materialised as
 *     shape_const (or const) ops, and the shape sub-graphs that only fed
 *     shapes are removed.
 *
 * This is how an exporter's Shape → Gather → Unsqueeze → Concat → Reshape
 * chain becomes reshape {shape = [B, S, 12, 64]}: the values of the chain
 * are tracked as [B, S, 768] → [S] → [S] → [B, S, 12, 64] and the
 * dyn_reshape that consumes them gets static dims.
 *
 * Element values are Dims; a bool element is the constant 0 or 1; NULL is
 * unknown. Comparisons are decided by canonical equality, constants and
 * symbol bounds (a dim is never -1, so `shape == -1` folds to false).
 */
#include "passes/passes.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

enum {
    SV_MAX = 64,       /* longest tensor tracked element by element */
    SV_DIM_MAX = 1 << 14, /* largest element, in nodes read as a tree */
};

typedef struct SV {
    int n;       /* element count; 0 with e == NULL: not tracked */
    Dim **e;     /* elements, NULL entries unknown */
} SV;

typedef struct Spec {
    Dim *dim;         /* taken as written: must be >= 1 at run time */
    const Op *op;     /* the dyn_reshape it feeds (removed once static) */
    const char *name; /* its name, for the requirement's message */
    bool made;        /* the dyn_reshape became a reshape */
} Spec;

typedef struct Prop {
    Graph *g;
    ShapeInfo *si;   /* where the requirements of speculation go */
    const Op **zero_rule; /* by op id: the reshape a 0-rule select feeds */
    int nzero;
    Spec *spec;
    int nspec, capspec;
    DimCtx *cx;
    SV **sv;     /* by value id; each SV stays put while the table grows */
    int cap;
    DimMap map;  /* placeholder symbol -> what it stands for */
    Arena scratch;
    Diag *d;
    bool oom;    /* an allocation failed: the pass fails at its end */
    SV junk;     /* what sv_of and sv_new hand out when out of memory */
    Dim *junke[SV_MAX];
} Prop;

/* The shape value of v; when out of memory a junk one, never tracked. */
static SV *sv_of(Prop *p, const Value *v)
{
    if (v->id >= p->cap) {
        int cap = p->cap ? p->cap : 64;
        while (cap <= v->id)
            cap *= 2;
        SV **n = realloc(p->sv, (size_t)cap * sizeof *n);
        if (!n)
            goto oom;
        memset(n + p->cap, 0, (size_t)(cap - p->cap) * sizeof *n);
        p->sv = n;
        p->cap = cap;
    }
    if (!p->sv[v->id] && !(p->sv[v->id] = arena_alloc(&p->scratch, sizeof(SV))))
        goto oom;
    return p->sv[v->id];
oom:
    p->oom = true;
    p->junk = (SV){0};
    return &p->junk;
}

static bool trackable(const Type *t)
{
    size_t n;
    return (t->dtype == DT_I64 || t->dtype == DT_I32 || t->dtype == DT_BOOL) && type_static_numel(t, &n) &&
           n <= SV_MAX;
}

/* t's dims as numbers and its row-major strides; false if one is symbolic. */
static bool const_dims(const Type *t, int64_t *dims, int64_t *strides)
{
    int64_t st = 1;
    for (int i = t->rank - 1; i >= 0; i--) {
        if (!dim_is_const(t->dims[i]))
            return false;
        dims[i] = t->dims[i]->c;
        strides[i] = st;
        st *= dims[i];
    }
    return true;
}

static Dim **sv_new(Prop *p, const Value *v, int n)
{
    SV *s = sv_of(p, v);
    s->n = n;
    s->e = arena_array(&p->scratch, (size_t)(n ? n : 1), sizeof(Dim *));
    if (!s->e) { /* n <= SV_MAX: v is trackable */
        p->oom = true;
        *s = (SV){0};
        return p->junke;
    }
    return s->e;
}

/* Known elements of v, or NULL if v is not tracked. */
static SV *known(Prop *p, const Value *v)
{
    SV *s = sv_of(p, v);
    return s->e ? s : NULL;
}

static bool all_known(const SV *s)
{
    if (!s)
        return false;
    for (int i = 0; i < s->n; i++)
        if (!s->e[i])
            return false;
    return true;
}

/* ---- deciding relations between dims ------------------------------- */

/* 1 if a - b is provably > 0, -1 if provably < 0, 0 if equal, 2 unknown. */
static int sign_of_diff(Prop *p, Dim *a, Dim *b)
{
    if (a == b)
        return 0;
    Dim *diff = dim_sub(p->cx, a, b);
    if (!diff)
        return 2;
    int64_t lo, hi;
    dim_bounds(diff, &lo, &hi);
    if (lo > 0)
        return 1;
    if (hi < 0)
        return -1;
    if (lo == 0 && hi == 0)
        return 0;
    return 2;
}

static Dim *truth(Prop *p, int t) { return t < 0 ? NULL : dim_const(p->cx, t); }

static Dim *compare(Prop *p, const char *dir, Dim *a, Dim *b)
{
    int s = sign_of_diff(p, a, b);
    if (s == 2) {
        /* Unequal pointers may still be unequal values only if decided. */
        return NULL;
    }
    if (!strcmp(dir, "eq")) return truth(p, s == 0);
    if (!strcmp(dir, "ne")) return truth(p, s != 0);
    if (!strcmp(dir, "lt")) return truth(p, s < 0);
    if (!strcmp(dir, "le")) return truth(p, s <= 0);
    if (!strcmp(dir, "gt")) return truth(p, s > 0);
    if (!strcmp(dir, "ge")) return truth(p, s >= 0);
    return NULL;
}

static bool nonneg(const Dim *d)
{
    int64_t lo, hi;
    dim_bounds(d, &lo, &hi);
    return lo >= 0;
}

static bool positive(const Dim *d)
{
    int64_t lo, hi;
    dim_bounds(d, &lo, &hi);
    return lo >= 1;
}

static Dim *binop(Prop *p, OpKind k, Dim *a, Dim *b)
{
    DimCtx *cx = p->cx;
    switch (k) {
    case OP_ADD: return dim_add(cx, a, b);
    case OP_SUB: return dim_sub(cx, a, b);
    case OP_MUL: return dim_mul(cx, a, b);
    case OP_MAX: return dim_max(cx, a, b);
    case OP_MIN: return dim_min(cx, a, b);
    case OP_DIV: /* truncating: floor when both are non-negative */
        if (dim_is(b, 0))
            return NULL;
        if (dim_is_const(a) && dim_is_const(b))
            return dim_const(cx, b->c == -1 ? -a->c : a->c / b->c);
        return nonneg(a) && positive(b) ? dim_floordiv(cx, a, b) : NULL;
    case OP_MOD: /* floored */
        return positive(b) || (dim_is_const(b) && b->c < 0) ? dim_mod(cx, a, b) : NULL;
    case OP_REM:
        if (dim_is_const(a) && dim_is_const(b) && b->c != 0)
            return dim_const(cx, b->c == -1 ? 0 : a->c % b->c);
        return nonneg(a) && positive(b) ? dim_mod(cx, a, b) : NULL;
    case OP_AND: return a && b && dim_is_const(a) && dim_is_const(b) ? truth(p, a->c && b->c)
                       : (dim_is(a, 0) || dim_is(b, 0)) ? truth(p, 0) : NULL;
    case OP_OR: return a && b && dim_is_const(a) && dim_is_const(b) ? truth(p, a->c || b->c)
                      : (dim_is(a, 1) || dim_is(b, 1)) ? truth(p, 1) : NULL;
    case OP_XOR: return dim_is_const(a) && dim_is_const(b) ? truth(p, (a->c != 0) != (b->c != 0)) : NULL;
    default: return NULL;
    }
}

/* Element i of a broadcast operand of length n (1 or the full length). */
static Dim *bc(const SV *s, int i) { return s->n == 1 ? s->e[0] : s->e[i]; }

/* s walks in step with an elementwise result of n elements: it is one
 * element, or as many as the result (then no axis of it was broadcast, so
 * its row-major order is the result's). [2, 1] against [1, 2] is neither. */
static bool in_step(const SV *s, int n) { return s && (s->n == 1 || s->n == n); }

/* x is 0 wherever s is: s itself, a product with s as a factor, or a sum
 * (no constant) of such. */
static bool vanishes_with(const Dim *x, const Dim *s)
{
    if (x == s)
        return true;
    if (x->kind == DIM_MUL) {
        for (int i = 0; i < x->n; i++)
            if (x->args[i] == s)
                return true;
        return false;
    }
    if (x->kind != DIM_ADD || x->c != 0)
        return false;
    for (int i = 0; i < x->n; i++)
        if (!vanishes_with(x->args[i], s))
            return false;
    return true;
}

/* A select(s == 0, x, s): ONNX Reshape's rule that a 0 in the shape
 * copies the input's dim x. */
static bool is_zero_rule(const Op *sel)
{
    const Op *cmp = sel->in[0]->def;
    if (!cmp || cmp->kind != OP_CMP || strcmp(op_attr_str(cmp, "dir", "eq"), "eq"))
        return false;
    return (cmp->in[0] == sel->in[2] && cmp->in[1]->def && cmp->in[1]->def->kind == OP_CONST) ||
           (cmp->in[1] == sel->in[2] && cmp->in[0]->def && cmp->in[0]->def->kind == OP_CONST);
}

/* Marks the 0-rule selects on the way to each dyn_reshape's shape (the
 * frontend's chain: the -1 rule's select over the 0 rule's). */
static void mark_zero_rules(Prop *p)
{
    int maxid = 0;
    graph_for_each_op(p->g, op)
        maxid = op->id > maxid ? op->id : maxid;
    if (!(p->zero_rule = calloc((size_t)maxid + 1, sizeof *p->zero_rule))) {
        p->oom = true;
        return;
    }
    p->nzero = maxid + 1;
    graph_for_each_op(p->g, op) {
        if (op->kind != OP_DYN_RESHAPE)
            continue;
        const Value *v = op->in[1];
        for (int k = 0; k < 4 && v->def && v->def->kind == OP_SELECT; k++, v = v->def->in[2])
            if (is_zero_rule(v->def))
                p->zero_rule[v->def->id] = op;
    }
}

static void speculate(Prop *p, Dim *d, const Op *reshape)
{
    for (int i = 0; i < p->nspec; i++)
        if (p->spec[i].dim == d && p->spec[i].op == reshape)
            return;
    if (p->nspec == p->capspec) {
        int cap = p->capspec ? 2 * p->capspec : 8;
        Spec *n = realloc(p->spec, (size_t)cap * sizeof *n);
        if (!n) {
            p->oom = true;
            return;
        }
        p->spec = n;
        p->capspec = cap;
    }
    p->spec[p->nspec++] = (Spec){d, reshape, reshape->out[0]->name ? reshape->out[0]->name : reshape->src, false};
}

/* The elements *a and *b that select sel's condition compares for equality
 * at element i, where it is an eq comparison of known values. */
static bool eq_operands(Prop *p, const Op *sel, int i, Dim **a, Dim **b)
{
    const Op *cmp = sel->in[0]->def;
    if (!cmp || cmp->kind != OP_CMP || strcmp(op_attr_str(cmp, "dir", "eq"), "eq"))
        return false;
    SV *c = known(p, cmp->out[0]), *l = known(p, cmp->in[0]), *r = known(p, cmp->in[1]);
    if (!c || !in_step(l, c->n) || !in_step(r, c->n) || (i >= c->n && c->n != 1))
        return false;
    int ci = c->n == 1 ? 0 : i;
    *a = bc(l, ci);
    *b = bc(r, ci);
    return *a && *b;
}

/* select(s == 0, x, s) at element i, the condition undecided: Reshape's
 * 0, "the input's dim". Where x is 0 whenever s is (a padded dim 7 * c
 * against the shape's c), both arms give s. Otherwise, in a reshape's
 * shape, s is taken as written, as the exporter's source meant it
 * (PyTorch's view(B, W / 7, ...) has no copy rule), and the host program
 * requires s >= 1: a run where it is 0 stops with an error naming the
 * reshape instead of giving another shape than ONNX's. */
static bool either_arm(Prop *p, const Op *sel, int i, Dim *x, Dim *s)
{
    Dim *a, *b;
    if (!eq_operands(p, sel, i, &a, &b) || (!(dim_is(a, 0) && b == s) && !(dim_is(b, 0) && a == s)))
        return false;
    if (vanishes_with(x, s))
        return true;
    const Op *reshape = sel->id < p->nzero ? p->zero_rule[sel->id] : NULL;
    if (!reshape || !nonneg(s) || !p->si)
        return false;
    speculate(p, s, reshape);
    return true;
}

static bool same_dim(const Dim *u, const Dim *v)
{
    return u == v || (dim_is_const(u) && dim_is_const(v) && u->c == v->c);
}

/* select(a == b, x, y) at element i, the condition undecided, where a and
 * b are x and y (in either order): where they are equal both arms are, so
 * the result is y. PyTorch's expand writes where(shape == 1, 1, shape)
 * (Swin V2's masks: 166 Expands left to run on the host without this). */
static bool arms_meet(Prop *p, const Op *sel, int i, Dim *x, Dim *y)
{
    Dim *a, *b;
    return eq_operands(p, sel, i, &a, &b) &&
           ((same_dim(a, y) && same_dim(b, x)) || (same_dim(a, x) && same_dim(b, y)));
}

/* ---- computing the shape value of an op's result -------------------- */

static void eval_const(Prop *p, const Op *op)
{
    const Value *v = op->out[0];
    size_t n;
    if (!op->cst || !op->cst->data || !type_static_numel(&v->type, &n))
        return;
    Dim **e = sv_new(p, v, (int)n);
    for (size_t i = 0; i < n; i++) {
        int64_t x;
        switch (v->type.dtype) {
        case DT_I64: memcpy(&x, (const char *)op->cst->data + 8 * i, 8); break;
        case DT_I32: { int32_t y; memcpy(&y, (const char *)op->cst->data + 4 * i, 4); x = y; break; }
        default: x = ((const uint8_t *)op->cst->data)[i] != 0; break;
        }
        e[i] = dim_const(p->cx, x);
    }
}

/* ONNX-style start/end normalisation on a list of length n. */
static int clampi(int64_t x, int64_t lo, int64_t hi) { return (int)(x < lo ? lo : x > hi ? hi : x); }

static void eval_op(Prop *p, const Op *op)
{
    const Value *v = op->out[0];
    if (op->nout != 1 || !trackable(&v->type))
        return;
    size_t nout;
    type_static_numel(&v->type, &nout);
    int n = (int)nout;
    SV *a = op->nin > 0 ? known(p, op->in[0]) : NULL;
    SV *b = op->nin > 1 ? known(p, op->in[1]) : NULL;
    DimCtx *cx = p->cx;
    switch (op->kind) {
    case OP_CONST:
        eval_const(p, op);
        return;
    case OP_SHAPE_OF: {
        Dim **e = sv_new(p, v, n);
        for (int i = 0; i < n; i++)
            e[i] = op->in[0]->type.dims[i];
        return;
    }
    case OP_DIM:
        sv_new(p, v, 1)[0] = op->in[0]->type.dims[op_attr_int(op, "axis", 0)];
        return;
    case OP_SHAPE_CONST: {
        const Attr *dims = op_attr(op, "dims");
        Dim **e = sv_new(p, v, n);
        for (int i = 0; i < n && i < dims->n; i++)
            e[i] = dims->dims[i];
        return;
    }
    case OP_IOTA: {
        if (v->type.rank != 1 || v->type.dtype == DT_BOOL)
            return;
        Dim **e = sv_new(p, v, n);
        for (int i = 0; i < n; i++)
            e[i] = dim_const(cx, i);
        return;
    }
    case OP_CONVERT:
    case OP_RESHAPE:
    case OP_DYN_RESHAPE: {
        if (!a || a->n != n)
            return;
        Dim **e = sv_new(p, v, n);
        bool tobool = op->kind == OP_CONVERT && v->type.dtype == DT_BOOL;
        for (int i = 0; i < n; i++)
            e[i] = tobool && a->e[i] ? compare(p, "ne", a->e[i], dim_const(cx, 0)) : a->e[i];
        return;
    }
    case OP_BROADCAST:
    case OP_DYN_BROADCAST: {
        if (!a || a->n != 1)
            return;
        Dim **e = sv_new(p, v, n);
        for (int i = 0; i < n; i++)
            e[i] = a->e[0];
        return;
    }
    case OP_CONCAT: {
        /* outer blocks of the axes before the concat axis; each operand
         * gives its m / outer elements to every block in turn */
        int64_t dims[MAX_RANK], st[MAX_RANK];
        int ax = (int)op_attr_int(op, "axis", 0);
        if (!n) {
            sv_new(p, v, 0);
            return;
        }
        if (!const_dims(&v->type, dims, st) || ax < 0 || ax >= v->type.rank)
            return;
        int64_t outer = n / (dims[ax] * st[ax]);
        Dim **e = sv_new(p, v, n);
        for (int64_t o = 0, k = 0; o < outer; o++)
            for (int j = 0; j < op->nin; j++) {
                SV *s = known(p, op->in[j]);
                size_t m;
                if (!type_static_numel(&op->in[j]->type, &m))
                    return;
                int64_t blk = (int64_t)m / outer;
                for (int64_t i = 0; i < blk && k < n; i++, k++)
                    e[k] = s && s->n == (int)m ? s->e[o * blk + i] : NULL;
            }
        return;
    }
    case OP_TRANSPOSE:
    case OP_REVERSE: {
        /* result element i's multi-index, mapped back to the operand's */
        int64_t dims[MAX_RANK], st[MAX_RANK];
        const Type *t = &op->in[0]->type;
        const Attr *at = op_attr(op, op->kind == OP_TRANSPOSE ? "perm" : "axes");
        if (!a || a->n != n || !at || !const_dims(t, dims, st))
            return;
        int from[MAX_RANK];
        bool rev[MAX_RANK] = {0};
        for (int k = 0; k < t->rank; k++)
            from[k] = k;
        for (int k = 0; k < at->n; k++) {
            int64_t x = at->ints[k] < 0 ? at->ints[k] + t->rank : at->ints[k];
            if (x < 0 || x >= t->rank || (op->kind == OP_TRANSPOSE && at->n != t->rank))
                return;
            if (op->kind == OP_TRANSPOSE)
                from[k] = (int)x;
            else
                rev[x] = true;
        }
        Dim **e = sv_new(p, v, n);
        for (int i = 0; i < n; i++) {
            int64_t rem = i, j = 0;
            for (int k = t->rank - 1; k >= 0; k--) {
                int ax = from[k];
                int64_t x = rem % dims[ax];
                rem /= dims[ax];
                j += (rev[ax] ? dims[ax] - 1 - x : x) * st[ax];
            }
            e[i] = a->e[j];
        }
        return;
    }
    case OP_GATHER: {
        if (!a || !b || op->in[0]->type.rank != 1)
            return;
        Dim **e = sv_new(p, v, n);
        for (int i = 0; i < n && i < b->n; i++) {
            Dim *ix = b->e[i];
            if (!ix || !dim_is_const(ix))
                continue;
            int64_t j = ix->c < 0 ? ix->c + a->n : ix->c;
            e[i] = j >= 0 && j < a->n ? a->e[j] : NULL;
        }
        return;
    }
    case OP_SLICE: {
        if (!a || op->in[0]->type.rank != 1)
            return;
        const Attr *st = op_attr(op, "start"), *sd = op_attr(op, "stride");
        if (!dim_is_const(st->dims[0]))
            return;
        Dim **e = sv_new(p, v, n);
        for (int i = 0; i < n; i++) {
            int64_t j = st->dims[0]->c + i * sd->ints[0];
            e[i] = j >= 0 && j < a->n ? a->e[j] : NULL;
        }
        return;
    }
    case OP_DYN_SLICE: {
        SV *st = b, *en = known(p, op->in[2]), *sp = known(p, op->in[3]);
        if (!a || !all_known(st) || !all_known(en) || !all_known(sp) || op->in[0]->type.rank != 1)
            return;
        if (!dim_is_const(st->e[0]) || !dim_is_const(en->e[0]) || !dim_is_const(sp->e[0]) || sp->e[0]->c == 0)
            return;
        int64_t s = st->e[0]->c, t = en->e[0]->c, step = sp->e[0]->c, len = a->n;
        if (s < 0) s += len;
        if (t < 0) t += len;
        int i0 = step > 0 ? clampi(s, 0, len) : clampi(s, -1, len - 1);
        Dim **e = sv_new(p, v, n);
        for (int i = 0; i < n; i++) {
            int64_t j = i0 + i * step;
            e[i] = j >= 0 && j < len ? a->e[j] : NULL;
        }
        (void)t;
        return;
    }
    case OP_NEG:
    case OP_ABS:
    case OP_NOT: {
        if (!in_step(a, n))
            return;
        Dim **e = sv_new(p, v, n);
        for (int i = 0; i < n && i < a->n; i++) {
            if (!a->e[i])
                continue;
            if (op->kind == OP_NEG)
                e[i] = dim_neg(cx, a->e[i]);
            else if (op->kind == OP_ABS)
                e[i] = nonneg(a->e[i]) ? a->e[i] : NULL;
            else
                e[i] = dim_is_const(a->e[i]) ? truth(p, a->e[i]->c == 0) : NULL;
        }
        return;
    }
    case OP_CMP: {
        if (!in_step(a, n) || !in_step(b, n))
            return;
        const char *dir = op_attr_str(op, "dir", "eq");
        Dim **e = sv_new(p, v, n);
        for (int i = 0; i < n; i++) {
            Dim *x = bc(a, i), *y = bc(b, i);
            e[i] = x && y ? compare(p, dir, x, y) : NULL;
        }
        return;
    }
    case OP_SELECT: {
        SV *c = a, *x = b, *y = known(p, op->in[2]);
        if (!in_step(c, n))
            return;
        if (!in_step(x, n))
            x = NULL;
        if (!in_step(y, n))
            y = NULL;
        Dim **e = sv_new(p, v, n);
        for (int i = 0; i < n; i++) {
            Dim *ci = bc(c, i);
            if (ci && dim_is_const(ci))
                e[i] = ci->c ? (x ? bc(x, i) : NULL) : (y ? bc(y, i) : NULL);
            else if (x && y && bc(x, i) == bc(y, i)) /* either way: Reshape's 0 over a dim that may be 0 */
                e[i] = bc(x, i);
            else if (x && y && bc(x, i) && bc(y, i) && arms_meet(p, op, i, bc(x, i), bc(y, i)))
                e[i] = bc(y, i);
            else if (x && y && bc(x, i) && bc(y, i) && either_arm(p, op, i, bc(x, i), bc(y, i)))
                e[i] = bc(y, i);
        }
        return;
    }
    case OP_REDUCE: {
        if (!a || !all_known(a) || n != 1)
            return;
        const char *kind = op_attr_str(op, "kind", "");
        Dim *r = a->e[0];
        for (int i = 1; i < a->n && r; i++) {
            if (!strcmp(kind, "prod")) r = dim_mul(cx, r, a->e[i]);
            else if (!strcmp(kind, "sum")) r = dim_add(cx, r, a->e[i]);
            else if (!strcmp(kind, "max")) r = dim_max(cx, r, a->e[i]);
            else if (!strcmp(kind, "min")) r = dim_min(cx, r, a->e[i]);
            else r = NULL;
        }
        if (a->n == 0)
            r = !strcmp(kind, "prod") ? dim_const(cx, 1) : !strcmp(kind, "sum") ? dim_const(cx, 0) : NULL;
        sv_new(p, v, 1)[0] = r;
        return;
    }
    default:
        break;
    }
    if (op_info(op->kind)->cat == CAT_BINARY && in_step(a, n) && in_step(b, n)) {
        Dim **e = sv_new(p, v, n);
        for (int i = 0; i < n; i++) {
            Dim *x = bc(a, i), *y = bc(b, i);
            e[i] = x && y ? binop(p, op->kind, x, y) : NULL;
        }
    }
}

/* ---- rewriting dyn ops into static ones ----------------------------- */

/* Builds kind k over `in` with the attributes of `old` plus `extra`, puts it
 * where `old` was, and maps old's placeholder result dims to the new ones. */
static Op *replace(Prop *p, Op *old, OpKind k, Value *const *in, int nin, AttrList *extra)
{
    Graph *g = p->g;
    AttrList l = *extra;
    for (int i = 0; i < old->nattrs; i++) {
        bool dup = false;
        for (int j = 0; j < l.n; j++)
            dup |= !strcmp(l.v[j].name, old->attrs[i].name);
        if (!dup && op_attr_spec(k, old->attrs[i].name))
            attrs_add(g, &l, &old->attrs[i]);
    }
    Op *nw = build_op(g, k, in, nin, l.v, l.n);
    if (!nw)
        return NULL;
    nw->src = old->src;
    nw->line = old->line;
    graph_move_op(g, nw, old);
    for (int i = 0; i < old->nout && i < nw->nout; i++) {
        const Type *ot = &old->out[i]->type, *nt = &nw->out[i]->type;
        for (int j = 0; j < ot->rank && j < nt->rank; j++)
            if (ot->dims[j]->kind == DIM_SYM && ot->dims[j]->origin == SYM_DERIVED)
                dimmap_put(&p->map, ot->dims[j], nt->dims[j]);
        if (nw->out[i]->name == NULL)
            nw->out[i]->name = old->out[i]->name;
        graph_replace_uses(g, old->out[i], nw->out[i]);
    }
    graph_remove_op(g, old);
    return nw;
}

/* Normalises an ONNX slice bound on an axis of size `dim`: negative values
 * count from the end, then clamp to [0, dim]. NULL if undecidable. */
static Dim *slice_bound(Prop *p, Dim *x, Dim *dim)
{
    DimCtx *cx = p->cx;
    if (dim_is_const(x)) {
        if (x->c >= (INT64_MAX >> 2))
            return dim;
        if (x->c < 0) {
            if (x->c <= -(INT64_MAX >> 2))
                return dim_const(cx, 0);
            return dim_max(cx, dim_addc(cx, dim, x->c), dim_const(cx, 0));
        }
        return dim_min(cx, x, dim);
    }
    return nonneg(x) ? dim_min(cx, x, dim) : NULL;
}

static Op *rewrite_dyn(Prop *p, Op *op)
{
    Graph *g = p->g;
    AttrList l = {0};
    SV *s = op->nin > 1 ? known(p, op->in[1]) : NULL;
    switch (op->kind) {
    case OP_DYN_RESHAPE:
    case OP_DYN_BROADCAST:
    case OP_DYN_RESIZE:
        if (!all_known(s))
            return NULL;
        for (int i = 0; i < s->n; i++)
            if (!nonneg(s->e[i]))
                return NULL;
        attrs_add_dims(g, &l, "shape", s->e, s->n);
        if (op->kind == OP_DYN_RESHAPE)
            return replace(p, op, OP_RESHAPE, op->in, 1, &l);
        if (op->kind == OP_DYN_BROADCAST)
            return replace(p, op, OP_BROADCAST, op->in, 1, &l);
        return replace(p, op, OP_RESIZE, op->in, 1, &l);
    case OP_DYN_IOTA: {
        SV *sh = known(p, op->in[0]);
        if (!all_known(sh))
            return NULL;
        attrs_add_dims(g, &l, "shape", sh->e, sh->n);
        return replace(p, op, OP_IOTA, NULL, 0, &l);
    }
    case OP_DYN_PAD: {
        int r = op->in[0]->type.rank;
        if (!all_known(s) || s->n != 2 * r)
            return NULL;
        attrs_add_dims(g, &l, "low", s->e, r);
        attrs_add_dims(g, &l, "high", s->e + r, r);
        Value *in[2] = {op->in[0], op->in[2]};
        return replace(p, op, OP_PAD, in, 2, &l);
    }
    case OP_DYN_SLICE: {
        SV *en = known(p, op->in[2]), *sp = known(p, op->in[3]);
        int r = op->in[0]->type.rank;
        if (!all_known(s) || !all_known(en) || !all_known(sp))
            return NULL;
        Dim *start[MAX_RANK], *limit[MAX_RANK];
        int64_t stride[MAX_RANK];
        for (int i = 0; i < r; i++) {
            Dim *dim = op->in[0]->type.dims[i];
            if (!dim_is_const(sp->e[i]) || sp->e[i]->c <= 0)
                return NULL;
            stride[i] = sp->e[i]->c;
            start[i] = slice_bound(p, s->e[i], dim);
            limit[i] = slice_bound(p, en->e[i], dim);
            if (!start[i] || !limit[i])
                return NULL;
            /* an empty range keeps limit >= start */
            limit[i] = dim_max(p->cx, limit[i], start[i]);
        }
        attrs_add_dims(g, &l, "start", start, r);
        attrs_add_dims(g, &l, "limit", limit, r);
        attrs_add_ints(g, &l, "stride", stride, r);
        return replace(p, op, OP_SLICE, op->in, 1, &l);
    }
    default:
        return NULL;
    }
}

/* ---- the walk ------------------------------------------------------- */

static void subst_op(Prop *p, Op *op)
{
    if (!p->map.count)
        return;
    for (int i = 0; i < op->nattrs; i++)
        if (op->attrs[i].kind == ATTR_DIMS)
            for (int j = 0; j < op->attrs[i].n; j++)
                op->attrs[i].dims[j] = dim_subst(p->cx, op->attrs[i].dims[j], &p->map);
    for (int i = 0; i < op->nout; i++)
        for (int j = 0; j < op->out[i]->type.rank; j++)
            op->out[i]->type.dims[j] = dim_subst(p->cx, op->out[i]->type.dims[j], &p->map);
}

/* Re-infers op's result types; placeholders the rule now determines are
 * mapped to what it gives. */
static bool refine(Prop *p, Op *op)
{
    if (op->kind == OP_CONST)
        return true;
    Type inf[MAX_RESULTS];
    Diag e = {0};
    memset(inf, 0, sizeof inf);
    if (op->nout > MAX_RESULTS || !op_info(op->kind)->infer(p->g, op, inf, &e)) {
        if (op->line && p->g->file)
            return diag_setk(p->d, e.kind, "%s:%d: error: %s: %s", p->g->file, op->line, op_info(op->kind)->name,
                             e.msg);
        return diag_setk(p->d, e.kind, "error: op %d (%s%s%s): %s", op->id, op_info(op->kind)->name,
                         op->src ? " " : "", op->src ? op->src : "", e.msg);
    }
    for (int i = 0; i < op->nout; i++) {
        Type *t = &op->out[i]->type;
        for (int j = 0; j < t->rank; j++) {
            Dim *r = inf[i].dims ? inf[i].dims[j] : NULL;
            if (!r || r == t->dims[j])
                continue;
            if (t->dims[j]->kind == DIM_SYM && t->dims[j]->origin == SYM_DERIVED)
                dimmap_put(&p->map, t->dims[j], r);
            t->dims[j] = r;
        }
    }
    return true;
}

/* Partially known shape operands still give the dims they know, and a
 * known k gives topk its result dim. */
static void refine_partial(Prop *p, Op *op)
{
    SV *s = NULL;
    int axis = -1;
    if (op->kind == OP_DYN_RESHAPE || op->kind == OP_DYN_BROADCAST || op->kind == OP_DYN_RESIZE)
        s = known(p, op->in[1]);
    else if (op->kind == OP_DYN_IOTA)
        s = known(p, op->in[0]);
    else if (op->kind == OP_TOPK) {
        s = known(p, op->in[1]);
        axis = (int)op_attr_int(op, "axis", 0);
    }
    if (!s)
        return;
    for (int r = 0; r < op->nout; r++) {
        Type *t = &op->out[r]->type;
        for (int j = 0; j < t->rank; j++) {
            Dim *e = axis >= 0 ? (j == axis ? s->e[0] : NULL) : (j < s->n ? s->e[j] : NULL);
            if (!e || !nonneg(e) || t->dims[j] == e)
                continue;
            if (t->dims[j]->kind == DIM_SYM && t->dims[j]->origin == SYM_DERIVED)
                dimmap_put(&p->map, t->dims[j], e);
            t->dims[j] = e;
        }
    }
}

/* Known shape values that still feed ops become shape_const / const.
 * The uses are counted once, and the new values take the old ones' uses
 * in one pass at the end (by value id): per value, counting and replacing
 * each walked the whole graph, quadratic in the graph's size (a ViT's
 * 1,000 shape values). */
static void materialise(Prop *p)
{
    Graph *g = p->g;
    int nv0 = g->nvalues;
    int *uses = calloc((size_t)nv0 + 1, sizeof *uses);
    Value **repl = calloc((size_t)nv0 + 1, sizeof *repl);
    if (!uses || !repl) {
        free(uses);
        free(repl);
        return; /* nothing materialised: the values stay as they are */
    }
    graph_for_each_op(g, op)
        for (int i = 0; i < op->nin; i++)
            if (op->in[i]->id < nv0)
                uses[op->in[i]->id]++;
    for (int i = 0; i < g->noutputs; i++)
        if (g->outputs[i]->id < nv0)
            uses[g->outputs[i]->id]++;
    bool any = false;
    for (Op *op = g->first; op; op = op->next) {
        if (op->kind == OP_CONST || op->kind == OP_SHAPE_CONST || op->nout != 1)
            continue;
        Value *v = op->out[0];
        SV *s = known(p, v);
        if (!all_known(s) || v->type.dtype == DT_BOOL || v->id >= nv0 || uses[v->id] == 0)
            continue;
        bool allc = true;
        for (int i = 0; i < s->n; i++)
            allc &= dim_is_const(s->e[i]);
        if (!allc && v->type.rank > 1)
            continue; /* shape_const is a list: a matrix of dims stays computed */
        Value *nv;
        if (allc) {
            size_t es = dtype_size(v->type.dtype);
            unsigned char *buf = arena_alloc(&g->arena, (size_t)s->n * es + 1);
            if (!buf)
                continue; /* the arena failed: the driver reports it */
            for (int i = 0; i < s->n; i++) {
                if (es == 8)
                    memcpy(buf + 8 * i, &s->e[i]->c, 8);
                else {
                    int32_t x = (int32_t)s->e[i]->c;
                    memcpy(buf + 4 * i, &x, 4);
                }
            }
            nv = build_const(g, v->type, buf, (size_t)s->n * es, false);
        } else {
            AttrList l = {0};
            attrs_add_dims(g, &l, "dims", s->e, s->n);
            if (v->type.rank == 0)
                attrs_add_int(g, &l, "scalar", 1);
            Op *sc = build_op(g, OP_SHAPE_CONST, NULL, 0, l.v, l.n);
            nv = sc ? sc->out[0] : NULL;
            if (nv && v->type.dtype != DT_I64)
                nv = build_convert(g, nv, v->type.dtype);
        }
        if (!nv)
            continue;
        /* put the new ops where the old one was */
        Op *last = nv->def, *first = last->kind == OP_CONVERT ? last->in[0]->def : last;
        graph_move_op(g, first, op);
        if (first != last)
            graph_move_op(g, last, op);
        nv->name = v->name;
        repl[v->id] = nv;
        any = true;
        SV *ns = sv_of(p, nv);
        ns->n = s->n;
        ns->e = s->e;
    }
    if (any) {
        graph_for_each_op(g, op)
            for (int i = 0; i < op->nin; i++)
                if (op->in[i]->id < nv0 && repl[op->in[i]->id])
                    op->in[i] = repl[op->in[i]->id];
        for (int i = 0; i < g->noutputs; i++)
            if (g->outputs[i]->id < nv0 && repl[g->outputs[i]->id])
                g->outputs[i] = repl[g->outputs[i]->id];
    }
    free(uses);
    free(repl);
}

/* An element that has grown past SV_DIM_MAX nodes as a tree becomes
 * unknown, so the op it feeds stays dynamic and binds a symbol at run
 * time. Index arithmetic over shapes can nest a dim in itself level after
 * level (Swin's shifted-window mask did, min(A, max(0, A - 7)) over a
 * padded A, until min(W, 7 * ceildiv(W, 7)) simplified to W): every dim
 * built from such elements doubles per level, and whatever walks a dim
 * as a tree (printing, signatures, the host flow's code) would take
 * minutes. The detectors' largest elements are about 8,000 nodes. */
static void forget_large(Prop *p, const Op *op)
{
    if (op->nout != 1 || !trackable(&op->out[0]->type))
        return;
    SV *s = known(p, op->out[0]);
    for (int i = 0; s && i < s->n; i++) {
        if (s->e[i] && s->e[i]->tsize > SV_DIM_MAX)
            s->e[i] = NULL;
    }
}

/* The speculated dims' requirements, in the graph's final dims, for the
 * reshapes that became static (one left dynamic keeps ONNX's rule at run
 * time). */
static void require_spec(Prop *p)
{
    for (int i = 0; i < p->nspec; i++) {
        if (!p->spec[i].made)
            continue;
        Dim *d = dim_subst(p->cx, p->spec[i].dim, &p->map);
        const char *name = p->spec[i].name;
        const char *what = name ? arena_printf(&p->si->arena, "reshape \"%s\" (a 0 in its shape, which ONNX would "
                                                              "read as the input's dim, is not supported)", name)
                                : "a reshape (a 0 in its shape, which ONNX would read as the input's dim, is "
                                  "not supported)";
        if (d && !hostprog_push(p->si, (HostStep){.kind = HS_REQUIRE, .lhs = d, .rel = REL_GE,
                                                  .rhs = dim_const(p->cx, 1), .what = what}))
            p->oom = true;
    }
}

/* The one symbol d mentions, or NULL (none, several, or a walk that
 * would be long: d's tree size bounds it). */
static Dim *sole_sym(Dim *d, Dim *found)
{
    if (d->kind == DIM_SYM)
        return !found || found == d ? d : NULL;
    for (int i = 0; i < d->n && found != d; i++) {
        Dim *s = d->args[i]->kind == DIM_CONST ? found : sole_sym(d->args[i], found);
        if (!s)
            return NULL;
        found = s;
    }
    return found;
}

/* A speculated dim d is required to be at least 1 before a run starts
 * (require_spec; a violation is the run's error), so where d mentions one
 * input symbol s, and d < 1 at every value of s from its lower bound up to
 * some v, every run has s >= v: the bound is raised, and the dims built
 * from here on know it. Swin's windows divide by ceildiv(floordiv(height,
 * 4), 8), at least 1 only for height >= 4: with the bound, the window
 * count cancels out of (batch * windows) / windows. The input's bind step
 * checks the new bound (an error that names the input and its dim). */
enum { TIGHTEN_SCAN = 1024 }; /* values tried: thresholds of patches and windows (4 x 8, 32 x 7) are small */

static void tighten_lo(Prop *p, Dim *d)
{
    Dim *s = d && d->tsize < 128 ? sole_sym(d, NULL) : NULL;
    if (!s || s->origin != SYM_INPUT || s->hi != DIM_INF)
        return;
    int n = p->cx->nsyms;
    int64_t *val = calloc((size_t)n + 1, sizeof *val);
    bool *bound = calloc((size_t)n + 1, sizeof *bound);
    if (!val || !bound) {
        free(val);
        free(bound);
        return; /* a bound not raised: nothing lost but a simplification */
    }
    DimEnv env = {.val = val, .bound = bound, .n = n};
    bound[s->id] = true;
    int64_t v = s->lo, got = 0;
    for (int i = 0; i < TIGHTEN_SCAN; i++, v++) {
        val[s->id] = v;
        if (dim_eval(d, &env, &got) != DIM_OK || got >= 1)
            break;
    }
    if (v > s->lo && got >= 1)
        dim_sym_set(s, v, s->hi, s->origin);
    free(val);
    free(bound);
}

bool shape_propagate(Graph *g, ShapeInfo *si, Diag *d)
{
    Prop p = {.g = g, .si = si, .cx = &g->dims, .d = d};
    arena_init(&p.scratch);
    dimmap_init(&p.map);
    mark_zero_rules(&p);
    bool ok = !p.oom;
    for (Op *op = g->first, *next; op && ok; op = next) {
        next = op->next;
        subst_op(&p, op);
        Op *nw = rewrite_dyn(&p, op);
        for (int i = 0; nw && i < p.nspec; i++)
            if (p.spec[i].op == op && !p.spec[i].made) {
                p.spec[i].made = true;
                tighten_lo(&p, dim_subst(p.cx, p.spec[i].dim, &p.map));
            }
        if (nw)
            op = nw;
        ok = refine(&p, op);
        if (ok)
            refine_partial(&p, op);
        eval_op(&p, op);
        forget_large(&p, op);
    }
    if (ok && !p.oom && !p.map.failed) {
        graph_subst_dims(g, &p.map);
        require_spec(&p);
        materialise(&p);
        canon_dce(g);
    }
    if (p.oom || p.map.failed || p.scratch.failed)
        ok = diag_blame_memory(d);
    dimmap_free(&p.map);
    arena_free(&p.scratch);
    free(p.sv);
    free(p.zero_rule);
    free(p.spec);
    return ok;
}
