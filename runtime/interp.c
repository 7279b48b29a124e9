/*
 * interp.c — the reference interpreter's driver.
 *
 * interp_run walks the ops in program order:
 *
 *   1. Inputs are checked against the graph's input types. A dim that is a
 *      plain symbol binds it (the first input to mention it wins, later
 *      ones must agree); a dim `c + k*S` binds S too; constants and other
 *      expressions are evaluated and compared. Symbol bounds are enforced.
 *   2. Every value gets a slot (a pointer hash map, so Value ids need not
 *      be dense) and a use count: operand uses plus graph-output uses.
 *   3. Each op runs its kernel (interp_kernel(kind)), which computes the
 *      result shapes from the concrete operands. The results are then
 *      checked against the declared types: a result dim that is an unbound
 *      symbol binds it; any other dim that evaluates must match. A
 *      mismatch is a wrong shape rule (or a wrong kernel) and is reported
 *      with the op's name.
 *   4. An operand whose last use has passed is freed. Graph outputs are
 *      moved out when the interpreter owns the last reference, else copied.
 *
 * Input tensors and constant data are borrowed, never copied or freed.
 */
#include "runtime/interp_impl.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* The kernel of each op kind: a switch with no default, so the compiler
 * names an op of ops.def that has none (-Wswitch). */
static InterpFn *interp_kernel(OpKind k)
{
    switch (k) {
#define UNARY(e, name, dtypes) case OP_##e:
#include "ir/ops.def"
        return interp_unary;
#define BINARY(e, name, dtypes) case OP_##e:
#include "ir/ops.def"
        return interp_binary;
    case OP_CMP: return interp_cmp;
    case OP_SELECT: return interp_select;
    case OP_CONVERT: return interp_convert;
    case OP_BROADCAST: return interp_broadcast;
    case OP_DYN_BROADCAST: return interp_dyn_broadcast;
    case OP_RESHAPE: return interp_reshape;
    case OP_DYN_RESHAPE: return interp_dyn_reshape;
    case OP_TRANSPOSE: return interp_transpose;
    case OP_SLICE: return interp_slice;
    case OP_DYN_SLICE: return interp_dyn_slice;
    case OP_REVERSE: return interp_reverse;
    case OP_CONCAT: return interp_concat;
    case OP_PAD: return interp_pad;
    case OP_DYN_PAD: return interp_dyn_pad;
    case OP_IOTA: return interp_iota;
    case OP_DYN_IOTA: return interp_dyn_iota;
    case OP_GATHER: return interp_gather;
    case OP_GATHER_ELEMENTS: return interp_gather_elements;
    case OP_GATHER_ND: return interp_gather_nd;
    case OP_SCATTER_ELEMENTS: return interp_scatter_elements;
    case OP_SCATTER_ND: return interp_scatter_nd;
    case OP_RESIZE: return interp_resize;
    case OP_DYN_RESIZE: return interp_dyn_resize;
    case OP_DYN_RESIZE_SCALES: return interp_dyn_resize_scales;
    case OP_NONZERO: return interp_nonzero;
    case OP_REDUCE: return interp_reduce;
    case OP_ARGMAX:
    case OP_ARGMIN: return interp_arg;
    case OP_CUMSUM: return interp_cumsum;
    case OP_TOPK: return interp_topk;
    case OP_DYN_REDUCE: return interp_dyn_reduce;
    case OP_NMS: return interp_nms;
    case OP_DOT: return interp_dot;
    case OP_CONV: return interp_conv;
    case OP_CONV_TRANSPOSE: return interp_conv_transpose;
    case OP_POOL: return interp_pool;
    case OP_DIM: return interp_dim;
    case OP_SHAPE_OF: return interp_shape_of;
    case OP_SHAPE_CONST: return interp_shape_const;
    case OP_CONST: return interp_const;
    case OP_LOOP: return interp_loop;
    case OP_IF: return interp_if;
    case OP_COUNT: break;
    }
    return NULL;
}

/* ---- names and messages ------------------------------------------------ */

