/*
 * demo.c — what `make demo` shows: one compile of a BERT-style encoder with
 * dynamic batch and sequence, then runs at several shapes, with times.
 *
 *     demo MODEL.onnx
 *
 * The model's inputs are input_ids and attention_mask, both i64[batch, seq].
 */
#include <disc.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.onnx\n", argv[0]);
        return 2;
    }
    double t0 = now();
    disc_model *m = disc_load(argv[1]);
    if (!m) {
        fprintf(stderr, "%s\n", disc_last_error());
        return 1;
    }
    disc_compiled *c = disc_compile(m, NULL);
    if (!c) {
        fprintf(stderr, "%s\n", disc_last_error());
        return 1;
    }
    double t1 = now();
    printf("disc %s: compiled %s once in %.0f ms, for every shape\n", disc_version(), argv[1], 1e3 * (t1 - t0));
    printf("  %d ops in the imported graph -> %d kernel launches per run (fusion)\n", disc_model_op_count(m),
           disc_compiled_kernel_count(c));
    for (int i = 0; i < disc_model_num_inputs(m); i++) {
        char d0[32], d1[32];
        disc_model_input_dim(m, i, 0, d0, sizeof d0);
        disc_model_input_dim(m, i, 1, d1, sizeof d1);
        printf("  input %s: i64[%s, %s]\n", disc_model_input_name(m, i), d0, d1);
    }
    static const int64_t shapes[][2] = {{1, 8}, {2, 13}, {4, 64}, {1, 197}, {8, 33}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        int64_t b = shapes[k][0], s = shapes[k][1];
        int64_t *ids = malloc((size_t)(b * s) * sizeof *ids), *mask = malloc((size_t)(b * s) * sizeof *mask);
        for (int64_t i = 0; i < b * s; i++) {
            ids[i] = 1 + (i * 31) % 97;
            mask[i] = 1;
        }
        disc_tensor in[2] = {{DISC_I64, 2, {b, s}, ids, (size_t)(b * s) * 8, 0},
                             {DISC_I64, 2, {b, s}, mask, (size_t)(b * s) * 8, 0}};
        disc_tensor out = {0};
        disc_run(c, in, 2, &out, 1); /* warm */
        disc_tensor_free(&out);
        double r0 = now();
        disc_status st = disc_run(c, in, 2, &out, 1);
        double r1 = now();
        if (st != DISC_OK) {
            fprintf(stderr, "%s\n", disc_last_error());
            return 1;
        }
        size_t n = out.nbytes / 4;
        double sum = 0, sq = 0;
        for (size_t i = 0; i < n; i++) {
            double v = ((float *)out.data)[i];
            sum += v;
            sq += v * v;
        }
        double mean = sum / (double)n;
        printf("  run batch %2lld seq %3lld: output f32[%lld, %lld, %lld], mean %+.4f, std %.4f, %.2f ms\n",
               (long long)b, (long long)s, (long long)out.shape[0], (long long)out.shape[1],
               (long long)out.shape[2], mean, sqrt(sq / (double)n - mean * mean), 1e3 * (r1 - r0));
        disc_tensor_free(&out);
        free(ids);
        free(mask);
    }
    /* a shape the model does not accept: a documented error, not a crash */
    int64_t ids[6] = {1, 2, 3, 4, 5, 6}, mask[4] = {1, 1, 1, 1};
    disc_tensor bad[2] = {{DISC_I64, 2, {2, 3}, ids, sizeof ids, 0}, {DISC_I64, 2, {2, 2}, mask, sizeof mask, 0}};
    disc_tensor out = {0};
    if (disc_run(c, bad, 2, &out, 1) != DISC_OK)
        printf("  run with mismatched inputs: %s\n", disc_last_error());
    disc_compiled_free(c);
    disc_model_free(m);
    return 0;
}
