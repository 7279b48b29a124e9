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

/* g verified, or NULL (g freed) with d set. */
static Graph *verified(Graph *g, Diag *d)
{
    if (g && !graph_verify(g, d)) {
        graph_free(g);
        return NULL;
    }
    return g;
}

Graph *model_load(const char *path, Diag *d)
{
    if (model_is_onnx(path))
        return onnx_import_file(path, NULL, d); /* verifies what it built */
    return verified(graph_parse_file(path, d), d);
}

Graph *model_load_text(const char *text, size_t len, const char *name, Diag *d)
{
    return verified(graph_parse(text, len, name, d), d);
}
