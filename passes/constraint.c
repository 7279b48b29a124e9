/*
 * constraint.c — the constraint set of a graph's symbols, and the affine
 * queries that ISL answers (see constraint.h for the contract).
 *
 * How a question is answered
 * --------------------------
 * A query `a rel b` goes through three stages, cheapest first:
 *
 *   1. Canonical form. Dims are hash-consed, so a == b is a pointer test;
 *      d = a - b is built canonically, and if it is a constant the answer
 *      is exact. Non-affine terms that cancel (S*T - S*T) vanish here.
 *   2. Intervals. dim_bounds(d) over the symbols' bounds; if the interval
 *      alone decides `d rel 0`, that is a proof (it holds for every value
 *      of the symbols, a fortiori for those that satisfy the facts).
 *   3. ISL. The facts form a parametric set F over the symbols (ISL
 *      parameters, one isl_id per Dim pointer), intersected at query time
 *      with each involved symbol's current bounds. The claim becomes a set
 *      Q over the same parameters, and it is proved iff F is non-empty and
 *      F is a subset of Q (F \ Q is empty).
 *
 * Translation of a Dim into an isl_pw_aff (a piecewise quasi-affine
 * expression of the parameters):
 *
 *   const c               the constant c (isl_val: no int64 overflow here)
 *   symbol S              the parameter S
 *   c + t1 + t2 ...       sum
 *   k*atom                scaled atom; a product of two or more atoms
 *                         (S*T, S*S) is not affine
 *   floordiv(e, k)        floor(e / k), k a non-zero constant of any sign:
 *                         ISL keeps an existentially quantified integer
 *                         division, exact for negative e and k
 *   ceildiv(e, k)         ceil(e / k)
 *   mod(e, k)             e - k*floor(e / k) (floored, sign of k)
 *   min(e, f), max(e, f)  isl_pw_aff_min / max: a piecewise expression,
 *                         one piece where e <= f and one where e > f
 *
 * A division by a non-constant is not affine either. Facts that are not
 * affine are kept for printing only. In a query, a non-affine node is
 * replaced by an opaque parameter bounded by dim_bounds of that node (the
 * same node pointer gives the same parameter): the answer is weaker but
 * still sound, since the true value is one of those the parameter ranges
 * over. So `S*T >= 1` with S, T >= 1 is proved (by intervals, stage 2),
 * while `S*T >= S` is not.
 *
 * Each affine fact keeps its own isl_set and the symbols it uses. A query
 * takes only the facts connected to its symbols (sharing a symbol, directly
 * or through other facts) and the bounds of the symbols involved: facts on
 * other symbols cannot change the answer once the whole set is known to be
 * satisfiable, which is checked once and cached. Symbol bounds are read
 * from the DimCtx at every query (and the cache is keyed on them), so
 * bounds set after a fact was added still count. ISL's answers are
 * remembered per (a, b, rel) or (a, k) under the same key, so the shape
 * analysis may ask the same question at every op for free.
 *
 * ISL runs with on_error = CONTINUE; every NULL from ISL means "not
 * proved" (or "consistent, as far as we know"), never an abort.
 */
#include "passes/constraint.h"

#include <isl/aff.h>
#include <isl/ctx.h>
#include <isl/id.h>
#include <isl/options.h>
#include <isl/set.h>
#include <isl/space.h>
#include <isl/val.h>

#include <stdlib.h>
#include <string.h>

typedef struct AtomList {
    const Dim **v;  /* symbols and opaque atoms, no repeats */
    int n, cap;
    bool oom;
} AtomList;

typedef struct Fact {
    Dim *a, *b;     /* a rel b; b is NULL for divisibility */
    Rel rel;
    int64_t k;      /* divisibility: a % k == 0 */
    char *origin;   /* malloc'd, or NULL */
    bool affine;    /* given to ISL */
    isl_set *set;   /* where it holds (without bounds), if affine */
    AtomList atoms; /* the symbols it uses, if affine */
} Fact;

typedef struct Memo {
    const Dim *a, *b; /* b: NULL for divisibility by k */
    int64_t k;        /* or the Rel */
    bool proved;
} Memo;

