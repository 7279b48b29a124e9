/*
 * gpurun.c — the cuda target: a model's kernels on an NVIDIA GPU.
 *
 * The host flow is the cpu-jit's (exec.c: LLVM, JIT-compiled, on the CPU:
 * the shape program, the guards, the variant choices and the host ops
 * stay there); what changes is where the kernels run and where their
 * data lives (CgTarget.dev_memory, host.c):
 *
 *   - a group's kernel is cuda.c's CUDA C, every kernel of the model in
 *     one module compiled by NVRTC at link time into a CUBIN for the
 *     device's architecture (through the on-disk cache of compiled
 *     modules), loaded once per compiled model;
 *   - its launch is a call of disc_rt_dev_launch with the grid, the
 *     variant and the dynamic shared memory that the flow computes from
 *     the symbols (GpuKernel), and cuLaunchKernel's parameters: pointers
 *     to the buffers' device addresses and to the symbols' values;
 *     outputs a split variant combines into are filled first;
 *   - the memory plan's block, and every buffer a kernel writes, is
 *     device memory from the device's caching allocator; inputs are
 *     copied in where a kernel first reads them, results copied out where
 *     a host op or the caller reads them; a constant is uploaded by the
 *     first run that reads it and kept with the model (the table
 *     disc_jit_dconsts, disc_rt_dev_const);
 *   - a library group (dot, conv, pool with its epilogue) is a kernel too
 *     (cuda.c's tiled GEMM, a thread per result for conv and pool); a
 *     group no template takes runs on the host, as on the CPU.
 *
 * One device (DISC_CUDA_DEVICE, else 0) per compiled model, its primary
 * context and a stream of the model's own (cudrv.c); runs of one model
 * take turns on it (exec.c).
 *
 * Tests without a GPU: with DISC_CUDA_EMU_MODULES=1 the module is the
 * same CUDA C compiled for the emulator (emu.c, gpu_emu_image) into an
 * image that only the stand-in driver loads (tests/unit/fake_cuda.c):
 * then everything above runs, the driver calls included, with the
 * device played by host memory at addresses the host may not read.
 */
#include "codegen/gpu.h"
#include "codegen/host.h"
#include "runtime/rt.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct GpuRun {
    GpuStr src;         /* every kernel, after the header line */
    GpuKernel *k;       /* per kernel: its launch */
    LLVMValueRef *fn;   /* per kernel: the placeholder the flow names it by */
    int n, capk, capfn, capoff;
    const Op **consts;  /* the constants kernels read, by disc_jit_dconsts index */
    int nconsts, capconsts;
    bool emu;           /* kernels for the emulator, on the stand-in driver */
    CgOpts o;           /* for the module cache */
    DiscRt *rt;         /* for the device's errors at compile and link */
    DiscGpu *gpu;
    size_t hdr;         /* bytes of src before the first kernel */
    size_t *off;        /* per kernel: where its text starts in src */
    DiscGpuModule **mods; /* the JIT's modules: the kernels in parts */
    int nmods;
    DiscGpuFn **fns;    /* per kernel: disc_jit_gpufns */
    DiscDevPtr *dconst; /* per constant: disc_jit_dconsts (the runs fill it) */
    char arch[16];      /* "sm_90" */
    bool blas;          /* dots through cuBLASLt (disc_rt_dev_matmul) */
    char gemm[160];     /* GpuRunStats.gemm */
    char conv[160];     /* GpuRunStats.conv */
    GpuCacheInfo ci;    /* what compiling the module did */
    size_t srcbytes;
};

static bool grow(void **p, int *cap, int need, size_t size)
{
    if (need <= *cap)
        return true;
    int c = *cap ? 2 * *cap : 16;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, (size_t)c * size);
    if (!q)
        return false;
    *p = q;
    *cap = c;
    return true;
}

/* The kernel hook: grp's CUDA C into the module; its LLVM function is a
 * placeholder the launch hook finds the kernel by (never called). */
