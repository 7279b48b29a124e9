/*
 * store.c — what the on-disk caches share: the hash their keys and
 * checksums use, hashing many buffers on threads, making their directory,
 * and keeping it under its cap.
 *
 * Two kinds of file live in one directory (codegen/cache.h names it):
 * KEY.jit, compiled code (codegen/cache.c), and KEY.wts, weights: a
 * model's large weights laid out aligned ("DISCWTS1",
 * frontends/onnx/weights.c), or bytes derived from weights whose hashes
 * are known ("DISCDRV1", store_derived below: passes/hfuse.c's weights
 * side by side, runtime/dnnl.c's packed copies). All are written to a
 * temporary name (".KEY.XXXXXX") and renamed into place, and a hit renews
 * a file's mtime (for a .wts with a mark, the mark's: below), so trimming
 * by mtime removes the least recently used. KEY.chk is a .wts's mark.
 */
#define _GNU_SOURCE /* sched_getaffinity */
#include "ir/store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- xxHash64 (Yann Collet's, as specified in xxhash.h) ------------------ */

#define P1 0x9E3779B185EBCA87ull
#define P2 0xC2B2AE3D27D4EB4Full
#define P3 0x165667B19E3779F9ull
#define P4 0x85EBCA77C2B2AE63ull
#define P5 0x27D4EB2F165667C5ull

static uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static uint64_t xround(uint64_t acc, uint64_t in) { return rotl(acc + in * P2, 31) * P1; }
static uint64_t xmerge(uint64_t acc, uint64_t v) { return (acc ^ xround(0, v)) * P1 + P4; }

uint64_t store_hash(const void *data, size_t n, uint64_t seed)
{
    const unsigned char *p = data, *end = p + n;
    uint64_t h;
    if (n >= 32) {
        uint64_t v1 = seed + P1 + P2, v2 = seed + P2, v3 = seed, v4 = seed - P1;
        for (; p + 32 <= end; p += 32) {
            v1 = xround(v1, store_rd64(p));
            v2 = xround(v2, store_rd64(p + 8));
            v3 = xround(v3, store_rd64(p + 16));
            v4 = xround(v4, store_rd64(p + 24));
        }
        h = rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18);
        h = xmerge(xmerge(xmerge(xmerge(h, v1), v2), v3), v4);
    } else {
        h = seed + P5;
    }
    h += (uint64_t)n;
    for (; p + 8 <= end; p += 8)
        h = rotl(h ^ xround(0, store_rd64(p)), 27) * P1 + P4;
    if (p + 4 <= end) {
        h = rotl(h ^ (uint64_t)store_rd32(p) * P1, 23) * P2 + P3;
        p += 4;
    }
    for (; p < end; p++)
        h = rotl(h ^ *p * P5, 11) * P1;
    h ^= h >> 33;
    h *= P2;
    h ^= h >> 29;
    h *= P3;
    return h ^ (h >> 32);
}

/* ---- many buffers at once -------------------------------------------------- */

typedef struct HashJob {
    const void *const *p;
    const size_t *n;
    uint64_t *out;
    int begin, end;
} HashJob;

static void *hash_range(void *arg)
{
    HashJob *j = arg;
    for (int i = j->begin; i < j->end; i++)
        j->out[i] = store_hash(j->p[i] ? j->p[i] : "", j->p[i] ? j->n[i] : 0, j->n[i]);
    return NULL;
}

static int cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return 1;
    int n = CPU_COUNT(&set);
    return n > 0 ? n : 1;
}

