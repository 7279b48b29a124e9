/*
 * interp_lib.c — the compute-bound ops as plain loops: dot (XLA
 * dot_general), conv, conv_transpose and pool (ONNX Conv, ConvTranspose,
 * MaxPool/AveragePool, NCHW with any number of spatial dims).
 *
 * Operands are first widened to double (or int64 for integer dot and max
 * pool), every result element is accumulated in that type and rounded
 * once. Window sizes follow the shape rules in ir/infer.c exactly.
 */
#include "runtime/interp_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double *widen_f(const Tensor *t)
{
    size_t n = tensor_numel(t);
    double *p = malloc((n ? n : 1) * sizeof *p);
    for (size_t i = 0; p && i < n; i++)
        p[i] = interp_load_f(t, i);
    return p;
}

static int64_t *widen_i(const Tensor *t)
{
    size_t n = tensor_numel(t);
    int64_t *p = malloc((n ? n : 1) * sizeof *p);
    for (size_t i = 0; p && i < n; i++)
        p[i] = interp_load_i(t, i);
    return p;
}

static int64_t floordiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
static int64_t ceildiv(int64_t a, int64_t b) { return -floordiv(-a, b); }

/* ---- dot -------------------------------------------------------------- */

bool interp_dot(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    const Tensor *a = in[0], *b = in[1];
    const int64_t *lb, *rb, *lc, *rc;
    int nlb, nrb, nlc, nrc;
    if (!interp_attr_ints(ip, "lhs_batch", &lb, &nlb) || !interp_attr_ints(ip, "rhs_batch", &rb, &nrb) ||
        !interp_attr_ints(ip, "lhs_contract", &lc, &nlc) || !interp_attr_ints(ip, "rhs_contract", &rc, &nrc))
        return false;
    if (a->dtype != b->dtype)
        return interp_fail(ip, "operand dtypes differ (%s, %s)", dtype_name(a->dtype), dtype_name(b->dtype));
    if (a->dtype == DT_BOOL)
        return interp_fail(ip, "not defined for bool");
    if (nlb != nrb || nlc != nrc)
        return interp_fail(ip, "batch and contracting dim lists must pair up");
    /* role of each axis: 0 free, 1 batch, 2 contract */
    int la[MAX_RANK] = {0}, ra[MAX_RANK] = {0};
    for (int s = 0; s < 2; s++) {
        const Tensor *t = s ? b : a;
        int *role = s ? ra : la;
        const int64_t *lists[2] = {s ? rb : lb, s ? rc : lc};
        for (int l = 0; l < 2; l++) {
            for (int i = 0; i < nlb * (1 - l) + nlc * l; i++) {
                int64_t x = lists[l][i];
                if (x < 0 || x >= t->rank || role[x])
                    return interp_fail(ip, "%s %s axis %lld is out of range or repeated", s ? "rhs" : "lhs",
                                       l ? "contracting" : "batch", (long long)x);
                role[x] = 1 + l;
            }
        }
    }
    int64_t ast[MAX_RANK], bst[MAX_RANK], shape[MAX_RANK], sa[MAX_RANK], sb[MAX_RANK];
    interp_strides(a->rank, a->shape, ast);
    interp_strides(b->rank, b->shape, bst);
    int rank = 0;
    for (int i = 0; i < nlb; i++) {
        if (a->shape[lb[i]] != b->shape[rb[i]])
            return interp_fail(ip, "batch dims differ: lhs dim %lld is %lld, rhs dim %lld is %lld",
                               (long long)lb[i], (long long)a->shape[lb[i]], (long long)rb[i],
                               (long long)b->shape[rb[i]]);
        sa[rank] = ast[lb[i]], sb[rank] = bst[rb[i]];
        shape[rank++] = a->shape[lb[i]];
    }
    for (int i = 0; i < nlc; i++)
        if (a->shape[lc[i]] != b->shape[rc[i]])
            return interp_fail(ip, "contracting dims differ: lhs dim %lld is %lld, rhs dim %lld is %lld",
                               (long long)lc[i], (long long)a->shape[lc[i]], (long long)rc[i],
                               (long long)b->shape[rc[i]]);
    for (int s = 0; s < 2; s++) {
        const Tensor *t = s ? b : a;
        for (int i = 0; i < t->rank; i++) {
            if ((s ? ra : la)[i])
                continue;
            if (rank == MAX_RANK)
                return interp_fail(ip, "result rank exceeds %d", MAX_RANK);
            sa[rank] = s ? 0 : ast[i];
            sb[rank] = s ? bst[i] : 0;
            shape[rank++] = t->shape[i];
        }
    }
    if (!interp_alloc(ip, out, a->dtype, rank, shape))
        return false;
    /* offsets of every contracting index into a and b */
    int64_t cshape[MAX_RANK];
    size_t K = 1;
    for (int i = 0; i < nlc; i++) {
        cshape[i] = a->shape[lc[i]];
        K *= (size_t)cshape[i];
    }
    size_t n = tensor_numel(out);
    bool fl = dtype_is_float(a->dtype);
    int64_t *koff = malloc((K ? K : 1) * 2 * sizeof *koff);
    double *af = fl ? widen_f(a) : NULL, *bf = fl ? widen_f(b) : NULL;
    int64_t *ai = fl ? NULL : widen_i(a), *bi = fl ? NULL : widen_i(b);
    bool ok = koff && (fl ? af && bf : ai && bi);
    if (ok) {
        int64_t ca[MAX_RANK], cb[MAX_RANK];
        for (int i = 0; i < nlc; i++)
            ca[i] = ast[lc[i]], cb[i] = bst[rc[i]];
        NdIter kt;
        nditer_init(&kt, nlc, cshape);
        nditer_add(&kt, ca);
        nditer_add(&kt, cb);
        for (size_t k = 0; k < K; k++, nditer_next(&kt))
            koff[2 * k] = kt.off[0], koff[2 * k + 1] = kt.off[1];
        NdIter it;
        nditer_init(&it, rank, shape);
        nditer_add(&it, sa);
        nditer_add(&it, sb);
        for (size_t i = 0; i < n; i++, nditer_next(&it)) {
            int64_t oa = it.off[0], ob = it.off[1];
            if (fl) {
                double acc = 0;
                for (size_t k = 0; k < K; k++)
                    acc += af[oa + koff[2 * k]] * bf[ob + koff[2 * k + 1]];
                interp_store_f(out, i, acc);
            } else {
                uint64_t acc = 0;
                for (size_t k = 0; k < K; k++)
                    acc += (uint64_t)ai[oa + koff[2 * k]] * (uint64_t)bi[ob + koff[2 * k + 1]];
                interp_store_i(out, i, (int64_t)acc);
            }
        }
    }
    free(koff);
    free(af);
    free(bf);
    free(ai);
    free(bi);
    if (!ok) {
        tensor_free(out);
        return interp_oom(ip);
    }
    return true;
}

