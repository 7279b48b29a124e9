/*
 * test_dim.c — symbolic dimensions: canonical forms as pointer identities,
 * printing, evaluation and its errors, interning, bounds, and a randomized
 * check that canonicalization never changes a value and that printed text
 * parses back to the same pointer.
 */
#include "ir/ir.h"
#include "tests/unit/check.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static Arena arena;
static DimCtx cx_;
static DimCtx *cx = &cx_;
static Dim *S, *T, *B, *N, *D;

static Dim *C(int64_t c) { return dim_const(cx, c); }
static Dim *add(Dim *a, Dim *b) { return dim_add(cx, a, b); }
static Dim *sub(Dim *a, Dim *b) { return dim_sub(cx, a, b); }
static Dim *mul(Dim *a, Dim *b) { return dim_mul(cx, a, b); }
static Dim *addc(Dim *a, int64_t c) { return dim_addc(cx, a, c); }
static Dim *mulc(Dim *a, int64_t c) { return dim_mulc(cx, a, c); }
static Dim *fdiv(Dim *a, Dim *b) { return dim_floordiv(cx, a, b); }
static Dim *cdiv(Dim *a, Dim *b) { return dim_ceildiv(cx, a, b); }
static Dim *mod(Dim *a, Dim *b) { return dim_mod(cx, a, b); }
static Dim *dmin(Dim *a, Dim *b) { return dim_min(cx, a, b); }
static Dim *dmax(Dim *a, Dim *b) { return dim_max(cx, a, b); }

static bool prints(const Dim *d, const char *want)
{
    char buf[256];
    dim_snprint(buf, sizeof buf, d);
    if (strcmp(buf, want) == 0)
        return true;
    fprintf(stderr, "  printed \"%s\", want \"%s\"\n", buf, want);
    return false;
}

/* ------------------------------------------------------------------ */
/* A parser for the text grammar, to check the round trip:
 *   dim := term (('+'|'-') term)* ; term := factor ('*' factor)*
 *   factor := INT | NAME | '-' factor | '(' dim ')' | fn '(' dim ',' dim ')' */

static const char *pp;

static void skip_ws(void)
{
    while (*pp == ' ')
        pp++;
}

static Dim *parse_dim(void);

static Dim *parse_fn(const char *name, size_t n)
{
    static const char *names[] = {"floordiv", "ceildiv", "mod", "min", "max"};
    static Dim *(*const fns[])(Dim *, Dim *) = {fdiv, cdiv, mod, dmin, dmax};
    pp++;
    Dim *a = parse_dim();
    skip_ws();
    if (*pp++ != ',')
        return NULL;
    Dim *b = parse_dim();
    skip_ws();
    if (*pp++ != ')')
        return NULL;
    for (int i = 0; i < 5; i++)
        if (strlen(names[i]) == n && strncmp(names[i], name, n) == 0)
            return fns[i](a, b);
    return NULL;
}

static Dim *parse_factor(void)
{
    skip_ws();
    if (*pp == '-') {
        pp++;
        return dim_neg(cx, parse_factor());
    }
    if (*pp == '(') {
        pp++;
        Dim *d = parse_dim();
        skip_ws();
        return *pp++ == ')' ? d : NULL;
    }
    if (*pp >= '0' && *pp <= '9') {
        char *end;
        int64_t v = strtoll(pp, &end, 10);
        pp = end;
        return C(v);
    }
    const char *name = pp;
    while (*pp == '_' || (*pp >= 'a' && *pp <= 'z') || (*pp >= 'A' && *pp <= 'Z') ||
           (*pp >= '0' && *pp <= '9'))
        pp++;
    size_t n = (size_t)(pp - name);
    if (n == 0)
        return NULL;
    if (*pp == '(')
        return parse_fn(name, n);
    char buf[64];
    snprintf(buf, sizeof buf, "%.*s", (int)n, name);
    return dim_sym_find(cx, buf);
}

static Dim *parse_term(void)
{
    Dim *d = parse_factor();
    for (skip_ws(); *pp == '*'; skip_ws()) {
        pp++;
        d = mul(d, parse_factor());
    }
    return d;
}

static Dim *parse_dim(void)
{
    Dim *d = parse_term();
    for (skip_ws(); *pp == '+' || *pp == '-'; skip_ws()) {
        char op = *pp++;
        Dim *t = parse_term();
        d = op == '+' ? add(d, t) : sub(d, t);
    }
    return d;
}

static Dim *parse(const char *s)
{
    pp = s;
    Dim *d = parse_dim();
    skip_ws();
    return *pp ? NULL : d;
}

static bool round_trips(const Dim *d)
{
    char buf[4096];
    if (dim_snprint(buf, sizeof buf, d) >= (int)sizeof buf)
        return true;
    Dim *e = parse(buf);
    if (e == d)
        return true;
    char back[4096];
    dim_snprint(back, sizeof back, e);
    fprintf(stderr, "  \"%s\" parses back as \"%s\"\n", buf, back);
    return false;
}

