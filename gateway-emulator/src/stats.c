/* stats.c - outcome counts, send-lag percentiles and the one nearest-rank percentile of the
 * outputs (dtls handshakes use it too); after the run, off the hot path. */
#include <stdlib.h>

#include "ge.h"

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

void sort_i64(int64_t *v, size_t n) {
    qsort(v, n, sizeof *v, cmp_i64);
}

/* nearest-rank percentile of a sorted array (n >= 1) */
int64_t pct_nearest(const int64_t *v, size_t n, double q) {
    size_t k = (size_t)(q * (double)n + 0.999999999);
    if (k < 1)
        k = 1;
    if (k > n)
        k = n;
    return v[k - 1];
}

void stats_send_lag(const ge_t *g, lag_stats_t *out) {
    out->p50 = out->p90 = out->p99 = out->p999 = out->max = 0;
    int64_t *v = malloc((g->n ? g->n : 1) * sizeof *v);
    if (!v)
        return;
    size_t m = 0;
    for (size_t i = 0; i < g->n; i++)
        if (g->reqs[i].flags & RF_SENT)
            v[m++] = g->reqs[i].sent_ns - g->reqs[i].sched_ns;
    if (m) {
        sort_i64(v, m);
        out->p50 = (double)pct_nearest(v, m, 0.50) / 1e3;
        out->p90 = (double)pct_nearest(v, m, 0.90) / 1e3;
        out->p99 = (double)pct_nearest(v, m, 0.99) / 1e3;
        out->p999 = (double)pct_nearest(v, m, 0.999) / 1e3;
        out->max = (double)v[m - 1] / 1e3;
    }
    free(v);
}

void stats_outcomes(const ge_t *g, uint64_t counts[O_COUNT]) {
    for (int i = 0; i < O_COUNT; i++)
        counts[i] = 0;
    for (size_t i = 0; i < g->n; i++)
        counts[g->reqs[i].outcome < O_COUNT ? g->reqs[i].outcome : O_NONE]++;
}
