/*
 * tensor.c — TensorProto <-> bytes: element types, initializer payloads
 * (raw_data in place, typed fields converted, external data mapped), and
 * the TensorProto files of the ONNX test suites (input_0.pb, output_0.pb).
 */
#include "frontends/onnx/internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* ONNX TensorProto.DataType numbers and the disc types they map to. */
static const struct {
    int32_t onnx;
    DType dt;
    const char *name;
} types[] = {
    {ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, DT_F32, "FLOAT"},
    {ONNX__TENSOR_PROTO__DATA_TYPE__UINT8, DT_U8, "UINT8"},
    {ONNX__TENSOR_PROTO__DATA_TYPE__INT8, DT_I8, "INT8"},
    {ONNX__TENSOR_PROTO__DATA_TYPE__UINT16, DT_U16, "UINT16"},
    {ONNX__TENSOR_PROTO__DATA_TYPE__INT16, DT_I16, "INT16"},
    {ONNX__TENSOR_PROTO__DATA_TYPE__INT32, DT_I32, "INT32"},
    {ONNX__TENSOR_PROTO__DATA_TYPE__INT64, DT_I64, "INT64"},
    {ONNX__TENSOR_PROTO__DATA_TYPE__STRING, DT_INVALID, "STRING"},
    {ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, DT_BOOL, "BOOL"},
    {ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16, DT_F16, "FLOAT16"},
    {ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE, DT_F64, "DOUBLE"},
    {ONNX__TENSOR_PROTO__DATA_TYPE__UINT32, DT_U32, "UINT32"},
    {ONNX__TENSOR_PROTO__DATA_TYPE__UINT64, DT_U64, "UINT64"},
    {ONNX__TENSOR_PROTO__DATA_TYPE__COMPLEX64, DT_INVALID, "COMPLEX64"},
    {ONNX__TENSOR_PROTO__DATA_TYPE__COMPLEX128, DT_INVALID, "COMPLEX128"},
    {ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16, DT_BF16, "BFLOAT16"},
};

DType onnx_dtype(int32_t t)
{
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (types[i].onnx == t)
            return types[i].dt;
    return DT_INVALID;
}

int32_t onnx_type_of(DType dt)
{
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (types[i].dt == dt)
            return types[i].onnx;
    return 0;
}

const char *onnx_type_name(int32_t t)
{
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (types[i].onnx == t)
            return types[i].name;
    return "UNDEFINED";
}

uint16_t onnx_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000, exp = (x >> 23) & 0xff, man = x & 0x7fffff;
    if (exp == 0xff) /* inf, nan */
        return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 31)
        return (uint16_t)(sign | 0x7c00);
    if (e <= 0) { /* subnormal or zero, round to nearest even */
        if (e < -10)
            return (uint16_t)sign;
        man |= 0x800000;
        int shift = 14 - e;
        uint32_t h = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1)))
            h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
        h++; /* may carry into the exponent: still correct */
    return (uint16_t)(sign | h);
}

