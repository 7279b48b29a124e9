/*
 * test_shape.c — shape analysis: equality classes (the union-find),
 * speculation, the host shape program and its run-time checks.
 */
#include "passes/passes.h"
#include "tests/unit/check.h"

#include <string.h>

static Graph *parse(const char *src)
{
    Diag d = {0};
    Graph *g = graph_parse(src, strlen(src), "t.disc", &d);
    CHECK_MSG(g != NULL, "%s", d.msg);
    if (g && !graph_verify(g, &d)) {
        CHECK_MSG(false, "%s", d.msg);
        graph_free(g);
        return NULL;
    }
    return g;
}

static bool has(const char *s, const char *sub) { return strstr(s, sub) != NULL; }

static Tensor shaped(DType dt, int rank, const int64_t *shape)
{
    Tensor t = {.dtype = dt, .rank = rank};
    memcpy(t.shape, shape, (size_t)rank * sizeof *shape);
    return t;
}

static void test_unify_and_checks(void)
{
    Graph *g = parse("graph @u(%a: f32[B, S, K], %b: f32[B2, T, K], %w: f32[K2, 32]) {\n"
                     "  %c = concat(%a, %b) {axis = 1} : f32[B, S + T, K]\n"
                     "  %y = dot(%c, %w) {lhs_batch = [], rhs_batch = [], lhs_contract = [2], rhs_contract = [0]}"
                     " : f32[B, S + T, 32]\n"
                     "  return %y\n}\n");
    if (!g)
        return;
    Diag d = {0};
    ShapeInfo *si = shape_analyze(g, NULL, &d);
    CHECK_MSG(si != NULL, "%s", d.msg);
    if (!si) {
        graph_free(g);
        return;
    }
    /* B2 joined B and K2 joined K, and the inputs now say so */
    CHECK(si->ndclass == 2);
    CHECK(g->inputs[1]->type.dims[0] == dim_sym(&g->dims, "B"));
    CHECK(g->inputs[2]->type.dims[0] == dim_sym(&g->dims, "K"));
    Tensor in[3];
    in[0] = shaped(DT_F32, 3, (int64_t[]){2, 5, 8});
    in[1] = shaped(DT_F32, 3, (int64_t[]){2, 7, 8});
    in[2] = shaped(DT_F32, 2, (int64_t[]){8, 32});
    Diag ok = {0};
    CHECK_MSG(shape_check_inputs(si, in, 3, &ok), "%s", ok.msg);
    /* the second input's batch differs */
    in[1].shape[0] = 3;
    Diag e1 = {0};
    CHECK(!shape_check_inputs(si, in, 3, &e1));
    CHECK_MSG(has(e1.msg, "input \"b\": dim 0 is 3, expected B = 2 (from input \"a\" dim 0)"), "%s", e1.msg);
    in[1].shape[0] = 2;
    in[2].shape[1] = 31;
    Diag e2 = {0};
    CHECK(!shape_check_inputs(si, in, 3, &e2));
    CHECK_MSG(has(e2.msg, "input \"w\": dim 1 is 31, expected 32"), "%s", e2.msg);
    in[2].shape[1] = 32;
    in[2].rank = 3;
    Diag e3 = {0};
    CHECK(!shape_check_inputs(si, in, 3, &e3) && has(e3.msg, "input \"w\": rank 3, expected 2"));
    shape_info_free(si);
    graph_free(g);
}

static void test_requirements(void)
{
    Graph *g = parse("graph @r(%x: f32[B, S], %y: f32[T]) {\n"
                     "  %r = reshape(%x) {shape = [T]} : f32[T]\n"
                     "  %s = slice(%y) {start = [4], limit = [T], stride = [1]} : f32[T - 4]\n"
                     "  return %r, %s\n}\n");
    if (!g)
        return;
    Diag d = {0};
    ShapeInfo *si = shape_analyze(g, NULL, &d);
    CHECK_MSG(si != NULL, "%s", d.msg);
    if (!si) {
        graph_free(g);
        return;
    }
    Tensor in[2] = {shaped(DT_F32, 2, (int64_t[]){3, 4}), shaped(DT_F32, 1, (int64_t[]){12})};
    Diag ok = {0};
    CHECK_MSG(shape_check_inputs(si, in, 2, &ok), "%s", ok.msg);
    in[1].shape[0] = 13;
    Diag e = {0};
    CHECK(!shape_check_inputs(si, in, 2, &e));
    CHECK_MSG(has(e.msg, "t.disc:2: reshape: input shapes violate B*S == T (12 vs 13) with B = 3 (from input \"x\" dim 0), S = 4 (from input \"x\" dim 1), T = 13 (from input \"y\" dim 0)"),
              "%s", e.msg);
    in[0].shape[0] = 1;
    in[0].shape[1] = 3;
    in[1].shape[0] = 3;
    Diag e2 = {0};
    CHECK(!shape_check_inputs(si, in, 2, &e2));
    CHECK_MSG(has(e2.msg, "slice: input shapes violate 4 <= T (4 vs 3)"), "%s", e2.msg);
    shape_info_free(si);
    graph_free(g);
}

