/*
 * test_gpu.c — the GPU kernels' source (codegen/cuda.c) and NVRTC.
 *
 * Without arguments: unit tests of the source (a loop group becomes one
 * kernel whose parameters are its buffers and the symbols it reads; a
 * reduction is a block per row; a dot and a pool a thread per element;
 * what is not supported is a located error) and, where NVRTC loads, that it compiles; the emulator's barriers
 * (a reversal through shared memory is right with its barrier and wrong
 * without; a barrier some threads skip, or threads at different barriers,
 * are reported).
 *
 *   test_gpu --compile sm_80,sm_90 FILE...
 *
 * compiles every kernel of each model (IR text or ONNX) with NVRTC, as one
 * module per model and architecture, to CUBIN and to PTX (label
 * gpu-compile), and holds ptxas's report of every kernel to no register
 * spills and at most 48 KiB of shared memory; exits 77 (ctest: skipped)
 * with the reason where NVRTC cannot be loaded.
 */
#include "codegen/gpu.h"
#include "frontends/model.h"
#include "runtime/rt.h"
#include "tests/unit/check.h"

#include <dlfcn.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The CUDA module of the model at path (or of IR text src). */
static bool module_source_lang(const char *path, const char *src, GpuLang lang, GpuStr *out, int *nk, int *nu,
                               Diag *why, Diag *d)
{
    Graph *g = src ? model_load_text(src, strlen(src), path, d) : model_load(path, NULL, NULL, d);
    if (!g)
        return false;
    CgModule m;
    CgOpts co = {.opt_level = 3, .gpu = lang == GPU_HIP ? "hip" : "cuda"}; /* no CPU layout pass */
    bool ok = cg_run_passes(g, NULL, &co, CG_MEMPLAN, &m, d) && gpu_module_source(&m, lang, out, nk, nu, why, d);
    cg_module_free(&m);
    graph_free(g);
    return ok;
}

static bool module_source(const char *path, const char *src, GpuStr *out, int *nk, int *nu, Diag *why, Diag *d)
{
    return module_source_lang(path, src, GPU_CUDA, out, nk, nu, why, d);
}

/* src's module for the emulator, of exactly one kernel, into s; false
 * (a failed check) where it does not compile so. */
static bool emu_module(const char *path, const char *src, GpuStr *s)
{
    int nk = 0, nu = 0;
    Diag why = {0}, d = {0};
    bool ok = module_source_lang(path, src, GPU_EMU, s, &nk, &nu, &why, &d);
    CHECK_MSG(ok && nk == 1, "%s: %d kernels: %s%s", path, nk, d.msg, why.msg);
    if (ok && nk == 1)
        return true;
    gpu_str_free(s);
    return false;
}

static void test_source(void)
{
    const char *src = "graph @t(%x: f32[B, S], %y: f16[S], %i: f32[1, 1, 4, 4]) {\n"
                      "  %0 = convert(%y) {to = f32} : f32[S]\n"
                      "  %1 = add(%x, %0) : f32[B, S]\n"
                      "  %2 = reduce(%1) {kind = sum, axes = [1], keepdims = 0} : f32[B]\n"
                      "  %3 = dot(%x, %x) {lhs_batch = [], rhs_batch = [], lhs_contract = [1], rhs_contract = [1]}"
                      " : f32[B, B]\n"
                      "  %4 = pool(%i) {kind = max, window = [2, 2], strides = [1, 1], pads = [0, 0, 0, 0], "
                      "dilations = [1, 1], ceil = 0, count_pad = 0} : f32[1, 1, 3, 3]\n"
                      "  return %1, %2, %3, %4\n"
                      "}\n";
    GpuStr s = {0};
    int nk = -1, nu = -1;
    Diag why = {0}, d = {0};
    bool ok = module_source("t.disc", src, &s, &nk, &nu, &why, &d);
    CHECK_MSG(ok, "%s", d.msg);
    if (!ok)
        return;
    /* the convert is a loop kernel (the add goes with the reduction): its
     * buffers, then the one symbol it reads */
    CHECK_MSG(strstr(s.p, "DISC_KERNEL void disc_k0(const uint16_t *__restrict__ b0, float *__restrict__ b1, int64_t s1)"),
              "%s", s.p);
    CHECK_MSG(strstr(s.p, "disc_h2f(DISC_AT(b0,"), "%s", s.p);
    /* the reduction: a warp per row or a block per row, as the host flow
     * says in the last parameter (the row's length is symbolic); a
     * butterfly of shuffles in each warp, the block's warps' partials
     * through shared memory */
    CHECK_MSG(strstr(s.p, "int64_t s0, int64_t s1, int64_t var)") && strstr(s.p, "if ((var & 1) == 0) {") &&
              strstr(s.p, "/* a row per warp */") && strstr(s.p, "/* a row per block */"), "%s", s.p);
    CHECK_MSG(strstr(s.p, "DISC_SHFL_XOR(") && strstr(s.p, "__shared__ float r0[8];") &&
              strstr(s.p, "__syncthreads();"), "%s", s.p);
    /* the dot: a thread per element, a loop over the contracted dim; the
     * pool a loop over its taps */
    CHECK_MSG(strstr(s.p, "/* disc_k2: library group"), "%s", s.p);
    CHECK_MSG(nk == 4 && nu == 0, "%d kernels, %d not supported: %s", nk, nu, why.msg);
    /* what the GPU path does not take is a located error */
    Graph *g = model_load_text(src, strlen(src), "t.disc", &d);
    CHECK(g);
    if (g) {
        Diag e = {0};
        CHECK(!gpu_unsupported(g, g->last->prev, "what", &e));
        CHECK_MSG(e.kind == DIAG_UNSUPPORTED && !strcmp(e.msg, "t.disc:5: error: not supported on cuda yet: what"),
                  "%s", e.msg);
        graph_free(g);
    }
    Diag nd = {0};
    if (gpu_nvrtc_version(&nd)) {
        char *bin = NULL;
        size_t n = 0;
        Diag cd = {0};
        CHECK_MSG(gpu_nvrtc_compile(s.p, "t.cu", "sm_80", true, &bin, &n, NULL, &cd) && n > 0, "%s", cd.msg);
        free(bin);
        /* an architecture NVRTC does not know: the user's error, with NVRTC's list */
        Diag ad = {0};
        bin = NULL;
        CHECK(!gpu_nvrtc_compile(s.p, "t.cu", "sm_10", true, &bin, &n, NULL, &ad) && !bin);
        CHECK_MSG(ad.kind == DIAG_ARG && strstr(ad.msg, "'sm_10' is not an architecture NVRTC") &&
                      strstr(ad.msg, "sm_80"), "%s", ad.msg);
    } else {
        printf("NVRTC not here, not compiled: %s\n", nd.msg);
    }
    gpu_str_free(&s);
    Diag hd = {0};
    if (gpu_rtc_version(GPU_HIP, &hd)) { /* HIP: the same kernels after disc_hip.h */
        GpuStr h = {0};
        Diag e = {0};
        CHECK_MSG(module_source_lang("t.disc", src, GPU_HIP, &h, &nk, &nu, &why, &e), "%s", e.msg);
        char *bin = NULL;
        size_t n = 0;
        CHECK_MSG(h.p && gpu_hiprtc_compile(h.p, "t.hip", "gfx90a", &bin, &n, &e) && n > 0, "%s", e.msg);
        free(bin);
        Diag u = {0}; /* a target HIP 5.2 might abort on is refused, not tried */
        CHECK(!gpu_hiprtc_compile(h.p ? h.p : "", "t.hip", "gfx1100", &bin, &n, &u) && u.kind == DIAG_ARG);
        gpu_str_free(&h);
    } else {
        printf("HIPRTC not here, not compiled: %s\n", hd.msg);
    }
}

