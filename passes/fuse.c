/*
 * fuse.c — PLACEHOLDER until the fusion planner lands: every op is its own
 * group (fuse_plan_unfused). The real planner replaces this whole file.
 */
#include "passes/passes.h"

#include <stdlib.h>

FusionPlan *fuse_plan(ShapeInfo *si, Diag *d) { return fuse_plan_unfused(si, d); }

void fuse_plan_free(FusionPlan *p)
{
    if (!p)
        return;
    arena_free(&p->arena);
    free(p);
}

const char *fuse_kind_name(FuseKind k)
{
    static const char *names[] = {"loop", "input", "stitch", "library", "opaque", "shape"};
    return k >= 0 && k <= FUSE_SHAPE ? names[k] : "?";
}

void fuse_print(FILE *f, const FusionPlan *p)
{
    for (int i = 0; i < p->n; i++)
        fprintf(f, "group %d %s: %d ops\n", p->groups[i].id, fuse_kind_name(p->groups[i].kind), p->groups[i].nops);
}

void fuse_print_dot(FILE *f, const FusionPlan *p)
{
    fputs("digraph fusion {\n", f);
    for (int i = 0; i < p->n; i++)
        fprintf(f, "  g%d [label=\"%s\"];\n", p->groups[i].id, fuse_kind_name(p->groups[i].kind));
    fputs("}\n", f);
}
