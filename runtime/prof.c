/*
 * prof.c — DISC_PROFILE: the time of every kernel launch and library call
 * of compiled models, reported on stderr when the process exits.
 *
 * It is a run-time switch of the runtime, not of the generated code: the
 * host flow always calls disc_rt_parallel_for and disc_rt_call_*, which
 * time themselves when the environment had DISC_PROFILE set when the first
 * run asked (read once, here). So JIT-compiled models and AOT objects are
 * profiled alike, and a model compiled without the variable can be
 * profiled by setting it for the run.
 *
 * Entries are keyed by an address (a kernel's function; a library call's
 * interned description: kind, shape and how it ran) and live for the
 * process. Kernels are named by what compiled them (disc_rt_prof_name, the
 * JIT); unnamed ones show as "kernel". Only the host flow's own calls
 * count: a launch from inside a library call (a split's parts, the skinny
 * kernel) is part of that call's time.
 */
#include "runtime/rt.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { NPROF = 4096, NKEYS = 1024 };

typedef struct ProfEntry {
    const void *key;
    char *what;                /* malloc'd */
    double seconds;
    long calls;
    double flops;              /* the calls' floating-point operations, where known */
} ProfEntry;

static struct {
    pthread_mutex_t mu;
    ProfEntry e[NPROF];
    int n;
    char target[96];           /* the CPU the last named kernels were compiled for */
    char *keys[NKEYS];         /* interned call descriptions */
    int nkeys;
    int paused;                /* disc_rt_prof_pause */
} prof = {.mu = PTHREAD_MUTEX_INITIALIZER};

static pthread_once_t prof_once = PTHREAD_ONCE_INIT;
static int prof_on;

static void prof_report(void);

static void prof_init(void)
{
    prof_on = disc_env()->profile;
    if (prof_on)
        atexit(prof_report);
}

int disc_rt_profiling(void)
{
    pthread_once(&prof_once, prof_init);
    return prof_on;
}

double disc_rt_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The entry for key (under prof.mu), made with what on first use; NULL when full. */
static ProfEntry *entry(const void *key, const char *what)
{
    for (int i = 0; i < prof.n; i++)
        if (prof.e[i].key == key)
            return &prof.e[i];
    if (prof.n == NPROF)
        return NULL;
    ProfEntry *p = &prof.e[prof.n];
    *p = (ProfEntry){.key = key, .what = strdup(what ? what : "kernel")};
    if (!p->what)
        return NULL;
    prof.n++;
    return p;
}

void disc_rt_prof_add_work(const void *key, const char *what, double seconds, double flops)
{
    pthread_mutex_lock(&prof.mu);
    ProfEntry *p = prof.paused ? NULL : entry(key, what);
    if (p) {
        p->seconds += seconds;
        p->calls++;
        p->flops += flops;
    }
    pthread_mutex_unlock(&prof.mu);
}

void disc_rt_prof_add(const void *key, const char *what, double seconds)
{
    disc_rt_prof_add_work(key, what, seconds, 0);
}

void disc_rt_prof_pause(int paused)
{
    pthread_mutex_lock(&prof.mu);
    prof.paused = paused;
    pthread_mutex_unlock(&prof.mu);
}

double disc_rt_prof_get(const void *key, long *calls)
{
    double t = 0;
    *calls = 0;
    pthread_mutex_lock(&prof.mu);
    for (int i = 0; i < prof.n; i++)
        if (prof.e[i].key == key) {
            t = prof.e[i].seconds;
            *calls = prof.e[i].calls;
        }
    pthread_mutex_unlock(&prof.mu);
    return t;
}

void disc_rt_prof_name(const void *key, const char *what, const char *target)
{
    if (!disc_rt_profiling())
        return;
    pthread_mutex_lock(&prof.mu);
    ProfEntry *p = entry(key, what);
    if (p && strcmp(p->what, what) != 0) { /* a kernel timed before it was named */
        char *w = strdup(what);
        if (w) {
            free(p->what);
            p->what = w;
        }
    }
    if (target)
        snprintf(prof.target, sizeof prof.target, "%s", target);
    pthread_mutex_unlock(&prof.mu);
}

const void *disc_rt_prof_key(const char *what)
{
    pthread_mutex_lock(&prof.mu);
    const char *k = NULL;
    for (int i = 0; i < prof.nkeys && !k; i++)
        if (!strcmp(prof.keys[i], what))
            k = prof.keys[i];
    if (!k && prof.nkeys < NKEYS && (prof.keys[prof.nkeys] = strdup(what)))
        k = prof.keys[prof.nkeys++];
    pthread_mutex_unlock(&prof.mu);
    return k ? k : (const void *)"library call";
}

static int by_time(const void *a, const void *b)
{
    double x = ((const ProfEntry *)a)->seconds, y = ((const ProfEntry *)b)->seconds;
    return x < y ? 1 : x > y ? -1 : 0;
}

static void prof_report(void)
{
    pthread_mutex_lock(&prof.mu);
    double total = 0;
    int shown = 0;
    for (int i = 0; i < prof.n; i++) {
        total += prof.e[i].seconds;
        shown += prof.e[i].calls > 0;
    }
    qsort(prof.e, (size_t)prof.n, sizeof *prof.e, by_time);
    fprintf(stderr, "disc profile: %.1f ms in %d kernels and library calls", 1e3 * total, shown);
    if (*prof.target)
        fprintf(stderr, " (kernels compiled for %s)", prof.target);
    fputc('\n', stderr);
    int ntop = disc_env()->profile_top;
    for (int i = 0; i < prof.n && i < ntop; i++)
        if (prof.e[i].calls) {
            fprintf(stderr, "  %8.2f ms %5.1f%% %6ld calls  %s", 1e3 * prof.e[i].seconds,
                    100 * prof.e[i].seconds / (total > 0 ? total : 1), prof.e[i].calls, prof.e[i].what);
            if (prof.e[i].flops > 0 && prof.e[i].seconds > 0)
                fprintf(stderr, "  %.1f GFLOP/s", 1e-9 * prof.e[i].flops / prof.e[i].seconds);
            fputc('\n', stderr);
        }
    for (int i = 0; i < prof.n; i++)
        free(prof.e[i].what);
    for (int i = 0; i < prof.nkeys; i++)
        free(prof.keys[i]);
    prof.n = prof.nkeys = 0;
    pthread_mutex_unlock(&prof.mu);
}
