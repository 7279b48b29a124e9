/*
 * codegen.h — from a fusion plan to native code.
 *
 *   driver.c  the pipeline every target shares: analyses and plans, the
 *             module through the target's hooks, the optimiser, finish
 *   cpu.c     the target CPU (vector width, registers) and the launch and
 *             skinny hooks both CPU targets share
 *   llvm.c    the LLVM context of one compile: types, constants, intrinsics,
 *             dims as LLVM values
 *   elem.c    the elemental emitter: the value of one element of a value
 *             of the group at a multi-index, through index maps (broadcast,
 *             transpose, slice, pad, concat, reshape, gather, iota)
 *   kernel.c  kernel templates over a group: loop (flat and n-d), row and
 *             general reduction (input fusion), stitch (row reductions and
 *             the work over the same rows), and column reductions (both
 *             over blocks of kept innermost columns)
 *   host.c    the host flow: one function per model that binds the
 *             symbols, checks the inputs, allocates buffers and calls the
 *             kernels, the library thunks and the host ops in order
 *   skinny.c  the skinny matmul kernel, shaped for the target's registers
 *   exec.c    the cpu-jit target: a compiled model in memory, run it
 *   aot.c     the cpu-aot target: a model as an object file
 *
 * The kernel ABI. Every kernel is
 *
 *     void kernel(int64_t begin, int64_t end, void *args)
 *
 * run by disc_rt_parallel_for over [0, range): args is an array of
 * pointers: the buffers of the group's inputs (Group.ins order), then of
 * its outputs (Group.outs order), then a pointer to int64 symbol values:
 * on the CPU targets those the kernel reads, by slot (the order the
 * group's signature names them, ksig.c), which the launch copies from the
 * host flow's symbols, so groups equal up to their symbols' names share a
 * kernel; on targets without CgTarget.kernel_slots every symbol, by symbol
 * id. Kernels compute every dim they need from the symbols, so one kernel
 * serves every shape.
 */
#ifndef DISC_CODEGEN_H
#define DISC_CODEGEN_H

#include "passes/passes.h"

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

typedef struct Exec Exec; /* a compiled model */

typedef struct CgOpts {
    int opt_level;     /* 0..3 */
    const char *cpu;   /* the CPU to compile for: an LLVM name ("x86-64-v3",
                          "skylake-avx512"), "native" or NULL (DISC_CPU, else
                          this machine); see cpu.c */
    bool verbose;      /* per-stage times on stderr */
    int threads;       /* 0: every core */
    bool unfused;      /* one kernel per op (the baseline, and for debugging) */
    const char *dump_after; /* the name of a pass (cg_passes): what it made,
                               on stderr */
    const char *gpu;   /* "cuda-emu": the kernels as GPU source, run by the
                          emulator (gpu.h, a test instrument); NULL: the CPU's */
    bool no_cache;     /* cpu-jit: neither read nor write the on-disk cache
                          of compiled code (cache.h) */
    const char *cache_dir; /* its directory; NULL: DISC_CACHE_DIR, else
                              $HOME/.cache/disc/jit */
    bool keep_llvm;    /* cpu-jit: keep the optimised module's text for
                          exec_print_llvm (no cache then) */
    int compile_threads; /* cpu-jit: parts of the module optimised and
                            compiled at once (objects.c); 0: one per CPU */
    bool plain_layout; /* convolutions on the model's NCHW data, not made
                          channels-last (passes/layout.c); also
                          DISC_LAYOUT=plain */
} CgOpts;

/* Whether the layout pass runs for o: CPU targets, unless plain_layout or
 * DISC_LAYOUT=plain says otherwise. */
bool cg_channels_last(const CgOpts *o);
/* Its block of channels (driver.c): 16, 8, or 0 for channels-last. */
int cg_layout_block(const CgOpts *o);
/* Whether the optimiser runs LLVM's SLP vectoriser (driver.c): yes unless
 * DISC_NOSLP is set (to anything but 0), for comparisons. */
bool cg_slp(void);
/* Whether the row kernels' passes emit their lanes as vectors where
 * elem_vec takes them (kernel.c; defined in llvm.c): yes unless DISC_ROWVEC=0, which keeps
 * them lane by lane for the SLP vectoriser, for comparisons. */
