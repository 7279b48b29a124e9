/*
 * test_api.c — the public C API: load, signature, compile once, run at
 * several shapes from several threads at once, and the errors a caller can
 * make (a bad path, a bad backend, wrong counts, an input shape the model
 * does not accept, an output buffer too small).
 */
#include "disc.h"
#include "tests/unit/check.h"

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODEL DISC_SOURCE_DIR "/tests/models/mlp_norm/model.onnx"

static disc_compiled *compiled;

/* x: f32[B, 8] -> y: f32[B, 4]; runs batch b and returns the sum of y. */
static double run_batch(int64_t b, disc_status *st)
{
    float x[64 * 8];
    for (int i = 0; i < b * 8; i++)
        x[i] = (float)((i * 37) % 17) / 17.0f - 0.5f;
    disc_tensor in = {DISC_F32, 2, {b, 8}, x, (size_t)(b * 8 * 4), 0}, out = {0};
    *st = disc_run(compiled, &in, 1, &out, 1);
    double sum = 0;
    if (*st == DISC_OK) {
        for (int64_t i = 0; i < out.shape[0] * out.shape[1]; i++)
            sum += fabs(((float *)out.data)[i]);
        disc_tensor_free(&out);
    }
    return sum;
}

static double expected[65];

#define TIED DISC_SOURCE_DIR "/tests/models/tied_names/model.onnx"

/* tied_names: a: f32[N, 4] -> relu; b: f32[N, 3] -> neg; x: f32[B, S, 8]
 * + m: f32[B, S] (unsqueezed). Runs the four inputs at the given lengths;
 * true when every output is what the maths says. */
static bool run_tied(disc_compiled *c, int64_t na, int64_t nb, int64_t bx, int64_t sx, int64_t bm, int64_t sm,
                     disc_status *st)
{
    float a[16 * 4], b[16 * 3], x[8 * 8 * 8], mm[8 * 8];
    for (int i = 0; i < 16 * 4; i++)
        a[i] = (float)(i % 5) - 2.0f;
    for (int i = 0; i < 16 * 3; i++)
        b[i] = (float)i;
    for (int i = 0; i < 8 * 8 * 8; i++)
        x[i] = (float)(i % 7);
    for (int i = 0; i < 8 * 8; i++)
        mm[i] = 100.0f * (float)i;
    disc_tensor in[4] = {{DISC_F32, 2, {na, 4}, a, (size_t)(na * 16), 0},
                         {DISC_F32, 2, {nb, 3}, b, (size_t)(nb * 12), 0},
                         {DISC_F32, 3, {bx, sx, 8}, x, (size_t)(bx * sx * 32), 0},
                         {DISC_F32, 2, {bm, sm}, mm, (size_t)(bm * sm * 4), 0}};
    disc_tensor out[3] = {{0}};
    if ((*st = disc_run(c, in, 4, out, 3)) != DISC_OK)
        return false;
    int64_t B = bx > bm ? bx : bm, S = sx > sm ? sx : sm;
    bool ok = out[0].shape[0] == na && out[1].shape[0] == nb && out[2].shape[0] == B && out[2].shape[1] == S;
    for (int i = 0; ok && i < na * 4; i++)
        ok = ((float *)out[0].data)[i] == (a[i] > 0 ? a[i] : 0);
    for (int i = 0; ok && i < nb * 3; i++)
        ok = ((float *)out[1].data)[i] == -b[i];
    for (int64_t i = 0; ok && i < B; i++)
        for (int64_t j = 0; ok && j < S; j++)
            for (int k = 0; ok && k < 8; k++) {
                float xv = x[((i % bx) * sx + j % sx) * 8 + k], mv = mm[(i % bm) * sm + j % sm];
                ok = ((float *)out[2].data)[(i * S + j) * 8 + k] == xv + mv;
            }
    for (int i = 0; i < 3; i++)
        disc_tensor_free(&out[i]);
    return ok;
}

static disc_compiled *tied;

static void *tied_worker(void *arg)
{
    long t = (long)arg;
    disc_status st;
    return (void *)(long)!run_tied(tied, 1 + t, 5 + t, 2, 3 + t, 1, 3 + t, &st);
}

/* ONNX's dim names tie input dims together (N, B, S above): an assumption
 * the compiled code may use, never a reason to refuse inputs that the
 * computation takes (issue 15): those run on the model compiled without
 * the ties, made at the first such run, by one thread of several. */
