/*
 * compile.c — `dcc compile`: a model ahead of time into a native object
 * (or a shared object) for programs that link only the disc runtime.
 *
 * A .so is the object linked with the runtime archive (libdisc_rt.a, found
 * next to dcc: ../lib when installed, public/ in the build tree, or
 * DISC_RT_LIB) by the system C compiler (CC, default cc).
 */
#include "dcc/dcc.h"
#include "frontends/model.h"
#include "codegen/codegen.h"

#include <ctype.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char usage_compile[] =
    "usage: dcc compile MODEL -o OUT.o|OUT.so [--emit-header FILE.h] [--weights FILE]\n"
    "                   [--name NAME] [--cpu CPU] [--backend cpu|cuda] [--gpu-arch LIST]\n"
    "                   [--assume HINT]... [-O N] [--no-fuse] [-v]\n"
    "                   [--dump-after=PASS]\n"
    "\n"
    "Compiles MODEL (.onnx, or IR text) once, for every shape it accepts, into a\n"
    "native object: the kernels, the host flow and the constants, with entry points\n"
    "NAME_run (typed, one pointer and one dims array per input and output) and\n"
    "NAME_run_arrays. A program links it with the runtime archive only:\n"
    "\n"
    "    dcc compile model.onnx -o model.o --emit-header model.h\n"
    "    cc app.c model.o $(pkg-config --cflags --libs disc-rt)\n"
    "\n"
    "options:\n"
    "  -o OUT             the object to write: OUT.o, or OUT.so (a shared object with\n"
    "                     the runtime linked in; needs a C compiler, CC or cc)\n"
    "  --emit-header FILE the C header declaring the entry points, the inputs'\n"
    "                     and outputs' dtypes and symbolic shapes, the status codes\n"
    "  --weights FILE     constants of 64 bytes or more go to FILE instead of the\n"
    "                     object; the program calls NAME_load_weights(FILE) first\n"
    "  --name NAME        the entry points' prefix (default: OUT's name, without a\n"
    "                     leading 'lib', as a C identifier)\n"
    "  --cpu CPU          the CPU to compile for: an LLVM name such as x86-64,\n"
    "                     x86-64-v3 or skylake-avx512 (default native: this machine's)\n"
    "  --backend B        cpu (the default), or cuda: the kernels for NVIDIA GPUs,\n"
    "                     embedded as CUBINs and PTX; the host flow stays native\n"
    "                     code for --cpu; the program needs the CUDA driver\n"
    "                     (libcuda.so.1, loaded at run time) and no CUDA library\n"
    "  --gpu-arch LIST    cuda: the architectures to embed CUBINs for (default\n"
    "                     sm_80,sm_90), with the first's PTX for newer devices\n"
    "  --assume HINT      a fact about the symbols, e.g. 'S %% 8 == 0' (repeatable)\n"
    "  -O N               LLVM optimisation level, 0..3 (default 3)\n"
    "  --no-fuse          one kernel per op (the unfused baseline of the benchmarks)\n"
    "  -v                 times per stage\n"
    "  --dump-after=PASS  the IR after PASS on stderr: shape, layout, canon, fusion, memplan\n"
    "                     or llvm (the optimised module, entry points included)\n"
    "\n"
    "exit status: 0 success, 1 error in the input, 2 usage error, 3 system error\n";

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "dcc compile: error: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n%s", usage_compile);
    return EXIT_USAGE;
}

/* The default --name: OUT's base name up to the first '.', without "lib",
 * as a C identifier. */
static void default_name(const char *out, char *name, size_t size)
{
    const char *base = strrchr(out, '/');
    base = base ? base + 1 : out;
    if (!strncmp(base, "lib", 3) && base[3] && base[3] != '.')
        base += 3;
    size_t n = 0;
    if (isdigit((unsigned char)base[0]))
        name[n++] = 'm';
    for (const char *c = base; *c && *c != '.' && n + 1 < size; c++)
        name[n++] = isalnum((unsigned char)*c) ? *c : '_';
    if (n == 0)
        name[n++] = 'm';
    name[n] = 0;
}

/* libdisc_rt.a: DISC_RT_LIB, else next to this executable. */
static bool find_runtime(char *path, size_t size)
{
    const char *env = getenv("DISC_RT_LIB");
    if (env) {
        snprintf(path, size, "%s", env);
        return access(path, R_OK) == 0;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return false;
    exe[n] = 0;
    const char *dir = dirname(exe);
    static const char *const rel[] = {"../lib/libdisc_rt.a", "public/libdisc_rt.a"};
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        snprintf(path, size, "%s/%s", dir, rel[i]);
        if (access(path, R_OK) == 0)
            return true;
    }
    return false;
}

