/*
 * import.c — ModelProto -> Graph.
 *
 * The importer works in four steps:
 *
 *   1. unpack the model (protobuf-c) and keep it alive with the graph, so
 *      initializer bytes are referenced where they are instead of copied;
 *   2. make graph inputs (dim_param -> named symbol; an unknown dim or a
 *      placeholder name such as "?" -> a fresh symbol at each use) and
 *      const ops for the initializers;
 *   3. look every node up in the dispatch table and report all unsupported
 *      ones at once, then order the nodes topologically (exporters usually
 *      emit them in order; a cycle or an undefined name is an error);
 *   4. lower each node through its table entry, name its results after the
 *      ONNX values, and mark every op it made with the node's name (Op.src).
 *
 * After each node, an integer result that is a function of constants alone
 * becomes a constant (fold_result): see "Folding at import" below.
 *
 * The dispatch table at the bottom is the one list of supported ONNX ops:
 * name, first default-domain opset handled, lowering, and an argument the
 * lowering interprets (usually the core OpKind).
 */
#include "frontends/onnx/internal.h"
#include "runtime/interp.h" /* folds small integer results at import; it depends on ir/ only */

#include <ctype.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

/* ------------------------------------------------------------------ */
/* The dispatch table                                                   */

typedef struct Lowering {
    const char *op;
    int since;     /* first opset handled */
    LowerFn *fn;
    int arg;
} Lowering;

#define L(name) onnx_lower_##name

static const Lowering lowerings[] = {
    /* elementwise */
    {"Abs", 6, L(unary), OP_ABS},
    {"Neg", 6, L(unary), OP_NEG},
    {"Sign", 9, L(unary), OP_SIGN},
    {"Exp", 6, L(unary), OP_EXP},
    {"Log", 6, L(unary), OP_LOG},
    {"Sqrt", 6, L(unary), OP_SQRT},
    {"Reciprocal", 6, L(unary), OP_RECIP},
    {"Tanh", 6, L(unary), OP_TANH},
    {"Sigmoid", 6, L(unary), OP_SIGMOID},
    {"Erf", 9, L(unary), OP_ERF},
    {"Sin", 7, L(unary), OP_SIN},
    {"Cos", 7, L(unary), OP_COS},
    {"Tan", 7, L(unary), OP_TAN},
    {"Atan", 7, L(unary), OP_ATAN},
    {"Asin", 7, L(trig), TRIG_ASIN},
    {"Acos", 7, L(trig), TRIG_ACOS},
    {"Sinh", 9, L(trig), TRIG_SINH},
    {"Cosh", 9, L(trig), TRIG_COSH},
    {"Asinh", 9, L(trig), TRIG_ASINH},
    {"Acosh", 9, L(trig), TRIG_ACOSH},
    {"Atanh", 9, L(trig), TRIG_ATANH},
    {"Floor", 6, L(unary), OP_FLOOR},
    {"Ceil", 6, L(unary), OP_CEIL},
    {"Round", 11, L(unary), OP_ROUND},
    {"Not", 1, L(unary), OP_NOT},
    {"IsNaN", 9, L(unary), OP_ISNAN},
    {"IsInf", 10, L(unary), OP_ISINF},
    {"Add", 7, L(binary), OP_ADD},
    {"Sub", 7, L(binary), OP_SUB},
    {"Mul", 7, L(binary), OP_MUL},
    {"Div", 7, L(binary), OP_DIV},
    {"Pow", 7, L(binary), OP_POW},
    {"And", 7, L(binary), OP_AND},
    {"Or", 7, L(binary), OP_OR},
    {"Xor", 7, L(binary), OP_XOR},
    {"BitwiseAnd", 18, L(binary), OP_AND},
    {"BitwiseOr", 18, L(binary), OP_OR},
    {"BitwiseXor", 18, L(binary), OP_XOR},
    {"BitwiseNot", 18, L(unary), OP_NOT},
    {"Mod", 10, L(mod), 0},
    {"BitShift", 11, L(bit_shift), 0},
    {"Equal", 7, L(cmp), 0},
    {"Less", 7, L(cmp), 2},
    {"LessOrEqual", 12, L(cmp), 3},
    {"Greater", 7, L(cmp), 4},
    {"GreaterOrEqual", 12, L(cmp), 5},
    {"Min", 6, L(variadic), OP_MIN},
    {"Max", 6, L(variadic), OP_MAX},
    {"Sum", 6, L(variadic), OP_ADD},
    {"Mean", 6, L(mean), 0},
    {"Where", 9, L(where), 0},
    {"Cast", 6, L(cast), 0},
    {"CastLike", 15, L(cast_like), 0},
    {"Identity", 1, L(identity), 0},
    {"Dropout", 7, L(dropout), 0},
    /* activations */
    {"Relu", 6, L(relu), 0},
    {"LeakyRelu", 6, L(leaky_relu), 0},
    {"PRelu", 7, L(prelu), 0},
    {"Elu", 6, L(elu), 0},
    {"Celu", 12, L(celu), 0},
    {"Selu", 6, L(selu), 0},
    {"ThresholdedRelu", 10, L(thrtanh), 0},
    {"Gelu", 20, L(gelu), 0},
    {"HardSigmoid", 6, L(hard_sigmoid), 0},
    {"HardSwish", 14, L(hard_swish), 0},
    {"Softplus", 1, L(softplus), 0},
    {"Softsign", 1, L(softsign), 0},
    {"Mish", 18, L(mish), 0},
    {"Clip", 6, L(clip), 0},
    {"Shrink", 9, L(shrink), 0},
    /* reductions and normalizations */
    {"ReduceSum", 1, L(reduce), 0},
    {"ReduceMean", 1, L(reduce), 1},
    {"ReduceMax", 1, L(reduce), 2},
    {"ReduceMin", 1, L(reduce), 3},
    {"ReduceProd", 1, L(reduce), 4},
    {"ReduceL1", 1, L(reduce_l1), 0},
    {"ReduceL2", 1, L(reduce_l2), 0},
    {"ReduceSumSquare", 1, L(reduce_sumsq), 0},
    {"ReduceLogSumExp", 1, L(reduce_logsumexp), 0},
    {"ReduceLogSum", 1, L(reduce_logsum), 0},
    {"ArgMax", 1, L(argminmax), OP_ARGMAX},
    {"ArgMin", 1, L(argminmax), OP_ARGMIN},
    {"Softmax", 1, L(softmax), 0},
    {"LogSoftmax", 1, L(softmax), 1},
    {"LayerNormalization", 17, L(layer_norm), 0},
    {"BatchNormalization", 9, L(batch_norm), 0},
    {"InstanceNormalization", 6, L(instance_norm), 0},
    {"GroupNormalization", 18, L(group_norm), 0},
    {"LpNormalization", 1, L(lp_norm), 0},
    {"MeanVarianceNormalization", 9, L(mvn), 0},
    {"Hardmax", 1, L(hardmax), 0},
    {"NegativeLogLikelihoodLoss", 12, L(nll_loss), 0},
    {"SoftmaxCrossEntropyLoss", 12, L(sce_loss), 0},
    {"CumSum", 11, L(cumsum), 0},
    {"TopK", 10, L(topk), 0},
    /* shapes and data movement */
    {"Shape", 1, L(shape), 0},
    {"Size", 1, L(size), 0},
    {"Reshape", 5, L(reshape), 0},
    {"Flatten", 1, L(flatten), 0},
    {"Squeeze", 1, L(squeeze), 0},
    {"Unsqueeze", 1, L(unsqueeze), 0},
    {"Transpose", 1, L(transpose), 0},
    {"Concat", 4, L(concat), 0},
    {"Split", 2, L(split), 0},
    {"Slice", 10, L(slice), 0},
    {"Gather", 1, L(gather), 0},
    {"GatherElements", 11, L(gather_elements), 0},
    {"GatherND", 11, L(gather_nd), 0},
    {"ScatterND", 11, L(scatter_nd), 0},
    {"ScatterElements", 11, L(scatter_elements), 0},
    {"Scatter", 9, L(scatter_elements), 0}, /* ScatterElements before opset 11 */
    {"Expand", 8, L(expand), 0},
    {"Tile", 6, L(tile), 0},
    {"Pad", 2, L(pad), 0},
    {"CenterCropPad", 18, L(center_crop_pad), 0},
    {"ConstantOfShape", 9, L(constant_of_shape), 0},
    {"Constant", 1, L(constant), 0},
    {"Range", 11, L(range), 0},
    {"Trilu", 14, L(trilu), 0},
    {"OneHot", 9, L(one_hot), 0},
    {"EyeLike", 9, L(eye_like), 0},
    {"NonZero", 9, L(nonzero), 0},
    {"Compress", 9, L(compress), 0},
    {"Unique", 11, L(unique), 0},
    {"ReverseSequence", 10, L(reverse_sequence), 0},
    /* control flow and recurrent layers (lower_control.c, lower_rnn.c) */
    {"Loop", 1, L(loop), 0},
    {"If", 1, L(if), 0},
    {"Scan", 9, L(scan), 0},
    {"RNN", 7, L(rnn), 0},
    {"GRU", 7, L(rnn), 1},
    {"LSTM", 7, L(rnn), 2},
    {"DepthToSpace", 1, L(depth_to_space), 0},
    {"SpaceToDepth", 1, L(space_to_depth), 0},
    {"Resize", 11, L(resize), 0},
    {"Resize", 10, L(upsample), 0},
    {"Upsample", 7, L(upsample), 0},
    {"GridSample", 16, L(grid_sample), 0},
    {"AffineGrid", 20, L(affine_grid), 0},
    {"NonMaxSuppression", 10, L(nms), 0},
    {"RoiAlign", 10, L(roi_align), 0},
    {"DFT", 17, L(dft), 0},
    {"HannWindow", 17, L(window), 0},
    {"HammingWindow", 17, L(window), 1},
    {"BlackmanWindow", 17, L(window), 2},
    /* compute-bound */
    {"MatMul", 1, L(matmul), 0},
    {"Gemm", 7, L(gemm), 0},
    {"Einsum", 12, L(einsum), 0},
    {"Det", 11, L(det), 0},
    {"Conv", 1, L(conv), 0},
    {"ConvTranspose", 1, L(conv_transpose), 0},
    {"MaxPool", 1, L(pool), 0},
    {"AveragePool", 1, L(pool), 1},
    {"GlobalAveragePool", 1, L(global_pool), 1},
    {"GlobalMaxPool", 1, L(global_pool), 0},
    {"LpPool", 2, L(lp_pool), 0},
    {"LRN", 1, L(lrn), 0},
    {"MaxUnpool", 9, L(max_unpool), 0},
    {"Col2Im", 18, L(col2im), 0},
    {"GlobalLpPool", 2, L(global_pool), 2},
    /* quantization */
    {"DequantizeLinear", 10, L(dequantize), 0},
    {"QuantizeLinear", 10, L(quantize), 0},
    {"DynamicQuantizeLinear", 11, L(dynamic_quantize), 0},
    {"MatMulInteger", 10, L(matmul_integer), 0},
    {"ConvInteger", 10, L(conv_integer), 0},
    {"QLinearMatMul", 10, L(qlinear_matmul), 0},
    {"QLinearConv", 10, L(qlinear_conv), 0},
};

