/* notify_interval.c - see notify_interval.h. */
#include "notify_interval.h"

#include <math.h>

double notify_uniform01(uint64_t *rng) {      /* xorshift64*, (0, 1) */
    *rng ^= *rng >> 12;
    *rng ^= *rng << 25;
    *rng ^= *rng >> 27;
    return ((double)((*rng * 2685821657736338717ULL) >> 11) + 0.5) / 9007199254740992.0;
}

uint64_t notify_interval_ns(const struct resource *res, uint64_t *rng) {
    double m = (double)res->notify_mean_ns, j = (double)res->notify_jitter_ns, v = m;
    switch (res->notify_dist) {
    case NOTIFY_UNIFORM: v = m - j + 2.0 * j * notify_uniform01(rng); break;
    case NOTIFY_EXP: v = -m * log(notify_uniform01(rng)); break;
    case NOTIFY_NORMAL: /* Box-Muller, truncated at 0 by resampling */
        for (int k = 0; k < 16; k++) {
            v = m + j * sqrt(-2.0 * log(notify_uniform01(rng))) *
                        cos(6.283185307179586 * notify_uniform01(rng));
            if (v >= 0)
                break;
        }
        if (v < 0)
            v = 0;
        break;
    default: break;
    }
    return (uint64_t)(v < 1 ? 1 : v);
}

uint64_t notify_first_ns(const struct resource *res, uint64_t *rng) {
    double m = (double)res->notify_mean_ns, j = (double)res->notify_jitter_ns;
    if (res->notify_dist == NOTIFY_EXP)     /* memoryless: the residual is an interval */
        return notify_interval_ns(res, rng);
    /* a length-biased interval by rejection (accept x with probability x / bound), then a
     * uniform point in it; the normal's tail beyond 6 sd is ignored */
    double bound = res->notify_dist == NOTIFY_UNIFORM ? m + j
                 : res->notify_dist == NOTIFY_NORMAL  ? m + 6.0 * j : m;
    double len = m;
    for (int k = 0; k < 1000 && bound > 0; k++) {
        double x = (double)notify_interval_ns(res, rng);
        if (notify_uniform01(rng) * bound <= x) {
            len = x;
            break;
        }
    }
    double v = notify_uniform01(rng) * len;
    return (uint64_t)(v < 1 ? 1 : v);
}
