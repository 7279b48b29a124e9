/*
 * llvm.c — the LLVM side of one compile: context, module, types, dims as
 * LLVM values, loops, loads and stores in every dtype, math calls.
 *
 * Dims are computed once per function: cg_dim emits them into the entry
 * block (through a second builder that always sits at its end), memoised
 * by Dim pointer. Since equal dims are equal pointers, a kernel that needs
 * B*S*768 in ten places computes it once.
 */
#include "codegen/codegen.h"

#include <dlfcn.h>
#include <llvm-c/DebugInfo.h> /* LLVMTemporaryMDNode */
#include <llvm-c/Support.h>
#include <llvm-c/Target.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t llvm_once = PTHREAD_ONCE_INIT;
static bool libmvec;

static void llvm_init(void)
{
    LLVMInitializeNativeTarget();
    LLVMInitializeNativeAsmPrinter();
    /* glibc's vector math (libmvec) for exp, log, sin, cos, pow in
     * vectorised loops (_ZGVdN8v_expf and friends), when it can be loaded
     * into the process for the JIT to find */
    if (dlopen("libmvec.so.1", RTLD_NOW | RTLD_GLOBAL)) {
        libmvec = true;
        const char *argv[] = {"disc", "-vector-library=LIBMVEC-X86"};
        LLVMParseCommandLineOptions(2, argv, NULL);
    }
}

void cg_llvm_init(void) { pthread_once(&llvm_once, llvm_init); }

bool cg_llvm_libmvec(void)
{
    cg_llvm_init();
    return libmvec;
}

bool cg_rowvec(void)
{
    const char *e = getenv("DISC_ROWVEC");
    return !(e && !strcmp(e, "0"));
}

bool cg_emit_object(LLVMModuleRef mod, const CpuTarget *t, LLVMCodeGenOptLevel level, const char *path,
                    LLVMMemoryBufferRef *out, char *msg, size_t size)
{
    char *triple = LLVMGetDefaultTargetTriple();
    LLVMTargetRef target;
    char *err = NULL;
    bool ok = LLVMGetTargetFromTriple(triple, &target, &err) == 0;
    if (!ok)
        snprintf(msg, size, "error: no LLVM target for %s: %s", triple, err ? err : "?");
    LLVMDisposeMessage(err);
    err = NULL;
    if (ok) {
        char *hcpu = t ? NULL : LLVMGetHostCPUName(), *hfeat = t ? NULL : LLVMGetHostCPUFeatures();
        /* The JIT's objects (path NULL) take the large code model: every
         * reference from code to another section or to a symbol outside
         * is a 64-bit address. LLJIT's linker (RuntimeDyld, LLVM 14) maps
         * an object's code, its constants and the GOT of its calls with
         * separate mmaps, placed by the kernel wherever each fits; in a
         * process whose address space is crowded (PyTorch's CUDA
         * libraries loaded: several GB) a small section landed in a gap
         * 3 GB above the code, and the small model's 32-bit offsets to it
         * wrapped: the model crashed at its first run. Files for the
         * system linker keep the small model, position independent. */
        bool jit = !path;
        LLVMTargetMachineRef tm =
            LLVMCreateTargetMachine(target, triple, t ? t->name : hcpu, t ? t->features : hfeat ? hfeat : "", level,
                                    jit ? LLVMRelocStatic : LLVMRelocPIC,
                                    jit ? LLVMCodeModelLarge : LLVMCodeModelDefault);
        LLVMDisposeMessage(hcpu);
        LLVMDisposeMessage(hfeat);
        LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
        char *layout = LLVMCopyStringRepOfTargetData(td);
        LLVMSetTarget(mod, triple);
        LLVMSetDataLayout(mod, layout);
        LLVMDisposeMessage(layout);
        LLVMDisposeTargetData(td);
        if (path ? LLVMTargetMachineEmitToFile(tm, mod, (char *)path, LLVMObjectFile, &err)
                 : LLVMTargetMachineEmitToMemoryBuffer(tm, mod, LLVMObjectFile, &err, out)) {
            if (path)
                snprintf(msg, size, "error: cannot write %s: %s", path, err ? err : "?");
            else
                snprintf(msg, size, "error: internal: LLVM cannot compile the model: %s", err ? err : "?");
            ok = false;
        }
        LLVMDisposeTargetMachine(tm);
    }
    LLVMDisposeMessage(err);
    LLVMDisposeMessage(triple);
    return ok;
}

