/*
 * onnx_check.c — imports one ONNX model and checks the result, for ctest.
 *
 *   onnx_check MODEL [--fail [--kind KIND]] [--expect TEXT]... [--golden FILE] [--update]
 *
 * Prints the imported graph (large constants elided) or the error. Passes
 * if the import succeeded (or failed, with --fail, with an error of that
 * kind if --kind is given: parse, model, unsupported, resource, ...),
 * every TEXT occurs in the output, and the output equals FILE if --golden
 * is given (--update rewrites FILE instead, for review in the diff).
 */
#include "frontends/onnx/onnx.h"

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
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s)
        s[n] = 0;
    fclose(f);
    return s;
}

int main(int argc, char **argv)
{
    const char *model = NULL, *golden = NULL, *expect[32], *kind = NULL;
    bool want_fail = false, update = false;
    int nexpect = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--fail"))
            want_fail = true;
        else if (!strcmp(argv[i], "--update"))
            update = true;
        else if (!strcmp(argv[i], "--expect") && i + 1 < argc && nexpect < 32)
            expect[nexpect++] = argv[++i];
        else if (!strcmp(argv[i], "--kind") && i + 1 < argc)
            kind = argv[++i];
        else if (!strcmp(argv[i], "--golden") && i + 1 < argc)
            golden = argv[++i];
        else
            model = argv[i];
    }
    if (!model) {
        fprintf(stderr, "usage: onnx_check MODEL [--fail [--kind KIND]] [--expect TEXT]... [--golden FILE]\n");
        return 2;
    }
    Diag d = {0};
    Graph *g = onnx_import_file(model, NULL, &d);
    char *out = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&out, &len);
    if (!mem)
        return 2;
    if (g) {
        PrintOpts po = {.inline_max = 16, .elide = true};
        graph_print(mem, g, &po);
    } else {
        fprintf(mem, "%s\n", d.msg);
    }
    fclose(mem);
    fputs(out, stdout);
    int bad = 0;
    if (!g != want_fail) {
        fprintf(stderr, "onnx_check: the import %s\n", g ? "succeeded, expected a failure" : "failed");
        bad++;
    }
    if (kind && !g && strcmp(diag_kind_name(d.kind), kind) != 0) {
        fprintf(stderr, "onnx_check: a %s error, expected a %s error\n", diag_kind_name(d.kind), kind);
        bad++;
    }
    for (int i = 0; i < nexpect; i++)
        if (!strstr(out, expect[i])) {
            fprintf(stderr, "onnx_check: output lacks \"%s\"\n", expect[i]);
            bad++;
        }
    if (golden && update) {
        FILE *f = fopen(golden, "wb");
        if (!f || fputs(out, f) < 0)
            bad++;
        if (f)
            fclose(f);
    } else if (golden) {
        char *want = slurp(golden);
        if (!want || strcmp(want, out)) {
            fprintf(stderr, "onnx_check: output differs from %s (rerun with --update and diff)\n",
                    golden);
            bad++;
        }
        free(want);
    }
    free(out);
    graph_free(g);
    return bad ? 1 : 0;
}
