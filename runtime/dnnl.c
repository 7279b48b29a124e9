/*
 * dnnl.c — matmul, convolution and pooling through oneDNN (its C API).
 *
 * Shapes are dynamic, so a primitive is made for the shapes of each call.
 * Making one costs tens of microseconds even when oneDNN's own primitive
 * cache hits (it still builds an op descriptor and a primitive descriptor,
 * which runs implementation dispatch), so a process-wide cache of ours
 * sits in front: the key is the whole call descriptor flattened into
 * int64s (kind, dtype, dims, strides, which operands exist, post-op,
 * thread count), the value the primitive and the memory descriptors to
 * bind at execution. It is a chained hash map with an LRU list, bounded
 * (CAPACITY entries), guarded by one mutex; an entry in use is reference
 * counted, so evicting it while another thread runs it is safe.
 *
 * Scratchpad mode is "user": the scratch memory a primitive needs comes
 * from disc_rt_alloc, so cached primitives hold no hidden per-thread
 * buffers and may run on several threads at once.
 *
 * Packed weights. A call with weights_const makes its primitive with the
 * weights in format "any", so oneDNN picks its own layout (brgemm matmul:
 * 64-column panels, BA16a64b; the same for every m and thread count that
 * was tried, 1 to 2048 rows, which is why the copies are shared across
 * shapes). The entry then keeps both layouts, and a run looks the packed
 * copy up in a second cache keyed by the weights' address and both
 * layouts; a miss reorders the weights once. The copies are not bounded
 * by count: they are the model's weights once more, and live until
 * disc_rt_weights_forget (the owner frees its weights), capacity 0 or
 * shutdown. Each use checks a fingerprint of 64 sampled words against the
 * one taken at packing, a guard against an owner that forgot to call
 * disc_rt_weights_forget before new weights landed at the same address.
 * When oneDNN's choice is the plain layout anyway, nothing is packed.
 *
 * Post-ops: bias is the primitive's bias argument (broadcast over rows);
 * the activation an eltwise post-op; the residual a binary-add post-op
 * whose second operand has the layout of the result.
 *
 * A packed copy is also what the column parts of a split call (below) run
 * on: a part's weights are a panel-aligned column slice of the whole, and
 * the slice of the whole's copy is the part's packed layout (whole_layout),
 * so the weights are packed once whether calls use them whole or in parts.
 *
 * Convolution layouts. On the caller's NCHW (abcd) src and dst oneDNN 2.6
 * runs every convolution as im2col + sgemm (x64:gemm:jit), some 5 GFLOPS
 * and far worse for depthwise and 1x1 convs. So a convolution is made
 * with src, dst and the residual in format "any" (the weights too when
 * constant, as above); oneDNN then picks brgconv / brgconv_1x1 / brdgmm_dw
 * on nhwc (acdb) on this AVX-512 machine. The entry keeps a reorder for
 * each operand whose chosen layout is not the plain one: src and the
 * residual plain -> chosen into run memory before the call, dst computed
 * into run memory and reordered back after it. A layout that puts every
 * element where the plain one does (nhwc at h = w = 1) binds the caller's
 * buffer with no reorder. The residual is reordered rather than dst kept
 * plain, as a plain dst brings gemm back.
 *
 * Every convolution shape of the test CNNs measured as fast or faster
 * with the chosen layouts (the one loss, the smallest call, too small to
 * be worth a rule), so every convolution takes them. Transposed
 * convolutions (oneDNN's deconvolution) are made the same way; where
 * oneDNN picks gemm:jit on plain layouts for them, nothing is reordered.
 * DISC_CONV_LAYOUT=plain turns it off.
 *
 * Between convolutions the reorders are not made at all: a value that
 * only convolutions and pools write and read is kept channels-last by the
 * host flow (codegen/hostlib.c), and the calls say so (DiscConv.layout):
 * such an operand's own layout is nhwc, so oneDNN's nhwc choice needs no
 * reorder, and a conv with both ends channels-last is made on them as
 * they are (conv_build's keep) unless oneDNN then offers only its
 * reference code. MobileNetV2 at 1x3x224x224 went from 14.3 to 5.3 ms on
 * AVX-512 (one thread), ResNet-50 from 72.7 to 54.7 ms. (The figures:
 * bench/NOTES.md.)
 *
 * Split calls. A matmul on a run of two or more threads is cut into one
 * part per thread, run on our pool (disc_rt_parallel_for), each part a
 * oneDNN call on its thread alone: batches, rows from SPLIT_ROWS_MIN rows
 * on, or else (constant f32 weights) panel-aligned column ranges. oneDNN's
 * brgemm wants a dense result, so a column part computes into run memory
 * and is copied (its residual added there) into its columns of C. This
 * replaces oneDNN's OpenMP team for matmuls: under the passive policy
 * every parallel region wakes a sleeping thread, 50-70 us per call, where
 * our pool's workers spin a while after each job and the host flow keeps
 * them busy; it pays most where the calls are short (bandwidth-bound
 * matmuls of few rows; bench/NOTES.md). DISC_SPLIT=0 turns it off.
 *
 * Threads. Debian's libdnnl (2.6) is built on OpenMP (libgomp): a primitive
 * forks an OpenMP team of omp_get_max_threads() threads from the calling
 * thread, apart from our pool. The host flow calls us between kernels, so
 * our workers are idle (asleep or in their short spin) while oneDNN runs.
 * To keep the two from oversubscribing the cores, each call sets the
 * calling thread's OpenMP team size to the run's thread count (the ICV is
 * per thread, so concurrent runs do not disturb each other), and to 1 when
 * called from inside a pool job. The thread count is part of the cache
 * key, as oneDNN picks blockings for it. omp_set_num_threads is looked up
 * in the libgomp that libdnnl loaded (dlopen RTLD_NOLOAD): linking an
 * OpenMP of our own could bind it to another runtime (LLVM's libomp also
 * provides libgomp's names) and cap nothing.
 *
 * What the team does between calls is the other half: libgomp's default
 * wait policy spins after a parallel region, which on a machine busy with
 * other work makes a call's time vary tenfold, where
 * OMP_WAIT_POLICY=PASSIVE keeps it steady. libgomp reads that variable
 * when it loads, before any code of ours runs, so it is the launcher's to
 * set (dcc, the tests, a deployment), not this file's. Under it, waking
 * the team costs more than a tiny call's work, so calls under 2 MFLOP run
 * on the calling thread alone (call_threads). Spinning wins on an idle
 * machine and loses twice as much beside one busy process: the passive
 * policy stays.
 */
#include "runtime/rt.h"

#include "ir/ir.h"
#include "ir/store.h"
#include "runtime/interp.h" /* f16 conversions */

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum { KEY_LEN = 64, CAPACITY = 256, NBUCKET = 1024, NMD = 6 };

/* Memory descriptors an entry binds, by role. */
enum { MD_SRC, MD_WEI, MD_BIAS, MD_DST, MD_RES, MD_SCRATCH };

typedef struct Entry {
    int64_t key[KEY_LEN];
    uint64_t hash;
    dnnl_primitive_t prim;
    dnnl_memory_desc_t md[NMD];
    int has[NMD];              /* md[i] is bound */
    size_t scratch;            /* bytes of scratchpad */
    int res_arg;               /* the execution argument of the residual */
    int pack;                  /* md[MD_WEI] is a packed layout of wei_plain */
    dnnl_memory_desc_t wei_plain; /* the weights as the caller lays them out */
    dnnl_primitive_t cvt;      /* src_plain to md[MD_SRC] (bf16 math, a conv's layout), or NULL */
    dnnl_memory_desc_t src_plain;
    dnnl_primitive_t back;     /* a conv's md[MD_DST] to dst_plain, or NULL */
    dnnl_memory_desc_t dst_plain;
    dnnl_primitive_t res_cvt;  /* res_plain (the residual) to md[MD_RES], or NULL */
    dnnl_memory_desc_t res_plain;
    const char *how;           /* "oneDNN <implementation> (<ISA>)", interned */
    int refs;                  /* the cache's own reference, plus users */
    int cached;                /* in the map and the LRU list */
    struct Entry *hnext;       /* bucket chain */
    struct Entry *older, *newer; /* LRU list */
} Entry;

static struct {
    pthread_mutex_t mu;
    Entry *buckets[NBUCKET];
    Entry *newest, *oldest;
    int entries, capacity;
    int64_t hits, misses, evictions;
} cache = {.mu = PTHREAD_MUTEX_INITIALIZER, .capacity = CAPACITY};

static pthread_once_t engine_once = PTHREAD_ONCE_INIT;
static dnnl_engine_t engine;
static dnnl_status_t engine_status;

/* libgomp's team size of the calling thread, looked up in the libgomp
 * instance libdnnl itself loaded (not linked by us, so they cannot
 * differ); NULL when oneDNN runs on something else. */
static void (*omp_set_threads)(int);
static int (*omp_get_threads)(void);

/* OpenMP's team sleeps between regions (OMP_WAIT_POLICY=PASSIVE with no
 * GOMP_SPINCOUNT, what dcc sets): see call_threads. */
static int omp_passive;

/* bf16 math (disc_rt_set_fpmath_bf16, DISC_FPMATH=bf16): f32 matmuls on
 * constant weights multiply in bf16 (the weights packed as bf16 once, A
 * converted at each call, f32 sums and result), on AMX where the CPU has
 * it: 4x faster at 512x768x768 here. bf16_ok: oneDNN can (engine_init). */
static atomic_int fpmath_bf16;

/* DISC_CONV_LAYOUT=plain: convolutions run on the caller's NCHW layouts
 * (see "Convolution layouts" at the top), for comparison. */
static int conv_plain;
static int bf16_ok;

static int bf16_probe(void)
{
    dnnl_memory_desc_t a, w, c;
    dnnl_dims_t ad = {16, 32}, wd = {32, 16}, cd = {16, 16};
    dnnl_matmul_desc_t desc;
    dnnl_primitive_desc_t pd = NULL;
    int ok = dnnl_memory_desc_init_by_tag(&a, 2, ad, dnnl_bf16, dnnl_ab) == dnnl_success &&
             dnnl_memory_desc_init_by_tag(&w, 2, wd, dnnl_bf16, dnnl_format_tag_any) == dnnl_success &&
             dnnl_memory_desc_init_by_tag(&c, 2, cd, dnnl_f32, dnnl_ab) == dnnl_success &&
             dnnl_matmul_desc_init(&desc, &a, &w, NULL, &c) == dnnl_success &&
             dnnl_primitive_desc_create(&pd, &desc, NULL, engine, NULL) == dnnl_success;
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    return ok;
}

static void engine_init(void)
{
    engine_status = dnnl_engine_create(&engine, dnnl_cpu, 0);
    const DiscEnv *env = disc_env();
    omp_passive = env->omp_passive;
    bf16_ok = engine_status == dnnl_success && bf16_probe();
    conv_plain = env->conv_plain;
    if (env->fpmath_bf16)
        atomic_store(&fpmath_bf16, bf16_ok);
    void *gomp = dlopen("libgomp.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (gomp) {
        *(void **)&omp_set_threads = dlsym(gomp, "omp_set_num_threads");
        *(void **)&omp_get_threads = dlsym(gomp, "omp_get_max_threads");
        if (!omp_set_threads || !omp_get_threads)
            omp_set_threads = NULL;
    }
}

/* Sets the calling thread's OpenMP team size; returns the old one (0: none). */
static int team_set(int n)
{
    if (!omp_set_threads)
        return 0;
    int old = omp_get_threads();
    omp_set_threads(n);
    return old;
}

static void team_restore(int old)
{
    if (old > 0)
        omp_set_threads(old);
}

static dnnl_engine_t get_engine(DiscRt *rt)
{
    pthread_once(&engine_once, engine_init);
    if (engine_status != dnnl_success) {
        disc_rt_fail(rt, "oneDNN: cannot create the CPU engine: %s", dnnl_status2str(engine_status));
        return NULL;
    }
    return engine;
}

/* ---- how calls ran, for DISC_PROFILE --------------------------------------- */

/* Strings that live as long as the process: the few distinct descriptions
 * of how a call ran (an implementation, a split). */
static const char *intern(const char *s)
{
    static char *table[128];
    static int n;
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    const char *r = "";
    pthread_mutex_lock(&mu);
    for (int i = 0; i < n && !*r; i++)
        if (!strcmp(table[i], s))
            r = table[i];
    if (!*r && n < (int)(sizeof table / sizeof table[0]) && (table[n] = strdup(s)))
        r = table[n++];
    pthread_mutex_unlock(&mu);
    return r;
}

int disc_rt_vector_bits(void)
{
    switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41: return 128;
    case dnnl_cpu_isa_avx:
    case dnnl_cpu_isa_avx2:
    case dnnl_cpu_isa_avx2_vnni: return __builtin_cpu_supports("avx2") ? 256 : 128;
    default: return __builtin_cpu_supports("avx512f") ? 512 : __builtin_cpu_supports("avx2") ? 256 : 128;
    }
}

static const char *isa_name(void)
{
    switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "?";
    }
}

/* The last primitive this thread ran (its Entry's how), so that a call
 * made of parts on the pool can name what its parts ran. */
static _Thread_local const char *thread_how;

/* ---- packed constant weights --------------------------------------------- */

enum { NPACKBUCKET = 256, NSAMPLE = 64 };

static int dnnl_failed(DiscRt *rt, const char *what, const char *step, dnnl_status_t s);

typedef struct Packed {
    const void *src;           /* the caller's weights */
    dnnl_memory_desc_t plain, md; /* their layout, the packed one */
    uint64_t print;            /* fingerprint of src (print_of) */
    void *data;                /* the packed copy */
    void *keep;                /* where data is mapped from the store (store_release), or NULL */
    size_t bytes;
    int refs;                  /* the cache's own reference, plus users */
    struct Packed *next;       /* bucket chain */
} Packed;

static struct {
    pthread_mutex_t mu;
    pthread_mutex_t packing;   /* held while a copy is made (packed_get) */
    Packed *buckets[NPACKBUCKET];
    int count;
    int64_t bytes, packs;
} packed = {.mu = PTHREAD_MUTEX_INITIALIZER, .packing = PTHREAD_MUTEX_INITIALIZER};

static size_t packed_bucket(const void *src)
{
    uint64_t h = (uint64_t)(uintptr_t)src * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 56) % NPACKBUCKET;
}

/* NSAMPLE words spread over the bytes the plain (strided) layout spans,
 * hashed. The span is counted from the strides: oneDNN's size of a
 * strided descriptor (dims times the outer stride) runs past the end of a
 * column slice. */
static uint64_t print_of(const void *src, const dnnl_memory_desc_t *plain)
{
    size_t span = 1;
    for (int i = 0; i < plain->ndims; i++)
        span += (size_t)(plain->dims[i] - 1) * (size_t)plain->format_desc.blocking.strides[i];
    span *= dnnl_data_type_size(plain->data_type);
    size_t words = span / 4;
    const unsigned char *p = src;
    uint64_t h = 1469598103934665603ull ^ span;
    for (int i = 0; i < NSAMPLE; i++) {
        uint32_t w = 0;
        if (words > 0)
            memcpy(&w, p + 4 * (words > 1 ? (size_t)i * (words - 1) / (NSAMPLE - 1) : 0), 4);
        else if (span > 0)
            w = p[(size_t)i * (span - 1) / (NSAMPLE - 1)];
        h = (h ^ w) * 1099511628211ull;
    }
    return h;
}

