/*
 * ksig.c — kernel signatures: equal groups share one kernel.
 *
 * A transformer repeats the same layer many times; after shape analysis
 * the groups of every layer have the same ops over the same symbolic dims
 * (equal dims are equal pointers), and differ only in which buffers they
 * read and write, which kernels take as arguments anyway. The signature is
 * a text that fixes everything a kernel's code depends on: the group's kind,
 * its ops in order with their attributes and result types, where each
 * operand comes from (a group input by position, or an earlier op's result),
 * the types of the inputs and outputs, and the bytes of constants folded
 * into the code. Two groups with one signature get one kernel.
 *
 * Sharing under renaming. A model whose blocks bind their own symbols
 * (Swin's windows pad each block's map by a dim computed from data, so
 * every block has fresh symbols that only its host ops bind) gives equal
 * layers different dims, and the exact signature above one kernel per
 * block. With a KSyms, the signature names the group's symbols by the
 * order they first appear in it ($0, $1, ...), with their bounds (dim
 * arithmetic simplifies by them); the kernel then reads symbol $k from
 * slot k of an array the launch fills from the group's own symbols
 * (Cg.kslot), so two groups whose signatures match up to the names of
 * their symbols run one kernel. What else a kernel's code may depend on,
 * a fact proved about a dim (kern_maybe_one), host.c checks for the
 * renamed dims before it shares.
 *
 * Dims as slots. A dim that is not a sum or a product (a floor or
 * ceiling division, a modulus, a min, a max) is named whole by a slot
 * too, with its interval bounds, and the kernel reads it from there
 * (cg_dim looks the slot up before it computes the dim): an FPN's
 * levels, H / 8 ... H / 128 as chains of floor divisions, then run one
 * kernel where they ran one each (FCOS 112 distinct kernels -> 68,
 * SSDlite 61 -> 37). Sums and products stay written out, as kernels
 * build others from them (a row's length times its count) that must
 * mention the same leaves. A kernel that computes a dim the signature
 * does not name (say from a symbol inside a slot's dim) reads that
 * symbol by a slot of its own and is shared no more; host.c shares only
 * where the range, grain and facts carried over are built from named
 * dims alone.
 *
 * Constants as slots. A DenseNet's layers read concatenations of 64,
 * 96, 128, ... channels, a Swin's stages 96, 192, 384 and 768: groups
 * alike but for some constants, one kernel each, each 15-30 ms of LLVM.
 * Before the host flow is made, cg_open_consts takes every kernel
 * group's signature with its constants of 2 and more named by slots
 * too; groups whose such signatures are equal form a class, and a
 * constant that differs across a class (a slot whose values are not all
 * the same constant) becomes a symbol of its own times the values'
 * greatest common divisor, the symbol bounded by the quotients (64, 128
 * and 256 channels as 64 s, s in [1, 4]: the kernel's loops still run in
 * whole vectors, where unknown counts had LLVM add a vectorised and a
 * scalar remainder to each). While a group of the class is found or
 * emitted its types and dim attributes have those constants replaced by
 * the symbols (host.c, open_types), so the kernel is made once, with
 * them unknown, and reads them by slot; the launch fills each slot with
 * the group's own constant. A constant the members agree on stays in
 * the code; 1 (a broadcast) and 0 are never opened. Where one slot's
 * constants are a multiple of another's in every member (a nearest
 * resize's 2 H against H) or the product of two (a reshape's merged
 * axes), it is written as that multiple or product of their symbols, so
 * the code sees what it saw in the constants. A template that needs more
 * of the constants than that fails (elem.c's resize without an integer
 * scale between its dims) rather than guess, and the group is then made
 * with its constants in the code (host.c, kernel_open). Whole dims only
 * are opened: a constant inside a floor division stays.
 */
#include "codegen/codegen.h"

#include <stdlib.h>
#include <string.h>

static int add_slot(KSyms *ks, Dim *d)
{
    if (ks->n == ks->cap) {
        int n = ks->cap ? 2 * ks->cap : 8;
        Dim **v = realloc(ks->sym, (size_t)n * sizeof *v);
        if (!v)
            return ks->oom = true, -1;
        ks->sym = v;
        ks->cap = n;
    }
    ks->sym[ks->n] = d;
    return ks->n++;
}

