/*
 * lower_reduce.c — reductions and what is built from them: Reduce*,
 * ArgMax/ArgMin, Softmax/LogSoftmax, Hardmax, the normalizations (layer,
 * batch, instance, group, Lp, mean-variance), CumSum, TopK, and the
 * losses (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss).
 *
 * Opset matters here: Reduce* take `axes` as an attribute before opset 18
 * (ReduceSum: before 13) and as a constant input after; Softmax before 13
 * normalizes over the flattened dims from `axis` on (default 1), after 13
 * over the one axis (default -1).
 */
#include "frontends/onnx/internal.h"

#include <string.h>

/* The axes of a Reduce* node: all dims if none are given, unless
 * noop_with_empty_axes (then *n = 0 and the op is the identity). Axes
 * computed at run time leave *dyn set (and *n = -2); the node becomes a
 * dyn_reduce. */
static bool reduce_axes(Imp *im, Value *x, int64_t **axes, int *n, Value **dyn)
{
    bool from_input = im->opset >= 18 || (im->opset >= 13 && !strcmp(im->node->op_type, "ReduceSum"));
    int64_t noop;
    if (!attr_int(im, "noop_with_empty_axes", 0, &noop))
        return false;
    *n = -1;
    *dyn = NULL;
    if (from_input) {
        Value *a = IN(1);
        if (a && !imp_const_ints(im, a, axes, n)) {
            if (!dtype_is_int(vdt(a)) || vrank(a) != 1 || !dim_is_const(vdims(a)[0]))
                return imp_err(im, "axes must be a 1-D integer tensor of known length");
            if (!dim_is(vdims(a)[0], 0)) {
                *dyn = imp_cvt(im, a, DT_I64);
                *n = -2;
                return *dyn != NULL || imp_fail(im);
            }
            *n = 0; /* statically empty: as if absent */
        }
    } else if (!attr_ints(im, "axes", axes, n)) {
        return false;
    }
    if (*n <= 0) {
        if (noop && from_input) {
            *n = 0;
            return true;
        }
        *axes = arena_array(&im->g->arena, (size_t)vrank(x) + 1, sizeof **axes);
        if (!*axes)
            return imp_oom(im);
        for (int i = 0; i < vrank(x); i++)
            (*axes)[i] = i;
        *n = vrank(x);
        return true;
    }
    return imp_axes(im, *axes, *n, vrank(x));
}

/* x -> reduce(kind, pre(x)), for Reduce* and its variants. */
static bool reduce_with(Imp *im, const char *kind, OpKind pre, OpKind post)
{
    Value *x = imp_need(im, 0), *dyn;
    int64_t *axes, keep;
    int n;
    if (!x || !attr_int(im, "keepdims", 1, &keep) || !reduce_axes(im, x, &axes, &n, &dyn))
        return false;
    if (n == 0)
        return imp_done(im, x);
    if (!strcmp(kind, "mean") && !dtype_is_float(vdt(x)))
        return imp_errk(im, DIAG_UNSUPPORTED, "ReduceMean of %s is not supported", dtype_name(vdt(x)));
    Value *v = x;
    if (pre == OP_MUL)
        v = imp_bin(im, OP_MUL, x, x);
    else if (pre != OP_COUNT)
        v = imp_un(im, pre, x);
    if (dyn && v) {
        AttrList l = {0};
        attrs_add_str(im->g, &l, "kind", kind);
        attrs_add_int(im->g, &l, "keepdims", keep != 0);
        Op *op = build_op(im->g, OP_DYN_REDUCE, (Value *[]){v, dyn}, 2, l.v, l.n);
        v = op ? op->out[0] : NULL;
    } else {
        v = imp_reduce(im, v, kind, axes, n, keep != 0);
    }
    if (post != OP_COUNT)
        v = imp_un(im, post, v);
    return imp_done(im, v);
}

