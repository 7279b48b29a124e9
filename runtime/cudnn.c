/*
 * cudnn.c — a cuda model's convolutions and pooling through cuDNN.
 *
 * libcudnn is optional: loaded with dlopen on first use (DISC_CUDNN, a
 * path, else cuDNN 9's soname, else 8's), as the driver and cuBLASLt are,
 * so the runtime archive links no CUDA library. The compiler asks
 * disc_dnn_available and, where it does not load, makes a convolution one
 * of the module's own kernels (cuda.c). Its types and constants are
 * declared again in cudnn_abi.h (unit/test_cudnn_abi checks them against
 * the toolkit's headers). The calls are cuDNN's legacy convolution API,
 * which cuDNN 9 keeps (libcudnn_cnn) and PyTorch still calls.
 *
 * The host flow calls disc_rt_dev_conv with disc_rt_call_conv's fields
 * (rt.h): x [N][C][spatial...], w [O][C/groups][window...], y
 * [N][O][out...], all packed NCHW; one spatial axis is cuDNN's 2-D with a
 * height of 1. A plan per distinct call (the fields and which epilogue
 * operands come) holds the descriptors and the algorithm
 * cudnnGetConvolutionForwardAlgorithm_v7 ranks first among those whose
 * workspace fits the device's (no benchmarking: the heuristic's choice
 * never runs a kernel, so a plan can be made while a CUDA graph captures),
 * so a shape seen before costs the calls alone. The epilogue
 *
 *     y = post_res(post(conv(x, w) + bias) + residual)   (posts NONE or RELU)
 *
 * is one cudnnConvolutionBiasActivationForward where it has that form
 * (a bias, and ReLU after it, or after the residual as its z operand),
 * else the convolution followed by cudnnAddTensor and
 * cudnnActivationForward calls, in place on y. f32 runs in FMA math
 * (TF32 only with DISC_TF32=1, as for matmuls), f16 on tensor cores with
 * f32 accumulation.
 *
 * A transposed convolution (DISC_CV_TRANSPOSE: w [C][O/groups][window...],
 * x [N][C][in...], y [N][O][out...]) is cuDNN's backward data of the
 * convolution that maps y's shape to x's with the same weights, pads,
 * strides and dilations: cudnnConvolutionBackwardData with dy = x and
 * dx = y, the algorithm from cudnnGetConvolutionBackwardDataAlgorithm_v7
 * within the same workspace; its epilogue the separate calls. It takes
 * one where that forward convolution gives x's size from y's (an
 * output_padding below the stride), else it is not handed one.
 *
 * The workspace (64 MiB) is one device buffer kept with the handle, fixed
 * so that a graph that captured a call keeps a valid address; an
 * algorithm that needs more is passed over. Runs of one compiled model
 * take turns (exec.c, aot.c), so a device's plans need no lock.
 *
 * disc_rt_dev_pool takes disc_rt_call_pool's fields: max pooling (NaN
 * propagated: a window with a NaN gives NaN, as the interpreter's) or
 * average pooling, dividing by the taps on the input (count_pad 0) or by
 * the whole window (count_pad 1; floor mode, so no window reaches past
 * the pads), on NCHW data with pads equal at both ends and smaller than
 * the window, and no dilation (cuDNN's pooling has none). Its plan holds
 * the two tensors and the pooling descriptor.
 */
