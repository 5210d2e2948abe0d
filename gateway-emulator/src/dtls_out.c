/* dtls_out.c - the DTLS outputs: requests.csv's sent_ns in per-request mode (the first
 * application record, not the ClientHello), handshakes.csv and the summary's "dtls" member. */
#include <stdio.h>
#include <stdlib.h>

#include "dtls_int.h"

static const char *HS_OUTCOME[] = {"none", "ok", "failed", "timeout"};

int64_t dtls_app_sent_ns(const ge_t *g, uint32_t idx) {
    if (!g->dtls || !g->dtls->app_sent)
        return (g->reqs[idx].flags & RF_SENT) ? g->reqs[idx].sent_ns : INT64_MIN;
    return g->dtls->app_sent[idx];
}

int dtls_write(const ge_t *g) {
    struct dtls_s *D = g->dtls;
    if (!D)
        return 0;
    if (!D->loop_marked) {
        D->allocs_end = dtls_allocs();
        D->loop_marked = 1;
    }
    char path[OUT_PATH_MAX];
    FILE *f = outfile_open(g, "handshakes.csv", path);
    if (!f)
        return 1;
    fputs("session,device,ep,start_ns,end_ns,outcome,request\n", f);
    for (size_t i = 0; i < D->nhs; i++) {
        const hsrec_t *h = &D->hs[i];
        fprintf(f, "%u,%u,%u,%lld,", h->session, h->device, h->ep,
                (long long)(h->start - g->start_mono));
        if (h->outcome)
            fprintf(f, "%lld", (long long)(h->end - g->start_mono));
        fprintf(f, ",%s,%lld\n", HS_OUTCOME[h->outcome ? h->outcome : H_TIMEOUT],
                (long long)h->req);
    }
    return outfile_close(f, path);
}

/* nearest-rank percentile in µs, 0 for no values */
static double pct_us(const int64_t *v, size_t n, double q) {
    return n ? (double)pct_nearest(v, n, q) / 1e3 : 0.0;
}

void dtls_summary(const ge_t *g, FILE *f) {
    struct dtls_s *D = g->dtls;
    if (!D) /* plain CoAP: the summary stays as it was */
        return;
    int64_t *v = malloc((D->nhs ? D->nhs : 1) * sizeof *v);
    size_t ok = 0, to = 0, sessions = 0;
    for (size_t i = 0; i < D->nhs; i++) {
        if (D->hs[i].outcome == H_OK && v)
            v[ok++] = D->hs[i].end - D->hs[i].start;
        else if (D->hs[i].outcome != H_OK)
            to += D->hs[i].outcome == H_TIMEOUT || !D->hs[i].outcome;
    }
    if (v)
        sort_i64(v, ok);
    sessions = D->nhs;
    uint64_t sent = 0;
    for (size_t i = 0; i < g->n; i++)
        sent += (g->reqs[i].flags & RF_SENT) != 0;
    uint64_t loop_allocs = (D->loop_marked ? D->allocs_end : dtls_allocs()) - D->allocs_start;
    fprintf(f,
            "  \"dtls\": {\"mode\": \"%s\", \"sessions\": %zu, \"handshakes_ok\": %zu, "
            "\"handshakes_failed\": %zu, \"handshakes_timeout\": %zu, \"handshake_p50_us\": %.3f, "
            "\"handshake_p99_us\": %.3f, \"handshake_max_us\": %.3f, \"cipher\": \"%s\", "
            "\"slots\": %zu, \"slots_exhausted\": %llu, \"closed_by_server\": %llu, "
            "\"openssl_allocs_in_loop\": %llu, \"openssl_allocs_per_request\": %.2f, "
            "\"failure\": ",
            D->mode == DTLS_REUSE ? "reuse" : "per-request", sessions, ok, D->nhs - ok, to,
            pct_us(v, ok, 0.5), pct_us(v, ok, 0.99), ok ? (double)v[ok - 1] / 1e3 : 0.0,
            D->cipher, D->mode == DTLS_REUSE ? 0 : D->nsess,
            (unsigned long long)D->slots_exhausted, (unsigned long long)D->closed_by_peer,
            (unsigned long long)loop_allocs, sent ? (double)loop_allocs / (double)sent : 0.0);
    if (D->failure[0]) {
        json_str(f, D->failure); /* OpenSSL's and our own texts: no control characters */
    } else {
        fputs("null", f);
    }
    fputs("},\n", f);
    free(v);
}
