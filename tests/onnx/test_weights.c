/*
 * test_weights.c — large weights loaded apart from protobuf-c's unpacking
 * (frontends/onnx/weights.c): the graph is the one the plain unpacking
 * gives, from copies in memory, from a new entry of the store and from a
 * mapped one; damaged, stale, cut-short and unwritable entries are never
 * trusted; files the walk does not follow go the plain way.
 *
 *   test_weights MODELS_DIR TMP_DIR
 */
#include "frontends/onnx/onnx.h"
#include "ir/store.h"
#include "onnx.pb-c.h"
#include "tests/unit/check.h"
#include "tests/unit/files.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char root[1024];

/* ---- bytes ---------------------------------------------------------------- */

typedef struct Buf {
    uint8_t *p;
    size_t n;
} Buf;

static void add(Buf *b, const void *p, size_t n)
{
    b->p = realloc(b->p, b->n + n + 1);
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void add_varint(Buf *b, uint64_t v)
{
    do {
        uint8_t c = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        add(b, &c, 1);
        v >>= 7;
    } while (v);
}

/* field num, length-delimited, payload p */
static void add_field(Buf *b, int num, const void *p, size_t n)
{
    add_varint(b, (uint64_t)num << 3 | 2);
    add_varint(b, n);
    add(b, p, n);
}

static void write_file(const char *path, const Buf *b)
{
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(b->p, 1, b->n, f) == b->n);
    if (f)
        fclose(f);
}

/* ---- the models ------------------------------------------------------------- */

static Onnx__ModelProto *mlp;   /* tests/onnx/models/mlp.onnx, unpacked */
static float w1[16 * 32], b1[32], w2[4 * 32];

static void fill(uint32_t seed)
{
    for (int i = 0; i < 16 * 32; i++)
        w1[i] = (float)((seed = seed * 1103515245u + 12345u) >> 16) / 65536.0f - 0.5f;
    for (int i = 0; i < 32; i++)
        b1[i] = (float)i * 0.25f + (float)seed;
    for (int i = 0; i < 4 * 32; i++)
        w2[i] = (float)(i % 7) - (float)(seed % 5);
}

/* mlp with w1, b1, w2 from the arrays (2048, 128 and 512 bytes of raw_data;
 * b2 keeps its 16); extra: bytes appended to the GraphProto (more
 * initializers); graph2: a second ModelProto.graph field's payload. */
static Buf model_bytes(const Buf *extra, const Buf *graph2)
{
    Onnx__GraphProto *g = mlp->graph;
    ProtobufCBinaryData saved[3];
    float *data[3] = {w1, b1, w2};
    size_t nb[3] = {sizeof w1, sizeof b1, sizeof w2};
    for (int i = 0; i < 3; i++) {
        saved[i] = g->initializer[i]->raw_data;
        g->initializer[i]->raw_data = (ProtobufCBinaryData){nb[i], (uint8_t *)data[i]};
    }
    Buf gb = {malloc(onnx__graph_proto__get_packed_size(g) + 1), 0};
    gb.n = onnx__graph_proto__pack(g, gb.p);
    for (int i = 0; i < 3; i++)
        g->initializer[i]->raw_data = saved[i];
    if (extra)
        add(&gb, extra->p, extra->n);
    mlp->graph = NULL;
    Buf mb = {malloc(onnx__model_proto__get_packed_size(mlp) + 1), 0};
    mb.n = onnx__model_proto__pack(mlp, mb.p);
    mlp->graph = g;
    add_field(&mb, 7, gb.p, gb.n);
    if (graph2)
        add_field(&mb, 7, graph2->p, graph2->n);
    free(gb.p);
    return mb;
}

/* An initializer "extra" of 64 floats whose raw_data is given twice (protobuf
 * keeps the last): first nfirst floats of 1.0, then 64 of 2.0, or the
 * other way round when last_small. */
