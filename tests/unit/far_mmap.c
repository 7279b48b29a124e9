/*
 * far_mmap.c — an LD_PRELOAD shim for tests: a crowded address space on
 * demand. Every anonymous mapping whose place the caller leaves to the
 * kernel (no MAP_FIXED; a hint is only a hint) goes, in turn, to one of
 * two zones 8 GB apart, as the kernel may place them in a process whose
 * address space is full of large libraries (PyTorch's CUDA build: a
 * small mapping went into a gap 3 GB above the larger one before it).
 * Code that assumes two mappings made one after the other lie within 2 GB
 * of each other (32-bit offsets between a JIT's sections) breaks under it;
 * unit/far_sections runs models through the JIT this way.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/types.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

/* 32 TB and 8 GB above it: free in any process this runs in (ASan's
 * shadow ends below 16 TB); each zone grows upwards */
static uintptr_t zone[2] = {(uintptr_t)1 << 45, ((uintptr_t)1 << 45) + ((uintptr_t)8 << 30)};
static int turn;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    static void *(*real)(void *, size_t, int, int, int, off_t);
    if (!real)
        real = (void *(*)(void *, size_t, int, int, int, off_t))dlsym(RTLD_NEXT, "mmap");
    if ((flags & MAP_ANONYMOUS) && !(flags & (MAP_FIXED | MAP_FIXED_NOREPLACE)) && len) {
        pthread_mutex_lock(&mu);
        int z = turn;
        turn ^= 1;
        uintptr_t at = zone[z];
        zone[z] += (len + 0xffff) & ~(size_t)0xffff;
        pthread_mutex_unlock(&mu);
        void *p = real((void *)at, len, prot, flags | MAP_FIXED_NOREPLACE, fd, off);
        if (p != MAP_FAILED)
            return p;
    }
    return real(addr, len, prot, flags, fd, off);
}
