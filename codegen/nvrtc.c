/*
 * nvrtc.c — the run-time compilers NVRTC and HIPRTC, loaded with dlopen
 * (the CUDA driver is the runtime's: runtime/cudrv.c).
 *
 * disc links none of them: libdisc.a and dcc build and run where the
 * toolkits are absent, and a GPU backend asked for there is an error that
 * names the library it could not load. NVRTC is looked for by its
 * versioned names on the loader's path, then in the toolkit's default
 * place (/usr/local/cuda/lib64); HIPRTC is inside libamdhip64.so.5 (HIP
 * 5.2, Debian's libamdhip64-dev). The two share one API shape, so one
 * table of entry points serves both: their names differ by the prefix,
 * and NVRTC's CUBIN is HIPRTC's code object.
 */
#include "codegen/gpu.h"
#include "codegen/cache.h"
#include "runtime/rt.h"

#include "disc_build_id.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct _rtcProgram *rtcProgram;
typedef int rtcResult; /* NVRTC_SUCCESS, HIPRTC_SUCCESS: 0 */

typedef struct Rtc {
    const char *what;   /* for messages */
    const char *prefix; /* of the entry points: "nvrtc", "hiprtc" */
    const char *const *libs;
    const char *bin, *bin_size; /* the compiled code's entry points */
    pthread_once_t once;
    void *lib;
    char why[512];      /* why it is not there */
    char version[16];
    const char *(*GetErrorString)(rtcResult);
    rtcResult (*Version)(int *, int *);
    rtcResult (*CreateProgram)(rtcProgram *, const char *, const char *, int, const char *const *,
                               const char *const *);
    rtcResult (*DestroyProgram)(rtcProgram *);
    rtcResult (*CompileProgram)(rtcProgram, int, const char *const *);
    rtcResult (*GetProgramLogSize)(rtcProgram, size_t *);
    rtcResult (*GetProgramLog)(rtcProgram, char *);
    rtcResult (*GetBinSize)(rtcProgram, size_t *);
    rtcResult (*GetBin)(rtcProgram, char *);
    rtcResult (*GetPTXSize)(rtcProgram, size_t *); /* NVRTC only */
    rtcResult (*GetPTX)(rtcProgram, char *);
    rtcResult (*GetNumSupportedArchs)(int *); /* NVRTC 11.2 and later */
    rtcResult (*GetSupportedArchs)(int *);
    int archs[64];      /* what it compiles for (sm_XY as XY), narchs of them; 0: unknown */
    int narchs;
} Rtc;

static const char *const nv_libs[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so",
                                      "/usr/local/cuda/lib64/libnvrtc.so", NULL};
static const char *const hip_libs[] = {"libamdhip64.so.5", "libamdhip64.so", NULL};

static Rtc nv = {.what = "NVRTC (libnvrtc.so.13 or .12, the CUDA toolkit's runtime compiler)", .prefix = "nvrtc",
                 .libs = nv_libs, .bin = "GetCUBIN", .bin_size = "GetCUBINSize", .once = PTHREAD_ONCE_INIT};
static Rtc hip = {.what = "HIPRTC (libamdhip64.so.5, HIP's runtime; Debian: libamdhip64-dev)", .prefix = "hiprtc",
                  .libs = hip_libs, .bin = "GetCode", .bin_size = "GetCodeSize", .once = PTHREAD_ONCE_INIT};

