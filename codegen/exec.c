/*
 * exec.c — a compiled model: the pipeline from a verified graph to native
 * code in memory, and running it.
 *
 *   shape_analyze → fuse_plan → kernels and the host flow as LLVM IR →
 *   the LLVM optimiser (O3, host CPU) → ORC LLJIT → disc_main
 *
 * The host flow calls back into two thunks here: disc_exec_library runs a
 * dot, convolution or pooling through oneDNN (runtime/dnnl.c), and
 * disc_exec_host_op runs an op that has no kernel template (topk, nonzero,
 * scatter, resize, ...) through the reference interpreter's code, binding
 * the data-dependent symbols its results define.
 */
#include "codegen/codegen.h"
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
    /* run contexts kept between runs: their memory stays mapped, so a run
     * does not fault in fresh pages (several runs at once take several) */
    pthread_mutex_t lock;
    DiscRt *idle[8];
    int nidle;
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

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- profile (DISC_PROFILE=1): time per kernel and library call ---------- */

typedef struct ProfEntry {
    const void *key;
    const char *what;
    double seconds;
    long calls;
} ProfEntry;

static ProfEntry prof[4096];
static int nprof;
static pthread_mutex_t prof_lock = PTHREAD_MUTEX_INITIALIZER;

static void prof_add(const void *key, const char *what, double t)
{
    pthread_mutex_lock(&prof_lock);
    int i = 0;
    while (i < nprof && prof[i].key != key)
        i++;
    if (i == nprof && nprof < 4096)
        prof[nprof++] = (ProfEntry){key, what, 0, 0};
    if (i < nprof) {
        prof[i].seconds += t;
        prof[i].calls++;
    }
    pthread_mutex_unlock(&prof_lock);
}

static int prof_cmp(const void *a, const void *b)
{
    double x = ((const ProfEntry *)a)->seconds, y = ((const ProfEntry *)b)->seconds;
    return x < y ? 1 : x > y ? -1 : 0;
}

static void prof_report(void)
{
    double total = 0;
    for (int i = 0; i < nprof; i++)
        total += prof[i].seconds;
    qsort(prof, (size_t)nprof, sizeof *prof, prof_cmp);
    fprintf(stderr, "disc profile: %.1f ms in %d kernels and library calls\n", 1e3 * total, nprof);
    for (int i = 0; i < nprof && i < (getenv("DISC_PROFILE_TOP") ? atoi(getenv("DISC_PROFILE_TOP")) : 25); i++)
        fprintf(stderr, "  %8.2f ms %5.1f%% %6ld calls  %s\n", 1e3 * prof[i].seconds,
                100 * prof[i].seconds / (total > 0 ? total : 1), prof[i].calls, prof[i].what);
}

/* Names a kernel's entry for the report (strings live with the Exec). */
static void prof_name(const void *key, const char *what)
{
    pthread_mutex_lock(&prof_lock);
    int i = 0;
    while (i < nprof && prof[i].key != key)
        i++;
    if (i == nprof && nprof < 4096)
        prof[nprof++] = (ProfEntry){key, what, 0, 0};
    pthread_mutex_unlock(&prof_lock);
}

static void prof_parallel_for(DiscRt *rt, DiscKernelFn *fn, void *args, int64_t n, int64_t grain)
{
    double t0 = now();
    disc_rt_parallel_for(rt, fn, args, n, grain);
    prof_add((const void *)fn, "kernel", now() - t0);
}

/* ---- thunks ------------------------------------------------------------ */

/* Memory for graph output k: slots = &io[ninputs + 3k] = {buffer, capacity,
 * allocated}. The caller's buffer when it is large enough, else memory the
 * caller will own: no copy after the run. */
