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
 * which must fail with a message that names the size needed. And CUDA
 * graphs (a run at shapes seen before replays the second run's capture):
 * the host entry runs three times more, on the inputs, on the inputs with
 * their elements in reverse order (new values at the same shapes, each
 * valid where the original is: token ids stay ids), and on the inputs
 * again, each against the same inputs' run with DISC_CUDA_GRAPHS=0; the
 * device entry runs four times on the same buffers (the last on the
 * reversed inputs), each to the bit.
 */
#include AOT_HEADER
#ifdef AOT_DEVICE
#include "runtime/rt.h"
#endif

#include <stdbool.h>
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

static size_t in_bytes(int i, const int64_t *shape)
{
    size_t n = dtype_bytes(M(_input_dtype)[i]);
    for (int k = 0; k < M(_input_rank)[i]; k++)
        n *= (size_t)shape[k];
    return n;
}

/* The inputs with their elements in reverse order. */
static void **reversed(int ni, const void *const *in, const int64_t *const *ish)
{
    void **rev = calloc((size_t)ni + 1, sizeof *rev);
    for (int i = 0; rev && i < ni; i++) {
        size_t es = dtype_bytes(M(_input_dtype)[i]), n = in_bytes(i, ish[i]);
        if (!(rev[i] = malloc(n ? n : 1)))
            exit(2);
        for (size_t k = 0; es && k < n / es; k++)
            memcpy((char *)rev[i] + k * es, (const char *)in[i] + n - (k + 1) * es, es);
    }
    return rev;
}

typedef struct Outs {
    void *data[CAT(AOT_UPPER, _NUM_OUTPUTS) + 1];
    int64_t shape[CAT(AOT_UPPER, _NUM_OUTPUTS) + 1][8];
} Outs;

/* The host entry on in; 0 if it ran (and, given want, gave want's outputs). */
static int host_run(const char *what, const void *const *in, const int64_t *const *ish, Outs *o, const Outs *want)
{
    enum { NO = CAT(AOT_UPPER, _NUM_OUTPUTS) };
    int64_t *osh[NO + 1];
    for (int i = 0; i < NO; i++)
        osh[i] = o->shape[i];
    char err[1024] = "";
    int rc = M(_run_arrays)(in, ish, o->data, osh, err, sizeof err);
    if (rc != 0) {
        printf("%s: status %d: %s\n", what, rc, err);
        return 1;
    }
    for (int i = 0; want && i < NO; i++)
        if (memcmp(o->shape[i], want->shape[i], (size_t)M(_output_rank)[i] * sizeof(int64_t)) ||
            memcmp(o->data[i], want->data[i], out_bytes(i, want->shape[i]))) {
            printf("%s: output %d differs from the run without graphs\n", what, i);
            return 1;
        }
    return 0;
}

static void outs_free(Outs *o)
{
    for (int i = 0; i < CAT(AOT_UPPER, _NUM_OUTPUTS); i++)
        free(o->data[i]);
}

/* The host entry's runs at shapes it ran before (graphs), against runs
 * without graphs; rref gets the reversed inputs' outputs. Where the
 * reversed inputs are not valid (their values are shapes the model
 * checks), *rev becomes in. */
static int graph_runs(const void *const *in, const void *const **rev, const int64_t *const *ish, void *const *out,
                      int64_t (*oshape)[8], Outs *rref)
{
    enum { NO = CAT(AOT_UPPER, _NUM_OUTPUTS) };
    Outs want, o;
    for (int i = 0; i < NO; i++) {
        want.data[i] = out[i];
        memcpy(want.shape[i], oshape[i], sizeof want.shape[i]);
    }
    setenv("DISC_CUDA_GRAPHS", "0", 1);
    int bad = host_run("reversed inputs, no graphs", *rev, ish, rref, NULL);
    if (bad) {
        printf("(the reversed inputs are not valid: the inputs again instead)\n");
        *rev = in;
        bad = host_run("inputs, no graphs", in, ish, rref, NULL);
    }
    unsetenv("DISC_CUDA_GRAPHS");
    for (int r = 0; !bad && r < 3; r++) {
        bad = host_run(r == 1 ? "graphs: reversed inputs" : "graphs: inputs", r == 1 ? *rev : in, ish, &o,
                       r == 1 ? rref : &want);
        if (!bad)
            outs_free(&o);
    }
    return bad;
}

/* NAME_run_device on the inputs' device copies; 0 if it gives the host run's outputs */
static int device_run(int ni, const void *const *in, const void *const *rev, const int64_t *const *ish, int no,
                      void *const *out, int64_t (*oshape)[8], const Outs *rref)
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
    int64_t cap[no + 1];
    for (int i = 0; i < no; i++) {
        nbytes[i] = (int64_t)out_bytes(i, oshape[i]);
        int64_t rb = (int64_t)out_bytes(i, rref->shape[i]);
        cap[i] = nbytes[i] > rb ? nbytes[i] : rb;
        dout[i] = disc_gpu_alloc(rt, g, (size_t)cap[i] + 1);
        bad |= !dout[i];
        pout[i] = (void *)(uintptr_t)dout[i];
        dsh[i] = dshape[i];
    }
    char err[1024] = "";
    /* the inputs three times (a plain run, the capture, a replay), then
     * the reversed inputs in the same buffers; the second and the fourth
     * through NAME_run_device_on after the copies queued on this test's
     * own stream (not waited for here) */
    for (int r = 0; r < 4 && !bad; r++) {
        bool back = r == 3;
        for (int i = 0; back && i < ni; i++)
            bad |= disc_gpu_copy_in(rt, g, din[i], rev[i], in_bytes(i, ish[i])) != 0;
        int rc = bad ? -1
               : r % 2 ? M(_run_device_on)(disc_gpu_stream(g), pin, ish, pout, cap, dsh, err, sizeof err)
                       : M(_run_device)(pin, ish, pout, cap, dsh, err, sizeof err);
        if (rc != 0) {
            printf("run_device %d: status %d: %s\n", r, rc, bad ? disc_rt_error(rt) : err);
            bad = 1;
        }
        for (int i = 0; !bad && i < no; i++) {
            const int64_t *ws = back ? rref->shape[i] : oshape[i];
            size_t n = out_bytes(i, ws);
            void *h = malloc(n + 1);
            if (!h || memcmp(dshape[i], ws, (size_t)M(_output_rank)[i] * sizeof(int64_t)) ||
                disc_gpu_copy_out(rt, g, h, dout[i], n) != 0 || disc_gpu_sync(rt, g) != 0 ||
                memcmp(h, back ? rref->data[i] : out[i], n)) {
                printf("run_device %d%s: output %d differs from the run on host memory\n", r,
                       back ? " (reversed inputs)" : "", i);
                bad = 1;
            }
            free(h);
        }
    }
    for (int i = 0; !bad && i < ni; i++)
        bad |= disc_gpu_copy_in(rt, g, din[i], in[i], in_bytes(i, ish[i])) != 0;
    if (!bad && no > 0 && nbytes[0] > 0) { /* a buffer a byte short */
        nbytes[0]--;
        int rc = M(_run_device)(pin, ish, pout, nbytes, dsh, err, sizeof err);
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
    Outs rref;
    void **rev = reversed(NI, in, ish);
    const void *const *use = (const void *const *)rev;
    if (!rev || graph_runs(in, &use, ish, out, oshape, &rref) != 0 ||
        device_run(NI, in, use, ish, NO, out, oshape, &rref) != 0)
        return 1;
    outs_free(&rref);
    for (int i = 0; i < NI; i++)
        free(rev[i]);
    free(rev);
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