#include "ir/ir.h"
#include "runtime/cudnn_abi.h"
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
    char name[200]; /* what loaded */
    char why[600];  /* why the library is not there, or "" */
    size_t (*GetVersion)(void);
    const char *(*GetErrorString)(DnnStatus);
    DnnStatus (*Create)(DnnHandle *);
    DnnStatus (*Destroy)(DnnHandle);
    DnnStatus (*SetStream)(DnnHandle, void *);
    DnnStatus (*CreateTensorDescriptor)(DnnTensor *);
    DnnStatus (*DestroyTensorDescriptor)(DnnTensor);
    DnnStatus (*SetTensorNdDescriptor)(DnnTensor, int, int, const int *, const int *);
    DnnStatus (*CreateFilterDescriptor)(DnnFilter *);
    DnnStatus (*DestroyFilterDescriptor)(DnnFilter);
    DnnStatus (*SetFilterNdDescriptor)(DnnFilter, int, int, int, const int *);
    DnnStatus (*CreateConvolutionDescriptor)(DnnConv *);
    DnnStatus (*DestroyConvolutionDescriptor)(DnnConv);
    DnnStatus (*SetConvolutionNdDescriptor)(DnnConv, int, const int *, const int *, const int *, int, int);
    DnnStatus (*SetConvolutionGroupCount)(DnnConv, int);
    DnnStatus (*SetConvolutionMathType)(DnnConv, int);
    DnnStatus (*GetConvolutionForwardAlgorithm_v7)(DnnHandle, DnnTensor, DnnFilter, DnnConv, DnnTensor, int, int *,
                                                   DnnFwdPerf *);
    DnnStatus (*ConvolutionForward)(DnnHandle, const void *, DnnTensor, const void *, DnnFilter, const void *, DnnConv,
                                    int, void *, size_t, const void *, DnnTensor, void *);
    DnnStatus (*GetConvolutionBackwardDataAlgorithm_v7)(DnnHandle, DnnFilter, DnnTensor, DnnConv, DnnTensor, int,
                                                        int *, DnnFwdPerf *);
    DnnStatus (*ConvolutionBackwardData)(DnnHandle, const void *, DnnFilter, const void *, DnnTensor, const void *,
                                         DnnConv, int, void *, size_t, const void *, DnnTensor, void *);
    DnnStatus (*ConvolutionBiasActivationForward)(DnnHandle, const void *, DnnTensor, const void *, DnnFilter,
                                                  const void *, DnnConv, int, void *, size_t, const void *, DnnTensor,
                                                  const void *, DnnTensor, const void *, DnnAct, DnnTensor, void *);
    DnnStatus (*CreateActivationDescriptor)(DnnAct *);
    DnnStatus (*DestroyActivationDescriptor)(DnnAct);
    DnnStatus (*SetActivationDescriptor)(DnnAct, int, int, double);
    DnnStatus (*AddTensor)(DnnHandle, const void *, DnnTensor, const void *, const void *, DnnTensor, void *);
    DnnStatus (*ActivationForward)(DnnHandle, DnnAct, const void *, DnnTensor, const void *, const void *, DnnTensor,
                                   void *);
    DnnStatus (*CreatePoolingDescriptor)(DnnPool *);
    DnnStatus (*DestroyPoolingDescriptor)(DnnPool);
    DnnStatus (*SetPoolingNdDescriptor)(DnnPool, int, int, int, const int *, const int *, const int *);
    DnnStatus (*PoolingForward)(DnnHandle, DnnPool, const void *, DnnTensor, const void *, const void *, DnnTensor,
                                void *);
} dn = {.once = PTHREAD_ONCE_INIT};

static void lib_load(void)
{
    static const char *names[] = {"libcudnn.so.9", "libcudnn.so.8"};
    const char *path = getenv("DISC_CUDNN"), *err = NULL;
    if (path && *path) { /* the caller's library, and no other */
        if ((dn.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL)))
            snprintf(dn.name, sizeof dn.name, "%s", path);
        else
            err = dlerror();
    }
    for (size_t i = 0; !(path && *path) && i < sizeof names / sizeof *names && !dn.lib; i++)
        if ((dn.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL)))
            snprintf(dn.name, sizeof dn.name, "%s", names[i]);
        else if (!err)
            err = dlerror();
    if (!dn.lib) {
        snprintf(dn.why, sizeof dn.why, "cannot load %s (cuDNN 9 or 8; DISC_CUDNN names another): %s",
                 path && *path ? path : "libcudnn.so.9 or .8", err ? err : "not found");
        return;
    }
    struct {
        void **fn;
        const char *name;
    } syms[] = {
#define SYM(f) {(void **)&dn.f, "cudnn" #f}
        SYM(GetVersion), SYM(GetErrorString), SYM(Create), SYM(Destroy), SYM(SetStream),
        SYM(CreateTensorDescriptor), SYM(DestroyTensorDescriptor), SYM(SetTensorNdDescriptor),
        SYM(CreateFilterDescriptor), SYM(DestroyFilterDescriptor), SYM(SetFilterNdDescriptor),
        SYM(CreateConvolutionDescriptor), SYM(DestroyConvolutionDescriptor), SYM(SetConvolutionNdDescriptor),
        SYM(SetConvolutionGroupCount), SYM(SetConvolutionMathType), SYM(GetConvolutionForwardAlgorithm_v7),
        SYM(ConvolutionForward), SYM(ConvolutionBiasActivationForward), SYM(CreateActivationDescriptor),
        SYM(DestroyActivationDescriptor), SYM(SetActivationDescriptor), SYM(AddTensor), SYM(ActivationForward),
        SYM(CreatePoolingDescriptor), SYM(DestroyPoolingDescriptor), SYM(SetPoolingNdDescriptor),
        SYM(PoolingForward), SYM(GetConvolutionBackwardDataAlgorithm_v7), SYM(ConvolutionBackwardData),
#undef SYM
    };
    for (size_t i = 0; i < sizeof syms / sizeof *syms; i++)
        if (!(*syms[i].fn = dlsym(dn.lib, syms[i].name))) {
            snprintf(dn.why, sizeof dn.why, "%s has no %s (disc needs cuDNN 8 or 9 with its convolution API)",
                     dn.name, syms[i].name);
            return;
        }
}