void *disc_exec_output(void *rt, void **slots, int64_t slot, int64_t bytes)
{
    void **s = slots + slot;
    if (s[0] && (int64_t)(uintptr_t)s[1] >= bytes)
        return s[0];
    void *p = malloc(bytes > 0 ? (size_t)bytes : 1);
    if (!p) {
        disc_rt_fail(rt, "out of memory for an output of %lld bytes", (long long)bytes);
        return NULL;
    }
    if (s[2]) /* an output computed twice: keep the last */
        free(s[0]);
    s[0] = p;
    s[2] = (void *)1;
    return p;
}

static bool eval_dims(const Type *t, const int64_t *syms, int nsyms, int64_t *out)
{
    DimEnv env = {syms, NULL, nsyms};
    for (int i = 0; i < t->rank; i++)
        if (dim_eval(t->dims[i], &env, &out[i]) != DIM_OK)
            return false;
    return true;
}

static void view(Tensor *t, const Value *v, void *data, const int64_t *shape)
{
    memset(t, 0, sizeof *t);
    t->dtype = v->type.dtype;
    t->rank = v->type.rank;
    memcpy(t->shape, shape, (size_t)t->rank * sizeof *shape);
    t->data = data;
    t->nbytes = tensor_numel(t) * dtype_size(t->dtype);
}

/* Runs op on the interpreter; results are copied into run memory. */
int32_t disc_exec_host_op(void *self, void *rt, const Op *op, void **bufs, int64_t *syms)
{
    Exec *e = self;
    int nsyms = e->g->dims.nsyms;
    Tensor in[op->nin > 0 ? op->nin : 1], out[2];
    const Tensor *inp[op->nin > 0 ? op->nin : 1];
    for (int i = 0; i < op->nin; i++) {
        int64_t shape[MAX_RANK];
        if (!eval_dims(&op->in[i]->type, syms, nsyms, shape)) {
            disc_rt_fail(rt, "%s: an operand's dims cannot be evaluated", op_info(op->kind)->name);
            return -1;
        }
        view(&in[i], op->in[i], bufs[i], shape);
        inp[i] = &in[i];
    }
    memset(out, 0, sizeof out);
    Diag d = {0};
    if (!interp_run_op(e->g, op, syms, nsyms, inp, out, &d)) {
        disc_rt_fail(rt, "%s", d.msg);
        return -1;
    }
    int32_t rc = 0;
    for (int r = 0; r < op->nout; r++) {
        const Type *t = &op->out[r]->type;
        for (int i = 0; i < e->si->prog.n; i++) { /* bind what the results define */
            const HostStep *s = &e->si->prog.steps[i];
            if (s->kind == HS_DATA && s->value == op->out[r])
                syms[s->sym->id] = out[r].shape[s->axis];
        }
        (void)t;
        void *p = disc_rt_alloc(rt, (int64_t)out[r].nbytes);
        if (!p) {
            rc = -1;
        } else {
            if (out[r].nbytes)
                memcpy(p, out[r].data, out[r].nbytes);
            bufs[op->nin + r] = p;
        }
        tensor_free(&out[r]);
    }
    return rc;
}

/* Axes of `t` grouped into one block of a matrix view: contiguous in
 * memory, in order. Returns the block's element stride, or -1. */
static int64_t block_stride(const int64_t *shape, int rank, const int64_t *axes, int n)
{
    if (n == 0)
        return 0;
    for (int i = 1; i < n; i++)
        if (axes[i] != axes[i - 1] + 1)
            return -1;
    int64_t s = 1;
    for (int i = rank - 1; i > axes[n - 1]; i--)
        s *= shape[i];
    return s;
}

static int64_t count(const int64_t *shape, const int64_t *axes, int n)
{
    int64_t c = 1;
    for (int i = 0; i < n; i++)
        c *= shape[axes[i]];
    return c;
}

/* Free axes: those in neither list, in order. */
static int free_axes(int rank, const Attr *a, const Attr *b, int64_t *out)
{
    int n = 0;
    for (int i = 0; i < rank; i++) {
        bool used = false;
        for (int j = 0; j < a->n; j++)
            used |= a->ints[j] == i;
        for (int j = 0; j < b->n; j++)
            used |= b->ints[j] == i;
        if (!used)
            out[n++] = i;
    }
    return n;
}