/* ------------------------------------------------------------------ */
/* The canonical-form invariants of dim.c, checked node by node.       */

static bool is_atom(const Dim *d) { return d->kind != DIM_CONST && d->kind != DIM_ADD && d->kind != DIM_MUL; }

static bool canonical(const Dim *d)
{
    switch (d->kind) {
    case DIM_CONST:
    case DIM_SYM:
        return true;
    case DIM_MUL:
        if (d->n < 1 || d->c == 0 || (d->n == 1 && d->c == 1))
            return false;
        for (int i = 0; i < d->n; i++)
            if (!is_atom(d->args[i]) || !canonical(d->args[i]) ||
                (i && dim_cmp(d->args[i - 1], d->args[i]) > 0))
                return false;
        return true;
    case DIM_ADD:
        if (d->n < 1 || (d->n == 1 && d->c == 0))
            return false;
        for (int i = 0; i < d->n; i++)
            if (d->args[i]->kind == DIM_ADD || d->args[i]->kind == DIM_CONST ||
                !canonical(d->args[i]) || (i && dim_cmp(d->args[i - 1], d->args[i]) >= 0))
                return false;
        return true;
    default:
        return d->n == 2 && canonical(d->args[0]) && canonical(d->args[1]);
    }
}

/* ------------------------------------------------------------------ */

static void setup(void)
{
    arena_init(&arena);
    dim_ctx_init(cx, &arena);
    S = dim_sym(cx, "S");
    T = dim_sym(cx, "T");
    B = dim_sym(cx, "B");
    N = dim_sym(cx, "N");
    dim_sym_set(N, -8, 8, SYM_USER);
    D = dim_sym(cx, "D");
    dim_sym_set(D, 0, DIM_INF, SYM_DATA);
}

static void test_symbols(void)
{
    CHECK(dim_sym(cx, "S") == S);
    CHECK(dim_sym_find(cx, "T") == T);
    CHECK(dim_sym_find(cx, "nope") == NULL);
    CHECK(S->kind == DIM_SYM && S->lo == 1 && S->hi == DIM_INF && S->origin == SYM_INPUT);
    CHECK(cx->nsyms == 5 && cx->syms[0] == S && S->id == 0 && D->id == 4);
    Dim *f1 = dim_sym_fresh(cx, SYM_DERIVED);
    CHECK(prints(f1, "_1") && f1->lo == 1 && f1->origin == SYM_DERIVED);
    Dim *taken = dim_sym(cx, "_2");
    Dim *f3 = dim_sym_fresh(cx, SYM_DATA);
    CHECK(f3 != taken && prints(f3, "_3") && f3->lo == 0 && f3->hi == DIM_INF);
    CHECK(f3->id == cx->nsyms - 1 && cx->syms[f3->id] == f3);
}

static void test_sums_products(void)
{
    CHECK(add(mul(S, C(2)), S) == mulc(S, 3));
    CHECK(add(S, C(0)) == S);
    CHECK(mul(S, C(1)) == S);
    CHECK(mul(S, C(0)) == C(0));
    CHECK(sub(S, S) == C(0));
    CHECK(dim_neg(cx, dim_neg(cx, S)) == S);
    CHECK(sub(C(0), S) == mulc(S, -1));
    CHECK(add(S, T) == add(T, S));
    CHECK(mul(mul(S, T), B) == mul(B, mul(T, S)));
    CHECK(add(addc(S, 1), T) == addc(add(T, S), 1));
    CHECK(mul(addc(S, 1), addc(S, -1)) == addc(mul(S, S), -1));
    CHECK(mul(add(S, T), sub(S, T)) == sub(mul(S, S), mul(T, T)));
    CHECK(mul(add(S, C(2)), C(3)) == add(mulc(S, 3), C(6)));
    CHECK(sub(mul(add(S, T), add(S, T)), mul(S, S)) == add(mulc(mul(S, T), 2), mul(T, T)));
    CHECK(add(mulc(mul(B, S), 768), mulc(mul(S, B), -768)) == C(0));
    CHECK(add(C(2), C(3)) == C(5) && mul(C(-4), C(3)) == C(-12));
    CHECK(mulc(S, 1)->kind == DIM_SYM);
    Dim *sum = add(add(mul(S, T), mulc(S, 2)), addc(T, 1));
    CHECK(canonical(sum) && sum->kind == DIM_ADD && sum->n == 3 && sum->c == 1);
}

