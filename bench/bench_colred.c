/*
 * bench_colred.c — column reductions (reduced axes that keep the innermost
 * one) against a row reduction of the same bytes, on this machine.
 *
 *     bench_colred [RUNS]
 *
 * Each model is compiled once and run RUNS times (default 20) with one
 * thread and with every core; prints the best and the median time of a
 * whole disc_run and GB/s against the bytes the kernel must move (the
 * input read once, the output written once). Built against an older
 * libdisc.a (only the public API is used), the same program measures the
 * code before the column template.
 *
 *     cmake --build build --target bench_colred && build/bench_colred
 *
 * On the 2-core AMD EPYC VM it was written on (inputs in its 32 MB L3;
 * best of 30, another job on the machine), before -> after the column
 * template, 1 thread / 2 threads:
 *
 *     sum axes=[0] of f32[4096, 1024]    32 / 16 ms -> 0.35-0.39 / 0.24-0.29 ms
 *     mean axes=[1] of f32[8, 512, 768]  2.5 / 1.2 ms -> 0.21 / 0.08-0.11 ms
 *     x - mean(x, axes=[0]), [4096, 1024] 34 / 17 ms -> 1.6 / 1.1-1.5 ms
 *     (row reference, sum over the last axis: 0.58 / 0.29 ms)
 */
#include <disc.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct Case {
    const char *what;
    const char *ir;
    int rank;
    int64_t shape[3];
    int orank;
    int64_t oshape[3];
} Case;

static const Case cases[] = {
    {"sum axes=[0] of f32[4096, 1024]",
     "graph @c(%x: f32[N, C]) {\n"
     "  %s = reduce(%x) {kind = sum, axes = [0], keepdims = 0} : f32[C]\n"
     "  return %s\n}\n",
     2, {4096, 1024}, 1, {1024}},
    {"mean axes=[1] of f32[8, 512, 768]",
     "graph @c(%x: f32[B, L, D]) {\n"
     "  %m = reduce(%x) {kind = mean, axes = [1], keepdims = 0} : f32[B, D]\n"
     "  return %m\n}\n",
     3, {8, 512, 768}, 2, {8, 768}},
    {"x - mean(x, axes=[0]) of f32[4096, 1024]",
     "graph @c(%x: f32[N, C]) {\n"
     "  %m = reduce(%x) {kind = mean, axes = [0], keepdims = 0} : f32[C]\n"
     "  %d = sub(%x, %m) : f32[N, C]\n"
     "  return %d\n}\n",
     2, {4096, 1024}, 2, {4096, 1024}},
    {"row reference: sum axes=[1] of f32[1024, 4096]",
     "graph @c(%x: f32[N, C]) {\n"
     "  %s = reduce(%x) {kind = sum, axes = [1], keepdims = 0} : f32[N]\n"
     "  return %s\n}\n",
     2, {1024, 4096}, 1, {1024}},
};

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static size_t numel(const int64_t *shape, int rank)
{
    size_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= (size_t)shape[i];
    return n;
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 20;
    if (runs < 1 || runs > 1000)
        runs = 20;
    int cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    double *t = malloc((size_t)runs * sizeof *t);
    if (!t)
        return 1;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const Case *c = &cases[k];
        size_t n = numel(c->shape, c->rank), no = numel(c->oshape, c->orank);
        float *x = malloc(n * 4), *y = malloc(no * 4);
        if (!x || !y)
            return 1;
        for (size_t i = 0; i < n; i++)
            x[i] = (float)(i % 97) / 64;
        disc_tensor in = {DISC_F32, c->rank, {0}, x, n * 4, 0};
        disc_tensor out = {DISC_F32, c->orank, {0}, y, no * 4, 0};
        memcpy(in.shape, c->shape, sizeof c->shape);
        memcpy(out.shape, c->oshape, sizeof c->oshape);
        disc_model *m = disc_load_ir(c->ir, strlen(c->ir), "bench_colred.disc");
        for (int threads = 1; m && threads <= cores; threads = threads == cores ? cores + 1 : cores) {
            disc_options o = disc_default_options();
            o.threads = threads;
            disc_compiled *cc = disc_compile(m, &o);
            if (!cc || disc_run(cc, &in, 1, &out, 1) != DISC_OK) {
                fprintf(stderr, "%s: %s\n", c->what, disc_last_error());
                return 1;
            }
            for (int r = 0; r < runs; r++) {
                double t0 = now();
                disc_run(cc, &in, 1, &out, 1);
                t[r] = now() - t0;
            }
            qsort(t, (size_t)runs, sizeof *t, cmp_double);
            double bytes = 4.0 * (double)(n + no);
            printf("%-48s %d thread%s: best %7.3f ms (%5.1f GB/s), median %7.3f ms (%5.1f GB/s)\n", c->what,
                   threads, threads == 1 ? " " : "s", 1e3 * t[0], bytes / t[0] / 1e9, 1e3 * t[runs / 2],
                   bytes / t[runs / 2] / 1e9);
            disc_compiled_free(cc);
        }
        if (!m)
            fprintf(stderr, "%s: %s\n", c->what, disc_last_error());
        disc_model_free(m);
        free(x);
        free(y);
    }
    free(t);
    return 0;
}
