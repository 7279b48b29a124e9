/*
 * shape.c — the shape-analysis driver and its dump.
 *
 * Requires: a verified graph. Runs, in order:
 *   1. shape_propagate   fold shape sub-graphs, make dyn ops static,
 *                        re-infer every type (shapeval.c)
 *   2. constraints       symbol bounds and the user's --assume hints
 *   3. shape_equalities  requirements, unification, speculation (equal.c)
 *   4. hostprog_build    the host shape program (hostprog.c)
 * and verifies the graph again. After it, every dim of every value is an
 * expression over the input symbols or data-dependent symbols.
 */
#include "passes/passes.h"

#include <stdlib.h>
#include <string.h>

void shape_info_free(ShapeInfo *si)
{
    if (!si)
        return;
    cons_free(si->cons);
    arena_free(&si->arena);
    free(si);
}

/* "S % 8 == 0", "B <= 64", "S == T", "2*S + 1 < T". The fact joins the
 * constraints, and the host program checks it when the model runs: code
 * specialised on it (a variant left out, buffers shared) would be wrong for
 * shapes that break it. */
bool shape_parse_assume(ShapeInfo *si, const char *text, Diag *d)
{
    Graph *g = si->g;
    Constraints *c = si->cons;
    static const struct {
        const char *op;
        Rel rel;
    } rels[] = {{"==", REL_EQ}, {"!=", REL_NE}, {"<=", REL_LE}, {">=", REL_GE}, {"<", REL_LT}, {">", REL_GT}};
    const char *at = NULL;
    Rel rel = REL_EQ;
    size_t oplen = 0;
    for (size_t i = 0; i < sizeof rels / sizeof rels[0] && !at; i++)
        if ((at = strstr(text, rels[i].op))) {
            rel = rels[i].rel;
            oplen = strlen(rels[i].op);
        }
    if (!at)
        return diag_set(d, "error: --assume '%s': expected a relation (==, !=, <=, >=, <, >)", text);
    char *lhs = strndup(text, (size_t)(at - text));
    const char *rhs = at + oplen;
    if (!lhs)
        return diag_oom(d);
    Diag e = {0};
    bool ok;
    char *pct = strchr(lhs, '%');
    if (pct) {
        *pct = 0;
        Dim *a = dim_parse(g, lhs, &e), *k = a ? dim_parse(g, pct + 1, &e) : NULL;
        Dim *r = k ? dim_parse(g, rhs, &e) : NULL;
        ok = r && rel == REL_EQ && dim_is(r, 0) && dim_is_const(k) && k->c > 0;
        if (ok) {
            cons_add_divisible(c, a, k->c, "user");
            hostprog_push(si, (HostStep){.kind = HS_REQUIRE, .lhs = dim_mod(&g->dims, a, k), .rel = REL_EQ,
                                         .rhs = r, .what = arena_printf(&si->arena, "--assume '%s'", text)});
        }
        else if (!e.set)
            diag_set(&e, "only 'E %% K == 0' with a positive constant K is supported");
    } else {
        Dim *a = dim_parse(g, lhs, &e), *b = a ? dim_parse(g, rhs, &e) : NULL;
        ok = b != NULL;
        if (ok) {
            cons_add(c, a, rel, b, "user");
            hostprog_push(si, (HostStep){.kind = HS_REQUIRE, .lhs = a, .rel = rel, .rhs = b,
                                         .what = arena_printf(&si->arena, "--assume '%s'", text)});
        }
    }
    free(lhs);
    if (!ok)
        return diag_set(d, "error: --assume '%s': %s", text, e.msg);
    return true;
}

