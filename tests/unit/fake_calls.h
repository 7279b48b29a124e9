/*
 * fake_calls.h — the stand-in libraries' call counts and failure
 * injection (fake_cuda.c, fake_cublaslt.c, fake_cudnn.c): each entry point counts its
 * calls under its name (for a test to ask, with dlsym, through the
 * library's own exported function) and fails where the environment
 * variable FAKE_CALLS_ENV names it.
 */
#ifndef DISC_FAKE_CALLS_H
#define DISC_FAKE_CALLS_H

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

enum { FAKE_NCOUNTS = 64 };

static struct {
    const char *name;
    long calls;
} counts[FAKE_NCOUNTS];

static long fake_calls(const char *name)
{
    for (int i = 0; i < FAKE_NCOUNTS && counts[i].name; i++)
        if (!strcmp(counts[i].name, name))
            return counts[i].calls;
    return 0;
}

/* Counts the call; whether FAKE_CALLS_ENV names it. */
static int fails(const char *name)
{
    int i = 0;
    while (i < FAKE_NCOUNTS - 1 && counts[i].name && strcmp(counts[i].name, name))
        i++;
    counts[i].name = name;
    counts[i].calls++;
    const char *f = getenv(FAKE_CALLS_ENV);
    return f && !strcmp(f, name);
}

/* An entry point's first step: its call counted, and the failure status
 * err returned where FAKE_CALLS_ENV names it. */
#define FAKE_ENTER(name, err) \
    do {                      \
        if (fails(name))      \
            return err;       \
    } while (0)

/* What the stand-ins export: the library header's names. */
#define FAKE_API __attribute__((visibility("default")))

/* The stand-in driver's capture, if one is under way on stream, takes the
 * call: run(a copy of arg's size bytes) at the graph's launch
 * (fake_cuda_defer, looked up in the driver already loaded); 0 where it
 * is to run now. */
static inline int fake_defer(void *stream, void (*run)(void *), const void *arg, size_t size)
{
    static int (*defer)(void *, void (*)(void *), const void *, size_t);
    static int looked;
    if (!looked) {
        void *lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
        if (lib)
            *(void **)&defer = dlsym(lib, "fake_cuda_defer");
        looked = 1;
    }
    return defer && defer(stream, run, arg, size);
}

#endif
