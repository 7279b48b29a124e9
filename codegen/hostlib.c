/*
 * hostlib.c — library ops in the host flow: a dot, convolution or pooling
 * becomes a direct call of the runtime (disc_rt_call_matmul, _conv, _pool)
 * with its descriptor as int64 fields (rt.h) computed from the symbols.
 *
 * What the library takes is decided here, at compile time, from what the
 * graph says for every shape: the dtype, the axes of a dot (each of the
 * batch, free and contracting axes of an operand must be adjacent in
 * memory, so each forms one block of a strided matrix view), constant pads.
 * Pads that are expressions of the symbols are checked when the flow runs:
 * the call is guarded, and the host op runs where a pad is negative. A
 * library op the library cannot take at all runs on the host (host.c).
 *
 * The result goes to host_alloc: a graph output is written straight into
 * the caller's buffer.
 */
#include "codegen/host.h"
#include "runtime/rt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define B (cg->b)

typedef struct LibCall {
    const char *fn;          /* disc_rt_call_* */
    int nfields;
    Dim *f[DISC_CV_NFIELDS]; /* the fields as dims (constants included) */
    int nguards;             /* pads that must be >= 0 when the flow runs */
    Dim *guard[6];
} LibCall;

static Dim *product(DimCtx *cx, const Type *t, const int64_t *axes, int n)
{
    Dim *p = dim_const(cx, 1);
    for (int i = 0; i < n; i++)
        p = dim_mul(cx, p, t->dims[axes[i]]);
    return p;
}

/* The element stride of a block of adjacent axes: the product of the dims
 * after its last one. NULL if the axes are not adjacent and in order. */
static Dim *block_stride(DimCtx *cx, const Type *t, const int64_t *axes, int n)
{
    if (n == 0)
        return dim_const(cx, 0);
    for (int i = 1; i < n; i++)
        if (axes[i] != axes[i - 1] + 1)
            return NULL;
    Dim *s = dim_const(cx, 1);
    for (int i = t->rank - 1; i > axes[n - 1]; i--)
        s = dim_mul(cx, s, t->dims[i]);
    return s;
}

/* Axes in neither list, in order. */
static int free_axes(int rank, const Attr *a, const Attr *b, int64_t *out)
{
    int n = 0;
    for (int i = 0; i < rank; i++) {
        bool used = false;
        for (int j = 0; j < a->n; j++)
            used |= a->ints[j] == i;
        for (int j = 0; j < b->n; j++)
            used |= b->ints[j] == i;
        if (!used)
            out[n++] = i;
    }
    return n;
}

static bool is_const_weights(const Op *op, int operand)
{
    const Op *w = op->in[operand]->def;
    return w && w->kind == OP_CONST && w->cst && w->cst->data;
}

static bool dot_call(DimCtx *cx, const Op *op, LibCall *c)
{
    const Type *at = &op->in[0]->type, *bt = &op->in[1]->type;
    if (at->dtype != DT_F32)
        return false;
    const Attr *lb = op_attr(op, "lhs_batch"), *rb = op_attr(op, "rhs_batch");
    const Attr *lc = op_attr(op, "lhs_contract"), *rc = op_attr(op, "rhs_contract");
    int64_t lf[MAX_RANK], rf[MAX_RANK];
    int nlf = free_axes(at->rank, lb, lc, lf), nrf = free_axes(bt->rank, rb, rc, rf);
    c->fn = "disc_rt_call_matmul";
    c->nfields = DISC_MM_NFIELDS;
    Dim **f = c->f;
    f[DISC_MM_DTYPE] = dim_const(cx, DT_F32);
    f[DISC_MM_BATCH] = product(cx, at, lb->ints, lb->n);
    f[DISC_MM_M] = product(cx, at, lf, nlf);
    f[DISC_MM_K] = product(cx, at, lc->ints, lc->n);
    f[DISC_MM_N] = product(cx, bt, rf, nrf);
    /* A as [batch][m][k], B as [batch][k][n] */
    f[DISC_MM_A_STRIDE + 0] = block_stride(cx, at, lb->ints, lb->n);
    f[DISC_MM_A_STRIDE + 1] = block_stride(cx, at, lf, nlf);
    f[DISC_MM_A_STRIDE + 2] = block_stride(cx, at, lc->ints, lc->n);
    f[DISC_MM_B_STRIDE + 0] = block_stride(cx, bt, rb->ints, rb->n);
    f[DISC_MM_B_STRIDE + 1] = block_stride(cx, bt, rc->ints, rc->n);
    f[DISC_MM_B_STRIDE + 2] = block_stride(cx, bt, rf, nrf);
    for (int i = 0; i < 3; i++)
        if (!f[DISC_MM_A_STRIDE + i] || !f[DISC_MM_B_STRIDE + i])
            return false;
    f[DISC_MM_C_STRIDE + 0] = dim_mul(cx, f[DISC_MM_M], f[DISC_MM_N]);
    f[DISC_MM_C_STRIDE + 1] = f[DISC_MM_N];
    f[DISC_MM_C_STRIDE + 2] = dim_const(cx, 1);
    f[DISC_MM_POST] = dim_const(cx, DISC_POST_NONE);
    f[DISC_MM_WEIGHTS_CONST] = dim_const(cx, is_const_weights(op, 1));
    return true;
}