int disc_dnn_available(char *why, size_t n)
{
    pthread_once(&dn.once, lib_load);
    if (dn.why[0] && why && n)
        snprintf(why, n, "%s", dn.why);
    return !dn.why[0];
}

/* Records the failure of `what` with cuDNN's text for s; -1. */
static int failed(DiscRt *rt, DnnStatus s, const char *what)
{
    const char *text = dn.GetErrorString ? dn.GetErrorString(s) : NULL;
    disc_rt_fail(rt, "cuda: cuDNN: %s: %s (status %d)", what, text ? text : "error", s);
    return -1;
}

/* ---- plans -------------------------------------------------------------------- */

enum { WS_BYTES = 64 << 20, NALGO = 8 };

typedef struct Key {
    int64_t f[DISC_CV_NFIELDS]; /* the fields, DISC_CV_WEIGHTS_CONST zeroed; a pool's DISC_PL_ ones */
    int32_t bias, residual;
    int32_t pool;               /* disc_rt_dev_pool's */
} Key;
_Static_assert((int)DISC_PL_NFIELDS <= (int)DISC_CV_NFIELDS, "a pool's fields fit a key");

typedef struct Plan {
    DiscPlan link;        /* first, the key right after it (plans.h) */
    Key key;
    DnnTensor x, y, b;    /* b: the bias, [1][O][1]... */
    DnnFilter w;
    DnnConv conv;
    DnnPool pool;
    int algo;
    size_t ws;            /* the workspace the algorithm needs */
    bool fused;           /* one cudnnConvolutionBiasActivationForward */
    char name[128];       /* for DISC_PROFILE */
} Plan;
_Static_assert(offsetof(Plan, key) == sizeof(DiscPlan), "a plan's key follows its link");

struct DiscDnn {
    DnnHandle h;
    DnnAct relu;
    DiscDevPtr ws;
    bool tf32;            /* DISC_TF32=1 */
    DiscPlans plans;
};

static void plan_free(DiscPlan *dp)
{
    Plan *p = (Plan *)dp;
    if (p->x)
        dn.DestroyTensorDescriptor(p->x);
    if (p->y)
        dn.DestroyTensorDescriptor(p->y);
    if (p->b)
        dn.DestroyTensorDescriptor(p->b);
    if (p->w)
        dn.DestroyFilterDescriptor(p->w);
    if (p->conv)
        dn.DestroyConvolutionDescriptor(p->conv);
    if (p->pool)
        dn.DestroyPoolingDescriptor(p->pool);
    free(p);
}

void disc_dnn_free(DiscDnn *d)
{
    if (!d)
        return;
    disc_plans_clear(&d->plans);
    if (d->relu)
        dn.DestroyActivationDescriptor(d->relu);
    if (d->h)
        dn.Destroy(d->h);
    free(d); /* the workspace goes with the device's buffers */
}

