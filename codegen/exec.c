/*
 * exec.c — the cpu-jit target and a compiled model: the driver's module
 * (driver.c) optimised for the CPU and compiled into memory by ORC LLJIT,
 * and running it. Its hooks (codegen.h, "targets"): constants and ops are
 * addresses in this process; kernels and their launch are the CPU's.
 *
 * The host flow calls the runtime (rt.h) for memory, kernels and library
 * calls, and one thunk here: disc_exec_host_op runs an op that has no
 * kernel template (topk, nonzero, scatter, resize, ...) through the
 * reference interpreter's code, binding the data-dependent symbols its
 * results define.
 *
 * Control flow. A loop or if is such a host op too, but its regions are
 * compiled: exec_compile compiles each region of the compiled graph once,
 * as a model of its own with the same options (fused kernels, its own
 * memory plan, every shape), and the thunk hands the interpreter's loop
 * driver (runtime/interp_region.c: trip count, condition, carried values,
 * stacking) a region runner that calls that code. Each iteration is one
 * run of the body's model, whose run memory is kept between runs, so the
 * body's block is reused across iterations.
 */
#include "codegen/gpu.h"
#include "codegen/host.h"
#include "runtime/interp.h"
#include "runtime/rt.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Support.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassManagerBuilder.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int32_t MainFn(void *rt, void **io, int64_t *shapes, int64_t *syms);

/* A loop or if of the model with its regions compiled, each once, as a
 * model of its own (for every shape, like the model): the op runs on the
 * host (disc_exec_host_op), which drives the iterations or picks the
 * branch and calls the region's code. */
typedef struct RegionExec {
    const Op *op;
    Exec *sub[2];
    Graph *g[2];       /* the regions' copies they were compiled from */
    int n;
} RegionExec;

struct Exec {
    Graph *g;
    ShapeInfo *si;
    FusionPlan *plan;
    MemPlan *mp;
    LLVMOrcLLJITRef jit;
    MainFn *main;
    char *llvm_text;   /* the optimised module, for --stage llvm */
    int nkernels;      /* compiled */
    int nlaunch;       /* launched per run */
    char **kdesc;      /* per kernel, for the profile */
    int threads;
    CpuTarget cpu;     /* what the kernels were compiled for */
    LLVMOrcThreadSafeContextRef tsc; /* while compiling */
    double t_opt;      /* seconds in the LLVM optimiser */
    GpuEmu *emu;       /* cuda-emu: the kernels run by the GPU emulator */
    /* run contexts kept between runs: their memory stays mapped, so a run
     * does not fault in fresh pages (several runs at once take several) */
    pthread_mutex_t lock;
    DiscRt *idle[8];
    int nidle;
    RegionExec *regions;
    int nregions;
};

static DiscRt *rt_acquire(Exec *e)
{
    DiscRt *rt = NULL;
    pthread_mutex_lock(&e->lock);
    if (e->nidle > 0)
        rt = e->idle[--e->nidle];
    pthread_mutex_unlock(&e->lock);
    if (!rt) {
        DiscRtOpts ro = {.threads = e->threads};
        rt = disc_rt_new(&ro);
    }
    return rt;
}

static void rt_release(Exec *e, DiscRt *rt)
{
    disc_rt_reset(rt);
    pthread_mutex_lock(&e->lock);
    if (e->nidle < (int)(sizeof e->idle / sizeof e->idle[0])) {
        e->idle[e->nidle++] = rt;
        rt = NULL;
    }
    pthread_mutex_unlock(&e->lock);
    disc_rt_free(rt);
}

static bool llvm_error(Diag *d, LLVMErrorRef err, const char *what)
{
    char *msg = LLVMGetErrorMessage(err);
    diag_setk(d, DIAG_RESOURCE, "error: %s: %s", what, msg);
    LLVMDisposeErrorMessage(msg);
    return false;
}

/* ---- thunks ------------------------------------------------------------ */

/* Runs op on the interpreter's code, then binds the symbols its results
 * define. */
