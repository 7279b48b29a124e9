/*
 * interp_index.c — ops driven by index tensors: gather, gather_elements,
 * gather_nd, scatter_elements, scatter_nd (all as in ONNX), and nonzero.
 *
 * Indices are i32 or i64; a negative index counts from the end of its axis
 * (i + dim); anything still outside [0, dim) is an error that names the
 * position in the index tensor, the value and the axis.
 */
#include "runtime/interp_impl.h"

#include <string.h>

/* "[1, 2]": the multi-index of flat position pos in shape. */
static void fmt_pos(char *buf, size_t size, int rank, const int64_t *shape, size_t pos)
{
    int64_t idx[MAX_RANK];
    for (int i = rank - 1; i >= 0; i--) {
        idx[i] = shape[i] ? (int64_t)(pos % (size_t)shape[i]) : 0;
        pos = shape[i] ? pos / (size_t)shape[i] : 0;
    }
    size_t n = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < rank && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, "%s%lld", i ? ", " : "", (long long)idx[i]);
    if (n < size)
        snprintf(buf + n, size - n, "]");
}

static bool check_index_dtype(Interp *ip, const Tensor *idx)
{
    if (idx->dtype != DT_I32 && idx->dtype != DT_I64)
        return interp_fail(ip, "indices must be i32 or i64, not %s", dtype_name(idx->dtype));
    return true;
}

/* Reads idx[pos], wraps a negative value, checks it against dim n. */
static bool load_index(Interp *ip, const Tensor *idx, size_t pos, int axis, int64_t n, int64_t *out)
{
    int64_t v = interp_load_i(idx, pos);
    int64_t w = v < 0 ? v + n : v;
    if (w < 0 || w >= n) {
        char at[256];
        fmt_pos(at, sizeof at, idx->rank, idx->shape, pos);
        return interp_fail(ip, "index %lld at indices%s is out of range for axis %d of size %lld",
                           (long long)v, at, axis, (long long)n);
    }
    *out = w;
    return true;
}

bool interp_gather(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    const Tensor *x = in[0], *idx = in[1];
    int64_t axis;
    int ax;
    if (!interp_attr_int(ip, "axis", &axis) || !interp_axis(ip, "axis", axis, x->rank, &ax) ||
        !check_index_dtype(ip, idx))
        return false;
    int rank = x->rank - 1 + idx->rank;
    if (rank > MAX_RANK)
        return interp_fail(ip, "result rank %d exceeds %d", rank, MAX_RANK);
    int64_t shape[MAX_RANK];
    int r = 0;
    for (int i = 0; i < ax; i++)
        shape[r++] = x->shape[i];
    for (int i = 0; i < idx->rank; i++)
        shape[r++] = idx->shape[i];
    for (int i = ax + 1; i < x->rank; i++)
        shape[r++] = x->shape[i];
    if (!interp_alloc(ip, out, x->dtype, rank, shape))
        return false;
    size_t es = dtype_size(x->dtype), outer = 1, inner = es, nidx = tensor_numel(idx);
    for (int i = 0; i < ax; i++)
        outer *= (size_t)x->shape[i];
    for (int i = ax + 1; i < x->rank; i++)
        inner *= (size_t)x->shape[i];
    int64_t n = x->shape[ax];
    for (size_t j = 0; j < nidx; j++) {
        int64_t v;
        if (!load_index(ip, idx, j, ax, n, &v)) {
            tensor_free(out);
            return false;
        }
        for (size_t o = 0; o < outer; o++)
            memcpy((char *)out->data + (o * nidx + j) * inner,
                   (const char *)x->data + (o * (size_t)n + (size_t)v) * inner, inner);
    }
    return true;
}

