/*
 * driver.c — the pipeline from a verified graph to a module a target
 * finishes, the same for every target:
 *
 *   shape_analyze → layout_run (CPU) → canon_run → fuse_plan → memplan_build →
 *   cg_host (the kernels and the host flow, through the target's hooks) →
 *   the LLVM verifier → target->finish (optimise for the CPU, then JIT it
 *   or write an object; a GPU target compiles its kernels' source)
 *
 * The passes are one list, cg_passes: the driver runs it (cg_run_passes),
 * and dcc takes its names for --stage and --dump-after and its printers.
 * After each pass: a check that no allocation failed quietly, the
 * verifier in debug builds, and --dump-after. Nothing here knows which
 * target it serves (codegen.h, "targets").
 */
#include "codegen/codegen.h"
#include "runtime/rt.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/InstCombine.h>
#include <llvm-c/Transforms/PassManagerBuilder.h>
#include <llvm-c/Transforms/Vectorize.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

bool cg_slp(void)
{
    const char *e = getenv("DISC_NOSLP");
    return !(e && *e && strcmp(e, "0") != 0);
}

static void run_pipeline(LLVMTargetMachineRef tm, LLVMModuleRef mod, int level)
{
    LLVMPassManagerRef pm = LLVMCreatePassManager();
    LLVMAddAnalysisPasses(tm, pm);
    LLVMPassManagerBuilderRef pmb = LLVMPassManagerBuilderCreate();
    LLVMPassManagerBuilderSetOptLevel(pmb, (unsigned)level);
    LLVMPassManagerBuilderUseInlinerWithThreshold(pmb, 275);
    LLVMPassManagerBuilderPopulateModulePassManager(pmb, pm);
    /* LLVM 14's PassManagerBuilder leaves the SLP vectoriser out (clang
     * adds it; the C API has no switch for it), so the reductions' lanes
     * (kernel.c, lane_reduce) stayed scalar loads and multiplies put into
     * a vector one by one: a recommender's row dot products took 20 us a
     * run, 4.5 with it. DISC_NOSLP=1 leaves it out, for comparisons. */
    if (level >= 2 && cg_slp()) {
        LLVMAddSLPVectorizePass(pm);
        LLVMAddInstructionCombiningPass(pm);
    }
    LLVMRunPassManager(pm, mod);
    LLVMPassManagerBuilderDispose(pmb);
    LLVMDisposePassManager(pm);
}

/* Whether f is to be optimised: defined, and not optnone (cg_no_opt). */
static bool optimised(LLVMValueRef f)
{
    static const char optnone[] = "optnone";
    unsigned k = LLVMGetEnumAttributeKindForName(optnone, sizeof optnone - 1);
    return LLVMCountBasicBlocks(f) && !LLVMGetEnumAttributeAtIndex(f, LLVMAttributeFunctionIndex, k);
}

void cg_optimise(LLVMModuleRef mod, int level, const CpuTarget *t)
{
    char *triple = LLVMGetDefaultTargetTriple();
    LLVMTargetRef target;
    char *err = NULL;
    if (LLVMGetTargetFromTriple(triple, &target, &err) == 0) {
        LLVMTargetMachineRef tm = LLVMCreateTargetMachine(target, triple, t->name, t->features,
                                                          LLVMCodeGenLevelAggressive, LLVMRelocDefault,
                                                          LLVMCodeModelJITDefault);
        char width[8];
        snprintf(width, sizeof width, "%d", t->vbits);
        for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f))
            if (LLVMCountBasicBlocks(f)) {
                LLVMAddTargetDependentFunctionAttr(f, "target-cpu", t->name);
                /* even when empty: a function without the attribute takes the
                 * target machine's features, which are this machine's where
                 * the JIT compiles (objects.c), so x86-64 code got AVX-512 */
                LLVMAddTargetDependentFunctionAttr(f, "target-features", t->features);
                /* the kernels' vectors are sized for the target (skinny.c):
                 * keep them whole on CPUs tuned to prefer narrower ones */
                LLVMAddTargetDependentFunctionAttr(f, "min-legal-vector-width", width);
            }
        /* a module of optnone functions only (objects.c's part for the
         * host flow): the pipeline would skip each of them, yet its module
         * passes and analyses took 55-65 ms of Swin V2's host flow */
        bool any = false;
        for (LLVMValueRef f = LLVMGetFirstFunction(mod); f && !any; f = LLVMGetNextFunction(f))
            any = optimised(f);
        if (any)
            run_pipeline(tm, mod, level);
        LLVMDisposeTargetMachine(tm);
    }
    LLVMDisposeMessage(err);
    LLVMDisposeMessage(triple);
}

/* ---- the passes --------------------------------------------------------- */

