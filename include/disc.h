/*
 * disc.h — the C API of disc, a dynamic-shape deep-learning compiler.
 *
 * A model is loaded once (ONNX or disc IR text), compiled once, and run at
 * any input shapes the model allows: dims are symbolic (`B`, `S`), the
 * compiled code evaluates them from the inputs on every run.
 *
 *     #include <disc.h>
 *
 *     disc_model *m = disc_load("bert.onnx");
 *     if (!m) { fprintf(stderr, "%s\n", disc_last_error()); return 1; }
 *     disc_options o = disc_default_options();        // backend "cpu"
 *     disc_compiled *c = disc_compile(m, &o);
 *     if (!c) { fprintf(stderr, "%s\n", disc_last_error()); return 1; }
 *
 *     int64_t ids[2 * 13] = {...};
 *     disc_tensor in = {DISC_I64, 2, {2, 13}, ids, sizeof ids};
 *     disc_tensor out = {0};                            // library-allocated
 *     if (disc_run(c, &in, 1, &out, 1) != DISC_OK)
 *         fprintf(stderr, "%s\n", disc_last_error());
 *     ... out.shape, out.data ...
 *     disc_tensor_free(&out);
 *     disc_compiled_free(c);
 *     disc_model_free(m);
 *
 * Errors: every call that can fail returns NULL or a status other than
 * DISC_OK and leaves a one-line message for disc_last_error() and its
 * status for disc_last_status() (per thread; out of memory is
 * DISC_ERR_RUNTIME, never an abort).
 * Nothing aborts on bad input: a malformed model, an unsupported op, or an
 * input whose shape violates the model's constraints is a returned error
 * naming the place (the node, the input and the dim).
 *
 * Threads: a compiled model may be run from several threads at once.
 */
#ifndef DISC_H
#define DISC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DISC_VERSION "0.1.0"
#define DISC_MAX_RANK 16

typedef enum disc_status {
    DISC_OK = 0,
    DISC_ERR_INPUT = 1,       /* a bad model, bad IR text, an unsupported op */
    DISC_ERR_SHAPE = 2,       /* input shapes or dtypes the model does not accept */
    DISC_ERR_ARG = 3,         /* a bad argument to the API */
    DISC_ERR_RUNTIME = 4,     /* out of memory, a file that cannot be read, a library failure */
    DISC_ERR_INTERNAL = 5,    /* a bug in disc */
} disc_status;

/* Element types, in the order of the IR's dtypes. */
typedef enum disc_dtype {
    DISC_F32, DISC_F16, DISC_BF16, DISC_F64, DISC_I8, DISC_U8, DISC_I32, DISC_I64, DISC_BOOL,
} disc_dtype;

typedef struct disc_tensor {
    disc_dtype dtype;
    int rank;
    int64_t shape[DISC_MAX_RANK];
    void *data;     /* row-major elements */
    size_t nbytes;  /* bytes at data */
    int owned;      /* set by disc_run for library-allocated outputs */
} disc_tensor;

typedef struct disc_model disc_model;       /* a loaded model */
typedef struct disc_compiled disc_compiled; /* a model compiled for a backend */

typedef struct disc_options {
    const char *backend;        /* "cpu" (native code, the default), "cuda" (an NVIDIA GPU:
                                   device 0 or $DISC_CUDA_DEVICE; the kernels through NVRTC,
                                   the host flow on the CPU; disc_run takes and returns host
                                   tensors) or "interp" */
    int opt_level;              /* 0..3 (default 3) */
    int threads;                /* 0: every core */
    const char *const *assume;  /* facts about the symbols: "S % 8 == 0", "B <= 64" */
    int nassume;
    int verbose;                /* per-stage compile times on stderr */
    const char *cpu;            /* the CPU to compile for, as LLVM names it: "x86-64" (SSE2),
                                   "x86-64-v3" (AVX2), "x86-64-v4" or "skylake-avx512" (AVX-512);
                                   NULL or "native": the environment's DISC_CPU, else this
                                   machine. An unknown name fails disc_compile. */
    /* Added in 0.1.0 after the fields above (code built against the shorter
     * struct gets them as zero only through disc_default_options): */
    int no_cache;               /* 1: compile from scratch, neither reading nor writing the
                                   on-disk cache of compiled code (0, the default: a model
                                   compiled before with the same options for the same CPU by
                                   the same disc build links its cached code) */
    const char *cache_dir;      /* that cache's directory; NULL: $DISC_CACHE_DIR, else
                                   $HOME/.cache/disc/jit */
} disc_options;

