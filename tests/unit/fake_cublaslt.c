/*
 * fake_cublaslt.c — a stand-in for libcublasLt.so.13, for testing
 * runtime/cublaslt.c and the cuda backend's matmuls where there is no GPU:
 * built as build/fakecuda/libcublasLt.so.13 beside the stand-in driver
 * (fake_cuda.c), found through LD_LIBRARY_PATH.
 *
 * It implements what cuBLASLt's documentation says of the calls disc
 * makes, strictly, and independently of how disc maps its row-major
 * matmuls onto them: matrices are column-major (element (r, c) of a
 * layout at r + c * ld, ld >= rows), D = epilogue(alpha op(A) op(B) + beta
 * C + bias) with op from TRANSA / TRANSB, C read only where beta is not 0,
 * the bias a vector over D's rows (its batch stride from the descriptor,
 * default 0), GELU in its tanh form, strided batches from each layout's
 * BATCH_COUNT and STRIDED_BATCH_OFFSET (in elements). Attributes are
 * checked for their documented sizes; a layout whose ld is below its rows,
 * shapes that do not chain, or mixed types are CUBLAS_STATUS_INVALID_VALUE.
 * The algorithm the heuristic picks requires the alignments the
 * preference stated (default 256 bytes) and a workspace of 1 KiB, and
 * cublasLtMatmul refuses (CUBLAS_STATUS_NOT_SUPPORTED) a pointer less
 * aligned than that, as a real kernel would fault on it. Pointers are the
 * stand-in driver's device addresses (the host's with bit 46 flipped, DEV).
 * Computed in double on the calling thread, or, while the stand-in
 * driver's stream captures, recorded with its arguments (fake_cuda_defer)
 * for the graph's launches to compute.
 *
 * FAKE_CUBLAS_FAIL=name makes that call fail (CUBLAS_STATUS_EXECUTION_FAILED);
 * fake_cublas_calls(name) counts calls, for a test to ask with dlsym.
 * FAKE_CUBLASLT_NO_ALGO=1 makes the heuristic find no algorithm
 * (CUBLAS_STATUS_NOT_SUPPORTED, none returned), as cuBLASLt may for a
 * layout it has no kernel for.
 *
 * The same source, built again as fakecuda/libcublas.so.13, is the
 * stand-in cuBLAS: cublasCreate_v2, cublasSetStream_v2,
 * cublasSetWorkspace_v2 and cublasGemmStridedBatchedEx, C = alpha op(A)
 * op(B) + beta C column-major per the cuBLAS documentation (lda >= the
 * rows of A as stored, ldc >= m, strides in elements, C not read where
 * beta is 0; A, B and C of one type; the compute type one that type
 * takes: 32F or 32F_FAST_TF32 for f32, 32F for f16 and bf16, 64F for f64,
 * with alpha and beta doubles for 64F, floats otherwise).
 */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define DEV ((uint64_t)1 << 46)

typedef int Status;
enum {
    SUCCESS = 0, NOT_INITIALIZED = 1, INVALID_VALUE = 7, EXECUTION_FAILED = 13, NOT_SUPPORTED = 15,
    R_32F = 0, R_64F = 1, R_16F = 2, R_16BF = 14,
    COMPUTE_32F = 68, COMPUTE_32F_FAST_TF32 = 77, COMPUTE_64F = 70,
    OP_N = 0, OP_T = 1,
    WS_NEED = 1024,
};

typedef struct {
    int compute, scale;
    int32_t ta, tb;
    uint32_t epi;
    uint64_t bias;
    int64_t bias_stride;
} Desc;
typedef struct {
    int type;
    uint64_t rows, cols;
    int64_t ld;
    int32_t batch;
    int64_t stride;
} Layout;
typedef struct {
    uint64_t ws;
    uint32_t align[4];
} Pref;
typedef struct {
    uint64_t data[8];
} Algo;
typedef struct {
    Algo algo;
    size_t workspaceSize;
    Status state;
    float wavesCount;
    int reserved[4];
} Heuristic;

