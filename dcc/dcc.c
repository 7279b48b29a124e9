/*
 * dcc — the disc command-line compiler.
 *
 *   dcc emit FILE [--stage ir] [-o OUT]      print a stage of the pipeline
 *   dcc check DIR [--backend interp]         run an ONNX backend-test directory
 *   dcc run MODEL --input N=F.pb --output-dir DIR   run a model on tensor files
 *   dcc compile MODEL -o model.o --emit-header model.h   ahead of time
 *
 * FILE is IR text (.disc) or an ONNX model (.onnx). Every error is one
 * located line on stderr. Exit status: 0 success, 1 an error in the input
 * (syntax, types, unsupported op, bad shapes), 2 a usage error, 3 an
 * internal or system error (out of memory, unwritable output).
 */
#include "dcc/dcc.h"
#include "frontends/model.h"
#include "ir/ir.h"
#include "passes/passes.h"
#include "codegen/cache.h"
#include "codegen/codegen.h"
#include "codegen/gpu.h"

#include <stdlib.h>
#include <unistd.h>
#include <string.h>

#define DISC_VERSION "0.1.0"

static const char usage_main[] =
    "usage: dcc <command> [options]\n"
    "\n"
    "disc compiles deep-learning models with dynamic shapes once, for every shape.\n"
    "\n"
    "commands:\n"
    "  emit FILE    parse (IR text or ONNX), verify and print a stage of the pipeline\n"
    "  check DIR    run an ONNX backend-test directory (model.onnx, test_data_set_*)\n"
    "  run MODEL    run a model on TensorProto inputs, write the outputs\n"
    "  bench DIR    compile once, then time the runs of every data set\n"
    "  fuzz-shapes DIR  random shapes on the backend against the interpreter\n"
    "  compile MODEL -o OUT.o   ahead of time into an object (or .so) for C programs\n"
    "  cache        the cache of compiled code and weights: what it holds, --verify, --clear\n"
    "\n"
    "options:\n"
    "  -h, --help     show this help (dcc <command> --help for a command)\n"
    "  --version      print the version\n"
    "\n"
    "exit status: 0 success, 1 error in the input, 2 usage error, 3 system error\n";

static const char usage_emit[] =
    "usage: dcc emit FILE [--stage STAGE] [--assume HINT]... [--cpu CPU] [--arch ARCH] [-v] [-o OUT]\n"
    "                [--elide | --no-elide]\n"
    "\n"
    "Reads FILE (IR text, or an ONNX model if it ends in .onnx), verifies it and\n"
    "prints the requested stage as IR text.\n"
    "\n"
    "options:\n"
    "  --stage STAGE   ir     the verified input graph (the default)\n"
    "                  shape  after shape analysis: resolved dims, dim and size\n"
    "                         classes, constraints, the host shape program\n"
    "                  canon  after shape analysis and canonicalisation (constant\n"
    "                         folding, CSE, algebraic simplification, DCE)\n"
    "                  fusion the fusion plan: groups (loop, input, stitch,\n"
    "                         library, opaque) with their ops, inputs, outputs\n"
    "                  memplan the memory plan: a slot per value, its symbolic size\n"
    "                         and the groups it lives between (laid out in one\n"
    "                         block at each run's sizes; --bind shows a layout)\n"
    "                  llvm   the optimised LLVM IR of the cpu backend: the\n"
    "                         kernels and the host flow (disc_main)\n"
    "                  cuda   the CUDA C of every kernel (after the prelude\n"
    "                         disc_cuda.h); groups the GPU path does not take\n"
    "                         yet are named in comments\n"
    "                  hip    the same as HIP (prelude disc_hip.h)\n"
    "                  cubin  the module compiled by NVRTC for --arch (sm_80 by\n"
    "                         default; a gfx name: an AMD code object by HIPRTC),\n"
    "                         read from the cache of compiled code when it holds it\n"
    "                  ptx    the same as PTX\n"
    "  --arch ARCH     with --stage cubin or ptx: sm_80, sm_90, ..., gfx90a, gfx1030\n"
    "  -v              how an ONNX model's large weights were loaded; with --stage\n"
    "                  cubin or ptx also the compile's time, or the cache hit\n"
    "  --no-cache      with --stage cubin or ptx: neither read nor write the cache\n"
    "                  (and copy an ONNX model's large weights at load, not\n"
    "                  keeping them aligned in the cache's directory)\n"
    "  --format dot    with --stage fusion: the plan as a Graphviz graph\n"
    "  --bind B=4,S=128  with --stage memplan: the slots laid out at these values\n"
    "  --assume HINT   a fact about the symbols, e.g. 'S %% 8 == 0', 'B <= 64',\n"
    "                  'S == T' (repeatable)\n"
    "  --cpu CPU       the CPU the kernels are for (an LLVM name such as x86-64-v3\n"
    "                  or skylake-avx512; default: this one): its vector width\n"
    "                  sets the layout pass's blocks of channels (16 floats with\n"
    "                  AVX-512, 8 with AVX2) and the code of --stage llvm\n"
    "  -o OUT          write to OUT instead of standard output\n"
    "  --elide         print large constants as 'elided' (default for ONNX input)\n"
    "  --no-elide      print large constants in full, as hex (default for IR text)\n"
    "  --inline-max N  constants with more than N elements count as large (16)\n";

