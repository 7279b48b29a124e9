/*
 * test_cudnn.c — the cuda backend's convolutions and pooling through
 * cuDNN (runtime/cudnn.c, disc_rt_dev_conv, disc_rt_dev_pool).
 *
 *   test_cudnn --fake   against tests/unit/fake_cuda.c and fake_cudnn.c
 *                       (LD_LIBRARY_PATH): disc's calls (1, 2 and 3
 *                       spatial axes, groups, strides, dilations, pads,
 *                       every epilogue it hands over, f32 and f16;
 *                       transposed ones through the backward data)
 *                       against a reference computed here; the plan
 *                       cache (one heuristic call per distinct call); the
 *                       algorithm whose workspace is too large passed
 *                       over; FMA math for f32; the errors of failing
 *                       calls; pooling (max with a NaN, average with and
 *                       without the pads counted, 1 to 3 axes, f16)
 *   test_cudnn          with a real GPU (tests/gpu/run_on_device.sh): the
 *                       same calls on cuDNN itself; without one, or
 *                       without cuDNN, nothing to test (SKIP)
 */
#include "check.h"
#include "devlib.h"
#include "ir/ir.h"
#include "runtime/rt.h"

#include <dlfcn.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct Case {
    DType dt;
    int nsp;
    int64_t n, c, o, groups;
    int64_t in[3], k[3], stride[3], dil[3], pad[3];
    bool bias, res;
    int post, post_res; /* DISC_POST_NONE or _RELU */
    bool tr;            /* transposed: w [C][O/groups][k...] */
} Case;

static double get(const void *p, DType dt, int64_t i)
{
    if (dt == DT_F32)
        return ((const float *)p)[i];
    uint16_t h = ((const uint16_t *)p)[i];
    int e = h >> 10 & 31, m = h & 1023;
    double v = e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
    return h >> 15 ? -v : v;
}

/* Small multiples of 1/8 in [-2, 2], exact in f16 and f32. */
static void put(void *p, DType dt, int64_t i, double v)
{
    if (dt == DT_F32) {
        ((float *)p)[i] = (float)v;
        return;
    }
    ((uint16_t *)p)[i] = devlib_f16(v);
}

static double relu(double x)
{
    return x > 0 ? x : 0;
}

static void *upload(DiscRt *rt, DiscGpu *g, const void *hostp, size_t bytes, DiscDevPtr *base)
{
    *base = disc_gpu_alloc(rt, g, bytes + 64);
    if (!*base)
        return NULL;
    void *d = (void *)(uintptr_t)*base;
    if (hostp && disc_gpu_copy_in(rt, g, *base, hostp, bytes) != 0)
        return NULL;
    return d;
}

static int64_t out_size(const Case *c, int i)
{
    if (c->tr)
        return (c->in[i] - 1) * c->stride[i] - 2 * c->pad[i] + c->dil[i] * (c->k[i] - 1) + 1;
    return (c->in[i] + 2 * c->pad[i] - c->dil[i] * (c->k[i] - 1) - 1) / c->stride[i] + 1;
}

