/*
 * host.c — the host flow: one generated function per model.
 *
 *     int32_t disc_main(DiscRt *rt, void **io, int64_t *shapes, int64_t *syms)
 *
 * io holds the data of the inputs, then three slots per output: its data
 * (on entry the caller's buffer or NULL), the buffer's capacity in bytes,
 * and a flag set when the flow allocated it for the caller (exec.c);
 * shapes holds the dims of every input, then receives those of every
 * output; syms receives the value of every symbol. The function
 *   1. binds every symbol from the input dims (the host shape program's
 *      BIND steps) and evaluates its CHECK, REQUIRE and BCAST steps, in
 *      order; a violated step returns its index + 1, and the caller turns
 *      it into the documented message (hostprog_run);
 *   2. walks the fusion plan: constants are addresses, shape values small
 *      arrays computed from the dims, kernels run through
 *      disc_rt_parallel_for over their range, library ops and host ops
 *      through thunks (which bind data-dependent symbols as they run);
 *      every buffer comes from disc_rt_alloc;
 *   3. writes the outputs' data and dims.
 * A runtime failure returns -1 with the message in the DiscRt.
 */
#include "codegen/host.h"
#include "codegen/kern.h"

#include <stdlib.h>
#include <string.h>

#define B (cg->b)


LLVMValueRef host_fn_decl(Cg *cg, const char *name, LLVMTypeRef ret, LLVMTypeRef *params, int n,
                          LLVMTypeRef *fty)
{
    *fty = LLVMFunctionType(ret, params, (unsigned)n, false);
    LLVMValueRef f = LLVMGetNamedFunction(cg->mod, name);
    return f ? f : LLVMAddFunction(cg->mod, name, *fty);
}

LLVMValueRef host_gep(Cg *cg, LLVMTypeRef t, LLVMValueRef base, int64_t i)
{
    LLVMValueRef ix = cg_i64(cg, i);
    return LLVMBuildGEP2(B, t, base, &ix, 1, "");
}

void host_check_or_return(Host *h, LLVMValueRef cond, int32_t code)
{
    Cg *cg = h->cg;
    LLVMBasicBlockRef here = LLVMGetInsertBlock(B);
    LLVMBasicBlockRef ok = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "ok");
    LLVMBasicBlockRef bad = code == -1 && h->fail_fn == cg->fn ? h->fail : NULL; /* -1: one block */
    if (!bad) {
        bad = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "bad");
        LLVMPositionBuilderAtEnd(B, bad);
        LLVMBuildRet(B, cg_i32(cg, code));
        if (code == -1) {
            h->fail = bad;
            h->fail_fn = cg->fn;
        }
    }
    LLVMPositionBuilderAtEnd(B, here);
    LLVMBuildCondBr(B, cond, ok, bad);
    LLVMPositionBuilderAtEnd(B, ok);
}

static bool mentions_data(const HostProg *p, const Dim *d)
{
    for (int i = 0; i < p->n; i++)
        if (p->steps[i].kind == HS_DATA && dim_mentions(d, p->steps[i].sym))
            return true;
    return false;
}

/* Step i, a REQUIRE or BCAST: the flow returns i + 1 where it fails. */
static void emit_check(Host *h, int i)
{
    Cg *cg = h->cg;
    const HostStep *s = &cg->si->prog.steps[i];
    LLVMValueRef a = cg_dim(cg, s->lhs), b = cg_dim(cg, s->rhs), c;
    if (s->kind == HS_BCAST) {
        LLVMValueRef one = cg_i64(cg, 1);
        c = LLVMBuildOr(B, LLVMBuildICmp(B, LLVMIntEQ, a, b, ""),
                        LLVMBuildOr(B, LLVMBuildICmp(B, LLVMIntEQ, a, one, ""), LLVMBuildICmp(B, LLVMIntEQ, b, one, ""),
                                    ""),
                        "");
    } else {
        LLVMIntPredicate pr[] = {LLVMIntEQ, LLVMIntNE, LLVMIntSLE, LLVMIntSLT, LLVMIntSGE, LLVMIntSGT};
        c = LLVMBuildICmp(B, pr[s->rel], a, b, "");
    }
    host_check_or_return(h, c, i + 1);
}

/* Whether every DATA symbol d mentions is bound (by a host op emitted
 * before this point), and one of them by op. */
static bool ready_after(const Host *h, const Op *op, const Dim *d, bool *mine)
{
    const HostProg *p = &h->cg->si->prog;
    for (int i = 0; i < p->n; i++) {
        const HostStep *s = &p->steps[i];
        if (s->kind != HS_DATA || !dim_mentions(d, s->sym))
            continue;
        if (!h->bound[s->sym->id])
            return false;
        *mine |= s->value->def == op;
    }
    return true;
}

/* The DATA symbols host op binds (the host program's HS_DATA steps of
 * its results), into syms (NULL: counted only). */
static int data_syms(const HostProg *p, const Op *op, Dim **syms)
{
    int n = 0;
    for (int i = 0; i < p->n; i++)
        if (p->steps[i].kind == HS_DATA && p->steps[i].value->def == op) {
            if (syms)
                syms[n] = p->steps[i].sym;
            n++;
        }
    return n;
}

/* After a host op that binds DATA symbols (syms): the REQUIRE and BCAST
 * steps that waited for them (emit_steps leaves out those that mention
 * one), each once all of its symbols are bound. A broadcast of a dim that
 * only a NonZero's count gives, say, is checked before a kernel reads it. */
static void emit_checks_after(Host *h, const Op *op, Dim *const *syms, int n)
{
    const HostProg *p = &h->cg->si->prog;
    for (int i = 0; i < n; i++)
        h->bound[syms[i]->id] = true;
    for (int i = 0; n && i < p->n; i++) {
        const HostStep *s = &p->steps[i];
        bool mine = false;
        if ((s->kind == HS_REQUIRE || s->kind == HS_BCAST) && ready_after(h, op, s->lhs, &mine) &&
            ready_after(h, op, s->rhs, &mine) && mine)
            emit_check(h, i);
    }
}

