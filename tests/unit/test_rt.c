/*
 * test_rt.c — the runtime (runtime/rt.h): parallel_for covers every index
 * once (alone, from two threads at once, nested), run memory, errors, and
 * the oneDNN thunks against naive loops computed in double.
 */
#include "runtime/rt.h"

#include "ir/ir.h"
#include "ir/store.h"
#include "tests/unit/check.h"
#include "tests/unit/files.h"

#include <dirent.h>
#include <math.h>
#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- parallel_for ----------------------------------------------------------- */

typedef struct Cover {
    atomic_int *hits;
    DiscRt *rt;          /* for the nested case */
    int64_t inner;       /* nested: each index runs a parallel_for over this many */
    atomic_int *inner_hits;
} Cover;

static void cover_fn(int64_t b, int64_t e, void *args)
{
    Cover *c = args;
    for (int64_t i = b; i < e; i++)
        atomic_fetch_add(&c->hits[i], 1);
}

static bool covered(DiscRt *rt, int64_t n, int64_t grain)
{
    Cover c = {.hits = calloc((size_t)n + 1, sizeof(atomic_int))};
    disc_rt_parallel_for(rt, cover_fn, &c, n, grain);
    bool ok = true;
    for (int64_t i = 0; i < n; i++)
        ok = ok && atomic_load(&c.hits[i]) == 1;
    free(c.hits);
    return ok;
}

static void test_cover(void)
{
    static const int64_t ns[] = {0, 1, 2, 3, 7, 64, 100, 1000, 4097, 100003};
    static const int64_t grains[] = {0, 1, 3, 16, 1000, 1 << 20};
    static const int threads[] = {0, 1, 2, 3, 5};
    for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) {
        DiscRt *rt = disc_rt_new(&(DiscRtOpts){.threads = threads[t]});
        CHECK(rt != NULL);
        CHECK(disc_rt_threads(rt) >= 1);
        for (size_t i = 0; i < sizeof ns / sizeof *ns; i++)
            for (size_t g = 0; g < sizeof grains / sizeof *grains; g++)
                CHECK_MSG(covered(rt, ns[i], grains[g]), "threads %d n %lld grain %lld", threads[t],
                          (long long)ns[i], (long long)grains[g]);
        disc_rt_free(rt);
    }
    DiscRt *dflt = disc_rt_new(NULL); /* no options: every core */
    CHECK(dflt && covered(dflt, 1000, 10));
    disc_rt_free(dflt);
}

static void *cover_thread(void *arg)
{
    int *ok = arg;
    DiscRt *rt = disc_rt_new(&(DiscRtOpts){.threads = 3});
    *ok = rt != NULL;
    for (int rep = 0; rep < 200 && *ok; rep++)
        *ok = covered(rt, 1000 + rep * 37, 7 + rep % 50);
    disc_rt_free(rt);
    return NULL;
}

static void test_cover_two_threads(void)
{
    pthread_t t[2];
    int ok[2] = {0, 0};
    for (int i = 0; i < 2; i++)
        CHECK(pthread_create(&t[i], NULL, cover_thread, &ok[i]) == 0);
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        CHECK(ok[i]);
    }
}

static void nested_fn(int64_t b, int64_t e, void *args)
{
    Cover *c = args;
    for (int64_t i = b; i < e; i++) {
        Cover in = {.hits = c->inner_hits + i * c->inner};
        disc_rt_parallel_for(c->rt, cover_fn, &in, c->inner, 1);
        atomic_fetch_add(&c->hits[i], 1);
    }
}

static void test_nested(void)
{
    DiscRt *rt = disc_rt_new(&(DiscRtOpts){.threads = 2});
    int64_t n = 50, inner = 40;
    Cover c = {.hits = calloc((size_t)n, sizeof(atomic_int)), .rt = rt, .inner = inner,
               .inner_hits = calloc((size_t)(n * inner), sizeof(atomic_int))};
    disc_rt_parallel_for(rt, nested_fn, &c, n, 1);
    bool ok = true;
    for (int64_t i = 0; i < n; i++)
        ok = ok && atomic_load(&c.hits[i]) == 1;
    for (int64_t i = 0; i < n * inner; i++)
        ok = ok && atomic_load(&c.inner_hits[i]) == 1;
    CHECK(ok);
    free(c.hits);
    free(c.inner_hits);
    disc_rt_free(rt);
}

/* ---- run memory and errors ---------------------------------------------------- */

/* The memory plan's layout (place.c): slots live at once never overlap,
 * at any sizes; a slot dead before another starts gives its bytes up; the
 * run context's remembered layout is the same layout. Random sizes and
 * lifetimes, checked pair by pair against a brute-force overlap test. */
static void test_place(void)
{
    enum { N = 60 };
    int64_t bytes[N], off[N], off2[N];
    int32_t live[2 * N];
    unsigned seed = 12345;
    for (int round = 0; round < 200; round++) {
        int n = 1 + round % N;
        int64_t sum = 0;
        for (int i = 0; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            bytes[i] = 64 * (int64_t)((seed >> 8) % (round % 3 ? 1000 : 4)); /* some zero, many equal */
            seed = seed * 1103515245u + 12345u;
            live[2 * i] = (int32_t)(i / 2);
            live[2 * i + 1] = live[2 * i] + (int32_t)((seed >> 8) % (round % 5 ? 4 : n));
            sum += bytes[i];
        }
        int64_t total = disc_place(n, bytes, live, off);
        CHECK(total >= 0 && total <= sum);
        bool ok = true;
        for (int i = 0; i < n && ok; i++) {
            ok = off[i] >= 0 && off[i] % 64 == 0 && off[i] + bytes[i] <= total;
            for (int j = 0; j < i && ok; j++) {
                bool at_once = live[2 * i] <= live[2 * j + 1] && live[2 * j] <= live[2 * i + 1];
                bool apart = off[i] + bytes[i] <= off[j] || off[j] + bytes[j] <= off[i];
                ok = !at_once || apart || !bytes[i] || !bytes[j];
            }
        }
        CHECK_MSG(ok, "round %d: two slots live at once overlap, or a slot lies outside the block", round);
        DiscRt *rt = disc_rt_new(&(DiscRtOpts){.threads = 1});
        CHECK(rt && disc_rt_place(rt, n, bytes, live, off2) == total && !memcmp(off, off2, n * sizeof *off));
        CHECK(rt && disc_rt_place(rt, n, bytes, live, off2) == total && !memcmp(off, off2, n * sizeof *off));
        disc_rt_free(rt);
    }
    /* a chain: each value read only by the next, the largest in the middle:
     * two slots at a time, so the block is the largest neighbouring pair */
    int64_t cb[5] = {64, 640, 6400, 640, 64};
    int32_t cl[10] = {0, 1, 1, 2, 2, 3, 3, 4, 4, 5};
    CHECK(disc_place(5, cb, cl, off) == 7040);
    /* the same sizes live at once: end to end */
    int32_t all[10] = {0, 9, 0, 9, 0, 9, 0, 9, 0, 9};
    CHECK(disc_place(5, cb, all, off) == 7808);
    /* a negative size or one that overflows: -1, and the run's error */
    int64_t bad[2] = {64, -64}, huge[2] = {INT64_MAX - 63, 128};
    CHECK(disc_place(2, bad, all, off) == -1);
    DiscRt *rt = disc_rt_new(&(DiscRtOpts){.threads = 1});
    CHECK(rt && disc_rt_place(rt, 2, huge, all, off) == -1 && disc_rt_error(rt) &&
          strstr(disc_rt_error(rt), "memory plan"));
    disc_rt_free(rt);
}

static void test_alloc(void)
{
    DiscRt *rt = disc_rt_new(&(DiscRtOpts){.threads = 1});
    static const int64_t sizes[] = {1, 3, 64, 65, 1000, 0, 3 << 20, 17};
    char *prev = NULL;
    for (int rep = 0; rep < 2; rep++) {
        for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
            char *p = disc_rt_alloc(rt, sizes[i]);
            CHECK(p != NULL);
            CHECK(((uintptr_t)p & 63) == 0);
            if (p && sizes[i])
                memset(p, 0xab, (size_t)sizes[i]);
            CHECK(p != prev || sizes[i] == 0);
            if (sizes[i])
                prev = p;
        }
        CHECK(disc_rt_error(rt) == NULL);
        disc_rt_reset(rt);
        prev = NULL;
    }
    CHECK(disc_rt_alloc(rt, -1) == NULL);
    CHECK(disc_rt_error(rt) && strstr(disc_rt_error(rt), "negative"));
    disc_rt_reset(rt);
    CHECK(disc_rt_error(rt) == NULL);
    CHECK(disc_rt_alloc(rt, INT64_MAX) == NULL);
    CHECK(disc_rt_error(rt) != NULL);
    disc_rt_reset(rt);
    CHECK(disc_rt_alloc(rt, INT64_MAX - 10) == NULL);
    disc_rt_reset(rt);
    disc_rt_fail(rt, "first %d", 1);
    disc_rt_fail(rt, "second %d", 2);
    CHECK(disc_rt_error(rt) && strcmp(disc_rt_error(rt), "first 1") == 0);
    disc_rt_free(rt);
    disc_rt_free(NULL);
}

