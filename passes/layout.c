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
#include "runtime/interp.h"

#include <math.h>
#include <stdlib.h>
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

/* conv or pool op rebuilt on operand x with channels_last = last and,
 * where block > 0, block = block (its weights, if any, as they are). */
static Value *with_layout(Graph *g, Op *op, Value *x, int64_t last, int64_t block)
{
    Value *in[2] = {x, op->nin > 1 ? op->in[1] : NULL};
    Attr attrs[16];
    int n = op->nattrs < 14 ? op->nattrs : 14;
    memcpy(attrs, op->attrs, (size_t)n * sizeof *attrs);
    attrs[n++] = (Attr){.name = "channels_last", .kind = ATTR_INT, .i = last};
    if (block)
        attrs[n++] = (Attr){.name = "block", .kind = ATTR_INT, .i = block};
    return x ? rebuild(g, op, in, attrs, n) : NULL;
}

/* A conv whose operand is not the NCHW view of a channels-last value
 * reads it as it is (channels_last 2: the library reorders it, or, for
 * the few channels of an image, reads it so) rather than after a
 * transpose of its own; a pool always reads channels-last. */
static bool to_last(Graph *g, Op *op)
{
    bool plain_in = op->kind == OP_CONV && !from_last(op->in[0]);
    Value *y = with_layout(g, op, plain_in ? op->in[0] : transpose_at(g, op->in[0], TO_LAST, op), plain_in ? 2 : 1, 0);
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

/* ---- blocked layouts --------------------------------------------------
 *
 * With block = b (16 where the target's vectors hold 16 floats, 8 for 8),
 * convolutions and pools run on oneDNN's blocked layout (nChw16c):
 * a value [N, C, H, W] is kept as [N, ceildiv(C, b), H, W, b], channel c
 * at block c / b, lane c % b. oneDNN's kernels for it are its fastest
 * for the mobile CNNs' narrow and depthwise layers (MobileNetV2's
 * convolutions 1.13-1.27 times faster than on nhwc at one thread,
 * bench/NOTES.md), and the lanes past C pad a channel count that is not
 * a multiple of b (24 to 32) as ONNX Runtime's NCHWc does.
 *
 *     y = conv(x, w)  =>  y = unblock(conv[block b](B, w))
 *     unblock(B)      =   slice(reshape(transpose(B, 0 1 4 2 3), [N, Cb * b, H, W]), C)
 *
 * The pass keeps, for each unblock view it made, its blocked value and
 * what the padding lanes hold: zero after a convolution (oneDNN writes
 * them so), f(pads) after an elementwise op f of blocked values,
 * constants blocked with zero lanes and scalars, as the interpreter
 * computes it at compile time. The view moves down past elementwise ops,
 * reductions over the spatial axes (a global pool), pools and concats of
 * whole blocks, as the channels-last view does; a convolution reads the
 * blocked value itself when its lanes are known and finite (oneDNN
 * multiplies them by the weights' zero padding, so 0 * NaN would leak),
 * else a blocked copy (pad, reshape, transpose) of its operand. The
 * views that meet no convolution become index maps of the kernels that
 * read them.
 *
 * A model is blocked only if every convolution can be (one group or
 * depthwise, channel counts constants, not a 1 x 1 image: those become
 * channels-last dots), nothing shuffles its channels, and, tried on a
 * copy of the graph, convolutions pass blocks on to each other with no
 * blocked copy between; else the channels-last pass above runs
 * (ResNeXt's grouped convolutions, ShuffleNet, ConvNeXt's LayerNorms, a
 * ViT's one patch convolution keep it). */

typedef struct Blocked {
    Value *b;   /* [N, ceildiv(C, blk), spatial..., blk]; NULL: none */
    bool known; /* the lanes past C hold `pad` (finite) */
    double pad;
} Blocked;

typedef struct Lay {
    Graph *g;
    int64_t blk;
    Blocked *rec; /* by the id of the NCHW view */
    int cap;
    int chained;  /* convolutions reading a blocked value as it is */
    int copied;   /* convolutions reading a blocked copy of theirs */
} Lay;

static Blocked *rec_of(const Lay *L, const Value *v)
{
    return v->id < L->cap && L->rec[v->id].b ? &L->rec[v->id] : NULL;
}

static bool rec_set(Lay *L, const Value *view, Value *b, bool known, double pad)
{
    if (view->id >= L->cap) {
        int cap = view->id + 1 > 2 * L->cap ? view->id + 1024 : 2 * L->cap;
        Blocked *r = realloc(L->rec, (size_t)cap * sizeof *r);
        if (!r)
            return false;
        memset(r + L->cap, 0, (size_t)(cap - L->cap) * sizeof *r);
        L->rec = r;
        L->cap = cap;
    }
    L->rec[view->id] = (Blocked){b, known && isfinite(pad), known && isfinite(pad) ? pad : 0};
    return true;
}

static Dim *cnst(const Lay *L, int64_t c)
{
    return dim_const(&L->g->dims, c);
}

/* The NCHW view [N, C, S...] of blocked B, before `at`. */
static Value *unblock(Lay *L, Value *B, Dim *C, Op *at)
{
    Graph *g = L->g;
    int r = B->type.rank, nsp = r - 3;
    int64_t perm[MAX_RANK] = {0, 1, r - 1};
    Dim *shape[MAX_RANK] = {B->type.dims[0], dim_mul(&g->dims, B->type.dims[1], B->type.dims[r - 1])};
    for (int i = 0; i < nsp; i++) {
        perm[3 + i] = 2 + i;
        shape[2 + i] = B->type.dims[2 + i];
    }
    Value *t = shape[1] ? transpose_at(g, B, perm, at) : NULL;
    Value *v = t ? place(g, build_reshape(g, t, shape, r - 1), at) : NULL;
    if (!v || shape[1] == C || (dim_is_const(C) && dim_is_const(shape[1]) && C->c == shape[1]->c))
        return v;
    Dim *start[MAX_RANK], *limit[MAX_RANK];
    int64_t stride[MAX_RANK];
    for (int i = 0; i < r - 1; i++) {
        start[i] = cnst(L, 0);
        limit[i] = i == 1 ? C : shape[i];
        stride[i] = 1;
    }
    return place(g, build_slice(g, v, start, limit, stride), at);
}

/* x [N, C, S...] blocked: [N, ceildiv(C, blk), S..., blk], the lanes past
 * C zero; before `at`. C must be a constant. */
static Value *block_copy(Lay *L, Value *x, Op *at)
{
    Graph *g = L->g;
    int r = x->type.rank, nsp = r - 2;
    int64_t c = x->type.dims[1]->c, cb = (c + L->blk - 1) / L->blk;
    Value *p = x;
    if (cb * L->blk != c) {
        float zero = 0;
        Value *z = place(g, build_const(g, type_make(&g->arena, DT_F32, 0, NULL), &zero, sizeof zero, true), at);
        Dim *lo[MAX_RANK], *hi[MAX_RANK];
        for (int i = 0; i < r; i++) {
            lo[i] = cnst(L, 0);
            hi[i] = cnst(L, i == 1 ? cb * L->blk - c : 0);
        }
        Attr a[3] = {{.name = "low", .kind = ATTR_DIMS, .n = r, .dims = lo},
                     {.name = "high", .kind = ATTR_DIMS, .n = r, .dims = hi},
                     {.name = "mode", .kind = ATTR_STR, .s = "constant"}};
        Value *in[2] = {x, z};
        Op *o = z && x->type.dtype == DT_F32 ? build_op(g, OP_PAD, in, 2, a, 3) : NULL;
        if (!o)
            return NULL;
        graph_move_op(g, o, at);
        p = o->out[0];
    }
    Dim *split[MAX_RANK] = {x->type.dims[0], cnst(L, cb), cnst(L, L->blk)};
    int64_t perm[MAX_RANK] = {0, 1};
    bool unit = true; /* a [N, C, 1...] gate: the lanes move past unit dims only */
    for (int i = 0; i < nsp; i++) {
        split[3 + i] = x->type.dims[2 + i];
        perm[2 + i] = 3 + i;
        unit &= dim_is(x->type.dims[2 + i], 1);
    }
    perm[2 + nsp] = 2;
    if (unit) {
        Dim *to[MAX_RANK] = {x->type.dims[0], cnst(L, cb)};
        for (int i = 0; i < nsp; i++)
            to[2 + i] = cnst(L, 1);
        to[2 + nsp] = cnst(L, L->blk);
        return place(g, build_reshape(g, p, to, r + 1), at);
    }
    Value *s = place(g, build_reshape(g, p, split, r + 1), at);
    return s ? transpose_at(g, s, perm, at) : NULL;
}

/* Replaces op's result by the view of blocked y (channels C). */
static bool blocked_result(Lay *L, Op *op, Value *y, Dim *C, bool known, double pad)
{
    Value *v = unblock(L, y, C, op);
    if (!v)
        return false;
    v->name = op->out[0]->name;
    graph_replace_uses(L->g, op->out[0], v);
    return rec_set(L, v, y, known, pad);
}

static bool const_dim(const Dim *d)
{
    return d && dim_is_const(d);
}

/* Whether conv op can run blocked: f32, 1-3 spatial dims, channels
 * constants, one group or depthwise, not a 1 x 1 image. */
static bool conv_blockable(const Op *op)
{
    const Type *x = &op->in[0]->type, *w = &op->in[1]->type;
    if (op->kind != OP_CONV || x->rank < 3 || x->rank > 5 || x->dtype != DT_F32 || w->rank != x->rank ||
        op_attr_int(op, "channels_last", 0) || !const_dim(w->dims[0]) || !const_dim(w->dims[1]))
        return false;
    int64_t g = op_attr_int(op, "groups", 1), c = w->dims[1]->c * g, o = w->dims[0]->c;
    if (g != 1 && !(w->dims[1]->c == 1 && o == g && c == g))
        return false;
    return c >= 1 && o >= 1;
}

static bool image_1x1(const Op *op)
{
    const Type *x = &op->in[0]->type;
    for (int i = 2; i < x->rank; i++)
        if (!dim_is(x->dims[i], 1))
            return false;
    return true;
}

static bool conv_to_blocked(Lay *L, Op *op)
{
    Value *x = op->in[0];
    const Type *w = &op->in[1]->type;
    Blocked *r = rec_of(L, x);
    int64_t c = w->dims[1]->c * op_attr_int(op, "groups", 1), last = 1;
    Value *in;
    if (!dim_is_const(x->type.dims[1]))
        return true; /* left as it is: NCHW */
    if (r && r->known)
        in = r->b, L->chained++;
    else if (c < L->blk) /* an image's few channels: read as they are (oneDNN's first-layer kernels) */
        in = x, last = 2;
    else if (!(in = block_copy(L, x, op)))
        return false;
    else if (x->def) /* (a model's input is copied once at its edge, as channels-last transposes it) */
        L->copied++;
    Value *y = with_layout(L->g, op, in, last, L->blk);
    return y && blocked_result(L, op, y, w->dims[0], true, 0);
}

static bool pool_to_blocked(Lay *L, Op *op, const Blocked *r)
{
    Value *y = with_layout(L->g, op, r->b, 1, L->blk);
    bool max = !strcmp(op_attr_str(op, "kind", "max"), "max");
    bool known = r->known && (max || r->pad == 0 || !op_attr_int(op, "count_pad", 0));
    return y && blocked_result(L, op, y, op->in[0]->type.dims[1], known, r->pad);
}

/* What op computes from its operands' padding lanes (pads, constants in
 * the others' places); false if the interpreter cannot say. */
static bool eval_pad(Lay *L, const Op *op, Value *const *bin, const bool *is_pad, const double *pads, double *out)
{
    Tensor t[8], res = {0};
    const Tensor *in[8];
    float f[8];
    if (op->nin > 8)
        return false;
    for (int i = 0; i < op->nin; i++) {
        memset(&t[i], 0, sizeof t[i]);
        t[i].dtype = bin[i]->type.dtype;
        if (is_pad[i]) {
            if (t[i].dtype != DT_F32)
                return false;
            f[i] = (float)pads[i];
            t[i].data = &f[i];
            t[i].nbytes = sizeof f[i];
        } else { /* a scalar constant */
            const Op *d = bin[i]->def;
            if (!d || d->kind != OP_CONST || !d->cst || !d->cst->data || d->cst->nbytes != dtype_size(t[i].dtype))
                return false;
            t[i].data = (void *)d->cst->data;
            t[i].nbytes = d->cst->nbytes;
        }
        in[i] = &t[i];
    }
    Diag d = {0};
    bool ok = interp_run_op(L->g, op, NULL, 0, in, &res, &d) && res.rank == 0 && res.dtype == DT_F32 && res.data;
    if (ok)
        *out = interp_load_f(&res, 0);
    tensor_free(&res);
    return ok;
}

/* An elementwise op of blocked views (the same channels, no broadcast of
 * theirs), scalars and [N | 1, C, 1...] operands, on the blocked values. */
static bool sink_blocked_elem(Lay *L, Op *op)
{
    const Type *t = &op->out[0]->type;
    Value *in[8];
    bool is_pad[8] = {false}, known = true;
    double pads[8] = {0};
    const Blocked *first = NULL;
    if (op->nin > 8 || op->nout != 1 || t->rank < 3)
        return true;
    for (int i = 0; i < op->nin; i++) {
        const Blocked *r = rec_of(L, op->in[i]);
        if (!r)
            continue;
        if (!type_eq(&op->in[i]->type, t) || (first && !type_eq(&r->b->type, &first->b->type)))
            return true;
        first = first ? first : r;
    }
    Dim *C = t->dims[1];
    for (int i = 0; i < op->nin; i++) {
        Value *v = op->in[i];
        const Blocked *r = rec_of(L, v);
        const Type *vt = &v->type;
        size_t n;
        if (r) {
            in[i] = r->b;
            is_pad[i] = true;
            pads[i] = r->pad;
            known &= r->known;
            continue;
        }
        if (type_static_numel(vt, &n) && n == 1) { /* a scalar: every lane */
            in[i] = v;
            known &= v->def && v->def->kind == OP_CONST;
            continue;
        }
        /* [d0, C, 1...] aligned right, d0 = N or 1: blocked, zero lanes */
        if (vt->rank > t->rank || vt->rank < t->rank - 1 || !dim_is_const(C))
            return true;
        Dim *d[MAX_RANK];
        int off = t->rank - vt->rank;
        for (int k = 0; k < t->rank; k++)
            d[k] = k < off ? cnst(L, 1) : vt->dims[k - off];
        if (d[1] != C && !(dim_is_const(d[1]) && d[1]->c == C->c))
            return true;
        if (!dim_is(d[0], 1) && d[0] != t->dims[0])
            return true;
        for (int k = 2; k < t->rank; k++)
            if (!dim_is(d[k], 1))
                return true;
        Value *v4 = off ? place(L->g, build_reshape(L->g, v, d, t->rank), op) : v;
        if (!v4 || !(in[i] = block_copy(L, v4, op)))
            return false;
        is_pad[i] = true;
        pads[i] = 0;
    }
    Value *y = rebuild(L->g, op, in, op->attrs, op->nattrs);
    if (!y)
        return false;
    if (!type_eq(&y->type, &first->b->type))
        return true; /* the ops made die (canon_dce) */
    double pad = 0;
    known = known && eval_pad(L, op, in, is_pad, pads, &pad);
    return blocked_result(L, op, y, C, known, pad);
}

/* op's result [N, C] from y, the blocked [N, Cb, 1..., b] of a reduction
 * over every spatial axis: the lanes in channel order are the channels
 * (those past C cut off), so no transpose (a global pool's mean before a
 * classifier, x.mean((2, 3)) in PyTorch, MnasNet's: its unblocking
 * transpose had made the reduction read with a stride of b, 0.12 ms of
 * MnasNet's 7.2 at 1 x 224 x 224). */
static bool channels_of(Lay *L, Op *op, Value *y)
{
    Graph *g = L->g;
    const Type *t = &op->out[0]->type, *bt = &y->type;
    Dim *cb = dim_mul(&g->dims, bt->dims[1], bt->dims[bt->rank - 1]);
    Dim *flat[2] = {t->dims[0], cb}, *start[2] = {cnst(L, 0), cnst(L, 0)}, *limit[2] = {t->dims[0], t->dims[1]};
    int64_t stride[2] = {1, 1};
    Value *v = cb ? place(g, build_reshape(g, y, flat, 2), op) : NULL;
    if (v && cb != t->dims[1])
        v = place(g, build_slice(g, v, start, limit, stride), op);
    if (!v)
        return false;
    v->name = op->out[0]->name;
    graph_replace_uses(g, op->out[0], v);
    return true;
}

/* A reshape of a blocked view [N, C, S...] into [N, C, prod S], every
 * spatial axis merged (canon's form of a reduction over them, and a
 * flatten before one): the same merge of the blocked value. */
static bool sink_blocked_reshape(Lay *L, Op *op, const Blocked *r)
{
    Graph *g = L->g;
    const Type *x = &op->in[0]->type, *y = &op->out[0]->type, *bt = &r->b->type;
    if (x->rank < 4 || y->rank != 3 || y->dims[0] != x->dims[0] || y->dims[1] != x->dims[1])
        return true;
    Dim *p = cnst(L, 1);
    for (int i = 2; i < x->rank && p; i++)
        p = dim_mul(&g->dims, p, x->dims[i]);
    if (!p || p != y->dims[2])
        return true;
    Dim *shape[4] = {bt->dims[0], bt->dims[1], p, bt->dims[bt->rank - 1]};
    Value *b = place(g, build_reshape(g, r->b, shape, 4), op);
    return b && blocked_result(L, op, b, x->dims[1], r->known, r->pad);
}

/* A reduction of a blocked view over spatial axes, keeping them, or over
 * all of them (channels_of). */
static bool sink_blocked_reduce(Lay *L, Op *op, const Blocked *r)
{
    const Attr *axes = op_attr(op, "axes");
    bool keep = op_attr_int(op, "keepdims", 0);
    if (!axes || axes->n < 1 || (!keep && axes->n != op->in[0]->type.rank - 2))
        return true;
    for (int i = 0; i < axes->n; i++)
        if (axes->ints[i] < 2 || axes->ints[i] >= op->in[0]->type.rank || (!keep && axes->ints[i] != 2 + i))
            return true;
    const char *k = op_attr_str(op, "kind", "");
    bool same = !strcmp(k, "mean") || !strcmp(k, "max") || !strcmp(k, "min");
    bool known = r->known && (same || (!strcmp(k, "sum") && r->pad == 0));
    Graph *g = L->g;
    const Type *bt = &r->b->type;
    int rank = bt->rank, first = (int)axes->ints[0];
    bool run = true; /* consecutive axes: reduced as one, over [N, Cb, S, b] (the column kernel's rows
                      * then need no split into the axes) */
    for (int i = 1; i < axes->n; i++)
        run &= axes->ints[i] == first + i;
    Value *y;
    if (run && axes->n > 1) {
        Dim *shape[MAX_RANK], *p = cnst(L, 1);
        int m = 0;
        for (int i = 0; i < rank; i++) {
            if (i < first || i >= first + axes->n)
                shape[m++] = bt->dims[i];
            else if ((p = dim_mul(&g->dims, p, bt->dims[i])) && i == first + axes->n - 1)
                shape[m++] = p;
        }
        int64_t ax = first;
        Value *flat = p ? place(g, build_reshape(g, r->b, shape, m), op) : NULL;
        Value *red = flat ? place(g, build_reduce(g, flat, k, &ax, 1, true), op) : NULL;
        Dim *back[MAX_RANK];
        for (int i = 0; i < rank; i++)
            back[i] = i >= first && i < first + axes->n ? cnst(L, 1) : bt->dims[i];
        y = red ? place(g, build_reshape(g, red, back, rank), op) : NULL;
    } else {
        Value *in[1] = {r->b};
        Attr a[8];
        int na = op->nattrs < 8 ? op->nattrs : 8;
        memcpy(a, op->attrs, (size_t)na * sizeof *a);
        for (int i = 0; i < na; i++)
            if (!strcmp(a[i].name, "keepdims"))
                a[i].i = 1; /* kept: channels_of takes them out */
        y = rebuild(g, op, in, a, na);
    }
    if (!keep)
        return y && channels_of(L, op, y);
    return y && blocked_result(L, op, y, op->in[0]->type.dims[1], known, r->pad);
}

/* A concat along the channels of blocked views that fill their blocks. */
static bool sink_blocked_concat(Lay *L, Op *op)
{
    Value *in[64];
    if (op->nin > 64 || op_attr_int(op, "axis", -1) != 1)
        return true;
    for (int i = 0; i < op->nin; i++) {
        const Blocked *r = rec_of(L, op->in[i]);
        Dim *c = op->in[i]->type.dims[1];
        if (!r || !dim_is_const(c) || c->c % L->blk)
            return true;
        in[i] = r->b;
    }
    Attr a = {.name = "axis", .kind = ATTR_INT, .i = 1};
    Value *y = rebuild(L->g, op, in, &a, 1);
    return y && blocked_result(L, op, y, op->out[0]->type.dims[1], true, 0);
}

/* op moved past a blocked view where one of its operands is one; else
 * past a channels-last view (a squeeze-excite block's [N, C, 1, 1]
 * values, whose convolutions are channels-last dots). */
static bool sink_blocked(Lay *L, Op *op)
{
    const Blocked *r = NULL;
    for (int i = 0; i < op->nin && !r; i++)
        r = rec_of(L, op->in[i]);
    if (!r) {
        if (!shuffle(L->g, op))
            return false;
        Value *y = sink(L->g, op);
        return !y || replace_by(L->g, op, y);
    }
    if (op->nout != 1)
        return true;
    if (elementwise(op))
        return sink_blocked_elem(L, op);
    switch (op->kind) {
    case OP_REDUCE: return op->in[0] == NULL || !rec_of(L, op->in[0]) ? true : sink_blocked_reduce(L, op, r);
    case OP_POOL:
        return op->in[0]->type.dtype == DT_F32 && rec_of(L, op->in[0]) && !op_attr_int(op, "channels_last", 0)
                   ? pool_to_blocked(L, op, r)
                   : true;
    case OP_CONCAT: return sink_blocked_concat(L, op);
    case OP_RESHAPE: return rec_of(L, op->in[0]) ? sink_blocked_reshape(L, op, r) : true;
    default: return true;
    }
}

/* Whether every convolution of g can run blocked (1 x 1 images apart),
 * and no channel shuffle (a [N, C, H, W] value split to rank 5, as
 * ShuffleNet does) would take the blocks apart. */
static bool all_blockable(const Graph *g)
{
    int n = 0;
    for (const Op *op = g->first; op; op = op->next) {
        if (op->kind == OP_CONV_TRANSPOSE ||
            (op->kind == OP_RESHAPE && op->in[0]->type.rank == 4 && op->out[0]->type.rank == 5))
            return false;
        if (op->kind != OP_CONV || image_1x1(op))
            continue;
        if (!conv_blockable(op))
            return false;
        n++;
    }
    return n > 0;
}

static int layout_blocked(Graph *g, int64_t blk, Lay *st)
{
    Lay L = {g, blk, NULL, 0, 0, 0};
    int n = 0;
    bool ok = true;
    for (Op *op = g->first, *next; op && ok; op = next) {
        next = op->next;
        if (op->kind == OP_CONV && conv_blockable(op) && !image_1x1(op)) {
            ok = conv_to_blocked(&L, op);
            n++;
        } else if (op->kind == OP_CONV && wants_last(op)) { /* a 1 x 1 image: a dot, written channels-last */
            ok = to_last(g, op);
            n++;
        } else {
            ok = sink_blocked(&L, op);
        }
    }
    free(L.rec);
    *st = L;
    if (!ok)
        return -1;
    canon_dce(g);
    return n;
}

/* Whether g gains by blocks: tried on a copy, some convolution reads
 * another's blocks as they are and none a blocked copy of its operand (a
 * reduction over the channels between them, ConvNeXt's LayerNorm, or a
 * transpose: there channels-last keeps them contiguous at no copy). */
static bool blocks_pay(Graph *g, int64_t blk)
{
    Diag d = {0};
    Graph *c = graph_clone(g, &d);
    Lay st = {0};
    bool pay = c && layout_blocked(c, blk, &st) >= 0 && st.chained > 0 && st.copied == 0;
    if (c)
        graph_free(c);
    return pay;
}

int layout_run(Graph *g, int block, int *blocked)
{
    Lay st;
    *blocked = 0;
    if (block > 1 && all_blockable(g) && blocks_pay(g, block)) {
        *blocked = block;
        return layout_blocked(g, block, &st);
    }
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
