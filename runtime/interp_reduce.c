/*
 * interp_reduce.c — reductions and scans: reduce, argmax/argmin, cumsum,
 * topk.
 *
 * Float reductions accumulate in double, in row-major order of the operand
 * (a sum starts from -0.0, so a one-element sum is an exact copy), and round
 * once per result element; integer ones accumulate in int64 with
 * wrapping. max and min propagate NaN. Empty reductions give the identity
 * (sum 0, prod 1, max the lowest value, min the highest, mean NaN).
 */
#include "runtime/interp_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { R_SUM, R_MAX, R_MIN, R_PROD, R_MEAN };

/* The lowest and highest value of an integer dtype. */
static int64_t int_lowest(DType t)
{
    switch (t) {
    case DT_I8: return INT8_MIN;
    case DT_I16: return INT16_MIN;
    case DT_I32: return INT32_MIN;
    case DT_I64: return INT64_MIN;
    default: return 0; /* unsigned, bool */
    }
}

static int64_t int_highest(DType t)
{
    switch (t) {
    case DT_I8: return INT8_MAX;
    case DT_U8: return UINT8_MAX;
    case DT_I16: return INT16_MAX;
    case DT_U16: return UINT16_MAX;
    case DT_I32: return INT32_MAX;
    case DT_U32: return UINT32_MAX;
    case DT_U64: return -1; /* the bits of UINT64_MAX */
    case DT_BOOL: return 1;
    default: return INT64_MAX;
    }
}

/* Splits x around one axis: outer * n * inner elements. */
static void split_axis(const Tensor *x, int ax, size_t *outer, size_t *n, size_t *inner)
{
    *outer = *inner = 1;
    for (int i = 0; i < ax; i++)
        *outer *= (size_t)x->shape[i];
    for (int i = ax + 1; i < x->rank; i++)
        *inner *= (size_t)x->shape[i];
    *n = (size_t)x->shape[ax];
}

static bool reduce_kind(Interp *ip, int *kind)
{
    static const char *const kinds[] = {"sum", "max", "min", "prod", "mean"};
    const char *ks;
    if (!interp_attr_str(ip, "kind", &ks))
        return false;
    *kind = -1;
    for (int i = 0; i < 5; i++)
        if (strcmp(ks, kinds[i]) == 0)
            *kind = i;
    return *kind >= 0 || interp_fail(ip, "unknown kind \"%s\"", ks);
}

/* Marks the reduced axes in red; negative axes count from the end. */
static bool reduce_axes(Interp *ip, const int64_t *axes, int naxes, int rank, bool *red)
{
    for (int i = 0; i < naxes; i++) {
        int a;
        if (!interp_axis(ip, "axis", axes[i], rank, &a))
            return false;
        if (red[a])
            return interp_fail(ip, "axis %d is repeated", a);
        red[a] = true;
    }
    return true;
}

static bool reduce_run(Interp *ip, const Tensor *x, int kind, const bool *red, bool keep,
                       Tensor *out);

bool interp_reduce(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    const int64_t *axes;
    int naxes, kind;
    int64_t keep;
    bool red[MAX_RANK] = {false};
    (void)op;
    if (!reduce_kind(ip, &kind) || !interp_attr_ints(ip, "axes", &axes, &naxes) ||
        !interp_attr_int(ip, "keepdims", &keep) || !reduce_axes(ip, axes, naxes, in[0]->rank, red))
        return false;
    return reduce_run(ip, in[0], kind, red, keep != 0, out);
}

bool interp_dyn_reduce(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    int64_t axes[MAX_RANK], keep;
    int naxes, kind;
    bool red[MAX_RANK] = {false};
    (void)op;
    if (!reduce_kind(ip, &kind) || !interp_attr_int(ip, "keepdims", &keep) ||
        !interp_read_ints(ip, in[1], 1, axes, MAX_RANK, &naxes) ||
        !reduce_axes(ip, axes, naxes, in[0]->rank, red))
        return false;
    return reduce_run(ip, in[0], kind, red, keep != 0, out);
}

