/*
 * region.c — ops that carry regions: loop and if (doc/ir.md, "Regions";
 * semantics in doc/ops.md).
 *
 * A region is a Graph of its own: its own arena, symbols and value names.
 * It captures nothing: every value of the enclosing graph that it uses is
 * an operand of the op and an input of the region, so a region can be
 * verified, printed, interpreted and compiled like any graph.
 *
 *   loop(trip, cond, c_1..c_n, x_1..x_m) {ncarried = n}
 *     body(i: i64[], cond: bool[], c_1..c_n, x_1..x_m)
 *       -> (cond': bool[], c_1'..c_n', s_1..s_k)
 *     results: the last c_1..c_n, then s_1..s_k stacked along a new
 *     leading axis of one entry per iteration.
 *
 *   if(cond, x_1..x_m)
 *     then(x_1..x_m) -> (r_1..r_k), else(x_1..x_m) -> (r_1..r_k)
 *
 * Shapes across the boundary. A region's dims are symbols of the region;
 * they mean outer dims through the operands bound to its inputs. The rules
 * below translate a region's result dims back into the enclosing graph
 * (dim_translate) through that binding:
 *
 *   - a body input's symbol is bound to the operand's dim, except on an
 *     axis of a carried value whose dim the body changes (its output dim
 *     is not its input dim): there the symbol means a different number at
 *     each iteration and binds nothing;
 *   - a carried result keeps the operand's dim where the body gives the
 *     axis back unchanged (or a dim that translates to the operand's);
 *     elsewhere the rule leaves it undetermined and the builder gives it a
 *     fresh data-dependent symbol;
 *   - a stacked result's leading dim is the trip count when the loop is
 *     known to run exactly that many times (the condition is the constant
 *     true and the body passes it through or returns true, and the trip
 *     count is a constant or the dim of a value), else a fresh symbol; its
 *     other dims are the body's, translated;
 *   - an if's result dim is the branches' dim where both translate to the
 *     same outer dim, else a fresh symbol.
 */
#include "ir/ir.h"

#include <stdlib.h>
#include <string.h>

static void release_region(void *p) { graph_free(p); }

bool op_add_region(Graph *g, Op *op, Graph *r)
{
    Graph **v = arena_array(&g->arena, (size_t)op->nregions + 1, sizeof *v);
    if (!v || !graph_keep(g, r, release_region)) {
        graph_free(r);
        graph_oom(g);
        return false;
    }
    if (op->nregions)
        memcpy(v, op->regions, (size_t)op->nregions * sizeof *v);
    v[op->nregions++] = r;
    op->regions = v;
    return true;
}

Dim *dim_translate(DimCtx *to, const Dim *d, Dim *(*map)(void *ctx, const Dim *sym), void *ctx)
{
    if (!d)
        return NULL;
    switch (d->kind) {
    case DIM_CONST: return dim_const(to, d->c);
    case DIM_SYM: return map(ctx, d);
    case DIM_ADD:
    case DIM_MUL: {
        Dim *r = dim_const(to, d->c);
        for (int i = 0; i < d->n && r; i++) {
            Dim *a = dim_translate(to, d->args[i], map, ctx);
            if (!a)
                return NULL;
            r = d->kind == DIM_ADD ? dim_add(to, r, a) : dim_mul(to, r, a);
        }
        return r;
    }
    default: break;
    }
    Dim *a = dim_translate(to, d->args[0], map, ctx), *b = a ? dim_translate(to, d->args[1], map, ctx) : NULL;
    if (!b)
        return NULL;
    switch (d->kind) {
    case DIM_FLOORDIV: return dim_floordiv(to, a, b);
    case DIM_CEILDIV: return dim_ceildiv(to, a, b);
    case DIM_MOD: return dim_mod(to, a, b);
    case DIM_MIN: return dim_min(to, a, b);
    case DIM_MAX: return dim_max(to, a, b);
    default: return NULL;
    }
}

/* ---- the binding of a region's symbols to outer dims ------------------- */

typedef struct Binding {
    const Graph *r;  /* the region */
    Dim **outer;     /* by the region's symbol id: the outer dim, or NULL */
} Binding;

static Dim *bound(void *ctx, const Dim *sym)
{
    Binding *b = ctx;
    return sym->id < b->r->dims.nsyms ? b->outer[sym->id] : NULL;
}

/* Binds the symbols of region input i (from `first` on) to the dims of
 * operand v; skip[j] leaves axis j unbound. */
static void bind(Binding *b, const Value *in, const Value *v, const bool *skip)
{
    for (int j = 0; j < in->type.rank && j < v->type.rank; j++) {
        const Dim *d = in->type.dims[j];
        if (!d || d->kind != DIM_SYM || (skip && skip[j]) || d->id >= b->r->dims.nsyms || b->outer[d->id])
            continue;
        b->outer[d->id] = v->type.dims[j];
    }
}

