/*
 * model.h — the one loader: a model file of any format as a verified
 * graph, for the C API (api/disc.c) and dcc alike.
 *
 *   Diag d = {0};
 *   Graph *g = model_load("bert.onnx", &d);     // or "block.disc"
 *   if (!g) { fprintf(stderr, "%s\n", d.msg); return 1; }
 *
 * The format follows the name: ".onnx" is an ONNX model (frontends/onnx),
 * anything else disc IR text (ir/parse.c). The graph is verified; an error
 * is located (file:line:col for IR text, the node for ONNX) and has its
 * kind (Diag.kind).
 */
#ifndef DISC_MODEL_H
#define DISC_MODEL_H

#include "ir/ir.h"
#include "frontends/onnx/onnx.h"

/* Whether path names an ONNX model (ends in ".onnx"). */
bool model_is_onnx(const char *path);
/* Imports or parses path and verifies it; NULL with d set on error.
 * store: the directory where an ONNX model's large weights are kept
 * aligned between loads (OnnxOpts.store; the JIT cache's, cache_dir), or
 * NULL; report (may be NULL): how they were loaded. */
Graph *model_load(const char *path, const char *store, OnnxWeightsReport *report, Diag *d);
/* The ONNX model at path, imported again with each use of a dim_param name
 * its own symbol (OnnxOpts.untie). A graph whose tied_dims is not 0 takes
 * ONNX's promise that equal names are equal sizes; inputs that break it
 * run on this one instead (doc/onnx.md, "Dim names"). */
Graph *model_load_untied(const char *path, const char *store, OnnxWeightsReport *report, Diag *d);
/* IR text from memory (len bytes; name is used in messages), verified. */
Graph *model_load_text(const char *text, size_t len, const char *name, Diag *d);

#endif