/* ---- numeric helpers -------------------------------------------------------- */

static uint32_t seed = 12345;

static float rnd(void)
{
    seed = seed * 1664525u + 1013904223u;
    return (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static float *rnd_buf(int64_t n)
{
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
    for (int64_t i = 0; i < n; i++)
        p[i] = rnd();
    return p;
}

static double post_ref(DiscPost p, double x)
{
    switch (p) {
    case DISC_POST_RELU: return x > 0 ? x : 0;
    case DISC_POST_GELU_ERF: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    case DISC_POST_GELU_TANH: return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case DISC_POST_TANH: return tanh(x);
    case DISC_POST_SIGMOID: return 1 / (1 + exp(-x));
    case DISC_POST_RELU6: return fmin(fmax(x, 0), 6);
    case DISC_POST_HARDSWISH: return x * fmin(fmax(x + 3, 0), 6) / 6;
    case DISC_POST_SWISH: return x / (1 + exp(-x));
    default: return x;
    }
}

/* max |got - want| / (1 + |want|) over n entries at offsets off[i] (or i) */
static double max_err(const float *got, const double *want, int64_t n)
{
    double e = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs(got[i] - want[i]) / (1 + fabs(want[i]));
        if (!(d <= e))
            e = d;
    }
    return e;
}

/* ---- matmul ------------------------------------------------------------------ */

typedef struct MmCase {
    const char *name;
    int64_t batch, m, n, k;
    int transA, transB;        /* operand stored transposed */
    int bcastA, bcastB;        /* batch stride 0 */
    int64_t gapA;              /* extra elements between A's batches */
    int bias, residual;
    DiscPost post;
    int wconst;                /* B as constant weights (packed) */
} MmCase;

static void run_mm(DiscRt *rt, const MmCase *t)
{
    int64_t B = t->batch, M = t->m, N = t->n, K = t->k;
    DiscMatmul d = {.dtype = DT_F32, .batch = B, .m = M, .n = N, .k = K, .post = t->post,
                    .weights_const = t->wconst};
    int64_t asz = M * K + t->gapA, bsz = K * N;
    d.a_stride[0] = t->bcastA ? 0 : asz;
    d.a_stride[1] = t->transA ? 1 : K;
    d.a_stride[2] = t->transA ? M : 1;
    d.b_stride[0] = t->bcastB ? 0 : bsz;
    d.b_stride[1] = t->transB ? 1 : N;
    d.b_stride[2] = t->transB ? K : 1;
    d.c_stride[0] = M * N;
    d.c_stride[1] = N;
    d.c_stride[2] = 1;
    float *a = rnd_buf((t->bcastA ? 1 : B) * asz), *b = rnd_buf((t->bcastB ? 1 : B) * bsz);
    float *bias = t->bias ? rnd_buf(N) : NULL, *res = t->residual ? rnd_buf(B * M * N) : NULL;
    float *c = malloc((size_t)(B * M * N + 1) * sizeof *c);
    double *want = malloc((size_t)(B * M * N + 1) * sizeof *want);
    d.bias = bias;
    d.residual = res;
    for (int64_t bt = 0; bt < B; bt++)
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double s = 0;
                for (int64_t p = 0; p < K; p++)
                    s += (double)a[bt * d.a_stride[0] + i * d.a_stride[1] + p * d.a_stride[2]] *
                         b[bt * d.b_stride[0] + p * d.b_stride[1] + j * d.b_stride[2]];
                if (bias)
                    s += bias[j];
                s = post_ref(t->post, s);
                int64_t o = bt * M * N + i * N + j;
                want[o] = s + (res ? res[o] : 0);
            }
    int rc = disc_rt_matmul(rt, &d, a, b, c);
    CHECK_MSG(rc == 0, "%s: %s", t->name, disc_rt_error(rt) ? disc_rt_error(rt) : "");
    if (rc == 0) {
        double e = max_err(c, want, B * M * N);
        CHECK_MSG(e < 1e-4, "%s: error %g", t->name, e);
    }
    disc_rt_reset(rt);
    disc_rt_weights_forget(b, (int64_t)sizeof *b * (t->bcastB ? 1 : B) * bsz);
    free(a), free(b), free(bias), free(res), free(c), free(want);
}

static void test_matmul(void)
{
    DiscRt *rt = disc_rt_new(&(DiscRtOpts){.threads = 0});
    const MmCase cases[] = {
        {.name = "plain 64", .batch = 1, .m = 64, .n = 64, .k = 64},
        {.name = "m1 n13 k197", .batch = 1, .m = 1, .n = 13, .k = 197},
        {.name = "odd", .batch = 1, .m = 37, .n = 129, .k = 65},
        {.name = "transposed B", .batch = 1, .m = 33, .n = 17, .k = 50, .transB = 1},
        {.name = "transposed A", .batch = 1, .m = 9, .n = 31, .k = 20, .transA = 1},
        {.name = "both transposed", .batch = 1, .m = 12, .n = 5, .k = 7, .transA = 1, .transB = 1},
        {.name = "batched", .batch = 3, .m = 5, .n = 7, .k = 9},
        {.name = "batched transposed B", .batch = 4, .m = 6, .n = 11, .k = 13, .transB = 1},
        {.name = "broadcast B (folds)", .batch = 4, .m = 3, .n = 24, .k = 16, .bcastB = 1},
        {.name = "broadcast B, gap in A", .batch = 3, .m = 5, .n = 8, .k = 6, .bcastB = 1, .gapA = 5},
        {.name = "broadcast B transposed", .batch = 2, .m = 7, .n = 9, .k = 12, .bcastB = 1, .transB = 1},
        {.name = "broadcast A", .batch = 3, .m = 4, .n = 5, .k = 6, .bcastA = 1},
        {.name = "broadcast A and B", .batch = 3, .m = 4, .n = 5, .k = 6, .bcastA = 1, .bcastB = 1, .residual = 1},
        {.name = "bias", .batch = 1, .m = 10, .n = 13, .k = 8, .bias = 1},
        {.name = "relu", .batch = 1, .m = 10, .n = 13, .k = 8, .post = DISC_POST_RELU},
        {.name = "gelu erf", .batch = 1, .m = 10, .n = 13, .k = 8, .post = DISC_POST_GELU_ERF},
        {.name = "gelu tanh", .batch = 1, .m = 10, .n = 13, .k = 8, .post = DISC_POST_GELU_TANH},
        {.name = "tanh", .batch = 1, .m = 10, .n = 13, .k = 8, .post = DISC_POST_TANH},
        {.name = "sigmoid", .batch = 1, .m = 10, .n = 13, .k = 8, .post = DISC_POST_SIGMOID},
        /* k = 96: sums beyond -3 and 6, where relu6 and hardswish bend */
        {.name = "relu6", .batch = 1, .m = 10, .n = 13, .k = 96, .post = DISC_POST_RELU6},
        {.name = "hardswish", .batch = 1, .m = 10, .n = 13, .k = 96, .post = DISC_POST_HARDSWISH},
        {.name = "swish", .batch = 1, .m = 10, .n = 13, .k = 96, .post = DISC_POST_SWISH},
        {.name = "residual", .batch = 1, .m = 10, .n = 13, .k = 8, .residual = 1},
        {.name = "bias gelu residual batched", .batch = 2, .m = 10, .n = 13, .k = 8, .bias = 1,
         .post = DISC_POST_GELU_ERF, .residual = 1},
        {.name = "bias relu residual broadcast B", .batch = 3, .m = 10, .n = 13, .k = 8, .bcastB = 1, .bias = 1,
         .post = DISC_POST_RELU, .residual = 1},
        {.name = "k = 0", .batch = 2, .m = 3, .n = 4, .k = 0, .bias = 1, .post = DISC_POST_SIGMOID, .residual = 1},
        {.name = "m = 0", .batch = 1, .m = 0, .n = 4, .k = 5},
        {.name = "bert-like", .batch = 2, .m = 13, .n = 768, .k = 768, .bcastB = 1, .bias = 1,
         .post = DISC_POST_GELU_TANH},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        run_mm(rt, &cases[i]);
    /* the cache serves a repeated shape */
    DiscRtCacheStats s0, s1;
    disc_rt_cache_stats(&s0);
    run_mm(rt, &cases[2]);
    disc_rt_cache_stats(&s1);
    CHECK(s1.hits == s0.hits + 1 && s1.misses == s0.misses);
    /* a one-thread run and a tiny cache still compute the same */
    int cap = disc_rt_cache_set_capacity(1);
    DiscRt *one = disc_rt_new(&(DiscRtOpts){.threads = 1});
    for (size_t i = 0; i < 6; i++)
        run_mm(one, &cases[i]);
    disc_rt_cache_stats(&s1);
    CHECK(s1.entries <= 1 && s1.evictions > s0.evictions);
    disc_rt_cache_set_capacity(cap);
    disc_rt_free(one);
    disc_rt_free(rt);
}

/* bf16 and f16: computed, or a clean error where this CPU lacks them */
static void test_matmul_half(void)
{
    DiscRt *rt = disc_rt_new(&(DiscRtOpts){.threads = 0});
    const int64_t M = 8, N = 16, K = 32;
    for (int dt = DT_F16; dt <= DT_BF16; dt++) {
        uint16_t a[8 * 32], b[32 * 16], c[8 * 16];
        float af[8 * 32], bf[32 * 16];
        for (int i = 0; i < M * K; i++) {
            af[i] = (float)((i * 7) % 9 - 4) / 4; /* exact in both formats */
            _Float16 h = (_Float16)af[i];
            uint32_t u;
            memcpy(&u, &af[i], 4);
            if (dt == DT_F16)
                memcpy(&a[i], &h, 2);
            else
                a[i] = (uint16_t)(u >> 16);
        }
        for (int i = 0; i < K * N; i++) {
            bf[i] = (float)((i * 5) % 7 - 3) / 2;
            _Float16 h = (_Float16)bf[i];
            uint32_t u;
            memcpy(&u, &bf[i], 4);
            if (dt == DT_F16)
                memcpy(&b[i], &h, 2);
            else
                b[i] = (uint16_t)(u >> 16);
        }
        DiscMatmul d = {.dtype = dt, .batch = 1, .m = M, .n = N, .k = K, .a_stride = {0, K, 1},
                        .b_stride = {0, N, 1}, .c_stride = {0, N, 1}};
        int rc = disc_rt_matmul(rt, &d, a, b, c);
        if (rc != 0) {
            CHECK_MSG(disc_rt_error(rt) != NULL, "%s", dtype_name(dt));
            printf("note: %s matmul: %s\n", dtype_name(dt), disc_rt_error(rt));
        } else {
            double e = 0;
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++) {
                    double s = 0;
                    for (int64_t p = 0; p < K; p++)
                        s += (double)af[i * K + p] * bf[p * N + j];
                    float got;
                    if (dt == DT_F16) {
                        _Float16 h;
                        memcpy(&h, &c[i * N + j], 2);
                        got = (float)h;
                    } else {
                        uint32_t u = (uint32_t)c[i * N + j] << 16;
                        memcpy(&got, &u, 4);
                    }
                    double r = fabs(got - s) / (1 + fabs(s));
                    e = r > e ? r : e;
                }
            CHECK_MSG(e < 1e-2, "%s: error %g", dtype_name(dt), e);
        }
        disc_rt_reset(rt);
    }
    disc_rt_free(rt);
}

