/*
 * skinny.c — the skinny matmul template: C = post(A B + bias) + residual
 * for a few rows of A (m <= DISC_SKINNY_M) against constant f32 weights,
 * which is every weight matmul of a transformer run at batch 1 and a short
 * sequence. Such a product does a few multiply-adds per weight it reads,
 * so it runs at the speed the weights stream from memory. On this project's
 * machines (bench/bench_rt mm, 2 threads, weights cycled through 30
 * copies so they come from memory) oneDNN 2.6's f32 matmul streams 8 x 768
 * x 3072 at ~72% of a plain read of the same bytes; this loop gets to
 * within a few percent of it.
 *
 * The weights are the runtime's packed copy (disc_rt_matmul_skinny, rt.h)
 * in oneDNN's layout BA16a<P>b: panels of P columns one after another,
 * each holding rows 0..kp-1 of its columns (kp = k rounded up to 16), P
 * floats per row, zero past k and n. P is 64 for AVX-512, where oneDNN's
 * matmul picks that layout for the larger m, so both paths share the one
 * copy; 16 for AVX2 and SSE (cg_skinny_panel), so that a group of
 * columns (below) reads its panel front to back: with 64-column panels
 * each 16-column group read every fourth cache line of the panel, and at
 * one row streamed the weights at 60% of oneDNN's speed.
 *
 * The kernel's parallel range is the panels. The blocking follows the
 * target's vector registers (cpu.c), as an assembly GEMM kernel would:
 * per panel, groups of G vectors of columns (G x lanes) and blocks of R
 * rows of A (6, then 4, 2, 1 for the rest) keep R x G vectors of
 * accumulators while k runs; each step loads G vectors of one panel row
 * and broadcasts one element of each of the R rows of A. On AVX-512 (32
 * registers of 16 floats) a group is the whole 64-column panel, G = 4:
 * 24 accumulators, 4 weight vectors and the broadcast. On AVX2 and SSE
 * (16 registers of 8 or 4 floats) a group is G = 2 vectors (16 or 8
 * columns): 12 accumulators, 2 weight vectors and the broadcast, the
 * shape of BLIS's 6x16 Haswell kernel. (Keeping AVX-512's 24 vectors of
 * 16 floats on AVX2 made each of them two registers and spilled most of
 * them: 56 GFLOP/s on 16 x 3072 x 768, half oneDNN's speed.)
 *
 * The 64-column kernel (AVX-512, m <= 16) takes k in blocks of KC_WIDE =
 * 64 rows: a 16 KiB strip of its panel, streamed from memory by the first
 * block of rows of A and read from L1 by the others, C loaded and stored
 * around each strip. It ran each block of rows over the whole of k
 * before, the panel (64 * kp * 4 bytes: 768 KiB at k = 3072) coming from
 * L2 for the second block of rows: on an Intel Xeon (Emerald Rapids, 2 MiB
 * of L2) 13 rows against 20 x (768 x 3072, 3072 x 768) took 56-58 ms at
 * one thread, 42-48 in strips, ONNX Runtime 47 (bench/NOTES.md). The
 * 16-column kernel takes up to 1024 rows (rt.h), so it is
 * blocked for the caches as MLAS's and BLIS's kernels are: the call's
 * panels in blocks of NB = 8 (128 columns), rows in blocks of MC = 192,
 * k in blocks of KC = 256. Per block of k, a 16-column panel's strip is
 * 16 KiB (in L1 for every block of 6 rows), the 8 strips of a block of
 * panels 128 KiB (in L2 while every block of rows passes them), and the
 * block of rows' part of C 96 KiB. The rows of A are read in place, as
 * MLAS's kernel reads them: copying each block's 6 rows to a buffer on the
 * stack first (so the k steps addressed them at constant offsets from one
 * register) copied all of A once per block of panels, and cost 4-8% at 512
 * rows (512 x 3072 x 768 and back, one thread, timed run by run in one
 * process against ONNX Runtime: 30.7 and 35.6 ms copied, 29.6 and 32.9 in
 * place, ONNX Runtime 29.3 and 33.3; bench/NOTES.md). The first block of k
 * starts from zero, the others from C. Unblocked, the kernel read A from L3 for every
 * panel and ran at 1.5x its one-thread speed on two threads, and a
 * masked store at every block's end cost about 7% on AMD's Zen (a
 * microcoded instruction there), so only a group that ends inside the
 * last panel stores masked. At 2 threads on an AVX2 EPYC the blocked
 * kernel ran 512 x 768 x 3072 and back (bench_skinny.py) in 196 ms
 * against 235 unblocked and 202 for ONNX Runtime's MLAS.
 *
 * After its last block of k, a block of panels' columns get the epilogue
 * in place, one pass over its rows while they are in cache: bias, the
 * activation (elem.c's forms, the loop kernels' too), the residual.
 * (Per-row epilogues inside every block made the kernel ten times larger
 * and slow to compile.)
 *
 * One kernel per epilogue (activation, bias or not, residual or not) and
 * module, so the loop over k carries no tests.
 */
#include "codegen/kern.h"
#include "runtime/rt.h"

#include <stdio.h>

#define B (cg->b)

