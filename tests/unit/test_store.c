/*
 * test_store.c — the on-disk store's marks and trimming (ir/store.c): an
 * entry found whole is trusted without being read while its status is as
 * marked, a write after the mark is seen, a use renews the mark and not the
 * entry, and store_trim keeps what was used lately (by the mark's time),
 * removing a mark with its entry and a mark whose entry is gone; a large
 * entry is mapped by huge pages where the kernel can map a file so.
 */
#include "ir/store.h"
#include "tests/unit/check.h"
#include "tests/unit/files.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

enum { BYTES = 8192, TICK_US = 20000 }; /* several ticks of the file clock (4 ms here) */

static char dir[256];
static int fills;

static bool fill(void *dst, void *ctx)
{
    unsigned char *p = dst;
    for (int i = 0; i < BYTES; i++)
        p[i] = (unsigned char)(i * 7 + *(int *)ctx);
    fills++;
    return true;
}

static bool filled(const void *p, int seed)
{
    const unsigned char *q = p;
    for (int i = 0; i < BYTES; i++)
        if (q[i] != (unsigned char)(i * 7 + seed))
            return false;
    return p != NULL;
}

static const void *derived(uint64_t k, int seed, void **keep)
{
    uint64_t key[2] = {k, k + 1}, hash;
    return store_derived(dir, key, BYTES, fill, &seed, &hash, keep);
}

static void entry_of(uint64_t k, const char *ext, char *buf, size_t size)
{
    uint64_t key[2] = {k, k + 1};
    store_path(dir, key, ext, buf, size);
}

static void poke(const char *path, long at)
{
    int fd = open(path, O_RDWR);
    unsigned char c = 0;
    CHECK(fd >= 0 && pread(fd, &c, 1, at) == 1);
    c ^= 0x5a;
    CHECK(fd >= 0 && pwrite(fd, &c, 1, at) == 1);
    if (fd >= 0)
        close(fd);
}

static void set_mtime(const char *path, time_t ago)
{
    struct timespec t[2] = {{time(NULL) - ago, 0}, {time(NULL) - ago, 0}};
    CHECK(utimensat(AT_FDCWD, path, t, 0) == 0);
}

static time_t mtime(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_mtime : 0;
}

static void test_marks(void)
{
    char wts[400], chk[400], last[400];
    void *keep = NULL;
    entry_of(1, "wts", wts, sizeof wts);
    entry_of(1, "chk", chk, sizeof chk);

    /* made: the mark waits for the tick; the next load makes it and
     * trusts the entry */
    fills = 0;
    const void *p = derived(1, 3, &keep);
    CHECK(filled(p, 3) && fills == 1);
    store_release(keep);
    usleep(TICK_US);
    p = derived(1, 3, &keep);
    CHECK(filled(p, 3) && fills == 1);
    store_release(keep);
    CHECK(files_ending(dir, ".chk", last, sizeof last) == 1 && !strcmp(last, chk));
    struct stat st;
    CHECK(stat(wts, &st) == 0 && store_marked(wts, &st));

    /* a use renews the mark, not the entry (whose ctime would move) */
    set_mtime(wts, 7200);
    set_mtime(chk, 7200);
    CHECK(stat(wts, &st) == 0);
    usleep(TICK_US);
    struct timespec began = store_now();
    store_mark(wts, &st, &began); /* the times set above moved the ctime: marked again */
    CHECK(store_marked(wts, &st));
    set_mtime(chk, 7200);
    p = derived(1, 3, &keep);
    CHECK(filled(p, 3) && fills == 1);
    store_release(keep);
    CHECK(mtime(wts) <= time(NULL) - 7000 && mtime(chk) >= time(NULL) - 60);

    /* written after the mark: not trusted, read, found damaged, made again */
    usleep(TICK_US);
    poke(wts, 4096 + 100);
    CHECK(stat(wts, &st) == 0 && !store_marked(wts, &st));
    p = derived(1, 3, &keep);
    CHECK(filled(p, 3) && fills == 2);
    store_release(keep);

    /* no mark for a file that changed since the check saw it, or whose
     * ctime is not in a tick before the check began */
    usleep(TICK_US);
    CHECK(stat(wts, &st) == 0);
    struct stat old = st;
    usleep(TICK_US);
    poke(wts, 4096 + 200);
    began = store_now();
    unlink(chk);
    store_mark(wts, &old, &began);
    CHECK(files_ending(dir, ".chk", last, sizeof last) == 0);
    CHECK(stat(wts, &st) == 0);
    store_mark(wts, &st, &st.st_ctim);
    CHECK(files_ending(dir, ".chk", last, sizeof last) == 0 && !store_marked(wts, &st));

    /* a damaged mark is no mark */
    usleep(TICK_US);
    began = store_now();
    store_mark(wts, &st, &began);
    CHECK(store_marked(wts, &st));
    poke(chk, 30);
    CHECK(!store_marked(wts, &st));
}

