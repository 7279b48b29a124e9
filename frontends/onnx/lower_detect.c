/*
 * lower_detect.c — NonMaxSuppression, lowered to a core `loop`.
 *
 * Greedy NMS takes, per batch entry and class, the boxes in decreasing
 * score (ties: the lower index first), and keeps a box unless a box kept
 * before it overlaps it by IoU > iou_threshold, until
 * max_output_boxes_per_class are kept; boxes whose score is not above
 * score_threshold (when given) are never candidates. As core ops:
 *
 *   outside the loop  the ranks (topk over the scores, [B, C, S] box
 *                     indices), whether the candidate of each rank passes
 *                     the score threshold, and the suppression matrix
 *                     sup[b, i, j] = IoU(box i, box j) > threshold over
 *                     the boxes of each batch entry ([B, S, S], shared by
 *                     every class);
 *   the loop          over the ranks r (S iterations at most, ending when
 *                     no class can take another box): the candidate of
 *                     rank r of every (b, c) is kept where it is valid,
 *                     its row of sup meets no kept box, and fewer than the
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

/* sup [B, S, S]: box i suppresses box j. */
static Value *suppression(Imp *im, Value *boxes, bool center, Value *thr)
{
    Value *lo[2], *hi[2]; /* per axis (x, y): [B, S, 1] */
    for (int a = 0; a < 2; a++) {
        if (center) { /* [xc, yc, w, h] */
            Value *c = coord(im, boxes, a), *half = imp_binc(im, OP_MUL, coord(im, boxes, 2 + a), 0.5);
            lo[a] = imp_bin(im, OP_SUB, c, half);
            hi[a] = imp_bin(im, OP_ADD, c, half);
        } else { /* [y1, x1, y2, x2] */
            Value *p = coord(im, boxes, 1 - a), *q = coord(im, boxes, 3 - a);
            lo[a] = imp_bin(im, OP_MIN, p, q);
            hi[a] = imp_bin(im, OP_MAX, p, q);
        }
    }
    int64_t perm[3] = {0, 2, 1};
    Value *zero = imp_scalar(im, vdt(boxes), 0), *ok = NULL, *inter = NULL, *area = NULL;
    for (int a = 0; a < 2; a++) { /* [B, S, 1] against [B, 1, S] */
        Value *l = imp_bin(im, OP_MAX, lo[a], imp_transpose(im, lo[a], perm));
        Value *h = imp_bin(im, OP_MIN, hi[a], imp_transpose(im, hi[a], perm));
        Value *gt = imp_cmp(im, "gt", h, l), *len = imp_bin(im, OP_SUB, h, l);
        Value *side = imp_bin(im, OP_SUB, hi[a], lo[a]);
        ok = ok ? imp_bin(im, OP_AND, ok, gt) : gt;
        inter = inter ? imp_bin(im, OP_MUL, inter, len) : len;
        area = area ? imp_bin(im, OP_MUL, area, side) : side;
    }
    Value *area_t = imp_transpose(im, area, perm);
    Value *uni = imp_bin(im, OP_SUB, imp_bin(im, OP_ADD, area, area_t), inter);
    ok = imp_bin(im, OP_AND, ok, imp_cmp(im, "gt", inter, zero));
    ok = imp_bin(im, OP_AND, ok, imp_bin(im, OP_AND, imp_cmp(im, "gt", area, zero), imp_cmp(im, "gt", area_t, zero)));
    ok = imp_bin(im, OP_AND, ok, imp_cmp(im, "gt", uni, zero));
    return imp_bin(im, OP_AND, ok, imp_cmp(im, "gt", imp_bin(im, OP_DIV, inter, uni), imp_cvt(im, thr, vdt(boxes))));
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
    Value *sup;     /* [B, S, S] bool */
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
    Value *sup = imp_sub_capture(s, n->sup), *maxout = imp_sub_capture(s, n->maxout);
    Value *slen = imp_sub_capture(s, n->slen);
    if (!order || !valid || !sup || !maxout || !slen)
        return false;
    Dim **kd = vdims(keep); /* B, C, S */
    Dim *c1[3] = {kd[0], kd[1], dim_const(&s->g->dims, 1)};
    Value *cand = imp_reshape(s, gather_ax(s, OP_GATHER, order, r, 2), c1, 3);
    /* the candidate's row of sup, [B, C, S]: sup[b, cand[b, c], j] */
    Value *row = gather_ax(s, OP_GATHER_ELEMENTS, sup, imp_broadcast_to(s, cand, kd, 3), 1);
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
    if (vrank(boxes) != 3 || !dim_is(vdims(boxes)[2], 4) || vrank(scores) != 3)
        return imp_err(im, "needs boxes [B, S, 4] and scores [B, C, S]");
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
    n.sup = suppression(im, boxes, center != 0, iou);
    n.maxout = maxout;
    n.keep0 = imp_broadcast_to(im, imp_scalar(im, DT_BOOL, 0), bcs, 3);
    n.count0 = imp_broadcast_to(im, imp_scalar(im, DT_I64, 0), bcs, 2);
    n.slen = slen;
    if (!n.order || !n.valid || !n.sup || !n.keep0 || !n.count0)
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
