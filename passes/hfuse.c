/*
 * hfuse.c — horizontal fusion of matmuls: dots that read the same left
 * operand against constant right operands of the same depth become one dot
 * against the constants side by side, and each result a slice of it.
 *
 *     q = dot(x, Wq)  k = dot(x, Wk)  v = dot(x, Wv)          (x: [..., K])
 *  => qkv = dot(x, [Wq Wk Wv])   q = qkv[..., 0:Nq]  k = ...  v = ...
 *
 * One library call instead of three: the weights stream once per call
 * with fewer calls (what limits small batches), and the wider result
 * splits better across threads. The slices are index maps that the
 * fusion planner folds into the epilogues reading them. The same dot
 * products are computed, each as one sum over K (the summation order may
 * differ as the library blocks a wider matrix).
 *
 * Requires: shape analysis (static K and N). Runs in canonicalisation;
 * the replaced dots and constants are dead afterwards (canon_dce).
 */
#include "passes/passes.h"
#include "ir/store.h"

#include <stdlib.h>
#include <string.h>

enum { MAX_FUSE = 8 };

/* A dot x[..., K] @ W[K, N] with W a constant floating-point matrix of
 * x's dtype: W's def, or NULL. */
static const Op *plain_matmul(const Op *op)
{
    if (op->kind != OP_DOT || op->nin != 2)
        return NULL;
    const Value *x = op->in[0], *w = op->in[1];
    const Attr *lb = op_attr(op, "lhs_batch"), *rb = op_attr(op, "rhs_batch");
    const Attr *lc = op_attr(op, "lhs_contract"), *rc = op_attr(op, "rhs_contract");
    if (!lb || !rb || !lc || !rc || lb->n || rb->n || lc->n != 1 || rc->n != 1 || x->type.rank < 1 ||
        lc->ints[0] != x->type.rank - 1 || rc->ints[0] != 0)
        return NULL;
    const Op *d = w->def;
    if (!d || d->kind != OP_CONST || !d->cst || !d->cst->data || !dtype_is_float(w->type.dtype) ||
        x->type.dtype != w->type.dtype || w->type.rank != 2 || !dim_is_const(w->type.dims[0]) ||
        !dim_is_const(w->type.dims[1]))
        return NULL;
    return d;
}

typedef struct Side {
    Op **dots;
    int n;
    int64_t k, total, *off;
    size_t es;
} Side;

/* The constants side by side into w. */
static bool side_by_side(void *w, void *arg)
{
    const Side *s = arg;
    for (int i = 0; i < s->n; i++) {
        const char *src = s->dots[i]->in[1]->def->cst->data;
        size_t cols = (size_t)(s->off[i + 1] - s->off[i]);
        for (int64_t r = 0; r < s->k; r++)
            memcpy((char *)w + ((size_t)r * (size_t)s->total + (size_t)s->off[i]) * s->es, src + (size_t)r * cols * s->es,
                   cols * s->es);
    }
    return true;
}

/* The constants side by side kept in the graph's store (ir/store.h) when
 * the loader knows each one's hash: a later compile maps them instead of
 * making 85 MB of fresh memory for BERT-base's twelve layers (the dear
 * part of a start from the JIT's cache). NULL: made in memory. */
static const void *side_stored(Graph *g, Side *s, size_t bytes, uint64_t *hash)
{
    if (!g->store || bytes < HUGE_PAGE)
        return NULL;
    uint64_t desc[4 + 2 * MAX_FUSE] = {0x6866757365763031ull /* "hfusev01" */, (uint64_t)s->k, (uint64_t)s->es,
                                       (uint64_t)s->n};
    for (int i = 0; i < s->n; i++) {
        const Const *c = s->dots[i]->in[1]->def->cst;
        if (c->hash_of != c->data)
            return NULL;
        desc[4 + 2 * i] = c->hash;
        desc[5 + 2 * i] = (uint64_t)(s->off[i + 1] - s->off[i]);
    }
    size_t n = (4 + 2 * (size_t)s->n) * sizeof desc[0];
    uint64_t key[2] = {store_hash(desc, n, 0), store_hash(desc, n, 0x165667B19E3779F9ull)};
    void *keep = NULL;
    const void *w = store_derived(g->store, key, bytes, side_by_side, s, hash, &keep);
    if (w && !graph_keep(g, keep, store_release)) {
        store_release(keep);
        graph_oom(g);
        return NULL;
    }
    return w;
}

