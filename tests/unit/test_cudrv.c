/*
 * test_cudrv.c — the CUDA driver layer (runtime/cudrv.c).
 *
 *   test_cudrv [--module FILE KERNEL...]
 *                       without a driver (this machine): one error naming
 *                       libcuda.so.1, from every entry; with a real driver
 *                       (a lent GPU: tests/gpu/run_on_device.sh), device
 *                       0's memory, copies and the allocator's cache, and
 *                       FILE (a CUBIN or PTX that dcc made) loaded with
 *                       each KERNEL found in it
 *   test_cudrv --fake   against tests/unit/fake_cuda.c as libcuda.so.1
 *                       (LD_LIBRARY_PATH): the entry points through
 *                       cuGetProcAddress, launches with their parameters,
 *                       dynamic shared memory past 48 KiB, the caching
 *                       allocator, DISC_PROFILE's events, and the
 *                       messages of failing calls
 */
#include "check.h"
#include "runtime/rt.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static DiscRt *rt_new(void)
{
    DiscRtOpts o = {.threads = 1};
    return disc_rt_new(&o);
}

static bool has(const DiscRt *rt, const char *part)
{
    const char *e = disc_rt_error(rt);
    return e && strstr(e, part);
}

/* The error of rt, then a fresh start. */
static void show(DiscRt *rt)
{
    printf("  error: %s\n", disc_rt_error(rt) ? disc_rt_error(rt) : "(none)");
    disc_rt_reset(rt);
}

/* Memory on g: the allocator's cache, a round trip, a fill. */
static void memory(DiscRt *rt, DiscGpu *g)
{
    DiscGpuStats s0, s;
    disc_gpu_stats(g, &s0);
    DiscDevPtr a = disc_gpu_alloc(rt, g, 4000);
    CHECK(a != 0);
    disc_gpu_release(g, a);
    DiscDevPtr b = disc_gpu_alloc(rt, g, 4096); /* the same class: the same buffer */
    CHECK(b == a);
    DiscDevPtr c = disc_gpu_alloc(rt, g, 3 << 20); /* another class */
    CHECK(c != 0 && c != b);
    disc_gpu_stats(g, &s);
    CHECK(s.driver_allocs - s0.driver_allocs == 2);
    CHECK(s.reused - s0.reused == 1);
    CHECK(s.held - s0.held == 4096 + (4 << 20));

    enum { N = 1000 };
    float in[N], out[N];
    for (int i = 0; i < N; i++)
        in[i] = (float)i * 0.5f;
    CHECK(disc_gpu_copy_in(rt, g, b, in, sizeof in) == 0);
    CHECK(disc_gpu_copy(rt, g, c, b, sizeof in) == 0);
    memset(out, 0, sizeof out);
    CHECK(disc_gpu_copy_out(rt, g, out, c, sizeof out) == 0);
    CHECK(disc_gpu_sync(rt, g) == 0);
    CHECK(!memcmp(in, out, sizeof in));
    CHECK(disc_gpu_fill(rt, g, c, 0, sizeof in) == 0);
    CHECK(disc_gpu_copy_out(rt, g, out, c, sizeof out) == 0);
    CHECK(disc_gpu_sync(rt, g) == 0);
    CHECK(out[0] == 0 && out[N - 1] == 0);
    disc_gpu_release(g, b);
    disc_gpu_release(g, c);
    disc_gpu_trim(g);
    disc_gpu_stats(g, &s);
    CHECK(s.held == s0.held);
    CHECK(!disc_rt_error(rt));
}

/* FILE's module on g, and each kernel of names in it. */
static void module(DiscRt *rt, DiscGpu *g, const char *file, char **names, int n)
{
    FILE *f = fopen(file, "rb");
    CHECK_MSG(f != NULL, "cannot open %s", file);
    if (!f)
        return;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    rewind(f);
    char *image = calloc((size_t)size + 1, 1); /* PTX ends with a NUL */
    CHECK(image && fread(image, 1, (size_t)size, f) == (size_t)size);
    fclose(f);
    DiscGpuModule *m = image ? disc_gpu_module_load(rt, g, image) : NULL;
    CHECK_MSG(m != NULL, "%s: %s", file, disc_rt_error(rt));
    for (int i = 0; m && i < n; i++) {
        DiscGpuFn *fn = disc_gpu_function(rt, g, m, names[i]);
        CHECK_MSG(fn != NULL, "%s: %s", names[i], disc_rt_error(rt));
        printf("%s: kernel %s %s\n", file, names[i], fn ? "found" : "missing");
        disc_gpu_function_free(fn);
    }
    disc_gpu_module_unload(g, m);
    free(image);
}

