/*
 * bench_bw.c — achieved memory bandwidth of disc's loop kernels against a
 * plain memcpy of the same bytes, on this machine, in one run.
 *
 *     bench_bw [MB]
 *
 * A fused elementwise chain y = (x + z) * 0.5 + 1 over n floats reads 2n and
 * writes n floats (12n bytes); memcpy(dst, src, 6n) reads 6n and writes 6n
 * bytes, 12n in all: the same traffic. Both use every core (memcpy split
 * over threads like the kernel). Prints GB/s of each and the ratio.
 */
#include <disc.h>

#include <pthread.h>
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

typedef struct Part {
    char *dst;
    const char *src;
    size_t n;
} Part;

static void *copy_part(void *p)
{
    Part *q = p;
    memcpy(q->dst, q->src, q->n);
    return NULL;
}

/* memcpy over `threads` threads, like a parallel kernel. */
static void pcopy(char *dst, const char *src, size_t n, int threads)
{
    pthread_t t[64];
    Part parts[64];
    size_t chunk = (n + (size_t)threads - 1) / (size_t)threads;
    for (int i = 0; i < threads; i++) {
        size_t off = (size_t)i * chunk, len = off < n ? (n - off < chunk ? n - off : chunk) : 0;
        parts[i] = (Part){dst + off, src + off, len};
        if (i)
            pthread_create(&t[i], NULL, copy_part, &parts[i]);
    }
    copy_part(&parts[0]);
    for (int i = 1; i < threads; i++)
        pthread_join(t[i], NULL);
}

static const char model[] =
    "graph @bw(%x: f32[N], %z: f32[N]) {\n"
    "  %h = const dense<[0.5]> : f32[]\n"
    "  %o = const dense<[1.0]> : f32[]\n"
    "  %0 = add(%x, %z) : f32[N]\n"
    "  %1 = mul(%0, %h) : f32[N]\n"
    "  %2 = add(%1, %o) : f32[N]\n"
    "  return %2\n"
    "}\n";

int main(int argc, char **argv)
{
    size_t mb = argc > 1 ? (size_t)atol(argv[1]) : 64;
    size_t n = mb * (1 << 20) / 4;
    int threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    float *x = malloc(n * 4), *z = malloc(n * 4), *y = malloc(n * 4);
    char *a = malloc(6 * n), *b = malloc(6 * n);
    if (!x || !z || !y || !a || !b)
        return 1;
    for (size_t i = 0; i < n; i++)
        x[i] = z[i] = (float)i;
    memset(a, 1, 6 * n);
    memset(b, 2, 6 * n);
    disc_model *m = disc_load_ir(model, sizeof model - 1, "bw.disc");
    disc_compiled *c = m ? disc_compile(m, NULL) : NULL;
    if (!c) {
        fprintf(stderr, "%s\n", disc_last_error());
        return 1;
    }
    disc_tensor in[2] = {{DISC_F32, 1, {(int64_t)n}, x, n * 4, 0}, {DISC_F32, 1, {(int64_t)n}, z, n * 4, 0}};
    disc_tensor out = {DISC_F32, 1, {(int64_t)n}, y, n * 4, 0};
    double best_k = 1e9, best_m = 1e9;
    for (int r = 0; r < 10; r++) {
        double t0 = now();
        if (disc_run(c, in, 2, &out, 1) != DISC_OK) {
            fprintf(stderr, "%s\n", disc_last_error());
            return 1;
        }
        double t1 = now();
        pcopy(b, a, 6 * n, threads);
        double t2 = now();
        if (t1 - t0 < best_k)
            best_k = t1 - t0;
        if (t2 - t1 < best_m)
            best_m = t2 - t1;
    }
    double bytes = 12.0 * (double)n;
    printf("loop kernel (x + z) * 0.5 + 1 over %zu floats: %.2f GB/s; memcpy of the same %.0f MB traffic: %.2f GB/s; "
           "kernel at %.0f%% of memcpy (%d threads, best of 10)\n",
           n, bytes / best_k / 1e9, bytes / 1e6, bytes / best_m / 1e9, 100 * best_m / best_k, threads);
    printf("note: the disc time is a whole disc_run (the host flow too); the kernel writes the caller's buffer\n");
    disc_compiled_free(c);
    disc_model_free(m);
    return 0;
}
