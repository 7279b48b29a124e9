/*
 * lower_detect.c — the ops of detection models: NonMaxSuppression, as the
 * core op nms, and RoiAlign (further down), lowered to core ops.
 *
 * NonMaxSuppression becomes one `nms` op (runtime/interp_detect.c: ONNX
 * Runtime's greedy algorithm, each candidate compared with the kept boxes
 * only), run on the host through the interpreter's code, as topk and
 * nonzero are. It was a core `loop` over the ranks before, each iteration
 * the candidate's IoU with every box ([B, C, S] kernels): O(S^2) however
 * few boxes are kept, and S iterations of launches; torchvision's
 * SSDlite, whose batched_nms runs one class of 27,000 boxes, took 450 ms
 * a run there against ONNX Runtime's 185 (bench/NOTES.md).
 */
#include "frontends/onnx/internal.h"

#include <stdlib.h>
#include <string.h>

#define CX (&im->g->dims)

static Dim *dc(Imp *im, int64_t c) { return dim_const(CX, c); }

static Value *gather_ax(Imp *im, OpKind k, Value *x, Value *idx, int64_t axis)
{
    if (!x || !idx)
        return NULL;
    AttrList l = {0};
    attrs_add_int(im->g, &l, "axis", axis);
    Op *op = build_op(im->g, k, (Value *[]){x, idx}, 2, l.v, l.n);
    return op ? op->out[0] : NULL;
}

/* An optional one-element operand as a scalar of type dt, or dflt. */
static bool nms_scalar(Imp *im, int i, DType dt, double dflt, Value **out)
{
    Value *v = IN(i);
    size_t one;
    if (!v) {
        *out = imp_scalar(im, dt, dflt);
        return *out || imp_fail(im);
    }
    if (!type_static_numel(&v->type, &one) || one != 1)
        return imp_err(im, "input %d must hold one value", i);
    Dim *none[1] = {NULL};
    *out = imp_reshape(im, imp_cvt(im, v, dt), none, 0);
    return *out || imp_fail(im);
}

bool onnx_lower_nms(Imp *im)
{
    Value *boxes = imp_need(im, 0), *scores = imp_need(im, 1), *ops[5];
    int64_t center;
    if (!boxes || !scores || !attr_int(im, "center_point_box", 0, &center))
        return false;
    /* Dims the import could not resolve (a reshape to a computed shape,
     * an If branch's view of the graph outside it) are taken as the op
     * requires them: boxes [B, S, 4], scores [B, C, S], checked when the
     * model runs (the reshapes' element counts); a rank or a constant that
     * is wrong is an error here. */
    if (vrank(boxes) != 3 || vrank(scores) != 3)
        return imp_err(im, "needs boxes [B, S, 4] and scores [B, C, S], got boxes of rank %d and scores of rank %d",
                       vrank(boxes), vrank(scores));
    if (dim_is_const(vdims(boxes)[2]) && !dim_is(vdims(boxes)[2], 4))
        return imp_err(im, "needs boxes [B, S, 4], got a last dim of %lld", (long long)vdims(boxes)[2]->c);
    if (!dtype_is_float(vdt(boxes)) || !dtype_is_float(vdt(scores)))
        return imp_err(im, "boxes and scores must be floating point");
    if (center != 0 && center != 1)
        return imp_err(im, "center_point_box must be 0 or 1");
    /* ONNX's boxes and scores are f32; another float type is taken as f32 */
    boxes = imp_reshape(im, imp_cvt(im, boxes, DT_F32), (Dim *[]){vdims(boxes)[0], vdims(boxes)[1], dc(im, 4)}, 3);
    scores = boxes ? imp_reshape(im, imp_cvt(im, scores, DT_F32),
                                 (Dim *[]){vdims(boxes)[0], vdims(scores)[1], vdims(boxes)[1]}, 3)
                   : NULL;
    if (!boxes || !scores)
        return imp_fail(im);
    ops[0] = boxes;
    ops[1] = scores;
    int n = IN(4) ? 5 : 4;
    if (!nms_scalar(im, 2, DT_I64, 0, &ops[2]) || !nms_scalar(im, 3, DT_F32, 0, &ops[3]) ||
        (n == 5 && !nms_scalar(im, 4, DT_F32, 0, &ops[4])))
        return false;
    AttrList l = {0};
    attrs_add_int(im->g, &l, "center", center);
    Op *op = build_op(im->g, OP_NMS, ops, n, l.v, l.n);
    return imp_done(im, op ? op->out[0] : NULL);
}