/* The device's cuDNN: made on first use. */
static DiscDnn *dnn(DiscRt *rt, DiscGpu *g)
{
    DiscDnn **slot = disc_gpu_dnn_slot(g);
    if (*slot)
        return *slot;
    if (disc_gpu_capturing(rt, g, "cuDNN's first use") != 0) /* its workspace lives with the device */
        return NULL;
    char why[600];
    if (!disc_dnn_available(why, sizeof why)) {
        disc_rt_fail(rt, "cuda: %s (this model's convolutions were compiled for cuDNN; DISC_CUDNN=0 at compile "
                         "time makes disc's own kernels instead)", why);
        return NULL;
    }
    DiscDnn *d = calloc(1, sizeof *d);
    if (!d) {
        disc_rt_fail(rt, "cuda: out of memory");
        return NULL;
    }
    d->plans.keysize = sizeof(Key);
    d->plans.free = plan_free;
    const char *tf = getenv("DISC_TF32");
    d->tf32 = tf && !strcmp(tf, "1");
    if (disc_gpu_current(rt, g) != 0) {
        free(d);
        return NULL;
    }
    const char *what = "cudnnCreate";
    DnnStatus s = dn.Create(&d->h);
    if (s)
        d->h = NULL;
    if (!s && (what = "cudnnSetStream", !(s = dn.SetStream(d->h, disc_gpu_stream(g)))) &&
        (what = "cudnnCreateActivationDescriptor", !(s = dn.CreateActivationDescriptor(&d->relu))))
        s = dn.SetActivationDescriptor(d->relu, DNN_ACT_RELU, DNN_PROPAGATE_NAN, 0.0);
    if (s) {
        failed(rt, s, what);
        disc_dnn_free(d);
        return NULL;
    }
    if (!(d->ws = disc_gpu_alloc(rt, g, WS_BYTES))) {
        disc_dnn_free(d);
        return NULL;
    }
    return *slot = d;
}

static int dnn_type(int64_t dt)
{
    return dt == DT_F32 ? DNN_FLOAT : dt == DT_F16 ? DNN_HALF : -1;
}

/* A packed NCHW tensor of nd dims. */
static DnnStatus tensor(DnnTensor *t, int type, int nd, const int *dims)
{
    int strides[5];
    strides[nd - 1] = 1;
    for (int i = nd - 2; i >= 0; i--)
        strides[i] = strides[i + 1] * dims[i + 1];
    DnnStatus s = dn.CreateTensorDescriptor(t);
    if (s) {
        *t = NULL;
        return s;
    }
    return dn.SetTensorNdDescriptor(*t, type, nd, dims, strides);
}

/* The nsp spatial values of field `at` on cuDNN's axes (one axis as 2-D:
 * the added height first, `one` there). */
static void axes(const int64_t *f, int nsp, int at, int one, int *out)
{
    int ns = nsp == 1 ? 2 : nsp;
    for (int i = 0; i < ns; i++) {
        int a = nsp == 1 ? i - 1 : i;
        out[i] = a < 0 ? one : (int)f[at + a];
    }
}

/* "3x3" for DISC_PROFILE. */
static void window_text(char *s, size_t size, const int64_t *k, int nsp)
{
    int n = snprintf(s, size, "%lld", (long long)k[0]);
    for (int i = 1; i < nsp && n > 0 && (size_t)n < size; i++)
        n += snprintf(s + n, size - (size_t)n, "x%lld", (long long)k[i]);
}

static int64_t prod3(const int64_t *d)
{
    return d[0] * d[1] * d[2];
}

static Plan *plan_new(DiscRt *rt, const Key *key)
{
    Plan *p = calloc(1, sizeof *p);
    if (!p)
        disc_rt_fail(rt, "cuda: out of memory");
    else
        p->key = *key;
    return p;
}

