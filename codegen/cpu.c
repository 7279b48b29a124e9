/*
 * cpu.c — the CPU a compile is for: its LLVM name and features, and the
 * vector shape the kernel templates size themselves for.
 *
 * One name picks it: CgOpts.cpu (dcc --cpu, disc_options.cpu), else the
 * environment's DISC_CPU (read here and nowhere else: the test suite runs
 * whole labels capped to another ISA through it), else this machine
 * ("native": LLVM's host CPU name and its feature string, so every
 * extension the CPU has is used).
 *
 * What the templates need is the widest float vector and the number of
 * vector registers: 16 floats in 32 registers on AVX-512, 8 in 16 on AVX2
 * and AVX, 4 in 16 on SSE. For the host the feature string says it. For a
 * named CPU (x86-64, x86-64-v3, skylake-avx512, znver3, ...) LLVM's C API
 * has no query, so it is asked the way a user would: a function adding
 * two <16 x float> vectors is compiled for that CPU to assembly, and the
 * registers it names (zmm, ymm or xmm) give the width. The probe runs in a
 * child process, as LLVM prints a warning (and may misbehave later) for a
 * CPU name it does not know, which is how an unknown name is told apart.
 *
 * Also the hooks both CPU targets (cpu-jit, cpu-aot) share: a kernel runs
 * on the runtime's thread pool, and the skinny matmul kernels.
 */
#include "codegen/host.h"
#include "runtime/rt.h"

#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The vector width the loop vectoriser should prefer for CPU name. LLVM
 * tunes every Intel CPU with AVX-512 to prefer 256-bit vectors (a guard
 * against the frequency drop that 512-bit arithmetic caused on Skylake's
 * server cores), so the loop kernels ran 8 floats a vector where 16 fit.
 * On later cores the drop is small, and the kernels that do arithmetic
 * enough to notice (a QDQ model's quantize-dequantize chains, swish,
 * hard-swish) ran 15-40% faster at 512 bits (bench/NOTES.md); memory-bound
 * ones the same. So 512 bits except on the Skylake server family and the
 * generic x86-64-v4, which may be one; 0 there (LLVM's choice). */
static int prefer_width(const char *name, int vbits)
{
    static const char *const skylake_family[] = {"skylake-avx512", "skx", "cascadelake", "cooperlake",
                                                 "x86-64-v4"};
    if (vbits < 512)
        return 0;
    for (size_t i = 0; i < sizeof skylake_family / sizeof *skylake_family; i++)
        if (!strcmp(name, skylake_family[i]))
            return 0;
    return 512;
}

/* Fills the vector shape from vbits (t->name set). */
static void set_shape(CpuTarget *t, int vbits, bool avx512)
{
    t->vbits = vbits;
    t->nvregs = avx512 ? 32 : 16;
    t->prefer_bits = prefer_width(t->name, vbits);
    snprintf(t->isa, sizeof t->isa, "%s", avx512 ? "avx512f" : vbits == 256 ? "avx2" : "sse2");
}

static bool has_feature(const char *features, const char *f)
{
    size_t n = strlen(f);
    for (const char *p = features; (p = strstr(p, f)); p += n)
        if ((p == features || p[-1] == ',') && (p[n] == ',' || p[n] == 0))
            return true;
    return false;
}

/* The assembly of `<16 x float> f(<16 x float>, <16 x float>) = a + b`
 * for cpu, in a malloc'd string; NULL on failure. */
static char *probe_asm(LLVMTargetRef target, const char *triple, const char *cpu)
{
    LLVMTargetMachineRef tm = LLVMCreateTargetMachine(target, triple, cpu, "", LLVMCodeGenLevelDefault,
                                                      LLVMRelocPIC, LLVMCodeModelDefault);
    if (!tm)
        return NULL;
    LLVMContextRef ctx = LLVMContextCreate();
    LLVMModuleRef mod = LLVMModuleCreateWithNameInContext("probe", ctx);
    LLVMTypeRef vt = LLVMVectorType(LLVMFloatTypeInContext(ctx), 16);
    LLVMTypeRef pv = LLVMPointerType(vt, 0);
    LLVMTypeRef args[3] = {pv, pv, pv};
    LLVMValueRef fn = LLVMAddFunction(mod, "f", LLVMFunctionType(LLVMVoidTypeInContext(ctx), args, 3, false));
    /* as clang marks a function that uses 512-bit vectors: without it,
     * CPUs tuned to prefer 256 bits (skylake-avx512) split them */
    LLVMAddTargetDependentFunctionAttr(fn, "min-legal-vector-width", "512");
    LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
    LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(ctx, fn, ""));
    LLVMValueRef x = LLVMBuildLoad2(b, vt, LLVMGetParam(fn, 0), "");
    LLVMValueRef y = LLVMBuildLoad2(b, vt, LLVMGetParam(fn, 1), "");
    LLVMBuildStore(b, LLVMBuildFAdd(b, x, y, ""), LLVMGetParam(fn, 2));
    LLVMBuildRetVoid(b);
    LLVMDisposeBuilder(b);
    LLVMSetTarget(mod, triple);
    char *err = NULL, *text = NULL;
    LLVMMemoryBufferRef buf = NULL;
    if (!LLVMTargetMachineEmitToMemoryBuffer(tm, mod, LLVMAssemblyFile, &err, &buf)) {
        size_t n = LLVMGetBufferSize(buf);
        text = malloc(n + 1);
        if (text) {
            memcpy(text, LLVMGetBufferStart(buf), n);
            text[n] = 0;
        }
        LLVMDisposeMemoryBuffer(buf);
    }
    LLVMDisposeMessage(err);
    LLVMDisposeModule(mod);
    LLVMContextDispose(ctx);
    LLVMDisposeTargetMachine(tm);
    return text;
}

