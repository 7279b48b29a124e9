/*
 * lower_rnn.c — ONNX RNN, GRU and LSTM, lowered to one core `loop` per
 * direction.
 *
 * Outside the loop, the input projection of every time step is one
 * batched matmul, X[S*B, I] . W^T -> [S, B, gates*H], with the biases that
 * do not depend on the state added to it. The loop runs over the S steps;
 * its body takes step t's slice of that projection (a gather), adds the
 * recurrent matmul h . R^T, and does the cell's elementwise work (clip,
 * activations, gates, peepholes), which fuses into one kernel. The body's
 * outputs are the new state (carried) and the step's output (stacked into
 * Y). The weights, the projection, the peepholes and the sequence lengths
 * enter the body as constants or captured operands.
 *
 * Reverse runs take step t = S - 1 - i at iteration i and reverse the
 * stacked outputs. With sequence_lens, a batch entry whose length is at
 * most t keeps its state and outputs zeros at that step: forward runs
 * freeze after the last valid step, reverse runs start at it, as ONNX
 * Runtime does.
 *
 * Gate order (ONNX): LSTM i, o, f, c; GRU z, r, h; RNN one gate.
 */
#include "frontends/onnx/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum { KIND_RNN, KIND_GRU, KIND_LSTM };

#define CX (&im->g->dims)

/* ---- activations ---------------------------------------------------------- */

typedef struct Act {
    const char *name;
    bool alpha, beta;    /* whether it takes them */
    double da, db;       /* defaults */
} Act;

static const Act acts[] = {
    {"Relu", false, false, 0, 0},          {"Tanh", false, false, 0, 0},
    {"Sigmoid", false, false, 0, 0},       {"Affine", true, true, 1.0, 0.0},
    {"LeakyRelu", true, false, 0.01, 0},   {"ThresholdedRelu", true, false, 1.0, 0},
    {"ScaledTanh", true, true, 1.0, 1.0},  {"HardSigmoid", true, true, 0.2, 0.5},
    {"Elu", true, false, 1.0, 0},          {"Softsign", false, false, 0, 0},
    {"Softplus", false, false, 0, 0},
};

/* One activation with its parameters. */
typedef struct Fn {
    const Act *a;
    double alpha, beta;
} Fn;

static Value *apply(Imp *im, const Fn *f, Value *x)
{
    if (!x)
        return NULL;
    DType dt = vdt(x);
    const char *n = f->a->name;
    Value *zero = imp_scalar(im, dt, 0), *one = imp_scalar(im, dt, 1);
    if (!strcmp(n, "Relu"))
        return imp_bin(im, OP_MAX, x, zero);
    if (!strcmp(n, "Tanh"))
        return imp_un(im, OP_TANH, x);
    if (!strcmp(n, "Sigmoid"))
        return imp_un(im, OP_SIGMOID, x);
    if (!strcmp(n, "Affine"))
        return imp_binc(im, OP_ADD, imp_binc(im, OP_MUL, x, f->alpha), f->beta);
    if (!strcmp(n, "LeakyRelu"))
        return imp_sel(im, imp_cmp(im, "lt", x, zero), imp_binc(im, OP_MUL, x, f->alpha), x);
    if (!strcmp(n, "ThresholdedRelu"))
        return imp_sel(im, imp_cmp(im, "gt", x, imp_scalar(im, dt, f->alpha)), x, zero);
    if (!strcmp(n, "ScaledTanh"))
        return imp_binc(im, OP_MUL, imp_un(im, OP_TANH, imp_binc(im, OP_MUL, x, f->beta)), f->alpha);
    if (!strcmp(n, "HardSigmoid"))
        return imp_bin(im, OP_MAX, zero,
                       imp_bin(im, OP_MIN, one, imp_binc(im, OP_ADD, imp_binc(im, OP_MUL, x, f->alpha), f->beta)));
    if (!strcmp(n, "Elu"))
        return imp_sel(im, imp_cmp(im, "lt", x, zero),
                       imp_binc(im, OP_MUL, imp_binc(im, OP_SUB, imp_un(im, OP_EXP, x), 1), f->alpha), x);
    if (!strcmp(n, "Softsign"))
        return imp_bin(im, OP_DIV, x, imp_binc(im, OP_ADD, imp_un(im, OP_ABS, x), 1));
    /* Softplus */
    return imp_un(im, OP_LOG, imp_binc(im, OP_ADD, imp_un(im, OP_EXP, x), 1));
}

