/*
 * layout.c — channels-last convolutions and pools, for targets whose
 * library runs them fastest so (the CPU's oneDNN: brgconv and brdgmm on
 * AVX-512, its jit kernels on AVX2).
 *
 * ONNX models are channels-first (NCHW). The pass makes every 2-D f32
 * conv and pool channels_last (doc/ops.md), between two transposes:
 *
 *     y = conv(x, w)  =>  y = transpose(conv[channels_last](transpose(x, 0 2 3 1), w), 0 3 1 2)
 *
 * (a conv whose x is not channels-last already, a model's image, reads it
 * as it is: channels_last 2, the result channels-last alone)
 * and moves each transpose back to NCHW (perm 0 3 1 2, "to_first") down
 * the graph, past the ops it commutes with:
 *
 *     elementwise ops   op(T(x), b) = T(op(x, T'(b))) where every other
 *                       operand b is a T itself, a constant (T' folds),
 *                       or one that T' only reshapes (a [N, C, 1, 1]
 *                       gate, a scalar)
 *     reduce            reduce(T(x), axes) = T(reduce(x, T's axes))
 *     concat, slice     the axis, the per-axis attributes permuted
 *     channel shuffle   reshape-transpose-reshape within the channels
 *                       (ShuffleNet), the same within the last axis
 *
 * Where it meets the next convolution's transpose in, canon cancels the
 * pair: the data stays channels-last from conv to conv, through the
 * epilogues (bias, activation, residual), squeeze-excite gates and global
 * pools, and the generated kernels between them (loops, column
 * reductions) run on it as on any tensor. A transpose that reaches an op
 * it does not commute with stays before it, as an index map of the loop
 * kernel that reads it (or a copy before a library call): no worse than
 * the reorder the library would make.
 *
 * Runs after shape analysis (the new ops get the original dims, permuted:
 * equal dims stay equal pointers) and before canon, which folds the
 * permuted constants, cancels transpose pairs and removes what died.
 */
#include "passes/passes.h"

#include <string.h>

static const int64_t TO_LAST[4] = {0, 2, 3, 1};  /* NCHW -> NHWC */
static const int64_t TO_FIRST[4] = {0, 3, 1, 2}; /* NHWC -> NCHW */

/* v's type with its dims permuted: dims[i] = t->dims[perm[i]]. */
static Type permuted(Graph *g, const Type *t, const int64_t *perm)
{
    Dim *dims[MAX_RANK];
    for (int i = 0; i < t->rank; i++)
        dims[i] = t->dims[perm[i]];
    return type_make(&g->arena, t->dtype, t->rank, dims);
}

/* The NHWC value x whose NCHW view v is (v = transpose(x, to_first)), or NULL. */
static Value *from_last(const Value *v)
{
    const Op *d = v->def;
    if (!d || d->kind != OP_TRANSPOSE || v->type.rank != 4)
        return NULL;
    const Attr *p = op_attr(d, "perm");
    return memcmp(p->ints, TO_FIRST, sizeof TO_FIRST) ? NULL : d->in[0];
}

/* Places the op defining v (built at the end) before `at`; v. */
static Value *place(Graph *g, Value *v, Op *at)
{
    if (v)
        graph_move_op(g, v->def, at);
    return v;
}

/* transpose(x, perm) before `at`, with x's dims permuted. */
static Value *transpose_at(Graph *g, Value *x, const int64_t *perm, Op *at)
{
    return place(g, build_transpose(g, x, perm), at);
}

/* Replaces op's result with to_first(y), y its channels-last version. */
static bool replace_by(Graph *g, Op *op, Value *y)
{
    y->type = permuted(g, &op->out[0]->type, TO_LAST);
    Value *t = transpose_at(g, y, TO_FIRST, op);
    if (!t)
        return false;
    t->type = op->out[0]->type;
    t->name = op->out[0]->name; /* the same value, in NCHW; the old op dies */
    graph_replace_uses(g, op->out[0], t);
    return true;
}

/* op rebuilt with operands in and attributes attrs (n), before op. */
static Value *rebuild(Graph *g, Op *op, Value **in, const Attr *attrs, int n)
{
    Op *o = build_op(g, op->kind, in, op->nin, attrs, n);
    if (!o)
        return NULL;
    graph_move_op(g, o, op);
    o->src = op->src;
    return o->out[0];
}

/* ---- convolutions and pools -------------------------------------------- */

static bool wants_last(const Op *op)
{
    return (op->kind == OP_CONV || op->kind == OP_POOL) && op->in[0]->type.rank == 4 &&
           op->in[0]->type.dtype == DT_F32 && !op_attr_int(op, "channels_last", 0);
}

