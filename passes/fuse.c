/*
 * fuse.c — the fusion planner: which ops become one kernel.
 *
 * Requires: shape analysis (equal sizes are equal Dim pointers). Leaves the
 * graph unchanged and returns a FusionPlan.
 *
 * Decisions use proved facts only, never shape values. Ops are visited in
 * reverse program order, so every consumer is placed before its producers
 * are considered, and a producer joins its consumers' group when
 *
 *   - every user of its result is in that one group (nothing outside would
 *     need the value materialised), and
 *   - the group can compute it per element:
 *       loop group: the producer's element count is the group's index space,
 *         or the producer is cheap to recompute (broadcast, iota, reshape,
 *         transpose, slice, convert of a value);
 *       reduction group (input fusion): the producer has the element count of
 *         the reduced operand;
 *       library group: a dot or convolution whose only users form an
 *         elementwise loop over its result becomes that group's root, the
 *         loop its epilogue (bias, activation, residual).
 *
 * A reduction whose users all lie in one loop group that iterates over the
 * reduction's whole operand joins it, and the group becomes a stitch group:
 * per row, the reductions run first and the elementwise work over the same
 * row reads their results (softmax: max, sum, then the outputs; LayerNorm:
 * mean, variance, then the normalised row). All reductions of a stitch
 * group reduce the same axes of operands of one shape: trailing axes
 * (rows), or axes that leave the innermost one (columns: x - mean(x) over
 * axis 0, whose kernel reads blocks of columns, see fuse_columns).
 *
 * Merging only into the group of all users keeps the group graph acyclic.
 * One merge goes further: a loop group whose result is read by another loop
 * group over the same index space (and with the same dims) joins it even if
 * the result is needed elsewhere too: it becomes a second output of that
 * kernel (multi-output loop fusion). That merge is made only when no third
 * group lies on a path between the two, which would be a cycle.
 *
 * A producer joins at most FUSE_MAX_DEPTH ops below its group's root (the
 * longest chain of in-group users above it): codegen builds a kernel's
 * element expression recursively, from the root down, and a 10,000-op
 * chain of elementwise ops fused into one kernel overflowed the stack.
 * Real models' kernels are a few dozen ops deep; a longer chain is cut
 * into kernels of that depth.
 *
 * The groups are then ordered topologically (Kahn, earliest program
 * position first), by the values they pass and by data-dependent symbols:
 * a group whose dims use NonZero's count comes after the NonZero. A cycle there is the planner's bug: it is reported as an
 * internal error. A library group lists its library op first and then its
 * epilogue, which codegen runs as one loop kernel after the call.
 */
#include "passes/passes.h"

#include <stdlib.h>
#include <string.h>

typedef enum Class { C_SHAPE, C_ELEM, C_MOVE, C_REDUCE, C_LIB, C_OPAQUE } Class;

enum { FUSE_MAX_DEPTH = 128 };

typedef struct PGroup {
    FuseKind kind;
    int root;           /* op index */
    int *ops;           /* op indices */
    int nops, cap;
    Dim *space;         /* loop: index space; reduction: the reduced operand's count */
    const Type *rowty;  /* stitch/input: the reduced operand's type */
    const Attr *axes;   /* stitch/input: reduced axes (reduce) */
    int axis;           /* stitch/input: argmax/argmin axis, or -1 */
    bool dead;
} PGroup;

typedef struct Planner {
    Graph *g;
    const ShapeInfo *si;
    Op **ops;           /* program order */
    int nops;
    int *grp;           /* op index -> group */
    PGroup *groups;
    int ngroups;
    int **users;        /* value id -> op indices */
    int *nusers;
    bool *is_output;    /* value id */
    int *depth;         /* op index -> in-group users above it (the root: 0) */
    Diag *d;
    bool failed;        /* out of memory: the plan is given up */
} Planner;

static Class class_of(const Op *op)
{
    switch (op_info(op->kind)->cat) {
    case CAT_CONST:
    case CAT_SHAPE: return C_SHAPE;
    case CAT_UNARY:
    case CAT_BINARY:
    case CAT_ELEM: return C_ELEM;
    case CAT_LIB: return C_LIB;
    case CAT_REDUCE: return op->kind == OP_REDUCE || op->kind == OP_ARGMAX || op->kind == OP_ARGMIN ? C_REDUCE : C_OPAQUE;
    case CAT_MOVE:
        switch (op->kind) {
        case OP_BROADCAST: case OP_RESHAPE: case OP_TRANSPOSE: case OP_SLICE: case OP_REVERSE:
        case OP_CONCAT: case OP_PAD: case OP_IOTA: case OP_GATHER: case OP_GATHER_ELEMENTS:
            return C_MOVE;
        default: return resize_is_map(op) || resize_is_lerp(op) ? C_MOVE : C_OPAQUE;
        }
    default: return C_OPAQUE;
    }
}

static Dim *numel(Planner *p, const Value *v) { return type_numel(&p->g->dims, &v->type); }

static void add_op(Planner *p, PGroup *g, int op)
{
    if (g->nops == g->cap) {
        int cap = g->cap ? 2 * g->cap : 4;
        int *v = realloc(g->ops, (size_t)cap * sizeof *v);
        if (!v) {
            p->failed = true;
            return;
        }
        g->ops = v;
        g->cap = cap;
    }
    g->ops[g->nops++] = op;
}

