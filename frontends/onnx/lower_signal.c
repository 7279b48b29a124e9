/*
 * lower_signal.c — signal processing: DFT, STFT and the window functions
 * (HannWindow, HammingWindow, BlackmanWindow), on core ops.
 *
 * A DFT of length L along an axis of n samples is two matrix products
 * with the [n, K] tables C[j, k] = cos(2 pi k j / L) and S[j, k] = sin(2
 * pi k j / L), rows j >= L zero (a signal longer than L is truncated, a
 * shorter one is zero-padded, as ONNX says), K = L or L/2 + 1 (onesided).
 * The angle is taken as 2 pi ((k j) mod L) / L in f64, so that it stays
 * exact for long signals. With x = xr + i xi:
 *
 *   forward  Yr = xr C + xi S,        Yi = xi C - xr S
 *   inverse  Yr = (xr C - xi S) / L,  Yi = (xi C + xr S) / L
 *
 * This is O(n K) per output row where an FFT is O(n log n); it serves
 * every length (symbolic ones too) with one compile, and the products go
 * to the matmul library.
 */
#include "frontends/onnx/internal.h"

#include <math.h>

#define CX (&im->g->dims)

static Dim *dc(Imp *im, int64_t c) { return dim_const(CX, c); }

/* An integer scalar operand (rank 0 or one element) as an i64[] value. */
static Value *scalar_i64(Imp *im, Value *v, const char *what)
{
    size_t one;
    if (!dtype_is_int(vdt(v)) || !type_static_numel(&v->type, &one) || one != 1) {
        imp_err(im, "%s must be an integer scalar", what);
        return NULL;
    }
    Dim *none[1] = {NULL};
    Value *r = imp_reshape(im, imp_cvt(im, v, DT_I64), none, 0);
    if (!r)
        imp_fail(im);
    return r;
}

static Value *gather0(Imp *im, Value *x, Value *idx)
{
    if (!x || !idx)
        return NULL;
    AttrList l = {0};
    attrs_add_int(im->g, &l, "axis", 0);
    Op *op = build_op(im->g, OP_GATHER, (Value *[]){x, idx}, 2, l.v, l.n);
    return op ? op->out[0] : NULL;
}

/* The cos (sin) table [n, K] of a DFT of length lv (an i64[] value) in
 * type dt. */
static Value *dft_table(Imp *im, Dim *n, Dim *k, Value *lv, bool sine, DType dt)
{
    Dim *d[2] = {n, k};
    Value *j = build_iota(im->g, DT_I64, d, 2, 0), *kk = build_iota(im->g, DT_I64, d, 2, 1);
    Value *m = imp_bin(im, OP_MOD, imp_bin(im, OP_MUL, j, kk), lv);
    Value *lf = imp_cvt(im, lv, DT_F64);
    Value *th = imp_bin(im, OP_DIV, imp_binc(im, OP_MUL, imp_cvt(im, m, DT_F64), 2 * M_PI), lf);
    Value *t = imp_un(im, sine ? OP_SIN : OP_COS, th);
    t = imp_sel(im, imp_cmp(im, "lt", j, lv), t, imp_scalar(im, DT_F64, 0));
    return imp_cvt(im, t, dt);
}

/* The DFT of x [..., n, ..., 1|2] along axis a (not the last) with
 * length lv (i64[], NULL: n) whose dim is ld, onesided or not. */