/* Whether every size fits cuDNN's int, and the call is one it takes. */
static bool fits(const int64_t *f)
{
    for (int i = 0; i < DISC_CV_NFIELDS; i++)
        if (f[i] < 0 || f[i] > 0x7fffffff)
            return false;
    if (f[DISC_CV_N] * f[DISC_CV_C] > 0x7fffffff || f[DISC_CV_N] * f[DISC_CV_O] > 0x7fffffff)
        return false;
    for (int i = 0; i < 3; i++) {
        if (f[DISC_CV_PAD_LO + i] != f[DISC_CV_PAD_HI + i])
            return false;
        /* transposed: the forward convolution of y's size gives x's */
        int64_t span = f[DISC_CV_OUT + i] + 2 * f[DISC_CV_PAD_LO + i] - f[DISC_CV_DILATION + i] * (f[DISC_CV_K + i] - 1) - 1;
        if (i < f[DISC_CV_NSP] && f[DISC_CV_TRANSPOSE] &&
            (span < 0 || f[DISC_CV_STRIDE + i] < 1 || span / f[DISC_CV_STRIDE + i] + 1 != f[DISC_CV_IN + i]))
            return false;
    }
    return dnn_type(f[DISC_CV_DTYPE]) >= 0 && f[DISC_CV_NSP] >= 1 && f[DISC_CV_NSP] <= 3 &&
           !f[DISC_CV_LAYOUT] && f[DISC_CV_GROUPS] >= 1 && f[DISC_CV_C] % f[DISC_CV_GROUPS] == 0 &&
           (f[DISC_CV_POST] == DISC_POST_NONE || f[DISC_CV_POST] == DISC_POST_RELU) &&
           (f[DISC_CV_POST_RES] == DISC_POST_NONE || f[DISC_CV_POST_RES] == DISC_POST_RELU);
}

static Plan *plan_make(DiscRt *rt, DiscDnn *d, const Key *key)
{
    const int64_t *f = key->f;
    if (!fits(f) || (key->residual && f[DISC_CV_POST] != DISC_POST_NONE)) {
        disc_rt_fail(rt, "cuda: cuDNN: a convolution it is not handed (dtype %lld, %lld spatial axes, pads %lld %lld "
                     "%lld / %lld %lld %lld, transposed %lld, layout %lld, post %lld, %s)", (long long)f[DISC_CV_DTYPE],
                     (long long)f[DISC_CV_NSP], (long long)f[DISC_CV_PAD_LO], (long long)f[DISC_CV_PAD_LO + 1],
                     (long long)f[DISC_CV_PAD_LO + 2], (long long)f[DISC_CV_PAD_HI], (long long)f[DISC_CV_PAD_HI + 1],
                     (long long)f[DISC_CV_PAD_HI + 2], (long long)f[DISC_CV_TRANSPOSE], (long long)f[DISC_CV_LAYOUT],
                     (long long)f[DISC_CV_POST], key->residual ? "a residual" : "no residual");
        return NULL;
    }
    int type = dnn_type(f[DISC_CV_DTYPE]), nsp = (int)f[DISC_CV_NSP];
    bool tr = f[DISC_CV_TRANSPOSE];
    int ns = nsp == 1 ? 2 : nsp, nd = ns + 2; /* one axis: 2-D with a height of 1 */
    int xd[5] = {(int)f[DISC_CV_N], (int)f[DISC_CV_C]}, yd[5] = {(int)f[DISC_CV_N], (int)f[DISC_CV_O]};
    int wd[5] = {(int)f[DISC_CV_O], (int)(f[DISC_CV_C] / f[DISC_CV_GROUPS])}, bd[5] = {1, (int)f[DISC_CV_O], 1, 1, 1};
    if (tr) /* w [C][O/groups][window...] */
        wd[0] = (int)f[DISC_CV_C], wd[1] = (int)(f[DISC_CV_O] / f[DISC_CV_GROUPS]);
    int pad[3], stride[3], dil[3];
    axes(f, nsp, DISC_CV_IN, 1, xd + 2);
    axes(f, nsp, DISC_CV_OUT, 1, yd + 2);
    axes(f, nsp, DISC_CV_K, 1, wd + 2);
    axes(f, nsp, DISC_CV_PAD_LO, 0, pad);
    axes(f, nsp, DISC_CV_STRIDE, 1, stride);
    axes(f, nsp, DISC_CV_DILATION, 1, dil);
    Plan *p = plan_new(rt, key);
    if (!p)
        return NULL;
    int64_t post = f[DISC_CV_POST], post_res = f[DISC_CV_POST_RES];
    char win[48];
    window_text(win, sizeof win, f + DISC_CV_K, nsp);
    snprintf(p->name, sizeof p->name, "cudnn conv%s %s %lld->%lld%s %s%s%s%s%s", tr ? "_transpose" : "", win,
             (long long)f[DISC_CV_C],
             (long long)f[DISC_CV_O], f[DISC_CV_GROUPS] > 1 ? " grouped" : "", dtype_name((DType)f[DISC_CV_DTYPE]),
             key->bias ? " +bias" : "", post == DISC_POST_RELU ? " +relu" : "", key->residual ? " +residual" : "",
             post_res == DISC_POST_RELU ? " +relu" : "");
    /* one call where the epilogue is its form: relu(conv + z + bias) */
    p->fused = !tr && key->bias && ((post == DISC_POST_RELU && !key->residual) ||
                                    (post == DISC_POST_NONE && key->residual && post_res == DISC_POST_RELU));
    int math = type == DNN_HALF || d->tf32 ? DNN_TENSOR_OP_MATH : DNN_FMA_MATH;
    const char *what = "cudnnSetTensorNdDescriptor";
    DnnStatus s = tensor(&p->x, type, nd, xd);
    if (!s)
        s = tensor(&p->y, type, nd, yd);
    if (!s && key->bias)
        s = tensor(&p->b, type, nd, bd);
    if (!s && (what = "cudnnSetFilterNdDescriptor", 1) && !(s = dn.CreateFilterDescriptor(&p->w)))
        s = dn.SetFilterNdDescriptor(p->w, type, DNN_NCHW, nd, wd);
    if (!s && (what = "cudnnSetConvolutionNdDescriptor", 1) && !(s = dn.CreateConvolutionDescriptor(&p->conv)) &&
        !(s = dn.SetConvolutionNdDescriptor(p->conv, ns, pad, stride, dil, DNN_CROSS_CORRELATION, DNN_FLOAT)) &&
        !(s = dn.SetConvolutionGroupCount(p->conv, (int)f[DISC_CV_GROUPS])))
        s = dn.SetConvolutionMathType(p->conv, math);
    DnnFwdPerf perf[NALGO];
    int found = 0;
    if (!s && tr && (what = "cudnnGetConvolutionBackwardDataAlgorithm_v7", 1))
        s = dn.GetConvolutionBackwardDataAlgorithm_v7(d->h, p->w, p->x, p->conv, p->y, NALGO, &found, perf);
    else if (!s && (what = "cudnnGetConvolutionForwardAlgorithm_v7", 1))
        s = dn.GetConvolutionForwardAlgorithm_v7(d->h, p->x, p->w, p->conv, p->y, NALGO, &found, perf);
    int pick = -1;
    for (int i = 0; !s && i < found && pick < 0; i++)
        if (perf[i].status == DNN_SUCCESS && perf[i].memory <= WS_BYTES)
            pick = i;
    if (s || pick < 0) {
        char msg[200];
        snprintf(msg, sizeof msg, "%s for %s", what, p->name);
        if (s)
            failed(rt, s, msg);
        else
            disc_rt_fail(rt, "cuda: cuDNN: no algorithm for %s within a workspace of %d MiB (%d ranked)", p->name,
                         WS_BYTES >> 20, found);
        plan_free(&p->link);
        return NULL;
    }
    p->algo = perf[pick].algo;
    p->ws = perf[pick].memory;
    return p;
}