/* The reduced axes of a reduction, as a comparable description. */
static bool same_rows(const PGroup *g, const Op *r)
{
    const Type *t = &r->in[0]->type;
    if (!g->rowty || !type_eq(g->rowty, t))
        return false;
    if (r->kind == OP_REDUCE) {
        const Attr *a = op_attr(r, "axes");
        if (g->axis >= 0 || !g->axes || a->n != g->axes->n)
            return false;
        for (int i = 0; i < a->n; i++)
            if (a->ints[i] != g->axes->ints[i])
                return false;
        return true;
    }
    return g->axis == op_attr_int(r, "axis", -2);
}

/* Reduced axes are the trailing ones (rows are contiguous). */
static bool trailing(const Op *r)
{
    int rank = r->in[0]->type.rank;
    if (r->kind != OP_REDUCE)
        return op_attr_int(r, "axis", -1) == rank - 1;
    const Attr *a = op_attr(r, "axes");
    for (int i = 0; i < a->n; i++)
        if (a->ints[i] != rank - a->n + i)
            return false;
    return a->n > 0;
}

/* A reduce that keeps the innermost axis (the column template). */
static bool keeps_last(const Op *r)
{
    if (r->kind != OP_REDUCE)
        return false;
    const Attr *a = op_attr(r, "axes");
    for (int i = 0; i < a->n; i++)
        if (a->ints[i] == r->in[0]->type.rank - 1)
            return false;
    return a->n > 0;
}

bool fuse_columns(const Group *g)
{
    if (g->kind != FUSE_INPUT && g->kind != FUSE_STITCH)
        return false;
    int n = 0;
    for (int i = 0; i < g->nops; i++) {
        const Op *o = g->ops[i];
        if (class_of(o) != C_REDUCE)
            continue;
        if (!keeps_last(o))
            return false;
        n++;
    }
    return n > 0;
}

static void set_rows(PGroup *g, const Op *r)
{
    g->rowty = &r->in[0]->type;
    g->axes = r->kind == OP_REDUCE ? op_attr(r, "axes") : NULL;
    g->axis = r->kind == OP_REDUCE ? -1 : (int)op_attr_int(r, "axis", 0);
}

static int new_group(Planner *p, FuseKind kind, int op)
{
    PGroup *g = &p->groups[p->ngroups];
    memset(g, 0, sizeof *g);
    g->kind = kind;
    g->root = op;
    g->axis = -1;
    add_op(p, g, op);
    Op *o = p->ops[op];
    if (kind == FUSE_LOOP)
        g->space = numel(p, o->out[0]);
    if (kind == FUSE_INPUT) {
        g->space = numel(p, o->in[0]);
        set_rows(g, o);
    }
    p->grp[op] = p->ngroups;
    return p->ngroups++;
}

/* The one group all users of op's results belong to, or -1. */
static int users_group(Planner *p, int op)
{
    const Op *o = p->ops[op];
    int gid = -1;
    for (int r = 0; r < o->nout; r++) {
        const Value *v = o->out[r];
        for (int i = 0; i < p->nusers[v->id]; i++) {
            int g = p->grp[p->users[v->id][i]];
            if (gid >= 0 && g != gid)
                return -1;
            gid = g;
        }
    }
    return gid;
}

static bool cheap(const Op *o)
{
    return o->kind == OP_BROADCAST || o->kind == OP_IOTA || o->kind == OP_RESHAPE || o->kind == OP_TRANSPOSE ||
           o->kind == OP_SLICE || o->kind == OP_CONVERT || o->kind == OP_REVERSE;
}

static bool is_output(Planner *p, const Op *o)
{
    for (int r = 0; r < o->nout; r++)
        if (p->is_output[o->out[r]->id])
            return true;
    return false;
}

/* How deep op would sit in group gid: one below the deepest of its users
 * there. */
static int depth_in(Planner *p, int op, int gid)
{
    const Op *o = p->ops[op];
    int d = 0;
    for (int r = 0; r < o->nout; r++) {
        const Value *v = o->out[r];
        for (int i = 0; i < p->nusers[v->id]; i++) {
            int u = p->users[v->id][i];
            if (p->grp[u] == gid && p->depth[u] + 1 > d)
                d = p->depth[u] + 1;
        }
    }
    return d;
}

static void join(Planner *p, int op, int gid)
{
    int d = depth_in(p, op, gid); /* place() asked too; absorb() relies on this one */
    add_op(p, &p->groups[gid], op);
    p->grp[op] = gid;
    if (d > p->depth[op])
        p->depth[op] = d;
}

/* Moves every op of group `from` into group `to`. */
static void absorb(Planner *p, int from, int to)
{
    PGroup *f = &p->groups[from];
    for (int i = 0; i < f->nops; i++)
        join(p, f->ops[i], to);
    f->nops = 0;
    f->dead = true;
}

/* Ops a stitch group may hold besides its reductions: they must keep every
 * element in its row, since per row the kernel has only that row's
 * reduction results. Elementwise ops, and broadcasts that do not permute. */
