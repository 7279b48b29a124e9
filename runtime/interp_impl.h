/*
 * interp_impl.h — internals shared by the interpreter's files: the run
 * state, attribute and shape helpers, the n-d index iterator, and the
 * kernel of each op family.
 *
 *   interp.c         the driver: inputs, symbol binding, liveness, checks
 *   interp_num.c     dtype loads/stores, f16/bf16, helpers
 *   interp_elem.c    unary, binary, cmp, select, convert
 *   interp_move.c    broadcast, reshape, transpose, slice, reverse, concat,
 *                    pad, iota, shape ops, const
 *   interp_index.c   gather*, scatter*, nonzero
 *   interp_resize.c  resize
 *   interp_reduce.c  reduce, argmax/argmin, cumsum, topk
 *   interp_lib.c     dot, conv, conv_transpose, pool
 *   interp_region.c  loop, if (each region runs through interp_run)
 *   interp_detect.c  nms
 *
 * A kernel reads its operands, computes the result shapes, allocates the
 * results (interp_alloc) and fills them. It reports errors through
 * interp_fail, which prefixes the op's name.
 */
#ifndef DISC_INTERP_IMPL_H
#define DISC_INTERP_IMPL_H

#include "runtime/interp.h"

typedef struct Interp {
    Graph *g;
    Diag *d;
    const Op *op;     /* the op being run, for messages */
    int64_t *symval;  /* indexed by symbol id */
    bool *symset;
    int *symfrom;     /* graph input that bound the symbol, or -1 */
    int nsyms;
    DimEnv env;
    char **names;     /* the printer's value names, made on the first error */
    InterpRegionFn *region; /* how loop and if run regions; NULL: interp_run */
    void *region_ctx;
} Interp;

typedef bool InterpFn(Interp *ip, const Op *op, const Tensor *const *in, Tensor *out);

/* ---- messages, attributes, allocation (interp.c) --------------------- */

/* Formats "<op>: <message>" into the Diag; returns false. */
bool interp_fail(Interp *ip, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same with a kind (interp_fail's is DIAG_MODEL); interp_oom: out of memory. */
bool interp_failk(Interp *ip, DiagKind k, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
bool interp_oom(Interp *ip);
/* `%y = reshape`, or `op "node" (reshape)` when the op has a source name. */
void interp_op_label(Interp *ip, const Op *op, char *buf, size_t size);
/* `%y` as the printer names it. */
void interp_value_label(Interp *ip, const Value *v, char *buf, size_t size);
/* Required attributes; false (with a message) if absent or of a wrong kind. */
bool interp_attr_int(Interp *ip, const char *name, int64_t *v);
bool interp_attr_ints(Interp *ip, const char *name, const int64_t **v, int *n);
bool interp_attr_str(Interp *ip, const char *name, const char **s);
/* Evaluates a dims attribute into v (at most cap entries). */
bool interp_attr_dims(Interp *ip, const char *name, int64_t *v, int cap, int *n);
/* Normalises an axis in [-rank, rank) to [0, rank). */
bool interp_axis(Interp *ip, const char *what, int64_t a, int rank, int *out);
bool interp_alloc(Interp *ip, Tensor *t, DType dt, int rank, const int64_t *shape);
/* Reads an integer tensor of rank <= 1 (operand number k) into v. */
bool interp_read_ints(Interp *ip, const Tensor *t, int k, int64_t *v, int cap, int *n);

/* ---- numbers (interp_num.c) ------------------------------------------- */

/* Float → integer type: NaN gives 0, truncates, saturates. */
int64_t interp_f2i(DType to, double v);
/* Wraps v to the integer type (two's complement), or bool: v != 0. */
int64_t interp_wrap(DType to, int64_t v);
void interp_strides(int rank, const int64_t *shape, int64_t *st);
/* x [N, C, s...] as [N, s..., C] (to_last), or back. */
bool interp_move_channels(Interp *ip, const Tensor *x, bool to_last, Tensor *out);
bool interp_block_channels(Interp *ip, const Tensor *x, int64_t b, bool to_blocked, int64_t c, Tensor *out);
size_t interp_numel(int rank, const int64_t *shape);
/* numpy broadcasting of n tensors; false with a message if incompatible. */
bool interp_bcast_shape(Interp *ip, const Tensor *const *ts, int n, int *rank, int64_t *shape);
/* Element strides of t seen through a broadcast to (rank, shape). */
void interp_bcast_strides(const Tensor *t, int rank, const int64_t *shape, int64_t *st);

/* Walks the indices of a row-major shape, keeping one element offset per
 * operand (strides in elements, 0 for broadcast axes). */
enum { ITER_MAX_OPS = 4 };
typedef struct NdIter {
    int rank, nops;
    int64_t shape[MAX_RANK], idx[MAX_RANK];
    int64_t st[ITER_MAX_OPS][MAX_RANK];
    int64_t off[ITER_MAX_OPS];
} NdIter;
void nditer_init(NdIter *it, int rank, const int64_t *shape);
void nditer_add(NdIter *it, const int64_t *strides);
void nditer_next(NdIter *it);

/* ---- sorting (interp_reduce.c) ---------------------------------------- */

/* A value and its position: f for floats, i for integers, idx the index. */
typedef struct InterpKey {
    double f;
    int64_t i;
    int64_t idx;
} InterpKey;
/* qsort order of topk's largest first: by f descending, NaN above every
 * number, ties by the lower idx (nms takes its candidates so). */
int interp_key_f_desc(const void *pa, const void *pb);

/* ---- kernels ----------------------------------------------------------- */

InterpFn interp_unary, interp_binary, interp_cmp, interp_select, interp_convert;
InterpFn interp_broadcast, interp_dyn_broadcast, interp_reshape, interp_dyn_reshape;
InterpFn interp_transpose, interp_slice, interp_dyn_slice, interp_reverse, interp_concat;
InterpFn interp_pad, interp_dyn_pad, interp_iota, interp_dyn_iota;
InterpFn interp_gather, interp_gather_elements, interp_gather_nd;
InterpFn interp_scatter_elements, interp_scatter_nd, interp_nonzero;
InterpFn interp_resize, interp_dyn_resize, interp_dyn_resize_scales;
InterpFn interp_reduce, interp_dyn_reduce, interp_arg, interp_cumsum, interp_topk;
InterpFn interp_dot, interp_conv, interp_conv_transpose, interp_pool;
InterpFn interp_dim, interp_shape_of, interp_shape_const, interp_const;
InterpFn interp_nms;
InterpFn interp_loop, interp_if;


#endif
