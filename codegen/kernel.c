/*
 * kernel.c — kernel templates over a fusion group.
 *
 *   loop, flat   every op is elementwise over one shape (or a reshape):
 *                one loop over the flat index, every load and store at that
 *                index — what LLVM vectorises best
 *   loop, n-d    the index space is the root's shape: the parallel range is
 *                its rows (all dims but the last), the inner loop runs over
 *                the last dim, operands are read through their index maps
 *   reduction    INPUT and STITCH groups: the parallel range is the rows
 *                (the kept dims); per row, every reduction of the group runs
 *                over the reduced dims in order and leaves one scalar that
 *                later work of the row reads (softmax: max, then the sum of
 *                exp(x - max), then the outputs); row-shaped outputs are
 *                stored once per row, full-shaped ones in a last pass
 *   columns      INPUT and STITCH groups whose reductions keep the
 *                innermost axis (fuse_columns): the same work over blocks
 *                of consecutive columns, reading each reduced index's
 *                block contiguously (see "column reductions" below)
 *
 * Every size is a Dim computed from the symbols in the entry block, so one
 * kernel serves every shape. Which template a group gets is decided at
 * compile time from proved facts (equal dims are equal pointers).
 */
#include "codegen/kern.h"

#include <stdlib.h>
#include <math.h>
#include <string.h>

#define B (cg->b)

static bool is_scalar(const Type *t)
{
    size_t n;
    return type_static_numel(t, &n) && n == 1;
}

/* Flat mode: elementwise ops and reshapes only, no broadcasting but of
 * scalars, one element count (kern.h; the GPU's loop template asks too). */
bool cg_loop_flat(Cg *cg, const Group *grp, Dim *numel)
{
    for (int i = 0; i < grp->nops; i++) {
        const Op *op = grp->ops[i];
        OpCat cat = op_info(op->kind)->cat;
        bool ew = cat == CAT_UNARY || cat == CAT_BINARY || op->kind == OP_CMP || op->kind == OP_SELECT ||
                  op->kind == OP_CONVERT;
        if (!ew && op->kind != OP_RESHAPE && op->kind != OP_CONST)
            return false;
        for (int r = 0; r < op->nout; r++)
            if (type_numel(&cg->g->dims, &op->out[r]->type) != numel && op->kind != OP_CONST)
                return false;
        if (!ew)
            continue;
        for (int j = 0; j < op->nin; j++) {
            const Type *t = &op->in[j]->type;
            if (!is_scalar(t) && !type_same_dims(t, &op->out[0]->type))
                return false;
        }
    }
    return true;
}

static LLVMValueRef ptr_at(Cg *cg, Kern *k, const Value *v, LLVMValueRef off)
{
    return LLVMBuildGEP2(B, cg_storage_type(cg, v->type.dtype), kern_buf(k, v), &off, 1, "");
}

/* Product of dims[i] for the listed axes, as a Dim. */
static Dim *prod(Cg *cg, const Type *t, const int *axes, int n)
{
    Dim *p = dim_const(&cg->g->dims, 1);
    for (int i = 0; i < n; i++)
        p = dim_mul(&cg->g->dims, p, t->dims[axes[i]]);
    return p;
}

/* Splits flat over the listed axes of t into idx (at those axes). */
static void split(Cg *cg, const Type *t, const int *axes, int n, LLVMValueRef flat, LLVMValueRef *idx)
{
    for (int i = n - 1; i >= 0; i--) {
        Dim *d = t->dims[axes[i]];
        if (i == 0) {
            idx[axes[0]] = flat;
        } else if (dim_is(d, 1)) {
            idx[axes[i]] = cg_i64(cg, 0);
        } else {
            LLVMValueRef dv = cg_dim(cg, d);
            idx[axes[i]] = LLVMBuildURem(B, flat, dv, "");
            flat = LLVMBuildUDiv(B, flat, dv, "");
        }
    }
}

static void store_out(Cg *cg, Kern *k, Value *o, LLVMValueRef *idx, LLVMValueRef off)
{
    LLVMValueRef v = elem(k, o, idx);
    cg_store(cg, o->type.dtype, v, ptr_at(cg, k, o, off));
}

/* Stores output o at flat offset off of an index space of type t, whose
 * multi-index is idx: o's own index is idx when o has t's dims, else the
 * offset split over o's dims (a reshape of the same element count). */
static void store_at(Cg *cg, Kern *k, Value *o, const Type *t, LLVMValueRef *idx, LLVMValueRef off)
{
    LLVMValueRef oidx[MAX_RANK];
    if (type_same_dims(&o->type, t)) {
        store_out(cg, k, o, idx, off);
    } else {
        kern_unflatten(k, &o->type, off, oidx);
        store_out(cg, k, o, oidx, off);
    }
}

/* ---- loop -------------------------------------------------------------- */

/* Pairs (operand dim, result dim) that are not provably equal and may be 1
 * at run time: where the kernel broadcasts implicitly. A dim proved not to
 * be 1 (kern_maybe_one) equals its result dim whenever the shapes are
 * valid, so it needs no variant. */
int cg_broadcast_pairs(Cg *cg, const Group *grp, Dim **x, Dim **r, int cap)
{
    int n = 0;
    for (int i = 0; i < grp->nops; i++) {
        const Op *op = grp->ops[i];
        OpCat cat = op_info(op->kind)->cat;
        const Type *rt = &op->out[0]->type;
        if (cat == CAT_UNARY || cat == CAT_BINARY || op->kind == OP_CMP || op->kind == OP_SELECT) {
            for (int j = 0; j < op->nin; j++) {
                const Type *t = &op->in[j]->type;
                for (int a = 0; a < t->rank; a++) {
                    Dim *xd = t->dims[a], *rd = rt->dims[a + rt->rank - t->rank];
                    if (xd != rd && kern_maybe_one(cg, xd) && n < cap) {
                        x[n] = xd;
                        r[n++] = rd;
                    }
                }
            }
        } else if (op->kind == OP_BROADCAST || op->kind == OP_DYN_BROADCAST) {
            const Attr *axes = op_attr(op, "axes");
            const Type *t = &op->in[0]->type;
            for (int a = 0; a < t->rank; a++) {
                Dim *xd = t->dims[a], *rd = rt->dims[axes->ints[a]];
                if (xd != rd && kern_maybe_one(cg, xd) && n < cap) {
                    x[n] = xd;
                    r[n++] = rd;
                }
            }
        }
    }
    return n;
}

static void emit_loop_body(Cg *cg, Kern *k, KernelInfo *ki, LLVMValueRef begin, LLVMValueRef end);

/* Speculation: where dims might broadcast implicitly (S against T, either
 * possibly 1), the kernel checks at entry whether every such pair is equal
 * and then runs the variant that reads plain indices (no broadcast, the
 * case shape analysis speculated), else the broadcasting fallback. Pairs the
 * analysis proved equal are one pointer and need no variant. (Row
 * reductions have no such variant: given one, the LLaMA block's causal
 * softmax, whose mask may broadcast, ran 20-25% slower than the two-pass
 * rows of row_to_out_then_reduce without it.) */
typedef bool SpecBody(Cg *cg, Kern *k, KernelInfo *ki, LLVMValueRef begin, LLVMValueRef end);

static bool speculated(Cg *cg, Kern *k, KernelInfo *ki, LLVMValueRef begin, LLVMValueRef end, SpecBody *body)
{
    Dim *x[64], *r[64];
    int n = cg_broadcast_pairs(cg, k->grp, x, r, 64);
    if (n == 0)
        return body(cg, k, ki, begin, end);
    LLVMValueRef same = LLVMConstInt(cg->t_i1, 1, false);
    for (int i = 0; i < n; i++)
        same = LLVMBuildAnd(B, same, LLVMBuildICmp(B, LLVMIntEQ, cg_dim(cg, x[i]), cg_dim(cg, r[i]), ""), "");
    LLVMBasicBlockRef fast = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "no_broadcast");
    LLVMBasicBlockRef slow = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "broadcast");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "done");
    LLVMBuildCondBr(B, same, fast, slow);
    LLVMPositionBuilderAtEnd(B, fast);
    k->speculate = true;
    bool ok = body(cg, k, ki, begin, end);
    LLVMBuildBr(B, done);
    LLVMPositionBuilderAtEnd(B, slow);
    k->speculate = false;
    ok = ok && body(cg, k, ki, begin, end);
    LLVMBuildBr(B, done);
    LLVMPositionBuilderAtEnd(B, done);
    cg->nvariants++;
    return ok;
}

static bool loop_body(Cg *cg, Kern *k, KernelInfo *ki, LLVMValueRef begin, LLVMValueRef end)
{
    emit_loop_body(cg, k, ki, begin, end);
    return true;
}

/* A concat of the group along the last axis of the loop's index space
 * (its result of the root's rank, that axis the root's last dim): the
 * inner loop then runs in pieces, where the concat is one operand at an
 * affine index (elem.c), so each piece vectorises; a rotary embedding's
 * rotate_half (concat(-x2, x1)) ran as scalar code with a select and
 * clamped indices per element. Where the concat is read at another index
 * (through a transpose or a slice of the last axis), elem takes the
 * general path. */
static const Op *inner_concat(const Group *grp, const Type *rt)
{
    int r = rt->rank;
    for (int i = 0; i < grp->nops; i++) {
        const Op *op = grp->ops[i];
        const Type *t = &op->out[0]->type;
        if (op->kind == OP_CONCAT && t->rank == r && op_attr_int(op, "axis", 0) == r - 1 &&
            t->dims[r - 1] == rt->dims[r - 1])
            return op;
    }
    return NULL;
}

/* The concat's pieces: a run of operands that are buffers of the kernel
 * with the same type (DenseNet's concats of up to 32 layers' outputs, 32
 * channels each) becomes one loop over a table of their base pointers
 * around the inner loop, which has the same length for all of them (a
 * constant: LLVM makes it whole vectors); any other operand is a piece of
 * its own. A concat that would take more than MAX_PIECES loops takes
 * elem's general path instead (code size). */
enum { MAX_PIECES = 8, RUN_MIN = 3 };

typedef struct Piece {
    int first, n; /* operands [first, first + n); n > 1: a run */
} Piece;

static bool runs_with(Kern *k, const Op *cat, int a, int b)
{
    const Value *x = cat->in[a], *y = cat->in[b];
    return !kern_in_group(k, x) && !kern_in_group(k, y) && kern_buf(k, x) && kern_buf(k, y) &&
           x->type.dtype == y->type.dtype && type_same_dims(&x->type, &y->type);
}

static int concat_pieces(Kern *k, const Op *cat, Piece *pc)
{
    int n = 0;
    for (int i = 0; i < cat->nin;) {
        int e = i + 1;
        while (e < cat->nin && runs_with(k, cat, i, e))
            e++;
        if (e - i < RUN_MIN)
            e = i + 1;
        if (n == MAX_PIECES)
            return 0;
        pc[n++] = (Piece){i, e - i};
        i = e;
    }
    return n;
}

/* A group that is one concat of the kernel's buffers, where the inner
 * loop cannot run in pieces (another axis than the last, or more than
 * MAX_PIECES pieces): the operands' blocks copied in turn, from tables of
 * their base pointers, lengths and offsets, in code whose size does not
 * grow with their number. elem's general path selects among every
 * operand at each element: SSDlite's concatenations of 90 per-class
 * selections (each of its own data-dependent length) were a third of its
 * kernels' compile time, and a decoder's cache concatenated along the
 * sequence took a select per element. */
static const Op *copy_concat(Kern *k, const Type *rt)
{
    const Group *grp = k->grp;
    if (grp->nops != 1 || grp->nouts != 1)
        return NULL;
    const Op *cat = grp->ops[0];
    if (cat->kind != OP_CONCAT || grp->outs[0] != cat->out[0] || !kern_buf(k, cat->out[0]))
        return NULL;
    for (int i = 0; i < cat->nin; i++)
        if (!kern_buf(k, cat->in[i]) || cat->in[i]->type.dtype != rt->dtype)
            return NULL;
    if (inner_concat(grp, rt)) {
        Piece pc[MAX_PIECES];
        if (concat_pieces(k, cat, pc))
            return NULL; /* pieces of the inner loop: vector code */
    }
    return cat;
}

/* The work items are (row, operand) for the rows of the axes before the
 * concat's: item t copies operand t % n's row t / n, lens[i] elements,
 * to the result's row at offs[i]. */
