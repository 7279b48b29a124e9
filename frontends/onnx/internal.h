/*
 * internal.h — what the files of the ONNX importer share: the importer
 * state, the lowering signature, attribute and constant helpers.
 *
 *   load.c          reading model files and external-data side files
 *   tensor.c        TensorProto <-> bytes, Tensor files
 *   import.c        inputs, initializers, node order, the dispatch table
 *   lower_elem.c    elementwise ops, activations, casts, comparisons
 *   lower_reduce.c  reductions, softmax, normalizations, scans, top-k,
 *                   losses
 *   lower_shape.c   shape computation and data movement
 *   lower_nn.c      matmul, gemm, einsum, convolution, pooling
 *   lower_quant.c   quantization: (De)QuantizeLinear, integer matmul and
 *                   convolution, QLinear matmul and convolution
 *   lower_signal.c  DFT and the window functions
 *   lower_detect.c  NonMaxSuppression, RoiAlign
 *   lower_unique.c  Unique
 *   lower_ml.c      the ai.onnx.ml domain: Scaler, ArrayFeatureExtractor,
 *                   Binarizer
 *
 * A lowering reads the current node's operands from im->in (NULL for an
 * absent optional input), builds core ops with the IR builders, and stores
 * one value per node output in im->out. It returns false after leaving a
 * message through imp_err (or imp_fail when a builder failed).
 */
#ifndef DISC_ONNX_INTERNAL_H
#define DISC_ONNX_INTERNAL_H

#include "frontends/onnx/onnx.h"
#include "onnx.pb-c.h"

typedef Onnx__NodeProto Node;
typedef Onnx__AttributeProto OAttr;
typedef Onnx__TensorProto OTensor;

enum { ONNX_MAX_IO = 64 };

typedef struct NameSlot {
    const char *key;
    Value *v;
} NameSlot;

typedef struct Imp {
    Graph *g;
    Diag *d;
    const char *file;  /* the model's name in messages */
    const char *dir;   /* where external data lives; NULL: "." */
    int opset;         /* version of the default domain */
    int opset_ml;      /* version of ai.onnx.ml, 0 if not imported */
    bool untie;        /* OnnxOpts.untie */
    NameSlot *names;   /* ONNX value name -> Value, open addressing */
    int cap, count;
    /* the node being lowered */
    const Node *node;
    int node_idx;
    int arg;           /* the dispatch entry's argument */
    Value **in;
    int nin;
    Value **out;
    int nout;
    /* a subgraph (a Loop or Scan body, an If branch) imported as a region */
    const Onnx__ModelProto *model;
    struct Imp *parent; /* the enclosing graph's importer, or NULL */
    Value **caps;       /* values of the parent captured, one region input each */
    Value **capin;      /* the region input of each */
    int ncaps, capcaps;
    Dim **cfrom, **cto; /* a region's input dims that the parent computes from
                           symbols no input of the region has as a dim of its
                           own, and the region's symbol for each (imp_sub_input;
                           the region graph's arena) */
    int ncomp, capcomp;
    bool inlined;       /* a subgraph lowered into the parent's graph itself
                           (an If on a constant): names of the parent are
                           used as they are, not captured */
    const struct OnnxWeights *weights; /* the model's large weights, if
                           loaded apart (weights.c) */
} Imp;

typedef bool LowerFn(Imp *im);

/* ---- import.c ---- */

typedef struct OnnxWeights OnnxWeights;

/* Imports the unpacked m, which keep (released with release) owns; the
 * graph keeps it. w: the large weights loaded apart, or NULL. */
Graph *onnx_import_model(Onnx__ModelProto *m, void *keep, void (*release)(void *), const OnnxWeights *w,
                         const char *name, const char *dir, const OnnxOpts *o, Diag *d);

/* ---- weights.c ---- */

