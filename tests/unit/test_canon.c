/*
 * test_canon.c — canonicalisation (passes/canon.c): common subexpressions,
 * constant folding and its bounds, the exact algebraic rewrites (and the
 * inexact ones it must leave alone), the fixed point, and that a graph
 * computes bit for bit the same on the interpreter before and after;
 * horizontal fusion's weights side by side kept in the graph's store.
 */
#include "ir/store.h"
#include "passes/passes.h"
#include "runtime/interp.h"
#include "tests/unit/check.h"
#include "tests/unit/files.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* Parses src, canonicalises it and checks it still verifies. */
static Graph *canon(const char *src, CanonStats *st)
{
    Graph *g = parse(src);
    if (!g)
        return NULL;
    canon_run(g, st);
    Diag d = {0};
    CHECK_MSG(graph_verify(g, &d), "%s", d.msg);
    return g;
}

static int count(const Graph *g, OpKind k)
{
    int n = 0;
    graph_for_each_op(g, op)
        n += op->kind == k;
    return n;
}

static const Op *out_def(const Graph *g, int i) { return g->outputs[i]->def; }

/* Element i of a constant's data as a float. */
static float cst_f32(const Op *op, size_t i)
{
    float f;
    memcpy(&f, (const char *)op->cst->data + 4 * i, 4);
    return f;
}

/* ---- CSE ----------------------------------------------------------------- */

static void test_cse(void)
{
    CanonStats st;
    Graph *g = canon("graph @c(%a: f32[N, 4], %b: f32[N, 4]) {\n"
                     "  %x = add(%a, %b) : f32[N, 4]\n"
                     "  %y = add(%a, %b) : f32[N, 4]\n"
                     "  %z = add(%b, %a) : f32[N, 4]\n"   /* add commutes */
                     "  %p = max(%a, %b) : f32[N, 4]\n"
                     "  %q = max(%b, %a) : f32[N, 4]\n"   /* max(-0.0, 0.0): the order matters */
                     "  %s = sub(%a, %b) : f32[N, 4]\n"
                     "  %t = sub(%b, %a) : f32[N, 4]\n"
                     "  %e = exp(%x) : f32[N, 4]\n"
                     "  %f = exp(%y) : f32[N, 4]\n"       /* equal once %y is %x */
                     "  return %x, %y, %z, %p, %q, %s, %t, %e, %f\n}\n",
                     &st);
    if (!g)
        return;
    CHECK(count(g, OP_ADD) == 1);
    CHECK(count(g, OP_MAX) == 2);
    CHECK(count(g, OP_SUB) == 2);
    CHECK(count(g, OP_EXP) == 1);
    CHECK(g->outputs[0] == g->outputs[1] && g->outputs[1] == g->outputs[2]);
    CHECK(g->outputs[3] != g->outputs[4]);
    CHECK(g->outputs[7] == g->outputs[8]);
    CHECK(st.cse == 3);
    graph_free(g);

    /* different attributes, different result types: not merged */
    g = canon("graph @c(%a: f32[2, 3, 4]) {\n"
              "  %x = transpose(%a) {perm = [1, 0, 2]} : f32[3, 2, 4]\n"
              "  %y = transpose(%a) {perm = [1, 0, 2]} : f32[3, 2, 4]\n"
              "  %z = transpose(%a) {perm = [2, 0, 1]} : f32[4, 2, 3]\n"
              "  %r = reshape(%a) {shape = [6, 4]} : f32[6, 4]\n"
              "  %s = reshape(%a) {shape = [2, 12]} : f32[2, 12]\n"
              "  %u = convert(%a) {to = f16} : f16[2, 3, 4]\n"
              "  %v = convert(%a) {to = bf16} : bf16[2, 3, 4]\n"
              "  return %x, %y, %z, %r, %s, %u, %v\n}\n",
              &st);
    if (!g)
        return;
    CHECK(count(g, OP_TRANSPOSE) == 2 && g->outputs[0] == g->outputs[1]);
    CHECK(count(g, OP_RESHAPE) == 2 && count(g, OP_CONVERT) == 2);
    graph_free(g);
}

