/*
 * objects.c — the JIT's module optimised and compiled into object files,
 * in parts on threads.
 *
 * LLVM's optimiser and code generator take most of a compile, and they
 * work one function at a time: the kernels of a model are independent
 * functions (the host flow calls them through pointers it hands the
 * runtime), so the module is cut into parts, each optimised and compiled
 * on a thread of its own in an LLVM context of its own, and the parts'
 * objects are linked together by the JIT. Functions go to the parts by
 * size, largest first into the lightest part. A part is the module read
 * back from bitcode in which every function of another part is only
 * declared; every defined function is made external so the parts link
 * (nothing calls a kernel but through its address, so no inlining is
 * lost). Each kernel gets the same optimisation and code generation it
 * gets in one module, so its code does not depend on how many parts there
 * are. The cheap function (the host flow: no optimiser) has a part of its
 * own whenever the module is cut, compiled at code generation level none:
 * the default level's greedy register allocator took most of its time.
 *
 * An object is compiled the way LLJIT compiles a module: a target machine
 * for this machine's CPU and features at the default code generation
 * level, under the functions' own target-cpu and target-features
 * (cg_optimise sets them), in the large code model (64-bit addresses:
 * the runtime, the tables the JIT defines and the object's own sections
 * may lie anywhere; cg_emit_object says why).
 */
#define _GNU_SOURCE /* sched_getaffinity */
#include "codegen/codegen.h"
#include "runtime/rt.h"

#include <llvm-c/BitReader.h>
#include <llvm-c/BitWriter.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Below this many instructions one part: the bitcode's round trip costs
 * more than a second thread saves. */
enum { SPLIT_MIN = 4000 };


static bool emit_object(LLVMModuleRef mod, LLVMCodeGenOptLevel level, LLVMMemoryBufferRef *out, char *msg,
                        size_t size)
{
    return cg_emit_object(mod, NULL, level, NULL, out, msg, size);
}

static int64_t fn_size(LLVMValueRef f)
{
    int64_t n = 0;
    for (LLVMBasicBlockRef b = LLVMGetFirstBasicBlock(f); b; b = LLVMGetNextBasicBlock(b))
        for (LLVMValueRef i = LLVMGetFirstInstruction(b); i; i = LLVMGetNextInstruction(i))
            n++;
    return n;
}

int cg_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return 1;
    int n = CPU_COUNT(&set);
    return n > 0 ? n : 1;
}

typedef struct Part {
    const CgObjOpts *o;
    const char *bc;          /* the module's bitcode */
    size_t bclen;
    const int *part_of;      /* per function of the module, in order: its part (-1: a declaration) */
    int nfn;
    int index;
    LLVMCodeGenOptLevel level; /* the code generator's */
    LLVMMemoryBufferRef obj; /* out */
    double t_opt;            /* out: seconds in the optimiser */
    char msg[512];           /* out: why it failed */
} Part;

/* Makes f a declaration: a new one takes its uses and its name. */
static void strip(LLVMModuleRef mod, LLVMValueRef f)
{
    size_t len;
    const char *name = LLVMGetValueName2(f, &len);
    char buf[256];
    snprintf(buf, sizeof buf, "%.*s", (int)len, name);
    LLVMValueRef decl = LLVMAddFunction(mod, "", LLVMGlobalGetValueType(f));
    LLVMReplaceAllUsesWith(f, decl);
    LLVMDeleteFunction(f);
    LLVMSetValueName2(decl, buf, strlen(buf));
}

static void *run_part(void *arg)
{
    Part *p = arg;
    LLVMContextRef ctx = LLVMContextCreate();
    LLVMMemoryBufferRef mb = LLVMCreateMemoryBufferWithMemoryRange(p->bc, p->bclen, "disc.bc", 0);
    LLVMModuleRef mod = NULL;
    if (!mb || LLVMParseBitcodeInContext2(ctx, mb, &mod)) {
        snprintf(p->msg, sizeof p->msg, "error: internal: cannot read back the module's bitcode");
    } else {
        LLVMValueRef next;
        int k = 0;
        for (LLVMValueRef f = LLVMGetFirstFunction(mod); f && k < p->nfn; f = next, k++) {
            next = LLVMGetNextFunction(f); /* strip adds a declaration at the end */
            if (p->part_of[k] >= 0 && p->part_of[k] != p->index)
                strip(mod, f);
        }
        double t0 = disc_rt_now();
        cg_optimise(mod, p->o->level, p->o->cpu);
        p->t_opt = disc_rt_now() - t0;
        emit_object(mod, p->level, &p->obj, p->msg, sizeof p->msg);
        LLVMDisposeModule(mod);
    }
    if (mb)
        LLVMDisposeMemoryBuffer(mb);
    LLVMContextDispose(ctx);
    return NULL;
}

void cg_no_opt(LLVMValueRef f)
{
    LLVMContextRef c = LLVMGetModuleContext(LLVMGetGlobalParent(f));
    static const char *const kinds[] = {"optnone", "noinline"};
    for (int i = 0; i < 2; i++) {
        unsigned k = LLVMGetEnumAttributeKindForName(kinds[i], strlen(kinds[i]));
        LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(c, k, 0));
    }
}