#define FAKE_CALLS_ENV "FAKE_CUBLAS_FAIL"
#include "fake_calls.h"
#include "fake_half.h"

long fake_cublas_calls(const char *name);
long fake_cublas_calls(const char *name)
{
    return fake_calls(name);
}

#define ENTER(name) FAKE_ENTER(name, EXECUTION_FAILED)

/* The exported API (cublasLt.h's names; every argument as documented). */
#define API FAKE_API

API Status cublasLtCreate(void **h);
API Status cublasLtCreate(void **h)
{
    ENTER("cublasLtCreate");
    static int handle;
    *h = &handle;
    return SUCCESS;
}

API Status cublasLtDestroy(void *h);
API Status cublasLtDestroy(void *h)
{
    (void)h;
    return SUCCESS;
}

API const char *cublasLtGetStatusName(Status s);
API const char *cublasLtGetStatusName(Status s)
{
    switch (s) {
    case SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_UNKNOWN";
    }
}

API const char *cublasLtGetStatusString(Status s);
API const char *cublasLtGetStatusString(Status s)
{
    return s == NOT_SUPPORTED ? "the functionality requested is not supported" : "fake cuBLASLt";
}

API size_t cublasLtGetVersion(void);
API size_t cublasLtGetVersion(void)
{
    return 130000;
}

API Status cublasLtMatmulDescCreate(Desc **d, int compute, int scale);
API Status cublasLtMatmulDescCreate(Desc **d, int compute, int scale)
{
    ENTER("cublasLtMatmulDescCreate");
    if ((compute != COMPUTE_32F && compute != COMPUTE_32F_FAST_TF32 && compute != COMPUTE_64F) ||
        (scale != R_32F && scale != R_64F) || (compute == COMPUTE_64F) != (scale == R_64F))
        return INVALID_VALUE;
    *d = calloc(1, sizeof **d);
    if (!*d)
        return NOT_INITIALIZED;
    **d = (Desc){.compute = compute, .scale = scale, .epi = 1};
    return SUCCESS;
}

API Status cublasLtMatmulDescDestroy(Desc *d);
API Status cublasLtMatmulDescDestroy(Desc *d)
{
    free(d);
    return SUCCESS;
}

API Status cublasLtMatmulDescSetAttribute(Desc *d, int attr, const void *buf, size_t n);
API Status cublasLtMatmulDescSetAttribute(Desc *d, int attr, const void *buf, size_t n)
{
    ENTER("cublasLtMatmulDescSetAttribute");
    switch (attr) {
    case 3: /* TRANSA, TRANSB: int32_t cublasOperation_t */
    case 4:
        if (n != sizeof(int32_t))
            return INVALID_VALUE;
        memcpy(attr == 3 ? &d->ta : &d->tb, buf, n);
        return (attr == 3 ? d->ta : d->tb) <= OP_T ? SUCCESS : INVALID_VALUE;
    case 7: { /* EPILOGUE: uint32_t */
        if (n != sizeof(uint32_t))
            return INVALID_VALUE;
        uint32_t e;
        memcpy(&e, buf, n);
        if (e != 1 && e != 2 && e != 4 && e != 6 && e != 32 && e != 36)
            return INVALID_VALUE;
        d->epi = e;
        return SUCCESS;
    }
    case 8: /* BIAS_POINTER: a device pointer */
        if (n != sizeof(void *))
            return INVALID_VALUE;
        memcpy(&d->bias, buf, n);
        return SUCCESS;
    case 10: /* BIAS_BATCH_STRIDE: int64_t */
        if (n != sizeof(int64_t))
            return INVALID_VALUE;
        memcpy(&d->bias_stride, buf, n);
        return SUCCESS;
    default: return INVALID_VALUE;
    }
}