static bool run_kernel(Cg *cg, const Group *grp, KernelInfo *ki)
{
    GpuRun *r = cg->target->kstate;
    char name[32];
    snprintf(name, sizeof name, "disc_k%d", cg->nkernels);
    if (!grow((void **)&r->k, &r->capk, r->n + 1, sizeof *r->k) ||
        !grow((void **)&r->off, &r->capoff, r->n + 1, sizeof *r->off) ||
        !grow((void **)&r->fn, &r->capfn, r->n + 1, sizeof *r->fn))
        return diag_oom(cg->d);
    size_t at = r->src.n;
    GpuKernel gk;
    GpuLang lang = r->emu ? GPU_EMU : GPU_CUDA;
    if (!gpu_kernel(cg, grp, name, lang, r->emu ? GPU_EMU_GRID_MAX : GPU_GRID_MAX, 32, &r->src, &gk))
        return false; /* the flow splits the group up, or runs the op on the host */
    char desc[256];
    int n = snprintf(desc, sizeof desc, "%s %s (cuda):", name, fuse_kind_name(grp->kind));
    for (int i = 0; i < grp->nops && n > 0 && (size_t)n < sizeof desc; i++)
        n += snprintf(desc + n, sizeof desc - (size_t)n, " %s", op_info(grp->ops[i]->kind)->name);
    if (!(cg->kdesc[cg->nkernels] = strdup(desc))) {
        gpu_kernel_free(&gk);
        return diag_oom(cg->d);
    }
    cg->nkernels++;
    snprintf(ki->name, sizeof ki->name, "%s", name);
    ki->fn = LLVMAddFunction(cg->mod, name, cg->t_kernel);
    ki->range = gk.grid;
    ki->grain = 1;
    r->k[r->n] = gk;
    r->off[r->n] = at;
    r->fn[r->n++] = ki->fn;
    return true;
}

/* A global of the module that the JIT defines at link (exec.c). */
static LLVMValueRef table(Cg *cg, const char *name)
{
    LLVMTypeRef at = LLVMArrayType(cg->t_p8, 0);
    LLVMValueRef gv = LLVMGetNamedGlobal(cg->mod, name);
    return gv ? gv : LLVMAddGlobal(cg->mod, at, name);
}

static LLVMValueRef table_entry(Cg *cg, const char *name, int i)
{
    LLVMTypeRef at = LLVMArrayType(cg->t_p8, 0);
    LLVMValueRef ix[2] = {cg_i64(cg, 0), cg_i64(cg, i)};
    return LLVMBuildLoad2(cg->b, cg->t_p8, LLVMBuildGEP2(cg->b, at, table(cg, name), ix, 2, ""), "");
}

/* A constant's device copy: slot j of the table disc_jit_dconsts, made by
 * the first run that reads it (disc_rt_dev_const) and kept with the
 * compiled model. The host copy is the target's (const_ptr: in memory, in
 * an AOT object, or in its weights file). */
static LLVMValueRef run_const_dev(Host *h, const Op *op)
{
    Cg *cg = h->cg;
    GpuRun *r = cg->target->kstate;
    int j = 0;
    while (j < r->nconsts && r->consts[j] != op)
        j++;
    if (j == r->nconsts) {
        if (!grow((void **)&r->consts, &r->capconsts, j + 1, sizeof *r->consts)) {
            diag_oom(cg->d);
            return NULL;
        }
        r->consts[r->nconsts++] = op;
    }
    LLVMTypeRef at = LLVMArrayType(cg->t_p8, 0);
    LLVMValueRef ix[2] = {cg_i64(cg, 0), cg_i64(cg, j)};
    LLVMValueRef slot = LLVMBuildGEP2(cg->b, at, table(cg, "disc_jit_dconsts"), ix, 2, "");
    LLVMTypeRef fty, params[4] = {cg->t_p8, cg->t_pp8, cg->t_p8, cg->t_i64};
    LLVMValueRef f = host_fn_decl(cg, "disc_rt_dev_const", cg->t_p8, params, 4, &fty);
    LLVMValueRef a[4] = {h->rt, slot, h->vbuf[op->out[0]->id], cg_i64(cg, (int64_t)op->cst->nbytes)};
    LLVMValueRef p = LLVMBuildCall2(cg->b, fty, f, a, 4, "");
    host_check_or_return(h, LLVMBuildIsNotNull(cg->b, p, ""), -1);
    return p;
}

