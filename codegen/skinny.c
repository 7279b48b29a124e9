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
 * in oneDNN's own BA16a64b layout: panels of 64 columns one after another,
 * each holding rows 0..kp-1 of its columns (kp = k rounded up to 16), 64
 * floats per row, zero past k and n. oneDNN's matmul picks that layout for
 * the larger m, so both paths share the one copy.
 *
 * The kernel's parallel range is the panels. Per panel, blocks of R rows
 * of A (6, then 4, 2, 1 for the rest) keep R x 4 vectors of 16
 * accumulators (24 of AVX-512's 32 registers at R = 6) while k runs; each
 * step loads one 64-float row of the panel and broadcasts one element of
 * each of the R rows of A. So the weights stream from memory once per
 * block of 6 rows and come from L2 for the next (a panel is 64 * kp * 4
 * bytes: 192 KiB at k = 768). A block stores its accumulators to C with
 * masked stores (the last panel may be partial); then one pass over the
 * panel's m rows applies the epilogue in place while the tile is in L1:
 * bias, the activation (elem.c's forms, the loop kernels' too), the
 * residual. (Per-row epilogues inside every block made the kernel ten
 * times larger and slow to compile.)
 *
 * One kernel per epilogue (activation, bias or not, residual or not) and
 * module, so the loop over k carries no tests.
 */
#include "codegen/kern.h"
#include "runtime/rt.h"

#include <llvm-c/DebugInfo.h>
#include <stdio.h>

#define B (cg->b)

enum { LANES = 16, VECS = DISC_PANEL / LANES, RMAX = 6 };

typedef struct Sk {
    Cg *cg;
    int post;
    bool bias, residual;
    LLVMTypeRef vt;            /* <16 x float> */
    LLVMTypeRef pf, pv;        /* float*, <16 x float>* */
    LLVMValueRef fma;          /* llvm.fmuladd.v16f32 */
    LLVMValueRef mstore;       /* llvm.masked.store.v16f32 */
    LLVMValueRef acc[RMAX][VECS]; /* allocas */
    LLVMValueRef mask[VECS];   /* lanes of the panel's columns that exist */
    LLVMValueRef a, bp, bias_p, res_p, c, m, n, k, lda, kp, ldc;
    LLVMValueRef panel, c0, w; /* the panel's weights, first column, columns that exist */
    LLVMValueRef cpanel;       /* &C[0][c0] */
} Sk;

static LLVMValueRef gep(Cg *cg, LLVMTypeRef t, LLVMValueRef p, LLVMValueRef i)
{
    return LLVMBuildGEP2(B, t, p, &i, 1, "");
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

/* Marks the loop whose latch ends in br as one LLVM must not unroll: the
 * k loop is already R x 4 vectors wide, and unrolled (8 times, by default)
 * it made each kernel thousands of lines that took a second to compile. */
static void no_unroll(Cg *cg, LLVMValueRef br)
{
    LLVMContextRef c = cg->ctx;
    static const char what[] = "llvm.loop.unroll.disable";
    LLVMMetadataRef s = LLVMMDStringInContext2(c, what, sizeof what - 1);
    LLVMMetadataRef ops[2] = {LLVMTemporaryMDNode(c, NULL, 0), LLVMMDNodeInContext2(c, &s, 1)};
    LLVMMetadataRef loop = LLVMMDNodeInContext2(c, ops, 2);
    LLVMMetadataReplaceAllUsesWith(ops[0], loop); /* a loop ID refers to itself */
    LLVMSetMetadata(br, LLVMGetMDKindIDInContext(c, "llvm.loop", 9), LLVMMetadataAsValue(c, loop));
}

/* Rows [i0, i0 + r) of A against the panel, accumulated and stored to C
 * (masked to the panel's columns that exist). */
static void block(Sk *s, LLVMValueRef i0, int r)
{
    Cg *cg = s->cg;
    LLVMValueRef zero = LLVMConstNull(s->vt);
    for (int i = 0; i < r; i++)
        for (int q = 0; q < VECS; q++)
            LLVMBuildStore(B, zero, s->acc[i][q]);
    LLVMValueRef arow[RMAX];
    for (int i = 0; i < r; i++)
        arow[i] = gep(cg, cg->t_f32, s->a, LLVMBuildMul(B, LLVMBuildAdd(B, i0, cg_i64(cg, i), ""), s->lda, ""));
    CgLoop kl;
    LLVMValueRef k = cg_loop_begin(cg, &kl, cg_i64(cg, 0), s->k, "k");
    LLVMValueRef brow = gep(cg, cg->t_f32, s->panel, LLVMBuildMul(B, k, cg_i64(cg, DISC_PANEL), ""));
    LLVMValueRef bv[VECS];
    for (int q = 0; q < VECS; q++) {
        LLVMValueRef p = LLVMBuildBitCast(B, gep(cg, cg->t_f32, brow, cg_i64(cg, q * LANES)), s->pv, "");
        bv[q] = LLVMBuildLoad2(B, s->vt, p, "");
        LLVMSetAlignment(bv[q], 64);
    }
    LLVMTypeRef fty = LLVMGlobalGetValueType(s->fma);
    for (int i = 0; i < r; i++) {
        LLVMValueRef x = LLVMBuildLoad2(B, cg->t_f32, gep(cg, cg->t_f32, arow[i], k), "");
        LLVMValueRef one = LLVMBuildInsertElement(B, LLVMGetUndef(s->vt), x, cg_i32(cg, 0), "");
        LLVMValueRef splat = LLVMBuildShuffleVector(B, one, LLVMGetUndef(s->vt),
                                                    LLVMConstNull(LLVMVectorType(cg->t_i32, LANES)), "");
        for (int q = 0; q < VECS; q++) {
            LLVMValueRef args[3] = {splat, bv[q], LLVMBuildLoad2(B, s->vt, s->acc[i][q], "")};
            LLVMBuildStore(B, LLVMBuildCall2(B, fty, s->fma, args, 3, ""), s->acc[i][q]);
        }
    }
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(B);
    cg_loop_end(cg, &kl);
    no_unroll(cg, LLVMGetBasicBlockTerminator(latch));
    LLVMTypeRef sty = LLVMGlobalGetValueType(s->mstore);
    for (int i = 0; i < r; i++) {
        LLVMValueRef ci = gep(cg, cg->t_f32, s->cpanel, LLVMBuildMul(B, LLVMBuildAdd(B, i0, cg_i64(cg, i), ""), s->ldc, ""));
        for (int q = 0; q < VECS; q++) {
            LLVMValueRef p = LLVMBuildBitCast(B, gep(cg, cg->t_f32, ci, cg_i64(cg, q * LANES)), s->pv, "");
            LLVMValueRef args[4] = {LLVMBuildLoad2(B, s->vt, s->acc[i][q], ""), p, cg_i32(cg, 4), s->mask[q]};
            LLVMBuildCall2(B, sty, s->mstore, args, 4, "");
        }
    }
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
    cg_loop_end(cg, &jl);
    cg_loop_end(cg, &il);
}

/* if (*i + r <= m) { block(*i, r); *i += r; }, or a loop of that (r = RMAX). */
static void blocks(Sk *s, LLVMValueRef ivar, int r, bool loop)
{
    Cg *cg = s->cg;
    LLVMBasicBlockRef test = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "rows");
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "block");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "rows_done");
    LLVMBuildBr(B, test);
    LLVMPositionBuilderAtEnd(B, test);
    LLVMValueRef i = LLVMBuildLoad2(B, cg->t_i64, ivar, "");
    LLVMValueRef fits = LLVMBuildICmp(B, LLVMIntSLE, LLVMBuildAdd(B, i, cg_i64(cg, r), ""), s->m, "");
    LLVMBuildCondBr(B, fits, body, done);
    LLVMPositionBuilderAtEnd(B, body);
    block(s, i, r);
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