/* ---- pooling ------------------------------------------------------------------ */

/* Whether every size fits cuDNN's int, and the pooling is one it takes. */
static bool pool_fits(const int64_t *f)
{
    for (int i = 0; i < DISC_PL_NFIELDS; i++)
        if (f[i] < 0 || f[i] > 0x7fffffff)
            return false;
    if (f[DISC_PL_N] * f[DISC_PL_C] > 0x7fffffff || dnn_type(f[DISC_PL_DTYPE]) < 0 || f[DISC_PL_NSP] < 1 ||
        f[DISC_PL_NSP] > 3 || f[DISC_PL_LAYOUT])
        return false;
    for (int i = 0; i < f[DISC_PL_NSP]; i++)
        if (f[DISC_PL_DILATION + i] != 1 || f[DISC_PL_PAD_LO + i] != f[DISC_PL_PAD_HI + i] ||
            f[DISC_PL_PAD_LO + i] >= f[DISC_PL_WINDOW + i] || f[DISC_PL_STRIDE + i] < 1)
            return false;
    return true;
}

static Plan *pool_plan(DiscRt *rt, const Key *key)
{
    const int64_t *f = key->f;
    if (!pool_fits(f)) {
        disc_rt_fail(rt, "cuda: cuDNN: a pooling it is not handed (dtype %lld, %lld spatial axes, dilations %lld %lld "
                     "%lld, pads %lld %lld %lld / %lld %lld %lld, layout %lld)", (long long)f[DISC_PL_DTYPE],
                     (long long)f[DISC_PL_NSP], (long long)f[DISC_PL_DILATION], (long long)f[DISC_PL_DILATION + 1],
                     (long long)f[DISC_PL_DILATION + 2], (long long)f[DISC_PL_PAD_LO],
                     (long long)f[DISC_PL_PAD_LO + 1], (long long)f[DISC_PL_PAD_LO + 2], (long long)f[DISC_PL_PAD_HI],
                     (long long)f[DISC_PL_PAD_HI + 1], (long long)f[DISC_PL_PAD_HI + 2], (long long)f[DISC_PL_LAYOUT]);
        return NULL;
    }
    int type = dnn_type(f[DISC_PL_DTYPE]), nsp = (int)f[DISC_PL_NSP];
    int ns = nsp == 1 ? 2 : nsp, nd = ns + 2;
    int xd[5] = {(int)f[DISC_PL_N], (int)f[DISC_PL_C]}, yd[5] = {(int)f[DISC_PL_N], (int)f[DISC_PL_C]};
    int win[3], pad[3], stride[3];
    axes(f, nsp, DISC_PL_IN, 1, xd + 2);
    axes(f, nsp, DISC_PL_OUT, 1, yd + 2);
    axes(f, nsp, DISC_PL_WINDOW, 1, win);
    axes(f, nsp, DISC_PL_PAD_LO, 0, pad);
    axes(f, nsp, DISC_PL_STRIDE, 1, stride);
    Plan *p = plan_new(rt, key);
    if (!p)
        return NULL;
    bool max = f[DISC_PL_MAX];
    int mode = max ? DNN_POOL_MAX : f[DISC_PL_COUNT_PAD] ? DNN_POOL_AVG_INCLUDE_PAD : DNN_POOL_AVG_EXCLUDE_PAD;
    char w[48];
    window_text(w, sizeof w, f + DISC_PL_WINDOW, nsp);
    snprintf(p->name, sizeof p->name, "cudnn pool %s %s%s %s", max ? "max" : "avg", w,
             !max && f[DISC_PL_COUNT_PAD] ? " count_pad" : "", dtype_name((DType)f[DISC_PL_DTYPE]));
    const char *what = "cudnnSetTensorNdDescriptor";
    DnnStatus s = tensor(&p->x, type, nd, xd);
    if (!s)
        s = tensor(&p->y, type, nd, yd);
    if (!s && (what = "cudnnSetPoolingNdDescriptor", 1) && !(s = dn.CreatePoolingDescriptor(&p->pool)))
        s = dn.SetPoolingNdDescriptor(p->pool, mode, DNN_PROPAGATE_NAN, ns, win, pad, stride);
    if (s) {
        char msg[200];
        snprintf(msg, sizeof msg, "%s for %s", what, p->name);
        failed(rt, s, msg);
        plan_free(&p->link);
        return NULL;
    }
    return p;
}