bool onnx_lower_reduce(Imp *im)
{
    static const char *kinds[] = {"sum", "mean", "max", "min", "prod"};
    return reduce_with(im, kinds[im->arg], OP_COUNT, OP_COUNT);
}

bool onnx_lower_reduce_l1(Imp *im) { return reduce_with(im, "sum", OP_ABS, OP_COUNT); }
bool onnx_lower_reduce_l2(Imp *im) { return reduce_with(im, "sum", OP_MUL, OP_SQRT); }
bool onnx_lower_reduce_sumsq(Imp *im) { return reduce_with(im, "sum", OP_MUL, OP_COUNT); }
bool onnx_lower_reduce_logsumexp(Imp *im) { return reduce_with(im, "sum", OP_EXP, OP_LOG); }
bool onnx_lower_reduce_logsum(Imp *im) { return reduce_with(im, "sum", OP_COUNT, OP_LOG); }

bool onnx_lower_argminmax(Imp *im)
{
    Value *x = imp_need(im, 0);
    int64_t axis, keep, last;
    if (!x || !attr_int(im, "axis", 0, &axis) || !attr_int(im, "keepdims", 1, &keep) ||
        !attr_int(im, "select_last_index", 0, &last) || !imp_axis(im, axis, vrank(x), &axis))
        return false;
    AttrList l = {0};
    attrs_add_int(im->g, &l, "axis", axis);
    attrs_add_int(im->g, &l, "keepdims", keep != 0);
    attrs_add_int(im->g, &l, "last", last != 0);
    Op *op = build_op(im->g, (OpKind)im->arg, &x, 1, l.v, l.n);
    return imp_done(im, op ? op->out[0] : NULL);
}

bool onnx_lower_softmax(Imp *im)
{
    Value *x = imp_need(im, 0);
    int64_t axis, axes[MAX_RANK];
    int n = 0;
    bool old = im->opset < 13;
    if (!x || !attr_int(im, "axis", old ? 1 : -1, &axis) || !imp_axis(im, axis, vrank(x), &axis))
        return false;
    if (old) /* softmax over the flattened dims from axis on */
        for (int i = (int)axis; i < vrank(x); i++)
            axes[n++] = i;
    else
        axes[n++] = axis;
    if (!n) /* rank 0 */
        return imp_done(im, im->arg ? imp_binc(im, OP_MUL, x, 0) : imp_binc(im, OP_ADD, imp_binc(im, OP_MUL, x, 0), 1));
    Value *m = imp_reduce(im, x, "max", axes, n, true);
    Value *d = imp_bin(im, OP_SUB, x, m);
    Value *e = imp_un(im, OP_EXP, d);
    Value *s = imp_reduce(im, e, "sum", axes, n, true);
    if (im->arg) /* LogSoftmax */
        return imp_done(im, imp_bin(im, OP_SUB, d, imp_un(im, OP_LOG, s)));
    return imp_done(im, imp_bin(im, OP_DIV, e, s));
}

/* Hardmax: 1 at the first largest element along the axis, 0 elsewhere
 * (before opset 13: over the flattened dims from axis on, default 1). */
bool onnx_lower_hardmax(Imp *im)
{
    Value *x = imp_need(im, 0);
    int64_t axis;
    bool old = im->opset < 13;
    if (!x || !attr_int(im, "axis", old ? 1 : -1, &axis) || !imp_axis(im, axis, vrank(x), &axis))
        return false;
    DimCtx *cx = &im->g->dims;
    Value *v = x;
    int r = vrank(x);
    if (old) { /* [prod(dims before axis), prod(dims from axis)] */
        Dim *d[2] = {dim_const(cx, 1), dim_const(cx, 1)};
        for (int i = 0; i < r; i++)
            d[i >= axis] = dim_mul(cx, d[i >= axis], vdims(x)[i]);
        v = imp_reshape(im, x, d, 2);
        axis = 1;
    }
    if (!v)
        return imp_fail(im);
    AttrList l = {0};
    attrs_add_int(im->g, &l, "axis", axis);
    attrs_add_int(im->g, &l, "keepdims", 1);
    attrs_add_int(im->g, &l, "last", 0);
    Op *am = build_op(im->g, OP_ARGMAX, &v, 1, l.v, l.n);
    if (!am)
        return imp_fail(im);
    Value *io = build_iota(im->g, DT_I64, vdims(v), vrank(v), axis);
    Value *y = imp_cvt(im, imp_cmp(im, "eq", io, am->out[0]), vdt(x));
    return imp_done(im, old ? imp_reshape(im, y, vdims(x), r) : y);
}