bool cg_rowvec(void);
/* Whether groups that differ only in constants share one kernel that
 * reads them by slot (ksig.c, "constants as slots"): yes unless
 * DISC_SHARE_CONSTS=0, for comparisons. */
bool cg_share_consts(void);

/* ---- the target CPU (cpu.c) ------------------------------------------- */

typedef struct CpuTarget {
    char name[64];     /* LLVM's CPU name ("znver3", "x86-64-v3") */
    char *features;    /* LLVM feature string: this machine's for native, else "" */
    bool native;       /* this machine */
    int vbits;         /* the widest float vector: 128, 256 or 512 bits */
    int nvregs;        /* vector registers: 16, or 32 with AVX-512 */
    int prefer_bits;   /* the width the loop vectoriser is told to prefer;
                        * 0: LLVM's tuning for the CPU (cpu.c, prefer_width) */
    char isa[16];      /* "avx512f", "avx2", "avx" or "sse2", for messages */
} CpuTarget;

/* The target for name (see CgOpts.cpu); an unknown name is an error. */
bool cpu_target_init(CpuTarget *t, const char *name, Diag *d);
void cpu_target_free(CpuTarget *t);
/* Whether this machine runs code for t (the JIT's check: a wider vector
 * ISA than the host's would fault); false with a message. */
bool cpu_target_runs_here(const CpuTarget *t, Diag *d);

/* ---- the LLVM side of one compile (llvm.c) ---------------------------- */

/* The symbols a kernel reads, by slot (ksig.c): a kernel emitted with
 * Cg.kslot set reads symbol s from slot cg_ksym_slot(ks, s) of the array
 * its launch passes, not from the host's array by symbol id. */
typedef struct KSyms {
    int *slot;       /* by symbol id: 1 + its slot, 0 if it has none */
    int nslot;
    DimMap comp;     /* a dim that is not a symbol (ksig.c, "dims as
                        slots") -> 1 + its slot, as a pointer */
    Dim **sym;       /* by slot: a symbol, or a dim the kernel reads whole */
    int n, cap;
    bool oom;
    bool open;       /* constants of 2 and more named by slots too (ksig.c,
                        "constants as slots": the classes cg_open_consts finds) */
} KSyms;

/* A plan group's constants that its kernel reads by slot (ksig.c,
 * "constants as slots"): from[i] is written to[i] (a symbol of the
 * class, a multiple of one, or a product of two) while the kernel is
 * found or emitted; the launch gives symbol sym[j] the constant val[j]. */
typedef struct OpenConsts {
    Dim **from, **to;
    int n;
    Dim **sym, **val;
    int nsym;
} OpenConsts;

typedef struct KernelInfo {
    LLVMValueRef fn;
    char name[32];
    Dim *range;        /* parallel iterations */
    int64_t grain;     /* minimum iterations per task */
    Dim *grain_dim;    /* when set, the grain as a dim, computed at run time */
} KernelInfo;

struct CgTarget;

