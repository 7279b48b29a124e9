/*
 * fuzz_onnx.c — the ONNX loader and importer on arbitrary bytes, through to
 * a verified graph and its shape analysis: each input either imports or is
 * refused with a message; nothing may crash, hang or leak. The bytes also
 * go the way of a file with large weights (frontends/onnx/weights.c: the
 * walk over the wire format that takes raw_data out of unpacking), with
 * every raw_data of 16 bytes or more counted large.
 */
#include "fuzz.h"
#include "frontends/onnx/internal.h"
#include "passes/passes.h"

#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    Diag d = {0};
    struct stat st = {0};
    Graph *w = NULL;
    if (onnx_weights_import(data, size, &st, "fuzz.onnx", "/nonexistent", &(OnnxOpts){.weights_min = 16}, &w, &d))
        graph_free(w);
    d = (Diag){0};
    Graph *g = onnx_import_buffer(data, size, "fuzz.onnx", "/nonexistent", NULL, &d);
    if (!g)
        return 0;
    if (graph_verify(g, &d)) {
        ShapeInfo *si = shape_analyze(g, NULL, &d);
        shape_info_free(si);
    }
    graph_free(g);
    return 0;
}
