/*
 * aot.c — a model compiled ahead of time into a native object.
 *
 * The same front half as the JIT (cg_build_module: the kernels and the host
 * flow), with three differences in the host flow: constants are globals of
 * the object (or offsets into a weights file loaded at run time), ops with
 * no kernel run through disc_aot_host_op on the model's IR text carried in
 * the object, and nothing refers to compiler memory. Around it the object
 * gets a DiscAotModel (runtime/aot.h) and entry points for C callers:
 *
 *     int NAME_run(<per input: const T *data, const int64_t *shape>,
 *                  <per output: T **data, int64_t *shape>,
 *                  char *err, size_t errlen);
 *     int NAME_run_arrays(const void *const *inputs, const int64_t *const *shapes,
 *                         void **outputs, int64_t *const *output_shapes,
 *                         char *err, size_t errlen);
 *     int NAME_run_device(...);   // --backend cuda: data in device memory (runtime/aot.h)
 *     int NAME_load_weights(const char *path, char *err, size_t errlen);  // --weights only
 *     void NAME_unload_weights(void);                                     // --weights only
 *
 * Every other symbol of the object is local: several models link into one
 * program. The header declares the entry points, the dtypes and symbolic
 * shapes of the inputs and outputs, and the status codes. The object is
 * position-independent, for executables (PIE) and shared objects alike;
 * it needs only the runtime archive (libdisc_rt.a) and what that needs.
 */
#include "codegen/gpu.h"
#include "codegen/host.h"
#include "passes/constraint.h"
#include "runtime/aot.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define B (cg->b)
#define AOT(cg) ((CgAot *)(cg)->target->state)

/* The cpu-aot target's state. */
typedef struct CgAot {
    const AotOpts *o;
    const char *obj_path;
    FILE *wf;              /* the weights file, or NULL: constants in the object */
    int64_t woff;          /* data bytes written to it */
    uint64_t whash;        /* FNV-1a 64 of them so far (disc_aot_hash) */
    LLVMValueRef wbase;    /* @NAME.weights: i8*, set by NAME_load_weights */
    LLVMTypeRef model_ty;  /* DiscAotModel */
    bool need_ir;          /* a host op: the object carries the graph's text */
    bool failed_io;
    double t_opt;          /* seconds in the LLVM optimiser */
    GpuRun *gpu;           /* cuda: the kernels (gpurun.c) */
    double t_gpu;          /* seconds compiling their images */
    int nimages;
} CgAot;

enum { NFIELDS = 21 }; /* DiscAotModel's fields, all 8 bytes */

static LLVMTypeRef model_type(Cg *cg)
{
    if (!AOT(cg)->model_ty) {
        LLVMTypeRef f[NFIELDS];
        for (int i = 0; i < NFIELDS; i++)
            f[i] = cg->t_p8;
        /* abi, ninputs, noutputs, nsyms, nsteps, weights_bytes, weights_hash */
        static const int ints[] = {0, 2, 3, 4, 5, 15, 16};
        for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
            f[ints[i]] = cg->t_i64;
        AOT(cg)->model_ty = LLVMStructTypeInContext(cg->ctx, f, NFIELDS, false);
    }
    return AOT(cg)->model_ty;
}

/* @NAME.model, created on first use; aot_compile sets its initializer. */
static LLVMValueRef model_global(Cg *cg)
{
    LLVMValueRef gv = LLVMGetNamedGlobal(cg->mod, "disc.model");
    if (!gv) {
        gv = LLVMAddGlobal(cg->mod, model_type(cg), "disc.model");
        LLVMSetInitializer(gv, LLVMConstNull(model_type(cg))); /* until define_model */
        LLVMSetLinkage(gv, LLVMInternalLinkage);
    }
    return gv;
}

static LLVMValueRef private_bytes(Cg *cg, const void *data, size_t n, unsigned align, const char *name)
{
    LLVMValueRef init = LLVMConstStringInContext(cg->ctx, n ? data : "", (unsigned)(n ? n : 1), n > 0);
    LLVMValueRef gv = LLVMAddGlobal(cg->mod, LLVMTypeOf(init), name);
    LLVMSetInitializer(gv, init);
    LLVMSetGlobalConstant(gv, true);
    LLVMSetLinkage(gv, LLVMPrivateLinkage);
    LLVMSetAlignment(gv, align);
    return LLVMConstBitCast(gv, cg->t_p8);
}

static LLVMValueRef cstring(Cg *cg, const char *s)
{
    return private_bytes(cg, s, strlen(s) + 1, 1, "disc.str");
}

/* @disc.weights: where NAME_load_weights puts the file's data. */
static LLVMValueRef weights_global(Cg *cg)
{
    LLVMValueRef gv = LLVMAddGlobal(cg->mod, cg->t_p8, "disc.weights");
    LLVMSetInitializer(gv, LLVMConstPointerNull(cg->t_p8));
    LLVMSetLinkage(gv, LLVMInternalLinkage);
    return gv;
}

static void hash_words(CgAot *a, const unsigned char *p, size_t n) /* n % 8 == 0 */
{
    for (size_t i = 0; i < n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        a->whash = (a->whash ^ w) * 0x100000001b3ull;
    }
}

/* A constant is a private global of the object, or (--weights, 64 bytes
 * and more) an offset into the weights file the program loads. */