static void packed_unref(Packed *k) /* under packed.mu */
{
    if (--k->refs == 0) {
        if (k->keep)
            store_release(k->keep);
        else
            free(k->data);
        free(k);
    }
}

/* Unlinks *at (under packed.mu); the cache's reference goes. */
static void packed_unlink(Packed **at)
{
    Packed *k = *at;
    *at = k->next;
    packed.count--;
    packed.bytes -= (int64_t)k->bytes;
    packed_unref(k);
}

/* Drops the copies whose weights start in [p, p + bytes); every one for p NULL. */
static void packed_drop(const void *p, int64_t bytes)
{
    uintptr_t lo = (uintptr_t)p, hi = lo + (uintptr_t)(bytes > 0 ? bytes : 0);
    pthread_mutex_lock(&packed.mu);
    for (int i = 0; i < NPACKBUCKET; i++)
        for (Packed **at = &packed.buckets[i]; *at;) {
            uintptr_t s = (uintptr_t)(*at)->src;
            if (!p || (s >= lo && s < hi))
                packed_unlink(at);
            else
                at = &(*at)->next;
        }
    pthread_mutex_unlock(&packed.mu);
}

int disc_rt_set_fpmath_bf16(int on)
{
    pthread_once(&engine_once, engine_init);
    if (on && !bf16_ok)
        return -1;
    return atomic_exchange(&fpmath_bf16, on != 0);
}

void disc_rt_weights_forget(const void *p, int64_t bytes)
{
    if (p && bytes > 0)
        packed_drop(p, bytes);
}

void disc_rt_weights_forget_at(void *p)
{
    disc_rt_weights_forget(p, 1);
}

static void packed_release(Packed *k)
{
    pthread_mutex_lock(&packed.mu);
    packed_unref(k);
    pthread_mutex_unlock(&packed.mu);
}

/* A referenced copy of src (laid out as plain) in layout md (under
 * packed.mu), or NULL; a copy whose fingerprint no longer matches is
 * dropped. */
static Packed *packed_find(const dnnl_memory_desc_t *plain, const dnnl_memory_desc_t *md, const void *src,
                           uint64_t print)
{
    for (Packed **at = &packed.buckets[packed_bucket(src)]; *at; at = &(*at)->next) {
        Packed *k = *at;
        if (k->src != src || !dnnl_memory_desc_equal(&k->md, md) || !dnnl_memory_desc_equal(&k->plain, plain))
            continue;
        if (k->print != print) {
            packed_unlink(at);
            return NULL;
        }
        k->refs++;
        return k;
    }
    return NULL;
}

/* Runs reorder primitive prim from src (layout from_md) into dst (to_md)
 * with nthr threads. */
static dnnl_status_t run_reorder(dnnl_primitive_t prim, const dnnl_memory_desc_t *from_md, const void *src,
                                 const dnnl_memory_desc_t *to_md, void *dst, int nthr)
{
    dnnl_memory_t from = NULL, to = NULL;
    dnnl_stream_t st = NULL;
    dnnl_status_t s;
    if ((s = dnnl_memory_create(&from, from_md, engine, (void *)src)) == dnnl_success &&
        (s = dnnl_memory_create(&to, to_md, engine, dst)) == dnnl_success &&
        (s = dnnl_stream_create(&st, engine, dnnl_stream_default_flags)) == dnnl_success) {
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
        int old = team_set(nthr);
        s = dnnl_primitive_execute(prim, st, 2, args);
        if (s == dnnl_success)
            s = dnnl_stream_wait(st);
        team_restore(old);
    }
    if (st)
        dnnl_stream_destroy(st);
    if (from)
        dnnl_memory_destroy(from);
    if (to)
        dnnl_memory_destroy(to);
    return s;
}

/* A reorder primitive from layout `from` to `to`, in *prim. */
static dnnl_status_t reorder_make(dnnl_primitive_t *prim, const dnnl_memory_desc_t *from,
                                  const dnnl_memory_desc_t *to)
{
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t s = dnnl_reorder_primitive_desc_create(&pd, from, engine, to, engine, NULL);
    if (s == dnnl_success)
        s = dnnl_primitive_create(prim, pd);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    return s;
}

/* Reorders src from layout plain into md, with nthr threads. */
static int pack_weights(DiscRt *rt, const char *what, const dnnl_memory_desc_t *plain,
                        const dnnl_memory_desc_t *md, const void *src, void *dst, int nthr)
{
    dnnl_primitive_t prim = NULL;
    dnnl_status_t s = reorder_make(&prim, plain, md);
    if (s == dnnl_success)
        s = run_reorder(prim, plain, src, md, dst, nthr);
    if (prim)
        dnnl_primitive_destroy(prim);
    return s == dnnl_success ? 0 : dnnl_failed(rt, what, "packing the weights", s);
}

/* Fills dst (md's bytes) from src, for a copy oneDNN's reorders do not make. */
typedef void PackFill(const void *src, void *dst, const void *ctx);

/* The words that say what a blocked layout is (its dims, type, padding,
 * strides and blocks); false for any other (nothing stored for it). */
static bool layout_words(const dnnl_memory_desc_t *md, uint64_t *w, int *n)
{
    if (md->format_kind != dnnl_blocked || md->extra.flags != 0 || md->ndims > DNNL_MAX_NDIMS ||
        md->format_desc.blocking.inner_nblks > DNNL_MAX_NDIMS)
        return false;
    int k = *n;
    w[k++] = (uint64_t)md->ndims;
    w[k++] = (uint64_t)md->data_type;
    w[k++] = (uint64_t)md->offset0;
    for (int i = 0; i < md->ndims; i++) {
        w[k++] = (uint64_t)md->dims[i];
        w[k++] = (uint64_t)md->padded_dims[i];
        w[k++] = (uint64_t)md->padded_offsets[i];
        w[k++] = (uint64_t)md->format_desc.blocking.strides[i];
    }
    const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
    w[k++] = (uint64_t)b->inner_nblks;
    for (int i = 0; i < b->inner_nblks; i++) {
        w[k++] = (uint64_t)b->inner_blks[i];
        w[k++] = (uint64_t)b->inner_idxs[i];
    }
    *n = k;
    return true;
}

typedef struct PackJob {
    DiscRt *rt;
    const char *what;
    const dnnl_memory_desc_t *plain, *md;
    const void *src;
    int nthr;
} PackJob;

static bool pack_into(void *dst, void *arg)
{
    const PackJob *j = arg;
    return pack_weights(j->rt, j->what, j->plain, j->md, j->src, dst, j->nthr) == 0;
}

/* The packed copy of src from the store it came from (disc_rt_known):
 * mapped where a process made it before, else made there. NULL when src
 * is not known, the layout not a blocked one, or the store cannot hold
 * it (then the caller packs into memory; *failed when packing itself
 * failed, with the error in rt). */
static void *packed_stored(DiscRt *rt, const char *what, const dnnl_memory_desc_t *plain,
                           const dnnl_memory_desc_t *md, const void *src, int nthr, size_t bytes, void **keep,
                           bool *failed)
{
    uint64_t hash, w[2 + 2 * (3 + 4 * DNNL_MAX_NDIMS + 1 + 2 * DNNL_MAX_NDIMS)];
    char store[4096];
    int n = 2;
    if (!disc_rt_known(src, &hash, store, sizeof store) || !layout_words(plain, w, &n) || !layout_words(md, w, &n))
        return NULL;
    w[0] = 0x7061636b65643031ull; /* "packed01" */
    w[1] = hash;
    uint64_t key[2] = {store_hash(w, (size_t)n * 8, 0), store_hash(w, (size_t)n * 8, 0x165667B19E3779F9ull)};
    PackJob job = {rt, what, plain, md, src, nthr};
    uint64_t h;
    void *data = (void *)store_derived(store, key, bytes, pack_into, &job, &h, keep);
    *failed = !data && disc_rt_error(rt) != NULL;
    return data;
}

/* The copy of src (laid out as plain) in layout md, referenced; made on a
 * miss by a oneDNN reorder, or by fill (with ctx) where not NULL. */
static Packed *packed_get_by(DiscRt *rt, const char *what, const dnnl_memory_desc_t *plain,
                             const dnnl_memory_desc_t *md, const void *src, int nthr, PackFill *fill,
                             const void *ctx)
{
    uint64_t print = print_of(src, plain);
    pthread_mutex_lock(&packed.mu);
    Packed *k = packed_find(plain, md, src, print);
    pthread_mutex_unlock(&packed.mu);
    if (k)
        return k;
    /* one packing at a time, so that the column parts of one call, which
     * all want the same copy at once, make it once */
    pthread_mutex_lock(&packed.packing);
    pthread_mutex_lock(&packed.mu);
    k = packed_find(plain, md, src, print);
    pthread_mutex_unlock(&packed.mu);
    if (k) {
        pthread_mutex_unlock(&packed.packing);
        return k;
    }
    size_t bytes = dnnl_memory_desc_get_size(md);
    k = calloc(1, sizeof *k);
    void *keep = NULL;
    bool failed = false;
    /* a weight the loader mapped from the store: its copy kept there too */
    void *data = k && !fill ? packed_stored(rt, what, plain, md, src, nthr, bytes, &keep, &failed) : NULL;
    if (failed) {
        pthread_mutex_unlock(&packed.packing);
        free(k);
        return NULL;
    }
    if (data) {
        *k = (Packed){.src = src, .plain = *plain, .md = *md, .print = print, .data = data, .keep = keep,
                      .bytes = bytes, .refs = 2};
        goto cached;
    }
    data = k ? disc_rt_alloc_big(bytes) : NULL;
    if (!data) {
        pthread_mutex_unlock(&packed.packing);
        free(k);
        disc_rt_fail(rt, "%s: out of memory for %zu bytes of packed weights", what, bytes);
        return NULL;
    }
    if (fill)
        fill(src, data, ctx);
    else if (pack_weights(rt, what, plain, md, src, data, nthr) != 0) {
        pthread_mutex_unlock(&packed.packing);
        free(data);
        free(k);
        return NULL;
    }
    *k = (Packed){.src = src, .plain = *plain, .md = *md, .print = print, .data = data,
                  .bytes = bytes, .refs = 2};
cached:
    pthread_mutex_lock(&packed.mu);
    packed.packs++;
    Packed **b = &packed.buckets[packed_bucket(src)];
    k->next = *b;
    *b = k;
    packed.count++;
    packed.bytes += (int64_t)bytes;
    pthread_mutex_unlock(&packed.mu);
    pthread_mutex_unlock(&packed.packing);
    return k;
}

static Packed *packed_get(DiscRt *rt, const char *what, const dnnl_memory_desc_t *plain,
                          const dnnl_memory_desc_t *md, const void *src, int nthr)
{
    return packed_get_by(rt, what, plain, md, src, nthr, NULL, NULL);
}

/* ---- the cache ----------------------------------------------------------- */

static uint64_t key_hash(const int64_t *k)
{
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < KEY_LEN; i++) {
        h ^= (uint64_t)k[i];
        h *= 1099511628211ull;
        h ^= h >> 29;
    }
    return h;
}

/* e as calloc left it but for its key, hash and references. */
static void entry_reset(Entry *e)
{
    if (e->prim)
        dnnl_primitive_destroy(e->prim);
    if (e->cvt)
        dnnl_primitive_destroy(e->cvt);
    if (e->back)
        dnnl_primitive_destroy(e->back);
    if (e->res_cvt)
        dnnl_primitive_destroy(e->res_cvt);
    Entry keep = *e;
    memset(e, 0, sizeof *e);
    memcpy(e->key, keep.key, sizeof e->key);
    e->hash = keep.hash;
    e->refs = keep.refs;
}

static void entry_destroy(Entry *e)
{
    entry_reset(e);
    free(e);
}

static void entry_unref(Entry *e) /* under cache.mu */
{
    if (--e->refs == 0)
        entry_destroy(e);
}

static void lru_unlink(Entry *e)
{
    if (e->older)
        e->older->newer = e->newer;
    else
        cache.oldest = e->newer;
    if (e->newer)
        e->newer->older = e->older;
    else
        cache.newest = e->older;
    e->older = e->newer = NULL;
}

static void lru_push(Entry *e)
{
    e->older = cache.newest;
    e->newer = NULL;
    if (cache.newest)
        cache.newest->newer = e;
    else
        cache.oldest = e;
    cache.newest = e;
}

static void evict(Entry *e) /* under cache.mu */
{
    Entry **p = &cache.buckets[e->hash % NBUCKET];
    while (*p != e)
        p = &(*p)->hnext;
    *p = e->hnext;
    lru_unlink(e);
    e->cached = 0;
    cache.entries--;
    cache.evictions++;
    entry_unref(e);
}

/* A referenced entry for key, or NULL. */
static Entry *cache_get(const int64_t *key, uint64_t h)
{
    pthread_mutex_lock(&cache.mu);
    Entry *e = cache.buckets[h % NBUCKET];
    while (e && (e->hash != h || memcmp(e->key, key, sizeof e->key) != 0))
        e = e->hnext;
    if (e) {
        e->refs++;
        lru_unlink(e);
        lru_push(e);
        cache.hits++;
    } else {
        cache.misses++;
    }
    pthread_mutex_unlock(&cache.mu);
    return e;
}

/* Adds a new entry (refs 1, the caller's); another thread may have added
 * the same key meanwhile, which only costs a duplicate until eviction. */
static void cache_put(Entry *e)
{
    pthread_mutex_lock(&cache.mu);
    if (cache.capacity > 0) {
        while (cache.entries >= cache.capacity)
            evict(cache.oldest);
        e->refs++;
        e->cached = 1;
        Entry **b = &cache.buckets[e->hash % NBUCKET];
        e->hnext = *b;
        *b = e;
        lru_push(e);
        cache.entries++;
    }
    pthread_mutex_unlock(&cache.mu);
}

static void cache_release(Entry *e)
{
    pthread_mutex_lock(&cache.mu);
    entry_unref(e);
    pthread_mutex_unlock(&cache.mu);
}

void disc_rt_cache_stats(DiscRtCacheStats *s)
{
    pthread_mutex_lock(&cache.mu);
    s->hits = cache.hits;
    s->misses = cache.misses;
    s->evictions = cache.evictions;
    s->entries = cache.entries;
    s->capacity = cache.capacity;
    pthread_mutex_unlock(&cache.mu);
    pthread_mutex_lock(&packed.mu);
    s->packed = packed.count;
    s->packed_bytes = packed.bytes;
    s->packs = packed.packs;
    pthread_mutex_unlock(&packed.mu);
}

int disc_rt_cache_set_capacity(int capacity)
{
    if (capacity < 0)
        capacity = 0;
    pthread_mutex_lock(&cache.mu);
    int old = cache.capacity;
    cache.capacity = capacity;
    while (cache.entries > capacity)
        evict(cache.oldest);
    pthread_mutex_unlock(&cache.mu);
    if (capacity == 0)
        packed_drop(NULL, 0);
    return old;
}

void disc_rt_lib_shutdown(void)
{
    int cap = disc_rt_cache_set_capacity(0);
    disc_rt_cache_set_capacity(cap);
    pthread_mutex_lock(&cache.mu);
    cache.evictions = 0;
    pthread_mutex_unlock(&cache.mu);
    pthread_mutex_lock(&packed.mu);
    packed.packs = 0;
    pthread_mutex_unlock(&packed.mu);
}

