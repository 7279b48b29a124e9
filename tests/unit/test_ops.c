/*
 * test_ops.c — the op table against the places that must know each op and
 * that no compiler checks (ir/ops.def lists them all):
 *
 *   - doc/ops.md describes every op (its name in backquotes);
 *   - some .disc file in tests/interp uses every op, so each one runs on the
 *     interpreter and on the cpu backend (tests/cpu.cmake);
 *   - the UNARY and BINARY rows: a dtype set, and their own numbering;
 *   - the interpreter runs every elementwise op on every dtype its row
 *     takes, and its float maths (what canon's folding and the activation
 *     matcher call) is defined exactly for the rows that take floats;
 *   - the cpu backend emits every elementwise op for every dtype its row
 *     takes (codegen/elem.c). A missing case there does not compile with
 *     -Werror; without it, the group would quietly run on the host through
 *     the interpreter (host.c's fallback), so this test is what fails.
 *
 * A failure names the op and the place it is missing from.
 */
#include "codegen/kern.h"
#include "runtime/interp.h"
#include "tests/unit/check.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s)
        s[n] = 0;
    fclose(f);
    return s;
}

/* Whether text has `pre` + name followed by one of the bytes in `after`. */
static bool mentions(const char *text, const char *pre, const char *name, const char *after)
{
    char key[64];
    snprintf(key, sizeof key, "%s%s", pre, name);
    for (const char *p = strstr(text, key); p; p = strstr(p + 1, key))
        if (p[strlen(key)] && strchr(after, p[strlen(key)]))
            return true;
    return false;
}

static void test_doc(void)
{
    char *doc = slurp(DISC_SOURCE_DIR "/doc/ops.md");
    CHECK_MSG(doc != NULL, "cannot read doc/ops.md");
    for (int k = 0; doc && k < OP_COUNT; k++) {
        const char *name = op_info(k)->name;
        CHECK_MSG(mentions(doc, "`", name, "`( "), "op %s is not described in doc/ops.md", name);
    }
    free(doc);
}

static void test_interp_files(void)
{
    const char *dir = DISC_SOURCE_DIR "/tests/interp";
    char *files[256];
    int n = 0;
    DIR *d = opendir(dir);
    CHECK_MSG(d != NULL, "cannot read %s", dir);
    for (struct dirent *e; d && (e = readdir(d)) && n < 256;) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".disc") != 0)
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if ((files[n] = slurp(path)))
            n++;
    }
    if (d)
        closedir(d);
    for (int k = 0; k < OP_COUNT; k++) {
        const char *name = op_info(k)->name;
        bool used = false;
        for (int i = 0; i < n && !used; i++)
            used = mentions(files[i], "= ", name, "( ");
        CHECK_MSG(used, "op %s is used by no test in tests/interp (run on the interpreter and the cpu backend)",
                  name);
    }
    for (int i = 0; i < n; i++)
        free(files[i]);
}

static void test_elementwise_rows(void)
{
    bool seen_un[UN_COUNT] = {0}, seen_bin[BIN_COUNT] = {0};
    for (int k = 0; k < OP_COUNT; k++) {
        const OpInfo *info = op_info(k);
        UnaryOp u = op_unary(k);
        BinaryOp b = op_binary(k);
        if (info->cat == CAT_UNARY) {
            CHECK_MSG(u < UN_COUNT && !seen_un[u], "unary op %s", info->name);
            if (u < UN_COUNT)
                seen_un[u] = true;
        } else {
            CHECK_MSG(u == UN_COUNT, "op %s is not unary", info->name);
        }
        if (info->cat == CAT_BINARY) {
            CHECK_MSG(b < BIN_COUNT && !seen_bin[b], "binary op %s", info->name);
            if (b < BIN_COUNT)
                seen_bin[b] = true;
        } else {
            CHECK_MSG(b == BIN_COUNT, "op %s is not binary", info->name);
        }
        bool elem = info->cat == CAT_UNARY || info->cat == CAT_BINARY;
        CHECK_MSG(elem == ((info->dtypes & (DTS_FLOAT | DTS_INT | DTS_BOOL)) != 0),
                  "op %s: dtypes are for the UNARY and BINARY rows", info->name);
        /* the interpreter's float maths covers every op that takes floats */
        double r;
        if (info->cat == CAT_UNARY)
            CHECK_MSG(interp_unary_f(k, 0.5, &r) == op_takes_dtype(k, DT_F32),
                      "interp_unary_f and the dtypes of %s disagree", info->name);
        if (info->cat == CAT_BINARY)
            CHECK_MSG(interp_binary_f(k, 0.5, 2, &r) == op_takes_dtype(k, DT_F32),
                      "interp_binary_f and the dtypes of %s disagree", info->name);
    }
    CHECK(op_takes_dtype(OP_NOT, DT_BOOL) && op_takes_dtype(OP_NOT, DT_U8) && !op_takes_dtype(OP_NOT, DT_F16));
    CHECK(op_takes_dtype(OP_NEG, DT_I8) && !op_takes_dtype(OP_NEG, DT_BOOL));
    CHECK(!op_takes_dtype(OP_POW, DT_I32) && !op_takes_dtype(OP_RESHAPE, DT_F32));
    CHECK(op_result_dtype(OP_ISNAN, DT_F16) == DT_BOOL && op_result_dtype(OP_EXP, DT_F16) == DT_F16);
}