/* The vector width (bits) LLVM gives `cpu`, with *avx512; 0 when LLVM
 * does not know the name. */
static int probe(const char *cpu, bool *avx512)
{
    char *triple = LLVMGetDefaultTargetTriple(), *err = NULL;
    LLVMTargetRef target;
    bool ok = LLVMGetTargetFromTriple(triple, &target, &err) == 0;
    LLVMDisposeMessage(err);
    int fd[2];
    if (!ok || pipe(fd) != 0) {
        LLVMDisposeMessage(triple);
        return 0;
    }
    pid_t pid = fork();
    if (pid == 0) { /* the child: stderr into the pipe, the answer as the exit status */
        dup2(fd[1], 2);
        close(fd[0]);
        char *text = probe_asm(target, triple, cpu);
        if (!text)
            _exit(1);
        _exit(strstr(text, "zmm") ? 12 : strstr(text, "ymm") ? 11 : strstr(text, "xmm") ? 10 : 1);
    }
    close(fd[1]);
    char msg[256];
    ssize_t n = pid > 0 ? read(fd[0], msg, sizeof msg) : -1;
    close(fd[0]);
    LLVMDisposeMessage(triple);
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || n > 0)
        return 0;
    switch (WEXITSTATUS(st)) {
    case 12: *avx512 = true; return 512;
    case 11: *avx512 = false; return 256;
    case 10: *avx512 = false; return 128;
    default: return 0;
    }
}

/* probe, remembered per CPU name for the process: the probe forks, and a
 * child of a process with threads (the run pool, another compile's) may
 * find a lock another thread held at the fork and wait on it for ever (a
 * `dcc run` under ASan hung so in its allocator, compiling a second time
 * after a run). Remembered, a name is probed once, in practice at the
 * first compile, before any run starts threads. */
static int probe_once(const char *cpu, bool *avx512)
{
    enum { NSEEN = 16 };
    static struct {
        char name[64];
        int vbits;
        bool avx512;
    } seen[NSEEN];
    static int nseen;
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < nseen; i++)
        if (!strcmp(seen[i].name, cpu)) {
            *avx512 = seen[i].avx512;
            int v = seen[i].vbits;
            pthread_mutex_unlock(&mu);
            return v;
        }
    int vbits = probe(cpu, avx512);
    if (vbits && nseen < NSEEN && strlen(cpu) < sizeof seen[0].name) {
        snprintf(seen[nseen].name, sizeof seen[nseen].name, "%s", cpu);
        seen[nseen].vbits = vbits;
        seen[nseen].avx512 = *avx512;
        nseen++;
    }
    pthread_mutex_unlock(&mu);
    return vbits;
}