static bool row_safe(const Op *o)
{
    if (class_of(o) == C_ELEM || o->kind == OP_IOTA)
        return true;
    if (o->kind != OP_BROADCAST)
        return false;
    const Attr *axes = op_attr(o, "axes");
    for (int i = 1; i < axes->n; i++)
        if (axes->ints[i] <= axes->ints[i - 1])
            return false;
    return true;
}

static bool all_row_safe(Planner *p, const PGroup *g)
{
    for (int i = 0; i < g->nops; i++)
        if (!row_safe(p->ops[g->ops[i]]))
            return false;
    return true;
}

/* Only elementwise and index-map ops in a loop group (a library epilogue). */
static bool all_loop_ops(Planner *p, const PGroup *g)
{
    for (int i = 0; i < g->nops; i++) {
        Class c = class_of(p->ops[g->ops[i]]);
        if (c != C_ELEM && c != C_MOVE)
            return false;
    }
    return true;
}

/* Whether o reads the result of a dot or convolution other than the
 * library group's root: o then starts that call's own epilogue (ResNet's
 * bias of conv3, whose sum with the shortcut conv's result is the
 * shortcut's residual), where the library applies it, rather than run in
 * the loop after the root's call. */
static bool starts_epilogue(Planner *p, const Op *o, int root)
{
    for (int k = 0; k < o->nin; k++) {
        const Op *d = o->in[k]->def;
        if (d && d != p->ops[root] && (d->kind == OP_DOT || d->kind == OP_CONV))
            return true;
    }
    return false;
}

/* A transcendental op (exp, sigmoid, tanh, erf, log, sqrt, pow, ...)
 * whose result a loop group would recompute at every element it is
 * broadcast to: its result has a dim 1 where the group's result has one
 * that is not (right-aligned). A squeeze-excite gate's sigmoid over
 * [N, C, 1, 1], read at every pixel of [N, C, H, W]: it gets a kernel (or
 * a library epilogue) of its own and is computed once. Not a function of
 * a reduction's result (LayerNorm's rsqrt of the variance), which the
 * stitch group the reduction makes computes once per row. */
static bool after_reduction(const Op *o, int depth)
{
    if (!o || depth > 8)
        return false;
    if (class_of(o) == C_REDUCE)
        return true;
    if (class_of(o) != C_ELEM && !cheap(o))
        return false;
    for (int k = 0; k < o->nin; k++)
        if (after_reduction(o->in[k]->def, depth + 1))
            return true;
    return false;
}

static bool costly_broadcast(Planner *p, const Op *o, const PGroup *g)
{
    if (after_reduction(o, 0))
        return false; /* a row's own value: the group may become its stitch */
    switch (o->kind) {
    case OP_EXP: case OP_LOG: case OP_SQRT: case OP_RSQRT: case OP_TANH: case OP_SIGMOID: case OP_ERF:
    case OP_SIN: case OP_COS: case OP_TAN: case OP_ATAN: case OP_POW: break;
    default: return false;
    }
    const Type *t = &o->out[0]->type, *rt = &p->ops[g->root]->out[0]->type;
    for (int i = 1; i <= t->rank && i <= rt->rank; i++)
        if (dim_is(t->dims[t->rank - i], 1) && !dim_is(rt->dims[rt->rank - i], 1))
            return true;
    return false;
}

/* Whether o's result reaches group gid's root through a linear resize
 * there (resize_is_lerp): read at two to eight places for each element
 * of the resize's result, o would be computed as many times over, so only
 * a reshape joins there; the rest is computed once, in a kernel of its own
 * (a transpose too: LR-ASPP's pair of resizes 3.9 ms a run reading through
 * one, 3.1-3.5 ms from its copy). */
static bool under_lerp(Planner *p, const Op *o, int gid, int depth)
{
    if (depth > FUSE_MAX_DEPTH)
        return true;
    for (int r = 0; r < o->nout; r++) {
        const Value *v = o->out[r];
        for (int i = 0; i < p->nusers[v->id]; i++) {
            int u = p->users[v->id][i];
            if (p->grp[u] == gid && (resize_is_lerp(p->ops[u]) || under_lerp(p, p->ops[u], gid, depth + 1)))
                return true;
        }
    }
    return false;
}

