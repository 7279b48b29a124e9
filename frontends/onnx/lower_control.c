/*
 * lower_control.c — ONNX control flow: Loop, If and Scan, lowered to the
 * core `loop` and `if` ops (doc/ops.md, "Control flow").
 *
 * Each ONNX subgraph becomes a region (import.c, "Subgraphs as regions"):
 * its nodes are lowered like the main graph's, and a name it takes from an
 * enclosing graph is captured as an extra operand of the op (a constant is
 * copied in instead). A loop body's carried inputs first get the operands'
 * dims; where the body gives back another dim, the body is imported again
 * with a fresh symbol on that axis, until the dims settle (loop_body).
 *
 * Scan becomes a loop over the scan axis: the scan inputs are moved to the
 * front (transpose) and reversed where their direction is reverse, passed
 * whole to the body, which takes its iteration's slice with a gather; the
 * stacked outputs are reversed and moved to their axes afterwards.
 */
#include "frontends/onnx/internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const Onnx__GraphProto *graph_attr(Imp *im, const char *name)
{
    const OAttr *a = attr_find(im, name);
    if (!a || !a->g) {
        imp_err(im, "attribute '%s' (a graph) is required", name);
        return NULL;
    }
    return a->g;
}

static void sub_free_caps(Imp *sub)
{
    free(sub->caps);
    free(sub->capin);
    sub->caps = sub->capin = NULL;
    sub->ncaps = sub->capcaps = 0;
}

/* v as a scalar of dtype dt (ONNX allows a one-element tensor). */
static Value *scalar_of(Imp *im, Value *v, DType dt, const char *what)
{
    if (!v)
        return NULL;
    for (int i = 0; i < vrank(v); i++)
        if (!dim_is(vdims(v)[i], 1)) {
            imp_err(im, "%s must have one element", what);
            return NULL;
        }
    return imp_cvt(im, imp_reshape(im, v, NULL, 0), dt);
}

/* Builds the body into sub: inputs (iteration, condition, the carried
 * values with fresh dims where fresh says, then any others), ops and
 * outputs (condition, carried, stacked). */
typedef bool BodyFn(Imp *im, Imp *sub, bool (*fresh)[MAX_RANK], void *ctx);

static Graph *loop_body(Imp *im, Imp *sub, int nc, BodyFn *fn, void *ctx)
{
    bool (*fresh)[MAX_RANK] = calloc((size_t)nc + 1, sizeof *fresh);
    if (!fresh) {
        imp_oom(im);
        return NULL;
    }
    for (int round = 0; round <= nc * MAX_RANK; round++) {
        if (!imp_sub_begin(im, sub, "body"))
            break;
        bool ok = fn(im, sub, fresh, ctx), changed = false;
        Graph *b = sub->g;
        if (ok && (b->ninputs < 2 + nc || b->noutputs < 1 + nc))
            ok = imp_err(im, "the body has %d inputs and %d outputs, too few for %d carried values", b->ninputs,
                         b->noutputs, nc);
        for (int k = 0; ok && k < nc; k++) {
            const Type *in = &b->inputs[2 + k]->type, *out = &b->outputs[1 + k]->type;
            if (in->dtype != out->dtype || in->rank != out->rank) {
                ok = imp_err(im, "loop-carried value %d enters the body as %s of rank %d but leaves it as %s of rank %d",
                             k, dtype_name(in->dtype), in->rank, dtype_name(out->dtype), out->rank);
                break;
            }
            for (int j = 0; j < in->rank; j++)
                if (in->dims[j] != out->dims[j] && !fresh[k][j])
                    fresh[k][j] = changed = true;
        }
        if (ok && !changed) {
            free(fresh);
            return imp_sub_end(sub, true);
        }
        imp_sub_end(sub, false);
        sub_free_caps(sub);
        if (!ok)
            break;
    }
    free(fresh);
    if (!im->d->set)
        imp_err(im, "the shapes of the loop-carried values do not settle");
    return NULL;
}

/* The loop op over body (taken), with operands trip, cond, carried[nc],
 * inv[ninv] and the body's captures; NULL after a message. */