static bool run_shape(CgModule *m, const ShapeOpts *so, const CgOpts *o, Diag *d)
{
    return (m->si = shape_analyze(m->g, so, d)) != NULL;
}

bool cg_channels_last(const CgOpts *o)
{
    const char *e = getenv("DISC_LAYOUT");
    return !o->gpu && !o->plain_layout && !(e && !strcmp(e, "plain"));
}

/* The layout pass's block (passes/layout.c, "blocked layouts"): the
 * floats of the target's vectors, 16 with AVX-512, 8 with AVX2 (and where
 * ONEDNN_MAX_CPU_ISA caps oneDNN below AVX-512, whose kernels for 16 it
 * then lacks); 0 (channels-last) for SSE targets, DISC_LAYOUT=nhwc, or
 * where the layout pass does not run. */
int cg_layout_block(const CgOpts *o)
{
    const char *e = getenv("DISC_LAYOUT");
    if (!cg_channels_last(o) || (e && !strcmp(e, "nhwc")))
        return 0;
    CpuTarget t;
    Diag d = {0};
    if (!cpu_target_init(&t, o->cpu, &d))
        return 0; /* the compile reports the name */
    int b = t.vbits >= 512 ? 16 : t.vbits >= 256 ? 8 : 0;
    cpu_target_free(&t);
    const char *cap = getenv("ONEDNN_MAX_CPU_ISA");
    if (b == 16 && cap && *cap && strncasecmp(cap, "avx512", 6) && strcasecmp(cap, "all") &&
        strcasecmp(cap, "default"))
        b = 8;
    return b;
}

static bool run_layout(CgModule *m, const ShapeOpts *so, const CgOpts *o, Diag *d)
{
    if (cg_channels_last(o) && (m->nlast = layout_run(m->g, cg_layout_block(o), &m->block)) < 0)
        return diag_oom(d);
    return true;
}

static bool run_canon(CgModule *m, const ShapeOpts *so, const CgOpts *o, Diag *d)
{
    canon_run(m->g, &m->canon);
    return true;
}

static bool run_fusion(CgModule *m, const ShapeOpts *so, const CgOpts *o, Diag *d)
{
    m->plan = o->unfused ? fuse_plan_unfused(m->si, d) : fuse_plan(m->si, d);
    return m->plan != NULL;
}

static bool run_memplan(CgModule *m, const ShapeOpts *so, const CgOpts *o, Diag *d)
{
    return (m->mp = memplan_build(m->plan, m->si, d)) != NULL;
}

static void print_shape(FILE *f, const CgModule *m, const PrintOpts *po) { shape_print(f, m->si); }

static void print_layout(FILE *f, const CgModule *m, const PrintOpts *po)
{
    graph_print(f, m->g, po);
    if (m->block)
        fprintf(f, "# layout: %d convolutions and pools blocked by %d channels\n", m->nlast, m->block);
    else
        fprintf(f, "# layout: %d convolutions and pools channels-last\n", m->nlast);
}

static void print_canon(FILE *f, const CgModule *m, const PrintOpts *po)
{
    const CanonStats *st = &m->canon;
    graph_print(f, m->g, po);
    fprintf(f, "# canon: %d -> %d ops: %d folded, %d merged, %d simplified, %d dots fused side by side, "
               "%d dead, %d rounds\n",
            st->ops_before, st->ops_after, st->folded, st->cse, st->simplified, st->hfused, st->removed, st->rounds);
}

static void print_fusion(FILE *f, const CgModule *m, const PrintOpts *po)
{
    graph_print(f, m->g, &(PrintOpts){po->inline_max, true, false});
    fputs("\n# fusion plan\n", f);
    fuse_print(f, m->plan);
}

static void print_memplan(FILE *f, const CgModule *m, const PrintOpts *po)
{
    fuse_print(f, m->plan);
    memplan_print(f, m->mp, NULL);
}

const CgPass cg_passes[CG_NSTAGES] = {
    [CG_SHAPE] = {"shape", "after shape analysis: resolved dims, dim and size classes, constraints, the host "
                           "shape program", run_shape, print_shape},
    [CG_LAYOUT] = {"layout", "after the layout pass: convolutions and pools channels-last between transposes, "
                             "the transposes moved down (CPU targets)", run_layout, print_layout},
    [CG_CANON] = {"canon", "after canonicalisation (constant folding, CSE, algebraic simplification, DCE)",
                  run_canon, print_canon},
    [CG_FUSION] = {"fusion", "the fusion plan: groups (loop, input, stitch, library, opaque) with their ops, "
                             "inputs, outputs", run_fusion, print_fusion},
    [CG_MEMPLAN] = {"memplan", "the memory plan: slots of one block per run, their symbolic offsets and sizes",
                    run_memplan, print_memplan},
    [CG_LLVM] = {"llvm", "the optimised LLVM IR: the kernels and the host flow", NULL, NULL},
};

