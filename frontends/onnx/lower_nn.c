/*
 * lower_nn.c — compute-bound ops: MatMul, Gemm and Einsum become `dot`
 * (a general dot with batch and contracting dims: result = batch dims, then
 * the lhs free dims, then the rhs free dims); Conv, ConvTranspose and the
 * pools become conv, conv_transpose and pool with explicit padding dims
 * (auto_pad SAME_* is resolved into dim expressions here).
 */
#include "frontends/onnx/internal.h"

#include <string.h>

#define CX (&im->g->dims)

static Dim *dc(Imp *im, int64_t c) { return dim_const(CX, c); }

static Value *dot(Imp *im, Value *a, Value *b, const int64_t *lb, const int64_t *rb, int nb,
                  int64_t lc, int64_t rc)
{
    if (!a || !b)
        return NULL;
    return build_dot(im->g, a, b, lb, rb, nb, &lc, &rc, 1);
}

/* numpy matmul: 1-D operands, a 2-D rhs (the common weight case) and
 * broadcast batch dims. */
Value *imp_matmul(Imp *im, Value *a, Value *b)
{
    int ra = vrank(a), rb = vrank(b);
    if (ra < 1 || rb < 1) {
        imp_err(im, "MatMul operands must have rank 1 or more");
        return NULL;
    }
    if (ra == 1 || rb <= 2) /* contract a's last dim with b's K; no batch */
        return dot(im, a, b, NULL, NULL, 0, ra - 1, rb == 1 ? 0 : rb - 2);
    if (ra == 2) { /* [M, K] x [B.., K, N] -> [M, B.., N] -> [B.., M, N] */
        Value *y = dot(im, a, b, NULL, NULL, 0, 1, rb - 2);
        int64_t perm[MAX_RANK];
        for (int i = 0; i < rb - 2; i++)
            perm[i] = i + 1;
        perm[rb - 2] = 0;
        perm[rb - 1] = rb - 1;
        return imp_transpose(im, y, perm);
    }
    int nb = (ra > rb ? ra : rb) - 2;
    Dim *batch[MAX_RANK];
    bool same = ra == rb;
    for (int i = 0; i < nb; i++) {
        int ia = i - (nb - (ra - 2)), ib = i - (nb - (rb - 2));
        Dim *da = ia >= 0 ? vdims(a)[ia] : dc(im, 1), *db = ib >= 0 ? vdims(b)[ib] : dc(im, 1);
        if (da == db)
            batch[i] = da;
        else if (dim_is(da, 1))
            batch[i] = db;
        else if (dim_is(db, 1))
            batch[i] = da;
        else if (dim_is_const(da) && dim_is_const(db)) {
            imp_err(im, "batch dims %lld and %lld do not broadcast", (long long)da->c,
                    (long long)db->c);
            return NULL;
        } else
            batch[i] = dim_max(CX, da, db);
        same &= da == db;
    }
    if (!same) {
        Dim *sa[MAX_RANK], *sb[MAX_RANK];
        memcpy(sa, batch, (size_t)nb * sizeof *sa);
        memcpy(sb, batch, (size_t)nb * sizeof *sb);
        sa[nb] = vdims(a)[ra - 2];
        sa[nb + 1] = vdims(a)[ra - 1];
        sb[nb] = vdims(b)[rb - 2];
        sb[nb + 1] = vdims(b)[rb - 1];
        a = imp_broadcast_to(im, a, sa, nb + 2);
        b = imp_broadcast_to(im, b, sb, nb + 2);
    }
    int64_t bd[MAX_RANK];
    for (int i = 0; i < nb; i++)
        bd[i] = i;
    return dot(im, a, b, bd, bd, nb, nb + 1, nb);
}

bool onnx_lower_matmul(Imp *im)
{
    Value *a = imp_need(im, 0), *b = imp_need(im, 1);
    if (!a || !b)
        return false;
    return imp_done(im, imp_matmul(im, a, b));
}

bool onnx_lower_gemm(Imp *im)
{
    Value *a = imp_need(im, 0), *b = imp_need(im, 1), *c = IN(2);
    double alpha, beta;
    int64_t ta, tb;
    if (!a || !b || !attr_float(im, "alpha", 1, &alpha) || !attr_float(im, "beta", 1, &beta) ||
        !attr_int(im, "transA", 0, &ta) || !attr_int(im, "transB", 0, &tb))
        return false;
    if (vrank(a) != 2 || vrank(b) != 2)
        return imp_err(im, "Gemm operands must be 2-D");
    Value *y = dot(im, a, b, NULL, NULL, 0, ta ? 0 : 1, tb ? 1 : 0);
    if (alpha != 1)
        y = imp_binc(im, OP_MUL, y, alpha);
    if (c) {
        if (beta != 1)
            c = imp_binc(im, OP_MUL, c, beta);
        if (beta != 0)
            y = imp_bin(im, OP_ADD, y, c);
    }
    return imp_done(im, y);
}

/* ---- Einsum ---- */

/* Sums x over the letters of s that keep() rejects; updates s. */
static Value *einsum_drop(Imp *im, Value *x, char *s, const char *other, const char *out)
{
    int64_t axes[MAX_RANK];
    int n = 0, k = 0;
    for (int i = 0; s[i]; i++) {
        if (!strchr(other, s[i]) && !strchr(out, s[i]))
            axes[n++] = i;
        else
            s[k++] = s[i];
    }
    s[k] = 0;
    return n ? imp_reduce(im, x, "sum", axes, n, false) : x;
}

static bool einsum_term(Imp *im, const char *p, size_t len, char *out, int rank, bool rep)
{
    if (len > MAX_RANK || (int)len != rank)
        return imp_err(im, "equation term '%.*s' does not match an operand of rank %d", (int)len, p, rank);
    for (size_t i = 0; i < len; i++) {
        if (!((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= 'A' && p[i] <= 'Z')))
            return imp_errk(im, DIAG_UNSUPPORTED,
                            "equation term '%.*s': only letters and one ellipsis are supported", (int)len, p);
        if (!rep && memchr(p, p[i], i))
            return imp_err(im, "equation output '%.*s' repeats a letter", (int)len, p);
        out[i] = p[i];
    }
    out[len] = 0;
    return true;
}

