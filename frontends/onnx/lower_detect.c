/*
 * lower_detect.c — the ops of detection models: NonMaxSuppression,
 * lowered to a core `loop`, and RoiAlign (further down).
 *
 * Greedy NMS takes, per batch entry and class, the boxes in decreasing
 * score (ties: the lower index first), and keeps a box unless a box kept
 * before it overlaps it by IoU > iou_threshold, until
 * max_output_boxes_per_class are kept; boxes whose score is not above
 * score_threshold (when given) are never candidates. As core ops:
 *
 *   outside the loop  the ranks (topk over the scores, [B, C, S] box
 *                     indices), whether the candidate of each rank passes
 *                     the score threshold, and each box's corners and
 *                     area;
 *   the loop          over the ranks r (S iterations at most, ending when
 *                     no class can take another box): the candidate of
 *                     rank r of every (b, c) is kept where it is valid,
 *                     no kept box overlaps it (its IoU with every box,
 *                     [B, C, S], computed there: a suppression matrix
 *                     [B, S, S] made before the loop took SSDlite's 27,000
 *                     boxes 5 s a run and 3 GB), and fewer than the
 *                     maximum are kept; carried: keep [B, C, S] over box
 *                     indices and the counts [B, C];
 *   after it          keep in rank order, whose nonzero coordinates (b,
 *                     c, r) come in the output's order (by batch, class,
 *                     then score), and each rank's box index.
 *
 * The IoU follows ONNX's reference (and ONNX Runtime): corners normalised
 * with min and max (center_point_box 0: [y1, x1, y2, x2]; 1: [x_center,
 * y_center, width, height]), and no suppression unless the intersection,
 * both areas and the union are positive. The work is O(B C S^2), as the
 * greedy algorithm's; the count of selected boxes is data-dependent.
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

/* Coordinate k ([B, S, 1]) of the boxes [B, S, 4]. */
static Value *coord(Imp *im, Value *boxes, int k)
{
    return imp_slice1(im, boxes, 2, dc(im, k), dc(im, k + 1), 1);
}

/* Each box's corners along x and y and its area, [B, S, 1]. */
typedef struct Geom {
    Value *lo[2], *hi[2], *area;
} Geom;

static void box_geom(Imp *im, Value *boxes, bool center, Geom *g)
{
    g->area = NULL;
    for (int a = 0; a < 2; a++) {
        if (center) { /* [xc, yc, w, h] */
            Value *c = coord(im, boxes, a), *half = imp_binc(im, OP_MUL, coord(im, boxes, 2 + a), 0.5);
            g->lo[a] = imp_bin(im, OP_SUB, c, half);
            g->hi[a] = imp_bin(im, OP_ADD, c, half);
        } else { /* [y1, x1, y2, x2] */
            Value *p = coord(im, boxes, 1 - a), *q = coord(im, boxes, 3 - a);
            g->lo[a] = imp_bin(im, OP_MIN, p, q);
            g->hi[a] = imp_bin(im, OP_MAX, p, q);
        }
        Value *side = imp_bin(im, OP_SUB, g->hi[a], g->lo[a]);
        g->area = g->area ? imp_bin(im, OP_MUL, g->area, side) : side;
    }
}

/* Whether box i suppresses box j, for i and j of shapes that broadcast:
 * IoU(i, j) > thr, with the intersection, both areas and the union
 * positive. */
static Value *suppresses(Imp *im, const Geom *i, const Geom *j, Value *thr)
{
    Value *zero = imp_scalar(im, vdt(i->area), 0), *ok = NULL, *inter = NULL;
    for (int a = 0; a < 2; a++) {
        Value *l = imp_bin(im, OP_MAX, i->lo[a], j->lo[a]), *h = imp_bin(im, OP_MIN, i->hi[a], j->hi[a]);
        Value *gt = imp_cmp(im, "gt", h, l), *len = imp_bin(im, OP_SUB, h, l);
        ok = ok ? imp_bin(im, OP_AND, ok, gt) : gt;
        inter = inter ? imp_bin(im, OP_MUL, inter, len) : len;
    }
    Value *uni = imp_bin(im, OP_SUB, imp_bin(im, OP_ADD, i->area, j->area), inter);
    ok = imp_bin(im, OP_AND, ok, imp_cmp(im, "gt", inter, zero));
    ok = imp_bin(im, OP_AND, ok,
                 imp_bin(im, OP_AND, imp_cmp(im, "gt", i->area, zero), imp_cmp(im, "gt", j->area, zero)));
    ok = imp_bin(im, OP_AND, ok, imp_cmp(im, "gt", uni, zero));
    return imp_bin(im, OP_AND, ok, imp_cmp(im, "gt", imp_bin(im, OP_DIV, inter, uni), imp_cvt(im, thr, vdt(i->area))));
}