/* A call of the runtime's i32 fn, returning from the flow unless it is 0. */
static void checked_call(Host *h, const char *fn, LLVMTypeRef *params, LLVMValueRef *args, int n)
{
    Cg *cg = h->cg;
    LLVMTypeRef fty;
    LLVMValueRef f = host_fn_decl(cg, fn, cg->t_i32, params, n, &fty);
    LLVMValueRef rc = LLVMBuildCall2(cg->b, fty, f, args, (unsigned)n, "");
    host_check_or_return(h, LLVMBuildICmp(cg->b, LLVMIntEQ, rc, cg_i32(cg, 0), ""), -1);
}

static uint64_t init_bits(const GpuInit *in)
{
    if (in->dtype == DT_F32) {
        float f = (float)in->value;
        uint32_t u;
        memcpy(&u, &f, 4);
        return u;
    }
    uint64_t u;
    memcpy(&u, &in->value, 8);
    return u;
}

/* The launch hook: args is the CPU kernel ABI's array (the buffers, here
 * device addresses, then the symbols), whose slots serve as the
 * parameters' values. */
static void run_launch(Host *h, LLVMValueRef fn, LLVMValueRef args, LLVMValueRef range, LLVMValueRef grain)
{
    Cg *cg = h->cg;
    GpuRun *r = cg->target->kstate;
    (void)range;
    (void)grain;
    int i = 0;
    while (i < r->n && r->fn[i] != fn)
        i++;
    if (i == r->n) {
        diag_setk(cg->d, DIAG_INTERNAL, "codegen: internal: a launch of a kernel the cuda target did not make");
        return;
    }
    const GpuKernel *gk = &r->k[i];
    int np = gk->nbufs + gk->nsyms + (gk->var ? 1 : 0);
    LLVMBuilderRef b = cg->b;
    LLVMValueRef params = LLVMBuildArrayAlloca(cg->eb, cg->t_p8, cg_i64(cg, np > 0 ? np : 1), "params");
    args = LLVMBuildBitCast(b, args, cg->t_pp8, "");
    for (int j = 0; j < gk->nbufs; j++)
        LLVMBuildStore(b, LLVMBuildBitCast(b, host_gep(cg, cg->t_p8, args, j), cg->t_p8, ""),
                       host_gep(cg, cg->t_p8, params, j));
    for (int j = 0; j < gk->nsyms; j++)
        LLVMBuildStore(b, LLVMBuildBitCast(b, host_gep(cg, cg->t_i64, h->syms, gk->syms[j]), cg->t_p8, ""),
                       host_gep(cg, cg->t_p8, params, gk->nbufs + j));
    LLVMValueRef var = NULL;
    if (gk->var) {
        LLVMValueRef slot = LLVMBuildAlloca(cg->eb, cg->t_i64, "var");
        var = cg_dim(cg, gk->var);
        LLVMBuildStore(b, var, slot);
        LLVMBuildStore(b, LLVMBuildBitCast(b, slot, cg->t_p8, ""), host_gep(cg, cg->t_p8, params, gk->nbufs + gk->nsyms));
    }
    /* the outputs a split variant's parts combine into: filled first
     * (where the kernel has a variant, only when its bit 0 is set) */
    for (int k = 0; k < gk->ninit; k++) {
        const GpuInit *in = &gk->init[k];
        LLVMValueRef n = cg_dim(cg, in->n);
        if (var)
            n = LLVMBuildMul(cg->b, n, LLVMBuildAnd(cg->b, var, cg_i64(cg, 1), ""), "");
        LLVMTypeRef p[5] = {cg->t_p8, cg->t_p8, cg->t_i64, cg->t_i64, cg->t_i64};
        LLVMValueRef a[5] = {h->rt, LLVMBuildLoad2(cg->b, cg->t_p8, host_gep(cg, cg->t_p8, args, in->buf), ""), n,
                             cg_i64(cg, (int64_t)dtype_size(in->dtype)), cg_i64(cg, (int64_t)init_bits(in))};
        checked_call(h, "disc_rt_dev_fill", p, a, 5);
    }
    LLVMTypeRef p[6] = {cg->t_p8, cg->t_p8, cg->t_i64, cg->t_i64, cg->t_i64, cg->t_pp8};
    LLVMValueRef a[6] = {h->rt, table_entry(cg, "disc_jit_gpufns", i), cg_dim(cg, gk->grid), cg_i64(cg, gk->block),
                         gk->shmem ? cg_dim(cg, gk->shmem) : cg_i64(cg, 0), params};
    checked_call(h, "disc_rt_dev_launch", p, a, 6);
}