bool interp_gather_elements(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    const Tensor *x = in[0], *idx = in[1];
    int64_t axis;
    int ax;
    if (!interp_attr_int(ip, "axis", &axis) || !interp_axis(ip, "axis", axis, x->rank, &ax) ||
        !check_index_dtype(ip, idx))
        return false;
    if (idx->rank != x->rank)
        return interp_fail(ip, "indices have rank %d, data rank %d", idx->rank, x->rank);
    for (int i = 0; i < x->rank; i++)
        if (i != ax && idx->shape[i] > x->shape[i])
            return interp_fail(ip, "indices dim %d (%lld) exceeds the data dim (%lld)", i,
                               (long long)idx->shape[i], (long long)x->shape[i]);
    if (!interp_alloc(ip, out, x->dtype, idx->rank, idx->shape))
        return false;
    int64_t xst[MAX_RANK], st[MAX_RANK];
    interp_strides(x->rank, x->shape, xst);
    memcpy(st, xst, sizeof st);
    st[ax] = 0;
    size_t es = dtype_size(x->dtype), n = tensor_numel(idx);
    NdIter it;
    nditer_init(&it, idx->rank, idx->shape);
    nditer_add(&it, st);
    for (size_t i = 0; i < n; i++, nditer_next(&it)) {
        int64_t v;
        if (!load_index(ip, idx, i, ax, x->shape[ax], &v)) {
            tensor_free(out);
            return false;
        }
        memcpy((char *)out->data + i * es, (const char *)x->data + (size_t)(it.off[0] + v * xst[ax]) * es, es);
    }
    return true;
}

/* Shared by gather_nd and scatter_nd: the element offset in x of the slab
 * that row p of idx (q entries) selects, after b batch coordinates. */
static bool nd_offset(Interp *ip, const Tensor *x, const Tensor *idx, size_t p, int b, int q,
                      const int64_t *bcoord, int64_t *off)
{
    int64_t xst[MAX_RANK], o = 0;
    interp_strides(x->rank, x->shape, xst);
    for (int i = 0; i < b; i++)
        o += bcoord[i] * xst[i];
    for (int j = 0; j < q; j++) {
        int64_t v;
        if (!load_index(ip, idx, p * (size_t)q + (size_t)j, b + j, x->shape[b + j], &v))
            return false;
        o += v * xst[b + j];
    }
    *off = o;
    return true;
}

bool interp_gather_nd(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    const Tensor *x = in[0], *idx = in[1];
    int64_t b64;
    if (!interp_attr_int(ip, "batch_dims", &b64) || !check_index_dtype(ip, idx))
        return false;
    if (idx->rank < 1)
        return interp_fail(ip, "indices must have rank >= 1");
    int64_t q = idx->shape[idx->rank - 1];
    if (b64 < 0 || b64 >= idx->rank || q < 0 || b64 + q > x->rank)
        return interp_fail(ip, "batch_dims %lld and index depth %lld do not fit data rank %d",
                           (long long)b64, (long long)q, x->rank);
    int b = (int)b64;
    for (int i = 0; i < b; i++)
        if (idx->shape[i] != x->shape[i])
            return interp_fail(ip, "batch dim %d differs: indices %lld, data %lld", i,
                               (long long)idx->shape[i], (long long)x->shape[i]);
    int64_t shape[MAX_RANK];
    int rank = 0;
    for (int i = 0; i < idx->rank - 1; i++)
        shape[rank++] = idx->shape[i];
    for (int i = b + (int)q; i < x->rank; i++) {
        if (rank == MAX_RANK)
            return interp_fail(ip, "result rank exceeds %d", MAX_RANK);
        shape[rank++] = x->shape[i];
    }
    if (!interp_alloc(ip, out, x->dtype, rank, shape))
        return false;
    size_t es = dtype_size(x->dtype), slab = es, rows = 1, per_batch = 1;
    for (int i = b + (int)q; i < x->rank; i++)
        slab *= (size_t)x->shape[i];
    for (int i = 0; i < idx->rank - 1; i++)
        rows *= (size_t)idx->shape[i];
    for (int i = b; i < idx->rank - 1; i++)
        per_batch *= (size_t)idx->shape[i];
    for (size_t p = 0; p < rows; p++) {
        int64_t bc[MAX_RANK], off;
        size_t bflat = per_batch ? p / per_batch : 0;
        for (int i = b - 1; i >= 0; i--) {
            bc[i] = (int64_t)(bflat % (size_t)idx->shape[i]);
            bflat /= (size_t)idx->shape[i];
        }
        if (!nd_offset(ip, x, idx, p, b, (int)q, bc, &off)) {
            tensor_free(out);
            return false;
        }
        memcpy((char *)out->data + p * slab, (const char *)x->data + (size_t)off * es, slab);
    }
    return true;
}

/* ---- scatter ---------------------------------------------------------------- */

enum { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN };

