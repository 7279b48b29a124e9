/*
 * disc.c — the public C API (include/disc.h) over the compiler's modules.
 *
 * A disc_model is the loaded, verified graph (frontends/model.h: the one
 * loader, which dcc uses too). Compiling rewrites a graph, so disc_compile
 * compiles a clone of it (graph_clone: constants' data shared, not
 * copied): the model is read once and never changes, and can be compiled
 * any number of times, each compile from the content that was loaded.
 */
#include "disc.h"

#include "codegen/cache.h"
#include "codegen/codegen.h"
#include "frontends/model.h"
#include "runtime/interp.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

_Static_assert((int)DISC_BOOL == (int)DT_BOOL && (int)DISC_I64 == (int)DT_I64, "dtype order");
_Static_assert(DISC_MAX_RANK == MAX_RANK, "rank limit");
_Static_assert(sizeof(disc_tensor) >= sizeof(Tensor) - sizeof(bool), "tensor layout");

struct disc_model {
    Graph *g;       /* as loaded and verified; never compiled itself */
    char *path;     /* the ONNX file, where g->tied_dims (see disc_run) */
};

/* Options as disc_compile was given them, owned: what the untied model is
 * compiled with, later. */
typedef struct Opts {
    disc_options o;
    char *backend, *cpu;
    char **assume;
} Opts;

struct disc_compiled {
    Graph *g;       /* a clone of the model's graph, rewritten by compiling */
    ShapeInfo *si;  /* interp */
    Exec *exec;     /* cpu */
    /* The ONNX file's dim names tied input dims together (g->tied_dims):
     * inputs that break a tie run on the model imported without ties,
     * compiled at the first such run (doc/onnx.md, "Dim names"). */
    char *path;
    Opts *opts;
    pthread_mutex_t lock;
    disc_compiled *untied;
    bool untied_tried;
};

static _Thread_local char last_error[DIAG_MAX];
static _Thread_local disc_status last_status;

