/*
 * devlib.h — the main of a device library's test (test_cublaslt,
 * test_cudnn): device 0 opened, the library asked whether it loads, and
 * with --fake (the stand-ins on LD_LIBRARY_PATH, where both must be there)
 * the test's fake checks, else its cases on the real device; SKIP with
 * the reason where there is no device or no library.
 */
#ifndef DISC_TEST_DEVLIB_H
#define DISC_TEST_DEVLIB_H

#include "check.h"
#include "runtime/rt.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* v as f16 bits, for the tests' values: small multiples of 1/8 in
 * [-16, 16], exact in f16 (normal numbers only). */
static uint16_t devlib_f16(double v)
{
    float a = fabsf((float)v);
    uint16_t h = 0;
    if (a != 0) {
        int e;
        float fr = frexpf(a, &e);
        h = (uint16_t)((e + 14) << 10 | ((int)(fr * 2048) - 1024));
    }
    return (uint16_t)(h | (v < 0 ? 0x8000 : 0));
}

static int devlib_main(int argc, char **argv, int (*available)(char *why, size_t n),
                       void (*fake)(DiscRt *rt, DiscGpu *g), void (*real)(DiscRt *rt, DiscGpu *g))
{
    bool is_fake = argc > 1 && !strcmp(argv[1], "--fake");
    DiscRtOpts o = {.threads = 1};
    DiscRt *rt = disc_rt_new(&o);
    DiscGpu *g = rt ? disc_gpu_open(rt, 0) : NULL;
    if (!g) {
        printf("SKIP: no device: %s\n", rt && disc_rt_error(rt) ? disc_rt_error(rt) : "?");
        CHECK(!is_fake); /* the stand-in must be there */
        disc_rt_free(rt);
        return check_done();
    }
    char why[600];
    if (!available(why, sizeof why)) {
        printf("SKIP: %s\n", why);
        CHECK(!is_fake);
    } else {
        disc_rt_set_gpu(rt, g);
        (is_fake ? fake : real)(rt, g);
        disc_rt_set_gpu(rt, NULL);
    }
    disc_gpu_close(g);
    disc_rt_free(rt);
    return check_done();
}

#endif
