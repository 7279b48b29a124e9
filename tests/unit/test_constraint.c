/*
 * test_constraint.c — the constraint set and its ISL-backed queries:
 * bounds, hints, equality of affine dims, floordiv/mod/min/max, non-affine
 * dims, contradictions, large constants, printing.
 */
#include "passes/constraint.h"

#include "tests/unit/check.h"

#include <stdlib.h>
#include <string.h>

static Graph *g;
static DimCtx *cx;

static Dim *C(int64_t v) { return dim_const(cx, v); }
static Dim *add(Dim *a, Dim *b) { return dim_add(cx, a, b); }
static Dim *sub(Dim *a, Dim *b) { return dim_sub(cx, a, b); }
static Dim *mul(Dim *a, Dim *b) { return dim_mul(cx, a, b); }
static Dim *addc(Dim *a, int64_t c) { return dim_addc(cx, a, c); }
static Dim *mulc(Dim *a, int64_t c) { return dim_mulc(cx, a, c); }
static Dim *fdiv(Dim *a, int64_t k) { return dim_floordiv(cx, a, C(k)); }
static Dim *cdiv(Dim *a, int64_t k) { return dim_ceildiv(cx, a, C(k)); }
static Dim *mod(Dim *a, int64_t k) { return dim_mod(cx, a, C(k)); }

/* cons_print into a malloc'd string. */
static char *printed(const Constraints *c)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    cons_print(f, c);
    fclose(f);
    return buf;
}

static void test_bounds(void)
{
    Constraints *c = cons_new(cx);
    Dim *S = dim_sym(cx, "S");
    CHECK(c != NULL);
    CHECK(cons_consistent(c));
    CHECK(cons_prove_ge0(c, addc(S, -1)));   /* S >= 1 */
    CHECK(!cons_prove_ge0(c, addc(S, -2)));  /* S = 1 allowed */
    CHECK(!cons_prove_le(c, S, 1000000));    /* unbounded above */
    CHECK(cons_prove(c, S, REL_GT, C(0)));
    CHECK(!cons_prove(c, S, REL_GT, C(1)));
    CHECK(cons_prove(c, S, REL_NE, C(0)));
    CHECK(!cons_prove(c, S, REL_NE, C(1)));
    CHECK(cons_prove(c, addc(S, 1), REL_GT, S));
    CHECK(!cons_prove(c, S, REL_GT, S));
    CHECK(cons_prove(c, S, REL_LE, S));

    /* A symbol with explicit bounds: read at query time. */
    Dim *B = dim_sym(cx, "B");
    dim_sym_set(B, 2, 64, SYM_INPUT);
    CHECK(cons_prove_le(c, B, 64));
    CHECK(!cons_prove_le(c, B, 63));
    CHECK(cons_prove_ge0(c, addc(B, -2)));
    CHECK(cons_prove(c, mulc(B, 2), REL_LE, C(128)));
    /* 2*B - S: B bounded, S not: neither side provable. */
    CHECK(!cons_prove_ge0(c, sub(mulc(B, 2), S)));
    CHECK(!cons_prove(c, sub(mulc(B, 2), S), REL_LT, C(0)));
    cons_free(c);
}

static void test_hints(void)
{
    Constraints *c = cons_new(cx);
    Dim *S = dim_sym(cx, "S"), *T = dim_sym(cx, "T"), *N = dim_sym(cx, "N");

    CHECK(!cons_prove_divisible(c, S, 4));
    CHECK(!cons_prove_eq(c, mulc(fdiv(S, 8), 8), S));
    CHECK(cons_add_divisible(c, S, 8, "user"));
    CHECK(cons_prove_divisible(c, S, 4));
    CHECK(cons_prove_divisible(c, S, -8));
    CHECK(!cons_prove_divisible(c, S, 16));
    CHECK(!cons_prove_divisible(c, S, 0));
    CHECK(cons_prove(c, mod(S, 4), REL_EQ, C(0)));
    CHECK(cons_prove_eq(c, mulc(fdiv(S, 8), 8), S));
    CHECK(cons_prove_eq(c, cdiv(S, 8), fdiv(S, 8)));
    CHECK(cons_prove_ge0(c, addc(S, -8)));   /* S >= 1 and 8 | S */
    CHECK(!cons_prove_ge0(c, addc(S, -9)));
    CHECK(cons_prove_divisible(c, addc(mulc(S, 3), 16), 8));
    CHECK(!cons_prove_divisible(c, addc(S, 4), 8));

    /* B <= 64 as a hint on a symbol without bounds. */
    Dim *B = dim_sym(cx, "B2");
    CHECK(!cons_prove_le(c, B, 100));
    CHECK(cons_add(c, B, REL_LE, C(64), "user"));
    CHECK(cons_prove_le(c, B, 100));
    CHECK(cons_prove_le(c, B, 64));
    CHECK(!cons_prove_le(c, B, 63));

    /* S == T: equality transfers divisibility; T + 1 > S. */
    CHECK(!cons_prove_eq(c, S, T));
    CHECK(cons_add(c, S, REL_EQ, T, "user"));
    CHECK(cons_prove_eq(c, S, T));
    CHECK(cons_prove_divisible(c, T, 8));
    CHECK(cons_prove(c, addc(T, 1), REL_GT, S));
    CHECK(!cons_prove(c, T, REL_NE, S));

    /* A derived fact: reshape of [N] into [floordiv(N, 12), 12]. */
    CHECK(!cons_prove_eq(c, mulc(fdiv(N, 12), 12), N));
    CHECK(cons_add_divisible(c, N, 12, "reshape %3"));
    CHECK(cons_prove_eq(c, mulc(fdiv(N, 12), 12), N));
    CHECK(cons_prove_divisible(c, N, 6));
    CHECK(cons_consistent(c));
    CHECK(cons_count(c) == 4);
    cons_free(c);
}

