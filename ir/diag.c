/*
 * diag.c — error messages. A Diag keeps the first error reported into it,
 * with its kind and, when it is about a place in a model, its location;
 * everything that handles user input reports through one.
 */
#include "ir/ir.h"

#include <stdarg.h>
#include <string.h>

static bool vset(Diag *d, DiagKind k, const char *fmt, va_list ap)
{
    if (!d || d->set)
        return false;
    vsnprintf(d->msg, sizeof d->msg, fmt, ap);
    d->kind = k;
    memset(&d->loc, 0, sizeof d->loc);
    d->set = true;
    return false;
}

bool diag_set(Diag *d, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vset(d, DIAG_MODEL, fmt, ap);
    va_end(ap);
    return false;
}

bool diag_setk(Diag *d, DiagKind k, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vset(d, k, fmt, ap);
    va_end(ap);
    return false;
}

bool diag_oom(Diag *d) { return diag_setk(d, DIAG_RESOURCE, "error: out of memory"); }

bool diag_copy(Diag *d, const Diag *from)
{
    if (d && !d->set && from && from->set && d != from)
        *d = *from;
    return false;
}

void diag_locate(Diag *d, const char *file, int line, int col, int node)
{
    if (!d || !d->set)
        return;
    snprintf(d->loc.file, sizeof d->loc.file, "%s", file ? file : "");
    d->loc.line = line;
    d->loc.col = col;
    d->loc.node = node;
}

bool diag_blame_memory(Diag *d)
{
    if (d && d->set)
        d->kind = DIAG_RESOURCE;
    else
        diag_oom(d);
    return false;
}

bool diag_arena_failed(Diag *d, const Arena *a)
{
    if (a->failed)
        diag_blame_memory(d);
    return a->failed;
}

const char *diag_kind_name(DiagKind k)
{
    static const char *const names[] = {
        [DIAG_NONE] = "none",         [DIAG_PARSE] = "parse",   [DIAG_MODEL] = "model",
        [DIAG_UNSUPPORTED] = "unsupported", [DIAG_SHAPE] = "shape", [DIAG_ARG] = "argument",
        [DIAG_RESOURCE] = "resource", [DIAG_INTERNAL] = "internal",
    };
    return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "?";
}