static void test_trim(void)
{
    char x[400], y[400], ychk[400], z[400], orphan[400], last[400];
    void *keep = NULL;
    entry_of(1, "wts", x, sizeof x); /* the earlier test's, gone */
    unlink(x);
    entry_of(1, "chk", x, sizeof x);
    unlink(x);
    /* x: used two hours ago, no mark; y: written three hours ago, its mark
     * used now; z: new */
    for (uint64_t k = 10; k < 13; k++) {
        derived(k, (int)k, &keep);
        store_release(keep);
    }
    entry_of(10, "wts", x, sizeof x);
    entry_of(11, "wts", y, sizeof y);
    entry_of(11, "chk", ychk, sizeof ychk);
    entry_of(12, "wts", z, sizeof z);
    usleep(TICK_US);
    struct stat st;
    CHECK(stat(y, &st) == 0);
    struct timespec began = store_now();
    store_mark(y, &st, &began);
    CHECK(store_marked(y, &st));
    set_mtime(x, 7200);
    set_mtime(y, 10800);
    entry_of(99, "chk", orphan, sizeof orphan); /* a mark whose entry is gone */
    FILE *f = fopen(orphan, "wb");
    CHECK(f && fputs("stale", f) >= 0);
    if (f)
        fclose(f);
    set_mtime(orphan, 7200);
    /* three entries of 12 KiB over a cap of 34 KiB: the oldest by use goes,
     * to below three quarters of the cap */
    int64_t cap = 34 << 10;
    store_trim(dir, cap, cap);
    CHECK(access(x, F_OK) != 0 && access(y, F_OK) == 0 && access(ychk, F_OK) == 0 && access(z, F_OK) == 0);
    CHECK(access(orphan, F_OK) != 0);
    /* y's mark as old as y: y goes, and its mark with it */
    set_mtime(ychk, 10800);
    store_trim(dir, 20 << 10, 20 << 10);
    CHECK(access(y, F_OK) != 0 && access(ychk, F_OK) != 0 && access(z, F_OK) == 0);
    char zchk[400]; /* z's own, made when the tick of its writing had passed */
    entry_of(12, "chk", zchk, sizeof zchk);
    CHECK(files_ending(dir, ".chk", last, sizeof last) == 1 && !strcmp(last, zchk));
}

/* KiB of the mapping holding p that the kernel maps by huge pages
 * (FilePmdMapped in /proc/self/smaps); -1 where that cannot be read. */
static long pmd_kib(const void *p)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return -1;
    char line[512];
    bool in = false;
    long kib = -1;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
            in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
        else if (in && sscanf(line, "FilePmdMapped: %ld", &kib) == 1)
            break;
    }
    fclose(f);
    return kib;
}

enum { BIG = 12 << 20 };

static bool fill_big(void *dst, void *ctx)
{
    (void)ctx;
    memset(dst, 0x3c, BIG);
    return true;
}

/* KiB of a probe file in dir that this kernel maps by huge pages, made as
 * the store makes its entries (written through a shared mapping advised
 * MADV_HUGEPAGE, the one thing the store can do for it), and with
 * reread, mapped again so after the page cache let it go: what the kernel
 * can do at this moment (a file system without large folios, or memory
 * too fragmented for 2 MiB folios, gives less), against which the store's
 * own entries are judged. */
static long probe_kib(bool reread)
{
    long kib = 0;
#ifdef MADV_HUGEPAGE
    char path[300];
    snprintf(path, sizeof path, "%s/probe", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    char *m = fd >= 0 && ftruncate(fd, BIG) == 0 ? mmap(NULL, BIG, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                                                 : MAP_FAILED;
    if (m != MAP_FAILED) {
        madvise(m, BIG, MADV_HUGEPAGE);
        memset(m, 1, BIG);
        kib = pmd_kib(m);
        munmap(m, BIG);
    }
    if (m != MAP_FAILED && reread && fdatasync(fd) == 0 && posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0 &&
        (m = mmap(NULL, BIG, PROT_READ, MAP_SHARED, fd, 0)) != MAP_FAILED) {
        madvise(m, BIG, MADV_HUGEPAGE);
        unsigned sum = 0;
        for (long i = 0; i < BIG; i += 4096)
            sum += (unsigned char)m[i];
        kib = sum == BIG / 4096 ? pmd_kib(m) : 0;
        munmap(m, BIG);
    }
    if (fd >= 0)
        close(fd);
    unlink(path);
#else
    (void)reread;
#endif
    return kib;
}

enum { HUGE_KIB = 8 << 10 }; /* of the 12 MiB: the whole 2 MiB pages at least */

/* kib of an entry mapped huge, against the probe made (and with reread,
 * read back) the same way now: checked where the probe was. */
static void check_huge(long kib, bool reread)
{
    if (probe_kib(reread) < HUGE_KIB)
        printf("SKIP (part): this kernel did not map a file %s in %s by huge pages; not checked\n",
               reread ? "read back" : "made", dir);
    else
        CHECK(kib >= HUGE_KIB);
}

/* A large entry is mapped by 2 MiB pages, when made and when mapped again
 * after the page cache let it go (a matmul over packed weights read through
 * 4 KiB pages runs 5-10% slower: bench/NOTES.md), wherever a probe file
 * made and read the same way is. */
static void test_huge(void)
{
    uint64_t key[2] = {77, 78}, hash;
    void *keep = NULL;
    const void *p = store_derived(dir, key, BIG, fill_big, NULL, &hash, &keep);
    long made = p ? pmd_kib(p) : -1;
    store_release(keep);
    check_huge(made, false);
    /* out of the page cache (written back first: dirty pages stay), then
     * mapped by the load */
    char wts[400];
    store_path(dir, key, "wts", wts, sizeof wts);
    int fd = open(wts, O_RDONLY);
    CHECK(fd >= 0 && fdatasync(fd) == 0 && posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0);
    if (fd >= 0)
        close(fd);
    p = store_derived(dir, key, BIG, fill_big, NULL, &hash, &keep);
    unsigned sum = 0;
    for (long i = 0; p && i < BIG; i += 4096) /* every page faulted in */
        sum += ((const unsigned char *)p)[i];
    CHECK(p && sum == 0x3cu * (BIG / 4096));
    long reread = p ? pmd_kib(p) : -1;
    store_release(keep);
    check_huge(reread, true);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/disc_test_store.XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_marks();
    test_trim();
    test_huge();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    return check_done();
}