/* The activations of every direction (nd * per entries) from the
 * attributes, or the defaults. */
static bool read_acts(Imp *im, int kind, int nd, Fn *fns)
{
    static const char *defaults[3][3] = {{"Tanh"}, {"Sigmoid", "Tanh"}, {"Sigmoid", "Tanh", "Tanh"}};
    int per = kind + 1;
    const OAttr *a = attr_find(im, "activations");
    double *alpha, *beta;
    int na, nb;
    if (!attr_floats(im, "activation_alpha", &alpha, &na) || !attr_floats(im, "activation_beta", &beta, &nb))
        return false;
    int n = a ? (int)a->n_strings : 0;
    if (a && n != per && n != per * nd)
        return imp_err(im, "activations has %d entries, expected %d per direction", n, per);
    int ia = 0, ib = 0;
    for (int i = 0; i < per * nd; i++) {
        char name[64];
        if (a) {
            const ProtobufCBinaryData *s = &a->strings[n == per ? i % per : i];
            snprintf(name, sizeof name, "%.*s", (int)(s->len < 63 ? s->len : 63), (const char *)s->data);
        } else {
            snprintf(name, sizeof name, "%s", defaults[kind][i % per]);
        }
        const Act *f = NULL;
        for (size_t k = 0; k < sizeof acts / sizeof acts[0]; k++)
            if (!strcasecmp(acts[k].name, name))
                f = &acts[k];
        if (!f)
            return imp_errk(im, DIAG_UNSUPPORTED, "activation '%s' is not supported", name);
        fns[i].a = f;
        fns[i].alpha = f->da;
        fns[i].beta = f->db;
        if (f->alpha && ia < na)
            fns[i].alpha = alpha[ia++];
        if (f->beta && ib < nb)
            fns[i].beta = beta[ib++];
    }
    return true;
}

/* ---- helpers ---------------------------------------------------------------- */

/* x[d] of a [D, ...] tensor, as a tensor of rank - 1; axis is where D is. */
static Value *pick(Imp *im, Value *x, int axis, int d)
{
    if (!x)
        return NULL;
    Value *s = imp_slice1(im, x, axis, dim_const(CX, d), dim_const(CX, d + 1), 1);
    Dim *dims[MAX_RANK];
    for (int i = 0, k = 0; i < vrank(x); i++)
        if (i != axis)
            dims[k++] = vdims(x)[i];
    return imp_reshape(im, s, dims, vrank(x) - 1);
}

/* Columns [k*h, (k+1)*h) of the last axis. */
static Value *part(Imp *im, Value *x, Dim *h, int k)
{
    return x ? imp_slice1(im, x, vrank(x) - 1, dim_mulc(CX, h, k), dim_mulc(CX, h, k + 1), 1) : NULL;
}

/* a . b^T over the last axis of each ([M, K] x [N, K] -> [M, N]). */
static Value *dot_t(Imp *im, Value *a, Value *b)
{
    return a && b ? build_dot(im->g, a, b, NULL, NULL, 0, (int64_t[]){1}, (int64_t[]){1}, 1) : NULL;
}

static Value *clip(Imp *im, Value *x, double c, bool on)
{
    if (!on || !x)
        return x;
    return imp_bin(im, OP_MIN, imp_bin(im, OP_MAX, x, imp_scalar(im, vdt(x), -c)), imp_scalar(im, vdt(x), c));
}

static Value *zeros(Imp *im, DType dt, Dim *const *dims, int rank)
{
    return imp_broadcast_to(im, imp_scalar(im, dt, 0), dims, rank);
}

/* ---- one direction -------------------------------------------------------- */