/* ---- making and running primitives --------------------------------------- */

/* Appends activation p (if any) to po. Clip's alpha and beta are its
 * bounds; swish's alpha scales x in the sigmoid; hardswish (oneDNN 2.x)
 * takes none. */
static dnnl_status_t append_post(dnnl_post_ops_t po, DiscPost p);

/* What one call builds: op descriptor inputs and the post-ops. */
typedef struct Build {
    DiscRt *rt;
    const char *what;          /* "matmul", ... for messages */
    Entry *e;                  /* md[] and has[] to fill */
    DiscPost post;
    int residual;
    DiscPost post_res;         /* after the residual (convolutions) */
    int wconst;                /* the weights are constant: let oneDNN pick their layout */
    int bf16;                  /* may use bf16 products (f32 matmul); run_cached decides */
    int any;                   /* src, dst, residual in format any (convolution layouts) */
    int quiet;                 /* no implementation is not an error: the caller has another way */
    int nthr;                  /* the threads the call runs on (run_cached) */
    double flop;               /* the work of the call, for call_threads */
    double wbytes;             /* the weights' size */
    const struct Whole *whole; /* the weights are columns of these, packed whole; or NULL */
    int block;                 /* md_image: channels-last operands blocked by this many (rt.h) */
} Build;

/* Constant weights of a call that are columns [j0, j0 + n) of wider ones,
 * which are packed as a whole (see whole_layout). */
typedef struct Whole {
    const void *b;             /* the wider weights */
    int64_t j0, n;             /* the first column of the call's, their columns */
    int64_t stride[2];         /* their element strides: row (k), column (n) */
} Whole;

static dnnl_data_type_t dt_of(int dtype)
{
    switch (dtype) {
    case DT_F32: return dnnl_f32;
    case DT_F16: return dnnl_f16;
    case DT_BF16: return dnnl_bf16;
    default: return dnnl_data_type_undef;
    }
}

static int check_dtype(DiscRt *rt, const char *what, int dtype)
{
    if (dt_of(dtype) == dnnl_data_type_undef) {
        const char *name = dtype >= 0 && dtype < DT_COUNT ? dtype_name((DType)dtype) : "?";
        disc_rt_fail(rt, "%s: unsupported dtype %s (%d); f32, f16 and bf16 are", what, name, dtype);
        return -1;
    }
    return 0;
}

static int check_post(DiscRt *rt, const char *what, DiscPost post)
{
    if ((int)post < 0 || post >= DISC_POST_COUNT) {
        disc_rt_fail(rt, "%s: unknown post-op %d", what, (int)post);
        return -1;
    }
    return 0;
}

static int dnnl_failed(DiscRt *rt, const char *what, const char *step, dnnl_status_t s)
{
    if (s == dnnl_unimplemented)
        disc_rt_fail(rt, "%s: oneDNN has no implementation for this case on this CPU (%s)", what, step);
    else
        disc_rt_fail(rt, "%s: oneDNN %s: %s", what, step, dnnl_status2str(s));
    return -1;
}

/* Dense strides for dims (row-major). */
static void dense(int nd, const dnnl_dims_t dims, dnnl_dims_t st)
{
    int64_t s = 1;
    for (int i = nd - 1; i >= 0; i--) {
        st[i] = s;
        s *= dims[i] > 0 ? dims[i] : 1;
    }
}

static int md_strided(Build *b, int role, int nd, const dnnl_dims_t dims, dnnl_data_type_t dt, const dnnl_dims_t st)
{
    dnnl_status_t s = dnnl_memory_desc_init_by_strides(&b->e->md[role], nd, dims, dt, st);
    if (s != dnnl_success)
        return dnnl_failed(b->rt, b->what, "memory descriptor", s);
    b->e->has[role] = 1;
    return 0;
}

static int md_dense(Build *b, int role, int nd, const dnnl_dims_t dims, dnnl_data_type_t dt)
{
    dnnl_dims_t st;
    dense(nd, dims, st);
    return md_strided(b, role, nd, dims, dt, st);
}

/* dims [n][c][spatial...] dense, or stored channels-last ([n][spatial...][c],
 * oneDNN's nwc / nhwc / ndhwc) when nhwc. */
static int md_image(Build *b, int role, int nd, const dnnl_dims_t dims, dnnl_data_type_t dt, int nhwc)
{
    int blk = nhwc ? b->block : 0;
    if (blk) { /* [n][c / blk][spatial...][blk], the channels padded (rt.h) */
        static const dnnl_format_tag_t tags[2][3] = {{dnnl_nCw8c, dnnl_nChw8c, dnnl_nCdhw8c},
                                                     {dnnl_nCw16c, dnnl_nChw16c, dnnl_nCdhw16c}};
        if ((blk != 8 && blk != 16) || nd < 3 || nd > 5) {
            disc_rt_fail(b->rt, "%s: no oneDNN layout for blocks of %d channels over %d spatial dims", b->what, blk,
                         nd - 2);
            return -1;
        }
        dnnl_status_t s = dnnl_memory_desc_init_by_tag(&b->e->md[role], nd, dims, dt, tags[blk == 16][nd - 3]);
        if (s != dnnl_success)
            return dnnl_failed(b->rt, b->what, "memory descriptor", s);
        b->e->has[role] = 1;
        return 0;
    }
    dnnl_dims_t st;
    dense(nd, dims, st);
    if (nhwc) {
        int64_t s = dims[1] > 0 ? dims[1] : 1;
        st[1] = 1;
        for (int i = nd - 1; i >= 2; i--) {
            st[i] = s;
            s *= dims[i] > 0 ? dims[i] : 1;
        }
        st[0] = s;
    }
    return md_strided(b, role, nd, dims, dt, st);
}

/* Constant weights: keep the plain layout in wei_plain and leave the
 * weights' layout to oneDNN (make_primitive reads its choice back). */
static int md_weights_any(Build *b)
{
    Entry *e = b->e;
    e->wei_plain = e->md[MD_WEI];
    if (!b->wconst)
        return 0;
    dnnl_status_t s = dnnl_memory_desc_init_by_tag(&e->md[MD_WEI], e->wei_plain.ndims, e->wei_plain.dims,
                                                   b->bf16 ? dnnl_bf16 : e->wei_plain.data_type,
                                                   dnnl_format_tag_any);
    return s == dnnl_success ? 0 : dnnl_failed(b->rt, b->what, "weights descriptor", s);
}

/* Format any for role (src, dst or the residual): oneDNN picks the layout
 * and layouts_read reads it back; the caller's plain layout goes to *plain. */
static int md_any(Build *b, int role, dnnl_memory_desc_t *plain)
{
    Entry *e = b->e;
    *plain = e->md[role];
    dnnl_status_t s = dnnl_memory_desc_init_by_tag(&e->md[role], plain->ndims, plain->dims, plain->data_type,
                                                   dnnl_format_tag_any);
    return s == dnnl_success ? 0 : dnnl_failed(b->rt, b->what, "layout descriptor", s);
}

/* Role keeps the layout it has (layout_read then finds nothing to do). */
static int keep(Build *b, int role, dnnl_memory_desc_t *plain)
{
    *plain = b->e->md[role];
    return 0;
}

/* Whether layout md puts every element where plain (dense, unblocked)
 * does: no blocks, no padding, the same strides on every axis longer than
 * 1 (nhwc is nchw when h = w = 1, or c = 1). Such a layout binds the
 * caller's buffer as it is, with no reorder. */
static int md_same_memory(const dnnl_memory_desc_t *md, const dnnl_memory_desc_t *plain)
{
    if (md->format_kind != dnnl_blocked || md->format_desc.blocking.inner_nblks || md->offset0 ||
        md->ndims != plain->ndims || md->data_type != plain->data_type)
        return 0;
    for (int i = 0; i < md->ndims; i++)
        if (md->padded_dims[i] != md->dims[i] || md->padded_offsets[i] ||
            (md->dims[i] > 1 && md->format_desc.blocking.strides[i] != plain->format_desc.blocking.strides[i]))
            return 0;
    return 1;
}

/* The layout pd chose for role, bound in e->md[role]; a reorder (from
 * plain to it, or from it to plain when out) in *prim unless it is plain. */
static dnnl_status_t layout_read(Entry *e, int role, const dnnl_memory_desc_t *md,
                                 const dnnl_memory_desc_t *plain, int out, dnnl_primitive_t *prim)
{
    if (!md || md->format_kind != dnnl_blocked)
        return dnnl_runtime_error;
    e->md[role] = *md;
    if (dnnl_memory_desc_equal(md, plain) || md_same_memory(md, plain))
        return dnnl_success;
    return out ? reorder_make(prim, md, plain) : reorder_make(prim, plain, md);
}

/* The layouts pd chose for src, dst and the residual; a reorder for each
 * that is not the caller's plain one (src and the residual in, dst out). */
static dnnl_status_t layouts_read(Entry *e, const_dnnl_primitive_desc_t pd)
{
    const dnnl_memory_desc_t *src = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *dst = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    dnnl_status_t s = layout_read(e, MD_SRC, src, &e->src_plain, 0, &e->cvt);
    if (s == dnnl_success)
        s = layout_read(e, MD_DST, dst, &e->dst_plain, 1, &e->back);
    if (s == dnnl_success && e->has[MD_RES])
        s = layout_read(e, MD_RES, dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, e->res_arg),
                        &e->res_plain, 0, &e->res_cvt);
    return s;
}

static dnnl_alg_kind_t post_alg(DiscPost p)
{
    switch (p) {
    case DISC_POST_RELU: return dnnl_eltwise_relu;
    case DISC_POST_GELU_ERF: return dnnl_eltwise_gelu_erf;
    case DISC_POST_GELU_TANH: return dnnl_eltwise_gelu_tanh;
    case DISC_POST_TANH: return dnnl_eltwise_tanh;
    case DISC_POST_SIGMOID: return dnnl_eltwise_logistic;
    case DISC_POST_RELU6: return dnnl_eltwise_clip;
    case DISC_POST_HARDSWISH: return dnnl_eltwise_hardswish;
    case DISC_POST_SWISH: return dnnl_eltwise_swish;
    default: return dnnl_alg_kind_undef;
    }
}

_Static_assert(DISC_POST_COUNT <= 16, "a convolution's key holds post + 16 * post_res");

static dnnl_status_t append_post(dnnl_post_ops_t po, DiscPost p)
{
    float alpha = p == DISC_POST_SWISH ? 1.0f : 0.0f, beta = p == DISC_POST_RELU6 ? 6.0f : 0.0f;
    return p == DISC_POST_NONE ? dnnl_success : dnnl_post_ops_append_eltwise(po, 1.0f, post_alg(p), alpha, beta);
}

/* A depthwise convolution on oneDNN's direct kernel (jit_dw) rather than
 * the one it lists first on AVX-512, brdgmm_dw: in EfficientNet-B0,
 * MobileNetV2 and V3 (channels-last, AVX-512, one thread) the direct one
 * ran their depthwise layers 4-20% faster, 5% over all of them
 * (bench/NOTES.md). *pd becomes the first jit_dw implementation of the
 * same descriptor and attributes, if there is one; its name is returned
 * (else impl, and *pd as it was). DISC_CONV_DW=brdgmm keeps oneDNN's
 * order, for measuring. */
static const char *dw_direct(dnnl_primitive_desc_t *pd, const void *desc, const_dnnl_primitive_attr_t attr,
                             const char *impl)
{
    dnnl_primitive_desc_iterator_t it;
    if (dnnl_primitive_desc_iterator_create(&it, desc, attr, engine, NULL) != dnnl_success)
        return impl;
    do {
        dnnl_primitive_desc_t p = dnnl_primitive_desc_iterator_fetch(it);
        const char *name = NULL;
        if (p && dnnl_primitive_desc_query(p, dnnl_query_impl_info_str, 0, &name) == dnnl_success && name &&
            !strncmp(name, "jit_dw", 6)) {
            dnnl_primitive_desc_destroy(*pd);
            *pd = p;
            impl = name;
            break;
        }
        if (p)
            dnnl_primitive_desc_destroy(p);
    } while (dnnl_primitive_desc_iterator_next(it) == dnnl_success);
    dnnl_primitive_desc_iterator_destroy(it);
    return impl;
}

/* The primitive for op descriptor `desc`, with post-ops, user scratchpad. */
static int make_primitive(Build *b, const void *desc)
{
    Entry *e = b->e;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t s;
    const char *step = "attributes";
    if ((s = dnnl_primitive_attr_create(&attr)) != dnnl_success ||
        (s = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user)) != dnnl_success ||
        (s = dnnl_post_ops_create(&po)) != dnnl_success)
        goto out;
    step = "post-ops";
    if ((s = append_post(po, b->post)) != dnnl_success)
        goto out;
    if (b->residual) {
        e->res_arg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(dnnl_post_ops_len(po)) | DNNL_ARG_SRC_1;
        if ((s = dnnl_post_ops_append_binary(po, dnnl_binary_add, &e->md[MD_RES])) != dnnl_success)
            goto out;
    }
    if ((s = append_post(po, b->post_res)) != dnnl_success ||
        (s = dnnl_primitive_attr_set_post_ops(attr, po)) != dnnl_success)
        goto out;
    step = "primitive descriptor";
    if ((s = dnnl_primitive_desc_create(&pd, desc, attr, engine, NULL)) != dnnl_success)
        goto out;
    const char *impl = NULL;
    char how[96];
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl)
        impl = "?";
    if (!strncmp(impl, "brdgmm_dw", 9) && !disc_env()->dw_brdgmm)
        impl = dw_direct(&pd, desc, attr, impl);
    if (strstr(impl, "sse") || strstr(impl, "avx") || strstr(impl, "amx"))
        snprintf(how, sizeof how, "oneDNN %s", impl);
    else /* gemm:jit, ref: the ISA oneDNN may use */
        snprintf(how, sizeof how, "oneDNN %s (%s)", impl, isa_name());
    e->how = intern(how);
    step = "layout reorders";
    if (b->any && (s = layouts_read(e, pd)) != dnnl_success)
        goto out;
    if (b->wconst) {
        const dnnl_memory_desc_t *w = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
        e->md[MD_WEI] = *w;
        e->pack = !dnnl_memory_desc_equal(w, &e->wei_plain);
        if (!e->pack) /* the plain layout: bind it as the caller gave it */
            e->md[MD_WEI] = e->wei_plain;
    }
    const dnnl_memory_desc_t *sp = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    e->scratch = sp ? dnnl_memory_desc_get_size(sp) : 0;
    if (e->scratch) {
        e->md[MD_SCRATCH] = *sp;
        e->has[MD_SCRATCH] = 1;
    }
    step = "primitive";
    s = dnnl_primitive_create(&e->prim, pd);
out:
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (po)
        dnnl_post_ops_destroy(po);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    if (s == dnnl_unimplemented && b->quiet)
        return 1;
    return s == dnnl_success ? 0 : dnnl_failed(b->rt, b->what, step, s);
}