static int usage_error(const char *fmt, const char *arg, const char *usage)
{
    fprintf(stderr, "dcc: error: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n%s", usage);
    return EXIT_USAGE;
}

bool dcc_ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

int dcc_exit_code(const Diag *d)
{
    switch (d->set ? d->kind : DIAG_INTERNAL) {
    case DIAG_PARSE:
    case DIAG_MODEL:
    case DIAG_UNSUPPORTED:
    case DIAG_SHAPE: return EXIT_INPUT;
    case DIAG_ARG: return EXIT_USAGE;
    case DIAG_NONE:
    case DIAG_RESOURCE:
    case DIAG_INTERNAL: return EXIT_SYSTEM;
    }
    return EXIT_SYSTEM;
}

const char *dcc_store(const CgOpts *co, char *buf, size_t size)
{
    CgOpts none = {0};
    return cache_dir(co ? co : &none, buf, size) ? buf : NULL;
}

void dcc_weights_note(const char *path, const OnnxWeightsReport *r)
{
    static const char *const way[] = {
        [WEIGHTS_UNPACKED] = "unpacked with the model",
        [WEIGHTS_COPIED] = "copied into memory",
        [WEIGHTS_STORED] = "written to the cache directory and mapped",
        [WEIGHTS_MAPPED] = "mapped from the cache directory",
    };
    if (r->n)
        fprintf(stderr, "dcc: %s: %d large weights (%.1f MB) %s%s%s%s\n", path, r->n, (double)r->bytes / 1e6,
                way[r->way], r->why[0] && r->way != WEIGHTS_MAPPED ? " (" : "",
                r->way != WEIGHTS_MAPPED ? r->why : r->checked ? ", read whole to check them" : "",
                r->why[0] && r->way != WEIGHTS_MAPPED ? ")" : "");
}

Graph *dcc_load(const char *path, const CgOpts *co, int *rc)
{
    Diag d = {0};
    char store[4096];
    OnnxWeightsReport rep = {0};
    Graph *g = model_load(path, dcc_store(co, store, sizeof store), &rep, &d);
    if (g && co && co->verbose)
        dcc_weights_note(path, &rep);
    if (!g) {
        fprintf(stderr, "%s\n", d.msg);
        *rc = dcc_exit_code(&d);
    }
    return g;
}

/* --stage memplan --bind B=4,S=128: the plan and its layout at those
 * values. */
static int print_memplan_at(FILE *f, const CgModule *m, const char *bind)
{
    Graph *g = m->g;
    int64_t val[256] = {0};
    bool set[256] = {0};
    DimEnv env = {val, set, g->dims.nsyms < 256 ? g->dims.nsyms : 256};
    char buf[512];
    snprintf(buf, sizeof buf, "%s", bind);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        char *eq = strchr(tok, '=');
        Dim *s = eq ? (*eq = 0, dim_sym_find(&g->dims, tok)) : NULL;
        if (!s || s->id >= 256) {
            fprintf(stderr, "dcc: error: --bind: '%s' is not NAME=VALUE for a symbol of the model\n", tok);
            return EXIT_USAGE;
        }
        val[s->id] = strtoll(eq + 1, NULL, 10);
        set[s->id] = true;
    }
    fuse_print(f, m->plan);
    memplan_print(f, m->mp, &env);
    return 0;
}

/* Prints the stage named stage of the pipeline (codegen.h, cg_passes) for
 * g: the passes up to it run, then its printer. */