static void rtc_load(Rtc *r)
{
    const char *err = "not found";
    for (int i = 0; r->libs[i] && !r->lib; i++)
        if (!(r->lib = dlopen(r->libs[i], RTLD_NOW | RTLD_LOCAL)))
            err = dlerror();
    if (!r->lib) {
        snprintf(r->why, sizeof r->why, "cannot load %s: %s", r->what, err ? err : "not found");
        return;
    }
    struct {
        void **fn;
        const char *name;
        bool optional;
    } syms[] = {
        {(void **)&r->GetErrorString, "GetErrorString", false}, {(void **)&r->Version, "Version", false},
        {(void **)&r->CreateProgram, "CreateProgram", false}, {(void **)&r->DestroyProgram, "DestroyProgram", false},
        {(void **)&r->CompileProgram, "CompileProgram", false},
        {(void **)&r->GetProgramLogSize, "GetProgramLogSize", false},
        {(void **)&r->GetProgramLog, "GetProgramLog", false}, {(void **)&r->GetBinSize, r->bin_size, false},
        {(void **)&r->GetBin, r->bin, false}, {(void **)&r->GetPTXSize, "GetPTXSize", true},
        {(void **)&r->GetPTX, "GetPTX", true},
        {(void **)&r->GetNumSupportedArchs, "GetNumSupportedArchs", true},
        {(void **)&r->GetSupportedArchs, "GetSupportedArchs", true},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s%s", r->prefix, syms[i].name);
        if (!(*syms[i].fn = dlsym(r->lib, name)) && !syms[i].optional) {
            snprintf(r->why, sizeof r->why, "%s has no %s (too old a toolkit?)", r->what, name);
            dlclose(r->lib);
            r->lib = NULL;
            return;
        }
    }
    int major = 0, minor = 0;
    r->Version(&major, &minor);
    snprintf(r->version, sizeof r->version, "%d.%d", major, minor);
    int na = 0;
    if (r->GetNumSupportedArchs && r->GetSupportedArchs && !r->GetNumSupportedArchs(&na) && na > 0 &&
        na <= (int)(sizeof r->archs / sizeof r->archs[0]) && !r->GetSupportedArchs(r->archs))
        r->narchs = na;
}

/* Whether NVRTC compiles for sm_XY (the number of "sm_90a" is 90); where
 * it cannot say, it is asked. */
static bool nv_arch_known(const Rtc *r, const char *arch, char *list, size_t size)
{
    int x = atoi(arch + 3);
    size_t n = 0;
    bool known = r->narchs == 0;
    for (int i = 0; i < r->narchs; i++) {
        known |= r->archs[i] == x;
        if (n < size)
            n += (size_t)snprintf(list + n, size - n, "%ssm_%d", i ? ", " : "", r->archs[i]);
    }
    return known && arch[3] >= '0' && arch[3] <= '9';
}

static void nv_load(void) { rtc_load(&nv); }
static void hip_load(void) { rtc_load(&hip); }

static Rtc *rtc_ready(GpuLang lang, Diag *d)
{
    Rtc *r = lang == GPU_HIP ? &hip : &nv;
    pthread_once(&r->once, lang == GPU_HIP ? hip_load : nv_load);
    if (!r->lib) {
        diag_setk(d, DIAG_RESOURCE, "error: %s", r->why);
        return NULL;
    }
    return r;
}

const char *gpu_rtc_version(GpuLang lang, Diag *d)
{
    Rtc *r = rtc_ready(lang, d);
    return r ? r->version : NULL;
}

const char *gpu_nvrtc_version(Diag *d) { return gpu_rtc_version(GPU_CUDA, d); }

/* The AMD targets HIPRTC is asked for: HIP 5.2's code-object library
 * aborts the whole process on some newer ones (gfx940, gfx1100), so an
 * unknown name is refused rather than tried. */
static const char *const hip_archs[] = {"gfx90a", "gfx908", "gfx906", "gfx1030", NULL};