/* The block order of axes lists must follow memory: each block's axes are
 * adjacent; returns false if the view does not exist. */
static bool matrix_view(const int64_t *shape, int rank, const Attr *batch, const int64_t *rows, int nrows,
                        const Attr *cols, int64_t *st)
{
    st[0] = block_stride(shape, rank, batch->ints, batch->n);
    st[1] = block_stride(shape, rank, rows, nrows);
    st[2] = block_stride(shape, rank, cols->ints, cols->n);
    if (st[0] < 0 || st[1] < 0 || st[2] < 0)
        return false;
    /* the blocks must not interleave: check the total extent is consistent */
    return true;
}

/* An empty result needs no library call. */
static bool empty_result(Exec *e, void *rt, const Op *op, void **bufs, int64_t *syms, int32_t *rc)
{
    int64_t shape[MAX_RANK];
    if (!eval_dims(&op->out[0]->type, syms, e->g->dims.nsyms, shape))
        return false;
    for (int i = 0; i < op->out[0]->type.rank; i++)
        if (shape[i] == 0) {
            void *p = disc_rt_alloc(rt, 0);
            bufs[op->nin] = p;
            *rc = p ? 0 : -1;
            return true;
        }
    return false;
}

static int32_t run_dot(Exec *e, void *rt, const Op *op, void **bufs, int64_t *syms, bool *handled)
{
    int nsyms = e->g->dims.nsyms;
    const Type *at = &op->in[0]->type, *bt = &op->in[1]->type, *ct = &op->out[0]->type;
    int64_t as[MAX_RANK], bs[MAX_RANK], cs[MAX_RANK];
    if (at->dtype != DT_F32 || !eval_dims(at, syms, nsyms, as) || !eval_dims(bt, syms, nsyms, bs) ||
        !eval_dims(ct, syms, nsyms, cs))
        return 0;
    const Attr *lb = op_attr(op, "lhs_batch"), *rb = op_attr(op, "rhs_batch");
    const Attr *lc = op_attr(op, "lhs_contract"), *rc = op_attr(op, "rhs_contract");
    int64_t lf[MAX_RANK], rf[MAX_RANK];
    int nlf = free_axes(at->rank, lb, lc, lf), nrf = free_axes(bt->rank, rb, rc, rf);
    DiscMatmul m = {0};
    m.dtype = DT_F32;
    m.batch = count(as, lb->ints, lb->n);
    m.m = count(as, lf, nlf);
    m.k = count(as, lc->ints, lc->n);
    m.n = count(bs, rf, nrf);
    if (!matrix_view(as, at->rank, lb, lf, nlf, lc, m.a_stride))
        return 0;
    /* B as [batch][k][n]: rows are the contracting axes */
    Attr rfa = {.kind = ATTR_INTS, .n = nrf, .ints = rf};
    if (!matrix_view(bs, bt->rank, rb, rc->ints, rc->n, &rfa, m.b_stride))
        return 0;
    m.c_stride[0] = m.m * m.n;
    m.c_stride[1] = m.n;
    m.c_stride[2] = 1;
    if (m.batch == 1)
        m.a_stride[0] = m.b_stride[0] = m.c_stride[0] = 0;
    /* a constant of the model: the same data at the same address for the
     * life of the Exec, so the library may keep a packed copy */
    const Op *bdef = op->in[1]->def;
    m.weights_const = bdef && bdef->kind == OP_CONST && bdef->cst && bdef->cst->data == bufs[1];
    void *c = disc_rt_alloc(rt, m.batch * m.m * m.n * 4);
    if (!c)
        return -1;
    *handled = true;
    bufs[2] = c;
    return disc_rt_matmul(rt, &m, bufs[0], bufs[1], c) == 0 ? 0 : -1;
}