static void test_division(void)
{
    CHECK(fdiv(mulc(S, 4), C(2)) == mulc(S, 2));
    CHECK(mod(mulc(S, 8), C(4)) == C(0));
    CHECK(fdiv(S, C(1)) == S && cdiv(S, C(1)) == S && mod(S, C(1)) == C(0));
    CHECK(fdiv(N, C(-1)) == dim_neg(cx, N) && mod(N, C(-1)) == C(0));
    CHECK(fdiv(add(mulc(S, 4), T), C(4)) == add(S, fdiv(T, C(4))));
    CHECK(fdiv(addc(mulc(S, 4), 6), C(4)) == addc(S, 1));
    CHECK(fdiv(addc(add(mulc(S, 4), T), 6), C(4)) == add(addc(S, 1), fdiv(addc(T, 2), C(4))));
    CHECK(fdiv(addc(mulc(S, 4), -1), C(4)) == addc(S, -1));
    CHECK(fdiv(mulc(S, -4), C(2)) == mulc(S, -2));
    CHECK(fdiv(addc(mulc(S, 2), 2), C(4)) == fdiv(addc(S, 1), C(2)));
    CHECK(fdiv(addc(mulc(S, 2), 1), C(2)) == S);
    CHECK(cdiv(addc(mulc(S, 2), 1), C(2)) == addc(S, 1));
    CHECK(cdiv(addc(S, 4), C(4)) == addc(cdiv(S, C(4)), 1));
    CHECK(cdiv(S, C(2))->kind == DIM_CEILDIV);
    CHECK(fdiv(fdiv(S, C(2)), C(3)) == fdiv(S, C(6)));
    CHECK(cdiv(cdiv(S, C(2)), C(3)) == cdiv(S, C(6)));
    CHECK(mod(addc(S, 4), C(4)) == mod(S, C(4)));
    CHECK(mod(mulc(S, 5), C(4)) == mod(S, C(4)));
    CHECK(mod(mulc(S, -1), C(4)) == mod(mulc(S, 3), C(4)));
    CHECK(mod(addc(mulc(S, 6), 2), C(4)) == mulc(mod(addc(S, 1), C(2)), 2));
    CHECK(mod(addc(mulc(S, 2), 1), C(2)) == C(1));
    CHECK(mod(mod(S, C(8)), C(4)) == mod(S, C(4)));
    CHECK(mod(mod(S, C(4)), C(8)) == mod(S, C(4)));
    CHECK(fdiv(mulc(mul(B, S), 768), mul(B, S)) == C(768));
    CHECK(fdiv(mulc(mul(B, S), 768), C(768)) == mul(B, S));
    CHECK(fdiv(mul(mulc(B, 768), S), mulc(B, 2)) == mulc(S, 384));
    CHECK(mod(mul(S, T), S) == C(0));
    CHECK(fdiv(mul(S, T), mul(S, S)) == fdiv(T, S));
    CHECK(fdiv(mulc(S, 6), mulc(T, 4)) == fdiv(mulc(S, 3), mulc(T, 2)));
    CHECK(mod(mulc(mul(S, T), 6), mulc(S, 4)) == mul(mulc(S, 2), mod(T, C(2))));
    CHECK(fdiv(S, S) == C(1) && mod(S, S) == C(0) && cdiv(S, S) == C(1));
    CHECK(fdiv(addc(S, 1), addc(S, 1)) == C(1));
    CHECK(fdiv(D, D)->kind == DIM_FLOORDIV); /* D may be 0 */
    CHECK(fdiv(C(0), S) == C(0) && mod(C(0), S) == C(0));
    CHECK(fdiv(C(0), D)->kind == DIM_FLOORDIV);
    CHECK(fdiv(S, addc(S, 1)) == C(0) && mod(S, addc(S, 1)) == S);
    CHECK(fdiv(N, C(2))->kind == DIM_FLOORDIV);
    CHECK(fdiv(N, C(-2))->kind == DIM_FLOORDIV);
    Dim *small = dim_sym(cx, "small");
    dim_sym_set(small, 1, 3, SYM_USER);
    CHECK(fdiv(small, C(4)) == C(0) && mod(small, C(4)) == small);
    CHECK(mod(addc(small, 4), C(4)) == small && fdiv(addc(small, 4), C(4)) == C(1));
    CHECK(cdiv(small, C(4)) == C(1));
    /* a mod inside a mod by a divisor of its own drops out: PyTorch's
     * pad = (7 - W % 7) % 7 is mod(-W, 7) */
    CHECK(mod(sub(C(7), mod(S, C(7))), C(7)) == mod(mulc(S, 6), C(7)));
    CHECK(mod(mul(mod(S, C(8)), T), C(4)) == mod(mul(S, T), C(4)));
    CHECK(mod(mod(S, C(6)), C(4))->kind == DIM_MOD && mod(mod(S, C(6)), C(4))->args[0]->kind == DIM_MOD);
    /* rounding up and down to a multiple: W + pad is 7 * ceildiv(W, 7) */
    Dim *pad = mod(sub(C(7), mod(S, C(7))), C(7));
    CHECK(add(S, pad) == mulc(cdiv(S, C(7)), 7));
    CHECK(sub(S, mod(S, C(4))) == mulc(fdiv(S, C(4)), 4));
    CHECK(add(addc(T, 3), mod(mulc(addc(T, 3), -1), C(8))) == mulc(cdiv(addc(T, 3), C(8)), 8));
    CHECK(add(S, mod(S, C(7)))->kind == DIM_ADD);      /* not a rounding */
    CHECK(add(T, mod(mulc(S, 6), C(7)))->kind == DIM_ADD); /* another dim's pad */
    CHECK(fdiv(add(S, pad), C(7)) == cdiv(S, C(7)));
}

