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
#include "runtime/interp.h"
#include "runtime/rt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define B (cg->b)

typedef struct LibCall {
    const char *fn;          /* disc_rt_call_* */
    int nfields;
    Dim *f[DISC_CV_NFIELDS]; /* the fields as dims (constants included) */
    int nguards;             /* pads that must be >= 0 when the flow runs */
    Dim *guard[12];
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

/* dev: the device's library (cuBLASLt), which takes f16, bf16 and f64 as
 * well, with both operands and the result of the one dtype. */
static bool dot_call(DimCtx *cx, const Op *op, LibCall *c, bool dev)
{
    const Type *at = &op->in[0]->type, *bt = &op->in[1]->type;
    DType dt = at->dtype;
    bool fp = dt == DT_F32 || (dev && (dt == DT_F16 || dt == DT_BF16 || dt == DT_F64));
    if (!fp || bt->dtype != dt || op->out[0]->type.dtype != dt)
        return false;
    const Attr *lb = op_attr(op, "lhs_batch"), *rb = op_attr(op, "rhs_batch");
    const Attr *lc = op_attr(op, "lhs_contract"), *rc = op_attr(op, "rhs_contract");
    int64_t lf[MAX_RANK], rf[MAX_RANK];
    int nlf = free_axes(at->rank, lb, lc, lf), nrf = free_axes(bt->rank, rb, rc, rf);
    c->fn = "disc_rt_call_matmul";
    c->nfields = DISC_MM_NFIELDS;
    Dim **f = c->f;
    f[DISC_MM_DTYPE] = dim_const(cx, dt);
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
    f[DISC_MM_PANEL] = dim_const(cx, 0); /* emit_call sets it for a skinny variant */
    return true;
}

/* Where a conv's or pool's channels are (the layout pass, passes/layout.c:
 * channels_last 1 reads and writes [N, spatial..., C], 2 writes so from
 * [N, C, spatial...]; with block b they are [N, ceildiv(C, b),
 * spatial..., b] instead): the channel axis and first spatial axis of its
 * operand (xc, xs) and of its result (yc, ys), the call's DISC_NHWC_*
 * bits with the block, and the block. */
typedef struct Chan {
    int xc, xs, yc, ys, bits, block;
} Chan;

static Chan chan(const Op *op, int rank)
{
    int64_t m = op_attr_int(op, "channels_last", 0), b = m ? op_attr_int(op, "block", 0) : 0;
    bool xl = m == 1, yl = m != 0;
    int bits = (xl ? DISC_NHWC_SRC : 0) | (yl ? DISC_NHWC_DST : 0) | (int)(b << DISC_BLOCK_SHIFT);
    if (b) /* rank is the operand's: blocked by 1 when xl */
        return (Chan){1, 2, 1, 2, bits, (int)b};
    return (Chan){xl ? rank - 1 : 1, xl ? 1 : 2, yl ? rank - 1 : 1, yl ? 1 : 2, bits, 0};
}

/* The spatial dims of conv or pool op. */
static int spatial_dims(const Op *op)
{
    const Type *x = &op->in[0]->type;
    Chan ch = chan(op, x->rank);
    return x->rank - 2 - (ch.block && (ch.bits & DISC_NHWC_SRC));
}

/* Spatial sizes, strides, dilations and pads of a convolution or pooling
 * into f[in], f[stride], ...; pads that are not constants become guards. */
static bool window(DimCtx *cx, const Op *op, const Type *xt, int nsp, LibCall *c, int in, int stride, int dil,
                   int lo, int hi)
{
    int s0 = chan(op, xt->rank).xs;
    const Attr *st = op_attr(op, "strides"), *dl = op_attr(op, "dilations"), *pd = op_attr(op, "pads");
    for (int i = 0; i < 3; i++) {
        bool sp = i < nsp;
        c->f[in + i] = sp ? xt->dims[s0 + i] : dim_const(cx, 1);
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

/* A ceil-mode pool's end pads as the library takes them: the library
 * counts floor((in + lo + hi - extent) / stride) + 1 windows, so hi
 * becomes what puts the last of the `out` windows (PyTorch's rule, which
 * shape inference applied) at its place: (out - 1) stride + extent - in
 * - lo, where the last window hangs past the end pad. Padding never wins
 * a max and an average without count_pad counts the taps on the input
 * only, as ONNX does; an average with count_pad divides by the whole
 * window, which is ONNX's divisor only where no window hangs past the
 * explicit end pad. Guarded: the host op runs where the new pad is
 * negative or, with count_pad, beyond the explicit one. */
static bool ceil_pads(DimCtx *cx, LibCall *c)
{
    Dim **f = c->f;
    bool count_pad = dim_is(f[DISC_PL_COUNT_PAD], 1);
    for (int i = 0; i < f[DISC_PL_NSP]->c; i++) {
        int64_t ext = (f[DISC_PL_WINDOW + i]->c - 1) * f[DISC_PL_DILATION + i]->c + 1;
        Dim *last = dim_mul(cx, dim_addc(cx, f[DISC_PL_OUT + i], -1), f[DISC_PL_STRIDE + i]);
        Dim *hi = dim_sub(cx, dim_addc(cx, last, ext), dim_add(cx, f[DISC_PL_IN + i], f[DISC_PL_PAD_LO + i]));
        Dim *checks[2] = {hi, count_pad ? dim_sub(cx, f[DISC_PL_PAD_HI + i], hi) : NULL};
        for (int k = 0; k < 2 && checks[k]; k++) {
            if (dim_is_const(checks[k]) && checks[k]->c < 0)
                return false;
            if (!dim_is_const(checks[k]))
                c->guard[c->nguards++] = checks[k];
        }
        f[DISC_PL_PAD_HI + i] = hi;
    }
    return true;
}

/* (dev: the device's library, which takes f16 too) */
static bool conv_call(DimCtx *cx, const Op *op, LibCall *c, bool dev)
{
    const Type *xt = &op->in[0]->type, *wt = &op->in[1]->type, *yt = &op->out[0]->type;
    int nsp = spatial_dims(op);
    Chan ch = chan(op, xt->rank);
    if (!(xt->dtype == DT_F32 || (dev && xt->dtype == DT_F16)) || nsp < 1 || nsp > 3 ||
        (ch.block && (dev || (ch.block != 8 && ch.block != 16))))
        return false; /* oneDNN's blocks are 8 and 16 (a host op runs others) */
    c->fn = "disc_rt_call_conv";
    c->nfields = DISC_CV_NFIELDS;
    Dim **f = c->f;
    f[DISC_CV_DTYPE] = dim_const(cx, xt->dtype);
    f[DISC_CV_NSP] = dim_const(cx, nsp);
    f[DISC_CV_N] = xt->dims[0];
    f[DISC_CV_C] = ch.block ? dim_mulc(cx, wt->dims[1], op_attr_int(op, "groups", 1)) : xt->dims[ch.xc];
    f[DISC_CV_O] = ch.block ? wt->dims[0] : yt->dims[ch.yc];
    f[DISC_CV_GROUPS] = dim_const(cx, op_attr_int(op, "groups", 1));
    f[DISC_CV_TRANSPOSE] = dim_const(cx, op->kind == OP_CONV_TRANSPOSE);
    f[DISC_CV_POST] = dim_const(cx, DISC_POST_NONE);
    f[DISC_CV_WEIGHTS_CONST] = dim_const(cx, is_const_weights(op, 1));
    f[DISC_CV_LAYOUT] = dim_const(cx, ch.bits); /* and emit_call the residual's */
    f[DISC_CV_POST_RES] = dim_const(cx, DISC_POST_NONE);
    for (int i = 0; i < 3; i++) {
        f[DISC_CV_K + i] = i < nsp ? wt->dims[2 + i] : dim_const(cx, 1);
        f[DISC_CV_OUT + i] = i < nsp ? yt->dims[ch.ys + i] : dim_const(cx, 1);
    }
    return window(cx, op, xt, nsp, c, DISC_CV_IN, DISC_CV_STRIDE, DISC_CV_DILATION, DISC_CV_PAD_LO, DISC_CV_PAD_HI);
}

static bool pool_call(DimCtx *cx, const Op *op, LibCall *c, bool dev)
{
    const Type *xt = &op->in[0]->type, *yt = &op->out[0]->type;
    int nsp = spatial_dims(op);
    Chan ch = chan(op, xt->rank);
    if (!(xt->dtype == DT_F32 || (dev && xt->dtype == DT_F16)) || nsp < 1 || nsp > 3 ||
        (ch.block && (dev || (ch.block != 8 && ch.block != 16))))
        return false;
    c->fn = "disc_rt_call_pool";
    c->nfields = DISC_PL_NFIELDS;
    Dim **f = c->f;
    const Attr *win = op_attr(op, "window");
    f[DISC_PL_DTYPE] = dim_const(cx, xt->dtype);
    f[DISC_PL_NSP] = dim_const(cx, nsp);
    f[DISC_PL_MAX] = dim_const(cx, !strcmp(op_attr_str(op, "kind", "max"), "max"));
    f[DISC_PL_N] = xt->dims[0];
    f[DISC_PL_C] = ch.block ? dim_mul(cx, xt->dims[1], xt->dims[xt->rank - 1]) : xt->dims[ch.xc]; /* every lane */
    f[DISC_PL_COUNT_PAD] = dim_const(cx, op_attr_int(op, "count_pad", 0));
    f[DISC_PL_LAYOUT] = dim_const(cx, ch.bits);
    for (int i = 0; i < 3; i++) {
        f[DISC_PL_WINDOW + i] = dim_const(cx, i < nsp ? win->ints[i] : 1);
        f[DISC_PL_OUT + i] = i < nsp ? yt->dims[ch.ys + i] : dim_const(cx, 1);
    }
    if (!window(cx, op, xt, nsp, c, DISC_PL_IN, DISC_PL_STRIDE, DISC_PL_DILATION, DISC_PL_PAD_LO, DISC_PL_PAD_HI))
        return false;
    return !op_attr_int(op, "ceil", 0) || ceil_pads(cx, c);
}

/* The start of a library group's epilogue that the library applies as it
 * writes the result: result = post(op + bias) + residual. */
typedef struct Fused {
    Value *bias, *residual; /* NULL: none */
    DiscPost post;
    DiscPost post_res;      /* a convolution's activation after the residual */
    Value *result;          /* the last value of the chain */
    Op *ops[40];            /* the chain's ops: 2 + 16 + 1 + 16 at most (activation takes 16) */
    int nops;
} Fused;

/* Whether a dot gets the skinny kernel (skinny.c) as a variant for when
 * few rows come: constant f32 weights, A's rows contiguous, and m not
 * proved (ISL, with the facts and --assume hints) to exceed the kernel's
 * row limit (disc_rt_skinny_max_m)
 * or to be 0. The runtime picks the variant per call from m. */
static bool skinny_fits(Cg *cg, const Op *op, const LibCall *c)
{
    Dim *m = c->f[DISC_MM_M], *ak = c->f[DISC_MM_A_STRIDE + 2];
    if (op->kind != OP_DOT || !dim_is_const(c->f[DISC_MM_DTYPE]) || c->f[DISC_MM_DTYPE]->c != DT_F32 ||
        !is_const_weights(op, 1) || !dim_is_const(ak) || ak->c != 1)
        return false;
    DimCtx *cx = &cg->g->dims;
    Constraints *cons = cg->si ? cg->si->cons : NULL;
    int64_t max_m = cg->target->skinny_rows(cg);
    if (dim_is_const(m))
        return m->c >= 1 && m->c <= max_m;
    return !cons || !(cons_prove(cons, m, REL_GT, dim_const(cx, max_m)) ||
                      cons_prove(cons, m, REL_LE, dim_const(cx, 0)));
}

static bool unit(const Dim *d)
{
    return dim_is_const(d) && d->c == 1;
}

/* Whether the device's library (cuBLASLt) takes the call: each operand
 * with a unit stride along one of its matrix axes (A: k or m, B: n or k),
 * or an axis of size 1, as far as the graph says for every shape. */
static bool dev_fits(const LibCall *c)
{
    Dim *const *f = c->f;
    bool a = unit(f[DISC_MM_A_STRIDE + 2]) || unit(f[DISC_MM_A_STRIDE + 1]) || unit(f[DISC_MM_K]) || unit(f[DISC_MM_M]);
    bool b = unit(f[DISC_MM_B_STRIDE + 2]) || unit(f[DISC_MM_B_STRIDE + 1]) || unit(f[DISC_MM_K]) || unit(f[DISC_MM_N]);
    return a && b;
}

/* Whether the device's library (cuDNN, disc_rt_dev_conv) takes the
 * convolution for every shape: channels first, pads constants and equal
 * at both ends of each axis (cuDNN has one pad an axis); a transposed one
 * with each output_padding below its stride (the backward data of a
 * convolution that gives x's size from y's). */
static bool dev_conv_fits(const Op *op, const LibCall *c)
{
    Dim *const *f = c->f;
    if ((op->kind != OP_CONV && op->kind != OP_CONV_TRANSPOSE) || c->nguards || !dim_is(f[DISC_CV_LAYOUT], 0))
        return false;
    const Attr *op_pad = op->kind == OP_CONV_TRANSPOSE ? op_attr(op, "output_padding") : NULL;
    for (int i = 0; op_pad && i < (int)op_pad->n; i++)
        if (op_pad->ints[i] < 0 || !dim_is_const(f[DISC_CV_STRIDE + i]) || op_pad->ints[i] >= f[DISC_CV_STRIDE + i]->c)
            return false;
    for (int i = 0; i < 3; i++)
        if (!dim_is_const(f[DISC_CV_PAD_LO + i]) || f[DISC_CV_PAD_LO + i] != f[DISC_CV_PAD_HI + i])
            return false;
    return true;
}

/* Whether cuDNN's pooling (disc_rt_dev_pool) takes the pool for every
 * shape: channels first, no dilation, pads constants, equal at both ends
 * and smaller than the window. */
static bool dev_pool_fits(const Op *op, const LibCall *c)
{
    Dim *const *f = c->f;
    if (op->kind != OP_POOL || c->nguards || !dim_is(f[DISC_PL_LAYOUT], 0))
        return false;
    for (int i = 0; i < 3; i++)
        if (!dim_is(f[DISC_PL_DILATION + i], 1) || !dim_is_const(f[DISC_PL_PAD_LO + i]) ||
            f[DISC_PL_PAD_LO + i] != f[DISC_PL_PAD_HI + i] || !dim_is_const(f[DISC_PL_WINDOW + i]) ||
            f[DISC_PL_PAD_LO + i]->c >= f[DISC_PL_WINDOW + i]->c)
            return false;
    return true;
}

/* The call's fields, an i64 array filled from the symbols (fz: with the
 * fused epilogue's post). */
static LLVMValueRef call_fields(Host *h, const Op *op, const LibCall *c, const Fused *fz)
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
    if (fz && fz->post != DISC_POST_NONE)
        LLVMBuildStore(B, cg_i64(cg, fz->post),
                       host_gep(cg, cg->t_i64, fields, op->kind == OP_DOT ? DISC_MM_POST : DISC_CV_POST));
    if (fz && fz->post_res != DISC_POST_NONE)
        LLVMBuildStore(B, cg_i64(cg, fz->post_res), host_gep(cg, cg->t_i64, fields, DISC_CV_POST_RES));
    int bits = chan(op, op->in[0]->type.rank).bits;
    if (fz && fz->residual && op->kind == OP_CONV && (bits & DISC_NHWC_DST))
        LLVMBuildStore(B, cg_i64(cg, bits | DISC_NHWC_RES), host_gep(cg, cg->t_i64, fields, DISC_CV_LAYOUT));
    return fields;
}

/* A dot, convolution or pool on the device's library (disc_rt_dev_matmul,
 * disc_rt_dev_conv, disc_rt_dev_pool): its operands' device copies, the
 * result in device memory. */
static bool emit_dev_call(Host *h, Op *op, const LibCall *c, const Fused *fz, bool alloc_result)
{
    Cg *cg = h->cg;
    LLVMValueRef fields = call_fields(h, op, c, fz);
    if (op->kind == OP_POOL) {
        LLVMValueRef a[4] = {h->rt, fields, host_kbuf(h, op->in[0]), NULL};
        if (!a[2])
            return false;
        a[3] = h->dbuf[op->out[0]->id] = host_alloc_k(h, op->out[0]);
        LLVMTypeRef fty, params[4] = {cg->t_p8, cg->t_p64, cg->t_p8, cg->t_p8};
        LLVMValueRef f = host_fn_decl(cg, "disc_rt_dev_pool", cg->t_i32, params, 4, &fty);
        LLVMValueRef rc = LLVMBuildCall2(B, fty, f, a, 4, "");
        host_check_or_return(h, LLVMBuildICmp(B, LLVMIntEQ, rc, cg_i32(cg, 0), ""), -1);
        return true;
    }
    LLVMValueRef null = LLVMConstPointerNull(cg->t_p8);
    LLVMValueRef a[7] = {h->rt, fields, host_kbuf(h, op->in[0]), host_kbuf(h, op->in[1]), null, null, NULL};
    if ((fz && fz->bias && !(a[4] = host_kbuf(h, fz->bias))) || (fz && fz->residual && !(a[5] = host_kbuf(h, fz->residual))) ||
        !a[2] || !a[3])
        return false;
    Value *res = fz ? fz->result : op->out[0];
    a[6] = host_alloc_k(h, alloc_result ? res : op->out[0]);
    h->dbuf[op->out[0]->id] = h->dbuf[res->id] = a[6];
    LLVMTypeRef fty, params[7] = {cg->t_p8, cg->t_p64, cg->t_p8, cg->t_p8, cg->t_p8, cg->t_p8, cg->t_p8};
    LLVMValueRef f = host_fn_decl(cg, op->kind == OP_DOT ? "disc_rt_dev_matmul" : "disc_rt_dev_conv", cg->t_i32,
                                  params, 7, &fty);
    LLVMValueRef rc = LLVMBuildCall2(B, fty, f, a, 7, "");
    /* a matmul with a bias or an activation returns 1 where cuBLAS made
     * the product alone (host_emit_library_group runs the rest) */
    bool rest = op->kind == OP_DOT && fz && (fz->bias || fz->post != DISC_POST_NONE);
    host_check_or_return(h, LLVMBuildICmp(B, rest ? LLVMIntSGE : LLVMIntEQ, rc, cg_i32(cg, 0), ""), -1);
    h->dev_rc = rest ? rc : NULL;
    return true;
}

/* The call, with the result written to the value's buffer (fz: with the
 * fused epilogue, into the buffer of fz->result). */
static bool emit_call(Host *h, Op *op, const LibCall *c, const Fused *fz, bool alloc_result)
{
    Cg *cg = h->cg;
    if (cg->target->dev_memory)
        return emit_dev_call(h, op, c, fz, alloc_result);
    LLVMValueRef fields = call_fields(h, op, c, fz);
    for (int i = 0; i < op->nin; i++)
        if (!h->vbuf[op->in[i]->id])
            return diag_setk(cg->d, DIAG_INTERNAL, "codegen: %s reads a value with no buffer",
                             op_info(op->kind)->name);
    LLVMValueRef null = LLVMConstPointerNull(cg->t_p8), rc;
    LLVMValueRef bias = null, residual = null;
    if (fz && ((fz->bias && !(bias = h->vbuf[fz->bias->id])) || (fz->residual && !(residual = h->vbuf[fz->residual->id]))))
        return diag_setk(cg->d, DIAG_INTERNAL, "codegen: %s: an epilogue operand has no buffer",
                         op_info(op->kind)->name);
    LLVMValueRef out;
    if (!fz) {
        out = host_alloc(h, op->out[0]);
    } else { /* the chain's result in its own buffer, or in the call's (planned) one */
        out = host_alloc(h, alloc_result ? fz->result : op->out[0]);
        h->vbuf[op->out[0]->id] = h->vbuf[fz->result->id] = out;
    }
    LLVMTypeRef fty;
    char fn[64];
    snprintf(fn, sizeof fn, "%s", c->fn);
    if (op->kind == OP_POOL) {
        LLVMTypeRef params[4] = {cg->t_p8, cg->t_p64, cg->t_p8, cg->t_p8};
        LLVMValueRef f = host_fn_decl(cg, fn, cg->t_i32, params, 4, &fty);
        LLVMValueRef a[4] = {h->rt, fields, h->vbuf[op->in[0]->id], out};
        rc = LLVMBuildCall2(B, fty, f, a, 4, "");
    } else {
        LLVMTypeRef params[8] = {cg->t_p8, cg->t_p64, cg->t_p8, cg->t_p8, cg->t_p8, cg->t_p8, cg->t_p8,
                                 LLVMPointerType(cg->t_kernel, 0)};
        LLVMValueRef a[8] = {h->rt, fields, h->vbuf[op->in[0]->id], h->vbuf[op->in[1]->id], bias, residual, out};
        int np = 7;
        int panel = 0;
        LLVMValueRef sk = cg->target->skinny && cg->target->skinny_rows && skinny_fits(cg, op, c)
                              ? cg->target->skinny(cg, fz ? fz->post : DISC_POST_NONE, fz && fz->bias,
                                                   fz && fz->residual, &panel)
                              : NULL;
        if (sk) {
            cg->nskinny++;
            a[np++] = sk;
            LLVMBuildStore(B, cg_i64(cg, panel), host_gep(cg, cg->t_i64, fields, DISC_MM_PANEL));
            snprintf(fn, sizeof fn, "disc_rt_call_skinny");
        }
        LLVMValueRef f = host_fn_decl(cg, fn, cg->t_i32, params, np, &fty);
        rc = LLVMBuildCall2(B, fty, f, a, (unsigned)np, "");
    }
    host_check_or_return(h, LLVMBuildICmp(B, LLVMIntEQ, rc, cg_i32(cg, 0), ""), -1);
    return true;
}

/* Whether the library takes op, and the call's fields (dev: the
 * device's library). */
static bool lib_call(DimCtx *cx, const Op *op, LibCall *c, bool dev)
{
    memset(c, 0, sizeof *c);
    bool ok;
    switch (op->kind) {
    case OP_DOT: ok = dot_call(cx, op, c, dev); break;
    case OP_CONV:
    case OP_CONV_TRANSPOSE: ok = conv_call(cx, op, c, dev); break;
    case OP_POOL: ok = pool_call(cx, op, c, dev); break;
    default: return false;
    }
    for (int i = 0; ok && i < c->nfields; i++)
        ok = c->f[i] != NULL; /* out of memory: the driver fails the compile */
    return ok;
}

static bool emit_library(Host *h, Op *op, const LibCall *c, const Fused *fz, bool alloc_result)
{
    Cg *cg = h->cg;
    cg->nlibrary++;
    cg->nepilogue += fz != NULL;
    cg->nnhwc += (op->kind == OP_CONV || op->kind == OP_POOL) && op_attr_int(op, "channels_last", 0);
    if (c->nguards == 0)
        return emit_call(h, op, c, fz, alloc_result);
    /* pads known only at run time: the library where they are all >= 0 */
    LLVMValueRef ok = LLVMConstInt(cg->t_i1, 1, false);
    for (int i = 0; i < c->nguards; i++)
        ok = LLVMBuildAnd(B, ok, LLVMBuildICmp(B, LLVMIntSGE, cg_dim(cg, c->guard[i]), cg_i64(cg, 0), ""), "");
    LLVMValueRef res = LLVMBuildAlloca(cg->eb, cg->t_p8, "");
    LLVMBasicBlockRef lib = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "lib");
    LLVMBasicBlockRef host = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "hostop");
    LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "join");
    LLVMBuildCondBr(B, ok, lib, host);
    Value *y = op->out[0];
    LLVMPositionBuilderAtEnd(B, lib);
    DimMap mark;
    cg_dim_mark(cg, &mark);
    bool done = emit_call(h, op, c, NULL, false);
    if (done) {
        LLVMBuildStore(B, h->vbuf[y->id], res);
        LLVMBuildBr(B, join);
        LLVMPositionBuilderAtEnd(B, host);
        cg_dim_back(cg, &mark);
        h->vbuf[y->id] = NULL;
        done = host_emit_host_op(h, op);
    }
    if (done) {
        LLVMBuildStore(B, h->vbuf[y->id], res);
        LLVMBuildBr(B, join);
        LLVMPositionBuilderAtEnd(B, join);
        cg_dim_back(cg, &mark);
    }
    dimmap_free(&mark);
    if (!done)
        return false;
    h->vbuf[y->id] = LLVMBuildLoad2(B, cg->t_p8, res, "");
    return true;
}

