/*
 * aot_check.c — runs an AOT-compiled model (dcc compile) on raw tensors, for
 * tests/aot/run_aot.py. Built per model against its generated header and
 * linked with the object and the runtime archive only:
 *
 *     cc -DAOT_NAME=m -DAOT_UPPER=M -DAOT_HEADER='"m.h"' aot_check.c m.o libdisc_rt.a ...
 *     aot_check DIR [--weights FILE]
 *
 * DIR holds input_K.bin (the data) and input_K.shape (the dims, as text);
 * the program writes output_K.bin and output_K.shape there. On a failed run
 * it prints the status and the message and exits with 1.
 *
 * Built with -DAOT_DEVICE for a cuda model (and -I the repository root),
 * it runs the model a second time through NAME_run_device, on copies of
 * the inputs in device memory (the runtime's driver layer, runtime/rt.h)
 * into output buffers of the sizes the first run returned, and requires
 * the same bytes; then once with the first output's buffer a byte short,
 * which must fail with a message that names the size needed.
 */
#include AOT_HEADER
#ifdef AOT_DEVICE
#include "runtime/rt.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define M(s) CAT(AOT_NAME, s)
#define STR_(a) #a
#define STR(a) STR_(a)

static size_t dtype_bytes(const char *t)
{
    static const struct {
        const char *name;
        size_t size;
    } sizes[] = {{"f32", 4}, {"f64", 8}, {"f16", 2}, {"bf16", 2}, {"i8", 1},  {"u8", 1},  {"bool", 1},
                 {"i16", 2}, {"u16", 2}, {"i32", 4}, {"u32", 4},  {"i64", 8}, {"u64", 8}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (!strcmp(sizes[i].name, t))
            return sizes[i].size;
    return 0;
}

static void *read_input(const char *dir, int k, int rank, const char *dtype, int64_t *shape)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/input_%d.shape", dir, k);
    FILE *f = fopen(path, "r");
    size_t n = dtype_bytes(dtype);
    for (int i = 0; f && i < rank; i++) {
        long long d;
        if (fscanf(f, "%lld", &d) != 1) {
            fclose(f);
            f = NULL;
            break;
        }
        shape[i] = d;
        n *= (size_t)d;
    }
    if (!f) {
        fprintf(stderr, "aot_check: cannot read %s\n", path);
        exit(2);
    }
    fclose(f);
    snprintf(path, sizeof path, "%s/input_%d.bin", dir, k);
    void *data = malloc(n ? n : 1);
    f = fopen(path, "rb");
    if (!data || !f || fread(data, 1, n, f) != n) {
        fprintf(stderr, "aot_check: cannot read %zu bytes from %s\n", n, path);
        exit(2);
    }
    fclose(f);
    return data;
}

static void write_output(const char *dir, int k, int rank, const char *dtype, const int64_t *shape,
                         const void *data)
{
    char path[4096];
    size_t n = dtype_bytes(dtype);
    snprintf(path, sizeof path, "%s/output_%d.shape", dir, k);
    FILE *f = fopen(path, "w");
    for (int i = 0; f && i < rank; i++) {
        fprintf(f, "%lld ", (long long)shape[i]);
        n *= (size_t)shape[i];
    }
    if (f)
        fclose(f);
    snprintf(path, sizeof path, "%s/output_%d.bin", dir, k);
    f = fopen(path, "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f) != 0) {
        fprintf(stderr, "aot_check: cannot write %s\n", path);
        exit(2);
    }
}

#ifdef AOT_DEVICE
static size_t out_bytes(int i, const int64_t *shape)
{
    size_t n = dtype_bytes(M(_output_dtype)[i]);
    for (int k = 0; k < M(_output_rank)[i]; k++)
        n *= (size_t)shape[k];
    return n;
}

