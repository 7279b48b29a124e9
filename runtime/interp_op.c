/*
 * interp_op.c — one op on the interpreter, for compiled backends.
 *
 * Ops that a compiled backend runs on the host without a kernel of its own
 * (topk, nonzero, scatter, resize, ...) go through the same code as the
 * reference interpreter, with the symbols the host program has bound.
 */
#include "runtime/interp_impl.h"

#include <stdlib.h>

bool interp_run_op(Graph *g, const Op *op, const int64_t *symval, int nsyms, const Tensor *const *in,
                   Tensor *out, Diag *d)
{
    InterpFn *fn = op->kind >= 0 && op->kind < OP_COUNT ? interp_kernels[op->kind] : NULL;
    if (!fn)
        return diag_set(d, "%s: not supported by the interpreter", op_info(op->kind)->name);
    bool *set = malloc((size_t)nsyms + 1);
    int *from = malloc(((size_t)nsyms + 1) * sizeof *from);
    bool ok = set && from;
    if (ok) {
        for (int i = 0; i < nsyms; i++) {
            set[i] = true;
            from[i] = -1;
        }
        Interp ip = {.g = g, .d = d, .op = op, .symval = (int64_t *)symval, .symset = set,
                     .symfrom = from, .nsyms = nsyms};
        ip.env = (DimEnv){symval, set, nsyms};
        ok = fn(&ip, op, in, out);
        graph_value_names_free(g, ip.names);
    } else {
        diag_set(d, "out of memory");
    }
    free(set);
    free(from);
    return ok;
}