/* ---- windows ------------------------------------------------------------- */

/* The common attributes of conv, conv_transpose and pool. */
typedef struct Window {
    int nsp;                      /* spatial dims */
    int64_t stride[MAX_RANK], dil[MAX_RANK];
    int64_t pb[MAX_RANK], pe[MAX_RANK];
    int64_t k[MAX_RANK];          /* window / kernel size */
} Window;

static bool window_attrs(Interp *ip, Window *w, int nsp)
{
    const int64_t *s, *dl;
    int ns, nd, np;
    int64_t pads[2 * MAX_RANK];
    if (!interp_attr_ints(ip, "strides", &s, &ns) || !interp_attr_ints(ip, "dilations", &dl, &nd) ||
        !interp_attr_dims(ip, "pads", pads, 2 * MAX_RANK, &np))
        return false;
    if (ns != nsp || nd != nsp || np != 2 * nsp)
        return interp_fail(ip, "strides, dilations and pads need %d, %d and %d entries (have %d, %d, %d)",
                           nsp, nsp, 2 * nsp, ns, nd, np);
    w->nsp = nsp;
    for (int i = 0; i < nsp; i++) {
        if (s[i] < 1 || dl[i] < 1)
            return interp_fail(ip, "strides and dilations must be positive");
        w->stride[i] = s[i];
        w->dil[i] = dl[i];
        w->pb[i] = pads[i];
        w->pe[i] = pads[nsp + i];
    }
    return true;
}

