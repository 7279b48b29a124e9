/*
 * cudrv.c — the CUDA driver: a device, its memory, modules and launches.
 *
 * disc links no CUDA library. libcuda.so.1 is loaded with dlopen on first
 * use and every entry point is asked of the driver through
 * cuGetProcAddress, by its base name and the ABI version disc was written
 * against (12.0): cuda.h renames many functions to versioned symbols
 * (cuMemAlloc is cuMemAlloc_v2, cuGetProcAddress itself _v2 since 12.5),
 * and the driver maps a base name and a version to the right one. No
 * driver, no device, or a call that fails is a message naming the
 * library or the call, its arguments where they matter, and the driver's
 * own name and text for the error:
 *
 *     cuda: cuMemAlloc(1048576 bytes): CUDA_ERROR_OUT_OF_MEMORY (out of memory)
 *
 * never an abort. The types here are cuda.h's, declared again (a handle
 * is a pointer, a device pointer 64 bits), so the runtime archive builds
 * where the toolkit is absent.
 *
 * A DiscGpu is one device's primary context (shared with any other user
 * of the driver in the process, as the CUDA runtime shares it) and a
 * stream of its own: every copy, fill and launch goes on that stream in
 * order, and disc_gpu_sync waits for them. Each call makes the context
 * current on the calling thread, so a DiscGpu may move between threads,
 * one at a time.
 *
 * DISC_PROFILE: every launch between two CUDA events on the stream, whose
 * time goes to the profile (prof.c) under the kernel's name at the next
 * disc_gpu_sync.
 *
 * Memory: device buffers come from a caching allocator. A released buffer
 * keeps its device memory in a free list under its size class (sizes
 * rounded up to 512 bytes below 1 MiB, to 2 MiB above), and the next
 * request of that class takes it without a cuMemAlloc: a model run again
 * at the shapes it ran before allocates nothing from the driver. Where
 * cuMemAlloc runs out, the cached buffers are given back and it is tried
 * once more.
 */
#include "runtime/rt.h"
#include "runtime/cuda_abi.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- cuda.h, as much as disc calls ------------------------------------------- */

typedef int CUresult; /* CUDA_SUCCESS: 0 */
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUevent_st *CUevent;
typedef unsigned long long CUdeviceptr;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;

enum {
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
    CU_STREAM_NON_BLOCKING = 1,
    CU_STREAM_CAPTURE_MODE_RELAXED = 2, /* cuMemAlloc allowed while a stream captures */
    CUDA_ABI = 12000,              /* the version of the entry points asked for */
    GPU_SHMEM_DEFAULT = 48 << 10,  /* dynamic shared memory a launch has without asking */
};

typedef CUresult GetProcFn(const char *, void **, int, unsigned long long, int *);
typedef CUresult GetProcOldFn(const char *, void **, int, unsigned long long);

static struct {
    pthread_once_t once;
    void *lib;
    char why[600]; /* why the driver is not there, or "" */
    int version;   /* cuDriverGetVersion's: 13000 */
    CUresult (*GetErrorName)(CUresult, const char **);
    CUresult (*GetErrorString)(CUresult, const char **);
    CUresult (*Init)(unsigned);
    CUresult (*DriverGetVersion)(int *);
    CUresult (*DeviceGetCount)(int *);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*DeviceGetName)(char *, int, CUdevice);
    CUresult (*DeviceGetAttribute)(int *, int, CUdevice);
    CUresult (*DeviceTotalMem)(size_t *, CUdevice);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*DevicePrimaryCtxRelease)(CUdevice);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*StreamCreate)(CUstream *, unsigned);
    CUresult (*StreamDestroy)(CUstream);
    CUresult (*StreamSynchronize)(CUstream);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*MemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
    CUresult (*MemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
    CUresult (*MemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
    CUresult (*Memcpy2DAsync)(const CuMemcpy2D *, CUstream);
    CUresult (*MemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
    CUresult (*MemsetD32Async)(CUdeviceptr, unsigned, size_t, CUstream);
    CUresult (*ModuleLoadData)(CUmodule *, const void *);
    CUresult (*ModuleUnload)(CUmodule);
    CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*FuncSetAttribute)(CUfunction, int, int);
    CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void **, void **);
    CUresult (*EventCreate)(CUevent *, unsigned);
    CUresult (*EventRecord)(CUevent, CUstream);
    CUresult (*EventElapsedTime)(float *, CUevent, CUevent);
    CUresult (*EventDestroy)(CUevent);
    CUresult (*EventSynchronize)(CUevent);
    CUresult (*StreamWaitEvent)(CUstream, CUevent, unsigned);
    CUresult (*MemHostAlloc)(void **, size_t, unsigned);
    CUresult (*MemFreeHost)(void *);
    CUresult (*StreamBeginCapture)(CUstream, int);
    CUresult (*StreamEndCapture)(CUstream, CUgraph *);
    CUresult (*GraphInstantiateWithFlags)(CUgraphExec *, CUgraph, unsigned long long);
    CUresult (*GraphLaunch)(CUgraphExec, CUstream);
    CUresult (*GraphExecDestroy)(CUgraphExec);
    CUresult (*GraphDestroy)(CUgraph);
} cu = {.once = PTHREAD_ONCE_INIT};

static void driver_load(void)
{
    cu.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!cu.lib) {
        const char *err = dlerror();
        snprintf(cu.why, sizeof cu.why,
                 "cannot load libcuda.so.1 (the CUDA driver; is there an NVIDIA GPU and its driver?): %s",
                 err ? err : "not found");
        return;
    }
    GetProcFn *get = (GetProcFn *)dlsym(cu.lib, "cuGetProcAddress_v2");
    GetProcOldFn *old = get ? NULL : (GetProcOldFn *)dlsym(cu.lib, "cuGetProcAddress");
    if (!get && !old) {
        snprintf(cu.why, sizeof cu.why,
                 "libcuda.so.1 has no cuGetProcAddress: a driver older than CUDA 11.3 (disc needs 12.0 or later)");
        return;
    }
    struct {
        void **fn;
        const char *name;
    } syms[] = {
#define SYM(f) {(void **)&cu.f, "cu" #f}
        SYM(GetErrorName),    SYM(GetErrorString),    SYM(Init),
        SYM(DriverGetVersion), SYM(DeviceGetCount),   SYM(DeviceGet),
        SYM(DeviceGetName),   SYM(DeviceGetAttribute), SYM(DeviceTotalMem),
        SYM(DevicePrimaryCtxRetain), SYM(DevicePrimaryCtxRelease), SYM(CtxSetCurrent),
        SYM(StreamCreate),    SYM(StreamDestroy),     SYM(StreamSynchronize),
        SYM(MemAlloc),        SYM(MemFree),           SYM(MemcpyHtoDAsync),
        SYM(MemcpyDtoHAsync), SYM(MemcpyDtoDAsync),   SYM(MemsetD8Async),
        SYM(MemsetD32Async),  SYM(Memcpy2DAsync),
        SYM(ModuleLoadData),  SYM(ModuleUnload),      SYM(ModuleGetFunction),
        SYM(FuncSetAttribute), SYM(LaunchKernel),    SYM(EventCreate),
        SYM(EventRecord),     SYM(EventElapsedTime),  SYM(EventDestroy),      SYM(EventSynchronize),
        SYM(StreamWaitEvent), SYM(MemHostAlloc),    SYM(MemFreeHost),
        SYM(StreamBeginCapture), SYM(StreamEndCapture), SYM(GraphInstantiateWithFlags),
        SYM(GraphLaunch),     SYM(GraphExecDestroy),  SYM(GraphDestroy),
#undef SYM
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        int found = 0;
        CUresult r = get ? get(syms[i].name, syms[i].fn, CUDA_ABI, 0, &found) : old(syms[i].name, syms[i].fn, CUDA_ABI, 0);
        if (r != 0 || !*syms[i].fn) {
            snprintf(cu.why, sizeof cu.why, "libcuda.so.1: cuGetProcAddress(\"%s\", version %d) failed (error %d)",
                     syms[i].name, CUDA_ABI, r);
            return;
        }
    }
    CUresult r = cu.Init(0);
    if (r == 0)
        r = cu.DriverGetVersion(&cu.version);
    if (r != 0) {
        const char *name = NULL, *text = NULL;
        cu.GetErrorName(r, &name);
        cu.GetErrorString(r, &text);
        snprintf(cu.why, sizeof cu.why, "cuInit: %s (%s)", name ? name : "unknown error", text ? text : "");
        return;
    }
    if (cu.version < CUDA_ABI)
        snprintf(cu.why, sizeof cu.why, "the CUDA driver is version %d.%d; disc needs 12.0 or later",
                 cu.version / 1000, cu.version % 1000 / 10);
}

