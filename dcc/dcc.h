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

/* The exit status for an error, from its kind (never its text): 1 for the
 * input (parse, model, unsupported, shape), 2 for a bad option value, 3
 * for the system (resource) or a bug (internal). */
int dcc_exit_code(const Diag *d);
/* model_load (frontends/model.h, the loader the C API uses): NULL with the
 * error printed and *rc its exit status (dcc.c). */
/* The store for large ONNX weights (model_load): the JIT cache's
 * directory from the environment, in buf; NULL when the cache is off. */
const char *dcc_store(char *buf, size_t size);
Graph *dcc_load(const char *path, int *rc);
bool dcc_ends_with(const char *s, const char *suffix);

int dcc_check(int argc, char **argv);
int dcc_run(int argc, char **argv);
int dcc_bench(int argc, char **argv);
int dcc_fuzz_shapes(int argc, char **argv);
int dcc_compile(int argc, char **argv);

#endif