static void emit_copy_concat(Cg *cg, Kern *k, KernelInfo *ki, const Op *cat, LLVMValueRef begin, LLVMValueRef end)
{
    DimCtx *dc = &cg->g->dims;
    const Type *rt = &cat->out[0]->type;
    int axis = (int)op_attr_int(cat, "axis", 0), n = cat->nin;
    int before[MAX_RANK], after[MAX_RANK];
    for (int i = 0; i < rt->rank; i++) {
        before[i] = i;
        after[i] = i;
    }
    Dim *rows = prod(cg, rt, before, axis), *inner = prod(cg, rt, after + axis + 1, rt->rank - axis - 1);
    Dim *items = dim_mul(dc, rows, dim_const(dc, n));
    ki->range = items;
    ki->grain = 1;
    /* about 16K elements a task on average */
    ki->grain_dim = dim_ceildiv(dc, dim_mul(dc, dim_const(dc, 1 << 14), items),
                                dim_max(dc, type_numel(dc, rt), dim_const(dc, 1)));
    LLVMTypeRef pt = LLVMArrayType(cg->t_p8, (unsigned)n), it = LLVMArrayType(cg->t_i64, (unsigned)n);
    LLVMValueRef ptrs = LLVMBuildAlloca(cg->eb, pt, "ptrs"), lens = LLVMBuildAlloca(cg->eb, it, "lens");
    LLVMValueRef offs = LLVMBuildAlloca(cg->eb, it, "offs");
    int64_t esize = (int64_t)dtype_size(rt->dtype);
    LLVMValueRef in = cg_dim(cg, inner), off = cg_i64(cg, 0);
    for (int i = 0; i < n; i++) {
        LLVMValueRef at[2] = {cg_i64(cg, 0), cg_i64(cg, i)};
        LLVMValueRef len = LLVMBuildMul(B, cg_dim(cg, cat->in[i]->type.dims[axis]), in, "");
        LLVMBuildStore(B, LLVMBuildBitCast(B, kern_buf(k, cat->in[i]), cg->t_p8, ""),
                       LLVMBuildGEP2(B, pt, ptrs, at, 2, ""));
        LLVMBuildStore(B, len, LLVMBuildGEP2(B, it, lens, at, 2, ""));
        LLVMBuildStore(B, off, LLVMBuildGEP2(B, it, offs, at, 2, ""));
        off = LLVMBuildAdd(B, off, len, "");
    }
    LLVMValueRef width = off; /* a result row's elements */
    LLVMValueRef out = LLVMBuildBitCast(B, kern_buf(k, cat->out[0]), cg->t_p8, "");
    CgLoop l;
    LLVMValueRef t = cg_loop_begin(cg, &l, begin, end, "item");
    l.hints = CG_NO_UNROLL | CG_NO_VECTORIZE;
    LLVMValueRef row = LLVMBuildUDiv(B, t, cg_i64(cg, n), ""), i = LLVMBuildURem(B, t, cg_i64(cg, n), "");
    LLVMValueRef at[2] = {cg_i64(cg, 0), i};
    LLVMValueRef src = LLVMBuildLoad2(B, cg->t_p8, LLVMBuildGEP2(B, pt, ptrs, at, 2, ""), "");
    LLVMValueRef len = LLVMBuildLoad2(B, cg->t_i64, LLVMBuildGEP2(B, it, lens, at, 2, ""), "");
    LLVMValueRef o = LLVMBuildLoad2(B, cg->t_i64, LLVMBuildGEP2(B, it, offs, at, 2, ""), "");
    LLVMValueRef es = cg_i64(cg, esize);
    LLVMValueRef from = LLVMBuildMul(B, LLVMBuildMul(B, row, len, ""), es, "");
    LLVMValueRef to = LLVMBuildMul(B, LLVMBuildAdd(B, LLVMBuildMul(B, row, width, ""), o, ""), es, "");
    LLVMBuildMemCpy(B, LLVMBuildGEP2(B, cg->t_i8, out, &to, 1, ""), (unsigned)esize,
                    LLVMBuildGEP2(B, cg->t_i8, src, &from, 1, ""), (unsigned)esize, LLVMBuildMul(B, len, es, ""));
    cg_loop_end(cg, &l);
}

static void emit_loop_body(Cg *cg, Kern *k, KernelInfo *ki, LLVMValueRef begin, LLVMValueRef end)
{
    const Group *grp = k->grp;
    Value *root = grp->root ? grp->root->out[0] : grp->outs[0];
    const Type *rt = &root->type;
    const Op *copy = copy_concat(k, rt);
    if (copy) {
        emit_copy_concat(cg, k, ki, copy, begin, end);
        return;
    }
    Dim *numel = type_numel(&cg->g->dims, rt);
    if (cg_loop_flat(cg, grp, numel)) {
        ki->range = numel;
        ki->grain = 1 << 14;
        CgLoop l;
        LLVMValueRef i = cg_loop_begin(cg, &l, begin, end, "i");
        k->flat = i;
        for (int o = 0; o < grp->nouts; o++)
            store_out(cg, k, grp->outs[o], NULL, i);
        k->flat = NULL;
        cg_loop_end(cg, &l);
        return;
    }
    int r = rt->rank;
    LLVMValueRef idx[MAX_RANK];
    if (r == 0) {
        ki->range = dim_const(&cg->g->dims, 1);
        ki->grain = 1;
        for (int o = 0; o < grp->nouts; o++)
            store_out(cg, k, grp->outs[o], idx, cg_i64(cg, 0));
        return;
    }
    int outer[MAX_RANK];
    for (int i = 0; i < r - 1; i++)
        outer[i] = i;
    Dim *inner = rt->dims[r - 1];
    const Op *cat = inner_concat(grp, rt);
    Piece pc[MAX_PIECES] = {{0, 1}};
    int npc = cat ? concat_pieces(k, cat, pc) : 0;
    if (!npc)
        cat = NULL;
    /* a row of at most 32 elements (a blocked layout's [N, C/16, H, W,
     * 16]): the axis before it becomes a loop inside each task's row, so
     * that a row costs an add, not the row loop's bookkeeping */
    bool mid = !cat && r >= 3 && dim_is_const(inner) && inner->c <= 32 && !dim_is(rt->dims[r - 2], 1);
    int no = mid ? r - 2 : r - 1; /* the axes of the task's rows */
    ki->range = prod(cg, rt, outer, no);
    Dim *row = mid ? dim_mul(&cg->g->dims, rt->dims[r - 2], inner) : inner;
    ki->grain = dim_is_const(row) && row->c > 0 ? (row->c >= 16384 ? 1 : 16384 / row->c) : 16;
    LLVMValueRef table[MAX_PIECES] = {0}; /* a run's base pointers */
    for (int p = 0; p < npc; p++) {
        if (pc[p].n == 1)
            continue;
        table[p] = LLVMBuildAlloca(cg->eb, LLVMArrayType(cg->t_p8, (unsigned)pc[p].n), "bases");
        for (int i = 0; i < pc[p].n; i++) {
            LLVMValueRef at[2] = {cg_i64(cg, 0), cg_i64(cg, i)};
            LLVMValueRef slot = LLVMBuildGEP2(B, LLVMArrayType(cg->t_p8, (unsigned)pc[p].n), table[p], at, 2, "");
            LLVMBuildStore(B, LLVMBuildBitCast(B, kern_buf(k, cat->in[pc[p].first + i]), cg->t_p8, ""), slot);
        }
    }
    CgLoop rows, mids, cols, run;
    /* the outer index counted up from begin's as an odometer, not split
     * from the row at each row: a blocked layout's rows are short, and the
     * divisions cost more than the row */
    bool odo = no >= 2 && !dim_is(prod(cg, rt, outer + 1, no - 1), 1);
    LLVMValueRef at0[MAX_RANK], phi[MAX_RANK];
    LLVMBasicBlockRef rpre = LLVMGetInsertBlock(B);
    if (odo)
        split(cg, rt, outer, no, begin, at0);
    LLVMValueRef q = cg_loop_begin(cg, &rows, begin, end, "row");
    if (odo) {
        LLVMPositionBuilderBefore(B, rows.iv);
        for (int i = 0; i < no; i++) {
            idx[i] = phi[i] = LLVMBuildPhi(B, cg->t_i64, "at");
            LLVMAddIncoming(phi[i], &at0[i], &rpre, 1);
        }
        LLVMPositionBuilderAtEnd(B, rows.body);
    } else {
        split(cg, rt, outer, no, q, idx);
    }
    LLVMValueRef n = cg_dim(cg, inner);
    LLVMValueRef base;
    if (mid) {
        LLVMValueRef nm = cg_dim(cg, rt->dims[r - 2]);
        LLVMValueRef m = cg_loop_begin(cg, &mids, cg_i64(cg, 0), nm, "mid");
        idx[r - 2] = m;
        base = LLVMBuildMul(B, LLVMBuildAdd(B, LLVMBuildMul(B, q, nm, ""), m, ""), n, "");
    } else {
        base = LLVMBuildMul(B, q, n, "");
    }
    LLVMValueRef lo = cg_i64(cg, 0);
    for (int p = 0; p < (cat ? npc : 1); p++) { /* the inner loop, or its pieces */
        Value *x = cat ? cat->in[pc[p].first] : NULL;
        LLVMValueRef w = cat ? cg_dim(cg, x->type.dims[r - 1]) : NULL, start = lo, ptr = NULL;
        if (cat && pc[p].n > 1) { /* a run: its operands' base pointers in turn */
            LLVMValueRef i = cg_loop_begin(cg, &run, cg_i64(cg, 0), cg_i64(cg, pc[p].n), "run");
            run.hints = CG_NO_UNROLL | CG_NO_VECTORIZE;
            LLVMValueRef at[2] = {cg_i64(cg, 0), i};
            LLVMValueRef slot = LLVMBuildGEP2(B, LLVMArrayType(cg->t_p8, (unsigned)pc[p].n), table[p], at, 2, "");
            ptr = LLVMBuildBitCast(B, LLVMBuildLoad2(B, cg->t_p8, slot, ""),
                                   LLVMPointerType(cg_storage_type(cg, x->type.dtype), 0), "");
            start = LLVMBuildAdd(B, lo, LLVMBuildMul(B, i, w, ""), "");
        }
        LLVMValueRef hi = cat ? LLVMBuildAdd(B, start, w, "") : n;
        LLVMBasicBlockRef pre = LLVMGetInsertBlock(B);
        LLVMValueRef j = cg_loop_begin(cg, &cols, start, hi, "col");
        k->hoist = pre;
        k->inv[0] = LLVMGetEntryBasicBlock(cg->fn);
        k->inv[1] = rows.head;
        k->inv[2] = rows.body;
        k->inv[3] = mid ? mids.head : rows.body;
        k->inv[4] = mid ? mids.body : rows.body;
        k->piece_op = cat;
        k->piece = cat ? pc[p].first : 0;
        k->piece_var = j;
        k->piece_start = start;
        k->piece_base = ptr;
        idx[r - 1] = j;
        LLVMValueRef flat = LLVMBuildAdd(B, base, j, "");
        for (int o = 0; o < grp->nouts; o++)
            store_at(cg, k, grp->outs[o], rt, idx, flat);
        cg_loop_end(cg, &cols);
        k->hoist = NULL;
        if (ptr)
            cg_loop_end(cg, &run);
        lo = cat ? LLVMBuildAdd(B, lo, ptr ? LLVMBuildMul(B, w, cg_i64(cg, pc[p].n), "") : w, "") : lo;
    }
    k->piece_op = NULL;
    k->piece_base = NULL;
    if (mid)
        cg_loop_end(cg, &mids);
    LLVMValueRef next[MAX_RANK];
    if (odo) { /* the next row's index: the last axis up by one, carried */
        LLVMValueRef carry = LLVMConstInt(cg->t_i1, 1, false);
        for (int i = no - 1; i >= 0; i--) {
            LLVMValueRef up = LLVMBuildAdd(B, phi[i], LLVMBuildZExt(B, carry, cg->t_i64, ""), "");
            if (i == 0) {
                next[i] = up;
                break;
            }
            LLVMValueRef wrap = LLVMBuildICmp(B, LLVMIntEQ, up, cg_dim(cg, rt->dims[i]), "");
            next[i] = LLVMBuildSelect(B, wrap, cg_i64(cg, 0), up, "");
            carry = wrap;
        }
    }
    cg_loop_end(cg, &rows);
    if (odo) {
        LLVMBasicBlockRef latch = LLVMGetInstructionParent(rows.latch);
        for (int i = 0; i < no; i++)
            LLVMAddIncoming(phi[i], &next[i], &latch, 1);
    }
}

