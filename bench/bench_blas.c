/*
 * bench_blas.c — one f32 GEMM C = A B through any CBLAS library, for
 * comparing the libraries a user can install against disc's kernels at the
 * shapes the bench models call (issue 18, "GEMM choice"):
 *
 *     cc -O2 bench/bench_blas.c -o build/bench_blas -ldl
 *     build/bench_blas LIB.so M N K
 *
 * LIB.so is loaded with dlopen and its cblas_sgemm called row-major, B as
 * it is (a library packs B inside every call). It prints the best of
 * enough calls for about 3 GFLOP of work: ms and GFLOP/s, CPU time of the
 * process (run one-thread builds: Debian's blis-serial and openblas-serial,
 * MKL with MKL_THREADING_LAYER=SEQUENTIAL). Not part of make test.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef void SgemmFn(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                     const float *b, int ldb, float beta, float *c, int ldc);
enum { ROW_MAJOR = 101, NO_TRANS = 111 };

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: bench_blas LIB.so M N K\n");
        return 2;
    }
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        fprintf(stderr, "bench_blas: %s\n", dlerror());
        return 1;
    }
    SgemmFn *sgemm = (SgemmFn *)dlsym(h, "cblas_sgemm");
    if (!sgemm) {
        fprintf(stderr, "bench_blas: %s has no cblas_sgemm\n", argv[1]);
        return 1;
    }
    int m = atoi(argv[2]), n = atoi(argv[3]), k = atoi(argv[4]);
    if (m <= 0 || n <= 0 || k <= 0) {
        fprintf(stderr, "bench_blas: M, N and K must be positive\n");
        return 2;
    }
    float *a = malloc((size_t)m * k * sizeof *a), *b = malloc((size_t)k * n * sizeof *b);
    float *c = malloc((size_t)m * n * sizeof *c);
    if (!a || !b || !c) {
        fprintf(stderr, "bench_blas: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < (size_t)m * k; i++)
        a[i] = (float)(i % 7) * 0.1f;
    for (size_t i = 0; i < (size_t)k * n; i++)
        b[i] = (float)(i % 5) * 0.1f;
    double flop = 2.0 * m * n * k;
    int reps = flop > 1e9 ? 3 : (int)(3e9 / flop);
    sgemm(ROW_MAJOR, NO_TRANS, NO_TRANS, m, n, k, 1, a, k, b, n, 0, c, n);
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t = cpu_now();
        sgemm(ROW_MAJOR, NO_TRANS, NO_TRANS, m, n, k, 1, a, k, b, n, 0, c, n);
        t = cpu_now() - t;
        if (t < best)
            best = t;
    }
    printf("%s %dx%dx%d %.3f ms %.1f GFLOP/s\n", argv[1], m, n, k, best * 1e3, flop / best * 1e-9);
    free(a);
    free(b);
    free(c);
    return 0;
}