bool cg_objects(LLVMModuleRef mod, const CgObjOpts *o, CgObjects *out, Diag *d)
{
    memset(out, 0, sizeof *out);
    LLVMValueRef cheap = o->cheap ? LLVMGetNamedFunction(mod, o->cheap) : NULL;
    if (cheap && !LLVMCountBasicBlocks(cheap))
        cheap = NULL;
    if (cheap)
        cg_no_opt(cheap);
    int nfn = 0, ndef = 0;
    int64_t total = 0;
    bool named = true;
    for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f), nfn++)
        if (LLVMCountBasicBlocks(f)) {
            size_t len;
            LLVMGetValueName2(f, &len);
            named &= len > 0 && len < 200;
            total += fn_size(f);
            ndef++;
        }
    /* n parts for the kernels, and the cheap function in one more of its
     * own when the module is cut */
    int n = o->parts > 0 ? o->parts : cg_cpus();
    bool alone = cheap && ndef > 1;
    if (n > CG_MAX_OBJECTS - alone)
        n = CG_MAX_OBJECTS - alone;
    if (n > ndef - alone)
        n = ndef - alone;
    if ((o->parts <= 0 && total < SPLIT_MIN) || o->text || !named)
        n = 1, alone = false;
    if (n <= 1 && !alone) { /* the module as it is, on this thread */
        double t0 = disc_rt_now();
        cg_optimise(mod, o->level, o->cpu);
        out->t_opt = disc_rt_now() - t0;
        if (o->text)
            *o->text = LLVMPrintModuleToString(mod);
        char msg[512];
        if (!emit_object(mod, LLVMCodeGenLevelDefault, &out->obj[0], msg, sizeof msg))
            return diag_setk(d, DIAG_INTERNAL, "%s", msg);
        out->n = 1;
        return true;
    }
    int np = n + alone; /* the cheap function's part is the last */
    /* the parts: largest function first into the lightest part */
    int *part_of = calloc((size_t)nfn + 1, sizeof *part_of);
    int *order = calloc((size_t)nfn + 1, sizeof *order);
    int64_t *size = calloc((size_t)nfn + 1, sizeof *size);
    Part *parts = calloc((size_t)np, sizeof *parts);
    char *bc = NULL;
    size_t bclen = 0;
    LLVMMemoryBufferRef bcbuf = NULL;
    bool ok = part_of && order && size && parts;
    int k = 0;
    for (LLVMValueRef f = LLVMGetFirstFunction(mod); ok && f; f = LLVMGetNextFunction(f), k++) {
        part_of[k] = -1;
        if (LLVMCountBasicBlocks(f)) {
            if (f == cheap)
                part_of[k] = n;
            else
                size[k] = fn_size(f);
            LLVMSetLinkage(f, LLVMExternalLinkage); /* the other parts link to it */
            LLVMSetVisibility(f, LLVMDefaultVisibility);
        }
        order[k] = k;
    }
    for (int i = 1; ok && i < nfn; i++) /* by size, descending; ties in module order */
        for (int j = i; j > 0 && size[order[j]] > size[order[j - 1]]; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    int64_t load[CG_MAX_OBJECTS] = {0};
    for (int i = 0; ok && i < nfn; i++) {
        int f = order[i];
        if (!size[f])
            continue;
        int best = 0;
        for (int p = 1; p < n; p++)
            if (load[p] < load[best])
                best = p;
        part_of[f] = best;
        load[best] += size[f];
    }
    if (ok) {
        bcbuf = LLVMWriteBitcodeToMemoryBuffer(mod);
        ok = bcbuf != NULL;
    }
    if (ok) {
        bc = (char *)LLVMGetBufferStart(bcbuf);
        bclen = LLVMGetBufferSize(bcbuf);
    }
    pthread_t tid[CG_MAX_OBJECTS];
    bool started[CG_MAX_OBJECTS] = {false};
    for (int p = 0; ok && p < np; p++) {
        /* the cheap function without the greedy register allocator: its
         * share of the code generator's time was three quarters (the
         * host flow of SSDlite, 68,000 lines: 1.2 s at the default
         * level, 0.3 s at none) */
        LLVMCodeGenOptLevel level = p == n ? LLVMCodeGenLevelNone : LLVMCodeGenLevelDefault;
        parts[p] = (Part){.o = o, .bc = bc, .bclen = bclen, .part_of = part_of, .nfn = nfn, .index = p,
                          .level = level};
        if (p > 0)
            started[p] = pthread_create(&tid[p], NULL, run_part, &parts[p]) == 0;
    }
    if (ok) {
        run_part(&parts[0]);
        for (int p = 1; p < np; p++)
            if (!started[p]) /* no thread: here */
                run_part(&parts[p]);
    }
    for (int p = 1; p < np; p++)
        if (started[p])
            pthread_join(tid[p], NULL);
    for (int p = 0; ok && p < np; p++) {
        if (!parts[p].obj) {
            ok = diag_setk(d, DIAG_INTERNAL, "%s", parts[p].msg);
            break;
        }
        if (parts[p].t_opt > out->t_opt)
            out->t_opt = parts[p].t_opt;
    }
    if (!ok && !d->set)
        diag_oom(d);
    for (int p = 0; parts && p < np; p++) {
        if (ok)
            out->obj[p] = parts[p].obj;
        else if (parts[p].obj)
            LLVMDisposeMemoryBuffer(parts[p].obj);
    }
    out->n = ok ? np : 0;
    if (bcbuf)
        LLVMDisposeMemoryBuffer(bcbuf);
    free(part_of);
    free(order);
    free(size);
    free(parts);
    return ok;
}

void cg_objects_free(CgObjects *o)
{
    for (int i = 0; i < o->n; i++)
        if (o->obj[i])
            LLVMDisposeMemoryBuffer(o->obj[i]);
    memset(o, 0, sizeof *o);
}
