/*
 * cache.c — `dcc cache`: what the cache directory holds, reading it all
 * to check it, emptying it.
 *
 * The directory (codegen/cache.h names it) keeps compiled code (KEY.jit),
 * models' weights laid out aligned ("DISCWTS1" .wts), bytes derived from
 * weights ("DISCDRV1" .wts) and the marks of .wts files found whole
 * (KEY.chk, ir/store.c), which let a load trust a file without reading it
 * while its status is unchanged. A change that keeps a file's status (a
 * disk's silent corruption) gets past a mark; --verify reads every file
 * whole, removes what is damaged (a later load makes it again) and marks
 * what is intact.
 */
#include "codegen/cache.h"
#include "dcc/dcc.h"
#include "frontends/onnx/onnx.h"
#include "ir/store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const char usage_cache[] =
    "usage: dcc cache [--cache-dir DIR] [--verify | --clear]\n"
    "\n"
    "Says where the cache of compiled code and weights is and what it holds:\n"
    "compiled code (.jit), models' weights laid out aligned and the copies made\n"
    "from them (.wts), and the marks of weights files found whole (.chk), which\n"
    "let a later load use a file without reading it while the file's inode, size\n"
    "and times are unchanged.\n"
    "\n"
    "options:\n"
    "  --cache-dir DIR the directory (default $DISC_CACHE_DIR, else\n"
    "                  ~/.cache/disc/jit)\n"
    "  --verify        read every file whole and check it (checksums, every\n"
    "                  weight's hash): a damaged file is removed (the next use\n"
    "                  makes it again), an intact weights file is marked\n"
    "  --clear         remove every file of the cache (processes that have one\n"
    "                  mapped keep it until they are done)\n"
    "\n"
    "exit status: 0 success (damaged files removed included), 2 usage error,\n"
    "3 the directory cannot be read\n";

/* The file at path read whole: 1 intact, 0 damaged, -1 unreadable (or
 * another user's, left alone). A weights file found intact is marked. */
static int verify(const char *path, StoreKind k)
{
    struct timespec began = store_now();
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_uid != geteuid()) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    size_t len = (size_t)st.st_size;
    void *p = len ? mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
    close(fd);
    if (p == MAP_FAILED)
        return len ? -1 : 0;
    bool ok = k == STORE_JIT ? cache_file_intact(p, len)
              : len >= 8 && !memcmp(p, "DISCWTS1", 8) ? onnx_store_intact(p, len)
                                                      : store_derived_intact(p, len);
    munmap(p, len);
    if (ok && k == STORE_WTS)
        store_mark(path, &st, &began);
    return ok;
}

int dcc_cache(int argc, char **argv)
{
    CgOpts co = {0};
    bool check = false, clear = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage_cache, stdout);
            return 0;
        } else if (!strcmp(a, "--cache-dir")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "dcc: error: --cache-dir needs a value\n%s", usage_cache);
                return EXIT_USAGE;
            }
            co.cache_dir = argv[++i];
        } else if (!strcmp(a, "--verify")) {
            check = true;
        } else if (!strcmp(a, "--clear")) {
            clear = true;
        } else {
            fprintf(stderr, "dcc: error: unknown option '%s'\n%s", a, usage_cache);
            return EXIT_USAGE;
        }
    }
    if (check && clear) {
        fprintf(stderr, "dcc: error: --verify and --clear together\n%s", usage_cache);
        return EXIT_USAGE;
    }
    char dir[4096];
    if (!cache_dir(&co, dir, sizeof dir)) {
        fprintf(stderr, "dcc: error: no cache directory (the cache is off, DISC_CACHE=0, or HOME is not set)\n");
        return EXIT_USAGE;
    }
    DIR *dp = opendir(dir);
    if (!dp && errno == ENOENT) {
        printf("%s: no cache directory yet\n", dir);
        return 0;
    }
    if (!dp) {
        fprintf(stderr, "dcc: error: cannot read the cache directory %s: %s\n", dir, strerror(errno));
        return EXIT_SYSTEM;
    }
    int count[STORE_OTHER + 1] = {0}, damaged = 0, unreadable = 0, removed = 0;
    int64_t bytes[STORE_OTHER + 1] = {0};
    struct dirent *de;
    char path[8192];
    while ((de = readdir(dp))) {
        StoreKind k = store_kind(de->d_name);
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if ((k == STORE_OTHER && strcmp(de->d_name, "trim.stamp") != 0) || lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (clear) {
            removed += unlink(path) == 0;
            continue;
        }
        if (k == STORE_OTHER)
            continue;
        count[k]++;
        bytes[k] += (int64_t)st.st_size;
        if (check && (k == STORE_JIT || k == STORE_WTS)) {
            int v = verify(path, k);
            if (v == 0) {
                damaged++;
                fprintf(stderr, "dcc: %s: damaged, removed\n", path);
                unlink(path);
                if (k == STORE_WTS) { /* and its mark */
                    memcpy(path + strlen(path) - 3, "chk", 3);
                    unlink(path);
                }
            }
            unreadable += v < 0;
        }
    }
    closedir(dp);
    if (clear) {
        printf("%s: %d files removed\n", dir, removed);
        return 0;
    }
    printf("%s:\n", dir);
    printf("  compiled code (.jit)  %6d files %10.1f MB\n", count[STORE_JIT], (double)bytes[STORE_JIT] / 1e6);
    printf("  weights (.wts)        %6d files %10.1f MB\n", count[STORE_WTS], (double)bytes[STORE_WTS] / 1e6);
    printf("  marks (.chk)          %6d files\n", count[STORE_CHK]);
    if (count[STORE_TMP])
        printf("  unfinished writes     %6d files %10.1f MB\n", count[STORE_TMP], (double)bytes[STORE_TMP] / 1e6);
    printf("  kept under %.1f GiB (the least recently used removed past it)\n", (double)STORE_CAP / (1 << 30));
    if (check)
        printf("verified: %d intact, %d damaged (removed), %d not readable by this user\n",
               count[STORE_JIT] + count[STORE_WTS] - damaged - unreadable, damaged, unreadable);
    return 0;
}