bool host_emit_library_op(Host *h, Op *op)
{
    LibCall c;
    if (!lib_call(&h->cg->g->dims, op, &c, h->cg->target->dev_memory))
        return host_emit_host_op(h, op);
    return emit_library(h, op, &c, NULL, false);
}

/* ---- epilogues the library applies ------------------------------------------ */

/* Uses of every value by ops and graph outputs. */
static int *use_counts(Host *h)
{
    Graph *g = h->cg->g;
    if (h->nuse)
        return h->nuse;
    h->nuse = arena_array(&g->arena, (size_t)g->nvalues + 1, sizeof *h->nuse);
    if (!h->nuse)
        return NULL;
    for (const Op *op = g->first; op; op = op->next)
        for (int i = 0; i < op->nin; i++)
            h->nuse[op->in[i]->id]++;
    for (int i = 0; i < g->noutputs; i++)
        h->nuse[g->outputs[i]->id]++;
    return h->nuse;
}

/* The value of a scalar floating-point constant (any rank, one element). */
static bool scalar(const Value *v, double *out)
{
    const Op *d = v->def;
    size_t n;
    if (!d || d->kind != OP_CONST || !d->cst || !d->cst->data || !dtype_is_float(v->type.dtype) ||
        !type_static_numel(&v->type, &n) || n != 1)
        return false;
    Tensor t = {.dtype = v->type.dtype, .rank = 0, .data = (void *)d->cst->data, .nbytes = dtype_size(v->type.dtype)};
    *out = interp_load_f(&t, 0);
    return true;
}