static void emit_steps(Host *h)
{
    Cg *cg = h->cg;
    const HostProg *p = &cg->si->prog;
    const Graph *g = cg->g;
    int off[g->ninputs + 1];
    int o = 0;
    for (int i = 0; i < g->ninputs; i++) {
        off[i] = o;
        o += g->inputs[i]->type.rank;
    }
    for (int i = 0; i < p->n; i++) {
        const HostStep *s = &p->steps[i];
        switch (s->kind) {
        case HS_BIND: {
            LLVMValueRef v = LLVMBuildLoad2(B, cg->t_i64, host_gep(cg, cg->t_i64, h->shapes, off[s->input] + s->axis), "");
            const Dim *y = s->sym; /* within the symbol's bounds */
            LLVMValueRef in = LLVMBuildICmp(B, LLVMIntSGE, v, cg_i64(cg, y->lo), "");
            if (y->hi != DIM_INF)
                in = LLVMBuildAnd(B, in, LLVMBuildICmp(B, LLVMIntSLE, v, cg_i64(cg, y->hi), ""), "");
            host_check_or_return(h, in, i + 1);
            LLVMBuildStore(B, v, host_gep(cg, cg->t_i64, h->syms, y->id));
            Dim *sym = s->sym;
            cg_dim_forget_syms(cg, &sym, 1); /* a dim of it read before is stale */
            break;
        }
        case HS_CHECK: {
            LLVMValueRef got = LLVMBuildLoad2(B, cg->t_i64, host_gep(cg, cg->t_i64, h->shapes, off[s->input] + s->axis), "");
            host_check_or_return(h, LLVMBuildICmp(B, LLVMIntEQ, got, cg_dim(cg, s->lhs), ""), i + 1);
            break;
        }
        case HS_REQUIRE:
        case HS_BCAST:
            if (!mentions_data(p, s->lhs) && !mentions_data(p, s->rhs))
                emit_check(h, i); /* else after the host op that binds it */
            break;
        default:
            break;
        }
    }
}

/* v's size in bytes. */
static LLVMValueRef bytes_of(Host *h, const Value *v)
{
    Cg *cg = h->cg;
    LLVMValueRef n = cg_dim(cg, type_numel(&cg->g->dims, &v->type));
    return cg_checked(cg, B, true, n, cg_i64(cg, (int64_t)dtype_size(v->type.dtype)));
}

static int output_index(const Graph *g, const Value *v)
{
    for (int i = 0; i < g->noutputs; i++)
        if (g->outputs[i] == v)
            return i;
    return -1;
}

/* A call of the runtime's fn(rt, ...) returning a pointer, checked. */
static LLVMValueRef rt_ptr_call(Host *h, const char *fn, LLVMValueRef *args, int n)
{
    Cg *cg = h->cg;
    LLVMTypeRef fty, params[4] = {cg->t_p8, cg->t_pp8, cg->t_i64, cg->t_i64};
    if (n == 2)
        params[1] = cg->t_i64;
    LLVMValueRef f = host_fn_decl(cg, fn, cg->t_p8, params, n, &fty);
    LLVMValueRef p = LLVMBuildCall2(B, fty, f, args, (unsigned)n, "");
    host_check_or_return(h, LLVMBuildIsNotNull(B, p, ""), -1);
    return p;
}

/* A call of the runtime's copy fn(rt, dst, src, bytes), checked. */
static void rt_copy_call(Host *h, const char *fn, LLVMValueRef dst, LLVMValueRef src, LLVMValueRef bytes)
{
    Cg *cg = h->cg;
    LLVMTypeRef fty, params[4] = {cg->t_p8, cg->t_p8, cg->t_p8, cg->t_i64};
    LLVMValueRef f = host_fn_decl(cg, fn, cg->t_i32, params, 4, &fty);
    LLVMValueRef a[4] = {h->rt, dst, src, bytes};
    LLVMValueRef rc = LLVMBuildCall2(B, fty, f, a, 4, "");
    host_check_or_return(h, LLVMBuildICmp(B, LLVMIntEQ, rc, cg_i32(cg, 0), ""), -1);
}

/* A slot of the memory plan's block for v, or NULL. */
static LLVMValueRef plan_slot(Host *h, const Value *v)
{
    Cg *cg = h->cg;
    if (!h->block || !cg->mp || cg->mp->slot_of[v->id] < 0 || output_index(cg->g, v) >= 0)
        return NULL;
    LLVMValueRef off = h->slot_off[cg->mp->slot_of[v->id]];
    return LLVMBuildGEP2(B, cg->t_i8, h->block, &off, 1, "");
}

/* The memory plan's one block for this run (on the device, if kernels run
 * there): the flow computes every slot's size from the symbols, the
 * runtime lays the slots out (disc_rt_place) and the block is allocated
 * at the size that layout takes. */
static bool plan_block(Host *h)
{
    Cg *cg = h->cg;
    const MemPlan *mp = cg->mp;
    int n = mp->nslots;
    h->slot_off = arena_array(&cg->g->arena, (size_t)n, sizeof *h->slot_off);
    if (!h->slot_off)
        return diag_setk(cg->d, DIAG_RESOURCE, "codegen: out of memory");
    LLVMValueRef bytes = LLVMBuildArrayAlloca(cg->eb, cg->t_i64, cg_i64(cg, n), "");
    LLVMValueRef off = LLVMBuildArrayAlloca(cg->eb, cg->t_i64, cg_i64(cg, n), "");
    LLVMValueRef live = LLVMBuildArrayAlloca(cg->eb, cg->t_i32, cg_i64(cg, 2 * n), "");
    for (int s = 0; s < n; s++) {
        LLVMBuildStore(B, cg_dim(cg, mp->slots[s].bytes), host_gep(cg, cg->t_i64, bytes, s));
        LLVMBuildStore(B, cg_i32(cg, mp->slots[s].first), host_gep(cg, cg->t_i32, live, 2 * s));
        LLVMBuildStore(B, cg_i32(cg, mp->slots[s].last), host_gep(cg, cg->t_i32, live, 2 * s + 1));
    }
    LLVMTypeRef fty, params[5] = {cg->t_p8, cg->t_i32, cg->t_p8, cg->t_p8, cg->t_p8};
    LLVMValueRef f = host_fn_decl(cg, "disc_rt_place", cg->t_i64, params, 5, &fty);
    LLVMValueRef args[5] = {h->rt, cg_i32(cg, n), LLVMBuildBitCast(B, bytes, cg->t_p8, ""),
                            LLVMBuildBitCast(B, live, cg->t_p8, ""), LLVMBuildBitCast(B, off, cg->t_p8, "")};
    LLVMValueRef total = LLVMBuildCall2(B, fty, f, args, 5, "");
    host_check_or_return(h, LLVMBuildICmp(B, LLVMIntSGE, total, cg_i64(cg, 0), ""), -1);
    for (int s = 0; s < n; s++)
        h->slot_off[s] = LLVMBuildLoad2(B, cg->t_i64, host_gep(cg, cg->t_i64, off, s), "");
    LLVMValueRef aargs[2] = {h->rt, total};
    h->block = rt_ptr_call(h, cg->target->dev_memory ? "disc_rt_dev_alloc" : "disc_rt_alloc", aargs, 2);
    return true;
}

