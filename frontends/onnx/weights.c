/*
 * weights.c — a large model's weights without protobuf-c's copies, and the
 * store that keeps them aligned on disk for the next process.
 *
 * protobuf-c unpacks a ModelProto by copying every bytes field, so each
 * load copied BERT-base's 415 MB of raw_data into fresh memory. Fresh
 * memory is the dear part: the kernel clears every page first, and on a
 * VM the host may have to back it too (a load of BERT-base took 80 ms on a
 * good run and a second on a bad one, 85% of it in clear_page). The data
 * cannot be used where it lies in the file: ONNX puts raw_data at any byte
 * offset (in the bench's models one weight in four is even 4-byte
 * aligned), and the kernels, oneDNN and the interpreter want at least
 * their element's alignment.
 *
 * So, for a file whose initializers carry raw_data of WEIGHTS_MIN bytes or
 * more (OnnxOpts.weights_min):
 *
 *   1. a walk over the protobuf wire format finds those fields (field
 *      numbers from onnx.proto: ModelProto.graph = 7, GraphProto.initializer
 *      = 5, TensorProto.raw_data = 9) and writes a copy of the file without
 *      them, the enclosing lengths made again; only that copy (the graph's
 *      structure, a few hundred KB) goes through protobuf-c, and each
 *      stripped initializer's raw_data is then pointed at its bytes;
 *   2. the bytes come from the store, when there is one (OnnxOpts.store,
 *      the directory of the JIT's cache): DIR/KEY.wts, KEY a hash of the
 *      model file's device and inode, holding the file's identity (device,
 *      inode, size, mtime, ctime), where each weight came from in it, the
 *      weight's xxHash64, and the weights at 4 KiB-aligned offsets. The
 *      entry is mapped read-only and shared: no copy, no fresh memory, and
 *      processes running one model share its pages. An entry another user
 *      owns is not read. Every weight's hash is
 *      checked, so a damaged entry is never trusted, unless the entry's
 *      mark (KEY.chk, ir/store.c) says it was found whole before and its
 *      status (inode, size, mtime, ctime) has not changed since: then its
 *      435 MB (BERT-base) are not read at all. The hashes are handed on
 *      to the JIT's cache key (Const.hash_of), which then need not read
 *      the weights again;
 *   3. without a usable entry (the first load, a changed model, damage)
 *      the weights are written to a new one from the file's mapping and
 *      that is mapped; where nothing can be written (no store, a full
 *      disk, a file changed in the last OnnxOpts.settle_ms, whose mtime and
 *      ctime could still change within one tick of the clock) they are
 *      copied into aligned memory instead.
 *
 * What the walk does not follow (a group, a field cut short, the graph
 * field given twice, which protobuf merges) sends the load the plain way,
 * the whole file through protobuf-c, which then says what is wrong.
 *
 * A graph whose weights came from the store names it (Graph.store), and
 * its weights carry their hashes (Const.hash_of): what is made from them
 * later is kept in the store too, under those hashes (ir/store.h,
 * store_derived): horizontal fusion's weights side by side, and the
 * runtime's packed copies (a compiled model registers the weights,
 * disc_rt_known_add), so a later process's compile and first run map
 * them rather than make them in fresh memory.
 */
#define _GNU_SOURCE /* fallocate */
#include "frontends/onnx/internal.h"
#include "ir/store.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum {
    WEIGHTS_MIN = 64 << 10, /* a raw_data this long is taken out of unpacking */
    SETTLE_MS = 2000,
    ALIGN = 4096,           /* of each weight in an entry */
    HEADER = 24,            /* magic, index bytes, index checksum */
    IDENT = STORE_IDENT,    /* u64s of a file's identity (store_identity) */
    SPAN_U64 = 4,           /* u64s of a weight's index entry */
};

static const char magic[8] = "DISCWTS1";

/* A large raw_data: where it is in the file, where it went. */
typedef struct Span {
    uint64_t off, len;  /* the bytes in the model file */
    int tensor;         /* the initializer's index in the graph */
    uint64_t at;        /* its offset in the store's entry */
    uint64_t hash;      /* store_hash(bytes, len, len), when hashed */
    const void *data;   /* the bytes now: in the mapped entry or the copies */
} Span;

/* What the graph keeps (graph_keep): the unpacked model whose stripped
 * initializers point into map or heap. */