/* A conv whose operand is not the NCHW view of a channels-last value
 * reads it as it is (channels_last 2: the library reorders it, or, for
 * the few channels of an image, reads it so) rather than after a
 * transpose of its own; a pool always reads channels-last. */
static bool to_last(Graph *g, Op *op)
{
    bool plain_in = op->kind == OP_CONV && !from_last(op->in[0]);
    Value *in[2] = {plain_in ? op->in[0] : transpose_at(g, op->in[0], TO_LAST, op), op->nin > 1 ? op->in[1] : NULL};
    Attr attrs[16];
    int n = op->nattrs < 15 ? op->nattrs : 15;
    memcpy(attrs, op->attrs, (size_t)n * sizeof *attrs);
    attrs[n++] = (Attr){.name = "channels_last", .kind = ATTR_INT, .i = plain_in ? 2 : 1};
    Value *y = in[0] ? rebuild(g, op, in, attrs, n) : NULL;
    return y && replace_by(g, op, y);
}

/* ---- moving the transposes down ------------------------------------------ */

/* Operand b of an elementwise op whose result is NCHW, as the operand of
 * the op's channels-last version: NULL when that would cost a copy. */
static Value *operand_last(Graph *g, Value *b, Op *at)
{
    Value *x = from_last(b);
    if (x)
        return x;
    const Type *t = &b->type;
    size_t n;
    if (t->rank > 4 || (type_static_numel(t, &n) && n == 1))
        return b; /* a scalar broadcasts alike in every layout */
    Dim *d[4];
    for (int i = 0; i < 4; i++)
        d[i] = i < 4 - t->rank ? dim_const(&g->dims, 1) : t->dims[i - (4 - t->rank)];
    bool konst = b->def && b->def->kind == OP_CONST && b->def->cst && b->def->cst->data;
    /* [a0, a1, a2, a3] to [a0, a2, a3, a1]: the same memory when the dims
     * that are not 1 keep their order */
    bool moves = !dim_is(d[1], 1) && !(dim_is(d[2], 1) && dim_is(d[3], 1));
    if (moves && !konst)
        return NULL;
    Value *r = t->rank < 4 ? place(g, build_reshape(g, b, d, 4), at) : b;
    if (!r)
        return NULL;
    if (!moves) {
        Dim *l[4] = {d[0], d[2], d[3], d[1]};
        return place(g, build_reshape(g, r, l, 4), at);
    }
    return transpose_at(g, r, TO_LAST, at); /* of a constant: canon folds it */
}

static bool elementwise(const Op *op)
{
    OpCat c = op_info(op->kind)->cat;
    return c == CAT_UNARY || c == CAT_BINARY || c == CAT_ELEM;
}

static Value *sink_elementwise(Graph *g, Op *op)
{
    Value *in[4];
    if (op->nin > 4 || op->out[0]->type.rank != 4)
        return NULL;
    for (int i = 0; i < op->nin; i++)
        if (!(in[i] = operand_last(g, op->in[i], op)))
            return NULL;
    return rebuild(g, op, in, op->attrs, op->nattrs);
}

/* The attribute a, a per-axis list of NCHW, for NHWC (dims or ints). */
static Attr permuted_attr(const Attr *a, Dim **dims, int64_t *ints)
{
    Attr r = *a;
    for (int i = 0; i < 4; i++) {
        if (a->kind == ATTR_DIMS)
            dims[TO_FIRST[i]] = a->dims[i];
        else
            ints[TO_FIRST[i]] = a->ints[i];
    }
    if (a->kind == ATTR_DIMS)
        r.dims = dims;
    else
        r.ints = ints;
    return r;
}

static Value *sink_reduce(Graph *g, Op *op, Value *x)
{
    const Attr *axes = op_attr(op, "axes");
    bool keep = op_attr_int(op, "keepdims", 0) != 0;
    bool red[4] = {false};
    for (int i = 0; i < axes->n; i++)
        red[TO_FIRST[axes->ints[i]]] = true;
    if (!keep)
        return NULL; /* the kept axes would come out in another order */
    int64_t ax[4];
    int n = 0;
    for (int i = 0; i < 4; i++)
        if (red[i])
            ax[n++] = i;
    Attr attrs[8];
    int na = op->nattrs < 8 ? op->nattrs : 8;
    memcpy(attrs, op->attrs, (size_t)na * sizeof *attrs);
    for (int i = 0; i < na; i++)
        if (!strcmp(attrs[i].name, "axes")) {
            attrs[i].ints = ax;
            attrs[i].n = n;
        }
    Value *in[1] = {x};
    return rebuild(g, op, in, attrs, na);
}