enum { RMAX = 6, GMAX = 4, VMAX = DISC_PANEL / 4 };
/* The blocking of the 16-column kernel: KC rows of k (a 16 KiB strip of a
 * panel, which stays in L1 for every block of rows), NB panels (128 KiB of
 * weights, which stay in L2 while every block of rows passes them) */
enum { KC = 256, NB = 8, MC = 192 };
/* Up to FEW_ROWS rows of A, blocks of one panel (see skinny_core); up to
 * UNFETCHED_ROWS, no software prefetch (see panel_at) */
enum { FEW_ROWS = 16, UNFETCHED_ROWS = 2 };
/* The 64-column kernel's blocks of k: a 16 KiB strip of its panel, which
 * stays in L1 while every block of rows (m <= 16) passes it */
enum { KC_WIDE = 64 };
#ifndef UNROLL
#define UNROLL 2
#endif

typedef struct Sk {
    Cg *cg;
    int post;
    bool bias, residual;
    int lanes;                 /* floats per vector: 4, 8 or 16 */
    int width;                 /* columns per panel (cg_skinny_panel) */
    int vecs;                  /* vectors per panel row: width / lanes */
    int group;                 /* vectors per column group (G) */
    LLVMTypeRef vt;            /* <lanes x float> */
    LLVMTypeRef pf, pv;        /* float*, <lanes x float>* */
    LLVMValueRef fma;          /* llvm.fmuladd.v<lanes>f32 */
    LLVMValueRef prefetch;     /* llvm.prefetch.p0i8 */
    LLVMValueRef mstore;       /* llvm.masked.store.v<lanes>f32 */
    LLVMValueRef mload;        /* llvm.masked.load.v<lanes>f32 */
    int kc;                    /* k rows per block (0: all of k in one) */
    int nb;                    /* panels per block of columns */
    LLVMValueRef acc[RMAX][GMAX]; /* allocas */
    LLVMValueRef mask[VMAX];   /* lanes of the panel's columns that exist */
    LLVMValueRef a, bp, bias_p, res_p, c, m, n, k, lda, kp, ldc;
    LLVMValueRef end;          /* the end of this call's panel range */
    LLVMValueRef mend;         /* the end of the block of rows */
    LLVMValueRef pb, pe;       /* the block of panels [pb, pe) */
    LLVMValueRef kb, ke, first; /* the block of k [kb, ke); kb == 0 */
    LLVMValueRef panel, c0, w; /* the panel's weights, first column, columns that exist */
    LLVMValueRef next;         /* the next panel's weights (this one's for the last) */
    LLVMValueRef cpanel;       /* &C[0][c0] */
} Sk;

static LLVMValueRef gep(Cg *cg, LLVMTypeRef t, LLVMValueRef p, LLVMValueRef i)
{
    return LLVMBuildGEP2(B, t, p, &i, 1, "");
}

/* min(max(x + add, 0), 6) */
static LLVMValueRef relu6(Kern *k, LLVMValueRef x, double add)
{
    LLVMTypeRef f = k->cg->t_f32;
    if (add != 0)
        x = LLVMBuildFAdd(k->cg->b, x, LLVMConstReal(f, add), "");
    x = kern_binary(k, OP_MAX, DT_F32, x, LLVMConstReal(f, 0));
    return kern_binary(k, OP_MIN, DT_F32, x, LLVMConstReal(f, 6));
}

/* post(x) as in rt.h's DiscPost. */
static LLVMValueRef post(Sk *s, LLVMValueRef x)
{
    Cg *cg = s->cg;
    Kern k = {.cg = cg};
    LLVMTypeRef f = cg->t_f32;
    switch (s->post) {
    case DISC_POST_RELU: return kern_binary(&k, OP_MAX, DT_F32, x, LLVMConstReal(f, 0));
    case DISC_POST_TANH: return kern_unary(&k, OP_TANH, DT_F32, x);
    case DISC_POST_SIGMOID: return kern_unary(&k, OP_SIGMOID, DT_F32, x);
    case DISC_POST_SWISH: return LLVMBuildFMul(B, x, kern_unary(&k, OP_SIGMOID, DT_F32, x), "");
    case DISC_POST_RELU6: return relu6(&k, x, 0);
    case DISC_POST_HARDSWISH: {
        LLVMValueRef r = relu6(&k, x, 3);
        return LLVMBuildFMul(B, x, LLVMBuildFMul(B, r, LLVMConstReal(f, 1.0 / 6), ""), "");
    }
    case DISC_POST_GELU_ERF: {
        LLVMValueRef e = kern_unary(&k, OP_ERF, DT_F32, LLVMBuildFMul(B, x, LLVMConstReal(f, 0.70710678118654752), ""));
        LLVMValueRef h = LLVMBuildFMul(B, x, LLVMConstReal(f, 0.5), "");
        return LLVMBuildFMul(B, h, LLVMBuildFAdd(B, e, LLVMConstReal(f, 1), ""), "");
    }
    case DISC_POST_GELU_TANH: {
        LLVMValueRef x3 = LLVMBuildFMul(B, LLVMBuildFMul(B, x, x, ""), x, "");
        LLVMValueRef in = LLVMBuildFAdd(B, x, LLVMBuildFMul(B, x3, LLVMConstReal(f, 0.044715), ""), "");
        in = LLVMBuildFMul(B, in, LLVMConstReal(f, 0.79788456080286536), "");
        LLVMValueRef t = kern_unary(&k, OP_TANH, DT_F32, in);
        LLVMValueRef h = LLVMBuildFMul(B, x, LLVMConstReal(f, 0.5), "");
        return LLVMBuildFMul(B, h, LLVMBuildFAdd(B, t, LLVMConstReal(f, 1), ""), "");
    }
    default: return x;
    }
}

