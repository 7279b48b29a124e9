/*
 * op.c — the op table (expanded from ops.def) and op attributes.
 *
 * Each row of ops.def carries its attribute schema as a string such as
 * "kind:sum|max|min axes:ints keepdims:int?". The schema strings are parsed
 * once, on first use, into AttrSpec arrays that the parser, the verifier and
 * the builders consult.
 */
#include "ir/ir.h"

#include <assert.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static OpInfo infos[OP_COUNT] = {
#define OP(e, name_, nin_, nout_, cat_, attrs_, infer_) \
    {.name = name_, .nin = nin_, .nout = nout_, .cat = cat_, .schema = attrs_, .infer = infer_, .sub = -1},
#define UNARY(e, name_, dtypes_) \
    {.name = name_, .nin = 1, .nout = 1, .cat = CAT_UNARY, .schema = "", .infer = infer_unary, \
     .sub = UN_##e, .dtypes = dtypes_},
#define BINARY(e, name_, dtypes_) \
    {.name = name_, .nin = 2, .nout = 1, .cat = CAT_BINARY, .schema = "", .infer = infer_binary, \
     .sub = BIN_##e, .dtypes = dtypes_},
#include "ops.def"
};

enum { MAX_SPECS = 512 };
static AttrSpec specs[MAX_SPECS];
static char spec_text[8192];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static AttrKind kind_from_word(const char *w, bool *is_enum)
{
    static const struct {
        const char *w;
        AttrKind k;
    } words[] = {
        {"int", ATTR_INT},   {"float", ATTR_FLOAT},   {"str", ATTR_STR},
        {"ints", ATTR_INTS}, {"floats", ATTR_FLOATS}, {"dims", ATTR_DIMS},
        {"dtype", ATTR_DTYPE},
    };
    *is_enum = false;
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (strcmp(words[i].w, w) == 0)
            return words[i].k;
    *is_enum = true;
    return ATTR_STR;
}

/* Splits every schema into words inside spec_text and fills specs[]. The
 * table is static, so a malformed schema is a programming error. */
static void parse_schemas(void)
{
    size_t used = 0;
    int nspec = 0;
    for (int k = 0; k < OP_COUNT; k++) {
        OpInfo *info = &infos[k];
        size_t len = strlen(info->schema);
        assert(used + len + 1 <= sizeof spec_text);
        char *s = memcpy(spec_text + used, info->schema, len + 1);
        used += len + 1;
        info->attrs = &specs[nspec];
        for (char *tok = strtok(s, " "); tok; tok = strtok(NULL, " ")) {
            assert(nspec < MAX_SPECS);
            AttrSpec *sp = &specs[nspec++];
            char *colon = strchr(tok, ':');
            assert(colon);
            *colon = 0;
            char *kind = colon + 1;
            size_t kl = strlen(kind);
            if (kl && kind[kl - 1] == '?') {
                sp->optional = true;
                kind[kl - 1] = 0;
            }
            bool is_enum;
            sp->name = tok;
            sp->kind = kind_from_word(kind, &is_enum);
            sp->enums = is_enum ? kind : NULL;
            info->nattrs++;
        }
    }
}

const OpInfo *op_info(OpKind k)
{
    assert(k >= 0 && k < OP_COUNT);
    pthread_once(&once, parse_schemas);
    return &infos[k];
}

UnaryOp op_unary(OpKind k)
{
    const OpInfo *info = op_info(k);
    return info->cat == CAT_UNARY ? (UnaryOp)info->sub : UN_COUNT;
}

BinaryOp op_binary(OpKind k)
{
    const OpInfo *info = op_info(k);
    return info->cat == CAT_BINARY ? (BinaryOp)info->sub : BIN_COUNT;
}

bool op_takes_dtype(OpKind k, DType dt)
{
    unsigned c = dtype_is_float(dt) ? DTS_FLOAT : dt == DT_BOOL ? DTS_BOOL : dtype_is_int(dt) ? DTS_INT : 0;
    return (op_info(k)->dtypes & c) != 0;
}

DType op_result_dtype(OpKind k, DType dt)
{
    return op_info(k)->dtypes & DTS_TO_BOOL ? DT_BOOL : dt;
}

OpKind op_kind_from_name(const char *s, size_t n)
{
    for (int k = 0; k < OP_COUNT; k++)
        if (strlen(infos[k].name) == n && memcmp(infos[k].name, s, n) == 0)
            return (OpKind)k;
    return OP_COUNT;
}

const AttrSpec *op_attr_spec(OpKind k, const char *name)
{
    const OpInfo *info = op_info(k);
    for (int i = 0; i < info->nattrs; i++)
        if (strcmp(info->attrs[i].name, name) == 0)
            return &info->attrs[i];
    return NULL;
}

/* ---- reading attributes ---------------------------------------------- */

const Attr *op_attr(const Op *op, const char *name)
{
    for (int i = 0; i < op->nattrs; i++)
        if (strcmp(op->attrs[i].name, name) == 0)
            return &op->attrs[i];
    return NULL;
}

int64_t op_attr_int(const Op *op, const char *name, int64_t dflt)
{
    const Attr *a = op_attr(op, name);
    return a && a->kind == ATTR_INT ? a->i : dflt;
}

double op_attr_float(const Op *op, const char *name, double dflt)
{
    const Attr *a = op_attr(op, name);
    return a && a->kind == ATTR_FLOAT ? a->f : dflt;
}

const char *op_attr_str(const Op *op, const char *name, const char *dflt)
{
    const Attr *a = op_attr(op, name);
    return a && a->kind == ATTR_STR ? a->s : dflt;
}

/* ---- setting attributes ---------------------------------------------- */

/* Position of `name` in the schema, or the end for names it lacks (the
 * verifier reports those). Keeps op->attrs in schema order. */
static int schema_pos(OpKind k, const char *name)
{
    const OpInfo *info = op_info(k);
    for (int i = 0; i < info->nattrs; i++)
        if (strcmp(info->attrs[i].name, name) == 0)
            return i;
    return info->nattrs;
}

static Attr *slot(Graph *g, Op *op, const char *name, AttrKind kind)
{
    for (int i = 0; i < op->nattrs; i++)
        if (strcmp(op->attrs[i].name, name) == 0) {
            op->attrs[i].kind = kind;
            return &op->attrs[i];
        }
    Attr *v = arena_array(&g->arena, (size_t)op->nattrs + 1, sizeof(Attr));
    if (!v)
        return NULL;
    int pos = schema_pos(op->kind, name), at = op->nattrs;
    for (int i = 0; i < op->nattrs; i++)
        if (schema_pos(op->kind, op->attrs[i].name) > pos) {
            at = i;
            break;
        }
    memcpy(v, op->attrs, (size_t)at * sizeof(Attr));
    memcpy(v + at + 1, op->attrs + at, (size_t)(op->nattrs - at) * sizeof(Attr));
    op->attrs = v;
    op->nattrs++;
    v[at].name = arena_strdup(&g->arena, name);
    v[at].kind = kind;
    return &v[at];
}

static void *dup(Graph *g, const void *p, int n, size_t size)
{
    if (n <= 0 || !p)
        return NULL;
    void *q = arena_array(&g->arena, (size_t)n, size);
    if (q)
        memcpy(q, p, (size_t)n * size);
    return q;
}

void op_set_attr(Graph *g, Op *op, const Attr *a)
{
    Attr *b = slot(g, op, a->name, a->kind);
    if (!b)
        return;
    const char *name = b->name;
    *b = *a;
    b->name = name;
    switch (a->kind) {
    case ATTR_STR: b->s = arena_strdup(&g->arena, a->s); break;
    case ATTR_INTS: b->ints = dup(g, a->ints, a->n, sizeof *a->ints); break;
    case ATTR_FLOATS: b->floats = dup(g, a->floats, a->n, sizeof *a->floats); break;
    case ATTR_DIMS: b->dims = dup(g, a->dims, a->n, sizeof *a->dims); break;
    default: break;
    }
}
