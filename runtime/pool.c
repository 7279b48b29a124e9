/*
 * pool.c — the thread pool behind disc_rt_parallel_for.
 *
 * One pool serves the process: persistent pthread workers that sleep on a
 * condition variable. It is created by the first disc_rt_pool_acquire and
 * grows (never shrinks) when a later one asks for more threads; a DiscRt
 * holds a reference, and the pool lives on (its workers asleep) when the
 * count drops to zero, since a model run makes and frees one DiscRt per
 * run. disc_rt_shutdown stops it.
 *
 * A job is one parallel_for. It lives on the caller's stack and sits in
 * the pool's job list while it has unclaimed chunks:
 *
 *     caller                               worker
 *     lock; append job; wake; unlock       lock; pick a job with room;
 *     claim chunks (atomic counter)        job->active++; unlock
 *     lock; unlink job;                    claim chunks (atomic counter)
 *     wait until job->active == 0          lock; job->active--; signal
 *
 * Chunks are claimed with an atomic fetch-add, so the caller and the
 * workers share the work without the lock. Once the caller has found no
 * chunk left it unlinks the job (no worker can join any more) and waits
 * for those still running one. Several threads may submit at once: the
 * list holds each of their jobs, and a worker takes the oldest with room
 * (a job admits at most threads - 1 workers, its run's share).
 *
 * Chunking: about 4 chunks per participant, none smaller than grain, so a
 * slow chunk (a busy core, an uneven kernel) does not hold the others.
 *
 * Waking: a worker that finds no job spins briefly (SPIN checks of an
 * atomic job counter, with a pause) before it sleeps, so the back-to-back
 * kernels of a host flow do not pay a futex wake each; the spin is short
 * enough not to take a core from oneDNN's OpenMP team for long. The
 * caller, done with its chunks, likewise spins up to SPIN pauses for the
 * workers still in its job before it sleeps on `done` (BERT-base at 1x13,
 * whose matmul parts end together: 22.8 -> 22.3 ms).
 *
 * Nesting: a thread running chunks (worker, or caller inside its own job)
 * is marked busy; a parallel_for from inside a kernel runs inline.
 *
 * Floating-point control: a job carries its caller's (MXCSR on x86:
 * rounding, flush-to-zero, denormals-are-zero) and a worker takes it on
 * before running the job's chunks. A worker starts with the control of the
 * thread that created it, so without this a caller that set flush-to-zero
 * after the pool was made got denormals flushed in its own chunks and kept
 * in the workers': a result that changed with the thread count.
 */
#include "runtime/rt.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { SPIN = 2000, MAX_WORKERS = 255 };

#if defined(__x86_64__) || defined(__i386__)
typedef unsigned FpControl;
static FpControl fp_get(void) { return __builtin_ia32_stmxcsr() & ~0x3fu; } /* less the exception flags */
static void fp_set(FpControl c)
{
    if ((__builtin_ia32_stmxcsr() & ~0x3fu) != c)
        __builtin_ia32_ldmxcsr(c);
}
#else
#include <fenv.h>
typedef fenv_t FpControl;
static FpControl fp_get(void)
{
    fenv_t e;
    fegetenv(&e);
    return e;
}
static void fp_set(FpControl c) { fesetenv(&c); }
#endif

typedef struct Job {
    DiscKernelFn *fn;
    void *args;
    int64_t n, chunk;          /* range and chunk size */
    int64_t nchunks;
    FpControl fp;              /* the caller's floating-point control */
    atomic_int_fast64_t next;  /* next chunk to claim */
    int room;                  /* workers that may still join (under the lock) */
    int active;                /* workers inside (under the lock) */
    struct Job *prev, *nextjob;
} Job;

struct DiscRtPool {
    pthread_mutex_t mu;
    pthread_cond_t work;       /* a job was added, or stop */
    pthread_cond_t done;       /* a worker left a job */
    Job *head, *tail;          /* jobs with chunks to claim */
    atomic_int pending;        /* jobs in the list, read without the lock */
    int nworkers, refs, stop;
    pthread_t workers[MAX_WORKERS];
};

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER; /* guards `pool` and refs */
static DiscRtPool *pool;
static _Thread_local int busy;

int disc_rt_pool_busy(void)
{
    return busy;
}

int disc_rt_cores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > MAX_WORKERS + 1 ? MAX_WORKERS + 1 : (int)n;
}

static void run_chunks(Job *j)
{
    for (;;) {
        int64_t c = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
        if (c >= j->nchunks)
            return;
        int64_t b = c * j->chunk, e = b + j->chunk < j->n ? b + j->chunk : j->n;
        j->fn(b, e, j->args);
    }
}

/* The oldest job with room and unclaimed chunks; under the lock. */
static Job *pick(DiscRtPool *p)
{
    for (Job *j = p->head; j; j = j->nextjob)
        if (j->room > 0 && atomic_load_explicit(&j->next, memory_order_relaxed) < j->nchunks)
            return j;
    return NULL;
}

