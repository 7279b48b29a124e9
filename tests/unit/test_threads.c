/*
 * test_threads.c — one compiled model run from many threads at once gives,
 * bit for bit, what a single-threaded run gives; several compiled models
 * share the process; a model compiles while another runs.
 *
 * The model is tests/models/bert_encoder (two inputs sharing symbolic
 * dims; matmuls on oneDNN and the skinny kernel, fused kernels on disc's
 * pool, the split and column templates where shapes call for them).
 * References are computed first, one run at a time, for a set of shapes;
 * then THREADS threads each make RUNS runs over the shapes in their own
 * order and compare every output with memcmp. RUNS is 1000 by default
 * (argv[1] overrides it: the ThreadSanitizer build, make tsan, runs fewer).
 * It prints the counts it checked.
 *
 * Denormals: a caller that sets flush-to-zero and denormals-are-zero
 * (MXCSR, x86) after the pool's workers exist gets the same outputs from
 * a 4-thread run as from a 1-thread run, denormals flushed in every chunk;
 * and IEEE results again once it clears them.
 */
#include "disc.h"
#include "tests/unit/check.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BERT DISC_SOURCE_DIR "/tests/models/bert_encoder/model.onnx"
#define MLP DISC_SOURCE_DIR "/tests/models/mlp_norm/model.onnx"

enum { THREADS = 8, NSHAPE = 6 };

static const int64_t shapes[NSHAPE][2] = {{1, 1}, {1, 13}, {2, 8}, {3, 37}, {1, 64}, {4, 5}};
static disc_compiled *bert;
static disc_tensor ref[NSHAPE];
static int runs = 1000;

static void inputs(int s, int64_t *ids, int64_t *mask, disc_tensor in[2])
{
    int64_t b = shapes[s][0], n = shapes[s][1];
    for (int64_t i = 0; i < b * n; i++) {
        ids[i] = (i * 7 + s * 3) % 100;
        mask[i] = (i % n) < n - (i / n) % 2; /* some padding */
    }
    size_t bytes = (size_t)(b * n) * sizeof(int64_t);
    in[0] = (disc_tensor){DISC_I64, 2, {b, n}, ids, bytes, 0};
    in[1] = (disc_tensor){DISC_I64, 2, {b, n}, mask, bytes, 0};
}

static bool same(const disc_tensor *a, const disc_tensor *b)
{
    return a->dtype == b->dtype && a->rank == b->rank &&
           !memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->rank) && a->nbytes == b->nbytes &&
           !memcmp(a->data, b->data, a->nbytes);
}

static void *worker(void *arg)
{
    long t = (long)arg, bad = 0;
    int64_t ids[4 * 64], mask[4 * 64];
    for (int r = 0; r < runs; r++) {
        int s = (int)((t * 5 + r * (t + 1)) % NSHAPE);
        disc_tensor in[2], out = {0};
        inputs(s, ids, mask, in);
        if (disc_run(bert, in, 2, &out, 1) != DISC_OK || !same(&out, &ref[s]))
            bad++;
        disc_tensor_free(&out);
    }
    return (void *)bad;
}

/* A second model compiled, run and freed while the threads run the first. */
static void *other(void *arg)
{
    long bad = 0;
    for (int k = 0; k < 3; k++) {
        disc_model *m = disc_load(MLP);
        disc_compiled *c = m ? disc_compile(m, NULL) : NULL;
        float x[5 * 8] = {0};
        disc_tensor in = {DISC_F32, 2, {5, 8}, x, sizeof x, 0}, out = {0};
        bad += !c || disc_run(c, &in, 1, &out, 1) != DISC_OK || out.shape[0] != 5;
        disc_tensor_free(&out);
        disc_compiled_free(c);
        disc_model_free(m);
    }
    (void)arg;
    return (void *)bad;
}

#if defined(__x86_64__) || defined(__i386__)
enum { DN = 1 << 18, MXCSR_FTZ_DAZ = 0x8040 };

static const char denormal_ir[] =
    "graph @t(%x: f32[N]) {\n"
    "  %h = const dense<0.5> : f32[]\n"
    "  %y = mul(%x, %h) : f32[N]\n"
    "  %b = const dense<1e30> : f32[]\n"
    "  %z = mul(%x, %b) : f32[N]\n"
    "  return %y, %z\n"
    "}\n";

/* Runs c on x; the outputs in out[2] (to be freed); false on an error. */
static bool run_dn(disc_compiled *c, float *x, disc_tensor out[2])
{
    disc_tensor in = {DISC_F32, 1, {DN}, x, DN * sizeof(float), 0};
    out[0] = out[1] = (disc_tensor){0};
    bool ok = disc_run(c, &in, 1, out, 2) == DISC_OK;
    CHECK_MSG(ok, "denormal run: %s", disc_last_error());
    return ok;
}