/* Memory for v: a graph output goes straight to the caller's buffer (or
 * to memory the caller will own), anything else to run memory. */
LLVMValueRef host_alloc(Host *h, Value *v)
{
    Cg *cg = h->cg;
    LLVMValueRef bytes = bytes_of(h, v), p;
    int k = output_index(cg->g, v);
    if (!cg->target->dev_memory && (p = plan_slot(h, v))) {
        h->vbuf[v->id] = p;
        return p;
    }
    if (k >= 0 && !cg->target->dev_memory) { /* (on a device target, the caller's may be device memory) */
        LLVMValueRef args[4] = {h->rt, h->io, cg_i64(cg, cg->g->ninputs + 3 * k), bytes};
        p = rt_ptr_call(h, "disc_rt_output", args, 4);
    } else {
        LLVMValueRef args[2] = {h->rt, bytes};
        p = rt_ptr_call(h, "disc_rt_alloc", args, 2);
    }
    h->vbuf[v->id] = p;
    return p;
}

LLVMValueRef host_alloc_k(Host *h, Value *v)
{
    Cg *cg = h->cg;
    if (!cg->target->dev_memory)
        return host_alloc(h, v);
    LLVMValueRef p = plan_slot(h, v);
    if (!p) {
        LLVMValueRef args[2] = {h->rt, bytes_of(h, v)};
        p = rt_ptr_call(h, "disc_rt_dev_alloc", args, 2);
    }
    h->dbuf[v->id] = p;
    return p;
}

static LLVMValueRef no_buffer(Cg *cg, const Value *v)
{
    diag_setk(cg->d, DIAG_INTERNAL, "codegen: %s reads a value with no buffer",
              v->def ? op_info(v->def->kind)->name : "the flow");
    return NULL;
}

/* A graph input's data on the device (dev) or the host, from the caller's
 * pointer (disc_rt_dev_input: copied where it is on the other side). */
static LLVMValueRef raw_view(Host *h, Value *v, bool dev)
{
    Cg *cg = h->cg;
    LLVMTypeRef fty, params[4] = {cg->t_p8, cg->t_p8, cg->t_i64, cg->t_i32};
    LLVMValueRef f = host_fn_decl(cg, "disc_rt_dev_input", cg->t_p8, params, 4, &fty);
    LLVMValueRef a[4] = {h->rt, h->raw[v->id], bytes_of(h, v), cg_i32(cg, dev)};
    LLVMValueRef p = LLVMBuildCall2(B, fty, f, a, 4, "");
    host_check_or_return(h, LLVMBuildIsNotNull(B, p, ""), -1);
    return p;
}

/* A copy of v's data src in run memory on the device (dev) or the host. */
static LLVMValueRef copied(Host *h, Value *v, LLVMValueRef src, bool dev)
{
    LLVMValueRef bytes = bytes_of(h, v);
    LLVMValueRef args[2] = {h->rt, bytes};
    LLVMValueRef p = rt_ptr_call(h, dev ? "disc_rt_dev_alloc" : "disc_rt_alloc", args, 2);
    rt_copy_call(h, dev ? "disc_rt_dev_in" : "disc_rt_dev_out", p, src, bytes);
    return p;
}

LLVMValueRef host_kbuf(Host *h, Value *v)
{
    Cg *cg = h->cg;
    if (!cg->target->dev_memory)
        return h->vbuf[v->id] ? h->vbuf[v->id] : no_buffer(cg, v);
    if (h->dbuf[v->id])
        return h->dbuf[v->id];
    if (h->raw[v->id]) /* a graph input: copied in unless the caller's is on the device */
        return h->dbuf[v->id] = raw_view(h, v, true);
    if (v->def && v->def->kind == OP_CONST && h->vbuf[v->id])
        return h->dbuf[v->id] = cg->target->const_dev(h, v->def);
    if (!h->vbuf[v->id])
        return no_buffer(cg, v);
    return h->dbuf[v->id] = copied(h, v, h->vbuf[v->id], true);
}

LLVMValueRef host_hbuf(Host *h, Value *v)
{
    Cg *cg = h->cg;
    if (h->vbuf[v->id])
        return h->vbuf[v->id];
    if (cg->target->dev_memory && h->raw[v->id])
        return h->vbuf[v->id] = raw_view(h, v, false);
    if (!cg->target->dev_memory || !h->dbuf[v->id])
        return no_buffer(cg, v);
    return h->vbuf[v->id] = copied(h, v, h->dbuf[v->id], false);
}

LLVMValueRef host_ptr_array(Host *h, LLVMValueRef *v, int n)
{
    Cg *cg = h->cg;
    LLVMValueRef arr = LLVMBuildArrayAlloca(cg->eb, cg->t_p8, cg_i64(cg, n > 0 ? n : 1), "");
    for (int i = 0; i < n; i++)
        LLVMBuildStore(B, v[i], host_gep(cg, cg->t_p8, arr, i));
    return arr;
}

/* Room for n kernels in the kernel tables (signatures, infos, sharing and
 * descriptions), made before a kernel is emitted: the tables always have
 * an entry for each of the cg->nkernels kernels. */