void interp_value_label(Interp *ip, const Value *v, char *buf, size_t size)
{
    if (!ip->names)
        ip->names = graph_value_names(ip->g);
    const char *n = ip->names && v->id >= 0 && v->id < ip->g->nvalues ? ip->names[v->id] : NULL;
    if (n) /* with or without its '%' */
        snprintf(buf, size, "%s%s", n[0] == '%' ? "" : "%", n);
    else if (v->name)
        snprintf(buf, size, "%%%s", v->name);
    else
        snprintf(buf, size, "%%%d", v->id);
}

/* `input "x"`, or `input %3` for an unnamed one. */
static void input_label(Interp *ip, const Value *v, char *buf, size_t size)
{
    if (v->name) {
        snprintf(buf, size, "input \"%s\"", v->name);
    } else {
        char l[128];
        interp_value_label(ip, v, l, sizeof l);
        snprintf(buf, size, "input %s", l);
    }
}

void interp_op_label(Interp *ip, const Op *op, char *buf, size_t size)
{
    const char *name = op_info(op->kind)->name;
    if (op->src) {
        snprintf(buf, size, "op \"%s\" (%s)", op->src, name);
    } else if (op->nout > 0) {
        char v[128];
        interp_value_label(ip, op->out[0], v, sizeof v);
        snprintf(buf, size, "%s = %s", v, name);
    } else {
        snprintf(buf, size, "op %s", name);
    }
}

static bool interp_vfail(Interp *ip, DiagKind k, const char *fmt, va_list ap)
{
    if (!ip->d || ip->d->set)
        return false;
    char label[256], msg[DIAG_MAX];
    label[0] = 0;
    if (ip->op)
        interp_op_label(ip, ip->op, label, sizeof label);
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (ip->op)
        return diag_setk(ip->d, k, "%s: %s", label, msg);
    return diag_setk(ip->d, k, "%s", msg);
}

bool interp_fail(Interp *ip, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    interp_vfail(ip, DIAG_MODEL, fmt, ap);
    va_end(ap);
    return false;
}

bool interp_failk(Interp *ip, DiagKind k, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    interp_vfail(ip, k, fmt, ap);
    va_end(ap);
    return false;
}

bool interp_oom(Interp *ip) { return interp_failk(ip, DIAG_RESOURCE, "out of memory"); }

/* ---- attributes -------------------------------------------------------- */

static const Attr *attr_get(Interp *ip, const char *name, AttrKind kind)
{
    const Attr *a = op_attr(ip->op, name);
    if (!a) {
        interp_fail(ip, "missing attribute \"%s\"", name);
        return NULL;
    }
    if (a->kind != kind) {
        interp_fail(ip, "attribute \"%s\" has the wrong kind", name);
        return NULL;
    }
    return a;
}

bool interp_attr_int(Interp *ip, const char *name, int64_t *v)
{
    const Attr *a = attr_get(ip, name, ATTR_INT);
    if (a)
        *v = a->i;
    return a != NULL;
}

bool interp_attr_ints(Interp *ip, const char *name, const int64_t **v, int *n)
{
    const Attr *a = attr_get(ip, name, ATTR_INTS);
    if (!a)
        return false;
    if (a->n < 0 || (a->n > 0 && !a->ints))
        return interp_fail(ip, "attribute \"%s\" is malformed", name);
    *v = a->ints;
    *n = a->n;
    return true;
}

bool interp_attr_str(Interp *ip, const char *name, const char **s)
{
    const Attr *a = attr_get(ip, name, ATTR_STR);
    if (a && !a->s)
        return interp_fail(ip, "attribute \"%s\" is malformed", name);
    if (a)
        *s = a->s;
    return a != NULL;
}

/* Evaluates one dim; the message names the attribute and the entry. */
static bool eval_dim(Interp *ip, const Dim *dm, const char *what, int i, int64_t *out)
{
    if (!dm)
        return interp_fail(ip, "%s %d is missing", what, i);
    DimEvalStatus st = dim_eval(dm, &ip->env, out);
    if (st == DIM_OK)
        return true;
    char buf[256];
    dim_snprint(buf, sizeof buf, dm);
    return interp_fail(ip, "%s %d (%s) cannot be evaluated: %s", what, i, buf, dim_eval_status_str(st));
}