static Buf extra_init(bool last_small)
{
    Onnx__TensorProto t = ONNX__TENSOR_PROTO__INIT;
    int64_t dims[1] = {last_small ? 1 : 64};
    t.name = "extra";
    t.n_dims = 1;
    t.dims = dims;
    t.has_data_type = 1;
    t.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    Buf tb = {malloc(onnx__tensor_proto__get_packed_size(&t) + 1), 0};
    tb.n = onnx__tensor_proto__pack(&t, tb.p);
    float a[64], b[64];
    for (int i = 0; i < 64; i++)
        a[i] = 1.0f, b[i] = 2.0f;
    if (last_small) {
        add_field(&tb, 9, a, sizeof a);
        add_field(&tb, 9, b, sizeof b[0]);
    } else {
        add_field(&tb, 9, a, 16);
        add_field(&tb, 9, b, sizeof b);
    }
    Buf eb = {NULL, 0};
    add_field(&eb, 5, tb.p, tb.n);
    free(tb.p);
    return eb;
}

/* ---- graphs compared ---------------------------------------------------------- */

static char *text(const Graph *g)
{
    char *s = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&s, &n);
    graph_print(f, g, &(PrintOpts){16, true, false});
    fclose(f);
    return s;
}

/* The same ops and constants, byte for byte. */
static bool same(const Graph *a, const Graph *b)
{
    char *ta = text(a), *tb = text(b);
    bool ok = !strcmp(ta, tb);
    free(ta);
    free(tb);
    const Op *x = a->first, *y = b->first;
    for (; ok && x && y; x = x->next, y = y->next)
        if (x->kind == OP_CONST)
            ok = y->kind == OP_CONST && x->cst->nbytes == y->cst->nbytes &&
                 !memcmp(x->cst->data, y->cst->data, x->cst->nbytes);
    return ok && !x && !y;
}

/* Every constant whose hash the loader gave: the right hash, aligned. */
static int hashed_consts(const Graph *g, bool *right)
{
    int n = 0;
    *right = true;
    for (const Op *op = g->first; op; op = op->next)
        if (op->kind == OP_CONST && op->cst->hash_of && op->cst->hash_of == op->cst->data) {
            n++;
            *right = *right && op->cst->hash == store_hash(op->cst->data, op->cst->nbytes, op->cst->nbytes) &&
                     (uintptr_t)op->cst->data % 4096 == 0;
        }
    return n;
}

static Graph *plain(const Buf *b)
{
    Diag d = {0};
    Graph *g = onnx_import_buffer(b->p, b->n, "plain", NULL, NULL, &d);
    CHECK_MSG(g != NULL, "%s", d.msg);
    return g;
}

static Graph *load(const char *path, const char *store, size_t min, int settle, OnnxWeightsReport *r)
{
    Diag d = {0};
    OnnxOpts o = {.store = store, .weights_min = min, .settle_ms = settle, .report = r};
    memset(r, 0, sizeof *r);
    Graph *g = onnx_import_file(path, &o, &d);
    CHECK_MSG(g != NULL, "%s: %s", path, d.msg);
    return g;
}

/* The store's one entry, in buf. */
static bool entry(const char *dir, char *buf, size_t size) { return files_ending(dir, ".wts", buf, size) == 1; }

static void poke(const char *path, long at)
{
    FILE *f = fopen(path, "r+b");
    int c = f && fseek(f, at, SEEK_SET) == 0 ? fgetc(f) : EOF;
    CHECK(c != EOF && fseek(f, at, SEEK_SET) == 0 && fputc(c ^ 0x5a, f) != EOF);
    if (f)
        fclose(f);
}

/* ---- the tests ------------------------------------------------------------------ */

static void check_way(const OnnxWeightsReport *r, OnnxWeightsWay way, int n, const char *why)
{
    CHECK_MSG(r->way == way && r->n == n, "way %d (want %d), %d weights (want %d), why '%s'", r->way, way, r->n,
              n, r->why);
    if (why)
        CHECK_MSG(strstr(r->why, why), "why '%s', want '%s'", r->why, why);
}

