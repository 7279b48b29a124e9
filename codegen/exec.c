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
 * The module is optimised and compiled into one object file in memory,
 * which the JIT links. The object names nothing of this process by
 * address: the flow reaches a constant through the table
 * disc_jit_consts and the Exec through disc_jit_self, symbols the JIT
 * defines when it links, and names a host op by its index in the graph.
 * So the same object serves a later process that compiles the same model:
 * the on-disk cache (cache.h) keeps it, and a hit runs only shape analysis
 * and canonicalisation (for the graph the tables index) and the link.
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
#include "codegen/cache.h"
#include "codegen/gpu.h"
#include "codegen/host.h"
#include "codegen/perfmap.h"
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

typedef DiscFlowFn MainFn;

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
    Op **ops;          /* the graph's ops in program order: the host flow
                          names a constant or a host op by its index */
    void **cdata;      /* per op index, a constant's data (disc_jit_consts) */
    int nops;
    const void **known; /* constants registered with disc_rt_known_add */
    int nknown;
    bool keep_obj;     /* keep the objects for the cache */
    bool hit;          /* linked from the cache */
    int nparts;        /* objects compiled (cg_objects) */
    void *obj[CG_MAX_OBJECTS]; /* the object files, when kept */
    size_t objsize[CG_MAX_OBJECTS];
    char *llvm_text;   /* the optimised module, for --stage llvm */
    int nkernels;      /* compiled */
    int nlaunch;       /* launched per run */
    char **kdesc;      /* per kernel, for the profile */
    PerfMap perf;      /* DISC_PERF_MAP: the objects' symbols (perfmap.c) */
    int threads;
    CpuTarget cpu;     /* what the kernels were compiled for */
    double t_opt;      /* seconds in the LLVM optimiser */
    GpuEmu *emu;       /* cuda-emu: the kernels run by the GPU emulator */
    GpuRun *gpu;       /* cuda: the kernels on a GPU (gpurun.c); runs take
                          turns on it, under gpu_lock */
    pthread_mutex_t gpu_lock;
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