static Op *make_loop(Imp *im, Imp *sub, Graph *body, Value *trip, Value *cond, Value **carried, int nc,
                     Value **inv, int ninv)
{
    int n = 2 + nc + ninv + sub->ncaps;
    Value **ops = calloc((size_t)n, sizeof *ops);
    if (!ops) {
        graph_free(body);
        sub_free_caps(sub);
        imp_oom(im);
        return NULL;
    }
    ops[0] = trip;
    ops[1] = cond;
    memcpy(ops + 2, carried, (size_t)nc * sizeof *ops);
    if (ninv)
        memcpy(ops + 2 + nc, inv, (size_t)ninv * sizeof *ops);
    if (sub->ncaps)
        memcpy(ops + 2 + nc + ninv, sub->caps, (size_t)sub->ncaps * sizeof *ops);
    sub_free_caps(sub);
    AttrList l = {0};
    attrs_add_int(im->g, &l, "ncarried", nc);
    Op *op = build_region_op(im->g, OP_LOOP, ops, n, l.v, l.n, &body, 1);
    free(ops);
    if (!op)
        imp_fail(im);
    return op;
}

/* ---- Loop ---------------------------------------------------------------- */

typedef struct LoopCtx {
    const Onnx__GraphProto *gp;
    Value **carried;
    int nc;
} LoopCtx;

static const char *in_name(const Onnx__GraphProto *gp, size_t i)
{
    return i < gp->n_input && gp->input[i]->name && *gp->input[i]->name ? gp->input[i]->name : NULL;
}

static bool loop_fn(Imp *im, Imp *sub, bool (*fresh)[MAX_RANK], void *ctx)
{
    LoopCtx *c = ctx;
    const Onnx__GraphProto *gp = c->gp;
    if (gp->n_input != (size_t)(2 + c->nc))
        return imp_err(im, "the body takes %zu inputs, expected %d (iteration, condition, %d carried)", gp->n_input,
                       2 + c->nc, c->nc);
    if (gp->n_output < (size_t)(1 + c->nc))
        return imp_err(im, "the body returns %zu outputs, expected at least %d", gp->n_output, 1 + c->nc);
    Type ti = type_make(&im->g->arena, DT_I64, 0, NULL), tc = type_make(&im->g->arena, DT_BOOL, 0, NULL);
    if (!imp_sub_input(sub, &ti, NULL, in_name(gp, 0)) || !imp_sub_input(sub, &tc, NULL, in_name(gp, 1)))
        return false;
    for (int k = 0; k < c->nc; k++)
        if (!imp_sub_input(sub, &c->carried[k]->type, fresh[k], in_name(gp, (size_t)(2 + k))))
            return false;
    Value **outs = calloc(gp->n_output + 1, sizeof *outs);
    if (!outs)
        return imp_oom(im);
    bool ok = imp_sub_lower(sub, gp, outs);
    if (ok) /* the body's condition as bool[] */
        ok = (outs[0] = scalar_of(sub, outs[0], DT_BOOL, "the body's condition")) != NULL || imp_fail(sub);
    for (size_t i = 0; ok && i < gp->n_output; i++)
        if (!graph_add_output(sub->g, outs[i]))
            ok = imp_oom(sub);
    free(outs);
    return ok;
}