static bool reduce_run(Interp *ip, const Tensor *x, int kind, const bool *red, bool keep,
                       Tensor *out)
{
    int64_t shape[MAX_RANK], full[MAX_RANK], ost[MAX_RANK], st[MAX_RANK];
    int rank = 0;
    for (int i = 0; i < x->rank; i++) {
        full[i] = red[i] ? 1 : x->shape[i];
        if (!red[i] || keep)
            shape[rank++] = full[i];
    }
    if (!interp_alloc(ip, out, x->dtype, rank, shape))
        return false;
    interp_strides(x->rank, full, ost);
    for (int i = 0; i < x->rank; i++)
        st[i] = red[i] ? 0 : ost[i];
    size_t no = tensor_numel(out), nx = tensor_numel(x), count = no ? nx / no : 0;
    bool fl = dtype_is_float(x->dtype), u64 = x->dtype == DT_U64;
    double *af = fl ? malloc((no ? no : 1) * sizeof *af) : NULL;
    int64_t *ai = fl ? NULL : malloc((no ? no : 1) * sizeof *ai);
    if (!af && !ai) {
        tensor_free(out);
        return interp_oom(ip);
    }
    for (size_t i = 0; i < no; i++) {
        if (fl)
            af[i] = kind == R_MAX ? -INFINITY : kind == R_MIN ? INFINITY : kind == R_PROD ? 1 : -0.0;
        else
            ai[i] = kind == R_MAX ? int_lowest(x->dtype) : kind == R_MIN ? int_highest(x->dtype)
                  : kind == R_PROD ? 1 : 0;
    }
    NdIter it;
    nditer_init(&it, x->rank, x->shape);
    nditer_add(&it, st);
    for (size_t i = 0; i < nx; i++, nditer_next(&it)) {
        size_t o = (size_t)it.off[0];
        if (fl) {
            double v = interp_load_f(x, i), *a = &af[o];
            switch (kind) {
            case R_MAX: *a = isnan(*a) || isnan(v) ? NAN : v > *a ? v : *a; break;
            case R_MIN: *a = isnan(*a) || isnan(v) ? NAN : v < *a ? v : *a; break;
            case R_PROD: *a *= v; break;
            default: *a += v; break;
            }
        } else {
            int64_t v = interp_load_i(x, i), *a = &ai[o];
            switch (kind) {
            case R_MAX: *a = (u64 ? (uint64_t)v > (uint64_t)*a : v > *a) ? v : *a; break;
            case R_MIN: *a = (u64 ? (uint64_t)v < (uint64_t)*a : v < *a) ? v : *a; break;
            case R_PROD: *a = (int64_t)((uint64_t)*a * (uint64_t)v); break;
            default: *a = (int64_t)((uint64_t)*a + (uint64_t)v); break;
            }
        }
    }
    for (size_t i = 0; i < no; i++) {
        if (fl && count == 0 && (kind == R_SUM || kind == R_MEAN))
            interp_store_f(out, i, kind == R_SUM ? 0.0 : NAN);
        else if (fl)
            interp_store_f(out, i, kind == R_MEAN ? af[i] / (double)count : af[i]);
        else
            interp_store_i(out, i, kind == R_MEAN ? (count ? ai[i] / (int64_t)count : 0) : ai[i]);
    }
    free(af);
    free(ai);
    return true;
}

bool interp_arg(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    const Tensor *x = in[0];
    int64_t axis, keep, last;
    int ax;
    if (!interp_attr_int(ip, "axis", &axis) || !interp_attr_int(ip, "keepdims", &keep) ||
        !interp_attr_int(ip, "last", &last) || !interp_axis(ip, "axis", axis, x->rank, &ax))
        return false;
    if (x->shape[ax] == 0)
        return interp_fail(ip, "axis %d is empty", ax);
    bool want_max = op->kind == OP_ARGMAX, fl = dtype_is_float(x->dtype);
    int64_t shape[MAX_RANK];
    int rank = 0;
    for (int i = 0; i < x->rank; i++)
        if (i != ax || keep)
            shape[rank++] = i == ax ? 1 : x->shape[i];
    if (!interp_alloc(ip, out, DT_I64, rank, shape))
        return false;
    size_t outer, n, inner;
    split_axis(x, ax, &outer, &n, &inner);
    int64_t *o = out->data;
    for (size_t a = 0; a < outer; a++) {
        for (size_t b = 0; b < inner; b++) {
            size_t base = a * n * inner + b, best = 0;
            for (size_t j = 1; j < n; j++) {
                size_t pj = base + j * inner, pb = base + best * inner;
                bool take;
                if (fl) {
                    double v = interp_load_f(x, pj), bv = interp_load_f(x, pb);
                    if (isnan(bv))
                        take = last && isnan(v);
                    else if (isnan(v))
                        take = true;
                    else
                        take = want_max ? v > bv || (last && v == bv) : v < bv || (last && v == bv);
                } else {
                    int64_t v = interp_load_i(x, pj), bv = interp_load_i(x, pb);
                    take = want_max ? v > bv || (last && v == bv) : v < bv || (last && v == bv);
                }
                if (take)
                    best = j;
            }
            o[a * inner + b] = (int64_t)best;
        }
    }
    return true;
}