/* ---- reductions ---------------------------------------------------------- */

bool kern_is_reduction(const Op *op)
{
    return op->kind == OP_REDUCE || op->kind == OP_ARGMAX || op->kind == OP_ARGMIN;
}

void kern_reduced_axes(const Op *op, bool *red)
{
    memset(red, 0, MAX_RANK * sizeof *red);
    if (op->kind == OP_REDUCE) {
        const Attr *axes = op_attr(op, "axes");
        for (int i = 0; i < axes->n; i++)
            red[axes->ints[i]] = true;
    } else {
        red[op_attr_int(op, "axis", 0)] = true;
    }
}

const Op *kern_reduce_rows(const Group *grp, int *kax, int *nk, int *rax, int *nr, const Op **bad)
{
    const Op *first = NULL;
    for (int i = 0; i < grp->nops && !first; i++)
        if (kern_is_reduction(grp->ops[i]))
            first = grp->ops[i];
    *bad = NULL;
    *nk = *nr = 0;
    if (!first)
        return NULL;
    const Type *xt = &first->in[0]->type;
    bool red[MAX_RANK];
    kern_reduced_axes(first, red);
    for (int i = 0; i < xt->rank; i++) {
        if (red[i])
            rax[(*nr)++] = i;
        else
            kax[(*nk)++] = i;
    }
    for (int i = 0; i < grp->nops && !*bad; i++) {
        const Op *op = grp->ops[i];
        bool r2[MAX_RANK];
        if (!kern_is_reduction(op))
            continue;
        kern_reduced_axes(op, r2);
        if (!type_same_dims(&op->in[0]->type, xt) || memcmp(r2, red, sizeof r2) != 0)
            *bad = op;
    }
    return first;
}


/* Initial accumulator of a reduction. */
static LLVMValueRef acc_init(Cg *cg, Kern *k, const Op *op, DType dt)
{
    const char *kind = op->kind == OP_REDUCE ? op_attr_str(op, "kind", "sum") : "arg";
    LLVMTypeRef t = cg_compute_type(cg, dt);
    bool f = dtype_is_float(dt);
    if (!strcmp(kind, "sum") || !strcmp(kind, "mean"))
        return f ? LLVMConstReal(t, 0) : LLVMConstInt(t, 0, false);
    if (!strcmp(kind, "prod"))
        return f ? LLVMConstReal(t, 1) : LLVMConstInt(t, 1, false);
    bool is_max = !strcmp(kind, "max") || op->kind == OP_ARGMAX;
    if (f)
        return LLVMConstReal(t, is_max ? -__builtin_inf() : __builtin_inf());
    unsigned w = LLVMGetIntTypeWidth(t);
    bool u = dt == DT_U8 || dt == DT_U16 || dt == DT_U32 || dt == DT_U64 || dt == DT_BOOL;
    if (u)
        return LLVMConstInt(t, is_max ? 0 : ~0ull, false);
    unsigned long long minv = 1ull << (w - 1);
    return LLVMConstInt(t, is_max ? minv : minv - 1, false);
}

/* One reduction over the rows' reduced index space; caches its scalar. */
/* The combining op of a reduce. */
static OpKind reduce_op(const Op *op, DType dt)
{
    const char *kind = op_attr_str(op, "kind", "sum");
    OpKind bk = !strcmp(kind, "max") ? OP_MAX : !strcmp(kind, "min") ? OP_MIN : !strcmp(kind, "prod") ? OP_MUL : OP_ADD;
    if (dt == DT_BOOL && bk == OP_ADD)
        return OP_OR;
    if (dt == DT_BOOL && bk == OP_MUL)
        return OP_AND;
    return bk;
}

enum { LANES = 8 };

/* A float reduce over one trailing axis, in LANES independent partial
 * results (lane k takes the elements k, k + LANES, ...), combined at the
 * end: the loop body holds LANES copies of the element's computation, which
 * LLVM's SLP vectoriser turns into vector code (exp through libmvec), where
 * one running result would serialise every step. The order of a float sum
 * changes with it, as in every vectorised reduction. */
/* Combines two vectors of LANES floats as reduce op bk does its scalars
 * (kern_binary): add, or max/min with NaN winning. */
static LLVMValueRef vec_combine(Cg *cg, OpKind bk, LLVMValueRef a, LLVMValueRef b)
{
    if (bk == OP_ADD)
        return LLVMBuildFAdd(B, a, b, "");
    unsigned n = LLVMGetVectorSize(LLVMTypeOf(a));
    LLVMValueRef pick = LLVMBuildFCmp(B, bk == OP_MAX ? LLVMRealOGT : LLVMRealOLT, a, b, "");
    LLVMValueRef r = LLVMBuildSelect(B, pick, a, b, "");
    LLVMValueRef nans[LANES];
    for (unsigned l = 0; l < n; l++)
        nans[l] = LLVMConstReal(cg->t_f32, NAN);
    LLVMValueRef nan = LLVMConstVector(nans, n);
    return LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealUNO, a, b, ""), nan, r, "");
}

/* A vector of LANES accumulators of op's reduction, each its initial value. */
static LLVMValueRef vec_acc(Cg *cg, Kern *k, const Op *op)
{
    LLVMTypeRef vt = LLVMVectorType(cg->t_f32, LANES);
    LLVMValueRef init = acc_init(cg, k, op, DT_F32), lanes[LANES];
    for (int l = 0; l < LANES; l++)
        lanes[l] = init;
    LLVMValueRef acc = LLVMBuildAlloca(cg->eb, vt, "vacc");
    LLVMBuildStore(B, LLVMConstVector(lanes, LANES), acc);
    return acc;
}

/* The result of vector accumulators acc and the scalar lane0 that took
 * the row's tail after lane 0 of acc: lane0 in place of lane 0, then the
 * halves combined (lanes l and l + 4, then l and l + 2, then 0 and 1):
 * three steps deep where the lanes in order took seven, which a row of
 * 33 waited on twice (a softmax's maximum and sum). */
static LLVMValueRef vec_acc_result(Cg *cg, Kern *k, OpKind bk, LLVMValueRef acc, LLVMValueRef lane0)
{
    (void)k;
    LLVMValueRef va = LLVMBuildLoad2(B, LLVMVectorType(cg->t_f32, LANES), acc, "");
    va = LLVMBuildInsertElement(B, va, LLVMBuildLoad2(B, cg->t_f32, lane0, ""), cg_i32(cg, 0), "");
    for (int w = LANES / 2; w >= 1; w /= 2) {
        LLVMValueRef lo[LANES / 2], hi[LANES / 2];
        for (int l = 0; l < w; l++) {
            lo[l] = cg_i32(cg, l);
            hi[l] = cg_i32(cg, l + w);
        }
        LLVMValueRef a = LLVMBuildShuffleVector(B, va, va, LLVMConstVector(lo, (unsigned)w), "");
        LLVMValueRef b = LLVMBuildShuffleVector(B, va, va, LLVMConstVector(hi, (unsigned)w), "");
        va = vec_combine(cg, bk, a, b);
    }
    return LLVMBuildExtractElement(B, va, cg_i32(cg, 0), "");
}

/* The vector blocks of a row reduction: the LANES-float vectors at lo,
 * lo + LANES, ... up to the last whole block before lo + n, each from
 * at(k, ctx, index of its first element), combined into the accumulator
 * vacc (vec_acc). The loop takes nacc blocks a step into nacc accumulators,
 * folded into vacc after it (then the last blocks one at a time): one
 * accumulator made every step wait for the previous one's add or max (3
 * to 5 cycles), and a softmax's row of 512 took as long in its sum and
 * maximum as in its exp. Returns the count of elements taken. */
typedef LLVMValueRef (*VecAt)(Kern *k, void *ctx, LLVMValueRef at);

static LLVMValueRef vec_blocks(Cg *cg, Kern *k, const Op *op, OpKind bk, LLVMValueRef vacc, LLVMValueRef lo,
                               LLVMValueRef n, int nacc, VecAt at, void *ctx)
{
    LLVMTypeRef vt = LLVMVectorType(cg->t_f32, LANES);
    LLVMValueRef acc[4] = {vacc};
    for (int i = 1; i < nacc; i++)
        acc[i] = vec_acc(cg, k, op);
    LLVMValueRef blocks = LLVMBuildUDiv(B, n, cg_i64(cg, LANES), "");
    LLVMValueRef steps = LLVMBuildUDiv(B, blocks, cg_i64(cg, nacc), "");
    CgLoop l;
    LLVMValueRef c = cg_loop_begin(cg, &l, cg_i64(cg, 0), steps, "vstep");
    LLVMValueRef base = LLVMBuildAdd(B, lo, LLVMBuildMul(B, c, cg_i64(cg, LANES * nacc), ""), "");
    for (int i = 0; i < nacc; i++) {
        LLVMValueRef v = at(k, ctx, LLVMBuildAdd(B, base, cg_i64(cg, LANES * i), ""));
        LLVMBuildStore(B, vec_combine(cg, bk, LLVMBuildLoad2(B, vt, acc[i], ""), v), acc[i]);
    }
    cg_loop_end(cg, &l); /* not unrolled: the steps are unrolled already */
    for (int i = 1; i < nacc; i++)
        LLVMBuildStore(B, vec_combine(cg, bk, LLVMBuildLoad2(B, vt, vacc, ""), LLVMBuildLoad2(B, vt, acc[i], "")),
                       vacc);
    CgLoop r;
    c = cg_loop_begin(cg, &r, LLVMBuildMul(B, steps, cg_i64(cg, nacc), ""), blocks, "vblock");
    LLVMValueRef v = at(k, ctx, LLVMBuildAdd(B, lo, LLVMBuildMul(B, c, cg_i64(cg, LANES), ""), ""));
    LLVMBuildStore(B, vec_combine(cg, bk, LLVMBuildLoad2(B, vt, vacc, ""), v), vacc);
    r.hints = CG_NO_VECTORIZE; /* at most nacc - 1 blocks */
    cg_loop_end(cg, &r);
    return LLVMBuildMul(B, blocks, cg_i64(cg, LANES), "");
}

/* VecAt of the elements of x along axis ax (elem_at): their LANES values
 * gathered into a vector, which LLVM's SLP vectoriser (driver.c) turns
 * into vector code, loads and all */
typedef struct ElemAt {
    Value *x;
    LLVMValueRef *full;
    int ax;
    bool vec; /* as a vector (elem_vec) */
} ElemAt;

/* Whether the lanes of v along axis ax, its last, are emitted as one
 * vector (elem_vec) rather than lane by lane for the SLP vectoriser */
static bool lanes_as_vector(Kern *k, Value *v, int ax)
{
    return cg_rowvec() && ax == v->type.rank - 1 && kern_vec_ok(k, v, ax);
}

static LLVMValueRef elem_at(Kern *k, void *ctx, LLVMValueRef at)
{
    Cg *cg = k->cg;
    ElemAt *ea = ctx;
    if (ea->vec) {
        ea->full[ea->ax] = at;
        return elem_vec(k, ea->x, ea->full, ea->ax, LANES);
    }
    LLVMValueRef vec = LLVMGetUndef(LLVMVectorType(cg->t_f32, LANES));
    for (int l = 0; l < LANES; l++) {
        ea->full[ea->ax] = LLVMBuildAdd(B, at, cg_i64(cg, l), "");
        vec = LLVMBuildInsertElement(B, vec, elem(k, ea->x, ea->full), cg_i32(cg, l), "");
    }
    return vec;
}

/* VecAt of v's elements along axis ax (StoreAt), each also stored at its
 * index in the output k->cache_out: the row written and reduced in one
 * pass (row_to_out_reduce) */
typedef struct StoreAt {
    Value *v;
    LLVMValueRef *full;
    int ax;
    bool square;
    bool vec; /* as a vector (elem_vec) */
} StoreAt;