bool onnx_lower_loop(Imp *im)
{
    const Onnx__GraphProto *gp = graph_attr(im, "body");
    if (!gp)
        return false;
    int nc = (int)im->node->n_input - 2;
    if (nc < 0)
        return imp_err(im, "Loop takes at least 2 inputs (M and cond, either may be empty)");
    Value **carried = im->in + 2;
    for (int k = 0; k < nc; k++)
        if (!imp_need(im, 2 + k))
            return false;
    int64_t big = INT64_MAX; /* no trip count: as many as INT64_MAX */
    Value *trip = IN(0) ? scalar_of(im, IN(0), DT_I64, "M")
                        : build_const(im->g, type_make(&im->g->arena, DT_I64, 0, NULL), &big, 8, true);
    Value *cond = IN(1) ? scalar_of(im, IN(1), DT_BOOL, "cond") : imp_scalar(im, DT_BOOL, 1);
    if (!trip || !cond)
        return im->d->set ? false : imp_fail(im);
    LoopCtx c = {gp, carried, nc};
    Imp sub;
    Graph *body = loop_body(im, &sub, nc, loop_fn, &c);
    if (!body)
        return false;
    int nscan = body->noutputs - 1 - nc;
    if (im->nout > nc + nscan) {
        graph_free(body);
        sub_free_caps(&sub);
        return imp_err(im, "Loop has %d outputs, but its body gives %d carried and %d scan outputs", im->nout, nc,
                       nscan);
    }
    Op *op = make_loop(im, &sub, body, trip, cond, carried, nc, NULL, 0);
    if (!op)
        return false;
    for (int i = 0; i < im->nout; i++)
        im->out[i] = op->out[i];
    return true;
}

/* ---- If ------------------------------------------------------------------ */

static Graph *branch(Imp *im, Imp *sub, const char *name)
{
    const Onnx__GraphProto *gp = graph_attr(im, name);
    if (!gp || !imp_sub_begin(im, sub, name))
        return NULL;
    if (gp->n_input)
        imp_err(im, "%s takes %zu inputs, expected none", name, gp->n_input);
    Value **outs = calloc(gp->n_output + 1, sizeof *outs);
    bool ok = !gp->n_input && (outs || imp_oom(im)) && imp_sub_lower(sub, gp, outs);
    if (ok && gp->n_output != (size_t)im->nout)
        ok = imp_err(im, "%s returns %zu values, but the node has %d outputs", name, gp->n_output, im->nout);
    for (size_t i = 0; ok && i < gp->n_output; i++)
        if (!graph_add_output(sub->g, outs[i]))
            ok = imp_oom(sub);
    free(outs);
    if (!ok) {
        imp_sub_end(sub, false);
        sub_free_caps(sub);
        return NULL;
    }
    return sub->g;
}

bool onnx_lower_if(Imp *im)
{
    Value *cond = scalar_of(im, imp_need(im, 0), DT_BOOL, "cond");
    if (!cond)
        return im->d->set ? false : imp_fail(im);
    double known;
    if (imp_const_scalar(im, cond, &known)) { /* a constant condition: the branch it picks, inline */
        const char *name = known != 0 ? "then_branch" : "else_branch";
        const Onnx__GraphProto *gp = graph_attr(im, name);
        if (!gp)
            return false;
        if (gp->n_output != (size_t)im->nout)
            return imp_err(im, "%s returns %zu values, but the node has %d outputs", name, gp->n_output, im->nout);
        return imp_inline(im, gp, name, im->out);
    }
    Imp st, se;
    Graph *then = branch(im, &st, "then_branch");
    if (!then)
        return false;
    Graph *els = branch(im, &se, "else_branch");
    if (!els) {
        imp_sub_end(&st, false);
        sub_free_caps(&st);
        return false;
    }
    /* Both branches take the union of what either captured, in then's
     * order: then captures else's values too, else then's. */
    bool ok = true;
    for (int i = 0; ok && i < se.ncaps; i++)
        ok = imp_sub_capture(&st, se.caps[i]) != NULL;
    for (int i = 0; ok && i < st.ncaps; i++)
        ok = imp_sub_capture(&se, st.caps[i]) != NULL;
    ok = ok && st.ncaps == se.ncaps && st.ncaps == then->ninputs && se.ncaps == els->ninputs;
    for (int i = 0; ok && i < st.ncaps; i++) {
        int j = 0;
        while (j < se.ncaps && se.caps[j] != st.caps[i])
            j++;
        ok = j < se.ncaps;
        if (ok)
            els->inputs[i] = se.capin[j];
    }
    Value **ops = ok ? calloc((size_t)st.ncaps + 1, sizeof *ops) : NULL;
    if (ok && ops) {
        ops[0] = cond;
        if (st.ncaps)
            memcpy(ops + 1, st.caps, (size_t)st.ncaps * sizeof *ops);
    }
    int nops = 1 + st.ncaps;
    imp_sub_end(&st, true);
    imp_sub_end(&se, true);
    sub_free_caps(&st);
    sub_free_caps(&se);
    if (!ops) {
        graph_free(then);
        graph_free(els);
        return im->d->set ? false : imp_oom(im);
    }
    for (int k = 0; k < then->noutputs && k < els->noutputs; k++) {
        const Type *a = &then->outputs[k]->type, *b = &els->outputs[k]->type;
        if (a->rank != b->rank || a->dtype != b->dtype) {
            imp_errk(im, DIAG_UNSUPPORTED,
                     "output %d is %s of rank %d in then_branch but %s of rank %d in else_branch: a dtype or rank "
                     "that depends on the condition is not supported", k, dtype_name(a->dtype), a->rank,
                     dtype_name(b->dtype), b->rank);
            graph_free(then);
            graph_free(els);
            free(ops);
            return false;
        }
    }
    Graph *regions[2] = {then, els};
    Op *op = build_region_op(im->g, OP_IF, ops, nops, NULL, 0, regions, 2);
    free(ops);
    if (!op)
        return imp_fail(im);
    for (int i = 0; i < im->nout; i++)
        im->out[i] = op->out[i];
    return true;
}