/* Whether the driver loaded; the reason in rt where not. */
static bool driver(DiscRt *rt)
{
    pthread_once(&cu.once, driver_load);
    if (cu.why[0]) {
        if (rt)
            disc_rt_fail(rt, "cuda: %s", cu.why);
        return false;
    }
    return true;
}

int disc_gpu_driver_version(char *why, size_t n)
{
    pthread_once(&cu.once, driver_load);
    if (cu.why[0]) {
        if (why && n)
            snprintf(why, n, "%s", cu.why);
        return 0;
    }
    return cu.version;
}

/* Records the failure of `call` (printf-style: the call and its
 * arguments) with the driver's name and text for r; -1. */
static int failed(DiscRt *rt, CUresult r, const char *call, ...) __attribute__((format(printf, 3, 4)));
static int failed(DiscRt *rt, CUresult r, const char *call, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, call);
    vsnprintf(what, sizeof what, call, ap);
    va_end(ap);
    const char *name = NULL, *text = NULL;
    if (cu.GetErrorName(r, &name) != 0)
        name = NULL;
    if (cu.GetErrorString(r, &text) != 0)
        text = NULL;
    if (name)
        disc_rt_fail(rt, "cuda: %s: %s (%s)", what, name, text ? text : "");
    else
        disc_rt_fail(rt, "cuda: %s: error %d", what, r);
    return -1;
}

/* ---- the device ----------------------------------------------------------- */

typedef struct Block {
    CUdeviceptr p;
    size_t bytes;      /* the size class */
    struct Block *next;
} Block;

/* A launch or library call timed for DISC_PROFILE: events before and
 * after it on the stream, read at the next disc_gpu_sync; its time goes
 * to the profile under key and name (which outlive the drain). */
typedef struct Timed {
    CUevent start, end;
    const void *key;
    const char *name;
} Timed;

typedef struct Graph Graph;
typedef struct Capture Capture;

struct DiscGpu {
    CUdevice dev;
    CUcontext ctx;
    CUstream stream;
    DiscGpuInfo info;
    pthread_mutex_t mu;  /* the allocator's lists */
    Block *live, *idle;  /* handed out; released and kept */
    DiscGpuStats stats;
    Timed *timed;        /* launches waiting for their times */
    int ntimed, captimed;
    DiscBlas *blas;      /* cuBLASLt on this device (cublaslt.c), made on first use */
    DiscDnn *dnn;        /* cuDNN on this device (cudnn.c), made on first use */
    Graph *graphs;       /* the runs seen, by their key, and their graphs (most recent first) */
    int nkeys;
    size_t graph_bytes;  /* device memory the graphs own */
    uint64_t runs;       /* disc_gpu_run calls, the graphs' clock */
    Capture *cap;        /* the capture under way, or NULL */
    void *pin[2];        /* DISC_STAGE: the staging buffers (pinned), each */
    CUevent ev[2];       /* recorded after the copy that reads or fills it */
    bool busy[2];        /* an event recorded and not yet waited for */
    CUevent waitev;      /* recorded on a caller's stream (disc_run_device_on) */
};

struct DiscGpuModule {
    CUmodule mod;
};

/* ---- graphs: what a run at known shapes replays (disc_gpu_run) ---------------- */

/* A host-to-device copy that a replay makes before the graph: an input's
 * data (the caller's pointer of this run) or bytes the capture kept. */
typedef struct Xfer {
    DiscDevPtr dst;
    size_t bytes;
    int input;  /* the input it copies, or -1 */
    void *snap; /* else the bytes */
} Xfer;

/* What the flow did with an output. */
typedef struct Out {
    enum { OUT_COPY, OUT_INPUT, OUT_KEPT } kind; /* copied out to the host; an input as it is; the
                                                    caller's device buffer, written by the graph */
    int input;
    DiscDevPtr src;
    int64_t bytes;
    bool set;     /* the flow handed the output over */
} Out;

/* A key (the run's shapes, and with device I/O its pointers) and what is
 * known of its runs: how many ran without a graph, and its graph once
 * captured, with the device memory it owns (run memory at fixed
 * addresses, never handed to another run), the copies before it and the
 * outputs after it. */
struct Graph {
    uint64_t hash;
    int64_t *key;
    int nkey;
    int seen;           /* plain runs that succeeded; -1: not to be captured */
    CUgraphExec exec;
    Block *owned;
    size_t bytes;
    Xfer *pre;
    int npre, cappre;
    Out *out;
    int nout;
    int64_t *dims;      /* the outputs' dims */
    int ndims;
    uint64_t used;      /* g->runs at its last use */
    Graph *next;
};

/* A capture under way: the graph filled, the run's io, and why it cannot
 * be kept (NULL while it can). */
struct Capture {
    Graph *gr;
    void **io;
    int nin;
    const char *abandoned;
};

struct DiscGpuFn {
    CUfunction fn;
    int64_t shmem_set;   /* dynamic shared memory the function was allowed (0: the default) */
    char name[64];
};

static void graphs_drop(DiscGpu *g);

/* ---- profiling ------------------------------------------------------------ */

/* Frees the events of the timed launches; with report, adds their times to
 * the profile under each kernel's name first. */
static void timed_drain(DiscGpu *g, bool report)
{
    for (int i = 0; i < g->ntimed; i++) {
        Timed *t = &g->timed[i];
        float ms = 0;
        if (report && cu.EventElapsedTime(&ms, t->start, t->end) == 0)
            disc_rt_prof_add(t->key, t->name, 1e-3 * ms);
        cu.EventDestroy(t->start);
        cu.EventDestroy(t->end);
    }
    g->ntimed = 0;
}

/* Makes g's context current on this thread. */
static int current(DiscRt *rt, DiscGpu *g)
{
    CUresult r = cu.CtxSetCurrent(g->ctx);
    return r ? failed(rt, r, "cuCtxSetCurrent(device %d)", g->info.ordinal) : 0;
}

