/*
 * test_interp.c — tests of the reference interpreter.
 *
 * Without arguments it runs the unit tests below: half-precision rounding,
 * graphs built with the builder API, input checking and its messages,
 * ownership of outputs. With file arguments it runs interpreter test files
 * (the .disc files of tests/interp, registered by tests/interp.cmake):
 *
 *   # input  dense<[1, 2, 3]> : f32[3]      one per graph input, in order
 *   # expect dense<[2, 4, 6]> : f32[3]      one per graph output, in order
 *   # error  text                           instead of expect: the run must
 *                                           fail with a message containing text,
 *                                           on the cpu backend too (--cpu)
 *   # interp-error text                     the same, on the interpreter only:
 *                                           a data-dependent error the compiled
 *                                           kernels do not trap (an integer
 *                                           division by zero divides by 1, a
 *                                           gather index out of range is clamped)
 *   # compiled-error text                   with error or interp-error: the
 *                                           compiled backend fails with these
 *                                           words instead (its host flow's
 *                                           check where the interpreter's op
 *                                           refuses)
 *   # tol    1e-6                           compare floats with this relative
 *                                           tolerance (default: exactly)
 *   # case                                  starts another case
 *   graph @t(%x: f32[N]) { ... }            the graph (verified first)
 *
 * Literals use the IR text format's constant syntax, so they are decoded by
 * graph_parse with the parser's rounding for f16/bf16.
 *
 * With --cpu first, the files' graphs are also compiled once each for the
 * cpu backend (codegen, the JIT), and every case that is not an error case
 * runs there too; its outputs must match the interpreter's to the case's
 * tol, at least 1e-5 (relative, absolute below 1). Such a file may give
 * random inputs and no expectations (the interpreter is the reference):
 *
 *   # input  random : f32[197, 13]          uniform in [-1, 1], multiples of
 *                                           1/64 (float sums are exact)
 *   # input  random -3 9 : i32[4, 5]        uniform integers in [-3, 9]
 *                                           (default [-5, 5]; bool: > 0,
 *                                           default [0, 1])
 *
 * from a generator seeded per file, so a run is repeatable.
 *
 * With --emu first (--emu64: at warps of 64 lanes), the same with the
 * kernels as GPU source on the emulator (codegen/emu.c, backend cuda-emu,
 * cuda-emu64) in place of the cpu
 * backend's. A file the GPU path does not take yet (a reduction, a
 * library call) prints the located error and exits 77: ctest shows it as
 * skipped, with the reason. With --cuda, on the cuda backend (a GPU, or
 * the stand-in driver with DISC_CUDA_EMU_MODULES=1: gpu.cmake).
 */
#include "codegen/codegen.h"
#include "runtime/interp.h"
#include "tests/unit/check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- literals and comparison --------------------------------------------- */

/* Parses `dense<...> : type` into a freshly allocated tensor. */
static bool parse_literal(const char *lit, Tensor *t, Diag *d)
{
    size_t n = strlen(lit) + 64;
    char *src = malloc(n);
    snprintf(src, n, "graph @lit() {\n  %%v = const %s\n  return %%v\n}\n", lit);
    Graph *g = graph_parse(src, strlen(src), "literal", d);
    free(src);
    if (!g)
        return false;
    const Op *op = g->first;
    const Type *ty = &op->out[0]->type;
    int64_t shape[MAX_RANK];
    for (int i = 0; i < ty->rank; i++)
        shape[i] = ty->dims[i]->c;
    bool ok = tensor_alloc(t, ty->dtype, ty->rank, shape) && t->nbytes == op->cst->nbytes;
    if (ok && t->nbytes)
        memcpy(t->data, op->cst->data, t->nbytes);
    graph_free(g);
    if (!ok)
        diag_set(d, "literal: bad size");
    return ok;
}

static uint64_t rng_state;