static LLVMValueRef aot_const_ptr(Host *h, const Op *op)
{
    Cg *cg = h->cg;
    CgAot *a = AOT(cg);
    const Const *c = op->cst;
    if (!a->wf || c->nbytes < 64) /* small constants stay in the object */
        return private_bytes(cg, c->data, c->nbytes, 64, "disc.const");
    /* at a 64-byte aligned offset of the weights file, padded with zeros */
    int64_t off = a->woff;
    static const unsigned char zeros[64];
    if (!a->wbase)
        a->wbase = weights_global(cg);
    size_t pad = (64 - c->nbytes % 64) % 64;
    if (fwrite(c->data, 1, c->nbytes, a->wf) != c->nbytes || fwrite(zeros, 1, pad, a->wf) != pad)
        a->failed_io = true;
    hash_words(a, c->data, c->nbytes - c->nbytes % 8);
    unsigned char tail[72] = {0};
    memcpy(tail, (const unsigned char *)c->data + (c->nbytes - c->nbytes % 8), c->nbytes % 8);
    hash_words(a, tail, (c->nbytes % 8 + pad + 7) / 8 * 8);
    a->woff += (int64_t)(c->nbytes + pad);
    LLVMValueRef base = LLVMBuildLoad2(B, cg->t_p8, a->wbase, "weights");
    LLVMValueRef ix = cg_i64(cg, off);
    return LLVMBuildGEP2(B, cg->t_i8, base, &ix, 1, "");
}

/* A host op is a call of disc_aot_host_op on the op's index in the IR text
 * the object carries. */
static LLVMValueRef aot_host_op(Host *h, Op *op, LLVMValueRef arr)
{
    Cg *cg = h->cg;
    AOT(cg)->need_ir = true;
    int64_t index = 0;
    for (const Op *o = cg->g->first; o && o != op; o = o->next)
        index++;
    /* the symbols its results define: {count, (result, axis, symbol)...} */
    int64_t binds[1 + 3 * 64] = {0};
    const HostProg *p = &cg->si->prog;
    for (int i = 0; i < p->n && binds[0] < 64; i++)
        if (p->steps[i].kind == HS_DATA && p->steps[i].value->def == op) {
            int64_t *b = binds + 1 + 3 * binds[0]++;
            b[0] = p->steps[i].value->idx;
            b[1] = p->steps[i].axis;
            b[2] = p->steps[i].sym->id;
        }
    LLVMValueRef bind = private_bytes(cg, binds, (size_t)(1 + 3 * binds[0]) * 8, 8, "disc.binds");
    LLVMTypeRef fty, params[6] = {cg->t_p8, cg->t_p8, cg->t_i64, cg->t_p64, cg->t_pp8, cg->t_p64};
    LLVMValueRef f = host_fn_decl(cg, "disc_aot_host_op", cg->t_i32, params, 6, &fty);
    LLVMValueRef args[6] = {h->rt, LLVMConstBitCast(model_global(cg), cg->t_p8), cg_i64(cg, index),
                            LLVMConstBitCast(bind, cg->t_p64), arr, h->syms};
    return LLVMBuildCall2(B, fty, f, args, 6, "");
}

/* ---- the model's description ------------------------------------------- */

static LLVMValueRef ptr_table(Cg *cg, LLVMValueRef *v, int n, const char *name)
{
    LLVMValueRef init = LLVMConstArray(cg->t_p8, v, (unsigned)n);
    LLVMValueRef gv = LLVMAddGlobal(cg->mod, LLVMTypeOf(init), name);
    LLVMSetInitializer(gv, init);
    LLVMSetGlobalConstant(gv, true);
    LLVMSetLinkage(gv, LLVMPrivateLinkage);
    return LLVMConstBitCast(gv, cg->t_p8);
}

static LLVMValueRef i64_table(Cg *cg, const int64_t *v, int n)
{
    return private_bytes(cg, v, (size_t)n * 8, 8, "disc.ints");
}

static const char *value_name(const Value *v, char *buf, size_t size)
{
    if (v->name)
        return v->name;
    snprintf(buf, size, "%d", v->id);
    return buf;
}

/* What step i of the host shape program requires, in words. */
static void step_text(const Graph *g, const HostProg *p, int i, char *buf, size_t size)
{
    const HostStep *s = &p->steps[i];
    char a[200], b[200], nb[32];
    buf[0] = 0;
    switch (s->kind) {
    case HS_BIND: {
        int n = snprintf(buf, size, "input \"%s\" dim %d (%s) must be >= %lld", value_name(g->inputs[s->input], nb, sizeof nb),
                         s->axis, s->sym->name, (long long)s->sym->lo);
        if (s->sym->hi != DIM_INF)
            snprintf(buf + n, size - (size_t)n, " and <= %lld", (long long)s->sym->hi);
        break;
    }
    case HS_CHECK: {
        dim_snprint(a, sizeof a, s->lhs);
        int n = snprintf(buf, size, "input \"%s\" dim %d must be %s",
                         value_name(g->inputs[s->input], nb, sizeof nb), s->axis, a);
        for (int j = 0; j < p->n && s->lhs->kind == DIM_SYM; j++) /* where that symbol comes from */
            if (p->steps[j].kind == HS_BIND && p->steps[j].sym == s->lhs) {
                snprintf(buf + n, size - (size_t)n, " (input \"%s\" dim %d)",
                         value_name(g->inputs[p->steps[j].input], nb, sizeof nb), p->steps[j].axis);
                break;
            }
        break;
    }
    case HS_REQUIRE:
    case HS_BCAST:
        dim_snprint(a, sizeof a, s->lhs);
        dim_snprint(b, sizeof b, s->rhs);
        snprintf(buf, size, "%s%s%s %s %s%s", s->what ? s->what : "", s->what ? ": " : "", a,
                 s->kind == HS_BCAST ? "==" : cons_rel_str(s->rel), b, s->kind == HS_BCAST ? " or one of them is 1" : "");
        break;
    default:
        break;
    }
}

