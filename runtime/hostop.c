/*
 * hostop.c — one op of a compiled model run on the host through the
 * interpreter's code: the ops no kernel template or library takes (topk,
 * nonzero, scatter, resize, ...). The JIT's thunk (codegen/exec.c) and AOT
 * objects (runtime/aot.c) both come here.
 */
#include "runtime/interp.h"
#include "runtime/rt.h"

#include <stdio.h>
#include <string.h>

static bool eval_dims(const Type *t, const int64_t *syms, int nsyms, int64_t *out)
{
    DimEnv env = {syms, NULL, nsyms};
    for (int i = 0; i < t->rank; i++)
        if (dim_eval(t->dims[i], &env, &out[i]) != DIM_OK)
            return false;
    return true;
}

static void view(Tensor *t, const Value *v, void *data, const int64_t *shape)
{
    memset(t, 0, sizeof *t);
    t->dtype = v->type.dtype;
    t->rank = v->type.rank;
    memcpy(t->shape, shape, (size_t)t->rank * sizeof *shape);
    t->data = data;
    t->nbytes = tensor_numel(t) * dtype_size(t->dtype);
}

void disc_rt_overflow(DiscRt *rt)
{
    disc_rt_fail_kind(rt, DIAG_SHAPE,
                      "the inputs' dims are too large: a size computed from them passes 2^63 (elements or bytes)");
}

int32_t interp_host_op(void *rt, Graph *g, const Op *op, void **bufs, const int64_t *syms, int nsyms,
                       int64_t (*out_shapes)[MAX_RANK])
{
    return interp_host_op_regions(rt, g, op, bufs, syms, nsyms, out_shapes, NULL, NULL);
}

int32_t interp_host_op_regions(void *rt, Graph *g, const Op *op, void **bufs, const int64_t *syms, int nsyms,
                               int64_t (*out_shapes)[MAX_RANK], InterpRegionFn *fn, void *ctx)
{
    enum { MAXOUT = MAX_RESULTS };
    if (op->nout > MAXOUT) {
        disc_rt_fail(rt, "%s: more than %d results", op_info(op->kind)->name, MAXOUT);
        return -1;
    }
    Tensor in[op->nin > 0 ? op->nin : 1], out[MAXOUT];
    const Tensor *inp[op->nin > 0 ? op->nin : 1];
    for (int i = 0; i < op->nin; i++) {
        int64_t shape[MAX_RANK];
        if (!eval_dims(&op->in[i]->type, syms, nsyms, shape)) {
            disc_rt_fail(rt, "%s: an operand's dims cannot be evaluated", op_info(op->kind)->name);
            return -1;
        }
        view(&in[i], op->in[i], bufs[i], shape);
        inp[i] = &in[i];
    }
    memset(out, 0, sizeof out);
    Diag d = {0};
    /* DISC_PROFILE: the op's time under its name (a loop's or if's
     * regions time their own kernels, so those are left out) */
    double t0 = disc_rt_profiling() && !op->nregions ? disc_rt_now() : 0;
    if (!interp_run_op_regions(g, op, syms, nsyms, inp, out, &d, fn, ctx)) {
        disc_rt_fail_kind(rt, d.kind, "%s", d.msg);
        return -1;
    }
    if (t0 > 0) {
        char what[96];
        snprintf(what, sizeof what, "host op %s (the interpreter's code)", op_info(op->kind)->name);
        disc_rt_prof_add(op, what, disc_rt_now() - t0);
    }
    int32_t rc = 0;
    for (int r = 0; r < op->nout; r++) {
        memcpy(out_shapes[r], out[r].shape, sizeof out_shapes[r]);
        void *p = disc_rt_alloc(rt, (int64_t)out[r].nbytes);
        if (!p) {
            rc = -1;
        } else {
            if (out[r].nbytes)
                memcpy(p, out[r].data, out[r].nbytes);
            bufs[op->nin + r] = p;
        }
        tensor_free(&out[r]);
    }
    return rc;
}