static bool run_region(void *ctx, const Op *op, int r, const Tensor *in, int nin, Tensor *out, int nout, Diag *d)
{
    Exec *e = ctx;
    for (int i = 0; i < e->nregions; i++)
        if (e->regions[i].op == op && r < e->regions[i].n)
            return exec_run(e->regions[i].sub[r], in, nin, out, nout, d);
    return diag_setk(d, DIAG_INTERNAL, "error: region %d of %s was not compiled", r, op_info(op->kind)->name);
}

int32_t disc_exec_host_op(void *self, void *rt, const Op *op, void **bufs, int64_t *syms)
{
    Exec *e = self;
    int64_t shapes[MAX_RESULTS][MAX_RANK];
    if (interp_host_op_regions(rt, e->g, op, bufs, syms, e->g->dims.nsyms, shapes, op->nregions ? run_region : NULL,
                               e) != 0)
        return -1;
    for (int i = 0; i < e->si->prog.n; i++) {
        const HostStep *s = &e->si->prog.steps[i];
        if (s->kind == HS_DATA && s->value->def == op)
            syms[s->sym->id] = shapes[s->value->idx][s->axis];
    }
    return 0;
}

/* Constant weights go to the library as weights_const (hostlib.c), which
 * may keep a packed copy of them: the graph, which owns the constants,
 * drops the copies when it frees them. */
static bool keep_weights(Graph *g)
{
    for (const Op *op = g->first; op; op = op->next) {
        if ((op->kind != OP_DOT && op->kind != OP_CONV && op->kind != OP_CONV_TRANSPOSE) || op->nin < 2)
            continue;
        const Op *w = op->in[1]->def;
        if (!w || w->kind != OP_CONST || !w->cst || !w->cst->data)
            continue;
        void *p = (void *)w->cst->data;
        bool kept = false;
        for (int k = g->nkeep - 1; k >= 0 && !kept; k--)
            kept = g->keep[k] == p && g->keep_free[k] == disc_rt_weights_forget_at;
        if (!kept && !graph_keep(g, p, disc_rt_weights_forget_at))
            return false;
    }
    return true;
}

/* ---- compiling ----------------------------------------------------------- */

static bool define_runtime(Exec *e, Diag *d)
{
    static const struct {
        const char *name;
        void *addr;
    } syms[] = {
        {"disc_rt_alloc", (void *)disc_rt_alloc},
        {"disc_rt_threads", (void *)disc_rt_threads},
        {"disc_rt_parallel_for", (void *)disc_rt_parallel_for},
        {"disc_rt_output", (void *)disc_rt_output},
        {"disc_rt_call_matmul", (void *)disc_rt_call_matmul},
        {"disc_rt_call_skinny", (void *)disc_rt_call_skinny},
        {"disc_rt_call_conv", (void *)disc_rt_call_conv},
        {"disc_rt_call_pool", (void *)disc_rt_call_pool},
        {"disc_exec_host_op", (void *)disc_exec_host_op},
    };
    int n = (int)(sizeof syms / sizeof syms[0]);
    LLVMJITCSymbolMapPair pairs[sizeof syms / sizeof syms[0]];
    for (int i = 0; i < n; i++) {
        pairs[i].Name = LLVMOrcLLJITMangleAndIntern(e->jit, syms[i].name);
        pairs[i].Sym.Address = (LLVMOrcJITTargetAddress)(uintptr_t)syms[i].addr;
        pairs[i].Sym.Flags.GenericFlags = LLVMJITSymbolGenericFlagsExported | LLVMJITSymbolGenericFlagsCallable;
        pairs[i].Sym.Flags.TargetFlags = 0;
    }
    LLVMOrcJITDylibRef jd = LLVMOrcLLJITGetMainJITDylib(e->jit);
    LLVMErrorRef err = LLVMOrcJITDylibDefine(jd, LLVMOrcAbsoluteSymbols(pairs, (size_t)n));
    if (err)
        return llvm_error(d, err, "cannot define the runtime for the JIT");
    LLVMOrcDefinitionGeneratorRef gen;
    err = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(&gen, LLVMOrcLLJITGetGlobalPrefix(e->jit), NULL, NULL);
    if (err)
        return llvm_error(d, err, "cannot search the process for libm");
    LLVMOrcJITDylibAddGenerator(jd, gen);
    return true;
}