int32_t disc_exec_host_op(void *self, void *rt, int64_t index, void **bufs, int64_t *syms)
{
    Exec *e = self;
    const Op *op = e->ops[index];
    int64_t shapes[MAX_RESULTS][MAX_RANK];
    if (disc_gpu_capturing(rt, disc_rt_gpu(rt), "a host op") != 0)
        return -1;
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

/* Half-precision conversions, which LLVM leaves to these library calls
 * where the CPU has no F16C (kernels for x86-64 or SSE machines): the
 * interpreter's, exact from f32 and rounding to nearest even into f16. */
static uint16_t f32_to_f16(float f) { return interp_f16_from_double(f); }
static float f16_to_f32(uint16_t h) { return (float)interp_f16_to_double(h); }

static bool define_runtime(Exec *e, Diag *d)
{
    static const struct {
        const char *name;
        void *addr;
    } syms[] = {
        {"disc_rt_alloc", (void *)disc_rt_alloc},
        {"disc_rt_place", (void *)disc_rt_place},
        {"disc_rt_threads", (void *)disc_rt_threads},
        {"disc_rt_parallel_for", (void *)disc_rt_parallel_for},
        {"disc_rt_output", (void *)disc_rt_output},
        {"disc_rt_overflow", (void *)disc_rt_overflow},
        {"disc_rt_call_matmul", (void *)disc_rt_call_matmul},
        {"disc_rt_call_skinny", (void *)disc_rt_call_skinny},
        {"disc_rt_call_conv", (void *)disc_rt_call_conv},
        {"disc_rt_call_pool", (void *)disc_rt_call_pool},
        {"disc_exec_host_op", (void *)disc_exec_host_op},
        {"disc_rt_dev_alloc", (void *)disc_rt_dev_alloc},
        {"disc_rt_dev_in", (void *)disc_rt_dev_in},
        {"disc_rt_dev_out", (void *)disc_rt_dev_out},
        {"disc_rt_dev_fill", (void *)disc_rt_dev_fill},
        {"disc_rt_dev_launch", (void *)disc_rt_dev_launch},
        {"disc_rt_dev_matmul", (void *)disc_rt_dev_matmul},
        {"disc_rt_dev_conv", (void *)disc_rt_dev_conv},
        {"disc_rt_dev_pool", (void *)disc_rt_dev_pool},
        {"disc_rt_dev_const", (void *)disc_rt_dev_const},
        {"disc_rt_dev_input", (void *)disc_rt_dev_input},
        {"disc_rt_dev_output", (void *)disc_rt_dev_output},
        {"__gnu_f2h_ieee", (void *)f32_to_f16},
        {"__gnu_h2f_ieee", (void *)f16_to_f32},
    };
    int n = (int)(sizeof syms / sizeof syms[0]);
    LLVMJITCSymbolMapPair pairs[sizeof syms / sizeof syms[0] + 2];
    for (int i = 0; i < n; i++) {
        pairs[i].Name = LLVMOrcLLJITMangleAndIntern(e->jit, syms[i].name);
        pairs[i].Sym.Address = (LLVMOrcJITTargetAddress)(uintptr_t)syms[i].addr;
        pairs[i].Sym.Flags.GenericFlags = LLVMJITSymbolGenericFlagsExported | LLVMJITSymbolGenericFlagsCallable;
        pairs[i].Sym.Flags.TargetFlags = 0;
    }
    /* this model's: the constants' table and the Exec (data, not code) */
    const char *names[2] = {"disc_jit_consts", "disc_jit_self"};
    void *addrs[2] = {e->cdata, e};
    for (int i = 0; i < 2; i++, n++) {
        pairs[n].Name = LLVMOrcLLJITMangleAndIntern(e->jit, names[i]);
        pairs[n].Sym.Address = (LLVMOrcJITTargetAddress)(uintptr_t)addrs[i];
        pairs[n].Sym.Flags.GenericFlags = LLVMJITSymbolGenericFlagsExported;
        pairs[n].Sym.Flags.TargetFlags = 0;
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

/* Symbols at fixed addresses for the JIT to link the flow to: n names,
 * their addresses, callable (code) or not (data). */
static bool define_abs(Exec *e, const char **names, void **addrs, int n, bool code, Diag *d)
{
    if (n == 0)
        return true;
    LLVMJITCSymbolMapPair *pairs = calloc((size_t)n, sizeof *pairs);
    if (!pairs)
        return diag_oom(d);
    for (int i = 0; i < n; i++) {
        pairs[i].Name = LLVMOrcLLJITMangleAndIntern(e->jit, names[i]);
        pairs[i].Sym.Address = (LLVMOrcJITTargetAddress)(uintptr_t)addrs[i];
        pairs[i].Sym.Flags.GenericFlags =
            LLVMJITSymbolGenericFlagsExported | (code ? LLVMJITSymbolGenericFlagsCallable : 0);
    }
    LLVMErrorRef err = LLVMOrcJITDylibDefine(LLVMOrcLLJITGetMainJITDylib(e->jit), LLVMOrcAbsoluteSymbols(pairs, (size_t)n));
    free(pairs);
    return !err || llvm_error(d, err, "cannot define the kernels for the JIT");
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
    bool ok = define_abs(e, names, addrs, n, true, d);
    free(addrs);
    return ok;
}

/* cuda: the module compiled and loaded, the constants uploaded, and the
 * tables the flow reads them through. */
static bool define_gpu(Exec *e, Diag *d)
{
    GpuRunSyms s;
    if (!gpu_run_link(e->gpu, &s, d))
        return false;
    const char *names[2] = {"disc_jit_gpufns", "disc_jit_dconsts"};
    void *addrs[2] = {s.fns, s.consts};
    return define_abs(e, names, addrs, 2, false, d);
}

static void free_kdesc(char **kdesc, int n)
{
    for (int i = 0; kdesc && i < n; i++)
        free(kdesc[i]);
    free(kdesc);
}

/* ---- the cpu-jit target ---------------------------------------------------- */

/* The ops of the graph in program order, and the constants' data by the
 * same index: made once the passes have finished changing the graph (the
 * first hook that names an op, or the link). */
static bool exec_tables(Exec *e)
{
    if (e->ops)
        return true;
    int n = 0;
    for (const Op *op = e->g->first; op; op = op->next)
        n++;
    e->ops = calloc((size_t)n + 1, sizeof *e->ops);
    e->cdata = calloc((size_t)n + 1, sizeof *e->cdata);
    if (!e->ops || !e->cdata) {
        free(e->ops);
        free(e->cdata);
        e->ops = NULL;
        e->cdata = NULL;
        return false;
    }
    n = 0;
    for (Op *op = e->g->first; op; op = op->next, n++) {
        e->ops[n] = op;
        if (op->kind == OP_CONST && op->cst)
            e->cdata[n] = (void *)op->cst->data;
    }
    e->nops = n;
    /* weights whose hash the loader knew: their packed copies may be kept
     * in the store they came from (disc_rt_known_add); best effort */
    for (Op *op = e->g->first; op && e->g->store; op = op->next) {
        const Const *c = op->kind == OP_CONST ? op->cst : NULL;
        if (!c || !c->data || c->hash_of != c->data || c->nbytes < ((size_t)1 << 20))
            continue;
        const void **k = realloc(e->known, (size_t)(e->nknown + 1) * sizeof *k);
        if (!k)
            break;
        e->known = k;
        if (disc_rt_known_add(c->data, c->hash, e->g->store))
            e->known[e->nknown++] = c->data;
    }
    return true;
}

/* op's index in the tables; -1 (with cg->d) when out of memory. */
static int64_t op_index(Cg *cg, const Op *op)
{
    Exec *e = cg->target->state;
    if (!exec_tables(e)) {
        diag_setk(cg->d, DIAG_RESOURCE, "codegen: out of memory");
        return -1;
    }
    for (int i = 0; i < e->nops; i++)
        if (e->ops[i] == op)
            return i;
    diag_setk(cg->d, DIAG_INTERNAL, "codegen: internal: an op that is not in the graph");
    return -1;
}

/* A global the JIT defines when it links (define_runtime). */
static LLVMValueRef jit_global(Cg *cg, const char *name, LLVMTypeRef t)
{
    LLVMValueRef gv = LLVMGetNamedGlobal(cg->mod, name);
    return gv ? gv : LLVMAddGlobal(cg->mod, t, name);
}

/* A constant is entry op_index of disc_jit_consts, its data's address. */
static LLVMValueRef jit_const_ptr(Host *h, const Op *op)
{
    Cg *cg = h->cg;
    int64_t i = op_index(cg, op);
    if (i < 0)
        return NULL;
    LLVMTypeRef at = LLVMArrayType(cg->t_p8, 0);
    LLVMValueRef ix[2] = {cg_i64(cg, 0), cg_i64(cg, i)};
    LLVMValueRef p = LLVMBuildGEP2(cg->b, at, jit_global(cg, "disc_jit_consts", at), ix, 2, "");
    return LLVMBuildLoad2(cg->b, cg->t_p8, p, "const");
}

/* A host op is a call of disc_exec_host_op with the Exec and the op's index. */
static LLVMValueRef jit_host_op(Host *h, Op *op, LLVMValueRef bufs)
{
    Cg *cg = h->cg;
    LLVMTypeRef fty, params[5] = {cg->t_p8, cg->t_p8, cg->t_i64, cg->t_pp8, cg->t_p64};
    LLVMValueRef f = host_fn_decl(cg, "disc_exec_host_op", cg->t_i32, params, 5, &fty);
    LLVMValueRef self = jit_global(cg, "disc_jit_self", cg->t_i8);
    LLVMValueRef a[5] = {self, h->rt, cg_i64(cg, op_index(cg, op)), bufs, h->syms};
    return LLVMBuildCall2(cg->b, fty, f, a, 5, "");
}

/* A new JIT with the runtime, the tables (and the emulator's kernels)
 * defined and the objects linked in; e->main is the host flow. Takes the
 * objects. */
static bool jit_link(Exec *e, LLVMMemoryBufferRef *obj, int nobj, const CgModule *m, Diag *d)
{
    LLVMErrorRef err = LLVMOrcCreateLLJIT(&e->jit, NULL);
    bool ok = !err || llvm_error(d, err, "cannot create the JIT");
    if (ok && !exec_tables(e))
        ok = diag_oom(d);
    ok = ok && define_runtime(e, d);
    if (ok && e->emu)
        ok = define_emu(e, m, d);
    if (ok && e->gpu)
        ok = define_gpu(e, d);
    for (int i = 0; i < nobj; i++) {
        if (ok && disc_env()->perf_map)
            perf_map_collect(&e->perf, obj[i]); /* a map without them, at worst */
        if (ok) {
            err = LLVMOrcLLJITAddObjectFile(e->jit, LLVMOrcLLJITGetMainJITDylib(e->jit), obj[i]);
            if (err)
                ok = llvm_error(d, err, "cannot add the model's code to the JIT");
        } else {
            LLVMDisposeMemoryBuffer(obj[i]);
        }
        obj[i] = NULL; /* the JIT's now */
    }
    LLVMOrcJITTargetAddress addr = 0;
    if (ok && (err = LLVMOrcLLJITLookup(e->jit, &addr, "disc_main")))
        ok = llvm_error(d, err, "cannot link the model");
    e->main = (MainFn *)(uintptr_t)addr;
    return ok;
}

/* Compiles the regions of every loop and if that the compiled g still
 * has, each as a model of its own with the same options. */
/* The invariant operands of op (a loop's x_1..x_m, an if's operands) that
 * are constants with data become constants of region r's copy g: the
 * body's matmuls then have constant weights (packed once, the skinny
 * variant) where the recurrent weights of an LSTM come in, and the
 * constants fold into the body. The data stays the enclosing graph's,
 * which outlives the region's compile. */
static bool const_invariants(const Op *op, Graph *g)
{
    int first = op->kind == OP_LOOP ? 2 + loop_ncarried(op) : 1, shift = op->kind == OP_LOOP ? 0 : 1;
    for (int k = first; k < op->nin; k++) {
        const Value *v = op->in[k];
        const Op *def = v->def;
        int j = k - shift;
        size_t n;
        if (!def || def->kind != OP_CONST || !def->cst || !def->cst->data || j >= g->ninputs ||
            !type_static_numel(&v->type, &n) || def->cst->nbytes != n * dtype_size(v->type.dtype))
            continue;
        Dim *dims[MAX_RANK];
        for (int i = 0; i < v->type.rank; i++)
            dims[i] = dim_const(&g->dims, v->type.dims[i]->c);
        Value *c = build_const(g, type_make(&g->arena, v->type.dtype, v->type.rank, dims), def->cst->data,
                               def->cst->nbytes, false);
        if (!c)
            return false;
        graph_move_op(g, c->def, g->first);
        graph_replace_uses(g, g->inputs[j], c);
    }
    return true;
}

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
            if (re->g[r] && !const_invariants(op, re->g[r]))
                diag_copy(&rd, &re->g[r]->err);
            re->sub[r] = re->g[r] && !rd.set ? exec_compile(re->g[r], &so, o, &rd) : NULL;
            re->n = r + 1;
            if (!re->sub[r])
                return diag_setk(d, rd.kind, "error: op %d (%s%s%s), region %d (@%s): %s", op->id,
                                 op_info(op->kind)->name, op->src ? " " : "", op->src ? op->src : "", r,
                                 op->regions[r]->name, rd.msg);
        }
    }
    return true;
}

