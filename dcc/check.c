/*
 * check.c — `dcc check` and `dcc run`: run a model on concrete tensors.
 *
 *   dcc check DIR [--backend interp] [--rtol R] [--atol A] [--no-shape] [-v]
 *   dcc run MODEL --input NAME=FILE.pb ... --output-dir DIR [--backend interp]
 *
 * `check` reads a directory in the layout of ONNX's backend tests:
 *
 *   DIR/model.onnx
 *   DIR/test_data_set_0/input_0.pb ... output_0.pb ...
 *   DIR/test_data_set_1/...             (each set may have other shapes)
 *
 * The model is compiled once (import, verify, shape analysis) and then run on
 * every data set in name order, each with its own shapes: that is the point
 * of a dynamic-shape compiler. Inputs match graph inputs by position K.
 * Each output is compared with the expected one: dtype and shape exactly,
 * integers and booleans exactly, floats as |got - exp| <= atol + rtol*|exp|
 * with NaN equal to NaN and an infinity equal only to itself. One line per
 * data set says PASS or names the worst element of the first bad output.
 *
 * `run` is the same pipeline for one set of named inputs; it writes the
 * outputs as TensorProto files output_K.pb, named after the graph outputs.
 *
 * Only the reference interpreter exists as a backend yet; the others are
 * named so that asking for them gives a clear message.
 */
#include "dcc/dcc.h"
#include "frontends/model.h"
#include "frontends/onnx/onnx.h"
#include "ir/ir.h"
#include "passes/passes.h"
#include "codegen/codegen.h"
#include "codegen/gpu.h"
#include "runtime/interp.h"
#include "runtime/rt.h" /* disc_rt_prof_pause */

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* Defaults of ONNX's own backend test runner (onnx/backend/test/runner). */
#define CHECK_RTOL 1e-3
#define CHECK_ATOL 1e-7

static const char usage_check_text[] =
    "usage: dcc check DIR [--backend NAME] [--rtol R] [--atol A] [--no-fuse] [--no-shape] [--no-cache]\n"
    "                 [--cache-dir DIR] [-v]\n"
    "\n"
    "Runs a model on the test data of an ONNX backend-test directory: DIR holds\n"
    "model.onnx and test_data_set_*/{input,output}_K.pb. The model is compiled\n"
    "once and run on every data set (each may have different shapes); one line\n"
    "per data set says PASS or FAIL with the worst element.\n"
    "\n"
    "Outputs must match in dtype and shape; integers and booleans exactly;\n"
    "floats when |got - expected| <= atol + rtol * |expected| (NaN equals NaN,\n"
    "an infinity only itself).\n"
    "\n"
    "options:\n"
    "  --backend NAME  interp (the reference interpreter; the default) or cpu\n"
    "                  (native code through LLVM, compiled once for every shape);\n"
    "                  cuda: on an NVIDIA GPU (device 0, or DISC_CUDA_DEVICE;\n"
    "                  the kernels through NVRTC, the host flow on the CPU);\n"
    "                  cuda-emu: the GPU kernels (CUDA C) on an emulator, for\n"
    "                  tests (doc/gpu.md); cuda-emu64: with warps of 64 lanes\n"
    "  --rtol R        relative tolerance (default 1e-3, as ONNX's backend tests)\n"
    "  --atol A        absolute tolerance (default 1e-7, as ONNX's backend tests)\n"
    "  --no-fuse       cpu: one kernel per op (the unfused baseline)\n"
    "  --threads N     cpu: threads per run (default: every core)\n"
    "  --cpu CPU       cpu: the CPU to compile for, as LLVM names it (x86-64,\n"
    "                  x86-64-v3, x86-64-v4, skylake-avx512; default native, or\n"
    "                  the environment's DISC_CPU)\n"
    "  --dump-after=P  cpu: print the IR after pass P (shape, layout, canon, fusion,\n"
    "                  memplan, llvm) on stderr\n"
    "  --no-shape      interp: skip shape analysis (run the imported graph as is)\n"
    "  --no-cache      cpu: compile from scratch, neither reading nor writing the\n"
    "                  cache of compiled code (DISC_CACHE=0 does the same); an ONNX\n"
    "                  model's large weights are then copied at load, not kept\n"
    "                  aligned in the cache's directory\n"
    "  --cache-dir DIR cpu: that cache's directory (default $DISC_CACHE_DIR, else\n"
    "                  $HOME/.cache/disc/jit)\n"
    "  -v              also print per-output errors, full messages, compile times,\n"
    "                  whether the compile was a cache hit, and how the model's\n"
    "                  large weights were loaded\n"
    "\n"
    "exit status: 0 every data set passed, 1 a failure or an error in the\n"
    "input, 2 usage error\n";

static const char usage_bench[] =
    "usage: dcc bench DIR [--backend NAME] [--runs N] [--threads N] [--cpu CPU] [--no-fuse] [--no-cache]\n"
    "                 [--cache-dir DIR] [-v]\n"
    "\n"
    "Compiles the model of an ONNX backend-test directory once (the time is\n"
    "printed), then for every data set checks the outputs once and times N runs\n"
    "(default 20): median, min and max per data set, and the median CPU time of\n"
    "the process per run (all threads; at --threads 1, a figure that load from\n"
    "other processes disturbs less than the wall time). With DISC_PROFILE=1 in\n"
    "the environment, the profile printed at exit covers the timed runs only\n"
    "(each set's first run, which creates oneDNN's primitives and packs\n"
    "weights, is left out).\n"
    "\n"
    "options:\n"
    "  --backend NAME  cpu (the default), cuda or interp\n"
    "  --runs N        timed runs per data set\n"
    "  --threads N     threads per run (default: every core)\n"
    "  --cpu CPU       the CPU to compile for (see dcc check --help)\n"
    "  --no-fuse       one kernel per op (the unfused baseline)\n"
    "  --no-cache      compile from scratch, neither reading nor writing the\n"
    "                  cache of compiled code (see dcc check --help)\n"
    "  --cache-dir DIR that cache's directory\n"
    "  -v              compile times per stage, and whether the compile was a\n"
    "                  cache hit\n";

static const char usage_run[] =
    "usage: dcc run MODEL --input NAME=FILE.pb ... --output-dir DIR [--backend NAME]\n"
    "               [--no-shape] [--no-cache]\n"
    "\n"
    "Compiles MODEL (.onnx, or IR text), runs it on the given TensorProto files\n"
    "(every graph input once, by name) and writes DIR/output_K.pb for each\n"
    "output K, named after the graph output; DIR is created if needed. Prints\n"
    "each output's name, dtype and shape.\n"
    "\n"
    "options:\n"
    "  --input NAME=FILE  the value of graph input NAME (repeatable)\n"
    "  --output-dir DIR   where the outputs go\n"
    "  --backend NAME     interp (the reference interpreter; the default)\n"
    "  --no-shape         skip shape analysis (run the imported graph as is)\n"
    "  --no-cache         cpu: compile from scratch, neither reading nor writing\n"
    "                     the cache of compiled code (see dcc check --help)\n"
    "\n"
    "exit status: 0 success, 1 error in the input, 2 usage error, 3 system error\n";