bool interp_attr_dims(Interp *ip, const char *name, int64_t *v, int cap, int *n)
{
    const Attr *a = attr_get(ip, name, ATTR_DIMS);
    if (!a)
        return false;
    if (a->n < 0 || a->n > cap || (a->n > 0 && !a->dims))
        return interp_fail(ip, "attribute \"%s\" has %d entries (at most %d)", name, a->n, cap);
    char what[96];
    snprintf(what, sizeof what, "attribute \"%s\" entry", name);
    for (int i = 0; i < a->n; i++)
        if (!eval_dim(ip, a->dims[i], what, i, &v[i]))
            return false;
    *n = a->n;
    return true;
}

bool interp_axis(Interp *ip, const char *what, int64_t a, int rank, int *out)
{
    if (a < -rank || a >= rank)
        return interp_fail(ip, "%s %lld is out of range for rank %d", what, (long long)a, rank);
    *out = (int)(a < 0 ? a + rank : a);
    return true;
}

bool interp_alloc(Interp *ip, Tensor *t, DType dt, int rank, const int64_t *shape)
{
    if (rank < 0 || rank > MAX_RANK)
        return interp_fail(ip, "result rank %d exceeds %d", rank, MAX_RANK);
    for (int i = 0; i < rank; i++)
        if (shape[i] < 0)
            return interp_fail(ip, "result dim %d is negative (%lld)", i, (long long)shape[i]);
    if (!tensor_alloc(t, dt, rank, shape))
        return interp_failk(ip, DIAG_RESOURCE, "cannot allocate the result (too large or out of memory)");
    return true;
}

bool interp_read_ints(Interp *ip, const Tensor *t, int k, int64_t *v, int cap, int *n)
{
    if (!dtype_is_int(t->dtype))
        return interp_fail(ip, "operand %d must be an integer tensor, not %s", k, dtype_name(t->dtype));
    if (t->rank > 1)
        return interp_fail(ip, "operand %d must have rank 0 or 1, not %d", k, t->rank);
    size_t m = tensor_numel(t);
    if (m > (size_t)cap)
        return interp_fail(ip, "operand %d has %zu entries (at most %d)", k, m, cap);
    for (size_t i = 0; i < m; i++)
        v[i] = interp_load_i(t, i);
    *n = (int)m;
    return true;
}

/* ---- symbols ------------------------------------------------------------ */

static void sym_bind(Interp *ip, const Dim *s, int64_t v, int from)
{
    ip->symval[s->id] = v;
    ip->symset[s->id] = true;
    ip->symfrom[s->id] = from;
}

static bool sym_ok(const Interp *ip, const Dim *s)
{
    return s->kind == DIM_SYM && s->id >= 0 && s->id < ip->nsyms;
}

/* If dm is c + k*S with S unbound, binds S from v (when k divides v - c).
 * Returns true if it bound something. */
static bool solve_affine(Interp *ip, const Dim *dm, int64_t v, int from)
{
    int64_t c = 0, k = 1;
    const Dim *t = dm;
    if (t->kind == DIM_ADD) {
        if (t->n != 1)
            return false;
        c = t->c;
        t = t->args[0];
    }
    if (t->kind == DIM_MUL) {
        if (t->n != 1)
            return false;
        k = t->c;
        t = t->args[0];
    }
    if (!sym_ok(ip, t) || ip->symset[t->id] || k == 0)
        return false;
    int64_t diff;
    if (__builtin_sub_overflow(v, c, &diff) || diff % k != 0)
        return false;
    sym_bind(ip, t, diff / k, from);
    return true;
}

static bool check_bounds(Interp *ip, const Dim *s, int64_t v, const char *who, int axis)
{
    char name[256];
    dim_snprint(name, sizeof name, s);
    if (v < s->lo)
        return diag_setk(ip->d, DIAG_SHAPE, "%s: dim %d is %lld, expected %s >= %lld", who, axis, (long long)v,
                         name, (long long)s->lo);
    if (s->hi != DIM_INF && v > s->hi)
        return diag_setk(ip->d, DIAG_SHAPE, "%s: dim %d is %lld, expected %s <= %lld", who, axis, (long long)v,
                         name, (long long)s->hi);
    return true;
}

