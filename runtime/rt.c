/*
 * rt.c — the run context: one DiscRt per model run.
 *
 * It holds the first error of the run, the run memory, and a reference to
 * the process-wide thread pool (pool.c).
 *
 * Run memory is a bump arena of 64-byte aligned blocks: disc_rt_alloc
 * takes the next aligned slice of the current block, or starts a block of
 * max(request, BLOCK, what the last run used). disc_rt_reset frees every
 * block but keeps one when it alone held the whole run, so a model run
 * again at the same shapes allocates with no malloc at all. The arena is
 * locked, so kernels on workers may allocate too.
 */
#include "runtime/rt.h"
#include "ir/ir.h" /* alloc_huge */

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

enum { ALIGN = 64, BLOCK = 1 << 20, MSG = 512 };

typedef struct Block {
    struct Block *next;
    size_t size, used;     /* bytes of data, bytes handed out */
    _Alignas(ALIGN) unsigned char data[];
} Block;

struct DiscRt {
    DiscRtPool *pool;
    int threads;
    pthread_mutex_t mu;    /* guards err and the arena */
    atomic_int failed;
    char err[MSG];
    int kind;              /* of err: disc_rt_fail_kind's, or 0 */
    Block *blocks;         /* the current block first */
    size_t total;          /* bytes handed out this run */
    size_t want;           /* the size of the first block of the next run */
    const char *how;       /* how the last library call ran (disc_rt_call_how) */
    int in_call;           /* inside a library call (disc_rt_set_in_call) */
    DiscGpu *gpu;          /* the device of a cuda model's run, or NULL */
    DiscDevPtr *dev;       /* device run memory, released at disc_rt_reset */
    int ndev, capdev;
    int dev_io;            /* the run's inputs and outputs are in device memory */
    int plan_n;            /* the last layout disc_rt_place made: */
    int64_t *plan_bytes, *plan_off, plan_total; /* its sizes, offsets and block */
    int32_t *plan_live;                         /* and its lifetimes */
};

DiscRt *disc_rt_new(const DiscRtOpts *o)
{
    int cores = disc_rt_cores();
    int threads = o && o->threads > 0 ? o->threads : cores;
    DiscRt *rt = calloc(1, sizeof *rt);
    if (!rt)
        return NULL;
    char msg[MSG];
    rt->pool = threads > 1 ? disc_rt_pool_acquire(threads, msg, MSG) : NULL;
    if (threads > 1 && !rt->pool) {
        free(rt);
        return NULL;
    }
    rt->threads = threads;
    pthread_mutex_init(&rt->mu, NULL);
    atomic_init(&rt->failed, 0);
    return rt;
}

static void free_blocks(DiscRt *rt, Block *keep)
{
    for (Block *b = rt->blocks, *next; b; b = next) {
        next = b->next;
        if (b != keep)
            free(b);
    }
    rt->blocks = keep;
    if (keep) {
        keep->next = NULL;
        keep->used = 0;
    }
}

static void release_dev(DiscRt *rt)
{
    for (int i = 0; i < rt->ndev; i++)
        disc_gpu_release(rt->gpu, rt->dev[i]);
    rt->ndev = 0;
}

void disc_rt_free(DiscRt *rt)
{
    if (!rt)
        return;
    release_dev(rt);
    free(rt->dev);
    free(rt->plan_bytes);
    free_blocks(rt, NULL);
    disc_rt_pool_release(rt->pool);
    pthread_mutex_destroy(&rt->mu);
    free(rt);
}

int disc_rt_threads(const DiscRt *rt)
{
    return rt->threads;
}

static void run_parallel(DiscRt *rt, DiscKernelFn *fn, void *args, int64_t n, int64_t grain)
{
    if (!rt->pool)
        fn(0, n, args);
    else
        disc_rt_pool_run(rt->pool, rt->threads, fn, args, n, grain);
}

void disc_rt_parallel_for(DiscRt *rt, DiscKernelFn *fn, void *args, int64_t n, int64_t grain)
{
    if (n <= 0)
        return;
    if (!disc_rt_profiling() || rt->in_call || disc_rt_pool_busy()) {
        run_parallel(rt, fn, args, n, grain);
        return;
    }
    double t0 = disc_rt_now();
    run_parallel(rt, fn, args, n, grain);
    disc_rt_prof_add((const void *)fn, NULL, disc_rt_now() - t0);
}

void disc_rt_set_in_call(DiscRt *rt, int in)
{
    rt->in_call = in;
}

