/*
 * fake_cuda.c — a stand-in for libcuda.so.1, for testing runtime/cudrv.c
 * where there is no GPU: built as build/fakecuda/libcuda.so.1 and found
 * through LD_LIBRARY_PATH (unit/test_cudrv/fake).
 *
 * It answers cuGetProcAddress_v2 with its own functions, as the driver
 * does, and plays one device ("disc fake GPU", sm_90) whose memory is host
 * memory at other addresses: a device address is the host address with
 * bit 46 flipped (DEV below), so a host flow that read device memory on
 * the host would fault, as it would with a real GPU. A module is an image
 * that starts with "FAKE", whose kernels are the two C functions below,
 * run over every thread of the grid in turn, or one that starts with
 * "DISCEMU": the cuda backend's kernels compiled for disc's GPU emulator
 * (codegen/emu.c, gpu_emu_image: a shared object), whose entries
 * NAME_cu(grid, block, shmem, params, DEV) run a launch's blocks.
 * FAKE_CUDA_FAIL=cuName makes that call fail (cuMemAlloc with
 * CUDA_ERROR_OUT_OF_MEMORY, any other with CUDA_ERROR_UNKNOWN);
 * FAKE_CUDA_OOM_AT=N makes cuMemAlloc fail while N or more bytes are held;
 * FAKE_CUDA_DEVICES=N sets the device count. Stream capture records the
 * fills, device copies, launches (their parameters' values as at the
 * call, as the driver keeps them) and the work fake_cublaslt.c hands to
 * fake_cuda_defer, for cuGraphLaunch to run in order; a copy between host
 * and device, a wait or an event while capturing fails as the driver's
 * does (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) and spoils the capture,
 * and so does cuMemAlloc unless the capture is relaxed. Events read a fake clock
 * that each launch moves on by a millisecond per block. fake_cuda_calls(name) counts
 * the calls of name, for the test to ask with dlsym.
 */
#include "runtime/cuda_abi.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* device address = host address ^ DEV */
#define DEV ((uint64_t)1 << 46)
static void *host(unsigned long long p)
{
    return (void *)(uintptr_t)(p ^ DEV);
}

typedef int CUresult;
enum {
    OK = 0,
    INVALID_VALUE = 1,
    OUT_OF_MEMORY = 2,
    INVALID_IMAGE = 200,
    INVALID_HANDLE = 400,
    ILLEGAL_STATE = 401,
    NOT_FOUND = 500,
    CAPTURE_UNSUPPORTED = 900,
    CAPTURE_INVALIDATED = 901,
    UNKNOWN = 999,
};

/* ---- stream capture: work recorded, run by cuGraphLaunch ---- */
typedef struct Work {
    void (*run)(void *arg);
    struct Work *next;
    size_t size;
    _Alignas(16) unsigned char arg[];
} Work;
typedef struct FakeGraph {
    Work *head, **tail;
} FakeGraph;
static FakeGraph *cap;      /* the capture under way */
static int cap_mode, cap_spoiled;
static int graphs, execs;   /* live, for the leak checks */

static void graph_free(FakeGraph *gr)
{
    while (gr->head) {
        Work *w = gr->head;
        gr->head = w->next;
        free(w);
    }
    free(gr);
}

/* Recorded where a capture is under way (1; 0: run it now). */
static int record(void (*run)(void *), const void *arg, size_t size)
{
    if (!cap)
        return 0;
    Work *w = malloc(sizeof *w + size);
    if (!w) {
        cap_spoiled = 1;
        return 1;
    }
    w->run = run;
    w->next = NULL;
    w->size = size;
    memcpy(w->arg, arg, size);
    *cap->tail = w;
    cap->tail = &w->next;
    return 1;
}

/* For fake_cublaslt.c: its call recorded while the stream captures. */
int fake_cuda_defer(void *stream, void (*run)(void *), const void *arg, size_t size);
int fake_cuda_defer(void *stream, void (*run)(void *), const void *arg, size_t size)
{
    (void)stream;
    return record(run, arg, size);
}

/* What a capture cannot hold: fails, and the capture with it. */
#define NOT_IN_CAPTURE()                 \
    do {                                 \
        if (cap) {                       \
            cap_spoiled = 1;             \
            return CAPTURE_UNSUPPORTED;  \
        }                                \
    } while (0)

