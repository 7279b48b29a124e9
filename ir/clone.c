/*
 * clone.c — a deep copy of a graph, for compiling without changing it.
 *
 * Compiling rewrites a graph in place (shape analysis folds, canon merges,
 * codegen renumbers), so a loaded model is compiled as a clone: disc_compile
 * parses and imports once, however often the model is compiled.
 *
 * Everything of the IR is copied into the clone's own arena: values and
 * ops with their ids, names, source names and lines, attributes, the
 * symbols in their order with their bounds (so symbol ids, and the host
 * program's indices, are the same), every dim re-interned in the clone's
 * context. Constants' data is not copied: it may be a mapped file or the
 * raw_data of an ONNX model hundreds of megabytes long. The clone points
 * at the same bytes and holds a reference to its source (graph_ref), which
 * owns them: the source, its arena and what it keeps (graph_keep) live
 * until the source and every clone of it are freed. Passes never write
 * into constant data (they make new constants), so sharing is safe.
 */
#include "ir/ir.h"

#include <stdlib.h>
#include <string.h>

Graph *graph_ref(Graph *g)
{
    if (g)
        __atomic_add_fetch(&g->refs, 1, __ATOMIC_RELAXED);
    return g;
}

static void release(void *g) { graph_free(g); }

typedef struct Clone {
    Graph *g;        /* the copy */
    Dim **dims;      /* the source's dims' copies, by Dim.id */
    Value **vals;    /* the source's values' copies, by Value.id */
} Clone;

static bool copy_type(Clone *c, const Type *from, Type *to)
{
    Dim *dims[MAX_RANK];
    for (int i = 0; i < from->rank; i++)
        if (!(dims[i] = dim_copy(&c->g->dims, from->dims[i], c->dims)))
            return false;
    *to = type_make(&c->g->arena, from->dtype, from->rank, dims);
    return from->rank == 0 || to->dims;
}

static const char *copy_str(Clone *c, const char *s, bool *ok)
{
    char *r = s ? arena_strdup(&c->g->arena, s) : NULL;
    *ok &= !s || r;
    return r;
}

static bool copy_attrs(Clone *c, const Op *from, Op *to)
{
    Arena *a = &c->g->arena;
    to->nattrs = from->nattrs;
    to->attrs = arena_array(a, (size_t)(from->nattrs > 0 ? from->nattrs : 1), sizeof(Attr));
    bool ok = to->attrs != NULL;
    for (int i = 0; ok && i < from->nattrs; i++) {
        const Attr *f = &from->attrs[i];
        Attr *t = &to->attrs[i];
        *t = *f;
        t->name = copy_str(c, f->name, &ok);
        size_t n = (size_t)(f->n > 0 ? f->n : 1);
        switch (f->kind) {
        case ATTR_STR: t->s = copy_str(c, f->s, &ok); break;
        case ATTR_INTS:
            if ((t->ints = arena_array(a, n, sizeof *t->ints)) && f->n)
                memcpy(t->ints, f->ints, (size_t)f->n * sizeof *t->ints);
            ok &= t->ints != NULL;
            break;
        case ATTR_FLOATS:
            if ((t->floats = arena_array(a, n, sizeof *t->floats)) && f->n)
                memcpy(t->floats, f->floats, (size_t)f->n * sizeof *t->floats);
            ok &= t->floats != NULL;
            break;
        case ATTR_DIMS:
            ok &= (t->dims = arena_array(a, n, sizeof *t->dims)) != NULL;
            for (int k = 0; ok && k < f->n; k++)
                ok = !f->dims[k] || (t->dims[k] = dim_copy(&c->g->dims, f->dims[k], c->dims));
            break;
        case ATTR_INT:
        case ATTR_FLOAT:
        case ATTR_DTYPE: break;
        }
    }
    return ok;
}

static bool copy_op(Clone *c, const Op *from)
{
    Type out[from->nout > 0 ? from->nout : 1];
    Value *in[from->nin > 0 ? from->nin : 1];
    for (int i = 0; i < from->nin; i++)
        in[i] = c->vals[from->in[i]->id];
    for (int i = 0; i < from->nout; i++)
        if (!copy_type(c, &from->out[i]->type, &out[i]))
            return false;
    Op *op = graph_append_op(c->g, from->kind, in, from->nin, out, from->nout);
    if (!op || !copy_attrs(c, from, op))
        return false;
    bool ok = true;
    op->id = from->id;
    op->line = from->line;
    op->src = copy_str(c, from->src, &ok);
    for (int i = 0; i < from->nout; i++) {
        Value *v = op->out[i];
        v->id = from->out[i]->id;
        v->name = copy_str(c, from->out[i]->name, &ok);
        c->vals[v->id] = v;
    }
    for (int r = 0; ok && r < from->nregions; r++) { /* regions: deep copies of their own */
        Diag e = {0};
        Graph *copy = graph_clone(from->regions[r], &e);
        ok = copy && op_add_region(c->g, op, copy);
    }
    if (from->cst) { /* the data is the source's (see above) */
        if (!(op->cst = arena_alloc(&c->g->arena, sizeof *op->cst)))
            return false;
        *op->cst = *from->cst;
        op->cst->path = copy_str(c, from->cst->path, &ok);
    }
    return ok;
}

Graph *graph_clone(Graph *src, Diag *d)
{
    Clone c = {.g = graph_new(src->name)};
    c.dims = calloc((size_t)src->dims.count + 1, sizeof *c.dims);
    c.vals = calloc((size_t)src->nvalues + 1, sizeof *c.vals);
    Graph *g = c.g;
    bool ok = g && c.dims && c.vals;
    if (ok && !(ok = graph_keep(g, graph_ref(src), release)))
        graph_free(src); /* the reference graph_keep did not take */
    ok = ok && dim_ctx_copy_syms(&g->dims, &src->dims);
    if (ok)
        g->tied_dims = src->tied_dims;
    if (ok && src->file)
        ok = (g->file = arena_strdup(&g->arena, src->file)) != NULL;
    if (ok && src->store)
        ok = (g->store = arena_strdup(&g->arena, src->store)) != NULL;
    for (int i = 0; ok && i < src->ninputs; i++) {
        const Value *f = src->inputs[i];
        Type t;
        Value *v = copy_type(&c, &f->type, &t) ? graph_add_input(g, f->name, t) : NULL;
        if (!(ok = v && (!f->name || v->name)))
            break;
        v->id = f->id;
        c.vals[v->id] = v;
    }
    for (const Op *op = src->first; ok && op; op = op->next)
        ok = copy_op(&c, op);
    for (int i = 0; ok && i < src->noutputs; i++)
        ok = graph_add_output(g, c.vals[src->outputs[i]->id]);
    if (ok) {
        g->nvalues = src->nvalues;
        g->nops = src->nops;
    }
    free(c.dims);
    free(c.vals);
    if (!ok) {
        graph_free(g);
        diag_oom(d);
        return NULL;
    }
    return g;
}
