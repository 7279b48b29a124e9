/*
 * interp_detect.c — nms: greedy non-maximum suppression, ONNX
 * NonMaxSuppression.
 *
 * Per batch entry b and class c, the boxes whose score passes the
 * threshold are taken in decreasing score (ties: the lower index first;
 * NaN above every number, as topk), and each is kept unless a box kept
 * before it overlaps it by IoU > iou, until max_out are kept. The result
 * lists (b, c, box) in that order: by batch, class, then the order kept.
 *
 * The IoU is ONNX Runtime's: corners normalised with min and max
 * (center 0: [y1, x1, y2, x2]; center 1: [x_center, y_center, width,
 * height], corners at the center -/+ half the side), and no suppression
 * unless the intersection, both areas and the union are positive, in f32
 * in the same order of operations.
 *
 * A candidate is compared with the kept boxes only, as ONNX Runtime does
 * (O(S x kept) a class at most, not O(S^2)): the kept boxes' corners and
 * areas sit in arrays, taken sixteen at a time without a branch (a loop
 * the compiler vectorises), stopping at the first block that suppresses.
 * torchvision's batched_nms offsets each class's boxes so that no two
 * classes overlap and runs one class of every box (SSDlite: 27,000), where
 * most candidates are kept and ONNX Runtime compares each with every kept
 * box; here the kept boxes sit in buckets along x (Grid), and a candidate
 * reads the buckets that may hold a box overlapping it.
 */
#include "runtime/interp_impl.h"
#include "runtime/rt.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { BLOCK = 16 };

/* Corners and areas of boxes, one array each. */
typedef struct Geom {
    float *x0, *x1, *y0, *y1, *area;
} Geom;

typedef bool AnyFn(const Geom *k, int64_t n, const Geom *g, int64_t i, float iou);

static float lo(float a, float b) { return b < a ? b : a; }
static float hi(float a, float b) { return a < b ? b : a; }

static void geom_set(Geom *g, int64_t i, const float *box, bool center)
{
    float x0, x1, y0, y1;
    if (center) {
        float hw = box[2] / 2, hh = box[3] / 2;
        x0 = box[0] - hw, x1 = box[0] + hw;
        y0 = box[1] - hh, y1 = box[1] + hh;
    } else {
        x0 = lo(box[1], box[3]), x1 = hi(box[1], box[3]);
        y0 = lo(box[0], box[2]), y1 = hi(box[0], box[2]);
    }
    g->x0[i] = x0, g->x1[i] = x1, g->y0[i] = y0, g->y1[i] = y1;
    g->area[i] = (x1 - x0) * (y1 - y0);
}

/* Whether kept box j suppresses the candidate (corners x0..y1, area a). */
static inline int suppressed(const Geom *k, int64_t j, float x0, float x1, float y0, float y1, float a, float iou)
{
    float ix0 = hi(x0, k->x0[j]), ix1 = lo(x1, k->x1[j]);
    float iy0 = hi(y0, k->y0[j]), iy1 = lo(y1, k->y1[j]);
    float inter = (ix1 - ix0) * (iy1 - iy0), uni = a + k->area[j] - inter;
    return (ix1 > ix0) & (iy1 > iy0) & (inter > 0) & (a > 0) & (k->area[j] > 0) & (uni > 0) &
           (inter / uni > iou);
}

/* Whether a kept box (of n) suppresses candidate i: blocks of BLOCK
 * without a branch, a loop the compiler vectorises; built for AVX-512, AVX2
 * and the baseline, chosen at each call by disc_rt_vector_bits (as
 * runtime/dnnl.c's Winograd rows; not target_clones, whose resolver runs
 * before ThreadSanitizer's runtime is up). */
#define ANY_SUPPRESSES(name)                                                                          \
    static bool name(const Geom *k, int64_t n, const Geom *g, int64_t i, float iou)                  \
    {                                                                                                 \
        float x0 = g->x0[i], x1 = g->x1[i], y0 = g->y0[i], y1 = g->y1[i], a = g->area[i];             \
        int64_t j = 0;                                                                                \
        for (; j + BLOCK <= n; j += BLOCK) {                                                          \
            int hit = 0;                                                                              \
            for (int t = 0; t < BLOCK; t++)                                                           \
                hit |= suppressed(k, j + t, x0, x1, y0, y1, a, iou);                                  \
            if (hit)                                                                                  \
                return true;                                                                          \
        }                                                                                             \
        for (; j < n; j++)                                                                            \
            if (suppressed(k, j, x0, x1, y0, y1, a, iou))                                             \
                return true;                                                                          \
        return false;                                                                                 \
    }