#define FAKE_CALLS_ENV "FAKE_CUDA_FAIL"
#include "fake_calls.h"

long fake_cuda_calls(const char *name);
long fake_cuda_calls(const char *name)
{
    return fake_calls(name);
}

#define ENTER(name, err) FAKE_ENTER(name, err)

static CUresult cuGetErrorName(CUresult r, const char **s)
{
    switch (r) {
    case OK: *s = "CUDA_SUCCESS"; return OK;
    case INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; return OK;
    case OUT_OF_MEMORY: *s = "CUDA_ERROR_OUT_OF_MEMORY"; return OK;
    case INVALID_IMAGE: *s = "CUDA_ERROR_INVALID_IMAGE"; return OK;
    case INVALID_HANDLE: *s = "CUDA_ERROR_INVALID_HANDLE"; return OK;
    case NOT_FOUND: *s = "CUDA_ERROR_NOT_FOUND"; return OK;
    case UNKNOWN: *s = "CUDA_ERROR_UNKNOWN"; return OK;
    }
    *s = NULL;
    return INVALID_VALUE;
}

static CUresult cuGetErrorString(CUresult r, const char **s)
{
    switch (r) {
    case OK: *s = "no error"; return OK;
    case INVALID_VALUE: *s = "invalid argument"; return OK;
    case OUT_OF_MEMORY: *s = "out of memory"; return OK;
    case INVALID_IMAGE: *s = "device kernel image is invalid"; return OK;
    case INVALID_HANDLE: *s = "invalid resource handle"; return OK;
    case NOT_FOUND: *s = "named symbol not found"; return OK;
    case UNKNOWN: *s = "unknown error"; return OK;
    }
    *s = NULL;
    return INVALID_VALUE;
}

static int inited;
static CUresult cuInit(unsigned flags)
{
    ENTER("cuInit", UNKNOWN);
    inited = flags == 0;
    return inited ? OK : INVALID_VALUE;
}

static CUresult cuDriverGetVersion(int *v)
{
    *v = 13000;
    return OK;
}

static CUresult cuDeviceGetCount(int *n)
{
    ENTER("cuDeviceGetCount", UNKNOWN);
    const char *e = getenv("FAKE_CUDA_DEVICES");
    *n = e ? atoi(e) : 1;
    return inited ? OK : UNKNOWN;
}

static CUresult cuDeviceGet(int *d, int ordinal)
{
    *d = ordinal;
    return OK;
}

static CUresult cuDeviceGetName(char *name, int len, int dev)
{
    snprintf(name, (size_t)len, "disc fake GPU");
    return OK;
}

static CUresult cuDeviceGetAttribute(int *v, int attr, int dev)
{
    switch (attr) {
    case 16: *v = 132; return OK;       /* multiprocessors */
    case 75: *v = 9; return OK;         /* compute capability */
    case 76: *v = 0; return OK;
    case 97: *v = 227 << 10; return OK; /* shared memory a block may opt in to */
    }
    return INVALID_VALUE;
}

static CUresult cuDeviceTotalMem(size_t *n, int dev)
{
    *n = (size_t)80 << 30;
    return OK;
}

static int ctx_refs;
static CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev)
{
    ENTER("cuDevicePrimaryCtxRetain", UNKNOWN);
    ctx_refs++;
    *ctx = &ctx_refs;
    return OK;
}

static CUresult cuDevicePrimaryCtxRelease(int dev)
{
    ctx_refs--;
    return OK;
}

static void *current;
static CUresult cuCtxSetCurrent(void *ctx)
{
    current = ctx;
    return OK;
}

static int streams;
static CUresult cuStreamCreate(void **s, unsigned flags)
{
    ENTER("cuStreamCreate", UNKNOWN);
    *s = &streams;
    streams++;
    return current ? OK : INVALID_HANDLE;
}

static CUresult cuStreamDestroy(void *s)
{
    streams--;
    return OK;
}

static CUresult cuStreamSynchronize(void *s)
{
    ENTER("cuStreamSynchronize", UNKNOWN);
    NOT_IN_CAPTURE();
    return OK;
}

