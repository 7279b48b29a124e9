/*
 * fake_cudnn.c — a stand-in for libcudnn.so.9, for testing runtime/cudnn.c
 * and the cuda backend's convolutions where there is no GPU: built as
 * build/fakecuda/libcudnn.so.9 beside the stand-in driver (fake_cuda.c),
 * found through LD_LIBRARY_PATH.
 *
 * It implements what cuDNN's documentation says of the legacy convolution
 * API's calls, strictly, and independently of how disc uses them:
 *
 *   - tensors of 4 or 5 dims (N, C, spatial...) read and written through
 *     their strides, so NCHW, NHWC and padded layouts all work; filters
 *     NCHW only, packed, [K][C/groups][window...];
 *   - y = alpha conv(x, w) + beta y, with y not read where beta is 0 (the
 *     documented rule for every scaling factor), and the fused
 *     y = act(alpha1 conv(x, w) + alpha2 z + bias), z (which may be y) not
 *     read where alpha2 is 0 either: the documentation says nothing of it,
 *     and PyTorch and disc pass z = y, uninitialised, with alpha2 = 0;
 *   - CROSS_CORRELATION, and CONVOLUTION with the window flipped; groups;
 *     pads, strides and dilations as cudnnSetConvolutionNdDescriptor
 *     defines them, y's spatial dims required to be
 *     (in + 2 pad - dil (k - 1) - 1) / stride + 1;
 *   - FLOAT, HALF (IEEE binary16) and DOUBLE data; alpha and beta floats
 *     for the first two, doubles for DOUBLE; the compute type FLOAT for
 *     FLOAT and HALF data, DOUBLE for DOUBLE;
 *   - activations RELU (NaN kept or made 0 by the descriptor's NaN
 *     option) and IDENTITY, the latter, as documented, only in the fused
 *     call with IMPLICIT_PRECOMP_GEMM and never in cudnnActivationForward.
 *
 * The backward data of a convolution (cudnnConvolutionBackwardData, the
 * algorithms of cudnnGetConvolutionBackwardDataAlgorithm_v7: the same
 * three and workspaces): dx = alpha conv^T(dy, w) + beta dx, for the
 * geometry a forward convolution of dx would have (dy its result): each
 * dy[n][k][q] adds dy w[k][c'][tap] to dx[n][g C/g + c'][q stride - pad +
 * tap dil] where inside.
 *
 * Pooling (cudnnSetPoolingNdDescriptor, cudnnPoolingForward): MAX (a
 * window's padding is no value; a NaN in the window wins with
 * PROPAGATE_NAN, is passed over without), AVERAGE_COUNT_INCLUDE_PADDING
 * (the window's sum over its whole size) and ..._EXCLUDE_PADDING (over
 * its taps on the input); y's spatial dims required to be
 * (in + 2 pad - window) / stride + 1, as cudnnGetPoolingNdForwardOutputDim
 * gives them; y = alpha pool(x) + beta y.
 *
 * cudnnGetConvolutionForwardAlgorithm_v7 ranks three algorithms: first 6
 * with a workspace of 2^40 bytes, which no caller can give (a caller must
 * look at perf[i].memory and pass it over), then 1 (IMPLICIT_PRECOMP_GEMM,
 * 4 KiB) and 0 (IMPLICIT_GEMM, none). Running an algorithm with less
 * workspace than that is CUDNN_STATUS_BAD_PARAM, and it fills the
 * workspace with junk, as a real algorithm's scratch would.
 *
 * Pointers are the stand-in driver's device addresses (the host's with
 * bit 46 flipped, DEV): a host pointer passed as device memory faults, as
 * it would on a GPU; scaling factors are host memory, as documented.
 * Computed in double on the calling thread, or, while the stand-in
 * driver's stream captures, recorded with its arguments (fake_cuda_defer)
 * for the graph's launches to compute.
 *
 * FAKE_CUDNN_FAIL=name makes that call fail (CUDNN_STATUS_EXECUTION_FAILED);
 * fake_cudnn_calls(name) counts calls, and fake_cudnn_last_math() is the
 * math type of the last convolution run (-1 before one), for a test to
 * ask with dlsym.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define DEV ((uint64_t)1 << 46)

typedef int Status;
enum {
    SUCCESS = 0, BAD_PARAM = 2000, NOT_SUPPORTED = 3000, ALLOC_FAILED = 4003, EXECUTION_FAILED = 5000,
    T_FLOAT = 0, T_DOUBLE = 1, T_HALF = 2,           /* cudnnDataType_t */
    FORMAT_NCHW = 0,                                  /* cudnnTensorFormat_t */
    CONVOLUTION = 0, CROSS_CORRELATION = 1,           /* cudnnConvolutionMode_t */
    MATH_LAST = 3,                                    /* cudnnMathType_t: DEFAULT 0 .. FMA 3 */
    ACT_RELU = 1, ACT_IDENTITY = 5,                   /* cudnnActivationMode_t */
    PROPAGATE_NAN = 1,                                /* cudnnNanPropagation_t */
    DETERMINISTIC = 1,                                /* cudnnDeterminism_t */
    ALGO_IMPLICIT_GEMM = 0, ALGO_PRECOMP_GEMM = 1, ALGO_HUGE = 6,
    POOL_MAX = 0, POOL_AVG_INCLUDE = 1, POOL_AVG_EXCLUDE = 2, POOL_MAX_DETERMINISTIC = 3, /* cudnnPoolingMode_t */
    ELEMENTS_MAX = 0x7fffffff,                        /* cuDNN's limit: 2 Gi elements a tensor */
};

