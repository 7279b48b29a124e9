/*
 * print.c — the IR text format, from Graph to text (grammar: doc/ir.md).
 *
 * The printer's one promise is that parse(print(g)) prints back exactly as
 * print(g), for every graph. The pieces that make that hold:
 *
 *   - Names. Unnamed values print as %0, %1, ... (a counter over unnamed
 *     values only, in definition order, inputs first); the parser reads an
 *     unquoted all-digit name as unnamed. A named value prints as %name,
 *     quoted (%"a/b:0") when the name has characters outside
 *     [A-Za-z0-9_.$-], is empty or is all digits, and with a suffix
 *     (%x.1, %x.2, ...) when an earlier value already printed under it.
 *   - Numbers. Floats print in the shortest form that reads back to the
 *     same bits, and always look like floats ("1.0", "1e+20", "-0.0",
 *     "inf", "nan"). f16 and bf16 print their exact value as a double.
 *   - Constants. Inline when small, as one splat value when all elements
 *     are equal, else as hex bytes (or 'elided', when asked). Elements whose
 *     bits the decimal form cannot carry (a NaN with a payload, a bool byte
 *     other than 0 or 1) force the hex form.
 *   - Symbols. Every symbol whose bounds or origin differ from the default
 *     gets a `sym` line, sorted by name; dims print through dim_print,
 *     whose canonical form the parser rebuilds to the same interned Dim.
 */
#include "ir/ir.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { INLINE_MAX_DEFAULT = 16 };

typedef struct Printer {
    FILE *f;
    int inline_max; /* from PrintOpts; < 0: no limit */
    bool elide;
    bool full_regions;
    Arena tmp;
    const Value **vkeys; /* value -> printed name ("%x", "%\"a/b\"", "%3") */
    const char **vnames;
    size_t vcap;
    const char **used;   /* names of named values already printed */
    size_t ucap;
    const char *indent;  /* of a region's lines: the enclosing op's, and four more */
} Printer;

static void print_graph(FILE *f, const Graph *g, const PrintOpts *o, const char *indent);

/* ---- names ----------------------------------------------------------- */

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static size_t hash_ptr(const void *p, size_t cap)
{
    uint64_t h = (uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 32) & (cap - 1);
}

/* Marks s used; false if it already was. */
static bool use_name(Printer *pr, const char *s)
{
    size_t i = hash_str(s) & (pr->ucap - 1);
    for (; pr->used[i]; i = (i + 1) & (pr->ucap - 1))
        if (strcmp(pr->used[i], s) == 0)
            return false;
    pr->used[i] = s;
    return true;
}

static void set_vname(Printer *pr, const Value *v, const char *s)
{
    size_t i = hash_ptr(v, pr->vcap);
    while (pr->vkeys[i] && pr->vkeys[i] != v)
        i = (i + 1) & (pr->vcap - 1);
    pr->vkeys[i] = v;
    pr->vnames[i] = s;
}

static const char *vname(const Printer *pr, const Value *v)
{
    if (!pr->vcap)
        return "%?";
    size_t i = hash_ptr(v, pr->vcap);
    for (; pr->vkeys[i]; i = (i + 1) & (pr->vcap - 1))
        if (pr->vkeys[i] == v)
            return pr->vnames[i];
    return "%?"; /* not defined in this graph: a broken graph */
}

static bool is_bare_char(int c) { return isalnum(c) || c == '_' || c == '.' || c == '$' || c == '-'; }

/* True if name can follow '%' or '@' without quotes. */
static bool is_bare_name(const char *s, bool digits_ok)
{
    bool digits = true;
    if (!*s)
        return false;
    for (const char *p = s; *p; p++) {
        if (!is_bare_char((unsigned char)*p))
            return false;
        digits = digits && isdigit((unsigned char)*p);
    }
    return digits_ok || !digits;
}

/* s as a string literal, escaped so the parser reads back the same bytes:
 * octal escapes (never more than three digits) for control bytes. */
static char *quote(Arena *a, const char *s)
{
    size_t n = strlen(s);
    char *q = arena_alloc(a, 4 * n + 3), *p = q;
    if (!q)
        return NULL;
    *p++ = '"';
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            *p++ = '\\';
            *p++ = (char)c;
        } else if (c == '\n') {
            *p++ = '\\';
            *p++ = 'n';
        } else if (c == '\t') {
            *p++ = '\\';
            *p++ = 't';
        } else if (c < 0x20 || c == 0x7f) {
            p += sprintf(p, "\\%03o", c);
        } else {
            *p++ = (char)c;
        }
    }
    *p++ = '"';
    *p = 0;
    return q;
}