static CUresult cuStreamBeginCapture(void *s, int mode)
{
    ENTER("cuStreamBeginCapture", UNKNOWN);
    if (cap)
        return ILLEGAL_STATE;
    if (!(cap = calloc(1, sizeof *cap)))
        return OUT_OF_MEMORY;
    cap->tail = &cap->head;
    cap_mode = mode;
    cap_spoiled = 0;
    return OK;
}

static CUresult cuStreamEndCapture(void *s, void **graph)
{
    *graph = NULL;
    if (!cap)
        return ILLEGAL_STATE;
    FakeGraph *gr = cap;
    cap = NULL;
    if (cap_spoiled) {
        graph_free(gr);
        return CAPTURE_INVALIDATED;
    }
    graphs++;
    *graph = gr;
    return OK;
}

/* an executable graph: a copy of the graph's work */
static CUresult cuGraphInstantiateWithFlags(void **exec, void *graph, unsigned long long flags)
{
    ENTER("cuGraphInstantiateWithFlags", UNKNOWN);
    FakeGraph *gr = graph, *ex = calloc(1, sizeof *ex);
    if (!ex)
        return OUT_OF_MEMORY;
    ex->tail = &ex->head;
    for (Work *w = gr->head; w; w = w->next) {
        Work *c = malloc(sizeof *c + w->size);
        if (!c) {
            graph_free(ex);
            return OUT_OF_MEMORY;
        }
        memcpy(c, w, sizeof *c + w->size);
        c->next = NULL;
        *ex->tail = c;
        ex->tail = &c->next;
    }
    execs++;
    *exec = ex;
    return OK;
}

static CUresult cuGraphLaunch(void *exec, void *s)
{
    ENTER("cuGraphLaunch", UNKNOWN);
    NOT_IN_CAPTURE();
    for (Work *w = ((FakeGraph *)exec)->head; w; w = w->next)
        w->run(w->arg);
    return OK;
}

static CUresult cuGraphExecDestroy(void *exec)
{
    execs--;
    graph_free(exec);
    return OK;
}

static CUresult cuGraphDestroy(void *graph)
{
    graphs--;
    graph_free(graph);
    return OK;
}

/* device memory: host blocks with their sizes, on a list (a device
 * address hides its block from a leak checker; a real driver's memory
 * left allocated at exit, as a process may, is no leak either) */
typedef struct MemBlock {
    struct MemBlock *prev, *next;
    size_t n;
    size_t pad;
} MemBlock;
static MemBlock *blocks;
static size_t held;
static CUresult cuMemAlloc(unsigned long long *p, size_t n)
{
    ENTER("cuMemAlloc", OUT_OF_MEMORY);
    const char *at = getenv("FAKE_CUDA_OOM_AT");
    if (!current || !n)
        return INVALID_VALUE;
    if (at && held + n >= (size_t)atoll(at))
        return OUT_OF_MEMORY;
    if (cap && cap_mode != 2) { /* a capture not relaxed forbids it */
        cap_spoiled = 1;
        return CAPTURE_UNSUPPORTED;
    }
    MemBlock *b = malloc(sizeof *b + n);
    if (!b)
        return OUT_OF_MEMORY;
    *b = (MemBlock){.next = blocks, .n = n};
    if (blocks)
        blocks->prev = b;
    blocks = b;
    held += n;
    *p = (unsigned long long)(uintptr_t)(b + 1) ^ DEV;
    return OK;
}

static CUresult cuMemFree(unsigned long long p)
{
    fails("cuMemFree");
    if (!p)
        return INVALID_VALUE;
    MemBlock *b = (MemBlock *)host(p) - 1;
    held -= b->n;
    if (b->prev)
        b->prev->next = b->next;
    else
        blocks = b->next;
    if (b->next)
        b->next->prev = b->prev;
    free(b);
    return OK;
}

static CUresult cuMemcpyHtoDAsync(unsigned long long d, const void *s, size_t n, void *st)
{
    ENTER("cuMemcpyHtoDAsync", UNKNOWN);
    NOT_IN_CAPTURE(); /* pageable memory */
    memcpy(host(d), s, n);
    return OK;
}

static CUresult cuMemcpyDtoHAsync(void *d, unsigned long long s, size_t n, void *st)
{
    ENTER("cuMemcpyDtoHAsync", UNKNOWN);
    NOT_IN_CAPTURE();
    memcpy(d, host(s), n);
    return OK;
}