static void window(const Op *op, const int64_t *xs, int nsp, int64_t *in, int64_t *stride, int64_t *dil,
                   int64_t *lo, int64_t *hi, const int64_t *syms, int nsyms)
{
    const Attr *st = op_attr(op, "strides"), *dl = op_attr(op, "dilations"), *pd = op_attr(op, "pads");
    DimEnv env = {syms, NULL, nsyms};
    for (int i = 0; i < nsp; i++) {
        in[i] = xs[2 + i];
        stride[i] = st->ints[i];
        dil[i] = dl->ints[i];
        dim_eval(pd->dims[i], &env, &lo[i]);
        dim_eval(pd->dims[nsp + i], &env, &hi[i]);
    }
}

static int32_t run_conv(Exec *e, void *rt, const Op *op, void **bufs, int64_t *syms, bool *handled)
{
    int nsyms = e->g->dims.nsyms;
    const Type *xt = &op->in[0]->type;
    int64_t xs[MAX_RANK], ws[MAX_RANK], ys[MAX_RANK];
    int nsp = xt->rank - 2;
    if (xt->dtype != DT_F32 || nsp < 1 || nsp > 3 || !eval_dims(xt, syms, nsyms, xs) ||
        !eval_dims(&op->in[1]->type, syms, nsyms, ws) || !eval_dims(&op->out[0]->type, syms, nsyms, ys))
        return 0;
    DiscConv c = {0};
    c.dtype = DT_F32;
    c.nsp = nsp;
    c.n = xs[0];
    c.c = xs[1];
    c.o = ys[1];
    c.groups = op_attr_int(op, "groups", 1);
    c.transpose = op->kind == OP_CONV_TRANSPOSE;
    const Op *wdef = op->in[1]->def;
    c.weights_const = wdef && wdef->kind == OP_CONST && wdef->cst && wdef->cst->data == bufs[1];
    window(op, xs, nsp, c.in, c.stride, c.dilation, c.pad_lo, c.pad_hi, syms, nsyms);
    for (int i = 0; i < nsp; i++) {
        c.k[i] = ws[2 + i];
        c.out[i] = ys[2 + i];
        if (c.pad_lo[i] < 0 || c.pad_hi[i] < 0)
            return 0; /* cropping pads: the interpreter's code does those */
    }
    Tensor y = {.dtype = DT_F32, .rank = xt->rank};
    memcpy(y.shape, ys, sizeof ys);
    void *p = disc_rt_alloc(rt, (int64_t)(tensor_numel(&y) * 4));
    if (!p)
        return -1;
    *handled = true;
    bufs[2] = p;
    return disc_rt_conv(rt, &c, bufs[0], bufs[1], p) == 0 ? 0 : -1;
}

static int32_t run_pool(Exec *e, void *rt, const Op *op, void **bufs, int64_t *syms, bool *handled)
{
    int nsyms = e->g->dims.nsyms;
    const Type *xt = &op->in[0]->type;
    int64_t xs[MAX_RANK], ys[MAX_RANK];
    int nsp = xt->rank - 2;
    if (xt->dtype != DT_F32 || nsp < 1 || nsp > 3 || !eval_dims(xt, syms, nsyms, xs) ||
        !eval_dims(&op->out[0]->type, syms, nsyms, ys) || op_attr_int(op, "ceil", 0))
        return 0;
    DiscPool pl = {0};
    pl.dtype = DT_F32;
    pl.nsp = nsp;
    pl.max = !strcmp(op_attr_str(op, "kind", "max"), "max");
    pl.n = xs[0];
    pl.c = xs[1];
    pl.count_pad = (int)op_attr_int(op, "count_pad", 0);
    window(op, xs, nsp, pl.in, pl.stride, pl.dilation, pl.pad_lo, pl.pad_hi, syms, nsyms);
    const Attr *win = op_attr(op, "window");
    for (int i = 0; i < nsp; i++) {
        pl.window[i] = win->ints[i];
        pl.out[i] = ys[2 + i];
    }
    Tensor y = {.dtype = DT_F32, .rank = xt->rank};
    memcpy(y.shape, ys, sizeof ys);
    void *p = disc_rt_alloc(rt, (int64_t)(tensor_numel(&y) * 4));
    if (!p)
        return -1;
    *handled = true;
    bufs[1] = p;
    return disc_rt_pool(rt, &pl, bufs[0], p) == 0 ? 0 : -1;
}