/* ai.onnx.ml: what converters of traditional models (skl2onnx) put around
 * a network: the versions are those of the ai.onnx.ml opset. */
static const Lowering ml_lowerings[] = {
    {"Scaler", 1, L(ml_scaler), 0},
    {"ArrayFeatureExtractor", 1, L(ml_array_feature_extractor), 0},
    {"Binarizer", 1, L(ml_binarizer), 0},
};

#undef L

static bool is_default_domain(const char *dom)
{
    return !dom || !*dom || !strcmp(dom, "ai.onnx");
}

/* The entry for a node; *known is set if the op exists at a later opset. */
static const Lowering *find_lowering(const Imp *im, const Node *n, const Lowering **later)
{
    const Lowering *tab = lowerings;
    size_t ntab = sizeof lowerings / sizeof lowerings[0];
    int opset = im->opset;
    *later = NULL;
    if (!n->op_type)
        return NULL;
    if (!is_default_domain(n->domain)) {
        if (strcmp(n->domain, "ai.onnx.ml"))
            return NULL;
        tab = ml_lowerings, ntab = sizeof ml_lowerings / sizeof ml_lowerings[0];
        opset = im->opset_ml;
    }
    for (size_t i = 0; i < ntab; i++) {
        if (strcmp(tab[i].op, n->op_type))
            continue;
        if (tab[i].since <= opset)
            return &tab[i];
        *later = &tab[i];
    }
    return NULL;
}

/* ------------------------------------------------------------------ */
/* Name tables: string -> pointer, open addressing                      */

typedef struct StrMap {
    NameSlot *slot;
    int cap, count;
} StrMap;

static uint32_t str_hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

static void *map_get(const StrMap *m, const char *key)
{
    if (!m->cap)
        return NULL;
    for (uint32_t i = str_hash(key) & (uint32_t)(m->cap - 1);; i = (i + 1) & (uint32_t)(m->cap - 1)) {
        if (!m->slot[i].key)
            return NULL;
        if (!strcmp(m->slot[i].key, key))
            return m->slot[i].v;
    }
}

static bool map_put(StrMap *m, const char *key, void *v)
{
    if (2 * (m->count + 1) > m->cap) {
        int cap = m->cap ? 2 * m->cap : 64;
        NameSlot *s = calloc((size_t)cap, sizeof *s);
        if (!s)
            return false;
        for (int i = 0; i < m->cap; i++) {
            if (!m->slot[i].key)
                continue;
            uint32_t j = str_hash(m->slot[i].key) & (uint32_t)(cap - 1);
            while (s[j].key)
                j = (j + 1) & (uint32_t)(cap - 1);
            s[j] = m->slot[i];
        }
        free(m->slot);
        m->slot = s;
        m->cap = cap;
    }
    uint32_t i = str_hash(key) & (uint32_t)(m->cap - 1);
    while (m->slot[i].key && strcmp(m->slot[i].key, key))
        i = (i + 1) & (uint32_t)(m->cap - 1);
    if (!m->slot[i].key)
        m->count++;
    m->slot[i].key = key;
    m->slot[i].v = v;
    return true;
}

Value *imp_lookup(Imp *im, const char *name)
{
    StrMap m = {im->names, im->cap, im->count};
    return map_get(&m, name);
}

bool imp_bind(Imp *im, const char *name, Value *v)
{
    StrMap m = {im->names, im->cap, im->count};
    bool ok = map_put(&m, name, v);
    im->names = m.slot;
    im->cap = m.cap;
    im->count = m.count;
    return ok;
}

/* ------------------------------------------------------------------ */
/* Messages                                                             */

/* "node 17 (MatMul "fc1")" for node i. */
static int node_where(char *buf, size_t n, const Node *node, int i)
{
    const char *op = node->op_type ? node->op_type : "?";
    const char *dom = is_default_domain(node->domain) ? "" : node->domain;
    if (node->name && *node->name)
        return snprintf(buf, n, "node %d (%s%s%s \"%s\")", i, dom, *dom ? "." : "", op,
                        node->name);
    return snprintf(buf, n, "node %d (%s%s%s)", i, dom, *dom ? "." : "", op);
}

static bool imp_verr(Imp *im, DiagKind k, const char *fmt, va_list ap)
{
    if (im->d->set)
        return false;
    char msg[DIAG_MAX / 2], where[DIAG_MAX / 4] = "";
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (im->g->arena.failed)
        k = DIAG_RESOURCE;
    if (im->node) {
        node_where(where, sizeof where, im->node, im->node_idx);
        diag_setk(im->d, k, "%s: %s: error: %s", im->file, where, msg);
    } else {
        diag_setk(im->d, k, "%s: error: %s", im->file, msg);
    }
    diag_locate(im->d, im->file, 0, 0, im->node ? im->node_idx + 1 : 0);
    return false;
}

bool imp_err(Imp *im, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    imp_verr(im, DIAG_MODEL, fmt, ap);
    va_end(ap);
    return false;
}

bool imp_errk(Imp *im, DiagKind k, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    imp_verr(im, k, fmt, ap);
    va_end(ap);
    return false;
}

bool imp_oom(Imp *im) { return imp_errk(im, DIAG_RESOURCE, "out of memory"); }