static disc_status set_error(disc_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static disc_status set_error(disc_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    last_status = st;
    return st;
}

/* The status of a diagnostic follows from its kind, never its text. */
static disc_status status_of(DiagKind k)
{
    switch (k) {
    case DIAG_PARSE:
    case DIAG_MODEL:
    case DIAG_UNSUPPORTED: return DISC_ERR_INPUT;
    case DIAG_SHAPE: return DISC_ERR_SHAPE;
    case DIAG_ARG: return DISC_ERR_ARG;
    case DIAG_RESOURCE: return DISC_ERR_RUNTIME;
    case DIAG_NONE: /* a failure that left no message is a bug */
    case DIAG_INTERNAL: return DISC_ERR_INTERNAL;
    }
    return DISC_ERR_INTERNAL;
}

static disc_status report(const Diag *d)
{
    if (!d->set)
        return set_error(DISC_ERR_INTERNAL, "error: internal: a failure without a message");
    return set_error(status_of(d->kind), "%s", d->msg);
}

const char *disc_version(void) { return DISC_VERSION; }
const char *disc_last_error(void) { return last_error; }
disc_status disc_last_status(void) { return last_status; }

disc_options disc_default_options(void)
{
    disc_options o = {.backend = "cpu", .opt_level = 3};
    return o;
}

static disc_model *load(Graph *g, const char *path, const Diag *d)
{
    disc_model *m = g ? calloc(1, sizeof *m) : NULL;
    if (!m) {
        if (g)
            set_error(DISC_ERR_RUNTIME, "error: out of memory");
        else
            report(d);
        graph_free(g);
        return NULL;
    }
    m->g = g;
    if (path && g->tied_dims && !(m->path = strdup(path))) {
        disc_model_free(m);
        set_error(DISC_ERR_RUNTIME, "error: out of memory");
        return NULL;
    }
    return m;
}

disc_model *disc_load(const char *path)
{
    if (!path) {
        set_error(DISC_ERR_ARG, "error: disc_load: no path");
        return NULL;
    }
    Diag d = {0};
    char store[4096];
    CgOpts co = {0};
    return load(model_load(path, cache_dir(&co, store, sizeof store) ? store : NULL, NULL, &d), path, &d);
}

disc_model *disc_load_ir(const char *text, size_t len, const char *name)
{
    if (!text) {
        set_error(DISC_ERR_ARG, "error: disc_load_ir: no text");
        return NULL;
    }
    Diag d = {0};
    return load(model_load_text(text, len, name ? name : "<ir>", &d), NULL, &d);
}

void disc_model_free(disc_model *m)
{
    if (!m)
        return;
    graph_free(m->g);
    free(m->path);
    free(m);
}

int disc_model_op_count(const disc_model *m)
{
    int n = 0;
    if (m)
        graph_for_each_op(m->g, op) n += op->kind != OP_CONST;
    return n;
}

int disc_model_num_inputs(const disc_model *m) { return m ? m->g->ninputs : 0; }
int disc_model_num_outputs(const disc_model *m) { return m ? m->g->noutputs : 0; }

static const Value *sig(const disc_model *m, int i, bool out)
{
    if (!m || i < 0 || i >= (out ? m->g->noutputs : m->g->ninputs))
        return NULL;
    return out ? m->g->outputs[i] : m->g->inputs[i];
}

const char *disc_model_input_name(const disc_model *m, int i)
{
    const Value *v = sig(m, i, false);
    return v && v->name ? v->name : "";
}

const char *disc_model_output_name(const disc_model *m, int i)
{
    const Value *v = sig(m, i, true);
    return v && v->name ? v->name : "";
}

disc_dtype disc_model_input_dtype(const disc_model *m, int i)
{
    const Value *v = sig(m, i, false);
    return v ? (disc_dtype)v->type.dtype : DISC_F32;
}

disc_dtype disc_model_output_dtype(const disc_model *m, int i)
{
    const Value *v = sig(m, i, true);
    return v ? (disc_dtype)v->type.dtype : DISC_F32;
}

int disc_model_input_rank(const disc_model *m, int i)
{
    const Value *v = sig(m, i, false);
    return v ? v->type.rank : -1;
}

int disc_model_output_rank(const disc_model *m, int i)
{
    const Value *v = sig(m, i, true);
    return v ? v->type.rank : -1;
}

static int dim_text(const Value *v, int axis, char *buf, size_t size)
{
    if (!v || axis < 0 || axis >= v->type.rank)
        return -1;
    return dim_snprint(buf, size, v->type.dims[axis]);
}

int disc_model_input_dim(const disc_model *m, int i, int axis, char *buf, size_t size)
{
    return dim_text(sig(m, i, false), axis, buf, size);
}

int disc_model_output_dim(const disc_model *m, int i, int axis, char *buf, size_t size)
{
    return dim_text(sig(m, i, true), axis, buf, size);
}

static void opts_free(Opts *p)
{
    if (!p)
        return;
    for (int i = 0; p->assume && i < p->o.nassume; i++)
        free(p->assume[i]);
    free(p->assume);
    free(p->backend);
    free(p->cpu);
    free(p);
}

static char *str_copy(const char *s, bool *ok)
{
    char *t = s ? strdup(s) : NULL;
    *ok &= !s || t;
    return t;
}

static Opts *opts_copy(const disc_options *o)
{
    Opts *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    bool ok = true;
    p->o = *o;
    p->o.backend = p->backend = str_copy(o->backend, &ok);
    p->o.cpu = p->cpu = str_copy(o->cpu, &ok);
    if (o->nassume > 0 && (ok &= (p->assume = calloc((size_t)o->nassume, sizeof *p->assume)) != NULL))
        for (int i = 0; i < o->nassume; i++)
            p->assume[i] = str_copy(o->assume[i], &ok);
    p->o.assume = (const char *const *)p->assume;
    if (!ok) {
        opts_free(p);
        return NULL;
    }
    return p;
}

/* Compiles a clone of g (g itself is the model's, never rewritten). */
static disc_compiled *compile(Graph *g, const disc_options *o)
{
    const char *backend = o->backend ? o->backend : "cpu";
    bool native = !strcmp(backend, "cpu") || !strcmp(backend, "cuda");
    if (!native && strcmp(backend, "interp") != 0) {
        set_error(DISC_ERR_ARG, "error: unknown backend '%s' (backends: cpu, cuda, interp)", backend);
        return NULL;
    }
    disc_compiled *c = calloc(1, sizeof *c);
    if (!c || pthread_mutex_init(&c->lock, NULL)) {
        free(c);
        set_error(DISC_ERR_RUNTIME, "error: out of memory");
        return NULL;
    }
    Diag d = {0};
    c->g = graph_clone(g, &d);
    if (!c->g) {
        report(&d);
        disc_compiled_free(c);
        return NULL;
    }
    ShapeOpts so = {o->assume, o->nassume};
    if (native) {
        CgOpts co = {.opt_level = o->opt_level, .cpu = o->cpu, .verbose = o->verbose != 0, .threads = o->threads,
                     .no_cache = o->no_cache != 0, .cache_dir = o->cache_dir,
                     .gpu = strcmp(backend, "cuda") ? NULL : "cuda"};
        c->exec = exec_compile(c->g, &so, &co, &d);
    } else {
        c->si = shape_analyze(c->g, &so, &d);
    }
    if (!c->exec && !c->si) {
        report(&d);
        disc_compiled_free(c);
        return NULL;
    }
    return c;
}

disc_compiled *disc_compile(const disc_model *m, const disc_options *o)
{
    disc_options dflt = disc_default_options();
    if (!o)
        o = &dflt;
    if (!m) {
        set_error(DISC_ERR_ARG, "error: disc_compile: no model");
        return NULL;
    }
    disc_compiled *c = compile(m->g, o);
    if (c && m->path && (!(c->path = strdup(m->path)) || !(c->opts = opts_copy(o)))) {
        disc_compiled_free(c);
        set_error(DISC_ERR_RUNTIME, "error: out of memory");
        return NULL;
    }
    return c;
}

void disc_compiled_free(disc_compiled *c)
{
    if (!c)
        return;
    exec_free(c->exec);
    shape_info_free(c->si);
    graph_free(c->g);
    disc_compiled_free(c->untied);
    opts_free(c->opts);
    free(c->path);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

/* The model compiled without its dim-name ties, made at the first call
 * (by one thread; the others wait). NULL where it cannot be had: the
 * caller keeps the tied model's error. */
static disc_compiled *untied(disc_compiled *c)
{
    pthread_mutex_lock(&c->lock);
    if (!c->untied_tried) {
        c->untied_tried = true;
        char saved[DIAG_MAX];
        disc_status st = last_status;
        snprintf(saved, sizeof saved, "%s", last_error);
        Diag d = {0};
        char store[4096];
        CgOpts co = {.no_cache = c->opts->o.no_cache != 0, .cache_dir = c->opts->o.cache_dir};
        Graph *g = model_load_untied(c->path, cache_dir(&co, store, sizeof store) ? store : NULL, NULL, &d);
        c->untied = g ? compile(g, &c->opts->o) : NULL;
        graph_free(g);
        snprintf(last_error, sizeof last_error, "%s", saved);
        last_status = st;
    }
    pthread_mutex_unlock(&c->lock);
    return c->untied;
}

int disc_compiled_kernel_count(const disc_compiled *c) { return c && c->exec ? exec_kernel_count(c->exec) : 0; }

static void to_tensor(Tensor *t, const disc_tensor *x)
{
    memset(t, 0, sizeof *t);
    t->dtype = (DType)x->dtype;
    t->rank = x->rank;
    memcpy(t->shape, x->shape, sizeof t->shape);
    t->data = x->data;
    t->nbytes = x->nbytes;
}

static disc_status run(disc_compiled *c, const disc_tensor *inputs, int ninputs, disc_tensor *outputs, int noutputs,
                       bool dev, void *stream)
{
    if (!c || (ninputs > 0 && !inputs) || (noutputs > 0 && !outputs))
        return set_error(DISC_ERR_ARG, "error: %s: bad arguments", dev ? "disc_run_device" : "disc_run");
    if (dev && !c->exec)
        return set_error(DISC_ERR_ARG, "error: disc_run_device: the model was compiled for the interpreter, not cuda");
    if (ninputs != c->g->ninputs || noutputs != c->g->noutputs)
        return set_error(DISC_ERR_ARG, "error: the model takes %d inputs and %d outputs, %d and %d given",
                         c->g->ninputs, c->g->noutputs, ninputs, noutputs);
    Tensor in[ninputs > 0 ? ninputs : 1], out[noutputs > 0 ? noutputs : 1];
    for (int i = 0; i < ninputs; i++) {
        if (inputs[i].rank < 0 || inputs[i].rank > MAX_RANK || (int)inputs[i].dtype < 0 ||
            (int)inputs[i].dtype >= DT_COUNT)
            return set_error(DISC_ERR_ARG, "error: input %d: bad rank or dtype", i);
        to_tensor(&in[i], &inputs[i]);
        size_t need = tensor_numel(&in[i]) * dtype_size(in[i].dtype);
        if (inputs[i].nbytes < need || (need && !inputs[i].data))
            return set_error(DISC_ERR_ARG, "error: input %d: %zu bytes given, its shape needs %zu", i,
                             inputs[i].nbytes, need);
    }
    Diag d = {0};
    bool ok;
    memset(out, 0, sizeof out);
    if (c->exec) {
        /* caller buffers are written in place, by kernels that take every
         * buffer they touch for distinct memory */
        for (int i = 0; i < noutputs; i++) {
            const char *o = outputs[i].data;
            if (!o || !outputs[i].nbytes)
                continue;
            for (int j = 0; j < ninputs + noutputs; j++) {
                const disc_tensor *t = j < ninputs ? &inputs[j] : &outputs[j - ninputs];
                const char *p = t->data;
                size_t n = j < ninputs ? tensor_numel(&in[j]) * dtype_size(in[j].dtype) : t->nbytes;
                if (j != ninputs + i && p && n && o < p + n && p < o + outputs[i].nbytes)
                    return set_error(DISC_ERR_ARG, "error: output %d's buffer (%zu bytes) overlaps %s %d's",
                                     i, outputs[i].nbytes, j < ninputs ? "input" : "output",
                                     j < ninputs ? j : j - ninputs);
            }
        }
        for (int i = 0; i < noutputs; i++)
            if (outputs[i].data) {
                out[i].data = outputs[i].data;
                out[i].nbytes = outputs[i].nbytes;
            }
        ok = exec_run_io(c->exec, in, ninputs, out, noutputs, dev, stream, &d);
    } else {
        ok = shape_check_inputs(c->si, in, ninputs, &d) && interp_run(c->g, in, ninputs, out, noutputs, &d);
    }
    if (!ok) {
        /* Inputs that break a tie of the model's dim names (or that no
         * model would take: then the untied one names what the
         * computation itself refuses) */
        disc_compiled *u = d.kind == DIAG_SHAPE && c->path ? untied(c) : NULL;
        return u ? run(u, inputs, ninputs, outputs, noutputs, dev, stream) : report(&d);
    }
    disc_status st = DISC_OK;
    for (int i = 0; i < noutputs; i++) {
        disc_tensor *o = &outputs[i];
        size_t nbytes = out[i].nbytes;
        if (o->data && out[i].data != o->data) { /* the interpreter's result */
            if (o->nbytes < nbytes)
                st = set_error(DISC_ERR_ARG, "error: output %d needs %zu bytes, %zu given", i, nbytes, o->nbytes);
            else if (nbytes)
                memcpy(o->data, out[i].data, nbytes);
            tensor_free(&out[i]);
            o->owned = 0;
        } else if (!o->data) {
            o->data = out[i].data;
            o->owned = out[i].owned;
        }
        o->dtype = (disc_dtype)out[i].dtype;
        o->rank = out[i].rank;
        memcpy(o->shape, out[i].shape, sizeof o->shape);
        o->nbytes = nbytes;
    }
    return st;
}

disc_status disc_run(disc_compiled *c, const disc_tensor *inputs, int ninputs, disc_tensor *outputs, int noutputs)
{
    return run(c, inputs, ninputs, outputs, noutputs, false, NULL);
}

disc_status disc_run_device(disc_compiled *c, const disc_tensor *inputs, int ninputs, disc_tensor *outputs,
                            int noutputs)
{
    return run(c, inputs, ninputs, outputs, noutputs, true, NULL);
}

disc_status disc_run_device_on(disc_compiled *c, void *stream, const disc_tensor *inputs, int ninputs,
                               disc_tensor *outputs, int noutputs)
{
    return run(c, inputs, ninputs, outputs, noutputs, true, stream);
}

void disc_tensor_free(disc_tensor *t)
{
    if (t && t->owned)
        free(t->data);
    if (t) {
        t->data = NULL;
        t->nbytes = 0;
        t->owned = 0;
    }
}
