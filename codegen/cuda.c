/*
 * cuda.c — GPU kernels as CUDA C, from the fusion plan the CPU uses.
 *
 * The loop template (the CPU's, kernel.c, in another form): one thread per
 * element of the root's index space in a grid-stride loop, so any grid
 * covers any size; flat mode where the group is elementwise over one
 * shape (cg_loop_flat), else the flat index split into a multi-index and
 * every operand read through its op's index map (broadcast, transpose,
 * slice, pad, concat, reverse, reshape, gather, iota), as elem.c does in
 * LLVM IR. Where a dim may broadcast implicitly at run time the kernel
 * checks once whether every such pair is equal and takes the variant
 * that reads plain indices (cg_broadcast_pairs, as on the CPU).
 *
 * The text is C that a C compiler and NVRTC both read: values are
 * numbered variables (v12) assigned once, so a fused chain is a list of
 * statements, and dims are computed once at the top of the kernel from
 * the symbol parameters (s3). Everything a target does differently is a
 * macro or a function of its prelude (DISC_KERNEL, DISC_TID, DISC_AT, the
 * f16/bf16 conversions): CUDA, HIP and the emulator differ only there.
 * The preludes are in prelude.c.
 * f16 and bf16 are stored as 16-bit integers and computed in f32;
 * arithmetic follows the reference interpreter (doc/ops.md) as the CPU's
 * does: float -> int saturates, NaN gives 0; integer division never traps.
 *
 * Each op's expression comes from one table per op class below, indexed
 * by the UnaryOp / BinaryOp of ir/ops.def: a row of ops.def without its
 * entry here does not compile.
 */
#include "codegen/gpu.h"
#include "codegen/kern.h"
#include "runtime/interp.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- text ------------------------------------------------------------------ */

void gpu_str_printf(GpuStr *s, const char *fmt, ...)
{
    if (s->failed)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = s->cap - s->n;
        int n = vsnprintf(s->p ? s->p + s->n : NULL, room, fmt, ap);
        va_end(ap);
        if (n < 0) {
            s->failed = true;
            return;
        }
        if ((size_t)n < room) {
            s->n += (size_t)n;
            return;
        }
        size_t cap = s->cap ? s->cap : 4096;
        while (cap - s->n <= (size_t)n)
            cap *= 2;
        char *p = realloc(s->p, cap);
        if (!p) {
            s->failed = true;
            return;
        }
        s->p = p;
        s->cap = cap;
    }
}

void gpu_str_free(GpuStr *s)
{
    free(s->p);
    memset(s, 0, sizeof *s);
}

/* ---- the op tables ------------------------------------------------------------
 *
 * A template is C text with $x (the operand; $a and $b of a binary op),
 * $t (the compute type: float, double, int32_t, bool, ...), $f (the maths
 * suffix: "f" for float, "" for double) and $u ("s" or "u": the signedness
 * of an integer type). Each row has a template for a float, an integer and
 * a bool operand; NULL where the op does not take that class (ops.def's
 * dtypes). Helpers named disc_* are the prelude's. */
typedef struct CuOp {
    const char *f, *i, *b;
} CuOp;

#define CU_NEG     {"(-$x)", "(-$x)", NULL}
#define CU_ABS     {"fabs$f($x)", "($x < 0 ? -$x : $x)", NULL}
#define CU_SIGN    {"disc_sign$f($x)", "(($x > 0) - ($x < 0))", NULL}
#define CU_EXP     {"exp$f($x)", NULL, NULL}
#define CU_LOG     {"log$f($x)", NULL, NULL}
#define CU_SQRT    {"sqrt$f($x)", NULL, NULL}
#define CU_RSQRT   {"(($t)1 / sqrt$f($x))", NULL, NULL}
#define CU_RECIP   {"(($t)1 / $x)", NULL, NULL}
#define CU_TANH    {"tanh$f($x)", NULL, NULL}
#define CU_SIGMOID {"disc_sigmoid$f($x)", NULL, NULL}
#define CU_ERF     {"erf$f($x)", NULL, NULL}
#define CU_SIN     {"sin$f($x)", NULL, NULL}
#define CU_COS     {"cos$f($x)", NULL, NULL}
#define CU_TAN     {"tan$f($x)", NULL, NULL}
#define CU_ATAN    {"atan$f($x)", NULL, NULL}
#define CU_FLOOR   {"floor$f($x)", NULL, NULL}
#define CU_CEIL    {"ceil$f($x)", NULL, NULL}
#define CU_ROUND   {"rint$f($x)", NULL, NULL}
#define CU_NOT     {NULL, "(~$x)", "(!$x)"}
#define CU_ISNAN   {"($x != $x)", NULL, NULL}
#define CU_ISINF   {"(fabs$f($x) == DISC_INF)", NULL, NULL}

static const CuOp cu_unary[] = {
#define UNARY(e, name, dtypes) [UN_##e] = CU_##e,
#include "ir/ops.def"
};
_Static_assert(sizeof cu_unary / sizeof cu_unary[0] == UN_COUNT, "a UNARY row of ops.def without its CU_ entry");

#define CU_ADD {"($a + $b)", "($a + $b)", NULL}
#define CU_SUB {"($a - $b)", "($a - $b)", NULL}
#define CU_MUL {"($a * $b)", "($a * $b)", NULL}
#define CU_DIV {"($a / $b)", "($t)disc_$udiv($a, $b)", NULL}
#define CU_REM {"fmod$f($a, $b)", "($t)disc_$urem($a, $b)", NULL}
#define CU_MOD {"disc_fmod$f($a, $b)", "($t)disc_$umod($a, $b)", NULL}
#define CU_POW {"pow$f($a, $b)", NULL, NULL}
#define CU_MAX {"disc_fmax$f($a, $b)", "($a > $b ? $a : $b)", NULL}
#define CU_MIN {"disc_fmin$f($a, $b)", "($a < $b ? $a : $b)", NULL}
#define CU_AND {NULL, "($a & $b)", "($a & $b)"}
#define CU_OR  {NULL, "($a | $b)", "($a | $b)"}
#define CU_XOR {NULL, "($a ^ $b)", "($a ^ $b)"}

static const CuOp cu_binary[] = {
#define BINARY(e, name, dtypes) [BIN_##e] = CU_##e,
#include "ir/ops.def"
};
_Static_assert(sizeof cu_binary / sizeof cu_binary[0] == BIN_COUNT, "a BINARY row of ops.def without its CU_ entry");

static bool is_f(DType dt) { return dtype_is_float(dt); }
static bool is_u(DType dt)
{
    return dt == DT_U8 || dt == DT_U16 || dt == DT_U32 || dt == DT_U64 || dt == DT_BOOL;
}

/* The C type a dtype computes in, and the one it is stored in. */
static const char *ctype(DType dt)
{
    switch (dt) {
    case DT_F32: case DT_F16: case DT_BF16: return "float";
    case DT_F64: return "double";
    case DT_I8: return "int8_t";
    case DT_U8: return "uint8_t";
    case DT_I16: return "int16_t";
    case DT_U16: return "uint16_t";
    case DT_I32: return "int32_t";
    case DT_U32: return "uint32_t";
    case DT_I64: return "int64_t";
    case DT_U64: return "uint64_t";
    case DT_BOOL: return "bool";
    case DT_COUNT: case DT_INVALID: break;
    }
    return "void";
}

static const char *stype(DType dt)
{
    return dt == DT_F16 || dt == DT_BF16 ? "uint16_t" : dt == DT_BOOL ? "uint8_t" : ctype(dt);
}

/* ---- one kernel being written ------------------------------------------------------ */

typedef struct V {
    char s[48]; /* a C expression: a variable or a literal */
} V;

typedef struct Gk {
    Cg *cg;
    const Group *grp;
    GpuStr pro, body;  /* the dims, computed once; the loop */
    int nv;            /* variables so far */
    int ind;           /* indentation of the body, in levels */
    DimMap dims;       /* Dim -> its variable's number + 1 */
    bool *usesym;      /* by symbol id: a parameter of the kernel */
    Value **bv;        /* the buffers: ins, then outs */
    int nb;
    bool flat;         /* every value is read at the flat index fi */
    V fi;
    bool speculate;    /* the variant where no dim broadcasts implicitly */
    GpuStr shared;     /* __shared__ arrays of a reduction kernel */
    Value **rv;        /* values computed once per row (reductions) */
    V *rval;
    int nr;
    const struct Rows *rows; /* the row variant being written */
    Value *cache_v;    /* the value kept in dynamic shared memory: read there */
    V *cache_idx;      /* ... at this index of the row's pass */
    V cache_j;         /* ... which is this position in the row */
    int nshared;       /* reductions whose __shared__ partials are declared */
    bool vec;          /* the vectorised loop: four elements a thread */
    int vlane;         /* ... the element being written (0..3) */
    V vi;              /* ... the vector's index (elements 4 vi .. 4 vi + 3) */
    V *vload;          /* ... per buffer, its vector loaded in this iteration */
    bool i32;          /* the loop's variant with 32-bit indices (loop_i32) */
    bool ilp;          /* the index-map loop takes LOOP_ILP elements a thread (loop_ilp) */
    bool rvec;         /* a row variant's vector form: four consecutive row positions a thread */
    int rvoff;         /* ... no vector loads here (a branch's scope) */
    Dim *rm;           /* ... the row's length */
    V rbase;           /* ... the first of the four positions */
    V rpos;            /* ... the one being written */
    int rlane;         /* ... its place among the four */
    unsigned rvbufs;   /* ... buffers read as vectors (the guard tests their alignment) */
    struct RowVec { int b; char key[200]; V v; } rvl[16]; /* ... vectors loaded this iteration */
    int nrvl;
    DimMap dims32;     /* ... its dims: Dim -> its int32_t variable's number + 1 */
} Gk;

/* The C type of an index in the code being written. */
static const char *IX(const Gk *k) { return k->i32 ? "int32_t" : "int64_t"; }

static V lit(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static V lit(const char *fmt, ...)
{
    V v;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v.s, sizeof v.s, fmt, ap);
    va_end(ap);
    return v;
}

