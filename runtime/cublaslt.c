/*
 * cublaslt.c — a cuda model's matmuls through cuBLASLt.
 *
 * libcublasLt is loaded with dlopen on first use, as the driver is
 * (cudrv.c), so the runtime archive links no CUDA library and builds where
 * the toolkit is absent; the types and constants it uses are cublasLt.h's,
 * declared again in cublaslt_abi.h (unit/test_cublaslt_abi checks them
 * against the toolkit's header where one is installed).
 *
 * The host flow calls disc_rt_dev_matmul with disc_rt_call_matmul's fields
 * (rt.h): C[b][i][j] = sum_k A[b][i][k] B[b][k][j], row-major C, A and B
 * as strided views whose k or i (A) and k or j (B) stride is 1. cuBLASLt's
 * matrices are column-major, so the call computes C's transpose, an n x m
 * column-major matrix with C's own memory and leading dimension:
 *
 *     D (n x m) = X (n x k) . Y (k x m),   X = B^T, Y = A^T
 *
 * where X is B's memory read as an n x k column-major matrix (op N) when
 * B's j stride is 1, or as a k x n one transposed (op T) when its k
 * stride is 1; Y likewise from A. The batch is the layouts' strided
 * batch (a stride of 0 broadcasts an operand). The epilogue the flow fused
 * (hostlib.c) is cuBLASLt's: a bias over C's columns (D's rows, as
 * cuBLASLt's bias vector runs), then ReLU or GELU in its tanh form; a
 * residual is cuBLASLt's C operand with beta 1 (before the activation, so
 * the flow fuses one only where there is none).
 *
 * A plan per distinct call (the fields, the epilogue, and the alignment
 * of each pointer, which the heuristic must know: an algorithm picked
 * for 256-byte aligned memory may not run on less) holds the descriptors
 * and the algorithm cublasLtMatmulAlgoGetHeuristic chose, so a shape seen
 * before costs only the cublasLtMatmul call. Plans live with the device
 * (plans.h). The workspace
 * (32 MiB on sm_90 and later, as NVIDIA advises for Hopper, else 4) is
 * one device buffer kept with the handle. f32 runs in f32 (TF32 only with
 * DISC_TF32=1), f16 and bf16 accumulate in f32, f64 in f64.
 *
 * Where cuBLASLt has no algorithm for a call (its heuristic finds none,
 * or says NOT_SUPPORTED), the plan falls back to cuBLAS's
 * cublasGemmStridedBatchedEx (libcublas, loaded then) on the same
 * operands, with the residual (copied into C first where it is another
 * buffer, then beta 1) but without the bias and the activation: the call
 * returns 1 for those, and the host flow runs them as a kernel of the
 * model's module (hostlib.c, the call's epilogue compiled for just that).
 * DISC_PROFILE names such a call "cublas ... (no cuBLASLt algorithm)".
 * DISC_CUBLAS_FALLBACK=1 sends every new plan there (to test that path
 * on a GPU).
 *
 * Runs of one compiled model take turns (exec.c, aot.c), so a device's
 * plans need no lock of their own.
 */
#include "ir/ir.h"
#include "runtime/cublaslt_abi.h"
#include "runtime/plans.h"
#include "runtime/rt.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct {
    pthread_once_t once;
    void *lib;
    char name[32]; /* the soname that loaded */
    char why[600]; /* why the library is not there, or "" */
    size_t version;
    LtStatus (*Create)(LtHandle *);
    LtStatus (*Destroy)(LtHandle);
    const char *(*GetStatusName)(LtStatus);
    const char *(*GetStatusString)(LtStatus);
    size_t (*GetVersion)(void);
    LtStatus (*MatmulDescCreate)(LtDesc *, int, int);
    LtStatus (*MatmulDescDestroy)(LtDesc);
    LtStatus (*MatmulDescSetAttribute)(LtDesc, int, const void *, size_t);
    LtStatus (*MatrixLayoutCreate)(LtLayout *, int, uint64_t, uint64_t, int64_t);
    LtStatus (*MatrixLayoutDestroy)(LtLayout);
    LtStatus (*MatrixLayoutSetAttribute)(LtLayout, int, const void *, size_t);
    LtStatus (*MatmulPreferenceCreate)(LtPref *);
    LtStatus (*MatmulPreferenceDestroy)(LtPref);
    LtStatus (*MatmulPreferenceSetAttribute)(LtPref, int, const void *, size_t);
    LtStatus (*MatmulAlgoGetHeuristic)(LtHandle, LtDesc, LtLayout, LtLayout, LtLayout, LtLayout, LtPref, int, LtHeuristic *, int *);
    LtStatus (*Matmul)(LtHandle, LtDesc, const void *, const void *, LtLayout, const void *, LtLayout, const void *,
                     const void *, LtLayout, void *, LtLayout, const LtAlgo *, void *, size_t, void *);
} lt = {.once = PTHREAD_ONCE_INIT};