static void place(Planner *p, int op)
{
    Op *o = p->ops[op];
    Class c = class_of(o);
    if (c != C_SHAPE && hostprog_binds(&p->si->prog, o))
        c = C_OPAQUE; /* its result's size is known once it has run */
    int gid = o->nout == 1 ? users_group(p, op) : -1;
    if (gid >= 0 && depth_in(p, op, gid) > FUSE_MAX_DEPTH)
        gid = -1;
    PGroup *g = gid >= 0 ? &p->groups[gid] : NULL;
    if (g && (c == C_ELEM || c == C_MOVE)) {
        Dim *n = numel(p, o->out[0]);
        bool fits = false, feeds_root = false;
        for (int k = 0; k < p->ops[g->root]->nin; k++)
            feeds_root |= p->ops[g->root]->in[k] == o->out[0];
        if (g->kind == FUSE_LOOP || g->kind == FUSE_STITCH)
            /* smaller values (a row's rsqrt, a broadcast bias) are
             * recomputed where they are read */
            fits = n == g->space ||
                   (!is_output(p, o) && (cheap(o) || (c == C_ELEM && !(g->kind == FUSE_LOOP && costly_broadcast(p, o, g)))));
        if (fits && o->kind != OP_RESHAPE && (g->kind == FUSE_LOOP || g->kind == FUSE_STITCH) && under_lerp(p, o, gid, 0))
            fits = false;
        if (g->kind == FUSE_STITCH)
            fits = fits && row_safe(o);
        else if (g->kind == FUSE_INPUT)
            fits = n == g->space;
        else if (g->kind == FUSE_LIBRARY) /* the epilogue, after the call */
            fits = n == g->space && !feeds_root && !starts_epilogue(p, o, g->root);
        if (fits) {
            join(p, op, gid);
            return;
        }
    }
    if (g && c == C_REDUCE && (g->kind == FUSE_LOOP || g->kind == FUSE_STITCH) && (trailing(o) || keeps_last(o)) &&
        numel(p, o->in[0]) == g->space && !is_output(p, o) &&
        (g->kind == FUSE_LOOP ? all_row_safe(p, g) : same_rows(g, o))) {
        /* the reduction's rows are the group's rows: a stitch group */
        if (g->kind == FUSE_LOOP) {
            set_rows(g, o);
            g->root = op; /* the last reduction: later ones are placed first */
        }
        g->kind = FUSE_STITCH;
        join(p, op, gid);
        return;
    }
    if (g && c == C_LIB && (o->kind == OP_DOT || o->kind == OP_CONV) && g->kind == FUSE_LOOP &&
        numel(p, o->out[0]) == g->space && all_loop_ops(p, g) &&
        !is_output(p, o) && dtype_is_float(o->out[0]->type.dtype)) {
        g->kind = FUSE_LIBRARY;
        g->root = op;
        join(p, op, gid);
        return;
    }
    switch (c) {
    case C_SHAPE: new_group(p, FUSE_SHAPE, op); break;
    case C_ELEM:
    case C_MOVE: new_group(p, FUSE_LOOP, op); break;
    case C_REDUCE: new_group(p, FUSE_INPUT, op); break;
    case C_LIB: new_group(p, FUSE_LIBRARY, op); break;
    default: new_group(p, FUSE_OPAQUE, op); break;
    }
    if (c == C_LIB)
        p->groups[p->grp[op]].space = numel(p, o->out[0]);
}

/* A reduction group all of whose results feed one stitch group over the
 * same rows joins it (LayerNorm's first reduction after its second). */
static void merge_reductions(Planner *p)
{
    for (int i = p->nops - 1; i >= 0; i--) {
        int gid = p->grp[i];
        PGroup *g = &p->groups[gid];
        if (g->dead || g->kind != FUSE_INPUT || g->root != i)
            continue;
        int to = -1;
        bool ok = true;
        for (int k = 0; k < g->nops && ok; k++) {
            const Op *o = p->ops[g->ops[k]];
            for (int r = 0; r < o->nout && ok; r++) {
                const Value *v = o->out[r];
                ok = !p->is_output[v->id];
                for (int u = 0; u < p->nusers[v->id] && ok; u++) {
                    int ug = p->grp[p->users[v->id][u]];
                    if (ug == gid)
                        continue;
                    if (to >= 0 && ug != to)
                        ok = false;
                    to = ug;
                }
            }
        }
        if (!ok || to < 0)
            continue;
        PGroup *t = &p->groups[to];
        if (t->kind == FUSE_STITCH && same_rows(t, p->ops[i]) && (trailing(p->ops[i]) || keeps_last(p->ops[i])))
            absorb(p, gid, to);
    }
}

/* True if group `to` is reachable from group `from` other than by a direct
 * edge: merging the two would then put a third group both after and before
 * the merged one. Out of memory: true (and p->failed). */
static bool path_around(Planner *p, int from, int to)
{
    int n = p->ngroups;
    int *start = calloc((size_t)n + 2, sizeof *start), *succ = NULL;
    int *stack = malloc(((size_t)n + 1) * sizeof *stack);
    bool *seen = calloc((size_t)n + 1, 1);
    bool found = false;
    if (!start || !stack || !seen) {
        p->failed = found = true;
        goto out;
    }
    /* successor lists, compressed: one edge per operand across groups */
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < p->nops; i++) {
            const Op *o = p->ops[i];
            for (int k = 0; k < o->nin; k++) {
                const Op *d = o->in[k]->def;
                int a = d ? p->grp[d->id] : -1, b = p->grp[i];
                if (a < 0 || a == b)
                    continue;
                if (pass == 0)
                    start[a + 2]++;
                else
                    succ[start[a + 1]++] = b;
            }
        }
        if (pass == 0) {
            for (int gi = 0; gi < n; gi++)
                start[gi + 2] += start[gi + 1];
            succ = malloc(((size_t)start[n + 1] + 1) * sizeof *succ);
            if (!succ) {
                p->failed = found = true;
                goto out;
            }
        }
    }
    int top = 0;
    for (int e = start[from]; e < start[from + 1]; e++)
        if (succ[e] != to && !seen[succ[e]]) {
            seen[succ[e]] = true;
            stack[top++] = succ[e];
        }
    while (top > 0 && !found) {
        int gi = stack[--top];
        for (int e = start[gi]; e < start[gi + 1] && !found; e++) {
            int s = succ[e];
            found = s == to;
            if (!seen[s]) {
                seen[s] = true;
                stack[top++] = s;
            }
        }
    }