/* The other operand of binary op if one of them is v. */
static Value *other(const Op *op, const Value *v)
{
    return op->in[0] == v ? op->in[1] : op->in[1] == v ? op->in[0] : NULL;
}

/* The epilogue ops (after the root) that read v; returns how many. */
static int users(const Group *grp, int first, const Value *v, Op **out, int max)
{
    int n = 0;
    for (int i = first; i < grp->nops; i++) {
        Op *op = grp->ops[i];
        for (int j = 0; j < op->nin; j++)
            if (op->in[j] == v) {
                if (n < max)
                    out[n] = op;
                n++;
                break;
            }
    }
    return n;
}

/* The single epilogue op that reads v, of kind k, when nothing else does. */
static Op *sole(const Group *grp, int first, const int *nuse, const Value *v, OpKind k)
{
    Op *u[2];
    if (users(grp, first, v, u, 2) != 1 || u[0]->kind != k || u[0]->nout != 1)
        return NULL;
    int uses = 0;
    for (int j = 0; j < u[0]->nin; j++)
        uses += u[0]->in[j] == v;
    return nuse[v->id] == uses && type_eq(&u[0]->out[0]->type, &v->type) ? u[0] : NULL;
}

/* A bias for the result y of op: f32, broadcast along axis `axis` of y only
 * (its other dims 1), contiguous. */
