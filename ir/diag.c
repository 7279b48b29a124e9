/*
 * diag.c — error messages. A Diag keeps the first error reported into it;
 * everything that handles user input reports through one.
 */
#include "ir/ir.h"

#include <stdarg.h>

bool diag_set(Diag *d, const char *fmt, ...)
{
    if (!d || d->set)
        return false;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->msg, sizeof d->msg, fmt, ap);
    va_end(ap);
    d->set = true;
    return false;
}