void store_hash_many(const void *const *p, const size_t *n, uint64_t *out, int count)
{
    uint64_t total = 0;
    for (int i = 0; i < count; i++)
        total += p[i] ? n[i] : 0;
    enum { MAXT = 4 };
    /* memory-bound: a thread per core up to four, and one for little */
    int nt = total < (16u << 20) ? 1 : cpus() < MAXT ? cpus() : MAXT;
    HashJob job[MAXT];
    pthread_t tid[MAXT];
    bool started[MAXT] = {false};
    uint64_t acc = 0;
    int at = 0;
    for (int t = 0; t < nt; t++) { /* ranges of about total / nt bytes */
        job[t] = (HashJob){p, n, out, at, at};
        uint64_t want = total / (uint64_t)nt * (uint64_t)(t + 1);
        while (job[t].end < count && (t == nt - 1 || acc < want)) {
            int i = job[t].end++;
            acc += p[i] ? n[i] : 0;
        }
        at = job[t].end;
        if (t > 0)
            started[t] = pthread_create(&tid[t], NULL, hash_range, &job[t]) == 0;
    }
    hash_range(&job[0]);
    for (int t = 1; t < nt; t++)
        if (started[t])
            pthread_join(tid[t], NULL);
        else
            hash_range(&job[t]);
}

/* ---- the directory ---------------------------------------------------------- */

/* mkdir -p */
bool store_mkdirs(const char *dir)
{
    char p[4096];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof p)
        return false;
    memcpy(p, dir, n + 1);
    for (size_t i = 1; i <= n; i++)
        if (p[i] == '/' || p[i] == 0) {
            char c = p[i];
            p[i] = 0;
            if (mkdir(p, 0755) != 0 && errno != EEXIST)
                return false;
            p[i] = c;
        }
    struct stat st;
    return stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
}

typedef struct Old {
    time_t mtime;
    int64_t size;
    char name[64];
} Old;

static int old_cmp(const void *a, const void *b)
{
    const Old *x = a, *y = b;
    return (x->mtime > y->mtime) - (x->mtime < y->mtime);
}

StoreKind store_kind(const char *name)
{
    size_t n = strlen(name);
    if (n == 36 && name[32] == '.') {
        if (!strcmp(name + 33, "jit"))
            return STORE_JIT;
        if (!strcmp(name + 33, "wts"))
            return STORE_WTS;
        if (!strcmp(name + 33, "chk"))
            return STORE_CHK;
    }
    return name[0] == '.' && n == 40 && name[33] == '.' ? STORE_TMP : STORE_OTHER;
}