/* The driver layer's error, without its "cuda: " (the caller's prefix
 * says it). */
static const char *rt_msg(DiscRt *rt)
{
    const char *m = disc_rt_error(rt);
    if (m && !strncmp(m, "cuda: ", 6))
        m += 6;
    return m ? m : "failed";
}

GpuRun *gpu_run_new(CgTarget *t, const CgOpts *o, bool open, Diag *d)
{
    GpuRun *r = calloc(1, sizeof *r);
    DiscRtOpts ro = {.threads = 1};
    if (!r || !(r->rt = disc_rt_new(&ro))) {
        free(r);
        diag_oom(d);
        return NULL;
    }
    r->o = *o;
    const char *emu = getenv("DISC_CUDA_EMU_MODULES");
    r->emu = emu && !strcmp(emu, "1");
    if (open && !(r->gpu = disc_gpu_open(r->rt, DISC_GPU_ENV))) {
        diag_setk(d, DIAG_RESOURCE, "error: backend cuda: %s", rt_msg(r->rt));
        gpu_run_free(r);
        return NULL;
    }
    if (open) {
        const DiscGpuInfo *in = disc_gpu_info(r->gpu);
        snprintf(r->arch, sizeof r->arch, "sm_%d%d", in->major, in->minor);
    }
    gpu_str_printf(&r->src, "/* disc: CUDA kernels */\n%s\n", r->emu ? "" : "#include \"disc_cuda.h\"");
    r->hdr = r->src.n;
    t->name = "cuda";
    t->kernel = run_kernel;
    t->kernel_slots = false;
    t->kernel_split = NULL; /* one grid per group */
    t->skinny = NULL;
    /* matmuls through cuBLASLt where it loads (DISC_CUBLASLT=0: never),
     * with the bias, ReLU and tanh-GELU epilogues it applies; else, and
     * for conv and pool, the group is one of the module's kernels */
    const char *bl = getenv("DISC_CUBLASLT");
    char why[600] = "";
    r->blas = !(bl && !strcmp(bl, "0")) && disc_blas_available(why, sizeof why);
    if (r->blas)
        snprintf(r->gemm, sizeof r->gemm, "cuBLASLt");
    else
        snprintf(r->gemm, sizeof r->gemm, "disc's GEMM kernel (%.130s)", why[0] ? why : "DISC_CUBLASLT=0");
    /* convolutions through cuDNN where it loads (optional; DISC_CUDNN=0:
     * never), with a bias, ReLU and a residual; else the module's kernel */
    const char *dnn = getenv("DISC_CUDNN");
    why[0] = 0;
    t->dev_conv = !(dnn && !strcmp(dnn, "0")) && disc_dnn_available(why, sizeof why);
    if (t->dev_conv)
        snprintf(r->conv, sizeof r->conv, "cuDNN");
    else
        snprintf(r->conv, sizeof r->conv, "disc's kernels (%.130s)", why[0] ? why : "DISC_CUDNN=0");
    t->dev_matmul = r->blas;
    t->library = r->blas || t->dev_conv ? host_emit_library_group : host_emit_kernel_group;
    t->lib_no_posts = ~(1u << DISC_POST_RELU | 1u << DISC_POST_GELU_TANH);
    t->conv_no_posts = 1u << DISC_POST_GELU_TANH; /* cuDNN: ReLU only */
    t->lib_res_alone = true;
    t->launch = run_launch;
    t->dev_memory = true;
    t->const_dev = run_const_dev;
    t->kstate = r;
    return r;
}

DiscGpu *gpu_run_device(const GpuRun *r)
{
    return r->gpu;
}