/* ---- Scan ---------------------------------------------------------------- */

typedef struct ScanCtx {
    const Onnx__GraphProto *gp;
    Value **states;   /* N */
    int ns;
    Value **xs;       /* M scan inputs, scan axis first, in iteration order */
    int nx;
} ScanCtx;

static bool scan_fn(Imp *im, Imp *sub, bool (*fresh)[MAX_RANK], void *ctx)
{
    ScanCtx *c = ctx;
    const Onnx__GraphProto *gp = c->gp;
    if (gp->n_input != (size_t)(c->ns + c->nx))
        return imp_err(im, "the body takes %zu inputs, expected %d (%d states, %d scan inputs)", gp->n_input,
                       c->ns + c->nx, c->ns, c->nx);
    if (gp->n_output < (size_t)c->ns)
        return imp_err(im, "the body returns %zu outputs, fewer than its %d states", gp->n_output, c->ns);
    Type ti = type_make(&im->g->arena, DT_I64, 0, NULL), tc = type_make(&im->g->arena, DT_BOOL, 0, NULL);
    Value *i = imp_sub_input(sub, &ti, NULL, NULL), *cnd = imp_sub_input(sub, &tc, NULL, NULL);
    if (!i || !cnd)
        return false;
    for (int k = 0; k < c->ns; k++)
        if (!imp_sub_input(sub, &c->states[k]->type, fresh[k], in_name(gp, (size_t)k)))
            return false;
    for (int j = 0; j < c->nx; j++) {
        Value *x = imp_sub_input(sub, &c->xs[j]->type, NULL, NULL);
        if (!x)
            return false;
        AttrList l = {0};
        attrs_add_int(sub->g, &l, "axis", 0);
        Op *g = build_op(sub->g, OP_GATHER, (Value *[]){x, i}, 2, l.v, l.n);
        if (!g)
            return imp_fail(sub);
        const char *name = in_name(gp, (size_t)(c->ns + j));
        if (name && !imp_bind(sub, name, g->out[0]))
            return imp_oom(sub);
    }
    Value **outs = calloc(gp->n_output + 1, sizeof *outs);
    if (!outs)
        return imp_oom(im);
    bool ok = imp_sub_lower(sub, gp, outs) && graph_add_output(sub->g, cnd);
    for (size_t k = 0; ok && k < gp->n_output; k++)
        if (!graph_add_output(sub->g, outs[k]))
            ok = imp_oom(sub);
    free(outs);
    return ok;
}

/* The i-th entry of an optional ints attribute, or 0. */
static int64_t nth(const int64_t *v, int n, int i) { return v && i < n ? v[i] : 0; }

