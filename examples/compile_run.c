/*
 * compile_run.c — load an ONNX model, compile it once, run it at three
 * input shapes.
 *
 *     compile_run MODEL.onnx [backend]
 *
 * Every input gets the shape its symbolic dims give for each of three
 * bindings (the symbols set to 1, then 3, then 13), filled with small
 * values; the program prints the shapes it ran and a checksum of each
 * output. A symbol the program cannot bind this way (a dim that is an
 * expression, such as 2*S) is reported and the run stops.
 */
#include <disc.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t dtype_size(disc_dtype t)
{
    static const size_t sizes[] = {4, 2, 2, 8, 1, 1, 4, 8, 1};
    return (int)t >= 0 && (int)t < 9 ? sizes[t] : 0;
}

/* A dim's value for this round: a number stays, a symbol becomes `sym`. */
static int64_t dim_value(const char *text, int64_t sym)
{
    char *end;
    long long v = strtoll(text, &end, 10);
    return *end == 0 ? v : sym;
}

static void fill(disc_tensor *t)
{
    size_t n = t->nbytes / dtype_size(t->dtype);
    for (size_t i = 0; i < n; i++) {
        switch (t->dtype) {
        case DISC_F32: ((float *)t->data)[i] = (float)((i * 7) % 11) / 11.0f - 0.5f; break;
        case DISC_I64: ((int64_t *)t->data)[i] = (int64_t)(i % 2); break;
        case DISC_I32: ((int32_t *)t->data)[i] = (int32_t)(i % 2); break;
        default: ((unsigned char *)t->data)[i * dtype_size(t->dtype)] = 1; break;
        }
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.onnx [backend]\n", argv[0]);
        return 2;
    }
    disc_model *m = disc_load(argv[1]);
    if (!m) {
        fprintf(stderr, "%s\n", disc_last_error());
        return 1;
    }
    disc_options o = disc_default_options();
    if (argc > 2)
        o.backend = argv[2];
    disc_compiled *c = disc_compile(m, &o);
    if (!c) {
        fprintf(stderr, "%s\n", disc_last_error());
        disc_model_free(m);
        return 1;
    }
    printf("compiled %s once (backend %s, %d kernels)\n", argv[1], o.backend, disc_compiled_kernel_count(c));
    int nin = disc_model_num_inputs(m), nout = disc_model_num_outputs(m), rc = 0;
    static const int64_t rounds[] = {1, 3, 13};
    for (int r = 0; r < 3 && rc == 0; r++) {
        disc_tensor in[16] = {{0}}, out[16] = {{0}};
        printf("run %d:", r + 1);
        for (int i = 0; i < nin && i < 16; i++) {
            in[i].dtype = disc_model_input_dtype(m, i);
            in[i].rank = disc_model_input_rank(m, i);
            size_t n = 1;
            printf(" %s[", disc_model_input_name(m, i));
            for (int k = 0; k < in[i].rank; k++) {
                char text[64];
                disc_model_input_dim(m, i, k, text, sizeof text);
                in[i].shape[k] = dim_value(text, rounds[r]);
                n *= (size_t)in[i].shape[k];
                printf("%s%lld", k ? ", " : "", (long long)in[i].shape[k]);
            }
            printf("]");
            in[i].nbytes = n * dtype_size(in[i].dtype);
            in[i].data = calloc(1, in[i].nbytes + 1);
            fill(&in[i]);
        }
        printf("\n");
        if (disc_run(c, in, nin, out, nout) != DISC_OK) {
            fprintf(stderr, "%s\n", disc_last_error());
            rc = 1;
        }
        for (int j = 0; rc == 0 && j < nout; j++) {
            double sum = 0;
            size_t n = out[j].nbytes / dtype_size(out[j].dtype);
            for (size_t i = 0; i < n && out[j].dtype == DISC_F32; i++)
                sum += ((float *)out[j].data)[i];
            printf("  %s: rank %d, %zu elements, sum %.6g\n", disc_model_output_name(m, j), out[j].rank, n, sum);
            disc_tensor_free(&out[j]);
        }
        for (int i = 0; i < nin; i++)
            free(in[i].data);
    }
    disc_compiled_free(c);
    disc_model_free(m);
    return rc;
}