/* The emulator's threads: a reversal through shared memory needs its
 * barrier (without it the threads that run first read what the others
 * have not written); a barrier that only some threads reach, or threads
 * at different barriers, stop the process with a report. */
static const char emu_src[] =
    "DISC_KERNEL void rev(const float *x, float *y, int sync, int split)\n"
    "{\n"
    "    __shared__ float t[256];\n"
    "    DISC_SH(t, threadIdx.x) = DISC_AT(x, threadIdx.x, 256);\n"
    "    if (split == 1) {\n"
    "        if (threadIdx.x < 128)\n"
    "            __syncthreads();\n"
    "    } else if (split == 2) {\n"
    "        if (threadIdx.x < 128)\n"
    "            __syncthreads();\n"
    "        else\n"
    "            __syncthreads();\n"
    "    } else if (sync) {\n"
    "        __syncthreads();\n"
    "    }\n"
    "    DISC_AT(y, threadIdx.x, 256) = DISC_SH(t, 255 - threadIdx.x);\n"
    "}\n"
    "static void rev_thread(void **a) { rev((const float *)a[0], (float *)a[1], *(int *)a[2], *(int *)a[3]); }\n"
    "void rev_emu(int64_t begin, int64_t end, void *args) { disc_emu_run(begin, end, 1, 256, 0, rev_thread, (void **)args, \"rev\"); }\n";

typedef void EmuFn(int64_t, int64_t, void *);

static int rev_run(EmuFn *fn, int sync, int split, float *y)
{
    static int run; /* other values each run: shared memory keeps the last */
    float x[256];
    run++;
    for (int i = 0; i < 256; i++)
        x[i] = (float)(i + 1000 * run);
    void *args[4] = {x, y, &sync, &split};
    fn(0, 1, args);
    int wrong = 0;
    for (int i = 0; i < 256; i++)
        wrong += y[i] != x[255 - i];
    return wrong;
}

/* split's run in a child: whether it was stopped by abort() with msg. */
static bool rev_aborts(EmuFn *fn, int split, const char *msg)
{
    int fd[2];
    if (pipe(fd))
        return false;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 2);
        float y[256];
        rev_run(fn, 1, split, y);
        _exit(0);
    }
    close(fd[1]);
    char buf[512] = "";
    ssize_t n = read(fd[0], buf, sizeof buf - 1);
    buf[n > 0 ? n : 0] = 0;
    close(fd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    bool ok = WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT && strstr(buf, msg);
    if (!ok)
        fprintf(stderr, "split %d: status %d, stderr: %s\n", split, st, buf);
    return ok;
}

static void test_emu_barriers(void)
{
    Diag d = {0};
    void *lib = gpu_emu_load(emu_src, 32, &d);
    CHECK_MSG(lib, "%s", d.msg);
    if (!lib)
        return;
    EmuFn *fn = (EmuFn *)(uintptr_t)dlsym(lib, "rev_emu");
    CHECK(fn);
    if (fn) {
        float y[256];
        CHECK(rev_run(fn, 1, 0, y) == 0);
        CHECK(rev_run(fn, 0, 0, y) > 0); /* the barrier removed: wrong */
        CHECK(rev_aborts(fn, 1, "ended while this one waits at a barrier"));
        CHECK(rev_aborts(fn, 2, "wait at different barriers"));
    }
    dlclose(lib);
}

/* The emulator's shuffles: a butterfly sum over each warp (every lane
 * ends with its warp's sum) at warps of 32 and 64 lanes; a shuffle some
 * lanes skip, or lanes at different shuffles, are reported; dynamic
 * shared memory is checked against the launch's size. */
