/*
 * test_clone.c — graph_clone and the one loader: a clone prints as its
 * source does (ids, names, symbols, attributes, constants), compiling the
 * clone leaves the source as it was, and the clone outlives its source.
 * Every IR file of tests/golden/ir and tests/interp, and an ONNX model.
 */
#include "frontends/model.h"
#include "passes/passes.h"
#include "tests/unit/check.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

/* g as text (malloc'd), constants in full. */
static char *print(const Graph *g)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    graph_print(f, g, &(PrintOpts){16, false, false});
    fclose(f);
    return text;
}

static void check_file(const char *path)
{
    Diag d = {0};
    Graph *g = model_load(path, NULL, NULL, &d);
    if (!g) /* a file that shows an error on purpose */
        return;
    char *before = print(g);
    Graph *c = graph_clone(g, &d);
    CHECK_MSG(c != NULL, "%s: %s", path, d.msg);
    if (!c) {
        graph_free(g);
        free(before);
        return;
    }
    char *copy = print(c);
    CHECK_MSG(before && copy && !strcmp(before, copy), "%s: the clone prints differently", path);
    CHECK_MSG(graph_verify(c, &d), "%s: the clone does not verify: %s", path, d.msg);
    CHECK(c->nvalues == g->nvalues && c->nops == g->nops && c->dims.nsyms == g->dims.nsyms);
    /* compiling the clone (shape analysis rewrites it) leaves g alone */
    ShapeInfo *si = shape_analyze(c, NULL, &d);
    char *after = print(g);
    CHECK_MSG(after && !strcmp(before, after), "%s: analysing the clone changed the source", path);
    /* the clone keeps its source's data: free the source first */
    graph_free(g);
    char *again = si ? NULL : print(c);
    CHECK_MSG(si || (again && !strcmp(again, copy)), "%s: the clone changed when its source was freed", path);
    shape_info_free(si);
    graph_free(c);
    free(before);
    free(copy);
    free(after);
    free(again);
}

static int check_dir(const char *dir)
{
    DIR *dp = opendir(dir);
    int n = 0;
    CHECK_MSG(dp != NULL, "%s", dir);
    for (struct dirent *e; dp && (e = readdir(dp));) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 5, ".disc") != 0)
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        check_file(path);
        n++;
    }
    if (dp)
        closedir(dp);
    return n;
}

int main(void)
{
    CHECK(check_dir(DISC_SOURCE_DIR "/tests/golden/ir") > 10);
    CHECK(check_dir(DISC_SOURCE_DIR "/tests/interp") > 10);
    check_file(DISC_SOURCE_DIR "/tests/models/mlp_norm/model.onnx");
    check_file(DISC_SOURCE_DIR "/tests/models/bert_encoder/model.onnx");
    /* the loader: the kind of an error */
    Diag d = {0};
    CHECK(model_load("/nonexistent.disc", NULL, NULL, &d) == NULL && d.kind == DIAG_RESOURCE);
    Diag e = {0};
    CHECK(model_load_text("graph @g() {\n  return %x\n}\n", 27, "bad.disc", &e) == NULL && e.kind == DIAG_PARSE &&
          e.loc.line == 2 && !strcmp(e.loc.file, "bad.disc"));
    return check_done();
}
