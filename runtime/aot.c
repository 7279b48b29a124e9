/*
 * aot.c — running AOT-compiled models (runtime/aot.h): what the entry
 * points of an object `dcc compile` wrote call. Part of the runtime
 * archive, so it needs no LLVM, protobuf or compiler.
 *
 * A run takes a DiscRt from a process-wide list of idle ones (their run
 * memory stays mapped between runs) or makes one with DISC_THREADS threads
 * (the environment; default every core), runs the host flow, and turns its
 * status into a message: a violated step of the host shape program names
 * what the model requires and the shapes given.
 */
#include "runtime/aot.h"
#include "runtime/interp.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static DiscRt *idle[8];
static int nidle;

static DiscRt *rt_acquire(void)
{
    DiscRt *rt = NULL;
    pthread_mutex_lock(&mu);
    if (nidle > 0)
        rt = idle[--nidle];
    pthread_mutex_unlock(&mu);
    if (!rt) {
        DiscRtOpts o = {.threads = disc_env()->threads};
        rt = disc_rt_new(&o);
    }
    return rt;
}

static void rt_release(DiscRt *rt)
{
    disc_rt_reset(rt);
    pthread_mutex_lock(&mu);
    if (nidle < (int)(sizeof idle / sizeof idle[0])) {
        idle[nidle++] = rt;
        rt = NULL;
    }
    pthread_mutex_unlock(&mu);
    disc_rt_free(rt);
}

