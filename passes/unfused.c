/*
 * unfused.c — the plan without fusion: one group per op.
 *
 * The baseline that fusion is measured against (dcc --no-fuse), and a way
 * to tell a fusion bug from a kernel bug: every op becomes its own kernel,
 * library call or host op, in program order.
 */
#include "passes/passes.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* True if d is s times e, in the canonical form dim_mulc gives (false
 * where that form is not recognised: the op then stays on the host). */
static bool dim_is_times(const Dim *d, const Dim *e, int64_t s)
{
    if (s == 1)
        return d == e;
    switch (e->kind) {
    case DIM_CONST:
        return d->kind == DIM_CONST && d->c == s * e->c;
    case DIM_MUL:
        if (d->kind != DIM_MUL || d->c != s * e->c || d->n != e->n)
            return false;
        for (int i = 0; i < e->n; i++)
            if (d->args[i] != e->args[i])
                return false;
        return true;
    case DIM_ADD:
        if (d->kind != DIM_ADD || d->c != s * e->c || d->n != e->n)
            return false;
        for (int i = 0; i < e->n; i++)
            if (!dim_is_times(d->args[i], e->args[i], s))
                return false;
        return true;
    default:
        return d->kind == DIM_MUL && d->c == s && d->n == 1 && d->args[0] == e;
    }
}

int64_t resize_scale(const Op *op, int a)
{
    const Attr *sc = op_attr(op, "scales");
    const Type *xt = &op->in[0]->type, *t = &op->out[0]->type;
    if (op->kind != OP_RESIZE || a < 0 || a >= xt->rank || t->rank != xt->rank)
        return 0;
    if (sc) { /* given: an integer whose multiple the result dim is */
        double v = sc->kind == ATTR_FLOATS && sc->n == xt->rank ? sc->floats[a] : 0;
        return v >= 1 && v <= 65536 && v == floor(v) && dim_is_times(t->dims[a], xt->dims[a], (int64_t)v)
                   ? (int64_t)v : 0;
    }
    /* sizes given: the scale is result / operand, an integer where the
     * result dim is that multiple of the operand's */
    for (int64_t k = 1; k <= 16; k++)
        if (dim_is_times(t->dims[a], xt->dims[a], k))
            return k;
    return 0;
}

bool resize_is_map(const Op *op)
{
    if (op->kind != OP_RESIZE || strcmp(op_attr_str(op, "mode", ""), "nearest") != 0)
        return false;
    const char *co = op_attr_str(op, "coord", "");
    if (strcmp(co, "asymmetric") && strcmp(co, "half_pixel") && strcmp(co, "pytorch_half_pixel"))
        return false;
    for (int a = 0; a < op->in[0]->type.rank; a++)
        if (!resize_scale(op, a))
            return false;
    return op->in[0]->type.rank == op->out[0]->type.rank;
}

bool resize_is_lerp(const Op *op)
{
    static const char *const coords[] = {"half_pixel", "pytorch_half_pixel", "asymmetric", "align_corners",
                                         "half_pixel_symmetric"};
    if (op->kind != OP_RESIZE || strcmp(op_attr_str(op, "mode", ""), "linear") != 0 ||
        op_attr_int(op, "antialias", 0) != 0 || !dtype_is_float(op->in[0]->type.dtype) ||
        op->in[0]->type.rank != op->out[0]->type.rank)
        return false;
    const char *co = op_attr_str(op, "coord", "");
    bool known = false;
    for (size_t i = 0; i < sizeof coords / sizeof coords[0]; i++)
        known |= !strcmp(co, coords[i]);
    const Attr *sc = op_attr(op, "scales");
    if (!known || (sc && (sc->kind != ATTR_FLOATS || sc->n != op->in[0]->type.rank || !sc->floats)))
        return false;
    int moving = 0;
    for (int a = 0; a < op->in[0]->type.rank; a++) {
        moving += resize_scale(op, a) != 1;
        if (sc && !(sc->floats[a] > 0 && isfinite(sc->floats[a])))
            return false;
    }
    return moving <= RESIZE_LERP_AXES;
}

FuseKind fuse_kind_of(const Op *op)
{
    switch (op_info(op->kind)->cat) {
    case CAT_UNARY:
    case CAT_BINARY:
    case CAT_ELEM:
        return FUSE_LOOP;
    case CAT_CONST:
    case CAT_SHAPE:
        return FUSE_SHAPE;
    case CAT_LIB:
        return FUSE_LIBRARY;
    case CAT_REDUCE:
        return op->kind == OP_REDUCE || op->kind == OP_ARGMAX || op->kind == OP_ARGMIN ? FUSE_INPUT : FUSE_OPAQUE;
    case CAT_MOVE:
        switch (op->kind) {
        case OP_BROADCAST:
        case OP_RESHAPE:
        case OP_TRANSPOSE:
        case OP_SLICE:
        case OP_REVERSE:
        case OP_CONCAT:
        case OP_PAD:
        case OP_IOTA:
        case OP_GATHER:
        case OP_GATHER_ELEMENTS:
            return FUSE_LOOP;
        default:
            return resize_is_map(op) || resize_is_lerp(op) ? FUSE_LOOP : FUSE_OPAQUE;
        }
    default:
        return FUSE_OPAQUE;
    }
}

FusionPlan *fuse_plan_unfused(ShapeInfo *si, Diag *d)
{
    Graph *g = si->g;
    FusionPlan *p = calloc(1, sizeof *p);
    if (!p) {
        diag_oom(d);
        return NULL;
    }
    p->g = g;
    arena_init(&p->arena);
    p->groups = arena_array(&p->arena, (size_t)g->nops + 1, sizeof(Group));
    if (p->groups) /* fields set below, and the rest (over) NULL */
        memset(p->groups, 0, ((size_t)g->nops + 1) * sizeof(Group));
    graph_for_each_op(g, op) {
        Group *grp = &p->groups[p->n];
        grp->id = p->n++;
        FuseKind k = fuse_kind_of(op);
        grp->kind = k != FUSE_SHAPE && hostprog_binds(&si->prog, op) ? FUSE_OPAQUE : k; /* as fuse.c's place */
        grp->ops = arena_array(&p->arena, 1, sizeof(Op *));
        grp->ops[0] = op;
        grp->nops = 1;
        grp->root = op;
        grp->ins = arena_array(&p->arena, (size_t)op->nin + 1, sizeof(Value *));
        for (int i = 0; i < op->nin; i++) {
            bool dup = false;
            for (int j = 0; j < grp->nins; j++)
                dup |= grp->ins[j] == op->in[i];
            if (!dup)
                grp->ins[grp->nins++] = op->in[i];
        }
        grp->outs = arena_array(&p->arena, (size_t)op->nout, sizeof(Value *));
        for (int i = 0; i < op->nout; i++)
            grp->outs[grp->nouts++] = op->out[i];
    }
    return p;
}