/* MeanVarianceNormalization: (x - mean) / (sqrt(var) + 1e-9) over axes
 * (default [0, 2, 3]), the variance the biased one, as ONNX's function. */
bool onnx_lower_mvn(Imp *im)
{
    Value *x = imp_need(im, 0);
    int64_t *axes, dflt[3] = {0, 2, 3};
    int n;
    if (!x || !attr_ints(im, "axes", &axes, &n))
        return false;
    if (n < 0) {
        axes = dflt;
        n = 3;
    }
    if (!dtype_is_float(vdt(x)))
        return imp_err(im, "needs a floating-point input, not %s", dtype_name(vdt(x)));
    if (!imp_axes(im, axes, n, vrank(x)))
        return false;
    Value *m = imp_reduce(im, x, "mean", axes, n, true);
    Value *d = imp_bin(im, OP_SUB, x, m);
    Value *var = imp_reduce(im, imp_bin(im, OP_MUL, d, d), "mean", axes, n, true);
    return imp_done(im, imp_bin(im, OP_DIV, d, imp_binc(im, OP_ADD, imp_un(im, OP_SQRT, var), 1e-9)));
}

/* (x - mean) / sqrt(var + eps) over axes, with the mean and 1/std. */
static Value *normalize(Imp *im, Value *x, const int64_t *axes, int n, double eps, Value **mean,
                        Value **inv)
{
    Value *m = imp_reduce(im, x, "mean", axes, n, true);
    Value *d = imp_bin(im, OP_SUB, x, m);
    Value *var = imp_reduce(im, imp_bin(im, OP_MUL, d, d), "mean", axes, n, true);
    Value *r = imp_un(im, OP_RSQRT, imp_binc(im, OP_ADD, var, eps));
    if (mean)
        *mean = m;
    if (inv)
        *inv = r;
    return imp_bin(im, OP_MUL, d, r);
}

static bool want_out(Imp *im, int i)
{
    return i < im->nout && im->node->output[i] && *im->node->output[i];
}

bool onnx_lower_layer_norm(Imp *im)
{
    Value *x = imp_need(im, 0), *scale = imp_need(im, 1), *bias = IN(2);
    int64_t axis, stash, axes[MAX_RANK];
    double eps;
    if (!x || !scale || !attr_int(im, "axis", -1, &axis) || !attr_float(im, "epsilon", 1e-5, &eps) ||
        !attr_int(im, "stash_type", 1, &stash) || !imp_axis(im, axis, vrank(x), &axis))
        return false;
    int n = 0;
    for (int i = (int)axis; i < vrank(x); i++)
        axes[n++] = i;
    DType dt = vdt(x);
    bool up = stash == 1 && (dt == DT_F16 || dt == DT_BF16);
    Value *mean, *inv;
    Value *y = normalize(im, up ? imp_cvt(im, x, DT_F32) : x, axes, n, eps, &mean, &inv);
    y = imp_bin(im, OP_MUL, imp_cvt(im, y, dt), scale);
    if (bias)
        y = imp_bin(im, OP_ADD, y, bias);
    if (want_out(im, 1))
        im->out[1] = mean;
    if (want_out(im, 2))
        im->out[2] = inv;
    return imp_done(im, y);
}

