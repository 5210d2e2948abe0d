/* clients.c - the closed loop over CoAP (--clients N with coap://): N virtual clients (pace.c
 * says when each issues what), each with its own UDP socket (its own source endpoint), each with
 * at most one request in flight.
 *
 * Why raw sockets and not libcoap sessions: one socket per client is what makes N distinct
 * client endpoints; libcoap walks every session on each coap_io_process (libcoap-notes.md, 3),
 * so 10,000 sessions would cost the GE ~100x per request. Here a client is 32 bytes plus one
 * datagram buffer; its request is the template's prepared datagram (net.c encoded it with
 * libcoap and checked it with libcoap's parser) with the client's MID and the request's token
 * patched in. Responses go through the same CoAP message layer as the open loop (coapx.c,
 * dgram.c: recvmmsg with kernel receive stamps). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "clock.h" /* common/clock.h */
#include "coap_payload.h"
#include "coap_tmpl.h"
#include "coapx.h"
#include "dgram.h"
#include "pace.h"

#define CLIENT_RCVBUF (256 * 1024)

/* prepare() -> attach(): what the main thread set up */
typedef struct {
    uint8_t **bytes; /* per template: the prepared datagram (MID, token patched per request) */
    uint16_t *len;
    const uri_t **uri; /* per template: its URI (its per-request values' slots, coap_tmpl.h) */
    size_t buflen; /* per-client datagram buffer */
    pace_t pace;
} closed_prep_t;
static closed_prep_t P;

typedef struct {
    loop_t *L;
    ge_t *g;
    dgram_rx_t *rx;
    coapx_t *X;
    uint16_t *mid; /* per client */
    uint8_t *buf;  /* clients x P.buflen */
} closed_t;

/* ---- the wire (coapx.h) ---- */
static int send_req(void *ctx, uint32_t idx, int64_t *t) {
    closed_t *C = ctx;
    const ge_t *g = C->g;
    const req_t *r = &g->reqs[idx];
    const endpoint_t *e = &g->eps[r->ep];
    *t = mono_ns();
    return sendto(g->socks[r->sock], C->buf + (size_t)r->sock * P.buflen, r->dgram_len, 0,
                  (const struct sockaddr *)&e->addr, e->addrlen) < 0 ? -1 : 1;
}

static void send_empty(void *ctx, int sock, int ep, const uint8_t m[4],
                       const struct sockaddr_storage *to, socklen_t tolen) {
    (void)ep;
    (void)sendto(((closed_t *)ctx)->g->socks[sock], m, 4, 0, (const struct sockaddr *)to, tolen);
}

/* an empty ACK/RST on a client's socket belongs to its request in flight */
static int64_t req_of_sock(void *ctx, int sock) {
    (void)ctx;
    uint32_t cur = P.pace.c[sock].cur;
    return cur == PACE_NONE ? -1 : (int64_t)cur;
}

static const struct coap_wire CLOSED_WIRE = {send_req, send_empty, req_of_sock};

/* ---- issuing (pace.c calls it for a client whose turn it is) ---- */
static void issue(void *ctx, uint32_t k, req_t *r, uint32_t tmpl) {
    closed_t *C = ctx;
    ge_t *g = C->g;
    uint32_t idx = (uint32_t)(r - g->reqs);
    uint8_t *d = C->buf + (size_t)k * P.buflen;
    memcpy(d, P.bytes[tmpl], P.len[tmpl]);
    d[2] = (uint8_t)(C->mid[k] >> 8);
    d[3] = (uint8_t)C->mid[k];
    token_for(g, idx, d + 4);
    const uri_t *u = P.uri[tmpl];
    if (u->ntv || g->cpl) { /* {{seq}}: the request's row (send order), {{client}}: k
                             * (coap_tmpl.h, coap_payload.h) */
        tv_values_t v = {idx, k, g->http_opt.seed,
                         u->tv_clock || coap_payload_has_clock(g) ? clock_read_ns(CLOCK_REALTIME)
                                                                  : 0};
        coap_tmpl_fill(d, u->tv, u->ntv, &v, TV_ALL);
        coap_payload_fill(g, tmpl, d, &v, TV_ALL);
    }
    r->mid = C->mid[k]++;
    r->dgram_len = P.len[tmpl];
    int64_t t;
    if (send_req(C, idx, &t) > 0) {
        loop_mark_sent(C->L, r, t);
        coapx_sent(C->X, idx, t);
    } else {
        loop_finish(C->L, r, O_ERROR); /* on_finish puts the client back, with a back-off */
    }
}

/* ---- the transport ---- */
static int same_family(const ge_t *g) {
    for (size_t e = 1; e < g->neps; e++)
        if (g->eps[e].addr.ss_family != g->eps[0].addr.ss_family)
            return 0;
    return 1;
}

/* the trace's lines become templates (net_prepare encoded their datagrams); the trace's own
 * sockets make way for one per client; the record table is reserved */