/* cuda-emu: the kernels' entries in the shared object the emulator
 * compiled, for the JIT to link the host flow to. */
static bool define_emu(Exec *e, const CgModule *m, Diag *d)
{
    const char **names;
    void **addrs;
    int n;
    if (!gpu_emu_link(e->emu, m, &names, &addrs, &n, d))
        return false;
    if (n == 0)
        return true;
    LLVMJITCSymbolMapPair *pairs = calloc((size_t)n, sizeof *pairs);
    if (!pairs) {
        free(addrs);
        return diag_oom(d);
    }
    for (int i = 0; i < n; i++) {
        pairs[i].Name = LLVMOrcLLJITMangleAndIntern(e->jit, names[i]);
        pairs[i].Sym.Address = (LLVMOrcJITTargetAddress)(uintptr_t)addrs[i];
        pairs[i].Sym.Flags.GenericFlags = LLVMJITSymbolGenericFlagsExported | LLVMJITSymbolGenericFlagsCallable;
    }
    LLVMErrorRef err = LLVMOrcJITDylibDefine(LLVMOrcLLJITGetMainJITDylib(e->jit), LLVMOrcAbsoluteSymbols(pairs, (size_t)n));
    free(pairs);
    free(addrs);
    return !err || llvm_error(d, err, "cannot define the emulated kernels for the JIT");
}

static void free_kdesc(char **kdesc, int n)
{
    for (int i = 0; kdesc && i < n; i++)
        free(kdesc[i]);
    free(kdesc);
}

/* ---- the cpu-jit target ---------------------------------------------------- */

static LLVMValueRef ptr_const(Cg *cg, const void *p)
{
    return LLVMConstIntToPtr(LLVMConstInt(cg->t_i64, (unsigned long long)(uintptr_t)p, false), cg->t_p8);
}

/* A constant is its data's address in this process. */
static LLVMValueRef jit_const_ptr(Host *h, const Op *op)
{
    return ptr_const(h->cg, op->cst->data);
}

/* A host op is a call of disc_exec_host_op with the Exec and the op as addresses. */
static LLVMValueRef jit_host_op(Host *h, Op *op, LLVMValueRef bufs)
{
    Cg *cg = h->cg;
    LLVMTypeRef fty, params[5] = {cg->t_p8, cg->t_p8, cg->t_p8, cg->t_pp8, cg->t_p64};
    LLVMValueRef f = host_fn_decl(cg, "disc_exec_host_op", cg->t_i32, params, 5, &fty);
    LLVMValueRef a[5] = {ptr_const(cg, cg->target->state), h->rt, ptr_const(cg, op), bufs, h->syms};
    return LLVMBuildCall2(cg->b, fty, f, a, 5, "");
}

/* Optimises the module for the CPU and hands it to ORC LLJIT; e->main is
 * the compiled host flow. */