/* --stage cubin or ptx: the module compiled for arch through the cache. */
static bool emit_binary(FILE *f, CgModule *m, const char *stage, const char *arch, bool verbose, bool no_cache,
                        Diag *d)
{
    GpuLang lang = !strncmp(arch, "gfx", 3) ? GPU_HIP : GPU_CUDA;
    bool bin = !strcmp(stage, "cubin");
    if (lang == GPU_HIP && !bin)
        return diag_setk(d, DIAG_ARG, "error: --stage ptx: PTX is not made for an AMD target (%s)", arch);
    GpuStr src = {0};
    int nk, nu;
    Diag why = {0};
    if (!gpu_module_source(m, lang, &src, &nk, &nu, &why, d))
        return false;
    if (nu) {
        gpu_str_free(&src);
        return diag_copy(d, &why);
    }
    CgOpts co = {.opt_level = 3, .no_cache = no_cache};
    GpuCacheInfo ci;
    char *out = NULL;
    size_t n = 0;
    bool ok = gpu_rtc_compile_cached(&co, lang, src.p, m->g->name ? m->g->name : "model", arch, bin, &out, &n, &ci, d);
    if (ok && fwrite(out, 1, n, f) != n)
        ok = diag_setk(d, DIAG_RESOURCE, "error: cannot write the module");
    if (ok && verbose) {
        Diag vd = {0};
        fprintf(stderr, "dcc: %d kernels, %zu bytes of %s, %s %s for %s: %zu bytes", nk, src.n,
                lang == GPU_HIP ? "HIP" : "CUDA C", lang == GPU_HIP ? "HIPRTC" : "NVRTC", gpu_rtc_version(lang, &vd),
                arch, n);
        if (ci.hit)
            fprintf(stderr, ", from the cache (%s)\n", ci.file);
        else
            fprintf(stderr, ", compiled in %.0f ms%s%s%s%s\n", 1e3 * ci.seconds, ci.stored ? ", stored in " : "",
                    ci.stored ? ci.file : "", ci.note[0] ? "; " : "", ci.note);
    }
    free(out);
    gpu_str_free(&src);
    return ok;
}

static int emit_stage(FILE *f, Graph *g, const char *stage, const ShapeOpts *so, const PrintOpts *po,
                      const char *format, const char *bind, const char *cpu, const char *arch, bool verbose,
                      bool no_cache)
{
    CgStage s = cg_stage_from_name(stage);
    Diag d = {0};
    int rc = 0;
    if (!strcmp(stage, "cubin") || !strcmp(stage, "ptx")) {
        CgModule m;
        CgOpts co = {.opt_level = 3};
        if (cg_run_passes(g, so, &co, CG_MEMPLAN, &m, &d))
            emit_binary(f, &m, stage, arch, verbose, no_cache, &d);
        cg_module_free(&m);
    } else if (!strcmp(stage, "cuda") || !strcmp(stage, "hip")) {
        CgModule m;
        CgOpts co = {.opt_level = 3, .gpu = stage}; /* no CPU layout pass */
        GpuStr src = {0};
        int nk, nu;
        if (cg_run_passes(g, so, &co, CG_MEMPLAN, &m, &d) &&
            gpu_module_source(&m, stage[0] == 'h' ? GPU_HIP : GPU_CUDA, &src, &nk, &nu, NULL, &d)) {
            fputs(src.p, f);
            if (nu)
                fprintf(stderr, "dcc: %d kernels; %d groups not supported on %s yet (named above)\n", nk, nu, stage);
        }
        gpu_str_free(&src);
        cg_module_free(&m);
    } else if (s == CG_LLVM) {
        CgOpts co = {.opt_level = 3, .cpu = cpu, .keep_llvm = true};
        Exec *e = exec_compile(g, so, &co, &d);
        if (e)
            exec_print_llvm(e, f);
        exec_free(e);
    } else {
        CgModule m;
        CgOpts co = {.opt_level = 3, .cpu = cpu}; /* its vectors size the layout pass's blocks */
        if (cg_run_passes(g, so, &co, s, &m, &d)) {
            if (s == CG_FUSION && !strcmp(format, "dot"))
                fuse_print_dot(f, m.plan);
            else if (s == CG_MEMPLAN && bind)
                rc = print_memplan_at(f, &m, bind);
            else
                cg_passes[s].print(f, &m, po);
        }
        cg_module_free(&m);
    }
    if (d.set) {
        fprintf(stderr, "%s\n", d.msg);
        rc = dcc_exit_code(&d);
    }
    return rc;
}