API Status cublasLtMatrixLayoutCreate(Layout **l, int type, uint64_t rows, uint64_t cols, int64_t ld);
API Status cublasLtMatrixLayoutCreate(Layout **l, int type, uint64_t rows, uint64_t cols, int64_t ld)
{
    ENTER("cublasLtMatrixLayoutCreate");
    if ((type != R_32F && type != R_64F && type != R_16F && type != R_16BF) || ld < (int64_t)rows || ld < 1)
        return INVALID_VALUE;
    *l = calloc(1, sizeof **l);
    if (!*l)
        return NOT_INITIALIZED;
    **l = (Layout){.type = type, .rows = rows, .cols = cols, .ld = ld, .batch = 1};
    return SUCCESS;
}

API Status cublasLtMatrixLayoutDestroy(Layout *l);
API Status cublasLtMatrixLayoutDestroy(Layout *l)
{
    free(l);
    return SUCCESS;
}

API Status cublasLtMatrixLayoutSetAttribute(Layout *l, int attr, const void *buf, size_t n);
API Status cublasLtMatrixLayoutSetAttribute(Layout *l, int attr, const void *buf, size_t n)
{
    ENTER("cublasLtMatrixLayoutSetAttribute");
    if (attr == 5 && n == sizeof(int32_t)) { /* BATCH_COUNT */
        memcpy(&l->batch, buf, n);
        return l->batch >= 1 ? SUCCESS : INVALID_VALUE;
    }
    if (attr == 6 && n == sizeof(int64_t)) { /* STRIDED_BATCH_OFFSET */
        memcpy(&l->stride, buf, n);
        return SUCCESS;
    }
    return INVALID_VALUE;
}

API Status cublasLtMatmulPreferenceCreate(Pref **p);
API Status cublasLtMatmulPreferenceCreate(Pref **p)
{
    ENTER("cublasLtMatmulPreferenceCreate");
    *p = calloc(1, sizeof **p);
    if (!*p)
        return NOT_INITIALIZED;
    for (int i = 0; i < 4; i++)
        (*p)->align[i] = 256;
    return SUCCESS;
}

API Status cublasLtMatmulPreferenceDestroy(Pref *p);
API Status cublasLtMatmulPreferenceDestroy(Pref *p)
{
    free(p);
    return SUCCESS;
}

API Status cublasLtMatmulPreferenceSetAttribute(Pref *p, int attr, const void *buf, size_t n);
API Status cublasLtMatmulPreferenceSetAttribute(Pref *p, int attr, const void *buf, size_t n)
{
    ENTER("cublasLtMatmulPreferenceSetAttribute");
    if (attr == 1 && n == sizeof(uint64_t)) { /* MAX_WORKSPACE_BYTES */
        memcpy(&p->ws, buf, n);
        return SUCCESS;
    }
    if (attr >= 5 && attr <= 8 && n == sizeof(uint32_t)) { /* MIN_ALIGNMENT_A..D_BYTES */
        memcpy(&p->align[attr - 5], buf, n);
        return SUCCESS;
    }
    return INVALID_VALUE;
}

/* Whether the call's shapes chain: op(A) m x k, op(B) k x n, C and D m x n,
 * one type, one batch count (or 1). */
static Status shapes(const Desc *d, const Layout *a, const Layout *b, const Layout *c, const Layout *dd)
{
    uint64_t m = dd->rows, n = dd->cols;
    uint64_t am = d->ta == OP_N ? a->rows : a->cols, ak = d->ta == OP_N ? a->cols : a->rows;
    uint64_t bk = d->tb == OP_N ? b->rows : b->cols, bn = d->tb == OP_N ? b->cols : b->rows;
    if (am != m || bn != n || ak != bk || c->rows != m || c->cols != n)
        return INVALID_VALUE;
    if (a->type != dd->type || b->type != dd->type || c->type != dd->type)
        return INVALID_VALUE;
    if ((dd->type == R_64F) != (d->compute == COMPUTE_64F) || (d->compute == COMPUTE_32F_FAST_TF32 && dd->type != R_32F))
        return INVALID_VALUE;
    if (a->batch != dd->batch || b->batch != dd->batch || c->batch != dd->batch)
        return INVALID_VALUE;
    return SUCCESS;
}

