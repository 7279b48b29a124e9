/*
 * dimmap.c — maps from dims to dims, and substitution through them.
 *
 * Shape analysis resolves placeholder symbols (a dyn_reshape's result dims
 * become the dims its shape tensor held) and unifies equal dims (T becomes
 * S); both are a DimMap applied to every type and dim attribute. Because
 * dims are interned, the rebuilt expressions come out canonical: after
 * T := S, the dims T*768 and S*768 are one pointer.
 */
#include "passes/passes.h"

#include <stdlib.h>
#include <string.h>

void dimmap_init(DimMap *m) { memset(m, 0, sizeof *m); }

void dimmap_free(DimMap *m)
{
    free(m->key);
    free(m->val);
    memset(m, 0, sizeof *m);
}

static unsigned slot_of(const Dim *k, int cap)
{
    uintptr_t h = (uintptr_t)k;
    h ^= h >> 17;
    h *= 0x9E3779B97F4A7C15u;
    return (unsigned)(h >> 20) & (unsigned)(cap - 1);
}

static bool grow(DimMap *m)
{
    int cap = m->cap ? 2 * m->cap : 64;
    Dim **k = calloc((size_t)cap, sizeof *k), **v = calloc((size_t)cap, sizeof *v);
    if (!k || !v) {
        free(k);
        free(v);
        m->failed = true;
        return false;
    }
    for (int i = 0; i < m->cap; i++)
        if (m->key[i]) {
            unsigned s = slot_of(m->key[i], cap);
            while (k[s])
                s = (s + 1) & (unsigned)(cap - 1);
            k[s] = m->key[i];
            v[s] = m->val[i];
        }
    free(m->key);
    free(m->val);
    m->key = k;
    m->val = v;
    m->cap = cap;
    return true;
}

bool dimmap_put(DimMap *m, Dim *k, Dim *v)
{
    if (2 * (m->count + 1) > m->cap && !grow(m))
        return false;
    unsigned s = slot_of(k, m->cap);
    while (m->key[s] && m->key[s] != k)
        s = (s + 1) & (unsigned)(m->cap - 1);
    if (!m->key[s])
        m->count++;
    m->keybits |= k->symbits ? k->symbits : ~(uint64_t)0;
    m->key[s] = k;
    m->val[s] = v;
    return true;
}

bool dimmap_copy(DimMap *dst, const DimMap *src)
{
    dimmap_init(dst);
    if (!src->cap)
        return true;
    dst->key = malloc((size_t)src->cap * sizeof *dst->key);
    dst->val = malloc((size_t)src->cap * sizeof *dst->val);
    if (!dst->key || !dst->val) {
        dimmap_free(dst);
        dst->failed = true;
        return false;
    }
    memcpy(dst->key, src->key, (size_t)src->cap * sizeof *dst->key);
    memcpy(dst->val, src->val, (size_t)src->cap * sizeof *dst->val);
    dst->cap = src->cap;
    dst->count = src->count;
    dst->keybits = src->keybits;
    return true;
}

Dim *dimmap_get(const DimMap *m, const Dim *k)
{
    if (!m->cap || !k)
        return NULL;
    unsigned s = slot_of(k, m->cap);
    while (m->key[s]) {
        if (m->key[s] == k)
            return m->val[s];
        s = (s + 1) & (unsigned)(m->cap - 1);
    }
    return NULL;
}

/* seen: the nodes walked (none of them mentions sym); a full map only
 * walks them again */
static bool mentions(const Dim *d, const Dim *sym, DimMap *seen)
{
    if (d == sym)
        return true;
    if (!d->n || !(d->symbits & sym->symbits) || dimmap_get(seen, d))
        return false;
    for (int i = 0; i < d->n; i++)
        if (mentions(d->args[i], sym, seen))
            return true;
    dimmap_put(seen, (Dim *)d, (Dim *)d);
    return false;
}

/* A walk of d's nodes, each once: dims share their subexpressions, and a
 * chain of them read as a tree is exponential (SSDlite's host flow spent
 * a quarter of a second here). */
