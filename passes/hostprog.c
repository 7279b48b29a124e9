/*
 * hostprog.c — the host shape program.
 *
 * From the analysed graph: the list of steps that computes every symbol
 * from the input shapes (BIND), checks every other input dim against what
 * the model needs (CHECK), checks the requirements of the ops (REQUIRE,
 * BCAST), evaluates the speculation guards (GUARD), and binds the
 * data-dependent symbols once the op producing them has run (DATA). The
 * interpreter evaluates it with hostprog_run; compiled backends generate
 * the same steps as native code. Nothing runs with inconsistent shapes: a
 * violated check is an error that names the input, the dim, the expected
 * relation and the actual values.
 */
#include "passes/passes.h"

#include <stdlib.h>
#include <string.h>

HostStep *hostprog_push(ShapeInfo *si, HostStep s)
{
    HostProg *p = &si->prog;
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 32;
        HostStep *v = arena_array(&si->arena, (size_t)cap, sizeof *v);
        if (!v)
            return NULL;
        if (p->n)
            memcpy(v, p->steps, (size_t)p->n * sizeof *v);
        p->steps = v;
        p->cap = cap;
    }
    p->steps[p->n] = s;
    return &p->steps[p->n++];
}

static const char *input_name(const Graph *g, int i)
{
    return g->inputs[i]->name ? g->inputs[i]->name : "?";
}

static bool holds(int64_t a, Rel r, int64_t b);

/* What says why input symbol x is at least x->lo where that is more than
 * the input's own bounds gave: a requirement of ops on x alone that fails
 * at x->lo - 1 and holds at x->lo (shapeval raises a bound from such a
 * requirement). */
static const char *bound_reason(const HostProg *ops, const Dim *x, int nsyms)
{
    if (x->lo == INT64_MIN)
        return NULL;
    int64_t *val = calloc((size_t)nsyms + 1, sizeof *val);
    bool *bound = calloc((size_t)nsyms + 1, sizeof *bound);
    const char *why = NULL;
    if (val && bound) {
        bound[x->id] = true;
        DimEnv env = {.val = val, .bound = bound, .n = nsyms};
        for (int i = 0; i < ops->n && !why; i++) {
            const HostStep *s = &ops->steps[i];
            int64_t a, b, a1, b1;
            val[x->id] = x->lo - 1;
            if (s->kind != HS_REQUIRE || !s->what || dim_eval(s->lhs, &env, &a) != DIM_OK ||
                dim_eval(s->rhs, &env, &b) != DIM_OK || holds(a, s->rel, b))
                continue;
            val[x->id] = x->lo;
            if (dim_eval(s->lhs, &env, &a1) == DIM_OK && dim_eval(s->rhs, &env, &b1) == DIM_OK && holds(a1, s->rel, b1))
                why = s->what;
        }
    }
    free(val);
    free(bound);
    return why;
}

