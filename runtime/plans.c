/*
 * plans.c — the device libraries' plan tables (plans.h).
 */
#include "runtime/plans.h"

#include <stdint.h>
#include <string.h>

static const void *key_of(const DiscPlan *p)
{
    return p + 1;
}

static unsigned hash(const void *key, size_t n)
{
    const unsigned char *c = key;
    uint32_t x = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        x = (x ^ c[i]) * 16777619u;
    return x % DISC_PLAN_BUCKETS;
}

void disc_plans_clear(DiscPlans *t)
{
    for (int i = 0; i < DISC_PLAN_BUCKETS; i++)
        while (t->bucket[i]) {
            DiscPlan *p = t->bucket[i];
            t->bucket[i] = p->next;
            t->free(p);
        }
    t->n = 0;
}

DiscPlan *disc_plans_get(DiscPlans *t, DiscRt *rt, DiscGpu *g, const void *key,
                         DiscPlan *(*make)(DiscRt *rt, void *ctx, const void *key), void *ctx)
{
    unsigned hb = hash(key, t->keysize);
    for (DiscPlan *p = t->bucket[hb]; p; p = p->next)
        if (!memcmp(key_of(p), key, t->keysize))
            return p;
    if (t->n >= DISC_PLANS_MAX) { /* full: start again once the queued calls are done */
        if (disc_gpu_sync(rt, g) != 0)
            return NULL;
        disc_plans_clear(t);
    }
    DiscPlan *p = make(rt, ctx, key);
    if (p) {
        p->next = t->bucket[hb];
        t->bucket[hb] = p;
        t->n++;
    }
    return p;
}
