/*
 * arena.c — the bump allocator that owns a graph's memory, and the
 * overflow-checked size arithmetic every allocation goes through.
 *
 * Blocks are malloc'd and chained newest first; arena_free releases them
 * all at once. A request larger than the default block gets a block of its
 * own, so big arrays waste nothing.
 */
#include "ir/ir.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

enum { BLOCK_SIZE = 64 * 1024, ALIGN = 16 };

struct ArenaBlock {
    ArenaBlock *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
};

void *alloc_huge(size_t bytes)
{
    /* not rounded up to whole huge pages: a 768 x 768 f32 weight (2.25
     * MiB) took two, and the kernel cleared 4 MiB for it on first touch
     * (BERT-base's load cleared 90 MB that held nothing); the part past
     * the last whole huge page comes in 4 KiB pages */
    size_t size = bytes ? (bytes + 4095) / 4096 * 4096 : 4096;
    if (size < bytes)
        return NULL;
    void *p = NULL;
    if (posix_memalign(&p, HUGE_PAGE, size))
        return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, size, MADV_HUGEPAGE); /* advice only: its failure changes nothing */
#endif
    return p;
}

bool size_mul(size_t a, size_t b, size_t *out) { return !__builtin_mul_overflow(a, b, out); }
bool size_add(size_t a, size_t b, size_t *out) { return !__builtin_add_overflow(a, b, out); }

void arena_init(Arena *a)
{
    a->head = NULL;
    a->used = 0;
    a->failed = false;
}

void arena_free(Arena *a)
{
    ArenaBlock *b = a->head;
    while (b) {
        ArenaBlock *next = b->next;
        free(b);
        b = next;
    }
    a->head = NULL;
    a->used = 0;
    a->failed = false;
}

void *arena_alloc(Arena *a, size_t size)
{
    size_t need;
    if (!size_add(size, ALIGN - 1, &need)) {
        a->failed = true;
        return NULL;
    }
    need &= ~(size_t)(ALIGN - 1);
    if (need == 0)
        need = ALIGN;

    ArenaBlock *b = a->head;
    if (!b || b->size - b->used < need) {
        size_t bsize = need > BLOCK_SIZE ? need : BLOCK_SIZE;
        size_t total;
        if (!size_add(sizeof(ArenaBlock), bsize, &total) || !(b = malloc(total))) {
            a->failed = true;
            return NULL;
        }
        b->size = bsize;
        b->used = 0;
        /* A big private block goes behind the head so the head keeps
         * serving small requests. */
        if (a->head && bsize > BLOCK_SIZE) {
            b->next = a->head->next;
            a->head->next = b;
        } else {
            b->next = a->head;
            a->head = b;
        }
    }
    void *p = b->data + b->used;
    b->used += need;
    a->used += need;
    memset(p, 0, need);
    return p;
}

void *arena_array(Arena *a, size_t n, size_t size)
{
    size_t total;
    if (!size_mul(n, size, &total))
        return NULL;
    return arena_alloc(a, total);
}

char *arena_strndup(Arena *a, const char *s, size_t n)
{
    size_t total;
    if (!size_add(n, 1, &total))
        return NULL;
    char *p = arena_alloc(a, total);
    if (p && n) /* an empty string may come as NULL (protobuf-c's empty bytes) */
        memcpy(p, s, n);
    return p;
}

char *arena_strdup(Arena *a, const char *s) { return arena_strndup(a, s, strlen(s)); }

char *arena_printf(Arena *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return NULL;
    char *p = arena_alloc(a, (size_t)n + 1);
    if (!p)
        return NULL;
    va_start(ap, fmt);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return p;
}