/* A per-channel vector [C] reshaped to [C, 1, ..., 1] for data of rank r. */
static Value *per_channel(Imp *im, Value *v, int r)
{
    if (!v || vrank(v) != 1)
        return v;
    Dim *dims[MAX_RANK];
    dims[0] = vdims(v)[0];
    for (int i = 1; i < r - 1; i++)
        dims[i] = dim_const(&im->g->dims, 1);
    return imp_reshape(im, v, dims, r - 1 > 0 ? r - 1 : 1);
}

bool onnx_lower_batch_norm(Imp *im)
{
    Value *x = imp_need(im, 0), *scale = imp_need(im, 1), *bias = imp_need(im, 2),
          *mean = imp_need(im, 3), *var = imp_need(im, 4);
    int64_t training;
    double eps;
    if (!x || !scale || !bias || !mean || !var || !attr_float(im, "epsilon", 1e-5, &eps) ||
        !attr_int(im, "training_mode", 0, &training))
        return false;
    if (vrank(x) < 2)
        return imp_err(im, "data must have rank 2 or more");
    int r = vrank(x);
    if (training || want_out(im, 1) || want_out(im, 2)) {
        /* batch statistics over every axis but the channel; the running
         * ones are updated with momentum (the variance is the biased one) */
        double mom;
        int64_t axes[MAX_RANK];
        int n = 0;
        if (!attr_float(im, "momentum", 0.9, &mom))
            return false;
        for (int i = 0; i < r; i++)
            if (i != 1)
                axes[n++] = i;
        Value *bm;
        Value *y = normalize(im, x, axes, n, eps, &bm, NULL);
        y = imp_bin(im, OP_MUL, y, per_channel(im, scale, r));
        y = imp_bin(im, OP_ADD, y, per_channel(im, bias, r));
        Dim *c = vdims(x)[1];
        Value *bm1 = imp_reshape(im, bm, &c, 1);
        Value *d = imp_bin(im, OP_SUB, x, bm);
        Value *bv1 = imp_reshape(im, imp_reduce(im, imp_bin(im, OP_MUL, d, d), "mean", axes, n, true), &c, 1);
        if (want_out(im, 1))
            im->out[1] = imp_bin(im, OP_ADD, imp_binc(im, OP_MUL, mean, mom), imp_binc(im, OP_MUL, bm1, 1 - mom));
        if (want_out(im, 2))
            im->out[2] = imp_bin(im, OP_ADD, imp_binc(im, OP_MUL, var, mom), imp_binc(im, OP_MUL, bv1, 1 - mom));
        if ((want_out(im, 1) && !im->out[1]) || (want_out(im, 2) && !im->out[2]))
            return imp_fail(im);
        return imp_done(im, y);
    }
    /* y = (x - mean) * (scale / sqrt(var + eps)) + bias */
    Value *k = imp_bin(im, OP_MUL, scale, imp_un(im, OP_RSQRT, imp_binc(im, OP_ADD, var, eps)));
    Value *y = imp_bin(im, OP_SUB, x, per_channel(im, mean, r));
    y = imp_bin(im, OP_MUL, y, per_channel(im, k, r));
    return imp_done(im, imp_bin(im, OP_ADD, y, per_channel(im, bias, r)));
}

bool onnx_lower_instance_norm(Imp *im)
{
    Value *x = imp_need(im, 0), *scale = imp_need(im, 1), *bias = imp_need(im, 2);
    double eps;
    int64_t axes[MAX_RANK];
    if (!x || !scale || !bias || !attr_float(im, "epsilon", 1e-5, &eps))
        return false;
    int r = vrank(x), n = 0;
    if (r < 3)
        return imp_err(im, "data must have rank 3 or more");
    for (int i = 2; i < r; i++)
        axes[n++] = i;
    Value *y = normalize(im, x, axes, n, eps, NULL, NULL);
    y = imp_bin(im, OP_MUL, y, per_channel(im, scale, r));
    return imp_done(im, imp_bin(im, OP_ADD, y, per_channel(im, bias, r)));
}