/* Optimises the module for the CPU, compiles it into objects (cg_objects:
 * in parts on threads), keeps a copy of them for the cache when asked, and
 * links them. */
static bool jit_finish(const CgTarget *t, CgModule *m, const CgOpts *o, const CpuTarget *cpu, Diag *d)
{
    Exec *e = t->state;
    bool dump = o->dump_after && !strcmp(o->dump_after, "llvm");
    char *txt = NULL;
    CgObjOpts oo = {.level = o->opt_level, .cpu = cpu, .parts = o->compile_threads,
                    .text = o->keep_llvm || dump ? &txt : NULL, .cheap = "disc_main"};
    CgObjects objs;
    bool ok = cg_objects(m->mod, &oo, &objs, d);
    LLVMDisposeModule(m->mod);
    m->mod = NULL;
    e->t_opt = objs.t_opt;
    e->nparts = objs.n;
    if (ok && txt) {
        if (dump)
            fputs(txt, stderr);
        if (o->keep_llvm && !(e->llvm_text = strdup(txt)))
            ok = diag_oom(d);
    }
    LLVMDisposeMessage(txt);
    for (int i = 0; ok && e->keep_obj && i < objs.n; i++) {
        e->objsize[i] = LLVMGetBufferSize(objs.obj[i]);
        if ((e->obj[i] = malloc(e->objsize[i] ? e->objsize[i] : 1)))
            memcpy(e->obj[i], LLVMGetBufferStart(objs.obj[i]), e->objsize[i]);
        else
            ok = diag_oom(d);
    }
    if (!ok) {
        cg_objects_free(&objs);
        return false;
    }
    ok = jit_link(e, objs.obj, objs.n, m, d);
    objs.n = 0;
    return ok;
}

