/*
 * emu.c — the cuda-emu target: GPU kernels run on the CPU, for tests.
 *
 * The model is the cpu-jit's (exec.c: the same host flow, memory and
 * host ops) with its kernel hook replaced: a group's kernel is the CUDA C
 * of cuda.c, the text NVRTC compiles for a GPU, and its launch runs the
 * kernel's entry for the emulator over the grid's blocks on the runtime's
 * pool. At finish the module's source goes, after the emulator's prelude
 * (every buffer access bounds-checked, a block's threads in a shuffled
 * order), through the host C compiler into a shared object, whose entries
 * the JIT links to.
 *
 * A matmul (a library group: the dot and its epilogue) is a kernel too,
 * through the target's library hook. What the GPU path does not take yet
 * (conv, pool, column stitch groups) is refused: the first such group is
 * the compile's error, located at its op, so a test counts it as not
 * supported rather than passing through the flow's fallback to the CPU
 * (the flow splits a group no kernel takes and runs its ops on the host;
 * the emulator lets it, then fails the compile at link). Ops with no kernel on any target run on the host as on the
 * CPU (topk, nonzero, resize, ...): that part of the flow is every
 * target's.
 */
#include "codegen/gpu.h"
#include "codegen/host.h"
#include "runtime/rt.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct GpuEmu {
    GpuStr src;        /* the kernels and their entries */
    char **names;      /* the entries: "disc_k3_emu" */
    int n, cap;
    Diag first;        /* the first group refused: the compile's error */
    void *lib;         /* the compiled shared object */
    double t_cc;       /* seconds in the host C compiler */
    int warp;          /* lanes of a warp: 32, or 64 */
};

void gpu_emu_stats(const GpuEmu *e, int *nkernels, size_t *bytes, double *seconds)
{
    *nkernels = e->n;
    *bytes = e->src.n;
    *seconds = e->t_cc;
}

/* The kernel hook: grp as GPU source; its LLVM function is a declaration
 * of the entry the shared object will define. */
static bool emu_kernel(Cg *cg, const Group *grp, KernelInfo *ki)
{
    GpuEmu *e = cg->target->kstate;
    char name[32];
    snprintf(name, sizeof name, "disc_k%d", cg->nkernels);
    GpuKernel gk;
    if (!gpu_kernel(cg, grp, name, GPU_EMU, GPU_EMU_GRID_MAX, e->warp, &e->src, &gk)) {
        /* The flow goes on and splits the group up: fine where no template
         * takes a group of several ops (codegen's DIAG_MODEL refusal), as
         * each op comes back here; but a single op or a library group
         * would run on the CPU, so link fails the compile with this. */
        DiagKind dk = cg->d->kind;
        bool split = dk == DIAG_MODEL && grp->nops > 1 && grp->kind != FUSE_LIBRARY;
        if (!e->first.set && dk != DIAG_RESOURCE && !split)
            diag_copy(&e->first, cg->d);
        return false;
    }
    if (e->n == e->cap) {
        int cap = e->cap ? 2 * e->cap : 16;
        char **p = realloc(e->names, (size_t)cap * sizeof *p);
        if (!p) {
            gpu_kernel_free(&gk);
            return diag_oom(cg->d);
        }
        e->names = p;
        e->cap = cap;
    }
    char entry[48], desc[256];
    snprintf(entry, sizeof entry, "%s_emu", name);
    int n = snprintf(desc, sizeof desc, "%s %s (cuda-emu):", name, fuse_kind_name(grp->kind));
    for (int i = 0; i < grp->nops && n > 0 && (size_t)n < sizeof desc; i++)
        n += snprintf(desc + n, sizeof desc - (size_t)n, " %s", op_info(grp->ops[i]->kind)->name);
    if (!(e->names[e->n] = strdup(entry)) || !(cg->kdesc[cg->nkernels] = strdup(desc))) {
        gpu_kernel_free(&gk);
        return diag_oom(cg->d);
    }
    e->n++;
    cg->nkernels++;
    snprintf(ki->name, sizeof ki->name, "%s", name);
    ki->fn = LLVMAddFunction(cg->mod, entry, cg->t_kernel);
    ki->range = gk.grid; /* the launch runs blocks */
    ki->grain = 1;
    ki->grain_dim = gk.ninit ? gk.grid : NULL; /* outputs filled first: the launch in one call */
    gpu_kernel_free(&gk);
    return true;
}

GpuEmu *gpu_emu_new(CgTarget *t, const char *name, Diag *d)
{
    int warp = !strcmp(name, "cuda-emu") ? 32 : !strcmp(name, "cuda-emu64") ? 64 : 0;
    if (!warp) {
        diag_setk(d, DIAG_ARG, "error: no GPU emulator '%s' (cuda-emu, cuda-emu64)", name);
        return NULL;
    }
    GpuEmu *e = calloc(1, sizeof *e);
    if (!e) {
        diag_oom(d);
        return NULL;
    }
    e->warp = warp;
    t->name = name;
    t->kernel = emu_kernel;
    t->kernel_slots = false;
    t->kernel_split = NULL; /* no split variant: one grid per group */
    t->skinny = NULL;
    t->library = host_emit_kernel_group; /* a matmul is a kernel, conv and pool refused */
    t->kstate = e;
    return e;
}

static bool read_file(const char *path, char *buf, size_t size)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t n = fread(buf, 1, size - 1, f);
    buf[n] = 0;
    fclose(f);
    return true;
}