bool onnx_lower_scan(Imp *im)
{
    const Onnx__GraphProto *gp = graph_attr(im, "body");
    int64_t m, *in_axes, *in_dirs, *out_axes, *out_dirs;
    int nia, nid, noa, nod;
    if (!gp || !attr_int(im, "num_scan_inputs", -1, &m) || !attr_ints(im, "scan_input_axes", &in_axes, &nia) ||
        !attr_ints(im, "scan_input_directions", &in_dirs, &nid) ||
        !attr_ints(im, "scan_output_axes", &out_axes, &noa) ||
        !attr_ints(im, "scan_output_directions", &out_dirs, &nod))
        return false;
    int nin = (int)im->node->n_input;
    if (m < 1 || m > nin)
        return imp_err(im, "num_scan_inputs is %lld, expected 1 to %d", (long long)m, nin);
    int ns = nin - (int)m, nx = (int)m;
    if ((nia >= 0 && nia != nx) || (nid >= 0 && nid != nx))
        return imp_err(im, "scan_input_axes and scan_input_directions need one entry per scan input (%d)", nx);
    Value *xs[ONNX_MAX_IO];
    for (int j = 0; j < nx; j++) {
        Value *x = imp_need(im, ns + j);
        if (!x)
            return false;
        int64_t ax;
        if (!imp_axis(im, nth(in_axes, nia, j), vrank(x), &ax))
            return false;
        int64_t perm[MAX_RANK];
        perm[0] = ax;
        for (int a = 0, k = 1; a < vrank(x); a++)
            if (a != ax)
                perm[k++] = a;
        x = imp_transpose(im, x, perm);
        if (x && nth(in_dirs, nid, j)) {
            AttrList l = {0};
            attrs_add_ints(im->g, &l, "axes", (int64_t[]){0}, 1);
            Op *r = build_op(im->g, OP_REVERSE, &x, 1, l.v, l.n);
            x = r ? r->out[0] : NULL;
        }
        if (x && j > 0 && vdims(x)[0] != vdims(xs[0])[0]) { /* as long as the first: checked on entry */
            Dim *dims[MAX_RANK];
            memcpy(dims, vdims(x), (size_t)vrank(x) * sizeof *dims);
            dims[0] = vdims(xs[0])[0];
            x = imp_reshape(im, x, dims, vrank(x));
        }
        if (!(xs[j] = x))
            return imp_fail(im);
    }
    for (int k = 0; k < ns; k++)
        if (!imp_need(im, k))
            return false;
    Value *trip = build_dim(im->g, xs[0], 0), *cond = imp_scalar(im, DT_BOOL, 1);
    if (!trip || !cond)
        return imp_fail(im);
    ScanCtx c = {gp, im->in, ns, xs, nx};
    Imp sub;
    Graph *body = loop_body(im, &sub, ns, scan_fn, &c);
    if (!body)
        return false;
    int nk = body->noutputs - 1 - ns;
    if ((noa >= 0 && noa != nk) || (nod >= 0 && nod != nk)) {
        graph_free(body);
        sub_free_caps(&sub);
        return imp_err(im, "scan_output_axes and scan_output_directions need one entry per scan output (%d)", nk);
    }
    Op *op = make_loop(im, &sub, body, trip, cond, im->in, ns, xs, nx);
    if (!op)
        return false;
    for (int k = 0; k < ns && k < im->nout; k++)
        im->out[k] = op->out[k];
    for (int j = 0; j < nk && ns + j < im->nout; j++) {
        Value *y = op->out[ns + j];
        if (nth(out_dirs, nod, j)) {
            AttrList l = {0};
            attrs_add_ints(im->g, &l, "axes", (int64_t[]){0}, 1);
            Op *r = build_op(im->g, OP_REVERSE, &y, 1, l.v, l.n);
            if (!r)
                return imp_fail(im);
            y = r->out[0];
        }
        int64_t ax;
        if (!imp_axis(im, nth(out_axes, noa, j), vrank(y), &ax))
            return false;
        int64_t perm[MAX_RANK];
        for (int a = 0, k = 1; a < vrank(y); a++)
            perm[a] = a == ax ? 0 : k++;
        if (!(im->out[ns + j] = imp_transpose(im, y, perm)))
            return imp_fail(im);
    }
    return true;
}
