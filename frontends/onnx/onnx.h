/*
 * onnx.h — the ONNX importer: reads a ModelProto and builds a disc Graph.
 *
 *   Diag d = {0};
 *   Graph *g = onnx_import_file("model.onnx", NULL, &d);
 *   if (!g) { fprintf(stderr, "%s\n", d.msg); return 1; }
 *   graph_print(stdout, g, NULL);
 *   graph_free(g);
 *
 * Graph inputs keep their ONNX names; a dim_param becomes the symbol of that
 * name (equal names, equal symbols), an unnamed dim a fresh symbol. Large
 * initializers are referenced in place: the unpacked model and any mapped
 * external-data files live as long as the graph (graph_keep). Every ONNX op
 * lowers to core ops; an error names the file, the node and the op, and
 * unsupported ops are all listed in one message, one line each.
 */
#ifndef DISC_ONNX_H
#define DISC_ONNX_H

#include "ir/ir.h"

/* How a file's large weights were loaded (frontends/onnx/weights.c). */
typedef enum OnnxWeightsWay {
    WEIGHTS_UNPACKED, /* by protobuf-c with the rest: none large, or the
                         walk did not follow the file */
    WEIGHTS_COPIED,   /* taken out of unpacking, copied into aligned memory */
    WEIGHTS_STORED,   /* written to a new entry of the store, mapped */
    WEIGHTS_MAPPED,   /* mapped from the store's entry */
} OnnxWeightsWay;

typedef struct OnnxWeightsReport {
    OnnxWeightsWay way;
    int n;            /* weights taken out of unpacking */
    uint64_t bytes;   /* their bytes */
    char why[96];     /* why the store's entry was not used, if it was not */
    bool checked;     /* WEIGHTS_MAPPED: the entry was read whole to check
                         its hashes (false: its mark said it was found whole
                         before and has not changed since, ir/store.c) */
} OnnxWeightsReport;

typedef struct OnnxOpts {
    /* Each use of a dim_param name is its own symbol ("seq", "seq_2", ...)
     * instead of one symbol per name (doc/onnx.md, "Dim names"). */
    bool untie;
    /* onnx_import_file only: the directory where large weights are kept
     * aligned between processes (the JIT cache's, codegen/cache.h); NULL:
     * none, they are copied into memory at each load. */
    const char *store;
    size_t weights_min;  /* a raw_data this long is loaded so; 0: 64 KiB */
    int settle_ms;       /* a model file changed this recently is not
                            stored (its times may yet change in the same
                            tick); 0: 2000 */
    OnnxWeightsReport *report; /* filled when not NULL */
} OnnxOpts; /* NULL means all defaults */

/* Imports a model: NULL with a located message in d on error. */
Graph *onnx_import_file(const char *path, const OnnxOpts *o, Diag *d);
/* Whether the len bytes at p are a whole weights entry of the store
 * ("DISCWTS1": its index's checksum and every weight's hash; dcc cache
 * --verify). */
bool onnx_store_intact(const void *p, size_t len);
/* Same from memory; buf must stay valid only during the call.
 * dir_for_external_data may be NULL (the current directory). */
Graph *onnx_import_buffer(const void *buf, size_t len, const char *name_for_messages,
                          const char *dir_for_external_data, const OnnxOpts *o, Diag *d);

/* TensorProto files (test_data_set_N/input_0.pb): read into a Tensor
 * (owned; free with tensor_free). *name gets the tensor's name, malloc'd
 * (NULL if it has none); pass name == NULL to ignore it. */
bool onnx_read_tensor_file(const char *path, Tensor *t, char **name, Diag *d);
bool onnx_write_tensor_file(const char *path, const Tensor *t, const char *name, Diag *d);

#endif