/* The OpenMP team size for a call on this thread. Under a passive wait
 * policy each parallel region wakes the team from a futex sleep, some
 * 50-70 us on this 2-core machine, which is more than a small call's whole
 * work: the convolutions of tests/models/resnet_cnn at 1x3x32x32 take
 * 60-70 us each on two threads, and the model runs 0.53 ms against 0.25 ms
 * when calls under SMALL_FLOP run on the calling thread alone (mobilenet
 * 0.55 -> 0.34 ms; both unchanged at their largest shapes, BERT-base at
 * 1x13 too). 4 MFLOP already cost mobilenet at 1x3x40x197 (1.39 -> 1.67
 * ms), 16 MFLOP BERT at 1x13 (m 13 of 768x768 is 15 MFLOP; 28 -> 30 ms).
 * A call whose weights exceed SMALL_BYTES keeps the team whatever its
 * size: it is bandwidth-bound, and two cores stream faster (m 1 of
 * 3072x768 packed: 250 us on two, 308 us on one). */
enum { SMALL_BYTES = 4 << 20 };
#define SMALL_FLOP 2e6

static int call_threads(DiscRt *rt, const Build *b)
{
    if (disc_rt_pool_busy())
        return 1;
    if (omp_passive && b->flop < SMALL_FLOP && b->wbytes <= SMALL_BYTES)
        return 1;
    return disc_rt_threads(rt);
}

/* Runs e with the buffers by role (NULL: unbound). */
static int execute(DiscRt *rt, const char *what, Entry *e, void *const *ptr, int nthr)
{
    static const int arg_of[NMD] = {
        DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_BIAS, DNNL_ARG_DST,
        0 /* res_arg */, DNNL_ARG_SCRATCHPAD,
    };
    dnnl_exec_arg_t args[NMD];
    dnnl_memory_t mem[NMD] = {0};
    void *scratch = NULL;
    int nargs = 0, rc = -1;
    dnnl_status_t s = dnnl_success;
    if (e->scratch && !(scratch = disc_rt_alloc(rt, (int64_t)e->scratch)))
        return -1;
    for (int i = 0; i < NMD; i++) {
        if (!e->has[i])
            continue;
        void *p = i == MD_SCRATCH ? scratch : ptr[i];
        if ((s = dnnl_memory_create(&mem[i], &e->md[i], engine, p)) != dnnl_success)
            goto out;
        args[nargs].arg = i == MD_RES ? e->res_arg : arg_of[i];
        args[nargs++].memory = mem[i];
    }
    dnnl_stream_t st = NULL;
    if ((s = dnnl_stream_create(&st, engine, dnnl_stream_default_flags)) != dnnl_success)
        goto out;
    int old = team_set(nthr);
    s = dnnl_primitive_execute(e->prim, st, nargs, args);
    if (s == dnnl_success)
        s = dnnl_stream_wait(st);
    team_restore(old);
    dnnl_stream_destroy(st);
    rc = 0;
out:
    for (int i = 0; i < NMD; i++)
        if (mem[i])
            dnnl_memory_destroy(mem[i]);
    if (s != dnnl_success)
        return dnnl_failed(rt, what, "execute", s);
    return rc;
}

/* src (layout from) reordered by prim into run memory of layout to; NULL
 * on failure. */
static void *reorder_in(DiscRt *rt, const char *what, dnnl_primitive_t prim, const dnnl_memory_desc_t *from,
                        const void *src, const dnnl_memory_desc_t *to, int nthr)
{
    void *dst = disc_rt_alloc(rt, (int64_t)dnnl_memory_desc_get_size(to));
    if (!dst)
        return NULL;
    dnnl_status_t s = run_reorder(prim, from, src, to, dst, nthr);
    if (s != dnnl_success) {
        dnnl_failed(rt, what, "reorder in", s);
        return NULL;
    }
    return dst;
}

typedef int MakeFn(Build *b, const void *ctx);

/* The plain and packed layouts of the whole weights w of which e's are
 * columns, and the byte offset of e's columns in the packed copy; 0 when
 * e's packed layout does not keep column blocks outermost. oneDNN's
 * matmul layouts do (BA16a64b: each 64-column panel holds all of k, one
 * panel after another, the same strides for any n), so the whole's
 * layout is e's with n widened, and a panel-aligned part of the whole's
 * copy is a copy of the part: the weights are packed once, whether a
 * call uses them whole or in column parts. */
static int whole_layout(const Whole *w, const Entry *e, dnnl_memory_desc_t *plain, dnnl_memory_desc_t *md,
                        size_t *off)
{
    const dnnl_memory_desc_t *part = &e->md[MD_WEI];
    if (part->ndims != 2 || part->format_kind != dnnl_blocked || part->offset0 != 0)
        return 0;
    const dnnl_blocking_desc_t *bl = &part->format_desc.blocking;
    int64_t bn = 1;
    for (int i = 0; i < bl->inner_nblks; i++)
        if (bl->inner_idxs[i] == 1)
            bn *= bl->inner_blks[i];
    size_t es = dnnl_data_type_size(part->data_type);
    int64_t elems = (int64_t)(dnnl_memory_desc_get_size(part) / es);
    if (w->j0 % bn || part->padded_dims[1] % bn || bl->strides[1] * (part->padded_dims[1] / bn) != elems)
        return 0;
    *md = *part;
    md->dims[1] = w->n;
    md->padded_dims[1] = (w->n + bn - 1) / bn * bn;
    if ((int64_t)(dnnl_memory_desc_get_size(md) / es) != bl->strides[1] * (md->padded_dims[1] / bn))
        return 0;
    dnnl_dims_t dims = {part->dims[0], w->n}, st = {w->stride[0], w->stride[1]};
    if (dnnl_memory_desc_init_by_strides(plain, 2, dims, e->wei_plain.data_type, st) != dnnl_success)
        return 0;
    *off = (size_t)(w->j0 / bn * bl->strides[1]) * es;
    return 1;
}

/* Looks the key up, makes the primitive on a miss, runs it. The key's
 * last slot is the thread count. */
static int run_cached(Build *b, int64_t *key, MakeFn *make, const void *ctx, void *const *ptr)
{
    DiscRt *rt = b->rt;
    if (!get_engine(rt))
        return -1;
    int nthr = call_threads(rt, b);
    pthread_mutex_lock(&cache.mu);
    if (cache.capacity == 0) /* no cache: nothing may be kept, packed weights neither */
        b->wconst = 0;
    pthread_mutex_unlock(&cache.mu);
    b->bf16 = b->bf16 && b->wconst && atomic_load(&fpmath_bf16);
    b->any = b->any && !conv_plain;
    key[KEY_LEN - 4] = b->any;
    key[KEY_LEN - 3] = b->bf16;
    key[KEY_LEN - 2] = b->wconst;
    key[KEY_LEN - 1] = nthr;
    b->nthr = nthr;
    uint64_t h = key_hash(key);
    Entry *e = cache_get(key, h);
    if (!e) {
        if (!(e = calloc(1, sizeof *e))) {
            disc_rt_fail(rt, "%s: out of memory", b->what);
            return -1;
        }
        memcpy(e->key, key, sizeof e->key);
        e->hash = h;
        e->refs = 1;
        b->e = e;
        int old = team_set(nthr); /* oneDNN sizes its blocking for the team it will get */
        int rc = make(b, ctx);
        team_restore(old);
        if (rc != 0) {
            entry_destroy(e);
            return -1;
        }
        cache_put(e);
    }
    Packed *k = NULL;
    void *bind[NMD];
    memcpy(bind, ptr, sizeof bind);
    if (e->pack) {
        size_t off = 0;
        dnnl_memory_desc_t plain, md;
        if (b->whole && whole_layout(b->whole, e, &plain, &md, &off))
            k = packed_get(rt, b->what, &plain, &md, b->whole->b, nthr);
        else
            k = packed_get(rt, b->what, &e->wei_plain, &e->md[MD_WEI], ptr[MD_WEI], nthr);
        if (!k) {
            cache_release(e);
            return -1;
        }
        bind[MD_WEI] = (char *)k->data + off;
    }
    int rc = -1;
    if (e->cvt && !(bind[MD_SRC] = reorder_in(rt, b->what, e->cvt, &e->src_plain, ptr[MD_SRC], &e->md[MD_SRC],
                                              nthr)))
        goto out;
    if (e->res_cvt && !(bind[MD_RES] = reorder_in(rt, b->what, e->res_cvt, &e->res_plain, ptr[MD_RES],
                                                  &e->md[MD_RES], nthr)))
        goto out;
    if (e->back && !(bind[MD_DST] = disc_rt_alloc(rt, (int64_t)dnnl_memory_desc_get_size(&e->md[MD_DST]))))
        goto out;
    thread_how = e->how;
    if (!disc_rt_pool_busy())
        disc_rt_set_call_how(rt, e->how);
    if ((rc = execute(rt, b->what, e, bind, nthr)) == 0 && e->back) {
        dnnl_status_t s = run_reorder(e->back, &e->md[MD_DST], bind[MD_DST], &e->dst_plain, ptr[MD_DST], nthr);
        if (s != dnnl_success)
            rc = dnnl_failed(rt, b->what, "reorder out", s);
    }
out:
    if (k)
        packed_release(k);
    cache_release(e);
    return rc;
}

/* ---- element helpers for the cases oneDNN does not cover -------------------- */

static float load(int dtype, const void *p, int64_t i)
{
    switch (dtype) {
    case DT_F16: return (float)interp_f16_to_double(((const uint16_t *)p)[i]);
    case DT_BF16: {
        uint32_t u = (uint32_t)((const uint16_t *)p)[i] << 16;
        float f;
        memcpy(&f, &u, sizeof f);
        return f;
    }
    default: return ((const float *)p)[i];
    }
}

static void store(int dtype, void *p, int64_t i, float v)
{
    switch (dtype) {
    case DT_F16: ((uint16_t *)p)[i] = interp_f16_from_double(v); break;
    case DT_BF16: {
        uint32_t u;
        memcpy(&u, &v, sizeof u);
        u += 0x7fff + ((u >> 16) & 1); /* round to nearest even */
        ((uint16_t *)p)[i] = (uint16_t)(u >> 16);
        break;
    }
    default: ((float *)p)[i] = v; break;
    }
}

static float apply_post(DiscPost p, float x)
{
    switch (p) {
    case DISC_POST_RELU: return x > 0 ? x : 0;
    case DISC_POST_GELU_ERF: return 0.5f * x * (1 + erff(x * 0.70710678f));
    case DISC_POST_GELU_TANH: return 0.5f * x * (1 + tanhf(0.79788456f * (x + 0.044715f * x * x * x)));
    case DISC_POST_TANH: return tanhf(x);
    case DISC_POST_SIGMOID: return 1 / (1 + expf(-x));
    case DISC_POST_RELU6: return x > 0 ? (x < 6 ? x : 6) : 0;
    case DISC_POST_HARDSWISH: return x * (x + 3 > 0 ? (x + 3 < 6 ? x + 3 : 6) : 0) / 6;
    case DISC_POST_SWISH: return x / (1 + expf(-x));
    default: return x;
    }
}

/* ---- matmul ----------------------------------------------------------------- */

/* The normalised problem: 2-D (batch 1) or 3-D. */
typedef struct Mm {
    int dtype, nd;
    int64_t batch, m, n, k;
    int64_t as[3], bs[3], cs[3];
    int abatch, bbatch;        /* batch extents of A and B (1: broadcast) */
    int bias, post, residual;
} Mm;

/* The matmul primitive over the descriptors in b->e. */
static int matmul_primitive(Build *b, const Mm *p)
{
    Entry *e = b->e;
    dnnl_matmul_desc_t desc;
    dnnl_status_t s = dnnl_matmul_desc_init(&desc, &e->md[MD_SRC], &e->md[MD_WEI],
                                            p->bias ? &e->md[MD_BIAS] : NULL, &e->md[MD_DST]);
    if (s != dnnl_success)
        return dnnl_failed(b->rt, b->what, "matmul descriptor", s);
    return make_primitive(b, &desc);
}

static int make_matmul(Build *b, const void *ctx)
{
    const Mm *p = ctx;
    dnnl_data_type_t dt = dt_of(p->dtype);
    int nd = p->nd, o = 3 - nd; /* 2-D uses the last two of each array */
    dnnl_dims_t ad = {p->abatch ? p->batch : 1, p->m, p->k}, bd = {p->bbatch ? p->batch : 1, p->k, p->n},
                cd = {p->batch, p->m, p->n}, biasd = {1, 1, p->n};
    dnnl_dims_t as = {p->as[0], p->as[1], p->as[2]}, bs = {p->bs[0], p->bs[1], p->bs[2]},
                cs = {p->cs[0], p->cs[1], p->cs[2]};
    /* a broadcast batch (extent 1) gets any valid stride */
    if (ad[0] == 1)
        as[0] = p->m * p->k;
    if (bd[0] == 1)
        bs[0] = p->k * p->n;
    if (md_strided(b, MD_SRC, nd, ad + o, dt, as + o) || md_strided(b, MD_WEI, nd, bd + o, dt, bs + o) ||
        md_weights_any(b) || md_strided(b, MD_DST, nd, cd + o, dt, cs + o))
        return -1;
    if (p->bias && md_dense(b, MD_BIAS, nd, biasd + o, dt))
        return -1;
    if (p->residual && md_strided(b, MD_RES, nd, cd + o, dt, cs + o))
        return -1;
    Entry *e = b->e;
    dnnl_status_t s;
    if (b->bf16) { /* A converted into a dense bf16 copy at each call */
        e->src_plain = e->md[MD_SRC];
        s = dnnl_memory_desc_init_by_tag(&e->md[MD_SRC], nd, ad + o, dnnl_bf16, nd == 2 ? dnnl_ab : dnnl_abc);
        if (s != dnnl_success)
            return dnnl_failed(b->rt, b->what, "bf16 source descriptor", s);
    }
    if (matmul_primitive(b, p) != 0)
        return -1;
    if (b->whole && e->pack && !b->bf16 && !e->md[MD_WEI].format_desc.blocking.inner_nblks) {
        /* a column part for which oneDNN wants a dense, unblocked layout
         * (AVX2's gemm:jit): no panels of a whole copy to share, and a
         * dense copy per part would be the weights once more, so the part
         * runs on the caller's columns as they are */
        dnnl_primitive_destroy(e->prim);
        e->prim = NULL;
        e->md[MD_WEI] = e->wei_plain;
        e->pack = 0;
        e->has[MD_SCRATCH] = 0;
        b->wconst = 0;
        if (matmul_primitive(b, p) != 0)
            return -1;
    }
    if (b->bf16) {
        dnnl_primitive_desc_t rpd;
        s = dnnl_reorder_primitive_desc_create(&rpd, &e->src_plain, engine, &e->md[MD_SRC], engine, NULL);
        if (s == dnnl_success) {
            s = dnnl_primitive_create(&e->cvt, rpd);
            dnnl_primitive_desc_destroy(rpd);
        }
        if (s != dnnl_success)
            return dnnl_failed(b->rt, b->what, "bf16 conversion", s);
    }
    return 0;
}

/* k == 0: C = post(bias) + residual. */
static void matmul_empty(const DiscMatmul *d, void *c)
{
    for (int64_t bt = 0; bt < d->batch; bt++)
        for (int64_t i = 0; i < d->m; i++)
            for (int64_t j = 0; j < d->n; j++) {
                int64_t off = bt * d->c_stride[0] + i * d->c_stride[1] + j * d->c_stride[2];
                float v = apply_post(d->post, d->bias ? load(d->dtype, d->bias, j) : 0);
                if (d->residual)
                    v += load(d->dtype, d->residual, off);
                store(d->dtype, c, off, v);
            }
}