/* Runs one case on the device and checks it against the reference. */
static void run_case(DiscRt *rt, DiscGpu *g, const Case *c)
{
    size_t es = c->dt == DT_F32 ? 4 : 2;
    int64_t in[3] = {1, 1, 1}, k[3] = {1, 1, 1}, out[3] = {1, 1, 1}, cg = c->c / c->groups, og = c->o / c->groups;
    for (int i = 0; i < c->nsp; i++)
        in[i] = c->in[i], k[i] = c->k[i], out[i] = out_size(c, i);
    int64_t nx = c->n * c->c * in[0] * in[1] * in[2], nw = c->o * cg * k[0] * k[1] * k[2];
    if (c->tr)
        nw = c->c * og * k[0] * k[1] * k[2];
    int64_t ny = c->n * c->o * out[0] * out[1] * out[2];
    void *hx = calloc((size_t)nx, es), *hw = calloc((size_t)nw, es), *hb = calloc((size_t)c->o, es);
    void *hr = calloc((size_t)ny, es), *hy = calloc((size_t)ny, es);
    double *want = calloc((size_t)ny, sizeof *want);
    for (int64_t i = 0; i < nx; i++)
        put(hx, c->dt, i, (double)((i * 7 + 3) % 17 - 8) / 8);
    for (int64_t i = 0; i < nw; i++)
        put(hw, c->dt, i, (double)((i * 5 + 1) % 13 - 6) / 8);
    for (int64_t i = 0; i < c->o; i++)
        put(hb, c->dt, i, (double)(i % 9 - 4) / 4);
    for (int64_t i = 0; i < ny; i++)
        put(hr, c->dt, i, (double)(i % 11 - 5) / 8);
    int64_t f[DISC_CV_NFIELDS] = {0};
    f[DISC_CV_DTYPE] = c->dt;
    f[DISC_CV_NSP] = c->nsp;
    f[DISC_CV_N] = c->n, f[DISC_CV_C] = c->c, f[DISC_CV_O] = c->o, f[DISC_CV_GROUPS] = c->groups;
    for (int i = 0; i < 3; i++) {
        bool sp = i < c->nsp;
        f[DISC_CV_IN + i] = in[i], f[DISC_CV_K + i] = k[i], f[DISC_CV_OUT + i] = out[i];
        f[DISC_CV_STRIDE + i] = sp ? c->stride[i] : 1, f[DISC_CV_DILATION + i] = sp ? c->dil[i] : 1;
        f[DISC_CV_PAD_LO + i] = f[DISC_CV_PAD_HI + i] = sp ? c->pad[i] : 0;
    }
    f[DISC_CV_POST] = c->post, f[DISC_CV_POST_RES] = c->post_res;
    f[DISC_CV_TRANSPOSE] = c->tr;
    if (c->tr) /* each x[b][ch][i] adds x w[ch][o'][k] to y[b][g O/g + o'][i stride - pad + k dil] */
        for (int64_t b = 0; b < c->n; b++)
            for (int64_t ch = 0; ch < c->c; ch++)
                for (int64_t i0 = 0; i0 < in[0]; i0++)
                    for (int64_t i1 = 0; i1 < in[1]; i1++)
                        for (int64_t i2 = 0; i2 < in[2]; i2++)
                            for (int64_t o = 0; o < og; o++)
                                for (int64_t k0 = 0; k0 < k[0]; k0++)
                                    for (int64_t k1 = 0; k1 < k[1]; k1++)
                                        for (int64_t k2 = 0; k2 < k[2]; k2++) {
                                            int64_t ii[3] = {i0, i1, i2}, ki[3] = {k0, k1, k2}, yi[3];
                                            bool inside = true;
                                            for (int a = 0; a < 3; a++) {
                                                yi[a] = ii[a] * f[DISC_CV_STRIDE + a] - f[DISC_CV_PAD_LO + a] +
                                                        ki[a] * f[DISC_CV_DILATION + a];
                                                inside &= yi[a] >= 0 && yi[a] < out[a];
                                            }
                                            if (!inside)
                                                continue;
                                            int64_t oc = ch / cg * og + o;
                                            want[(((b * c->o + oc) * out[0] + yi[0]) * out[1] + yi[1]) * out[2] + yi[2]] +=
                                                get(hx, c->dt, (((b * c->c + ch) * in[0] + i0) * in[1] + i1) * in[2] + i2) *
                                                get(hw, c->dt, (((ch * og + o) * k[0] + k0) * k[1] + k1) * k[2] + k2);
                                        }
    for (int64_t b = 0; b < c->n; b++)
        for (int64_t o = 0; o < c->o; o++)
            for (int64_t y0 = 0; y0 < out[0]; y0++)
                for (int64_t y1 = 0; y1 < out[1]; y1++)
                    for (int64_t y2 = 0; y2 < out[2]; y2++) {
                        double acc = 0;
                        int64_t grp = o / og, yi[3] = {y0, y1, y2};
                        for (int64_t ci = 0; ci < cg && !c->tr; ci++)
                            for (int64_t k0 = 0; k0 < k[0]; k0++)
                                for (int64_t k1 = 0; k1 < k[1]; k1++)
                                    for (int64_t k2 = 0; k2 < k[2]; k2++) {
                                        int64_t ki[3] = {k0, k1, k2}, xi[3];
                                        bool inside = true;
                                        for (int a = 0; a < 3; a++) {
                                            xi[a] = yi[a] * f[DISC_CV_STRIDE + a] - f[DISC_CV_PAD_LO + a] +
                                                    ki[a] * f[DISC_CV_DILATION + a];
                                            inside &= xi[a] >= 0 && xi[a] < in[a];
                                        }
                                        if (!inside)
                                            continue;
                                        int64_t ch = grp * cg + ci;
                                        acc += get(hx, c->dt, (((b * c->c + ch) * in[0] + xi[0]) * in[1] + xi[1]) * in[2] + xi[2]) *
                                               get(hw, c->dt, (((o * cg + ci) * k[0] + k0) * k[1] + k1) * k[2] + k2);
                                    }
                        int64_t at = (((b * c->o + o) * out[0] + y0) * out[1] + y1) * out[2] + y2;
                        if (c->tr)
                            acc = want[at];
                        if (c->bias)
                            acc += get(hb, c->dt, o);
                        if (c->post == DISC_POST_RELU)
                            acc = relu(acc);
                        if (c->res)
                            acc += get(hr, c->dt, at);
                        if (c->post_res == DISC_POST_RELU)
                            acc = relu(acc);
                        want[at] = acc;
                    }
    DiscDevPtr bx, bw, bb, br, by;
    void *dx = upload(rt, g, hx, (size_t)nx * es, &bx), *dw = upload(rt, g, hw, (size_t)nw * es, &bw);
    void *db = upload(rt, g, hb, (size_t)c->o * es, &bb), *dr = upload(rt, g, hr, (size_t)ny * es, &br);
    void *dy = upload(rt, g, NULL, (size_t)ny * es, &by);
    int rc = dx && dw && db && dr && dy ? disc_rt_dev_conv(rt, f, dx, dw, c->bias ? db : NULL, c->res ? dr : NULL, dy)
                                        : -1;
    if (rc == 0)
        rc = disc_gpu_copy_out(rt, g, hy, by, (size_t)ny * es) == 0 && disc_gpu_sync(rt, g) == 0 ? 0 : -1;
    CHECK_MSG(rc == 0, "%s conv %dd %lld->%lld: %s", c->dt == DT_F32 ? "f32" : "f16", c->nsp, (long long)c->c,
              (long long)c->o, disc_rt_error(rt) ? disc_rt_error(rt) : "");
    double tol = c->dt == DT_F16 ? 4e-3 : 1e-5;
    int bad = 0;
    for (int64_t i = 0; rc == 0 && i < ny; i++) {
        double got = get(hy, c->dt, i);
        if (fabs(got - want[i]) > tol * (1 + fabs(want[i])) && bad++ < 3)
            fprintf(stderr, "  conv %dd %lld->%lld at %lld: %g, want %g\n", c->nsp, (long long)c->c, (long long)c->o,
                    (long long)i, got, want[i]);
    }
    CHECK(bad == 0);
    disc_gpu_release(g, bx);
    disc_gpu_release(g, bw);
    disc_gpu_release(g, bb);
    disc_gpu_release(g, br);
    disc_gpu_release(g, by);
    disc_rt_reset(rt);
    free(hx), free(hw), free(hb), free(hr), free(hy), free(want);
}