bool imp_fail(Imp *im)
{
    const char *e = graph_error(im->g);
    return imp_errk(im, im->g->err.set ? im->g->err.kind : DIAG_INTERNAL, "%s",
                    *e ? e : "cannot build the lowering");
}

/* ------------------------------------------------------------------ */
/* Attributes of the current node                                       */

const OAttr *attr_find(Imp *im, const char *name)
{
    const Node *n = im->node;
    for (size_t i = 0; i < n->n_attribute; i++)
        if (n->attribute[i]->name && !strcmp(n->attribute[i]->name, name))
            return n->attribute[i];
    return NULL;
}

static const char *attr_type_name(const OAttr *a)
{
    static const char *names[] = {"UNDEFINED", "FLOAT", "INT", "STRING", "TENSOR", "GRAPH",
                                  "FLOATS", "INTS", "STRINGS", "TENSORS", "GRAPHS",
                                  "SPARSE_TENSOR", "SPARSE_TENSORS", "TYPE_PROTO",
                                  "TYPE_PROTOS"};
    if (!a->has_type)
        return "UNDEFINED";
    return a->type >= 0 && (size_t)a->type < sizeof names / sizeof names[0] ? names[a->type]
                                                                            : "UNKNOWN";
}

/* Whether attribute a holds type t; old models may leave `type` unset. */
static bool attr_is(const OAttr *a, Onnx__AttributeProto__AttributeType t)
{
    if (a->has_type)
        return a->type == t;
    switch (t) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT: return a->has_i;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT: return a->has_f;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING: return a->has_s;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS: return a->n_ints > 0;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS: return a->n_floats > 0;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: return a->t != NULL;
    default: return false;
    }
}

static bool attr_wrong(Imp *im, const OAttr *a, const char *want)
{
    return imp_err(im, "attribute '%s' must be %s, not %s", a->name, want, attr_type_name(a));
}

bool attr_int(Imp *im, const char *name, int64_t dflt, int64_t *out)
{
    const OAttr *a = attr_find(im, name);
    *out = dflt;
    if (!a)
        return true;
    if (!attr_is(a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT))
        return attr_wrong(im, a, "INT");
    *out = a->i;
    return true;
}

bool attr_float(Imp *im, const char *name, double dflt, double *out)
{
    const OAttr *a = attr_find(im, name);
    *out = dflt;
    if (!a)
        return true;
    if (!attr_is(a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT))
        return attr_wrong(im, a, "FLOAT");
    *out = a->f;
    return true;
}

bool attr_str(Imp *im, const char *name, const char *dflt, const char **out)
{
    const OAttr *a = attr_find(im, name);
    *out = dflt;
    if (!a)
        return true;
    if (!attr_is(a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING))
        return attr_wrong(im, a, "STRING");
    *out = arena_strndup(&im->g->arena, (const char *)a->s.data, a->s.len);
    return *out != NULL || imp_oom(im);
}

bool attr_ints(Imp *im, const char *name, int64_t **v, int *n)
{
    const OAttr *a = attr_find(im, name);
    *v = NULL;
    *n = -1;
    if (!a)
        return true;
    if (!attr_is(a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS))
        return attr_wrong(im, a, "INTS");
    if (a->n_ints > 4096)
        return imp_err(im, "attribute '%s' is too long", name);
    *n = (int)a->n_ints;
    *v = arena_array(&im->g->arena, a->n_ints + 1, sizeof **v);
    if (!*v)
        return imp_oom(im);
    if (a->n_ints)
        memcpy(*v, a->ints, a->n_ints * sizeof **v);
    return true;
}

bool attr_floats(Imp *im, const char *name, double **v, int *n)
{
    const OAttr *a = attr_find(im, name);
    *v = NULL;
    *n = -1;
    if (!a)
        return true;
    if (!attr_is(a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS))
        return attr_wrong(im, a, "FLOATS");
    if (a->n_floats > 4096)
        return imp_err(im, "attribute '%s' is too long", name);
    *n = (int)a->n_floats;
    *v = arena_array(&im->g->arena, a->n_floats + 1, sizeof **v);
    if (!*v)
        return imp_oom(im);
    for (size_t i = 0; i < a->n_floats; i++)
        (*v)[i] = a->floats[i];
    return true;
}

/* ------------------------------------------------------------------ */
/* Constants                                                            */

Value *imp_tensor_const(Imp *im, const OTensor *t, const char *what)
{
    Diag e = {0};
    TensorData td;
    if (!onnx_tensor_decode(t, im->dir, &im->g->arena, &td, &e)) {
        imp_errk(im, e.kind, "%s: %s", what, e.msg);
        return NULL;
    }
    if (td.map && !graph_keep(im->g, td.map, onnx_map_free)) {
        onnx_map_free(td.map);
        imp_oom(im);
        return NULL;
    }
    Dim *dims[MAX_RANK];
    for (int i = 0; i < td.rank; i++)
        dims[i] = dim_const(&im->g->dims, td.shape[i]);
    Type ty = type_make(&im->g->arena, td.dtype, td.rank, dims);
    Value *v = build_const(im->g, ty, td.data, td.nbytes, false);
    if (!v)
        imp_fail(im);
    uint64_t h;
    if (v && onnx_weights_hash(im->weights, td.data, td.nbytes, &h)) { /* for the JIT's cache key */
        v->def->cst->hash_of = td.data;
        v->def->cst->hash = h;
    }
    return v;
}

Value *imp_need(Imp *im, int i)
{
    Value *v = IN(i);
    if (!v)
        imp_err(im, "input %d is required", i);
    return v;
}

/* Element i of constant data of type dt, as a double or an int64. */
static double elem_f(const void *p, DType dt, size_t i)
{
    switch (dt) {
    case DT_F32: return ((const float *)p)[i];
    case DT_F64: return ((const double *)p)[i];
    case DT_F16: return onnx_f16_to_f32(((const uint16_t *)p)[i]);
    case DT_BF16: return onnx_bf16_to_f32(((const uint16_t *)p)[i]);
    case DT_I8: return ((const int8_t *)p)[i];
    case DT_U8: return ((const uint8_t *)p)[i];
    case DT_BOOL: return ((const uint8_t *)p)[i] != 0;
    case DT_I32: return ((const int32_t *)p)[i];
    case DT_I64: return (double)((const int64_t *)p)[i];
    case DT_I16: return ((const int16_t *)p)[i];
    case DT_U16: return ((const uint16_t *)p)[i];
    case DT_U32: return ((const uint32_t *)p)[i];
    case DT_U64: return (double)((const uint64_t *)p)[i];
    default: return 0;
    }
}

static int64_t elem_i(const void *p, DType dt, size_t i)
{
    switch (dt) {
    case DT_I8: return ((const int8_t *)p)[i];
    case DT_U8: return ((const uint8_t *)p)[i];
    case DT_BOOL: return ((const uint8_t *)p)[i] != 0;
    case DT_I32: return ((const int32_t *)p)[i];
    case DT_I64: return ((const int64_t *)p)[i];
    case DT_I16: return ((const int16_t *)p)[i];
    case DT_U16: return ((const uint16_t *)p)[i];
    case DT_U32: return ((const uint32_t *)p)[i];
    case DT_U64: return (int64_t)((const uint64_t *)p)[i];
    default: return (int64_t)elem_f(p, dt, i);
    }
}

/* The data of a const op producing v, or NULL. */
static const void *const_data(Value *v, size_t *numel)
{
    if (!v || !v->def || v->def->kind != OP_CONST || !v->def->cst || !v->def->cst->data)
        return NULL;
    if (!type_static_numel(&v->type, numel))
        return NULL;
    if (v->def->cst->nbytes < *numel * dtype_size(vdt(v)))
        return NULL;
    return v->def->cst->data;
}

bool imp_const_ints(Imp *im, Value *v, int64_t **vals, int *n)
{
    size_t numel;
    if (v && v->def && v->def->kind == OP_SHAPE_CONST) {
        const Attr *a = op_attr(v->def, "dims");
        if (!a)
            return false;
        for (int i = 0; i < a->n; i++)
            if (!dim_is_const(a->dims[i]))
                return false;
        *vals = arena_array(&im->g->arena, (size_t)a->n + 1, sizeof **vals);
        if (!*vals)
            return false;
        for (int i = 0; i < a->n; i++)
            (*vals)[i] = a->dims[i]->c;
        *n = a->n;
        return true;
    }
    const void *p = const_data(v, &numel);
    if (!p || !dtype_is_int(vdt(v)) || numel > 1 << 20)
        return false;
    *vals = arena_array(&im->g->arena, numel + 1, sizeof **vals);
    if (!*vals)
        return false;
    for (size_t i = 0; i < numel; i++)
        (*vals)[i] = elem_i(p, vdt(v), i);
    *n = (int)numel;
    return true;
}