DiscGpu *disc_gpu_open(DiscRt *rt, int ordinal)
{
    if (ordinal == DISC_GPU_ENV) { /* DISC_CUDA_DEVICE, else 0: a number or an error */
        const char *e = getenv("DISC_CUDA_DEVICE");
        char *end = NULL;
        long v = e && *e ? strtol(e, &end, 10) : 0;
        if (e && *e && (*end || v < 0 || v > 1 << 20)) {
            disc_rt_fail(rt, "cuda: DISC_CUDA_DEVICE=%s: not a device number (0, 1, ...)", e);
            return NULL;
        }
        ordinal = (int)v;
    }
    if (!driver(rt))
        return NULL;
    int count = 0;
    CUresult r = cu.DeviceGetCount(&count);
    if (r) {
        failed(rt, r, "cuDeviceGetCount");
        return NULL;
    }
    if (ordinal < 0 || ordinal >= count) {
        if (count == 0)
            disc_rt_fail(rt, "cuda: the driver sees no GPU (CUDA_VISIBLE_DEVICES?)");
        else
            disc_rt_fail(rt, "cuda: no device %d: the driver sees %d (0 to %d)", ordinal, count, count - 1);
        return NULL;
    }
    DiscGpu *g = calloc(1, sizeof *g);
    if (!g) {
        disc_rt_fail(rt, "cuda: out of memory");
        return NULL;
    }
    pthread_mutex_init(&g->mu, NULL);
    DiscGpuInfo *in = &g->info;
    in->ordinal = ordinal;
    in->driver_version = cu.version;
    int smem = 0, bad = 0;
    if ((r = cu.DeviceGet(&g->dev, ordinal)) != 0)
        bad = failed(rt, r, "cuDeviceGet(%d)", ordinal);
    else if ((r = cu.DeviceGetName(in->name, (int)sizeof in->name, g->dev)) != 0 ||
             (r = cu.DeviceGetAttribute(&in->major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, g->dev)) != 0 ||
             (r = cu.DeviceGetAttribute(&in->minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, g->dev)) != 0 ||
             (r = cu.DeviceGetAttribute(&in->sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, g->dev)) != 0 ||
             (r = cu.DeviceGetAttribute(&smem, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, g->dev)) != 0 ||
             (r = cu.DeviceTotalMem(&in->memory, g->dev)) != 0)
        bad = failed(rt, r, "querying device %d", ordinal);
    else if ((r = cu.DevicePrimaryCtxRetain(&g->ctx, g->dev)) != 0)
        bad = failed(rt, r, "cuDevicePrimaryCtxRetain(device %d)", ordinal);
    else if ((bad = current(rt, g)) == 0 && (r = cu.StreamCreate(&g->stream, CU_STREAM_NON_BLOCKING)) != 0)
        bad = failed(rt, r, "cuStreamCreate");
    in->shmem_max = smem;
    if (bad) {
        disc_gpu_close(g);
        return NULL;
    }
    return g;
}

/* Gives the idle buffers back to the driver (under g->mu). */
static void idle_free(DiscGpu *g)
{
    while (g->idle) {
        Block *b = g->idle;
        g->idle = b->next;
        cu.MemFree(b->p);
        g->stats.held -= (int64_t)b->bytes;
        free(b);
    }
}

void disc_gpu_close(DiscGpu *g)
{
    if (!g)
        return;
    if (g->ctx) {
        cu.CtxSetCurrent(g->ctx);
        if (g->stream) {
            cu.StreamSynchronize(g->stream);
            timed_drain(g, false);
        }
        graphs_drop(g);
        for (int i = 0; i < 2; i++) {
            if (g->pin[i])
                cu.MemFreeHost(g->pin[i]);
            if (g->ev[i])
                cu.EventDestroy(g->ev[i]);
        }
        if (g->waitev)
            cu.EventDestroy(g->waitev);
        disc_blas_free(g->blas); /* its workspace is one of the buffers below */
        disc_dnn_free(g->dnn);
        if (g->stream)
            cu.StreamDestroy(g->stream);
        pthread_mutex_lock(&g->mu);
        idle_free(g);
        while (g->live) { /* buffers never released: freed with the device */
            Block *b = g->live;
            g->live = b->next;
            cu.MemFree(b->p);
            free(b);
        }
        pthread_mutex_unlock(&g->mu);
        cu.DevicePrimaryCtxRelease(g->dev);
    }
    pthread_mutex_destroy(&g->mu);
    free(g->timed);
    free(g);
}

const DiscGpuInfo *disc_gpu_info(const DiscGpu *g)
{
    return &g->info;
}

void disc_gpu_stats(DiscGpu *g, DiscGpuStats *s)
{
    pthread_mutex_lock(&g->mu);
    *s = g->stats;
    pthread_mutex_unlock(&g->mu);
}

/* ---- memory --------------------------------------------------------------- */

/* The size class of a request: 512-byte steps below 1 MiB, 2 MiB above;
 * 0 where rounding overflows. */
static size_t size_class(size_t bytes)
{
    size_t step = bytes < ((size_t)1 << 20) ? 512 : (size_t)2 << 20;
    if (bytes == 0)
        return step;
    return bytes > SIZE_MAX - step ? 0 : (bytes + step - 1) / step * step;
}

DiscDevPtr disc_gpu_alloc(DiscRt *rt, DiscGpu *g, size_t bytes)
{
    size_t cls = size_class(bytes);
    if (!cls) {
        disc_rt_fail(rt, "cuda: %zu bytes of device memory is too large", bytes);
        return 0;
    }
    Block *b = NULL;
    pthread_mutex_lock(&g->mu);
    for (Block **at = &g->idle; *at; at = &(*at)->next)
        if ((*at)->bytes == cls) {
            b = *at;
            *at = b->next;
            g->stats.reused++;
            break;
        }
    pthread_mutex_unlock(&g->mu);
    if (!b) {
        if (current(rt, g) != 0)
            return 0;
        CUdeviceptr p = 0;
        CUresult r = cu.MemAlloc(&p, cls);
        if (r == CUDA_ERROR_OUT_OF_MEMORY && g->cap) { /* no cuMemFree while the stream captures */
            g->cap->abandoned = "out of device memory";
        } else if (r == CUDA_ERROR_OUT_OF_MEMORY) { /* the graphs' memory and the cached buffers back, once more */
            graphs_drop(g);
            pthread_mutex_lock(&g->mu);
            idle_free(g);
            pthread_mutex_unlock(&g->mu);
            r = cu.MemAlloc(&p, cls);
        }
        if (r) {
            failed(rt, r, "cuMemAlloc(%zu bytes)", cls);
            return 0;
        }
        if (!(b = malloc(sizeof *b))) {
            cu.MemFree(p);
            disc_rt_fail(rt, "cuda: out of memory");
            return 0;
        }
        *b = (Block){.p = p, .bytes = cls};
        pthread_mutex_lock(&g->mu);
        g->stats.driver_allocs++;
        g->stats.held += (int64_t)cls;
        pthread_mutex_unlock(&g->mu);
    }
    pthread_mutex_lock(&g->mu);
    if (g->cap) { /* run memory of a capture: the graph's */
        b->next = g->cap->gr->owned;
        g->cap->gr->owned = b;
    } else {
        b->next = g->live;
        g->live = b;
    }
    pthread_mutex_unlock(&g->mu);
    return b->p;
}