static int matmul(DiscRt *rt, const DiscMatmul *d, const void *a, const void *b, void *c, const Whole *whole);

/* A matmul split into parts over our pool: by batch, rows or columns.
 * Columns go in whole panels of PANEL (oneDNN's packed weights hold
 * 64-column panels), and only below SPLIT_ROWS_MIN rows: from there the
 * product is compute-bound, and rows (each part reading all of B) measured
 * the same as oneDNN's own team on BERT-base at 4x128 while columns were
 * 2.5% slower; at 2x64 (128 rows) columns were 8% faster than rows. */
enum { SPLIT_BATCH, SPLIT_ROWS, SPLIT_COLS };
enum { PANEL = 64, SPLIT_ROWS_MIN = 256 };

typedef struct Split {
    DiscRt *rt;
    DiscMatmul d;              /* the whole (normalised) call */
    const char *a, *b;
    char *c;
    int how;                   /* SPLIT_* */
    int64_t per;               /* batches, rows or columns per part */
} Split;

/* Columns [j0, j0 + w) of a batch-1 f32 call: oneDNN's brgemm wants a
 * dense result, so the part goes to run memory and is copied (with the
 * residual added) into its columns of C. */
static int split_cols(Split *sp, int64_t j0, int64_t w)
{
    size_t es = sizeof(float);
    DiscMatmul one = sp->d;
    one.n = w;
    if (one.bias)
        one.bias = (const char *)one.bias + j0 * (int64_t)es;
    one.residual = NULL;
    one.c_stride[1] = w;
    one.c_stride[2] = 1;
    int64_t m = one.m;
    float *t = disc_rt_alloc(sp->rt, m * w * (int64_t)es);
    Whole whole = {.b = sp->b, .j0 = j0, .n = sp->d.n, .stride = {sp->d.b_stride[1], sp->d.b_stride[2]}};
    if (!t || matmul(sp->rt, &one, sp->a, sp->b + j0 * one.b_stride[2] * (int64_t)es, t, &whole) != 0)
        return -1;
    const int64_t *cs = sp->d.c_stride;
    for (int64_t r = 0; r < m; r++) {
        float *dst = (float *)sp->c + r * cs[1] + j0 * cs[2];
        const float *src = t + r * w;
        if (sp->d.residual) {
            const float *res = (const float *)sp->d.residual + r * cs[1] + j0 * cs[2];
            for (int64_t j = 0; j < w; j++)
                dst[j * cs[2]] = src[j] + res[j * cs[2]];
        } else if (cs[2] == 1) {
            memcpy(dst, src, (size_t)w * es);
        } else {
            for (int64_t j = 0; j < w; j++)
                dst[j * cs[2]] = src[j];
        }
    }
    return 0;
}

static void split_part(int64_t lo, int64_t hi, void *args)
{
    Split *sp = args;
    int64_t es = (int64_t)dtype_size((DType)sp->d.dtype);
    const DiscMatmul *d = &sp->d;
    int64_t total = sp->how == SPLIT_BATCH ? d->batch : sp->how == SPLIT_ROWS ? d->m : d->n;
    for (int64_t i = lo; i < hi; i++) {
        int64_t x0 = i * sp->per, x1 = x0 + sp->per < total ? x0 + sp->per : total;
        int rc;
        if (sp->how == SPLIT_COLS) {
            rc = split_cols(sp, x0, x1 - x0);
        } else {
            int ax = sp->how == SPLIT_BATCH ? 0 : 1;
            DiscMatmul one = *d;
            if (ax == 0)
                one.batch = x1 - x0;
            else
                one.m = x1 - x0;
            int64_t bo = ax == 0 ? x0 * d->b_stride[0] * es : 0;
            if (one.residual)
                one.residual = (const char *)one.residual + x0 * d->c_stride[ax] * es;
            rc = disc_rt_matmul(sp->rt, &one, sp->a + x0 * d->a_stride[ax] * es, sp->b + bo,
                                sp->c + x0 * d->c_stride[ax] * es);
        }
        if (rc != 0)
            return; /* the error is in rt */
    }
}

/* Runs a matmul as parts on our pool, each part a oneDNN call on one
 * thread, instead of on oneDNN's OpenMP team; 0 when it is not split (one
 * thread, a call from inside a pool job, a call too small to share). See
 * "Threads" at the top for why and what was measured. */
static int split_matmul(DiscRt *rt, const DiscMatmul *d, const Mm *p, const void *a, const void *b, void *c)
{
    int off = !disc_env()->split;
    int nthr = disc_rt_threads(rt);
    if (off || nthr < 2 || disc_rt_pool_busy())
        return 0;
    double flop = 2.0 * (double)p->batch * (double)p->m * (double)p->n * (double)p->k;
    double wbytes = (double)(p->bbatch ? p->batch : 1) * (double)p->k * (double)p->n * 4;
    if (flop < SMALL_FLOP && wbytes <= SMALL_BYTES)
        return 0;
    Split sp = {.rt = rt, .d = *d, .a = a, .b = b, .c = c};
    sp.d.batch = p->batch;
    sp.d.m = p->m;
    for (int i = 0; i < 3; i++) {
        sp.d.a_stride[i] = p->abatch ? p->as[i] : i ? p->as[i] : 0;
        sp.d.b_stride[i] = p->bbatch ? p->bs[i] : i ? p->bs[i] : 0;
        sp.d.c_stride[i] = p->cs[i];
    }
    int64_t total, unit = 1;
    if (p->batch >= nthr) {
        sp.how = SPLIT_BATCH;
        total = p->batch;
    } else if (p->batch > 1) {
        return 0;
    } else if (p->m >= SPLIT_ROWS_MIN) {
        sp.how = SPLIT_ROWS;
        total = p->m;
    } else if (d->weights_const && d->dtype == DT_F32 && p->n >= (int64_t)nthr * PANEL) {
        sp.how = SPLIT_COLS;
        total = p->n;
        unit = PANEL;
    } else {
        return 0;
    }
    if (total < nthr)
        return 0;
    int64_t units = (total + unit - 1) / unit;
    sp.per = (units + nthr - 1) / nthr * unit;
    int64_t parts = (total + sp.per - 1) / sp.per;
    thread_how = NULL;
    disc_rt_parallel_for(rt, split_part, &sp, parts, 1);
    char how[128];
    static const char *const axis[] = {"batch", "row", "column"};
    snprintf(how, sizeof how, "%s, %lld %s parts", thread_how ? thread_how : "oneDNN", (long long)parts,
             axis[sp.how]);
    disc_rt_set_call_how(rt, intern(how));
    return 1;
}

static int matmul(DiscRt *rt, const DiscMatmul *d, const void *a, const void *b, void *c, const Whole *whole)
{
    static const char what[] = "matmul";
    if (check_dtype(rt, what, d->dtype) || check_post(rt, what, d->post))
        return -1;
    if (d->batch < 0 || d->m < 0 || d->n < 0 || d->k < 0) {
        disc_rt_fail(rt, "matmul: negative dims (batch %lld, m %lld, n %lld, k %lld)", (long long)d->batch,
                     (long long)d->m, (long long)d->n, (long long)d->k);
        return -1;
    }
    for (int i = 0; i < 3; i++)
        if (d->a_stride[i] < 0 || d->b_stride[i] < 0 || d->c_stride[i] < 0) {
            disc_rt_fail(rt, "matmul: negative strides");
            return -1;
        }
    if (d->batch > 1 && d->c_stride[0] == 0) {
        disc_rt_fail(rt, "matmul: the result cannot be broadcast over the batch (c_stride[0] = 0)");
        return -1;
    }
    if (d->batch == 0 || d->m == 0 || d->n == 0)
        return 0;
    if (!a || !b || !c) {
        disc_rt_fail(rt, "matmul: a NULL operand");
        return -1;
    }
    if (d->k == 0) {
        matmul_empty(d, c);
        return 0;
    }
    Mm p = {.dtype = d->dtype, .nd = 3, .batch = d->batch, .m = d->m, .n = d->n, .k = d->k,
            .abatch = d->batch > 1 && d->a_stride[0] != 0, .bbatch = d->batch > 1 && d->b_stride[0] != 0,
            .bias = d->bias != NULL, .post = d->post, .residual = d->residual != NULL};
    memcpy(p.as, d->a_stride, sizeof p.as);
    memcpy(p.bs, d->b_stride, sizeof p.bs);
    memcpy(p.cs, d->c_stride, sizeof p.cs);
    /* B shared by the batch and A, C row-contiguous across it: one matmul
     * of batch * m rows */
    if (p.batch > 1 && !p.bbatch && p.abatch && p.as[0] == p.m * p.as[1] && p.cs[0] == p.m * p.cs[1]) {
        p.m *= p.batch;
        p.batch = 1;
        p.abatch = 0;
    }
    if (p.batch > 1 && !p.abatch && !p.bbatch) {
        /* A and B both shared: the same product for every batch of C */
        size_t es = dtype_size((DType)d->dtype);
        DiscMatmul one = *d;
        one.batch = 1;
        for (int64_t bt = 0; bt < d->batch; bt++) {
            int64_t off = bt * d->c_stride[0];
            if (d->residual)
                one.residual = (const char *)d->residual + off * (int64_t)es;
            if (disc_rt_matmul(rt, &one, a, b, (char *)c + off * (int64_t)es) != 0)
                return -1;
        }
        return 0;
    }
    if (split_matmul(rt, d, &p, a, b, c))
        return disc_rt_error(rt) ? -1 : 0;
    if (p.batch == 1)
        p.nd = 2;
    int64_t key[KEY_LEN] = {1, p.dtype, p.nd, p.batch, p.m, p.n, p.k, p.abatch, p.bbatch, p.bias, p.post,
                            p.residual};
    memcpy(key + 12, p.as, sizeof p.as);
    memcpy(key + 15, p.bs, sizeof p.bs);
    memcpy(key + 18, p.cs, sizeof p.cs);
    Build bl = {.rt = rt, .what = what, .post = d->post, .residual = p.residual, .wconst = d->weights_const != 0,
                .bf16 = d->dtype == DT_F32,
                .flop = 2.0 * (double)p.batch * (double)p.m * (double)p.n * (double)p.k,
                .wbytes = (double)(p.bbatch ? p.batch : 1) * (double)p.k * (double)p.n *
                          (double)dtype_size((DType)p.dtype),
                .whole = whole};
    void *ptr[NMD] = {(void *)a, (void *)b, (void *)d->bias, c, (void *)d->residual, NULL};
    return run_cached(&bl, key, make_matmul, &p, ptr);
}

int disc_rt_matmul(DiscRt *rt, const DiscMatmul *d, const void *a, const void *b, void *c)
{
    return matmul(rt, d, a, b, c, NULL);
}

int disc_rt_matmul_packs_weights(DiscRt *rt, const DiscMatmul *d)
{
    if (d->batch != 1 || d->m < 1 || d->n < 1 || d->k < 1 || check_dtype(rt, "matmul", d->dtype) ||
        check_post(rt, "matmul", d->post) || !get_engine(rt))
        return disc_rt_error(rt) ? -1 : 0;
    Mm p = {.dtype = d->dtype, .nd = 2, .batch = 1, .m = d->m, .n = d->n, .k = d->k, .bias = d->bias != NULL,
            .post = d->post, .residual = d->residual != NULL};
    memcpy(p.as, d->a_stride, sizeof p.as);
    memcpy(p.bs, d->b_stride, sizeof p.bs);
    memcpy(p.cs, d->c_stride, sizeof p.cs);
    Entry *e = calloc(1, sizeof *e);
    if (!e) {
        disc_rt_fail(rt, "matmul: out of memory");
        return -1;
    }
    Build bl = {.rt = rt, .what = "matmul", .e = e, .post = d->post, .residual = p.residual, .wconst = 1};
    int old = team_set(1);
    int rc = make_matmul(&bl, &p);
    team_restore(old);
    int pack = e->pack;
    entry_destroy(e);
    return rc != 0 ? -1 : pack;
}

/* Whether copies of constant weights may be kept: not where the cache is
 * off (capacity 0), which keeps none. */
static bool packing_on(void)
{
    pthread_mutex_lock(&cache.mu);
    bool on = cache.capacity > 0;
    pthread_mutex_unlock(&cache.mu);
    return on;
}

/* ---- skinny matmul ---------------------------------------------------------- */

/* The packed copy the panel kernel reads: oneDNN's BA16a<panel>b layout
 * of the k x n weights (panels of `panel` columns, one after another, each
 * holding rows 0..kp-1, kp = k rounded up to 16, zero past k and n). At 64
 * columns it is the layout oneDNN's AVX-512 matmul picks for constant f32
 * weights, so both share one copy. NULL (and no error) when this oneDNN
 * lays it out otherwise. */
static Packed *panels_get(DiscRt *rt, const DiscMatmul *d, const void *b, int panel, int64_t *kp)
{
    dnnl_memory_desc_t plain, md;
    dnnl_dims_t dims = {d->k, d->n}, st = {d->b_stride[1], d->b_stride[2]};
    dnnl_format_tag_t tag = panel == DISC_PANEL ? dnnl_BA16a64b : dnnl_BA16a16b;
    if (dnnl_memory_desc_init_by_strides(&plain, 2, dims, dnnl_f32, st) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&md, 2, dims, dnnl_f32, tag) != dnnl_success)
        return NULL;
    const dnnl_blocking_desc_t *bl = &md.format_desc.blocking;
    *kp = md.padded_dims[0];
    if (md.format_kind != dnnl_blocked || bl->strides[0] != 16 * panel || bl->strides[1] != *kp * panel ||
        md.padded_dims[1] % panel)
        return NULL;
    return packed_get(rt, "matmul", &plain, &md, b, disc_rt_threads(rt));
}

int64_t disc_rt_skinny_max_m(int panel)
{
    int64_t env = disc_env()->skinny_m;
    return env >= 0 ? env : panel == DISC_PANEL_NARROW ? DISC_SKINNY_M_NARROW : DISC_SKINNY_M;
}