static int32_t exec_library(void *self, void *rt, const Op *op, void **bufs, int64_t *syms);

int32_t disc_exec_library(void *self, void *rt, const Op *op, void **bufs, int64_t *syms)
{
    /* Constant weights of a dot or convolution go to the library as
     * weights_const (run_dot, run_conv), which may keep a packed copy of
     * them: the graph, which owns the constants, drops it when it frees
     * them (registered once per constant). */
    Exec *e = self;
    const Op *w = op->nin > 1 && op->in[1] ? op->in[1]->def : NULL;
    if ((op->kind == OP_DOT || op->kind == OP_CONV || op->kind == OP_CONV_TRANSPOSE) && w &&
        w->kind == OP_CONST && w->cst && w->cst->data == bufs[1]) {
        static pthread_mutex_t keep_mu = PTHREAD_MUTEX_INITIALIZER;
        pthread_mutex_lock(&keep_mu);
        bool kept = false;
        for (int i = e->g->nkeep - 1; i >= 0 && !kept; i--)
            kept = e->g->keep[i] == bufs[1] && e->g->keep_free[i] == disc_rt_weights_forget_at;
        bool ok = kept || graph_keep(e->g, bufs[1], disc_rt_weights_forget_at);
        pthread_mutex_unlock(&keep_mu);
        if (!ok) {
            disc_rt_fail(rt, "%s: out of memory", op_info(op->kind)->name);
            return -1;
        }
    }
    if (!getenv("DISC_PROFILE"))
        return exec_library(self, rt, op, bufs, syms);
    double t0 = now();
    int32_t rc = exec_library(self, rt, op, bufs, syms);
    prof_add(op, op_info(op->kind)->name, now() - t0);
    return rc;
}

static int32_t exec_library(void *self, void *rt, const Op *op, void **bufs, int64_t *syms)
{
    Exec *e = self;
    bool handled = false;
    int32_t rc = 0;
    if (empty_result(e, rt, op, bufs, syms, &rc))
        return rc;
    switch (op->kind) {
    case OP_DOT: rc = run_dot(e, rt, op, bufs, syms, &handled); break;
    case OP_CONV:
    case OP_CONV_TRANSPOSE: rc = run_conv(e, rt, op, bufs, syms, &handled); break;
    case OP_POOL: rc = run_pool(e, rt, op, bufs, syms, &handled); break;
    default: break;
    }
    if (handled || rc != 0)
        return rc;
    /* layouts or dtypes the library does not take */
    return disc_exec_host_op(self, rt, op, bufs, syms);
}

/* ---- compiling ----------------------------------------------------------- */

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

static bool llvm_error(Diag *d, LLVMErrorRef err, const char *what)
{
    char *msg = LLVMGetErrorMessage(err);
    diag_set(d, "error: %s: %s", what, msg);
    LLVMDisposeErrorMessage(msg);
    return false;
}

static void optimise(LLVMModuleRef mod, int level)
{
    char *triple = LLVMGetDefaultTargetTriple();
    char *cpu = LLVMGetHostCPUName(), *feat = LLVMGetHostCPUFeatures();
    LLVMTargetRef target;
    char *err = NULL;
    if (LLVMGetTargetFromTriple(triple, &target, &err) == 0) {
        LLVMTargetMachineRef tm = LLVMCreateTargetMachine(target, triple, cpu, feat, LLVMCodeGenLevelAggressive,
                                                          LLVMRelocDefault, LLVMCodeModelJITDefault);
        for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f))
            if (LLVMCountBasicBlocks(f)) {
                LLVMAddTargetDependentFunctionAttr(f, "target-cpu", cpu);
                LLVMAddTargetDependentFunctionAttr(f, "target-features", feat);
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
    LLVMDisposeMessage(cpu);
    LLVMDisposeMessage(feat);
}