static void test_cse_const(void)
{
    CanonStats st;
    Graph *g = canon("graph @k(%x: f32[3]) {\n"
                     "  %a = const dense<[1.0, 2.0, 3.0]> : f32[3]\n"
                     "  %b = const dense<[1.0, 2.0, 3.0]> : f32[3]\n"
                     "  %c = const dense<[1.0, 2.0, 3.5]> : f32[3]\n"   /* last byte differs */
                     "  %d = const dense<[1065353216, 1073741824, 1077936128]> : i32[3]\n" /* same bytes as %a */
                     "  %e = const dense<[0.0]> : f32[]\n"
                     "  %f = const dense<[-0.0]> : f32[]\n"            /* equal as numbers, not as bytes */
                     "  %p = mul(%x, %a) : f32[3]\n"
                     "  %q = mul(%x, %b) : f32[3]\n"
                     "  %r = mul(%x, %c) : f32[3]\n"
                     "  %s = max(%x, %e) : f32[3]\n"
                     "  %t = max(%x, %f) : f32[3]\n"
                     "  return %p, %q, %r, %d, %s, %t\n}\n",
                     &st);
    if (!g)
        return;
    CHECK(count(g, OP_CONST) == 5);
    CHECK(g->outputs[0] == g->outputs[1]);
    CHECK(g->outputs[0] != g->outputs[2]);
    CHECK(g->outputs[4] != g->outputs[5]);
    CHECK(out_def(g, 3)->kind == OP_CONST && out_def(g, 3)->out[0]->type.dtype == DT_I32);
    graph_free(g);
}

/* ---- constant folding ---------------------------------------------------- */

static void test_fold(void)
{
    CanonStats st;
    Graph *g = canon("graph @f(%x: f32[2, 3]) {\n"
                     "  %a = const dense<[1.0, 2.0, 3.0]> : f32[3]\n"
                     "  %b = const dense<[0.5]> : f32[]\n"
                     "  %c = mul(%a, %b) : f32[3]\n"
                     "  %d = exp(%c) : f32[3]\n"
                     "  %e = add(%x, %d) : f32[2, 3]\n"
                     "  return %e\n}\n",
                     &st);
    if (!g)
        return;
    /* mul and exp folded into one constant; only the add on %x is left */
    CHECK(count(g, OP_MUL) == 0 && count(g, OP_EXP) == 0 && count(g, OP_CONST) == 1);
    CHECK(st.folded == 2);
    const Op *add = out_def(g, 0);
    CHECK(add->kind == OP_ADD);
    const Op *k = add->in[1]->def;
    CHECK(k->kind == OP_CONST && k->cst->nbytes == 12);
    if (k->kind == OP_CONST && k->cst->nbytes == 12) {
        CHECK(cst_f32(k, 0) == (float)exp(0.5));
        CHECK(cst_f32(k, 2) == (float)exp(1.5));
    }
    CHECK(add->in[1]->name && !strcmp(add->in[1]->name, "d")); /* named after what it replaced */
    graph_free(g);

    /* a fold that makes a constant equal to one already there merges with it */
    g = canon("graph @f2() {\n"
              "  %a = const dense<[1, 2]> : i64[2]\n"
              "  %b = const dense<[2, 4]> : i64[2]\n"
              "  %c = add(%a, %a) : i64[2]\n"
              "  return %b, %c\n}\n",
              &st);
    if (!g)
        return;
    CHECK(count(g, OP_CONST) == 1 && g->outputs[0] == g->outputs[1]);
    graph_free(g);

    /* multi-result ops fold too: topk of a constant */
    g = canon("graph @f3() {\n"
              "  %a = const dense<[3.0, 1.0, 4.0, 1.0, 5.0]> : f32[5]\n"
              "  %k = const dense<[2]> : i64[1]\n"
              "  %v, %i = topk(%a, %k) {axis = 0, largest = 1, sorted = 1} : f32[2], i64[2]\n"
              "  return %v, %i\n}\n",
              &st);
    if (!g)
        return;
    CHECK(count(g, OP_TOPK) == 0 && count(g, OP_CONST) == 2);
    if (out_def(g, 0)->kind == OP_CONST)
        CHECK(cst_f32(out_def(g, 0), 0) == 5.0f && cst_f32(out_def(g, 0), 1) == 4.0f);
    graph_free(g);
}