enum { NONE = DISC_POST_NONE, RELU = DISC_POST_RELU };

static const Case cases[] = {
    /* dt, nsp, n, c, o, groups, in, k, stride, dil, pad, bias, res, post, post_res */
    {DT_F32, 2, 1, 3, 4, 1, {5, 6}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, false, false, NONE, NONE, false},
    {DT_F32, 2, 2, 4, 6, 2, {7, 5}, {3, 2}, {2, 1}, {1, 2}, {1, 0}, true, false, RELU, NONE, false},  /* fused */
    {DT_F32, 2, 2, 4, 4, 1, {6, 6}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, true, true, NONE, RELU, false},   /* fused, z */
    {DT_F32, 2, 1, 4, 4, 4, {5, 5}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, true, false, NONE, NONE, false},  /* depthwise */
    {DT_F32, 2, 1, 2, 3, 1, {4, 4}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, false, true, NONE, NONE, false},  /* residual alone */
    {DT_F32, 2, 1, 2, 3, 1, {4, 4}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, false, false, RELU, NONE, false}, /* relu, no bias */
    {DT_F32, 2, 1, 2, 3, 1, {4, 4}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, false, true, NONE, RELU, false},  /* res, relu, no bias */
    {DT_F32, 1, 2, 3, 5, 1, {11}, {5}, {2}, {1}, {2}, true, false, NONE, NONE, false},                /* 1-D */
    {DT_F32, 3, 1, 2, 2, 1, {4, 3, 5}, {2, 2, 3}, {1, 1, 2}, {1, 1, 1}, {0, 1, 1}, true, false, RELU, NONE, false},
    {DT_F16, 2, 2, 4, 8, 2, {6, 5}, {3, 3}, {1, 2}, {1, 1}, {1, 1}, true, true, NONE, RELU, false},
    {DT_F16, 2, 1, 3, 4, 1, {5, 5}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, false, false, NONE, NONE, false},
    /* transposed: cudnnConvolutionBackwardData, its epilogue apart */
    {DT_F32, 2, 2, 4, 6, 2, {4, 5}, {3, 2}, {2, 1}, {1, 2}, {1, 0}, true, false, RELU, NONE, true},
    {DT_F32, 1, 1, 3, 2, 1, {7}, {4}, {2}, {1}, {1}, false, true, NONE, NONE, true},
    {DT_F16, 2, 1, 4, 4, 1, {3, 3}, {2, 2}, {2, 2}, {1, 1}, {0, 0}, true, false, NONE, NONE, true},
};
enum { NTRANSPOSED = 3 };

