/*
 * rtcall.c — the library calls and output buffers as generated host flows
 * make them: int64 field arrays (rt.h, DISC_MM_* and friends) into the
 * descriptors of dnnl.c. JIT-compiled and AOT-compiled models both call
 * these, so they belong to the runtime archive. Under DISC_PROFILE (prof.c)
 * each call is timed under its kind, its shape and how it ran.
 */
#include "runtime/rt.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A library call begins: no way of running it known yet, launches inside
 * it are its own; the start time when profiling, else 0. */
static double call_begin(DiscRt *rt)
{
    disc_rt_set_call_how(rt, "");
    disc_rt_set_in_call(rt, 1);
    return disc_rt_profiling() ? disc_rt_now() : 0;
}

/* The call ends: its time goes to "desc [how]", with its flops. */
static int32_t call_end(DiscRt *rt, double t0, int32_t rc, const char *desc, double flops)
{
    disc_rt_set_in_call(rt, 0);
    if (!t0)
        return rc;
    double t = disc_rt_now() - t0;
    char what[256];
    const char *how = disc_rt_call_how(rt);
    snprintf(what, sizeof what, "%s%s%s%s", desc, *how ? " [" : "", how, *how ? "]" : "");
    const void *key = disc_rt_prof_key(what);
    disc_rt_prof_add_work(key, (const char *)key, t, flops);
    return rc;
}

/* "AxBxC" (at most 3 of n). */
static void dims_text(char *s, size_t size, const int64_t *d, int n)
{
    int k = 0;
    for (int i = 0; i < n && i < 3 && k >= 0 && (size_t)k < size; i++)
        k += snprintf(s + k, size - (size_t)k, "%s%lld", i ? "x" : "", (long long)d[i]);
}

static int bad_post(DiscRt *rt, int64_t post)
{
    if (post >= 0 && post < DISC_POST_COUNT)
        return 0;
    disc_rt_fail(rt, "library call: activation %lld is not one the runtime knows", (long long)post);
    return -1;
}

static int32_t call_matmul(DiscRt *rt, const int64_t *f, const void *a, const void *b, const void *bias,
                           const void *residual, void *c, DiscKernelFn *skinny)
{
    if (bad_post(rt, f[DISC_MM_POST]))
        return -1;
    DiscMatmul m = {
        .dtype = (int)f[DISC_MM_DTYPE],
        .batch = f[DISC_MM_BATCH],
        .m = f[DISC_MM_M],
        .n = f[DISC_MM_N],
        .k = f[DISC_MM_K],
        .bias = bias,
        .post = (DiscPost)f[DISC_MM_POST],
        .residual = residual,
        .weights_const = (int)f[DISC_MM_WEIGHTS_CONST],
    };
    memcpy(m.a_stride, f + DISC_MM_A_STRIDE, sizeof m.a_stride);
    memcpy(m.b_stride, f + DISC_MM_B_STRIDE, sizeof m.b_stride);
    memcpy(m.c_stride, f + DISC_MM_C_STRIDE, sizeof m.c_stride);
    double t0 = call_begin(rt);
    int rc = skinny ? disc_rt_matmul_skinny(rt, &m, a, b, c, skinny, (int)f[DISC_MM_PANEL])
                    : disc_rt_matmul(rt, &m, a, b, c);
    if (!t0)
        return call_end(rt, t0, rc == 0 ? 0 : -1, NULL, 0);
    char desc[128];
    snprintf(desc, sizeof desc, "matmul MxNxK %lldx%lldx%lld", (long long)m.m, (long long)m.n, (long long)m.k);
    if (m.batch > 1)
        snprintf(desc + strlen(desc), sizeof desc - strlen(desc), " (x%lld)", (long long)m.batch);
    return call_end(rt, t0, rc == 0 ? 0 : -1, desc, 2.0 * (double)m.batch * (double)m.m * (double)m.n * (double)m.k);
}

int32_t disc_rt_call_matmul(DiscRt *rt, const int64_t *f, const void *a, const void *b, const void *bias,
                            const void *residual, void *c)
{
    return call_matmul(rt, f, a, b, bias, residual, c, NULL);
}

int32_t disc_rt_call_skinny(DiscRt *rt, const int64_t *f, const void *a, const void *b, const void *bias,
                            const void *residual, void *c, DiscKernelFn *fn)
{
    return call_matmul(rt, f, a, b, bias, residual, c, fn);
}

