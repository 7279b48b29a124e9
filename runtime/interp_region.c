/*
 * interp_region.c — loop and if on the reference interpreter: each region
 * runs as a graph of its own (interp_run) on the operands the op passes
 * it. Semantics: doc/ops.md, "Control flow".
 */
#include "runtime/interp_impl.h"

#include <stdlib.h>
#include <string.h>

/* A borrowed view of t, as a region's input. */
static Tensor borrow(const Tensor *t)
{
    Tensor v = *t;
    v.owned = false;
    return v;
}

/* t, owned by the result: moved if it owns its data, else copied. */
static bool take(Interp *ip, Tensor *t, Tensor *res)
{
    if (t->owned) {
        *res = *t;
        memset(t, 0, sizeof *t);
        return true;
    }
    if (!interp_alloc(ip, res, t->dtype, t->rank, t->shape))
        return false;
    if (res->nbytes)
        memcpy(res->data, t->data, res->nbytes);
    return true;
}

/* One stacked result: the iterations' values, one after the other. */
typedef struct Stack {
    unsigned char *data;
    size_t len, cap;
    Tensor first;       /* the first iteration's shape (no data) */
    int64_t n;          /* iterations appended */
} Stack;

static bool stack_push(Interp *ip, Stack *s, int k, const Tensor *t)
{
    if (s->n == 0) {
        s->first = *t;
        s->first.data = NULL;
        s->first.owned = false;
    } else {
        bool same = t->dtype == s->first.dtype && t->rank == s->first.rank;
        for (int i = 0; same && i < t->rank; i++)
            same = t->shape[i] == s->first.shape[i];
        if (!same)
            return interp_fail(ip, "stacked result %d has another shape at iteration %lld than at the first", k,
                               (long long)s->n);
    }
    if (s->len + t->nbytes > s->cap) {
        size_t cap = s->cap ? s->cap : 256;
        while (cap < s->len + t->nbytes)
            if (!size_mul(cap, 2, &cap))
                return interp_oom(ip);
        unsigned char *p = realloc(s->data, cap);
        if (!p)
            return interp_oom(ip);
        s->data = p;
        s->cap = cap;
    }
    if (t->nbytes)
        memcpy(s->data + s->len, t->data, t->nbytes);
    s->len += t->nbytes;
    s->n++;
    return true;
}

/* The stacked result r of op: n entries of the first's shape; with no
 * iteration at all, the shape the result's type gives (or the body's
 * output type, where it is constant). */
static bool stack_result(Interp *ip, const Op *op, int r, const Type *body_t, Stack *s, Tensor *res)
{
    int64_t shape[MAX_RANK];
    const Type *t = &op->out[r]->type;
    shape[0] = s->n;
    for (int i = 1; i < t->rank; i++) {
        if (s->n) {
            shape[i] = s->first.shape[i - 1];
            continue;
        }
        if (dim_eval(t->dims[i], &ip->env, &shape[i]) == DIM_OK)
            continue;
        if (dim_is_const(body_t->dims[i - 1])) {
            shape[i] = body_t->dims[i - 1]->c;
            continue;
        }
        return interp_fail(ip, "the loop ran no iteration, and dim %d of stacked result %d is unknown", i, r);
    }
    if (!interp_alloc(ip, res, t->dtype, t->rank, shape))
        return false;
    if (res->nbytes != s->len)
        return interp_fail(ip, "stacked result %d: internal size mismatch", r);
    if (s->len)
        memcpy(res->data, s->data, s->len);
    return true;
}

/* Runs region r of op on inputs (through the interpreter, or the code a
 * compiled backend gave, Interp.region); a failure inside it is reported
 * as the op's. */
static bool run_region(Interp *ip, const Op *op, int r, const Tensor *in, int nin, Tensor *out, int nout,
                       const char *where)
{
    Diag e = {0};
    if (ip->region ? ip->region(ip->region_ctx, op, r, in, nin, out, nout, &e)
                   : interp_run(op->regions[r], in, nin, out, nout, &e))
        return true;
    return interp_failk(ip, e.kind, "%s: %s", where, e.msg);
}