static int usage(const char *fmt, const char *arg, const char *text)
{
    fprintf(stderr, "dcc: error: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n%s", text);
    return EXIT_USAGE;
}

/* Backends: interp; cpu and cuda (compiled: exec.c, gpurun.c), and cuda-emu,
 * cuda-emu64 (the GPU kernels on the emulator, for tests: codegen/emu.c). */
static bool is_emu(const char *name) { return !strcmp(name, "cuda-emu") || !strcmp(name, "cuda-emu64"); }
static bool is_gpu(const char *name) { return is_emu(name) || !strcmp(name, "cuda"); }

static int check_backend(const char *name, const char *text)
{
    static const char *const later[] = {"hip"};
    if (!strcmp(name, "interp") || !strcmp(name, "cpu") || is_emu(name))
        return 0;
    if (!strcmp(name, "cuda")) {
        Diag d = {0};
        if (!gpu_cuda_driver_check(&d)) {
            fprintf(stderr, "dcc: %s\n", d.msg);
            return dcc_exit_code(&d);
        }
        return 0;
    }
    for (size_t i = 0; i < sizeof later / sizeof later[0]; i++)
        if (!strcmp(name, later[i])) {
            fprintf(stderr, "dcc: error: backend '%s' is not available yet (backends: interp, cpu, cuda, cuda-emu, cuda-emu64)\n", name);
            return EXIT_USAGE;
        }
    return usage("unknown backend '%s' (backends: interp, cpu, cuda, cuda-emu, cuda-emu64)", name, text);
}

static char *path_join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static bool file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* ------------------------------------------------------------------ */
/* The compiled model                                                   */

typedef struct Model Model;
struct Model {
    Graph *g;
    ShapeInfo *si;   /* NULL with --no-shape */
    Exec *exec;      /* the cpu backend's compiled model */
    char **inames;   /* graph input names, as the user sees them */
    char **onames;   /* graph output names */
    /* how it was compiled, for the untied model (model_exec) */
    const char *path, *backend;
    bool no_shape;
    CgOpts co;
    Model *untied;
    bool untied_tried;
};

static void model_free(Model *m)
{
    if (m->g) {
        for (int i = 0; m->inames && i < m->g->ninputs; i++)
            free(m->inames[i]);
        for (int i = 0; m->onames && i < m->g->noutputs; i++)
            free(m->onames[i]);
    }
    free(m->inames);
    free(m->onames);
    if (m->si)
        shape_info_free(m->si);
    exec_free(m->exec);
    graph_free(m->g);
    if (m->untied) {
        model_free(m->untied);
        free(m->untied);
    }
    memset(m, 0, sizeof *m);
}

/* Names taken before shape analysis rewrites the graph: a value's own name,
 * else the printer's. */
static char **value_names(Graph *g, Value **vs, int n, char **printed)
{
    char **out = calloc((size_t)n + 1, sizeof *out);
    if (!out)
        return NULL;
    for (int i = 0; i < n; i++) {
        const char *s = vs[i]->name ? vs[i]->name : printed ? printed[vs[i]->id] : NULL;
        char buf[32];
        if (!s) {
            snprintf(buf, sizeof buf, "%d", vs[i]->id);
            s = buf;
        }
        if (*s == '%')
            s++;
        if (!(out[i] = strdup(s))) {
            for (int k = 0; k < i; k++)
                free(out[k]);
            free(out);
            return NULL;
        }
    }
    return out;
}

/* Compiles g (taken over) for m's backend, or (unless m->no_shape)
 * analyses its shapes for the interpreter. False with d set. */
static bool model_build(Model *m, Graph *g, Diag *d)
{
    m->g = g;
    char **printed = graph_value_names(m->g);
    m->inames = value_names(m->g, m->g->inputs, m->g->ninputs, printed);
    m->onames = value_names(m->g, m->g->outputs, m->g->noutputs, printed);
    graph_value_names_free(m->g, printed);
    if (!m->inames || !m->onames)
        return diag_oom(d);
    if (!strcmp(m->backend, "cpu") || is_gpu(m->backend)) {
        CgOpts o = m->co;
        o.gpu = strcmp(m->backend, "cpu") ? m->backend : NULL;
        return (m->exec = exec_compile(m->g, NULL, &o, d)) != NULL;
    }
    if (m->no_shape)
        return true;
    ShapeOpts so = {NULL, 0};
    return (m->si = shape_analyze(m->g, &so, d)) != NULL;
}

/* Imports or parses, verifies and (unless no_shape) analyses shapes. Prints
 * the error and returns an exit status on failure. */
static int model_open(Model *m, const char *path, bool no_shape, const char *backend, const CgOpts *co)
{
    Diag d = {0};
    *m = (Model){.path = path, .backend = backend, .no_shape = no_shape, .co = *co};
    int rc = 0;
    Graph *g = dcc_load(path, co, &rc);
    if (!g)
        return rc;
    if (!model_build(m, g, &d)) {
        bool shapes = strcmp(backend, "cpu") && !is_gpu(backend) && m->inames && m->onames;
        fprintf(stderr, "%s: %s%s\n", path, shapes ? "shape analysis: " : "", d.msg);
        model_free(m);
        return dcc_exit_code(&d);
    }
    return 0;
}

/* The model imported again without the ties its ONNX dim names made
 * (doc/onnx.md, "Dim names"), compiled the same way, at the first call;
 * NULL where there is none. */
static Model *model_untied(Model *m)
{
    if (m->untied_tried)
        return m->untied;
    m->untied_tried = true;
    if (!m->g->tied_dims || !model_is_onnx(m->path))
        return NULL;
    Diag d = {0};
    char store[4096];
    Model *u = calloc(1, sizeof *u);
    Graph *g = u ? model_load_untied(m->path, dcc_store(&m->co, store, sizeof store), NULL, &d) : NULL;
    if (!g) {
        free(u);
        return NULL;
    }
    *u = (Model){.path = m->path, .backend = m->backend, .no_shape = m->no_shape, .co = m->co};
    if (!model_build(u, g, &d)) {
        model_free(u);
        free(u);
        return NULL;
    }
    if (m->co.verbose)
        fprintf(stderr, "dcc: the inputs break a tie of the model's dim names; running it as imported "
                        "without the ties\n");
    return m->untied = u;
}

