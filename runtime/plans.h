/*
 * plans.h — the device libraries' plans (cublaslt.c, cudnn.c): what a
 * distinct call needs made once (descriptors, the algorithm a heuristic
 * chose), kept in a hash table by the call's key, with the device.
 *
 * A library's plan struct starts with a DiscPlan and its key right after
 * it (a fixed-size struct, compared as bytes, so zeroed before it is
 * filled). The table holds at most DISC_PLANS_MAX; a call past that waits
 * for the device (the queued calls, and DISC_PROFILE's timings, which hold
 * plans' names) and starts the table again.
 */
#ifndef DISC_PLANS_H
#define DISC_PLANS_H

#include "runtime/rt.h"

#include <stddef.h>

enum { DISC_PLANS_MAX = 1024, DISC_PLAN_BUCKETS = 256 };

typedef struct DiscPlan {
    struct DiscPlan *next;
} DiscPlan;

typedef struct DiscPlans {
    DiscPlan *bucket[DISC_PLAN_BUCKETS];
    int n;
    size_t keysize;
    void (*free)(DiscPlan *p);
} DiscPlans;

/* The plan for key: the table's, else make(rt, ctx, key) added to it
 * (NULL, with the error in rt, where make fails or the wait does). */
DiscPlan *disc_plans_get(DiscPlans *t, DiscRt *rt, DiscGpu *g, const void *key,
                         DiscPlan *(*make)(DiscRt *rt, void *ctx, const void *key), void *ctx);
void disc_plans_clear(DiscPlans *t);

#endif