static bool rtc_compile(GpuLang lang, const char *src, const char *name, const char *arch, bool bin, char **out,
                        size_t *n, char **info, Diag *d)
{
    *out = NULL;
    *n = 0;
    if (info)
        *info = NULL;
    Rtc *r = rtc_ready(lang, d);
    if (!r)
        return false;
    char opt[64];
    if (lang == GPU_HIP) {
        bool known = false;
        for (int i = 0; hip_archs[i] && !known; i++)
            known = !strcmp(arch, hip_archs[i]);
        if (!known)
            return diag_setk(d, DIAG_ARG, "error: '%s' is not an AMD target disc compiles for (gfx90a, gfx908, gfx906, "
                                          "gfx1030)", arch);
        snprintf(opt, sizeof opt, "--gpu-architecture=%s", arch);
    } else {
        char list[512] = "";
        if (strncmp(arch, "sm_", 3) != 0)
            return diag_setk(d, DIAG_ARG, "error: '%s' is not a CUDA architecture (sm_80, sm_90, ...)", arch);
        if (!nv_arch_known(r, arch, list, sizeof list))
            return diag_setk(d, DIAG_ARG, "error: '%s' is not an architecture NVRTC %s compiles for (%s)", arch,
                             r->version, list[0] ? list : "sm_80, sm_90, ...");
        /* CUBIN for the real architecture, PTX for its virtual one */
        snprintf(opt, sizeof opt, "--gpu-architecture=%s%s", bin ? "sm_" : "compute_", arch + 3);
    }
    const char *hdr = gpu_prelude(lang), *hname = lang == GPU_HIP ? "disc_hip.h" : "disc_cuda.h";
    rtcProgram prog;
    rtcResult rc = r->CreateProgram(&prog, src, name, 1, &hdr, &hname);
    if (rc)
        return diag_setk(d, DIAG_RESOURCE, "error: %s: %s", r->prefix, r->GetErrorString(rc));
    const char *opts[] = {opt, "--ptxas-options=-v"};
    rc = r->CompileProgram(prog, lang == GPU_CUDA && bin && info ? 2 : 1, opts);
    size_t ln = 0;
    r->GetProgramLogSize(prog, &ln);
    char *log = malloc(ln + 1);
    if (log) {
        log[0] = 0;
        if (ln)
            r->GetProgramLog(prog, log);
    }
    bool ok = true;
    if (rc)
        ok = diag_setk(d, DIAG_INTERNAL, "error: internal: %s (%s) cannot compile the generated source: %s: %.700s",
                       r->prefix, arch, r->GetErrorString(rc), log ? log : "");
    if (ok && info) { /* ptxas's report: registers, spills, shared memory per kernel */
        *info = log;
        log = NULL;
    }
    free(log);
    if (ok && !bin && !r->GetPTX)
        ok = diag_setk(d, DIAG_ARG, "error: %s makes no PTX", r->prefix);
    if (ok) {
        rc = bin ? r->GetBinSize(prog, n) : r->GetPTXSize(prog, n);
        if (!rc && !(*out = malloc(*n ? *n : 1)))
            ok = diag_oom(d);
        else if (!rc)
            rc = bin ? r->GetBin(prog, *out) : r->GetPTX(prog, *out);
        if (ok && rc)
            ok = diag_setk(d, DIAG_RESOURCE, "error: %s: %s", r->prefix, r->GetErrorString(rc));
    }
    r->DestroyProgram(&prog);
    if (!ok) {
        free(*out);
        *out = NULL;
        *n = 0;
        if (info) {
            free(*info);
            *info = NULL;
        }
    }
    return ok;
}

bool gpu_nvrtc_compile(const char *src, const char *name, const char *arch, bool cubin, char **out, size_t *n,
                       char **info, Diag *d)
{
    return rtc_compile(GPU_CUDA, src, name, arch, cubin, out, n, info, d);
}

bool gpu_hiprtc_compile(const char *src, const char *name, const char *arch, char **out, size_t *n, Diag *d)
{
    return rtc_compile(GPU_HIP, src, name, arch, true, out, n, NULL, d);
}

/* ---- the cache of compiled modules ---------------------------------------------
 *
 * The cpu-jit's on-disk cache (cache.h) keeps compiled GPU modules too: a
 * module is a cache entry of one object (the CUBIN, PTX or code object)
 * and no kernels, in the same directory (CgOpts.cache_dir, DISC_CACHE_DIR,
 * $HOME/.cache/disc/jit), with the same files (checksummed, written to a
 * temporary name and renamed, the least recently used removed past 1 GiB)
 * and the same checks on load (a truncated or corrupt file, or one of
 * another key, is ignored and replaced). The key covers the source's and
 * the prelude's hashes, the compiler and its version, the target (the
 * architecture, and CUBIN or PTX) and disc's version and build id. */