/* cc: the source at dir/k.c into dir/k.so; false with its messages. */
static bool cc_compile(const char *dir, const char *src, Diag *d)
{
    char c[256], so[256], log[256], cmd[1024];
    snprintf(c, sizeof c, "%s/k.c", dir);
    snprintf(so, sizeof so, "%s/k.so", dir);
    snprintf(log, sizeof log, "%s/log", dir);
    FILE *f = fopen(c, "w");
    if (!f)
        return diag_setk(d, DIAG_RESOURCE, "error: cuda-emu: cannot write %s", c);
    bool ok = fputs(src, f) >= 0;
    ok &= fclose(f) == 0;
    if (!ok)
        return diag_setk(d, DIAG_RESOURCE, "error: cuda-emu: cannot write %s", c);
    /* -fwrapv: integer arithmetic wraps, as on the GPU and in LLVM IR */
    snprintf(cmd, sizeof cmd, "cc -std=gnu11 -O1 -fPIC -shared -fwrapv -w -o '%s' '%s' -lm 2> '%s'", so, c, log);
    int rc = system(cmd);
    if (rc != 0) {
        char msg[700] = "";
        read_file(log, msg, sizeof msg);
        return diag_setk(d, DIAG_INTERNAL, "error: internal: cuda-emu: the host C compiler rejects the generated "
                                           "source (status %d): %s", rc, msg);
    }
    return true;
}

/* The source after the emulator's prelude, compiled by cc into dir/k.so
 * (dir: a fresh directory, made here; emu_clean removes it). */
static bool emu_build(const char *src, int warp, char *dir, Diag *d)
{
    if (!mkdtemp(dir))
        return diag_setk(d, DIAG_RESOURCE, "error: cuda-emu: cannot make a directory in /tmp");
    GpuStr all = {0};
    gpu_str_printf(&all, "#define DISC_WARP %d\n%s\n%s", warp, gpu_prelude(GPU_EMU), src);
    bool ok = !all.failed ? cc_compile(dir, all.p, d) : diag_oom(d);
    gpu_str_free(&all);
    return ok;
}

static void emu_clean(const char *dir)
{
    static const char *files[] = {"k.c", "k.so", "log"};
    char path[256];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
}

void *gpu_emu_load(const char *src, int warp, Diag *d)
{
    char dir[] = "/tmp/disc-emu-XXXXXX";
    void *lib = NULL;
    if (emu_build(src, warp, dir, d)) {
        char path[256];
        snprintf(path, sizeof path, "%s/k.so", dir);
        if (!(lib = dlopen(path, RTLD_NOW | RTLD_LOCAL))) {
            const char *err = dlerror();
            diag_setk(d, DIAG_RESOURCE, "error: cuda-emu: cannot load %s: %s", path, err ? err : "");
        }
    }
    emu_clean(dir);
    return lib;
}

char *gpu_emu_image(const char *src, int warp, size_t *n, Diag *d)
{
    char dir[] = "/tmp/disc-emu-XXXXXX";
    char *img = NULL;
    if (emu_build(src, warp, dir, d)) {
        char path[256];
        snprintf(path, sizeof path, "%s/k.so", dir);
        FILE *f = fopen(path, "rb");
        long size = -1;
        if (f && fseek(f, 0, SEEK_END) == 0)
            size = ftell(f);
        if (size >= 0 && fseek(f, 0, SEEK_SET) == 0 && (img = malloc(16 + (size_t)size))) {
            uint64_t sz = (uint64_t)size;
            memcpy(img, "DISCEMU", 8);
            memcpy(img + 8, &sz, 8);
            if (fread(img + 16, 1, (size_t)size, f) != (size_t)size) {
                free(img);
                img = NULL;
            }
            *n = 16 + (size_t)size;
        }
        if (!img)
            diag_setk(d, DIAG_RESOURCE, "error: cuda-emu: cannot read %s", path);
        if (f)
            fclose(f);
    }
    emu_clean(dir);
    return img;
}

bool gpu_emu_link(GpuEmu *e, const CgModule *m, const char ***names, void ***addrs, int *n, Diag *d)
{
    *n = 0;
    *names = NULL;
    *addrs = NULL;
    if (e->first.set)
        return diag_copy(d, &e->first);
    if (e->src.failed)
        return diag_oom(d);
    if (e->n == 0)
        return true;
    double t0 = disc_rt_now();
    e->lib = gpu_emu_load(e->src.p, e->warp, d);
    e->t_cc = disc_rt_now() - t0;
    if (!e->lib)
        return false;
    void **a = calloc((size_t)e->n, sizeof *a);
    if (!a)
        return diag_oom(d);
    for (int i = 0; i < e->n; i++)
        if (!(a[i] = dlsym(e->lib, e->names[i]))) {
            free(a);
            return diag_setk(d, DIAG_INTERNAL, "error: internal: cuda-emu: no entry %s", e->names[i]);
        }
    *names = (const char **)e->names;
    *addrs = a;
    *n = e->n;
    return true;
}

void gpu_emu_free(GpuEmu *e)
{
    if (!e)
        return;
    for (int i = 0; i < e->n; i++)
        free(e->names[i]);
    free(e->names);
    gpu_str_free(&e->src);
    if (e->lib)
        dlclose(e->lib);
    free(e);
}
