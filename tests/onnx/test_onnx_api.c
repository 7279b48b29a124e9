/*
 * test_onnx_api.c — the ONNX importer's C API: graph inputs and symbols,
 * initializers referenced in place, typed and external initializer data,
 * TensorProto files, buffers that are not models.
 *
 *   test_onnx_api MODELS_DIR TMP_DIR
 */
#include "frontends/onnx/onnx.h"
#include "onnx.pb-c.h"
#include "tests/unit/check.h"

#include <stdlib.h>
#include <string.h>

static const char *models, *tmp;

static Graph *load(const char *name)
{
    char path[1024];
    Diag d = {0};
    snprintf(path, sizeof path, "%s/%s.onnx", models, name);
    Graph *g = onnx_import_file(path, NULL, &d);
    CHECK_MSG(g != NULL, "%s", d.msg);
    return g;
}

static Value *find(Graph *g, const char *name)
{
    graph_for_each_op(g, op) for (int i = 0; i < op->nout; i++) if (op->out[i]->name &&
                                                                     !strcmp(op->out[i]->name, name))
        return op->out[i];
    return NULL;
}

static void test_inputs(void)
{
    Graph *g = load("mlp");
    if (!g)
        return;
    CHECK(g->ninputs == 1 && g->noutputs == 1);
    Value *x = g->inputs[0];
    CHECK(!strcmp(x->name, "x"));
    CHECK(x->type.rank == 2 && x->type.dims[0]->kind == DIM_SYM);
    CHECK(!strcmp(x->type.dims[0]->name, "batch") && dim_is(x->type.dims[1], 16));
    Value *w1 = find(g, "w1");
    CHECK(w1 && w1->def->kind == OP_CONST && w1->def->cst->src == CONST_EXTERN);
    CHECK(w1 && w1->def->cst->nbytes == 16 * 32 * 4);
    Op *fc1 = find(g, "h") ? find(g, "h")->def : NULL;
    CHECK(fc1 && fc1->kind == OP_DOT && fc1->src && !strcmp(fc1->src, "fc1"));
    graph_free(g);

    g = load("attention");
    if (!g)
        return;
    Value *a = g->inputs[0], *m = g->inputs[1];
    CHECK(a->type.dims[0] == m->type.dims[0]);  /* B */
    CHECK(a->type.dims[1] == m->type.dims[2] && m->type.dims[2] == m->type.dims[3]); /* S */
    graph_free(g);

    g = load("out_of_order");
    if (!g)
        return;
    Dim *d0 = g->inputs[0]->type.dims[0];
    CHECK(d0->kind == DIM_SYM && d0->origin == SYM_INPUT);
    graph_free(g);
}

static void test_initializers(void)
{
    Graph *g = load("typed_ext");
    if (!g)
        return;
    Value *big = find(g, "big"), *h = find(g, "h"), *w = find(g, "w");
    CHECK(big && big->def->cst->nbytes == 64 * 3 * 4);
    if (big)
        CHECK(((const float *)big->def->cst->data)[5] == 5.0f);
    CHECK(h && h->type.dtype == DT_F16);
    if (h)
        CHECK(((const uint16_t *)h->def->cst->data)[0] == 0x3c00);
    CHECK(w && ((const float *)w->def->cst->data)[5] == 6.0f);
    graph_free(g);
}

/* External data one byte into its file: not aligned even to its element,
 * so copied (64-byte aligned), with the right values. */