struct stat;
/* Loads the model file buf (len bytes, st its fstat) with its large
 * weights apart (weights.c): true with *g (or NULL with d set) when it
 * did; false when the file is for the plain way. */
bool onnx_weights_import(const void *buf, size_t len, const struct stat *st, const char *name, const char *dir,
                         const OnnxOpts *o, Graph **g, Diag *d);
/* The hash of a weight w loaded at data (nbytes), when w knows it. */
bool onnx_weights_hash(const OnnxWeights *w, const void *data, size_t nbytes, uint64_t *hash);

/* ---- load.c ---- */

/* A read-only mapping of part of a file, released with onnx_map_free. */
typedef struct OnnxMap {
    void *base;
    size_t len;
    const void *data;  /* the requested bytes inside base, or heap */
    void *heap;        /* a 64-byte aligned copy (free), where they were not */
} OnnxMap;

/* false with the message and its kind in d */
bool onnx_map_file(const char *path, int64_t offset, int64_t length, OnnxMap *m, Diag *d);
void onnx_map_free(void *m); /* frees an OnnxMap from malloc, for graph_keep */
/* Reads a whole file into a malloc'd buffer (NULL with err on failure). */
void *onnx_read_all(const char *path, size_t *len, char *err, size_t errlen);
/* Maps a whole regular, non-empty file read-only (munmap(p, *len) to
 * release), its fstat in *st; NULL where it cannot (read it with
 * onnx_read_all then). The pages are not populated. */
void *onnx_map_all(const char *path, size_t *len, struct stat *st);
/* The allocator model unpacking uses: large buffers on huge pages; sets
 * *failed (if not NULL) when an allocation fails. */
ProtobufCAllocator onnx_pb_alloc(bool *failed);

/* ---- tensor.c ---- */

DType onnx_dtype(int32_t onnx_type);      /* DT_INVALID if unsupported */
int32_t onnx_type_of(DType dt);
const char *onnx_type_name(int32_t onnx_type);

/* A decoded TensorProto. data points into the proto's raw_data, into an
 * external-data mapping (map, to be released by the caller) or into arena
 * memory converted from a typed field. */
typedef struct TensorData {
    DType dtype;
    int rank;
    int64_t shape[MAX_RANK];
    size_t numel, nbytes;
    const void *data;
    OnnxMap *map;      /* non-NULL if data lives in a mapping (malloc'd) */
} TensorData;

/* false with the message (without a location) and its kind in d */
bool onnx_tensor_decode(const OTensor *t, const char *dir, Arena *a, TensorData *td, Diag *d);

/* Half-precision conversions, round to nearest even. */
uint16_t onnx_f32_to_f16(float f);
float onnx_f16_to_f32(uint16_t h);
uint16_t onnx_f32_to_bf16(float f);
float onnx_bf16_to_f32(uint16_t h);

/* ---- import.c: messages ---- */

