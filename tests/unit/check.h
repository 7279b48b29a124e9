/*
 * check.h — the unit-test harness: CHECK(cond) records a failure with its
 * location and goes on; a test file's main ends with `return check_done();`,
 * which prints "N passed, N failed" and returns the exit status for ctest.
 */
#ifndef DISC_CHECK_H
#define DISC_CHECK_H

#include <stdio.h>

static int check_pass, check_fail;

#define CHECK(cond)                                                        \
    do {                                                                   \
        if (cond) {                                                        \
            check_pass++;                                                  \
        } else {                                                           \
            check_fail++;                                                  \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__,         \
                    __LINE__, #cond);                                      \
        }                                                                  \
    } while (0)

#define CHECK_MSG(cond, ...)                                               \
    do {                                                                   \
        if (cond) {                                                        \
            check_pass++;                                                  \
        } else {                                                           \
            check_fail++;                                                  \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__,         \
                    __LINE__, #cond);                                      \
            fprintf(stderr, __VA_ARGS__);                                  \
            fputc('\n', stderr);                                           \
        }                                                                  \
    } while (0)

static inline int check_done(void)
{
    printf("%d passed, %d failed\n", check_pass, check_fail);
    return check_fail ? 1 : 0;
}

#endif