int disc_rt_matmul_skinny(DiscRt *rt, const DiscMatmul *d, const void *a, const void *b, void *c,
                          DiscKernelFn *fn, int panel)
{
    if (fn && panel != DISC_PANEL && panel != DISC_PANEL_NARROW) {
        disc_rt_fail(rt, "skinny matmul: a kernel for panels of %d columns (the runtime knows %d and %d)", panel,
                     DISC_PANEL, DISC_PANEL_NARROW);
        return -1;
    }
    int64_t max_m = disc_rt_skinny_max_m(panel);
    bool tiny = disc_env()->skinny_m < 0 && d->m <= DISC_SKINNY_M_NARROW && d->n <= DISC_SKINNY_TINY &&
                d->k <= DISC_SKINNY_TINY && d->m * d->n * d->k <= DISC_SKINNY_TINY;
    bool fits = fn && d->dtype == DT_F32 && d->weights_const && d->batch == 1 && d->m >= 1 &&
                (d->m <= max_m || tiny) && d->n > 0 && d->k > 0 && a && b && c && d->a_stride[1] >= d->k &&
                d->a_stride[2] == 1 && d->b_stride[1] >= 0 && d->b_stride[2] >= 0 && d->c_stride[1] >= d->n &&
                d->c_stride[2] == 1 && d->post >= 0 && d->post < DISC_POST_COUNT &&
                d->residual != c && /* C is written before the epilogue reads the residual */
                /* the parts are panels: past a few rows, enough of them for every thread */
                (d->m <= DISC_SKINNY_M || tiny || (d->n + panel - 1) / panel >= 4 * (int64_t)disc_rt_threads(rt));
    int64_t kp = 0;
    fits = fits && packing_on();
    Packed *k = fits && get_engine(rt) ? panels_get(rt, d, b, panel, &kp) : NULL;
    if (!k)
        return disc_rt_error(rt) ? -1 : disc_rt_matmul(rt, d, a, b, c);
    int64_t f[DISC_SK_NFIELDS] = {
        [DISC_SK_A] = (int64_t)(uintptr_t)a, [DISC_SK_B] = (int64_t)(uintptr_t)k->data,
        [DISC_SK_BIAS] = (int64_t)(uintptr_t)d->bias, [DISC_SK_RES] = (int64_t)(uintptr_t)d->residual,
        [DISC_SK_C] = (int64_t)(uintptr_t)c, [DISC_SK_M] = d->m, [DISC_SK_N] = d->n, [DISC_SK_K] = d->k,
        [DISC_SK_LDA] = d->a_stride[1], [DISC_SK_KP] = kp, [DISC_SK_LDC] = d->c_stride[1],
    };
    disc_rt_parallel_for(rt, fn, f, (d->n + panel - 1) / panel, 1);
    disc_rt_set_call_how(rt, panel == DISC_PANEL ? "skinny kernel, 64-column panels" : "skinny kernel, 16-column panels");
    packed_release(k);
    return 0;
}

/* ---- convolution ------------------------------------------------------------ */

typedef struct Cv {
    const DiscConv *d;
    int64_t hi[3];             /* the high padding oneDNN is given */
} Cv;

static int conv_build(Build *b, const Cv *cv, int keep_nhwc, dnnl_alg_kind_t alg)
{
    const DiscConv *d = cv->d;
    dnnl_data_type_t dt = dt_of(d->dtype);
    int nsp = d->nsp, nd = 2 + nsp;
    int64_t g = d->groups, K = 1;
    dnnl_dims_t xd = {d->n, d->c}, yd = {d->n, d->o}, wd, ws, st, dil, lo, hi, bd = {d->o};
    for (int i = 0; i < nsp; i++) {
        xd[2 + i] = d->in[i];
        yd[2 + i] = d->out[i];
        st[i] = d->stride[i];
        dil[i] = d->dilation[i] - 1;
        lo[i] = d->pad_lo[i];
        hi[i] = cv->hi[i];
        K *= d->k[i];
    }
    /* weights, logically [g][o/g][c/g][k...] (no g axis when groups == 1) */
    int gx = g > 1, wnd = nd + gx;
    int64_t og = d->o / g, cg = d->c / g;
    if (gx)
        wd[0] = g;
    wd[gx] = og;
    wd[gx + 1] = cg;
    for (int i = 0; i < nsp; i++)
        wd[gx + 2 + i] = d->k[i];
    dense(wnd, wd, ws);
    if (d->transpose) { /* stored [c][o/g][k...] = [g][c/g][o/g][k...] */
        ws[gx] = K;
        ws[gx + 1] = og * K;
        if (gx)
            ws[0] = cg * og * K;
    }
    int lay = d->layout;
    if (md_image(b, MD_SRC, nd, xd, dt, lay & DISC_NHWC_SRC) || md_strided(b, MD_WEI, wnd, wd, dt, ws) ||
        md_weights_any(b) || md_image(b, MD_DST, nd, yd, dt, lay & DISC_NHWC_DST) ||
        (d->bias && md_dense(b, MD_BIAS, 1, bd, dt)) ||
        (d->residual && md_image(b, MD_RES, nd, yd, dt, lay & DISC_NHWC_RES)))
        return -1;
    if (!keep_nhwc)
        lay = 0;
    /* (kept blocked, the result's image is kept too: plain, for oneDNN's
     * first-convolution kernels, not reordered into padded blocks) */
    if (b->any && ((lay & DISC_NHWC_SRC || lay >> DISC_BLOCK_SHIFT ? keep(b, MD_SRC, &b->e->src_plain)
                                                                   : md_any(b, MD_SRC, &b->e->src_plain)) ||
                   (lay & DISC_NHWC_DST ? keep(b, MD_DST, &b->e->dst_plain) : md_any(b, MD_DST, &b->e->dst_plain)) ||
                   (d->residual && (lay & DISC_NHWC_RES ? keep(b, MD_RES, &b->e->res_plain)
                                                         : md_any(b, MD_RES, &b->e->res_plain)))))
        return -1;
    const dnnl_memory_desc_t *bias = d->bias ? &b->e->md[MD_BIAS] : NULL;
    dnnl_status_t s;
    if (d->transpose) {
        dnnl_deconvolution_desc_t desc;
        s = dnnl_dilated_deconvolution_forward_desc_init(&desc, dnnl_forward_inference, dnnl_deconvolution_direct,
                                                         &b->e->md[MD_SRC], &b->e->md[MD_WEI], bias,
                                                         &b->e->md[MD_DST], st, dil, lo, hi);
        if (s == dnnl_success)
            return make_primitive(b, &desc);
    } else {
        dnnl_convolution_desc_t desc;
        s = dnnl_dilated_convolution_forward_desc_init(&desc, dnnl_forward_inference, alg,
                                                       &b->e->md[MD_SRC], &b->e->md[MD_WEI], bias,
                                                       &b->e->md[MD_DST], st, dil, lo, hi);
        if (s == dnnl_success)
            return make_primitive(b, &desc);
    }
    return dnnl_failed(b->rt, b->what, "convolution descriptor", s);
}

/* Whether d may run on oneDNN's Winograd kernels (jit_fp32_wino_2x3 and
 * jit_wino_4x3, AVX-512 only in oneDNN 2.6): a 3 x 3 f32 convolution of
 * stride 1 and one group with constant weights (their transform is made
 * once, with the packed copies). oneDNN takes src and dst only blocked,
 * so channels-last operands are reordered in and out at each call.
 * DISC_WINOGRAD=0 turns it off; =1 takes disc's own F(2x2, 3x3) first. */
static bool conv_wino_onednn(const DiscConv *d)
{
    if (disc_env()->winograd == 0 || d->transpose || d->nsp != 2 || d->groups != 1 || d->dtype != DT_F32 ||
        !d->weights_const || !packing_on())
        return false;
    for (int i = 0; i < 2; i++)
        if (d->k[i] != 3 || d->stride[i] != 1 || d->dilation[i] != 1)
            return false;
    return true;
}

/* Whether oneDNN's Winograd kernel `impl` is worth taking for d over the
 * direct one on nthr threads. F(m x m, 3 x 3) does (m + 2)^2 products of
 * tiles x c x o, one per position of a tile, with a copy of the weights
 * for each: fewer multiplies than the direct 9 per output pixel, but
 * (m + 2)^2 / 9 times the weights to read at every call, and the image
 * reordered into oneDNN's blocked layout and back. Where the images are
 * small against the channels, those reads are the call's time, and more
 * so on more threads (the multiplies divide among them, the memory's
 * bandwidth much less). Costed as multiplies plus WINO_BYTE_COST a byte
 * a thread (about this Xeon's one-thread FMA rate over the bandwidth a
 * call saw in a model), Winograd is taken when it costs under 0.9 of the
 * direct convolution. ResNet-50's 3 x 3 layers in the model, against
 * brgconv (bench/NOTES.md): at one thread taken at 56 x 56 and 28 x 28
 * for batch 1 (1.3-1.6 times faster), and all but 7 x 7 at batch 4
 * (1.5-1.75), left at 14 x 14 and 7 x 7 for batch 1 (level, or 1.3-1.7
 * times slower: 512 x 512 x 16 floats to stream); at two threads taken
 * at batch 4's 28 x 28 only (at 56 x 56 batch 1 the reorders ate the
 * gain, at 14 x 14 batch 4 it ran 1.3-2.3 times slower). */
enum { WINO_BYTE_COST = 25 };
static bool wino_worth(const DiscConv *d, const char *impl, int nthr)
{
    int64_t m = strstr(impl, "2x3") ? 2 : 4, pos = (m + 2) * (m + 2);
    int64_t tiles = d->n * ((d->out[0] + m - 1) / m) * ((d->out[1] + m - 1) / m);
    double c = (double)d->c, o = (double)d->o, pixels = (double)d->n * (double)d->out[0] * (double)d->out[1];
    double bytes = 4.0 * (double)pos * c * o + 8.0 * pixels * (c + o); /* weights; reorders in and out */
    double wino = 2.0 * (double)pos * (double)tiles * c * o + WINO_BYTE_COST * (nthr > 1 ? nthr : 1) * bytes;
    double direct = 2.0 * 9.0 * pixels * c * o;
    return wino < 0.9 * direct;
}

/* A convolution whose input and result are both channels-last runs on
 * them as they are, rather than in layouts of oneDNN's choice (blocked,
 * for some 1x1 convolutions on AVX-512: a reorder in and one out at every
 * call). Where oneDNN has only its reference code for that (an operand of
 * another layout, this ISA), the layouts are left to it after all. Where
 * it has a Winograd kernel for the convolution, that is taken first. */
static int make_conv(Build *b, const void *ctx)
{
    const Cv *cv = ctx;
    int lay = cv->d->layout;
    /* oneDNN names its kernel (2x3 or 4x3) only once built: none is built
     * where neither could be worth it */
    if (conv_wino_onednn(cv->d) && (wino_worth(cv->d, "2x3", b->nthr) || wino_worth(cv->d, "4x3", b->nthr))) {
        b->quiet = 1;
        int rc = conv_build(b, cv, 0, dnnl_convolution_winograd);
        b->quiet = 0;
        if (rc < 0 || (rc == 0 && wino_worth(cv->d, b->e->how, b->nthr)))
            return rc;
        entry_reset(b->e);
    }
    /* a blocked result keeps its layout also from a plain image (oneDNN's
     * first-convolution kernels read nchw into blocks; in its layouts of
     * choice the call reordered the whole result) */
    if (!(lay & DISC_NHWC_DST) || (!(lay & DISC_NHWC_SRC) && !(lay >> DISC_BLOCK_SHIFT)))
        return conv_build(b, cv, 0, dnnl_convolution_direct);
    int rc = conv_build(b, cv, 1, dnnl_convolution_direct);
    if (rc != 0 || !strstr(b->e->how, " ref"))
        return rc;
    entry_reset(b->e);
    return conv_build(b, cv, 0, dnnl_convolution_direct);
}

/* Checks the window parameters of axis i; the dense window extent, or -1. */
static int64_t check_window(DiscRt *rt, const char *what, int i, int64_t k, int64_t stride, int64_t dil,
                            int64_t lo, int64_t hi)
{
    if (k < 1 || stride < 1 || dil < 1 || lo < 0 || hi < 0) {
        disc_rt_fail(rt,
                     "%s: spatial axis %d: window %lld, stride %lld, dilation %lld must be positive, "
                     "pads %lld, %lld not negative",
                     what, i, (long long)k, (long long)stride, (long long)dil, (long long)lo, (long long)hi);
        return -1;
    }
    return dil * (k - 1) + 1;
}

/* Windows that fit in a padded input `span` elements longer than one
 * window, counted as the shape rules and the interpreter count them
 * (floor division): 0 for a window longer than the input by at most a
 * stride (an empty result), negative (an error) beyond. */
static int64_t window_count(int64_t span, int64_t stride)
{
    return (span >= 0 ? span / stride : -((-span + stride - 1) / stride)) + 1;
}

/* A 2-D convolution over H x 1 images with an H x 1 window (a 1-D
 * convolution as exporters write it) turned to 1 x H: the same memory in
 * every layout (an axis of extent 1 moves nothing), and oneDNN's kernels
 * block the output's width, not its height. magika's [7, 256, 512, 1]
 * conv (kernel 5x1, 512 outputs) ran at 14 GFLOP/s so on AVX-512 (brgconv,
 * one thread, bench/NOTES.md). */
static const DiscConv *conv_turned(const DiscConv *d, DiscConv *t)
{
    if (d->nsp != 2 || d->in[1] != 1 || d->k[1] != 1 || d->out[1] != 1 || d->in[0] == 1 || d->pad_lo[1] ||
        d->pad_hi[1])
        return d;
    *t = *d;
    int64_t *ax[] = {t->in, t->k, t->out, t->stride, t->dilation, t->pad_lo, t->pad_hi};
    for (size_t i = 0; i < sizeof ax / sizeof ax[0]; i++) {
        int64_t v = ax[i][0];
        ax[i][0] = ax[i][1];
        ax[i][1] = v;
    }
    return t;
}

/* A 1 x 1 convolution with a stride and no padding reads every stride-th
 * pixel: copied out first (a quarter of the input at stride 2), the rest
 * is a convolution of stride 1, which oneDNN runs on its 1 x 1 kernels.
 * On odd sizes oneDNN 2.6 ran the strided one on its generic AVX2 kernel:
 * ResNet-50's downsampling convolutions at 2 x 3 x 160 x 200 (10 x 13 to
 * 5 x 7, 1024 to 2048 channels) at about 9 GFLOP/s (bench/NOTES.md).
 * Returns 1 when it ran the call (0 or -1 in *rc), 0 when the call is not
 * one for it. */
static int conv_subsampled(DiscRt *rt, const DiscConv *d, const void *x, const void *w, void *y, int *rc)
{
    bool strided = false;
    if (d->transpose || d->layout >> DISC_BLOCK_SHIFT) /* blocked: oneDNN's own 1 x 1 kernels take the stride */
        return 0;
    for (int i = 0; i < d->nsp; i++) {
        if (d->k[i] != 1 || d->pad_lo[i] || d->pad_hi[i])
            return 0;
        strided |= d->stride[i] > 1;
    }
    if (!strided)
        return 0;
    size_t es = dtype_size((DType)d->dtype);
    int64_t pix = 1, in_pix = 1; /* output pixels, input pixels per image */
    for (int i = 0; i < d->nsp; i++) {
        pix *= d->out[i];
        in_pix *= d->in[i];
    }
    char *sub = disc_rt_alloc(rt, d->n * d->c * pix * (int64_t)es);
    int64_t *at = disc_rt_alloc(rt, pix * (int64_t)sizeof *at); /* output pixel -> its input pixel */
    if (!sub || !at) {
        *rc = -1;
        return 1;
    }
    for (int64_t p = 0; p < pix; p++) {
        int64_t q = p, a = 0, scale = 1;
        for (int i = d->nsp - 1; i >= 0; i--) {
            a += q % d->out[i] * d->stride[i] * scale;
            q /= d->out[i];
            scale *= d->in[i];
        }
        at[p] = a;
    }
    const char *src = x;
    if (d->layout & DISC_NHWC_SRC) { /* a pixel's channels are contiguous */
        size_t row = (size_t)d->c * es;
        for (int64_t b = 0; b < d->n; b++)
            for (int64_t p = 0; p < pix; p++)
                memcpy(sub + (size_t)(b * pix + p) * row, src + (size_t)(b * in_pix + at[p]) * row, row);
    } else if (es == 4) {
        for (int64_t bc = 0; bc < d->n * d->c; bc++) {
            const uint32_t *from = (const uint32_t *)src + bc * in_pix;
            uint32_t *to = (uint32_t *)sub + bc * pix;
            for (int64_t p = 0; p < pix; p++)
                to[p] = from[at[p]];
        }
    } else {
        for (int64_t bc = 0; bc < d->n * d->c; bc++)
            for (int64_t p = 0; p < pix; p++)
                memcpy(sub + (size_t)(bc * pix + p) * es, src + (size_t)(bc * in_pix + at[p]) * es, es);
    }
    DiscConv one = *d;
    for (int i = 0; i < d->nsp; i++) {
        one.in[i] = d->out[i];
        one.stride[i] = 1;
    }
    *rc = disc_rt_conv(rt, &one, sub, w, y);
    return 1;
}