bool cg_init(Cg *cg, LLVMContextRef ctx, Graph *g, ShapeInfo *si, FusionPlan *plan, Diag *d)
{
    memset(cg, 0, sizeof *cg);
    cg->g = g;
    cg->si = si;
    cg->plan = plan;
    cg->d = d;
    cg->ctx = ctx;
    cg->mod = LLVMModuleCreateWithNameInContext("disc", cg->ctx);
    cg->b = LLVMCreateBuilderInContext(cg->ctx);
    cg->eb = LLVMCreateBuilderInContext(cg->ctx);
    LLVMContextRef c = cg->ctx;
    cg->t_void = LLVMVoidTypeInContext(c);
    cg->t_i1 = LLVMInt1TypeInContext(c);
    cg->t_i8 = LLVMInt8TypeInContext(c);
    cg->t_i16 = LLVMInt16TypeInContext(c);
    cg->t_i32 = LLVMInt32TypeInContext(c);
    cg->t_i64 = LLVMInt64TypeInContext(c);
    cg->t_f32 = LLVMFloatTypeInContext(c);
    cg->t_f64 = LLVMDoubleTypeInContext(c);
    cg->t_p8 = LLVMPointerType(cg->t_i8, 0);
    cg->t_p64 = LLVMPointerType(cg->t_i64, 0);
    cg->t_pp8 = LLVMPointerType(cg->t_p8, 0);
    LLVMTypeRef kargs[3] = {cg->t_i64, cg->t_i64, cg->t_p8};
    cg->t_kernel = LLVMFunctionType(cg->t_void, kargs, 3, false);
    dimmap_init(&cg->dimcache);
    return true;
}

void cg_free(Cg *cg)
{
    if (cg->b)
        LLVMDisposeBuilder(cg->b);
    if (cg->eb)
        LLVMDisposeBuilder(cg->eb);
    dimmap_free(&cg->dimcache);
    for (int i = 0; cg->ksig && i < cg->nkernels; i++)
        free(cg->ksig[i]);
    free(cg->ksig);
    free(cg->kinfo);
    cg_kshare_free(cg);
    cg_ksyms_free(&cg->ks);
    cg_open_consts_free(cg);
    cg->ksig = NULL;
    cg->kinfo = NULL;
    /* the module and context are handed to the JIT, or disposed there */
    cg->b = cg->eb = NULL;
}

void cg_begin_function(Cg *cg, LLVMValueRef fn, LLVMValueRef syms)
{
    cg->fn = fn;
    cg->entry = LLVMAppendBasicBlockInContext(cg->ctx, fn, "entry");
    LLVMPositionBuilderAtEnd(cg->eb, cg->entry);
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(cg->ctx, fn, "body");
    LLVMPositionBuilderAtEnd(cg->b, body);
    cg->syms = syms;
    dimmap_free(&cg->dimcache);
    dimmap_init(&cg->dimcache);
}

void cg_end_function(Cg *cg, LLVMBasicBlockRef body)
{
    LLVMBuildBr(cg->eb, body);
}

void cg_fn_save(Cg *cg, CgFnState *s)
{
    *s = (CgFnState){.here = LLVMGetInsertBlock(cg->b), .entry = cg->entry, .fn = cg->fn, .syms = cg->syms,
                     .dimcache = cg->dimcache, .no_hoist = cg->no_hoist, .memo = cg->memo, .ovf = cg->ovf};
    cg->no_hoist = false;
    cg->memo = false;
    cg->ovf = NULL;
    dimmap_init(&cg->dimcache);
}

