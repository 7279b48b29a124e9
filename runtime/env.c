/*
 * env.c — the environment, read in one place and once per process. The
 * variables are overrides for measuring and for deployments that cannot
 * pass options; the defaults are the fast paths. Every one disc reads:
 *
 *   DISC_CPU=NAME          the CPU the compiler targets when the options
 *                          name none (codegen/cpu.c; dcc --cpu wins)
 *   DISC_THREADS=N         threads per run of an AOT-compiled model
 *   DISC_PROFILE=1         time kernels and library calls, report at exit
 *   DISC_PROFILE_TOP=N     entries in that report (25)
 *   DISC_SKINNY=N          the largest m the skinny matmul takes (16 for
 *                          AVX-512 kernels, 256 for AVX2 and SSE; 0: none)
 *   DISC_SPLIT=0           oneDNN calls on oneDNN's threads, not in parts
 *   DISC_CONV_LAYOUT=plain convolutions on NCHW, not oneDNN's layouts
 *   DISC_WINOGRAD=0|1      3 x 3 convolutions of stride 1 never or always by
 *                          disc's Winograd F(2x2, 3x3) (dnnl.c; default:
 *                          where oneDNN runs at AVX2 or below, and
 *                          oneDNN's Winograd kernels where it has them and
 *                          wino_worth says so; 0 turns those off too)
 *   DISC_CONV_DW=brdgmm    depthwise convolutions on the implementation
 *                          oneDNN lists first (brdgmm_dw on AVX-512), not
 *                          its direct jit_dw kernel (dnnl.c, dw_direct)
 *   DISC_FPMATH=bf16       f32 matmuls on constant weights multiply in bf16
 *   DISC_CACHE_DIR=DIR     where the JIT keeps compiled code between
 *                          processes (codegen/cache.h; default
 *                          $HOME/.cache/disc/jit)
 *   DISC_CACHE=0           no cache of compiled code: every compile
 *                          generates and optimises
 *   DISC_STAGE=1|N         the cuda backend's copies between the caller's
 *                          pageable memory and the device staged through
 *                          two pinned buffers of the device's (8 MiB, or N
 *                          bytes: copies of at least that size); 0, the
 *                          default: the driver's own copies (cudrv.c)
 *   DISC_PERF_MAP=1        the JIT's functions named for perf(1) in
 *                          /tmp/perf-<pid>.map (codegen/perfmap.c)
 *   OMP_WAIT_POLICY, GOMP_SPINCOUNT  libgomp's, read to know whether
 *                          oneDNN's team sleeps between calls (dnnl.c)
 *
 * (dcc compile also reads CC and DISC_RT_LIB, to link a shared object.)
 */
#include "runtime/rt.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static DiscEnv env;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void read_env(void)
{
    const char *e;
    env.cpu = getenv("DISC_CPU");
    env.threads = (e = getenv("DISC_THREADS")) ? atoi(e) : 0;
    e = getenv("DISC_PROFILE");
    env.profile = e && *e && strcmp(e, "0") != 0;
    env.profile_top = (e = getenv("DISC_PROFILE_TOP")) ? atoi(e) : 25;
    env.skinny_m = (e = getenv("DISC_SKINNY")) ? strtoll(e, NULL, 10) : -1;
    env.split = !((e = getenv("DISC_SPLIT")) && !strcmp(e, "0"));
    env.winograd = !(e = getenv("DISC_WINOGRAD")) ? -1 : !strcmp(e, "0") ? 0 : 1;
    env.dw_brdgmm = (e = getenv("DISC_CONV_DW")) && !strcmp(e, "brdgmm");
    env.conv_plain = (e = getenv("DISC_CONV_LAYOUT")) && !strcmp(e, "plain");
    env.fpmath_bf16 = (e = getenv("DISC_FPMATH")) && !strcmp(e, "bf16");
    env.cache_dir = getenv("DISC_CACHE_DIR");
    env.cache_off = (e = getenv("DISC_CACHE")) && !strcmp(e, "0");
    env.home = getenv("HOME");
    env.stage = (e = getenv("DISC_STAGE")) ? strtoll(e, NULL, 10) : 0;
    if (env.stage == 1)
        env.stage = 8 << 20;
    else if (env.stage > 1 && env.stage < 4096)
        env.stage = 4096;
    env.perf_map = (e = getenv("DISC_PERF_MAP")) && *e && strcmp(e, "0") != 0;
    e = getenv("OMP_WAIT_POLICY");
    env.omp_passive = e && !strcasecmp(e, "passive") && !getenv("GOMP_SPINCOUNT");
}

const DiscEnv *disc_env(void)
{
    pthread_once(&once, read_env);
    return &env;
}