/* Loads the vectors of group g0 of the panel's row k and adds row k of
 * rows [i0, i0 + r) of A times them into accumulator set `set`; prefetches
 * the same row of the next panel (see block). */
static void kstep(Sk *s, LLVMValueRef *arow, int r, int g0, LLVMValueRef k, int set)
{
    Cg *cg = s->cg;
    int G = s->group, L = s->lanes;
    LLVMValueRef row = LLVMBuildMul(B, k, cg_i64(cg, s->width), "");
    LLVMValueRef brow = gep(cg, cg->t_f32, s->panel, row);
    LLVMValueRef bv[GMAX];
    for (int q = 0; q < G; q++) {
        LLVMValueRef p = LLVMBuildBitCast(B, gep(cg, cg->t_f32, brow, cg_i64(cg, (g0 + q) * L)), s->pv, "");
        bv[q] = LLVMBuildLoad2(B, s->vt, p, "");
        LLVMSetAlignment(bv[q], (unsigned)(L * 4 < 64 ? L * 4 : 64));
    }
    LLVMValueRef nrow = gep(cg, cg->t_f32, s->next, row);
    for (int off = g0 * L; off < (g0 + G) * L; off += 16) { /* a 64-byte line */
        LLVMValueRef args[4] = {LLVMBuildBitCast(B, gep(cg, cg->t_f32, nrow, cg_i64(cg, off)), cg->t_p8, ""),
                                cg_i32(cg, 0), cg_i32(cg, 2), cg_i32(cg, 1)};
        LLVMBuildCall2(B, LLVMGlobalGetValueType(s->prefetch), s->prefetch, args, 4, "");
    }
    LLVMTypeRef fty = LLVMGlobalGetValueType(s->fma);
    for (int i = 0; i < r; i++) {
        LLVMValueRef x = LLVMBuildLoad2(B, cg->t_f32, gep(cg, cg->t_f32, arow[i], k), "");
        LLVMValueRef one = LLVMBuildInsertElement(B, LLVMGetUndef(s->vt), x, cg_i32(cg, 0), "");
        LLVMValueRef splat = LLVMBuildShuffleVector(B, one, LLVMGetUndef(s->vt),
                                                    LLVMConstNull(LLVMVectorType(cg->t_i32, (unsigned)L)), "");
        for (int q = 0; q < G; q++) {
            LLVMValueRef acc = s->acc[set * r + i][q];
            LLVMValueRef args[3] = {splat, bv[q], LLVMBuildLoad2(B, s->vt, acc, "")};
            LLVMBuildStore(B, LLVMBuildCall2(B, fty, s->fma, args, 3, ""), acc);
        }
    }
}

/* A loop over k in [lo, hi) stepping by u, kstep for k..k+u-1 into
 * accumulator sets 0..sets-1 in turn. */
static void kloop(Sk *s, LLVMValueRef *arow, int r, int g0, LLVMValueRef lo, LLVMValueRef hi, int u, int sets)
{
    Cg *cg = s->cg;
    LLVMValueRef kvar = LLVMBuildAlloca(cg->eb, cg->t_i64, "k");
    LLVMBuildStore(B, lo, kvar);
    LLVMBasicBlockRef test = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "k");
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "k_body");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "k_done");
    LLVMBuildBr(B, test);
    LLVMPositionBuilderAtEnd(B, test);
    LLVMValueRef k = LLVMBuildLoad2(B, cg->t_i64, kvar, "");
    LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLT, k, hi, ""), body, done);
    LLVMPositionBuilderAtEnd(B, body);
    for (int j = 0; j < u; j++)
        kstep(s, arow, r, g0, j ? LLVMBuildAdd(B, k, cg_i64(cg, j), "") : k, j % sets);
    LLVMBuildStore(B, LLVMBuildAdd(B, k, cg_i64(cg, u), ""), kvar);
    /* the k loop is already R x 4 vectors wide: unrolled (8 times, by
     * default) it made each kernel thousands of lines that took a second
     * to compile */
    cg_loop_hint(cg, LLVMBuildBr(B, test), CG_NO_UNROLL);
    LLVMPositionBuilderAtEnd(B, done);
}

/* Rows [i0, i0 + r) of A against column group g0 (its first vector) of
 * the panel, accumulated and stored to C (masked to the panel's columns
 * that exist).
 *
 * An FMA's result is ready 4 cycles after it starts, and two start per
 * cycle, so fewer than 8 independent accumulators leave the FMA units
 * waiting: the tail blocks of 1 and 2 rows (2 and 4 accumulators on AVX2)
 * keep u sets of accumulators, set j taking the k that are j mod u, and
 * add them up at the end (at 1 x 768 x 3072 the single chain took ...).
 *
 * Each step also prefetches the same row of the next panel into L2
 * (s->next): the first block of a panel reads its weights from memory,
 * the later blocks from L2 while memory would idle; fetched a panel
 * ahead, the weights stream from memory during every block, which a
 * hardware prefetcher, stopping at every 4 KiB page, does not do. */
