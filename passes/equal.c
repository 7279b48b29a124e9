/*
 * equal.c — equality analysis over dims and tensor sizes.
 *
 * Requires: shape_propagate has run. Rewrites the graph's dims.
 *
 * Op semantics say which dims must be equal for the graph to make sense: a
 * dot's contracting dims, a concat's off-axis dims, a convolution's input
 * channels and its weights. Each such fact is a run-time requirement (the
 * host program checks it) and, once checked, an equality: the dims are put
 * in one union-find class and every symbol of the class is replaced by the
 * class representative (a constant if there is one, else the input symbol
 * that sorts first), so that equal sizes become equal pointers.
 *
 * Implicit broadcasting between S and T (both unknown, either could be 1) is
 * speculated, as in DISC: the classes record S ~ T as speculative and the
 * host program gets a GUARD (S == T selects the variant without broadcast)
 * and a BCAST check (S == T or one is 1); the graph keeps max(S, T), so the
 * answer is right either way.
 *
 * A reshape keeps the element count: if the two counts are not the same
 * expression, that is a requirement and a size equality.
 */
#include "passes/passes.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct UF {
    DimMap parent;
    Dim **members;
    int n, cap;
    bool failed;     /* out of memory: members are missing */
} UF;

static Dim *uf_find(UF *u, Dim *d)
{
    Dim *p;
    while ((p = dimmap_get(&u->parent, d)) && p != d)
        d = p;
    return d;
}

static void uf_add(UF *u, Dim *d)
{
    if (dimmap_get(&u->parent, d))
        return;
    if (u->n == u->cap) {
        int cap = u->cap ? 2 * u->cap : 32;
        Dim **m = realloc(u->members, (size_t)cap * sizeof *m);
        if (!m) {
            u->failed = true;
            return;
        }
        u->members = m;
        u->cap = cap;
    }
    if (!dimmap_put(&u->parent, d, d)) {
        u->failed = true;
        return;
    }
    u->members[u->n++] = d;
}

static void uf_union(UF *u, Dim *a, Dim *b)
{
    uf_add(u, a);
    uf_add(u, b);
    a = uf_find(u, a);
    b = uf_find(u, b);
    if (a != b)
        dimmap_put(&u->parent, dim_cmp(a, b) < 0 ? b : a, dim_cmp(a, b) < 0 ? a : b);
}

typedef struct Eq {
    ShapeInfo *si;
    Graph *g;
    UF proven, spec;
    Diag *d;
} Eq;

static const char *what(Eq *q, const Op *op)
{
    const char *name = op_info(op->kind)->name;
    Graph *g = q->g;
    if (g->file && op->line)
        return arena_printf(&q->si->arena, "%s:%d: %s", g->file, op->line, name);
    if (op->src)
        return arena_printf(&q->si->arena, "%s \"%s\"", name, op->src);
    return arena_printf(&q->si->arena, "%s (op %d)", name, op->id);
}

/* NULL when out of memory (the analysis' arena then fails it). */
static HostStep *step(Eq *q, HostStepKind k, Dim *lhs, Dim *rhs, const Op *op)
{
    return hostprog_push(q->si, (HostStep){.kind = k, .lhs = lhs, .rhs = rhs, .rel = REL_EQ,
                                           .what = op ? what(q, op) : NULL});
}

/* A requirement that must hold at run time, unless it is provable now. */
static void require(Eq *q, Dim *a, Rel rel, Dim *b, const Op *op, bool unify)
{
    if (!a || !b)
        return;
    if (rel == REL_EQ && a == b)
        return;
    HostStep *s = cons_prove(q->si->cons, a, rel, b) ? NULL : step(q, HS_REQUIRE, a, b, op);
    if (s)
        s->rel = rel;
    if (unify && rel == REL_EQ)
        uf_union(&q->proven, a, b);
}

static void facts_binary(Eq *q, const Op *op)
{
    int rank = op->out[0]->type.rank;
    for (int k = 0; k < rank; k++) {
        Dim *first = NULL;
        for (int i = 0; i < op->nin; i++) {
            const Type *t = &op->in[i]->type;
            int j = k - (rank - t->rank);
            if (j < 0 || dim_is(t->dims[j], 1))
                continue;
            Dim *d = t->dims[j];
            if (!first) {
                first = d;
            } else if (d != first) {
                if (dim_is_const(d) && dim_is_const(first))
                    continue; /* the rule rejected real conflicts */
                uf_union(&q->spec, first, d);
                step(q, HS_BCAST, first, d, op);
                step(q, HS_GUARD, first, d, op);
            }
        }
    }
}