/* A cache hit: shape analysis and canonicalisation make the graph the
 * object's tables index, then the object is linked. */
static bool exec_from_cache(Exec *e, const ShapeOpts *so, const CgOpts *o, CacheEntry *ce, CgModule *m, Diag *d)
{
    if (!cg_run_passes(e->g, so, o, CG_CANON, m, d))
        return false;
    e->si = m->si;
    m->si = NULL;
    e->nkernels = ce->nkernels;
    e->nlaunch = ce->nlaunch;
    e->kdesc = ce->kdesc; /* taken */
    ce->kdesc = NULL;
    ce->nkernels = 0;
    LLVMMemoryBufferRef obj[CACHE_MAX_OBJECTS] = {NULL};
    bool ok = true;
    for (int i = 0; i < ce->nobj; i++)
        ok &= (obj[i] = LLVMCreateMemoryBufferWithMemoryRangeCopy(ce->obj[i], ce->objsize[i], "disc.o")) != NULL;
    if (ok)
        return jit_link(e, obj, ce->nobj, m, d);
    for (int i = 0; i < ce->nobj; i++)
        if (obj[i])
            LLVMDisposeMemoryBuffer(obj[i]);
    return diag_oom(d);
}

/* Seconds of CPU time this process has used, all threads. */
static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void print_stats(const Exec *e, const CgModule *m, const Graph *g)
{
    fprintf(stderr,
            "dcc: shape analysis and canon %.1f ms (%d -> %d ops: %d folded, %d merged, %d simplified, "
            "%d dots fused side by side), "
            "fusion and memory plan %.1f ms, LLVM IR %.1f ms, optimise %.1f ms, JIT %.1f ms (%d part%s on "
            "threads); %d kernel launches (%d distinct kernels, %d of them reading constants by slot) and %d "
            "library calls (%d applying an epilogue) for %d ops; %d matmuls with a skinny variant, %d reductions with a split variant, "
            "%d convolutions and pools %s%.0d%s; kernels for CPU %s (%s, %d-bit vectors, %d registers)\n",
            1e3 * m->t[0], m->canon.ops_before, m->canon.ops_after, m->canon.folded, m->canon.cse,
            m->canon.simplified, m->canon.hfused, 1e3 * m->t[1], 1e3 * m->t[2], 1e3 * e->t_opt,
            1e3 * (m->t[3] - e->t_opt), e->nparts, e->nparts == 1 ? "" : "s", e->nlaunch, e->nkernels,
            m->nopened, m->nlibrary, m->nepilogue, g->nops, m->nskinny, m->nsplit, m->nnhwc,
            m->block ? "blocked by " : "channels-last", m->block, m->block ? " channels" : "", e->cpu.name, e->cpu.isa,
            e->cpu.vbits, e->cpu.nvregs);
}