void *disc_rt_alloc_big(size_t bytes)
{
    if (bytes < HUGE_PAGE) /* aligned_alloc wants a multiple of the alignment, and 0 bytes is 64 */
        return aligned_alloc(ALIGN, bytes ? (bytes + ALIGN - 1) / ALIGN * ALIGN : ALIGN);
    return alloc_huge(bytes);
}

void *disc_rt_alloc(DiscRt *rt, int64_t bytes)
{
    if (bytes < 0) {
        disc_rt_fail(rt, "alloc: negative size %lld (an overflowed size computation?)", (long long)bytes);
        return NULL;
    }
    if ((uint64_t)bytes > SIZE_MAX - ALIGN - sizeof(Block) || bytes > INT64_MAX - ALIGN) {
        disc_rt_fail(rt, "alloc: %lld bytes is too large", (long long)bytes);
        return NULL;
    }
    size_t need = ((size_t)bytes + ALIGN - 1) & ~(size_t)(ALIGN - 1);
    pthread_mutex_lock(&rt->mu);
    Block *b = rt->blocks;
    if (!b || b->size - b->used < need) {
        size_t size = need > BLOCK ? need : BLOCK;
        if (!b && rt->want > size)
            size = rt->want;
        size = (size + ALIGN - 1) & ~(size_t)(ALIGN - 1);
        b = disc_rt_alloc_big(sizeof(Block) + size);
        if (!b) {
            pthread_mutex_unlock(&rt->mu);
            disc_rt_fail(rt, "alloc: out of memory for %lld bytes", (long long)bytes);
            return NULL;
        }
        b->size = size;
        b->used = 0;
        b->next = rt->blocks;
        rt->blocks = b;
    }
    void *p = b->data + b->used;
    b->used += need;
    rt->total += need;
    pthread_mutex_unlock(&rt->mu);
    return p;
}

int64_t disc_rt_place(DiscRt *rt, int32_t n, const int64_t *bytes, const int32_t *live, int64_t *off)
{
    size_t nb = (size_t)(n > 0 ? n : 0) * sizeof *bytes, nl = 2 * (size_t)(n > 0 ? n : 0) * sizeof *live;
    if (rt->plan_bytes && rt->plan_n == n && !memcmp(rt->plan_bytes, bytes, nb) && !memcmp(rt->plan_live, live, nl)) {
        memcpy(off, rt->plan_off, nb);
        return rt->plan_total;
    }
    int64_t total = disc_place(n, bytes, live, off);
    if (total < 0) {
        disc_rt_fail(rt, "alloc: the memory plan's %d slots do not fit in 2^63 bytes, or out of memory", (int)n);
        return -1;
    }
    if (rt->plan_n != n || !rt->plan_bytes) { /* one allocation: sizes, offsets, lifetimes */
        free(rt->plan_bytes);
        rt->plan_bytes = malloc(2 * nb + nl + 1);
        rt->plan_n = n;
    }
    if (rt->plan_bytes) { /* else no memory to remember it: place again next time */
        rt->plan_off = rt->plan_bytes + (n > 0 ? n : 0);
        rt->plan_live = (int32_t *)(rt->plan_off + (n > 0 ? n : 0));
        memcpy(rt->plan_bytes, bytes, nb);
        memcpy(rt->plan_off, off, nb);
        memcpy(rt->plan_live, live, nl);
        rt->plan_total = total;
    }
    return total;
}

void disc_rt_set_gpu(DiscRt *rt, DiscGpu *g)
{
    release_dev(rt);
    rt->gpu = g;
}

DiscGpu *disc_rt_gpu(const DiscRt *rt)
{
    return rt->gpu;
}

void disc_rt_set_dev_io(DiscRt *rt, int on)
{
    rt->dev_io = on;
}

int disc_rt_dev_io(const DiscRt *rt)
{
    return rt->dev_io;
}