int cg_ksym_slot(KSyms *ks, Dim *sym)
{
    if (sym->kind != DIM_SYM) {
        int at = cg_ksym_find(ks, sym);
        if (at >= 0)
            return at;
        at = add_slot(ks, sym);
        if (at >= 0 && !dimmap_put(&ks->comp, sym, (Dim *)(intptr_t)(at + 1)))
            return ks->oom = true, -1;
        return at;
    }
    if (sym->id >= ks->nslot) {
        int n = sym->id + 64;
        int *v = realloc(ks->slot, (size_t)n * sizeof *v);
        if (!v)
            return ks->oom = true, -1;
        memset(v + ks->nslot, 0, (size_t)(n - ks->nslot) * sizeof *v);
        ks->slot = v;
        ks->nslot = n;
    }
    if (ks->slot[sym->id])
        return ks->slot[sym->id] - 1;
    int at = add_slot(ks, sym);
    if (at >= 0)
        ks->slot[sym->id] = at + 1;
    return at;
}

int cg_ksym_find(const KSyms *ks, const Dim *d)
{
    if (d->kind == DIM_SYM)
        return d->id < ks->nslot ? ks->slot[d->id] - 1 : -1;
    Dim *v = dimmap_get(&ks->comp, d);
    return v ? (int)(intptr_t)v - 1 : -1;
}

void cg_ksyms_clear(KSyms *ks)
{
    for (int i = 0; i < ks->n; i++)
        if (ks->sym[i]->kind == DIM_SYM)
            ks->slot[ks->sym[i]->id] = 0;
    if (ks->comp.count) {
        dimmap_free(&ks->comp);
        dimmap_init(&ks->comp);
    }
    ks->n = 0;
}

void cg_ksyms_free(KSyms *ks)
{
    free(ks->slot);
    free(ks->sym);
    dimmap_free(&ks->comp);
    *ks = (KSyms){0};
}

/* A dim by name, or with its symbols renamed by ks (structure and
 * constants only: the canonical text of another group's dim may order its
 * terms otherwise, which only loses a share). */
static void put_dim(FILE *f, Dim *d, KSyms *ks)
{
    if (!ks) {
        dim_print(f, d);
        return;
    }
    if (d->kind == DIM_CONST && !(ks->open && d->c >= 2)) {
        fprintf(f, "%lld", (long long)d->c);
    } else if (d->kind == DIM_ADD || d->kind == DIM_MUL) {
        fprintf(f, "(%d %lld", (int)d->kind, (long long)d->c);
        for (int i = 0; i < d->n; i++) {
            fputc(' ', f);
            put_dim(f, d->args[i], ks);
        }
        fputc(')', f);
    } else {
        fprintf(f, "$%d", cg_ksym_slot(ks, d));
    }
}

static void put_type(FILE *f, const Type *t, KSyms *ks)
{
    if (!ks) {
        type_print(f, t);
        return;
    }
    fprintf(f, "%s[", dtype_name(t->dtype));
    for (int i = 0; i < t->rank; i++) {
        put_dim(f, t->dims[i], ks);
        fputc(',', f);
    }
    fputc(']', f);
}

static void put_attr(FILE *f, const Attr *a, KSyms *ks)
{
    fprintf(f, "%s=", a->name);
    switch (a->kind) {
    case ATTR_INT: fprintf(f, "%lld", (long long)a->i); break;
    case ATTR_FLOAT: fprintf(f, "%a", a->f); break;
    case ATTR_STR: fprintf(f, "%s", a->s); break;
    case ATTR_DTYPE: fprintf(f, "%s", dtype_name(a->dt)); break;
    case ATTR_INTS:
        for (int i = 0; i < a->n; i++)
            fprintf(f, "%lld,", (long long)a->ints[i]);
        break;
    case ATTR_FLOATS:
        for (int i = 0; i < a->n; i++)
            fprintf(f, "%a,", a->floats[i]);
        break;
    case ATTR_DIMS:
        for (int i = 0; i < a->n; i++) {
            put_dim(f, a->dims[i], ks);
            fputc(',', f);
        }
        break;
    }
    fputc(';', f);
}