static bool bias_fits(const Type *y, const Value *b, int axis)
{
    const Type *t = &b->type;
    if (t->dtype != y->dtype || t->rank > y->rank || t->rank == 0)
        return false;
    int off = y->rank - t->rank;
    for (int i = 0; i < t->rank; i++) {
        bool want = off + i == axis;
        if (want ? t->dims[i] != y->dims[axis] : !(dim_is_const(t->dims[i]) && t->dims[i]->c == 1))
            return false;
    }
    return axis >= off;
}

/* A blocked convolution's bias: a constant [1.., Cb, 1.., b] shaped like
 * y = [N, Cb, spatial..., b] on the channel blocks and lanes, its lanes
 * past the channels zero (passes/layout.c); the library reads the first
 * o, channel c at c. */
static bool blocked_bias_fits(const Type *y, const Value *b)
{
    const Type *t = &b->type;
    if (!b->def || b->def->kind != OP_CONST || t->dtype != y->dtype || t->rank > y->rank || t->rank < 2)
        return false;
    int off = y->rank - t->rank;
    for (int i = 0; i < t->rank; i++) {
        int a = off + i;
        bool want = a == 1 || a == y->rank - 1;
        if (want ? !(t->dims[i] == y->dims[a] || (dim_is_const(t->dims[i]) && dim_is_const(y->dims[a]) &&
                                                  t->dims[i]->c == y->dims[a]->c))
                 : !(dim_is_const(t->dims[i]) && t->dims[i]->c == 1))
            return false;
    }
    return off <= 1;
}