void disc_gpu_release(DiscGpu *g, DiscDevPtr p)
{
    if (!p)
        return;
    pthread_mutex_lock(&g->mu);
    for (Block **at = &g->live; *at; at = &(*at)->next)
        if ((*at)->p == p) {
            Block *b = *at;
            *at = b->next;
            b->next = g->idle;
            g->idle = b;
            break;
        }
    pthread_mutex_unlock(&g->mu);
}

void disc_gpu_trim(DiscGpu *g)
{
    pthread_mutex_lock(&g->mu);
    if (cu.CtxSetCurrent(g->ctx) == 0)
        idle_free(g);
    pthread_mutex_unlock(&g->mu);
}

/* 1 when a call of `bytes` has work and g's context is current, 0 when
 * it has none, -1 on an error. */
static int ready(DiscRt *rt, DiscGpu *g, size_t bytes)
{
    return !bytes ? 0 : current(rt, g) != 0 ? -1 : 1;
}

/* The status of queueing `call` on `bytes` (r: the driver's answer). */
static int queued(DiscRt *rt, CUresult r, const char *call, size_t bytes)
{
    return r ? failed(rt, r, "%s(%zu bytes)", call, bytes) : 0;
}

/* Stops the capture under way (why: what the flow did that a graph
 * cannot hold); -1 with the error in rt, which ends the flow. */
static int abandon(DiscRt *rt, DiscGpu *g, const char *why)
{
    if (!g->cap->abandoned)
        g->cap->abandoned = why;
    disc_rt_fail(rt, "cuda: graph capture abandoned: %s", why);
    return -1;
}

/* ---- staged copies (DISC_STAGE) ------------------------------------------------
 *
 * A copy from or to pageable memory goes through the driver's own pinned
 * staging; with DISC_STAGE the flow's copies of at least a chunk go
 * through two pinned buffers of the device's instead, a chunk at a time,
 * the host's memcpy of one chunk overlapping the DMA of the other
 * (tests/gpu/copy_bw.c times both ways on the GPU: which is faster decides
 * the default, off until measured). An event recorded after each DMA says
 * when its buffer is free (in) or full (out). */

/* Buffer b, free: its last DMA finished. -1 on an error. */
static int stage_wait(DiscRt *rt, DiscGpu *g, int b)
{
    if (!g->busy[b])
        return 0;
    g->busy[b] = false;
    CUresult r = cu.EventSynchronize(g->ev[b]);
    return r ? failed(rt, r, "cuEventSynchronize (a staging buffer)") : 0;
}

static int stage_mark(DiscRt *rt, DiscGpu *g, int b)
{
    CUresult r = cu.EventRecord(g->ev[b], g->stream);
    g->busy[b] = r == 0;
    return r ? failed(rt, r, "cuEventRecord (a staging buffer)") : 0;
}

/* The chunk size where a copy of `bytes` is staged, else 0. */
static size_t stage_chunk(DiscRt *rt, DiscGpu *g, size_t bytes)
{
    int64_t chunk = disc_env()->stage;
    if (chunk <= 0 || bytes < (size_t)chunk)
        return 0;
    for (int i = 0; i < 2; i++) {
        CUresult r = 0;
        if (!g->ev[i] && (r = cu.EventCreate(&g->ev[i], 2 /* CU_EVENT_DISABLE_TIMING */)) != 0)
            g->ev[i] = NULL;
        if (!r && !g->pin[i] && (r = cu.MemHostAlloc(&g->pin[i], (size_t)chunk, 0)) != 0)
            g->pin[i] = NULL;
        if (r) {
            failed(rt, r, "cuMemHostAlloc or cuEventCreate (DISC_STAGE's buffers)");
            return (size_t)-1;
        }
    }
    return (size_t)chunk;
}

static int staged_in(DiscRt *rt, DiscGpu *g, DiscDevPtr dst, const char *src, size_t bytes, size_t chunk)
{
    for (size_t off = 0, i = 0; off < bytes; off += chunk, i++) {
        size_t n = bytes - off < chunk ? bytes - off : chunk;
        int b = (int)(i % 2);
        if (stage_wait(rt, g, b) != 0)
            return -1;
        memcpy(g->pin[b], src + off, n);
        if (queued(rt, cu.MemcpyHtoDAsync(dst + off, g->pin[b], n, g->stream), "cuMemcpyHtoDAsync", n) != 0 ||
            stage_mark(rt, g, b) != 0)
            return -1;
    }
    return 0;
}

static int staged_out(DiscRt *rt, DiscGpu *g, char *dst, DiscDevPtr src, size_t bytes, size_t chunk)
{
    size_t nchunks = (bytes + chunk - 1) / chunk;
    for (size_t i = 0; i <= nchunks; i++) {
        if (i < nchunks) { /* chunk i into buffer i % 2 */
            int b = (int)(i % 2);
            size_t off = i * chunk, n = bytes - off < chunk ? bytes - off : chunk;
            if (stage_wait(rt, g, b) != 0 ||
                queued(rt, cu.MemcpyDtoHAsync(g->pin[b], src + off, n, g->stream), "cuMemcpyDtoHAsync", n) != 0 ||
                stage_mark(rt, g, b) != 0)
                return -1;
        }
        if (i > 0) { /* chunk i - 1 out, while chunk i copies */
            int b = (int)((i - 1) % 2);
            size_t off = (i - 1) * chunk, n = bytes - off < chunk ? bytes - off : chunk;
            if (stage_wait(rt, g, b) != 0)
                return -1;
            memcpy(dst + off, g->pin[b], n);
        }
    }
    return 0;
}

int disc_gpu_copy_in(DiscRt *rt, DiscGpu *g, DiscDevPtr dst, const void *src, size_t bytes)
{
    if (g->cap) /* from pageable memory: not in a graph (the run's copies are made around it) */
        return abandon(rt, g, "a copy from the host mid-run");
    int go = ready(rt, g, bytes);
    size_t chunk = go <= 0 ? 0 : stage_chunk(rt, g, bytes);
    if (chunk == (size_t)-1)
        return -1;
    if (chunk)
        return staged_in(rt, g, dst, src, bytes, chunk);
    return go <= 0 ? go : queued(rt, cu.MemcpyHtoDAsync(dst, src, bytes, g->stream), "cuMemcpyHtoDAsync", bytes);
}

int disc_gpu_copy_out(DiscRt *rt, DiscGpu *g, void *dst, DiscDevPtr src, size_t bytes)
{
    if (g->cap)
        return abandon(rt, g, "a copy to the host mid-run");
    int go = ready(rt, g, bytes);
    size_t chunk = go <= 0 ? 0 : stage_chunk(rt, g, bytes);
    if (chunk == (size_t)-1)
        return -1;
    if (chunk)
        return staged_out(rt, g, dst, src, bytes, chunk);
    return go <= 0 ? go : queued(rt, cu.MemcpyDtoHAsync(dst, src, bytes, g->stream), "cuMemcpyDtoHAsync", bytes);
}

int disc_gpu_copy(DiscRt *rt, DiscGpu *g, DiscDevPtr dst, DiscDevPtr src, size_t bytes)
{
    int go = ready(rt, g, bytes);
    return go <= 0 ? go : queued(rt, cu.MemcpyDtoDAsync(dst, src, bytes, g->stream), "cuMemcpyDtoDAsync", bytes);
}

