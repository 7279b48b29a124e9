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

int main(int argc, char **argv)
{
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