static uint64_t rng_next(void)
{
    /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Parses `random [LO HI] : type` into a tensor of random values. */
static bool parse_random(const char *spec, Tensor *t, Diag *d)
{
    const char *colon = strchr(spec, ':');
    double lo = 0, hi = 0;
    int n = colon ? sscanf(spec, "random %lf %lf", &lo, &hi) : 0;
    if (!colon || (n != 0 && n != 2) || strncmp(spec, "random", 6) != 0) {
        diag_set(d, "expected 'random [LO HI] : TYPE'");
        return false;
    }
    char lit[256];
    snprintf(lit, sizeof lit, "dense<0> %s", colon);
    if (!parse_literal(lit, t, d))
        return false;
    bool fl = dtype_is_float(t->dtype), b = t->dtype == DT_BOOL;
    bool u = t->dtype == DT_U8 || t->dtype == DT_U16 || t->dtype == DT_U32 || t->dtype == DT_U64;
    if (n == 0) {
        lo = fl ? -1 : b || u ? 0 : -5;
        hi = fl ? 1 : b ? 1 : 5;
    }
    size_t count = tensor_numel(t);
    for (size_t i = 0; i < count; i++) {
        if (fl) {
            int64_t steps = (int64_t)((hi - lo) * 64);
            interp_store_f(t, i, lo + (double)(rng_next() % (uint64_t)(steps + 1)) / 64);
        } else {
            int64_t v = (int64_t)lo + (int64_t)(rng_next() % (uint64_t)(hi - lo + 1));
            interp_store_i(t, i, b ? v > 0 : v);
        }
    }
    return true;
}

static void print_tensor(FILE *f, const Tensor *t)
{
    fprintf(f, "%s[", dtype_name(t->dtype));
    for (int i = 0; i < t->rank; i++)
        fprintf(f, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    fprintf(f, "] {");
    size_t n = tensor_numel(t);
    for (size_t i = 0; i < n && i < 64; i++) {
        if (dtype_is_float(t->dtype))
            fprintf(f, "%s%.9g", i ? ", " : "", interp_load_f(t, i));
        else
            fprintf(f, "%s%lld", i ? ", " : "", (long long)interp_load_i(t, i));
    }
    fprintf(f, "%s}", n > 64 ? ", ..." : "");
}

/* Equal dtype and shape, and every element equal (tol = 0: exactly, NaN
 * equals NaN, -0 differs from 0) or within tol relative. */
static bool tensor_close(const Tensor *a, const Tensor *b, double tol)
{
    if (a->dtype != b->dtype || a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (a->shape[i] != b->shape[i])
            return false;
    size_t n = tensor_numel(a);
    for (size_t i = 0; i < n; i++) {
        if (!dtype_is_float(a->dtype)) {
            if (interp_load_i(a, i) != interp_load_i(b, i))
                return false;
            continue;
        }
        double x = interp_load_f(a, i), y = interp_load_f(b, i);
        if (isnan(x) || isnan(y)) {
            if (!(isnan(x) && isnan(y)))
                return false;
        } else if (tol == 0) {
            if (x != y || signbit(x) != signbit(y))
                return false;
        } else if (isinf(x) || isinf(y)) { /* inf - (-inf) is within any relative tolerance of inf */
            if (x != y)
                return false;
        } else if (x != y && !(fabs(x - y) <= tol * fmax(1.0, fabs(y)))) {
            return false;
        }
    }
    return true;
}

/* ---- test files ----------------------------------------------------------- */

enum { MAX_IO = 32 };

typedef struct Case {
    Tensor in[MAX_IO], expect[MAX_IO];
    int nin, nexpect;
    const char *error; /* expected message fragment */
    bool interp_only;  /* # interp-error: the cpu backend does not check it */
    const char *compiled_error; /* # compiled-error: the compiled backend's words, where they differ */
    double tol;
    int line;
} Case;

static void case_free(Case *c)
{
    for (int i = 0; i < c->nin; i++)
        tensor_free(&c->in[i]);
    for (int i = 0; i < c->nexpect; i++)
        tensor_free(&c->expect[i]);
}

/* The compiled backend: "cpu", or "cuda-emu" (--emu), "cuda-emu64" (--emu64), "cuda" (--cuda). */
static const char *backend = "cpu";

/* The cpu backend's outputs against the interpreter's (ref). */
static bool run_cpu(const char *where, Graph *g, Exec *e, Case *c, Tensor *ref)
{
    Tensor out[MAX_IO] = {0};
    Diag d = {0};
    if (!exec_run(e, c->in, c->nin, out, g->noutputs, &d)) {
        fprintf(stderr, "%s: %s: run failed: %s\n", where, backend, d.msg);
        return false;
    }
    bool all = true;
    for (int i = 0; i < g->noutputs; i++) {
        if (!tensor_close(&out[i], &ref[i], fmax(c->tol, 1e-5))) {
            fprintf(stderr, "%s: %s: output %d differs from the interpreter's\n  %s:    ", where, backend, i, backend);
            print_tensor(stderr, &out[i]);
            fprintf(stderr, "\n  interp: ");
            print_tensor(stderr, &ref[i]);
            fprintf(stderr, "\n");
            all = false;
        }
        tensor_free(&out[i]);
    }
    return all;
}

static bool run_case(const char *path, Graph *g, Exec *e, Case *c)
{
    char where[512];
    snprintf(where, sizeof where, "%s:%d", path, c->line);
    if (c->nexpect != g->noutputs && !c->error && !(e && c->nexpect == 0)) {
        fprintf(stderr, "%s: case has %d expectations, graph has %d outputs\n", where, c->nexpect, g->noutputs);
        return false;
    }
    Tensor out[MAX_IO];
    Diag d = {0};
    bool ok = interp_run(g, c->in, c->nin, out, g->noutputs, &d);
    if (c->error) {
        if (ok) {
            fprintf(stderr, "%s: expected error \"%s\", but the run succeeded\n", where, c->error);
            for (int i = 0; i < g->noutputs; i++)
                tensor_free(&out[i]);
            return false;
        }
        if (!strstr(d.msg, c->error)) {
            fprintf(stderr, "%s: expected error \"%s\", got \"%s\"\n", where, c->error, d.msg);
            return false;
        }
        if (e && (!c->interp_only || c->compiled_error)) { /* the compiled code refuses it too */
            const char *want = c->compiled_error ? c->compiled_error : c->error;
            Diag dc = {0};
            Tensor oc[MAX_IO] = {0};
            if (exec_run(e, c->in, c->nin, oc, g->noutputs, &dc)) {
                fprintf(stderr, "%s: %s: expected error \"%s\", but the run succeeded\n", where, backend, want);
                for (int i = 0; i < g->noutputs; i++)
                    tensor_free(&oc[i]);
                return false;
            }
            if (!strstr(dc.msg, want)) {
                fprintf(stderr, "%s: %s: expected error \"%s\", got \"%s\"\n", where, backend, want, dc.msg);
                return false;
            }
        }
        return true;
    }
    if (!ok) {
        fprintf(stderr, "%s: run failed: %s\n", where, d.msg);
        return false;
    }
    bool all = true;
    for (int i = 0; i < c->nexpect; i++) {
        if (!tensor_close(&out[i], &c->expect[i], c->tol)) {
            fprintf(stderr, "%s: output %d differs\n  got:    ", where, i);
            print_tensor(stderr, &out[i]);
            fprintf(stderr, "\n  expect: ");
            print_tensor(stderr, &c->expect[i]);
            fprintf(stderr, "\n");
            all = false;
        }
    }
    if (e)
        all &= run_cpu(where, g, e, c, out);
    for (int i = 0; i < g->noutputs; i++)
        tensor_free(&out[i]);
    return all;
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s)
        s[n] = 0;
    fclose(f);
    *len = (size_t)n;
    return s;
}

/* The graph of src compiled for the backend, or NULL with a message (and
 * *unsupported if the GPU path does not take it yet). */
static Exec *compile_cpu(const char *path, const char *src, size_t len, Graph **gc, bool *unsupported)
{
    Diag d = {0};
    Exec *e = NULL;
    *gc = graph_parse(src, len, path, &d);
    CgOpts o = {.opt_level = 3, .gpu = strcmp(backend, "cpu") ? backend : NULL};
    if (*gc)
        e = exec_compile(*gc, NULL, &o, &d);
    *unsupported = !e && o.gpu && d.kind == DIAG_UNSUPPORTED;
    if (*unsupported)
        printf("SKIP: %s\n", d.msg);
    else if (!e)
        fprintf(stderr, "%s: %s: %s\n", path, backend, d.msg);
    return e;
}

/* 0: every case passed; 1: one failed; 77: not supported on the GPU yet. */
static int run_file(const char *path, bool cpu)
{
    size_t len;
    char *src = read_file(path, &len);
    if (!src) {
        fprintf(stderr, "%s: cannot read\n", path);
        return false;
    }
    Diag d = {0};
    Graph *g = graph_parse(src, len, path, &d);
    if (!g) {
        fprintf(stderr, "%s\n", d.msg);
        free(src);
        return 1;
    }
    if (!graph_verify(g, &d)) {
        fprintf(stderr, "%s: verify: %s\n", path, d.msg);
        graph_free(g);
        free(src);
        return 1;
    }
    Graph *gc = NULL;
    bool unsupported = false;
    Exec *e = cpu ? compile_cpu(path, src, len, &gc, &unsupported) : NULL;
    if (unsupported) {
        graph_free(gc);
        graph_free(g);
        free(src);
        return 77;
    }
    bool ok = !cpu || e;
    int ncases = 0;
    Case c = {0};
    c.line = 1;
    rng_state = 1;
    int line = 0;
    for (char *p = src; *p && ok;) {
        char *eol = strchr(p, '\n');
        if (eol)
            *eol = 0;
        line++;
        char *s = p;
        while (*s == ' ' || *s == '\t')
            s++;
        if (s[0] == '#') {
            s++;
            while (*s == ' ')
                s++;
            Diag ld = {0};
            if (!strncmp(s, "input ", 6) || !strncmp(s, "expect ", 7)) {
                bool in = s[0] == 'i';
                Tensor *t = in ? &c.in[c.nin] : &c.expect[c.nexpect];
                const char *lit = s + (in ? 6 : 7);
                while (*lit == ' ')
                    lit++;
                bool rnd = in && !strncmp(lit, "random", 6);
                if ((in ? c.nin : c.nexpect) >= MAX_IO ||
                    !(rnd ? parse_random(lit, t, &ld) : parse_literal(lit, t, &ld))) {
                    fprintf(stderr, "%s:%d: bad literal: %s\n", path, line, ld.msg);
                    ok = false;
                } else if (in) {
                    c.nin++;
                } else {
                    c.nexpect++;
                }
            } else if (!strncmp(s, "error ", 6)) {
                c.error = s + 6;
            } else if (!strncmp(s, "interp-error ", 13)) {
                c.error = s + 13;
                c.interp_only = true;
            } else if (!strncmp(s, "compiled-error ", 15)) {
                c.compiled_error = s + 15;
            } else if (!strncmp(s, "tol ", 4)) {
                c.tol = atof(s + 4);
            } else if (!strncmp(s, "case", 4)) {
                if (c.nin || c.nexpect || c.error) {
                    ok = run_case(path, g, e, &c);
                    ncases++;
                }
                case_free(&c);
                memset(&c, 0, sizeof c);
                c.line = line;
            }
        }
        p = eol ? eol + 1 : p + strlen(p);
    }
    if (ok && (c.nin || c.nexpect || c.error)) {
        ok = run_case(path, g, e, &c);
        ncases++;
    }
    case_free(&c);
    exec_free(e);
    graph_free(gc);
    graph_free(g);
    free(src);
    if (ok && ncases == 0) {
        fprintf(stderr, "%s: no cases\n", path);
        ok = false;
    }
    if (ok)
        printf("%s: %d case%s ok%s%s%s\n", path, ncases, ncases == 1 ? "" : "s", cpu ? " (interp and " : "",
               cpu ? backend : "", cpu ? ")" : "");
    return ok ? 0 : 1;
}

/* ---- unit tests ------------------------------------------------------------- */

static void test_half(void)
{
    /* f16: exact values, rounding to nearest even, overflow, subnormals */
    CHECK(interp_f16_from_double(1.0) == 0x3c00);
    CHECK(interp_f16_from_double(-2.0) == 0xc000);
    CHECK(interp_f16_from_double(65504.0) == 0x7bff);
    CHECK(interp_f16_from_double(65519.99) == 0x7bff);
    CHECK(interp_f16_from_double(65520.0) == 0x7c00); /* ties to even: inf */
    CHECK(interp_f16_from_double(1e10) == 0x7c00);
    CHECK(interp_f16_from_double(-INFINITY) == 0xfc00);
    CHECK((interp_f16_from_double(NAN) & 0x7c00) == 0x7c00 && (interp_f16_from_double(NAN) & 0x3ff));
    CHECK(interp_f16_from_double(1.0 + ldexp(1, -11)) == 0x3c00);      /* tie, even stays */
    CHECK(interp_f16_from_double(1.0 + 3 * ldexp(1, -11)) == 0x3c02);  /* tie, odd rounds up */
    CHECK(interp_f16_from_double(1.0 + ldexp(1, -11) + ldexp(1, -30)) == 0x3c01);
    CHECK(interp_f16_from_double(ldexp(1, -24)) == 0x0001);            /* smallest subnormal */
    CHECK(interp_f16_from_double(ldexp(1, -25)) == 0x0000);            /* tie to even zero */
    CHECK(interp_f16_from_double(ldexp(1.5, -25)) == 0x0001);
    CHECK(interp_f16_from_double(ldexp(3, -25)) == 0x0002);            /* 1.5 ulp: tie to even 2 */
    CHECK(interp_f16_from_double(ldexp(1, -14) - ldexp(1, -26)) == 0x0400); /* rounds up to normal */
    CHECK(interp_f16_from_double(-0.0) == 0x8000);
    CHECK(interp_f16_from_double(0.1) == 0x2e66);
    CHECK(interp_f16_to_double(0x2e66) == 0.0999755859375);
    CHECK(interp_f16_to_double(0x0001) == ldexp(1, -24));
    CHECK(interp_f16_to_double(0x7c00) == INFINITY);
    CHECK(isnan(interp_f16_to_double(0x7e00)));
    /* every finite f16 round-trips */
    int bad = 0;
    for (int h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00)
            continue;
        if (interp_f16_from_double(interp_f16_to_double((uint16_t)h)) != h)
            bad++;
    }
    CHECK(bad == 0);
    /* bf16 */
    CHECK(interp_bf16_from_double(1.0) == 0x3f80);
    CHECK(interp_bf16_from_double(1.0 + ldexp(1, -8)) == 0x3f80);      /* tie, even */
    CHECK(interp_bf16_from_double(1.0 + 3 * ldexp(1, -8)) == 0x3f82);
    CHECK(interp_bf16_from_double(0.1) == 0x3dcd);
    CHECK(interp_bf16_from_double(3.5e38) == 0x7f80);
    CHECK(interp_bf16_from_double(ldexp(1, -133)) == 0x0001);
    CHECK(interp_bf16_to_double(0x3dcd) == 0.10009765625);
    bad = 0;
    for (int h = 0; h < 0x10000; h++) {
        if ((h & 0x7f80) == 0x7f80)
            continue;
        if (interp_bf16_from_double(interp_bf16_to_double((uint16_t)h)) != h)
            bad++;
    }
    CHECK(bad == 0);
    /* integers to bf16 round once: 2^24 + 2^16 + 1 is above the tie */
    Tensor t;
    int64_t one = 1;
    CHECK(tensor_alloc(&t, DT_BF16, 1, &one));
    interp_store_i(&t, 0, (INT64_C(1) << 24) + (1 << 16) + 1);
    CHECK(interp_load_f(&t, 0) == (double)((INT64_C(1) << 24) + (1 << 17)));
    interp_store_i(&t, 0, INT64_MAX);
    CHECK(interp_load_f(&t, 0) == ldexp(1, 63));
    tensor_free(&t);
}

static void test_float_to_int(void)
{
    Tensor t;
    int64_t one = 1;
    CHECK(tensor_alloc(&t, DT_I8, 1, &one));
    interp_store_f(&t, 0, -3.9);
    CHECK(interp_load_i(&t, 0) == -3);
    interp_store_f(&t, 0, 300.0);
    CHECK(interp_load_i(&t, 0) == 127);
    interp_store_f(&t, 0, NAN);
    CHECK(interp_load_i(&t, 0) == 0);
    tensor_free(&t);
    CHECK(tensor_alloc(&t, DT_I64, 1, &one));
    interp_store_f(&t, 0, 1e30);
    CHECK(interp_load_i(&t, 0) == INT64_MAX);
    interp_store_f(&t, 0, -1e30);
    CHECK(interp_load_i(&t, 0) == INT64_MIN);
    tensor_free(&t);
}

/* f32[B, S] + f32[S] built with the builder API, run at two shapes. */
static void test_builder_add(void)
{
    Graph *g = graph_new("t");
    Dim *B = dim_sym(&g->dims, "B"), *S = dim_sym(&g->dims, "S");
    Dim *xs[2] = {B, S};
    Value *x = graph_add_input(g, "x", type_make(&g->arena, DT_F32, 2, xs));
    Value *y = graph_add_input(g, "y", type_make(&g->arena, DT_F32, 1, &S));
    Value *z = build_binary(g, OP_ADD, x, y);
    Value *r = build_reduce(g, z, "sum", (int64_t[]){1}, 1, false);
    CHECK(z && r);
    graph_add_output(g, z);
    graph_add_output(g, r);
    for (int rep = 0; rep < 2; rep++) {
        int64_t b = rep ? 3 : 1, s = rep ? 2 : 4;
        Tensor in[2], out[2];
        int64_t xsh[2] = {b, s};
        CHECK(tensor_alloc(&in[0], DT_F32, 2, xsh));
        CHECK(tensor_alloc(&in[1], DT_F32, 1, &s));
        for (int64_t i = 0; i < b * s; i++)
            ((float *)in[0].data)[i] = (float)i;
        for (int64_t i = 0; i < s; i++)
            ((float *)in[1].data)[i] = (float)(10 * i);
        Diag d = {0};
        bool ok = interp_run(g, in, 2, out, 2, &d);
        CHECK_MSG(ok, "%s", d.msg);
        if (ok) {
            CHECK(out[0].rank == 2 && out[0].shape[0] == b && out[0].shape[1] == s && out[0].owned);
            bool good = true;
            for (int64_t i = 0; i < b * s; i++)
                good &= ((float *)out[0].data)[i] == (float)i + (float)(10 * (i % s));
            CHECK(good);
            CHECK(out[1].rank == 1 && out[1].shape[0] == b);
            float row0 = 0;
            for (int64_t j = 0; j < s; j++)
                row0 += (float)j + (float)(10 * j);
            CHECK(((float *)out[1].data)[0] == row0);
            tensor_free(&out[0]);
            tensor_free(&out[1]);
        }
        tensor_free(&in[0]);
        tensor_free(&in[1]);
    }
    graph_free(g);
}

static Graph *parse(const char *src)
{
    Diag d = {0};
    Graph *g = graph_parse(src, strlen(src), "test", &d);
    CHECK_MSG(g, "%s", d.msg);
    if (g && !graph_verify(g, &d)) {
        CHECK_MSG(false, "verify: %s", d.msg);
    }
    return g;
}

/* Runs g on the given f32/i64 inputs and returns whether it failed with a
 * message containing want (want NULL: must succeed). */
static bool run_expect(Graph *g, Tensor *in, int nin, const char *want)
{
    Tensor out[4];
    Diag d = {0};
    bool ok = interp_run(g, in, nin, out, g->noutputs, &d);
    if (ok)
        for (int i = 0; i < g->noutputs; i++)
            tensor_free(&out[i]);
    if (!want) {
        if (!ok)
            fprintf(stderr, "  unexpected error: %s\n", d.msg);
        return ok;
    }
    if (ok || !strstr(d.msg, want)) {
        fprintf(stderr, "  expected \"%s\", got \"%s\"\n", want, ok ? "(success)" : d.msg);
        return false;
    }
    /* outputs are empty after a failure */
    for (int i = 0; i < g->noutputs; i++)
        if (out[i].data)
            return false;
    return true;
}

/* run_expect on the cpu backend's compiled code: its generated host flow
 * must refuse what the interpreter refuses, with the same message. */
static bool run_expect_cpu(Graph *g, Tensor *in, int nin, const char *want)
{
    Diag d = {0};
    Graph *c = graph_clone(g, &d);
    CgOpts o = {.opt_level = 1};
    Exec *e = c ? exec_compile(c, NULL, &o, &d) : NULL;
    Tensor out[4] = {{0}};
    bool ok = e && exec_run(e, in, nin, out, c->noutputs, &d);
    for (int i = 0; ok && i < c->noutputs; i++)
        tensor_free(&out[i]);
    exec_free(e);
    graph_free(c);
    if (want ? ok || !strstr(d.msg, want) : !ok) {
        fprintf(stderr, "  cpu: expected \"%s\", got \"%s\"\n", want ? want : "(success)", ok ? "(success)" : d.msg);
        return false;
    }
    return true;
}

static void test_input_errors(void)
{
    Graph *g = parse("graph @t(%mask: f32[B, S], %ids: i64[B, S], %w: f32[2*S, 3]) {\n"
                     "  %0 = gather(%mask, %ids) {axis = 1} : f32[B, B, S]\n"
                     "  return %0\n}\n");
    if (!g)
        return;
    Tensor in[3];
    int64_t s1[2] = {2, 12}, s2[2] = {2, 13}, s3[2] = {24, 3}, s4[2] = {25, 3}, s5[1] = {24};
    tensor_alloc(&in[0], DT_F32, 2, s1);
    tensor_alloc(&in[1], DT_I64, 2, s1);
    tensor_alloc(&in[2], DT_F32, 2, s3);
    CHECK(run_expect(g, in, 3, NULL));
    /* inconsistent symbols across two inputs */
    tensor_free(&in[1]);
    tensor_alloc(&in[1], DT_I64, 2, s2);
    CHECK(run_expect(g, in, 3, "input \"ids\": dim 1 is 13, expected S = 12 (from input \"mask\")"));
    tensor_free(&in[1]);
    tensor_alloc(&in[1], DT_I64, 2, s1);
    /* an expression dim */
    tensor_free(&in[2]);
    tensor_alloc(&in[2], DT_F32, 2, s4);
    CHECK(run_expect(g, in, 3, "input \"w\": dim 0 is 25, expected 2*S = 24"));
    /* wrong rank */
    tensor_free(&in[2]);
    tensor_alloc(&in[2], DT_F32, 1, s5);
    CHECK(run_expect(g, in, 3, "input \"w\": rank 1, expected 2 (f32[2*S, 3])"));
    tensor_free(&in[2]);
    tensor_alloc(&in[2], DT_F32, 2, s3);
    /* wrong dtype */
    tensor_free(&in[1]);
    tensor_alloc(&in[1], DT_I32, 2, s1);
    CHECK(run_expect(g, in, 3, "input \"ids\": dtype i32, expected i64"));
    tensor_free(&in[1]);
    tensor_alloc(&in[1], DT_I64, 2, s1);
    /* gather index out of range */
    ((int64_t *)in[1].data)[5] = 12;
    CHECK(run_expect(g, in, 3, "%0 = gather: index 12 at indices[0, 5] is out of range for axis 1 of size 12"));
    ((int64_t *)in[1].data)[5] = -12; /* wraps to 0 */
    CHECK(run_expect(g, in, 3, NULL));
    ((int64_t *)in[1].data)[23] = -13;
    CHECK(run_expect(g, in, 3, "index -13 at indices[1, 11] is out of range"));
    /* wrong input count */
    CHECK(run_expect(g, in, 2, "takes 3 inputs, got 2"));
    for (int i = 0; i < 3; i++)
        tensor_free(&in[i]);
    graph_free(g);
}

static void test_bounds_and_constants(void)
{
    Graph *g = parse("sym S <= 8\n"
                     "graph @t(%x: f32[S, 4]) {\n"
                     "  %0 = neg(%x) : f32[S, 4]\n"
                     "  return %0\n}\n");
    if (!g)
        return;
    Tensor in;
    int64_t ok_shape[2] = {8, 4}, big[2] = {9, 4}, bad4[2] = {8, 5};
    tensor_alloc(&in, DT_F32, 2, ok_shape);
    CHECK(run_expect(g, &in, 1, NULL));
    CHECK(run_expect_cpu(g, &in, 1, NULL));
    tensor_free(&in);
    tensor_alloc(&in, DT_F32, 2, big); /* the compiled host flow checks the bound too */
    CHECK(run_expect(g, &in, 1, "input \"x\": dim 0 is 9, expected S <= 8"));
    CHECK(run_expect_cpu(g, &in, 1, "input \"x\": dim 0 is 9, expected S <= 8"));
    tensor_free(&in);
    tensor_alloc(&in, DT_F32, 2, bad4);
    CHECK(run_expect(g, &in, 1, "input \"x\": dim 1 is 5, expected 4"));
    CHECK(run_expect_cpu(g, &in, 1, "input \"x\": dim 1 is 5, expected 4"));
    tensor_free(&in);
    graph_free(g);
}

/* A wrong declared result dim is reported with the op's name. */
static void test_result_check(void)
{
    Graph *g = parse("graph @t(%x: f32[N]) {\n"
                     "  %0 = neg(%x) : f32[N]\n"
                     "  return %0\n}\n");
    if (!g)
        return;
    /* Corrupt the declared type behind the verifier's back. */
    Op *op = g->first;
    op->out[0]->type.dims[0] = dim_addc(&g->dims, op->out[0]->type.dims[0], 1);
    op->src = "node7";
    Tensor in;
    int64_t n = 3;
    tensor_alloc(&in, DT_F32, 1, &n);
    CHECK(run_expect(g, &in, 1, "op \"node7\" (neg): result %0 dim 0 is 3, declared N + 1 = 4"));
    tensor_free(&in);
    graph_free(g);
}

/* Data-dependent dims bind from results and feed later attributes. */
static void test_data_dependent(void)
{
    Graph *g = parse("graph @t(%x: f32[N]) {\n"
                     "  %nz = nonzero(%x) : i64[1, K]\n"
                     "  %r = reshape(%nz) {shape = [K]} : i64[K]\n"
                     "  %i = iota() {dtype = i32, shape = [K, 2], axis = 0} : i32[K, 2]\n"
                     "  return %r, %i, %x, %x\n}\n");
    if (!g)
        return;
    Tensor in, out[4];
    int64_t n = 5;
    tensor_alloc(&in, DT_F32, 1, &n);
    float v[5] = {0, 1, 0, -2, NAN};
    memcpy(in.data, v, sizeof v);
    Diag d = {0};
    bool ok = interp_run(g, &in, 1, out, 4, &d);
    CHECK_MSG(ok, "%s", d.msg);
    if (ok) {
        CHECK(out[0].rank == 1 && out[0].shape[0] == 3);
        const int64_t *r = out[0].data;
        CHECK(r[0] == 1 && r[1] == 3 && r[2] == 4);
        CHECK(out[1].shape[0] == 3 && ((int32_t *)out[1].data)[5] == 2);
        /* graph inputs as outputs are copies the caller owns */
        CHECK(out[2].owned && out[2].data != in.data && out[3].owned && out[3].data != out[2].data);
        CHECK(memcmp(out[2].data, in.data, sizeof v) == 0);
        for (int i = 0; i < 4; i++)
            tensor_free(&out[i]);
    }
    tensor_free(&in);
    graph_free(g);
}

/* An elided constant cannot run; the message says so. */
static void test_elided(void)
{
    Graph *g = graph_new("t");
    Dim *two = dim_const(&g->dims, 2);
    Value *c = build_const(g, type_make(&g->arena, DT_F32, 1, &two), (float[]){1, 2}, 8, true);
    CHECK(c);
    if (c) {
        c->def->cst->src = CONST_ELIDED;
        c->def->cst->data = NULL;
        graph_add_output(g, c);
        Tensor out[1];
        Diag d = {0};
        CHECK(!interp_run(g, NULL, 0, out, 1, &d));
        CHECK_MSG(strstr(d.msg, "elided"), "%s", d.msg);
    }
    graph_free(g);
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        bool cpu = !strcmp(argv[1], "--cpu") || !strcmp(argv[1], "--emu") || !strcmp(argv[1], "--emu64") ||
                   !strcmp(argv[1], "--cuda");
        if (!strcmp(argv[1], "--cuda"))
            backend = "cuda";
        if (!strcmp(argv[1], "--emu"))
            backend = "cuda-emu";
        if (!strcmp(argv[1], "--emu64")) /* the emulator at warps of 64 lanes */
            backend = "cuda-emu64";
        int fails = 0, skipped = 0;
        for (int i = 1 + cpu; i < argc; i++) {
            int rc = run_file(argv[i], cpu);
            fails += rc == 1;
            skipped += rc == 77;
        }
        return fails ? 1 : skipped ? 77 : 0;
    }
    test_half();
    test_float_to_int();
    test_builder_add();
    test_input_errors();
    test_bounds_and_constants();
    test_result_check();
    test_data_dependent();
    test_elided();
    return check_done();
}
