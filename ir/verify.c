/*
 * verify.c — the verifier: checks that a graph is well formed.
 *
 * Every operand is defined above its use (SSA order), arities match the op
 * table, attributes match the op's schema, and each result type agrees with
 * what the op's rule infers from its operands: same dtype and rank, and the
 * same dim wherever the rule determines one. The message names the failing
 * op: by file and line when the graph came from text, else by its position,
 * kind and source name.
 */
#include "ir/ir.h"

#include <stdlib.h>
#include <string.h>

static const char *kind_name(AttrKind k)
{
    static const char *names[] = {"int", "float", "str", "ints", "floats", "dims", "dtype"};
    return names[k];
}

static bool enum_allows(const char *enums, const char *w)
{
    size_t n = strlen(w);
    for (const char *p = enums; *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && !memcmp(p, w, n))
            return true;
        if (!bar)
            break;
        p = bar + 1;
    }
    return false;
}

bool op_check_attrs(const Op *op, Diag *d)
{
    const OpInfo *info = op_info(op->kind);
    for (int i = 0; i < op->nattrs; i++) {
        const Attr *a = &op->attrs[i];
        const AttrSpec *sp = op_attr_spec(op->kind, a->name);
        if (!sp)
            return diag_set(d, "unknown attribute '%s' for op '%s'", a->name, info->name);
        if (sp->kind != a->kind)
            return diag_set(d, "attribute '%s' of op '%s' must be %s, not %s", a->name, info->name,
                            sp->enums ? "one of the words" : kind_name(sp->kind), kind_name(a->kind));
        if (sp->enums && !enum_allows(sp->enums, a->s))
            return diag_set(d, "attribute '%s' of op '%s' must be one of %s, not '%s'", a->name, info->name,
                            sp->enums, a->s);
        if (a->kind == ATTR_DIMS)
            for (int j = 0; j < a->n; j++)
                if (!a->dims[j])
                    return diag_set(d, "attribute '%s' of op '%s' has an invalid dim", a->name, info->name);
        if (a->kind == ATTR_DTYPE && (a->dt < 0 || a->dt >= DT_COUNT))
            return diag_set(d, "attribute '%s' of op '%s' has an invalid dtype", a->name, info->name);
        if (a->n > MAX_RANK * 4 && a->kind != ATTR_FLOATS)
            return diag_set(d, "attribute '%s' of op '%s' is too long", a->name, info->name);
        for (int j = 0; j < i; j++)
            if (!strcmp(op->attrs[j].name, a->name))
                return diag_set(d, "attribute '%s' given twice", a->name);
    }
    for (int i = 0; i < info->nattrs; i++)
        if (!info->attrs[i].optional && !op_attr(op, info->attrs[i].name))
            return diag_set(d, "op '%s' needs attribute '%s'", info->name, info->attrs[i].name);
    return true;
}

bool op_check_arity(const Op *op, Diag *d)
{
    const OpInfo *info = op_info(op->kind);
    if (info->nin != VARIADIC && op->nin != info->nin)
        return diag_set(d, "op '%s' takes %d operand%s, not %d", info->name, info->nin,
                        info->nin == 1 ? "" : "s", op->nin);
    if (info->nin == VARIADIC && op->nin < 1)
        return diag_set(d, "op '%s' takes at least one operand", info->name);
    if (info->nout != VARIADIC && op->nout != info->nout)
        return diag_set(d, "op '%s' has %d result%s, not %d", info->name, info->nout,
                        info->nout == 1 ? "" : "s", op->nout);
    for (int i = 0; i < op->nin; i++)
        if (!op->in[i])
            return diag_set(d, "op '%s': operand %d is missing", info->name, i);
    return true;
}

static bool type_valid(const Type *t)
{
    if (t->dtype < 0 || t->dtype >= DT_COUNT || t->rank < 0 || t->rank > MAX_RANK)
        return false;
    for (int i = 0; i < t->rank; i++)
        if (!t->dims[i])
            return false;
    return true;
}

static void type_str(char *buf, size_t size, const Type *t)
{
    int n = snprintf(buf, size, "%s[", dtype_name(t->dtype));
    for (int i = 0; i < t->rank && n >= 0 && (size_t)n < size; i++) {
        if (i)
            n += snprintf(buf + n, size - (size_t)n, ", ");
        if ((size_t)n < size)
            n += dim_snprint(buf + n, size - (size_t)n, t->dims[i]);
    }
    if (n >= 0 && (size_t)n < size)
        snprintf(buf + n, size - (size_t)n, "]");
}