static void test_fold_bounds(void)
{
    CanonStats st;
    /* a broadcast of a scalar stays (kernels read scalars as immediates);
     * an elided constant has no data to fold; a symbolic result is not static */
    Graph *g = canon("graph @b(%x: f32[N]) {\n"
                     "  %s = const dense<[2.0]> : f32[]\n"
                     "  %b = broadcast(%s) {shape = [4, 4], axes = []} : f32[4, 4]\n"
                     "  %e = const elided : f32[8]\n"
                     "  %n = neg(%e) : f32[8]\n"
                     "  %i = iota {dtype = f32, shape = [N], axis = 0} : f32[N]\n"
                     "  %m = mul(%i, %s) : f32[N]\n"
                     "  return %b, %n, %m\n}\n",
                     &st);
    if (!g)
        return;
    CHECK(count(g, OP_BROADCAST) == 1 && count(g, OP_NEG) == 1 && count(g, OP_MUL) == 1);
    CHECK(st.folded == 0);
    graph_free(g);

    /* more than 1 Mi result elements: an elementwise op is not folded, a
     * transpose (a layout change of a weight) is, and a reshape shares data */
    g = canon("graph @big() {\n"
              "  %w = const dense<1.5> : f32[1025, 1024]\n"
              "  %n = neg(%w) : f32[1025, 1024]\n"
              "  %t = transpose(%w) {perm = [1, 0]} : f32[1024, 1025]\n"
              "  %r = reshape(%w) {shape = [2050, 512]} : f32[2050, 512]\n"
              "  return %n, %t, %r\n}\n",
              &st);
    if (!g)
        return;
    CHECK(out_def(g, 0)->kind == OP_NEG);
    CHECK(out_def(g, 1)->kind == OP_CONST && out_def(g, 1)->cst->data != out_def(g, 0)->in[0]->def->cst->data);
    CHECK(out_def(g, 2)->kind == OP_CONST && out_def(g, 2)->cst->data == out_def(g, 0)->in[0]->def->cst->data);
    if (out_def(g, 1)->kind == OP_CONST)
        CHECK(cst_f32(out_def(g, 1), 1024 * 1025 - 1) == 1.5f);
    graph_free(g);
}

/* ---- algebraic simplification -------------------------------------------- */

/* The op kind that defines output i after canonicalisation of a one-op body
 * over %x: f32[4] (or i32[4]) and the constants given. */
static OpKind simplified(const char *dtype, const char *consts, const char *op)
{
    char src[1024];
    snprintf(src, sizeof src,
             "graph @s(%%x: %s[4]) {\n%s  %%y = %s : %s[4]\n  %%z = exp(%%y) : %s[4]\n  return %%z\n}\n", dtype,
             consts, op, dtype, dtype);
    if (!strcmp(dtype, "i32")) /* exp is for floats: return %y itself */
        snprintf(src, sizeof src, "graph @s(%%x: i32[4]) {\n%s  %%y = %s : i32[4]\n  return %%y\n}\n", consts, op);
    Graph *g = canon(src, NULL);
    if (!g)
        return OP_COUNT;
    const Value *y = g->outputs[0];
    if (y->def && y->def->kind == OP_EXP)
        y = y->def->in[0];
    OpKind k = y == g->inputs[0] ? OP_COUNT : y->def ? y->def->kind : OP_COUNT;
    graph_free(g);
    return k; /* OP_COUNT: the op became %x itself */
}