bool imp_const_scalar(Imp *im, Value *v, double *out)
{
    size_t numel;
    const void *p = const_data(v, &numel);
    if (!p || numel != 1)
        return false;
    *out = elem_f(p, vdt(v), 0);
    return true;
}

Value *imp_scalar(Imp *im, DType dt, double x)
{
    union {
        float f;
        double d;
        uint16_t h;
        int8_t i8;
        uint8_t u8;
        int16_t i16;
        uint16_t u16;
        uint32_t u32;
        uint64_t u64;
        int32_t i32;
        int64_t i64;
    } u;
    memset(&u, 0, sizeof u);
    switch (dt) {
    case DT_F32: u.f = (float)x; break;
    case DT_F64: u.d = x; break;
    case DT_F16: u.h = onnx_f32_to_f16((float)x); break;
    case DT_BF16: u.h = onnx_f32_to_bf16((float)x); break;
    case DT_I8: u.i8 = (int8_t)x; break;
    case DT_U8: u.u8 = (uint8_t)x; break;
    case DT_BOOL: u.u8 = x != 0; break;
    case DT_I32: u.i32 = (int32_t)x; break;
    case DT_I64: u.i64 = (int64_t)x; break;
    case DT_I16: u.i16 = (int16_t)x; break;
    case DT_U16: u.u16 = (uint16_t)x; break;
    case DT_U32: u.u32 = (uint32_t)x; break;
    case DT_U64: u.u64 = (uint64_t)x; break;
    default: return NULL;
    }
    Type t = type_make(&im->g->arena, dt, 0, NULL);
    return build_const(im->g, t, &u, dtype_size(dt), true);
}

Value *imp_i64s(Imp *im, const int64_t *v, int n)
{
    Dim *d = dim_const(&im->g->dims, n);
    Type t = type_make(&im->g->arena, DT_I64, 1, &d);
    return build_const(im->g, t, n ? (const void *)v : "", (size_t)n * 8, true);
}

Value *imp_shape_value(Imp *im, Dim *const *dims, int n)
{
    AttrList l = {0};
    attrs_add_dims(im->g, &l, "dims", dims, n);
    Op *op = build_op(im->g, OP_SHAPE_CONST, NULL, 0, l.v, l.n);
    return op ? op->out[0] : NULL;
}

bool imp_axis(Imp *im, int64_t axis, int rank, int64_t *out)
{
    if (axis < -rank || axis >= rank)
        return imp_err(im, "axis %lld is out of range for rank %d", (long long)axis, rank);
    *out = axis < 0 ? axis + rank : axis;
    return true;
}

bool imp_axes(Imp *im, int64_t *axes, int n, int rank)
{
    for (int i = 0; i < n; i++)
        if (!imp_axis(im, axes[i], rank, &axes[i]))
            return false;
    for (int i = 1; i < n; i++) /* insertion sort: lists are short */
        for (int j = i; j > 0 && axes[j - 1] > axes[j]; j--) {
            int64_t t = axes[j];
            axes[j] = axes[j - 1];
            axes[j - 1] = t;
        }
    for (int i = 1; i < n; i++)
        if (axes[i] == axes[i - 1])
            return imp_err(im, "axis %lld is repeated", (long long)axes[i]);
    return true;
}

/* ------------------------------------------------------------------ */
/* Graph inputs                                                         */

/* A dim_param as a symbol name: the IR prints symbol names raw, so one that
 * is not an identifier ([A-Za-z_][A-Za-z0-9_]*) has every other byte
 * replaced by '_' ("batch size" -> "batch_size", "2d" -> "_2d"). Equal
 * names stay equal; two names that differ only there would merge, so the
 * mapped name gets a hash suffix when it was changed. NULL if out of
 * memory. */
static const char *dim_param_name(Imp *im, const char *p)
{
    size_t n = strlen(p);
    bool ok = isalpha((unsigned char)p[0]) || p[0] == '_';
    for (size_t i = 0; ok && i < n; i++)
        ok = isalnum((unsigned char)p[i]) || p[i] == '_';
    if (ok)
        return p;
    char *s = arena_alloc(&im->g->arena, n + 16);
    if (!s)
        return NULL;
    size_t k = 0;
    if (!isalpha((unsigned char)p[0]) && p[0] != '_')
        s[k++] = '_';
    for (size_t i = 0; i < n; i++)
        s[k++] = isalnum((unsigned char)p[i]) || p[i] == '_' ? p[i] : '_';
    snprintf(s + k, 16, "_%04x", (unsigned)(str_hash(p) & 0xffff));
    return s;
}

/* The symbol of a named input dim. A name seen before is the same symbol
 * (counted in Graph.tied_dims: the ONNX spec's promise that equal names
 * are equal sizes); with OnnxOpts.untie it is a new symbol named after it
 * instead ("seq", then "seq_2", "seq_3", ...). See doc/onnx.md. */
static Dim *dim_param_sym(Imp *im, const char *p)
{
    const char *name = dim_param_name(im, p);
    if (!name)
        return NULL;
    Dim *old = dim_sym_find(&im->g->dims, name);
    if (!old)
        return dim_sym(&im->g->dims, name);
    if (!im->untie) {
        im->g->tied_dims++;
        return old;
    }
    char buf[300];
    int k = 2;
    do
        snprintf(buf, sizeof buf, "%.280s_%d", name, k++);
    while (dim_sym_find(&im->g->dims, buf));
    return dim_sym(&im->g->dims, buf);
}

/* Whether a dim_param is a name exporters write for "unknown" rather than
 * a name: empty, all '?' (paddle2onnx), "None" (Keras and tf2onnx print
 * Python's None), "-1" (a size that was never a name), "unk__N" (ONNX's
 * and ONNX Runtime's shape inference number each unknown dim). The ONNX
 * spec makes equal dim_params equal sizes; a placeholder repeated in a
 * model's inputs promises nothing, so each use is a fresh symbol (as a
 * dim with neither dim_value nor dim_param is). See doc/onnx.md. */
static bool dim_param_placeholder(const char *p)
{
    size_t n = strlen(p), q = strspn(p, "?");
    if (n == 0 || q == n || !strcmp(p, "None") || !strcmp(p, "-1"))
        return true;
    if (strncmp(p, "unk__", 5) || !p[5])
        return false;
    return strspn(p + 5, "0123456789") == n - 5;
}

static bool add_input(Imp *im, const Onnx__ValueInfoProto *vi)
{
    const char *name = vi->name;
    const Onnx__TypeProto *tp = vi->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
        return imp_errk(im, DIAG_UNSUPPORTED, "graph input '%s': only tensor inputs are supported", name);
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    DType dt = onnx_dtype(tt->elem_type);
    if (dt == DT_INVALID)
        return imp_errk(im, DIAG_UNSUPPORTED, "graph input '%s': element type %s is not supported", name,
                       onnx_type_name(tt->elem_type));
    if (!tt->shape)
        return imp_err(im, "graph input '%s' has no shape (its rank is unknown)", name);
    if (tt->shape->n_dim > MAX_RANK)
        return imp_err(im, "graph input '%s': rank %zu exceeds %d", name, tt->shape->n_dim,
                       MAX_RANK);
    Dim *dims[MAX_RANK];
    for (size_t i = 0; i < tt->shape->n_dim; i++) {
        const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
        if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && d->dim_value >= 0)
            dims[i] = dim_const(&im->g->dims, d->dim_value);
        else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
                 d->dim_param && !dim_param_placeholder(d->dim_param))
            dims[i] = dim_param_sym(im, d->dim_param);
        else
            dims[i] = dim_sym_fresh(&im->g->dims, SYM_INPUT);
        if (!dims[i])
            return imp_oom(im);
    }
    Type t = type_make(&im->g->arena, dt, (int)tt->shape->n_dim, dims);
    Value *v = graph_add_input(im->g, name, t);
    if (!v || !imp_bind(im, name, v))
        return imp_oom(im);
    return true;
}

