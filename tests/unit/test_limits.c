/*
 * test_limits.c — graphs far larger than models are, through the whole
 * pipeline on the cpu backend and the interpreter.
 *
 *   - A chain of CHAIN elementwise ops, each reading the one before: it
 *     fuses, but a kernel's element expression is built recursively, and
 *     fused into one kernel this chain overflowed the compiler's stack
 *     (fuse.c now cuts chains at FUSE_MAX_DEPTH ops below a kernel's
 *     root); shape analysis and the fusion planner also took quadratic
 *     time on it (6 s and 2 s at 100,000 ops).
 *   - One value read by FAN ops whose results are summed pairwise.
 *
 * Each must compile, and its outputs equal what the graph computes (the
 * chain is the identity: pairs of neg then sub 0.5, twice, on multiples of
 * 1/64; the fan sums FAN copies of x * 1).
 *
 * A size computed from the inputs' dims that passes 2^63 (N x N x N
 * floats at N = 2^21) is refused before anything is allocated: the host
 * flow checks its sums and products of dims (it wrapped, allocated a few
 * bytes and crashed).
 *
 * And an error in the inputs' values (Expand to a shape with a negative
 * entry, tests/models/expand_shapes) is the same error on the cpu backend
 * as on the interpreter: DISC_ERR_INPUT (dcc's exit status 1), not a
 * runtime failure (it was DISC_ERR_RUNTIME, exit status 3, on cpu).
 */
#include "disc.h"
#include "tests/unit/check.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { CHAIN = 20000, FAN = 4096, N = 1000 };

/* Appends printf-style text to *buf (grown as needed); false when out of
 * memory. */
static bool append(char **buf, size_t *len, size_t *cap, const char *fmt, long a, long b)
{
    char tmp[160];
    int n = snprintf(tmp, sizeof tmp, fmt, a, b);
    if (*len + (size_t)n + 1 > *cap) {
        size_t c = *cap ? *cap * 2 : 1 << 16;
        char *p = realloc(*buf, c);
        if (!p)
            return false;
        *buf = p;
        *cap = c;
    }
    memcpy(*buf + *len, tmp, (size_t)n + 1);
    *len += (size_t)n;
    return true;
}

static char *chain_ir(void)
{
    char *b = NULL;
    size_t len = 0, cap = 0;
    bool ok = append(&b, &len, &cap, "graph @chain(%%x: f32[N]) {\n  %%h = const dense<0.5> : f32[]\n", 0, 0);
    ok = ok && append(&b, &len, &cap, "  %%n%ld = neg(%%x) : f32[N]\n", 0, 0);
    for (long i = 0; ok && i < CHAIN; i += 2) {
        if (i > 0)
            ok = append(&b, &len, &cap, "  %%n%ld = neg(%%t%ld) : f32[N]\n", i, i - 2);
        ok = ok && append(&b, &len, &cap, "  %%t%ld = sub(%%n%ld, %%h) : f32[N]\n", i, i);
    }
    ok = ok && append(&b, &len, &cap, "  return %%t%ld\n}\n", CHAIN - 2, 0);
    if (!ok) {
        free(b);
        return NULL;
    }
    return b;
}

static char *fan_ir(void)
{
    char *b = NULL;
    size_t len = 0, cap = 0;
    bool ok = append(&b, &len, &cap, "graph @fan(%%x: f32[N]) {\n  %%one = const dense<1> : f32[]\n", 0, 0);
    for (long i = 0; ok && i < FAN; i++)
        ok = append(&b, &len, &cap, "  %%s%ld = mul(%%x, %%one) : f32[N]\n", i + FAN, 0);
    for (long i = FAN - 1; ok && i >= 1; i--) /* s_i = s_2i + s_2i+1: s1 is the sum */
        ok = append(&b, &len, &cap, "  %%s%ld = add(%%s%ld, %%s", i, 2 * i) &&
             append(&b, &len, &cap, "%ld) : f32[N]\n", 2 * i + 1, 0);
    ok = ok && append(&b, &len, &cap, "  return %%s1\n}\n", 0, 0);
    if (!ok) {
        free(b);
        return NULL;
    }
    return b;
}