struct OnnxWeights {
    Onnx__ModelProto *m;
    Span *span;
    int n;
    bool hashed;        /* span[].hash is known */
    bool checked;       /* the store's entry read whole to check the hashes */
    void *map;          /* the store's entry, mapped */
    size_t maplen;
    void *heap;         /* or the copies */
};

/* ---- the walk over the wire format ----------------------------------------- */

typedef struct Walk {
    const uint8_t *base; /* the model file */
    uint64_t min;
    Span *span;
    int n, cap;
    int init;            /* initializers passed by the writing pass */
    int graphs;          /* ModelProto.graph fields seen by the last pass */
    bool oom;
} Walk;

typedef struct Field {
    const uint8_t *at, *val, *end; /* the tag, the payload, past the field */
    uint64_t num;
    int wt;
} Field;

/* Bytes out; with p NULL only counted. */
typedef struct Out {
    uint8_t *p;
    size_t n;
} Out;

static bool varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t x = 0;
    for (int s = 0; s < 64 && *p < end; s += 7) {
        uint8_t b = *(*p)++;
        x |= (uint64_t)(b & 0x7f) << s;
        if (!(b & 0x80)) {
            *v = x;
            return true;
        }
    }
    return false;
}

/* The field at *p (advanced past it); false where the bytes are not one. */
static bool field(const uint8_t **p, const uint8_t *end, Field *f)
{
    uint64_t tag, n;
    f->at = *p;
    if (!varint(p, end, &tag))
        return false;
    f->num = tag >> 3;
    f->wt = (int)(tag & 7);
    f->val = *p;
    switch (f->wt) {
    case 0:
        if (!varint(p, end, &n))
            return false;
        break;
    case 1:
    case 5:
        n = f->wt == 1 ? 8 : 4;
        if ((uint64_t)(end - *p) < n)
            return false;
        *p += n;
        break;
    case 2:
        if (!varint(p, end, &n) || n > (uint64_t)(end - *p))
            return false;
        f->val = *p;
        *p += n;
        break;
    default: /* groups and the reserved types */
        return false;
    }
    f->end = *p;
    return f->num != 0;
}

static void put(Out *o, const void *src, size_t n)
{
    if (o->p && n)
        memcpy(o->p + o->n, src, n);
    o->n += n;
}

