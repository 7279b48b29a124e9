/*
 * store.h — what the on-disk caches share (store.c): the hash, making and
 * trimming their directory. The caches themselves: codegen/cache.h
 * (compiled code) and frontends/onnx/weights.c (weights laid out aligned).
 */
#ifndef DISC_STORE_H
#define DISC_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* Little-endian u64 and u32 at any address (the files' integers). */
static inline uint64_t store_rd64(const void *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline uint32_t store_rd32(const void *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* xxHash64 of n bytes with seed (keys, checksums, weights). */
uint64_t store_hash(const void *p, size_t n, uint64_t seed);
/* out[i] = store_hash(p[i], n[i], n[i]) for count buffers (a NULL p[i]
 * hashes as empty), on up to four threads when there are many bytes. */
void store_hash_many(const void *const *p, const size_t *n, uint64_t *out, int count);

/* What the directory may hold, code and weights together (a model's
 * weights may be there three times: as loaded, and packed in two layouts). */
#define STORE_CAP ((int64_t)8 << 30)

/* mkdir -p dir; true when it is a directory afterwards. */
bool store_mkdirs(const char *dir);
/* DIR/KEY.EXT (ext "jit" or "wts"), KEY the 32 hex digits of key; with
 * ext NULL the temporary name mkstemp makes a file of that key from
 * (DIR/.KEY.XXXXXX, which store_trim knows). */
void store_path(const char *dir, const uint64_t key[2], const char *ext, char *buf, size_t size);
/* The temporary file tmp made complete: readable by whoever may read the
 * directory, and renamed to path (replacing what was there, which
 * processes that have it open or mapped keep). False (tmp removed) when
 * it cannot be. */
bool store_publish(const char *tmp, const char *path);
/* path mapped read-only and shared, *len its bytes, when it is this
 * user's (the directory may be one others can write to) and at least
 * min bytes long; else NULL with *why: "no entry", "unreadable",
 * "truncated", "owned by another user", "cannot be mapped". *st (when
 * not NULL) gets the file's status as it was opened. */
void *store_map(const char *path, size_t min, size_t *len, const char **why, struct stat *st);

/* Marks (store.c has why): whether the .wts entry at path, whose status
 * is st, was found whole before and has not changed since (its mark
 * KEY.chk holds st's identity); marking it after its hashes were checked,
 * a check that began at `began` (store_now) and saw `seen`, or, with seen
 * NULL, after this process wrote it whole (the mark made once the file
 * clock's tick has passed: at a later store operation, or at exit); a use
 * of it (renews its mark's mtime, or the entry's where it has none). */
struct timespec store_now(void);
/* A file's identity as the stores record it: device, inode, size, mtime
 * (s, ns), ctime (s, ns). */
enum { STORE_IDENT = 7 };
void store_identity(const struct stat *st, uint64_t id[STORE_IDENT]);
bool store_marked(const char *path, const struct stat *st);
void store_mark(const char *path, const struct stat *seen, const struct timespec *began);
void store_used(const char *path);

/* What a file of the directory is, by its name: KEY.jit, KEY.wts, KEY.chk
 * (a .wts's mark), a temporary .KEY.XXXXXX, or none of these. */
typedef enum StoreKind { STORE_JIT, STORE_WTS, STORE_CHK, STORE_TMP, STORE_OTHER } StoreKind;
StoreKind store_kind(const char *name);

/* Keeps dir's KEY.jit and KEY.wts files (KEY: 32 hex digits) under
 * cap_bytes: past it, removes the least recently used (oldest mtime, which
 * a hit renews; a .wts's mark's where that is later) down to three
 * quarters of it, each with its mark. Removes temporary files an
 * interrupted write left, and marks whose entry is gone, more than an
 * hour ago. Called after writing
 * `written` bytes; looks at the directory at most once a minute (the time
 * of dir/trim.stamp) unless that was a sixteenth of the cap or more. Best
 * effort: another process may be trimming too. */
void store_trim(const char *dir, int64_t cap_bytes, int64_t written);

/* Bytes derived from others whose hashes are known (weights side by
 * side, a packed copy of a weight), kept in dir as KEY.wts, KEY the 32 hex
 * digits of key (what the bytes are derived from, as the caller describes
 * it): mapped read-only and shared when the file is there, intact (its
 * hash checked) and this user's; else made there by fill(dst, ctx), which
 * writes every byte (false: it could not, and nothing is kept), and
 * mapped. NULL where neither can be done (the caller makes the bytes in
 * memory); else the bytes, their store_hash(bytes, n, n) in *hash, and
 * *keep to release with store_release (graph_keep). */
const void *store_derived(const char *dir, const uint64_t key[2], size_t bytes, bool (*fill)(void *dst, void *ctx),
                          void *ctx, uint64_t *hash, void **keep);
void store_release(void *keep);
/* Whether the len bytes at p are a whole derived entry ("DISCDRV1": its
 * size and hash; dcc cache --verify). */
bool store_derived_intact(const void *p, size_t len);

#endif