void cg_fn_restore(Cg *cg, CgFnState *s)
{
    dimmap_free(&cg->dimcache);
    cg->dimcache = s->dimcache;
    cg->no_hoist = s->no_hoist;
    cg->memo = s->memo;
    cg->ovf = s->ovf;
    cg->fn = s->fn;
    cg->syms = s->syms;
    cg->entry = s->entry;
    LLVMPositionBuilderAtEnd(cg->eb, cg->entry);
    LLVMPositionBuilderAtEnd(cg->b, s->here);
}

LLVMValueRef cg_i64(Cg *cg, int64_t v) { return LLVMConstInt(cg->t_i64, (unsigned long long)v, true); }
LLVMValueRef cg_i32(Cg *cg, int32_t v) { return LLVMConstInt(cg->t_i32, (unsigned long long)(int64_t)v, true); }

/* floor(x / y) for i64, any signs; y != 0 is the caller's business (dims
 * checked by the host program). */
static LLVMValueRef floordiv_b(Cg *cg, LLVMBuilderRef b, LLVMValueRef x, LLVMValueRef y)
{
    if (LLVMIsConstant(y) && LLVMConstIntGetSExtValue(y) > 0 && LLVMIsConstant(x) == 0) {
        /* positive constant divisor: q = (x >= 0 ? x : x - (y - 1)) / y */
        LLVMValueRef neg = LLVMBuildICmp(b, LLVMIntSLT, x, cg_i64(cg, 0), "");
        LLVMValueRef adj = LLVMBuildSub(b, x, LLVMBuildSub(b, y, cg_i64(cg, 1), ""), "");
        return LLVMBuildSDiv(b, LLVMBuildSelect(b, neg, adj, x, ""), y, "");
    }
    LLVMValueRef q = LLVMBuildSDiv(b, x, y, "");
    LLVMValueRef r = LLVMBuildSRem(b, x, y, "");
    LLVMValueRef rnz = LLVMBuildICmp(b, LLVMIntNE, r, cg_i64(cg, 0), "");
    LLVMValueRef sx = LLVMBuildICmp(b, LLVMIntSLT, r, cg_i64(cg, 0), "");
    LLVMValueRef sy = LLVMBuildICmp(b, LLVMIntSLT, y, cg_i64(cg, 0), "");
    LLVMValueRef fix = LLVMBuildAnd(b, rnz, LLVMBuildXor(b, sx, sy, ""), "");
    return LLVMBuildSub(b, q, LLVMBuildZExt(b, fix, cg->t_i64, ""), "");
}

LLVMValueRef cg_floordiv(Cg *cg, LLVMBuilderRef b, LLVMValueRef x, LLVMValueRef y)
{
    return floordiv_b(cg, b, x, y);
}

LLVMValueRef cg_checked(Cg *cg, LLVMBuilderRef b, bool mul, LLVMValueRef x, LLVMValueRef y)
{
    if (LLVMIsAConstantInt(y) && LLVMConstIntGetSExtValue(y) == (mul ? 1 : 0))
        return x; /* a byte count of 1-byte elements, say */
    if (!cg->ovf || b != cg->b || (LLVMIsConstant(x) && LLVMIsConstant(y)))
        return mul ? LLVMBuildMul(b, x, y, "") : LLVMBuildAdd(b, x, y, "");
    const char *name = mul ? "llvm.smul.with.overflow.i64" : "llvm.sadd.with.overflow.i64";
    LLVMTypeRef fields[2] = {cg->t_i64, cg->t_i1};
    LLVMTypeRef rt = LLVMStructTypeInContext(cg->ctx, fields, 2, false);
    LLVMTypeRef params[2] = {cg->t_i64, cg->t_i64};
    LLVMTypeRef fty = LLVMFunctionType(rt, params, 2, false);
    LLVMValueRef f = LLVMGetNamedFunction(cg->mod, name);
    if (!f)
        f = LLVMAddFunction(cg->mod, name, fty);
    LLVMValueRef args[2] = {x, y};
    LLVMValueRef r = LLVMBuildCall2(b, fty, f, args, 2, "");
    LLVMBasicBlockRef ok = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "fits");
    LLVMBuildCondBr(b, LLVMBuildExtractValue(b, r, 1, ""), cg->ovf, ok);
    LLVMPositionBuilderAtEnd(b, ok);
    return LLVMBuildExtractValue(b, r, 0, "");
}