static void fake_pool(DiscRt *rt, DiscGpu *g, long (*calls)(const char *));

/* The cases, twice (the second time from the plans), and the plan cache,
 * the math type and errors through the stand-in's counts. */
static void fake(DiscRt *rt, DiscGpu *g)
{
    int nc = (int)(sizeof cases / sizeof *cases);
    run_case(rt, g, &cases[0]); /* loads the library */
    void *lib = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_NOLOAD);
    long (*calls)(const char *) = lib ? (long (*)(const char *))dlsym(lib, "fake_cudnn_calls") : NULL;
    int (*math)(void) = lib ? (int (*)(void))dlsym(lib, "fake_cudnn_last_math") : NULL;
    CHECK_MSG(calls && math, "the stand-in cuDNN (fake_cudnn_calls) is not the one loaded");
    if (!calls || !math)
        return;
    CHECK_MSG(math() == 3, "f32 in math type %d, want FMA (3: no TF32)", math());
    long h0 = calls("cudnnGetConvolutionForwardAlgorithm_v7"), b0 = calls("cudnnConvolutionBiasActivationForward");
    long f0 = calls("cudnnConvolutionForward");
    for (int i = 1; i < nc; i++)
        run_case(rt, g, &cases[i]);
    long h1 = calls("cudnnGetConvolutionForwardAlgorithm_v7");
    CHECK(h1 - h0 == nc - 1 - NTRANSPOSED); /* a plan per case */
    CHECK(calls("cudnnGetConvolutionBackwardDataAlgorithm_v7") == NTRANSPOSED);
    CHECK(calls("cudnnConvolutionBackwardData") == NTRANSPOSED);
    CHECK_MSG(calls("cudnnConvolutionBiasActivationForward") - b0 == 4, "%ld fused calls",
              calls("cudnnConvolutionBiasActivationForward") - b0);
    CHECK(calls("cudnnConvolutionForward") - f0 == nc - 1 - 4 - NTRANSPOSED);
    CHECK_MSG(math() == 1, "f16 in math type %d, want tensor ops (1)", math());
    for (int i = 0; i < nc; i++)
        run_case(rt, g, &cases[i]);
    CHECK(calls("cudnnGetConvolutionForwardAlgorithm_v7") == h1); /* every one from its plan */

    /* a failing call: named, with cuDNN's text */
    int64_t f[DISC_CV_NFIELDS] = {0};
    f[DISC_CV_DTYPE] = DT_F32, f[DISC_CV_NSP] = 2, f[DISC_CV_N] = 1, f[DISC_CV_C] = 1, f[DISC_CV_O] = 1;
    f[DISC_CV_GROUPS] = 1;
    for (int i = 0; i < 3; i++)
        f[DISC_CV_IN + i] = f[DISC_CV_K + i] = f[DISC_CV_OUT + i] = f[DISC_CV_STRIDE + i] = f[DISC_CV_DILATION + i] = 1;
    DiscDevPtr buf = disc_gpu_alloc(rt, g, 64);
    void *p = (void *)(uintptr_t)buf;
    setenv("FAKE_CUDNN_FAIL", "cudnnConvolutionForward", 1);
    CHECK(disc_rt_dev_conv(rt, f, p, p, NULL, NULL, p) == -1);
    const char *e = disc_rt_error(rt);
    printf("  error: %s\n", e ? e : "(none)");
    CHECK(e && strstr(e, "cudnnConvolutionForward (cudnn conv 1x1 1->1 f32)"));
    disc_rt_reset(rt);
    unsetenv("FAKE_CUDNN_FAIL");
    /* what disc never hands it: refused, named, not run */
    f[DISC_CV_PAD_LO] = 1;
    CHECK(disc_rt_dev_conv(rt, f, p, p, NULL, NULL, p) == -1);
    e = disc_rt_error(rt);
    printf("  error: %s\n", e ? e : "(none)");
    CHECK(e && strstr(e, "a convolution it is not handed"));
    disc_rt_reset(rt);
    f[DISC_CV_PAD_LO] = 0, f[DISC_CV_POST] = DISC_POST_SIGMOID;
    CHECK(disc_rt_dev_conv(rt, f, p, p, NULL, NULL, p) == -1);
    disc_rt_reset(rt);
    f[DISC_CV_POST] = DISC_POST_NONE;
    /* an empty result: nothing to do; an empty input channel: an error */
    f[DISC_CV_N] = 0;
    CHECK(disc_rt_dev_conv(rt, f, p, p, NULL, NULL, p) == 0);
    f[DISC_CV_N] = 1, f[DISC_CV_C] = 0;
    CHECK(disc_rt_dev_conv(rt, f, p, p, NULL, NULL, p) == -1);
    disc_rt_reset(rt);
    CHECK(disc_gpu_sync(rt, g) == 0);
    disc_gpu_release(g, buf);
    fake_pool(rt, g, calls);
}