static struct {
    pthread_once_t once;
    void *lib;
    char name[32];
    char why[600];
    LtStatus (*Create)(BlasHandle *);
    LtStatus (*Destroy)(BlasHandle);
    LtStatus (*SetStream)(BlasHandle, void *);
    LtStatus (*SetWorkspace)(BlasHandle, void *, size_t);
    const char *(*GetStatusString)(LtStatus);
    LtStatus (*GemmStridedBatchedEx)(BlasHandle, int, int, int, int, int, const void *, const void *, int, int,
                                     long long, const void *, int, int, long long, const void *, void *, int, int,
                                     long long, int, int, int);
} cb = {.once = PTHREAD_ONCE_INIT};

static void blas_load(void)
{
    static const char *names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so"};
    const char *err = NULL;
    for (size_t i = 0; i < sizeof names / sizeof *names && !cb.lib; i++)
        if ((cb.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL)))
            snprintf(cb.name, sizeof cb.name, "%s", names[i]);
        else if (!err)
            err = dlerror();
    if (!cb.lib) {
        snprintf(cb.why, sizeof cb.why, "cannot load libcublas.so.13 or .12: %s", err ? err : "not found");
        return;
    }
    struct {
        void **fn;
        const char *name;
    } syms[] = {
        {(void **)&cb.Create, "cublasCreate_v2"}, {(void **)&cb.Destroy, "cublasDestroy_v2"},
        {(void **)&cb.SetStream, "cublasSetStream_v2"}, {(void **)&cb.SetWorkspace, "cublasSetWorkspace_v2"},
        {(void **)&cb.GetStatusString, "cublasGetStatusString"},
        {(void **)&cb.GemmStridedBatchedEx, "cublasGemmStridedBatchedEx"},
    };
    for (size_t i = 0; i < sizeof syms / sizeof *syms; i++)
        if (!(*syms[i].fn = dlsym(cb.lib, syms[i].name))) {
            snprintf(cb.why, sizeof cb.why, "%s has no %s", cb.name, syms[i].name);
            return;
        }
}

static void lib_load(void)
{
    static const char *names[] = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"};
    const char *err = NULL;
    for (size_t i = 0; i < sizeof names / sizeof *names && !lt.lib; i++)
        if ((lt.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL)))
            snprintf(lt.name, sizeof lt.name, "%s", names[i]);
        else if (!err)
            err = dlerror();
    if (!lt.lib) {
        snprintf(lt.why, sizeof lt.why, "cannot load libcublasLt.so.13 or .12 (cuBLASLt, from the CUDA toolkit): %s",
                 err ? err : "not found");
        return;
    }
    struct {
        void **fn;
        const char *name;
    } syms[] = {
#define SYM(f) {(void **)&lt.f, "cublasLt" #f}
        SYM(Create), SYM(Destroy), SYM(GetStatusName), SYM(GetStatusString), SYM(GetVersion),
        SYM(MatmulDescCreate), SYM(MatmulDescDestroy), SYM(MatmulDescSetAttribute),
        SYM(MatrixLayoutCreate), SYM(MatrixLayoutDestroy), SYM(MatrixLayoutSetAttribute),
        SYM(MatmulPreferenceCreate), SYM(MatmulPreferenceDestroy), SYM(MatmulPreferenceSetAttribute),
        SYM(MatmulAlgoGetHeuristic), SYM(Matmul),
#undef SYM
    };
    for (size_t i = 0; i < sizeof syms / sizeof *syms; i++)
        if (!(*syms[i].fn = dlsym(lt.lib, syms[i].name))) {
            snprintf(lt.why, sizeof lt.why, "%s has no %s (disc needs cuBLASLt 12 or later)", lt.name, syms[i].name);
            return;
        }
    lt.version = lt.GetVersion();
}