static const DType dts[] = {DT_F32, DT_F16, DT_BF16, DT_F64, DT_I8, DT_U8, DT_I32, DT_U64, DT_I64, DT_BOOL};

/* y = op(x) or op(x, x) on x = [1, 2] of each dtype the row takes. */
static void test_interp_elementwise(void)
{
    for (int op = 0; op < OP_COUNT; op++) {
        const OpInfo *info = op_info(op);
        if (info->cat != CAT_UNARY && info->cat != CAT_BINARY)
            continue;
        for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) {
            if (!op_takes_dtype(op, dts[i]))
                continue;
            Graph *g = graph_new("t");
            Dim *two = dim_const(&g->dims, 2);
            Value *x = graph_add_input(g, "x", type_make(&g->arena, dts[i], 1, &two));
            Value *y = info->cat == CAT_UNARY ? build_unary(g, op, x) : build_binary(g, op, x, x);
            CHECK_MSG(y && graph_add_output(g, y), "the verifier rejects %s on %s, which its row takes", info->name,
                      dtype_name(dts[i]));
            Tensor in = {0}, out = {0};
            Diag d = {0};
            if (y && tensor_alloc(&in, dts[i], 1, (int64_t[]){2})) {
                interp_store_f(&in, 0, 1);
                interp_store_f(&in, 1, 2);
                CHECK_MSG(interp_run(g, &in, 1, &out, 1, &d), "the interpreter fails %s on %s: %s", info->name,
                          dtype_name(dts[i]), d.msg);
            }
            tensor_free(&in);
            tensor_free(&out);
            graph_free(g);
        }
    }
}

static void test_cpu_elementwise(void)
{
    LLVMContextRef ctx = LLVMContextCreate();
    Graph *g = graph_new("t");
    Diag d = {0};
    Cg cg;
    cg_init(&cg, ctx, g, NULL, NULL, &d);
    LLVMValueRef fn = LLVMAddFunction(cg.mod, "f", LLVMFunctionType(cg.t_void, NULL, 0, false));
    cg_begin_function(&cg, fn, NULL);
    Kern k = {.cg = &cg};
    for (int op = 0; op < OP_COUNT; op++) {
        const OpInfo *info = op_info(op);
        if (info->cat != CAT_UNARY && info->cat != CAT_BINARY)
            continue;
        for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) {
            if (!op_takes_dtype(op, dts[i]))
                continue;
            LLVMValueRef x = LLVMGetUndef(cg_compute_type(&cg, dts[i]));
            LLVMValueRef r = info->cat == CAT_UNARY ? kern_unary(&k, op, dts[i], x) : kern_binary(&k, op, dts[i], x, x);
            CHECK_MSG(r != NULL, "the cpu backend (codegen/elem.c) emits nothing for %s on %s", info->name,
                      dtype_name(dts[i]));
        }
    }
    LLVMDisposeModule(cg.mod);
    cg_free(&cg);
    LLVMContextDispose(ctx);
    graph_free(g);
}

int main(void)
{
    test_doc();
    test_interp_files();
    test_elementwise_rows();
    test_interp_elementwise();
    test_cpu_elementwise();
    return check_done();
}