bool interp_cumsum(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    const Tensor *x = in[0];
    int64_t axis, excl, rev;
    int ax;
    if (!interp_attr_int(ip, "axis", &axis) || !interp_attr_int(ip, "exclusive", &excl) ||
        !interp_attr_int(ip, "reverse", &rev) || !interp_axis(ip, "axis", axis, x->rank, &ax))
        return false;
    if (x->dtype == DT_BOOL)
        return interp_fail(ip, "not defined for bool");
    if (!interp_alloc(ip, out, x->dtype, x->rank, x->shape))
        return false;
    size_t outer, n, inner;
    split_axis(x, ax, &outer, &n, &inner);
    bool fl = dtype_is_float(x->dtype);
    for (size_t a = 0; a < outer; a++) {
        for (size_t b = 0; b < inner; b++) {
            double sf = 0;
            int64_t si = 0;
            for (size_t k = 0; k < n; k++) {
                size_t j = rev ? n - 1 - k : k, p = a * n * inner + j * inner + b;
                if (fl) {
                    double v = interp_load_f(x, p);
                    if (!excl)
                        sf += v;
                    interp_store_f(out, p, sf);
                    if (excl)
                        sf += v;
                } else {
                    int64_t v = interp_load_i(x, p);
                    if (!excl)
                        si = (int64_t)((uint64_t)si + (uint64_t)v);
                    interp_store_i(out, p, si);
                    if (excl)
                        si = (int64_t)((uint64_t)si + (uint64_t)v);
                }
            }
        }
    }
    return true;
}

/* ---- topk ------------------------------------------------------------------ */

typedef InterpKey Key;

static int by_idx(const Key *a, const Key *b) { return (a->idx > b->idx) - (a->idx < b->idx); }

/* Ascending with NaN greatest; ties by index. */
static int cmp_f_asc(const void *pa, const void *pb)
{
    const Key *a = pa, *b = pb;
    bool na = isnan(a->f), nb = isnan(b->f);
    if (na != nb)
        return na ? 1 : -1;
    if (!na && a->f != b->f)
        return a->f < b->f ? -1 : 1;
    return by_idx(a, b);
}

int interp_key_f_desc(const void *pa, const void *pb)
{
    const Key *a = pa, *b = pb;
    bool na = isnan(a->f), nb = isnan(b->f);
    if (na != nb)
        return na ? -1 : 1;
    if (!na && a->f != b->f)
        return a->f > b->f ? -1 : 1;
    return by_idx(a, b);
}

static int cmp_i_asc(const void *pa, const void *pb)
{
    const Key *a = pa, *b = pb;
    if (a->i != b->i)
        return a->i < b->i ? -1 : 1;
    return by_idx(a, b);
}

static int cmp_i_desc(const void *pa, const void *pb)
{
    const Key *a = pa, *b = pb;
    if (a->i != b->i)
        return a->i > b->i ? -1 : 1;
    return by_idx(a, b);
}

bool interp_topk(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    const Tensor *x = in[0];
    int64_t axis, largest, kv[MAX_RANK];
    int ax, nk;
    if (!interp_attr_int(ip, "axis", &axis) || !interp_attr_int(ip, "largest", &largest) ||
        !interp_axis(ip, "axis", axis, x->rank, &ax) || !interp_read_ints(ip, in[1], 1, kv, MAX_RANK, &nk))
        return false;
    if (nk != 1)
        return interp_fail(ip, "k must hold one value, has %d", nk);
    int64_t k = kv[0];
    if (k < 0 || k > x->shape[ax])
        return interp_fail(ip, "k = %lld is out of range for axis %d of size %lld", (long long)k, ax,
                           (long long)x->shape[ax]);
    int64_t shape[MAX_RANK];
    memcpy(shape, x->shape, sizeof shape);
    shape[ax] = k;
    if (!interp_alloc(ip, &out[0], x->dtype, x->rank, shape))
        return false;
    if (!interp_alloc(ip, &out[1], DT_I64, x->rank, shape)) {
        tensor_free(&out[0]);
        return false;
    }
    size_t outer, n, inner, es = dtype_size(x->dtype);
    split_axis(x, ax, &outer, &n, &inner);
    Key *keys = malloc((n ? n : 1) * sizeof *keys);
    if (!keys) {
        tensor_free(&out[0]);
        tensor_free(&out[1]);
        return interp_oom(ip);
    }
    bool fl = dtype_is_float(x->dtype);
    int (*cmp)(const void *, const void *) =
        fl ? (largest ? interp_key_f_desc : cmp_f_asc) : (largest ? cmp_i_desc : cmp_i_asc);
    int64_t *oi = out[1].data;
    for (size_t a = 0; a < outer; a++) {
        for (size_t b = 0; b < inner; b++) {
            size_t base = a * n * inner + b;
            for (size_t j = 0; j < n; j++) {
                size_t p = base + j * inner;
                keys[j].f = fl ? interp_load_f(x, p) : 0;
                keys[j].i = fl ? 0 : interp_load_i(x, p);
                keys[j].idx = (int64_t)j;
            }
            qsort(keys, n, sizeof *keys, cmp);
            for (size_t j = 0; j < (size_t)k; j++) {
                size_t q = a * (size_t)k * inner + j * inner + b;
                memcpy((char *)out[0].data + q * es,
                       (const char *)x->data + (base + (size_t)keys[j].idx * inner) * es, es);
                oi[q] = keys[j].idx;
            }
        }
    }
    free(keys);
    return true;
}