/* A new variable of type ty holding the expression, in the body. */
static V let(Gk *k, const char *ty, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static V let(Gk *k, const char *ty, const char *fmt, ...)
{
    char e[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e, sizeof e, fmt, ap);
    va_end(ap);
    int n = k->nv++;
    gpu_str_printf(&k->body, "%*s%s v%d = %s;\n", 4 * k->ind, "", ty, n, e);
    return lit("v%d", n);
}

static void line(Gk *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(Gk *k, const char *fmt, ...)
{
    char e[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e, sizeof e, fmt, ap);
    va_end(ap);
    gpu_str_printf(&k->body, "%*s%s\n", 4 * k->ind, "", e);
}

bool gpu_unsupported(const Graph *g, const Op *op, const char *what, Diag *d)
{
    const char *file = g->file ? g->file : g->name ? g->name : "model";
    if (op && op->line)
        diag_setk(d, DIAG_UNSUPPORTED, "%s:%d: error: not supported on cuda yet: %s", file, op->line, what);
    else if (op && op->src)
        diag_setk(d, DIAG_UNSUPPORTED, "%s: node \"%s\" (%s): error: not supported on cuda yet: %s", file,
                  op->src, op_info(op->kind)->name, what);
    else if (op) /* made by a pass: its result names it */
        diag_setk(d, DIAG_UNSUPPORTED, "%s: %s %%%d: error: not supported on cuda yet: %s", file,
                  op_info(op->kind)->name, op->out[0]->id, what);
    else
        diag_setk(d, DIAG_UNSUPPORTED, "%s: error: not supported on cuda yet: %s", file, what);
    return false;
}

static bool unsupported(Cg *cg, const Op *op, const char *what) { return gpu_unsupported(cg->g, op, what, cg->d); }

/* ---- dims ---------------------------------------------------------------------- */

/* d as C over symbol values named by symfmt ("s%d", "s[%d]"), inline. */
static void dim_text(GpuStr *s, const Dim *d, const char *symfmt)
{
    switch (d->kind) {
    case DIM_CONST: gpu_str_printf(s, d->c < 0 ? "(%lld)" : "%lld", (long long)d->c); return;
    case DIM_SYM: gpu_str_printf(s, symfmt, d->id); return;
    case DIM_ADD:
    case DIM_MUL:
        gpu_str_printf(s, "(");
        for (int i = 0; i < d->n; i++) {
            if (i)
                gpu_str_printf(s, d->kind == DIM_ADD ? " + " : " * ");
            dim_text(s, d->args[i], symfmt);
        }
        if (d->kind == DIM_ADD && d->c)
            gpu_str_printf(s, " + (%lld)", (long long)d->c);
        if (d->kind == DIM_MUL && d->c != 1)
            gpu_str_printf(s, " * (%lld)", (long long)d->c);
        gpu_str_printf(s, ")");
        return;
    default: break;
    }
    static const char *fn[] = {[DIM_FLOORDIV] = "disc_floordiv", [DIM_CEILDIV] = "disc_ceildiv",
                               [DIM_MOD] = "disc_mod", [DIM_MIN] = "disc_min64", [DIM_MAX] = "disc_max64"};
    gpu_str_printf(s, "%s(", fn[d->kind]);
    dim_text(s, d->args[0], symfmt);
    gpu_str_printf(s, ", ");
    dim_text(s, d->args[1], symfmt);
    gpu_str_printf(s, ")");
}

static void mark_syms(Gk *k, const Dim *d)
{
    if (d->kind == DIM_SYM)
        k->usesym[d->id] = true;
    for (int i = 0; d->kind != DIM_CONST && d->kind != DIM_SYM && i < d->n; i++)
        mark_syms(k, d->args[i]);
}

/* d as an int64 value: a literal, a parameter, or a variable computed once
 * at the top of the kernel. */
static V kdim(Gk *k, Dim *d)
{
    if (k->i32 && d && d->kind != DIM_CONST) { /* a 32-bit copy of the dim's variable, computed once */
        Dim *hit = dimmap_get(&k->dims32, d);
        if (hit)
            return lit("v%d", (int)(intptr_t)hit - 1);
        k->i32 = false;
        V w = kdim(k, d);
        k->i32 = true;
        int n = k->nv++;
        gpu_str_printf(&k->pro, "    const int32_t v%d = (int32_t)%s;\n", n, w.s);
        dimmap_put(&k->dims32, d, (Dim *)(intptr_t)(n + 1));
        return lit("v%d", n);
    }
    if (!d) { /* a dim op that failed: out of memory, or an overflow */
        if (!diag_arena_failed(k->cg->d, &k->cg->g->arena))
            diag_setk(k->cg->d, DIAG_INTERNAL, "codegen: internal: a dim that overflows");
        return lit("0");
    }
    if (d->kind == DIM_CONST)
        return lit(d->c < 0 ? "(%lld)" : "%lld", (long long)d->c);
    mark_syms(k, d);
    if (d->kind == DIM_SYM)
        return lit("s%d", d->id);
    Dim *hit = dimmap_get(&k->dims, d);
    if (hit)
        return lit("v%d", (int)(intptr_t)hit - 1);
    int n = k->nv++;
    gpu_str_printf(&k->pro, "    const int64_t v%d = ", n);
    dim_text(&k->pro, d, "s%d");
    gpu_str_printf(&k->pro, ";\n");
    dimmap_put(&k->dims, d, (Dim *)(intptr_t)(n + 1)); /* a cache: out of memory costs a recomputation */
    return lit("v%d", n);
}

static V kconst(int64_t c) { return lit(c < 0 ? "(%lld)" : "%lld", (long long)c); }

/* A nearest resize's source index along axis a (resize_is_map): x = num /
 * den, (o, s) or (2o + 1 - s, 2s), rounded in integers as the op's
 * `nearest` says, clamped into the operand (elem.c's resize_source). */
static V resize_source(Gk *k, const Op *op, int a, V o)
{
    int64_t s = resize_scale(op, a);
    if (s == 1)
        return o;
    const char *co = op_attr_str(op, "coord", ""), *nr = op_attr_str(op, "nearest", "");
    bool asym = !strcmp(co, "asymmetric");
    V num = asym ? o : let(k, IX(k), "2 * %s + %s", o.s, kconst(1 - s).s);
    V den = kconst(asym ? s : 2 * s);
    V f = let(k, IX(k), "disc_floordiv(%s, %s)", num.s, den.s);
    V rem = let(k, IX(k), "%s - %s * %s", num.s, f.s, den.s);
    V r = !strcmp(nr, "ceil") ? let(k, IX(k), "%s + (%s != 0)", f.s, rem.s)
        : !strcmp(nr, "round_prefer_floor") ? let(k, IX(k), "%s + (2 * %s > %s)", f.s, rem.s, den.s)
        : !strcmp(nr, "round_prefer_ceil") ? let(k, IX(k), "%s + (2 * %s >= %s)", f.s, rem.s, den.s)
        : f;
    V n = kdim(k, op->in[0]->type.dims[a]);
    r = let(k, IX(k), "disc_min64(disc_max64(%s, 0), %s - 1)", r.s, n.s);
    if (!strcmp(co, "pytorch_half_pixel")) /* a result of length 1 reads index 0 */
        r = let(k, IX(k), "%s > 1 ? %s : 0", kdim(k, op->out[0]->type.dims[a]).s, r.s);
    return r;
}

/* ---- scalar arithmetic -------------------------------------------------------------- */

/* tmpl with its placeholders filled, for values of dtype dt. */
static void expand(char *out, size_t size, const char *tmpl, const char *a, const char *b, DType dt)
{
    size_t n = 0;
    for (const char *p = tmpl; *p && n + 1 < size; p++) {
        const char *sub = NULL;
        if (*p == '$' && p[1]) {
            switch (p[1]) {
            case 'x': case 'a': sub = a; break;
            case 'b': sub = b; break;
            case 't': sub = ctype(dt); break;
            case 'f': sub = dt == DT_F64 ? "" : "f"; break;
            case 'u': sub = is_u(dt) ? "u" : "s"; break;
            default: break;
            }
        }
        if (sub) {
            n += (size_t)snprintf(out + n, size - n, "%s", sub);
            p++;
        } else {
            out[n++] = *p;
        }
        if (n >= size)
            n = size - 1;
    }
    out[n] = 0;
}

static const char *pick_tmpl(const CuOp *op, DType dt)
{
    return dt == DT_BOOL ? op->b : is_f(dt) ? op->f : op->i;
}

/* An op of a table on operands of dtype dt; NULL template: not defined. */
static bool apply(Gk *k, const CuOp *op, DType dt, DType rdt, V a, V b, V *out)
{
    const char *t = pick_tmpl(op, dt);
    if (!t)
        return false;
    char e[512];
    expand(e, sizeof e, t, a.s, b.s, dt);
    *out = let(k, ctype(rdt), "%s", e);
    return true;
}

/* A float literal of compute type dt. */
static V flit(double x, DType dt)
{
    if (isnan(x))
        return lit("DISC_NAN");
    if (isinf(x))
        return lit(x > 0 ? "DISC_INF" : "(-DISC_INF)");
    const char *fmt = dt == DT_F64 ? (signbit(x) ? "(%a)" : "%a") : (signbit(x) ? "(%af)" : "%af");
    return lit(fmt, dt == DT_F64 ? x : (double)(float)x);
}

static V convert(Gk *k, V x, DType from, DType to)
{
    const char *tt = ctype(to);
    if (from == to || !strcmp(ctype(from), tt))
        return x;
    if (to == DT_BOOL)
        return let(k, "bool", "%s != 0", x.s);
    if (is_f(from) && !is_f(to)) { /* saturating, NaN -> 0 */
        static const char *lim[][2] = {
            [DT_I8] = {"-128", "127"}, [DT_U8] = {"0", "255"}, [DT_I16] = {"-32768", "32767"},
            [DT_U16] = {"0", "65535"}, [DT_I32] = {"(-2147483647 - 1)", "2147483647"}, [DT_U32] = {"0", "4294967295u"},
            [DT_I64] = {"(-9223372036854775807ll - 1)", "9223372036854775807ll"},
            [DT_U64] = {"0", "18446744073709551615ull"},
        };
        return let(k, tt, "DISC_F2I(%s, %s, %s, %s)", tt, x.s, lim[to][0], lim[to][1]);
    }
    if (!is_f(from) && (to == DT_F16 || to == DT_BF16) && dtype_size(from) > 2 && from != DT_BOOL)
        /* the f32 rounded to odd, which the store rounds once (elem.c, int_to_half) */
        return let(k, "float", is_u(from) ? "disc_u2f_odd((uint64_t)%s)" : "disc_i2f_odd((int64_t)%s)", x.s);
    return let(k, tt, "(%s)%s", tt, x.s);
}

static const char *cmp_op(const char *dir)
{
    return !strcmp(dir, "eq") ? "==" : !strcmp(dir, "ne") ? "!=" : !strcmp(dir, "lt") ? "<"
         : !strcmp(dir, "le") ? "<=" : !strcmp(dir, "gt") ? ">" : ">=";
}

/* ---- memory ---------------------------------------------------------------------- */

static int buf_of(const Gk *k, const Value *v)
{
    for (int i = 0; i < k->nb; i++)
        if (k->bv[i] == v)
            return i;
    return -1;
}

/* DISC_AT(bN, off, count): the element, bounds-checked by the emulator. */
static void at(Gk *k, int b, V off, char *out, size_t size)
{
    V n = kdim(k, type_numel(&k->cg->g->dims, &k->bv[b]->type));
    snprintf(out, size, "DISC_AT(b%d, %s, %s)", b, off.s, n.s);
}

/* The vector type of four elements of a buffer's storage type: float4,
 * ushort4, ...; NULL for 8-byte types (not vectorised). */
static const char *vtype(DType dt)
{
    const char *t = stype(dt);
    return !strcmp(t, "float") ? "float4" : !strcmp(t, "uint16_t") ? "ushort4" : !strcmp(t, "uint8_t") ? "uchar4"
         : !strcmp(t, "int8_t") ? "char4" : !strcmp(t, "int16_t") ? "short4" : !strcmp(t, "int32_t") ? "int4"
         : !strcmp(t, "uint32_t") ? "uint4" : NULL;
}

static const char *const vcomp[4] = {"x", "y", "z", "w"};

/* A stored element a (an lvalue or a vector's component) of dtype dt, in
 * its compute type. */
static V stored(Gk *k, DType dt, const char *a)
{
    switch (dt) {
    case DT_F16: return let(k, "float", "disc_h2f(%s)", a);
    case DT_BF16: return let(k, "float", "disc_bf2f(%s)", a);
    case DT_BOOL: return let(k, "bool", "%s != 0", a);
    default: return let(k, ctype(dt), "%s", a);
    }
}

static V load(Gk *k, int b, V off)
{
    char a[200];
    if (k->vec && !strcmp(off.s, k->fi.s)) { /* a component of the buffer's vector, loaded once */
        if (!k->vload[b].s[0]) {
            V n = kdim(k, type_numel(&k->cg->g->dims, &k->bv[b]->type));
            const char *vt = vtype(k->bv[b]->type.dtype);
            k->vload[b] = let(k, vt, "DISC_V4(const %s, b%d, %s, %s)", vt, b, k->vi.s, n.s);
        }
        snprintf(a, sizeof a, "%s.%s", k->vload[b].s, vcomp[k->vlane]);
    } else {
        at(k, b, off, a, sizeof a);
    }
    return stored(k, k->bv[b]->type.dtype, a);
}

static void store(Gk *k, int b, V off, V x)
{
    char a[200];
    at(k, b, off, a, sizeof a);
    switch (k->bv[b]->type.dtype) {
    case DT_F16: line(k, "%s = disc_f2h(%s);", a, x.s); break;
    case DT_BF16: line(k, "%s = disc_f2bf(%s);", a, x.s); break;
    case DT_BOOL: line(k, "%s = (uint8_t)%s;", a, x.s); break;
    default: line(k, "%s = %s;", a, x.s); break;
    }
}

/* Row-major offset of idx in a value of type t. */
static V offset(Gk *k, const Type *t, const V *idx)
{
    if (t->rank == 0)
        return lit("0");
    char e[1024];
    size_t n = 0;
    Dim *stride = dim_const(&k->cg->g->dims, 1);
    for (int i = t->rank - 1; i >= 0; i--) {
        if (dim_is(stride, 1))
            n += (size_t)snprintf(e + n, sizeof e - n, "%s%s", n ? " + " : "", idx[i].s);
        else
            n += (size_t)snprintf(e + n, sizeof e - n, "%s%s * %s", n ? " + " : "", idx[i].s, kdim(k, stride).s);
        if (n >= sizeof e)
            n = sizeof e - 1;
        stride = dim_mul(&k->cg->g->dims, stride, t->dims[i]);
    }
    return let(k, IX(k), "%s", e);
}

static void unflatten(Gk *k, const Type *t, V flat, V *idx)
{
    for (int i = t->rank - 1; i >= 0; i--) {
        if (i == 0) {
            idx[0] = flat;
            break;
        }
        if (dim_is(t->dims[i], 1)) {
            idx[i] = lit("0");
            continue;
        }
        V d = kdim(k, t->dims[i]);
        idx[i] = let(k, IX(k), "%s %% %s", flat.s, d.s);
        flat = let(k, IX(k), "%s / %s", flat.s, d.s);
    }
}

/* ---- index maps (elem.c's, as C) ----------------------------------------------------- */

static V gelem(Gk *k, Value *v, V *idx);

/* A linear resize's source coordinate along axis a for result index o, in
 * doubles: the interpreter's source_coord, operation for operation (elem.c's
 * lerp_coord). */
static V lerp_coord(Gk *k, const Op *op, int a, V o)
{
    const char *co = op_attr_str(op, "coord", "");
    const Attr *sc = op_attr(op, "scales");
    V lin = kdim(k, op->in[0]->type.dims[a]), lout = kdim(k, op->out[0]->type.dims[a]);
    V din = let(k, "double", "(double)%s", lin.s), dout = let(k, "double", "(double)%s", lout.s);
    V x = let(k, "double", "(double)%s", o.s);
    V s = sc ? let(k, "double", "%a", sc->floats[a]) : let(k, "double", "%s / %s", dout.s, din.s);
    if (!strcmp(co, "asymmetric"))
        return let(k, "double", "%s / %s", x.s, s.s);
    if (!strcmp(co, "align_corners"))
        return let(k, "double", "%s == 1 ? 0.0 : %s * (double)(%s - 1) / (%s * %s - 1.0)", lout.s, x.s, lin.s, s.s,
                   din.s);
    V hp = let(k, "double", "(%s + 0.5) / %s - 0.5", x.s, s.s);
    if (!strcmp(co, "pytorch_half_pixel"))
        return let(k, "double", "%s > 1 ? %s : 0.0", lout.s, hp.s);
    if (!strcmp(co, "half_pixel_symmetric"))
        return let(k, "double", "%s / 2.0 * (1.0 - %s / (%s * %s)) + (%s + 0.5) / %s - 0.5", din.s, dout.s, s.s,
                   din.s, x.s, s.s);
    return hp; /* half_pixel */
}

/* The sum over a linear resize's corners from moving axis j on (elem.c's
 * lerp_corners): the lower tap alone where the weight is 0. */
static V lerp_corners(Gk *k, const Op *op, V *xi, const int *ax, int n, int j, const V *lo, const V *hi,
                      const V *w)
{
    if (j == n)
        return gelem(k, op->in[0], xi);
    const char *ct = ctype(op->out[0]->type.dtype);
    xi[ax[j]] = lo[j];
    V v0 = lerp_corners(k, op, xi, ax, n, j + 1, lo, hi, w);
    xi[ax[j]] = hi[j];
    V v1 = lerp_corners(k, op, xi, ax, n, j + 1, lo, hi, w);
    return let(k, ct, "%s == 0.0 ? %s : (%s)(1.0 - %s) * %s + (%s)%s * %s", w[j].s, v0.s, ct, w[j].s, v0.s, ct,
               w[j].s, v1.s);
}

/* A linear resize (resize_is_lerp; elem.c's resize_lerp): along each axis
 * whose length changes, the taps floor(x) and floor(x) + 1 of the
 * coordinate x, clamped into the operand, weighted by x - floor(x). */
static V resize_lerp(Gk *k, const Op *op, V *idx)
{
    const Type *rt = &op->out[0]->type;
    V xi[MAX_RANK], lo[MAX_RANK], hi[MAX_RANK], w[MAX_RANK];
    int ax[MAX_RANK], n = 0;
    for (int a = 0; a < rt->rank; a++) {
        xi[a] = idx[a];
        if (resize_scale(op, a) == 1)
            continue;
        V x = lerp_coord(k, op, a, idx[a]);
        V f = let(k, "double", "floor(%s)", x.s);
        V fi = let(k, IX(k), "(%s)%s", IX(k), f.s);
        V len = kdim(k, op->in[0]->type.dims[a]);
        ax[n] = a;
        lo[n] = let(k, IX(k), "disc_min64(disc_max64(%s, 0), %s - 1)", fi.s, len.s);
        hi[n] = let(k, IX(k), "disc_min64(disc_max64(%s + 1, 0), %s - 1)", fi.s, len.s);
        w[n++] = let(k, "double", "%s - %s", x.s, f.s);
    }
    return lerp_corners(k, op, xi, ax, n, 0, lo, hi, w);
}

static bool in_group(const Gk *k, const Value *v)
{
    if (!v->def)
        return false;
    for (int i = 0; i < k->grp->nops; i++)
        if (k->grp->ops[i] == v->def)
            return true;
    return false;
}

static V select_dim(Gk *k, Dim *xd, Dim *rd, V j)
{
    if (xd == rd || (!dim_is(xd, 1) && (k->speculate || !kern_maybe_one(k->cg, xd))))
        return j;
    if (dim_is(xd, 1))
        return lit("0");
    return let(k, IX(k), "%s == 1 ? 0 : %s", kdim(k, xd).s, j.s); /* may be 1 at run time */
}

static V operand(Gk *k, Value *x, const Type *rt, V *idx)
{
    if (k->flat)
        return gelem(k, x, idx);
    V xi[MAX_RANK];
    const Type *xt = &x->type;
    int off = rt->rank - xt->rank;
    for (int j = 0; j < xt->rank; j++)
        xi[j] = select_dim(k, xt->dims[j], rt->dims[j + off], idx[j + off]);
    return gelem(k, x, xi);
}

static V clamp(Gk *k, V i, V n)
{
    return let(k, "int64_t", "disc_max64(0, disc_min64(%s, %s - 1))", i.s, n.s);
}

/* A gathered index: wraps negatives and clamps into [0, n). */
static V index_value(Gk *k, V j, DType dt, Dim *n)
{
    j = convert(k, j, dt, DT_I64);
    V nn = kdim(k, n);
    j = let(k, "int64_t", "%s < 0 ? %s + %s : %s", j.s, j.s, nn.s, j.s);
    return clamp(k, j, nn);
}

/* A scalar constant as a literal; false for a larger one (a buffer). */
static bool const_lit(const Op *op, V *out)
{
    const Type *t = &op->out[0]->type;
    size_t n;
    if (!op->cst || !op->cst->data || !type_static_numel(t, &n) || n != 1)
        return false;
    const void *p = op->cst->data;
    switch (t->dtype) {
    case DT_F32: { float f; memcpy(&f, p, 4); *out = flit(f, DT_F32); return true; }
    case DT_F64: { double f; memcpy(&f, p, 8); *out = flit(f, DT_F64); return true; }
    case DT_I64: { int64_t v; memcpy(&v, p, 8);
        *out = v == INT64_MIN ? lit("(-9223372036854775807ll - 1)") : lit("(int64_t)%lldll", (long long)v); return true; }
    case DT_U64: { uint64_t v; memcpy(&v, p, 8); *out = lit("(uint64_t)%lluull", (unsigned long long)v); return true; }
    case DT_I32: { int32_t v; memcpy(&v, p, 4); *out = lit("(int32_t)%lldll", (long long)v); return true; }
    case DT_U32: { uint32_t v; memcpy(&v, p, 4); *out = lit("(uint32_t)%uu", v); return true; }
    case DT_I16: { int16_t v; memcpy(&v, p, 2); *out = lit("(int16_t)%d", v); return true; }
    case DT_U16: { uint16_t v; memcpy(&v, p, 2); *out = lit("(uint16_t)%u", v); return true; }
    case DT_I8: *out = lit("(int8_t)%d", *(const int8_t *)p); return true;
    case DT_U8: *out = lit("(uint8_t)%u", *(const uint8_t *)p); return true;
    case DT_BOOL: *out = lit("%s", *(const uint8_t *)p ? "true" : "false"); return true;
    /* f16, bf16: computed in float, so a float literal (exact). Read from
     * its buffer, BERT-base f16's softmax divided every score by a load
     * (IEEE division), where f32's multiplies by a folded 1/8 */
    case DT_F16: { uint16_t h; memcpy(&h, p, 2); *out = flit(interp_f16_to_double(h), DT_F32); return true; }
    case DT_BF16: { uint16_t h; memcpy(&h, p, 2); *out = flit(interp_bf16_to_double(h), DT_F32); return true; }
    default: return false;
    }
}

static V const_elem(Gk *k, const Op *op, V *idx, bool *ok)
{
    V c;
    if (const_lit(op, &c))
        return c;
    int b = buf_of(k, op->out[0]);
    if (b < 0) {
        *ok = false;
        return lit("0");
    }
    size_t n;
    V off = type_static_numel(&op->out[0]->type, &n) && n == 1 ? lit("0")
          : k->flat ? k->fi : offset(k, &op->out[0]->type, idx);
    return load(k, b, off);
}

/* Entry idx of a small list of i64 values (a shape tensor). */
static V pick(Gk *k, V *v, int n, V idx)
{
    V r = v[n - 1];
    for (int i = n - 2; i >= 0; i--)
        r = let(k, "int64_t", "%s == %d ? %s : %s", idx.s, i, v[i].s, r.s);
    return r;
}

/* The operand index of a reshape from xt to rt (elem.c, reshape_index):
 * shared leading and trailing dims pass through, the middle goes through
 * its flat position. */
static void reshape_index(Gk *k, const Type *xt, const Type *rt, V *idx, V *xi)
{
    int lead = 0, tail = 0;
    while (lead < xt->rank && lead < rt->rank && xt->dims[lead] == rt->dims[lead])
        lead++;
    while (tail < xt->rank - lead && tail < rt->rank - lead &&
           xt->dims[xt->rank - 1 - tail] == rt->dims[rt->rank - 1 - tail])
        tail++;
    for (int i = 0; i < lead; i++)
        xi[i] = idx[i];
    for (int i = 0; i < tail; i++)
        xi[xt->rank - 1 - i] = idx[rt->rank - 1 - i];
    int xm = xt->rank - lead - tail, rm = rt->rank - lead - tail;
    if (xm == 0)
        return;
    V flat = lit("0");
    for (int i = lead; i < lead + rm; i++)
        flat = i == lead ? idx[i] : let(k, IX(k), "%s * %s + %s", flat.s, kdim(k, rt->dims[i]).s, idx[i].s);
    for (int i = lead + xm - 1; i >= lead; i--) {
        if (i == lead) {
            xi[i] = flat;
            break;
        }
        if (dim_is(xt->dims[i], 1)) {
            xi[i] = lit("0");
            continue;
        }
        V d = kdim(k, xt->dims[i]);
        xi[i] = let(k, IX(k), "%s %% %s", flat.s, d.s);
        flat = let(k, IX(k), "%s / %s", flat.s, d.s);
    }
}

/* One element of a dot (disc's GEMM in its simplest form: a thread per
 * result element, a loop over the contracted index space). The result is
 * [batch dims, lhs free dims, rhs free dims] (infer.c); floats accumulate
 * in f32 (f64 for f64), integers in uint64 and wrap, as the interpreter. */
static V dot_elem(Gk *k, const Op *op, V *idx)
{
    const Attr *lb = op_attr(op, "lhs_batch"), *rb = op_attr(op, "rhs_batch");
    const Attr *lc = op_attr(op, "lhs_contract"), *rc = op_attr(op, "rhs_contract");
    Value *a = op->in[0], *b = op->in[1];
    const Type *at = &a->type, *bt = &b->type;
    DType dt = at->dtype;
    const char *acc_t = is_f(dt) ? ctype(dt) : "uint64_t";
    V ai[MAX_RANK], bi[MAX_RANK];
    int n = 0;
    for (int i = 0; i < lb->n; i++, n++) {
        ai[lb->ints[i]] = idx[n];
        bi[rb->ints[i]] = idx[n];
    }
    bool role[MAX_RANK];
    for (int s = 0; s < 2; s++) {
        const Type *t = s ? bt : at;
        const Attr *bl = s ? rb : lb, *cl = s ? rc : lc;
        memset(role, 0, sizeof role);
        for (int i = 0; i < bl->n; i++)
            role[bl->ints[i]] = true;
        for (int i = 0; i < cl->n; i++)
            role[cl->ints[i]] = true;
        for (int i = 0; i < t->rank; i++)
            if (!role[i])
                (s ? bi : ai)[i] = idx[n++];
    }
    Dim *kd = dim_const(&k->cg->g->dims, 1);
    for (int i = 0; i < lc->n; i++)
        kd = dim_mul(&k->cg->g->dims, kd, at->dims[lc->ints[i]]);
    V acc = let(k, acc_t, "0");
    int j = k->nv++;
    line(k, "for (%s v%d = 0; v%d < %s; v%d++) {", IX(k), j, j, kdim(k, kd).s, j);
    k->ind++;
    V flat = lit("v%d", j);
    for (int i = lc->n - 1; i >= 0; i--) { /* the contracted index, split over both operands' dims */
        Dim *d = at->dims[lc->ints[i]];
        V c;
        if (i == 0) {
            c = flat;
        } else if (dim_is(d, 1)) {
            c = lit("0");
        } else {
            V dv = kdim(k, d);
            c = let(k, IX(k), "%s %% %s", flat.s, dv.s);
            flat = let(k, IX(k), "%s / %s", flat.s, dv.s);
        }
        ai[lc->ints[i]] = c;
        bi[rc->ints[i]] = c;
    }
    V x = gelem(k, a, ai), y = gelem(k, b, bi);
    if (is_f(dt))
        line(k, "%s += %s * %s;", acc.s, x.s, y.s);
    else
        line(k, "%s += (uint64_t)(int64_t)%s * (uint64_t)(int64_t)%s;", acc.s, x.s, y.s);
    k->ind--;
    line(k, "}");
    return is_f(dt) ? acc : let(k, ctype(dt), "(%s)%s", ctype(dt), acc.s);
}

/* Splits flat over the constant-or-symbolic dims d[0..n) into out. */
static void split_dims(Gk *k, Dim **d, int n, V flat, V *out)
{
    for (int i = n - 1; i >= 0; i--) {
        if (i == 0) {
            out[0] = flat;
        } else if (dim_is(d[i], 1)) {
            out[i] = lit("0");
        } else {
            V dv = kdim(k, d[i]);
            out[i] = let(k, IX(k), "%s %% %s", flat.s, dv.s);
            flat = let(k, IX(k), "%s / %s", flat.s, dv.s);
        }
    }
}

/* An index in [N, C, S...] order as the index of a tensor of that rank
 * stored [N, S..., C] when last (xi is rewritten in place). */
static V *channels_at(V *xi, int rank, bool last)
{
    if (!last)
        return xi;
    V c = xi[1];
    for (int i = 1; i < rank - 1; i++)
        xi[i] = xi[i + 1];
    xi[rank - 1] = c;
    return xi;
}

/* One element of a conv, conv_transpose or pool: a thread per result
 * element, loops over the window's taps (and the group's channels), as
 * the interpreter computes it (runtime/interp_lib.c): a tap outside the
 * input reads nothing. */
static V window_elem(Gk *k, const Op *op, V *oidx)
{
    DimCtx *cx = &k->cg->g->dims;
    Value *x = op->in[0];
    const Type *xt = &x->type;
    DType dt = xt->dtype;
    const char *t = ctype(dt);
    int nsp = xt->rank - 2;
    /* channels_last (doc/ops.md): 1 reads [N, S..., C] and writes [N, S..., O],
     * 2 reads [N, C, S...]; below, idx and xi are in [N, C, S...] order */
    int64_t cl = op->kind == OP_CONV_TRANSPOSE ? 0 : op_attr_int(op, "channels_last", 0);
    int xs = cl == 1 ? 1 : 2;
    V idx[MAX_RANK];
    idx[0] = oidx[0];
    idx[1] = oidx[cl ? xt->rank - 1 : 1];
    for (int i = 0; i < nsp; i++)
        idx[2 + i] = oidx[(cl ? 1 : 2) + i];
    const Attr *st = op_attr(op, "strides"), *dl = op_attr(op, "dilations"), *pads = op_attr(op, "pads");
    bool pool = op->kind == OP_POOL, tr = op->kind == OP_CONV_TRANSPOSE;
    Dim *kd[MAX_RANK], *taps = dim_const(cx, 1);
    for (int i = 0; i < nsp; i++) {
        kd[i] = pool ? dim_const(cx, op_attr(op, "window")->ints[i]) : op->in[1]->type.dims[2 + i];
        taps = dim_mul(cx, taps, kd[i]);
    }
    bool is_max = pool && !strcmp(op_attr_str(op, "kind", "max"), "max");
    bool count_pad = pool && op_attr_int(op, "count_pad", 0);
    V acc = let(k, is_f(dt) || !is_max ? t : "int64_t", "%s", is_max && is_f(dt) ? "(-DISC_INF)" : "0");
    V any = let(k, "bool", "false"), count = let(k, "int64_t", "0");
    int kf = k->nv++;
    line(k, "for (%s v%d = 0; v%d < %s; v%d++) {", IX(k), kf, kf, kdim(k, taps).s, kf);
    k->ind++;
    V ks[MAX_RANK], pos[MAX_RANK];
    split_dims(k, kd, nsp, lit("v%d", kf), ks);
    V inside = lit("true"), padded = lit("true");
    for (int i = 0; i < nsp; i++) {
        V pb = kdim(k, pads->dims[i]), n = kdim(k, xt->dims[xs + i]);
        long long s = (long long)st->ints[i], dil = (long long)dl->ints[i];
        if (!tr) {
            pos[i] = let(k, IX(k), "%s * %lld - %s + %s * %lld", idx[2 + i].s, s, pb.s, ks[i].s, dil);
            inside = let(k, "bool", "%s && %s >= 0 && %s < %s", inside.s, pos[i].s, pos[i].s, n.s);
            if (count_pad) {
                V pe = kdim(k, pads->dims[nsp + i]);
                padded = let(k, "bool", "%s && %s < %s + %s", padded.s, pos[i].s, n.s, pe.s);
            }
        } else { /* the input position whose tap lands here, if one does */
            V num = let(k, IX(k), "%s + %s - %s * %lld", idx[2 + i].s, pb.s, ks[i].s, dil);
            pos[i] = let(k, IX(k), "%s / %lld", num.s, s);
            inside = let(k, "bool", "%s && %s >= 0 && %s %% %lld == 0 && %s < %s", inside.s, num.s, num.s, s,
                         pos[i].s, n.s);
        }
    }
    if (count_pad) /* a tap on an explicit pad counts, one that a ceil-mode
                    * window puts past the end pad does not (interp_pool) */
        line(k, "if (%s) %s++;", padded.s, count.s);
    line(k, "if (%s) {", inside.s);
    k->ind++;
    V xi[MAX_RANK], wi[MAX_RANK];
    for (int i = 0; i < nsp; i++)
        xi[2 + i] = wi[2 + i] = pos[i];
    xi[0] = idx[0];
    if (pool) {
        xi[1] = idx[1];
        V v = gelem(k, x, channels_at(xi, xt->rank, cl == 1));
        if (!is_max)
            line(k, "%s += %s;", acc.s, v.s);
        else if (is_f(dt))
            line(k, "%s = %s != %s || %s != %s ? DISC_NAN : %s > %s ? %s : %s;", acc.s, acc.s, acc.s, v.s, v.s, v.s,
                 acc.s, v.s, acc.s);
        else
            line(k, "%s = !%s || (int64_t)%s > %s ? (int64_t)%s : %s;", acc.s, any.s, v.s, acc.s, v.s, acc.s);
        line(k, "%s = true;", any.s);
        if (!count_pad)
            line(k, "%s++;", count.s);
    } else {
        const Type *wt = &op->in[1]->type;
        int64_t g = op_attr_int(op, "groups", 1);
        /* conv: w [O, C/g, k...]; conv_transpose: w [C, O/g, k...] */
        Dim *cg = tr ? dim_floordiv(cx, xt->dims[1], dim_const(cx, g)) : wt->dims[1];
        Dim *og = tr ? wt->dims[1] : dim_floordiv(cx, wt->dims[0], dim_const(cx, g));
        V grp = let(k, IX(k), "%s / %s", idx[1].s, kdim(k, og).s);
        int c = k->nv++;
        line(k, "for (%s v%d = 0; v%d < %s; v%d++) {", IX(k), c, c, kdim(k, cg).s, c);
        k->ind++;
        xi[1] = let(k, IX(k), "%s * %s + v%d", grp.s, kdim(k, cg).s, c);
        if (tr) {
            wi[0] = xi[1];
            wi[1] = let(k, IX(k), "%s - %s * %s", idx[1].s, grp.s, kdim(k, og).s);
        } else {
            wi[0] = idx[1];
            wi[1] = lit("v%d", c);
        }
        for (int i = 0; i < nsp; i++)
            wi[2 + i] = ks[i];
        V a = gelem(k, x, channels_at(xi, xt->rank, cl == 1)), b = gelem(k, op->in[1], wi);
        line(k, "%s += %s * %s;", acc.s, a.s, b.s);
        k->ind--;
        line(k, "}");
    }
    k->ind--;
    line(k, "}");
    k->ind--;
    line(k, "}");
    if (pool && !is_max)
        return let(k, t, "%s / (%s)%s", acc.s, t, count.s);
    if (pool && is_max && !is_f(dt)) { /* a window with no tap inside: the interpreter's value */
        const char *none = dt == DT_U8 || dt == DT_BOOL ? "0" : dt == DT_I8 ? "(-128)" : dt == DT_I32
                         ? "(-2147483647 - 1)" : "(-9223372036854775807ll - 1)";
        return let(k, t, "(%s)(%s ? %s : %s)", t, any.s, acc.s, none);
    }
    return acc;
}

/* One element of v = op(...) at idx; false where the GPU path has no
 * code for op (or not for its dtype). */
static bool op_elem(Gk *k, Op *op, Value *v, V *idx, V *out)
{
    const Type *rt = &v->type;
    const OpInfo *info = op_info(op->kind);
    V xi[MAX_RANK];
    DType dt = rt->dtype;
    if (info->cat == CAT_UNARY) {
        V x = operand(k, op->in[0], rt, idx);
        return apply(k, &cu_unary[op_unary(op->kind)], op->in[0]->type.dtype, dt, x, x, out);
    }
    if (info->cat == CAT_BINARY) {
        V a = operand(k, op->in[0], rt, idx), b = operand(k, op->in[1], rt, idx);
        return apply(k, &cu_binary[op_binary(op->kind)], dt, dt, a, b, out);
    }
    switch (op->kind) {
    case OP_CMP: {
        V a = operand(k, op->in[0], rt, idx), b = operand(k, op->in[1], rt, idx);
        *out = let(k, "bool", "%s %s %s", a.s, cmp_op(op_attr_str(op, "dir", "eq")), b.s);
        return true;
    }
    case OP_SELECT: {
        V c = operand(k, op->in[0], rt, idx);
        V a = operand(k, op->in[1], rt, idx), b = operand(k, op->in[2], rt, idx);
        *out = let(k, ctype(dt), "%s ? %s : %s", c.s, a.s, b.s);
        return true;
    }
    case OP_CONVERT:
        *out = convert(k, operand(k, op->in[0], rt, idx), op->in[0]->type.dtype, dt);
        return true;
    case OP_CONST: {
        bool ok = true;
        *out = const_elem(k, op, idx, &ok);
        return ok;
    }
    case OP_RESHAPE:
    case OP_DYN_RESHAPE:
        if (k->flat) {
            *out = gelem(k, op->in[0], idx);
            return true;
        }
        reshape_index(k, &op->in[0]->type, rt, idx, xi);
        *out = gelem(k, op->in[0], xi);
        return true;
    case OP_BROADCAST:
    case OP_DYN_BROADCAST: {
        const Attr *axes = op_attr(op, "axes");
        const Type *xt = &op->in[0]->type;
        for (int i = 0; i < xt->rank; i++)
            xi[i] = select_dim(k, xt->dims[i], rt->dims[axes->ints[i]], idx[axes->ints[i]]);
        *out = gelem(k, op->in[0], xi);
        return true;
    }
    case OP_TRANSPOSE: {
        const Attr *perm = op_attr(op, "perm");
        for (int i = 0; i < perm->n; i++)
            xi[perm->ints[i]] = idx[i];
        *out = gelem(k, op->in[0], xi);
        return true;
    }
    case OP_SLICE: {
        const Attr *st = op_attr(op, "start"), *sd = op_attr(op, "stride");
        for (int i = 0; i < rt->rank; i++) {
            V j = sd->ints[i] == 1 ? idx[i] : let(k, IX(k), "%s * %s", idx[i].s, kconst(sd->ints[i]).s);
            xi[i] = dim_is(st->dims[i], 0) ? j : let(k, IX(k), "%s + %s", j.s, kdim(k, st->dims[i]).s);
        }
        *out = gelem(k, op->in[0], xi);
        return true;
    }
    case OP_REVERSE: {
        const Attr *axes = op_attr(op, "axes");
        memcpy(xi, idx, (size_t)rt->rank * sizeof *xi);
        for (int i = 0; i < axes->n; i++) {
            int a = (int)axes->ints[i];
            xi[a] = let(k, IX(k), "%s - 1 - %s", kdim(k, rt->dims[a]).s, idx[a].s);
        }
        *out = gelem(k, op->in[0], xi);
        return true;
    }
    case OP_CONCAT: {
        /* an if-chain, not a select: an operand is read only where the
         * index is inside it (one of extent 0 is never read) */
        int axis = (int)op_attr_int(op, "axis", 0);
        V end[op->nin + 1];
        for (int i = 0; i < op->nin - 1; i++) { /* where operand i ends */
            V n = kdim(k, op->in[i]->type.dims[axis]);
            end[i] = i == 0 ? n : let(k, IX(k), "%s + %s", end[i - 1].s, n.s);
        }
        int r = k->nv++;
        line(k, "%s v%d;", ctype(dt), r);
        for (int i = 0; i < op->nin; i++) {
            if (i == op->nin - 1)
                line(k, i ? "} else {" : "{");
            else
                line(k, "%sif (%s < %s) {", i ? "} else " : "", idx[axis].s, end[i].s);
            k->ind++;
            memcpy(xi, idx, (size_t)rt->rank * sizeof *xi);
            if (i > 0)
                xi[axis] = let(k, IX(k), "%s - %s", idx[axis].s, end[i - 1].s);
            line(k, "v%d = %s;", r, gelem(k, op->in[i], xi).s);
            k->ind--;
        }
        line(k, "}");
        *out = lit("v%d", r);
        return true;
    }
    case OP_PAD: {
        const Attr *lo = op_attr(op, "low");
        const char *mode = op_attr_str(op, "mode", "constant");
        const Type *xt = &op->in[0]->type;
        V inside = lit("true");
        for (int i = 0; i < rt->rank; i++) {
            V n = kdim(k, xt->dims[i]);
            V j = let(k, IX(k), "%s - %s", idx[i].s, kdim(k, lo->dims[i]).s);
            inside = let(k, "bool", "%s && %s >= 0 && %s < %s", inside.s, j.s, j.s, n.s);
            if (!strcmp(mode, "reflect")) { /* mirror without repeating the edge: period 2(n-1) */
                V p1 = let(k, IX(k), "disc_max64(1, 2 * (%s - 1))", n.s);
                V m = let(k, IX(k), "%s - %s * disc_floordiv(%s, %s)", j.s, p1.s, j.s, p1.s);
                j = let(k, IX(k), "%s >= %s ? %s - %s : %s", m.s, n.s, p1.s, m.s, m.s);
            } else if (!strcmp(mode, "wrap")) { /* periodic: floor-mod by n */
                V n1 = let(k, IX(k), "disc_max64(1, %s)", n.s);
                j = let(k, IX(k), "%s - %s * disc_floordiv(%s, %s)", j.s, n1.s, j.s, n1.s);
            }
            xi[i] = clamp(k, j, n);
        }
        if (strcmp(mode, "constant") != 0) {
            *out = gelem(k, op->in[0], xi);
            return true;
        }
        /* the operand is read only inside it (it may have no elements) */
        V pv = gelem(k, op->in[1], NULL);
        int r = k->nv++;
        line(k, "%s v%d = %s;", ctype(dt), r, pv.s);
        line(k, "if (%s) {", inside.s);
        k->ind++;
        line(k, "v%d = %s;", r, gelem(k, op->in[0], xi).s);
        k->ind--;
        line(k, "}");
        *out = lit("v%d", r);
        return true;
    }
    case OP_IOTA:
        *out = convert(k, idx[op_attr_int(op, "axis", 0)], DT_I64, dt);
        return true;
    case OP_RESIZE:
        if (!resize_is_map(op)) {
            *out = resize_lerp(k, op, idx);
            return true;
        }
        for (int i = 0; i < rt->rank; i++) /* nearest, integer scales; as elem.c's resize_source */
            xi[i] = resize_source(k, op, i, idx[i]);
        *out = gelem(k, op->in[0], xi);
        return true;
    case OP_DOT:
        *out = dot_elem(k, op, idx);
        return true;
    case OP_CONV:
    case OP_CONV_TRANSPOSE:
    case OP_POOL:
        *out = window_elem(k, op, idx);
        return true;
    case OP_GATHER: {
        int axis = (int)op_attr_int(op, "axis", 0);
        Value *x = op->in[0], *ind = op->in[1];
        int q = ind->type.rank;
        V ii[MAX_RANK];
        for (int i = 0; i < q; i++)
            ii[i] = idx[axis + i];
        V j = index_value(k, gelem(k, ind, ii), ind->type.dtype, x->type.dims[axis]);
        int n = 0;
        for (int i = 0; i < axis; i++)
            xi[n++] = idx[i];
        xi[n++] = j;
        for (int i = axis + q; i < rt->rank; i++)
            xi[n++] = idx[i];
        *out = gelem(k, x, xi);
        return true;
    }
    case OP_GATHER_ELEMENTS: {
        int axis = (int)op_attr_int(op, "axis", 0);
        Value *x = op->in[0], *ind = op->in[1];
        V j = index_value(k, gelem(k, ind, idx), ind->type.dtype, x->type.dims[axis]);
        memcpy(xi, idx, (size_t)rt->rank * sizeof *xi);
        xi[axis] = j;
        *out = gelem(k, x, xi);
        return true;
    }
    case OP_SHAPE_CONST: {
        const Attr *dims = op_attr(op, "dims");
        V vals[MAX_RANK * 4];
        int n = dims->n < MAX_RANK * 4 ? dims->n : MAX_RANK * 4;
        for (int i = 0; i < n; i++)
            vals[i] = kdim(k, dims->dims[i]);
        *out = rt->rank == 0 ? vals[0] : pick(k, vals, n, idx[0]);
        return true;
    }
    case OP_DIM:
        *out = kdim(k, op->in[0]->type.dims[op_attr_int(op, "axis", 0)]);
        return true;
    case OP_SHAPE_OF: {
        const Type *xt = &op->in[0]->type;
        V vals[MAX_RANK];
        for (int i = 0; i < xt->rank; i++)
            vals[i] = kdim(k, xt->dims[i]);
        *out = pick(k, vals, xt->rank, idx[0]);
        return true;
    }
    default:
        return false;
    }
}

static V kept_elem(Gk *k, Value *x, V *idx);

/* Whether a and b are the same index of rank n. */
static bool same_idx(const V *a, const V *b, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(a[i].s, b[i].s))
            return false;
    return true;
}

/* Row element idx of v in a row variant's vector form, where idx's last
 * index is the position being written and v's last dim is the row's
 * length: the lane's component of the vector of four at the same outer
 * index and the first position (aligned: every outer stride is a multiple
 * of the row's length, which the variant's guard tests is a multiple of
 * 4, as it tests the buffer's alignment), loaded once an iteration. */
static V row_vec_load(Gk *k, int b, Value *v, V *idx)
{
    int r = v->type.rank;
    char key[200];
    size_t n = (size_t)snprintf(key, sizeof key, "%d", b);
    for (int i = 0; i < r - 1 && n < sizeof key; i++)
        n += (size_t)snprintf(key + n, sizeof key - n, ",%s", idx[i].s);
    V vec = {{0}};
    for (int i = 0; i < k->nrvl; i++)
        if (k->rvl[i].b == b && !strcmp(k->rvl[i].key, key))
            vec = k->rvl[i].v;
    if (!vec.s[0]) {
        V at[MAX_RANK];
        memcpy(at, idx, (size_t)r * sizeof *at);
        at[r - 1] = k->rbase;
        V off = offset(k, &v->type, at);
        V nv = kdim(k, type_numel(&k->cg->g->dims, &v->type));
        const char *vt = vtype(v->type.dtype);
        vec = let(k, vt, "DISC_V4(const %s, b%d, (%s) / 4, %s)", vt, b, off.s, nv.s);
        k->rvbufs |= 1u << b;
        if (k->nrvl < (int)(sizeof k->rvl / sizeof k->rvl[0])) {
            k->rvl[k->nrvl].b = b;
            snprintf(k->rvl[k->nrvl].key, sizeof k->rvl[k->nrvl].key, "%s", key);
            k->rvl[k->nrvl++].v = vec;
        }
    }
    char a[120];
    snprintf(a, sizeof a, "%s.%s", vec.s, vcomp[k->rlane]);
    return stored(k, v->type.dtype, a);
}

static V gelem(Gk *k, Value *v, V *idx)
{
    Cg *cg = k->cg;
    for (int i = 0; i < k->nr; i++)
        if (k->rv[i] == v)
            return k->rval[i];
    if (v == k->cache_v && k->cache_idx && idx && same_idx(idx, k->cache_idx, v->type.rank))
        return kept_elem(k, v, idx);
    if (in_group(k, v)) {
        V r;
        if (op_elem(k, v->def, v, idx, &r))
            return r;
        if (!cg->d->set) {
            char what[160];
            snprintf(what, sizeof what, "%s on %s in a loop kernel", op_info(v->def->kind)->name,
                     dtype_name(v->def->nin ? v->def->in[0]->type.dtype : v->type.dtype));
            unsupported(cg, v->def, what);
        }
        return lit("0");
    }
    V c;
    if (v->def && v->def->kind == OP_CONST && const_lit(v->def, &c))
        return c;
    int b = buf_of(k, v);
    if (b < 0) {
        if (!cg->d->set)
            diag_setk(cg->d, DIAG_INTERNAL, "codegen: a value has no buffer in its kernel");
        return lit("0");
    }
    size_t n = 0;
    if (k->rvec && !k->rvoff && v->type.rank > 0 && !strcmp(idx[v->type.rank - 1].s, k->rpos.s) &&
        v->type.dims[v->type.rank - 1] == k->rm && vtype(v->type.dtype) && dtype_size(v->type.dtype) <= 4 && b < 32)
        return row_vec_load(k, b, v, idx);
    V off = type_static_numel(&v->type, &n) && n == 1 ? lit("0") : k->flat ? k->fi : offset(k, &v->type, idx);
    return load(k, b, off);
}

/* An output of a group at an element of its index space (dims of t, at
 * idx, flat position flat): at idx where it has those dims, else (a
 * reshape of the same element count) at flat unflattened into its own
 * dims, through oidx. */
static V out_elem(Gk *k, Value *out, const Type *t, V *idx, V flat, V *oidx)
{
    if (type_same_dims(&out->type, t))
        return gelem(k, out, idx);
    unflatten(k, &out->type, flat, oidx);
    return gelem(k, out, oidx);
}

/* ---- the loop template ------------------------------------------------------------ */

static void loop_body(Gk *k, const Type *rt, Dim *numel, bool flat)
{
    const Group *grp = k->grp;
    if (rt->rank == 0) {
        line(k, "if (DISC_TID == 0) {");
        k->ind++;
        V idx[1];
        for (int o = 0; o < grp->nouts; o++)
            store(k, buf_of(k, grp->outs[o]), lit("0"), gelem(k, grp->outs[o], idx));
        k->ind--;
        line(k, "}");
        return;
    }
    V n = kdim(k, numel);
    int iv = k->nv++;
    line(k, "for (%s v%d = DISC_TID; v%d < %s; v%d += DISC_NTHREADS) {", IX(k), iv, iv, n.s, iv);
    k->ind++;
    V i = lit("v%d", iv);
    if (flat) {
        k->flat = true;
        k->fi = i;
        for (int o = 0; o < grp->nouts; o++)
            store(k, buf_of(k, grp->outs[o]), i, gelem(k, grp->outs[o], NULL));
        k->flat = false;
    } else {
        V idx[MAX_RANK], oidx[MAX_RANK];
        unflatten(k, rt, i, idx);
        for (int o = 0; o < grp->nouts; o++) {
            Value *out = grp->outs[o];
            store(k, buf_of(k, out), i, out_elem(k, out, rt, idx, i, oidx));
        }
    }
    k->ind--;
    line(k, "}");
}

/* The index-map loop with LOOP_ILP elements a thread an iteration, each
 * LOOP_ILP-th of the grid's stride apart (every access still coalesced
 * across the warp): all of them computed, loads first, then stored, so a
 * thread has that many loads in flight where the plain loop has one (its
 * buffers are __restrict__). The launch has a quarter of the blocks. For
 * kernels of a few outputs and ops, so registers stay few. */
enum { LOOP_ILP = 4, LOOP_ILP_OPS = 24, LOOP_ILP_OUTS = 2 };

static bool loop_ilp_ok(const Gk *k, const Type *rt)
{
    return rt->rank > 0 && k->grp->nouts <= LOOP_ILP_OUTS && k->grp->nops <= LOOP_ILP_OPS;
}

static void loop_ilp(Gk *k, const Type *rt, Dim *numel)
{
    const Group *grp = k->grp;
    V n = kdim(k, numel);
    int iv = k->nv++;
    line(k, "for (%s v%d = DISC_TID; v%d < %s; v%d += %d * DISC_NTHREADS) { /* %d elements a thread */", IX(k), iv,
         iv, n.s, iv, LOOP_ILP, LOOP_ILP);
    k->ind++;
    V at[LOOP_ILP], r[LOOP_ILP][LOOP_ILP_OUTS];
    for (int u = 0; u < LOOP_ILP; u++) {
        at[u] = u ? let(k, IX(k), "v%d + %d * (%s)DISC_NTHREADS", iv, u, IX(k)) : lit("v%d", iv);
        for (int o = 0; o < grp->nouts; o++)
            r[u][o] = let(k, ctype(grp->outs[o]->type.dtype), "0");
    }
    for (int u = 0; u < LOOP_ILP; u++) {
        if (u) {
            line(k, "if (%s < %s) {", at[u].s, n.s);
            k->ind++;
        }
        V idx[MAX_RANK], oidx[MAX_RANK];
        unflatten(k, rt, at[u], idx);
        for (int o = 0; o < grp->nouts; o++)
            line(k, "%s = %s;", r[u][o].s, out_elem(k, grp->outs[o], rt, idx, at[u], oidx).s);
        if (u) {
            k->ind--;
            line(k, "}");
        }
    }
    for (int u = 0; u < LOOP_ILP; u++) {
        if (u) {
            line(k, "if (%s < %s) {", at[u].s, n.s);
            k->ind++;
        }
        for (int o = 0; o < grp->nouts; o++)
            store(k, buf_of(k, grp->outs[o]), at[u], r[u][o]);
        if (u) {
            k->ind--;
            line(k, "}");
        }
    }
    k->ind--;
    line(k, "}");
}

/* The vectorised loop (flat groups: every value at the flat index): a
 * thread takes four elements, each buffer read and written as one vector
 * (float4 for f32, ushort4 for f16, ...), under a guard the kernel tests
 * once: the element count divisible by 4 (left out where shape analysis
 * proves it) and every such buffer aligned to its vector's size; else the
 * scalar loop. Not emitted where the count is proved not divisible, or a
 * buffer's elements take 8 bytes. */
static bool loop_vec_ok(Gk *k, Dim *numel, bool *divisible)
{
    DimCtx *cx = &k->cg->g->dims;
    Dim *r = dim_mod(cx, numel, dim_const(cx, 4));
    if (!r || (dim_is_const(r) && r->c != 0) || (dim_is_const(numel) && numel->c < 4))
        return false;
    *divisible = dim_is(r, 0);
    for (int b = 0; b < k->nb; b++)
        if (type_numel(cx, &k->bv[b]->type) == numel && !vtype(k->bv[b]->type.dtype))
            return false;
    return true;
}

static void loop_vec(Gk *k, Dim *numel, bool divisible)
{
    const Group *grp = k->grp;
    DimCtx *cx = &k->cg->g->dims;
    V n = kdim(k, numel);
    char guard[1024] = "";
    size_t gn = 0;
    if (!divisible)
        gn = (size_t)snprintf(guard, sizeof guard, "%s %% 4 == 0", n.s);
    for (int b = 0; b < k->nb && gn < sizeof guard; b++)
        if (type_numel(cx, &k->bv[b]->type) == numel)
            gn += (size_t)snprintf(guard + gn, sizeof guard - gn, "%s((unsigned long long)b%d & %d) == 0",
                                   gn ? " && " : "", b, 4 * (int)dtype_size(k->bv[b]->type.dtype) - 1);
    line(k, "if (%s) { /* four elements a thread */", guard);
    k->ind++;
    V n4 = kdim(k, dim_floordiv(cx, numel, dim_const(cx, 4)));
    int iv = k->nv++;
    line(k, "for (int64_t v%d = DISC_TID; v%d < %s; v%d += DISC_NTHREADS) {", iv, iv, n4.s, iv);
    k->ind++;
    V vload[k->nb + 1];
    memset(vload, 0, sizeof vload);
    k->vec = k->flat = true;
    k->vi = lit("v%d", iv);
    k->fi = lit("(4 * v%d)", iv); /* a marker: load() reads the lane's component */
    k->vload = vload;
    V val[grp->nouts + 1][4];
    for (int l = 0; l < 4; l++) {
        k->vlane = l;
        for (int o = 0; o < grp->nouts; o++)
            val[o][l] = gelem(k, grp->outs[o], NULL);
    }
    k->vec = k->flat = false;
    for (int o = 0; o < grp->nouts; o++) {
        int b = buf_of(k, grp->outs[o]);
        DType dt = grp->outs[o]->type.dtype;
        const char *vt = vtype(dt);
        int r = k->nv++;
        line(k, "%s v%d;", vt, r);
        for (int l = 0; l < 4; l++) {
            const char *x = val[o][l].s;
            if (dt == DT_F16)
                line(k, "v%d.%s = disc_f2h(%s);", r, vcomp[l], x);
            else if (dt == DT_BF16)
                line(k, "v%d.%s = disc_f2bf(%s);", r, vcomp[l], x);
            else if (dt == DT_BOOL)
                line(k, "v%d.%s = (uint8_t)%s;", r, vcomp[l], x);
            else
                line(k, "v%d.%s = %s;", r, vcomp[l], x);
        }
        line(k, "DISC_V4(%s, b%d, v%d, %s) = v%d;", vt, b, iv, n.s, r);
    }
    k->ind--;
    line(k, "}");
    k->ind--;
    line(k, "} else {");
    k->ind++;
}

/* ---- the row-reduction template ------------------------------------------------ *
 *
 * INPUT and STITCH groups (kernel.c's row plan), in two variants the host
 * flow chooses between at run time from the row's length m (the kernel's
 * last parameter, var, bit 0): a warp per row where m <= GPU_WARP_ROW_MAX
 * (GPU_BLOCK / DISC_WARP rows a block), a block per row beyond; either
 * strides over the rows when the grid is smaller. Each reduction of the
 * group, in order, is a strided pass of the row's threads over its reduced
 * index space, each thread accumulating its own elements in order, then a
 * butterfly of shuffles over each warp's lanes (every lane ends with the
 * warp's result); in the block variant lane 0 of each warp leaves that in
 * __shared__ partials and, after a barrier, every thread combines them in
 * warp order (one more barrier before the partials are written again).
 * The result is a row value the later work reads. Row-shaped outputs are
 * stored by the row's first thread, full-shaped ones in a last strided
 * pass. Argmax and argmin carry the index (and whether a thread saw any
 * element) and combine as the interpreter's scan would: the first (or
 * with `last` the last) of equal values, and a NaN wins; that rule is
 * symmetric, so both lanes of a butterfly step get the same pair.
 *
 * Where the first reduction's input is read again (a stitch group:
 * softmax, LayerNorm, RMSNorm), its pass keeps each element in the row's
 * place in dynamic shared memory, where the later passes read it (each
 * thread reads back the positions it wrote, so no barrier is needed);
 * where a block's rows do not fit in GPU_DYN_SHARED_MAX bytes, the host
 * flow sets var's bit 1 and gives no shared memory, and the later passes
 * compute the element again from global memory. Variants that shape
 * analysis rules out for every warp size (a constant row length) are not
 * emitted, and a kernel with a single variant has no var. */

/* The combining op of a reduce: bool sums are ors, products ands. */
static BinaryOp reduce_bin(const Op *op, DType dt)
{
    const char *kind = op_attr_str(op, "kind", "sum");
    BinaryOp b = !strcmp(kind, "max") ? BIN_MAX : !strcmp(kind, "min") ? BIN_MIN : !strcmp(kind, "prod") ? BIN_MUL
               : BIN_ADD;
    if (dt == DT_BOOL)
        b = b == BIN_ADD || b == BIN_MAX ? BIN_OR : BIN_AND;
    return b;
}

/* The accumulator's start: the identity of the combining op. */
static V acc_init(const Op *op, DType dt)
{
    const char *kind = op->kind == OP_REDUCE ? op_attr_str(op, "kind", "sum") : "arg";
    if (!strcmp(kind, "sum") || !strcmp(kind, "mean"))
        return lit(dt == DT_BOOL ? "false" : "0");
    if (!strcmp(kind, "prod"))
        return lit(dt == DT_BOOL ? "true" : "1");
    bool is_max = !strcmp(kind, "max") || op->kind == OP_ARGMAX;
    if (is_f(dt))
        return lit(is_max ? "(-DISC_INF)" : "DISC_INF");
    if (dt == DT_BOOL)
        return lit(is_max ? "false" : "true");
    int bits = 8 * (int)dtype_size(dt);
    if (is_u(dt))
        return is_max ? lit("0") : lit("(%s)%lluull", ctype(dt), bits == 64 ? ~0ull : (1ull << bits) - 1);
    long long mn = bits == 64 ? INT64_MIN : -(1ll << (bits - 1));
    return is_max ? lit("(%s)(%lldll - 1)", ctype(dt), mn + 1) : lit("(%s)%lldll", ctype(dt), -(mn + 1));
}

/* Whether b (at index ib) replaces a (at ia) in an argmax or argmin:
 * the scan's rule over two partial results. */
static V arg_take(Gk *k, const Op *op, DType dt, V a, V ia, V b, V ib)
{
    bool last = op_attr_int(op, "last", 0);
    const char *cmp = op->kind == OP_ARGMAX ? ">" : "<";
    V tie = let(k, "bool", "%s %s %s", ib.s, last ? ">" : "<", ia.s);
    if (is_f(dt))
        return let(k, "bool", "(%s != %s) ? (%s != %s && %s) : (%s != %s || %s %s %s || (%s == %s && %s))", a.s, a.s,
                   b.s, b.s, tie.s, b.s, b.s, b.s, cmp, a.s, b.s, a.s, tie.s);
    return let(k, "bool", "%s %s %s || (%s == %s && %s)", b.s, cmp, a.s, b.s, a.s, tie.s);
}

/* Splits flat over the listed axes of t into idx (at those axes). */
static void split_axes(Gk *k, const Type *t, const int *axes, int n, V flat, V *idx)
{
    for (int i = n - 1; i >= 0; i--) {
        Dim *d = t->dims[axes[i]];
        if (i == 0) {
            idx[axes[0]] = flat;
        } else if (dim_is(d, 1)) {
            idx[axes[i]] = lit("0");
        } else {
            V dv = kdim(k, d);
            idx[axes[i]] = let(k, "int64_t", "%s %% %s", flat.s, dv.s);
            flat = let(k, "int64_t", "%s / %s", flat.s, dv.s);
        }
    }
}

static Dim *prod_axes(DimCtx *cx, const Type *t, const int *axes, int n)
{
    Dim *p = dim_const(cx, 1);
    for (int i = 0; i < n; i++)
        p = dim_mul(cx, p, t->dims[axes[i]]);
    return p;
}

/* Column stitch groups (fuse_columns): in the row plan a block takes one
 * column, and a row value stands for the reduction's result at that
 * column only. As kernel.c's column template does (col_reads_at), the group
 * is taken only if every read of a reduction's result is at the result's
 * own kept axes; a read off its column (static dims that happen to be
 * equal) is refused, and the flow splits the group up. */
static bool columns_ok(Gk *k, const Type *xt, const int *kax, int nk, Dim *p)
{
    const Group *grp = k->grp;
    ColReads c = {grp, xt, kax, nk, 1 << 16};
    int id[MAX_RANK], map[MAX_RANK];
    for (int i = 0; i < xt->rank; i++)
        id[i] = i;
    for (int i = 0; i < grp->nops; i++)
        if (kern_is_reduction(grp->ops[i]) && !col_reads_at(&c, grp->ops[i]->in[0], id))
            return false;
    for (int o = 0; o < grp->nouts; o++) {
        Value *ov = grp->outs[o];
        bool row = type_numel(&k->cg->g->dims, &ov->type) == p;
        if (row ? !col_row_map(&c, &ov->type, map) || !col_reads_at(&c, ov, map)
                : type_same_dims(&ov->type, xt) ? !col_reads_at(&c, ov, id) : col_reads_reduction(&c, ov))
            return false;
    }
    return true;
}

/* How a variant's threads share the rows (kept indices): a warp or a
 * block per row, or (the kept axes innermost: columns) a tile of 32
 * columns a block, whole or split over the reduced axis. */
typedef enum RowKind { ROWS_WARP, ROWS_BLOCK, COLS_TILE, COLS_SPLIT } RowKind;

typedef struct Rows {
    RowKind kind;
    V t, nt;           /* this thread's place among the row's threads, their number */
    V j0, jend;        /* the part of the row this thread's passes take: [j0 + t, jend) */
    V live;            /* a thread of a column tile has a column (a condition) */
    V lane, wid, nw;   /* the lane in its warp, the warp in the block, warps per block */
    V keep;            /* the row is kept in dynamic shared memory: "true", "false", or the variable that says */
    V base;            /* where this row starts there, in elements */
} Rows;

/* Element j of the row in dynamic shared memory. */
static V rows_at(const Rows *R, V j)
{
    return strcmp(R->base.s, "0") ? lit("%s + %s", R->base.s, j.s) : j;
}

/* Combines b (and ib, hb for an arg reduction) into the accumulator acc
 * (best, has): the reduction's op, or the scan's rule. */
static void combine(Gk *k, const Op *op, DType dt, V acc, V best, V has, V b, V ib, V hb)
{
    if (op->kind == OP_REDUCE) {
        V r;
        apply(k, &cu_binary[reduce_bin(op, dt)], dt, dt, acc, b, &r);
        line(k, "%s = %s;", acc.s, r.s);
        return;
    }
    line(k, "if (%s) {", hb.s);
    k->ind++;
    V take = arg_take(k, op, dt, acc, best, b, ib);
    line(k, "if (!%s || %s) {", has.s, take.s);
    line(k, "    %s = %s;", acc.s, b.s);
    line(k, "    %s = %s;", best.s, ib.s);
    line(k, "    %s = true;", has.s);
    line(k, "}");
    k->ind--;
    line(k, "}");
}

/* Position lane of the four a row variant's vector form takes from base
 * vj (the position itself in the scalar form): the one gelem's vector
 * loads are for. */
static V row_pos(Gk *k, int j, int lane)
{
    V pos = k->rvec ? let(k, "int64_t", "v%d + %d", j, lane) : lit("v%d", j);
    k->rbase = lit("v%d", j);
    k->rpos = pos;
    k->rlane = lane;
    return pos;
}

/* One reduction of the row at idx: its value, the same in every thread
 * of the row. With fill, the pass keeps each element of its input in the
 * row's place in dynamic shared memory where R->keep says so. */
static V reduce_row(Gk *k, const Op *op, int id, V *idx, const int *rax, int nr, V m, const Rows *R, bool fill)
{
    Value *x = op->in[0];
    DType dt = x->type.dtype;
    const char *t = ctype(dt);
    bool arg = op->kind != OP_REDUCE;
    bool last = arg && op_attr_int(op, "last", 0);
    bool cols = R->kind == COLS_TILE || R->kind == COLS_SPLIT;
    if (R->kind != ROWS_WARP && id >= k->nshared) { /* a partial result per warp, or per thread of a tile */
        int n = cols ? GPU_BLOCK : GPU_BLOCK / 32;
        gpu_str_printf(&k->shared, "    __shared__ %s r%d[%d];\n", t, id, n);
        if (arg)
            gpu_str_printf(&k->shared, "    __shared__ int64_t i%d[%d];\n    __shared__ bool h%d[%d];\n", id, n, id, n);
        k->nshared = id + 1;
    }
    V acc = let(k, t, "%s", acc_init(op, dt).s);
    V best = arg ? let(k, "int64_t", "0") : lit("0"), has = arg ? let(k, "bool", "false") : lit("0");
    int j = k->nv++;
    if (k->rvec)
        line(k, "for (int64_t v%d = 4 * %s; v%d < %s; v%d += 4 * %s) { /* four positions a thread */", j, R->t.s, j,
             R->jend.s, j, R->nt.s);
    else if (strcmp(R->j0.s, "0"))
        line(k, "for (int64_t v%d = %s + %s; v%d < %s; v%d += %s) {", j, R->j0.s, R->t.s, j, R->jend.s, j, R->nt.s);
    else
        line(k, "for (int64_t v%d = %s; v%d < %s; v%d += %s) {", j, R->t.s, j, R->jend.s, j, R->nt.s);
    k->ind++;
    k->nrvl = 0;
    for (int lane = 0; lane < (k->rvec ? 4 : 1); lane++) {
        V pos = row_pos(k, j, lane);
        V full[MAX_RANK];
        memcpy(full, idx, (size_t)x->type.rank * sizeof *full);
        split_axes(k, &x->type, rax, nr, pos, full);
        V v;
        if (fill) {
            v = gelem(k, x, full);
            V at = rows_at(R, pos);
            if (!strcmp(R->keep.s, "true"))
                line(k, "DISC_DSH(%s, %s) = %s;", t, at.s, v.s);
            else if (strcmp(R->keep.s, "false"))
                line(k, "if (%s)\n%*s    DISC_DSH(%s, %s) = %s;", R->keep.s, 4 * k->ind, "", t, at.s, v.s);
        } else {
            k->cache_idx = full;
            k->cache_j = pos;
            v = gelem(k, x, full);
            k->cache_idx = NULL;
        }
        if (!arg) {
            V r;
            apply(k, &cu_binary[reduce_bin(op, dt)], dt, dt, acc, v, &r);
            line(k, "%s = %s;", acc.s, r.s);
        } else { /* the scan: a NaN wins and keeps winning (the last one with `last`) */
            const char *cmp = op->kind == OP_ARGMAX ? (last ? ">=" : ">") : (last ? "<=" : "<");
            V better = is_f(dt) ? let(k, "bool", "(%s != %s) ? (%s && %s != %s) : (%s != %s || %s %s %s)", acc.s, acc.s,
                                      last ? "true" : "false", v.s, v.s, v.s, v.s, v.s, cmp, acc.s)
                                : let(k, "bool", "%s %s %s", v.s, cmp, acc.s);
            line(k, "if (%s || !%s) {", better.s, has.s);
            line(k, "    %s = %s;", acc.s, v.s);
            line(k, "    %s = %s;", best.s, full[op_attr_int(op, "axis", 0)].s);
            line(k, "}");
            line(k, "%s = true;", has.s);
        }
    }
    k->nrvl = 0;
    k->ind--;
    line(k, "}");
    if (cols) { /* the tile's partials of a column, combined in order by every thread of it */
        line(k, "DISC_SH(r%d, threadIdx.x) = %s;", id, acc.s);
        if (arg)
            line(k, "DISC_SH(i%d, threadIdx.x) = %s;\n%*sDISC_SH(h%d, threadIdx.x) = %s;", id, best.s, 4 * k->ind, "",
                 id, has.s);
        line(k, "__syncthreads();");
        line(k, "%s = DISC_SH(r%d, %s);", acc.s, id, R->lane.s);
        if (arg)
            line(k, "%s = DISC_SH(i%d, %s);\n%*s%s = DISC_SH(h%d, %s);", best.s, id, R->lane.s, 4 * k->ind, "", has.s,
                 id, R->lane.s);
        int w = k->nv++;
        line(k, "for (int64_t v%d = 1; v%d < %s; v%d++) {", w, w, R->nt.s, w);
        k->ind++;
        V wb = let(k, t, "DISC_SH(r%d, v%d * 32 + %s)", id, w, R->lane.s);
        V wib = arg ? let(k, "int64_t", "DISC_SH(i%d, v%d * 32 + %s)", id, w, R->lane.s) : lit("0");
        V whb = arg ? let(k, "bool", "DISC_SH(h%d, v%d * 32 + %s)", id, w, R->lane.s) : lit("0");
        combine(k, op, dt, acc, best, has, wb, wib, whb);
        k->ind--;
        line(k, "}");
        line(k, "__syncthreads(); /* every thread has read r%d: free for the next tile */", id);
        V r = arg ? best : acc;
        if (!arg && !strcmp(op_attr_str(op, "kind", "sum"), "mean"))
            r = let(k, t, "%s / (%s)%s", r.s, t, m.s);
        return r;
    }
    /* a butterfly over the warp's lanes: each ends with the warp's result */
    int o = k->nv++;
    line(k, "for (int v%d = DISC_WARP / 2; v%d > 0; v%d >>= 1) {", o, o, o);
    k->ind++;
    V b = let(k, t, "DISC_SHFL_XOR(%s, v%d)", acc.s, o);
    V ib = arg ? let(k, "int64_t", "DISC_SHFL_XOR(%s, v%d)", best.s, o) : lit("0");
    V hb = arg ? let(k, "bool", "DISC_SHFL_XOR(%s, v%d)", has.s, o) : lit("0");
    combine(k, op, dt, acc, best, has, b, ib, hb);
    k->ind--;
    line(k, "}");
    if (R->kind == ROWS_BLOCK) { /* the warps' results through shared memory, combined in order by every thread */
        line(k, "if (%s == 0) {", R->lane.s);
        line(k, "    DISC_SH(r%d, %s) = %s;", id, R->wid.s, acc.s);
        if (arg)
            line(k, "    DISC_SH(i%d, %s) = %s;\n%*s    DISC_SH(h%d, %s) = %s;", id, R->wid.s, best.s, 4 * k->ind, "",
                 id, R->wid.s, has.s);
        line(k, "}");
        line(k, "__syncthreads();");
        line(k, "%s = DISC_SH(r%d, 0);", acc.s, id);
        if (arg)
            line(k, "%s = DISC_SH(i%d, 0);\n%*s%s = DISC_SH(h%d, 0);", best.s, id, 4 * k->ind, "", has.s, id);
        int w = k->nv++;
        line(k, "for (int64_t v%d = 1; v%d < %s; v%d++) {", w, w, R->nw.s, w);
        k->ind++;
        V wb = let(k, t, "DISC_SH(r%d, v%d)", id, w);
        V wib = arg ? let(k, "int64_t", "DISC_SH(i%d, v%d)", id, w) : lit("0");
        V whb = arg ? let(k, "bool", "DISC_SH(h%d, v%d)", id, w) : lit("0");
        combine(k, op, dt, acc, best, has, wb, wib, whb);
        k->ind--;
        line(k, "}");
        line(k, "__syncthreads(); /* every thread has read r%d: free for the next row */", id);
    }
    V r = arg ? best : acc;
    if (!arg && !strcmp(op_attr_str(op, "kind", "sum"), "mean"))
        r = let(k, t, "%s / (%s)%s", r.s, t, m.s);
    return r;
}

/* Element x of the row, where the first pass kept it in dynamic shared
 * memory (gelem's hook): read there, or (kept only at some sizes) read
 * there or computed again, as the variant says. */
static V kept_elem(Gk *k, Value *x, V *idx)
{
    const Rows *R = k->rows;
    const char *t = ctype(x->type.dtype);
    V at = rows_at(R, k->cache_j);
    if (!strcmp(R->keep.s, "true"))
        return let(k, t, "DISC_DSH(%s, %s)", t, at.s);
    int r = k->nv++;
    line(k, "%s v%d;", t, r);
    line(k, "if (%s) {", R->keep.s);
    line(k, "    v%d = DISC_DSH(%s, %s);", r, t, at.s);
    line(k, "} else {");
    k->ind++;
    V *saved = k->cache_idx;
    k->cache_idx = NULL;
    k->rvoff++; /* a load in this branch's scope is not the iteration's */
    V v = gelem(k, x, idx);
    k->rvoff--;
    k->cache_idx = saved;
    line(k, "v%d = %s;", r, v.s);
    k->ind--;
    line(k, "}");
    return lit("v%d", r);
}

/* The parts a column split takes the reduced axis in (at least 1). */
static Dim *col_parts(DimCtx *cx, Dim *m)
{
    return dim_max(cx, dim_const(cx, 1), dim_min(cx, dim_const(cx, GPU_COL_SPLIT_MAX),
                                                 dim_ceildiv(cx, m, dim_const(cx, GPU_COL_SPLIT_ROWS))));
}

/* The rows of a reduction group in one variant: the reductions in order,
 * then the row-shaped outputs (by the row's first thread) and the
 * full-shaped ones (a last pass over the row). */
static void rows_variant(Gk *k, Rows *R, const Type *xt, const int *kax, int nk, const int *rax, int nr, Dim *p)
{
    Cg *cg = k->cg;
    const Group *grp = k->grp;
    DimCtx *cx = &cg->g->dims;
    V pv = kdim(k, p), mv = kdim(k, prod_axes(cx, xt, rax, nr));
    int q = k->nv++;
    R->j0 = lit("0");
    R->jend = mv;
    R->live = lit("true");
    if (R->kind == ROWS_WARP || R->kind == ROWS_BLOCK) {
        R->lane = let(k, "int64_t", "threadIdx.x %% DISC_WARP");
        R->wid = let(k, "int64_t", "threadIdx.x / DISC_WARP");
        R->nw = let(k, "int64_t", "blockDim.x / DISC_WARP");
    } else { /* a tile: 32 columns across, blockDim.x / 32 threads down each */
        R->lane = let(k, "int64_t", "threadIdx.x %% 32");
        R->t = let(k, "int64_t", "threadIdx.x / 32");
        R->nt = let(k, "int64_t", "blockDim.x / 32");
    }
    V tiles = R->kind == COLS_TILE || R->kind == COLS_SPLIT ? kdim(k, dim_ceildiv(cx, p, dim_const(cx, 32))) : lit("0");
    if (R->kind == ROWS_WARP) {
        R->t = R->lane;
        R->nt = lit("DISC_WARP");
        line(k, "for (int64_t v%d = blockIdx.x * %s + %s; v%d < %s; v%d += gridDim.x * %s) { /* a row per warp */",
             q, R->nw.s, R->wid.s, q, pv.s, q, R->nw.s);
    } else if (R->kind == ROWS_BLOCK) {
        R->t = lit("threadIdx.x");
        R->nt = lit("blockDim.x");
        line(k, "for (int64_t v%d = blockIdx.x; v%d < %s; v%d += gridDim.x) { /* a row per block */", q, q, pv.s, q);
    } else if (R->kind == COLS_TILE) {
        int tl = k->nv++;
        line(k, "for (int64_t v%d = blockIdx.x; v%d < %s; v%d += gridDim.x) { /* a tile of 32 columns per block */",
             tl, tl, tiles.s, tl);
        k->ind++;
        line(k, "const int64_t v%d = v%d * 32 + %s;", q, tl, R->lane.s);
        R->live = let(k, "bool", "v%d < %s", q, pv.s);
        R->jend = let(k, "int64_t", "%s ? %s : 0", R->live.s, mv.s);
        k->ind--;
    } else { /* COLS_SPLIT: each (tile, part) pair a block, the parts' results combined by atomics */
        V parts = kdim(k, col_parts(cx, prod_axes(cx, xt, rax, nr)));
        V chunk = kdim(k, dim_ceildiv(cx, prod_axes(cx, xt, rax, nr), col_parts(cx, prod_axes(cx, xt, rax, nr))));
        int w = k->nv++;
        line(k, "for (int64_t v%d = blockIdx.x; v%d < %s * %s; v%d += gridDim.x) { /* a tile's part per block */", w, w,
             tiles.s, parts.s, w);
        k->ind++;
        line(k, "const int64_t v%d = v%d %% %s * 32 + %s;", q, w, tiles.s, R->lane.s);
        R->live = let(k, "bool", "v%d < %s", q, pv.s);
        R->j0 = let(k, "int64_t", "v%d / %s * %s", w, tiles.s, chunk.s);
        R->jend = let(k, "int64_t", "%s ? disc_min64(%s, %s + %s) : 0", R->live.s, mv.s, R->j0.s, chunk.s);
        k->ind--;
    }
    k->ind++;
    bool keep = strcmp(R->keep.s, "false") != 0;
    R->base = keep && R->kind == ROWS_WARP ? let(k, "int64_t", "%s * %s", R->wid.s, mv.s) : lit("0");
    V idx[MAX_RANK];
    for (int i = 0; i < xt->rank; i++)
        idx[i] = lit("0");
    split_axes(k, xt, kax, nk, lit("v%d", q), idx);
    k->nr = 0;
    k->rows = R;
    k->cache_v = NULL;
    for (int i = 0; i < grp->nops; i++)
        if (kern_is_reduction(grp->ops[i])) {
            bool fill = keep && k->nr == 0;
            k->rv[k->nr] = grp->ops[i]->out[0];
            k->rval[k->nr] = reduce_row(k, grp->ops[i], k->nr, idx, rax, nr, mv, R, fill);
            if (fill)
                k->cache_v = grp->ops[i]->in[0];
            k->nr++;
        }
    bool any_row = false, any_full = false;
    for (int o = 0; o < grp->nouts; o++) {
        bool row = type_numel(cx, &grp->outs[o]->type) == p;
        any_row |= row;
        any_full |= !row;
    }
    if (any_row) {
        if (strcmp(R->live.s, "true"))
            line(k, "if (%s == 0 && %s) {", R->t.s, R->live.s);
        else
            line(k, "if (%s == 0) {", R->t.s);
        k->ind++;
        for (int o = 0; o < grp->nouts; o++) {
            Value *ov = grp->outs[o];
            if (type_numel(cx, &ov->type) != p)
                continue;
            V oidx[MAX_RANK];
            unflatten(k, &ov->type, lit("v%d", q), oidx);
            V x = gelem(k, ov, oidx);
            if (R->kind == COLS_SPLIT) { /* a part's result into the output (filled with the identity first) */
                char a[200];
                at(k, buf_of(k, ov), lit("v%d", q), a, sizeof a);
                const char *kind = op_attr_str(ov->def, "kind", "sum");
                line(k, "disc_atomic_%s%s(&%s, %s);", !strcmp(kind, "max") || !strcmp(kind, "min") ? kind : "add",
                     ov->type.dtype == DT_F64 ? "" : "f", a, x.s);
            } else {
                store(k, buf_of(k, ov), lit("v%d", q), x);
            }
        }
        k->ind--;
        line(k, "}");
    }
    if (any_full) {
        int j = k->nv++;
        if (k->rvec)
            line(k, "for (int64_t v%d = 4 * %s; v%d < %s; v%d += 4 * %s) { /* four positions a thread */", j, R->t.s,
                 j, R->jend.s, j, R->nt.s);
        else
            line(k, "for (int64_t v%d = %s; v%d < %s; v%d += %s) {", j, R->t.s, j, R->jend.s, j, R->nt.s);
        k->ind++;
        k->nrvl = 0;
        for (int lane = 0; lane < (k->rvec ? 4 : 1); lane++) {
            V pos = row_pos(k, j, lane);
            V fi[MAX_RANK], oidx[MAX_RANK];
            memcpy(fi, idx, (size_t)xt->rank * sizeof *fi);
            split_axes(k, xt, rax, nr, pos, fi);
            k->cache_idx = fi;
            k->cache_j = pos;
            V off = offset(k, xt, fi);
            for (int o = 0; o < grp->nouts; o++) {
                Value *ov = grp->outs[o];
                if (type_numel(cx, &ov->type) == p)
                    continue;
                store(k, buf_of(k, ov), off, out_elem(k, ov, xt, fi, off, oidx));
            }
            k->cache_idx = NULL;
        }
        k->nrvl = 0;
        k->ind--;
        line(k, "}");
    }
    k->cache_v = NULL;
    k->rows = NULL;
    k->ind--;
    line(k, "}");
}

/* Variant a where bit 0 of `var` is clear and b where it is set, when the
 * kernel has both (a NULL one it does not have); else the one it has. */
/* Whether a row group may take the vector form: one reduced axis, the
 * last, and ops whose elements are written without blocks of their own
 * (elementwise, reductions, reshapes: softmax, LayerNorm, RMSNorm). */
static bool row_vec_ok(const Gk *k, const Type *xt, const int *rax, int nr)
{
    if (nr != 1 || rax[0] != xt->rank - 1)
        return false;
    for (int i = 0; i < k->grp->nops; i++) {
        const Op *op = k->grp->ops[i];
        OpCat c = op_info(op->kind)->cat;
        if (c != CAT_UNARY && c != CAT_BINARY && c != CAT_ELEM && c != CAT_REDUCE && c != CAT_CONST &&
            op->kind != OP_RESHAPE)
            return false;
    }
    return true;
}

/* A row variant, with its vector form first where the group may take it
 * and some buffer is read as vectors: four consecutive positions of the
 * row a thread, each buffer whose last dim is the row read as one vector
 * (float4, ushort4 for f16, ...) where the row's length is a multiple of
 * 4 and every such buffer is aligned to its vector (a test the kernel
 * makes once), else the scalar form. Loads of two bytes a lane were the
 * f16 softmax's cost on the H200 (30% of BERT-base f16 at 16x512). */
static void rows_variant_vec(Gk *k, Rows *R, const Type *xt, const int *kax, int nk, const int *rax, int nr, Dim *p)
{
    if (!row_vec_ok(k, xt, rax, nr)) {
        rows_variant(k, R, xt, kax, nk, rax, nr, p);
        return;
    }
    GpuStr body = k->body, vec = {0};
    k->body = vec;
    k->ind++;
    k->rvec = true;
    k->rm = xt->dims[rax[0]];
    k->rvbufs = 0;
    k->nrvl = 0;
    rows_variant(k, R, xt, kax, nk, rax, nr, p);
    k->rvec = false;
    k->ind--;
    vec = k->body;
    k->body = body;
    if (!k->rvbufs || vec.failed) {
        gpu_str_free(&vec);
        rows_variant(k, R, xt, kax, nk, rax, nr, p);
        return;
    }
    char guard[1024];
    size_t n = (size_t)snprintf(guard, sizeof guard, "%s %% 4 == 0", kdim(k, k->rm).s);
    for (int b = 0; b < k->nb && b < 32 && n < sizeof guard; b++)
        if (k->rvbufs & (1u << b))
            n += (size_t)snprintf(guard + n, sizeof guard - n, " && ((unsigned long long)b%d & %d) == 0", b,
                                  4 * (int)dtype_size(k->bv[b]->type.dtype) - 1);
    line(k, "if (%s) { /* the row in vectors of four */", guard);
    gpu_str_printf(&k->body, "%s", vec.p ? vec.p : "");
    gpu_str_free(&vec);
    line(k, "} else {");
    k->ind++;
    rows_variant(k, R, xt, kax, nk, rax, nr, p);
    k->ind--;
    line(k, "}");
}

static void rows_either(Gk *k, Rows *a, Rows *b, const Type *xt, const int *kax, int nk, const int *rax, int nr,
                        Dim *p)
{
    if (a && b) {
        line(k, "if ((var & 1) == 0) {");
        k->ind++;
        rows_variant_vec(k, a, xt, kax, nk, rax, nr, p);
        k->ind--;
        line(k, "} else {");
        k->ind++;
        rows_variant_vec(k, b, xt, kax, nk, rax, nr, p);
        k->ind--;
        line(k, "}");
    } else {
        rows_variant_vec(k, a ? a : b, xt, kax, nk, rax, nr, p);
    }
}


/* The size in bytes of a compute type (the row kept in shared memory). */
static int64_t csize(DType dt)
{
    return dt == DT_F16 || dt == DT_BF16 ? 4 : dt == DT_BOOL ? 1 : (int64_t)dtype_size(dt);
}

/* 1 where d > c, else 0, as a dim: the host flow's test. */
static Dim *dim_gt(DimCtx *cx, Dim *d, int64_t c)
{
    return dim_min(cx, dim_const(cx, 1), dim_max(cx, dim_const(cx, 0), dim_addc(cx, d, -c)));
}

/* 1 where the rows of a block (rows of m elements of esize bytes) do not
 * fit in the dynamic shared memory a row kernel may take. */
static Dim *too_big(DimCtx *cx, Dim *m, int64_t rows, int64_t esize)
{
    return dim_gt(cx, dim_mulc(cx, m, rows * esize), GPU_DYN_SHARED_MAX);
}

/* Whether both dims are the constant c. */
static bool both_are(Dim *a, Dim *b, int64_t c) { return dim_is(a, c) && dim_is(b, c); }

/* Whether the split variant takes the group: every output a sum, mean,
 * max or min of f32 or f64 itself (combined by atomics into it). */
static bool col_split_ok(const Group *grp)
{
    if (grp->kind != FUSE_INPUT || grp->nouts > GPU_INIT_MAX)
        return false;
    for (int o = 0; o < grp->nouts; o++) {
        const Op *op = grp->outs[o]->def;
        const char *kind = op && op->kind == OP_REDUCE ? op_attr_str(op, "kind", "sum") : "";
        DType dt = grp->outs[o]->type.dtype;
        if (strcmp(kind, "sum") && strcmp(kind, "mean") && strcmp(kind, "max") && strcmp(kind, "min"))
            return false;
        if ((dt != DT_F32 && dt != DT_F64) || op->in[0]->type.dtype != dt)
            return false;
    }
    return true;
}

/* Columns (the innermost axis kept): tiles of 32 columns, a block's
 * threads across them (coalesced reads) and down the reduced axis; where
 * there are few tiles and long columns (an INPUT group of sums, means,
 * maxima and minima of floats) the host flow may split each column into
 * parts, a block per tile and part, the parts' results combined into the
 * outputs by atomics after the flow has filled them with the identity. */
static bool cols_body(Gk *k, GpuKernel *gk, int grid_max, const Type *xt, const int *kax, int nk, const int *rax,
                      int nr, Dim *p, Dim *m)
{
    Cg *cg = k->cg;
    const Group *grp = k->grp;
    DimCtx *cx = &cg->g->dims;
    Dim *one = dim_const(cx, 1);
    Dim *tiles = dim_ceildiv(cx, p, dim_const(cx, 32));
    Dim *split = col_split_ok(grp) ? dim_min(cx, dim_sub(cx, one, dim_gt(cx, tiles, GPU_COL_SPLIT_TILES)),
                                             dim_gt(cx, m, GPU_COL_SPLIT_ROWS))
                                   : dim_const(cx, 0);
    Dim *g_tile = dim_max(cx, one, dim_min(cx, tiles, dim_const(cx, grid_max)));
    Dim *g_split = dim_max(cx, one, dim_min(cx, dim_mul(cx, tiles, col_parts(cx, m)), dim_const(cx, grid_max)));
    gk->grid = dim_add(cx, g_tile, dim_mul(cx, split, dim_sub(cx, g_split, g_tile)));
    if (!split || !gk->grid)
        return diag_setk(cg->d, DIAG_INTERNAL, "codegen: internal: a column kernel's launch overflows");
    bool tile = !dim_is(split, 1), spl = !dim_is(split, 0);
    gk->var = tile && spl ? split : NULL;
    for (int o = 0; spl && o < grp->nouts; o++) {
        const char *kind = op_attr_str(grp->outs[o]->def, "kind", "sum");
        gk->init[gk->ninit++] = (GpuInit){.buf = grp->nins + o, .dtype = grp->outs[o]->type.dtype,
                                          .value = !strcmp(kind, "max") ? -INFINITY : !strcmp(kind, "min") ? INFINITY : 0,
                                          .n = type_numel(cx, &grp->outs[o]->type)};
    }
    Rows rt = {.kind = COLS_TILE, .keep = lit("false")}, rs = {.kind = COLS_SPLIT, .keep = lit("false")};
    rows_either(k, tile ? &rt : NULL, spl || !tile ? &rs : NULL, xt, kax, nk, rax, nr, p);
    return true;
}

static bool reduce_body(Gk *k, GpuKernel *gk, int grid_max, int warp)
{
    Cg *cg = k->cg;
    const Group *grp = k->grp;
    DimCtx *cx = &cg->g->dims;
    int kax[MAX_RANK], rax[MAX_RANK], nk, nr;
    const Op *bad, *first = kern_reduce_rows(grp, kax, &nk, rax, &nr, &bad);
    if (!first)
        return unsupported(cg, grp->root, "a reduction group without a reduction");
    if (bad)
        return unsupported(cg, bad, "reductions over different rows in one group");
    const Type *xt = &first->in[0]->type;
    Dim *p = prod_axes(cx, xt, kax, nk), *m = prod_axes(cx, xt, rax, nr), *full = type_numel(cx, xt);
    if (grp->kind == FUSE_STITCH && fuse_columns(grp) && !columns_ok(k, xt, kax, nk, p))
        return diag_set(cg->d, "codegen: group %d reads a column reduction's result off its column", grp->id);
    int nred = 0;
    bool any_full = false;
    for (int i = 0; i < grp->nops; i++)
        nred += kern_is_reduction(grp->ops[i]);
    for (int o = 0; o < grp->nouts; o++) {
        Dim *n = type_numel(cx, &grp->outs[o]->type);
        if (n != p && n != full)
            return unsupported(cg, grp->outs[o]->def, "an output neither row- nor input-shaped");
        any_full |= n != p;
    }
    if (nk > 0 && nr > 0 && kax[nk - 1] == xt->rank - 1)
        return cols_body(k, gk, grid_max, xt, kax, nk, rax, nr, p, m);
    /* The launch, computed by the host flow from the symbols: a warp per
     * row up to GPU_WARP_ROW_MAX elements (GPU_BLOCK / warp rows a block),
     * a block per row beyond, and also for fewer than GPU_FEW_ROWS rows of
     * at least GPU_BLOCK elements: LayerNorm over 512 rows of 768 took 18
     * us a warp per row on an H200 (64 blocks on 132 SMs, each lane's 24
     * loads one after another); the first reduction's input kept in dynamic
     * shared memory where it is read again and the block's rows fit. The
     * variant is the last parameter, var: bit 0 a block per row, bit 1
     * the row read again from global memory. */
    bool keep = nred > 1 || any_full;
    int64_t esize = csize(first->in[0]->type.dtype), rw = GPU_BLOCK / warp;
    Dim *few = dim_mul(cx, dim_sub(cx, dim_const(cx, 1), dim_gt(cx, p, GPU_FEW_ROWS - 1)),
                       dim_gt(cx, m, GPU_BLOCK - 1));
    Dim *blk = dim_max(cx, dim_gt(cx, m, GPU_WARP_ROW_MAX), few);
    Dim *rows = dim_sub(cx, dim_const(cx, rw), dim_mulc(cx, blk, rw - 1));
    Dim *bw = too_big(cx, m, rw, esize), *bb = too_big(cx, m, 1, esize);
    Dim *bw32 = too_big(cx, m, GPU_BLOCK / 32, esize), *bw64 = too_big(cx, m, GPU_BLOCK / 64, esize);
    Dim *reread = keep ? dim_add(cx, bw, dim_mul(cx, blk, dim_sub(cx, bb, bw))) : dim_const(cx, 1);
    Dim *shmem = dim_mul(cx, dim_sub(cx, dim_const(cx, 1), reread), dim_mulc(cx, dim_mul(cx, rows, m), esize));
    Dim *var = dim_add(cx, blk, dim_mulc(cx, reread, 2));
    gk->grid = dim_max(cx, dim_min(cx, dim_ceildiv(cx, p, rows), dim_const(cx, grid_max)), dim_const(cx, 1));
    if (!blk || !rows || !bw32 || !bw64 || !bb || !shmem || !var || !gk->grid)
        return diag_setk(cg->d, DIAG_INTERNAL, "codegen: internal: a row kernel's launch overflows");
    /* the variants shape analysis does not rule out, the same text at any warp size */
    bool warp_rows = !dim_is(blk, 1), block_rows = !dim_is(blk, 0);
    Rows rwv = {.kind = ROWS_WARP}, rb = {.kind = ROWS_BLOCK};
    rwv.keep = !keep || both_are(bw32, bw64, 1) ? lit("false") : both_are(bw32, bw64, 0) ? lit("true") : lit("vk");
    rb.keep = !keep || dim_is(bb, 1) ? lit("false") : dim_is(bb, 0) ? lit("true") : lit("vk");
    bool uses_vk = (warp_rows && !strcmp(rwv.keep.s, "vk")) || (block_rows && !strcmp(rb.keep.s, "vk"));
    gk->var = (warp_rows && block_rows) || uses_vk ? var : NULL;
    gk->shmem = dim_is(shmem, 0) ? NULL : shmem;
    if (uses_vk)
        line(k, "const bool vk = (var & 2) == 0; /* the row kept in shared memory */");
    rows_either(k, warp_rows ? &rwv : NULL, block_rows || !warp_rows ? &rb : NULL, xt, kax, nk, rax, nr, p);
    return true;
}

/* ---- the GEMM template ---------------------------------------------------------------- *
 *
 * A library group of a float dot or conv (f32, f16, bf16: computed in f32;
 * f64) whose other ops are an elementwise epilogue at its own index (bias,
 * activation, residual): the result seen as [B, I, J] GEMMs with K
 * contracted. A dot: batch, lhs free and rhs free dims, each flattened,
 * the contracted dims as K. A conv (implicit GEMM, nothing copied): B the
 * groups, I the batch and output positions [N, S_out...], J the group's
 * output channels, K its input channels times the window's taps; A's
 * element (g, i, k) is the input at the tap's position (zero where the tap
 * falls on a pad), B's the weight. A block takes a tile of 64 x 64 results
 * of one batch, its 256 threads 16 x 16, each 4 x 4 results in registers;
 * the K axis in steps of 16, the A and B tiles of a step staged in
 * __shared__ memory (16 x 64 each, rows padded to GEMM_LD; four elements
 * a thread; out of range: zeros) between two barriers. Neighbouring threads load neighbouring k
 * of A and j of B, except a channels-first conv's A, whose neighbouring
 * output positions are neighbours in memory. Each result accumulates its
 * products in k order, as the interpreter and the thread-per-element
 * template do (a conv's K runs over the taps, then the channels within a
 * tap, as theirs), then the epilogue runs per result with the accumulator
 * as the op's value. Integer dots and convs, depthwise and narrow convs
 * (fewer than GEMM_CONV_MIN_J output channels a group: most of a tile
 * would be idle), transposed convs, pools, and groups that read the result
 * elsewhere than at its own index keep the thread-per-element template. */

/* GEMM_LD: a staged tile's row (one k) in shared memory, 64 results and 4
 * floats of padding, so that a row's start moves 4 banks on from the
 * last: the tensor cores' fragment reads (lanes 2 c apart in k, c < 4,
 * and g apart in the tile, g < 8) and A's stores where neighbouring
 * threads take neighbouring k each meet distinct banks, where a stride of
 * 64 put them 4 and 16 to a bank. */
enum { GEMM_TILE = 64, GEMM_LD = 68, GEMM_TK = 16, GEMM_CONV_MIN_J = 16 };

typedef struct Gemm {
    const Op *op;
    Dim *B, *I, *J, *K;
    bool m_fast; /* neighbouring threads take neighbouring i of A's tile */
    /* a dot: A's and B's axes by role, the result's in its order */
    int ab[MAX_RANK], bb[MAX_RANK], ac[MAX_RANK], bc[MAX_RANK], af[MAX_RANK], bf[MAX_RANK], cb[MAX_RANK];
    int ci[MAX_RANK], cj[MAX_RANK], nb, nc, naf, nbf;
    /* a conv: [N, S_out...] (I), [taps..., C/g] (K), the group's widths */
    int nsp, cl;
    bool tr;                   /* transposed: A's tap at (p + pad - k dil) / stride where that divides */
    Dim *id[MAX_RANK], *kd[MAX_RANK], *cg, *og;
    bool k32;                  /* K fits 32 bits: its index split in 32 */
    int rok, rn, rp[MAX_RANK]; /* the A rows' arrays (gemm_rows) */
} Gemm;

static bool gemm_dot(const Op *dot, DimCtx *cx, Gemm *m)
{
    const Attr *lb = op_attr(dot, "lhs_batch"), *rb = op_attr(dot, "rhs_batch");
    const Attr *lc = op_attr(dot, "lhs_contract"), *rc = op_attr(dot, "rhs_contract");
    const Type *at = &dot->in[0]->type, *bt = &dot->in[1]->type;
    bool role[2][MAX_RANK];
    memset(role, 0, sizeof role);
    m->nb = (int)lb->n;
    m->nc = (int)lc->n;
    for (int i = 0; i < m->nb; i++) {
        m->ab[i] = (int)lb->ints[i];
        m->bb[i] = (int)rb->ints[i];
        role[0][m->ab[i]] = role[1][m->bb[i]] = true;
        m->cb[i] = i;
    }
    for (int i = 0; i < m->nc; i++) {
        m->ac[i] = (int)lc->ints[i];
        m->bc[i] = (int)rc->ints[i];
        role[0][m->ac[i]] = role[1][m->bc[i]] = true;
    }
    for (int i = 0; i < at->rank; i++)
        if (!role[0][i])
            m->af[m->naf++] = i;
    for (int i = 0; i < bt->rank; i++)
        if (!role[1][i])
            m->bf[m->nbf++] = i;
    for (int i = 0; i < m->naf; i++)
        m->ci[i] = m->nb + i;
    for (int i = 0; i < m->nbf; i++)
        m->cj[i] = m->nb + m->naf + i;
    m->B = prod_axes(cx, at, m->ab, m->nb);
    m->I = prod_axes(cx, at, m->af, m->naf);
    m->J = prod_axes(cx, bt, m->bf, m->nbf);
    m->K = prod_axes(cx, at, m->ac, m->nc);
    return true;
}

static bool gemm_conv(const Op *op, DimCtx *cx, Gemm *m)
{
    const Type *xt = &op->in[0]->type, *wt = &op->in[1]->type, *ct = &op->out[0]->type;
    int64_t g = op_attr_int(op, "groups", 1);
    m->nsp = xt->rank - 2;
    m->tr = op->kind == OP_CONV_TRANSPOSE;
    m->cl = m->tr ? 0 : (int)op_attr_int(op, "channels_last", 0);
    /* w [O, C/g, k...]; transposed [C, O/g, k...] */
    m->cg = m->tr ? dim_floordiv(cx, xt->dims[1], dim_const(cx, g)) : wt->dims[1];
    m->og = m->tr ? wt->dims[1] : dim_floordiv(cx, wt->dims[0], dim_const(cx, g));
    if (dim_is_const(m->og) && m->og->c < GEMM_CONV_MIN_J)
        return false;
    m->B = dim_const(cx, g);
    m->id[0] = ct->dims[0];
    m->I = ct->dims[0];
    m->K = m->cg;
    for (int i = 0; i < m->nsp; i++) {
        m->id[1 + i] = ct->dims[(m->cl ? 1 : 2) + i];
        m->I = dim_mul(cx, m->I, m->id[1 + i]);
        m->kd[i] = wt->dims[2 + i];
        m->K = dim_mul(cx, m->K, m->kd[i]);
    }
    m->kd[m->nsp] = m->cg;
    m->k32 = dim_is_const(m->K) && m->K->c < INT32_MAX;
    m->J = m->og;
    m->m_fast = m->cl != 1;
    return true;
}

/* The group's dot or conv, in m, if the GEMM template takes the group. */
static const Op *gemm_of(Gk *k, Gemm *m)
{
    const Group *grp = k->grp;
    if (grp->kind != FUSE_LIBRARY)
        return NULL;
    const Op *op = NULL;
    for (int i = 0; i < grp->nops; i++)
        if (grp->ops[i]->kind == OP_DOT || grp->ops[i]->kind == OP_CONV || grp->ops[i]->kind == OP_CONV_TRANSPOSE) {
            if (op)
                return NULL;
            op = grp->ops[i];
        }
    if (!op)
        return NULL;
    const Type *dt = &op->out[0]->type;
    if (!is_f(dt->dtype) || op->in[0]->type.dtype != dt->dtype || op->in[1]->type.dtype != dt->dtype)
        return NULL;
    for (int i = 0; i < grp->nops; i++) {
        const Op *o = grp->ops[i];
        if (o == op || o->kind == OP_CONST)
            continue;
        OpCat cat = op_info(o->kind)->cat;
        bool ew = cat == CAT_UNARY || cat == CAT_BINARY || o->kind == OP_CMP || o->kind == OP_SELECT ||
                  o->kind == OP_CONVERT;
        if (!ew || !type_same_dims(&o->out[0]->type, dt))
            return NULL;
        for (int j = 0; j < o->nin; j++)
            if (in_group(k, o->in[j]) && o->in[j]->def->kind != OP_CONST && !type_same_dims(&o->in[j]->type, dt))
                return NULL;
    }
    for (int o = 0; o < grp->nouts; o++)
        if (!type_same_dims(&grp->outs[o]->type, dt))
            return NULL;
    memset(m, 0, sizeof *m);
    m->op = op;
    DimCtx *cx = &k->cg->g->dims;
    return (op->kind == OP_DOT ? gemm_dot(op, cx, m) : gemm_conv(op, cx, m)) ? op : NULL;
}

/* A conv's K index kg as its tap (ks) and its channel within the group
 * (in 32 bits where K fits: divisions by constants, multiplies). */
static V conv_k(Gk *k, const Gemm *m, V kg, V *ks)
{
    V s[MAX_RANK];
    bool i32 = k->i32;
    k->i32 = m->k32;
    if (m->k32)
        kg = let(k, "int32_t", "(int32_t)%s", kg.s);
    split_dims(k, (Dim **)m->kd, m->nsp + 1, kg, s);
    k->i32 = i32;
    for (int i = 0; i < m->nsp; i++)
        ks[i] = s[i];
    return s[m->nsp];
}

/* A conv's A rows, once a tile (the K loop reads them): for each of the
 * thread's four elements of A's tile, whether its row ig is in range,
 * its image and its window's origin on each spatial axis (the output
 * position times the stride, less the pad), from the symbolic sizes'
 * divisions, which the K loop does not repeat. */
static void gemm_rows(Gk *k, Gemm *m, V tmi, V Iv)
{
    enum { R = GEMM_TK * GEMM_TILE / GPU_BLOCK };
    const Attr *st = op_attr(m->op, "strides"), *pads = op_attr(m->op, "pads");
    m->rok = k->nv++;
    m->rn = k->nv++;
    line(k, "bool v%d[%d];", m->rok, R);
    line(k, "int64_t v%d[%d];", m->rn, R);
    for (int i = 0; i < m->nsp; i++) {
        m->rp[i] = k->nv++;
        line(k, "int64_t v%d[%d];", m->rp[i], R);
    }
    int r = k->nv++;
    line(k, "#pragma unroll");
    line(k, "for (int v%d = 0; v%d < %d; v%d++) {", r, r, R, r);
    k->ind++;
    V e = let(k, "int64_t", "threadIdx.x + v%d * %d", r, GPU_BLOCK);
    V mm = m->m_fast ? let(k, "int64_t", "%s %% %d", e.s, GEMM_TILE) : let(k, "int64_t", "%s / %d", e.s, GEMM_TK);
    V ig = let(k, "int64_t", "%s + %s", tmi.s, mm.s);
    line(k, "v%d[v%d] = %s < %s;", m->rok, r, ig.s, Iv.s);
    V os[MAX_RANK];
    split_dims(k, m->id, m->nsp + 1, ig, os);
    line(k, "v%d[v%d] = %s;", m->rn, r, os[0].s);
    for (int i = 0; i < m->nsp; i++)
        if (m->tr) /* the output position plus the pad: less a tap, stride times the input's */
            line(k, "v%d[v%d] = %s + %s;", m->rp[i], r, os[1 + i].s, kdim(k, pads->dims[i]).s);
        else
            line(k, "v%d[v%d] = %s * %lld - %s;", m->rp[i], r, os[1 + i].s, (long long)st->ints[i],
                 kdim(k, pads->dims[i]).s);
    k->ind--;
    line(k, "}");
}

/* Emits v = A's element (b, ig, kg) (bi: b split over the result's batch
 * axes; a conv's row is the thread's r-th, from gemm_rows); ig and kg are
 * in range. */
static void gemm_a(Gk *k, const Gemm *m, V b, const V *bi, V ig, V r, V kg, int v)
{
    const Op *op = m->op;
    Value *a = op->in[0];
    const Type *at = &a->type;
    V xi[MAX_RANK];
    if (op->kind == OP_DOT) {
        for (int i = 0; i < m->nb; i++)
            xi[m->ab[i]] = bi[i];
        split_axes(k, at, m->af, m->naf, ig, xi);
        split_axes(k, at, m->ac, m->nc, kg, xi);
        line(k, "v%d = %s;", v, gelem(k, a, xi).s);
        return;
    }
    (void)ig;
    V ks[MAX_RANK];
    V c = conv_k(k, m, kg, ks);
    const Attr *dl = op_attr(op, "dilations");
    int xs = m->cl == 1 ? 1 : 2;
    V inside = lit("true");
    xi[0] = lit("v%d[%s]", m->rn, r.s);
    xi[1] = let(k, "int64_t", "%s * %s + %s", b.s, kdim(k, m->cg).s, c.s);
    const Attr *st = op_attr(op, "strides");
    for (int i = 0; i < m->nsp; i++) {
        V n = kdim(k, at->dims[xs + i]);
        if (m->tr) { /* the input position whose tap lands here, if one does */
            long long s = (long long)st->ints[i];
            V num = let(k, "int64_t", "v%d[%s] - %s * %lld", m->rp[i], r.s, ks[i].s, (long long)dl->ints[i]);
            xi[2 + i] = let(k, "int64_t", "%s / %lld", num.s, s);
            inside = let(k, "bool", "%s && %s >= 0 && %s %% %lld == 0 && %s < %s", inside.s, num.s, num.s, s,
                         xi[2 + i].s, n.s);
            continue;
        }
        xi[2 + i] = let(k, "int64_t", "v%d[%s] + %s * %lld", m->rp[i], r.s, ks[i].s, (long long)dl->ints[i]);
        inside = let(k, "bool", "%s && %s >= 0 && %s < %s", inside.s, xi[2 + i].s, xi[2 + i].s, n.s);
    }
    line(k, "if (%s) { /* else a pad's zero */", inside.s);
    k->ind++;
    line(k, "v%d = %s;", v, gelem(k, a, channels_at(xi, at->rank, m->cl == 1)).s);
    k->ind--;
    line(k, "}");
}

/* Emits v = B's element (b, kg, jg). */
static void gemm_b(Gk *k, const Gemm *m, V b, const V *bi, V kg, V jg, int v)
{
    const Op *op = m->op;
    Value *w = op->in[1];
    V yi[MAX_RANK];
    if (op->kind == OP_DOT) {
        for (int i = 0; i < m->nb; i++)
            yi[m->bb[i]] = bi[i];
        split_axes(k, &w->type, m->bf, m->nbf, jg, yi);
        split_axes(k, &w->type, m->bc, m->nc, kg, yi);
    } else {
        V ks[MAX_RANK];
        V c = conv_k(k, m, kg, ks);
        if (m->tr) { /* w [C, O/g, k...]: the group's input channel c, output j */
            yi[0] = let(k, "int64_t", "%s * %s + %s", b.s, kdim(k, m->cg).s, c.s);
            yi[1] = jg;
        } else {
            yi[0] = let(k, "int64_t", "%s * %s + %s", b.s, kdim(k, m->og).s, jg.s);
            yi[1] = c;
        }
        for (int i = 0; i < m->nsp; i++)
            yi[2 + i] = ks[i];
    }
    line(k, "v%d = %s;", v, gelem(k, w, yi).s);
}

/* The result's index (in its dims) of (b, i, j). */
static void gemm_c(Gk *k, const Gemm *m, V b, const V *bi, V i, V j, V *idx)
{
    const Type *ct = &m->op->out[0]->type;
    if (m->op->kind == OP_DOT) {
        memcpy(idx, bi, sizeof(V) * (size_t)m->nb);
        split_axes(k, ct, m->ci, m->naf, i, idx);
        split_axes(k, ct, m->cj, m->nbf, j, idx);
        return;
    }
    V os[MAX_RANK];
    split_dims(k, (Dim **)m->id, m->nsp + 1, i, os);
    V o = let(k, "int64_t", "%s * %s + %s", b.s, kdim(k, m->og).s, j.s);
    idx[0] = os[0];
    idx[m->cl ? ct->rank - 1 : 1] = o;
    for (int s = 0; s < m->nsp; s++)
        idx[(m->cl ? 1 : 2) + s] = os[1 + s];
}

/* A K step of 16 on the tensor cores (DISC_MMA): the block's 8 warps as
 * 4 x 2, each 16 rows x 32 columns of the 64 x 64 tile, four m16n8k16
 * products a step (its 16 accumulators: four per n-tile), the fragments
 * taken from the staged tiles (floats, each exactly an f16 or bf16) in
 * the PTX ISA's layout (prelude.c). */
static void gemm_mma_step(Gk *k, int acc, DType dt)
{
    const char *cv = dt == DT_F16 ? "disc_f2h" : "disc_f2bf";
    line(k, "{");
    k->ind++;
    line(k, "const int l_ = threadIdx.x %% 32, g_ = l_ / 4, c_ = l_ %% 4;");
    line(k, "const int r_ = threadIdx.x / 32 %% 4 * 16 + g_, n_ = threadIdx.x / 128 * 32 + g_;");
    line(k, "uint32_t a_[4], b_[2];");
    line(k, "#pragma unroll");
    line(k, "for (int u = 0; u < 4; u++) { /* a0..a7: rows r_, r_ + 8; columns 2 c_ (+ 8 from a4) */");
    line(k, "    const int kk = 2 * c_ + (u >= 2 ? 8 : 0), rr = r_ + (u & 1) * 8;");
    line(k, "    a_[u] = (uint32_t)%s(DISC_SH(ta, kk * %d + rr)) | (uint32_t)%s(DISC_SH(ta, (kk + 1) * %d + rr)) << 16;", cv,
         GEMM_LD, cv, GEMM_LD);
    line(k, "}");
    line(k, "#pragma unroll");
    line(k, "for (int t = 0; t < 4; t++) { /* the warp's four n-tiles of 8 */");
    k->ind++;
    line(k, "#pragma unroll");
    line(k, "for (int u = 0; u < 2; u++) { /* b0..b3: rows 2 c_ (+ 8 from b2), column g_ */");
    line(k, "    const int kk = 2 * c_ + u * 8, nn = n_ + t * 8;");
    line(k, "    b_[u] = (uint32_t)%s(DISC_SH(tb, kk * %d + nn)) | (uint32_t)%s(DISC_SH(tb, (kk + 1) * %d + nn)) << 16;", cv,
         GEMM_LD, cv, GEMM_LD);
    line(k, "}");
    line(k, "%s(&v%d[4 * t], a_, b_);", dt == DT_F16 ? "DISC_MMA_F16" : "DISC_MMA_BF16", acc);
    k->ind--;
    line(k, "}");
    k->ind--;
    line(k, "}");
}

/* The epilogue's loop over a thread's 16 results, result q at row i and
 * column j of the [B, I, J] view, the accumulator v[q] as the op's value. */
static void gemm_store(Gk *k, const Gemm *m, V b, const V *bi, int acc, V Iv, V Jv, V ie, V je)
{
    const Type *ct = &m->op->out[0]->type;
    line(k, "#pragma unroll");
    line(k, "for (int q = 0; q < 16; q++) {");
    k->ind++;
    V i = let(k, "int64_t", "%s", ie.s), j = let(k, "int64_t", "%s", je.s);
    line(k, "if (%s < %s && %s < %s) {", i.s, Iv.s, j.s, Jv.s);
    k->ind++;
    V idx[MAX_RANK], oidx[MAX_RANK];
    gemm_c(k, m, b, bi, i, j, idx);
    V flat = ct->rank ? offset(k, ct, idx) : lit("0");
    k->rv[0] = m->op->out[0];
    k->rval[0] = lit("v%d[q]", acc);
    k->nr = 1;
    for (int o = 0; o < k->grp->nouts; o++) {
        Value *ov = k->grp->outs[o];
        store(k, buf_of(k, ov), flat, out_elem(k, ov, ct, idx, flat, oidx));
    }
    k->nr = 0;
    k->ind--;
    line(k, "}");
    k->ind--;
    line(k, "}");
}

static void gemm_body(Gk *k, Gemm *m, GpuKernel *gk, int grid_max)
{
    DimCtx *cx = &k->cg->g->dims;
    Value *c = m->op->out[0];
    const Type *ct = &c->type;
    const char *T = ct->dtype == DT_F64 ? "double" : "float";
    Dim *tm = dim_ceildiv(cx, m->I, dim_const(cx, GEMM_TILE)), *tn = dim_ceildiv(cx, m->J, dim_const(cx, GEMM_TILE));
    Dim *ntiles = dim_mul(cx, m->B, dim_mul(cx, tm, tn));
    gk->grid = dim_max(cx, dim_const(cx, 1), dim_min(cx, ntiles, dim_const(cx, grid_max)));
    V Iv = kdim(k, m->I), Jv = kdim(k, m->J), Kv = kdim(k, m->K), tmv = kdim(k, tm), tnv = kdim(k, tn);
    V nt = kdim(k, ntiles);
    gpu_str_printf(&k->shared, "    __shared__ %s ta[%d];\n    __shared__ %s tb[%d];\n", T, GEMM_TK * GEMM_LD, T,
                   GEMM_TK * GEMM_LD);
    int t = k->nv++;
    line(k, "for (int64_t v%d = blockIdx.x; v%d < %s; v%d += gridDim.x) { /* a tile of 64 x 64 results */", t, t, nt.s,
         t);
    k->ind++;
    V tnj = let(k, "int64_t", "v%d %% %s * %d", t, tnv.s, GEMM_TILE);
    V tmi = let(k, "int64_t", "v%d / %s %% %s * %d", t, tnv.s, tmv.s, GEMM_TILE);
    V b = let(k, "int64_t", "v%d / %s / %s", t, tnv.s, tmv.s);
    V tx = let(k, "int64_t", "threadIdx.x %% 16"), ty = let(k, "int64_t", "threadIdx.x / 16");
    V bi[MAX_RANK];
    if (m->op->kind == OP_DOT)
        split_axes(k, ct, m->cb, m->nb, b, bi);
    int acc = k->nv++;
    line(k, "%s v%d[16];", T, acc);
    line(k, "#pragma unroll");
    line(k, "for (int q = 0; q < 16; q++)");
    line(k, "    v%d[q] = 0;", acc);
    bool conv = m->op->kind != OP_DOT;
    if (conv)
        gemm_rows(k, m, tmi, Iv);
    int k0 = k->nv++;
    line(k, "for (int64_t v%d = 0; v%d < %s; v%d += %d) {", k0, k0, Kv.s, k0, GEMM_TK);
    k->ind++;
    int r = k->nv++;
    line(k, "#pragma unroll");
    line(k, "for (int v%d = 0; v%d < %d; v%d++) { /* four elements of each tile a thread */", r, r,
         GEMM_TK * GEMM_TILE / GPU_BLOCK, r);
    k->ind++;
    V e = let(k, "int64_t", "threadIdx.x + v%d * %d", r, GPU_BLOCK);
    /* A's element (b, i, k) */
    V kk = m->m_fast ? let(k, "int64_t", "%s / %d", e.s, GEMM_TILE) : let(k, "int64_t", "%s %% %d", e.s, GEMM_TK);
    V mm = m->m_fast ? let(k, "int64_t", "%s %% %d", e.s, GEMM_TILE) : let(k, "int64_t", "%s / %d", e.s, GEMM_TK);
    V ig = let(k, "int64_t", "%s + %s", tmi.s, mm.s), kg = let(k, "int64_t", "v%d + %s", k0, kk.s);
    int xa = k->nv++;
    line(k, "%s v%d = 0;", T, xa);
    if (conv)
        line(k, "if (v%d[v%d] && %s < %s) {", m->rok, r, kg.s, Kv.s);
    else
        line(k, "if (%s < %s && %s < %s) {", ig.s, Iv.s, kg.s, Kv.s);
    k->ind++;
    gemm_a(k, m, b, bi, ig, lit("v%d", r), kg, xa);
    k->ind--;
    line(k, "}");
    line(k, "DISC_SH(ta, %s * %d + %s) = v%d;", kk.s, GEMM_LD, mm.s, xa);
    /* B's element (b, k, j) */
    V nn = let(k, "int64_t", "%s %% %d", e.s, GEMM_TILE), kb = let(k, "int64_t", "%s / %d", e.s, GEMM_TILE);
    V jg = let(k, "int64_t", "%s + %s", tnj.s, nn.s), kgb = let(k, "int64_t", "v%d + %s", k0, kb.s);
    int xb = k->nv++;
    line(k, "%s v%d = 0;", T, xb);
    line(k, "if (%s < %s && %s < %s) {", jg.s, Jv.s, kgb.s, Kv.s);
    k->ind++;
    gemm_b(k, m, b, bi, kgb, jg, xb);
    k->ind--;
    line(k, "}");
    line(k, "DISC_SH(tb, %s * %d + %s) = v%d;", kb.s, GEMM_LD, nn.s, xb);
    k->ind--;
    line(k, "}");
    line(k, "__syncthreads();");
    bool mma = ct->dtype == DT_F16 || ct->dtype == DT_BF16;
    if (mma) {
        line(k, "#if DISC_MMA");
        gemm_mma_step(k, acc, ct->dtype);
        line(k, "#else");
    }
    line(k, "#pragma unroll");
    line(k, "for (int kk = 0; kk < %d; kk++) {", GEMM_TK);
    line(k, "    %s x[4], y[4];", T);
    line(k, "#pragma unroll");
    line(k, "    for (int u = 0; u < 4; u++) {");
    line(k, "        x[u] = DISC_SH(ta, kk * %d + %s * 4 + u);", GEMM_LD, ty.s);
    line(k, "        y[u] = DISC_SH(tb, kk * %d + %s * 4 + u);", GEMM_LD, tx.s);
    line(k, "    }");
    line(k, "#pragma unroll");
    line(k, "    for (int q = 0; q < 16; q++)");
    line(k, "        v%d[q] += x[q / 4] * y[q %% 4];", acc);
    line(k, "}");
    if (mma)
        line(k, "#endif");
    line(k, "__syncthreads(); /* every thread has read the tiles: free for the next step */");
    k->ind--;
    line(k, "}");
    /* the epilogue, per result, with the accumulator as the op's value:
     * result q of a thread at (ty 4 + q / 4, tx 4 + q % 4) of the tile, or,
     * after the tensor cores' steps, c_(q % 4) of the warp's n-tile q / 4 */
    if (mma) {
        line(k, "#if DISC_MMA");
        V wi = let(k, "int64_t", "%s + threadIdx.x / 32 %% 4 * 16 + threadIdx.x %% 32 / 4", tmi.s);
        V wj = let(k, "int64_t", "%s + threadIdx.x / 128 * 32 + threadIdx.x %% 4 * 2", tnj.s);
        gemm_store(k, m, b, bi, acc, Iv, Jv, lit("%s + (q %% 4 >= 2 ? 8 : 0)", wi.s), lit("%s + q / 4 * 8 + (q & 1)", wj.s));
        line(k, "#else");
    }
    gemm_store(k, m, b, bi, acc, Iv, Jv, lit("%s + %s * 4 + q / 4", tmi.s, ty.s), lit("%s + %s * 4 + q %% 4", tnj.s, tx.s));
    if (mma)
        line(k, "#endif");
    k->ind--;
    line(k, "}");
}

static void desc(GpuStr *s, const Group *grp)
{
    for (int i = 0; i < grp->nops; i++)
        gpu_str_printf(s, " %s", op_info(grp->ops[i]->kind)->name);
}

/* The loop over an index map, where np broadcasting pairs (x[i], r[i])
 * may be equal at run time: then a variant that does not test them
 * (speculation) and one that does. */
/* The loop body of an index-map kernel (flat: one value at the flat
 * index), with LOOP_ILP elements a thread where it may. */
static void loop_any(Gk *k, const Type *rt, Dim *numel, bool flat)
{
    if (!flat && k->ilp)
        loop_ilp(k, rt, numel);
    else
        loop_body(k, rt, numel, flat);
}

static void loop_maps(Gk *k, const Type *rt, Dim *numel, bool flat, int np, Dim **x, Dim **r)
{
    if (np == 0) {
        loop_any(k, rt, numel, flat);
        return;
    }
    char same[1024] = "true";
    size_t n = 4;
    for (int i = 0; i < np; i++) {
        n += (size_t)snprintf(same + n, sizeof same - n, " && %s == %s", kdim(k, x[i]).s, kdim(k, r[i]).s);
        if (n >= sizeof same)
            n = sizeof same - 1;
    }
    line(k, "if (%s) {", same);
    k->ind++;
    k->speculate = true;
    loop_any(k, rt, numel, flat);
    k->speculate = false;
    k->ind--;
    line(k, "} else {");
    k->ind++;
    loop_any(k, rt, numel, flat);
    k->ind--;
    line(k, "}");
}

/* 1 where a loop kernel's indices fit in 32 bits: its element count and
 * every buffer's at most GPU_INDEX32_MAX (an index map's offsets are into
 * a buffer, its loop's counter under the count plus the grid's threads).
 * A division by the run-time sequence length per element in 64 bits
 * made the head transposes of BERT-base 17-19% of copy bandwidth on an
 * H200; in 32 bits the f16 one's loop is 44 SASS instructions an
 * element, not 91 (sm_90, NVRTC 13). NULL where a size overflows. */
static Dim *loop_i32_fits(Gk *k, Dim *numel)
{
    DimCtx *cx = &k->cg->g->dims;
    Dim *most = numel;
    for (int b = 0; most && b < k->nb; b++)
        most = dim_max(cx, most, type_numel(cx, &k->bv[b]->type));
    return most ? dim_sub(cx, dim_const(cx, 1), dim_gt(cx, most, GPU_INDEX32_MAX)) : NULL;
}

/* The emulator's entry for kernel gk: the CPU kernel ABI over blocks. */
static void emu_entry(GpuStr *s, const Gk *k, const GpuKernel *gk)
{
    /* one thread: the kernel on the launch's arguments */
    gpu_str_printf(s, "static void %s_thread(void **a)\n{\n", gk->name);
    gpu_str_printf(s, "    const int64_t *s = (const int64_t *)a[%d];\n    (void)s;\n    %s(", k->nb, gk->name);
    for (int i = 0; i < k->nb; i++)
        gpu_str_printf(s, "%s(%s%s *)a[%d]", i ? ", " : "", i < k->grp->nins ? "const " : "",
                       stype(k->bv[i]->type.dtype), i);
    for (int i = 0; i < gk->nsyms; i++)
        gpu_str_printf(s, ", s[%d]", gk->syms[i]);
    if (gk->var)
        gpu_str_printf(s, ", *(const int64_t *)a[%d]", k->nb + 1);
    gpu_str_printf(s, ");\n}\n\n");
    /* the launch: blocks [begin, end) of the grid */
    gpu_str_printf(s, "void %s_emu(int64_t begin, int64_t end, void *args)\n{\n", gk->name);
    gpu_str_printf(s, "    const int64_t *s = (const int64_t *)((void **)args)[%d];\n    (void)s;\n", k->nb);
    gpu_str_printf(s, "    void *a[%d];\n    memcpy(a, args, sizeof a - sizeof a[0]);\n", k->nb + 2);
    if (gk->var) { /* the variant, as the host flow computes it */
        gpu_str_printf(s, "    int64_t var = ");
        dim_text(s, gk->var, "s[%d]");
        gpu_str_printf(s, ";\n    a[%d] = &var;\n", k->nb + 1);
    }
    if (gk->ninit) { /* the outputs the parts combine into, filled first (the launch is one call) */
        gpu_str_printf(s, "    if (begin == 0%s) {\n", gk->var ? " && (var & 1)" : "");
        for (int i = 0; i < gk->ninit; i++) {
            const GpuInit *in = &gk->init[i];
            gpu_str_printf(s, "        for (int64_t i = 0; i < ");
            dim_text(s, in->n, "s[%d]");
            gpu_str_printf(s, "; i++)\n            ((%s *)a[%d])[i] = %s;\n", stype(in->dtype), in->buf,
                           flit(in->value, in->dtype).s);
        }
        gpu_str_printf(s, "    }\n");
    }
    gpu_str_printf(s, "    disc_emu_run(begin, end, ");
    dim_text(s, gk->grid, "s[%d]");
    gpu_str_printf(s, ", %d, ", gk->block);
    if (gk->shmem)
        dim_text(s, gk->shmem, "s[%d]");
    else
        gpu_str_printf(s, "0");
    gpu_str_printf(s, ", %s_thread, a, \"%s\");\n}\n\n", gk->name, gk->name);
    /* a launch through the CUDA driver's parameters (cuLaunchKernel's: a
     * pointer to each parameter's value), grid and shared memory as the
     * host flow computed them; device addresses are host ^ dev (the
     * stand-in driver's, tests/unit/fake_cuda.c) */
    int nsyms = k->cg->g->dims.nsyms;
    gpu_str_printf(s, "const int %s_np = %d; /* its parameters, 8 bytes each */\n", gk->name,
                   k->nb + gk->nsyms + (gk->var ? 1 : 0));
    gpu_str_printf(s, "void %s_cu(int64_t grid, int block, int64_t shmem, void **params, uint64_t dev)\n{\n",
                   gk->name);
    gpu_str_printf(s, "    int64_t s[%d] = {0};\n    void *a[%d];\n", nsyms + 1, k->nb + 2);
    for (int i = 0; i < k->nb; i++)
        gpu_str_printf(s, "    a[%d] = (void *)(uintptr_t)(*(const uint64_t *)params[%d] ^ dev);\n", i, i);
    for (int i = 0; i < gk->nsyms; i++)
        gpu_str_printf(s, "    s[%d] = *(const int64_t *)params[%d];\n", gk->syms[i], k->nb + i);
    gpu_str_printf(s, "    a[%d] = s;\n", k->nb);
    if (gk->var)
        gpu_str_printf(s, "    a[%d] = params[%d];\n", k->nb + 1, k->nb + gk->nsyms);
    else
        gpu_str_printf(s, "    a[%d] = NULL;\n", k->nb + 1);
    gpu_str_printf(s, "    disc_emu_run(0, grid, grid, block, shmem, %s_thread, a, \"%s\");\n}\n\n", gk->name,
                   gk->name);
}

bool gpu_kernel(Cg *cg, const Group *grp, const char *name, GpuLang lang, int grid_max, int warp, GpuStr *src,
                GpuKernel *gk)
{
    memset(gk, 0, sizeof *gk);
    snprintf(gk->name, sizeof gk->name, "%s", name);
    for (int i = 0; i < grp->nops; i++) /* the CPU layout pass's blocks: oneDNN's layout, not the GPU's */
        if ((grp->ops[i]->kind == OP_CONV || grp->ops[i]->kind == OP_POOL) && op_attr_int(grp->ops[i], "block", 0))
            return unsupported(cg, grp->ops[i], "a conv or pool on blocked channels (block attribute)");
    bool reduce = grp->kind == FUSE_INPUT || grp->kind == FUSE_STITCH;
    if (!reduce && grp->kind != FUSE_LOOP && grp->kind != FUSE_LIBRARY) {
        char what[160];
        snprintf(what, sizeof what, "%s (a %s group)", op_info(grp->root->kind)->name, fuse_kind_name(grp->kind));
        return unsupported(cg, grp->root, what);
    }
    if (!reduce)
        for (int o = 0; o < grp->nouts; o++)
            if (type_numel(&cg->g->dims, &grp->outs[o]->type) !=
                type_numel(&cg->g->dims, &(grp->root ? grp->root->out[0] : grp->outs[0])->type))
                return unsupported(cg, grp->outs[o]->def, "a loop kernel's outputs of other element counts");
    DimCtx *cx = &cg->g->dims;
    Gk k = {.cg = cg, .grp = grp, .nb = grp->nins + grp->nouts};
    Value *bv[k.nb + 1];
    for (int i = 0; i < k.nb; i++)
        bv[i] = i < grp->nins ? grp->ins[i] : grp->outs[i - grp->nins];
    k.bv = bv;
    Value *rv[grp->nops + 1];
    V rval[grp->nops + 1];
    k.rv = rv;
    k.rval = rval;
    k.usesym = calloc((size_t)cx->nsyms + 1, sizeof *k.usesym);
    if (!k.usesym)
        return diag_oom(cg->d);
    dimmap_init(&k.dims);
    dimmap_init(&k.dims32);
    Value *root = grp->root ? grp->root->out[0] : grp->outs[0];
    const Type *rt = &root->type;
    Dim *numel = type_numel(cx, rt);
    bool flat = !reduce && cg_loop_flat(cg, grp, numel);
    Dim *x[64], *r[64];
    int np = reduce ? 0 : cg_broadcast_pairs(cg, grp, x, r, 64);
    k.ind = 1;
    Dim *one = dim_const(cx, 1);
    bool vec = false;
    gk->grid = NULL;
    Gemm gm;
    const Op *mm = reduce ? NULL : gemm_of(&k, &gm);
    if (reduce) {
        reduce_body(&k, gk, grid_max, warp);
    } else if (mm) {
        gemm_body(&k, &gm, gk, grid_max);
    } else if (np == 0 && flat) {
        bool divisible = false;
        vec = rt->rank > 0 && loop_vec_ok(&k, numel, &divisible);
        if (vec)
            loop_vec(&k, numel, divisible);
        loop_body(&k, rt, numel, flat);
        if (vec) {
            k.ind--;
            line(&k, "}");
        }
    } else { /* index maps: with 32-bit indices where every buffer's elements allow */
        k.ilp = !flat && loop_ilp_ok(&k, rt);
        Dim *fits = flat ? dim_const(cx, 0) : loop_i32_fits(&k, numel);
        if (!fits)
            return diag_setk(cg->d, DIAG_INTERNAL, "codegen: internal: a loop kernel's sizes overflow");
        if (!dim_is(fits, 0)) {
            bool both = !dim_is(fits, 1);
            if (both) {
                line(&k, "if (var & 1) { /* 32-bit indices: every buffer under 2^30 elements */");
                k.ind++;
            }
            k.i32 = true;
            loop_maps(&k, rt, numel, flat, np, x, r);
            k.i32 = false;
            if (both) {
                k.ind--;
                line(&k, "} else {");
                k.ind++;
                loop_maps(&k, rt, numel, flat, np, x, r);
                k.ind--;
                line(&k, "}");
                gk->var = fits;
            }
        } else {
            loop_maps(&k, rt, numel, flat, np, x, r);
        }
    }
    /* the launch: enough blocks for one element per thread (four where the
     * loop may be vectorised or takes LOOP_ILP), at most grid_max */
    if (!gk->grid)
        gk->grid = rt->rank == 0 ? one
             : dim_max(cx, dim_min(cx, dim_ceildiv(cx, numel, dim_const(cx, GPU_BLOCK * (vec ? 4 : k.ilp ? LOOP_ILP : 1))),
                                   dim_const(cx, grid_max)), one);
    gk->block = GPU_BLOCK;
    gk->nbufs = k.nb;
    gk->syms = malloc(((size_t)cx->nsyms + 1) * sizeof *gk->syms);
    for (int i = 0; gk->syms && i < cx->nsyms; i++)
        if (k.usesym[i])
            gk->syms[gk->nsyms++] = i;
    if (cg->d->set) /* an op the GPU path does not take: no text */
        goto done;
    /* the kernel: a comment, the signature, the dims, the loop */
    gpu_str_printf(src, "/* %s: %s group %d:", name, fuse_kind_name(grp->kind), grp->id);
    desc(src, grp);
    gpu_str_printf(src, " */\nDISC_KERNEL void %s(", name);
    /* buffers that do not overlap (distinct slots of the memory plan, run
     * memory, the caller's inputs): __restrict__, so that loads may be
     * issued ahead of stores and read through the read-only cache; not
     * where an epilogue writes over its input in place (Group.over) */
    bool over = false;
    for (int i = 0; grp->over && i < grp->nouts; i++)
        over |= grp->over[i] >= 0;
    for (int i = 0; i < k.nb; i++)
        gpu_str_printf(src, "%s%s%s *%sb%d", i ? ", " : "", i < grp->nins ? "const " : "", stype(bv[i]->type.dtype),
                       over ? "" : "__restrict__ ", i);
    for (int i = 0; i < gk->nsyms; i++)
        gpu_str_printf(src, ", int64_t s%d", gk->syms[i]);
    if (gk->var)
        gpu_str_printf(src, ", int64_t var");
    gpu_str_printf(src, ")\n{\n%s%s%s}\n\n", k.shared.p ? k.shared.p : "", k.pro.p ? k.pro.p : "",
                   k.body.p ? k.body.p : "");
    if (lang == GPU_EMU)
        emu_entry(src, &k, gk);
done:;
    bool oom = k.pro.failed || k.body.failed || k.shared.failed || src->failed || !gk->syms;
    gpu_str_free(&k.pro);
    gpu_str_free(&k.body);
    gpu_str_free(&k.shared);
    dimmap_free(&k.dims);
    dimmap_free(&k.dims32);
    free(k.usesym);
    if (oom && !cg->d->set)
        diag_oom(cg->d);
    if (cg->d->set) {
        gpu_kernel_free(gk);
        return false;
    }
    return true;
}

void gpu_kernel_free(GpuKernel *k)
{
    free(k->syms);
    k->syms = NULL;
    k->nsyms = 0;
}

/* ---- the module -------------------------------------------------------------------- */

typedef struct ModSrc {
    Cg cg;
    GpuLang lang;
    GpuStr *out;
    char **sigs;       /* of the kernels so far: equal groups share one */
    int nsig;
    int *nkernels, *nunsup;
    Diag *why, *d;
} ModSrc;

/* grp's kernel into the module (or a comment saying why not); false on
 * an error that is not "not supported yet". A group no template takes
 * (codegen's DIAG_MODEL refusal: a column read off its column) is split
 * into its ops, as the host flow does (host.c, emit_single). */
static bool module_group(ModSrc *ms, const Group *grp)
{
    Diag e = {0};
    ms->cg.d = &e;
    char *sig = cg_kernel_signature(grp, NULL);
    if (!sig)
        return diag_oom(ms->d);
    for (int j = 0; j < ms->nsig; j++)
        if (!strcmp(ms->sigs[j], sig)) {
            free(sig);
            return true;
        }
    char name[32];
    snprintf(name, sizeof name, "disc_k%d", *ms->nkernels);
    GpuKernel gk;
    if (gpu_kernel(&ms->cg, grp, name, ms->lang, GPU_GRID_MAX, 32, ms->out, &gk)) {
        ms->sigs[ms->nsig++] = sig;
        ++*ms->nkernels;
        gpu_kernel_free(&gk);
        return true;
    }
    free(sig);
    if (e.kind == DIAG_MODEL && grp->nops > 1 && grp->kind != FUSE_LIBRARY) {
        gpu_str_printf(ms->out, "/* group %d (%s", grp->id, fuse_kind_name(grp->kind));
        desc(ms->out, grp);
        gpu_str_printf(ms->out, "): split up: %s */\n\n", e.msg);
        for (int i = 0; i < grp->nops; i++) {
            Op *op = grp->ops[i];
            Value *ins[op->nin + 1];
            int nins = 0;
            for (int j = 0; j < op->nin; j++) {
                bool dup = false;
                for (int l = 0; l < nins; l++)
                    dup |= ins[l] == op->in[j];
                if (!dup)
                    ins[nins++] = op->in[j];
            }
            Group g1 = {.kind = fuse_kind_of(op), .id = grp->id, .ops = &op, .nops = 1, .ins = ins, .nins = nins,
                        .outs = op->out, .nouts = op->nout, .root = op};
            if (g1.kind != FUSE_SHAPE && !module_group(ms, &g1))
                return false;
        }
        return true;
    }
    if (e.kind != DIAG_UNSUPPORTED)
        return diag_copy(ms->d, &e);
    ++*ms->nunsup;
    if (ms->why)
        diag_copy(ms->why, &e);
    gpu_str_printf(ms->out, "/* group %d (%s", grp->id, fuse_kind_name(grp->kind));
    desc(ms->out, grp);
    gpu_str_printf(ms->out, "):\n   %s */\n\n", e.msg);
    return true;
}

bool gpu_module_source(const CgModule *m, GpuLang lang, GpuStr *out, int *nkernels, int *nunsup, Diag *why,
                       Diag *d)
{
    ModSrc ms = {.cg = {.g = m->g, .si = m->si, .plan = m->plan, .mp = m->mp}, .lang = lang, .out = out,
                 .nkernels = nkernels, .nunsup = nunsup, .why = why, .d = d};
    /* a kernel per group, or per op of a group split up, at most */
    if (!(ms.sigs = calloc((size_t)m->plan->n + (size_t)m->g->nops + 1, sizeof *ms.sigs)))
        return diag_oom(d);
    *nkernels = *nunsup = 0;
    gpu_str_printf(out, "/* disc: %s kernels of %s */\n%s%s%s\n", lang == GPU_HIP ? "HIP" : "CUDA",
                   m->g->name ? m->g->name : "a model", lang == GPU_EMU ? "" : "#include \"disc_",
                   lang == GPU_EMU ? "" : lang == GPU_HIP ? "hip" : "cuda", lang == GPU_EMU ? "" : ".h\"\n");
    bool ok = true;
    for (int i = 0; i < m->plan->n && ok; i++) {
        const Group *grp = &m->plan->groups[i];
        if (grp->kind == FUSE_OPAQUE)
            gpu_str_printf(out, "/* group %d (%s): on the host */\n\n", grp->id, op_info(grp->root->kind)->name);
        else if (grp->kind != FUSE_SHAPE)
            ok = module_group(&ms, grp);
    }
    for (int i = 0; i < ms.nsig; i++)
        free(ms.sigs[i]);
    free(ms.sigs);
    if (ok && out->failed)
        ok = diag_oom(d);
    return ok;
}