int disc_blas_available(char *why, size_t n)
{
    pthread_once(&lt.once, lib_load);
    if (lt.why[0] && why && n)
        snprintf(why, n, "%s", lt.why);
    return !lt.why[0];
}

/* Records the failure of `what` with cuBLASLt's name and text for s; -1. */
static int failed(DiscRt *rt, LtStatus s, const char *what)
{
    const char *name = lt.GetStatusName ? lt.GetStatusName(s) : NULL;
    const char *text = lt.GetStatusString ? lt.GetStatusString(s) : NULL;
    disc_rt_fail(rt, "cuda: cuBLASLt: %s: %s (%s)", what, name ? name : "error", text ? text : "");
    return -1;
}

/* ---- plans -------------------------------------------------------------------- */

/* What makes two calls the same plan. */
typedef struct Key {
    int64_t f[DISC_MM_NFIELDS]; /* the fields, DISC_MM_WEIGHTS_CONST and _PANEL zeroed */
    int32_t bias, residual;
    uint32_t align[4];          /* of X (B), Y (A), C, D */
    int32_t padded;             /* B's and C's rows padded (pad_rows) */
} Key;

typedef struct Plan {
    DiscPlan link;        /* first, the key right after it (plans.h) */
    Key key;
    LtDesc desc;
    LtLayout lx, ly, lc;
    LtAlgo algo;
    size_t ws;            /* the workspace the algorithm needs */
    char name[112];       /* for DISC_PROFILE */
    /* cuBLAS's call where cuBLASLt has no algorithm: D = X . Y, n x m */
    bool cublas;
    int opx, opy, type, compute;
    int64_t n, m, k, xld, yld, cld, xs, ys, cs, batch;
} Plan;
_Static_assert(offsetof(Plan, key) == sizeof(DiscPlan), "a plan's key follows its link");

struct DiscBlas {
    LtHandle h;
    BlasHandle cublas;    /* made at the first call cuBLASLt has no algorithm for */
    DiscDevPtr ws;
    size_t wsbytes;
    bool tf32;            /* DISC_TF32=1 */
    DiscPlans plans;
};

static void plan_free(DiscPlan *dp)
{
    Plan *p = (Plan *)dp;
    if (p->desc)
        lt.MatmulDescDestroy(p->desc);
    if (p->lx)
        lt.MatrixLayoutDestroy(p->lx);
    if (p->ly)
        lt.MatrixLayoutDestroy(p->ly);
    if (p->lc)
        lt.MatrixLayoutDestroy(p->lc);
    free(p);
}

void disc_blas_free(DiscBlas *b)
{
    if (!b)
        return;
    disc_plans_clear(&b->plans);
    if (b->h)
        lt.Destroy(b->h);
    if (b->cublas)
        cb.Destroy(b->cublas);
    free(b); /* the workspace goes with the device's buffers */
}

/* The device's cuBLASLt: made on first use. */
static DiscBlas *blas(DiscRt *rt, DiscGpu *g)
{
    DiscBlas **slot = disc_gpu_blas_slot(g);
    if (*slot)
        return *slot;
    if (disc_gpu_capturing(rt, g, "cuBLASLt's first use") != 0) /* its workspace lives with the device */
        return NULL;
    char why[600];
    if (!disc_blas_available(why, sizeof why)) {
        disc_rt_fail(rt, "cuda: %s (this model's matmuls were compiled for cuBLASLt; DISC_CUBLASLT=0 at compile "
                         "time makes disc's own GEMM kernel instead)", why);
        return NULL;
    }
    DiscBlas *b = calloc(1, sizeof *b);
    if (!b) {
        disc_rt_fail(rt, "cuda: out of memory");
        return NULL;
    }
    b->plans.keysize = sizeof(Key);
    b->plans.free = plan_free;
    const char *tf = getenv("DISC_TF32");
    b->tf32 = tf && !strcmp(tf, "1");
    b->wsbytes = (size_t)(disc_gpu_info(g)->major >= 9 ? 32 : 4) << 20;
    bool ok = disc_gpu_current(rt, g) == 0;
    LtStatus s = ok ? lt.Create(&b->h) : 0;
    if (s) {
        b->h = NULL;
        failed(rt, s, "cublasLtCreate");
        ok = false;
    }
    if (!ok || !(b->ws = disc_gpu_alloc(rt, g, b->wsbytes))) {
        disc_blas_free(b);
        return NULL;
    }
    return *slot = b;
}