float onnx_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, x;
    if (exp == 0x1f) {
        x = sign | 0x7f800000 | (man << 13);
    } else if (exp == 0) {
        if (!man) {
            x = sign;
        } else { /* subnormal: normalize */
            int e = -1;
            do {
                man <<= 1;
                e++;
            } while (!(man & 0x400));
            x = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else {
        x = sign | ((exp - 15 + 127) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &x, 4);
    return f;
}

uint16_t onnx_f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000)
        return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

float onnx_bf16_to_f32(uint16_t h)
{
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

/* Finds key in the external_data entries; NULL if absent. */
static const char *ext_key(const OTensor *t, const char *key)
{
    for (size_t i = 0; i < t->n_external_data; i++)
        if (t->external_data[i]->key && !strcmp(t->external_data[i]->key, key))
            return t->external_data[i]->value;
    return NULL;
}

static bool parse_i64(const char *s, int64_t *v)
{
    if (!s || !*s)
        return false;
    char *end;
    long long x = strtoll(s, &end, 10);
    if (*end || x < 0)
        return false;
    *v = x;
    return true;
}

static bool decode_external(const OTensor *t, const char *dir, TensorData *td, Diag *d)
{
    const char *loc = ext_key(t, "location");
    if (!loc || !*loc)
        return diag_set(d, "external data without a 'location'");
    int64_t off = 0, len = -1;
    const char *so = ext_key(t, "offset"), *sl = ext_key(t, "length");
    if ((so && !parse_i64(so, &off)) || (sl && !parse_i64(sl, &len)))
        return diag_set(d, "external data '%s': bad offset or length", loc);
    if (len >= 0 && (uint64_t)len != td->nbytes)
        return diag_set(d, "external data '%s': length %lld, but the tensor needs %zu bytes", loc,
                        (long long)len, td->nbytes);
    char path[4096];
    int n = loc[0] == '/' ? snprintf(path, sizeof path, "%s", loc)
                          : snprintf(path, sizeof path, "%s/%s", dir ? dir : ".", loc);
    if (n < 0 || (size_t)n >= sizeof path)
        return diag_set(d, "external data path too long");
    OnnxMap *m = malloc(sizeof *m);
    if (!m)
        return diag_setk(d, DIAG_RESOURCE, "out of memory");
    if (!onnx_map_file(path, off, (int64_t)td->nbytes, m, d)) {
        free(m);
        return false;
    }
    /* in place where aligned as disc's own buffers are; else a copy: the
     * external data writer puts tensors back to back, so one after an odd
     * number of bytes (an int8 or f16 tensor) is not even aligned to its
     * element, which the kernels and the interpreter assume */
    if (td->nbytes && (uintptr_t)m->data % 64 != 0) {
        void *heap = td->nbytes >= HUGE_PAGE ? alloc_huge(td->nbytes) : aligned_alloc(64, (td->nbytes + 63) / 64 * 64);
        if (!heap) {
            onnx_map_free(m);
            return diag_setk(d, DIAG_RESOURCE, "external data '%s': out of memory", loc);
        }
        memcpy(heap, m->data, td->nbytes);
        munmap(m->base, m->len);
        *m = (OnnxMap){.heap = heap, .data = heap};
    }
    td->map = m;
    td->data = m->data;
    return true;
}

/* Converts a typed field (float_data, int32_data, ...) into arena memory. */
static bool decode_typed(const OTensor *t, Arena *a, TensorData *td, Diag *d)
{
    size_t have;
    switch (td->dtype) {
    case DT_F32: have = t->n_float_data; break;
    case DT_F64: have = t->n_double_data; break;
    case DT_I64: have = t->n_int64_data; break;
    case DT_U32:
    case DT_U64: have = t->n_uint64_data; break;
    default: have = t->n_int32_data; break;
    }
    if (have != td->numel)
        return diag_set(d, "has %zu elements of data, but its shape needs %zu", have, td->numel);
    if (td->numel == 0) {
        td->data = "";
        return true;
    }
    void *p = arena_alloc(a, td->nbytes);
    if (!p)
        return diag_setk(d, DIAG_RESOURCE, "out of memory");
    switch (td->dtype) {
    case DT_F32: memcpy(p, t->float_data, td->nbytes); break;
    case DT_F64: memcpy(p, t->double_data, td->nbytes); break;
    case DT_I64: memcpy(p, t->int64_data, td->nbytes); break;
    case DT_I32: memcpy(p, t->int32_data, td->nbytes); break;
    case DT_F16:
    case DT_BF16:
        for (size_t i = 0; i < td->numel; i++)
            ((uint16_t *)p)[i] = (uint16_t)t->int32_data[i];
        break;
    case DT_BOOL:
        for (size_t i = 0; i < td->numel; i++)
            ((uint8_t *)p)[i] = t->int32_data[i] != 0;
        break;
    case DT_I8:
    case DT_U8:
        for (size_t i = 0; i < td->numel; i++)
            ((uint8_t *)p)[i] = (uint8_t)t->int32_data[i];
        break;
    case DT_I16:
    case DT_U16:
        for (size_t i = 0; i < td->numel; i++)
            ((uint16_t *)p)[i] = (uint16_t)t->int32_data[i];
        break;
    case DT_U32:
        for (size_t i = 0; i < td->numel; i++)
            ((uint32_t *)p)[i] = (uint32_t)t->uint64_data[i];
        break;
    case DT_U64: memcpy(p, t->uint64_data, td->nbytes); break;
    default:
        return diag_setk(d, DIAG_UNSUPPORTED, "unsupported element type");
    }
    td->data = p;
    return true;
}

bool onnx_tensor_decode(const OTensor *t, const char *dir, Arena *a, TensorData *td, Diag *d)
{
    memset(td, 0, sizeof *td);
    td->dtype = onnx_dtype(t->data_type);
    if (td->dtype == DT_INVALID)
        return diag_setk(d, DIAG_UNSUPPORTED, "element type %s is not supported",
                         onnx_type_name(t->data_type));
    if (t->n_dims > MAX_RANK)
        return diag_set(d, "rank %zu exceeds %d", t->n_dims, MAX_RANK);
    if (t->segment)
        return diag_setk(d, DIAG_UNSUPPORTED, "segmented tensors are not supported");
    td->rank = (int)t->n_dims;
    size_t numel = 1;
    for (size_t i = 0; i < t->n_dims; i++) {
        if (t->dims[i] < 0 || !size_mul(numel, (size_t)t->dims[i], &numel))
            return diag_set(d, "bad dimension %lld", (long long)t->dims[i]);
        td->shape[i] = t->dims[i];
    }
    td->numel = numel;
    if (!size_mul(numel, dtype_size(td->dtype), &td->nbytes))
        return diag_set(d, "too large");
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return decode_external(t, dir, td, d);
    if (t->has_raw_data) {
        if (t->raw_data.len != td->nbytes)
            return diag_set(d, "raw_data has %zu bytes, but its shape needs %zu", t->raw_data.len,
                            td->nbytes);
        td->data = t->raw_data.len ? (const void *)t->raw_data.data : "";
        return true;
    }
    return decode_typed(t, a, td, d);
}

bool onnx_read_tensor_file(const char *path, Tensor *t, char **name, Diag *d)
{
    char err[512];
    size_t len;
    if (name)
        *name = NULL;
    memset(t, 0, sizeof *t);
    void *buf = onnx_read_all(path, &len, err, sizeof err);
    if (!buf)
        return diag_setk(d, DIAG_RESOURCE, "%s: error: %s", path, err);
    OTensor *tp = onnx__tensor_proto__unpack(NULL, len, buf);
    free(buf);
    if (!tp)
        return diag_setk(d, DIAG_PARSE, "%s: error: cannot parse ONNX tensor", path);
    char *dir = strdup(path), *slash = dir ? strrchr(dir, '/') : NULL;
    if (slash)
        *slash = 0;
    Arena a;
    arena_init(&a);
    TensorData td;
    Diag e = {0};
    bool ok = dir && onnx_tensor_decode(tp, slash ? dir : ".", &a, &td, &e);
    if (!dir) {
        diag_oom(d);
        memset(&td, 0, sizeof td);
    } else if (!ok) {
        diag_setk(d, e.kind, "%s: error: tensor: %s", path, e.msg);
    } else if (!tensor_alloc(t, td.dtype, td.rank, td.shape)) {
        ok = diag_setk(d, DIAG_RESOURCE, "%s: error: tensor too large", path);
    } else if (name && tp->name && *tp->name && !(*name = strdup(tp->name))) {
        tensor_free(t);
        ok = diag_oom(d);
    } else if (td.nbytes) {
        memcpy(t->data, td.data, td.nbytes);
    }
    onnx_map_free(td.map);
    arena_free(&a);
    free(dir);
    onnx__tensor_proto__free_unpacked(tp, NULL);
    return ok;
}

bool onnx_write_tensor_file(const char *path, const Tensor *t, const char *name, Diag *d)
{
    OTensor tp;
    onnx__tensor_proto__init(&tp);
    int64_t dims[MAX_RANK];
    if (t->rank < 0 || t->rank > MAX_RANK || onnx_type_of(t->dtype) == 0)
        return diag_set(d, "%s: error: cannot write this tensor as ONNX", path);
    for (int i = 0; i < t->rank; i++)
        dims[i] = t->shape[i];
    tp.n_dims = (size_t)t->rank;
    tp.dims = dims;
    tp.has_data_type = 1;
    tp.data_type = onnx_type_of(t->dtype);
    tp.name = (char *)(name ? name : "");
    tp.has_raw_data = 1;
    tp.raw_data.len = t->nbytes;
    tp.raw_data.data = t->data;
    size_t n = onnx__tensor_proto__get_packed_size(&tp);
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf)
        return diag_setk(d, DIAG_RESOURCE, "%s: error: out of memory", path);
    onnx__tensor_proto__pack(&tp, buf);
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(buf, 1, n, f) == n;
    if (f && fclose(f) != 0)
        ok = false;
    free(buf);
    if (!ok)
        return diag_setk(d, DIAG_RESOURCE, "%s: error: cannot write", path);
    return true;
}
