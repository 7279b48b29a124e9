/*
 * fuzz_shapes.c — the run-time input checks of a compiled model (the
 * public API, disc_run) against random shapes, dtypes and buffer sizes.
 * One model (tests/models/bert_encoder: two inputs sharing symbolic dims)
 * is compiled once for the cpu backend and once for the interpreter; each
 * input's bytes choose the number of inputs and per input a dtype, a rank,
 * dims (0 to 16, sometimes 2^40 or negative) and whether the buffer is as
 * large as the shape says. (At 37 x 37 tokens the interpreter's run, under
 * the sanitizers, took up to 30 s on a loaded machine: libFuzzer's
 * timeout.) A run either succeeds or is refused with a
 * status and a message; it must never crash, and both backends must agree
 * on which runs they accept and on the output's shape.
 */
#include "fuzz.h"
#include "disc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef DISC_SOURCE_DIR
#define DISC_SOURCE_DIR "."
#endif

static disc_model *model;
static disc_compiled *cpu, *ref;

static void setup(void)
{
    if (cpu)
        return;
    model = disc_load(DISC_SOURCE_DIR "/tests/models/bert_encoder/model.onnx");
    disc_options o = disc_default_options();
    o.threads = 1;
    cpu = model ? disc_compile(model, &o) : NULL;
    o.backend = "interp";
    ref = model ? disc_compile(model, &o) : NULL;
    if (!cpu || !ref) {
        fprintf(stderr, "fuzz_shapes: cannot compile the model: %s\n", disc_last_error());
        abort();
    }
}

static const disc_dtype dtypes[] = {DISC_I64, DISC_I32, DISC_F32, DISC_BOOL};
static const size_t esize[] = {8, 4, 4, 1};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup();
    size_t at = 0;
#define NEXT() (at < size ? data[at++] : 0)
    int n = NEXT() % 4; /* 0..3 inputs: the model takes 2 */
    disc_tensor in[3] = {0};
    void *bufs[3] = {0};
    for (int i = 0; i < n; i++) {
        uint8_t c = NEXT();
        int t = c & 0x80 ? c % 4 : 0;
        in[i].dtype = dtypes[t];
        in[i].rank = (NEXT() % 4) + (c & 0x40 ? 0 : 1);
        int64_t numel = 1;
        for (int k = 0; k < in[i].rank; k++) {
            uint8_t v = NEXT();
            in[i].shape[k] = v == 255 ? (int64_t)1 << 40 : v == 254 ? -3 : v % 17;
            numel = numel < 0 || in[i].shape[k] < 0 || numel > 1000000 ? -1 : numel * in[i].shape[k];
        }
        size_t bytes = numel >= 0 && numel <= 1000000 ? (size_t)numel * esize[t] : 64;
        if (c & 0x20) /* a buffer shorter than the shape says */
            bytes = bytes / 2;
        bufs[i] = calloc(1, bytes ? bytes : 1);
        in[i].data = bufs[i];
        in[i].nbytes = bytes;
    }
    disc_tensor out[2] = {{0}}, want[2] = {{0}};
    disc_status s = disc_run(cpu, in, n, out, 1);
    char msg[256];
    snprintf(msg, sizeof msg, "%s", s == DISC_OK ? "" : disc_last_error());
    disc_status r = disc_run(ref, in, n, want, 1);
    if ((s == DISC_OK) != (r == DISC_OK)) {
        fprintf(stderr, "fuzz_shapes: cpu status %d (%s), interpreter %d (%s)\n", s, msg, r,
                r == DISC_OK ? "" : disc_last_error());
        abort();
    }
    if (s == DISC_OK && (out[0].rank != want[0].rank ||
                         memcmp(out[0].shape, want[0].shape, sizeof(int64_t) * (size_t)out[0].rank))) {
        fprintf(stderr, "fuzz_shapes: the output's shape differs from the interpreter's\n");
        abort();
    }
    disc_tensor_free(&out[0]);
    disc_tensor_free(&want[0]);
    for (int i = 0; i < n; i++)
        free(bufs[i]);
    return 0;
}
