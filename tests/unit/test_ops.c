/*
 * test_ops.c — the op table against the places that must know each op and
 * that no compiler checks (ir/ops.def lists them all):
 *
 *   - doc/ops.md describes every op (its name in backquotes);
 *   - some .disc file in tests/interp uses every op, so each one runs on the
 *     interpreter and on the cpu backend (tests/cpu.cmake);
 *   - the UNARY and BINARY rows: a dtype set, and their own numbering;
 *   - the interpreter's maths is defined on floats for every elementwise
 *     op that takes floats (what canon's folding and the activation
 *     matcher call).
 *
 * A failure names the op and the place it is missing from.
 */
#include "ir/ir.h"
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

int main(void)
{
    test_doc();
    test_interp_files();
    test_elementwise_rows();
    return check_done();
}