out:
    free(start);
    free(succ);
    free(stack);
    free(seen);
    return found;
}

/* Every value group `from` hands to others has the dims of `t`. */
static bool outs_have_dims(Planner *p, int from, const Type *t)
{
    const PGroup *g = &p->groups[from];
    for (int k = 0; k < g->nops; k++) {
        const Op *o = p->ops[g->ops[k]];
        for (int r = 0; r < o->nout; r++) {
            const Value *v = o->out[r];
            bool outside = p->is_output[v->id];
            for (int u = 0; u < p->nusers[v->id] && !outside; u++)
                outside = p->grp[p->users[v->id][u]] != from;
            if (outside && !type_same_dims(&v->type, t))
                return false;
        }
    }
    return true;
}

/* Whether group a's ops stay within FUSE_MAX_DEPTH of b's root once a
 * joins b (a bound: a's deepest op below the deepest of its ops' users in
 * b). */
static bool depth_fits(Planner *p, int a, int b)
{
    const PGroup *g = &p->groups[a];
    int inner = 0, base = 0;
    for (int k = 0; k < g->nops; k++) {
        int op = g->ops[k], d = depth_in(p, op, b);
        if (p->depth[op] > inner)
            inner = p->depth[op];
        if (d > base)
            base = d;
    }
    return inner + base <= FUSE_MAX_DEPTH;
}

/* Multi-output loop groups: a loop group whose result another loop group
 * over the same index space reads joins that group even when its result is
 * needed elsewhere too; it stays an output of the merged kernel. Only where
 * the result has the dims of the consumer's root (so one index computes
 * both), and only where no other group lies on a path between the two. */