void store_trim(const char *dir, int64_t cap_bytes, int64_t written)
{
    /* a directory of 80,000 files (a test suite's) took 150 ms to list
     * and stat: at most once a minute, unless the write was large */
    char stamp[4200];
    snprintf(stamp, sizeof stamp, "%s/trim.stamp", dir);
    struct stat ss;
    time_t now = time(NULL);
    if (written < cap_bytes / 16 && stat(stamp, &ss) == 0 && now - ss.st_mtime < 60 && now >= ss.st_mtime)
        return;
    int sfd = open(stamp, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (sfd >= 0) {
        futimens(sfd, NULL);
        close(sfd);
    }
    DIR *dp = opendir(dir);
    if (!dp)
        return;
    Old *v = NULL;
    size_t n = 0, cap = 0;
    int64_t total = 0;
    struct dirent *de;
    char path[4200];
    while ((de = readdir(dp))) {
        size_t len = strlen(de->d_name);
        StoreKind k = store_kind(de->d_name);
        bool wts = k == STORE_WTS, jit = wts || k == STORE_JIT, chk = k == STORE_CHK, tmp = k == STORE_TMP;
        struct stat st, ms;
        if ((!jit && !tmp && !chk) || fstatat(dirfd(dp), de->d_name, &st, 0) != 0)
            continue;
        char sib[40];
        memcpy(sib, de->d_name, 33);
        memcpy(sib + 33, chk ? "wts" : "chk", 4);
        if (tmp || chk) { /* an interrupted write's, or a mark whose entry is gone */
            if (now - st.st_mtime > 3600 && (tmp || fstatat(dirfd(dp), sib, &ms, 0) != 0))
                unlinkat(dirfd(dp), de->d_name, 0);
            continue;
        }
        if (wts && fstatat(dirfd(dp), sib, &ms, 0) == 0 && ms.st_mtime > st.st_mtime)
            st.st_mtime = ms.st_mtime; /* used since it was marked */
        if (n == cap) {
            Old *w = realloc(v, (cap = cap ? 2 * cap : 64) * sizeof *v);
            if (!w)
                break;
            v = w;
        }
        v[n].mtime = st.st_mtime;
        v[n].size = (int64_t)st.st_size;
        memcpy(v[n].name, de->d_name, len + 1); /* 36 or 40 bytes: checked above */
        total += v[n++].size;
    }
    closedir(dp);
    if (total > cap_bytes) {
        qsort(v, n, sizeof *v, old_cmp);
        for (size_t i = 0; i < n && total > cap_bytes / 4 * 3; i++) {
            snprintf(path, sizeof path, "%s/%s", dir, v[i].name);
            if (unlink(path) == 0) {
                total -= v[i].size;
                if (store_kind(v[i].name) == STORE_WTS) { /* its mark, if any */
                    memcpy(path + strlen(path) - 3, "chk", 3);
                    unlink(path);
                }
            }
        }
    }
    free(v);
}


/* ---- files -------------------------------------------------------------------- */

void store_path(const char *dir, const uint64_t key[2], const char *ext, char *buf, size_t size)
{
    unsigned long long a = key[0], b = key[1];
    if (ext)
        snprintf(buf, size, "%s/%016llx%016llx.%s", dir, a, b, ext);
    else
        snprintf(buf, size, "%s/.%016llx%016llx.XXXXXX", dir, a, b);
}

bool store_publish(const char *tmp, const char *path)
{
    /* readable by whoever may read the directory, like a file made by open */
    if (chmod(tmp, 0644) == 0 && rename(tmp, path) == 0)
        return true;
    int err = errno;
    unlink(tmp);
    errno = err;
    return false;
}

/* Advice that pages of a large mapping be read into the page cache as huge
 * folios, which the kernel then maps whole (kernels whose file system has
 * large folios: ext4 and xfs from 6.x on). A matmul reading packed weights
 * through 4 KiB pages ran 4-5% slower than through 2 MiB ones (BERT-base,
 * bench/NOTES.md). Advice only: on a kernel without it nothing changes. */
static void huge_advice(void *p, size_t len)
{
#ifdef MADV_HUGEPAGE
    if (len >= (size_t)2 << 20)
        madvise(p, len, MADV_HUGEPAGE);
#else
    (void)p, (void)len;
#endif
}

void *store_map(const char *path, size_t min, size_t *len, const char **why, struct stat *stp)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        *why = errno == ENOENT ? "no entry" : "unreadable";
        return NULL;
    }
    struct stat st;
    void *p = MAP_FAILED;
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_size < min || (uint64_t)st.st_size > SIZE_MAX || st.st_size == 0)
        *why = "truncated";
    else if (st.st_uid != geteuid())
        *why = "owned by another user";
    else if ((p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0)) == MAP_FAILED)
        *why = "cannot be mapped";
    close(fd);
    if (stp)
        *stp = st;
    if (p == MAP_FAILED)
        return NULL;
    *len = (size_t)st.st_size;
    huge_advice(p, *len);
    return p;
}