static const char shfl_src[] =
    "DISC_KERNEL void bfly(const float *x, float *y, int mode)\n"
    "{\n"
    "    float v = DISC_AT(x, threadIdx.x, 256);\n"
    "    if (mode == 3) {\n"
    "        DISC_DSH(float, threadIdx.x) = v;\n"
    "        v = DISC_DSH(float, 255 - threadIdx.x);\n"
    "    }\n"
    "    for (int o = DISC_WARP / 2; o > 0; o >>= 1) {\n"
    "        if (mode == 1 && threadIdx.x % DISC_WARP == 5)\n"
    "            return;\n"
    "        if (mode == 2 && threadIdx.x % DISC_WARP == 5)\n"
    "            v += DISC_SHFL_XOR(v, o);\n"
    "        else\n"
    "            v += DISC_SHFL_XOR(v, o);\n"
    "    }\n"
    "    DISC_AT(y, threadIdx.x, 256) = v;\n"
    "}\n"
    "static void bfly_thread(void **a) { bfly((const float *)a[0], (float *)a[1], *(int *)a[2]); }\n"
    "void bfly_emu(int64_t begin, int64_t end, void *args)\n"
    "{\n"
    "    int mode = *(int *)((void **)args)[2];\n"
    "    disc_emu_run(begin, end, 1, 256, mode == 3 ? 128 * 4 : 0, bfly_thread, (void **)args, \"bfly\");\n"
    "}\n";

/* bfly's run in mode (in a child for a mode that must stop the process):
 * the lanes whose sum is wrong, or -1 if stopped with msg on stderr. */
static int bfly_run(EmuFn *fn, int warp, int mode, const char *msg)
{
    float x[256], y[256];
    for (int i = 0; i < 256; i++)
        x[i] = (float)(i % 7);
    void *args[3] = {x, y, &mode};
    if (!msg) {
        fn(0, 1, args);
        int wrong = 0;
        for (int i = 0; i < 256; i++) {
            float sum = 0;
            for (int l = 0; l < warp; l++)
                sum += x[i / warp * warp + l];
            wrong += y[i] != sum;
        }
        return wrong;
    }
    int fd[2];
    if (pipe(fd))
        return -2;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 2);
        fn(0, 1, args);
        _exit(0);
    }
    close(fd[1]);
    char buf[512] = "";
    ssize_t n = read(fd[0], buf, sizeof buf - 1);
    buf[n > 0 ? n : 0] = 0;
    close(fd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    bool ok = WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT && strstr(buf, msg);
    if (!ok)
        fprintf(stderr, "bfly mode %d: status %d, stderr: %s\n", mode, st, buf);
    return ok ? -1 : -2;
}

static void test_emu_shuffles(void)
{
    for (int warp = 32; warp <= 64; warp *= 2) {
        Diag d = {0};
        void *lib = gpu_emu_load(shfl_src, warp, &d);
        CHECK_MSG(lib, "%s", d.msg);
        if (!lib)
            return;
        EmuFn *fn = (EmuFn *)(uintptr_t)dlsym(lib, "bfly_emu");
        CHECK(fn);
        if (fn) {
            CHECK_MSG(bfly_run(fn, warp, 0, NULL) == 0, "warp %d", warp);
            CHECK(bfly_run(fn, warp, 1, "lanes of the warp ended while this one waits at a shuffle") == -1);
            CHECK(bfly_run(fn, warp, 2, "wait at different shuffles") == -1);
            CHECK(bfly_run(fn, warp, 3, "out of bounds [0, 128)") == -1);
        }
        dlclose(lib);
    }
}

/* The row template's run-time variants on the emulator, and that they
 * can fail: a softmax's kernel (its module's source for the emulator)
 * run directly on rows on both sides of each choice, right as generated,
 * and wrong or stopped with a report once mutated: the barrier after the
 * warps' partials removed (a block per row reads partials not written
 * yet), a butterfly that skips its first step (a warp per row misses
 * half its lanes), dynamic shared memory half the size the row needs
 * (out of bounds). */
static const char softmax_src[] = "graph @t(%x: f32[R, N]) {\n"
                                  "  %mx = reduce(%x) {kind = max, axes = [1], keepdims = 1} : f32[R, 1]\n"
                                  "  %sh = sub(%x, %mx) : f32[R, N]\n"
                                  "  %ex = exp(%sh) : f32[R, N]\n"
                                  "  %sm = reduce(%ex) {kind = sum, axes = [1], keepdims = 1} : f32[R, 1]\n"
                                  "  %p = div(%ex, %sm) : f32[R, N]\n"
                                  "  return %p\n"
                                  "}\n";

/* src with the first occurrence of from (after the text at) replaced by
 * to; NULL where there is none. */
static char *mutate(const char *src, const char *at, const char *from, const char *to)
{
    const char *a = at ? strstr(src, at) : src;
    const char *p = a ? strstr(a, from) : NULL;
    if (!p)
        return NULL;
    size_t n = strlen(src) - strlen(from) + strlen(to) + 1;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%.*s%s%s", (int)(p - src), src, to, p + strlen(from));
    return s;
}

/* Runs body (which launches disc_k0 of src, compiled at warps of warp
 * lanes, and returns how many elements are wrong) in a child process:
 * that count (at most 100), or -1 if the process was stopped (a report
 * on stderr, kept in msg). */
typedef int RunBody(EmuFn *fn, const int64_t *shape);

static int emu_child(const char *src, int warp, RunBody *body, const int64_t *shape, char *msg, size_t size)
{
    int fd[2];
    if (pipe(fd))
        return -2;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 2);
        Diag d = {0};
        void *lib = gpu_emu_load(src, warp, &d);
        EmuFn *fn = lib ? (EmuFn *)(uintptr_t)dlsym(lib, "disc_k0_emu") : NULL;
        if (!fn) {
            fprintf(stderr, "cannot run: %s\n", d.msg);
            _exit(3);
        }
        int wrong = body(fn, shape);
        _exit(wrong > 100 ? 100 : wrong);
    }
    close(fd[1]);
    ssize_t got = read(fd[0], msg, size - 1);
    msg[got > 0 ? got : 0] = 0;
    close(fd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFSIGNALED(st) ? -1 : WEXITSTATUS(st);
}

static float *test_input(int64_t n)
{
    float *x = malloc((size_t)n * sizeof *x + 1);
    for (int64_t i = 0; x && i < n; i++)
        x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    return x;
}