static void test_equality(void)
{
    Constraints *c = cons_new(cx);
    Dim *S = dim_sym(cx, "S"), *T = dim_sym(cx, "T");
    CHECK(add(S, S) == mulc(S, 2));
    CHECK(cons_prove_eq(c, add(S, S), mulc(S, 2)));
    CHECK(cons_prove_eq(c, fdiv(addc(mulc(S, 2), 1), 2), S));
    CHECK(cons_prove_eq(c, cdiv(addc(mulc(S, 2), -1), 2), S));
    CHECK(cons_prove_eq(c, mod(addc(mulc(S, 4), 6), 2), C(0)));
    CHECK(cons_prove_eq(c, add(fdiv(S, 2), cdiv(S, 2)), S));   /* ISL: case split on parity */
    CHECK(cons_prove_eq(c, add(mulc(fdiv(S, 3), 3), mod(S, 3)), S));
    CHECK(cons_prove(c, mod(S, 5), REL_LE, C(4)));
    CHECK(cons_prove_ge0(c, mod(sub(S, T), 5)));                /* floored mod */
    CHECK(cons_prove(c, mod(S, -5), REL_LE, C(0)));             /* sign of divisor */
    CHECK(cons_prove(c, mod(S, -5), REL_GT, C(-5)));
    CHECK(cons_prove(c, fdiv(S, -2), REL_LT, C(0)));            /* floor(-1/2) = -1 */
    CHECK(!cons_prove_eq(c, fdiv(S, 2), cdiv(S, 2)));
    CHECK(!cons_prove_eq(c, S, T));
    CHECK(cons_prove(c, fdiv(S, 2), REL_LT, S));
    CHECK(!cons_prove(c, fdiv(S, 2), REL_LT, fdiv(S, 3)));
    cons_free(c);
}

static void test_minmax(void)
{
    Constraints *c = cons_new(cx);
    Dim *S = dim_sym(cx, "S"), *T = dim_sym(cx, "T");
    CHECK(cons_prove_le(c, dim_min(cx, S, C(0)), 0));
    CHECK(cons_prove_eq(c, dim_max(cx, S, C(1)), S));
    CHECK(!cons_prove_eq(c, dim_max(cx, S, C(2)), S));
    Dim *m = dim_min(cx, S, T), *M = dim_max(cx, S, T);
    CHECK(cons_prove(c, m, REL_LE, S));
    CHECK(cons_prove(c, m, REL_LE, T));
    CHECK(cons_prove(c, M, REL_GE, T));
    CHECK(cons_prove_ge0(c, addc(m, -1)));
    CHECK(!cons_prove_eq(c, m, S));
    CHECK(cons_prove_eq(c, add(m, M), add(S, T)));              /* piecewise */
    CHECK(!cons_prove_eq(c, m, M));
    /* After S <= T, min(S, T) == S. */
    CHECK(cons_add(c, S, REL_LE, T, "user"));
    CHECK(cons_prove_eq(c, dim_min(cx, S, T), S));
    CHECK(cons_prove_eq(c, dim_max(cx, S, T), T));
    /* Clamp of a slice bound: min(max(S - 3, 0), S) >= 0. */
    CHECK(cons_prove_ge0(c, dim_min(cx, dim_max(cx, addc(S, -3), C(0)), S)));
    cons_free(c);
}

