/*
 * memplan.c — memory planning over the kernel schedule.
 *
 * Requires: a fusion plan (its group order is the schedule). Leaves the
 * graph and the plan unchanged.
 *
 * Every value a kernel or a library call writes for another kernel (not a
 * graph output, not a host-op result, which the interpreter's code
 * allocates) gets a slot in one block allocated per run, live from the
 * group that writes it to the last group that reads it. A slot's size is
 * a Dim, which the host flow computes from the symbols at run time; with
 * the groups it is live between, that is all the runtime needs to lay the
 * slots out in the run's block (runtime/place.c), where a value may take
 * the bytes of any value dead before it is written, whatever their dims.
 *
 * One exception shares a slot: a library call's epilogue that is
 * elementwise over the call's result, which nothing reads later, writes
 * over it in place (in_place; codegen's kernel then stores through the
 * result's own pointer, Group.over).
 *
 * The compiler used to share slots itself, between values of sizes it
 * could prove no larger (equal dims, or an inequality ISL proved), and
 * laid the slots end to end with symbolic offsets: a CNN's stages have
 * sizes no proof compares (112 x 112 x 96 against 56 x 56 x 144), so
 * MobileNetV2's block at 1 x 224 x 224 was 30 MB, about the last-level
 * cache, where the values live at once need 10; placed at run time it
 * runs 15% faster (bench/NOTES.md). One value per slot also places better
 * than slots that chain values (ViT-B/16: 28 MB that way, 12 MB this).
 *
 * The block is allocated once, before any group runs, when only the
 * symbols bound from the input shapes have values. A value whose size
 * mentions a data-dependent symbol (HS_DATA: known only once the op that
 * makes it has run, such as the sequence length a dyn_reshape reads from
 * a tensor) is therefore never planned: it is allocated where it is
 * written. Planning it would leave its bytes (and every later slot's
 * offset) out of the block's size as the flow computes it up front, and
 * the last slots would lie past the block's end.
 */
#include "passes/passes.h"
#include "runtime/rt.h" /* disc_place */

#include <stdlib.h>
#include <string.h>

enum { ALIGN = 64 };

static Dim *value_bytes(DimCtx *cx, const Value *v)
{
    Dim *b = dim_mulc(cx, type_numel(cx, &v->type), (int64_t)dtype_size(v->type.dtype));
    return dim_mulc(cx, dim_ceildiv(cx, b, dim_const(cx, ALIGN)), ALIGN);
}

/* Values the host flow allocates for a kernel group's outputs. */
static bool planned(const Graph *g, const Group *grp, const Value *v)
{
    for (int i = 0; i < g->noutputs; i++)
        if (g->outputs[i] == v)
            return false;
    return grp->kind == FUSE_LOOP || grp->kind == FUSE_INPUT || grp->kind == FUSE_STITCH ||
           grp->kind == FUSE_LIBRARY; /* its call's result and the epilogue's */
}

/* The values group grp writes into memory the host flow allocates: its
 * outputs, and a library call's result when only its epilogue reads it. */
static int written(const Graph *g, const Group *grp, const Value **out)
{
    int n = 0;
    for (int k = 0; k < grp->nouts; k++)
        if (planned(g, grp, grp->outs[k]))
            out[n++] = grp->outs[k];
    if (grp->kind == FUSE_LIBRARY && grp->root && planned(g, grp, grp->root->out[0])) {
        bool seen = false;
        for (int k = 0; k < n; k++)
            seen |= out[k] == grp->root->out[0];
        if (!seen)
            out[n++] = grp->root->out[0];
    }
    return n;
}

/* Whether a size mentions a symbol bound only after some op has run. */
static bool late(const ShapeInfo *si, const Dim *bytes)
{
    for (int i = 0; i < si->prog.n; i++)
        if (si->prog.steps[i].kind == HS_DATA && dim_mentions(bytes, si->prog.steps[i].sym))
            return true;
    return false;
}