/* Compares declared result types with the inferred ones. */
static bool check_results(const Op *op, const Type *inf, Diag *d)
{
    for (int i = 0; i < op->nout; i++) {
        const Type *t = &op->out[i]->type, *r = &inf[i];
        bool ok = t->dtype == r->dtype && t->rank == r->rank;
        for (int k = 0; ok && k < t->rank; k++)
            ok = !r->dims || !r->dims[k] || r->dims[k] == t->dims[k];
        if (!ok) {
            char a[256], b[256];
            type_str(a, sizeof a, t);
            /* Undetermined dims print as '?'. */
            int n = snprintf(b, sizeof b, "%s[", dtype_name(r->dtype));
            for (int k = 0; k < r->rank && n >= 0 && (size_t)n < sizeof b; k++) {
                if (k)
                    n += snprintf(b + n, sizeof b - (size_t)n, ", ");
                if ((size_t)n >= sizeof b)
                    break;
                if (r->dims && r->dims[k])
                    n += dim_snprint(b + n, sizeof b - (size_t)n, r->dims[k]);
                else
                    n += snprintf(b + n, sizeof b - (size_t)n, "?");
            }
            if (n >= 0 && (size_t)n < sizeof b)
                snprintf(b + n, sizeof b - (size_t)n, "]");
            return diag_set(d, "result %d has type %s, but the operands give %s", i, a, b);
        }
    }
    return true;
}

/* The error of op, of kind k (a resource error once the graph's arena
 * failed), located at its line in the IR text. */
static bool fail_at(const Graph *g, const Op *op, Diag *d, DiagKind k, const char *msg)
{
    const char *name = op_info(op->kind)->name;
    if (!d || d->set)
        return false;
    if (g->arena.failed)
        k = DIAG_RESOURCE;
    if (g->file && op->line)
        diag_setk(d, k, "%s:%d: error: %s: %s", g->file, op->line, name, msg);
    else if (op->src)
        diag_setk(d, k, "error: op %d (%s \"%s\"): %s", op->id, name, op->src, msg);
    else
        diag_setk(d, k, "error: op %d (%s): %s", op->id, name, msg);
    diag_locate(d, g->file, op->line, 0, 0);
    return false;
}

bool graph_verify(Graph *g, Diag *d)
{
    bool *defined = calloc((size_t)g->nvalues + 1, 1);
    if (!defined)
        return diag_oom(d);
    bool ok = true;
    for (int i = 0; i < g->ninputs && ok; i++) {
        if (!type_valid(&g->inputs[i]->type))
            ok = diag_set(d, "error: input %d has an invalid type", i);
        else
            defined[g->inputs[i]->id] = true;
    }
    graph_for_each_op(g, op) {
        if (!ok)
            break;
        Diag e = {0};
        Type inf[MAX_RESULTS];
        if (!op_check_arity(op, &e) || !op_check_attrs(op, &e)) {
            ok = fail_at(g, op, d, e.kind, e.msg);
            break;
        }
        for (int i = 0; i < op->nin && ok; i++)
            if (op->in[i]->id >= g->nvalues || !defined[op->in[i]->id])
                ok = fail_at(g, op, d, DIAG_MODEL, "operand used before it is defined");
        for (int i = 0; i < op->nout && ok; i++)
            if (!type_valid(&op->out[i]->type))
                ok = fail_at(g, op, d, DIAG_MODEL, "result has an invalid type");
        if (!ok)
            break;
        if ((op->nregions || op->kind == OP_LOOP || op->kind == OP_IF) && !region_verify(op, &e)) {
            ok = fail_at(g, op, d, e.kind, e.msg);
            break;
        }
        if (op->nout > MAX_RESULTS) {
            ok = fail_at(g, op, d, DIAG_MODEL, "too many results");
            break;
        }
        memset(inf, 0, sizeof inf);
        if (!op_info(op->kind)->infer(g, op, inf, &e) || !check_results(op, inf, &e)) {
            ok = fail_at(g, op, d, e.kind, e.msg);
            break;
        }
        for (int i = 0; i < op->nout; i++)
            defined[op->out[i]->id] = true;
    }
    for (int i = 0; i < g->noutputs && ok; i++)
        if (!g->outputs[i] || g->outputs[i]->id >= g->nvalues || !defined[g->outputs[i]->id])
            ok = diag_set(d, "error: graph output %d is not defined", i);
    free(defined);
    return ok;
}