/* Where an operand comes from, inside the group's own numbering. */
static void put_source(FILE *f, const Group *grp, const Value *v)
{
    for (int i = 0; i < grp->nins; i++)
        if (grp->ins[i] == v) {
            fprintf(f, "in%d", i);
            return;
        }
    for (int i = 0; i < grp->nops; i++)
        if (grp->ops[i] == v->def) {
            fprintf(f, "op%d.%d", i, v->idx);
            return;
        }
    fputs("?", f);
}

bool cg_index_const(const Group *grp, const Value *v)
{
    size_t n;
    const Op *d = v->def;
    if (!d || d->kind != OP_CONST || !d->cst || !d->cst->data || !type_static_numel(&v->type, &n) || n != 1 ||
        (v->type.dtype != DT_I64 && v->type.dtype != DT_I32))
        return false;
    bool in = false; /* an operand of the group (a buffer of the kernel) */
    for (int i = 0; i < grp->nins; i++)
        in |= grp->ins[i] == v;
    int uses = 0;
    for (int i = 0; in && i < grp->nops; i++)
        for (int j = 0; j < grp->ops[i]->nin; j++)
            if (grp->ops[i]->in[j] == v) {
                if (grp->ops[i]->kind != OP_GATHER || j != 1)
                    return false;
                uses++;
            }
    return uses > 0;
}

char *cg_kernel_signature(const Group *grp, KSyms *ks)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    fprintf(f, "%s root=", fuse_kind_name(grp->kind));
    for (int i = 0; i < grp->nops; i++)
        if (grp->ops[i] == grp->root)
            fprintf(f, "%d", i);
    fputs("\nins:", f);
    for (int i = 0; i < grp->nins; i++) {
        put_type(f, &grp->ins[i]->type, ks);
        /* scalar constants are folded into the code, but for the CPU's
         * kernels (with ks) gather indices (cg_index_const) */
        const Op *d = grp->ins[i]->def;
        if (d && d->kind == OP_CONST && d->cst && d->cst->data && d->cst->nbytes <= 8 &&
            !(ks && cg_index_const(grp, grp->ins[i])))
            for (size_t b = 0; b < d->cst->nbytes; b++)
                fprintf(f, "%02x", ((const unsigned char *)d->cst->data)[b]);
        fputc(' ', f);
    }
    fputs("\nouts:", f);
    for (int i = 0; i < grp->nouts; i++) {
        put_source(f, grp, grp->outs[i]);
        fputc(':', f);
        put_type(f, &grp->outs[i]->type, ks);
        if (grp->over && grp->over[i] >= 0) /* written over that input */
            fprintf(f, "@%d", grp->over[i]);
        fputc(' ', f);
    }
    for (int i = 0; i < grp->nops; i++) {
        const Op *op = grp->ops[i];
        fprintf(f, "\n%s(", op_info(op->kind)->name);
        for (int j = 0; j < op->nin; j++) {
            put_source(f, grp, op->in[j]);
            fputc(',', f);
        }
        fputs(")", f);
        for (int j = 0; j < op->nattrs; j++)
            put_attr(f, &op->attrs[j], ks);
        if (op->kind == OP_CONST && op->cst && op->cst->data)
            for (size_t b = 0; b < op->cst->nbytes && b < 64; b++)
                fprintf(f, "%02x", ((const unsigned char *)op->cst->data)[b]);
        for (int r = 0; r < op->nout; r++)
            put_type(f, &op->out[r]->type, ks);
    }
    if (ks) {
        fputs("\nsyms:", f);
        for (int i = 0; i < ks->n; i++) {
            if (ks->sym[i]->kind == DIM_CONST) { /* ks->open: its value is what differs */
                fputs(" c", f);
                continue;
            }
            int64_t lo = ks->sym[i]->lo, hi = ks->sym[i]->hi;
            if (ks->sym[i]->kind != DIM_SYM)
                dim_bounds(ks->sym[i], &lo, &hi);
            fprintf(f, " [%lld,", (long long)lo);
            if (hi == DIM_INF)
                fputs("inf]", f);
            else
                fprintf(f, "%lld]", (long long)hi);
        }
    }
    if (fclose(f) || (ks && ks->oom)) {
        free(text);
        return NULL;
    }
    return text;
}