static void block(Sk *s, LLVMValueRef i0, int r, int g0)
{
    Cg *cg = s->cg;
    int G = s->group;
    int u = 1;
    while (u < 4 && (u + 1) * r <= RMAX && u * r * G < 8)
        u++;
    LLVMValueRef cv[RMAX][GMAX]; /* &C[i0 + i][c0 + (g0 + q) * lanes] */
    for (int i = 0; i < r; i++) {
        LLVMValueRef ci = gep(cg, cg->t_f32, s->cpanel, LLVMBuildMul(B, LLVMBuildAdd(B, i0, cg_i64(cg, i), ""), s->ldc, ""));
        for (int q = 0; q < G; q++)
            cv[i][q] = LLVMBuildBitCast(B, gep(cg, cg->t_f32, ci, cg_i64(cg, (g0 + q) * s->lanes)), s->pv, "");
    }
    /* the first block of k starts from zero, the others from C */
    LLVMValueRef zero = LLVMConstNull(s->vt);
    LLVMTypeRef lty = LLVMGlobalGetValueType(s->mload);
    for (int i = 0; i < u * r; i++)
        for (int q = 0; q < G; q++) {
            LLVMValueRef v = zero;
            if (i < r && s->kc) {
                LLVMValueRef args[4] = {cv[i][q], cg_i32(cg, 4), s->mask[g0 + q], zero};
                v = LLVMBuildSelect(B, s->first, zero, LLVMBuildCall2(B, lty, s->mload, args, 4, ""), "");
            }
            LLVMBuildStore(B, v, s->acc[i][q]);
        }
    /* row i's element k at arow[i] + k, read in place */
    LLVMValueRef arow[RMAX];
    for (int i = 0; i < r; i++)
        arow[i] = gep(cg, cg->t_f32, s->a, LLVMBuildMul(B, LLVMBuildAdd(B, i0, cg_i64(cg, i), ""), s->lda, ""));
    int steps = u > 1 ? u : UNROLL;
    LLVMValueRef len = LLVMBuildSub(B, s->ke, s->kb, "");
    LLVMValueRef ku = LLVMBuildSub(B, s->ke, LLVMBuildSRem(B, len, cg_i64(cg, steps), ""), "");
    kloop(s, arow, r, g0, s->kb, ku, steps, u);
    kloop(s, arow, r, g0, ku, s->ke, 1, 1);
    for (int set = 1; set < u; set++)
        for (int i = 0; i < r; i++)
            for (int q = 0; q < G; q++) {
                LLVMValueRef x = LLVMBuildLoad2(B, s->vt, s->acc[i][q], "");
                LLVMValueRef y = LLVMBuildLoad2(B, s->vt, s->acc[set * r + i][q], "");
                LLVMBuildStore(B, LLVMBuildFAdd(B, x, y, ""), s->acc[i][q]);
            }
    /* masked stores only where the group's columns end inside it: on AMD's
     * Zen a masked store is a long microcoded sequence (the 6 x 16 block's
     * twelve of them cost as much as ... k steps) */
    LLVMBasicBlockRef whole = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "store");
    LLVMBasicBlockRef part = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "store_masked");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "stored");
    LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSGE, s->w, cg_i64(cg, (g0 + G) * s->lanes), ""), whole, part);
    LLVMTypeRef sty = LLVMGlobalGetValueType(s->mstore);
    for (int masked = 0; masked < 2; masked++) {
        LLVMPositionBuilderAtEnd(B, masked ? part : whole);
        for (int i = 0; i < r; i++)
            for (int q = 0; q < G; q++) {
                LLVMValueRef x = LLVMBuildLoad2(B, s->vt, s->acc[i][q], "");
                if (masked) {
                    LLVMValueRef args[4] = {x, cv[i][q], cg_i32(cg, 4), s->mask[g0 + q]};
                    LLVMBuildCall2(B, sty, s->mstore, args, 4, "");
                } else {
                    LLVMSetAlignment(LLVMBuildStore(B, x, cv[i][q]), 4);
                }
            }
        LLVMBuildBr(B, done);
    }
    LLVMPositionBuilderAtEnd(B, done);
}

/* C = post(C + bias) + residual over the panel's rows and columns. */
static void epilogue(Sk *s)
{
    Cg *cg = s->cg;
    CgLoop il, jl;
    LLVMValueRef i = cg_loop_begin(cg, &il, cg_i64(cg, 0), s->m, "ei");
    LLVMValueRef ci = LLVMBuildMul(B, i, s->ldc, "");
    LLVMValueRef j = cg_loop_begin(cg, &jl, cg_i64(cg, 0), s->w, "ej");
    LLVMValueRef col = LLVMBuildAdd(B, s->c0, j, "");
    LLVMValueRef at = LLVMBuildAdd(B, ci, col, "");
    LLVMValueRef cp = gep(cg, cg->t_f32, s->c, at);
    LLVMValueRef x = LLVMBuildLoad2(B, cg->t_f32, cp, "");
    if (s->bias)
        x = LLVMBuildFAdd(B, x, LLVMBuildLoad2(B, cg->t_f32, gep(cg, cg->t_f32, s->bias_p, col), ""), "");
    x = post(s, x);
    if (s->residual)
        x = LLVMBuildFAdd(B, x, LLVMBuildLoad2(B, cg->t_f32, gep(cg, cg->t_f32, s->res_p, at), ""), "");
    LLVMBuildStore(B, x, cp);
    /* the activations (tanh, erf: polynomials and a division) vectorized
     * and then interleaved 8 times took far more than AVX2's 16 registers
     * and spilled */
    jl.hints = CG_NO_INTERLEAVE;
    cg_loop_end(cg, &jl);
    cg_loop_end(cg, &il);
}