struct Constraints {
    DimCtx *cx;
    isl_ctx *ctx;
    Fact *facts;
    int nfacts, capfacts;
    /* Whether all affine facts and their symbols' bounds can hold at once,
     * valid while nfacts and every symbol's bounds are as when computed. */
    int cache_nfacts;  /* -1: nothing cached */
    int64_t *cache_snap; /* lo, hi of each symbol of cx */
    int cache_nsyms;
    bool cache_empty;
    /* Answers ISL gave, valid under the same condition as cache_empty. */
    Memo *memo;        /* open addressing; a == NULL: free slot */
    int memo_cap, memo_count;
};

const char *cons_rel_str(Rel r)
{
    switch (r) {
    case REL_EQ: return "==";
    case REL_NE: return "!=";
    case REL_LE: return "<=";
    case REL_LT: return "<";
    case REL_GE: return ">=";
    case REL_GT: return ">";
    }
    return "?";
}

/* ---- small helpers ----------------------------------------------------- */

/* A failed allocation: queries answer "not proved" and facts are kept for
 * printing only, which is sound; the graph's arena records the failure
 * (Arena.failed) so that the pipeline stops with a resource error. A cache
 * that cannot grow (the emptiness snapshot, the memo) is not a failure. */
static bool cons_oom(Constraints *c)
{
    c->cx->arena->failed = true;
    return false;
}

static char *str_copy(const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p)
        memcpy(p, s, n);
    return p;
}