/* ---- marks: an entry found whole, and unchanged since ----------------------- *
 *
 * A .wts entry's hashes were checked at every load, which read every byte:
 * 60 of a second start's 100 ms for BERT-base's 435 MB of weights, and as
 * much again for the packed copies at the first run. Now an entry found
 * whole (written by this code, or read and its hashes checked) gets a mark,
 * KEY.chk beside it: "DISCCHK1", the entry's identity (device, inode, size,
 * mtime, ctime), and a checksum of those. A later load that finds the
 * entry's identity as marked trusts it without reading it, as git's index
 * and ccache's inode cache trust a file whose stat data has not changed:
 * any write to the entry moves its ctime, which no process can set back.
 * A write in the same tick of the file system's clock as the time recorded
 * would leave the ctime as it was, so a mark is made only for an entry
 * whose ctime is in a tick before the check began (the coarse clock that
 * stamps files), and a new entry's mark waits for the tick to pass (at
 * most a few ms). The entry's own mtime is then left alone, since renewing
 * it moves its ctime: a use renews the mark instead, and store_trim takes
 * the later of the two. What a mark does not catch: a change that keeps
 * the stat data (a disk's silent corruption, a clock set back), as for
 * any file the system reads, the model itself included. */

enum { MARK_U64 = STORE_IDENT, MARK_BYTES = 8 + MARK_U64 * 8 + 8 };
static const char mark_magic[8] = "DISCCHK1";

struct timespec store_now(void)
{
    struct timespec t = {0, 0};
    clock_gettime(CLOCK_REALTIME_COARSE, &t);
    return t;
}

