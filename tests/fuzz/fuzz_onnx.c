/*
 * fuzz_onnx.c — the ONNX loader and importer on arbitrary bytes, through to
 * a verified graph and its shape analysis: each input either imports or is
 * refused with a message; nothing may crash, hang or leak.
 */
#include "fuzz.h"
#include "frontends/onnx/onnx.h"
#include "passes/passes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    Diag d = {0};
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