static void test_minmax(void)
{
    CHECK(dmin(S, S) == S);
    CHECK(dmin(S, T) == dmin(T, S) && dmax(S, T) == dmax(T, S));
    CHECK(dmin(addc(S, 1), S) == S && dmax(addc(S, 1), S) == addc(S, 1));
    CHECK(dmin(S, C(0)) == C(0) && dmax(S, C(1)) == S && dmax(C(0), S) == S);
    CHECK(dmin(D, C(0)) == C(0) && dmax(D, C(0)) == D);
    CHECK(dmin(S, dmin(S, T)) == dmin(S, T) && dmin(dmin(T, S), S) == dmin(S, T));
    CHECK(dmin(S, dmax(S, T)) == S && dmax(dmin(S, T), S) == S);
    CHECK(dmin(N, C(9)) == N && dmax(N, C(-8)) == N && dmin(N, C(7))->kind == DIM_MIN);
    CHECK(dmin(mul(S, T), C(0)) == C(0) && dmax(mul(S, T), C(1)) == mul(S, T));
    CHECK(dmin(C(3), C(-2)) == C(-2) && dmax(C(3), C(-2)) == C(3));
    /* divisions by one constant of numerators a constant apart: a
     * ceil-mode pool's min(ceildiv(S, 2), ceildiv(S + 1, 2) - 1) */
    Dim *pool = addc(cdiv(addc(S, 1), C(2)), -1);
    CHECK(dmin(cdiv(S, C(2)), pool) == pool && dmax(cdiv(S, C(2)), pool) == cdiv(S, C(2)));
    CHECK(dmax(fdiv(S, C(3)), fdiv(addc(S, 5), C(3))) == fdiv(addc(S, 5), C(3)));
    CHECK(dmin(fdiv(S, C(3)), fdiv(addc(S, 2), C(3))) == fdiv(S, C(3))); /* 0 or 1 apart */
    /* a dim against itself rounded to a multiple (a padded dim sliced back) */
    Dim *up = mulc(cdiv(S, C(7)), 7), *down = mulc(fdiv(T, C(4)), 4);
    CHECK(dmin(S, up) == S && dmax(up, S) == up);
    CHECK(dmin(T, down) == down && dmax(down, T) == T);
    CHECK(dmin(T, up)->kind == DIM_MIN);
    CHECK(dmin(fdiv(S, C(4)), fdiv(T, C(4)))->kind == DIM_MIN);            /* no constant apart */
}

static void test_folding(void)
{
    CHECK(fdiv(C(-7), C(2)) == C(-4) && fdiv(C(7), C(-2)) == C(-4));
    CHECK(cdiv(C(-7), C(2)) == C(-3) && cdiv(C(7), C(2)) == C(4));
    CHECK(mod(C(-7), C(2)) == C(1) && mod(C(7), C(-2)) == C(-1) && mod(C(-8), C(4)) == C(0));
    CHECK(add(C(INT64_MAX), C(1)) == NULL);
    CHECK(sub(C(INT64_MIN), C(1)) == NULL && sub(C(-1), C(INT64_MIN)) == C(INT64_MAX));
    CHECK(mul(C((int64_t)1 << 62), C(4)) == NULL);
    CHECK(fdiv(C(INT64_MIN), C(-1)) == NULL);
    CHECK(dim_neg(cx, C(INT64_MIN)) == NULL);
    CHECK(mulc(mulc(S, INT64_MAX), 2) == NULL);
    CHECK(add(mulc(S, INT64_MAX), S) == NULL);
    CHECK(fdiv(S, C(0)) == NULL && mod(S, C(0)) == NULL && cdiv(C(4), C(0)) == NULL);
    CHECK(add(NULL, S) == NULL && fdiv(S, NULL) == NULL && dmin(NULL, S) == NULL);
}