void *disc_rt_dev_alloc(DiscRt *rt, int64_t bytes)
{
    if (!rt->gpu) {
        disc_rt_fail(rt, "cuda: device memory asked of a run with no device");
        return NULL;
    }
    if (bytes < 0) {
        disc_rt_fail(rt, "alloc: negative size %lld (an overflowed size computation?)", (long long)bytes);
        return NULL;
    }
    pthread_mutex_lock(&rt->mu);
    if (rt->ndev == rt->capdev) {
        int cap = rt->capdev ? 2 * rt->capdev : 32;
        DiscDevPtr *p = realloc(rt->dev, (size_t)cap * sizeof *p);
        if (!p) {
            pthread_mutex_unlock(&rt->mu);
            disc_rt_fail(rt, "cuda: out of memory");
            return NULL;
        }
        rt->dev = p;
        rt->capdev = cap;
    }
    pthread_mutex_unlock(&rt->mu);
    DiscDevPtr p = disc_gpu_alloc(rt, rt->gpu, (size_t)bytes);
    if (!p)
        return NULL;
    pthread_mutex_lock(&rt->mu);
    rt->dev[rt->ndev++] = p;
    pthread_mutex_unlock(&rt->mu);
    return (void *)(uintptr_t)p;
}

void disc_rt_reset(DiscRt *rt)
{
    pthread_mutex_lock(&rt->mu);
    Block *keep = rt->blocks && !rt->blocks->next ? rt->blocks : NULL;
    rt->want = rt->total;
    free_blocks(rt, keep);
    release_dev(rt);
    rt->total = 0;
    rt->err[0] = 0;
    rt->kind = 0;
    atomic_store(&rt->failed, 0);
    pthread_mutex_unlock(&rt->mu);
}

static void vfail(DiscRt *rt, int kind, const char *fmt, va_list ap)
{
    if (atomic_load_explicit(&rt->failed, memory_order_acquire))
        return;
    pthread_mutex_lock(&rt->mu);
    if (!atomic_load_explicit(&rt->failed, memory_order_relaxed)) {
        vsnprintf(rt->err, sizeof rt->err, fmt, ap);
        rt->kind = kind;
        atomic_store_explicit(&rt->failed, 1, memory_order_release);
    }
    pthread_mutex_unlock(&rt->mu);
}

void disc_rt_fail(DiscRt *rt, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(rt, 0, fmt, ap);
    va_end(ap);
}

void disc_rt_fail_kind(DiscRt *rt, int kind, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(rt, kind, fmt, ap);
    va_end(ap);
}

int disc_rt_error_kind(const DiscRt *rt)
{
    return atomic_load_explicit(&rt->failed, memory_order_acquire) ? rt->kind : 0;
}

void disc_rt_set_call_how(DiscRt *rt, const char *how)
{
    rt->how = how;
}

const char *disc_rt_call_how(const DiscRt *rt)
{
    return rt->how ? rt->how : "";
}

const char *disc_rt_error(const DiscRt *rt)
{
    return atomic_load_explicit(&rt->failed, memory_order_acquire) ? rt->err : NULL;
}

void disc_rt_shutdown(void)
{
    disc_rt_pool_shutdown();
    disc_rt_lib_shutdown();
}

/* ---- constants with known hashes ------------------------------------------- */

typedef struct Known {
    const void *data;
    uint64_t hash;
    char *store;
    int refs;
} Known;

static struct {
    pthread_mutex_t mu;
    Known *v;
    int n, cap;
} known = {.mu = PTHREAD_MUTEX_INITIALIZER};

static Known *known_find(const void *data) /* under known.mu */
{
    for (int i = 0; i < known.n; i++)
        if (known.v[i].data == data)
            return &known.v[i];
    return NULL;
}

int disc_rt_known_add(const void *data, uint64_t hash, const char *store)
{
    pthread_mutex_lock(&known.mu);
    Known *k = known_find(data);
    bool ok = true;
    if (k) {
        k->refs++;
    } else {
        if (known.n == known.cap) {
            int cap = known.cap ? 2 * known.cap : 64;
            Known *v = realloc(known.v, (size_t)cap * sizeof *v);
            if (v) {
                known.v = v;
                known.cap = cap;
            }
        }
        char *s = known.n < known.cap ? strdup(store) : NULL;
        if ((ok = s != NULL))
            known.v[known.n++] = (Known){data, hash, s, 1};
    }
    pthread_mutex_unlock(&known.mu);
    return ok;
}

void disc_rt_known_remove(const void *data)
{
    pthread_mutex_lock(&known.mu);
    Known *k = known_find(data);
    if (k && --k->refs == 0) {
        free(k->store);
        *k = known.v[--known.n];
    }
    pthread_mutex_unlock(&known.mu);
}

int disc_rt_known(const void *data, uint64_t *hash, char *store, size_t size)
{
    pthread_mutex_lock(&known.mu);
    Known *k = known_find(data);
    if (k) {
        *hash = k->hash;
        snprintf(store, size, "%s", k->store);
    }
    pthread_mutex_unlock(&known.mu);
    return k != NULL;
}