/* The output of library group grp (which writes w[0..nw)) that its
 * epilogue may write over the call's result, in place, or NULL. The
 * epilogue kernel reads the result and writes the output at the same
 * index (every op that reads the result, or a value computed from it, is
 * elementwise over the result's dims), nothing reads the result after the
 * group, and the output takes as many bytes. A swish or a residual add
 * after a convolution then runs over lines the call has just written
 * instead of into a second buffer as large. */
static const Value *in_place(const Group *grp, const Value **w, int nw, const int *last, int gi)
{
    if (grp->kind != FUSE_LIBRARY || !grp->root || nw != 2 || w[1] != grp->root->out[0])
        return NULL;
    const Value *r = w[1], *o = w[0];
    if (last[r->id] != gi || !type_same_dims(&o->type, &r->type) || dtype_size(o->type.dtype) != dtype_size(r->type.dtype))
        return NULL;
    const Value *from[grp->nops + 1];
    int nf = 0, k = 0;
    from[nf++] = r;
    while (k < grp->nops && grp->ops[k] != grp->root)
        k++;
    for (k++; k < grp->nops; k++) {
        const Op *op = grp->ops[k];
        bool reads = false;
        for (int j = 0; j < op->nin; j++)
            for (int f = 0; f < nf; f++)
                reads |= op->in[j] == from[f];
        if (!reads)
            continue; /* a bias's reshape */
        OpCat c = op_info(op->kind)->cat;
        if ((c != CAT_UNARY && c != CAT_BINARY && c != CAT_ELEM) || op->nout != 1 ||
            !type_same_dims(&op->out[0]->type, &r->type))
            return NULL;
        from[nf++] = op->out[0];
    }
    for (int f = 1; f < nf; f++)
        if (from[f] == o)
            return o;
    return NULL;
}

MemPlan *memplan_build(const FusionPlan *fp, ShapeInfo *si, Diag *d)
{
    Graph *g = fp->g;
    MemPlan *mp = calloc(1, sizeof *mp);
    if (!mp) {
        diag_oom(d);
        return NULL;
    }
    mp->g = g;
    arena_init(&mp->arena);
    int nv = g->nvalues + 1;
    mp->slot_of = arena_array(&mp->arena, (size_t)nv, sizeof *mp->slot_of);
    int *def = arena_array(&mp->arena, (size_t)nv, sizeof *def);
    int *last = arena_array(&mp->arena, (size_t)nv, sizeof *last);
    mp->slots = arena_array(&mp->arena, (size_t)nv, sizeof *mp->slots);
    if (!mp->slot_of || !def || !last || !mp->slots) {
        memplan_free(mp);
        diag_oom(d);
        return NULL;
    }
    for (int i = 0; i < nv; i++) {
        mp->slot_of[i] = -1;
        def[i] = last[i] = -1;
    }
    /* liveness over the group order */
    for (int gi = 0; gi < fp->n; gi++) {
        const Group *grp = &fp->groups[gi];
        const Value *w[grp->nouts + 1];
        int nw = written(g, grp, w);
        for (int k = 0; k < nw; k++)
            def[w[k]->id] = last[w[k]->id] = gi;
        for (int k = 0; k < grp->nins; k++)
            last[grp->ins[k]->id] = gi;
        if (grp->kind == FUSE_LIBRARY || grp->kind == FUSE_OPAQUE || grp->kind == FUSE_SHAPE)
            for (int o = 0; o < grp->nops; o++) /* thunks read their op's operands */
                for (int j = 0; j < grp->ops[o]->nin; j++)
                    last[grp->ops[o]->in[j]->id] = gi > last[grp->ops[o]->in[j]->id] ? gi
                                                                                    : last[grp->ops[o]->in[j]->id];
    }
    DimCtx *cx = &g->dims;
    for (int gi = 0; gi < fp->n; gi++) {
        const Group *grp = &fp->groups[gi];
        const Value *w[grp->nouts + 1];
        int nw = written(g, grp, w);
        const Value *over = in_place(grp, w, nw, last, gi);
        for (int k = nw - 1; k >= 0; k--) { /* the call's result (last) first */
            const Value *v = w[k];
            if (def[v->id] != gi)
                continue;
            int rs = over == v ? mp->slot_of[grp->root->out[0]->id] : -1;
            if (rs >= 0) { /* over the call's result */
                mp->unplanned_total = dim_add(cx, mp->unplanned_total, value_bytes(cx, v));
                mp->slot_of[v->id] = rs;
                if (mp->slots[rs].last < last[v->id])
                    mp->slots[rs].last = last[v->id];
                continue;
            }
            Dim *bytes = value_bytes(cx, v);
            if (late(si, bytes)) {
                mp->nlate++;
                continue;
            }
            mp->unplanned_total = mp->unplanned_total ? dim_add(cx, mp->unplanned_total, bytes) : bytes;
            MemSlot *sl = &mp->slots[mp->nslots];
            sl->bytes = bytes;
            sl->first = gi;
            sl->last = last[v->id];
            mp->slot_of[v->id] = mp->nslots++;
        }
    }
    if (!mp->unplanned_total)
        mp->unplanned_total = dim_const(cx, 0);
    return mp;
}

