/*
 * onnx_run.c — runs an imported ONNX model on the reference interpreter
 * and compares with the outputs that onnx.reference computed
 * (DIR/test_data_set_K/{input,output}_N.pb, written by gen_models.py).
 *
 *   onnx_run MODEL DIR [--atol A] [--rtol R]
 *
 * This checks the lowerings' semantics, not only that they build.
 */
#include "frontends/onnx/onnx.h"
#include "runtime/interp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { MAX_IO = 64 };

static bool exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

static int compare(const char *what, const Tensor *got, const Tensor *want, double atol, double rtol)
{
    if (got->dtype != want->dtype || got->rank != want->rank) {
        fprintf(stderr, "%s: got %s rank %d, want %s rank %d\n", what, dtype_name(got->dtype),
                got->rank, dtype_name(want->dtype), want->rank);
        return 1;
    }
    for (int i = 0; i < got->rank; i++)
        if (got->shape[i] != want->shape[i]) {
            fprintf(stderr, "%s: dim %d is %lld, want %lld\n", what, i, (long long)got->shape[i],
                    (long long)want->shape[i]);
            return 1;
        }
    size_t n = tensor_numel(want);
    for (size_t i = 0; i < n; i++) {
        if (dtype_is_float(want->dtype)) {
            double a = interp_load_f(got, i), b = interp_load_f(want, i);
            if ((isnan(a) && isnan(b)) || a == b || fabs(a - b) <= atol + rtol * fabs(b))
                continue;
            fprintf(stderr, "%s: element %zu is %.9g, want %.9g\n", what, i, a, b);
            return 1;
        }
        if (interp_load_i(got, i) != interp_load_i(want, i)) {
            fprintf(stderr, "%s: element %zu is %lld, want %lld\n", what, i,
                    (long long)interp_load_i(got, i), (long long)interp_load_i(want, i));
            return 1;
        }
    }
    return 0;
}

static int run_set(Graph *g, const char *dir, double atol, double rtol)
{
    Tensor in[MAX_IO], out[MAX_IO], want;
    char path[4096];
    int nin = 0, bad = 0;
    Diag d = {0};
    memset(in, 0, sizeof in);
    memset(out, 0, sizeof out);
    for (; nin < MAX_IO; nin++) {
        snprintf(path, sizeof path, "%s/input_%d.pb", dir, nin);
        if (!exists(path))
            break;
        if (!onnx_read_tensor_file(path, &in[nin], NULL, &d)) {
            fprintf(stderr, "%s\n", d.msg);
            return 1;
        }
    }
    if (g->noutputs > MAX_IO || !interp_run(g, in, nin, out, g->noutputs, &d)) {
        fprintf(stderr, "%s: %s\n", dir, d.msg);
        bad = 1;
    }
    for (int i = 0; !bad && i < g->noutputs; i++) {
        snprintf(path, sizeof path, "%s/output_%d.pb", dir, i);
        if (!onnx_read_tensor_file(path, &want, NULL, &d)) {
            fprintf(stderr, "%s\n", d.msg);
            bad = 1;
            break;
        }
        char what[4200];
        snprintf(what, sizeof what, "%s output %d", dir, i);
        bad |= compare(what, &out[i], &want, atol, rtol);
        tensor_free(&want);
    }
    for (int i = 0; i < nin; i++)
        tensor_free(&in[i]);
    for (int i = 0; i < g->noutputs && i < MAX_IO; i++)
        tensor_free(&out[i]);
    return bad;
}

int main(int argc, char **argv)
{
    const char *model = NULL, *dir = NULL;
    double atol = 1e-5, rtol = 1e-4;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--atol") && i + 1 < argc)
            atol = atof(argv[++i]);
        else if (!strcmp(argv[i], "--rtol") && i + 1 < argc)
            rtol = atof(argv[++i]);
        else if (!model)
            model = argv[i];
        else
            dir = argv[i];
    }
    if (!model || !dir) {
        fprintf(stderr, "usage: onnx_run MODEL DIR [--atol A] [--rtol R]\n");
        return 2;
    }
    Diag d = {0};
    Graph *g = onnx_import_file(model, NULL, &d);
    if (!g) {
        fprintf(stderr, "%s\n", d.msg);
        return 1;
    }
    int bad = 0, sets = 0;
    for (int k = 0;; k++) {
        char set[1024];
        snprintf(set, sizeof set, "%s/test_data_set_%d", dir, k);
        if (!exists(set))
            break;
        bad |= run_set(g, set, atol, rtol);
        sets++;
    }
    graph_free(g);
    printf("%d data sets, %s\n", sets, bad ? "FAILED" : "ok");
    return bad || !sets;
}