static void *worker(void *arg)
{
    DiscRtPool *p = arg;
    busy = 1;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        if (p->stop)
            break;
        Job *j = pick(p);
        if (!j) {
            pthread_mutex_unlock(&p->mu);
            for (int i = 0; i < SPIN && !atomic_load_explicit(&p->pending, memory_order_relaxed); i++)
                __builtin_ia32_pause();
            pthread_mutex_lock(&p->mu);
            if (p->stop)
                break;
            j = pick(p);
            if (!j) {
                pthread_cond_wait(&p->work, &p->mu);
                continue;
            }
        }
        j->room--;
        /* atomic as well as under the lock: the caller spins reading it
         * without the lock before it waits (ThreadSanitizer's finding) */
        __atomic_add_fetch(&j->active, 1, __ATOMIC_RELAXED);
        pthread_mutex_unlock(&p->mu);
        fp_set(j->fp);
        run_chunks(j);
        pthread_mutex_lock(&p->mu);
        if (__atomic_sub_fetch(&j->active, 1, __ATOMIC_RELEASE) == 0)
            pthread_cond_broadcast(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static void pool_stop(DiscRtPool *p)
{
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->nworkers; i++)
        pthread_join(p->workers[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done);
    free(p);
}

/* Grows p to `want` workers; under pool_mu. */
static int grow(DiscRtPool *p, int want, char *msg, int msgsize)
{
    if (want > MAX_WORKERS)
        want = MAX_WORKERS;
    while (p->nworkers < want) {
        int rc = pthread_create(&p->workers[p->nworkers], NULL, worker, p);
        if (rc) {
            snprintf(msg, (size_t)msgsize, "thread pool: cannot start a thread: %s", strerror(rc));
            return -1;
        }
        pthread_mutex_lock(&p->mu);
        p->nworkers++;
        pthread_mutex_unlock(&p->mu);
    }
    return 0;
}

DiscRtPool *disc_rt_pool_acquire(int threads, char *msg, int msgsize)
{
    pthread_mutex_lock(&pool_mu);
    DiscRtPool *p = pool;
    if (!p) {
        p = calloc(1, sizeof *p);
        if (!p) {
            pthread_mutex_unlock(&pool_mu);
            snprintf(msg, (size_t)msgsize, "thread pool: out of memory");
            return NULL;
        }
        pthread_mutex_init(&p->mu, NULL);
        pthread_cond_init(&p->work, NULL);
        pthread_cond_init(&p->done, NULL);
        pool = p;
    }
    if (grow(p, threads - 1, msg, msgsize) != 0) {
        pthread_mutex_unlock(&pool_mu);
        return NULL;
    }
    p->refs++;
    pthread_mutex_unlock(&pool_mu);
    return p;
}

void disc_rt_pool_release(DiscRtPool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&pool_mu);
    p->refs--;
    pthread_mutex_unlock(&pool_mu);
}

void disc_rt_pool_run(DiscRtPool *p, int threads, DiscKernelFn *fn, void *args, int64_t n, int64_t grain)
{
    if (n <= 0)
        return;
    if (grain < 1)
        grain = 1;
    if (n <= grain || threads <= 1 || busy) {
        fn(0, n, args);
        return;
    }
    int64_t nchunks = (n + grain - 1) / grain;
    if (nchunks > 4 * (int64_t)threads)
        nchunks = 4 * (int64_t)threads;
    Job j = {.fn = fn, .args = args, .n = n, .fp = fp_get()};
    j.chunk = (n + nchunks - 1) / nchunks;
    j.nchunks = (n + j.chunk - 1) / j.chunk;
    j.room = threads - 1 < (int)(j.nchunks - 1) ? threads - 1 : (int)(j.nchunks - 1);
    atomic_init(&j.next, 0);

    pthread_mutex_lock(&p->mu);
    j.prev = p->tail;
    if (p->tail)
        p->tail->nextjob = &j;
    else
        p->head = &j;
    p->tail = &j;
    atomic_fetch_add(&p->pending, 1);
    if (j.room == 1)
        pthread_cond_signal(&p->work);
    else
        pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);

    busy = 1;
    run_chunks(&j);
    busy = 0;

    pthread_mutex_lock(&p->mu);
    if (j.prev)
        j.prev->nextjob = j.nextjob;
    else
        p->head = j.nextjob;
    if (j.nextjob)
        j.nextjob->prev = j.prev;
    else
        p->tail = j.prev;
    atomic_fetch_sub(&p->pending, 1);
    if (j.active > 0) { /* spin first: a futex sleep and wake cost more than most chunks */
        pthread_mutex_unlock(&p->mu);
        for (int i = 0; i < SPIN && __atomic_load_n(&j.active, __ATOMIC_ACQUIRE) > 0; i++)
            __builtin_ia32_pause();
        pthread_mutex_lock(&p->mu);
    }
    while (j.active > 0)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

void disc_rt_pool_shutdown(void)
{
    pthread_mutex_lock(&pool_mu);
    DiscRtPool *p = pool;
    if (p && p->refs == 0)
        pool = NULL;
    else
        p = NULL;
    pthread_mutex_unlock(&pool_mu);
    if (p)
        pool_stop(p);
}