static void facts(Eq *q, const Op *op)
{
    DimCtx *cx = &q->g->dims;
    const OpCat cat = op_info(op->kind)->cat;
    if (cat == CAT_BINARY || op->kind == OP_CMP || op->kind == OP_SELECT) {
        facts_binary(q, op);
        return;
    }
    switch (op->kind) {
    case OP_DOT: {
        const Attr *lb = op_attr(op, "lhs_batch"), *rb = op_attr(op, "rhs_batch");
        const Attr *lc = op_attr(op, "lhs_contract"), *rc = op_attr(op, "rhs_contract");
        for (int i = 0; i < lb->n; i++)
            require(q, op->in[0]->type.dims[lb->ints[i]], REL_EQ, op->in[1]->type.dims[rb->ints[i]], op, true);
        for (int i = 0; i < lc->n; i++)
            require(q, op->in[0]->type.dims[lc->ints[i]], REL_EQ, op->in[1]->type.dims[rc->ints[i]], op, true);
        break;
    }
    case OP_CONCAT: {
        int64_t axis = op_attr_int(op, "axis", 0);
        for (int i = 1; i < op->nin; i++)
            for (int k = 0; k < op->in[0]->type.rank; k++)
                if (k != axis)
                    require(q, op->in[0]->type.dims[k], REL_EQ, op->in[i]->type.dims[k], op, true);
        break;
    }
    case OP_CONV: {
        int64_t last = op_attr_int(op, "channels_last", 0) == 1, b = last ? op_attr_int(op, "block", 0) : 0;
        Dim *c = dim_mulc(cx, op->in[1]->type.dims[1], op_attr_int(op, "groups", 1));
        if (b) /* blocked: [N, ceildiv(C, b), spatial..., b] */
            require(q, op->in[0]->type.dims[1], REL_EQ, dim_ceildiv(cx, c, dim_const(cx, b)), op, true);
        else
            require(q, op->in[0]->type.dims[last ? op->in[0]->type.rank - 1 : 1], REL_EQ, c, op, true);
        break;
    }
    case OP_RESHAPE:
        require(q, type_numel(cx, &op->in[0]->type), REL_EQ, type_numel(cx, &op->out[0]->type), op, false);
        break;
    case OP_SLICE: {
        const Attr *st = op_attr(op, "start"), *li = op_attr(op, "limit");
        for (int k = 0; k < op->in[0]->type.rank; k++) {
            require(q, st->dims[k], REL_GE, dim_const(cx, 0), op, false);
            require(q, st->dims[k], REL_LE, li->dims[k], op, false);
            require(q, li->dims[k], REL_LE, op->in[0]->type.dims[k], op, false);
        }
        break;
    }
    case OP_BROADCAST: {
        const Attr *axes = op_attr(op, "axes");
        for (int i = 0; i < axes->n; i++) {
            Dim *x = op->in[0]->type.dims[i], *r = op->out[0]->type.dims[axes->ints[i]];
            if (x != r && !dim_is(x, 1))
                step(q, HS_BCAST, x, r, op);
        }
        break;
    }
    case OP_PAD:
        for (int k = 0; k < op->out[0]->type.rank; k++)
            require(q, op->out[0]->type.dims[k], REL_GE, dim_const(cx, 0), op, false);
        break;
    default:
        break;
    }
}

/* Lower is better as a class representative. */
static int rep_rank(const Dim *d)
{
    if (d->kind == DIM_CONST)
        return 0;
    if (d->kind == DIM_SYM)
        return d->origin == SYM_INPUT ? 1 : d->origin == SYM_USER ? 3 : 4;
    return 2;
}

static bool better(const Dim *a, const Dim *b)
{
    int ra = rep_rank(a), rb = rep_rank(b);
    return ra != rb ? ra < rb : dim_cmp(a, b) < 0;
}

/* Collects the classes of u with two or more members into si. */
static bool classes(Eq *q, UF *u, bool speculative, DimMap *subst)
{
    ShapeInfo *si = q->si;
    for (int i = 0; i < u->n; i++) {
        Dim *root = uf_find(u, u->members[i]);
        if (root != u->members[i])
            continue;
        Dim *m[256];
        int n = 0;
        for (int j = 0; j < u->n && n < 256; j++)
            if (uf_find(u, u->members[j]) == root)
                m[n++] = u->members[j];
        if (n < 2)
            continue;
        /* sort members; the representative goes first */
        for (int a = 1; a < n; a++)
            for (int b = a; b > 0 && better(m[b], m[b - 1]); b--) {
                Dim *t = m[b];
                m[b] = m[b - 1];
                m[b - 1] = t;
            }
        if (!speculative && dim_is_const(m[0]) && dim_is_const(m[1]))
            return diag_set(q->d, "error: dims that must be equal are %lld and %lld", (long long)m[0]->c,
                            (long long)m[1]->c);
        Dim **dims = arena_array(&si->arena, (size_t)n, sizeof(Dim *));
        if (!dims)
            return diag_oom(q->d);
        DimClass *c = &si->dclass[si->ndclass++];
        c->dims = dims;
        memcpy(c->dims, m, (size_t)n * sizeof(Dim *));
        c->n = n;
        c->speculative = speculative;
        if (subst)
            for (int j = 1; j < n; j++)
                if (m[j]->kind == DIM_SYM && !dim_mentions(m[0], m[j]))
                    dimmap_put(subst, m[j], m[0]);
    }
    return true;
}