static char *sigil_name(Arena *a, char sigil, const char *s, bool digits_ok)
{
    if (is_bare_name(s, digits_ok))
        return arena_printf(a, "%c%s", sigil, s);
    char *q = quote(a, s);
    return q ? arena_printf(a, "%c%s", sigil, q) : NULL;
}

/* Gives every value its printed name. False if out of memory. */
static bool name_values(Printer *pr, const Graph *g)
{
    size_t n = (size_t)g->ninputs, cap = 16;
    graph_for_each_op(g, op) n += (size_t)op->nout;
    while (cap < 2 * n)
        cap *= 2;
    pr->vcap = pr->ucap = cap;
    pr->vkeys = arena_array(&pr->tmp, cap, sizeof *pr->vkeys);
    pr->vnames = arena_array(&pr->tmp, cap, sizeof *pr->vnames);
    pr->used = arena_array(&pr->tmp, cap, sizeof *pr->used);
    if (!pr->vkeys || !pr->vnames || !pr->used) {
        pr->vcap = 0;
        return false;
    }
    int unnamed = 0;
    const Op *op = NULL;
    int i = 0;
    for (;;) {
        const Value *v;
        if (!op && i < g->ninputs) {
            v = g->inputs[i++];
        } else {
            if (!op) {
                op = g->first;
                i = 0;
            }
            while (op && i >= op->nout) {
                op = op->next;
                i = 0;
            }
            if (!op)
                break;
            v = op->out[i++];
        }
        const char *s;
        if (!v->name) {
            s = arena_printf(&pr->tmp, "%%%d", unnamed++);
        } else {
            const char *base = v->name, *cand = base;
            for (int k = 1; cand && !use_name(pr, cand); k++)
                cand = arena_printf(&pr->tmp, "%s.%d", base, k);
            s = cand ? sigil_name(&pr->tmp, '%', cand, false) : NULL;
        }
        if (!s)
            return false;
        set_vname(pr, v, s);
    }
    return true;
}

/* ---- numbers --------------------------------------------------------- */

/* Makes a printed float read as a float: "1" becomes "1.0". */
static void floatify(char *s, size_t size)
{
    if (strpbrk(s, ".ein"))
        return;
    size_t n = strlen(s);
    if (n + 2 < size)
        memcpy(s + n, ".0", 3);
}

/* The shortest "%.Ng" form of v that reads back (strtof if single) exactly. */
static void fmt_float(char *s, size_t size, double v, bool single)
{
    if (isnan(v)) {
        snprintf(s, size, "%s", signbit(v) ? "-nan" : "nan");
        return;
    }
    if (isinf(v)) {
        snprintf(s, size, "%s", v < 0 ? "-inf" : "inf");
        return;
    }
    for (int p = 1; p <= 17; p++) {
        snprintf(s, size, "%.*g", p, v);
        if (single ? strtof(s, NULL) == (float)v : strtod(s, NULL) == v)
            break;
    }
    floatify(s, size);
}

/* The exact value of an f16 or bf16 (ebits exponent, mbits mantissa). */
static double small_to_f64(uint16_t h, int ebits, int mbits)
{
    int bias = (1 << (ebits - 1)) - 1;
    int e = (h >> mbits) & ((1 << ebits) - 1);
    int m = h & ((1 << mbits) - 1);
    double sign = h >> (ebits + mbits) ? -1.0 : 1.0;
    if (e == (1 << ebits) - 1)
        return m ? copysign(NAN, sign) : sign * INFINITY;
    if (e == 0)
        return sign * ldexp(m, 1 - bias - mbits);
    return sign * ldexp(m + (1 << mbits), e - bias - mbits);
}