static void test_nonaffine(void)
{
    Constraints *c = cons_new(cx);
    Dim *S = dim_sym(cx, "S"), *T = dim_sym(cx, "T");
    Dim *ST = mul(S, T);
    /* S*T >= 1: proved by the intervals of S, T >= 1, not by ISL. */
    CHECK(cons_prove(c, ST, REL_GE, C(1)));
    /* S*T >= S holds, but neither intervals nor ISL see it. */
    CHECK(!cons_prove(c, ST, REL_GE, S));
    /* Opaque atoms: S*T + S >= 2 (S*T >= 1 and S >= 1). */
    CHECK(cons_prove(c, add(ST, S), REL_GE, C(2)));
    /* Cancelling in canonical form. */
    CHECK(cons_prove_eq(c, sub(add(ST, S), ST), S));
    CHECK(cons_prove_divisible(c, mulc(ST, 8), 4));
    CHECK(!cons_prove_divisible(c, ST, 2));
    /* floordiv by a symbol: an opaque atom with its bounds. */
    Dim *q = dim_floordiv(cx, S, T);
    CHECK(!cons_prove(c, q, REL_GE, C(1)));
    /* A non-affine fact is kept but not given to ISL. */
    CHECK(!cons_add(c, ST, REL_LE, C(4096), "user"));
    CHECK(cons_count(c) == 1);
    CHECK(!cons_prove_le(c, S, 4096));
    CHECK(cons_consistent(c));
    /* Non-affine facts refuted by intervals make the set inconsistent. */
    CHECK(!cons_add(c, ST, REL_LE, C(0), "user"));
    CHECK(!cons_consistent(c));
    cons_free(c);
}

static void test_contradiction(void)
{
    Dim *S = dim_sym(cx, "S"), *T = dim_sym(cx, "T");
    Constraints *c = cons_new(cx);
    CHECK(cons_add(c, S, REL_LE, C(0), "user"));   /* S >= 1 from bounds */
    CHECK(!cons_consistent(c));
    /* While inconsistent, ISL proves nothing; the canonical form still does. */
    CHECK(!cons_prove_le(c, S, -5));
    CHECK(cons_prove_eq(c, add(S, S), mulc(S, 2)));
    cons_free(c);

    c = cons_new(cx);
    CHECK(cons_add_divisible(c, S, 2, "user"));
    CHECK(cons_add(c, S, REL_EQ, addc(mulc(T, 2), 1), "user"));
    CHECK(!cons_consistent(c));                     /* S even and odd */
    cons_free(c);

    c = cons_new(cx);
    CHECK(cons_add(c, S, REL_LT, T, "user"));
    CHECK(cons_add(c, T, REL_LT, addc(S, 1), "user"));
    CHECK(!cons_consistent(c));
    cons_free(c);

    c = cons_new(cx);
    CHECK(cons_add(c, S, REL_GE, C(4), "user"));
    CHECK(cons_add(c, S, REL_LE, C(4), "user"));
    CHECK(cons_consistent(c));
    CHECK(cons_prove_eq(c, S, C(4)));
    CHECK(cons_prove_divisible(c, S, 2));
    cons_free(c);

    /* Empty bounds of a symbol. */
    Dim *E = dim_sym(cx, "E");
    c = cons_new(cx);
    dim_sym_set(E, 5, 4, SYM_INPUT);
    CHECK(!cons_consistent(c));
    CHECK(!cons_prove(c, E, REL_GE, C(100)));  /* nothing from an empty domain */
    dim_sym_set(E, 1, DIM_INF, SYM_INPUT);
    CHECK(cons_consistent(c));
    cons_free(c);
}

/* Queries take the facts connected to their symbols; the consistency of the
 * whole set is cached and follows later changes of symbol bounds. */
static void test_components(void)
{
    Dim *A = dim_sym(cx, "A"), *Bb = dim_sym(cx, "Bb"), *Cc = dim_sym(cx, "Cc");
    Dim *X = dim_sym(cx, "X"), *Y = dim_sym(cx, "Y");
    Constraints *c = cons_new(cx);
    CHECK(cons_add(c, A, REL_EQ, addc(Bb, 1), "user"));
    CHECK(cons_add(c, Bb, REL_EQ, Cc, "user"));
    CHECK(cons_add(c, Cc, REL_LE, C(10), "user"));
    CHECK(cons_prove(c, A, REL_GT, Cc));       /* through Bb */
    CHECK(cons_prove_le(c, A, 11));            /* through Bb and Cc */
    CHECK(!cons_prove_le(c, A, 10));
    CHECK(!cons_prove_le(c, X, 11));           /* unrelated */

    CHECK(cons_add(c, X, REL_GE, C(10), "user"));
    CHECK(cons_consistent(c));
    dim_sym_set(X, 1, 5, SYM_INPUT);           /* bounds now contradict */
    CHECK(!cons_consistent(c));
    CHECK(!cons_prove_le(c, A, 11));           /* contradiction anywhere */
    CHECK(!cons_prove_ge0(c, addc(Y, -3)));
    dim_sym_set(X, 1, DIM_INF, SYM_INPUT);
    CHECK(cons_consistent(c));
    CHECK(cons_prove_le(c, A, 11));
    CHECK(cons_prove_ge0(c, addc(X, -10)));
    /* A remembered answer follows a change of bounds. */
    CHECK(!cons_prove_le(c, A, 5));
    CHECK(!cons_prove_le(c, A, 5));
    dim_sym_set(Cc, 1, 4, SYM_INPUT);
    CHECK(cons_prove_le(c, A, 5));
    dim_sym_set(Cc, 1, DIM_INF, SYM_INPUT);
    CHECK(!cons_prove_le(c, A, 5));
    cons_free(c);
}

