/*
 * bench_rt.c — micro-benchmarks of the runtime: parallel_for overhead, the
 * cost of a library call with our primitive cache, with only oneDNN's, and
 * with neither, and a kernel run right after a oneDNN call (OpenMP's
 * spinning team against our pool). Not part of `make test`:
 *
 *   make && cc -O2 -I. -Iinclude bench/bench_rt.c build/libdisc_internal.a -ldnnl -lm -lpthread -o build/bench_rt
 *   build/bench_rt
 *
 * `build/bench_rt mm M N K [THREADS]` times one f32 matmul C = A B (random
 * data, B row-major) three ways, interleaved call by call so that load
 * from elsewhere hits all three alike: disc_rt_matmul on B as it is,
 * disc_rt_matmul with weights_const (B packed once, outside the timing),
 * and oneDNN's dnnl_sgemm. It prints "mm M N K plain packed sgemm", the
 * medians in microseconds; bench/bench_matmul.py reads that line.
 * `bench_rt mm M N K THREADS COPIES` cycles through COPIES distinct B
 * (each packed once), each way a third of the copies apart, so that B
 * comes from memory as in a model run (BERT-base streams 340 MB of
 * weights per run); with one B it sits in cache and favours the ways
 * that read it plain.
 *
 * `bench_rt conv N C O H W K GROUPS STRIDE [RESIDUAL]` times one f32 2-D
 * convolution (pads K/2, bias, relu, constant weights, a residual added
 * when RESIDUAL is 1) and prints "conv ... US", the median in
 * microseconds. Run it under DISC_CONV_LAYOUT=plain and without to compare
 * the plain NCHW path with oneDNN's own layouts (runtime/dnnl.c).
 */
#include "runtime/rt.h"

#include "ir/ir.h"

#include <math.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void nop(int64_t b, int64_t e, void *args)
{
    (void)b, (void)e, (void)args;
}

static void work(int64_t b, int64_t e, void *args)
{
    float *x = args;
    for (int64_t i = b; i < e; i++)
        x[i] = tanhf(x[i] + 0.5f);
}

