/*
 * constraint.h — the constraint set of a graph's symbols, and the affine
 * questions ISL answers about dims.
 *
 * A Constraints holds facts: every symbol's bounds (Dim.lo/hi, read from
 * the DimCtx at each query, so later dim_sym_set calls count), user hints
 * (--assume 'S % 8 == 0'), and facts derived by the shape analysis (a
 * reshape's inferred dim needs divisibility). Queries are true only when
 * the claim holds for every value of the symbols that satisfies all facts;
 * false means "not proved", never "proved false".
 *
 *     Constraints *c = cons_new(&g->dims);
 *     Dim *S = dim_sym(&g->dims, "S");
 *     cons_add_divisible(c, S, 8, "user");
 *     cons_prove_divisible(c, S, 4);          -> true
 *     cons_prove_ge0(c, dim_addc(cx, S, -2));  -> false (S = 1 is allowed)
 *     cons_free(c);
 *
 * What ISL sees: a dim is affine when, after canonical form, every product
 * has at most one non-constant factor, and every floordiv, ceildiv and mod
 * has a constant non-zero divisor; min and max of affine dims are affine
 * too (ISL keeps them piecewise). A fact that is not affine (S*T <= 4096)
 * is kept and printed but not given to ISL. A query that is not affine
 * still gets an answer: its non-affine atoms (S*T, floordiv(S, T)) become
 * opaque unknowns bounded by dim_bounds, which is sound but weaker.
 *
 * Contradictory facts are a user error that cons_consistent reports; while
 * they stand, queries prove only what the canonical form and the symbol
 * bounds prove on their own (nothing is proved "vacuously").
 */
#ifndef DISC_CONSTRAINT_H
#define DISC_CONSTRAINT_H

#include "ir/ir.h"

typedef enum Rel {
    REL_EQ, /* a == b */
    REL_NE, /* a != b */
    REL_LE, /* a <= b */
    REL_LT, /* a < b */
    REL_GE, /* a >= b */
    REL_GT, /* a > b */
} Rel;

const char *cons_rel_str(Rel r); /* "==", "!=", "<=", "<", ">=", ">" */

typedef struct Constraints Constraints; /* opaque; owns an isl_ctx */

/* NULL if out of memory. The DimCtx must outlive the set. */
Constraints *cons_new(DimCtx *cx);
void cons_free(Constraints *c);

/* Adds the fact `a rel b`; origin ("user", "reshape %3"; may be NULL) is
 * copied and printed with it. Returns true if ISL took the fact, false if
 * it is only kept for printing (not affine, a NULL dim, or out of memory). */
bool cons_add(Constraints *c, Dim *a, Rel rel, Dim *b, const char *origin);
/* Adds `a % k == 0` (k != 0; its sign does not matter). Returns as
 * cons_add; k == 0 is refused (false, nothing kept). */
bool cons_add_divisible(Constraints *c, Dim *a, int64_t k, const char *origin);

/* Queries: true only if provable under every fact and every symbol's
 * bounds. A NULL dim is never provable. */
bool cons_prove(Constraints *c, Dim *a, Rel rel, Dim *b);
/* a % k == 0; k == 0 is never provable. */
bool cons_prove_divisible(Constraints *c, Dim *a, int64_t k);
bool cons_prove_ge0(Constraints *c, Dim *e);
bool cons_prove_le(Constraints *c, Dim *e, int64_t k);
bool cons_prove_eq(Constraints *c, Dim *a, Dim *b);

/* Whether the facts and the bounds of the symbols can all hold at once.
 * Non-affine facts take part through dim_bounds only. */
bool cons_consistent(Constraints *c);

/* Number of facts added (bounds not counted). */
int cons_count(const Constraints *c);

/* Prints every symbol's bounds (by symbol name: "S >= 1", "S <= 512"),
 * then the facts sorted by their text, one per line:
 * "S % 8 == 0  (user)", "S*T <= 4096  (user) [not affine]". */
void cons_print(FILE *f, const Constraints *c);

#endif