API Status cublasLtMatmulAlgoGetHeuristic(void *h, Desc *d, Layout *a, Layout *b, Layout *c, Layout *dd, Pref *p,
                                          int want, Heuristic *res, int *found);
API Status cublasLtMatmulAlgoGetHeuristic(void *h, Desc *d, Layout *a, Layout *b, Layout *c, Layout *dd, Pref *p,
                                          int want, Heuristic *res, int *found)
{
    (void)h;
    ENTER("cublasLtMatmulAlgoGetHeuristic");
    if (want < 1)
        return INVALID_VALUE;
    Status s = shapes(d, a, b, c, dd);
    *found = 0;
    if (s)
        return s;
    if (p->ws < WS_NEED)
        return NOT_SUPPORTED;
    const char *none = getenv("FAKE_CUBLASLT_NO_ALGO");
    if (none && !strcmp(none, "1"))
        return NOT_SUPPORTED;
    memset(res, 0, sizeof *res);
    res->algo.data[0] = 0xa160;
    for (int i = 0; i < 4; i++)
        res->algo.data[1 + i] = p->align[i];
    res->workspaceSize = WS_NEED;
    res->wavesCount = 1;
    *found = 1;
    return SUCCESS;
}

static double load(const void *p, int type, int64_t i)
{
    switch (type) {
    case R_32F: return ((const float *)p)[i];
    case R_64F: return ((const double *)p)[i];
    case R_16F: return f16_get(((const uint16_t *)p)[i]);
    default: {
        uint32_t u = (uint32_t)((const uint16_t *)p)[i] << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    }
}

static void store(void *p, int type, int64_t i, double v)
{
    switch (type) {
    case R_32F: ((float *)p)[i] = (float)v; break;
    case R_64F: ((double *)p)[i] = v; break;
    case R_16F: ((uint16_t *)p)[i] = f16_put((float)v); break; /* through f32, as cuBLASLt's result */
    default: {
        float f = (float)v;
        uint32_t u;
        memcpy(&u, &f, 4);
        u += 0x7fff + (u >> 16 & 1); /* round to nearest even */
        ((uint16_t *)p)[i] = (uint16_t)(u >> 16);
    }
    }
}

/* The host memory of device address p (a host pointer would be an
 * address the process does not map: the test faults, as a GPU would);
 * *bad set where p is not aligned to `align` bytes. */
static void *host(const void *p, uint64_t align, int *bad)
{
    uint64_t a = (uint64_t)(uintptr_t)p;
    if (!a)
        *bad = INVALID_VALUE;
    if (align > 1 && a % align)
        *bad = NOT_SUPPORTED;
    return (void *)(uintptr_t)(a ^ DEV);
}

/* A matmul's arguments by value: what a recorded call computes later. */
typedef struct Call {
    Desc d;
    Layout a, b, c, dd;
    double al, be;
    const void *pa, *pb, *pc, *pbias;
    void *pd;
} Call;

static void call_run(void *arg)
{
    const Call *cl = arg;
    const Desc *d = &cl->d;
    const Layout *a = &cl->a, *b = &cl->b, *c = &cl->c, *dd = &cl->dd;
    double al = cl->al, be = cl->be;
    const void *pa = cl->pa, *pb = cl->pb, *pc = cl->pc, *pbias = cl->pbias;
    void *pd = cl->pd;
    (void)c;
    int t = dd->type;
    uint64_t m = dd->rows, n = dd->cols, k = d->ta == OP_N ? a->cols : a->rows;
    for (int32_t bt = 0; bt < dd->batch; bt++)
        for (uint64_t j = 0; j < n; j++)
            for (uint64_t i = 0; i < m; i++) {
                /* A's element (i, p) and B's (p, j) at a0 + p * as, b0 + p * bs */
                int64_t a0 = bt * a->stride + (int64_t)(d->ta == OP_N ? i : i * a->ld);
                int64_t as = d->ta == OP_N ? (int64_t)a->ld : 1;
                int64_t b0 = bt * b->stride + (int64_t)(d->tb == OP_N ? j * b->ld : j);
                int64_t bs = d->tb == OP_N ? 1 : (int64_t)b->ld;
                double acc = 0;
                if (t == R_32F) { /* float read directly: the same sum, faster */
                    const float *fa = (const float *)pa + a0, *fb = (const float *)pb + b0;
                    for (uint64_t p = 0; p < k; p++)
                        acc += (double)fa[(int64_t)p * as] * (double)fb[(int64_t)p * bs];
                } else {
                    for (uint64_t p = 0; p < k; p++)
                        acc += load(pa, t, a0 + (int64_t)p * as) * load(pb, t, b0 + (int64_t)p * bs);
                }
                double v = al * acc;
                if (pc)
                    v += be * load(pc, t, bt * c->stride + (int64_t)(i + j * c->ld));
                if (pbias)
                    v += load(pbias, t, bt * d->bias_stride + (int64_t)i);
                if (d->epi & 2)
                    v = v > 0 ? v : 0;
                if (d->epi & 32)
                    v = 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
                store(pd, t, bt * dd->stride + (int64_t)(i + j * dd->ld), v);
            }
}

/* The stand-in driver's capture, if one is under way, takes the call. */
static int deferred(void *stream, const Call *cl)
{
    return fake_defer(stream, call_run, cl, sizeof *cl);
}

API Status cublasLtMatmul(void *h, Desc *d, const void *alpha, const void *A, Layout *a, const void *B, Layout *b,
                          const void *beta, const void *C, Layout *c, void *D, Layout *dd, const Algo *algo,
                          void *ws, size_t wsbytes, void *stream);
API Status cublasLtMatmul(void *h, Desc *d, const void *alpha, const void *A, Layout *a, const void *B, Layout *b,
                          const void *beta, const void *C, Layout *c, void *D, Layout *dd, const Algo *algo,
                          void *ws, size_t wsbytes, void *stream)
{
    (void)h;
    ENTER("cublasLtMatmul");
    Status s = shapes(d, a, b, c, dd);
    if (s)
        return s;
    if (!algo || algo->data[0] != 0xa160 || wsbytes < WS_NEED || !ws)
        return INVALID_VALUE;
    if (c->ld != dd->ld || c->stride != dd->stride)
        return NOT_SUPPORTED; /* C and D share a layout in disc's use: the same one */
    double al = d->scale == R_64F ? *(const double *)alpha : *(const float *)alpha;
    double be = d->scale == R_64F ? *(const double *)beta : *(const float *)beta;
    int bad = 0;
    const void *pa = host(A, algo->data[1], &bad), *pb = host(B, algo->data[2], &bad);
    const void *pc = be != 0 ? host(C, algo->data[3], &bad) : NULL;
    void *pd = host(D, algo->data[4], &bad);
    const void *pbias = d->epi & 4 ? host((const void *)(uintptr_t)d->bias, 1, &bad) : NULL;
    host(ws, 1, &bad);
    if (bad)
        return bad;
    Call cl = {.d = *d, .a = *a, .b = *b, .c = *c, .dd = *dd, .al = al, .be = be, .pa = pa, .pb = pb, .pc = pc,
               .pbias = pbias, .pd = pd};
    if (!deferred(stream, &cl))
        call_run(&cl);
    return SUCCESS;
}

/* ---- cuBLAS (libcublas.so.13) --------------------------------------------------- */

typedef struct BlasHandle {
    void *stream, *ws;
    size_t wsbytes;
} BlasHandle;

API Status cublasCreate_v2(BlasHandle **h);
API Status cublasCreate_v2(BlasHandle **h)
{
    ENTER("cublasCreate_v2");
    if (!h)
        return INVALID_VALUE;
    *h = calloc(1, sizeof **h);
    return *h ? SUCCESS : NOT_INITIALIZED;
}

API Status cublasDestroy_v2(BlasHandle *h);
API Status cublasDestroy_v2(BlasHandle *h)
{
    free(h);
    return SUCCESS;
}

API Status cublasSetStream_v2(BlasHandle *h, void *stream);
API Status cublasSetStream_v2(BlasHandle *h, void *stream)
{
    ENTER("cublasSetStream_v2");
    if (!h)
        return NOT_INITIALIZED;
    h->stream = stream;
    return SUCCESS;
}

API Status cublasSetWorkspace_v2(BlasHandle *h, void *ws, size_t bytes);
API Status cublasSetWorkspace_v2(BlasHandle *h, void *ws, size_t bytes)
{
    ENTER("cublasSetWorkspace_v2");
    if (!h)
        return NOT_INITIALIZED;
    int bad = 0;
    if (bytes)
        host(ws, 256, &bad); /* documented: 256-byte aligned */
    if (bad)
        return INVALID_VALUE;
    h->ws = ws;
    h->wsbytes = bytes;
    return SUCCESS;
}

API const char *cublasGetStatusString(Status s);
API const char *cublasGetStatusString(Status s)
{
    return cublasLtGetStatusString(s);
}

/* cublasGemmStridedBatchedEx's call as cuBLASLt's: the same computation. */
API Status cublasGemmStridedBatchedEx(BlasHandle *h, int ta, int tb, int m, int n, int k, const void *alpha,
                                      const void *A, int at, int lda, long long sa, const void *B, int bt, int ldb,
                                      long long sb, const void *beta, void *C, int ct, int ldc, long long sc,
                                      int batch, int compute, int algo);
API Status cublasGemmStridedBatchedEx(BlasHandle *h, int ta, int tb, int m, int n, int k, const void *alpha,
                                      const void *A, int at, int lda, long long sa, const void *B, int bt, int ldb,
                                      long long sb, const void *beta, void *C, int ct, int ldc, long long sc,
                                      int batch, int compute, int algo)
{
    ENTER("cublasGemmStridedBatchedEx");
    if (!h)
        return NOT_INITIALIZED;
    int ar = ta == OP_N ? m : k, br = tb == OP_N ? k : n;
    if ((ta != OP_N && ta != OP_T) || (tb != OP_N && tb != OP_T) || m < 0 || n < 0 || k < 0 || batch < 0 ||
        lda < (ar > 1 ? ar : 1) || ldb < (br > 1 ? br : 1) || ldc < (m > 1 ? m : 1) || !alpha || !beta)
        return INVALID_VALUE;
    if (at != bt || at != ct || algo < -1 ||
        !(at == R_64F ? compute == COMPUTE_64F
                      : compute == COMPUTE_32F || (at == R_32F && compute == COMPUTE_32F_FAST_TF32)) ||
        (at != R_32F && at != R_64F && at != R_16F && at != R_16BF))
        return NOT_SUPPORTED;
    double al = compute == COMPUTE_64F ? *(const double *)alpha : *(const float *)alpha;
    double be = compute == COMPUTE_64F ? *(const double *)beta : *(const float *)beta;
    if (m == 0 || n == 0 || batch == 0)
        return SUCCESS;
    int bad = 0;
    size_t es = at == R_64F ? 8 : at == R_32F ? 4 : 2;
    Call cl = {.d = {.compute = compute, .ta = ta, .tb = tb, .epi = 1},
               .a = {.type = at, .rows = (uint64_t)ar, .cols = (uint64_t)(ta == OP_N ? k : m), .ld = lda,
                     .batch = batch, .stride = sa},
               .b = {.type = bt, .rows = (uint64_t)br, .cols = (uint64_t)(tb == OP_N ? n : k), .ld = ldb,
                     .batch = batch, .stride = sb},
               .dd = {.type = ct, .rows = (uint64_t)m, .cols = (uint64_t)n, .ld = ldc, .batch = batch, .stride = sc},
               .al = al, .be = be};
    cl.c = cl.dd;
    cl.pa = host(A, es, &bad);
    cl.pb = host(B, es, &bad);
    cl.pd = host(C, es, &bad);
    cl.pc = be != 0 ? cl.pd : NULL;
    if (bad)
        return bad;
    if (!deferred(h->stream, &cl))
        call_run(&cl);
    return SUCCESS;
}