/* The softmax kernel on shape[0] rows of shape[1] (shape[2]: the warp's
 * lanes), on the grid the launch computes (a block per row past
 * GPU_WARP_ROW_MAX, and for fewer than GPU_FEW_ROWS rows of at least
 * GPU_BLOCK; else GPU_BLOCK / warp rows a block). */
static int softmax_body(EmuFn *fn, const int64_t *shape)
{
    int64_t rows = shape[0], n = shape[1];
    bool blk = n > GPU_WARP_ROW_MAX || (rows < GPU_FEW_ROWS && n >= GPU_BLOCK);
    int64_t per = blk ? 1 : GPU_BLOCK / 32, grid = (rows + per - 1) / per; /* (the emulator's module's
                                                          launch: warps of 32; at 64 the rows' loop strides) */
    float *x = test_input(rows * n), *y = malloc((size_t)(rows * n) * sizeof *y + 1);
    if (!x || !y)
        return 100;
    int64_t s[2] = {rows, n};
    void *args[3] = {x, y, s};
    fn(0, grid < GPU_GRID_MAX ? grid : GPU_GRID_MAX, args);
    int wrong = 0;
    for (int64_t r = 0; r < rows; r++) {
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < n; j++)
            mx = x[r * n + j] > mx ? x[r * n + j] : mx;
        for (int64_t j = 0; j < n; j++)
            sum += exp(x[r * n + j] - mx);
        for (int64_t j = 0; j < n; j++)
            wrong += fabs(y[r * n + j] - exp(x[r * n + j] - mx) / sum) > 1e-5;
    }
    return wrong;
}

static int softmax_run(const char *src, int warp, int64_t rows, int64_t n, char *msg, size_t size)
{
    int64_t shape[3] = {rows, n, warp};
    return emu_child(src, warp, softmax_body, shape, msg, size);
}

/* The variant (var) the host flow would pass to the kernel of src's first
 * row group (rows) or loop group, the symbols at vals: -1 where the
 * kernel has no var (and then in text whichever of "a row per block" and
 * "a row per warp" comments its source holds), -3 where it cannot be
 * evaluated. False where the graph does not compile. */
static bool group_var(const char *src, bool rows, const int64_t *vals, int nvals, int64_t *var, char *text,
                      size_t size)
{
    Diag d = {0};
    Graph *g = model_load_text(src, strlen(src), "t.disc", &d);
    if (!g)
        return false;
    CgModule m;
    CgOpts co = {.opt_level = 3, .gpu = "cuda"};
    bool found = false;
    if (cg_run_passes(g, NULL, &co, CG_MEMPLAN, &m, &d)) {
        Cg cg = {.g = m.g, .si = m.si, .plan = m.plan, .mp = m.mp, .d = &d};
        for (int i = 0; i < m.plan->n && !found; i++) {
            const Group *grp = &m.plan->groups[i];
            if (rows ? grp->kind != FUSE_STITCH && grp->kind != FUSE_INPUT : grp->kind != FUSE_LOOP)
                continue;
            GpuStr ks = {0};
            GpuKernel gk = {0};
            if ((found = gpu_kernel(&cg, grp, "disc_k0", GPU_CUDA, GPU_GRID_MAX, 32, &ks, &gk))) {
                DimEnv env = {.val = vals, .n = nvals};
                *var = -1;
                if (gk.var && dim_eval(gk.var, &env, var) != DIM_OK)
                    *var = -3;
                const char *c = strstr(ks.p, "/* a row per block */") ? "/* a row per block */"
                              : strstr(ks.p, "/* a row per warp */") ? "/* a row per warp */" : "";
                snprintf(text, size, "%s", c);
            }
            gpu_kernel_free(&gk);
            gpu_str_free(&ks);
        }
        cg_module_free(&m);
    }
    graph_free(g);
    return found;
}

/* The row template's choice at run time (var's bit 0, a block per row;
 * where shape analysis leaves one variant, the kernel has no var and the
 * text says which): LayerNorm-like rows of 768 take a block each below
 * GPU_FEW_ROWS rows (a warp each left most of an H200's SMs idle: 18 us
 * for 512 rows) and a warp each from there on; rows shorter than a block
 * a warp at any count, rows past GPU_WARP_ROW_MAX a block. 0: a warp
 * per row, 1: a block per row. */
static int64_t row_variant(const char *n, int64_t rows)
{
    char src[1024];
    snprintf(src, sizeof src, "graph @t(%%x: f32[R, %s]) {\n"
             "  %%mx = reduce(%%x) {kind = max, axes = [1], keepdims = 1} : f32[R, 1]\n"
             "  %%sh = sub(%%x, %%mx) : f32[R, %s]\n"
             "  %%ex = exp(%%sh) : f32[R, %s]\n"
             "  %%sm = reduce(%%ex) {kind = sum, axes = [1], keepdims = 1} : f32[R, 1]\n"
             "  %%p = div(%%ex, %%sm) : f32[R, %s]\n"
             "  return %%p\n"
             "}\n", n, n, n, n);
    int64_t val[1] = {rows}, v = -2;
    char text[64] = "";
    if (!group_var(src, true, val, 1, &v, text, sizeof text))
        return -2;
    if (v == -1) /* one variant, the one in the text */
        return !strcmp(text, "/* a row per block */") ? 1 : !strcmp(text, "/* a row per warp */") ? 0 : -1;
    return v < 0 ? v : (v & 1);
}