/* ---- activations, recognised by their values ---------------------------------
 *
 * An activation is a chain of elementwise ops from x (every other operand a
 * scalar constant) whose intermediate values nothing else reads. Rather
 * than match each way a framework writes GELU (erf or tanh form, 0.5 first
 * or last, pow or x*x*x), the chain is evaluated in double at sample points
 * and compared with each activation the library applies. */

enum { NSAMPLE = 48 };

/* One op of the chain on samples: x's values in vals[x], other operands
 * scalar constants. The maths is the interpreter's (interp_unary_f,
 * interp_binary_f); false for an op that is not unary or binary. */
static bool eval_op(const Op *op, double **vals, int nvals, double *out)
{
    double c[2] = {0, 0};
    const double *in[2] = {NULL, NULL};
    if (op->nin < 1 || op->nin > 2)
        return false;
    for (int i = 0; i < op->nin; i++) {
        int id = op->in[i]->id;
        if (id < nvals && vals[id])
            in[i] = vals[id];
        else if (!scalar(op->in[i], &c[i]))
            return false;
    }
    for (int s = 0; s < NSAMPLE; s++) {
        double a = in[0] ? in[0][s] : c[0], b = in[1] ? in[1][s] : c[1];
        if (op->nin == 1 ? !interp_unary_f(op->kind, a, &out[s]) : !interp_binary_f(op->kind, a, b, &out[s]))
            return false;
    }
    return true;
}

