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
 *
 * Then CUDA graphs (disc_gpu_run): a model of kernels and cuBLASLt calls
 * run again and again at a few shapes, with new values each time, must
 * give what the same model gives with DISC_CUDA_GRAPHS=0, bit for bit,
 * on host and on device memory; on the stand-in driver the calls say
 * that the second run at a shape captured and the later ones replayed,
 * that the nonzero model (a host op) is never replayed, and that with
 * room for one graph, two shapes in turn still come out right.
 */
#include "disc.h"
#include "runtime/rt.h"
#include "tests/unit/check.h"

#include <dlfcn.h>
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

/* Device 0 through the runtime's driver layer, for the test's own
 * buffers; NULL (checked, rt freed) where it does not open. */
static DiscGpu *test_device(DiscRt **rt)
{
    DiscRtOpts ro = {.threads = 1};
    *rt = disc_rt_new(&ro);
    DiscGpu *g = disc_gpu_open(*rt, 0);
    CHECK_MSG(g != NULL, "%s", disc_rt_error(*rt));
    if (!g) {
        disc_rt_free(*rt);
        *rt = NULL;
    }
    return g;
}

static long fake_calls(const char *name);

static void device_runs(disc_compiled *c, int64_t b, int64_t s)
{
    float *x = malloc((size_t)(b * s + 1) * sizeof *x);
    disc_tensor in = host_input(b, s, x);
    disc_tensor ref[3] = {{0}};
    CHECK_MSG(disc_run(c, &in, 1, ref, 3) == DISC_OK, "%s", disc_last_error());

    DiscRt *rt;
    DiscGpu *g = test_device(&rt);
    if (!g) {
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
    /* after the caller's stream: an event recorded there, waited for on
     * the model's stream (the stand-in counts both), the same results */
    long rec0 = fake_calls("cuEventRecord"), wait0 = fake_calls("cuStreamWaitEvent");
    int caller_stream;
    CHECK_MSG(disc_run_device_on(c, &caller_stream, &din, 1, out, 3) == DISC_OK, "%s", disc_last_error());
    CHECK_MSG(fake_calls("cuStreamWaitEvent") - wait0 == 1 && fake_calls("cuEventRecord") - rec0 >= 1,
              "waits %ld, records %ld", fake_calls("cuStreamWaitEvent") - wait0, fake_calls("cuEventRecord") - rec0);
    for (int i = 0; i < 3; i++) {
        void *h = malloc(ref[i].nbytes + 1);
        CHECK(disc_gpu_copy_out(rt, g, h, dout[i], ref[i].nbytes) == 0 && disc_gpu_sync(rt, g) == 0);
        CHECK_MSG(!memcmp(h, ref[i].data, ref[i].nbytes), "disc_run_device_on: output %d differs", i);
        free(h);
    }
    CHECK(disc_run_device_on(c, NULL, &din, 1, out, 3) == DISC_OK && fake_calls("cuStreamWaitEvent") - wait0 == 1);
    /* a wait that fails: the run fails, naming the call */
    setenv("FAKE_CUDA_FAIL", "cuStreamWaitEvent", 1);
    CHECK(disc_run_device_on(c, &caller_stream, &din, 1, out, 3) != DISC_OK);
    CHECK_MSG(strstr(disc_last_error(), "cuStreamWaitEvent"), "%s", disc_last_error());
    unsetenv("FAKE_CUDA_FAIL");
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

/* kernels around a matmul with a bias (cuBLASLt's epilogue) and a
 * residual: no host op */
static const char gir[] = "graph @g(%x: f32[B, S, 8], %w: f32[8, 8], %b: f32[8]) {\n"
                          "  %0 = dot(%x, %w) {lhs_batch = [], rhs_batch = [], lhs_contract = [2], rhs_contract = [0]} : f32[B, S, 8]\n"
                          "  %1 = add(%0, %b) : f32[B, S, 8]\n"
                          "  %2 = tanh(%1) : f32[B, S, 8]\n"
                          "  %3 = reduce(%2) {kind = sum, axes = [2], keepdims = 1} : f32[B, S, 1]\n"
                          "  %4 = mul(%2, %3) : f32[B, S, 8]\n"
                          "  %5 = add(%4, %x) : f32[B, S, 8]\n"
                          "  return %5, %3\n"
                          "}\n";

static long fake_calls(const char *name)
{
    void *lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    long (*f)(const char *) = lib ? (long (*)(const char *))dlsym(lib, "fake_cuda_calls") : NULL;
    return f ? f(name) : -1;
}

/* Inputs of shape b x s with values from seed. */
static void graph_inputs(disc_tensor *in, float *x, float *w, float *bias, int64_t b, int64_t s, int seed)
{
    for (int64_t i = 0; i < b * s * 8; i++)
        x[i] = (float)((i * 13 + seed * 7) % 17) / 8 - 1;
    for (int i = 0; i < 64; i++)
        w[i] = (float)((i * 5 + seed) % 9) / 16 - 0.25f;
    for (int i = 0; i < 8; i++)
        bias[i] = (float)(i + seed) / 10;
    in[0] = (disc_tensor){.dtype = DISC_F32, .rank = 3, .shape = {b, s, 8}, .data = x,
                          .nbytes = (size_t)(b * s * 8) * sizeof(float)};
    in[1] = (disc_tensor){.dtype = DISC_F32, .rank = 2, .shape = {8, 8}, .data = w, .nbytes = 64 * sizeof(float)};
    in[2] = (disc_tensor){.dtype = DISC_F32, .rank = 1, .shape = {8}, .data = bias, .nbytes = 8 * sizeof(float)};
}

/* One run of c at b x s (values from seed), on host memory, against the
 * same run with graphs off: equal to the bit. */
static void graph_run(disc_compiled *c, int64_t b, int64_t s, int seed)
{
    float *x = malloc((size_t)(b * s * 8) * sizeof *x), w[64], bias[8];
    disc_tensor in[3], ref[2] = {{0}}, out[2] = {{0}};
    graph_inputs(in, x, w, bias, b, s, seed);
    setenv("DISC_CUDA_GRAPHS", "0", 1);
    CHECK_MSG(disc_run(c, in, 3, ref, 2) == DISC_OK, "%s", disc_last_error());
    unsetenv("DISC_CUDA_GRAPHS");
    CHECK_MSG(disc_run(c, in, 3, out, 2) == DISC_OK, "%s", disc_last_error());
    for (int i = 0; i < 2; i++) {
        CHECK(out[i].rank == ref[i].rank && !memcmp(out[i].shape, ref[i].shape, sizeof out[i].shape) &&
              out[i].nbytes == ref[i].nbytes && out[i].owned);
        CHECK_MSG(out[i].data && ref[i].data && !memcmp(out[i].data, ref[i].data, ref[i].nbytes),
                  "output %d at %lldx%lld (seed %d) differs from the run without graphs", i, (long long)b,
                  (long long)s, seed);
        disc_tensor_free(&ref[i]);
        disc_tensor_free(&out[i]);
    }
    free(x);
}

/* disc_run_device at b x s, the same buffers each time, values from each
 * seed in turn, against disc_run without graphs. */
static void graph_device_runs(disc_compiled *c, int64_t b, int64_t s)
{
    DiscRt *rt;
    DiscGpu *g = test_device(&rt);
    if (!g)
        return;
    size_t nx = (size_t)(b * s * 8) * sizeof(float);
    float *x = malloc(nx), w[64], bias[8];
    DiscDevPtr din[3] = {disc_gpu_alloc(rt, g, nx), disc_gpu_alloc(rt, g, sizeof w), disc_gpu_alloc(rt, g, sizeof bias)};
    DiscDevPtr dout[2] = {disc_gpu_alloc(rt, g, nx), disc_gpu_alloc(rt, g, nx / 8)};
    for (int seed = 0; seed < 5; seed++) {
        disc_tensor in[3], ref[2] = {{0}};
        graph_inputs(in, x, w, bias, b, s, seed % 3);
        setenv("DISC_CUDA_GRAPHS", "0", 1);
        CHECK_MSG(disc_run(c, in, 3, ref, 2) == DISC_OK, "%s", disc_last_error());
        unsetenv("DISC_CUDA_GRAPHS");
        disc_tensor din_t[3], out[2];
        for (int i = 0; i < 3; i++) {
            CHECK(disc_gpu_copy_in(rt, g, din[i], in[i].data, in[i].nbytes) == 0);
            din_t[i] = in[i];
            din_t[i].data = (void *)(uintptr_t)din[i];
        }
        for (int i = 0; i < 2; i++)
            out[i] = (disc_tensor){.data = (void *)(uintptr_t)dout[i], .nbytes = i ? nx / 8 : nx};
        CHECK_MSG(disc_run_device(c, din_t, 3, out, 2) == DISC_OK, "%s", disc_last_error());
        for (int i = 0; i < 2; i++) {
            void *h = malloc(ref[i].nbytes);
            CHECK(out[i].nbytes == ref[i].nbytes && disc_gpu_copy_out(rt, g, h, dout[i], ref[i].nbytes) == 0 &&
                  disc_gpu_sync(rt, g) == 0);
            CHECK_MSG(!memcmp(h, ref[i].data, ref[i].nbytes), "device run %d: output %d differs at %lldx%lld", seed,
                      i, (long long)b, (long long)s);
            free(h);
            disc_tensor_free(&ref[i]);
        }
    }
    /* a buffer too small at a key with a graph: the flow's message */
    disc_tensor din_t[3], out[2];
    float w0[64], b0[8];
    graph_inputs(din_t, x, w0, b0, b, s, 0);
    for (int i = 0; i < 3; i++)
        din_t[i].data = (void *)(uintptr_t)din[i];
    for (int i = 0; i < 2; i++)
        out[i] = (disc_tensor){.data = (void *)(uintptr_t)dout[i], .nbytes = i ? nx / 8 - 1 : nx};
    CHECK(disc_run_device(c, din_t, 3, out, 2) != DISC_OK && strstr(disc_last_error(), "needs a device buffer of"));
    for (int i = 0; i < 3; i++)
        disc_gpu_release(g, din[i]);
    for (int i = 0; i < 2; i++)
        disc_gpu_release(g, dout[i]);
    disc_gpu_close(g);
    disc_rt_free(rt);
    free(x);
}

static void graphs(bool fake)
{
    disc_model *m = disc_load_ir(gir, sizeof gir - 1, "g.disc");
    CHECK_MSG(m != NULL, "%s", disc_last_error());
    disc_options o = disc_default_options();
    o.backend = "cuda";
    disc_compiled *c = m ? disc_compile(m, &o) : NULL;
    CHECK_MSG(c != NULL, "%s", disc_last_error());
    if (!c) {
        disc_model_free(m);
        return;
    }
    long cap0 = fake_calls("cuStreamBeginCapture"), launch0 = fake_calls("cuGraphLaunch");
    /* 2 x 5: the first run plain, the second captured (and replayed), the
     * rest replayed, with new values each time; 1 x 13 between them */
    for (int i = 0; i < 5; i++) {
        graph_run(c, 2, 5, i);
        if (i == 2)
            graph_run(c, 1, 13, i);
    }
    if (fake)
        CHECK_MSG(fake_calls("cuStreamBeginCapture") - cap0 == 1 && fake_calls("cuGraphLaunch") - launch0 == 4,
                  "captures %ld, graph launches %ld (1 and 4 expected)", fake_calls("cuStreamBeginCapture") - cap0,
                  fake_calls("cuGraphLaunch") - launch0);
    graph_device_runs(c, 3, 7);
    if (fake) { /* a driver that will not make the graph: runs go on without, and the key is not captured again */
        setenv("FAKE_CUDA_FAIL", "cuGraphInstantiateWithFlags", 1);
        long c1 = fake_calls("cuStreamBeginCapture"), l1 = fake_calls("cuGraphLaunch");
        for (int i = 0; i < 4; i++)
            graph_run(c, 5, 2, i);
        CHECK_MSG(fake_calls("cuStreamBeginCapture") - c1 == 1 && fake_calls("cuGraphLaunch") == l1,
                  "a graph the driver would not make: %ld captures, %ld launches",
                  fake_calls("cuStreamBeginCapture") - c1, fake_calls("cuGraphLaunch") - l1);
        unsetenv("FAKE_CUDA_FAIL");
    }
    /* room for one graph: two shapes in turn */
    setenv("DISC_CUDA_GRAPHS", "1", 1);
    for (int i = 0; i < 4; i++) {
        graph_run(c, 4, 3, i);
        setenv("DISC_CUDA_GRAPHS", "1", 1);
        graph_run(c, 2, 9, i);
        setenv("DISC_CUDA_GRAPHS", "1", 1);
    }
    /* not a count: the run's error names the variable */
    setenv("DISC_CUDA_GRAPHS", "lots", 1);
    float x[16], w[64], bias[8];
    disc_tensor in[3], out[2] = {{0}};
    graph_inputs(in, x, w, bias, 1, 2, 0);
    CHECK(disc_run(c, in, 3, out, 2) != DISC_OK && strstr(disc_last_error(), "DISC_CUDA_GRAPHS=lots"));
    unsetenv("DISC_CUDA_GRAPHS");
    disc_compiled_free(c);
    disc_model_free(m);
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
        long launch0 = fake_calls("cuGraphLaunch"), caps[5];
        for (int i = 0; i < 4; i++) { /* a host op: each key's capture abandoned once, never replayed */
            caps[i] = fake_calls("cuStreamBeginCapture");
            for (int k = 0; k < 2; k++) {
                float x[4 * 6];
                disc_tensor in = host_input(k ? 4 : 1, k ? 6 : 3, x), out[3] = {{0}};
                CHECK_MSG(disc_run(c, &in, 1, out, 3) == DISC_OK, "%s", disc_last_error());
                for (int j = 0; j < 3; j++)
                    disc_tensor_free(&out[j]);
            }
        }
        caps[4] = fake_calls("cuStreamBeginCapture");
        if (fake)
            CHECK_MSG(fake_calls("cuGraphLaunch") == launch0 && caps[2] - caps[1] == 2 && caps[4] == caps[2],
                      "a model with a host op: captures %ld %ld %ld %ld %ld, graph launches %ld", caps[0], caps[1],
                      caps[2], caps[3], caps[4], fake_calls("cuGraphLaunch") - launch0);
        for (int i = 0; i < 2; i++) { /* and on device memory */
            device_runs(c, 4, 6);
            device_runs(c, 3, 197);
            device_runs(c, 1, 1);
        }
        disc_compiled_free(c);
        graphs(fake);
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