ShapeInfo *shape_analyze(Graph *g, const ShapeOpts *o, Diag *d)
{
    ShapeInfo *si = calloc(1, sizeof *si);
    if (!si) {
        diag_oom(d);
        return NULL;
    }
    si->g = g;
    arena_init(&si->arena);
    si->cons = cons_new(&g->dims);
    bool ok = si->cons != NULL || diag_oom(d);
    for (int i = 0; ok && o && i < o->nassume; i++)
        ok = shape_parse_assume(si, o->assume[i], d);
    if (ok && !cons_consistent(si->cons))
        ok = diag_set(d, "error: the assumptions contradict each other or the symbol bounds");
    ok = ok && shape_propagate(g, si, d) && shape_equalities(si, d) && hostprog_build(si, d);
    if (ok)
        ok = graph_verify(g, d);
    /* a failed allocation may have left a NULL that read as "unknown" */
    if (diag_arena_failed(d, &g->arena) || diag_arena_failed(d, &si->arena))
        ok = false;
    if (!ok) {
        shape_info_free(si);
        return NULL;
    }
    return si;
}

static void print_class_dims(FILE *f, Dim **dims, int n)
{
    for (int i = 0; i < n; i++) {
        fputs(i ? ", " : "", f);
        dim_print(f, dims[i]);
    }
}

/* True if sym appears in an input type, a result type or a dim attribute. */
static bool sym_used(const Graph *g, const Dim *sym)
{
    for (int i = 0; i < g->ninputs; i++)
        for (int k = 0; k < g->inputs[i]->type.rank; k++)
            if (dim_mentions(g->inputs[i]->type.dims[k], sym))
                return true;
    graph_for_each_op(g, op) {
        for (int r = 0; r < op->nout; r++)
            for (int k = 0; k < op->out[r]->type.rank; k++)
                if (dim_mentions(op->out[r]->type.dims[k], sym))
                    return true;
        for (int a = 0; a < op->nattrs; a++)
            if (op->attrs[a].kind == ATTR_DIMS)
                for (int k = 0; k < op->attrs[a].n; k++)
                    if (dim_mentions(op->attrs[a].dims[k], sym))
                        return true;
    }
    return false;
}

/* The constraint set as comments, without the bounds of placeholder
 * symbols that analysis resolved away. */
static void print_constraints(FILE *f, const ShapeInfo *si)
{
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (!m)
        return;
    cons_print(m, si->cons);
    fclose(m);
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        char name[128];
        if (sscanf(line, "%127[A-Za-z0-9_] %*[<>=] %*d", name) == 1 && strchr(line, '(') == NULL) {
            Dim *sym = dim_sym_find(&si->g->dims, name);
            if (sym && !sym_used(si->g, sym))
                continue;
        }
        fprintf(f, "#   %s\n", line);
    }
    free(text);
}

void shape_print(FILE *f, const ShapeInfo *si)
{
    const Graph *g = si->g;
    graph_print(f, g, &(PrintOpts){16, true, false});
    fputs("\n# shape analysis\n# dim classes (first is the representative):\n", f);
    int n = 0;
    for (int i = 0; i < si->ndclass; i++) {
        fputs("#   {", f);
        print_class_dims(f, si->dclass[i].dims, si->dclass[i].n);
        fprintf(f, "}%s\n", si->dclass[i].speculative ? "  speculative" : "");
        n++;
    }
    if (!n)
        fputs("#   (none)\n", f);
    fputs("# size classes:\n", f);
    char **names = graph_value_names(g);
    for (int i = 0; i < si->nsclass; i++) {
        const SizeClass *c = &si->sclass[i];
        fputs("#   ", f);
        dim_print(f, c->size);
        fputs(":", f);
        for (int j = 0; j < c->n; j++)
            fprintf(f, " %s", names ? names[c->values[j]->id] : "?");
        fputc('\n', f);
    }
    if (!si->nsclass)
        fputs("#   (none)\n", f);
    graph_value_names_free(g, names);
    fputs("# constraints:\n", f);
    print_constraints(f, si);
    fputs("# host program:\n", f);
    hostprog_print(f, g, &si->prog);
}