static LLVMValueRef lanes_of(Kern *k, StoreAt *sa, LLVMValueRef at, bool store)
{
    Cg *cg = k->cg;
    if (sa->vec) {
        sa->full[sa->ax] = at;
        LLVMValueRef vec = elem_vec(k, sa->v, sa->full, sa->ax, LANES);
        if (store) {
            LLVMTypeRef vt = LLVMVectorType(cg->t_f32, LANES);
            LLVMValueRef p = ptr_at(cg, k, k->cache_out, kern_offset(k, &sa->v->type, sa->full));
            LLVMSetAlignment(LLVMBuildStore(B, vec, LLVMBuildBitCast(B, p, LLVMPointerType(vt, 0), "")), 4);
        }
        return sa->square ? LLVMBuildFMul(B, vec, vec, "") : vec;
    }
    LLVMValueRef vec = LLVMGetUndef(LLVMVectorType(cg->t_f32, LANES)), e[LANES], at_l[LANES];
    for (int l = 0; l < LANES; l++) {
        at_l[l] = LLVMBuildAdd(B, at, cg_i64(cg, l), "");
        sa->full[sa->ax] = at_l[l];
        e[l] = elem(k, sa->v, sa->full);
    }
    /* every lane's loads before any store: the output may alias an input
     * as far as LLVM knows, and the SLP vectoriser, which has no run-time
     * check, keeps interleaved loads and stores scalar */
    for (int l = 0; l < LANES; l++) {
        sa->full[sa->ax] = at_l[l];
        if (store)
            cg_store(cg, DT_F32, e[l], ptr_at(cg, k, k->cache_out, kern_offset(k, &sa->v->type, sa->full)));
        vec = LLVMBuildInsertElement(B, vec, e[l], cg_i32(cg, l), "");
    }
    return sa->square ? LLVMBuildFMul(B, vec, vec, "") : vec;
}

static LLVMValueRef store_lanes(Kern *k, void *ctx, LLVMValueRef at)
{
    return lanes_of(k, ctx, at, true);
}

static LLVMValueRef elem_lanes(Kern *k, void *ctx, LLVMValueRef at)
{
    return lanes_of(k, ctx, at, false);
}

/* The row's elements from `from` to n (fewer than LANES) into lane 0 of
 * acc (stored too with store), and op's result recorded as a row value. */
static void row_reduce_rest(Cg *cg, Kern *k, const Op *op, StoreAt *sa, LLVMValueRef acc, LLVMValueRef from,
                            LLVMValueRef n, bool store)
{
    OpKind bk = reduce_op(op, DT_F32);
    LLVMValueRef first = LLVMBuildAlloca(cg->eb, cg->t_f32, "lane0");
    LLVMBuildStore(B, LLVMBuildExtractElement(B, LLVMBuildLoad2(B, LLVMVectorType(cg->t_f32, LANES), acc, ""),
                                              cg_i32(cg, 0), ""),
                   first);
    CgLoop lr; /* the rest goes to lane 0, as in lane_reduce */
    LLVMValueRef *full = sa->full;
    full[sa->ax] = cg_loop_begin(cg, &lr, from, n, "srest");
    LLVMValueRef e = elem(k, sa->v, full);
    if (store)
        cg_store(cg, DT_F32, e, ptr_at(cg, k, k->cache_out, kern_offset(k, &sa->v->type, full)));
    if (sa->square)
        e = LLVMBuildFMul(B, e, e, "");
    LLVMBuildStore(B, kern_binary(k, bk, DT_F32, LLVMBuildLoad2(B, cg->t_f32, first, ""), e), first);
    lr.hints = CG_NO_VECTORIZE; /* fewer than LANES */
    cg_loop_end(cg, &lr);
    LLVMValueRef r = vec_acc_result(cg, k, bk, acc, first);
    if (!strcmp(op_attr_str(op, "kind", "sum"), "mean"))
        r = LLVMBuildFDiv(B, r, LLVMBuildSIToFP(B, n, cg->t_f32, ""), "");
    k->rv[k->nr] = op->out[0];
    k->rval[k->nr++] = r;
}

/* One pass over the row at full (axis ax, n elements): v's element at
 * each index goes to the output k->cache_out, and op reduces them (their
 * squares with square) in the lanes of vec_blocks; recorded as a row
 * value. Writing the row and then reading it back for the reduction took
 * one more pass over it (a softmax's rows five, where ONNX Runtime's MLAS
 * takes three). */
static void row_to_out_reduce(Cg *cg, Kern *k, const Op *op, Value *v, LLVMValueRef *full, int ax, LLVMValueRef n,
                              bool square)
{
    LLVMValueRef acc = vec_acc(cg, k, op);
    StoreAt sa = {v, full, ax, square, lanes_as_vector(k, v, ax) && k->cache_out->type.dtype == DT_F32};
    LLVMValueRef from = vec_blocks(cg, k, op, reduce_op(op, DT_F32), acc, cg_i64(cg, 0), n, 4, store_lanes, &sa);
    row_reduce_rest(cg, k, op, &sa, acc, from, n, true);
}

/* The old way of the same: v's row to the output in a plain loop (which
 * LLVM vectorises, unswitching the broadcasting selects of a variant that
 * has them), then op's reduction of it read back from there (k->subst).
 * For the variant that may broadcast: its selects in every lane's index
 * kept row_to_out_reduce's loop scalar. */
static void row_to_out_then_reduce(Cg *cg, Kern *k, const Op *op, Value *v, LLVMValueRef *full, int ax,
                                   LLVMValueRef n, bool square)
{
    CgLoop l;
    full[ax] = cg_loop_begin(cg, &l, cg_i64(cg, 0), n, "torow");
    cg_store(cg, DT_F32, elem(k, v, full), ptr_at(cg, k, k->cache_out, kern_offset(k, &v->type, full)));
    cg_loop_end(cg, &l);
    Value *was = k->subst;
    k->subst = v;
    OpKind bk = reduce_op(op, DT_F32);
    LLVMValueRef acc = vec_acc(cg, k, op);
    StoreAt sa = {v, full, ax, square, lanes_as_vector(k, v, ax)};
    LLVMValueRef from = vec_blocks(cg, k, op, bk, acc, cg_i64(cg, 0), n, 4, elem_lanes, &sa);
    row_reduce_rest(cg, k, op, &sa, acc, from, n, false);
    k->subst = was;
}

/* The reductions of the row normalisations found by find_cache and
 * find_norm (rows over the last axis, f32): true if op was one. Their
 * rows go through the output, each written and reduced in one pass:
 *   softmax    T to out and max(T); E = exp(T - max) over T and sum(E)
 *   LayerNorm  T to out and mean(T); D = T - mean over T and mean(D * D)
 * and from then on elem reads the replaced value from out (k->subst).
 * Where an operand may broadcast, each in two (row_to_out_then_reduce). */
static bool emit_row_norm(Cg *cg, Kern *k, const Op *op, LLVMValueRef *full, int ax, LLVMValueRef n)
{
    Dim *bx[1], *br[1];
    void (*pass)(Cg *, Kern *, const Op *, Value *, LLVMValueRef *, int, LLVMValueRef, bool) =
        cg_broadcast_pairs(cg, k->grp, bx, br, 1) == 0 ? row_to_out_reduce : row_to_out_then_reduce;
    Value *x = op->in[0];
    if (op == k->cache_max || op == k->norm_mean) {
        pass(cg, k, op, x, full, ax, n, false);
        k->subst = x;
        if (op == k->norm_mean) {
            pass(cg, k, k->norm_var, k->norm_d, full, ax, n, true);
            k->subst = k->norm_d;
        }
        return true;
    }
    if (op == k->cache_red) {
        pass(cg, k, op, x, full, ax, n, false);
        return true;
    }
    return op == k->norm_var; /* reduced with its mean's second pass */
}

/* op's reduction of x over [lo, hi) of axis ax (full: the rest of the
 * index) in LANES interleaved accumulators, combined at the end; a mean is
 * not divided here. */
static LLVMValueRef lane_reduce(Cg *cg, Kern *k, const Op *op, LLVMValueRef *full, int ax, LLVMValueRef lo,
                                LLVMValueRef hi)
{
    Value *x = op->in[0];
    DType dt = x->type.dtype;
    LLVMTypeRef t = cg_compute_type(cg, dt);
    OpKind bk = reduce_op(op, dt);
    LLVMValueRef blocks = LLVMBuildUDiv(B, LLVMBuildSub(B, hi, lo, ""), cg_i64(cg, LANES), "");
    CgLoop lb, lr;
    LLVMValueRef v[LANES];
    if (t == cg->t_f32 && (bk == OP_ADD || bk == OP_MAX || bk == OP_MIN)) {
        /* vector accumulators: the lanes' elements gathered into a
         * vector (elem_at), combined as vectors (vec_blocks); LLVM's SLP
         * vectoriser left the NaN-aware max of eight scalar lanes scalar
         * (a softmax's row maximum) */
        LLVMTypeRef vt = LLVMVectorType(cg->t_f32, LANES);
        LLVMValueRef vacc = vec_acc(cg, k, op);
        ElemAt ea = {x, full, ax, lanes_as_vector(k, x, ax)};
        LLVMValueRef from = LLVMBuildAdd(
            B, lo, vec_blocks(cg, k, op, bk, vacc, lo, LLVMBuildSub(B, hi, lo, ""), 2, elem_at, &ea), "");
        LLVMValueRef first = LLVMBuildAlloca(cg->eb, cg->t_f32, "lane0");
        LLVMBuildStore(B, LLVMBuildExtractElement(B, LLVMBuildLoad2(B, vt, vacc, ""), cg_i32(cg, 0), ""), first);
        full[ax] = cg_loop_begin(cg, &lr, from, hi, "vrest");
        LLVMValueRef e = elem(k, x, full);
        LLVMBuildStore(B, kern_binary(k, bk, dt, LLVMBuildLoad2(B, t, first, ""), e), first);
        lr.hints = CG_NO_VECTORIZE; /* fewer than LANES */
        cg_loop_end(cg, &lr);
        return vec_acc_result(cg, k, bk, vacc, first);
    }
    LLVMValueRef acc[LANES];
    for (int l = 0; l < LANES; l++) {
        acc[l] = LLVMBuildAlloca(cg->eb, t, "lane");
        LLVMBuildStore(B, acc_init(cg, k, op, dt), acc[l]);
    }
    LLVMValueRef c = cg_loop_begin(cg, &lb, cg_i64(cg, 0), blocks, "block");
    LLVMValueRef base = LLVMBuildAdd(B, lo, LLVMBuildMul(B, c, cg_i64(cg, LANES), ""), "");
    for (int l = 0; l < LANES; l++) {
        full[ax] = LLVMBuildAdd(B, base, cg_i64(cg, l), "");
        v[l] = elem(k, x, full);
    }
    for (int l = 0; l < LANES; l++)
        LLVMBuildStore(B, kern_binary(k, bk, dt, LLVMBuildLoad2(B, t, acc[l], ""), v[l]), acc[l]);
    cg_loop_end(cg, &lb);
    LLVMValueRef from = LLVMBuildAdd(B, lo, LLVMBuildMul(B, blocks, cg_i64(cg, LANES), ""), "");
    LLVMValueRef j = cg_loop_begin(cg, &lr, from, hi, "rest");
    full[ax] = j;
    LLVMValueRef e = elem(k, x, full);
    LLVMBuildStore(B, kern_binary(k, bk, dt, LLVMBuildLoad2(B, t, acc[0], ""), e), acc[0]);
    cg_loop_end(cg, &lr);
    LLVMValueRef r = LLVMBuildLoad2(B, t, acc[0], "");
    for (int l = 1; l < LANES; l++)
        r = kern_binary(k, bk, dt, r, LLVMBuildLoad2(B, t, acc[l], ""));
    return r;
}

static bool emit_lane_reduction(Cg *cg, Kern *k, const Op *op, LLVMValueRef *idx, const int *rax, Dim *m)
{
    Value *x = op->in[0];
    LLVMValueRef n = cg_dim(cg, m);
    LLVMValueRef full[MAX_RANK];
    memcpy(full, idx, (size_t)x->type.rank * sizeof *full);
    if (emit_row_norm(cg, k, op, full, rax[0], n))
        return true;
    LLVMValueRef r = lane_reduce(cg, k, op, full, rax[0], cg_i64(cg, 0), n);
    if (!strcmp(op_attr_str(op, "kind", "sum"), "mean"))
        r = LLVMBuildFDiv(B, r, LLVMBuildSIToFP(B, n, cg_compute_type(cg, x->type.dtype), ""), "");
    k->rv[k->nr] = op->out[0];
    k->rval[k->nr++] = r;
    return true;
}