__attribute__((target("avx512f"))) ANY_SUPPRESSES(any_avx512)
__attribute__((target("avx2"))) ANY_SUPPRESSES(any_avx2)
ANY_SUPPRESSES(any_base)

static bool geom_alloc(Geom *g, int64_t n)
{
    float *p = malloc((size_t)(n > 0 ? n : 1) * 5 * sizeof *p);
    *g = (Geom){p, p + n, p + 2 * n, p + 3 * n, p + 4 * n};
    return p != NULL;
}

/* The kept boxes of a class in buckets along x by their left edge x0,
 * buckets of equal width over the candidates' extent. A kept box overlaps
 * a candidate [x0, x1] along x only if its own x0 lies in (x0 - w, x1), w
 * the widest kept box, so a candidate scans those buckets only (one more
 * below, for rounding): with torchvision's batched_nms each class's boxes
 * sit apart from the others', and a candidate meets the kept boxes of its
 * own class and few more. Without finite coordinates: one bucket. */
typedef struct Bucket {
    Geom g;
    int64_t n, cap;
} Bucket;

typedef struct Grid {
    Bucket *b;
    int nb;
    float lo, step, wide; /* extent's start, bucket width, widest kept box */
} Grid;

static int bucket_of(const Grid *gr, float x)
{
    if (gr->nb == 1)
        return 0;
    float f = (x - gr->lo) / gr->step;
    return f < 0 ? 0 : f >= (float)(gr->nb - 1) ? gr->nb - 1 : (int)f;
}

static bool grid_init(Grid *gr, const Geom *all, const InterpKey *cand, int64_t n)
{
    float lo = INFINITY, hi = -INFINITY;
    bool finite = true;
    for (int64_t r = 0; r < n; r++) {
        int64_t i = cand[r].idx;
        finite &= isfinite(all->x0[i]) && isfinite(all->x1[i]);
        lo = all->x0[i] < lo ? all->x0[i] : lo;
        hi = all->x1[i] > hi ? all->x1[i] : hi;
    }
    int64_t nb = n / 32 < 1 ? 1 : n / 32 > 4096 ? 4096 : n / 32;
    /* a bucket many times wider than the rounding of a coordinate, so
     * that one bucket of margin covers it */
    float mag = fabsf(lo) > fabsf(hi) ? fabsf(lo) : fabsf(hi);
    if (!finite || !(hi > lo) || !isfinite(hi - lo) || (hi - lo) / (float)nb < mag * 0x1p-16f)
        nb = 1;
    gr->nb = (int)nb;
    gr->lo = lo;
    gr->step = nb > 1 ? (hi - lo) / (float)nb : 1;
    gr->wide = 0;
    gr->b = calloc((size_t)nb, sizeof *gr->b);
    return gr->b != NULL;
}

static void grid_free(Grid *gr)
{
    for (int k = 0; gr->b && k < gr->nb; k++) {
        Geom *g = &gr->b[k].g;
        free(g->x0), free(g->x1), free(g->y0), free(g->y1), free(g->area);
    }
    free(gr->b);
    gr->b = NULL;
}

static bool grid_add(Grid *gr, const Geom *all, int64_t i)
{
    Bucket *b = &gr->b[bucket_of(gr, all->x0[i])];
    if (b->n == b->cap) {
        int64_t cap = b->cap ? 2 * b->cap : 16;
        float **f[5] = {&b->g.x0, &b->g.x1, &b->g.y0, &b->g.y1, &b->g.area};
        for (int k = 0; k < 5; k++) {
            float *v = realloc(*f[k], (size_t)cap * sizeof *v);
            if (!v)
                return false;
            *f[k] = v;
        }
        b->cap = cap;
    }
    int64_t j = b->n++;
    b->g.x0[j] = all->x0[i], b->g.x1[j] = all->x1[i];
    b->g.y0[j] = all->y0[i], b->g.y1[j] = all->y1[i];
    b->g.area[j] = all->area[i];
    float w = all->x1[i] - all->x0[i];
    gr->wide = w > gr->wide ? w : gr->wide;
    return true;
}