/* ---- conv -------------------------------------------------------------------- */

static int64_t numel_sp(int nsp, const int64_t *s)
{
    int64_t n = 1;
    for (int i = 0; i < nsp; i++)
        n *= s[i];
    return n;
}

static void unravel(int64_t p, int nsp, const int64_t *shape, int64_t *idx)
{
    for (int i = nsp - 1; i >= 0; i--) {
        idx[i] = p % shape[i];
        p /= shape[i];
    }
}

/* The reference, as runtime/interp_lib.c computes it. */
static void conv_ref(const DiscConv *d, const float *x, const float *w, const float *bias, const float *res,
                     double *y)
{
    int nsp = d->nsp;
    int64_t nin = numel_sp(nsp, d->in), nout = numel_sp(nsp, d->out), nk = numel_sp(nsp, d->k);
    int64_t g = d->groups, cg = d->c / g, og = d->o / g;
    int64_t total = d->n * d->o * nout;
    memset(y, 0, (size_t)total * sizeof *y);
    int64_t is[3], os[3], ks[3];
    if (!d->transpose) {
        for (int64_t n = 0; n < d->n; n++)
            for (int64_t o = 0; o < d->o; o++)
                for (int64_t p = 0; p < nout; p++) {
                    unravel(p, nsp, d->out, os);
                    double s = 0;
                    int64_t grp = o / og;
                    for (int64_t ci = 0; ci < cg; ci++)
                        for (int64_t kf = 0; kf < nk; kf++) {
                            unravel(kf, nsp, d->k, ks);
                            int64_t off = 0;
                            bool inside = true;
                            for (int i = 0; i < nsp && inside; i++) {
                                int64_t pos = os[i] * d->stride[i] - d->pad_lo[i] + ks[i] * d->dilation[i];
                                inside = pos >= 0 && pos < d->in[i];
                                off = off * d->in[i] + pos;
                            }
                            if (inside)
                                s += (double)x[(n * d->c + grp * cg + ci) * nin + off] * w[(o * cg + ci) * nk + kf];
                        }
                    y[(n * d->o + o) * nout + p] = s;
                }
    } else {
        for (int64_t n = 0; n < d->n; n++)
            for (int64_t c = 0; c < d->c; c++) {
                int64_t grp = c / cg;
                for (int64_t p = 0; p < nin; p++) {
                    unravel(p, nsp, d->in, is);
                    double xv = x[(n * d->c + c) * nin + p];
                    for (int64_t kf = 0; kf < nk; kf++) {
                        unravel(kf, nsp, d->k, ks);
                        int64_t off = 0;
                        bool inside = true;
                        for (int i = 0; i < nsp && inside; i++) {
                            int64_t pos = is[i] * d->stride[i] - d->pad_lo[i] + ks[i] * d->dilation[i];
                            inside = pos >= 0 && pos < d->out[i];
                            off = off * d->out[i] + pos;
                        }
                        if (!inside)
                            continue;
                        for (int64_t ol = 0; ol < og; ol++)
                            y[(n * d->o + grp * og + ol) * nout + off] += xv * w[(c * og + ol) * nk + kf];
                    }
                }
            }
    }
    for (int64_t i = 0; i < total; i++) {
        int64_t o = i / nout % d->o;
        y[i] = post_ref(d->post_res, post_ref(d->post, y[i] + (bias ? bias[o] : 0)) + (res ? res[i] : 0));
    }
}

/* [n][c][sp] as [n][sp][c] (back: the other way), a new buffer. */
static float *channels_last(const float *a, int64_t n, int64_t c, int64_t sp, bool back)
{
    float *t = malloc((size_t)(n * c * sp > 0 ? n * c * sp : 1) * sizeof *t);
    for (int64_t b = 0; b < n; b++)
        for (int64_t ch = 0; ch < c; ch++)
            for (int64_t p = 0; p < sp; p++) {
                int64_t first = (b * c + ch) * sp + p, last = (b * sp + p) * c + ch;
                t[back ? first : last] = a[back ? last : first];
            }
    return t;
}

typedef struct ConvCase {
    const char *name;
    int nsp, transpose;
    int64_t n, c, o, groups;
    int64_t in[3], k[3], stride[3], dil[3], lo[3], hi[3], opad[3];
    int bias, residual;
    DiscPost post, post_res;
    int layout;   /* DISC_NHWC_*: x, y, the residual given and taken channels-last */
    const char *not_how; /* NULL, or what disc_rt_call_how must not mention */
    int wconst;   /* weights_const: oneDNN picks the weights' layout (packed once) */
    const char *how512;  /* NULL, or what it must mention where oneDNN runs at AVX-512 */
} ConvCase;