typedef struct Cell {
    int kind;
    bool reverse;
    Fn *f;              /* this direction's activations */
    double clip;
    bool has_clip, input_forget, lbr;
    Value *xw;          /* [S, B, G*H]: the input projection and hoisted biases */
    Value *r;           /* [G*H, H] */
    Value *rbh;         /* GRU with linear_before_reset: Rb of the h gate, [H] */
    Value *p;           /* LSTM peepholes [3H] or NULL */
    Value *lens;        /* i64[B] or NULL */
    Value *slen;        /* i64[]: S */
    Value *h0, *c0;     /* [B, H] */
} Cell;

/* The body: (i, cond, h[, c], captures) -> (cond, h'[, c'], y). */
static bool cell_body(Imp *im, Imp *sub, const Cell *c)
{
    Type ti = type_make(&im->g->arena, DT_I64, 0, NULL), tc = type_make(&im->g->arena, DT_BOOL, 0, NULL);
    Value *i = imp_sub_input(sub, &ti, NULL, NULL), *cond = imp_sub_input(sub, &tc, NULL, NULL);
    Value *h = imp_sub_input(sub, &c->h0->type, NULL, NULL);
    Value *cs = c->kind == KIND_LSTM ? imp_sub_input(sub, &c->c0->type, NULL, NULL) : NULL;
    if (!i || !cond || !h || (c->kind == KIND_LSTM && !cs))
        return false;
    Imp *s = sub; /* ops below are built in the body */
    DType dt = vdt(h);
    Dim *H = vdims(h)[1];
    Value *t = i;
    if (c->reverse)
        t = imp_bin(s, OP_SUB, imp_binc(s, OP_SUB, imp_sub_capture(s, c->slen), 1), i);
    AttrList l = {0};
    attrs_add_int(s->g, &l, "axis", 0);
    Value *xw = imp_sub_capture(s, c->xw), *r = imp_sub_capture(s, c->r);
    Op *g = xw && t ? build_op(s->g, OP_GATHER, (Value *[]){xw, t}, 2, l.v, l.n) : NULL;
    Value *xt = g ? g->out[0] : NULL; /* [B, G*H] */
    Value *hn = NULL, *cn = NULL;
    const Fn *f = c->f;
    if (c->kind == KIND_RNN) {
        hn = apply(s, &f[0], clip(s, imp_bin(s, OP_ADD, xt, dot_t(s, h, r)), c->clip, c->has_clip));
    } else if (c->kind == KIND_GRU) {
        Value *rz = imp_slice1(s, r, 0, dim_const(&s->g->dims, 0), dim_mulc(&s->g->dims, H, 2), 1);
        Value *rh = imp_slice1(s, r, 0, dim_mulc(&s->g->dims, H, 2), dim_mulc(&s->g->dims, H, 3), 1);
        Value *hzr = dot_t(s, h, rz);
        Value *z = apply(s, &f[0], clip(s, imp_bin(s, OP_ADD, part(s, xt, H, 0), part(s, hzr, H, 0)), c->clip,
                                       c->has_clip));
        Value *rg = apply(s, &f[0], clip(s, imp_bin(s, OP_ADD, part(s, xt, H, 1), part(s, hzr, H, 1)), c->clip,
                                        c->has_clip));
        Value *pre;
        if (c->lbr)
            pre = imp_bin(s, OP_ADD, part(s, xt, H, 2),
                          imp_bin(s, OP_MUL, rg, imp_bin(s, OP_ADD, dot_t(s, h, rh), imp_sub_capture(s, c->rbh))));
        else
            pre = imp_bin(s, OP_ADD, part(s, xt, H, 2), dot_t(s, imp_bin(s, OP_MUL, rg, h), rh));
        Value *hh = apply(s, &f[1], clip(s, pre, c->clip, c->has_clip));
        /* (1 - z) * hh + z * h = hh + z * (h - hh) */
        hn = imp_bin(s, OP_ADD, hh, imp_bin(s, OP_MUL, z, imp_bin(s, OP_SUB, h, hh)));
    } else {
        Value *gt = imp_bin(s, OP_ADD, xt, dot_t(s, h, r));
        Value *pi = NULL, *po = NULL, *pf = NULL;
        if (c->p) {
            Value *p = imp_sub_capture(s, c->p);
            pi = part(s, p, H, 0), po = part(s, p, H, 1), pf = part(s, p, H, 2);
        }
        Value *ig = part(s, gt, H, 0), *og = part(s, gt, H, 1), *fg = part(s, gt, H, 2), *cg = part(s, gt, H, 3);
        if (c->p) {
            ig = imp_bin(s, OP_ADD, ig, imp_bin(s, OP_MUL, pi, cs));
            fg = imp_bin(s, OP_ADD, fg, imp_bin(s, OP_MUL, pf, cs));
        }
        Value *it = apply(s, &f[0], clip(s, ig, c->clip, c->has_clip));
        Value *ft = c->input_forget ? imp_bin(s, OP_SUB, imp_scalar(s, dt, 1), it)
                                    : apply(s, &f[0], clip(s, fg, c->clip, c->has_clip));
        Value *ct = apply(s, &f[1], clip(s, cg, c->clip, c->has_clip));
        cn = imp_bin(s, OP_ADD, imp_bin(s, OP_MUL, ft, cs), imp_bin(s, OP_MUL, it, ct));
        if (c->p)
            og = imp_bin(s, OP_ADD, og, imp_bin(s, OP_MUL, po, cn));
        Value *ot = apply(s, &f[0], clip(s, og, c->clip, c->has_clip));
        hn = imp_bin(s, OP_MUL, ot, apply(s, &f[2], cn));
    }
    Value *y = hn;
    if (c->lens && hn) { /* steps past a sequence's end keep the state and give zeros */
        Value *m = imp_cmp(s, "lt", t, imp_sub_capture(s, c->lens));
        m = imp_reshape(s, m, (Dim *[]){vdims(h)[0], dim_const(&s->g->dims, 1)}, 2);
        y = imp_sel(s, m, hn, zeros(s, dt, vdims(h), 2));
        hn = imp_sel(s, m, hn, h);
        if (cn)
            cn = imp_sel(s, m, cn, cs);
    }
    if (!y || !hn || (c->kind == KIND_LSTM && !cn))
        return im->d->set ? false : imp_fail(s);
    bool ok = graph_add_output(s->g, cond) && graph_add_output(s->g, hn) &&
              (!cn || graph_add_output(s->g, cn)) && graph_add_output(s->g, y);
    return ok || imp_oom(s);
}