/* Runs the compiled model: the host program's input checks, then the
 * backend. outputs has g->noutputs entries. Inputs that break a tie of
 * the model's dim names run on the untied model (whose error, where it
 * refuses them too, is the one the computation itself makes). */
static bool model_exec(Model *m, const Tensor *in, int nin, Tensor *out, Diag *d)
{
    bool ok;
    if (m->exec)
        ok = exec_run(m->exec, in, nin, out, m->g->noutputs, d);
    else
        ok = (!m->si || shape_check_inputs(m->si, in, nin, d)) && interp_run(m->g, in, nin, out, m->g->noutputs, d);
    Model *u = !ok && d->kind == DIAG_SHAPE ? model_untied(m) : NULL;
    if (!u)
        return ok;
    *d = (Diag){0};
    return model_exec(u, in, nin, out, d);
}

static void print_shape(FILE *f, const int64_t *shape, int rank)
{
    fputc('[', f);
    for (int i = 0; i < rank; i++)
        fprintf(f, "%s%lld", i ? ", " : "", (long long)shape[i]);
    fputc(']', f);
}

static int shape_snprint(char *buf, size_t n, const int64_t *shape, int rank)
{
    size_t len = 0;
    len += (size_t)snprintf(buf + len, len < n ? n - len : 0, "[");
    for (int i = 0; i < rank; i++)
        len += (size_t)snprintf(buf + len, len < n ? n - len : 0, "%s%lld", i ? ", " : "",
                                (long long)shape[i]);
    len += (size_t)snprintf(buf + len, len < n ? n - len : 0, "]");
    return (int)len;
}

/* ------------------------------------------------------------------ */
/* Comparison                                                           */

/* How far got is outside the tolerance around exp: 0 if within it. */
static double excess(double got, double exp, double rtol, double atol)
{
    if (isnan(exp) || isnan(got))
        return isnan(exp) && isnan(got) ? 0 : INFINITY;
    if (isinf(exp) || isinf(got))
        return got == exp ? 0 : INFINITY;
    double diff = fabs(got - exp), tol = atol + rtol * fabs(exp);
    return diff <= tol ? 0 : diff - tol;
}

/* Compares one output; false with the reason in msg. *maxerr gets the
 * largest absolute difference (floats) for -v. */
static bool compare(const Tensor *got, const Tensor *exp, double rtol, double atol, char *msg,
                    size_t msglen, double *maxerr)
{
    *maxerr = 0;
    if (got->dtype != exp->dtype) {
        snprintf(msg, msglen, "dtype %s, expected %s", dtype_name(got->dtype), dtype_name(exp->dtype));
        return false;
    }
    bool same = got->rank == exp->rank;
    for (int i = 0; same && i < got->rank; i++)
        same = got->shape[i] == exp->shape[i];
    if (!same) {
        char a[256], b[256];
        shape_snprint(a, sizeof a, got->shape, got->rank);
        shape_snprint(b, sizeof b, exp->shape, exp->rank);
        snprintf(msg, msglen, "shape %s, expected %s", a, b);
        return false;
    }
    size_t n = tensor_numel(exp), nbad = 0, worst = 0;
    double worst_ex = -1;
    bool fl = dtype_is_float(exp->dtype);
    for (size_t i = 0; i < n; i++) {
        bool bad;
        if (fl) {
            double g = interp_load_f(got, i), e = interp_load_f(exp, i);
            double ex = excess(g, e, rtol, atol);
            if (!isnan(g) && !isnan(e) && !isinf(g) && !isinf(e) && fabs(g - e) > *maxerr)
                *maxerr = fabs(g - e);
            bad = ex > 0;
            if (bad && ex > worst_ex) {
                worst_ex = ex;
                worst = i;
            }
        } else {
            int64_t g = interp_load_i(got, i), e = interp_load_i(exp, i);
            double ex = fabs((double)g - (double)e);
            bad = g != e;
            if (bad && ex > worst_ex) {
                worst_ex = ex;
                worst = i;
            }
        }
        nbad += bad;
    }
    if (nbad == 0)
        return true;
    /* The multi-index of the worst element. */
    int64_t idx[MAX_RANK];
    size_t rest = worst;
    for (int k = exp->rank - 1; k >= 0; k--) {
        int64_t s = exp->shape[k] > 0 ? exp->shape[k] : 1;
        idx[k] = (int64_t)(rest % (size_t)s);
        rest /= (size_t)s;
    }
    char where[256], ev[64], gv[64];
    shape_snprint(where, sizeof where, idx, exp->rank);
    if (fl) {
        snprintf(ev, sizeof ev, "%.9g", interp_load_f(exp, worst));
        snprintf(gv, sizeof gv, "%.9g", interp_load_f(got, worst));
    } else {
        snprintf(ev, sizeof ev, "%lld", (long long)interp_load_i(exp, worst));
        snprintf(gv, sizeof gv, "%lld", (long long)interp_load_i(got, worst));
    }
    snprintf(msg, msglen, "worst element %s: expected %s, got %s (%zu of %zu elements differ)", where,
             ev, gv, nbad, n);
    return false;
}

/* ------------------------------------------------------------------ */
/* dcc check                                                            */

typedef struct CheckOpts {
    double rtol, atol;
    bool verbose;
    bool bench;      /* dcc bench: time the runs instead of checking */
    int runs;
} CheckOpts;

/* Data-set names in order: by length first, so test_data_set_10 follows
 * test_data_set_9. */
static int set_cmp(const void *a, const void *b)
{
    const char *x = *(const char *const *)a, *y = *(const char *const *)b;
    size_t n = strlen(x), m = strlen(y);
    return n != m ? (n < m ? -1 : 1) : strcmp(x, y);
}

/* Number of consecutive files PREFIX_0.pb, PREFIX_1.pb, ... in dir. */
static int count_files(const char *dir, const char *prefix)
{
    int k = 0;
    for (;; k++) {
        char name[64];
        snprintf(name, sizeof name, "%s_%d.pb", prefix, k);
        char *p = path_join(dir, name);
        bool ok = p && file_exists(p);
        free(p);
        if (!ok)
            return k;
    }
}

static void free_tensors(Tensor *t, int n)
{
    for (int i = 0; t && i < n; i++)
        tensor_free(&t[i]);
    free(t);
}