/* Spatial sizes, strides, dilations and pads of a convolution or pooling
 * into f[in], f[stride], ...; pads that are not constants become guards. */
static bool window(DimCtx *cx, const Op *op, const Type *xt, int nsp, LibCall *c, int in, int stride, int dil,
                   int lo, int hi)
{
    const Attr *st = op_attr(op, "strides"), *dl = op_attr(op, "dilations"), *pd = op_attr(op, "pads");
    for (int i = 0; i < 3; i++) {
        bool sp = i < nsp;
        c->f[in + i] = sp ? xt->dims[2 + i] : dim_const(cx, 1);
        c->f[stride + i] = dim_const(cx, sp ? st->ints[i] : 1);
        c->f[dil + i] = dim_const(cx, sp ? dl->ints[i] : 1);
        c->f[lo + i] = sp ? pd->dims[i] : dim_const(cx, 0);
        c->f[hi + i] = sp ? pd->dims[nsp + i] : dim_const(cx, 0);
        for (int k = 0; sp && k < 2; k++) {
            Dim *p = k ? pd->dims[nsp + i] : pd->dims[i];
            if (dim_is_const(p) && p->c < 0)
                return false; /* cropping pads: the host op does those */
            if (!dim_is_const(p))
                c->guard[c->nguards++] = p;
        }
    }
    return true;
}

static bool conv_call(DimCtx *cx, const Op *op, LibCall *c)
{
    const Type *xt = &op->in[0]->type, *wt = &op->in[1]->type, *yt = &op->out[0]->type;
    int nsp = xt->rank - 2;
    if (xt->dtype != DT_F32 || nsp < 1 || nsp > 3)
        return false;
    c->fn = "disc_rt_call_conv";
    c->nfields = DISC_CV_NFIELDS;
    Dim **f = c->f;
    f[DISC_CV_DTYPE] = dim_const(cx, DT_F32);
    f[DISC_CV_NSP] = dim_const(cx, nsp);
    f[DISC_CV_N] = xt->dims[0];
    f[DISC_CV_C] = xt->dims[1];
    f[DISC_CV_O] = yt->dims[1];
    f[DISC_CV_GROUPS] = dim_const(cx, op_attr_int(op, "groups", 1));
    f[DISC_CV_TRANSPOSE] = dim_const(cx, op->kind == OP_CONV_TRANSPOSE);
    f[DISC_CV_POST] = dim_const(cx, DISC_POST_NONE);
    f[DISC_CV_WEIGHTS_CONST] = dim_const(cx, is_const_weights(op, 1));
    for (int i = 0; i < 3; i++) {
        f[DISC_CV_K + i] = i < nsp ? wt->dims[2 + i] : dim_const(cx, 1);
        f[DISC_CV_OUT + i] = i < nsp ? yt->dims[2 + i] : dim_const(cx, 1);
    }
    return window(cx, op, xt, nsp, c, DISC_CV_IN, DISC_CV_STRIDE, DISC_CV_DILATION, DISC_CV_PAD_LO, DISC_CV_PAD_HI);
}

static bool pool_call(DimCtx *cx, const Op *op, LibCall *c)
{
    const Type *xt = &op->in[0]->type, *yt = &op->out[0]->type;
    int nsp = xt->rank - 2;
    if (xt->dtype != DT_F32 || nsp < 1 || nsp > 3 || op_attr_int(op, "ceil", 0))
        return false;
    c->fn = "disc_rt_call_pool";
    c->nfields = DISC_PL_NFIELDS;
    Dim **f = c->f;
    const Attr *win = op_attr(op, "window");
    f[DISC_PL_DTYPE] = dim_const(cx, DT_F32);
    f[DISC_PL_NSP] = dim_const(cx, nsp);
    f[DISC_PL_MAX] = dim_const(cx, !strcmp(op_attr_str(op, "kind", "max"), "max"));
    f[DISC_PL_N] = xt->dims[0];
    f[DISC_PL_C] = xt->dims[1];
    f[DISC_PL_COUNT_PAD] = dim_const(cx, op_attr_int(op, "count_pad", 0));
    for (int i = 0; i < 3; i++) {
        f[DISC_PL_WINDOW + i] = dim_const(cx, i < nsp ? win->ints[i] : 1);
        f[DISC_PL_OUT + i] = i < nsp ? yt->dims[2 + i] : dim_const(cx, 1);
    }
    return window(cx, op, xt, nsp, c, DISC_PL_IN, DISC_PL_STRIDE, DISC_PL_DILATION, DISC_PL_PAD_LO, DISC_PL_PAD_HI);
}

