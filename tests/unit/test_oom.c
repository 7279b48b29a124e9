/*
 * test_oom.c — out of memory never aborts: every allocation of disc's own
 * code fails in turn, and each failure is a returned error of status
 * DISC_ERR_RUNTIME (kind resource), with nothing leaked (the sanitizer
 * build's leak checker runs this test too).
 *
 * This executable is linked with --wrap for malloc, calloc, realloc,
 * strdup and strndup (tests/tests.cmake), so every call of them from
 * libdisc's objects and this file goes through the wrappers below; the
 * libraries disc calls into (LLVM, oneDNN, protobuf-c, ISL, libc itself)
 * allocate on their own and are not failed.
 *
 * For each model: a clean load, compile and run counts the allocations
 * (total) and gives the reference outputs. Then for N = 1 .. total + 1,
 * the N-th allocation fails (the others succeed) while the model is loaded
 * and compiled: either that fails with DISC_ERR_RUNTIME, or (a failure the
 * code can do without: a kernel not shared, a name not printed) it
 * succeeds and the compiled model must give the reference outputs.
 * DISC_OOM_STRIDE=K tries every K-th N only, DISC_OOM_FROM=N starts at N,
 * DISC_OOM_VERBOSE=1 prints each N's outcome.
 */
#include "disc.h"
#include "tests/unit/check.h"

#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* ---- the failing allocator ---------------------------------------------- */

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);

static atomic_long calls;   /* allocations since counting began */
static long fail_at;        /* the call that fails; 0: none */
static atomic_bool failed;  /* it happened */

static bool fail_now(void)
{
    long n = atomic_fetch_add(&calls, 1) + 1;
    if (fail_at > 0 && n == fail_at) {
        atomic_store(&failed, true);
        return true;
    }
    return false;
}

void *__wrap_malloc(size_t n) { return fail_now() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t size) { return fail_now() ? NULL : __real_calloc(n, size); }
void *__wrap_realloc(void *p, size_t n) { return fail_now() ? NULL : __real_realloc(p, n); }
char *__wrap_strdup(const char *s) { return fail_now() ? NULL : __real_strdup(s); }
char *__wrap_strndup(const char *s, size_t n) { return fail_now() ? NULL : __real_strndup(s, n); }

/* ---- models -------------------------------------------------------------- */

enum { MAXIO = 4 };

typedef struct Run {
    int nin, nout;
    disc_tensor in[MAXIO], out[MAXIO];
} Run;

/* Inputs for m's signature: every symbolic dim 3, values a fixed pattern. */
static bool make_inputs(const disc_model *m, Run *r)
{
    memset(r, 0, sizeof *r);
    r->nin = disc_model_num_inputs(m);
    r->nout = disc_model_num_outputs(m);
    if (r->nin > MAXIO || r->nout > MAXIO)
        return false;
    for (int i = 0; i < r->nin; i++) {
        disc_tensor *t = &r->in[i];
        t->dtype = disc_model_input_dtype(m, i);
        t->rank = disc_model_input_rank(m, i);
        size_t n = 1;
        for (int k = 0; k < t->rank; k++) {
            char dim[64], *end;
            disc_model_input_dim(m, i, k, dim, sizeof dim);
            long v = strtol(dim, &end, 10);
            t->shape[k] = *end || end == dim ? 3 : v;
            n *= (size_t)t->shape[k];
        }
        if (t->dtype != DISC_F32)
            return false;
        float *x = __real_malloc(n * sizeof *x + 1);
        for (size_t j = 0; j < n; j++)
            x[j] = (float)((j * 37) % 17) / 17.0f - 0.5f;
        t->data = x;
        t->nbytes = n * sizeof *x;
    }
    return true;
}

static void free_run(Run *r)
{
    for (int i = 0; i < r->nin; i++)
        free(r->in[i].data);
    for (int i = 0; i < r->nout; i++)
        disc_tensor_free(&r->out[i]);
}