static LLVMValueRef min64(Cg *cg, LLVMValueRef a, LLVMValueRef b)
{
    return LLVMBuildSelect(cg->b, LLVMBuildICmp(cg->b, LLVMIntSLT, a, b, ""), a, b, "");
}

/* Sets the panel q's pointers, first column, width and lane masks, and
 * where its k steps prefetch: the same rows of the next panel of the
 * block; after the block's last panel, the next block of k of its first
 * panel, or after the last block of k the next block of panels (the
 * panel itself at the end of the range). */
static void panel_at(Sk *s, LLVMValueRef q)
{
    Cg *cg = s->cg;
    LLVMValueRef size = LLVMBuildMul(B, s->kp, cg_i64(cg, s->width), "");
    s->panel = gep(cg, cg->t_f32, s->bp, LLVMBuildMul(B, q, size, ""));
    LLVMValueRef q1 = LLVMBuildAdd(B, q, cg_i64(cg, 1), "");
    LLVMValueRef next = gep(cg, cg->t_f32, s->panel, size);
    LLVMValueRef after = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, q1, s->end, ""), next, s->panel, "");
    if (s->kc) {
        /* k steps address their row k of `next`: the next block of k
         * of the block's first panel is its rows k + kc, the next block
         * of panels' first rows k - kb */
        LLVMValueRef first = gep(cg, cg->t_f32, s->bp, LLVMBuildMul(B, s->pb, size, ""));
        first = gep(cg, cg->t_f32, first, cg_i64(cg, (int64_t)s->kc * s->width));
        LLVMValueRef more_k = LLVMBuildICmp(B, LLVMIntSLT, s->ke, s->k, "");
        LLVMValueRef back = LLVMBuildNeg(B, LLVMBuildMul(B, s->kb, cg_i64(cg, s->width), ""), "");
        after = LLVMBuildSelect(B, more_k, first, gep(cg, cg->t_f32, after, back), "");
    }
    s->next = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, q1, s->pe, ""), next, after, "");
    /* One or two rows do so few FMAs a weight that the loop runs ahead of
     * memory on one linear stream, which the hardware prefetcher serves
     * best: the software prefetches only took miss buffers from it
     * (bench_skinny.py, 20 x (768 x 3072, 3072 x 768), one thread, Zen 4:
     * at M = 1 and 2, 16.0 / 19.3 ms -> 14.2 / 14.7 with 64-column
     * panels, 19.9 / 18.8 -> 12.8 / 13.8 with 16-column ones, ONNX
     * Runtime 17-18; from 3 rows on, and wherever a strip is read by two
     * blocks of rows, they gain). There the k steps prefetch the row they
     * load, which costs no miss. */
    s->next = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLE, s->m, cg_i64(cg, UNFETCHED_ROWS), ""), s->panel, s->next, "");
    s->c0 = LLVMBuildMul(B, q, cg_i64(cg, s->width), "");
    s->w = min64(cg, LLVMBuildSub(B, s->n, s->c0, ""), cg_i64(cg, s->width));
    s->cpanel = gep(cg, cg->t_f32, s->c, s->c0);
    int L = s->lanes;
    LLVMValueRef lanes[16];
    for (int l = 0; l < L; l++)
        lanes[l] = cg_i64(cg, l);
    LLVMValueRef iota = LLVMConstVector(lanes, (unsigned)L);
    LLVMTypeRef vi64 = LLVMVectorType(cg->t_i64, (unsigned)L), vi32 = LLVMVectorType(cg->t_i32, (unsigned)L);
    for (int v = 0; v < s->vecs; v++) {
        LLVMValueRef wv = LLVMBuildSub(B, s->w, cg_i64(cg, v * L), "");
        LLVMValueRef one = LLVMBuildInsertElement(B, LLVMGetUndef(vi64), wv, cg_i32(cg, 0), "");
        LLVMValueRef splat = LLVMBuildShuffleVector(B, one, one, LLVMConstNull(vi32), "");
        s->mask[v] = LLVMBuildICmp(B, LLVMIntSLT, iota, splat, "");
    }
}

/* Rows [i0, i0 + r) against every panel of the block, over the block of k. */
static void panels(Sk *s, LLVMValueRef i0, int r)
{
    Cg *cg = s->cg;
    CgLoop ql;
    LLVMValueRef q = cg_loop_begin(cg, &ql, s->pb, s->pe, "q");
    panel_at(s, q);
    for (int g0 = 0; g0 < s->vecs; g0 += s->group) {
        /* a group wholly past the last column of a partial panel does nothing */
        LLVMBasicBlockRef run = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "group");
        LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "group_done");
        LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSGT, s->w, cg_i64(cg, g0 * s->lanes), ""), run, next);
        LLVMPositionBuilderAtEnd(B, run);
        block(s, i0, r, g0);
        LLVMBuildBr(B, next);
        LLVMPositionBuilderAtEnd(B, next);
    }
    cg_loop_end(cg, &ql);
}

