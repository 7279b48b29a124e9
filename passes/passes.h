/*
 * passes.h — analyses and transformations over the IR.
 *
 *   canon.c     canonicalisation: algebraic simplification, constant folding,
 *               common subexpressions, dead code
 *   dimmap.c    substitution of dims (a map from Dim to Dim)
 *   shapeval.c  shape-value propagation: int64 tensors that hold shapes are
 *               tracked element by element as Dims; dyn_* ops whose shape
 *               operands become known turn into their static forms, and
 *               every result type is re-inferred in program order
 *   equal.c     equality analysis: union-find over dims, tensor-size classes,
 *               speculation on implicit broadcasts
 *   hostprog.c  the host shape program: every symbol from the input shapes,
 *               and the checks the inputs must pass
 *   shape.c     the shape-analysis driver and its dump (--stage shape)
 *   constraint.c  facts about symbols, and ISL-backed affine queries
 */
#ifndef DISC_PASSES_H
#define DISC_PASSES_H

#include "ir/ir.h"
#include "passes/constraint.h"

/* ---- dim substitution (dimmap.c) ------------------------------------ */

typedef struct DimMap {
    Dim **key, **val; /* open addressing by pointer */
    int cap, count;
    bool failed;      /* a put ran out of memory: entries are missing */
    uint64_t keybits; /* Dim.symbits of every key (all ones for a constant
                         key): a dim sharing none mentions no key */
} DimMap;

void dimmap_init(DimMap *m);
void dimmap_free(DimMap *m);
/* false (and m->failed) if out of memory: the entry is not added */
bool dimmap_put(DimMap *m, Dim *k, Dim *v);
Dim *dimmap_get(const DimMap *m, const Dim *k); /* NULL if absent */
/* dst (initialised or freed) := a copy of src; false if out of memory
 * (dst then empty and failed) */
bool dimmap_copy(DimMap *dst, const DimMap *src);
/* Rebuilds d with every mapped sub-expression replaced, canonically.
 * NULL only if constant folding overflows. */
Dim *dim_subst(DimCtx *cx, Dim *d, const DimMap *m);
/* Applies the map to every type and dim attribute of the graph. */
bool graph_subst_dims(Graph *g, const DimMap *m);
/* True if sym occurs in d. */
bool dim_mentions(const Dim *d, const Dim *sym);

/* ---- canonicalisation (canon.c) -------------------------------------- */

/* Removes ops whose results are unused; returns the number removed. */
int canon_dce(Graph *g);

/* What canon_run did. */
typedef struct CanonStats {
    int simplified;  /* algebraic rewrites (identities, x*1, double negation, ...) */
    int folded;      /* ops evaluated into constants */
    int cse;         /* ops merged into an equal earlier op */
    int removed;     /* dead ops removed */
    int rounds;      /* walks over the graph, at most 8 */
    int hfused;      /* dots fused horizontally (hfuse.c) */
    int ops_before, ops_after;
} CanonStats;

/* Canonicalises g to a fixed point (bounded): exact algebraic
 * simplification (identity ops such as a reshape or transpose to the same
 * shape or a convert to the same dtype; x*1, x/1, x+(-0.0), x-0.0, integer
 * x+0; neg(neg(x)); lossless convert round trips; transpose of transpose
 * and reshape of reshape as one op), constant folding on the reference
 * interpreter (bounded in size; never for impure ops), common-subexpression
 * elimination (constants by their bytes), and dead-code elimination. Run
 * after shape analysis, when equal dims are equal pointers. st may be NULL.
 * Returns the number of rewrites plus ops removed (0: nothing changed).
 * Two rewrites are not exact: integer products run as f32 ones only where
 * f32 is provably exact, and BatchNormalization after a convolution goes
 * into its weights (canon.c). */
int canon_run(Graph *g, CanonStats *st);
/* False where DISC_FOLD_BN=0 keeps BatchNormalization after a convolution
 * out of its weights (canon.c conv_affine); read once. */
bool canon_folds_bn(void);
/* Horizontal fusion (hfuse.c): dots reading the same x[..., K] against
 * constant f32 matrices [K, N_i] become one dot against them side by side,
 * each result a slice of it. Returns the number of dots fused; the old ones
 * are left dead. canon_run calls it last. */
int canon_hfuse(Graph *g);
/* canon_run(g, NULL). */
int canon_simplify(Graph *g);

/* Channels-last convolutions and pools (layout.c): every 2-D f32 conv and
 * pool of g made channels_last between transposes, and the transposes
 * moved down past the ops they commute with (canon then cancels the pairs
 * that meet). With block > 1, and where every convolution can be,
 * blocked instead: [N, ceildiv(C, block), H, W, block] between the
 * convolutions and pools (layout.c, "blocked layouts"). After shape
 * analysis, before canon. Returns the number of ops made channels-last
 * or blocked (*blocked: the block, or 0), or -1 when out of memory. */
int layout_run(Graph *g, int block, int *blocked);

/* ---- shape analysis -------------------------------------------------- */