/* "file: node N (Op "name"): error: ..." for the current node; returns false. */
bool imp_err(Imp *im, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same with a kind (imp_err's is DIAG_MODEL); imp_oom: out of memory. */
bool imp_errk(Imp *im, DiagKind k, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
bool imp_oom(Imp *im);
/* Reports the builder error left in the graph for the current node. */
bool imp_fail(Imp *im);
/* The lowering's result: v becomes the node's output; a NULL v (a builder
 * failed) is imp_fail. */
static inline bool imp_done(Imp *im, Value *v)
{
    if (!v)
        return imp_fail(im);
    im->out[0] = v;
    return true;
}
/* Value of a name already defined, or NULL; imp_bind defines one. */
Value *imp_lookup(Imp *im, const char *name);
bool imp_bind(Imp *im, const char *name, Value *v);
/* The same in a subgraph, where a name of an enclosing graph is captured:
 * a constant is copied into the region, any other value becomes an input
 * of the region (and, through Imp.caps, an operand of its op). */
Value *imp_resolve(Imp *im, const char *name);

/* ---- import.c: subgraphs as regions ---- */

/* Starts sub, the importer of a region of the current node of im, named
 * name ("body", "then_branch"). The caller adds the region's leading
 * inputs (imp_sub_input), lowers the ONNX subgraph into it
 * (imp_sub_lower) or builds ops itself, adds the outputs, and ends with
 * imp_sub_end, which leaves the graph to the caller (or frees it with
 * keep false). Captured values come as inputs after the leading ones. */
bool imp_sub_begin(Imp *im, Imp *sub, const char *name);
/* A region input of type t, a type of the parent's graph: each dim is
 * the parent's dim (a symbol of the same name in the region), or a fresh
 * symbol where fresh[i] (fresh may be NULL). name: the ONNX name it binds. */
Value *imp_sub_input(Imp *sub, const Type *t, const bool *fresh, const char *name);
/* A parent's value used in the region: a copy of a constant, else a new
 * captured input. */
Value *imp_sub_capture(Imp *sub, Value *v);
/* Lowers gp's initializers and nodes into sub and resolves its outputs
 * (gp->n_output values into outs). */
bool imp_sub_lower(Imp *sub, const Onnx__GraphProto *gp, Value **outs);
Graph *imp_sub_end(Imp *sub, bool keep);
/* Lowers subgraph gp (no inputs) into im's own graph, in a scope of its
 * own; its outputs go to outs. For a branch known at import. */
bool imp_inline(Imp *im, const Onnx__GraphProto *gp, const char *name, Value **outs);
/* Makes a const op from a TensorProto (an initializer or an attribute). */
Value *imp_tensor_const(Imp *im, const OTensor *t, const char *what);

/* ---- import.c: attributes of the current node ---- */

const OAttr *attr_find(Imp *im, const char *name);
/* Each returns false (with a message) if present with the wrong type. */
bool attr_int(Imp *im, const char *name, int64_t dflt, int64_t *out);
bool attr_float(Imp *im, const char *name, double dflt, double *out);
/* s is NUL-terminated in the arena; dflt may be NULL. */
bool attr_str(Imp *im, const char *name, const char *dflt, const char **out);
/* *v in the arena; *n = -1 if absent. */
bool attr_ints(Imp *im, const char *name, int64_t **v, int *n);
bool attr_floats(Imp *im, const char *name, double **v, int *n);

/* ---- import.c: helpers for lowerings ---- */

#define IN(i) ((i) < im->nin ? im->in[(i)] : NULL)
#define TRY(x) do { if (!(x)) return imp_fail(im); } while (0)

static inline int vrank(const Value *v) { return v->type.rank; }
static inline Dim **vdims(const Value *v) { return v->type.dims; }
static inline DType vdt(const Value *v) { return v->type.dtype; }

/* Operand i must be present. */
Value *imp_need(Imp *im, int i);
/* A value produced by a const op whose elements are integers: reads them
 * into the arena. false (no message) if v is not such a constant. */
bool imp_const_ints(Imp *im, Value *v, int64_t **vals, int *n);
/* Same for a constant scalar (or one-element) of any numeric type. */
bool imp_const_scalar(Imp *im, Value *v, double *out);
/* Normalizes an axis into [0, rank); false with a message if out of range. */
bool imp_axis(Imp *im, int64_t axis, int rank, int64_t *out);
/* Sorted, normalized, duplicate-free axes. */
bool imp_axes(Imp *im, int64_t *axes, int n, int rank);
/* Constants built for lowerings. */
Value *imp_scalar(Imp *im, DType dt, double v);
Value *imp_i64s(Imp *im, const int64_t *v, int n);  /* i64[n] */
/* An i64[n] shape value from dims (shape_const), for dyn ops. */
Value *imp_shape_value(Imp *im, Dim *const *dims, int n);

/* NULL-safe builders: a NULL operand (an earlier failure, whose message is
 * already in the graph) gives NULL, so lowerings chain them and check once. */
Value *imp_un(Imp *im, OpKind k, Value *x);
Value *imp_bin(Imp *im, OpKind k, Value *a, Value *b);
Value *imp_binc(Imp *im, OpKind k, Value *a, double c); /* a k scalar c */
Value *imp_cmp(Imp *im, const char *dir, Value *a, Value *b);
Value *imp_sel(Imp *im, Value *c, Value *a, Value *b);
Value *imp_cvt(Imp *im, Value *x, DType dt);
Value *imp_reshape(Imp *im, Value *x, Dim *const *dims, int rank);
Value *imp_transpose(Imp *im, Value *x, const int64_t *perm);
Value *imp_reduce(Imp *im, Value *x, const char *kind, const int64_t *axes, int n, bool keep);
Value *imp_slice1(Imp *im, Value *x, int axis, Dim *start, Dim *limit, int64_t stride);

/* ---- the lowerings (referenced from the dispatch table in import.c) ---- */

#define LOWERINGS(X)                                                          \
    X(unary) X(binary) X(cmp) X(variadic) X(mean) X(relu)       \
    X(leaky_relu) X(elu) X(selu) X(gelu) X(hard_sigmoid) X(hard_swish)        \
    X(softplus) X(softsign) X(mish) X(clip) X(where) X(cast) X(cast_like)     \
    X(mod) X(prelu) X(celu) X(thrtanh) X(identity) X(dropout)  \
    X(reduce) X(reduce_l1) X(reduce_l2) X(reduce_sumsq) X(reduce_logsumexp)   \
    X(argminmax) X(softmax) X(layer_norm) X(batch_norm) X(instance_norm)      \
    X(group_norm) X(cumsum) X(topk) X(lp_norm)                                \
    X(shape) X(size) X(reshape) X(flatten) X(squeeze) X(unsqueeze)            \
    X(transpose) X(concat) X(split) X(slice) X(gather) X(gather_elements)     \
    X(gather_nd) X(scatter_nd) X(scatter_elements) X(expand) X(tile) X(pad)   \
    X(constant_of_shape) X(constant) X(range) X(trilu) X(one_hot)             \
    X(nonzero) X(depth_to_space) X(space_to_depth) X(resize) X(grid_sample)   \
    X(matmul) X(gemm) X(einsum) X(conv) X(conv_transpose) X(pool)             \
    X(global_pool) X(dequantize) X(quantize) X(dynamic_quantize)              \
    X(matmul_integer) X(conv_integer) X(qlinear_matmul) X(qlinear_conv)       \
    X(ml_scaler) X(ml_array_feature_extractor) X(ml_binarizer)               \
    X(loop) X(if) X(scan) X(rnn)                                              \
    X(trig) X(shrink) X(bit_shift) X(reduce_logsum) X(hardmax) X(mvn)         \
    X(eye_like) X(lp_pool) X(nll_loss) X(sce_loss) X(center_crop_pad)   \
    X(upsample) X(lrn) X(dft) X(window) X(compress) X(reverse_sequence) \
    X(max_unpool) X(affine_grid) X(nms) X(unique) X(roi_align)  \
    X(col2im) X(det)

/* the argument of onnx_lower_trig */
enum { TRIG_ASIN, TRIG_ACOS, TRIG_SINH, TRIG_COSH, TRIG_ASINH, TRIG_ACOSH, TRIG_ATANH };

#define X(name) LowerFn onnx_lower_##name;
LOWERINGS(X)
#undef X

/* Helpers shared between lowering files. */
Value *imp_unsqueeze(Imp *im, Value *x, const int64_t *axes, int n);
Value *imp_broadcast_to(Imp *im, Value *x, Dim *const *shape, int rank);
Value *imp_matmul(Imp *im, Value *a, Value *b);
/* The convolution the current node's attributes describe (Conv's), no bias. */
Value *imp_conv(Imp *im, Value *x, Value *w);

#endif