static DiscPlan *make(DiscRt *rt, void *d, const void *key)
{
    const Key *k = key;
    Plan *p = k->pool ? pool_plan(rt, k) : plan_make(rt, d, key);
    return p ? &p->link : NULL;
}

/* ---- the call ------------------------------------------------------------------ */

/* y = act(y) in place; 0 or -1. */
static int relu(DiscRt *rt, DiscDnn *d, Plan *p, void *y)
{
    float one = 1, zero = 0;
    DnnStatus s = dn.ActivationForward(d->h, d->relu, &one, p->y, y, &zero, p->y, y);
    return s ? failed(rt, s, "cudnnActivationForward") : 0;
}

/* y += a (a shaped as desc, broadcast over y); 0 or -1. */
static int add(DiscRt *rt, DiscDnn *d, DnnTensor desc, const void *a, Plan *p, void *y)
{
    float one = 1;
    DnnStatus s = dn.AddTensor(d->h, &one, desc, a, &one, p->y, y);
    return s ? failed(rt, s, "cudnnAddTensor") : 0;
}

int32_t disc_rt_dev_conv(DiscRt *rt, const int64_t *f, const void *x, const void *w, const void *bias,
                         const void *residual, void *y)
{
    DiscGpu *g = disc_rt_run_gpu(rt);
    if (!g)
        return -1;
    if (f[DISC_CV_N] * f[DISC_CV_O] * prod3(f + DISC_CV_OUT) == 0)
        return 0; /* an empty result */
    if (f[DISC_CV_C] * prod3(f + DISC_CV_IN) * prod3(f + DISC_CV_K) == 0) {
        disc_rt_fail(rt, "cuda: cuDNN: a convolution with an empty input channel or window (C %lld) and a "
                     "non-empty result", (long long)f[DISC_CV_C]);
        return -1;
    }
    DiscDnn *d = dnn(rt, g);
    if (!d)
        return -1;
    Key key;
    memset(&key, 0, sizeof key);
    memcpy(key.f, f, sizeof key.f);
    key.f[DISC_CV_WEIGHTS_CONST] = 0;
    key.bias = bias != NULL;
    key.residual = residual != NULL;
    Plan *p = (Plan *)disc_plans_get(&d->plans, rt, g, &key, make, d);
    if (!p || disc_gpu_current(rt, g) != 0)
        return -1;
    int t = -1;
    if (disc_rt_profiling() && (t = disc_gpu_time_start(rt, g, p, p->name)) < 0)
        return -1;
    float one = 1, zero = 0;
    void *ws = (void *)(uintptr_t)d->ws;
    DnnStatus s;
    if (p->fused) {
        const void *z = residual ? residual : y;
        s = dn.ConvolutionBiasActivationForward(d->h, &one, p->x, x, p->w, w, p->conv, p->algo, ws, p->ws,
                                                residual ? &one : &zero, p->y, z, p->b, bias, d->relu, p->y, y);
        if (s) {
            char msg[180];
            snprintf(msg, sizeof msg, "cudnnConvolutionBiasActivationForward (%s)", p->name);
            return failed(rt, s, msg);
        }
        return disc_gpu_time_end(rt, g, t);
    }
    if (f[DISC_CV_TRANSPOSE])
        s = dn.ConvolutionBackwardData(d->h, &one, p->w, w, p->x, x, p->conv, p->algo, ws, p->ws, &zero, p->y, y);
    else
        s = dn.ConvolutionForward(d->h, &one, p->x, x, p->w, w, p->conv, p->algo, ws, p->ws, &zero, p->y, y);
    if (s) {
        char msg[180];
        snprintf(msg, sizeof msg, "%s (%s)", f[DISC_CV_TRANSPOSE] ? "cudnnConvolutionBackwardData" : "cudnnConvolutionForward",
                 p->name);
        return failed(rt, s, msg);
    }
    if ((bias && add(rt, d, p->b, bias, p, y) != 0) || (f[DISC_CV_POST] == DISC_POST_RELU && relu(rt, d, p, y) != 0) ||
        (residual && add(rt, d, p->y, residual, p, y) != 0) ||
        (f[DISC_CV_POST_RES] == DISC_POST_RELU && relu(rt, d, p, y) != 0))
        return -1;
    return disc_gpu_time_end(rt, g, t);
}

