/*
 * test_cublaslt.c — the cuda backend's matmuls through cuBLASLt
 * (runtime/cublaslt.c, disc_rt_dev_matmul).
 *
 *   test_cublaslt --fake   against tests/unit/fake_cuda.c and
 *                          fake_cublaslt.c (LD_LIBRARY_PATH): disc's
 *                          row-major calls (A and B either way round, a
 *                          batch with an operand broadcast, the bias,
 *                          ReLU, GELU and residual epilogues, an empty
 *                          contraction, vectors, f16, bf16 and f64, memory
 *                          at odd alignments) against a reference computed
 *                          here; the plan cache (one heuristic call per
 *                          distinct call); the errors of failing calls;
 *                          every case again where cuBLASLt has no
 *                          algorithm (FAKE_CUBLASLT_NO_ALGO): on the
 *                          stand-in cuBLAS, the bias and activation left
 *   test_cublaslt          with a real GPU (tests/gpu/run_on_device.sh):
 *                          the same calls on cuBLASLt itself, and on
 *                          cuBLAS (DISC_CUBLAS_FALLBACK=1); without one,
 *                          nothing to test (SKIP)
 */
#include "check.h"
#include "devlib.h"
#include "ir/ir.h"
#include "runtime/rt.h"

#include <dlfcn.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct Case {
    DType dt;
    int64_t batch, m, n, k;
    int at, bt;       /* A as [k][m] (1) or [m][k]; B as [n][k] (1) or [k][n] */
    int abc, bbc;     /* A, B broadcast over the batch (batch stride 0) */
    bool bias, res;
    int post;         /* DISC_POST_NONE, _RELU, _GELU_TANH */
    int skew;         /* bytes every buffer starts past an aligned address */
} Case;

/* (the public runtime archive has no ir.c: the device check links it) */
static size_t esize(DType dt)
{
    return dt == DT_F64 ? 8 : dt == DT_F32 ? 4 : 2;
}

static const char *dname(DType dt)
{
    return dt == DT_F64 ? "f64" : dt == DT_F32 ? "f32" : dt == DT_F16 ? "f16" : "bf16";
}

