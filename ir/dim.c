/*
 * dim.c — symbolic dimensions: integer expressions over named symbols,
 * hash-consed in one canonical form so that equal expressions are the same
 * pointer.
 *
 * The canonical form
 * ------------------
 * Every Dim is a polynomial with integer coefficients over "atoms":
 *
 *   atom  := SYM | floordiv(d, d) | ceildiv(d, d) | mod(d, d)
 *          | min(d, d) | max(d, d)            (args canonical)
 *   mono  := atom | atom*atom*...             (atoms sorted; repeats are powers)
 *   term  := k*mono                           (k != 0)
 *   dim   := c | term | c + term + term + ... (distinct monos, sorted)
 *
 * Node kinds map onto this as follows. DIM_CONST holds c. A term with
 * k == 1 and one atom is the atom itself; any other term is a DIM_MUL whose
 * c is k and whose args are the sorted atoms (never one atom with c == 1).
 * A sum is a DIM_ADD whose c is the constant term and whose args are the
 * terms, sorted, none with a zero coefficient, and never a single term with
 * c == 0 (that is just the term).
 *
 * Every constructor converts its operands to a Poly — a constant plus a
 * list of (coefficient, mono) pairs, where a mono is an interned atom or
 * MUL with coefficient 1 — computes there (multiplication distributes over
 * sums), then sorts, merges like monos, drops zeros and interns the result.
 * Interning finds a node by kind, c and the pointers of its args in a
 * chained hash table. Args are interned before their parent, so equal
 * pointers of args mean equal structure, and each structure exists once.
 *
 * The order
 * ---------
 * Sorting uses dim_cmp, which looks only at structure, never at creation
 * order or addresses, so a dim prints the same however it was built, and
 * the text parses back (through dim_add, dim_mul, ...) to the same pointer.
 * Anything that is not an ADD compares as a mono with a coefficient (a
 * constant is the empty mono): first by degree, then atom by atom, then by
 * coefficient. Atoms compare by kind (symbols first), symbols by name,
 * functions by their args. ADDs come after everything else and compare
 * term by term, then by constant. So S*T + 2*S + T + 1 prints as
 * "2*S + T + S*T + 1".
 *
 * Division, mod, min, max
 * -----------------------
 * These are rewritten only by rules that are identities for every value of
 * the symbols within their bounds; anything else becomes an atom. For a
 * constant divisor k > 1 (reshapes, strides, pooling windows):
 *   - the gcd g of the numerator's coefficients, its constant and k is
 *     divided out: floor(g*x / (g*k)) = floor(x/k), mod(g*x, g*k) =
 *     g*mod(x, k);
 *   - floordiv and ceildiv pull out the terms k divides and the multiple of
 *     k in the constant: floor((k*q + r)/k) = q + floor(r/k) because q is
 *     an integer; the constant left inside is in [0, k);
 *   - mod reduces every coefficient and the constant modulo k;
 *   - if the numerator's bounds lie within one period the result is known;
 *   - floordiv(floordiv(x, a), b) = floordiv(x, a*b), the same for ceildiv,
 *     and mod(mod(x, a), b) = mod(x, b) when b divides a.
 * A divisor of 1 or -1 disappears; other negative constant divisors only
 * fold constants. For a symbolic divisor, factors common to every term of
 * both sides cancel (the gcd of all coefficients, and atoms whose bounds
 * exclude 0), since a/b = (a/m)/(b/m) exactly and mod(m*a, m*b) =
 * m*mod(a, b): floordiv(768*B*S, B*S) = 768, mod(S*T, S) = 0. floordiv(x, x)
 * is 1 and mod(x, x) is 0 when x cannot be 0; 0 <= a < b gives floordiv 0
 * and mod a, 1 <= a <= b gives ceildiv 1 (b - a is bounded as a sum, so
 * floordiv(S, S + 1) is 0). A ceildiv stays a ceildiv; it is never
 * rewritten to floordiv.
 *
 * min and max sort their args, pick a side when the bounds of the two or of
 * their difference order them (min(S + 1, S) = S; min(S, 0) = 0 for S >= 1),
 * and absorb a nested min or max that shares an arg.
 *
 * Every rewrite leaves a fixed point: an atom built from args (a, b) comes
 * back unchanged when its constructor is applied to (a, b) again, which is
 * what makes printed text parse back to the same pointer.
 *
 * Failure
 * -------
 * A constructor returns NULL when constant arithmetic overflows int64 (a
 * folded constant, a coefficient, a product of coefficients), when a
 * constant divisor is 0, or when memory runs out. Every constructor returns
 * NULL for a NULL operand, so a chain of calls needs one check at its end.
 *
 * Bounds
 * ------
 * dim_bounds is interval arithmetic over the symbols' [lo, hi]; INT64_MIN
 * stands for -inf and INT64_MAX (DIM_INF) for +inf. A step that would
 * overflow widens to infinity, so bounds are always sound, possibly loose.
 * Simplification reads bounds when it runs: set a symbol's bounds before
 * building dims over it.
 */
#include "ir/ir.h"

#include <assert.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define NEG_INF INT64_MIN
#define POS_INF INT64_MAX

/* ------------------------------------------------------------------ */
/* Integer arithmetic with floor semantics                              */

/* b != 0 and not (INT64_MIN, -1). */
static int64_t floordiv64(int64_t a, int64_t b)
{
    int64_t q = a / b;
    if (a % b != 0 && (a < 0) != (b < 0))
        q--;
    return q;
}

static int64_t ceildiv64(int64_t a, int64_t b)
{
    int64_t q = a / b;
    if (a % b != 0 && (a < 0) == (b < 0))
        q++;
    return q;
}

/* b != 0; the result has b's sign. */
static int64_t floormod64(int64_t a, int64_t b)
{
    if (b == -1)
        return 0;
    int64_t r = a % b;
    if (r != 0 && (r < 0) != (b < 0))
        r += b;
    return r;
}

/* One binary operation on values, as at run time. */
static DimEvalStatus apply(DimKind k, int64_t a, int64_t b, int64_t *out)
{
    switch (k) {
    case DIM_ADD:
        return __builtin_add_overflow(a, b, out) ? DIM_OVERFLOW : DIM_OK;
    case DIM_MUL:
        return __builtin_mul_overflow(a, b, out) ? DIM_OVERFLOW : DIM_OK;
    case DIM_FLOORDIV:
    case DIM_CEILDIV:
        if (b == 0)
            return DIM_DIVZERO;
        if (a == INT64_MIN && b == -1)
            return DIM_OVERFLOW;
        *out = k == DIM_FLOORDIV ? floordiv64(a, b) : ceildiv64(a, b);
        return DIM_OK;
    case DIM_MOD:
        if (b == 0)
            return DIM_DIVZERO;
        *out = floormod64(a, b);
        return DIM_OK;
    case DIM_MIN:
        *out = a < b ? a : b;
        return DIM_OK;
    case DIM_MAX:
        *out = a > b ? a : b;
        return DIM_OK;
    default:
        assert(!"not a binary dim kind");
        return DIM_OVERFLOW;
    }
}