/* Runs one direction: results h_T, c_T (LSTM) and Y [S, B, H]. */
static bool direction(Imp *im, const Cell *c, Value **hT, Value **cT, Value **y)
{
    Imp sub;
    if (!imp_sub_begin(im, &sub, c->reverse ? "reverse cell" : "cell"))
        return false;
    if (!cell_body(im, &sub, c)) {
        imp_sub_end(&sub, false);
        free(sub.caps);
        free(sub.capin);
        return false;
    }
    Graph *body = imp_sub_end(&sub, true);
    int nc = c->kind == KIND_LSTM ? 2 : 1, n = 2 + nc + sub.ncaps;
    Value **ops = calloc((size_t)n, sizeof *ops);
    if (!ops) {
        graph_free(body);
        free(sub.caps);
        free(sub.capin);
        return imp_oom(im);
    }
    ops[0] = c->slen;
    ops[1] = imp_scalar(im, DT_BOOL, 1);
    ops[2] = c->h0;
    if (nc == 2)
        ops[3] = c->c0;
    if (sub.ncaps)
        memcpy(ops + 2 + nc, sub.caps, (size_t)sub.ncaps * sizeof *ops);
    free(sub.caps);
    free(sub.capin);
    AttrList l = {0};
    attrs_add_int(im->g, &l, "ncarried", nc);
    Op *op = ops[1] ? build_region_op(im->g, OP_LOOP, ops, n, l.v, l.n, &body, 1) : NULL;
    free(ops);
    if (!op)
        return imp_fail(im);
    *hT = op->out[0];
    *cT = nc == 2 ? op->out[1] : NULL;
    *y = op->out[nc];
    if (c->reverse) {
        AttrList r = {0};
        attrs_add_ints(im->g, &r, "axes", (int64_t[]){0}, 1);
        Op *rev = build_op(im->g, OP_REVERSE, y, 1, r.v, r.n);
        if (!rev)
            return imp_fail(im);
        *y = rev->out[0];
    }
    return true;
}