bool interp_loop(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    if (op->nregions != 1)
        return interp_fail(ip, "has %d regions, expected 1", op->nregions);
    Graph *body = op->regions[0];
    int nc = loop_ncarried(op), nin = op->nin, nbout = body->noutputs, nscan = op->nout - nc;
    if (nc < 0 || nin < 2 + nc || nscan < 0 || body->ninputs != nin || nbout != 1 + op->nout)
        return interp_fail(ip, "the body does not match the op");
    if (tensor_numel(in[0]) != 1 || tensor_numel(in[1]) != 1)
        return interp_fail(ip, "the trip count and the condition must have one element");
    int64_t trip = interp_load_i(in[0], 0);
    bool cond = interp_load_i(in[1], 0) != 0;

    Tensor *bin = calloc((size_t)nin, sizeof *bin), *bout = calloc((size_t)nbout, sizeof *bout);
    Tensor *cur = calloc((size_t)nc + 1, sizeof *cur);
    Stack *st = calloc((size_t)nscan + 1, sizeof *st);
    Tensor it = {0}, ct = {0};
    bool ok = bin && bout && cur && st && tensor_alloc(&it, DT_I64, 0, NULL) && tensor_alloc(&ct, DT_BOOL, 0, NULL);
    if (!ok)
        interp_oom(ip);
    for (int k = 0; ok && k < nc; k++)
        cur[k] = borrow(in[2 + k]);
    for (int64_t i = 0; ok && i < trip && cond; i++) {
        *(int64_t *)it.data = i;
        *(unsigned char *)ct.data = cond;
        bin[0] = borrow(&it);
        bin[1] = borrow(&ct);
        for (int k = 0; k < nc; k++)
            bin[2 + k] = borrow(&cur[k]);
        for (int x = 2 + nc; x < nin; x++)
            bin[x] = borrow(in[x]);
        char where[64];
        snprintf(where, sizeof where, "iteration %lld", (long long)i);
        if (!(ok = run_region(ip, op, 0, bin, nin, bout, nbout, where)))
            break;
        cond = tensor_numel(&bout[0]) == 1 && interp_load_i(&bout[0], 0) != 0;
        for (int k = 0; k < nc; k++) {
            tensor_free(&cur[k]);
            cur[k] = bout[1 + k];
            memset(&bout[1 + k], 0, sizeof bout[1 + k]);
        }
        for (int s = 0; s < nscan && ok; s++)
            ok = stack_push(ip, &st[s], s, &bout[1 + nc + s]);
        for (int j = 0; j < nbout; j++)
            tensor_free(&bout[j]);
    }
    for (int k = 0; ok && k < nc; k++)
        ok = take(ip, &cur[k], &out[k]);
    for (int s = 0; ok && s < nscan; s++)
        ok = stack_result(ip, op, nc + s, &body->outputs[1 + nc + s]->type, &st[s], &out[nc + s]);
    for (int k = 0; cur && k < nc; k++)
        tensor_free(&cur[k]);
    for (int s = 0; st && s < nscan; s++)
        free(st[s].data);
    if (!ok)
        for (int r = 0; r < op->nout; r++)
            tensor_free(&out[r]);
    tensor_free(&it);
    tensor_free(&ct);
    free(bin);
    free(bout);
    free(cur);
    free(st);
    return ok;
}

bool interp_if(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    if (op->nregions != 2)
        return interp_fail(ip, "has %d regions, expected 2", op->nregions);
    if (tensor_numel(in[0]) != 1)
        return interp_fail(ip, "the condition must have one element");
    bool c = interp_load_i(in[0], 0) != 0;
    Graph *r = op->regions[c ? 0 : 1];
    if (r->ninputs != op->nin - 1 || r->noutputs != op->nout)
        return interp_fail(ip, "the %s branch does not match the op", c ? "then" : "else");
    Tensor *bin = calloc((size_t)op->nin, sizeof *bin);
    if (!bin)
        return interp_oom(ip);
    for (int i = 1; i < op->nin; i++)
        bin[i - 1] = borrow(in[i]);
    bool ok = run_region(ip, op, c ? 0 : 1, bin, op->nin - 1, out, op->nout, c ? "then branch" : "else branch");
    free(bin);
    return ok;
}