/* Result size of a window sliding over n (conv and pool). */
static int64_t window_out(const Window *w, int i, int64_t n, bool ceil_mode)
{
    int64_t num = n + w->pb[i] + w->pe[i] - (w->dil[i] * (w->k[i] - 1) + 1);
    if (!ceil_mode)
        return floordiv(num, w->stride[i]) + 1;
    int64_t r = ceildiv(num, w->stride[i]) + 1, lim = ceildiv(n + w->pb[i], w->stride[i]);
    return r < lim ? r : lim;
}

/* Multi-index of flat f in shape[0..n). */
static void unravel(size_t f, int n, const int64_t *shape, int64_t *idx)
{
    for (int i = n - 1; i >= 0; i--) {
        idx[i] = (int64_t)(f % (size_t)shape[i]);
        f /= (size_t)shape[i];
    }
}

/* ---- conv ----------------------------------------------------------------- */

static bool conv_common(Interp *ip, const Tensor *x, const Tensor *w, Window *win, int64_t *groups,
                        const char *what)
{
    int nsp = x->rank - 2;
    if (x->dtype != w->dtype)
        return interp_fail(ip, "operand dtypes differ (%s, %s)", dtype_name(x->dtype), dtype_name(w->dtype));
    if (!dtype_is_float(x->dtype))
        return interp_fail(ip, "not defined for %s", dtype_name(x->dtype));
    if (nsp < 1 || w->rank != x->rank)
        return interp_fail(ip, "%s needs data [N, C, spatial...] and weights of the same rank (have %d, %d)",
                           what, x->rank, w->rank);
    if (!window_attrs(ip, win, nsp) || !interp_attr_int(ip, "groups", groups))
        return false;
    if (*groups < 1)
        return interp_fail(ip, "groups must be positive");
    for (int i = 0; i < nsp; i++)
        win->k[i] = w->shape[2 + i];
    return true;
}

/* conv and pool with channels_last: the op on the data moved to
 * [N, C, spatial...] (channels_last 1), its result moved to [N,
 * spatial..., C] (1 and 2; doc/ops.md). With block = b the moves are to
 * and from [N, ceildiv(C, b), spatial..., b]: a conv reads the first C =
 * w.shape[1] * groups channels of its operand, a pool every lane, and
 * the result's lanes past its channels are zero. */
static bool on_channels_first(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out, InterpFn *fn)
{
    Tensor x = {0}, y = {0};
    int64_t m = op_attr_int(op, "channels_last", 0); /* 2: the operand is [N, C, spatial...] already */
    int64_t b = op_attr_int(op, "block", 0);
    const Tensor *args[2] = {m == 1 ? &x : in[0], op->nin > 1 ? in[1] : NULL};
    if (in[0]->rank < (b && m == 1 ? 4 : 3))
        return interp_fail(ip, "channels_last needs data [N, spatial..., C], has rank %d", in[0]->rank);
    bool ok;
    if (b) {
        int64_t c = in[0]->shape[1] * b;
        if (op->nin > 1 && in[1]->rank >= 2)
            c = in[1]->shape[1] * op_attr_int(op, "groups", 1);
        ok = (m != 1 || interp_block_channels(ip, in[0], b, false, c, &x)) && fn(ip, op, args, &y) &&
             interp_block_channels(ip, &y, b, true, 0, out);
    } else {
        ok = (m != 1 || interp_move_channels(ip, in[0], false, &x)) && fn(ip, op, args, &y) &&
             interp_move_channels(ip, &y, true, out);
    }
    tensor_free(&x);
    tensor_free(&y);
    return ok;
}