static void test_algebra(void)
{
    const char *one = "  %c = const dense<[1.0]> : f32[]\n";
    const char *ones = "  %c = const dense<1.0> : f32[4]\n";
    const char *pz = "  %c = const dense<[0.0]> : f32[]\n";
    const char *nz = "  %c = const dense<[-0.0]> : f32[]\n";
    const char *two = "  %c = const dense<[2.0]> : f32[]\n";
    CHECK(simplified("f32", one, "mul(%x, %c)") == OP_COUNT);
    CHECK(simplified("f32", one, "mul(%c, %x)") == OP_COUNT);
    CHECK(simplified("f32", ones, "mul(%x, %c)") == OP_COUNT);
    CHECK(simplified("f32", one, "div(%x, %c)") == OP_COUNT);
    CHECK(simplified("f32", one, "div(%c, %x)") == OP_DIV);
    CHECK(simplified("f32", two, "mul(%x, %c)") == OP_MUL);
    /* x + 0.0 is +0.0 for x = -0.0: kept; x + (-0.0) and x - 0.0 are x */
    CHECK(simplified("f32", pz, "add(%x, %c)") == OP_ADD);
    CHECK(simplified("f32", pz, "add(%c, %x)") == OP_ADD);
    CHECK(simplified("f32", nz, "add(%x, %c)") == OP_COUNT);
    CHECK(simplified("f32", nz, "add(%c, %x)") == OP_COUNT);
    CHECK(simplified("f32", pz, "sub(%x, %c)") == OP_COUNT);
    CHECK(simplified("f32", nz, "sub(%x, %c)") == OP_SUB);
    CHECK(simplified("f32", pz, "sub(%c, %x)") == OP_SUB);
    /* integers: every zero is the zero */
    CHECK(simplified("i32", "  %c = const dense<[0]> : i32[]\n", "add(%x, %c)") == OP_COUNT);
    CHECK(simplified("i32", "  %c = const dense<[0]> : i32[]\n", "sub(%x, %c)") == OP_COUNT);
    CHECK(simplified("i32", "  %c = const dense<[1]> : i32[]\n", "mul(%c, %x)") == OP_COUNT);
    CHECK(simplified("i32", "  %c = const dense<[1, 1, 1, 2]> : i32[4]\n", "mul(%x, %c)") == OP_MUL);
    /* double negation, also through four */
    CHECK(simplified("f32", "  %n = neg(%x) : f32[4]\n", "neg(%n)") == OP_COUNT);
    CHECK(simplified("f32", "  %n = neg(%x) : f32[4]\n  %m = neg(%n) : f32[4]\n  %k = neg(%m) : f32[4]\n",
                     "neg(%k)") == OP_COUNT);
    CHECK(simplified("f32", "  %n = neg(%x) : f32[4]\n", "abs(%n)") == OP_ABS);
    /* convert round trips: only through a dtype holding every value */
    CHECK(simplified("f32", "  %w = convert(%x) {to = f64} : f64[4]\n", "convert(%w) {to = f32}") == OP_COUNT);
    CHECK(simplified("f32", "  %w = convert(%x) {to = f16} : f16[4]\n", "convert(%w) {to = f32}") == OP_CONVERT);
    CHECK(simplified("f32", "  %w = convert(%x) {to = i64} : i64[4]\n", "convert(%w) {to = f32}") == OP_CONVERT);
    CHECK(simplified("i32", "  %w = convert(%x) {to = i64} : i64[4]\n", "convert(%w) {to = i32}") == OP_COUNT);
    CHECK(simplified("i32", "  %w = convert(%x) {to = f64} : f64[4]\n", "convert(%w) {to = i32}") == OP_COUNT);
    CHECK(simplified("i32", "  %w = convert(%x) {to = f32} : f32[4]\n", "convert(%w) {to = i32}") == OP_CONVERT);
    CHECK(simplified("i32", "  %w = convert(%x) {to = u32} : u32[4]\n", "convert(%w) {to = i32}") == OP_CONVERT);
    CHECK(simplified("i32", "  %w = convert(%x) {to = i16} : i16[4]\n", "convert(%w) {to = i32}") == OP_CONVERT);
    CHECK(simplified("f32", "  %w = convert(%x) {to = f32} : f32[4]\n", "neg(%w)") == OP_NEG);
}

static void test_layout_chains(void)
{
    CanonStats st;
    Graph *g = canon("graph @t(%x: f32[2, 3, 4]) {\n"
                     "  %a = transpose(%x) {perm = [1, 2, 0]} : f32[3, 4, 2]\n"
                     "  %b = transpose(%a) {perm = [2, 1, 0]} : f32[2, 4, 3]\n"   /* x by [0, 2, 1] */
                     "  %c = transpose(%x) {perm = [2, 0, 1]} : f32[4, 2, 3]\n"
                     "  %d = transpose(%c) {perm = [1, 2, 0]} : f32[2, 3, 4]\n"   /* the identity */
                     "  %r = reshape(%x) {shape = [6, 4]} : f32[6, 4]\n"
                     "  %s = reshape(%r) {shape = [24]} : f32[24]\n"
                     "  %u = reshape(%s) {shape = [2, 3, 4]} : f32[2, 3, 4]\n"
                     "  return %b, %d, %s, %u\n}\n",
                     &st);
    if (!g)
        return;
    const Op *b = out_def(g, 0);
    CHECK(b->kind == OP_TRANSPOSE && b->in[0] == g->inputs[0]);
    if (b->kind == OP_TRANSPOSE) {
        const Attr *p = op_attr(b, "perm");
        CHECK(p->n == 3 && p->ints[0] == 0 && p->ints[1] == 2 && p->ints[2] == 1);
    }
    CHECK(g->outputs[1] == g->inputs[0]);
    CHECK(out_def(g, 2)->kind == OP_RESHAPE && out_def(g, 2)->in[0] == g->inputs[0]);
    CHECK(g->outputs[3] == g->inputs[0]);
    CHECK(count(g, OP_TRANSPOSE) == 1 && count(g, OP_RESHAPE) == 1);
    CHECK(st.rounds <= 3);
    graph_free(g);
}