bool hostprog_build(ShapeInfo *si, Diag *d)
{
    Graph *g = si->g;
    int nsyms = g->dims.nsyms;
    bool *bound = calloc((size_t)nsyms + 1, 1);
    if (!bound)
        return diag_oom(d);
    /* the op requirements found so far go after the input steps */
    HostProg ops = si->prog;
    memset(&si->prog, 0, sizeof si->prog);
    for (int i = 0; i < g->ninputs; i++) {
        const Type *t = &g->inputs[i]->type;
        for (int k = 0; k < t->rank; k++) {
            Dim *x = t->dims[k];
            if (x->kind == DIM_SYM && !bound[x->id]) {
                bound[x->id] = true;
                hostprog_push(si, (HostStep){.kind = HS_BIND, .sym = x, .input = i, .axis = k,
                                             .what = bound_reason(&ops, x, nsyms)});
            }
        }
    }
    for (int i = 0; i < g->ninputs; i++) {
        const Type *t = &g->inputs[i]->type;
        for (int k = 0; k < t->rank; k++) {
            Dim *x = t->dims[k];
            bool first = false;
            for (int j = 0; j < si->prog.n; j++) {
                HostStep *s = &si->prog.steps[j];
                first |= s->kind == HS_BIND && s->input == i && s->axis == k;
            }
            if (!first)
                hostprog_push(si, (HostStep){.kind = HS_CHECK, .lhs = x, .input = i, .axis = k});
        }
    }
    for (int i = 0; i < ops.n; i++)
        hostprog_push(si, ops.steps[i]);
    /* symbols first seen in results are bound when their op has run */
    const Op *nodim = NULL; /* a result with a dim shape inference left unknown */
    graph_for_each_op(g, op) for (int r = 0; r < op->nout; r++) {
        const Type *t = &op->out[r]->type;
        for (int k = 0; k < t->rank; k++) {
            Dim *x = t->dims[k];
            if (!x) { /* found by make fuzz on a malformed model */
                nodim = nodim ? nodim : op;
                continue;
            }
            if (x->kind == DIM_SYM && !bound[x->id]) {
                bound[x->id] = true;
                if (x->origin == SYM_DERIVED)
                    x->origin = SYM_DATA;
                hostprog_push(si, (HostStep){.kind = HS_DATA, .sym = x, .value = op->out[r], .axis = k});
            }
        }
    }
    /* every symbol a dim uses must be computable */
    bool ok = true;
    if (nodim)
        ok = diag_setk(d, DIAG_INTERNAL, "error: internal: a result of %s has a dim shape inference left unknown",
                       op_info(nodim->kind)->name);
    graph_for_each_op(g, op) for (int r = 0; r < op->nout && ok; r++) {
        const Type *t = &op->out[r]->type;
        for (int k = 0; k < t->rank && ok; k++)
            for (int s = 0; s < nsyms && ok; s++)
                if (!bound[s] && t->dims[k] && dim_mentions(t->dims[k], g->dims.syms[s]))
                    ok = diag_set(d, "error: symbol %s cannot be computed from the input shapes",
                                  g->dims.syms[s]->name);
    }
    free(bound);
    return ok;
}

static void print_dim(FILE *f, const Dim *d) { dim_print(f, d); }

void hostprog_print(FILE *f, const Graph *g, const HostProg *p)
{
    for (int i = 0; i < p->n; i++) {
        const HostStep *s = &p->steps[i];
        fputs("#   ", f);
        switch (s->kind) {
        case HS_BIND:
            fprintf(f, "bind %s = input \"%s\" dim %d", s->sym->name, input_name(g, s->input), s->axis);
            break;
        case HS_CHECK:
            fprintf(f, "check input \"%s\" dim %d == ", input_name(g, s->input), s->axis);
            print_dim(f, s->lhs);
            break;
        case HS_REQUIRE:
            fputs("require ", f);
            print_dim(f, s->lhs);
            fprintf(f, " %s ", cons_rel_str(s->rel));
            print_dim(f, s->rhs);
            break;
        case HS_BCAST:
            fputs("require ", f);
            print_dim(f, s->lhs);
            fputs(" == ", f);
            print_dim(f, s->rhs);
            fputs(" or one of them is 1", f);
            break;
        case HS_GUARD:
            fputs("guard ", f);
            print_dim(f, s->lhs);
            fputs(" == ", f);
            print_dim(f, s->rhs);
            fputs(" (else the broadcasting variant)", f);
            break;
        case HS_DATA:
            fprintf(f, "bind %s = dim %d of a result, after its op has run", s->sym->name, s->axis);
            break;
        }
        if (s->what)
            fprintf(f, "  (%s)", s->what);
        fputc('\n', f);
    }
}

bool hostenv_init(HostEnv *e, const Graph *g, int nsteps)
{
    memset(e, 0, sizeof *e);
    e->nsyms = g->dims.nsyms;
    e->val = calloc((size_t)e->nsyms + 1, sizeof *e->val);
    e->bound = calloc((size_t)e->nsyms + 1, 1);
    e->guard = calloc((size_t)nsteps + 1, 1);
    return e->val && e->bound && e->guard;
}

void hostenv_free(HostEnv *e)
{
    free(e->val);
    free(e->bound);
    free(e->guard);
    memset(e, 0, sizeof *e);
}

DimEnv hostenv_dims(const HostEnv *e) { return (DimEnv){e->val, e->bound, e->nsyms}; }

/* The step that binds sym from an input, or NULL. */
static const HostStep *binder(const HostProg *p, const Dim *sym)
{
    for (int i = 0; i < p->n; i++)
        if (p->steps[i].kind == HS_BIND && p->steps[i].sym == sym)
            return &p->steps[i];
    return NULL;
}