typedef struct Cg {
    Graph *g;
    ShapeInfo *si;
    FusionPlan *plan;
    MemPlan *mp;               /* NULL: every buffer from run memory */
    Diag *d;
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMBuilderRef b;
    LLVMTypeRef t_void, t_i1, t_i8, t_i16, t_i32, t_i64, t_f32, t_f64, t_p8, t_p64, t_pp8;
    LLVMTypeRef t_kernel; /* void(i64, i64, i8*) */
    int nkernels;
    char **kdesc;              /* per kernel: "k3 stitch: reduce exp sub ...",
                                  "k4 input columns: reduce" */
    char **ksig;               /* per kernel: its signature (ksig.c) */
    struct KernelInfo *kinfo;         /* per kernel */
    struct KShare *kshare;     /* per kernel: what sharing it under renaming needs (host.c) */
    KSyms ks;                  /* the symbols of the group whose kernel is being
                                  found or emitted, by slot (host.c) */
    KSyms *kslot;              /* while a kernel is emitted with slots: its
                                  symbols, read from the launch's array by
                                  slot (dim_rec); NULL: the host's array by id */
    struct KShare *kfacts;     /* while a kernel is emitted with slots: where
                                  kern_maybe_one notes its answers */
    OpenConsts *open;          /* per plan group: the constants its kernel reads
                                  by slot (cg_open_consts); NULL: none */
    int nreused;               /* groups that reused an earlier kernel */
    int nopened;               /* kernels made with constants read by slot (cg_open_consts) */
    int nlaunch;               /* kernel launches in the host flow */
    int nlibrary;              /* library calls in the host flow */
    int nepilogue;             /* of them, applying the start of their epilogue */
    int nskinny;               /* of them, with a skinny-matmul variant (skinny.c) */
    int nnhwc;                 /* library calls of convolutions and pools on channels-last (or blocked) data */
    int nfallback;             /* groups split up because no template took them */
    int nvariants;             /* kernels with a no-broadcast variant and a fallback */
    LLVMValueRef skinny[48];   /* skinny.c's kernels, by post * 4 + bias * 2 + residual */
    LLVMValueRef skinny_core;  /* the matmul they all call (skinny.c) */
    LLVMValueRef split[64][3]; /* a row kernel and its split variant's two kernels */
    int nsplit;
    int nsplitgroups;          /* kernel launches with a split variant */
    /* per function being emitted */
    LLVMValueRef fn;
    LLVMBasicBlockRef entry;   /* hoisted values (dims, strides) go here */
    LLVMBuilderRef eb;         /* a builder at the end of entry */
    LLVMValueRef syms;         /* i64* to the symbol values */
    DimMap dimcache;           /* Dim -> LLVMValueRef (as Dim*) in entry */
    bool no_hoist;             /* dims at the current position, not hoisted
                                  (the host flow, where symbols change as it
                                  runs) */
    bool memo;                 /* with no_hoist: those dims memoised until
                                  cg_dim_forget (the host flow's, between the
                                  points where a symbol may change or control
                                  flow joins) */
    LLVMBasicBlockRef ovf;     /* the host flow's: a block that reports a dim
                                  overflow and returns; set, its dims'
                                  sums and products are checked (cg_dim) */
    const CpuTarget *cpu;      /* what the kernels are shaped for */
    const struct CgTarget *target; /* where the model runs: the hooks below */
} Cg;

bool cg_init(Cg *cg, LLVMContextRef ctx, Graph *g, ShapeInfo *si, FusionPlan *plan, Diag *d);
void cg_free(Cg *cg);

/* Starts a function: creates its entry block and the entry builder; the
 * main builder is left at a new "body" block. cg_end_function branches the
 * entry to the body and verifies nothing (llvm.c verifies the module). */
void cg_begin_function(Cg *cg, LLVMValueRef fn, LLVMValueRef syms);
void cg_end_function(Cg *cg, LLVMBasicBlockRef body);
/* Emitting a function in the middle of another (a kernel while the host
 * flow is being built): cg_fn_save keeps the outer one's state and starts
 * a fresh dim cache, cg_fn_restore puts it back with the builders where
 * they were. */
typedef struct CgFnState {
    LLVMBasicBlockRef here, entry;
    LLVMValueRef fn, syms;
    DimMap dimcache;
    bool no_hoist, memo;
    LLVMBasicBlockRef ovf;
} CgFnState;
void cg_fn_save(Cg *cg, CgFnState *s);
void cg_fn_restore(Cg *cg, CgFnState *s);
/* x * y (mul) or x + y in i64 at builder b, branching to cg->ovf when it
 * overflows (where that is set and b is the current builder: the host
 * flow); plain arithmetic elsewhere. */
LLVMValueRef cg_checked(Cg *cg, LLVMBuilderRef b, bool mul, LLVMValueRef x, LLVMValueRef y);

/* A dim as an i64 value, computed once per function in its entry block
 * (with no_hoist: at the current position, once until cg_dim_forget when
 * memo is set, else at every call). */
LLVMValueRef cg_dim(Cg *cg, Dim *d);
/* Drops the memoised dims: where the builder moves to a block that the
 * blocks they were computed in may not dominate, or a symbol changes. */