static bool atoms_add(AtomList *l, const Dim *d)
{
    for (int i = 0; i < l->n; i++)
        if (l->v[i] == d)
            return true;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 8;
        size_t bytes;
        if (cap < l->cap || !size_mul((size_t)cap, sizeof *l->v, &bytes)) {
            l->oom = true;
            return false;
        }
        const Dim **v = realloc(l->v, bytes);
        if (!v) {
            l->oom = true;
            return false;
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = d;
    return true;
}

static void atoms_free(AtomList *l)
{
    free(l->v);
    *l = (AtomList){0};
}

/* Does the interval [lo, hi] (INT64_MIN / INT64_MAX: infinite) prove
 * `x rel 0` for every x in it? */
static bool interval_proves(int64_t lo, int64_t hi, Rel r)
{
    switch (r) {
    case REL_EQ: return lo == 0 && hi == 0;
    case REL_NE: return lo > 0 || hi < 0;
    case REL_LE: return hi <= 0;
    case REL_LT: return hi < 0;
    case REL_GE: return lo >= 0;
    case REL_GT: return lo > 0;
    }
    return false;
}

/* Does [lo, hi] prove `x rel 0` false for every x in it? */
static bool interval_refutes(int64_t lo, int64_t hi, Rel r)
{
    switch (r) {
    case REL_EQ: return lo > 0 || hi < 0;
    case REL_NE: return lo == 0 && hi == 0;
    case REL_LE: return lo > 0;
    case REL_LT: return lo >= 0;
    case REL_GE: return hi < 0;
    case REL_GT: return hi <= 0;
    }
    return false;
}

/* Is the node itself affine in its args? A product of atoms and a division
 * by a non-constant are not; everything else is, if its args are. */
static bool node_affine(const Dim *d)
{
    switch (d->kind) {
    case DIM_MUL:
        return d->n == 1;
    case DIM_FLOORDIV:
    case DIM_CEILDIV:
    case DIM_MOD:
        return d->args[1]->kind == DIM_CONST && d->args[1]->c != 0;
    default:
        return true;
    }
}

/* ---- Dim -> isl_pw_aff ------------------------------------------------- */

typedef struct Tr {
    isl_ctx *ctx;
    AtomList *atoms; /* receives every symbol and opaque atom used */
    bool opaque;     /* non-affine nodes become bounded unknowns (queries) */
} Tr;

/* The universe of the 0-dimensional parameter domain. */
static isl_set *universe(isl_ctx *ctx)
{
    return isl_set_universe(isl_space_set_alloc(ctx, 0, 0));
}

static isl_pw_aff *pa_const(isl_ctx *ctx, int64_t v)
{
    return isl_pw_aff_val_on_domain(universe(ctx), isl_val_int_from_si(ctx, v));
}

/* The parameter that stands for d (a symbol, or an opaque atom). */
static isl_pw_aff *pa_param(isl_ctx *ctx, const Dim *d)
{
    char buf[32];
    const char *name = d->name;
    if (d->kind != DIM_SYM || !name) {
        snprintf(buf, sizeof buf, "atom%d", d->id);
        name = buf;
    }
    isl_id *id = isl_id_alloc(ctx, name, (void *)d);
    return isl_pw_aff_param_on_domain_id(universe(ctx), id);
}

static isl_pw_aff *tr_dim(Tr *t, const Dim *d);

static isl_pw_aff *tr_atom(Tr *t, const Dim *d)
{
    if (!t->opaque || !atoms_add(t->atoms, d))
        return NULL;
    return pa_param(t->ctx, d);
}

static isl_pw_aff *tr_dim(Tr *t, const Dim *d)
{
    isl_ctx *ctx = t->ctx;
    isl_pw_aff *x, *y;

    if (!d)
        return NULL;
    if (!node_affine(d))
        return tr_atom(t, d);
    switch (d->kind) {
    case DIM_CONST:
        return pa_const(ctx, d->c);
    case DIM_SYM:
        if (!atoms_add(t->atoms, d))
            return NULL;
        return pa_param(ctx, d);
    case DIM_ADD:
        x = pa_const(ctx, d->c);
        for (int i = 0; i < d->n && x; i++) {
            y = tr_dim(t, d->args[i]);
            if (!y) {
                isl_pw_aff_free(x);
                return NULL;
            }
            x = isl_pw_aff_add(x, y);
        }
        return x;
    case DIM_MUL: /* n == 1: node_affine said so */
        x = tr_dim(t, d->args[0]);
        return isl_pw_aff_scale_val(x, isl_val_int_from_si(ctx, d->c));
    case DIM_FLOORDIV:
    case DIM_CEILDIV:
    case DIM_MOD: {
        int64_t k = d->args[1]->c;
        x = tr_dim(t, d->args[0]);
        if (!x)
            return NULL;
        y = isl_pw_aff_div(isl_pw_aff_copy(x), pa_const(ctx, k));
        if (d->kind == DIM_CEILDIV) {
            isl_pw_aff_free(x);
            return isl_pw_aff_ceil(y);
        }
        y = isl_pw_aff_floor(y);
        if (d->kind == DIM_FLOORDIV) {
            isl_pw_aff_free(x);
            return y;
        }
        y = isl_pw_aff_scale_val(y, isl_val_int_from_si(ctx, k));
        return isl_pw_aff_sub(x, y);
    }
    case DIM_MIN:
    case DIM_MAX:
        x = tr_dim(t, d->args[0]);
        y = x ? tr_dim(t, d->args[1]) : NULL;
        if (!y) {
            isl_pw_aff_free(x);
            return NULL;
        }
        return d->kind == DIM_MIN ? isl_pw_aff_min(x, y) : isl_pw_aff_max(x, y);
    }
    return NULL;
}

/* { x rel y }, taking both. */
static isl_set *rel_set(Rel r, isl_pw_aff *x, isl_pw_aff *y)
{
    if (!x || !y) {
        isl_pw_aff_free(x);
        isl_pw_aff_free(y);
        return NULL;
    }
    switch (r) {
    case REL_EQ: return isl_pw_aff_eq_set(x, y);
    case REL_NE: return isl_pw_aff_ne_set(x, y);
    case REL_LE: return isl_pw_aff_le_set(x, y);
    case REL_LT: return isl_pw_aff_lt_set(x, y);
    case REL_GE: return isl_pw_aff_ge_set(x, y);
    case REL_GT: return isl_pw_aff_gt_set(x, y);
    }
    isl_pw_aff_free(x);
    isl_pw_aff_free(y);
    return NULL;
}

/* The set where `a rel b` holds. The canonical difference is used when it
 * exists (non-affine terms may cancel there); when building it overflows,
 * a and b are translated apart (ISL's arithmetic does not overflow). */
static isl_set *claim_set(Constraints *c, Tr *t, Dim *a, Rel r, Dim *b)
{
    Dim *d = dim_sub(c->cx, a, b);
    if (d)
        return rel_set(r, tr_dim(t, d), pa_const(c->ctx, 0));
    isl_pw_aff *x = tr_dim(t, a);
    isl_pw_aff *y = x ? tr_dim(t, b) : NULL;
    return rel_set(r, x, y);
}

/* The set where k divides a. */
static isl_set *divisible_set(Tr *t, Dim *a, int64_t k)
{
    isl_pw_aff *x = tr_dim(t, a);
    if (!x)
        return NULL;
    isl_val *m = isl_val_abs(isl_val_int_from_si(t->ctx, k));
    x = isl_pw_aff_mod_val(x, m);
    return isl_pw_aff_eq_set(x, pa_const(t->ctx, 0));
}

/* The bounds of every atom in l: a symbol's Dim.lo/hi as they are now, an
 * opaque atom's dim_bounds. */
static isl_set *bounds_set(isl_ctx *ctx, const AtomList *l, isl_set *s)
{
    for (int i = 0; i < l->n && s; i++) {
        const Dim *d = l->v[i];
        int64_t lo = d->lo, hi = d->hi;
        if (d->kind != DIM_SYM)
            dim_bounds(d, &lo, &hi);
        if (lo != INT64_MIN)
            s = isl_set_intersect(s, isl_pw_aff_ge_set(pa_param(ctx, d), pa_const(ctx, lo)));
        if (hi != DIM_INF && s)
            s = isl_set_intersect(s, isl_pw_aff_le_set(pa_param(ctx, d), pa_const(ctx, hi)));
    }
    return s;
}

static bool atoms_meet(const AtomList *x, const AtomList *y)
{
    for (int i = 0; i < x->n; i++)
        for (int j = 0; j < y->n; j++)
            if (x->v[i] == y->v[j])
                return true;
    return false;
}

/* The affine facts that share symbols with `atoms`, directly or through
 * other facts, with the bounds of every symbol involved; atoms grows to
 * hold those symbols. Facts on unrelated symbols cannot change the answer
 * (their consistency is checked apart), and leaving them out keeps ISL's
 * sets small. */
static isl_set *facts_set(Constraints *c, AtomList *atoms)
{
    bool *used = c->nfacts ? calloc((size_t)c->nfacts, sizeof *used) : NULL;
    if (c->nfacts && !used) {
        cons_oom(c);
        return NULL;
    }
    isl_set *s = universe(c->ctx);
    for (bool changed = true; changed && s;) {
        changed = false;
        for (int i = 0; i < c->nfacts && s; i++) {
            Fact *f = &c->facts[i];
            if (used[i] || !f->affine || !atoms_meet(&f->atoms, atoms))
                continue;
            used[i] = changed = true;
            for (int j = 0; j < f->atoms.n; j++)
                atoms_add(atoms, f->atoms.v[j]);
            s = isl_set_intersect(s, isl_set_copy(f->set));
        }
    }
    free(used);
    if (atoms->oom) {
        cons_oom(c);
        isl_set_free(s);
        return NULL;
    }
    return bounds_set(c->ctx, atoms, s);
}

/* Is the conjunction of every affine fact and the bounds of its symbols
 * empty? Cached; an ISL failure counts as "not known to be empty". */
static bool facts_empty(Constraints *c)
{
    DimCtx *cx = c->cx;
    bool valid = c->cache_nfacts == c->nfacts && c->cache_nsyms == cx->nsyms;
    for (int i = 0; valid && i < cx->nsyms; i++)
        valid = c->cache_snap[2 * i] == cx->syms[i]->lo &&
                c->cache_snap[2 * i + 1] == cx->syms[i]->hi;
    if (valid)
        return c->cache_empty;

    if (c->memo_count) {
        memset(c->memo, 0, (size_t)c->memo_cap * sizeof *c->memo);
        c->memo_count = 0;
    }

    AtomList all = {0};
    for (int i = 0; i < c->nfacts; i++)
        for (int j = 0; c->facts[i].affine && j < c->facts[i].atoms.n; j++)
            atoms_add(&all, c->facts[i].atoms.v[j]);
    isl_set *s = all.oom ? (cons_oom(c), NULL) : facts_set(c, &all);
    bool empty = s && isl_set_is_empty(s) == isl_bool_true;
    isl_set_free(s);
    atoms_free(&all);

    size_t bytes;
    int64_t *snap = NULL;
    if (size_mul((size_t)cx->nsyms + 1, 2 * sizeof *snap, &bytes))
        snap = realloc(c->cache_snap, bytes);
    if (snap) {
        c->cache_snap = snap;
        for (int i = 0; i < cx->nsyms; i++) {
            snap[2 * i] = cx->syms[i]->lo;
            snap[2 * i + 1] = cx->syms[i]->hi;
        }
        c->cache_nsyms = cx->nsyms;
        c->cache_nfacts = c->nfacts;
        c->cache_empty = empty;
    }
    return empty;
}

static bool atom_bounds_empty(const AtomList *l)
{
    for (int i = 0; i < l->n; i++) {
        int64_t lo = l->v[i]->lo, hi = l->v[i]->hi;
        if (l->v[i]->kind != DIM_SYM)
            dim_bounds(l->v[i], &lo, &hi);
        if (lo > hi)
            return true;
    }
    return false;
}

static uint64_t memo_hash(const Dim *a, const Dim *b, int64_t k)
{
    uint64_t h = (uint64_t)(uintptr_t)a * 0x9e3779b97f4a7c15u;
    h ^= (uint64_t)(uintptr_t)b * 0xc2b2ae3d27d4eb4fu + (h >> 29);
    h ^= (uint64_t)k * 0x165667b19e3779f9u + (h >> 31);
    return h;
}

/* The slot of (a, b, k): the entry, or the free slot where it belongs.
 * NULL when there is no table. */
static Memo *memo_slot(Constraints *c, const Dim *a, const Dim *b, int64_t k)
{
    if (!c->memo_cap)
        return NULL;
    size_t mask = (size_t)c->memo_cap - 1;
    for (size_t i = memo_hash(a, b, k) & mask;; i = (i + 1) & mask) {
        Memo *m = &c->memo[i];
        if (!m->a || (m->a == a && m->b == b && m->k == k))
            return m;
    }
}

/* Looks up an earlier ISL answer; call after facts_empty (which drops the
 * table when it is stale). */
static bool memo_get(Constraints *c, const Dim *a, const Dim *b, int64_t k, bool *proved)
{
    Memo *m = memo_slot(c, a, b, k);
    if (!m || !m->a)
        return false;
    *proved = m->proved;
    return true;
}

static void memo_put(Constraints *c, const Dim *a, const Dim *b, int64_t k, bool proved)
{
    if (2 * (c->memo_count + 1) > c->memo_cap) { /* keep the load <= 1/2 */
        int cap = c->memo_cap ? 2 * c->memo_cap : 64;
        size_t bytes;
        if (cap < c->memo_cap || !size_mul((size_t)cap, sizeof(Memo), &bytes))
            return;
        Memo *old = c->memo, *v = calloc((size_t)cap, sizeof *v);
        int oldcap = c->memo_cap;
        if (!v)
            return;
        c->memo = v;
        c->memo_cap = cap;
        for (int i = 0; i < oldcap; i++)
            if (old[i].a)
                *memo_slot(c, old[i].a, old[i].b, old[i].k) = old[i];
        free(old);
    }
    Memo *m = memo_slot(c, a, b, k);
    if (!m->a)
        c->memo_count++;
    *m = (Memo){a, b, k, proved};
}

/* Proves that the facts imply claim (taken); atoms are the claim's.
 * Contradictory facts prove nothing here. When all facts together are
 * satisfiable, so is the part facts_set picks, and atoms outside every
 * fact only add their own intervals: checking those intervals spares an
 * ISL emptiness test per query. */
static bool prove_set(Constraints *c, isl_set *claim, AtomList *atoms)
{
    bool ok = false;
    isl_set *f = NULL;
    if (atoms->oom)
        cons_oom(c);
    if (!claim || atoms->oom || atom_bounds_empty(atoms) || facts_empty(c))
        goto out;
    f = facts_set(c, atoms);
    if (!f)
        goto out;
    ok = isl_set_is_subset(f, claim) == isl_bool_true;
out:
    isl_set_free(f);
    isl_set_free(claim);
    atoms_free(atoms);
    return ok;
}

/* ---- the set ------------------------------------------------------------ */

Constraints *cons_new(DimCtx *cx)
{
    Constraints *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->cx = cx;
    c->ctx = isl_ctx_alloc();
    if (!c->ctx) {
        free(c);
        return NULL;
    }
    isl_options_set_on_error(c->ctx, ISL_ON_ERROR_CONTINUE);
    c->cache_nfacts = -1;
    return c;
}

void cons_free(Constraints *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->nfacts; i++) {
        free(c->facts[i].origin);
        isl_set_free(c->facts[i].set);
        atoms_free(&c->facts[i].atoms);
    }
    free(c->facts);
    free(c->cache_snap);
    free(c->memo);
    isl_ctx_free(c->ctx);
    free(c);
}