/* NAME_run_device on the inputs' device copies; 0 if it gives the host run's outputs */
static int device_run(int ni, const void *const *in, const int64_t *const *ish, int no, void *const *out,
                      int64_t (*oshape)[8])
{
    DiscRtOpts ro = {.threads = 1};
    DiscRt *rt = disc_rt_new(&ro);
    DiscGpu *g = rt ? disc_gpu_open(rt, 0) : NULL;
    if (!g) {
        printf("device: %s\n", rt ? disc_rt_error(rt) : "out of memory");
        disc_rt_free(rt);
        return 1;
    }
    int bad = 0;
    DiscDevPtr din[ni + 1], dout[no + 1];
    const void *pin[ni + 1];
    void *pout[no + 1];
    int64_t nbytes[no + 1], dshape[no + 1][8];
    int64_t *dsh[no + 1];
    for (int i = 0; i < ni; i++) {
        size_t n = dtype_bytes(M(_input_dtype)[i]);
        for (int k = 0; k < M(_input_rank)[i]; k++)
            n *= (size_t)ish[i][k];
        din[i] = disc_gpu_alloc(rt, g, n ? n : 1);
        bad |= !din[i] || disc_gpu_copy_in(rt, g, din[i], in[i], n) != 0;
        pin[i] = (const void *)(uintptr_t)din[i];
    }
    for (int i = 0; i < no; i++) {
        nbytes[i] = (int64_t)out_bytes(i, oshape[i]);
        dout[i] = disc_gpu_alloc(rt, g, (size_t)nbytes[i] + 1);
        bad |= !dout[i];
        pout[i] = (void *)(uintptr_t)dout[i];
        dsh[i] = dshape[i];
    }
    char err[1024] = "";
    int rc = bad ? -1 : M(_run_device)(pin, ish, pout, nbytes, dsh, err, sizeof err);
    if (rc != 0) {
        printf("run_device: status %d: %s\n", rc, bad ? disc_rt_error(rt) : err);
        bad = 1;
    }
    for (int i = 0; !bad && i < no; i++) {
        void *h = malloc((size_t)nbytes[i] + 1);
        if (!h || memcmp(dshape[i], oshape[i], (size_t)M(_output_rank)[i] * sizeof(int64_t)) ||
            disc_gpu_copy_out(rt, g, h, dout[i], (size_t)nbytes[i]) != 0 || disc_gpu_sync(rt, g) != 0 ||
            memcmp(h, out[i], (size_t)nbytes[i])) {
            printf("run_device: output %d differs from the run on host memory\n", i);
            bad = 1;
        }
        free(h);
    }
    if (!bad && no > 0 && nbytes[0] > 0) { /* a buffer a byte short */
        nbytes[0]--;
        rc = M(_run_device)(pin, ish, pout, nbytes, dsh, err, sizeof err);
        if (rc != CAT(AOT_UPPER, _ERUN) || !strstr(err, "needs a device buffer of")) {
            printf("run_device with output 0 a byte short: status %d, \"%s\"\n", rc, err);
            bad = 1;
        }
    }
    for (int i = 0; i < ni; i++)
        disc_gpu_release(g, din[i]);
    for (int i = 0; i < no; i++)
        disc_gpu_release(g, dout[i]);
    disc_gpu_close(g);
    disc_rt_free(rt);
    return bad;
}
#endif

int main(int argc, char **argv)
{
    if (argc != 2 && !(argc == 4 && !strcmp(argv[2], "--weights"))) {
        fprintf(stderr, "usage: aot_check DIR [--weights FILE]\n");
        return 2;
    }
    char err[1024] = "";
#ifdef AOT_WEIGHTS
    if (argc == 4 && M(_load_weights)(argv[3], err, sizeof err) != 0) {
        printf("load_weights: %s\n", err);
        return 1;
    }
#endif
    enum { NI = CAT(AOT_UPPER, _NUM_INPUTS), NO = CAT(AOT_UPPER, _NUM_OUTPUTS) };
    const void *in[NI + 1];
    int64_t ishape[NI + 1][8];
    const int64_t *ish[NI + 1];
    for (int i = 0; i < NI; i++) {
        in[i] = read_input(argv[1], i, M(_input_rank)[i], M(_input_dtype)[i], ishape[i]);
        ish[i] = ishape[i];
    }
    void *out[NO + 1];
    int64_t oshape[NO + 1][8];
    int64_t *osh[NO + 1];
    for (int i = 0; i < NO; i++)
        osh[i] = oshape[i];
    int rc = M(_run_arrays)(in, ish, out, osh, err, sizeof err);
    if (rc != 0) {
        printf("status %d: %s\n", rc, err);
        return 1;
    }
#ifdef AOT_DEVICE
    if (device_run(NI, in, ish, NO, out, oshape) != 0)
        return 1;
#endif
    for (int i = 0; i < NO; i++) {
        write_output(argv[1], i, M(_output_rank)[i], M(_output_dtype)[i], oshape[i], out[i]);
        free(out[i]);
    }
    for (int i = 0; i < NI; i++)
        free((void *)in[i]);
#ifdef AOT_WEIGHTS
    M(_unload_weights)();
#endif
    printf("%s: ran, %d outputs\n", STR(AOT_NAME), NO);
    return 0;
}
