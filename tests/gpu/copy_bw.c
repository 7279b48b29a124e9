/*
 * copy_bw.c — host <-> device copy bandwidth on the lent GPU, for the
 * choice issue 13 leaves open: whether disc_run's copies (from and to the
 * caller's pageable memory, runtime/cudrv.c) should go through pinned
 * staging buffers of disc's own.
 *
 *   cc -O2 -o copy_bw tests/gpu/copy_bw.c -ldl && ./copy_bw
 *
 * For 1, 16 and 256 MiB, GB/s (best of 5) of: the driver's copy from and
 * to pageable memory (what disc does today); from and to pinned memory
 * (cuMemHostAlloc: the DMA's own rate); and staged, the bytes memcpy'd
 * through two pinned buffers of 8 MiB taking turns with the DMA (what
 * disc would do). Run by run_on_device.sh --tests; needs the driver only.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
static CUresult (*cuInit)(unsigned);
static CUresult (*cuDeviceGet)(int *, int);
static CUresult (*cuDevicePrimaryCtxRetain)(void **, int);
static CUresult (*cuCtxSetCurrent)(void *);
static CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
static CUresult (*cuMemHostAlloc)(void **, size_t, unsigned);
static CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, void *);
static CUresult (*cuMemcpyDtoHAsync)(void *, CUdeviceptr, size_t, void *);
static CUresult (*cuStreamCreate)(void **, unsigned);
static CUresult (*cuStreamSynchronize)(void *);
static CUresult (*cuEventCreate)(void **, unsigned);
static CUresult (*cuEventRecord)(void *, void *);
static CUresult (*cuEventSynchronize)(void *);

enum { CHUNK = 8 << 20 };
static void *stream, *ev[2], *pin2[2];

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static int check(CUresult r, const char *what)
{
    if (r)
        fprintf(stderr, "copy_bw: %s: CUresult %d\n", what, r);
    return r;
}

/* Host to device through the two pinned chunks: memcpy into one while the
 * DMA reads the other. */
static void staged_in(CUdeviceptr d, const char *src, size_t n)
{
    for (size_t off = 0, i = 0; off < n; off += CHUNK, i++) {
        size_t c = n - off < CHUNK ? n - off : CHUNK;
        int b = (int)(i % 2);
        if (i >= 2)
            cuEventSynchronize(ev[b]);
        memcpy(pin2[b], src + off, c);
        cuMemcpyHtoDAsync(d + off, pin2[b], c, stream);
        cuEventRecord(ev[b], stream);
    }
    cuStreamSynchronize(stream);
}

/* Device to host the same way: the DMA fills one chunk while memcpy
 * empties the other. */
static void staged_out(char *dst, CUdeviceptr d, size_t n)
{
    size_t prev = 0, pc = 0;
    for (size_t off = 0, i = 0;; off += CHUNK, i++) {
        size_t c = off < n ? (n - off < CHUNK ? n - off : CHUNK) : 0;
        int b = (int)(i % 2);
        if (c) {
            cuMemcpyDtoHAsync(pin2[b], d + off, c, stream);
            cuEventRecord(ev[b], stream);
        }
        if (i >= 1) {
            cuEventSynchronize(ev[1 - b]);
            memcpy(dst + prev, pin2[1 - b], pc);
        }
        if (!c)
            break;
        prev = off, pc = c;
    }
}

int main(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) {
        printf("SKIP: no driver: %s\n", dlerror());
        return 0;
    }
#define LOAD(f, name) *(void **)&f = dlsym(lib, name)
    LOAD(cuInit, "cuInit"), LOAD(cuDeviceGet, "cuDeviceGet"), LOAD(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    LOAD(cuCtxSetCurrent, "cuCtxSetCurrent"), LOAD(cuMemAlloc, "cuMemAlloc_v2"), LOAD(cuMemHostAlloc, "cuMemHostAlloc");
    LOAD(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"), LOAD(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
    LOAD(cuStreamCreate, "cuStreamCreate"), LOAD(cuStreamSynchronize, "cuStreamSynchronize");
    LOAD(cuEventCreate, "cuEventCreate"), LOAD(cuEventRecord, "cuEventRecord"), LOAD(cuEventSynchronize, "cuEventSynchronize");
    int dev;
    void *ctx;
    if (!cuInit || !cuEventSynchronize || check(cuInit(0), "cuInit") || check(cuDeviceGet(&dev, 0), "cuDeviceGet") ||
        check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain") || check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent") ||
        check(cuStreamCreate(&stream, 1), "cuStreamCreate") || check(cuEventCreate(&ev[0], 2), "cuEventCreate") ||
        check(cuEventCreate(&ev[1], 2), "cuEventCreate") || check(cuMemHostAlloc(&pin2[0], CHUNK, 0), "cuMemHostAlloc") ||
        check(cuMemHostAlloc(&pin2[1], CHUNK, 0), "cuMemHostAlloc"))
        return 1;
    size_t max = (size_t)256 << 20;
    char *page = malloc(max), *pin;
    CUdeviceptr d;
    if (!page || check(cuMemHostAlloc((void **)&pin, max, 0), "cuMemHostAlloc") || check(cuMemAlloc(&d, max), "cuMemAlloc"))
        return 1;
    memset(page, 1, max), memset(pin, 1, max);
    printf("copy_bw: GB/s, best of 5 | pageable in, pinned in, staged in | pageable out, pinned out, staged out\n");
    for (size_t n = (size_t)1 << 20; n <= max; n *= 16) {
        double best[6] = {0};
        for (int rep = 0; rep < 5; rep++)
            for (int k = 0; k < 6; k++) {
                double t = now();
                switch (k) {
                case 0: cuMemcpyHtoDAsync(d, page, n, stream), cuStreamSynchronize(stream); break;
                case 1: cuMemcpyHtoDAsync(d, pin, n, stream), cuStreamSynchronize(stream); break;
                case 2: staged_in(d, page, n); break;
                case 3: cuMemcpyDtoHAsync(page, d, n, stream), cuStreamSynchronize(stream); break;
                case 4: cuMemcpyDtoHAsync(pin, d, n, stream), cuStreamSynchronize(stream); break;
                case 5: staged_out(page, d, n); break;
                }
                double gbs = n / (now() - t) / 1e9;
                if (gbs > best[k])
                    best[k] = gbs;
            }
        printf("copy_bw: %4zu MiB | %6.1f %6.1f %6.1f | %6.1f %6.1f %6.1f\n", n >> 20, best[0], best[1], best[2], best[3],
               best[4], best[5]);
    }
    return 0;
}
