/*
 * perfmap.h — DISC_PERF_MAP=1: the JIT's functions named for perf(1) in
 * /tmp/perf-<pid>.map (perfmap.c).
 */
#ifndef DISC_PERFMAP_H
#define DISC_PERFMAP_H

#include <llvm-c/LLJIT.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The symbols of a model's object files with their sizes. */
typedef struct PerfMap {
    char **name;
    uint64_t *size;
    int n, cap;
} PerfMap;

/* Adds obj's symbols (before the JIT takes obj); false if it cannot be
 * read or memory runs out. */
bool perf_map_collect(PerfMap *pm, LLVMMemoryBufferRef obj);
/* Appends a line per symbol the JIT exports to /tmp/perf-<pid>.map (path
 * set to it), kernels disc_k<i> described by kdesc[i], every line tagged
 * with model; the lines written, or -1 if the file cannot be written. */
int perf_map_write(const PerfMap *pm, LLVMOrcLLJITRef jit, const char *const *kdesc, int nkernels,
                   const char *model, char *path, size_t pathsize);
void perf_map_free(PerfMap *pm);

#endif