void cg_dim_forget(Cg *cg);
/* The memoised dims at a fork of control flow (mark: a copy the caller
 * frees with dimmap_free), and back to them where a branch starts or the
 * branches join: what was computed before the fork dominates both. */
void cg_dim_mark(Cg *cg, DimMap *mark);
void cg_dim_back(Cg *cg, const DimMap *mark);
/* Drops the memoised dims that mention one of syms (a host op bound
 * them); the rest stay, computed where they still dominate. */
void cg_dim_forget_syms(Cg *cg, Dim *const *syms, int n);
LLVMValueRef cg_i64(Cg *cg, int64_t v);
LLVMValueRef cg_i32(Cg *cg, int32_t v);
/* floor division and floored mod of i64 values (b > 0 not required). */
LLVMValueRef cg_floordiv(Cg *cg, LLVMBuilderRef b, LLVMValueRef x, LLVMValueRef y);
/* A call to an LLVM intrinsic or a libm function, overloaded on type t. */
LLVMValueRef cg_call_intrinsic(Cg *cg, const char *name, LLVMTypeRef t, LLVMValueRef *args, int n);
LLVMValueRef cg_call_libm(Cg *cg, const char *name, LLVMTypeRef t, LLVMValueRef *args, int n);
/* The LLVM type a dtype computes in (f16/bf16 compute in f32; bool is i1)
 * and the one it is stored in (bool as i8, f16/bf16 as i16). */
LLVMTypeRef cg_compute_type(Cg *cg, DType dt);
LLVMTypeRef cg_storage_type(Cg *cg, DType dt);
LLVMValueRef cg_load(Cg *cg, DType dt, LLVMValueRef ptr);          /* ptr: storage_type* */
void cg_store(Cg *cg, DType dt, LLVMValueRef v, LLVMValueRef ptr);
/* Hints to LLVM's loop passes. Loops the generator has already shaped
 * (vector code, a kernel's k loop) unrolled by LLVM grow into thousands of
 * lines that take most of a compile: a row of 768 floats reduced 8 at a
 * time became 96 copies of the step. So no generated loop is unrolled
 * unless it asks (CG_UNROLL); CG_NO_VECTORIZE and CG_NO_INTERLEAVE keep
 * the vectoriser off a loop or to one vector a step. */
enum { CG_NO_UNROLL = 1, CG_NO_VECTORIZE = 2, CG_NO_INTERLEAVE = 4, CG_UNROLL = 8 };
/* A counted loop [0, n): returns the induction variable; the builder is in
 * the body. cg_loop_end closes it, with the hints of l->hints (0 from
 * cg_loop_begin: not unrolled). */
typedef struct CgLoop {
    LLVMBasicBlockRef head, body, exit;
    LLVMValueRef iv, next;
    LLVMValueRef latch;        /* the back edge's branch, once cg_loop_end made it */
    int hints;                 /* CG_* for cg_loop_end */
} CgLoop;
LLVMValueRef cg_loop_begin(Cg *cg, CgLoop *l, LLVMValueRef start, LLVMValueRef end, const char *name);
void cg_loop_end(Cg *cg, CgLoop *l);
/* The hints for a loop built by hand, whose back edge is the branch latch
 * (CG_NO_UNROLL is not implied here). */
void cg_loop_hint(Cg *cg, LLVMValueRef latch, int hints);

/* ---- kernels (elem.c, kernel.c) ---------------------------------------- */


/* Emits the kernel of a LOOP, INPUT or STITCH group (or the epilogue of a
 * LIBRARY group when `epilogue`). */
bool cg_kernel(Cg *cg, const Group *grp, KernelInfo *ki);
/* The split variant of a reduction group with few long rows (kernel.c,
 * "split rows"): whether grp takes it (its rows, their length, its
 * reductions), and its two kernels. The parts kernel's args are the
 * group's buffers, the symbols, then scratch room for rows *
 * DISC_SPLIT_PARTS * nred 8-byte slots; the combine kernel's the same. */
