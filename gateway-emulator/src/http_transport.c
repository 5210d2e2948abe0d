/* http_transport.c - the http:// transport's table (transport.h) and its outputs: the "http"
 * member of summary.json and DIR/http.csv (per request: when it began waiting for a connection,
 * whether it opened one). The work is in http_prep.c (before the start) and http_conn.c. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "http.h"

void *http_attach(loop_t *L, ge_t *g) {
    http_t *H = g->http;
    H->L = L;
    /* per-request values: each connection fills a copy of its request (no allocation later) */
    if (H->slots && !(H->copies = malloc(H->nconns * (size_t)H->copy_len)))
        return NULL;
    for (size_t i = 0; i < H->nconns; i++) /* the pool opened before the start */
        if (H->c[i].state == CS_FREE && loop_watch(L, H->c[i].fd, EPOLLIN, (uint32_t)i) < 0)
            return NULL;
    return H;
}

void http_detach(void *ts) {
    http_t *H = ts;
    for (size_t i = 0; i < H->nconns; i++)
        if (H->c[i].fd >= 0)
            close(H->c[i].fd);
    free(H->copies);
    H->copies = NULL;
    if (H->stamp_pin >= 0) /* after the last connection: no read needs stamps any more */
        close(H->stamp_pin);
    H->stamp_pin = -1;
}

static int64_t http_sent_ns(const ge_t *g, uint32_t idx) {
    return (g->reqs[idx].flags & RF_SENT) ? g->reqs[idx].sent_ns : INT64_MIN;
}

void http_summary(const ge_t *g, FILE *f) {
    const http_t *H = g->http;
    const http_counts_t *n = &H->n;
    uint64_t newconn = 0;
    for (size_t i = 0; i < g->n; i++)
        newconn += (g->reqs[i].flags & RF_NEWCONN) != 0;
    fprintf(f,
            "  \"http\": {\"connections_per_target\": %d, \"connection\": \"%s\", "
            "\"connections\": %zu, \"connects\": %llu, \"connect_failures\": %llu, "
            "\"refused\": %llu, \"resets\": %llu, \"closed_by_server\": %llu, "
            "\"protocol_errors\": %llu, \"queued\": %llu, \"new_connection_requests\": %llu, "
            "\"bytes_received\": %llu, \"status_classes\": {\"1xx\": %llu, \"2xx\": %llu, "
            "\"3xx\": %llu, \"4xx\": %llu, \"5xx\": %llu}, \"headers\": %d, "
            "\"body_template\": %s},\n",
            g->http_opt.conns, g->http_opt.per_request ? "per-request" : "keep-alive", H->nconns,
            (unsigned long long)n->connects, (unsigned long long)n->connect_failures,
            (unsigned long long)n->refused, (unsigned long long)n->resets,
            (unsigned long long)n->closed_by_server, (unsigned long long)n->protocol_errors,
            (unsigned long long)n->queued, (unsigned long long)newconn,
            (unsigned long long)n->bytes_in, (unsigned long long)n->by_class[1],
            (unsigned long long)n->by_class[2], (unsigned long long)n->by_class[3],
            (unsigned long long)n->by_class[4], (unsigned long long)n->by_class[5],
            g->http_opt.nheaders, g->http_opt.body_file ? "true" : "false");
}

/* http.csv: index,queued_ns,new_connection (queued_ns relative to the start, empty when the
 * request found a connection at its instant) */
int http_write_outputs(const ge_t *g) {
    char path[OUT_PATH_MAX];
    FILE *f = outfile_open(g, "http.csv", path);
    if (!f)
        return 1;
    fputs("index,queued_ns,new_connection\n", f);
    for (size_t i = 0; i < g->n; i++) {
        const req_t *r = &g->reqs[i];
        if (r->flags & RF_QUEUED)
            fprintf(f, "%zu,%lld,%d\n", i, (long long)r->queued_ns, (r->flags & RF_NEWCONN) != 0);
        else
            fprintf(f, "%zu,,%d\n", i, (r->flags & RF_NEWCONN) != 0);
    }
    return outfile_close(f, path);
}

const struct transport transport_http = {
    .name = "http",
    .epoll_only = 1,
    .timeout_from_schedule = 1,
    .prepare = http_prepare,
    .prestart = http_prestart,
    .attach = http_attach,
    .send = http_send,
    .on_event = http_on_event,
    .timers = http_timers,
    .next_deadline = http_next_deadline,
    .on_finish = http_on_finish,
    .detach = http_detach,
    .sent_ns = http_sent_ns,
    .summary = http_summary,
    .write_outputs = http_write_outputs,
};