/* Whether oneDNN runs at AVX-512 here (under ONEDNN_MAX_CPU_ISA too). */
static bool onednn_avx512(void)
{
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    return (isa & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
}

static void run_conv(DiscRt *rt, const ConvCase *t)
{
    DiscConv d = {.dtype = DT_F32, .nsp = t->nsp, .n = t->n, .c = t->c, .o = t->o, .groups = t->groups,
                  .transpose = t->transpose, .post = t->post, .post_res = t->post_res, .layout = t->layout};
    for (int i = 0; i < t->nsp; i++) {
        d.in[i] = t->in[i];
        d.k[i] = t->k[i];
        d.stride[i] = t->stride[i] ? t->stride[i] : 1;
        d.dilation[i] = t->dil[i] ? t->dil[i] : 1;
        d.pad_lo[i] = t->lo[i];
        d.pad_hi[i] = t->hi[i];
        int64_t ext = d.dilation[i] * (d.k[i] - 1) + 1;
        d.out[i] = t->transpose ? (d.in[i] - 1) * d.stride[i] + ext - d.pad_lo[i] - d.pad_hi[i] + t->opad[i]
                                : (d.in[i] + d.pad_lo[i] + d.pad_hi[i] - ext) / d.stride[i] + 1;
    }
    int64_t nx = t->n * t->c * numel_sp(t->nsp, d.in), ny = t->n * t->o * numel_sp(t->nsp, d.out);
    int64_t nw = t->c * t->o / t->groups * numel_sp(t->nsp, d.k);
    float *x = rnd_buf(nx), *w = rnd_buf(nw), *bias = t->bias ? rnd_buf(t->o) : NULL;
    float *res = t->residual ? rnd_buf(ny) : NULL, *y = malloc((size_t)ny * sizeof *y);
    double *want = malloc((size_t)ny * sizeof *want);
    d.bias = bias;
    d.residual = res;
    d.weights_const = t->wconst;
    conv_ref(&d, x, w, bias, res, want);
    int64_t spx = numel_sp(t->nsp, d.in), spy = numel_sp(t->nsp, d.out);
    float *xl = t->layout & DISC_NHWC_SRC ? channels_last(x, t->n, t->c, spx, false) : NULL;
    float *rl = res && t->layout & DISC_NHWC_RES ? channels_last(res, t->n, t->o, spy, false) : NULL;
    if (rl)
        d.residual = rl;
    int rc = disc_rt_conv(rt, &d, xl ? xl : x, w, y);
    CHECK_MSG(rc == 0, "%s: %s", t->name, disc_rt_error(rt) ? disc_rt_error(rt) : "");
    if (rc == 0) {
        float *yp = t->layout & DISC_NHWC_DST ? channels_last(y, t->n, t->o, spy, true) : NULL;
        double e = max_err(yp ? yp : y, want, ny);
        CHECK_MSG(e < 1e-4, "%s: error %g", t->name, e);
        free(yp);
        const char *how = disc_rt_call_how(rt);
        CHECK_MSG(!t->not_how || !strstr(how, t->not_how), "%s: ran as %s", t->name, how);
        CHECK_MSG(!t->how512 || !onednn_avx512() || strstr(how, t->how512), "%s: ran as %s", t->name, how);
    }
    disc_rt_reset(rt);
    if (t->wconst)
        disc_rt_weights_forget(w, nw * (int64_t)sizeof *w);
    free(x), free(w), free(bias), free(res), free(y), free(want), free(xl), free(rl);
}

static void test_conv(void)
{
    DiscRt *rt = disc_rt_new(&(DiscRtOpts){.threads = 0});
    const ConvCase cases[] = {
        {.name = "2-D plain", .nsp = 2, .n = 2, .c = 3, .o = 4, .groups = 1, .in = {7, 9}, .k = {3, 3}},
        {.name = "2-D stride 2 pad", .nsp = 2, .n = 2, .c = 4, .o = 6, .groups = 1, .in = {9, 11}, .k = {3, 3},
         .stride = {2, 2}, .lo = {1, 1}, .hi = {1, 2}},
        {.name = "2-D dilation", .nsp = 2, .n = 1, .c = 3, .o = 5, .groups = 1, .in = {10, 12}, .k = {3, 2},
         .stride = {1, 1}, .dil = {2, 3}, .lo = {2, 1}, .hi = {2, 0}},
        {.name = "2-D groups 2", .nsp = 2, .n = 2, .c = 4, .o = 6, .groups = 2, .in = {8, 8}, .k = {3, 3},
         .stride = {1, 2}, .dil = {1, 1}, .lo = {1, 1}, .hi = {1, 1}},
        {.name = "2-D depthwise", .nsp = 2, .n = 2, .c = 8, .o = 8, .groups = 8, .in = {9, 7}, .k = {3, 3},
         .stride = {2, 1}, .dil = {1, 1}, .lo = {1, 1}, .hi = {1, 1}},
        {.name = "2-D depthwise x2", .nsp = 2, .n = 1, .c = 4, .o = 8, .groups = 4, .in = {6, 6}, .k = {5, 5},
         .stride = {1, 1}, .dil = {1, 1}, .lo = {2, 2}, .hi = {2, 2}},
        {.name = "2-D 1x1", .nsp = 2, .n = 2, .c = 16, .o = 32, .groups = 1, .in = {5, 5}, .k = {1, 1}},
        {.name = "2-D bias relu residual", .nsp = 2, .n = 2, .c = 3, .o = 4, .groups = 1, .in = {7, 9}, .k = {3, 3},
         .stride = {1, 1}, .lo = {1, 1}, .hi = {1, 1}, .bias = 1, .residual = 1, .post = DISC_POST_RELU},
        {.name = "2-D bias sigmoid", .nsp = 2, .n = 1, .c = 3, .o = 4, .groups = 1, .in = {7, 9}, .k = {3, 3},
         .bias = 1, .post = DISC_POST_SIGMOID},
        /* c = 48: sums beyond -3 and 6, where relu6 and hardswish bend */
        {.name = "2-D relu6", .nsp = 2, .n = 1, .c = 48, .o = 8, .groups = 1, .in = {5, 6}, .k = {3, 3},
         .bias = 1, .post = DISC_POST_RELU6},
        {.name = "2-D depthwise hardswish", .nsp = 2, .n = 2, .c = 16, .o = 16, .groups = 16, .in = {9, 7},
         .k = {5, 5}, .bias = 1, .post = DISC_POST_HARDSWISH},
        /* channels-last operands (hostlib.c's plan), with and without oneDNN's choice of layouts */
        {.name = "2-D nhwc in and out", .nsp = 2, .n = 2, .c = 16, .o = 32, .groups = 1, .in = {7, 6}, .k = {3, 3},
         .lo = {1, 1}, .hi = {1, 1}, .bias = 1, .post = DISC_POST_RELU, .layout = DISC_NHWC_SRC | DISC_NHWC_DST},
        {.name = "2-D nhwc residual, relu after it", .nsp = 2, .n = 2, .c = 32, .o = 32, .groups = 1, .in = {5, 9},
         .k = {1, 1}, .bias = 1, .residual = 1, .post_res = DISC_POST_RELU,
         .layout = DISC_NHWC_SRC | DISC_NHWC_DST | DISC_NHWC_RES},
        {.name = "2-D nchw in, nhwc out", .nsp = 2, .n = 1, .c = 8, .o = 16, .groups = 1, .in = {11, 4}, .k = {3, 3},
         .stride = {2, 2}, .layout = DISC_NHWC_DST},
        {.name = "2-D depthwise nhwc in, nchw out and residual", .nsp = 2, .n = 2, .c = 16, .o = 16, .groups = 16,
         .in = {6, 7}, .k = {3, 3}, .lo = {1, 1}, .hi = {1, 1}, .residual = 1, .layout = DISC_NHWC_SRC},
        /* oneDNN's direct depthwise kernel (jit_dw), not brdgmm_dw: dnnl.c dw_direct */
        {.name = "2-D depthwise nhwc relu6, direct kernel", .nsp = 2, .n = 2, .c = 32, .o = 32, .groups = 32,
         .in = {13, 11}, .k = {3, 3}, .stride = {2, 2}, .lo = {1, 1}, .hi = {1, 1}, .bias = 1,
         .post = DISC_POST_RELU6, .layout = DISC_NHWC_SRC | DISC_NHWC_DST, .not_how = "brdgmm", .wconst = 1},
        {.name = "2-D depthwise nhwc 5x5, direct kernel", .nsp = 2, .n = 1, .c = 48, .o = 48, .groups = 48,
         .in = {14, 14}, .k = {5, 5}, .lo = {2, 2}, .hi = {2, 2}, .layout = DISC_NHWC_SRC | DISC_NHWC_DST,
         .not_how = "brdgmm", .wconst = 1},
        /* H x 1 images and windows: run turned to 1 x H (conv_turned) */
        {.name = "2-D H x 1", .nsp = 2, .n = 3, .c = 16, .o = 24, .groups = 1, .in = {37, 1}, .k = {5, 1},
         .stride = {2, 1}, .dil = {2, 1}, .lo = {3, 0}, .hi = {1, 0}, .bias = 1, .residual = 1},
        {.name = "2-D H x 1 nhwc", .nsp = 2, .n = 2, .c = 8, .o = 16, .groups = 1, .in = {20, 1}, .k = {5, 1},
         .layout = DISC_NHWC_SRC | DISC_NHWC_DST},
        {.name = "2-D H x 1 transposed", .nsp = 2, .transpose = 1, .n = 2, .c = 6, .o = 4, .groups = 1,
         .in = {9, 1}, .k = {3, 1}, .stride = {2, 1}, .opad = {1, 0}},
        {.name = "2-D 1x1 swish residual", .nsp = 2, .n = 2, .c = 48, .o = 16, .groups = 1, .in = {5, 5},
         .k = {1, 1}, .residual = 1, .post = DISC_POST_SWISH},
        {.name = "1-D", .nsp = 1, .n = 2, .c = 3, .o = 5, .groups = 1, .in = {20}, .k = {4}, .stride = {3},
         .dil = {2}, .lo = {1}, .hi = {2}},
        {.name = "3-D", .nsp = 3, .n = 1, .c = 2, .o = 3, .groups = 1, .in = {5, 6, 4}, .k = {2, 3, 2},
         .stride = {1, 2, 1}, .dil = {1, 1, 2}, .lo = {0, 1, 1}, .hi = {1, 0, 1}},
        {.name = "transpose plain", .nsp = 2, .transpose = 1, .n = 2, .c = 3, .o = 4, .groups = 1, .in = {5, 6},
         .k = {3, 3}},
        {.name = "transpose stride 2 pad", .nsp = 2, .transpose = 1, .n = 1, .c = 4, .o = 3, .groups = 1,
         .in = {5, 4}, .k = {3, 3}, .stride = {2, 2}, .lo = {1, 1}, .hi = {1, 1}},
        {.name = "transpose output padding", .nsp = 2, .transpose = 1, .n = 1, .c = 2, .o = 3, .groups = 1,
         .in = {4, 5}, .k = {3, 3}, .stride = {2, 2}, .lo = {1, 1}, .hi = {1, 1}, .opad = {1, 1}},
        {.name = "transpose groups 2 dilation", .nsp = 2, .transpose = 1, .n = 2, .c = 4, .o = 6, .groups = 2,
         .in = {4, 5}, .k = {3, 2}, .stride = {2, 1}, .dil = {2, 1}, .lo = {1, 0}, .hi = {0, 1}},
        {.name = "transpose bias tanh", .nsp = 1, .transpose = 1, .n = 2, .c = 3, .o = 2, .groups = 1, .in = {7},
         .k = {3}, .stride = {2}, .lo = {0}, .hi = {0}, .bias = 1, .post = DISC_POST_TANH},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        run_conv(rt, &cases[i]);
    disc_rt_free(rt);

    /* on one thread: wino_worth weighs the bytes by the threads */
    rt = disc_rt_new(&(DiscRtOpts){.threads = 1});
    const ConvCase wino[] = {
        /* oneDNN's Winograd kernels on AVX-512 (dnnl.c wino_worth): taken for
         * a large image against the channels, not for a small one, nor with
         * a residual (a binary post-op it has no kernel for) */
        {.name = "2-D 3x3 nhwc 40 x 40, Winograd", .nsp = 2, .n = 1, .c = 64, .o = 64, .groups = 1,
         .in = {40, 40}, .k = {3, 3}, .lo = {1, 1}, .hi = {1, 1}, .bias = 1, .post = DISC_POST_RELU,
         .layout = DISC_NHWC_SRC | DISC_NHWC_DST, .wconst = 1, .how512 = "_wino"},
        {.name = "2-D 3x3 batch 3, odd sizes, Winograd", .nsp = 2, .n = 3, .c = 64, .o = 64, .groups = 1,
         .in = {37, 31}, .k = {3, 3}, .lo = {1, 1}, .hi = {1, 1}, .wconst = 1, .how512 = "_wino"},
        {.name = "2-D 3x3 nhwc 7 x 7 of 256 channels, direct", .nsp = 2, .n = 1, .c = 256, .o = 256,
         .groups = 1, .in = {7, 7}, .k = {3, 3}, .lo = {1, 1}, .hi = {1, 1}, .layout = DISC_NHWC_SRC | DISC_NHWC_DST,
         .wconst = 1, .not_how = "_wino"},
        {.name = "2-D 3x3 30 x 30 with a residual, direct", .nsp = 2, .n = 1, .c = 64, .o = 64, .groups = 1,
         .in = {30, 30}, .k = {3, 3}, .lo = {1, 1}, .hi = {1, 1}, .residual = 1, .post_res = DISC_POST_RELU,
         .layout = DISC_NHWC_SRC | DISC_NHWC_DST | DISC_NHWC_RES, .wconst = 1, .not_how = "_wino"},
    };
    for (size_t i = 0; i < sizeof wino / sizeof *wino; i++)
        run_conv(rt, &wino[i]);
    disc_rt_free(rt);
}

/* ---- packed constant weights -------------------------------------------------- */

static DiscRtCacheStats stats(void)
{
    DiscRtCacheStats s;
    disc_rt_cache_stats(&s);
    return s;
}

/* d run on a (b as plain weights) and as constant weights agree exactly or
 * nearly (a packed layout may sum in another order). */
static void same_mm(DiscRt *rt, const char *what, DiscMatmul d, const float *a, const float *b, int64_t nc)
{
    float *want = malloc((size_t)nc * sizeof *want), *got = malloc((size_t)nc * sizeof *got);
    d.weights_const = 0;
    CHECK_MSG(disc_rt_matmul(rt, &d, a, b, want) == 0, "%s plain: %s", what, disc_rt_error(rt));
    d.weights_const = 1;
    CHECK_MSG(disc_rt_matmul(rt, &d, a, b, got) == 0, "%s packed: %s", what, disc_rt_error(rt));
    double e = 0;
    for (int64_t i = 0; i < nc; i++) {
        double r = fabs((double)got[i] - want[i]) / (1 + fabs(want[i]));
        e = r > e ? r : e;
    }
    CHECK_MSG(e < 1e-5, "%s: packed differs from plain by %g", what, e);
    disc_rt_reset(rt);
    free(want), free(got);
}

static void test_packed(void)
{
    DiscRt *rt = disc_rt_new(&(DiscRtOpts){.threads = 0});
    /* shapes: row-major and transposed B, with bias, gelu and residual, batched with B shared */
    const MmCase cases[] = {
        {.name = "packed 64", .batch = 1, .m = 64, .n = 64, .k = 64},
        {.name = "packed odd", .batch = 1, .m = 37, .n = 129, .k = 65, .bias = 1, .post = DISC_POST_GELU_ERF},
        {.name = "packed m1", .batch = 1, .m = 1, .n = 100, .k = 37, .residual = 1},
        {.name = "packed transposed B", .batch = 1, .m = 33, .n = 70, .k = 50, .transB = 1},
        {.name = "packed batch, B shared", .batch = 3, .m = 5, .n = 70, .k = 9, .bcastB = 1, .gapA = 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const MmCase *t = &cases[i];
        int64_t B = t->batch, M = t->m, N = t->n, K = t->k, asz = M * K + t->gapA;
        DiscMatmul d = {.dtype = DT_F32, .batch = B, .m = M, .n = N, .k = K, .post = t->post,
                        .a_stride = {asz, K, 1}, .b_stride = {t->bcastB ? 0 : K * N, t->transB ? 1 : N,
                                                              t->transB ? K : 1},
                        .c_stride = {M * N, N, 1}};
        float *a = rnd_buf(B * asz), *b = rnd_buf((t->bcastB ? 1 : B) * K * N);
        float *bias = t->bias ? rnd_buf(N) : NULL, *res = t->residual ? rnd_buf(B * M * N) : NULL;
        d.bias = bias;
        d.residual = res;
        same_mm(rt, t->name, d, a, b, B * M * N);
        MmCase c = *t; /* and against the double reference */
        c.wconst = 1;
        run_mm(rt, &c);
        disc_rt_weights_forget(b, (int64_t)sizeof(float) * (t->bcastB ? 1 : B) * K * N);
        free(a), free(b), free(bias), free(res);
    }

    /* the right half of a row-major B (a column slice: its rows stride past
     * its width), packed without reading past the end of B */
    {
        int64_t M = 7, N = 70, K = 33;
        float *a = rnd_buf(M * K), *b = rnd_buf(K * 2 * N);
        DiscMatmul d = {.dtype = DT_F32, .batch = 1, .m = M, .n = N, .k = K, .a_stride = {0, K, 1},
                        .b_stride = {0, 2 * N, 1}, .c_stride = {0, N, 1}};
        same_mm(rt, "column slice", d, a, b + N, M * N);
        disc_rt_weights_forget(b, (int64_t)sizeof *b * K * 2 * N);
        free(a), free(b);
    }

    /* reuse: one weight tensor is packed once for every m, two tensors
     * twice, where oneDNN picks a packed layout for them (AVX-512's
     * brgemm); where it runs on the plain layout (AVX2's gemm:jit),
     * nothing is packed. Asked of oneDNN, per shape, not assumed. */
    int64_t N = 96, K = 80, M = 300;
    float *a = rnd_buf(M * K), *w1 = rnd_buf(K * N), *w2 = rnd_buf(K * N);
    DiscMatmul d = {.dtype = DT_F32, .batch = 1, .n = N, .k = K, .a_stride = {0, K, 1}, .b_stride = {0, N, 1},
                    .c_stride = {0, N, 1}};
    DiscRtCacheStats s0 = stats();
    static const int64_t ms[] = {1, 13, 128, 300, 13};
    int packs = 0; /* shapes for which oneDNN packs */
    for (size_t i = 0; i < sizeof ms / sizeof *ms; i++) {
        d.m = ms[i];
        int p = disc_rt_matmul_packs_weights(rt, &d);
        CHECK_MSG(p >= 0, "packs_weights: %s", disc_rt_error(rt));
        packs += p > 0;
        same_mm(rt, "w1", d, a, w1, d.m * N);
        same_mm(rt, "w2", d, a, w2, d.m * N);
    }
    int64_t want = packs ? 2 : 0;
    printf("note: oneDNN packs row-major f32 weights for %d of 5 shapes on this CPU\n", packs);
    DiscRtCacheStats s1 = stats();
    CHECK_MSG(s1.packs - s0.packs == want, "two weights over five shapes: %lld packs, %lld expected",
              (long long)(s1.packs - s0.packs), (long long)want);
    CHECK(s1.packed - s0.packed == want);
    CHECK(s1.packed_bytes - s0.packed_bytes >= want * (int64_t)sizeof(float) * K * N);

    /* the guard: new values at the same address (without a forget) are repacked */
    for (int64_t i = 0; i < K * N; i++)
        w1[i] = rnd();
    d.m = 13;
    same_mm(rt, "w1 changed", d, a, w1, d.m * N);
    CHECK(stats().packs - s1.packs == want / 2);
    CHECK(stats().packed == s1.packed);

    /* forget drops exactly the copies inside the range */
    disc_rt_weights_forget(w1, (int64_t)sizeof(float) * K * N);
    CHECK(stats().packed == s1.packed - want / 2);
    same_mm(rt, "w2 after forgetting w1", d, a, w2, d.m * N);
    CHECK(stats().packs - s1.packs == want / 2); /* w2 is still packed */
    disc_rt_weights_forget(w2, (int64_t)sizeof(float) * K * N);
    CHECK(stats().packed == s0.packed);

    /* a weight whose hash the loader knew: its packed copies are kept in
     * its store and mapped from there once the process's copy is gone;
     * a damaged file is made again, never used */
    {
        char dir[] = "/tmp/disc_test_packed.XXXXXX", file[600];
        float *w3 = rnd_buf(K * N);
        CHECK(mkdtemp(dir) != NULL);
        CHECK(disc_rt_known_add(w3, store_hash(w3, sizeof(float) * K * N, sizeof(float) * K * N), dir) == 1);
        for (int round = 0; round < 3; round++) {
            for (size_t i = 0; i < sizeof ms / sizeof *ms; i++) {
                d.m = ms[i];
                same_mm(rt, round == 0 ? "w3 stored" : round == 1 ? "w3 mapped" : "w3 made again", d, a, w3,
                        d.m * N);
            }
            int files = files_ending(dir, ".wts", file, sizeof file);
            CHECK_MSG(packs ? files >= 1 : files == 0, "round %d: %d files in the store", round, files);
            disc_rt_weights_forget(w3, (int64_t)sizeof(float) * K * N);
            if (round == 1 && files) { /* damage every copy */
                usleep(20000); /* in a later tick of the file clock than their marks' (ir/store.c) */
                DIR *dp = opendir(dir);
                struct dirent *de;
                while (dp && (de = readdir(dp))) {
                    char p[700];
                    snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
                    FILE *f = de->d_name[0] != '.' ? fopen(p, "r+b") : NULL;
                    float big = 1e30f;
                    for (int j = 0; f && j < 64; j++) /* the first 64 weights */
                        if (fseek(f, 4096 + 4 * j, SEEK_SET) == 0)
                            fwrite(&big, 4, 1, f);
                    if (f)
                        fclose(f);
                }
                if (dp)
                    closedir(dp);
            }
        }
        disc_rt_known_remove(w3);
        uint64_t h;
        CHECK(!disc_rt_known(w3, &h, file, sizeof file));
        char cmd[700];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        CHECK(system(cmd) == 0);
        free(w3);
    }

    /* no cache: weights_const runs on the weights as they are, keeps nothing */
    int cap = disc_rt_cache_set_capacity(0);
    same_mm(rt, "no cache", d, a, w1, d.m * N);
    CHECK(stats().packed == 0);
    disc_rt_cache_set_capacity(cap);

    /* a convolution with constant weights agrees with the plain one */
    DiscConv c = {.dtype = DT_F32, .nsp = 2, .n = 2, .c = 16, .o = 32, .groups = 1, .in = {9, 9}, .k = {3, 3},
                  .out = {9, 9}, .stride = {1, 1}, .dilation = {1, 1}, .pad_lo = {1, 1}, .pad_hi = {1, 1},
                  .post = DISC_POST_RELU};
    int64_t nx = 2 * 16 * 81, nw = 32 * 16 * 9, ny = 2 * 32 * 81;
    float *x = rnd_buf(nx), *w = rnd_buf(nw), *y0 = malloc((size_t)ny * 4), *y1 = malloc((size_t)ny * 4);
    CHECK(disc_rt_conv(rt, &c, x, w, y0) == 0);
    c.weights_const = 1;
    CHECK(disc_rt_conv(rt, &c, x, w, y1) == 0);
    CHECK(disc_rt_conv(rt, &c, x, w, y1) == 0);
    double e = 0;
    for (int64_t i = 0; i < ny; i++)
        e = fmax(e, fabs((double)y1[i] - y0[i]) / (1 + fabs(y0[i])));
    CHECK_MSG(e < 1e-5, "conv: packed differs from plain by %g", e);
    disc_rt_weights_forget(w, nw * 4);
    CHECK(stats().packed == 0);
    disc_rt_free(rt);
    free(a), free(w1), free(w2), free(x), free(w), free(y0), free(y1);
}

/* Two threads split a matmul on constant weights over the pool: a small m
 * by column parts (dense parts copied into C, the residual added there), a
 * large m by rows. Either way the weights are packed once, whole, and each
 * column part runs on its panels of that copy. */
static void test_split(void)
{
    DiscRt *rt = disc_rt_new(&(DiscRtOpts){.threads = 2});
    for (int tb = 0; tb < 2; tb++) {
        int64_t N = 200, K = 512, M = 300; /* 4 panels: parts of 128 and 72 columns */
        float *a = rnd_buf(M * K), *w = rnd_buf(K * N), *bias = rnd_buf(N), *res = rnd_buf(M * N);
        DiscMatmul d = {.dtype = DT_F32, .batch = 1, .n = N, .k = K, .a_stride = {0, K, 1},
                        .b_stride = {0, tb ? 1 : N, tb ? K : 1}, .c_stride = {0, N, 1}, .bias = bias,
                        .post = DISC_POST_GELU_ERF, .residual = res};
        DiscRtCacheStats s0 = stats();
        static const int64_t ms[] = {13, 300, 1, 13};
        d.m = 300;
        int whole = disc_rt_matmul_packs_weights(rt, &d);
        CHECK_MSG(whole >= 0, "packs_weights: %s", disc_rt_error(rt));
        for (size_t i = 0; i < sizeof ms / sizeof *ms; i++) {
            d.m = ms[i];
            same_mm(rt, tb ? "split, B transposed" : "split", d, a, w, d.m * N);
        }
        DiscRtCacheStats s1 = stats();
        for (size_t i = 0; i < sizeof ms / sizeof *ms; i++) { /* shapes seen before pack nothing */
            d.m = ms[i];
            same_mm(rt, tb ? "split again, B transposed" : "split again", d, a, w, d.m * N);
        }
        CHECK_MSG(stats().packs == s1.packs, "split: %lld packs for shapes seen before",
                  (long long)(stats().packs - s1.packs));
        /* where oneDNN packs panels (AVX-512), the whole is packed once
         * and the column parts run on its panels; where it keeps a dense
         * layout (AVX2), a part may get a dense copy of its columns, but
         * the copies add up to at most the whole once more */
        if (whole) {
            CHECK_MSG(s1.packs - s0.packs == 1, "split: one weight packed %lld times",
                      (long long)(s1.packs - s0.packs));
            CHECK(s1.packed - s0.packed == 1);
        }
        CHECK(s1.packed - s0.packed == s1.packs - s0.packs);
        CHECK_MSG(s1.packed_bytes - s0.packed_bytes <= 2 * (int64_t)sizeof(float) * (K + 15) * (N + 63),
                  "split: %lld bytes of copies for %lld bytes of weights", (long long)(s1.packed_bytes - s0.packed_bytes),
                  (long long)(4 * K * N));
        disc_rt_weights_forget(w, (int64_t)sizeof(float) * K * N);
        CHECK(stats().packed == s0.packed);
        free(a), free(w), free(bias), free(res);
    }
    /* batches in parts (B per batch, then A shared by the batch) agree with one thread */
    DiscRt *one = disc_rt_new(&(DiscRtOpts){.threads = 1});
    for (int shared = 0; shared < 2; shared++) {
        int64_t Bt = 5, M = 32, N = 64, K = 128;
        float *a = rnd_buf(Bt * M * K), *b = rnd_buf(Bt * K * N), *res = rnd_buf(Bt * M * N);
        float *c1 = malloc(sizeof(float) * (size_t)(Bt * M * N)), *c2 = malloc(sizeof(float) * (size_t)(Bt * M * N));
        DiscMatmul d = {.dtype = DT_F32, .batch = Bt, .m = M, .n = N, .k = K, .a_stride = {shared ? 0 : M * K, K, 1},
                        .b_stride = {K * N, N, 1}, .c_stride = {M * N, N, 1}, .residual = res};
        CHECK_MSG(disc_rt_matmul(one, &d, a, b, c1) == 0, "batch parts: %s", disc_rt_error(one));
        CHECK_MSG(disc_rt_matmul(rt, &d, a, b, c2) == 0, "batch parts: %s", disc_rt_error(rt));
        double e = 0;
        for (int64_t i = 0; i < Bt * M * N; i++)
            e = fmax(e, fabs((double)c2[i] - c1[i]) / (1 + fabs(c1[i])));
        CHECK_MSG(e < 1e-5, "batch parts%s differ from one thread by %g", shared ? " (A shared)" : "", e);
        disc_rt_reset(rt);
        disc_rt_reset(one);
        free(a), free(b), free(res), free(c1), free(c2);
    }
    disc_rt_free(one);
    disc_rt_free(rt);
}

/* Every way a matmul is split over two threads, at the CTC head's widths
 * (issue 15): N = 6625 (parts of 3328 and 3297 columns: a tail that is no
 * whole panel), 1000, and 70 (one panel and a tail: too narrow to split).
 * B from 1 to 8 times T rows, four ways: as the host flow passes them
 * (batch 1, B*T rows); as a batch with B shared (folded into B*T rows:
 * columns below 256 rows, rows from there, 8 x 40 = 320 in two parts of
 * 160, 7 x 41 = 287 in 144 and a tail of 143); as a batch with a gap
 * between A's batches (not foldable: by batch, an odd count leaving a
 * tail part); with B per batch (by batch). Bias, residual and an
 * activation in turn. C lies between guard zones that must come back
 * untouched, so a part written past C fails here without ASan too. */
enum { GUARD = 4096 };

static void split_case(DiscRt *rt, int form, int64_t Bt, int64_t T, int64_t N, int extra)
{
    static const char *const forms[] = {"rows", "batch, B shared", "batch, gap in A", "batch, B per batch"};
    const int64_t K = 32, gap = 3;
    int64_t batch = form ? Bt : 1, M = form ? T : Bt * T, asz = M * K + (form == 2 ? gap : 0);
    int64_t nb = form == 3 ? Bt : 1, nc = Bt * T * N;
    float *a = rnd_buf(batch * asz), *w = rnd_buf(nb * K * N);
    float *bias = extra & 1 ? rnd_buf(N) : NULL, *res = extra & 2 ? rnd_buf(nc) : NULL;
    float *buf = malloc((size_t)(nc + 2 * GUARD) * sizeof *buf), *c = buf + GUARD;
    for (int64_t i = 0; i < nc + 2 * GUARD; i++)
        buf[i] = -12345.0f;
    DiscPost post = extra & 4 ? DISC_POST_GELU_ERF : DISC_POST_NONE;
    DiscMatmul d = {.dtype = DT_F32, .batch = batch, .m = M, .n = N, .k = K, .bias = bias, .post = post,
                    .residual = res, .weights_const = 1, .a_stride = {batch > 1 ? asz : 0, K, 1},
                    .b_stride = {form == 3 ? K * N : 0, N, 1}, .c_stride = {batch > 1 ? M * N : 0, N, 1}};
    int rc = disc_rt_matmul(rt, &d, a, w, c);
    CHECK_MSG(rc == 0, "split %s B %lld T %lld N %lld: %s", forms[form], (long long)Bt, (long long)T,
              (long long)N, disc_rt_error(rt) ? disc_rt_error(rt) : "");
    int64_t bad = 0;
    for (int64_t i = 0; i < GUARD; i++)
        bad += buf[i] != -12345.0f || c[nc + i] != -12345.0f;
    CHECK_MSG(bad == 0, "split %s B %lld T %lld N %lld: %lld guard floats written", forms[form], (long long)Bt,
              (long long)T, (long long)N, (long long)bad);
    double e = 0;
    for (int64_t bt = 0; rc == 0 && bt < batch; bt++)
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                const float *ar = a + bt * d.a_stride[0] + i * K, *wc = w + bt * d.b_stride[0] + j;
                double s = 0;
                for (int64_t p = 0; p < K; p++)
                    s += (double)ar[p] * wc[p * N];
                s = post_ref(post, s + (bias ? bias[j] : 0));
                int64_t o = (bt * M + i) * N + j;
                s += res ? res[o] : 0;
                double r = fabs(c[o] - s) / (1 + fabs(s));
                e = r > e ? r : e;
            }
    CHECK_MSG(e < 1e-4, "split %s B %lld T %lld N %lld extra %d: error %g", forms[form], (long long)Bt,
              (long long)T, (long long)N, extra, e);
    disc_rt_reset(rt);
    disc_rt_weights_forget(w, (int64_t)sizeof *w * nb * K * N);
    free(a), free(w), free(bias), free(res), free(buf);
}

static void test_split_paths(void)
{
    DiscRt *rt = disc_rt_new(&(DiscRtOpts){.threads = 2});
    static const int64_t ns[] = {6625, 1000, 70};
    static const int64_t bts[][2] = {{1, 40}, {2, 20}, {3, 7}, {4, 25}, {5, 1}, {8, 10}, {8, 40}, {7, 41}};
    int extra = 0;
    for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++)
        for (size_t si = 0; si < sizeof bts / sizeof *bts; si++)
            for (int form = 0; form < 4; form++)
                split_case(rt, form, bts[si][0], bts[si][1], ns[ni], extra++ % 8);
    disc_rt_free(rt);
}

/* bf16 math: constant weights multiply in bf16, within bf16's precision of
 * the f32 product, and visibly not the f32 path itself. */
static void test_bf16(void)
{
    int old = disc_rt_set_fpmath_bf16(1);
    if (old < 0) {
        printf("note: bf16 math: no bf16 matmul on this CPU, not tested\n");
        return;
    }
    DiscRt *rt = disc_rt_new(&(DiscRtOpts){.threads = 0});
    int64_t M = 37, N = 70, K = 64;
    float *a = rnd_buf(M * K), *b = rnd_buf(K * N), *bias = rnd_buf(N), *res = rnd_buf(M * N);
    float *c16 = malloc((size_t)(M * N) * sizeof *c16), *c32 = malloc((size_t)(M * N) * sizeof *c32);
    DiscMatmul d = {.dtype = DT_F32, .batch = 1, .m = M, .n = N, .k = K, .a_stride = {0, K, 1},
                    .b_stride = {0, N, 1}, .c_stride = {0, N, 1}, .bias = bias, .residual = res,
                    .post = DISC_POST_RELU, .weights_const = 1};
    CHECK_MSG(disc_rt_matmul(rt, &d, a, b, c16) == 0, "bf16: %s", disc_rt_error(rt));
    d.weights_const = 0; /* non-constant weights stay f32 */
    CHECK_MSG(disc_rt_matmul(rt, &d, a, b, c32) == 0, "f32: %s", disc_rt_error(rt));
    double e = 0;
    for (int64_t i = 0; i < M * N; i++)
        e = fmax(e, fabs((double)c16[i] - c32[i]) / (1 + fabs(c32[i])));
    CHECK_MSG(e > 1e-6 && e < 3e-2, "bf16 against f32: relative error %g", e);
    CHECK(disc_rt_set_fpmath_bf16(0) == 1);
    d.weights_const = 1; /* off again: the f32 packed path */
    CHECK(disc_rt_matmul(rt, &d, a, b, c16) == 0);
    e = 0;
    for (int64_t i = 0; i < M * N; i++)
        e = fmax(e, fabs((double)c16[i] - c32[i]) / (1 + fabs(c32[i])));
    CHECK_MSG(e < 1e-5, "f32 packed after bf16: relative error %g", e);
    disc_rt_weights_forget(b, K * N * (int64_t)sizeof *b);
    disc_rt_set_fpmath_bf16(old);
    disc_rt_free(rt);
    free(a), free(b), free(bias), free(res), free(c16), free(c32);
}

/* ---- pool -------------------------------------------------------------------- */

static void pool_ref(const DiscPool *d, const float *x, double *y)
{
    int nsp = d->nsp;
    int64_t nin = numel_sp(nsp, d->in), nout = numel_sp(nsp, d->out), nk = numel_sp(nsp, d->window);
    int64_t os[3], ks[3];
    for (int64_t pl = 0; pl < d->n * d->c; pl++)
        for (int64_t p = 0; p < nout; p++) {
            unravel(p, nsp, d->out, os);
            double acc = d->max ? -INFINITY : 0;
            int64_t count = 0;
            for (int64_t kf = 0; kf < nk; kf++) {
                unravel(kf, nsp, d->window, ks);
                int64_t off = 0;
                bool inside = true, in_pad = true;
                for (int i = 0; i < nsp; i++) {
                    int64_t pos = os[i] * d->stride[i] - d->pad_lo[i] + ks[i] * d->dilation[i];
                    inside = inside && pos >= 0 && pos < d->in[i];
                    in_pad = in_pad && pos >= -d->pad_lo[i] && pos < d->in[i] + d->pad_hi[i];
                    if (inside)
                        off = off * d->in[i] + pos;
                }
                if (inside || (d->count_pad && in_pad))
                    count++;
                if (!inside)
                    continue;
                double v = x[pl * nin + off];
                acc = d->max ? (v > acc ? v : acc) : acc + v;
            }
            y[pl * nout + p] = d->max ? acc : acc / (double)count;
        }
}

static void test_pool(void)
{
    DiscRt *rt = disc_rt_new(&(DiscRtOpts){.threads = 0});
    const struct {
        const char *name;
        int nsp, max, count_pad;
        int64_t in[3], win[3], stride[3], dil[3], lo[3], hi[3];
    } cases[] = {
        {.name = "max 2x2", .nsp = 2, .max = 1, .count_pad = 0, .in = {8, 8}, .win = {2, 2}, .stride = {2, 2}},
        {.name = "max 3x3 stride 2 pad", .nsp = 2, .max = 1, .count_pad = 0, .in = {9, 10}, .win = {3, 3},
         .stride = {2, 2}, .lo = {1, 1}, .hi = {1, 1}},
        {.name = "max dilation", .nsp = 2, .max = 1, .count_pad = 0, .in = {9, 10}, .win = {3, 2}, .stride = {1, 2},
         .dil = {2, 2}, .lo = {1, 0}, .hi = {1, 1}},
        {.name = "avg exclude pad", .nsp = 2, .max = 0, .count_pad = 0, .in = {9, 10}, .win = {3, 3},
         .stride = {2, 2}, .lo = {1, 1}, .hi = {1, 1}},
        {.name = "avg include pad", .nsp = 2, .max = 0, .count_pad = 1, .in = {9, 10}, .win = {3, 3},
         .stride = {2, 2}, .lo = {1, 1}, .hi = {1, 1}},
        {.name = "avg include pad uneven", .nsp = 2, .max = 0, .count_pad = 1, .in = {7, 6}, .win = {3, 2},
         .stride = {2, 1}, .lo = {2, 0}, .hi = {0, 1}},
        {.name = "avg 1-D", .nsp = 1, .max = 0, .count_pad = 0, .in = {20}, .win = {4}, .stride = {3}, .lo = {2},
         .hi = {1}},
        {.name = "max 3-D", .nsp = 3, .max = 1, .count_pad = 0, .in = {4, 5, 6}, .win = {2, 2, 3},
         .stride = {2, 1, 2}, .lo = {0, 1, 1}, .hi = {1, 0, 1}},
    };
    for (size_t t = 0; t < sizeof cases / sizeof *cases; t++) {
        DiscPool d = {.dtype = DT_F32, .nsp = cases[t].nsp, .max = cases[t].max, .n = 2, .c = 3,
                      .count_pad = cases[t].count_pad};
        for (int i = 0; i < d.nsp; i++) {
            d.in[i] = cases[t].in[i];
            d.window[i] = cases[t].win[i];
            d.stride[i] = cases[t].stride[i] ? cases[t].stride[i] : 1;
            d.dilation[i] = cases[t].dil[i] ? cases[t].dil[i] : 1;
            d.pad_lo[i] = cases[t].lo[i];
            d.pad_hi[i] = cases[t].hi[i];
            d.out[i] = (d.in[i] + d.pad_lo[i] + d.pad_hi[i] - d.dilation[i] * (d.window[i] - 1) - 1) / d.stride[i] + 1;
        }
        int64_t nx = d.n * d.c * numel_sp(d.nsp, d.in), ny = d.n * d.c * numel_sp(d.nsp, d.out);
        float *x = rnd_buf(nx), *y = malloc((size_t)ny * sizeof *y);
        double *want = malloc((size_t)ny * sizeof *want);
        pool_ref(&d, x, want);
        int rc = disc_rt_pool(rt, &d, x, y);
        CHECK_MSG(rc == 0, "%s: %s", cases[t].name, disc_rt_error(rt) ? disc_rt_error(rt) : "");
        if (rc == 0) {
            double e = max_err(y, want, ny);
            CHECK_MSG(e < 1e-5, "%s: error %g", cases[t].name, e);
        }
        disc_rt_reset(rt);
        free(x), free(y), free(want);
    }
    /* a window longer than the padded input by at most a stride fits 0
     * times: an empty result, as the shape rule (floor division) and the
     * interpreter say (a 2x2 max pool over 1x1, as a 32-pixel-high image
     * meets the PaddleOCR classifier's pool); longer still is an error */
    float x1[6] = {1, 2, 3, 4, 5, 6}, y1[1] = {-7};
    DiscPool e = {.dtype = DT_F32, .nsp = 2, .max = 1, .n = 2, .c = 3, .in = {1, 1}, .window = {2, 2},
                  .stride = {2, 2}, .dilation = {1, 1}, .out = {0, 0}};
    CHECK_MSG(disc_rt_pool(rt, &e, x1, y1) == 0 && y1[0] == -7, "empty pool: %s",
              disc_rt_error(rt) ? disc_rt_error(rt) : "wrote its result");
    e.stride[0] = e.stride[1] = 1;
    e.window[0] = 3;
    CHECK(disc_rt_pool(rt, &e, x1, y1) != 0 && strstr(disc_rt_error(rt), "does not match"));
    disc_rt_reset(rt);
    DiscConv ec = {.dtype = DT_F32, .nsp = 1, .n = 1, .c = 1, .o = 1, .groups = 1, .in = {1}, .k = {3},
                   .out = {0}, .stride = {2}, .dilation = {1}};
    CHECK_MSG(disc_rt_conv(rt, &ec, x1, x1, y1) == 0 && y1[0] == -7, "empty conv: %s",
              disc_rt_error(rt) ? disc_rt_error(rt) : "wrote its result");
    disc_rt_free(rt);
}

/* ---- errors ------------------------------------------------------------------ */

static void expect_fail(DiscRt *rt, int rc, const char *what, const char *part)
{
    const char *e = disc_rt_error(rt);
    CHECK_MSG(rc == -1 && e && strstr(e, part), "%s: rc %d, message \"%s\"", what, rc, e ? e : "(none)");
    disc_rt_reset(rt);
}

static void test_errors(void)
{
    DiscRt *rt = disc_rt_new(&(DiscRtOpts){.threads = 2});
    float buf[64] = {0};
    DiscMatmul m = {.dtype = DT_F32, .batch = 1, .m = 2, .n = 2, .k = 2, .a_stride = {0, 2, 1},
                    .b_stride = {0, 2, 1}, .c_stride = {0, 2, 1}};
    DiscMatmul bad = m;
    bad.m = -1;
    expect_fail(rt, disc_rt_matmul(rt, &bad, buf, buf, buf), "negative m", "negative dims");
    bad = m;
    bad.dtype = DT_I32;
    expect_fail(rt, disc_rt_matmul(rt, &bad, buf, buf, buf), "i32", "unsupported dtype i32");
    bad.dtype = 99;
    expect_fail(rt, disc_rt_matmul(rt, &bad, buf, buf, buf), "dtype 99", "unsupported dtype");
    bad = m;
    bad.post = (DiscPost)42;
    expect_fail(rt, disc_rt_matmul(rt, &bad, buf, buf, buf), "post 42", "post-op");
    bad = m;
    bad.batch = 2;
    bad.c_stride[0] = 0;
    expect_fail(rt, disc_rt_matmul(rt, &bad, buf, buf, buf), "broadcast C", "broadcast");
    bad = m;
    bad.a_stride[1] = -2;
    expect_fail(rt, disc_rt_matmul(rt, &bad, buf, buf, buf), "negative stride", "negative strides");
    expect_fail(rt, disc_rt_matmul(rt, &m, NULL, buf, buf), "NULL a", "NULL");
    CHECK(disc_rt_matmul(rt, &m, buf, buf, buf + 8) == 0);

    DiscConv c = {.dtype = DT_F32, .nsp = 2, .n = 1, .c = 2, .o = 2, .groups = 1, .in = {3, 3}, .k = {2, 2},
                  .out = {2, 2}, .stride = {1, 1}, .dilation = {1, 1}};
    CHECK(disc_rt_conv(rt, &c, buf, buf + 20, buf + 40) == 0);
    DiscConv bc = c;
    bc.nsp = 4;
    expect_fail(rt, disc_rt_conv(rt, &bc, buf, buf, buf), "nsp 4", "spatial dims");
    bc = c;
    bc.groups = 3;
    expect_fail(rt, disc_rt_conv(rt, &bc, buf, buf, buf), "groups 3", "groups must divide");
    bc = c;
    bc.out[1] = 3;
    expect_fail(rt, disc_rt_conv(rt, &bc, buf, buf, buf), "bad out", "does not match");
    bc = c;
    bc.stride[0] = 0;
    expect_fail(rt, disc_rt_conv(rt, &bc, buf, buf, buf), "stride 0", "must be positive");
    bc = c;
    bc.pad_lo[0] = -1;
    expect_fail(rt, disc_rt_conv(rt, &bc, buf, buf, buf), "negative pad", "not negative");
    bc = c;
    bc.dtype = DT_I8;
    expect_fail(rt, disc_rt_conv(rt, &bc, buf, buf, buf), "i8 conv", "unsupported dtype");
    bc = c;
    bc.transpose = 1; /* out 2 < (3-1)*1 + 2 = 4 */
    expect_fail(rt, disc_rt_conv(rt, &bc, buf, buf, buf), "transpose out", "does not match");

    DiscPool p = {.dtype = DT_F32, .nsp = 1, .max = 1, .n = 1, .c = 1, .in = {4}, .window = {2}, .out = {3},
                  .stride = {1}, .dilation = {1}};
    CHECK(disc_rt_pool(rt, &p, buf, buf + 8) == 0);
    CHECK(buf[8] == 0);
    DiscPool bp = p;
    bp.out[0] = 4;
    expect_fail(rt, disc_rt_pool(rt, &bp, buf, buf), "pool out", "does not match");
    bp = p;
    bp.window[0] = 0;
    expect_fail(rt, disc_rt_pool(rt, &bp, buf, buf), "window 0", "must be positive");
    bp = p;
    bp.n = -1;
    expect_fail(rt, disc_rt_pool(rt, &bp, buf, buf), "negative n", "negative");
    disc_rt_free(rt);
}

int main(void)
{
    test_cover();
    test_cover_two_threads();
    test_nested();
    test_alloc();
    test_place();
    test_matmul();
    test_matmul_half();
    test_conv();
    test_packed();
    test_split();
    test_split_paths();
    test_bf16();
    test_pool();
    test_errors();
    if (!getenv("DISC_RT_NO_SHUTDOWN")) /* set it to see the leak checker without the cleanup */
        disc_rt_shutdown();
    return check_done();
}