Exec *exec_compile(Graph *g, const ShapeOpts *so, const CgOpts *o, Diag *d)
{
    CgOpts dflt = {.opt_level = 3};
    if (!o)
        o = &dflt;
    double t_start = disc_rt_now(), c_start = cpu_now();
    Exec *e = calloc(1, sizeof *e);
    if (!e) {
        diag_oom(d);
        return NULL;
    }
    e->g = g;
    if (o->no_cache || disc_env()->cache_off) /* nothing written to the cache's directory, derived weights included */
        g->store = NULL;
    e->threads = o->threads;
    pthread_mutex_init(&e->lock, NULL);
    pthread_mutex_init(&e->gpu_lock, NULL);
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
    bool cuda = o->gpu && !strcmp(o->gpu, "cuda");
    if (o->gpu && (cuda ? !(e->gpu = gpu_run_new(&jit, o, true, d)) : !(e->emu = gpu_emu_new(&jit, o->gpu, d)))) {
        exec_free(e);
        return NULL;
    }
    /* the cache: keyed on the graph before any pass changes it */
    char dir[4096];
    CacheKey key = {0};
    CacheEntry ce = {0};
    char why[64] = "";
    bool cache = !e->emu && !e->gpu && !o->keep_llvm && !o->dump_after && cache_dir(o, dir, sizeof dir);
    if (cache && !cache_key(g, so, o, &e->cpu, &key, d)) {
        exec_free(e);
        return NULL;
    }
    double t_key = disc_rt_now() - t_start;
    CgModule m;
    bool ok;
    if (cache && cache_load(dir, &key, &ce, why, sizeof why)) {
        double t0 = disc_rt_now();
        ok = e->hit = exec_from_cache(e, so, o, &ce, &m, d);
        if (ok && o->verbose)
            fprintf(stderr, "dcc: cache hit, %s/%s.jit (%zu bytes of code): key %.1f ms, shape analysis and "
                            "canon %.1f ms, link %.1f ms; %d kernel launches (%d distinct kernels); kernels for "
                            "CPU %s (%s, %d-bit vectors, %d registers)\n",
                    dir, key.name, cache_code_bytes(&ce), 1e3 * t_key, 1e3 * m.t[0],
                    1e3 * (disc_rt_now() - t0 - m.t[0]), e->nlaunch, e->nkernels, e->cpu.name, e->cpu.isa,
                    e->cpu.vbits, e->cpu.nvregs);
        cache_entry_free(&ce);
    } else {
        e->keep_obj = cache;
        LLVMContextRef ctx = LLVMContextCreate();
        ok = cg_compile(g, so, o, &e->cpu, ctx, &jit, &m, d);
        if (m.mod)
            LLVMDisposeModule(m.mod);
        LLVMContextDispose(ctx);
        e->si = m.si;
        e->plan = m.plan;
        e->mp = m.mp;
        e->nkernels = m.nkernels;
        e->nlaunch = m.nlaunch;
        e->kdesc = m.kdesc;
        m.si = NULL;
        m.plan = NULL;
        m.mp = NULL;
        m.kdesc = NULL;
        if (ok && o->verbose)
            print_stats(e, &m, g);
        if (ok && cache) {
            CacheEntry w = {.nkernels = m.nkernels, .nlaunch = m.nlaunch, .nlibrary = m.nlibrary,
                            .nepilogue = m.nepilogue, .nskinny = m.nskinny, .nsplit = m.nsplit, .kdesc = e->kdesc,
                            .nobj = e->nparts};
            for (int i = 0; i < e->nparts; i++) {
                w.obj[i] = e->obj[i];
                w.objsize[i] = e->objsize[i];
            }
            Diag wd = {0};
            bool stored = cache_store(dir, &key, &w, &wd);
            if (o->verbose && stored)
                fprintf(stderr, "dcc: cache miss%s%s%s, wrote %s/%s.jit (%zu bytes of code)\n", why[0] ? " (" : "",
                        why, why[0] ? ": recompiled)" : "", dir, key.name, cache_code_bytes(&w));
            else if (o->verbose)
                fprintf(stderr, "dcc: cache miss; %s\n", wd.msg);
        }
        for (int i = 0; i < e->nparts; i++) {
            free(e->obj[i]);
            e->obj[i] = NULL;
        }
    }
    cg_module_free(&m);
    cache_key_free(&key);
    if (ok && o->verbose)
        fprintf(stderr, "dcc: compiled in %.1f ms, %.1f ms of CPU time in all threads\n",
                1e3 * (disc_rt_now() - t_start), 1e3 * (cpu_now() - c_start));
    if (!ok || !compile_regions(e, o, d)) {
        exec_free(e);
        return NULL;
    }
    if (disc_rt_profiling() && e->gpu) { /* the launches are timed by the driver layer, keyed by function */
        GpuRunStats st;
        gpu_run_stats(e->gpu, &st);
        char target[200];
        snprintf(target, sizeof target, "cuda %s (%s)", st.arch, st.device);
        void *const *fns = gpu_run_functions(e->gpu);
        for (int i = 0; i < e->nkernels && e->kdesc && fns; i++)
            if (e->kdesc[i])
                disc_rt_prof_name(fns[i], e->kdesc[i], target);
    } else if (disc_rt_profiling()) { /* names for the profile's kernel entries */
        char target[96];
        snprintf(target, sizeof target, "CPU %s, %s", e->cpu.name, e->cpu.isa);
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
    if (disc_env()->perf_map && e->jit) {
        char path[64];
        int n = perf_map_write(&e->perf, e->jit, (const char *const *)e->kdesc, e->nkernels,
                               g->file ? g->file : g->name, path, sizeof path);
        if (o->verbose && n < 0)
            fprintf(stderr, "dcc: perf map: cannot write %s\n", path);
        else if (o->verbose)
            fprintf(stderr, "dcc: perf map: %d functions in %s\n", n, path);
    }
    perf_map_free(&e->perf);
    if (o->verbose && e->gpu) {
        GpuRunStats st;
        gpu_run_stats(e->gpu, &st);
        fprintf(stderr, "dcc: cuda: %d kernels, %zu bytes of CUDA C, %s for %s (%s) in %.1f ms%s; %d constants "
                        "read by kernels; matmuls on %s, convolutions and pooling on %s\n", st.nkernels, st.bytes,
                st.emu ? "compiled for the emulator" : "NVRTC", st.arch, st.device, 1e3 * st.seconds,
                st.hit ? " (from the cache)" : "", st.nconsts, st.gemm, st.conv);
    }
    if (o->verbose && e->emu) {
        int nk;
        size_t bytes;
        double s;
        gpu_emu_stats(e->emu, &nk, &bytes, &s);
        fprintf(stderr, "dcc: cuda-emu: %d GPU kernels, %zu bytes of CUDA C, compiled by cc in %.1f ms\n", nk, bytes,
                1e3 * s);
    }
    return e;
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
    perf_map_free(&e->perf);
    pthread_mutex_destroy(&e->lock);
    if (e->jit)
        LLVMOrcDisposeLLJIT(e->jit);
    fuse_plan_free(e->plan);
    memplan_free(e->mp);
    free_kdesc(e->kdesc, e->nkernels);
    shape_info_free(e->si);
    cpu_target_free(&e->cpu);
    gpu_emu_free(e->emu);
    gpu_run_free(e->gpu);
    pthread_mutex_destroy(&e->gpu_lock);
    free(e->llvm_text);
    free(e->ops);
    free(e->cdata);
    for (int i = 0; i < e->nknown; i++)
        disc_rt_known_remove(e->known[i]);
    free(e->known);
    for (int i = 0; i < CG_MAX_OBJECTS; i++)
        free(e->obj[i]);
    free(e);
}

void exec_print_llvm(Exec *e, FILE *f)
{
    if (e->llvm_text)
        fputs(e->llvm_text, f);
}

int exec_kernel_count(const Exec *e) { return e->nlaunch; }
int exec_distinct_kernels(const Exec *e) { return e->nkernels; }
bool exec_cache_hit(const Exec *e) { return e->hit; }

bool exec_run(Exec *e, const Tensor *inputs, int ninputs, Tensor *outputs, int noutputs, Diag *d)
{
    return exec_run_io(e, inputs, ninputs, outputs, noutputs, false, NULL, d);
}

bool exec_run_io(Exec *e, const Tensor *inputs, int ninputs, Tensor *outputs, int noutputs, bool dev_io, void *wait,
                 Diag *d)
{
    Graph *g = e->g;
    if (ninputs != g->ninputs || noutputs != g->noutputs)
        return diag_setk(d, DIAG_ARG, "error: the model takes %d inputs and %d outputs", g->ninputs, g->noutputs);
    if ((dev_io || wait) && !e->gpu)
        return diag_setk(d, DIAG_ARG, "error: inputs and outputs in device memory need a model compiled for cuda");
    for (int i = 0; dev_io && i < noutputs; i++)
        if (!outputs[i].data || outputs[i].owned)
            return diag_setk(d, DIAG_ARG, "error: output %d: in device memory, the caller gives every output's "
                                          "buffer (data and nbytes)", i);
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
    if (e->gpu) { /* the model's device, its stream and memory: one run at a time */
        pthread_mutex_lock(&e->gpu_lock);
        disc_rt_set_gpu(rt, gpu_run_device(e->gpu));
        disc_rt_set_dev_io(rt, dev_io);
    }
    int32_t rc;
    if (e->gpu) { /* the flow, or the graph of a run at these shapes before */
        DiscGpuFlow f = {.main = e->main, .io = io, .ninputs = g->ninputs, .noutputs = g->noutputs,
                         .shapes = shapes, .nin_dims = k, .nout_dims = nshapes - k, .syms = syms, .wait = wait};
        rc = disc_gpu_run(rt, gpu_run_device(e->gpu), &f);
    } else {
        rc = e->main(rt, io, shapes, syms);
    }
    bool ok = rc == 0;
    if (rc > 0) {
        if (shape_check_inputs(e->si, inputs, ninputs, d) && hostprog_explain(g, &e->si->prog, rc - 1, syms, d))
            diag_setk(d, DIAG_SHAPE, "error: the input shapes violate step %d of the host shape program", rc - 1);
    } else if (rc < 0) {
        const char *msg = disc_rt_error(rt);
        int kind = disc_rt_error_kind(rt); /* an interpreter's kind from a host op, else 0 */
        diag_setk(d, kind > DIAG_NONE && kind <= DIAG_INTERNAL ? (DiagKind)kind : DIAG_RESOURCE, "error: %s",
                  msg ? msg : "run failed");
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
    if (e->gpu) {
        disc_rt_set_dev_io(rt, 0);
        disc_rt_set_gpu(rt, NULL); /* the run's device memory back to the cache */
        pthread_mutex_unlock(&e->gpu_lock);
    }
    rt_release(e, rt);
    free(syms);
    return ok;
}
