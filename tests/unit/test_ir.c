/*
 * test_ir.c — the IR core: arena, op table, builders and their type rules,
 * attribute checks, the verifier.
 */
#include "ir/ir.h"
#include "tests/unit/check.h"

#include <stdint.h>
#include <string.h>

static Dim *sym(Graph *g, const char *n) { return dim_sym(&g->dims, n); }
static Dim *cst(Graph *g, int64_t c) { return dim_const(&g->dims, c); }

static Value *input(Graph *g, const char *name, DType dt, int rank, Dim *const *dims)
{
    return graph_add_input(g, name, type_make(&g->arena, dt, rank, dims));
}

static bool has(const char *s, const char *sub) { return strstr(s, sub) != NULL; }

static void test_arena(void)
{
    Arena a;
    arena_init(&a);
    CHECK(arena_array(&a, SIZE_MAX / 2, 4) == NULL);
    CHECK(arena_alloc(&a, SIZE_MAX - 4) == NULL);
    char *p = arena_alloc(&a, 1 << 20); /* a private big block */
    CHECK(p != NULL);
    p[(1 << 20) - 1] = 1;
    int *q = arena_array(&a, 10, sizeof(int));
    CHECK(q && q[9] == 0 && ((uintptr_t)q & 15) == 0);
    CHECK(!strcmp(arena_printf(&a, "%s-%d", "x", 7), "x-7"));
    size_t r;
    CHECK(!size_mul(SIZE_MAX, 2, &r));
    CHECK(size_mul(3, 4, &r) && r == 12);
    CHECK(!size_add(SIZE_MAX, 1, &r));
    arena_free(&a);
}

static void test_optable(void)
{
    CHECK(op_kind_from_name("reduce", 6) == OP_REDUCE);
    CHECK(op_kind_from_name("nosuch", 6) == OP_COUNT);
    const AttrSpec *sp = op_attr_spec(OP_REDUCE, "kind");
    CHECK(sp && sp->kind == ATTR_STR && sp->enums && !strcmp(sp->enums, "sum|max|min|prod|mean"));
    sp = op_attr_spec(OP_RESIZE, "scales");
    CHECK(sp && sp->optional && sp->kind == ATTR_FLOATS);
    CHECK(op_attr_spec(OP_ADD, "axis") == NULL);
    CHECK(op_info(OP_CONCAT)->nin == VARIADIC);
    CHECK(op_info(OP_TOPK)->nout == 2);
    CHECK(dtype_from_name("bf16", 4) == DT_BF16 && dtype_size(DT_BF16) == 2);
    CHECK(dtype_from_name("f128", 4) == DT_INVALID);
    /* every op has a name, a rule, and a category */
    for (int k = 0; k < OP_COUNT; k++)
        CHECK(op_info(k)->name && op_info(k)->infer);
}

static void test_elementwise(void)
{
    Graph *g = graph_new("t");
    Dim *bsh[3] = {sym(g, "B"), sym(g, "S"), cst(g, 768)};
    Value *x = input(g, "x", DT_F32, 3, bsh);
    Value *b = input(g, "b", DT_F32, 1, &bsh[2]);
    Value *i = input(g, "i", DT_I64, 1, &bsh[2]);
    Value *y = build_binary(g, OP_ADD, x, b);
    CHECK(y && y->type.rank == 3 && type_eq(&y->type, &x->type));
    CHECK(build_binary(g, OP_ADD, x, i) == NULL);
    CHECK(has(graph_error(g), "add: operand dtypes differ: f32 and i64"));
    Value *c = build_cmp(g, "lt", x, b);
    CHECK(c && c->type.dtype == DT_BOOL);
    CHECK(build_cmp(g, "less", x, b) == NULL);
    CHECK(has(graph_error(g), "must be one of eq|ne|lt|le|gt|ge"));
    CHECK(build_select(g, c, x, b) != NULL);
    CHECK(build_select(g, x, x, b) == NULL);
    CHECK(build_unary(g, OP_NOT, x) == NULL);
    CHECK(build_unary(g, OP_EXP, i) == NULL);
    Value *n = build_unary(g, OP_ISNAN, x);
    CHECK(n && n->type.dtype == DT_BOOL);
    Value *h = build_convert(g, x, DT_F16);
    CHECK(h && h->type.dtype == DT_F16);
    /* symbolic broadcasting of S against T gives max(S, T) */
    Dim *t1 = sym(g, "T");
    Value *u = input(g, "u", DT_F32, 1, &bsh[1]);
    Value *v = input(g, "v", DT_F32, 1, &t1);
    Value *w = build_binary(g, OP_MUL, u, v);
    CHECK(w && w->type.dims[0] == dim_max(&g->dims, bsh[1], t1));
    /* 768 against 3 cannot broadcast */
    Dim *three = cst(g, 3);
    Value *z = input(g, "z", DT_F32, 1, &three);
    CHECK(build_binary(g, OP_ADD, b, z) == NULL);
    CHECK(has(graph_error(g), "cannot broadcast: 768 vs 3"));
    Diag d = {0};
    CHECK(graph_verify(g, &d));
    graph_free(g);
}