static void test_assume(void)
{
    const char *src = "graph @t(%x: f32[S, 4]) {\n"
                      "  %y = slice(%x) {start = [8, 0], limit = [S, 4], stride = [1, 1]} : f32[S - 8, 4]\n"
                      "  return %y\n}\n";
    Graph *g = parse(src);
    if (!g)
        return;
    Diag d = {0};
    ShapeInfo *si = shape_analyze(g, NULL, &d);
    int without = si ? si->prog.n : -1;
    shape_info_free(si);
    graph_free(g);
    g = parse(src);
    const char *hints[] = {"S >= 16"};
    ShapeOpts o = {hints, 1};
    si = shape_analyze(g, &o, &d);
    /* the slice's requirement is proved and leaves; the hint's own check takes its place */
    CHECK(si && si->prog.n == without);
    int slice_steps = 0, hint_steps = 0;
    for (int i = 0; si && i < si->prog.n; i++) {
        const char *w = si->prog.steps[i].what;
        slice_steps += w && strstr(w, "slice") != NULL;
        hint_steps += w && !strcmp(w, "--assume 'S >= 16'");
    }
    CHECK(slice_steps == 0 && hint_steps == 1);
    shape_info_free(si);
    graph_free(g);
    g = parse(src);
    const char *bad[] = {"S <= 0"};
    ShapeOpts ob = {bad, 1};
    Diag e = {0};
    CHECK(shape_analyze(g, &ob, &e) == NULL && has(e.msg, "contradict"));
    const char *typo[] = {"S >> 3"};
    ShapeOpts ot = {typo, 1};
    Diag e2 = {0};
    CHECK(shape_analyze(g, &ot, &e2) == NULL && has(e2.msg, "--assume 'S >> 3'"));
    graph_free(g);
}

static void test_speculation(void)
{
    Graph *g = parse("graph @s(%a: f32[S], %b: f32[T]) {\n"
                     "  %y = add(%a, %b) : f32[max(S, T)]\n"
                     "  return %y\n}\n");
    if (!g)
        return;
    Diag d = {0};
    ShapeInfo *si = shape_analyze(g, NULL, &d);
    CHECK(si && si->ndclass == 1 && si->dclass[0].speculative);
    if (si) {
        const int64_t s1[1] = {5}, s2[1] = {1}, s3[1] = {4};
        const int64_t *shapes[2] = {s1, s2};
        HostEnv e;
        CHECK(hostenv_init(&e, g, si->prog.n));
        Diag ok = {0};
        CHECK(hostprog_run(g, &si->prog, shapes, &e, &ok)); /* T = 1 broadcasts */
        int guard = -1;
        for (int i = 0; i < si->prog.n; i++)
            if (si->prog.steps[i].kind == HS_GUARD)
                guard = i;
        CHECK(guard >= 0 && !e.guard[guard]);
        shapes[1] = s1;
        CHECK(hostprog_run(g, &si->prog, shapes, &e, &ok) && e.guard[guard]);
        shapes[1] = s3;
        Diag bad = {0};
        CHECK(!hostprog_run(g, &si->prog, shapes, &e, &bad));
        CHECK_MSG(has(bad.msg, "input shapes violate S == T or one of them is 1 (5 vs 4)"), "%s", bad.msg);
        hostenv_free(&e);
    }
    shape_info_free(si);
    graph_free(g);
}

int main(void)
{
    test_unify_and_checks();
    test_requirements();
    test_assume();
    test_speculation();
    return check_done();
}