static uint32_t alignment(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    uint32_t al = 16; /* what vector loads and TMA need; more only narrows the choice (PyTorch asks the same) */
    while (al > 1 && a % al)
        al /= 2;
    return al;
}

static int cuda_type(int64_t dt)
{
    switch (dt) {
    case DT_F32: return R_32F;
    case DT_F16: return R_16F;
    case DT_BF16: return R_16BF;
    case DT_F64: return R_64F;
    default: return -1;
    }
}

/* A layout of rows x cols, column-major with leading dimension ld, and
 * the batch. */
static LtStatus layout(LtLayout *l, int type, int64_t rows, int64_t cols, int64_t ld, int64_t batch, int64_t stride)
{
    if (cols == 1 && ld < rows)
        ld = rows; /* one column: its stride is anything */
    LtStatus s = lt.MatrixLayoutCreate(l, type, (uint64_t)rows, (uint64_t)cols, ld > 0 ? ld : 1);
    int32_t n = (int32_t)batch;
    if (!s && batch > 1 && !(s = lt.MatrixLayoutSetAttribute(*l, LAYOUT_BATCH_COUNT, &n, sizeof n)))
        s = lt.MatrixLayoutSetAttribute(*l, LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride);
    return s;
}

/* An operand's view as a column-major matrix of rows x cols: by its
 * stride along rows (sr) and cols (sc); op N where sr is 1, op T (the
 * cols x rows matrix, transposed) where sc is 1. False: neither. */
static bool view(int64_t rows, int64_t cols, int64_t sr, int64_t sc, int *op, int64_t *r, int64_t *c, int64_t *ld)
{
    if (sr == 1 || rows == 1) {
        *op = OP_N, *r = rows, *c = cols, *ld = sc;
        return cols == 1 || sc >= rows;
    }
    if (sc == 1 || cols == 1) {
        *op = OP_T, *r = cols, *c = rows, *ld = sr;
        return rows == 1 || sr >= cols;
    }
    return false;
}