enum { DISC_SPLIT_PARTS = 16, DISC_SPLIT_MIN = 1 << 15 };
bool cg_split_fits(const Group *grp, Dim **rows, Dim **len, int *nred, DimCtx *cx);
bool cg_kernel_split(Cg *cg, const Group *grp, KernelInfo *part, KernelInfo *fin);
/* s's slot, given the next one if it has none (-1 and ks->oom if out of memory). */
int cg_ksym_slot(KSyms *ks, Dim *s);
/* s's slot, or -1 where it has none */
int cg_ksym_find(const KSyms *ks, const Dim *s);
void cg_ksyms_clear(KSyms *ks); /* no symbol has a slot (memory kept) */
void cg_ksyms_free(KSyms *ks);
/* What a group's kernel code depends on, as text (ksig.c): groups with
 * equal signatures share one kernel. With ks (cleared), the symbols are
 * named by slot, given in the order they appear, and the text holds their
 * bounds: groups equal up to their symbols' names match. malloc'd; NULL
 * if out of memory. */
char *cg_kernel_signature(const Group *grp, KSyms *ks);
/* Finds the plan's groups that differ only in constants (their
 * signatures with constants as slots equal) and gives each of the
 * differing constants a symbol (Cg.open). */
bool cg_open_consts(Cg *cg);
void cg_open_consts_free(Cg *cg);
/* Whether v is a constant integer of one element that grp reads only as a
 * gather's indices: the CPU's kernel loads it from its buffer instead of
 * folding it into the code, and the renamed signature leaves its value out, so
 * the kernels that read one column each of a detector's class scores
 * (scores[:, c] for c = 1..90) are one. */
bool cg_index_const(const Group *grp, const Value *v);
/* What sharing kernel k under renaming needs (host.c): the symbols its
 * code reads, by slot, and the facts its emission took about its dims. */
typedef struct KShare {
    Dim **sym;         /* by slot */
    int nsym;          /* slots its code reads */
    int nsig;          /* of them, named by its signature */
    Dim **fact;        /* dims kern_maybe_one answered for, in its symbols */
    bool *maybe1;      /* the answers */
    int nfact, capfact;
    bool alone;        /* its code read a symbol its signature does not
                          name, or a fact could not be noted: shared only
                          by groups with its very symbols */
} KShare;
/* A fact kernel code took about dim d (kern_maybe_one's answer r), noted
 * in Cg.kfacts while a kernel is emitted with slots; and every kernel's
 * KShare, freed (ksig.c). */
void cg_kshare_note(Cg *cg, Dim *d, bool r);
void cg_kshare_free(Cg *cg);
/* The skinny matmul kernel (skinny.c) for one epilogue: a DiscKernelFn
 * over the weights' 64-column panels for disc_rt_call_skinny (rt.h);
 * made once per module and epilogue. post is a DiscPost. */
LLVMValueRef cg_skinny_kernel(Cg *cg, int post, bool bias, bool residual);
/* The panel width those kernels take for the target: DISC_PANEL or DISC_PANEL_NARROW. */
int cg_skinny_panel(const Cg *cg);

/* ---- targets ------------------------------------------------------------
 *
 * What the host flow needs from where the model runs, as hooks (STYLE.md,
 * "Targets"): host.c and hostlib.c never test which target they serve. A
 * target says how a group's kernel is emitted and launched, how the flow
 * reaches a constant's data and runs an op that has no kernel, and how the
 * finished module becomes something that runs. cpu-jit (exec.c: kernels
 * in memory, constants and ops as addresses, ORC LLJIT) and cpu-aot
 * (aot.c: an object file, constants as globals or a weights file, ops
 * through the IR text it carries) are the first two; they share the CPU's
 * kernel templates and launch (cpu.c, kernel.c, skinny.c). A GPU target
 * fills the same hooks with kernels as source text for NVRTC or HIPRTC, a
 * launch with a grid computed by the flow, device memory and library
 * calls on a stream. The driver (driver.c) builds the module and calls
 * finish; it knows no target either. */