static Value *sink_move(Graph *g, Op *op, Value *x)
{
    Attr attrs[8];
    Dim *dims[8][4];
    int64_t ints[8][4];
    int na = op->nattrs < 8 ? op->nattrs : 8;
    for (int i = 0; i < na; i++) {
        const Attr *a = &op->attrs[i];
        attrs[i] = (a->kind == ATTR_DIMS || a->kind == ATTR_INTS) && a->n == 4 ? permuted_attr(a, dims[i], ints[i])
                                                                               : *a;
    }
    Value *in[1] = {x};
    return rebuild(g, op, in, attrs, na);
}

static Value *sink_concat(Graph *g, Op *op)
{
    Value *in[64];
    if (op->nin > 64)
        return NULL;
    for (int i = 0; i < op->nin; i++)
        if (!(in[i] = from_last(op->in[i])))
            return NULL;
    Attr a = {.name = "axis", .kind = ATTR_INT, .i = TO_FIRST[op_attr_int(op, "axis", 0)]};
    return rebuild(g, op, in, &a, 1);
}

/* op's channels-last version, before op, when one of its operands is a
 * to_first transpose and the others move along; NULL else. */
static Value *sink(Graph *g, Op *op)
{
    Value *x = NULL;
    for (int i = 0; i < op->nin && !x; i++)
        x = from_last(op->in[i]);
    if (!x || op->nout != 1)
        return NULL;
    if (elementwise(op))
        return sink_elementwise(g, op);
    switch (op->kind) {
    case OP_REDUCE: return op->in[0]->type.rank == 4 ? sink_reduce(g, op, x) : NULL;
    case OP_SLICE: return sink_move(g, op, x);
    case OP_CONCAT: return sink_concat(g, op);
    default: return NULL;
    }
}

/* ---- channel shuffles ------------------------------------------------- */

static bool same_dim(const Dim *a, const Dim *b)
{
    return a == b || (dim_is_const(a) && dim_is_const(b) && a->c == b->c);
}

/* ShuffleNet's channel shuffle of an NCHW view v = to_first(x):
 *
 *     reshape(transpose(reshape(v, [N, G, C/G, H, W]), 0 2 1 3 4), [N, C, H, W])
 *
 * moves channels within the channel axis alone, so in NHWC it is the
 * same on the last axis of x:
 *
 *     to_first(reshape(transpose(reshape(x, [N, H, W, G, C/G]), 0 1 2 4 3), [N, H, W, C]))
 *
 * and the slices and convolutions after it stay channels-last (they read
 * a plain NCHW copy, and oneDNN reordered it again, in every block). op
 * is the first reshape; each shuffle through it is rewritten. */
static bool shuffle(Graph *g, Op *op)
{
    static const int64_t SWAP5[5] = {0, 2, 1, 3, 4}, SWAP_LAST[5] = {0, 1, 2, 4, 3};
    Value *x = op->kind == OP_RESHAPE ? from_last(op->in[0]) : NULL;
    if (!x)
        return true;
    const Type *v = &op->in[0]->type, *s = &op->out[0]->type;
    if (s->rank != 5 || !same_dim(s->dims[0], v->dims[0]) || !same_dim(s->dims[3], v->dims[2]) ||
        !same_dim(s->dims[4], v->dims[3]))
        return true;
    for (Op *tr = op->next; tr; tr = tr->next) {
        if (tr->kind != OP_TRANSPOSE || tr->in[0] != op->out[0] ||
            memcmp(op_attr(tr, "perm")->ints, SWAP5, sizeof SWAP5))
            continue;
        for (Op *back = tr->next, *next; back; back = next) {
            next = back->next;
            const Type *b = &back->out[0]->type;
            if (back->kind != OP_RESHAPE || back->in[0] != tr->out[0] || b->rank != 4)
                continue;
            bool same = true;
            for (int i = 0; i < 4; i++)
                same &= same_dim(b->dims[i], v->dims[i]);
            if (!same)
                continue;
            Dim *split[5] = {s->dims[0], s->dims[3], s->dims[4], s->dims[1], s->dims[2]};
            Value *r1 = place(g, build_reshape(g, x, split, 5), back);
            Value *t = r1 ? transpose_at(g, r1, SWAP_LAST, back) : NULL;
            Value *r2 = t ? place(g, build_reshape(g, t, x->type.dims, 4), back) : NULL;
            if (!r2 || !replace_by(g, back, r2))
                return false;
        }
    }
    return true;
}

int layout_run(Graph *g)
{
    int n = 0;
    for (Op *op = g->first, *next; op; op = next) {
        next = op->next;
        if (wants_last(op)) {
            if (!to_last(g, op))
                return -1;
            n++;
            continue;
        }
        if (!shuffle(g, op))
            return -1;
        Value *y = sink(g, op);
        if (y && !replace_by(g, op, y))
            return -1;
    }
    canon_dce(g);
    return n;
}