static bool grid_suppresses(const Grid *gr, AnyFn *any, const Geom *all, int64_t i, float iou)
{
    int lo = bucket_of(gr, all->x0[i] - gr->wide) - 1, hi = bucket_of(gr, all->x1[i]);
    for (int k = lo < 0 ? 0 : lo; k <= hi; k++)
        if (gr->b[k].n && any(&gr->b[k].g, gr->b[k].n, all, i, iou))
            return true;
    return false;
}

bool interp_nms(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    const Tensor *boxes = in[0], *scores = in[1];
    int64_t center;
    if (!interp_attr_int(ip, "center", &center))
        return false;
    int64_t B = boxes->shape[0], S = boxes->shape[1], C = scores->shape[1];
    if (boxes->shape[2] != 4 || scores->shape[0] != B || scores->shape[2] != S)
        return interp_failk(ip, DIAG_SHAPE,
                            "boxes [B, S, 4] and scores [B, C, S] disagree: boxes [%lld, %lld, %lld], scores "
                            "[%lld, %lld, %lld]",
                            (long long)B, (long long)S, (long long)boxes->shape[2], (long long)scores->shape[0],
                            (long long)C, (long long)scores->shape[2]);
    int64_t maxout = *(const int64_t *)in[2]->data;
    float iou = *(const float *)in[3]->data;
    bool thresholded = op->nin > 4;
    float thr = thresholded ? *(const float *)in[4]->data : 0;
    if (!(iou >= 0 && iou <= 1))
        return interp_fail(ip, "iou_threshold must be in [0, 1], got %g", (double)iou);
    if (maxout > S)
        maxout = S;
    const float *bx = boxes->data, *sc = scores->data;

    Geom all = {0};
    int bits = disc_rt_vector_bits();
    AnyFn *any_suppresses = bits >= 512 ? any_avx512 : bits >= 256 ? any_avx2 : any_base;
    InterpKey *cand = malloc((size_t)(S > 0 ? S : 1) * sizeof *cand);
    int64_t *sel = NULL, nsel = 0, cap = 0;
    bool ok = cand && geom_alloc(&all, S);
    for (int64_t b = 0; ok && b < B && maxout > 0; b++) {
        for (int64_t i = 0; i < S; i++)
            geom_set(&all, i, bx + (b * S + i) * 4, center != 0);
        for (int64_t c = 0; ok && c < C; c++) {
            const float *s = sc + (b * C + c) * S;
            int64_t n = 0, nk = 0;
            for (int64_t i = 0; i < S; i++)
                if (!thresholded || s[i] > thr)
                    cand[n++] = (InterpKey){.f = s[i], .idx = i};
            qsort(cand, (size_t)n, sizeof *cand, interp_key_f_desc);
            Grid grid;
            ok = grid_init(&grid, &all, cand, n);
            for (int64_t r = 0; ok && r < n && nk < maxout; r++) {
                int64_t i = cand[r].idx;
                if (grid_suppresses(&grid, any_suppresses, &all, i, iou))
                    continue;
                if (!(ok = grid_add(&grid, &all, i)))
                    break;
                nk++;
                if (nsel == cap) {
                    cap = cap ? 2 * cap : 64;
                    int64_t *v = realloc(sel, (size_t)cap * 3 * sizeof *v);
                    if (!v) {
                        ok = false;
                        break;
                    }
                    sel = v;
                }
                sel[nsel * 3] = b, sel[nsel * 3 + 1] = c, sel[nsel * 3 + 2] = i;
                nsel++;
            }
            grid_free(&grid);
        }
    }
    free(all.x0);
    free(cand);
    if (!ok) {
        free(sel);
        return interp_oom(ip);
    }
    int64_t shape[2] = {nsel, 3};
    bool done = interp_alloc(ip, out, DT_I64, 2, shape);
    if (done && nsel)
        memcpy(out->data, sel, (size_t)nsel * 3 * sizeof *sel);
    free(sel);
    return done;
}