static Plan *plan_make(DiscRt *rt, DiscBlas *b, const Key *key)
{
    const int64_t *f = key->f;
    int64_t batch = f[DISC_MM_BATCH], m = f[DISC_MM_M], n = f[DISC_MM_N], k = f[DISC_MM_K];
    int64_t post = f[DISC_MM_POST], dt = f[DISC_MM_DTYPE];
    int type = cuda_type(dt);
    const char *epi = post == DISC_POST_RELU ? "relu" : post == DISC_POST_GELU_TANH ? "gelu" : "";
    if (type < 0 || (post != DISC_POST_NONE && post != DISC_POST_RELU && post != DISC_POST_GELU_TANH) ||
        (key->residual && post != DISC_POST_NONE)) {
        disc_rt_fail(rt, "cuda: cuBLASLt: a matmul of %s with epilogue %lld%s: not one disc hands it (f32, f16, "
                     "bf16, f64; bias, ReLU, tanh-GELU, or a residual alone)",
                     cuda_type(dt) < 0 ? "an unsupported dtype" : dtype_name((DType)dt), (long long)post,
                     key->residual ? " and a residual" : "");
        return NULL;
    }
    /* X = B^T (n x k), Y = A^T (k x m); an empty k reads a column and a
     * row of zeros (k 1, the caller's scratch) */
    int opx, opy;
    int64_t xr, xc, xld, yr, yc, yld, xs = f[DISC_MM_B_STRIDE], ys = f[DISC_MM_A_STRIDE];
    bool ok;
    if (k == 0) {
        opx = opy = OP_N, xr = n, xc = 1, xld = n, yr = 1, yc = m, yld = 1, xs = ys = 0;
        ok = true;
    } else {
        ok = view(n, k, f[DISC_MM_B_STRIDE + 2], f[DISC_MM_B_STRIDE + 1], &opx, &xr, &xc, &xld) &&
             view(k, m, f[DISC_MM_A_STRIDE + 2], f[DISC_MM_A_STRIDE + 1], &opy, &yr, &yc, &yld);
    }
    if (!ok || f[DISC_MM_C_STRIDE + 2] != 1 || f[DISC_MM_C_STRIDE + 1] < n) {
        disc_rt_fail(rt, "cuda: cuBLASLt: matmul %lldx%lldx%lld: an operand with no unit stride (strides A %lld %lld "
                     "%lld, B %lld %lld %lld)", (long long)m, (long long)n, (long long)k,
                     (long long)f[DISC_MM_A_STRIDE], (long long)f[DISC_MM_A_STRIDE + 1],
                     (long long)f[DISC_MM_A_STRIDE + 2], (long long)f[DISC_MM_B_STRIDE],
                     (long long)f[DISC_MM_B_STRIDE + 1], (long long)f[DISC_MM_B_STRIDE + 2]);
        return NULL;
    }
    Plan *p = calloc(1, sizeof *p);
    if (!p) {
        disc_rt_fail(rt, "cuda: out of memory");
        return NULL;
    }
    p->key = *key;
    snprintf(p->name, sizeof p->name, "cublasLt %s%lldx%lldx%lld %s%s%s%s%s%s", batch > 1 ? "batch " : "",
             (long long)m, (long long)n, (long long)k, dtype_name((DType)dt), key->bias ? " +bias" : "",
             *epi ? " +" : "", epi, key->residual ? " +residual" : "", key->padded ? " (rows padded)" : "");
    if (batch > 1) {
        char *e = p->name + strlen(p->name);
        snprintf(e, sizeof p->name - (size_t)(e - p->name), " (x%lld)", (long long)batch);
    }
    int compute = dt == DT_F64 ? COMPUTE_64F : dt == DT_F32 && b->tf32 ? COMPUTE_32F_FAST_TF32 : COMPUTE_32F;
    int32_t ta = opx, tb = opy;
    uint32_t e = post == DISC_POST_RELU ? EPI_RELU : post == DISC_POST_GELU_TANH ? EPI_GELU : EPI_DEFAULT;
    if (key->bias)
        e = e == EPI_DEFAULT ? EPI_BIAS : e == EPI_RELU ? EPI_RELU_BIAS : EPI_GELU_BIAS;
    const char *what = "cublasLtMatmulDescCreate";
    LtStatus s = lt.MatmulDescCreate(&p->desc, compute, dt == DT_F64 ? R_64F : R_32F);
    if (!s && (what = "cublasLtMatmulDescSetAttribute", 1) &&
        !(s = lt.MatmulDescSetAttribute(p->desc, DESC_TRANSA, &ta, sizeof ta)) &&
        !(s = lt.MatmulDescSetAttribute(p->desc, DESC_TRANSB, &tb, sizeof tb)))
        s = lt.MatmulDescSetAttribute(p->desc, DESC_EPILOGUE, &e, sizeof e);
    int64_t cstride = batch > 1 ? f[DISC_MM_C_STRIDE] : 0;
    if (!s && (what = "cublasLtMatrixLayoutCreate", 1) &&
        !(s = layout(&p->lx, type, xr, xc, xld, batch, xs)) && !(s = layout(&p->ly, type, yr, yc, yld, batch, ys)))
        s = layout(&p->lc, type, n, m, f[DISC_MM_C_STRIDE + 1], batch, cstride);
    LtPref pref = NULL;
    uint64_t wsb = b->wsbytes;
    if (!s && (what = "cublasLtMatmulPreference", 1) && !(s = lt.MatmulPreferenceCreate(&pref)))
        s = lt.MatmulPreferenceSetAttribute(pref, PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb);
    for (int i = 0; i < 4 && !s; i++)
        s = lt.MatmulPreferenceSetAttribute(pref, PREF_MIN_ALIGNMENT_A + i, &key->align[i], sizeof key->align[i]);
    LtHeuristic h;
    int found = 0;
    memset(&h, 0, sizeof h);
    if (!s && (what = "cublasLtMatmulAlgoGetHeuristic", 1))
        s = lt.MatmulAlgoGetHeuristic(b->h, p->desc, p->lx, p->ly, p->lc, p->lc, pref, 1, &h, &found);
    if (pref)
        lt.MatmulPreferenceDestroy(pref);
    const char *force = getenv("DISC_CUBLAS_FALLBACK");
    if (!s && force && !strcmp(force, "1"))
        found = 0; /* as if cuBLASLt had none: cuBLAS's path, checked on a GPU (run_on_device.sh) */
    if (!strcmp(what, "cublasLtMatmulAlgoGetHeuristic") && (s == BLAS_STATUS_NOT_SUPPORTED || (!s && found < 1))) {
        /* no algorithm: cuBLAS's GEMM on the same views */
        p->cublas = true;
        p->opx = opx, p->opy = opy, p->type = type, p->compute = compute;
        p->n = n, p->m = m, p->k = k ? k : 1, p->cld = f[DISC_MM_C_STRIDE + 1];
        /* a matrix of one column: its stride is anything (as layout()) */
        p->xld = xc == 1 && xld < xr ? xr : xld, p->yld = yc == 1 && yld < yr ? yr : yld;
        if (m == 1 && p->cld < n)
            p->cld = n;
        p->xs = xs, p->ys = ys, p->cs = cstride, p->batch = batch;
        snprintf(p->name, sizeof p->name, "cublas %s%lldx%lldx%lld %s (no cuBLASLt algorithm)",
                 batch > 1 ? "batch " : "", (long long)m, (long long)n, (long long)k, dtype_name((DType)dt));
        return p;
    }
    if (s || found < 1 || h.state) {
        char msg[300];
        snprintf(msg, sizeof msg, "%s for %s", what, p->name);
        if (s || h.state)
            failed(rt, s ? s : h.state, msg);
        else
            disc_rt_fail(rt, "cuda: cuBLASLt: no algorithm for %s (alignments %u %u %u %u)", p->name,
                         key->align[0], key->align[1], key->align[2], key->align[3]);
        plan_free(&p->link);
        return NULL;
    }
    p->algo = h.algo;
    p->ws = h.workspaceSize;
    return p;
}