/* ---- the same numbers before and after ----------------------------------- */

static const char *mixed =
    "graph @m(%x: f32[N, 8], %y: f32[N, 8], %i: i32[N]) {\n"
    "  %w = const dense<[0.5, -1.0, 2.0, 0.25, 1.0, -0.0, 3.0, 0.0]> : f32[8]\n"
    "  %one = const dense<[1.0]> : f32[]\n"
    "  %nz = const dense<[-0.0]> : f32[]\n"
    "  %pz = const dense<[0.0]> : f32[]\n"
    "  %w2 = mul(%w, %w) : f32[8]\n"
    "  %w3 = exp(%w2) : f32[8]\n"
    "  %a = mul(%x, %one) : f32[N, 8]\n"
    "  %b = add(%a, %nz) : f32[N, 8]\n"
    "  %c = add(%b, %pz) : f32[N, 8]\n"
    "  %d = neg(%c) : f32[N, 8]\n"
    "  %e = neg(%d) : f32[N, 8]\n"
    "  %f = mul(%e, %w3) : f32[N, 8]\n"
    "  %g = mul(%e, %w3) : f32[N, 8]\n"
    "  %h = add(%f, %g) : f32[N, 8]\n"
    "  %t = reshape(%h) {shape = [N, 2, 4]} : f32[N, 2, 4]\n"
    "  %u = transpose(%t) {perm = [0, 2, 1]} : f32[N, 4, 2]\n"
    "  %v = transpose(%u) {perm = [1, 0, 2]} : f32[4, N, 2]\n"
    "  %k = convert(%i) {to = f64} : f64[N]\n"
    "  %l = convert(%k) {to = i32} : i32[N]\n"
    "  %m = sub(%y, %pz) : f32[N, 8]\n"
    "  %z = max(%m, %y) : f32[N, 8]\n"
    "  return %v, %l, %c, %z\n}\n";

static void test_same_numbers(void)
{
    Graph *g0 = parse(mixed), *g1 = parse(mixed);
    if (!g0 || !g1) {
        graph_free(g0);
        graph_free(g1);
        return;
    }
    CanonStats st;
    canon_run(g1, &st);
    Diag d = {0};
    CHECK_MSG(graph_verify(g1, &d), "%s", d.msg);
    CHECK(st.ops_after < st.ops_before && st.folded >= 2 && st.cse >= 1 && st.simplified >= 4);
    CHECK(count(g1, OP_NEG) == 0 && count(g1, OP_TRANSPOSE) == 1 && count(g1, OP_CONVERT) == 0);
    int64_t n = 5;
    Tensor in[3];
    tensor_alloc(&in[0], DT_F32, 2, (int64_t[]){n, 8});
    tensor_alloc(&in[1], DT_F32, 2, (int64_t[]){n, 8});
    tensor_alloc(&in[2], DT_I32, 1, &n);
    for (size_t j = 0; j < 40; j++) { /* zeros of both signs, NaN, infinities and plain numbers */
        static const double special[] = {0.0, -0.0, NAN, INFINITY, -INFINITY, 1e-40, -3.5};
        interp_store_f(&in[0], j, j < 7 ? special[j] : sin((double)j) * 100);
        interp_store_f(&in[1], j, j < 7 ? special[6 - j] : cos((double)j));
    }
    for (size_t j = 0; j < (size_t)n; j++)
        interp_store_i(&in[2], j, (int64_t)j * 1000003 - 7);
    Tensor o0[4], o1[4];
    Diag d0 = {0}, d1 = {0};
    bool ok0 = interp_run(g0, in, 3, o0, 4, &d0), ok1 = interp_run(g1, in, 3, o1, 4, &d1);
    CHECK_MSG(ok0, "%s", d0.msg);
    CHECK_MSG(ok1, "%s", d1.msg);
    if (ok0 && ok1)
        for (int i = 0; i < 4; i++) /* bit for bit: -0.0 and NaN included */
            CHECK_MSG(o0[i].nbytes == o1[i].nbytes && !memcmp(o0[i].data, o1[i].data, o0[i].nbytes),
                      "output %d differs", i);
    for (int i = 0; ok0 && i < 4; i++)
        tensor_free(&o0[i]);
    for (int i = 0; ok1 && i < 4; i++)
        tensor_free(&o1[i]);
    for (int i = 0; i < 3; i++)
        tensor_free(&in[i]);
    graph_free(g0);
    graph_free(g1);
}