static void test_row_schedule(void)
{
    CHECK_MSG(row_variant("768", 512) == 1, "768 x 512 rows: %lld", (long long)row_variant("768", 512));
    CHECK_MSG(row_variant("768", GPU_FEW_ROWS - 1) == 1, "just below GPU_FEW_ROWS");
    CHECK_MSG(row_variant("768", GPU_FEW_ROWS) == 0, "768 x GPU_FEW_ROWS rows: a warp each");
    CHECK_MSG(row_variant("768", 8192) == 0, "768 x 8192 rows: a warp each");
    CHECK_MSG(row_variant("255", 16) == 0, "rows shorter than a block: a warp each");
    CHECK_MSG(row_variant("256", 16) == 1, "rows of a block's length, few: a block each");
    CHECK_MSG(row_variant("4096", 100000) == 1, "long rows: a block each");
    CHECK_MSG(row_variant("64", 16) == 0, "rows of 64: a warp each (%lld)", (long long)row_variant("64", 16));
}

static void test_row_mutations(void)
{
    GpuStr s = {0};
    if (!emu_module("softmax.disc", softmax_src, &s))
        return;
    char msg[512];
    /* rows of a warp (8 and 4 rows a block at 32 and 64 lanes), of a
     * block kept in shared memory (1 row: long rows, and few rows of at
     * least a block's length), read again */
    static const int64_t shapes[][2] = {{4, 1},    {4, 100},   {4, 1024},   {GPU_FEW_ROWS, 300}, {3, 300},
                                        {1, 1025}, {1, 10240}, {1, 10241},  {5, 252},            {7, 4}};
    for (int warp = 32; warp <= 64; warp *= 2)
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
            int w = softmax_run(s.p, warp, shapes[i][0], shapes[i][1], msg, sizeof msg);
            CHECK_MSG(w == 0, "warp %d, %lld x %lld: %d wrong: %s", warp, (long long)shapes[i][0],
                      (long long)shapes[i][1], w, msg);
        }
    /* the barrier after the warps' partials of the sum (those of the max
     * are alike: every warp's is the row's) */
    char *m = mutate(s.p, "DISC_SH(r1, ", "__syncthreads();\n", "\n");
    CHECK(m);
    if (m)
        CHECK_MSG(softmax_run(m, 32, 1, 2000, msg, sizeof msg) > 0, "%s", msg);
    free(m);
    /* a butterfly that leaves out its first step (the first row per warp
     * in the text is the vector form's: rows of 72 and 136, whose last
     * lanes' 8 positions do not hold the row's largest value, at warps of
     * 32 and 64) */
    m = mutate(s.p, "/* a row per warp */", "DISC_WARP / 2;", "DISC_WARP / 4;");
    CHECK(m);
    if (m) {
        CHECK_MSG(softmax_run(m, 32, 4, 72, msg, sizeof msg) > 0, "%s", msg);
        CHECK_MSG(softmax_run(m, 64, 4, 136, msg, sizeof msg) > 0, "%s", msg);
    }
    free(m);
    /* dynamic shared memory half the rows' size */
    m = mutate(s.p, "disc_emu_run(begin, end, ", ", 256, ", ", 256, 0.5 * ");
    CHECK(m);
    if (m) {
        CHECK_MSG(softmax_run(m, 32, 8, 1024, msg, sizeof msg) == -1 && strstr(msg, "dynamic shared memory["), "%s", msg);
        CHECK_MSG(softmax_run(m, 64, 1, 10240, msg, sizeof msg) == -1 && strstr(msg, "dynamic shared memory["), "%s",
                  msg);
    }
    free(m);
    gpu_str_free(&s);
}

/* The column template's variants, and that they can fail: a column sum
 * on tiles (at most 32 columns: one block) and split into parts (3
 * columns of 1025 to 5000: 2 to 5 parts, a block each), right as
 * generated; wrong once the barrier after the tile's partials is
 * removed, once the parts store their results in place of adding them,
 * and once the output is not filled with the identity first. */
static const char colsum_src[] = "graph @t(%x: f32[L, C]) {\n"
                                 "  %s = reduce(%x) {kind = sum, axes = [0], keepdims = 0} : f32[C]\n"
                                 "  return %s\n"
                                 "}\n";

static int colsum_body(EmuFn *fn, const int64_t *shape)
{
    int64_t l = shape[0], c = shape[1];
    float *x = test_input(l * c), *y = malloc((size_t)c * sizeof *y + 1);
    if (!x || !y)
        return 100;
    for (int64_t j = 0; j < c; j++)
        y[j] = 1e30f; /* what a buffer may hold before the kernel */
    int64_t s[2] = {l, c};
    void *args[3] = {x, y, s};
    int64_t tiles = (c + 31) / 32, parts = (l + 1023) / 1024;
    parts = parts > 64 ? 64 : parts;
    bool split = tiles <= 32 && l > 1024;
    fn(0, split ? tiles * parts : tiles, args);
    int wrong = 0;
    for (int64_t j = 0; j < c; j++) {
        double sum = 0;
        for (int64_t i = 0; i < l; i++)
            sum += x[i * c + j];
        wrong += fabs(y[j] - sum) > 1e-3;
    }
    return wrong;
}

/* A loop kernel's two index widths: a transpose of [B, S, 8] on the
 * emulator with 32-bit indices (what every test shape gets), then with
 * the 64-bit loop forced, both right; wrong once the 32-bit loop's first
 * split is mutated (so the first run did take it); and the host flow's
 * choice: 32 bits up to GPU_INDEX32_MAX elements, 64 beyond. */
static const char transpose_src[] = "graph @t(%x: f32[B, S, 8]) {\n"
                                    "  %0 = transpose(%x) {perm = [1, 0, 2]} : f32[S, B, 8]\n"
                                    "  return %0\n"
                                    "}\n";

static int transpose_body(EmuFn *fn, const int64_t *shape)
{
    int64_t b = shape[0], sq = shape[1], n = b * sq * 8;
    float *x = test_input(n), *y = malloc((size_t)n * sizeof *y + 1);
    if (!x || !y)
        return 100;
    int64_t s[2] = {b, sq};
    void *args[3] = {x, y, s};
    int64_t grid = (n + 4 * GPU_BLOCK - 1) / (4 * GPU_BLOCK); /* four elements a thread (loop_ilp) */
    fn(0, grid < GPU_GRID_MAX ? grid : GPU_GRID_MAX, args);
    int wrong = 0;
    for (int64_t i = 0; i < b; i++)
        for (int64_t j = 0; j < sq; j++)
            for (int64_t c = 0; c < 8; c++)
                wrong += y[(j * b + i) * 8 + c] != x[(i * sq + j) * 8 + c];
    free(x), free(y);
    return wrong;
}