static bool emit_one_reduction(Cg *cg, Kern *k, const Op *op, LLVMValueRef *idx, const int *rax, int nr,
                               Dim *m)
{
    if (op->kind == OP_REDUCE && nr == 1 && dtype_is_float(op->in[0]->type.dtype) &&
        strcmp(op_attr_str(op, "kind", "sum"), "prod") != 0)
        return emit_lane_reduction(cg, k, op, idx, rax, m);
    Value *x = op->in[0];
    DType dt = x->type.dtype;
    LLVMTypeRef t = cg_compute_type(cg, dt);
    LLVMValueRef acc = LLVMBuildAlloca(cg->eb, t, "acc");
    LLVMValueRef best = LLVMBuildAlloca(cg->eb, cg->t_i64, "best");
    LLVMBuildStore(B, acc_init(cg, k, op, dt), acc);
    LLVMBuildStore(B, cg_i64(cg, 0), best);
    const char *kind = op->kind == OP_REDUCE ? op_attr_str(op, "kind", "sum") : "";
    bool last = op->kind != OP_REDUCE && op_attr_int(op, "last", 0);
    CgLoop l;
    LLVMValueRef j = cg_loop_begin(cg, &l, cg_i64(cg, 0), cg_dim(cg, m), "red");
    LLVMValueRef full[MAX_RANK];
    memcpy(full, idx, (size_t)x->type.rank * sizeof *full);
    split(cg, &x->type, rax, nr, j, full);
    LLVMValueRef v = elem(k, x, full);
    LLVMValueRef a = LLVMBuildLoad2(B, t, acc, "");
    if (op->kind == OP_REDUCE) {
        OpKind bk = !strcmp(kind, "max") ? OP_MAX : !strcmp(kind, "min") ? OP_MIN
                  : !strcmp(kind, "prod") ? OP_MUL : OP_ADD;
        if (dt == DT_BOOL && bk == OP_ADD)
            bk = OP_OR;
        else if (dt == DT_BOOL && bk == OP_MUL)
            bk = OP_AND;
        LLVMBuildStore(B, kern_binary(k, bk, dt, a, v), acc);
    } else {
        bool is_max = op->kind == OP_ARGMAX, f = dtype_is_float(dt);
        bool u = dt == DT_U8 || dt == DT_U16 || dt == DT_U32 || dt == DT_U64 || dt == DT_BOOL;
        LLVMValueRef better;
        if (f) { /* a NaN wins and keeps winning (the last one with select_last_index), as in the interpreter */
            better = LLVMBuildFCmp(B, is_max ? (last ? LLVMRealOGE : LLVMRealOGT) : (last ? LLVMRealOLE : LLVMRealOLT),
                                   v, a, "");
            LLVMValueRef vnan = LLVMBuildFCmp(B, LLVMRealUNO, v, v, ""), anan = LLVMBuildFCmp(B, LLVMRealUNO, a, a, "");
            LLVMValueRef after_nan = last ? vnan : LLVMConstInt(cg->t_i1, 0, false);
            better = LLVMBuildSelect(B, anan, after_nan, LLVMBuildOr(B, vnan, better, ""), "");
        } else
            better = LLVMBuildICmp(B, is_max ? (last ? (u ? LLVMIntUGE : LLVMIntSGE) : (u ? LLVMIntUGT : LLVMIntSGT))
                                             : (last ? (u ? LLVMIntULE : LLVMIntSLE) : (u ? LLVMIntULT : LLVMIntSLT)),
                                   v, a, "");
        /* the first element always counts (all -inf or NaN rows) */
        LLVMValueRef first = LLVMBuildICmp(B, LLVMIntEQ, j, cg_i64(cg, 0), "");
        better = LLVMBuildOr(B, better, first, "");
        LLVMBuildStore(B, LLVMBuildSelect(B, better, v, a, ""), acc);
        LLVMValueRef bi = LLVMBuildLoad2(B, cg->t_i64, best, "");
        LLVMValueRef pos = full[op_attr_int(op, "axis", 0)];
        LLVMBuildStore(B, LLVMBuildSelect(B, better, pos, bi, ""), best);
    }
    cg_loop_end(cg, &l);
    LLVMValueRef r;
    if (op->kind == OP_REDUCE) {
        r = LLVMBuildLoad2(B, t, acc, "");
        if (!strcmp(kind, "mean"))
            r = LLVMBuildFDiv(B, r, LLVMBuildSIToFP(B, cg_dim(cg, m), t, ""), "");
    } else {
        r = LLVMBuildLoad2(B, cg->t_i64, best, "");
    }
    k->rv[k->nr] = op->out[0];
    k->rval[k->nr++] = r;
    return true;
}

/* An output out = div(E, R) of the group, with R a float sum over the one
 * trailing reduced axis of E (keepdims) and out shaped like E (softmax's
 * last step): k->cache_red and cache_out. */
static void find_cache(Kern *k, const Type *xt)
{
    const Group *grp = k->grp;
    for (int o = 0; o < grp->nouts; o++) {
        Value *ov = grp->outs[o];
        const Op *d = ov->def;
        if (!d || d->kind != OP_DIV || !type_same_dims(&ov->type, xt) || ov->type.dtype != DT_F32)
            continue;
        const Op *r = d->in[1]->def;
        if (!r || r->kind != OP_REDUCE || r->in[0] != d->in[0] || !kern_in_group(k, r->out[0]) ||
            strcmp(op_attr_str(r, "kind", "sum"), "sum") != 0 || !op_attr_int(r, "keepdims", 1) ||
            r->in[0]->type.dtype != DT_F32)
            continue;
        /* out must not be read by the group itself (it is written twice) */
        bool read = false;
        for (int i = 0; i < grp->nops; i++)
            for (int j = 0; j < grp->ops[i]->nin; j++)
                read |= grp->ops[i]->in[j] == ov;
        if (read)
            continue;
        k->cache_red = r;
        k->cache_out = ov;
        /* softmax: E = exp(T - max(T)), T read by nothing else */
        const Op *e = r->in[0]->def, *sub = e && e->kind == OP_EXP ? e->in[0]->def : NULL;
        const Value *t = sub && sub->kind == OP_SUB ? sub->in[0] : NULL;
        const Op *mx = sub ? sub->in[1]->def : NULL;
        if (!t || !mx || mx->kind != OP_REDUCE || mx->in[0] != t || strcmp(op_attr_str(mx, "kind", ""), "max") ||
            !op_attr_int(mx, "keepdims", 1) || !kern_in_group(k, mx->out[0]) || !kern_in_group(k, t) ||
            !type_same_dims(&t->type, xt) || t->type.dtype != DT_F32)
            return;
        int uses = 0;
        for (int i = 0; i < grp->nops; i++)
            for (int j = 0; j < grp->ops[i]->nin; j++)
                uses += grp->ops[i]->in[j] == t;
        for (int i = 0; i < grp->nouts; i++)
            uses += 2 * (grp->outs[i] == t);
        if (uses == 2)
            k->cache_max = mx;
        return;
    }
}

static int uses_in_group(const Group *grp, const Value *v)
{
    int n = 0;
    for (int i = 0; i < grp->nops; i++)
        for (int j = 0; j < grp->ops[i]->nin; j++)
            n += grp->ops[i]->in[j] == v;
    return n;
}

static bool is_reduce_kind(const Op *op, const char *a, const char *b)
{
    if (!op || op->kind != OP_REDUCE || !op_attr_int(op, "keepdims", 1))
        return false;
    const char *kind = op_attr_str(op, "kind", "sum");
    return !strcmp(kind, a) || !strcmp(kind, b);
}

/* LayerNorm over the last axis: an output out (shaped like the rows, f32,
 * read by nothing in the group) of a group whose ops are all elementwise
 * or reductions, with mean = R1(T), D = T - mean, var = R2(D * D), where
 * R1, R2 are sums or means, T is read only by R1 and D, D * D only by R2.
 * Every value shaped like the rows is then read at the index it is
 * written, so T and then D can live in out. */
static void find_norm(Kern *k, const Type *xt)
{
    const Group *grp = k->grp;
    Value *out = NULL;
    for (int o = 0; o < grp->nouts && !out; o++)
        if (type_same_dims(&grp->outs[o]->type, xt) && grp->outs[o]->type.dtype == DT_F32 &&
            !uses_in_group(grp, grp->outs[o]))
            out = grp->outs[o];
    const Op *r1 = NULL, *r2 = NULL;
    int nred = 0;
    for (int i = 0; i < grp->nops; i++) {
        const Op *op = grp->ops[i];
        OpCat cat = op_info(op->kind)->cat;
        if (op->kind == OP_REDUCE) {
            if (nred == 0)
                r1 = op;
            else if (nred == 1)
                r2 = op;
            nred++;
        } else if (cat != CAT_UNARY && cat != CAT_BINARY && cat != CAT_ELEM) {
            return;
        }
    }
    if (!out || nred != 2 || !is_reduce_kind(r1, "mean", "sum") || !is_reduce_kind(r2, "mean", "sum"))
        return;
    Value *t = r1->in[0], *q = r2->in[0];
    const Op *qop = q->def, *dop = qop && qop->kind == OP_MUL && qop->in[0] == qop->in[1] ? qop->in[0]->def : NULL;
    if (!dop || dop->kind != OP_SUB || dop->in[0] != t || dop->in[1] != r1->out[0] || !kern_in_group(k, q) ||
        !kern_in_group(k, dop->out[0]) || !type_same_dims(&t->type, xt) || t->type.dtype != DT_F32 ||
        uses_in_group(grp, t) != 2 || uses_in_group(grp, q) != 1)
        return;
    for (int o = 0; o < grp->nouts; o++)
        if (grp->outs[o] == t || grp->outs[o] == dop->out[0] || grp->outs[o] == q)
            return;
    k->cache_out = out;
    k->norm_mean = r1;
    k->norm_var = r2;
    k->norm_d = dop->out[0];
}

/* ---- column reductions ---------------------------------------------------- */

/*
 * The column template (fuse_columns): the group's reductions keep the
 * innermost axis, a sum over axis 0 of [N, C], a mean over axis 1 of
 * [B, L, D]. The row template would walk each kept element's reduced
 * elements C apart, a cache line per element; here the innermost axis is
 * cut into blocks of COL_W consecutive columns (the last block shorter)
 * and the parallel range is (o, block), o the kept index without its
 * innermost axis (C is symbolic: the block count is a dim). A task merges
 * its consecutive blocks of one o into spans of up to COL_SPAN blocks, and
 * per span of columns c:
 *
 *   for each reduction, in group order:
 *       acc[c] = init
 *       for r over the reduced index, in order:
 *           acc[c] = acc[c] (op) x[o, r, c]     contiguous: vectorised
 *       mean: acc[c] /= R
 *   row-shaped outputs: for each c, with every reduction's result acc[c]
 *   full-shaped outputs: for each r, c, as above
 *
 * Small blocks give many tasks; wide spans read more of each row per
 * visit (rows C apart are a page apart for C = 1024: at 64 columns a
 * block's walk over r costs a TLB miss per 256 bytes). Sum over axis 0 of
 * f32[4096, 1024] on one thread (bench/bench_colred.c): 2.3 ms with spans
 * of 64 columns, 0.5 ms at 512, 0.35 ms at 1024; x - mean(x) there 3.9,
 * 3.0 and 1.7 ms. The spans follow the tasks, so many threads still get
 * many blocks. A later reduction reads the finished results of earlier
 * ones at its column (the variance after the mean). The accumulators live
 * in the entry block, one array of COL_W * COL_SPAN per reduction. argmax
 * and argmin over another axis than the last stay on the row template
 * (their index bookkeeping gains nothing from blocks).
 *
 * Every reduction result is read at the column being computed: elem()
 * returns the bound acc[c] whatever index it is asked for. col_reads_at
 * checks at compile time that the group's index maps (elementwise ops with
 * right-aligned broadcasting, broadcasts) carry each read of a reduction's
 * result to its own kept axes; a group where they do not (static dims that
 * happen to be equal) is refused and split up by the host flow.
 */
enum { COL_W = 64, COL_SPAN = 16 };

