/*
 * lower_ml.c — ops of the ai.onnx.ml domain that converters of traditional
 * models write around a network (skl2onnx: a StandardScaler in front of an
 * MLP, the class labels picked by the arg-max behind it).
 *
 *   Scaler                 y = (f32(x) - offset) * scale, offset and scale
 *                          one value or one per element of the last axis
 *   ArrayFeatureExtractor  x's last axis gathered at the indices y
 *                          (flattened): [..., len(y)]; a 1-D x gives
 *                          [1, len(y)], as ONNX Runtime does
 *   Binarizer              y = x > threshold ? 1 : 0, in x's type
 *
 * The rest of the domain (trees, SVMs, string encoders, ZipMap's maps) is
 * refused as unsupported.
 */
#include "frontends/onnx/internal.h"

#define CX (&im->g->dims)

/* An f32 constant of the attribute's values, [n] (n = 1 or the last dim). */
static Value *floats_attr(Imp *im, const char *name, double dflt, Dim *last)
{
    double *v, one = dflt;
    int n;
    if (!attr_floats(im, name, &v, &n))
        return NULL;
    if (n < 0)
        v = &one, n = 1;
    if (n != 1 && !(dim_is_const(last) && last->c == n)) {
        char d[64];
        dim_snprint(d, sizeof d, last);
        imp_err(im, "attribute '%s' has %d values for a last dim of %s", name, n, d);
        return NULL;
    }
    float *f = arena_alloc(&im->g->arena, (size_t)n * sizeof *f);
    if (!f) {
        imp_err(im, "out of memory");
        return NULL;
    }
    for (int i = 0; i < n; i++)
        f[i] = (float)v[i];
    Dim *d = dim_const(CX, n);
    return build_const(im->g, type_make(&im->g->arena, DT_F32, 1, &d), f, (size_t)n * sizeof *f, false);
}

bool onnx_lower_ml_scaler(Imp *im)
{
    Value *x = imp_need(im, 0);
    if (!x)
        return false;
    if (vrank(x) < 1)
        return imp_err(im, "x must have rank 1 or more");
    Dim *last = vdims(x)[vrank(x) - 1];
    Value *off = floats_attr(im, "offset", 0, last), *sc = off ? floats_attr(im, "scale", 1, last) : NULL;
    if (!off || !sc)
        return false;
    return imp_done(im, imp_bin(im, OP_MUL, imp_bin(im, OP_SUB, imp_cvt(im, x, DT_F32), off), sc));
}

bool onnx_lower_ml_array_feature_extractor(Imp *im)
{
    Value *x = imp_need(im, 0), *y = imp_need(im, 1);
    if (!x || !y)
        return false;
    int r = vrank(x);
    if (r < 1)
        return imp_err(im, "x must have rank 1 or more");
    if (vdt(y) != DT_I64)
        return imp_err(im, "the indices must be i64, not %s", dtype_name(vdt(y)));
    Dim *n = dim_const(CX, 1);
    for (int i = 0; i < vrank(y); i++)
        n = dim_mul(CX, n, vdims(y)[i]);
    Value *in[2] = {x, imp_reshape(im, y, &n, 1)};
    if (!in[1])
        return imp_fail(im);
    AttrList l = {0};
    attrs_add_int(im->g, &l, "axis", r - 1);
    Op *op = build_op(im->g, OP_GATHER, in, 2, l.v, l.n);
    Value *g = op ? op->out[0] : NULL;
    if (g && r == 1) {
        Dim *two[2] = {dim_const(CX, 1), n};
        g = imp_reshape(im, g, two, 2);
    }
    return imp_done(im, g);
}

bool onnx_lower_ml_binarizer(Imp *im)
{
    Value *x = imp_need(im, 0);
    double t;
    if (!x || !attr_float(im, "threshold", 0, &t))
        return false;
    Value *gt = imp_cmp(im, "gt", x, imp_scalar(im, vdt(x), t));
    return imp_done(im, imp_sel(im, gt, imp_scalar(im, vdt(x), 1), imp_scalar(im, vdt(x), 0)));
}