static bool ts_before(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

void store_identity(const struct stat *st, uint64_t id[STORE_IDENT])
{
    id[0] = (uint64_t)st->st_dev;
    id[1] = (uint64_t)st->st_ino;
    id[2] = (uint64_t)st->st_size;
    id[3] = (uint64_t)st->st_mtim.tv_sec;
    id[4] = (uint64_t)st->st_mtim.tv_nsec;
    id[5] = (uint64_t)st->st_ctim.tv_sec;
    id[6] = (uint64_t)st->st_ctim.tv_nsec;
}

static bool same_file(const struct stat *a, const struct stat *b)
{
    uint64_t x[MARK_U64], y[MARK_U64];
    store_identity(a, x);
    store_identity(b, y);
    return !memcmp(x, y, sizeof x);
}

/* DIR/KEY.chk for DIR/KEY.wts; false when path is not such a name */
static bool mark_path(const char *path, char *buf, size_t size)
{
    size_t n = strlen(path);
    if (n < 4 || n >= size || strcmp(path + n - 4, ".wts") != 0)
        return false;
    memcpy(buf, path, n - 3);
    memcpy(buf + n - 3, "chk", 4);
    return true;
}

static bool marked(const char *path, const struct stat *st)
{
    char mp[4200];
    unsigned char b[MARK_BYTES + 1];
    if (!mark_path(path, mp, sizeof mp))
        return false;
    int fd = open(mp, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    struct stat ms;
    ssize_t got = fstat(fd, &ms) == 0 && ms.st_uid == geteuid() ? read(fd, b, sizeof b) : -1;
    close(fd);
    uint64_t id[MARK_U64];
    store_identity(st, id);
    return got == MARK_BYTES && !memcmp(b, mark_magic, 8) &&
           store_hash(b, MARK_BYTES - 8, 0) == store_rd64(b + MARK_BYTES - 8) && !memcmp(b + 8, id, sizeof id);
}

static void write_mark(const char *mp, const struct stat *seen)
{
    unsigned char b[MARK_BYTES];
    uint64_t id[MARK_U64];
    store_identity(seen, id);
    memcpy(b, mark_magic, 8);
    memcpy(b + 8, id, sizeof id);
    uint64_t h = store_hash(b, MARK_BYTES - 8, 0);
    memcpy(b + MARK_BYTES - 8, &h, 8);
    /* the temporary name store_trim knows: DIR/.KEY.XXXXXX */
    char tmp[4200];
    const char *slash = strrchr(mp, '/');
    size_t dl = slash ? (size_t)(slash - mp) + 1 : 0;
    if (strlen(mp) - dl != 36 || dl + 41 > sizeof tmp)
        return;
    memcpy(tmp, mp, dl);
    tmp[dl] = '.';
    memcpy(tmp + dl + 1, mp + dl, 32);
    memcpy(tmp + dl + 33, ".XXXXXX", 8);
    int fd = mkstemp(tmp);
    if (fd < 0)
        return;
    bool ok = write(fd, b, sizeof b) == (ssize_t)sizeof b;
    ok = close(fd) == 0 && ok;
    if (!ok)
        unlink(tmp);
    else
        store_publish(tmp, mp);
}

/* The mark of an entry whose check began at `began` and saw `seen`, made
 * when the entry is as seen and its ctime was in a tick before began. */
static void mark_if(const char *path, const struct stat *seen, const struct timespec *began)
{
    char mp[4200];
    struct stat st;
    if (mark_path(path, mp, sizeof mp) && stat(path, &st) == 0 && same_file(&st, seen) &&
        ts_before(&seen->st_ctim, began))
        write_mark(mp, seen);
}

/* Entries this process wrote whole, whose marks wait for the tick of their
 * ctime to pass: made at a later store operation, or at exit. */
typedef struct Pending {
    char path[4200];
    struct stat st;
} Pending;

static pthread_mutex_t pend_mu = PTHREAD_MUTEX_INITIALIZER;
static Pending *pend;
static int npend, cappend;
static bool pend_hooked;

/* Marks the pending entries whose tick has passed; with wait, all of them
 * (waiting for the tick: a few ms at most). */
static void pend_flush(bool wait)
{
    pthread_mutex_lock(&pend_mu);
    int kept = 0;
    for (int i = 0; i < npend; i++) {
        struct timespec t = store_now();
        for (int n = 0; wait && n < 100 && !ts_before(&pend[i].st.st_ctim, &t); n++) {
            nanosleep(&(struct timespec){0, 1000000}, NULL);
            t = store_now();
        }
        if (ts_before(&pend[i].st.st_ctim, &t))
            mark_if(pend[i].path, &pend[i].st, &t);
        else
            pend[kept++] = pend[i];
    }
    npend = kept;
    pthread_mutex_unlock(&pend_mu);
}

static void pend_at_exit(void)
{
    pend_flush(true);
    pthread_mutex_lock(&pend_mu);
    free(pend);
    pend = NULL;
    npend = cappend = 0;
    pthread_mutex_unlock(&pend_mu);
}

void store_mark(const char *path, const struct stat *seen, const struct timespec *began)
{
    if (seen) {
        mark_if(path, seen, began);
        return;
    }
    struct stat st;
    if (strlen(path) >= sizeof pend->path || stat(path, &st) != 0)
        return;
    pthread_mutex_lock(&pend_mu);
    if (!pend_hooked) {
        atexit(pend_at_exit);
        pend_hooked = true;
    }
    if (npend == cappend) {
        Pending *np = realloc(pend, (size_t)(cappend = cappend ? 2 * cappend : 16) * sizeof *np);
        if (np)
            pend = np;
        else
            cappend = npend;
    }
    if (npend < cappend) {
        memcpy(pend[npend].path, path, strlen(path) + 1);
        pend[npend++].st = st;
    }
    pthread_mutex_unlock(&pend_mu);
}

bool store_marked(const char *path, const struct stat *st)
{
    pend_flush(false);
    return marked(path, st);
}

void store_used(const char *path)
{
    char mp[4200];
    if (!mark_path(path, mp, sizeof mp) || utimensat(AT_FDCWD, mp, NULL, 0) != 0)
        utimensat(AT_FDCWD, path, NULL, 0);
}

/* ---- derived constants ------------------------------------------------------ *
 *
 * KEY.wts: "DISCDRV1", u64 bytes, u64 store_hash(data, bytes, bytes), the
 * data from offset DRV_DATA. */

enum { DRV_DATA = 4096 };
static const char drv_magic[8] = "DISCDRV1";

typedef struct StoreMap {
    void *base;
    size_t len;
} StoreMap;

void store_release(void *keep)
{
    StoreMap *m = keep;
    if (m) {
        munmap(m->base, m->len);
        free(m);
    }
}

static const void *mapped(void *base, size_t len, void **keep)
{
    StoreMap *m = malloc(sizeof *m);
    if (!m) {
        munmap(base, len);
        return NULL;
    }
    *m = (StoreMap){base, len};
    *keep = m;
    return (const char *)base + DRV_DATA;
}

bool store_derived_intact(const void *p, size_t len)
{
    uint64_t hdr[3];
    if (len < DRV_DATA)
        return false;
    memcpy(hdr, p, sizeof hdr);
    return !memcmp(hdr, drv_magic, 8) && hdr[1] == len - DRV_DATA &&
           store_hash((const char *)p + DRV_DATA, len - DRV_DATA, len - DRV_DATA) == hdr[2];
}

/* The entry at path when it holds bytes intact: mapped. */
static const void *derived_load(const char *path, size_t bytes, uint64_t *hash, void **keep)
{
    const char *why;
    size_t len;
    struct stat st;
    struct timespec began = store_now();
    char *p = store_map(path, DRV_DATA + bytes, &len, &why, &st);
    if (!p)
        return NULL;
    uint64_t hdr[3];
    memcpy(hdr, p, sizeof hdr);
    bool ok = len == DRV_DATA + bytes && !memcmp(hdr, drv_magic, 8) && hdr[1] == bytes;
    bool marked = ok && store_marked(path, &st);
#ifdef MADV_POPULATE_READ
    if (ok && !marked) /* read whole next: populated at once, not a fault per 64 KiB */
        madvise(p, len, MADV_POPULATE_READ);
#endif
    if (!ok || (!marked && store_hash(p + DRV_DATA, bytes, bytes) != hdr[2])) {
        munmap(p, len);
        return NULL;
    }
    if (!marked)
        store_mark(path, &st, &began);
    store_used(path);
    *hash = hdr[2];
    return mapped(p, len, keep);
}

const void *store_derived(const char *dir, const uint64_t key[2], size_t bytes, bool (*fill)(void *dst, void *ctx),
                          void *ctx, uint64_t *hash, void **keep)
{
    char path[4200], tmp[4200];
    store_path(dir, key, "wts", path, sizeof path);
    const void *p = bytes <= SIZE_MAX - DRV_DATA ? derived_load(path, bytes, hash, keep) : NULL;
    if (p || bytes > SIZE_MAX - DRV_DATA || !store_mkdirs(dir))
        return p;
    store_path(dir, key, NULL, tmp, sizeof tmp);
    int fd = mkstemp(tmp);
    if (fd < 0)
        return NULL;
    size_t len = DRV_DATA + bytes;
    /* the blocks reserved first: a full disk is fallocate's error, not a
     * SIGBUS when a store into the mapping needs a block */
    void *m = fallocate(fd, 0, 0, (off_t)len) == 0 ? mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                                                   : MAP_FAILED;
    bool ok = m != MAP_FAILED;
    if (ok) /* before the first touch, which makes the page cache's folios */
        huge_advice(m, len);
    if (ok && (ok = fill((char *)m + DRV_DATA, ctx))) {
        uint64_t hdr[3] = {0, bytes, store_hash((char *)m + DRV_DATA, bytes, bytes)};
        memcpy(hdr, drv_magic, 8);
        memcpy(m, hdr, sizeof hdr);
        *hash = hdr[2];
        ok = mprotect(m, len, PROT_READ) == 0;
    }
    ok = close(fd) == 0 && ok;
    if (!ok)
        unlink(tmp);
    if (!ok || !store_publish(tmp, path)) {
        if (m != MAP_FAILED)
            munmap(m, len);
        return NULL;
    }
    store_mark(path, NULL, NULL); /* written whole */
    store_trim(dir, STORE_CAP, (int64_t)len);
    return mapped(m, len, keep);
}