/* Checks every input's dtype, rank and dims, binding symbols. */
static bool bind_inputs(Interp *ip, const Tensor *in)
{
    Graph *g = ip->g;
    char who[256], src[256], ex[256];
    for (int i = 0; i < g->ninputs; i++) {
        const Value *v = g->inputs[i];
        const Tensor *t = &in[i];
        input_label(ip, v, who, sizeof who);
        if (t->dtype != v->type.dtype)
            return diag_setk(ip->d, DIAG_SHAPE, "%s: dtype %s, expected %s", who, dtype_name(t->dtype),
                             dtype_name(v->type.dtype));
        if (t->rank != v->type.rank) {
            char ty[512];
            FILE *f = fmemopen(ty, sizeof ty, "w");
            ty[0] = 0;
            if (f) {
                type_print(f, &v->type);
                fclose(f);
            }
            return diag_setk(ip->d, DIAG_SHAPE, "%s: rank %d, expected %d (%s)", who, t->rank, v->type.rank, ty);
        }
        size_t n = 1, bytes;
        for (int a = 0; a < t->rank; a++) {
            if (t->shape[a] < 0)
                return diag_setk(ip->d, DIAG_SHAPE, "%s: dim %d is negative (%lld)", who, a, (long long)t->shape[a]);
            if (!size_mul(n, (size_t)t->shape[a], &n))
                return diag_setk(ip->d, DIAG_SHAPE, "%s: shape overflows", who);
        }
        if (!size_mul(n, dtype_size(t->dtype), &bytes) || t->nbytes < bytes || (bytes && !t->data))
            return diag_setk(ip->d, DIAG_ARG, "%s: data holds %zu bytes, expected %zu", who, t->nbytes, bytes);
    }
    /* Plain symbols first, so expressions below see every binding. */
    for (int i = 0; i < g->ninputs; i++) {
        const Value *v = g->inputs[i];
        input_label(ip, v, who, sizeof who);
        for (int a = 0; a < v->type.rank; a++) {
            const Dim *dm = v->type.dims[a];
            int64_t x = in[i].shape[a];
            if (!dm || !sym_ok(ip, dm))
                continue;
            if (!ip->symset[dm->id]) {
                if (!check_bounds(ip, dm, x, who, a))
                    return false;
                sym_bind(ip, dm, x, i);
                continue;
            }
            if (ip->symval[dm->id] == x)
                continue;
            input_label(ip, g->inputs[ip->symfrom[dm->id]], src, sizeof src);
            dim_snprint(ex, sizeof ex, dm);
            return diag_setk(ip->d, DIAG_SHAPE, "%s: dim %d is %lld, expected %s = %lld (from %s)", who, a,
                             (long long)x, ex, (long long)ip->symval[dm->id], src);
        }
    }
    for (int i = 0; i < g->ninputs; i++) {
        const Value *v = g->inputs[i];
        input_label(ip, v, who, sizeof who);
        for (int a = 0; a < v->type.rank; a++) {
            const Dim *dm = v->type.dims[a];
            int64_t x = in[i].shape[a], want;
            if (!dm || dm->kind == DIM_SYM)
                continue;
            DimEvalStatus st = dim_eval(dm, &ip->env, &want);
            if (st == DIM_UNBOUND && solve_affine(ip, dm, x, i))
                st = dim_eval(dm, &ip->env, &want);
            if (st == DIM_UNBOUND)
                continue; /* nothing to check it against yet */
            dim_snprint(ex, sizeof ex, dm);
            if (st != DIM_OK)
                return diag_setk(ip->d, DIAG_SHAPE, "%s: dim %d (%s) cannot be evaluated: %s", who, a, ex,
                                 dim_eval_status_str(st));
            if (want == x)
                continue;
            if (dim_is_const(dm))
                return diag_setk(ip->d, DIAG_SHAPE, "%s: dim %d is %lld, expected %lld", who, a, (long long)x,
                                 (long long)want);
            return diag_setk(ip->d, DIAG_SHAPE, "%s: dim %d is %lld, expected %s = %lld", who, a, (long long)x, ex,
                             (long long)want);
        }
    }
    return true;
}