static Value *dft(Imp *im, Value *x, int a, Value *lv, Dim *ld, bool inverse, bool onesided)
{
    int r = vrank(x);
    DType dt = vdt(x);
    Dim **xd = vdims(x);
    bool cplx = dim_is(xd[r - 1], 2);
    /* real and imaginary parts [..., n, ...] with the axis moved last */
    int64_t perm[MAX_RANK], back[MAX_RANK];
    int q = 0;
    for (int i = 0; i < r - 1; i++)
        if (i != a)
            perm[q++] = i;
    perm[q] = a;
    for (int i = 0; i < r - 1; i++)
        back[perm[i]] = i;
    Dim *pd[MAX_RANK];
    for (int i = 0; i < r - 1; i++)
        pd[i] = xd[i];
    Value *xr = imp_reshape(im, imp_slice1(im, x, r - 1, dc(im, 0), dc(im, 1), 1), pd, r - 1);
    Value *xi = cplx ? imp_reshape(im, imp_slice1(im, x, r - 1, dc(im, 1), dc(im, 2), 1), pd, r - 1) : NULL;
    xr = imp_transpose(im, xr, perm);
    xi = xi ? imp_transpose(im, xi, perm) : NULL;
    if (!lv) {
        lv = build_dim(im->g, x, a);
        ld = xd[a];
    }
    Dim *k = onesided ? dim_addc(CX, dim_floordiv(CX, ld, dc(im, 2)), 1) : ld;
    Value *c = dft_table(im, xd[a], k, lv, false, dt), *s = dft_table(im, xd[a], k, lv, true, dt);
    Value *yr = imp_matmul(im, xr, c), *yi = imp_un(im, OP_NEG, imp_matmul(im, xr, s));
    if (inverse)
        yi = imp_un(im, OP_NEG, yi);
    if (xi) {
        Value *ic = imp_matmul(im, xi, c), *is = imp_matmul(im, xi, s);
        yr = imp_bin(im, inverse ? OP_SUB : OP_ADD, yr, is);
        yi = imp_bin(im, OP_ADD, yi, ic);
    }
    if (inverse) {
        Value *lf = imp_cvt(im, lv, dt);
        yr = imp_bin(im, OP_DIV, yr, lf);
        yi = imp_bin(im, OP_DIV, yi, lf);
    }
    int64_t last = r - 1;
    yr = imp_unsqueeze(im, imp_transpose(im, yr, back), &last, 1);
    yi = imp_unsqueeze(im, imp_transpose(im, yi, back), &last, 1);
    return yr && yi ? build_concat(im->g, (Value *[]){yr, yi}, 2, r - 1) : NULL;
}

/* The checks every DFT input needs. */
static bool dft_input(Imp *im, Value *x)
{
    int r = vrank(x);
    if (r < 2 || (!dim_is(vdims(x)[r - 1], 1) && !dim_is(vdims(x)[r - 1], 2)))
        return imp_err(im, "input must be [..., 1] (real) or [..., 2] (complex)");
    if (!dtype_is_float(vdt(x)))
        return imp_err(im, "needs a floating-point input, not %s", dtype_name(vdt(x)));
    return true;
}

/* DFT: the axis is an attribute (default 1) before opset 20, then an
 * input (default -2); a run-time axis computes the transform along every
 * axis it may name and selects one, which needs the result's shape not
 * to depend on it (no onesided, no dft_length); an axis outside [-r, r)
 * or naming the last dim is a run-time error. dft_length must be a
 * constant. */
bool onnx_lower_dft(Imp *im)
{
    Value *x = imp_need(im, 0), *vl = IN(1), *va = im->opset >= 20 ? IN(2) : NULL;
    int64_t axis, inverse, onesided, *c;
    int n;
    if (!x || !attr_int(im, "inverse", 0, &inverse) || !attr_int(im, "onesided", 0, &onesided) ||
        !dft_input(im, x))
        return false;
    int r = vrank(x);
    if (im->opset < 20 && !attr_int(im, "axis", 1, &axis))
        return false;
    if (im->opset >= 20) {
        axis = -2;
        if (va && imp_const_ints(im, va, &c, &n)) {
            if (n != 1)
                return imp_err(im, "axis must be a scalar");
            axis = c[0];
            va = NULL;
        }
    }
    Value *lv = NULL;
    Dim *ld = NULL;
    if (vl) {
        if (!(lv = scalar_i64(im, vl, "dft_length")))
            return false;
        if (!imp_const_ints(im, vl, &c, &n))
            return imp_errk(im, DIAG_UNSUPPORTED, "a computed dft_length is not supported");
        if (c[0] < 1)
            return imp_err(im, "dft_length must be 1 or more");
        ld = dc(im, c[0]);
    }
    if (!va) {
        if (!imp_axis(im, axis, r, &axis))
            return false;
        if (axis == r - 1)
            return imp_err(im, "axis must not be the last (the real and imaginary parts)");
        return imp_done(im, dft(im, x, (int)axis, lv, ld, inverse != 0, onesided != 0));
    }
    if (onesided || vl)
        return imp_errk(im, DIAG_UNSUPPORTED, "a computed axis with onesided or dft_length is not supported");
    Value *a = scalar_i64(im, va, "axis"), *y = NULL;
    if (!a)
        return false;
    /* checked by two gathers: [0, r) at a (negatives wrap, as ONNX's do),
     * then [0, r - 1) at that */
    int64_t ax[MAX_RANK];
    for (int i = 0; i < r; i++)
        ax[i] = i;
    a = gather0(im, imp_i64s(im, ax, r), a);
    a = gather0(im, imp_i64s(im, ax, r - 1), a);
    for (int i = 0; i < r - 1; i++) {
        Value *yi = dft(im, x, i, NULL, NULL, inverse != 0, false);
        y = y ? imp_sel(im, imp_cmp(im, "eq", a, imp_scalar(im, DT_I64, i)), yi, y) : yi;
    }
    return imp_done(im, y);
}