bool onnx_lower_group_norm(Imp *im)
{
    Value *x = imp_need(im, 0), *scale = imp_need(im, 1), *bias = imp_need(im, 2);
    double eps;
    int64_t groups, stash;
    if (!x || !scale || !bias || !attr_float(im, "epsilon", 1e-5, &eps) ||
        !attr_int(im, "num_groups", 0, &groups) || !attr_int(im, "stash_type", 1, &stash))
        return false;
    int r = vrank(x);
    if (r < 3 || groups < 1)
        return imp_err(im, "needs data of rank 3 or more and num_groups >= 1");
    DimCtx *cx = &im->g->dims;
    Dim *c = vdims(x)[1];
    if (dim_is_const(c) && c->c % groups)
        return imp_err(im, "%lld channels do not split into %lld groups", (long long)c->c,
                       (long long)groups);
    /* [N, C, *] -> [N, G, C/G * prod(*)] */
    Dim *rest = dim_floordiv(cx, c, dim_const(cx, groups));
    for (int i = 2; i < r; i++)
        rest = dim_mul(cx, rest, vdims(x)[i]);
    Dim *gd[3] = {vdims(x)[0], dim_const(cx, groups), rest};
    DType dt = vdt(x);
    bool up = stash == 1 && (dt == DT_F16 || dt == DT_BF16);
    Value *xg = imp_reshape(im, up ? imp_cvt(im, x, DT_F32) : x, gd, 3);
    int64_t ax = 2;
    Value *y = normalize(im, xg, &ax, 1, eps, NULL, NULL);
    y = imp_cvt(im, y, dt);
    if (im->opset < 21) { /* scale and bias per group */
        Dim *sd[2] = {dim_const(cx, groups), dim_const(cx, 1)};
        y = imp_bin(im, OP_MUL, y, imp_reshape(im, scale, sd, 2));
        y = imp_bin(im, OP_ADD, y, imp_reshape(im, bias, sd, 2));
        return imp_done(im, imp_reshape(im, y, vdims(x), r));
    }
    y = imp_reshape(im, y, vdims(x), r);
    y = imp_bin(im, OP_MUL, y, per_channel(im, scale, r));
    return imp_done(im, imp_bin(im, OP_ADD, y, per_channel(im, bias, r)));
}

bool onnx_lower_lp_norm(Imp *im)
{
    Value *x = imp_need(im, 0);
    int64_t axis, p;
    if (!x || !attr_int(im, "axis", -1, &axis) || !attr_int(im, "p", 2, &p) ||
        !imp_axis(im, axis, vrank(x), &axis))
        return false;
    Value *norm;
    if (p == 1)
        norm = imp_reduce(im, imp_un(im, OP_ABS, x), "sum", &axis, 1, true);
    else if (p == 2)
        norm = imp_un(im, OP_SQRT, imp_reduce(im, imp_bin(im, OP_MUL, x, x), "sum", &axis, 1, true));
    else
        return imp_err(im, "p must be 1 or 2");
    return imp_done(im, imp_bin(im, OP_DIV, x, norm));
}