int cons_count(const Constraints *c)
{
    return c->nfacts;
}

static Fact *fact_push(Constraints *c, const char *origin)
{
    if (c->nfacts == c->capfacts) {
        int cap = c->capfacts ? 2 * c->capfacts : 8;
        size_t bytes;
        if (cap < c->capfacts || !size_mul((size_t)cap, sizeof *c->facts, &bytes))
            return NULL;
        Fact *v = realloc(c->facts, bytes);
        if (!v)
            return NULL;
        c->facts = v;
        c->capfacts = cap;
    }
    Fact *f = &c->facts[c->nfacts];
    *f = (Fact){0};
    f->origin = str_copy(origin);
    if (origin && !f->origin)
        return NULL;
    c->nfacts++;
    return f;
}

/* Gives the fact its set (taken) and atoms (taken) if ISL built it. */
static bool fact_take(Constraints *c, Fact *f, isl_set *s, AtomList *atoms)
{
    if (atoms->oom)
        cons_oom(c);
    if (!s || atoms->oom) {
        isl_set_free(s);
        atoms_free(atoms);
        return false;
    }
    f->set = isl_set_coalesce(s);
    f->atoms = *atoms;
    f->affine = f->set != NULL;
    if (!f->affine)
        atoms_free(&f->atoms);
    return f->affine;
}