/* Element at of the function's symbol array (a kernel's slots, or the
 * host's symbols by id). */
static LLVMValueRef slot_load(Cg *cg, int at, const char *name)
{
    LLVMBuilderRef b = cg->no_hoist ? cg->b : cg->eb;
    LLVMValueRef idx = cg_i64(cg, at);
    LLVMValueRef p = LLVMBuildGEP2(b, cg->t_i64, cg->syms, &idx, 1, "");
    return LLVMBuildLoad2(b, cg->t_i64, p, name);
}

static LLVMValueRef dim_rec(Cg *cg, Dim *d)
{
    LLVMBuilderRef b = cg->no_hoist ? cg->b : cg->eb;
    switch (d->kind) {
    case DIM_CONST:
        return cg_i64(cg, d->c);
    case DIM_SYM: {
        int at = cg->kslot ? cg_ksym_slot(cg->kslot, d) : d->id;
        if (at < 0) {
            graph_oom(cg->g);
            at = 0;
        }
        return slot_load(cg, at, d->name);
    }
    case DIM_ADD:
    case DIM_MUL: {
        /* in the host flow, checked: a product of input dims may pass
         * 2^63 (cg->ovf) */
        bool mul = d->kind == DIM_MUL;
        LLVMValueRef r = cg_dim(cg, d->args[0]);
        for (int i = 1; i < d->n; i++)
            r = cg_checked(cg, b, mul, r, cg_dim(cg, d->args[i]));
        if (!mul && d->c)
            r = cg_checked(cg, b, false, r, cg_i64(cg, d->c));
        if (mul && d->c != 1)
            r = cg_checked(cg, b, true, r, cg_i64(cg, d->c));
        return r;
    }
    default:
        break;
    }
    LLVMValueRef x = cg_dim(cg, d->args[0]), y = cg_dim(cg, d->args[1]);
    switch (d->kind) {
    case DIM_FLOORDIV:
        return floordiv_b(cg, b, x, y);
    case DIM_CEILDIV: /* -floor(-x / y) */
        return LLVMBuildNeg(b, floordiv_b(cg, b, LLVMBuildNeg(b, x, ""), y), "");
    case DIM_MOD:
        return LLVMBuildSub(b, x, LLVMBuildMul(b, y, floordiv_b(cg, b, x, y), ""), "");
    case DIM_MIN:
        return LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, x, y, ""), x, y, "");
    case DIM_MAX:
        return LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, x, y, ""), x, y, "");
    default:
        return cg_i64(cg, 0);
    }
}

void cg_dim_forget(Cg *cg)
{
    dimmap_free(&cg->dimcache);
    dimmap_init(&cg->dimcache);
}

void cg_dim_mark(Cg *cg, DimMap *mark) { dimmap_copy(mark, &cg->dimcache); /* empty if out of memory */ }

void cg_dim_back(Cg *cg, const DimMap *mark)
{
    dimmap_free(&cg->dimcache);
    dimmap_copy(&cg->dimcache, mark);
}

void cg_dim_forget_syms(Cg *cg, Dim *const *syms, int n)
{
    if (!n)
        return;
    DimMap keep;
    dimmap_init(&keep);
    const DimMap *m = &cg->dimcache;
    for (int i = 0; i < m->cap; i++) {
        bool stale = false;
        for (int j = 0; m->key[i] && j < n && !stale; j++)
            stale = dim_mentions(m->key[i], syms[j]);
        if (m->key[i] && !stale)
            dimmap_put(&keep, m->key[i], m->val[i]);
    }
    dimmap_free(&cg->dimcache);
    cg->dimcache = keep;
}

