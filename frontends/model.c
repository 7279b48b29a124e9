/*
 * model.c — the one loader (model.h): picks the frontend by the file's
 * name and verifies what it built.
 */
#include "frontends/model.h"
#include "frontends/onnx/onnx.h"

#include <string.h>

bool model_is_onnx(const char *path)
{
    size_t n = strlen(path), m = strlen(".onnx");
    return n >= m && strcmp(path + n - m, ".onnx") == 0;
}

/* g verified, or NULL (g freed) with d set. A failed allocation that the
 * frontend went on from (a dim left less simplified) fails the load too. */
static Graph *verified(Graph *g, bool verify, Diag *d)
{
    if (g && ((verify && !graph_verify(g, d)) || diag_arena_failed(d, &g->arena))) {
        graph_free(g);
        return NULL;
    }
    return g;
}

Graph *model_load(const char *path, const char *store, OnnxWeightsReport *report, Diag *d)
{
    OnnxOpts o = {.store = store, .report = report};
    if (model_is_onnx(path)) /* the importer verifies what it built */
        return verified(onnx_import_file(path, &o, d), false, d);
    return verified(graph_parse_file(path, d), true, d);
}

Graph *model_load_untied(const char *path, const char *store, OnnxWeightsReport *report, Diag *d)
{
    OnnxOpts o = {.untie = true, .store = store, .report = report};
    return verified(onnx_import_file(path, &o, d), false, d);
}

Graph *model_load_text(const char *text, size_t len, const char *name, Diag *d)
{
    return verified(graph_parse(text, len, name, d), true, d);
}
