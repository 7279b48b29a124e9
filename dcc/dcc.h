/*
 * dcc.h — what the files of the command-line compiler share: the exit
 * codes and one entry point per command kept outside dcc.c.
 *
 *   dcc.c    main, the dispatch, `dcc emit`
 *   check.c  `dcc check` (ONNX backend-test directories) and `dcc run`
 *   compile.c `dcc compile`: ahead of time into an object
 *
 * Each entry point takes the arguments after the command name and returns
 * the process exit status.
 */
#ifndef DISC_DCC_H
#define DISC_DCC_H

enum { EXIT_INPUT = 1, EXIT_USAGE = 2, EXIT_SYSTEM = 3 };

#include "ir/ir.h"
#include "codegen/codegen.h"
#include "frontends/onnx/onnx.h"

/* The exit status for an error, from its kind (never its text): 1 for the
 * input (parse, model, unsupported, shape), 2 for a bad option value, 3
 * for the system (resource) or a bug (internal). */
int dcc_exit_code(const Diag *d);
/* model_load (frontends/model.h, the loader the C API uses): NULL with the
 * error printed and *rc its exit status (dcc.c). */
/* The store for large ONNX weights (model_load): the JIT cache's
 * directory co names (cache_dir: --cache-dir, else the environment's), in
 * buf; NULL when the cache is off (--no-cache, DISC_CACHE=0). */
const char *dcc_store(const CgOpts *co, char *buf, size_t size);
/* With -v: how a model's large weights were loaded (OnnxWeightsReport). */
void dcc_weights_note(const char *path, const OnnxWeightsReport *r);
/* model_load, with the store co names (NULL: the environment's); prints
 * the error and sets *rc on failure, the weights' note with co->verbose. */
Graph *dcc_load(const char *path, const CgOpts *co, int *rc);
bool dcc_ends_with(const char *s, const char *suffix);

int dcc_check(int argc, char **argv);
int dcc_run(int argc, char **argv);
int dcc_bench(int argc, char **argv);
int dcc_fuzz_shapes(int argc, char **argv);
int dcc_compile(int argc, char **argv);
int dcc_cache(int argc, char **argv);

#endif