LLVMValueRef cg_dim(Cg *cg, Dim *d)
{
    if (!d) { /* a dim op that failed: out of memory, or an overflow */
        if (!diag_arena_failed(cg->d, &cg->g->arena))
            diag_setk(cg->d, DIAG_INTERNAL, "codegen: internal: a dim that overflows");
        return cg_i64(cg, 0);
    }
    if (d->kind == DIM_CONST)
        return cg_i64(cg, d->c);
    if (cg->no_hoist && !cg->memo)
        return dim_rec(cg, d);
    Dim *hit = dimmap_get(&cg->dimcache, d);
    if (hit)
        return (LLVMValueRef)hit;
    int at = cg->kslot && d->kind != DIM_SYM ? cg_ksym_find(cg->kslot, d) : -1;
    LLVMValueRef v = at >= 0 ? slot_load(cg, at, "") : dim_rec(cg, d);
    dimmap_put(&cg->dimcache, d, (Dim *)v); /* a cache: out of memory costs a recomputation */
    return v;
}

static LLVMValueRef call(Cg *cg, const char *name, LLVMTypeRef ret, LLVMTypeRef *params, int np,
                         LLVMValueRef *args)
{
    LLVMValueRef f = LLVMGetNamedFunction(cg->mod, name);
    LLVMTypeRef ft = LLVMFunctionType(ret, params, (unsigned)np, false);
    if (!f)
        f = LLVMAddFunction(cg->mod, name, ft);
    return LLVMBuildCall2(cg->b, ft, f, args, (unsigned)np, "");
}

/* Whether an f64 call of name must stay scalar: LLVM 14 maps libmvec's
 * functions without looking at the target, so a loop mixing f32 and f64
 * vectorised 4 wide for SSE calls the AVX2 variant (_ZGVdN4v_log), whose
 * upper half then is garbage. For a target without 256-bit vectors, such
 * a call is made to libm as a non-builtin, which the vectoriser leaves
 * alone (the loop stays scalar). */
static bool scalar_f64_libmvec(Cg *cg, const char *name, LLVMTypeRef t)
{
    static const char *mapped[] = {"exp", "log", "sin", "cos", "pow"};
    if (t != cg->t_f64 || !libmvec || !cg->cpu || cg->cpu->vbits >= 256)
        return false;
    for (size_t i = 0; i < sizeof mapped / sizeof mapped[0]; i++)
        if (!strcmp(name, mapped[i]))
            return true;
    return false;
}

static LLVMValueRef call_nobuiltin(Cg *cg, const char *name, LLVMTypeRef t, LLVMValueRef *args, int n)
{
    LLVMTypeRef params[3] = {t, t, t};
    LLVMValueRef c = call(cg, name, t, params, n, args);
    unsigned kind = LLVMGetEnumAttributeKindForName("nobuiltin", 9);
    LLVMAddCallSiteAttribute(c, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(LLVMGetTypeContext(t), kind, 0));
    return c;
}

LLVMValueRef cg_call_intrinsic(Cg *cg, const char *name, LLVMTypeRef t, LLVMValueRef *args, int n)
{
    if (scalar_f64_libmvec(cg, name, t))
        return call_nobuiltin(cg, name, t, args, n);
    char full[64];
    if (LLVMGetTypeKind(t) == LLVMVectorTypeKind) /* elem.c's vectors: llvm.fabs.v8f32 */
        snprintf(full, sizeof full, "llvm.%s.v%u%s", name, LLVMGetVectorSize(t),
                 LLVMGetElementType(t) == cg->t_f64 ? "f64" : "f32");
    else
        snprintf(full, sizeof full, "llvm.%s.%s", name, t == cg->t_f64 ? "f64" : "f32");
    LLVMTypeRef params[3] = {t, t, t};
    return call(cg, full, t, params, n, args);
}

