/*
 * canon.c — canonicalisation. Requires a verified graph; keeps it verified.
 *
 * canon_dce removes ops none of whose results is used by another op or by
 * the graph outputs, walking backwards so that chains die in one pass.
 */
#include "passes/passes.h"

#include <stdlib.h>

int canon_dce(Graph *g)
{
    int *uses = calloc((size_t)g->nvalues + 1, sizeof *uses);
    if (!uses)
        return 0;
    graph_for_each_op(g, op)
        for (int i = 0; i < op->nin; i++)
            uses[op->in[i]->id]++;
    for (int i = 0; i < g->noutputs; i++)
        uses[g->outputs[i]->id]++;
    int removed = 0;
    for (Op *op = g->last, *prev; op; op = prev) {
        prev = op->prev;
        bool live = false;
        for (int i = 0; i < op->nout; i++)
            live |= uses[op->out[i]->id] > 0;
        if (live)
            continue;
        for (int i = 0; i < op->nin; i++)
            uses[op->in[i]->id]--;
        graph_remove_op(g, op);
        removed++;
    }
    free(uses);
    return removed;
}

static bool same_type(const Type *a, const Type *b)
{
    return type_eq(a, b);
}

static bool all_const(const Attr *a, int64_t v)
{
    for (int i = 0; a && i < a->n; i++)
        if (!(a->kind == ATTR_DIMS ? dim_is(a->dims[i], v) : a->ints[i] == v))
            return false;
    return a != NULL;
}

/* True if op computes its first operand unchanged. */
static bool is_identity(const Op *op)
{
    if (op->nin < 1 || op->nout != 1 || !same_type(&op->in[0]->type, &op->out[0]->type))
        return false;
    switch (op->kind) {
    case OP_BROADCAST: {
        const Attr *axes = op_attr(op, "axes");
        for (int i = 0; i < axes->n; i++)
            if (axes->ints[i] != i)
                return false;
        return true;
    }
    case OP_RESHAPE:
    case OP_DYN_RESHAPE:
    case OP_DYN_BROADCAST:
    case OP_CONVERT:
        return true;
    case OP_TRANSPOSE: {
        const Attr *perm = op_attr(op, "perm");
        for (int i = 0; i < perm->n; i++)
            if (perm->ints[i] != i)
                return false;
        return true;
    }
    case OP_SLICE:
        return all_const(op_attr(op, "start"), 0) && all_const(op_attr(op, "stride"), 1);
    case OP_PAD:
        return all_const(op_attr(op, "low"), 0) && all_const(op_attr(op, "high"), 0);
    case OP_CONCAT:
        return op->nin == 1;
    default:
        return false;
    }
}

int canon_simplify(Graph *g)
{
    int n = 0;
    graph_for_each_op(g, op) {
        if (!is_identity(op))
            continue;
        Value *from = op->out[0], *to = op->in[0];
        if (!to->name)
            to->name = from->name;
        graph_replace_uses(g, from, to);
        n++;
    }
    return n + canon_dce(g);
}