int32_t disc_rt_call_conv(DiscRt *rt, const int64_t *f, const void *x, const void *w, const void *bias,
                          const void *residual, void *y)
{
    if (bad_post(rt, f[DISC_CV_POST]) || bad_post(rt, f[DISC_CV_POST_RES]))
        return -1;
    DiscConv c = {
        .dtype = (int)f[DISC_CV_DTYPE],
        .nsp = (int)f[DISC_CV_NSP],
        .n = f[DISC_CV_N],
        .c = f[DISC_CV_C],
        .o = f[DISC_CV_O],
        .groups = f[DISC_CV_GROUPS],
        .transpose = (int)f[DISC_CV_TRANSPOSE],
        .bias = bias,
        .post = (DiscPost)f[DISC_CV_POST],
        .residual = residual,
        .weights_const = (int)f[DISC_CV_WEIGHTS_CONST],
        .layout = (int)f[DISC_CV_LAYOUT],
        .post_res = (DiscPost)f[DISC_CV_POST_RES],
    };
    memcpy(c.in, f + DISC_CV_IN, sizeof c.in);
    memcpy(c.k, f + DISC_CV_K, sizeof c.k);
    memcpy(c.out, f + DISC_CV_OUT, sizeof c.out);
    memcpy(c.stride, f + DISC_CV_STRIDE, sizeof c.stride);
    memcpy(c.dilation, f + DISC_CV_DILATION, sizeof c.dilation);
    memcpy(c.pad_lo, f + DISC_CV_PAD_LO, sizeof c.pad_lo);
    memcpy(c.pad_hi, f + DISC_CV_PAD_HI, sizeof c.pad_hi);
    double t0 = call_begin(rt);
    int rc = disc_rt_conv(rt, &c, x, w, y);
    if (!t0)
        return call_end(rt, t0, rc == 0 ? 0 : -1, NULL, 0);
    /* "conv 3x3/2 NxCxO 1x32x96 out 56x56", depthwise "dw", groups "gG" */
    char win[40], out[40], st[24] = "", grp[24] = "", desc[192];
    dims_text(win, sizeof win, c.k, c.nsp);
    dims_text(out, sizeof out, c.out, c.nsp);
    if (c.stride[0] > 1 || (c.nsp > 1 && c.stride[1] > 1))
        snprintf(st, sizeof st, "/%lld", (long long)c.stride[0]);
    if (c.groups > 1)
        snprintf(grp, sizeof grp, c.groups == c.c ? " dw" : " g%lld", (long long)c.groups);
    snprintf(desc, sizeof desc, "conv%s %s%s%s NxCxO %lldx%lldx%lld out %s", c.transpose ? "_transpose" : "", win, st,
             grp, (long long)c.n, (long long)c.c, (long long)c.o, out);
    double flops = 2.0 * (double)c.n * (double)c.o * (double)(c.groups > 0 ? c.c / c.groups : c.c);
    for (int i = 0; i < c.nsp; i++)
        flops *= (double)c.k[i] * (double)(c.transpose ? c.in[i] : c.out[i]);
    return call_end(rt, t0, rc == 0 ? 0 : -1, desc, flops);
}

int32_t disc_rt_call_pool(DiscRt *rt, const int64_t *f, const void *x, void *y)
{
    DiscPool p = {
        .dtype = (int)f[DISC_PL_DTYPE],
        .nsp = (int)f[DISC_PL_NSP],
        .max = (int)f[DISC_PL_MAX],
        .n = f[DISC_PL_N],
        .c = f[DISC_PL_C],
        .count_pad = (int)f[DISC_PL_COUNT_PAD],
        .layout = (int)f[DISC_PL_LAYOUT],
    };
    memcpy(p.in, f + DISC_PL_IN, sizeof p.in);
    memcpy(p.window, f + DISC_PL_WINDOW, sizeof p.window);
    memcpy(p.out, f + DISC_PL_OUT, sizeof p.out);
    memcpy(p.stride, f + DISC_PL_STRIDE, sizeof p.stride);
    memcpy(p.dilation, f + DISC_PL_DILATION, sizeof p.dilation);
    memcpy(p.pad_lo, f + DISC_PL_PAD_LO, sizeof p.pad_lo);
    memcpy(p.pad_hi, f + DISC_PL_PAD_HI, sizeof p.pad_hi);
    double t0 = call_begin(rt);
    int rc = disc_rt_pool(rt, &p, x, y);
    if (!t0)
        return call_end(rt, t0, rc == 0 ? 0 : -1, NULL, 0);
    char win[40], in[40], desc[160];
    dims_text(win, sizeof win, p.window, p.nsp);
    dims_text(in, sizeof in, p.in, p.nsp);
    snprintf(desc, sizeof desc, "pool %s %s NxC %lldx%lld in %s", p.max ? "max" : "avg", win, (long long)p.n,
             (long long)p.c, in);
    return call_end(rt, t0, rc == 0 ? 0 : -1, desc, 0);
}

void *disc_rt_output(DiscRt *rt, void **slots, int64_t slot, int64_t bytes)
{
    void **s = slots + slot;
    if (s[0] && (int64_t)(uintptr_t)s[1] >= bytes)
        return s[0];
    void *p = disc_rt_alloc_big(bytes > 0 ? (size_t)bytes : 1);
    if (!p) {
        disc_rt_fail(rt, "out of memory for an output of %lld bytes", (long long)bytes);
        return NULL;
    }
    if (s[2]) /* an output computed twice: keep the last */
        free(s[0]);
    s[0] = p;
    s[2] = (void *)1;
    return p;
}
