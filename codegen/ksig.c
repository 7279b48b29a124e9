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
 */
#include "codegen/codegen.h"

#include <stdlib.h>
#include <string.h>

static void put_type(FILE *f, const Type *t)
{
    type_print(f, t);
}

static void put_attr(FILE *f, const Attr *a)
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
            dim_print(f, a->dims[i]);
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

char *cg_kernel_signature(const Group *grp)
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
        put_type(f, &grp->ins[i]->type);
        /* scalar constants are folded into the code */
        const Op *d = grp->ins[i]->def;
        if (d && d->kind == OP_CONST && d->cst && d->cst->data && d->cst->nbytes <= 8)
            for (size_t b = 0; b < d->cst->nbytes; b++)
                fprintf(f, "%02x", ((const unsigned char *)d->cst->data)[b]);
        fputc(' ', f);
    }
    fputs("\nouts:", f);
    for (int i = 0; i < grp->nouts; i++) {
        put_source(f, grp, grp->outs[i]);
        fputc(':', f);
        put_type(f, &grp->outs[i]->type);
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
            put_attr(f, &op->attrs[j]);
        if (op->kind == OP_CONST && op->cst && op->cst->data)
            for (size_t b = 0; b < op->cst->nbytes && b < 64; b++)
                fprintf(f, "%02x", ((const unsigned char *)op->cst->data)[b]);
        for (int r = 0; r < op->nout; r++)
            put_type(f, &op->out[r]->type);
    }
    fclose(f);
    return text;
}