static void test_store(void)
{
    char path[1200], store[1200], e[1400];
    snprintf(path, sizeof path, "%s/mlp.onnx", root);
    snprintf(store, sizeof store, "%s/store", root);
    fill(1);
    Buf b = model_bytes(NULL, NULL);
    write_file(path, &b);
    Graph *p = plain(&b);
    usleep(20000);
    OnnxWeightsReport r;
    bool right;

    /* no store: copies; a large minimum: none taken apart */
    Graph *g = load(path, NULL, 100, 1, &r);
    check_way(&r, WEIGHTS_COPIED, 3, "no store");
    CHECK(g && p && same(g, p) && hashed_consts(g, &right) == 0);
    graph_free(g);
    g = load(path, store, 1 << 20, 1, &r);
    check_way(&r, WEIGHTS_UNPACKED, 0, NULL);
    CHECK(g && p && same(g, p));
    graph_free(g);

    /* a new entry, then the entry mapped; the hashes handed on */
    g = load(path, store, 100, 1, &r);
    check_way(&r, WEIGHTS_STORED, 3, "no entry");
    CHECK(r.bytes == sizeof w1 + sizeof b1 + sizeof w2);
    CHECK(g && p && same(g, p) && hashed_consts(g, &right) == 3 && right);
    graph_free(g);
    CHECK(entry(store, e, sizeof e));
    g = load(path, store, 100, 1, &r);
    check_way(&r, WEIGHTS_MAPPED, 3, NULL);
    CHECK(g && p && same(g, p) && hashed_consts(g, &right) == 3 && right);
    graph_free(g);

    /* marks (ir/store.c): once the file clock's tick has passed, the entry
     * is trusted as marked, not read; a write after that is seen (its
     * ctime moves), and a damaged mark is no mark */
    char mk[1400];
    usleep(20000);
    g = load(path, store, 100, 1, &r); /* the new entry's mark made at the latest here */
    check_way(&r, WEIGHTS_MAPPED, 3, NULL);
    graph_free(g);
    CHECK(files_ending(store, ".chk", mk, sizeof mk) == 1);
    g = load(path, store, 100, 1, &r);
    check_way(&r, WEIGHTS_MAPPED, 3, NULL);
    CHECK_MSG(!r.checked, "a marked entry read whole again");
    CHECK(g && p && same(g, p) && hashed_consts(g, &right) == 3 && right);
    graph_free(g);
    poke(mk, 20);
    g = load(path, store, 100, 1, &r);
    check_way(&r, WEIGHTS_MAPPED, 3, NULL);
    CHECK_MSG(r.checked, "an entry with a damaged mark trusted");
    CHECK(g && p && same(g, p));
    graph_free(g);
    usleep(20000); /* the mark made again at that check, of an entry changed in an earlier tick */
    g = load(path, store, 100, 1, &r);
    CHECK_MSG(r.way == WEIGHTS_MAPPED && !r.checked, "no mark after a check found the entry whole");
    graph_free(g);

    /* a weight damaged, the index damaged, the entry cut short: written again */
    usleep(20000);
    poke(e, 4096 + 100);
    g = load(path, store, 100, 1, &r);
    check_way(&r, WEIGHTS_STORED, 3, "weights damaged");
    CHECK(g && p && same(g, p));
    graph_free(g);
    poke(e, 40);
    g = load(path, store, 100, 1, &r);
    check_way(&r, WEIGHTS_STORED, 3, "index damaged");
    CHECK(g && p && same(g, p));
    graph_free(g);
    if (chown(e, geteuid() + 1, (gid_t)-1) == 0) { /* where the test may give it away */
        g = load(path, store, 100, 1, &r);
        check_way(&r, WEIGHTS_STORED, 3, "another user");
        CHECK(g && p && same(g, p));
        graph_free(g);
    }
    CHECK(truncate(e, 5000) == 0);
    g = load(path, store, 100, 1, &r);
    check_way(&r, WEIGHTS_STORED, 3, "truncated");
    CHECK(g && p && same(g, p));
    graph_free(g);
    g = load(path, store, 100, 1, &r);
    check_way(&r, WEIGHTS_MAPPED, 3, NULL);
    graph_free(g);

    /* the model changed in place, same size: the new weights, never the old */
    fill(2);
    Buf b2 = model_bytes(NULL, NULL);
    CHECK(b2.n == b.n);
    write_file(path, &b2);
    Graph *p2 = plain(&b2);
    g = load(path, store, 100, 100000, &r);
    check_way(&r, WEIGHTS_COPIED, 3, "changed less than");
    CHECK(g && p2 && same(g, p2) && !same(g, p));
    graph_free(g);
    usleep(20000);
    g = load(path, store, 100, 1, &r);
    check_way(&r, WEIGHTS_STORED, 3, "another version");
    CHECK(g && p2 && same(g, p2) && !same(g, p));
    graph_free(g);
    CHECK(entry(store, e, sizeof e)); /* replaced, not added */

    /* a store that cannot be made: copies */
    char bad[1300];
    snprintf(bad, sizeof bad, "%s/sub", path);
    g = load(path, bad, 100, 1, &r);
    check_way(&r, WEIGHTS_COPIED, 3, "cannot create");
    CHECK(g && p2 && same(g, p2));
    graph_free(g);

    /* cut short: the plain way's error */
    Buf half = {b2.p, b2.n / 2};
    write_file(path, &half);
    Diag d = {0};
    OnnxOpts o = {.store = store, .weights_min = 100, .settle_ms = 1, .report = &r};
    CHECK(onnx_import_file(path, &o, &d) == NULL && d.kind == DIAG_PARSE &&
          strstr(d.msg, "cannot parse ONNX model"));
    CHECK(r.way == WEIGHTS_UNPACKED);
    graph_free(p);
    graph_free(p2);
    free(b.p);
    free(b2.p);
}

