/*
 * interp_resize.c — resize, dyn_resize and dyn_resize_scales, as ONNX
 * Resize (opset 19; antialias and tf_crop_and_resize through
 * dyn_resize_scales).
 *
 * Resize is separable: along each axis every result coordinate o maps to a
 * source coordinate x = coord(o) and reads a few taps (1 for nearest, 2 for
 * linear, 4 for cubic) with weights. A result element is the sum over the
 * tensor product of its per-axis taps. The taps follow the ONNX reference
 * implementation exactly: the source is conceptually edge-padded by 1
 * (linear) or 2 (cubic), the taps are the n padded positions nearest to x
 * (ties to the lower), and the weights come from the fractional part of x
 * (1, not 0, when x is integral). exclude_outside zeroes the weights of
 * taps outside the source and renormalises. Taps of weight exactly 0 are
 * skipped, so an axis of scale 1 costs nothing.
 */
#include "runtime/interp_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { MODE_NEAREST, MODE_LINEAR, MODE_CUBIC };
enum { CO_HALF, CO_ASYM, CO_ALIGN, CO_PYTORCH, CO_HALF_SYM, CO_TF_CROP };
enum { NR_FLOOR_PREF, NR_CEIL_PREF, NR_FLOOR, NR_CEIL };

static int word_index(const char *s, const char *const *words, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(s, words[i]) == 0)
            return i;
    return -1;
}

typedef struct Taps {
    int cap;       /* taps per result coordinate at most */
    int *cnt;      /* taps of result coordinate o; -1: extrapolated */
    int64_t *idx;  /* [o*cap + j]: source index */
    double *w;     /* [o*cap + j]: weight */
} Taps;

/* roi: this axis's [start, end] (tf_crop_and_resize only). As in the ONNX
 * reference, align_corners and tf_crop_and_resize divide by the unrounded
 * result length s * L less 1. */
static double source_coord(int co, int64_t o, double s, int64_t lin, int64_t lout, const double *roi)
{
    double x = (double)o, wout = s * (double)lin;
    switch (co) {
    case CO_TF_CROP: {
        double span = (roi[1] - roi[0]) * (double)(lin - 1);
        return (lout == 1 ? span / 2 : x * span / (wout - 1)) + roi[0] * (double)(lin - 1);
    }
    case CO_ASYM: return x / s;
    case CO_ALIGN: return lout == 1 ? 0 : x * (double)(lin - 1) / (wout - 1);
    case CO_PYTORCH: return lout > 1 ? (x + 0.5) / s - 0.5 : 0;
    case CO_HALF_SYM: {
        double adj = (double)lout / (s * (double)lin), center = (double)lin / 2;
        return center * (1 - adj) + (x + 0.5) / s - 0.5;
    }
    default: return (x + 0.5) / s - 0.5;
    }
}