/* A value's size (dims are hash-consed: the same size is the same
 * pointer) and index, or a run of one size: its first value and where it
 * starts in the sorted keys. */
typedef struct SizeKey {
    uintptr_t size;
    int i;
} SizeKey;

static int key_cmp(const void *pa, const void *pb)
{
    const SizeKey *a = pa, *b = pb;
    if (a->size != b->size)
        return a->size < b->size ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i);
}

/* Groups of values with one symbolic size (at least two values each), in
 * the order of each group's first value, its values in graph order: by
 * sorting, O(n log n) (compared pairwise, a 100,000-op chain took 6 s). */
static bool size_classes(ShapeInfo *si)
{
    Graph *g = si->g;
    int nvals = g->ninputs;
    graph_for_each_op(g, op) nvals += op->nout;
    size_t cap = (size_t)(nvals ? nvals : 1);
    Value **vals = malloc(cap * sizeof *vals);
    SizeKey *key = malloc(cap * sizeof *key), *run = malloc(cap * sizeof *run);
    si->sclass = arena_array(&si->arena, cap, sizeof(SizeClass));
    bool ok = vals && key && run && si->sclass;
    if (ok) {
        int n = 0, m = 0, nrun = 0;
        for (int i = 0; i < g->ninputs; i++)
            vals[n++] = g->inputs[i];
        graph_for_each_op(g, op) for (int i = 0; i < op->nout; i++) vals[n++] = op->out[i];
        for (int i = 0; i < n; i++) {
            Dim *size = type_numel(&g->dims, &vals[i]->type);
            if (size && !dim_is_const(size))
                key[m++] = (SizeKey){(uintptr_t)size, i};
        }
        qsort(key, (size_t)m, sizeof *key, key_cmp);
        for (int a = 0, b; a < m; a = b) {
            for (b = a + 1; b < m && key[b].size == key[a].size; b++)
                ;
            if (b - a >= 2)
                run[nrun++] = (SizeKey){(uintptr_t)a, key[a].i};
        }
        /* by first value: swap the fields' roles for the sort */
        for (int r = 0; r < nrun; r++)
            run[r] = (SizeKey){(uintptr_t)run[r].i, (int)run[r].size};
        qsort(run, (size_t)nrun, sizeof *run, key_cmp);
        for (int r = 0; r < nrun; r++) {
            int a = run[r].i, b = a + 1;
            while (b < m && key[b].size == key[a].size)
                b++;
            Value **vs = arena_array(&si->arena, (size_t)(b - a), sizeof(Value *));
            if (!vs)
                break; /* the arena failed: shape_analyze reports it */
            SizeClass *c = &si->sclass[si->nsclass++];
            c->size = (Dim *)key[a].size;
            c->values = vs;
            for (int k = a; k < b; k++)
                c->values[c->n++] = vals[key[k].i];
        }
    }
    free(vals);
    free(key);
    free(run);
    return ok;
}

static void subst_steps(ShapeInfo *si, const DimMap *m)
{
    DimCtx *cx = &si->g->dims;
    int k = 0;
    for (int i = 0; i < si->prog.n; i++) {
        HostStep *s = &si->prog.steps[i];
        if (s->lhs)
            s->lhs = dim_subst(cx, s->lhs, m);
        if (s->rhs)
            s->rhs = dim_subst(cx, s->rhs, m);
        if (s->kind != HS_GUARD && s->kind != HS_BCAST && s->rel == REL_EQ && s->lhs == s->rhs && s->lhs)
            continue; /* became trivially true */
        si->prog.steps[k++] = *s;
    }
    si->prog.n = k;
}

bool shape_equalities(ShapeInfo *si, Diag *d)
{
    Eq q = {.si = si, .g = si->g, .d = d};
    dimmap_init(&q.proven.parent);
    dimmap_init(&q.spec.parent);
    graph_for_each_op(si->g, op) facts(&q, op);
    si->dclass = arena_array(&si->arena, (size_t)(q.proven.n + q.spec.n + 1), sizeof(DimClass));
    DimMap subst;
    dimmap_init(&subst);
    bool ok = si->dclass && !q.proven.failed && !q.spec.failed;
    ok = ok && classes(&q, &q.proven, false, &subst) && classes(&q, &q.spec, true, NULL) && !subst.failed;
    if (ok && subst.count) {
        graph_subst_dims(si->g, &subst);
        subst_steps(si, &subst);
        for (int i = 0; i < si->ndclass; i++)
            if (si->dclass[i].speculative)
                for (int j = 0; j < si->dclass[i].n; j++)
                    si->dclass[i].dims[j] = dim_subst(&si->g->dims, si->dclass[i].dims[j], &subst);
    }
    ok = ok && size_classes(si);
    if (!ok && (!d->set || q.proven.failed || q.spec.failed || subst.failed))
        diag_blame_memory(d);
    dimmap_free(&subst);
    dimmap_free(&q.proven.parent);
    dimmap_free(&q.spec.parent);
    free(q.proven.members);
    free(q.spec.members);
    return ok;
}