static bool get_reduction(Interp *ip, int *red)
{
    const char *s;
    if (!interp_attr_str(ip, "reduction", &s))
        return false;
    static const char *const names[] = {"none", "add", "mul", "max", "min"};
    for (int i = 0; i < 5; i++)
        if (strcmp(s, names[i]) == 0) {
            *red = i;
            return true;
        }
    return interp_fail(ip, "unknown reduction \"%s\"", s);
}

/* out[o] = out[o] (red) upd[u]. */
static void scatter_one(Tensor *out, size_t o, const Tensor *upd, size_t u, int red)
{
    size_t es = dtype_size(out->dtype);
    if (red == RED_NONE) {
        memcpy((char *)out->data + o * es, (const char *)upd->data + u * es, es);
    } else if (dtype_is_float(out->dtype)) {
        double a = interp_load_f(out, o), b = interp_load_f(upd, u), r;
        switch (red) {
        case RED_ADD: r = a + b; break;
        case RED_MUL: r = a * b; break;
        case RED_MAX: r = a != a || b != b ? a + b : a > b ? a : b; break;
        default: r = a != a || b != b ? a + b : a < b ? a : b; break;
        }
        interp_store_f(out, o, r);
    } else {
        int64_t a = interp_load_i(out, o), b = interp_load_i(upd, u), r;
        switch (red) {
        case RED_ADD: r = (int64_t)((uint64_t)a + (uint64_t)b); break;
        case RED_MUL: r = (int64_t)((uint64_t)a * (uint64_t)b); break;
        case RED_MAX: r = a > b ? a : b; break;
        default: r = a < b ? a : b; break;
        }
        interp_store_i(out, o, r);
    }
}

static bool scatter_prologue(Interp *ip, const Tensor *const *in, Tensor *out, int *red)
{
    const Tensor *x = in[0], *idx = in[1], *upd = in[2];
    if (!get_reduction(ip, red) || !check_index_dtype(ip, idx))
        return false;
    if (upd->dtype != x->dtype)
        return interp_fail(ip, "updates are %s, data %s", dtype_name(upd->dtype), dtype_name(x->dtype));
    if (!interp_alloc(ip, out, x->dtype, x->rank, x->shape))
        return false;
    if (out->nbytes)
        memcpy(out->data, x->data, out->nbytes);
    return true;
}

/* scatter_elements without a reduction and with i64 indices (Faster
 * R-CNN's MultiScaleRoIAlign puts each level's [R, 256, 7, 7] in place
 * this way): rows of the last axis, each element copied by its size,
 * not through the generic loads and stores (13 -> 3 ms a call there). */
static bool scatter_copy(Interp *ip, const Tensor *idx, const Tensor *upd, Tensor *out, int ax, const int64_t *xst,
                         const int64_t *st)
{
    int last = idx->rank - 1;
    int64_t len = idx->shape[last], rows[MAX_RANK], n = out->shape[ax], step = st[last];
    memcpy(rows, idx->shape, sizeof rows);
    rows[last] = 1;
    size_t es = dtype_size(out->dtype), nrows = len ? tensor_numel(idx) / (size_t)len : 0;
    const int64_t *iv = idx->data;
    const char *u = upd->data;
    char *o = out->data;
    NdIter it;
    nditer_init(&it, idx->rank, rows);
    nditer_add(&it, st);
    for (size_t r = 0; r < nrows; r++, nditer_next(&it))
        for (int64_t t = 0; t < len; t++) {
            size_t i = r * (size_t)len + (size_t)t;
            int64_t v = iv[i], w = v < 0 ? v + n : v;
            if (w < 0 || w >= n) {
                int64_t dummy;
                load_index(ip, idx, i, ax, n, &dummy); /* the message */
                tensor_free(out);
                return false;
            }
            size_t at = (size_t)(it.off[0] + t * step + w * xst[ax]);
            switch (es) {
            case 4: ((uint32_t *)o)[at] = ((const uint32_t *)u)[i]; break;
            case 8: ((uint64_t *)o)[at] = ((const uint64_t *)u)[i]; break;
            default: memcpy(o + at * es, u + i * es, es); break;
            }
        }
    return true;
}