/* ---- 3 x 3 convolutions by Winograd's F(2x2, 3x3) ----------------------------
 *
 * Each 2 x 2 block of outputs ("tile") comes from a 4 x 4 patch d of the
 * input: Y = A' [(G g G') . (B' d B)] A, where the product . is
 * elementwise over the 16 positions, so for all channels at once the
 * convolution is 16 independent matmuls, one per position p:
 *
 *     M[p] (tiles x O) = V[p] (tiles x C) x U[p] (C x O)
 *
 * with V = B' d B of every tile and channel (the input transform), U =
 * G g G' of every weight (made once per weight tensor, kept with the
 * packed copies), and the outputs A' M A (the output transform, with the
 * conv's bias, activation and residual). 2.25 times fewer multiplies than
 * the direct convolution, in matmuls of C-long rows. oneDNN 2.6 has no
 * Winograd kernel for AVX2, and its direct jit:avx2 kernel ran ResNet-50's
 * 3 x 3 convolutions at 55-65% of the FMA peak (bench/NOTES.md).
 *
 *     B' = [1  0 -1  0]    G = [ 1    0    0 ]    A' = [1  1  1  0]
 *          [0  1  1  0]        [1/2  1/2  1/2]         [0  1 -1 -1]
 *          [0 -1  1  0]        [1/2 -1/2  1/2]
 *          [0  1  0 -1]        [ 0    0    1 ]
 */
enum {
    WINO_P = 16,               /* positions of a 4 x 4 patch: the products */
    WINO_CHUNK = 64 << 20,     /* bytes of V and M at most (tiles in chunks) */
};

typedef struct Wino {
    const DiscConv *d;
    int64_t th, tw, tiles;     /* tiles down, across, in all (n th tw) */
    int64_t t0, nt;            /* the chunk of tiles [t0, t0 + nt) in v and m */
    const float *x;
    float *v, *m;              /* [16][nt][c], [16][nt][o] */
    float *y;
    const float *zeros;        /* c zeros: the pixels outside the image */
    DiscRt *rt;
} Wino;

/* U[p][c][o] from the weights [o][c][3][3]. */
static void wino_weights(const void *src, void *dst, const void *ctx)
{
    const DiscConv *d = ctx;
    const float *g = src;
    float *u = dst;
    int64_t c = d->c, o = d->o;
    for (int64_t oc = 0; oc < o; oc++)
        for (int64_t ic = 0; ic < c; ic++) {
            const float *k = g + (oc * c + ic) * 9;
            float t[4][3]; /* G g */
            for (int j = 0; j < 3; j++) {
                t[0][j] = k[j];
                t[1][j] = 0.5f * (k[j] + k[3 + j] + k[6 + j]);
                t[2][j] = 0.5f * (k[j] - k[3 + j] + k[6 + j]);
                t[3][j] = k[6 + j];
            }
            for (int i = 0; i < 4; i++) { /* (G g) G' */
                float r[4] = {t[i][0], 0.5f * (t[i][0] + t[i][1] + t[i][2]), 0.5f * (t[i][0] - t[i][1] + t[i][2]),
                              t[i][2]};
                for (int j = 0; j < 4; j++)
                    u[((int64_t)(i * 4 + j) * c + ic) * o + oc] = r[j];
            }
        }
}

/* Eight floats as one vector (GCC's vector extension: AVX registers in
 * the avx2 versions below, two SSE ones in the baseline); loads and stores
 * through memcpy, which compiles to unaligned moves; macros, as a
 * function returning a V8 would change the ABI between the clones). */
typedef float V8 __attribute__((vector_size(32)));
#define V8_LOAD(p)                       \
    ({                                   \
        V8 v8_;                          \
        memcpy(&v8_, (p), sizeof v8_);   \
        v8_;                             \
    })
#define V8_STORE(p, v)                   \
    do {                                 \
        V8 v8_ = (v);                    \
        memcpy((p), &v8_, sizeof v8_);   \
    } while (0)

/* B' d B of 16 rows of channels (src[i*4+j]: the patch's pixel i, j; a
 * row of zeros outside the image) into dst[k][ch] (k = i*4+j). */
#define WINO_IN_STEP(T, LOAD, STORE, ch)                                                   \
    do {                                                                                   \
        T x[16], e[16];                                                                    \
        for (int q = 0; q < 16; q++)                                                       \
            x[q] = LOAD(src[q] + (ch));                                                      \
        for (int j = 0; j < 4; j++) {                                                      \
            e[0 + j] = x[0 + j] - x[8 + j];                                                \
            e[4 + j] = x[4 + j] + x[8 + j];                                                \
            e[8 + j] = x[8 + j] - x[4 + j];                                                \
            e[12 + j] = x[4 + j] - x[12 + j];                                              \
        }                                                                                  \
        for (int i = 0; i < 4; i++) {                                                      \
            STORE(dst[i * 4 + 0] + (ch), e[i * 4 + 0] - e[i * 4 + 2]);                     \
            STORE(dst[i * 4 + 1] + (ch), e[i * 4 + 1] + e[i * 4 + 2]);                     \
            STORE(dst[i * 4 + 2] + (ch), e[i * 4 + 2] - e[i * 4 + 1]);                     \
            STORE(dst[i * 4 + 3] + (ch), e[i * 4 + 1] - e[i * 4 + 3]);                     \
        }                                                                                  \
    } while (0)
#define F_LOAD(p) (*(p))
#define F_STORE(p, v) (*(p) = (v))

/* A transform's rows: STEP over n channels, eight at a time, then one at
 * a time; built for AVX2 and for the baseline, the one this CPU runs
 * chosen at each call by disc_rt_vector_bits (not target_clones: its ifunc resolver runs before
 * ThreadSanitizer's runtime is up and crashed `make tsan`). */
#define WINO_ROWS_BODY(STEP)                                                                               \
    {                                                                                                      \
        int64_t ch = 0;                                                                                    \
        for (; ch + 8 <= n; ch += 8)                                                                       \
            STEP(V8, V8_LOAD, V8_STORE, ch);                                                               \
        for (; ch < n; ch++)                                                                               \
            STEP(float, F_LOAD, F_STORE, ch);                                                              \
    }
#define WINO_ROWS(name, STEP)                                                                              \
    __attribute__((target("avx2"))) static void name##_avx2(const float *const *src, float *const *dst,     \
                                                             int64_t n) WINO_ROWS_BODY(STEP)               \
    static void name##_base(const float *const *src, float *const *dst, int64_t n) WINO_ROWS_BODY(STEP)    \
    static void name(const float *const *src, float *const *dst, int64_t n)                                \
    {                                                                                                      \
        if (disc_rt_vector_bits() >= 256)                                                                  \
            name##_avx2(src, dst, n);                                                                      \
        else                                                                                               \
            name##_base(src, dst, n);                                                                      \
    }
WINO_ROWS(wino_in_rows, WINO_IN_STEP)

/* The input transform of the chunk's tiles [lo, hi): V[p][tile][c]. */
static void wino_in(int64_t lo, int64_t hi, void *args)
{
    const Wino *w = args;
    const DiscConv *d = w->d;
    int64_t c = d->c, ih = d->in[0], iw = d->in[1];
    for (int64_t q = lo; q < hi; q++) {
        int64_t t = w->t0 + q, n = t / (w->th * w->tw), ty = t / w->tw % w->th, tx = t % w->tw;
        int64_t y0 = 2 * ty - d->pad_lo[0], x0 = 2 * tx - d->pad_lo[1];
        const float *px[16];
        float *out[16];
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++) {
                int64_t yy = y0 + i, xx = x0 + j;
                px[i * 4 + j] = yy >= 0 && yy < ih && xx >= 0 && xx < iw ? w->x + ((n * ih + yy) * iw + xx) * c
                                                                          : w->zeros;
                out[i * 4 + j] = w->v + ((int64_t)(i * 4 + j) * w->nt + q) * c;
            }
        wino_in_rows(px, out, c);
    }
}

/* A' M A of 16 rows of channels src[k] (k = i*4+j) into the 2 x 2
 * results dst[i*2+j]. */
#define WINO_OUT_STEP(T, LOAD, STORE, oc)                                                  \
    do {                                                                                   \
        T s[8];                                                                            \
        for (int j = 0; j < 4; j++) {                                                      \
            T m0 = LOAD(src[0 + j] + (oc)), m1 = LOAD(src[4 + j] + (oc));                      \
            T m2 = LOAD(src[8 + j] + (oc)), m3 = LOAD(src[12 + j] + (oc));                     \
            s[j] = m0 + m1 + m2;                                                           \
            s[4 + j] = m1 - m2 - m3;                                                       \
        }                                                                                  \
        for (int i = 0; i < 2; i++) {                                                      \
            STORE(dst[i * 2 + 0] + (oc), s[i * 4 + 0] + s[i * 4 + 1] + s[i * 4 + 2]);        \
            STORE(dst[i * 2 + 1] + (oc), s[i * 4 + 1] - s[i * 4 + 2] - s[i * 4 + 3]);        \
        }                                                                                  \
    } while (0)

WINO_ROWS(wino_out_rows, WINO_OUT_STEP)

/* The output transform of the chunk's tiles [lo, hi), with the conv's
 * epilogue. */
static void wino_out(int64_t lo, int64_t hi, void *args)
{
    const Wino *w = args;
    const DiscConv *d = w->d;
    int64_t o = d->o, oh = d->out[0], ow = d->out[1];
    const float *bias = d->bias, *res = d->residual;
    float *edge = NULL; /* 4 x o: the results of a tile that passes the output's edge */
    for (int64_t q = lo; q < hi; q++) {
        int64_t t = w->t0 + q, n = t / (w->th * w->tw), ty = t / w->tw % w->th, tx = t % w->tw;
        const float *m[16];
        for (int k = 0; k < 16; k++)
            m[k] = w->m + ((int64_t)k * w->nt + q) * o;
        float *r[4];
        bool whole = 2 * ty + 1 < oh && 2 * tx + 1 < ow;
        if (!whole && !edge && !(edge = malloc((size_t)o * 4 * sizeof *edge))) {
            disc_rt_fail(w->rt, "conv: out of memory");
            return;
        }
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++) {
                int64_t at = ((n * oh + 2 * ty + i) * ow + 2 * tx + j) * o;
                r[i * 2 + j] = whole ? w->y + at : edge + (i * 2 + j) * o;
            }
        wino_out_rows(m, r, o);
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++) {
                int64_t yy = 2 * ty + i, xx = 2 * tx + j;
                if (yy >= oh || xx >= ow)
                    continue;
                float *dst = w->y + ((n * oh + yy) * ow + xx) * o, *src = r[i * 2 + j];
                const float *rp = res ? res + ((n * oh + yy) * ow + xx) * o : NULL;
                if (!bias && d->post == DISC_POST_NONE && !rp && src == dst)
                    continue;
                for (int64_t oc = 0; oc < o; oc++) {
                    float v = src[oc] + (bias ? bias[oc] : 0);
                    if (d->post == DISC_POST_RELU)
                        v = v > 0 ? v : 0;
                    else if (d->post != DISC_POST_NONE)
                        v = apply_post(d->post, v);
                    if (rp) {
                        v += rp[oc];
                        if (d->post_res == DISC_POST_RELU)
                            v = v > 0 ? v : 0;
                        else if (d->post_res != DISC_POST_NONE)
                            v = apply_post(d->post_res, v);
                    }
                    dst[oc] = v;
                }
            }
    }
    free(edge);
}

/* Whether 3 x 3 convolutions take the Winograd path: DISC_WINOGRAD=0 never,
 * =1 always; by default where oneDNN runs at AVX2 or below (its direct
 * kernel there reached 55-65% of the FMA peak; ResNet-50's 3 x 3 layers
 * ran 1.4-2.2 times faster by Winograd on an AVX2 EPYC, bench/NOTES.md).
 * On AVX-512 it was level with brgconv on ResNet-50, and oneDNN's own
 * Winograd kernels (conv_wino_onednn) are faster there. */
static bool wino_enabled(void)
{
    int env = disc_env()->winograd;
    if (env >= 0)
        return env == 1;
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    return isa == dnnl_cpu_isa_avx2 || isa == dnnl_cpu_isa_avx2_vnni || isa == dnnl_cpu_isa_avx ||
           isa == dnnl_cpu_isa_sse41;
}

/* What both rewrites of a convolution (Winograd, copied windows) take:
 * where wino_enabled says so, a 2-D f32 convolution of one group on
 * channels-last data (the residual too) with constant weights, at least
 * 16 channels in and out, and the cache on (they keep transformed
 * weights). */
static bool conv_rewritable(DiscRt *rt, const DiscConv *d)
{
    enum { NHWC = DISC_NHWC_SRC | DISC_NHWC_DST };
    return wino_enabled() && !d->transpose && d->nsp == 2 && d->groups == 1 && d->dtype == DT_F32 &&
           d->weights_const && (d->layout & NHWC) == NHWC && !(d->layout >> DISC_BLOCK_SHIFT) &&
           (!d->residual || (d->layout & DISC_NHWC_RES)) &&
           d->c >= 16 && d->o >= 16 && packing_on() && get_engine(rt);
}

/* A 3 x 3 convolution of stride 1 on channels-last f32 data by F(2x2, 3x3):
 * 1 when it ran the call (0 or -1 in *rc), 0 when the call is not one for
 * it. */