typedef struct Handle {
    void *stream;
} Handle;
typedef struct {
    int set, type, nb;
    int dim[5], stride[5];
} Tensor;
typedef struct {
    int set, type, nb;
    int dim[5];                 /* K, C / groups, window... */
} Filter;
typedef struct {
    int set, nsp;               /* nsp: arrayLength, the spatial axes */
    int pad[3], stride[3], dil[3];
    int mode, compute;
    int groups, math;           /* kept apart from set: their own calls */
} Conv;
typedef struct {
    int set, mode, nan;
    double coef;
} Act;
typedef struct {
    int set, mode, nan, nb;     /* nb: the spatial axes */
    int window[3], pad[3], stride[3];
} Pool;
typedef struct {
    int algo;
    Status status;
    float time;
    size_t memory;
    int determinism;
    int mathType;
    int reserved[3];
} Perf;                         /* cudnnConvolutionFwdAlgoPerf_t */

/* The algorithms in the heuristic's order, with the workspace each needs. */
static const struct {
    int algo;
    size_t memory;
} algos[] = {{ALGO_HUGE, (size_t)1 << 40}, {ALGO_PRECOMP_GEMM, 4096}, {ALGO_IMPLICIT_GEMM, 0}};

#define FAKE_CALLS_ENV "FAKE_CUDNN_FAIL"
#include "fake_calls.h"
#include "fake_half.h"

long fake_cudnn_calls(const char *name);
long fake_cudnn_calls(const char *name)
{
    return fake_calls(name);
}

static int last_math = -1;

int fake_cudnn_last_math(void);
int fake_cudnn_last_math(void)
{
    return last_math;
}

#define ENTER(name) FAKE_ENTER(name, EXECUTION_FAILED)

/* The exported API (cudnn.h's names; every argument as documented). */
#define API FAKE_API

API size_t cudnnGetVersion(void);
API size_t cudnnGetVersion(void)
{
    return 90300;
}

API const char *cudnnGetErrorString(Status s);
API const char *cudnnGetErrorString(Status s)
{
    switch (s) {
    case SUCCESS: return "CUDNN_STATUS_SUCCESS";
    case BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
    case NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED";
    case ALLOC_FAILED: return "CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED";
    case EXECUTION_FAILED: return "CUDNN_STATUS_EXECUTION_FAILED";
    default: return "CUDNN_STATUS_UNKNOWN";
    }
}

API Status cudnnCreate(Handle **h);
API Status cudnnCreate(Handle **h)
{
    ENTER("cudnnCreate");
    if (!h)
        return BAD_PARAM;
    if (!(*h = calloc(1, sizeof **h)))
        return ALLOC_FAILED;
    return SUCCESS;
}

API Status cudnnDestroy(Handle *h);
API Status cudnnDestroy(Handle *h)
{
    fails("cudnnDestroy"); /* counted, never failed: a test matches creates with destroys */
    if (!h)
        return BAD_PARAM;
    free(h);
    return SUCCESS;
}

API Status cudnnSetStream(Handle *h, void *stream);
API Status cudnnSetStream(Handle *h, void *stream)
{
    ENTER("cudnnSetStream");
    if (!h)
        return BAD_PARAM;
    h->stream = stream;
    return SUCCESS;
}