static void test_tied_names(void)
{
    disc_model *m = disc_load(TIED);
    CHECK_MSG(m != NULL, "%s", disc_last_error());
    if (!m)
        return;
    static const char *const backends[] = {"cpu", "interp"};
    for (int i = 0; i < 2; i++) {
        disc_options o = disc_default_options();
        o.backend = backends[i];
        tied = disc_compile(m, &o);
        CHECK_MSG(tied != NULL, "%s", disc_last_error());
        if (!tied)
            continue;
        disc_status st;
        CHECK_MSG(run_tied(tied, 3, 3, 2, 5, 2, 5, &st), "%s: ties kept: %d %s", backends[i], st, disc_last_error());
        pthread_t t[4];
        for (long k = 0; k < 4; k++)
            pthread_create(&t[k], NULL, tied_worker, (void *)k);
        long bad = 0;
        for (int k = 0; k < 4; k++) {
            void *r;
            pthread_join(t[k], &r);
            bad += (long)r;
        }
        CHECK_MSG(bad == 0, "%s: %ld of 4 threads breaking the ties failed: %s", backends[i], bad,
                  disc_last_error());
        CHECK_MSG(run_tied(tied, 2, 7, 3, 4, 3, 1, &st), "%s: %d %s", backends[i], st, disc_last_error());
        CHECK_MSG(run_tied(tied, 4, 4, 2, 6, 2, 6, &st), "%s: ties kept again: %d %s", backends[i], st,
                  disc_last_error());
        /* what the computation itself refuses: m's S is neither x's nor 1 */
        CHECK(!run_tied(tied, 2, 2, 2, 5, 2, 3, &st) && st == DISC_ERR_SHAPE);
        CHECK_MSG(strstr(disc_last_error(), "S == S_2 or one of them is 1 (5 vs 3)") &&
                      strstr(disc_last_error(), "from input \"m\" dim 1"),
                  "%s: %s", backends[i], disc_last_error());
        disc_compiled_free(tied);
    }
    disc_model_free(m);
}

static void *worker(void *arg)
{
    long t = (long)arg;
    long bad = 0;
    for (int r = 0; r < 50; r++) {
        int64_t b = 1 + (t * 7 + r * 3) % 64;
        disc_status st;
        double s = run_batch(b, &st);
        bad += st != DISC_OK || fabs(s - expected[b]) > 1e-5 * (1 + expected[b]);
    }
    return (void *)bad;
}

/* A requirement that raised an input's bound (shapeval: a reshape taken
 * as static where ceildiv(W, 7) >= 1, so W >= 1): an input below it is
 * refused naming the input, its dim, the bound and the requirement, on the
 * compiled code as on the interpreter; one above it runs. The graph is
 * tests/golden/shape/require_bound.disc's. */
static void test_raised_bound(void)
{
    static const char ir[] =
        "sym W >= 0\n"
        "sym _1 derived\nsym _2 derived\nsym _3 derived\nsym _4 derived\nsym _5 derived\nsym _6 derived\n"
        "graph @g(%x: f32[N, W, 8]) {\n"
        "  %s = shape_of(%x) : i64[3]\n"
        "  %z1 = const dense<[0]> : i64[1]\n"
        "  %i1 = const dense<[1]> : i64[1]\n"
        "  %seven = const dense<[7]> : i64[1]\n"
        "  %e8 = const dense<[8]> : i64[1]\n"
        "  %w = gather(%s, %i1) {axis = 0} : i64[1]\n"
        "  %n = gather(%s, %z1) {axis = 0} : i64[1]\n"
        "  %w6 = add(%w, %seven) : i64[1]\n"
        "  %one = const dense<[1]> : i64[1]\n"
        "  %w7 = sub(%w6, %one) : i64[1]\n"
        "  %c = div(%w7, %seven) : i64[1]\n"
        "  %nw = mul(%n, %w) : i64[1]\n"
        "  %t = concat(%c, %nw, %e8) {axis = 0} : i64[3]\n"
        "  %zs = const dense<[0]> : i64[]\n"
        "  %is0 = cmp(%t, %zs) {dir = eq} : bool[3]\n"
        "  %t2 = select(%is0, %s, %t) : i64[3]\n"
        "  %y = dyn_reshape(%x, %t2) : f32[_1, _2, _3]\n"
        "  return %y\n"
        "}\n";
    disc_model *m = disc_load_ir(ir, sizeof ir - 1, "bound.disc");
    CHECK_MSG(m != NULL, "%s", disc_last_error());
    if (!m)
        return;
    static const char *const backends[] = {"cpu", "interp"};
    for (int i = 0; i < 2; i++) {
        disc_options o = disc_default_options();
        o.backend = backends[i];
        disc_compiled *c = disc_compile(m, &o);
        CHECK_MSG(c != NULL, "%s: %s", backends[i], disc_last_error());
        if (!c)
            continue;
        float x[2 * 7 * 8] = {0};
        disc_tensor in0 = {DISC_F32, 3, {2, 0, 8}, x, 0, 0}, out = {0};
        CHECK(disc_run(c, &in0, 1, &out, 1) == DISC_ERR_SHAPE);
        const char *e = disc_last_error();
        CHECK_MSG(strstr(e, "input \"x\": dim 1 is 0, expected W >= 1 (") && strstr(e, "a 0 in its shape"), "%s: %s",
                  backends[i], e);
        disc_tensor in7 = {DISC_F32, 3, {2, 7, 8}, x, sizeof x, 0};
        CHECK_MSG(disc_run(c, &in7, 1, &out, 1) == DISC_OK, "%s: %s", backends[i], disc_last_error());
        CHECK(out.rank == 3 && out.shape[0] == 1 && out.shape[1] == 14 && out.shape[2] == 8);
        disc_tensor_free(&out);
        disc_compiled_free(c);
    }
    disc_model_free(m);
}