static LLVMValueRef names_table(Cg *cg, Value **v, int n)
{
    LLVMValueRef s[n + 1];
    char nb[32];
    for (int i = 0; i < n; i++)
        s[i] = cstring(cg, value_name(v[i], nb, sizeof nb));
    return ptr_table(cg, s, n, "disc.names");
}

static LLVMValueRef type_table(Cg *cg, Value **v, int n, bool rank)
{
    int64_t t[n + 1];
    for (int i = 0; i < n; i++)
        t[i] = rank ? v[i]->type.rank : v[i]->type.dtype;
    return i64_table(cg, t, n);
}

/* The graph as IR text with every constant elided (host ops get their
 * operands from the flow), but those inside regions: a loop or if runs
 * its regions from this text, on the interpreter's code (the JIT compiles
 * them; an AOT object does not yet). NULL when out of memory. */
static char *graph_text(const Graph *g)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    graph_print(f, g, &(PrintOpts){0, true, true});
    fclose(f);
    return buf;
}

static bool define_model(Cg *cg, const AotOpts *o, int64_t whash, LLVMValueRef main_fn, LLVMValueRef gpu)
{
    Graph *g = cg->g;
    const HostProg *p = &cg->si->prog;
    LLVMValueRef steps[p->n + 1];
    for (int i = 0; i < p->n; i++) {
        char buf[600];
        step_text(g, p, i, buf, sizeof buf);
        steps[i] = cstring(cg, buf);
    }
    LLVMValueRef syms[g->dims.nsyms + 1];
    for (int i = 0; i < g->dims.nsyms; i++)
        syms[i] = cstring(cg, g->dims.syms[i]->name ? g->dims.syms[i]->name : "");
    LLVMValueRef null = LLVMConstPointerNull(cg->t_p8), ir = null;
    if (AOT(cg)->need_ir) {
        char *text = graph_text(g);
        if (!text)
            return diag_oom(cg->d);
        ir = cstring(cg, text);
        free(text);
    }
    LLVMValueRef state = LLVMAddGlobal(cg->mod, cg->t_p8, "disc.state");
    LLVMSetInitializer(state, null);
    LLVMSetLinkage(state, LLVMInternalLinkage);
    /* in the order of DiscAotModel (runtime/aot.h) */
    LLVMValueRef f[NFIELDS] = {
        cg_i64(cg, DISC_AOT_ABI),
        cstring(cg, o->name),
        cg_i64(cg, g->ninputs),
        cg_i64(cg, g->noutputs),
        cg_i64(cg, g->dims.nsyms),
        cg_i64(cg, p->n),
        names_table(cg, g->inputs, g->ninputs),
        type_table(cg, g->inputs, g->ninputs, false),
        type_table(cg, g->inputs, g->ninputs, true),
        names_table(cg, g->outputs, g->noutputs),
        type_table(cg, g->outputs, g->noutputs, false),
        type_table(cg, g->outputs, g->noutputs, true),
        ptr_table(cg, steps, p->n, "disc.steps"),
        LLVMConstBitCast(main_fn, cg->t_p8),
        AOT(cg)->wbase ? LLVMConstBitCast(AOT(cg)->wbase, cg->t_p8) : null,
        cg_i64(cg, AOT(cg)->woff),
        cg_i64(cg, (int64_t)whash),
        ir,
        ptr_table(cg, syms, g->dims.nsyms, "disc.symnames"),
        LLVMConstBitCast(state, cg->t_p8),
        gpu ? LLVMConstBitCast(gpu, cg->t_p8) : null,
    };
    LLVMValueRef gv = model_global(cg);
    LLVMSetInitializer(gv, LLVMConstStructInContext(cg->ctx, f, NFIELDS, false));
    return true;
}

/* ---- entry points ---------------------------------------------------------- */

static LLVMValueRef entry(Cg *cg, const char *prefix, const char *suffix, LLVMTypeRef ret, LLVMTypeRef *params,
                          int n)
{
    char name[300];
    snprintf(name, sizeof name, "%s_%s", prefix, suffix);
    LLVMValueRef fn = LLVMAddFunction(cg->mod, name, LLVMFunctionType(ret, params, (unsigned)n, false));
    LLVMPositionBuilderAtEnd(B, LLVMAppendBasicBlockInContext(cg->ctx, fn, "entry"));
    return fn;
}

static LLVMValueRef rt_call(Cg *cg, const char *name, LLVMTypeRef ret, LLVMTypeRef *params, LLVMValueRef *args,
                            int n)
{
    LLVMTypeRef fty;
    LLVMValueRef f = host_fn_decl(cg, name, ret, params, n, &fty);
    return LLVMBuildCall2(B, fty, f, args, (unsigned)n, "");
}