/* ---- constants as slots -------------------------------------------------- */

bool cg_share_consts(void)
{
    const char *e = getenv("DISC_SHARE_CONSTS");
    return !(e && !strcmp(e, "0"));
}

typedef struct OpenSig {
    char *sig;  /* the signature with constants as slots */
    int group;  /* in the plan */
    Dim **slot; /* by slot: what the group's dim there is */
    int n;
} OpenSig;

static int cmp_open(const void *a, const void *b)
{
    const OpenSig *x = a, *y = b;
    int c = strcmp(x->sig, y->sig);
    return c ? c : x->group - y->group;
}

/* Whether slot k holds c times slot j's constant in every member of m
 * (c at least 2), or (j2 >= 0) the product of slots j's and j2's. */
static bool related(const OpenSig *m, int n, int k, int j, int j2, int64_t *c)
{
    int64_t a = m[0].slot[j]->c, b = m[0].slot[k]->c;
    if (j2 < 0 && (a <= 0 || b % a || b / a < 2))
        return false;
    *c = j2 < 0 ? b / a : 1;
    for (int i = 0; i < n; i++) {
        int64_t x = m[i].slot[j]->c, want;
        if (__builtin_mul_overflow(x, j2 < 0 ? *c : m[i].slot[j2]->c, &want) || m[i].slot[k]->c != want)
            return false;
    }
    return true;
}

/* The class m[0..n) (one signature): for each slot whose values are
 * constants not all equal, a symbol of its own times their greatest
 * common divisor (the symbol bounded by the quotients: 64, 128, 256
 * channels as 64 s, s in [1, 4], so the code still knows its loops run
 * in whole vectors), or, where every member's constant there is a
 * multiple of another such slot's (a resize's result dim, twice its
 * operand's) or the product of two (a reshape's merged axes), that
 * multiple or product: the kernel's code then sees the relation, as it
 * did the constants. Slots are taken smallest first (by the first
 * member's constants). */
static bool open_class(Cg *cg, const OpenSig *m, int n)
{
    DimCtx *cx = &cg->g->dims;
    int ns = m[0].n, nopen = 0, nv = 0, nown = 0;
    Dim *sym[ns + 1], *base[ns + 1]; /* base: the symbol of an own slot */
    int64_t div[ns + 1];             /* an own slot's common divisor */
    int order[ns + 1];
    for (int j = 0; j < ns; j++) {
        sym[j] = base[j] = NULL;
        bool consts = true, differ = false;
        for (int i = 0; i < n && consts; i++) {
            consts = m[i].slot[j]->kind == DIM_CONST;
            differ |= m[i].slot[j] != m[0].slot[j];
        }
        if (!consts || !differ)
            continue;
        int at = nv++; /* by insertion, smallest first */
        while (at > 0 && m[0].slot[order[at - 1]]->c > m[0].slot[j]->c) {
            order[at] = order[at - 1];
            at--;
        }
        order[at] = j;
    }
    for (int q = 0; q < nv; q++) {
        int k = order[q];
        int64_t c;
        for (int p = 0; p < q && !sym[k]; p++) {
            int j = order[p];
            if (!base[j])
                continue;
            if (related(m, n, k, j, -1, &c))
                sym[k] = dim_mulc(cx, sym[j], c);
            for (int p2 = p; p2 < q && !sym[k]; p2++)
                if (base[order[p2]] && related(m, n, k, j, order[p2], &c))
                    sym[k] = dim_mul(cx, sym[j], sym[order[p2]]);
        }
        if (!sym[k]) {
            int64_t g = 0, lo = INT64_MAX, hi = INT64_MIN;
            for (int i = 0; i < n; i++) {
                int64_t v = m[i].slot[k]->c;
                g = (int64_t)dim_gcd((uint64_t)v, (uint64_t)g);
                lo = v < lo ? v : lo;
                hi = v > hi ? v : hi;
            }
            if (!(base[k] = dim_sym_fresh(cx, SYM_INPUT)))
                return false;
            dim_sym_set(base[k], lo / g, hi / g, SYM_INPUT);
            div[k] = g;
            if (!(sym[k] = g > 1 ? dim_mulc(cx, base[k], g) : base[k]))
                return false;
            nown++;
        }
        nopen++;
    }
    for (int i = 0; nopen && i < n; i++) {
        OpenConsts *oc = &cg->open[m[i].group];
        Arena *a = &cg->g->arena;
        oc->from = arena_array(a, (size_t)nopen, sizeof *oc->from);
        oc->to = arena_array(a, (size_t)nopen, sizeof *oc->to);
        oc->sym = arena_array(a, (size_t)nown + 1, sizeof *oc->sym);
        oc->val = arena_array(a, (size_t)nown + 1, sizeof *oc->val);
        if (!oc->from || !oc->to || !oc->sym || !oc->val)
            return false;
        for (int j = 0; j < ns; j++) {
            if (!sym[j])
                continue;
            oc->from[oc->n] = m[i].slot[j];
            oc->to[oc->n++] = sym[j];
            if (base[j]) {
                oc->sym[oc->nsym] = base[j];
                if (!(oc->val[oc->nsym++] = dim_const(cx, m[i].slot[j]->c / div[j])))
                    return false;
            }
        }
    }
    return true;
}