/* ------------------------------------------------------------------ */
/* Node order                                                           */

/* Whether a ", "-separated list holds the item. */
static bool list_has(const char *list, const char *item)
{
    size_t n = strlen(item);
    for (const char *p = list; *p;) {
        size_t k = strcspn(p, ",");
        if (k == n && !strncmp(p, item, n))
            return true;
        p += k;
        while (*p == ',' || *p == ' ')
            p++;
    }
    return false;
}

/* Checks every node against the table; lists all unsupported ones, one
 * located line per node while they fit in a message, then one line that
 * counts the rest and names their ops (each once), so that the message
 * always says every op a model needs. */
static bool check_supported(Imp *im, const Onnx__GraphProto *gp, const Onnx__ModelProto *m)
{
    enum { TAIL = 320 }; /* room kept for the last line */
    char msg[DIAG_MAX], rest[TAIL - 64] = "";
    size_t len = 0, nrest = 0;
    int bad = 0, shown = 0;
    msg[0] = 0;
    for (size_t i = 0; i < gp->n_node; i++) {
        const Node *n = gp->node[i];
        const Lowering *later;
        if (find_lowering(im, n, &later))
            continue;
        bad++;
        char where[256], line[512];
        node_where(where, sizeof where, n, (int)i);
        int opset = im->opset;
        if (!is_default_domain(n->domain)) {
            opset = 0;
            for (size_t k = 0; k < m->n_opset_import; k++)
                if (m->opset_import[k]->domain && !strcmp(m->opset_import[k]->domain, n->domain))
                    opset = (int)m->opset_import[k]->version;
        }
        const char *dom = is_default_domain(n->domain) ? "" : n->domain;
        if (later)
            snprintf(line, sizeof line,
                     "%s: %s: error: unsupported op %s%s%s (opset %d; supported from opset %d)",
                     im->file, where, dom, *dom ? "." : "", n->op_type, opset, later->since);
        else
            snprintf(line, sizeof line, "%s: %s: error: unsupported op %s%s%s (opset %d)",
                     im->file, where, dom, *dom ? "." : "", n->op_type ? n->op_type : "?",
                     opset);
        size_t l = strlen(line);
        if (shown == bad - 1 && len + l + 2 < sizeof msg - TAIL) {
            if (len)
                msg[len++] = '\n';
            memcpy(msg + len, line, l + 1);
            len += l;
            shown++;
            continue;
        }
        /* not shown: its op joins the tail's list, once */
        char op[128];
        snprintf(op, sizeof op, "%s%s%s", dom, *dom ? "." : "", n->op_type ? n->op_type : "?");
        size_t ol = strlen(op);
        if (list_has(rest, op))
            continue;
        if (nrest + ol + 7 < sizeof rest) {
            nrest += (size_t)snprintf(rest + nrest, sizeof rest - nrest, "%s%s", nrest ? ", " : "", op);
        } else if (!strstr(rest, "...")) {
            snprintf(rest + nrest, sizeof rest - nrest, ", ...");
            nrest = strlen(rest);
        }
    }
    if (!bad)
        return true;
    if (shown < bad)
        snprintf(msg + len, sizeof msg - len, "\n%s: error: ... and %d more unsupported ops (%s)",
                 im->file, bad - shown, rest);
    return diag_setk(im->d, DIAG_UNSUPPORTED, "%s", msg);
}

/* Whether name is defined here or, in a subgraph, in an enclosing graph. */
static bool imp_visible(Imp *im, const char *name)
{
    for (; im; im = im->parent)
        if (imp_lookup(im, name))
            return true;
    return false;
}

/* Orders the nodes so every value is defined before use, keeping the
 * file's order where it already is one (iterative depth-first search). */
static int *sort_nodes(Imp *im, const Onnx__GraphProto *gp)
{
    size_t n = gp->n_node;
    StrMap prod = {0};
    int *order = malloc((n + 1) * sizeof *order);
    int *state = calloc(n + 1, sizeof *state);
    size_t *cursor = calloc(n + 1, sizeof *cursor);
    int *stack = malloc((n + 1) * sizeof *stack);
    int norder = 0;
    bool ok = order && state && cursor && stack;
    if (!ok)
        imp_oom(im);
    for (size_t i = 0; ok && i < n; i++) {
        const Node *nd = gp->node[i];
        for (size_t k = 0; k < nd->n_output; k++) {
            const char *o = nd->output[k];
            if (!o || !*o)
                continue;
            if (map_get(&prod, o) || imp_lookup(im, o)) {
                im->node = nd;
                im->node_idx = (int)i;
                ok = imp_err(im, "value '%s' is defined more than once", o);
                break;
            }
            if (!map_put(&prod, o, (void *)(intptr_t)(i + 1)))
                ok = imp_oom(im);
        }
    }
    for (size_t root = 0; ok && root < n; root++) {
        if (state[root])
            continue;
        int sp = 0;
        stack[sp++] = (int)root;
        state[root] = 1;
        while (ok && sp) {
            int t = stack[sp - 1];
            const Node *nd = gp->node[t];
            if (cursor[t] == nd->n_input) {
                state[t] = 2;
                order[norder++] = t;
                sp--;
                continue;
            }
            const char *in = nd->input[cursor[t]++];
            if (!in || !*in || imp_visible(im, in))
                continue;
            intptr_t p = (intptr_t)map_get(&prod, in) - 1;
            im->node = nd;
            im->node_idx = t;
            if (p < 0)
                ok = imp_err(im, "input '%s' is not defined (no graph input, initializer or "
                                 "node output has this name)", in);
            else if (state[p] == 1)
                ok = imp_err(im, "the graph has a cycle: input '%s' depends on this node's "
                                 "own output", in);
            else if (state[p] == 0) {
                state[p] = 1;
                stack[sp++] = (int)p;
            }
        }
    }
    im->node = NULL;
    free(prod.slot);
    free(state);
    free(cursor);
    free(stack);
    if (!ok) {
        free(order);
        return NULL;
    }
    return order;
}

/* ------------------------------------------------------------------ */
/* Folding at import                                                    */

/* Exporters compute shape vectors out of constants and of Shape: torch's
 * `cls.expand(B, -1, -1)` is Where(Equal(s, ConstantOfShape(Shape(s)) *
 * -1), ConstantOfShape(Shape(s)), s), `F.pad` by a computed amount builds
 * its pads with ConstantOfShape(6 - Shape(pads)[0]), `unflatten` slices
 * Shape(x) up to Mod(2, 3). The rank of what follows depends on the values
 * of these vectors (the length of a ConstantOfShape, the end of a Slice),
 * and a lowering needs every rank when it builds its ops. So after each
 * node, a result of integer or bool type whose value follows from
 * constants alone is computed on the reference interpreter and replaces
 * the result: constants, shape_const of constant dims, shape_of and dim of
 * constant dims are the leaves; the ops the node's lowering made (pure
 * ones only, with at most FOLD_MAX elements) are evaluated over them. A
 * value with a symbol in it (Shape(x)[0] = B) is left to shape-value
 * propagation (passes/shapeval.c), which sees through the same ops with
 * dims for elements; what it needs here is only that lengths are known. */

enum { FOLD_MAX = 4096, FOLD_DEPTH = 64 };

static bool fold_type_ok(const Value *v)
{
    return dtype_is_int(vdt(v)) || vdt(v) == DT_BOOL;
}

/* The value of v as a Tensor (owned when computed here), if it follows
 * from constants; ops made before op id `first` are leaves only. */