int main(void)
{
    CHECK(!strcmp(disc_version(), DISC_VERSION));
    CHECK(disc_load("/nonexistent/model.onnx") == NULL);
    CHECK(strstr(disc_last_error(), "/nonexistent/model.onnx") != NULL);
    CHECK(disc_last_status() == DISC_ERR_RUNTIME); /* a file that cannot be read: a resource error */
    static const char bad_ir[] = "graph @g(%x: f32[B]) {\n  %y = neg(%z) : f32[B]\n  return %y\n}\n";
    CHECK(disc_load_ir(bad_ir, sizeof bad_ir - 1, "bad.disc") == NULL && disc_last_status() == DISC_ERR_INPUT);
    CHECK_MSG(strstr(disc_last_error(), "bad.disc:2:") != NULL, "%s", disc_last_error());
    disc_model *m = disc_load(MODEL);
    CHECK_MSG(m != NULL, "%s", disc_last_error());
    if (!m)
        return check_done();
    CHECK(disc_model_num_inputs(m) == 1 && disc_model_num_outputs(m) == 1);
    CHECK(disc_model_input_rank(m, 0) == 2 && disc_model_input_dtype(m, 0) == DISC_F32);
    char dim[32];
    CHECK(disc_model_input_dim(m, 0, 1, dim, sizeof dim) > 0 && !strcmp(dim, "8"));
    CHECK(disc_model_input_dim(m, 0, 0, dim, sizeof dim) > 0 && strcmp(dim, "8") != 0); /* symbolic */
    CHECK(disc_model_input_dim(m, 0, 5, dim, sizeof dim) == -1);
    disc_options o = disc_default_options();
    o.backend = "tpu";
    CHECK(disc_compile(m, &o) == NULL && strstr(disc_last_error(), "unknown backend 'tpu'"));
    compiled = disc_compile(m, NULL);
    CHECK_MSG(compiled != NULL, "%s", disc_last_error());
    if (!compiled) {
        disc_model_free(m);
        return check_done();
    }
    CHECK(disc_compiled_kernel_count(compiled) > 0);
    /* the interpreter as the reference for every batch size */
    o.backend = "interp";
    disc_compiled *ref = disc_compile(m, &o);
    CHECK(ref != NULL);
    disc_compiled *cpu = compiled;
    for (int b = 1; b <= 64; b++) {
        disc_status st;
        compiled = ref;
        expected[b] = run_batch(b, &st);
        compiled = cpu;
        double got = run_batch(b, &st);
        CHECK_MSG(st == DISC_OK && fabs(got - expected[b]) <= 1e-5 * (1 + expected[b]), "batch %d: %g vs %g", b,
                  got, expected[b]);
    }
    /* one compiled model, four threads, different shapes at once */
    pthread_t t[4];
    for (long i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    long bad = 0;
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(t[i], &r);
        bad += (long)r;
    }
    CHECK_MSG(bad == 0, "%ld of 200 concurrent runs were wrong", bad);
    /* errors */
    float x[3 * 7];
    disc_tensor in = {DISC_F32, 2, {3, 7}, x, sizeof x, 0}, out = {0};
    CHECK(disc_run(compiled, &in, 1, &out, 1) == DISC_ERR_SHAPE);
    CHECK_MSG(strstr(disc_last_error(), "dim 1 is 7, expected 8") != NULL, "%s", disc_last_error());
    /* a dim below its symbol's bound (>= 1): the compiled code refuses it as the interpreter does */
    disc_tensor in0 = {DISC_F32, 2, {0, 8}, x, 0, 0};
    CHECK(disc_run(compiled, &in0, 1, &out, 1) == DISC_ERR_SHAPE);
    CHECK_MSG(strstr(disc_last_error(), "dim 0 is 0, expected") && strstr(disc_last_error(), ">= 1"), "%s",
              disc_last_error());
    CHECK(disc_run(compiled, &in, 2, &out, 1) == DISC_ERR_ARG);
    in.nbytes = 4;
    CHECK(disc_run(compiled, &in, 1, &out, 1) == DISC_ERR_ARG);
    float small[2];
    float xs[2 * 8] = {0};
    disc_tensor in2 = {DISC_F32, 2, {2, 8}, xs, sizeof xs, 0}, out2 = {DISC_F32, 0, {0}, small, sizeof small, 0};
    CHECK(disc_run(compiled, &in2, 1, &out2, 1) == DISC_ERR_ARG);
    CHECK(strstr(disc_last_error(), "bytes") != NULL);
    float big[2 * 4];
    disc_tensor out3 = {DISC_F32, 0, {0}, big, sizeof big, 0};
    CHECK(disc_run(compiled, &in2, 1, &out3, 1) == DISC_OK && out3.data == big && out3.shape[0] == 2 &&
          !out3.owned);
    /* an output buffer over an input's memory, or over another output's:
     * refused, naming both (the kernels take their buffers for distinct) */
    disc_tensor over = {DISC_F32, 0, {0}, xs + 12, 8 * sizeof(float), 0};
    CHECK(disc_run(compiled, &in2, 1, &over, 1) == DISC_ERR_ARG);
    CHECK_MSG(strstr(disc_last_error(), "output 0's buffer (32 bytes) overlaps input 0's"), "%s", disc_last_error());
    float after[8];
    disc_tensor beside = {DISC_F32, 0, {0}, after, sizeof after, 0};
    CHECK_MSG(disc_run(compiled, &in2, 1, &beside, 1) == DISC_OK, "%s", disc_last_error()); /* apart: fine */
    /* a hint is a promise the compiled code may rely on: a shape that
     * breaks it is refused, on both backends, naming the hint */
    char sym[32], hint[64];
    disc_model_input_dim(m, 0, 0, sym, sizeof sym);
    snprintf(hint, sizeof hint, "%s %% 2 == 0", sym);
    const char *hints[] = {hint};
    static const char *const backends[] = {"cpu", "interp"};
    for (int i = 0; i < 2; i++) {
        disc_options ho = disc_default_options();
        ho.backend = backends[i];
        ho.assume = hints;
        ho.nassume = 1;
        disc_compiled *h = disc_compile(m, &ho);
        CHECK_MSG(h != NULL, "%s", disc_last_error());
        if (!h)
            continue;
        disc_compiled *save = compiled;
        compiled = h;
        disc_status st;
        run_batch(4, &st);
        CHECK_MSG(st == DISC_OK, "%s: batch 4: %s", backends[i], disc_last_error());
        run_batch(3, &st);
        CHECK_MSG(st == DISC_ERR_SHAPE && strstr(disc_last_error(), "--assume") != NULL, "%s: batch 3: %d %s",
                  backends[i], (int)st, disc_last_error());
        compiled = save;
        disc_compiled_free(h);
    }
    disc_compiled_free(ref);
    /* the compiled model is a clone: it runs after its model is freed */
    disc_model_free(m);
    disc_status st;
    double s = run_batch(5, &st);
    CHECK_MSG(st == DISC_OK && fabs(s - expected[5]) <= 1e-5 * (1 + expected[5]), "%s", disc_last_error());
    disc_compiled_free(compiled);
    test_tied_names();
    test_raised_bound();
    return check_done();
}