/* ---- RoiAlign ----
 *
 * Y [R, C, oh, ow]: for roi r (x1, y1, x2, y2 scaled by spatial_scale,
 * less 0.5 with half_pixel) on feature map batch_indices[r], output cell
 * (ph, pw) pools sr x sr bilinear samples at (y1 + ph * bin_h + (iy + 0.5)
 * * bin_h / sr, x1 + ...) by their average or maximum (the maximum of the
 * four weighted taps of each sample, as ONNX's reference and ONNX
 * Runtime). The taps follow the reference: a sample outside [-1, size]
 * contributes 0, one below 0 is taken at 0, one past size - 1 at size - 1.
 * A sample's coordinates and weights are separable, so each axis gives
 * [R, o, sr] tensors, and the four taps are gathers of X's pixels as
 * rows of C channels over [R, oh, sr, ow, sr, C] (channels innermost: a
 * tap's row is read in vectors; with C outermost, as X lies, each element
 * was a gather of its own, 2.5 ns each, Faster R-CNN's 38 ms a run), the
 * pooled [R, oh, ow, C] transposed at the end. sampling_ratio 0 (a grid
 * that depends on each roi's size) is refused as unsupported. */

typedef struct RoiAxis {
    Value *lo, *hi;   /* i64 tap positions, [R, o, sr] */
    Value *wl, *wh;   /* f64 weights of lo and hi (0 outside) */
} RoiAxis;

static void roi_axis(Imp *im, Value *start, Value *bin, int64_t o, int64_t sr, Value *len, RoiAxis *a)
{
    Dim *r = vdims(start)[0], *d3[3] = {r, dc(im, 1), dc(im, 1)}, *od[3] = {dc(im, 1), dc(im, o), dc(im, 1)},
        *sd[3] = {dc(im, 1), dc(im, 1), dc(im, sr)};
    Value *s = imp_reshape(im, start, d3, 3), *b = imp_reshape(im, bin, d3, 3);
    Value *p = build_iota(im->g, DT_F64, od, 3, 1), *i = build_iota(im->g, DT_F64, sd, 3, 2);
    Value *c = imp_bin(im, OP_ADD, imp_bin(im, OP_ADD, s, imp_bin(im, OP_MUL, p, b)),
                       imp_bin(im, OP_MUL, imp_binc(im, OP_ADD, i, 0.5), imp_binc(im, OP_DIV, b, (double)sr)));
    Value *lf = imp_cvt(im, len, DT_F64), *last = imp_binc(im, OP_SUB, lf, 1);
    Value *out = imp_bin(im, OP_OR, imp_cmp(im, "lt", c, imp_scalar(im, DT_F64, -1)), imp_cmp(im, "gt", c, lf));
    c = imp_binc(im, OP_MAX, c, 0);
    Value *lo = imp_un(im, OP_FLOOR, c);
    Value *edge = imp_cmp(im, "ge", lo, last);
    lo = imp_sel(im, edge, last, lo);
    c = imp_sel(im, edge, lo, c);
    Value *hi = imp_sel(im, edge, lo, imp_binc(im, OP_ADD, lo, 1));
    Value *l = imp_bin(im, OP_SUB, c, lo), *zero = imp_scalar(im, DT_F64, 0);
    a->wl = imp_sel(im, out, zero, imp_bin(im, OP_SUB, imp_scalar(im, DT_F64, 1), l));
    a->wh = imp_sel(im, out, zero, l);
    a->lo = imp_cvt(im, lo, DT_I64);
    a->hi = imp_cvt(im, hi, DT_I64);
}

/* v [R, o, sr] as [R, o, sr, 1, 1, 1] (y) or [R, 1, 1, o, sr, 1] (x) */
static Value *roi_spread(Imp *im, Value *v, bool y)
{
    if (!v)
        return NULL;
    Dim **d = vdims(v), *one = dc(im, 1);
    Dim *yd[6] = {d[0], d[1], d[2], one, one, one}, *xd[6] = {d[0], one, one, d[1], d[2], one};
    return imp_reshape(im, v, y ? yd : xd, 6);
}