static double post_value(DiscPost p, double x)
{
    switch (p) {
    case DISC_POST_RELU: return x > 0 ? x : 0;
    case DISC_POST_GELU_ERF: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    case DISC_POST_GELU_TANH: return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case DISC_POST_TANH: return tanh(x);
    case DISC_POST_SIGMOID: return 1 / (1 + exp(-x));
    case DISC_POST_RELU6: return x > 0 ? (x < 6 ? x : 6) : 0;
    case DISC_POST_HARDSWISH: return x * (x + 3 > 0 ? (x + 3 < 6 ? x + 3 : 6) : 0) / 6;
    case DISC_POST_SWISH: return x / (1 + exp(-x));
    default: return x;
    }
}

/* The activation the longest chain of epilogue ops from x computes: its
 * ops in fz->ops and its result, or NULL. */
static Value *activation(Host *h, const Group *grp, int first, const int *nuse, Value *x, unsigned no_posts,
                         Fused *fz)
{
    Graph *g = h->cg->g;
    int nv = g->nvalues + 1;
    double **vals = calloc((size_t)nv, sizeof *vals);
    double *store = calloc((size_t)(grp->nops + 1) * NSAMPLE, sizeof *store);
    Op *chain[16];
    int n = 0;
    Value *result = NULL;
    if (!vals || !store) {
        graph_oom(g);
        goto done;
    }
    vals[x->id] = store;
    for (int s = 0; s < NSAMPLE; s++) /* -6 .. 6, and the ends of the range */
        store[s] = s == 0 ? -30 : s == NSAMPLE - 1 ? 30 : -6 + 12.0 * (s - 1) / (NSAMPLE - 3);
    /* the ops after x that read only x's chain and constants */
    for (int i = first; i < grp->nops && n < 16; i++) {
        Op *op = grp->ops[i];
        bool reads = false;
        for (int j = 0; j < op->nin; j++)
            reads |= op->in[j]->id < nv && vals[op->in[j]->id];
        if (!reads || op->nout != 1 || !type_eq(&op->out[0]->type, &x->type) ||
            !eval_op(op, vals, nv, store + (size_t)(n + 1) * NSAMPLE))
            continue;
        vals[op->out[0]->id] = store + (size_t)(n + 1) * NSAMPLE;
        chain[n++] = op;
    }
    /* the longest prefix whose intermediate values only the chain reads and
     * whose result is an activation */
    for (int end = n - 1; end >= 0 && !result; end--) {
        bool closed = true;
        for (int i = -1; i < end && closed; i++) {
            const Value *v = i < 0 ? x : chain[i]->out[0];
            int uses = 0;
            for (int j = 0; j <= end; j++)
                for (int q = 0; q < chain[j]->nin; q++)
                    uses += chain[j]->in[q] == v;
            closed = uses == nuse[v->id];
        }
        const double *f = vals[chain[end]->out[0]->id];
        /* the chain's constants are of x's dtype: an f16 or bf16 chain
         * matches to a few units of its precision (the library's
         * activation, computed in f32, is as close to the exact one) */
        DType dt = x->type.dtype;
        double rel = dt == DT_F16 ? 2e-3 : dt == DT_BF16 ? 1.6e-2 : 1e-5;
        for (DiscPost p = DISC_POST_RELU; closed && p < DISC_POST_COUNT && !result; p++) {
            if (no_posts & 1u << p)
                continue;
            bool same = true;
            for (int s = 0; s < NSAMPLE && same; s++) {
                double want = post_value(p, store[s]);
                same = fabs(f[s] - want) <= 1e-6 + rel * fabs(want);
            }
            if (same) {
                fz->post = p;
                for (int i = 0; i <= end; i++)
                    fz->ops[fz->nops++] = chain[i];
                result = chain[end]->out[0];
            }
        }
    }
done:
    free(vals);
    free(store);
    return result;
}

