/*
 * interp_move.c — data movement that needs no index operands: broadcast,
 * reshape, transpose, slice, reverse, concat, pad, iota; and the shape ops
 * (dim, shape_of, shape_const) and constants.
 *
 * Most of these are one strided copy: result element at index (i0, i1, ...)
 * comes from source element base + sum(i_k * st_k), with st_k = 0 for a
 * broadcast axis, negative for a reversed one. Elements are copied as bytes,
 * so every dtype behaves alike.
 */
#include "runtime/interp_impl.h"

#include <string.h>

static void strided_copy(Tensor *out, const Tensor *x, int64_t base, const int64_t *st)
{
    size_t es = dtype_size(x->dtype), n = tensor_numel(out);
    NdIter it;
    nditer_init(&it, out->rank, out->shape);
    nditer_add(&it, st);
    it.off[0] = base;
    for (size_t i = 0; i < n; i++, nditer_next(&it))
        memcpy((char *)out->data + i * es, (const char *)x->data + (size_t)it.off[0] * es, es);
}

/* numel of a shape with overflow and sign checks. */
static bool shape_numel(Interp *ip, int rank, const int64_t *shape, size_t *n)
{
    size_t k = 1;
    for (int i = 0; i < rank; i++) {
        if (shape[i] < 0)
            return interp_fail(ip, "result dim %d is negative (%lld)", i, (long long)shape[i]);
        if (!size_mul(k, (size_t)shape[i], &k))
            return interp_fail(ip, "result shape overflows");
    }
    *n = k;
    return true;
}

/* ---- broadcast ---------------------------------------------------------- */

static bool do_broadcast(Interp *ip, const Tensor *x, const int64_t *shape, int rank, Tensor *out)
{
    const int64_t *axes;
    int naxes;
    if (!interp_attr_ints(ip, "axes", &axes, &naxes))
        return false;
    if (naxes != x->rank)
        return interp_fail(ip, "axes has %d entries for an operand of rank %d", naxes, x->rank);
    int64_t xst[MAX_RANK], st[MAX_RANK];
    bool used[MAX_RANK] = {false};
    interp_strides(x->rank, x->shape, xst);
    for (int i = 0; i < rank; i++)
        st[i] = 0;
    for (int i = 0; i < naxes; i++) {
        int64_t a = axes[i];
        if (a < 0 || a >= rank || used[a])
            return interp_fail(ip, "axes entry %d (%lld) is out of range or repeated", i, (long long)a);
        used[a] = true;
        if (x->shape[i] != shape[a] && x->shape[i] != 1)
            return interp_fail(ip, "operand dim %d (%lld) does not broadcast to result dim %lld (%lld)",
                               i, (long long)x->shape[i], (long long)a, (long long)shape[a]);
        st[a] = x->shape[i] == 1 ? 0 : xst[i];
    }
    if (!interp_alloc(ip, out, x->dtype, rank, shape))
        return false;
    strided_copy(out, x, 0, st);
    return true;
}

bool interp_broadcast(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    int64_t shape[MAX_RANK];
    int rank;
    return interp_attr_dims(ip, "shape", shape, MAX_RANK, &rank) &&
           do_broadcast(ip, in[0], shape, rank, out);
}

bool interp_dyn_broadcast(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    int64_t shape[MAX_RANK];
    int rank;
    return interp_read_ints(ip, in[1], 1, shape, MAX_RANK, &rank) &&
           do_broadcast(ip, in[0], shape, rank, out);
}

/* ---- reshape ------------------------------------------------------------ */

static bool do_reshape(Interp *ip, const Tensor *x, const int64_t *shape, int rank, Tensor *out)
{
    size_t n;
    if (!shape_numel(ip, rank, shape, &n))
        return false;
    if (n != tensor_numel(x))
        return interp_fail(ip, "cannot reshape %zu elements into %zu", tensor_numel(x), n);
    if (!interp_alloc(ip, out, x->dtype, rank, shape))
        return false;
    if (out->nbytes)
        memcpy(out->data, x->data, out->nbytes);
    return true;
}

bool interp_reshape(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    int64_t shape[MAX_RANK];
    int rank;
    return interp_attr_dims(ip, "shape", shape, MAX_RANK, &rank) &&
           do_reshape(ip, in[0], shape, rank, out);
}