/* Reads dir/PREFIX_K.pb for K < n into a new array; NULL with d set. */
static Tensor *read_tensors(const char *dir, const char *prefix, int n, Diag *d)
{
    Tensor *t = calloc((size_t)n + 1, sizeof *t);
    if (!t) {
        diag_oom(d);
        return NULL;
    }
    for (int k = 0; k < n; k++) {
        char name[64];
        snprintf(name, sizeof name, "%s_%d.pb", prefix, k);
        char *p = path_join(dir, name);
        bool ok = p && onnx_read_tensor_file(p, &t[k], NULL, d);
        if (!p)
            diag_oom(d);
        free(p);
        if (!ok) {
            free_tensors(t, k);
            return NULL;
        }
    }
    return t;
}

/* ONNX stores bfloat16 test data as UINT16 TensorProtos holding the bf16
 * bit patterns (onnx's numpy_helper has no bfloat16 dtype). Where the model
 * declares a bf16 value and the file holds u16, the bits are a bf16 tensor:
 * retag it, so that inputs bind and outputs compare as bf16 numbers. */
static void retag_bf16(Tensor *t, int n, Value *const *vs)
{
    for (int k = 0; t && k < n; k++)
        if (t[k].dtype == DT_U16 && vs[k]->type.dtype == DT_BF16)
            t[k].dtype = DT_BF16;
}

/* One data set: prints its line; true if it passed. */
static bool check_set(Model *m, const char *dir, const char *set, const CheckOpts *o)
{
    char *sdir = path_join(dir, set);
    Diag d = {0};
    Graph *g = m->g;
    int nin = count_files(sdir, "input"), nout = count_files(sdir, "output");
    Tensor *in = NULL, *exp = NULL, *got = NULL;
    bool pass = false;
    if (nin != g->ninputs) {
        diag_set(&d, "error: %d input files, the model has %d inputs", nin, g->ninputs);
    } else if (nout != g->noutputs) {
        diag_set(&d, "error: %d output files, the model has %d outputs", nout, g->noutputs);
    } else if ((in = read_tensors(sdir, "input", nin, &d)) && (exp = read_tensors(sdir, "output", nout, &d))) {
        retag_bf16(in, nin, g->inputs);
        retag_bf16(exp, nout, g->outputs);
        if (!(got = calloc((size_t)nout + 1, sizeof *got)))
            diag_oom(&d);
        else if (model_exec(m, in, nin, got, &d))
            pass = true;
    }
    if (!pass) {
        const char *msg = strncmp(d.msg, "error: ", 7) ? d.msg : d.msg + 7;
        printf("%s: FAIL %s\n", set, msg);
    } else {
        char msg[1024];
        double maxerr;
        for (int k = 0; k < nout; k++) {
            bool ok = compare(&got[k], &exp[k], o->rtol, o->atol, msg, sizeof msg, &maxerr);
            if (!ok && pass) {
                printf("%s: FAIL output %d (\"%s\"): %s\n", set, k, m->onames[k], msg);
                pass = false;
            }
            if (o->verbose) {
                printf("  output %d (\"%s\"): %s", k, m->onames[k], dtype_name(got[k].dtype));
                print_shape(stdout, got[k].shape, got[k].rank);
                if (ok)
                    printf(", max abs error %.3g\n", maxerr);
                else
                    printf(": %s\n", msg);
            }
        }
        if (pass)
            printf("%s: PASS\n", set);
    }
    free_tensors(in, nin);
    free_tensors(exp, nout);
    free_tensors(got, nout);
    free(sdir);
    return pass;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The CPU time of the process, all threads: on a loaded machine a run at
 * one thread costs about the same CPU time however long it waited. */
static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int dbl_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One data set timed: checks it once, then runs it o->runs times. */
static bool bench_set(Model *m, const char *dir, const char *set, const CheckOpts *o)
{
    CheckOpts quiet = *o;
    quiet.verbose = false;
    disc_rt_prof_pause(1); /* DISC_PROFILE: the timed runs only */
    bool checked = check_set(m, dir, set, &quiet);
    disc_rt_prof_pause(0);
    if (!checked)
        return false;
    char *sdir = path_join(dir, set);
    Diag d = {0};
    int nin = m->g->ninputs, nout = m->g->noutputs;
    Tensor *in = read_tensors(sdir, "input", nin, &d);
    Tensor *got = calloc((size_t)nout + 1, sizeof *got);
    double *t = calloc((size_t)o->runs * 2, sizeof *t), *cpu = t ? t + o->runs : NULL;
    bool ok = in && got && t;
    for (int r = 0; ok && r < o->runs; r++) {
        double t0 = now(), c0 = cpu_now();
        ok = model_exec(m, in, nin, got, &d);
        t[r] = now() - t0;
        cpu[r] = cpu_now() - c0;
        for (int k = 0; k < nout; k++)
            tensor_free(&got[k]);
    }
    if (ok) {
        qsort(t, (size_t)o->runs, sizeof *t, dbl_cmp);
        qsort(cpu, (size_t)o->runs, sizeof *cpu, dbl_cmp);
        char shape[256] = "";
        for (int i = 0; i < nin; i++) {
            size_t n = strlen(shape);
            if (n < sizeof shape)
                snprintf(shape + n, sizeof shape - n, "%s", i ? " " : "");
            n = strlen(shape);
            shape_snprint(shape + n, sizeof shape - n, in[i].shape, in[i].rank);
        }
        double med = t[o->runs / 2];
        printf("%s: %s median %.3f ms, min %.3f ms, max %.3f ms over %d runs; cpu time median %.3f ms\n", set,
               shape, 1e3 * med, 1e3 * t[0], 1e3 * t[o->runs - 1], o->runs, 1e3 * cpu[o->runs / 2]);
    } else {
        printf("%s: FAIL %s\n", set, d.msg);
    }
    free_tensors(in, nin);
    free(got);
    free(t);
    free(sdir);
    return ok;
}

static bool parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !(v >= 0) || isinf(v))
        return false;
    *out = v;
    return true;
}

