/*
 * cache.h — the on-disk cache of JIT-compiled code (cache.c).
 *
 * A compile of the cpu-jit target (exec.c) ends in one object file in
 * memory, which ORC LLJIT links into the process. The cache keeps that
 * object, with the few counts and kernel descriptions the compiled model
 * reports, in one file per key under the cache directory, so that a later
 * process that compiles the same model for the same CPU with the same
 * options links the object instead of generating and optimising it.
 *
 * The key (cache_key) is a hash of everything the object depends on: the
 * graph as given to the compiler (its IR text with large constants elided,
 * and every constant's bytes), the shape hints, the options that change
 * code (optimisation level, unfused), the target CPU's name and feature
 * string (and this machine's, which the JIT's code generator starts
 * from), the skinny-matmul row limit the runtime reports, whether glibc's
 * vector math is in use, and disc's version and build id (a hash of the
 * compiler's sources, made by the build: a changed compiler never reads an
 * older one's code).
 *
 * A file owned by another user is not read (the directory may be one
 * others can write to). A file is written to a temporary name in the
 * directory and renamed into place, so processes compiling the same model at once each leave a
 * complete file and a reader never sees a partial one. A file carries a
 * checksum of its contents and the key's text; a file that is truncated,
 * corrupt or written for another key is ignored (and replaced by the
 * recompile), never trusted.
 *
 * The directory: CgOpts.cache_dir, else $DISC_CACHE_DIR, else
 * $HOME/.cache/disc/jit (created when missing). DISC_CACHE=0 or
 * CgOpts.no_cache turn the cache off. The same directory holds the weights
 * of large ONNX models laid out aligned (KEY.wts, frontends/onnx/weights.c).
 * A store keeps the directory under STORE_CAP (ir/store.h) by removing the least
 * recently used files of either kind (a hit renews a file's mtime); the
 * directory may be deleted at any time.
 */
#ifndef DISC_CACHE_H
#define DISC_CACHE_H

#include "codegen/codegen.h"
#include "ir/store.h" /* store_hash: keys and checksums */

#include <stddef.h>
#include <stdint.h>

typedef struct CacheKey {
    char name[40];     /* 32 hex digits: the file's name without ".jit" */
    char *text;        /* what the key covers besides the graph, checked on load */
} CacheKey;

/* What a compiled model keeps in the cache: its objects (one per part
 * the JIT compiled on a thread), counts and kernel descriptions. */
enum { CACHE_MAX_OBJECTS = CG_MAX_OBJECTS };
typedef struct CacheEntry {
    int nkernels, nlaunch, nlibrary, nepilogue, nskinny, nsplit;
    char **kdesc;      /* nkernels descriptions (entries may be NULL) */
    int nobj;
    const void *obj[CACHE_MAX_OBJECTS]; /* the object files */
    size_t objsize[CACHE_MAX_OBJECTS];
    void *mem;         /* the file's bytes, after cache_load: obj points into it */
} CacheEntry;

/* The key of compiling g (before any pass) with so and o for cpu. False
 * only when out of memory. */
bool cache_key(const Graph *g, const ShapeOpts *so, const CgOpts *o, const CpuTarget *cpu, CacheKey *k, Diag *d);
void cache_key_free(CacheKey *k);

/* Whether the len bytes at p are a whole KEY.jit file (its magic, size and
 * checksum; dcc cache --verify). */
bool cache_file_intact(const void *p, size_t len);

/* The cache directory for o (see above) into buf; false when the cache is
 * off or no directory can be named. */
bool cache_dir(const CgOpts *o, char *buf, size_t size);

/* Reads DIR/KEY.jit. True with e filled when the file is there and intact;
 * false when it is absent (why = "") or unusable (why says how: truncated,
 * checksum, another key). */
bool cache_load(const char *dir, const CacheKey *k, CacheEntry *e, char *why, size_t whysize);
/* Writes e as DIR/KEY.jit, atomically (a temporary file renamed); false
 * with a message in d when it cannot. */
bool cache_store(const char *dir, const CacheKey *k, const CacheEntry *e, Diag *d);
/* Frees what cache_load gave e. */
void cache_entry_free(CacheEntry *e);
/* The bytes of e's objects. */
size_t cache_code_bytes(const CacheEntry *e);

#endif