bool interp_scatter_elements(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    const Tensor *x = in[0], *idx = in[1], *upd = in[2];
    int64_t axis;
    int ax, red;
    if (!interp_attr_int(ip, "axis", &axis) || !interp_axis(ip, "axis", axis, x->rank, &ax))
        return false;
    if (idx->rank != x->rank || upd->rank != x->rank)
        return interp_fail(ip, "data, indices and updates must have equal ranks");
    for (int i = 0; i < x->rank; i++) {
        if (idx->shape[i] != upd->shape[i])
            return interp_fail(ip, "indices and updates differ in dim %d (%lld, %lld)", i,
                               (long long)idx->shape[i], (long long)upd->shape[i]);
        if (i != ax && idx->shape[i] > x->shape[i])
            return interp_fail(ip, "indices dim %d (%lld) exceeds the data dim (%lld)", i,
                               (long long)idx->shape[i], (long long)x->shape[i]);
    }
    if (!scatter_prologue(ip, in, out, &red))
        return false;
    int64_t xst[MAX_RANK], st[MAX_RANK];
    interp_strides(x->rank, x->shape, xst);
    memcpy(st, xst, sizeof st);
    st[ax] = 0;
    if (red == RED_NONE && idx->dtype == DT_I64 && x->rank > 0)
        return scatter_copy(ip, idx, upd, out, ax, xst, st);
    size_t n = tensor_numel(idx);
    NdIter it;
    nditer_init(&it, idx->rank, idx->shape);
    nditer_add(&it, st);
    for (size_t i = 0; i < n; i++, nditer_next(&it)) {
        int64_t v;
        if (!load_index(ip, idx, i, ax, x->shape[ax], &v)) {
            tensor_free(out);
            return false;
        }
        scatter_one(out, (size_t)(it.off[0] + v * xst[ax]), upd, i, red);
    }
    return true;
}

bool interp_scatter_nd(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    const Tensor *x = in[0], *idx = in[1], *upd = in[2];
    int red;
    if (idx->rank < 1)
        return interp_fail(ip, "indices must have rank >= 1");
    int64_t q = idx->shape[idx->rank - 1];
    if (q < 0 || q > x->rank)
        return interp_fail(ip, "index depth %lld exceeds the data rank %d", (long long)q, x->rank);
    /* updates: idx.shape[:-1] + x.shape[q:] */
    int urank = idx->rank - 1 + x->rank - (int)q;
    bool ok = upd->rank == urank;
    for (int i = 0; ok && i < idx->rank - 1; i++)
        ok = upd->shape[i] == idx->shape[i];
    for (int i = (int)q; ok && i < x->rank; i++)
        ok = upd->shape[idx->rank - 1 + i - (int)q] == x->shape[i];
    if (!ok)
        return interp_fail(ip, "updates must have shape indices.shape[:-1] + data.shape[%lld:]", (long long)q);
    if (!scatter_prologue(ip, in, out, &red))
        return false;
    size_t slab = 1, rows = 1;
    for (int i = (int)q; i < x->rank; i++)
        slab *= (size_t)x->shape[i];
    for (int i = 0; i < idx->rank - 1; i++)
        rows *= (size_t)idx->shape[i];
    for (size_t p = 0; p < rows; p++) {
        int64_t off;
        if (!nd_offset(ip, x, idx, p, 0, (int)q, NULL, &off)) {
            tensor_free(out);
            return false;
        }
        for (size_t e = 0; e < slab; e++)
            scatter_one(out, (size_t)off + e, upd, p * slab + e, red);
    }
    return true;
}

/* ---- nonzero ------------------------------------------------------------------ */

bool interp_nonzero(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    const Tensor *x = in[0];
    size_t n = tensor_numel(x), count = 0;
    bool fl = dtype_is_float(x->dtype);
    for (size_t i = 0; i < n; i++)
        count += fl ? interp_load_f(x, i) != 0 : interp_load_i(x, i) != 0;
    int64_t shape[2] = {x->rank, (int64_t)count};
    if (!interp_alloc(ip, out, DT_I64, 2, shape))
        return false;
    int64_t *o = out->data;
    NdIter it;
    nditer_init(&it, x->rank, x->shape);
    size_t j = 0;
    for (size_t i = 0; i < n; i++, nditer_next(&it)) {
        if (fl ? interp_load_f(x, i) == 0 : interp_load_i(x, i) == 0)
            continue;
        for (int d = 0; d < x->rank; d++)
            o[(size_t)d * count + j] = it.idx[d];
        j++;
    }
    return true;
}