/* " (from input "mask" dim 1)" for a symbol bound from an input. */
static void bound_from(const Graph *g, const HostProg *p, const Dim *sym, char *buf, size_t size)
{
    const HostStep *s = binder(p, sym);
    buf[0] = 0;
    if (s)
        snprintf(buf, size, " (from input \"%s\" dim %d)", input_name(g, s->input), s->axis);
}

/* Lists the values of the symbols that a or b use, and the inputs they
 * come from: " with S = 13 (from input "ids" dim 1), S_2 = 2 (...)"; a
 * itself is left out when it is a symbol (the message gave its value). */
static void sym_values(const HostEnv *e, const HostProg *p, const Dim *a, const Dim *b, const Graph *g, char *buf,
                       size_t size)
{
    size_t n = 0;
    buf[0] = 0;
    for (int s = 0; s < e->nsyms && n < size; s++) {
        const Dim *sym = g->dims.syms[s];
        char from[200];
        if (!e->bound[s] || !(dim_mentions(a, sym) || (b && dim_mentions(b, sym))) || (a == sym && !b))
            continue;
        bound_from(g, p, sym, from, sizeof from);
        n += (size_t)snprintf(buf + n, size - n, "%s%s = %lld%s", n ? ", " : " with ", sym->name,
                              (long long)e->val[s], from);
    }
}

static bool holds(int64_t a, Rel r, int64_t b)
{
    switch (r) {
    case REL_EQ: return a == b;
    case REL_NE: return a != b;
    case REL_LE: return a <= b;
    case REL_LT: return a < b;
    case REL_GE: return a >= b;
    case REL_GT: return a > b;
    }
    return false;
}

/* Runs step i if all its symbols are bound; *ran says whether it did. */
static bool run_step(const Graph *g, const HostProg *p, int i, const int64_t *const *shapes, HostEnv *e, Diag *d)
{
    const HostStep *s = &p->steps[i];
    DimEnv env = hostenv_dims(e);
    int64_t a = 0, b = 0;
    char buf[600], ex[256], ctx[300];
    snprintf(ctx, sizeof ctx, "%s%s", s->what ? s->what : "", s->what ? ": " : "");
    switch (s->kind) {
    case HS_BIND: {
        int64_t v = shapes[s->input][s->axis];
        const Dim *y = s->sym;
        if (v < y->lo || (y->hi != DIM_INF && v > y->hi))
            return diag_setk(d, DIAG_SHAPE, "error: input \"%s\": dim %d is %lld, expected %s %s %lld%s%s%s",
                             input_name(g, s->input), s->axis, (long long)v, y->name, v < y->lo ? ">=" : "<=",
                             (long long)(v < y->lo ? y->lo : y->hi), v < y->lo && s->what ? " (" : "",
                             v < y->lo && s->what ? s->what : "", v < y->lo && s->what ? ")" : "");
        e->val[y->id] = v;
        e->bound[y->id] = true;
        return true;
    }
    case HS_CHECK: {
        int64_t got = shapes[s->input][s->axis];
        if (dim_eval(s->lhs, &env, &a) != DIM_OK || got == a)
            return true;
        dim_snprint(ex, sizeof ex, s->lhs);
        if (dim_is_const(s->lhs))
            return diag_setk(d, DIAG_SHAPE, "error: input \"%s\": dim %d is %lld, expected %s",
                             input_name(g, s->input), s->axis, (long long)got, ex);
        if (s->lhs->kind == DIM_SYM)
            bound_from(g, p, s->lhs, buf, sizeof buf);
        else
            sym_values(e, p, s->lhs, NULL, g, buf, sizeof buf);
        return diag_setk(d, DIAG_SHAPE, "error: input \"%s\": dim %d is %lld, expected %s = %lld%s",
                         input_name(g, s->input), s->axis, (long long)got, ex, (long long)a, buf);
    }
    case HS_REQUIRE:
    case HS_BCAST:
    case HS_GUARD: {
        if (dim_eval(s->lhs, &env, &a) != DIM_OK || dim_eval(s->rhs, &env, &b) != DIM_OK)
            return true;
        bool ok = s->kind == HS_REQUIRE ? holds(a, s->rel, b) : a == b || (s->kind == HS_BCAST && (a == 1 || b == 1));
        if (s->kind == HS_GUARD) {
            e->guard[i] = ok;
            return true;
        }
        if (ok)
            return true;
        dim_snprint(ex, sizeof ex, s->lhs);
        int n = (int)strlen(ex);
        snprintf(ex + n, sizeof ex - (size_t)n, " %s ", s->kind == HS_BCAST ? "==" : cons_rel_str(s->rel));
        n = (int)strlen(ex);
        dim_snprint(ex + n, sizeof ex - (size_t)n, s->rhs);
        sym_values(e, p, s->lhs, s->rhs, g, buf, sizeof buf);
        return diag_setk(d, DIAG_SHAPE, "error: %sinput shapes violate %s%s (%lld vs %lld)%s", ctx, ex,
                         s->kind == HS_BCAST ? " or one of them is 1" : "", (long long)a, (long long)b, buf);
    }
    case HS_DATA:
        return true;
    }
    return true;
}

