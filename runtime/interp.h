/*
 * interp.h — the reference interpreter (the backend named `interp`).
 *
 * The interpreter executes any core-IR graph on concrete host tensors, for
 * any input shapes, in plain portable C. It is the oracle every compiled
 * backend is checked against, so it favours being obviously correct over
 * being fast. Semantics of every op: doc/ops.md.
 *
 * Shapes are recomputed at run time from the concrete operand shapes (and
 * operand values for dyn_* ops); the declared result types of the graph are
 * checked against them, binding symbols as they become known. Dim-valued
 * attributes are evaluated under that binding.
 *
 *     Tensor in[2] = {...}, out[1];
 *     Diag d = {0};
 *     if (!interp_run(g, in, 2, out, 1, &d))
 *         fprintf(stderr, "%s\n", d.msg);
 *     ...
 *     tensor_free(&out[0]);
 *
 * Floating point: every value is widened exactly to double (f16 and bf16
 * included), computed in double, and rounded once to the result type with
 * round-to-nearest-even. Integers compute in int64 and wrap to the result
 * type.
 */
#ifndef DISC_INTERP_H
#define DISC_INTERP_H

#include "ir/ir.h"

/* Runs g on inputs (in graph input order). Outputs are allocated (owned
 * Tensors) in graph output order; the caller frees them with tensor_free.
 * Returns false with a message in d (naming the op / input / dim) on any
 * error; never aborts on bad input. On failure every output is empty. */
bool interp_run(Graph *g, const Tensor *inputs, int ninputs, Tensor *outputs, int noutputs, Diag *d);

/* Runs one op on operand tensors with the symbols bound to symval (nsyms
 * entries, indexed by symbol id); results are allocated into out. Compiled
 * backends use it for the ops they run on the host. */
bool interp_run_op(Graph *g, const Op *op, const int64_t *symval, int nsyms, const Tensor *const *in,
                   Tensor *out, Diag *d);

/* op of a compiled model on the host (hostop.c): the operands are bufs[0,
 * nin) with the dims their types give under syms; each result r goes to
 * run memory of rt (a DiscRt) at bufs[nin + r], its shape to out_shapes[r].
 * Returns 0, or -1 with the message in rt. */
int32_t interp_host_op(void *rt, Graph *g, const Op *op, void **bufs, const int64_t *syms, int nsyms,
                       int64_t (*out_shapes)[MAX_RANK]);

/* How loop and if run a region: region r of op on in (nin tensors, the
 * region's inputs), its outputs allocated (owned) into out. The
 * interpreter's own runs it through interp_run; a compiled backend passes
 * one that calls the region's compiled code (codegen/exec.c), so that the
 * loop's driving (trip count, condition, carried values, stacking) is this
 * one code for every backend. */
typedef bool InterpRegionFn(void *ctx, const Op *op, int r, const Tensor *in, int nin, Tensor *out, int nout,
                            Diag *d);
/* interp_run_op with the regions of a loop or if run by region(ctx, ...). */
bool interp_run_op_regions(Graph *g, const Op *op, const int64_t *symval, int nsyms, const Tensor *const *in,
                           Tensor *out, Diag *d, InterpRegionFn *region, void *region_ctx);
/* interp_host_op with the regions of a loop or if run by fn(ctx, ...). */
int32_t interp_host_op_regions(void *rt, Graph *g, const Op *op, void **bufs, const int64_t *syms, int nsyms,
                               int64_t (*out_shapes)[MAX_RANK], InterpRegionFn *fn, void *ctx);

/* The maths of a unary or binary elementwise op on float operands, as the
 * interpreter computes each element in double (before rounding to the
 * result's dtype). False if k is not such an op or not defined on floats.
 * Other code that needs an op's value (the activation matcher in
 * codegen/hostlib.c) calls these rather than keeping its own copy. */
bool interp_unary_f(OpKind k, double x, double *r);
bool interp_binary_f(OpKind k, double a, double b, double *r);

/* Half-precision conversions, round-to-nearest-even (NaN stays NaN, overflow
 * gives infinity). Exact widening to double. */
uint16_t interp_f16_from_double(double v);
uint16_t interp_bf16_from_double(double v);
double interp_f16_to_double(uint16_t h);
double interp_bf16_to_double(uint16_t h);

/* Element i of t as a double or an int64 (floats truncate toward zero,
 * saturating, NaN gives 0), and stores with the conversion rules of
 * `convert` (doc/ops.md). Useful to tests and other backends' checkers. */
double interp_load_f(const Tensor *t, size_t i);
int64_t interp_load_i(const Tensor *t, size_t i);
void interp_store_f(Tensor *t, size_t i, double v);
void interp_store_i(Tensor *t, size_t i, int64_t v);

#endif