/* src compiled for arch (the emulator's image with r->emu). */
static bool compile_src(const GpuRun *r, const char *src, const char *arch, bool cubin, char **img, size_t *n,
                        GpuCacheInfo *ci, Diag *d)
{
    *img = NULL;
    *n = 0;
    if (r->emu) {
        memset(ci, 0, sizeof *ci);
        return (*img = gpu_emu_image(src, 32, n, d)) != NULL;
    }
    if (!gpu_rtc_compile_cached(&r->o, GPU_CUDA, src, "disc.cu", arch, cubin, img, n, ci, d))
        return false;
    if (!cubin) { /* PTX goes to the driver as a C string */
        char *p = realloc(*img, *n + 1);
        if (!p) {
            free(*img);
            *img = NULL;
            return diag_oom(d);
        }
        p[*n] = 0;
        *img = p;
        ++*n;
    }
    return true;
}

/* A module image compiled on a thread of its own: kernels [lo, hi) (a
 * part of the JIT's module: NVRTC's time grows with the kernels, and the
 * parts run at once), or with whole the entire source (the AOT's image
 * for an architecture), for arch as a CUBIN or PTX. */
typedef struct Part {
    const GpuRun *r;
    int lo, hi;
    bool whole;
    const char *arch;
    bool cubin;
    GpuStr src;
    char *img;
    size_t n;
    GpuCacheInfo ci;
    Diag d;
    bool ok;
} Part;

static void *part_compile(void *arg)
{
    Part *p = arg;
    const GpuRun *r = p->r;
    const char *src = r->src.p;
    if (!p->whole) {
        size_t end = p->hi < r->n ? r->off[p->hi] : r->src.n;
        gpu_str_printf(&p->src, "%.*s%.*s", (int)r->hdr, r->src.p, (int)(end - r->off[p->lo]),
                       r->src.p + r->off[p->lo]);
        src = p->src.p;
    }
    p->ok = !p->whole && p->src.failed ? diag_oom(&p->d)
                                       : compile_src(r, src, p->arch, p->cubin, &p->img, &p->n, &p->ci, &p->d);
    return NULL;
}

/* parts[0..np) compiled at once: up to a thread per CPU, the first and
 * the rest (and any whose thread did not start) here. r->ci: whether all
 * were cache hits, and the wall time. */
static void compile_all(GpuRun *r, Part *parts, int np)
{
    pthread_t tid[CG_MAX_OBJECTS];
    bool started[CG_MAX_OBJECTS] = {false};
    int cpus = cg_cpus();
    double t0 = disc_rt_now();
    for (int i = 1; i < np && i < cpus && i < CG_MAX_OBJECTS; i++)
        started[i] = pthread_create(&tid[i], NULL, part_compile, &parts[i]) == 0;
    for (int i = 0; i < np; i++)
        if (i >= CG_MAX_OBJECTS || !started[i])
            part_compile(&parts[i]);
    r->ci = (GpuCacheInfo){.hit = true};
    for (int i = 0; i < np; i++) {
        if (i < CG_MAX_OBJECTS && started[i])
            pthread_join(tid[i], NULL);
        r->ci.hit &= parts[i].ci.hit;
    }
    r->ci.seconds = disc_rt_now() - t0;
    r->srcbytes = r->src.n;
}

bool gpu_run_compile(GpuRun *r, int count, const char *const *arch, const bool *cubin, char **img, size_t *n,
                     Diag *d)
{
    for (int i = 0; i < count; i++)
        img[i] = NULL, n[i] = 0;
    if (r->src.failed)
        return diag_oom(d);
    Part *parts = calloc((size_t)count + 1, sizeof *parts);
    if (!parts)
        return diag_oom(d);
    for (int i = 0; i < count; i++)
        parts[i] = (Part){.r = r, .whole = true, .arch = arch[i], .cubin = cubin[i]};
    compile_all(r, parts, count);
    bool ok = true;
    for (int i = 0; i < count; i++) {
        if (ok && !parts[i].ok)
            ok = diag_copy(d, &parts[i].d);
        img[i] = parts[i].img, n[i] = parts[i].n;
    }
    for (int i = 0; !ok && i < count; i++) {
        free(img[i]);
        img[i] = NULL, n[i] = 0;
    }
    free(parts);
    return ok;
}

/* Every kernel compiled for the open device, in up to one part per CPU,
 * each loaded as a module; r->fns[i] from its part's module. */
