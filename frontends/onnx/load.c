/*
 * load.c — reading model files and external-data side files.
 *
 * A model file is mapped (or, where it cannot be, read) whole and
 * unpacked by protobuf-c; the unpacked ModelProto then owns its own copy of
 * every raw_data buffer, which the graph references in place, so the
 * file's mapping is dropped after unpacking. (Large raw_data is taken out
 * of unpacking and loaded apart: weights.c.) External data
 * (TensorProto.data_location = EXTERNAL) is mapped read-only from the side
 * file and the mapping is kept by the graph.
 */
#include "frontends/onnx/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* protobuf-c's allocations (onnx_pb_alloc): from malloc, except the
 * large ones, a weight's raw_data, which come on huge pages (alloc_huge):
 * faulted in and cleared 4 KiB at a time, GPT-2's 650 MB of weights took a
 * fifth of its load in the kernel's page-fault path. A failed allocation
 * is recorded, so the caller can say "out of memory" where protobuf-c only
 * returns NULL. */
static void *pb_alloc(void *data, size_t size)
{
    void *p = size >= HUGE_PAGE ? alloc_huge(size) : malloc(size ? size : 1);
    if (!p && data)
        *(bool *)data = true;
    return p;
}

static void pb_free(void *data, void *p)
{
    free(p);
}

ProtobufCAllocator onnx_pb_alloc(bool *failed)
{
    return (ProtobufCAllocator){.alloc = pb_alloc, .free = pb_free, .allocator_data = failed};
}

void *onnx_map_all(const char *path, size_t *len, struct stat *st)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return NULL;
    void *p = MAP_FAILED;
    /* not populated: a load that takes the large weights apart
     * (weights.c) reads little more than the graph's structure */
    if (fstat(fd, st) == 0 && S_ISREG(st->st_mode) && st->st_size > 0 && (uint64_t)st->st_size <= SIZE_MAX)
        p = mmap(NULL, (size_t)st->st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return NULL;
    *len = (size_t)st->st_size;
    return p;
}

void *onnx_read_all(const char *path, size_t *len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open: %s", strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap)
            break;
        if (cap > SIZE_MAX / 2) {
            free(buf);
            buf = NULL;
            break;
        }
        char *nb = realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    bool bad = buf && ferror(f);
    fclose(f);
    if (!buf || bad) {
        free(buf);
        snprintf(err, errlen, "cannot read: %s", buf ? "I/O error" : "out of memory");
        return NULL;
    }
    *len = n;
    return buf;
}

bool onnx_map_file(const char *path, int64_t offset, int64_t length, OnnxMap *m, Diag *d)
{
    memset(m, 0, sizeof *m);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return diag_setk(d, DIAG_RESOURCE, "cannot open external data '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        diag_setk(d, DIAG_RESOURCE, "cannot stat external data '%s': %s", path, strerror(errno));
        close(fd);
        return false;
    }
    int64_t size = (int64_t)st.st_size;
    if (offset < 0 || offset > size || length < -1 || (length >= 0 && length > size - offset)) {
        diag_set(d, "external data '%s': offset %lld length %lld outside the file (%lld bytes)", path,
                 (long long)offset, (long long)length, (long long)size);
        close(fd);
        return false;
    }
    if (length < 0)
        length = size - offset;
    if (length == 0) {
        close(fd);
        m->data = "";
        return true;
    }
    long page = sysconf(_SC_PAGESIZE);
    int64_t start = page > 0 ? offset - offset % page : offset;
    size_t len = (size_t)(offset - start + length);
    void *p = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, (off_t)start);
    close(fd);
    if (p == MAP_FAILED) {
        return diag_setk(d, DIAG_RESOURCE, "cannot map external data '%s': %s", path, strerror(errno));
    }
    m->base = p;
    m->len = len;
    m->data = (char *)p + (offset - start);
    return true;
}

void onnx_map_free(void *p)
{
    OnnxMap *m = p;
    if (!m)
        return;
    if (m->base)
        munmap(m->base, m->len);
    free(m->heap);
    free(m);
}