static void define_entries(Cg *cg, const char *prefix, bool gpu)
{
    Graph *g = cg->g;
    int ni = g->ninputs, no = g->noutputs;
    LLVMValueRef model = LLVMConstBitCast(model_global(cg), cg->t_p8);
    LLVMTypeRef t_ppi64 = LLVMPointerType(cg->t_p64, 0);
    LLVMTypeRef run_params[7] = {cg->t_p8, cg->t_pp8, t_ppi64, cg->t_pp8, t_ppi64, cg->t_p8, cg->t_i64};

    /* NAME_run_arrays(inputs, shapes, outputs, output_shapes, err, errlen) */
    LLVMValueRef fn = entry(cg, prefix, "run_arrays", cg->t_i32, run_params + 1, 6);
    LLVMValueRef args[7] = {model};
    for (int i = 0; i < 6; i++)
        args[i + 1] = LLVMGetParam(fn, (unsigned)i);
    LLVMBuildRet(B, rt_call(cg, "disc_aot_run", cg->t_i32, run_params, args, 7));

    /* NAME_run(in0, in0_shape, ..., &out0, out0_shape, ..., err, errlen) */
    int np = 2 * ni + 2 * no + 2;
    LLVMTypeRef p[np];
    for (int i = 0; i < ni; i++) {
        p[2 * i] = cg->t_p8;
        p[2 * i + 1] = cg->t_p64;
    }
    for (int i = 0; i < no; i++) {
        p[2 * ni + 2 * i] = cg->t_pp8;
        p[2 * ni + 2 * i + 1] = cg->t_p64;
    }
    p[np - 2] = cg->t_p8;
    p[np - 1] = cg->t_i64;
    fn = entry(cg, prefix, "run", cg->t_i32, p, np);
    LLVMValueRef ins = LLVMBuildArrayAlloca(B, cg->t_p8, cg_i64(cg, ni + 1), "");
    LLVMValueRef ish = LLVMBuildArrayAlloca(B, cg->t_p64, cg_i64(cg, ni + 1), "");
    LLVMValueRef outs = LLVMBuildArrayAlloca(B, cg->t_p8, cg_i64(cg, no + 1), "");
    LLVMValueRef osh = LLVMBuildArrayAlloca(B, cg->t_p64, cg_i64(cg, no + 1), "");
    for (int i = 0; i < ni; i++) {
        LLVMBuildStore(B, LLVMGetParam(fn, (unsigned)(2 * i)), host_gep(cg, cg->t_p8, ins, i));
        LLVMBuildStore(B, LLVMGetParam(fn, (unsigned)(2 * i + 1)), host_gep(cg, cg->t_p64, ish, i));
    }
    for (int i = 0; i < no; i++)
        LLVMBuildStore(B, LLVMGetParam(fn, (unsigned)(2 * ni + 2 * i + 1)), host_gep(cg, cg->t_p64, osh, i));
    LLVMValueRef a2[7] = {model, ins, ish, outs, osh, LLVMGetParam(fn, (unsigned)np - 2),
                          LLVMGetParam(fn, (unsigned)np - 1)};
    LLVMValueRef rc = rt_call(cg, "disc_aot_run", cg->t_i32, run_params, a2, 7);
    for (int i = 0; i < no; i++)
        LLVMBuildStore(B, LLVMBuildLoad2(B, cg->t_p8, host_gep(cg, cg->t_p8, outs, i), ""),
                       LLVMGetParam(fn, (unsigned)(2 * ni + 2 * i)));
    LLVMBuildRet(B, rc);

    if (gpu) { /* NAME_run_device(inputs, shapes, outputs, output_nbytes, output_shapes, err, errlen) */
        LLVMTypeRef dp[8] = {cg->t_p8, cg->t_pp8, t_ppi64, cg->t_pp8, cg->t_p64, t_ppi64, cg->t_p8, cg->t_i64};
        fn = entry(cg, prefix, "run_device", cg->t_i32, dp + 1, 7);
        LLVMValueRef da[8] = {model};
        for (int i = 0; i < 7; i++)
            da[i + 1] = LLVMGetParam(fn, (unsigned)i);
        LLVMBuildRet(B, rt_call(cg, "disc_aot_run_device", cg->t_i32, dp, da, 8));
        /* NAME_run_device_on(stream, the same) */
        LLVMTypeRef sp[9] = {cg->t_p8, cg->t_p8, cg->t_pp8, t_ppi64, cg->t_pp8, cg->t_p64, t_ppi64, cg->t_p8, cg->t_i64};
        fn = entry(cg, prefix, "run_device_on", cg->t_i32, sp + 1, 8);
        LLVMValueRef sa[9] = {model};
        for (int i = 0; i < 8; i++)
            sa[i + 1] = LLVMGetParam(fn, (unsigned)i);
        LLVMBuildRet(B, rt_call(cg, "disc_aot_run_device_on", cg->t_i32, sp, sa, 9));
    }
    if (!AOT(cg)->wbase)
        return;
    LLVMTypeRef lp[4] = {cg->t_p8, cg->t_p8, cg->t_p8, cg->t_i64};
    fn = entry(cg, prefix, "load_weights", cg->t_i32, lp + 1, 3);
    LLVMValueRef la[4] = {model, LLVMGetParam(fn, 0), LLVMGetParam(fn, 1), LLVMGetParam(fn, 2)};
    LLVMBuildRet(B, rt_call(cg, "disc_aot_load_weights", cg->t_i32, lp, la, 4));
    fn = entry(cg, prefix, "unload_weights", cg->t_void, NULL, 0);
    rt_call(cg, "disc_aot_unload_weights", cg->t_void, lp, &model, 1);
    LLVMBuildRetVoid(B);
}

/* ---- the header -------------------------------------------------------------- */