static bool fold_value(Imp *im, const Value *v, int first, int depth, Tensor *t)
{
    const Op *op = v->def;
    size_t n;
    memset(t, 0, sizeof *t);
    if (!op || depth > FOLD_DEPTH)
        return false;
    t->dtype = vdt(v);
    t->rank = vrank(v);
    if (op->kind == OP_CONST) {
        if (!op->cst || op->cst->src == CONST_ELIDED || !op->cst->data || !type_static_numel(&v->type, &n) ||
            op->cst->nbytes != n * dtype_size(vdt(v)))
            return false;
        for (int i = 0; i < t->rank; i++)
            t->shape[i] = vdims(v)[i]->c;
        t->data = (void *)op->cst->data;
        t->nbytes = op->cst->nbytes;
        return true;
    }
    if (op->kind == OP_SHAPE_CONST || op->kind == OP_SHAPE_OF || op->kind == OP_DIM) {
        Dim *const *dims = NULL;
        int nd = 1;
        if (op->kind == OP_SHAPE_CONST) {
            const Attr *a = op_attr(op, "dims");
            if (!a)
                return false;
            dims = a->dims, nd = a->n;
        } else if (op->kind == OP_SHAPE_OF) {
            dims = vdims(op->in[0]), nd = vrank(op->in[0]);
        } else {
            int64_t ax = op_attr_int(op, "axis", 0);
            if (ax < 0 || ax >= vrank(op->in[0]))
                return false;
            dims = vdims(op->in[0]) + ax;
        }
        if (vdt(v) != DT_I64 || vrank(v) > 1 || (vrank(v) == 1 && !dim_is(vdims(v)[0], nd)) ||
            (vrank(v) == 0 && nd != 1))
            return false;
        for (int i = 0; i < nd; i++)
            if (!dim_is_const(dims[i]))
                return false;
        if (!tensor_alloc(t, DT_I64, vrank(v), (int64_t[]){nd}))
            return false;
        for (int i = 0; i < nd; i++)
            ((int64_t *)t->data)[i] = dims[i]->c;
        return true;
    }
    /* an op of this node: pure, of a small integer result */
    OpCat cat = op_info(op->kind)->cat;
    if (op->id < first || op->nout != 1 || op->nin < 1 || op->nin > ONNX_MAX_IO || cat == CAT_MISC ||
        cat == CAT_LIB || !fold_type_ok(v))
        return false;
    if (type_static_numel(&v->type, &n) ? n > FOLD_MAX : !op_info(op->kind)->name ||
        strncmp(op_info(op->kind)->name, "dyn_", 4))
        return false; /* a dyn op's result dims are placeholders until it runs */
    Tensor in[ONNX_MAX_IO];
    const Tensor *inp[ONNX_MAX_IO];
    int k = 0;
    bool ok = true;
    for (; k < op->nin && ok; k++) {
        ok = fold_value(im, op->in[k], first, depth + 1, &in[k]) && tensor_numel(&in[k]) <= FOLD_MAX;
        inp[k] = &in[k];
    }
    Diag d = {0};
    ok = ok && interp_run_op(im->g, op, NULL, 0, inp, t, &d);
    if (ok && (t->dtype != vdt(v) || t->rank != vrank(v) || tensor_numel(t) > FOLD_MAX))
        ok = false;
    for (int i = 0; ok && i < t->rank; i++) /* what the type knows must hold */
        ok = !dim_is_const(vdims(v)[i]) || vdims(v)[i]->c == t->shape[i];
    if (ok && !t->owned) { /* a view of an operand, freed below: copy it */
        void *p = malloc(t->nbytes ? t->nbytes : 1);
        if (p && t->nbytes)
            memcpy(p, t->data, t->nbytes);
        t->data = p;
        t->owned = ok = p != NULL;
    }
    for (int i = 0; i < k; i++)
        tensor_free(&in[i]);
    if (!ok)
        tensor_free(t);
    return ok;
}

/* v, or a constant with its value if it follows from constants alone
 * (NULL when out of memory). */
static Value *fold_result(Imp *im, Value *v, int first)
{
    if (!v || !v->def || v->def->id < first || v->def->kind == OP_CONST || !fold_type_ok(v))
        return v;
    Tensor t;
    if (!fold_value(im, v, first, 0, &t))
        return v;
    void *data = arena_alloc(&im->g->arena, t.nbytes ? t.nbytes : 1);
    Dim *dims[MAX_RANK];
    for (int i = 0; i < t.rank; i++)
        dims[i] = dim_const(&im->g->dims, t.shape[i]);
    Value *k = NULL;
    if (data) {
        if (t.nbytes)
            memcpy(data, t.data, t.nbytes);
        k = build_const(im->g, type_make(&im->g->arena, t.dtype, t.rank, dims), data, t.nbytes, false);
    }
    tensor_free(&t);
    return k;
}

/* ------------------------------------------------------------------ */
/* Lowering one node                                                    */

static bool lower_node_io(Imp *im, const Node *n, const Lowering *lw, Value **in, Value **out);

/* A node's operands in arrays on the stack, or on the heap past
 * ONNX_MAX_IO of them (a Concat or Sum of hundreds of values). */
static bool lower_node(Imp *im, const Node *n, int idx, const Lowering *lw)
{
    im->node = n;
    im->node_idx = idx;
    if (n->n_input > INT_MAX / 2 || n->n_output > INT_MAX / 2)
        return imp_err(im, "%zu inputs and %zu outputs: too many", n->n_input, n->n_output);
    if (n->n_input <= ONNX_MAX_IO && n->n_output <= ONNX_MAX_IO) {
        Value *in[ONNX_MAX_IO] = {0}, *out[ONNX_MAX_IO] = {0};
        return lower_node_io(im, n, lw, in, out);
    }
    Value **in = calloc(n->n_input + 1, sizeof *in), **out = calloc(n->n_output + 1, sizeof *out);
    bool ok = in && out ? lower_node_io(im, n, lw, in, out) : imp_oom(im);
    free(in);
    free(out);
    return ok;
}

static bool lower_node_io(Imp *im, const Node *n, const Lowering *lw, Value **in, Value **out)
{
    for (size_t i = 0; i < n->n_input; i++) {
        if (!n->input[i] || !*n->input[i])
            continue;
        in[i] = imp_resolve(im, n->input[i]);
        if (!in[i])
            return imp_err(im, "input '%s' is not defined", n->input[i]);
    }
    im->in = in;
    im->nin = (int)n->n_input;
    /* trailing absent inputs do not count */
    while (im->nin > 0 && !in[im->nin - 1])
        im->nin--;
    im->out = out;
    im->nout = (int)n->n_output;
    im->arg = lw->arg;
    Op *before = im->g->last;
    int first = im->g->nops;
    if (!lw->fn(im))
        return false;
    for (size_t i = 0; i < n->n_output; i++)
        if (out[i] && !(out[i] = fold_result(im, out[i], first)))
            return imp_fail(im);
    const char *src = n->name && *n->name ? arena_strdup(&im->g->arena, n->name) : NULL;
    for (Op *op = before ? before->next : im->g->first; op && src; op = op->next)
        if (!op->src)
            op->src = src;
    for (size_t i = 0; i < n->n_output; i++) {
        const char *name = n->output[i];
        if (!name || !*name)
            continue;
        if (!out[i])
            return imp_errk(im, DIAG_UNSUPPORTED, "output %zu ('%s') is not supported", i, name);
        if (!out[i]->name)
            out[i]->name = arena_strdup(&im->g->arena, name);
        if (!imp_bind(im, name, out[i]))
            return imp_oom(im);
    }
    return true;
}

static bool add_initializers(Imp *im, const Onnx__GraphProto *gp);
static bool lower_nodes(Imp *im, const Onnx__GraphProto *gp, Value **outs);

static bool import_graph(Imp *im, const Onnx__ModelProto *m)
{
    im->model = m;
    const Onnx__GraphProto *gp = m->graph;
    im->opset = -1;
    im->opset_ml = 0;
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const char *dom = m->opset_import[i]->domain;
        if (is_default_domain(dom))
            im->opset = (int)m->opset_import[i]->version;
        else if (!strcmp(dom, "ai.onnx.ml"))
            im->opset_ml = (int)m->opset_import[i]->version;
    }
    if (im->opset < 0) {
        for (size_t i = 0; i < gp->n_node; i++)
            if (is_default_domain(gp->node[i]->domain))
                return imp_err(im, "the model imports no opset of the default ONNX domain");
        im->opset = 0;
    }
    /* Initializers first: an input that is also an initializer is a constant. */
    if (!add_initializers(im, gp))
        return false;
    for (size_t i = 0; i < gp->n_input; i++) {
        const char *name = gp->input[i]->name;
        if (!name || !*name)
            return imp_err(im, "graph input %zu has no name", i);
        if (imp_lookup(im, name))
            continue;
        if (!add_input(im, gp->input[i]))
            return false;
    }
    Value **outs = calloc(gp->n_output + 1, sizeof *outs);
    if (!outs)
        return imp_oom(im);
    bool ok = lower_nodes(im, gp, outs);
    for (size_t i = 0; ok && i < gp->n_output; i++)
        if (!graph_add_output(im->g, outs[i]))
            ok = imp_oom(im);
    free(outs);
    return ok;
}