/* What protobuf does with repeated fields, the walk does too, or declines. */
static void test_wire(void)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/wire.onnx", root);
    fill(3);
    OnnxWeightsReport r;
    for (int last_small = 0; last_small < 2; last_small++) {
        Buf x = extra_init(last_small);
        Buf b = model_bytes(&x, NULL);
        write_file(path, &b);
        Graph *p = plain(&b), *g = load(path, NULL, 100, 1, &r);
        /* the extra's last raw_data is 256 bytes (taken apart) or 4 (left) */
        check_way(&r, WEIGHTS_COPIED, last_small ? 3 : 4, NULL);
        CHECK_MSG(g && p && same(g, p), "extra initializer, last raw_data %s", last_small ? "small" : "large");
        graph_free(g);
        graph_free(p);
        free(b.p);
        free(x.p);
    }
    /* ModelProto.graph twice: protobuf merges; the walk leaves it to protobuf-c */
    Buf empty = {NULL, 0};
    add(&empty, "", 0);
    Buf b = model_bytes(NULL, &empty);
    write_file(path, &b);
    Graph *p = plain(&b), *g = load(path, NULL, 100, 1, &r);
    check_way(&r, WEIGHTS_UNPACKED, 0, NULL);
    CHECK(g && p && same(g, p));
    graph_free(g);
    graph_free(p);
    free(b.p);
    free(empty.p);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: test_weights MODELS_DIR TMP_DIR\n");
        return 2;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/mlp.onnx", argv[1]);
    FILE *f = fopen(path, "rb");
    static uint8_t buf[1 << 16];
    size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f)
        fclose(f);
    mlp = n ? onnx__model_proto__unpack(NULL, n, buf) : NULL;
    snprintf(root, sizeof root, "%s/test_weights.XXXXXX", argv[2]);
    if (!mlp || !mkdtemp(root)) {
        fprintf(stderr, "test_weights: cannot read %s or make a directory in %s\n", path, argv[2]);
        return 1;
    }
    CHECK(mlp->graph && mlp->graph->n_initializer == 4);
    if (mlp->graph && mlp->graph->n_initializer == 4) {
        test_store();
        test_wire();
    }
    onnx__model_proto__free_unpacked(mlp, NULL);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0)
        fprintf(stderr, "test_weights: cannot remove %s\n", root);
    return check_done();
}
