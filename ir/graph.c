/*
 * graph.c — the graph: SSA values, ops in program order, inputs, outputs.
 *
 * Ops form a doubly linked list in program order (a valid topological
 * order: every operand is defined above its use). Values are owned by the op
 * that defines them, or by the graph for inputs. Nothing is ever freed
 * individually: the graph's arena releases everything at once, and the
 * `keep` list releases what lives outside it (mapped model files).
 */
#include "ir/ir.h"

#include <stdlib.h>
#include <string.h>

Graph *graph_new(const char *name)
{
    Graph *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->refs = 1;
    arena_init(&g->arena);
    dim_ctx_init(&g->dims, &g->arena);
    g->name = arena_strdup(&g->arena, name ? name : "main");
    if (!g->name) {
        graph_free(g);
        return NULL;
    }
    return g;
}

void graph_free(Graph *g)
{
    if (!g || __atomic_sub_fetch(&g->refs, 1, __ATOMIC_ACQ_REL) > 0)
        return;
    for (int i = g->nkeep - 1; i >= 0; i--)
        g->keep_free[i](g->keep[i]);
    free(g->keep);
    free(g->keep_free);
    arena_free(&g->arena);
    free(g);
}

const char *graph_error(const Graph *g) { return g->err.set ? g->err.msg : ""; }

bool graph_keep(Graph *g, void *p, void (*fn)(void *))
{
    if (g->nkeep == g->capkeep) {
        int cap = g->capkeep ? 2 * g->capkeep : 8;
        void **k = realloc(g->keep, (size_t)cap * sizeof *k);
        if (!k)
            return false;
        g->keep = k;
        void (**f)(void *) = realloc(g->keep_free, (size_t)cap * sizeof *f);
        if (!f)
            return false;
        g->keep_free = f;
        g->capkeep = cap;
    }
    g->keep[g->nkeep] = p;
    g->keep_free[g->nkeep] = fn;
    g->nkeep++;
    return true;
}

/* Appends p to an arena-backed growable array of pointers. */
static bool push(Graph *g, Value ***v, int *n, int *cap, Value *p)
{
    if (*n == *cap) {
        int ncap = *cap ? 2 * *cap : 8;
        Value **nv = arena_array(&g->arena, (size_t)ncap, sizeof *nv);
        if (!nv)
            return false;
        if (*n)
            memcpy(nv, *v, (size_t)*n * sizeof *nv);
        *v = nv;
        *cap = ncap;
    }
    (*v)[(*n)++] = p;
    return true;
}

static Value *new_value(Graph *g, Type t)
{
    Value *v = arena_alloc(&g->arena, sizeof *v);
    if (!v)
        return NULL;
    v->id = g->nvalues++;
    v->type = type_make(&g->arena, t.dtype, t.rank, t.dims);
    return v;
}

Value *graph_add_input(Graph *g, const char *name, Type t)
{
    Value *v = new_value(g, t);
    if (!v)
        return NULL;
    v->name = name ? arena_strdup(&g->arena, name) : NULL;
    if (!push(g, &g->inputs, &g->ninputs, &g->capinputs, v))
        return NULL;
    return v;
}

bool graph_add_output(Graph *g, Value *v)
{
    return push(g, &g->outputs, &g->noutputs, &g->capoutputs, v);
}

Op *graph_append_op(Graph *g, OpKind k, Value *const *in, int nin, const Type *out, int nout)
{
    Op *op = arena_alloc(&g->arena, sizeof *op);
    if (!op)
        return NULL;
    op->kind = k;
    op->nin = nin;
    op->nout = nout;
    op->in = arena_array(&g->arena, (size_t)(nin > 0 ? nin : 1), sizeof(Value *));
    op->out = arena_array(&g->arena, (size_t)(nout > 0 ? nout : 1), sizeof(Value *));
    if (!op->in || !op->out)
        return NULL;
    if (nin)
        memcpy(op->in, in, (size_t)nin * sizeof(Value *));
    for (int i = 0; i < nout; i++) {
        op->out[i] = new_value(g, out[i]);
        if (!op->out[i])
            return NULL;
        op->out[i]->def = op;
        op->out[i]->idx = i;
    }
    op->id = g->nops++;
    op->prev = g->last;
    if (g->last)
        g->last->next = op;
    else
        g->first = op;
    g->last = op;
    return op;
}

static void unlink_op(Graph *g, Op *op)
{
    if (op->prev)
        op->prev->next = op->next;
    else
        g->first = op->next;
    if (op->next)
        op->next->prev = op->prev;
    else
        g->last = op->prev;
    op->prev = op->next = NULL;
}

void graph_remove_op(Graph *g, Op *op)
{
    unlink_op(g, op);
    g->nops--;
}

void graph_move_op(Graph *g, Op *op, Op *before)
{
    if (op == before)
        return;
    unlink_op(g, op);
    if (!before) {
        op->prev = g->last;
        if (g->last)
            g->last->next = op;
        else
            g->first = op;
        g->last = op;
        return;
    }
    op->next = before;
    op->prev = before->prev;
    if (before->prev)
        before->prev->next = op;
    else
        g->first = op;
    before->prev = op;
}

void graph_replace_uses(Graph *g, Value *from, Value *to)
{
    /* the ops are in order: uses come after the def (a graph input's
     * from the first op); from's def, if any, is an op of g */
    Op *op = from->def ? from->def->next : g->first;
    for (; op; op = op->next)
        for (int i = 0; i < op->nin; i++)
            if (op->in[i] == from)
                op->in[i] = to;
    for (int i = 0; i < g->noutputs; i++)
        if (g->outputs[i] == from)
            g->outputs[i] = to;
}

int graph_count_uses(const Graph *g, const Value *v)
{
    int n = 0;
    graph_for_each_op(g, op)
        for (int i = 0; i < op->nin; i++)
            n += op->in[i] == v;
    for (int i = 0; i < g->noutputs; i++)
        n += g->outputs[i] == v;
    return n;
}

void graph_renumber(Graph *g)
{
    int id = 0, opid = 0;
    for (int i = 0; i < g->ninputs; i++)
        g->inputs[i]->id = id++;
    graph_for_each_op(g, op) {
        op->id = opid++;
        for (int i = 0; i < op->nout; i++)
            op->out[i]->id = id++;
    }
    g->nvalues = id;
    g->nops = opid;
}
