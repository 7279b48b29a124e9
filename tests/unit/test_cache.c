/*
 * test_cache.c — the on-disk cache of JIT-compiled code (codegen/cache.h).
 *
 * Each case compiles models into a fresh temporary cache directory:
 *
 *   concurrent  two processes compile the same model into one empty
 *               directory at once: both succeed with the same outputs, one
 *               complete file and no temporary one is left, and a third
 *               compile is a hit (run first, before this process starts
 *               any thread, so that fork is safe)
 *   hit         the second compile of a model (ONNX: the BERT encoder and
 *               the MobileNet-style CNN; IR text with a host op and
 *               constants) is a hit, and its outputs are bit-identical to
 *               the first's and to a --no-cache compile's
 *   parts       the module compiled in one part and in three (on threads,
 *               codegen/objects.c) gives bit-identical outputs; a file of
 *               three objects is a hit for a one-part compile
 *   key         another constant value, another option or shape hint is a
 *               miss (a file of its own)
 *   corrupt     a cache file cut short, emptied, with a flipped byte in its
 *               code or its header, or written for another key is ignored:
 *               the compile succeeds as a miss, outputs unchanged, and
 *               rewrites the file so the next compile hits
 */
#include "codegen/cache.h"
#include "codegen/codegen.h"
#include "frontends/model.h"
#include "tests/unit/check.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef DISC_SOURCE_DIR
#define DISC_SOURCE_DIR "."
#endif

/* topk is a host op (disc_exec_host_op by its index); %w and %k are
 * constants the flow reaches through the JIT's table */
static const char topk_src[] =
    "graph @c(%x: f32[N, 8]) {\n"
    "  %w = const dense<[0.5, -1.0, 2.0, 0.25, 3.0, -0.5, 1.5, 0.75]> : f32[8]\n"
    "  %k = const dense<[3]> : i64[1]\n"
    "  %a = mul(%x, %w) : f32[N, 8]\n"
    "  %e = exp(%a) : f32[N, 8]\n"
    "  %t, %i = topk(%e, %k) {axis = 1, largest = 1, sorted = 1} : f32[N, K], i64[N, K]\n"
    "  %s = reduce(%t) {kind = sum, axes = [1], keepdims = 1} : f32[N, 1]\n"
    "  %b = add(%e, %s) : f32[N, 8]\n"
    "  return %b, %i\n"
    "}\n";

typedef struct Model {
    const char *name;
    const char *path;  /* ONNX, or NULL: src */
    const char *src;
} Model;

static char dir_tmpl[] = "/tmp/disc_test_cache.XXXXXX";
static const char *root;

static Graph *load(const Model *m, const char *src)
{
    Diag d = {0};
    Graph *g = m->path ? model_load(m->path, NULL, NULL, &d) : model_load_text(src, strlen(src), m->name, &d);
    CHECK_MSG(g != NULL, "%s: %s", m->name, d.msg);
    return g;
}

/* Deterministic inputs: every symbol 4 (32 for images), ids and floats
 * from a fixed sequence. */
static bool make_inputs(const Graph *g, Tensor *in)
{
    uint32_t r = 12345;
    for (int i = 0; i < g->ninputs; i++) {
        const Type *t = &g->inputs[i]->type;
        int64_t shape[MAX_RANK];
        for (int k = 0; k < t->rank; k++)
            shape[k] = t->dims[k]->kind == DIM_CONST ? t->dims[k]->c : t->rank == 4 && k >= 2 ? 32 : 4;
        if (!tensor_alloc(&in[i], t->dtype, t->rank, shape))
            return false;
        size_t n = tensor_numel(&in[i]);
        for (size_t j = 0; j < n; j++) {
            r = r * 1103515245u + 12345u;
            if (t->dtype == DT_I64)
                ((int64_t *)in[i].data)[j] = (r >> 16) % 10;
            else if (t->dtype == DT_F32)
                ((float *)in[i].data)[j] = (float)((r >> 8) % 2000) / 1000.0f - 1.0f;
        }
    }
    return true;
}

/* Compiles m (a fresh load) with the cache in dir (NULL: no cache) and
 * runs it; *hit says whether it was a cache hit; the outputs' bytes
 * concatenated go to *out (malloc'd). */