bool cons_add(Constraints *c, Dim *a, Rel rel, Dim *b, const char *origin)
{
    if (!a || !b)
        return false;
    Fact *f = fact_push(c, origin);
    if (!f)
        return cons_oom(c);
    f->a = a;
    f->b = b;
    f->rel = rel;
    AtomList atoms = {0};
    Tr t = {c->ctx, &atoms, false};
    return fact_take(c, f, claim_set(c, &t, a, rel, b), &atoms);
}

bool cons_add_divisible(Constraints *c, Dim *a, int64_t k, const char *origin)
{
    if (!a || k == 0)
        return false;
    Fact *f = fact_push(c, origin);
    if (!f)
        return cons_oom(c);
    f->a = a;
    f->k = k;
    AtomList atoms = {0};
    Tr t = {c->ctx, &atoms, false};
    return fact_take(c, f, divisible_set(&t, a, k), &atoms);
}

bool cons_prove(Constraints *c, Dim *a, Rel rel, Dim *b)
{
    if (!a || !b)
        return false;
    if (a == b)
        return rel == REL_EQ || rel == REL_LE || rel == REL_GE;
    Dim *d = dim_sub(c->cx, a, b);
    if (d) {
        int64_t lo, hi;
        if (d->kind == DIM_CONST)
            lo = hi = d->c;
        else
            dim_bounds(d, &lo, &hi);
        if (interval_proves(lo, hi, rel))
            return true;
        if (d->kind == DIM_CONST)
            return false;
    }
    bool proved;
    if (facts_empty(c))
        return false;
    if (memo_get(c, a, b, rel, &proved))
        return proved;
    AtomList atoms = {0};
    Tr t = {c->ctx, &atoms, true};
    proved = prove_set(c, claim_set(c, &t, a, rel, b), &atoms);
    memo_put(c, a, b, rel, proved);
    return proved;
}