/* Region input `in` stands for operand v: the same dtype and rank, and
 * constant dims agree. */
static bool check_input(const char *what, int i, const Value *in, const Value *v, Diag *d)
{
    if (in->type.dtype != v->type.dtype || in->type.rank != v->type.rank)
        return diag_set(d, "%s input %d is %s of rank %d, but its operand is %s of rank %d", what, i,
                        dtype_name(in->type.dtype), in->type.rank, dtype_name(v->type.dtype), v->type.rank);
    for (int j = 0; j < in->type.rank; j++) {
        const Dim *a = in->type.dims[j], *b = v->type.dims[j];
        if (dim_is_const(a) && dim_is_const(b) && a->c != b->c)
            return diag_set(d, "%s input %d has dim %d = %lld, but its operand has %lld", what, i, j,
                            (long long)a->c, (long long)b->c);
    }
    return true;
}

static bool is_scalar(const Type *t, DType dt) { return t->dtype == dt && t->rank == 0; }

static bool const_true(const Value *v)
{
    const Op *op = v->def;
    return op && op->kind == OP_CONST && op->cst && op->cst->data && op->cst->nbytes >= 1 &&
           v->type.dtype == DT_BOOL && v->type.rank == 0 && *(const unsigned char *)op->cst->data;
}

/* The trip count as a dim, if the graph knows it. */
static Dim *trip_dim(Graph *g, const Value *v)
{
    const Op *op = v->def;
    if (!op)
        return NULL;
    if (op->kind == OP_CONST && op->cst && op->cst->data && op->cst->nbytes >= 8 && v->type.dtype == DT_I64 &&
        v->type.rank == 0) {
        int64_t n;
        memcpy(&n, op->cst->data, 8);
        return n >= 0 ? dim_const(&g->dims, n) : dim_const(&g->dims, 0);
    }
    if (op->kind == OP_DIM) {
        int64_t ax = op_attr_int(op, "axis", -1);
        return ax >= 0 && ax < op->in[0]->type.rank ? op->in[0]->type.dims[ax] : NULL;
    }
    if (op->kind == OP_SHAPE_CONST) {
        const Attr *a = op_attr(op, "dims");
        return a && a->n == 1 && v->type.rank == 0 ? a->dims[0] : NULL;
    }
    return NULL;
}

bool infer_loop(Graph *g, const Op *op, Type *out, Diag *d)
{
    if (op->nregions != 1)
        return diag_set(d, "loop has %d regions, expected 1 (the body)", op->nregions);
    const Graph *body = op->regions[0];
    int nc = loop_ncarried(op);
    if (nc < 0 || op->nin < 2 + nc)
        return diag_set(d, "loop has %d operands, fewer than the trip count, the condition and %d carried values",
                        op->nin, nc);
    int ninv = op->nin - 2 - nc, nscan = op->nout - nc;
    if (nscan < 0)
        return diag_set(d, "loop has %d results, fewer than its %d carried values", op->nout, nc);
    if (!is_scalar(&op->in[0]->type, DT_I64) || !is_scalar(&op->in[1]->type, DT_BOOL))
        return diag_set(d, "loop's trip count must be i64[] and its condition bool[]");
    if (body->ninputs != op->nin)
        return diag_set(d, "loop body takes %d inputs, expected %d (iteration, condition, %d carried, %d invariant)",
                        body->ninputs, op->nin, nc, ninv);
    if (body->noutputs != 1 + nc + nscan)
        return diag_set(d, "loop body returns %d values, expected %d (condition, %d carried, %d stacked)",
                        body->noutputs, 1 + nc + nscan, nc, nscan);
    if (!is_scalar(&body->inputs[0]->type, DT_I64) || !is_scalar(&body->inputs[1]->type, DT_BOOL) ||
        !is_scalar(&body->outputs[0]->type, DT_BOOL))
        return diag_set(d, "loop body's iteration number must be i64[], its condition input and output bool[]");
    for (int i = 2; i < op->nin; i++)
        if (!check_input("loop body", i, body->inputs[i], op->in[i], d))
            return false;
    for (int k = 0; k < nc; k++) {
        const Type *a = &body->inputs[2 + k]->type, *b = &body->outputs[1 + k]->type;
        if (a->dtype != b->dtype || a->rank != b->rank)
            return diag_set(d, "loop body's carried value %d enters as %s of rank %d but leaves as %s of rank %d", k,
                            dtype_name(a->dtype), a->rank, dtype_name(b->dtype), b->rank);
    }
    for (int s = 0; s < nscan; s++)
        if (body->outputs[1 + nc + s]->type.rank + 1 > MAX_RANK)
            return diag_set(d, "loop's stacked result %d has too many dims", s);

    Binding b = {body, calloc((size_t)body->dims.nsyms + 1, sizeof(Dim *))};
    if (!b.outer)
        return diag_oom(d);
    for (int k = 0; k < nc; k++) {
        const Value *in = body->inputs[2 + k], *o = body->outputs[1 + k];
        bool skip[MAX_RANK];
        for (int j = 0; j < in->type.rank; j++)
            skip[j] = in->type.dims[j] != o->type.dims[j];
        bind(&b, in, op->in[2 + k], skip);
    }
    for (int x = 0; x < ninv; x++)
        bind(&b, body->inputs[2 + nc + x], op->in[2 + nc + x], NULL);

    for (int k = 0; k < nc; k++) {
        const Value *v = op->in[2 + k], *o = body->outputs[1 + k], *in = body->inputs[2 + k];
        out[k] = type_make(&g->arena, v->type.dtype, v->type.rank, NULL);
        if (!out[k].dims && v->type.rank)
            goto oom;
        for (int j = 0; j < v->type.rank; j++) {
            Dim *t = o->type.dims[j] == in->type.dims[j] ? v->type.dims[j]
                                                         : dim_translate(&g->dims, o->type.dims[j], bound, &b);
            out[k].dims[j] = t == v->type.dims[j] ? t : NULL;
        }
    }
    const Value *cond_out = body->outputs[0];
    bool exact = const_true(op->in[1]) && (cond_out == body->inputs[1] || const_true(cond_out));
    Dim *trips = exact ? trip_dim(g, op->in[0]) : NULL;
    for (int s = 0; s < nscan; s++) {
        const Type *t = &body->outputs[1 + nc + s]->type;
        out[nc + s] = type_make(&g->arena, t->dtype, t->rank + 1, NULL);
        if (!out[nc + s].dims)
            goto oom;
        out[nc + s].dims[0] = trips;
        for (int j = 0; j < t->rank; j++)
            out[nc + s].dims[j + 1] = dim_translate(&g->dims, t->dims[j], bound, &b);
    }
    free(b.outer);
    return true;
oom:
    free(b.outer);
    return diag_oom(d);
}