int disc_gpu_copy2d(DiscRt *rt, DiscGpu *g, DiscDevPtr dst, size_t dpitch, DiscDevPtr src, size_t spitch,
                    size_t width, size_t height)
{
    int go = ready(rt, g, width * height);
    CuMemcpy2D c = {.srcMemoryType = CU_MEMORY_DEVICE, .srcDevice = src, .srcPitch = spitch,
                    .dstMemoryType = CU_MEMORY_DEVICE, .dstDevice = dst, .dstPitch = dpitch,
                    .WidthInBytes = width, .Height = height};
    return go <= 0 ? go : queued(rt, cu.Memcpy2DAsync(&c, g->stream), "cuMemcpy2DAsync", width * height);
}

int disc_gpu_fill(DiscRt *rt, DiscGpu *g, DiscDevPtr dst, int byte, size_t bytes)
{
    int go = ready(rt, g, bytes);
    return go <= 0 ? go
                   : queued(rt, cu.MemsetD8Async(dst, (unsigned char)byte, bytes, g->stream), "cuMemsetD8Async", bytes);
}

int disc_gpu_fill32(DiscRt *rt, DiscGpu *g, DiscDevPtr dst, uint32_t bits, size_t n)
{
    int go = ready(rt, g, n);
    return go <= 0 ? go : queued(rt, cu.MemsetD32Async(dst, bits, n, g->stream), "cuMemsetD32Async", 4 * n);
}

int disc_gpu_sync(DiscRt *rt, DiscGpu *g)
{
    if (g->cap)
        return abandon(rt, g, "a wait for the device mid-run");
    if (current(rt, g) != 0)
        return -1;
    CUresult r = cu.StreamSynchronize(g->stream);
    timed_drain(g, r == 0);
    /* a kernel's fault shows here, the first call after it */
    return r ? failed(rt, r, "cuStreamSynchronize (a kernel or copy before it failed)") : 0;
}

/* ---- modules and launches ------------------------------------------------- */

DiscGpuModule *disc_gpu_module_load(DiscRt *rt, DiscGpu *g, const void *image)
{
    if (current(rt, g) != 0)
        return NULL;
    DiscGpuModule *m = calloc(1, sizeof *m);
    if (!m) {
        disc_rt_fail(rt, "cuda: out of memory");
        return NULL;
    }
    CUresult r = cu.ModuleLoadData(&m->mod, image);
    if (r) {
        failed(rt, r, "cuModuleLoadData (a CUBIN for sm_%d%d, or PTX, expected)", g->info.major, g->info.minor);
        free(m);
        return NULL;
    }
    return m;
}

void disc_gpu_module_unload(DiscGpu *g, DiscGpuModule *m)
{
    if (!m)
        return;
    graphs_drop(g); /* they launch its kernels */
    if (cu.CtxSetCurrent(g->ctx) == 0)
        cu.ModuleUnload(m->mod);
    free(m);
}

DiscGpuFn *disc_gpu_function(DiscRt *rt, DiscGpu *g, DiscGpuModule *m, const char *name)
{
    if (current(rt, g) != 0)
        return NULL;
    DiscGpuFn *f = calloc(1, sizeof *f);
    if (!f) {
        disc_rt_fail(rt, "cuda: out of memory");
        return NULL;
    }
    CUresult r = cu.ModuleGetFunction(&f->fn, m->mod, name);
    if (r) {
        failed(rt, r, "cuModuleGetFunction(\"%s\")", name);
        free(f);
        return NULL;
    }
    snprintf(f->name, sizeof f->name, "%s", name);
    return f;
}

void disc_gpu_function_free(DiscGpuFn *f)
{
    free(f);
}

int disc_gpu_launch(DiscRt *rt, DiscGpu *g, DiscGpuFn *f, int64_t grid, int block, int64_t shmem, void **params)
{
    if (grid <= 0)
        return 0; /* nothing to do: an empty tensor */
    if (grid > 0x7fffffff || block < 1 || block > 1024 || shmem < 0 || shmem > g->info.shmem_max) {
        disc_rt_fail(rt, "cuda: launch of %s: grid %lld, block %d, dynamic shared memory %lld bytes: out of the "
                         "device's range (grid < 2^31, block 1..1024, shared memory <= %lld)",
                     f->name, (long long)grid, block, (long long)shmem, (long long)g->info.shmem_max);
        return -1;
    }
    if (current(rt, g) != 0)
        return -1;
    CUresult r;
    if (shmem > GPU_SHMEM_DEFAULT && shmem > f->shmem_set) {
        if ((r = cu.FuncSetAttribute(f->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)shmem)) != 0)
            return failed(rt, r, "cuFuncSetAttribute(%s, dynamic shared memory %lld bytes)", f->name,
                          (long long)shmem);
        f->shmem_set = shmem;
    }
    /* DISC_PROFILE: the launch between two events, read at the next sync */
    int t = -1;
    if (disc_rt_profiling() && (t = disc_gpu_time_start(rt, g, f, f->name)) < 0)
        return -1;
    r = cu.LaunchKernel(f->fn, (unsigned)grid, 1, 1, (unsigned)block, 1, 1, (unsigned)shmem, g->stream, params, NULL);
    if (r)
        return failed(rt, r, "cuLaunchKernel(%s, grid %lld, block %d, shared memory %lld)", f->name, (long long)grid,
                      block, (long long)shmem);
    return disc_gpu_time_end(rt, g, t);
}

int disc_gpu_time_start(DiscRt *rt, DiscGpu *g, const void *key, const char *name)
{
    if (g->ntimed == g->captimed) {
        int cap = g->captimed ? 2 * g->captimed : 64;
        Timed *p = realloc(g->timed, (size_t)cap * sizeof *p);
        if (!p) {
            disc_rt_fail(rt, "cuda: out of memory");
            return -1;
        }
        g->timed = p;
        g->captimed = cap;
    }
    Timed *t = &g->timed[g->ntimed];
    *t = (Timed){.key = key, .name = name};
    CUresult r;
    if ((r = cu.EventCreate(&t->start, 0)) != 0 || (r = cu.EventCreate(&t->end, 0)) != 0 ||
        (r = cu.EventRecord(t->start, g->stream)) != 0) {
        if (t->start)
            cu.EventDestroy(t->start);
        if (t->end)
            cu.EventDestroy(t->end);
        return failed(rt, r, "timing %s with events (DISC_PROFILE)", name);
    }
    return g->ntimed++;
}

int disc_gpu_time_end(DiscRt *rt, DiscGpu *g, int t)
{
    if (t < 0)
        return 0;
    CUresult r = cu.EventRecord(g->timed[t].end, g->stream);
    return r ? failed(rt, r, "timing %s with events (DISC_PROFILE)", g->timed[t].name) : 0;
}

void *disc_gpu_stream(const DiscGpu *g)
{
    return g->stream;
}

int disc_gpu_current(DiscRt *rt, DiscGpu *g)
{
    return current(rt, g);
}

DiscBlas **disc_gpu_blas_slot(DiscGpu *g)
{
    return &g->blas;
}

DiscDnn **disc_gpu_dnn_slot(DiscGpu *g)
{
    return &g->dnn;
}

/* ---- a model's run (rt.h: the host flow's calls) --------------------------- */

DiscGpu *disc_rt_run_gpu(DiscRt *rt)
{
    DiscGpu *g = disc_rt_gpu(rt);
    if (!g)
        disc_rt_fail(rt, "cuda: a device call in a run with no device");
    return g;
}

static DiscDevPtr devp(const void *p)
{
    return (DiscDevPtr)(uintptr_t)p;
}