typedef enum HostStepKind {
    HS_BIND,    /* sym := dim `axis` of input `input` */
    HS_CHECK,   /* dim `axis` of input `input` must equal `dim` */
    HS_REQUIRE, /* lhs REL rhs must hold (a reshape keeps the count, ...) */
    HS_BCAST,   /* lhs == rhs or lhs == 1 or rhs == 1 (implicit broadcast) */
    HS_GUARD,   /* speculation: lhs == rhs picks the variant without broadcast */
    HS_DATA,    /* sym := dim `axis` of `value` once its op has run */
} HostStepKind;

typedef struct HostStep {
    HostStepKind kind;
    Dim *sym;         /* BIND, DATA */
    Dim *lhs, *rhs;   /* CHECK (lhs: the expected dim), REQUIRE, BCAST, GUARD */
    Rel rel;          /* REQUIRE */
    int input, axis;  /* BIND, CHECK: input index and axis; DATA: axis */
    Value *value;     /* DATA */
    const char *what; /* who asks: "reshape %7", "input \"ids\"" */
} HostStep;

typedef struct HostProg {
    HostStep *steps;
    int n, cap;
} HostProg;

/* Results of evaluating the host program on concrete input shapes. */
typedef struct HostEnv {
    int64_t *val;     /* per symbol id */
    bool *bound;
    bool *guard;      /* per step: the GUARD held */
    int nsyms;
} HostEnv;

typedef struct ShapeOpts {
    const char *const *assume; /* hints such as "S % 8 == 0", "B <= 64" */
    int nassume;
} ShapeOpts;

typedef struct DimClass {
    Dim **dims;
    int n;
    bool speculative; /* holds only under a GUARD */
} DimClass;

typedef struct SizeClass {
    Dim *size;        /* the element count */
    Value **values;
    int n;
} SizeClass;

typedef struct ShapeInfo {
    Graph *g;
    Constraints *cons;
    HostProg prog;
    DimClass *dclass;
    int ndclass;
    SizeClass *sclass;
    int nsclass;
    Arena arena;      /* the analysis' own memory */
} ShapeInfo;

/* Runs shape analysis on g (rewriting it: shape sub-graphs folded, dyn ops
 * made static, equal dims unified) and returns its results. */
ShapeInfo *shape_analyze(Graph *g, const ShapeOpts *o, Diag *d);
void shape_info_free(ShapeInfo *si);
/* The graph followed by the analysis as comments (dcc emit --stage shape). */
void shape_print(FILE *f, const ShapeInfo *si);

/* Shape-value propagation (shapeval.c): returns false on an invalid op.
 * The requirements it speculates (a reshape's shape element taken as
 * written) go to si's host program. */
bool shape_propagate(Graph *g, ShapeInfo *si, Diag *d);

/* Equality analysis (equal.c): fills classes and host-program facts. */
bool shape_equalities(ShapeInfo *si, Diag *d);

/* Host program (hostprog.c). */
/* Appends a step; NULL if out of memory (si->arena.failed: shape_analyze
 * fails). */
HostStep *hostprog_push(ShapeInfo *si, HostStep s);
bool hostprog_build(ShapeInfo *si, Diag *d);
void hostprog_print(FILE *f, const Graph *g, const HostProg *p);
bool hostenv_init(HostEnv *e, const Graph *g, int nsteps);
void hostenv_free(HostEnv *e);
/* Binds every symbol from the input shapes (shapes[i] has the rank of
 * input i) and runs the checks; on a violation returns false with a message
 * naming the input, the dim, the expected relation and the actual values. */
bool hostprog_run(const Graph *g, const HostProg *p, const int64_t *const *shapes, HostEnv *e, Diag *d);
/* The message of REQUIRE or BCAST step `step` where the flow of a
 * compiled backend failed it, from the symbols' values there (syms, by
 * id: the DATA ones a host op bound): false with the message, true if the
 * step holds at those values or is of another kind. */
bool hostprog_explain(const Graph *g, const HostProg *p, int step, const int64_t *syms, Diag *d);
/* Whether op binds a DATA symbol as it runs (a result dim first seen
 * there): only a host op can, so fusion keeps such an op on the host. */
bool hostprog_binds(const HostProg *p, const Op *op);
/* Binds the DATA symbols of `op`'s results from their concrete shapes and
 * runs the checks that were waiting for them. */
bool hostprog_after_op(const Graph *g, const HostProg *p, const Op *op, const int64_t *const *shapes,
                       HostEnv *e, Diag *d);
/* Runs the host program's input checks on concrete input tensors: the
 * documented error for shapes that violate the model's constraints. */
bool shape_check_inputs(const ShapeInfo *si, const Tensor *inputs, int ninputs, Diag *d);
/* A DimEnv over a HostEnv, for dim_eval. */
DimEnv hostenv_dims(const HostEnv *e);

/* ---- fusion planning (fuse.c) ----------------------------------------- */