/* device copies and fills: run, or recorded with their arguments */
typedef struct Copy {
    unsigned long long d, s;
    size_t n;
    unsigned v;
} Copy;
static void copy_run(void *a)
{
    Copy *c = a;
    memmove(host(c->d), host(c->s), c->n);
}
static void set8_run(void *a)
{
    Copy *c = a;
    memset(host(c->d), (int)c->v, c->n);
}
static void set32_run(void *a)
{
    Copy *c = a;
    uint32_t *p = host(c->d);
    for (size_t i = 0; i < c->n; i++)
        p[i] = c->v;
}
static void copy2d_run(void *a)
{
    const CuMemcpy2D *c = a;
    for (size_t r = 0; r < c->Height; r++)
        memmove((char *)host(c->dstDevice) + r * c->dstPitch, (char *)host(c->srcDevice) + r * c->srcPitch,
                c->WidthInBytes);
}
static CUresult queue(void (*run)(void *), void *arg, size_t size)
{
    if (!record(run, arg, size))
        run(arg);
    return OK;
}

static CUresult cuMemcpyDtoDAsync(unsigned long long d, unsigned long long s, size_t n, void *st)
{
    return queue(copy_run, &(Copy){.d = d, .s = s, .n = n}, sizeof(Copy));
}

/* Device to device only (what disc asks for), a row at a time. */
static CUresult cuMemcpy2DAsync(const CuMemcpy2D *c, void *st)
{
    ENTER("cuMemcpy2DAsync", UNKNOWN);
    if (c->srcMemoryType != CU_MEMORY_DEVICE || c->dstMemoryType != CU_MEMORY_DEVICE || c->srcPitch < c->WidthInBytes ||
        c->dstPitch < c->WidthInBytes || c->srcXInBytes || c->srcY || c->dstXInBytes || c->dstY)
        return INVALID_VALUE;
    CuMemcpy2D copy = *c;
    return queue(copy2d_run, &copy, sizeof copy);
}

static CUresult cuMemsetD8Async(unsigned long long d, unsigned char v, size_t n, void *st)
{
    return queue(set8_run, &(Copy){.d = d, .n = n, .v = v}, sizeof(Copy));
}

static CUresult cuMemsetD32Async(unsigned long long d, unsigned v, size_t n, void *st)
{
    ENTER("cuMemsetD32Async", UNKNOWN);
    return queue(set32_run, &(Copy){.d = d, .n = n, .v = v}, sizeof(Copy));
}

/* kernels: one thread's work at global index i of n threads */
typedef void Body(void **params, int64_t i, int64_t n);
static void fill_f32(void **params, int64_t i, int64_t n) /* (float *p, int64_t count, float v) */
{
    float *p = host(*(unsigned long long *)params[0]);
    int64_t count = *(int64_t *)params[1];
    for (int64_t j = i; j < count; j += n)
        p[j] = *(float *)params[2];
}
static void axpy_f32(void **params, int64_t i, int64_t n) /* (float *y, const float *x, float a, int64_t count) */
{
    float *y = host(*(unsigned long long *)params[0]);
    const float *x = host(*(unsigned long long *)params[1]);
    int64_t count = *(int64_t *)params[3];
    for (int64_t j = i; j < count; j += n)
        y[j] += *(float *)params[2] * x[j];
}
/* an emulated kernel's launch (codegen/cuda.c, emu_entry) */
typedef void EmuLaunch(int64_t grid, int block, int64_t shmem, void **params, uint64_t dev);
typedef struct Fn {
    const char *name;
    Body *body;
    int shmem; /* the dynamic shared memory it was allowed */
    EmuLaunch *emu;
    struct Fn *next; /* an emulated module's functions */
    int np;          /* its parameters, and their sizes (the driver knows them from the module) */
    unsigned char psize[32];
} Fn;
static Fn fns[] = {{"fill_f32", fill_f32, 48 << 10, NULL, NULL, 3, {8, 8, 4}},
                   {"axpy_f32", axpy_f32, 48 << 10, NULL, NULL, 4, {8, 8, 4, 8}}};
static int modules;
static double clock_ms; /* the events' clock: a millisecond a block launched */

/* an emulated module: the shared object and the functions asked of it */
typedef struct EmuModule {
    void *lib;
    Fn *fns;
} EmuModule;