static bool conv_first(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out);

bool interp_conv(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    if (op_attr_int(op, "channels_last", 0))
        return on_channels_first(ip, op, in, out, conv_first);
    return conv_first(ip, op, in, out);
}

static bool conv_first(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    const Tensor *x = in[0], *w = in[1];
    Window win;
    int64_t g;
    if (!conv_common(ip, x, w, &win, &g, "conv"))
        return false;
    int nsp = win.nsp;
    int64_t N = x->shape[0], C = x->shape[1], O = w->shape[0], Cg = w->shape[1];
    if (C != Cg * g || O % g != 0)
        return interp_fail(ip, "channels do not match: data has %lld, weights %lld x %lld groups, %lld outputs",
                           (long long)C, (long long)Cg, (long long)g, (long long)O);
    int64_t shape[MAX_RANK] = {N, O};
    for (int i = 0; i < nsp; i++) {
        shape[2 + i] = window_out(&win, i, x->shape[2 + i], false);
        if (shape[2 + i] < 0)
            return interp_fail(ip, "spatial axis %d: the window (%lld, dilation %lld) exceeds the padded input %lld",
                               i, (long long)win.k[i], (long long)win.dil[i],
                               (long long)(x->shape[2 + i] + win.pb[i] + win.pe[i]));
    }
    if (!interp_alloc(ip, out, x->dtype, x->rank, shape))
        return false;
    size_t nout = 1, nk = 1, nin = 1;
    for (int i = 0; i < nsp; i++) {
        nout *= (size_t)shape[2 + i];
        nk *= (size_t)win.k[i];
        nin *= (size_t)x->shape[2 + i];
    }
    double *X = widen_f(x), *W = widen_f(w);
    if (!X || !W) {
        free(X);
        free(W);
        tensor_free(out);
        return interp_oom(ip);
    }
    int64_t Og = O / g;
    int64_t os[MAX_RANK], ks[MAX_RANK];
    for (int64_t n = 0; n < N; n++) {
        for (int64_t o = 0; o < O; o++) {
            int64_t grp = o / Og;
            for (size_t p = 0; p < nout; p++) {
                unravel(p, nsp, shape + 2, os);
                double acc = 0;
                for (size_t kf = 0; kf < nk; kf++) {
                    unravel(kf, nsp, win.k, ks);
                    size_t xoff = 0;
                    bool inside = true;
                    for (int i = 0; i < nsp && inside; i++) {
                        int64_t pos = os[i] * win.stride[i] - win.pb[i] + ks[i] * win.dil[i];
                        inside = pos >= 0 && pos < x->shape[2 + i];
                        xoff = xoff * (size_t)x->shape[2 + i] + (size_t)pos;
                    }
                    if (!inside)
                        continue;
                    for (int64_t c = 0; c < Cg; c++) {
                        size_t xi = ((size_t)n * (size_t)C + (size_t)(grp * Cg + c)) * nin + xoff;
                        size_t wi = ((size_t)o * (size_t)Cg + (size_t)c) * nk + kf;
                        acc += X[xi] * W[wi];
                    }
                }
                interp_store_f(out, ((size_t)n * (size_t)O + (size_t)o) * nout + p, acc);
            }
        }
    }
    free(X);
    free(W);
    return true;
}