static const char *c_type(DType t)
{
    switch (t) {
    case DT_F32: return "float";
    case DT_F64: return "double";
    case DT_F16:
    case DT_BF16:
    case DT_U16: return "uint16_t";
    case DT_I8: return "int8_t";
    case DT_U8:
    case DT_BOOL: return "uint8_t";
    case DT_I16: return "int16_t";
    case DT_I32: return "int32_t";
    case DT_U32: return "uint32_t";
    case DT_I64: return "int64_t";
    case DT_U64: return "uint64_t";
    default: return "void";
    }
}

/* A C identifier from a value's name: other characters become '_', a
 * leading digit or a clash with an earlier one gets a prefix or suffix. */
static void c_ident(const Value *v, int index, const char *kind, char (*seen)[64], int nseen, char *out)
{
    char nb[32];
    const char *name = value_name(v, nb, sizeof nb);
    int n = 0;
    if (isdigit((unsigned char)name[0]) || !name[0])
        n = snprintf(out, 64, "%s", kind);
    for (const char *c = name; *c && n < 40; c++)
        out[n++] = isalnum((unsigned char)*c) ? *c : '_';
    out[n] = 0;
    for (int i = 0; i < nseen; i++)
        if (!strcmp(seen[i], out)) {
            snprintf(out + n, (size_t)(64 - n), "_%s%d", kind, index);
            break;
        }
}

static void shape_comment(FILE *f, const Value *v)
{
    fputc('[', f);
    for (int k = 0; k < v->type.rank; k++) {
        char d[128];
        dim_snprint(d, sizeof d, v->type.dims[k]);
        fprintf(f, "%s%s", k ? ", " : "", d);
    }
    fputc(']', f);
}

static bool write_header(const char *path, const Graph *g, const AotOpts *o, bool weights, bool gpu)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return false;
    const char *n = o->name;
    char guard[300];
    int k = 0;
    for (const char *c = n; *c && k < 280; c++)
        guard[k++] = (char)toupper((unsigned char)*c);
    guard[k] = 0;
    int ni = g->ninputs, no = g->noutputs;
    char (*ids)[64] = calloc((size_t)(ni + no + 1), sizeof *ids);
    if (!ids) {
        fclose(f);
        return false;
    }
    for (int i = 0; i < ni + no; i++)
        c_ident(i < ni ? g->inputs[i] : g->outputs[i - ni], i < ni ? i : i - ni, i < ni ? "in" : "out", ids, i,
                ids[i]);
    fprintf(f, "/* %s.h: the model %s compiled ahead of time by dcc " DISC_PROJECT_VERSION ". Generated; do not edit.\n"
               " *\n"
               " * One compile serves every shape the model accepts. Link the object with the\n"
               " * disc runtime only:  cc app.c %s.o $(pkg-config --libs disc-rt)\n"
               " *\n",
            n, g->name ? g->name : n, n);
    fprintf(f, " * Inputs (dims by name are symbols: any size the model's constraints allow):\n");
    for (int i = 0; i < ni; i++) {
        char nb[32];
        fprintf(f, " *   %-12s \"%s\" %s ", ids[i], value_name(g->inputs[i], nb, sizeof nb),
                dtype_name(g->inputs[i]->type.dtype));
        shape_comment(f, g->inputs[i]);
        fputc('\n', f);
    }
    fprintf(f, " * Outputs:\n");
    for (int i = 0; i < no; i++) {
        char nb[32];
        fprintf(f, " *   %-12s \"%s\" %s ", ids[ni + i], value_name(g->outputs[i], nb, sizeof nb),
                dtype_name(g->outputs[i]->type.dtype));
        shape_comment(f, g->outputs[i]);
        fputc('\n', f);
    }
    fprintf(f, " *\n"
               " * %s_run takes each input's data and dims, and returns each output as memory\n"
               " * it allocates for the caller (release it with free()) with its dims written\n"
               " * to the array given (as many as the output's rank). It returns one of the\n"
               " * status codes below and, unless err is NULL, a message in err. Any number of\n"
               " * threads may run the model at once. DISC_THREADS in the environment caps the\n"
               " * threads a run uses (default: every core).\n",
            n);
    if (weights)
        fprintf(f, " *\n * The weights are in a separate file: call %s_load_weights(path) before the\n"
                   " * first run (%s_unload_weights frees them).\n",
                n, n);
    fprintf(f, " */\n#ifndef %s_H\n#define %s_H\n\n#include <stddef.h>\n#include <stdint.h>\n\n"
               "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n",
            guard, guard);
    fprintf(f, "enum {\n    %s_NUM_INPUTS = %d,\n    %s_NUM_OUTPUTS = %d,\n", guard, ni, guard, no);
    fprintf(f, "    %s_OK = %d,\n    %s_EINPUT = %d,   /* an input's shape violates the model */\n"
               "    %s_ERUN = %d,     /* out of memory, or a library failed */\n"
               "    %s_EWEIGHTS = %d, /* the weights file is missing or not this model's */\n};\n\n",
            guard, DISC_AOT_OK, guard, DISC_AOT_EINPUT, guard, DISC_AOT_ERUN, guard, DISC_AOT_EWEIGHTS);
    fprintf(f, "/* Ranks and dtypes (ONNX-style names) of the inputs and outputs, in order. */\n");
    fprintf(f, "static const int %s_input_rank[%d] = {", n, ni > 0 ? ni : 1);
    for (int i = 0; i < ni; i++)
        fprintf(f, "%s%d", i ? ", " : "", g->inputs[i]->type.rank);
    fprintf(f, "};\nstatic const char *const %s_input_dtype[%d] = {", n, ni > 0 ? ni : 1);
    for (int i = 0; i < ni; i++)
        fprintf(f, "%s\"%s\"", i ? ", " : "", dtype_name(g->inputs[i]->type.dtype));
    fprintf(f, "};\nstatic const int %s_output_rank[%d] = {", n, no > 0 ? no : 1);
    for (int i = 0; i < no; i++)
        fprintf(f, "%s%d", i ? ", " : "", g->outputs[i]->type.rank);
    fprintf(f, "};\nstatic const char *const %s_output_dtype[%d] = {", n, no > 0 ? no : 1);
    for (int i = 0; i < no; i++)
        fprintf(f, "%s\"%s\"", i ? ", " : "", dtype_name(g->outputs[i]->type.dtype));
    fprintf(f, "};\n\nint %s_run(", n);
    for (int i = 0; i < ni; i++)
        fprintf(f, "const %s *%s, const int64_t %s_shape[%d],\n        ", c_type(g->inputs[i]->type.dtype), ids[i],
                ids[i], g->inputs[i]->type.rank > 0 ? g->inputs[i]->type.rank : 1);
    for (int i = 0; i < no; i++)
        fprintf(f, "%s **%s, int64_t %s_shape[%d],\n        ", c_type(g->outputs[i]->type.dtype), ids[ni + i],
                ids[ni + i], g->outputs[i]->type.rank > 0 ? g->outputs[i]->type.rank : 1);
    fprintf(f, "char *err, size_t errlen);\n\n"
               "/* The same with arrays: inputs[i] and its dims shapes[i]; outputs[i] and output_shapes[i]. */\n"
               "int %s_run_arrays(const void *const *inputs, const int64_t *const *shapes, void **outputs,\n"
               "        int64_t *const *output_shapes, char *err, size_t errlen);\n",
            n);
    if (gpu)
        fprintf(f, "\n/* A cuda model with its data in device memory: inputs[i] and outputs[i] are\n"
                   " * device addresses (CUdeviceptr) in the device's primary context, output i's\n"
                   " * buffer the caller's, of output_nbytes[i] bytes (the run writes its dims to\n"
                   " * output_shapes[i]; a buffer too small is %s_ERUN, named). The run uses a\n"
                   " * stream of its own and has finished with the inputs and written the outputs\n"
                   " * when it returns: finish the work that produced the inputs first (e.g.\n"
                   " * cuCtxSynchronize). */\n"
                   "int %s_run_device(const void *const *inputs, const int64_t *const *shapes, void *const *outputs,\n"
                   "        const int64_t *output_nbytes, int64_t *const *output_shapes, char *err, size_t errlen);\n"
                   "/* The same after the work queued on the caller's stream (a CUstream): its\n"
                   " * kernels may still be writing the inputs; the run waits for them on the\n"
                   " * device (an event recorded there), not on the host. */\n"
                   "int %s_run_device_on(void *stream, const void *const *inputs, const int64_t *const *shapes,\n"
                   "        void *const *outputs, const int64_t *output_nbytes, int64_t *const *output_shapes, char *err,\n"
                   "        size_t errlen);\n",
                guard, n, n);
    if (weights)
        fprintf(f, "\nint %s_load_weights(const char *path, char *err, size_t errlen);\nvoid %s_unload_weights(void);\n",
                n, n);
    fprintf(f, "\n#ifdef __cplusplus\n}\n#endif\n\n#endif\n");
    free(ids);
    return fclose(f) == 0;
}