bool cg_open_consts(Cg *cg)
{
    const FusionPlan *p = cg->plan;
    if (!cg->target->kernel_slots || !cg_share_consts() || p->n < 2)
        return true;
    cg->open = calloc((size_t)p->n, sizeof *cg->open);
    OpenSig *v = calloc((size_t)p->n, sizeof *v);
    KSyms ks = {.open = true};
    bool ok = cg->open && v;
    int n = 0;
    for (int i = 0; ok && i < p->n; i++) {
        const Group *grp = &p->groups[i];
        if (grp->kind != FUSE_LOOP && grp->kind != FUSE_INPUT && grp->kind != FUSE_STITCH)
            continue;
        cg_ksyms_clear(&ks);
        v[n] = (OpenSig){.sig = cg_kernel_signature(grp, &ks), .group = i, .n = ks.n};
        ok = v[n].sig && (v[n].slot = malloc(((size_t)ks.n + 1) * sizeof *v[n].slot));
        if (ok && ks.n)
            memcpy(v[n].slot, ks.sym, (size_t)ks.n * sizeof *ks.sym);
        n += v[n].sig != NULL;
    }
    if (ok)
        qsort(v, (size_t)n, sizeof *v, cmp_open);
    for (int a = 0, b; ok && a < n; a = b) {
        for (b = a + 1; b < n && !strcmp(v[a].sig, v[b].sig);)
            b++;
        if (b - a >= 2)
            ok = open_class(cg, v + a, b - a);
    }
    for (int i = 0; i < n; i++) {
        free(v[i].sig);
        free(v[i].slot);
    }
    free(v);
    cg_ksyms_free(&ks);
    if (!ok)
        return diag_setk(cg->d, DIAG_RESOURCE, "codegen: out of memory");
    return true;
}

void cg_open_consts_free(Cg *cg)
{
    free(cg->open);
    cg->open = NULL;
}

void cg_kshare_note(Cg *cg, Dim *d, bool r)
{
    KShare *sh = cg->kfacts;
    for (int i = 0; i < sh->nfact; i++)
        if (sh->fact[i] == d)
            return;
    if (sh->nfact == sh->capfact) {
        int n = sh->capfact ? 2 * sh->capfact : 8;
        Dim **f = realloc(sh->fact, (size_t)n * sizeof *f);
        if (f)
            sh->fact = f;
        bool *m = f ? realloc(sh->maybe1, (size_t)n * sizeof *m) : NULL;
        if (!m) {
            sh->alone = true;
            return;
        }
        sh->maybe1 = m;
        sh->capfact = n;
    }
    sh->fact[sh->nfact] = d;
    sh->maybe1[sh->nfact++] = r;
}

void cg_kshare_free(Cg *cg)
{
    for (int i = 0; cg->kshare && i < cg->nkernels; i++) {
        free(cg->kshare[i].sym);
        free(cg->kshare[i].fact);
        free(cg->kshare[i].maybe1);
    }
    free(cg->kshare);
    cg->kshare = NULL;
}