static bool jit_finish(const CgTarget *t, CgModule *m, const CgOpts *o, const CpuTarget *cpu, Diag *d)
{
    Exec *e = t->state;
    double t0 = disc_rt_now();
    cg_optimise(m->mod, o->opt_level, cpu);
    char *txt = LLVMPrintModuleToString(m->mod);
    if (!(e->llvm_text = strdup(txt))) {
        LLVMDisposeMessage(txt);
        LLVMDisposeModule(m->mod);
        m->mod = NULL;
        return diag_oom(d);
    }
    if (o->dump_after && !strcmp(o->dump_after, "llvm"))
        fputs(txt, stderr);
    LLVMDisposeMessage(txt);
    e->t_opt = disc_rt_now() - t0;
    LLVMErrorRef err = LLVMOrcCreateLLJIT(&e->jit, NULL);
    bool ok = !err || llvm_error(d, err, "cannot create the JIT");
    if (ok) {
        LLVMSetTarget(m->mod, LLVMOrcLLJITGetTripleString(e->jit));
        LLVMSetDataLayout(m->mod, LLVMOrcLLJITGetDataLayoutStr(e->jit));
        ok = define_runtime(e, d);
    }
    if (ok && e->emu)
        ok = define_emu(e, m, d);
    if (ok) {
        LLVMOrcThreadSafeModuleRef tsm = LLVMOrcCreateNewThreadSafeModule(m->mod, e->tsc);
        m->mod = NULL; /* the JIT's now */
        err = LLVMOrcLLJITAddLLVMIRModule(e->jit, LLVMOrcLLJITGetMainJITDylib(e->jit), tsm);
        if (err) {
            LLVMOrcDisposeThreadSafeModule(tsm);
            ok = llvm_error(d, err, "cannot add the module to the JIT");
        }
    } else {
        LLVMDisposeModule(m->mod);
        m->mod = NULL;
    }
    LLVMOrcJITTargetAddress addr = 0;
    if (ok && (err = LLVMOrcLLJITLookup(e->jit, &addr, "disc_main")))
        ok = llvm_error(d, err, "cannot compile the model");
    e->main = (MainFn *)(uintptr_t)addr;
    return ok;
}

/* Compiles the regions of every loop and if that the compiled g still
 * has, each as a model of its own with the same options. */
static bool compile_regions(Exec *e, const CgOpts *o, Diag *d)
{
    int n = 0;
    graph_for_each_op(e->g, op) n += op->nregions > 0;
    if (!n)
        return true;
    if (!(e->regions = calloc((size_t)n, sizeof *e->regions)))
        return diag_oom(d);
    graph_for_each_op(e->g, op) {
        if (!op->nregions)
            continue;
        RegionExec *re = &e->regions[e->nregions++];
        re->op = op;
        for (int r = 0; r < op->nregions && r < 2; r++) {
            Diag rd = {0};
            ShapeOpts so = {0};
            re->g[r] = graph_clone(op->regions[r], &rd);
            re->sub[r] = re->g[r] ? exec_compile(re->g[r], &so, o, &rd) : NULL;
            re->n = r + 1;
            if (!re->sub[r])
                return diag_setk(d, rd.kind, "error: op %d (%s%s%s), region %d (@%s): %s", op->id,
                                 op_info(op->kind)->name, op->src ? " " : "", op->src ? op->src : "", r,
                                 op->regions[r]->name, rd.msg);
        }
    }
    return true;
}