/* Whether v is computed by the epilogue (so not there when the call runs). */
static bool in_epilogue(const Group *grp, int first, const Value *v)
{
    for (int i = first; i < grp->nops; i++)
        for (int j = 0; j < grp->ops[i]->nout; j++)
            if (grp->ops[i]->out[j] == v)
                return true;
    return false;
}

/* Whether conv op leaves its residual to the loop kernel after the call
 * (CgTarget.conv_res_wide): a 1 x 1 window, kernels for AVX-512 (32
 * vector registers), at least conv_res_wide output channels. */
static bool res_alone(const Cg *cg, const Op *op)
{
    const Type *w = &op->in[1]->type;
    int wide = cg->target->conv_res_wide;
    if (op->kind != OP_CONV || !wide || !cg->cpu || cg->cpu->nvregs < 32 || !dim_is_const(w->dims[0]) ||
        w->dims[0]->c < wide)
        return false;
    for (int i = 2; i < w->rank; i++)
        if (!dim_is(w->dims[i], 1))
            return false;
    return true;
}

/* The chain bias? activation? residual? after op's result, each step read
 * by nothing else. */
static void match_chain(Host *h, const Group *grp, int first, Op *op, const LibCall *c, Fused *fz)
{
    int *nuse = use_counts(h);
    Value *x = op->out[0];
    memset(fz, 0, sizeof *fz);
    fz->result = x;
    DType dt = x->type.dtype;
    if (!nuse || op->kind == OP_POOL || c->nguards || !(dt == DT_F32 || (h->cg->target->dev_memory && dt == op->in[0]->type.dtype)))
        return;
    Chan ch = op->kind == OP_DOT ? (Chan){0} : chan(op, op->in[0]->type.rank);
    int axis = op->kind == OP_DOT ? x->type.rank - 1 : ch.yc;
    if (op->kind == OP_DOT && c->f[DISC_MM_N] != x->type.dims[axis])
        return; /* the columns span several axes */
    Op *s = sole(grp, first, nuse, x, OP_ADD);
    Value *b = s ? other(s, x) : NULL;
    /* a reshape of a bias is the same memory (a channels-last
     * convolution's [C, 1, 1] bias as [1, 1, C], passes/layout.c) */
    Op *via = b && b->def && b->def->kind == OP_RESHAPE && nuse[b->id] == 1 && in_epilogue(grp, first, b) ? b->def
                                                                                                          : NULL;
    Value *bb = via ? via->in[0] : b;
    if (b && b != x && !in_epilogue(grp, first, bb) &&
        (ch.block ? !via && blocked_bias_fits(&x->type, b)
                  : bias_fits(&x->type, b, axis) && type_numel(&h->cg->g->dims, &bb->type) == x->type.dims[axis])) {
        fz->bias = bb;
        if (via)
            fz->ops[fz->nops++] = via;
        fz->ops[fz->nops++] = s;
        x = s->out[0];
    }
    const CgTarget *t = h->cg->target;
    unsigned no_posts = t->lib_no_posts | (op->kind == OP_CONV ? t->conv_no_posts : 0);
    Value *act = activation(h, grp, first, nuse, x, no_posts, fz);
    if (act)
        x = act;
    if (!(h->cg->target->lib_res_alone && fz->post != DISC_POST_NONE) && !res_alone(h->cg, op) &&
        (s = sole(grp, first, nuse, x, OP_ADD))) {
        Value *r = other(s, x);
        if (r != x && type_eq(&r->type, &x->type) && !in_epilogue(grp, first, r)) {
            fz->residual = r;
            fz->ops[fz->nops++] = s;
            x = s->out[0];
            Fused after = {0};
            if (op->kind == OP_CONV && (act = activation(h, grp, first, nuse, x, no_posts, &after))) {
                fz->post_res = after.post;
                for (int i = 0; i < after.nops; i++)
                    fz->ops[fz->nops++] = after.ops[i];
                x = act;
            }
        }
    }
    fz->result = x;
}

/* Where disc_rt_dev_matmul made the product without the bias and the
 * activation it was handed (cuBLASLt had no algorithm, cuBLAS made it:
 * status 1), those as a kernel in place over the call's result: the
 * chain's ops up to the residual, which the call added itself. */
