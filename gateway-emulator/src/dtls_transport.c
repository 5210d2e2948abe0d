/* dtls_transport.c - the coaps:// transport: the same CoAP message layer (coapx.c) and datagram
 * reader (dgram.c) as UDP, with every datagram going through the session of its (socket,
 * endpoint): requests, retransmissions, follow-ups and empty ACK/RST are encrypted records,
 * received datagrams are decrypted first. Per-request sessions: a due request starts its own
 * handshake (the ClientHello is its first transmission) and leaves when the session is up. */
#include <stdlib.h>
#include <sys/epoll.h>

#include "clock.h" /* common/clock.h */
#include "coapx.h"
#include "dgram.h"
#include "dtls_int.h"
#include "transport.h"

typedef struct {
    loop_t *L;
    ge_t *g;
    dgram_rx_t *rx;
    coapx_t *X;
    int per_request;
    uint8_t plain[DGRAM_MAX]; /* the decrypted record being handled */
} dtls_tp_t;

/* ---- the wire under the CoAP message layer ---- */
static int wire_send_req(void *ctx, uint32_t idx, int64_t *t) {
    return dtls_send_req(((dtls_tp_t *)ctx)->g, idx, t);
}

static void wire_send_empty(void *ctx, int sock, int ep, const uint8_t m[4],
                            const struct sockaddr_storage *to, socklen_t tolen) {
    (void)to, (void)tolen; /* the session knows its endpoint */
    dtls_send_plain(((dtls_tp_t *)ctx)->g, sock, ep, m, 4);
}

static int64_t wire_req_of_sock(void *ctx, int sock) {
    return dtls_req_of_sock(((dtls_tp_t *)ctx)->g, sock);
}

static const struct coap_wire DTLS_WIRE = {wire_send_req, wire_send_empty, wire_req_of_sock};

/* ---- before the loop ---- */
static int tp_prestart(ge_t *g) {
    /* handshakes (reuse) or DTLS readiness (per-request) before the start */
    if (!ge_stop_signal && dtls_open_sessions(g))
        return 1;
    if (!g->start_at) /* the start follows the handshakes, as it follows the loading */
        g->start_mono = mono_ns() + 100 * NS_PER_MS;
    return 0;
}

static void tp_detach(void *ts) {
    dtls_tp_t *T = ts;
    coapx_free(T->X);
    dgram_rx_free(T->rx);
    free(T);
}

static void *tp_attach(loop_t *L, ge_t *g) {
    dtls_tp_t *T = calloc(1, sizeof *T);
    if (!T)
        return NULL;
    T->L = L;
    T->g = g;
    T->per_request = g->dtls_opt.mode == DTLS_PER_REQUEST;
    T->rx = dgram_rx_new(g, loop_clock_map(L));
    T->X = T->rx ? coapx_new(L, g, &DTLS_WIRE, T) : NULL;
    int ok = T->X != NULL;
    for (size_t s = 0; ok && s < g->nsocks; s++) /* the pairs' sockets and the slots' */
        ok = loop_watch(L, g->socks[s], EPOLLIN, (uint32_t)s) == 0;
    if (!ok) {
        tp_detach(T);
        return NULL;
    }
    return T;
}

/* ---- the loop ---- */
/* reuse -> encrypt into the pair's session and send; per-request -> start the request's own
 * session (its ClientHello is the exchange's first transmission, sent_ns; the request itself
 * leaves when the handshake is done, session_ready). The BIO reads *t right before sendto(). */
static int tp_send(void *ts, uint32_t idx, int64_t *t) {
    dtls_tp_t *T = ts;
    if (T->per_request)
        return dtls_start_req(T->g, idx, t);
    int rc = dtls_send_req(T->g, idx, t);
    if (rc > 0)
        coapx_sent(T->X, idx, *t);
    return rc;
}

/* per-request: the session of request idx is up, send its first application record */
static void session_ready(dtls_tp_t *T, int64_t idx) {
    ge_t *g = T->g;
    if (idx < 0 || (g->reqs[idx].flags & RF_DONE))
        return;
    int64_t t;
    if (dtls_send_req(g, (uint32_t)idx, &t) <= 0) {
        loop_finish(T->L, &g->reqs[idx], O_ERROR);
        return;
    }
    coapx_sent(T->X, (uint32_t)idx, t);
}

/* a datagram: the records of its session, decrypted; plaintext goes to the CoAP layer */
static void on_datagram(void *ctx, int sock, int ep, const uint8_t *d, size_t len,
                        const struct sockaddr_storage *src, socklen_t srclen, int64_t t,
                        int64_t kt) {
    dtls_tp_t *T = ctx;
    ge_t *g = T->g;
    int s = dtls_session_of(g, sock, ep);
    if (s < 0)
        return;
    for (int n = dtls_input(g, s, d, len, T->plain, sizeof T->plain, kt ? kt : t);;
         n = dtls_input(g, s, NULL, 0, T->plain, sizeof T->plain, kt ? kt : t)) {
        if (n > 0) {
            coapx_datagram(T->X, sock, ep, T->plain, (size_t)n, src, srclen, t, kt);
            continue;
        }
        if (n == DTLS_READY)
            session_ready(T, dtls_waiting(g, s));
        else if (n == DTLS_FAILED && dtls_waiting(g, s) >= 0 &&
                 !(g->reqs[dtls_waiting(g, s)].flags & RF_DONE))
            loop_finish(T->L, &g->reqs[dtls_waiting(g, s)], O_ERROR);
        return;
    }
}

static void tp_on_event(void *ts, uint32_t tag, uint32_t events) {
    (void)events;
    dtls_tp_t *T = ts;
    dgram_drain(T->rx, (int)tag, on_datagram, T);
}

static void tp_timers(void *ts, int64_t now) {
    dtls_tp_t *T = ts;
    coapx_timers(T->X, now);
    dtls_timers(T->g, now);
}

static int64_t tp_next_deadline(const void *ts) {
    const dtls_tp_t *T = ts;
    int64_t a = coapx_next_due(T->X), b = dtls_next_timer(T->g);
    return a < b ? a : b;
}

static int tp_on_finish(void *ts, uint32_t idx, int outcome, int64_t now) {
    return dtls_on_finish(((dtls_tp_t *)ts)->g, idx, outcome, now);
}

const struct transport transport_dtls = {
    .name = "dtls",
    .prepare = dtls_prepare,
    .prestart = tp_prestart,
    .attach = tp_attach,
    .send = tp_send,
    .on_event = tp_on_event,
    .timers = tp_timers,
    .next_deadline = tp_next_deadline,
    .on_finish = tp_on_finish,
    .detach = tp_detach,
    .sent_ns = dtls_app_sent_ns,
    .summary = dtls_summary,
    .write_outputs = dtls_write,
};
