/*
 * type.c — element types, tensor types and host tensors.
 */
#include "ir/ir.h"

#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    size_t size;
} dtypes[] = {
#define X(e, s, n) {s, n},
    DTYPES(X)
#undef X
};

const char *dtype_name(DType t)
{
    if (t < 0 || t >= DT_COUNT)
        return "?";
    return dtypes[t].name;
}

DType dtype_from_name(const char *s, size_t n)
{
    for (int i = 0; i < DT_COUNT; i++)
        if (strlen(dtypes[i].name) == n && memcmp(dtypes[i].name, s, n) == 0)
            return (DType)i;
    return DT_INVALID;
}

size_t dtype_size(DType t) { return t >= 0 && t < DT_COUNT ? dtypes[t].size : 0; }

bool dtype_is_float(DType t) { return t == DT_F32 || t == DT_F16 || t == DT_BF16 || t == DT_F64; }

bool dtype_is_int(DType t)
{
    switch (t) {
    case DT_I8: case DT_U8: case DT_I16: case DT_U16:
    case DT_I32: case DT_U32: case DT_I64: case DT_U64: return true;
    default: return false;
    }
}

Type type_make(Arena *a, DType dt, int rank, Dim *const *dims)
{
    Type t = {dt, rank, NULL};
    if (rank > 0) {
        t.dims = arena_array(a, (size_t)rank, sizeof(Dim *));
        if (t.dims && dims)
            memcpy(t.dims, dims, (size_t)rank * sizeof(Dim *));
    }
    return t;
}

bool type_eq(const Type *a, const Type *b)
{
    if (a->dtype != b->dtype || a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i])
            return false;
    return true;
}

bool type_same_dims(const Type *a, const Type *b)
{
    if (a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i])
            return false;
    return true;
}

Dim *type_numel(DimCtx *cx, const Type *t)
{
    Dim *n = dim_const(cx, 1);
    for (int i = 0; i < t->rank && n; i++)
        n = dim_mul(cx, n, t->dims[i]);
    return n;
}

bool type_static_numel(const Type *t, size_t *n)
{
    size_t k = 1;
    for (int i = 0; i < t->rank; i++) {
        if (!dim_is_const(t->dims[i]) || t->dims[i]->c < 0)
            return false;
        if (!size_mul(k, (size_t)t->dims[i]->c, &k))
            return false;
    }
    *n = k;
    return true;
}

void type_print(FILE *f, const Type *t)
{
    fprintf(f, "%s[", dtype_name(t->dtype));
    for (int i = 0; i < t->rank; i++) {
        if (i)
            fputs(", ", f);
        dim_print(f, t->dims[i]);
    }
    fputc(']', f);
}

size_t tensor_numel(const Tensor *t)
{
    size_t n = 1;
    for (int i = 0; i < t->rank; i++)
        n *= (size_t)t->shape[i];
    return n;
}

bool tensor_alloc(Tensor *t, DType dt, int rank, const int64_t *shape)
{
    memset(t, 0, sizeof *t);
    if (rank < 0 || rank > MAX_RANK || dt < 0 || dt >= DT_COUNT)
        return false;
    t->dtype = dt;
    t->rank = rank;
    size_t n = 1;
    for (int i = 0; i < rank; i++) {
        if (shape[i] < 0 || !size_mul(n, (size_t)shape[i], &n))
            return false;
        t->shape[i] = shape[i];
    }
    size_t bytes;
    if (!size_mul(n, dtype_size(dt), &bytes))
        return false;
    /* calloc(0) may return NULL; keep a valid pointer for empty tensors. */
    t->data = calloc(bytes ? bytes : 1, 1);
    if (!t->data)
        return false;
    t->nbytes = bytes;
    t->owned = true;
    return true;
}

void tensor_free(Tensor *t)
{
    if (t->owned)
        free(t->data);
    t->data = NULL;
    t->nbytes = 0;
    t->owned = false;
}