static DiscPlan *make(DiscRt *rt, void *b, const void *key)
{
    Plan *p = plan_make(rt, b, key);
    return p ? &p->link : NULL;
}

/* ---- the call ------------------------------------------------------------------ */

/* The device's cuBLAS handle, on the model's stream with cuBLASLt's
 * workspace (its calls and cuBLASLt's take turns on that stream). */
static BlasHandle cublas(DiscRt *rt, DiscGpu *g, DiscBlas *b, const Plan *p)
{
    if (b->cublas)
        return b->cublas;
    pthread_once(&cb.once, blas_load);
    if (cb.why[0]) {
        disc_rt_fail(rt, "cuda: cuBLASLt has no algorithm for %s, and cuBLAS, its fallback, %s", p->name, cb.why);
        return NULL;
    }
    if (disc_gpu_capturing(rt, g, "cuBLAS's first use") != 0)
        return NULL;
    const char *what = "cublasCreate_v2";
    LtStatus s = cb.Create(&b->cublas);
    if (s)
        b->cublas = NULL;
    if (!s)
        s = (what = "cublasSetStream_v2", cb.SetStream(b->cublas, disc_gpu_stream(g)));
    if (!s) { /* cuBLAS asks for a workspace aligned to 256 bytes */
        DiscDevPtr at = (b->ws + 255) & ~(DiscDevPtr)255;
        what = "cublasSetWorkspace_v2";
        s = cb.SetWorkspace(b->cublas, (void *)(uintptr_t)at, b->wsbytes - (size_t)(at - b->ws));
    }
    if (s) {
        const char *text = cb.GetStatusString ? cb.GetStatusString(s) : NULL;
        disc_rt_fail(rt, "cuda: cuBLAS: %s: %s (status %d)", what, text ? text : "error", s);
        if (b->cublas)
            cb.Destroy(b->cublas);
        b->cublas = NULL;
    }
    return b->cublas;
}

/* p's product through cublasGemmStridedBatchedEx: c = x . y, plus the
 * residual (copied into c first where it is another buffer, beta 1). */