/* Compiles ir for backend and checks its output on x against want. */
static void run(const char *name, const char *ir, const char *backend, const float *x, const float *want)
{
    disc_model *m = ir ? disc_load_ir(ir, strlen(ir), name) : NULL;
    CHECK_MSG(m != NULL, "%s: %s", name, ir ? disc_last_error() : "out of memory");
    disc_options o = disc_default_options();
    o.backend = backend;
    o.no_cache = 1;
    disc_compiled *c = m ? disc_compile(m, &o) : NULL;
    CHECK_MSG(!m || c != NULL, "%s on %s: %s", name, backend, disc_last_error());
    if (c) {
        disc_tensor in = {DISC_F32, 1, {N}, (void *)x, N * sizeof(float), 0}, out = {0};
        disc_status st = disc_run(c, &in, 1, &out, 1);
        CHECK_MSG(st == DISC_OK, "%s on %s: %s", name, backend, disc_last_error());
        if (st == DISC_OK) {
            int bad = 0;
            for (int i = 0; i < N; i++)
                bad += ((float *)out.data)[i] != want[i];
            CHECK_MSG(bad == 0, "%s on %s: %d of %d outputs wrong", name, backend, bad, N);
            if (!bad)
                printf("%s: compiled for %s, outputs right\n", name, backend);
        }
        disc_tensor_free(&out);
    }
    disc_compiled_free(c);
    disc_model_free(m);
}

static const char cube_ir[] =
    "graph @cube(%x: f32[N]) {\n"
    "  %a = broadcast(%x) {shape = [N, N, N], axes = [0]} : f32[N, N, N]\n"
    "  %b = broadcast(%x) {shape = [N, N, N], axes = [2]} : f32[N, N, N]\n"
    "  %y = mul(%a, %b) : f32[N, N, N]\n"
    "  return %y\n"
    "}\n";

static void overflow(void)
{
    enum { BIG = 1 << 21 };
    disc_model *m = disc_load_ir(cube_ir, sizeof cube_ir - 1, "cube");
    disc_options o = disc_default_options();
    disc_compiled *c = m ? disc_compile(m, &o) : NULL;
    float *x = calloc(BIG, sizeof *x);
    CHECK_MSG(c && x, "cube: %s", disc_last_error());
    if (c && x) {
        disc_tensor in = {DISC_F32, 1, {BIG}, x, BIG * sizeof *x, 0}, out = {0};
        disc_status st = disc_run(c, &in, 1, &out, 1);
        CHECK_MSG(st == DISC_ERR_SHAPE && strstr(disc_last_error(), "passes 2^63"), "cube at N = 2^21: status %d: %s",
                  st, disc_last_error());
        disc_tensor_free(&out);
        in.shape[0] = 3; /* and a small one runs */
        in.nbytes = 3 * sizeof *x;
        CHECK_MSG(disc_run(c, &in, 1, &out, 1) == DISC_OK && out.shape[2] == 3, "cube at N = 3: %s",
                  disc_last_error());
        disc_tensor_free(&out);
    }
    free(x);
    disc_compiled_free(c);
    disc_model_free(m);
}

static void data_error(void)
{
    disc_model *m = disc_load(DISC_SOURCE_DIR "/tests/models/expand_shapes/model.onnx");
    CHECK_MSG(m != NULL, "%s", disc_last_error());
    const char *backends[2] = {"cpu", "interp"};
    for (int b = 0; m && b < 2; b++) {
        disc_options o = disc_default_options();
        o.backend = backends[b];
        disc_compiled *c = disc_compile(m, &o);
        CHECK_MSG(c != NULL, "expand_shapes on %s: %s", backends[b], disc_last_error());
        float x[1] = {1};
        int64_t shape[2] = {-5, 3};
        disc_tensor in[2] = {{DISC_F32, 2, {1, 1}, x, sizeof x, 0}, {DISC_I64, 1, {2}, shape, sizeof shape, 0}};
        disc_tensor out = {0};
        disc_status st = c ? disc_run(c, in, 2, &out, 1) : DISC_OK;
        CHECK_MSG(!c || (st == DISC_ERR_INPUT && strstr(disc_last_error(), "negative (-5)")),
                  "expand_shapes on %s to [-5, 3]: status %d: %s", backends[b], st, disc_last_error());
        disc_tensor_free(&out);
        disc_compiled_free(c);
    }
    disc_model_free(m);
}

int main(void)
{
    overflow();
    data_error();
    static float x[N], fan[N];
    for (int i = 0; i < N; i++) {
        x[i] = (float)(i % 129 - 64) / 64;
        fan[i] = x[i] * FAN;
    }
    char *chain = chain_ir(), *wide = fan_ir();
    run("chain", chain, "cpu", x, x);
    run("chain", chain, "interp", x, x);
    run("fan", wide, "cpu", x, fan);
    run("fan", wide, "interp", x, fan);
    free(chain);
    free(wide);
    return check_done();
}