LLVMValueRef cg_call_libm(Cg *cg, const char *name, LLVMTypeRef t, LLVMValueRef *args, int n)
{
    if (scalar_f64_libmvec(cg, name, t))
        return call_nobuiltin(cg, name, t, args, n);
    char full[64];
    snprintf(full, sizeof full, "%s%s", name, t == cg->t_f64 ? "" : "f");
    LLVMTypeRef params[3] = {t, t, t};
    return call(cg, full, t, params, n, args);
}

LLVMTypeRef cg_compute_type(Cg *cg, DType dt)
{
    switch (dt) {
    case DT_F32:
    case DT_F16:
    case DT_BF16: return cg->t_f32;
    case DT_F64: return cg->t_f64;
    case DT_I8:
    case DT_U8: return cg->t_i8;
    case DT_I16:
    case DT_U16: return cg->t_i16;
    case DT_I32:
    case DT_U32: return cg->t_i32;
    case DT_I64:
    case DT_U64: return cg->t_i64;
    case DT_BOOL: return cg->t_i1;
    default: return cg->t_i8;
    }
}

LLVMTypeRef cg_storage_type(Cg *cg, DType dt)
{
    switch (dt) {
    case DT_F16:
    case DT_BF16: return cg->t_i16;
    case DT_BOOL: return cg->t_i8;
    default: return cg_compute_type(cg, dt);
    }
}

/* bf16 <-> f32 through the bits: widening is exact, narrowing rounds to
 * nearest even (NaN stays NaN). */
static LLVMValueRef bf16_to_f32(Cg *cg, LLVMValueRef h)
{
    LLVMValueRef w = LLVMBuildShl(cg->b, LLVMBuildZExt(cg->b, h, cg->t_i32, ""), cg_i32(cg, 16), "");
    return LLVMBuildBitCast(cg->b, w, cg->t_f32, "");
}

static LLVMValueRef f32_to_bf16(Cg *cg, LLVMValueRef f)
{
    LLVMBuilderRef b = cg->b;
    LLVMValueRef u = LLVMBuildBitCast(b, f, cg->t_i32, "");
    LLVMValueRef lsb = LLVMBuildAnd(b, LLVMBuildLShr(b, u, cg_i32(cg, 16), ""), cg_i32(cg, 1), "");
    LLVMValueRef r = LLVMBuildAdd(b, u, LLVMBuildAdd(b, lsb, cg_i32(cg, 0x7fff), ""), "");
    LLVMValueRef rounded = LLVMBuildTrunc(b, LLVMBuildLShr(b, r, cg_i32(cg, 16), ""), cg->t_i16, "");
    LLVMValueRef nan = LLVMBuildFCmp(b, LLVMRealUNO, f, f, "");
    LLVMValueRef qnan = LLVMBuildOr(b, LLVMBuildTrunc(b, LLVMBuildLShr(b, u, cg_i32(cg, 16), ""), cg->t_i16, ""),
                                    LLVMConstInt(cg->t_i16, 0x40, false), "");
    return LLVMBuildSelect(b, nan, qnan, rounded, "");
}

LLVMValueRef cg_load(Cg *cg, DType dt, LLVMValueRef ptr)
{
    LLVMValueRef v = LLVMBuildLoad2(cg->b, cg_storage_type(cg, dt), ptr, "");
    switch (dt) {
    case DT_F16:
        return LLVMBuildFPExt(cg->b, LLVMBuildBitCast(cg->b, v, LLVMHalfTypeInContext(cg->ctx), ""), cg->t_f32, "");
    case DT_BF16:
        return bf16_to_f32(cg, v);
    case DT_BOOL:
        return LLVMBuildICmp(cg->b, LLVMIntNE, v, LLVMConstInt(cg->t_i8, 0, false), "");
    default:
        return v;
    }
}