bool interp_dyn_reshape(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    int64_t shape[MAX_RANK];
    int rank;
    return interp_read_ints(ip, in[1], 1, shape, MAX_RANK, &rank) &&
           do_reshape(ip, in[0], shape, rank, out);
}

/* ---- transpose, slice, reverse ---------------------------------------- */

bool interp_transpose(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    const Tensor *x = in[0];
    const int64_t *perm;
    int n;
    if (!interp_attr_ints(ip, "perm", &perm, &n))
        return false;
    if (n != x->rank)
        return interp_fail(ip, "perm has %d entries for rank %d", n, x->rank);
    bool used[MAX_RANK] = {false};
    int64_t xst[MAX_RANK], st[MAX_RANK], shape[MAX_RANK];
    interp_strides(x->rank, x->shape, xst);
    for (int i = 0; i < n; i++) {
        if (perm[i] < 0 || perm[i] >= n || used[perm[i]])
            return interp_fail(ip, "perm is not a permutation (entry %d is %lld)", i, (long long)perm[i]);
        used[perm[i]] = true;
        shape[i] = x->shape[perm[i]];
        st[i] = xst[perm[i]];
    }
    if (!interp_alloc(ip, out, x->dtype, n, shape))
        return false;
    strided_copy(out, x, 0, st);
    return true;
}

/* x with its channels moved: [N, C, s...] to [N, s..., C] (to_last), or
 * back; conv and pool with channels_last are defined through it. */
bool interp_move_channels(Interp *ip, const Tensor *x, bool to_last, Tensor *out)
{
    int r = x->rank;
    int64_t xst[MAX_RANK], st[MAX_RANK], shape[MAX_RANK];
    interp_strides(r, x->shape, xst);
    for (int i = 0; i < r; i++) {
        int from = i == 0 ? 0 : to_last ? (i == r - 1 ? 1 : i + 1) : (i == 1 ? r - 1 : i - 1);
        shape[i] = x->shape[from];
        st[i] = xst[from];
    }
    if (!interp_alloc(ip, out, x->dtype, r, shape))
        return false;
    strided_copy(out, x, 0, st);
    return true;
}

/* x [N, C, S...] blocked by b: [N, ceildiv(C, b), S..., b], channel ch
 * at block ch / b, lane ch % b, the lanes past C zero (to_blocked); or
 * back, from [N, Cb, S..., b] to the first c channels [N, c, S...]
 * (c <= Cb * b). conv and pool with block are defined through it. */
bool interp_block_channels(Interp *ip, const Tensor *x, int64_t b, bool to_blocked, int64_t c, Tensor *out)
{
    int r = x->rank;
    int64_t shape[MAX_RANK], sp = 1;
    if (b < 1 || (to_blocked ? r + 1 : r - 1) > MAX_RANK || r < (to_blocked ? 2 : 3))
        return interp_fail(ip, "blocked layout: rank %d, block %lld", r, (long long)b);
    int nsp = to_blocked ? r - 2 : r - 3;
    for (int i = 0; i < nsp; i++)
        sp *= x->shape[2 + i];
    int64_t n = x->shape[0], cb = to_blocked ? (x->shape[1] + b - 1) / b : x->shape[1];
    int64_t ch = to_blocked ? x->shape[1] : c;
    if (!to_blocked && (x->shape[r - 1] != b || c > cb * b))
        return interp_fail(ip, "blocked layout: %lld channels from %lld blocks of %lld", (long long)c,
                           (long long)cb, (long long)x->shape[r - 1]);
    shape[0] = n;
    shape[1] = to_blocked ? cb : c;
    memcpy(shape + 2, x->shape + 2, (size_t)nsp * sizeof *shape);
    if (to_blocked)
        shape[2 + nsp] = b;
    if (!interp_alloc(ip, out, x->dtype, to_blocked ? r + 1 : r - 1, shape))
        return false;
    size_t es = dtype_size(x->dtype);
    char *o = out->data;
    const char *xd = x->data;
    if (to_blocked)
        memset(o, 0, out->nbytes);
    for (int64_t i = 0; i < n; i++)
        for (int64_t k = 0; k < ch; k++)
            for (int64_t s = 0; s < sp; s++) {
                int64_t plain = (i * ch + k) * sp + s, blocked = ((i * cb + k / b) * sp + s) * b + k % b;
                memcpy(o + (size_t)(to_blocked ? blocked : plain) * es,
                       xd + (size_t)(to_blocked ? plain : blocked) * es, es);
            }
    return true;
}