static int fallback(DiscRt *rt, DiscGpu *g, DiscBlas *b, const Plan *p, const int64_t *f, const void *x,
                    const void *y, const void *residual, void *c)
{
    BlasHandle h = cublas(rt, g, b, p);
    if (!h)
        return -1;
    const int64_t lim = 0x7fffffff;
    if (p->n > lim || p->m > lim || p->k > lim || p->xld > lim || p->yld > lim || p->cld > lim || p->batch > lim) {
        disc_rt_fail(rt, "cuda: cuBLAS: %s: a size past its int", p->name);
        return -1;
    }
    size_t esize = dtype_size((DType)f[DISC_MM_DTYPE]);
    if (residual && residual != c) /* the residual has C's layout (hostlib.c) */
        for (int64_t i = 0; i < p->batch; i++)
            if (disc_gpu_copy2d(rt, g, (DiscDevPtr)(uintptr_t)c + (DiscDevPtr)(i * p->cs * (int64_t)esize),
                                (size_t)p->cld * esize,
                                (DiscDevPtr)(uintptr_t)residual + (DiscDevPtr)(i * p->cs * (int64_t)esize),
                                (size_t)p->cld * esize, (size_t)p->n * esize, (size_t)p->m) != 0)
                return -1;
    double one = 1, zero = 0;
    float onef = 1, zerof = 0;
    bool f64 = p->compute == COMPUTE_64F;
    const void *alpha = f64 ? (const void *)&one : &onef;
    const void *beta = residual ? alpha : f64 ? (const void *)&zero : &zerof;
    LtStatus s = cb.GemmStridedBatchedEx(h, p->opx, p->opy, (int)p->n, (int)p->m, (int)p->k, alpha, x, p->type,
                                         (int)p->xld, p->xs, y, p->type, (int)p->yld, p->ys, beta, c, p->type,
                                         (int)p->cld, p->cs, (int)p->batch, p->compute, BLAS_GEMM_DEFAULT);
    if (s) {
        const char *text = cb.GetStatusString ? cb.GetStatusString(s) : NULL;
        disc_rt_fail(rt, "cuda: cuBLAS: cublasGemmStridedBatchedEx (%s): %s (status %d)", p->name,
                     text ? text : "error", s);
        return -1;
    }
    return 0;
}

/* Elements of esize bytes in 16 bytes. */
static int64_t npad_step(size_t esize) { return 16 / (int64_t)esize; }

/* Half-precision rows that are not 16 bytes apart put cuBLASLt on its
 * unaligned kernels: GPT-2's f16 head (8192 x 50257 x 768, a row of
 * 50257 halves) took 5.05 ms a call on an H200, where torch.compile's
 * call on rows Inductor had padded took 0.92. For such a product of at
 * least PAD_MIN_M rows (below it the copies cost more than they save: the
 * product is the weights' read), C is made in run memory with its rows
 * padded to 16 bytes and copied out, and B, where its rows of n are the
 * unaligned ones, copied in the same way first. The elements in the
 * padding are never read. Returns the padded row length, or 0. */
enum { PAD_MIN_M = 256 };

static int64_t pad_rows(const int64_t *f, size_t esize, bool residual)
{
    int64_t dt = f[DISC_MM_DTYPE], ldc = f[DISC_MM_C_STRIDE + 1], step = npad_step(esize);
    if ((dt != DT_F16 && dt != DT_BF16) || f[DISC_MM_BATCH] != 1 || residual || f[DISC_MM_K] <= 0 ||
        f[DISC_MM_M] < PAD_MIN_M || ldc % step == 0)
        return 0;
    return (f[DISC_MM_N] + step - 1) / step * step;
}