static int32_t fail(char *err, int64_t errlen, int32_t code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int32_t fail(char *err, int64_t errlen, int32_t code, const char *fmt, ...)
{
    if (err && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, (size_t)errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* " given: a [2, 13], b [2, 12]" */
static void given_shapes(const DiscAotModel *m, const int64_t *const *shapes, char *buf, size_t size)
{
    size_t n = (size_t)snprintf(buf, size, "; given:");
    for (int i = 0; i < m->ninputs && n < size; i++) {
        n += (size_t)snprintf(buf + n, size - n, "%s \"%s\" [", i ? "," : "", m->input_names[i]);
        for (int k = 0; k < m->input_ranks[i] && n < size; k++)
            n += (size_t)snprintf(buf + n, size - n, "%s%lld", k ? ", " : "", (long long)shapes[i][k]);
        if (n < size)
            n += (size_t)snprintf(buf + n, size - n, "]");
    }
}

/* ---- cuda models ------------------------------------------------------------ */

/* A cuda model's device and module, made by its first run. */
typedef struct AotGpu {
    DiscGpu *gpu;
    DiscGpuModule *mod;
    char error[600];   /* why the model cannot run here, or "" */
} AotGpu;

/* Runs of cuda models take turns: a model's tables and its device's
 * stream are shared by its runs. */
static pthread_mutex_t gpu_mu = PTHREAD_MUTEX_INITIALIZER;

static void gpu_error(AotGpu *st, DiscRt *rt, const char *what)
{
    const char *msg = disc_rt_error(rt);
    snprintf(st->error, sizeof st->error, "%s%s", what, msg ? msg : "failed");
}

/* Opens the device, loads the image for its architecture (else the PTX)
 * and finds the kernels (under gpu_mu). */
static void gpu_load(const DiscAotGpu *g, AotGpu *st, DiscRt *rt)
{
    if (!(st->gpu = disc_gpu_open(rt, DISC_GPU_ENV))) {
        gpu_error(st, rt, "");
        return;
    }
    if (g->nkernels == 0)
        return;
    const DiscGpuInfo *in = disc_gpu_info(st->gpu);
    char sm[16];
    snprintf(sm, sizeof sm, "sm_%d%d", in->major, in->minor);
    int pick = -1;
    for (int pass = 0; pass < 3 && pick < 0; pass++) /* the CUBIN, the emulator's, the PTX */
        for (int i = 0; i < g->nimages && pick < 0; i++)
            if (!strcmp(g->archs[i], pass == 0 ? sm : pass == 1 ? "emu" : "ptx"))
                pick = i;
    if (pick < 0) {
        size_t n = (size_t)snprintf(st->error, sizeof st->error, "no module for %s (%s, device %d) in the object, "
                                    "which has:", sm, in->name, in->ordinal);
        for (int i = 0; i < g->nimages && n < sizeof st->error; i++)
            n += (size_t)snprintf(st->error + n, sizeof st->error - n, " %s", g->archs[i]);
        return;
    }
    if (!(st->mod = disc_gpu_module_load(rt, st->gpu, g->images[pick]))) {
        gpu_error(st, rt, "");
        return;
    }
    for (int i = 0; i < g->nkernels; i++)
        if (!(g->fns[i] = disc_gpu_function(rt, st->gpu, st->mod, g->kernels[i]))) {
            gpu_error(st, rt, "");
            return;
        }
}

/* The model's device, loaded on first use; NULL with the reason in err. */
static DiscGpu *gpu_acquire(const DiscAotModel *m, DiscRt *rt, char *err, int64_t errlen)
{
    const DiscAotGpu *g = m->gpu;
    pthread_mutex_lock(&gpu_mu);
    AotGpu *st = *g->state;
    if (!st && (st = calloc(1, sizeof *st))) {
        *g->state = st;
        gpu_load(g, st, rt);
        disc_rt_reset(rt); /* the load's error stays in st */
    }
    if (!st || st->error[0]) {
        fail(err, errlen, DISC_AOT_ERUN, "%s: cuda: %s", m->name, !st ? "out of memory" : st->error);
        pthread_mutex_unlock(&gpu_mu);
        return NULL;
    }
    disc_rt_set_gpu(rt, st->gpu);
    return st->gpu;
}

/* A run of either entry: dev_nbytes NULL, host memory and outputs
 * allocated for the caller; else (a cuda model's NAME_run_device) every
 * input and outputs[i] are device addresses, output i's buffer holding
 * dev_nbytes[i] bytes. */
static int32_t run(const DiscAotModel *m, const void *const *inputs, const int64_t *const *in_shapes, void **outputs,
                   const int64_t *dev_nbytes, int64_t *const *out_shapes, char *err, int64_t errlen, void *wait)
{
    if (!m || m->abi != DISC_AOT_ABI)
        return fail(err, errlen, DISC_AOT_ERUN, "the model object was made for another disc runtime (ABI %lld, "
                    "this runtime %d)", m ? (long long)m->abi : -1LL, DISC_AOT_ABI);
    int ni = (int)m->ninputs, no = (int)m->noutputs;
    bool dev = dev_nbytes != NULL;
    if (dev && !m->gpu)
        return fail(err, errlen, DISC_AOT_EINPUT, "%s: inputs and outputs in device memory need a model compiled "
                    "for cuda (dcc compile --backend cuda)", m->name);
    for (int i = 0; dev && i < no; i++)
        if (!outputs[i] || dev_nbytes[i] < 0)
            return fail(err, errlen, DISC_AOT_EINPUT, "%s: output \"%s\": in device memory, the caller gives its "
                        "buffer and its size", m->name, m->output_names[i]);
    for (int i = 0; !dev && i < no; i++)
        outputs[i] = NULL;
    if (m->weights && !atomic_load((_Atomic(void *) *)m->weights))
        return fail(err, errlen, DISC_AOT_EWEIGHTS, "%s: no weights: call %s_load_weights first", m->name, m->name);
    int nshapes = 0;
    for (int i = 0; i < ni; i++) {
        int64_t numel = 1;
        for (int k = 0; k < m->input_ranks[i]; k++) {
            if (in_shapes[i][k] < 0)
                return fail(err, errlen, DISC_AOT_EINPUT, "%s: input \"%s\": dim %d is %lld", m->name,
                            m->input_names[i], k, (long long)in_shapes[i][k]);
            numel *= in_shapes[i][k];
        }
        if (!inputs[i] && numel > 0)
            return fail(err, errlen, DISC_AOT_EINPUT, "%s: input \"%s\" is NULL", m->name, m->input_names[i]);
        nshapes += (int)m->input_ranks[i];
    }
    for (int i = 0; i < no; i++)
        nshapes += (int)m->output_ranks[i];
    void **io = calloc((size_t)(ni + 3 * no) + 1, sizeof *io);
    int64_t *shapes = calloc((size_t)nshapes + 1, sizeof *shapes);
    int64_t *syms = calloc((size_t)m->nsyms + 1, sizeof *syms);
    DiscRt *rt = io && shapes && syms ? rt_acquire() : NULL;
    if (!rt) {
        free(io);
        free(shapes);
        free(syms);
        return fail(err, errlen, DISC_AOT_ERUN, "%s: out of memory", m->name);
    }
    int k = 0;
    for (int i = 0; i < ni; i++) {
        io[i] = (void *)inputs[i];
        for (int j = 0; j < m->input_ranks[i]; j++)
            shapes[k++] = in_shapes[i][j];
    }
    for (int i = 0; dev && i < no; i++) { /* {buffer, capacity, allocated} per output */
        io[ni + 3 * i] = outputs[i];
        io[ni + 3 * i + 1] = (void *)(uintptr_t)dev_nbytes[i];
    }
    DiscGpu *gpu = NULL;
    if (m->gpu && !(gpu = gpu_acquire(m, rt, err, errlen))) {
        rt_release(rt);
        free(io);
        free(shapes);
        free(syms);
        return DISC_AOT_ERUN;
    }
    disc_rt_set_dev_io(rt, dev);
    int32_t rc, status = DISC_AOT_OK;
    if (gpu) { /* the flow, or the graph of a run at these shapes before */
        DiscGpuFlow f = {.main = m->main, .io = io, .ninputs = ni, .noutputs = no, .shapes = shapes,
                         .nin_dims = k, .nout_dims = nshapes - k, .syms = syms, .wait = wait};
        rc = disc_gpu_run(rt, gpu, &f);
    } else {
        rc = m->main(rt, io, shapes, syms);
    }
    if (rc > 0) {
        char given[512];
        given_shapes(m, in_shapes, given, sizeof given);
        status = fail(err, errlen, DISC_AOT_EINPUT, "%s: the input shapes violate the model: %s%s", m->name,
                      rc <= m->nsteps ? m->steps[rc - 1] : "a constraint", given);
    } else if (rc < 0) {
        const char *msg = disc_rt_error(rt);
        status = fail(err, errlen, DISC_AOT_ERUN, "%s: %s", m->name, msg ? msg : "the run failed");
    }
    for (int i = 0; i < no; i++) {
        void **s = &io[ni + 3 * i];
        int rank = (int)m->output_ranks[i];
        int64_t bytes = 1;
        for (int j = 0; j < rank; j++) {
            out_shapes[i][j] = shapes[k + j];
            bytes *= shapes[k + j];
        }
        k += rank;
        bytes *= (int64_t)dtype_size((DType)m->output_dtypes[i]);
        if (status != DISC_AOT_OK) {
            if (s[2])
                free(s[0]);
            continue;
        }
        if (dev) { /* the flow wrote the caller's buffer (disc_rt_dev_output) */
            if (s[2] || s[0] != outputs[i])
                status = fail(err, errlen, DISC_AOT_ERUN, "%s: output \"%s\" was not written to the device "
                              "buffer given", m->name, m->output_names[i]);
            if (s[2])
                free(s[0]);
            continue;
        }
        if (s[2]) { /* allocated for the caller by the flow */
            outputs[i] = s[0];
            continue;
        }
        /* an input or a constant returned as it is: the caller gets a copy */
        void *p = malloc(bytes > 0 ? (size_t)bytes : 1);
        if (!p) {
            status = fail(err, errlen, DISC_AOT_ERUN, "%s: out of memory for output %d", m->name, i);
            continue;
        }
        if (bytes > 0)
            memcpy(p, s[0], (size_t)bytes);
        outputs[i] = p;
    }
    if (status != DISC_AOT_OK && !dev)
        for (int i = 0; i < no; i++) {
            free(outputs[i]);
            outputs[i] = NULL;
        }
    if (gpu) {
        disc_rt_set_dev_io(rt, 0);
        disc_rt_set_gpu(rt, NULL); /* the run's device memory back to the cache */
        pthread_mutex_unlock(&gpu_mu);
    }
    rt_release(rt);
    free(io);
    free(shapes);
    free(syms);
    return status;
}

int32_t disc_aot_run(const DiscAotModel *m, const void *const *inputs, const int64_t *const *in_shapes,
                     void **outputs, int64_t *const *out_shapes, char *err, int64_t errlen)
{
    return run(m, inputs, in_shapes, outputs, NULL, out_shapes, err, errlen, NULL);
}

int32_t disc_aot_run_device(const DiscAotModel *m, const void *const *inputs, const int64_t *const *in_shapes,
                            void *const *outputs, const int64_t *nbytes, int64_t *const *out_shapes, char *err,
                            int64_t errlen)
{
    if (!nbytes)
        return fail(err, errlen, DISC_AOT_EINPUT, "%s: no output sizes", m ? m->name : "?");
    return run(m, inputs, in_shapes, (void **)outputs, nbytes, out_shapes, err, errlen, NULL);
}

int32_t disc_aot_run_device_on(const DiscAotModel *m, void *stream, const void *const *inputs,
                               const int64_t *const *in_shapes, void *const *outputs, const int64_t *nbytes,
                               int64_t *const *out_shapes, char *err, int64_t errlen)
{
    if (!nbytes)
        return fail(err, errlen, DISC_AOT_EINPUT, "%s: no output sizes", m ? m->name : "?");
    return run(m, inputs, in_shapes, (void **)outputs, nbytes, out_shapes, err, errlen, stream);
}

/* ---- weights files --------------------------------------------------------- */

int64_t disc_aot_hash(const void *p, int64_t n)
{
    /* FNV-1a over 8-byte words (then the tail bytes): fast enough for
     * gigabytes, and any changed word changes it */
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
    }
    for (; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return (int64_t)h;
}

int32_t disc_aot_load_weights(const DiscAotModel *m, const char *path, char *err, int64_t errlen)
{
    if (!m->weights)
        return fail(err, errlen, DISC_AOT_EWEIGHTS, "%s: the model carries its constants; it has no weights file",
                    m->name);
    FILE *f = fopen(path, "rb");
    if (!f)
        return fail(err, errlen, DISC_AOT_EWEIGHTS, "%s: cannot open weights file %s", m->name, path);
    unsigned char hdr[DISC_AOT_WEIGHTS_HEADER];
    int64_t size = 0, hash = 0;
    bool ok = fread(hdr, 1, sizeof hdr, f) == sizeof hdr && !memcmp(hdr, DISC_AOT_WEIGHTS_MAGIC, 8);
    if (ok) {
        memcpy(&size, hdr + 8, 8);
        memcpy(&hash, hdr + 16, 8);
    }
    if (!ok || size != m->weights_bytes || hash != m->weights_hash) {
        fclose(f);
        return fail(err, errlen, DISC_AOT_EWEIGHTS, "%s: %s is not this model's weights file (%s)", m->name, path,
                    !ok ? "no disc weights header" : "its size or checksum differs from the object's");
    }
    /* the file must hold what its header says before anything is allocated */
    long here = ftell(f), held = -1;
    if (fseek(f, 0, SEEK_END) == 0)
        held = ftell(f) - here;
    if (size < 0 || held != size || fseek(f, here, SEEK_SET) != 0) {
        fclose(f);
        return fail(err, errlen, DISC_AOT_EWEIGHTS, "%s: %s is %s than its header says (%lld bytes of data, %ld held)",
                    m->name, path, held < size ? "shorter" : "longer", (long long)size, held);
    }
    void *data = NULL;
    if (posix_memalign(&data, 64, size > 0 ? (size_t)size : 64)) {
        fclose(f);
        return fail(err, errlen, DISC_AOT_ERUN, "%s: out of memory for %lld bytes of weights", m->name,
                    (long long)size);
    }
    ok = size == 0 || fread(data, 1, (size_t)size, f) == (size_t)size;
    fclose(f);
    if (!ok || disc_aot_hash(data, size) != hash) {
        free(data);
        return fail(err, errlen, DISC_AOT_EWEIGHTS, "%s: %s is %s", m->name, path,
                    !ok ? "shorter than its header says" : "corrupt (checksum mismatch)");
    }
    void *old = atomic_exchange((_Atomic(void *) *)m->weights, data);
    if (old) {
        disc_rt_weights_forget(old, m->weights_bytes);
        free(old);
    }
    return DISC_AOT_OK;
}

void disc_aot_unload_weights(const DiscAotModel *m)
{
    if (!m->weights)
        return;
    void *old = atomic_exchange((_Atomic(void *) *)m->weights, NULL);
    if (old) {
        disc_rt_weights_forget(old, m->weights_bytes);
        free(old);
    }
}

/* ---- host ops ------------------------------------------------------------------ */

typedef struct AotState {
    Graph *g;
    const Op **ops;   /* by index in graph order */
    int nops;
    int *model_sym;   /* by the parsed graph's symbol id: the model's, or -1 */
    char error[256];
} AotState;

static AotState *load_state(const DiscAotModel *m)
{
    AotState *st = calloc(1, sizeof *st);
    if (!st)
        return NULL;
    Diag d = {0};
    st->g = graph_parse(m->ir, strlen(m->ir), m->name, &d);
    if (!st->g) {
        snprintf(st->error, sizeof st->error, "the model's IR does not parse: %.200s", d.msg);
        return st;
    }
    for (const Op *op = st->g->first; op; op = op->next)
        st->nops++;
    st->ops = calloc((size_t)st->nops + 1, sizeof *st->ops);
    st->model_sym = calloc((size_t)st->g->dims.nsyms + 1, sizeof *st->model_sym);
    if (!st->ops || !st->model_sym) {
        snprintf(st->error, sizeof st->error, "out of memory");
        return st;
    }
    int i = 0;
    for (const Op *op = st->g->first; op; op = op->next)
        st->ops[i++] = op;
    for (int s = 0; s < st->g->dims.nsyms; s++) {
        st->model_sym[s] = -1;
        for (int j = 0; j < m->nsyms; j++)
            if (m->sym_names[j] && !strcmp(m->sym_names[j], st->g->dims.syms[s]->name))
                st->model_sym[s] = j;
    }
    return st;
}

int32_t disc_aot_host_op(DiscRt *rt, const DiscAotModel *m, int64_t index, const int64_t *binds, void **bufs,
                         int64_t *syms)
{
    static pthread_mutex_t load_mu = PTHREAD_MUTEX_INITIALIZER;
    if (disc_gpu_capturing(rt, disc_rt_gpu(rt), "a host op") != 0)
        return -1;
    pthread_mutex_lock(&load_mu);
    AotState *st = *m->state;
    if (!st)
        *m->state = st = load_state(m);
    pthread_mutex_unlock(&load_mu);
    if (!st || st->error[0] || index < 0 || index >= st->nops) {
        disc_rt_fail(rt, "host op %lld: %s", (long long)index, !st ? "out of memory" : st->error[0] ? st->error
                                                                                         : "no such op in the IR");
        return -1;
    }
    int nsyms = st->g->dims.nsyms;
    int64_t psyms[nsyms + 1];
    for (int s = 0; s < nsyms; s++)
        psyms[s] = st->model_sym[s] >= 0 ? syms[st->model_sym[s]] : 0;
    int64_t shapes[MAX_RESULTS][MAX_RANK];
    if (interp_host_op(rt, st->g, st->ops[index], bufs, psyms, nsyms, shapes) != 0)
        return -1;
    for (int64_t i = 0; i < binds[0]; i++) {
        const int64_t *b = binds + 1 + 3 * i;
        syms[b[2]] = shapes[b[0]][b[1]];
    }
    return 0;
}