static int cmd_emit(int argc, char **argv)
{
    const char *file = NULL, *stage = "ir", *out = NULL, *format = "text", *bind = NULL, *cpu = NULL;
    const char *arch = "sm_80";
    bool verbose = false, no_cache = false;
    const char *assume[64];
    int nassume = 0;
    PrintOpts po = {16, false, false};
    int elide = -1;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage_emit, stdout);
            return 0;
        } else if (!strcmp(a, "--stage") || !strcmp(a, "-o") || !strcmp(a, "--inline-max") ||
                   !strcmp(a, "--assume") || !strcmp(a, "--format") || !strcmp(a, "--bind") ||
                   !strcmp(a, "--cpu") || !strcmp(a, "--arch")) {
            if (i + 1 >= argc)
                return usage_error("%s needs a value", a, usage_emit);
            const char *v = argv[++i];
            if (!strcmp(a, "--assume")) {
                if (nassume == 64)
                    return usage_error("%s", "too many --assume hints", usage_emit);
                assume[nassume++] = v;
            } else if (!strcmp(a, "--format")) {
                format = v;
            } else if (!strcmp(a, "--bind")) {
                bind = v;
            } else if (!strcmp(a, "--cpu")) {
                cpu = v;
            } else if (!strcmp(a, "--arch")) {
                arch = v;
            } else if (!strcmp(a, "--stage"))
                stage = v;
            else if (!strcmp(a, "-o"))
                out = v;
            else {
                char *end;
                long n = strtol(v, &end, 10);
                if (*end || n < 0 || n > 1 << 30)
                    return usage_error("bad --inline-max value '%s'", v, usage_emit);
                po.inline_max = (int)n;
            }
        } else if (!strcmp(a, "-v")) {
            verbose = true;
        } else if (!strcmp(a, "--no-cache")) {
            no_cache = true;
        } else if (!strcmp(a, "--elide")) {
            elide = 1;
        } else if (!strcmp(a, "--no-elide")) {
            elide = 0;
        } else if (a[0] == '-' && a[1]) {
            return usage_error("unknown option '%s'", a, usage_emit);
        } else if (file) {
            return usage_error("more than one input file ('%s')", a, usage_emit);
        } else {
            file = a;
        }
    }
    if (!file)
        return usage_error("%s", "no input file", usage_emit);
    if (strcmp(stage, "ir") != 0 && strcmp(stage, "cuda") != 0 && strcmp(stage, "hip") != 0 &&
        strcmp(stage, "cubin") != 0 && strcmp(stage, "ptx") != 0 && cg_stage_from_name(stage) == CG_NSTAGES) {
        fprintf(stderr, "dcc: error: unknown stage '%s' (stages: ir, %s, cuda, hip, cubin, ptx)\n%s", stage,
                cg_stage_names(), usage_emit);
        return EXIT_USAGE;
    }
    if (strcmp(format, "text") != 0 && (strcmp(format, "dot") != 0 || strcmp(stage, "fusion") != 0))
        return usage_error("--format %s: only 'dot' with --stage fusion", format, usage_emit);
    po.elide = elide >= 0 ? elide : model_is_onnx(file);

    int rc = 0;
    CgOpts lo = {.verbose = verbose, .no_cache = no_cache};
    Graph *g = dcc_load(file, &lo, &rc);
    if (!g)
        return rc;
    FILE *f = stdout;
    if (out && !(f = fopen(out, "w"))) {
        fprintf(stderr, "dcc: error: cannot write '%s'\n", out);
        graph_free(g);
        return EXIT_SYSTEM;
    }
    ShapeOpts so = {assume, nassume};
    if (strcmp(stage, "ir") != 0)
        rc = emit_stage(f, g, stage, &so, &po, format, bind, cpu, arch, verbose, no_cache);
    else
        graph_print(f, g, &po);
    if (f != stdout && fclose(f) != 0) {
        fprintf(stderr, "dcc: error: cannot write '%s'\n", out);
        rc = EXIT_SYSTEM;
    }
    graph_free(g);
    return rc;
}

/* oneDNN runs on OpenMP (Debian's libdnnl), whose threads spin after each
 * library call by default and steal the cores our own pool needs next: up
 * to 10x slower matmuls on a busy machine (runtime/dnnl.c). libgomp reads
 * its wait policy when it loads, so dcc sets it and starts itself again. */
static void passive_openmp(char **argv)
{
    if (getenv("OMP_WAIT_POLICY"))
        return;
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    execv("/proc/self/exe", argv);
    /* if that fails, run on with the default policy */
}

int main(int argc, char **argv)
{
    passive_openmp(argv);
    if (argc < 2)
        return usage_error("%s", "no command given", usage_main);
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        fputs(usage_main, stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version")) {
        printf("dcc (disc) %s\n", DISC_VERSION);
        return 0;
    }
    if (!strcmp(cmd, "emit"))
        return cmd_emit(argc - 2, argv + 2);
    if (!strcmp(cmd, "check"))
        return dcc_check(argc - 2, argv + 2);
    if (!strcmp(cmd, "run"))
        return dcc_run(argc - 2, argv + 2);
    if (!strcmp(cmd, "bench"))
        return dcc_bench(argc - 2, argv + 2);
    if (!strcmp(cmd, "fuzz-shapes"))
        return dcc_fuzz_shapes(argc - 2, argv + 2);
    if (!strcmp(cmd, "compile"))
        return dcc_compile(argc - 2, argv + 2);
    if (!strcmp(cmd, "cache"))
        return dcc_cache(argc - 2, argv + 2);
    return usage_error("unknown command '%s'", cmd, usage_main);
}
