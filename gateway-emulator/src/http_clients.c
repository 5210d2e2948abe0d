/* http_clients.c - the closed loop over HTTP/1.1 (--clients N with http://): N virtual clients
 * (pace.c says when each issues what), each owning one TCP connection (client k is connection
 * k: the same source endpoint for all its requests, as a wrk connection), one request in flight.
 *
 * Keep-alive (default): the connection is opened before the start (http_prestart) and reused;
 * a client whose next target is another endpoint closes it and connects to that one (the
 * request is then marked RF_NEWCONN: its R includes the handshake). With
 * --http-connection-per-request every request opens its own connection and the server closes it
 * (Connection: close), as a browser without keep-alive. A connection the server closed is
 * opened again by the next request. The wire, the parser, the outcomes, the kernel receive
 * stamps and http.csv are the open loop's (http_conn.c); only the pacing differs. */
#include <stdio.h>
#include <stdlib.h>

#include "clock.h" /* common/clock.h */
#include "http.h"
#include "pace.h"

static pace_t P; /* prepare() -> attach() -> the outputs */

/* pace.c's send: client k's request r with trace line tmpl's bytes on the client's connection */
static void issue(void *ctx, uint32_t k, req_t *r, uint32_t tmpl) {
    http_t *H = ctx;
    hconn_t *c = &H->c[k];
    if (c->state == CS_FREE && c->ep != r->ep) /* another target: this connection is no use */
        http_close_conn(c);
    c->ep = r->ep;
    int64_t t;
    int rc = http_start_on(H, c, (uint32_t)(r - H->g->reqs), tmpl, &t);
    if (rc == 1)
        loop_mark_sent(H->L, r, t);
    else if (rc == 0)
        loop_finish(H->L, r, O_ERROR); /* local failure: the client backs off (pace.c) */
}

/* one connection per client, none per target; the record table reserved */
static int hc_prepare(ge_t *g) {
    if (g->http_opt.conns) {
        fprintf(stderr, "gateway-emulator: --http-connections with --clients: every client owns "
                        "one connection, expected no --http-connections (or no --clients)\n");
        return 2;
    }
    int rc = limits_check_sockets((size_t)g->closed.clients, "--clients");
    if (!rc)
        rc = http_render_requests(g);
    if (rc)
        return rc;
    http_t *H = g->http;
    H->nconns = (size_t)g->closed.clients;
    H->c = calloc(H->nconns, sizeof *H->c);
    H->eps = calloc(g->neps ? g->neps : 1, sizeof *H->eps); /* no pools, no queues: all empty */
    H->pump = malloc((g->neps ? g->neps : 1) * sizeof *H->pump);
    if (!H->c || !H->eps || !H->pump) {
        fprintf(stderr, "gateway-emulator: out of memory preparing %d clients\n",
                g->closed.clients);
        return 1;
    }
    if ((rc = pace_prepare(&P, g)))
        return rc;
    for (size_t k = 0; k < H->nconns; k++) { /* connected before the start to its first target */
        H->c[k].fd = -1;
        H->c[k].ep = P.tmpl[pace_first_tmpl(&P, (uint32_t)k)].ep;
    }
    return 0;
}

static void *hc_attach(loop_t *L, ge_t *g) {
    http_t *H = http_attach(L, g);
    return H && pace_attach(&P, L) == 0 ? H : NULL;
}

static void hc_detach(void *ts) {
    http_detach(ts);
    pace_detach(&P);
}

static int hc_send(void *ts, uint32_t idx, int64_t *t) {
    (void)ts, (void)idx, (void)t;
    return 0; /* no scheduled requests: the clients issue their own */
}

/* Answers only: the clients they freed send after the whole epoll batch was read (the loop's
 * timers() pass right after it), as wrk does (it reads a batch, then writes). Sending from here
 * interleaved each send (which runs the server's receive path in this thread, on loopback)
 * between the reads; measured against wrk at 10 and 100 connections that cost up to 0.3 of the
 * throughput against a one-worker nginx and 6 % more CPU per request (docs/PERFORMANCE.md). */
static void hc_on_event(void *ts, uint32_t tag, uint32_t events) {
    http_on_event(ts, tag, events);
}

static void hc_timers(void *ts, int64_t now) {
    pace_issue_due(&P, now, issue, ts);
}

static int64_t hc_next_deadline(const void *ts) {
    (void)ts;
    return pace_next_deadline(&P, INT64_MAX);
}

/* the loop ended the request (timeout, interrupted): the connection it held is closed (its
 * answer may still come); then the client thinks */
static int hc_on_finish(void *ts, uint32_t idx, int outcome, int64_t now) {
    http_t *H = ts;
    req_t *r = &H->g->reqs[idx];
    if (r->conn) {
        http_close_conn(&H->c[r->conn - 1]);
        r->conn = 0;
    }
    pace_finished(&P, idx, outcome, now);
    return outcome;
}

static int hc_running(const void *ts) {
    (void)ts;
    return P.running;
}

static void hc_summary(const ge_t *g, FILE *f) {
    pace_summary(g, P.ntmpl, f);
    http_summary(g, f);
}

const struct transport transport_http_closed = {
    .name = "http-closed",
    .epoll_only = 1,
    .timeout_from_schedule = 1,
    .prepare = hc_prepare,
    .prestart = http_prestart,
    .attach = hc_attach,
    .send = hc_send,
    .on_event = hc_on_event,
    .timers = hc_timers,
    .next_deadline = hc_next_deadline,
    .on_finish = hc_on_finish,
    .detach = hc_detach,
    .running = hc_running,
    .sent_ns = pace_sent_ns,
    .summary = hc_summary,
    .write_outputs = http_write_outputs,
};