/* Checks result r of the current op against its declared type. */
static bool check_result(Interp *ip, const Op *op, int r, const Tensor *t)
{
    const Type *ty = &op->out[r]->type;
    char res[128], ex[256];
    interp_value_label(ip, op->out[r], res, sizeof res);
    if (t->dtype != ty->dtype)
        return interp_fail(ip, "result %s is %s, declared %s", res, dtype_name(t->dtype),
                           dtype_name(ty->dtype));
    if (t->rank != ty->rank)
        return interp_fail(ip, "result %s has rank %d, declared %d", res, t->rank, ty->rank);
    for (int a = 0; a < t->rank; a++) {
        const Dim *dm = ty->dims[a];
        int64_t want;
        if (!dm)
            continue;
        if (sym_ok(ip, dm) && !ip->symset[dm->id]) {
            sym_bind(ip, dm, t->shape[a], -1);
            continue;
        }
        DimEvalStatus st = dim_eval(dm, &ip->env, &want);
        if (st == DIM_UNBOUND)
            continue;
        dim_snprint(ex, sizeof ex, dm);
        if (st != DIM_OK)
            return interp_fail(ip, "result %s dim %d (%s) cannot be evaluated: %s", res, a, ex,
                               dim_eval_status_str(st));
        if (want != t->shape[a]) {
            if (dim_is_const(dm))
                return interp_fail(ip, "result %s dim %d is %lld, declared %lld", res, a,
                                   (long long)t->shape[a], (long long)want);
            return interp_fail(ip, "result %s dim %d is %lld, declared %s = %lld", res, a,
                               (long long)t->shape[a], ex, (long long)want);
        }
    }
    return true;
}

/* ---- slots ------------------------------------------------------------- */

typedef struct Slot {
    const Value *v;
    Tensor t;
    int uses;   /* remaining operand and output uses */
    bool ready; /* defined */
} Slot;

typedef struct SlotMap {
    Slot *slots;
    int n;
    int *table; /* open addressing: slot index + 1, 0 = empty */
    size_t mask;
} SlotMap;

static size_t ptr_hash(const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    return (size_t)x;
}

static Slot *slot_find(SlotMap *m, const Value *v)
{
    for (size_t h = ptr_hash(v) & m->mask;; h = (h + 1) & m->mask) {
        int k = m->table[h];
        if (!k)
            return NULL;
        if (m->slots[k - 1].v == v)
            return &m->slots[k - 1];
    }
}

static bool slot_add(SlotMap *m, const Value *v)
{
    size_t h = ptr_hash(v) & m->mask;
    for (; m->table[h]; h = (h + 1) & m->mask)
        if (m->slots[m->table[h] - 1].v == v)
            return false; /* defined twice */
    m->slots[m->n].v = v;
    m->table[h] = ++m->n;
    return true;
}

static void slot_release(Slot *s)
{
    tensor_free(&s->t);
    memset(&s->t, 0, sizeof s->t);
}

static bool copy_tensor(Tensor *dst, const Tensor *src)
{
    if (!tensor_alloc(dst, src->dtype, src->rank, src->shape))
        return false;
    if (dst->nbytes)
        memcpy(dst->data, src->data, dst->nbytes);
    return true;
}

/* ---- the run ----------------------------------------------------------- */