Exec *exec_compile(Graph *g, const ShapeOpts *so, const CgOpts *o, Diag *d)
{
    CgOpts dflt = {.opt_level = 3};
    if (!o)
        o = &dflt;
    Exec *e = calloc(1, sizeof *e);
    if (!e) {
        diag_oom(d);
        return NULL;
    }
    e->g = g;
    e->threads = o->threads;
    pthread_mutex_init(&e->lock, NULL);
    if (!cpu_target_init(&e->cpu, o->cpu, d) || !cpu_target_runs_here(&e->cpu, d) || !keep_weights(g)) {
        if (!d->set)
            diag_oom(d);
        exec_free(e);
        return NULL;
    }
    CgTarget jit;
    cpu_target_hooks(&jit, "cpu-jit");
    jit.const_ptr = jit_const_ptr;
    jit.host_op = jit_host_op;
    jit.finish = jit_finish;
    jit.state = e;
    if (o->gpu && !(e->emu = gpu_emu_new(&jit, o->gpu, d))) {
        exec_free(e);
        return NULL;
    }
    e->tsc = LLVMOrcCreateNewThreadSafeContext();
    CgModule m;
    bool ok = cg_compile(g, so, o, &e->cpu, LLVMOrcThreadSafeContextGetContext(e->tsc), &jit, &m, d);
    LLVMOrcDisposeThreadSafeContext(e->tsc);
    e->tsc = NULL;
    e->si = m.si;
    e->plan = m.plan;
    e->mp = m.mp;
    e->nkernels = m.nkernels;
    e->nlaunch = m.nlaunch;
    e->kdesc = m.kdesc;
    if (!ok || !compile_regions(e, o, d))
        goto fail;
    if (disc_rt_profiling()) { /* names for the profile's kernel entries */
        char target[96];
        snprintf(target, sizeof target, "%s, %s", e->cpu.name, e->cpu.isa);
        for (int i = 0; i < e->nkernels && e->kdesc; i++) {
            char name[32];
            LLVMOrcJITTargetAddress ka = 0;
            snprintf(name, sizeof name, "disc_k%d", i);
            LLVMErrorRef kerr = LLVMOrcLLJITLookup(e->jit, &ka, name);
            if (kerr)
                LLVMConsumeError(kerr);
            else if (e->kdesc[i])
                disc_rt_prof_name((const void *)(uintptr_t)ka, e->kdesc[i], target);
        }
    }
    if (o->verbose && e->emu) {
        int nk;
        size_t bytes;
        double s;
        gpu_emu_stats(e->emu, &nk, &bytes, &s);
        fprintf(stderr, "dcc: cuda-emu: %d GPU kernels, %zu bytes of CUDA C, compiled by cc in %.1f ms\n", nk, bytes,
                1e3 * s);
    }
    if (o->verbose)
        fprintf(stderr,
                "dcc: shape analysis and canon %.1f ms (%d -> %d ops: %d folded, %d merged, %d simplified, "
                "%d dots fused side by side), "
                "fusion and memory plan %.1f ms, LLVM IR %.1f ms, optimise %.1f ms, JIT %.1f ms; %d kernel "
                "launches (%d distinct kernels) and %d library calls (%d applying an epilogue) for %d ops; "
                "%d matmuls with a skinny variant, %d reductions with a split variant; kernels for CPU %s (%s, "
                "%d-bit vectors, %d registers)\n",
                1e3 * m.t[0], m.canon.ops_before, m.canon.ops_after, m.canon.folded, m.canon.cse,
                m.canon.simplified, m.canon.hfused, 1e3 * m.t[1], 1e3 * m.t[2], 1e3 * e->t_opt,
                1e3 * (m.t[3] - e->t_opt), e->nlaunch, e->nkernels, m.nlibrary, m.nepilogue, g->nops, m.nskinny,
                m.nsplit, e->cpu.name, e->cpu.isa, e->cpu.vbits, e->cpu.nvregs);
    return e;
fail:
    exec_free(e);
    return NULL;
}

void exec_free(Exec *e)
{
    if (!e)
        return;
    for (int i = 0; i < e->nidle; i++)
        disc_rt_free(e->idle[i]);
    for (int i = 0; i < e->nregions; i++)
        for (int r = 0; r < e->regions[i].n; r++) {
            exec_free(e->regions[i].sub[r]);
            graph_free(e->regions[i].g[r]);
        }
    free(e->regions);
    pthread_mutex_destroy(&e->lock);
    if (e->jit)
        LLVMOrcDisposeLLJIT(e->jit);
    fuse_plan_free(e->plan);
    memplan_free(e->mp);
    free_kdesc(e->kdesc, e->nkernels);
    shape_info_free(e->si);
    cpu_target_free(&e->cpu);
    gpu_emu_free(e->emu);
    free(e->llvm_text);
    free(e);
}

void exec_print_llvm(Exec *e, FILE *f)
{
    if (e->llvm_text)
        fputs(e->llvm_text, f);
}

int exec_kernel_count(const Exec *e) { return e->nlaunch; }
int exec_distinct_kernels(const Exec *e) { return e->nkernels; }