bool onnx_lower_cumsum(Imp *im)
{
    Value *x = imp_need(im, 0), *ax = imp_need(im, 1);
    int64_t excl, rev, *axis;
    int n;
    if (!x || !ax || !attr_int(im, "exclusive", 0, &excl) || !attr_int(im, "reverse", 0, &rev))
        return false;
    if (!imp_const_ints(im, ax, &axis, &n)) {
        /* a computed axis: one cumsum per axis, the one asked for selected */
        size_t one;
        if (!dtype_is_int(vdt(ax)) || !type_static_numel(&ax->type, &one) || one != 1)
            return imp_err(im, "axis must be an integer scalar");
        int r = vrank(x);
        if (r < 1)
            return imp_err(im, "data must have rank 1 or more");
        Dim *none[1] = {NULL};
        Value *a = imp_reshape(im, imp_cvt(im, ax, DT_I64), none, 0), *y = NULL;
        a = imp_sel(im, imp_cmp(im, "lt", a, imp_scalar(im, DT_I64, 0)), imp_binc(im, OP_ADD, a, r), a);
        for (int i = r - 1; i >= 0; i--) {
            AttrList l = {0};
            attrs_add_int(im->g, &l, "axis", i);
            attrs_add_int(im->g, &l, "exclusive", excl != 0);
            attrs_add_int(im->g, &l, "reverse", rev != 0);
            Op *op = build_op(im->g, OP_CUMSUM, &x, 1, l.v, l.n);
            if (!op)
                return imp_fail(im);
            y = y ? imp_sel(im, imp_cmp(im, "eq", a, imp_scalar(im, DT_I64, i)), op->out[0], y)
                  : op->out[0];
        }
        return imp_done(im, y);
    }
    if (n != 1)
        return imp_err(im, "axis must be a scalar");
    if (!imp_axis(im, axis[0], vrank(x), &axis[0]))
        return false;
    AttrList l = {0};
    attrs_add_int(im->g, &l, "axis", axis[0]);
    attrs_add_int(im->g, &l, "exclusive", excl != 0);
    attrs_add_int(im->g, &l, "reverse", rev != 0);
    Op *op = build_op(im->g, OP_CUMSUM, &x, 1, l.v, l.n);
    return imp_done(im, op ? op->out[0] : NULL);
}

bool onnx_lower_topk(Imp *im)
{
    Value *x = imp_need(im, 0), *k = imp_need(im, 1);
    int64_t axis, largest, sorted;
    if (!x || !k || !attr_int(im, "axis", -1, &axis) || !attr_int(im, "largest", 1, &largest) ||
        !attr_int(im, "sorted", 1, &sorted) || !imp_axis(im, axis, vrank(x), &axis))
        return false;
    Dim *one = dim_const(&im->g->dims, 1);
    k = imp_reshape(im, imp_cvt(im, k, DT_I64), &one, 1);
    if (!k)
        return imp_fail(im);
    AttrList l = {0};
    attrs_add_int(im->g, &l, "axis", axis);
    attrs_add_int(im->g, &l, "largest", largest != 0);
    attrs_add_int(im->g, &l, "sorted", sorted != 0);
    Value *in[2] = {x, k};
    Op *op = build_op(im->g, OP_TOPK, in, 2, l.v, l.n);
    if (!op)
        return imp_fail(im);
    im->out[0] = op->out[0];
    if (im->nout > 1)
        im->out[1] = op->out[1];
    return true;
}

/* ---- losses ---- */

/* The negative log-likelihood of log-probabilities lp [N, C, d...] at the
 * classes t [N, d...]: loss[n, d] = -lp[n, t[n, d], d] * w[t[n, d]], 0
 * where t is ignore_index; reduced by "none", "sum" or "mean" (the sum
 * over the sum of the weights taken, as ONNX and PyTorch do). */
static bool nll_check(Imp *im, Value *lp, Value *t, Value *w)
{
    int r = vrank(lp);
    if (r < 2 || vrank(t) != r - 1)
        return imp_err(im, "needs input [N, C, d...] and target [N, d...], not ranks %d and %d", r, vrank(t));
    if (!dtype_is_float(vdt(lp)))
        return imp_err(im, "input must be floating-point, not %s", dtype_name(vdt(lp)));
    if (!dtype_is_int(vdt(t)))
        return imp_err(im, "target must be an integer tensor, not %s", dtype_name(vdt(t)));
    if (w && vrank(w) != 1)
        return imp_err(im, "weight must be 1-D [C]");
    return true;
}