static void test_fixed_point(void)
{
    /* nothing to do: one round, no change, the same text */
    CanonStats st;
    Graph *g = canon("graph @n(%x: f32[N]) {\n  %y = exp(%x) : f32[N]\n  return %y\n}\n", &st);
    if (!g)
        return;
    CHECK(canon_run(g, &st) == 0 && st.rounds == 1 && st.ops_after == 1);
    graph_free(g);
}

/* ---- horizontal fusion's constants in the store ------------------------------ */

/* Two dots of x against weights whose hashes the loader knew, fused: the
 * weights side by side come from the graph's store (made there, then
 * mapped; made again when damaged), or from memory without one; the
 * same bytes every way. */
static void test_hfuse_store(void)
{
    enum { K = 256, N = 1024 }; /* 1 MiB each, 2 MiB side by side */
    static float w[2][K * N];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < K * N; j++)
            w[i][j] = (float)(j % 977) * (i ? -0.5f : 0.25f);
    char dir[] = "/tmp/disc_test_hfuse.XXXXXX", file[600] = "";
    CHECK(mkdtemp(dir) != NULL);
    for (int pass = 0; pass < 4; pass++) {
        Graph *g = graph_new("hf");
        Dim *xd[2] = {dim_sym(&g->dims, "s"), dim_const(&g->dims, K)};
        Value *x = graph_add_input(g, "x", type_make(&g->arena, DT_F32, 2, xd));
        for (int i = 0; i < 2; i++) {
            Dim *wd[2] = {dim_const(&g->dims, K), dim_const(&g->dims, N)};
            Value *c = build_const(g, type_make(&g->arena, DT_F32, 2, wd), w[i], sizeof w[i], false);
            c->def->cst->hash_of = w[i];
            c->def->cst->hash = store_hash(w[i], sizeof w[i], sizeof w[i]);
            int64_t lc = 1, rc = 0;
            graph_add_output(g, build_dot(g, x, c, NULL, NULL, 0, &lc, &rc, 1));
        }
        g->store = pass < 3 ? dir : NULL;
        CHECK(canon_hfuse(g) == 2);
        const Op *side = NULL;
        graph_for_each_op(g, op) if (op->kind == OP_CONST && op->cst->nbytes == 2 * sizeof w[0]) side = op;
        bool same = side != NULL;
        for (int r = 0; same && r < K; r++)
            same = !memcmp((const float *)side->cst->data + (size_t)r * 2 * N, w[0] + (size_t)r * N, N * 4) &&
                   !memcmp((const float *)side->cst->data + (size_t)r * 2 * N + N, w[1] + (size_t)r * N, N * 4);
        CHECK_MSG(same, "pass %d: the weights side by side", pass);
        CHECK_MSG(files_ending(dir, ".wts", file, sizeof file) == 1, "pass %d: one file in the store", pass);
        graph_free(g);
        if (pass == 1) { /* damaged: made again */
            usleep(20000); /* in a later tick of the file clock than its mark's (ir/store.c) */
            FILE *f = fopen(file, "r+b");
            CHECK(f && fseek(f, 4096 + 1000, SEEK_SET) == 0 && fputc(0x7f, f) != EOF);
            if (f)
                fclose(f);
        }
    }
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

int main(void)
{
    test_cse();
    test_cse_const();
    test_fold();
    test_fold_bounds();
    test_algebra();
    test_layout_chains();
    test_same_numbers();
    test_fixed_point();
    test_hfuse_store();
    return check_done();
}