/* Formats element i of a constant; false if text cannot carry its bits. */
static bool fmt_elem(char *s, size_t size, DType dt, const unsigned char *p)
{
    switch (dt) {
    case DT_F32: {
        uint32_t b;
        float f;
        memcpy(&b, p, 4);
        memcpy(&f, p, 4);
        fmt_float(s, size, f, true);
        return !isnan(f) || (b & 0x7fffffffu) == 0x7fc00000u;
    }
    case DT_F64: {
        uint64_t b;
        double f;
        memcpy(&b, p, 8);
        memcpy(&f, p, 8);
        fmt_float(s, size, f, false);
        return !isnan(f) || (b & 0x7fffffffffffffffull) == 0x7ff8000000000000ull;
    }
    case DT_F16:
    case DT_BF16: {
        uint16_t h;
        memcpy(&h, p, 2);
        bool f16 = dt == DT_F16;
        double f = small_to_f64(h, f16 ? 5 : 8, f16 ? 10 : 7);
        fmt_float(s, size, f, false);
        return !isnan(f) || (h & 0x7fff) == (f16 ? 0x7e00 : 0x7fc0);
    }
    case DT_I8:
        snprintf(s, size, "%d", (int)*(const int8_t *)p);
        return true;
    case DT_U8:
        snprintf(s, size, "%u", (unsigned)*p);
        return true;
    case DT_I32: {
        int32_t v;
        memcpy(&v, p, 4);
        snprintf(s, size, "%" PRId32, v);
        return true;
    }
    case DT_I64: {
        int64_t v;
        memcpy(&v, p, 8);
        snprintf(s, size, "%" PRId64, v);
        return true;
    }
    case DT_I16: {
        int16_t v;
        memcpy(&v, p, 2);
        snprintf(s, size, "%d", (int)v);
        return true;
    }
    case DT_U16: {
        uint16_t v;
        memcpy(&v, p, 2);
        snprintf(s, size, "%u", (unsigned)v);
        return true;
    }
    case DT_U32: {
        uint32_t v;
        memcpy(&v, p, 4);
        snprintf(s, size, "%" PRIu32, v);
        return true;
    }
    case DT_U64: {
        uint64_t v;
        memcpy(&v, p, 8);
        snprintf(s, size, "%" PRIu64, v);
        return !(v >> 63); /* the parser reads int64 literals */
    }
    case DT_BOOL:
        snprintf(s, size, "%s", *p ? "true" : "false");
        return *p <= 1;
    default:
        return false;
    }
}

/* ---- types and attributes -------------------------------------------- */

static void print_type(FILE *f, const Type *t)
{
    fprintf(f, "%s[", dtype_name(t->dtype));
    for (int i = 0; i < t->rank; i++) {
        if (i)
            fputs(", ", f);
        if (t->dims && t->dims[i])
            dim_print(f, t->dims[i]);
        else
            fputc('?', f);
    }
    fputc(']', f);
}

static void print_attr(Printer *pr, const Attr *a, const AttrSpec *sp)
{
    FILE *f = pr->f;
    char buf[64];
    fprintf(f, "%s = ", a->name);
    switch (a->kind) {
    case ATTR_INT:
        fprintf(f, "%" PRId64, a->i);
        break;
    case ATTR_FLOAT:
        fmt_float(buf, sizeof buf, a->f, false);
        fputs(buf, f);
        break;
    case ATTR_STR: {
        const char *s = a->s ? a->s : "";
        bool word = sp && sp->enums && *s && !isdigit((unsigned char)*s);
        for (const char *p = s; word && *p; p++)
            word = isalnum((unsigned char)*p) || *p == '_';
        const char *q = word ? s : quote(&pr->tmp, s);
        fputs(q ? q : "\"\"", f);
        break;
    }
    case ATTR_DTYPE:
        fputs(dtype_name(a->dt), f);
        break;
    case ATTR_INTS:
    case ATTR_FLOATS:
    case ATTR_DIMS:
        fputc('[', f);
        for (int i = 0; i < a->n; i++) {
            if (i)
                fputs(", ", f);
            if (a->kind == ATTR_INTS) {
                fprintf(f, "%" PRId64, a->ints[i]);
            } else if (a->kind == ATTR_FLOATS) {
                fmt_float(buf, sizeof buf, a->floats[i], false);
                fputs(buf, f);
            } else if (a->dims[i]) {
                dim_print(f, a->dims[i]);
            } else {
                fputc('?', f);
            }
        }
        fputc(']', f);
        break;
    }
}

/* {name = value, ...}: schema order, then any names the schema lacks. */
static void print_attrs(Printer *pr, const Op *op)
{
    if (!op->nattrs)
        return;
    const OpInfo *info = op_info(op->kind);
    int n = 0;
    fputs(" {", pr->f);
    for (int i = 0; i < info->nattrs; i++) {
        const Attr *a = op_attr(op, info->attrs[i].name);
        if (!a)
            continue;
        fputs(n++ ? ", " : "", pr->f);
        print_attr(pr, a, &info->attrs[i]);
    }
    for (int i = 0; i < op->nattrs; i++) {
        if (op_attr_spec(op->kind, op->attrs[i].name))
            continue;
        fputs(n++ ? ", " : "", pr->f);
        print_attr(pr, &op->attrs[i], NULL);
    }
    fputc('}', pr->f);
}

/* ---- constants ------------------------------------------------------- */