static bool add_initializers(Imp *im, const Onnx__GraphProto *gp)
{
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const OTensor *t = gp->initializer[i];
        char what[300];
        snprintf(what, sizeof what, "initializer '%s'", t->name ? t->name : "");
        if (!t->name || !*t->name)
            return imp_err(im, "initializer %zu has no name", i);
        if (imp_lookup(im, t->name))
            return imp_err(im, "initializer '%s' is defined more than once", t->name);
        Value *v = imp_tensor_const(im, t, what);
        if (!v)
            return false;
        v->name = arena_strdup(&im->g->arena, t->name);
        if (!imp_bind(im, t->name, v))
            return imp_oom(im);
    }
    if (gp->n_sparse_initializer)
        return imp_errk(im, DIAG_UNSUPPORTED, "sparse initializers are not supported");
    return true;
}

/* Lowers gp's nodes and resolves its outputs into outs. */
static bool lower_nodes(Imp *im, const Onnx__GraphProto *gp, Value **outs)
{
    if (!check_supported(im, gp, im->model))
        return false;
    int *order = sort_nodes(im, gp);
    if (!order)
        return false;
    for (size_t k = 0; k < gp->n_node; k++) {
        const Node *n = gp->node[order[k]];
        const Lowering *later, *lw = find_lowering(im, n, &later);
        if (!lower_node(im, n, order[k], lw)) {
            free(order);
            return false;
        }
    }
    free(order);
    im->node = NULL;
    for (size_t i = 0; i < gp->n_output; i++) {
        const char *name = gp->output[i]->name;
        Value *v = name ? imp_resolve(im, name) : NULL;
        if (!v)
            return imp_err(im, "graph output '%s' is not defined", name ? name : "");
        outs[i] = v;
    }
    return true;
}

/* ------------------------------------------------------------------ */
/* Entry points                                                         */

static void free_model(void *p)
{
    ProtobufCAllocator a = onnx_pb_alloc(NULL);
    onnx__model_proto__free_unpacked(p, &a);
}

Graph *onnx_import_model(Onnx__ModelProto *m, void *keep, void (*release)(void *), const OnnxWeights *w,
                         const char *name, const char *dir, const OnnxOpts *o, Diag *d)
{
    if (!m->graph) {
        diag_setk(d, DIAG_PARSE, "%s: error: cannot parse ONNX model (it has no graph)", name);
        release(keep);
        return NULL;
    }
    Graph *g = graph_new(m->graph->name && *m->graph->name ? m->graph->name : "main");
    if (!g || !graph_keep(g, keep, release)) {
        diag_setk(d, DIAG_RESOURCE, "%s: error: out of memory", name);
        release(keep);
        graph_free(g);
        return NULL;
    }
    Imp im = {.g = g, .d = d, .file = name, .dir = dir ? dir : ".", .untie = o && o->untie, .weights = w};
    bool ok = import_graph(&im, m);
    free(im.names);
    free(im.caps);
    free(im.capin);
    if (ok) {
        Diag vd = {0};
        if (!graph_verify(g, &vd) && vd.kind == DIAG_RESOURCE)
            ok = diag_copy(d, &vd);
        else if (vd.set)
            ok = diag_setk(d, DIAG_INTERNAL, "%s: error: internal error: the imported graph does not verify: %s",
                           name, vd.msg);
    }
    if (!ok) {
        graph_free(g);
        return NULL;
    }
    return g;
}

Graph *onnx_import_buffer(const void *buf, size_t len, const char *name,
                          const char *dir, const OnnxOpts *o, Diag *d)
{
    if (!name)
        name = "<buffer>";
    if (!len) {
        diag_setk(d, DIAG_PARSE, "%s: error: cannot parse ONNX model (empty file)", name);
        return NULL;
    }
    bool oom = false;
    ProtobufCAllocator a = onnx_pb_alloc(&oom);
    Onnx__ModelProto *m = onnx__model_proto__unpack(&a, len, buf);
    if (!m && oom) {
        diag_setk(d, DIAG_RESOURCE, "%s: error: out of memory unpacking the model (%zu bytes)", name, len);
        return NULL;
    }
    if (!m) {
        diag_setk(d, DIAG_PARSE, "%s: error: cannot parse ONNX model (not a valid ModelProto: truncated "
                    "or not an ONNX file)", name);
        return NULL;
    }
    return onnx_import_model(m, m, free_model, NULL, name, dir, o, d);
}

Graph *onnx_import_file(const char *path, const OnnxOpts *o, Diag *d)
{
    char err[512];
    size_t len;
    struct stat st;
    void *buf = onnx_map_all(path, &len, &st);
    bool mapped = buf != NULL;
    if (!mapped && !(buf = onnx_read_all(path, &len, err, sizeof err))) {
        diag_setk(d, DIAG_RESOURCE, "%s: error: %s", path, err);
        return NULL;
    }
    char *dir = strdup(path);
    Graph *g = NULL;
    if (!dir) {
        diag_oom(d);
    } else {
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = 0;
        const char *xdir = slash ? dir : ".";
        if (!mapped || !onnx_weights_import(buf, len, &st, path, xdir, o, &g, d)) {
#ifdef MADV_POPULATE_READ
            /* read whole, front to back: populated at once rather than a
             * fault per 64 KiB (advice: its failure changes nothing) */
            if (mapped)
                madvise(buf, len, MADV_POPULATE_READ);
#endif
            g = onnx_import_buffer(buf, len, path, xdir, o, d);
        }
        free(dir);
    }
    if (mapped)
        munmap(buf, len);
    else
        free(buf);
    return g;
}

/* ------------------------------------------------------------------ */
/* NULL-safe builders for lowerings                                     */

Value *imp_un(Imp *im, OpKind k, Value *x) { return x ? build_unary(im->g, k, x) : NULL; }

Value *imp_bin(Imp *im, OpKind k, Value *a, Value *b)
{
    return a && b ? build_binary(im->g, k, a, b) : NULL;
}

Value *imp_binc(Imp *im, OpKind k, Value *a, double c)
{
    return a ? imp_bin(im, k, a, imp_scalar(im, vdt(a), c)) : NULL;
}

Value *imp_cmp(Imp *im, const char *dir, Value *a, Value *b)
{
    return a && b ? build_cmp(im->g, dir, a, b) : NULL;
}

Value *imp_sel(Imp *im, Value *c, Value *a, Value *b)
{
    return c && a && b ? build_select(im->g, c, a, b) : NULL;
}

Value *imp_cvt(Imp *im, Value *x, DType dt)
{
    if (!x || vdt(x) == dt)
        return x;
    return build_convert(im->g, x, dt);
}

Value *imp_reshape(Imp *im, Value *x, Dim *const *dims, int rank)
{
    if (!x)
        return NULL;
    if (vrank(x) == rank) {
        int i = 0;
        while (i < rank && vdims(x)[i] == dims[i])
            i++;
        if (i == rank)
            return x;
    }
    return build_reshape(im->g, x, dims, rank);
}

Value *imp_transpose(Imp *im, Value *x, const int64_t *perm)
{
    if (!x)
        return NULL;
    int i = 0;
    while (i < vrank(x) && perm[i] == i)
        i++;
    return i == vrank(x) ? x : build_transpose(im->g, x, perm);
}

Value *imp_reduce(Imp *im, Value *x, const char *kind, const int64_t *axes, int n, bool keep)
{
    return x ? build_reduce(im->g, x, kind, axes, n, keep) : NULL;
}

Value *imp_slice1(Imp *im, Value *x, int axis, Dim *start, Dim *limit, int64_t stride)
{
    if (!x)
        return NULL;
    Dim *s[MAX_RANK], *l[MAX_RANK];
    int64_t st[MAX_RANK];
    for (int i = 0; i < vrank(x); i++) {
        s[i] = i == axis ? start : dim_const(&im->g->dims, 0);
        l[i] = i == axis ? limit : vdims(x)[i];
        st[i] = i == axis ? stride : 1;
    }
    return build_slice(im->g, x, s, l, st);
}