struct Host;
typedef struct CgModule CgModule;
typedef struct CgTarget {
    const char *name;  /* "cpu-jit", "cpu-aot" */
    /* The kernel of a loop, input or stitch group: ki gets its function,
     * parallel range and grain; false (with cg->d) when no template takes
     * the group, which the flow then splits up. */
    bool (*kernel)(Cg *cg, const Group *grp, KernelInfo *ki);
    /* The split variant's two kernels of a row group (cg_split_fits). */
    bool (*kernel_split)(Cg *cg, const Group *grp, KernelInfo *part, KernelInfo *fin);
    /* A library group (a matmul, conv or pool with its epilogue) when the
     * target runs it itself, as a kernel (the GPU emulator); NULL: the
     * runtime's library calls (hostlib.c). */
    bool (*library)(struct Host *h, const Group *grp);
    /* The skinny matmul kernel for an epilogue and its panel width; NULL
     * when the target has none (the library runs every matmul). */
    LLVMValueRef (*skinny)(Cg *cg, int post, bool bias, bool residual, int *panel);
    /* The most rows of A the skinny kernel takes (the runtime's limit for
     * its panel width), for the flow to leave it out where m is proved
     * larger. */
    int64_t (*skinny_rows)(const Cg *cg);
    /* Kernels read the symbols from an array of the group's own, by slot
     * (Cg.kslot), so groups equal up to their symbols' names share one
     * (ksig.c); false: from the host's array by symbol id (the GPU
     * targets, whose kernels take the symbols they read as arguments). */
    bool kernel_slots;
    /* Emits the run of kernel fn over [0, range) in chunks of at least
     * grain, with args (i8*: the buffers and symbols, codegen.h's ABI). */
    void (*launch)(struct Host *h, LLVMValueRef fn, LLVMValueRef args, LLVMValueRef range, LLVMValueRef grain);
    /* The address of a constant's data (i8*). */
    LLVMValueRef (*const_ptr)(struct Host *h, const Op *op);
    /* The call that runs op on the host; bufs (i8**) holds its operands,
     * then room for its results. Returns the call's i32 status. */
    LLVMValueRef (*host_op)(struct Host *h, Op *op, LLVMValueRef bufs);
    /* Kernels read and write device memory (host.c keeps a host and a
     * device copy of a value as each side needs, and the memory plan's
     * block is on the device); the address of a constant's device copy
     * (i8*), uploaded once per compiled model. */
    bool dev_memory;
    LLVMValueRef (*const_dev)(struct Host *h, const Op *op);
    /* What a library call's epilogue cannot apply (hostlib.c): the
     * activations (bit 1 << DiscPost) and, with lib_res_alone, a residual
     * after one (cuBLASLt adds its C operand before the activation). */
    unsigned lib_no_posts;
    /* and what a convolution's should not: the activations its own loop
     * kernel after the call computes faster (cpu.c) */
    unsigned conv_no_posts;
    /* a 1 x 1 convolution with at least this many output channels takes
     * no residual where the kernels are for AVX-512 (0: every one takes
     * it): the residual's binary post-op moved oneDNN 2.6 from brgconv_1x1
     * to its slower jit_1x1 (cpu.c) */
    int conv_res_wide;
    bool lib_res_alone;
    /* dots, convolutions and pools that fit go to the device's libraries
     * (disc_rt_dev_matmul, cuBLASLt; disc_rt_dev_conv and disc_rt_dev_pool,
     * cuDNN: dev_conv) rather than the target's own kernels (dev_memory
     * targets) */
    bool dev_matmul, dev_conv;
    /* Makes the verified module m run: optimise it for cg's CPU and JIT it,
     * or write the object. Owns m->mod from here on. */
    bool (*finish)(const struct CgTarget *t, CgModule *m, const CgOpts *o, const CpuTarget *cpu, Diag *d);
    void *state;       /* the target's own: the JIT's Exec, AOT's CgAot */
    void *kstate;      /* the kernel hooks' own: the emulator's GpuEmu */
} CgTarget;

/* The hooks both CPU targets share (cpu.c): the kernel templates, the
 * skinny kernels and the launch on the runtime's pool; the caller sets
 * const_ptr, host_op, finish and state. */