typedef struct Cols {
    const Type *xt;
    int kax[MAX_RANK], nk;      /* kept axes; the last one is the columns */
    int rax[MAX_RANK], nr;      /* reduced axes */
    const Op **red;             /* the reductions, in group order */
    LLVMTypeRef *t;             /* their compute types */
    LLVMValueRef *acc;          /* their accumulators: [COL_W * COL_SPAN x t] */
    int nred;
    int (*omap)[MAX_RANK];      /* per row-shaped output: col_row_map's map, */
    bool *has_map;              /* when it has one */
    Dim *R, *full, *rows;       /* reduced, full and kept element counts */
    LLVMValueRef idx[MAX_RANK]; /* the full index: o's axes set per span */
    LLVMValueRef orow, c0;      /* o as a flat index, the span's first column */
} Cols;

static bool elementwise(const Op *op)
{
    OpCat cat = op_info(op->kind)->cat;
    return cat == CAT_UNARY || cat == CAT_BINARY || cat == CAT_ELEM;
}

static bool group_has(const Group *grp, const Value *v)
{
    if (!v->def)
        return false;
    for (int i = 0; i < grp->nops; i++)
        if (grp->ops[i] == v->def)
            return true;
    return false;
}

bool col_reads_reduction(ColReads *c, const Value *v)
{
    if (!group_has(c->grp, v))
        return false;
    if (--c->budget < 0 || kern_is_reduction(v->def))
        return true;
    for (int i = 0; i < v->def->nin; i++)
        if (col_reads_reduction(c, v->def->in[i]))
            return true;
    return false;
}

bool col_reads_at(ColReads *c, const Value *v, const int *map)
{
    if (!group_has(c->grp, v))
        return true;
    const Op *op = v->def;
    int m[MAX_RANK];
    if (--c->budget < 0)
        return false;
    if (op->kind == OP_REDUCE) { /* its operand is checked on its own */
        bool keep = op_attr_int(op, "keepdims", 1);
        for (int i = 0; i < v->type.rank; i++)
            if (!dim_is(v->type.dims[i], 1) && map[i] != (keep ? i : c->kax[i]))
                return false;
        return true;
    }
    if (elementwise(op)) {
        for (int j = 0; j < op->nin; j++) {
            const Type *t = &op->in[j]->type;
            int off = v->type.rank - t->rank;
            for (int a = 0; a < t->rank; a++)
                m[a] = dim_is(t->dims[a], 1) ? -1 : map[a + off];
            if (!col_reads_at(c, op->in[j], m))
                return false;
        }
        return true;
    }
    if (op->kind == OP_BROADCAST) {
        const Attr *axes = op_attr(op, "axes");
        const Type *t = &op->in[0]->type;
        for (int a = 0; a < t->rank; a++)
            m[a] = dim_is(t->dims[a], 1) ? -1 : map[axes->ints[a]];
        return col_reads_at(c, op->in[0], m);
    }
    return !col_reads_reduction(c, v);
}

bool col_row_map(const ColReads *c, const Type *t, int *map)
{
    int a = 0;
    for (int i = 0; i < t->rank; i++) {
        Dim *d = t->dims[i];
        if (dim_is(d, 1)) {
            map[i] = -1;
            continue;
        }
        while (a < c->nk && c->xt->dims[c->kax[a]] != d && dim_is(c->xt->dims[c->kax[a]], 1))
            a++;
        if (a == c->nk || c->xt->dims[c->kax[a]] != d)
            return false;
        map[i] = c->kax[a++];
    }
    for (; a < c->nk; a++)
        if (!dim_is(c->xt->dims[c->kax[a]], 1))
            return false;
    return true;
}

/* Checks the group's reads of reduction results (see above) and finds the
 * maps of the row-shaped outputs. */
static bool col_check(Cg *cg, const Kern *k, Cols *x)
{
    const Group *grp = k->grp;
    ColReads c = {grp, x->xt, x->kax, x->nk, 1 << 16};
    int id[MAX_RANK];
    for (int i = 0; i < x->xt->rank; i++)
        id[i] = i;
    for (int i = 0; i < x->nred; i++)
        if (!col_reads_at(&c, x->red[i]->in[0], id))
            return false;
    for (int o = 0; o < grp->nouts; o++) {
        Value *ov = grp->outs[o];
        Dim *n = type_numel(&cg->g->dims, &ov->type);
        x->has_map[o] = n == x->rows && col_row_map(&c, &ov->type, x->omap[o]);
        const int *map = n == x->rows ? x->omap[o] : id;
        bool mapped = n == x->rows ? x->has_map[o] : type_same_dims(&ov->type, x->xt);
        if (mapped ? !col_reads_at(&c, ov, map) : col_reads_reduction(&c, ov))
            return false;
    }
    return true;
}

static LLVMValueRef acc_at(Cg *cg, Cols *x, int i, LLVMValueRef c)
{
    LLVMValueRef ix[2] = {cg_i64(cg, 0), c};
    return LLVMBuildGEP2(B, LLVMArrayType(x->t[i], COL_W * COL_SPAN), x->acc[i], ix, 2, "");
}

/* Binds the results of the first n reductions at column c of the span. */
static void col_bind(Cg *cg, Kern *k, Cols *x, int n, LLVMValueRef c)
{
    k->nr = n;
    for (int i = 0; i < n; i++) {
        k->rv[i] = x->red[i]->out[0];
        k->rval[i] = LLVMBuildLoad2(B, x->t[i], acc_at(cg, x, i, c), "");
    }
}

/* Sets the full index at column c of the span; returns c0 + c. */
static LLVMValueRef col_at(Cg *cg, Cols *x, LLVMValueRef c)
{
    LLVMValueRef j = LLVMBuildAdd(B, x->c0, c, "");
    x->idx[x->xt->rank - 1] = j;
    return j;
}

/* One span of w consecutive columns from c0, at most COL_W * COL_SPAN. */
static void col_block(Cg *cg, Kern *k, Cols *x, LLVMValueRef w)
{
    const Group *grp = k->grp;
    const Type *xt = x->xt;
    LLVMValueRef zero = cg_i64(cg, 0), rn = cg_dim(cg, x->R);
    CgLoop lc, lr;
    for (int i = 0; i < x->nred; i++) {
        const Op *op = x->red[i];
        Value *in = op->in[0];
        DType dt = in->type.dtype;
        OpKind bk = reduce_op(op, dt);
        LLVMValueRef c = cg_loop_begin(cg, &lc, zero, w, "cinit");
        LLVMBuildStore(B, acc_init(cg, k, op, dt), acc_at(cg, x, i, c));
        cg_loop_end(cg, &lc);
        /* rows four at a time: each accumulator is loaded and stored once
         * per four rows, its sum taken in the same order (row by row), so
         * the result is the same bit for bit; a row at a time, the chain
         * through the stored accumulator (store, forward, add) set the
         * pace (the recommender's pooling over [16, 100, 64]: 6.5 us) */
        LLVMValueRef fours = LLVMBuildSDiv(B, rn, cg_i64(cg, 4), "");
        LLVMValueRef q = cg_loop_begin(cg, &lr, zero, fours, "cred4");
        LLVMValueRef rix[4][MAX_RANK];
        for (int u = 0; u < 4; u++) {
            LLVMValueRef ru = LLVMBuildAdd(B, LLVMBuildMul(B, q, cg_i64(cg, 4), ""), cg_i64(cg, u), "");
            split(cg, xt, x->rax, x->nr, ru, x->idx);
            memcpy(rix[u], x->idx, sizeof rix[u]);
        }
        c = cg_loop_begin(cg, &lc, zero, w, "col4");
        col_bind(cg, k, x, i, c);
        LLVMValueRef p4 = acc_at(cg, x, i, c), a4 = LLVMBuildLoad2(B, x->t[i], p4, "");
        for (int u = 0; u < 4; u++) {
            memcpy(x->idx, rix[u], sizeof rix[u]);
            col_at(cg, x, c);
            a4 = kern_binary(k, bk, dt, a4, elem(k, in, x->idx));
        }
        LLVMBuildStore(B, a4, p4);
        cg_loop_end(cg, &lc);
        cg_loop_end(cg, &lr);
        LLVMValueRef r = cg_loop_begin(cg, &lr, LLVMBuildMul(B, fours, cg_i64(cg, 4), ""), rn, "cred");
        split(cg, xt, x->rax, x->nr, r, x->idx);
        c = cg_loop_begin(cg, &lc, zero, w, "col");
        col_at(cg, x, c);
        col_bind(cg, k, x, i, c);
        LLVMValueRef v = elem(k, in, x->idx), p = acc_at(cg, x, i, c);
        LLVMBuildStore(B, kern_binary(k, bk, dt, LLVMBuildLoad2(B, x->t[i], p, ""), v), p);
        cg_loop_end(cg, &lc);
        cg_loop_end(cg, &lr);
        if (!strcmp(op_attr_str(op, "kind", "sum"), "mean")) {
            LLVMValueRef div = LLVMBuildSIToFP(B, rn, x->t[i], "");
            c = cg_loop_begin(cg, &lc, zero, w, "cmean");
            p = acc_at(cg, x, i, c);
            LLVMBuildStore(B, LLVMBuildFDiv(B, LLVMBuildLoad2(B, x->t[i], p, ""), div, ""), p);
            cg_loop_end(cg, &lc);
        }
    }
    bool any_full = false;
    LLVMValueRef c = cg_loop_begin(cg, &lc, zero, w, "crow");
    LLVMValueRef j = col_at(cg, x, c);
    col_bind(cg, k, x, x->nred, c);
    LLVMValueRef off = LLVMBuildAdd(B, LLVMBuildMul(B, x->orow, cg_dim(cg, xt->dims[xt->rank - 1]), ""), j, "");
    for (int o = 0; o < grp->nouts; o++) {
        Value *ov = grp->outs[o];
        Dim *n = type_numel(&cg->g->dims, &ov->type);
        LLVMValueRef oidx[MAX_RANK];
        if (n != x->rows) {
            any_full = true;
            continue;
        }
        if (x->has_map[o])
            for (int a = 0; a < ov->type.rank; a++)
                oidx[a] = x->omap[o][a] < 0 ? zero : x->idx[x->omap[o][a]];
        else
            kern_unflatten(k, &ov->type, off, oidx);
        store_out(cg, k, ov, oidx, off);
    }
    cg_loop_end(cg, &lc);
    if (!any_full)
        return;
    LLVMValueRef r = cg_loop_begin(cg, &lr, zero, rn, "cout");
    split(cg, xt, x->rax, x->nr, r, x->idx);
    c = cg_loop_begin(cg, &lc, zero, w, "col");
    col_at(cg, x, c);
    col_bind(cg, k, x, x->nred, c);
    off = kern_offset(k, xt, x->idx);
    for (int o = 0; o < grp->nouts; o++)
        if (type_numel(&cg->g->dims, &grp->outs[o]->type) != x->rows)
            store_at(cg, k, grp->outs[o], xt, x->idx, off);
    cg_loop_end(cg, &lc);
    cg_loop_end(cg, &lr);
}