bool onnx_lower_roi_align(Imp *im)
{
    Value *x = imp_need(im, 0), *rois = imp_need(im, 1), *bi = imp_need(im, 2);
    const char *coord, *mode;
    int64_t oh, ow, sr;
    double scale;
    if (!x || !rois || !bi ||
        !attr_str(im, "coordinate_transformation_mode", im->opset >= 16 ? "half_pixel" : "output_half_pixel",
                  &coord) ||
        !attr_str(im, "mode", "avg", &mode) || !attr_int(im, "output_height", 1, &oh) ||
        !attr_int(im, "output_width", 1, &ow) || !attr_int(im, "sampling_ratio", 0, &sr) ||
        !attr_float(im, "spatial_scale", 1.0, &scale))
        return false;
    bool half = !strcmp(coord, "half_pixel"), avg = !strcmp(mode, "avg");
    if (!half && strcmp(coord, "output_half_pixel"))
        return imp_err(im, "coordinate_transformation_mode must be half_pixel or output_half_pixel");
    if (!avg && strcmp(mode, "max"))
        return imp_err(im, "mode must be avg or max");
    if (sr <= 0)
        return imp_errk(im, DIAG_UNSUPPORTED, "sampling_ratio 0 (a sampling grid per roi) is not supported");
    if (oh < 1 || ow < 1)
        return imp_err(im, "output_height and output_width must be positive");
    if (vrank(x) != 4 || !dtype_is_float(vdt(x)) || vrank(rois) != 2 || !dim_is(vdims(rois)[1], 4) ||
        !dtype_is_float(vdt(rois)) || vrank(bi) != 1 || !dtype_is_int(vdt(bi)))
        return imp_err(im, "needs X [N, C, H, W], rois [R, 4] and batch_indices [R]");
    /* per roi: start, end and bin size along y and x, f64 [R] */
    Dim *R = vdims(rois)[0];
    Value *rf = imp_cvt(im, rois, DT_F64), *co[4];
    for (int k = 0; k < 4; k++) {
        co[k] = imp_reshape(im, imp_slice1(im, rf, 1, dc(im, k), dc(im, k + 1), 1), &R, 1);
        co[k] = imp_binc(im, OP_SUB, imp_binc(im, OP_MUL, co[k], scale), half ? 0.5 : 0);
    }
    RoiAxis ay, ax;
    for (int a = 0; a < 2; a++) { /* a = 0: y (rois' 1 and 3), 1: x (0 and 2) */
        Value *s = co[1 - a], *len = imp_bin(im, OP_SUB, co[3 - a], s);
        if (!half)
            len = imp_binc(im, OP_MAX, len, 1);
        int64_t o = a ? ow : oh;
        roi_axis(im, s, imp_binc(im, OP_DIV, len, (double)o), o, sr, build_dim(im->g, x, 2 + a), a ? &ax : &ay);
    }
    /* X's pixels as rows of C channels, [N H W, C]: a tap is a row at
     * (b H + y) W + x, read along C (contiguous, in vectors), and the
     * layout pass's channels-last convolution before it gives X so */
    Dim **xd = vdims(x), *n = dim_mul(CX, dim_mul(CX, xd[0], xd[2]), xd[3]), *rc[2] = {n, xd[1]};
    Value *xr = imp_reshape(im, imp_transpose(im, x, (int64_t[]){0, 2, 3, 1}), rc, 2);
    Value *H = build_dim(im->g, x, 2), *W = build_dim(im->g, x, 3);
    Dim *one = dc(im, 1), *bd[6] = {R, one, one, one, one, one};
    Value *base = imp_bin(im, OP_MUL, imp_reshape(im, imp_cvt(im, bi, DT_I64), bd, 6), H);
    Value *ys[2] = {roi_spread(im, ay.lo, true), roi_spread(im, ay.hi, true)};
    Value *xs[2] = {roi_spread(im, ax.lo, false), roi_spread(im, ax.hi, false)};
    Value *wy[2] = {roi_spread(im, ay.wl, true), roi_spread(im, ay.wh, true)};
    Value *wx[2] = {roi_spread(im, ax.wl, false), roi_spread(im, ax.wh, false)};
    Value *acc = NULL;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) { /* [R, oh, sr, ow, sr, C] */
            Value *idx = imp_bin(im, OP_ADD, imp_bin(im, OP_MUL, imp_bin(im, OP_ADD, base, ys[i]), W), xs[j]);
            Value *w = imp_cvt(im, imp_bin(im, OP_MUL, wy[i], wx[j]), vdt(x));
            Dim **id = idx ? vdims(idx) : NULL, *i5[5] = {NULL};
            if (id)
                for (int k = 0; k < 5; k++)
                    i5[k] = id[k];
            Value *rows = gather_ax(im, OP_GATHER, xr, id ? imp_reshape(im, idx, i5, 5) : NULL, 0);
            Value *t = imp_bin(im, OP_MUL, w, rows);
            acc = acc ? imp_bin(im, avg ? OP_ADD : OP_MAX, acc, t) : t;
        }
    int64_t axes[2] = {2, 4};
    Value *y = imp_reduce(im, acc, avg ? "sum" : "max", axes, 2, false);
    if (avg)
        y = imp_binc(im, OP_DIV, y, (double)(sr * sr));
    return imp_done(im, imp_transpose(im, y, (int64_t[]){0, 3, 1, 2}));
}