bool interp_slice(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    const Tensor *x = in[0];
    int64_t start[MAX_RANK], limit[MAX_RANK], xst[MAX_RANK], st[MAX_RANK], shape[MAX_RANK];
    const int64_t *stride;
    int ns, nl, nst;
    if (!interp_attr_dims(ip, "start", start, MAX_RANK, &ns) ||
        !interp_attr_dims(ip, "limit", limit, MAX_RANK, &nl) ||
        !interp_attr_ints(ip, "stride", &stride, &nst))
        return false;
    if (ns != x->rank || nl != x->rank || nst != x->rank)
        return interp_fail(ip, "start, limit and stride need %d entries (have %d, %d, %d)", x->rank,
                           ns, nl, nst);
    interp_strides(x->rank, x->shape, xst);
    int64_t base = 0;
    for (int i = 0; i < x->rank; i++) {
        if (stride[i] <= 0)
            return interp_fail(ip, "stride %d is %lld (must be > 0)", i, (long long)stride[i]);
        if (start[i] < 0 || start[i] > limit[i] || limit[i] > x->shape[i])
            return interp_fail(ip, "axis %d: need 0 <= start (%lld) <= limit (%lld) <= dim (%lld)", i,
                               (long long)start[i], (long long)limit[i], (long long)x->shape[i]);
        shape[i] = (limit[i] - start[i] + stride[i] - 1) / stride[i];
        base += start[i] * xst[i];
        st[i] = stride[i] * xst[i];
    }
    if (!interp_alloc(ip, out, x->dtype, x->rank, shape))
        return false;
    strided_copy(out, x, base, st);
    return true;
}

/* ONNX Slice along one axis of size n: clamps start and end, returns the
 * result length and the first index. */
static int64_t onnx_slice_axis(int64_t n, int64_t start, int64_t end, int64_t step, int64_t *first)
{
    *first = 0;
    if (n == 0)
        return 0;
    if (start < 0)
        start += n;
    if (end < 0)
        end += n;
    int64_t len;
    if (step > 0) {
        start = start < 0 ? 0 : start > n ? n : start;
        end = end < 0 ? 0 : end > n ? n : end;
        len = end > start ? (end - start - 1) / step + 1 : 0;
    } else {
        start = start < 0 ? 0 : start > n - 1 ? n - 1 : start;
        end = end < -1 ? -1 : end > n - 1 ? n - 1 : end;
        uint64_t s = 0 - (uint64_t)step; /* -step, even for INT64_MIN */
        len = start > end ? (int64_t)((uint64_t)(start - end - 1) / s) + 1 : 0;
    }
    *first = start;
    return len;
}

bool interp_dyn_slice(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    const Tensor *x = in[0];
    int64_t starts[MAX_RANK], ends[MAX_RANK], steps[MAX_RANK];
    int n0, n1, n2;
    if (!interp_read_ints(ip, in[1], 1, starts, MAX_RANK, &n0) ||
        !interp_read_ints(ip, in[2], 2, ends, MAX_RANK, &n1) ||
        !interp_read_ints(ip, in[3], 3, steps, MAX_RANK, &n2))
        return false;
    if (n0 != x->rank || n1 != x->rank || n2 != x->rank)
        return interp_fail(ip, "starts, ends and steps need %d entries (have %d, %d, %d)", x->rank,
                           n0, n1, n2);
    int64_t xst[MAX_RANK], st[MAX_RANK], shape[MAX_RANK], base = 0;
    interp_strides(x->rank, x->shape, xst);
    for (int i = 0; i < x->rank; i++) {
        if (steps[i] == 0)
            return interp_fail(ip, "step %d is 0", i);
        int64_t first;
        shape[i] = onnx_slice_axis(x->shape[i], starts[i], ends[i], steps[i], &first);
        if (shape[i] > 0)
            base += first * xst[i];
        st[i] = shape[i] > 1 ? steps[i] * xst[i] : 0;
    }
    if (!interp_alloc(ip, out, x->dtype, x->rank, shape))
        return false;
    strided_copy(out, x, base, st);
    return true;
}

