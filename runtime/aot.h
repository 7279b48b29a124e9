/*
 * aot.h — the ABI between an AOT-compiled model (an object `dcc compile`
 * writes, codegen/aot.c) and the runtime archive (runtime/aot.c).
 *
 * The object holds the kernels, the host flow, the model's constants (or
 * the address where its weights file goes), a DiscAotModel describing it,
 * and small typed entry points (NAME_run, NAME_run_arrays, ...) declared by
 * its generated header, which call disc_aot_run. Every field is 8 bytes
 * wide, so the generator lays the struct out as an array of i64/pointers.
 */
#ifndef DISC_AOT_H
#define DISC_AOT_H

#include "runtime/rt.h"

#include <stdint.h>

#define DISC_AOT_ABI 3 /* 2: DISC_MM_PANEL in a matmul's fields; 3: gpu */

/* Status codes of the entry points (also in each generated header). */
enum {
    DISC_AOT_OK = 0,
    DISC_AOT_EINPUT = 1,   /* an input's shape violates the model, or a NULL input */
    DISC_AOT_ERUN = 2,     /* a failure while running (out of memory, a library error) */
    DISC_AOT_EWEIGHTS = 3, /* the weights file is missing, not loaded or not this model's */
};

typedef int32_t DiscAotMain(DiscRt *rt, void **io, int64_t *shapes, int64_t *syms);
/* A model compiled for cuda (dcc compile --backend cuda): its kernels as
 * module images for several architectures, loaded by the first run on the
 * device DISC_CUDA_DEVICE (else 0): the CUBIN for the device's sm_XY, else
 * the PTX (the driver compiles it for the device). The flow reaches the
 * kernels and the constants' device copies through the two tables, which
 * are zero in the object and filled at run time. */
typedef struct DiscAotGpu {
    int64_t nimages;
    const char *const *archs;         /* per image: "sm_90", "ptx", or "emu" (the
                                         emulator's, for the stand-in driver) */
    const void *const *images;
    int64_t nkernels;
    const char *const *kernels;       /* their names */
    void **fns;                       /* DiscGpuFn* per kernel, set at load */
    void **dconsts;                   /* device copies of the constants (disc_rt_dev_const) */
    void **state;                     /* the device and module; zero in the object */
} DiscAotGpu;

typedef struct DiscAotModel {
    int64_t abi;                      /* DISC_AOT_ABI */
    const char *name;                 /* the entry points' prefix */
    int64_t ninputs, noutputs, nsyms, nsteps;
    const char *const *input_names;
    const int64_t *input_dtypes;      /* DType (ir.h) */
    const int64_t *input_ranks;
    const char *const *output_names;
    const int64_t *output_dtypes;
    const int64_t *output_ranks;
    const char *const *steps;         /* per step of the host shape program: what it requires */
    DiscAotMain *main;                /* the host flow (codegen/host.c) */
    void **weights;                   /* NULL: constants are in the object; else where the
                                         loaded weights file's data goes */
    int64_t weights_bytes;
    int64_t weights_hash;             /* FNV-1a 64 of the data */
    const char *ir;                   /* NULL, or the graph as IR text, for its host ops */
    const char *const *sym_names;     /* nsyms names, by symbol id (for host ops) */
    void **state;                     /* the runtime's per-model state; zero in the object */
    const DiscAotGpu *gpu;            /* NULL: a CPU model */
} DiscAotModel;

/* The entry points' bodies. inputs[i] with shape in_shapes[i] (input_ranks[i]
 * dims); each output is malloc'd for the caller (outputs[i], freed with
 * free()) with its dims in out_shapes[i]. err (may be NULL) receives the
 * message of a failure. */
int32_t disc_aot_run(const DiscAotModel *m, const void *const *inputs, const int64_t *const *in_shapes,
                     void **outputs, int64_t *const *out_shapes, char *err, int64_t errlen);
/* The same for a cuda model with its data in device memory (NAME_run_device):
 * inputs[i] and outputs[i] are device addresses (CUdeviceptr), output i's
 * buffer the caller's, of nbytes[i] bytes; as disc_run_device (disc.h). */
int32_t disc_aot_run_device(const DiscAotModel *m, const void *const *inputs, const int64_t *const *in_shapes,
                            void *const *outputs, const int64_t *nbytes, int64_t *const *out_shapes, char *err,
                            int64_t errlen);
/* After the work queued on the caller's CUstream (NAME_run_device_on; as
 * disc_run_device_on, disc.h). */
int32_t disc_aot_run_device_on(const DiscAotModel *m, void *stream, const void *const *inputs,
                               const int64_t *const *in_shapes, void *const *outputs, const int64_t *nbytes,
                               int64_t *const *out_shapes, char *err, int64_t errlen);
/* Reads a weights file `dcc compile --weights` wrote for m. */
int32_t disc_aot_load_weights(const DiscAotModel *m, const char *path, char *err, int64_t errlen);
void disc_aot_unload_weights(const DiscAotModel *m);

/* The host flow's thunk for an op with no kernel (from m->ir, op number
 * `index` in graph order); binds = {count, then (result, axis, symbol id)
 * per symbol the results define}. */
int32_t disc_aot_host_op(DiscRt *rt, const DiscAotModel *m, int64_t index, const int64_t *binds, void **bufs,
                         int64_t *syms);

/* The weights file: a 64-byte header, then the data. */
#define DISC_AOT_WEIGHTS_MAGIC "DISCWTS1"
enum { DISC_AOT_WEIGHTS_HEADER = 64 };
int64_t disc_aot_hash(const void *p, int64_t n);

#endif