bool interp_conv_transpose(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    const Tensor *x = in[0], *w = in[1];
    Window win;
    int64_t g;
    const int64_t *opad;
    int nop;
    if (!conv_common(ip, x, w, &win, &g, "conv_transpose") ||
        !interp_attr_ints(ip, "output_padding", &opad, &nop))
        return false;
    int nsp = win.nsp;
    if (nop != nsp)
        return interp_fail(ip, "output_padding has %d entries for %d spatial dims", nop, nsp);
    int64_t N = x->shape[0], C = x->shape[1], Og = w->shape[1];
    if (w->shape[0] != C || C % g != 0)
        return interp_fail(ip, "channels do not match: data has %lld, weights %lld, %lld groups",
                           (long long)C, (long long)w->shape[0], (long long)g);
    int64_t O = Og * g, Cg = C / g;
    int64_t shape[MAX_RANK] = {N, O};
    for (int i = 0; i < nsp; i++) {
        if (opad[i] < 0)
            return interp_fail(ip, "output_padding must not be negative");
        shape[2 + i] = win.stride[i] * (x->shape[2 + i] - 1) + opad[i] + win.dil[i] * (win.k[i] - 1) + 1 -
                       win.pb[i] - win.pe[i];
        if (shape[2 + i] < 0)
            return interp_fail(ip, "spatial axis %d: the result size %lld is negative", i, (long long)shape[2 + i]);
    }
    if (!interp_alloc(ip, out, x->dtype, x->rank, shape))
        return false;
    size_t nout = 1, nk = 1, nin = 1;
    for (int i = 0; i < nsp; i++) {
        nout *= (size_t)shape[2 + i];
        nk *= (size_t)win.k[i];
        nin *= (size_t)x->shape[2 + i];
    }
    size_t total = tensor_numel(out);
    double *X = widen_f(x), *W = widen_f(w), *acc = calloc(total ? total : 1, sizeof *acc);
    if (!X || !W || !acc) {
        free(X);
        free(W);
        free(acc);
        tensor_free(out);
        return interp_oom(ip);
    }
    int64_t is[MAX_RANK], ks[MAX_RANK];
    for (int64_t n = 0; n < N; n++) {
        for (int64_t c = 0; c < C; c++) {
            int64_t grp = c / Cg;
            for (size_t p = 0; p < nin; p++) {
                unravel(p, nsp, x->shape + 2, is);
                double xv = X[((size_t)n * (size_t)C + (size_t)c) * nin + p];
                for (size_t kf = 0; kf < nk; kf++) {
                    unravel(kf, nsp, win.k, ks);
                    size_t ooff = 0;
                    bool inside = true;
                    for (int i = 0; i < nsp && inside; i++) {
                        int64_t pos = is[i] * win.stride[i] - win.pb[i] + ks[i] * win.dil[i];
                        inside = pos >= 0 && pos < shape[2 + i];
                        ooff = ooff * (size_t)shape[2 + i] + (size_t)pos;
                    }
                    if (!inside)
                        continue;
                    for (int64_t ol = 0; ol < Og; ol++) {
                        size_t oi = ((size_t)n * (size_t)O + (size_t)(grp * Og + ol)) * nout + ooff;
                        size_t wi = ((size_t)c * (size_t)Og + (size_t)ol) * nk + kf;
                        acc[oi] += xv * W[wi];
                    }
                }
            }
        }
    }
    for (size_t i = 0; i < total; i++)
        interp_store_f(out, i, acc[i]);
    free(X);
    free(W);
    free(acc);
    return true;
}

/* ---- pool ------------------------------------------------------------------ */

static bool pool_first(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out);

bool interp_pool(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    if (op_attr_int(op, "channels_last", 0))
        return on_channels_first(ip, op, in, out, pool_first);
    return pool_first(ip, op, in, out);
}