static void merge_outputs(Planner *p)
{
    bool changed = true;
    while (changed) {
        changed = false;
        for (int i = 0; i < p->nops && !changed; i++) {
            int a = p->grp[i];
            const Op *o = p->ops[i];
            if (p->groups[a].kind != FUSE_LOOP)
                continue;
            for (int r = 0; r < o->nout && !changed; r++) {
                const Value *v = o->out[r];
                for (int u = 0; u < p->nusers[v->id] && !changed; u++) {
                    int b = p->grp[p->users[v->id][u]];
                    const PGroup *pb = &p->groups[b];
                    if (b == a || pb->kind != FUSE_LOOP || pb->space != p->groups[a].space ||
                        !outs_have_dims(p, a, &p->ops[pb->root]->out[0]->type) || !depth_fits(p, a, b) ||
                        path_around(p, a, b))
                        continue;
                    absorb(p, a, b);
                    changed = true;
                }
            }
        }
    }
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

/* Adds to *edges (pairs: from group, to group) an edge into the group of
 * every op whose result dims use a data-dependent symbol, from the group of
 * the op that binds the symbol (binder: the first op with that symbol as a
 * result dim, as hostprog binds it; < 0 for none or a symbol of the
 * inputs): a kernel sized by NonZero's count runs after
 * the NonZero even when no value passes between them (a slice of a
 * constant to min(_5, B*S)). False when out of memory. */
static bool data_edges(const Dim *d, const int *binder, int g, const Planner *p, int **edges, int *n, int *cap)
{
    if (!d)
        return true;
    if (d->kind == DIM_SYM) {
        int b = binder[d->id];
        if (b < 0 || p->grp[b] == g || p->groups[p->grp[b]].dead)
            return true;
        if (*n == *cap) {
            int c = *cap ? 2 * *cap : 16;
            int *e = realloc(*edges, (size_t)c * 2 * sizeof *e);
            if (!e)
                return false;
            *edges = e, *cap = c;
        }
        (*edges)[2 * *n] = p->grp[b];
        (*edges)[2 * *n + 1] = g;
        ++*n;
        return true;
    }
    for (int i = 0; i < d->n; i++)
        if (!data_edges(d->args[i], binder, g, p, edges, n, cap))
            return false;
    return true;
}

static bool data_order(Planner *p, int **edges, int *n)
{
    int nsyms = p->g->dims.nsyms, cap = 0;
    int *binder = malloc(((size_t)nsyms + 1) * sizeof *binder);
    bool ok = binder != NULL;
    *edges = NULL, *n = 0;
    for (int i = 0; ok && i < nsyms; i++)
        binder[i] = -1;
    /* the symbols of the inputs are bound before anything runs (-2) */
    for (int i = 0; ok && i < p->g->ninputs; i++) {
        const Type *t = &p->g->inputs[i]->type;
        for (int k = 0; k < t->rank; k++)
            if (t->dims[k] && t->dims[k]->kind == DIM_SYM && t->dims[k]->id < nsyms)
                binder[t->dims[k]->id] = -2;
    }
    for (int i = 0; ok && i < p->nops; i++)
        for (int r = 0; r < p->ops[i]->nout; r++) {
            const Type *t = &p->ops[i]->out[r]->type;
            for (int k = 0; k < t->rank; k++)
                if (t->dims[k] && t->dims[k]->kind == DIM_SYM && t->dims[k]->id < nsyms &&
                    binder[t->dims[k]->id] == -1)
                    binder[t->dims[k]->id] = i;
        }
    for (int i = 0; ok && i < p->nops; i++) {
        if (p->groups[p->grp[i]].dead)
            continue;
        for (int r = 0; ok && r < p->ops[i]->nout; r++) {
            const Type *t = &p->ops[i]->out[r]->type;
            for (int k = 0; ok && k < t->rank; k++)
                ok = data_edges(t->dims[k], binder, p->grp[i], p, edges, n, &cap);
        }
    }
    free(binder);
    return ok;
}

/* Builds the plan's groups in a topological order; false on a cycle. */
static bool emit(Planner *p, FusionPlan *plan)
{
    int n = p->ngroups;
    int *indeg = calloc((size_t)n + 1, sizeof *indeg), *order = malloc(((size_t)n + 1) * sizeof *order);
    int *first = malloc(((size_t)n + 1) * sizeof *first);
    bool *done = calloc((size_t)n + 1, 1);
    if (!indeg || !order || !first || !done) {
        p->failed = true;
        free(indeg);
        free(order);
        free(first);
        free(done);
        return false;
    }
    for (int g = 0; g < n; g++) {
        first[g] = p->nops;
        if (p->groups[g].nops)
            qsort(p->groups[g].ops, (size_t)p->groups[g].nops, sizeof(int), cmp_int);
        if (p->groups[g].nops)
            first[g] = p->groups[g].ops[0];
    }
    /* edges: producer group -> consumer group, one per (value, user op), as
     * they are taken away below (an op reading a value twice is one user) */
    for (int i = 0; i < p->nops; i++) {
        const Op *o = p->ops[i];
        for (int r = 0; r < o->nout; r++)
            for (int u = 0; u < p->nusers[o->out[r]->id]; u++)
                indeg[p->grp[p->users[o->out[r]->id][u]]] += p->grp[p->users[o->out[r]->id][u]] != p->grp[i];
    }
    int *dedge, ndedge;
    if (!data_order(p, &dedge, &ndedge)) {
        p->failed = true;
        free(indeg);
        free(order);
        free(first);
        free(done);
        return false;
    }
    for (int e = 0; e < ndedge; e++)
        indeg[dedge[2 * e + 1]]++;
    int norder = 0, live = 0;
    for (int g = 0; g < n; g++)
        live += !p->groups[g].dead;
    while (norder < live) {
        int best = -1;
        for (int g = 0; g < n; g++)
            if (!p->groups[g].dead && !done[g] && indeg[g] == 0 && (best < 0 || first[g] < first[best]))
                best = g;
        if (best < 0)
            break;
        done[best] = true;
        order[norder++] = best;
        const PGroup *pg = &p->groups[best];
        for (int k = 0; k < pg->nops; k++) {
            const Op *o = p->ops[pg->ops[k]];
            for (int r = 0; r < o->nout; r++)
                for (int u = 0; u < p->nusers[o->out[r]->id]; u++) {
                    int ug = p->grp[p->users[o->out[r]->id][u]];
                    if (ug != best)
                        indeg[ug]--;
                }
        }
        for (int e = 0; e < ndedge; e++)
            if (dedge[2 * e] == best)
                indeg[dedge[2 * e + 1]]--;
    }
    free(dedge);
    bool ok = norder == live;
    plan->groups = arena_array(&plan->arena, (size_t)live + 1, sizeof(Group));
    if (plan->groups) /* fields set below, and the rest (over) NULL */
        memset(plan->groups, 0, ((size_t)live + 1) * sizeof(Group));
    for (int i = 0; ok && plan->groups && i < norder; i++) {
        const PGroup *pg = &p->groups[order[i]];
        Group *g = &plan->groups[plan->n];
        g->ops = arena_array(&plan->arena, (size_t)pg->nops, sizeof(Op *));
        /* room for every operand of every op (a select alone has three) */
        size_t nin = 1;
        for (int k = 0; k < pg->nops; k++)
            nin += (size_t)p->ops[pg->ops[k]]->nin;
        size_t nout = 1;
        for (int k = 0; k < pg->nops; k++)
            nout += (size_t)p->ops[pg->ops[k]]->nout;
        g->ins = arena_array(&plan->arena, nin, sizeof(Value *));
        g->outs = arena_array(&plan->arena, nout, sizeof(Value *));
        if (!g->ops || !g->ins || !g->outs)
            break; /* the arena failed: fuse_plan reports it */
        g->id = plan->n++;
        g->kind = pg->kind;
        g->root = p->ops[pg->root];
        g->nops = pg->nops;
        /* a library group: the call, then its epilogue in program order */
        int nk = 0;
        if (pg->kind == FUSE_LIBRARY)
            g->ops[nk++] = p->ops[pg->root];
        for (int k = 0; k < pg->nops; k++)
            if (pg->kind != FUSE_LIBRARY || pg->ops[k] != pg->root)
                g->ops[nk++] = p->ops[pg->ops[k]];
        for (int k = 0; k < pg->nops; k++) {
            const Op *o = g->ops[k];
            for (int j = 0; j < o->nin; j++) {
                Value *v = o->in[j];
                if (v->def && p->grp[v->def->id] == order[i])
                    continue;
                bool dup = false;
                for (int m = 0; m < g->nins; m++)
                    dup |= g->ins[m] == v;
                if (!dup)
                    g->ins[g->nins++] = v;
            }
            for (int r = 0; r < o->nout; r++) {
                Value *v = o->out[r];
                bool outside = p->is_output[v->id];
                for (int u = 0; u < p->nusers[v->id] && !outside; u++)
                    outside = p->grp[p->users[v->id][u]] != order[i];
                if (outside)
                    g->outs[g->nouts++] = v;
            }
        }
    }
    free(indeg);
    free(order);
    free(first);
    free(done);
    return ok;
}

FusionPlan *fuse_plan(ShapeInfo *si, Diag *d)
{
    Graph *g = si->g;
    graph_renumber(g);
    Planner p = {.g = g, .si = si, .nops = g->nops, .d = d};
    p.ops = calloc((size_t)g->nops + 1, sizeof *p.ops);
    p.grp = calloc((size_t)g->nops + 1, sizeof *p.grp);
    p.groups = calloc((size_t)g->nops + 1, sizeof *p.groups);
    p.users = calloc((size_t)g->nvalues + 1, sizeof *p.users);
    p.nusers = calloc((size_t)g->nvalues + 1, sizeof *p.nusers);
    p.is_output = calloc((size_t)g->nvalues + 1, 1);
    p.depth = calloc((size_t)g->nops + 1, sizeof *p.depth);
    FusionPlan *plan = calloc(1, sizeof *plan);
    if (plan) {
        plan->g = g;
        arena_init(&plan->arena);
    }
    p.failed = !p.ops || !p.grp || !p.groups || !p.users || !p.nusers || !p.is_output || !p.depth || !plan;
    int n = 0;
    if (!p.failed)
        graph_for_each_op(g, op) p.ops[n++] = op;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < p.ops[i]->nin; k++)
            p.nusers[p.ops[i]->in[k]->id]++;
    for (int v = 0; n && v < g->nvalues && !p.failed; v++)
        if (p.nusers[v] && !(p.users[v] = arena_array(&plan->arena, (size_t)p.nusers[v], sizeof(int))))
            p.failed = true;
    if (p.failed)
        n = 0; /* nothing below runs */
    else
        memset(p.nusers, 0, (size_t)(g->nvalues + 1) * sizeof *p.nusers);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < p.ops[i]->nin; k++) {
            int id = p.ops[i]->in[k]->id;
            /* users arrive in op order: a repeat is op i's own, the last */
            bool dup = p.nusers[id] > 0 && p.users[id][p.nusers[id] - 1] == i;
            if (!dup)
                p.users[id][p.nusers[id]++] = i;
        }
    for (int i = 0; !p.failed && i < g->noutputs; i++)
        p.is_output[g->outputs[i]->id] = true;
    for (int i = n - 1; i >= 0 && !p.failed; i--)
        place(&p, i);
    bool ok = false;
    if (!p.failed) {
        merge_reductions(&p);
        merge_outputs(&p);
        ok = emit(&p, plan);
    }
    for (int i = 0; i < p.ngroups; i++)
        free(p.groups[i].ops);
    free(p.ops);
    free(p.grp);
    free(p.groups);
    free(p.users);
    free(p.nusers);
    free(p.is_output);
    free(p.depth);
    if (p.failed || !plan || plan->arena.failed) {
        fuse_plan_free(plan);
        diag_blame_memory(d);
        return NULL;
    }
    if (!ok) { /* the planner's invariant broke */
        fuse_plan_free(plan);
        diag_setk(d, DIAG_INTERNAL, "%s: internal error: the fusion plan has a cycle between its groups",
                  g->name ? g->name : "graph");
        return NULL;
    }
    return plan;
}