static void test_printing(void)
{
    CHECK(prints(mulc(S, 3), "3*S"));
    CHECK(prints(addc(S, 1), "S + 1") && prints(addc(S, -1), "S - 1"));
    CHECK(prints(mulc(mul(S, B), 768), "768*B*S"));
    CHECK(prints(dim_neg(cx, S), "-S") && prints(sub(S, mulc(T, 3)), "S - 3*T"));
    CHECK(prints(sub(T, mulc(S, 3)), "-3*S + T") && prints(sub(C(1), S), "-S + 1"));
    CHECK(prints(add(add(mul(S, T), mulc(S, 2)), addc(T, 1)), "2*S + T + S*T + 1"));
    CHECK(prints(mul(S, S), "S*S") && prints(sub(C(0), mul(T, S)), "-S*T"));
    CHECK(prints(fdiv(S, C(2)), "floordiv(S, 2)") && prints(cdiv(S, C(2)), "ceildiv(S, 2)"));
    CHECK(prints(mod(S, C(4)), "mod(S, 4)") && prints(dmin(T, S), "min(S, T)"));
    CHECK(prints(dmax(T, addc(S, 1)), "max(T, S + 1)"));
    CHECK(prints(addc(add(S, fdiv(T, C(4))), 1), "S + floordiv(T, 4) + 1"));
    CHECK(prints(fdiv(addc(S, -1), C(4)), "floordiv(S + 3, 4) - 1"));
    CHECK(prints(mod(addc(S, -1), C(4)), "mod(S + 3, 4)"));
    CHECK(prints(cdiv(addc(mulc(S, 8), 10), C(4)), "2*S + 3"));
    CHECK(prints(cdiv(addc(mulc(S, 3), 10), C(4)), "ceildiv(3*S + 2, 4) + 2"));
    CHECK(prints(C(-5), "-5") && prints(C(INT64_MIN), "(-9223372036854775807 - 1)"));
    CHECK(prints(mulc(S, INT64_MIN), "(-9223372036854775807 - 1)*S"));
    CHECK(prints(add(T, mulc(S, INT64_MIN)), "(-9223372036854775807 - 1)*S + T"));
    CHECK(prints(add(S, mulc(T, INT64_MIN)), "S + (-9223372036854775807 - 1)*T"));
    CHECK(prints(addc(S, INT64_MIN), "S + (-9223372036854775807 - 1)"));
    char small[4];
    CHECK(dim_snprint(small, sizeof small, mulc(mul(S, B), 768)) == 7 && strcmp(small, "768") == 0);
    CHECK(dim_snprint(NULL, 0, S) == 1);

    Dim *e1 = add(mulc(T, 2), add(S, mul(T, S)));
    Dim *e2 = add(mul(S, T), add(mulc(T, 2), S));
    CHECK(e1 == e2 && prints(e1, "S + 2*T + S*T"));
    CHECK(round_trips(C(INT64_MIN)) && round_trips(add(S, mulc(T, INT64_MIN))));
    CHECK(round_trips(addc(add(mulc(mul(B, S), -768), fdiv(sub(T, C(1)), C(3))), -7)));
    CHECK(parse("floordiv(-3*S + T, 4)") == fdiv(sub(T, mulc(S, 3)), C(4)));
}

static void test_eval(void)
{
    int64_t v[5] = {5, 3, 2, -7, 0}, out = 0;
    DimEnv env = {v, NULL, 5};
    CHECK(dim_eval(addc(mulc(S, 3), 1), &env, &out) == DIM_OK && out == 16);
    CHECK(dim_eval(mulc(mul(B, S), 768), &env, &out) == DIM_OK && out == 7680);
    CHECK(dim_eval(fdiv(N, C(4)), &env, &out) == DIM_OK && out == -2);
    CHECK(dim_eval(cdiv(N, C(4)), &env, &out) == DIM_OK && out == -1);
    CHECK(dim_eval(mod(N, C(4)), &env, &out) == DIM_OK && out == 1);
    CHECK(dim_eval(mod(N, C(-4)), &env, &out) == DIM_OK && out == -3);
    CHECK(dim_eval(fdiv(N, C(-4)), &env, &out) == DIM_OK && out == 1);
    CHECK(dim_eval(dmin(N, T), &env, &out) == DIM_OK && out == -7);
    CHECK(dim_eval(fdiv(S, D), &env, &out) == DIM_DIVZERO);
    CHECK(dim_eval(mod(S, D), &env, &out) == DIM_DIVZERO);

    v[0] = (int64_t)1 << 62;
    CHECK(dim_eval(mulc(S, 4), &env, &out) == DIM_OVERFLOW);
    CHECK(dim_eval(addc(mulc(S, 2), -((int64_t)1 << 62)), &env, &out) == DIM_OVERFLOW);
    CHECK(dim_eval(addc(S, INT64_MAX - ((int64_t)1 << 62)), &env, &out) == DIM_OK && out == INT64_MAX);
    CHECK(dim_eval(mulc(S, 2), &env, &out) == DIM_OVERFLOW);
    CHECK(dim_eval(mul(S, T), &env, &out) == DIM_OVERFLOW);
    v[0] = INT64_MIN;
    v[1] = -1;
    CHECK(dim_eval(fdiv(S, T), &env, &out) == DIM_OVERFLOW);
    CHECK(dim_eval(mod(S, T), &env, &out) == DIM_OK && out == 0);

    DimEnv few = {v, NULL, 2};
    CHECK(dim_eval(add(S, B), &few, &out) == DIM_UNBOUND);
    bool bound[5] = {true, false, true, true, true};
    DimEnv holes = {v, bound, 5};
    CHECK(dim_eval(add(S, T), &holes, &out) == DIM_UNBOUND);
    CHECK(dim_eval(C(42), NULL, &out) == DIM_OK && out == 42);
    CHECK(strcmp(dim_eval_status_str(DIM_OVERFLOW), dim_eval_status_str(DIM_DIVZERO)) != 0);
    CHECK(dim_eval_status_str(DIM_UNBOUND) != NULL && dim_eval_status_str(DIM_OK) != NULL);
}