static int64_t loop_variant(int64_t b, int64_t sq)
{
    int64_t val[2] = {b, sq}, v = -2;
    char text[64];
    return group_var(transpose_src, false, val, 2, &v, text, sizeof text) ? v : -2;
}

static void test_loop_index_width(void)
{
    GpuStr s = {0};
    if (!emu_module("transpose.disc", transpose_src, &s))
        return;
    char msg[512];
    int64_t shape[2] = {3, 37};
    int w = emu_child(s.p, 32, transpose_body, shape, msg, sizeof msg);
    CHECK_MSG(w == 0, "32-bit indices: %d wrong: %s", w, msg);
    char *m = mutate(s.p, NULL, "if (var & 1)", "if (0)");
    CHECK(m);
    if (m) {
        w = emu_child(m, 32, transpose_body, shape, msg, sizeof msg);
        CHECK_MSG(w == 0, "64-bit indices: %d wrong: %s", w, msg);
    }
    free(m);
    m = mutate(s.p, "32-bit indices", "% 8;", "% 4;");
    CHECK(m);
    if (m)
        CHECK_MSG(emu_child(m, 32, transpose_body, shape, msg, sizeof msg) > 0, "a broken 32-bit loop not taken");
    free(m);
    gpu_str_free(&s);
    CHECK_MSG(loop_variant(3, 37) == 1, "small: %lld", (long long)loop_variant(3, 37));
    CHECK(loop_variant(1, GPU_INDEX32_MAX / 8) == 1);
    CHECK(loop_variant(1, GPU_INDEX32_MAX / 8 + 1) == 0);
    CHECK(loop_variant(1 << 20, 1 << 20) == 0);
}

static void test_col_mutations(void)
{
    GpuStr s = {0};
    if (!emu_module("colsum.disc", colsum_src, &s))
        return;
    CHECK_MSG(strstr(s.p, "/* a tile of 32 columns per block */") && strstr(s.p, "/* a tile's part per block */") &&
              strstr(s.p, "disc_atomic_addf("), "%s", s.p);
    char msg[512];
    static const int64_t shapes[][2] = {{1, 1}, {300, 32}, {1024, 3}, {1025, 3}, {5000, 3}};
    for (int warp = 32; warp <= 64; warp *= 2)
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
            int w = emu_child(s.p, warp, colsum_body, shapes[i], msg, sizeof msg);
            CHECK_MSG(w == 0, "warp %d, %lld x %lld: %d wrong: %s", warp, (long long)shapes[i][0],
                      (long long)shapes[i][1], w, msg);
        }
    static const int64_t tile[2] = {300, 32}, split[2] = {5000, 3};
    char *m = mutate(s.p, "/* a tile of 32 columns per block */", "__syncthreads();\n", "\n");
    CHECK(m && emu_child(m, 32, colsum_body, tile, msg, sizeof msg) > 0);
    free(m);
    /* (after the prelude: the kernel's atomic add becomes a store) */
    size_t n = strlen(s.p) + 64;
    m = malloc(n);
    if (m) {
        snprintf(m, n, "#define disc_atomic_addf(p, v) (*(p) = (v))\n%s", s.p);
        CHECK(emu_child(m, 32, colsum_body, split, msg, sizeof msg) > 0);
    }
    free(m);
    m = mutate(s.p, "void disc_k0_emu", "if (begin == 0 && (var & 1))", "if (0)");
    CHECK(m && emu_child(m, 32, colsum_body, split, msg, sizeof msg) > 0);
    free(m);
    gpu_str_free(&s);
}

/* The vectorised loop and its guard: an exp over N elements runs as
 * vectors where N % 4 == 0 and the buffers are aligned (16 bytes), as
 * scalars where not (the input one element off its alignment, or 7
 * elements); wrong or stopped with a report once mutated: the vector
 * loop starting at the second vector (the vectors do run), the alignment
 * test removed (a misaligned vector), the divisibility test removed (the
 * last N % 4 elements left out). shape: N, the input's offset in
 * elements. */
static const char exp_src[] = "graph @t(%x: f32[N]) {\n"
                              "  %y = exp(%x) : f32[N]\n"
                              "  return %y\n"
                              "}\n";

static int exp_body(EmuFn *fn, const int64_t *shape)
{
    int64_t n = shape[0];
    float *x = test_input(n + 4), *y = malloc((size_t)n * sizeof *y + 16);
    if (!x || !y)
        return 100;
    int64_t s[1] = {n};
    void *args[3] = {x + shape[1], y, s};
    fn(0, 1, args);
    int wrong = 0;
    for (int64_t i = 0; i < n; i++)
        wrong += fabs(y[i] - exp(x[shape[1] + i])) > 1e-5 * exp(x[shape[1] + i]);
    return wrong;
}

static void test_vec_mutations(void)
{
    GpuStr s = {0};
    if (!emu_module("exp.disc", exp_src, &s))
        return;
    char msg[512];
    static const int64_t aligned[2] = {1024, 0}, off[2] = {1024, 1}, seven[2] = {7, 0};
    CHECK_MSG(emu_child(s.p, 32, exp_body, aligned, msg, sizeof msg) == 0, "%s", msg);
    CHECK_MSG(emu_child(s.p, 32, exp_body, off, msg, sizeof msg) == 0, "%s", msg);
    CHECK_MSG(emu_child(s.p, 32, exp_body, seven, msg, sizeof msg) == 0, "%s", msg);
    char *m = mutate(s.p, "/* four elements a thread */", "DISC_TID;", "DISC_TID + 1;");
    CHECK(m && emu_child(m, 32, exp_body, aligned, msg, sizeof msg) > 0);
    free(m);
    m = mutate(s.p, "DISC_KERNEL", "((unsigned long long)b0 & 15) == 0 && ", "");
    CHECK(m && emu_child(m, 32, exp_body, off, msg, sizeof msg) == -1 && strstr(msg, "misaligned"));
    free(m);
    m = mutate(s.p, "DISC_KERNEL", "s0 % 4 == 0 && ", "");
    CHECK(m && emu_child(m, 32, exp_body, seven, msg, sizeof msg) > 0);
    free(m);
    gpu_str_free(&s);
}