void cpu_target_hooks(CgTarget *t, const char *name);
/* The CPU's kernel launch (cpu.c): disc_rt_parallel_for. */
void cpu_launch(struct Host *h, LLVMValueRef fn, LLVMValueRef args, LLVMValueRef range, LLVMValueRef grain);
/* The CPU's skinny kernels: cg_skinny_kernel with cg_skinny_panel. */
LLVMValueRef cpu_skinny(Cg *cg, int post, bool bias, bool residual, int *panel);
int64_t cpu_skinny_rows(const Cg *cg);

/* ---- the host flow and the compiled model (host.c, exec.c) -------------- */

/* Emits the host flow `int32_t disc_main(DiscRt *rt, void **io, int64_t
 * *shapes, int64_t *syms)` (see host.c) through cg->target's hooks. */
bool cg_host(Cg *cg);

/* The JIT's host-op thunk (exec.c): runs the op at index `op` of the
 * graph (program order) through the reference interpreter's code. Library
 * calls and output buffers go straight to the runtime (rt.h:
 * disc_rt_call_*, disc_rt_output). */
int32_t disc_exec_host_op(void *self, void *rt, int64_t op, void **bufs, int64_t *syms);

/* The driver (driver.c), shared by every target: shape analysis,
 * canonicalisation, the fusion and memory plans, the kernels and the host
 * flow as a verified LLVM module in ctx, through the target's hooks
 * (cg_build_module); then target->finish (cg_compile). On failure returns
 * false with the message in d. */
struct CgModule {
    Graph *g;
    ShapeInfo *si;
    FusionPlan *plan;
    MemPlan *mp;
    LLVMModuleRef mod;
    char **kdesc;      /* per kernel */
    int nkernels, nlaunch, nlibrary, nepilogue, nskinny, nsplit, nnhwc;
    int nopened; /* of the kernels, those reading constants by slot (Cg.nopened) */
    int nlast;         /* convolutions and pools the layout pass made channels-last */
    int block;         /* or blocked, by this many channels (0: channels-last) */
    double t[5];       /* seconds: shape+canon, fusion+memplan, LLVM IR, finish (optimise and JIT or object) */
    CanonStats canon;  /* what canonicalisation did */
};
bool cg_build_module(Graph *g, const ShapeOpts *so, const CgOpts *o, const CpuTarget *cpu, LLVMContextRef ctx,
                     const CgTarget *t, CgModule *out, Diag *d);

/* The pipeline's passes, in order: the one list the driver runs and dcc
 * names (--stage, --dump-after). Each pass reads and fills a CgModule;
 * print shows its result (what dcc emit --stage prints, and --dump-after
 * on stderr). The last, llvm, is codegen and the target's finish, which
 * prints the optimised module itself: it has no run or print here. */
typedef enum CgStage { CG_SHAPE, CG_LAYOUT, CG_CANON, CG_FUSION, CG_MEMPLAN, CG_LLVM, CG_NSTAGES } CgStage;
typedef struct CgPass {
    const char *name;  /* "shape", "layout", "canon", "fusion", "memplan", "llvm" */
    const char *what;  /* what print shows, for --help */
    bool (*run)(CgModule *m, const ShapeOpts *so, const CgOpts *o, Diag *d);
    void (*print)(FILE *f, const CgModule *m, const PrintOpts *po);
} CgPass;
extern const CgPass cg_passes[CG_NSTAGES];
/* The stage of that name, or CG_NSTAGES. */
CgStage cg_stage_from_name(const char *name);
/* "shape, canon, fusion, memplan, llvm", for messages. */
const char *cg_stage_names(void);
/* Runs the passes up to and including last (at most CG_MEMPLAN) on g
 * into m (cg_module_free); false with d set. */
bool cg_run_passes(Graph *g, const ShapeOpts *so, const CgOpts *o, CgStage last, CgModule *m, Diag *d);
/* cg_build_module, then t->finish; m keeps the plans (cg_module_free). */
bool cg_compile(Graph *g, const ShapeOpts *so, const CgOpts *o, const CpuTarget *cpu, LLVMContextRef ctx,
                const CgTarget *t, CgModule *m, Diag *d);
void cg_module_free(CgModule *m);
/* The LLVM optimiser at `level` for the target CPU. */
void cg_optimise(LLVMModuleRef mod, int level, const CpuTarget *cpu);
/* Compiles an optimised module into an object: for CPU t (NULL: this
 * machine, as the JIT does), into the file path (position independent, for
 * the system linker) or (path NULL) *out (the large code model, for the
 * JIT). The module gets the target's triple and data layout.
 * False with the message in msg. */