bool infer_if(Graph *g, const Op *op, Type *out, Diag *d)
{
    static const char *names[2] = {"then", "else"};
    if (op->nregions != 2)
        return diag_set(d, "if has %d regions, expected 2 (then, else)", op->nregions);
    const Type *c = &op->in[0]->type;
    if (c->dtype != DT_BOOL || c->rank != 0)
        return diag_set(d, "if's condition must be bool[]");
    Binding b[2] = {{0}};
    bool ok = true;
    for (int r = 0; r < 2 && ok; r++) {
        const Graph *br = op->regions[r];
        if (br->ninputs != op->nin - 1) {
            ok = diag_set(d, "if's %s branch takes %d inputs, expected %d", names[r], br->ninputs, op->nin - 1);
            break;
        }
        if (br->noutputs != op->nout) {
            ok = diag_set(d, "if's %s branch returns %d values, expected %d", names[r], br->noutputs, op->nout);
            break;
        }
        for (int i = 0; i < br->ninputs && ok; i++)
            ok = check_input(names[r], i, br->inputs[i], op->in[1 + i], d);
        b[r].r = br;
        if (ok && !(b[r].outer = calloc((size_t)br->dims.nsyms + 1, sizeof(Dim *))))
            ok = diag_oom(d);
        for (int i = 0; i < br->ninputs && ok; i++)
            bind(&b[r], br->inputs[i], op->in[1 + i], NULL);
    }
    for (int k = 0; k < op->nout && ok; k++) {
        const Type *t = &op->regions[0]->outputs[k]->type, *e = &op->regions[1]->outputs[k]->type;
        if (t->dtype != e->dtype || t->rank != e->rank) {
            ok = diag_set(d, "if's result %d is %s of rank %d in the then branch but %s of rank %d in the else branch",
                          k, dtype_name(t->dtype), t->rank, dtype_name(e->dtype), e->rank);
            break;
        }
        out[k] = type_make(&g->arena, t->dtype, t->rank, NULL);
        if (t->rank && !out[k].dims) {
            ok = diag_oom(d);
            break;
        }
        for (int j = 0; j < t->rank; j++) {
            Dim *x = dim_translate(&g->dims, t->dims[j], bound, &b[0]);
            Dim *y = dim_translate(&g->dims, e->dims[j], bound, &b[1]);
            out[k].dims[j] = x == y ? x : NULL;
        }
    }
    free(b[0].outer);
    free(b[1].outer);
    return ok;
}

/* ---- the verifier's part -------------------------------------------------- */

bool region_verify(const Op *op, Diag *d)
{
    int want = op->kind == OP_LOOP ? 1 : op->kind == OP_IF ? 2 : 0;
    if (op->nregions != want)
        return diag_set(d, "has %d regions, expected %d", op->nregions, want);
    for (int r = 0; r < op->nregions; r++) {
        Diag e = {0};
        if (!graph_verify(op->regions[r], &e))
            return diag_setk(d, e.kind, "in region %d (@%s): %s", r, op->regions[r]->name, e.msg);
    }
    return true;
}