int32_t disc_rt_dev_pool(DiscRt *rt, const int64_t *f, const void *x, void *y)
{
    DiscGpu *g = disc_rt_run_gpu(rt);
    if (!g)
        return -1;
    if (f[DISC_PL_N] * f[DISC_PL_C] * prod3(f + DISC_PL_OUT) == 0)
        return 0; /* an empty result */
    DiscDnn *d = dnn(rt, g);
    if (!d)
        return -1;
    Key key;
    memset(&key, 0, sizeof key);
    memcpy(key.f, f, sizeof(int64_t) * DISC_PL_NFIELDS);
    key.pool = 1;
    Plan *p = (Plan *)disc_plans_get(&d->plans, rt, g, &key, make, d);
    if (!p || disc_gpu_current(rt, g) != 0)
        return -1;
    int t = -1;
    if (disc_rt_profiling() && (t = disc_gpu_time_start(rt, g, p, p->name)) < 0)
        return -1;
    float one = 1, zero = 0;
    DnnStatus s = dn.PoolingForward(d->h, p->pool, &one, p->x, x, &zero, p->y, y);
    if (s) {
        char msg[180];
        snprintf(msg, sizeof msg, "cudnnPoolingForward (%s)", p->name);
        return failed(rt, s, msg);
    }
    return disc_gpu_time_end(rt, g, t);
}
