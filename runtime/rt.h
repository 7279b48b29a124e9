/*
 * rt.h — the runtime ABI: what generated code (the host flow and the fused
 * kernels of the CPU backend) and the library thunks call. Every name here
 * is `disc_rt_*` / `DiscRt*` / `DISC_*`, and the layout of every struct is
 * part of the ABI: the code generator builds calls against it.
 *
 *   rt.c    the run context: the first error, run memory (a bump arena of
 *           64-byte aligned blocks), the link to the shared thread pool
 *   pool.c  the thread pool: persistent pthread workers, one process-wide
 *           pool shared by every DiscRt, a job list any number of threads
 *           may submit to at once
 *   dnnl.c  matmul, convolution and pooling through oneDNN, with a
 *           process-wide primitive cache
 *
 * A run, as the host flow does it:
 *
 *     DiscRtOpts o = {.threads = 0};                 // 0: every core
 *     DiscRt *rt = disc_rt_new(&o);
 *     float *c = disc_rt_alloc(rt, m * n * 4);       // freed with the run
 *     DiscMatmul d = {.dtype = DT_F32, .batch = 1, .m = m, .n = n, .k = k,
 *                     .a_stride = {0, k, 1}, .b_stride = {0, n, 1},
 *                     .c_stride = {0, n, 1}, .post = DISC_POST_RELU};
 *     if (disc_rt_matmul(rt, &d, a, b, c) != 0) ... disc_rt_error(rt) ...
 *     disc_rt_parallel_for(rt, kernel, args, numel, 4096);
 *     disc_rt_free(rt);
 *
 * Threads. One pool of persistent workers serves the process; it is
 * created on the first disc_rt_new and grows when a later one asks for
 * more threads. A DiscRt belongs to one thread at a time (the one running
 * the host flow), but any number of DiscRt may run at once and submit to
 * the pool together. disc_rt_fail may be called from any thread (kernels
 * running on workers). oneDNN in Debian's build runs on OpenMP (libgomp),
 * whose sleeping team costs a wake per call: on a run with two or more
 * threads a matmul runs as parts on this pool instead (by batch, by rows
 * from 256 rows, else by panels of columns of constant weights), each part
 * a one-thread oneDNN call; DISC_SPLIT=0 in the environment turns that
 * off. Other library calls cap OpenMP's team for the calling thread at the
 * run's thread count, and at 1 inside a pool worker (see dnnl.c).
 *
 * Errors never abort: a bad descriptor or a failed allocation records a
 * message in the DiscRt (the first one wins) and returns -1 / NULL.
 */
#ifndef DISC_RT_H
#define DISC_RT_H

#include <stddef.h>
#include <stdint.h>

typedef struct DiscRt DiscRt;

typedef struct DiscRtOpts {
    int threads; /* threads a run may use, the caller included; 0: every core */
} DiscRtOpts;

/* A generated kernel body over the index range [begin, end). */
typedef void DiscKernelFn(int64_t begin, int64_t end, void *args);

/* NULL when out of memory or when the pool cannot start a thread. */
DiscRt *disc_rt_new(const DiscRtOpts *o);
void disc_rt_free(DiscRt *rt);
/* The threads this run uses, the caller included (>= 1). */
int disc_rt_threads(const DiscRt *rt);

/* Runs fn over [0, n) split in chunks of at least `grain` indices (about
 * 4 chunks per thread) across the pool; the calling thread works too.
 * Returns when every chunk is done. n <= grain, a one-thread run, or a
 * call from inside a kernel (nested) runs fn(0, n, args) inline. n <= 0
 * does nothing; grain < 1 counts as 1. */
void disc_rt_parallel_for(DiscRt *rt, DiscKernelFn *fn, void *args, int64_t n, int64_t grain);

/* `bytes` of 64-byte aligned, uninitialised run memory, valid until
 * disc_rt_reset or disc_rt_free. 0 bytes gives a valid pointer. NULL and an
 * error on bytes < 0, overflow or out of memory. */
void *disc_rt_alloc(DiscRt *rt, int64_t bytes);
/* `bytes` of memory for a large buffer that outlives a run (an output, a
 * block of run memory, packed weights), 64-byte aligned and freed with
 * free(). From 2 MiB up it is aligned to 2 MiB and advised as transparent
 * huge pages: a 100 MB output then costs 50 page faults when first
 * touched instead of 25,000 (about 15% of a GPT-2 LM head's time at
 * 512 x 50257 on an AVX2 EPYC), and the TLB covers it. NULL when out of
 * memory. */
void *disc_rt_alloc_big(size_t bytes);
/* Constants whose bytes' hash the compiler knows (Const.hash_of: weights
 * the loader mapped from the store), registered by a compiled model for
 * its life with the store they came from: a copy the runtime makes of one
 * (a packed layout, dnnl.c) is kept in that store too (ir/store.h), so a
 * later process maps it instead of making it again. Registering the same
 * data twice counts twice. 0 when out of memory (nothing is kept), else 1. */