static int check_or_bench(int argc, char **argv, bool bench)
{
    const char *usage_check = bench ? usage_bench : usage_check_text;
    const char *dir = NULL, *backend = bench ? "cpu" : "interp";
    CheckOpts o = {CHECK_RTOL, CHECK_ATOL, false, bench, 20};
    CgOpts co = {.opt_level = 3};
    bool no_shape = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage_check, stdout);
            return 0;
        } else if (!strcmp(a, "--backend") || !strcmp(a, "--rtol") || !strcmp(a, "--atol") ||
                   !strcmp(a, "--runs") || !strcmp(a, "--threads") || !strcmp(a, "--cpu") ||
                   !strcmp(a, "--cache-dir")) {
            if (i + 1 >= argc)
                return usage("%s needs a value", a, usage_check);
            const char *v = argv[++i];
            double x;
            if (!strcmp(a, "--runs") || !strcmp(a, "--threads")) {
                if (!parse_double(v, &x) || x != (int)x || x > 1e6 || (x < 1 && !strcmp(a, "--runs")))
                    return usage("bad count '%s'", v, usage_check);
                if (!strcmp(a, "--runs"))
                    o.runs = (int)x;
                else
                    co.threads = (int)x;
            } else if (!strcmp(a, "--backend"))
                backend = v;
            else if (!strcmp(a, "--cpu"))
                co.cpu = v;
            else if (!strcmp(a, "--cache-dir"))
                co.cache_dir = v;
            else if (!parse_double(v, !strcmp(a, "--rtol") ? &o.rtol : &o.atol))
                return usage("bad tolerance '%s' (a number >= 0)", v, usage_check);
        } else if (!strcmp(a, "-v")) {
            o.verbose = true;
            co.verbose = true;
        } else if (!strcmp(a, "--no-shape")) {
            no_shape = true;
        } else if (!strcmp(a, "--no-fuse")) {
            co.unfused = true;
        } else if (!strcmp(a, "--no-cache")) {
            co.no_cache = true;
        } else if (!strncmp(a, "--dump-after=", 13)) {
            co.dump_after = a + 13;
            if (cg_stage_from_name(co.dump_after) == CG_NSTAGES) {
                fprintf(stderr, "dcc: error: --dump-after=%s: passes are %s\n%s", co.dump_after, cg_stage_names(),
                        usage_check);
                return EXIT_USAGE;
            }
        } else if (a[0] == '-' && a[1]) {
            return usage("unknown option '%s'", a, usage_check);
        } else if (dir) {
            return usage("more than one directory ('%s')", a, usage_check);
        } else {
            dir = a;
        }
    }
    if (!dir)
        return usage("%s", "no test directory", usage_check);
    int rc = check_backend(backend, usage_check);
    if (rc)
        return rc;

    /* The data sets, sorted. */
    DIR *dp = opendir(dir);
    if (!dp) {
        fprintf(stderr, "%s: error: cannot open directory: %s\n", dir, strerror(errno));
        return EXIT_INPUT;
    }
    char **sets = NULL;
    int nsets = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(dp))) {
        if (strncmp(e->d_name, "test_data_set_", 14) != 0)
            continue;
        if (nsets == cap) {
            cap = cap ? 2 * cap : 8;
            char **p = realloc(sets, (size_t)cap * sizeof *p);
            if (!p)
                break;
            sets = p;
        }
        if (!(sets[nsets] = strdup(e->d_name)))
            break;
        nsets++;
    }
    closedir(dp);
    if (nsets == 0) {
        fprintf(stderr, "%s: error: no test_data_set_* directories\n", dir);
        free(sets);
        return EXIT_INPUT;
    }
    qsort(sets, (size_t)nsets, sizeof *sets, set_cmp);

    char *model = path_join(dir, "model.onnx");
    Model m;
    double t0 = now();
    rc = model ? model_open(&m, model, no_shape, backend, &co) : EXIT_SYSTEM;
    if (rc == 0 && o.bench)
        printf("%s: compiled once in %.1f ms (backend %s; %d ops, %d kernels)\n", model, 1e3 * (now() - t0), backend,
               m.g->nops, m.exec ? exec_kernel_count(m.exec) : 0);
    if (rc == 0) {
        if (o.verbose)
            printf("%s: %d inputs, %d outputs, %d ops, %d data sets\n", model, m.g->ninputs,
                   m.g->noutputs, m.g->nops, nsets);
        int npass = 0;
        for (int i = 0; i < nsets; i++)
            npass += o.bench ? bench_set(&m, dir, sets[i], &o) : check_set(&m, dir, sets[i], &o);
        if (o.verbose)
            printf("%d of %d data sets passed\n", npass, nsets);
        rc = npass == nsets ? 0 : EXIT_INPUT;
        model_free(&m);
    } else if (rc == EXIT_SYSTEM) {
        rc = EXIT_INPUT;
    }
    free(model);
    for (int i = 0; i < nsets; i++)
        free(sets[i]);
    free(sets);
    return rc;
}

/* ------------------------------------------------------------------ */
/* dcc fuzz-shapes                                                      */

static const char usage_fuzz[] =
    "usage: dcc fuzz-shapes DIR [--n N] [--seed S] [--max-dim D] [--backend NAME] [--rtol R]\n"
    "                       [--atol A] [--float-range R] [--threads N] [-v]\n"
    "\n"
    "Draws N random bindings of the symbols of the inputs' dims of the model in\n"
    "DIR (model.onnx; its test_data_set_* give the range of integer inputs, as\n"
    "token ids), runs each on the backend and on the reference interpreter, and\n"
    "compares: where the interpreter runs the inputs, the backend must give\n"
    "its outputs within the tolerance; where it refuses them, the backend must\n"
    "refuse them too with a shape error that names an input, or, where the\n"
    "inputs' values are at fault (a shape tensor's negative entry), with the\n"
    "interpreter's own error naming the op. Where the interpreter refuses\n"
    "the drawn integers as out of an op's range at the binding's shapes (an\n"
    "index past its table) and the backend runs them (compiled kernels do not\n"
    "check indices), the binding is run again with its integer inputs zero.\n"
    "A symbol is 1\n"
    "a quarter of the time, else uniform in its bounds up to D; every fourth\n"
    "binding draws each input dim on its own instead, which breaks the ties of\n"
    "the model's dim names and, often, its rules: the refusals are tested too.\n"
    "On cuda, a binding that ran runs twice more on its inputs reversed (the\n"
    "second run at a shape captures a CUDA graph, the third replays it).\n"
    "\n"
    "options:\n"
    "  --n N          bindings (default 100)\n"
    "  --seed S       the random seed (default 1)\n"
    "  --max-dim D    the largest value drawn for a symbol (default 24)\n"
    "  --backend NAME cpu (the default), cuda, cuda-emu or cuda-emu64\n"
    "  --rtol R       relative tolerance (default 1e-3)\n"
    "  --atol A       absolute tolerance (default 1e-4)\n"
    "  --float-range R float inputs uniform in [-R, R] (default 2)\n"
    "  --threads N    cpu: threads per run\n"
    "  -v             a line per binding\n"
    "\n"
    "exit status: 0 every binding agreed, 1 a disagreement or an error in the\n"
    "input, 2 usage error\n";

/* msg less a leading "error: " (the interpreter's messages have none). */
static const char *unprefixed(const char *msg)
{
    return strncmp(msg, "error: ", 7) ? msg : msg + 7;
}

static uint64_t fuzz_next(uint64_t *st)
{
    *st ^= *st << 13;
    *st ^= *st >> 7;
    *st ^= *st << 17;
    return *st;
}

/* Integer inputs' value ranges from the data sets (token ids must index
 * their tables): lo[i], hi[i]; 0, 0 where no data set has input i. */