bool dim_mentions(const Dim *d, const Dim *sym)
{
    if (d == sym)
        return true;
    if (!(d->symbits & sym->symbits))
        return false;
    DimMap seen;
    dimmap_init(&seen);
    bool r = mentions(d, sym, &seen);
    dimmap_free(&seen);
    return r;
}

static Dim *subst_node(DimCtx *cx, Dim *d, const DimMap *m, DimMap *memo);

/* memo: what the nodes walked so far became. A dim is a DAG (the slices
 * of a padded mask nest min(A, max(0, A - 7)) many levels deep): read as
 * a tree it is exponential, so every node is rebuilt once. */
static Dim *subst(DimCtx *cx, Dim *d, const DimMap *m, DimMap *memo)
{
    if (!d)
        return NULL;
    Dim *v = dimmap_get(m, d);
    if (v)
        return v;
    if (d->kind == DIM_CONST || d->kind == DIM_SYM || m->count == 0 || !(d->symbits & m->keybits))
        return d;
    if ((v = dimmap_get(memo, d)))
        return v;
    v = subst_node(cx, d, m, memo);
    if (v)
        dimmap_put(memo, d, v); /* out of memory: only slower */
    return v;
}

static Dim *subst_node(DimCtx *cx, Dim *d, const DimMap *m, DimMap *memo)
{
    Dim *a = subst(cx, d->args[0], m, memo);
    if (!a)
        return NULL;
    switch (d->kind) {
    case DIM_ADD:
    case DIM_MUL: {
        Dim *r = a;
        for (int i = 1; i < d->n && r; i++) {
            Dim *x = subst(cx, d->args[i], m, memo);
            if (!x)
                return NULL;
            r = d->kind == DIM_ADD ? dim_add(cx, r, x) : dim_mul(cx, r, x);
        }
        if (!r)
            return NULL;
        return d->kind == DIM_ADD ? dim_addc(cx, r, d->c) : dim_mulc(cx, r, d->c);
    }
    default:
        break;
    }
    Dim *b = subst(cx, d->args[1], m, memo);
    if (!b)
        return NULL;
    switch (d->kind) {
    case DIM_FLOORDIV: return dim_floordiv(cx, a, b);
    case DIM_CEILDIV: return dim_ceildiv(cx, a, b);
    case DIM_MOD: return dim_mod(cx, a, b);
    case DIM_MIN: return dim_min(cx, a, b);
    case DIM_MAX: return dim_max(cx, a, b);
    default: return NULL;
    }
}

Dim *dim_subst(DimCtx *cx, Dim *d, const DimMap *m)
{
    DimMap memo;
    dimmap_init(&memo);
    Dim *r = subst(cx, d, m, &memo);
    dimmap_free(&memo);
    return r;
}

static bool subst_list(DimCtx *cx, Dim **v, int n, const DimMap *m, DimMap *memo)
{
    for (int i = 0; i < n; i++) {
        Dim *x = subst(cx, v[i], m, memo);
        if (!x)
            return false;
        v[i] = x;
    }
    return true;
}

bool graph_subst_dims(Graph *g, const DimMap *m)
{
    DimCtx *cx = &g->dims;
    DimMap memo; /* one for the whole graph: m does not change */
    dimmap_init(&memo);
    bool ok = true;
    for (int i = 0; i < g->ninputs; i++)
        ok &= subst_list(cx, g->inputs[i]->type.dims, g->inputs[i]->type.rank, m, &memo);
    graph_for_each_op(g, op) {
        for (int i = 0; i < op->nout; i++)
            ok &= subst_list(cx, op->out[i]->type.dims, op->out[i]->type.rank, m, &memo);
        for (int i = 0; i < op->nattrs; i++)
            if (op->attrs[i].kind == ATTR_DIMS)
                ok &= subst_list(cx, op->attrs[i].dims, op->attrs[i].n, m, &memo);
    }
    dimmap_free(&memo);
    return ok;
}