int32_t disc_rt_dev_matmul(DiscRt *rt, const int64_t *f, const void *a, const void *b, const void *bias,
                           const void *residual, void *c)
{
    DiscGpu *g = disc_rt_run_gpu(rt);
    if (!g)
        return -1;
    int64_t batch = f[DISC_MM_BATCH], m = f[DISC_MM_M], n = f[DISC_MM_N], k = f[DISC_MM_K];
    if (batch <= 0 || m <= 0 || n <= 0)
        return 0; /* an empty result */
    DiscBlas *bl = blas(rt, g);
    if (!bl)
        return -1;
    size_t esize = dtype_size((DType)f[DISC_MM_DTYPE]);
    const void *x = b, *y = a;
    if (k == 0) { /* zeros for X and Y */
        int64_t words = ((m > n ? m : n) * (int64_t)esize + 3) / 4;
        void *z = disc_rt_dev_alloc(rt, 4 * words);
        if (!z || disc_rt_dev_fill(rt, z, words, 4, 0) != 0)
            return -1;
        x = y = z;
    }
    Key key;
    memset(&key, 0, sizeof key);
    memcpy(key.f, f, sizeof key.f);
    key.f[DISC_MM_WEIGHTS_CONST] = key.f[DISC_MM_PANEL] = 0;
    key.bias = bias != NULL;
    key.residual = residual != NULL;
    /* rows padded: C (and B where its rows are n long) in run memory */
    int64_t npad = pad_rows(f, esize, residual != NULL);
    void *cout = c, *bpad = NULL;
    bool bcopy = npad && f[DISC_MM_B_STRIDE + 2] == 1 && f[DISC_MM_B_STRIDE + 1] % npad_step(esize) != 0;
    if (npad) {
        if (!(c = disc_rt_dev_alloc(rt, m * npad * (int64_t)esize)) ||
            (bcopy && !(bpad = disc_rt_dev_alloc(rt, k * npad * (int64_t)esize))))
            return -1;
        key.f[DISC_MM_C_STRIDE] = m * npad, key.f[DISC_MM_C_STRIDE + 1] = npad;
        if (bcopy)
            key.f[DISC_MM_B_STRIDE] = k * npad, key.f[DISC_MM_B_STRIDE + 1] = npad, x = bpad;
        key.padded = 1;
    }
    const void *cin = residual ? residual : c;
    key.align[0] = alignment(x);
    /* (cuBLAS's fallback, if the plan takes it, reads the same x and y) */
    key.align[1] = alignment(y);
    key.align[2] = alignment(cin);
    key.align[3] = alignment(c);
    Plan *p = (Plan *)disc_plans_get(&bl->plans, rt, g, &key, make, bl);
    if (!p || disc_gpu_current(rt, g) != 0)
        return -1;
    LtStatus s;
    if (bias && (s = lt.MatmulDescSetAttribute(p->desc, DESC_BIAS_POINTER, &bias, sizeof bias)) != 0)
        return failed(rt, s, "cublasLtMatmulDescSetAttribute (the bias)");
    double one = 1, zero = 0;
    float onef = 1, zerof = 0;
    bool f64 = f[DISC_MM_DTYPE] == DT_F64;
    const void *alpha = f64 ? (const void *)&one : &onef;
    const void *beta = residual ? alpha : f64 ? (const void *)&zero : &zerof;
    int t = -1;
    if (disc_rt_profiling() && (t = disc_gpu_time_start(rt, g, p, p->name)) < 0)
        return -1;
    size_t row = (size_t)n * esize, prow = (size_t)npad * esize;
    if (bcopy && disc_gpu_copy2d(rt, g, (DiscDevPtr)(uintptr_t)bpad, prow, (DiscDevPtr)(uintptr_t)b,
                                 (size_t)f[DISC_MM_B_STRIDE + 1] * esize, row, (size_t)k) != 0)
        return -1;
    if (p->cublas) {
        if (fallback(rt, g, bl, p, f, x, y, residual, c) != 0)
            return -1;
    } else {
        s = lt.Matmul(bl->h, p->desc, alpha, x, p->lx, y, p->ly, beta, cin, p->lc, c, p->lc, &p->algo,
                      (void *)(uintptr_t)bl->ws, p->ws, disc_gpu_stream(g));
        if (s) {
            char msg[160];
            snprintf(msg, sizeof msg, "cublasLtMatmul (%s)", p->name);
            return failed(rt, s, msg);
        }
    }
    if (npad && disc_gpu_copy2d(rt, g, (DiscDevPtr)(uintptr_t)cout, (size_t)f[DISC_MM_C_STRIDE + 1] * esize,
                                (DiscDevPtr)(uintptr_t)c, prow, row, (size_t)m) != 0)
        return -1;
    if (disc_gpu_time_end(rt, g, t) != 0)
        return -1;
    /* the bias and the activation left to the flow's kernel */
    return p->cublas && (bias || f[DISC_MM_POST] != DISC_POST_NONE) ? 1 : 0;
}
