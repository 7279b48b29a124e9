/*
 * kern.h — the state of one kernel being emitted (elem.c, kernel.c).
 */
#ifndef DISC_KERN_H
#define DISC_KERN_H

#include "codegen/codegen.h"

typedef struct Kern {
    Cg *cg;
    const Group *grp;
    LLVMValueRef args;       /* i8** */
    /* external buffers: the group's ins, then its outs */
    Value **bv;
    LLVMValueRef *bp;        /* typed base pointers, loaded in the entry block */
    int nb;
    /* values computed once per row (stitch/input reductions) */
    Value **rv;
    LLVMValueRef *rval;
    int nr;
    LLVMValueRef flat;       /* flat mode: every value is indexed by this */
    bool in_group_outs;      /* treat the group's outs as computed (not loaded) */
    bool speculate;          /* the variant where no dim broadcasts implicitly */
    /* stitch: a row-shaped output out = E / R, with R the sum reduction of
     * E in this group: the reduction stores E's elements into out as it
     * sums them (exp(x - max) of a softmax, computed once), and the output
     * pass divides them in place */
    const Op *cache_red;
    Value *cache_out;
    /* and when E = exp(T - max(T)) (softmax), T goes to out first, for a
     * vectorised max; from then on elem(T) loads it from there */
    const Op *cache_max;
    Value *subst;
    /* LayerNorm: out = f(D, var) with D = T - mean(T), var = mean(D * D):
     * T goes to out, its mean from there, then D replaces it in place, and
     * var is a vector sum of squares over it (kernel.c, find_norm) */
    const Op *norm_mean, *norm_var;
    Value *norm_d;
    /* a loop kernel's inner loop in pieces, one per operand of a concat
     * along it (kernel.c, emit_loop_body): where piece_op is read at the
     * inner loop's index piece_var, its operand `piece` alone, at that
     * index less piece_start (no select, no clamp: vector code); in a run
     * of operands of one type, the one at piece_base, of `piece`'s type */
    const Op *piece_op;
    int piece;
    LLVMValueRef piece_var, piece_start, piece_base;
    /* a loop kernel's inner loop: a load whose index is the same for every
     * element of the row (defined in the blocks of inv: the function's
     * entry, the row loop's head and body, the middle loop's where there
     * is one) is emitted before the inner
     * loop, at the end of block hoist (elem.c). LLVM cannot move it there
     * itself, as the loop's stores might alias it; left in the loop, a
     * gather's index read kept the loop scalar */
    LLVMBasicBlockRef hoist, inv[5];
    /* elem_vec's mode: the lanes of the vectors being emitted, 0 while
     * scalars are (elem.c's arithmetic takes both) */
    int vw;
} Kern;

enum { KERN_MAX_LANES = 16 };

/* True if v is computed by an op of the group. */
bool kern_in_group(const Kern *k, const Value *v);
/* The typed base pointer of an external buffer, or NULL. */
LLVMValueRef kern_buf(Kern *k, const Value *v);
/* The element of v at idx (v's rank entries), in v's compute type. */
LLVMValueRef elem(Kern *k, Value *v, LLVMValueRef *idx);
/* Whether elem_vec takes v with its lanes along axis lax of its index
 * (its last: the loads are whole vectors), and w elements of v from idx
 * on along lax as a vector of w lanes (w <= KERN_MAX_LANES). */
bool kern_vec_ok(Kern *k, Value *v, int lax);
LLVMValueRef elem_vec(Kern *k, Value *v, LLVMValueRef *idx, int lax, int w);
/* Row-major offset of idx in a value of type t. */
LLVMValueRef kern_offset(Kern *k, const Type *t, LLVMValueRef *idx);
/* Splits a flat index into a multi-index over the dims of t. */
void kern_unflatten(Kern *k, const Type *t, LLVMValueRef flat, LLVMValueRef *idx);
/* Scalar arithmetic shared with the reduction templates. */
LLVMValueRef kern_binary(Kern *k, OpKind op, DType dt, LLVMValueRef a, LLVMValueRef b);
/* f32 e / r for an r fixed across the loop that computes it (a row's
 * sum): (e * s) * (1 / (r * s)), s = 2^64 where r is subnormal (its
 * reciprocal would overflow) and 1 elsewhere; LLVM hoists everything but
 * the two multiplications out of the loop. The same as e / r for every r
 * (0, infinities, NaN included) to an ulp or so, with two multiplications
 * per vector in place of a division (whose throughput is a few times
 * lower); BERT-base's softmax kernel at 1 x 512 on AVX2 showed no
 * difference above that machine's noise. */
LLVMValueRef kern_div_invariant(Kern *k, LLVMValueRef e, LLVMValueRef r);
LLVMValueRef kern_unary(Kern *k, OpKind op, DType dt, LLVMValueRef x);
/* Whether d may be 1 at run time (and so broadcast): not a constant, and
 * not proved != 1 by the shape analysis (intervals, ISL over the facts and
 * --assume hints). */
bool kern_maybe_one(Cg *cg, Dim *d);
LLVMValueRef kern_convert(Kern *k, LLVMValueRef v, DType from, DType to);
/* The loop template's plan, which the GPU's loop template (cuda.c) follows
 * too; they read only cg->g and cg->si. Whether grp runs over the flat
 * index of numel (elementwise ops and reshapes, scalars the only
 * broadcast), and the pairs (operand dim x[i], result dim r[i]) that are
 * not provably equal and may be 1 at run time, where the kernel has a
 * variant without broadcasting (at most cap). */
bool cg_loop_flat(Cg *cg, const Group *grp, Dim *numel);
int cg_broadcast_pairs(Cg *cg, const Group *grp, Dim **x, Dim **r, int cap);

/* Whether op is a reduction (reduce, argmax, argmin), and its reduced
 * axes as flags over its operand's rank. */
bool kern_is_reduction(const Op *op);
void kern_reduced_axes(const Op *op, bool *red);
/* The rows of a reduction group (kernel.c's and cuda.c's templates): its
 * first reduction (NULL if none), whose operand's kept axes go to kax and
 * reduced axes to rax; *bad is a reduction whose operand or axes differ
 * from the first's, or NULL when they all share their rows. */
const Op *kern_reduce_rows(const Group *grp, int *kax, int *nk, int *rax, int *nr, const Op **bad);

/* The column templates' check (kernel.c's, and the GPU's column stitch in
 * cuda.c): a column kernel binds a reduction's result at the column being
 * computed, so every read of one must be at the result's own kept axes.
 * c->xt is the reduced operand's type, kax its kept axes (the last one the
 * columns), budget the values the walks may still visit (out of it: not
 * taken). */
typedef struct ColReads {
    const Group *grp;
    const Type *xt;
    const int *kax;
    int nk;
    int budget;
} ColReads;
/* True if v is computed from a reduction's result in the group (or the
 * walk ran out of budget). */
bool col_reads_reduction(ColReads *c, const Value *v);
/* True if every read of a reduction's result that evaluating v at an index
 * following map reaches is at the result's own kept axes. map[i]: the axis
 * of xt whose index v's index i is, -1 where v's dim is 1. */
bool col_reads_at(ColReads *c, const Value *v, const int *map);
/* The map of a row-shaped type whose dims are the kept dims in order (dims
 * 1 anywhere); false if it is not one. */
bool col_row_map(const ColReads *c, const Type *t, int *map);

#endif