static bool emit_columns(Cg *cg, Kern *k, KernelInfo *ki, LLVMValueRef begin, LLVMValueRef end, Cols *x)
{
    const Group *grp = k->grp;
    const Type *xt = x->xt;
    DimCtx *dc = &cg->g->dims;
    const Op *red[grp->nops + 1];
    LLVMTypeRef t[grp->nops + 1];
    LLVMValueRef acc[grp->nops + 1];
    int omap[grp->nouts + 1][MAX_RANK];
    bool has_map[grp->nouts + 1];
    x->red = red;
    x->t = t;
    x->acc = acc;
    x->omap = omap;
    x->has_map = has_map;
    x->nred = 0;
    for (int i = 0; i < grp->nops; i++) {
        const Op *op = grp->ops[i];
        if (!kern_is_reduction(op))
            continue;
        t[x->nred] = cg_compute_type(cg, op->in[0]->type.dtype);
        acc[x->nred] = LLVMBuildAlloca(cg->eb, LLVMArrayType(t[x->nred], COL_W * COL_SPAN), "cacc");
        red[x->nred++] = op;
    }
    x->R = prod(cg, xt, x->rax, x->nr);
    x->rows = prod(cg, xt, x->kax, x->nk);
    x->full = type_numel(dc, xt);
    for (int o = 0; o < grp->nouts; o++) {
        Dim *n = type_numel(dc, &grp->outs[o]->type);
        if (n != x->rows && n != x->full)
            return diag_set(cg->d, "codegen: an output of group %d is neither row- nor input-shaped", grp->id);
    }
    if (!col_check(cg, k, x))
        return diag_set(cg->d, "codegen: group %d reads a column reduction's result off its column", grp->id);
    Dim *cols = xt->dims[xt->rank - 1], *w = dim_const(dc, COL_W);
    Dim *blocks = dim_ceildiv(dc, cols, w);
    ki->range = dim_mul(dc, prod(cg, xt, x->kax, x->nk - 1), blocks);
    /* about 32K elements per task at least (small reductions stay on one
     * thread), and half an o's blocks up to half a span, so that a task's
     * spans stay wide when there are few blocks */
    Dim *work = dim_max(dc, dim_mul(dc, x->R, dim_min(dc, cols, w)), dim_const(dc, 1));
    Dim *half = dim_min(dc, dim_ceildiv(dc, blocks, dim_const(dc, 2)), dim_const(dc, COL_SPAN / 2));
    ki->grain_dim = dim_max(dc, dim_ceildiv(dc, dim_const(dc, 1 << 15), work), half);
    ki->grain = 1;
    for (int i = 0; i < xt->rank; i++)
        x->idx[i] = cg_i64(cg, 0);
    /* for (q = begin; q < end; q += span) */
    LLVMValueRef nb = cg_dim(cg, blocks), nc = cg_dim(cg, cols);
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(B);
    LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "cspan");
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "body");
    LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "exit");
    LLVMBuildBr(B, head);
    LLVMPositionBuilderAtEnd(B, head);
    LLVMValueRef q = LLVMBuildPhi(B, cg->t_i64, "q");
    LLVMAddIncoming(q, &begin, &pre, 1);
    LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLT, q, end, ""), body, exit);
    LLVMPositionBuilderAtEnd(B, body);
    x->orow = LLVMBuildUDiv(B, q, nb, "");
    LLVMValueRef b = LLVMBuildURem(B, q, nb, "");
    x->c0 = LLVMBuildMul(B, b, cg_i64(cg, COL_W), "");
    split(cg, xt, x->kax, x->nk - 1, x->orow, x->idx);
    /* the span: up to COL_SPAN blocks of this task and this o */
    LLVMValueRef span = LLVMBuildSub(B, end, q, ""), left = LLVMBuildSub(B, nb, b, "");
    span = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, left, span, ""), left, span, "");
    span = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, cg_i64(cg, COL_SPAN), span, ""), cg_i64(cg, COL_SPAN),
                           span, "");
    LLVMValueRef width = LLVMBuildMul(B, span, cg_i64(cg, COL_W), ""), rest = LLVMBuildSub(B, nc, x->c0, "");
    width = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, rest, width, ""), rest, width, "");
    if (dim_is_const(cols) && cols->c <= COL_W) /* one block an o, all its columns: a constant trip count
                                                * (a blocked layout's 16 lanes, one vector) */
        width = cg_i64(cg, cols->c);
    col_block(cg, k, x, width);
    LLVMValueRef next = LLVMBuildAdd(B, q, span, "");
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(B);
    LLVMBuildBr(B, head);
    LLVMAddIncoming(q, &next, &latch, 1);
    LLVMPositionBuilderAtEnd(B, exit);
    return true;
}

static bool emit_reduce(Cg *cg, Kern *k, KernelInfo *ki, LLVMValueRef begin, LLVMValueRef end)
{
    const Group *grp = k->grp;
    int kax[MAX_RANK], rax[MAX_RANK], nk, nr;
    const Op *bad, *first = kern_reduce_rows(grp, kax, &nk, rax, &nr, &bad);
    if (!first)
        return diag_set(cg->d, "codegen: a %s group without a reduction", fuse_kind_name(grp->kind));
    if (bad)
        return diag_set(cg->d, "codegen: the reductions of group %d do not share their rows", grp->id);
    const Type *xt = &first->in[0]->type;
    if (fuse_columns(grp)) {
        Cols x = {.xt = xt, .nk = nk, .nr = nr};
        memcpy(x.kax, kax, sizeof kax);
        memcpy(x.rax, rax, sizeof rax);
        return emit_columns(cg, k, ki, begin, end, &x);
    }
    Dim *p = prod(cg, xt, kax, nk), *m = prod(cg, xt, rax, nr);
    k->cache_red = NULL;
    k->cache_out = NULL;
    k->cache_max = NULL;
    k->subst = NULL;
    k->norm_mean = k->norm_var = NULL;
    k->norm_d = NULL;
    if (nr == 1 && rax[0] == xt->rank - 1) { /* rows contiguous in memory */
        find_cache(k, xt);
        if (!k->cache_red)
            find_norm(k, xt);
    }
    ki->range = p;
    ki->grain = dim_is_const(m) && m->c > 0 ? (m->c >= 4096 ? 1 : 4096 / m->c) : 4;
    CgLoop rows;
    LLVMValueRef q = cg_loop_begin(cg, &rows, begin, end, "row");
    LLVMValueRef idx[MAX_RANK];
    for (int i = 0; i < xt->rank; i++)
        idx[i] = cg_i64(cg, 0);
    split(cg, xt, kax, nk, q, idx);
    k->nr = 0;
    for (int i = 0; i < grp->nops; i++)
        if (kern_is_reduction(grp->ops[i]))
            emit_one_reduction(cg, k, grp->ops[i], idx, rax, nr, m);
    Dim *full = type_numel(&cg->g->dims, xt);
    LLVMValueRef oidx[MAX_RANK];
    bool any_full = false;
    for (int o = 0; o < grp->nouts; o++) {
        Value *ov = grp->outs[o];
        Dim *n = type_numel(&cg->g->dims, &ov->type);
        if (n == p) {
            kern_unflatten(k, &ov->type, q, oidx);
            store_out(cg, k, ov, oidx, q);
        } else if (n == full) {
            any_full = true;
        } else {
            return diag_set(cg->d, "codegen: an output of group %d is neither row- nor input-shaped", grp->id);
        }
    }
    if (any_full) {
        CgLoop l;
        LLVMValueRef j = cg_loop_begin(cg, &l, cg_i64(cg, 0), cg_dim(cg, m), "out");
        LLVMValueRef fi[MAX_RANK];
        memcpy(fi, idx, (size_t)xt->rank * sizeof *fi);
        split(cg, xt, rax, nr, j, fi);
        LLVMValueRef off = kern_offset(k, xt, fi);
        for (int o = 0; o < grp->nouts; o++) {
            Value *ov = grp->outs[o];
            Dim *n = type_numel(&cg->g->dims, &ov->type);
            if (ov == k->cache_out && k->cache_red) { /* E / R, E stored by the reduction */
                LLVMValueRef ptr = ptr_at(cg, k, ov, off), r = NULL;
                for (int i = 0; i < k->nr; i++)
                    if (k->rv[i] == k->cache_red->out[0])
                        r = k->rval[i];
                LLVMValueRef e = cg_load(cg, ov->type.dtype, ptr);
                cg_store(cg, ov->type.dtype, kern_div_invariant(k, e, r), ptr);
            } else if (n == full && n != p) {
                store_at(cg, k, ov, xt, fi, off);
            }
        }
        cg_loop_end(cg, &l);
    }
    cg_loop_end(cg, &rows);
    return true;
}

/* Starts the function of a kernel of grp: its name and description (tag
 * after the kind), the buffer pointers into k->bv, k->bp (room for nins +
 * nouts) and the symbols. Returns the body block; the builder is in it. */
static LLVMBasicBlockRef kern_open(Cg *cg, const Group *grp, Kern *k, KernelInfo *ki, const char *tag)
{
    snprintf(ki->name, sizeof ki->name, "disc_k%d", cg->nkernels);
    /* host.c made its entry in the kernel tables (kernel_room) */
    char buf[256];
    int n = snprintf(buf, sizeof buf, "%s %s%s:", ki->name, fuse_kind_name(grp->kind), tag);
    for (int i = 0; i < grp->nops && n > 0 && (size_t)n < sizeof buf; i++)
        n += snprintf(buf + n, sizeof buf - (size_t)n, " %s", op_info(grp->ops[i]->kind)->name);
    if (!(cg->kdesc[cg->nkernels] = strdup(buf)))
        graph_oom(cg->g);
    cg->nkernels++;
    LLVMValueRef fn = LLVMAddFunction(cg->mod, ki->name, cg->t_kernel);
    ki->fn = fn;
    /* a loop or input kernel's vectors as wide as the CPU's where it is
     * worth it (cpu.c, prefer_width); not a stitch kernel's rows, which are
     * often short (attention's softmax over 33 keys ran 47% slower at 16
     * lanes: its vector body, 16 lanes times the interleaving, longer than
     * the row) */
    if ((grp->kind == FUSE_LOOP || grp->kind == FUSE_INPUT) && cg->cpu && cg->cpu->prefer_bits) {
        char w[8];
        snprintf(w, sizeof w, "%d", cg->cpu->prefer_bits);
        LLVMAddTargetDependentFunctionAttr(fn, "prefer-vector-width", w);
    }
    cg_begin_function(cg, fn, NULL);
    LLVMBasicBlockRef body = LLVMGetInsertBlock(B);
    k->cg = cg;
    k->grp = grp;
    k->nb = grp->nins + grp->nouts;
    LLVMValueRef args = LLVMBuildBitCast(cg->eb, LLVMGetParam(fn, 2), cg->t_pp8, "args");
    for (int i = 0; i < k->nb; i++) {
        Value *v = i < grp->nins ? grp->ins[i] : grp->outs[i - grp->nins];
        LLVMValueRef ix = cg_i64(cg, i);
        LLVMValueRef raw = LLVMBuildLoad2(cg->eb, cg->t_p8, LLVMBuildGEP2(cg->eb, cg->t_p8, args, &ix, 1, ""), "");
        k->bv[i] = v;
        k->bp[i] = LLVMBuildBitCast(cg->eb, raw, LLVMPointerType(cg_storage_type(cg, v->type.dtype), 0), "");
        /* an output written over an input (in place, of its dtype) through
         * the input's own pointer: the vectoriser sees one base and no
         * overlap to check, where two equal pointers would fail its
         * run-time check and run the scalar loop */
        int o = i - grp->nins;
        if (o >= 0 && grp->over && grp->over[o] >= 0)
            k->bp[i] = k->bp[grp->over[o]];
    }
    LLVMValueRef ix = cg_i64(cg, k->nb);
    LLVMValueRef sraw = LLVMBuildLoad2(cg->eb, cg->t_p8, LLVMBuildGEP2(cg->eb, cg->t_p8, args, &ix, 1, ""), "");
    cg->syms = LLVMBuildBitCast(cg->eb, sraw, cg->t_p64, "syms");
    return body;
}

/* The buffer (index into k->bp) that pointer v is an address in, through
 * GEPs and casts, or -1. */
static int buffer_of(const Kern *k, LLVMValueRef v)
{
    for (int depth = 0; v && depth < 64; depth++) {
        for (int i = 0; i < k->nb; i++)
            if (k->bp[i] == v)
                return i;
        if (!LLVMIsAGetElementPtrInst(v) && !LLVMIsABitCastInst(v))
            return -1;
        v = LLVMGetOperand(v, 0);
    }
    return -1;
}

/* Tells LLVM that the kernel's buffers do not overlap: every load and
 * store (and masked vector one) of buffer i gets scope i and "no alias"
 * with every other buffer's scope (scoped alias metadata, one domain per
 * kernel). They are distinct memory: the memory plan gives values live at
 * once distinct slots, an output written over an input in place uses the
 * input's pointer (one scope), and a caller's output buffers may not
 * overlap its inputs (disc.h). Without it LLVM's loop vectoriser needs
 * run-time overlap checks, and for a short inner loop (a channels-last
 * row of 8) it takes none and leaves the loop scalar: ppocr_cls_qdq's
 * quantize-dequantize chains ran 5-8x slower. */