static void print_hex(FILE *f, const unsigned char *p, size_t n)
{
    static const char digits[] = "0123456789ABCDEF";
    fputs("dense<\"0x", f);
    for (size_t i = 0; i < n; i++) {
        fputc(digits[p[i] >> 4], f);
        fputc(digits[p[i] & 15], f);
    }
    fputs("\">", f);
}

/* payload := dense<[...]> | dense<x> | dense<"0x..."> | file<"path", off> | elided */
static void print_const(Printer *pr, const Op *op)
{
    FILE *f = pr->f;
    const Const *c = op->cst;
    if (!c || c->src == CONST_ELIDED || (!c->data && c->src != CONST_FILE)) {
        fputs(" elided", f);
        return;
    }
    if (c->src == CONST_FILE) {
        char *q = quote(&pr->tmp, c->path ? c->path : "");
        fprintf(f, " file<%s, %" PRId64 ">", q ? q : "\"\"", c->offset);
        return;
    }
    fputc(' ', f);
    const Type *t = &op->out[0]->type;
    const unsigned char *p = c->data;
    size_t n, sz = dtype_size(t->dtype), bytes;
    if (!sz || !type_static_numel(t, &n) || !size_mul(n, sz, &bytes) || bytes != c->nbytes) {
        print_hex(f, p, c->nbytes); /* does not fit its type: show what is there */
        return;
    }
    char buf[64];
    bool splat = n > 1;
    for (size_t i = 1; i < n && splat; i++)
        splat = memcmp(p, p + i * sz, sz) == 0;
    if (splat && fmt_elem(buf, sizeof buf, t->dtype, p)) {
        fprintf(f, "dense<%s>", buf);
        return;
    }
    if (pr->inline_max >= 0 && n > (size_t)pr->inline_max) {
        if (pr->elide)
            fputs("elided", f);
        else
            print_hex(f, p, bytes);
        return;
    }
    bool exact = true;
    for (size_t i = 0; i < n && exact; i++)
        exact = fmt_elem(buf, sizeof buf, t->dtype, p + i * sz);
    if (!exact) {
        print_hex(f, p, bytes);
        return;
    }
    fputs("dense<[", f);
    for (size_t i = 0; i < n; i++) {
        fmt_elem(buf, sizeof buf, t->dtype, p + i * sz);
        fprintf(f, "%s%s", i ? ", " : "", buf);
    }
    fputs("]>", f);
}

/* ---- symbols, ops, graph --------------------------------------------- */

static int cmp_sym(const void *a, const void *b)
{
    const Dim *x = *(Dim *const *)a, *y = *(Dim *const *)b;
    return strcmp(x->name, y->name);
}

/* sym NAME ['>=' lo] ['<=' hi] [origin], for non-default symbols. */
static void mark_syms(const Dim *d, bool *used)
{
    if (d->kind == DIM_SYM) {
        used[d->id] = true;
        return;
    }
    for (int i = 0; i < d->n; i++)
        mark_syms(d->args[i], used);
}

static void mark_type(const Type *t, bool *used)
{
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i])
            mark_syms(t->dims[i], used);
}

/* Symbols the graph uses: in a type or a dim attribute. Placeholders that
 * shape analysis resolved away are not printed. */
static bool *used_syms(Printer *pr, const Graph *g)
{
    bool *used = arena_array(&pr->tmp, (size_t)g->dims.nsyms + 1, sizeof *used);
    if (!used)
        return NULL;
    for (int i = 0; i < g->ninputs; i++)
        mark_type(&g->inputs[i]->type, used);
    graph_for_each_op(g, op) {
        for (int r = 0; r < op->nout; r++)
            mark_type(&op->out[r]->type, used);
        for (int a = 0; a < op->nattrs; a++)
            if (op->attrs[a].kind == ATTR_DIMS)
                for (int k = 0; k < op->attrs[a].n; k++)
                    if (op->attrs[a].dims[k])
                        mark_syms(op->attrs[a].dims[k], used);
    }
    return used;
}