static bool compile_run(const Model *m, const char *src, const char *dir, const CgOpts *extra, bool *hit,
                        char **out, size_t *outlen)
{
    Graph *g = load(m, src);
    if (!g)
        return false;
    CgOpts o = extra ? *extra : (CgOpts){.opt_level = 3};
    o.cache_dir = dir;
    o.no_cache = dir == NULL;
    Diag d = {0};
    Exec *e = exec_compile(g, NULL, &o, &d);
    CHECK_MSG(e != NULL, "%s: %s", m->name, d.msg);
    bool ok = e != NULL;
    Tensor in[8] = {{0}}, res[8] = {{0}};
    if (ok)
        ok = make_inputs(g, in) && exec_run(e, in, g->ninputs, res, g->noutputs, &d);
    CHECK_MSG(ok, "%s: run: %s", m->name, d.msg);
    *hit = e && exec_cache_hit(e);
    FILE *f = open_memstream(out, outlen);
    for (int i = 0; ok && i < g->noutputs; i++) {
        fwrite(res[i].shape, sizeof(int64_t), (size_t)res[i].rank, f);
        fwrite(res[i].data, 1, res[i].nbytes, f);
    }
    fclose(f);
    for (int i = 0; i < 8; i++) {
        tensor_free(&in[i]);
        tensor_free(&res[i]);
    }
    exec_free(e);
    graph_free(g);
    return ok;
}

/* The .jit files in dir (and whether any temporary file is there). */
static int count_files(const char *dir, char *last, size_t size, bool *tmp)
{
    DIR *dp = opendir(dir);
    int n = 0;
    if (tmp)
        *tmp = false;
    if (!dp)
        return -1;
    struct dirent *de;
    while ((de = readdir(dp))) {
        size_t len = strlen(de->d_name);
        if (len > 4 && !strcmp(de->d_name + len - 4, ".jit")) {
            n++;
            if (last)
                snprintf(last, size, "%s/%s", dir, de->d_name);
        } else if (tmp && de->d_name[0] == '.' && len > 2) {
            *tmp = true;
        }
    }
    closedir(dp);
    return n;
}

static char *subdir(const char *name)
{
    static char buf[4][512];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, sizeof buf[0], "%s/%s", root, name);
    return p;
}

static const Model bert = {"bert_encoder", DISC_SOURCE_DIR "/tests/models/bert_encoder/model.onnx", NULL};
static const Model cnn = {"mobilenet_cnn", DISC_SOURCE_DIR "/tests/models/mobilenet_cnn/model.onnx", NULL};
static const Model topk = {"topk.disc", NULL, topk_src};

static void test_concurrent(void)
{
    const char *dir = subdir("concurrent");
    int go[2], res[2];
    if (pipe(go) != 0 || pipe(res) != 0) {
        CHECK(!"pipe");
        return;
    }
    pid_t kid[2];
    for (int i = 0; i < 2; i++) {
        if ((kid[i] = fork()) == 0) {
            close(go[1]);
            char c;
            if (read(go[0], &c, 1) != 0) /* until the parent closes it: both start at once */
                _exit(3);
            bool hit;
            char *out = NULL;
            size_t len = 0;
            bool ok = compile_run(&bert, NULL, dir, NULL, &hit, &out, &len);
            uint64_t h = ok ? store_hash(out, len, 0) : 0;
            free(out);
            ssize_t w = write(res[1], &h, sizeof h);
            _exit(ok && w == sizeof h && check_fail == 0 ? 0 : 1);
        }
    }
    close(go[0]);
    close(go[1]);
    close(res[1]);
    int st[2];
    for (int i = 0; i < 2; i++)
        CHECK(kid[i] > 0 && waitpid(kid[i], &st[i], 0) == kid[i] && WIFEXITED(st[i]) && WEXITSTATUS(st[i]) == 0);
    uint64_t h[2] = {0, 1};
    CHECK(read(res[0], &h[0], 8) == 8 && read(res[0], &h[1], 8) == 8);
    close(res[0]);
    CHECK_MSG(h[0] == h[1] && h[0] != 0, "the two processes' outputs differ");
    bool tmp;
    CHECK_MSG(count_files(dir, NULL, 0, &tmp) == 1 && !tmp, "one complete file and no temporary one");
    bool hit;
    char *out = NULL;
    size_t len = 0;
    CHECK(compile_run(&bert, NULL, dir, NULL, &hit, &out, &len));
    CHECK_MSG(hit, "a compile after the two is a hit");
    CHECK(store_hash(out, len, 0) == h[0]);
    free(out);
}

