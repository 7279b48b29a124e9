/*
 * nvrtc.c — NVRTC and the CUDA driver, loaded with dlopen.
 *
 * disc links neither: libdisc.a and dcc build and run where the CUDA
 * toolkit is absent, and a GPU backend asked for there is an error that
 * names the library it could not load. NVRTC is looked for by its
 * versioned names on the loader's path, then in the toolkit's default
 * place (/usr/local/cuda/lib64).
 */
#include "codegen/gpu.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct _nvrtcProgram *nvrtcProgram;
typedef int nvrtcResult; /* NVRTC_SUCCESS is 0 */

static struct {
    void *lib;
    char why[512];      /* why it is not there */
    char version[16];
    const char *(*GetErrorString)(nvrtcResult);
    nvrtcResult (*Version)(int *, int *);
    nvrtcResult (*CreateProgram)(nvrtcProgram *, const char *, const char *, int, const char *const *,
                                 const char *const *);
    nvrtcResult (*DestroyProgram)(nvrtcProgram *);
    nvrtcResult (*CompileProgram)(nvrtcProgram, int, const char *const *);
    nvrtcResult (*GetProgramLogSize)(nvrtcProgram, size_t *);
    nvrtcResult (*GetProgramLog)(nvrtcProgram, char *);
    nvrtcResult (*GetCUBINSize)(nvrtcProgram, size_t *);
    nvrtcResult (*GetCUBIN)(nvrtcProgram, char *);
    nvrtcResult (*GetPTXSize)(nvrtcProgram, size_t *);
    nvrtcResult (*GetPTX)(nvrtcProgram, char *);
} nv;

static void nv_load(void)
{
    static const char *names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so",
                                  "/usr/local/cuda/lib64/libnvrtc.so"};
    const char *err = "";
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !nv.lib; i++)
        if (!(nv.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL)))
            err = dlerror();
    if (!nv.lib) {
        snprintf(nv.why, sizeof nv.why, "cannot load NVRTC (libnvrtc.so.13 or .12, the CUDA toolkit's runtime "
                                        "compiler): %s", err ? err : "not found");
        return;
    }
    struct {
        void **fn;
        const char *name;
    } syms[] = {
        {(void **)&nv.GetErrorString, "nvrtcGetErrorString"}, {(void **)&nv.Version, "nvrtcVersion"},
        {(void **)&nv.CreateProgram, "nvrtcCreateProgram"}, {(void **)&nv.DestroyProgram, "nvrtcDestroyProgram"},
        {(void **)&nv.CompileProgram, "nvrtcCompileProgram"},
        {(void **)&nv.GetProgramLogSize, "nvrtcGetProgramLogSize"},
        {(void **)&nv.GetProgramLog, "nvrtcGetProgramLog"}, {(void **)&nv.GetCUBINSize, "nvrtcGetCUBINSize"},
        {(void **)&nv.GetCUBIN, "nvrtcGetCUBIN"}, {(void **)&nv.GetPTXSize, "nvrtcGetPTXSize"},
        {(void **)&nv.GetPTX, "nvrtcGetPTX"},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++)
        if (!(*syms[i].fn = dlsym(nv.lib, syms[i].name))) {
            snprintf(nv.why, sizeof nv.why, "NVRTC has no %s (too old a toolkit?)", syms[i].name);
            dlclose(nv.lib);
            nv.lib = NULL;
            return;
        }
    int major = 0, minor = 0;
    nv.Version(&major, &minor);
    snprintf(nv.version, sizeof nv.version, "%d.%d", major, minor);
}

static bool nv_ready(Diag *d)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, nv_load);
    return nv.lib || diag_setk(d, DIAG_RESOURCE, "error: %s", nv.why);
}

const char *gpu_nvrtc_version(Diag *d)
{
    return nv_ready(d) ? nv.version : NULL;
}

bool gpu_nvrtc_compile(const char *src, const char *name, const char *arch, bool cubin, char **out, size_t *n,
                       char **info, Diag *d)
{
    *out = NULL;
    *n = 0;
    if (info)
        *info = NULL;
    if (!nv_ready(d))
        return false;
    if (strncmp(arch, "sm_", 3) != 0)
        return diag_setk(d, DIAG_ARG, "error: '%s' is not a CUDA architecture (sm_80, sm_90, ...)", arch);
    const char *hdr = gpu_prelude(GPU_CUDA), *hname = "disc_cuda.h";
    nvrtcProgram prog;
    nvrtcResult r = nv.CreateProgram(&prog, src, name, 1, &hdr, &hname);
    if (r)
        return diag_setk(d, DIAG_RESOURCE, "error: NVRTC: %s", nv.GetErrorString(r));
    /* CUBIN for the real architecture, PTX for its virtual one */
    char opt[48];
    snprintf(opt, sizeof opt, "--gpu-architecture=%s%s", cubin ? "sm_" : "compute_", arch + 3);
    const char *opts[] = {opt, "--ptxas-options=-v"};
    r = nv.CompileProgram(prog, cubin && info ? 2 : 1, opts);
    bool ok = true;
    if (!r && info) { /* ptxas's report: registers, spills, shared memory per kernel */
        size_t ln = 0;
        nv.GetProgramLogSize(prog, &ln);
        if ((*info = malloc(ln + 1))) {
            (*info)[0] = 0;
            nv.GetProgramLog(prog, *info);
        }
    }
    if (r) {
        size_t ln = 0;
        nv.GetProgramLogSize(prog, &ln);
        char *log = malloc(ln + 1);
        if (log) {
            log[0] = 0;
            nv.GetProgramLog(prog, log);
        }
        ok = diag_setk(d, DIAG_INTERNAL, "error: internal: NVRTC (%s) cannot compile the generated source: %s: %.700s",
                       arch, nv.GetErrorString(r), log ? log : "");
        free(log);
    }
    if (ok) {
        r = cubin ? nv.GetCUBINSize(prog, n) : nv.GetPTXSize(prog, n);
        if (!r && !(*out = malloc(*n ? *n : 1)))
            ok = diag_oom(d);
        else if (!r)
            r = cubin ? nv.GetCUBIN(prog, *out) : nv.GetPTX(prog, *out);
        if (ok && r)
            ok = diag_setk(d, DIAG_RESOURCE, "error: NVRTC: %s", nv.GetErrorString(r));
    }
    nv.DestroyProgram(&prog);
    if (!ok) {
        free(*out);
        *out = NULL;
        *n = 0;
    }
    return ok;
}

bool gpu_cuda_driver_check(Diag *d)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *err = dlerror();
        return diag_setk(d, DIAG_RESOURCE, "error: backend cuda: cannot load libcuda.so.1 (the CUDA driver; is there "
                                           "an NVIDIA GPU and its driver?): %s", err ? err : "not found");
    }
    dlclose(lib);
    return true;
}
