/*
 * fuzz_ir.c — the IR text parser on arbitrary text, then the verifier and
 * shape analysis of what parses.
 */
#include "fuzz.h"
#include "passes/passes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    Diag d = {0};
    Graph *g = graph_parse((const char *)data, size, "fuzz.disc", &d);
    if (!g)
        return 0;
    if (graph_verify(g, &d)) {
        ShapeInfo *si = shape_analyze(g, NULL, &d);
        shape_info_free(si);
    }
    graph_free(g);
    return 0;
}