/* Two compiles into dir: a miss that writes, then a hit; both against a
 * compile without the cache. */
static void hit_case(const Model *m, const CgOpts *o)
{
    const char *dir = subdir(m->name);
    bool hit1, hit2, hit0;
    char *o1 = NULL, *o2 = NULL, *o0 = NULL;
    size_t n1 = 0, n2 = 0, n0 = 0;
    bool ok = compile_run(m, m->src, dir, o, &hit1, &o1, &n1) && compile_run(m, m->src, dir, o, &hit2, &o2, &n2) &&
              compile_run(m, m->src, NULL, o, &hit0, &o0, &n0);
    CHECK_MSG(ok && !hit1 && hit2 && !hit0, "%s: the first compile misses, the second hits", m->name);
    CHECK_MSG(count_files(dir, NULL, 0, NULL) == 1, "%s: one file", m->name);
    CHECK_MSG(n1 == n2 && n1 == n0 && n1 > 0 && !memcmp(o1, o2, n1) && !memcmp(o1, o0, n1),
              "%s: a hit's outputs are bit-identical to a fresh compile's", m->name);
    free(o1);
    free(o2);
    free(o0);
}

static void test_hit(void)
{
    hit_case(&bert, NULL);
    hit_case(&cnn, NULL);
    hit_case(&topk, NULL);
}

static void test_parts(void)
{
    const char *dir = subdir("parts");
    bool hit1, hit3, hit;
    char *o1 = NULL, *o3 = NULL, *oh = NULL;
    size_t n1 = 0, n3 = 0, nh = 0;
    CgOpts one = {.opt_level = 3, .compile_threads = 1}, three = {.opt_level = 3, .compile_threads = 3};
    bool ok = compile_run(&bert, NULL, NULL, &one, &hit1, &o1, &n1) &&
              compile_run(&bert, NULL, dir, &three, &hit3, &o3, &n3) &&
              compile_run(&bert, NULL, dir, &one, &hit, &oh, &nh);
    CHECK_MSG(ok && !hit3 && hit, "a three-part file is a hit for one part");
    CHECK_MSG(n1 == n3 && n1 == nh && n1 > 0 && !memcmp(o1, o3, n1) && !memcmp(o1, oh, n1),
              "one part and three: bit-identical outputs");
    free(o1);
    free(o3);
    free(oh);
}

static void test_key(void)
{
    const char *dir = subdir("key");
    bool hit;
    char *out = NULL;
    size_t len = 0;
    compile_run(&topk, topk_src, dir, NULL, &hit, &out, &len);
    free(out);
    /* another constant value */
    char *src = strdup(topk_src);
    char *p = strstr(src, "2.0, 0.25");
    p[0] = '4';
    compile_run(&topk, src, dir, NULL, &hit, &out, &len);
    free(out);
    CHECK_MSG(!hit && count_files(dir, NULL, 0, NULL) == 2, "another constant: another key");
    /* another option */
    CgOpts o = {.opt_level = 2};
    compile_run(&topk, src, dir, &o, &hit, &out, &len);
    free(out);
    CHECK_MSG(!hit && count_files(dir, NULL, 0, NULL) == 3, "another opt_level: another key");
    o = (CgOpts){.opt_level = 3, .unfused = true};
    compile_run(&topk, src, dir, &o, &hit, &out, &len);
    free(out);
    CHECK_MSG(!hit && count_files(dir, NULL, 0, NULL) == 4, "unfused: another key");
    /* each of them hits now */
    compile_run(&topk, src, dir, &o, &hit, &out, &len);
    free(out);
    CHECK(hit);
    free(src);
    /* a shape hint */
    Graph *g = load(&topk, topk_src);
    const char *hint[] = {"N <= 64"};
    ShapeOpts so = {hint, 1};
    CgOpts co = {.opt_level = 3, .cache_dir = dir};
    Diag d = {0};
    Exec *e = g ? exec_compile(g, &so, &co, &d) : NULL;
    CHECK_MSG(e && !exec_cache_hit(e) && count_files(dir, NULL, 0, NULL) == 5, "a shape hint: another key");
    exec_free(e);
    graph_free(g);
}