/* A letter repeated within one term selects the diagonal of those axes:
 * x masked by iota(i) == iota(j), summed over the second axis j. */
static Value *einsum_diag(Imp *im, Value *x, char *s)
{
    for (int j = 1; x && s[j]; j++) {
        const char *f = memchr(s, s[j], (size_t)j);
        if (!f)
            continue;
        int i = (int)(f - s), r = vrank(x);
        int64_t ax = j;
        Value *eq = imp_cmp(im, "eq", build_iota(im->g, DT_I64, vdims(x), r, i),
                            build_iota(im->g, DT_I64, vdims(x), r, j));
        x = imp_reduce(im, imp_sel(im, eq, x, imp_scalar(im, vdt(x), 0)), "sum", &ax, 1, false);
        memmove(s + j, s + j + 1, strlen(s + j));
        j--;
    }
    return x;
}

/* Rewrites the equation (spaces removed) without ellipses and with an
 * explicit output: each operand's "..." becomes the last of K fresh
 * letters (K the most dims any "..." stands for), the output's "..." all
 * K; an implicit output is the K letters then the letters used exactly
 * once, sorted. */
static bool einsum_expand(Imp *im, const char *eq, char *dst, size_t cap)
{
    char pool[MAX_RANK + 1];
    int K = 0, n = im->nin, nk[2] = {0, 0};
    const char *arrow = strstr(eq, "->"), *p = eq;
    const char *t[3];
    size_t tl[3];
    for (int i = 0; i < n; i++) {
        const char *end = i + 1 < n ? strchr(p, ',') : (arrow ? arrow : p + strlen(p));
        if (!end || (arrow && end > arrow))
            return imp_err(im, "equation '%s' does not have %d operand terms", eq, n);
        t[i] = p;
        tl[i] = (size_t)(end - p);
        const char *e = strstr(p, "...");
        if (e && e < end) {
            int known = (int)tl[i] - 3;
            if (!IN(i) || vrank(IN(i)) < known)
                return imp_err(im, "equation term %d does not match its operand", i);
            nk[i] = vrank(IN(i)) - known;
            if (nk[i] > K)
                K = nk[i];
        }
        p = end + 1;
    }
    if (K > MAX_RANK)
        return imp_err(im, "ellipsis too wide");
    int m = 0;
    for (char c = 'A'; m < K && c <= 'z'; c++)
        if (((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) && !strchr(eq, c))
            pool[m++] = c;
    pool[m] = 0;
    size_t k = 0;
#define PUT(c) do { if (k + 1 >= cap) return imp_err(im, "equation too long"); dst[k++] = (c); } while (0)
    for (int i = 0; i < n; i++) {
        if (i)
            PUT(',');
        for (size_t q = 0; q < tl[i]; q++) {
            if (q + 3 <= tl[i] && !strncmp(t[i] + q, "...", 3)) {
                for (int r = K - nk[i]; r < K; r++)
                    PUT(pool[r]);
                q += 2;
            } else
                PUT(t[i][q]);
        }
    }
    PUT('-');
    PUT('>');
    if (arrow) {
        for (const char *q = arrow + 2; *q; q++) {
            if (!strncmp(q, "...", 3)) {
                for (int r = 0; r < K; r++)
                    PUT(pool[r]);
                q += 2;
            } else
                PUT(*q);
        }
    } else {
        for (int r = 0; r < K; r++)
            PUT(pool[r]);
        for (char c = 'A'; c <= 'z'; c++) {
            if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')))
                continue;
            int cnt = 0;
            for (const char *q = eq; *q; q++)
                cnt += *q == c;
            if (cnt == 1)
                PUT(c);
        }
    }
#undef PUT
    dst[k] = 0;
    return true;
}

bool onnx_lower_einsum(Imp *im)
{
    const char *eq;
    char terms[2][MAX_RANK + 1], out[MAX_RANK + 1], buf[256], full[256];
    if (!attr_str(im, "equation", NULL, &eq))
        return false;
    if (!eq)
        return imp_err(im, "equation is required");
    size_t k = 0;
    for (const char *p = eq; *p && k < sizeof buf - 1; p++)
        if (*p != ' ')
            buf[k++] = *p;
    buf[k] = 0;
    int n = im->nin;
    if (n < 1 || n > 2)
        return imp_errk(im, DIAG_UNSUPPORTED, "only one or two operands are supported");
    if (!einsum_expand(im, buf, full, sizeof full))
        return false;
    char *arrow = strstr(full, "->");
    const char *p = full;
    for (int i = 0; i < n; i++) {
        const char *end = i + 1 < n ? strchr(p, ',') : arrow;
        if (!IN(i) || !einsum_term(im, p, (size_t)(end - p), terms[i], vrank(IN(i)), true))
            return IN(i) ? false : imp_err(im, "input %d is empty", i);
        p = end + 1;
    }
    if (!einsum_term(im, arrow + 2, strlen(arrow + 2), out, (int)strlen(arrow + 2), false))
        return false;
    Value *ins[2] = {einsum_diag(im, IN(0), terms[0]), n > 1 ? einsum_diag(im, IN(1), terms[1]) : NULL};
    const char *b_letters = n > 1 ? terms[1] : "";
    Value *a = einsum_drop(im, ins[0], terms[0], b_letters, out), *y;
    char res[3 * MAX_RANK + 1];
    int nr = 0;
    if (n == 1) {
        y = a;
        strcpy(res, terms[0]);
        nr = (int)strlen(res);
    } else {
        Value *b = einsum_drop(im, ins[1], terms[1], terms[0], out);
        int64_t lb[MAX_RANK], rb[MAX_RANK], lc[MAX_RANK], rc[MAX_RANK];
        int nb = 0, nc = 0;
        const char *ta = terms[0], *tb = terms[1];
        for (int i = 0; ta[i]; i++) {
            const char *j = strchr(tb, ta[i]);
            if (!j)
                continue;
            if (strchr(out, ta[i])) {
                lb[nb] = i;
                rb[nb++] = j - tb;
                res[nr++] = ta[i];
            } else {
                lc[nc] = i;
                rc[nc++] = j - tb;
            }
        }
        for (int i = 0; ta[i]; i++)
            if (!strchr(tb, ta[i]))
                res[nr++] = ta[i];
        for (int i = 0; tb[i]; i++)
            if (!strchr(ta, tb[i]))
                res[nr++] = tb[i];
        res[nr] = 0;
        y = a && b ? build_dot(im->g, a, b, lb, rb, nb, lc, rc, nc) : NULL;
    }
    if ((int)strlen(out) != nr)
        return imp_errk(im, DIAG_UNSUPPORTED, "equation output '%s' is not supported", out);
    int64_t perm[MAX_RANK];
    for (int i = 0; i < nr; i++) {
        const char *j = strchr(res, out[i]);
        if (!j)
            return imp_err(im, "output letter '%c' is not in any input", out[i]);
        perm[i] = j - res;
    }
    return imp_done(im, imp_transpose(im, y, perm));
}

/* ---- Convolution and pooling ---- */

typedef struct Window {
    int nsp;
    int64_t strides[MAX_RANK], dil[MAX_RANK];
    Dim *pads[2 * MAX_RANK];
} Window;

/* Reads strides, dilations, pads and auto_pad for spatial dims whose
 * input sizes are in[] and kernel sizes k[]. */
static bool window(Imp *im, Window *w, Dim *const *in, Dim *const *k, int nsp)
{
    int64_t *v;
    int n;
    const char *autopad;
    w->nsp = nsp;
    for (int i = 0; i < nsp; i++)
        w->strides[i] = w->dil[i] = 1;
    if (!attr_ints(im, "strides", &v, &n))
        return false;
    if (n >= 0 && n != nsp)
        return imp_err(im, "strides has %d entries for %d spatial dims", n, nsp);
    for (int i = 0; i < n; i++)
        w->strides[i] = v[i];
    if (!attr_ints(im, "dilations", &v, &n))
        return false;
    if (n >= 0 && n != nsp)
        return imp_err(im, "dilations has %d entries for %d spatial dims", n, nsp);
    for (int i = 0; i < n; i++)
        w->dil[i] = v[i];
    for (int i = 0; i < nsp; i++)
        if (w->strides[i] < 1 || w->dil[i] < 1)
            return imp_err(im, "strides and dilations must be positive");
    if (!attr_str(im, "auto_pad", "NOTSET", &autopad) || !attr_ints(im, "pads", &v, &n))
        return false;
    for (int i = 0; i < 2 * nsp; i++)
        w->pads[i] = dc(im, 0);
    if (!strcmp(autopad, "NOTSET")) {
        if (n >= 0 && n != 2 * nsp)
            return imp_err(im, "pads has %d entries, expected %d", n, 2 * nsp);
        for (int i = 0; i < n; i++)
            w->pads[i] = dc(im, v[i]);
    } else if (!strcmp(autopad, "SAME_UPPER") || !strcmp(autopad, "SAME_LOWER")) {
        bool upper = !strcmp(autopad, "SAME_UPPER");
        for (int i = 0; i < nsp; i++) {
            /* total = max(0, (ceil(H/s) - 1) * s + span - H)
             *       = max(0, span - s + mod(-H, s)), with mod(-H, s) in [0, s) */
            int64_t s = w->strides[i];
            Dim *span = dim_addc(CX, dim_mulc(CX, dim_addc(CX, k[i], -1), w->dil[i]), 1);
            Dim *t = dim_add(CX, dim_addc(CX, span, -s), dim_mod(CX, dim_neg(CX, in[i]), dc(im, s)));
            int64_t lo, hi;
            dim_bounds(dim_addc(CX, span, -s), &lo, &hi);
            if (s == 1)
                t = dim_addc(CX, span, -1);
            else if (lo < 0)
                t = dim_max(CX, t, dc(im, 0));
            Dim *half = dim_floordiv(CX, t, dc(im, 2));
            w->pads[i] = upper ? half : dim_sub(CX, t, half);
            w->pads[nsp + i] = upper ? dim_sub(CX, t, half) : half;
            if (!w->pads[i] || !w->pads[nsp + i])
                return imp_err(im, "padding overflows");
        }
    } else if (strcmp(autopad, "VALID")) {
        return imp_errk(im, DIAG_UNSUPPORTED, "auto_pad \"%s\" is not supported", autopad);
    }
    return true;
}

static void window_attrs(Imp *im, AttrList *l, const Window *w)
{
    attrs_add_ints(im->g, l, "strides", w->strides, w->nsp);
    attrs_add_dims(im->g, l, "pads", w->pads, 2 * w->nsp);
    attrs_add_ints(im->g, l, "dilations", w->dil, w->nsp);
}

/* y + bias[C] along axis 1. */
static Value *add_bias(Imp *im, Value *y, Value *bias)
{
    if (!bias || !y)
        return y;
    Dim *dims[MAX_RANK];
    int r = vrank(y);
    dims[0] = vdims(bias)[0];
    for (int i = 1; i < r - 1; i++)
        dims[i] = dc(im, 1);
    if (vrank(bias) != 1) {
        imp_err(im, "bias must be 1-D");
        return NULL;
    }
    return imp_bin(im, OP_ADD, y, imp_reshape(im, bias, dims, r - 1));
}

/* The convolution of the current node's attributes over x and w, without
 * a bias; NULL after a message. */
static Value *conv_build(Imp *im, Value *x, Value *w, bool transpose)
{
    int64_t group;
    if (!x || !w || !attr_int(im, "group", 1, &group))
        return NULL;
    int r = vrank(x), nsp = r - 2;
    if (nsp < 1 || vrank(w) != r)
        return imp_err(im, "needs data [N, C, spatial...] and weights of the same rank"), NULL;
    Window win;
    if (!window(im, &win, vdims(x) + 2, vdims(w) + 2, nsp))
        return NULL;
    AttrList l = {0};
    if (transpose) {
        int64_t *op, *os, opad[MAX_RANK] = {0};
        int nop, nos;
        if (!attr_ints(im, "output_padding", &op, &nop) || !attr_ints(im, "output_shape", &os, &nos))
            return NULL;
        if (nop >= 0 && nop != nsp)
            return imp_err(im, "output_padding has %d entries for %d spatial dims", nop, nsp), NULL;
        for (int i = 0; i < nop; i++)
            opad[i] = op[i];
        const char *autopad;
        if (!attr_str(im, "auto_pad", "NOTSET", &autopad))
            return NULL;
        bool same = !strncmp(autopad, "SAME", 4);
        if (nos >= 0 || same) {
            if (nos >= 0 && nos != nsp)
                return imp_err(im, "output_shape has %d entries for %d spatial dims", nos, nsp), NULL;
            for (int i = 0; i < nsp; i++) {
                Dim *in = vdims(x)[2 + i], *k = vdims(w)[2 + i];
                int64_t s = win.strides[i];
                Dim *target = nos >= 0 ? dc(im, os[i]) : dim_mulc(CX, in, s);
                /* total = s*(in-1) + output_padding + d*(k-1) + 1 - target */
                Dim *t = dim_mulc(CX, dim_addc(CX, in, -1), s);
                t = dim_add(CX, t, dim_mulc(CX, dim_addc(CX, k, -1), win.dil[i]));
                t = dim_sub(CX, dim_addc(CX, t, opad[i] + 1), target);
                Dim *half = dim_floordiv(CX, t, dc(im, 2));
                bool upper = !strcmp(autopad, "SAME_UPPER");
                win.pads[i] = upper ? half : dim_sub(CX, t, half);
                win.pads[nsp + i] = upper ? dim_sub(CX, t, half) : half;
                if (!win.pads[i] || !win.pads[nsp + i])
                    return imp_err(im, "padding overflows"), NULL;
            }
        }
        window_attrs(im, &l, &win);
        attrs_add_int(im->g, &l, "groups", group);
        attrs_add_ints(im->g, &l, "output_padding", opad, nsp);
    } else {
        window_attrs(im, &l, &win);
        attrs_add_int(im->g, &l, "groups", group);
    }
    Value *in[2] = {x, w};
    Op *op = build_op(im->g, transpose ? OP_CONV_TRANSPOSE : OP_CONV, in, 2, l.v, l.n);
    return op ? op->out[0] : NULL;
}

Value *imp_conv(Imp *im, Value *x, Value *w) { return conv_build(im, x, w, false); }

static bool conv_common(Imp *im, bool transpose)
{
    Value *x = imp_need(im, 0), *w = imp_need(im, 1);
    if (!x || !w)
        return false;
    Value *y = conv_build(im, x, w, transpose);
    return y ? imp_done(im, add_bias(im, y, IN(2))) : imp_fail(im); /* the first message stays */
}

bool onnx_lower_conv(Imp *im) { return conv_common(im, false); }
bool onnx_lower_conv_transpose(Imp *im) { return conv_common(im, true); }

/* MaxPool's Indices: for each window, the flat index into x (row-major,
 * or with column_major the spatial axes column-major: ONNX storage_order
 * 1) of its first tap, in scan order, inside x whose value equals the max
 * y. Taps are visited last to first, each overriding the index where it
 * matches: tap value x[flat] by a gather from x flattened (index clamped
 * where the tap is in the padding, which never matches). */
static Value *pool_indices(Imp *im, Value *x, Value *y, const int64_t *ks, const Window *w, bool column_major)
{
    int r = vrank(y), nsp = r - 2;
    Dim *none[1] = {NULL}, *tot = dc(im, 1);
    int64_t taps = 1;
    for (int i = 0; i < nsp; i++)
        taps *= ks[i] > 0 ? ks[i] : 1;
    if (taps > 1024) {
        imp_err(im, "the Indices output needs at most 1024 window taps (has %lld)", (long long)taps);
        return NULL;
    }
    for (int i = 0; i < r; i++)
        tot = dim_mul(CX, tot, vdims(x)[i]);
    Value *xf = imp_reshape(im, x, &tot, 1);
    Value *hs[MAX_RANK], *lo[MAX_RANK], *base[MAX_RANK];
    for (int i = 0; i < r; i++)
        hs[i] = build_dim(im->g, x, i);
    for (int i = 0; i < nsp; i++) {
        lo[i] = imp_reshape(im, imp_shape_value(im, (Dim *const *)&w->pads[i], 1), none, 0);
        /* o * stride - pad_begin */
        base[i] = imp_bin(im, OP_SUB, imp_binc(im, OP_MUL, build_iota(im->g, DT_I64, vdims(y), r, 2 + i),
                                                  (double)w->strides[i]), lo[i]);
    }
    /* (n * C + c), the outer part of the flat index */
    Value *nc = imp_bin(im, OP_ADD, imp_bin(im, OP_MUL, build_iota(im->g, DT_I64, vdims(y), r, 0), hs[1]),
                        build_iota(im->g, DT_I64, vdims(y), r, 1));
    Value *idx = imp_scalar(im, DT_I64, 0);
    for (int64_t t = taps - 1; t >= 0; t--) {
        int64_t rem = t, a[MAX_RANK];
        for (int i = nsp - 1; i >= 0; i--) {
            a[i] = rem % ks[i];
            rem /= ks[i];
        }
        Value *valid = NULL, *h[MAX_RANK];
        for (int i = 0; i < nsp; i++) {
            h[i] = imp_binc(im, OP_ADD, base[i], (double)(a[i] * w->dil[i]));
            Value *ok = imp_bin(im, OP_AND, imp_cmp(im, "ge", h[i], imp_scalar(im, DT_I64, 0)),
                                imp_cmp(im, "lt", h[i], hs[2 + i]));
            valid = valid ? imp_bin(im, OP_AND, valid, ok) : ok;
        }
        /* row-major (to read x) and the requested order (to report) */
        Value *flat = nc, *rep = NULL, *stride = NULL;
        for (int i = 0; i < nsp; i++)
            flat = imp_bin(im, OP_ADD, imp_bin(im, OP_MUL, flat, hs[2 + i]),
                           imp_sel(im, valid, h[i], imp_scalar(im, DT_I64, 0)));
        if (column_major) {
            rep = imp_scalar(im, DT_I64, 0);
            stride = imp_scalar(im, DT_I64, 1);
            for (int i = 0; i < nsp; i++) {
                rep = imp_bin(im, OP_ADD, rep, imp_bin(im, OP_MUL, h[i], stride));
                stride = imp_bin(im, OP_MUL, stride, hs[2 + i]);
            }
            rep = imp_bin(im, OP_ADD, rep, imp_bin(im, OP_MUL, nc, stride));
        }
        AttrList l = {0};
        attrs_add_int(im->g, &l, "axis", 0);
        Value *gin[2] = {xf, flat};
        Op *g = xf && flat ? build_op(im->g, OP_GATHER, gin, 2, l.v, l.n) : NULL;
        if (!g)
            return NULL;
        Value *hit = imp_bin(im, OP_AND, valid, imp_cmp(im, "eq", g->out[0], y));
        idx = imp_sel(im, hit, column_major ? rep : flat, idx);
    }
    return idx;
}

bool onnx_lower_pool(Imp *im)
{
    Value *x = imp_need(im, 0);
    int64_t *ks, ceil_mode, count_pad;
    int nk;
    if (!x || !attr_ints(im, "kernel_shape", &ks, &nk) || !attr_int(im, "ceil_mode", 0, &ceil_mode) ||
        !attr_int(im, "count_include_pad", 0, &count_pad))
        return false;
    int nsp = vrank(x) - 2;
    if (nsp < 1)
        return imp_err(im, "needs data [N, C, spatial...]");
    if (nk != nsp)
        return imp_err(im, "kernel_shape needs %d entries", nsp);
    bool want_idx = im->arg == 0 && im->nout > 1 && im->node->output[1] && *im->node->output[1];
    Dim *k[MAX_RANK];
    for (int i = 0; i < nsp; i++)
        k[i] = dc(im, ks[i]);
    Window win;
    if (!window(im, &win, vdims(x) + 2, k, nsp))
        return false;
    AttrList l = {0};
    attrs_add_str(im->g, &l, "kind", im->arg ? "avg" : "max");
    attrs_add_ints(im->g, &l, "window", ks, nsp);
    window_attrs(im, &l, &win);
    attrs_add_int(im->g, &l, "ceil", ceil_mode != 0);
    attrs_add_int(im->g, &l, "count_pad", count_pad != 0);
    Op *op = build_op(im->g, OP_POOL, &x, 1, l.v, l.n);
    if (op && want_idx) {
        int64_t order;
        if (!attr_int(im, "storage_order", 0, &order))
            return false;
        im->out[1] = pool_indices(im, x, op->out[0], ks, &win, order != 0);
        if (!im->out[1])
            return imp_fail(im);
    }
    return imp_done(im, op ? op->out[0] : NULL);
}

/* |x|^p, and s^(1/p), for the Lp pools */
static Value *lp_pow(Imp *im, Value *x, int64_t p)
{
    x = imp_un(im, OP_ABS, x);
    return p == 1 ? x : p == 2 ? imp_bin(im, OP_MUL, x, x) : imp_binc(im, OP_POW, x, (double)p);
}

static Value *lp_root(Imp *im, Value *s, int64_t p)
{
    return p == 1 ? s : p == 2 ? imp_un(im, OP_SQRT, s) : imp_binc(im, OP_POW, s, 1.0 / (double)p);
}

static bool lp_p(Imp *im, int64_t *p)
{
    if (!attr_int(im, "p", 2, p))
        return false;
    if (*p < 1)
        return imp_err(im, "p must be 1 or more, not %lld", (long long)*p);
    if (!dtype_is_float(vdt(im->in[0])))
        return imp_err(im, "needs a floating-point input, not %s", dtype_name(vdt(im->in[0])));
    return true;
}

/* LpPool: (sum over the window of |x|^p)^(1/p). The sum is an average
 * pool that counts every tap (padding contributes zeros) times the
 * window's size. */
bool onnx_lower_lp_pool(Imp *im)
{
    Value *x = imp_need(im, 0);
    int64_t p, *ks, ceil_mode;
    int nk;
    if (!x || !lp_p(im, &p) || !attr_ints(im, "kernel_shape", &ks, &nk) ||
        !attr_int(im, "ceil_mode", 0, &ceil_mode))
        return false;
    int nsp = vrank(x) - 2;
    if (nsp < 1)
        return imp_err(im, "needs data [N, C, spatial...]");
    if (nk != nsp)
        return imp_err(im, "kernel_shape needs %d entries", nsp);
    Dim *k[MAX_RANK];
    double taps = 1;
    for (int i = 0; i < nsp; i++) {
        k[i] = dc(im, ks[i]);
        taps *= (double)ks[i];
    }
    Window win;
    if (!window(im, &win, vdims(x) + 2, k, nsp))
        return false;
    AttrList l = {0};
    attrs_add_str(im->g, &l, "kind", "avg");
    attrs_add_ints(im->g, &l, "window", ks, nsp);
    window_attrs(im, &l, &win);
    attrs_add_int(im->g, &l, "ceil", ceil_mode != 0);
    attrs_add_int(im->g, &l, "count_pad", 1);
    Value *xp = lp_pow(im, x, p);
    Op *op = xp ? build_op(im->g, OP_POOL, &xp, 1, l.v, l.n) : NULL;
    if (!op)
        return imp_fail(im);
    return imp_done(im, lp_root(im, imp_binc(im, OP_MUL, op->out[0], taps), p));
}

bool onnx_lower_global_pool(Imp *im)
{
    Value *x = imp_need(im, 0);
    int64_t p = 0;
    if (!x || (im->arg == 2 && !lp_p(im, &p)))
        return false;
    int64_t axes[MAX_RANK];
    int n = 0;
    for (int i = 2; i < vrank(x); i++)
        axes[n++] = i;
    if (!n)
        return imp_err(im, "needs data [N, C, spatial...]");
    if (im->arg == 2) /* GlobalLpPool */
        return imp_done(im, lp_root(im, imp_reduce(im, lp_pow(im, x, p), "sum", axes, n, true), p));
    return imp_done(im, imp_reduce(im, x, im->arg ? "mean" : "max", axes, n, true));
}

/* LRN: y = x / (bias + alpha / size * s)^beta, s the sum of x^2 over the
 * channels [c - floor((size-1)/2), c + ceil((size-1)/2)] inside [0, C).
 * The sum is an average pool counting every tap, times size, over x^2
 * seen as [N, 1, C, prod(spatial)]. */
bool onnx_lower_lrn(Imp *im)
{
    Value *x = imp_need(im, 0);
    double alpha, beta, bias;
    int64_t size;
    if (!x || !attr_float(im, "alpha", 1e-4, &alpha) || !attr_float(im, "beta", 0.75, &beta) ||
        !attr_float(im, "bias", 1, &bias) || !attr_int(im, "size", 0, &size))
        return false;
    int r = vrank(x);
    if (r < 3)
        return imp_err(im, "needs data [N, C, spatial...]");
    if (size < 1)
        return imp_err(im, "size must be 1 or more");
    if (!dtype_is_float(vdt(x)))
        return imp_err(im, "needs a floating-point input, not %s", dtype_name(vdt(x)));
    Dim *s = dc(im, 1);
    for (int i = 2; i < r; i++)
        s = dim_mul(CX, s, vdims(x)[i]);
    Dim *d4[4] = {vdims(x)[0], dc(im, 1), vdims(x)[1], s};
    Value *sq = imp_reshape(im, imp_bin(im, OP_MUL, x, x), d4, 4);
    int64_t win[2] = {size, 1}, one[2] = {1, 1};
    Dim *pads[4] = {dc(im, (size - 1) / 2), dc(im, 0), dc(im, size / 2), dc(im, 0)};
    AttrList l = {0};
    attrs_add_str(im->g, &l, "kind", "avg");
    attrs_add_ints(im->g, &l, "window", win, 2);
    attrs_add_ints(im->g, &l, "strides", one, 2);
    attrs_add_dims(im->g, &l, "pads", pads, 4);
    attrs_add_ints(im->g, &l, "dilations", one, 2);
    attrs_add_int(im->g, &l, "ceil", 0);
    attrs_add_int(im->g, &l, "count_pad", 1);
    Op *op = sq ? build_op(im->g, OP_POOL, &sq, 1, l.v, l.n) : NULL;
    if (!op)
        return imp_fail(im);
    Value *sum = imp_reshape(im, op->out[0], vdims(x), r);
    Value *den = imp_binc(im, OP_ADD, imp_binc(im, OP_MUL, sum, alpha), bias);
    return imp_done(im, imp_bin(im, OP_DIV, x, imp_binc(im, OP_POW, den, beta)));
}

/* MaxUnpool: X [N, C, S...] scattered at the flat positions `indices`
 * (MaxPool's second output) into zeros of [N, C, O...], O = (S - 1) *
 * stride - begin - end + kernel; with output_shape, that result is then
 * padded with zeros at the end of each axis to it, as ONNX's reference
 * does (the indices address the inferred shape). */
bool onnx_lower_max_unpool(Imp *im)
{
    Value *x = imp_need(im, 0), *ix = imp_need(im, 1), *os = IN(2);
    int64_t *ks, *st, *pd;
    int nk, ns, np;
    if (!x || !ix || !attr_ints(im, "kernel_shape", &ks, &nk) || !attr_ints(im, "strides", &st, &ns) ||
        !attr_ints(im, "pads", &pd, &np))
        return false;
    int r = vrank(x), nsp = r - 2;
    if (nsp < 1 || nk != nsp || (ns >= 0 && ns != nsp) || (np >= 0 && np != 2 * nsp))
        return imp_err(im, "needs X [N, C, spatial...] and kernel_shape, strides, pads for %d spatial dims", nsp);
    if (!dtype_is_int(vdt(ix)) || vrank(ix) != r)
        return imp_err(im, "indices must be an integer tensor shaped as X");
    Dim *od[MAX_RANK], *total = dc(im, 1), *m = dc(im, 1);
    for (int i = 0; i < r; i++) {
        od[i] = vdims(x)[i];
        if (i >= 2) {
            int k = i - 2;
            int64_t s = ns >= 0 ? st[k] : 1, lo = np >= 0 ? pd[k] : 0, hi = np >= 0 ? pd[nsp + k] : 0;
            od[i] = dim_addc(CX, dim_mulc(CX, dim_addc(CX, od[i], -1), s), ks[k] - lo - hi);
        }
        total = dim_mul(CX, total, od[i]);
        m = dim_mul(CX, m, vdims(x)[i]);
    }
    Dim *m1[2] = {m, dc(im, 1)};
    Value *zeros = imp_broadcast_to(im, imp_scalar(im, vdt(x), 0), &total, 1);
    Value *in[3] = {zeros, imp_reshape(im, imp_cvt(im, ix, DT_I64), m1, 2), imp_reshape(im, x, &m, 1)};
    AttrList l = {0};
    attrs_add_str(im->g, &l, "reduction", "none");
    Op *op = in[0] && in[1] && in[2] ? build_op(im->g, OP_SCATTER_ND, in, 3, l.v, l.n) : NULL;
    Value *y = imp_reshape(im, op ? op->out[0] : NULL, od, r);
    if (!os || !y)
        return imp_done(im, y);
    if (vrank(os) != 1 || !dtype_is_int(vdt(os)) || !dim_is(vdims(os)[0], r))
        return imp_err(im, "output_shape must be an integer vector of %d entries", r);
    Value *high = imp_bin(im, OP_SUB, imp_cvt(im, os, DT_I64), imp_shape_value(im, od, r));
    Dim *rd = dc(im, r);
    Value *low = imp_broadcast_to(im, imp_scalar(im, DT_I64, 0), &rd, 1);
    Value *pads = high && low ? build_concat(im->g, (Value *[]){low, high}, 2, 0) : NULL;
    AttrList lp = {0};
    attrs_add_str(im->g, &lp, "mode", "constant");
    Op *pop = pads ? build_op(im->g, OP_DYN_PAD, (Value *[]){y, pads, imp_scalar(im, vdt(x), 0)}, 3, lp.v, lp.n)
                   : NULL;
    return imp_done(im, pop ? pop->out[0] : NULL);
}

/* Col2Im (torch.nn.Fold): the columns [N, C * prod(block), L] summed
 * into an image [N, C, image_shape...]: column entry (n, c k, l) goes to
 * spatial position l_i * stride_i - pad_begin_i + k_i * dilation_i on
 * each axis i (k and l split row-major over the block and the grid of L
 * blocks), where that is inside the image. image_shape and block_shape
 * may be run-time values (ONNX's node tests feed them as inputs), so the
 * whole index arithmetic is computed at run time: a scatter_elements with
 * add into zeros of the image's size (a tap outside adds 0 at position
 * 0), then a dyn_reshape. The result's dims are data-dependent. L other
 * than the number of blocks the shapes give is a run-time error. */
bool onnx_lower_col2im(Imp *im)
{
    Value *x = imp_need(im, 0), *vimg = imp_need(im, 1), *vblk = imp_need(im, 2);
    int64_t *dil, *pads, *str;
    int nd, np, ns;
    if (!x || !vimg || !vblk || !attr_ints(im, "dilations", &dil, &nd) || !attr_ints(im, "pads", &pads, &np) ||
        !attr_ints(im, "strides", &str, &ns))
        return false;
    int nsp = vrank(vimg) == 1 && dim_is_const(vdims(vimg)[0]) ? (int)vdims(vimg)[0]->c : -1;
    if (vrank(x) != 3 || nsp < 1 || nsp + 2 > MAX_RANK || !dtype_is_int(vdt(vimg)) || !dtype_is_int(vdt(vblk)) ||
        vrank(vblk) != 1 || !dim_is(vdims(vblk)[0], nsp))
        return imp_err(im, "needs input [N, C*prod(block), L] and image_shape, block_shape of one length");
    if ((nd >= 0 && nd != nsp) || (np >= 0 && np != 2 * nsp) || (ns >= 0 && ns != nsp))
        return imp_err(im, "dilations, strides (and pads, twice) need %d entries", nsp);
    Value *img = imp_cvt(im, vimg, DT_I64), *blk = imp_cvt(im, vblk, DT_I64);
    Value *is[MAX_RANK], *bs[MAX_RANK], *ls[MAX_RANK];
    Value *kk = imp_scalar(im, DT_I64, 1);
    for (int i = 0; i < nsp; i++) {
        Value *at = build_scalar_i64(im->g, i);
        AttrList l = {0};
        attrs_add_int(im->g, &l, "axis", 0);
        Op *a = build_op(im->g, OP_GATHER, (Value *[]){img, at}, 2, l.v, l.n);
        Op *b = build_op(im->g, OP_GATHER, (Value *[]){blk, at}, 2, l.v, l.n);
        if (!a || !b)
            return imp_fail(im);
        is[i] = a->out[0], bs[i] = b->out[0];
        int64_t d = nd >= 0 ? dil[i] : 1, s = ns >= 0 ? str[i] : 1;
        int64_t p = np >= 0 ? pads[i] + pads[nsp + i] : 0;
        if (d < 1 || s < 1)
            return imp_err(im, "dilations and strides must be positive");
        /* blocks along axis i: (size + pads - d (b - 1) - 1) / s + 1 */
        Value *span = imp_binc(im, OP_ADD, imp_binc(im, OP_MUL, imp_binc(im, OP_SUB, bs[i], 1), (double)d), 1);
        ls[i] = imp_binc(im, OP_ADD, imp_binc(im, OP_DIV, imp_bin(im, OP_SUB, imp_binc(im, OP_ADD, is[i], (double)p),
                                                                   span), (double)s), 1);
        kk = imp_bin(im, OP_MUL, kk, bs[i]);
    }
    Dim **xd = vdims(x);
    Value *n = build_iota(im->g, DT_I64, xd, 3, 0), *ck = build_iota(im->g, DT_I64, xd, 3, 1);
    Value *l = build_iota(im->g, DT_I64, xd, 3, 2);
    Value *cv = imp_bin(im, OP_DIV, build_dim(im->g, x, 1), kk); /* C */
    Value *k = imp_bin(im, OP_REM, ck, kk);
    Value *flat = imp_bin(im, OP_ADD, imp_bin(im, OP_MUL, n, cv), imp_bin(im, OP_DIV, ck, kk));
    Value *inside = imp_scalar(im, DT_BOOL, 1), *pos[MAX_RANK];
    for (int i = nsp - 1; i >= 0; i--) { /* the last axis fastest */
        Value *ki = imp_bin(im, OP_REM, k, bs[i]), *li = imp_bin(im, OP_REM, l, ls[i]);
        k = imp_bin(im, OP_DIV, k, bs[i]);
        l = imp_bin(im, OP_DIV, l, ls[i]);
        int64_t d = nd >= 0 ? dil[i] : 1, s = ns >= 0 ? str[i] : 1, pb = np >= 0 ? pads[i] : 0;
        pos[i] = imp_bin(im, OP_ADD, imp_binc(im, OP_SUB, imp_binc(im, OP_MUL, li, (double)s), (double)pb),
                         imp_binc(im, OP_MUL, ki, (double)d));
        Value *ok = imp_bin(im, OP_AND, imp_cmp(im, "ge", pos[i], imp_scalar(im, DT_I64, 0)),
                            imp_cmp(im, "lt", pos[i], is[i]));
        inside = imp_bin(im, OP_AND, inside, ok);
    }
    /* L must be the number of blocks: else a gather at 1 of a one-element
     * vector fails the run (and its 0 joins the result's size) */
    Value *nb = ls[0];
    for (int i = 1; i < nsp; i++)
        nb = imp_bin(im, OP_MUL, nb, ls[i]);
    Value *bad = imp_cvt(im, imp_cmp(im, "ne", nb, build_dim(im->g, x, 2)), DT_I64);
    AttrList lg = {0};
    attrs_add_int(im->g, &lg, "axis", 0);
    Op *chk = bad ? build_op(im->g, OP_GATHER, (Value *[]){imp_i64s(im, (int64_t[]){0}, 1), bad}, 2, lg.v, lg.n)
                  : NULL;
    if (!chk)
        return imp_fail(im);
    Value *total = imp_bin(im, OP_ADD, imp_bin(im, OP_MUL, build_dim(im->g, x, 0), cv), chk->out[0]);
    for (int i = 0; i < nsp; i++) {
        flat = imp_bin(im, OP_ADD, imp_bin(im, OP_MUL, flat, is[i]), pos[i]);
        total = imp_bin(im, OP_MUL, total, is[i]);
    }
    Dim *m = dim_mul(CX, dim_mul(CX, xd[0], xd[1]), xd[2]), *one = dc(im, 1);
    Value *idx = imp_reshape(im, imp_sel(im, inside, flat, imp_scalar(im, DT_I64, 0)), &m, 1);
    Value *upd = imp_reshape(im, imp_sel(im, inside, x, imp_scalar(im, vdt(x), 0)), &m, 1);
    AttrList lb = {0};
    int64_t noaxes[1] = {0};
    attrs_add_ints(im->g, &lb, "axes", noaxes, 0);
    Value *tv = imp_reshape(im, total, &one, 1);
    Op *z = tv ? build_op(im->g, OP_DYN_BROADCAST, (Value *[]){imp_scalar(im, vdt(x), 0), tv}, 2, lb.v, lb.n)
               : NULL;
    AttrList ls2 = {0};
    attrs_add_int(im->g, &ls2, "axis", 0);
    attrs_add_str(im->g, &ls2, "reduction", "add");
    Op *sc = z && idx && upd ? build_op(im->g, OP_SCATTER_ELEMENTS, (Value *[]){z->out[0], idx, upd}, 3, ls2.v, ls2.n)
                             : NULL;
    Value *shp = cv ? build_concat(im->g, (Value *[]){imp_reshape(im, build_dim(im->g, x, 0), &one, 1),
                                                      imp_reshape(im, cv, &one, 1), img}, 3, 0)
                    : NULL;
    Op *rs = sc && shp ? build_op(im->g, OP_DYN_RESHAPE, (Value *[]){sc->out[0], shp}, 2, NULL, 0) : NULL;
    return imp_done(im, rs ? rs->out[0] : NULL);
}

/* Det: the determinant of each [M, M] matrix of x [*, M, M] by Gaussian
 * elimination with partial pivoting, unrolled at import over a constant
 * M (at most 32; a symbolic M is refused as unsupported). Step k takes
 * the row of the largest |a[i, k]|, i >= k (argmax: the first on ties),
 * swaps it with row k (a gather_elements of the rows), multiplies the
 * pivot into the product (negated for a swap) and eliminates the column
 * below it. In f64; a zero pivot makes the determinant 0. */
bool onnx_lower_det(Imp *im)
{
    Value *x = imp_need(im, 0);
    if (!x)
        return false;
    int r = vrank(x);
    if (r < 2 || !dtype_is_float(vdt(x)))
        return imp_err(im, "needs a floating-point input [*, M, M]");
    Dim **xd = vdims(x), *md = xd[r - 1];
    if (!dim_is_const(md) || xd[r - 2] != md || md->c > 32)
        return imp_errk(im, DIAG_UNSUPPORTED, "only square matrices of a constant size up to 32 are supported");
    int64_t m = md->c, ax = r - 2;
    Value *a = imp_cvt(im, x, DT_F64), *det = imp_scalar(im, DT_F64, 1), *zero = imp_scalar(im, DT_BOOL, 0);
    Value *row = build_iota(im->g, DT_I64, xd, r, r - 2), *f0 = imp_scalar(im, DT_F64, 0);
    for (int64_t k = 0; k < m && a; k++) {
        Value *col = imp_slice1(im, a, r - 1, dc(im, k), dc(im, k + 1), 1); /* [*, M, 1] */
        Value *below = imp_cmp(im, "ge", imp_slice1(im, row, r - 1, dc(im, 0), dc(im, 1), 1),
                               imp_scalar(im, DT_I64, (double)k));
        Value *cand = imp_sel(im, below, imp_un(im, OP_ABS, col), imp_scalar(im, DT_F64, -1));
        AttrList l = {0};
        attrs_add_int(im->g, &l, "axis", ax);
        attrs_add_int(im->g, &l, "keepdims", 1);
        attrs_add_int(im->g, &l, "last", 0);
        Op *am = cand ? build_op(im->g, OP_ARGMAX, &cand, 1, l.v, l.n) : NULL;
        if (!am)
            return imp_fail(im);
        Value *p = am->out[0], *kv = imp_scalar(im, DT_I64, (double)k); /* [*, 1, 1] */
        Value *idx = imp_sel(im, imp_cmp(im, "eq", row, kv), imp_broadcast_to(im, p, xd, r),
                             imp_sel(im, imp_cmp(im, "eq", row, p), imp_broadcast_to(im, kv, xd, r), row));
        AttrList lg = {0};
        attrs_add_int(im->g, &lg, "axis", ax);
        Op *sw = idx ? build_op(im->g, OP_GATHER_ELEMENTS, (Value *[]){a, idx}, 2, lg.v, lg.n) : NULL;
        if (!sw)
            return imp_fail(im);
        a = sw->out[0];
        Value *piv = imp_slice1(im, imp_slice1(im, a, r - 2, dc(im, k), dc(im, k + 1), 1), r - 1, dc(im, k),
                                dc(im, k + 1), 1);
        Value *isz = imp_cmp(im, "eq", piv, f0);
        zero = imp_bin(im, OP_OR, zero, isz);
        det = imp_bin(im, OP_MUL, det, imp_sel(im, imp_cmp(im, "ne", p, kv), imp_un(im, OP_NEG, piv), piv));
        Value *colk = imp_slice1(im, a, r - 1, dc(im, k), dc(im, k + 1), 1);
        Value *fac = imp_bin(im, OP_DIV, colk, imp_sel(im, isz, imp_scalar(im, DT_F64, 1), piv));
        fac = imp_sel(im, imp_cmp(im, "gt", imp_slice1(im, row, r - 1, dc(im, 0), dc(im, 1), 1), kv), fac, f0);
        fac = imp_sel(im, isz, f0, fac);
        a = imp_bin(im, OP_SUB, a, imp_bin(im, OP_MUL, fac, imp_slice1(im, a, r - 2, dc(im, k), dc(im, k + 1), 1)));
    }
    det = imp_sel(im, zero, f0, det);
    return imp_done(im, imp_cvt(im, imp_reshape(im, det, xd, r - 2), vdt(x)));
}