typedef enum FuseKind {
    FUSE_LOOP,    /* elementwise and index-map ops over one index space */
    FUSE_INPUT,   /* a reduction with the ops that produce its operand */
    FUSE_STITCH,  /* row (or column) reductions and the elementwise work
                     over the same rows, in one kernel (softmax, LayerNorm,
                     RMSNorm, x - mean(x) over axis 0) */
    FUSE_LIBRARY, /* dot / conv / conv_transpose / pool, with the elementwise
                     epilogue the library can fuse (bias, activation, residual) */
    FUSE_OPAQUE,  /* one op run alone (topk, nonzero, scatter, resize, ...) */
    FUSE_SHAPE,   /* constants and shape ops: evaluated on the host */
} FuseKind;

typedef struct Group {
    FuseKind kind;
    int id;
    Op **ops;        /* program order; LIBRARY: the library op first, then
                        its epilogue (the ops after the root) */
    int nops;
    Value **ins;     /* operands defined outside the group */
    int nins;
    Value **outs;    /* results used outside the group or returned; a LOOP
                        group may have several, all of one element count */
    int nouts;
    Op *root;        /* LOOP: the op whose result shape is the index space;
                        INPUT, STITCH: the last reduction; LIBRARY: the
                        library op; OPAQUE: the op */
    const int *over; /* codegen's, for a library call's epilogue kernel: by
                        output, the input whose buffer it is written over in
                        place (the memory plan's in_place), or -1; NULL: none */
    bool placed;     /* codegen's: the outputs' device buffers are set
                        already (Host.dbuf), not to be allocated */
} Group;

typedef struct FusionPlan {
    Graph *g;
    Group *groups;   /* in an execution order */
    int n;
    Arena arena;
} FusionPlan;

/* Groups the ops of an analysed graph into kernels. */
FusionPlan *fuse_plan(ShapeInfo *si, Diag *d);
/* True if resize op is an index map that loop kernels compute (unfused.c):
 * nearest, coord asymmetric, half_pixel or pytorch_half_pixel, and on
 * every axis an integer scale s (resize_scale). On such an axis the source
 * index is exact in integers: x = num / den with (num, den) = (o, s) or
 * (2o + 1 - s, 2s), rounded per `nearest`, clamped to the operand
 * (resize_source in codegen). Others run on the host. */
bool resize_is_map(const Op *op);
/* True if resize op is a linear interpolation that loop kernels compute
 * (unfused.c): mode linear without antialias, a float dtype, a coord mode
 * other than tf_crop_and_resize, and at most RESIZE_LERP_AXES axes whose
 * result is not the operand's length (resize_scale 1): along each of them
 * a result index reads the two source indices around its coordinate
 * (resize_lerp in codegen; the interpreter's taps, interp_resize.c). */
enum { RESIZE_LERP_AXES = 3 };
bool resize_is_lerp(const Op *op);
/* Resize op's scale along axis a where it is an integer whose multiple the
 * result dim is (so an empty operand has an empty result): the `scales`
 * given (up to 2^16), or, with sizes only, result / operand proved equal to
 * 1..16 (the interpreter's result / operand is then that integer); 0
 * otherwise. */
int64_t resize_scale(const Op *op, int a);
/* The kind of group an op forms on its own (unfused.c). */
FuseKind fuse_kind_of(const Op *op);
/* One group per op, in program order (unfused.c): the baseline. */
FusionPlan *fuse_plan_unfused(ShapeInfo *si, Diag *d);
void fuse_plan_free(FusionPlan *p);
/* True if a reduction group (INPUT, STITCH) gets the column template: its
 * reductions are reduces that keep the innermost axis (a sum over axis 0
 * of [N, C], a mean over axis 1 of [B, L, D]), so a block of consecutive
 * columns is read contiguously per reduced index (codegen/kernel.c). Else
 * a reduction group gets the row template. (Codegen refuses a stitch group
 * whose ops read a reduction's result off its column, static dims that
 * happen to be equal; the host flow then splits it up.) */
bool fuse_columns(const Group *g);
/* The plan as text (dcc emit --stage fusion) and as Graphviz. */
void fuse_print(FILE *f, const FusionPlan *p);
void fuse_print_dot(FILE *f, const FusionPlan *p);
const char *fuse_kind_name(FuseKind k);

/* ---- memory planning (memplan.c) --------------------------------------- */

typedef struct MemSlot {
    Dim *bytes;      /* size, 64-byte aligned */
    int first, last; /* groups between which it is in use */
} MemSlot;

typedef struct MemPlan {
    Graph *g;
    int *slot_of;    /* by value id: its slot, or -1 (not planned) */
    MemSlot *slots;  /* one per planned value, laid out in one block per run at
                        the run's sizes (disc_rt_place) */
    int nslots;
    Dim *unplanned_total; /* what the planned values would take without reuse */
    int nlate;       /* values sized by data-dependent symbols: not planned */
    Arena arena;
} MemPlan;

MemPlan *memplan_build(const FusionPlan *fp, ShapeInfo *si, Diag *d);
void memplan_free(MemPlan *mp);
/* The plan as comments; with env, the block size at that binding. */
void memplan_print(FILE *f, const MemPlan *mp, const DimEnv *env);

/* Parses a hint such as "S % 8 == 0", "B <= 64", "S == T" into c. */
bool shape_parse_assume(ShapeInfo *si, const char *text, Diag *d);

#endif