/* Fuses dots[0..n) (same x, same K): returns false when out of memory or
 * when a builder refuses (the graph is then unchanged but for dead ops). */
static bool fuse(Graph *g, Op **dots, int n)
{
    Value *x = dots[0]->in[0];
    int64_t k = dots[0]->in[1]->type.dims[0]->c, total = 0, off[MAX_FUSE + 1];
    for (int i = 0; i < n; i++) {
        off[i] = total;
        total += dots[i]->in[1]->type.dims[1]->c;
    }
    off[n] = total;
    DType dt = x->type.dtype;
    size_t es = dtype_size(dt), bytes = (size_t)(k * total) * es;
    Side side = {dots, n, k, total, off, es};
    uint64_t hash = 0;
    const void *w = side_stored(g, &side, bytes, &hash);
    const void *stored = w;
    if (!w && g->arena.failed)
        return false;
    if (!w) {
        /* on huge pages when large (BERT-base's twelve Q, K, V weights:
         * 85 MB, made again at every compile, a cache hit's included) */
        char *m = bytes >= HUGE_PAGE ? alloc_huge(bytes) : malloc(bytes ? bytes : 8);
        if (!m || !graph_keep(g, m, free)) {
            free(m);
            graph_oom(g);
            return false;
        }
        side_by_side(m, &side);
        w = m;
    }
    Dim *wd[2] = {dim_const(&g->dims, k), dim_const(&g->dims, total)};
    Type wt = type_make(&g->arena, dt, 2, wd);
    Value *c = build_const(g, wt, w, bytes, false);
    if (c && stored) { /* its packed copies may be kept too (runtime/dnnl.c) */
        c->def->cst->hash_of = w;
        c->def->cst->hash = hash;
    }
    int64_t lc = x->type.rank - 1, rc = 0;
    Value *y = c ? build_dot(g, x, c, NULL, NULL, 0, &lc, &rc, 1) : NULL;
    if (!y)
        return false;
    Op *first = dots[0];
    graph_move_op(g, c->def, first);
    graph_move_op(g, y->def, first);
    int rank = y->type.rank;
    for (int i = 0; i < n; i++) {
        Dim *start[MAX_RANK], *limit[MAX_RANK];
        int64_t stride[MAX_RANK];
        for (int a = 0; a < rank; a++) {
            start[a] = dim_const(&g->dims, a == rank - 1 ? off[i] : 0);
            limit[a] = a == rank - 1 ? dim_const(&g->dims, off[i + 1]) : y->type.dims[a];
            stride[a] = 1;
        }
        Value *s = build_slice(g, y, start, limit, stride);
        if (!s || !type_eq(&s->type, &dots[i]->out[0]->type))
            return false;
        graph_move_op(g, s->def, first);
        graph_replace_uses(g, dots[i]->out[0], s);
    }
    return true;
}

int canon_hfuse(Graph *g)
{
    int fused = 0;
    for (Op *op = g->first; op; op = op->next) {
        if (!plain_matmul(op) || graph_count_uses(g, op->out[0]) == 0)
            continue;
        Op *dots[MAX_FUSE];
        int n = 0;
        for (Op *o = op; o && n < MAX_FUSE; o = o->next)
            if (plain_matmul(o) && o->in[0] == op->in[0] && o->in[1]->type.dims[0] == op->in[1]->type.dims[0] &&
                graph_count_uses(g, o->out[0]) > 0)
                dots[n++] = o;
        if (n < 2)
            continue;
        if (!fuse(g, dots, n))
            break;
        fused += n;
    }
    return fused;
}
