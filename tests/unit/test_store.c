/*
 * test_store.c — the on-disk store's marks and trimming (ir/store.c): an
 * entry found whole is trusted without being read while its status is as
 * marked, a write after the mark is seen, a use renews the mark and not the
 * entry, and store_trim keeps what was used lately (by the mark's time),
 * removing a mark with its entry and a mark whose entry is gone.
 */
#include "ir/store.h"
#include "tests/unit/check.h"
#include "tests/unit/files.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
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

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/disc_test_store.XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_marks();
    test_trim();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    return check_done();
}