/* A descriptor's create and destroy: calloc'd, unset until its Set call. */
#define DESCRIPTOR(T, create, destroy)           \
    API Status create(T **d);                    \
    API Status create(T **d)                     \
    {                                            \
        ENTER(#create);                          \
        if (!d)                                  \
            return BAD_PARAM;                    \
        if (!(*d = calloc(1, sizeof **d)))       \
            return ALLOC_FAILED;                 \
        return SUCCESS;                          \
    }                                            \
    API Status destroy(T *d);                    \
    API Status destroy(T *d)                     \
    {                                            \
        fails(#destroy);                         \
        free(d);                                 \
        return SUCCESS;                          \
    }

DESCRIPTOR(Tensor, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor)
DESCRIPTOR(Filter, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor)
DESCRIPTOR(Act, cudnnCreateActivationDescriptor, cudnnDestroyActivationDescriptor)
DESCRIPTOR(Pool, cudnnCreatePoolingDescriptor, cudnnDestroyPoolingDescriptor)

API Status cudnnCreateConvolutionDescriptor(Conv **c);
API Status cudnnCreateConvolutionDescriptor(Conv **c)
{
    ENTER("cudnnCreateConvolutionDescriptor");
    if (!c)
        return BAD_PARAM;
    if (!(*c = calloc(1, sizeof **c)))
        return ALLOC_FAILED;
    (*c)->groups = 1; /* the documented defaults; math DEFAULT_MATH, 0 */
    return SUCCESS;
}

API Status cudnnDestroyConvolutionDescriptor(Conv *c);
API Status cudnnDestroyConvolutionDescriptor(Conv *c)
{
    fails("cudnnDestroyConvolutionDescriptor");
    free(c);
    return SUCCESS;
}

static int type_ok(int type)
{
    return type == T_FLOAT || type == T_DOUBLE || type == T_HALF;
}

static int64_t type_size(int type)
{
    return type == T_DOUBLE ? 8 : type == T_HALF ? 2 : 4;
}

/* Whether nb dims of at least 1 hold at most ELEMENTS_MAX elements. */
static Status dims_ok(int nb, const int *dim)
{
    int64_t n = 1;
    for (int i = 0; i < nb; i++) {
        if (dim[i] < 1)
            return BAD_PARAM;
        if ((n *= dim[i]) > ELEMENTS_MAX)
            return NOT_SUPPORTED;
    }
    return SUCCESS;
}

API Status cudnnSetTensorNdDescriptor(Tensor *t, int type, int nb, const int *dim, const int *stride);
API Status cudnnSetTensorNdDescriptor(Tensor *t, int type, int nb, const int *dim, const int *stride)
{
    ENTER("cudnnSetTensorNdDescriptor");
    if (!t || !dim || !stride)
        return BAD_PARAM;
    if (nb != 4 && nb != 5)
        return NOT_SUPPORTED;
    if (!type_ok(type))
        return NOT_SUPPORTED;
    Status s = dims_ok(nb, dim);
    if (s)
        return s;
    double span = 0; /* the last element's offset: indices stay within int64_t */
    for (int i = 0; i < nb; i++) {
        if (stride[i] < 1)
            return BAD_PARAM;
        span += (double)(dim[i] - 1) * stride[i];
    }
    if (span > 0x1p62)
        return NOT_SUPPORTED;
    *t = (Tensor){.set = 1, .type = type, .nb = nb};
    memcpy(t->dim, dim, (size_t)nb * sizeof *dim);
    memcpy(t->stride, stride, (size_t)nb * sizeof *stride);
    return SUCCESS;
}

API Status cudnnSetFilterNdDescriptor(Filter *f, int type, int format, int nb, const int *dim);
API Status cudnnSetFilterNdDescriptor(Filter *f, int type, int format, int nb, const int *dim)
{
    ENTER("cudnnSetFilterNdDescriptor");
    if (!f || !dim)
        return BAD_PARAM;
    if (format != FORMAT_NCHW || (nb != 4 && nb != 5) || !type_ok(type))
        return NOT_SUPPORTED;
    Status s = dims_ok(nb, dim);
    if (s)
        return s;
    *f = (Filter){.set = 1, .type = type, .nb = nb};
    memcpy(f->dim, dim, (size_t)nb * sizeof *dim);
    return SUCCESS;
}

API Status cudnnSetConvolutionNdDescriptor(Conv *c, int n, const int *pad, const int *stride, const int *dil,
                                           int mode, int compute);
API Status cudnnSetConvolutionNdDescriptor(Conv *c, int n, const int *pad, const int *stride, const int *dil,
                                           int mode, int compute)
{
    ENTER("cudnnSetConvolutionNdDescriptor");
    if (!c || !pad || !stride || !dil || (mode != CONVOLUTION && mode != CROSS_CORRELATION))
        return BAD_PARAM;
    if (n != 2 && n != 3)
        return NOT_SUPPORTED; /* this stand-in's tensors have 4 or 5 dims */
    if (!type_ok(compute))
        return NOT_SUPPORTED;
    for (int i = 0; i < n; i++)
        if (pad[i] < 0 || stride[i] < 1 || dil[i] < 1)
            return BAD_PARAM;
    c->set = 1;
    c->nsp = n;
    for (int i = 0; i < n; i++) {
        c->pad[i] = pad[i];
        c->stride[i] = stride[i];
        c->dil[i] = dil[i];
    }
    c->mode = mode;
    c->compute = compute;
    return SUCCESS;
}

API Status cudnnSetConvolutionGroupCount(Conv *c, int groups);
API Status cudnnSetConvolutionGroupCount(Conv *c, int groups)
{
    ENTER("cudnnSetConvolutionGroupCount");
    if (!c || groups < 1)
        return BAD_PARAM;
    c->groups = groups;
    return SUCCESS;
}

API Status cudnnSetConvolutionMathType(Conv *c, int math);
API Status cudnnSetConvolutionMathType(Conv *c, int math)
{
    ENTER("cudnnSetConvolutionMathType");
    if (!c || math < 0 || math > MATH_LAST)
        return BAD_PARAM;
    c->math = math;
    return SUCCESS;
}

API Status cudnnSetActivationDescriptor(Act *a, int mode, int nan, double coef);
API Status cudnnSetActivationDescriptor(Act *a, int mode, int nan, double coef)
{
    ENTER("cudnnSetActivationDescriptor");
    if (!a || (nan != 0 && nan != PROPAGATE_NAN))
        return BAD_PARAM;
    if (mode != ACT_RELU && mode != ACT_IDENTITY)
        return NOT_SUPPORTED;
    *a = (Act){.set = 1, .mode = mode, .nan = nan, .coef = coef};
    return SUCCESS;
}

API Status cudnnSetPoolingNdDescriptor(Pool *p, int mode, int nan, int nb, const int *window, const int *pad,
                                       const int *stride);
API Status cudnnSetPoolingNdDescriptor(Pool *p, int mode, int nan, int nb, const int *window, const int *pad,
                                       const int *stride)
{
    ENTER("cudnnSetPoolingNdDescriptor");
    if (!p || !window || !pad || !stride || nb < 1 || nb > 3 || mode < POOL_MAX || mode > POOL_MAX_DETERMINISTIC ||
        (nan != 0 && nan != PROPAGATE_NAN))
        return BAD_PARAM;
    Pool q = {.set = 1, .mode = mode, .nan = nan, .nb = nb};
    for (int i = 0; i < nb; i++) {
        if (window[i] < 1 || pad[i] < 0 || stride[i] < 1)
            return BAD_PARAM;
        q.window[i] = window[i];
        q.pad[i] = pad[i];
        q.stride[i] = stride[i];
    }
    *p = q;
    return SUCCESS;
}

/* The call's geometry: x [N][C][spatial], w [K][C/groups][window], y
 * [N][K][out] with out from cuDNN's formula, one data type, the compute
 * type that type takes. */
static Status conv_check(const Tensor *x, const Filter *w, const Conv *c, const Tensor *y)
{
    if (!x || !w || !c || !y || !x->set || !w->set || !c->set || !y->set)
        return BAD_PARAM;
    if (x->nb != c->nsp + 2 || w->nb != x->nb || y->nb != x->nb || w->type != x->type || y->type != x->type)
        return BAD_PARAM;
    if (c->compute != (x->type == T_DOUBLE ? T_DOUBLE : T_FLOAT))
        return NOT_SUPPORTED;
    int64_t g = c->groups;
    if (x->dim[1] != w->dim[1] * g || w->dim[0] % g || y->dim[0] != x->dim[0] || y->dim[1] != w->dim[0])
        return BAD_PARAM;
    for (int i = 0; i < c->nsp; i++) {
        int64_t in = x->dim[2 + i] + 2 * (int64_t)c->pad[i], span = (int64_t)c->dil[i] * (w->dim[2 + i] - 1) + 1;
        if (in < span || y->dim[2 + i] != (in - span) / c->stride[i] + 1)
            return BAD_PARAM;
    }
    return SUCCESS;
}

/* The heuristics' answer, the forward's and the backward data's: the
 * algorithms in order, as many as asked. */
static Status ranked(const Conv *c, int want, int *got, Perf *perf)
{
    int n = 0;
    for (; n < want && n < (int)(sizeof algos / sizeof *algos); n++)
        perf[n] = (Perf){.algo = algos[n].algo, .status = SUCCESS, .time = -1, .memory = algos[n].memory,
                         .determinism = DETERMINISTIC, .mathType = c->math};
    *got = n;
    return SUCCESS;
}

API Status cudnnGetConvolutionForwardAlgorithm_v7(Handle *h, const Tensor *x, const Filter *w, const Conv *c,
                                                  const Tensor *y, int want, int *got, Perf *perf);
API Status cudnnGetConvolutionForwardAlgorithm_v7(Handle *h, const Tensor *x, const Filter *w, const Conv *c,
                                                  const Tensor *y, int want, int *got, Perf *perf)
{
    ENTER("cudnnGetConvolutionForwardAlgorithm_v7");
    if (!h || !got || !perf || want < 1)
        return BAD_PARAM;
    Status s = conv_check(x, w, c, y);
    if (s)
        return s;
    return ranked(c, want, got, perf);
}

/* ---- the computations ---------------------------------------------------------- */

static double load(const void *p, int type, int64_t i)
{
    switch (type) {
    case T_FLOAT: return ((const float *)p)[i];
    case T_DOUBLE: return ((const double *)p)[i];
    default: return f16_get(((const uint16_t *)p)[i]);
    }
}

static void store(void *p, int type, int64_t i, double v)
{
    switch (type) {
    case T_FLOAT: ((float *)p)[i] = (float)v; break;
    case T_DOUBLE: ((double *)p)[i] = v; break;
    default: ((uint16_t *)p)[i] = f16_put(v);
    }
}

/* A scaling factor (host memory): a double for DOUBLE data, else a float. */
static double scale(const void *p, int type)
{
    return type == T_DOUBLE ? *(const double *)p : *(const float *)p;
}

/* The host memory of device address p, which must be aligned to `align`
 * bytes (its elements'); *bad set where it is NULL or misaligned. */
static void *host(const void *p, int64_t align, Status *bad)
{
    uint64_t a = (uint64_t)(uintptr_t)p;
    if (!a || a % (uint64_t)align)
        *bad = BAD_PARAM;
    return (void *)(uintptr_t)(a ^ DEV);
}

/* A tensor as 5 dims: 4-D ones get a depth of 1 (stride 0) at axis 2. */
typedef struct {
    int64_t d[5], s[5];
} Geo;

static Geo geo(int nb, const int *dim, const int *stride)
{
    Geo g = {{1, 1, 1, 1, 1}, {0, 0, 0, 0, 0}};
    for (int i = 0, j = 0; i < nb; i++, j++) {
        if (nb == 4 && i == 2)
            j++;
        g.d[j] = dim[i];
        g.s[j] = stride[i];
    }
    return g;
}

static Geo geo_tensor(const Tensor *t)
{
    return geo(t->nb, t->dim, t->stride);
}

static Geo geo_filter(const Filter *f)
{
    int stride[5];
    stride[f->nb - 1] = 1;
    for (int i = f->nb - 2; i >= 0; i--)
        stride[i] = stride[i + 1] * f->dim[i + 1];
    return geo(f->nb, f->dim, stride);
}

static int64_t offset(const Geo *g, const int64_t *i)
{
    return i[0] * g->s[0] + i[1] * g->s[1] + i[2] * g->s[2] + i[3] * g->s[3] + i[4] * g->s[4];
}

/* The next index of a walk over dims d in row-major order; 0 past the end. */
static int next(int64_t *i, const int64_t *d, int from, int to)
{
    for (int k = to - 1; k >= from; k--) {
        if (++i[k] < d[k])
            return 1;
        i[k] = 0;
    }
    return 0;
}

static double act(const Act *a, double v)
{
    if (a->mode == ACT_IDENTITY)
        return v;
    if (v != v)
        return a->nan == PROPAGATE_NAN ? v : 0;
    return v > 0 ? v : 0;
}

/* A call's arguments by value: what a recorded call computes later. */
typedef struct Call {
    int fused;          /* cudnnConvolutionBiasActivationForward */
    Tensor x, y, z, b;
    Filter w;
    Conv c;
    Act act;
    double alpha, beta; /* beta: beta of y, or the fused call's alpha2 of z */
    const void *px, *pw, *pz, *pb;
    void *py, *pws;
    size_t ws;
} Call;

/* The filter taps r (along axis k of Geo) whose input index o * st - pad
 * + r * dil lies inside the input's n: [*lo, *hi). */
static void taps(int64_t o, int64_t st, int64_t pad, int64_t dil, int64_t n, int64_t nr, int64_t *lo, int64_t *hi)
{
    int64_t b = o * st - pad;
    *lo = b >= 0 ? 0 : (-b + dil - 1) / dil;
    *hi = n - 1 - b < 0 ? 0 : (n - 1 - b) / dil + 1;
    if (*hi > nr)
        *hi = nr;
    if (*lo > *hi)
        *lo = *hi;
}

/* The sum over output o's window: channels c0 .. c0 + w's channels of x,
 * taps in row-major order (the order a plain walk of the filter takes,
 * so the sum is the same double to the last bit), those outside x left
 * out; float data read directly, the rest through load(). */
static double window(const Call *cl, const Geo *x, const Geo *w, const int64_t *o, int64_t c0, const int64_t *st,
                     const int64_t *pad, const int64_t *dil, int flip)
{
    int64_t lo[5], hi[5];
    for (int k = 2; k < 5; k++)
        taps(o[k], st[k], pad[k], dil[k], x->d[k], w->d[k], &lo[k], &hi[k]);
    int t = cl->x.type;
    const float *xf = cl->px, *wf = cl->pw;
    double acc = 0;
    for (int64_t c = 0; c < w->d[1]; c++)
        for (int64_t r2 = lo[2]; r2 < hi[2]; r2++)
            for (int64_t r3 = lo[3]; r3 < hi[3]; r3++) {
                int64_t f2 = flip ? w->d[2] - 1 - r2 : r2, f3 = flip ? w->d[3] - 1 - r3 : r3;
                int64_t xi = o[0] * x->s[0] + (c0 + c) * x->s[1] + (o[2] * st[2] - pad[2] + r2 * dil[2]) * x->s[2] +
                             (o[3] * st[3] - pad[3] + r3 * dil[3]) * x->s[3] + (o[4] * st[4] - pad[4]) * x->s[4];
                int64_t wi = o[1] * w->s[0] + c * w->s[1] + f2 * w->s[2] + f3 * w->s[3];
                int64_t xs = dil[4] * x->s[4], ws = flip ? -w->s[4] : w->s[4];
                wi += (flip ? w->d[4] - 1 : 0) * w->s[4];
                for (int64_t r4 = lo[4]; r4 < hi[4]; r4++) {
                    int64_t a = xi + r4 * xs, b = wi + r4 * ws;
                    acc += t == T_FLOAT ? (double)xf[a] * (double)wf[b] : load(cl->px, t, a) * load(cl->pw, t, b);
                }
            }
    return acc;
}

static void conv_run(void *arg)
{
    const Call *cl = arg;
    const Conv *c = &cl->c;
    Geo x = geo_tensor(&cl->x), y = geo_tensor(&cl->y), w = geo_filter(&cl->w);
    Geo z = cl->fused ? geo_tensor(&cl->z) : y, b = cl->fused ? geo_tensor(&cl->b) : y;
    int64_t pad[5] = {0}, st[5] = {1, 1, 1, 1, 1}, dil[5] = {1, 1, 1, 1, 1};
    for (int i = 0; i < c->nsp; i++) { /* on Geo's axes: 2-D convolutions at 3 and 4 */
        int j = 5 - c->nsp + i;
        pad[j] = c->pad[i];
        st[j] = c->stride[i];
        dil[j] = c->dil[i];
    }
    last_math = c->math;
    if (cl->pws)
        memset(cl->pws, 0xa5, cl->ws);
    int t = cl->x.type, flip = c->mode == CONVOLUTION;
    int64_t kg = w.d[0] / c->groups, cg = w.d[1];
    int64_t o[5] = {0};
    do {
        double acc = window(cl, &x, &w, o, o[1] / kg * cg, st, pad, dil, flip);
        double v = cl->alpha * acc;
        int64_t iy = offset(&y, o);
        if (!cl->fused) {
            if (cl->beta != 0)
                v += cl->beta * load(cl->py, t, iy);
        } else {
            int64_t ib[5] = {0, o[1]};
            if (cl->beta != 0)
                v += cl->beta * load(cl->pz, t, offset(&z, o)); /* z read before y is written: z may be y */
            v = act(&cl->act, v + load(cl->pb, t, offset(&b, ib)));
        }
        store(cl->py, t, iy, v);
    } while (next(o, y.d, 0, 5));
}

/* The stand-in driver's capture, if one is under way, takes the call. */
static int deferred(void *stream, void (*run)(void *), const Call *cl)
{
    return fake_defer(stream, run, cl, sizeof *cl);
}

/* What both convolution calls check: the geometry, the algorithm, its
 * workspace, the pointers; *cl filled. */
static Status conv_prepare(Call *cl, const Tensor *x, const void *px, const Filter *w, const void *pw, const Conv *c,
                           int algo, void *ws, size_t wsbytes, const Tensor *y, void *py)
{
    Status s = conv_check(x, w, c, y);
    if (s)
        return s;
    size_t need = 0;
    int known = 0;
    for (size_t i = 0; i < sizeof algos / sizeof *algos; i++)
        if (algos[i].algo == algo) {
            need = algos[i].memory;
            known = 1;
        }
    if (!known)
        return NOT_SUPPORTED;
    if (wsbytes < need || (need && !ws))
        return BAD_PARAM;
    Status bad = SUCCESS;
    cl->x = *x;
    cl->w = *w;
    cl->c = *c;
    cl->y = *y;
    cl->px = host(px, type_size(x->type), &bad);
    cl->pw = host(pw, type_size(x->type), &bad);
    cl->py = host(py, type_size(x->type), &bad);
    cl->pws = need ? host(ws, 1, &bad) : NULL;
    cl->ws = need;
    return bad;
}

API Status cudnnConvolutionForward(Handle *h, const void *alpha, const Tensor *xd, const void *x, const Filter *wd,
                                   const void *w, const Conv *cd, int algo, void *ws, size_t wsbytes,
                                   const void *beta, const Tensor *yd, void *y);
API Status cudnnConvolutionForward(Handle *h, const void *alpha, const Tensor *xd, const void *x, const Filter *wd,
                                   const void *w, const Conv *cd, int algo, void *ws, size_t wsbytes,
                                   const void *beta, const Tensor *yd, void *y)
{
    ENTER("cudnnConvolutionForward");
    if (!h || !alpha || !beta)
        return BAD_PARAM;
    Call cl = {0};
    Status s = conv_prepare(&cl, xd, x, wd, w, cd, algo, ws, wsbytes, yd, y);
    if (s)
        return s;
    cl.alpha = scale(alpha, xd->type);
    cl.beta = scale(beta, xd->type);
    if (!deferred(h->stream, conv_run, &cl))
        conv_run(&cl);
    return SUCCESS;
}

/* Whether a and b have the same dims. */
static int same_dims(const Tensor *a, const Tensor *b)
{
    return a->nb == b->nb && !memcmp(a->dim, b->dim, (size_t)a->nb * sizeof *a->dim);
}

API Status cudnnConvolutionBiasActivationForward(Handle *h, const void *alpha1, const Tensor *xd, const void *x,
                                                 const Filter *wd, const void *w, const Conv *cd, int algo, void *ws,
                                                 size_t wsbytes, const void *alpha2, const Tensor *zd, const void *z,
                                                 const Tensor *bd, const void *bias, const Act *ad, const Tensor *yd,
                                                 void *y);
API Status cudnnConvolutionBiasActivationForward(Handle *h, const void *alpha1, const Tensor *xd, const void *x,
                                                 const Filter *wd, const void *w, const Conv *cd, int algo, void *ws,
                                                 size_t wsbytes, const void *alpha2, const Tensor *zd, const void *z,
                                                 const Tensor *bd, const void *bias, const Act *ad, const Tensor *yd,
                                                 void *y)
{
    ENTER("cudnnConvolutionBiasActivationForward");
    if (!h || !alpha1 || !alpha2 || !zd || !bd || !ad || !zd->set || !bd->set || !ad->set)
        return BAD_PARAM;
    Call cl = {.fused = 1};
    Status s = conv_prepare(&cl, xd, x, wd, w, cd, algo, ws, wsbytes, yd, y);
    if (s)
        return s;
    if (!same_dims(zd, yd) || zd->type != yd->type || bd->nb != yd->nb || bd->type != yd->type)
        return BAD_PARAM;
    for (int i = 0; i < bd->nb; i++)
        if (bd->dim[i] != (i == 1 ? yd->dim[1] : 1))
            return BAD_PARAM;
    if (ad->mode == ACT_IDENTITY && algo != ALGO_PRECOMP_GEMM)
        return NOT_SUPPORTED;
    cl.z = *zd;
    cl.b = *bd;
    cl.act = *ad;
    cl.alpha = scale(alpha1, xd->type);
    cl.beta = scale(alpha2, xd->type);
    cl.pz = cl.beta != 0 ? host(z, type_size(zd->type), &s) : NULL;
    cl.pb = host(bias, type_size(bd->type), &s);
    if (s)
        return s;
    if (!deferred(h->stream, conv_run, &cl))
        conv_run(&cl);
    return SUCCESS;
}

/* C = alpha A + beta C, A broadcast over C's dims where its own are 1. */
static void add_run(void *arg)
{
    const Call *cl = arg;
    Geo a = geo_tensor(&cl->x), c = geo_tensor(&cl->y);
    for (int k = 0; k < 5; k++)
        if (a.d[k] == 1)
            a.s[k] = 0;
    int t = cl->y.type;
    int64_t i[5] = {0};
    do {
        int64_t ic = offset(&c, i);
        double v = cl->alpha * load(cl->px, t, offset(&a, i));
        if (cl->beta != 0)
            v += cl->beta * load(cl->py, t, ic);
        store(cl->py, t, ic, v);
    } while (next(i, c.d, 0, 5));
}

API Status cudnnAddTensor(Handle *h, const void *alpha, const Tensor *ad, const void *a, const void *beta,
                          const Tensor *cd, void *c);
API Status cudnnAddTensor(Handle *h, const void *alpha, const Tensor *ad, const void *a, const void *beta,
                          const Tensor *cd, void *c)
{
    ENTER("cudnnAddTensor");
    if (!h || !alpha || !beta || !ad || !cd || !ad->set || !cd->set || ad->nb != cd->nb || ad->type != cd->type)
        return BAD_PARAM;
    for (int i = 0; i < ad->nb; i++)
        if (ad->dim[i] != cd->dim[i] && ad->dim[i] != 1)
            return BAD_PARAM;
    Status bad = SUCCESS;
    Call cl = {.x = *ad, .y = *cd, .alpha = scale(alpha, cd->type), .beta = scale(beta, cd->type)};
    cl.px = host(a, type_size(ad->type), &bad);
    cl.py = host(c, type_size(cd->type), &bad);
    if (bad)
        return bad;
    if (!deferred(h->stream, add_run, &cl))
        add_run(&cl);
    return SUCCESS;
}

/* y = alpha act(x) + beta y, element by element: x may be y. */
static void act_run(void *arg)
{
    const Call *cl = arg;
    Geo x = geo_tensor(&cl->x), y = geo_tensor(&cl->y);
    int t = cl->y.type;
    int64_t i[5] = {0};
    do {
        int64_t iy = offset(&y, i);
        double v = cl->alpha * act(&cl->act, load(cl->px, t, offset(&x, i)));
        if (cl->beta != 0)
            v += cl->beta * load(cl->py, t, iy);
        store(cl->py, t, iy, v);
    } while (next(i, y.d, 0, 5));
}

API Status cudnnActivationForward(Handle *h, const Act *ad, const void *alpha, const Tensor *xd, const void *x,
                                  const void *beta, const Tensor *yd, void *y);
API Status cudnnActivationForward(Handle *h, const Act *ad, const void *alpha, const Tensor *xd, const void *x,
                                  const void *beta, const Tensor *yd, void *y)
{
    ENTER("cudnnActivationForward");
    if (!h || !ad || !alpha || !beta || !xd || !yd || !ad->set || !xd->set || !yd->set || !same_dims(xd, yd) ||
        xd->type != yd->type)
        return BAD_PARAM;
    if (ad->mode == ACT_IDENTITY) /* documented: the fused call's alone */
        return NOT_SUPPORTED;
    Status bad = SUCCESS;
    Call cl = {.x = *xd, .y = *yd, .act = *ad, .alpha = scale(alpha, yd->type), .beta = scale(beta, yd->type)};
    cl.px = host(x, type_size(xd->type), &bad);
    cl.py = host(y, type_size(yd->type), &bad);
    if (bad)
        return bad;
    if (!deferred(h->stream, act_run, &cl))
        act_run(&cl);
    return SUCCESS;
}

typedef struct PoolCall {
    Tensor x, y;
    Pool p;
    double alpha, beta;
    const void *px;
    void *py;
} PoolCall;

static void pool_run(void *arg)
{
    const PoolCall *cl = arg;
    const Pool *p = &cl->p;
    Geo x = geo_tensor(&cl->x), y = geo_tensor(&cl->y);
    int64_t win[5] = {1, 1, 1, 1, 1}, pad[5] = {0}, st[5] = {1, 1, 1, 1, 1};
    for (int i = 0; i < p->nb; i++) { /* on Geo's axes: 2-D pools at 3 and 4 */
        int j = 5 - p->nb + i;
        win[j] = p->window[i];
        pad[j] = p->pad[i];
        st[j] = p->stride[i];
    }
    int t = cl->x.type, max = p->mode == POOL_MAX || p->mode == POOL_MAX_DETERMINISTIC;
    int64_t o[5] = {0};
    do {
        int64_t r[5] = {0}, taps = 0;
        double acc = max ? -INFINITY : 0;
        int nan = 0;
        do {
            int64_t i[5] = {o[0], o[1]};
            int in = 1;
            for (int k = 2; k < 5; k++) {
                i[k] = o[k] * st[k] - pad[k] + r[k];
                in &= i[k] >= 0 && i[k] < x.d[k];
            }
            if (!in)
                continue;
            double v = load(cl->px, t, offset(&x, i));
            taps++;
            if (v != v)
                nan = 1;
            else if (!max)
                acc += v;
            else if (v > acc)
                acc = v;
        } while (next(r, win, 2, 5));
        double v = acc;
        if (nan && (p->nan == PROPAGATE_NAN || !max))
            v = NAN;
        else if (!max)
            v = acc / (double)(p->mode == POOL_AVG_INCLUDE ? win[2] * win[3] * win[4] : taps);
        v *= cl->alpha;
        int64_t iy = offset(&y, o);
        if (cl->beta != 0)
            v += cl->beta * load(cl->py, t, iy);
        store(cl->py, t, iy, v);
    } while (next(o, y.d, 0, 5));
}

API Status cudnnPoolingForward(Handle *h, const Pool *pd, const void *alpha, const Tensor *xd, const void *x,
                               const void *beta, const Tensor *yd, void *y);
API Status cudnnPoolingForward(Handle *h, const Pool *pd, const void *alpha, const Tensor *xd, const void *x,
                               const void *beta, const Tensor *yd, void *y)
{
    ENTER("cudnnPoolingForward");
    if (!h || !pd || !alpha || !beta || !xd || !yd || !pd->set || !xd->set || !yd->set || xd->type != yd->type ||
        xd->nb != yd->nb || xd->nb != pd->nb + 2 || xd->dim[0] != yd->dim[0] || xd->dim[1] != yd->dim[1])
        return BAD_PARAM;
    for (int i = 0; i < pd->nb; i++) {
        int64_t span = (int64_t)xd->dim[2 + i] + 2 * pd->pad[i] - pd->window[i];
        if (span < 0 || yd->dim[2 + i] != span / pd->stride[i] + 1)
            return BAD_PARAM;
    }
    Status bad = SUCCESS;
    PoolCall cl = {.x = *xd, .y = *yd, .p = *pd, .alpha = scale(alpha, yd->type), .beta = scale(beta, yd->type)};
    cl.px = host(x, type_size(xd->type), &bad);
    cl.py = host(y, type_size(yd->type), &bad);
    if (bad)
        return bad;
    if (!fake_defer(h->stream, pool_run, &cl, sizeof cl))
        pool_run(&cl);
    return SUCCESS;
}

/* ---- the backward data of a convolution --------------------------------------- */

API Status cudnnGetConvolutionBackwardDataAlgorithm_v7(Handle *h, const Filter *w, const Tensor *dy, const Conv *c,
                                                       const Tensor *dx, int want, int *got, Perf *perf);
API Status cudnnGetConvolutionBackwardDataAlgorithm_v7(Handle *h, const Filter *w, const Tensor *dy, const Conv *c,
                                                       const Tensor *dx, int want, int *got, Perf *perf)
{
    ENTER("cudnnGetConvolutionBackwardDataAlgorithm_v7");
    if (!h || !got || !perf || want < 1)
        return BAD_PARAM;
    Status s = conv_check(dx, w, c, dy);
    if (s)
        return s;
    return ranked(c, want, got, perf);
}

/* dx = alpha conv^T(dy, w) + beta dx: the call's descriptors x and y are
 * dx's and dy's (the forward geometry), its pointers pz dy and py dx. */
static void bwd_run(void *arg)
{
    const Call *cl = arg;
    const Conv *c = &cl->c;
    Geo dx = geo_tensor(&cl->x), dy = geo_tensor(&cl->y), w = geo_filter(&cl->w);
    int64_t pad[5] = {0}, st[5] = {1, 1, 1, 1, 1}, dil[5] = {1, 1, 1, 1, 1};
    for (int i = 0; i < c->nsp; i++) {
        int j = 5 - c->nsp + i;
        pad[j] = c->pad[i];
        st[j] = c->stride[i];
        dil[j] = c->dil[i];
    }
    last_math = c->math;
    if (cl->pws)
        memset(cl->pws, 0xa5, cl->ws);
    int t = cl->x.type, flip = c->mode == CONVOLUTION;
    int64_t kg = w.d[0] / c->groups, cg = w.d[1];
    double *acc = calloc((size_t)(dx.d[0] * dx.d[1] * dx.d[2] * dx.d[3] * dx.d[4]), sizeof *acc);
    if (!acc)
        abort();
    int64_t q[5] = {0};
    do { /* q: an element of dy */
        double v = load(cl->pz, t, offset(&dy, q));
        int64_t g = q[1] / kg, r[5] = {0};
        do { /* r: a tap and a channel of the group */
            int64_t p[5] = {q[0], g * cg + r[1]}, f[5] = {q[1], r[1]};
            int in = 1;
            for (int k = 2; k < 5; k++) {
                p[k] = q[k] * st[k] - pad[k] + r[k] * dil[k];
                in &= p[k] >= 0 && p[k] < dx.d[k];
                f[k] = flip ? w.d[k] - 1 - r[k] : r[k];
            }
            if (in)
                acc[(((p[0] * dx.d[1] + p[1]) * dx.d[2] + p[2]) * dx.d[3] + p[3]) * dx.d[4] + p[4]] +=
                    v * load(cl->pw, t, offset(&w, f));
        } while (next(r, w.d, 1, 5));
    } while (next(q, dy.d, 0, 5));
    int64_t p[5] = {0}, i = 0;
    do {
        int64_t at = offset(&dx, p);
        double v = cl->alpha * acc[i++];
        if (cl->beta != 0)
            v += cl->beta * load(cl->py, t, at);
        store(cl->py, t, at, v);
    } while (next(p, dx.d, 0, 5));
    free(acc);
}

API Status cudnnConvolutionBackwardData(Handle *h, const void *alpha, const Filter *wd, const void *w,
                                        const Tensor *dyd, const void *dy, const Conv *cd, int algo, void *ws,
                                        size_t wsbytes, const void *beta, const Tensor *dxd, void *dx);
API Status cudnnConvolutionBackwardData(Handle *h, const void *alpha, const Filter *wd, const void *w,
                                        const Tensor *dyd, const void *dy, const Conv *cd, int algo, void *ws,
                                        size_t wsbytes, const void *beta, const Tensor *dxd, void *dx)
{
    ENTER("cudnnConvolutionBackwardData");
    if (!h || !alpha || !beta)
        return BAD_PARAM;
    Call cl = {0};
    /* the forward geometry: x = dx, y = dy */
    Status s = conv_prepare(&cl, dxd, dx, wd, w, cd, algo, ws, wsbytes, dyd, (void *)(uintptr_t)dy);
    if (s)
        return s;
    cl.alpha = scale(alpha, dxd->type);
    cl.beta = scale(beta, dxd->type);
    /* conv_prepare's px is dx and its py dy: dy is read, dx written */
    cl.pz = cl.py;
    cl.py = (void *)(uintptr_t)cl.px;
    if (!deferred(h->stream, bwd_run, &cl))
        bwd_run(&cl);
    return SUCCESS;
}