/* if (*i + r <= m) { panels(*i, r); *i += r; }, or a loop of that (r = RMAX). */
static void blocks(Sk *s, LLVMValueRef ivar, int r, bool loop)
{
    Cg *cg = s->cg;
    LLVMBasicBlockRef test = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "rows");
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "block");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "rows_done");
    LLVMBuildBr(B, test);
    LLVMPositionBuilderAtEnd(B, test);
    LLVMValueRef i = LLVMBuildLoad2(B, cg->t_i64, ivar, "");
    LLVMValueRef fits = LLVMBuildICmp(B, LLVMIntSLE, LLVMBuildAdd(B, i, cg_i64(cg, r), ""), s->mend, "");
    LLVMBuildCondBr(B, fits, body, done);
    LLVMPositionBuilderAtEnd(B, body);
    panels(s, i, r);
    LLVMBuildStore(B, LLVMBuildAdd(B, i, cg_i64(cg, r), ""), ivar);
    LLVMBuildBr(B, loop ? test : done);
    LLVMPositionBuilderAtEnd(B, done);
}

static LLVMValueRef field(Sk *s, LLVMValueRef f, int i, LLVMTypeRef ptr)
{
    Cg *cg = s->cg;
    LLVMValueRef ix = cg_i64(cg, i);
    LLVMValueRef v = LLVMBuildLoad2(cg->eb, cg->t_i64, LLVMBuildGEP2(cg->eb, cg->t_i64, f, &ix, 1, ""), "");
    return ptr ? LLVMBuildIntToPtr(cg->eb, v, ptr, "") : v;
}

int cg_skinny_panel(const Cg *cg)
{
    return !cg->cpu || cg->cpu->nvregs >= 32 ? DISC_PANEL : DISC_PANEL_NARROW;
}

_Static_assert(sizeof ((Cg *)0)->skinny >= 4 * DISC_POST_COUNT * sizeof(LLVMValueRef), "a skinny slot per epilogue");

/* The state every skinny function starts from: the target's vector shape
 * and the intrinsics, declared in cg->mod. */
static void sk_init(Sk *s, Cg *cg)
{
    s->cg = cg;
    int L = cg->cpu ? cg->cpu->vbits / 32 : 16;
    if (L < 4)
        L = 4;
    s->lanes = L;
    s->width = cg_skinny_panel(cg);
    s->vecs = s->width / L;
    s->group = cg->cpu && cg->cpu->nvregs < 32 ? 2 : GMAX;
    if (s->width == DISC_PANEL_NARROW) {
        s->kc = KC;
        s->nb = NB;
    } else {
        s->kc = KC_WIDE;
        s->nb = 1;
    }
    if (s->group > s->vecs)
        s->group = s->vecs;
    s->vt = LLVMVectorType(cg->t_f32, (unsigned)L);
    s->pf = LLVMPointerType(cg->t_f32, 0);
    s->pv = LLVMPointerType(s->vt, 0);
    char fname[48], sname[64];
    snprintf(fname, sizeof fname, "llvm.fmuladd.v%df32", L);
    s->fma = LLVMGetNamedFunction(cg->mod, fname);
    if (!s->fma) {
        LLVMTypeRef p[3] = {s->vt, s->vt, s->vt};
        s->fma = LLVMAddFunction(cg->mod, fname, LLVMFunctionType(s->vt, p, 3, false));
    }
    s->prefetch = LLVMGetNamedFunction(cg->mod, "llvm.prefetch.p0i8");
    if (!s->prefetch) {
        LLVMTypeRef p[4] = {cg->t_p8, cg->t_i32, cg->t_i32, cg->t_i32};
        s->prefetch = LLVMAddFunction(cg->mod, "llvm.prefetch.p0i8", LLVMFunctionType(cg->t_void, p, 4, false));
    }
    snprintf(sname, sizeof sname, "llvm.masked.store.v%df32.p0v%df32", L, L);
    s->mstore = LLVMGetNamedFunction(cg->mod, sname);
    if (!s->mstore) {
        LLVMTypeRef p[4] = {s->vt, s->pv, cg->t_i32, LLVMVectorType(cg->t_i1, (unsigned)L)};
        s->mstore = LLVMAddFunction(cg->mod, sname, LLVMFunctionType(cg->t_void, p, 4, false));
    }
    snprintf(sname, sizeof sname, "llvm.masked.load.v%df32.p0v%df32", L, L);
    s->mload = LLVMGetNamedFunction(cg->mod, sname);
    if (!s->mload) {
        LLVMTypeRef p[4] = {s->pv, cg->t_i32, LLVMVectorType(cg->t_i1, (unsigned)L), s->vt};
        s->mload = LLVMAddFunction(cg->mod, sname, LLVMFunctionType(s->vt, p, 4, false));
    }
}