static void no_driver(const char *file, char **names, int n)
{
    char why[600];
    if (disc_gpu_driver_version(why, sizeof why) != 0) {
        DiscRt *rt = rt_new();
        DiscGpu *g = disc_gpu_open(rt, 0);
        CHECK_MSG(g != NULL, "%s", disc_rt_error(rt));
        if (g) {
            const DiscGpuInfo *in = disc_gpu_info(g);
            printf("real driver %d: device 0 %s, sm_%d%d, %d SMs\n", in->driver_version, in->name, in->major,
                   in->minor, in->sms);
            memory(rt, g);
            if (file)
                module(rt, g, file, names, n);
            disc_gpu_close(g);
        }
        disc_rt_free(rt);
        return;
    }
    /* no library here; a machine with the library but no GPU fails at cuInit */
    CHECK_MSG(strstr(why, "cannot load libcuda.so.1") || strstr(why, "cuInit: CUDA_ERROR"), "%s", why);
    DiscRt *rt = rt_new();
    CHECK(disc_gpu_open(rt, 0) == NULL);
    char want[640];
    snprintf(want, sizeof want, "cuda: %s", why);
    CHECK(has(rt, want));
    show(rt);
    disc_rt_free(rt);
}

static long calls(void *lib, const char *name)
{
    long (*f)(const char *) = (long (*)(const char *))dlsym(lib, "fake_cuda_calls");
    return f ? f(name) : -1;
}

/* A copy in and out of 3 MiB and a bit: whole, or with DISC_STAGE staged
 * through the pinned buffers a chunk at a time (the driver's copies
 * counted), the bytes the same either way; a failing staged copy named. */
static void staged(DiscRt *rt, DiscGpu *g, void *lib)
{
    size_t n = (3 << 20) + 12345;
    unsigned char *src = malloc(n), *dst = calloc(n, 1);
    DiscDevPtr d = disc_gpu_alloc(rt, g, n);
    CHECK(src && dst && d);
    if (!src || !dst || !d)
        return;
    for (size_t i = 0; i < n; i++)
        src[i] = (unsigned char)(i * 7 + (i >> 12));
    int64_t chunk = disc_env()->stage;
    long want = chunk > 0 && n >= (size_t)chunk ? (long)((n + (size_t)chunk - 1) / (size_t)chunk) : 1;
    long h0 = calls(lib, "cuMemcpyHtoDAsync"), d0 = calls(lib, "cuMemcpyDtoHAsync");
    CHECK(disc_gpu_copy_in(rt, g, d, src, n) == 0);
    CHECK(disc_gpu_copy_out(rt, g, dst, d, n) == 0);
    CHECK(disc_gpu_sync(rt, g) == 0);
    CHECK(!memcmp(src, dst, n));
    CHECK_MSG(calls(lib, "cuMemcpyHtoDAsync") - h0 == want && calls(lib, "cuMemcpyDtoHAsync") - d0 == want,
              "%ld and %ld copies, want %ld (DISC_STAGE chunk %lld)", calls(lib, "cuMemcpyHtoDAsync") - h0,
              calls(lib, "cuMemcpyDtoHAsync") - d0, want, (long long)chunk);
    if (chunk > 0) {
        setenv("FAKE_CUDA_FAIL", "cuEventSynchronize", 1);
        CHECK(disc_gpu_copy_in(rt, g, d, src, n) == -1);
        CHECK(has(rt, "cuEventSynchronize (a staging buffer)"));
        show(rt);
        unsetenv("FAKE_CUDA_FAIL");
    }
    disc_gpu_release(g, d);
    disc_gpu_trim(g);
    free(src);
    free(dst);
}