static bool kernel_room(Cg *cg, int n)
{
    char **sv = realloc(cg->ksig, (size_t)n * sizeof *sv);
    if (sv)
        cg->ksig = sv;
    char **dv = sv ? realloc(cg->kdesc, (size_t)n * sizeof *dv) : NULL;
    if (dv)
        cg->kdesc = dv;
    KernelInfo *kv = dv ? realloc(cg->kinfo, (size_t)n * sizeof *kv) : NULL;
    if (kv)
        cg->kinfo = kv;
    KShare *hv = kv ? realloc(cg->kshare, (size_t)n * sizeof *hv) : NULL;
    if (hv)
        cg->kshare = hv;
    if (!hv)
        return diag_setk(cg->d, DIAG_RESOURCE, "codegen: out of memory");
    for (int i = cg->nkernels; i < n; i++) {
        cg->ksig[i] = cg->kdesc[i] = NULL;
        cg->kshare[i] = (KShare){0};
    }
    return true;
}

/* Whether d is built from constants and the keys of m alone (seen: the
 * nodes found so, each walked once). */
static bool covered(Dim *d, const DimMap *m, DimMap *seen)
{
    if (d->kind == DIM_CONST || dimmap_get(m, d) || dimmap_get(seen, d))
        return true;
    if (d->kind == DIM_SYM)
        return false;
    for (int i = 0; i < d->n; i++)
        if (!covered(d->args[i], m, seen))
            return false;
    dimmap_put(seen, d, d);
    return true;
}

/* Whether the group whose symbols are cg->ks (by slot, its signature
 * equal to kernel k's up to their names) runs kernel k: the facts k's
 * code took hold of its dims too. ki gets k's info with the group's dims. */
static bool shares(Cg *cg, int k, KernelInfo *ki)
{
    const KShare *sh = &cg->kshare[k];
    KSyms *ks = &cg->ks;
    *ki = cg->kinfo[k];
    if (ks->n != sh->nsig)
        return false;
    bool same = true;
    for (int i = 0; i < ks->n; i++)
        same &= ks->sym[i] == sh->sym[i];
    if (same) { /* its own symbols: the slots its code reads beyond them too */
        for (int i = sh->nsig; i < sh->nsym; i++)
            if (cg_ksym_slot(ks, sh->sym[i]) < 0)
                return false;
        return true;
    }
    if (sh->alone)
        return false;
    DimCtx *cx = &cg->g->dims;
    DimMap m, seen;
    dimmap_init(&m);
    dimmap_init(&seen);
    for (int i = 0; i < ks->n; i++)
        dimmap_put(&m, sh->sym[i], ks->sym[i]);
    bool ok = !m.failed;
    /* what is carried over from k's group (its facts, range and grain)
     * must be built from the dims its signature names alone: a dim read
     * whole by slot may hide a symbol that another part of k's group
     * mentions directly */
    for (int i = 0; ok && i < sh->nfact; i++) {
        ok = covered(sh->fact[i], &m, &seen);
        Dim *d = ok ? dim_subst(cx, sh->fact[i], &m) : NULL;
        ok = d && kern_maybe_one(cg, d) == sh->maybe1[i];
    }
    ok = ok && covered(ki->range, &m, &seen) && (!ki->grain_dim || covered(ki->grain_dim, &m, &seen));
    if (ok) {
        ki->range = dim_subst(cx, ki->range, &m);
        if (ki->grain_dim)
            ki->grain_dim = dim_subst(cx, ki->grain_dim, &m);
        ok = ki->range && (!cg->kinfo[k].grain_dim || ki->grain_dim);
    }
    dimmap_free(&m);
    dimmap_free(&seen);
    return ok;
}

/* The kernel of a group: an earlier one with the same signature, or a new
 * one. Where the target's kernels read symbols by slot, the signature is
 * the renamed one and cg->ks the group's symbols for the launch. */
static bool kernel_for(Cg *cg, const Group *grp, KernelInfo *ki)
{
    bool slots = cg->target->kernel_slots;
    KSyms *ks = slots ? &cg->ks : NULL;
    if (ks)
        cg_ksyms_clear(ks);
    char *sig = cg_kernel_signature(grp, ks);
    if (!sig)
        return diag_setk(cg->d, DIAG_RESOURCE, "codegen: out of memory");
    for (int i = 0; i < cg->nkernels; i++)
        if (cg->ksig[i] && !strcmp(cg->ksig[i], sig)) {
            if (slots && !shares(cg, i, ki)) {
                if (ks->oom) {
                    free(sig);
                    return diag_setk(cg->d, DIAG_RESOURCE, "codegen: out of memory");
                }
                continue;
            }
            if (!slots)
                *ki = cg->kinfo[i];
            cg->nreused++;
            free(sig);
            return true;
        }
    int k = cg->nkernels;
    if (!kernel_room(cg, k + 1)) {
        free(sig);
        return false;
    }
    KShare *sh = &cg->kshare[k];
    int nsig = ks ? ks->n : 0;
    CgFnState st;
    cg_fn_save(cg, &st);
    cg->kslot = ks;
    cg->kfacts = ks ? sh : NULL;
    bool ok = cg->target->kernel(cg, grp, ki);
    cg->kslot = NULL;
    cg->kfacts = NULL;
    cg_fn_restore(cg, &st);
    if (!ok && cg->nkernels <= k) { /* the target took no kernel slot */
        free(sh->fact);
        free(sh->maybe1);
        *sh = (KShare){0};
        free(sig);
        return false;
    }
    cg->ksig[k] = sig;
    cg->kinfo[k] = *ki;
    if (ks) {
        if (ks->oom || !(sh->sym = malloc(((size_t)ks->n + 1) * sizeof *sh->sym)))
            return diag_setk(cg->d, DIAG_RESOURCE, "codegen: out of memory");
        if (ks->n)
            memcpy(sh->sym, ks->sym, (size_t)ks->n * sizeof *sh->sym);
        sh->nsym = ks->n;
        sh->nsig = nsig;
        sh->alone |= ks->n > nsig;
    }
    return ok;
}

static bool emit_shape_op(Host *h, Op *op);