bool cpu_target_init(CpuTarget *t, const char *name, Diag *d)
{
    memset(t, 0, sizeof *t);
    cg_llvm_init();
    const char *from = "--cpu";
    if (!name || !*name) {
        name = disc_env()->cpu;
        from = "DISC_CPU=";
    }
    if (name && (!*name || !strcmp(name, "native")))
        name = NULL;
    if (!name) {
        char *hcpu = LLVMGetHostCPUName(), *hfeat = LLVMGetHostCPUFeatures();
        snprintf(t->name, sizeof t->name, "%s", hcpu);
        t->features = strdup(hfeat ? hfeat : "");
        LLVMDisposeMessage(hcpu);
        LLVMDisposeMessage(hfeat);
        if (!t->features)
            return diag_oom(d);
        bool avx512 = has_feature(t->features, "+avx512f");
        set_shape(t, avx512 ? 512 : has_feature(t->features, "+avx") ? 256 : 128, avx512);
        if (t->vbits == 256 && !has_feature(t->features, "+avx2"))
            snprintf(t->isa, sizeof t->isa, "avx");
        t->native = true;
        return true;
    }
    const char *sep = from[strlen(from) - 1] == '=' ? "" : " ";
    if (strlen(name) >= sizeof t->name)
        return diag_setk(d, DIAG_ARG, "error: %s%s%.40s...: not a CPU LLVM knows", from, sep, name);
    bool avx512 = false;
    int vbits = probe_once(name, &avx512);
    if (!vbits) {
        char *triple = LLVMGetDefaultTargetTriple();
        diag_setk(d, DIAG_ARG, "error: %s%s%s: not a CPU LLVM knows for %s (try x86-64, x86-64-v3, x86-64-v4, "
                               "skylake-avx512 or native)", from, sep, name, triple);
        LLVMDisposeMessage(triple);
        return false;
    }
    snprintf(t->name, sizeof t->name, "%s", name);
    t->features = strdup("");
    if (!t->features)
        return diag_oom(d);
    set_shape(t, vbits, avx512);
    return true;
}

bool cpu_target_runs_here(const CpuTarget *t, Diag *d)
{
    if (t->native)
        return true;
    char *hfeat = LLVMGetHostCPUFeatures();
    bool avx512 = hfeat && has_feature(hfeat, "+avx512f");
    int vbits = avx512 ? 512 : hfeat && has_feature(hfeat, "+avx2") ? 256 : 128;
    LLVMDisposeMessage(hfeat);
    if (t->vbits <= vbits)
        return true;
    return diag_setk(d, DIAG_ARG,
                     "error: CPU %s: code for it (%s) would not run on this machine, whose widest vectors are "
                     "%d bits; compile it ahead of time (dcc compile --cpu %s) to run elsewhere",
                     t->name, t->isa, vbits, t->name);
}

void cpu_target_free(CpuTarget *t)
{
    free(t->features);
    t->features = NULL;
}

void cpu_launch(Host *h, LLVMValueRef fn, LLVMValueRef args, LLVMValueRef range, LLVMValueRef grain)
{
    Cg *cg = h->cg;
    LLVMTypeRef fty, params[5] = {cg->t_p8, LLVMPointerType(cg->t_kernel, 0), cg->t_p8, cg->t_i64, cg->t_i64};
    LLVMValueRef f = host_fn_decl(cg, "disc_rt_parallel_for", cg->t_void, params, 5, &fty);
    LLVMValueRef a[5] = {h->rt, fn, args, range, grain};
    LLVMBuildCall2(cg->b, fty, f, a, 5, "");
}

LLVMValueRef cpu_skinny(Cg *cg, int post, bool bias, bool residual, int *panel)
{
    *panel = cg_skinny_panel(cg);
    return cg_skinny_kernel(cg, post, bias, residual);
}

int64_t cpu_skinny_rows(const Cg *cg) { return disc_rt_skinny_max_m(cg_skinny_panel(cg)); }

void cpu_target_hooks(CgTarget *t, const char *name)
{
    *t = (CgTarget){
        .name = name,
        .kernel = cg_kernel,
        .kernel_split = cg_kernel_split,
        .kernel_slots = true,
        .skinny = cpu_skinny,
        .skinny_rows = cpu_skinny_rows,
        .launch = cpu_launch,
        /* oneDNN 2.6's swish post-op cost a convolution as much as the
         * convolution (1x1, 16 -> 96 channels at 112 x 112, one thread:
         * 172 us without it, 456 with it); the loop kernel after the call,
         * with elem.c's exp, is cheaper: EfficientNet-B0 6-10% faster on
         * AVX-512, 3-5% capped to AVX2 (bench/NOTES.md). oneDNN's relu6
         * and hardswish stay post-ops (MobileNetV2 13%, V3 6% slower as
         * loop kernels), and so does its GELU (level either way). */
        .conv_no_posts = 1u << DISC_POST_SWISH,
        /* ResNet-50's expanding 1 x 1 convolutions (64 -> 256 ... 512 ->
         * 2048) with their shortcut added as oneDNN's binary post-op ran
         * on jit_1x1, without it on brgconv_1x1: the add as a loop kernel
         * after the call made the model 2-5% faster on AVX-512 (batch 1
         * to 4); MobileNetV2's narrow ones (24 to 160 channels) were 1-2%
         * faster with the residual fused, EfficientNet-B0 level
         * (bench/NOTES.md). On AVX2 oneDNN has no brgconv. */
        .conv_res_wide = 256,
    };
}