static double gelu(double x)
{
    return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

static double get(const void *p, DType dt, int64_t i)
{
    if (dt == DT_F64)
        return ((const double *)p)[i];
    if (dt == DT_F32)
        return ((const float *)p)[i];
    uint16_t h = ((const uint16_t *)p)[i];
    if (dt == DT_BF16) {
        uint32_t u = (uint32_t)h << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    int e = h >> 10 & 31, m = h & 1023;
    double v = e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
    return h >> 15 ? -v : v;
}

/* Small multiples of 1/8 in [-2, 2], exact in every dtype. */
static void put(void *p, DType dt, int64_t i, double v)
{
    if (dt == DT_F64) {
        ((double *)p)[i] = v;
    } else if (dt == DT_F32) {
        ((float *)p)[i] = (float)v;
    } else if (dt == DT_BF16) {
        float f = (float)v;
        uint32_t u;
        memcpy(&u, &f, 4);
        ((uint16_t *)p)[i] = (uint16_t)(u >> 16);
    } else {
        ((uint16_t *)p)[i] = devlib_f16(v);
    }
}

/* A device buffer of n elements at `skew` bytes past an aligned address,
 * holding host's. */
static void *upload(DiscRt *rt, DiscGpu *g, const void *hostp, size_t bytes, int skew, DiscDevPtr *base)
{
    *base = disc_gpu_alloc(rt, g, bytes + 256);
    if (!*base)
        return NULL;
    void *d = (void *)(uintptr_t)(*base + (DiscDevPtr)skew);
    if (hostp && disc_gpu_copy_in(rt, g, (DiscDevPtr)(uintptr_t)d, hostp, bytes) != 0)
        return NULL;
    return d;
}

/* Set while cuBLASLt has no algorithm (FAKE_CUBLASLT_NO_ALGO): cuBLAS makes
 * the product and the residual, and the call returns 1 where it leaves a
 * bias or an activation to the caller. */
static bool no_algo;

/* Runs one case on the device and checks it against the reference. */
static void run_case(DiscRt *rt, DiscGpu *g, const Case *c)
{
    size_t es = esize(c->dt);
    int64_t nb = c->batch, m = c->m, n = c->n, k = c->k;
    int64_t na = (c->abc ? 1 : nb) * m * k, nbb = (c->bbc ? 1 : nb) * k * n, nc = nb * m * n;
    void *ha = calloc((size_t)na + 1, es), *hb = calloc((size_t)nbb + 1, es), *hbias = calloc((size_t)n + 1, es);
    void *hres = calloc((size_t)nc + 1, es), *hc = calloc((size_t)nc + 1, es);
    double *want = calloc((size_t)nc + 1, sizeof *want);
    for (int64_t i = 0; i < na; i++)
        put(ha, c->dt, i, (double)((i * 7 + 3) % 33 - 16) / 8);
    for (int64_t i = 0; i < nbb; i++)
        put(hb, c->dt, i, (double)((i * 5 + 1) % 29 - 14) / 8);
    for (int64_t i = 0; i < n; i++)
        put(hbias, c->dt, i, (double)(i % 9 - 4) / 4);
    for (int64_t i = 0; i < nc; i++)
        put(hres, c->dt, i, (double)(i % 13 - 6) / 8);
    int64_t f[DISC_MM_NFIELDS] = {0};
    f[DISC_MM_DTYPE] = c->dt;
    f[DISC_MM_BATCH] = nb;
    f[DISC_MM_M] = m;
    f[DISC_MM_N] = n;
    f[DISC_MM_K] = k;
    f[DISC_MM_A_STRIDE] = nb > 1 && !c->abc ? m * k : 0;
    f[DISC_MM_A_STRIDE + 1] = c->at ? 1 : k;
    f[DISC_MM_A_STRIDE + 2] = c->at ? m : 1;
    f[DISC_MM_B_STRIDE] = nb > 1 && !c->bbc ? k * n : 0;
    f[DISC_MM_B_STRIDE + 1] = c->bt ? 1 : n;
    f[DISC_MM_B_STRIDE + 2] = c->bt ? k : 1;
    f[DISC_MM_C_STRIDE] = nb > 1 ? m * n : 0;
    f[DISC_MM_C_STRIDE + 1] = n;
    f[DISC_MM_C_STRIDE + 2] = 1;
    f[DISC_MM_POST] = c->post;
    for (int64_t bt = 0; bt < nb; bt++)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double acc = 0;
                for (int64_t p = 0; p < k; p++)
                    acc += get(ha, c->dt, bt * f[DISC_MM_A_STRIDE] + i * f[DISC_MM_A_STRIDE + 1] +
                                              p * f[DISC_MM_A_STRIDE + 2]) *
                           get(hb, c->dt, bt * f[DISC_MM_B_STRIDE] + p * f[DISC_MM_B_STRIDE + 1] +
                                              j * f[DISC_MM_B_STRIDE + 2]);
                if (c->bias && !no_algo)
                    acc += get(hbias, c->dt, j);
                if (!no_algo)
                    acc = c->post == DISC_POST_RELU ? (acc > 0 ? acc : 0) : c->post == DISC_POST_GELU_TANH ? gelu(acc) : acc;
                if (c->res)
                    acc += get(hres, c->dt, (bt * m + i) * n + j);
                want[(bt * m + i) * n + j] = acc;
            }
    DiscDevPtr ba, bb, bbias, bres, bc;
    void *da = upload(rt, g, ha, (size_t)na * es, c->skew, &ba), *db = upload(rt, g, hb, (size_t)nbb * es, c->skew, &bb);
    void *dbias = upload(rt, g, hbias, (size_t)n * es, c->skew, &bbias);
    void *dres = upload(rt, g, hres, (size_t)nc * es, c->skew, &bres), *dc = upload(rt, g, NULL, (size_t)nc * es, c->skew, &bc);
    int rc = da && db && dbias && dres && dc
                 ? disc_rt_dev_matmul(rt, f, da, db, c->bias ? dbias : NULL, c->res ? dres : NULL, dc)
                 : -1;
    int left = no_algo && (c->bias || c->post != DISC_POST_NONE); /* what the call returns */
    CHECK_MSG(rc < 0 || rc == left, "status %d, want %d", rc, left);
    if (rc == left)
        rc = disc_gpu_copy_out(rt, g, hc, (DiscDevPtr)(uintptr_t)dc, (size_t)nc * es) == 0 && disc_gpu_sync(rt, g) == 0
                 ? 0
                 : -1;
    CHECK_MSG(rc == 0, "%s %lldx%lldx%lldx%lld: %s", dname(c->dt), (long long)nb, (long long)m, (long long)n,
              (long long)k, disc_rt_error(rt) ? disc_rt_error(rt) : "");
    double tol = c->dt == DT_F16 ? 2e-3 : c->dt == DT_BF16 ? 1e-2 : c->dt == DT_F32 ? 1e-5 : 1e-12;
    int bad = 0;
    for (int64_t i = 0; rc == 0 && i < nc; i++) {
        double got = get(hc, c->dt, i);
        if (fabs(got - want[i]) > tol * (1 + fabs(want[i])) && bad++ < 3)
            fprintf(stderr, "  %s %lldx%lldx%lldx%lld at %lld: %g, want %g\n", dname(c->dt), (long long)nb,
                    (long long)m, (long long)n, (long long)k, (long long)i, got, want[i]);
    }
    CHECK(bad == 0);
    disc_gpu_release(g, ba);
    disc_gpu_release(g, bb);
    disc_gpu_release(g, bbias);
    disc_gpu_release(g, bres);
    disc_gpu_release(g, bc);
    disc_rt_reset(rt);
    free(ha), free(hb), free(hbias), free(hres), free(hc), free(want);
}

static const Case cases[] = {
    {DT_F32, 1, 5, 7, 3, 0, 0, 0, 0, false, false, DISC_POST_NONE, 0},
    {DT_F32, 1, 5, 7, 3, 1, 0, 0, 0, false, false, DISC_POST_NONE, 0},  /* A as [k][m] */
    {DT_F32, 1, 5, 7, 3, 0, 1, 0, 0, false, false, DISC_POST_NONE, 0},  /* B as [n][k] */
    {DT_F32, 1, 6, 4, 9, 1, 1, 0, 0, true, false, DISC_POST_RELU, 0},
    {DT_F32, 3, 4, 5, 6, 0, 0, 0, 1, true, false, DISC_POST_GELU_TANH, 0}, /* B broadcast */
    {DT_F32, 3, 4, 5, 6, 0, 1, 1, 0, false, true, DISC_POST_NONE, 0},      /* A broadcast, residual */
    {DT_F32, 2, 3, 4, 5, 1, 0, 0, 0, true, true, DISC_POST_NONE, 4},       /* odd alignment */
    {DT_F32, 1, 1, 9, 8, 0, 0, 0, 0, true, false, DISC_POST_NONE, 0},      /* a row */
    {DT_F32, 1, 9, 1, 8, 0, 1, 0, 0, false, false, DISC_POST_NONE, 0},     /* a column */
    {DT_F32, 2, 4, 3, 0, 0, 0, 0, 0, true, false, DISC_POST_RELU, 0},      /* k = 0 */
    {DT_F32, 1, 33, 65, 17, 0, 0, 0, 0, true, false, DISC_POST_GELU_TANH, 8},
    {DT_F16, 2, 6, 10, 12, 0, 0, 0, 1, true, false, DISC_POST_RELU, 2},
    {DT_BF16, 1, 7, 8, 5, 1, 0, 0, 0, true, false, DISC_POST_NONE, 0},
    {DT_F64, 2, 5, 3, 4, 0, 1, 0, 0, false, true, DISC_POST_NONE, 8},
    /* half rows of 13 (26 bytes apart), 256 rows or more: C made with its
     * rows padded and copied out; B too where its rows are n long */
    {DT_F16, 1, 300, 13, 24, 0, 0, 0, 0, true, false, DISC_POST_NONE, 0},
    {DT_BF16, 1, 260, 13, 20, 1, 1, 0, 0, false, false, DISC_POST_RELU, 2},
    {DT_F16, 1, 300, 13, 24, 0, 0, 0, 0, false, true, DISC_POST_NONE, 0}, /* a residual: not padded */
};
enum { NPADDED = 2, PAD_B = 1 }; /* the cases padded, and of them those with B copied too */

/* The cases, twice (the second time from the plans), and the plan cache
 * and errors through the stand-in's call counts. */
static void fake(DiscRt *rt, DiscGpu *g)
{
    void *lib = dlopen("libcublasLt.so.13", RTLD_NOW | RTLD_NOLOAD);
    long (*calls)(const char *) = lib ? (long (*)(const char *))dlsym(lib, "fake_cublas_calls") : NULL;
    int nc = (int)(sizeof cases / sizeof *cases);
    run_case(rt, g, &cases[0]); /* loads the library */
    if (!lib && (lib = dlopen("libcublasLt.so.13", RTLD_NOW | RTLD_NOLOAD)))
        calls = (long (*)(const char *))dlsym(lib, "fake_cublas_calls");
    CHECK_MSG(calls != NULL, "the stand-in cuBLASLt (fake_cublas_calls) is not the one loaded");
    if (!calls)
        return;
    void *cudalib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    long (*cucalls)(const char *) = cudalib ? (long (*)(const char *))dlsym(cudalib, "fake_cuda_calls") : NULL;
    CHECK_MSG(cucalls != NULL, "the stand-in driver (fake_cuda_calls) is not the one loaded");
    long h0 = calls("cublasLtMatmulAlgoGetHeuristic"), m0 = calls("cublasLtMatmul");
    long c0 = cucalls ? cucalls("cuMemcpy2DAsync") : 0;
    for (int i = 1; i < nc; i++)
        run_case(rt, g, &cases[i]);
    /* the padded cases: C copied out, B copied in where its rows are n long */
    CHECK_MSG(!cucalls || cucalls("cuMemcpy2DAsync") - c0 == NPADDED + PAD_B, "%ld 2D copies",
              cucalls ? cucalls("cuMemcpy2DAsync") - c0 : -1);
    long h1 = calls("cublasLtMatmulAlgoGetHeuristic");
    CHECK(h1 - h0 == nc - 1); /* a plan per case */
    for (int i = 0; i < nc; i++)
        run_case(rt, g, &cases[i]);
    CHECK(calls("cublasLtMatmulAlgoGetHeuristic") == h1); /* every one from its plan */
    CHECK(calls("cublasLtMatmul") - m0 == 2 * nc - 1);
    Case odd = cases[0];
    odd.skew = 4; /* the same call at another alignment: a plan of its own */
    run_case(rt, g, &odd);
    CHECK(calls("cublasLtMatmulAlgoGetHeuristic") == h1 + 1);

    /* a failing call: named, with cuBLASLt's status */
    setenv("FAKE_CUBLAS_FAIL", "cublasLtMatmul", 1);
    int64_t f[DISC_MM_NFIELDS] = {DT_F32, 1, 2, 2, 2, 0, 2, 1, 0, 2, 1, 0, 2, 1, DISC_POST_NONE};
    DiscDevPtr buf = disc_gpu_alloc(rt, g, 64);
    void *p = (void *)(uintptr_t)buf;
    CHECK(disc_rt_dev_matmul(rt, f, p, p, NULL, NULL, p) == -1);
    const char *e = disc_rt_error(rt);
    printf("  error: %s\n", e ? e : "(none)");
    CHECK(e && strstr(e, "cublasLtMatmul (cublasLt 2x2x2 f32)") && strstr(e, "CUBLAS_STATUS_EXECUTION_FAILED"));
    disc_rt_reset(rt);
    unsetenv("FAKE_CUBLAS_FAIL");
    /* an epilogue cuBLASLt does not apply, and an integer dtype: refused, named */
    f[DISC_MM_POST] = DISC_POST_SIGMOID;
    CHECK(disc_rt_dev_matmul(rt, f, p, p, NULL, NULL, p) == -1);
    e = disc_rt_error(rt);
    printf("  error: %s\n", e ? e : "(none)");
    CHECK(e && strstr(e, "f32 with epilogue") && strstr(e, "not one disc hands it"));
    disc_rt_reset(rt);
    f[DISC_MM_POST] = DISC_POST_NONE, f[DISC_MM_DTYPE] = DT_I32;
    CHECK(disc_rt_dev_matmul(rt, f, p, p, NULL, NULL, p) == -1);
    e = disc_rt_error(rt);
    CHECK(e && strstr(e, "an unsupported dtype"));
    disc_rt_reset(rt);
    f[DISC_MM_DTYPE] = DT_F32;
    /* an operand with no unit stride: refused, not run */
    f[DISC_MM_A_STRIDE + 1] = 2, f[DISC_MM_A_STRIDE + 2] = 3;
    CHECK(disc_rt_dev_matmul(rt, f, p, p, NULL, NULL, p) == -1);
    e = disc_rt_error(rt);
    printf("  error: %s\n", e ? e : "(none)");
    CHECK(e && strstr(e, "no unit stride"));
    disc_rt_reset(rt);
    /* past the plan table's 1024 entries: it starts again (after a sync,
     * so DISC_PROFILE's timings keep their names: run under it too) */
    f[DISC_MM_A_STRIDE + 1] = 2, f[DISC_MM_A_STRIDE + 2] = 1;
    long h2 = calls("cublasLtMatmulAlgoGetHeuristic");
    int bad = 0;
    for (int64_t n = 1; n <= 1100; n++) {
        f[DISC_MM_N] = n, f[DISC_MM_K] = 1, f[DISC_MM_M] = 1;
        f[DISC_MM_B_STRIDE + 1] = n, f[DISC_MM_A_STRIDE + 1] = 1, f[DISC_MM_C_STRIDE + 1] = n;
        DiscDevPtr big = disc_gpu_alloc(rt, g, (size_t)n * 4 + 64);
        void *q = (void *)(uintptr_t)big;
        bad += disc_rt_dev_matmul(rt, f, q, q, NULL, NULL, q) != 0;
        disc_rt_reset(rt);
        disc_gpu_release(g, big);
    }
    CHECK(bad == 0);
    CHECK(calls("cublasLtMatmulAlgoGetHeuristic") - h2 == 1100);
    CHECK(disc_gpu_sync(rt, g) == 0);
    disc_gpu_release(g, buf);

    /* cuBLASLt with no algorithm: every case (two rows more, so new plans)
     * on cuBLAS's GEMM, twice, with a plan each */
    setenv("FAKE_CUBLASLT_NO_ALGO", "1", 1);
    no_algo = true;
    long g0 = -1;
    long (*bcalls)(const char *) = NULL;
    for (int rep = 0; rep < 2; rep++)
        for (int i = 0; i < nc; i++) {
            Case cc = cases[i];
            cc.m += 2;
            run_case(rt, g, &cc);
            void *bl = bcalls ? NULL : dlopen("libcublas.so.13", RTLD_NOW | RTLD_NOLOAD);
            if (bl && (bcalls = (long (*)(const char *))dlsym(bl, "fake_cublas_calls")))
                g0 = bcalls("cublasGemmStridedBatchedEx") - 1;
        }
    CHECK_MSG(bcalls && bcalls("cublasGemmStridedBatchedEx") - g0 == 2 * nc, "cuBLAS made %ld of %d products",
              bcalls ? bcalls("cublasGemmStridedBatchedEx") - g0 : -1, 2 * nc);
    CHECK(bcalls && bcalls("cublasCreate_v2") == 1);
    no_algo = false;
    unsetenv("FAKE_CUBLASLT_NO_ALGO");
}

/* With a real device: the cases. */
static void real(DiscRt *rt, DiscGpu *g)
{
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        run_case(rt, g, &cases[i]);
    /* cuBLAS's path, forced (two rows more: new plans) */
    setenv("DISC_CUBLAS_FALLBACK", "1", 1);
    no_algo = true;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        Case cc = cases[i];
        cc.m += 2;
        run_case(rt, g, &cc);
    }
    no_algo = false;
    unsetenv("DISC_CUBLAS_FALLBACK");
}

int main(int argc, char **argv)
{
    return devlib_main(argc, argv, disc_blas_available, fake, real);
}
