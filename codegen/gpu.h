/*
 * gpu.h — GPU kernels as source text, from the same fusion plan as the CPU.
 *
 *   cuda.c   CUDA C of a group's kernel from the fusion plan: loop groups
 *            (elementwise ops and the index maps, a grid-stride loop),
 *            reductions and stitch groups (a warp or a block per row,
 *            shuffles, the row kept in dynamic shared memory), library
 *            groups (dot, conv, pool: a thread
 *            per result element); the module's source for dcc emit
 *   prelude.c  the text the kernels are compiled after, per target: CUDA,
 *            HIP and the emulator's differ only there
 *   nvrtc.c  NVRTC and HIPRTC, loaded with dlopen: the module's source to
 *            CUBIN or PTX, or to an AMD code object, through the on-disk
 *            cache of compiled code (cache.h)
 *   emu.c    the cuda-emu target (a test instrument, not a user backend):
 *            the same source compiled by the host C compiler with a prelude
 *            that runs a block's threads on the CPU, bounds-checking every
 *            buffer access, called from the cpu-jit host flow
 *
 * The kernel ABI on a GPU. A kernel of group G is
 *
 *     DISC_KERNEL void disc_kN(T0 *b0, ..., Tn *bn, int64_t sA, ..., int64_t sZ)
 *
 * with the buffers of G.ins then G.outs (the CPU kernel's order) and the
 * value of every symbol its code reads (by symbol id, ascending), and for
 * a kernel with run-time variants a last `int64_t var`; launched on
 * GpuKernel.grid blocks of GPU_BLOCK threads with GpuKernel.shmem bytes
 * of dynamic shared memory. The host flow computes grid, var and shmem
 * from the symbols, so one kernel serves every shape.
 */
#ifndef DISC_GPU_H
#define DISC_GPU_H

#include "codegen/codegen.h"
#include "runtime/rt.h"

typedef enum GpuLang { GPU_CUDA, GPU_HIP, GPU_EMU } GpuLang;

enum {
    GPU_BLOCK = 256,      /* threads per block of a loop kernel */
    GPU_GRID_MAX = 8192,  /* blocks of a loop kernel at most: the rest by striding */
    GPU_EMU_GRID_MAX = 3, /* the emulator's: few, so every test strides */
    GPU_WARP_ROW_MAX = 1024, /* a row reduction takes a warp per row up to this
                                many elements, a block per row beyond ... */
    GPU_FEW_ROWS = 4096,  /* ... and also where fewer rows than this (a warp each
                             leaves most of a device's SMs idle) are each at
                             least GPU_BLOCK elements long */
    GPU_DYN_SHARED_MAX = 40 << 10, /* bytes of dynamic shared memory a row kernel
                                      keeps its rows in, at most (else it reads
                                      them again) */
    GPU_COL_SPLIT_TILES = 32, /* a column reduction of at most this many tiles
                                 of 32 columns ... */
    GPU_COL_SPLIT_ROWS = 1024, /* ... and columns longer than this is split into
                                  parts of at least this many elements ... */
    GPU_COL_SPLIT_MAX = 64,   /* ... and at most this many parts */
    GPU_INIT_MAX = 4,         /* outputs a kernel's launch fills first, at most */
    GPU_INDEX32_MAX = 1 << 30, /* a loop kernel's buffers and count up to this
                                  many elements: its 32-bit index variant */
};

/* An output the host flow fills before a launch of a split variant (the
 * parts' results are combined into it by atomics): buffer parameter buf,
 * n elements of dtype, each value (0, or -inf and inf for max and min). */
typedef struct GpuInit {
    int buf;
    DType dtype;
    double value;
    Dim *n;
} GpuInit;