static void fuzz_ranges(const char *dir, int nin, int64_t *lo, int64_t *hi)
{
    for (int i = 0; i < nin; i++)
        lo[i] = INT64_MAX, hi[i] = INT64_MIN;
    for (int k = 0;; k++) {
        char set[64];
        snprintf(set, sizeof set, "test_data_set_%d", k);
        char *sdir = path_join(dir, set);
        Diag d = {0};
        struct stat st;
        bool isdir = sdir && stat(sdir, &st) == 0 && S_ISDIR(st.st_mode);
        Tensor *t = isdir && count_files(sdir, "input") == nin ? read_tensors(sdir, "input", nin, &d) : NULL;
        free(sdir);
        if (!t)
            break;
        for (int i = 0; i < nin; i++)
            for (size_t e = 0; !dtype_is_float(t[i].dtype) && e < tensor_numel(&t[i]); e++) {
                int64_t v = interp_load_i(&t[i], e);
                lo[i] = v < lo[i] ? v : lo[i];
                hi[i] = v > hi[i] ? v : hi[i];
            }
        free_tensors(t, nin);
    }
    for (int i = 0; i < nin; i++)
        if (lo[i] > hi[i])
            lo[i] = hi[i] = 0;
}

/* One binding: the inputs' shapes from the symbols' values (where
 * `loose`, a dim that is a symbol gets a value of its own at each use,
 * up to maxdim, which breaks the ties of the model's names and often its
 * rules), random data. */
static bool fuzz_inputs(const Graph *g, const int64_t *val, const int64_t *lo, const int64_t *hi, uint64_t *st,
                        bool loose, int64_t maxdim, double frange, Tensor *in, Diag *d)
{
    bool bound[256];
    memset(bound, 1, sizeof bound);
    DimEnv env = {(int64_t *)val, bound, g->dims.nsyms < 256 ? g->dims.nsyms : 256};
    for (int i = 0; i < g->ninputs; i++) {
        const Type *t = &g->inputs[i]->type;
        int64_t shape[MAX_RANK];
        for (int k = 0; k < t->rank; k++) {
            uint64_t r = fuzz_next(st);
            const Dim *y = t->dims[k];
            if (loose && y->kind == DIM_SYM && y->hi != DIM_INF && r % 2)
                shape[k] = y->hi + 1; /* past its bound */
            else if (loose && y->kind == DIM_SYM)
                shape[k] = 1 + (int64_t)(r / 2 % (uint64_t)maxdim);
            else if (dim_eval(y, &env, &shape[k]) != DIM_OK || shape[k] < 0)
                return diag_set(d, "error: input %d dim %d: no value from the symbols", i, k);
        }
        if (!tensor_alloc(&in[i], t->dtype, t->rank, shape))
            return diag_oom(d);
        for (size_t e = 0; e < tensor_numel(&in[i]); e++) {
            uint64_t x = fuzz_next(st);
            if (dtype_is_float(t->dtype))
                interp_store_f(&in[i], e, ((double)(x % 20001) / 10000.0 - 1.0) * frange);
            else
                interp_store_i(&in[i], e, lo[i] + (int64_t)(x % (uint64_t)(hi[i] - lo[i] + 1)));
        }
    }
    return true;
}

/* Whether got differs from want (n outputs) beyond the tolerance; the
 * first such output, after what (a prefix), in why. */
static bool outputs_differ(const Tensor *got, const Tensor *want, int n, double rtol, double atol, const char *what,
                           char *why, size_t nwhy)
{
    double maxerr;
    char msg[DIAG_MAX + 64];
    for (int k = 0; k < n; k++)
        if (!compare(&got[k], &want[k], rtol, atol, msg, sizeof msg, &maxerr)) {
            snprintf(why, nwhy, "%soutput %d: %s", what, k, msg);
            return true;
        }
    return false;
}

/* Sets every integer input's elements to 0; whether there was one. */
static bool zero_ints(Tensor *in, int nin)
{
    bool any = false;
    for (int i = 0; i < nin; i++)
        if (!dtype_is_float(in[i].dtype) && tensor_numel(&in[i])) {
            memset(in[i].data, 0, tensor_numel(&in[i]) * dtype_size(in[i].dtype));
            any = true;
        }
    return any;
}

/* The cuda backend at the binding it has just run: twice more on the
 * inputs with their elements reversed (new values at the same shapes:
 * the second run at them captures a CUDA graph, the third replays it),
 * each against the interpreter on those inputs; a why where they differ.
 * Nothing where the interpreter refuses the reversed inputs (their values
 * are shapes). */
static void fuzz_replays(Model *ref, Model *m, const Tensor *in, int nin, double rtol, double atol, char *why,
                         size_t nwhy)
{
    const Graph *g = ref->g;
    Tensor rev[nin + 1], want[g->noutputs + 1], got[g->noutputs + 1];
    memset(rev, 0, sizeof rev);
    memset(want, 0, sizeof want);
    bool ok = true;
    for (int i = 0; i < nin && ok; i++) {
        size_t es = dtype_size(in[i].dtype), n = tensor_numel(&in[i]);
        if (!(ok = tensor_alloc(&rev[i], in[i].dtype, in[i].rank, in[i].shape)))
            break;
        for (size_t e = 0; e < n; e++)
            memcpy((char *)rev[i].data + e * es, (const char *)in[i].data + (n - 1 - e) * es, es);
    }
    Diag dr = {0};
    if (ok && model_exec(ref, rev, nin, want, &dr)) {
        for (int r = 0; r < 2 && !*why; r++) {
            Diag dm = {0};
            memset(got, 0, sizeof got);
            char what[32];
            snprintf(what, sizeof what, "run %d, ", r + 2);
            if (!model_exec(m, rev, nin, got, &dm))
                snprintf(why, nwhy, "run %d at the binding (reversed inputs): %s", r + 2, dm.msg);
            else
                outputs_differ(got, want, g->noutputs, rtol, atol, what, why, nwhy);
            for (int k = 0; k < g->noutputs; k++)
                tensor_free(&got[k]);
        }
        for (int k = 0; k < g->noutputs; k++)
            tensor_free(&want[k]);
    }
    for (int i = 0; i < nin; i++)
        tensor_free(&rev[i]);
}