int disc_rt_known_add(const void *data, uint64_t hash, const char *store);
void disc_rt_known_remove(const void *data);
/* 1 with data's hash and store (into buf) when registered, else 0. */
int disc_rt_known(const void *data, uint64_t *hash, char *store, size_t size);
/* Offsets for the memory plan's n slots in one block (place.c): slot i
 * takes bytes[i] (>= 0, multiples of 64 keep every slot 64-byte aligned)
 * and is in use from group live[2i] to group live[2i+1]; slots in use at
 * the same time never overlap. Fills off[0..n) and returns the block's
 * size, or -1 when out of memory or a size is negative or overflows. */
int64_t disc_place(int n, const int64_t *bytes, const int32_t *live, int64_t *off);
/* disc_place through the run context, which remembers its last layout: the
 * same sizes and lifetimes again (a model run at the same shapes) copy
 * it. -1 with the run's error set on failure. */
int64_t disc_rt_place(DiscRt *rt, int32_t n, const int64_t *bytes, const int32_t *live, int64_t *off);
/* Frees the run memory and clears the error; the DiscRt can run again and
 * reuses one block as large as the last run needed. */
void disc_rt_reset(DiscRt *rt);

/* Records the first error (printf-style); later calls are ignored.
 * Thread-safe. */
void disc_rt_fail(DiscRt *rt, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *disc_rt_error(const DiscRt *rt); /* NULL if none */
/* The first error with its kind (ir's DiagKind: an error in the inputs'
 * values is DIAG_MODEL, as the interpreter reports it), for the host ops
 * that run the interpreter's code; disc_rt_fail's errors have kind 0
 * (the caller takes them as resource errors). */
void disc_rt_fail_kind(DiscRt *rt, int kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int disc_rt_error_kind(const DiscRt *rt);
/* The host flow's error for a size computed from the inputs' dims that
 * passes 2^63 (a shape error; hostop.c). */
void disc_rt_overflow(DiscRt *rt);
/* How the last library call made through rt on the calling thread ran, for
 * DISC_PROFILE: "oneDNN brg:avx512_core", "oneDNN gemm:jit (avx2), 2
 * column parts", "skinny kernel"; "" when unknown. The string lives as
 * long as the process. Set by dnnl.c from the run's own thread only. */
const char *disc_rt_call_how(const DiscRt *rt);
void disc_rt_set_call_how(DiscRt *rt, const char *how);

/* The environment, read once (env.c, which lists every variable). */
typedef struct DiscEnv {
    const char *cpu;      /* DISC_CPU, or NULL */
    int threads;          /* DISC_THREADS (0: every core) */
    int profile;          /* DISC_PROFILE set (and not 0) */
    int profile_top;      /* DISC_PROFILE_TOP (25) */
    int64_t skinny_m;     /* DISC_SKINNY; -1: unset (disc_rt_skinny_max_m) */
    int split;            /* not DISC_SPLIT=0 */
    int conv_plain;       /* DISC_CONV_LAYOUT=plain */
    int winograd;         /* DISC_WINOGRAD: 0, 1, or -1 (unset: by the ISA) */
    int dw_brdgmm;        /* DISC_CONV_DW=brdgmm: depthwise convs as oneDNN lists first */
    int fpmath_bf16;      /* DISC_FPMATH=bf16 */
    int omp_passive;      /* OMP_WAIT_POLICY=passive without GOMP_SPINCOUNT */
    const char *cache_dir; /* DISC_CACHE_DIR, or NULL (codegen/cache.h) */
    int cache_off;        /* DISC_CACHE=0 */
    const char *home;     /* HOME, for the cache's default directory */
    int64_t stage;        /* DISC_STAGE: the staged copies' chunk in bytes, 0: none (cudrv.c) */
    int perf_map;         /* DISC_PERF_MAP=1: the JIT's code named in /tmp/perf-<pid>.map */
} DiscEnv;
const DiscEnv *disc_env(void);

/* DISC_PROFILE (prof.c): whether the environment asks for the profile
 * (read once); kernel launches and library calls made by a host flow
 * then time themselves into a process-wide table printed at exit. */
int disc_rt_profiling(void);
/* The widest vectors, in bits (512, 256 or 128), that disc's own
 * hand-written vector code may use: this CPU's, within oneDNN's ISA cap
 * (ONEDNN_MAX_CPU_ISA, which the test runs capped to AVX2 or SSE set), so
 * that those runs take the narrower code (runtime/dnnl.c). */
int disc_rt_vector_bits(void);
double disc_rt_now(void); /* seconds, monotonic */
void disc_rt_prof_add(const void *key, const char *what, double seconds);
/* The same, with the call's floating-point operations (its entry then
 * prints the rate). */
void disc_rt_prof_add_work(const void *key, const char *what, double seconds, double flops);
/* While paused (1), calls and launches add nothing to the profile: dcc
 * bench leaves out each data set's first run, which creates oneDNN's
 * primitives and packs weights, so the profile is of the timed runs. */
void disc_rt_prof_pause(int paused);
/* The seconds and calls the profile holds for key (0 and 0: none). */
double disc_rt_prof_get(const void *key, long *calls);
/* Names the entry of a kernel (key: its function) and says which CPU the
 * kernels were compiled for (target, or NULL). No-op unless profiling. */
void disc_rt_prof_name(const void *key, const char *what, const char *target);
/* A key that lives as long as the process for a call's description. */
const void *disc_rt_prof_key(const char *what);
/* Marks rt as inside a library call (1) or out of it (0): launches made
 * inside are that call's time, not kernels of their own. */
void disc_rt_set_in_call(DiscRt *rt, int in);

/* Stops the pool's workers and frees the primitive cache. Only for the
 * end of a process (leak checkers); no DiscRt may be alive. A later
 * disc_rt_new starts over. */
void disc_rt_shutdown(void);

/* ---- library calls (oneDNN) -------------------------------------------
 *
 * dtype is an ir.h DType: DT_F32 always; DT_BF16 and DT_F16 where oneDNN
 * implements them on this CPU (else an error). Bias and residual have the
 * dtype of the result. Every call returns 0, or -1 with the message
 * recorded in rt. Primitives are made for the shapes of each call and kept
 * in a process-wide cache (bounded, LRU) keyed by the whole descriptor, so
 * a repeated shape costs a hash lookup. Scratch memory comes from
 * disc_rt_alloc. Zero-sized results do nothing.
 *
 * Constant weights. A call that sets weights_const promises that the
 * weights (b of a matmul, w of a convolution) hold the same values at the
 * same address until disc_rt_weights_forget names them (or the process
 * calls disc_rt_shutdown). oneDNN then picks the weights layout it runs
 * fastest on (for f32 matmul on AVX-512, 64-column panels: 2.5x faster for
 * 512x768 @ 768x3072 than a row-major B), and the weights are reordered
 * into it once and kept: a second, process-wide cache of packed copies,
 * keyed by the weights' address and the packed layout (in practice one
 * copy per weight tensor: the layout does not depend on m or the thread
 * count). A packed copy costs the weights' size again and lives until
 * disc_rt_weights_forget, disc_rt_cache_set_capacity(0) or
 * disc_rt_shutdown; whoever frees constant weights that were passed with
 * weights_const calls disc_rt_weights_forget first (a compiled model does,
 * through graph_keep). As a guard against a
 * forgotten call, each use compares a fingerprint of 64 sampled words of
 * the weights with the one taken when they were packed and repacks on a
 * mismatch (a guard only: it cannot see a change between the samples). */

typedef enum DiscPost {
    DISC_POST_NONE,
    DISC_POST_RELU,      /* max(x, 0) */
    DISC_POST_GELU_ERF,  /* x/2 (1 + erf(x/sqrt 2)) */
    DISC_POST_GELU_TANH, /* x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
    DISC_POST_TANH,
    DISC_POST_SIGMOID,   /* 1 / (1 + exp(-x)) */
    DISC_POST_RELU6,     /* min(max(x, 0), 6) (MobileNet's clip) */
    DISC_POST_HARDSWISH, /* x min(max(x + 3, 0), 6) / 6 */
    DISC_POST_SWISH,     /* x / (1 + exp(-x)) (SiLU) */
    DISC_POST_COUNT
} DiscPost;

/* C[b][i][j] = post(sum_k A[b][i][k] B[b][k][j] + bias[j]) + residual[b][i][j] */
typedef struct DiscMatmul {
    int dtype;                      /* DType of a, b, c (and bias, residual) */
    int64_t batch, m, n, k;         /* all >= 0 */
    int64_t a_stride[3];            /* element strides of A: batch, row (m), col (k) */
    int64_t b_stride[3];            /* of B: batch, row (k), col (n); {., 1, k} is a transposed B */
    int64_t c_stride[3];            /* of C (and residual): batch, row, col */
    const void *bias;               /* NULL or [n], added to every row before post */
    DiscPost post;                  /* activation on the biased product */
    const void *residual;           /* NULL or laid out like C, added after post */
    int weights_const;              /* 1: b is constant weights (see above), packed once */
} DiscMatmul;
/* A batch stride of 0 broadcasts that operand over the batch (A or B, not
 * C). A row-major A and C with B broadcast fold into one matmul of
 * m * batch rows. Unit-stride innermost axes (either of the two) are what
 * oneDNN implements; other strides are an error. */
int disc_rt_matmul(DiscRt *rt, const DiscMatmul *d, const void *a, const void *b, void *c);

/* A matmul with few rows on a generated panel kernel (codegen/skinny.c):
 * for f32, batch 1, constant weights, unit-stride rows of A and C and
 * m <= DISC_SKINNY_M, fn runs over the panels of `panel` columns of the
 * weights' packed copy with the fields below; any other call, or
 * DISC_SKINNY=0 in the environment, goes to disc_rt_matmul. The copy is
 * in oneDNN's layout BA16a<panel>b (panels one after another, each holding
 * rows 0..kp-1, kp = k rounded up to 16, `panel` floats a row, zero past k
 * and n), made once per weight tensor: 64-column panels for kernels built
 * for AVX-512, the layout oneDNN's own matmul picks there, so both share
 * the copy; 16-column panels for AVX2 and SSE kernels, whose 16 registers
 * hold 6 rows of 16 columns (a copy of disc's own: oneDNN keeps the plain
 * layout on those ISAs). fn computes C = post(A B + bias) + residual for
 * panels [begin, end). */
enum { DISC_SKINNY_M = 16, DISC_PANEL = 64, DISC_PANEL_NARROW = 16 };
/* The most rows the 16-column (AVX2, SSE) kernel takes: blocked for the
 * caches (codegen/skinny.c) it measured at or ahead of ONNX Runtime's MLAS
 * and oneDNN 2.6's AVX2 matmul up to 1024 rows on an AVX2 EPYC at two
 * threads (bench/bench_skinny.py, 6 pairs of 768x3072 and 3072x768, min
 * ms, skinny / oneDNN / ORT: 13 rows 9.7 / 18.9 / 11.0, 197 rows 70.4 /
 * 90.4 / 75.7, 1024 rows 375 / 397 / 383); at 2048 oneDNN was ahead
 * (811 / 752 / 815). On AVX-512 oneDNN's brgemm is faster from 17 rows. */
enum { DISC_SKINNY_M_NARROW = 1024 };
/* A matmul of at most this many multiply-adds (and at most
 * DISC_SKINNY_M_NARROW rows) takes the skinny kernel at any row count and
 * panel count where the limits above would send it to oneDNN: work that
 * small takes well under a microsecond, oneDNN's call 1.7 (sklearn's MLP at
 * 40 rows: 40 x 32 x 10 and 40 x 16 x 32, bench/NOTES.md). */
enum { DISC_SKINNY_TINY = 1 << 15 };
/* The most rows the skinny kernel takes for panels of `panel` columns:
 * DISC_SKINNY in the environment, else the measured limit above. */
int64_t disc_rt_skinny_max_m(int panel);
enum { /* the kernel's args: an int64 array (pointers as integers) */
    DISC_SK_A, DISC_SK_B, DISC_SK_BIAS, DISC_SK_RES, DISC_SK_C,
    DISC_SK_M, DISC_SK_N, DISC_SK_K, DISC_SK_LDA, DISC_SK_KP, DISC_SK_LDC, DISC_SK_NFIELDS
};
int disc_rt_matmul_skinny(DiscRt *rt, const DiscMatmul *d, const void *a, const void *b, void *c,
                          DiscKernelFn *fn, int panel);

/* Channels-last operands, bits of DiscConv.layout and DiscPool.layout: the
 * tensor is stored [n][spatial...][c] rather than [n][c][spatial...]. The
 * host flow keeps a value so when convolutions and pools are its only
 * writer and readers (hostlib.c, "Channels last"), so that no reorder to
 * and from oneDNN's nhwc layouts runs between them. */
enum { DISC_NHWC_SRC = 1, DISC_NHWC_DST = 2, DISC_NHWC_RES = 4 };
/* Blocked channels (passes/layout.c, "blocked layouts"): where layout >>
 * DISC_BLOCK_SHIFT is b > 0, the operands the DISC_NHWC_* bits name are
 * blocked rather than channels-last, [n][ceildiv(c, b)][spatial...][b]
 * (oneDNN's nChw16c for b = 16), the lanes past c padding (zero in a
 * convolution's operand and result). */
enum { DISC_BLOCK_SHIFT = 8 };

/* Convolution (or transposed convolution) in dense layouts, NCHW unless
 * layout says otherwise:
 *   x [n][c][in...], y [n][o][out...]
 *   conv:      w [o][c/groups][k...]
 *   transpose: w [c][o/groups][k...]
 * Dilation 1 is a dense window (the ONNX convention). For a transposed
 * convolution out[] may exceed the padded size (ONNX output_padding). */
typedef struct DiscConv {
    int dtype;                      /* DType of x, w, y (and bias, residual) */
    int nsp;                        /* spatial dims, 1..3 */
    int64_t n, c, o, groups;        /* batch, in channels, out channels, groups (divides c and o) */
    int64_t in[3], k[3], out[3];    /* spatial sizes of x, the window, y */
    int64_t stride[3], dilation[3]; /* >= 1 */
    int64_t pad_lo[3], pad_hi[3];   /* >= 0, at the start and end of each spatial axis */
    int transpose;                  /* 1: conv_transpose */
    const void *bias;               /* NULL or [o] */
    DiscPost post;
    const void *residual;           /* NULL or shaped like y, added after post */
    int weights_const;              /* 1: w is constant weights (see above), packed once */
    int layout;                     /* DISC_NHWC_* bits: x, y, the residual channels-last;
                                       and a block (DISC_BLOCK_SHIFT) */
    DiscPost post_res;              /* activation after the residual (ResNet's relu(conv + x)) */
} DiscConv;
int disc_rt_conv(DiscRt *rt, const DiscConv *d, const void *x, const void *w, void *y);

/* Max or average pooling, x [n][c][in...] -> y [n][c][out...]. out[] must
 * be the floor-mode size (ceil mode is pad_hi made large enough). */
typedef struct DiscPool {
    int dtype;                      /* DType of x and y */
    int nsp;                        /* spatial dims, 1..3 */
    int max;                        /* 1: max pooling, 0: average */
    int64_t n, c;
    int64_t in[3], window[3], out[3];
    int64_t stride[3], dilation[3]; /* >= 1 */
    int64_t pad_lo[3], pad_hi[3];   /* >= 0 */
    int count_pad;                  /* average: divide by the whole window (padding counts) */
    int layout;                     /* DISC_NHWC_SRC, DISC_NHWC_DST: x, y channels-last;
                                       and a block (DISC_BLOCK_SHIFT) */
} DiscPool;
int disc_rt_pool(DiscRt *rt, const DiscPool *d, const void *x, void *y);

/* ---- library calls as generated code makes them (rtcall.c) -------------
 *
 * The host flow describes a call with an array of int64 fields, filled
 * from the symbols at run time, rather than with the structs above (their
 * C layout is not the generator's business). Each returns 0, or -1 with
 * the message in rt. */

enum { /* disc_rt_call_matmul: DiscMatmul */
    DISC_MM_DTYPE, DISC_MM_BATCH, DISC_MM_M, DISC_MM_N, DISC_MM_K,
    DISC_MM_A_STRIDE, DISC_MM_B_STRIDE = DISC_MM_A_STRIDE + 3, DISC_MM_C_STRIDE = DISC_MM_B_STRIDE + 3,
    DISC_MM_POST = DISC_MM_C_STRIDE + 3, DISC_MM_WEIGHTS_CONST,
    DISC_MM_PANEL, /* the skinny kernel's panel width (DISC_PANEL or DISC_PANEL_NARROW), else 0 */
    DISC_MM_NFIELDS
};
enum { /* disc_rt_call_conv: DiscConv */
    DISC_CV_DTYPE, DISC_CV_NSP, DISC_CV_N, DISC_CV_C, DISC_CV_O, DISC_CV_GROUPS,
    DISC_CV_IN, DISC_CV_K = DISC_CV_IN + 3, DISC_CV_OUT = DISC_CV_K + 3, DISC_CV_STRIDE = DISC_CV_OUT + 3,
    DISC_CV_DILATION = DISC_CV_STRIDE + 3, DISC_CV_PAD_LO = DISC_CV_DILATION + 3,
    DISC_CV_PAD_HI = DISC_CV_PAD_LO + 3, DISC_CV_TRANSPOSE = DISC_CV_PAD_HI + 3, DISC_CV_POST,
    DISC_CV_WEIGHTS_CONST, DISC_CV_LAYOUT, DISC_CV_POST_RES, DISC_CV_NFIELDS
};
enum { /* disc_rt_call_pool: DiscPool */
    DISC_PL_DTYPE, DISC_PL_NSP, DISC_PL_MAX, DISC_PL_N, DISC_PL_C,
    DISC_PL_IN, DISC_PL_WINDOW = DISC_PL_IN + 3, DISC_PL_OUT = DISC_PL_WINDOW + 3,
    DISC_PL_STRIDE = DISC_PL_OUT + 3, DISC_PL_DILATION = DISC_PL_STRIDE + 3,
    DISC_PL_PAD_LO = DISC_PL_DILATION + 3, DISC_PL_PAD_HI = DISC_PL_PAD_LO + 3,
    DISC_PL_COUNT_PAD = DISC_PL_PAD_HI + 3, DISC_PL_LAYOUT, DISC_PL_NFIELDS
};
int32_t disc_rt_call_matmul(DiscRt *rt, const int64_t *f, const void *a, const void *b, const void *bias,
                            const void *residual, void *c);
int32_t disc_rt_call_conv(DiscRt *rt, const int64_t *f, const void *x, const void *w, const void *bias,
                          const void *residual, void *y);
/* disc_rt_call_matmul through disc_rt_matmul_skinny with kernel fn. */
int32_t disc_rt_call_skinny(DiscRt *rt, const int64_t *f, const void *a, const void *b, const void *bias,
                            const void *residual, void *c, DiscKernelFn *fn);

int32_t disc_rt_call_pool(DiscRt *rt, const int64_t *f, const void *x, void *y);

/* Memory for graph output k of a run: slots = the host flow's io array,
 * slot = the index of the output's {buffer, capacity, allocated} triple.
 * The caller's buffer when it is large enough, else malloc'd memory the
 * caller will own (allocated is set): no copy after the run. NULL (and an
 * error in rt) when out of memory. */
void *disc_rt_output(DiscRt *rt, void **slots, int64_t slot, int64_t bytes);

/* bf16 math for f32 matmuls on constant weights (weights_const): the
 * weights are packed as bf16, A is converted at each call, products are
 * summed in f32 into an f32 result. About 8 significant bits per operand:
 * BERT-base outputs move by up to 1e-2 (4x128: 343 -> 159 ms here, AMX).
 * Off by default; DISC_FPMATH=bf16 in the environment turns it on at the
 * first library call. Returns the old setting (0 or 1), or -1 (and
 * changes nothing) when oneDNN has no bf16 matmul on this CPU. Takes
 * effect for the calls that follow, in every thread. */
int disc_rt_set_fpmath_bf16(int on);

/* Drops the packed copies of constant weights that start inside
 * [p, p + bytes); for the owner of the weights, before it frees them.
 * Thread-safe; a call running on a dropped copy finishes with it. */
void disc_rt_weights_forget(const void *p, int64_t bytes);
/* The same for the weights that start at p, in the shape of a graph_keep
 * callback: codegen registers it with the graph whose constants it passes
 * as weights_const, so the copies go when the graph frees them. */
void disc_rt_weights_forget_at(void *p);

/* The primitive cache and the packed weights, for benchmarks and tests. */
typedef struct DiscRtCacheStats {
    int64_t hits, misses, evictions; /* primitives, since the process started */
    int entries, capacity;
    int packed;                      /* packed weight copies kept */
    int64_t packed_bytes;            /* their size */
    int64_t packs;                   /* weights reordered since the process started */
} DiscRtCacheStats;
void disc_rt_cache_stats(DiscRtCacheStats *s);
/* What oneDNN does with the constant weights of a batch-1 matmul d made as
 * one primitive on the calling thread: 1 when it picks another layout
 * than d's (they get packed), 0 when it runs on them as they are, -1 on
 * an error (in rt). The choice depends on the ISA: brgemm's 64-column
 * panels on AVX-512, the plain layout of gemm:jit on AVX2 (oneDNN 2.6).
 * For tests, which must state what holds on the machine they run on. */
int disc_rt_matmul_packs_weights(DiscRt *rt, const DiscMatmul *d);
/* Entries kept (>= 0). 0 disables the cache: it also drops every packed
 * copy and makes weights_const calls run on the weights as they are.
 * Returns the old capacity. */
int disc_rt_cache_set_capacity(int capacity);

/* ---- inside the runtime (rt.c, pool.c, dnnl.c) -------------------------
 * Not for generated code. The pool is process-wide and reference counted
 * by the DiscRt objects that use it. */

typedef struct DiscRtPool DiscRtPool;
/* The shared pool with at least threads - 1 workers; NULL with a message
 * in msg when a thread cannot start. */
DiscRtPool *disc_rt_pool_acquire(int threads, char *msg, int msgsize);
void disc_rt_pool_release(DiscRtPool *p);
/* parallel_for with at most `threads` participants, the caller included. */
void disc_rt_pool_run(DiscRtPool *p, int threads, DiscKernelFn *fn, void *args, int64_t n, int64_t grain);
/* Stops the workers once no DiscRt holds the pool (disc_rt_shutdown). */
void disc_rt_pool_shutdown(void);
/* True on a pool worker, or on a caller while it runs chunks of a job. */
int disc_rt_pool_busy(void);
/* The cores the process may use. */
int disc_rt_cores(void);
/* Frees the primitive cache (dnnl.c); for disc_rt_shutdown. */
void disc_rt_lib_shutdown(void);


/* ---- the CUDA driver (cudrv.c) ---------------------------------------------
 * libcuda.so.1 by dlopen, its entry points through cuGetProcAddress; disc
 * links no CUDA library. Every call returns a status and leaves the error
 * in rt: which library or driver call failed, with the driver's name and
 * text for the error. Copies, fills and launches are asynchronous on the
 * device's stream, in order; disc_gpu_sync waits for them (and reports a
 * kernel's fault). */
typedef struct DiscGpu DiscGpu;
typedef struct DiscGpuModule DiscGpuModule;
typedef struct DiscGpuFn DiscGpuFn;
typedef uint64_t DiscDevPtr; /* a device address; 0 is none */
typedef struct DiscGpuInfo {
    int ordinal;
    char name[128];
    int major, minor;       /* compute capability: 9, 0 is sm_90 */
    int sms;                /* multiprocessors */
    int64_t shmem_max;      /* dynamic shared memory a block may have (opted in) */
    size_t memory;          /* bytes of device memory */
    int driver_version;     /* 13000 is CUDA 13.0 */
} DiscGpuInfo;
typedef struct DiscGpuStats {
    int64_t driver_allocs;  /* cuMemAlloc calls */
    int64_t reused;         /* requests served from the cache of released buffers */
    int64_t held;           /* bytes allocated from the driver and not given back */
    int64_t graphs_captured, graph_replays; /* disc_gpu_run's graphs: made, run */
    int64_t graphs_abandoned, graphs_dropped; /* captures thrown away; graphs given up for room */
} DiscGpuStats;
/* The driver's version (13000), or 0 with the reason in why (n bytes). */
int disc_gpu_driver_version(char *why, size_t n);
/* Device `ordinal` (DISC_GPU_ENV: the environment's DISC_CUDA_DEVICE,
 * else 0; a value that is not a number is an error): its primary context
 * and a stream of its own; NULL with the error in rt. */
enum { DISC_GPU_ENV = -1 };
DiscGpu *disc_gpu_open(DiscRt *rt, int ordinal);
void disc_gpu_close(DiscGpu *g); /* waits for the stream; frees every buffer */
const DiscGpuInfo *disc_gpu_info(const DiscGpu *g);
void disc_gpu_stats(DiscGpu *g, DiscGpuStats *s);
/* Device memory from the caching allocator: a released buffer is kept for
 * the next request of its size class (512-byte steps below 1 MiB, 2 MiB
 * above), so steady-state runs make no cuMemAlloc. 0 with the error in rt.
 * disc_gpu_trim gives the kept buffers back to the driver. */
DiscDevPtr disc_gpu_alloc(DiscRt *rt, DiscGpu *g, size_t bytes);
void disc_gpu_release(DiscGpu *g, DiscDevPtr p);
void disc_gpu_trim(DiscGpu *g);
int disc_gpu_copy_in(DiscRt *rt, DiscGpu *g, DiscDevPtr dst, const void *src, size_t bytes);
int disc_gpu_copy_out(DiscRt *rt, DiscGpu *g, void *dst, DiscDevPtr src, size_t bytes);
int disc_gpu_copy(DiscRt *rt, DiscGpu *g, DiscDevPtr dst, DiscDevPtr src, size_t bytes);
/* height rows of width bytes from src to dst, each at its pitch (bytes
 * from a row to the next), on the device. */
int disc_gpu_copy2d(DiscRt *rt, DiscGpu *g, DiscDevPtr dst, size_t dpitch, DiscDevPtr src, size_t spitch,
                    size_t width, size_t height);
int disc_gpu_fill(DiscRt *rt, DiscGpu *g, DiscDevPtr dst, int byte, size_t bytes);
int disc_gpu_sync(DiscRt *rt, DiscGpu *g);
/* A module from a CUBIN for the device's architecture or NUL-terminated
 * PTX (the driver compiles it), and its kernels by name. */
DiscGpuModule *disc_gpu_module_load(DiscRt *rt, DiscGpu *g, const void *image);
void disc_gpu_module_unload(DiscGpu *g, DiscGpuModule *m);
DiscGpuFn *disc_gpu_function(DiscRt *rt, DiscGpu *g, DiscGpuModule *m, const char *name);
void disc_gpu_function_free(DiscGpuFn *f);
/* fn on grid blocks of `block` threads with shmem bytes of dynamic shared
 * memory (above 48 KiB the function is allowed it first); params as
 * cuLaunchKernel's: a pointer to each parameter's value. grid 0 launches
 * nothing. */
int disc_gpu_launch(DiscRt *rt, DiscGpu *g, DiscGpuFn *f, int64_t grid, int block, int64_t shmem, void **params);
/* n 32-bit words of the value bits at dst (cuMemsetD32Async). */
int disc_gpu_fill32(DiscRt *rt, DiscGpu *g, DiscDevPtr dst, uint32_t bits, size_t n);
/* For the device's libraries (cublaslt.c): its stream (a CUstream), its
 * context made current on this thread, and DISC_PROFILE's timing of work
 * queued between time_start (returns a slot, or -1 with the error in rt)
 * and time_end (slot -1: nothing), its time added under key and name
 * (both kept until the next disc_gpu_sync) at the next sync. */
void *disc_gpu_stream(const DiscGpu *g);
int disc_gpu_current(DiscRt *rt, DiscGpu *g);
int disc_gpu_time_start(DiscRt *rt, DiscGpu *g, const void *key, const char *name);
int disc_gpu_time_end(DiscRt *rt, DiscGpu *g, int slot);

/* A model's run on the device: the flow (the host flow's entry) with its
 * io (inputs, then {buffer, capacity, allocated} per output), shapes (the
 * inputs' nin_dims dims, then room for the outputs' nout_dims) and syms,
 * and the wait for its work; returns what the flow returns (-1 also for a
 * fault the wait reports). A run at a key seen before (the inputs' dims,
 * and with device I/O the addresses of the inputs and the output
 * buffers) is a CUDA graph's replay: the second plain run at a key
 * captures its work into a graph that owns the run's device memory, and
 * later runs at the key copy the inputs in, launch the graph and copy the
 * outputs out, without the flow. A flow that reads device data or an
 * input's data on the host, or runs a host op, is never captured at that
 * key. DISC_CUDA_GRAPHS: the graphs kept per device (default 16, the
 * least recently used given up, and none owning more than a quarter of
 * the device's memory together; 0: no graphs); none under DISC_PROFILE. */
typedef int32_t DiscFlowFn(DiscRt *rt, void **io, int64_t *shapes, int64_t *syms);
typedef struct DiscGpuFlow {
    DiscFlowFn *main;
    void **io;
    int ninputs, noutputs;
    int64_t *shapes;
    int nin_dims, nout_dims;
    int64_t *syms;
    void *wait;        /* a caller's CUstream: the run's work waits on the device for what was
                          queued there before it (disc_run_device_on), or NULL */
} DiscGpuFlow;
int32_t disc_gpu_run(DiscRt *rt, DiscGpu *g, const DiscGpuFlow *f);
/* 0 when no capture is under way on g (or g is NULL); else abandons it
 * (why: what the caller does that a graph cannot hold) and returns -1
 * with the error in rt, which ends the flow. For host ops and libraries. */
int disc_gpu_capturing(DiscRt *rt, DiscGpu *g, const char *why);

/* ---- cuBLASLt (cublaslt.c) ---------------------------------------------------
 * libcublasLt by dlopen (the toolkit's soname for CUDA 13, else 12), one
 * handle and workspace per device, made on the first matmul and freed
 * with the device. disc_blas_available says whether the library loads
 * (without a device: for the compiler's choice), else why not. */
typedef struct DiscBlas DiscBlas;
int disc_blas_available(char *why, size_t n);
DiscBlas **disc_gpu_blas_slot(DiscGpu *g);
void disc_blas_free(DiscBlas *b);

/* ---- cuDNN (cudnn.c) -----------------------------------------------------------
 * libcudnn by dlopen (DISC_CUDNN, a path, else the soname of cuDNN 9, else
 * 8), one handle and workspace per device, made on the first convolution
 * and freed with the device; optional: a model compiled where it does not
 * load runs its convolutions as disc's own kernels. */
typedef struct DiscDnn DiscDnn;
int disc_dnn_available(char *why, size_t n);
DiscDnn **disc_gpu_dnn_slot(DiscGpu *g);
void disc_dnn_free(DiscDnn *d);

/* ---- a cuda model's run: what the generated host flow calls ------------------
 * A DiscRt given a device runs a model compiled for it: the flow's device
 * memory comes from the device's caching allocator and goes back to it at
 * disc_rt_reset (or disc_rt_set_gpu, disc_rt_free); copies, fills and
 * launches go on the device's stream. A device address travels through
 * the flow as a pointer it never dereferences. Each returns 0, or -1 (NULL)
 * with the error in rt. */
void disc_rt_set_gpu(DiscRt *rt, DiscGpu *g);
DiscGpu *disc_rt_gpu(const DiscRt *rt);
/* The run's device, or NULL with the error in rt (a device call, as the
 * libraries' of cublaslt.c and cudnn.c, in a run that has none). */
DiscGpu *disc_rt_run_gpu(DiscRt *rt);
void *disc_rt_dev_alloc(DiscRt *rt, int64_t bytes);
/* Host to device; device to host (waits for the stream: the host reads
 * dst next, and a kernel's fault shows here). */
int32_t disc_rt_dev_in(DiscRt *rt, void *dst, const void *src, int64_t bytes);
int32_t disc_rt_dev_out(DiscRt *rt, void *dst, const void *src, int64_t bytes);
/* n elements of `size` bytes (4 or 8), each the value of bits, at dst. */
int32_t disc_rt_dev_fill(DiscRt *rt, void *dst, int64_t n, int64_t size, uint64_t bits);
/* Where the run's inputs and outputs are: on the host (0, the default),
 * or (1) in the device's memory (disc_run_device): inputs are device
 * addresses, outputs the caller's device buffers. */
void disc_rt_set_dev_io(DiscRt *rt, int on);
int disc_rt_dev_io(const DiscRt *rt);
/* The flow's view of input data raw (the caller's pointer, `bytes` long):
 * on the device (want_dev) or on the host, copied (into run memory)
 * where the caller's is on the other side. NULL with the error in rt. */
void *disc_rt_dev_input(DiscRt *rt, const void *raw, int64_t bytes, int32_t want_dev);
/* Output `slot` of slots (disc_rt_output's three per output) from src,
 * `bytes` long, on the device (on_dev 1), on the host (0), or the
 * caller's input data (2: on the side the run's inputs are). With host
 * I/O: a device result is copied out into disc_rt_output's buffer, a
 * host one returned as it is (the caller copies it); with device I/O,
 * every result is copied into the caller's device buffer slots[slot]
 * (of capacity slots[slot + 1]), which must be large enough. Returns
 * what the flow stores in slots[slot]; NULL with the error in rt. */
void *disc_rt_dev_output(DiscRt *rt, void **slots, int64_t slot, const void *src, int64_t bytes, int32_t on_dev);
/* The device copy of a compiled model's constant: *slot, or (the first
 * time) a buffer that lives with the device, `bytes` copied in from host,
 * kept in *slot. Runs of the model take turns (the caller's lock). */
void *disc_rt_dev_const(DiscRt *rt, void **slot, const void *host, int64_t bytes);
/* fn (a DiscGpuFn) on grid blocks of `block` threads (disc_gpu_launch). */
int32_t disc_rt_dev_launch(DiscRt *rt, void *fn, int64_t grid, int64_t block, int64_t shmem, void **params);
/* disc_rt_call_matmul's fields (dtype f32, f16, bf16 or f64; post NONE,
 * RELU or GELU_TANH; a residual only with no post) on device memory,
 * through cuBLASLt (cublaslt.c). */
int32_t disc_rt_dev_matmul(DiscRt *rt, const int64_t *f, const void *a, const void *b, const void *bias,
                           const void *residual, void *c);
/* disc_rt_call_conv's fields (dtype f32 or f16, NCHW, 1 to 3 spatial
 * axes, pads equal at both ends, not transposed; post and post_res NONE
 * or RELU, a residual only with post NONE) on device memory, through
 * cuDNN (cudnn.c): y = post_res(post(conv(x, w) + bias) + residual). */
int32_t disc_rt_dev_conv(DiscRt *rt, const int64_t *f, const void *x, const void *w, const void *bias,
                         const void *residual, void *y);
/* disc_rt_call_pool's fields (dtype f32 or f16, NCHW, 1 to 3 spatial
 * axes, no dilation, pads equal at both ends and smaller than the window,
 * floor mode) on device memory, through cuDNN (cudnn.c). */
int32_t disc_rt_dev_pool(DiscRt *rt, const int64_t *f, const void *x, void *y);

#endif