/* The GEMM template: a matmul's kernel on sizes on both sides of the
 * 64 x 64 tile and the 16-step (one tile: a grid of 1), right as
 * generated; wrong once the barrier before the tiles are read is
 * removed, or the one before they are written again, and stopped with a
 * report when a tile's shared array is half its size. shape: M, K, N. */
static const char mm_src[] = "graph @t(%a: f32[M, K], %b: f32[K, N]) {\n"
                             "  %c = dot(%a, %b) {lhs_batch = [], rhs_batch = [], lhs_contract = [1], "
                             "rhs_contract = [0]} : f32[M, N]\n"
                             "  return %c\n"
                             "}\n";

static int mm_body(EmuFn *fn, const int64_t *shape)
{
    int64_t m = shape[0], kk = shape[1], n = shape[2];
    float *a = test_input(m * kk), *b = test_input(kk * n + 5) + 5, *c = malloc((size_t)(m * n) * sizeof *c + 1);
    if (!a || !b || !c)
        return 100;
    int64_t s[3] = {m, kk, n};
    void *args[4] = {a, b, c, s};
    fn(0, 1, args);
    int wrong = 0;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            float sum = 0;
            for (int64_t l = 0; l < kk; l++)
                sum += a[i * kk + l] * b[l * n + j];
            wrong += fabsf(c[i * n + j] - sum) > 1e-5f * (1 + fabsf(sum));
        }
    return wrong;
}

static void test_gemm_mutations(void)
{
    GpuStr s = {0};
    if (!emu_module("mm.disc", mm_src, &s))
        return;
    CHECK_MSG(strstr(s.p, "/* a tile of 64 x 64 results */"), "%s", s.p);
    char msg[512];
    static const int64_t shapes[][3] = {{1, 1, 1}, {15, 16, 17}, {64, 17, 63}, {33, 40, 64}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        int w = emu_child(s.p, 32, mm_body, shapes[i], msg, sizeof msg);
        CHECK_MSG(w == 0, "%lld x %lld x %lld: %d wrong: %s", (long long)shapes[i][0], (long long)shapes[i][1],
                  (long long)shapes[i][2], w, msg);
    }
    static const int64_t big[3] = {33, 40, 64};
    char *m = mutate(s.p, "DISC_SH(tb, ", "__syncthreads();\n", "\n");
    CHECK(m && emu_child(m, 32, mm_body, big, msg, sizeof msg) > 0);
    free(m);
    m = mutate(s.p, "DISC_KERNEL", "__syncthreads(); /* every thread has read the tiles", "/* (removed)");
    CHECK(m && emu_child(m, 32, mm_body, big, msg, sizeof msg) > 0);
    free(m);
    m = mutate(s.p, "DISC_KERNEL", "__shared__ float ta[1088];", "__shared__ float ta[544];");
    CHECK(m && emu_child(m, 32, mm_body, big, msg, sizeof msg) == -1 && strstr(msg, "ta["));
    free(m);
    gpu_str_free(&s);
}

/* The cache of compiled modules: a module compiled once is read back the
 * second time (the same bytes), a module for another target or of other
 * source is compiled again, and a cache file that was damaged is ignored
 * and replaced. In a directory of its own under /tmp. */
static void test_module_cache(void)
{
    Diag nd = {0};
    if (!gpu_nvrtc_version(&nd)) {
        printf("NVRTC not here, the cache of compiled modules not tried: %s\n", nd.msg);
        return;
    }
    char dir[] = "/tmp/disc-gpu-cache-XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK_MSG(false, "%s", "cannot make a directory in /tmp");
        return;
    }
    CgOpts o = {.cache_dir = dir};
    const char *src = "#include \"disc_cuda.h\"\n"
                      "DISC_KERNEL void k(float *y) { y[threadIdx.x] = 1.0f; }\n";
    char *a = NULL, *b = NULL, *c = NULL;
    size_t na = 0, nb = 0, nc = 0;
    GpuCacheInfo ia, ib, ic;
    Diag d = {0};
    CHECK_MSG(gpu_rtc_compile_cached(&o, GPU_CUDA, src, "k.cu", "sm_80", true, &a, &na, &ia, &d), "%s", d.msg);
    CHECK_MSG(!ia.hit && ia.stored && ia.seconds > 0, "%s", ia.note);
    CHECK_MSG(gpu_rtc_compile_cached(&o, GPU_CUDA, src, "k.cu", "sm_80", true, &b, &nb, &ib, &d), "%s", d.msg);
    CHECK(ib.hit && nb == na && a && b && !memcmp(a, b, na) && !strcmp(ia.file, ib.file));
    free(b);
    CHECK_MSG(gpu_rtc_compile_cached(&o, GPU_CUDA, src, "k.cu", "sm_90", true, &c, &nc, &ic, &d), "%s", d.msg);
    CHECK(!ic.hit && strcmp(ic.file, ia.file));
    free(c);
    CHECK_MSG(gpu_rtc_compile_cached(&o, GPU_CUDA, src, "k.cu", "sm_80", false, &c, &nc, &ic, &d), "%s", d.msg);
    CHECK(!ic.hit && strcmp(ic.file, ia.file) && nc > 0 && c && strstr(c, ".visible .entry k"));
    free(c);
    /* a byte of the file flipped: ignored, compiled again and replaced */
    FILE *f = fopen(ia.file, "r+b");
    CHECK(f);
    if (f) {
        fseek(f, -1, SEEK_END);
        int ch = fgetc(f);
        fseek(f, -1, SEEK_END);
        fputc(ch ^ 0xff, f);
        fclose(f);
    }
    CHECK_MSG(gpu_rtc_compile_cached(&o, GPU_CUDA, src, "k.cu", "sm_80", true, &b, &nb, &ib, &d), "%s", d.msg);
    CHECK_MSG(!ib.hit && ib.stored && strstr(ib.note, "checksum") && nb == na, "%s", ib.note);
    free(b);
    CHECK(gpu_rtc_compile_cached(&o, GPU_CUDA, src, "k.cu", "sm_80", true, &b, &nb, &ib, &d) && ib.hit);
    free(b);
    /* the cache off: compiled, nothing written */
    CgOpts off = {.no_cache = true};
    CHECK(gpu_rtc_compile_cached(&off, GPU_CUDA, src, "k.cu", "sm_80", true, &b, &nb, &ib, &d) && !ib.hit &&
          !ib.stored && !ib.file[0]);
    free(b);
    free(a);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