int dcc_fuzz_shapes(int argc, char **argv)
{
    const char *dir = NULL, *backend = "cpu";
    double n = 100, seed = 1, maxdim = 24, rtol = 1e-3, atol = 1e-4, threads = 0, frange = 2;
    bool verbose = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage_fuzz, stdout);
            return 0;
        } else if (!strcmp(a, "-v")) {
            verbose = true;
        } else if (!strcmp(a, "--backend")) {
            if (++i >= argc)
                return usage("%s needs a value", a, usage_fuzz);
            backend = argv[i];
        } else if (!strcmp(a, "--n") || !strcmp(a, "--seed") || !strcmp(a, "--max-dim") || !strcmp(a, "--rtol") ||
                   !strcmp(a, "--atol") || !strcmp(a, "--threads") || !strcmp(a, "--float-range")) {
            if (++i >= argc)
                return usage("%s needs a value", a, usage_fuzz);
            double *x = !strcmp(a, "--n") ? &n : !strcmp(a, "--seed") ? &seed : !strcmp(a, "--max-dim") ? &maxdim
                        : !strcmp(a, "--rtol") ? &rtol : !strcmp(a, "--atol") ? &atol
                        : !strcmp(a, "--float-range") ? &frange : &threads;
            bool count = x != &rtol && x != &atol && x != &frange;
            if (x == &frange && !(parse_double(argv[i], x) && *x > 0 && *x <= 1e6))
                return usage("bad value '%s' (--float-range: a positive bound)", argv[i], usage_fuzz);
            if (!parse_double(argv[i], x) || (count && (*x != (int64_t)*x || *x < (x == &maxdim) || *x > 1e9)))
                return usage("bad value '%s'", argv[i], usage_fuzz);
        } else if (a[0] == '-' && a[1]) {
            return usage("unknown option '%s'", a, usage_fuzz);
        } else if (dir) {
            return usage("more than one directory ('%s')", a, usage_fuzz);
        } else {
            dir = a;
        }
    }
    if (!dir)
        return usage("%s", "no model directory", usage_fuzz);
    if (strcmp(backend, "cpu") && !is_gpu(backend))
        return usage("--backend %s: fuzz-shapes compares cpu, cuda or cuda-emu with the interpreter", backend, usage_fuzz);
    char *model = path_join(dir, "model.onnx");
    CgOpts co = {.opt_level = 3, .threads = (int)threads};
    Model ref, m;
    int rc = model ? model_open(&ref, model, false, "interp", &co) : EXIT_SYSTEM;
    if (rc == 0 && (rc = model_open(&m, model, false, backend, &co)))
        model_free(&ref);
    if (rc) {
        free(model);
        return rc == EXIT_SYSTEM ? EXIT_INPUT : rc;
    }
    Graph *g = ref.g;
    int nin = g->ninputs, nsyms = g->dims.nsyms < 256 ? g->dims.nsyms : 256;
    int64_t lo[nin + 1], hi[nin + 1], val[256];
    fuzz_ranges(dir, nin, lo, hi);
    uint64_t st = 0x9e3779b97f4a7c15ull ^ (uint64_t)seed * 0xbf58476d1ce4e5b9ull;
    int nrun = 0, nrefused = 0, ndata = 0, nbad = 0, nzeroed = 0;
    for (int b = 0; b < (int)n; b++) {
        char shapes[512] = "";
        size_t sl = 0;
        for (int s = 0; s < nsyms; s++) {
            const Dim *y = g->dims.syms[s];
            int64_t top = y->hi != DIM_INF && y->hi < (int64_t)maxdim ? y->hi : (int64_t)maxdim;
            int64_t bottom = y->lo > 0 ? y->lo : 1;
            uint64_t r = fuzz_next(&st);
            val[s] = r % 4 == 0 || top <= bottom ? bottom : bottom + (int64_t)(r / 4 % (uint64_t)(top - bottom + 1));
        }
        Tensor in[nin + 1], want[g->noutputs + 1], got[g->noutputs + 1];
        memset(in, 0, sizeof in);
        memset(want, 0, sizeof want);
        memset(got, 0, sizeof got);
        Diag d = {0}, dr = {0}, dm = {0};
        if (!fuzz_inputs(g, val, lo, hi, &st, b % 4 == 3, (int64_t)maxdim, frange, in, &d)) {
            fprintf(stderr, "dcc: fuzz-shapes: %s\n", d.msg);
            for (int i = 0; i < nin; i++)
                tensor_free(&in[i]);
            nbad++;
            break;
        }
        for (int i = 0; i < nin && sl < sizeof shapes; i++)
            sl += (size_t)shape_snprint(shapes + sl, sizeof shapes - sl, in[i].shape, in[i].rank);
        bool rok = model_exec(&ref, in, nin, want, &dr), mok = model_exec(&m, in, nin, got, &dm);
        if (!rok && mok && dr.kind != DIAG_SHAPE && zero_ints(in, nin)) {
            /* the drawn integers out of an op's range at these shapes (an
             * index past its table): the interpreter checks them, compiled
             * kernels do not; the shapes are tested again with zeros */
            nzeroed++;
            for (int k = 0; k < g->noutputs; k++)
                tensor_free(&got[k]);
            dr = dm = (Diag){0};
            rok = model_exec(&ref, in, nin, want, &dr);
            mok = model_exec(&m, in, nin, got, &dm);
        }
        char why[DIAG_MAX + 128] = "";
        if (rok != mok) {
            snprintf(why, sizeof why, "the interpreter %s, %s %s: %s", rok ? "runs it" : "refuses it", backend,
                     mok ? "runs it" : "refuses it", rok ? dm.msg : dr.msg);
        } else if (!rok) {
            /* a shape error names an input; an error in the inputs' values
             * (a shape tensor's negative entry) names the op, the same on
             * both */
            bool named = dm.kind == DIAG_SHAPE && strstr(dm.msg, "input \"");
            bool same_op = strstr(dm.msg, "op \"") && !strcmp(unprefixed(dm.msg), unprefixed(dr.msg));
            ndata += !named && same_op;
            if (!named && !same_op)
                snprintf(why, sizeof why, "refused without naming an input: %s", dm.msg);
        } else {
            outputs_differ(got, want, g->noutputs, rtol, atol, "", why, sizeof why);
        }
        if (rok && mok && !*why && !strcmp(backend, "cuda"))
            fuzz_replays(&ref, &m, in, nin, rtol, atol, why, sizeof why);
        nrun += rok && mok && !*why;
        nrefused += !rok && !mok && !*why;
        if (*why) {
            printf("binding %d %s: FAIL %s\n", b, shapes, why);
            nbad++;
        } else if (verbose) {
            printf("binding %d %s: %s\n", b, shapes, rok ? "same outputs" : dr.msg);
        }
        for (int i = 0; i < nin; i++)
            tensor_free(&in[i]);
        for (int k = 0; k < g->noutputs; k++) {
            tensor_free(&want[k]);
            tensor_free(&got[k]);
        }
    }
    printf("%s: %d bindings: %d ran with the same outputs on %s and interp, %d refused by both naming an input, "
           "%d refused by both naming an op (the inputs' values), %d disagreed; %d run again with integer inputs "
           "zero (values the interpreter refused as out of an op's range)\n",
           model, (int)n, nrun, backend, nrefused - ndata, ndata, nbad, nzeroed);
    model_free(&ref);
    model_free(&m);
    free(model);
    return nbad ? EXIT_INPUT : 0;
}