/* "DISCEMU\0", the object's size (8 bytes), the object: written to a file
 * and loaded. */
static CUresult emu_load(void **m, const unsigned char *image)
{
    uint64_t n;
    memcpy(&n, image + 8, 8);
    char path[] = "/tmp/fake-cuda-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return UNKNOWN;
    int ok = write(fd, image + 16, n) == (ssize_t)n;
    close(fd);
    void *lib = ok ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    unlink(path);
    EmuModule *em = lib ? calloc(1, sizeof *em) : NULL;
    if (!em) {
        if (lib)
            dlclose(lib);
        return INVALID_IMAGE;
    }
    em->lib = lib;
    *m = em;
    modules++;
    return OK;
}

static CUresult cuModuleLoadData(void **m, const void *image)
{
    ENTER("cuModuleLoadData", UNKNOWN);
    if (!strncmp(image, "DISCEMU", 8))
        return emu_load(m, image);
    if (memcmp(image, "FAKE", 4) != 0)
        return INVALID_IMAGE;
    modules++;
    *m = fns;
    return OK;
}

static CUresult cuModuleUnload(void *m)
{
    modules--;
    if (m != (void *)fns) {
        EmuModule *em = m;
        while (em->fns) {
            Fn *f = em->fns;
            em->fns = f->next;
            free((char *)f->name);
            free(f);
        }
        dlclose(em->lib);
        free(em);
    }
    return OK;
}

static CUresult cuModuleGetFunction(void **f, void *m, const char *name)
{
    if (m != (void *)fns) {
        EmuModule *em = m;
        char entry[128];
        snprintf(entry, sizeof entry, "%s_cu", name);
        EmuLaunch *fn = (EmuLaunch *)dlsym(em->lib, entry);
        snprintf(entry, sizeof entry, "%s_np", name);
        const int *np = (const int *)dlsym(em->lib, entry);
        Fn *e = fn && np && *np <= 32 ? calloc(1, sizeof *e) : NULL;
        if (!e || !(e->name = strdup(name))) {
            free(e);
            return NOT_FOUND;
        }
        e->emu = fn;
        e->shmem = 48 << 10;
        e->np = *np;
        memset(e->psize, 8, sizeof e->psize);
        e->next = em->fns;
        em->fns = e;
        *f = e;
        return OK;
    }
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
        if (!strcmp(fns[i].name, name)) {
            *f = &fns[i];
            return OK;
        }
    return NOT_FOUND;
}

static CUresult cuFuncSetAttribute(void *f, int attr, int v)
{
    fails("cuFuncSetAttribute");
    if (attr != 8 || v > 227 << 10)
        return INVALID_VALUE;
    ((Fn *)f)->shmem = v;
    return OK;
}

typedef struct Launch {
    Fn *fn;
    unsigned g[3], b[3], shmem;
    _Alignas(8) unsigned char vals[32][8];
} Launch;
static void launch_run(void *a)
{
    Launch *l = a;
    void *params[32];
    for (int i = 0; i < l->fn->np; i++)
        params[i] = l->vals[i];
    int64_t n = (int64_t)l->g[0] * l->g[1] * l->g[2] * l->b[0] * l->b[1] * l->b[2];
    if (l->fn->emu)
        l->fn->emu(l->g[0], (int)l->b[0], l->shmem, params, DEV);
    for (int64_t i = 0; !l->fn->emu && i < n; i++)
        l->fn->body(params, i, n);
    clock_ms += (double)l->g[0] * l->g[1] * l->g[2];
}

static CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                               unsigned shmem, void *stream, void **params, void **extra)
{
    ENTER("cuLaunchKernel", UNKNOWN);
    Fn *fn = f;
    if (!gx || !gy || !gz || !bx || !by || !bz || bx * by * bz > 1024 || (int)shmem > fn->shmem || extra)
        return INVALID_VALUE;
    if (fn->emu && (gy != 1 || gz != 1 || by != 1 || bz != 1))
        return INVALID_VALUE;
    Launch l = {.fn = fn, .g = {gx, gy, gz}, .b = {bx, by, bz}, .shmem = shmem};
    for (int i = 0; i < fn->np; i++) /* the values, as the driver copies them at the call */
        memcpy(l.vals[i], params[i], fn->psize[i]);
    return queue(launch_run, &l, sizeof l);
}