/* One op as its own group: the fallback for a group no template takes. */
static bool emit_single(Host *h, Op *op)
{
    Value *ins[op->nin + 1];
    int nins = 0;
    for (int i = 0; i < op->nin; i++) {
        bool dup = false;
        for (int j = 0; j < nins; j++)
            dup |= ins[j] == op->in[i];
        if (!dup)
            ins[nins++] = op->in[i];
    }
    Group g1 = {.kind = fuse_kind_of(op), .id = -1, .ops = &op, .nops = 1, .ins = ins, .nins = nins,
                .outs = op->out, .nouts = op->nout, .root = op};
    switch (g1.kind) {
    case FUSE_SHAPE: return emit_shape_op(h, op);
    case FUSE_LIBRARY: return h->cg->target->library ? h->cg->target->library(h, &g1) : host_emit_library_op(h, op);
    case FUSE_OPAQUE: return host_emit_host_op(h, op);
    default: return host_emit_kernel_group(h, &g1);
    }
}

/* The split variant's kernels of the group whose row kernel is fn: made
 * once per row kernel (kernel.c, "split rows"), each in its own slot of
 * the kernel tables. */
static bool split_for(Cg *cg, const Group *grp, LLVMValueRef fn, KernelInfo *part, KernelInfo *fin)
{
    for (int i = 0; i < cg->nsplit; i++)
        if (cg->split[i][0] == fn) {
            part->fn = cg->split[i][1];
            fin->fn = cg->split[i][2];
            return true;
        }
    int k = cg->nkernels;
    if (!kernel_room(cg, k + 2))
        return false;
    /* with slots, read as the row kernel's: their facts noted with its
     * own when they are its group's symbols, else it is shared no more */
    KShare *row = NULL;
    for (int i = 0; i < k && cg->target->kernel_slots; i++)
        if (cg->kinfo[i].fn == fn)
            row = &cg->kshare[i];
    KSyms *ks = cg->target->kernel_slots ? &cg->ks : NULL;
    int nsym = ks ? ks->n : 0;
    bool own = row && row->nsym == nsym;
    for (int i = 0; own && i < nsym; i++)
        own = row->sym[i] == ks->sym[i];
    if (row && !own)
        row->alone = true;
    CgFnState st;
    cg_fn_save(cg, &st);
    cg->kslot = ks;
    cg->kfacts = own ? row : NULL;
    bool ok = cg->target->kernel_split(cg, grp, part, fin);
    cg->kslot = NULL;
    cg->kfacts = NULL;
    cg_fn_restore(cg, &st);
    if (row && ks->n > nsym) /* read a symbol the row kernel does not */
        row->alone = true;
    if (!ok)
        return false;
    for (int i = k; i < cg->nkernels; i++) {
        cg->ksig[i] = NULL; /* never matched by a group's signature */
        cg->kinfo[i] = i == k ? *part : *fin;
    }
    if (cg->nsplit < (int)(sizeof cg->split / sizeof cg->split[0])) {
        cg->split[cg->nsplit][0] = fn;
        cg->split[cg->nsplit][1] = part->fn;
        cg->split[cg->nsplit++][2] = fin->fn;
    }
    return true;
}

/* The symbols a kernel reads by slot (ks), as an array for its launch
 * (back: a group's own constants for the symbols its kernel read them as). */
static LLVMValueRef sym_array(Host *h, const KSyms *ks, const DimMap *back)
{
    Cg *cg = h->cg;
    LLVMValueRef arr = LLVMBuildArrayAlloca(cg->eb, cg->t_i64, cg_i64(cg, ks->n > 0 ? ks->n : 1), "ksyms");
    for (int i = 0; i < ks->n; i++) {
        Dim *d = back ? dim_subst(&cg->g->dims, ks->sym[i], back) : ks->sym[i];
        LLVMBuildStore(B, cg_dim(cg, d), host_gep(cg, cg->t_i64, arr, i)); /* cg_dim(NULL): out of memory */
    }
    return LLVMBuildBitCast(B, arr, cg->t_p8, "");
}

/* ---- constants as slots (ksig.c) ---------------------------------------------- */

/* A group's types and dim attributes while its kernel is found or made
 * with its differing constants as symbols (Cg.open), to be put back. */
typedef struct OpenSave {
    Type *type;     /* by value: the group's inputs, then its ops' results */
    Dim ***attr;    /* by ATTR_DIMS attribute of its ops */
    int ntype, nattr;
} OpenSave;

static Value *open_value(const Group *grp, int i)
{
    if (i < grp->nins)
        return grp->ins[i];
    i -= grp->nins;
    for (int j = 0; j < grp->nops; i -= grp->ops[j++]->nout)
        if (i < grp->ops[j]->nout)
            return grp->ops[j]->out[i];
    return NULL;
}

static Attr *open_attr(const Group *grp, int i)
{
    for (int j = 0; j < grp->nops; j++)
        for (int a = 0; a < grp->ops[j]->nattrs; a++)
            if (grp->ops[j]->attrs[a].kind == ATTR_DIMS && i-- == 0)
                return &grp->ops[j]->attrs[a];
    return NULL;
}

/* dims with those that are keys of m replaced: whole dims only, as the
 * signature names them (a constant inside a floor division stays). */
static Dim **subst_dims(Cg *cg, Dim **dims, int n, const DimMap *m)
{
    Dim **v = arena_array(&cg->g->arena, (size_t)n + 1, sizeof *v);
    for (int i = 0; v && i < n; i++) {
        Dim *x = dimmap_get(m, dims[i]);
        v[i] = x ? x : dims[i];
    }
    return v;
}

/* Puts the group's types and attributes back, the last saved first (a
 * value may come twice: the first save has its own type). */
static void open_restore(const Group *grp, OpenSave *sv)
{
    for (int i = sv->ntype - 1; i >= 0; i--)
        open_value(grp, i)->type = sv->type[i];
    for (int i = sv->nattr - 1; i >= 0; i--)
        open_attr(grp, i)->dims = sv->attr[i];
    free(sv->type);
    free(sv->attr);
    *sv = (OpenSave){0};
}

/* Writes the group's constants oc->from as the symbols oc->to in its
 * types and dim attributes (sv: what to put back); back gets the way
 * back, for the launch. */