static int conv_winograd(DiscRt *rt, const DiscConv *d, const void *x, const void *w, void *y, int *rc)
{
    if (!conv_rewritable(rt, d))
        return 0;
    for (int i = 0; i < 2; i++)
        if (d->k[i] != 3 || d->stride[i] != 1 || d->dilation[i] != 1 || d->pad_lo[i] > 2 || d->pad_hi[i] > 2)
            return 0;
    Wino wn = {.d = d, .rt = rt, .th = (d->out[0] + 1) / 2, .tw = (d->out[1] + 1) / 2, .x = x, .y = y};
    wn.tiles = d->n * wn.th * wn.tw;
    /* the transformed weights, 16 x c x o, with the packed copies: a 3-D
     * descriptor no reorder of a 4-D weight tensor has */
    dnnl_memory_desc_t plain, md;
    dnnl_dims_t wd = {d->o, d->c, 3, 3}, ud = {WINO_P, d->c, d->o};
    if (dnnl_memory_desc_init_by_tag(&plain, 4, wd, dnnl_f32, dnnl_abcd) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&md, 3, ud, dnnl_f32, dnnl_abc) != dnnl_success)
        return 0;
    Packed *u = packed_get_by(rt, "conv", &plain, &md, w, 1, wino_weights, d);
    if (!u) {
        *rc = -1;
        return 1;
    }
    /* V and M are 4 times the input and the output: in chunks of tiles
     * of at most WINO_CHUNK bytes for a large image */
    int64_t per_tile = WINO_P * (d->c + d->o) * 4;
    wn.nt = WINO_CHUNK / per_tile < 64 ? 64 : WINO_CHUNK / per_tile;
    if (wn.nt > wn.tiles)
        wn.nt = wn.tiles;
    wn.v = disc_rt_alloc(rt, WINO_P * wn.nt * d->c * 4);
    wn.m = disc_rt_alloc(rt, WINO_P * wn.nt * d->o * 4);
    float *zeros = disc_rt_alloc(rt, d->c * 4);
    wn.zeros = zeros;
    if (!wn.v || !wn.m || !zeros) {
        packed_release(u);
        *rc = -1;
        return 1;
    }
    memset(zeros, 0, (size_t)d->c * 4);
    int64_t grain = 1 + 4096 / (d->c > d->o ? d->c : d->o); /* a few thousand channels' work a chunk */
    int64_t chunk = wn.nt;
    *rc = 0;
    for (wn.t0 = 0; wn.t0 < wn.tiles && *rc == 0; wn.t0 += chunk) {
        wn.nt = wn.tiles - wn.t0 < chunk ? wn.tiles - wn.t0 : chunk;
        disc_rt_parallel_for(rt, wino_in, &wn, wn.nt, grain);
        DiscMatmul mm = {.dtype = DT_F32, .batch = WINO_P, .m = wn.nt, .n = d->o, .k = d->c,
                         .a_stride = {wn.nt * d->c, d->c, 1}, .b_stride = {d->c * d->o, d->o, 1},
                         .c_stride = {wn.nt * d->o, d->o, 1}, .weights_const = 1};
        *rc = disc_rt_matmul(rt, &mm, wn.v, u->data, wn.m);
        if (*rc == 0)
            disc_rt_parallel_for(rt, wino_out, &wn, wn.nt, grain);
        if (*rc == 0 && disc_rt_error(rt))
            *rc = -1; /* a transform out of memory */
    }
    disc_rt_set_call_how(rt, "winograd F(2x2,3x3), 16 matmuls");
    packed_release(u);
    return 1;
}

/* ---- strided k x k convolutions as a matmul over copied windows -------------
 *
 * A convolution with a stride reads each output pixel's window once, so
 * the windows copied out one after another (tap by tap, a pixel's
 * channels at a time: the rows of A, kh kw c long) and multiplied by the
 * weights reordered to [kh][kw][c][o] (B, made once per weight tensor)
 * are the convolution as one matmul of pixels x (kh kw c) x o, with the
 * conv's bias, activation and residual as the matmul's epilogue. The copy
 * is the input's size again (a quarter of it times 9 at stride 2), small
 * against the product. oneDNN 2.6's direct jit:avx2 kernel ran
 * ResNet-50's stride-2 3 x 3 convolutions at about half of ONNX Runtime's
 * speed (bench/NOTES.md). */
static void window_weights(const void *src, void *dst, const void *ctx)
{
    const DiscConv *d = ctx;
    const float *g = src;
    float *b = dst;
    int64_t kk = d->k[0] * d->k[1];
    for (int64_t oc = 0; oc < d->o; oc++)
        for (int64_t ic = 0; ic < d->c; ic++)
            for (int64_t t = 0; t < kk; t++)
                b[(t * d->c + ic) * d->o + oc] = g[(oc * d->c + ic) * kk + t];
}

typedef struct Win {
    const DiscConv *d;
    const float *x;
    float *a;                  /* [pixels][kh kw c] */
} Win;

/* The windows of output pixels [lo, hi) (over the batch) into their rows. */
static void window_rows(int64_t lo, int64_t hi, void *args)
{
    const Win *w = args;
    const DiscConv *d = w->d;
    int64_t c = d->c, ih = d->in[0], iw = d->in[1], oh = d->out[0], ow = d->out[1];
    int64_t row = d->k[0] * d->k[1] * c;
    size_t bytes = (size_t)c * sizeof(float);
    for (int64_t p = lo; p < hi; p++) {
        int64_t n = p / (oh * ow), oy = p / ow % oh, ox = p % ow;
        float *a = w->a + p * row;
        for (int64_t u = 0; u < d->k[0]; u++) {
            int64_t yy = oy * d->stride[0] - d->pad_lo[0] + u * d->dilation[0];
            for (int64_t v = 0; v < d->k[1]; v++, a += c) {
                int64_t xx = ox * d->stride[1] - d->pad_lo[1] + v * d->dilation[1];
                if (yy < 0 || yy >= ih || xx < 0 || xx >= iw)
                    memset(a, 0, bytes);
                else
                    memcpy(a, w->x + ((n * ih + yy) * iw + xx) * c, bytes);
            }
        }
    }
}

/* A strided k x k (k > 1) convolution on channels-last f32 data as copied
 * windows and a matmul: 1 when it ran the call (0 or -1 in *rc), 0 when
 * the call is not one for it. */
static int conv_windows(DiscRt *rt, const DiscConv *d, const void *x, const void *w, void *y, int *rc)
{
    if (d->post_res != DISC_POST_NONE || d->k[0] * d->k[1] < 2 || (d->stride[0] < 2 && d->stride[1] < 2) ||
        !conv_rewritable(rt, d))
        return 0;
    int64_t pix = d->n * d->out[0] * d->out[1], row = d->k[0] * d->k[1] * d->c;
    dnnl_memory_desc_t plain, md;
    dnnl_dims_t wd = {d->o, d->c, d->k[0], d->k[1]}, bd = {d->k[0], d->k[1], d->c, d->o};
    if (dnnl_memory_desc_init_by_tag(&plain, 4, wd, dnnl_f32, dnnl_abcd) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&md, 4, bd, dnnl_f32, dnnl_abcd) != dnnl_success)
        return 0;
    Packed *b = packed_get_by(rt, "conv", &plain, &md, w, 1, window_weights, d);
    Win wn = {.d = d, .x = x, .a = b ? disc_rt_alloc(rt, pix * row * 4) : NULL};
    if (!wn.a) {
        if (b)
            packed_release(b);
        *rc = -1;
        return 1;
    }
    disc_rt_parallel_for(rt, window_rows, &wn, pix, 1 + 16384 / row);
    DiscMatmul mm = {.dtype = DT_F32, .batch = 1, .m = pix, .n = d->o, .k = row, .a_stride = {0, row, 1},
                     .b_stride = {0, d->o, 1}, .c_stride = {0, d->o, 1}, .bias = d->bias, .post = d->post,
                     .residual = d->residual, .weights_const = 1};
    *rc = disc_rt_matmul(rt, &mm, wn.a, b->data, y);
    disc_rt_set_call_how(rt, "windows copied, one matmul");
    packed_release(b);
    return 1;
}

int disc_rt_conv(DiscRt *rt, const DiscConv *d0, const void *x, const void *w, void *y)
{
    DiscConv turned;
    const DiscConv *d = conv_turned(d0, &turned);
    const char *what = d->transpose ? "conv_transpose" : "conv";
    if (check_dtype(rt, what, d->dtype) || check_post(rt, what, d->post) || check_post(rt, what, d->post_res))
        return -1;
    if (d->nsp < 1 || d->nsp > 3) {
        disc_rt_fail(rt, "%s: %d spatial dims; 1 to 3 are supported", what, d->nsp);
        return -1;
    }
    if (d->n < 0 || d->c < 1 || d->o < 0 || d->groups < 1 || d->c % d->groups || d->o % d->groups) {
        disc_rt_fail(rt, "%s: bad channels: n %lld, c %lld, o %lld, groups %lld (groups must divide c and o)",
                     what, (long long)d->n, (long long)d->c, (long long)d->o, (long long)d->groups);
        return -1;
    }
    Cv cv = {.d = d};
    int64_t numel = d->n * d->o;
    for (int i = 0; i < d->nsp; i++) {
        int64_t ext = check_window(rt, what, i, d->k[i], d->stride[i], d->dilation[i], d->pad_lo[i], d->pad_hi[i]);
        if (ext < 0)
            return -1;
        if (d->in[i] < 1 || d->out[i] < 0) {
            disc_rt_fail(rt, "%s: spatial axis %d: input size %lld, output size %lld", what, i,
                         (long long)d->in[i], (long long)d->out[i]);
            return -1;
        }
        int64_t want;
        cv.hi[i] = d->pad_hi[i];
        if (d->transpose) {
            want = (d->in[i] - 1) * d->stride[i] + ext - d->pad_lo[i] - d->pad_hi[i];
            cv.hi[i] -= d->out[i] - want; /* output padding: less padding at the end */
            int64_t extra = d->out[i] - want, most = d->stride[i] > d->dilation[i] ? d->stride[i] : d->dilation[i];
            if (extra >= 0 && extra < most)
                want = d->out[i];
        } else {
            want = window_count(d->in[i] + d->pad_lo[i] + d->pad_hi[i] - ext, d->stride[i]);
        }
        if (want != d->out[i] || want < 0) {
            disc_rt_fail(rt, "%s: spatial axis %d: output size %lld does not match the input %lld, window %lld, "
                         "stride %lld, dilation %lld, pads %lld, %lld",
                         what, i, (long long)d->out[i], (long long)d->in[i], (long long)d->k[i],
                         (long long)d->stride[i], (long long)d->dilation[i], (long long)d->pad_lo[i],
                         (long long)d->pad_hi[i]);
            return -1;
        }
        numel *= d->out[i];
    }
    if (numel == 0)
        return 0;
    if (!x || !w || !y) {
        disc_rt_fail(rt, "%s: a NULL operand", what);
        return -1;
    }
    int rc;
    if (conv_subsampled(rt, d, x, w, y, &rc) || conv_winograd(rt, d, x, w, y, &rc) ||
        conv_windows(rt, d, x, w, y, &rc))
        return rc;
    int64_t key[KEY_LEN] = {2, d->dtype, d->nsp, d->n, d->c, d->o, d->groups, d->transpose + 2 * d->layout,
                            d->bias != NULL, d->post + 16 * d->post_res, d->residual != NULL};
    int64_t *k = key + 11;
    for (int i = 0; i < d->nsp; i++) {
        *k++ = d->in[i];
        *k++ = d->k[i];
        *k++ = d->out[i];
        *k++ = d->stride[i];
        *k++ = d->dilation[i];
        *k++ = d->pad_lo[i];
        *k++ = cv.hi[i];
    }
    double wnum = (double)d->o * (double)(d->c / d->groups);
    for (int i = 0; i < d->nsp; i++)
        wnum *= (double)d->k[i];
    Build bl = {.rt = rt, .what = what, .post = d->post, .residual = d->residual != NULL, .post_res = d->post_res,
                .any = 1, .wconst = d->weights_const != 0, .wbytes = wnum * (double)dtype_size((DType)d->dtype),
                .block = d->layout >> DISC_BLOCK_SHIFT,
                .flop = 2.0 * wnum * (double)d->n * (double)numel / (double)(d->n * d->o)};
    void *ptr[NMD] = {(void *)x, (void *)w, (void *)d->bias, y, (void *)d->residual, NULL};
    return run_cached(&bl, key, make_conv, &cv, ptr);
}

/* ---- pooling ---------------------------------------------------------------- */

static int make_pool(Build *b, const void *ctx)
{
    const DiscPool *d = ctx;
    dnnl_data_type_t dt = dt_of(d->dtype);
    int nsp = d->nsp, nd = 2 + nsp;
    dnnl_dims_t xd = {d->n, d->c}, yd = {d->n, d->c}, st, kk, dil, lo, hi;
    for (int i = 0; i < nsp; i++) {
        xd[2 + i] = d->in[i];
        yd[2 + i] = d->out[i];
        st[i] = d->stride[i];
        kk[i] = d->window[i];
        dil[i] = d->dilation[i] - 1;
        lo[i] = d->pad_lo[i];
        hi[i] = d->pad_hi[i];
    }
    if (md_image(b, MD_SRC, nd, xd, dt, d->layout & DISC_NHWC_SRC) ||
        md_image(b, MD_DST, nd, yd, dt, d->layout & DISC_NHWC_DST))
        return -1;
    dnnl_alg_kind_t alg = d->max         ? dnnl_pooling_max
                          : d->count_pad ? dnnl_pooling_avg_include_padding
                                         : dnnl_pooling_avg_exclude_padding;
    dnnl_pooling_v2_desc_t desc;
    dnnl_status_t s = dnnl_pooling_v2_forward_desc_init(&desc, dnnl_forward_inference, alg, &b->e->md[MD_SRC],
                                                        &b->e->md[MD_DST], st, kk, dil, lo, hi);
    if (s != dnnl_success)
        return dnnl_failed(b->rt, b->what, "pooling descriptor", s);
    return make_primitive(b, &desc);
}

static int64_t numel_window(const DiscPool *d)
{
    int64_t w = 1;
    for (int i = 0; i < d->nsp; i++)
        w *= d->window[i];
    return w;
}

int disc_rt_pool(DiscRt *rt, const DiscPool *d, const void *x, void *y)
{
    const char *what = d->max ? "max pool" : "avg pool";
    if (check_dtype(rt, what, d->dtype))
        return -1;
    if (d->nsp < 1 || d->nsp > 3) {
        disc_rt_fail(rt, "%s: %d spatial dims; 1 to 3 are supported", what, d->nsp);
        return -1;
    }
    if (d->n < 0 || d->c < 0) {
        disc_rt_fail(rt, "%s: negative dims n %lld, c %lld", what, (long long)d->n, (long long)d->c);
        return -1;
    }
    int64_t numel = d->n * d->c;
    for (int i = 0; i < d->nsp; i++) {
        int64_t ext = check_window(rt, what, i, d->window[i], d->stride[i], d->dilation[i], d->pad_lo[i],
                                   d->pad_hi[i]);
        if (ext < 0)
            return -1;
        int64_t want = d->in[i] < 1 ? -1 : window_count(d->in[i] + d->pad_lo[i] + d->pad_hi[i] - ext, d->stride[i]);
        if (want != d->out[i] || want < 0) {
            disc_rt_fail(rt, "%s: spatial axis %d: output size %lld does not match the input %lld, window %lld, "
                         "stride %lld, dilation %lld, pads %lld, %lld",
                         what, i, (long long)d->out[i], (long long)d->in[i], (long long)d->window[i],
                         (long long)d->stride[i], (long long)d->dilation[i], (long long)d->pad_lo[i],
                         (long long)d->pad_hi[i]);
            return -1;
        }
        numel *= d->out[i];
    }
    if (numel == 0)
        return 0;
    if (!x || !y) {
        disc_rt_fail(rt, "%s: a NULL operand", what);
        return -1;
    }
    int64_t key[KEY_LEN] = {3, d->dtype, d->nsp, d->max, d->n, d->c, d->count_pad + 2 * d->layout};
    int64_t *k = key + 7;
    for (int i = 0; i < d->nsp; i++) {
        *k++ = d->in[i];
        *k++ = d->window[i];
        *k++ = d->out[i];
        *k++ = d->stride[i];
        *k++ = d->dilation[i];
        *k++ = d->pad_lo[i];
        *k++ = d->pad_hi[i];
    }
    Build bl = {.rt = rt, .what = what, .flop = (double)numel * (double)numel_window(d),
                .block = d->layout >> DISC_BLOCK_SHIFT};
    void *ptr[NMD] = {(void *)x, NULL, NULL, y, NULL, NULL};
    return run_cached(&bl, key, make_pool, d, ptr);
}