/* Damages the one file in dir by f, then checks that the compile misses,
 * gives the same outputs and rewrites the file. */
static void corrupt_case(const char *dir, const char *what, void (*f)(const char *path, off_t size),
                         const char *good, size_t goodlen)
{
    char path[600];
    CHECK(count_files(dir, path, sizeof path, NULL) == 1);
    struct stat st;
    CHECK(stat(path, &st) == 0);
    f(path, st.st_size);
    bool hit;
    char *out = NULL;
    size_t len = 0;
    bool ok = compile_run(&topk, topk_src, dir, NULL, &hit, &out, &len);
    CHECK_MSG(ok && !hit, "%s: ignored", what);
    CHECK_MSG(len == goodlen && !memcmp(out, good, len), "%s: the same outputs", what);
    free(out);
    ok = compile_run(&topk, topk_src, dir, NULL, &hit, &out, &len);
    CHECK_MSG(ok && hit, "%s: rewritten", what);
    free(out);
}

static void cut_half(const char *path, off_t size) { CHECK(truncate(path, size / 2) == 0); }
static void cut_last(const char *path, off_t size) { CHECK(truncate(path, size - 1) == 0); }
static void empty(const char *path, off_t size) { CHECK(truncate(path, 0) == 0); }

static void flip_at(const char *path, off_t at)
{
    int fd = open(path, O_RDWR);
    unsigned char c = 0;
    CHECK(fd >= 0 && pread(fd, &c, 1, at) == 1);
    c ^= 0x10;
    CHECK(pwrite(fd, &c, 1, at) == 1);
    close(fd);
}

static void flip_code(const char *path, off_t size) { flip_at(path, size - 100); }
static void flip_size(const char *path, off_t size) { flip_at(path, 9); }
static void flip_sum(const char *path, off_t size) { flip_at(path, 17); }

/* A valid file (right checksum) whose key text is another's: as if two
 * keys' names collided. */
static void other_key(const char *path, off_t size)
{
    Graph *g = load(&topk, topk_src);
    CpuTarget cpu;
    Diag d = {0};
    CgOpts o = {.opt_level = 3};
    CacheKey k;
    CHECK(g && cpu_target_init(&cpu, NULL, &d) && cache_key(g, NULL, &o, &cpu, &k, &d));
    char why[64];
    CacheEntry e;
    char *dir = strdup(path);
    *strrchr(dir, '/') = 0;
    CHECK(cache_load(dir, &k, &e, why, sizeof why));
    k.text[0] = 'D'; /* "disc ..." */
    CHECK(cache_store(dir, &k, &e, &d));
    cache_entry_free(&e);
    cache_key_free(&k);
    cpu_target_free(&cpu);
    graph_free(g);
    free(dir);
}

static void test_corrupt(void)
{
    const char *dir = subdir("corrupt");
    bool hit;
    char *good = NULL;
    size_t len = 0;
    CHECK(compile_run(&topk, topk_src, dir, NULL, &hit, &good, &len) && !hit);
    corrupt_case(dir, "cut in half", cut_half, good, len);
    corrupt_case(dir, "last byte cut", cut_last, good, len);
    corrupt_case(dir, "empty", empty, good, len);
    corrupt_case(dir, "a byte of code flipped", flip_code, good, len);
    corrupt_case(dir, "the size flipped", flip_size, good, len);
    corrupt_case(dir, "the checksum flipped", flip_sum, good, len);
    corrupt_case(dir, "another key's file", other_key, good, len);
    free(good);
}

static void rm_rf(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "test_cache: could not remove %s\n", dir);
}

int main(void)
{
    root = mkdtemp(dir_tmpl);
    if (!root) {
        perror("mkdtemp");
        return 1;
    }
    test_concurrent(); /* first: no thread started yet */
    test_hit();
    test_parts();
    test_key();
    test_corrupt();
    if (!check_fail)
        rm_rf(root);
    else
        fprintf(stderr, "test_cache: the cache directories are in %s\n", root);
    return check_done();
}