static void test_external_unaligned(void)
{
    char path[1024], bin[1024];
    snprintf(path, sizeof path, "%s/typed_ext.onnx", models);
    FILE *f = fopen(path, "rb");
    static uint8_t buf[1 << 16], data[1 << 12];
    size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f)
        fclose(f);
    Onnx__ModelProto *m = n ? onnx__model_proto__unpack(NULL, n, buf) : NULL;
    CHECK(m && m->graph);
    if (!m || !m->graph)
        return;
    Onnx__TensorProto *big = NULL;
    for (size_t i = 0; i < m->graph->n_initializer; i++)
        if (!strcmp(m->graph->initializer[i]->name, "big"))
            big = m->graph->initializer[i];
    CHECK(big && big->n_external_data == 3);
    snprintf(bin, sizeof bin, "%s/typed_ext.bin", models);
    f = fopen(bin, "rb");
    size_t nb = f ? fread(data + 1, 1, sizeof data - 1, f) : 0;
    if (f)
        fclose(f);
    CHECK(nb == 768);
    snprintf(bin, sizeof bin, "%s/odd_ext.bin", tmp);
    f = fopen(bin, "wb");
    CHECK(f && fwrite(data, 1, nb + 1, f) == nb + 1);
    if (f)
        fclose(f);
    char *saved[3] = {NULL, NULL, NULL};
    for (size_t i = 0; big && i < big->n_external_data && i < 3; i++) {
        saved[i] = big->external_data[i]->value;
        if (!strcmp(big->external_data[i]->key, "location"))
            big->external_data[i]->value = "odd_ext.bin";
        if (!strcmp(big->external_data[i]->key, "offset"))
            big->external_data[i]->value = "1";
    }
    n = onnx__model_proto__pack(m, buf);
    for (size_t i = 0; big && i < big->n_external_data && i < 3; i++)
        big->external_data[i]->value = saved[i]; /* the proto's own again */
    snprintf(path, sizeof path, "%s/odd_ext.onnx", tmp);
    f = fopen(path, "wb");
    CHECK(f && fwrite(buf, 1, n, f) == n);
    if (f)
        fclose(f);
    Diag d = {0};
    Graph *g = onnx_import_file(path, NULL, &d);
    CHECK_MSG(g != NULL, "%s", d.msg);
    Value *v = g ? find(g, "big") : NULL;
    CHECK(v && (uintptr_t)v->def->cst->data % 64 == 0);
    if (v)
        CHECK(((const float *)v->def->cst->data)[5] == 5.0f);
    graph_free(g);
    onnx__model_proto__free_unpacked(m, NULL);
}

static void test_tensor_files(void)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/onnx_api_tensor.pb", tmp);
    Tensor t, u;
    int64_t shape[2] = {2, 3};
    Diag d = {0};
    CHECK(tensor_alloc(&t, DT_I64, 2, shape));
    for (int i = 0; i < 6; i++)
        ((int64_t *)t.data)[i] = i * 10 - 7;
    CHECK_MSG(onnx_write_tensor_file(path, &t, "input_0", &d), "%s", d.msg);
    char *name = NULL;
    CHECK_MSG(onnx_read_tensor_file(path, &u, &name, &d), "%s", d.msg);
    CHECK(u.dtype == DT_I64 && u.rank == 2 && u.shape[0] == 2 && u.shape[1] == 3);
    CHECK(u.nbytes == t.nbytes && u.data && !memcmp(u.data, t.data, t.nbytes));
    CHECK(name && !strcmp(name, "input_0"));
    free(name);
    tensor_free(&t);
    tensor_free(&u);

    Diag e = {0};
    CHECK(!onnx_read_tensor_file("/nonexistent/x.pb", &u, NULL, &e));
    CHECK(strstr(e.msg, "/nonexistent/x.pb: error:") != NULL);
}

static void test_buffers(void)
{
    Diag d = {0};
    static const unsigned char junk[] = {0xff, 0xff, 0xff, 0xff, 0x0f, 0x12, 0x34};
    CHECK(!onnx_import_buffer(junk, sizeof junk, "junk.onnx", NULL, NULL, &d));
    CHECK(!strncmp(d.msg, "junk.onnx: error: cannot parse ONNX model", 41));
    Diag e = {0};
    CHECK(!onnx_import_buffer("", 0, "empty.onnx", NULL, NULL, &e));
    CHECK(strstr(e.msg, "empty") != NULL);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test_onnx_api MODELS_DIR TMP_DIR\n");
        return 2;
    }
    models = argv[1];
    tmp = argv[2];
    test_inputs();
    test_initializers();
    test_external_unaligned();
    test_tensor_files();
    test_buffers();
    return check_done();
}