/* any(x) along axis of a bool tensor */
static Value *any_last(Imp *im, Value *x, int64_t axis)
{
    Value *m = imp_reduce(im, imp_cvt(im, x, DT_I32), "max", &axis, 1, false);
    return imp_cmp(im, "ne", m, imp_scalar(im, DT_I32, 0));
}

/* any(x) over every axis of a bool [B, C]: bool[] */
static Value *any_all(Imp *im, Value *x)
{
    int64_t axes[2] = {0, 1};
    Value *m = imp_reduce(im, imp_cvt(im, x, DT_I32), "max", axes, 2, false);
    return imp_cmp(im, "ne", m, imp_scalar(im, DT_I32, 0));
}

typedef struct Nms {
    Value *order;   /* [B, C, S] i64: box index of each rank */
    Value *valid;   /* [B, C, S] bool: rank passes the score threshold */
    Geom box;       /* [B, S, 1] each */
    Value *iou;     /* f64[] */
    Value *maxout;  /* i64[] */
    Value *keep0;   /* [B, C, S] bool, false */
    Value *count0;  /* [B, C] i64, 0 */
    Value *slen;    /* i64[]: S */
} Nms;

/* The body: (r, cond, keep, count, captures) -> (cond', keep', count'). */
static bool nms_body(Imp *im, Imp *s, const Nms *n)
{
    Type ti = type_make(&im->g->arena, DT_I64, 0, NULL), tc = type_make(&im->g->arena, DT_BOOL, 0, NULL);
    Value *r = imp_sub_input(s, &ti, NULL, NULL), *cond = imp_sub_input(s, &tc, NULL, NULL);
    Value *keep = imp_sub_input(s, &n->keep0->type, NULL, NULL);
    Value *count = imp_sub_input(s, &n->count0->type, NULL, NULL);
    if (!r || !cond || !keep || !count)
        return false;
    Value *order = imp_sub_capture(s, n->order), *valid = imp_sub_capture(s, n->valid);
    Value *maxout = imp_sub_capture(s, n->maxout), *slen = imp_sub_capture(s, n->slen);
    Value *iou = imp_sub_capture(s, n->iou);
    Geom all, one; /* every box, [B, 1, S]; the candidate of each (b, c), [B, C, 1] */
    Value *geom[5] = {n->box.lo[0], n->box.lo[1], n->box.hi[0], n->box.hi[1], n->box.area};
    for (int i = 0; i < 5; i++)
        if (!(geom[i] = imp_sub_capture(s, geom[i])))
            return false;
    if (!order || !valid || !maxout || !slen || !iou)
        return false;
    Dim **kd = vdims(keep); /* B, C, S */
    Dim *c1[3] = {kd[0], kd[1], dim_const(&s->g->dims, 1)};
    Value *cand = imp_reshape(s, gather_ax(s, OP_GATHER, order, r, 2), c1, 3);
    Value *cand2 = imp_reshape(s, cand, kd, 2);
    Value **ga[5] = {&all.lo[0], &all.lo[1], &all.hi[0], &all.hi[1], &all.area};
    Value **go[5] = {&one.lo[0], &one.lo[1], &one.hi[0], &one.hi[1], &one.area};
    for (int i = 0; i < 5; i++) { /* [B, S, 1] as [B, 1, S] and at the candidates */
        Dim **gd = vdims(geom[i]), *bs[2] = {gd[0], gd[1]}, *b1s[3] = {gd[0], gd[2], gd[1]};
        Value *flat = imp_reshape(s, geom[i], bs, 2);
        *ga[i] = imp_reshape(s, geom[i], b1s, 3);
        *go[i] = imp_reshape(s, gather_ax(s, OP_GATHER_ELEMENTS, flat, cand2, 1), c1, 3);
    }
    /* the candidate's row, [B, C, S]: whether it suppresses box j */
    Value *row = suppresses(s, &one, &all, iou);
    Value *hit = any_last(s, imp_bin(s, OP_AND, row, keep), 2);
    Value *left = imp_cmp(s, "lt", count, maxout);
    Value *take = imp_bin(s, OP_AND, imp_bin(s, OP_AND, gather_ax(s, OP_GATHER, valid, r, 2), imp_un(s, OP_NOT, hit)),
                          left);
    Value *at = imp_cmp(s, "eq", build_iota(s->g, DT_I64, kd, 3, 2), cand);
    Value *keep2 = imp_bin(s, OP_OR, keep, imp_bin(s, OP_AND, at, imp_reshape(s, take, c1, 3)));
    Value *count2 = imp_bin(s, OP_ADD, count, imp_cvt(s, take, DT_I64));
    /* go on while some class may take the next rank's candidate */
    Value *next = imp_binc(s, OP_ADD, r, 1);
    Value *more = imp_cmp(s, "lt", next, slen);
    Value *nv = gather_ax(s, OP_GATHER, valid, imp_bin(s, OP_MIN, next, imp_binc(s, OP_SUB, slen, 1)), 2);
    Value *c2 = imp_bin(s, OP_AND, more, any_all(s, imp_bin(s, OP_AND, nv, imp_cmp(s, "lt", count2, maxout))));
    if (!keep2 || !count2 || !c2)
        return im->d->set ? false : imp_fail(s);
    return (graph_add_output(s->g, c2) && graph_add_output(s->g, keep2) && graph_add_output(s->g, count2)) ||
           imp_oom(s);
}