/* The call, with the result written to the value's buffer. */
static bool emit_call(Host *h, Op *op, const LibCall *c)
{
    Cg *cg = h->cg;
    LLVMValueRef fields = LLVMBuildArrayAlloca(cg->eb, cg->t_i64, cg_i64(cg, c->nfields), "");
    for (int i = 0; i < c->nfields; i++)
        LLVMBuildStore(B, cg_dim(cg, c->f[i]), host_gep(cg, cg->t_i64, fields, i));
    if (op->kind == OP_DOT) { /* a batch of one: no batch strides (folds into one matmul) */
        LLVMValueRef one = LLVMBuildICmp(B, LLVMIntEQ, cg_dim(cg, c->f[DISC_MM_BATCH]), cg_i64(cg, 1), "");
        for (int s = DISC_MM_A_STRIDE; s <= DISC_MM_C_STRIDE; s += 3)
            LLVMBuildStore(B, LLVMBuildSelect(B, one, cg_i64(cg, 0), cg_dim(cg, c->f[s]), ""),
                           host_gep(cg, cg->t_i64, fields, s));
    }
    for (int i = 0; i < op->nin; i++)
        if (!h->vbuf[op->in[i]->id])
            return diag_set(cg->d, "codegen: %s reads a value with no buffer", op_info(op->kind)->name);
    LLVMValueRef out = host_alloc(h, op->out[0]);
    LLVMValueRef null = LLVMConstPointerNull(cg->t_p8), rc;
    LLVMTypeRef fty;
    char fn[64]; /* the JIT under DISC_PROFILE times calls: disc_prof_call_* */
    snprintf(fn, sizeof fn, "%s%s", !cg->aot && getenv("DISC_PROFILE") ? "disc_prof" : "disc_rt",
             c->fn + strlen("disc_rt"));
    if (op->kind == OP_POOL) {
        LLVMTypeRef params[4] = {cg->t_p8, cg->t_p64, cg->t_p8, cg->t_p8};
        LLVMValueRef f = host_fn_decl(cg, fn, cg->t_i32, params, 4, &fty);
        LLVMValueRef a[4] = {h->rt, fields, h->vbuf[op->in[0]->id], out};
        rc = LLVMBuildCall2(B, fty, f, a, 4, "");
    } else {
        LLVMTypeRef params[7] = {cg->t_p8, cg->t_p64, cg->t_p8, cg->t_p8, cg->t_p8, cg->t_p8, cg->t_p8};
        LLVMValueRef f = host_fn_decl(cg, fn, cg->t_i32, params, 7, &fty);
        LLVMValueRef a[7] = {h->rt, fields, h->vbuf[op->in[0]->id], h->vbuf[op->in[1]->id], null, null, out};
        rc = LLVMBuildCall2(B, fty, f, a, 7, "");
    }
    host_check_or_return(h, LLVMBuildICmp(B, LLVMIntEQ, rc, cg_i32(cg, 0), ""), -1);
    return true;
}

bool host_emit_library_op(Host *h, Op *op)
{
    Cg *cg = h->cg;
    DimCtx *cx = &cg->g->dims;
    LibCall c = {0};
    bool takes = false;
    switch (op->kind) {
    case OP_DOT: takes = dot_call(cx, op, &c); break;
    case OP_CONV:
    case OP_CONV_TRANSPOSE: takes = conv_call(cx, op, &c); break;
    case OP_POOL: takes = pool_call(cx, op, &c); break;
    default: break;
    }
    if (!takes)
        return host_emit_host_op(h, op);
    cg->nlibrary++;
    if (c.nguards == 0)
        return emit_call(h, op, &c);
    /* pads known only at run time: the library where they are all >= 0 */
    LLVMValueRef ok = LLVMConstInt(cg->t_i1, 1, false);
    for (int i = 0; i < c.nguards; i++)
        ok = LLVMBuildAnd(B, ok, LLVMBuildICmp(B, LLVMIntSGE, cg_dim(cg, c.guard[i]), cg_i64(cg, 0), ""), "");
    LLVMValueRef res = LLVMBuildAlloca(cg->eb, cg->t_p8, "");
    LLVMBasicBlockRef lib = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "lib");
    LLVMBasicBlockRef host = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "hostop");
    LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "join");
    LLVMBuildCondBr(B, ok, lib, host);
    Value *y = op->out[0];
    LLVMPositionBuilderAtEnd(B, lib);
    if (!emit_call(h, op, &c))
        return false;
    LLVMBuildStore(B, h->vbuf[y->id], res);
    LLVMBuildBr(B, join);
    LLVMPositionBuilderAtEnd(B, host);
    h->vbuf[y->id] = NULL;
    if (!host_emit_host_op(h, op))
        return false;
    LLVMBuildStore(B, h->vbuf[y->id], res);
    LLVMBuildBr(B, join);
    LLVMPositionBuilderAtEnd(B, join);
    h->vbuf[y->id] = LLVMBuildLoad2(B, cg->t_p8, res, "");
    return true;
}