/* ---- pooling ---- */

typedef struct PoolCase {
    DType dt;
    int nsp, max, count_pad;
    int64_t n, c;
    int64_t in[3], win[3], stride[3], pad[3];
    bool nan; /* a NaN at element 5 of x */
} PoolCase;

static const PoolCase pools[] = {
    /* dt, nsp, max, count_pad, n, c, in, window, stride, pad, nan */
    {DT_F32, 2, 1, 0, 2, 3, {7, 6}, {3, 3}, {2, 2}, {1, 1}, false},
    {DT_F32, 2, 1, 0, 1, 2, {4, 4}, {2, 2}, {2, 2}, {0, 0}, true},
    {DT_F32, 2, 0, 0, 2, 2, {5, 7}, {3, 2}, {2, 1}, {1, 0}, false},
    {DT_F32, 2, 0, 1, 2, 2, {5, 7}, {3, 2}, {2, 1}, {1, 0}, false},
    {DT_F32, 1, 0, 0, 2, 3, {9}, {3}, {2}, {1}, false},
    {DT_F32, 3, 1, 0, 1, 2, {3, 4, 5}, {2, 2, 3}, {1, 2, 2}, {0, 1, 1}, false},
    {DT_F16, 2, 0, 1, 1, 4, {6, 6}, {3, 3}, {1, 1}, {1, 1}, false},
};