/* A host-to-device copy of the flow: queued, or in a capture kept for the
 * replays to make before the graph (the data of the input src is, else
 * the bytes src holds now). dst is memory the run allocated for the copy
 * (or the caller's output buffer), which nothing in the run wrote before. */
static int put_in(DiscRt *rt, DiscGpu *g, DiscDevPtr dst, const void *src, size_t bytes)
{
    Capture *c = g->cap;
    if (!c)
        return disc_gpu_copy_in(rt, g, dst, src, bytes);
    Graph *gr = c->gr;
    int input = -1;
    for (int i = 0; i < c->nin; i++)
        if (c->io[i] == src) {
            if (input >= 0) /* two inputs at one address: which does a replay read? */
                return abandon(rt, g, "two inputs at one address");
            input = i;
        }
    if (gr->npre == gr->cappre) {
        int cap = gr->cappre ? 2 * gr->cappre : 16;
        Xfer *p = realloc(gr->pre, (size_t)cap * sizeof *p);
        if (!p)
            return abandon(rt, g, "out of memory");
        gr->pre = p;
        gr->cappre = cap;
    }
    Xfer *x = &gr->pre[gr->npre];
    *x = (Xfer){.dst = dst, .bytes = bytes, .input = input};
    if (input < 0 && bytes) {
        if (!(x->snap = malloc(bytes)))
            return abandon(rt, g, "out of memory");
        memcpy(x->snap, src, bytes);
    }
    gr->npre++;
    return 0;
}

int32_t disc_rt_dev_in(DiscRt *rt, void *dst, const void *src, int64_t bytes)
{
    DiscGpu *g = disc_rt_run_gpu(rt);
    return g && bytes >= 0 ? put_in(rt, g, devp(dst), src, (size_t)bytes) : -1;
}

int32_t disc_rt_dev_out(DiscRt *rt, void *dst, const void *src, int64_t bytes)
{
    DiscGpu *g = disc_rt_run_gpu(rt);
    if (g && g->cap)
        return abandon(rt, g, "the flow reads a kernel's result on the host");
    if (!g || bytes < 0 || disc_gpu_copy_out(rt, g, dst, devp(src), (size_t)bytes) != 0)
        return -1;
    return disc_gpu_sync(rt, g);
}

int32_t disc_rt_dev_fill(DiscRt *rt, void *dst, int64_t n, int64_t size, uint64_t bits)
{
    DiscGpu *g = disc_rt_run_gpu(rt);
    if (!g || n < 0 || (size != 4 && size != 8))
        return -1;
    if (n == 0)
        return 0;
    if (bits == 0)
        return disc_gpu_fill(rt, g, devp(dst), 0, (size_t)n * (size_t)size);
    if (size == 4)
        return disc_gpu_fill32(rt, g, devp(dst), (uint32_t)bits, (size_t)n);
    /* 8-byte values with no 64-bit memset: staged in run memory, copied
     * (the copy from pageable memory has read it when it returns); in a
     * capture through device memory of the graph's, at the point of the
     * run where the fill belongs (dst may hold another value before) */
    uint64_t *h = disc_rt_alloc(rt, n * 8);
    if (!h)
        return -1;
    for (int64_t i = 0; i < n; i++)
        h[i] = bits;
    if (!g->cap)
        return disc_gpu_copy_in(rt, g, devp(dst), h, (size_t)n * 8);
    DiscDevPtr stage = disc_gpu_alloc(rt, g, (size_t)n * 8);
    return stage && put_in(rt, g, stage, h, (size_t)n * 8) == 0 ? disc_gpu_copy(rt, g, devp(dst), stage, (size_t)n * 8)
                                                                 : -1;
}

/* The host reads an input's data (host I/O: the caller's pointer as it is). */
static void *host_input(DiscRt *rt, const void *raw)
{
    DiscGpu *g = disc_rt_gpu(rt);
    if (g && g->cap) {
        abandon(rt, g, "the flow reads an input's data on the host");
        return NULL;
    }
    return (void *)raw;
}

void *disc_rt_dev_input(DiscRt *rt, const void *raw, int64_t bytes, int32_t want_dev)
{
    if (!!disc_rt_dev_io(rt) == !!want_dev)
        return want_dev ? (void *)raw : host_input(rt, raw);
    if (want_dev) {
        void *p = disc_rt_dev_alloc(rt, bytes);
        return p && disc_rt_dev_in(rt, p, raw, bytes) == 0 ? p : NULL;
    }
    void *p = disc_rt_alloc(rt, bytes);
    return p && disc_rt_dev_out(rt, p, raw, bytes) == 0 ? p : NULL;
}

/* A capture's record of output slot's handling. */
static int out_note(DiscRt *rt, DiscGpu *g, int64_t slot, int kind, int input, const void *src, int64_t bytes)
{
    Capture *c = g->cap;
    int i = (int)((slot - c->nin) / 3);
    if (i < 0 || i >= c->gr->nout)
        return abandon(rt, g, "an output slot out of range");
    c->gr->out[i] = (Out){.kind = kind, .input = input, .src = devp(src), .bytes = bytes, .set = true};
    return 0;
}

void *disc_rt_dev_output(DiscRt *rt, void **slots, int64_t slot, const void *src, int64_t bytes, int32_t on_dev)
{
    DiscGpu *g = disc_rt_run_gpu(rt);
    bool dev_io = disc_rt_dev_io(rt);
    bool src_dev = on_dev == 2 ? dev_io : on_dev;
    if (!g || bytes < 0)
        return NULL;
    if (!dev_io) {
        if (!src_dev && g->cap) { /* as it is: an input's data, else host data of this run */
            int in = -1;
            for (int i = 0; on_dev == 2 && i < g->cap->nin; i++)
                if (slots[i] == src)
                    in = i;
            if (in < 0) {
                abandon(rt, g, "an output the host computed");
                return NULL;
            }
            return out_note(rt, g, slot, OUT_INPUT, in, src, bytes) == 0 ? (void *)src : NULL;
        }
        if (!src_dev)
            return (void *)src; /* the caller copies it */
        if (g->cap) /* copied out after each replay, into the buffer of that run */
            return out_note(rt, g, slot, OUT_COPY, -1, src, bytes) == 0 ? (void *)src : NULL;
        void *p = disc_rt_output(rt, slots, slot, bytes);
        return p && disc_gpu_copy_out(rt, g, p, devp(src), (size_t)bytes) == 0 ? p : NULL;
    }
    void **s = slots + slot;
    if (!s[0] || (int64_t)(uintptr_t)s[1] < bytes) {
        disc_rt_fail(rt, "cuda: an output needs a device buffer of %lld bytes, %lld given (disc_run_device: "
                     "outputs in device memory are the caller's)", (long long)bytes,
                     s[0] ? (long long)(uintptr_t)s[1] : 0LL);
        return NULL;
    }
    if (g->cap && out_note(rt, g, slot, OUT_KEPT, -1, src, bytes) != 0)
        return NULL;
    if (src == s[0])
        return s[0];
    int rc = src_dev ? disc_gpu_copy(rt, g, devp(s[0]), devp(src), (size_t)bytes)
                     : put_in(rt, g, devp(s[0]), src, (size_t)bytes);
    return rc == 0 ? s[0] : NULL;
}