bool cg_emit_object(LLVMModuleRef mod, const CpuTarget *t, LLVMCodeGenOptLevel level, const char *path,
                    LLVMMemoryBufferRef *out, char *msg, size_t size);

/* f compiled without optimisation: the optimiser skips it, the code
 * generator takes its fast path (FastISel, the fast register allocator).
 * For the host flow, whose time per run is a few calls and stores, and
 * whose one function grows with the model: with LLVM's full pipeline, a
 * 10^6-op model spent 37 s in register allocation (objects.c). */
void cg_no_opt(LLVMValueRef f);

/* The JIT's module optimised and compiled into objects in memory, in parts
 * on threads (objects.c). */
enum { CG_MAX_OBJECTS = 8 };
typedef struct CgObjOpts {
    int level;         /* the optimiser's */
    const CpuTarget *cpu;
    int parts;         /* 0: one per CPU this process may use (one for a
                          small module) */
    char **text;       /* set: one part, and its optimised text here
                          (LLVMDisposeMessage) */
    const char *cheap; /* a function compiled without optimisation, or NULL */
} CgObjOpts;
typedef struct CgObjects {
    int n;
    LLVMMemoryBufferRef obj[CG_MAX_OBJECTS];
    double t_opt;      /* seconds in the optimiser (the longest part's) */
} CgObjects;
/* Changes mod (every defined function external, when in parts); the
 * caller still owns and disposes it. */
bool cg_objects(LLVMModuleRef mod, const CgObjOpts *o, CgObjects *out, Diag *d);
void cg_objects_free(CgObjects *o);
/* The CPUs this process may run on (its affinity mask). */
int cg_cpus(void);
/* LLVM's native target and the vector maths library, once per process. */
void cg_llvm_init(void);
/* Whether vectorised loops call glibc's vector math (libmvec loaded). */
bool cg_llvm_libmvec(void);

/* ---- AOT (aot.c): a model as a native object ---------------------------- */

typedef struct AotOpts {
    const char *name;         /* C identifier prefix of the entry points */
    const char *weights_path; /* NULL: constants in the object; else this side file */
    bool pic;                 /* position-independent (a shared object) */
    const char *gpu_arch;     /* with CgOpts.gpu "cuda": the architectures to embed
                                 CUBINs for ("sm_80,sm_90"; NULL: that), PTX of
                                 the first for the others */
} AotOpts;
/* Compiles g into an object file at obj_path, its header at header_path
 * (NULL: none) and, with o->weights_path, its constants there. */
bool aot_compile(Graph *g, const ShapeOpts *so, const CgOpts *co, const AotOpts *o, const char *obj_path,
                 const char *header_path, Diag *d);

Exec *exec_compile(Graph *g, const ShapeOpts *so, const CgOpts *o, Diag *d);
/* Runs a compiled model on inputs; outputs are allocated (owned). */
bool exec_run(Exec *e, const Tensor *inputs, int ninputs, Tensor *outputs, int noutputs, Diag *d);
/* The same, with dev_io (a model compiled for cuda): every input's data
 * and every output's buffer (given by the caller, data and nbytes) are
 * device addresses; the run copies nothing through the host but what
 * host ops read, and has finished with them when it returns. wait: a
 * caller's CUstream whose queued work the run waits for on the device
 * first, or NULL. */
bool exec_run_io(Exec *e, const Tensor *inputs, int ninputs, Tensor *outputs, int noutputs, bool dev_io, void *wait,
                 Diag *d);
void exec_free(Exec *e);
/* The optimised LLVM IR of the model, for dcc emit --stage llvm. */
void exec_print_llvm(Exec *e, FILE *f);
/* Kernel launches per run (and, in *distinct, kernels compiled). */
int exec_kernel_count(const Exec *e);
int exec_distinct_kernels(const Exec *e);
/* Whether the compile linked code from the on-disk cache (cache.h). */
bool exec_cache_hit(const Exec *e);

#endif