static void test_movement(void)
{
    Graph *g = graph_new("t");
    DimCtx *cx = &g->dims;
    Dim *B = sym(g, "B"), *S = sym(g, "S");
    Dim *sh[3] = {B, S, cst(g, 768)};
    Value *x = input(g, "x", DT_F32, 3, sh);
    Dim *r1[2] = {dim_mul(cx, B, S), cst(g, 768)};
    Value *r = build_reshape(g, x, r1, 2);
    CHECK(r && r->type.dims[0] == dim_mul(cx, B, S));
    Dim *bad[2] = {dim_mul(cx, B, S), cst(g, 700)};
    CHECK(build_reshape(g, x, bad, 2) != NULL); /* symbolic: a run-time check */
    Dim *sx[1] = {cst(g, 6)};
    Value *six = input(g, "six", DT_F32, 1, sx);
    Dim *eight[1] = {cst(g, 8)};
    CHECK(build_reshape(g, six, eight, 1) == NULL);
    CHECK(has(graph_error(g), "reshape changes the element count: 6 vs 8"));
    Dim *heads[4] = {B, S, cst(g, 12), cst(g, 64)};
    Value *h = build_reshape(g, x, heads, 4);
    int64_t perm[4] = {0, 2, 1, 3};
    Value *t = build_transpose(g, h, perm);
    CHECK(t && t->type.dims[1] == cst(g, 12) && t->type.dims[2] == S);
    int64_t badperm[3] = {0, 0, 1};
    CHECK(build_transpose(g, x, badperm) == NULL);
    /* slice [1, S-1) on axis 1 */
    Dim *st[3] = {cst(g, 0), cst(g, 1), cst(g, 0)};
    Dim *li[3] = {B, dim_addc(cx, S, -1), cst(g, 768)};
    int64_t strides[3] = {1, 1, 2};
    Value *s = build_slice(g, x, st, li, strides);
    CHECK(s && s->type.dims[1] == dim_addc(cx, S, -2) && s->type.dims[2] == cst(g, 384));
    Value *parts[2] = {x, x};
    Value *c = build_concat(g, parts, 2, 1);
    CHECK(c && c->type.dims[1] == dim_mulc(cx, S, 2));
    CHECK(build_concat(g, parts, 2, 3) == NULL);
    int64_t axes[1] = {2};
    Value *m = build_reduce(g, x, "mean", axes, 1, true);
    CHECK(m && m->type.rank == 3 && dim_is(m->type.dims[2], 1));
    Value *m2 = build_reduce(g, x, "sum", axes, 1, false);
    CHECK(m2 && m2->type.rank == 2);
    CHECK(build_reduce(g, x, "avg", axes, 1, false) == NULL);
    Value *io = build_iota(g, DT_I64, &S, 1, 0);
    CHECK(io && io->type.dims[0] == S);
    Value *dm = build_dim(g, x, 1);
    CHECK(dm && dm->type.rank == 0 && dm->type.dtype == DT_I64);
    Value *so = build_shape_of(g, x);
    CHECK(so && dim_is(so->type.dims[0], 3));
    /* dyn_reshape gets fresh derived symbols */
    Value *dr = build_op(g, OP_DYN_RESHAPE, (Value *[]){x, so}, 2, NULL, 0)->out[0];
    CHECK(dr->type.rank == 3 && dr->type.dims[0]->kind == DIM_SYM && dr->type.dims[0]->origin == SYM_DERIVED);
    Op *nz = build_op(g, OP_NONZERO, &x, 1, NULL, 0);
    CHECK(nz && dim_is(nz->out[0]->type.dims[0], 3) && nz->out[0]->type.dims[1]->origin == SYM_DATA);
    Diag d = {0};
    CHECK_MSG(graph_verify(g, &d), "%s", d.msg);
    graph_free(g);
}