/* The call's fields from the args array (an i8* to int64s). */
static void sk_fields(Sk *s, LLVMValueRef args)
{
    Cg *cg = s->cg;
    LLVMValueRef f = LLVMBuildBitCast(cg->eb, args, cg->t_p64, "f");
    s->a = field(s, f, DISC_SK_A, s->pf);
    s->bp = field(s, f, DISC_SK_B, s->pf);
    s->bias_p = field(s, f, DISC_SK_BIAS, s->pf);
    s->res_p = field(s, f, DISC_SK_RES, s->pf);
    s->c = field(s, f, DISC_SK_C, s->pf);
    s->m = field(s, f, DISC_SK_M, NULL);
    s->n = field(s, f, DISC_SK_N, NULL);
    s->k = field(s, f, DISC_SK_K, NULL);
    s->lda = field(s, f, DISC_SK_LDA, NULL);
    s->kp = field(s, f, DISC_SK_KP, NULL);
    s->ldc = field(s, f, DISC_SK_LDC, NULL);
}

/* The epilogue's function type: (args, first panel, end panel). */
static LLVMTypeRef epi_type(Cg *cg)
{
    LLVMTypeRef p[3] = {cg->t_p8, cg->t_i64, cg->t_i64};
    return LLVMFunctionType(cg->t_void, p, 3, false);
}

/* C = post(C + bias) + residual over the columns of panels [pb, pe), a
 * function of its own: the kernels of every epilogue share one core
 * (skinny_core), which calls it after a block of panels' last block of k. */
static LLVMValueRef skinny_epilogue(Cg *cg, int post_kind, bool bias, bool residual)
{
    char name[48];
    snprintf(name, sizeof name, "disc_skinny_epi_p%d%s%s", post_kind, bias ? "_bias" : "", residual ? "_res" : "");
    LLVMValueRef fn = LLVMAddFunction(cg->mod, name, epi_type(cg));
    LLVMSetLinkage(fn, LLVMInternalLinkage);
    CgFnState st;
    cg_fn_save(cg, &st);
    cg_begin_function(cg, fn, NULL);
    LLVMBasicBlockRef body = LLVMGetInsertBlock(B);
    Sk s = {.post = post_kind, .bias = bias, .residual = residual};
    sk_init(&s, cg);
    sk_fields(&s, LLVMGetParam(fn, 0));
    LLVMValueRef pb = LLVMGetParam(fn, 1), pe = LLVMGetParam(fn, 2);
    s.c0 = LLVMBuildMul(B, pb, cg_i64(cg, s.width), "");
    s.w = LLVMBuildSub(B, min64(cg, LLVMBuildMul(B, pe, cg_i64(cg, s.width), ""), s.n), s.c0, "");
    epilogue(&s);
    LLVMBuildRetVoid(B);
    cg_end_function(cg, body);
    cg_fn_restore(cg, &st);
    return fn;
}

/* The matmul itself, one per module: (begin, end, args, epilogue), the
 * epilogue a skinny_epilogue or null. (A copy per epilogue, as the kernels
 * were, took about 2,000 instructions each: four of them were a third of
 * GPT-2's compile.) */
