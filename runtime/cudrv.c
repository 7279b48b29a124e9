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

enum {
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
    CU_STREAM_NON_BLOCKING = 1,
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
        SYM(EventRecord),     SYM(EventElapsedTime),  SYM(EventDestroy),
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
};

struct DiscGpuModule {
    CUmodule mod;
};

struct DiscGpuFn {
    CUfunction fn;
    int64_t shmem_set;   /* dynamic shared memory the function was allowed (0: the default) */
    char name[64];
};

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
        disc_blas_free(g->blas); /* its workspace is one of the buffers below */
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
        if (r == CUDA_ERROR_OUT_OF_MEMORY) { /* the cached buffers back, and once more */
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
    b->next = g->live;
    g->live = b;
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

int disc_gpu_copy_in(DiscRt *rt, DiscGpu *g, DiscDevPtr dst, const void *src, size_t bytes)
{
    int go = ready(rt, g, bytes);
    return go <= 0 ? go : queued(rt, cu.MemcpyHtoDAsync(dst, src, bytes, g->stream), "cuMemcpyHtoDAsync", bytes);
}

int disc_gpu_copy_out(DiscRt *rt, DiscGpu *g, void *dst, DiscDevPtr src, size_t bytes)
{
    int go = ready(rt, g, bytes);
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

/* ---- a model's run (rt.h: the host flow's calls) --------------------------- */

static DiscGpu *run_gpu(DiscRt *rt)
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

int32_t disc_rt_dev_in(DiscRt *rt, void *dst, const void *src, int64_t bytes)
{
    DiscGpu *g = run_gpu(rt);
    return g && bytes >= 0 ? disc_gpu_copy_in(rt, g, devp(dst), src, (size_t)bytes) : -1;
}

int32_t disc_rt_dev_out(DiscRt *rt, void *dst, const void *src, int64_t bytes)
{
    DiscGpu *g = run_gpu(rt);
    if (!g || bytes < 0 || disc_gpu_copy_out(rt, g, dst, devp(src), (size_t)bytes) != 0)
        return -1;
    return disc_gpu_sync(rt, g);
}

int32_t disc_rt_dev_fill(DiscRt *rt, void *dst, int64_t n, int64_t size, uint64_t bits)
{
    DiscGpu *g = run_gpu(rt);
    if (!g || n < 0 || (size != 4 && size != 8))
        return -1;
    if (n == 0)
        return 0;
    if (bits == 0)
        return disc_gpu_fill(rt, g, devp(dst), 0, (size_t)n * (size_t)size);
    if (size == 4)
        return disc_gpu_fill32(rt, g, devp(dst), (uint32_t)bits, (size_t)n);
    /* 8-byte values with no 64-bit memset: staged in run memory, copied
     * (the copy from pageable memory has read it when it returns) */
    uint64_t *h = disc_rt_alloc(rt, n * 8);
    if (!h)
        return -1;
    for (int64_t i = 0; i < n; i++)
        h[i] = bits;
    return disc_gpu_copy_in(rt, g, devp(dst), h, (size_t)n * 8);
}

void *disc_rt_dev_input(DiscRt *rt, const void *raw, int64_t bytes, int32_t want_dev)
{
    if (!!disc_rt_dev_io(rt) == !!want_dev)
        return (void *)raw;
    if (want_dev) {
        void *p = disc_rt_dev_alloc(rt, bytes);
        return p && disc_rt_dev_in(rt, p, raw, bytes) == 0 ? p : NULL;
    }
    void *p = disc_rt_alloc(rt, bytes);
    return p && disc_rt_dev_out(rt, p, raw, bytes) == 0 ? p : NULL;
}

void *disc_rt_dev_output(DiscRt *rt, void **slots, int64_t slot, const void *src, int64_t bytes, int32_t on_dev)
{
    DiscGpu *g = run_gpu(rt);
    bool dev_io = disc_rt_dev_io(rt);
    bool src_dev = on_dev == 2 ? dev_io : on_dev;
    if (!g || bytes < 0)
        return NULL;
    if (!dev_io) {
        if (!src_dev)
            return (void *)src; /* the caller copies it */
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
    if (src == s[0])
        return s[0];
    int rc = src_dev ? disc_gpu_copy(rt, g, devp(s[0]), devp(src), (size_t)bytes)
                     : disc_gpu_copy_in(rt, g, devp(s[0]), src, (size_t)bytes);
    return rc == 0 ? s[0] : NULL;
}

void *disc_rt_dev_const(DiscRt *rt, void **slot, const void *host, int64_t bytes)
{
    if (*slot)
        return *slot;
    DiscGpu *g = run_gpu(rt);
    DiscDevPtr p = g && bytes >= 0 ? disc_gpu_alloc(rt, g, (size_t)bytes) : 0;
    if (!p || disc_gpu_copy_in(rt, g, p, host, (size_t)bytes) != 0)
        return NULL;
    return *slot = (void *)(uintptr_t)p;
}

int32_t disc_rt_dev_launch(DiscRt *rt, void *fn, int64_t grid, int64_t block, int64_t shmem, void **params)
{
    DiscGpu *g = run_gpu(rt);
    return g ? disc_gpu_launch(rt, g, fn, grid, (int)block, shmem, params) : -1;
}