bool interp_reverse(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    const Tensor *x = in[0];
    const int64_t *axes;
    int n;
    if (!interp_attr_ints(ip, "axes", &axes, &n))
        return false;
    int64_t st[MAX_RANK], base = 0;
    bool rev[MAX_RANK] = {false};
    interp_strides(x->rank, x->shape, st);
    for (int i = 0; i < n; i++) {
        int a;
        if (!interp_axis(ip, "axis", axes[i], x->rank, &a))
            return false;
        if (rev[a])
            return interp_fail(ip, "axis %d is repeated", a);
        rev[a] = true;
        if (x->shape[a] > 0)
            base += (x->shape[a] - 1) * st[a];
        st[a] = -st[a];
    }
    if (!interp_alloc(ip, out, x->dtype, x->rank, x->shape))
        return false;
    strided_copy(out, x, base, st);
    return true;
}

/* ---- concat --------------------------------------------------------------- */

bool interp_concat(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    const Tensor *x0 = in[0];
    int64_t axis;
    int ax;
    if (!interp_attr_int(ip, "axis", &axis) || !interp_axis(ip, "axis", axis, x0->rank, &ax))
        return false;
    int64_t shape[MAX_RANK];
    memcpy(shape, x0->shape, sizeof shape);
    shape[ax] = 0;
    for (int k = 0; k < op->nin; k++) {
        const Tensor *x = in[k];
        if (x->dtype != x0->dtype || x->rank != x0->rank)
            return interp_fail(ip, "operand %d is %s of rank %d, operand 0 is %s of rank %d", k,
                               dtype_name(x->dtype), x->rank, dtype_name(x0->dtype), x0->rank);
        for (int i = 0; i < x->rank; i++)
            if (i != ax && x->shape[i] != x0->shape[i])
                return interp_fail(ip, "operand %d dim %d is %lld, operand 0 has %lld", k, i,
                                   (long long)x->shape[i], (long long)x0->shape[i]);
        if (__builtin_add_overflow(shape[ax], x->shape[ax], &shape[ax]))
            return interp_fail(ip, "result shape overflows");
    }
    if (!interp_alloc(ip, out, x0->dtype, x0->rank, shape))
        return false;
    size_t es = dtype_size(x0->dtype), outer = 1, inner = es;
    for (int i = 0; i < ax; i++)
        outer *= (size_t)shape[i];
    for (int i = ax + 1; i < x0->rank; i++)
        inner *= (size_t)shape[i];
    size_t row = (size_t)shape[ax] * inner, at = 0;
    for (int k = 0; k < op->nin; k++) {
        size_t blk = (size_t)in[k]->shape[ax] * inner;
        for (size_t o = 0; o < outer && blk; o++)
            memcpy((char *)out->data + o * row + at, (const char *)in[k]->data + o * blk, blk);
        at += blk;
    }
    return true;
}

/* ---- pad ------------------------------------------------------------------ */

enum { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP };

/* Source index for result index o along an axis of size n, or -1 for the
 * pad value. */
static int64_t pad_src(int mode, int64_t s, int64_t n)
{
    if (s >= 0 && s < n)
        return s;
    if (mode == PAD_CONSTANT)
        return -1;
    if (mode == PAD_EDGE)
        return s < 0 ? 0 : n - 1;
    if (mode == PAD_WRAP) {
        s %= n;
        return s < 0 ? s + n : s;
    }
    if (n == 1)
        return 0;
    int64_t p = 2 * (n - 1);
    s %= p;
    if (s < 0)
        s += p;
    return s < n ? s : p - s;
}