const char *disc_version(void);
const char *disc_last_error(void);
/* The status of that error: what disc_run returned, or, after a call that
 * returns NULL (disc_load, disc_compile), why it did. */
disc_status disc_last_status(void);
disc_options disc_default_options(void);

/* Loads an ONNX model (path ending in .onnx) or disc IR text. */
disc_model *disc_load(const char *path);
/* Loads IR text from memory; name is used in messages. */
disc_model *disc_load_ir(const char *text, size_t len, const char *name);
void disc_model_free(disc_model *m);

/* Ops in the loaded (imported) graph. */
int disc_model_op_count(const disc_model *m);
/* The signature: names, dtypes and symbolic dims ("B", "S", "768"). */
int disc_model_num_inputs(const disc_model *m);
int disc_model_num_outputs(const disc_model *m);
const char *disc_model_input_name(const disc_model *m, int i);
const char *disc_model_output_name(const disc_model *m, int i);
disc_dtype disc_model_input_dtype(const disc_model *m, int i);
disc_dtype disc_model_output_dtype(const disc_model *m, int i);
int disc_model_input_rank(const disc_model *m, int i);
int disc_model_output_rank(const disc_model *m, int i);
/* Writes dim `axis` as text into buf; returns its length, -1 if out of range. */
int disc_model_input_dim(const disc_model *m, int i, int axis, char *buf, size_t size);
int disc_model_output_dim(const disc_model *m, int i, int axis, char *buf, size_t size);

/* Compiles once for every shape. NULL options: disc_default_options(). */
disc_compiled *disc_compile(const disc_model *m, const disc_options *o);
void disc_compiled_free(disc_compiled *c);
/* Number of kernels the compiled model launches per run (0 for "interp"). */
int disc_compiled_kernel_count(const disc_compiled *c);

/* Runs on inputs in signature order. An output whose data is NULL is
 * allocated by the library (owned = 1; free it with disc_tensor_free); one
 * whose data is set must be large enough (nbytes) or the run fails with
 * DISC_ERR_ARG and the size needed in the message, and its nbytes may not
 * overlap an input's data or another output's (DISC_ERR_ARG: the compiled
 * kernels take the buffers they read and write for distinct memory). */
disc_status disc_run(disc_compiled *c, const disc_tensor *inputs, int ninputs, disc_tensor *outputs,
                     int noutputs);
void disc_tensor_free(disc_tensor *t);
/* Backend "cuda", with the data in device memory: every input's data is
 * a device address (a CUdeviceptr cast to void *) and every output's
 * buffer is the caller's (data a device address, nbytes its size; the
 * library allocates no output). The run uses the device's primary
 * context and a stream of the compiled model's own, and has finished
 * with the inputs and written the outputs when it returns, so the caller
 * may use them on any stream after it (make the work that produced the
 * inputs finish first, e.g. cuStreamSynchronize). Shapes are host
 * values as in disc_run. */
disc_status disc_run_device(disc_compiled *c, const disc_tensor *inputs, int ninputs, disc_tensor *outputs,
                            int noutputs);
/* disc_run_device after the work queued on the caller's stream (a
 * CUstream cast to void *; NULL: as disc_run_device): the run records an
 * event there and its own stream waits for it on the device, so the
 * inputs may still be being written by kernels the caller queued there
 * (no cuStreamSynchronize first). As with disc_run_device, the outputs are
 * written when it returns, for work on any stream. Added in 0.1.0. */
disc_status disc_run_device_on(disc_compiled *c, void *stream, const disc_tensor *inputs, int ninputs,
                               disc_tensor *outputs, int noutputs);

#ifdef __cplusplus
}
#endif

#endif