/* ------------------------------------------------------------------ */
/* Subgraphs as regions                                                 */

/* A symbol of the parent in the region: the region's symbol of the same
 * name (region symbols made fresh never clash: their counter starts past
 * the parent's, see imp_sub_begin), with its bounds, except the lower
 * bound of 1 a builder's placeholder has until the parent's shape analysis
 * resolves it (a top-k's k over a selection that may be empty). */
static Dim *sym_in_region(void *ctx, const Dim *s)
{
    Imp *sub = ctx;
    Dim *d = dim_sym_find(&sub->g->dims, s->name);
    if (!d && (d = dim_sym(&sub->g->dims, s->name)))
        dim_sym_set(d, s->origin == SYM_DERIVED ? 0 : s->lo, s->hi, SYM_INPUT);
    return d;
}

bool imp_sub_begin(Imp *im, Imp *sub, const char *name)
{
    memset(sub, 0, sizeof *sub);
    char where[DIAG_MAX / 4] = "";
    if (im->node)
        node_where(where, sizeof where, im->node, im->node_idx);
    sub->g = graph_new(name);
    sub->d = im->d;
    sub->file = arena_printf(&im->g->arena, "%s: %s %s", im->file, where, name);
    sub->dir = im->dir;
    sub->opset = im->opset;
    sub->opset_ml = im->opset_ml;
    sub->model = im->model;
    sub->parent = im;
    if (!sub->g || !sub->file) {
        graph_free(sub->g);
        sub->g = NULL;
        return imp_oom(im);
    }
    sub->g->file = im->g->file;
    sub->g->dims.fresh = im->g->dims.fresh;
    return true;
}

/* Whether every symbol d uses is the whole dim of an input of region g. */
static bool region_binds(const Graph *g, const Dim *d)
{
    if (d->kind != DIM_SYM) {
        for (int i = 0; i < d->n; i++)
            if (!region_binds(g, d->args[i]))
                return false;
        return true;
    }
    for (int i = 0; i < g->ninputs; i++)
        for (int k = 0; k < g->inputs[i]->type.rank; k++)
            if (g->inputs[i]->type.dims[k] == d)
                return true;
    return false;
}

/* The region's dim for an input dim d of the parent. A dim the parent
 * computes from its symbols (max(A + B, C): the sum of an If branch's
 * per-class counts) means the same expression in the region only where
 * the region can bind those symbols: from inputs that have them as dims
 * of their own. Otherwise it is a symbol of the region, one per distinct
 * dim of the parent, which the input binds: the region knows less of it,
 * and its host flow can compute everything that depends on it. */
static Dim *region_dim(Imp *sub, Dim *d)
{
    DimCtx *cx = &sub->g->dims;
    Dim *r = dim_translate(cx, d, sym_in_region, sub);
    if (!r || r->kind == DIM_CONST || r->kind == DIM_SYM || region_binds(sub->g, r))
        return r;
    for (int i = 0; i < sub->ncomp; i++)
        if (sub->cfrom[i] == d)
            return sub->cto[i];
    if (sub->ncomp == sub->capcomp) {
        int cap = sub->capcomp ? 2 * sub->capcomp : 8;
        Dim **f = arena_array(&sub->g->arena, (size_t)cap, sizeof *f), **t = arena_array(&sub->g->arena, (size_t)cap, sizeof *t);
        if (!f || !t)
            return NULL;
        for (int i = 0; i < sub->ncomp; i++) {
            f[i] = sub->cfrom[i];
            t[i] = sub->cto[i];
        }
        sub->cfrom = f;
        sub->cto = t;
        sub->capcomp = cap;
    }
    /* any size: the parent's bounds at import may be those of symbols its
     * shape analysis has yet to resolve (a count that may be 0 taken as >= 1) */
    Dim *s = dim_sym_fresh(cx, SYM_INPUT);
    if (!s)
        return NULL;
    dim_sym_set(s, 0, DIM_INF, SYM_INPUT);
    sub->cfrom[sub->ncomp] = d;
    sub->cto[sub->ncomp++] = s;
    return s;
}

Value *imp_sub_input(Imp *sub, const Type *t, const bool *fresh, const char *name)
{
    Dim *dims[MAX_RANK];
    for (int i = 0; i < t->rank; i++) {
        dims[i] = fresh && fresh[i] ? dim_sym_fresh(&sub->g->dims, SYM_INPUT) : region_dim(sub, t->dims[i]);
        if (!dims[i]) {
            imp_oom(sub);
            return NULL;
        }
    }
    Value *v = graph_add_input(sub->g, name, type_make(&sub->g->arena, t->dtype, t->rank, dims));
    if (!v || (name && !imp_bind(sub, name, v))) {
        imp_oom(sub);
        return NULL;
    }
    return v;
}

Value *imp_sub_capture(Imp *sub, Value *v)
{
    for (int i = 0; i < sub->ncaps; i++)
        if (sub->caps[i] == v)
            return sub->capin[i];
    size_t n;
    const Op *def = v->def;
    if (def && def->kind == OP_CONST && def->cst && def->cst->data && type_static_numel(&v->type, &n) &&
        def->cst->nbytes == n * dtype_size(vdt(v))) { /* a copy: the region sees the data */
        Dim *dims[MAX_RANK];
        for (int i = 0; i < vrank(v); i++)
            dims[i] = dim_const(&sub->g->dims, vdims(v)[i]->c);
        Value *k = build_const(sub->g, type_make(&sub->g->arena, vdt(v), vrank(v), dims), def->cst->data,
                               def->cst->nbytes, true);
        if (!k)
            imp_fail(sub);
        else if (v->name)
            k->name = arena_strdup(&sub->g->arena, v->name);
        return k;
    }
    if (sub->ncaps == sub->capcaps) {
        int cap = sub->capcaps ? 2 * sub->capcaps : 8;
        Value **c = realloc(sub->caps, (size_t)cap * sizeof *c), **ci;
        if (c)
            sub->caps = c;
        ci = c ? realloc(sub->capin, (size_t)cap * sizeof *ci) : NULL;
        if (!ci) {
            imp_oom(sub);
            return NULL;
        }
        sub->capin = ci;
        sub->capcaps = cap;
    }
    Value *in = imp_sub_input(sub, &v->type, NULL, NULL);
    if (!in)
        return NULL;
    if (v->name)
        in->name = arena_strdup(&sub->g->arena, v->name);
    sub->caps[sub->ncaps] = v;
    sub->capin[sub->ncaps++] = in;
    return in;
}

Value *imp_resolve(Imp *im, const char *name)
{
    Value *v = imp_lookup(im, name);
    if (v || !im->parent)
        return v;
    Value *outer = imp_resolve(im->parent, name);
    if (!outer || im->inlined)
        return outer;
    v = imp_sub_capture(im, outer);
    if (v && !imp_bind(im, name, v)) {
        imp_oom(im);
        return NULL;
    }
    return v;
}

bool imp_sub_lower(Imp *sub, const Onnx__GraphProto *gp, Value **outs)
{
    return add_initializers(sub, gp) && lower_nodes(sub, gp, outs);
}

bool imp_inline(Imp *im, const Onnx__GraphProto *gp, const char *name, Value **outs)
{
    char where[DIAG_MAX / 4] = "";
    if (im->node)
        node_where(where, sizeof where, im->node, im->node_idx);
    Imp sub = {.g = im->g, .d = im->d, .dir = im->dir, .opset = im->opset, .opset_ml = im->opset_ml,
               .model = im->model, .parent = im, .inlined = true};
    if (!(sub.file = arena_printf(&im->g->arena, "%s: %s %s", im->file, where, name)))
        return imp_oom(im);
    if (gp->n_input)
        return imp_err(im, "%s takes %zu inputs, expected none", name, gp->n_input);
    const Node *node = im->node;
    int idx = im->node_idx;
    bool ok = imp_sub_lower(&sub, gp, outs);
    free(sub.names);
    im->node = node; /* lowering the branch's nodes moved it */
    im->node_idx = idx;
    return ok;
}

Graph *imp_sub_end(Imp *sub, bool keep)
{
    free(sub->names);
    sub->names = NULL;
    Graph *g = sub->g;
    if (!keep) {
        graph_free(g);
        g = NULL;
    }
    sub->g = NULL;
    return g;
}