CgStage cg_stage_from_name(const char *name)
{
    for (int s = 0; s < CG_NSTAGES; s++)
        if (!strcmp(cg_passes[s].name, name))
            return (CgStage)s;
    return CG_NSTAGES;
}

static char stage_names[128];

static void join_names(void)
{
    size_t n = 0;
    for (int s = 0; s < CG_NSTAGES; s++)
        n += (size_t)snprintf(stage_names + n, sizeof stage_names - n, "%s%s", s ? ", " : "", cg_passes[s].name);
}

const char *cg_stage_names(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, join_names);
    return stage_names;
}

bool cg_run_passes(Graph *g, const ShapeOpts *so, const CgOpts *o, CgStage last, CgModule *m, Diag *d)
{
    memset(m, 0, sizeof *m);
    m->g = g;
    for (int s = 0; s <= (int)last && s < CG_LLVM; s++) {
        const CgPass *p = &cg_passes[s];
        double t0 = disc_rt_now();
        bool ok = p->run(m, so, o, d);
        m->t[s < CG_FUSION ? 0 : 1] += disc_rt_now() - t0;
        /* a failed allocation may have read as "unknown" and not failed the pass */
        const Arena *arenas[] = {&g->arena, m->si ? &m->si->arena : NULL, m->plan ? &m->plan->arena : NULL,
                                 m->mp ? &m->mp->arena : NULL};
        for (size_t i = 0; i < sizeof arenas / sizeof arenas[0]; i++)
            if (arenas[i] && diag_arena_failed(d, arenas[i]))
                ok = false;
#ifndef NDEBUG
        Diag e = {0}; /* the verifier between the passes, in debug builds */
        if (ok && !graph_verify(g, &e))
            ok = diag_setk(d, e.kind == DIAG_RESOURCE ? e.kind : DIAG_INTERNAL,
                           "error: internal: the graph does not verify after %s: %s", p->name, e.msg);
#endif
        if (!ok)
            return false;
        if (o->dump_after && !strcmp(o->dump_after, p->name))
            p->print(stderr, m, &(PrintOpts){16, true, false});
    }
    return true;
}

bool cg_build_module(Graph *g, const ShapeOpts *so, const CgOpts *o, const CpuTarget *cpu, LLVMContextRef ctx,
                     const CgTarget *t, CgModule *m, Diag *d)
{
    cg_llvm_init();
    if (!cg_run_passes(g, so, o, CG_MEMPLAN, m, d))
        return false;
    double t2 = disc_rt_now();
    Cg cg;
    cg_init(&cg, ctx, g, m->si, m->plan, d);
    cg.mp = m->mp;
    cg.cpu = cpu;
    cg.target = t;
    bool ok = cg_host(&cg);
    m->nkernels = cg.nkernels;
    m->nlaunch = cg.nlaunch;
    m->nlibrary = cg.nlibrary;
    m->nepilogue = cg.nepilogue;
    m->nskinny = cg.nskinny;
    m->nnhwc = cg.nnhwc;
    m->nopened = cg.nopened;
    m->nsplit = cg.nsplitgroups;
    m->kdesc = cg.kdesc;
    m->mod = cg.mod;
    cg_free(&cg);
    if (ok && d->set) /* a failure the flow went on from (cg_dim) */
        ok = false;
    if (diag_arena_failed(d, &g->arena))
        ok = false;
    char *vmsg = NULL;
    if (ok && LLVMVerifyModule(m->mod, LLVMReturnStatusAction, &vmsg)) {
        diag_setk(d, DIAG_INTERNAL, "error: internal: generated LLVM IR is invalid: %.400s", vmsg);
        ok = false;
    }
    LLVMDisposeMessage(vmsg);
    m->t[2] = disc_rt_now() - t2;
    return ok;
}


bool cg_compile(Graph *g, const ShapeOpts *so, const CgOpts *o, const CpuTarget *cpu, LLVMContextRef ctx,
                const CgTarget *t, CgModule *m, Diag *d)
{
    bool ok = cg_build_module(g, so, o, cpu, ctx, t, m, d);
    if (!ok) {
        if (m->mod)
            LLVMDisposeModule(m->mod);
        m->mod = NULL;
        return false;
    }
    double t0 = disc_rt_now();
    ok = t->finish(t, m, o, cpu, d);
    m->t[3] = disc_rt_now() - t0;
    return ok;
}

void cg_module_free(CgModule *m)
{
    for (int i = 0; m->kdesc && i < m->nkernels; i++)
        free(m->kdesc[i]);
    free(m->kdesc);
    m->kdesc = NULL;
    fuse_plan_free(m->plan);
    memplan_free(m->mp);
    shape_info_free(m->si);
    m->plan = NULL;
    m->mp = NULL;
    m->si = NULL;
}