static void print_syms(Printer *pr, const Graph *g)
{
    static const char *origins[] = {"input", "data", "user", "derived"};
    const DimCtx *cx = &g->dims;
    if (!cx->nsyms)
        return;
    Dim **v = arena_array(&pr->tmp, (size_t)cx->nsyms, sizeof *v);
    if (!v)
        return;
    int n = 0;
    bool *used = used_syms(pr, g);
    for (int i = 0; i < cx->nsyms; i++) {
        Dim *s = cx->syms[i];
        if ((s->lo != 1 || s->hi != DIM_INF || s->origin != SYM_INPUT) && (!used || used[s->id]))
            v[n++] = s;
    }
    qsort(v, (size_t)n, sizeof *v, cmp_sym);
    for (int i = 0; i < n; i++) {
        fprintf(pr->f, "%ssym %s", pr->indent, v[i]->name);
        if (v[i]->lo != 1)
            fprintf(pr->f, " >= %" PRId64, v[i]->lo);
        if (v[i]->hi != DIM_INF)
            fprintf(pr->f, " <= %" PRId64, v[i]->hi);
        if (v[i]->origin != SYM_INPUT && v[i]->origin >= 0 && v[i]->origin <= SYM_DERIVED)
            fprintf(pr->f, " %s", origins[v[i]->origin]);
        fputc('\n', pr->f);
    }
}

static void print_op(Printer *pr, const Op *op)
{
    FILE *f = pr->f;
    const OpInfo *info = op_info(op->kind);
    fprintf(f, "%s  ", pr->indent);
    for (int i = 0; i < op->nout; i++)
        fprintf(f, "%s%s", i ? ", " : "", vname(pr, op->out[i]));
    fprintf(f, " = %s", info->name);
    if (op->nin) {
        fputc('(', f);
        for (int i = 0; i < op->nin; i++)
            fprintf(f, "%s%s", i ? ", " : "", vname(pr, op->in[i]));
        fputc(')', f);
    }
    print_attrs(pr, op);
    if (op->kind == OP_CONST)
        print_const(pr, op);
    for (int r = 0; r < op->nregions; r++) {
        PrintOpts o = {.inline_max = pr->inline_max, .elide = pr->elide && !pr->full_regions,
                       .full_regions = pr->full_regions};
        char *in = arena_printf(&pr->tmp, "%s    ", pr->indent);
        fputs(" region {\n", f);
        print_graph(f, op->regions[r], &o, in ? in : "    ");
        fprintf(f, "%s  }", pr->indent);
    }
    fputs(" : ", f);
    for (int i = 0; i < op->nout; i++) {
        if (i)
            fputs(", ", f);
        print_type(f, &op->out[i]->type);
    }
    fputc('\n', f);
}

void graph_print(FILE *f, const Graph *g, const PrintOpts *o) { print_graph(f, g, o, ""); }

static void print_graph(FILE *f, const Graph *g, const PrintOpts *o, const char *indent)
{
    Printer pr = {.f = f, .inline_max = INLINE_MAX_DEFAULT, .indent = indent};
    if (o) {
        pr.inline_max = o->inline_max;
        pr.elide = o->elide;
        pr.full_regions = o->full_regions;
    }
    arena_init(&pr.tmp);
    if (!name_values(&pr, g))
        fprintf(f, "%s# out of memory: value names are missing\n", indent);
    print_syms(&pr, g);
    const char *gname = sigil_name(&pr.tmp, '@', g->name ? g->name : "main", true);
    fprintf(f, "%sgraph %s(", indent, gname ? gname : "@main");
    for (int i = 0; i < g->ninputs; i++) {
        fprintf(f, "%s%s: ", i ? ", " : "", vname(&pr, g->inputs[i]));
        print_type(f, &g->inputs[i]->type);
    }
    fputs(") {\n", f);
    graph_for_each_op(g, op) print_op(&pr, op);
    fprintf(f, "%s  return", indent);
    for (int i = 0; i < g->noutputs; i++)
        fprintf(f, "%s%s", i ? ", " : " ", vname(&pr, g->outputs[i]));
    fprintf(f, "\n%s}\n", indent);
    arena_free(&pr.tmp);
}

char **graph_value_names(const Graph *g)
{
    Printer pr = {0};
    arena_init(&pr.tmp);
    char **names = calloc((size_t)g->nvalues + 1, sizeof *names);
    bool ok = names && name_values(&pr, g);
    for (int i = 0; ok && i < g->ninputs; i++)
        ok = (names[g->inputs[i]->id] = strdup(vname(&pr, g->inputs[i]))) != NULL;
    graph_for_each_op(g, op) for (int i = 0; ok && i < op->nout; i++)
        ok = (names[op->out[i]->id] = strdup(vname(&pr, op->out[i]))) != NULL;
    arena_free(&pr.tmp);
    if (!ok) {
        graph_value_names_free(g, names);
        return NULL;
    }
    return names;
}

void graph_value_names_free(const Graph *g, char **names)
{
    if (!names)
        return;
    for (int i = 0; i < g->nvalues; i++)
        free(names[i]);
    free(names);
}