LLVMValueRef cg_skinny_kernel(Cg *cg, int post_kind, bool bias, bool residual)
{
    int slot = post_kind * 4 + bias * 2 + residual;
    if (slot < 0 || slot >= (int)(sizeof cg->skinny / sizeof cg->skinny[0]))
        return NULL;
    if (cg->skinny[slot])
        return cg->skinny[slot];
    char name[48];
    snprintf(name, sizeof name, "disc_skinny_p%d%s%s", post_kind, bias ? "_bias" : "", residual ? "_res" : "");
    LLVMValueRef fn = LLVMAddFunction(cg->mod, name, cg->t_kernel);
    LLVMSetLinkage(fn, LLVMInternalLinkage);
    CgFnState st;
    cg_fn_save(cg, &st);
    cg_begin_function(cg, fn, NULL);
    LLVMBasicBlockRef body = LLVMGetInsertBlock(B);
    Sk s = {.cg = cg, .post = post_kind, .bias = bias, .residual = residual};
    s.vt = LLVMVectorType(cg->t_f32, LANES);
    s.pf = LLVMPointerType(cg->t_f32, 0);
    s.pv = LLVMPointerType(s.vt, 0);
    const char *fname = "llvm.fmuladd.v16f32";
    s.fma = LLVMGetNamedFunction(cg->mod, fname);
    if (!s.fma) {
        LLVMTypeRef p[3] = {s.vt, s.vt, s.vt};
        s.fma = LLVMAddFunction(cg->mod, fname, LLVMFunctionType(s.vt, p, 3, false));
    }
    const char *sname = "llvm.masked.store.v16f32.p0v16f32";
    s.mstore = LLVMGetNamedFunction(cg->mod, sname);
    if (!s.mstore) {
        LLVMTypeRef p[4] = {s.vt, s.pv, cg->t_i32, LLVMVectorType(cg->t_i1, LANES)};
        s.mstore = LLVMAddFunction(cg->mod, sname, LLVMFunctionType(cg->t_void, p, 4, false));
    }
    for (int i = 0; i < RMAX; i++)
        for (int q = 0; q < VECS; q++) {
            s.acc[i][q] = LLVMBuildAlloca(cg->eb, s.vt, "acc");
            LLVMSetAlignment(s.acc[i][q], 64);
        }
    LLVMValueRef f = LLVMBuildBitCast(cg->eb, LLVMGetParam(fn, 2), cg->t_p64, "f");
    s.a = field(&s, f, DISC_SK_A, s.pf);
    s.bp = field(&s, f, DISC_SK_B, s.pf);
    s.bias_p = field(&s, f, DISC_SK_BIAS, s.pf);
    s.res_p = field(&s, f, DISC_SK_RES, s.pf);
    s.c = field(&s, f, DISC_SK_C, s.pf);
    s.m = field(&s, f, DISC_SK_M, NULL);
    s.n = field(&s, f, DISC_SK_N, NULL);
    s.k = field(&s, f, DISC_SK_K, NULL);
    s.lda = field(&s, f, DISC_SK_LDA, NULL);
    s.kp = field(&s, f, DISC_SK_KP, NULL);
    s.ldc = field(&s, f, DISC_SK_LDC, NULL);
    LLVMValueRef ivar = LLVMBuildAlloca(cg->eb, cg->t_i64, "i");
    CgLoop pl;
    LLVMValueRef p = cg_loop_begin(cg, &pl, LLVMGetParam(fn, 0), LLVMGetParam(fn, 1), "panel");
    s.panel = gep(cg, cg->t_f32, s.bp, LLVMBuildMul(B, p, LLVMBuildMul(B, s.kp, cg_i64(cg, DISC_PANEL), ""), ""));
    s.c0 = LLVMBuildMul(B, p, cg_i64(cg, DISC_PANEL), "");
    LLVMValueRef left = LLVMBuildSub(B, s.n, s.c0, "");
    LLVMValueRef full = LLVMBuildICmp(B, LLVMIntSGE, left, cg_i64(cg, DISC_PANEL), "");
    s.w = LLVMBuildSelect(B, full, cg_i64(cg, DISC_PANEL), left, "");
    s.cpanel = gep(cg, cg->t_f32, s.c, s.c0);
    LLVMValueRef lanes[LANES];
    for (int l = 0; l < LANES; l++)
        lanes[l] = cg_i64(cg, l);
    LLVMValueRef iota = LLVMConstVector(lanes, LANES);
    for (int q = 0; q < VECS; q++) {
        LLVMValueRef wq = LLVMBuildSub(B, s.w, cg_i64(cg, q * LANES), "");
        LLVMValueRef one = LLVMBuildInsertElement(B, LLVMGetUndef(LLVMVectorType(cg->t_i64, LANES)), wq,
                                                  cg_i32(cg, 0), "");
        LLVMValueRef splat = LLVMBuildShuffleVector(B, one, one, LLVMConstNull(LLVMVectorType(cg->t_i32, LANES)), "");
        s.mask[q] = LLVMBuildICmp(B, LLVMIntSLT, iota, splat, "");
    }
    LLVMBuildStore(B, cg_i64(cg, 0), ivar);
    blocks(&s, ivar, RMAX, true);
    blocks(&s, ivar, 4, false);
    blocks(&s, ivar, 2, false);
    blocks(&s, ivar, 1, false);
    if (s.bias || s.residual || s.post != DISC_POST_NONE)
        epilogue(&s);
    cg_loop_end(cg, &pl);
    LLVMBuildRetVoid(B);
    cg_end_function(cg, body);
    cg_fn_restore(cg, &st);
    cg->skinny[slot] = fn;
    return fn;
}
