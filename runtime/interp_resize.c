/*
 * interp_resize.c — resize and dyn_resize, as ONNX Resize (opset 19,
 * without antialias, roi or tf_crop_and_resize).
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
enum { CO_HALF, CO_ASYM, CO_ALIGN, CO_PYTORCH, CO_HALF_SYM };
enum { NR_FLOOR_PREF, NR_CEIL_PREF, NR_FLOOR, NR_CEIL };

static int word_index(const char *s, const char *const *words, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(s, words[i]) == 0)
            return i;
    return -1;
}

typedef struct Taps {
    int *cnt;      /* taps of result coordinate o */
    int64_t *idx;  /* [o*4 + j]: source index */
    double *w;     /* [o*4 + j]: weight */
} Taps;

static double source_coord(int co, int64_t o, double s, int64_t lin, int64_t lout)
{
    double x = (double)o;
    switch (co) {
    case CO_ASYM: return x / s;
    case CO_ALIGN: return lout == 1 ? 0 : x * (double)(lin - 1) / (double)(lout - 1);
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

/* Fills the taps of every result coordinate along one axis. */
static void axis_taps(Taps *t, int mode, int co, int nr, double cubic_a, bool excl, int64_t lin,
                      int64_t lout, double s)
{
    for (int64_t o = 0; o < lout; o++) {
        double x = source_coord(co, o, s, lin, lout);
        int64_t *ti = &t->idx[o * 4];
        double *tw = &t->w[o * 4];
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
        int n = mode == MODE_LINEAR ? 2 : 4, pad = n / 2;
        int64_t limit = lin + 2 * pad;
        double xp = x + pad;
        /* positions beyond these bounds clamp to the same window */
        xp = xp < -8 ? -8 : xp > (double)limit + 8 ? (double)limit + 8 : xp;
        int64_t start = clamp64((int64_t)ceil(xp) - n / 2, 0, limit - n);
        double ratio = x == floor(x) ? 1 : x - floor(x), c[4];
        if (mode == MODE_LINEAR) {
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

static bool do_resize(Interp *ip, const Op *op, const Tensor *x, const int64_t *shape, int rank,
                      const double *scales, Tensor *out)
{
    static const char *const modes[] = {"nearest", "linear", "cubic"};
    static const char *const coords[] = {"half_pixel", "asymmetric", "align_corners",
                                         "pytorch_half_pixel", "half_pixel_symmetric"};
    static const char *const nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    const char *ms, *cs, *ns;
    if (!interp_attr_str(ip, "mode", &ms) || !interp_attr_str(ip, "coord", &cs) ||
        !interp_attr_str(ip, "nearest", &ns))
        return false;
    int mode = word_index(ms, modes, 3), co = word_index(cs, coords, 5), nr = word_index(ns, nearests, 4);
    if (mode < 0 || co < 0 || nr < 0)
        return interp_fail(ip, "unknown mode, coord or nearest (%s, %s, %s)", ms, cs, ns);
    double cubic_a = op_attr_float(op, "cubic_a", -0.75);
    bool excl = op_attr_int(op, "exclude_outside", 0) != 0;
    if (rank != x->rank)
        return interp_fail(ip, "the result shape has %d entries for an operand of rank %d", rank, x->rank);
    for (int a = 0; a < rank; a++) {
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
        taps[a].cnt = malloc(lo * sizeof(int));
        taps[a].idx = malloc(lo * 4 * sizeof(int64_t));
        taps[a].w = malloc(lo * 4 * sizeof(double));
        ok = taps[a].cnt && taps[a].idx && taps[a].w;
        if (ok) {
            double s = scales ? scales[a] : (double)shape[a] / (double)x->shape[a];
            axis_taps(&taps[a], mode, co, nr, cubic_a, excl, x->shape[a], shape[a], s);
        }
    }
    if (!ok) {
        tensor_free(out);
        interp_fail(ip, "out of memory");
    }
    int64_t xst[MAX_RANK];
    interp_strides(x->rank, x->shape, xst);
    size_t es = dtype_size(x->dtype);
    bool fl = dtype_is_float(x->dtype);
    NdIter it;
    nditer_init(&it, rank, shape);
    for (size_t i = 0; ok && i < n; i++, nditer_next(&it)) {
        if (mode == MODE_NEAREST) {
            int64_t off = 0;
            for (int a = 0; a < rank; a++)
                off += taps[a].idx[it.idx[a] * 4] * xst[a];
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
                int64_t o = it.idx[a] * 4 + t[a];
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
    return do_resize(ip, op, in[0], shape, rank, sc ? sc->floats : NULL, out);
}

bool interp_dyn_resize(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    int64_t shape[MAX_RANK];
    int rank;
    return interp_read_ints(ip, in[1], 1, shape, MAX_RANK, &rank) &&
           do_resize(ip, op, in[0], shape, rank, NULL, out);
}