void *disc_rt_dev_const(DiscRt *rt, void **slot, const void *host, int64_t bytes)
{
    if (*slot)
        return *slot;
    DiscGpu *g = disc_rt_run_gpu(rt);
    if (g && g->cap) { /* it lives with the model, not with a graph */
        abandon(rt, g, "a constant not yet on the device");
        return NULL;
    }
    DiscDevPtr p = g && bytes >= 0 ? disc_gpu_alloc(rt, g, (size_t)bytes) : 0;
    if (!p || disc_gpu_copy_in(rt, g, p, host, (size_t)bytes) != 0)
        return NULL;
    return *slot = (void *)(uintptr_t)p;
}

int32_t disc_rt_dev_launch(DiscRt *rt, void *fn, int64_t grid, int64_t block, int64_t shmem, void **params)
{
    DiscGpu *g = disc_rt_run_gpu(rt);
    return g ? disc_gpu_launch(rt, g, fn, grid, (int)block, shmem, params) : -1;
}

/* ---- graphs: a run at shapes seen before, replayed ------------------------- */

enum {
    GRAPHS_DEFAULT = 16, /* graphs kept per device (DISC_CUDA_GRAPHS) */
    KEYS_MAX = 64,       /* keys remembered, graphs or not */
    REPLAY_NO = 1,       /* replay: this run cannot be one */
};

/* Gives a graph's executable, memory and records back (its key stays). */
static void graph_clear(DiscGpu *g, Graph *gr)
{
    if (gr->exec) {
        cu.GraphExecDestroy(gr->exec);
        gr->exec = NULL;
    }
    pthread_mutex_lock(&g->mu);
    while (gr->owned) { /* back to the allocator's cache */
        Block *b = gr->owned;
        gr->owned = b->next;
        b->next = g->idle;
        g->idle = b;
    }
    g->graph_bytes -= gr->bytes;
    gr->bytes = 0;
    pthread_mutex_unlock(&g->mu);
    for (int i = 0; i < gr->npre; i++)
        free(gr->pre[i].snap);
    free(gr->pre);
    free(gr->out);
    free(gr->dims);
    gr->pre = NULL;
    gr->out = NULL;
    gr->dims = NULL;
    gr->npre = gr->cappre = gr->nout = gr->ndims = 0;
}

static void graphs_drop(DiscGpu *g)
{
    if (cu.CtxSetCurrent && g->ctx)
        cu.CtxSetCurrent(g->ctx);
    while (g->graphs) {
        Graph *gr = g->graphs;
        g->graphs = gr->next;
        graph_clear(g, gr);
        free(gr->key);
        free(gr);
    }
    g->nkeys = 0;
}

/* The graphs allowed per device: DISC_CUDA_GRAPHS (0: none), else 16; -1
 * with the error in rt for a value that is not a count. */
static int graphs_limit(DiscRt *rt)
{
    const char *e = getenv("DISC_CUDA_GRAPHS");
    if (!e || !*e)
        return GRAPHS_DEFAULT;
    char *end = NULL;
    long v = strtol(e, &end, 10);
    if (*end || v < 0 || v > 1 << 16) {
        disc_rt_fail(rt, "cuda: DISC_CUDA_GRAPHS=%s: not a count of graphs (0 turns them off; default %d)", e,
                     GRAPHS_DEFAULT);
        return -1;
    }
    return (int)v;
}

/* The run's key: its threads, where its I/O is, the inputs' dims, and with
 * device I/O the addresses the graph would hold (inputs, output buffers). */
static int64_t *run_key(DiscRt *rt, const DiscGpuFlow *f, int *n)
{
    bool dev = disc_rt_dev_io(rt);
    int k = 2 + f->nin_dims + (dev ? f->ninputs + f->noutputs : 0);
    int64_t *key = malloc((size_t)k * sizeof *key);
    if (!key)
        return NULL;
    int j = 0;
    key[j++] = disc_rt_threads(rt);
    key[j++] = dev;
    for (int i = 0; i < f->nin_dims; i++)
        key[j++] = f->shapes[i];
    for (int i = 0; dev && i < f->ninputs; i++)
        key[j++] = (int64_t)(uintptr_t)f->io[i];
    for (int i = 0; dev && i < f->noutputs; i++)
        key[j++] = (int64_t)(uintptr_t)f->io[f->ninputs + 3 * i];
    *n = k;
    return key;
}

/* The key's record, made (in place of the least recently used beyond
 * KEYS_MAX) where make; NULL if none. Takes key when it makes one. */
static Graph *graph_find(DiscGpu *g, int64_t *key, int n, bool make, bool *took)
{
    uint64_t h = 14695981039346656037u; /* FNV-1a over the words */
    for (int i = 0; i < n; i++)
        h = (h ^ (uint64_t)key[i]) * 1099511628211u;
    *took = false;
    for (Graph *gr = g->graphs; gr; gr = gr->next)
        if (gr->hash == h && gr->nkey == n && !memcmp(gr->key, key, (size_t)n * sizeof *key))
            return gr;
    if (!make)
        return NULL;
    if (g->nkeys >= KEYS_MAX) {
        Graph **lru = NULL;
        for (Graph **at = &g->graphs; *at; at = &(*at)->next)
            if (!lru || (*at)->used < (*lru)->used)
                lru = at;
        Graph *old = *lru;
        *lru = old->next;
        graph_clear(g, old);
        free(old->key);
        free(old);
        g->nkeys--;
    }
    Graph *gr = calloc(1, sizeof *gr);
    if (!gr)
        return NULL;
    *gr = (Graph){.hash = h, .key = key, .nkey = n, .next = g->graphs};
    g->graphs = gr;
    g->nkeys++;
    *took = true;
    return gr;
}

/* Graphs beyond the count allowed, or owning more than a quarter of the
 * device's memory, go (the least recently used first; never keep). */
static void graphs_fit(DiscGpu *g, int limit, const Graph *keep)
{
    for (;;) {
        int n = 0;
        Graph *lru = NULL;
        for (Graph *gr = g->graphs; gr; gr = gr->next)
            if (gr->exec) {
                n++;
                if (gr != keep && (!lru || gr->used < lru->used))
                    lru = gr;
            }
        if (!lru || (n <= limit && g->graph_bytes <= g->info.memory / 4))
            return;
        graph_clear(g, lru);
        lru->seen = 0;
        g->stats.graphs_dropped++;
    }
}

/* The flow as it is, and the wait for its work. */
static int32_t plain(DiscRt *rt, DiscGpu *g, const DiscGpuFlow *f)
{
    int32_t rc = f->main(rt, f->io, f->shapes, f->syms);
    if (rc == 0 && disc_gpu_sync(rt, g) != 0)
        rc = -1; /* a kernel's fault after the last copy out */
    return rc;
}

/* A run of gr's graph: the copies in, the graph, the outputs (as the flow
 * would have left them), the wait. REPLAY_NO where this run's output
 * buffers are too small for it (the flow says so). */