static int closed_prepare(ge_t *g) {
    if (g->obs) {
        fprintf(stderr, "gateway-emulator: --clients with OBSERVE/CANCEL lines is not supported, "
                        "expected GET, PUT, POST or DELETE\n");
        return 2;
    }
    if (!same_family(g)) {
        fprintf(stderr, "gateway-emulator: --clients with both IPv4 and IPv6 targets is not "
                        "supported, expected one address family\n");
        return 2;
    }
    int rc = limits_check_sockets((size_t)g->closed.clients, "--clients");
    if (rc)
        return rc;
    P.bytes = calloc(g->n ? g->n : 1, sizeof *P.bytes);
    P.len = calloc(g->n ? g->n : 1, sizeof *P.len);
    P.uri = calloc(g->n ? g->n : 1, sizeof *P.uri);
    if (!P.bytes || !P.len || !P.uri)
        goto oom;
    size_t maxlen = 16;
    for (size_t i = 0; i < g->n; i++) {
        const req_t *r = &g->reqs[i];
        if (!(P.bytes[i] = malloc(r->dgram_len)))
            goto oom;
        memcpy(P.bytes[i], g->arena + r->dgram_off, r->dgram_len);
        P.len[i] = r->dgram_len;
        P.uri[i] = &g->uris[r->path_id];
        if (P.len[i] > maxlen)
            maxlen = P.len[i];
    }
    P.buflen = (maxlen + 15) & ~(size_t)15;
    /* the trace's sockets and (socket, endpoint) pairs are not used: one socket per client,
     * and an empty ACK/RST is matched by its socket (req_of_sock), never by the pairs */
    net_close(g);
    free(g->socks);
    for (size_t p = 0; p < g->neps * (size_t)g->ports_used; p++)
        g->pairs[p].count = 0;
    g->nsocks = (size_t)g->closed.clients;
    g->ports_used = 1;
    g->socks = malloc(g->nsocks * sizeof *g->socks);
    if (!g->socks)
        goto oom;
    g->rx_stamps = 1;
    int fam = g->eps[0].addr.ss_family;
    for (size_t s = 0; s < g->nsocks; s++)
        g->socks[s] = -1;
    for (size_t s = 0; s < g->nsocks; s++) {
        if ((g->socks[s] = net_open_socket(fam, CLIENT_RCVBUF, &g->rx_stamps)) < 0) {
            fprintf(stderr, "gateway-emulator: --clients %d: cannot open socket %zu: %s\n",
                    g->closed.clients, s, strerror(errno));
            return 1;
        }
    }
    return pace_prepare(&P.pace, g);
oom:
    fprintf(stderr, "gateway-emulator: out of memory preparing %d clients\n", g->closed.clients);
    return 1;
}

static int closed_prestart(ge_t *g) {
    return g->warmup_ns && !ge_stop_signal ? warmup_run(g) : 0;
}

static void closed_detach(void *ts) {
    closed_t *C = ts;
    coapx_free(C->X);
    dgram_rx_free(C->rx);
    pace_detach(&P.pace);
    free(C->mid);
    free(C->buf);
    free(C);
}

static void *closed_attach(loop_t *L, ge_t *g) {
    closed_t *C = calloc(1, sizeof *C);
    if (!C)
        return NULL;
    size_t n = (size_t)g->closed.clients;
    C->L = L;
    C->g = g;
    C->mid = malloc(n * sizeof *C->mid);
    C->buf = calloc(n, P.buflen);
    C->rx = dgram_rx_new(g, loop_clock_map(L));
    C->X = C->rx ? coapx_new(L, g, &CLOSED_WIRE, C) : NULL;
    int ok = C->mid && C->buf && C->X && pace_attach(&P.pace, L) == 0;
    for (size_t k = 0; ok && k < n; k++)
        ok = loop_watch(L, g->socks[k], EPOLLIN, (uint32_t)k) == 0;
    if (!ok) {
        closed_detach(C);
        return NULL;
    }
    for (size_t k = 0; k < n; k++) /* MIDs start at random per client (RFC 7252 4.4) */
        C->mid[k] = (uint16_t)((g->salt >> 16) * 0x9e3779b97f4a7c15ULL * (k + 1) >> 48);
    return C;
}

static int closed_send(void *ts, uint32_t idx, int64_t *t) {
    (void)ts, (void)idx, (void)t;
    return 0; /* no scheduled requests: the clients issue their own */
}

static void on_datagram(void *ctx, int sock, int ep, const uint8_t *d, size_t len,
                        const struct sockaddr_storage *src, socklen_t srclen, int64_t t,
                        int64_t kt) {
    coapx_datagram(((closed_t *)ctx)->X, sock, ep, d, len, src, srclen, t, kt);
}

static void closed_on_event(void *ts, uint32_t tag, uint32_t events) {
    (void)events;
    closed_t *C = ts;
    dgram_drain(C->rx, (int)tag, on_datagram, C);
    if (P.pace.heap_n && P.pace.running) /* a client answered with no think time goes again at once */
        pace_issue_due(&P.pace, mono_ns(), issue, C);
}

static void closed_timers(void *ts, int64_t now) {
    closed_t *C = ts;
    coapx_timers(C->X, now);
    pace_issue_due(&P.pace, now, issue, C);
}

static int64_t closed_next_deadline(const void *ts) {
    const closed_t *C = ts;
    return pace_next_deadline(&P.pace, coapx_next_due(C->X));
}

static int closed_on_finish(void *ts, uint32_t idx, int outcome, int64_t now) {
    (void)ts;
    pace_finished(&P.pace, idx, outcome, now);
    return outcome;
}

static int closed_running(const void *ts) {
    (void)ts;
    return P.pace.running;
}

static void closed_summary(const ge_t *g, FILE *f) {
    pace_summary(g, P.pace.ntmpl, f);
}

static int closed_write_outputs(const ge_t *g) {
    (void)g;
    return 0;
}

const struct transport transport_closed = {
    .name = "closed",
    .prepare = closed_prepare,
    .prestart = closed_prestart,
    .attach = closed_attach,
    .send = closed_send,
    .on_event = closed_on_event,
    .timers = closed_timers,
    .next_deadline = closed_next_deadline,
    .on_finish = closed_on_finish,
    .detach = closed_detach,
    .running = closed_running,
    .sent_ns = pace_sent_ns,
    .summary = closed_summary,
    .write_outputs = closed_write_outputs,
};