static bool define_runtime(Exec *e, Diag *d)
{
    static const struct {
        const char *name;
        void *addr;
    } syms[] = {
        {"disc_rt_alloc", (void *)disc_rt_alloc},
        {"disc_rt_parallel_for", (void *)disc_rt_parallel_for},
        {"disc_prof_parallel_for", (void *)prof_parallel_for},
        {"disc_exec_library", (void *)disc_exec_library},
        {"disc_exec_host_op", (void *)disc_exec_host_op},
        {"disc_exec_output", (void *)disc_exec_output},
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

Exec *exec_compile(Graph *g, const ShapeOpts *so, const CgOpts *o, Diag *d)
{
    CgOpts dflt = {3, false, 0, false, NULL};
    if (!o)
        o = &dflt;
    pthread_once(&llvm_once, llvm_init);
    static bool prof_registered;
    if (getenv("DISC_PROFILE") && !prof_registered) {
        prof_registered = true;
        atexit(prof_report);
    }
    Exec *e = calloc(1, sizeof *e);
    if (!e) {
        diag_set(d, "error: out of memory");
        return NULL;
    }
    e->g = g;
    e->threads = o->threads;
    pthread_mutex_init(&e->lock, NULL);
    double t0 = now();
    e->si = shape_analyze(g, so, d);
    if (!e->si)
        goto fail;
    if (o->dump_after && !strcmp(o->dump_after, "shape"))
        shape_print(stderr, e->si);
    canon_simplify(g);
    if (o->dump_after && !strcmp(o->dump_after, "canon"))
        graph_print(stderr, g, &(PrintOpts){16, true});
    double t1 = now();
    e->plan = o->unfused ? fuse_plan_unfused(e->si, d) : fuse_plan(e->si, d);
    if (!e->plan)
        goto fail;
    if (o->dump_after && !strcmp(o->dump_after, "fusion"))
        fuse_print(stderr, e->plan);
    e->mp = memplan_build(e->plan, e->si, d);
    if (!e->mp)
        goto fail;
    if (o->dump_after && !strcmp(o->dump_after, "memplan"))
        memplan_print(stderr, e->mp, NULL);
    double t2 = now();
    LLVMOrcThreadSafeContextRef tsc = LLVMOrcCreateNewThreadSafeContext();
    Cg cg;
    cg_init(&cg, LLVMOrcThreadSafeContextGetContext(tsc), g, e->si, e->plan, d);
    cg.mp = e->mp;
    bool ok = cg_host(&cg, e);
    e->nkernels = cg.nkernels;
    e->nlaunch = cg.nlaunch;
    e->kdesc = cg.kdesc;
    cg_free(&cg);
    char *vmsg = NULL;
    if (ok && LLVMVerifyModule(cg.mod, LLVMReturnStatusAction, &vmsg)) {
        diag_set(d, "error: internal: generated LLVM IR is invalid: %.400s", vmsg);
        ok = false;
    }
    LLVMDisposeMessage(vmsg);
    double t3 = now();
    if (ok) {
        optimise(cg.mod, o->opt_level);
        char *txt = LLVMPrintModuleToString(cg.mod);
        e->llvm_text = strdup(txt);
        if (o->dump_after && !strcmp(o->dump_after, "llvm"))
            fputs(txt, stderr);
        LLVMDisposeMessage(txt);
    }
    double t4 = now();
    LLVMErrorRef err = NULL;
    if (ok && (err = LLVMOrcCreateLLJIT(&e->jit, NULL)))
        ok = llvm_error(d, err, "cannot create the JIT");
    if (ok) {
        LLVMSetTarget(cg.mod, LLVMOrcLLJITGetTripleString(e->jit));
        LLVMSetDataLayout(cg.mod, LLVMOrcLLJITGetDataLayoutStr(e->jit));
        ok = define_runtime(e, d);
    }
    if (ok) {
        LLVMOrcThreadSafeModuleRef tsm = LLVMOrcCreateNewThreadSafeModule(cg.mod, tsc);
        err = LLVMOrcLLJITAddLLVMIRModule(e->jit, LLVMOrcLLJITGetMainJITDylib(e->jit), tsm);
        if (err) {
            LLVMOrcDisposeThreadSafeModule(tsm);
            ok = llvm_error(d, err, "cannot add the module to the JIT");
        }
    } else {
        LLVMDisposeModule(cg.mod);
    }
    LLVMOrcDisposeThreadSafeContext(tsc);
    LLVMOrcJITTargetAddress addr = 0;
    if (ok && (err = LLVMOrcLLJITLookup(e->jit, &addr, "disc_main")))
        ok = llvm_error(d, err, "cannot compile the model");
    double t5 = now();
    if (!ok)
        goto fail;
    e->main = (MainFn *)(uintptr_t)addr;
    if (getenv("DISC_PROFILE"))
        for (int i = 0; i < e->nkernels && e->kdesc; i++) {
            char name[32];
            LLVMOrcJITTargetAddress ka = 0;
            snprintf(name, sizeof name, "disc_k%d", i);
            LLVMErrorRef kerr = LLVMOrcLLJITLookup(e->jit, &ka, name);
            if (kerr)
                LLVMConsumeError(kerr);
            else
                prof_name((const void *)(uintptr_t)ka, e->kdesc[i]);
        }
    if (o->verbose)
        fprintf(stderr,
                "dcc: shape analysis %.1f ms, fusion and memory plan %.1f ms, LLVM IR %.1f ms, optimise %.1f ms, "
                "JIT %.1f ms; %d kernel launches (%d distinct kernels) and %d library calls for %d ops\n",
                1e3 * (t1 - t0), 1e3 * (t2 - t1), 1e3 * (t3 - t2), 1e3 * (t4 - t3), 1e3 * (t5 - t4),
                e->nlaunch, e->nkernels, cg.nlibrary, g->nops);
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
    pthread_mutex_destroy(&e->lock);
    if (e->jit)
        LLVMOrcDisposeLLJIT(e->jit);
    fuse_plan_free(e->plan);
    memplan_free(e->mp);
    if (!getenv("DISC_PROFILE")) /* the profile report reads them at exit */
        for (int i = 0; e->kdesc && i < e->nkernels; i++)
            free(e->kdesc[i]);
    if (!getenv("DISC_PROFILE"))
        free(e->kdesc);
    shape_info_free(e->si);
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
        return diag_set(d, "error: the model takes %d inputs and %d outputs", g->ninputs, g->noutputs);
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
        return diag_set(d, "error: out of memory");
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
            diag_set(d, "error: the input shapes violate step %d of the host shape program", rc - 1);
    } else if (rc < 0) {
        const char *msg = disc_rt_error(rt);
        diag_set(d, "error: %s", msg ? msg : "run failed");
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
                ok = diag_set(d, "error: output %d needs %zu bytes, %zu given", i, r.nbytes, t->nbytes);
                free(s[0]);
                continue;
            }
            r.data = s[0];
            r.owned = true;
        } else if (given && s[0] == t->data) { /* written in place */
            r.data = t->data;
        } else { /* an input or a constant returned as is: copy it */
            if (given && t->nbytes < r.nbytes) {
                ok = diag_set(d, "error: output %d needs %zu bytes, %zu given", i, r.nbytes, t->nbytes);
                continue;
            }
            void *p = given ? t->data : malloc(r.nbytes ? r.nbytes : 1);
            if (!p) {
                ok = diag_set(d, "error: out of memory for output %d", i);
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