/* events: the time of a fake clock that each launch moves on by one
 * millisecond per block */
static int events;
static CUresult cuEventCreate(void **e, unsigned flags)
{
    ENTER("cuEventCreate", UNKNOWN);
    double *t = calloc(1, sizeof *t);
    if (!t)
        return OUT_OF_MEMORY;
    events++;
    *e = t;
    return OK;
}

static CUresult cuEventRecord(void *e, void *stream)
{
    ENTER("cuEventRecord", UNKNOWN);
    NOT_IN_CAPTURE();
    *(double *)e = clock_ms;
    return OK;
}

static CUresult cuEventElapsedTime(float *ms, void *a, void *b)
{
    *ms = (float)(*(double *)b - *(double *)a);
    return OK;
}

static CUresult cuEventDestroy(void *e)
{
    events--;
    free(e);
    return OK;
}

/* work on the stream is done when queued (or recorded into a capture, where
 * an event may not be waited for) */
static CUresult cuEventSynchronize(void *e)
{
    ENTER("cuEventSynchronize", UNKNOWN);
    NOT_IN_CAPTURE();
    return e ? OK : INVALID_VALUE;
}

/* work is done when queued: a wait has nothing to wait for */
static CUresult cuStreamWaitEvent(void *s, void *e, unsigned flags)
{
    ENTER("cuStreamWaitEvent", UNKNOWN);
    return s && e && flags == 0 ? OK : INVALID_VALUE;
}

/* pinned host memory: host memory, counted */
static int pinned;
static CUresult cuMemHostAlloc(void **p, size_t n, unsigned flags)
{
    ENTER("cuMemHostAlloc", UNKNOWN);
    if (!p || flags > 7)
        return INVALID_VALUE;
    if (!(*p = malloc(n ? n : 1)))
        return OUT_OF_MEMORY;
    pinned++;
    return OK;
}

static CUresult cuMemFreeHost(void *p)
{
    if (!p)
        return INVALID_VALUE;
    pinned--;
    free(p);
    return OK;
}

typedef struct {
    const char *name;
    void *fn;
} Entry;
#define E(f) {#f, (void *)f}
static const Entry entries[] = {
    E(cuGetErrorName),    E(cuGetErrorString),    E(cuInit),           E(cuDriverGetVersion),
    E(cuDeviceGetCount),  E(cuDeviceGet),         E(cuDeviceGetName),  E(cuDeviceGetAttribute),
    E(cuDeviceTotalMem),  E(cuDevicePrimaryCtxRetain), E(cuDevicePrimaryCtxRelease), E(cuCtxSetCurrent),
    E(cuStreamCreate),    E(cuStreamDestroy),     E(cuStreamSynchronize), E(cuMemAlloc),
    E(cuMemFree),         E(cuMemcpyHtoDAsync),   E(cuMemcpyDtoHAsync), E(cuMemcpyDtoDAsync), E(cuMemcpy2DAsync),
    E(cuMemsetD8Async),   E(cuMemsetD32Async),    E(cuModuleLoadData),    E(cuModuleUnload),   E(cuModuleGetFunction),
    E(cuFuncSetAttribute), E(cuLaunchKernel),     E(cuEventCreate),    E(cuEventRecord),
    E(cuEventElapsedTime), E(cuEventDestroy),     E(cuStreamBeginCapture), E(cuStreamEndCapture),
    E(cuGraphInstantiateWithFlags), E(cuGraphLaunch), E(cuGraphExecDestroy), E(cuGraphDestroy),
    E(cuEventSynchronize), E(cuMemHostAlloc),     E(cuMemFreeHost),    E(cuStreamWaitEvent),
};

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags, int *status);
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags, int *status)
{
    *pfn = NULL;
    if (version < 12000)
        return INVALID_VALUE;
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++)
        if (!strcmp(entries[i].name, symbol)) {
            *pfn = entries[i].fn;
            if (status)
                *status = 0;
            return OK;
        }
    if (status)
        *status = 1;
    return NOT_FOUND;
}

/* the live counts, for the test's leak checks */
int fake_cuda_live(void);
int fake_cuda_live(void)
{
    return ctx_refs + streams + modules + events + graphs + execs + pinned + (held != 0) + (cap != NULL);
}
