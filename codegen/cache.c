/*
 * cache.c — the on-disk cache of JIT-compiled code: keys, files, and the
 * hash both use. What it is for and what a key covers: cache.h.
 *
 * A file, all integers little-endian as this machine writes them:
 *
 *     "DISCJIT1"          magic, 8 bytes
 *     u64 payload bytes
 *     u64 checksum        xxHash64 of the payload
 *     payload:
 *       u32 n, n bytes    the key's text (checked against the key's)
 *       i32 x 6           nkernels nlaunch nlibrary nepilogue nskinny nsplit
 *       per kernel:       u32 n, n bytes of its description (0: none)
 *       u32 k             object files (1 to CACHE_MAX_OBJECTS)
 *       k times: u64 n, n bytes of an object file
 *
 * Every read is bounded by the payload's size, so a file cut short or
 * overwritten anywhere fails the checksum or a bound and is ignored.
 */
#include "codegen/cache.h"
#include "ir/store.h"
#include "runtime/rt.h"

#include "disc_build_id.h"

#include <llvm-c/TargetMachine.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char magic[8] = "DISCJIT1";
enum { HEADER = 24 };

/* ---- the key ------------------------------------------------------------ */

/* The constants' bytes, hashed one constant at a time on threads (a
 * BERT-base has 400 MB of them), then combined in order. A constant whose
 * hash its loader already knows (Const.hash_of, frontends/onnx/weights.c)
 * is not read again. */
static bool hash_all_consts(const Graph *g, uint64_t *out, int *count)
{
    int n = 0;
    for (const Op *op = g->first; op; op = op->next)
        n += op->kind == OP_CONST && op->cst;
    const void **p = calloc((size_t)n + 1, sizeof *p);
    size_t *len = calloc((size_t)n + 1, sizeof *len);
    uint64_t *h = calloc((size_t)n + 1, sizeof *h);
    bool ok = p && len && h;
    if (ok) {
        n = 0;
        for (const Op *op = g->first; op; op = op->next)
            if (op->kind == OP_CONST && op->cst) {
                const Const *c = op->cst;
                bool known = c->data && c->hash_of == c->data;
                p[n] = known ? NULL : c->data;
                len[n++] = c->nbytes;
            }
        store_hash_many((const void *const *)p, len, h, n);
        n = 0;
        uint64_t hc = 0;
        for (const Op *op = g->first; op; op = op->next)
            if (op->kind == OP_CONST && op->cst) {
                const Const *c = op->cst;
                if (c->data && c->hash_of == c->data)
                    h[n] = c->hash;
                hc = store_hash(&h[n], sizeof h[n], hc);
                n++;
            }
        *out = hc;
        *count = n;
    }
    free(p);
    free(len);
    free(h);
    return ok;
}

bool cache_key(const Graph *g, const ShapeOpts *so, const CgOpts *o, const CpuTarget *cpu, CacheKey *k, Diag *d)
{
    memset(k, 0, sizeof *k);
    char *gtext = NULL;
    size_t glen = 0;
    FILE *f = open_memstream(&gtext, &glen);
    if (!f)
        return diag_oom(d);
    graph_print(f, g, &(PrintOpts){16, true, false});
    bool ok = !ferror(f);
    if (fclose(f) != 0 || !ok) {
        free(gtext);
        return diag_oom(d);
    }
    uint64_t hg = store_hash(gtext, glen, 0), hc;
    free(gtext);
    int nconst;
    if (!hash_all_consts(g, &hc, &nconst))
        return diag_oom(d);
    char *text = NULL;
    size_t tlen = 0;
    if (!(f = open_memstream(&text, &tlen)))
        return diag_oom(d);
    fprintf(f, "disc %s build %s\n", DISC_PROJECT_VERSION, DISC_BUILD_ID);
    fprintf(f, "cpu %s features %s\n", cpu->name, cpu->features ? cpu->features : "");
    /* what the JIT's code generator starts from (objects.c) */
    char *hcpu = LLVMGetHostCPUName(), *hfeat = LLVMGetHostCPUFeatures();
    fprintf(f, "host %s features %s\n", hcpu ? hcpu : "", hfeat ? hfeat : "");
    LLVMDisposeMessage(hcpu);
    LLVMDisposeMessage(hfeat);
    fprintf(f, "opt %d unfused %d layout %d skinny %lld %lld libmvec %d slp %d rowvec %d foldbn %d shareconsts %d\n",
            o->opt_level, o->unfused, cg_channels_last(o) ? 1 + cg_layout_block(o) : 0,
            (long long)disc_rt_skinny_max_m(DISC_PANEL), (long long)disc_rt_skinny_max_m(DISC_PANEL_NARROW),
            cg_llvm_libmvec(), cg_slp(), cg_rowvec(), canon_folds_bn(), cg_share_consts());
    for (int i = 0; so && i < so->nassume; i++)
        fprintf(f, "assume %s\n", so->assume[i]);
    fprintf(f, "graph %016llx consts %d %016llx\n", (unsigned long long)hg, nconst, (unsigned long long)hc);
    ok = !ferror(f);
    if (fclose(f) != 0 || !ok) {
        free(text);
        return diag_oom(d);
    }
    k->text = text;
    snprintf(k->name, sizeof k->name, "%016llx%016llx", (unsigned long long)store_hash(text, tlen, 0),
             (unsigned long long)store_hash(text, tlen, 0x165667B19E3779F9ull));
    return true;
}