bool exec_run(Exec *e, const Tensor *inputs, int ninputs, Tensor *outputs, int noutputs, Diag *d)
{
    Graph *g = e->g;
    if (ninputs != g->ninputs || noutputs != g->noutputs)
        return diag_setk(d, DIAG_ARG, "error: the model takes %d inputs and %d outputs", g->ninputs, g->noutputs);
    int nshapes = 0;
    for (int i = 0; i < g->ninputs; i++) {
        if (inputs[i].rank != g->inputs[i]->type.rank || inputs[i].dtype != g->inputs[i]->type.dtype)
            return shape_check_inputs(e->si, inputs, ninputs, d);
        nshapes += inputs[i].rank;
    }
    for (int i = 0; i < g->noutputs; i++)
        nshapes += g->outputs[i]->type.rank;
    /* inputs, then {buffer, capacity, allocated} per output */
    void *io[g->ninputs + 3 * g->noutputs + 1];
    int64_t shapes[nshapes + 1];
    int64_t *syms = calloc((size_t)g->dims.nsyms + 1, sizeof *syms);
    DiscRt *rt = rt_acquire(e);
    if (!syms || !rt) {
        free(syms);
        if (rt)
            rt_release(e, rt);
        return diag_oom(d);
    }
    int k = 0;
    for (int i = 0; i < g->ninputs; i++) {
        io[i] = inputs[i].data;
        for (int j = 0; j < inputs[i].rank; j++)
            shapes[k++] = inputs[i].shape[j];
    }
    for (int i = 0; i < g->noutputs; i++) {
        void **s = &io[g->ninputs + 3 * i];
        bool given = outputs[i].data && !outputs[i].owned;
        s[0] = given ? outputs[i].data : NULL;
        s[1] = (void *)(uintptr_t)(given ? outputs[i].nbytes : 0);
        s[2] = NULL;
    }
    int32_t rc = e->main(rt, io, shapes, syms);
    bool ok = rc == 0;
    if (rc > 0) {
        if (shape_check_inputs(e->si, inputs, ninputs, d))
            diag_setk(d, DIAG_SHAPE, "error: the input shapes violate step %d of the host shape program", rc - 1);
    } else if (rc < 0) {
        const char *msg = disc_rt_error(rt);
        diag_setk(d, DIAG_RESOURCE, "error: %s", msg ? msg : "run failed");
    }
    for (int i = 0; i < g->noutputs; i++) {
        void **s = &io[g->ninputs + 3 * i];
        Tensor *t = &outputs[i];
        bool given = t->data && !t->owned;
        int rank = g->outputs[i]->type.rank;
        Tensor r = {.dtype = g->outputs[i]->type.dtype, .rank = rank};
        memcpy(r.shape, &shapes[k], (size_t)rank * sizeof *r.shape);
        k += rank;
        r.nbytes = tensor_numel(&r) * dtype_size(r.dtype);
        if (!ok) {
            if (s[2])
                free(s[0]);
            if (!given)
                memset(t, 0, sizeof *t);
            continue;
        }
        if (s[2]) { /* allocated for the caller */
            if (given) {
                ok = diag_setk(d, DIAG_ARG, "error: output %d needs %zu bytes, %zu given", i, r.nbytes, t->nbytes);
                free(s[0]);
                continue;
            }
            r.data = s[0];
            r.owned = true;
        } else if (given && s[0] == t->data) { /* written in place */
            r.data = t->data;
        } else { /* an input or a constant returned as is: copy it */
            if (given && t->nbytes < r.nbytes) {
                ok = diag_setk(d, DIAG_ARG, "error: output %d needs %zu bytes, %zu given", i, r.nbytes, t->nbytes);
                continue;
            }
            void *p = given ? t->data : malloc(r.nbytes ? r.nbytes : 1);
            if (!p) {
                ok = diag_setk(d, DIAG_RESOURCE, "error: out of memory for output %d", i);
                continue;
            }
            if (r.nbytes)
                memcpy(p, s[0], r.nbytes);
            r.data = p;
            r.owned = !given;
        }
        *t = r;
    }
    if (!ok)
        for (int i = 0; i < noutputs; i++)
            if (outputs[i].owned)
                tensor_free(&outputs[i]);
    rt_release(e, rt);
    free(syms);
    return ok;
}