static void put_varint(Out *o, uint64_t v)
{
    uint8_t b[10];
    int k = 0;
    do {
        b[k++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    put(o, b, (size_t)k);
}

typedef bool Inner(Walk *w, const uint8_t *p, const uint8_t *end, Out *o);

/* A length-delimited field whose payload inner rewrites: measured first,
 * as its length goes before it. */
static bool nested(Walk *w, const Field *f, Inner *inner, Out *o)
{
    Out m = {NULL, 0};
    if (!inner(w, f->val, f->end, &m))
        return false;
    put_varint(o, f->num << 3 | 2);
    put_varint(o, m.n);
    if (!o->p) {
        o->n += m.n;
        return true;
    }
    Out sub = {o->p + o->n, 0};
    if (!inner(w, f->val, f->end, &sub) || sub.n != m.n)
        return false;
    o->n += sub.n;
    return true;
}

/* TensorProto: without its raw_data fields when the last of them (the one
 * protobuf keeps) is large; the writing pass records it. */
static bool tensor(Walk *w, const uint8_t *p, const uint8_t *end, Out *o)
{
    Field f, last = {0};
    bool have = false;
    for (const uint8_t *q = p; q < end;) {
        if (!field(&q, end, &f))
            return false;
        if (f.num == 9 && f.wt == 2) {
            last = f;
            have = true;
        }
    }
    uint64_t len = have ? (uint64_t)(last.end - last.val) : 0;
    if (!have || len < w->min) {
        put(o, p, (size_t)(end - p));
        return true;
    }
    for (const uint8_t *q = p; q < end;) {
        field(&q, end, &f);
        if (!(f.num == 9 && f.wt == 2))
            put(o, f.at, (size_t)(f.end - f.at));
    }
    if (o->p) {
        if (w->n == w->cap) {
            int cap = w->cap ? 2 * w->cap : 64;
            Span *s = realloc(w->span, (size_t)cap * sizeof *s);
            if (!s) {
                w->oom = true;
                return false;
            }
            w->span = s;
            w->cap = cap;
        }
        w->span[w->n++] = (Span){.off = (uint64_t)(last.val - w->base), .len = len, .tensor = w->init};
    }
    return true;
}

/* GraphProto: its initializers rewritten, the rest as it is. */
static bool graph(Walk *w, const uint8_t *p, const uint8_t *end, Out *o)
{
    Field f;
    while (p < end) {
        if (!field(&p, end, &f))
            return false;
        if (f.num == 5 && f.wt == 2) {
            if (!nested(w, &f, tensor, o))
                return false;
            if (o->p)
                w->init++;
        } else {
            put(o, f.at, (size_t)(f.end - f.at));
        }
    }
    return true;
}

/* ModelProto: its graph rewritten, the rest as it is. */
static bool model(Walk *w, const uint8_t *p, const uint8_t *end, Out *o)
{
    Field f;
    w->graphs = 0;
    while (p < end) {
        if (!field(&p, end, &f))
            return false;
        if (f.num == 7 && f.wt == 2) {
            if (++w->graphs > 1 || !nested(w, &f, graph, o))
                return false;
        } else {
            put(o, f.at, (size_t)(f.end - f.at));
        }
    }
    return true;
}

/* The model file without its large raw_data (malloc'd, *outlen bytes),
 * those in w->span; NULL where the walk cannot follow the file or nothing
 * is large. */
static uint8_t *strip(Walk *w, const uint8_t *buf, size_t len, size_t *outlen)
{
    Out m = {NULL, 0};
    if (!model(w, buf, buf + len, &m) || m.n + w->min > len)
        return NULL;
    uint8_t *out = malloc(m.n ? m.n : 1);
    Out o = {out, 0};
    if (!out || !model(w, buf, buf + len, &o) || o.n != m.n || w->n == 0) {
        free(out);
        return NULL;
    }
    *outlen = o.n;
    return out;
}

/* ---- the store's entries ------------------------------------------------------ */

static uint64_t round_up(uint64_t x) { return (x + ALIGN - 1) / ALIGN * ALIGN; }

static size_t index_bytes(int n) { return (IDENT + (size_t)n * SPAN_U64) * 8 + 4; }

/* DIR/KEY.wts for the file of id (or its temporary name, ext NULL): KEY
 * from its device and inode, so a changed model replaces its entry. */
static void entry_path(const char *dir, const uint64_t id[IDENT], char *buf, size_t size, const char *ext)
{
    uint64_t key[2] = {store_hash(id, 16, 0), store_hash(id, 16, 0x165667B19E3779F9ull)};
    store_path(dir, key, ext, buf, size);
}

static bool why(char *buf, size_t size, const char *msg)
{
    if (buf)
        snprintf(buf, size, "%s", msg);
    return false;
}

bool onnx_store_intact(const void *p, size_t len)
{
    const uint8_t *m = p;
    uint64_t hdr[2];
    uint32_t n;
    if (len < HEADER + IDENT * 8 + 4 || memcmp(m, magic, 8) != 0)
        return false;
    memcpy(hdr, m + 8, sizeof hdr);
    memcpy(&n, m + HEADER + IDENT * 8, 4);
    if (n > (uint32_t)1 << 24 || hdr[0] != index_bytes((int)n) || hdr[0] > len - HEADER ||
        store_hash(m + HEADER, hdr[0], 0) != hdr[1])
        return false;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t e[SPAN_U64];
        memcpy(e, m + HEADER + IDENT * 8 + 4 + (size_t)i * SPAN_U64 * 8, sizeof e);
        if (e[2] > len || e[1] > len - e[2] || store_hash(m + e[2], e[1], e[1]) != e[3])
            return false;
    }
    return true;
}

/* Maps DIR's entry for the file of id when it holds exactly w's spans,
 * every weight's hash checked; fills the spans' data and hashes. */
static bool entry_load(const char *dir, const uint64_t id[IDENT], Walk *w, OnnxWeights *ow, char *whybuf, size_t whysize)
{
    char path[4200], msg[64];
    entry_path(dir, id, path, sizeof path, "wts");
    size_t ilen = index_bytes(w->n), len;
    const char *bad = NULL;
    struct stat st;
    struct timespec began = store_now();
    uint8_t *p = store_map(path, HEADER + ilen, &len, &bad, &st);
    if (!p) {
        snprintf(msg, sizeof msg, !strcmp(bad, "no entry") ? "%s" : "entry %s", bad);
        return why(whybuf, whysize, msg);
    }
    uint64_t hdr[2], idx[IDENT], e[SPAN_U64];
    uint32_t n;
    memcpy(hdr, p + 8, sizeof hdr);
    if (memcmp(p, magic, 8) != 0 || hdr[0] != ilen)
        bad = "entry for another model or version";
    else if (store_hash(p + HEADER, ilen, 0) != hdr[1])
        bad = "entry's index damaged";
    if (!bad) {
        memcpy(idx, p + HEADER, sizeof idx);
        memcpy(&n, p + HEADER + sizeof idx, 4);
        if (memcmp(idx, id, sizeof idx) != 0 || n != (uint32_t)w->n)
            bad = "entry for another version of the model";
    }
    for (int i = 0; !bad && i < w->n; i++) {
        memcpy(e, p + HEADER + IDENT * 8 + 4 + (size_t)i * SPAN_U64 * 8, sizeof e);
        Span *s = &w->span[i];
        if (e[0] != s->off || e[1] != s->len)
            bad = "entry for another version of the model";
        else if (e[2] % ALIGN || e[2] > len || e[1] > len - e[2])
            bad = "entry truncated";
        s->at = e[2];
        s->hash = e[3];
    }
    /* unchanged since it was found whole (ir/store.c, "marks"): trusted
     * without reading its 435 MB (BERT-base) to check the hashes */
    bool marked = !bad && store_marked(path, &st);
    if (!bad && !marked) {
#ifdef MADV_POPULATE_READ
        /* all of it is read next: populated at once, not a fault per 64 KiB */
        madvise(p, len, MADV_POPULATE_READ);
#endif
        const void **ptr = malloc((size_t)w->n * sizeof *ptr);
        size_t *nb = malloc((size_t)w->n * sizeof *nb);
        uint64_t *h = malloc((size_t)w->n * sizeof *h);
        if (ptr && nb && h) {
            for (int i = 0; i < w->n; i++) {
                ptr[i] = p + w->span[i].at;
                nb[i] = w->span[i].len;
            }
            store_hash_many(ptr, nb, h, w->n);
            for (int i = 0; !bad && i < w->n; i++)
                if (h[i] != w->span[i].hash)
                    bad = "entry's weights damaged";
        } else {
            bad = "out of memory";
        }
        free(ptr);
        free(nb);
        free(h);
        if (!bad)
            store_mark(path, &st, &began);
    }
    if (bad) {
        munmap(p, len);
        return why(whybuf, whysize, bad);
    }
    for (int i = 0; i < w->n; i++)
        w->span[i].data = p + w->span[i].at;
    ow->map = p;
    ow->maplen = len;
    ow->hashed = true;
    ow->checked = !marked;
    store_used(path); /* recently used (ir/store.h) */
    return true;
}

static bool write_all(int fd, const uint8_t *p, uint64_t n, uint64_t at)
{
    while (n) {
        ssize_t k = pwrite(fd, p, n < ((size_t)1 << 30) ? (size_t)n : (size_t)1 << 30, (off_t)at);
        if (k <= 0)
            return false;
        p += k;
        n -= (uint64_t)k;
        at += (uint64_t)k;
    }
    return true;
}

typedef struct HashAll {
    const void **p;
    size_t *n;
    uint64_t *out;
    int count;
} HashAll;

static void *hash_all(void *arg)
{
    HashAll *a = arg;
    store_hash_many(a->p, a->n, a->out, a->count);
    return NULL;
}

/* A new entry for the file of id from its mapping buf, renamed into place
 * and mapped; fills the spans' data and hashes. */
static bool entry_store(const char *dir, const uint64_t id[IDENT], const uint8_t *buf, Walk *w, OnnxWeights *ow,
                        char *whybuf, size_t whysize)
{
    if (!store_mkdirs(dir))
        return why(whybuf, whysize, "cannot create the store's directory");
    size_t ilen = index_bytes(w->n);
    uint64_t at = round_up(HEADER + ilen);
    for (int i = 0; i < w->n; i++) {
        w->span[i].at = at;
        at = round_up(at + w->span[i].len);
    }
    uint64_t total = at;
    const void **ptr = malloc((size_t)w->n * sizeof *ptr);
    size_t *nb = malloc((size_t)w->n * sizeof *nb);
    uint64_t *h = malloc((size_t)w->n * sizeof *h);
    uint8_t *index = malloc(HEADER + ilen);
    if (!ptr || !nb || !h || !index) {
        free(ptr);
        free(nb);
        free(h);
        free(index);
        return why(whybuf, whysize, "out of memory");
    }
    for (int i = 0; i < w->n; i++) {
        ptr[i] = buf + w->span[i].off;
        nb[i] = w->span[i].len;
    }
    char tmp[4200], path[4200];
    entry_path(dir, id, tmp, sizeof tmp, NULL);
    entry_path(dir, id, path, sizeof path, "wts");
    int fd = mkstemp(tmp);
    if (fd < 0) {
        free(ptr);
        free(nb);
        free(h);
        free(index);
        return why(whybuf, whysize, "cannot write in the store's directory");
    }
    /* the weights written while another thread hashes them */
    HashAll ha = {ptr, nb, h, w->n};
    pthread_t tid;
    bool threaded = pthread_create(&tid, NULL, hash_all, &ha) == 0;
    if (!threaded)
        hash_all(&ha);
    /* the blocks allocated at once (ext4 reserved them page by page) */
    bool ok = fallocate(fd, 0, 0, (off_t)total) == 0 || ftruncate(fd, (off_t)total) == 0;
    for (int i = 0; ok && i < w->n; i++)
        ok = write_all(fd, buf + w->span[i].off, w->span[i].len, w->span[i].at);
    if (threaded)
        pthread_join(tid, NULL);
    uint8_t *q = index + HEADER;
    memcpy(q, id, IDENT * 8);
    q += IDENT * 8;
    uint32_t n = (uint32_t)w->n;
    memcpy(q, &n, 4);
    q += 4;
    for (int i = 0; i < w->n; i++) {
        w->span[i].hash = h[i];
        uint64_t e[SPAN_U64] = {w->span[i].off, w->span[i].len, w->span[i].at, h[i]};
        memcpy(q, e, sizeof e);
        q += sizeof e;
    }
    uint64_t hdr[2] = {ilen, store_hash(index + HEADER, ilen, 0)};
    memcpy(index, magic, 8);
    memcpy(index + 8, hdr, sizeof hdr);
    free(ptr);
    free(nb);
    free(h);
    /* the index last: an entry cut short by a full disk has none */
    ok = ok && write_all(fd, index, HEADER + ilen, 0);
    free(index);
    void *p = ok ? mmap(NULL, (size_t)total, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
    ok = close(fd) == 0 && p != MAP_FAILED;
    if (!ok)
        unlink(tmp);
    if (!ok || !store_publish(tmp, path)) {
        if (p != MAP_FAILED)
            munmap(p, (size_t)total);
        return why(whybuf, whysize, "cannot write the store's entry");
    }
    store_mark(path, NULL, NULL); /* written whole: a later load need not read it */
    for (int i = 0; i < w->n; i++)
        w->span[i].data = (uint8_t *)p + w->span[i].at;
    ow->map = p;
    ow->maplen = (size_t)total;
    ow->hashed = true;
    return true;
}

/* The spans copied into aligned memory. */
static bool copy_heap(const uint8_t *buf, Walk *w, OnnxWeights *ow)
{
    uint64_t at = 0;
    for (int i = 0; i < w->n; i++) {
        w->span[i].at = at;
        at = round_up(at + w->span[i].len);
    }
    if (at > SIZE_MAX || !(ow->heap = alloc_huge((size_t)at)))
        return false;
    for (int i = 0; i < w->n; i++) {
        w->span[i].data = (uint8_t *)ow->heap + w->span[i].at;
        memcpy((uint8_t *)ow->heap + w->span[i].at, buf + w->span[i].off, w->span[i].len);
    }
    return true;
}

/* ---- the load ------------------------------------------------------------------ */

static void weights_free(void *p)
{
    OnnxWeights *ow = p;
    if (!ow)
        return;
    if (ow->m) {
        for (int i = 0; i < ow->n; i++) { /* not protobuf-c's to free */
            OTensor *t = ow->m->graph->initializer[ow->span[i].tensor];
            t->raw_data.data = NULL;
            t->raw_data.len = 0;
        }
        ProtobufCAllocator a = onnx_pb_alloc(NULL);
        onnx__model_proto__free_unpacked(ow->m, &a);
    }
    if (ow->map)
        munmap(ow->map, ow->maplen);
    free(ow->heap);
    free(ow->span);
    free(ow);
}

static int64_t ms_since(const struct timespec *t)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return (int64_t)(now.tv_sec - t->tv_sec) * 1000 + (now.tv_nsec - t->tv_nsec) / 1000000;
}

bool onnx_weights_import(const void *buf, size_t len, const struct stat *st, const char *name, const char *dir,
                         const OnnxOpts *o, Graph **out, Diag *d)
{
    OnnxWeightsReport rep = {.way = WEIGHTS_UNPACKED};
    Walk w = {.base = buf, .min = o && o->weights_min ? o->weights_min : WEIGHTS_MIN};
    size_t slen = 0;
    uint8_t *s = strip(&w, buf, len, &slen);
    OnnxWeights *ow = s ? calloc(1, sizeof *ow) : NULL;
    bool oom = false;
    ProtobufCAllocator a = onnx_pb_alloc(&oom);
    Onnx__ModelProto *m = ow ? onnx__model_proto__unpack(&a, slen, s) : NULL;
    free(s);
    /* each stripped initializer is there, and without raw_data */
    bool fits = m && m->graph;
    for (int i = 0; fits && i < w.n; i++)
        fits = (size_t)w.span[i].tensor < m->graph->n_initializer &&
               !m->graph->initializer[w.span[i].tensor]->has_raw_data;
    if (!fits) {
        if (m)
            onnx__model_proto__free_unpacked(m, &a);
        free(ow);
        free(w.span);
        if (o && o->report)
            *o->report = rep;
        return false; /* the plain way */
    }
    ow->m = m;
    ow->span = w.span;
    ow->n = w.n;
    rep.n = w.n;
    for (int i = 0; i < w.n; i++)
        rep.bytes += w.span[i].len;

    const char *store = o ? o->store : NULL;
    int settle = o && o->settle_ms ? o->settle_ms : SETTLE_MS;
    uint64_t id[IDENT];
    store_identity(st, id);
    bool got = false;
    if (!store) {
        snprintf(rep.why, sizeof rep.why, "no store");
    } else if (entry_load(store, id, &w, ow, rep.why, sizeof rep.why)) {
        rep.way = WEIGHTS_MAPPED;
        rep.checked = ow->checked;
        got = true;
    } else if (ms_since(&st->st_mtim) < settle || ms_since(&st->st_ctim) < settle) {
        snprintf(rep.why, sizeof rep.why, "the model file changed less than %d ms ago", settle);
    } else if (entry_store(store, id, buf, &w, ow, rep.why, sizeof rep.why)) {
        rep.way = WEIGHTS_STORED;
        got = true;
        store_trim(store, STORE_CAP, (int64_t)ow->maplen);
    }
    if (!got) {
        if (!copy_heap(buf, &w, ow)) {
            weights_free(ow);
            diag_setk(d, DIAG_RESOURCE, "%s: error: out of memory for the model's weights (%llu bytes)", name,
                      (unsigned long long)rep.bytes);
            *out = NULL;
            return true;
        }
        rep.way = WEIGHTS_COPIED;
    }
    for (int i = 0; i < w.n; i++) {
        OTensor *t = m->graph->initializer[w.span[i].tensor];
        t->has_raw_data = 1;
        t->raw_data.len = (size_t)w.span[i].len;
        t->raw_data.data = (uint8_t *)w.span[i].data;
    }
    if (o && o->report)
        *o->report = rep;
    *out = onnx_import_model(m, ow, weights_free, ow, name, dir, o, d);
    if (*out && got && !((*out)->store = arena_strdup(&(*out)->arena, store))) { /* for derived constants */
        graph_free(*out);
        *out = NULL;
        diag_setk(d, DIAG_RESOURCE, "%s: error: out of memory", name);
    }
    return true;
}

bool onnx_weights_hash(const OnnxWeights *ow, const void *data, size_t nbytes, uint64_t *hash)
{
    if (!ow || !ow->hashed)
        return false;
    for (int i = 0; i < ow->n; i++)
        if (ow->span[i].data == data && ow->span[i].len == nbytes) {
            *hash = ow->span[i].hash;
            return true;
        }
    return false;
}