int dcc_check(int argc, char **argv) { return check_or_bench(argc, argv, false); }
int dcc_bench(int argc, char **argv) { return check_or_bench(argc, argv, true); }

/* ------------------------------------------------------------------ */
/* dcc run                                                              */

/* mkdir -p */
static bool make_dirs(const char *path)
{
    char *p = strdup(path);
    if (!p)
        return false;
    bool ok = true;
    for (char *s = p + 1; ok; s++) {
        if (*s != '/' && *s)
            continue;
        char c = *s;
        *s = 0;
        struct stat st;
        if (mkdir(p, 0777) != 0 && !(errno == EEXIST && stat(p, &st) == 0 && S_ISDIR(st.st_mode)))
            ok = false;
        *s = c;
        if (!c)
            break;
    }
    free(p);
    return ok;
}

int dcc_run(int argc, char **argv)
{
    const char *model = NULL, *outdir = NULL, *backend = "interp";
    bool no_shape = false, no_cache = false;
    char **inputs = calloc((size_t)argc + 1, sizeof *inputs); /* NAME=FILE */
    int ninputs = 0, rc = 0;
    if (!inputs) {
        fprintf(stderr, "dcc: error: out of memory\n");
        return EXIT_SYSTEM;
    }
    for (int i = 0; i < argc && rc == 0; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage_run, stdout);
            free(inputs);
            return 0;
        } else if (!strcmp(a, "--input") || !strcmp(a, "--output-dir") || !strcmp(a, "--backend")) {
            if (i + 1 >= argc) {
                rc = usage("%s needs a value", a, usage_run);
                break;
            }
            char *v = argv[++i];
            if (!strcmp(a, "--output-dir"))
                outdir = v;
            else if (!strcmp(a, "--backend"))
                backend = v;
            else if (!strchr(v, '=') || v[0] == '=')
                rc = usage("--input wants NAME=FILE, not '%s'", v, usage_run);
            else
                inputs[ninputs++] = v;
        } else if (!strcmp(a, "--no-shape")) {
            no_shape = true;
        } else if (!strcmp(a, "--no-cache")) {
            no_cache = true;
        } else if (a[0] == '-' && a[1]) {
            rc = usage("unknown option '%s'", a, usage_run);
        } else if (model) {
            rc = usage("more than one model ('%s')", a, usage_run);
        } else {
            model = a;
        }
    }
    if (rc == 0 && !model)
        rc = usage("%s", "no model", usage_run);
    if (rc == 0 && !outdir)
        rc = usage("%s", "no --output-dir", usage_run);
    if (rc == 0)
        rc = check_backend(backend, usage_run);
    if (rc) {
        free(inputs);
        return rc;
    }

    Model m;
    CgOpts co = {.opt_level = 3, .no_cache = no_cache};
    if ((rc = model_open(&m, model, no_shape, backend, &co))) {
        free(inputs);
        return rc;
    }
    Graph *g = m.g;
    Tensor *in = calloc((size_t)g->ninputs + 1, sizeof *in);
    Tensor *out = calloc((size_t)g->noutputs + 1, sizeof *out);
    bool *given = calloc((size_t)g->ninputs + 1, sizeof *given);
    Diag d = {0};
    if (!in || !out || !given) {
        fprintf(stderr, "dcc: error: out of memory\n");
        rc = EXIT_SYSTEM;
    }
    /* Match --input NAME=FILE against the graph inputs. */
    for (int k = 0; rc == 0 && k < ninputs; k++) {
        const char *eq = strchr(inputs[k], '=');
        size_t len = (size_t)(eq - inputs[k]);
        int idx = -1;
        for (int i = 0; i < g->ninputs; i++)
            if (strlen(m.inames[i]) == len && !strncmp(m.inames[i], inputs[k], len))
                idx = i;
        if (idx < 0) {
            fprintf(stderr, "%s: error: the model has no input '%.*s' (inputs:", model, (int)len,
                    inputs[k]);
            for (int i = 0; i < g->ninputs; i++)
                fprintf(stderr, "%s %s", i ? "," : "", m.inames[i]);
            fprintf(stderr, ")\n");
            rc = EXIT_INPUT;
        } else if (given[idx]) {
            fprintf(stderr, "%s: error: input '%s' given twice\n", model, m.inames[idx]);
            rc = EXIT_INPUT;
        } else if (!onnx_read_tensor_file(eq + 1, &in[idx], NULL, &d)) {
            fprintf(stderr, "%s\n", d.msg);
            rc = dcc_exit_code(&d);
        } else {
            retag_bf16(&in[idx], 1, &g->inputs[idx]);
            given[idx] = true;
        }
    }
    for (int i = 0; rc == 0 && i < g->ninputs; i++)
        if (!given[i]) {
            fprintf(stderr, "%s: error: input '%s' is not given (--input %s=FILE.pb)\n", model,
                    m.inames[i], m.inames[i]);
            rc = EXIT_INPUT;
        }
    if (rc == 0 && !model_exec(&m, in, g->ninputs, out, &d)) {
        fprintf(stderr, "%s: %s\n", model, d.msg);
        rc = dcc_exit_code(&d);
    }
    if (rc == 0 && !make_dirs(outdir)) {
        fprintf(stderr, "dcc: error: cannot create directory '%s': %s\n", outdir, strerror(errno));
        rc = EXIT_SYSTEM;
    }
    for (int k = 0; rc == 0 && k < g->noutputs; k++) {
        char name[64];
        snprintf(name, sizeof name, "output_%d.pb", k);
        char *p = path_join(outdir, name);
        if (!p || !onnx_write_tensor_file(p, &out[k], m.onames[k], &d)) {
            fprintf(stderr, "%s\n", p ? d.msg : "dcc: error: out of memory");
            rc = EXIT_SYSTEM;
        } else {
            printf("%s: %s", m.onames[k], dtype_name(out[k].dtype));
            print_shape(stdout, out[k].shape, out[k].rank);
            printf(" -> %s\n", p);
        }
        free(p);
    }
    for (int i = 0; in && i < g->ninputs; i++)
        tensor_free(&in[i]);
    for (int i = 0; out && i < g->noutputs; i++)
        tensor_free(&out[i]);
    free(in);
    free(out);
    free(given);
    free(inputs);
    model_free(&m);
    return rc;
}