static double per_call(DiscRt *rt, const DiscMatmul *d, const float *a, const float *b, float *c, int reps)
{
    double t = now();
    for (int i = 0; i < reps; i++) {
        disc_rt_matmul(rt, d, a, b, c);
        disc_rt_reset(rt);
    }
    return (now() - t) / reps * 1e6;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static int bench_mm(int64_t M, int64_t N, int64_t K, int threads, int copies)
{
    DiscRt *rt = disc_rt_new(&(DiscRtOpts){.threads = threads});
    if (!rt || M < 1 || N < 1 || K < 1)
        return 2;
    if (copies < 1)
        copies = 1;
    float *a = malloc((size_t)(M * K) * 4), *c = malloc((size_t)(M * N) * 4);
    float **bs = malloc(sizeof *bs * (size_t)copies);
    for (int64_t i = 0; i < M * K; i++)
        a[i] = (float)rand() / RAND_MAX - 0.5f;
    for (int j = 0; j < copies; j++) {
        bs[j] = malloc((size_t)(K * N) * 4);
        for (int64_t i = 0; i < K * N; i++)
            bs[j][i] = (float)rand() / RAND_MAX - 0.5f;
    }
    DiscMatmul d = {.dtype = DT_F32, .batch = 1, .m = M, .n = N, .k = K, .a_stride = {0, K, 1},
                    .b_stride = {0, N, 1}, .c_stride = {0, N, 1}};
    DiscMatmul dp = d;
    dp.weights_const = 1;
    /* about 0.3 s per way at 200 GFLOPS, 5 to 200 calls */
    double flop = 2.0 * (double)M * (double)N * (double)K;
    int reps = (int)fmin(200, fmax(5, 0.3 * 200e9 / flop));
    double *t = malloc(sizeof *t * 3 * (size_t)reps);
    for (int i = -2 * copies; i < reps; i++) { /* two warm-up rounds: primitives made, B packed */
        /* each way on another copy, so that none finds B in cache from the way before */
        int64_t at = i + 2 * copies;
        const float *b = bs[at % copies], *b1 = bs[(at + copies / 3) % copies], *b2 = bs[(at + 2 * copies / 3) % copies];
        double t0 = now();
        int rc = disc_rt_matmul(rt, &d, a, b, c);
        double t1 = now();
        rc |= disc_rt_matmul(rt, &dp, a, b1, c);
        double t2 = now();
        dnnl_sgemm('N', 'N', M, N, K, 1.0f, a, K, b2, N, 0.0f, c, N);
        double t3 = now();
        disc_rt_reset(rt);
        if (rc != 0) {
            fprintf(stderr, "bench_rt: %s\n", disc_rt_error(rt));
            return 1;
        }
        if (i >= 0) {
            t[i] = t1 - t0;
            t[reps + i] = t2 - t1;
            t[2 * reps + i] = t3 - t2;
        }
    }
    for (int w = 0; w < 3; w++)
        qsort(t + w * reps, (size_t)reps, sizeof *t, cmp_double);
    printf("mm %lld %lld %lld %.1f %.1f %.1f\n", (long long)M, (long long)N, (long long)K, t[reps / 2] * 1e6,
           t[reps + reps / 2] * 1e6, t[2 * reps + reps / 2] * 1e6);
    for (int j = 0; j < copies; j++) {
        disc_rt_weights_forget(bs[j], K * N * 4);
        free(bs[j]);
    }
    free(a), free(bs), free(c), free(t);
    disc_rt_free(rt);
    disc_rt_shutdown();
    return 0;
}

static int bench_conv(char **v, int residual)
{
    DiscRt *rt = disc_rt_new(&(DiscRtOpts){.threads = 0});
    int64_t n = atoll(v[0]), c = atoll(v[1]), o = atoll(v[2]), h = atoll(v[3]), w = atoll(v[4]);
    int64_t k = atoll(v[5]), g = atoll(v[6]), st = atoll(v[7]);
    if (!rt || n < 1 || c < 1 || o < 1 || h < 1 || w < 1 || k < 1 || g < 1 || st < 1 || c % g || o % g)
        return 2;
    int64_t oh = (h + 2 * (k / 2) - k) / st + 1, ow = (w + 2 * (k / 2) - k) / st + 1;
    int64_t nx = n * c * h * w, nw = o * (c / g) * k * k, ny = n * o * oh * ow;
    float *x = malloc((size_t)nx * 4), *wt = malloc((size_t)nw * 4), *b = calloc((size_t)o, 4);
    float *y = malloc((size_t)ny * 4), *r = malloc((size_t)ny * 4);
    for (int64_t i = 0; i < nx; i++)
        x[i] = (float)rand() / RAND_MAX - 0.5f;
    for (int64_t i = 0; i < nw; i++)
        wt[i] = (float)rand() / RAND_MAX - 0.5f;
    for (int64_t i = 0; i < ny; i++)
        r[i] = (float)rand() / RAND_MAX - 0.5f;
    DiscConv d = {.dtype = DT_F32, .nsp = 2, .n = n, .c = c, .o = o, .groups = g, .in = {h, w}, .k = {k, k},
                  .out = {oh, ow}, .stride = {st, st}, .dilation = {1, 1}, .pad_lo = {k / 2, k / 2},
                  .pad_hi = {k / 2, k / 2}, .bias = b, .post = DISC_POST_RELU, .residual = residual ? r : NULL,
                  .weights_const = 1};
    enum { REPS = 300 };
    double t[REPS];
    for (int i = -20; i < REPS; i++) {
        double t0 = now();
        int rc = disc_rt_conv(rt, &d, x, wt, y);
        double t1 = now();
        disc_rt_reset(rt);
        if (rc != 0) {
            fprintf(stderr, "bench_rt: %s\n", disc_rt_error(rt));
            return 1;
        }
        if (i >= 0)
            t[i] = t1 - t0;
    }
    qsort(t, REPS, sizeof *t, cmp_double);
    printf("conv %lld %lld %lld %lld %lld %lld %lld %lld %d %.1f\n", (long long)n, (long long)c, (long long)o,
           (long long)h, (long long)w, (long long)k, (long long)g, (long long)st, residual, t[REPS / 2] * 1e6);
    disc_rt_weights_forget(wt, nw * 4);
    free(x), free(wt), free(b), free(y), free(r);
    disc_rt_free(rt);
    disc_rt_shutdown();
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 10 && !strcmp(argv[1], "conv"))
        return bench_conv(argv + 2, argc > 10 && atoi(argv[10]));
    if (argc >= 5 && !strcmp(argv[1], "mm"))
        return bench_mm(atoll(argv[2]), atoll(argv[3]), atoll(argv[4]), argc > 5 ? atoi(argv[5]) : 0,
                        argc > 6 ? atoi(argv[6]) : 1);
    DiscRt *rt = disc_rt_new(&(DiscRtOpts){.threads = 0}), *one = disc_rt_new(&(DiscRtOpts){.threads = 1});
    printf("threads %d\n", disc_rt_threads(rt));

    int reps = 20000;
    double t = now();
    for (int i = 0; i < reps; i++)
        disc_rt_parallel_for(rt, nop, NULL, 1024, 1);
    printf("parallel_for, empty kernel, n 1024 grain 1: %.2f us/call\n", (now() - t) / reps * 1e6);

    int64_t n = 1 << 18;
    float *x = calloc((size_t)n, sizeof *x);
    for (int pass = 0; pass < 2; pass++) {
        DiscRt *r = pass ? rt : one;
        t = now();
        for (int i = 0; i < 200; i++)
            disc_rt_parallel_for(r, work, x, n, 4096);
        printf("tanh kernel over %lld floats, %d thread(s): %.1f us/call\n", (long long)n, disc_rt_threads(r),
               (now() - t) / 200 * 1e6);
    }

    /* creation cost: small matmuls, where making a primitive is most of a call */
    static const int64_t sizes[][3] = {{1, 64, 64}, {16, 256, 256}, {128, 768, 768}};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        int64_t M = sizes[s][0], N = sizes[s][1], K = sizes[s][2];
        float *a = calloc((size_t)(M * K), 4), *b = calloc((size_t)(K * N), 4), *c = calloc((size_t)(M * N), 4);
        DiscMatmul d = {.dtype = DT_F32, .batch = 1, .m = M, .n = N, .k = K, .a_stride = {0, K, 1},
                        .b_stride = {0, N, 1}, .c_stride = {0, N, 1}, .post = DISC_POST_GELU_ERF};
        int r = M >= 128 ? 200 : 5000;
        per_call(rt, &d, a, b, c, 10);
        double hit = per_call(rt, &d, a, b, c, r);
        int cap = disc_rt_cache_set_capacity(0);
        double dnnl_hit = per_call(rt, &d, a, b, c, r);
        int dcap;
        dnnl_get_primitive_cache_capacity(&dcap);
        dnnl_set_primitive_cache_capacity(0);
        double miss = per_call(rt, &d, a, b, c, M >= 128 ? 20 : 200);
        dnnl_set_primitive_cache_capacity(dcap);
        disc_rt_cache_set_capacity(cap);
        printf("matmul %lldx%lldx%lld + gelu: ours hit %.1f us, oneDNN cache hit %.1f us, no cache %.1f us\n",
               (long long)M, (long long)N, (long long)K, hit, dnnl_hit, miss);
        free(a), free(b), free(c);
    }

    /* a kernel right after a library call: OpenMP's team spins after its
     * parallel region while our worker wants the other core */
    int64_t M = 128, N = 768, K = 768;
    float *a = calloc((size_t)(M * K), 4), *b = calloc((size_t)(K * N), 4), *c = calloc((size_t)(M * N), 4);
    DiscMatmul d = {.dtype = DT_F32, .batch = 1, .m = M, .n = N, .k = K, .a_stride = {0, K, 1},
                    .b_stride = {0, N, 1}, .c_stride = {0, N, 1}};
    double tm = 0, tk = 0, tk_alone = 0;
    for (int i = 0; i < 200; i++) {
        double t0 = now();
        disc_rt_matmul(rt, &d, a, b, c);
        double t1 = now();
        disc_rt_parallel_for(rt, work, x, n, 4096);
        double t2 = now();
        tm += t1 - t0;
        tk += t2 - t1;
        disc_rt_reset(rt);
    }
    for (int i = 0; i < 200; i++) {
        double t0 = now();
        disc_rt_parallel_for(rt, work, x, n, 4096);
        tk_alone += now() - t0;
    }
    printf("matmul 128x768x768 %.1f us; the tanh kernel right after it %.1f us, alone %.1f us\n", tm / 200 * 1e6,
           tk / 200 * 1e6, tk_alone / 200 * 1e6);
    free(a), free(b), free(c), free(x);
    disc_rt_free(rt);
    disc_rt_free(one);
    disc_rt_shutdown();
    return 0;
}