bool onnx_lower_nms(Imp *im)
{
    Value *boxes = imp_need(im, 0), *scores = imp_need(im, 1), *maxout, *iou, *sthr = NULL;
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
    boxes = imp_reshape(im, boxes, (Dim *[]){vdims(boxes)[0], vdims(boxes)[1], dc(im, 4)}, 3);
    scores = boxes ? imp_reshape(im, scores, (Dim *[]){vdims(boxes)[0], vdims(scores)[1], vdims(boxes)[1]}, 3) : NULL;
    if (!boxes || !scores)
        return imp_fail(im);
    if (!dtype_is_float(vdt(boxes)) || !dtype_is_float(vdt(scores)))
        return imp_err(im, "boxes and scores must be floating point");
    if (center != 0 && center != 1)
        return imp_err(im, "center_point_box must be 0 or 1");
    DType dt = vdt(scores);
    if (!nms_scalar(im, 2, DT_I64, 0, &maxout) || !nms_scalar(im, 3, DT_F64, 0, &iou) ||
        (IN(4) && !nms_scalar(im, 4, dt, 0, &sthr)))
        return false;
    Dim **bd = vdims(boxes), **sd = vdims(scores);
    Dim *B = bd[0], *S = bd[1], *C = sd[1];
    /* ranks: topk over all S boxes */
    Value *slen = build_dim(im->g, boxes, 1), *k = imp_reshape(im, slen, (Dim *[]){dc(im, 1)}, 1);
    AttrList l = {0};
    attrs_add_int(im->g, &l, "axis", 2);
    attrs_add_int(im->g, &l, "largest", 1);
    attrs_add_int(im->g, &l, "sorted", 1);
    Op *tk = k ? build_op(im->g, OP_TOPK, (Value *[]){scores, k}, 2, l.v, l.n) : NULL;
    if (!tk)
        return imp_fail(im);
    Dim *bcs[3] = {B, C, S};
    Nms n = {0};
    /* the topk's result dim on the axis is data-dependent: S by construction */
    n.order = imp_reshape(im, tk->out[1], bcs, 3);
    Value *sorted = imp_reshape(im, tk->out[0], bcs, 3);
    n.valid = sthr ? imp_cmp(im, "gt", sorted, sthr)
                   : imp_broadcast_to(im, imp_scalar(im, DT_BOOL, 1), bcs, 3);
    box_geom(im, boxes, center != 0, &n.box);
    n.iou = iou;
    n.maxout = maxout;
    n.keep0 = imp_broadcast_to(im, imp_scalar(im, DT_BOOL, 0), bcs, 3);
    n.count0 = imp_broadcast_to(im, imp_scalar(im, DT_I64, 0), bcs, 2);
    n.slen = slen;
    if (!n.order || !n.valid || !n.box.lo[0] || !n.box.lo[1] || !n.box.hi[0] || !n.box.hi[1] || !n.box.area ||
        !n.keep0 || !n.count0)
        return imp_fail(im);
    Imp sub;
    if (!imp_sub_begin(im, &sub, "nms"))
        return false;
    if (!nms_body(im, &sub, &n)) {
        imp_sub_end(&sub, false);
        free(sub.caps);
        free(sub.capin);
        return false;
    }
    Graph *body = imp_sub_end(&sub, true);
    int nops = 4 + sub.ncaps;
    Value **ops = calloc((size_t)nops, sizeof *ops);
    if (!ops) {
        graph_free(body);
        free(sub.caps);
        free(sub.capin);
        return imp_oom(im);
    }
    ops[0] = slen;
    /* no iteration unless some class may take a box */
    ops[1] = imp_cmp(im, "gt", maxout, imp_scalar(im, DT_I64, 0));
    ops[2] = n.keep0;
    ops[3] = n.count0;
    memcpy(ops + 4, sub.caps, (size_t)sub.ncaps * sizeof *ops);
    free(sub.caps);
    free(sub.capin);
    AttrList ll = {0};
    attrs_add_int(im->g, &ll, "ncarried", 2);
    Op *loop = ops[1] ? build_region_op(im->g, OP_LOOP, ops, nops, ll.v, ll.n, &body, 1) : NULL;
    free(ops);
    if (!loop)
        return imp_fail(im);
    /* keep in rank order; its nonzero (b, c, r) in the output's order */
    Value *ks = gather_ax(im, OP_GATHER_ELEMENTS, loop->out[0], n.order, 2);
    Op *nz = ks ? build_op(im->g, OP_NONZERO, &ks, 1, NULL, 0) : NULL;
    if (!nz)
        return imp_fail(im);
    Value *co = imp_transpose(im, nz->out[0], (int64_t[]){1, 0}); /* [M, 3] */
    AttrList lg = {0};
    attrs_add_int(im->g, &lg, "batch_dims", 0);
    Op *box = co ? build_op(im->g, OP_GATHER_ND, (Value *[]){n.order, co}, 2, lg.v, lg.n) : NULL;
    if (!box)
        return imp_fail(im);
    Dim *m1[2] = {vdims(co)[0], dc(im, 1)};
    Value *parts[2] = {imp_slice1(im, co, 1, dc(im, 0), dc(im, 2), 1), imp_reshape(im, box->out[0], m1, 2)};
    return imp_done(im, parts[0] && parts[1] ? build_concat(im->g, parts, 2, 1) : NULL);
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
 * [R, o, sr] tensors, and the four taps are gathers from X flattened at
 * ((b C + c) H + y) W + x over [R, C, oh, sr, ow, sr]. sampling_ratio 0
 * (a grid that depends on each roi's size) is refused as unsupported. */

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

/* v [R, o, sr] as [R, 1, o, sr, 1, 1] (y) or [R, 1, 1, 1, o, sr] (x) */
static Value *roi_spread(Imp *im, Value *v, bool y)
{
    if (!v)
        return NULL;
    Dim **d = vdims(v), *one = dc(im, 1);
    Dim *yd[6] = {d[0], one, d[1], d[2], one, one}, *xd[6] = {d[0], one, one, one, d[1], d[2]};
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
    /* flat positions: ((b C + c) H + y) W + x */
    Dim **xd = vdims(x), *n = dim_mul(CX, dim_mul(CX, xd[0], xd[1]), dim_mul(CX, xd[2], xd[3]));
    Value *xf = imp_reshape(im, x, &n, 1);
    Value *H = build_dim(im->g, x, 2), *W = build_dim(im->g, x, 3);
    Dim *one = dc(im, 1), *bd[6] = {R, one, one, one, one, one}, *cd[6] = {one, xd[1], one, one, one, one};
    Value *base = imp_bin(im, OP_ADD, imp_bin(im, OP_MUL, imp_reshape(im, imp_cvt(im, bi, DT_I64), bd, 6),
                                       build_dim(im->g, x, 1)),
                   build_iota(im->g, DT_I64, cd, 6, 1));
    base = imp_bin(im, OP_MUL, imp_bin(im, OP_MUL, base, H), W);
    Value *ys[2] = {roi_spread(im, ay.lo, true), roi_spread(im, ay.hi, true)};
    Value *xs[2] = {roi_spread(im, ax.lo, false), roi_spread(im, ax.hi, false)};
    Value *wy[2] = {roi_spread(im, ay.wl, true), roi_spread(im, ay.wh, true)};
    Value *wx[2] = {roi_spread(im, ax.wl, false), roi_spread(im, ax.wh, false)};
    Value *acc = NULL;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            Value *idx = imp_bin(im, OP_ADD, base, imp_bin(im, OP_ADD, imp_bin(im, OP_MUL, ys[i], W), xs[j]));
            Value *w = imp_cvt(im, imp_bin(im, OP_MUL, wy[i], wx[j]), vdt(x));
            Value *t = imp_bin(im, OP_MUL, w, gather_ax(im, OP_GATHER, xf, idx, 0));
            acc = acc ? imp_bin(im, avg ? OP_ADD : OP_MAX, acc, t) : t;
        }
    int64_t axes[2] = {3, 5};
    Value *y = imp_reduce(im, acc, avg ? "sum" : "max", axes, 2, false);
    if (avg)
        y = imp_binc(im, OP_DIV, y, (double)(sr * sr));
    return imp_done(im, y);
}
