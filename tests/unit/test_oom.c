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
 * For each case (a model and a backend: cpu or interp through the C API,
 * or ahead of time through dcc compile's calls): a clean load and compile
 * counts the allocations (total) and a run gives the reference outputs.
 * Then for N = 1 .. total + 1 the N-th allocation fails (the others
 * succeed) while the model is loaded and compiled: either that fails with
 * a resource error (DISC_ERR_RUNTIME), or (a failure the code can do
 * without: a cache that does not grow, such as the constraint set's memo or
 * codegen's dim cache) it succeeds and the compiled model
 * must give the reference outputs. The same for each allocation of a run
 * of the compiled model (after a first run that fills the caches). The
 * larger model is sampled (every
 * K-th N) to keep the test to seconds. DISC_OOM_STRIDE=K samples every
 * case, DISC_OOM_FROM=N starts at N, DISC_OOM_VERBOSE=1 prints each N's
 * outcome.
 */
#include "codegen/codegen.h"
#include "disc.h"
#include "frontends/model.h"
#include "tests/unit/check.h"

#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
        if (t->dtype == DISC_F32) {
            float *x = __real_malloc(n * sizeof *x + 1);
            for (size_t j = 0; j < n; j++)
                x[j] = (float)((j * 37) % 17) / 17.0f - 0.5f;
            t->data = x;
            t->nbytes = n * sizeof *x;
        } else if (t->dtype == DISC_I64) { /* token ids, a mask: ones */
            int64_t *x = __real_malloc(n * sizeof *x + 1);
            for (size_t j = 0; j < n; j++)
                x[j] = 1;
            t->data = x;
            t->nbytes = n * sizeof *x;
        } else {
            return false;
        }
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

/* ---- the cases ---------------------------------------------------------- */

typedef struct Case {
    const char *path;
    const char *backend; /* "cpu" or "interp" through the C API; "aot": aot_compile */
    long stride;         /* 1: every N; more: a sample, for the long ones */
} Case;

static char aot_dir[64];

/* Loads and compiles c->path through the C API: the compiled model, or
 * NULL with the status. */
static disc_compiled *build(const Case *c, disc_model **m, disc_status *st)
{
    disc_options o = disc_default_options();
    o.backend = c->backend;
    o.opt_level = 0; /* the same code paths in disc, less time in LLVM */
    *m = disc_load(c->path);
    disc_compiled *cc = *m ? disc_compile(*m, &o) : NULL;
    *st = cc ? DISC_OK : disc_last_status();
    return cc;
}

/* dcc compile's path: the one loader, then aot_compile into an object, a
 * header and a weights file. The error's kind, DIAG_NONE if it worked. */
static DiagKind build_aot(const Case *c)
{
    char obj[128], hdr[128], wts[128];
    snprintf(obj, sizeof obj, "%s/m.o", aot_dir);
    snprintf(hdr, sizeof hdr, "%s/m.h", aot_dir);
    snprintf(wts, sizeof wts, "%s/m.weights", aot_dir);
    Diag d = {0};
    Graph *g = model_load(c->path, NULL, NULL, &d);
    CgOpts co = {.opt_level = 0};
    AotOpts ao = {.name = "m", .weights_path = wts};
    bool ok = g && aot_compile(g, NULL, &co, &ao, obj, hdr, &d);
    graph_free(g);
    remove(obj);
    remove(hdr);
    remove(wts);
    return ok ? DIAG_NONE : d.set ? d.kind : DIAG_INTERNAL;
}

/* Fails each allocation of a run in turn: DISC_ERR_RUNTIME or the
 * reference outputs. */
static void check_runs(const Case *c, const Run *ref, bool verbose)
{
    disc_model *m;
    disc_status st;
    disc_compiled *cc = build(c, &m, &st);
    Run r = *ref;
    memset(r.out, 0, sizeof r.out);
    run(cc, &r); /* warm: the runtime's caches */
    atomic_store(&calls, 0);
    run(cc, &r);
    long total = atomic_load(&calls);
    int nfail = 0, nok = 0;
    for (long n = 1; n <= total + 1; n++) {
        atomic_store(&calls, 0);
        fail_at = n;
        st = run(cc, &r);
        fail_at = 0;
        if (verbose)
            printf("%s (%s): run, N=%ld: %s\n", c->path, c->backend, n, st ? disc_last_error() : "ran");
        if (st) {
            nfail++;
            CHECK_MSG(st == DISC_ERR_RUNTIME, "%s (%s): run allocation %ld failed: %s", c->path, c->backend, n,
                      disc_last_error());
        } else {
            nok++;
            CHECK_MSG(same_outputs(&r, ref), "%s (%s): run allocation %ld failed and the outputs are wrong",
                      c->path, c->backend, n);
        }
    }
    for (int i = 0; i < r.nout; i++)
        disc_tensor_free(&r.out[i]);
    printf("%s (%s): %ld allocations per run; failing each: %d runs failed with DISC_ERR_RUNTIME, %d ran "
           "correctly\n", c->path, c->backend, total, nfail, nok);
    disc_compiled_free(cc);
    disc_model_free(m);
}

static void check_case(const Case *c, long from, bool verbose)
{
    bool aot = !strcmp(c->backend, "aot");
    /* the clean run: the count and the reference */
    Run ref = {0};
    disc_status st;
    disc_model *m = NULL;
    atomic_store(&calls, 0);
    fail_at = 0;
    disc_compiled *cc = aot ? NULL : build(c, &m, &st);
    DiagKind k = aot ? build_aot(c) : DIAG_NONE;
    long total = atomic_load(&calls);
    bool ok = aot ? k == DIAG_NONE : cc != NULL;
    CHECK_MSG(ok, "%s (%s): %s", c->path, c->backend, aot ? diag_kind_name(k) : disc_last_error());
    if (ok && !aot) {
        ok = make_inputs(m, &ref);
        CHECK_MSG(ok, "%s: the test makes f32 and i64 inputs only", c->path);
        CHECK_MSG(ok && run(cc, &ref) == DISC_OK, "%s: %s", c->path, disc_last_error());
    }
    disc_compiled_free(cc);
    disc_model_free(m);
    if (!ok) {
        free_run(&ref);
        return;
    }

    if (!aot)
        check_runs(c, &ref, verbose);
    int nfail = 0, nok = 0;
    for (long n = from; n <= total + 1; n += c->stride) {
        atomic_store(&calls, 0);
        atomic_store(&failed, false);
        fail_at = n;
        cc = aot ? NULL : build(c, &m, &st);
        k = aot ? build_aot(c) : DIAG_NONE;
        fail_at = 0;
        bool hit = atomic_load(&failed), built = aot ? k == DIAG_NONE : cc != NULL;
        if (verbose)
            printf("%s (%s): N=%ld: %s%s\n", c->path, c->backend, n,
                   built ? "compiled" : aot ? diag_kind_name(k) : disc_last_error(), hit ? "" : " (no failure)");
        if (!built) {
            nfail++;
            CHECK_MSG(hit && (aot ? k == DIAG_RESOURCE : st == DISC_ERR_RUNTIME),
                      "%s (%s): allocation %ld failed: %s", c->path, c->backend, n,
                      aot ? diag_kind_name(k) : disc_last_error());
        } else if (!aot) {
            nok++;
            Run r = ref;
            memset(r.out, 0, sizeof r.out);
            CHECK_MSG(run(cc, &r) == DISC_OK && same_outputs(&r, &ref),
                      "%s (%s): allocation %ld failed, the compile went on, and the run is wrong: %s", c->path,
                      c->backend, n, disc_last_error());
            for (int i = 0; i < r.nout; i++)
                disc_tensor_free(&r.out[i]);
        } else {
            nok++;
        }
        disc_compiled_free(cc);
        disc_model_free(m);
    }
    char which[64] = "each";
    if (c->stride > 1)
        snprintf(which, sizeof which, "every %ld-th from %ld", c->stride, from);
    printf("%s (%s): %ld allocations; failing %s: %d compiles failed with a resource error, %d went on%s\n",
           c->path, c->backend, total, which, nfail, nok, aot ? "" : " and ran correctly");
    free_run(&ref);
}

int main(void)
{
    const char *f = getenv("DISC_OOM_FROM"), *s = getenv("DISC_OOM_STRIDE");
    long from = f && atol(f) > 0 ? atol(f) : 1, stride = s && atol(s) > 0 ? atol(s) : 0;
    bool verbose = getenv("DISC_OOM_VERBOSE") != NULL;
    snprintf(aot_dir, sizeof aot_dir, "/tmp/disc_oom_%d", (int)getpid());
    mkdir(aot_dir, 0700);
    static const Case cases[] = {
        {DISC_SOURCE_DIR "/tests/models/mlp_norm/model.onnx", "cpu", 1},
        {DISC_SOURCE_DIR "/tests/models/mlp_norm/model.onnx", "interp", 1},
        {DISC_SOURCE_DIR "/tests/interp/layernorm.disc", "cpu", 1},
        {DISC_SOURCE_DIR "/tests/models/mlp_norm/model.onnx", "aot", 1},
        {DISC_SOURCE_DIR "/tests/models/bert_encoder/model.onnx", "cpu", 11},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Case c = cases[i];
        if (stride)
            c.stride = stride;
        check_case(&c, from, verbose);
    }
    rmdir(aot_dir);
    return check_done();
}