static bool open_types(Cg *cg, const Group *grp, const OpenConsts *oc, OpenSave *sv, DimMap *back)
{
    DimMap m;
    dimmap_init(&m);
    for (int i = 0; i < oc->n; i++)
        dimmap_put(&m, oc->from[i], oc->to[i]);
    for (int i = 0; i < oc->nsym; i++)
        dimmap_put(back, oc->sym[i], oc->val[i]);
    int nv = grp->nins, na = 0;
    for (int j = 0; j < grp->nops; j++) {
        nv += grp->ops[j]->nout;
        for (int a = 0; a < grp->ops[j]->nattrs; a++)
            na += grp->ops[j]->attrs[a].kind == ATTR_DIMS;
    }
    *sv = (OpenSave){0};
    sv->type = malloc(((size_t)nv + 1) * sizeof *sv->type);
    sv->attr = malloc(((size_t)na + 1) * sizeof *sv->attr);
    bool ok = sv->type && sv->attr && !m.failed && !back->failed;
    for (int i = 0; ok && i < nv; i++) {
        Value *v = open_value(grp, i);
        Dim **dims = subst_dims(cg, v->type.dims, v->type.rank, &m);
        if (!(ok = dims != NULL))
            break;
        sv->type[sv->ntype++] = v->type;
        v->type.dims = dims;
    }
    for (int i = 0; ok && i < na; i++) {
        Attr *a = open_attr(grp, i);
        Dim **dims = subst_dims(cg, a->dims, a->n, &m);
        if (!(ok = dims != NULL))
            break;
        sv->attr[sv->nattr++] = a->dims;
        a->dims = dims;
    }
    dimmap_free(&m);
    if (!ok) {
        open_restore(grp, sv);
        return diag_setk(cg->d, DIAG_RESOURCE, "codegen: out of memory");
    }
    return true;
}

/* The constants a plan group's kernel reads by slot, or NULL. */
static const OpenConsts *group_open(const Cg *cg, const Group *grp)
{
    if (!cg->open || grp->id < 0 || grp->id >= cg->plan->n || grp != &cg->plan->groups[grp->id])
        return NULL;
    const OpenConsts *oc = &cg->open[grp->id];
    return oc->n ? oc : NULL;
}

/* Drops the kernel kernel_for failed to make (ki.fn: what it left). */
static void drop_failed(Cg *cg, const KernelInfo *ki)
{
    if (ki->fn)
        LLVMDeleteFunction(ki->fn);
    if (cg->nkernels > 0 && cg->kinfo && cg->kinfo[cg->nkernels - 1].fn == ki->fn) {
        free(cg->ksig[cg->nkernels - 1]);
        cg->ksig[cg->nkernels - 1] = NULL; /* never matched again */
    }
    cg->d->set = false;
}

/* kernel_for and, with split, split_for: with the group's differing
 * constants as symbols where it has some (ki's range and grain then in
 * the group's own dims again, back the symbols' constants for the
 * launch's slots), else, or where no template takes it so, as it is.
 * 1: the kernel made or found; 0: no template takes the group (cg->d
 * says why); -1: an error. */
static int kernel_open(Cg *cg, const Group *grp, KernelInfo *ki, bool split, KernelInfo *part, KernelInfo *fin,
                       DimMap *back)
{
    const OpenConsts *oc = group_open(cg, grp);
    if (oc) {
        OpenSave sv;
        if (!open_types(cg, grp, oc, &sv, back))
            return -1;
        int before = cg->nkernels;
        bool found = kernel_for(cg, grp, ki);
        cg->nopened += found && cg->nkernels > before;
        bool ok = found && (!split || split_for(cg, grp, ki->fn, part, fin));
        open_restore(grp, &sv);
        if (ok) {
            DimCtx *cx = &cg->g->dims;
            Dim *grain = ki->grain_dim;
            ki->range = dim_subst(cx, ki->range, back);
            ki->grain_dim = dim_subst(cx, grain, back);
            if (!ki->range || (grain && !ki->grain_dim)) {
                diag_setk(cg->d, DIAG_RESOURCE, "codegen: out of memory");
                return -1;
            }
            return 1;
        }
        if (found || !cg->d->set || cg->d->kind == DIAG_RESOURCE)
            return -1;
        drop_failed(cg, ki); /* a template that takes the constants only: as it is */
        *ki = (KernelInfo){0};
        dimmap_free(back);
        dimmap_init(back);
    }
    if (!kernel_for(cg, grp, ki))
        return cg->d->set && cg->d->kind != DIAG_RESOURCE ? 0 : -1;
    return !split || split_for(cg, grp, ki->fn, part, fin) ? 1 : -1;
}