/* ---- the compile --------------------------------------------------------------- */

static bool emit_object(LLVMModuleRef mod, const CpuTarget *t, const char *path, Diag *d)
{
    char msg[DIAG_MAX - 64];
    if (cg_emit_object(mod, t, LLVMCodeGenLevelAggressive, path, NULL, msg, sizeof msg))
        return true;
    return diag_setk(d, DIAG_RESOURCE, "%s", msg);
}

/* A zeroed internal table of n pointers in place of the flow's external
 * [0 x i8*] global `name` (gpurun.c), or NULL where the flow has none. */
static LLVMValueRef sized_table(Cg *cg, const char *name, int n)
{
    LLVMValueRef old = LLVMGetNamedGlobal(cg->mod, name);
    LLVMTypeRef at = LLVMArrayType(cg->t_p8, (unsigned)(n > 0 ? n : 1));
    char nm[64];
    snprintf(nm, sizeof nm, "disc.%s", name + strlen("disc_jit_"));
    LLVMValueRef gv = LLVMAddGlobal(cg->mod, at, nm);
    LLVMSetInitializer(gv, LLVMConstNull(at));
    LLVMSetLinkage(gv, LLVMInternalLinkage);
    if (old) {
        LLVMReplaceAllUsesWith(old, LLVMConstBitCast(gv, LLVMTypeOf(old)));
        LLVMDeleteGlobal(old);
    }
    return gv;
}

/* cuda: the kernels' images (a CUBIN per architecture of o->gpu_arch and
 * the PTX of the first; the emulator's alone with DISC_CUDA_EMU_MODULES=1)
 * and the DiscAotGpu that lists them with the flow's tables. */