void cache_key_free(CacheKey *k)
{
    free(k->text);
    k->text = NULL;
}

/* ---- the directory -------------------------------------------------------- */

bool cache_file_intact(const void *p, size_t len)
{
    const unsigned char *m = p;
    return len >= HEADER && !memcmp(m, magic, 8) && store_rd64(m + 8) == len - HEADER &&
           store_hash(m + HEADER, len - HEADER, 0) == store_rd64(m + 16);
}

bool cache_dir(const CgOpts *o, char *buf, size_t size)
{
    const DiscEnv *env = disc_env();
    if (o->no_cache || env->cache_off)
        return false;
    int n;
    if (o->cache_dir && *o->cache_dir)
        n = snprintf(buf, size, "%s", o->cache_dir);
    else if (env->cache_dir && *env->cache_dir)
        n = snprintf(buf, size, "%s", env->cache_dir);
    else if (env->home && *env->home)
        n = snprintf(buf, size, "%s/.cache/disc/jit", env->home);
    else
        return false;
    return n > 0 && (size_t)n < size;
}

/* ---- reading -------------------------------------------------------------- */

typedef struct Rd {
    const unsigned char *p, *end;
    bool bad;
} Rd;

static const void *take(Rd *r, uint64_t n)
{
    if (r->bad || n > (uint64_t)(r->end - r->p)) {
        r->bad = true;
        return NULL;
    }
    const void *q = r->p;
    r->p += n;
    return q;
}

static uint32_t take32(Rd *r)
{
    const void *q = take(r, 4);
    return q ? store_rd32(q) : 0;
}

static bool fail(char *why, size_t size, const char *msg)
{
    snprintf(why, size, "%s", msg);
    return false;
}