bool host_emit_kernel_group(Host *h, const Group *grp)
{
    Cg *cg = h->cg;
    KernelInfo ki = {0}, part = {0}, fin = {0};
    Dim *rows = NULL, *len = NULL;
    int nred = 0;
    bool split = cg->target->kernel_split && cg_split_fits(grp, &rows, &len, &nred, &cg->g->dims);
    DimMap back; /* the symbols the kernel reads the group's constants as -> them */
    dimmap_init(&back);
    int found = kernel_open(cg, grp, &ki, split, &part, &fin, &back);
    if (found <= 0) {
        dimmap_free(&back);
        if (found < 0)
            return false;
        /* no template takes this group: drop its kernel, split it up; a
         * single op no template takes runs on the host */
        drop_failed(cg, &ki);
        cg->nfallback++;
        if (grp->nops == 1)
            return host_emit_host_op(h, grp->ops[0]);
        for (int i = 0; i < grp->nops; i++)
            if (!emit_single(h, grp->ops[i]))
                return false;
        return true;
    }
    cg->nlaunch++;
    int nb = grp->nins + grp->nouts;
    LLVMValueRef ptrs[nb + 2];
    for (int i = 0; i < grp->nouts && !grp->placed; i++)
        host_alloc_k(h, grp->outs[i]);
    for (int i = 0; i < nb; i++)
        if (!(ptrs[i] = host_kbuf(h, i < grp->nins ? grp->ins[i] : grp->outs[i - grp->nins]))) {
            dimmap_free(&back);
            return false;
        }
    ptrs[nb] = cg->target->kernel_slots ? sym_array(h, &cg->ks, back.count ? &back : NULL)
                                        : LLVMBuildBitCast(B, h->syms, cg->t_p8, "");
    dimmap_free(&back);
    LLVMValueRef args = host_ptr_array(h, ptrs, nb + 1);
    LLVMBasicBlockRef join = NULL;
    DimMap mark = {0}; /* the dims memoised before the variants fork */
    if (split) { /* few long rows on a run of several threads: the split variant */
        cg->nsplitgroups++;
        LLVMTypeRef tty, tparam = cg->t_p8;
        LLVMValueRef tf = host_fn_decl(cg, "disc_rt_threads", cg->t_i32, &tparam, 1, &tty);
        LLVMValueRef thr = LLVMBuildSExt(B, LLVMBuildCall2(B, tty, tf, &h->rt, 1, ""), cg->t_i64, "");
        LLVMValueRef p = cg_dim(cg, rows), m = cg_dim(cg, len);
        LLVMValueRef few = LLVMBuildICmp(B, LLVMIntSLT, p, LLVMBuildMul(B, thr, cg_i64(cg, 2), ""), "");
        LLVMValueRef go = LLVMBuildAnd(B, LLVMBuildICmp(B, LLVMIntSGE, thr, cg_i64(cg, 2), ""), few, "");
        go = LLVMBuildAnd(B, go, LLVMBuildICmp(B, LLVMIntSGE, m, cg_i64(cg, DISC_SPLIT_MIN), ""), "");
        LLVMBasicBlockRef yes = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "split");
        LLVMBasicBlockRef no = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "rows");
        join = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "launched");
        LLVMBuildCondBr(B, go, yes, no);
        LLVMPositionBuilderAtEnd(B, yes);
        cg_dim_mark(cg, &mark);
        LLVMTypeRef aty, aparams[2] = {cg->t_p8, cg->t_i64};
        LLVMValueRef af = host_fn_decl(cg, "disc_rt_alloc", cg->t_p8, aparams, 2, &aty);
        LLVMValueRef parts = LLVMBuildMul(B, p, cg_i64(cg, DISC_SPLIT_PARTS), "");
        LLVMValueRef aa[2] = {h->rt, LLVMBuildMul(B, parts, cg_i64(cg, 8 * (int64_t)nred), "")};
        ptrs[nb + 1] = LLVMBuildCall2(B, aty, af, aa, 2, "");
        host_check_or_return(h, LLVMBuildIsNotNull(B, ptrs[nb + 1], ""), -1);
        LLVMValueRef sargs = LLVMBuildBitCast(B, host_ptr_array(h, ptrs, nb + 2), cg->t_p8, "");
        cg->target->launch(h, part.fn, sargs, parts, cg_i64(cg, 1));
        cg->target->launch(h, fin.fn, sargs, p, cg_i64(cg, 1));
        LLVMBuildBr(B, join);
        LLVMPositionBuilderAtEnd(B, no);
        cg_dim_back(cg, &mark);
    }
    cg->target->launch(h, ki.fn, LLVMBuildBitCast(B, args, cg->t_p8, ""), cg_dim(cg, ki.range),
                       ki.grain_dim ? cg_dim(cg, ki.grain_dim) : cg_i64(cg, ki.grain));
    if (join) {
        LLVMBuildBr(B, join);
        LLVMPositionBuilderAtEnd(B, join);
        cg_dim_back(cg, &mark);
        dimmap_free(&mark);
    }
    return true;
}

/* The target's host-op call: bufs = operands, then room for the results. */
bool host_emit_host_op(Host *h, Op *op)
{
    Cg *cg = h->cg;
    int n = op->nin + op->nout;
    LLVMValueRef ptrs[n + 1];
    for (int i = 0; i < op->nin; i++)
        if (!(ptrs[i] = host_hbuf(h, op->in[i])))
            return false;
    for (int i = 0; i < op->nout; i++)
        ptrs[op->nin + i] = LLVMConstPointerNull(cg->t_p8);
    LLVMValueRef arr = host_ptr_array(h, ptrs, n);
    LLVMValueRef rc = cg->target->host_op(h, op, arr);
    /* the symbols it binds: the memoised dims that mention one are
     * forgotten, the rest hold (SSDlite's 465 host ops each forgot every
     * dim, and its flow recomputed the sizes of its feature maps, a chain
     * of ceiling divisions, at each of them: 68,000 lines of IR) */
    const HostProg *p = &cg->si->prog;
    int nb = data_syms(p, op, NULL);
    Dim *bound[nb + 1];
    data_syms(p, op, bound);
    cg_dim_forget_syms(cg, bound, nb);
    host_check_or_return(h, LLVMBuildICmp(B, LLVMIntEQ, rc, cg_i32(cg, 0), ""), -1);
    emit_checks_after(h, op, bound, nb);
    for (int i = 0; i < op->nout; i++)
        h->vbuf[op->out[i]->id] = LLVMBuildLoad2(B, cg->t_p8, host_gep(cg, cg->t_p8, arr, op->nin + i), "");
    return true;
}

static bool emit_shape_op(Host *h, Op *op)
{
    Cg *cg = h->cg;
    Value *v = op->out[0];
    if (op->kind == OP_CONST) {
        if (!op->cst || !op->cst->data)
            return diag_set(cg->d, "codegen: a constant has no data (elided)");
        h->vbuf[v->id] = cg->target->const_ptr(h, op);
        if (!h->vbuf[v->id])
            return false;
        return true;
    }
    Dim *dims[MAX_RANK * 4];
    int n = 0;
    if (op->kind == OP_SHAPE_CONST) {
        const Attr *a = op_attr(op, "dims");
        for (int i = 0; i < a->n && n < MAX_RANK * 4; i++)
            dims[n++] = a->dims[i];
    } else if (op->kind == OP_DIM) {
        dims[n++] = op->in[0]->type.dims[op_attr_int(op, "axis", 0)];
    } else if (op->kind == OP_SHAPE_OF) {
        for (int i = 0; i < op->in[0]->type.rank; i++)
            dims[n++] = op->in[0]->type.dims[i];
    } else {
        return host_emit_host_op(h, op);
    }
    /* run memory, not the stack: a shape value may be an output */
    LLVMValueRef raw = host_alloc(h, v);
    LLVMValueRef arr = LLVMBuildBitCast(B, raw, cg->t_p64, "");
    for (int i = 0; i < n; i++)
        LLVMBuildStore(B, cg_dim(cg, dims[i]), host_gep(cg, cg->t_i64, arr, i));
    return true;
}