static bool has_bounds(const Dim *d, int64_t lo, int64_t hi)
{
    int64_t l, h;
    dim_bounds(d, &l, &h);
    if (l == lo && h == hi)
        return true;
    fprintf(stderr, "  bounds [%" PRId64 ", %" PRId64 "], want [%" PRId64 ", %" PRId64 "]\n", l,
            h, lo, hi);
    return false;
}

static void test_bounds(void)
{
    CHECK(has_bounds(S, 1, DIM_INF) && has_bounds(addc(S, -1), 0, DIM_INF));
    CHECK(has_bounds(mod(S, C(4)), 0, 3) && has_bounds(mod(N, C(4)), 0, 3));
    CHECK(has_bounds(fdiv(N, C(3)), -3, 2) && has_bounds(cdiv(N, C(3)), -2, 3));
    CHECK(has_bounds(mul(N, N), -64, 64) && has_bounds(dim_neg(cx, S), INT64_MIN, -1));
    CHECK(has_bounds(dmin(N, S), -8, 8) && has_bounds(dmax(N, S), 1, DIM_INF));
    CHECK(has_bounds(mul(N, D), INT64_MIN, DIM_INF) && has_bounds(fdiv(S, T), 0, DIM_INF));
    Dim *big = dim_sym(cx, "big");
    dim_sym_set(big, (int64_t)1 << 40, (int64_t)1 << 41, SYM_USER);
    CHECK(has_bounds(mul(big, big), INT64_MIN, DIM_INF));
    CHECK(has_bounds(add(mulc(big, 1 << 22), mulc(big, 1 << 22)), INT64_MIN, DIM_INF));
    Dim *huge = dim_sym(cx, "huge");
    dim_sym_set(huge, INT64_MIN, INT64_MAX, SYM_USER);
    CHECK(has_bounds(dim_neg(cx, huge), INT64_MIN, DIM_INF));
    CHECK(has_bounds(fdiv(huge, C(-3)), INT64_MIN, DIM_INF));
    /* bounds are kept in the nodes; a symbol's new bounds reach them */
    Dim *v = dim_sym(cx, "v"), *e = addc(fdiv(mulc(v, 3), C(2)), 1);
    dim_sym_set(v, 2, 10, SYM_USER);
    CHECK(has_bounds(e, 4, 16));
    dim_sym_set(v, 4, 6, SYM_USER);
    CHECK(has_bounds(e, 7, 10));
    /* a DAG nested 60 deep (2^60 nodes as a tree) is bounded at once */
    Dim *w = dim_sym(cx, "w"), *x = w;
    for (int i = 0; i < 60; i++)
        x = dmin(mulc(x, 2), dmax(C(0), addc(x, -7)));
    CHECK(x->kind == DIM_MIN && x->tsize == UINT32_MAX && has_bounds(x, 0, DIM_INF));
    CHECK(w->tsize == 1 && addc(w, 1)->tsize == 2 && dmin(v, w)->tsize == 3);
}

/* ------------------------------------------------------------------ */
/* Randomized: canonical forms against a naive evaluation of the recipe. */

enum { R_CONST, R_SYM, R_ADD, R_SUB, R_MUL, R_NEG, R_FDIV, R_CDIV, R_MOD, R_MIN, R_MAX, R_COUNT };

typedef struct Rec {
    int op;
    int64_t c;
    struct Rec *a, *b;
} Rec;

static Rec pool[4096];
static int npool;
static uint64_t rng = 0x9E3779B97F4A7C15u;

static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static int64_t rnd_in(int64_t lo, int64_t hi) { return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1)); }

