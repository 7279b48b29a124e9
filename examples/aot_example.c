/*
 * aot_example.c — a program that runs a model compiled ahead of time, with
 * nothing of the compiler in it: only the object dcc wrote and the runtime.
 *
 *     dcc compile tests/models/bert_encoder/model.onnx -o bert.o \
 *         --emit-header bert.h --name bert
 *     cc aot_example.c bert.o $(pkg-config --cflags --libs disc-rt) -o aot_example
 *     ./aot_example
 *
 * The model (a 2-layer BERT-style encoder) was compiled once; the program
 * runs it at three shapes (batch x sequence 1x8, 2x13, 3x197), then with
 * an attention mask whose length differs from the ids', which the model's
 * constraints reject with a message naming the input and the dim.
 */
#include "bert.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int run(int64_t batch, int64_t seq, int64_t mask_seq)
{
    int64_t *ids = malloc((size_t)(batch * seq) * sizeof *ids);
    int64_t *mask = malloc((size_t)(batch * mask_seq) * sizeof *mask);
    if (!ids || !mask)
        return 1;
    for (int64_t i = 0; i < batch * seq; i++)
        ids[i] = (i * 7 + 3) % 100;
    for (int64_t i = 0; i < batch * mask_seq; i++)
        mask[i] = i % mask_seq < mask_seq - 2 ? 1 : 0; /* the last two positions are padding */
    int64_t ids_shape[2] = {batch, seq}, mask_shape[2] = {batch, mask_seq}, out_shape[3];
    float *hidden = NULL;
    char err[512];
    int rc = bert_run(ids, ids_shape, mask, mask_shape, &hidden, out_shape, err, sizeof err);
    if (rc == BERT_OK) {
        double sum = 0, sq = 0;
        int64_t n = out_shape[0] * out_shape[1] * out_shape[2];
        for (int64_t i = 0; i < n; i++) {
            sum += hidden[i];
            sq += (double)hidden[i] * hidden[i];
        }
        printf("input_ids [%lld, %lld] -> last_hidden_state [%lld, %lld, %lld]: first %.5f, mean %.5f, rms %.5f\n",
               (long long)batch, (long long)seq, (long long)out_shape[0], (long long)out_shape[1],
               (long long)out_shape[2], hidden[0], sum / (double)n, sqrt(sq / (double)n));
        free(hidden);
    } else {
        printf("input_ids [%lld, %lld], attention_mask [%lld, %lld]: status %d: %s\n", (long long)batch,
               (long long)seq, (long long)batch, (long long)mask_seq, rc, err);
    }
    free(ids);
    free(mask);
    return rc;
}

int main(void)
{
    static const int64_t shapes[3][2] = {{1, 8}, {2, 13}, {3, 197}};
    for (int i = 0; i < 3; i++)
        if (run(shapes[i][0], shapes[i][1], shapes[i][1]) != BERT_OK)
            return 1;
    /* a mask one position shorter than the ids, and an empty batch (the
     * model's symbols are >= 1): rejected, nothing runs */
    return run(2, 13, 12) == BERT_EINPUT && run(0, 8, 8) == BERT_EINPUT ? 0 : 1;
}
