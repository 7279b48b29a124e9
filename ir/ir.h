/*
 * ir.h — the disc intermediate representation.
 *
 * Everything that later stages read and write lives here:
 *
 *   Arena   one bump allocator per graph; every IR object of that graph comes
 *           from it and is freed with it (arena.c).
 *   Dim     a symbolic dimension: a hash-consed expression over integer
 *           constants and named symbols, kept in one canonical form so that
 *           equal expressions are the same pointer (dim.c).
 *   DType   element types; Type is a dtype plus a list of Dims (type.c).
 *   OpKind  the core op set, declared once in ops.def (op.c).
 *   Graph   SSA values and ops in program order, graph inputs and outputs,
 *           constants held by reference (graph.c).
 *
 * Builders (build.c) create ops and infer their result types through the
 * op's rule (infer.c); the verifier (verify.c) checks a whole graph; the
 * printer (print.c) and parser (parse.c) move graphs to and from the text
 * format described in doc/ir.md.
 *
 * Errors: functions that can fail on user input return NULL or false and
 * leave a message in the graph (graph_error) or in a caller's Diag; they
 * never abort. Internal invariants use assert.
 */
#ifndef DISC_IR_H
#define DISC_IR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ------------------------------------------------------------------ */
/* Diagnostics                                                          */

enum { DIAG_MAX = 1024 };

struct Arena;

/* What went wrong, for callers that must decide something (a status code,
 * an exit code): they read the kind, never the message. */
typedef enum DiagKind {
    DIAG_NONE,        /* no error */
    DIAG_PARSE,       /* the input cannot be read as IR text or ONNX */
    DIAG_MODEL,       /* a model that is invalid: types, attributes, the verifier,
                         a contradiction in its shapes (diag_set's kind) */
    DIAG_UNSUPPORTED, /* a valid model that disc cannot compile: an op, a dtype */
    DIAG_SHAPE,       /* run-time inputs whose shapes or dtypes the model rejects */
    DIAG_ARG,         /* a caller's bad argument: a count, a too-small buffer */
    DIAG_RESOURCE,    /* out of memory, a file that cannot be read or written,
                         a library that failed */
    DIAG_INTERNAL,    /* a bug in disc: generated code that does not verify */
} DiagKind;

/* Where the error is, when it is about a place in a model. */
typedef struct DiagLoc {
    char file[256];   /* the model or IR file; "" if none */
    int line, col;    /* IR text, 1-based; 0 if unknown */
    int node;         /* ONNX: the node's index + 1; 0 if none */
} DiagLoc;

typedef struct Diag {
    char msg[DIAG_MAX]; /* the first error, already formatted */
    DiagKind kind;
    DiagLoc loc;
    bool set;
} Diag;

/* Records the first error only; later ones are dropped. Returns false so a
 * caller can write `return diag_set(d, ...);`. diag_set records kind
 * DIAG_MODEL; diag_setk the kind given; diag_oom "error: out of memory" as
 * DIAG_RESOURCE. */