bool cg_host(Cg *cg)
{
    Graph *g = cg->g;
    LLVMTypeRef params[4] = {cg->t_p8, cg->t_pp8, cg->t_p64, cg->t_p64};
    LLVMTypeRef fty = LLVMFunctionType(cg->t_i32, params, 4, false);
    LLVMValueRef fn = LLVMAddFunction(cg->mod, "disc_main", fty);
    Host h = {.cg = cg};
    /* first: the symbols it makes are to be counted below (h.bound) */
    if (!cg_open_consts(cg))
        return false;
    h.rt = LLVMGetParam(fn, 0);
    h.io = LLVMGetParam(fn, 1);
    h.shapes = LLVMGetParam(fn, 2);
    h.syms = LLVMGetParam(fn, 3);
    h.vbuf = arena_array(&g->arena, (size_t)g->nvalues + 1, sizeof *h.vbuf);
    h.dbuf = arena_array(&g->arena, (size_t)g->nvalues + 1, sizeof *h.dbuf);
    h.raw = arena_array(&g->arena, (size_t)g->nvalues + 1, sizeof *h.raw);
    h.bound = arena_array(&g->arena, (size_t)g->dims.nsyms + 1, sizeof *h.bound);
    if (!h.vbuf || !h.dbuf || !h.raw || !h.bound)
        return diag_setk(cg->d, DIAG_RESOURCE, "codegen: out of memory");
    cg_begin_function(cg, fn, h.syms);
    cg->no_hoist = true;
    LLVMBasicBlockRef body = LLVMGetInsertBlock(B);
    /* a sum or product of dims past 2^63: an error naming no input (the
     * dims themselves passed the shape program), not a wrapped size */
    cg->ovf = LLVMAppendBasicBlockInContext(cg->ctx, fn, "overflow");
    LLVMPositionBuilderAtEnd(B, cg->ovf);
    LLVMTypeRef oty, oparam = cg->t_p8;
    LLVMValueRef of = host_fn_decl(cg, "disc_rt_overflow", cg->t_void, &oparam, 1, &oty);
    LLVMBuildCall2(B, oty, of, &h.rt, 1, "");
    LLVMBuildRet(B, cg_i32(cg, -1));
    LLVMPositionBuilderAtEnd(B, body);
    for (int i = 0; i < g->ninputs; i++) {
        LLVMValueRef p = LLVMBuildLoad2(B, cg->t_p8, host_gep(cg, cg->t_p8, h.io, i), "");
        if (cg->target->dev_memory) /* the caller's, on either side: raw_view */
            h.raw[g->inputs[i]->id] = p;
        else
            h.vbuf[g->inputs[i]->id] = p;
    }
    /* a dim is computed once and reused until control flow joins or a
     * symbol is bound (cg_dim_forget, cg_dim_forget_syms), which keeps the
     * flow of a deep CNN small; the checks too are straight-line code whose
     * every block the ones before dominate (without it Swin V2's checks
     * took half of its 50,000-line flow, each a dim's tree expanded) */
    cg->memo = true;
    emit_steps(&h);
    cg_dim_forget(cg);
    if (cg->mp && cg->mp->nslots && !plan_block(&h))
        return false;
    bool ok = true;
    for (int i = 0; i < cg->plan->n && ok; i++) {
        const Group *grp = &cg->plan->groups[i];
        switch (grp->kind) {
        case FUSE_SHAPE:
            for (int j = 0; j < grp->nops && ok; j++)
                ok = emit_shape_op(&h, grp->ops[j]);
            break;
        case FUSE_LOOP:
        case FUSE_INPUT:
        case FUSE_STITCH:
            ok = host_emit_kernel_group(&h, grp);
            break;
        case FUSE_LIBRARY:
            ok = cg->target->library ? cg->target->library(&h, grp) : host_emit_library_group(&h, grp);
            break;
        case FUSE_OPAQUE:
            ok = host_emit_host_op(&h, grp->root ? grp->root : grp->ops[0]);
            break;
        }
    }
    if (!ok)
        return false;
    int off = 0;
    for (int i = 0; i < g->ninputs; i++)
        off += g->inputs[i]->type.rank;
    for (int i = 0; i < g->noutputs; i++) {
        Value *v = g->outputs[i];
        if (cg->target->dev_memory) { /* into the caller's buffer, on whichever side (disc_rt_dev_output) */
            int on = h.dbuf[v->id] && !h.raw[v->id] ? 1 : h.raw[v->id] ? 2 : 0;
            LLVMValueRef src = on == 1 ? h.dbuf[v->id] : on == 2 ? h.raw[v->id] : h.vbuf[v->id];
            if (!src)
                return diag_setk(cg->d, DIAG_INTERNAL, "codegen: output %d has no buffer", i);
            LLVMTypeRef outty, op[6] = {cg->t_p8, cg->t_pp8, cg->t_i64, cg->t_p8, cg->t_i64, cg->t_i32};
            LLVMValueRef f = host_fn_decl(cg, "disc_rt_dev_output", cg->t_p8, op, 6, &outty);
            LLVMValueRef a[6] = {h.rt, h.io, cg_i64(cg, g->ninputs + 3 * i), src, bytes_of(&h, v), cg_i32(cg, on)};
            LLVMValueRef p = LLVMBuildCall2(B, outty, f, a, 6, "");
            host_check_or_return(&h, LLVMBuildIsNotNull(B, p, ""), -1);
            LLVMBuildStore(B, p, host_gep(cg, cg->t_p8, h.io, g->ninputs + 3 * i));
            for (int k = 0; k < v->type.rank; k++)
                LLVMBuildStore(B, cg_dim(cg, v->type.dims[k]), host_gep(cg, cg->t_i64, h.shapes, off++));
            continue;
        }
        if (!h.vbuf[v->id])
            return diag_setk(cg->d, DIAG_INTERNAL, "codegen: output %d has no buffer", i);
        LLVMBuildStore(B, h.vbuf[v->id], host_gep(cg, cg->t_p8, h.io, g->ninputs + 3 * i));
        for (int k = 0; k < v->type.rank; k++)
            LLVMBuildStore(B, cg_dim(cg, v->type.dims[k]), host_gep(cg, cg->t_i64, h.shapes, off++));
    }
    LLVMBuildRet(B, cg_i32(cg, 0));
    cg_end_function(cg, body);
    cg->ovf = NULL;
    cg->no_hoist = false;
    cg->memo = false;
    cg_dim_forget(cg);
    return true;
}