static Rec *gen(int depth)
{
    Rec *r = &pool[npool++];
    int leaf = depth == 0 || rnd() % 4 == 0;
    r->op = leaf ? (rnd() % 3 ? R_SYM : R_CONST) : (int)rnd_in(R_ADD, R_COUNT - 1);
    r->c = r->op == R_SYM ? rnd_in(0, 2) : rnd_in(-4, 6);
    if (!leaf && (r->op == R_ADD || r->op == R_SUB) && rnd() % 4 == 0) {
        /* a + mod(-a, k), a - mod(a, k): rounding to a multiple of k */
        r->a = gen(depth - 1);
        Rec *m = &pool[npool++], *k = &pool[npool++];
        *k = (Rec){.op = R_CONST, .c = rnd_in(2, 6)};
        *m = (Rec){.op = R_MOD, .a = r->a, .b = k};
        if (r->op == R_ADD) {
            m->a = &pool[npool++];
            *m->a = (Rec){.op = R_NEG, .a = r->a};
        }
        r->b = m;
        return r;
    }
    if (!leaf) {
        r->a = gen(depth - 1);
        bool cdivisor = r->op >= R_FDIV && r->op <= R_MOD && rnd() % 3;
        if (cdivisor) {
            r->b = &pool[npool++];
            r->b->op = R_CONST;
            do
                r->b->c = rnd_in(-3, 6);
            while (r->b->c == 0);
        } else {
            r->b = gen(depth - 1);
        }
    }
    return r;
}

static Dim *rsyms[3];

/* The recipe as text, for failure messages. */
static void rec_print(const Rec *r, char *buf, size_t size)
{
    static const char *ops[] = {"", "", "add", "sub", "mul", "neg", "floordiv", "ceildiv",
                                "mod", "min", "max"};
    char a[1024], b[1024];
    if (r->op == R_CONST || r->op == R_SYM) {
        snprintf(buf, size, r->op == R_CONST ? "%" PRId64 : "s%" PRId64, r->c);
        return;
    }
    rec_print(r->a, a, sizeof a);
    if (r->op == R_NEG) {
        int n = snprintf(buf, size, "neg(");
        if (n >= 0 && (size_t)n < size)
            n += snprintf(buf + n, size - (size_t)n, "%s", a);
        if (n >= 0 && (size_t)n < size)
            snprintf(buf + n, size - (size_t)n, ")");
        return;
    }
    rec_print(r->b, b, sizeof b);
    /* truncation is fine: the text is only for messages */
    int n = snprintf(buf, size, "%s(", ops[r->op]);
    for (const char *parts[] = {a, ", ", b, ")"}, **p = parts; p < parts + 4 && n >= 0 && (size_t)n < size; p++)
        n += snprintf(buf + n, size - (size_t)n, "%s", *p);
}

static Dim *build(const Rec *r)
{
    switch (r->op) {
    case R_CONST:
        return C(r->c);
    case R_SYM:
        return rsyms[r->c];
    case R_NEG:
        return dim_neg(cx, build(r->a));
    default: {
        Dim *a = build(r->a), *b = build(r->b);
        switch (r->op) {
        case R_ADD:
            return add(a, b);
        case R_SUB:
            return sub(a, b);
        case R_MUL:
            return mul(a, b);
        case R_FDIV:
            return fdiv(a, b);
        case R_CDIV:
            return cdiv(a, b);
        case R_MOD:
            return mod(a, b);
        case R_MIN:
            return dmin(a, b);
        default:
            return dmax(a, b);
        }
    }
    }
}

static int64_t fl(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* The recipe evaluated directly: false on overflow or division by zero. */
static bool naive(const Rec *r, const int64_t *v, int64_t *out)
{
    int64_t a, b;
    if (r->op == R_CONST) {
        *out = r->c;
        return true;
    }
    if (r->op == R_SYM) {
        *out = v[r->c];
        return true;
    }
    if (!naive(r->a, v, &a))
        return false;
    if (r->op == R_NEG)
        return !__builtin_sub_overflow(0, a, out);
    if (!naive(r->b, v, &b))
        return false;
    switch (r->op) {
    case R_ADD:
        return !__builtin_add_overflow(a, b, out);
    case R_SUB:
        return !__builtin_sub_overflow(a, b, out);
    case R_MUL:
        return !__builtin_mul_overflow(a, b, out);
    case R_FDIV:
    case R_CDIV:
        if (b == 0 || (a == INT64_MIN && b == -1))
            return false;
        *out = r->op == R_FDIV ? fl(a, b) : -fl(-a, b);
        return true;
    case R_MOD:
        if (b == 0)
            return false;
        *out = b == -1 ? 0 : a - b * fl(a, b);
        return true;
    case R_MIN:
        *out = a < b ? a : b;
        return true;
    default:
        *out = a > b ? a : b;
        return true;
    }
}

/* dim_cmp on a sample: 0 exactly for equal pointers, antisymmetric,
 * transitive. */
static bool order_ok(Dim *const *xs, int n)
{
    int bad = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            int a = dim_cmp(xs[i], xs[j]), b = dim_cmp(xs[j], xs[i]);
            if ((a == 0) != (xs[i] == xs[j]) || (a > 0) != (b < 0))
                bad++;
            for (int k = 0; k < n; k += 7)
                if (a < 0 && dim_cmp(xs[j], xs[k]) < 0 && dim_cmp(xs[i], xs[k]) >= 0)
                    bad++;
        }
    return bad == 0;
}