static void cubic_coeffs(double r, double a, double *c)
{
    double t;
    t = r + 1;
    c[0] = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a;
    c[1] = ((a + 2) * r - (a + 3)) * r * r + 1;
    t = 1 - r;
    c[2] = ((a + 2) * t - (a + 3)) * t * t + 1;
    t = 2 - r;
    c[3] = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a;
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Keys' cubic kernel at distance x. */
static double cubic_kernel(double x, double a)
{
    x = fabs(x);
    if (x <= 1)
        return ((a + 2) * x - (a + 3)) * x * x + 1;
    if (x < 2)
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
    return 0;
}

/* Taps per coordinate: with antialias when downsampling, the kernel is
 * stretched by 1/s (ONNX reference: 2 - 2*start taps). */
static int axis_ntaps(int mode, bool aa, double s)
{
    if (mode == MODE_NEAREST)
        return 1;
    int base = mode == MODE_LINEAR ? 1 : 2;
    if (!aa || s >= 1)
        return 2 * base;
    int64_t start = (int64_t)floor(-(double)base / s) + 1;
    return (int)(2 - 2 * start);
}

/* Fills the taps of every result coordinate along one axis. */
static void axis_taps(Taps *t, int mode, int co, int nr, double cubic_a, bool excl, bool aa,
                      int64_t lin, int64_t lout, double s, const double *roi)
{
    for (int64_t o = 0; o < lout; o++) {
        double x = source_coord(co, o, s, lin, lout, roi);
        int64_t *ti = &t->idx[o * t->cap];
        double *tw = &t->w[o * t->cap];
        if (co == CO_TF_CROP && (x < 0 || x > (double)(lin - 1))) {
            t->cnt[o] = -1;
            continue;
        }
        if (mode == MODE_NEAREST) {
            double f = floor(x), d = x - f, r;
            switch (nr) {
            case NR_FLOOR_PREF: r = d > 0.5 ? f + 1 : f; break;
            case NR_CEIL_PREF: r = d >= 0.5 ? f + 1 : f; break;
            case NR_FLOOR: r = f; break;
            default: r = ceil(x); break;
            }
            r = r < 0 ? 0 : r > (double)(lin - 1) ? (double)(lin - 1) : r;
            ti[0] = (int64_t)r;
            tw[0] = 1;
            t->cnt[o] = 1;
            continue;
        }
        int n = t->cap, pad = (n + 1) / 2;
        int64_t limit = lin + 2 * pad;
        double xp = x + pad;
        /* positions beyond these bounds clamp to the same window */
        double far = (double)n + 8;
        xp = xp < -far ? -far : xp > (double)limit + far ? (double)limit + far : xp;
        int64_t start = clamp64((int64_t)ceil(xp) - n / 2, 0, limit - n);
        double ratio = x == floor(x) ? 1 : x - floor(x), c[n];
        if (aa && s < 1) {
            /* ONNX reference: kernel(s * (i - ratio)) for i from 1 - n/2 on,
             * normalised */
            double sum = 0;
            for (int j = 0; j < n; j++) {
                double arg = s * ((double)(j + 1 - n / 2) - ratio);
                c[j] = mode == MODE_LINEAR ? fmax(0, fmin(1, 1 - fabs(arg))) : cubic_kernel(arg, cubic_a);
                sum += c[j];
            }
            for (int j = 0; j < n; j++)
                c[j] /= sum;
        } else if (mode == MODE_LINEAR) {
            c[0] = 1 - ratio;
            c[1] = ratio;
        } else {
            cubic_coeffs(ratio, cubic_a, c);
        }
        double sum = 0;
        for (int j = 0; j < n; j++) {
            int64_t p = start + j - pad;
            if (excl && (p < 0 || p >= lin))
                c[j] = 0;
            sum += c[j];
        }
        int k = 0;
        for (int j = 0; j < n; j++) {
            double w = excl ? c[j] / sum : c[j];
            if (w == 0)
                continue;
            ti[k] = clamp64(start + j - pad, 0, lin - 1);
            tw[k++] = w;
        }
        t->cnt[o] = k;
    }
}

/* scales: per axis, NULL for M / L; roi: [starts, ends] (2 * rank), NULL
 * unless tf_crop_and_resize. */
static bool do_resize(Interp *ip, const Op *op, const Tensor *x, const int64_t *shape, int rank,
                      const double *scales, const double *roi, Tensor *out)
{
    static const char *const modes[] = {"nearest", "linear", "cubic"};
    static const char *const coords[] = {"half_pixel", "asymmetric", "align_corners",
                                         "pytorch_half_pixel", "half_pixel_symmetric",
                                         "tf_crop_and_resize"};
    static const char *const nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    const char *ms, *cs, *ns;
    if (!interp_attr_str(ip, "mode", &ms) || !interp_attr_str(ip, "coord", &cs) ||
        !interp_attr_str(ip, "nearest", &ns))
        return false;
    int mode = word_index(ms, modes, 3), co = word_index(cs, coords, 6), nr = word_index(ns, nearests, 4);
    if (mode < 0 || co < 0 || nr < 0)
        return interp_fail(ip, "unknown mode, coord or nearest (%s, %s, %s)", ms, cs, ns);
    if (co == CO_TF_CROP && !roi)
        return interp_fail(ip, "tf_crop_and_resize needs a roi");
    double cubic_a = op_attr_float(op, "cubic_a", -0.75);
    double extrap = op_attr_float(op, "extrapolation", 0);
    bool excl = op_attr_int(op, "exclude_outside", 0) != 0;
    bool aa = op_attr_int(op, "antialias", 0) != 0;
    if (rank != x->rank)
        return interp_fail(ip, "the result shape has %d entries for an operand of rank %d", rank, x->rank);
    for (int a = 0; a < rank; a++) {
        if (shape[a] < 0)
            return interp_fail(ip, "axis %d: negative size %lld", a, (long long)shape[a]);
        if (shape[a] > 0 && x->shape[a] == 0)
            return interp_fail(ip, "axis %d: cannot resize an empty axis to %lld", a, (long long)shape[a]);
        if (scales && !(scales[a] > 0 && isfinite(scales[a])))
            return interp_fail(ip, "scale %d (%g) must be positive", a, scales[a]);
    }
    if (!interp_alloc(ip, out, x->dtype, rank, shape))
        return false;
    size_t n = tensor_numel(out);
    if (n == 0)
        return true;

    Taps taps[MAX_RANK];
    memset(taps, 0, sizeof taps);
    bool ok = true;
    for (int a = 0; a < rank && ok; a++) {
        size_t lo = (size_t)shape[a];
        double s = scales ? scales[a] : (double)shape[a] / (double)x->shape[a];
        int cap = axis_ntaps(mode, aa, s);
        if (cap > 4096) {
            ok = false;
            break;
        }
        taps[a].cap = cap;
        taps[a].cnt = malloc(lo * sizeof(int));
        taps[a].idx = malloc(lo * (size_t)cap * sizeof(int64_t));
        taps[a].w = malloc(lo * (size_t)cap * sizeof(double));
        ok = taps[a].cnt && taps[a].idx && taps[a].w;
        if (ok) {
            double r2[2] = {roi ? roi[a] : 0, roi ? roi[rank + a] : 1};
            axis_taps(&taps[a], mode, co, nr, cubic_a, excl, aa, x->shape[a], shape[a], s, r2);
        }
    }
    if (!ok) {
        tensor_free(out);
        interp_fail(ip, "out of memory (or a scale too small for antialias)");
    }
    int64_t xst[MAX_RANK];
    interp_strides(x->rank, x->shape, xst);
    size_t es = dtype_size(x->dtype);
    bool fl = dtype_is_float(x->dtype);
    NdIter it;
    nditer_init(&it, rank, shape);
    for (size_t i = 0; ok && i < n; i++, nditer_next(&it)) {
        bool outside = false;
        for (int a = 0; a < rank; a++)
            outside |= taps[a].cnt[it.idx[a]] < 0;
        if (outside) {
            interp_store_f(out, i, extrap);
            continue;
        }
        if (mode == MODE_NEAREST) {
            int64_t off = 0;
            for (int a = 0; a < rank; a++)
                off += taps[a].idx[it.idx[a] * taps[a].cap] * xst[a];
            memcpy((char *)out->data + i * es, (const char *)x->data + (size_t)off * es, es);
            continue;
        }
        /* odometer over the per-axis taps */
        int t[MAX_RANK] = {0};
        double acc = 0;
        for (;;) {
            int64_t off = 0;
            double w = 1;
            for (int a = 0; a < rank; a++) {
                int64_t o = it.idx[a] * taps[a].cap + t[a];
                off += taps[a].idx[o] * xst[a];
                w *= taps[a].w[o];
            }
            acc += w * interp_load_f(x, (size_t)off);
            int a = rank - 1;
            for (; a >= 0; a--) {
                if (++t[a] < taps[a].cnt[it.idx[a]])
                    break;
                t[a] = 0;
            }
            if (a < 0)
                break;
        }
        interp_store_f(out, i, fl ? acc : rint(acc));
    }
    for (int a = 0; a < rank; a++) {
        free(taps[a].cnt);
        free(taps[a].idx);
        free(taps[a].w);
    }
    return ok;
}

bool interp_resize(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    int64_t shape[MAX_RANK];
    int rank;
    if (!interp_attr_dims(ip, "shape", shape, MAX_RANK, &rank))
        return false;
    const Attr *sc = op_attr(op, "scales");
    if (sc && (sc->kind != ATTR_FLOATS || sc->n != in[0]->rank || (sc->n && !sc->floats)))
        return interp_fail(ip, "scales must hold %d floats", in[0]->rank);
    return do_resize(ip, op, in[0], shape, rank, sc ? sc->floats : NULL, NULL, out);
}

bool interp_dyn_resize(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    int64_t shape[MAX_RANK];
    int rank;
    return interp_read_ints(ip, in[1], 1, shape, MAX_RANK, &rank) &&
           do_resize(ip, op, in[0], shape, rank, NULL, NULL, out);
}

bool interp_dyn_resize_scales(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    int64_t shape[MAX_RANK];
    double scales[MAX_RANK], roi[2 * MAX_RANK];
    int rank;
    if (!interp_read_ints(ip, in[1], 1, shape, MAX_RANK, &rank))
        return false;
    if (tensor_numel(in[2]) != (size_t)rank || tensor_numel(in[3]) != 2 * (size_t)rank)
        return interp_fail(ip, "scales and roi must hold %d and %d numbers", rank, 2 * rank);
    for (int a = 0; a < rank; a++)
        scales[a] = interp_load_f(in[2], (size_t)a);
    for (int a = 0; a < 2 * rank; a++)
        roi[a] = interp_load_f(in[3], (size_t)a);
    return do_resize(ip, op, in[0], shape, rank, scales, roi, out);
}