/* n copies of the es-byte value v at dst */
static void fill_value(char *dst, const void *v, size_t es, int64_t n)
{
    bool zero = true;
    for (size_t b = 0; b < es; b++)
        zero &= ((const unsigned char *)v)[b] == 0;
    if (zero) {
        memset(dst, 0, (size_t)n * es);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        memcpy(dst + (size_t)i * es, v, es);
}

/* Constant mode by rows of the last axis: the part of a row that lies in x
 * is one copy, the rest the value. Element by element, Swin-T's dyn_pad of
 * its 56 x 56 x 96 maps took 2.7 ms a call, 6% of its run. */
static void pad_rows(const Tensor *x, const void *val, const int64_t *low, const int64_t *shape, size_t es,
                     Tensor *out)
{
    int r = x->rank;
    int64_t ow = shape[r - 1], xw = x->shape[r - 1], lo = low[r - 1];
    int64_t rows = ow ? (int64_t)(tensor_numel(out) / (size_t)ow) : 0;
    int64_t j0 = lo > 0 ? lo : 0, j1 = lo + xw < ow ? lo + xw : ow;
    if (j0 > ow)
        j0 = ow;
    if (j1 < j0)
        j1 = j0;
    int64_t xst[MAX_RANK];
    interp_strides(r, x->shape, xst);
    NdIter it;
    nditer_init(&it, r - 1, shape);
    for (int64_t q = 0; q < rows; q++, nditer_next(&it)) {
        char *dst = (char *)out->data + (size_t)(q * ow) * es;
        int64_t off = 0;
        for (int a = 0; a < r - 1 && off >= 0; a++) {
            int64_t s = it.idx[a] - low[a];
            off = s < 0 || s >= x->shape[a] ? -1 : off + s * xst[a];
        }
        if (off < 0 || j1 == j0) {
            fill_value(dst, val, es, ow);
            continue;
        }
        fill_value(dst, val, es, j0);
        memcpy(dst + (size_t)j0 * es, (const char *)x->data + (size_t)(off + j0 - lo) * es, (size_t)(j1 - j0) * es);
        fill_value(dst + (size_t)j1 * es, val, es, ow - j1);
    }
}

static bool do_pad(Interp *ip, const Op *op, const Tensor *x, const Tensor *val, const int64_t *low,
                   const int64_t *high, Tensor *out)
{
    const char *ms;
    if (!interp_attr_str(ip, "mode", &ms))
        return false;
    int mode = strcmp(ms, "constant") == 0 ? PAD_CONSTANT : strcmp(ms, "reflect") == 0 ? PAD_REFLECT
             : strcmp(ms, "edge") == 0   ? PAD_EDGE : strcmp(ms, "wrap") == 0 ? PAD_WRAP : -1;
    if (mode < 0)
        return interp_fail(ip, "unknown mode \"%s\"", ms);
    if (val->dtype != x->dtype || tensor_numel(val) != 1)
        return interp_fail(ip, "the pad value must be a %s scalar", dtype_name(x->dtype));
    int64_t shape[MAX_RANK];
    for (int i = 0; i < x->rank; i++) {
        int64_t s;
        if (__builtin_add_overflow(x->shape[i], low[i], &s) || __builtin_add_overflow(s, high[i], &s))
            return interp_fail(ip, "result shape overflows");
        shape[i] = s;
        if (s < 0)
            return interp_fail(ip, "axis %d: pads %lld and %lld crop more than the dim %lld", i,
                               (long long)low[i], (long long)high[i], (long long)x->shape[i]);
        if (mode != PAD_CONSTANT && x->shape[i] == 0 && s > 0)
            return interp_fail(ip, "axis %d: cannot pad an empty axis in mode %s", i, ms);
    }
    if (!interp_alloc(ip, out, x->dtype, x->rank, shape))
        return false;
    size_t es = dtype_size(x->dtype), n = tensor_numel(out);
    if (mode == PAD_CONSTANT && x->rank > 0) {
        pad_rows(x, val->data, low, shape, es, out);
        return true;
    }
    int64_t xst[MAX_RANK];
    interp_strides(x->rank, x->shape, xst);
    NdIter it;
    nditer_init(&it, x->rank, shape);
    for (size_t i = 0; i < n; i++, nditer_next(&it)) {
        int64_t off = 0;
        for (int a = 0; a < x->rank && off >= 0; a++) {
            int64_t s = pad_src(mode, it.idx[a] - low[a], x->shape[a]);
            off = s < 0 ? -1 : off + s * xst[a];
        }
        const void *src = off < 0 ? val->data : (const char *)x->data + (size_t)off * es;
        memcpy((char *)out->data + i * es, src, es);
    }
    (void)op;
    return true;
}

bool interp_pad(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    int64_t low[MAX_RANK], high[MAX_RANK];
    int nl, nh;
    if (!interp_attr_dims(ip, "low", low, MAX_RANK, &nl) || !interp_attr_dims(ip, "high", high, MAX_RANK, &nh))
        return false;
    if (nl != in[0]->rank || nh != in[0]->rank)
        return interp_fail(ip, "low and high need %d entries (have %d, %d)", in[0]->rank, nl, nh);
    return do_pad(ip, op, in[0], in[1], low, high, out);
}

bool interp_dyn_pad(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    int64_t pads[2 * MAX_RANK];
    int n, r = in[0]->rank;
    if (!interp_read_ints(ip, in[1], 1, pads, 2 * MAX_RANK, &n))
        return false;
    if (n != 2 * r)
        return interp_fail(ip, "pads has %d entries, expected %d", n, 2 * r);
    return do_pad(ip, op, in[0], in[2], pads, pads + r, out);
}

/* ---- iota ------------------------------------------------------------------ */

static bool do_iota(Interp *ip, const Op *op, const int64_t *shape, int rank, Tensor *out)
{
    const Attr *a = op_attr(op, "dtype");
    int64_t axis;
    int ax;
    if (!a || a->kind != ATTR_DTYPE || a->dt < 0 || a->dt >= DT_COUNT)
        return interp_fail(ip, "missing or bad attribute \"dtype\"");
    if (!interp_attr_int(ip, "axis", &axis) || !interp_axis(ip, "axis", axis, rank, &ax))
        return false;
    size_t n;
    if (!shape_numel(ip, rank, shape, &n) || !interp_alloc(ip, out, a->dt, rank, shape))
        return false;
    NdIter it;
    nditer_init(&it, rank, shape);
    for (size_t i = 0; i < n; i++, nditer_next(&it))
        interp_store_i(out, i, it.idx[ax]);
    return true;
}

bool interp_iota(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    int64_t shape[MAX_RANK];
    int rank;
    return interp_attr_dims(ip, "shape", shape, MAX_RANK, &rank) && do_iota(ip, op, shape, rank, out);
}

bool interp_dyn_iota(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    int64_t shape[MAX_RANK];
    int rank;
    return interp_read_ints(ip, in[0], 0, shape, MAX_RANK, &rank) && do_iota(ip, op, shape, rank, out);
}

/* ---- shapes and constants ------------------------------------------------- */

bool interp_dim(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    int64_t axis;
    int ax;
    if (!interp_attr_int(ip, "axis", &axis) || !interp_axis(ip, "axis", axis, in[0]->rank, &ax))
        return false;
    if (!interp_alloc(ip, out, DT_I64, 0, NULL))
        return false;
    ((int64_t *)out->data)[0] = in[0]->shape[ax];
    return true;
}

bool interp_shape_of(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    int64_t r = in[0]->rank;
    if (!interp_alloc(ip, out, DT_I64, 1, &r))
        return false;
    if (r)
        memcpy(out->data, in[0]->shape, (size_t)r * sizeof(int64_t));
    return true;
}

bool interp_shape_const(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    int64_t v[MAX_RANK];
    int n;
    if (!interp_attr_dims(ip, "dims", v, MAX_RANK, &n))
        return false;
    bool scalar = op_attr_int(op, "scalar", 0) != 0;
    if (scalar && n != 1)
        return interp_fail(ip, "scalar shape_const needs exactly one dim, has %d", n);
    int64_t len = n;
    if (!interp_alloc(ip, out, DT_I64, scalar ? 0 : 1, &len))
        return false;
    if (n)
        memcpy(out->data, v, (size_t)n * sizeof(int64_t));
    return true;
}

bool interp_const(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    const Type *t = &op->out[0]->type;
    const Const *c = op->cst;
    int64_t shape[MAX_RANK];
    if (t->rank < 0 || t->rank > MAX_RANK)
        return interp_fail(ip, "bad rank %d", t->rank);
    for (int i = 0; i < t->rank; i++) {
        if (!t->dims[i] || dim_eval(t->dims[i], &ip->env, &shape[i]) != DIM_OK)
            return interp_fail(ip, "constant dim %d cannot be evaluated", i);
    }
    if (!c || c->src == CONST_ELIDED || (!c->data && c->nbytes))
        return interp_fail(ip, "the constant's data was elided; it cannot be executed");
    size_t n, bytes;
    if (!shape_numel(ip, t->rank, shape, &n) || !size_mul(n, dtype_size(t->dtype), &bytes))
        return interp_fail(ip, "constant shape overflows");
    if (c->nbytes != bytes)
        return interp_fail(ip, "constant holds %zu bytes, its type needs %zu", c->nbytes, bytes);
    if (bytes == 0)
        return interp_alloc(ip, out, t->dtype, t->rank, shape);
    memset(out, 0, sizeof *out);
    out->dtype = t->dtype;
    out->rank = t->rank;
    memcpy(out->shape, shape, (size_t)t->rank * sizeof *shape);
    out->data = (void *)c->data; /* borrowed: kernels never write operands */
    out->nbytes = bytes;
    out->owned = false;
    return true;
}