/* ptxas's report on one module: false (with the kernel named) if a kernel
 * spills registers or takes more static shared memory than a block may
 * (48 KiB); the most registers and shared bytes of any kernel. */
static bool ptxas_ok(const char *file, const char *arch, const char *info, int *maxreg, int *maxsmem)
{
    char fn[64] = "?";
    bool ok = true;
    for (const char *l = info; l && *l;) {
        const char *e = strchr(l, '\n');
        size_t n = e ? (size_t)(e - l) : strlen(l);
        char line[512];
        snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line ? n : sizeof line - 1), l);
        const char *p;
        int a, b;
        if ((p = strstr(line, "Compiling entry function '")))
            sscanf(p + 26, "%63[^']", fn);
        if ((p = strstr(line, "bytes stack frame,")) && sscanf(line, " %d bytes stack frame, %d bytes spill stores", &a,
                                                                &b) == 2 && b > 0) {
            fprintf(stderr, "%s: %s: kernel %s spills (%s)\n", file, arch, fn, line);
            ok = false;
        }
        if ((p = strstr(line, "Used ")) && sscanf(p, "Used %d registers", &a) == 1 && a > *maxreg)
            *maxreg = a;
        if ((p = strstr(line, " bytes smem"))) {
            while (p > line && p[-1] >= '0' && p[-1] <= '9')
                p--;
            a = atoi(p);
            if (a > *maxsmem)
                *maxsmem = a;
            if (a > 48 << 10) {
                fprintf(stderr, "%s: %s: kernel %s takes %d bytes of shared memory\n", file, arch, fn, a);
                ok = false;
            }
        }
        l = e ? e + 1 : NULL;
    }
    return ok;
}

static int compile_files(const char *archs, char **files, int nfiles)
{
    Diag nd = {0};
    GpuLang lang = !strncmp(archs, "gfx", 3) ? GPU_HIP : GPU_CUDA; /* AMD targets: HIP through HIPRTC */
    const char *ver = gpu_rtc_version(lang, &nd);
    if (!ver) {
        printf("SKIP: %s\n", nd.msg);
        return 77;
    }
    int fails = 0;
    for (int i = 0; i < nfiles; i++) {
        GpuStr s = {0};
        int nk = 0, nu = 0;
        Diag why = {0}, d = {0};
        if (!module_source_lang(files[i], NULL, lang, &s, &nk, &nu, &why, &d)) {
            fprintf(stderr, "%s: %s\n", files[i], d.msg);
            fails++;
            continue;
        }
        printf("%s: %d kernels (%d groups not supported on cuda yet%s%s)", files[i], nk, nu, nu ? ", the first: " : "",
               nu ? why.msg : "");
        bool failed = false;
        char list[256];
        snprintf(list, sizeof list, "%s", archs);
        for (char *arch = strtok(list, ","); arch; arch = strtok(NULL, ",")) {
            for (int cubin = 1; cubin >= (lang == GPU_HIP ? 1 : 0); cubin--) {
                char *bin = NULL, *info = NULL;
                size_t n = 0;
                Diag cd = {0};
                int maxreg = 0, maxsmem = 0;
                double t0 = disc_rt_now();
                bool ok = lang == GPU_HIP ? gpu_hiprtc_compile(s.p, files[i], arch, &bin, &n, &cd)
                                          : gpu_nvrtc_compile(s.p, files[i], arch, cubin, &bin, &n, cubin ? &info : NULL, &cd);
                if (!ok) {
                    fprintf(stderr, "\n%s: %s: %s\n", files[i], arch, cd.msg);
                    failed = true;
                } else {
                    printf("; %s %s %zu bytes in %.0f ms", arch, lang == GPU_HIP ? "code object" : cubin ? "cubin" : "ptx",
                           n, 1e3 * (disc_rt_now() - t0));
                    bool good = !cubin || lang == GPU_HIP || ptxas_ok(files[i], arch, info, &maxreg, &maxsmem);
                    failed |= !good;
                    if (cubin && lang == GPU_CUDA)
                        printf(" (at most %d registers, %d bytes shared%s)", maxreg, maxsmem, good ? ", no spills" : "");
                }
                free(bin);
                free(info);
            }
        }
        printf("\n");
        fails += failed;
        gpu_str_free(&s);
    }
    printf("%s %s: %d of %d models compiled\n", lang == GPU_HIP ? "HIPRTC" : "NVRTC", ver, nfiles - fails, nfiles);
    return fails ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "--compile"))
        return compile_files(argv[2], argv + 3, argc - 3);
    test_source();
    test_emu_barriers();
    test_emu_shuffles();
    test_row_mutations();
    test_row_schedule();
    test_loop_index_width();
    test_col_mutations();
    test_vec_mutations();
    test_gemm_mutations();
    test_module_cache();
    return check_done();
}