bool cons_prove_divisible(Constraints *c, Dim *a, int64_t k)
{
    if (!a || k == 0)
        return false;
    if (k == 1 || k == -1)
        return true;
    if (a->kind == DIM_CONST)
        return a->c % k == 0;
    Dim *kd = dim_const(c->cx, k);
    Dim *m = kd ? dim_mod(c->cx, a, kd) : NULL;
    if (m && m->kind == DIM_CONST)
        return m->c == 0;
    bool proved;
    if (facts_empty(c))
        return false;
    if (memo_get(c, a, NULL, k, &proved))
        return proved;
    AtomList atoms = {0};
    Tr t = {c->ctx, &atoms, true};
    proved = prove_set(c, divisible_set(&t, a, k), &atoms);
    memo_put(c, a, NULL, k, proved);
    return proved;
}

bool cons_prove_ge0(Constraints *c, Dim *e)
{
    Dim *zero = dim_const(c->cx, 0);
    return zero && cons_prove(c, e, REL_GE, zero);
}

bool cons_prove_le(Constraints *c, Dim *e, int64_t k)
{
    Dim *kd = dim_const(c->cx, k);
    return kd && cons_prove(c, e, REL_LE, kd);
}

bool cons_prove_eq(Constraints *c, Dim *a, Dim *b)
{
    return cons_prove(c, a, REL_EQ, b);
}