static void test_order(void)
{
    Dim *xs[] = {C(-3), C(4), S, T, mulc(S, 2), mul(S, T), mul(S, S), addc(S, 1),
                 add(S, T), addc(add(S, T), 1), add(add(S, T), mul(S, T)),
                 fdiv(S, C(2)), fdiv(S, C(3)), mod(S, C(2)), dmin(S, T), dmax(S, T)};
    CHECK(order_ok(xs, (int)(sizeof xs / sizeof xs[0])));
    CHECK(dim_cmp(S, T) < 0 && dim_cmp(T, mul(S, S)) < 0 && dim_cmp(mul(S, S), addc(S, 1)) < 0);
}

static void test_random(void)
{
    static const int64_t lo[3] = {1, 0, -6}, hi[3] = {9, 9, 6};
    rsyms[0] = dim_sym(cx, "P");
    rsyms[1] = dim_sym_fresh(cx, SYM_DATA);
    rsyms[2] = dim_sym(cx, "Q");
    for (int i = 0; i < 3; i++)
        dim_sym_set(rsyms[i], lo[i], hi[i] == 9 ? (int64_t)DIM_INF : hi[i], SYM_USER);
    int nv = cx->nsyms;
    int64_t *v = calloc((size_t)nv, sizeof *v);
    Dim *kept[300];
    int nkept = 0;
    int exprs = 0, points = 0, wrong = 0, nulls = 0, noncanon = 0, trips = 0, oob = 0;
    for (int iter = 0; iter < 6000; iter++) {
        npool = 0;
        Rec *r = gen(1 + iter % 4);
        Dim *d = build(r);
        if (!d) {
            /* Only a divisor that folds to 0 may fail. */
            int64_t x[3] = {lo[0], lo[1], lo[2]}, want;
            if (naive(r, x, &want) && nulls++ < 5) {
                char rb[1024];
                rec_print(r, rb, sizeof rb);
                fprintf(stderr, "  %s failed to build\n", rb);
            }
            continue;
        }
        exprs++;
        if (nkept < (int)(sizeof kept / sizeof kept[0]))
            kept[nkept++] = d;
        noncanon += !canonical(d);
        trips += !round_trips(d);
        int64_t blo, bhi;
        dim_bounds(d, &blo, &bhi);
        for (int p = 0; p < 24; p++) {
            int64_t x[3], want, got;
            for (int i = 0; i < 3; i++)
                v[rsyms[i]->id] = x[i] = rnd_in(lo[i], hi[i]);
            if (!naive(r, x, &want))
                continue;
            points++;
            DimEnv env = {v, NULL, nv};
            DimEvalStatus s = dim_eval(d, &env, &got);
            if (s != DIM_OK || got != want) {
                if (wrong++ < 5) {
                    char buf[512], rb[1024];
                    dim_snprint(buf, sizeof buf, d);
                    rec_print(r, rb, sizeof rb);
                    fprintf(stderr, "  %s = %s at (%" PRId64 ", %" PRId64 ", %" PRId64 "): %s %" PRId64
                            ", want %" PRId64 "\n", rb, buf, x[0], x[1], x[2],
                            dim_eval_status_str(s), s == DIM_OK ? got : 0, want);
                }
            } else if (got < blo || got > bhi) {
                if (oob++ < 5) {
                    char buf[512];
                    dim_snprint(buf, sizeof buf, d);
                    fprintf(stderr, "  %s = %" PRId64 " at (%" PRId64 ", %" PRId64 ", %" PRId64
                            ") outside [%" PRId64 ", %" PRId64 "]\n", buf, got, x[0], x[1],
                            x[2], blo, bhi);
                }
            }
        }
    }
    free(v);
    CHECK_MSG(order_ok(kept, nkept), "dim_cmp is not a total order on random dims");
    CHECK_MSG(wrong == 0, "%d of %d points evaluate differently", wrong, points);
    CHECK_MSG(oob == 0, "%d values outside dim_bounds", oob);
    CHECK_MSG(noncanon == 0, "%d non-canonical results", noncanon);
    CHECK_MSG(trips == 0, "%d of %d expressions do not round-trip", trips, exprs);
    CHECK_MSG(nulls == 0, "%d constructions failed", nulls);
    CHECK(points > 60000);
}

int main(void)
{
    setup();
    test_symbols();
    test_sums_products();
    test_division();
    test_minmax();
    test_folding();
    test_printing();
    test_eval();
    test_bounds();
    test_order();
    test_random();
    arena_free(&arena);
    return check_done();
}
