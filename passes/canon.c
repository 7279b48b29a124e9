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