static LLVMValueRef define_gpu(Cg *cg, CgAot *a, Diag *d)
{
    GpuRun *r = a->gpu;
    const char *list = a->o->gpu_arch ? a->o->gpu_arch : "sm_80,sm_90";
    enum { MAXIMG = 16 };
    LLVMValueRef archs[MAXIMG + 1], imgs[MAXIMG + 1];
    int n = 0;
    double t0 = disc_rt_now();
    /* the images: a CUBIN per architecture, the first's PTX after it
     * (the emulator's image alone), compiled at once */
    char arch[MAXIMG][16];
    const char *req[MAXIMG];
    bool cubin[MAXIMG];
    int nk = gpu_run_kernels(r, NULL, 0);
    for (const char *p = list; nk > 0 && *p && n < MAXIMG - 1;) {
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof arch[0] || strncmp(p, "sm_", 3)) {
            diag_setk(d, DIAG_ARG, "error: --gpu-arch %s: not a list of sm_XY", list);
            return NULL;
        }
        snprintf(arch[n], sizeof arch[n], "%.*s", (int)len, p);
        req[n] = arch[n], cubin[n] = true, n++;
        if (gpu_run_emu(r))
            break;
        if (n == 1) /* the first architecture's PTX */
            req[n] = arch[0], cubin[n] = false, n++;
        p += len + (p[len] == ',');
    }
    char *img[MAXIMG];
    size_t size[MAXIMG];
    if (n > 0 && !gpu_run_compile(r, n, req, cubin, img, size, d))
        return NULL;
    for (int i = 0; i < n; i++) {
        imgs[i] = private_bytes(cg, img[i], size[i], 16, "disc.gpu.image");
        archs[i] = cstring(cg, gpu_run_emu(r) ? "emu" : !cubin[i] ? "ptx" : req[i]);
        free(img[i]);
    }
    a->t_gpu = disc_rt_now() - t0;
    a->nimages = n;
    const char *names[nk + 1];
    LLVMValueRef kn[nk + 1];
    gpu_run_kernels(r, names, nk);
    for (int i = 0; i < nk; i++)
        kn[i] = cstring(cg, names[i]);
    LLVMValueRef state = LLVMAddGlobal(cg->mod, cg->t_p8, "disc.gpu.state");
    LLVMSetInitializer(state, LLVMConstPointerNull(cg->t_p8));
    LLVMSetLinkage(state, LLVMInternalLinkage);
    LLVMValueRef f[8] = {
        cg_i64(cg, n),
        ptr_table(cg, archs, n, "disc.gpu.archs"),
        ptr_table(cg, imgs, n, "disc.gpu.images"),
        cg_i64(cg, nk),
        ptr_table(cg, kn, nk, "disc.gpu.kernels"),
        LLVMConstBitCast(sized_table(cg, "disc_jit_gpufns", nk), cg->t_p8),
        LLVMConstBitCast(sized_table(cg, "disc_jit_dconsts", gpu_run_consts(r)), cg->t_p8),
        LLVMConstBitCast(state, cg->t_p8),
    };
    LLVMTypeRef ft[8];
    for (int i = 0; i < 8; i++)
        ft[i] = LLVMTypeOf(f[i]);
    LLVMValueRef init = LLVMConstStructInContext(cg->ctx, f, 8, false);
    LLVMValueRef gv = LLVMAddGlobal(cg->mod, LLVMStructTypeInContext(cg->ctx, ft, 8, false), "disc.gpu");
    LLVMSetInitializer(gv, init);
    LLVMSetLinkage(gv, LLVMInternalLinkage);
    return gv;
}

/* The model's description and entry points around the driver's module,
 * optimised for the CPU and written as an object. */
static bool aot_finish(const CgTarget *t, CgModule *m, const CgOpts *co, const CpuTarget *cpu, Diag *d)
{
    CgAot *a = t->state;
    const AotOpts *o = a->o;
    Cg cg; /* for the parts written after the flow: the same module */
    cg_init(&cg, LLVMGetModuleContext(m->mod), m->g, m->si, m->plan, d);
    LLVMDisposeModule(cg.mod);
    cg.mod = m->mod;
    cg.cpu = cpu;
    cg.target = t;
    if (a->wf && !a->wbase) /* --weights with no large constant: an empty file */
        a->wbase = weights_global(&cg);
    /* every function and global of the model is local; the entry points
     * come after */
    for (LLVMValueRef f = LLVMGetFirstFunction(m->mod); f; f = LLVMGetNextFunction(f))
        if (LLVMCountBasicBlocks(f))
            LLVMSetLinkage(f, LLVMInternalLinkage);
    LLVMValueRef main_fn = LLVMGetNamedFunction(m->mod, "disc_main");
    if (main_fn)
        cg_no_opt(main_fn); /* as the JIT compiles it */
    LLVMValueRef gpu = NULL;
    bool ok = !a->gpu || (gpu = define_gpu(&cg, a, d)) != NULL;
    ok = ok && define_model(&cg, o, a->whash, main_fn, gpu);
    if (ok) {
        define_entries(&cg, o->name, gpu != NULL);
        char *vmsg = NULL;
        if (LLVMVerifyModule(m->mod, LLVMReturnStatusAction, &vmsg))
            ok = diag_setk(d, DIAG_INTERNAL, "error: internal: generated LLVM IR is invalid: %.400s", vmsg);
        LLVMDisposeMessage(vmsg);
    }
    cg.mod = NULL;
    cg_free(&cg);
    if (ok && a->failed_io)
        ok = diag_setk(d, DIAG_RESOURCE, "error: cannot write %s", o->weights_path);
    if (!ok)
        return false;
    double t0 = disc_rt_now();
    cg_optimise(m->mod, co->opt_level, cpu);
    a->t_opt = disc_rt_now() - t0;
    if (co->dump_after && !strcmp(co->dump_after, "llvm")) {
        char *txt = LLVMPrintModuleToString(m->mod);
        fputs(txt, stderr);
        LLVMDisposeMessage(txt);
    }
    return emit_object(m->mod, cpu, a->obj_path, d);
}