/* Growable text; `failed` once an allocation failed. */
typedef struct GpuStr {
    char *p;
    size_t n, cap;
    bool failed;
} GpuStr;
void gpu_str_printf(GpuStr *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void gpu_str_free(GpuStr *s);

/* One kernel's launch. */
typedef struct GpuKernel {
    char name[32];     /* "disc_k3" */
    Dim *grid;         /* blocks, from the symbols */
    int block;         /* threads per block */
    int nbufs;         /* buffer parameters: the group's ins, then outs */
    int *syms;         /* symbol ids of the int64 parameters, ascending */
    int nsyms;
    Dim *var;          /* the variant, the last parameter `int64_t var`, from
                          the symbols (NULL: the kernel has none) */
    Dim *shmem;        /* bytes of dynamic shared memory, from the symbols
                          (NULL: none) */
    GpuInit init[GPU_INIT_MAX]; /* filled before a launch of the split
                          variant (var's bit 0; every launch where the
                          kernel has no var) */
    int ninit;
} GpuKernel;

/* Appends grp's kernel, called name, to src (without a prelude): the
 * CUDA C every language shares; with lang GPU_EMU also its emulator entry
 * `void NAME_emu(int64_t begin, int64_t end, void *args)` (the CPU kernel
 * ABI of codegen.h, over blocks [begin, end)). grid_max caps the grid;
 * the launch (k->grid, var, shmem) is for warps of `warp` lanes (32 or
 * 64), the text the same for any.
 * A group the GPU path does not take yet is a DIAG_UNSUPPORTED error
 * naming the op and where it is. k->syms is malloc'd (gpu_kernel_free). */
bool gpu_kernel(Cg *cg, const Group *grp, const char *name, GpuLang lang, int grid_max, int warp, GpuStr *src,
                GpuKernel *k);
void gpu_kernel_free(GpuKernel *k);
/* The located DIAG_UNSUPPORTED error for op (NULL: the model) that the
 * GPU path does not take yet: "FILE:LINE: error: not supported on cuda
 * yet: WHAT". Returns false. */
bool gpu_unsupported(const Graph *g, const Op *op, const char *what, Diag *d);
/* The text every kernel of lang is compiled after. */
const char *gpu_prelude(GpuLang lang);
/* The whole module of m's plan as lang's source (prelude, then one
 * kernel per distinct group signature), for dcc emit and NVRTC (GPU_EMU:
 * the kernels and their entries without the #include, for
 * gpu_emu_load, at warps of 32 lanes and grids up to GPU_GRID_MAX); groups
 * not supported yet are listed in comments and counted in *unsupported,
 * and the first one's error is left in why (when not NULL). */
bool gpu_module_source(const CgModule *m, GpuLang lang, GpuStr *out, int *nkernels, int *unsupported, Diag *why,
                       Diag *d);

/* ---- NVRTC (nvrtc.c) ------------------------------------------------------ */

/* Compiles src for arch ("sm_80") to CUBIN (cubin) or PTX; *out is
 * malloc'd. With info (and cubin), *info is ptxas's report (malloc'd):
 * per kernel its registers, stack frame, spill stores and loads, shared
 * memory. Where NVRTC cannot be loaded: false, a DIAG_RESOURCE error
 * naming the library. A compile error is DIAG_INTERNAL with NVRTC's log. */
bool gpu_nvrtc_compile(const char *src, const char *name, const char *arch, bool cubin, char **out, size_t *n,
                       char **info, Diag *d);
/* NVRTC's version ("13.0"), or NULL with the reason in d; the same for
 * the compiler of lang (HIPRTC for GPU_HIP). */
const char *gpu_nvrtc_version(Diag *d);
const char *gpu_rtc_version(GpuLang lang, Diag *d);
/* HIPRTC (inside libamdhip64.so.5): src (HIP, after disc_hip.h) to a code
 * object for arch (gfx90a, gfx908, gfx906, gfx1030; another name is
 * refused: HIP 5.2 aborts the process on some). As gpu_nvrtc_compile. */
bool gpu_hiprtc_compile(const char *src, const char *name, const char *arch, char **out, size_t *n, Diag *d);
/* What gpu_rtc_compile_cached did. */
typedef struct GpuCacheInfo {
    bool hit;          /* read from the cache, not compiled */
    bool stored;       /* compiled and written to the cache */
    double seconds;    /* the compile's (0 on a hit) */
    char file[4200];   /* the cache file ("" when the cache is off) */
    char note[256];    /* why the cache was not used or written, if so */
} GpuCacheInfo;
/* src compiled for arch as gpu_nvrtc_compile (lang GPU_CUDA; bin: CUBIN,
 * else PTX) or gpu_hiprtc_compile (GPU_HIP) do, through the on-disk cache
 * of the cpu-jit (cache.h; o's cache_dir and no_cache, DISC_CACHE_DIR,
 * DISC_CACHE=0): a module compiled before with the same source, prelude,
 * compiler version, target and disc build is read back. A cache that
 * cannot be written is no error (ci->note says why). */
bool gpu_rtc_compile_cached(const CgOpts *o, GpuLang lang, const char *src, const char *name, const char *arch,
                            bool bin, char **out, size_t *n, GpuCacheInfo *ci, Diag *d);
/* The CUDA driver (runtime/cudrv.c), for a real cuda backend: false with
 * an error naming the library when it cannot be loaded, or the call that
 * failed (cuInit: no device). */
bool gpu_cuda_driver_check(Diag *d);

/* ---- the emulator (emu.c) ---------------------------------------------------- */

typedef struct GpuEmu GpuEmu;
/* Makes t (cpu_target_hooks'd) the emulator called name: "cuda-emu"
 * (warps of 32 lanes) or "cuda-emu64" (64, as AMD's wavefronts): kernels
 * as GPU source, launched over their blocks. */
GpuEmu *gpu_emu_new(CgTarget *t, const char *name, Diag *d);
/* Before the JIT links: the plan holds nothing the emulator refuses (a
 * library call), the kernels' source compiled by cc into a shared object
 * and its entry points returned as (name, address) pairs. */
bool gpu_emu_link(GpuEmu *e, const CgModule *m, const char ***names, void ***addrs, int *n, Diag *d);
void gpu_emu_free(GpuEmu *e);
/* Its kernels, their source's size and the host C compiler's time. */
void gpu_emu_stats(const GpuEmu *e, int *nkernels, size_t *bytes, double *seconds);
/* GPU source (kernels and their _emu entries) after the emulator's
 * prelude for warps of `warp` lanes, compiled by cc and loaded (dlclose
 * it); NULL with d set. */
void *gpu_emu_load(const char *src, int warp, Diag *d);
/* The same shared object as a module image for the cuda backend on the
 * stand-in driver (tests/unit/fake_cuda.c): "DISCEMU\0", its size as 8
 * bytes, the object; malloc'd, *n its bytes; NULL with d set. */
char *gpu_emu_image(const char *src, int warp, size_t *n, Diag *d);

/* ---- the cuda target (gpurun.c) -------------------------------------------- */

typedef struct GpuRun GpuRun;
/* Makes t (cpu_target_hooks'd, a CPU target's const_ptr, host_op and
 * finish set) the cuda target; with open (the JIT), opens the device
 * (DISC_CUDA_DEVICE, else 0) the module is compiled for. NULL with the
 * driver's error in d. */
GpuRun *gpu_run_new(CgTarget *t, const CgOpts *o, bool open, Diag *d);
/* The module of the kernels made so far as count images, compiled at
 * once (up to a thread per CPU): image i a CUBIN for arch[i], or
 * (cubin[i] false) NUL-terminated PTX; with DISC_CUDA_EMU_MODULES=1 the
 * emulator's image whatever arch says. img[i] malloc'd, n[i] bytes;
 * false with the first failure's error in d (and no image). */
bool gpu_run_compile(GpuRun *r, int count, const char *const *arch, const bool *cubin, char **img, size_t *n,
                     Diag *d);
/* The kernels' names (up to max into names); returns how many there are. */
int gpu_run_kernels(const GpuRun *r, const char **names, int max);
/* The constants the kernels read (slots of disc_jit_dconsts). */
int gpu_run_consts(const GpuRun *r);
/* Per kernel its DiscGpuFn, once linked (the profile's keys). */
void *const *gpu_run_functions(const GpuRun *r);
bool gpu_run_emu(const GpuRun *r);
/* The data the JIT defines for the flow, once the module is built: the
 * kernels' DiscGpuFn* (disc_jit_gpufns) and the constants' device
 * addresses (disc_jit_dconsts). */
typedef struct GpuRunSyms {
    void *fns, *consts;
} GpuRunSyms;
/* Compiles the kernels for the open device (gpu_run_compile), loads
 * them, and makes the (empty) table of the constants' device copies. */
bool gpu_run_link(GpuRun *r, GpuRunSyms *s, Diag *d);
DiscGpu *gpu_run_device(const GpuRun *r);
typedef struct GpuRunStats {
    int nkernels, nconsts;
    size_t bytes;      /* of CUDA C */
    double seconds;    /* compiling it (0 from the cache) */
    bool hit, emu;
    char arch[16], device[128];
    char gemm[160];    /* where the matmuls run: "cuBLASLt", or disc's GEMM kernel and why */
    char conv[160];    /* where the convolutions run: "cuDNN", or disc's kernels and why */
} GpuRunStats;
void gpu_run_stats(const GpuRun *r, GpuRunStats *s);
void gpu_run_free(GpuRun *r);

#endif