static bool run_ops(Interp *ip, SlotMap *m, Tensor *outputs)
{
    Graph *g = ip->g;
    char lab[128];
    graph_for_each_op(g, op) {
        ip->op = op;
        const OpInfo *info = op_info(op->kind);
        InterpFn *fn = op->kind >= 0 && op->kind < OP_COUNT ? interp_kernel(op->kind) : NULL;
        if (!fn)
            return interp_failk(ip, DIAG_UNSUPPORTED, "not supported by the interpreter");
        if ((info->nin != VARIADIC && op->nin != info->nin) || (info->nin == VARIADIC && op->nin < 1))
            return interp_fail(ip, "has %d operands", op->nin);
        if ((info->nout != VARIADIC && op->nout != info->nout) || op->nout > MAX_RESULTS)
            return interp_fail(ip, "has %d results", op->nout);
        const Tensor *stack[8], **in = stack;
        if (op->nin > 8 && !(in = malloc((size_t)op->nin * sizeof *in)))
            return interp_oom(ip);
        bool ok = true;
        for (int i = 0; i < op->nin && ok; i++) {
            Slot *s = slot_find(m, op->in[i]);
            if (!s || !s->ready) {
                interp_value_label(ip, op->in[i], lab, sizeof lab);
                ok = interp_fail(ip, "operand %d (%s) is used before it is defined", i, lab);
            } else {
                in[i] = &s->t;
            }
        }
        Tensor out[MAX_RESULTS];
        memset(out, 0, (size_t)op->nout * sizeof *out);
        ok = ok && fn(ip, op, in, out);
        for (int r = 0; r < op->nout && ok; r++)
            ok = check_result(ip, op, r, &out[r]);
        if (in != stack)
            free(in);
        if (!ok) {
            for (int r = 0; r < op->nout; r++)
                tensor_free(&out[r]);
            return false;
        }
        for (int r = 0; r < op->nout; r++) {
            Slot *s = slot_find(m, op->out[r]);
            s->t = out[r];
            s->ready = true;
            if (s->uses == 0)
                slot_release(s);
        }
        for (int i = 0; i < op->nin; i++) {
            Slot *s = slot_find(m, op->in[i]);
            if (--s->uses == 0)
                slot_release(s);
        }
    }
    ip->op = NULL;
    for (int j = 0; j < g->noutputs; j++) {
        Slot *s = slot_find(m, g->outputs[j]);
        if (!s || !s->ready) {
            interp_value_label(ip, g->outputs[j], lab, sizeof lab);
            return diag_set(ip->d, "output %d (%s) is never defined", j, lab);
        }
        if (--s->uses == 0 && s->t.owned) {
            outputs[j] = s->t;
            memset(&s->t, 0, sizeof s->t);
        } else if (!copy_tensor(&outputs[j], &s->t)) {
            return diag_setk(ip->d, DIAG_RESOURCE, "output %d: out of memory", j);
        }
    }
    return true;
}