static void test_library(void)
{
    Graph *g = graph_new("t");
    DimCtx *cx = &g->dims;
    Dim *B = sym(g, "B"), *S = sym(g, "S"), *H = sym(g, "H"), *W = sym(g, "W");
    Dim *ash[3] = {B, S, cst(g, 64)}, *bsh[3] = {B, cst(g, 64), S};
    Value *a = input(g, "a", DT_F32, 3, ash), *b = input(g, "b", DT_F32, 3, bsh);
    int64_t zero = 0, two = 2, one = 1;
    Value *dt = build_dot(g, a, b, &zero, &zero, 1, &two, &one, 1);
    CHECK(dt && dt->type.rank == 3 && dt->type.dims[1] == S && dt->type.dims[2] == S);
    CHECK(build_dot(g, a, a, &zero, &zero, 1, &two, &two, 1) != NULL);
    Dim *csh[3] = {B, cst(g, 32), S};
    Value *c = input(g, "c", DT_F32, 3, csh);
    CHECK(build_dot(g, a, c, &zero, &zero, 1, &two, &one, 1) == NULL);
    CHECK(has(graph_error(g), "contracting dims differ: 64 vs 32"));
    /* conv: 3x3, stride 2, pad 1 on dynamic H, W */
    Dim *xs[4] = {B, cst(g, 3), H, W}, *ws[4] = {cst(g, 16), cst(g, 3), cst(g, 3), cst(g, 3)};
    Value *x = input(g, "x", DT_F32, 4, xs), *w = input(g, "w", DT_F32, 4, ws);
    AttrList l = {0};
    int64_t s2[2] = {2, 2}, d1[2] = {1, 1};
    Dim *pads[4] = {cst(g, 1), cst(g, 1), cst(g, 1), cst(g, 1)};
    attrs_add_ints(g, &l, "strides", s2, 2);
    attrs_add_dims(g, &l, "pads", pads, 4);
    attrs_add_ints(g, &l, "dilations", d1, 2);
    attrs_add_int(g, &l, "groups", 1);
    Op *conv = build_op(g, OP_CONV, (Value *[]){x, w}, 2, l.v, l.n);
    CHECK(conv != NULL);
    if (conv) {
        /* floordiv(H + 2 - 3, 2) + 1 = floordiv(H - 1, 2) + 1 */
        Dim *e = dim_addc(cx, dim_floordiv(cx, dim_addc(cx, H, -1), cst(g, 2)), 1);
        CHECK(conv->out[0]->type.dims[2] == e);
        CHECK(dim_is(conv->out[0]->type.dims[1], 16));
    }
    AttrList bad = {0};
    attrs_add_ints(g, &bad, "strides", s2, 2);
    attrs_add_dims(g, &bad, "pads", pads, 4);
    attrs_add_ints(g, &bad, "dilations", d1, 2);
    CHECK(build_op(g, OP_CONV, (Value *[]){x, w}, 2, bad.v, bad.n) == NULL);
    CHECK(has(graph_error(g), "needs attribute 'groups'"));
    attrs_add_float(g, &bad, "groups", 1.0);
    CHECK(build_op(g, OP_CONV, (Value *[]){x, w}, 2, bad.v, bad.n) == NULL);
    CHECK(has(graph_error(g), "attribute 'groups' of op 'conv' must be int, not float"));
    AttrList extra = l;
    attrs_add_int(g, &extra, "bogus", 1);
    CHECK(build_op(g, OP_CONV, (Value *[]){x, w}, 2, extra.v, extra.n) == NULL);
    CHECK(has(graph_error(g), "unknown attribute 'bogus'"));
    CHECK(build_op(g, OP_CONV, (Value *[]){x}, 1, l.v, l.n) == NULL);
    CHECK(has(graph_error(g), "takes 2 operands, not 1"));
    graph_free(g);
}

static void test_const_and_verify(void)
{
    Graph *g = graph_new("t");
    float v[4] = {1, 2, 3, 4};
    Dim *two[2] = {cst(g, 2), cst(g, 2)};
    Type t = type_make(&g->arena, DT_F32, 2, two);
    Value *c = build_const(g, t, v, sizeof v, true);
    CHECK(c && c->def->cst->nbytes == 16);
    CHECK(build_const(g, t, v, 8, true) == NULL);
    Dim *S = sym(g, "S");
    CHECK(build_const(g, type_make(&g->arena, DT_F32, 1, &S), v, 4, true) == NULL);
    Value *y = build_binary(g, OP_ADD, c, c);
    CHECK(graph_add_output(g, y));
    Diag d = {0};
    CHECK(graph_verify(g, &d));
    /* break SSA order: move the add before the const */
    graph_move_op(g, y->def, g->first);
    Diag e = {0};
    CHECK(!graph_verify(g, &e) && has(e.msg, "operand used before it is defined"));
    graph_move_op(g, y->def, NULL);
    /* a declared type that disagrees with the rule */
    y->type.dtype = DT_F64;
    Diag f = {0};
    CHECK(!graph_verify(g, &f) && has(f.msg, "result 0 has type f64[2, 2], but the operands give f32[2, 2]"));
    y->type.dtype = DT_F32;
    CHECK(graph_count_uses(g, c) == 2);
    /* op_set_attr: copies, replaces, keeps schema order */
    int64_t ax[1] = {1};
    Op *r = build_op(g, OP_REDUCE, &c, 1,
                     (Attr[]){{.name = "kind", .kind = ATTR_STR, .s = "sum"},
                              {.name = "axes", .kind = ATTR_INTS, .n = 1, .ints = ax},
                              {.name = "keepdims", .kind = ATTR_INT, .i = 0}},
                     3);
    CHECK(r != NULL);
    if (r) {
        ax[0] = 0; /* the op holds its own copy */
        CHECK(op_attr(r, "axes")->ints[0] == 1);
        op_set_attr(g, r, &(Attr){.name = "kind", .kind = ATTR_STR, .s = "max"});
        CHECK(!strcmp(op_attr_str(r, "kind", ""), "max") && r->nattrs == 3 && !strcmp(r->attrs[0].name, "kind"));
        Diag e2 = {0};
        CHECK(op_check_attrs(r, &e2));
    }
    graph_free(g);
}

int main(void)
{
    test_arena();
    test_optable();
    test_elementwise();
    test_movement();
    test_library();
    test_const_and_verify();
    return check_done();
}
