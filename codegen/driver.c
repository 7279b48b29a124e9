/*
 * driver.c — the pipeline from a verified graph to a module a target
 * finishes, the same for every target:
 *
 *   shape_analyze → canon_run → fuse_plan → memplan_build →
 *   cg_host (the kernels and the host flow, through the target's hooks) →
 *   the LLVM verifier → target->finish (optimise for the CPU, then JIT it
 *   or write an object; a GPU target compiles its kernels' source)
 *
 * with --dump-after after each pass. Nothing here knows which target it
 * serves (codegen.h, "targets").
 */
#include "codegen/codegen.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/Support.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassManagerBuilder.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static pthread_once_t llvm_once = PTHREAD_ONCE_INIT;

static void llvm_init(void)
{
    LLVMInitializeNativeTarget();
    LLVMInitializeNativeAsmPrinter();
    /* glibc's vector math (libmvec) for exp, log, sin, cos, pow in
     * vectorised loops (_ZGVdN8v_expf and friends), when it can be loaded
     * into the process for the JIT to find */
    if (dlopen("libmvec.so.1", RTLD_NOW | RTLD_GLOBAL)) {
        const char *argv[] = {"disc", "-vector-library=LIBMVEC-X86"};
        LLVMParseCommandLineOptions(2, argv, NULL);
    }
}

void cg_llvm_init(void) { pthread_once(&llvm_once, llvm_init); }

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
                if (*t->features)
                    LLVMAddTargetDependentFunctionAttr(f, "target-features", t->features);
                /* the kernels' vectors are sized for the target (skinny.c):
                 * keep them whole on CPUs tuned to prefer narrower ones */
                LLVMAddTargetDependentFunctionAttr(f, "min-legal-vector-width", width);
            }
        LLVMPassManagerRef pm = LLVMCreatePassManager();
        LLVMAddAnalysisPasses(tm, pm);
        LLVMPassManagerBuilderRef pmb = LLVMPassManagerBuilderCreate();
        LLVMPassManagerBuilderSetOptLevel(pmb, (unsigned)level);
        LLVMPassManagerBuilderUseInlinerWithThreshold(pmb, 275);
        LLVMPassManagerBuilderPopulateModulePassManager(pmb, pm);
        LLVMRunPassManager(pm, mod);
        LLVMPassManagerBuilderDispose(pmb);
        LLVMDisposePassManager(pm);
        LLVMDisposeTargetMachine(tm);
    }
    LLVMDisposeMessage(err);
    LLVMDisposeMessage(triple);
}

bool cg_build_module(Graph *g, const ShapeOpts *so, const CgOpts *o, const CpuTarget *cpu, LLVMContextRef ctx,
                     const CgTarget *t, CgModule *m, Diag *d)
{
    memset(m, 0, sizeof *m);
    m->g = g;
    cg_llvm_init();
    double t0 = now();
    m->si = shape_analyze(g, so, d);
    if (!m->si)
        return false;
    if (o->dump_after && !strcmp(o->dump_after, "shape"))
        shape_print(stderr, m->si);
    canon_run(g, &m->canon);
    if (o->dump_after && !strcmp(o->dump_after, "canon"))
        graph_print(stderr, g, &(PrintOpts){16, true});
    double t1 = now();
    m->plan = o->unfused ? fuse_plan_unfused(m->si, d) : fuse_plan(m->si, d);
    if (!m->plan || diag_arena_failed(d, &g->arena))
        return false;
    if (o->dump_after && !strcmp(o->dump_after, "fusion"))
        fuse_print(stderr, m->plan);
    m->mp = memplan_build(m->plan, m->si, d);
    if (!m->mp || diag_arena_failed(d, &g->arena) || diag_arena_failed(d, &m->si->arena) ||
        diag_arena_failed(d, &m->plan->arena) || diag_arena_failed(d, &m->mp->arena))
        return false;
    if (o->dump_after && !strcmp(o->dump_after, "memplan"))
        memplan_print(stderr, m->mp, NULL);
    double t2 = now();
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
    double t3 = now();
    m->t[0] = t1 - t0;
    m->t[1] = t2 - t1;
    m->t[2] = t3 - t2;
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
    double t0 = now();
    ok = t->finish(t, m, o, cpu, d);
    m->t[3] = now() - t0;
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