bool diag_set(Diag *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool diag_setk(Diag *d, DiagKind k, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
bool diag_oom(Diag *d);
/* Records from's error (message, kind, location) in d, if d has none yet. */
bool diag_copy(Diag *d, const Diag *from);
/* Sets the location of the error just recorded in d (file may be NULL). */
void diag_locate(Diag *d, const char *file, int line, int col, int node);
/* For code that knows an allocation failed: the error in d (or, if d has
 * none, "out of memory") is a resource error, since a NULL from a failed
 * allocation can surface as any other error first, or as none. Returns
 * false. diag_arena_failed does so if arena a failed, and returns whether
 * it did. */
bool diag_blame_memory(Diag *d);
bool diag_arena_failed(Diag *d, const struct Arena *a);
/* The kind's name: "parse", "model", "unsupported", "shape", "argument",
 * "resource", "internal" ("none"). */
const char *diag_kind_name(DiagKind k);

/* ------------------------------------------------------------------ */
/* Arena                                                                */

typedef struct ArenaBlock ArenaBlock;

typedef struct Arena {
    ArenaBlock *head; /* newest block first */
    size_t used;      /* bytes handed out, for statistics */
    bool failed;      /* an allocation failed: an error that follows is a
                         resource error, whatever it looks like (a NULL dim
                         reads as an overflow) */
} Arena;

void arena_init(Arena *a);
void arena_free(Arena *a);
/* Zeroed, 16-byte aligned memory; NULL (and a->failed) only if malloc
 * fails or the size overflows. */
void *arena_alloc(Arena *a, size_t size);
/* bytes (rounded up to 4 KiB), 2 MiB-aligned and advised as transparent
 * huge pages (one fault, and one TLB entry, per whole 2 MiB): for large
 * buffers (weights, packed copies, a run's memory); NULL if it cannot;
 * free() releases it (arena.c) */
void *alloc_huge(size_t bytes);
enum { HUGE_PAGE = 2 << 20 };
/* n*size with overflow check; NULL on overflow or out of memory. */
void *arena_array(Arena *a, size_t n, size_t size);
char *arena_strdup(Arena *a, const char *s);
char *arena_strndup(Arena *a, const char *s, size_t n);
char *arena_printf(Arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Overflow-checked size arithmetic: return false on overflow. */
bool size_mul(size_t a, size_t b, size_t *out);
bool size_add(size_t a, size_t b, size_t *out);

/* ------------------------------------------------------------------ */
/* Symbolic dimensions                                                  */

typedef enum DimKind {
    DIM_CONST,    /* c */
    DIM_SYM,      /* a named symbol */
    DIM_ADD,      /* c + args[0] + ... ; args are terms, n >= 1 */
    DIM_MUL,      /* c * args[0] * ... ; args are atoms, sorted, n >= 1 */
    DIM_FLOORDIV, /* floordiv(args[0], args[1]) */
    DIM_CEILDIV,  /* ceildiv(args[0], args[1]) */
    DIM_MOD,      /* mod(args[0], args[1]), floored: result has b's sign */
    DIM_MIN,      /* min(args[0], args[1]) */
    DIM_MAX,      /* max(args[0], args[1]) */
} DimKind;

typedef enum SymOrigin {
    SYM_INPUT,   /* a dim of a graph input (the default) */
    SYM_DATA,    /* known only after a kernel ran (NonZero, TopK's k, ...) */
    SYM_USER,    /* introduced by a user hint */
    SYM_DERIVED, /* placeholder made by a builder, resolved by shape analysis */
} SymOrigin;

enum { DIM_INF = INT64_MAX }; /* an unbounded upper bound */

typedef struct Dim Dim;
struct Dim {
    DimKind kind;
    int n;            /* number of args */
    int64_t c;        /* CONST: value; ADD: constant term; MUL: coefficient */
    Dim **args;       /* see DimKind */
    uint32_t hash;
    int id;           /* creation order within the context; SYM: symbol index */
    uint64_t symbits; /* bit id % 64 of every symbol the dim mentions */
    uint32_t tsize;   /* nodes of the dim read as a tree (saturating): what
                         printing or evaluating it walks */
    /* symbols only */
    const char *name;
    int64_t lo, hi;   /* known bounds, inclusive; hi == DIM_INF if unknown;
                         other nodes: their bounds as last computed */
    SymOrigin origin;
    uint32_t bepoch;  /* not a symbol: lo and hi hold for this epoch of
                         dim_sym_set calls (0: never computed) */
    Dim *next;        /* hash chain */
};

/* Owns the intern table of one graph; allocates from that graph's arena
 * (whose `failed` also records a failed allocation of the context's own
 * scratch memory: a NULL dim then means out of memory, not an overflow). */
typedef struct DimCtx {
    Arena *arena;
    Dim **table;      /* open hash chains */
    int cap, count;
    Dim **syms;       /* every symbol, in creation order */
    int nsyms, capsyms;
    int fresh;        /* counter for fresh symbol names */
    bool rounding;    /* inside lincomb's rounding rule (no nesting) */
} DimCtx;

void dim_ctx_init(DimCtx *cx, Arena *a);

Dim *dim_const(DimCtx *cx, int64_t c);
/* The symbol with this name, created (origin SYM_INPUT, bounds [1, inf)) if
 * new. Equal names give equal pointers. */
Dim *dim_sym(DimCtx *cx, const char *name);
/* A new symbol with a name no other symbol has ("_1", "_2", ...). */
Dim *dim_sym_fresh(DimCtx *cx, SymOrigin origin);
Dim *dim_sym_find(DimCtx *cx, const char *name); /* NULL if none */
/* Sets a symbol's bounds and origin (before dims that use it are built). */
void dim_sym_set(Dim *sym, int64_t lo, int64_t hi, SymOrigin origin);
/* Copying dims into another context (graph_clone): dim_ctx_copy_syms
 * creates from's symbols in the empty context to, in order, with their
 * names, bounds and origins (symbol i is symbol i), and takes its counter
 * of fresh names; dim_copy is then d's expression in to, memo (from->count
 * zeroed entries) keeping the copies made. false / NULL if out of memory. */
bool dim_ctx_copy_syms(DimCtx *to, const DimCtx *from);
Dim *dim_copy(DimCtx *to, const Dim *d, Dim **memo);

/* Arithmetic, always returning the canonical interned form. The caller
 * guarantees divisors are non-zero where they are constants; constant
 * folding that would overflow yields NULL (see dim_eval for run time). */
Dim *dim_add(DimCtx *cx, Dim *a, Dim *b);
Dim *dim_sub(DimCtx *cx, Dim *a, Dim *b);
Dim *dim_mul(DimCtx *cx, Dim *a, Dim *b);
Dim *dim_neg(DimCtx *cx, Dim *a);
Dim *dim_floordiv(DimCtx *cx, Dim *a, Dim *b);
Dim *dim_ceildiv(DimCtx *cx, Dim *a, Dim *b);
Dim *dim_mod(DimCtx *cx, Dim *a, Dim *b);
Dim *dim_min(DimCtx *cx, Dim *a, Dim *b);
Dim *dim_max(DimCtx *cx, Dim *a, Dim *b);
Dim *dim_addc(DimCtx *cx, Dim *a, int64_t c);
Dim *dim_mulc(DimCtx *cx, Dim *a, int64_t c);
/* The greatest common divisor of a and b (gcd(a, 0) = a). */
uint64_t dim_gcd(uint64_t a, uint64_t b);

/* false for NULL (a dim op that failed), as dim_* take NULL operands */
static inline bool dim_is_const(const Dim *d) { return d && d->kind == DIM_CONST; }
static inline bool dim_is(const Dim *d, int64_t c) { return d && d->kind == DIM_CONST && d->c == c; }

/* Known bounds of an expression by interval arithmetic over symbol bounds. */
void dim_bounds(const Dim *d, int64_t *lo, int64_t *hi);
/* A total, structural order (independent of creation order); 0 iff equal. */
int dim_cmp(const Dim *a, const Dim *b);

/* A binding of symbols to values, indexed by Dim.id of the symbol. */
typedef struct DimEnv {
    const int64_t *val;
    const bool *bound; /* NULL: every symbol below n is bound */
    int n;
} DimEnv;

typedef enum DimEvalStatus {
    DIM_OK,
    DIM_UNBOUND,   /* a symbol had no value */
    DIM_OVERFLOW,  /* int64 overflow */
    DIM_DIVZERO,   /* division or mod by zero */
} DimEvalStatus;

DimEvalStatus dim_eval(const Dim *d, const DimEnv *env, int64_t *out);
const char *dim_eval_status_str(DimEvalStatus s);

/* Prints the canonical text form ("3*S + 1", "floordiv(S, 2)"). */
void dim_print(FILE *f, const Dim *d);
/* Same, into buf (always NUL-terminated); returns the full length. */
int dim_snprint(char *buf, size_t size, const Dim *d);

/* ------------------------------------------------------------------ */
/* Types                                                                */

#define DTYPES(X)          \
    X(F32, "f32", 4)       \
    X(F16, "f16", 2)       \
    X(BF16, "bf16", 2)     \
    X(F64, "f64", 8)       \
    X(I8, "i8", 1)         \
    X(U8, "u8", 1)         \
    X(I32, "i32", 4)       \
    X(I64, "i64", 8)       \
    X(BOOL, "bool", 1)     \
    X(I16, "i16", 2)       \
    X(U16, "u16", 2)       \
    X(U32, "u32", 4)       \
    X(U64, "u64", 8)

typedef enum DType {
#define X(e, s, n) DT_##e,
    DTYPES(X)
#undef X
    DT_COUNT,
    DT_INVALID = -1
} DType;

const char *dtype_name(DType t);
DType dtype_from_name(const char *s, size_t n); /* DT_INVALID if unknown */
size_t dtype_size(DType t);
bool dtype_is_float(DType t);
bool dtype_is_int(DType t); /* i8 u8 i16 u16 i32 u32 i64 u64 */

enum { MAX_RANK = 16 };

typedef struct Type {
    DType dtype;
    int rank;
    Dim **dims; /* arena-owned; rank entries */
} Type;

Type type_make(Arena *a, DType dt, int rank, Dim *const *dims);
bool type_eq(const Type *a, const Type *b); /* same dtype and dim pointers */
/* Product of the dims, canonical. */
/* Same rank and the same dims (dims are hash-consed: equal is identical). */
bool type_same_dims(const Type *a, const Type *b);
Dim *type_numel(DimCtx *cx, const Type *t);
/* Static element count if every dim is constant; false otherwise or on
 * overflow. */
bool type_static_numel(const Type *t, size_t *n);
void type_print(FILE *f, const Type *t); /* f32[B, S, 768] */

/* ------------------------------------------------------------------ */
/* Ops                                                                  */

typedef enum OpCat {
    CAT_UNARY,    /* elementwise, one operand */
    CAT_BINARY,   /* elementwise, two operands, numpy broadcasting */
    CAT_ELEM,     /* other elementwise (select, convert, compare) */
    CAT_REDUCE,   /* reductions along axes */
    CAT_MOVE,     /* data movement: reshape, transpose, slice, gather ... */
    CAT_SHAPE,    /* shape ops: dim, shape_of, int64 scalars */
    CAT_LIB,      /* compute-bound, handled by libraries: dot, conv */
    CAT_CONST,    /* constants */
    CAT_MISC,
} OpCat;

enum { VARIADIC = -1 };
enum { MAX_RESULTS = 64 }; /* results of one op (loop and if have many) */

typedef struct Graph Graph;
typedef struct Op Op;
typedef struct Value Value;

/* Result-type rule of an op (infer.c). Fills out[0..nout-1] from the op's
 * operands and attributes; a NULL dim in a result means "not determined by
 * the operands" (the verifier accepts any declared dim there). Returns false
 * with a message in d if the operands or attributes are invalid. */
typedef bool InferFn(Graph *g, const Op *op, Type *out, Diag *d);

#define OP(e, name, nin, nout, cat, attrs, infer) InferFn infer;
#include "ops.def"

typedef enum OpKind {
#define OP(e, name, nin, nout, cat, attrs, infer) OP_##e,
#include "ops.def"
    OP_COUNT
} OpKind;

/* The elementwise ops again, numbered among themselves: a switch over
 * UnaryOp (BinaryOp) without a default is checked by the compiler to name
 * every one (-Wswitch). op_unary / op_binary map an OpKind to them. */
typedef enum UnaryOp {
#define UNARY(e, name, dtypes) UN_##e,
#include "ops.def"
    UN_COUNT
} UnaryOp;

typedef enum BinaryOp {
#define BINARY(e, name, dtypes) BIN_##e,
#include "ops.def"
    BIN_COUNT
} BinaryOp;

/* Operand dtypes an elementwise op takes (its row's `dtypes`). */
enum {
    DTS_FLOAT = 1,   /* f32 f16 bf16 f64 */
    DTS_INT = 2,     /* i8 ... u64 */
    DTS_BOOL = 4,
    DTS_TO_BOOL = 8, /* the result is bool (isnan), not the operand's dtype */
    DTS_NUM = DTS_FLOAT | DTS_INT,
    DTS_LOGIC = DTS_INT | DTS_BOOL,
};

typedef enum AttrKind {
    ATTR_INT,    /* int64 */
    ATTR_FLOAT,  /* double */
    ATTR_STR,    /* string (also enums: the schema lists allowed words) */
    ATTR_INTS,   /* list of int64 */
    ATTR_FLOATS, /* list of double */
    ATTR_DIMS,   /* list of Dim* */
    ATTR_DTYPE,  /* a DType */
} AttrKind;

/* One parsed entry of an op's attribute schema (op.c). The schema is a
 * string in ops.def, e.g. "axes:ints keepdims:int? kind:sum|max|min".
 * "?" marks an optional attribute; "a|b|c" an enum stored as ATTR_STR. */
typedef struct AttrSpec {
    const char *name;
    AttrKind kind;
    bool optional;
    const char *enums; /* "sum|max|min" for enums, else NULL */
} AttrSpec;

typedef struct OpInfo {
    const char *name; /* text name: "add", "reduce" */
    int nin, nout;    /* counts, or VARIADIC */
    OpCat cat;
    const char *schema;
    InferFn *infer;
    AttrSpec *attrs;  /* parsed schema */
    int nattrs;
    int sub;          /* UnaryOp or BinaryOp of a UNARY or BINARY row, else -1 */
    unsigned dtypes;  /* DTS_* of a UNARY or BINARY row, else 0 */
} OpInfo;

const OpInfo *op_info(OpKind k);
/* k as a UnaryOp (BinaryOp), or UN_COUNT (BIN_COUNT) if it is not one. */
UnaryOp op_unary(OpKind k);
BinaryOp op_binary(OpKind k);
/* Whether elementwise op k takes operands of dtype dt (its `dtypes`), and
 * the dtype of its result. */
bool op_takes_dtype(OpKind k, DType dt);
DType op_result_dtype(OpKind k, DType dt);
OpKind op_kind_from_name(const char *s, size_t n); /* OP_COUNT if unknown */
/* The spec of attribute `name` for op kind k, or NULL. */
const AttrSpec *op_attr_spec(OpKind k, const char *name);

typedef struct Attr {
    const char *name;
    AttrKind kind;
    int n; /* list length */
    union {
        int64_t i;
        double f;
        const char *s;
        DType dt;
        int64_t *ints;
        double *floats;
        Dim **dims;
    };
} Attr;

/* A constant's payload. Large data is referenced, not copied: data may
 * point into an mmap'd model file owned by the graph (graph_keep). */
typedef enum ConstSrc {
    CONST_INLINE,  /* data in the arena, parsed or built */
    CONST_EXTERN,  /* data owned elsewhere, kept alive by the graph */
    CONST_FILE,    /* file<"path", offset> in the text format; data mapped */
    CONST_ELIDED,  /* printed without data; cannot be executed */
} ConstSrc;

typedef struct Const {
    ConstSrc src;
    const void *data;  /* nbytes of little-endian elements, or NULL if elided */
    size_t nbytes;
    const char *path;  /* CONST_FILE */
    int64_t offset;    /* CONST_FILE */
    const void *hash_of; /* when equal to data: hash is store_hash(data,
                            nbytes, nbytes), known to the loader (ir/store.h) */
    uint64_t hash;
} Const;

struct Value {
    int id;            /* index in graph order; reassigned by graph_renumber */
    const char *name;  /* text name without '%', NULL: printed as its id */
    Type type;
    Op *def;           /* producing op; NULL for graph inputs */
    int idx;           /* result index in def */
};

struct Op {
    OpKind kind;
    int nin, nout;
    Value **in;
    Value **out;
    Attr *attrs;       /* nattrs entries, in schema order */
    int nattrs;
    Const *cst;        /* OP_CONST only */
    const char *src;   /* where it came from (ONNX node name), or NULL */
    int line;          /* line in the IR text it was parsed from, or 0 */
    Graph **regions;   /* loop: the body; if: then, else (region.c) */
    int nregions;
    Op *prev, *next;   /* program order */
    int id;
};

struct Graph {
    Arena arena;
    DimCtx dims;
    const char *name;
    const char *file;  /* the file it was parsed or imported from, or NULL */
    Value **inputs;
    int ninputs, capinputs;
    Value **outputs;
    int noutputs, capoutputs;
    Op *first, *last;
    int nops;
    int nvalues;       /* values ever created, for ids */
    Diag err;          /* the last builder error */
    void **keep;       /* resources freed with the graph (see graph_keep) */
    void (**keep_free)(void *);
    int nkeep, capkeep;
    int refs;          /* graph_free frees at the last reference (graph_ref) */
    int tied_dims;     /* input dims that are another input dim's symbol only
                          because ONNX gave both one dim_param name (doc/onnx.md) */
    const char *store; /* the directory its large weights were mapped from
                          (frontends/onnx/weights.c), where passes may keep
                          the constants they derive from them (ir/store.h);
                          NULL: none */
};

Graph *graph_new(const char *name);
void graph_free(Graph *g);
/* What code that cannot return an error (canon, a codegen helper) does
 * when an allocation for g's sake fails: the graph's arena counts it as
 * its own failure (Arena.failed), and the pipeline, which checks after
 * each pass, stops with a resource error. */
static inline void graph_oom(Graph *g) { g->arena.failed = true; }
const char *graph_error(const Graph *g);
/* Runs fn(p) when the graph is freed (mmap'd files, external buffers). */
bool graph_keep(Graph *g, void *p, void (*fn)(void *));
/* One more reference to g: graph_free drops one, and frees g with the
 * last. Returns g. */
Graph *graph_ref(Graph *g);
/* A deep copy of g to compile (clone.c): the IR in the copy's own arena,
 * ids, names and symbols as in g; constants' data shared, the copy holding
 * a reference to g. NULL (out of memory) with d set. */
Graph *graph_clone(Graph *g, Diag *d);

Value *graph_add_input(Graph *g, const char *name, Type t);
bool graph_add_output(Graph *g, Value *v);
/* A new op appended at the end, with result values of the given types.
 * Low level: no checks (builders and the parser use it). */
Op *graph_append_op(Graph *g, OpKind k, Value *const *in, int nin,
                    const Type *out, int nout);
/* Detaches op from program order (its results must be unused). */
void graph_remove_op(Graph *g, Op *op);
/* Moves op to just before `before` (NULL: to the end). */
void graph_move_op(Graph *g, Op *op, Op *before);
/* Replaces every use of `from` by `to` (operands and outputs). The ops are
 * in program order: uses are sought after from's def, an op of g (or from
 * the first op, for a graph input). */
void graph_replace_uses(Graph *g, Value *from, Value *to);
/* Number of operands (and graph outputs) that use v. */
int graph_count_uses(const Graph *g, const Value *v);
void graph_renumber(Graph *g);

#define graph_for_each_op(g, op) for (Op *op = (g)->first; op; op = op->next)

/* Attributes of an op. */
const Attr *op_attr(const Op *op, const char *name); /* NULL if absent */
int64_t op_attr_int(const Op *op, const char *name, int64_t dflt);
double op_attr_float(const Op *op, const char *name, double dflt);
const char *op_attr_str(const Op *op, const char *name, const char *dflt);
/* Sets attribute a->name of op (replacing an existing one, keeping schema
 * order), copying strings and lists into the graph arena. */
void op_set_attr(Graph *g, Op *op, const Attr *a);

/* ------------------------------------------------------------------ */
/* Regions (region.c): the bodies of loop and if. A region is a Graph of
 * its own, with its own arena, symbols and value names; it sees nothing of
 * the enclosing graph but its inputs: every outer value it uses is an
 * explicit operand of the op (doc/ir.md, "Regions"). The op's graph owns
 * its regions and frees them with itself.                                */

/* Appends region r to op (of graph g), which takes ownership of r. */
bool op_add_region(Graph *g, Op *op, Graph *r);
/* The copy of dim d (of a region's context) in context `to`, where each
 * symbol of d is replaced by map(ctx, sym); NULL if one maps to NULL. */
Dim *dim_translate(DimCtx *to, const Dim *d, Dim *(*map)(void *ctx, const Dim *sym), void *ctx);
/* loop operands: trip count, condition, carried values, invariants. */
/* The verifier's check of op's regions (each verified as a graph). */
bool region_verify(const Op *op, Diag *d);
static inline int loop_ncarried(const Op *op) { return (int)op_attr_int(op, "ncarried", 0); }

/* ------------------------------------------------------------------ */
/* Builders (build.c): create an op from operands and attributes, infer
 * and check its result types through its rule, and append it. On error they
 * return NULL, append nothing and leave the message in graph_error(g).    */

/* Attribute list given to the generic builder. */
typedef struct AttrList {
    Attr *v;
    int n, cap;
} AttrList;

/* The generic builder: runs the rule of kind k; result dims the rule leaves
 * undetermined become fresh SYM_DERIVED symbols. */
Op *build_op(Graph *g, OpKind k, Value *const *in, int nin, const Attr *attrs, int nattrs);

/* build_op for loop and if: the op takes the regions (and frees them when
 * it fails); its result count follows from them. */
Op *build_region_op(Graph *g, OpKind k, Value *const *in, int nin, const Attr *attrs, int nattrs,
                    Graph *const *regions, int nregions);

Value *build_unary(Graph *g, OpKind k, Value *x);
Value *build_binary(Graph *g, OpKind k, Value *a, Value *b);
/* dir: "eq" "ne" "lt" "le" "gt" "ge" */
Value *build_cmp(Graph *g, const char *dir, Value *a, Value *b);
Value *build_select(Graph *g, Value *cond, Value *a, Value *b);
Value *build_convert(Graph *g, Value *x, DType to);
Value *build_broadcast(Graph *g, Value *x, Dim *const *shape, int rank, const int64_t *axes);
Value *build_reshape(Graph *g, Value *x, Dim *const *shape, int rank);
Value *build_transpose(Graph *g, Value *x, const int64_t *perm);
Value *build_slice(Graph *g, Value *x, Dim *const *start, Dim *const *limit, const int64_t *stride);
Value *build_concat(Graph *g, Value *const *xs, int n, int64_t axis);
/* kind: "sum" "max" "min" "prod" "mean" */
Value *build_reduce(Graph *g, Value *x, const char *kind, const int64_t *axes, int naxes, bool keepdims);
Value *build_dot(Graph *g, Value *a, Value *b,
                 const int64_t *lbatch, const int64_t *rbatch, int nbatch,
                 const int64_t *lcontract, const int64_t *rcontract, int ncontract);
Value *build_iota(Graph *g, DType dt, Dim *const *shape, int rank, int64_t axis);
/* dim(x, axis) as an i64 scalar; shape_of(x) as i64[rank]. */
Value *build_dim(Graph *g, Value *x, int64_t axis);
Value *build_shape_of(Graph *g, Value *x);
/* A constant; data is copied into the arena if copy, else referenced
 * (the caller keeps it alive, e.g. with graph_keep). */
Value *build_const(Graph *g, Type t, const void *data, size_t nbytes, bool copy);
Value *build_scalar_f32(Graph *g, float v);
Value *build_scalar_i64(Graph *g, int64_t v);

void attrs_add(Graph *g, AttrList *l, const Attr *a); /* shares a's lists */
void attrs_add_int(Graph *g, AttrList *l, const char *name, int64_t v);
void attrs_add_float(Graph *g, AttrList *l, const char *name, double v);
void attrs_add_str(Graph *g, AttrList *l, const char *name, const char *s);
void attrs_add_dtype(Graph *g, AttrList *l, const char *name, DType dt);
void attrs_add_ints(Graph *g, AttrList *l, const char *name, const int64_t *v, int n);
void attrs_add_floats(Graph *g, AttrList *l, const char *name, const double *v, int n);
void attrs_add_dims(Graph *g, AttrList *l, const char *name, Dim *const *v, int n);

/* ------------------------------------------------------------------ */
/* Verifier (verify.c): SSA order, arities, attributes against the schema,
 * result types against the rules. The message names the failing op. */
bool graph_verify(Graph *g, Diag *d);
/* Checks one op's attributes against its schema, and its operand and
 * result counts against the op table. */
bool op_check_attrs(const Op *op, Diag *d);
bool op_check_arity(const Op *op, Diag *d);

/* ------------------------------------------------------------------ */
/* Host tensors: concrete data with concrete shape, used by the reference
 * interpreter, the frontends (ONNX TensorProto files) and the runtime.    */

typedef struct Tensor {
    DType dtype;
    int rank;
    int64_t shape[MAX_RANK];
    void *data;        /* numel * dtype_size bytes, row-major */
    size_t nbytes;
    bool owned;        /* data was malloc'd by tensor_alloc */
} Tensor;

/* Allocates zeroed data; false on overflow or out of memory. */
bool tensor_alloc(Tensor *t, DType dt, int rank, const int64_t *shape);
void tensor_free(Tensor *t);
size_t tensor_numel(const Tensor *t);

/* ------------------------------------------------------------------ */
/* Text format (print.c, parse.c; grammar in doc/ir.md).                 */

typedef struct PrintOpts {
    int inline_max;   /* constants with more elements print as hex (or elided) */
    bool elide;       /* elide large constants instead of printing hex */
    bool full_regions; /* ... but not those inside regions (the AOT object's
                          text, from which its loop and if run) */
} PrintOpts;

void graph_print(FILE *f, const Graph *g, const PrintOpts *o);
/* Parses one graph. filename is used in messages: on error returns NULL and
 * d->msg holds "file:line:col: error: ...\n<line>\n<caret>". */
Graph *graph_parse(const char *src, size_t len, const char *filename, Diag *d);
Graph *graph_parse_file(const char *path, Diag *d);
/* Parses one dim expression ("2*S + floordiv(T, 4)") over g's symbols. */
Dim *dim_parse(Graph *g, const char *text, Diag *d);
/* The names the printer gives to the values of g, indexed by Value.id
 * (with the '%' sigil, quoted where needed); free with graph_value_names_free. NULL if out of memory. */
char **graph_value_names(const Graph *g);
void graph_value_names_free(const Graph *g, char **names);

#endif