void fuse_plan_free(FusionPlan *p)
{
    if (!p)
        return;
    arena_free(&p->arena);
    free(p);
}

const char *fuse_kind_name(FuseKind k)
{
    static const char *names[] = {"loop", "input", "stitch", "library", "opaque", "shape"};
    return k >= 0 && k <= FUSE_SHAPE ? names[k] : "?";
}

static void print_values(FILE *f, char **names, Value **v, int n)
{
    for (int i = 0; i < n; i++)
        fprintf(f, " %s", names ? names[v[i]->id] : "?");
}

static const char *op_name(char **names, const Op *o)
{
    return names && o->nout > 0 ? names[o->out[0]->id] : op_info(o->kind)->name;
}

/* One line per group, in execution order:
 *
 *   # group 3 stitch root %mx2: ops %mx %sh %e %sum %p; in %s; out %p; space 12*B*S*S
 *
 * ops are named by their (first) result. A library group lists the call,
 * then its epilogue. The space is the element count of the index space:
 * the root's result, or for a reduction group the reduced operand. A
 * reduction group that gets the column template (fuse_columns) ends in
 * "; template columns". Shape groups (one per constant or shape op) run on
 * the host, not as kernels. */
void fuse_print(FILE *f, const FusionPlan *p)
{
    char **names = graph_value_names(p->g);
    int kernels = 0, library = 0, host = 0, opaque = 0;
    for (int i = 0; i < p->n; i++) {
        const Group *g = &p->groups[i];
        /* a library group's epilogue is a loop kernel after the call */
        kernels += g->kind == FUSE_LOOP || g->kind == FUSE_INPUT || g->kind == FUSE_STITCH ||
                   (g->kind == FUSE_LIBRARY && g->nops > 1);
        library += g->kind == FUSE_LIBRARY;
        host += g->kind == FUSE_SHAPE;
        opaque += g->kind == FUSE_OPAQUE;
        fprintf(f, "# group %d %s root %s: ops", g->id, fuse_kind_name(g->kind),
                g->root ? op_name(names, g->root) : "?");
        for (int k = 0; k < g->nops; k++) {
            if (g->kind == FUSE_LIBRARY && k == 1)
                fputs("; epilogue", f);
            fprintf(f, " %s", op_name(names, g->ops[k]));
        }
        if (g->nins) {
            fputs("; in", f);
            print_values(f, names, g->ins, g->nins);
        }
        fputs("; out", f);
        print_values(f, names, g->outs, g->nouts);
        if (g->root && g->kind != FUSE_OPAQUE && g->kind != FUSE_SHAPE) {
            fputs("; space ", f);
            const Value *sp = g->kind == FUSE_INPUT || g->kind == FUSE_STITCH ? g->root->in[0] : g->root->out[0];
            dim_print(f, type_numel(&p->g->dims, &sp->type));
        }
        if (fuse_columns(g))
            fputs("; template columns", f);
        fputc('\n', f);
    }
    int ops = 0;
    graph_for_each_op(p->g, op) ops += op_info(op->kind)->cat != CAT_CONST;
    fprintf(f, "# %d kernels, %d library calls, %d opaque ops for %d ops; host: %d shape groups (one per constant or shape op)\n",
            kernels, library, opaque, ops, host);
    graph_value_names_free(p->g, names);
}