static bool pool_first(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out)
{
    const Tensor *x = in[0];
    int nsp = x->rank - 2;
    const char *ks;
    const int64_t *wnd;
    int nw;
    int64_t ceil_mode, count_pad;
    if (nsp < 1)
        return interp_fail(ip, "pool needs data [N, C, spatial...], has rank %d", x->rank);
    Window win;
    if (!interp_attr_str(ip, "kind", &ks) || !interp_attr_ints(ip, "window", &wnd, &nw) ||
        !interp_attr_int(ip, "ceil", &ceil_mode) || !interp_attr_int(ip, "count_pad", &count_pad) ||
        !window_attrs(ip, &win, nsp))
        return false;
    bool is_max = strcmp(ks, "max") == 0;
    if (!is_max && strcmp(ks, "avg") != 0)
        return interp_fail(ip, "unknown kind \"%s\"", ks);
    bool fl = dtype_is_float(x->dtype);
    if (!is_max && !fl)
        return interp_fail(ip, "avg pool is not defined for %s", dtype_name(x->dtype));
    if (nw != nsp)
        return interp_fail(ip, "window has %d entries for %d spatial dims", nw, nsp);
    for (int i = 0; i < nsp; i++) {
        if (wnd[i] < 1)
            return interp_fail(ip, "window must be positive");
        win.k[i] = wnd[i];
    }
    int64_t shape[MAX_RANK] = {x->shape[0], x->shape[1]};
    for (int i = 0; i < nsp; i++) {
        shape[2 + i] = window_out(&win, i, x->shape[2 + i], ceil_mode != 0);
        if (shape[2 + i] < 0)
            return interp_fail(ip, "spatial axis %d: the window (%lld, dilation %lld) exceeds the padded input %lld",
                               i, (long long)win.k[i], (long long)win.dil[i],
                               (long long)(x->shape[2 + i] + win.pb[i] + win.pe[i]));
    }
    if (!interp_alloc(ip, out, x->dtype, x->rank, shape))
        return false;
    size_t nout = 1, nk = 1, nin = 1, planes = (size_t)x->shape[0] * (size_t)x->shape[1];
    for (int i = 0; i < nsp; i++) {
        nout *= (size_t)shape[2 + i];
        nk *= (size_t)win.k[i];
        nin *= (size_t)x->shape[2 + i];
    }
    int64_t os[MAX_RANK], kk[MAX_RANK];
    for (size_t pl = 0; pl < planes; pl++) {
        for (size_t p = 0; p < nout; p++) {
            unravel(p, nsp, shape + 2, os);
            double accf = is_max ? -INFINITY : 0;
            int64_t acci = INT64_MIN;
            bool anyi = false;
            size_t count = 0;
            for (size_t kf = 0; kf < nk; kf++) {
                unravel(kf, nsp, win.k, kk);
                size_t xoff = 0;
                bool inside = true, padded = true;
                for (int i = 0; i < nsp; i++) {
                    int64_t pos = os[i] * win.stride[i] - win.pb[i] + kk[i] * win.dil[i];
                    inside = inside && pos >= 0 && pos < x->shape[2 + i];
                    padded = padded && pos < x->shape[2 + i] + win.pe[i];
                    if (inside)
                        xoff = xoff * (size_t)x->shape[2 + i] + (size_t)pos;
                }
                /* count_pad: a tap on an explicit pad counts, one that a
                 * ceil-mode window puts past the end pad does not (ONNX
                 * Runtime and PyTorch; onnx 1.17's reference counts it) */
                if (inside || (count_pad && padded))
                    count++;
                if (!inside)
                    continue;
                size_t xi = pl * nin + xoff;
                if (!fl) {
                    int64_t v = interp_load_i(x, xi);
                    acci = !anyi || v > acci ? v : acci;
                    anyi = true;
                } else if (is_max) {
                    double v = interp_load_f(x, xi);
                    accf = isnan(accf) || isnan(v) ? NAN : v > accf ? v : accf;
                } else {
                    accf += interp_load_f(x, xi);
                }
            }
            size_t oi = pl * nout + p;
            if (!fl)
                interp_store_i(out, oi, anyi ? acci : x->dtype == DT_U8 || x->dtype == DT_BOOL ? 0
                                                    : x->dtype == DT_I8 ? INT8_MIN
                                                    : x->dtype == DT_I32 ? INT32_MIN : INT64_MIN);
            else
                interp_store_f(out, oi, is_max ? accf : accf / (double)count);
        }
    }
    return true;
}