static bool module_key(GpuLang lang, const char *version, const char *src, const char *arch, bool bin, CacheKey *k,
                       Diag *d)
{
    memset(k, 0, sizeof *k);
    size_t n = strlen(src);
    const char *pre = gpu_prelude(lang);
    GpuStr t = {0};
    gpu_str_printf(&t, "disc %s build %s\n", DISC_PROJECT_VERSION, DISC_BUILD_ID);
    gpu_str_printf(&t, "gpu module: %s %s %s %s\n", lang == GPU_HIP ? "hiprtc" : "nvrtc", version, arch,
                   lang == GPU_HIP ? "code object" : bin ? "cubin" : "ptx");
    gpu_str_printf(&t, "prelude %016llx source %zu bytes %016llx%016llx\n",
                   (unsigned long long)store_hash(pre, strlen(pre), 0), n, (unsigned long long)store_hash(src, n, 0),
                   (unsigned long long)store_hash(src, n, 0x9e3779b97f4a7c15ull));
    if (t.failed) {
        gpu_str_free(&t);
        return diag_oom(d);
    }
    k->text = t.p;
    snprintf(k->name, sizeof k->name, "%016llx%016llx", (unsigned long long)store_hash(t.p, t.n, 0),
             (unsigned long long)store_hash(t.p, t.n, 0x165667b19e3779f9ull));
    return true;
}

bool gpu_rtc_compile_cached(const CgOpts *o, GpuLang lang, const char *src, const char *name, const char *arch,
                            bool bin, char **out, size_t *n, GpuCacheInfo *ci, Diag *d)
{
    memset(ci, 0, sizeof *ci);
    *out = NULL;
    *n = 0;
    const char *version = gpu_rtc_version(lang, d);
    if (!version)
        return false;
    char dir[4096];
    CacheKey key = {0};
    bool cache = cache_dir(o, dir, sizeof dir);
    if (!cache)
        snprintf(ci->note, sizeof ci->note, "the cache is off");
    else if (!module_key(lang, version, src, arch, bin, &key, d))
        return false;
    if (cache) {
        snprintf(ci->file, sizeof ci->file, "%s/%s.jit", dir, key.name);
        CacheEntry e = {0};
        char why[64] = "";
        if (cache_load(dir, &key, &e, why, sizeof why) && e.nobj == 1 && e.nkernels == 0) {
            bool ok = (*out = malloc(e.objsize[0] ? e.objsize[0] : 1)) != NULL;
            if (ok) {
                memcpy(*out, e.obj[0], e.objsize[0]);
                *n = e.objsize[0];
                ci->hit = true;
            }
            cache_entry_free(&e);
            cache_key_free(&key);
            return ok || diag_oom(d);
        }
        if (e.mem)
            snprintf(why, sizeof why, "not a GPU module");
        cache_entry_free(&e);
        if (why[0])
            snprintf(ci->note, sizeof ci->note, "the cached file was %s: compiled again", why);
    }
    double t0 = disc_rt_now();
    bool ok = rtc_compile(lang, src, name, arch, bin, out, n, NULL, d);
    ci->seconds = disc_rt_now() - t0;
    if (ok && cache) {
        CacheEntry e = {.nobj = 1, .obj = {*out}, .objsize = {*n}};
        Diag sd = {0};
        if (cache_store(dir, &key, &e, &sd))
            ci->stored = true;
        else /* not fatal: the module is compiled */
            snprintf(ci->note, sizeof ci->note, "%.200s", sd.msg);
    }
    cache_key_free(&key);
    return ok;
}

bool gpu_cuda_driver_check(Diag *d)
{
    char why[600];
    if (disc_gpu_driver_version(why, sizeof why) > 0)
        return true;
    return diag_setk(d, DIAG_RESOURCE, "error: backend cuda: %s", why);
}