void memplan_free(MemPlan *mp)
{
    if (!mp)
        return;
    arena_free(&mp->arena);
    free(mp);
}

void memplan_print(FILE *f, const MemPlan *mp, const DimEnv *env)
{
    fputs("# memory plan\n", f);
    int planned = 0;
    for (int i = 0; i < mp->g->nvalues; i++)
        planned += mp->slot_of[i] >= 0;
    fprintf(f, "#   %d values written by kernels and library calls in %d slots\n", planned, mp->nslots);
    if (mp->nlate)
        fprintf(f, "#   %d value%s sized by data-dependent symbols allocated where written\n", mp->nlate,
                mp->nlate == 1 ? "" : "s");
    char **names = graph_value_names(mp->g);
    for (int s = 0; s < mp->nslots; s++) {
        fprintf(f, "#   slot %d:", s);
        int k = 0; /* its values: a call's result, then what its epilogue writes over it */
        for (int i = 0; names && i < mp->g->nvalues; i++)
            if (mp->slot_of[i] == s)
                fprintf(f, "%s %s", k++ ? ", then" : "", names[i]);
        fprintf(f, "; groups %d..%d, bytes ", mp->slots[s].first, mp->slots[s].last);
        dim_print(f, mp->slots[s].bytes);
        fputc('\n', f);
    }
    graph_value_names_free(mp->g, names);
    fputs("#   block: the slots laid out at each run's sizes (without reuse: ", f);
    dim_print(f, mp->unplanned_total);
    fputs(" bytes)\n", f);
    if (!env)
        return;
    int n = mp->nslots;
    int64_t *bytes = calloc((size_t)n + 1, 2 * sizeof *bytes), b;
    int32_t *live = calloc(2 * (size_t)n + 1, sizeof *live);
    bool ok = bytes && live && dim_eval(mp->unplanned_total, env, &b) == DIM_OK;
    for (int s = 0; s < n && ok; s++) {
        ok = dim_eval(mp->slots[s].bytes, env, &bytes[s]) == DIM_OK;
        live[2 * s] = mp->slots[s].first;
        live[2 * s + 1] = mp->slots[s].last;
    }
    int64_t total = ok ? disc_place(n, bytes, live, bytes + n) : -1;
    if (total >= 0) {
        fprintf(f, "#   at the given binding: %lld bytes planned, %lld without reuse; offsets", (long long)total,
                (long long)b);
        for (int s = 0; s < n; s++)
            fprintf(f, " %lld", (long long)bytes[n + s]);
        fputc('\n', f);
    }
    free(bytes);
    free(live);
}