/* cc -shared -o so obj runtime -ldnnl ...; false with a message. */
static bool link_shared(const char *obj, const char *so, const char *runtime)
{
    const char *cc = getenv("CC") ? getenv("CC") : "cc";
    char *argv[] = {(char *)cc, "-shared", "-o", (char *)so, (char *)obj, (char *)runtime,
                    "-ldnnl", "-lmvec", "-lm", "-lpthread", "-ldl", NULL};
    pid_t pid = fork();
    if (pid < 0)
        return false;
    if (pid == 0) {
        execvp(cc, argv);
        fprintf(stderr, "dcc compile: error: cannot run %s\n", cc);
        _exit(127);
    }
    int st = 0;
    if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "dcc compile: error: linking %s with %s failed\n", so, cc);
        return false;
    }
    return true;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int dcc_compile(int argc, char **argv)
{
    const char *file = NULL, *out = NULL, *header = NULL, *weights = NULL, *name = NULL, *cpu = NULL;
    const char *dump = NULL, *backend = "cpu", *gpu_arch = NULL;
    const char *assume[64];
    int nassume = 0, level = 3;
    bool verbose = false, unfused = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage_compile, stdout);
            return 0;
        } else if (!strcmp(a, "-v")) {
            verbose = true;
        } else if (!strcmp(a, "--no-fuse")) {
            unfused = true;
        } else if (!strncmp(a, "--dump-after=", 13)) {
            dump = a + 13;
            if (cg_stage_from_name(dump) == CG_NSTAGES) {
                fprintf(stderr, "dcc compile: error: --dump-after=%s: passes are %s\n%s", dump, cg_stage_names(),
                        usage_compile);
                return EXIT_USAGE;
            }
        } else if (!strcmp(a, "-o") || !strcmp(a, "--emit-header") || !strcmp(a, "--weights") ||
                   !strcmp(a, "--name") || !strcmp(a, "--cpu") || !strcmp(a, "--assume") || !strcmp(a, "-O") ||
                   !strcmp(a, "--backend") || !strcmp(a, "--gpu-arch")) {
            if (i + 1 >= argc)
                return usage_error("%s needs a value", a);
            const char *v = argv[++i];
            if (!strcmp(a, "-o"))
                out = v;
            else if (!strcmp(a, "--emit-header"))
                header = v;
            else if (!strcmp(a, "--weights"))
                weights = v;
            else if (!strcmp(a, "--name"))
                name = v;
            else if (!strcmp(a, "--cpu"))
                cpu = v;
            else if (!strcmp(a, "--backend")) {
                if (strcmp(v, "cpu") && strcmp(v, "cuda"))
                    return usage_error("--backend %s: dcc compile takes cpu or cuda", v);
                backend = v;
            } else if (!strcmp(a, "--gpu-arch"))
                gpu_arch = v;
            else if (!strcmp(a, "-O")) {
                if (strlen(v) != 1 || v[0] < '0' || v[0] > '3')
                    return usage_error("-O %s: the level is 0, 1, 2 or 3", v);
                level = v[0] - '0';
            } else if (nassume == 64)
                return usage_error("%s", "too many --assume hints");
            else
                assume[nassume++] = v;
        } else if (a[0] == '-' && a[1]) {
            return usage_error("unknown option '%s'", a);
        } else if (file) {
            return usage_error("more than one model ('%s')", a);
        } else {
            file = a;
        }
    }
    if (!file)
        return usage_error("%s", "no model given");
    if (!out)
        return usage_error("%s", "no output: -o OUT.o or -o OUT.so");
    if (gpu_arch && strcmp(backend, "cuda"))
        return usage_error("%s", "--gpu-arch goes with --backend cuda");
    bool so = dcc_ends_with(out, ".so");
    if (!so && !dcc_ends_with(out, ".o"))
        return usage_error("-o %s: the output is an object (.o) or a shared object (.so)", out);
    char defname[128];
    if (!name) {
        default_name(out, defname, sizeof defname);
        name = defname;
    }
    char runtime[PATH_MAX];
    if (so && !find_runtime(runtime, sizeof runtime)) {
        fprintf(stderr, "dcc compile: error: -o %s needs the runtime archive libdisc_rt.a: not found next to dcc "
                        "(../lib or public/); set DISC_RT_LIB\n", out);
        return EXIT_SYSTEM;
    }

    double t0 = now();
    Diag d = {0};
    int rc = 0;
    CgOpts lo = {.verbose = verbose};
    Graph *g = dcc_load(file, &lo, &rc);
    if (!g)
        return rc;
    if (g->tied_dims && model_is_onnx(file)) {
        /* An object cannot compile again when its inputs break a tie of
         * the model's dim names, as the JIT does: it is compiled without
         * them (doc/onnx.md, "Dim names") */
        graph_free(g);
        char store[4096];
        if (!(g = model_load_untied(file, dcc_store(&lo, store, sizeof store), NULL, &d))) {
            fprintf(stderr, "%s\n", d.msg);
            return dcc_exit_code(&d);
        }
        if (verbose)
            fprintf(stderr, "dcc: %s: compiled without the ties of its dim names\n", file);
    }
    double t1 = now();
    char obj[PATH_MAX];
    snprintf(obj, sizeof obj, so ? "%s.o.tmp" : "%s", out);
    ShapeOpts sopts = {assume, nassume};
    CgOpts co = {.opt_level = level, .cpu = cpu, .verbose = verbose, .dump_after = dump,
                 .gpu = strcmp(backend, "cuda") ? NULL : "cuda", .unfused = unfused};
    AotOpts ao = {.name = name, .weights_path = weights, .pic = so, .gpu_arch = gpu_arch};
    bool ok = aot_compile(g, &sopts, &co, &ao, obj, header, &d);
    if (!ok) {
        fprintf(stderr, "%s\n", d.msg);
        rc = dcc_exit_code(&d);
    } else if (so) {
        if (!link_shared(obj, out, runtime))
            rc = EXIT_SYSTEM;
        remove(obj);
    }
    if (!rc && verbose)
        fprintf(stderr, "dcc: %s: imported in %.1f ms, compiled to %s in %.1f ms (%d ops)\n", file,
                1e3 * (t1 - t0), out, 1e3 * (now() - t1), g->nops);
    graph_free(g);
    return rc;
}
