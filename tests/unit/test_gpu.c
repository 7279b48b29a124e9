/*
 * test_gpu.c — the GPU kernels' source (codegen/cuda.c) and NVRTC.
 *
 * Without arguments: unit tests of the source (a loop group becomes one
 * kernel whose parameters are its buffers and the symbols it reads; a
 * reduction is named as not supported yet) and, where NVRTC loads, that
 * it compiles.
 *
 *   test_gpu --compile sm_80,sm_90 FILE...
 *
 * compiles every kernel of each model (IR text or ONNX) with NVRTC, as one
 * module per model and architecture, to CUBIN and to PTX (label
 * gpu-compile); exits 77 (ctest: skipped) with the reason where NVRTC
 * cannot be loaded.
 */
#include "codegen/gpu.h"
#include "frontends/model.h"
#include "runtime/rt.h"
#include "tests/unit/check.h"

#include <stdlib.h>
#include <string.h>

/* The CUDA module of the model at path (or of IR text src). */
static bool module_source(const char *path, const char *src, GpuStr *out, int *nk, int *nu, Diag *why, Diag *d)
{
    Graph *g = src ? model_load_text(src, strlen(src), path, d) : model_load(path, d);
    if (!g)
        return false;
    CgModule m;
    CgOpts co = {.opt_level = 3};
    bool ok = cg_run_passes(g, NULL, &co, CG_MEMPLAN, &m, d) && gpu_module_source(&m, GPU_CUDA, out, nk, nu, why, d);
    cg_module_free(&m);
    graph_free(g);
    return ok;
}

static void test_source(void)
{
    const char *src = "graph @t(%x: f32[B, S], %y: f16[S]) {\n"
                      "  %0 = convert(%y) {to = f32} : f32[S]\n"
                      "  %1 = add(%x, %0) : f32[B, S]\n"
                      "  %2 = reduce(%1) {kind = sum, axes = [1], keepdims = 0} : f32[B]\n"
                      "  return %1, %2\n"
                      "}\n";
    GpuStr s = {0};
    int nk = -1, nu = -1;
    Diag why = {0}, d = {0};
    bool ok = module_source("t.disc", src, &s, &nk, &nu, &why, &d);
    CHECK_MSG(ok, "%s", d.msg);
    if (!ok)
        return;
    /* the convert is a loop kernel (the add goes with the reduction): its
     * buffers, then the one symbol it reads */
    CHECK_MSG(strstr(s.p, "DISC_KERNEL void disc_k0(const uint16_t *b0, float *b1, int64_t s1)"), "%s", s.p);
    CHECK_MSG(strstr(s.p, "disc_h2f(DISC_AT(b0,"), "%s", s.p);
    CHECK(nk >= 1);
    CHECK_MSG(nu == 1 && why.kind == DIAG_UNSUPPORTED && strstr(why.msg, "t.disc:4: error: not supported on cuda yet: "
                                                                      "reduce"), "%d %s", nu, why.msg);
    Diag nd = {0};
    if (gpu_nvrtc_version(&nd)) {
        char *bin = NULL;
        size_t n = 0;
        Diag cd = {0};
        CHECK_MSG(gpu_nvrtc_compile(s.p, "t.cu", "sm_80", true, &bin, &n, &cd) && n > 0, "%s", cd.msg);
        free(bin);
    } else {
        printf("NVRTC not here, not compiled: %s\n", nd.msg);
    }
    gpu_str_free(&s);
}

static int compile_files(const char *archs, char **files, int nfiles)
{
    Diag nd = {0};
    const char *ver = gpu_nvrtc_version(&nd);
    if (!ver) {
        printf("SKIP: %s\n", nd.msg);
        return 77;
    }
    int fails = 0;
    for (int i = 0; i < nfiles; i++) {
        GpuStr s = {0};
        int nk = 0, nu = 0;
        Diag why = {0}, d = {0};
        if (!module_source(files[i], NULL, &s, &nk, &nu, &why, &d)) {
            fprintf(stderr, "%s: %s\n", files[i], d.msg);
            fails++;
            continue;
        }
        printf("%s: %d kernels (%d groups not supported on cuda yet%s%s)", files[i], nk, nu, nu ? ", the first: " : "",
               nu ? why.msg : "");
        bool failed = false;
        char list[256];
        snprintf(list, sizeof list, "%s", archs);
        for (char *arch = strtok(list, ","); arch; arch = strtok(NULL, ",")) {
            for (int cubin = 1; cubin >= 0; cubin--) {
                char *bin = NULL;
                size_t n = 0;
                Diag cd = {0};
                double t0 = disc_rt_now();
                if (!gpu_nvrtc_compile(s.p, files[i], arch, cubin, &bin, &n, &cd)) {
                    fprintf(stderr, "\n%s: %s: %s\n", files[i], arch, cd.msg);
                    failed = true;
                } else {
                    printf("; %s %s %zu bytes in %.0f ms", arch, cubin ? "cubin" : "ptx", n, 1e3 * (disc_rt_now() - t0));
                }
                free(bin);
            }
        }
        printf("\n");
        fails += failed;
        gpu_str_free(&s);
    }
    printf("NVRTC %s: %d of %d models compiled\n", ver, nfiles - fails, nfiles);
    return fails ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "--compile"))
        return compile_files(argv[2], argv + 3, argc - 3);
    test_source();
    return check_done();
}