/* HannWindow, HammingWindow and BlackmanWindow (im->arg 0, 1, 2) of a
 * length given as a scalar, a constant or a run-time value (a dyn_iota):
 *
 *   w[i] = a0 - a1 cos(2 pi i / N) + a2 cos(4 pi i / N)
 *
 * with N = size (periodic, the default) or size - 1, computed in f64 and
 * converted to output_datatype (default f32). Hann is a0 = a1 = 0.5
 * (= sin^2(pi i / N)), Hamming a0 = 25/46, a1 = 21/46, Blackman a0 =
 * 0.42, a1 = 0.5, a2 = 0.08. */
bool onnx_lower_window(Imp *im)
{
    static const double coef[3][3] = {{0.5, 0.5, 0}, {25.0 / 46, 21.0 / 46, 0}, {0.42, 0.5, 0.08}};
    Value *vs = imp_need(im, 0);
    int64_t periodic, odt, *c;
    int n;
    if (!vs || !attr_int(im, "periodic", 1, &periodic) || !attr_int(im, "output_datatype", 1, &odt))
        return false;
    DType dt = onnx_dtype((int32_t)odt);
    if (dt == DT_INVALID || dt == DT_BOOL)
        return imp_errk(im, DIAG_UNSUPPORTED, "output_datatype %s is not supported", onnx_type_name((int32_t)odt));
    Value *size = scalar_i64(im, vs, "size"), *io;
    if (!size)
        return false;
    if (imp_const_ints(im, vs, &c, &n)) {
        if (c[0] < 0)
            return imp_err(im, "size must not be negative");
        Dim *d = dc(im, c[0]);
        io = build_iota(im->g, DT_F64, &d, 1, 0);
    } else {
        Dim *one = dc(im, 1);
        Value *shp = imp_binc(im, OP_MAX, imp_reshape(im, size, &one, 1), 0);
        AttrList l = {0};
        attrs_add_dtype(im->g, &l, "dtype", DT_F64);
        attrs_add_int(im->g, &l, "axis", 0);
        Op *op = shp ? build_op(im->g, OP_DYN_IOTA, &shp, 1, l.v, l.n) : NULL;
        io = op ? op->out[0] : NULL;
    }
    Value *nn = imp_cvt(im, periodic ? size : imp_binc(im, OP_SUB, size, 1), DT_F64);
    Value *th = imp_bin(im, OP_DIV, imp_binc(im, OP_MUL, io, 2 * M_PI), nn);
    const double *k = coef[im->arg];
    Value *w = imp_bin(im, OP_SUB, imp_scalar(im, DT_F64, k[0]), imp_binc(im, OP_MUL, imp_un(im, OP_COS, th), k[1]));
    if (k[2] != 0)
        w = imp_bin(im, OP_ADD, w, imp_binc(im, OP_MUL, imp_un(im, OP_COS, imp_binc(im, OP_MUL, th, 2)), k[2]));
    return imp_done(im, imp_cvt(im, w, dt));
}