static void run_pool(DiscRt *rt, DiscGpu *g, const PoolCase *c)
{
    size_t es = c->dt == DT_F32 ? 4 : 2;
    int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, win[3] = {1, 1, 1};
    for (int i = 0; i < c->nsp; i++) {
        in[i] = c->in[i], win[i] = c->win[i];
        out[i] = (c->in[i] + 2 * c->pad[i] - c->win[i]) / c->stride[i] + 1;
    }
    int64_t nx = c->n * c->c * in[0] * in[1] * in[2], ny = c->n * c->c * out[0] * out[1] * out[2];
    void *hx = calloc((size_t)nx, es), *hy = calloc((size_t)ny, es);
    double *want = calloc((size_t)ny, sizeof *want);
    for (int64_t i = 0; i < nx; i++)
        put(hx, c->dt, i, (double)((i * 7 + 3) % 17 - 8) / 8);
    if (c->nan)
        ((float *)hx)[5] = NAN;
    int64_t f[DISC_PL_NFIELDS] = {0};
    f[DISC_PL_DTYPE] = c->dt, f[DISC_PL_NSP] = c->nsp, f[DISC_PL_MAX] = c->max, f[DISC_PL_N] = c->n;
    f[DISC_PL_C] = c->c, f[DISC_PL_COUNT_PAD] = c->count_pad;
    for (int i = 0; i < 3; i++) {
        bool sp = i < c->nsp;
        f[DISC_PL_IN + i] = in[i], f[DISC_PL_WINDOW + i] = win[i], f[DISC_PL_OUT + i] = out[i];
        f[DISC_PL_STRIDE + i] = sp ? c->stride[i] : 1, f[DISC_PL_DILATION + i] = 1;
        f[DISC_PL_PAD_LO + i] = f[DISC_PL_PAD_HI + i] = sp ? c->pad[i] : 0;
    }
    for (int64_t b = 0; b < c->n * c->c; b++)
        for (int64_t y0 = 0; y0 < out[0]; y0++)
            for (int64_t y1 = 0; y1 < out[1]; y1++)
                for (int64_t y2 = 0; y2 < out[2]; y2++) {
                    int64_t yi[3] = {y0, y1, y2}, taps = 0;
                    double acc = c->max ? -INFINITY : 0;
                    bool nan = false;
                    for (int64_t k0 = 0; k0 < win[0]; k0++)
                        for (int64_t k1 = 0; k1 < win[1]; k1++)
                            for (int64_t k2 = 0; k2 < win[2]; k2++) {
                                int64_t ki[3] = {k0, k1, k2}, xi[3];
                                bool inside = true;
                                for (int a = 0; a < 3; a++) {
                                    xi[a] = yi[a] * f[DISC_PL_STRIDE + a] - f[DISC_PL_PAD_LO + a] + ki[a];
                                    inside &= xi[a] >= 0 && xi[a] < in[a];
                                }
                                if (!inside)
                                    continue;
                                double v = get(hx, c->dt, ((b * in[0] + xi[0]) * in[1] + xi[1]) * in[2] + xi[2]);
                                taps++;
                                nan |= v != v;
                                acc = c->max ? (v > acc ? v : acc) : acc + v;
                            }
                    double v = nan ? NAN : c->max ? acc : acc / (double)(c->count_pad ? win[0] * win[1] * win[2] : taps);
                    want[((b * out[0] + y0) * out[1] + y1) * out[2] + y2] = v;
                }
    DiscDevPtr bx, by;
    void *dx = upload(rt, g, hx, (size_t)nx * es, &bx), *dy = upload(rt, g, NULL, (size_t)ny * es, &by);
    int rc = dx && dy ? disc_rt_dev_pool(rt, f, dx, dy) : -1;
    if (rc == 0)
        rc = disc_gpu_copy_out(rt, g, hy, by, (size_t)ny * es) == 0 && disc_gpu_sync(rt, g) == 0 ? 0 : -1;
    CHECK_MSG(rc == 0, "%s pool %dd: %s", c->max ? "max" : "avg", c->nsp, disc_rt_error(rt) ? disc_rt_error(rt) : "");
    double tol = c->dt == DT_F16 ? 4e-3 : 1e-6;
    int bad = 0;
    for (int64_t i = 0; rc == 0 && i < ny; i++) {
        double got = get(hy, c->dt, i);
        bool ok = want[i] != want[i] ? got != got : fabs(got - want[i]) <= tol * (1 + fabs(want[i]));
        if (!ok && bad++ < 3)
            fprintf(stderr, "  %s pool %dd at %lld: %g, want %g\n", c->max ? "max" : "avg", c->nsp, (long long)i, got,
                    want[i]);
    }
    CHECK(bad == 0);
    disc_gpu_release(g, bx);
    disc_gpu_release(g, by);
    disc_rt_reset(rt);
    free(hx), free(hy), free(want);
}