bool cons_consistent(Constraints *c)
{
    DimCtx *cx = c->cx;
    for (int i = 0; i < cx->nsyms; i++)
        if (cx->syms[i]->lo > cx->syms[i]->hi)
            return false;
    for (int i = 0; i < c->nfacts; i++) {
        const Fact *f = &c->facts[i];
        if (f->affine || !f->b)
            continue;
        Dim *d = dim_sub(cx, f->a, f->b);
        int64_t lo, hi;
        if (!d)
            continue;
        dim_bounds(d, &lo, &hi);
        if (interval_refutes(lo, hi, f->rel))
            return false;
    }
    return !facts_empty(c);
}

/* ---- printing ----------------------------------------------------------- */

static char *dim_text(const Dim *d)
{
    char small[128];
    int n = dim_snprint(small, sizeof small, d);
    if (n < 0)
        return NULL;
    char *s = malloc((size_t)n + 1);
    if (s)
        dim_snprint(s, (size_t)n + 1, d);
    return s;
}

static char *fact_text(const Fact *f)
{
    char *a = dim_text(f->a);
    char *b = f->b ? dim_text(f->b) : NULL;
    char *line = NULL;
    if (!a || (f->b && !b))
        goto out;
    char rhs[64];
    const char *lp = "", *rp = "";
    if (f->b) {
        snprintf(rhs, sizeof rhs, " %s ", cons_rel_str(f->rel));
    } else {
        snprintf(rhs, sizeof rhs, " %% %lld == 0", (long long)f->k);
        if (f->a->kind == DIM_ADD)
            lp = "(", rp = ")";
    }
    const char *origin = f->origin ? f->origin : "";
    size_t n = strlen(a) + strlen(rhs) + (b ? strlen(b) : 0) + strlen(origin) + 32;
    line = malloc(n);
    if (line)
        snprintf(line, n, "%s%s%s%s%s%s%s%s%s", lp, a, rp, rhs, b ? b : "",
                 f->origin ? "  (" : "", origin, f->origin ? ")" : "",
                 f->affine ? "" : " [not affine]");
out:
    free(a);
    free(b);
    return line;
}

static int cmp_str(const void *x, const void *y)
{
    return strcmp(*(char *const *)x, *(char *const *)y);
}

static int cmp_sym(const void *x, const void *y)
{
    const Dim *a = *(const Dim *const *)x, *b = *(const Dim *const *)y;
    int r = strcmp(a->name ? a->name : "", b->name ? b->name : "");
    return r ? r : (a->id > b->id) - (a->id < b->id);
}

void cons_print(FILE *f, const Constraints *c)
{
    DimCtx *cx = c->cx;
    if (cx->nsyms > 0) {
        const Dim **syms = malloc((size_t)cx->nsyms * sizeof *syms);
        if (syms) {
            memcpy(syms, cx->syms, (size_t)cx->nsyms * sizeof *syms);
            qsort(syms, (size_t)cx->nsyms, sizeof *syms, cmp_sym);
            for (int i = 0; i < cx->nsyms; i++) {
                const Dim *s = syms[i];
                if (s->lo != INT64_MIN)
                    fprintf(f, "%s >= %lld\n", s->name, (long long)s->lo);
                if (s->hi != DIM_INF)
                    fprintf(f, "%s <= %lld\n", s->name, (long long)s->hi);
            }
            free(syms);
        }
    }
    if (c->nfacts == 0)
        return;
    char **lines = calloc((size_t)c->nfacts, sizeof *lines);
    if (!lines)
        return;
    int n = 0;
    for (int i = 0; i < c->nfacts; i++)
        if ((lines[n] = fact_text(&c->facts[i])))
            n++;
    qsort(lines, (size_t)n, sizeof *lines, cmp_str);
    for (int i = 0; i < n; i++) {
        fprintf(f, "%s\n", lines[i]);
        free(lines[i]);
    }
    free(lines);
}