/* Runs c on r's inputs into fresh outputs; the status. */
static disc_status run(disc_compiled *c, Run *r)
{
    for (int i = 0; i < r->nout; i++)
        disc_tensor_free(&r->out[i]);
    memset(r->out, 0, sizeof r->out);
    return disc_run(c, r->in, r->nin, r->out, r->nout);
}

static bool same_outputs(const Run *a, const Run *b)
{
    for (int i = 0; i < a->nout; i++) {
        const disc_tensor *x = &a->out[i], *y = &b->out[i];
        if (x->dtype != y->dtype || x->rank != y->rank || x->nbytes != y->nbytes)
            return false;
        for (size_t j = 0; j < x->nbytes / 4; j++)
            if (fabsf(((float *)x->data)[j] - ((float *)y->data)[j]) > 1e-5f)
                return false;
    }
    return true;
}

/* Loads and compiles path: the compiled model, or NULL with the status. */
static disc_compiled *build(const char *path, disc_model **m, disc_status *st)
{
    disc_options o = disc_default_options();
    o.opt_level = 0; /* the same code paths in disc, less time in LLVM */
    *m = disc_load(path);
    disc_compiled *c = *m ? disc_compile(*m, &o) : NULL;
    *st = c ? DISC_OK : disc_last_status();
    return c;
}

static void model(const char *path, long from, long stride, bool verbose)
{
    /* the clean run: the count and the reference */
    Run ref;
    disc_status st;
    disc_model *m;
    atomic_store(&calls, 0);
    fail_at = 0;
    disc_compiled *c = build(path, &m, &st);
    long total = atomic_load(&calls);
    CHECK_MSG(c != NULL, "%s: %s", path, disc_last_error());
    if (!c) {
        disc_model_free(m);
        return;
    }
    bool ok = make_inputs(m, &ref);
    CHECK_MSG(ok, "%s: the test makes f32 inputs only", path);
    CHECK_MSG(ok && run(c, &ref) == DISC_OK, "%s: %s", path, disc_last_error());
    disc_compiled_free(c);
    disc_model_free(m);
    if (!ok) {
        free_run(&ref);
        return;
    }

    int nfail = 0, nok = 0;
    for (long n = from; n <= total + 1; n += stride) {
        atomic_store(&calls, 0);
        atomic_store(&failed, false);
        fail_at = n;
        c = build(path, &m, &st);
        fail_at = 0;
        bool hit = atomic_load(&failed);
        if (verbose)
            printf("%s: N=%ld: %s%s\n", path, n, c ? "compiled" : disc_last_error(), hit ? "" : " (no failure)");
        if (!c) {
            nfail++;
            CHECK_MSG(hit && st == DISC_ERR_RUNTIME, "%s: allocation %ld failed: status %d: %s", path, n, (int)st,
                      disc_last_error());
        } else {
            nok++;
            Run r = ref;
            memset(r.out, 0, sizeof r.out);
            CHECK_MSG(run(c, &r) == DISC_OK && same_outputs(&r, &ref),
                      "%s: allocation %ld failed, the compile went on, and the run is wrong: %s", path, n,
                      disc_last_error());
            for (int i = 0; i < r.nout; i++)
                disc_tensor_free(&r.out[i]);
        }
        disc_compiled_free(c);
        disc_model_free(m);
    }
    CHECK_MSG(!atomic_load(&failed) || nok > 0, "%s: never compiled", path);
    printf("%s: %ld allocations; failing each%s: %d compiles failed with DISC_ERR_RUNTIME, %d went on and "
           "ran correctly\n", path, total, stride > 1 ? " (a sample)" : "", nfail, nok);
    free_run(&ref);
}

int main(void)
{
    const char *s = getenv("DISC_OOM_STRIDE");
    long stride = s && atol(s) > 0 ? atol(s) : 1;
    const char *f = getenv("DISC_OOM_FROM");
    long from = f && atol(f) > 0 ? atol(f) : 1;
    bool verbose = getenv("DISC_OOM_VERBOSE") != NULL;
    model(DISC_SOURCE_DIR "/tests/models/mlp_norm/model.onnx", from, stride, verbose);
    model(DISC_SOURCE_DIR "/tests/interp/layernorm.disc", from, stride, verbose);
    return check_done();
}