static bool on_host(const Op *o)
{
    return op_info(o->kind)->cat == CAT_CONST || op_info(o->kind)->cat == CAT_SHAPE;
}

/* s inside a DOT string: quotes and backslashes escaped. */
static void dot_str(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        fputc(*s, f);
    }
}

/* Graphviz: a cluster per kernel (host shape groups left out), a node per
 * op labelled with its result, an edge per value read across or within
 * groups; graph inputs and outputs as ellipses. */
void fuse_print_dot(FILE *f, const FusionPlan *p)
{
    const Graph *gr = p->g;
    char **names = graph_value_names(gr);
    fputs("digraph fusion {\n  rankdir=TB;\n  node [shape=box, fontname=monospace];\n", f);
    for (int i = 0; i < gr->ninputs; i++)
    {
        fprintf(f, "  in%d [shape=ellipse, label=\"", i);
        dot_str(f, names ? names[gr->inputs[i]->id] : "?");
        fputs("\"];\n", f);
    }
    for (int i = 0; i < p->n; i++) {
        const Group *g = &p->groups[i];
        if (g->kind == FUSE_SHAPE)
            continue;
        fprintf(f, "  subgraph cluster_%d {\n    label=\"group %d %s\";\n", g->id, g->id, fuse_kind_name(g->kind));
        for (int k = 0; k < g->nops; k++) {
            fprintf(f, "    op%d [label=\"", g->ops[k]->id);
            dot_str(f, op_name(names, g->ops[k]));
            fprintf(f, " = %s\"];\n", op_info(g->ops[k]->kind)->name);
        }
        fputs("  }\n", f);
    }
    for (int i = 0; i < p->n; i++) {
        const Group *g = &p->groups[i];
        if (g->kind == FUSE_SHAPE)
            continue;
        for (int k = 0; k < g->nops; k++) {
            const Op *o = g->ops[k];
            for (int j = 0; j < o->nin; j++) {
                const Value *v = o->in[j];
                if (v->def && !on_host(v->def)) {
                    fprintf(f, "  op%d -> op%d [label=\"", v->def->id, o->id);
                    dot_str(f, names ? names[v->id] : "");
                    fputs("\"];\n", f);
                }
                for (int m = 0; !v->def && m < gr->ninputs; m++)
                    if (gr->inputs[m] == v)
                        fprintf(f, "  in%d -> op%d;\n", m, o->id);
            }
        }
    }
    for (int i = 0; i < gr->noutputs; i++) {
        const Value *v = gr->outputs[i];
        fprintf(f, "  out%d [shape=ellipse, label=\"return ", i);
        dot_str(f, names ? names[v->id] : "?");
        fputs("\"];\n", f);
        if (v->def && !on_host(v->def))
            fprintf(f, "  op%d -> out%d;\n", v->def->id, i);
    }
    fputs("}\n", f);
    graph_value_names_free(gr, names);
}