static void denormals(void)
{
    disc_model *m = disc_load_ir(denormal_ir, sizeof denormal_ir - 1, "denormal");
    CHECK_MSG(m != NULL, "%s", disc_last_error());
    disc_options o = disc_default_options();
    o.threads = 1;
    disc_compiled *c1 = m ? disc_compile(m, &o) : NULL;
    o.threads = 4;
    disc_compiled *c4 = m ? disc_compile(m, &o) : NULL;
    CHECK_MSG(c1 && c4, "%s", disc_last_error());
    float *x = malloc(DN * sizeof *x);
    if (!c1 || !c4 || !x)
        goto out;
    for (int i = 0; i < DN; i++) /* normals whose halves are denormal, and denormals */
        x[i] = i % 2 ? 1.5e-38f * (float)(1 + i % 5) : 1e-40f * (float)(1 + i % 7);
    disc_tensor ieee[2], r1[2], r4[2], again[2];
    if (!run_dn(c4, x, ieee)) /* the pool's workers start under IEEE control */
        goto out;
    unsigned csr = __builtin_ia32_stmxcsr();
    __builtin_ia32_ldmxcsr(csr | MXCSR_FTZ_DAZ);
    bool ok1 = run_dn(c1, x, r1), ok4 = run_dn(c4, x, r4), good = false;
    __builtin_ia32_ldmxcsr(csr);
    if (ok1 && ok4) {
        long flushed = 0;
        for (int i = 0; i < DN; i++)
            flushed += ((float *)r1[0].data)[i] == 0 && ((float *)ieee[0].data)[i] != 0;
        CHECK_MSG(flushed > DN / 2, "flush-to-zero set: only %ld of %d denormal results flushed", flushed, DN);
        good = flushed > DN / 2 && same(&r1[0], &r4[0]) && same(&r1[1], &r4[1]);
        CHECK_MSG(same(&r1[0], &r4[0]) && same(&r1[1], &r4[1]),
                  "flush-to-zero set: a 4-thread run differs from a 1-thread run");
    }
    if (run_dn(c4, x, again)) {
        good &= same(&again[0], &ieee[0]) && same(&again[1], &ieee[1]);
        CHECK_MSG(same(&again[0], &ieee[0]) && same(&again[1], &ieee[1]),
                  "flush-to-zero cleared: a 4-thread run differs from the first IEEE one");
        disc_tensor_free(&again[0]);
        disc_tensor_free(&again[1]);
    }
    if (good)
        printf("denormals: flush-to-zero set after the pool started: 1 and 4 threads identical over %d elements\n", DN);
    for (int k = 0; k < 2; k++) {
        disc_tensor_free(&ieee[k]);
        disc_tensor_free(&r1[k]);
        disc_tensor_free(&r4[k]);
    }
out:
    free(x);
    disc_compiled_free(c1);
    disc_compiled_free(c4);
    disc_model_free(m);
}
#else
static void denormals(void)
{
    printf("denormals: not checked (the test sets x86's MXCSR)\n");
}
#endif

int main(int argc, char **argv)
{
    denormals();
    if (argc > 1)
        runs = atoi(argv[1]);
    disc_model *m = disc_load(BERT);
    CHECK_MSG(m != NULL, "%s", disc_last_error());
    if (!m)
        return check_done();
    bert = disc_compile(m, NULL);
    CHECK_MSG(bert != NULL, "%s", disc_last_error());
    if (!bert) {
        disc_model_free(m);
        return check_done();
    }
    int64_t ids[4 * 64], mask[4 * 64];
    for (int s = 0; s < NSHAPE; s++) {
        disc_tensor in[2];
        inputs(s, ids, mask, in);
        CHECK_MSG(disc_run(bert, in, 2, &ref[s], 1) == DISC_OK, "reference %d: %s", s, disc_last_error());
    }
    pthread_t t[THREADS + 1];
    for (long i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    pthread_create(&t[THREADS], NULL, other, NULL);
    long bad = 0, bad_other = 0;
    for (int i = 0; i <= THREADS; i++) {
        void *r;
        pthread_join(t[i], &r);
        if (i < THREADS)
            bad += (long)r;
        else
            bad_other = (long)r;
    }
    CHECK_MSG(bad == 0, "%ld of %d concurrent runs differ from the single-threaded ones", bad, THREADS * runs);
    CHECK_MSG(bad_other == 0, "a model compiled and run beside them failed %ld times", bad_other);
    printf("%d threads x %d runs over %d shapes: every output identical to the single-threaded run; "
           "a second model compiled and ran 3 times beside them\n", THREADS, runs, NSHAPE);
    for (int s = 0; s < NSHAPE; s++)
        disc_tensor_free(&ref[s]);
    disc_compiled_free(bert);
    disc_model_free(m);
    return check_done();
}