bool aot_compile(Graph *g, const ShapeOpts *so, const CgOpts *co, const AotOpts *o, const char *obj_path,
                 const char *header_path, Diag *d)
{
    for (const char *c = o->name; *c; c++)
        if (!(isalnum((unsigned char)*c) || *c == '_') || isdigit((unsigned char)o->name[0]))
            return diag_setk(d, DIAG_ARG, "error: --name %s: not a C identifier", o->name);
    CpuTarget cpu;
    if (!cpu_target_init(&cpu, co->cpu, d))
        return false;
    CgAot a = {.o = o, .whash = 0xcbf29ce484222325ull};
    char *wtmp = NULL;
    if (o->weights_path) {
        size_t n = strlen(o->weights_path) + 8;
        wtmp = malloc(n);
        if (!wtmp) {
            cpu_target_free(&cpu);
            return diag_oom(d);
        }
        snprintf(wtmp, n, "%s.tmp", o->weights_path);
        a.wf = fopen(wtmp, "wb");
        static const unsigned char hdr[DISC_AOT_WEIGHTS_HEADER];
        if (!a.wf || fwrite(hdr, 1, sizeof hdr, a.wf) != sizeof hdr) {
            if (a.wf)
                fclose(a.wf);
            free(wtmp);
            cpu_target_free(&cpu);
            return diag_setk(d, DIAG_RESOURCE, "error: cannot write %s", o->weights_path);
        }
    }
    CgTarget t;
    cpu_target_hooks(&t, "cpu-aot");
    t.const_ptr = aot_const_ptr;
    t.host_op = aot_host_op;
    t.finish = aot_finish;
    t.state = &a;
    a.obj_path = obj_path;
    if (co->gpu && (strcmp(co->gpu, "cuda") || !(a.gpu = gpu_run_new(&t, co, false, d)))) {
        if (!d->set)
            diag_setk(d, DIAG_ARG, "error: dcc compile: backend %s: only cpu and cuda compile ahead of time", co->gpu);
        if (a.wf)
            fclose(a.wf);
        if (wtmp)
            remove(wtmp);
        free(wtmp);
        cpu_target_free(&cpu);
        return false;
    }
    LLVMContextRef ctx = LLVMContextCreate();
    CgModule m;
    bool ok = cg_compile(g, so, co, &cpu, ctx, &t, &m, d);
    if (ok && co->verbose)
        fprintf(stderr,
                "dcc: shape analysis %.1f ms, fusion and memory plan %.1f ms, LLVM IR %.1f ms, optimise %.1f ms, "
                "object %.1f ms; %d kernel launches (%d distinct kernels, %d of them reading constants by slot) "
                "and %d library calls (%d applying an epilogue) for %d ops; "
                "%d matmuls with a skinny variant, %d reductions with a split variant, %d convolutions and pools %s%.0d%s; "
                "%lld bytes of weights in %s; "
                "kernels for CPU %s (%s, %d-bit vectors, %d registers)\n",
                1e3 * m.t[0], 1e3 * m.t[1], 1e3 * m.t[2], 1e3 * a.t_opt, 1e3 * (m.t[3] - a.t_opt), m.nlaunch,
                m.nkernels, m.nopened, m.nlibrary, m.nepilogue, g->nops, m.nskinny, m.nsplit, m.nnhwc,
                m.block ? "blocked by " : "channels-last", m.block, m.block ? " channels" : "", (long long)a.woff,
                a.wf ? o->weights_path : "the object", cpu.name, cpu.isa, cpu.vbits, cpu.nvregs);
    if (ok && co->verbose && a.gpu)
        fprintf(stderr, "dcc: cuda: %d kernels in %d module image%s (%s) in %.1f ms\n", gpu_run_kernels(a.gpu, NULL, 0),
                a.nimages, a.nimages == 1 ? "" : "s", gpu_run_emu(a.gpu) ? "the emulator's" : o->gpu_arch ? o->gpu_arch : "sm_80,sm_90 and PTX",
                1e3 * a.t_gpu);
    gpu_run_free(a.gpu);
    if (ok && header_path && !write_header(header_path, g, o, a.wf != NULL, a.gpu != NULL))
        ok = diag_setk(d, DIAG_RESOURCE, "error: cannot write %s", header_path);
    if (a.wf) { /* the header: magic, size, checksum */
        unsigned char hdr[DISC_AOT_WEIGHTS_HEADER] = {0};
        memcpy(hdr, DISC_AOT_WEIGHTS_MAGIC, 8);
        memcpy(hdr + 8, &a.woff, 8);
        memcpy(hdr + 16, &a.whash, 8);
        bool wok = fseek(a.wf, 0, SEEK_SET) == 0 && fwrite(hdr, 1, sizeof hdr, a.wf) == sizeof hdr;
        wok = fclose(a.wf) == 0 && wok;
        if (ok && (!wok || rename(wtmp, o->weights_path) != 0))
            ok = diag_setk(d, DIAG_RESOURCE, "error: cannot write %s", o->weights_path);
        if (!ok)
            remove(wtmp);
        free(wtmp);
    }
    if (m.mod)
        LLVMDisposeModule(m.mod);
    LLVMContextDispose(ctx);
    cg_module_free(&m);
    cpu_target_free(&cpu);
    return ok;
}
