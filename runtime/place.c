/*
 * place.c — the memory plan's slots laid out in one block at a run's sizes.
 *
 * The compiler's plan (passes/memplan.c) knows which groups each slot is
 * live between but not, with every dim symbolic, which slot is the larger:
 * a CNN's 112 x 112 slots and its 7 x 7 ones are different expressions. So
 * the host flow computes every slot's size, and here the slots get their
 * offsets, greedily by size: the largest first, each at the lowest offset
 * of the smallest gap that holds it among the slots live at the same time
 * as it (else past the last of them). Two slots live at once never overlap;
 * one live only after another has died may take its bytes. MobileNetV2 at
 * 1 x 224 x 224: 30 MB laid end to end, 6.4 MB placed, so a run's working
 * set stays in the last-level cache.
 *
 * The result depends on the sizes and lifetimes only (ties broken by slot
 * index), so a shape runs with the same layout every time, and a run
 * context remembers the last layout (disc_rt_place): a model run again at
 * the same shapes places nothing.
 */
#include "runtime/rt.h"

#include <stdbool.h>
#include <stdlib.h>

int64_t disc_place(int n, const int64_t *bytes, const int32_t *live, int64_t *off)
{
    if (n <= 0)
        return 0;
    int *order = malloc(2 * (size_t)n * sizeof *order);
    if (!order)
        return -1;
    int *placed = order + n; /* the slots placed so far, by offset */
    for (int i = 0; i < n; i++) {
        if (bytes[i] < 0) {
            free(order);
            return -1;
        }
        order[i] = i;
    }
    /* larger first, then the earlier first group, then the lower index
     * (by insertion: qsort takes no context, and n is some dozens) */
    for (int k = 1; k < n; k++) {
        int x = order[k], j = k - 1;
        while (j >= 0) {
            int y = order[j];
            bool after = bytes[y] < bytes[x] || (bytes[y] == bytes[x] && (live[2 * y] > live[2 * x] ||
                                                                         (live[2 * y] == live[2 * x] && y > x)));
            if (!after)
                break;
            order[j + 1] = y;
            j--;
        }
        order[j + 1] = x;
    }
    int np = 0;
    int64_t total = 0;
    for (int k = 0; k < n; k++) {
        int s = order[k];
        int32_t first = live[2 * s], last = live[2 * s + 1];
        int64_t at = 0, best = -1, best_gap = INT64_MAX;
        for (int q = 0; q < np; q++) {
            int o = placed[q];
            if (live[2 * o] > last || live[2 * o + 1] < first)
                continue; /* never live at the same time */
            int64_t gap = off[o] - at;
            if (gap >= bytes[s] && gap < best_gap) {
                best = at;
                best_gap = gap;
            }
            if (off[o] > INT64_MAX - bytes[o]) {
                free(order);
                return -1;
            }
            if (off[o] + bytes[o] > at)
                at = off[o] + bytes[o];
        }
        if (best < 0)
            best = at;
        if (best > INT64_MAX - bytes[s]) {
            free(order);
            return -1;
        }
        off[s] = best;
        if (best + bytes[s] > total)
            total = best + bytes[s];
        int q = np++; /* keep placed[] ordered by offset */
        while (q > 0 && off[placed[q - 1]] > best) {
            placed[q] = placed[q - 1];
            q--;
        }
        placed[q] = s;
    }
    free(order);
    return total;
}