static Value *nll(Imp *im, Value *lp, Value *t, Value *w, const char *red, bool has_ii, int64_t ii)
{
    if (!lp)
        return NULL;
    t = imp_cvt(im, t, DT_I64);
    Value *ign = has_ii ? imp_cmp(im, "eq", t, imp_scalar(im, DT_I64, (double)ii)) : NULL;
    if (ign)
        t = imp_sel(im, ign, imp_scalar(im, DT_I64, 0), t);
    int64_t one = 1;
    AttrList l = {0};
    attrs_add_int(im->g, &l, "axis", 1);
    Value *t1 = imp_unsqueeze(im, t, &one, 1);
    Op *ge = t1 ? build_op(im->g, OP_GATHER_ELEMENTS, (Value *[]){lp, t1}, 2, l.v, l.n) : NULL;
    if (!ge)
        return NULL;
    Value *picked = imp_reshape(im, ge->out[0], vdims(t), vrank(t));
    Value *wt = NULL;
    if (w) {
        AttrList l0 = {0};
        attrs_add_int(im->g, &l0, "axis", 0);
        Op *gw = build_op(im->g, OP_GATHER, (Value *[]){imp_cvt(im, w, vdt(lp)), t}, 2, l0.v, l0.n);
        if (!gw)
            return NULL;
        wt = gw->out[0];
    }
    if (ign)
        wt = imp_sel(im, ign, imp_scalar(im, vdt(lp), 0), wt ? wt : imp_scalar(im, vdt(lp), 1));
    Value *loss = imp_un(im, OP_NEG, wt ? imp_bin(im, OP_MUL, picked, wt) : picked);
    if (!strcmp(red, "none"))
        return loss;
    int64_t axes[MAX_RANK];
    for (int i = 0; i < vrank(t); i++)
        axes[i] = i;
    if (!strcmp(red, "sum"))
        return imp_reduce(im, loss, "sum", axes, vrank(t), false);
    if (!wt)
        return imp_reduce(im, loss, "mean", axes, vrank(t), false);
    wt = imp_broadcast_to(im, wt, vdims(t), vrank(t));
    return imp_bin(im, OP_DIV, imp_reduce(im, loss, "sum", axes, vrank(t), false),
                   imp_reduce(im, wt, "sum", axes, vrank(t), false));
}

/* The attributes both losses share. */
static bool loss_attrs(Imp *im, const char **red, bool *has_ii, int64_t *ii)
{
    if (!attr_str(im, "reduction", "mean", red) || !attr_int(im, "ignore_index", 0, ii))
        return false;
    *has_ii = attr_find(im, "ignore_index") != NULL;
    if (strcmp(*red, "none") && strcmp(*red, "sum") && strcmp(*red, "mean"))
        return imp_err(im, "reduction must be \"none\", \"sum\" or \"mean\", not \"%s\"", *red);
    return true;
}

bool onnx_lower_nll_loss(Imp *im)
{
    Value *x = imp_need(im, 0), *t = imp_need(im, 1);
    const char *red;
    bool has_ii;
    int64_t ii;
    if (!x || !t || !loss_attrs(im, &red, &has_ii, &ii) || !nll_check(im, x, t, IN(2)))
        return false;
    return imp_done(im, nll(im, x, t, IN(2), red, has_ii, ii));
}

/* SoftmaxCrossEntropyLoss: the NLL of log_softmax(scores) over axis 1;
 * the second output, when asked for, is that log_softmax. */
bool onnx_lower_sce_loss(Imp *im)
{
    Value *x = imp_need(im, 0), *t = imp_need(im, 1);
    const char *red;
    bool has_ii;
    int64_t ii, ax = 1;
    if (!x || !t || !loss_attrs(im, &red, &has_ii, &ii) || !nll_check(im, x, t, IN(2)))
        return false;
    Value *d = imp_bin(im, OP_SUB, x, imp_reduce(im, x, "max", &ax, 1, true));
    Value *lse = imp_un(im, OP_LOG, imp_reduce(im, imp_un(im, OP_EXP, d), "sum", &ax, 1, true));
    Value *lp = imp_bin(im, OP_SUB, d, lse);
    Value *y = nll(im, lp, t, IN(2), red, has_ii, ii);
    if (y && want_out(im, 1))
        im->out[1] = lp;
    return imp_done(im, y);
}
