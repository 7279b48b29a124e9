/*
 * test_api_cuda.c — the C API's cuda backend: disc_run on host tensors and
 * disc_run_device on device memory.
 *
 *   test_api_cuda          no driver here: disc_compile with backend
 *                          "cuda" fails with one error naming libcuda.so.1;
 *                          with a driver (a lent GPU), as --fake does
 *   test_api_cuda --fake   on the stand-in driver (gpu.cmake sets
 *                          LD_LIBRARY_PATH and DISC_CUDA_EMU_MODULES=1)
 *
 * The model mixes kernels and a host op whose result sizes a later
 * kernel (nonzero), so both copies are exercised: a device input read by
 * the host op, a host result read by a kernel, and results of each side
 * written into the caller's device buffers. Device memory for the test
 * comes from the runtime's driver layer (runtime/rt.h).
 */
#include "disc.h"
#include "runtime/rt.h"
#include "tests/unit/check.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static const char ir[] = "graph @t(%x: f32[B, S]) {\n"
                         "  %0 = nonzero(%x) : i64[2, NZ]\n"
                         "  %1 = convert(%0) {to = f32} : f32[2, NZ]\n"
                         "  %2 = mul(%1, %1) : f32[2, NZ]\n"
                         "  %3 = abs(%x) : f32[B, S]\n"
                         "  %4 = exp(%3) : f32[B, S]\n"
                         "  return %2, %4, %0\n"
                         "}\n";

static disc_tensor host_input(int64_t b, int64_t s, float *data)
{
    disc_tensor t = {.dtype = DISC_F32, .rank = 2, .shape = {b, s}, .data = data,
                     .nbytes = (size_t)(b * s) * sizeof(float)};
    for (int64_t i = 0; i < b * s; i++)
        data[i] = (i % 3) ? (float)((i * 7) % 11) / 4 - 1 : 0; /* zeros for nonzero */
    return t;
}

static void device_runs(disc_compiled *c, int64_t b, int64_t s)
{
    float *x = malloc((size_t)(b * s + 1) * sizeof *x);
    disc_tensor in = host_input(b, s, x);
    disc_tensor ref[3] = {{0}};
    CHECK_MSG(disc_run(c, &in, 1, ref, 3) == DISC_OK, "%s", disc_last_error());

    DiscRtOpts ro = {.threads = 1};
    DiscRt *rt = disc_rt_new(&ro);
    DiscGpu *g = disc_gpu_open(rt, 0);
    CHECK_MSG(g != NULL, "%s", disc_rt_error(rt));
    if (!g) {
        disc_rt_free(rt);
        free(x);
        return;
    }
    DiscDevPtr dx = disc_gpu_alloc(rt, g, in.nbytes);
    CHECK(dx && disc_gpu_copy_in(rt, g, dx, x, in.nbytes) == 0);
    disc_tensor din = in;
    din.data = (void *)(uintptr_t)dx;
    disc_tensor out[3];
    DiscDevPtr dout[3];
    for (int i = 0; i < 3; i++) {
        dout[i] = disc_gpu_alloc(rt, g, ref[i].nbytes + 64);
        out[i] = (disc_tensor){.data = (void *)(uintptr_t)dout[i], .nbytes = ref[i].nbytes + 64};
    }
    CHECK_MSG(disc_run_device(c, &din, 1, out, 3) == DISC_OK, "%s", disc_last_error());
    for (int i = 0; i < 3; i++) {
        CHECK(out[i].rank == ref[i].rank && out[i].dtype == ref[i].dtype && out[i].owned == 0 &&
              out[i].nbytes == ref[i].nbytes && out[i].data == (void *)(uintptr_t)dout[i]);
        CHECK(!memcmp(out[i].shape, ref[i].shape, sizeof out[i].shape));
        void *h = malloc(ref[i].nbytes + 1);
        CHECK(disc_gpu_copy_out(rt, g, h, dout[i], ref[i].nbytes) == 0 && disc_gpu_sync(rt, g) == 0);
        CHECK_MSG(!memcmp(h, ref[i].data, ref[i].nbytes), "output %d differs from disc_run's at %lldx%lld", i,
                  (long long)b, (long long)s);
        free(h);
    }
    /* an output buffer too small: the message says what is needed */
    out[1].nbytes = 2;
    CHECK(disc_run_device(c, &din, 1, out, 3) != DISC_OK);
    CHECK_MSG(strstr(disc_last_error(), "needs a device buffer of"), "%s", disc_last_error());
    /* no output buffer: the caller's to give */
    out[1].data = NULL;
    CHECK(disc_run_device(c, &din, 1, out, 3) == DISC_ERR_ARG && strstr(disc_last_error(), "output 1"));
    disc_gpu_release(g, dx);
    for (int i = 0; i < 3; i++) {
        disc_gpu_release(g, dout[i]);
        disc_tensor_free(&ref[i]);
    }
    disc_gpu_close(g);
    disc_rt_free(rt);
    free(x);
}

int main(int argc, char **argv)
{
    bool fake = argc > 1 && !strcmp(argv[1], "--fake");
    disc_model *m = disc_load_ir(ir, sizeof ir - 1, "t.disc");
    CHECK_MSG(m != NULL, "%s", disc_last_error());
    if (!m)
        return check_done();
    disc_options o = disc_default_options();
    o.backend = "cuda";
    disc_compiled *c = disc_compile(m, &o);
    char why[600];
    if (!fake && disc_gpu_driver_version(why, sizeof why) == 0) { /* no driver: one error naming it */
        CHECK(c == NULL && strstr(disc_last_error(), "libcuda.so.1"));
        disc_model_free(m);
        return check_done();
    }
    CHECK_MSG(c != NULL, "%s", disc_last_error());
    if (c) {
        device_runs(c, 4, 6);
        device_runs(c, 3, 197);
        device_runs(c, 1, 1);
        disc_compiled_free(c);
    }
    /* a model compiled for the CPU takes no device memory */
    o.backend = "cpu";
    c = disc_compile(m, &o);
    float x[4] = {1, 2, 3, 4};
    disc_tensor in = {.dtype = DISC_F32, .rank = 2, .shape = {2, 2}, .data = x, .nbytes = sizeof x};
    disc_tensor out[3] = {{0}};
    CHECK(c && disc_run_device(c, &in, 1, out, 3) == DISC_ERR_ARG &&
          strstr(disc_last_error(), "compiled for cuda"));
    disc_compiled_free(c);
    disc_model_free(m);
    return check_done();
}
