/*
 * perfmap.c — the JIT's code named for perf(1). With DISC_PERF_MAP=1 in
 * the environment, every model the JIT compiles (or takes from the cache)
 * appends a line per function to /tmp/perf-<pid>.map, the file perf reads
 * for code it finds no ELF file for:
 *
 *     START SIZE NAME           (hex, hex, the rest of the line)
 *
 * so that `perf record` / `perf report` on a process running disc name
 * "disc_k5 loop: sigmoid mul [main_graph]" (the kernel and the model's
 * graph) where they showed an address
 * in [JIT] (oneDNN's own JIT kernels stay unnamed unless oneDNN is told
 * to write its map too: ONEDNN_JIT_PROFILE=2).
 *
 * The sizes come from the object files' symbol tables, read before the
 * JIT takes them (perf_map_collect); the addresses from the JIT once it
 * has linked them (perf_map_write), so only the symbols it exports: the
 * host flow and the kernels, not functions of internal linkage (the
 * skinny matmul's shared core: perf shows its samples as addresses).
 */
#include "codegen/perfmap.h"

#include "runtime/rt.h"

#include <llvm-c/Core.h>
#include <llvm-c/Object.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void perf_map_free(PerfMap *pm)
{
    for (int i = 0; i < pm->n; i++)
        free(pm->name[i]);
    free(pm->name);
    free(pm->size);
    *pm = (PerfMap){0};
}

static bool add(PerfMap *pm, const char *name, uint64_t size)
{
    if (pm->n == pm->cap) {
        int cap = pm->cap ? 2 * pm->cap : 64;
        char **nm = realloc(pm->name, (size_t)cap * sizeof *nm);
        if (!nm)
            return false;
        pm->name = nm;
        uint64_t *sz = realloc(pm->size, (size_t)cap * sizeof *sz);
        if (!sz)
            return false;
        pm->size = sz;
        pm->cap = cap;
    }
    if (!(pm->name[pm->n] = strdup(name)))
        return false;
    pm->size[pm->n++] = size;
    return true;
}

bool perf_map_collect(PerfMap *pm, LLVMMemoryBufferRef obj)
{
    char *err = NULL;
    LLVMBinaryRef bin = LLVMCreateBinary(obj, NULL, &err);
    if (!bin) {
        LLVMDisposeMessage(err);
        return false;
    }
    bool ok = true;
    LLVMSymbolIteratorRef it = LLVMObjectFileCopySymbolIterator(bin);
    for (; ok && it && !LLVMObjectFileIsSymbolIteratorAtEnd(bin, it); LLVMMoveToNextSymbol(it)) {
        const char *name = LLVMGetSymbolName(it);
        uint64_t size = LLVMGetSymbolSize(it);
        if (name && *name && size > 0)
            ok = add(pm, name, size);
    }
    if (it)
        LLVMDisposeSymbolIterator(it);
    LLVMDisposeBinary(bin);
    return ok;
}

int perf_map_write(const PerfMap *pm, LLVMOrcLLJITRef jit, const char *const *kdesc, int nkernels,
                   const char *model, char *path, size_t pathsize)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; /* one model's lines together */
    snprintf(path, pathsize, "/tmp/perf-%d.map", (int)getpid());
    pthread_mutex_lock(&mu);
    FILE *f = fopen(path, "a");
    int n = 0;
    for (int i = 0; f && i < pm->n; i++) {
        LLVMOrcJITTargetAddress at = 0;
        LLVMErrorRef err = LLVMOrcLLJITLookup(jit, &at, pm->name[i]);
        if (err) { /* internal linkage, or data the JIT does not export */
            LLVMConsumeError(err);
            continue;
        }
        int k = -1;
        const char *what = pm->name[i]; /* a kernel's description starts with its name */
        if (sscanf(what, "disc_k%d", &k) == 1 && k >= 0 && k < nkernels && kdesc && kdesc[k])
            what = kdesc[k];
        fprintf(f, "%llx %llx %s [%s]\n", (unsigned long long)at, (unsigned long long)pm->size[i], what,
                model ? model : "model");
        n++;
    }
    if (f && fclose(f) != 0)
        n = -1;
    pthread_mutex_unlock(&mu);
    return f ? n : -1;
}