bool hostprog_run(const Graph *g, const HostProg *p, const int64_t *const *shapes, HostEnv *e, Diag *d)
{
    for (int i = 0; i < p->n; i++)
        if (!run_step(g, p, i, shapes, e, d))
            return false;
    return true;
}

bool hostprog_explain(const Graph *g, const HostProg *p, int step, const int64_t *syms, Diag *d)
{
    HostEnv e;
    bool ok = hostenv_init(&e, g, p->n);
    if (!ok) {
        hostenv_free(&e);
        return diag_oom(d);
    }
    for (int i = 0; i < e.nsyms; i++) {
        e.val[i] = syms[i];
        e.bound[i] = true;
    }
    const HostStep *s = step >= 0 && step < p->n ? &p->steps[step] : NULL;
    ok = !s || (s->kind != HS_REQUIRE && s->kind != HS_BCAST) || run_step(g, p, step, NULL, &e, d);
    hostenv_free(&e);
    return ok;
}

bool hostprog_binds(const HostProg *p, const Op *op)
{
    for (int i = 0; i < p->n; i++)
        if (p->steps[i].kind == HS_DATA && p->steps[i].value->def == op)
            return true;
    return false;
}

bool hostprog_after_op(const Graph *g, const HostProg *p, const Op *op, const int64_t *const *shapes,
                       HostEnv *e, Diag *d)
{
    bool any = false;
    for (int i = 0; i < p->n; i++) {
        const HostStep *s = &p->steps[i];
        if (s->kind == HS_DATA && s->value->def == op) {
            e->val[s->sym->id] = shapes[s->value->idx][s->axis];
            e->bound[s->sym->id] = true;
            any = true;
        }
    }
    if (!any)
        return true;
    for (int i = 0; i < p->n; i++)
        if (p->steps[i].kind != HS_BIND && p->steps[i].kind != HS_CHECK && !run_step(g, p, i, NULL, e, d))
            return false;
    return true;
}

bool shape_check_inputs(const ShapeInfo *si, const Tensor *inputs, int ninputs, Diag *d)
{
    const Graph *g = si->g;
    if (ninputs != g->ninputs)
        return diag_setk(d, DIAG_ARG, "error: the model has %d inputs, %d given", g->ninputs, ninputs);
    const int64_t *shapes[256];
    if (ninputs > 256)
        return diag_setk(d, DIAG_ARG, "error: too many inputs");
    for (int i = 0; i < ninputs; i++) {
        if (inputs[i].rank != g->inputs[i]->type.rank)
            return diag_setk(d, DIAG_SHAPE, "error: input \"%s\": rank %d, expected %d", input_name(g, i),
                             inputs[i].rank, g->inputs[i]->type.rank);
        if (inputs[i].dtype != g->inputs[i]->type.dtype)
            return diag_setk(d, DIAG_SHAPE, "error: input \"%s\": dtype %s, expected %s", input_name(g, i),
                             dtype_name(inputs[i].dtype), dtype_name(g->inputs[i]->type.dtype));
        shapes[i] = inputs[i].shape;
    }
    HostEnv e;
    if (!hostenv_init(&e, g, si->prog.n)) {
        hostenv_free(&e);
        return diag_oom(d);
    }
    bool ok = hostprog_run(g, &si->prog, shapes, &e, d);
    hostenv_free(&e);
    return ok;
}