static int32_t replay(DiscRt *rt, DiscGpu *g, Graph *gr, const DiscGpuFlow *f)
{
    void **io = f->io;
    int ni = f->ninputs;
    for (int i = 0; i < gr->nout; i++)
        if (gr->out[i].kind == OUT_KEPT && (int64_t)(uintptr_t)io[ni + 3 * i + 1] < gr->out[i].bytes)
            return REPLAY_NO;
    if (current(rt, g) != 0)
        return -1;
    for (int i = 0; i < gr->npre; i++) {
        const Xfer *x = &gr->pre[i];
        if (disc_gpu_copy_in(rt, g, x->dst, x->input >= 0 ? io[x->input] : x->snap, x->bytes) != 0)
            return -1;
    }
    CUresult r = cu.GraphLaunch(gr->exec, g->stream);
    if (r)
        return failed(rt, r, "cuGraphLaunch");
    for (int i = 0; i < gr->nout; i++) {
        const Out *o = &gr->out[i];
        int64_t slot = ni + 3 * i;
        if (o->kind == OUT_INPUT) {
            io[slot] = io[o->input];
        } else if (o->kind == OUT_COPY) {
            void *p = disc_rt_output(rt, io, slot, o->bytes);
            if (!p || disc_gpu_copy_out(rt, g, p, o->src, (size_t)o->bytes) != 0)
                return -1;
        }
    }
    memcpy(f->shapes + f->nin_dims, gr->dims, (size_t)gr->ndims * sizeof *gr->dims);
    g->stats.graph_replays++;
    return disc_gpu_sync(rt, g) != 0 ? -1 : 0;
}

/* The flow run once more with its work captured into a graph, kept for
 * the runs at gr's key; this run is then the graph's first replay. A
 * capture that cannot stand (the flow reads device data on the host, a
 * constant is not on the device yet, ...) is thrown away and the flow
 * run as it is. */
static int32_t capture(DiscRt *rt, DiscGpu *g, Graph *gr, const DiscGpuFlow *f, int limit)
{
    int no = f->noutputs, ni = f->ninputs;
    void *saved[3 * no + 1];
    memcpy(saved, f->io + ni, (size_t)(3 * no) * sizeof *saved);
    Capture c = {.gr = gr, .io = f->io, .nin = ni};
    if (!(gr->out = calloc((size_t)no + 1, sizeof *gr->out)) ||
        !(gr->dims = malloc(((size_t)f->nout_dims + 1) * sizeof *gr->dims))) {
        graph_clear(g, gr);
        return plain(rt, g, f);
    }
    gr->nout = no;
    gr->ndims = f->nout_dims;
    if (current(rt, g) != 0) {
        graph_clear(g, gr);
        return -1;
    }
    CUresult r = cu.StreamBeginCapture(g->stream, CU_STREAM_CAPTURE_MODE_RELAXED);
    if (r) { /* never again for this key; the run as it is */
        graph_clear(g, gr);
        gr->seen = -1;
        return plain(rt, g, f);
    }
    g->cap = &c;
    int32_t rc = f->main(rt, f->io, f->shapes, f->syms);
    g->cap = NULL;
    for (int i = 0; rc == 0 && !c.abandoned && i < no; i++)
        if (!gr->out[i].set) /* a replay would not know where it is */
            c.abandoned = "an output the flow did not hand over";
    CUgraph graph = NULL;
    CUgraphExec exec = NULL;
    r = cu.StreamEndCapture(g->stream, &graph);
    if (rc == 0 && !c.abandoned && r == 0 && graph && cu.GraphInstantiateWithFlags(&exec, graph, 0) != 0)
        exec = NULL;
    if (graph)
        cu.GraphDestroy(graph);
    memcpy(f->io + ni, saved, (size_t)(3 * no) * sizeof *saved); /* the caller's output slots again */
    bool log = getenv("DISC_CUDA_GRAPHS_LOG") != NULL;
    if (!exec) {
        graph_clear(g, gr);
        g->stats.graphs_abandoned++;
        if (rc > 0 && !c.abandoned)
            return rc; /* the shapes violate the model: said as the flow says it */
        /* never again at this key where the flow does what a graph cannot
         * hold at these shapes, or the driver would not capture or make
         * it; a flow that failed (a buffer too small) fails again below */
        if (c.abandoned || rc == 0)
            gr->seen = -1;
        if (log) {
            const char *name = NULL, *msg = disc_rt_error(rt);
            if (r && cu.GetErrorName(r, &name) != 0)
                name = NULL;
            fprintf(stderr, "disc: cuda graph not kept (the run goes on without): %s%s%s\n",
                    c.abandoned ? c.abandoned : rc ? (msg ? msg : "the flow failed") : "cuStreamEndCapture or "
                    "cuGraphInstantiateWithFlags failed", name ? ": " : "", name ? name : "");
        }
        disc_rt_reset(rt); /* the capture's error and memory */
        int32_t rc2 = plain(rt, g, f);
        if (rc2 == 0) /* the flow fails only while captured: not again */
            gr->seen = -1;
        return rc2;
    }

    gr->exec = exec;
    memcpy(gr->dims, f->shapes + f->nin_dims, (size_t)f->nout_dims * sizeof *gr->dims);
    pthread_mutex_lock(&g->mu);
    for (Block *b = gr->owned; b; b = b->next)
        gr->bytes += b->bytes;
    g->graph_bytes += gr->bytes;
    pthread_mutex_unlock(&g->mu);
    g->stats.graphs_captured++;
    if (log)
        fprintf(stderr, "disc: cuda graph captured (%d copies in before it; %zu bytes of device memory, %zu in all "
                "graphs)\n", gr->npre, gr->bytes, g->graph_bytes);
    graphs_fit(g, limit, gr);
    return replay(rt, g, gr, f);
}

/* The model's stream waits, on the device, for the work queued on the
 * caller's stream so far: an event recorded there, waited for here. The
 * host does not block; a graph replayed or captured after it is ordered
 * after the wait like any work on the stream. */
static int wait_caller(DiscRt *rt, DiscGpu *g, void *stream)
{
    CUresult r;
    if (!g->waitev && (r = cu.EventCreate(&g->waitev, 2 /* CU_EVENT_DISABLE_TIMING */)) != 0)
        return failed(rt, r, "cuEventCreate (the caller's stream's event)");
    if ((r = cu.EventRecord(g->waitev, (CUstream)stream)) != 0)
        return failed(rt, r, "cuEventRecord on the caller's stream");
    if ((r = cu.StreamWaitEvent(g->stream, g->waitev, 0)) != 0)
        return failed(rt, r, "cuStreamWaitEvent (the model's stream on the caller's)");
    return 0;
}

int32_t disc_gpu_run(DiscRt *rt, DiscGpu *g, const DiscGpuFlow *f)
{
    int limit = graphs_limit(rt);
    if (limit < 0)
        return -1;
    if (f->wait && wait_caller(rt, g, f->wait) != 0)
        return -1;
    if (limit == 0 || disc_rt_profiling()) /* DISC_PROFILE times each launch */
        return plain(rt, g, f);
    int n = 0;
    int64_t *key = run_key(rt, f, &n);
    bool took = false;
    Graph *gr = key ? graph_find(g, key, n, false, &took) : NULL;
    g->runs++;
    if (gr)
        gr->used = g->runs;
    if (gr && gr->exec) {
        free(key);
        int32_t rc = replay(rt, g, gr, f);
        return rc == REPLAY_NO ? plain(rt, g, f) : rc;
    }
    if (gr && gr->seen > 0) {
        free(key);
        return capture(rt, g, gr, f, limit);
    }
    int32_t rc = plain(rt, g, f);
    if (rc == 0 && key && !gr && (gr = graph_find(g, key, n, true, &took)))
        gr->used = g->runs;
    if (!took)
        free(key);
    if (rc == 0 && gr && gr->seen >= 0)
        gr->seen++;
    return rc;
}

int disc_gpu_capturing(DiscRt *rt, DiscGpu *g, const char *why)
{
    return g && g->cap ? abandon(rt, g, why) : 0;
}