static bool emit_unfused(Host *h, const Group *grp, Op *root, const Fused *fz)
{
    Cg *cg = h->cg;
    int n = fz->nops - (fz->residual ? 1 : 0);
    if (n <= 0)
        return true;
    Op *ops[80];
    int nc = 0; /* first the group's constants the chain reads (a literal where scalar; else a buffer of its own) */
    for (int i = 0; i < grp->nops && nc < 40; i++)
        if (grp->ops[i]->kind == OP_CONST)
            for (int j = 0; j < n; j++)
                for (int q = 0; q < fz->ops[j]->nin; q++)
                    if (fz->ops[j]->in[q] == grp->ops[i]->out[0] && (nc == 0 || ops[nc - 1] != grp->ops[i]))
                        ops[nc++] = grp->ops[i];
    memcpy(ops + nc, fz->ops, sizeof(Op *) * (size_t)n);
    n += nc;
    Value *ins[grp->nins + 1], *out = ops[n - 1]->out[0];
    int ni = 0;
    for (int i = 0; i < grp->nins; i++) { /* those the ops read: the call had each on the device */
        bool read = false;
        for (int j = 0; j < n; j++)
            for (int q = 0; q < ops[j]->nin; q++)
                read |= ops[j]->in[q] == grp->ins[i];
        if (read)
            ins[ni++] = grp->ins[i];
    }
    ins[ni++] = root->out[0];
    int over[1] = {ni - 1};
    Value *outs[1] = {out};
    Group g = *grp;
    g.kind = FUSE_LOOP;
    g.ops = ops;
    g.nops = n;
    g.ins = ins;
    g.nins = ni;
    g.outs = outs;
    g.nouts = 1;
    g.root = ops[n - 1];
    g.over = over;
    g.placed = true;
    LLVMValueRef buf = h->dbuf[root->out[0]->id], keep = h->dbuf[out->id];
    LLVMBasicBlockRef run = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "unfused");
    LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "fused");
    LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntEQ, h->dev_rc, cg_i32(cg, 1), ""), run, join);
    h->dev_rc = NULL;
    LLVMPositionBuilderAtEnd(B, run);
    DimMap mark;
    cg_dim_mark(cg, &mark);
    h->dbuf[out->id] = buf;
    LLVMValueRef before[ni]; /* what the branch uploads is not there after it */
    for (int i = 0; i < ni; i++)
        before[i] = h->dbuf[ins[i]->id];
    int launches = cg->nlaunch; /* not a launch of every run: not counted as one */
    bool ok = host_emit_kernel_group(h, &g);
    cg->nlaunch = launches;
    for (int i = 0; i < ni; i++)
        h->dbuf[ins[i]->id] = before[i];
    h->dbuf[out->id] = keep;
    LLVMBuildBr(B, join);
    LLVMPositionBuilderAtEnd(B, join);
    cg_dim_back(cg, &mark);
    dimmap_free(&mark);
    return ok;
}

bool host_emit_library_group(Host *h, const Group *grp)
{
    Cg *cg = h->cg;
    Op *root = grp->root;
    int first = 0;
    while (first < grp->nops && grp->ops[first] != root)
        first++;
    first++;
    LibCall c;
    Fused fz = {.result = root->out[0]}; /* nothing fused unless the library takes it */
    bool dev = cg->target->dev_memory;
    bool takes = lib_call(&cg->g->dims, root, &c, dev);
    bool blas = cg->target->dev_matmul && root->kind == OP_DOT && dev_fits(&c);
    bool dnn = cg->target->dev_conv && (dev_conv_fits(root, &c) || dev_pool_fits(root, &c));
    if (dev && !(takes && (blas || dnn)))
        return host_emit_kernel_group(h, grp); /* the target's own kernel (cuda.c's GEMM and conv templates) */
    if (takes)
        match_chain(h, grp, first, root, &c, &fz);
    bool is_out = false;
    for (int i = 0; i < grp->nouts; i++)
        is_out |= grp->outs[i] == fz.result;
    h->dev_rc = NULL;
    bool ok = !takes ? host_emit_host_op(h, root) : emit_library(h, root, &c, fz.nops ? &fz : NULL, is_out);
    if (!ok || (h->dev_rc && !emit_unfused(h, grp, root, &fz)))
        return false;
    /* the rest of the epilogue: a loop kernel reading the chain's result */
    Op *ops[grp->nops + 1];
    int n = 0;
    for (int i = first; i < grp->nops; i++) {
        bool fused = false;
        for (int k = 0; k < fz.nops; k++)
            fused |= grp->ops[i] == fz.ops[k];
        if (!fused)
            ops[n++] = grp->ops[i];
    }
    if (n == 0)
        return true;
    Group epi = *grp;
    epi.kind = FUSE_LOOP;
    epi.ops = ops;
    epi.nops = n;
    Value *ins[grp->nins + 1];
    int ni = 0;
    for (int i = 0; i < grp->nins; i++)
        ins[ni++] = grp->ins[i];
    ins[ni++] = fz.result;
    epi.ins = ins;
    epi.nins = ni;
    epi.root = ops[n - 1];
    Value *outs[grp->nouts + 1];
    int over[grp->nouts + 1], no = 0, nover = 0;
    const MemPlan *mp = cg->mp;
    for (int i = 0; i < grp->nouts; i++)
        if (grp->outs[i] != root->out[0] && grp->outs[i] != fz.result) {
            /* the plan put it over the call's result, which fz.result's
             * buffer is (emit_call), unless that is an output itself */
            int s = mp ? mp->slot_of[grp->outs[i]->id] : -1;
            over[no] = s >= 0 && s == mp->slot_of[root->out[0]->id] && fz.result->type.dtype == grp->outs[i]->type.dtype
                           ? ni - 1 : -1;
            nover += over[no] >= 0;
            outs[no++] = grp->outs[i];
        }
    epi.outs = outs;
    epi.nouts = no;
    epi.over = nover ? over : NULL;
    return no == 0 || host_emit_kernel_group(h, &epi);
}