static void kern_alias_scopes(Cg *cg, Kern *k, LLVMValueRef fn, const char *name)
{
    LLVMContextRef c = cg->ctx;
    int nb = k->nb, scope[nb + 1];
    LLVMMetadataRef sc[nb + 1], others[nb + 1];
    char buf[96];
    int n = snprintf(buf, sizeof buf, "%s buffers", name);
    LLVMMetadataRef dname = LLVMMDStringInContext2(c, buf, (size_t)n);
    LLVMMetadataRef domain = LLVMMDNodeInContext2(c, &dname, 1);
    for (int i = 0; i < nb; i++) {
        scope[i] = i;
        for (int j = 0; j < i; j++)
            if (k->bp[j] == k->bp[i])
                scope[i] = scope[j];
        n = snprintf(buf, sizeof buf, "%s b%d", name, scope[i]);
        LLVMMetadataRef ops[2] = {LLVMMDStringInContext2(c, buf, (size_t)n), domain};
        sc[i] = LLVMMDNodeInContext2(c, ops, 2);
    }
    unsigned kscope = LLVMGetMDKindIDInContext(c, "alias.scope", 11);
    unsigned knoalias = LLVMGetMDKindIDInContext(c, "noalias", 7);
    LLVMValueRef mine[nb + 1], theirs[nb + 1];
    for (int i = 0; i < nb; i++) {
        int m = 0;
        for (int j = 0; j < nb; j++)
            if (scope[j] == j && j != scope[i])
                others[m++] = sc[j];
        mine[i] = LLVMMetadataAsValue(c, LLVMMDNodeInContext2(c, &sc[scope[i]], 1));
        theirs[i] = m ? LLVMMetadataAsValue(c, LLVMMDNodeInContext2(c, others, (size_t)m)) : NULL;
    }
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb))
        for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in)) {
            LLVMValueRef ptr = NULL;
            if (LLVMIsALoadInst(in)) {
                ptr = LLVMGetOperand(in, 0);
            } else if (LLVMIsAStoreInst(in)) {
                ptr = LLVMGetOperand(in, 1);
            } else if (LLVMIsACallInst(in)) {
                size_t len;
                LLVMValueRef callee = LLVMGetCalledValue(in);
                const char *fname = callee ? LLVMGetValueName2(callee, &len) : "";
                if (!strncmp(fname, "llvm.masked.load.", 17))
                    ptr = LLVMGetOperand(in, 0);
                else if (!strncmp(fname, "llvm.masked.store.", 18))
                    ptr = LLVMGetOperand(in, 1);
            }
            int b = ptr ? buffer_of(k, ptr) : -1;
            if (b < 0)
                continue;
            LLVMSetMetadata(in, kscope, mine[b]);
            if (theirs[b])
                LLVMSetMetadata(in, knoalias, theirs[b]);
        }
}

typedef bool KernBody(Cg *cg, Kern *k, KernelInfo *ki, void *ctx);

/* Emits one kernel function of grp whose code body() writes, with the
 * buffers and the room for row values in this frame. */
static bool kern_emit(Cg *cg, const Group *grp, KernelInfo *ki, const char *tag, KernBody *body, void *ctx)
{
    Kern k = {0};
    Value *bv[grp->nins + grp->nouts + 1];
    LLVMValueRef bp[grp->nins + grp->nouts + 1];
    Value *rv[grp->nops + 1];
    LLVMValueRef rval[grp->nops + 1];
    k.bv = bv;
    k.bp = bp;
    k.rv = rv;
    k.rval = rval;
    LLVMBasicBlockRef bb = kern_open(cg, grp, &k, ki, tag);
    bool ok = body(cg, &k, ki, ctx);
    LLVMBuildRetVoid(B);
    cg_end_function(cg, bb);
    if (ok)
        kern_alias_scopes(cg, &k, ki->fn, ki->name);
    return ok && !cg->d->set;
}

static bool group_body(Cg *cg, Kern *k, KernelInfo *ki, void *ctx)
{
    (void)ctx;
    LLVMValueRef begin = LLVMGetParam(ki->fn, 0), end = LLVMGetParam(ki->fn, 1);
    if (k->grp->kind == FUSE_INPUT || k->grp->kind == FUSE_STITCH)
        return emit_reduce(cg, k, ki, begin, end);
    return speculated(cg, k, ki, begin, end, loop_body);
}

bool cg_kernel(Cg *cg, const Group *grp, KernelInfo *ki)
{
    return kern_emit(cg, grp, ki, fuse_columns(grp) ? " columns" : "", group_body, NULL);
}

/* ---- split rows ----------------------------------------------------------- */

/*
 * Few long rows (a sum over all of a vector, a norm of one large tensor):
 * the row template gives each thread whole rows, so with fewer rows than
 * threads the others idle. The split variant cuts every row into
 * DISC_SPLIT_PARTS parts: a first kernel reduces each part into a scratch
 * slot (range rows * parts), a second combines each row's parts in order
 * and computes the group's row-shaped outputs (range rows). The host flow
 * takes it when rows < 2 * threads and the rows are at least
 * DISC_SPLIT_MIN long (run-time predicates; codegen/host.c), else the row
 * kernel. It needs reductions over the last axis only, of float sums,
 * means, maxima or minima that read no other reduction's result (a
 * softmax or LayerNorm needs its first result before the second pass),
 * and no output shaped like the input.
 */
bool cg_split_fits(const Group *grp, Dim **rows, Dim **len, int *nred, DimCtx *cx)
{
    if ((grp->kind != FUSE_INPUT && grp->kind != FUSE_STITCH) || fuse_columns(grp))
        return false;
    const Type *xt = NULL;
    int n = 0;
    bool tainted[grp->nops + 1];
    for (int i = 0; i < grp->nops; i++) {
        const Op *op = grp->ops[i];
        tainted[i] = false;
        for (int j = 0; j < op->nin; j++) /* reads a reduction's result, directly or not */
            for (int q = 0; q < i; q++)
                if (op->in[j]->def == grp->ops[q] && (tainted[q] || kern_is_reduction(grp->ops[q])))
                    tainted[i] = true;
        if (!kern_is_reduction(op))
            continue;
        const char *kind = op_attr_str(op, "kind", "sum");
        const Type *t = &op->in[0]->type;
        bool red[MAX_RANK];
        if (op->kind != OP_REDUCE || !dtype_is_float(t->dtype) || tainted[i] || t->rank < 1 ||
            (strcmp(kind, "sum") && strcmp(kind, "mean") && strcmp(kind, "max") && strcmp(kind, "min")))
            return false;
        kern_reduced_axes(op, red);
        for (int a = 0; a < t->rank; a++)
            if (red[a] != (a == t->rank - 1))
                return false;
        if (xt && !type_same_dims(xt, t))
            return false;
        xt = t;
        n++;
    }
    if (!xt)
        return false;
    int kax[MAX_RANK];
    for (int i = 0; i < xt->rank - 1; i++)
        kax[i] = i;
    Dim *p = dim_const(cx, 1);
    for (int i = 0; i < xt->rank - 1; i++)
        p = dim_mul(cx, p, xt->dims[kax[i]]);
    for (int o = 0; o < grp->nouts; o++)
        if (type_numel(cx, &grp->outs[o]->type) != p)
            return false;
    *rows = p;
    *len = xt->dims[xt->rank - 1];
    *nred = n;
    return true;
}

/* The scratch slot (8 bytes, the reduction's compute type) of part t of
 * reduction i. */
static LLVMValueRef split_slot(Cg *cg, LLVMValueRef scratch, LLVMValueRef t, int nred, int i, LLVMTypeRef ty)
{
    LLVMValueRef at = LLVMBuildAdd(B, LLVMBuildMul(B, t, cg_i64(cg, nred), ""), cg_i64(cg, i), "");
    LLVMValueRef p = LLVMBuildGEP2(B, cg->t_i64, LLVMBuildBitCast(B, scratch, cg->t_p64, ""), &at, 1, "");
    return LLVMBuildBitCast(B, p, LLVMPointerType(ty, 0), "");
}

typedef struct SplitPass {
    int pass;                  /* 0: the parts, 1: the combine */
    Dim *rows, *len;
    int nred;
} SplitPass;

static bool split_body(Cg *cg, Kern *k, KernelInfo *ki, void *ctx)
{
    const SplitPass *s = ctx;
    const Group *grp = k->grp;
    DimCtx *cx = &cg->g->dims;
    int pass = s->pass, nred = s->nred;
    Dim *rows = s->rows, *len = s->len;
    LLVMValueRef ix = cg_i64(cg, k->nb + 1);
    LLVMValueRef args = LLVMBuildBitCast(cg->eb, LLVMGetParam(ki->fn, 2), cg->t_pp8, "");
    LLVMValueRef scratch = LLVMBuildLoad2(cg->eb, cg->t_p8, LLVMBuildGEP2(cg->eb, cg->t_p8, args, &ix, 1, ""),
                                          "scratch");
    LLVMValueRef m = cg_dim(cg, len), parts = cg_i64(cg, DISC_SPLIT_PARTS);
    ki->range = pass ? rows : dim_mul(cx, rows, dim_const(cx, DISC_SPLIT_PARTS));
    ki->grain = 1;
    CgLoop l;
    LLVMValueRef t = cg_loop_begin(cg, &l, LLVMGetParam(ki->fn, 0), LLVMGetParam(ki->fn, 1), "task");
    LLVMValueRef q = pass ? t : LLVMBuildSDiv(B, t, parts, "");
    const Type *xt = NULL;
    for (int i = 0; i < grp->nops && !xt; i++)
        if (kern_is_reduction(grp->ops[i]))
            xt = &grp->ops[i]->in[0]->type;
    int kax[MAX_RANK], last = xt->rank - 1;
    for (int i = 0; i < last; i++)
        kax[i] = i;
    LLVMValueRef idx[MAX_RANK];
    for (int i = 0; i < xt->rank; i++)
        idx[i] = cg_i64(cg, 0);
    split(cg, xt, kax, last, q, idx);
    k->nr = 0;
    int r = 0;
    for (int i = 0; i < grp->nops; i++) {
        const Op *op = grp->ops[i];
        if (!kern_is_reduction(op))
            continue;
        DType dt = op->in[0]->type.dtype;
        LLVMTypeRef ty = cg_compute_type(cg, dt);
        if (!pass) { /* part s of row q: [s*m/parts, (s+1)*m/parts) */
            LLVMValueRef sp = LLVMBuildSRem(B, t, parts, "");
            LLVMValueRef lo = LLVMBuildSDiv(B, LLVMBuildMul(B, sp, m, ""), parts, "");
            LLVMValueRef hi = LLVMBuildSDiv(B, LLVMBuildMul(B, LLVMBuildAdd(B, sp, cg_i64(cg, 1), ""), m, ""), parts, "");
            LLVMValueRef full[MAX_RANK];
            memcpy(full, idx, sizeof full);
            LLVMBuildStore(B, lane_reduce(cg, k, op, full, last, lo, hi), split_slot(cg, scratch, t, nred, r, ty));
        } else { /* the parts in order */
            LLVMValueRef first = LLVMBuildMul(B, q, parts, "");
            LLVMValueRef v = LLVMBuildLoad2(B, ty, split_slot(cg, scratch, first, nred, r, ty), "");
            for (int sp = 1; sp < DISC_SPLIT_PARTS; sp++) {
                LLVMValueRef ts = LLVMBuildAdd(B, first, cg_i64(cg, sp), "");
                v = kern_binary(k, reduce_op(op, dt), dt, v, LLVMBuildLoad2(B, ty, split_slot(cg, scratch, ts, nred, r, ty), ""));
            }
            if (!strcmp(op_attr_str(op, "kind", "sum"), "mean"))
                v = LLVMBuildFDiv(B, v, LLVMBuildSIToFP(B, m, ty, ""), "");
            k->rv[k->nr] = op->out[0];
            k->rval[k->nr++] = v;
        }
        r++;
    }
    if (pass) {
        LLVMValueRef oidx[MAX_RANK];
        for (int o = 0; o < grp->nouts; o++) {
            kern_unflatten(k, &grp->outs[o]->type, q, oidx);
            store_out(cg, k, grp->outs[o], oidx, q);
        }
    }
    cg_loop_end(cg, &l);
    return true;
}

bool cg_kernel_split(Cg *cg, const Group *grp, KernelInfo *part, KernelInfo *fin)
{
    SplitPass sp = {0};
    if (!cg_split_fits(grp, &sp.rows, &sp.len, &sp.nred, &cg->g->dims))
        return false;
    if (!kern_emit(cg, grp, part, " split, parts", split_body, &sp))
        return false;
    sp.pass = 1;
    return kern_emit(cg, grp, fin, " split, combine", split_body, &sp);
}