bool cache_load(const char *dir, const CacheKey *k, CacheEntry *e, char *why, size_t whysize)
{
    memset(e, 0, sizeof *e);
    why[0] = 0;
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.jit", dir, k->name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? false : fail(why, whysize, "unreadable");
    struct stat st;
    unsigned char *mem = NULL;
    if (fstat(fd, &st) != 0 || st.st_uid != geteuid()) { /* in a directory others can write to */
        close(fd);
        return fail(why, whysize, st.st_uid != geteuid() ? "owned by another user" : "unreadable");
    }
    bool ok = st.st_size >= HEADER && (mem = malloc((size_t)st.st_size));
    size_t got = 0;
    while (ok && got < (size_t)st.st_size) {
        ssize_t r = read(fd, mem + got, (size_t)st.st_size - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (!ok || got != (size_t)st.st_size) {
        free(mem);
        return fail(why, whysize, "truncated");
    }
    uint64_t size = store_rd64(mem + 8), sum = store_rd64(mem + 16);
    if (memcmp(mem, magic, 8) != 0) {
        free(mem);
        return fail(why, whysize, "not a disc cache file");
    }
    if (size != (uint64_t)st.st_size - HEADER) {
        free(mem);
        return fail(why, whysize, "truncated");
    }
    if (store_hash(mem + HEADER, (size_t)size, 0) != sum) {
        free(mem);
        return fail(why, whysize, "checksum mismatch");
    }
    Rd r = {mem + HEADER, mem + st.st_size, false};
    uint32_t tn = take32(&r);
    const char *text = take(&r, tn);
    if (!text || tn != strlen(k->text) || memcmp(text, k->text, tn) != 0) {
        free(mem);
        return fail(why, whysize, "written for another key");
    }
    int32_t counts[6];
    const void *c = take(&r, sizeof counts);
    if (c)
        memcpy(counts, c, sizeof counts);
    if (!c || counts[0] < 0 || counts[0] > 1 << 20) {
        free(mem);
        return fail(why, whysize, "malformed");
    }
    e->mem = mem;
    e->nkernels = counts[0];
    e->nlaunch = counts[1];
    e->nlibrary = counts[2];
    e->nepilogue = counts[3];
    e->nskinny = counts[4];
    e->nsplit = counts[5];
    e->kdesc = calloc((size_t)e->nkernels + 1, sizeof *e->kdesc);
    if (!e->kdesc) {
        cache_entry_free(e);
        return fail(why, whysize, "out of memory");
    }
    for (int i = 0; i < e->nkernels && !r.bad; i++) {
        uint32_t n = take32(&r);
        const char *s = take(&r, n);
        if (s && n && !(e->kdesc[i] = strndup(s, n)))
            r.bad = true;
    }
    uint32_t nobj = take32(&r);
    if (nobj < 1 || nobj > CACHE_MAX_OBJECTS)
        r.bad = true;
    for (uint32_t i = 0; !r.bad && i < nobj; i++) {
        const void *q = take(&r, 8);
        uint64_t on = q ? store_rd64(q) : 0;
        e->obj[i] = take(&r, on);
        e->objsize[i] = (size_t)on;
        if (on == 0)
            r.bad = true;
    }
    e->nobj = r.bad ? 0 : (int)nobj;
    if (r.bad || r.p != r.end) {
        cache_entry_free(e);
        return fail(why, whysize, "malformed");
    }
    utimensat(AT_FDCWD, path, NULL, 0); /* recently used (see STORE_CAP) */
    return true;
}

size_t cache_code_bytes(const CacheEntry *e)
{
    size_t n = 0;
    for (int i = 0; i < e->nobj; i++)
        n += e->objsize[i];
    return n;
}

void cache_entry_free(CacheEntry *e)
{
    for (int i = 0; e->kdesc && i < e->nkernels; i++)
        free(e->kdesc[i]);
    free(e->kdesc);
    free(e->mem);
    memset(e, 0, sizeof *e);
}

/* ---- writing -------------------------------------------------------------- */

static bool put(FILE *f, const void *p, size_t n) { return n == 0 || fwrite(p, 1, n, f) == n; }

bool cache_store(const char *dir, const CacheKey *k, const CacheEntry *e, Diag *d)
{
    if (!store_mkdirs(dir))
        return diag_setk(d, DIAG_RESOURCE, "error: cannot create the cache directory %s: %s", dir, strerror(errno));
    /* the payload in memory first: its checksum goes before it */
    char *pay = NULL;
    size_t plen = 0;
    FILE *m = open_memstream(&pay, &plen);
    if (!m)
        return diag_oom(d);
    uint32_t tn = (uint32_t)strlen(k->text);
    int32_t counts[6] = {e->nkernels, e->nlaunch, e->nlibrary, e->nepilogue, e->nskinny, e->nsplit};
    bool ok = put(m, &tn, 4) && put(m, k->text, tn) &&
              put(m, counts, sizeof counts);
    for (int i = 0; ok && i < e->nkernels; i++) {
        const char *s = e->kdesc ? e->kdesc[i] : NULL;
        uint32_t n = s ? (uint32_t)strlen(s) : 0;
        ok = put(m, &n, 4) && put(m, s, n);
    }
    uint32_t nobj = (uint32_t)e->nobj;
    ok = ok && put(m, &nobj, 4);
    for (int i = 0; ok && i < e->nobj; i++) {
        uint64_t on = e->objsize[i];
        ok = put(m, &on, 8) && put(m, e->obj[i], e->objsize[i]);
    }
    ok = !ferror(m) && ok;
    if (fclose(m) != 0 || !ok) {
        free(pay);
        return diag_oom(d);
    }
    unsigned char hdr[HEADER];
    uint64_t size = plen, sum = store_hash(pay, plen, 0);
    memcpy(hdr, magic, 8);
    memcpy(hdr + 8, &size, 8);
    memcpy(hdr + 16, &sum, 8);
    char tmp[4200], path[4200];
    snprintf(path, sizeof path, "%s/%s.jit", dir, k->name);
    snprintf(tmp, sizeof tmp, "%s/.%s.XXXXXX", dir, k->name);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        free(pay);
        return diag_setk(d, DIAG_RESOURCE, "error: cannot write in the cache directory %s: %s", dir, strerror(errno));
    }
    FILE *f = fdopen(fd, "wb");
    ok = f && fwrite(hdr, 1, HEADER, f) == HEADER && fwrite(pay, 1, plen, f) == plen;
    ok = (f ? fclose(f) == 0 : close(fd) == 0) && ok;
    free(pay);
    if (!ok)
        unlink(tmp);
    if (!ok || !store_publish(tmp, path))
        return diag_setk(d, DIAG_RESOURCE, "error: cannot write %s: %s", path, strerror(errno));
    store_trim(dir, STORE_CAP, (int64_t)(HEADER + plen));
    return true;
}