/* ---- the node --------------------------------------------------------------- */

static Value *cat(Imp *im, Value **v, int n, int axis)
{
    for (int i = 0; i < n; i++)
        if (!v[i])
            return NULL;
    return n == 1 ? v[0] : build_concat(im->g, v, n, axis);
}

bool onnx_lower_rnn(Imp *im)
{
    int kind = im->arg, ng = kind == KIND_LSTM ? 4 : kind == KIND_GRU ? 3 : 1;
    const char *dir;
    int64_t hidden, layout, input_forget = 0, lbr = 0;
    double clipv;
    if (!attr_str(im, "direction", "forward", &dir) || !attr_int(im, "hidden_size", -1, &hidden) ||
        !attr_int(im, "layout", 0, &layout) || !attr_float(im, "clip", NAN, &clipv) ||
        (kind == KIND_LSTM && !attr_int(im, "input_forget", 0, &input_forget)) ||
        (kind == KIND_GRU && !attr_int(im, "linear_before_reset", 0, &lbr)))
        return false;
    int nd;
    if (!strcmp(dir, "forward") || !strcmp(dir, "reverse"))
        nd = 1;
    else if (!strcmp(dir, "bidirectional"))
        nd = 2;
    else
        return imp_err(im, "direction '%s' is not forward, reverse or bidirectional", dir);
    if (layout != 0 && layout != 1)
        return imp_err(im, "layout %lld is not 0 or 1", (long long)layout);
    Value *x = imp_need(im, 0), *w = imp_need(im, 1), *r = imp_need(im, 2);
    if (!x || !w || !r)
        return false;
    Value *b = IN(3), *lens = IN(4), *h0 = IN(5), *c0 = kind == KIND_LSTM ? IN(6) : NULL;
    Value *p = kind == KIND_LSTM ? IN(7) : NULL;
    DType dt = vdt(x);
    if (!dtype_is_float(dt))
        return imp_err(im, "X must be a float tensor, not %s", dtype_name(dt));
    if (vrank(x) != 3 || vrank(w) != 3 || vrank(r) != 3)
        return imp_err(im, "X, W and R must have rank 3");
    if (layout)
        x = imp_transpose(im, x, (int64_t[]){1, 0, 2});
    if (!x)
        return imp_fail(im);
    Dim *S = vdims(x)[0], *B = vdims(x)[1], *I = vdims(x)[2], *H = vdims(r)[2];
    if (hidden >= 0 && dim_is_const(H) && H->c != hidden)
        return imp_err(im, "hidden_size is %lld, but R gives %lld", (long long)hidden, (long long)H->c);
    Dim *GH = dim_mulc(CX, H, ng);
    Dim *want_w[3] = {dim_const(CX, nd), GH, I}, *want_r[3] = {dim_const(CX, nd), GH, H};
    for (int k = 0; k < 3; k++)
        if ((dim_is_const(vdims(w)[k]) && dim_is_const(want_w[k]) && vdims(w)[k]->c != want_w[k]->c) ||
            (dim_is_const(vdims(r)[k]) && dim_is_const(want_r[k]) && vdims(r)[k]->c != want_r[k]->c))
            return imp_err(im, "W must be [%d, %d*H, input_size] and R [%d, %d*H, H]", nd, ng, nd, ng);
    if ((b && vrank(b) != 2) || (h0 && vrank(h0) != 3) || (c0 && vrank(c0) != 3) || (p && vrank(p) != 2) ||
        (lens && vrank(lens) != 1))
        return imp_err(im, "B, initial_h, initial_c, P must have rank 2, 3, 3, 2 and sequence_lens rank 1");
    Fn fns[6];
    if (!read_acts(im, kind, nd, fns))
        return false;
    Value *xf = imp_reshape(im, x, (Dim *[]){dim_mul(CX, S, B), I}, 2);
    Value *slen = build_dim(im->g, x, 0);
    /* sequence_lens and the initial states have X's batch: reshapes the
     * shape program checks on entry */
    Value *lens64 = lens ? imp_reshape(im, imp_cvt(im, lens, DT_I64), &B, 1) : NULL;
    if (!xf || !slen || (lens && !lens64))
        return imp_fail(im);
    Value *ys[2] = {0}, *hs[2] = {0}, *cs[2] = {0};
    for (int d = 0; d < nd; d++) {
        Cell c = {.kind = kind, .reverse = nd == 2 ? d == 1 : !strcmp(dir, "reverse"), .f = fns + d * (kind + 1),
                  .clip = clipv, .has_clip = !isnan(clipv), .input_forget = input_forget != 0, .lbr = lbr != 0,
                  .lens = lens64, .slen = slen};
        Value *wd = pick(im, w, 0, d);
        c.r = pick(im, r, 0, d);
        Value *xw = dot_t(im, xf, wd); /* [S*B, G*H] */
        if (b) {
            Value *bd = pick(im, b, 0, d);
            Value *wb = imp_slice1(im, bd, 0, dim_const(CX, 0), GH, 1);
            Value *rb = imp_slice1(im, bd, 0, GH, dim_mulc(CX, GH, 2), 1);
            if (kind == KIND_GRU && c.lbr) { /* Rb of the h gate stays in the cell */
                Value *rzr = part(im, rb, dim_mulc(CX, H, 2), 0);
                c.rbh = part(im, rb, H, 2);
                rb = cat(im, (Value *[]){rzr, zeros(im, dt, &H, 1)}, 2, 0);
                if (!c.rbh)
                    return imp_fail(im);
            }
            xw = imp_bin(im, OP_ADD, xw, imp_bin(im, OP_ADD, wb, rb));
        } else if (kind == KIND_GRU && c.lbr) {
            c.rbh = zeros(im, dt, &H, 1);
        }
        c.xw = imp_reshape(im, xw, (Dim *[]){S, B, GH}, 3);
        c.h0 = h0 ? imp_reshape(im, pick(im, h0, layout ? 1 : 0, d), (Dim *[]){B, H}, 2)
                  : zeros(im, dt, (Dim *[]){B, H}, 2);
        if (kind == KIND_LSTM)
            c.c0 = c0 ? imp_reshape(im, pick(im, c0, layout ? 1 : 0, d), (Dim *[]){B, H}, 2)
                      : zeros(im, dt, (Dim *[]){B, H}, 2);
        c.p = p ? pick(im, p, 0, d) : NULL;
        if (!c.xw || !c.r || !c.h0 || (kind == KIND_LSTM && !c.c0) || (p && !c.p))
            return im->d->set ? false : imp_fail(im);
        if (vdt(c.h0) != dt || (c.c0 && vdt(c.c0) != dt))
            return imp_err(im, "initial states must have X's dtype %s", dtype_name(dt));
        if (!direction(im, &c, &hs[d], &cs[d], &ys[d]))
            return false;
        ys[d] = imp_reshape(im, ys[d], (Dim *[]){S, dim_const(CX, 1), B, H}, 4);
        hs[d] = imp_reshape(im, hs[d], (Dim *[]){dim_const(CX, 1), B, H}, 3);
        if (cs[d])
            cs[d] = imp_reshape(im, cs[d], (Dim *[]){dim_const(CX, 1), B, H}, 3);
    }
    Value *y = cat(im, ys, nd, 1), *yh = cat(im, hs, nd, 0), *yc = kind == KIND_LSTM ? cat(im, cs, nd, 0) : NULL;
    if (layout) {
        y = y ? imp_transpose(im, y, (int64_t[]){2, 0, 1, 3}) : NULL;
        yh = yh ? imp_transpose(im, yh, (int64_t[]){1, 0, 2}) : NULL;
        yc = yc ? imp_transpose(im, yc, (int64_t[]){1, 0, 2}) : NULL;
    }
    if (!y || !yh || (kind == KIND_LSTM && !yc))
        return im->d->set ? false : imp_fail(im);
    im->out[0] = y;
    if (im->nout > 1)
        im->out[1] = yh;
    if (im->nout > 2 && kind == KIND_LSTM)
        im->out[2] = yc;
    return true;
}