void cg_store(Cg *cg, DType dt, LLVMValueRef v, LLVMValueRef ptr)
{
    switch (dt) {
    case DT_F16:
        v = LLVMBuildBitCast(cg->b, LLVMBuildFPTrunc(cg->b, v, LLVMHalfTypeInContext(cg->ctx), ""), cg->t_i16, "");
        break;
    case DT_BF16:
        v = f32_to_bf16(cg, v);
        break;
    case DT_BOOL:
        v = LLVMBuildZExt(cg->b, v, cg->t_i8, "");
        break;
    default:
        break;
    }
    LLVMBuildStore(cg->b, v, ptr);
}

LLVMValueRef cg_loop_begin(Cg *cg, CgLoop *l, LLVMValueRef start, LLVMValueRef end, const char *name)
{
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(cg->b);
    l->hints = 0;
    l->head = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, name);
    l->body = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "body");
    l->exit = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "exit");
    LLVMBuildBr(cg->b, l->head);
    LLVMPositionBuilderAtEnd(cg->b, l->head);
    l->iv = LLVMBuildPhi(cg->b, cg->t_i64, name);
    LLVMAddIncoming(l->iv, &start, &pre, 1);
    LLVMValueRef more = LLVMBuildICmp(cg->b, LLVMIntSLT, l->iv, end, "");
    LLVMBuildCondBr(cg->b, more, l->body, l->exit);
    LLVMPositionBuilderAtEnd(cg->b, l->body);
    return l->iv;
}

void cg_loop_end(Cg *cg, CgLoop *l)
{
    LLVMValueRef next = LLVMBuildAdd(cg->b, l->iv, cg_i64(cg, 1), "");
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(cg->b);
    l->latch = LLVMBuildBr(cg->b, l->head);
    LLVMAddIncoming(l->iv, &next, &latch, 1);
    LLVMPositionBuilderAtEnd(cg->b, l->exit);
    int h = l->hints & CG_UNROLL ? l->hints & ~CG_NO_UNROLL : l->hints | CG_NO_UNROLL;
    if (h & (CG_NO_UNROLL | CG_NO_VECTORIZE | CG_NO_INTERLEAVE))
        cg_loop_hint(cg, l->latch, h);
}

void cg_loop_hint(Cg *cg, LLVMValueRef latch, int hints)
{
    LLVMContextRef c = cg->ctx;
    LLVMMetadataRef ops[4];
    int n = 0;
    ops[n++] = LLVMTemporaryMDNode(c, NULL, 0); /* a loop ID refers to itself */
    if (hints & CG_NO_UNROLL) {
        static const char un[] = "llvm.loop.unroll.disable";
        LLVMMetadataRef u = LLVMMDStringInContext2(c, un, sizeof un - 1);
        ops[n++] = LLVMMDNodeInContext2(c, &u, 1);
    }
    if (hints & (CG_NO_VECTORIZE | CG_NO_INTERLEAVE)) {
        static const char ve[] = "llvm.loop.vectorize.enable", il[] = "llvm.loop.interleave.count";
        bool vec = hints & CG_NO_VECTORIZE;
        LLVMMetadataRef kv[2] = {
            vec ? LLVMMDStringInContext2(c, ve, sizeof ve - 1) : LLVMMDStringInContext2(c, il, sizeof il - 1),
            LLVMValueAsMetadata(vec ? LLVMConstInt(LLVMInt1TypeInContext(c), 0, 0)
                                    : LLVMConstInt(LLVMInt32TypeInContext(c), 1, 0))};
        ops[n++] = LLVMMDNodeInContext2(c, kv, 2);
    }
    LLVMMetadataRef loop = LLVMMDNodeInContext2(c, ops, (size_t)n);
    LLVMMetadataReplaceAllUsesWith(ops[0], loop);
    LLVMSetMetadata(latch, LLVMGetMDKindIDInContext(c, "llvm.loop", 9), LLVMMetadataAsValue(c, loop));
}