static void test_large(void)
{
    Constraints *c = cons_new(cx);
    Dim *S = dim_sym(cx, "S"), *U = dim_sym(cx, "U");
    dim_sym_set(U, 1, 100, SYM_INPUT);
    int64_t big = INT64_MAX - 1;
    /* S + big: canonical; compare to constants near the edge. */
    CHECK(cons_prove(c, addc(S, big), REL_GE, C(INT64_MAX)));
    CHECK(cons_prove(c, addc(S, INT64_MIN + 2), REL_GT, C(INT64_MIN + 2)));
    /* The difference overflows int64 canonically; ISL computes exactly:
     * S + (2^63 - 1) > U + (-2^63 + 1) for S >= 1, U <= 100. */
    Dim *a = addc(S, INT64_MAX), *b = addc(U, INT64_MIN + 1);
    CHECK(a != NULL && b != NULL);
    CHECK(sub(a, b) == NULL);
    CHECK(cons_prove(c, a, REL_GT, b));
    CHECK(!cons_prove(c, a, REL_LT, b));
    /* Large coefficients and divisors. */
    CHECK(cons_prove_divisible(c, mulc(S, INT64_MAX - 1), 2));
    CHECK(!cons_prove_divisible(c, mulc(S, INT64_MAX), 2));
    CHECK(cons_prove_divisible(c, mulc(S, INT64_MIN), INT64_MIN));
    CHECK(cons_add(c, S, REL_LE, C(INT64_MAX / 2), "user"));
    CHECK(cons_prove_le(c, mulc(S, 2), INT64_MAX - 1));
    CHECK(cons_prove_ge0(c, fdiv(mulc(S, 1000000007), 1000000007)));
    CHECK(cons_consistent(c));
    cons_free(c);
}

static void test_print(void)
{
    Graph *pg = graph_new("print");
    DimCtx *px = &pg->dims;
    Dim *S = dim_sym(px, "S"), *B = dim_sym(px, "B"), *T = dim_sym(px, "T");
    dim_sym_set(B, 1, 512, SYM_INPUT);
    Constraints *c = cons_new(px);
    cons_add(c, S, REL_EQ, T, "user");
    cons_add_divisible(c, S, 8, "user");
    cons_add_divisible(c, dim_addc(px, T, 1), 2, "reshape %3");
    cons_add(c, dim_mul(px, S, T), REL_LE, dim_const(px, 4096), NULL);
    char *s = printed(c);
    const char *want =
        "B >= 1\n"
        "B <= 512\n"
        "S >= 1\n"
        "T >= 1\n"
        "(T + 1) % 2 == 0  (reshape %3)\n"
        "S % 8 == 0  (user)\n"
        "S == T  (user)\n"
        "S*T <= 4096 [not affine]\n";
    CHECK_MSG(s && strcmp(s, want) == 0, "got:\n%s", s ? s : "(null)");
    free(s);
    CHECK(strcmp(cons_rel_str(REL_LT), "<") == 0);
    cons_free(c);
    graph_free(pg);
}

static void test_null(void)
{
    Constraints *c = cons_new(cx);
    Dim *S = dim_sym(cx, "S");
    CHECK(!cons_add(c, NULL, REL_EQ, S, "user"));
    CHECK(!cons_add_divisible(c, S, 0, "user"));
    CHECK(cons_count(c) == 0);
    CHECK(!cons_prove(c, NULL, REL_EQ, S));
    CHECK(!cons_prove_divisible(c, NULL, 2));
    cons_free(c);
    cons_free(NULL);
}

int main(void)
{
    g = graph_new("constraint");
    cx = &g->dims;
    test_bounds();
    test_hints();
    test_equality();
    test_minmax();
    test_nonaffine();
    test_contradiction();
    test_components();
    test_large();
    test_print();
    test_null();
    graph_free(g);
    return check_done();
}