static bool compile_parts(GpuRun *r, Diag *d)
{
    int np = cg_cpus();
    np = np < 1 ? 1 : np > CG_MAX_OBJECTS ? CG_MAX_OBJECTS : np;
    np = np > r->n ? r->n : np;
    Part *parts = calloc((size_t)np, sizeof *parts);
    if (!parts || !(r->mods = calloc((size_t)np, sizeof *r->mods)) ||
        !(r->fns = calloc((size_t)r->n, sizeof *r->fns))) {
        free(parts);
        return diag_oom(d);
    }
    for (int i = 0; i < np; i++)
        parts[i] = (Part){.r = r, .lo = (int)((int64_t)r->n * i / np), .hi = (int)((int64_t)r->n * (i + 1) / np),
                          .arch = r->arch, .cubin = true};
    compile_all(r, parts, np);
    bool ok = true;
    for (int i = 0; i < np; i++) {
        Part *p = &parts[i];
        if (ok && !p->ok)
            ok = diag_copy(d, &p->d);
        if (ok && !(r->mods[r->nmods] = disc_gpu_module_load(r->rt, r->gpu, p->img)))
            ok = diag_setk(d, DIAG_RESOURCE, "error: backend cuda: %s", rt_msg(r->rt));
        if (ok)
            r->nmods++;
        for (int k = p->lo; ok && k < p->hi; k++)
            if (!(r->fns[k] = disc_gpu_function(r->rt, r->gpu, r->mods[r->nmods - 1], r->k[k].name)))
                ok = diag_setk(d, DIAG_RESOURCE, "error: backend cuda: %s", rt_msg(r->rt));
        free(p->img);
        gpu_str_free(&p->src);
    }
    if (r->ci.seconds > 0 && r->ci.hit)
        r->ci.seconds = 0;
    free(parts);
    return ok;
}

int gpu_run_kernels(const GpuRun *r, const char **names, int max)
{
    for (int i = 0; i < r->n && i < max; i++)
        names[i] = r->k[i].name;
    return r->n;
}

int gpu_run_consts(const GpuRun *r) { return r->nconsts; }
void *const *gpu_run_functions(const GpuRun *r) { return (void *const *)r->fns; }
bool gpu_run_emu(const GpuRun *r) { return r->emu; }

bool gpu_run_link(GpuRun *r, GpuRunSyms *s, Diag *d)
{
    memset(s, 0, sizeof *s);
    if (r->src.failed)
        return diag_oom(d);
    if (r->n > 0 && !compile_parts(r, d))
        return false;
    if (!(r->dconst = calloc((size_t)r->nconsts + 1, sizeof *r->dconst)))
        return diag_oom(d);
    s->fns = (void *)r->fns;
    s->consts = (void *)r->dconst;
    return true;
}

void gpu_run_stats(const GpuRun *r, GpuRunStats *st)
{
    *st = (GpuRunStats){.nkernels = r->n, .bytes = r->srcbytes, .seconds = r->ci.seconds, .hit = r->ci.hit,
                        .nconsts = r->nconsts, .emu = r->emu};
    snprintf(st->arch, sizeof st->arch, "%s", r->arch);
    snprintf(st->gemm, sizeof st->gemm, "%s", r->gemm);
    snprintf(st->conv, sizeof st->conv, "%s", r->conv);
    if (r->gpu)
        snprintf(st->device, sizeof st->device, "%s", disc_gpu_info(r->gpu)->name);
}

void gpu_run_free(GpuRun *r)
{
    if (!r)
        return;
    for (int i = 0; i < r->n; i++) {
        gpu_kernel_free(&r->k[i]);
        if (r->fns)
            disc_gpu_function_free(r->fns[i]);
    }
    if (r->gpu) { /* the constants' copies go with the device */
        for (int i = 0; i < r->nmods; i++)
            disc_gpu_module_unload(r->gpu, r->mods[i]);
        disc_gpu_close(r->gpu);
    }
    free(r->k);
    free(r->off);
    free(r->mods);
    free(r->fn);
    free(r->fns);
    free(r->dconst);
    free(r->consts);
    gpu_str_free(&r->src);
    disc_rt_free(r->rt);
    free(r);
}