static void fake(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    CHECK_MSG(lib && dlsym(lib, "fake_cuda_live"), "libcuda.so.1 is not the fake (LD_LIBRARY_PATH?)");
    if (!lib || !dlsym(lib, "fake_cuda_live"))
        return;
    int (*live)(void) = (int (*)(void))dlsym(lib, "fake_cuda_live");
    CHECK(disc_gpu_driver_version(NULL, 0) == 13000);
    DiscRt *rt = rt_new();

    /* devices */
    CHECK(disc_gpu_open(rt, 3) == NULL);
    CHECK(has(rt, "cuda: no device 3: the driver sees 1 (0 to 0)"));
    show(rt);
    setenv("FAKE_CUDA_DEVICES", "0", 1);
    CHECK(disc_gpu_open(rt, 0) == NULL);
    CHECK(has(rt, "the driver sees no GPU"));
    show(rt);
    unsetenv("FAKE_CUDA_DEVICES");
    setenv("FAKE_CUDA_FAIL", "cuStreamCreate", 1);
    CHECK(disc_gpu_open(rt, 0) == NULL);
    CHECK(has(rt, "cuda: cuStreamCreate: CUDA_ERROR_UNKNOWN (unknown error)"));
    CHECK(live() == 0); /* the context retained was released */
    show(rt);
    unsetenv("FAKE_CUDA_FAIL");

    DiscGpu *g = disc_gpu_open(rt, 0);
    CHECK_MSG(g != NULL, "%s", disc_rt_error(rt));
    if (!g)
        return;
    const DiscGpuInfo *in = disc_gpu_info(g);
    CHECK(!strcmp(in->name, "disc fake GPU") && in->major == 9 && in->minor == 0 && in->sms == 132);
    CHECK(in->shmem_max == 227 << 10 && in->driver_version == 13000);
    memory(rt, g);
    staged(rt, g, lib);

    /* out of memory: the cached buffers go back and the call is tried again */
    DiscGpuStats s0, s;
    disc_gpu_stats(g, &s0);
    DiscDevPtr a = disc_gpu_alloc(rt, g, 4 << 20);
    disc_gpu_release(g, a);
    setenv("FAKE_CUDA_OOM_AT", "8000000", 1); /* 4 MiB kept + 6 MiB: refused; 6 MiB alone: not */
    long before = calls(lib, "cuMemAlloc");
    DiscDevPtr b = disc_gpu_alloc(rt, g, 6 << 20);
    CHECK_MSG(b != 0, "%s", disc_rt_error(rt));
    CHECK(calls(lib, "cuMemAlloc") - before == 2);
    disc_gpu_stats(g, &s);
    CHECK(s.held - s0.held == 6 << 20);
    unsetenv("FAKE_CUDA_OOM_AT");
    disc_gpu_release(g, b);
    setenv("FAKE_CUDA_FAIL", "cuMemAlloc", 1);
    CHECK(disc_gpu_alloc(rt, g, 1 << 20) == 0);
    CHECK(has(rt, "cuda: cuMemAlloc(2097152 bytes): CUDA_ERROR_OUT_OF_MEMORY (out of memory)"));
    show(rt);
    unsetenv("FAKE_CUDA_FAIL");
    CHECK(disc_gpu_alloc(rt, g, (size_t)-100) == 0);
    CHECK(has(rt, "is too large"));
    show(rt);

    /* modules and launches */
    CHECK(disc_gpu_module_load(rt, g, "\x7f" "ELF not for this device") == NULL);
    CHECK(has(rt, "cuModuleLoadData (a CUBIN for sm_90, or PTX, expected): CUDA_ERROR_INVALID_IMAGE"));
    show(rt);
    DiscGpuModule *m = disc_gpu_module_load(rt, g, "FAKE module");
    CHECK(m != NULL);
    CHECK(disc_gpu_function(rt, g, m, "nope") == NULL);
    CHECK(has(rt, "cuModuleGetFunction(\"nope\"): CUDA_ERROR_NOT_FOUND (named symbol not found)"));
    show(rt);
    DiscGpuFn *fill = disc_gpu_function(rt, g, m, "fill_f32"), *axpy = disc_gpu_function(rt, g, m, "axpy_f32");
    CHECK(fill && axpy);
    enum { N = 1000 };
    DiscDevPtr x = disc_gpu_alloc(rt, g, N * 4), y = disc_gpu_alloc(rt, g, N * 4);
    int64_t n = N;
    float v = 2.5f, alpha = 3;
    void *pf[] = {&x, &n, &v};
    CHECK(disc_gpu_launch(rt, g, fill, 3, 128, 0, pf) == 0); /* 384 threads stride over 1000 */
    v = 1;
    void *py[] = {&y, &n, &v};
    CHECK(disc_gpu_launch(rt, g, fill, 1, 256, 0, py) == 0);
    void *pa[] = {&y, &x, &alpha, &n};
    long sets = calls(lib, "cuFuncSetAttribute");
    CHECK(disc_gpu_launch(rt, g, axpy, 2, 256, 100 << 10, pa) == 0); /* 100 KiB: allowed first */
    CHECK(disc_gpu_launch(rt, g, axpy, 2, 256, 80 << 10, pa) == 0);   /* within what was allowed */
    CHECK(calls(lib, "cuFuncSetAttribute") - sets == 1);
    float out[N];
    CHECK(disc_gpu_copy_out(rt, g, out, y, sizeof out) == 0 && disc_gpu_sync(rt, g) == 0);
    bool right = true;
    for (int i = 0; i < N; i++)
        right &= out[i] == 1 + 2 * 3 * 2.5f;
    CHECK(right);
    CHECK(disc_gpu_launch(rt, g, axpy, 0, 256, 0, pa) == 0); /* an empty grid launches nothing */
    /* DISC_PROFILE (set by main): each launch between events, a
     * millisecond a block on the stand-in's clock, read at the sync */
    long nf = 0, na = 0;
    double tf = disc_rt_prof_get(fill, &nf), ta = disc_rt_prof_get(axpy, &na);
    CHECK_MSG(nf == 2 && tf > 0.0039 && tf < 0.0041, "fill_f32: %ld calls, %g s", nf, tf);
    CHECK_MSG(na == 2 && ta > 0.0039 && ta < 0.0041, "axpy_f32: %ld calls, %g s", na, ta);
    long launches = calls(lib, "cuLaunchKernel");
    CHECK(disc_gpu_launch(rt, g, axpy, 1, 2048, 0, pa) != 0);
    CHECK(has(rt, "launch of axpy_f32: grid 1, block 2048"));
    show(rt);
    CHECK(disc_gpu_launch(rt, g, axpy, 1, 256, 300 << 10, pa) != 0);
    CHECK(has(rt, "shared memory <= 232448"));
    show(rt);
    CHECK(calls(lib, "cuLaunchKernel") == launches); /* refused before the driver */
    setenv("FAKE_CUDA_FAIL", "cuLaunchKernel", 1);
    CHECK(disc_gpu_launch(rt, g, fill, 1, 32, 0, pf) != 0);
    CHECK(has(rt, "cuda: cuLaunchKernel(fill_f32, grid 1, block 32, shared memory 0): CUDA_ERROR_UNKNOWN"));
    show(rt);
    setenv("FAKE_CUDA_FAIL", "cuStreamSynchronize", 1);
    CHECK(disc_gpu_sync(rt, g) != 0);
    CHECK(has(rt, "cuStreamSynchronize (a kernel or copy before it failed)"));
    show(rt);
    setenv("FAKE_CUDA_FAIL", "cuMemcpyHtoDAsync", 1);
    CHECK(disc_gpu_copy_in(rt, g, x, out, 16) != 0);
    CHECK(has(rt, "cuMemcpyHtoDAsync(16 bytes): CUDA_ERROR_UNKNOWN"));
    show(rt);
    unsetenv("FAKE_CUDA_FAIL");
    disc_gpu_function_free(fill);
    disc_gpu_function_free(axpy);
    disc_gpu_module_unload(g, m);
    disc_gpu_release(g, x); /* y is left live: close frees it */
    disc_gpu_close(g);
    CHECK(live() == 0); /* context, stream, module and every buffer given back */
    disc_rt_free(rt);
    dlclose(lib);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--fake")) {
        setenv("DISC_PROFILE", "1", 1); /* read once, at the first call that asks */
        fake();
    }
    else if (argc > 2 && !strcmp(argv[1], "--module"))
        no_driver(argv[2], argv + 3, argc - 3);
    else
        no_driver(NULL, NULL, 0);
    return check_done();
}