static uint64_t uabs64(int64_t v) { return v < 0 ? -(uint64_t)v : (uint64_t)v; }

uint64_t dim_gcd(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* ------------------------------------------------------------------ */
/* Interning                                                            */

static uint32_t hash_mix(uint32_t h, uint64_t v)
{
    h ^= (uint32_t)v ^ (uint32_t)(v >> 32);
    h *= 0x9E3779B1u;
    return h ^ (h >> 15);
}

static uint32_t hash_node(DimKind k, int64_t c, Dim *const *args, int n)
{
    uint32_t h = hash_mix(2166136261u, (uint64_t)k);
    h = hash_mix(h, (uint64_t)c);
    for (int i = 0; i < n; i++)
        h = hash_mix(h, args[i]->hash);
    return h;
}

static uint32_t hash_name(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return hash_mix(h, DIM_SYM);
}

void dim_ctx_init(DimCtx *cx, Arena *a)
{
    memset(cx, 0, sizeof *cx);
    cx->arena = a;
}

/* Makes room for one more node; false if out of memory. */
static bool table_reserve(DimCtx *cx)
{
    if (cx->count < cx->cap)
        return true;
    int cap = cx->cap ? cx->cap * 2 : 256;
    Dim **t = arena_array(cx->arena, (size_t)cap, sizeof *t);
    if (!t)
        return false;
    for (int i = 0; i < cx->cap; i++) {
        Dim *d = cx->table[i];
        while (d) {
            Dim *next = d->next;
            uint32_t j = d->hash & (uint32_t)(cap - 1);
            d->next = t[j];
            t[j] = d;
            d = next;
        }
    }
    cx->table = t;
    cx->cap = cap;
    return true;
}

static void table_insert(DimCtx *cx, Dim *d)
{
    uint32_t j = d->hash & (uint32_t)(cx->cap - 1);
    d->next = cx->table[j];
    cx->table[j] = d;
    cx->count++;
}

static bool same_node(const Dim *d, uint32_t h, DimKind k, int64_t c, Dim *const *args, int n)
{
    if (d->hash != h || d->kind != k || d->c != c || d->n != n)
        return false;
    return n == 0 || memcmp(d->args, args, (size_t)n * sizeof *args) == 0;
}

/* A failed malloc of the context's own: the arena remembers it (the dims
 * it would have made are missing, Arena.failed). Returns NULL. */
static void *oom(DimCtx *cx)
{
    cx->arena->failed = true;
    return NULL;
}

/* The one node (k, c, args); args must be canonical. NULL if out of memory. */
static Dim *intern(DimCtx *cx, DimKind k, int64_t c, Dim *const *args, int n)
{
    for (int i = 0; i < n; i++)
        if (!args[i])
            return NULL;
    uint32_t h = hash_node(k, c, args, n);
    if (cx->cap)
        for (Dim *d = cx->table[h & (uint32_t)(cx->cap - 1)]; d; d = d->next)
            if (same_node(d, h, k, c, args, n))
                return d;
    if (!table_reserve(cx))
        return NULL;
    Dim *d = arena_alloc(cx->arena, sizeof *d);
    if (!d)
        return NULL;
    if (n) {
        d->args = arena_array(cx->arena, (size_t)n, sizeof *args);
        if (!d->args)
            return NULL;
        memcpy(d->args, args, (size_t)n * sizeof *args);
        for (int i = 0; i < n; i++)
            d->symbits |= args[i]->symbits;
    }
    uint64_t size = 1;
    for (int i = 0; i < n; i++)
        size += args[i]->tsize;
    d->tsize = size > UINT32_MAX ? UINT32_MAX : (uint32_t)size;
    d->kind = k;
    d->c = c;
    d->n = n;
    d->hash = h;
    d->id = cx->count;
    table_insert(cx, d);
    return d;
}

Dim *dim_const(DimCtx *cx, int64_t c) { return intern(cx, DIM_CONST, c, NULL, 0); }

static Dim *node2(DimCtx *cx, DimKind k, Dim *a, Dim *b)
{
    Dim *args[2] = {a, b};
    return intern(cx, k, 0, args, 2);
}

/* ------------------------------------------------------------------ */
/* Symbols                                                              */

Dim *dim_sym_find(DimCtx *cx, const char *name)
{
    if (!cx->cap)
        return NULL;
    uint32_t h = hash_name(name);
    for (Dim *d = cx->table[h & (uint32_t)(cx->cap - 1)]; d; d = d->next)
        if (d->hash == h && d->kind == DIM_SYM && strcmp(d->name, name) == 0)
            return d;
    return NULL;
}

static bool syms_reserve(DimCtx *cx)
{
    if (cx->nsyms < cx->capsyms)
        return true;
    int cap = cx->capsyms ? cx->capsyms * 2 : 16;
    Dim **s = arena_array(cx->arena, (size_t)cap, sizeof *s);
    if (!s)
        return false;
    if (cx->nsyms)
        memcpy(s, cx->syms, (size_t)cx->nsyms * sizeof *s);
    cx->syms = s;
    cx->capsyms = cap;
    return true;
}

static Dim *sym_new(DimCtx *cx, const char *name, SymOrigin origin)
{
    if (!syms_reserve(cx) || !table_reserve(cx))
        return NULL;
    Dim *d = arena_alloc(cx->arena, sizeof *d);
    if (!d || !(d->name = arena_strdup(cx->arena, name)))
        return NULL;
    d->kind = DIM_SYM;
    d->tsize = 1;
    d->hash = hash_name(name);
    d->id = cx->nsyms;
    d->symbits = (uint64_t)1 << (d->id & 63);
    d->lo = origin == SYM_DATA ? 0 : 1;
    d->hi = DIM_INF;
    d->origin = origin;
    table_insert(cx, d);
    cx->syms[cx->nsyms++] = d;
    return d;
}

Dim *dim_sym(DimCtx *cx, const char *name)
{
    if (!name)
        return NULL;
    Dim *d = dim_sym_find(cx, name);
    return d ? d : sym_new(cx, name, SYM_INPUT);
}

Dim *dim_sym_fresh(DimCtx *cx, SymOrigin origin)
{
    char name[32];
    do
        snprintf(name, sizeof name, "_%d", ++cx->fresh);
    while (dim_sym_find(cx, name));
    return sym_new(cx, name, origin);
}

/* Bounds of expressions are kept in their nodes (an expression shared n
 * levels deep, min(A, max(0, A - 7)) nested, is otherwise walked 2^n
 * times); changing a symbol's bounds starts a new epoch, so that no kept
 * bound outlives the facts it came from. One counter for every context:
 * dim_sym_set is rare (import, the parser, tests). */
static _Atomic uint32_t bounds_epoch = 1;

void dim_sym_set(Dim *sym, int64_t lo, int64_t hi, SymOrigin origin)
{
    assert(sym && sym->kind == DIM_SYM);
    atomic_fetch_add_explicit(&bounds_epoch, 1, memory_order_relaxed);
    sym->lo = lo;
    sym->hi = hi;
    sym->origin = origin;
}

bool dim_ctx_copy_syms(DimCtx *to, const DimCtx *from)
{
    for (int i = 0; i < from->nsyms; i++) {
        const Dim *s = from->syms[i];
        Dim *t = sym_new(to, s->name, s->origin);
        if (!t)
            return false;
        dim_sym_set(t, s->lo, s->hi, s->origin);
    }
    to->fresh = from->fresh;
    return true;
}

Dim *dim_copy(DimCtx *to, const Dim *d, Dim **memo)
{
    if (!d)
        return NULL;
    if (d->kind == DIM_SYM)
        return d->id < to->nsyms ? to->syms[d->id] : NULL;
    if (memo[d->id])
        return memo[d->id];
    Dim *args[d->n > 0 ? d->n : 1];
    for (int i = 0; i < d->n; i++)
        if (!(args[i] = dim_copy(to, d->args[i], memo)))
            return NULL;
    return memo[d->id] = intern(to, d->kind, d->c, args, d->n);
}

/* ------------------------------------------------------------------ */
/* Order                                                                */

/* The atoms of a non-ADD dim seen as k*mono: none for a constant, the dim
 * itself (stored in *one) for an atom, the args of a MUL. */
static int atoms_of(const Dim *d, Dim *const **atoms, Dim **one)
{
    if (d->kind == DIM_MUL) {
        *atoms = d->args;
        return d->n;
    }
    if (d->kind == DIM_CONST) {
        *atoms = NULL;
        return 0;
    }
    *one = (Dim *)d;
    *atoms = one;
    return 1;
}

static int cmp64(int64_t a, int64_t b) { return (a > b) - (a < b); }

static int atom_cmp(const Dim *a, const Dim *b)
{
    if (a == b)
        return 0;
    if (a->kind != b->kind)
        return a->kind < b->kind ? -1 : 1;
    if (a->kind == DIM_SYM) {
        int r = strcmp(a->name, b->name);
        return (r > 0) - (r < 0);
    }
    int r = dim_cmp(a->args[0], b->args[0]);
    return r ? r : dim_cmp(a->args[1], b->args[1]);
}

static int64_t mono_coef(const Dim *d)
{
    return d->kind == DIM_MUL || d->kind == DIM_CONST ? d->c : 1;
}

static int mono_cmp(const Dim *a, const Dim *b)
{
    Dim *const *xa, *const *xb;
    Dim *oa, *ob;
    int na = atoms_of(a, &xa, &oa), nb = atoms_of(b, &xb, &ob);
    if (na != nb)
        return na < nb ? -1 : 1;
    for (int i = 0; i < na; i++) {
        int r = atom_cmp(xa[i], xb[i]);
        if (r)
            return r;
    }
    return cmp64(mono_coef(a), mono_coef(b));
}

int dim_cmp(const Dim *a, const Dim *b)
{
    if (a == b)
        return 0;
    bool sa = a->kind == DIM_ADD, sb = b->kind == DIM_ADD;
    if (sa != sb)
        return sa ? 1 : -1;
    if (!sa)
        return mono_cmp(a, b);
    for (int i = 0; i < a->n && i < b->n; i++) {
        int r = dim_cmp(a->args[i], b->args[i]);
        if (r)
            return r;
    }
    if (a->n != b->n)
        return a->n < b->n ? -1 : 1;
    return cmp64(a->c, b->c);
}

/* ------------------------------------------------------------------ */
/* Monos                                                                */

/* The mono of sorted atoms; n >= 1. NULL if out of memory. */
static Dim *mono_make(DimCtx *cx, Dim *const *atoms, int n)
{
    assert(n >= 1);
    return n == 1 ? atoms[0] : intern(cx, DIM_MUL, 1, atoms, n);
}

static Dim *mono_mul(DimCtx *cx, Dim *a, Dim *b)
{
    Dim *const *xa, *const *xb;
    Dim *oa, *ob;
    int na = atoms_of(a, &xa, &oa), nb = atoms_of(b, &xb, &ob);
    Dim **m = malloc((size_t)(na + nb) * sizeof *m);
    if (!m)
        return oom(cx);
    int i = 0, j = 0, n = 0;
    while (i < na || j < nb) {
        if (j == nb || (i < na && atom_cmp(xa[i], xb[j]) <= 0))
            m[n++] = xa[i++];
        else
            m[n++] = xb[j++];
    }
    Dim *r = mono_make(cx, m, n);
    free(m);
    return r;
}

/* The term k*mono as a node. */
static Dim *term_make(DimCtx *cx, int64_t k, Dim *mono)
{
    if (k == 1)
        return mono;
    Dim *const *x;
    Dim *one;
    int n = atoms_of(mono, &x, &one);
    return intern(cx, DIM_MUL, k, x, n);
}

/* ------------------------------------------------------------------ */
/* Polys: the working form of every constructor                        */

typedef struct Term {
    int64_t k; /* coefficient */
    Dim *m;    /* mono: an atom or a MUL with coefficient 1 */
} Term;

typedef struct Poly {
    int64_t c;
    Term *t;
    int n, cap;
    bool bad; /* an overflow or out of memory: the result is NULL */
} Poly;

static void poly_free(Poly *p) { free(p->t); }

static void poly_addc(Poly *p, int64_t c)
{
    if (__builtin_add_overflow(p->c, c, &p->c))
        p->bad = true;
}

static void poly_push(DimCtx *cx, Poly *p, int64_t k, Dim *m)
{
    if (!m) {
        p->bad = true;
        return;
    }
    if (p->n == p->cap) {
        int cap = p->cap ? p->cap * 2 : 8;
        Term *t = realloc(p->t, (size_t)cap * sizeof *t);
        if (!t) {
            p->bad = true;
            oom(cx);
            return;
        }
        p->t = t;
        p->cap = cap;
    }
    p->t[p->n++] = (Term){k, m};
}

/* p += scale * d. */
static void poly_from(DimCtx *cx, Poly *p, const Dim *d, int64_t scale)
{
    int64_t k;
    switch (d->kind) {
    case DIM_CONST:
        if (__builtin_mul_overflow(d->c, scale, &k))
            p->bad = true;
        else
            poly_addc(p, k);
        break;
    case DIM_ADD:
        if (__builtin_mul_overflow(d->c, scale, &k))
            p->bad = true;
        else
            poly_addc(p, k);
        for (int i = 0; i < d->n; i++)
            poly_from(cx, p, d->args[i], scale);
        break;
    case DIM_MUL:
        if (__builtin_mul_overflow(d->c, scale, &k))
            p->bad = true;
        else
            poly_push(cx, p, k, d->c == 1 ? (Dim *)d : mono_make(cx, d->args, d->n));
        break;
    default:
        poly_push(cx, p, scale, (Dim *)d);
        break;
    }
}

static int term_cmp(const void *x, const void *y)
{
    return dim_cmp(((const Term *)x)->m, ((const Term *)y)->m);
}

/* Sorts the terms, merges like monos and drops zero coefficients. */
static void poly_normalize(Poly *p)
{
    if (p->bad || p->n == 0)
        return;
    qsort(p->t, (size_t)p->n, sizeof *p->t, term_cmp);
    int n = 0;
    for (int i = 0; i < p->n; i++) {
        if (n > 0 && p->t[n - 1].m == p->t[i].m) {
            if (__builtin_add_overflow(p->t[n - 1].k, p->t[i].k, &p->t[n - 1].k))
                p->bad = true;
        } else {
            p->t[n++] = p->t[i];
        }
    }
    p->n = 0;
    for (int i = 0; i < n; i++)
        if (p->t[i].k != 0)
            p->t[p->n++] = p->t[i];
}

/* The canonical node of p (which is left normalized). */
static Dim *poly_to_dim(DimCtx *cx, Poly *p)
{
    poly_normalize(p);
    if (p->bad)
        return NULL;
    if (p->n == 0)
        return dim_const(cx, p->c);
    if (p->n == 1 && p->c == 0)
        return term_make(cx, p->t[0].k, p->t[0].m);
    Dim **terms = malloc((size_t)p->n * sizeof *terms);
    if (!terms)
        return oom(cx);
    for (int i = 0; i < p->n; i++)
        terms[i] = term_make(cx, p->t[i].k, p->t[i].m);
    Dim *r = intern(cx, DIM_ADD, p->c, terms, p->n);
    free(terms);
    return r;
}

/* out = a * b, distributing. */
static void poly_mul(DimCtx *cx, Poly *out, const Poly *a, const Poly *b)
{
    int64_t k;
    if (__builtin_mul_overflow(a->c, b->c, &out->c))
        out->bad = true;
    for (int i = 0; i < b->n; i++)
        if (a->c && !__builtin_mul_overflow(a->c, b->t[i].k, &k))
            poly_push(cx, out, k, b->t[i].m);
        else if (a->c)
            out->bad = true;
    for (int i = 0; i < a->n; i++)
        if (b->c && !__builtin_mul_overflow(b->c, a->t[i].k, &k))
            poly_push(cx, out, k, a->t[i].m);
        else if (b->c)
            out->bad = true;
    for (int i = 0; i < a->n && !out->bad; i++)
        for (int j = 0; j < b->n && !out->bad; j++) {
            if (__builtin_mul_overflow(a->t[i].k, b->t[j].k, &k))
                out->bad = true;
            else
                poly_push(cx, out, k, mono_mul(cx, a->t[i].m, b->t[j].m));
        }
}

/* gcd of g, the constant and every coefficient. */
static uint64_t poly_gcd(const Poly *p, uint64_t g)
{
    g = dim_gcd(g, uabs64(p->c));
    for (int i = 0; i < p->n; i++)
        g = dim_gcd(g, uabs64(p->t[i].k));
    return g;
}

/* Divides everything by g, which divides everything; 0 < g <= INT64_MAX. */
static void poly_divexact(Poly *p, int64_t g)
{
    p->c /= g;
    for (int i = 0; i < p->n; i++)
        p->t[i].k /= g;
}

/* ------------------------------------------------------------------ */
/* Bounds                                                               */

typedef struct Iv {
    int64_t lo, hi; /* NEG_INF / POS_INF: unknown */
} Iv;

static const Iv IV_ALL = {NEG_INF, POS_INF};

static Iv iv_add(Iv a, Iv b)
{
    Iv r;
    if (a.lo == NEG_INF || b.lo == NEG_INF || __builtin_add_overflow(a.lo, b.lo, &r.lo))
        r.lo = NEG_INF;
    if (a.hi == POS_INF || b.hi == POS_INF || __builtin_add_overflow(a.hi, b.hi, &r.hi))
        r.hi = POS_INF;
    return r;
}

/* A corner of a product: 0 times anything is 0; infinities and overflow
 * give the infinity of the product's sign. */
static int64_t ext_mul(int64_t x, int64_t y)
{
    int64_t r;
    if (x == 0 || y == 0)
        return 0;
    bool inf = x == NEG_INF || x == POS_INF || y == NEG_INF || y == POS_INF;
    if (inf || __builtin_mul_overflow(x, y, &r))
        return (x < 0) != (y < 0) ? NEG_INF : POS_INF;
    return r;
}

/* The hull of four corners; a lower bound of +inf or an upper bound of
 * -inf means the true value lies beyond int64, and widens to unknown. */
static Iv iv_hull(const int64_t p[4])
{
    Iv r = {p[0], p[0]};
    for (int i = 1; i < 4; i++) {
        r.lo = p[i] < r.lo ? p[i] : r.lo;
        r.hi = p[i] > r.hi ? p[i] : r.hi;
    }
    if (r.lo == POS_INF)
        r.lo = NEG_INF;
    if (r.hi == NEG_INF)
        r.hi = POS_INF;
    return r;
}

static Iv iv_mul(Iv a, Iv b)
{
    int64_t p[4] = {ext_mul(a.lo, b.lo), ext_mul(a.lo, b.hi), ext_mul(a.hi, b.lo),
                    ext_mul(a.hi, b.hi)};
    return iv_hull(p);
}

static Iv iv_neg(Iv a) { return iv_mul(a, (Iv){-1, -1}); }

/* A corner of floor(x/y) for y >= 1 (y may be +inf). */
static int64_t ext_floordiv(int64_t x, int64_t y)
{
    if (y == POS_INF)
        return x >= 0 ? 0 : -1;
    if (x == NEG_INF || x == POS_INF)
        return x;
    return floordiv64(x, y);
}

/* floor(a/b) is monotone in a and in b for b of one sign, so the extremes
 * are at the corners. */
static Iv iv_floordiv(Iv a, Iv b)
{
    if (b.hi <= -1)
        return iv_floordiv(iv_neg(a), iv_neg(b));
    if (b.lo < 1)
        return IV_ALL;
    int64_t p[4] = {ext_floordiv(a.lo, b.lo), ext_floordiv(a.lo, b.hi),
                    ext_floordiv(a.hi, b.lo), ext_floordiv(a.hi, b.hi)};
    return iv_hull(p);
}

static Iv iv_ceildiv(Iv a, Iv b) { return iv_neg(iv_floordiv(iv_neg(a), b)); }

/* mod(a, b) has b's sign and |mod| < |b|; it is a itself when 0 <= a < b. */
static Iv iv_mod(Iv a, Iv b)
{
    Iv r;
    r.lo = b.lo >= 0 ? 0 : b.lo == NEG_INF ? NEG_INF : b.lo + 1;
    r.hi = b.hi <= 0 ? 0 : b.hi == POS_INF ? POS_INF : b.hi - 1;
    if (b.lo >= 1 && a.lo >= 0 && a.hi < r.hi)
        r.hi = a.hi;
    if (b.hi <= -1 && a.hi <= 0 && a.lo > r.lo)
        r.lo = a.lo;
    return r;
}

static Iv bounds(const Dim *d);

static Iv bounds_fn(const Dim *d)
{
    Iv a = bounds(d->args[0]), b = bounds(d->args[1]);
    switch (d->kind) {
    case DIM_FLOORDIV:
        return iv_floordiv(a, b);
    case DIM_CEILDIV:
        return iv_ceildiv(a, b);
    case DIM_MOD:
        return iv_mod(a, b);
    case DIM_MIN:
        return (Iv){a.lo < b.lo ? a.lo : b.lo, a.hi < b.hi ? a.hi : b.hi};
    default:
        return (Iv){a.lo > b.lo ? a.lo : b.lo, a.hi > b.hi ? a.hi : b.hi};
    }
}

static Iv bounds(const Dim *d)
{
    Iv r = {d->c, d->c};
    if (d->kind == DIM_CONST)
        return r;
    if (d->kind == DIM_SYM)
        return (Iv){d->lo, d->hi};
    uint32_t epoch = atomic_load_explicit(&bounds_epoch, memory_order_relaxed);
    if (d->bepoch == epoch)
        return (Iv){d->lo, d->hi};
    switch (d->kind) {
    case DIM_ADD:
        for (int i = 0; i < d->n; i++)
            r = iv_add(r, bounds(d->args[i]));
        break;
    case DIM_MUL:
        for (int i = 0; i < d->n; i++)
            r = iv_mul(r, bounds(d->args[i]));
        break;
    default:
        r = bounds_fn(d);
        break;
    }
    Dim *m = (Dim *)d; /* the node's own cache */
    m->lo = r.lo;
    m->hi = r.hi;
    m->bepoch = epoch;
    return r;
}

void dim_bounds(const Dim *d, int64_t *lo, int64_t *hi)
{
    Iv r = bounds(d);
    *lo = r.lo;
    *hi = r.hi;
}

static Iv poly_bounds(const Poly *p)
{
    Iv r = {p->c, p->c};
    for (int i = 0; i < p->n; i++)
        r = iv_add(r, iv_mul((Iv){p->t[i].k, p->t[i].k}, bounds(p->t[i].m)));
    return r;
}

static bool nonzero(const Dim *d)
{
    Iv r = bounds(d);
    return r.lo > 0 || r.hi < 0;
}

/* Bounds of a - b, after like terms cancel: tighter than subtracting the
 * bounds of a and b when they share terms. */
/* c where u - v is the constant c, else false. */
static bool const_diff(DimCtx *cx, const Dim *u, const Dim *v, int64_t *c)
{
    Poly p = {0};
    poly_from(cx, &p, u, 1);
    poly_from(cx, &p, v, -1);
    poly_normalize(&p);
    bool ok = !p.bad && p.n == 0;
    *c = p.c;
    poly_free(&p);
    return ok;
}

/* Takes out of p each pair of terms k div(u, m) - k div(v, m), the same
 * division by the same constant m > 0 of numerators a constant c apart,
 * and returns the bounds of what they add: div(u, m) - div(v, m) lies in
 * [floor(c / m), ceil(c / m)] (so min(ceildiv(H, 2), ceildiv(H + 1, 2) - 1),
 * a ceil-mode pool's size, is the second). */
static Iv div_pairs(DimCtx *cx, Poly *p)
{
    Iv r = {0, 0};
    for (int i = 0; i < p->n; i++) {
        const Dim *x = p->t[i].m;
        if ((x->kind != DIM_FLOORDIV && x->kind != DIM_CEILDIV) || !dim_is_const(x->args[1]) || x->args[1]->c <= 0)
            continue;
        for (int j = i + 1; j < p->n && p->t[i].k; j++) {
            const Dim *y = p->t[j].m;
            int64_t c, m = x->args[1]->c;
            if (y->kind != x->kind || !dim_is(y->args[1], m) || p->t[j].k != -p->t[i].k || p->t[i].k == INT64_MIN ||
                !const_diff(cx, x->args[0], y->args[0], &c))
                continue;
            r = iv_add(r, iv_mul((Iv){p->t[i].k, p->t[i].k}, (Iv){floordiv64(c, m), ceildiv64(c, m)}));
            p->t[i].k = p->t[j].k = 0;
        }
    }
    int n = 0;
    for (int i = 0; i < p->n; i++)
        if (p->t[i].k)
            p->t[n++] = p->t[i];
    p->n = n;
    return r;
}

static Iv diff_bounds(DimCtx *cx, const Dim *a, const Dim *b)
{
    Poly p = {0};
    poly_from(cx, &p, a, 1);
    poly_from(cx, &p, b, -1);
    poly_normalize(&p);
    Iv r = IV_ALL;
    if (!p.bad) {
        Iv pairs = div_pairs(cx, &p);
        r = iv_add(poly_bounds(&p), pairs);
    }
    poly_free(&p);
    return r;
}

/* ------------------------------------------------------------------ */
/* Sums and products                                                    */

static Dim *fold(DimCtx *cx, DimKind k, int64_t a, int64_t b)
{
    int64_t r;
    return apply(k, a, b, &r) == DIM_OK ? dim_const(cx, r) : NULL;
}

static Dim *divmod(DimCtx *cx, DimKind op, Dim *a, Dim *b);
static Dim *lincomb(DimCtx *cx, Dim *a, int64_t scale_a, Dim *b, int64_t scale_b);

/* A sum R + mod(P, k) with P = -R (mod k) is R rounded up to a multiple of
 * k, k * ceildiv(R, k); R - mod(P, k) with P = R (mod k) is R rounded
 * down, k * floordiv(R, k). Padding to a multiple is written so (PyTorch's
 * Swin: pad = (7 - W % 7) % 7, then W + pad), and only the rounded form
 * says that the result divided by k is whole and at least R / k. */
static Dim *round_sum(DimCtx *cx, Dim *r)
{
    if (!r || r->kind != DIM_ADD || cx->rounding)
        return r;
    for (int i = 0; i < r->n; i++) {
        Dim *t = r->args[i], *m = t;
        int64_t sign = 1;
        if (t->kind == DIM_MUL && t->n == 1 && (t->c == 1 || t->c == -1)) {
            m = t->args[0];
            sign = t->c;
        }
        if (m->kind != DIM_MOD || m->args[1]->kind != DIM_CONST || m->args[1]->c < 2)
            continue;
        Dim *k = m->args[1];
        cx->rounding = true;
        Dim *rest = lincomb(cx, r, 1, t, -1);
        Dim *whole = rest ? lincomb(cx, rest, 1, m->args[0], sign) : NULL;
        Dim *zero = whole ? divmod(cx, DIM_MOD, whole, k) : NULL;
        Dim *q = dim_is(zero, 0) ? divmod(cx, sign > 0 ? DIM_CEILDIV : DIM_FLOORDIV, rest, k) : NULL;
        cx->rounding = false;
        if (q)
            return dim_mulc(cx, q, k->c);
    }
    return r;
}

/* scale_a*a + scale_b*b. */
static Dim *lincomb(DimCtx *cx, Dim *a, int64_t scale_a, Dim *b, int64_t scale_b)
{
    if (!a || !b)
        return NULL;
    Poly p = {0};
    poly_from(cx, &p, a, scale_a);
    poly_from(cx, &p, b, scale_b);
    Dim *r = poly_to_dim(cx, &p);
    poly_free(&p);
    return round_sum(cx, r);
}

Dim *dim_add(DimCtx *cx, Dim *a, Dim *b)
{
    if (a && b && a->kind == DIM_CONST && b->kind == DIM_CONST)
        return fold(cx, DIM_ADD, a->c, b->c);
    return lincomb(cx, a, 1, b, 1);
}

Dim *dim_sub(DimCtx *cx, Dim *a, Dim *b)
{
    int64_t r;
    if (a && b && a->kind == DIM_CONST && b->kind == DIM_CONST)
        return __builtin_sub_overflow(a->c, b->c, &r) ? NULL : dim_const(cx, r);
    return lincomb(cx, a, 1, b, -1);
}

Dim *dim_mulc(DimCtx *cx, Dim *a, int64_t c)
{
    if (!a)
        return NULL;
    Poly p = {0};
    poly_from(cx, &p, a, c);
    Dim *r = poly_to_dim(cx, &p);
    poly_free(&p);
    return r;
}

Dim *dim_neg(DimCtx *cx, Dim *a) { return dim_mulc(cx, a, -1); }

Dim *dim_addc(DimCtx *cx, Dim *a, int64_t c) { return a ? dim_add(cx, a, dim_const(cx, c)) : NULL; }

Dim *dim_mul(DimCtx *cx, Dim *a, Dim *b)
{
    if (!a || !b)
        return NULL;
    if (a->kind == DIM_CONST)
        return dim_mulc(cx, b, a->c);
    if (b->kind == DIM_CONST)
        return dim_mulc(cx, a, b->c);
    Poly pa = {0}, pb = {0}, p = {0};
    poly_from(cx, &pa, a, 1);
    poly_from(cx, &pb, b, 1);
    p.bad = pa.bad || pb.bad;
    if (!p.bad)
        poly_mul(cx, &p, &pa, &pb);
    Dim *r = poly_to_dim(cx, &p);
    poly_free(&pa);
    poly_free(&pb);
    poly_free(&p);
    return r;
}

/* ------------------------------------------------------------------ */
/* Division and mod by a constant k >= 2                                */

/* floordiv or ceildiv of n, whose gcd with k is 1 and whose constant is
 * in [0, k), by k: the atom, unless bounds or nesting decide. */
static Dim *div_rest(DimCtx *cx, DimKind op, Dim *n, int64_t k)
{
    if (!n)
        return NULL;
    if (n->kind == DIM_CONST)
        return fold(cx, op, n->c, k);
    Iv r = bounds(n);
    if (r.lo != NEG_INF && r.hi != POS_INF) {
        int64_t lo, hi;
        apply(op, r.lo, k, &lo);
        apply(op, r.hi, k, &hi);
        if (lo == hi)
            return dim_const(cx, lo);
    }
    int64_t kk;
    if (n->kind == op && n->args[1]->kind == DIM_CONST && n->args[1]->c > 0 &&
        !__builtin_mul_overflow(n->args[1]->c, k, &kk))
        return divmod(cx, op, n->args[0], dim_const(cx, kk));
    return node2(cx, op, n, dim_const(cx, k));
}

static Dim *div_poly(DimCtx *cx, DimKind op, Poly *p, int64_t k)
{
    uint64_t g = poly_gcd(p, (uint64_t)k);
    if (g > 1) {
        poly_divexact(p, (int64_t)g);
        k /= (int64_t)g;
    }
    Poly q = {0}, r = {0};
    for (int i = 0; i < p->n; i++)
        if (p->t[i].k % k == 0)
            poly_push(cx, &q, p->t[i].k / k, p->t[i].m);
        else
            poly_push(cx, &r, p->t[i].k, p->t[i].m);
    q.c = floordiv64(p->c, k);
    r.c = p->c - q.c * k;
    Dim *whole = poly_to_dim(cx, &q);
    Dim *rest = poly_to_dim(cx, &r);
    poly_free(&q);
    poly_free(&r);
    return dim_add(cx, whole, div_rest(cx, op, rest, k));
}

/* mod of n, whose coefficients are in [1, k) and constant in [0, k), by k. */
static Dim *mod_rest(DimCtx *cx, Dim *n, int64_t k)
{
    if (!n)
        return NULL;
    if (n->kind == DIM_CONST)
        return fold(cx, DIM_MOD, n->c, k);
    Iv r = bounds(n);
    int64_t base;
    if (r.lo != NEG_INF && r.hi != POS_INF && floordiv64(r.lo, k) == floordiv64(r.hi, k) &&
        !__builtin_mul_overflow(floordiv64(r.lo, k), k, &base))
        return dim_addc(cx, n, -base);
    if (n->kind == DIM_MOD && n->args[1]->kind == DIM_CONST && n->args[1]->c > 0 &&
        n->args[1]->c % k == 0)
        return divmod(cx, DIM_MOD, n->args[0], dim_const(cx, k));
    return node2(cx, DIM_MOD, n, dim_const(cx, k));
}

static Dim *mod_poly(DimCtx *cx, Poly *p, int64_t k)
{
    for (int i = 0; i < p->n; i++)
        p->t[i].k = floormod64(p->t[i].k, k);
    p->c = floormod64(p->c, k);
    uint64_t g = poly_gcd(p, (uint64_t)k);
    if (g > 1) {
        poly_divexact(p, (int64_t)g);
        k /= (int64_t)g;
    }
    return dim_mulc(cx, mod_rest(cx, poly_to_dim(cx, p), k), (int64_t)g);
}

/* a with every mod(x, c) in its sums and products whose c is a multiple
 * of k replaced by x: the same value mod k (mod(7 - mod(W, 7), 7) is
 * mod(-W, 7)). */
static Dim *strip_mod(DimCtx *cx, Dim *a, int64_t k)
{
    if (!a)
        return NULL;
    switch (a->kind) {
    case DIM_MOD:
        if (a->args[1]->kind == DIM_CONST && a->args[1]->c != 0 && a->args[1]->c % k == 0)
            return strip_mod(cx, a->args[0], k);
        return a;
    case DIM_ADD: {
        Dim *r = dim_const(cx, a->c);
        for (int i = 0; i < a->n; i++)
            r = dim_add(cx, r, strip_mod(cx, a->args[i], k));
        return r;
    }
    case DIM_MUL: {
        Dim *r = dim_const(cx, a->c);
        for (int i = 0; i < a->n; i++)
            r = dim_mul(cx, r, strip_mod(cx, a->args[i], k));
        return r;
    }
    default:
        return a;
    }
}

static Dim *div_const(DimCtx *cx, DimKind op, Dim *a, int64_t k)
{
    if (k == 0)
        return NULL;
    if (a->kind == DIM_CONST)
        return fold(cx, op, a->c, k);
    if (k == 1 || k == -1)
        return op == DIM_MOD ? dim_const(cx, 0) : dim_mulc(cx, a, k);
    if (k < 0)
        return node2(cx, op, a, dim_const(cx, k));
    if (op == DIM_MOD) {
        a = strip_mod(cx, a, k);
        if (!a)
            return NULL;
        if (a->kind == DIM_CONST)
            return fold(cx, op, a->c, k);
    }
    Poly p = {0};
    poly_from(cx, &p, a, 1);
    poly_normalize(&p);
    Dim *r = NULL;
    if (!p.bad)
        r = op == DIM_MOD ? mod_poly(cx, &p, k) : div_poly(cx, op, &p, k);
    poly_free(&p);
    return r;
}

/* ------------------------------------------------------------------ */
/* Division and mod by a symbolic divisor                               */

static void atoms_intersect(Dim **m, int *nm, const Dim *mono)
{
    Dim *const *x;
    Dim *one;
    int nx = atoms_of(mono, &x, &one);
    int i = 0, j = 0, n = 0;
    while (i < *nm && j < nx) {
        int r = atom_cmp(m[i], x[j]);
        if (r == 0) {
            m[n++] = m[i];
            i++;
            j++;
        } else if (r < 0) {
            i++;
        } else {
            j++;
        }
    }
    *nm = n;
}

/* The atoms (with multiplicity, sorted) common to every term of a and b
 * and known not to be 0; a malloc'd array, or NULL when there are none. */
static Dim **common_atoms(DimCtx *cx, const Poly *a, const Poly *b, int *nm)
{
    *nm = 0;
    if (a->c || b->c || !a->n || !b->n)
        return NULL;
    Dim *const *x;
    Dim *one;
    int nx = atoms_of(a->t[0].m, &x, &one);
    Dim **m = malloc((size_t)nx * sizeof *m);
    if (!m)
        return oom(cx);
    for (int i = 0; i < nx; i++)
        if (nonzero(x[i]))
            m[(*nm)++] = x[i];
    for (int i = 1; i < a->n; i++)
        atoms_intersect(m, nm, a->t[i].m);
    for (int i = 0; i < b->n; i++)
        atoms_intersect(m, nm, b->t[i].m);
    if (*nm == 0) {
        free(m);
        return NULL;
    }
    return m;
}

/* p / (g * m), exactly. */
static Dim *poly_cancel(DimCtx *cx, const Poly *p, int64_t g, Dim *const *m, int nm)
{
    Poly out = {.c = p->c / g};
    for (int i = 0; i < p->n && !out.bad; i++) {
        Dim *const *x;
        Dim *one;
        int nx = atoms_of(p->t[i].m, &x, &one), n = 0, j = 0;
        Dim **keep = malloc((size_t)nx * sizeof *keep);
        if (!keep) {
            out.bad = true;
            oom(cx);
            break;
        }
        for (int l = 0; l < nx; l++) {
            if (j < nm && x[l] == m[j])
                j++;
            else
                keep[n++] = x[l];
        }
        if (n == 0)
            poly_addc(&out, p->t[i].k / g);
        else
            poly_push(cx, &out, p->t[i].k / g, mono_make(cx, keep, n));
        free(keep);
    }
    Dim *r = poly_to_dim(cx, &out);
    poly_free(&out);
    return r;
}

/* Cancels the common factor g*m of a and b; *done is false when there is
 * none. For mod, the factor multiplies the result back. */
static Dim *div_cancel(DimCtx *cx, DimKind op, Dim *a, Dim *b, bool *done)
{
    Poly pa = {0}, pb = {0};
    poly_from(cx, &pa, a, 1);
    poly_from(cx, &pb, b, 1);
    Dim *r = NULL;
    *done = false;
    if (!pa.bad && !pb.bad) {
        uint64_t ug = poly_gcd(&pb, poly_gcd(&pa, 0));
        int64_t g = ug > 1 && ug <= INT64_MAX ? (int64_t)ug : 1;
        int nm;
        Dim **m = common_atoms(cx, &pa, &pb, &nm);
        if (g > 1 || nm > 0) {
            *done = true;
            r = divmod(cx, op, poly_cancel(cx, &pa, g, m, nm), poly_cancel(cx, &pb, g, m, nm));
            if (op == DIM_MOD && r) {
                Dim *f = dim_const(cx, g);
                for (int i = 0; i < nm; i++)
                    f = dim_mul(cx, f, m[i]);
                r = dim_mul(cx, r, f);
            }
        }
        free(m);
    }
    if (pa.bad || pb.bad)
        *done = true;
    poly_free(&pa);
    poly_free(&pb);
    return r;
}

static Dim *div_sym(DimCtx *cx, DimKind op, Dim *a, Dim *b)
{
    bool nz = nonzero(b);
    if (nz && dim_is(a, 0))
        return a;
    if (nz && a == b)
        return dim_const(cx, op == DIM_MOD ? 0 : 1);
    bool done;
    Dim *r = div_cancel(cx, op, a, b, &done);
    if (done)
        return r;
    Iv x = bounds(a), gap = diff_bounds(cx, b, a);
    if (op != DIM_CEILDIV && x.lo >= 0 && gap.lo >= 1)
        return op == DIM_MOD ? a : dim_const(cx, 0);
    if (op == DIM_CEILDIV && x.lo >= 1 && gap.lo >= 0)
        return dim_const(cx, 1);
    return node2(cx, op, a, b);
}

static Dim *divmod(DimCtx *cx, DimKind op, Dim *a, Dim *b)
{
    if (!a || !b)
        return NULL;
    if (b->kind == DIM_CONST)
        return div_const(cx, op, a, b->c);
    return div_sym(cx, op, a, b);
}

Dim *dim_floordiv(DimCtx *cx, Dim *a, Dim *b) { return divmod(cx, DIM_FLOORDIV, a, b); }
Dim *dim_ceildiv(DimCtx *cx, Dim *a, Dim *b) { return divmod(cx, DIM_CEILDIV, a, b); }
Dim *dim_mod(DimCtx *cx, Dim *a, Dim *b) { return divmod(cx, DIM_MOD, a, b); }

/* ------------------------------------------------------------------ */
/* min and max                                                          */

/* -1 if a <= b for every value of the symbols, 1 if a >= b, else 0. */
/* d is k * op(x, k) for a constant k >= 1 (op floordiv or ceildiv). */
static bool is_round(const Dim *d, DimKind op, const Dim *x)
{
    return d->kind == DIM_MUL && d->n == 1 && d->c >= 1 && d->args[0]->kind == op && d->args[0]->args[0] == x &&
           dim_is(d->args[0]->args[1], d->c);
}

static int dim_order(DimCtx *cx, Dim *a, Dim *b)
{
    /* x rounded up to a multiple is at least x, rounded down at most x:
     * min(W, 7 * ceildiv(W, 7)) is W (a padded dim sliced back), which
     * interval arithmetic on the difference cannot see */
    if (is_round(b, DIM_CEILDIV, a) || is_round(a, DIM_FLOORDIV, b))
        return -1;
    if (is_round(a, DIM_CEILDIV, b) || is_round(b, DIM_FLOORDIV, a))
        return 1;
    Iv x = bounds(a), y = bounds(b), d = diff_bounds(cx, a, b);
    if (x.hi <= y.lo || d.hi <= 0)
        return -1;
    if (y.hi <= x.lo || d.lo >= 0)
        return 1;
    return 0;
}

static bool has_arg(const Dim *d, DimKind k, const Dim *x)
{
    return d->kind == k && (d->args[0] == x || d->args[1] == x);
}

static Dim *minmax(DimCtx *cx, DimKind op, Dim *a, Dim *b)
{
    if (!a || !b)
        return NULL;
    if (a->kind == DIM_CONST && b->kind == DIM_CONST)
        return fold(cx, op, a->c, b->c);
    if (a == b)
        return a;
    if (dim_cmp(a, b) > 0) {
        Dim *t = a;
        a = b;
        b = t;
    }
    int ord = dim_order(cx, a, b);
    if (ord)
        return (ord < 0) == (op == DIM_MIN) ? a : b;
    DimKind dual = op == DIM_MIN ? DIM_MAX : DIM_MIN;
    if (has_arg(b, op, a) || has_arg(a, dual, b))
        return b; /* min(a, min(a, c)) = min(a, c); min(max(b, c), b) = b */
    if (has_arg(a, op, b) || has_arg(b, dual, a))
        return a;
    return node2(cx, op, a, b);
}

Dim *dim_min(DimCtx *cx, Dim *a, Dim *b) { return minmax(cx, DIM_MIN, a, b); }
Dim *dim_max(DimCtx *cx, Dim *a, Dim *b) { return minmax(cx, DIM_MAX, a, b); }

/* ------------------------------------------------------------------ */
/* Evaluation                                                           */

/* Evaluates the canonical form term by term, so a sum whose value fits may
 * still report DIM_OVERFLOW when one of its terms does not (2*S - 1 at
 * S = 2^62). */
DimEvalStatus dim_eval(const Dim *d, const DimEnv *env, int64_t *out)
{
    int64_t acc = d->c, x, y;
    DimEvalStatus s;
    switch (d->kind) {
    case DIM_CONST:
        break;
    case DIM_SYM:
        if (!env || d->id >= env->n || (env->bound && !env->bound[d->id]))
            return DIM_UNBOUND;
        acc = env->val[d->id];
        break;
    case DIM_ADD:
    case DIM_MUL:
        for (int i = 0; i < d->n; i++) {
            if ((s = dim_eval(d->args[i], env, &x)) != DIM_OK)
                return s;
            if ((s = apply(d->kind, acc, x, &acc)) != DIM_OK)
                return s;
        }
        break;
    default:
        if ((s = dim_eval(d->args[0], env, &x)) != DIM_OK ||
            (s = dim_eval(d->args[1], env, &y)) != DIM_OK)
            return s;
        if ((s = apply(d->kind, x, y, &acc)) != DIM_OK)
            return s;
        break;
    }
    *out = acc;
    return DIM_OK;
}

const char *dim_eval_status_str(DimEvalStatus s)
{
    switch (s) {
    case DIM_OK:
        return "ok";
    case DIM_UNBOUND:
        return "unbound symbol";
    case DIM_OVERFLOW:
        return "integer overflow";
    case DIM_DIVZERO:
        return "division by zero";
    }
    return "unknown status";
}

/* ------------------------------------------------------------------ */
/* Printing                                                             */

typedef struct Out {
    FILE *f;    /* or */
    char *buf;  /* size bytes, always NUL-terminated */
    size_t size;
    size_t len; /* full length so far */
} Out;

static void out_str(Out *o, const char *s)
{
    size_t n = strlen(s);
    if (o->f) {
        fputs(s, o->f);
    } else if (o->size && o->len < o->size - 1) {
        size_t room = o->size - 1 - o->len;
        memcpy(o->buf + o->len, s, n < room ? n : room);
    }
    o->len += n;
}

/* INT64_MIN has no literal: "-9223372036854775808" would parse as the
 * negation of an out-of-range integer. */
static void out_int(Out *o, int64_t v)
{
    char s[32];
    if (v == INT64_MIN) {
        out_str(o, "(-9223372036854775807 - 1)");
        return;
    }
    snprintf(s, sizeof s, "%" PRId64, v);
    out_str(o, s);
}

static void print_dim(Out *o, const Dim *d);

/* A term; after the first, with its sign as " + " or " - ". */
static void print_term(Out *o, const Dim *t, bool first)
{
    int64_t k = t->kind == DIM_MUL ? t->c : 1;
    if (!first) {
        out_str(o, k < 0 && k != INT64_MIN ? " - " : " + ");
        if (k < 0 && k != INT64_MIN)
            k = -k;
    }
    if (k == -1)
        out_str(o, "-");
    else if (k != 1) {
        out_int(o, k);
        out_str(o, "*");
    }
    Dim *const *x;
    Dim *one;
    int n = atoms_of(t, &x, &one);
    for (int i = 0; i < n; i++) {
        if (i)
            out_str(o, "*");
        print_dim(o, x[i]);
    }
}

static const char *fn_name(DimKind k)
{
    switch (k) {
    case DIM_FLOORDIV:
        return "floordiv";
    case DIM_CEILDIV:
        return "ceildiv";
    case DIM_MOD:
        return "mod";
    case DIM_MIN:
        return "min";
    default:
        return "max";
    }
}

static void print_dim(Out *o, const Dim *d)
{
    if (!d) {
        out_str(o, "<null>");
        return;
    }
    switch (d->kind) {
    case DIM_CONST:
        out_int(o, d->c);
        break;
    case DIM_SYM:
        out_str(o, d->name);
        break;
    case DIM_MUL:
        print_term(o, d, true);
        break;
    case DIM_ADD:
        for (int i = 0; i < d->n; i++)
            print_term(o, d->args[i], i == 0);
        if (d->c > 0 || d->c == INT64_MIN) {
            out_str(o, " + ");
            out_int(o, d->c);
        } else if (d->c < 0) {
            out_str(o, " - ");
            out_int(o, -d->c);
        }
        break;
    default:
        out_str(o, fn_name(d->kind));
        out_str(o, "(");
        print_dim(o, d->args[0]);
        out_str(o, ", ");
        print_dim(o, d->args[1]);
        out_str(o, ")");
        break;
    }
}

void dim_print(FILE *f, const Dim *d)
{
    Out o = {.f = f};
    print_dim(&o, d);
}

int dim_snprint(char *buf, size_t size, const Dim *d)
{
    Out o = {.buf = buf, .size = size};
    print_dim(&o, d);
    if (size)
        buf[o.len < size ? o.len : size - 1] = '\0';
    return (int)o.len;
}