static LLVMValueRef skinny_core(Cg *cg)
{
    if (cg->skinny_core)
        return cg->skinny_core;
    LLVMTypeRef p[4] = {cg->t_i64, cg->t_i64, cg->t_p8, LLVMPointerType(epi_type(cg), 0)};
    LLVMValueRef fn = LLVMAddFunction(cg->mod, "disc_skinny_core", LLVMFunctionType(cg->t_void, p, 4, false));
    LLVMSetLinkage(fn, LLVMInternalLinkage);
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                               LLVMCreateEnumAttribute(cg->ctx, LLVMGetEnumAttributeKindForName("noinline", 8), 0));
    CgFnState st;
    cg_fn_save(cg, &st);
    cg_begin_function(cg, fn, NULL);
    LLVMBasicBlockRef body = LLVMGetInsertBlock(B);
    Sk s = {0};
    sk_init(&s, cg);
    for (int i = 0; i < RMAX; i++)
        for (int q = 0; q < s.group; q++) {
            s.acc[i][q] = LLVMBuildAlloca(cg->eb, s.vt, "acc");
            LLVMSetAlignment(s.acc[i][q], 64);
        }
    sk_fields(&s, LLVMGetParam(fn, 2));
    LLVMValueRef ivar = LLVMBuildAlloca(cg->eb, cg->t_i64, "i");
    /* blocks of nb panels; in each, blocks of kc rows of k; in each, the
     * blocks of rows of A against the block's panels */
    LLVMValueRef begin = LLVMGetParam(fn, 0);
    s.end = LLVMGetParam(fn, 1);
    /* blocks of NB panels keep a block of rows of A in L1 across them;
     * up to FEW_ROWS rows A is small anyway, and a block of one panel
     * reads the weights in the order they lie, where NB panels' strips in
     * turn are 8 streams 48 KiB apart (16-column kernel, bench_skinny.py
     * at 1, 8, 13 and 16 rows: 17.0-21.8, 20.5-23.1, 29.3-29.8 and
     * 30.0-34.3 ms -> 13.7-15.2, 16.8-19.0, 25.9-27.6, 30.2-32.0) */
    LLVMValueRef nb = cg_i64(cg, s.nb);
    if (s.nb > 1)
        nb = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLE, s.m, cg_i64(cg, FEW_ROWS), ""), cg_i64(cg, 1), nb, "");
    LLVMValueRef nblocks = LLVMBuildSDiv(B, LLVMBuildSub(B, LLVMBuildAdd(B, LLVMBuildSub(B, s.end, begin, ""), nb, ""), cg_i64(cg, 1), ""), nb, "");
    CgLoop pl;
    LLVMValueRef blk = cg_loop_begin(cg, &pl, cg_i64(cg, 0), nblocks, "pblock");
    s.pb = LLVMBuildAdd(B, begin, LLVMBuildMul(B, blk, nb, ""), "");
    s.pe = min64(cg, LLVMBuildAdd(B, s.pb, nb, ""), s.end);
    /* blocks of MC rows (kc only): the block's part of C stays in L2
     * across the blocks of k */
    CgLoop ml, kl;
    LLVMValueRef m0 = cg_i64(cg, 0);
    s.mend = s.m;
    if (s.kc) {
        LLVMValueRef mblocks = LLVMBuildSDiv(B, LLVMBuildAdd(B, s.m, cg_i64(cg, MC - 1), ""), cg_i64(cg, MC), "");
        m0 = LLVMBuildMul(B, cg_loop_begin(cg, &ml, cg_i64(cg, 0), mblocks, "mblock"), cg_i64(cg, MC), "");
        s.mend = min64(cg, LLVMBuildAdd(B, m0, cg_i64(cg, MC), ""), s.m);
        LLVMValueRef kc = cg_i64(cg, s.kc);
        LLVMValueRef kblocks = LLVMBuildSDiv(B, LLVMBuildAdd(B, s.k, cg_i64(cg, s.kc - 1), ""), kc, "");
        LLVMValueRef kbi = cg_loop_begin(cg, &kl, cg_i64(cg, 0), kblocks, "kblock");
        s.kb = LLVMBuildMul(B, kbi, kc, "");
        s.ke = min64(cg, LLVMBuildAdd(B, s.kb, kc, ""), s.k);
        s.first = LLVMBuildICmp(B, LLVMIntEQ, kbi, cg_i64(cg, 0), "");
    } else {
        s.kb = cg_i64(cg, 0);
        s.ke = s.k;
        s.first = LLVMConstInt(cg->t_i1, 1, 0);
    }
    LLVMBuildStore(B, m0, ivar);
    blocks(&s, ivar, RMAX, true);
    blocks(&s, ivar, 4, false);
    blocks(&s, ivar, 2, false);
    blocks(&s, ivar, 1, false);
    if (s.kc) {
        cg_loop_end(cg, &kl);
        cg_loop_end(cg, &ml);
    }
    /* the epilogue over the block's columns, while they are in cache */
    LLVMValueRef epi = LLVMGetParam(fn, 3);
    LLVMBasicBlockRef run = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "epilogue");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "epilogue_done");
    LLVMBuildCondBr(B, LLVMBuildIsNull(B, epi, ""), done, run);
    LLVMPositionBuilderAtEnd(B, run);
    LLVMValueRef ea[3] = {LLVMGetParam(fn, 2), s.pb, s.pe};
    LLVMBuildCall2(B, epi_type(cg), epi, ea, 3, "");
    LLVMBuildBr(B, done);
    LLVMPositionBuilderAtEnd(B, done);
    cg_loop_end(cg, &pl);
    LLVMBuildRetVoid(B);
    cg_end_function(cg, body);
    cg_fn_restore(cg, &st);
    return cg->skinny_core = fn;
}

LLVMValueRef cg_skinny_kernel(Cg *cg, int post_kind, bool bias, bool residual)
{
    int slot = post_kind * 4 + bias * 2 + residual;
    if (slot < 0 || slot >= (int)(sizeof cg->skinny / sizeof cg->skinny[0]))
        return NULL;
    if (cg->skinny[slot])
        return cg->skinny[slot];
    LLVMValueRef core = skinny_core(cg);
    LLVMValueRef epi = bias || residual || post_kind != DISC_POST_NONE
                           ? skinny_epilogue(cg, post_kind, bias, residual)
                           : LLVMConstPointerNull(LLVMPointerType(epi_type(cg), 0));
    char name[48];
    snprintf(name, sizeof name, "disc_skinny_p%d%s%s", post_kind, bias ? "_bias" : "", residual ? "_res" : "");
    LLVMValueRef fn = LLVMAddFunction(cg->mod, name, cg->t_kernel);
    LLVMSetLinkage(fn, LLVMInternalLinkage);
    CgFnState st;
    cg_fn_save(cg, &st);
    cg_begin_function(cg, fn, NULL);
    LLVMBasicBlockRef body = LLVMGetInsertBlock(B);
    LLVMValueRef a[4] = {LLVMGetParam(fn, 0), LLVMGetParam(fn, 1), LLVMGetParam(fn, 2), epi};
    LLVMBuildCall2(B, LLVMGlobalGetValueType(core), core, a, 4, "");
    LLVMBuildRetVoid(B);
    cg_end_function(cg, body);
    cg_fn_restore(cg, &st);
    cg->skinny[slot] = fn;
    return fn;
}