static void pool_cases(DiscRt *rt, DiscGpu *g)
{
    for (size_t i = 0; i < sizeof pools / sizeof *pools; i++)
        run_pool(rt, g, &pools[i]);
}

/* Pooling on the stand-in: the cases, a plan each, and what disc never
 * hands cuDNN refused with its reason. */
static void fake_pool(DiscRt *rt, DiscGpu *g, long (*calls)(const char *))
{
    long s0 = calls("cudnnSetPoolingNdDescriptor"), p0 = calls("cudnnPoolingForward");
    int np = (int)(sizeof pools / sizeof *pools);
    pool_cases(rt, g);
    pool_cases(rt, g);
    CHECK_MSG(calls("cudnnSetPoolingNdDescriptor") - s0 == np, "%ld pooling descriptors for %d cases",
              calls("cudnnSetPoolingNdDescriptor") - s0, np);
    CHECK(calls("cudnnPoolingForward") - p0 == 2 * np);
    int64_t f[DISC_PL_NFIELDS] = {0};
    f[DISC_PL_DTYPE] = DT_F32, f[DISC_PL_NSP] = 2, f[DISC_PL_MAX] = 1, f[DISC_PL_N] = 1, f[DISC_PL_C] = 1;
    for (int i = 0; i < 3; i++)
        f[DISC_PL_IN + i] = f[DISC_PL_WINDOW + i] = f[DISC_PL_OUT + i] = f[DISC_PL_STRIDE + i] = f[DISC_PL_DILATION + i] = 1;
    DiscDevPtr buf = disc_gpu_alloc(rt, g, 64);
    void *p = (void *)(uintptr_t)buf;
    f[DISC_PL_DILATION] = 2;
    CHECK(disc_rt_dev_pool(rt, f, p, p) == -1);
    const char *e = disc_rt_error(rt);
    printf("  error: %s\n", e ? e : "(none)");
    CHECK(e && strstr(e, "a pooling it is not handed"));
    disc_rt_reset(rt);
    f[DISC_PL_DILATION] = 1;
    setenv("FAKE_CUDNN_FAIL", "cudnnPoolingForward", 1);
    CHECK(disc_rt_dev_pool(rt, f, p, p) == -1);
    e = disc_rt_error(rt);
    printf("  error: %s\n", e ? e : "(none)");
    CHECK(e && strstr(e, "cudnnPoolingForward (cudnn pool max 1x1 f32)"));
    disc_rt_reset(rt);
    unsetenv("FAKE_CUDNN_FAIL");
    f[DISC_PL_N] = 0;
    CHECK(disc_rt_dev_pool(rt, f, p, p) == 0); /* an empty result */
    CHECK(disc_gpu_sync(rt, g) == 0);
    disc_gpu_release(g, buf);
}

/* With a real device: the cases. */
static void real(DiscRt *rt, DiscGpu *g)
{
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        run_case(rt, g, &cases[i]);
    pool_cases(rt, g);
}

int main(int argc, char **argv)
{
    return devlib_main(argc, argv, disc_dnn_available, fake, real);
}