bool interp_run(Graph *g, const Tensor *inputs, int ninputs, Tensor *outputs, int noutputs, Diag *d)
{
    if (outputs && noutputs > 0)
        memset(outputs, 0, (size_t)noutputs * sizeof *outputs);
    if (!g)
        return diag_set(d, "interp: no graph");
    if (ninputs != g->ninputs || (ninputs > 0 && !inputs))
        return diag_setk(d, DIAG_ARG, "graph \"%s\" takes %d inputs, got %d", g->name, g->ninputs, ninputs);
    if (noutputs != g->noutputs || (noutputs > 0 && !outputs))
        return diag_setk(d, DIAG_ARG, "graph \"%s\" has %d outputs, got room for %d", g->name, g->noutputs,
                         noutputs);

    Interp ip = {.g = g, .d = d, .nsyms = g->dims.nsyms};
    SlotMap m = {0};
    int nvals = g->ninputs;
    graph_for_each_op(g, op) nvals += op->nout;
    size_t cap = 16;
    while (cap < 2 * (size_t)nvals)
        cap *= 2;
    size_t ns = (size_t)ip.nsyms + 1;
    ip.symval = calloc(ns, sizeof *ip.symval);
    ip.symset = calloc(ns, sizeof *ip.symset);
    ip.symfrom = calloc(ns, sizeof *ip.symfrom);
    m.slots = calloc((size_t)nvals + 1, sizeof *m.slots);
    m.table = calloc(cap, sizeof *m.table);
    m.mask = cap - 1;
    bool ok = ip.symval && ip.symset && ip.symfrom && m.slots && m.table;
    if (!ok)
        diag_setk(d, DIAG_RESOURCE, "interp: out of memory");
    ip.env = (DimEnv){ip.symval, ip.symset, ip.nsyms};

    for (int i = 0; i < g->ninputs && ok; i++)
        if (!slot_add(&m, g->inputs[i]))
            ok = diag_set(d, "graph input %d is listed twice", i);
    graph_for_each_op(g, op) {
        for (int r = 0; r < op->nout && ok; r++) {
            if (!slot_add(&m, op->out[r])) {
                ip.op = op;
                ok = interp_fail(&ip, "result %d is defined twice", r);
            }
        }
    }
    graph_for_each_op(g, op) {
        for (int i = 0; i < op->nin && ok; i++) {
            Slot *s = op->in[i] ? slot_find(&m, op->in[i]) : NULL;
            if (!s) {
                ip.op = op;
                ok = interp_fail(&ip, "operand %d is not defined in the graph", i);
            } else {
                s->uses++;
            }
        }
    }
    ip.op = NULL;
    for (int j = 0; j < g->noutputs && ok; j++) {
        Slot *s = g->outputs[j] ? slot_find(&m, g->outputs[j]) : NULL;
        if (!s)
            ok = diag_set(d, "output %d is not defined in the graph", j);
        else
            s->uses++;
    }

    ok = ok && bind_inputs(&ip, inputs);
    for (int i = 0; i < g->ninputs && ok; i++) {
        Slot *s = &m.slots[i];
        s->t = inputs[i];
        s->t.owned = false; /* borrowed */
        s->ready = true;
    }
    ok = ok && run_ops(&ip, &m, outputs);

    for (int i = 0; m.slots && i < m.n; i++)
        tensor_free(&m.slots[i].t);
    if (!ok)
        for (int j = 0; j < noutputs; j++)
            tensor_free(&outputs[j]);
    graph_value_names_free(g, ip.names);
    free(ip.symval);
    free(ip.symset);
    free(ip.symfrom);
    free(m.slots);
    free(m.table);
    return ok;
}
static bool run_op(Graph *g, const Op *op, const int64_t *symval, int nsyms, const Tensor *const *in,
                   Tensor *out, Diag *d, InterpRegionFn *region, void *region_ctx);

bool interp_run_op(Graph *g, const Op *op, const int64_t *symval, int nsyms, const Tensor *const *in,
                   Tensor *out, Diag *d)
{
    return run_op(g, op, symval, nsyms, in, out, d, NULL, NULL);
}

bool interp_run_op_regions(Graph *g, const Op *op, const int64_t *symval, int nsyms, const Tensor *const *in,
                           Tensor *out, Diag *d, InterpRegionFn *region, void *region_ctx)
{
    return run_op(g, op, symval, nsyms, in, out, d, region, region_ctx);
}

static bool run_op(Graph *g, const Op *op, const int64_t *symval, int nsyms, const Tensor *const *in,
                   Tensor *out, Diag *d, InterpRegionFn *region, void *region_ctx)
{
    InterpFn *fn = op->kind >= 0 && op->kind < OP_COUNT ? interp_kernel(op->kind) : NULL;
    if (!fn)
        return diag_setk(d, DIAG_UNSUPPORTED, "%s: not supported by the interpreter", op_info(op->kind)->name);
    bool *set = malloc((size_t)nsyms + 1);
    int *from = malloc(((size_t)nsyms + 1) * sizeof *from);
    bool ok = set && from;
    if (ok) {
        for (int i = 0; i < nsyms; i++) {
            set[i] = true;
            from[i] = -1;
        }
        Interp ip = {.g = g, .d = d, .op = op, .symval = (int64_t *)symval, .symset = set,
                     .symfrom = from, .nsyms = nsyms, .region = region, .region_ctx = region_ctx};
        ip.env = (DimEnv){symval, set, nsyms};
        ok = fn(&ip, op, in, out);
        graph_value_names_free(g, ip.names);
    } else {
        diag_oom(d);
    }
    free(set);
    free(from);
    return ok;
}
